/*
 * reduce.cl - row reductions (sum, max, argmax over the last dimension of [R, N]) and
 * whole-tensor sums (sum, sum of squares) in two deterministic stages, and
 * masked mean pooling over positions (the classifier's mean head).
 *
 * Design
 * - Every reduction has a fixed order for a given size and device, so results
 *   are bit-reproducible; no atomics.
 * - Two variants of each row kernel, chosen by the host per device type:
 *     *_item   one work-item per row; the row is read as float8 into eight
 *              lane accumulators, then a fixed pairwise combine and a scalar
 *              tail. For CPUs, where local memory is emulated and each
 *              work-group is a loop, this vectorises within the row.
 *     *_group  one work-group per row (power-of-two size L, host-chosen);
 *              lane i reads columns i, i + L, ... (coalesced), then a
 *              local-memory tree. For GPUs. Group kernels never return early:
 *              a group past the last row runs with 0 columns, so that every
 *              work-item reaches every barrier (PoCL 3.1 miscompiles a
 *              uniform early return ahead of barriers into stray writes).
 * - Whole-tensor sums: stage 1 splits [0, n) into P contiguous parts (P is
 *   the scratch size, fixed by n and the device) and writes one partial per
 *   part (sum_parts_item / sum_parts_group); stage 2 (sum_finish) adds the P
 *   partials in index order in one work-item and divides the result (by 1,
 *   or by n for the mean). Long sums are blocked (a block sum of CLF_BLOCK
 *   elements added to a running total) to keep float error small.
 *
 * Not here: column reductions (bias and norm parameter gradients live with
 * their kernels), the attention's softmax (flash/, attention.cl).
 */

#define CLF_BLOCK 64

/* ---- row sum / row max ------------------------------------------------------ */

__kernel void row_sum_item(__global float *out, ulong out_off, __global const float *in,
                           ulong in_off, ulong R, ulong N)
{
    out += out_off;
    in += in_off;
    ulong r = get_global_id(0);
    if (r >= R)
        return;
    __global const float *x = in + r * N;
    float8 a = (float8)(0.0f);
    ulong j = 0;
    for (; j + 8 <= N; j += 8)
        a += vload8(0, x + j);
    float s = clf_hsum8(a);
    for (; j < N; j++)
        s += x[j];
    out[r] = s;
}

__kernel void row_max_item(__global float *out, ulong out_off, __global const float *in,
                           ulong in_off, ulong R, ulong N)
{
    out += out_off;
    in += in_off;
    ulong r = get_global_id(0);
    if (r >= R)
        return;
    __global const float *x = in + r * N;
    float8 a = (float8)(-INFINITY);
    ulong j = 0;
    for (; j + 8 <= N; j += 8)
        a = fmax(a, vload8(0, x + j));
    float m = clf_hmax8(a);
    for (; j < N; j++)
        m = fmax(m, x[j]);
    out[r] = m;
}

__kernel void row_sum_group(__global float *out, ulong out_off, __global const float *in,
                            ulong in_off, ulong R, ulong N, __local float *buf)
{
    out += out_off;
    in += in_off;
    ulong r = get_group_id(0);
    uint lid = get_local_id(0), L = get_local_size(0);
    ulong n = r < R ? N : 0; /* no early return: every item must reach the barriers */
    __global const float *x = in + r * N;
    float s = 0.0f;
    for (ulong j = lid; j < n; j += L)
        s += x[j];
    s = clf_group_sum(s, buf);
    if (lid == 0 && r < R)
        out[r] = s;
}

__kernel void row_max_group(__global float *out, ulong out_off, __global const float *in,
                            ulong in_off, ulong R, ulong N, __local float *buf)
{
    out += out_off;
    in += in_off;
    ulong r = get_group_id(0);
    uint lid = get_local_id(0), L = get_local_size(0);
    ulong n = r < R ? N : 0;
    __global const float *x = in + r * N;
    float m = -INFINITY;
    for (ulong j = lid; j < n; j += L)
        m = fmax(m, x[j]);
    m = clf_group_max(m, buf);
    if (lid == 0 && r < R)
        out[r] = m;
}

/* ---- greedy choice: a row's argmax ---------------------------------------------
 * For rows r < R of in [R, N] (row stride ld): idx[r] = the index of the
 * largest value, the lowest index among equal maxima, NaN never chosen, -1
 * where every value is NaN (model/infer/sampler.h's temperature 0, on the
 * same floats), and with has_tok tok[r] the same with 0 for -1 (a token a
 * decoding step can read; the host sees the -1 in idx). */

/* Whether (v, i) comes before (bv, bi) in the greedy order: valid (not NaN)
 * before invalid, then larger, then the lower index; bi < 0: invalid. */
static inline int argmax_before(float v, int i, float bv, int bi)
{
    return i >= 0 && (bi < 0 || v > bv || (v == bv && i < bi));
}

__kernel void row_argmax_item(__global int *idx, ulong idx_off, __global int *tok, ulong tok_off,
                              int has_tok, __global const float *in, ulong in_off, ulong ld,
                              ulong R, ulong N)
{
    const ulong r = get_global_id(0);
    if (r >= R)
        return;
    __global const float *x = in + in_off + r * ld;
    float b = 0.0f;
    int bi = -1;
    for (ulong j = 0; j < N; j++) {
        const float v = x[j];
        if (!isnan(v) && (bi < 0 || v > b)) {
            b = v;
            bi = (int)j;
        }
    }
    idx[idx_off + r] = bi;
    if (has_tok)
        tok[tok_off + r] = max(bi, 0);
}

