/*
 * flash/ - fused attention in O(T) memory: softmax(scale q k^T + mask) v
 * without a T x S score matrix, forward and backward (issue 10).
 *
 * One kernel family in four files, concatenated in name order into one
 * program (cmake/embed_kernels.cmake; runtime/program.c from a kernel
 * folder): 0-shared.cl (this: layouts, masks, the vector types and helpers),
 * 1-forward.cl (the chunk products, attn_flash_fwd), 2-backward.cl
 * (attn_flash_bwd_dq, attn_flash_bwd_dkv, attn_flash_vw) and 3-group.cl
 * (the work-group shape).
 *
 * Layouts: q, k and v are read in place from their projections' outputs
 * (rows of q_stride / kv_stride floats, head h at column h*HS: q, k or v
 * inside a fused [B, T, 3C] qkv, or a cross-attention's [B, S, 2C]); key
 * and value row s of (b, h) is at b*kv_bstride + (h / kv_group)*kv_hstride
 * + s*kv_stride (kv_group query heads share a K/V head: grouped-query
 * attention; 1 for multi-head), kv_bstride = S*kv_stride and kv_hstride =
 * HS for those layouts; a KV cache [B, NH / kv_group, Tmax, HS] has HS,
 * (NH / kv_group)*Tmax*HS, Tmax*HS; y is
 * written merged, [B, T, y_stride]; lse [B*NH, T] holds each row's log-sum-
 * exp (m + log l), from which the backward recomputes the probabilities.
 *
 * Masks, all regenerated inside the kernels: causal (query t, at absolute
 * position t + S - T, sees keys s <= t + S - T: the queries are the last T
 * of S positions, as in a prefill); a sliding window (window W > 0 with
 * causal: also s > t + S - T - W, the W most recent keys); a padding keep
 * mask (int32, row b at b*keep_stride, nonzero = attend), or with has_keep
 * 2 the rows' document segments (packing, T == S: query t sees key s only
 * where keep[s] == keep[t]); ALiBi (bias
 * -slope_h |t + S - T - s|, clf_alibi_slope). A row that sees nothing gives
 * y = 0 and lse = -inf. Attention dropout (drop_thr != 0) keeps element
 * (bh, t, s) iff word i % 4 of Philox(i / 4, stream; seed) >= drop_thr with
 * i = (bh*T + t)*S + s: the mask the dropout kernel in random.cl draws over
 * a materialised [B*NH, T, S] probability tensor, bit for bit, scaled by
 * drop_scale; the normaliser l is the sum of the undropped probabilities.
 *
 * A work-item takes FA_VW query rows (forward, dq pass) or FA_VW keys (dk/dv
 * pass) and walks the other side in chunks of up to FA_CH (128) in two
 * products, each shaped like a GEMM micro-kernel. Scores (and dp) run with
 * lanes across the work-item's own rows, kept transposed in private memory
 * (loaded through in-register transposes), the other side's rows read once
 * per chunk as broadcast scalars; the chunk's probabilities (or ds) go to a
 * private buffer. The output product then runs with vectors along the head
 * dimension: a few rows x a few vectors of the accumulator stay in
 * registers over the whole chunk, v / k / q / dy rows read as whole
 * vectors, the weights broadcast from the buffer; the accumulator's rows
 * live in private memory between chunks (rescaled by the online softmax in
 * the forward) and are stored as whole rows. Exponentials are clf_exp_nonpos
 * (common.cl: FMAs and integer operations, so they stay in vector registers;
 * every argument is a score minus a running maximum or the log-sum-exp,
 * <= 0 up to rounding). FA_VW is the device's preferred float
 * vector width where work-groups run item by item (CPUs: 16 with AVX-512,
 * 8 with AVX2), and 1 elsewhere (one row per work-item, the shape for
 * devices that run work-items in lockstep). Hosts may set FA_VW through
 * clf_program_set_defines("flash", ...) (the tests run both shapes on one
 * device).
 *
 *   attn_flash_fwd      one work-item per FA_VW query rows of one (b, h):
 *                       key chunks (scores in tiles of FA_BC), online
 *                       softmax across chunks, keys outside the causal /
 *                       window band skipped
 *   attn_flash_bwd_dq   the same rows: dq = scale sum_s ds k_s, and D = dy.y
 *                       into dsum for the next pass
 *   attn_flash_bwd_dkv  one work-item per FA_VW keys: dk = scale sum_t ds q_t,
 *                       dv = sum_t p dy_t, over the queries that see them,
 *                       FA_BQ queries at a time
 * with ds = p (dp - D), dp = dy.v (times the dropout mask). Every output is
 * written once by one work-item, in a fixed order: deterministic, no atomics;
 * dq, dk and dv are overwritten (keys nobody sees get 0).
 *
 * Storage (FA_T): q, k, v, y, dy, dq, dk and dv are float32, or all bf16 or
 * all f16 in the variants flash@bf16 and flash@f16 (train.precision);
 * loads widen and stores round, the arithmetic and lse / dsum staying
 * float32, so a 16-bit variant's outputs are the float32 kernels' on the
 * same values, rounded once.
 *
 * The work-group (tile) form for devices that run items in lockstep is in
 * 3-group.cl. Not here: decoding against a KV cache (attention.cl's
 * attn_decode).
 */

