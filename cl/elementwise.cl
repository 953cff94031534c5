/*
 * elementwise.cl - pointwise kernels: add, axpy, activations and their
 * derivatives, fused bias + activation, bias gradient, SwiGLU.
 *
 * Design
 * - Each work-item handles 8 consecutive elements (8 consecutive columns of
 *   one row for the [R, N] kernels) as a float8, with a scalar loop for the
 *   < 8 left at the end of the tensor or row; the activation kernels take 16
 *   (below).
 *   Explicit vectors matter on PoCL: exp() of a float8 runs vectorised math,
 *   while a scalar exp() in a work-item loop stays a scalar call per element
 *   (GELU-tanh measured 2-3x slower that way). GPUs read the float8 as one
 *   wide load.
 * - Each activation is written once as a value and a derivative function,
 *   instantiated for float and float8 by CLF_ACT_FUNCS (conditionals are
 *   select(), valid for both); CLF_ACT_KERNELS stamps out its backward
 *   kernel, so no kernel switches on the activation at run time (the
 *   forward runs in the GEMM's epilogue, cl/gemm.cl). Names:
 *   act_backward_<act>.
 * - The activation kernels (act_backward_*) take
 *   CLF_ACT_W = 16 elements per work-item as a float16: one AVX-512 register
 *   on CPUs. PoCL runs each work-item's vector code as written and does not
 *   interleave work-items, so a long dependent chain (GELU's erfc) is bound
 *   by latency; the wider vector halves the number of chains (bias + GELU
 *   over [768, 512] on PoCL: 400 -> 300 us).
 * - GELU's normal CDF uses a vectorisable erfc (with PoCL's scalar erfc the
 *   GELU kernel ran ~50x slower) whose exponential is clf_exp_nonpos, a
 *   polynomial e^x for x <= 0 built from FMAs and integer bit operations only
 *   (PoCL's exp() of a vector cost as much again as the rest of GELU: with
 *   it, 300 -> 230 us). GELU-tanh is computed as x * sigmoid(2u), which does
 *   not cancel for large |u| as 1 + tanh(u) does, and also needs e^x only for
 *   x <= 0.
 * - Backward kernels take `acc`: 1 adds into the gradient, 0 overwrites it
 *   (without reading it, so an uninitialised gradient buffer is fine).
 * - The bias gradient (column sums of [R, N]) is deterministic: every column
 *   is summed in a fixed order. Its input may be stored in 16 bits (d_t,
 *   common.cl's CLF_T_*; d_off then counts 2-byte elements): a gradient
 *   that train.precision keeps in 16 bits. Two variants, picked by the host per device:
 *     bias_backward_item   one work-item owns 32 adjacent columns and walks
 *                          the rows; for CPUs (no local memory needed).
 *     bias_backward_group  a 2-D work-group of CLF_COLS_X columns x a power
 *                          of two of row lanes up to CLF_COLS_Y (the host
 *                          keeps within the kernel's work-group limit); lanes
 *                          sum strided rows, then a local-memory tree in
 *                          fixed order; for GPUs.
 *
 * Not here: reductions over whole tensors (reduce.cl), anything that needs
 * random numbers (dropout lives with its op family).
 */

/* CLF_COLS_X, CLF_COLS_Y (bias_backward_group's work-group), CLF_ACT_W
 * (elements per work-item of the activation kernels) and CLF_COL_W
 * (columns per work-item of the *_item column sums): runtime/contract.h. */


/* ---- add, zero, axpy: 8 elements per work-item ----------------------------- */

/* out = a + b; out may alias a or b (same index only). */
__kernel void add_f32(__global float *out, ulong out_off, __global const float *a, ulong a_off,
                      __global const float *b, ulong b_off, ulong n)
{
    out += out_off;
    a += a_off;
    b += b_off;
    ulong i = get_global_id(0) * 8;
    if (i + 8 <= n)
        vstore8(vload8(0, a + i) + vload8(0, b + i), 0, out + i);
    else
        for (; i < n; i++)
            out[i] = a[i] + b[i];
}

/* out = 0 (a kernel: PoCL's clEnqueueFillBuffer fills on one thread, 4-5x
 * slower than this on two cores for a 3 MB gradient buffer) */
__kernel void zero_f32(__global float *out, ulong out_off, ulong n)
{
    out += out_off;
    ulong i = get_global_id(0) * 8;
    if (i + 8 <= n)
        vstore8((float8)(0.0f), 0, out + i);
    else
        for (; i < n; i++)
            out[i] = 0.0f;
}

/* The exponential moving average of the parameters (train.ema): e += w *
 * (p - e) with w = 1 - decay (torch's lerp form, as AveragedModel's EMA);
 * w = 1 copies p exactly (the first update). */
