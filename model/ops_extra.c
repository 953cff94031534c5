/*
 * ops_extra.c - host wrappers of cl/model_extra.cl (see ops_extra.h).
 *
 * Design: the elementwise kernels run one work-item per float (or per
 * (b, c) for pooling) with a fixed power-of-two work-group size per device
 * type (PoCL re-specialises a kernel per local size); the masked decode
 * attention runs one work-group of a fixed power-of-two size per (b, head)
 * with its scores in local memory, so L is limited by the device's local
 * memory (checked, CLF_ERR_UNSUPPORTED). Sizes that do not fit the
 * kernels' 32-bit index math are refused (CLF_ERR_ARG).
 *
 * Not here: the op families of ops.h / ops_nn.h.
 */
#include <string.h>

#include "ops_extra.h"
#include "ops_internal.h"

#define U32_MAX_SZ ((size_t)0xFFFFFFFFu)

clf_status clf_op_kv_store(clf_runtime *rt, clf_ptr cache, clf_ptr src, size_t B, size_t T,
                           size_t NH, size_t HS, size_t row_stride, size_t Tmax, size_t pos0,
                           clf_error *err)
{
    clf_kernel *k = NULL;
    clf_status st;
    size_t n = B * NH * T * HS;
    if (pos0 + T > Tmax || row_stride < NH * HS || B * NH * Tmax * HS > U32_MAX_SZ ||
        B * T * row_stride > U32_MAX_SZ) {
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

static clf_status pool_launch(clf_runtime *rt, const char *name, clf_ptr out, clf_ptr in,
                              clf_ptr keep, size_t B, size_t S, size_t C, clf_error *err)
{
    clf_kernel *k = NULL;
    clf_status st;
    size_t n = B * C;
    if (B * S * C > U32_MAX_SZ) {
        st = clf_error_set(err, CLF_ERR_ARG, "B*S*C = %zu over 2^32", B * S * C);
        goto fail;
    }
    if (n == 0)
        return CLF_OK;
    if ((st = clf_kernel_get(rt, "model_extra", name, &k, err)) != CLF_OK)
        goto fail;
    size_t local = clf_ops_local_1d(rt, k);
    clf_arg a[] = {CLF_ARG_PTR(out), CLF_ARG_PTR(in), CLF_ARG_PTR(keep),
                   CLF_ARG_U32(n),   CLF_ARG_U32(S),  CLF_ARG_U32(C)};
    if ((st = clf_kernel_launch(rt, k, 1, &n, &local, CLF_NARGS(a), a, err)) != CLF_OK)
        goto fail;
    return CLF_OK;
fail:
    clf_error_prefix(err, "%s", name);
    return st;
}

clf_status clf_op_mean_pool_forward(clf_runtime *rt, clf_ptr out, clf_ptr x, clf_ptr keep,
                                    size_t B, size_t S, size_t C, clf_error *err)
{
    return pool_launch(rt, "mean_pool_forward", out, x, keep, B, S, C, err);
}

clf_status clf_op_mean_pool_backward(clf_runtime *rt, clf_ptr dx, clf_ptr dout, clf_ptr keep,
                                     size_t B, size_t S, size_t C, clf_error *err)
{
    return pool_launch(rt, "mean_pool_backward", dx, dout, keep, B, S, C, err);
}

clf_status clf_op_cache_gather(clf_runtime *rt, clf_ptr dst, clf_ptr src, clf_ptr index,
                               size_t rows, size_t G, size_t len, size_t stride,
                               clf_error *err)
{
    clf_kernel *k = NULL;
    clf_status st;
    size_t n = rows * G * len;
    if (len > stride || rows * G * stride > U32_MAX_SZ) {
        st = clf_error_set(err, CLF_ERR_ARG,
                           "rows of %zu elements do not fit a stride of %zu, or the tensor is "
                           "over 2^32 elements",
                           len, stride);
        goto fail;
    }
    if (n == 0)
        return CLF_OK;
    if ((st = clf_kernel_get(rt, "model_extra", "cache_gather", &k, err)) != CLF_OK)
        goto fail;
    size_t local = clf_ops_local_1d(rt, k);
    int use_index = index.buf != NULL;
    clf_ptr idx = use_index ? index : src; /* any valid buffer when unused */
    clf_arg a[] = {CLF_ARG_PTR(dst),   CLF_ARG_PTR(src), CLF_ARG_PTR(idx),
                   CLF_ARG_I32(use_index), CLF_ARG_U32(n), CLF_ARG_U32(G),
                   CLF_ARG_U32(len),   CLF_ARG_U32(stride)};
    if ((st = clf_kernel_launch(rt, k, 1, &n, &local, CLF_NARGS(a), a, err)) != CLF_OK)
        goto fail;
    return CLF_OK;
fail:
    clf_error_prefix(err, "cache_gather");
    return st;
}