#ifndef FA_VW
#if CLF_SERIAL_GROUPS && CLF_PREF_VEC_FLOAT >= 16
#define FA_VW 16
#elif CLF_SERIAL_GROUPS && CLF_PREF_VEC_FLOAT >= 8
#define FA_VW 8
#elif CLF_SERIAL_GROUPS
#define FA_VW 4
#else
#define FA_VW 1
#endif
#endif

/* FA_HS_MAX, the head size limit of the passes' private arrays, and FA_GBC:
 * runtime/contract.h. */
#define FA_BC 8 /* keys per tile (query-row passes) */
#define FA_BQ 4 /* queries per step (dk/dv pass) */

#if FA_VW == 16
typedef float16 faf;
typedef int16 fai;
typedef uint16 fau;
typedef ulong16 fal;
#define FA_IOTA ((int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#define FA_LOAD(i, p) vload16(i, p)
#define FA_STORE(x, i, p) vstore16(x, i, p)
#define FA_U(x) convert_uint16(x)
#define FA_UL(x) convert_ulong16(x)
#define FA_F(x) convert_float16(x)
#define FA_I(x) convert_int16(x)
#define FA_EXP(x) clf_exp_nonpos16(x)
#elif FA_VW == 8
typedef float8 faf;
typedef int8 fai;
typedef uint8 fau;
typedef ulong8 fal;
#define FA_IOTA ((int8)(0, 1, 2, 3, 4, 5, 6, 7))
#define FA_LOAD(i, p) vload8(i, p)
#define FA_STORE(x, i, p) vstore8(x, i, p)
#define FA_U(x) convert_uint8(x)
#define FA_UL(x) convert_ulong8(x)
#define FA_F(x) convert_float8(x)
#define FA_I(x) convert_int8(x)
#define FA_EXP(x) clf_exp_nonpos8(x)
#elif FA_VW == 4
typedef float4 faf;
typedef int4 fai;
typedef uint4 fau;
typedef ulong4 fal;
#define FA_IOTA ((int4)(0, 1, 2, 3))
#define FA_LOAD(i, p) vload4(i, p)
#define FA_STORE(x, i, p) vstore4(x, i, p)
#define FA_U(x) convert_uint4(x)
#define FA_UL(x) convert_ulong4(x)
#define FA_F(x) convert_float4(x)
#define FA_I(x) convert_int4(x)
#define FA_EXP(x) clf_exp_nonpos4(x)
#elif FA_VW == 1
typedef float faf;
typedef int fai;
typedef uint fau;
typedef ulong fal;
#define FA_IOTA 0
#define FA_LOAD(i, p) ((p)[i])
#define FA_STORE(x, i, p) ((p)[i] = (x))
#define FA_U(x) ((uint)(x))
#define FA_UL(x) ((ulong)(x))
#define FA_F(x) ((float)(x))
#define FA_I(x) ((int)(x))
#define FA_EXP(x) clf_exp_nonpos(x)
#else
#error "FA_VW must be 1, 4, 8 or 16"
#endif

