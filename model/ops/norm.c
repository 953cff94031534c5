/*
 * ops/norm.c - host wrappers of cl/norm.cl: LayerNorm and RMSNorm, forward
 * and backward.
 *
 * Design
 * - Forward is one row kernel that also saves the row statistics (mean and
 *   rstd, or rstd) the backward pass reads.
 * - Backward is two launches: a row kernel for dx (overwrite or accumulate),
 *   then a column kernel that adds the parameter gradients dw (and db) with
 *   a fixed summation order, no atomics and no scratch memory.
 * - Row and column kernels have an "item" variant for CPUs and a "group"
 *   variant for GPUs, picked by clf_ops_path_resolve(); the *_ex entry points
 *   take the variant explicitly (tests).
 *
 * Not here: fused residual + norm.
 */
#include <stdio.h>

#include "model/ops/ops_internal.h"

static clf_status get(clf_runtime *rt, const char *base, clf_ops_path path, clf_kernel **k,
                      clf_error *err)
{
    char name[64];
    snprintf(name, sizeof name, "%s_%s", base, path == CLF_OPS_PATH_ITEM ? "item" : "group");
    return clf_kernel_get(rt, "norm", name, k, err);
}

clf_status clf_ops_launch_rows(clf_runtime *rt, const char *family, clf_ops_path path,
                               const char *base, size_t R, int nargs, clf_arg *args, clf_error *err)
{
    char name[64];
    snprintf(name, sizeof name, "%s_%s", base, path == CLF_OPS_PATH_ITEM ? "item" : "group");
    clf_kernel *k;
    clf_status st = clf_kernel_get(rt, family, name, &k, err);
    if (st != CLF_OK)
        return st;
    if (path == CLF_OPS_PATH_ITEM) {
        size_t global = R, local = clf_ops_rows_local(k);
        return clf_kernel_launch(rt, k, 1, &global, &local, nargs, args, err);
    }
    size_t local = clf_ops_group_size(k, CLF_OPS_ROW_GROUP), global = R * local;
    args[nargs] = CLF_ARG_LOCAL(local * sizeof(float));
    return clf_kernel_launch(rt, k, 1, &global, &local, nargs + 1, args, err);
}

/* A column kernel over N columns. */
static clf_status launch_cols(clf_runtime *rt, clf_ops_path path, const char *base, size_t N,
                              int nargs, const clf_arg *args, clf_error *err)
{
    clf_kernel *k;
    clf_status st = get(rt, base, path, &k, err);
    if (st != CLF_OK)
        return st;
    if (path == CLF_OPS_PATH_ITEM) {
        size_t global = (N + CLF_COL_W - 1) / CLF_COL_W, local = 1;
        return clf_kernel_launch(rt, k, 1, &global, &local, nargs, args, err);
    }
    const size_t lanes = clf_ops_cols_lanes(k);
    size_t global[2] = {N, lanes}, local[2] = {CLF_COLS_X, lanes};
    return clf_kernel_launch(rt, k, 2, global, local, nargs, args, err);
}

/* ---- LayerNorm ---------------------------------------------------------------- */

clf_status clf_op_layernorm_forward_ex(clf_runtime *rt, clf_ops_path path, clf_dtype out_type,
                                       clf_ptr out, clf_ptr mean, clf_ptr rstd, clf_ptr x,
                                       clf_ptr w, clf_ptr b, size_t R, size_t N, float eps,
                                       clf_error *err)
{
    const char *op = "layernorm_forward";
    if (R == 0)
        return CLF_OK;
    if (N == 0)
        return clf_error_set(err, CLF_ERR_ARG, "%s: rows of 0 columns", op);
    if (clf_ops_need(out, op, "out", err) || clf_ops_need(mean, op, "mean", err) ||
        clf_ops_need(rstd, op, "rstd", err) || clf_ops_need(x, op, "x", err) ||
        clf_ops_need(w, op, "w", err))
        return CLF_ERR_ARG;
    path = clf_ops_path_resolve(rt, path);
    int has_b = b.buf != NULL;
    clf_ptr bb = has_b ? b : w;
    clf_arg args[] = {CLF_ARG_PTR(out),  CLF_ARG_U32(out_type), CLF_ARG_PTR(mean),
                      CLF_ARG_PTR(rstd), CLF_ARG_PTR(x),        CLF_ARG_PTR(w),
                      CLF_ARG_PTR(bb),   CLF_ARG_I32(has_b),    CLF_ARG_U64(R),
                      CLF_ARG_U64(N),    CLF_ARG_F32(eps),      CLF_ARG_U64(0) /* local buffer */};
    return clf_ops_launch_rows(rt, "norm", path, "layernorm_forward", R, CLF_NARGS(args) - 1, args,
                               err);
}

