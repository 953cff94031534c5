/*
 * flash.cl - fused attention in O(T) memory: softmax(scale q k^T + mask) v
 * without a T x S score matrix, forward and backward (issue 10).
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
 * The work-group (tile) form for devices that run items in lockstep is at
 * the end of this file. Not here: decoding against a KV cache
 * (attention.cl's attn_decode).
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

/* FA_HS_MAX, the head size limit of the private arrays below, and FA_GBC:
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

/* ---- the chunk products -------------------------------------------------------
 * Each pass first computes a chunk of up to FA_CH scores (or their gradients)
 * with lanes across its own rows, as above, into a private buffer w (key or
 * query j of the chunk at w[j], lane r = row r), then multiplies it into a
 * row-major private accumulator out[r * HS + d] (r < FA_VW) against FA_CH
 * rows of X (values, keys, queries or output gradients, row stride xs):
 *     out[r][d] = sum_j w[j][r] X[j][d]  (+ out[r][d] * rs[r] as init says).
 * Here the vectors run along d: FA_PR rows x NV vectors of FA_VW columns stay
 * in registers over the whole chunk, each X row is read once per FA_PR rows
 * as whole vectors and each weight broadcast from private memory, the shape
 * of a GEMM micro-kernel (NV up to FA_PN, then 2, 1 and single columns for a
 * head size that is not a multiple of FA_VW). */
#define FA_CH 128 /* keys (queries) per chunk; a multiple of FA_BC and FA_BQ */
#if FA_VW >= 4
#define FA_PR 4
#else
#define FA_PR FA_VW
#endif
#if FA_VW >= 16 || FA_VW == 1
#define FA_PN 4
#else
#define FA_PN 2
#endif

/* fa_chunk_acc's init: 0 out = the sum; 1 out += the sum; 2 out = out * rs[r] + the sum. */
#define FA_ACC_GROUP(NV)                                                                          \
    for (; d0 + (NV) * FA_VW <= HS; d0 += (NV) * FA_VW) {                                         \
        faf acc[FA_PR][NV];                                                                       \
        _Pragma("unroll") for (int r = 0; r < FA_PR; r++)                                        \
            _Pragma("unroll") for (int v = 0; v < (NV); v++)                                     \
        {                                                                                         \
            float *o = out + (r0 + r) * HS + d0 + v * FA_VW;                                      \
            acc[r][v] = init == 0   ? (faf)(0.0f)                                                 \
                        : init == 1 ? FA_LOAD(0, o)                                               \
                                    : FA_LOAD(0, o) * rs[r0 + r];                                 \
        }                                                                                         \
        __global const fa_st *x = xb + d0;                                                        \
        for (uint j = 0; j < n; j++, x += xs) {                                                   \
            faf xv[NV];                                                                           \
            _Pragma("unroll") for (int v = 0; v < (NV); v++) xv[v] = FA_LDV(x, v * FA_VW);       \
            _Pragma("unroll") for (int r = 0; r < FA_PR; r++)                                    \
            {                                                                                     \
                const faf wr = (faf)(w[j * FA_VW + r0 + r]);                                      \
                _Pragma("unroll") for (int v = 0; v < (NV); v++) acc[r][v] =                     \
                    CLF_FMA(wr, xv[v], acc[r][v]);                                                    \
            }                                                                                     \
        }                                                                                         \
        _Pragma("unroll") for (int r = 0; r < FA_PR; r++)                                        \
            _Pragma("unroll") for (int v = 0; v < (NV); v++)                                     \
                FA_STORE(acc[r][v], 0, out + (r0 + r) * HS + d0 + v * FA_VW);                    \
    }

static void fa_chunk_acc(float *out, const faf *wb, __global const fa_st *xb, ulong xs, uint n,
                         uint HS, int init, const float *rs)
{
    const float *w = (const float *)wb;
    for (uint r0 = 0; r0 < FA_VW; r0 += FA_PR) {
        uint d0 = 0;
#if FA_PN >= 4
        FA_ACC_GROUP(4)
#endif
#if FA_VW > 1
        FA_ACC_GROUP(2)
        FA_ACC_GROUP(1)
#endif
        for (; d0 < HS; d0++) /* columns past the last whole vector */
            for (uint r = r0; r < r0 + FA_PR; r++) {
                const float o = init == 0 ? 0.0f : out[r * HS + d0];
                float a = init == 2 ? o * rs[r] : o;
                for (uint j = 0; j < n; j++)
                    a = CLF_FMA(w[j * FA_VW + r], FA_LD(xb + j * xs, d0), a);
                out[r * HS + d0] = a;
            }
    }
}

/* Store rows r < n of a row-major accumulator, times s and (unless mul is
 * NULL) mul[r], as rows of dst (row stride ds), vectors along d. */
static void fa_rows_store(__global fa_st *dst, ulong ds, const float *acc, uint n, uint HS,
                          const float *mul, float s)
{
    for (uint r = 0; r < n; r++) {
        __global fa_st *o = dst + (ulong)r * ds;
        const float *a = acc + r * HS;
        const float f = mul != NULL ? mul[r] * s : s;
        uint d = 0;
#if FA_VW > 1
        for (; d + FA_VW <= HS; d += FA_VW)
            FA_SVV(FA_LOAD(0, a + d) * f, o, d);
#endif
        for (; d < HS; d++)
            FA_SV(o, d, a[d] * f);
    }
}

/* ---- forward ---- */