/* Storage of q, k, v, y and their gradients (FA_T: 0 float32, 1 bf16, 2 f16;
 * the host builds the variants flash@bf16 and flash@f16 with it); lse and
 * dsum stay float32. Loads widen and stores round (common.cl's formats):
 * all arithmetic is float32 whatever the storage. */
#ifndef FA_T
#define FA_T 0
#endif
#if FA_T == 1
typedef ushort fa_st;
#define FA_LD(p, i) as_float((uint)(p)[i] << 16)
#define FA_SV(p, i, x) ((p)[i] = clf_f32_to_bf16(x))
#elif FA_T == 2
typedef half fa_st;
#define FA_LD(p, i) vload_half((i), (p))
#define FA_SV(p, i, x) vstore_half_rte((x), (i), (p))
#else
typedef float fa_st;
#define FA_LD(p, i) ((p)[i])
#define FA_SV(p, i, x) ((p)[i] = (x))
#endif

/* FA_VW consecutive elements from element i of p (a row, along d) as one
 * faf, widened; and stored, rounded. */
#if FA_VW == 1
#define FA_LDV(p, i) clf_load_t((const __global float *)(p), FA_T, (i))
#define FA_SVV(x, p, i) clf_store_t((__global float *)(p), FA_T, (i), (x))
#else
#define FA_LDV(p, i) CLF_CAT(CLF_CAT(clf_load, FA_VW), _t)((const __global float *)(p), FA_T, (i))
#define FA_SVV(x, p, i)                                                                           \
    CLF_CAT(CLF_CAT(clf_store, FA_VW), _t)((x), (__global float *)(p), FA_T, (i))
#endif

/* A lane mask from a condition that is the same in every lane (vector
 * comparisons give -1 for true, select() tests the sign bit). */
#define FA_ALL(c) ((fai)((c) ? -1 : 0))

/* Philox4x32-10 (common.cl) on FA_VW counters at once: counter (g lo, g
 * hi, stream lo, stream hi), key (key0, key1). */
static void fa_philox(fal g, uint st0, uint st1, uint key0, uint key1, fau *w0, fau *w1,
                      fau *w2, fau *w3)
{
    fau c0 = FA_U(g), c1 = FA_U(g >> 32), c2 = (fau)(st0), c3 = (fau)(st1);
    uint k0 = key0, k1 = key1;
    CLF_PHILOX10(c0, c1, c2, c3, k0, k1, fal, FA_UL, FA_U);
    *w0 = c0;
    *w1 = c1;
    *w2 = c2;
    *w3 = c3;
}

/* Word i % 4 of Philox(i / 4) on one counter. */
static uint fa_philox_word(ulong i, uint st0, uint st1, uint key0, uint key1)
{
    const ulong g = i >> 2;
    const uint4 w = clf_philox4x32_10((uint4)((uint)g, (uint)(g >> 32), st0, st1),
                                      (uint2)(key0, key1));
    /* select(), not a switch or ?: chain: LLVM turns those into a lookup
     * table that Oclgrind 21.10 reads wrongly */
    const uint o = (uint)(i & 3);
    uint r = select(w.x, w.y, o == 1u);
    r = select(r, w.z, o == 2u);
    return select(r, w.w, o == 3u);
}

/* Word o (0..3, per lane) of four words. */
static inline fau fa_pick4(fau w0, fau w1, fau w2, fau w3, fai o)
{
    fau r = w0;
    r = select(r, w1, o == 1);
    r = select(r, w2, o == 2);
    r = select(r, w3, o == 3);
    return r;
}

/* Dropout is on when it drops or scales anything (p so small that no word
 * falls below the threshold still scales by 1/(1-p), as random.cl does). */
