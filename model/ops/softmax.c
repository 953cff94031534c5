/*
 * ops/softmax.c - host wrappers of cl/softmax.cl: row-wise masked softmax and
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

clf_status clf_op_softmax_forward_ex(clf_runtime *rt, clf_ops_path path, clf_ptr y, clf_ptr x,
                                     size_t R, size_t N, float scale, const clf_softmax_mask *mask,
                                     clf_error *err)
{
    if (R == 0 || N == 0)
        return CLF_OK;
    if (clf_ops_need(y, "softmax_forward", "y", err) ||
        clf_ops_need(x, "softmax_forward", "x", err))
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
    clf_arg args[] = {CLF_ARG_PTR(y),           CLF_ARG_PTR(x),     CLF_ARG_U64(R),
                      CLF_ARG_U64(N),           CLF_ARG_F32(scale), CLF_ARG_PTR(add),
                      CLF_ARG_U64(add_rows),    CLF_ARG_PTR(keep),  CLF_ARG_U64(keep_group),
                      CLF_ARG_U64(m->causal_T), CLF_ARG_U64(0) /* room for the local buffer */};
    return clf_ops_launch_rows(rt, "softmax", path, "softmax_forward", R, CLF_NARGS(args) - 1, args,
                               err);
}

clf_status clf_op_softmax_backward_ex(clf_runtime *rt, clf_ops_path path, clf_ptr dx, clf_ptr dy,
                                      clf_ptr y, size_t R, size_t N, float scale, clf_error *err)
{
    if (R == 0 || N == 0)
        return CLF_OK;
    if (clf_ops_need(dx, "softmax_backward", "dx", err) ||
        clf_ops_need(dy, "softmax_backward", "dy", err) ||
        clf_ops_need(y, "softmax_backward", "y", err))
        return CLF_ERR_ARG;
    path = clf_ops_path_resolve(rt, path);
    clf_arg args[] = {CLF_ARG_PTR(dx), CLF_ARG_PTR(dy),    CLF_ARG_PTR(y), CLF_ARG_U64(R),
                      CLF_ARG_U64(N),  CLF_ARG_F32(scale), CLF_ARG_U64(0) /* local buffer */};
    return clf_ops_launch_rows(rt, "softmax", path, "softmax_backward", R, CLF_NARGS(args) - 1,
                               args, err);
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
