/*
 * ops/optim.c - host wrappers of cl/optim.cl: the gradient-clipping factor
 * and AdamW over one flat parameter buffer.
 *
 * Design: the clip factor stays on the device (gscale[0]) and AdamW reads it,
 * so clipping costs no host round trip. AdamW's step-dependent scalars (bias
 * corrections, step size, decay factor) are computed here in double, as
 * PyTorch computes them in Python floats, and passed as float arguments;
 * with dynamic loss scaling (clf_op_amp_step) Adam's t lives on the device
 * and the kernel takes its bias corrections from there.
 *
 * Not here: the learning-rate schedule (model/), the sum of squares
 * (clf_op_sumsq in ops.h), SGD or other optimizers.
 */
#include <math.h>

#include "model/ops/ops_internal.h"

clf_status clf_op_clip_scale(clf_runtime *rt, clf_ptr gscale, clf_ptr gnorm, clf_ptr sumsq,
                             float max_norm, clf_error *err)
{
    clf_kernel *k = NULL;
    clf_status st = clf_kernel_of(rt, CLF_K_CLIP_SCALE, &k, err);
    if (st != CLF_OK)
        goto fail;
    size_t global = 1, local = 1;
    clf_arg a[] = {
        CLF_ARG_BUF(gscale.buf), CLF_ARG_U64(gscale.off), CLF_ARG_BUF(gnorm.buf),
        CLF_ARG_U64(gnorm.off),  CLF_ARG_BUF(sumsq.buf),  CLF_ARG_U64(sumsq.off),
        CLF_ARG_F32(max_norm),
    };
    st = clf_kernel_launch(rt, k, 1, &global, &local, (int)(sizeof a / sizeof a[0]), a, err);
    if (st != CLF_OK)
        goto fail;
    return CLF_OK;
fail:
    clf_error_prefix(err, "clip_scale");
    return st;
}

clf_status clf_op_amp_step(clf_runtime *rt, clf_ptr amp, clf_ptr gscale, clf_ptr gnorm,
                           clf_ptr sumsq, const clf_amp_hparams *p, clf_error *err)
{
    const float max_norm = p->max_norm, lr = p->lr, beta1 = p->beta1, beta2 = p->beta2;
    const unsigned interval = p->interval;
    clf_kernel *k = NULL;
    clf_status st = clf_kernel_of(rt, CLF_K_AMP_STEP, &k, err);
    if (st != CLF_OK)
        goto fail;
    size_t global = 1, local = 1;
    clf_arg a[] = {
        CLF_ARG_BUF(amp.buf),    CLF_ARG_U64(amp.off),   CLF_ARG_BUF(gscale.buf),
        CLF_ARG_U64(gscale.off), CLF_ARG_BUF(gnorm.buf), CLF_ARG_U64(gnorm.off),
        CLF_ARG_BUF(sumsq.buf),  CLF_ARG_U64(sumsq.off), CLF_ARG_F32(max_norm),
        CLF_ARG_F32(lr),         CLF_ARG_F32(beta1),     CLF_ARG_F32(beta2),
        CLF_ARG_U32(interval),
    };
    st = clf_kernel_launch(rt, k, 1, &global, &local, (int)(sizeof a / sizeof a[0]), a, err);
    if (st != CLF_OK)
        goto fail;
    return CLF_OK;
fail:
    clf_error_prefix(err, "amp_step");
    return st;
}

