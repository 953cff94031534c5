/*
 * ops_softmax.c - host wrappers of cl/softmax.cl: row-wise masked softmax and
 * its backward pass.
 *
 * Design: the mask description (clf_softmax_mask) becomes kernel arguments
 * with 0 meaning "absent" (add_rows, keep_group, causal_T); an absent mask's
 * buffer argument is filled with the input buffer, never read. The variant
 * (one work-item or one work-group per row) comes from
 * clf_ops_path_resolve().
 *
 * Not here: attention-specific kernels (attention.c).
 */
#include <stdio.h>

#include "model/ops/ops_internal.h"

#define GROUP_WANT 256

static clf_status need(clf_ptr p, const char *op, const char *what, clf_error *err)
{
    if (p.buf == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "%s: %s is a NULL buffer", op, what);
    return CLF_OK;
}

/* Launch a row kernel: `nargs` arguments, plus a local buffer for GROUP. */
static clf_status launch_rows(clf_runtime *rt, clf_ops_path path, const char *base, size_t R,
                              int nargs, clf_arg *args, clf_error *err)
{
    char name[64];
    snprintf(name, sizeof name, "%s_%s", base, path == CLF_OPS_PATH_ITEM ? "item" : "group");
    clf_kernel *k;
    clf_status st = clf_kernel_get(rt, "softmax", name, &k, err);
    if (st != CLF_OK)
        return st;
    if (path == CLF_OPS_PATH_ITEM) {
        size_t global = R, local = clf_ops_rows_local(k);
        return clf_kernel_launch(rt, k, 1, &global, &local, nargs, args, err);
    }
    size_t local = clf_ops_group_size(k, GROUP_WANT), global = R * local;
    args[nargs] = CLF_ARG_LOCAL(local * sizeof(float));
    return clf_kernel_launch(rt, k, 1, &global, &local, nargs + 1, args, err);
}

clf_status clf_op_softmax_forward_ex(clf_runtime *rt, clf_ops_path path, clf_ptr y, clf_ptr x,
                                     size_t R, size_t N, float scale,
                                     const clf_softmax_mask *mask, clf_error *err)
{
    if (R == 0 || N == 0)
        return CLF_OK;
    if (need(y, "softmax_forward", "y", err) || need(x, "softmax_forward", "x", err))
        return CLF_ERR_ARG;
    clf_softmax_mask none = {{NULL, 0}, 0, {NULL, 0}, 0, 0};
    const clf_softmax_mask *m = mask != NULL ? mask : &none;
    clf_ptr add = x, keep = x;
    size_t add_rows = 0, keep_group = 0;
    if (m->additive.buf != NULL) {
        if (m->additive_rows == 0)
            return clf_error_set(err, CLF_ERR_ARG,
                                 "softmax_forward: an additive mask needs additive_rows >= 1");
        add = m->additive;
        add_rows = m->additive_rows;
    }
    if (m->keep.buf != NULL) {
        if (m->keep_group_rows == 0)
            return clf_error_set(err, CLF_ERR_ARG,
                                 "softmax_forward: a keep mask needs keep_group_rows >= 1");
        keep = m->keep;
        keep_group = m->keep_group_rows;
    }
    path = clf_ops_path_resolve(rt, path);
    clf_arg args[] = {CLF_ARG_PTR(y),          CLF_ARG_PTR(x),        CLF_ARG_U64(R),
                      CLF_ARG_U64(N),          CLF_ARG_F32(scale),    CLF_ARG_PTR(add),
                      CLF_ARG_U64(add_rows),   CLF_ARG_PTR(keep),     CLF_ARG_U64(keep_group),
                      CLF_ARG_U64(m->causal_T), CLF_ARG_U64(0) /* room for the local buffer */};
    return launch_rows(rt, path, "softmax_forward", R, CLF_NARGS(args) - 1, args, err);
}

clf_status clf_op_softmax_backward_ex(clf_runtime *rt, clf_ops_path path, clf_ptr dx, clf_ptr dy,
                                      clf_ptr y, size_t R, size_t N, float scale,
                                      clf_error *err)
{
    if (R == 0 || N == 0)
        return CLF_OK;
    if (need(dx, "softmax_backward", "dx", err) || need(dy, "softmax_backward", "dy", err) ||
        need(y, "softmax_backward", "y", err))
        return CLF_ERR_ARG;
    path = clf_ops_path_resolve(rt, path);
    clf_arg args[] = {CLF_ARG_PTR(dx), CLF_ARG_PTR(dy), CLF_ARG_PTR(y), CLF_ARG_U64(R),
                      CLF_ARG_U64(N),  CLF_ARG_F32(scale), CLF_ARG_U64(0) /* local buffer */};
    return launch_rows(rt, path, "softmax_backward", R, CLF_NARGS(args) - 1, args, err);
}

clf_status clf_op_softmax_forward(clf_runtime *rt, clf_ptr y, clf_ptr x, size_t R, size_t N,
                                  float scale, const clf_softmax_mask *mask, clf_error *err)
{
    return clf_op_softmax_forward_ex(rt, CLF_OPS_PATH_AUTO, y, x, R, N, scale, mask, err);
}

clf_status clf_op_softmax_backward(clf_runtime *rt, clf_ptr dx, clf_ptr dy, clf_ptr y, size_t R,
                                   size_t N, float scale, clf_error *err)
{
    return clf_op_softmax_backward_ex(rt, CLF_OPS_PATH_AUTO, dx, dy, y, R, N, scale, err);
}
