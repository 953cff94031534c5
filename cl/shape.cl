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
 * width, which also measures the width to use. shape_loop_count counts
 * one work-item's loop iterations: a device that ends long loops early
 * (Mesa 22's llvmpipe stops an invocation's loops after 65535 iterations in
 * all, and its results are then silently wrong) counts fewer than asked.
 * shape_fma and shape_muladd run the same chains of multiply-adds written
 * as fma() and as a * b + c: a device that emulates fma() in software runs
 * the first many times slower, and the kernels then use the second
 * (common.cl's CLF_FMA).
 * None of the preamble's defines is read here: this program is built before
 * they are decided.
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

/* n iterations, each adding one[i & 15] (ones the host wrote, so the
 * compiler cannot fold the loop into its count): out[0] = iterations run. */
__kernel void shape_loop_count(__global const uint *one, uint n, __global uint *out)
{
    uint c = 0;
    for (uint i = 0; i < n; i++)
        c += one[i & 15u];
    out[0] = c;
}

/* Eight independent chains of n multiply-adds per work-item (enough to
 * cover the unit's latency), as OP; one sum written so nothing is dropped. */
#define SHAPE_MULADD(a, b, c) ((a) * (b) + (c))
#define SHAPE_CHAINS(NAME, OP)                                                            \
    __kernel void NAME(__global float *out, uint n, float m, float c)                     \
    {                                                                                     \
        const float x = (float)get_global_id(0) * 1e-7f;                                  \
        float a0 = x, a1 = x + 1.0f, a2 = x + 2.0f, a3 = x + 3.0f, a4 = x + 4.0f,           \
              a5 = x + 5.0f, a6 = x + 6.0f, a7 = x + 7.0f;                                 \
        for (uint i = 0; i < n; i++) {                                                    \
            a0 = OP(a0, m, c);                                                            \
            a1 = OP(a1, m, c);                                                            \
            a2 = OP(a2, m, c);                                                            \
            a3 = OP(a3, m, c);                                                            \
            a4 = OP(a4, m, c);                                                            \
            a5 = OP(a5, m, c);                                                            \
            a6 = OP(a6, m, c);                                                            \
            a7 = OP(a7, m, c);                                                            \
        }                                                                                 \
        out[get_global_id(0)] = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));        \
    }
SHAPE_CHAINS(shape_fma, fma)
SHAPE_CHAINS(shape_muladd, SHAPE_MULADD)
