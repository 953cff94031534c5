/*
 * ops/elementwise.c - host wrappers of cl/elementwise.cl: add, axpy, the
 * activations' backward, the bias gradient, SwiGLU.
 *
 * Design: each wrapper checks its arguments, fetches its kernel (the runtime
 * caches kernels by name), and enqueues one launch with a work-group size
 * fixed per kernel and device. Activations' derivatives map to kernels
 * named act_backward_<act>; no kernel switches on the activation at run
 * time (the forward runs in the GEMM's epilogue). CLF_ACT_NONE's backward is
 * a buffer copy (or nothing when the pointers coincide) or an axpy.
 *
 * Not here: dropout (random.c), reductions
 * (ops/reduce.c).
 */
#include <stdio.h>

#include "model/ops/ops_internal.h"

/* The backward kernel of an activation; CLF_K_COUNT for none (NONE is a
 * copy or an axpy) or an unknown value. */
static clf_kernel_id act_backward_kernel(clf_act act)
{
    switch (act) {
        case CLF_ACT_NONE: return CLF_K_COUNT;
        case CLF_ACT_RELU: return CLF_K_ACT_BACKWARD_RELU;
        case CLF_ACT_GELU_ERF: return CLF_K_ACT_BACKWARD_GELU_ERF;
        case CLF_ACT_GELU_TANH: return CLF_K_ACT_BACKWARD_GELU_TANH;
        case CLF_ACT_SILU: return CLF_K_ACT_BACKWARD_SILU;
    }
    return CLF_K_COUNT;
}

static int same_ptr(clf_ptr a, clf_ptr b) { return a.buf == b.buf && a.off == b.off; }

/* Elements per work-item: add, zero and axpy take 8 (their kernels' vload8);
 * the activation kernels CLF_ACT_W (runtime/contract.h). */
enum { ELEM_W = 8 };

/* One 1-D launch over n elements, per_item per work-item. */
static clf_status launch_1d(clf_runtime *rt, clf_kernel_id id, size_t n, size_t per_item, int nargs,
                            const clf_arg *args, clf_error *err)
{
    clf_kernel *k;
    clf_status st = clf_kernel_of(rt, id, &k, err);
    if (st != CLF_OK)
        return st;
    size_t global = (n + per_item - 1) / per_item, local = clf_ops_local_1d(rt, k);
    return clf_kernel_launch(rt, k, 1, &global, &local, nargs, args, err);
}

/* ---- add, zero, axpy ---------------------------------------------------------- */

clf_status clf_op_add(clf_runtime *rt, clf_ptr out, clf_ptr a, clf_ptr b, size_t n, clf_error *err)
{
    if (n == 0)
        return CLF_OK;
    if (clf_ops_need(out, "add", "out", err) || clf_ops_need(a, "add", "a", err) ||
        clf_ops_need(b, "add", "b", err))
        return CLF_ERR_ARG;
    clf_arg args[] = {CLF_ARG_PTR(out), CLF_ARG_PTR(a), CLF_ARG_PTR(b), CLF_ARG_U64(n)};
    return launch_1d(rt, CLF_K_ADD_F32, n, ELEM_W, CLF_NARGS(args), args, err);
}

clf_status clf_op_residual(clf_runtime *rt, clf_ptr out, clf_ptr x, clf_ptr residual, size_t n,
                           clf_error *err)
{
    return clf_op_add(rt, out, x, residual, n, err);
}

clf_status clf_op_zero(clf_runtime *rt, clf_ptr out, size_t n, clf_error *err)
{
    if (n == 0)
        return CLF_OK;
    if (clf_ops_need(out, "zero", "out", err))
        return CLF_ERR_ARG;
    clf_arg args[] = {CLF_ARG_PTR(out), CLF_ARG_U64(n)};
    return launch_1d(rt, CLF_K_ZERO_F32, n, ELEM_W, CLF_NARGS(args), args, err);
}

clf_status clf_op_ema(clf_runtime *rt, clf_ptr e, clf_ptr p, float decay, size_t n, clf_error *err)
{
    if (n == 0)
        return CLF_OK;
    if (clf_ops_need(e, "ema", "e", err) || clf_ops_need(p, "ema", "p", err))
        return CLF_ERR_ARG;
    if (!(decay >= 0.0f && decay < 1.0f))
        return clf_error_set(err, CLF_ERR_ARG, "ema: decay %g outside [0, 1)", (double)decay);
    clf_arg args[] = {CLF_ARG_PTR(e), CLF_ARG_PTR(p), CLF_ARG_F32(1.0f - decay), CLF_ARG_U64(n)};
    return launch_1d(rt, CLF_K_EMA_F32, n, ELEM_W, CLF_NARGS(args), args, err);
}

clf_status clf_op_swap(clf_runtime *rt, clf_ptr a, clf_ptr b, size_t n, clf_error *err)
{
    if (n == 0)
        return CLF_OK;
    if (clf_ops_need(a, "swap", "a", err) || clf_ops_need(b, "swap", "b", err))
        return CLF_ERR_ARG;
    clf_arg args[] = {CLF_ARG_PTR(a), CLF_ARG_PTR(b), CLF_ARG_U64(n)};
    return launch_1d(rt, CLF_K_SWAP_F32, n, ELEM_W, CLF_NARGS(args), args, err);
}

clf_status clf_op_axpy(clf_runtime *rt, clf_ptr y, float a, clf_ptr x, size_t n, clf_error *err)
{
    if (n == 0)
        return CLF_OK;
    if (clf_ops_need(y, "axpy", "y", err) || clf_ops_need(x, "axpy", "x", err))
        return CLF_ERR_ARG;
    clf_arg args[] = {CLF_ARG_PTR(y), CLF_ARG_F32(a), CLF_ARG_PTR(x), CLF_ARG_U64(n)};
    return launch_1d(rt, CLF_K_AXPY_F32, n, ELEM_W, CLF_NARGS(args), args, err);
}

