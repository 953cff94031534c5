/*
 * ops_extra.c - host wrappers of cl/model_extra.cl (see ops_extra.h).
 *
 * Design: one work-item per float, a fixed power-of-two work-group size per
 * device type (PoCL re-specialises a kernel per local size).
 *
 * Not here: the op families of ops.h / ops_nn.h.
 */
#include "ops_extra.h"
#include "ops_internal.h"

clf_status clf_op_kv_store(clf_runtime *rt, clf_ptr cache, clf_ptr src, size_t B, size_t T,
                           size_t NH, size_t HS, size_t row_stride, size_t Tmax, size_t pos0,
                           clf_error *err)
{
    clf_kernel *k = NULL;
    clf_status st;
    size_t n = B * NH * T * HS;
    if (pos0 + T > Tmax || row_stride < NH * HS || B * NH * Tmax * HS > 0xFFFFFFFFu ||
        B * T * row_stride > 0xFFFFFFFFu) {
        st = clf_error_set(err, CLF_ERR_ARG,
                           "positions [%zu, %zu) do not fit a cache of %zu, the row stride %zu is "
                           "below NH*HS = %zu, or the sizes are over 2^32 floats",
                           pos0, pos0 + T, Tmax, row_stride, NH * HS);
        goto fail;
    }
    if (n == 0)
        return CLF_OK;
    if ((st = clf_kernel_get(rt, "model_extra", "kv_store", &k, err)) != CLF_OK)
        goto fail;
    size_t local = clf_ops_local_1d(rt, k);
    clf_arg a[] = {CLF_ARG_PTR(cache),      CLF_ARG_PTR(src),  CLF_ARG_U32(n),
                   CLF_ARG_U32(T),          CLF_ARG_U32(NH),   CLF_ARG_U32(HS),
                   CLF_ARG_U32(row_stride), CLF_ARG_U32(Tmax), CLF_ARG_U32(pos0)};
    if ((st = clf_kernel_launch(rt, k, 1, &n, &local, CLF_NARGS(a), a, err)) != CLF_OK)
        goto fail;
    return CLF_OK;
fail:
    clf_error_prefix(err, "kv_store");
    return st;
}