#define FA_DROPOUT (drop_thr != 0u || drop_scale != 1.0f)

/* The mask arguments every pass takes, after its tensors. */
#define FA_MASK_PARAMS                                                                            \
    __global const int *keep, ulong keep_off, ulong keep_stride, int has_keep, uint B, uint NH,   \
        uint kv_group, uint T, uint S, uint HS, int causal, uint window, int alibi, float scale,   \
        uint drop_thr, float drop_scale, uint seed0, uint seed1, uint stream0, uint stream1,      \
        __global const float *rb, ulong rb_off, uint rb_w, __global const float *rqr,      \
        ulong rqr_off, uint rqr_w, uint rel_k, uint glob, uint stride, __global const int *sp,    \
        ulong sp_off, uint sp_bs, uint sp_R

/* Transpose FA_VW vectors of FA_VW lanes in place (m[i] lane j <-> m[j]
 * lane i): log2(FA_VW) stages, stage s swapping the off-diagonal s x s
 * blocks of every 2s x 2s block with two shuffles per pair of vectors. (A
 * plain element loop was compiled by PoCL into scatter stores, which took a
 * quarter of the dq pass on an AMD EPYC.) */
static inline void fa_transpose(faf *m)
{
#if FA_VW > 1
    const fau io = FA_U(FA_IOTA);
    #pragma unroll
    for (uint s = 1; s < FA_VW; s <<= 1) {
        const fai up = (io & s) != (fau)(0);
        const fau lo = select(io, io + (fau)(FA_VW - s), up);
        const fau hi = select(io + (fau)(s), io + (fau)(FA_VW), up);
        #pragma unroll
        for (uint i = 0; i < FA_VW; i++)
            if (!(i & s)) {
                const faf a = m[i], b = m[i + s];
                m[i] = shuffle2(a, b, lo);
                m[i + s] = shuffle2(a, b, hi);
            }
    }
#else
    (void)m;
#endif
}

/* Load FA_VW rows (row0 + r, clamped to the last of n) of HS floats, row
 * stride `stride`, transposed into out[d*FA_VW + r], times mul: whole
 * FA_VW x FA_VW blocks through registers, the columns past them one by one. */
static void fa_load_t(faf *outv, __global const fa_st *base, ulong stride, uint n, uint HS,
                      float mul)
{
    uint d0 = 0;
#if FA_VW > 1
    for (; d0 + FA_VW <= HS; d0 += FA_VW) {
        faf m[FA_VW];
        #pragma unroll
        for (uint r = 0; r < FA_VW; r++)
            m[r] = FA_LDV(base + (ulong)min(r, n - 1) * stride, d0) * mul;
        fa_transpose(m);
        #pragma unroll
        for (uint i = 0; i < FA_VW; i++)
            outv[d0 + i] = m[i];
    }
#endif
    float *out = (float *)outv;
    for (uint r = 0; r < FA_VW; r++) {
        __global const fa_st *p = base + (ulong)min(r, n - 1) * stride;
        for (uint d = d0; d < HS; d++)
            out[d * FA_VW + r] = FA_LD(p, d) * mul;
    }
}

/* Shaw's relative positions: lane l (query row t0 + l, at absolute tq0 +
 * l) reads its row of qr (rqr_w = 2 rel_k + 1 entries: scale q.r_c) at c =
 * clamp(s - tq0 - l, -rel_k, rel_k) + rel_k; rows past nt repeat the last. */
static inline faf fa_qr_rows(__global const float *qrb, uint rqr_w, uint rel_k, int d0, uint nt)
{
    float v[FA_VW];
    for (uint l = 0; l < FA_VW; l++) {
        const uint r = min(l, nt - 1);
        v[l] = qrb[(ulong)r * rqr_w + (ulong)(clamp(d0 - (int)r, -(int)rel_k, (int)rel_k) + (int)rel_k)];
    }
    return FA_LOAD(0, v);
}