clf_status clf_op_layernorm_backward_ex(clf_runtime *rt, clf_ops_path path, clf_ptr dx, clf_ptr dw,
                                        clf_ptr db, clf_ptr dout, clf_ptr x, clf_ptr mean,
                                        clf_ptr rstd, clf_ptr w, size_t R, size_t N, int accumulate,
                                        clf_error *err)
{
    const char *op = "layernorm_backward";
    if (R == 0 || N == 0)
        return CLF_OK;
    if (clf_ops_need(dout, op, "dout", err) || clf_ops_need(x, op, "x", err) ||
        clf_ops_need(mean, op, "mean", err) || clf_ops_need(rstd, op, "rstd", err) ||
        clf_ops_need(w, op, "w", err))
        return CLF_ERR_ARG;
    path = clf_ops_path_resolve(rt, path);
    clf_status st;
    if (dx.buf != NULL) {
        clf_arg args[] = {CLF_ARG_PTR(dx),   CLF_ARG_PTR(dout), CLF_ARG_PTR(x),
                          CLF_ARG_PTR(mean), CLF_ARG_PTR(rstd), CLF_ARG_PTR(w),
                          CLF_ARG_U64(R),    CLF_ARG_U64(N),    CLF_ARG_I32(accumulate ? 1 : 0),
                          CLF_ARG_U64(0) /* local buffer */};
        st = clf_ops_launch_rows(rt, "norm", path, "layernorm_backward", R, CLF_NARGS(args) - 1,
                                 args, err);
        if (st != CLF_OK)
            return st;
    }
    if (dw.buf == NULL) {
        if (db.buf == NULL)
            return CLF_OK;
        return clf_op_bias_backward_ex(rt, path, db, dout, CLF_DT_F32, R, N, 1, err);
    }
    int has_db = db.buf != NULL;
    clf_ptr dbb = has_db ? db : dw;
    clf_arg args[] = {CLF_ARG_PTR(dw),   CLF_ARG_PTR(dbb), CLF_ARG_I32(has_db),
                      CLF_ARG_PTR(dout), CLF_ARG_PTR(x),   CLF_ARG_PTR(mean),
                      CLF_ARG_PTR(rstd), CLF_ARG_U64(R),   CLF_ARG_U64(N)};
    return launch_cols(rt, path, "layernorm_dwdb", N, CLF_NARGS(args), args, err);
}

clf_status clf_op_layernorm_forward_t(clf_runtime *rt, clf_dtype out_type, clf_ptr out,
                                      clf_ptr mean, clf_ptr rstd, clf_ptr x, clf_ptr w, clf_ptr b,
                                      size_t R, size_t N, float eps, clf_error *err)
{
    return clf_op_layernorm_forward_ex(rt, CLF_OPS_PATH_AUTO, out_type, out, mean, rstd, x, w, b, R,
                                       N, eps, err);
}

clf_status clf_op_layernorm_backward(clf_runtime *rt, clf_ptr dx, clf_ptr dw, clf_ptr db,
                                     clf_ptr dout, clf_ptr x, clf_ptr mean, clf_ptr rstd, clf_ptr w,
                                     size_t R, size_t N, int accumulate, clf_error *err)
{
    return clf_op_layernorm_backward_ex(rt, CLF_OPS_PATH_AUTO, dx, dw, db, dout, x, mean, rstd, w,
                                        R, N, accumulate, err);
}

/* ---- RMSNorm ------------------------------------------------------------------ */

