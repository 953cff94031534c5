/*
 * ops/loss.c - host wrapper of cl/loss.cl, the fused softmax cross-entropy
 * with label smoothing and ignore_index.
 *
 * Design: one launch. On GPUs one work-group of 256 per row (local-memory
 * trees); on CPUs, or where local memory is emulated, one work-item per row
 * with float8 vectors (cross_entropy_rows), 16 rows per work-group.
 *
 * Not here: averaging the per-row losses (clf_op_mean / the caller), class
 * weights, the z-loss.
 */
#include <string.h>

#include "model/ops/ops.h"
#include "runtime/kernel_ids.h"

static size_t wg_pow2(const clf_kernel *k, size_t want)
{
    size_t m = clf_kernel_max_work_group(k);
    if (m == 0 || m > want)
        m = want;
    size_t p = 1;
    while (p * 2 <= m)
        p *= 2;
    return p;
}

clf_status clf_op_cross_entropy(clf_runtime *rt, const clf_xent_args *x, clf_error *err)
{
    const clf_ptr losses = x->losses, dlogits = x->dlogits, logits = x->logits;
    const clf_ptr targets = x->targets, grad_mul = x->grad_mul;
    const size_t R = x->R, V = x->V;
    const float label_smoothing = x->label_smoothing, grad_scale = x->grad_scale;
    const int ignore_index = x->ignore_index;
    clf_kernel *k = NULL;
    clf_status st;
    if (V == 0 || V > 0x7FFFFFFFu || R > 0xFFFFFFFFu ||
        !(label_smoothing >= 0.0f && label_smoothing <= 1.0f)) {
        st = clf_error_set(err, CLF_ERR_ARG,
                           "need 1 <= V (%zu) < 2^31, R (%zu) < 2^32 and label smoothing in [0, 1] "
                           "(got %g)",
                           V, R, (double)label_smoothing);
        goto fail;
    }
    const int rows = clf_runtime_device(rt)->serial_groups;
    st = clf_kernel_of(rt, rows ? CLF_K_CROSS_ENTROPY_ROWS : CLF_K_CROSS_ENTROPY, &k, err);
    if (st != CLF_OK)
        goto fail;
    if (R == 0)
        return CLF_OK;
    int has_grad = dlogits.buf != NULL;
    clf_ptr dz = has_grad ? dlogits : logits; /* never written when has_grad = 0 */
    int has_mul = grad_mul.buf != NULL;
    clf_ptr gm = has_mul ? grad_mul : logits; /* never read when has_mul = 0 */
    size_t W = wg_pow2(k, rows ? 16 : 256);
    size_t global = rows ? R : R * W;
    clf_arg a[] = {
        CLF_ARG_BUF(losses.buf),
        CLF_ARG_U64(losses.off),
        CLF_ARG_BUF(dz.buf),
        CLF_ARG_U64(dz.off),
        CLF_ARG_BUF(logits.buf),
        CLF_ARG_U64(logits.off),
        CLF_ARG_BUF(targets.buf),
        CLF_ARG_U64(targets.off),
        CLF_ARG_U32(R),
        CLF_ARG_U32(V),
        CLF_ARG_F32(label_smoothing),
        CLF_ARG_I32(ignore_index),
        CLF_ARG_F32(grad_scale),
        CLF_ARG_I32(has_grad),
        CLF_ARG_BUF(gm.buf),
        CLF_ARG_U64(gm.off),
        CLF_ARG_I32(has_mul),
        CLF_ARG_LOCAL(2 * W * sizeof(float)),
    };
    int na = (int)(sizeof a / sizeof a[0]) - (rows ? 1 : 0); /* rows: no local memory */
    st = clf_kernel_launch(rt, k, 1, &global, &W, na, a, err);
    if (st != CLF_OK)
        goto fail;
    return CLF_OK;
fail:
    clf_error_prefix(err, "cross_entropy");
    return st;
}