/* The key range [lo, hi) that query rows [t0, t0 + nt) may see. */
static void fa_key_range(int *lo, int *hi, uint t0, uint nt, uint T, uint S, int causal,
                         uint window)
{
    const int off = (int)S - (int)T;
    *lo = 0;
    *hi = (int)S;
    if (causal) {
        *hi = min((int)S, (int)(t0 + nt - 1) + off + 1);
        if (window)
            *lo = max(0, (int)t0 + off - (int)window + 1);
    }
}

/* Packed documents (has_keep 2): the segments of n rows from absolute
 * position p0, one per lane (rows past n repeat the last); 0 otherwise. */
static inline fai fa_segs(__global const int *kp, int has_keep, int p0, uint n)
{
    int v[FA_VW];
    for (uint l = 0; l < FA_VW; l++)
        v[l] = has_keep == 2 ? kp[p0 + (int)min(l, n - 1)] : 0;
    return FA_LOAD(0, v);
}

/* Sparse patterns (sp_bs != 0): beyond the window band, query tq also
 * sees key s < glob, s with (tq - s) % stride == 0, and the keys of its
 * block's random blocks (blocks of sp_bs positions; spt = sp + sp_off,
 * [blocks, sp_R] int32: row qb lists its random key blocks, -1 = none).
 * Whether key block kb is one of query block qb's random blocks: */
static inline int fa_rnd(__global const int *spt, uint R, int qb, int kb)
{
    int in = 0;
    for (uint r = 0; r < R; r++)
        in |= spt[qb * (int)R + (int)r] == kb;
    return in;
}

/* Whether some query of block qb sees some key of block kb (causal): the
 * block pairs the kernels visit, all others skipped. Distances tq - s of
 * the pair run over [dmin, dmax]. */
static inline int fa_sp_visit(int qb, int kb, uint bs, uint window, uint glob, uint stride,
                              __global const int *spt, uint R)
{
    if (kb > qb)
        return 0;
    const int klo = kb * (int)bs, dmin = max(0, (qb - kb - 1) * (int)bs + 1);
    const int dmax = (qb - kb + 1) * (int)bs - 1;
    return dmin < (int)window || klo < (int)glob ||
           (stride && dmax / (int)stride * (int)stride >= dmin) || fa_rnd(spt, R, qb, kb);
}

/* A query-row pass's sparse-pattern view of its rows [t0, t0 + nt): the
 * random-block table spt, the chunk step (one key block, or FA_CH keys
 * without sparse patterns), the rows' query blocks qb0..qb1 (lanes from
 * qsplit in qb1) and absolute positions tq0..tq1. */
#define FA_SP_ROWS                                                                                 \
    __global const int *spt = sp + sp_off;                                                         \
    const int step = sp_bs ? (int)sp_bs : FA_CH;                                                   \
    const int qb0 = sp_bs ? ((int)t0 + off) / (int)sp_bs : 0;                                      \
    const int qb1 = sp_bs ? ((int)(t0 + nt - 1) + off) / (int)sp_bs : 0;                           \
    const int qsplit = qb1 * (int)sp_bs, tq0 = (int)t0 + off, tq1 = (int)(t0 + nt - 1) + off

/* A query-row pass's chunk of keys from c0 (one key block where sp_bs != 0)
 * against rows in query blocks qb0..qb1: 0 if it is skipped, else 1 with
 * *r0, *r1 whether it is a random block of qb0's, qb1's; dense: 1, 0, 0. */
static inline int fa_sp_chunk(int c0, uint sp_bs, int qb0, int qb1, uint window, uint glob,
                              uint stride, __global const int *spt, uint R, int *r0, int *r1)
{
    *r0 = *r1 = 0;
    if (!sp_bs)
        return 1;
    const int kb = c0 / (int)sp_bs;
    if (!fa_sp_visit(qb0, kb, sp_bs, window, glob, stride, spt, R) &&
        !fa_sp_visit(qb1, kb, sp_bs, window, glob, stride, spt, R))
        return 0;
    *r0 = fa_rnd(spt, R, qb0, kb);
    *r1 = fa_rnd(spt, R, qb1, kb);
    return 1;
}

