/*
 * shape.cl - how the device runs work-items, measured (runtime/shape.c).
 *
 * The library's kernels come in two shapes: one work-item per row walking
 * it with vector loads (for devices whose work-groups run item by item, a
 * core each) and one work-group per row whose items stride through it and
 * meet in a local-memory tree (for devices that run a group's items side
 * by side, in SIMD lanes or threads). These kernels are the two shapes of
 * one row sum over R rows of N floats; the host times them and builds the
 * other programs for the faster. The item shape is timed at each vector
 * width, which also measures the width to use. None of the preamble's
 * defines is read here: this program is built before they are decided.
 */

#define SHAPE_ITEM(W)                                                                       \
    __kernel void shape_rows_item##W(__global const float *x, ulong N, __global float *out) \
    {                                                                                       \
        const ulong r = get_global_id(0);                                                   \
        const __global float *p = x + r * N;                                                \
        float##W s = (float##W)(0.0f);                                                      \
        for (ulong j = 0; j + W <= N; j += W)                                               \
            s += vload##W(0, p + j);                                                        \
        float t[W];                                                                         \
        vstore##W(s, 0, t);                                                                 \
        float sum = 0.0f;                                                                   \
        for (int i = 0; i < W; i++)                                                         \
            sum += t[i];                                                                    \
        out[r] = sum;                                                                       \
    }
SHAPE_ITEM(4)
SHAPE_ITEM(8)
SHAPE_ITEM(16)

/* One work-group per row; the local size a power of two. */
__kernel void shape_rows_group(__global const float *x, ulong N, __global float *out,
                               __local float *t)
{
    const uint l = get_local_id(0), n = get_local_size(0);
    const __global float *p = x + get_group_id(0) * N;
    float s = 0.0f;
    for (ulong j = l; j < N; j += n)
        s += p[j];
    t[l] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = n / 2; h > 0; h >>= 1) {
        if (l < h)
            t[l] += t[l + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0)
        out[get_group_id(0)] = t[0];
}
