/*
 * attention.cl - single-query (decode) attention and the KV cache's writes
 * and row gathers (beam search).
 *
 * attn_decode: one work-group per (b, head), or per (b, head, range) when
 * the host splits the cache's positions into P ranges (flash-decoding, for
 * GPUs with fewer rows than it takes to fill them; attn_decode_combine
 * folds the ranges' partial softmaxes in a fixed order). The query is
 * staged in local memory; each work-item scores positions s = lid, lid + W, ... against the
 * key cache, the group reduces the max and the sum of exponentials with a
 * fixed tree (deterministic), and the weighted sum over values is split as
 * (channel d = lid % HS, position class lid / HS) with the partial sums
 * combined in a fixed order. W is a power of two chosen by the host. With
 * a keep mask (cross-attention over a padded source) masked positions get
 * weight exactly 0 and a row with nothing kept gives zeros, not NaN.
 *
 * attn_decode_item: the same, one work-item per (b, head, range), for
 * devices whose work-groups run item by item.
 *
 * Not here: the full-sequence attention (flash.cl).
 */

/* Single-query attention: q [B, q_stride] (head h at column h*HS), k/v
 * [B, NH / grp, Tmax, HS] (grouped-query attention: grp query heads share
 * K/V head h / grp; grp = 1 for multi-head attention), out [BH, HS]
 * (bh = b*NH + h). With has_keep, keep (int32, row b at b * keep_stride) masks
 * positions out (nonzero = attend) and a row with nothing kept gives zeros;
 * without it, keep is not read.
 *
 * The query (position L - 1) sees positions [lo, L) (lo > 0: a sliding
 * window), with ALiBi biases -slope_h (L - 1 - s) when alibi is set, and
 * a relative bias rb[h * 2 rb_w + L - 1 - s] when rb_w is not 0
 * (attn_relbias_table's, for T = 1 and S = L).
 * Flash-decoding: group g = bh * P + p takes the positions [lo + p*chunk,
 * min(L, lo + (p+1)*chunk)), chunk = ceil((L - lo) / P). With P = 1 it writes the
 * normalised output; with P > 1 its partial softmax, part[g * (HS + 2) ..]
 * = {max m, sum l of exp(score - m), then the HS values sum_s exp(score_s -
 * m) v_s}, which attn_decode_combine folds in a fixed order. Local: qs[HS],
 * sc[chunk], red[W]. */