__kernel void attn_flash_fwd(__global fa_st *y, ulong y_off, ulong y_stride, __global float *lse,
                             ulong lse_off, __global const fa_st *q, ulong q_off, ulong q_stride,
                             __global const fa_st *k, ulong k_off, __global const fa_st *v,
                             ulong v_off, ulong kv_stride, ulong kv_bstride, ulong kv_hstride,
                             FA_MASK_PARAMS)
{
    const uint nblk = (T + FA_VW - 1) / FA_VW;
    const ulong gid = get_global_id(0);
    if (gid >= (ulong)B * NH * nblk)
        return;
    const uint bh = (uint)(gid / nblk), h = bh % NH, b = bh / NH;
    const uint t0 = (uint)(gid - (ulong)bh * nblk) * FA_VW, nt = min((uint)FA_VW, T - t0);
    const int off = (int)S - (int)T;
    __global const fa_st *kb = k + k_off + (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride;
    __global const fa_st *vb = v + v_off + (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride;
    __global const int *kp = keep + keep_off + (ulong)b * keep_stride;

    faf qt[FA_HS_MAX], sb[FA_CH]; /* vector-typed: aligned */
    float ya[FA_VW * FA_HS_MAX];  /* y's rows, unnormalised */
    fa_load_t(qt, q + q_off + ((ulong)b * T + t0) * q_stride + (ulong)h * HS, q_stride, nt, HS,
              scale);
    const fai tq = (fai)((int)t0 + off) + FA_IOTA; /* the lanes' absolute positions */
    const fai qseg = fa_segs(kp, has_keep, (int)t0 + off, nt);
    const float slope = alibi ? clf_alibi_slope(h, NH) : 0.0f;
    __global const float *rbf = rb + rb_off + (ulong)h * 2 * rb_w; /* relative bias by t - s */
    __global const float *qrb = rqr + rqr_off + ((ulong)bh * T + t0) * rqr_w; /* the rows' q.r */
    const fal irow = ((fal)((ulong)bh * T + t0) + FA_UL(FA_IOTA)) * (ulong)S;
    int lo, hi;
    fa_key_range(&lo, &hi, t0, nt, T, S, causal, sp_bs ? 0u : window);
    FA_SP_ROWS;

    faf m = (faf)(CLF_NEG_BIG), l = (faf)(0.0f);
    int init = 0;
    for (int c0 = lo; c0 < hi; c0 += step) {
        const int ce = min(hi, c0 + step);
        int r0, r1;
        if (!fa_sp_chunk(c0, sp_bs, qb0, qb1, window, glob, stride, spt, sp_R, &r0, &r1))
            continue;
        /* the chunk's scores (-inf where not seen) and their maximum */
        faf mt = m;
        for (int s0 = c0; s0 < ce; s0 += FA_BC) {
            const int nc = min(FA_BC, ce - s0);
            int st = 0;
            if (sp_bs && !fa_sp_tile(tq0, tq1, s0, s0 + nc - 1, window, glob, stride, r0 | r1,
                                     &st)) { /* no row sees a key of the tile */
                for (int c = 0; c < FA_BC; c++)
                    sb[s0 - c0 + c] = (faf)(-INFINITY);
                continue;
            }
            __global const fa_st *kr[FA_BC];
            faf sc[FA_BC];
            #pragma unroll
            for (int c = 0; c < FA_BC; c++) {
                kr[c] = kb + (ulong)(s0 + min(c, nc - 1)) * kv_stride;
                sc[c] = (faf)(0.0f);
            }
            for (uint d = 0; d < HS; d++) {
                const faf qd = qt[d];
                #pragma unroll
                for (int c = 0; c < FA_BC; c++)
                    sc[c] += qd * FA_LD(kr[c], d);
            }
            #pragma unroll
            for (int c = 0; c < FA_BC; c++) {
                const fai vis = fa_visible_rows(tq, qseg, s0 + c, c < nc, kp, has_keep, causal,
                                                window, glob, stride, sp_bs, st, r0, r1, qsplit);
                if (alibi)
                    sc[c] -= slope * FA_F(abs(tq - (fai)(s0 + c)));
                if (rb_w && c < nc)
                    sc[c] += FA_LOAD(0, rbf + ((int)t0 - (s0 + c) + (int)S - 1));
                if (rqr_w)
                    sc[c] += fa_qr_rows(qrb, rqr_w, rel_k, s0 + c - ((int)t0 + off), nt);
                sc[c] = select((faf)(-INFINITY), sc[c], vis);
                mt = fmax(mt, sc[c]);
                sb[s0 - c0 + c] = sc[c];
            }
        }
        /* probabilities against the new maximum; l sums them undropped */
        const faf corr = FA_EXP(m - mt);
        l *= corr;
        for (int s0 = c0; s0 < ce; s0 += FA_BC) {
            fai kw[FA_BC];
            if (FA_DROPOUT)
                fa_drop_rows(kw, irow + (ulong)s0, drop_thr, seed0, seed1, stream0, stream1);
            #pragma unroll
            for (int c = 0; c < FA_BC; c++) {
                const int j = s0 - c0 + c;
                faf p = select((faf)(0.0f), FA_EXP(sb[j] - mt), sb[j] > (faf)(-INFINITY));
                l += p;
                if (FA_DROPOUT)
                    p = select((faf)(0.0f), p * drop_scale, kw[c]);
                sb[j] = p;
            }
        }
        float cv[FA_VW];
        FA_STORE(corr, 0, cv);
        fa_chunk_acc(ya, sb, vb + (ulong)c0 * kv_stride, kv_stride, (uint)(ce - c0), HS, init, cv);
        init = 2;
        m = mt;
    }

    float mv[FA_VW], lv[FA_VW], inv[FA_VW];
    FA_STORE(m, 0, mv);
    FA_STORE(l, 0, lv);
    for (uint r = 0; r < FA_VW; r++)
        inv[r] = lv[r] > 0.0f ? 1.0f / lv[r] : 0.0f;
    if (init == 0) /* no key in range: y = 0 */
        for (uint i = 0; i < FA_VW * HS; i++)
            ya[i] = 0.0f;
    fa_rows_store(y + y_off + ((ulong)b * T + t0) * y_stride + (ulong)h * HS, y_stride, ya, nt, HS,
                  inv, 1.0f);
    for (uint r = 0; r < nt; r++)
        lse[lse_off + (ulong)bh * T + t0 + r] = lv[r] > 0.0f ? mv[r] + log(lv[r]) : -INFINITY;
}

/* ---- backward ---- */

/* Both passes take the same arguments (each reads what it needs), so the
 * host sets them once. dsum [B*NH, T]: D = dy.y per query row, written by
 * the dq pass and read by the dk/dv pass. */
#define FA_BWD_PARAMS                                                                             \
    __global fa_st *dq, ulong dq_off, __global fa_st *dk, ulong dk_off, __global fa_st *dv,        \
        ulong dv_off, ulong dq_stride, ulong dkv_stride, __global float *dsum, ulong dsum_off,   \
        __global const fa_st *dy, ulong dy_off, __global const fa_st *y, ulong y_off,            \
        ulong y_stride, __global const float *lse, ulong lse_off, __global const fa_st *q,       \
        ulong q_off, ulong q_stride, __global const fa_st *k, ulong k_off,                       \
        __global const fa_st *v, ulong v_off, ulong kv_stride, ulong kv_bstride,                 \
        ulong kv_hstride, __global const int *rbk, ulong rbk_off, __global float *drb,           \
        ulong drb_off, uint nbk, __global float *dqr, ulong dqr_off, FA_MASK_PARAMS

__kernel void attn_flash_bwd_dq(FA_BWD_PARAMS)
{
    const uint nblk = (T + FA_VW - 1) / FA_VW;
    const ulong gid = get_global_id(0);
    if (gid >= (ulong)B * NH * nblk)
        return;
    const uint bh = (uint)(gid / nblk), h = bh % NH, b = bh / NH;
    const uint t0 = (uint)(gid - (ulong)bh * nblk) * FA_VW, nt = min((uint)FA_VW, T - t0);
    const int off = (int)S - (int)T;
    __global const fa_st *kb = k + k_off + (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride;
    __global const fa_st *vb = v + v_off + (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride;
    __global const int *kp = keep + keep_off + (ulong)b * keep_stride;
    const ulong row0 = ((ulong)b * T + t0) * y_stride + (ulong)h * HS;

    faf qt[FA_HS_MAX], gt[FA_HS_MAX], sb[FA_CH]; /* vector-typed: aligned */
    faf qv[FA_HS_MAX]; /* y transposed for D, then dq's rows (qa) before the scale */
    float *qa = (float *)qv;
    fa_load_t(qt, q + q_off + ((ulong)b * T + t0) * q_stride + (ulong)h * HS, q_stride, nt, HS,
              scale);
    fa_load_t(gt, dy + dy_off + row0, y_stride, nt, HS, 1.0f);
    /* D = dy.y with lanes across the rows, summed over d in order: the same
     * sums as dp = dy.v in both passes, so a row that sees one key (y = v)
     * gets dp - D = 0 exactly and ds = 0, as the exact gradient has it (a
     * different order left rounding noise there, which Adam turns into
     * full-size steps on weights whose true gradient is small). */
    fa_load_t(qv, y + y_off + row0, y_stride, nt, HS, 1.0f);
    faf Dr = (faf)(0.0f);
    for (uint d = 0; d < HS; d++)
        Dr += gt[d] * qv[d];
    float Dv[FA_VW], Lv[FA_VW];
    FA_STORE(Dr, 0, Dv);
    for (uint r = 0; r < FA_VW; r++)
        Lv[r] = lse[lse_off + (ulong)bh * T + t0 + min(r, nt - 1)];
    const faf Lraw = FA_LOAD(0, Lv);
    const fai seen = Lraw > (faf)(CLF_NEG_BIG); /* rows that see some key */
    const faf L = select((faf)(0.0f), Lraw, seen);
    const fai tq = (fai)((int)t0 + off) + FA_IOTA;
    const fai qseg = fa_segs(kp, has_keep, (int)t0 + off, nt);
    const float slope = alibi ? clf_alibi_slope(h, NH) : 0.0f;
    __global const float *rbf = rb + rb_off + (ulong)h * 2 * rb_w;
    /* the relative bias's gradient: each row's ds summed by bucket */
    float bacc[FA_VW * FA_NBK_MAX];
    for (uint i = 0; i < FA_VW * nbk; i++)
        bacc[i] = 0.0f;
    __global const float *qrb = rqr + rqr_off + ((ulong)bh * T + t0) * rqr_w;
    /* Shaw's relative positions: each row's ds by clamped distance */
    float racc[FA_VW * FA_QRW_MAX];
    for (uint i = 0; i < FA_VW * rqr_w; i++)
        racc[i] = 0.0f;
    const fal irow = ((fal)((ulong)bh * T + t0) + FA_UL(FA_IOTA)) * (ulong)S;
    int lo, hi;
    fa_key_range(&lo, &hi, t0, nt, T, S, causal, sp_bs ? 0u : window);
    FA_SP_ROWS;

    int init = 0;
    for (int c0 = lo; c0 < hi; c0 += step) {
        const int ce = min(hi, c0 + step);
        int r0, r1;
        if (!fa_sp_chunk(c0, sp_bs, qb0, qb1, window, glob, stride, spt, sp_R, &r0, &r1))
            continue;
        /* ds = p (dp - D) for the chunk's keys */
        for (int s0 = c0; s0 < ce; s0 += FA_BC) {
            const int nc = min(FA_BC, ce - s0);
            int st = 0;
            if (sp_bs && !fa_sp_tile(tq0, tq1, s0, s0 + nc - 1, window, glob, stride, r0 | r1,
                                     &st)) { /* no row sees a key of the tile: ds = 0 */
                for (int c = 0; c < FA_BC; c++)
                    sb[s0 - c0 + c] = (faf)(0.0f);
                continue;
            }
            __global const fa_st *kr[FA_BC], *vr[FA_BC];
            faf sc[FA_BC], dp[FA_BC];
            #pragma unroll
            for (int c = 0; c < FA_BC; c++) {
                const ulong s = (ulong)(s0 + min(c, nc - 1));
                kr[c] = kb + s * kv_stride;
                vr[c] = vb + s * kv_stride;
                sc[c] = (faf)(0.0f);
                dp[c] = (faf)(0.0f);
            }
            /* two loops, not one: the sixteen row pointers of one loop did
             * not fit the registers (PoCL reloaded seven of them per step) */
            for (uint d = 0; d < HS; d++) {
                const faf qd = qt[d];
                #pragma unroll
                for (int c = 0; c < FA_BC; c++)
                    sc[c] += qd * FA_LD(kr[c], d);
            }
            for (uint d = 0; d < HS; d++) {
                const faf gd = gt[d];
                #pragma unroll
                for (int c = 0; c < FA_BC; c++)
                    dp[c] += gd * FA_LD(vr[c], d);
            }
            fai kw[FA_BC];
            if (FA_DROPOUT)
                fa_drop_rows(kw, irow + (ulong)s0, drop_thr, seed0, seed1, stream0, stream1);
            #pragma unroll
            for (int c = 0; c < FA_BC; c++) {
                const fai vis = fa_visible_rows(tq, qseg, s0 + c, c < nc, kp, has_keep, causal,
                                                window, glob, stride, sp_bs, st, r0, r1, qsplit) &
                                seen;
                if (alibi)
                    sc[c] -= slope * FA_F(abs(tq - (fai)(s0 + c)));
                const int bi = (int)t0 - (s0 + c) + (int)S - 1; /* t - s + S - 1 of lane 0 */
                if (rb_w && c < nc)
                    sc[c] += FA_LOAD(0, rbf + bi);
                const int d0 = s0 + c - ((int)t0 + off); /* s - tq of lane 0 */
                if (rqr_w)
                    sc[c] += fa_qr_rows(qrb, rqr_w, rel_k, d0, nt);
                const faf pc = select((faf)(0.0f), FA_EXP(sc[c] - L), vis);
                if (FA_DROPOUT)
                    dp[c] = select((faf)(0.0f), dp[c] * drop_scale, kw[c]);
                sb[s0 - c0 + c] = pc * (dp[c] - Dr); /* ds */
                if (nbk && c < nc) {
                    float dsv[FA_VW];
                    FA_STORE(sb[s0 - c0 + c], 0, dsv);
                    for (uint r = 0; r < nt; r++)
                        bacc[r * nbk + (uint)rbk[rbk_off + (ulong)(bi + (int)r)]] += dsv[r];
                }
                if (rqr_w && c < nc) {
                    float dsv[FA_VW];
                    FA_STORE(sb[s0 - c0 + c], 0, dsv);
                    for (uint r = 0; r < nt; r++)
                        racc[r * rqr_w +
                             (uint)(clamp(d0 - (int)r, -(int)rel_k, (int)rel_k) + (int)rel_k)] += dsv[r];
                }
            }
        }
        /* dq += ds k over the chunk */
        fa_chunk_acc(qa, sb, kb + (ulong)c0 * kv_stride, kv_stride, (uint)(ce - c0), HS, init,
                     NULL);
        init = 1;
    }

    if (init == 0) /* no key in range: dq = 0 */
        for (uint i = 0; i < FA_VW * HS; i++)
            qa[i] = 0.0f;
    fa_rows_store(dq + dq_off + ((ulong)b * T + t0) * dq_stride + (ulong)h * HS, dq_stride, qa, nt,
                  HS, NULL, scale);
    for (uint r = 0; r < nt; r++)
        dsum[dsum_off + (ulong)bh * T + t0 + r] = Dv[r];
    /* drb [B*T, NH*nbk]: row (b, t), this head's buckets */
    for (uint r = 0; r < nt; r++)
        for (uint i = 0; i < nbk; i++)
            drb[drb_off + (((ulong)b * T + t0 + r) * NH + h) * nbk + i] = bacc[r * nbk + i];
    /* dqr [B*NH*T, rqr_w]: the rows' ds by clamped distance */
    for (uint r = 0; r < nt; r++)
        for (uint i = 0; i < rqr_w; i++)
            dqr[dqr_off + ((ulong)bh * T + t0 + r) * rqr_w + i] = racc[r * rqr_w + i];
}

__kernel void attn_flash_bwd_dkv(FA_BWD_PARAMS)
{
    const uint nblk = (S + FA_VW - 1) / FA_VW;
    const ulong gid = get_global_id(0);
    if (gid >= (ulong)B * NH * nblk)
        return;
    const uint bh = (uint)(gid / nblk), h = bh % NH, b = bh / NH;
    const uint s0 = (uint)(gid - (ulong)bh * nblk) * FA_VW, ns = min((uint)FA_VW, S - s0);
    const int off = (int)S - (int)T;

    faf kt[FA_HS_MAX], vt[FA_HS_MAX], pb[FA_CH], sb[FA_CH]; /* vector-typed: aligned */
    float ka[FA_VW * FA_HS_MAX], va[FA_VW * FA_HS_MAX];   /* dk's, dv's rows */
    const ulong kv0 = (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride + (ulong)s0 * kv_stride;
    fa_load_t(kt, k + k_off + kv0, kv_stride, ns, HS, scale);
    fa_load_t(vt, v + v_off + kv0, kv_stride, ns, HS, 1.0f);
    /* lanes: keys s0 + lane; visible to some query at all? */
    int kl[FA_VW];
    for (uint r = 0; r < FA_VW; r++)
        kl[r] = r < ns && (!has_keep || keep[keep_off + (ulong)b * keep_stride + s0 + r] != 0) ? -1
                                                                                               : 0;
    const fai kvis = FA_LOAD(0, kl);
    __global const int *kp = keep + keep_off + (ulong)b * keep_stride;
    const fai kseg = fa_segs(kp, has_keep, (int)s0, ns); /* the lanes' keys' segments */
    const fai sv = (fai)((int)s0) + FA_IOTA;
    const float slope = alibi ? clf_alibi_slope(h, NH) : 0.0f;
    /* the relative bias by s - t + T - 1: the lanes' keys read forward */
    __global const float *rbr = rb + rb_off + (ulong)h * 2 * rb_w + rb_w;
    /* the queries that may see keys [s0, s0 + ns) */
    int tlo = 0, thi = (int)T;
    if (causal) {
        tlo = max(0, (int)s0 - off);
        if (window && !sp_bs)
            thi = min((int)T, (int)(s0 + ns - 1) + (int)window - off);
    }
    /* sparse patterns: chunks of one query block (by absolute position),
     * those that see none of these keys skipped (the lanes' keys are in one
     * block: sp_bs is a multiple of 16) */
    __global const int *spt = sp + sp_off;
    const int kblk = sp_bs ? (int)s0 / (int)sp_bs : 0;

    int init = 0;
    for (int c0 = tlo, ce; c0 < thi; c0 = ce) {
        ce = sp_bs ? min(thi, (((c0 + off) / (int)sp_bs) + 1) * (int)sp_bs - off)
                   : min(thi, c0 + FA_CH);
        const int qb = sp_bs ? (c0 + off) / (int)sp_bs : 0;
        if (sp_bs && !fa_sp_visit(qb, kblk, sp_bs, window, glob, stride, spt, sp_R))
            continue;
        const int rq = sp_bs ? fa_rnd(spt, sp_R, qb, kblk) : 0; /* a random block of qb */
        /* p (as kept) and ds for the chunk's queries, lanes across the keys */
        for (int t = c0; t < ce; t += FA_BQ) {
            const int nq = min(FA_BQ, ce - t);
            __global const fa_st *qr[FA_BQ], *gr[FA_BQ];
            faf sc[FA_BQ], dp[FA_BQ];
            float L[FA_BQ], D[FA_BQ];
            #pragma unroll
            for (int j = 0; j < FA_BQ; j++) {
                const ulong tj = (ulong)(t + min(j, nq - 1));
                qr[j] = q + q_off + ((ulong)b * T + tj) * q_stride + (ulong)h * HS;
                gr[j] = dy + dy_off + ((ulong)b * T + tj) * y_stride + (ulong)h * HS;
                L[j] = lse[lse_off + (ulong)bh * T + tj];
                D[j] = dsum[dsum_off + (ulong)bh * T + tj];
                sc[j] = (faf)(0.0f);
                dp[j] = (faf)(0.0f);
            }
            for (uint d = 0; d < HS; d++) {
                const faf kd = kt[d], vd = vt[d];
                #pragma unroll
                for (int j = 0; j < FA_BQ; j++) {
                    sc[j] += FA_LD(qr[j], d) * kd;
                    dp[j] += FA_LD(gr[j], d) * vd;
                }
            }
            #pragma unroll
            for (int j = 0; j < FA_BQ; j++) {
                const int tqj = t + j + off;
                fai vis = kvis & FA_ALL(j < nq && L[j] > CLF_NEG_BIG);
                if (has_keep == 2)
                    vis &= kseg == (fai)(kp[t + min(j, nq - 1) + off]);
                if (causal)
                    vis &= sv <= (fai)(tqj);
                if (window && sp_bs) {
                    /* one query, lanes of keys in block kblk */
                    fai ext = (sv + (fai)((int)window) > (fai)(tqj)) | (sv < (fai)((int)glob));
                    if (stride)
                        ext |= (((fai)(tqj)-sv) % (fai)((int)stride)) == (fai)(0);
                    ext |= FA_ALL(rq);
                    vis &= ext;
                } else if (window)
                    vis &= sv + (fai)((int)window) > (fai)(tqj);
                if (alibi)
                    sc[j] -= slope * FA_F(abs((fai)(tqj)-sv));
                if (rb_w)
                    sc[j] += FA_LOAD(0, rbr + ((int)s0 - (t + min(j, nq - 1)) + (int)T - 1));
                if (rqr_w) {
                    /* one query row, lanes of keys: clamp(s - tq) along the lanes */
                    __global const float *qrow =
                        rqr + rqr_off + ((ulong)bh * T + (ulong)(t + min(j, nq - 1))) * rqr_w;
                    const fai cv = clamp(sv - (fai)(t + min(j, nq - 1) + off), (fai)(-(int)rel_k),
                                         (fai)((int)rel_k)) +
                                   (fai)((int)rel_k);
                    int ci[FA_VW];
                    float gv[FA_VW];
                    FA_STORE(cv, 0, ci);
                    for (uint l = 0; l < FA_VW; l++)
                        gv[l] = qrow[ci[l]];
                    sc[j] += FA_LOAD(0, gv);
                }
                faf pj =
                    select((faf)(0.0f), FA_EXP(sc[j] - (L[j] > CLF_NEG_BIG ? L[j] : 0.0f)), vis);
                if (FA_DROPOUT) {
                    const fal i =
                        (fal)(((ulong)bh * T + (ulong)(t + j)) * S + s0) + FA_UL(FA_IOTA);
                    fau w0, w1, w2, w3;
                    fa_philox(i >> 2, stream0, stream1, seed0, seed1, &w0, &w1, &w2, &w3);
                    const fai kw = fa_pick4(w0, w1, w2, w3, FA_I(i & (ulong)3)) >= (fau)(drop_thr);
                    dp[j] = select((faf)(0.0f), dp[j] * drop_scale, kw);
                    sb[t - c0 + j] = pj * (dp[j] - D[j]);                      /* ds */
                    pb[t - c0 + j] = select((faf)(0.0f), pj * drop_scale, kw); /* the kept p */
                } else {
                    sb[t - c0 + j] = pj * (dp[j] - D[j]);
                    pb[t - c0 + j] = pj;
                }
            }
        }
        /* dv += p dy and dk += ds q over the chunk */
        const ulong qrow = (ulong)b * T + (ulong)c0;
        fa_chunk_acc(va, pb, dy + dy_off + qrow * y_stride + (ulong)h * HS, y_stride,
                     (uint)(ce - c0), HS, init, NULL);
        fa_chunk_acc(ka, sb, q + q_off + qrow * q_stride + (ulong)h * HS, q_stride,
                     (uint)(ce - c0), HS, init, NULL);
        init = 1;
    }

    if (init == 0) /* no query in range: dk = dv = 0 */
        for (uint i = 0; i < FA_VW * HS; i++)
            ka[i] = va[i] = 0.0f;
    const ulong row = ((ulong)b * S + s0) * dkv_stride + (ulong)h * HS;
    fa_rows_store(dk + dk_off + row, dkv_stride, ka, ns, HS, NULL, scale);
    fa_rows_store(dv + dv_off + row, dkv_stride, va, ns, HS, NULL, 1.0f);
}

/* FA_VW for the host (as this kernel's required work-group size, which the
 * host queries without launching it). */
__kernel __attribute__((reqd_work_group_size(FA_VW, 1, 1))) void attn_flash_vw(__global int *unused)
{
    (void)unused;
}

/* ---- the work-group (tile) shape, for devices that run work-items in lockstep ----
 * One work-group of G work-items (the launch's local size) takes G query
 * rows (forward, dq pass) or G keys (dk/dv pass) of one (b, h), a work-item
 * one row. The other side streams through local memory in tiles of BC rows
 * loaded cooperatively (consecutive work-items read consecutive floats of a
 * row: coalesced), with two barriers per tile: one before a tile is
 * overwritten (every work-item is done reading the previous one) and one
 * after it is loaded. Every work-item reaches every barrier (rows past the
 * end compute on a clamped row and store nothing; the host launches exactly
 * the groups needed, no early return). Tiles outside the group's causal or
 * window band are skipped; per-element masks, ALiBi and dropout as above
 * (dropout draws one Philox word per element). Local memory: 2*BC*HS floats
 * (forward, dq) or 2*BC*(HS + 1) (dk/dv); the host picks BC <= FA_GBC. */

/* Dropout keep decision of element i (random.cl's dropout, one element). */
static inline int fa_keep1(ulong i, uint thr, uint seed0, uint seed1, uint st0, uint st1)
{
    return fa_philox_word(i, st0, st1, seed0, seed1) >= thr;
}

/* Whether query row t (absolute position tq, in segment qseg) sees key s. */
static inline int fa_sees(int tq, int qseg, int s, __global const int *kp, int has_keep,
                          int causal, uint window, uint glob, uint stride, __global const int *spt,
                          uint sp_bs, uint sp_R)
{
    return (!has_keep || (has_keep == 2 ? kp[s] == qseg : kp[s] != 0)) && (!causal || s <= tq) &&
           (!window || s + (int)window > tq ||
            (sp_bs && fa_sparse1(tq, s, glob, stride, spt, sp_bs, sp_R)));
}

__kernel void attn_flash_fwd_group(__global fa_st *y, ulong y_off, ulong y_stride,
                                   __global float *lse, ulong lse_off, __global const fa_st *q,
                                   ulong q_off, ulong q_stride, __global const fa_st *k,
                                   ulong k_off, __global const fa_st *v, ulong v_off,
                                   ulong kv_stride, ulong kv_bstride, ulong kv_hstride,
                                   FA_MASK_PARAMS, uint BC, __local float *ks, __local float *vs)
{
    const uint G = get_local_size(0), lid = get_local_id(0);
    const uint nblk = (T + G - 1) / G, grp = get_group_id(0);
    const uint bh = grp / nblk, h = bh % NH, b = bh / NH;
    const uint t0 = (grp - bh * nblk) * G, nt = min(G, T - t0), t = t0 + min(lid, nt - 1);
    const int valid = lid < nt, tq = (int)t + (int)S - (int)T;
    __global const int *kp = keep + keep_off + (ulong)b * keep_stride;
    const int qseg = has_keep == 2 ? kp[tq] : 0;
    __global const fa_st *kb = k + k_off + (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride;
    __global const fa_st *vb = v + v_off + (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride;
    __global const fa_st *qr = q + q_off + ((ulong)b * T + t) * q_stride + (ulong)h * HS;
    const float slope = alibi ? clf_alibi_slope(h, NH) : 0.0f;
    __global const float *rbf = rb + rb_off + (ulong)h * 2 * rb_w;
    __global const float *qrr = rqr + rqr_off + ((ulong)bh * T + t) * rqr_w;
    const ulong irow = ((ulong)bh * T + t) * S;
    float qv[FA_HS_MAX], acc[FA_HS_MAX], sc[FA_GBC];
    for (uint d = 0; d < HS; d++) {
        qv[d] = FA_LD(qr, d) * scale;
        acc[d] = 0.0f;
    }
    int lo, hi;
    fa_key_range(&lo, &hi, t0, nt, T, S, causal, sp_bs ? 0u : window);
    float m = CLF_NEG_BIG, l = 0.0f;
    for (int s0 = lo; s0 < hi; s0 += (int)BC) {
        const int nc = min((int)BC, hi - s0);
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile is no longer read */
        for (uint i = lid; i < (uint)nc * HS; i += G) {
            const uint r = i / HS, d = i - r * HS;
            ks[i] = FA_LD(kb, (ulong)(s0 + (int)r) * kv_stride + d);
            vs[i] = FA_LD(vb, (ulong)(s0 + (int)r) * kv_stride + d);
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* the tile is loaded */
        float mt = m;
        for (int c = 0; c < nc; c++) {
            const int s = s0 + c;
            float a = CLF_NEG_BIG;
            if (fa_sees(tq, qseg, s, kp, has_keep, causal, window, glob, stride, sp + sp_off, sp_bs, sp_R)) {
                a = 0.0f;
                for (uint d = 0; d < HS; d++)
                    a += qv[d] * ks[c * HS + d];
                a -= slope * (float)abs(tq - s);
                if (rb_w)
                    a += rbf[(int)t - s + (int)S - 1];
                if (rqr_w)
                    a += qrr[clamp(s - tq, -(int)rel_k, (int)rel_k) + (int)rel_k];
                mt = fmax(mt, a);
            }
            sc[c] = a;
        }
        const float corr = clf_exp_nonpos(m - mt);
        l *= corr;
        for (uint d = 0; d < HS; d++)
            acc[d] *= corr;
        for (int c = 0; c < nc; c++) {
            const int s = s0 + c;
            float p = fa_sees(tq, qseg, s, kp, has_keep, causal, window, glob, stride, sp + sp_off, sp_bs, sp_R) ? clf_exp_nonpos(sc[c] - mt) : 0.0f;
            l += p;
            if (FA_DROPOUT && p != 0.0f)
                p = fa_keep1(irow + (ulong)s, drop_thr, seed0, seed1, stream0, stream1)
                        ? p * drop_scale
                        : 0.0f;
            if (p != 0.0f)
                for (uint d = 0; d < HS; d++)
                    acc[d] += p * vs[c * HS + d];
        }
        m = mt;
    }
    if (valid) {
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        __global fa_st *yr = y + y_off + ((ulong)b * T + t) * y_stride + (ulong)h * HS;
        for (uint d = 0; d < HS; d++)
            FA_SV(yr, d, acc[d] * inv);
        lse[lse_off + (ulong)bh * T + t] = l > 0.0f ? m + log(l) : -INFINITY;
    }
}

__kernel void attn_flash_bwd_dq_group(FA_BWD_PARAMS, uint BC, __local float *ks,
                                      __local float *vs)
{
    const uint G = get_local_size(0), lid = get_local_id(0);
    const uint nblk = (T + G - 1) / G, grp = get_group_id(0);
    const uint bh = grp / nblk, h = bh % NH, b = bh / NH;
    const uint t0 = (grp - bh * nblk) * G, nt = min(G, T - t0), t = t0 + min(lid, nt - 1);
    const int valid = lid < nt, tq = (int)t + (int)S - (int)T;
    __global const int *kp = keep + keep_off + (ulong)b * keep_stride;
    const int qseg = has_keep == 2 ? kp[tq] : 0;
    __global const fa_st *kb = k + k_off + (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride;
    __global const fa_st *vb = v + v_off + (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride;
    const ulong row = ((ulong)b * T + t) * y_stride + (ulong)h * HS;
    __global const fa_st *qr = q + q_off + ((ulong)b * T + t) * q_stride + (ulong)h * HS;
    const float slope = alibi ? clf_alibi_slope(h, NH) : 0.0f;
    __global const float *rbf = rb + rb_off + (ulong)h * 2 * rb_w;
    const ulong irow = ((ulong)bh * T + t) * S;
    float qv[FA_HS_MAX], gv[FA_HS_MAX], acc[FA_HS_MAX], bacc[FA_NBK_MAX], racc[FA_QRW_MAX];
    for (uint i = 0; i < nbk; i++)
        bacc[i] = 0.0f;
    for (uint i = 0; i < rqr_w; i++)
        racc[i] = 0.0f;
    __global const float *qrr = rqr + rqr_off + ((ulong)bh * T + t) * rqr_w;
    float D = 0.0f;
    for (uint d = 0; d < HS; d++) {
        qv[d] = FA_LD(qr, d) * scale;
        gv[d] = FA_LD(dy, dy_off + row + d);
        D += gv[d] * FA_LD(y, y_off + row + d);
        acc[d] = 0.0f;
    }
    const float L = lse[lse_off + (ulong)bh * T + t];
    const int seen = L > CLF_NEG_BIG;
    int lo, hi;
    fa_key_range(&lo, &hi, t0, nt, T, S, causal, sp_bs ? 0u : window);
    for (int s0 = lo; s0 < hi; s0 += (int)BC) {
        const int nc = min((int)BC, hi - s0);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint i = lid; i < (uint)nc * HS; i += G) {
            const uint r = i / HS, d = i - r * HS;
            ks[i] = FA_LD(kb, (ulong)(s0 + (int)r) * kv_stride + d);
            vs[i] = FA_LD(vb, (ulong)(s0 + (int)r) * kv_stride + d);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int c = 0; c < nc && seen; c++) {
            const int s = s0 + c;
            if (!fa_sees(tq, qseg, s, kp, has_keep, causal, window, glob, stride, sp + sp_off, sp_bs, sp_R))
                continue;
            float a = 0.0f, dp = 0.0f;
            for (uint d = 0; d < HS; d++) {
                a += qv[d] * ks[c * HS + d];
                dp += gv[d] * vs[c * HS + d];
            }
            a -= slope * (float)abs(tq - s);
            const int bi = (int)t - s + (int)S - 1;
            if (rb_w)
                a += rbf[bi];
            const int ci = clamp(s - tq, -(int)rel_k, (int)rel_k) + (int)rel_k;
            if (rqr_w)
                a += qrr[ci];
            if (FA_DROPOUT)
                dp = fa_keep1(irow + (ulong)s, drop_thr, seed0, seed1, stream0, stream1)
                         ? dp * drop_scale
                         : 0.0f;
            const float ds = clf_exp_nonpos(a - L) * (dp - D);
            if (nbk)
                bacc[rbk[rbk_off + (ulong)bi]] += ds;
            if (rqr_w)
                racc[ci] += ds;
            for (uint d = 0; d < HS; d++)
                acc[d] += ds * ks[c * HS + d];
        }
    }
    if (valid) {
        __global fa_st *dqrow = dq + dq_off + ((ulong)b * T + t) * dq_stride + (ulong)h * HS;
        for (uint d = 0; d < HS; d++)
            FA_SV(dqrow, d, scale * acc[d]);
        dsum[dsum_off + (ulong)bh * T + t] = D;
        for (uint i = 0; i < nbk; i++)
            drb[drb_off + (((ulong)b * T + t) * NH + h) * nbk + i] = bacc[i];
        for (uint i = 0; i < rqr_w; i++)
            dqr[dqr_off + ((ulong)bh * T + t) * rqr_w + i] = racc[i];
    }
}

__kernel void attn_flash_bwd_dkv_group(FA_BWD_PARAMS, uint BC, __local float *qs,
                                       __local float *gs)
{
    const uint G = get_local_size(0), lid = get_local_id(0);
    const uint nblk = (S + G - 1) / G, grp = get_group_id(0);
    const uint bh = grp / nblk, h = bh % NH, b = bh / NH;
    const uint s0 = (grp - bh * nblk) * G, ns = min(G, S - s0), s = s0 + min(lid, ns - 1);
    const int valid = lid < ns, off = (int)S - (int)T;
    __local float *Ls = qs + BC * HS, *Ds = gs + BC * HS; /* after the tiles' rows */
    const ulong kv0 = (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride + (ulong)s * kv_stride;
    const float slope = alibi ? clf_alibi_slope(h, NH) : 0.0f;
    __global const float *rbr = rb + rb_off + (ulong)h * 2 * rb_w + rb_w;
    float kv[FA_HS_MAX], vv[FA_HS_MAX], ak[FA_HS_MAX], av[FA_HS_MAX];
    for (uint d = 0; d < HS; d++) {
        kv[d] = FA_LD(k, k_off + kv0 + d) * scale;
        vv[d] = FA_LD(v, v_off + kv0 + d);
        ak[d] = 0.0f;
        av[d] = 0.0f;
    }
    const int kept = !has_keep || keep[keep_off + (ulong)b * keep_stride + s] != 0;
    /* the queries that may see keys [s0, s0 + ns) */
    int tlo = 0, thi = (int)T;
    if (causal) {
        tlo = max(0, (int)s0 - off);
        if (window && !sp_bs)
            thi = min((int)T, (int)(s0 + ns - 1) + (int)window - off);
    }
    for (int t0 = tlo; t0 < thi; t0 += (int)BC) {
        const int nq = min((int)BC, thi - t0);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint i = lid; i < (uint)nq * HS; i += G) {
            const uint r = i / HS, d = i - r * HS;
            const ulong tr = (ulong)b * T + (ulong)(t0 + (int)r);
            qs[i] = FA_LD(q, q_off + tr * q_stride + (ulong)h * HS + d);
            gs[i] = FA_LD(dy, dy_off + tr * y_stride + (ulong)h * HS + d);
        }
        for (uint i = lid; i < (uint)nq; i += G) {
            Ls[i] = lse[lse_off + (ulong)bh * T + (ulong)(t0 + (int)i)];
            Ds[i] = dsum[dsum_off + (ulong)bh * T + (ulong)(t0 + (int)i)];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int c = 0; c < nq && kept; c++) {
            const int tq = t0 + c + off;
            const float L = Ls[c];
            if (!(L > CLF_NEG_BIG) || (causal && (int)s > tq) ||
                (window && (int)s + (int)window <= tq &&
                 !(sp_bs && fa_sparse1(tq, (int)s, glob, stride, sp + sp_off, sp_bs, sp_R))) ||
                (has_keep == 2 && keep[keep_off + (ulong)b * keep_stride + (ulong)tq] !=
                                      keep[keep_off + (ulong)b * keep_stride + s]))
                continue;
            float a = 0.0f, dp = 0.0f;
            for (uint d = 0; d < HS; d++) {
                a += qs[c * HS + d] * kv[d];
                dp += gs[c * HS + d] * vv[d];
            }
            a -= slope * (float)abs(tq - (int)s);
            if (rb_w)
                a += rbr[(int)s - (t0 + c) + (int)T - 1];
            if (rqr_w)
                a += rqr[rqr_off + ((ulong)bh * T + (ulong)(t0 + c)) * rqr_w +
                        (ulong)(clamp((int)s - tq, -(int)rel_k, (int)rel_k) + (int)rel_k)];
            float p = clf_exp_nonpos(a - L), pm = p;
            if (FA_DROPOUT) {
                const int kw = fa_keep1(((ulong)bh * T + (ulong)(t0 + c)) * S + s, drop_thr, seed0,
                                        seed1, stream0, stream1);
                dp = kw ? dp * drop_scale : 0.0f;
                pm = kw ? p * drop_scale : 0.0f;
            }
            const float ds = p * (dp - Ds[c]);
            for (uint d = 0; d < HS; d++) {
                ak[d] += ds * qs[c * HS + d];
                av[d] += pm * gs[c * HS + d];
            }
        }
    }
    if (valid) {
        const ulong r = ((ulong)b * S + s) * dkv_stride + (ulong)h * HS;
        for (uint d = 0; d < HS; d++) {
            FA_SV(dk, dk_off + r + d, scale * ak[d]);
            FA_SV(dv, dv_off + r + d, av[d]);
        }
    }
}

/* Grouped-query attention's dk and dv: K/V head g's gradient is the sum,
 * in head order, of its kv_group query heads' (the dk/dv pass wrote those
 * per query head into full: rows of 2 * NH * HS, dk's heads then dv's).
 * One work-item per element of dk (and of dv). */
__kernel void attn_flash_kv_sum(__global fa_st *dk, ulong dk_off, __global fa_st *dv, ulong dv_off,
                                ulong dkv_stride, __global const fa_st *full, ulong full_off,
                                ulong rows, uint NH, uint kv_group, uint HS)
{
    const uint KVH = NH / kv_group;
    const ulong i = get_global_id(0);
    if (i >= rows * KVH * HS)
        return;
    const ulong r = i / ((ulong)KVH * HS);
    const uint e = (uint)(i - r * KVH * HS), g = e / HS, d = e - g * HS;
    const ulong src = full_off + r * 2 * NH * HS + (ulong)g * kv_group * HS + d;
    float sk = 0.0f, sv = 0.0f;
    for (uint j = 0; j < kv_group; j++) {
        sk += FA_LD(full, src + (ulong)j * HS);
        sv += FA_LD(full, src + (ulong)NH * HS + (ulong)j * HS);
    }
    const ulong dst = r * dkv_stride + (ulong)g * HS + d;
    FA_SV(dk, dk_off + dst, sk);
    FA_SV(dv, dv_off + dst, sv);
}