/* ---- activations --------------------------------------------------------------- */

clf_status clf_op_act_backward(clf_runtime *rt, clf_act act, clf_ptr din, clf_ptr dout, clf_ptr in,
                               size_t n, int accumulate, clf_error *err)
{
    const clf_kernel_id id = act_backward_kernel(act);
    if (id == CLF_K_COUNT && act != CLF_ACT_NONE)
        return clf_error_set(err, CLF_ERR_ARG, "act_backward: unknown activation %d", (int)act);
    if (n == 0)
        return CLF_OK;
    if (clf_ops_need(din, "act_backward", "din", err) ||
        clf_ops_need(dout, "act_backward", "dout", err))
        return CLF_ERR_ARG;
    if (act == CLF_ACT_NONE) {
        if (accumulate)
            return clf_op_axpy(rt, din, 1.0f, dout, n, err);
        if (same_ptr(din, dout))
            return CLF_OK;
        return clf_buffer_copy(rt, dout.buf, dout.off * sizeof(float), din.buf,
                               din.off * sizeof(float), n * sizeof(float), err);
    }
    if (clf_ops_need(in, "act_backward", "in", err))
        return CLF_ERR_ARG;
    clf_arg args[] = {CLF_ARG_PTR(din), CLF_ARG_PTR(dout), CLF_ARG_PTR(in), CLF_ARG_U64(n),
                      CLF_ARG_I32(accumulate ? 1 : 0)};
    return launch_1d(rt, id, n, CLF_ACT_W, CLF_NARGS(args), args, err);
}

clf_status clf_op_bias_backward_ex(clf_runtime *rt, clf_ops_path path, clf_ptr dbias, clf_ptr d,
                                   clf_dtype d_type, size_t R, size_t N, int accumulate,
                                   clf_error *err)
{
    if (N == 0)
        return CLF_OK;
    if (clf_ops_need(dbias, "bias_backward", "dbias", err) ||
        clf_ops_need(d, "bias_backward", "d", err))
        return CLF_ERR_ARG;
    path = clf_ops_path_resolve(rt, path);
    clf_arg args[] = {CLF_ARG_PTR(dbias), CLF_ARG_PTR(d), CLF_ARG_U32(d_type),
                      CLF_ARG_U64(R),     CLF_ARG_U64(N), CLF_ARG_I32(accumulate ? 1 : 0)};
    clf_kernel *k;
    clf_status st;
    if (path == CLF_OPS_PATH_ITEM) {
        st = clf_kernel_of(rt, CLF_K_BIAS_BACKWARD_ITEM, &k, err);
        if (st != CLF_OK)
            return st;
        size_t global = (N + CLF_COL_W - 1) / CLF_COL_W, local = 1;
        return clf_kernel_launch(rt, k, 1, &global, &local, CLF_NARGS(args), args, err);
    }
    st = clf_kernel_of(rt, CLF_K_BIAS_BACKWARD_GROUP, &k, err);
    if (st != CLF_OK)
        return st;
    const size_t lanes = clf_ops_cols_lanes(k);
    size_t global[2] = {N, lanes}, local[2] = {CLF_COLS_X, lanes};
    return clf_kernel_launch(rt, k, 2, global, local, CLF_NARGS(args), args, err);
}

clf_status clf_op_bias_backward_t(clf_runtime *rt, clf_ptr dbias, clf_ptr d, clf_dtype d_type,
                                  size_t R, size_t N, int accumulate, clf_error *err)
{
    return clf_op_bias_backward_ex(rt, CLF_OPS_PATH_AUTO, dbias, d, d_type, R, N, accumulate, err);
}

/* ---- SwiGLU ----------------------------------------------------------------------- */

clf_status clf_op_swiglu_forward(clf_runtime *rt, clf_ptr out, clf_ptr in, size_t R, size_t H,
                                 clf_error *err)
{
    if (R == 0 || H == 0)
        return CLF_OK;
    if (clf_ops_need(out, "swiglu_forward", "out", err) ||
        clf_ops_need(in, "swiglu_forward", "in", err))
        return CLF_ERR_ARG;
    clf_arg args[] = {CLF_ARG_PTR(out), CLF_ARG_PTR(in), CLF_ARG_U64(R), CLF_ARG_U64(H)};
    return launch_1d(rt, CLF_K_SWIGLU_FORWARD, R * ((H + 7) / 8) * 8, 8, CLF_NARGS(args), args,
                     err);
}

clf_status clf_op_swiglu_backward(clf_runtime *rt, clf_ptr din, clf_ptr dout, clf_ptr in, size_t R,
                                  size_t H, clf_error *err)
{
    if (R == 0 || H == 0)
        return CLF_OK;
    if (clf_ops_need(din, "swiglu_backward", "din", err) ||
        clf_ops_need(dout, "swiglu_backward", "dout", err) ||
        clf_ops_need(in, "swiglu_backward", "in", err))
        return CLF_ERR_ARG;
    clf_arg args[] = {CLF_ARG_PTR(din), CLF_ARG_PTR(dout), CLF_ARG_PTR(in), CLF_ARG_U64(R),
                      CLF_ARG_U64(H)};
    return launch_1d(rt, CLF_K_SWIGLU_BACKWARD, R * ((H + 7) / 8) * 8, 8, CLF_NARGS(args), args,
                     err);
}
