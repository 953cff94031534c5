/*
 * softmax.cl - row-wise softmax over [R, N] with optional masks, and its
 * backward pass.
 *
 * Design
 * - y = softmax(scale * x + additive) with entries removed by a keep mask
 *   (int32, 0 = drop) or by causality. A removed entry, or one whose logit is
 *   -inf (an additive mask may use -inf), has probability exactly 0; a row
 *   with nothing left is all zeros, never NaN.
 * - Three passes over the row (it stays in cache): max over kept entries;
 *   e = exp(v - max) written to y while summing; y *= 1 / sum. Subtracting
 *   the max keeps logits of 1e4 and beyond finite. Causality is applied by
 *   shortening the row (columns past the last visible key are written 0)
 *   rather than testing every entry.
 * - Mask arguments: add_rows 0 = no additive mask, else row r uses additive
 *   row r % add_rows; keep_group 0 = no keep mask, else row r uses keep row
 *   r / keep_group; causal_T 0 = not causal, else query q = r % causal_T sees
 *   columns j <= q + N - causal_T. Unused buffers are any valid buffer.
 * - Two variants as in reduce.cl: *_item (one work-item per row, float8 lanes,
 *   for CPUs) and *_group (one work-group per row, lane-strided columns and a
 *   local-memory tree, for GPUs). The host picks one per device. Group
 *   kernels never return early (see reduce.cl: PoCL 3.1 miscompiles that).
 * - Backward: dx = scale * y * (dy - sum_j dy_j y_j); masked entries have
 *   y = 0 and so get 0.
 *
 * Not here: fused attention (attention.cl), the fused softmax + cross-entropy
 * of the loss.
 */

/* Number of leading columns of row r that causality leaves visible. */
static inline ulong clf_causal_cols(ulong r, ulong N, ulong causal_T)
{
    if (causal_T == 0)
        return N;
    long last = (long)(r % causal_T) + (long)N - (long)causal_T;
    if (last < 0)
        return 0;
    return min(N, (ulong)last + 1);
}

/* The masked logit of column j (one value, or eight from j on). a / k are
 * NULL when that mask is absent. */
static inline float clf_logit(__global const float *x, __global const float *a, __global const int *k,
                       ulong j, float scale)
{
    float v = x[j] * scale;
    if (a)
        v += a[j];
    if (k && k[j] == 0)
        v = -INFINITY;
    return v;
}
static inline float8 clf_logit8(__global const float *x, __global const float *a,
                         __global const int *k, ulong j, float scale)
{
    float8 v = vload8(0, x + j) * scale;
    if (a)
        v += vload8(0, a + j);
    if (k)
        v = select(v, (float8)(-INFINITY), vload8(0, k + j) == (int8)(0));
    return v;
}

__kernel void softmax_forward_item(__global float *y, ulong y_off, __global const float *x,
                                   ulong x_off, ulong R, ulong N, float scale,
                                   __global const float *add, ulong add_off, ulong add_rows,
                                   __global const int *keep, ulong keep_off, ulong keep_group,
                                   ulong causal_T)
{
    ulong r = get_global_id(0);
    if (r >= R)
        return;
    y += y_off + r * N;
    x += x_off + r * N;
    __global const float *a = add_rows ? add + add_off + (r % add_rows) * N : 0;
    __global const int *k = keep_group ? keep + keep_off + (r / keep_group) * N : 0;
    ulong nv = clf_causal_cols(r, N, causal_T);
    ulong j;
    /* pass 1: max over kept entries */
    float8 m8 = (float8)(-INFINITY);
    for (j = 0; j + 8 <= nv; j += 8)
        m8 = fmax(m8, clf_logit8(x, a, k, j, scale));
    float m = clf_hmax8(m8);
    for (; j < nv; j++)
        m = fmax(m, clf_logit(x, a, k, j, scale));
    if (m == -INFINITY) { /* nothing kept: zeros */
        for (j = 0; j < N; j++)
            y[j] = 0.0f;
        return;
    }
    /* pass 2: e = exp(v - m) into y, summed */
    float8 s8 = (float8)(0.0f);
    for (j = 0; j + 8 <= nv; j += 8) {
        float8 e = exp(clf_logit8(x, a, k, j, scale) - m);
        vstore8(e, 0, y + j);
        s8 += e;
    }
    float s = clf_hsum8(s8);
    for (; j < nv; j++) {
        float e = exp(clf_logit(x, a, k, j, scale) - m);
        y[j] = e;
        s += e;
    }
    /* pass 3: normalise; hidden columns are 0 */
    float inv = 1.0f / s;
    for (j = 0; j + 8 <= nv; j += 8)
        vstore8(vload8(0, y + j) * inv, 0, y + j);
    for (; j < nv; j++)
        y[j] *= inv;
    for (; j < N; j++)
        y[j] = 0.0f;
}

