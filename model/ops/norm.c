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

clf_status clf_ops_launch_rows(clf_runtime *rt, clf_ops_pair kernels, clf_ops_path path, size_t R,
                               int nargs, clf_arg *args, clf_error *err)
{
    clf_kernel *k;
    clf_status st = clf_kernel_of(rt, clf_ops_pick(kernels, path), &k, err);
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
static clf_status launch_cols(clf_runtime *rt, clf_ops_path path, clf_ops_pair kernels, size_t N,
                              int nargs, const clf_arg *args, clf_error *err)
{
    clf_kernel *k;
    clf_status st = clf_kernel_of(rt, clf_ops_pick(kernels, path), &k, err);
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

/* ---- forward ---------------------------------------------------------------- */

clf_status clf_op_norm_forward_ex(clf_runtime *rt, clf_ops_path path, const clf_norm_args *a,
                                  clf_error *err)
{
    const char *op = a->rms ? "rmsnorm_forward" : "layernorm_forward";
    const clf_ops_pair kernels =
        a->rms ? (clf_ops_pair){CLF_K_RMSNORM_FORWARD_ITEM, CLF_K_RMSNORM_FORWARD_GROUP}
               : (clf_ops_pair){CLF_K_LAYERNORM_FORWARD_ITEM, CLF_K_LAYERNORM_FORWARD_GROUP};
    if (a->R == 0)
        return CLF_OK;
    if (a->N == 0)
        return clf_error_set(err, CLF_ERR_ARG, "%s: rows of 0 columns", op);
    if (clf_ops_need(a->out, op, "out", err) ||
        (!a->rms && clf_ops_need(a->mean, op, "mean", err)) ||
        clf_ops_need(a->rstd, op, "rstd", err) || clf_ops_need(a->x, op, "x", err) ||
        clf_ops_need(a->w, op, "w", err))
        return CLF_ERR_ARG;
    path = clf_ops_path_resolve(rt, path);
    if (a->rms) {
        clf_arg args[] = {
            CLF_ARG_PTR(a->out), CLF_ARG_U32(a->out_type), CLF_ARG_PTR(a->rstd),
            CLF_ARG_PTR(a->x),   CLF_ARG_PTR(a->w),        CLF_ARG_U64(a->R),
            CLF_ARG_U64(a->N),   CLF_ARG_F32(a->eps),      CLF_ARG_U64(0) /* local */};
        return clf_ops_launch_rows(rt, kernels, path, a->R, CLF_NARGS(args) - 1, args, err);
    }
    const int has_b = a->b.buf != NULL;
    const clf_ptr bb = has_b ? a->b : a->w;
    clf_arg args[] = {CLF_ARG_PTR(a->out),  CLF_ARG_U32(a->out_type), CLF_ARG_PTR(a->mean),
                      CLF_ARG_PTR(a->rstd), CLF_ARG_PTR(a->x),        CLF_ARG_PTR(a->w),
                      CLF_ARG_PTR(bb),      CLF_ARG_I32(has_b),       CLF_ARG_U64(a->R),
                      CLF_ARG_U64(a->N),    CLF_ARG_F32(a->eps),      CLF_ARG_U64(0) /* local */};
    return clf_ops_launch_rows(rt, kernels, path, a->R, CLF_NARGS(args) - 1, args, err);
}

clf_status clf_op_norm_forward(clf_runtime *rt, const clf_norm_args *a, clf_error *err)
{
    return clf_op_norm_forward_ex(rt, CLF_OPS_PATH_AUTO, a, err);
}

/* ---- decoding: norm + linear ------------------------------------------------------ */

int clf_op_norm_dot_fits(const clf_runtime *rt)
{
    return clf_ops_path_resolve(rt, CLF_OPS_PATH_AUTO) == CLF_OPS_PATH_ITEM;
}

clf_status clf_op_norm_dot(clf_runtime *rt, const clf_norm_dot_args *a, clf_error *err)
{
    const char *op = "norm_dot";
    if (a->R == 0 || a->N == 0)
        return CLF_OK;
    if (a->C == 0 || a->ldy < a->N || a->act > CLF_ACTCODE_SILU)
        return clf_error_set(err, CLF_ERR_ARG,
                             "%s: rows of %zu columns into %zu outputs with row stride %zu, "
                             "activation code %u (expected C > 0, ldy >= N, a CLF_ACTCODE_*)",
                             op, a->C, a->N, a->ldy, a->act);
    if (clf_ops_need(a->x, op, "x", err) || clf_ops_need(a->w, op, "w", err) ||
        clf_ops_need(a->W, op, "W", err) || clf_ops_need(a->y, op, "y", err))
        return CLF_ERR_ARG;
    const int has_nb = !a->rms && a->b.buf != NULL, has_bias = a->bias.buf != NULL;
    clf_kernel *k = NULL;
    clf_status st = clf_kernel_of(rt, CLF_K_NORM_DOT_ITEM, &k, err);
    if (st != CLF_OK)
        return st;
    const clf_arg args[] = {CLF_ARG_PTR(a->y),
                            CLF_ARG_U64(a->ldy),
                            CLF_ARG_PTR(a->x),
                            CLF_ARG_PTR(a->w),
                            CLF_ARG_PTR(has_nb ? a->b : a->w),
                            CLF_ARG_I32(has_nb),
                            CLF_ARG_I32(a->rms != 0),
                            CLF_ARG_F32(a->eps),
                            CLF_ARG_PTR(a->W),
                            CLF_ARG_PTR(has_bias ? a->bias : a->W),
                            CLF_ARG_I32(has_bias),
                            CLF_ARG_U32(a->act),
                            CLF_ARG_U64(a->R),
                            CLF_ARG_U64(a->C),
                            CLF_ARG_U64(a->N)};
    /* a work-group per work-item: the device spreads groups over its cores */
    const size_t global[2] = {(a->N + CLF_NORM_DOT_N - 1) / CLF_NORM_DOT_N, a->R},
                 local[2] = {1, 1};
    if ((st = clf_kernel_launch(rt, k, 2, global, local, CLF_NARGS(args), args, err)) != CLF_OK)
        clf_error_prefix(err, "%s", op);
    return st;
}

/* ---- backward ---------------------------------------------------------------- */

/* dx (=|+=) from dout: the row kernel. */
static clf_status norm_dx(clf_runtime *rt, clf_ops_path path, const clf_norm_args *a,
                          clf_error *err)
{
    const int acc = a->accumulate ? 1 : 0;
    if (a->rms) {
        clf_arg args[] = {CLF_ARG_PTR(a->dx),   CLF_ARG_PTR(a->dout), CLF_ARG_PTR(a->x),
                          CLF_ARG_PTR(a->rstd), CLF_ARG_PTR(a->w),    CLF_ARG_U64(a->R),
                          CLF_ARG_U64(a->N),    CLF_ARG_I32(acc),     CLF_ARG_U64(0) /* local */};
        return clf_ops_launch_rows(
            rt, (clf_ops_pair){CLF_K_RMSNORM_BACKWARD_ITEM, CLF_K_RMSNORM_BACKWARD_GROUP}, path,
            a->R, CLF_NARGS(args) - 1, args, err);
    }
    clf_arg args[] = {CLF_ARG_PTR(a->dx),   CLF_ARG_PTR(a->dout), CLF_ARG_PTR(a->x),
                      CLF_ARG_PTR(a->mean), CLF_ARG_PTR(a->rstd), CLF_ARG_PTR(a->w),
                      CLF_ARG_U64(a->R),    CLF_ARG_U64(a->N),    CLF_ARG_I32(acc),
                      CLF_ARG_U64(0) /* local */};
    return clf_ops_launch_rows(
        rt, (clf_ops_pair){CLF_K_LAYERNORM_BACKWARD_ITEM, CLF_K_LAYERNORM_BACKWARD_GROUP}, path,
        a->R, CLF_NARGS(args) - 1, args, err);
}

/* dw (and LayerNorm's db) += : the column kernel. */
static clf_status norm_dwdb(clf_runtime *rt, clf_ops_path path, const clf_norm_args *a,
                            clf_error *err)
{
    if (a->rms) {
        clf_arg args[] = {CLF_ARG_PTR(a->dw),   CLF_ARG_PTR(a->dout), CLF_ARG_PTR(a->x),
                          CLF_ARG_PTR(a->rstd), CLF_ARG_U64(a->R),    CLF_ARG_U64(a->N)};
        return launch_cols(rt, path, (clf_ops_pair){CLF_K_RMSNORM_DW_ITEM, CLF_K_RMSNORM_DW_GROUP},
                           a->N, CLF_NARGS(args), args, err);
    }
    const int has_db = a->db.buf != NULL;
    const clf_ptr dbb = has_db ? a->db : a->dw;
    clf_arg args[] = {CLF_ARG_PTR(a->dw),   CLF_ARG_PTR(dbb),  CLF_ARG_I32(has_db),
                      CLF_ARG_PTR(a->dout), CLF_ARG_PTR(a->x), CLF_ARG_PTR(a->mean),
                      CLF_ARG_PTR(a->rstd), CLF_ARG_U64(a->R), CLF_ARG_U64(a->N)};
    return launch_cols(rt, path,
                       (clf_ops_pair){CLF_K_LAYERNORM_DWDB_ITEM, CLF_K_LAYERNORM_DWDB_GROUP}, a->N,
                       CLF_NARGS(args), args, err);
}

clf_status clf_op_norm_backward_ex(clf_runtime *rt, clf_ops_path path, const clf_norm_args *a,
                                   clf_error *err)
{
    const char *op = a->rms ? "rmsnorm_backward" : "layernorm_backward";
    if (a->R == 0 || a->N == 0)
        return CLF_OK;
    if (clf_ops_need(a->dout, op, "dout", err) || clf_ops_need(a->x, op, "x", err) ||
        (!a->rms && clf_ops_need(a->mean, op, "mean", err)) ||
        clf_ops_need(a->rstd, op, "rstd", err) || clf_ops_need(a->w, op, "w", err))
        return CLF_ERR_ARG;
    path = clf_ops_path_resolve(rt, path);
    clf_status st;
    if (a->dx.buf != NULL && (st = norm_dx(rt, path, a, err)) != CLF_OK)
        return st;
    if (a->dw.buf != NULL)
        return norm_dwdb(rt, path, a, err);
    if (a->rms || a->db.buf == NULL)
        return CLF_OK;
    return clf_op_bias_backward_ex(rt, path, a->db, a->dout, CLF_DT_F32, a->R, a->N, 1, err);
}

clf_status clf_op_norm_backward(clf_runtime *rt, const clf_norm_args *a, clf_error *err)
{
    return clf_op_norm_backward_ex(rt, CLF_OPS_PATH_AUTO, a, err);
}
