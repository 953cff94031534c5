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
 * Not here: the full-sequence attention (flash/); decoding's norm, qkv
 * linear and attention in one launch (decode.cl).
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
 * sc[chunk], red[W].
 * With has_new, position L - 1's key and value are read from kn and vn
 * (row b at b * n_stride, K/V head j at column j * HS: the new position's
 * k and v inside the fused qkv) instead of the caches, and the launch
 * stores them there: the range holding L - 1 of the first query head of
 * each K/V head writes them, and no work-item of the launch reads the
 * caches at L - 1, so decoding needs no kv_store launch of its own. */
__kernel void attn_decode(__global float *out, ulong out_off, __global const float *q,
                          ulong q_off, ulong q_stride, __global float *kc, ulong k_off,
                          __global float *vc, ulong v_off, __global const float *kn, ulong kn_off,
                          __global const float *vn, ulong vn_off, ulong n_stride, int has_new,
                          __global const int *keep,
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
    /* the new position's rows, and where L - 1 sits among this range's */
    const ulong nrow = (ulong)(bh / NH) * n_stride + (ulong)((bh % NH) / grp) * HS;
    kn += kn_off + nrow;
    vn += vn_off + nrow;
    const uint snew = has_new ? L - 1 - s0 : 0xFFFFFFFFu;
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
            __global const float *kr = s == snew ? kn : kc + (ulong)s * HS;
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
                a += sc[s] * (s == snew ? vn : vc + (ulong)s * HS)[dd];
            dst[dd] = a * inv;
        }
    } else if (cls < parts) {
        for (uint s = cls; s < n; s += parts)
            acc += sc[s] * (s == snew ? vn : vc + (ulong)s * HS)[d];
    }
    if (has_new && p == P - 1 && (bh % NH) % grp == 0)
        for (uint dd = lid; dd < HS; dd += W) {
            kc[(ulong)snew * HS + dd] = kn[dd];
            vc[(ulong)snew * HS + dd] = vn[dd];
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
__kernel void attn_decode_item(__global float *out, ulong out_off, __global const float *q,
                               ulong q_off, ulong q_stride, __global float *kc, ulong k_off,
                               __global float *vc, ulong v_off, __global const float *kn,
                               ulong kn_off, __global const float *vn, ulong vn_off,
                               ulong n_stride, int has_new, __global const int *keep, ulong keep_off, uint keep_stride,
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
    __global float *kb = kc + k_off + kvh * Tmax * HS;
    __global float *vb = vc + v_off + kvh * Tmax * HS;
    const ulong nrow = (ulong)(bh / NH) * n_stride + (ulong)((bh % NH) / grp) * HS;
    __global const float *knr = kn + kn_off + nrow, *vnr = vn + vn_off + nrow;
    const uint snew = has_new ? L - 1 : 0xFFFFFFFFu;
    __global const int *kp = keep + keep_off + (ulong)(bh / NH) * keep_stride;
    float qs[ATTN_ITEM_HS_MAX], acc[ATTN_ITEM_HS_MAX];
    for (uint d = 0; d < HS; d++) {
        qs[d] = qr[d] * scale;
        acc[d] = 0.0f;
    }
    float m = CLF_NEG_BIG, l = 0.0f;
    attn_item_pass(acc, &m, &l, qs, kb, vb, knr, vnr, snew, kp, has_keep, s0, s1, L, HS, slope,
                   rbh, rb_w, qrh, rqr_w, rel_k);
    if (has_new && p == P - 1 && (bh % NH) % grp == 0)
        for (uint d = 0; d < HS; d++) {
            kb[(ulong)snew * HS + d] = knr[d];
            vb[(ulong)snew * HS + d] = vnr[d];
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

/* kv_store: keys and values in one launch. src holds rows [B, T,
 * row_stride] with head h of a row's keys at columns k_col + [h*HS,
 * (h+1)*HS) and its values at v_col + the same (k and v inside the fused
 * qkv output, after rope); the caches are [B, NH, Tmax, HS] and position t
 * of (b, h) goes to row pos0 + t of each. One work-item per float of each,
 * in source order (reads contiguous); 32-bit indices (the host checks the
 * sizes fit). */
__kernel void kv_store(__global float *kcache, ulong kc_off, __global float *vcache,
                       ulong vc_off, __global const float *src, ulong src_off, uint k_col,
                       uint v_col, uint n, uint T, uint NH, uint HS, uint row_stride, uint Tmax,
                       uint pos0)
{
    uint i = get_global_id(0);
    if (i >= n)
        return;
    src += src_off;
    uint d = i % HS;
    uint h = (i / HS) % NH;
    uint bt = i / (HS * NH);
    uint t = bt % T;
    uint b = bt / T;
    ulong c = (((ulong)b * NH + h) * Tmax + pos0 + t) * HS + d;
    ulong s = (ulong)bt * row_stride + h * HS + d;
    kcache[kc_off + c] = src[s + k_col];
    vcache[vc_off + c] = src[s + v_col];
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
 * stride and the random blocks sp [blocks, R] of bs positions (the flash family's
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

/* ---- Performer (FAVOR+): softmax attention through positive random features ----
 * Per head, phi(x)_i = exp(w_i . x' - |x'|^2 / 2 - c) / sqrt(m), x' = x
 * HS^(-1/4), w_i the rows of the layer's om [m, HS] (i < m). The stabiliser c
 * is a query row's own max over i (queries) or one max over every key of
 * (b, h) (keys: cmax): each is a common factor of a row's numerator and
 * denominator, so it cancels exactly and the gradients treat it as a
 * constant. y_t = sum_s phi(q_t).phi(k_s) v_s / sum_s phi(q_t).phi(k_s) over
 * the keys s the query sees: all (both ways; masked keys have phi = 0) or s
 * <= t + off (causal; the queries are the last T of S positions, off = S -
 * T), by prefix sums: no T x S matrix. Layouts: q row (b, t), head h at q +
 * (b*T + t)*q_stride + h*HS; k, v row s of (b, h) at b*kv_bstride + h*
 * kv_hstride + s*kv_stride (the projections, or a KV cache); fq [BH, T, m],
 * fk [BH, S, m], nd [BH, T, HS + 1] (numerators, then the denominator), bh
 * = b*NH + h. Work: one item per row (features), per (bh, column) or (bh,
 * feature) (the sums, in sequence order: deterministic). */

/* e_i = w_i . x' - |x'|^2 / 2 for i < m into e; returns max_i e_i (x'
 * = x s4: the row read once into xs). */
static float perf_e(__global const float *x, __global const float *om, uint m, uint HS, float s4,
                    float *e)
{
    float xs[PERF_HS1_MAX];
    float sq = 0.0f;
    for (uint d = 0; d < HS; d++) {
        xs[d] = x[d] * s4;
        sq += xs[d] * xs[d];
    }
    const uint h8 = HS / 8 * 8;
    float mx = -INFINITY;
    for (uint i = 0; i < m; i++) {
        __global const float *w = om + (ulong)i * HS;
        float8 p8 = (float8)(0.0f);
        for (uint d = 0; d < h8; d += 8)
            p8 = fma(vload8(0, w + d), vload8(0, xs + d), p8);
        float p = clf_hsum8(p8);
        for (uint d = h8; d < HS; d++)
            p = fma(w[d], xs[d], p);
        e[i] = p - 0.5f * sq;
        mx = fmax(mx, e[i]);
    }
    return mx;
}

/* Features of R rows per (b, h): mode 0 queries (c = the row's max), 2
 * keys' exponents e into f and their row maxima into rmax[bh*R + r] (-inf
 * for a masked key), 1 keys from those (c = cmax[bh]; a masked key's are
 * 0). x row r of (b, h) at x_off + b*x_bstride + h / grp * x_hstride +
 * r*x_stride. One work-item per row. */
__kernel void perf_phi(__global float *f, ulong f_off, __global const float *x, ulong x_off,
                       ulong x_stride, ulong x_bstride, ulong x_hstride, uint B, uint NH,
                       uint grp, uint R, uint HS, uint m, __global const float *om, ulong om_off,
                       __global const int *keep, ulong keep_off, ulong keep_stride,
                       int has_keep, __global float *cmax, ulong cmax_off, int mode)
{
    const ulong g = get_global_id(0);
    if (g >= (ulong)B * NH * R || m > PERF_M_MAX || HS + 1 > PERF_HS1_MAX)
        return;
    const uint bh = (uint)(g / R), r = (uint)(g - (ulong)bh * R), b = bh / NH, h = bh % NH;
    const int masked = mode != 0 && has_keep && keep[keep_off + (ulong)b * keep_stride + r] == 0;
    const float inv = rsqrt((float)m);
    __global float *fr = f + f_off + g * m;
    if (mode == 1) { /* the keys' exponents, stabilised by the sequence's max */
        const float c = cmax[cmax_off + bh];
        for (uint i = 0; i < m; i++)
            fr[i] = masked ? 0.0f : exp(fr[i] - c) * inv;
        return;
    }
    __global const float *xr =
        x + x_off + (ulong)b * x_bstride + (ulong)(h / grp) * x_hstride + (ulong)r * x_stride;
    float e[PERF_M_MAX];
    const float mx = perf_e(xr, om + om_off, m, HS, rsqrt(sqrt((float)HS)), e);
    if (mode == 2) {
        for (uint i = 0; i < m; i++)
            fr[i] = e[i];
        cmax[cmax_off + g] = masked ? -INFINITY : mx;
        return;
    }
    for (uint i = 0; i < m; i++)
        fr[i] = exp(e[i] - mx) * inv;
}

/* cmax[bh] = the max over the R row maxima rmax[bh*R ..] (0 if every key is
 * masked). One work-item per (b, h). */
__kernel void perf_bhmax(__global float *cmax, ulong cmax_off, __global const float *rmax,
                         ulong rmax_off, uint BH, uint R)
{
    const uint bh = get_global_id(0);
    if (bh >= BH)
        return;
    float mx = -INFINITY;
    for (uint r = 0; r < R; r++)
        mx = fmax(mx, rmax[rmax_off + (ulong)bh * R + r]);
    cmax[cmax_off + bh] = isinf(mx) ? 0.0f : mx;
}

/* acc[k] += a x[k] and sum_k acc[k] x[k] for k < n, eight at a time. */
static inline void perf_axpy(float *acc, float a, __global const float *x, uint n)
{
    uint k = 0;
    for (; k + 8 <= n; k += 8)
        vstore8(fma((float8)(a), vload8(0, x + k), vload8(0, acc + k)), 0, acc + k);
    for (; k < n; k++)
        acc[k] = fma(a, x[k], acc[k]);
}

static inline float perf_dot(const float *acc, __global const float *x, uint n)
{
    float8 s8 = (float8)(0.0f);
    uint k = 0;
    for (; k + 8 <= n; k += 8)
        s8 = fma(vload8(0, acc + k), vload8(0, x + k), s8);
    float s = clf_hsum8(s8);
    for (; k < n; k++)
        s = fma(acc[k], x[k], s);
    return s;
}

/* v_j of key row vr (j == HS: 1, the denominator's column). */
#define PERF_V(vr, j, HS) ((j) < (HS) ? (vr)[j] : 1.0f)

/* nd[bh, t, j] = sum_i fq_t[i] S_t[i][j], S_t[i][j] = sum over the keys s
 * the query sees of fk_s[i] v_j(s). One work-item per (bh, j <= HS), with
 * its column of S in private memory. */
__kernel void perf_fwd(__global float *nd, ulong nd_off, __global const float *fq, ulong fq_off,
                       __global const float *fk, ulong fk_off, __global const float *v,
                       ulong v_off, ulong kv_stride, ulong kv_bstride, ulong kv_hstride, uint B,
                       uint NH, uint grp, uint T, uint S, uint HS, uint m, int causal)
{
    const ulong g = get_global_id(0);
    if (g >= (ulong)B * NH * (HS + 1) || m > PERF_M_MAX)
        return;
    const uint bh = (uint)(g / (HS + 1)), j = (uint)(g - (ulong)bh * (HS + 1));
    const uint b = bh / NH, h = bh % NH, off = S - T;
    __global const float *vb = v + v_off + (ulong)b * kv_bstride + (ulong)(h / grp) * kv_hstride;
    __global const float *fkb = fk + fk_off + (ulong)bh * S * m;
    float acc[PERF_M_MAX];
    for (uint i = 0; i < m; i++)
        acc[i] = 0.0f;
    uint s = 0;
    for (uint t = 0; t < T; t++) {
        const uint last = causal ? t + off : S - 1; /* the last key the query sees */
        for (; s <= last; s++) {
            const float vj = PERF_V(vb + (ulong)s * kv_stride, j, HS);
            perf_axpy(acc, vj, fkb + (ulong)s * m, m);
        }
        nd[nd_off + ((ulong)bh * T + t) * (HS + 1) + j] =
            perf_dot(acc, fq + fq_off + ((ulong)bh * T + t) * m, m);
    }
}

/* y[b, t, h*HS + j] = nd[bh, t, j] / nd[bh, t, HS] (0 where nothing is
 * seen). One work-item per element of y's heads. */
__kernel void perf_out(__global float *y, ulong y_off, ulong y_stride, __global const float *nd,
                       ulong nd_off, uint B, uint NH, uint T, uint HS)
{
    const ulong g = get_global_id(0);
    if (g >= (ulong)B * T * NH * HS)
        return;
    const uint j = (uint)(g % HS), h = (uint)(g / HS % NH), t = (uint)(g / HS / NH % T);
    const uint b = (uint)(g / HS / NH / T), bh = b * NH + h;
    __global const float *r = nd + nd_off + ((ulong)bh * T + t) * (HS + 1);
    y[y_off + ((ulong)b * T + t) * y_stride + (ulong)h * HS + j] = r[HS] > 0.0f ? r[j] / r[HS] : 0.0f;
}

/* The backward's row factors: u[bh, t, j] = dy_j / D for j < HS and
 * u[bh, t, HS] = -(dy . y) / D, D = nd[bh, t, HS] (0 where D is 0). One
 * work-item per row (bh, t). */
__kernel void perf_bwd_rows(__global float *u, ulong u_off, __global const float *dy, ulong dy_off,
                            __global const float *y, ulong y_off, ulong y_stride,
                            __global const float *nd, ulong nd_off, uint B, uint NH, uint T,
                            uint HS)
{
    const ulong g = get_global_id(0);
    if (g >= (ulong)B * NH * T)
        return;
    const uint bh = (uint)(g / T), t = (uint)(g - (ulong)bh * T), b = bh / NH, h = bh % NH;
    const ulong row = ((ulong)b * T + t) * y_stride + (ulong)h * HS;
    const float D = nd[nd_off + g * (HS + 1) + HS], inv = D > 0.0f ? 1.0f / D : 0.0f;
    float gy = 0.0f;
    for (uint j = 0; j < HS; j++) {
        gy += dy[dy_off + row + j] * y[y_off + row + j];
        u[u_off + g * (HS + 1) + j] = dy[dy_off + row + j] * inv;
    }
    u[u_off + g * (HS + 1) + HS] = -gy * inv;
}

/* dfq[bh, t, i] = sum_j S_t[i][j] u_t[j]: one work-item per (bh, i), its
 * row of S in private memory, keys added as the queries come to see them. */
__kernel void perf_dfq(__global float *dfq, ulong dfq_off, __global const float *u, ulong u_off,
                       __global const float *fk, ulong fk_off, __global const float *v,
                       ulong v_off, ulong kv_stride, ulong kv_bstride, ulong kv_hstride, uint B,
                       uint NH, uint grp, uint T, uint S, uint HS, uint m, int causal)
{
    const ulong g = get_global_id(0);
    if (g >= (ulong)B * NH * m || HS + 1 > PERF_HS1_MAX)
        return;
    const uint bh = (uint)(g / m), i = (uint)(g - (ulong)bh * m), b = bh / NH, h = bh % NH;
    const uint off = S - T;
    __global const float *vb = v + v_off + (ulong)b * kv_bstride + (ulong)(h / grp) * kv_hstride;
    __global const float *fkb = fk + fk_off + (ulong)bh * S * m;
    float row[PERF_HS1_MAX];
    for (uint j = 0; j <= HS; j++)
        row[j] = 0.0f;
    uint s = 0;
    for (uint t = 0; t < T; t++) {
        const uint last = causal ? t + off : S - 1;
        for (; s <= last; s++) {
            const float a = fkb[(ulong)s * m + i];
            perf_axpy(row, a, vb + (ulong)s * kv_stride, HS);
            row[HS] += a;
        }
        dfq[dfq_off + ((ulong)bh * T + t) * m + i] =
            perf_dot(row, u + u_off + ((ulong)bh * T + t) * (HS + 1), HS + 1);
    }
}

/* The keys' side, from the last key back: G_s[i][j] = the sum of fq_t[i]
 * u_t[j] over the queries that see key s. dfk[bh, s, i] = sum_j G_s[i][j]
 * v_j(s) (mode 0: one work-item per (bh, i), G's row i private), dv (mode
 * 1: one work-item per (bh, j < HS), G's column j private): dv_s[j] =
 * sum_i G_s[i][j] fk_s[i], into dv row s of (b, h) (dv_stride, dv_bstride,
 * dv_hstride as the keys). */
__kernel void perf_dkv(__global float *dfk, ulong dfk_off, __global float *dv, ulong dv_off,
                       ulong dv_stride, ulong dv_bstride, ulong dv_hstride,
                       __global const float *u, ulong u_off, __global const float *fq,
                       ulong fq_off, __global const float *fk, ulong fk_off,
                       __global const float *v, ulong v_off, ulong kv_stride, ulong kv_bstride,
                       ulong kv_hstride, uint B, uint NH, uint T, uint S, uint HS, uint m,
                       int causal, int mode)
{
    const ulong g = get_global_id(0);
    const uint W = mode == 0 ? m : HS;
    if (g >= (ulong)B * NH * W || HS + 1 > PERF_HS1_MAX || m > PERF_M_MAX)
        return;
    const uint bh = (uint)(g / W), c = (uint)(g - (ulong)bh * W), b = bh / NH, h = bh % NH;
    const uint off = S - T, n = mode == 0 ? HS + 1 : m;
    __global const float *vb = v + v_off + (ulong)b * kv_bstride + (ulong)h * kv_hstride;
    __global const float *fkb = fk + fk_off + (ulong)bh * S * m;
    __global const float *fqb = fq + fq_off + (ulong)bh * T * m;
    __global const float *ub = u + u_off + (ulong)bh * T * (HS + 1);
    float acc[PERF_M_MAX > PERF_HS1_MAX ? PERF_M_MAX : PERF_HS1_MAX];
    for (uint k = 0; k < n; k++)
        acc[k] = 0.0f;
    int t = (int)T - 1;
    for (int s = (int)S - 1; s >= 0; s--) {
        /* the queries that see key s and were not added yet */
        for (; t >= 0 && (!causal || t + (int)off >= s); t--) {
            __global const float *ut = ub + (ulong)t * (HS + 1), *ft = fqb + (ulong)t * m;
            if (mode == 0)
                perf_axpy(acc, ft[c], ut, HS + 1);
            else
                perf_axpy(acc, ut[c], ft, m);
        }
        if (mode == 0)
            dfk[dfk_off + ((ulong)bh * S + (ulong)s) * m + c] =
                perf_dot(acc, vb + (ulong)s * kv_stride, HS) + acc[HS];
        else
            dv[dv_off + (ulong)b * dv_bstride + (ulong)h * dv_hstride + (ulong)s * dv_stride + c] =
                perf_dot(acc, fkb + (ulong)s * m, m);
    }
}

/* Through the features: dx = HS^(-1/4) (sum_i df_i f_i w_i - x' sum_i df_i
 * f_i), into dx row r of (b, h) (the layout of x). One work-item per row. */
__kernel void perf_dphi(__global float *dx, ulong dx_off, ulong dx_stride, ulong dx_bstride,
                        ulong dx_hstride, __global const float *x, ulong x_off, ulong x_stride,
                        ulong x_bstride, ulong x_hstride, __global const float *f, ulong f_off,
                        __global const float *df, ulong df_off, uint B, uint NH, uint R, uint HS,
                        uint m, __global const float *om, ulong om_off)
{
    const ulong g = get_global_id(0);
    if (g >= (ulong)B * NH * R)
        return;
    const uint bh = (uint)(g / R), r = (uint)(g - (ulong)bh * R), b = bh / NH, h = bh % NH;
    __global const float *xr =
        x + x_off + (ulong)b * x_bstride + (ulong)h * x_hstride + (ulong)r * x_stride;
    __global float *dr =
        dx + dx_off + (ulong)b * dx_bstride + (ulong)h * dx_hstride + (ulong)r * dx_stride;
    __global const float *fr = f + f_off + g * m, *dfr = df + df_off + g * m;
    const float s4 = rsqrt(sqrt((float)HS));
    float acc[PERF_HS1_MAX];
    for (uint d = 0; d < HS; d++)
        acc[d] = 0.0f;
    float w = 0.0f;
    for (uint i = 0; i < m; i++) { /* sum_i (df_i f_i) w_i, row by row of om */
        const float c = dfr[i] * fr[i];
        __global const float *wi = om + om_off + (ulong)i * HS;
        w += c;
        for (uint d = 0; d < HS; d++)
            acc[d] = fma(c, wi[d], acc[d]);
    }
    for (uint d = 0; d < HS; d++)
        dr[d] = s4 * (acc[d] - xr[d] * s4 * w);
}