__kernel void softmax_forward_group(__global float *y, ulong y_off, __global const float *x,
                                    ulong x_off, ulong R, ulong N, float scale,
                                    __global const float *add, ulong add_off, ulong add_rows,
                                    __global const int *keep, ulong keep_off, ulong keep_group,
                                    ulong causal_T, __local float *buf)
{
    /* No early return anywhere: every work-item reaches every barrier. A
     * group past the last row works on 0 columns. */
    ulong r = get_group_id(0);
    uint lid = get_local_id(0), L = get_local_size(0);
    ulong n = r < R ? N : 0;
    y += y_off + r * N;
    x += x_off + r * N;
    __global const float *a = add_rows ? add + add_off + (r % add_rows) * N : 0;
    __global const int *k = keep_group ? keep + keep_off + (r / keep_group) * N : 0;
    ulong nv = min(n, clf_causal_cols(r, N, causal_T));
    float m = -INFINITY;
    for (ulong j = lid; j < nv; j += L)
        m = fmax(m, clf_logit(x, a, k, j, scale));
    m = clf_group_max(m, buf);
    int empty = m == -INFINITY; /* nothing kept: the row is zeros */
    float s = 0.0f;
    if (!empty)
        for (ulong j = lid; j < nv; j += L) {
            float e = exp(clf_logit(x, a, k, j, scale) - m);
            y[j] = e;
            s += e;
        }
    s = clf_group_sum(s, buf);
    float inv = empty ? 0.0f : 1.0f / s;
    /* each lane rescales the entries it wrote itself: no barrier needed */
    for (ulong j = lid; j < n; j += L)
        y[j] = (!empty && j < nv) ? y[j] * inv : 0.0f;
}

/* ---- backward: dx = scale * y * (dy - sum(dy * y)) ----------------------- */

__kernel void softmax_backward_item(__global float *dx, ulong dx_off, __global const float *dy,
                                    ulong dy_off, __global const float *y, ulong y_off, ulong R,
                                    ulong N, float scale)
{
    ulong r = get_global_id(0);
    if (r >= R)
        return;
    dx += dx_off + r * N;
    dy += dy_off + r * N;
    y += y_off + r * N;
    ulong j;
    float8 d8 = (float8)(0.0f);
    for (j = 0; j + 8 <= N; j += 8)
        d8 += vload8(0, dy + j) * vload8(0, y + j);
    float dot = clf_hsum8(d8);
    for (; j < N; j++)
        dot += dy[j] * y[j];
    for (j = 0; j + 8 <= N; j += 8)
        vstore8(scale * vload8(0, y + j) * (vload8(0, dy + j) - dot), 0, dx + j);
    for (; j < N; j++)
        dx[j] = scale * y[j] * (dy[j] - dot);
}

__kernel void softmax_backward_group(__global float *dx, ulong dx_off, __global const float *dy,
                                     ulong dy_off, __global const float *y, ulong y_off,
                                     ulong R, ulong N, float scale, __local float *buf)
{
    ulong r = get_group_id(0);
    uint lid = get_local_id(0), L = get_local_size(0);
    ulong n = r < R ? N : 0; /* no early return (barriers) */
    dx += dx_off + r * N;
    dy += dy_off + r * N;
    y += y_off + r * N;
    float dot = 0.0f;
    for (ulong j = lid; j < n; j += L)
        dot += dy[j] * y[j];
    dot = clf_group_sum(dot, buf);
    for (ulong j = lid; j < n; j += L)
        dx[j] = scale * y[j] * (dy[j] - dot);
}