/* One query, one key. */
static inline int fa_sparse1(int tq, int s, uint glob, uint stride, __global const int *spt,
                             uint bs, uint R)
{
    return s < (int)glob || (stride && (tq - s) % (int)stride == 0) ||
           fa_rnd(spt, R, tq / (int)bs, s / (int)bs);
}

/* A tile of keys [s0, s1] against query rows [tq0, tq1] (r: the keys'
 * block is a random block of some row's): whether some row may see some
 * key (0: the tile is skipped), and in *st whether the stride can hit one
 * (the distances tq - s of the tile, [dmin, dmax], hold a multiple). */
static inline int fa_sp_tile(int tq0, int tq1, int s0, int s1, uint window, uint glob,
                             uint stride, int r, int *st)
{
    const int dmin = max(0, tq0 - s1), dmax = tq1 - s0;
    *st = stride && dmax >= 0 && dmax / (int)stride * (int)stride >= dmin;
    return dmax >= 0 && (dmin < (int)window || s0 < (int)glob || r || *st);
}

/* Lanes of queries tq and one key s whose block is a random block of the
 * lanes below qsplit where r0, of those from qsplit where r1; st: the
 * stride may hit (fa_sp_tile). */
static inline fai fa_sparse_rows(fai tq, int s, uint glob, uint stride, int st, int r0, int r1,
                                 int qsplit)
{
    fai ok = FA_ALL(s < (int)glob);
    if (st)
        ok |= ((tq - (fai)(s)) % (fai)((int)stride)) == (fai)(0);
    return ok | select(FA_ALL(r0), FA_ALL(r1), tq >= (fai)(qsplit));
}

/* Which lanes (absolute query positions tq, in segments qseg) see key s;
 * the same key for all lanes. in_tile: the key is inside the tile (not a
 * clamped repeat). With sparse patterns (sp_bs), the window band or them. */
static inline fai fa_visible_rows(fai tq, fai qseg, int s, int in_tile, __global const int *kp,
                                  int has_keep, int causal, uint window, uint glob, uint stride,
                                  uint sp_bs, int st, int r0, int r1, int qsplit)
{
    fai ok = FA_ALL(in_tile && (!has_keep || kp[s] != 0));
    if (has_keep == 2 && in_tile)
        ok &= (fai)(kp[s]) == qseg;
    if (causal)
        ok &= (fai)(s) <= tq;
    if (window && sp_bs && in_tile)
        ok &= ((fai)(s + (int)window) > tq) |
              fa_sparse_rows(tq, s, glob, stride, st, r0, r1, qsplit);
    else if (window)
        ok &= (fai)(s + (int)window) > tq;
    return ok;
}

/* Tile dropout for the query-row passes: lanes are rows with element index
 * i0 = (bh*T + t)*S + s0 at key s0; fills keepw[c] (c < FA_BC) with the
 * lanes that keep key s0 + c. Three Philox calls cover the 8..11 words a
 * tile of 8 keys spans from any i0 % 4. */
static void fa_drop_rows(fai *keepw, fal i0, uint thr, uint seed0, uint seed1, uint st0, uint st1)
{
    fau w[12];
    const fal g = i0 >> 2;
    const fai o = FA_I(i0 & (ulong)3);
    fa_philox(g, st0, st1, seed0, seed1, &w[0], &w[1], &w[2], &w[3]);
    fa_philox(g + (ulong)1, st0, st1, seed0, seed1, &w[4], &w[5], &w[6], &w[7]);
    fa_philox(g + (ulong)2, st0, st1, seed0, seed1, &w[8], &w[9], &w[10], &w[11]);
    #pragma unroll
    for (int c = 0; c < FA_BC; c++)
        keepw[c] = fa_pick4(w[c], w[c + 1], w[c + 2], w[c + 3], o) >= (fau)(thr);
}