clf_status clf_op_rmsnorm_forward_ex(clf_runtime *rt, clf_ops_path path, clf_dtype out_type,
                                     clf_ptr out, clf_ptr rstd, clf_ptr x, clf_ptr w, size_t R,
                                     size_t N, float eps, clf_error *err)
{
    const char *op = "rmsnorm_forward";
    if (R == 0)
        return CLF_OK;
    if (N == 0)
        return clf_error_set(err, CLF_ERR_ARG, "%s: rows of 0 columns", op);
    if (clf_ops_need(out, op, "out", err) || clf_ops_need(rstd, op, "rstd", err) ||
        clf_ops_need(x, op, "x", err) || clf_ops_need(w, op, "w", err))
        return CLF_ERR_ARG;
    path = clf_ops_path_resolve(rt, path);
    clf_arg args[] = {CLF_ARG_PTR(out), CLF_ARG_U32(out_type), CLF_ARG_PTR(rstd),
                      CLF_ARG_PTR(x),   CLF_ARG_PTR(w),        CLF_ARG_U64(R),
                      CLF_ARG_U64(N),   CLF_ARG_F32(eps),      CLF_ARG_U64(0) /* local buffer */};
    return clf_ops_launch_rows(rt, "norm", path, "rmsnorm_forward", R, CLF_NARGS(args) - 1, args,
                               err);
}

clf_status clf_op_rmsnorm_backward_ex(clf_runtime *rt, clf_ops_path path, clf_ptr dx, clf_ptr dw,
                                      clf_ptr dout, clf_ptr x, clf_ptr rstd, clf_ptr w, size_t R,
                                      size_t N, int accumulate, clf_error *err)
{
    const char *op = "rmsnorm_backward";
    if (R == 0 || N == 0)
        return CLF_OK;
    if (clf_ops_need(dout, op, "dout", err) || clf_ops_need(x, op, "x", err) ||
        clf_ops_need(rstd, op, "rstd", err) || clf_ops_need(w, op, "w", err))
        return CLF_ERR_ARG;
    path = clf_ops_path_resolve(rt, path);
    clf_status st;
    if (dx.buf != NULL) {
        clf_arg args[] = {
            CLF_ARG_PTR(dx), CLF_ARG_PTR(dout), CLF_ARG_PTR(x), CLF_ARG_PTR(rstd),
            CLF_ARG_PTR(w),  CLF_ARG_U64(R),    CLF_ARG_U64(N), CLF_ARG_I32(accumulate ? 1 : 0),
            CLF_ARG_U64(0) /* local buffer */};
        st = clf_ops_launch_rows(rt, "norm", path, "rmsnorm_backward", R, CLF_NARGS(args) - 1, args,
                                 err);
        if (st != CLF_OK)
            return st;
    }
    if (dw.buf == NULL)
        return CLF_OK;
    clf_arg args[] = {CLF_ARG_PTR(dw),   CLF_ARG_PTR(dout), CLF_ARG_PTR(x),
                      CLF_ARG_PTR(rstd), CLF_ARG_U64(R),    CLF_ARG_U64(N)};
    return launch_cols(rt, path, "rmsnorm_dw", N, CLF_NARGS(args), args, err);
}

clf_status clf_op_rmsnorm_forward_t(clf_runtime *rt, clf_dtype out_type, clf_ptr out, clf_ptr rstd,
                                    clf_ptr x, clf_ptr w, size_t R, size_t N, float eps,
                                    clf_error *err)
{
    return clf_op_rmsnorm_forward_ex(rt, CLF_OPS_PATH_AUTO, out_type, out, rstd, x, w, R, N, eps,
                                     err);
}

clf_status clf_op_rmsnorm_backward(clf_runtime *rt, clf_ptr dx, clf_ptr dw, clf_ptr dout, clf_ptr x,
                                   clf_ptr rstd, clf_ptr w, size_t R, size_t N, int accumulate,
                                   clf_error *err)
{
    return clf_op_rmsnorm_backward_ex(rt, CLF_OPS_PATH_AUTO, dx, dw, dout, x, rstd, w, R, N,
                                      accumulate, err);
}