__kernel void ema_f32(__global float *e, ulong e_off, __global const float *p, ulong p_off,
                      float w, ulong n)
{
    e += e_off;
    p += p_off;
    ulong i = get_global_id(0) * 8;
    if (w == 1.0f) {
        if (i + 8 <= n)
            vstore8(vload8(0, p + i), 0, e + i);
        else
            for (; i < n; i++)
                e[i] = p[i];
    } else if (i + 8 <= n) {
        const float8 ei = vload8(0, e + i);
        vstore8(ei + w * (vload8(0, p + i) - ei), 0, e + i);
    } else {
        for (; i < n; i++)
            e[i] = e[i] + w * (p[i] - e[i]);
    }
}

/* a and b exchanged, bit for bit (the parameters and their EMA around an
 * evaluation). */
__kernel void swap_f32(__global float *a, ulong a_off, __global float *b, ulong b_off, ulong n)
{
    a += a_off;
    b += b_off;
    ulong i = get_global_id(0) * 8;
    if (i + 8 <= n) {
        const float8 x = vload8(0, a + i);
        vstore8(vload8(0, b + i), 0, a + i);
        vstore8(x, 0, b + i);
    } else {
        for (; i < n; i++) {
            const float x = a[i];
            a[i] = b[i];
            b[i] = x;
        }
    }
}

/* y += a * x */
__kernel void axpy_f32(__global float *y, ulong y_off, float a, __global const float *x,
                       ulong x_off, ulong n)
{
    y += y_off;
    x += x_off;
    ulong i = get_global_id(0) * 8;
    if (i + 8 <= n)
        vstore8(vload8(0, y + i) + a * vload8(0, x + i), 0, y + i);
    else
        for (; i < n; i++)
            y[i] += a * x[i];
}

/* ---- activation kernels -------------------------------------------------- */

#define CLF_ACT_KERNELS(NAME)                                                                 \
    __kernel void act_backward_##NAME(__global float *din, ulong din_off,                    \
                                      __global const float *dout, ulong dout_off,            \
                                      __global const float *in, ulong in_off, ulong n,       \
                                      int acc)                                               \
    {                                                                                        \
        din += din_off;                                                                      \
        dout += dout_off;                                                                    \
        in += in_off;                                                                        \
        ulong i = get_global_id(0) * CLF_ACT_W;                                                      \
        if (i + CLF_ACT_W <= n) {                                                                    \
            float16 g = vload16(0, dout + i) * clf_##NAME##_grad16(vload16(0, in + i));          \
            if (acc)                                                                         \
                g += vload16(0, din + i);                                                     \
            vstore16(g, 0, din + i);                                                          \
            return;                                                                          \
        }                                                                                    \
        for (; i < n; i++) {                                                                 \
            float g = dout[i] * clf_##NAME##_grad(in[i]);                                    \
            if (acc)                                                                         \
                g += din[i];                                                                 \
            din[i] = g;                                                                      \
        }                                                                                    \
    }

CLF_ACT_KERNELS(none)
CLF_ACT_KERNELS(relu)
CLF_ACT_KERNELS(gelu_erf)
CLF_ACT_KERNELS(gelu_tanh)
CLF_ACT_KERNELS(silu)

/* ---- bias gradient: dbias[c] (=|+=) sum_r d[r,c] -------------------------- */

/* Rows are summed in blocks of CLF_COL_BLOCK into a block sum that is then
 * added to the total: error grows with R/64 + 64 rather than R. */
#define CLF_COL_BLOCK 64

/* One work-item per CLF_COL_W adjacent columns, walking all rows: each row
 * contributes 128 contiguous bytes, which CPUs prefetch well (8 columns per
 * work-item ran at a third of the speed). A full block keeps its sums in four
 * float8; the last, partial block (< CLF_COL_W columns) keeps them in private
 * arrays. Every column is summed in the same order either way. */