__kernel void attn_decode(__global float *out, ulong out_off, __global const float *q,
                          ulong q_off, ulong q_stride, __global const float *kc, ulong k_off,
                          __global const float *vc, ulong v_off, __global const int *keep,
                          ulong keep_off, uint keep_stride, int has_keep, uint NH, uint grp,
                          uint HS, uint Tmax, uint lo, uint L, float scale, int alibi,
                          __global const float *rb, ulong rb_off, uint rb_w,
                          __global const float *rqr, ulong rqr_off, uint rqr_w, uint rel_k,
                          uint P, __global float *part,
                          ulong part_off, __local float *qs, __local float *sc,
                          __local float *red)
{
    /* The host launches exactly B*NH*P groups, so there is no bounds return
     * here: PoCL 3.1 miscompiles kernels that return before a barrier, even
     * when the whole group returns together (stray writes past the buffers). */
    uint g = get_group_id(0), lid = get_local_id(0), W = get_local_size(0);
    uint bh = g / P, p = g - bh * P;
    uint n_all = L - lo, chunk = (n_all + P - 1) / P;
    uint s0 = lo + min(n_all, p * chunk), s1 = min(L, s0 + chunk), n = s1 - s0;
    const float slope = alibi ? clf_alibi_slope(bh % NH, NH) : 0.0f;
    __global const float *rbh = rb + rb_off + (ulong)(bh % NH) * 2 * rb_w; /* by L - 1 - s */
    __global const float *qrh = rqr + rqr_off + (ulong)bh * rqr_w; /* Shaw's: the row's q.r */
    q += q_off + (ulong)(bh / NH) * q_stride + (ulong)(bh % NH) * HS;
    const ulong kvh = (ulong)(bh / NH) * (NH / grp) + (bh % NH) / grp; /* its K/V head */
    kc += k_off + (kvh * Tmax + s0) * HS;
    vc += v_off + (kvh * Tmax + s0) * HS;
    out += out_off + (ulong)bh * HS;
    keep += keep_off + (ulong)(bh / NH) * keep_stride + s0;
    for (uint d = lid; d < HS; d += W)
        qs[d] = q[d];
    barrier(CLK_LOCAL_MEM_FENCE);

    /* scores of kept positions and their max */
    float mx = CLF_NEG_BIG;
    for (uint s = lid; s < n; s += W) {
        float a = CLF_NEG_BIG;
        if (!has_keep || keep[s] != 0) {
            __global const float *kr = kc + (ulong)s * HS;
            a = 0.0f;
            for (uint d = 0; d < HS; d++)
                a += qs[d] * kr[d];
            a = a * scale - slope * (float)(L - 1 - (s0 + s));
            if (rb_w)
                a += rbh[L - 1 - (s0 + s)];
            if (rqr_w)
                a += qrh[clamp((int)(s0 + s) - (int)(L - 1), -(int)rel_k, (int)rel_k) + (int)rel_k];
        }
        sc[s] = a;
        mx = fmax(mx, a);
    }
    red[lid] = mx;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint o = W / 2; o > 0; o /= 2) {
        if (lid < o)
            red[lid] = fmax(red[lid], red[lid + o]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    mx = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);

    /* exponentials (0 for masked positions) and their sum */
    float sum = 0.0f;
    for (uint s = lid; s < n; s += W) {
        float e = !has_keep || keep[s] != 0 ? exp(sc[s] - mx) : 0.0f;
        sc[s] = e;
        sum += e;
    }
    red[lid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint o = W / 2; o > 0; o /= 2) {
        if (lid < o)
            red[lid] += red[lid + o];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    sum = red[0];
    /* one output: normalised here; a part: raw, with its max and sum */
    float inv = P > 1 ? 1.0f : sum > 0.0f ? 1.0f / sum : 0.0f;
    __global float *dst = out;
    if (P > 1) {
        dst = part + part_off + (ulong)g * (HS + 2) + 2;
        if (lid == 0) {
            dst[-2] = mx;
            dst[-1] = sum;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* weighted sum of values: parts position classes per channel */
    uint parts = HS >= W ? 1 : W / HS;
    uint d = lid % HS, cls = lid / HS;
    float acc = 0.0f;
    if (parts == 1) {
        for (uint dd = lid; dd < HS; dd += W) {
            float a = 0.0f;
            for (uint s = 0; s < n; s++)
                a += sc[s] * vc[(ulong)s * HS + dd];
            dst[dd] = a * inv;
        }
    } else if (cls < parts) {
        for (uint s = cls; s < n; s += parts)
            acc += sc[s] * vc[(ulong)s * HS + d];
    }
    red[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (parts > 1 && lid < HS) {
        float a = red[lid];
        for (uint c = 1; c < parts; c++)
            a += red[c * HS + lid];
        dst[lid] = a * inv;
    }
}

/* attn_decode_item: the same computation for devices whose work-groups run
 * item by item (CPUs): one work-item per (b, head, range), no local memory
 * and no barriers. Positions are scored in chunks of ATTN_ITEM_CHUNK into
 * private memory with float8 dot products along the head, then folded into
 * a running max, sum and weighted value (an online softmax), so one pass
 * reads each key and value row once. Same arguments and outputs as
 * attn_decode (P = 1: the output; P > 1: the range's partial softmax). */
#define ATTN_ITEM_CHUNK 64 /* ATTN_ITEM_HS_MAX: runtime/contract.h */

__kernel void attn_decode_item(__global float *out, ulong out_off, __global const float *q,
                               ulong q_off, ulong q_stride, __global const float *kc,
                               ulong k_off, __global const float *vc, ulong v_off,
                               __global const int *keep, ulong keep_off, uint keep_stride,
                               int has_keep, uint NH, uint grp, uint HS, uint Tmax, uint lo,
                               uint L, float scale, int alibi, __global const float *rb,
                               ulong rb_off, uint rb_w, __global const float *rqr,
                               ulong rqr_off, uint rqr_w, uint rel_k, uint P,
                               __global float *part, ulong part_off)
{
    const uint g = get_global_id(0);
    const uint bh = g / P, p = g - bh * P;
    if (bh >= get_global_size(0) / P || HS > ATTN_ITEM_HS_MAX)
        return;
    const uint n_all = L - lo, chunk = (n_all + P - 1) / P;
    const uint s0 = lo + min(n_all, p * chunk), s1 = min(L, s0 + chunk);
    const float slope = alibi ? clf_alibi_slope(bh % NH, NH) : 0.0f;
    __global const float *rbh = rb + rb_off + (ulong)(bh % NH) * 2 * rb_w;
    __global const float *qrh = rqr + rqr_off + (ulong)bh * rqr_w;
    __global const float *qr = q + q_off + (ulong)(bh / NH) * q_stride + (ulong)(bh % NH) * HS;
    const ulong kvh = (ulong)(bh / NH) * (NH / grp) + (bh % NH) / grp; /* its K/V head */
    __global const float *kb = kc + k_off + kvh * Tmax * HS;
    __global const float *vb = vc + v_off + kvh * Tmax * HS;
    __global const int *kp = keep + keep_off + (ulong)(bh / NH) * keep_stride;
    const uint hv = HS / 8 * 8;
    float qs[ATTN_ITEM_HS_MAX], acc[ATTN_ITEM_HS_MAX], sc[ATTN_ITEM_CHUNK];
    for (uint d = 0; d < HS; d++) {
        qs[d] = qr[d] * scale;
        acc[d] = 0.0f;
    }
    float m = CLF_NEG_BIG, l = 0.0f;
    for (uint c0 = s0; c0 < s1; c0 += ATTN_ITEM_CHUNK) {
        const uint nc = min((uint)ATTN_ITEM_CHUNK, s1 - c0);
        float mc = m;
        for (uint c = 0; c < nc; c++) {
            const uint s = c0 + c;
            float a = CLF_NEG_BIG;
            if (!has_keep || kp[s] != 0) {
                __global const float *kr = kb + (ulong)s * HS;
                float8 v8 = (float8)(0.0f);
                for (uint d = 0; d < hv; d += 8)
                    v8 = CLF_FMA(vload8(0, qs + d), vload8(0, kr + d), v8);
                a = clf_hsum8(v8);
                for (uint d = hv; d < HS; d++)
                    a = CLF_FMA(qs[d], kr[d], a);
                a -= slope * (float)(L - 1 - s);
                if (rb_w)
                    a += rbh[L - 1 - s];
                if (rqr_w)
                    a += qrh[clamp((int)s - (int)(L - 1), -(int)rel_k, (int)rel_k) + (int)rel_k];
                mc = fmax(mc, a);
            }
            sc[c] = a;
        }
        const float corr = clf_exp_nonpos(m - mc);
        l *= corr;
        for (uint d = 0; d < HS; d++)
            acc[d] *= corr;
        for (uint c = 0; c < nc; c++) {
            const uint s = c0 + c;
            if (has_keep && kp[s] == 0)
                continue;
            const float e = clf_exp_nonpos(sc[c] - mc);
            l += e;
            __global const float *vr = vb + (ulong)s * HS;
            for (uint d = 0; d < hv; d += 8)
                vstore8(CLF_FMA((float8)(e), vload8(0, vr + d), vload8(0, acc + d)), 0, acc + d);
            for (uint d = hv; d < HS; d++)
                acc[d] = CLF_FMA(e, vr[d], acc[d]);
        }
        m = mc;
    }
    if (P > 1) {
        __global float *dst = part + part_off + (ulong)g * (HS + 2);
        dst[0] = m;
        dst[1] = l;
        for (uint d = 0; d < HS; d++)
            dst[2 + d] = acc[d];
    } else {
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        __global float *o = out + out_off + (ulong)bh * HS;
        for (uint d = 0; d < HS; d++)
            o[d] = acc[d] * inv;
    }
}

/* Flash-decoding's second pass: out[bh, d] from the P parts of row bh, folded
 * in order p = 0..P-1 (deterministic): with M the largest part max whose sum
 * is positive, out = sum_p exp(m_p - M) o_p[d] / sum_p exp(m_p - M) l_p; a
 * row with nothing kept gives 0. One work-item per (bh, d). */
__kernel void attn_decode_combine(__global float *out, ulong out_off, __global const float *part,
                                  ulong part_off, uint BH, uint HS, uint P)
{
    uint i = get_global_id(0);
    if (i >= BH * HS)
        return;
    uint bh = i / HS, d = i - bh * HS;
    __global const float *pp = part + part_off + (ulong)bh * P * (HS + 2);
    float M = CLF_NEG_BIG;
    for (uint p = 0; p < P; p++)
        if (pp[p * (HS + 2) + 1] > 0.0f)
            M = fmax(M, pp[p * (HS + 2)]);
    float num = 0.0f, den = 0.0f;
    for (uint p = 0; p < P; p++) {
        __global const float *r = pp + p * (HS + 2);
        if (r[1] > 0.0f) {
            float w = exp(r[0] - M);
            num += w * r[2 + d];
            den += w * r[1];
        }
    }
    out[out_off + (ulong)bh * HS + d] = den > 0.0f ? num / den : 0.0f;
}

/* ---- KV cache (decoding) ---- */

/* kv_store: src holds rows [B, T, row_stride] with head h of a row at
 * columns [h*HS, (h+1)*HS) (k or v inside the fused qkv output, after
 * rope); the cache is [B, NH, Tmax, HS] and position t of (b, h) goes to
 * cache row pos0 + t. One work-item per float, in source order (reads
 * contiguous); 32-bit indices (the host checks the sizes fit). */
__kernel void kv_store(__global float *cache, ulong cache_off, __global const float *src,
                       ulong src_off, uint n, uint T, uint NH, uint HS, uint row_stride,
                       uint Tmax, uint pos0)
{
    uint i = get_global_id(0);
    if (i >= n)
        return;
    cache += cache_off;
    src += src_off;
    uint d = i % HS;
    uint h = (i / HS) % NH;
    uint bt = i / (HS * NH);
    uint t = bt % T;
    uint b = bt / T;
    cache[(((ulong)b * NH + h) * Tmax + pos0 + t) * HS + d] = src[(ulong)bt * row_stride + h * HS + d];
}

/* cache_gather: dst row i <- src row index[i] (use_index = 0: row i) for
 * rows of G groups of `len` elements with `stride` elements between groups
 * (a cache [B, NH, Tmax, HS]: G = NH, stride = Tmax*HS, len = positions
 * used * HS). Elements move as 32-bit words (uint), so float and int32
 * buffers (the source keep mask) are copied bit for bit. */
/* n = rows * G * len items; item (i, g, j) copies src[(r*G + g)*stride + j]
 * to dst[(i*G + g)*stride + j] with r = index[i] (or i). */
__kernel void cache_gather(__global uint *dst, ulong dst_off, __global const uint *src,
                           ulong src_off, __global const int *index, ulong index_off,
                           int use_index, uint n, uint G, uint len, uint stride)
{
    uint e = get_global_id(0);
    if (e >= n)
        return;
    uint j = e % len, ig = e / len;
    uint g = ig % G, i = ig / G;
    uint r = use_index ? (uint)index[index_off + i] : i;
    dst[dst_off + ((ulong)i * G + g) * stride + j] = src[src_off + ((ulong)r * G + g) * stride + j];
}

/* The relative position bias of one attention call of T queries (the last
 * T of S positions) and S keys, per head, from the learned table w [NH,
 * NB] and the buckets bk[R0 + rel] of rel = key - query in [-R0, R0]
 * (positional.type t5: the host computes T5's buckets): rb [NH, 2 rb_w],
 * row h = the bias by t - s + S - 1 (t the query's row, 0..T-1), then by
 * s - t + T - 1 (read forward by lanes of keys); rbk [rb_w] the bucket by
 * t - s + S - 1 (the backward sums ds by it). Entries past T + S - 1 are
 * 0 (padding that lanes past the rows may read). One work-item per entry
 * of rb; those of head 0 also write rbk. */
__kernel void attn_relbias_table(__global float *rb, ulong rb_off, __global int *rbk,
                                 ulong rbk_off, __global const float *w, ulong w_off,
                                 __global const int *bk, ulong bk_off, uint R0, uint NH, uint NB,
                                 uint T, uint S, uint rb_w)
{
    const uint i = get_global_id(0);
    if (i >= NH * 2 * rb_w)
        return;
    const uint h = i / (2 * rb_w), j = i - h * 2 * rb_w;
    const int rev = j >= rb_w, idx = (int)(rev ? j - rb_w : j);
    const int valid = idx <= (int)(T + S) - 2;
    /* key - query: T - 1 - idx for t - s + S - 1 = idx; idx + 1 - S for the reverse */
    const int rel = rev ? idx + 1 - (int)S : (int)T - 1 - idx;
    const int bucket = valid ? bk[bk_off + (ulong)((int)R0 + rel)] : 0;
    rb[rb_off + i] = valid ? w[w_off + (ulong)h * NB + (uint)bucket] : 0.0f;
    if (h == 0 && !rev)
        rbk[rbk_off + (ulong)idx] = bucket;
}

/* Sparse patterns while decoding: keep [B, keep_stride], row b = which of
 * positions [0, L) the query at L - 1 sees (1) under the window, glob,
 * stride and the random blocks sp [blocks, R] of bs positions (flash.cl's
 * fa_sparse1), for attn_decode's keep mask. One work-item per entry. */
__kernel void attn_sparse_keep(__global int *keep, ulong keep_off, uint keep_stride, uint B,
                               uint L, uint window, uint glob, uint stride,
                               __global const int *sp, ulong sp_off, uint bs, uint R)
{
    const uint i = get_global_id(0);
    if (i >= B * L)
        return;
    const uint b = i / L, s = i - b * L, tq = L - 1;
    int in = s + window > tq || s < glob || (stride && (tq - s) % stride == 0);
    for (uint r = 0; r < R; r++)
        in |= sp[sp_off + (ulong)(tq / bs) * R + r] == (int)(s / bs);
    keep[keep_off + (ulong)b * keep_stride + s] = in;
}

/* Linformer: the columns [col0, col0 + ncols) of the rows of x (row r at
 * r * stride) whose keep entry is 0 set to 0 (padding's keys and values
 * before they are projected along the sequence, and their gradients). One
 * work-item per element of those columns. */
__kernel void attn_rows_mask(__global float *x, ulong x_off, uint stride, uint col0, uint ncols,
                             __global const int *keep, ulong keep_off, uint rows)
{
    const uint i = get_global_id(0);
    if (i >= rows * ncols)
        return;
    const uint r = i / ncols, c = i - r * ncols;
    if (keep[keep_off + r] == 0)
        x[x_off + (ulong)r * stride + col0 + c] = 0.0f;
}

/* Shaw's relative positions (positional.type relative): the scores' q.r
 * terms and their gradients, around the fused attention. q: heads of rows
 * of q_stride elements stored as q_t (row (b, t), head h at column h*HS);
 * r [W, HS] float32; qr and dqr [B*NH*T, W], row (b*NH + h)*T + t. */

/* qr[row, c] = scale q_(b,t,h) . r_c: one work-item per entry. */
__kernel void attn_rel_qr(__global float *qr, ulong qr_off, __global const float *q, ulong q_off,
                          uint q_t, ulong q_stride, __global const float *r, ulong r_off, uint B,
                          uint NH, uint T, uint HS, uint W, float scale)
{
    const ulong i = get_global_id(0);
    if (i >= (ulong)B * NH * T * W)
        return;
    const ulong row = i / W;
    const uint c = (uint)(i - row * W), t = (uint)(row % T), bh = (uint)(row / T);
    const uint h = bh % NH, b = bh / NH;
    const ulong q0 = q_off + ((ulong)b * T + t) * q_stride + (ulong)h * HS;
    float a = 0.0f;
    for (uint d = 0; d < HS; d++)
        a += clf_load_t(q, q_t, q0 + d) * r[r_off + (ulong)c * HS + d];
    qr[qr_off + i] = scale * a;
}

/* dq_(b,t,h,d) += scale sum_c dqr[row, c] r_c[d]: one work-item per element
 * of dq's heads (stored as dq_t: widened, added, rounded back). */
__kernel void attn_rel_dq(__global float *dq, ulong dq_off, uint dq_t, ulong dq_stride,
                          __global const float *dqr, ulong dqr_off, __global const float *r,
                          ulong r_off, uint B, uint NH, uint T, uint HS, uint W, float scale)
{
    const ulong i = get_global_id(0);
    if (i >= (ulong)B * T * NH * HS)
        return;
    const ulong bt = i / ((ulong)NH * HS);
    const uint e = (uint)(i - bt * NH * HS), h = e / HS, d = e - h * HS;
    const uint b = (uint)(bt / T), t = (uint)(bt % T);
    const ulong row = ((ulong)b * NH + h) * T + t;
    float a = 0.0f;
    for (uint c = 0; c < W; c++)
        a += dqr[dqr_off + row * W + c] * r[r_off + (ulong)c * HS + d];
    const ulong at = dq_off + bt * dq_stride + (ulong)h * HS + d;
    clf_store_t(dq, dq_t, at, clf_load_t(dq, dq_t, at) + scale * a);
}

/* dr[c, d] += scale sum over rows (b, h, t), in order, of dqr[row, c]
 * q_(b,t,h)[d]: one work-item per element of dr. */
__kernel void attn_rel_dr(__global float *dr, ulong dr_off, __global const float *dqr,
                          ulong dqr_off, __global const float *q, ulong q_off, uint q_t,
                          ulong q_stride, uint B, uint NH, uint T, uint HS, uint W, float scale)
{
    const uint i = get_global_id(0);
    if (i >= W * HS)
        return;
    const uint c = i / HS, d = i - c * HS;
    float a = 0.0f;
    for (uint b = 0; b < B; b++)
        for (uint h = 0; h < NH; h++)
            for (uint t = 0; t < T; t++) {
                const ulong row = ((ulong)b * NH + h) * T + t;
                a += dqr[dqr_off + row * W + c] *
                     clf_load_t(q, q_t, q_off + ((ulong)b * T + t) * q_stride + (ulong)h * HS + d);
            }
    dr[dr_off + i] += scale * a;
}