clf_status clf_op_adamw_amp(clf_runtime *rt, const clf_adamw_args *x, clf_error *err)
{
    const clf_ptr params = x->params, grads = x->grads, m = x->m, v = x->v, gscale = x->gscale;
    const clf_ptr amp = x->amp, params16 = x->params16;
    const clf_adamw_hparams *h = &x->h;
    const size_t n = x->n, n_decay = x->n_decay;
    const clf_dtype t16 = x->t16;
    clf_kernel *k = NULL;
    clf_status st;
    if (h->step < 1 || n_decay > n || !(h->beta1 >= 0.0f && h->beta1 < 1.0f) ||
        !(h->beta2 >= 0.0f && h->beta2 < 1.0f) || !(h->eps >= 0.0f) || !(h->lr_mult > 0.0f)) {
        st = clf_error_set(err, CLF_ERR_ARG,
                           "need step >= 1, betas in [0, 1), eps >= 0, lr_mult > 0 and n_decay "
                           "(%zu) <= n (%zu)",
                           n_decay, n);
        goto fail;
    }
    if (t16 != CLF_DT_F32 && params16.buf == NULL) {
        st = clf_error_set(err, CLF_ERR_ARG, "a %s copy of the parameters needs its buffer",
                           clf_dtype_name(t16));
        goto fail;
    }
    const int copy = t16 != CLF_DT_F32;
    /* adamw_vec: CLF_ADAMW_W elements per work-item (cl/optim.cl) */
    const int vec = !copy && clf_ops_serial(rt);
    st = clf_kernel_of(rt, copy ? CLF_K_ADAMW_P16 : vec ? CLF_K_ADAMW_VEC : CLF_K_ADAMW, &k, err);
    if (st != CLF_OK)
        goto fail;
    if (n == 0)
        return CLF_OK;
    double lr = (double)h->lr * (double)h->lr_mult, b1 = h->beta1, b2 = h->beta2;
    double bc1 = 1.0 - pow(b1, (double)h->step);
    double bc2 = 1.0 - pow(b2, (double)h->step);
    float decay = (float)(1.0 - lr * (double)h->weight_decay);
    float w1 = (float)(1.0 - b1), w2 = (float)(1.0 - b2);
    float neg_step = (float)(-(lr / bc1));
    float bc2_sqrt = (float)sqrt(bc2);
    size_t global = vec ? (n + CLF_ADAMW_W - 1) / CLF_ADAMW_W : n;
    size_t local = clf_kernel_max_work_group(k);
    if (local == 0 || local > (vec ? 64 : 256))
        local = vec ? 64 : 256;
    if (vec) /* work-groups of 64 vectors, the last one part idle */
        global = (global + local - 1) / local * local;
    clf_buffer *p16 = params16.buf; /* adamw_p16's last three arguments */
    clf_arg a[] = {
        CLF_ARG_BUF(params.buf),
        CLF_ARG_U64(params.off),
        CLF_ARG_BUF(grads.buf),
        CLF_ARG_U64(grads.off),
        CLF_ARG_BUF(m.buf),
        CLF_ARG_U64(m.off),
        CLF_ARG_BUF(v.buf),
        CLF_ARG_U64(v.off),
        CLF_ARG_BUF(gscale.buf),
        CLF_ARG_U64(gscale.off),
        CLF_ARG_U64(n),
        CLF_ARG_U64(n_decay),
        CLF_ARG_F32(decay),
        CLF_ARG_F32(w1),
        CLF_ARG_F32(h->beta2),
        CLF_ARG_F32(w2),
        CLF_ARG_F32(neg_step),
        CLF_ARG_F32(h->lr_mult),
        CLF_ARG_F32(bc2_sqrt),
        CLF_ARG_F32(h->eps),
        CLF_ARG_BUF(amp.buf ? amp.buf : gscale.buf),
        CLF_ARG_U64(amp.off),
        CLF_ARG_I32(amp.buf != NULL),
        CLF_ARG_BUF(p16),
        CLF_ARG_U64(params16.off),
        CLF_ARG_U32(t16),
    };
    const int nargs = (int)(sizeof a / sizeof a[0]) - (copy ? 0 : 3); /* adamw: no p16 */
    st = clf_kernel_launch(rt, k, 1, &global, &local, nargs, a, err);
    if (st != CLF_OK)
        goto fail;
    return CLF_OK;
fail:
    clf_error_prefix(err, "adamw");
    return st;
}