/* One work-group per row: lane i scans columns i, i + L, ... in order, then
 * a local-memory tree under argmax_before. */
__kernel void row_argmax_group(__global int *idx, ulong idx_off, __global int *tok, ulong tok_off,
                               int has_tok, __global const float *in, ulong in_off, ulong ld,
                               ulong R, ulong N, __local float *bv, __local int *bix)
{
    const ulong r = get_group_id(0);
    const uint lid = get_local_id(0), L = get_local_size(0);
    const ulong n = r < R ? N : 0; /* no early return: every item reaches the barriers */
    __global const float *x = in + in_off + r * ld;
    float b = 0.0f;
    int bi = -1;
    for (ulong j = lid; j < n; j += L) {
        const float v = x[j];
        if (!isnan(v) && (bi < 0 || v > b)) {
            b = v;
            bi = (int)j;
        }
    }
    bv[lid] = b;
    bix[lid] = bi;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = L / 2; h > 0; h >>= 1) {
        if (lid < h && argmax_before(bv[lid + h], bix[lid + h], bv[lid], bix[lid])) {
            bv[lid] = bv[lid + h];
            bix[lid] = bix[lid + h];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0 && r < R) {
        idx[idx_off + r] = bix[0];
        if (has_tok)
            tok[tok_off + r] = max(bix[0], 0);
    }
}

/* ---- whole-tensor sums, stage 1: one partial per part ---------------------- */

/* Part p covers [p * chunk, min(n, (p + 1) * chunk)). sq = 1 sums squares. */
__kernel void sum_parts_item(__global float *parts, ulong parts_off, __global const float *in,
                             ulong in_off, ulong n, ulong chunk, uint P, int sq)
{
    parts += parts_off;
    in += in_off;
    uint p = get_global_id(0);
    if (p >= P)
        return;
    ulong j = (ulong)p * chunk, end = min(n, j + chunk);
    float total = 0.0f;
    while (j + 8 <= end) {
        ulong bend = min(end, j + 8 * CLF_BLOCK);
        float8 a = (float8)(0.0f);
        for (; j + 8 <= bend; j += 8) {
            float8 v = vload8(0, in + j);
            a += sq ? v * v : v;
        }
        total += clf_hsum8(a);
    }
    for (; j < end; j++) {
        float v = in[j];
        total += sq ? v * v : v;
    }
    parts[p] = total;
}

__kernel void sum_parts_group(__global float *parts, ulong parts_off, __global const float *in,
                              ulong in_off, ulong n, ulong chunk, uint P, int sq,
                              __local float *buf)
{
    parts += parts_off;
    in += in_off;
    uint p = get_group_id(0);
    uint lid = get_local_id(0), L = get_local_size(0);
    ulong start = min(n, (ulong)p * chunk), end = min(n, start + chunk);
    float total = 0.0f;
    for (ulong b = start; b < end; b += (ulong)L * CLF_BLOCK) {
        ulong bend = min(end, b + (ulong)L * CLF_BLOCK);
        float s = 0.0f;
        for (ulong j = b + lid; j < bend; j += L) {
            float v = in[j];
            s += sq ? v * v : v;
        }
        total += s;
    }
    total = clf_group_sum(total, buf);
    if (lid == 0 && p < P)
        parts[p] = total;
}

/* ---- stage 2: out[0] = (sum of the P partials, in index order) / div ------- */

__kernel void sum_finish(__global float *out, ulong out_off, __global const float *parts,
                         ulong parts_off, uint P, float div)
{
    out += out_off;
    parts += parts_off;
    if (get_global_id(0) != 0)
        return;
    float s = 0.0f;
    for (uint p = 0; p < P; p++)
        s += parts[p];
    out[0] = s / div;
}

/* ---- pooling ---- */

/* mean_pool_forward / _backward: out[b, c] = sum_s keep[b,s] x[b,s,c] /
 * max(1, sum_s keep[b,s]), and its transpose dx[b,s,c] = keep[b,s]
 * dout[b,c] / count (overwrite). One work-item per (b, c), looping over s
 * in order (deterministic); consecutive items read consecutive channels. */
/* One item per (b, c): n = B*C. */
__kernel void mean_pool_forward(__global float *out, ulong out_off, __global const float *x,
                                ulong x_off, __global const int *keep, ulong keep_off, uint n,
                                uint S, uint C)
{
    uint i = get_global_id(0);
    if (i >= n)
        return;
    uint b = i / C, c = i - b * C;
    x += x_off + (ulong)b * S * C + c;
    keep += keep_off + (ulong)b * S;
    float acc = 0.0f;
    uint cnt = 0;
    for (uint s = 0; s < S; s++) {
        if (keep[s] != 0) {
            acc += x[(ulong)s * C];
            cnt++;
        }
    }
    out[out_off + i] = acc / (float)max(cnt, 1u);
}

__kernel void mean_pool_backward(__global float *dx, ulong dx_off, __global const float *dout,
                                 ulong dout_off, __global const int *keep, ulong keep_off,
                                 uint n, uint S, uint C)
{
    uint i = get_global_id(0);
    if (i >= n)
        return;
    uint b = i / C, c = i - b * C;
    dx += dx_off + (ulong)b * S * C + c;
    keep += keep_off + (ulong)b * S;
    uint cnt = 0;
    for (uint s = 0; s < S; s++)
        cnt += keep[s] != 0;
    float g = dout[dout_off + i] / (float)max(cnt, 1u);
    for (uint s = 0; s < S; s++)
        dx[(ulong)s * C] = keep[s] != 0 ? g : 0.0f;
}