__kernel CLF_ITEM_HINT(float8) void
bias_backward_item(__global float *dbias, ulong dbias_off, __global const float *d,
                   ulong d_off, uint d_t, ulong R, ulong N, int acc)
{
    dbias += dbias_off;
    ulong c0 = get_global_id(0) * CLF_COL_W;
    if (c0 >= N)
        return;
    if (c0 + CLF_COL_W <= N) {
        float8 t0 = 0.0f, t1 = 0.0f, t2 = 0.0f, t3 = 0.0f;
        for (ulong r0 = 0; r0 < R; r0 += CLF_COL_BLOCK) {
            ulong r1 = min(R, r0 + (ulong)CLF_COL_BLOCK);
            float8 s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
            for (ulong r = r0; r < r1; r++) {
                const ulong p = d_off + r * N + c0;
                s0 += clf_load8_t(d, d_t, p);
                s1 += clf_load8_t(d, d_t, p + 8);
                s2 += clf_load8_t(d, d_t, p + 16);
                s3 += clf_load8_t(d, d_t, p + 24);
            }
            t0 += s0;
            t1 += s1;
            t2 += s2;
            t3 += s3;
        }
        __global float *o = dbias + c0;
        if (acc) {
            t0 += vload8(0, o);
            t1 += vload8(1, o);
            t2 += vload8(2, o);
            t3 += vload8(3, o);
        }
        vstore8(t0, 0, o);
        vstore8(t1, 1, o);
        vstore8(t2, 2, o);
        vstore8(t3, 3, o);
        return;
    }
    uint w = (uint)(N - c0);
    float t[CLF_COL_W], s[CLF_COL_W];
    for (uint c = 0; c < w; c++)
        t[c] = 0.0f;
    for (ulong r0 = 0; r0 < R; r0 += CLF_COL_BLOCK) {
        ulong r1 = min(R, r0 + (ulong)CLF_COL_BLOCK);
        for (uint c = 0; c < w; c++)
            s[c] = 0.0f;
        for (ulong r = r0; r < r1; r++)
            for (uint c = 0; c < w; c++)
                s[c] += clf_load_t(d, d_t, d_off + r * N + c0 + c);
        for (uint c = 0; c < w; c++)
            t[c] += s[c];
    }
    for (uint c = 0; c < w; c++)
        dbias[c0 + c] = acc ? dbias[c0 + c] + t[c] : t[c];
}

/* Work-group CLF_COLS_X x ny (a power of two <= CLF_COLS_Y): lane y sums rows
 * y, y + ny, ...; then the ny partial sums of a column meet in a fixed tree. */
__kernel void bias_backward_group(__global float *dbias, ulong dbias_off,
                                  __global const float *d, ulong d_off, uint d_t, ulong R,
                                  ulong N, int acc)
{
    __local float part[CLF_COLS_Y][CLF_COLS_X];
    dbias += dbias_off;
    size_t c = get_global_id(0);
    uint lx = get_local_id(0), ly = get_local_id(1), ny = get_local_size(1);
    float s = 0.0f;
    if (c < N)
        for (ulong r = ly; r < R; r += ny)
            s += clf_load_t(d, d_t, d_off + r * N + c);
    part[ly][lx] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = ny / 2; h > 0; h >>= 1) {
        if (ly < h)
            part[ly][lx] += part[ly + h][lx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (ly == 0 && c < N) {
        float total = part[0][lx];
        if (acc)
            total += dbias[c];
        dbias[c] = total;
    }
}

/* ---- SwiGLU over [R, 2H] -> [R, H] ----------------------------------------- */

/* One work-item per 8 columns of a row, rows after one another in one
 * dimension (item i: row i / ceil(H/8)), so any number of rows launches
 * (the second dimension of a launch is capped at 65535 groups on some
 * GPUs). */
#define SWIGLU_ITEM(r, c)                                                                          \
    ulong cw_ = (H + 7) / 8, i_ = get_global_id(0), r = i_ / cw_, c = (i_ - r * cw_) * 8;         \
    if (r >= R)                                                                                    \
        return;

/* out[r,c] = silu(in[r,c]) * in[r,H+c]. */
__kernel void swiglu_forward(__global float *out, ulong out_off, __global const float *in,
                             ulong in_off, ulong R, ulong H)
{
    SWIGLU_ITEM(r, c)
    out += out_off + r * H;
    __global const float *g = in + in_off + r * 2 * H, *u = g + H;
    if (c + 8 <= H) {
        vstore8(clf_silu8(vload8(0, g + c)) * vload8(0, u + c), 0, out + c);
        return;
    }
    for (; c < H; c++)
        out[c] = clf_silu(g[c]) * u[c];
}

/* din[r,c] = dout * u * silu'(g); din[r,H+c] = dout * silu(g). */
__kernel void swiglu_backward(__global float *din, ulong din_off, __global const float *dout,
                              ulong dout_off, __global const float *in, ulong in_off, ulong R,
                              ulong H)
{
    SWIGLU_ITEM(r, c)
    dout += dout_off + r * H;
    __global const float *g = in + in_off + r * 2 * H, *u = g + H;
    __global float *dg = din + din_off + r * 2 * H, *du = dg + H;
    if (c + 8 <= H) {
        float8 gv = vload8(0, g + c), d = vload8(0, dout + c);
        float8 s = clf_sigmoid8(gv);
        vstore8(d * vload8(0, u + c) * s * (1.0f + gv * (1.0f - s)), 0, dg + c);
        vstore8(d * gv * s, 0, du + c);
        return;
    }
    for (; c < H; c++) {
        float gv = g[c], d = dout[c], s = clf_sigmoid(gv);
        dg[c] = d * u[c] * s * (1.0f + gv * (1.0f - s));
        du[c] = d * gv * s;
    }
}
