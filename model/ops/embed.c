/*
 * ops/embed.c - host wrappers of cl/embed.cl: token embedding forward and
 * backward, learned and sinusoidal positions, rotary embedding.
 *
 * Design: each wrapper validates sizes (index math on the device is 32-bit),
 * picks the work split for the device type (a whole row per work-item on
 * CPUs, one element per work-item on GPUs; see embed.cl) with a fixed
 * work-group size per kernel, and enqueues one launch per kernel. Nothing
 * waits, reads back or allocates.
 *
 * Not here: the embedding gradient for huge vocabularies (the deterministic
 * scan costs V*B*T compares per channel span; see embed.cl).
 */
#include <math.h>
#include <string.h>

#include "model/ops/ops.h"
#include "model/ops/ops_internal.h"

#define U32_MAX_SZ ((size_t)0xFFFFFFFFu)

/* Fixed per-kernel work-group size: want, capped by the kernel's limit. */
static size_t wg_size(const clf_kernel *k, size_t want)
{
    size_t m = clf_kernel_max_work_group(k);
    return (m != 0 && m < want) ? m : want;
}

static clf_status launch_1d(clf_runtime *rt, clf_kernel_id id, size_t global, size_t want_local,
                            int nargs, const clf_arg *args, clf_error *err)
{
    clf_kernel *k = NULL;
    clf_status st = clf_kernel_of(rt, id, &k, err);
    if (st != CLF_OK)
        goto fail;
    if (global == 0)
        return CLF_OK;
    size_t local = wg_size(k, want_local);
    st = clf_kernel_launch(rt, k, 1, &global, &local, nargs, args, err);
    if (st != CLF_OK)
        goto fail;
    return CLF_OK;
fail:
    clf_error_prefix(err, "%s", clf_kernel_id_name(id));
    return st;
}

/* Channels per work-item for a row of n floats, and the spans per row. */
static void pick_span(clf_runtime *rt, size_t n, uint32_t *span, uint32_t *nspan)
{
    if (n == 0) {
        *span = 1;
        *nspan = 1;
        return;
    }
    *span = clf_ops_serial(rt) ? (uint32_t)n : 1u;
    *nspan = (uint32_t)((n + *span - 1) / *span);
}

static size_t row_local(clf_runtime *rt) { return clf_ops_serial(rt) ? 16 : 256; }

clf_status clf_op_embed_forward(clf_runtime *rt, const clf_embed_args *e, clf_error *err)
{
    const clf_ptr out = e->out, tokens = e->tokens, wte = e->wte, wpe = e->wpe;
    const size_t B = e->B, T = e->T, C = e->C, pos0 = e->pos0;
    const float scale = e->scale;
    size_t BT = B * T;
    if (T == 0 || BT * C > U32_MAX_SZ || pos0 + T > U32_MAX_SZ)
        return clf_error_set(err, CLF_ERR_ARG,
                             "embed_forward: sizes B=%zu T=%zu C=%zu pos0=%zu out of range "
                             "(need T >= 1 and B*T*C < 2^32)",
                             B, T, C, pos0);
    if (BT == 0 || C == 0)
        return CLF_OK;
    uint32_t span, nspan;
    pick_span(rt, C, &span, &nspan);
    /* The vocabulary size is not an argument of this op: out-of-range ids are
     * only guarded against negative values and ids past 2^31 here. */
    uint32_t V = 0x7FFFFFFFu;
    int has_wpe = wpe.buf != NULL, has_pos = e->pos.buf != NULL;
    clf_ptr wp = has_wpe ? wpe : out, pp = has_pos ? e->pos : tokens;
    clf_arg a[] = {
        CLF_ARG_BUF(out.buf),    CLF_ARG_U64(out.off), CLF_ARG_BUF(tokens.buf),
        CLF_ARG_U64(tokens.off), CLF_ARG_BUF(wte.buf), CLF_ARG_U64(wte.off),
        CLF_ARG_BUF(wp.buf),     CLF_ARG_U64(wp.off),  CLF_ARG_I32(has_wpe),
        CLF_ARG_U32(BT),         CLF_ARG_U32(T),       CLF_ARG_U32(C),
        CLF_ARG_U32(V),          CLF_ARG_U32(pos0),    CLF_ARG_F32(scale),
        CLF_ARG_U32(span),       CLF_ARG_U32(nspan),   CLF_ARG_BUF(pp.buf),
        CLF_ARG_U64(pp.off),     CLF_ARG_I32(has_pos),
    };
    return launch_1d(rt, CLF_K_EMBED_FORWARD, BT * nspan, row_local(rt),
                     (int)(sizeof a / sizeof a[0]), a, err);
}

clf_status clf_op_embed_backward(clf_runtime *rt, const clf_embed_args *e, clf_error *err)
{
    const clf_ptr dwte = e->dwte, dwpe = e->dwpe, dout = e->dout, tokens = e->tokens;
    const size_t B = e->B, T = e->T, C = e->C, V = e->V;
    const float scale = e->scale;
    size_t BT = B * T;
    if (BT * C > U32_MAX_SZ || V * C > U32_MAX_SZ || V > 0x7FFFFFFFu)
        return clf_error_set(err, CLF_ERR_ARG,
                             "embed_backward: sizes B=%zu T=%zu C=%zu V=%zu out of range "
                             "(need B*T*C and V*C < 2^32)",
                             B, T, C, V);
    if (BT == 0 || C == 0)
        return CLF_OK;
    uint32_t span, nspan;
    pick_span(rt, C, &span, &nspan);
    clf_status st = CLF_OK;
    if (dwte.buf != NULL && V > 0) {
        clf_arg a[] = {
            CLF_ARG_BUF(dwte.buf), CLF_ARG_U64(dwte.off),   CLF_ARG_BUF(dout.buf),
            CLF_ARG_U64(dout.off), CLF_ARG_BUF(tokens.buf), CLF_ARG_U64(tokens.off),
            CLF_ARG_U32(BT),       CLF_ARG_U32(C),          CLF_ARG_U32(V),
            CLF_ARG_F32(scale),    CLF_ARG_U32(span),       CLF_ARG_U32(nspan),
        };
        st = launch_1d(rt, CLF_K_EMBED_BACKWARD_WTE, V * nspan, row_local(rt),
                       (int)(sizeof a / sizeof a[0]), a, err);
        if (st != CLF_OK)
            return st;
    }
    if (dwpe.buf != NULL) {
        /* The learned table is indexed from position 0 in training; pos0 is
         * not an argument of this op. */
        const int has_pos = e->pos.buf != NULL;
        const clf_ptr pp = has_pos ? e->pos : tokens;
        clf_arg a[] = {
            CLF_ARG_BUF(dwpe.buf), CLF_ARG_U64(dwpe.off), CLF_ARG_BUF(dout.buf),
            CLF_ARG_U64(dout.off), CLF_ARG_U32(B),        CLF_ARG_U32(T),
            CLF_ARG_U32(C),        CLF_ARG_U32(0),        CLF_ARG_U32(span),
            CLF_ARG_U32(nspan),    CLF_ARG_BUF(pp.buf),   CLF_ARG_U64(pp.off),
            CLF_ARG_I32(has_pos),
        };
        st = launch_1d(rt, CLF_K_EMBED_BACKWARD_WPE, T * nspan, row_local(rt),
                       (int)(sizeof a / sizeof a[0]), a, err);
    }
    return st;
}

clf_status clf_op_sinusoid_add(clf_runtime *rt, clf_ptr x, size_t B, size_t T, size_t C,
                               size_t pos0, clf_ptr pos, clf_error *err)
{
    if (B * T * C > U32_MAX_SZ || pos0 + T > (size_t)1 << 24)
        return clf_error_set(err, CLF_ERR_ARG,
                             "sinusoid_add: sizes B=%zu T=%zu C=%zu pos0=%zu out of range "
                             "(need B*T*C < 2^32 and positions < 2^24, exact in float)",
                             B, T, C, pos0);
    if (B == 0 || T == 0 || C == 0)
        return CLF_OK;
    float k = (float)(-log(10000.0) / (double)C);
    const int has_pos = pos.buf != NULL;
    const clf_ptr pp = has_pos ? pos : x;
    clf_arg a[] = {
        CLF_ARG_BUF(x.buf),  CLF_ARG_U64(x.off),   CLF_ARG_U32(B), CLF_ARG_U32(T),
        CLF_ARG_U32(C),      CLF_ARG_U32(pos0),    CLF_ARG_F32(k), CLF_ARG_BUF(pp.buf),
        CLF_ARG_U64(pp.off), CLF_ARG_I32(has_pos),
    };
    return launch_1d(rt, CLF_K_SINUSOID_ADD, T * ((C + 1) / 2), clf_ops_serial(rt) ? 64 : 256,
                     (int)(sizeof a / sizeof a[0]), a, err);
}

clf_status clf_op_rope_t(clf_runtime *rt, const clf_heads *h, size_t pos0, clf_ptr pos,
                         const clf_rope *rope, int inverse, clf_error *err)
{
    const float theta = rope->theta;
    const clf_ptr x = h->x;
    const size_t B = h->B, T = h->T, NH = h->NH, HS = h->HS, row_stride = h->row_stride;
    if (HS == 0 || HS % 2 != 0 || row_stride < NH * HS)
        return clf_error_set(err, CLF_ERR_ARG,
                             "rope: head size %zu must be even and positive and the row "
                             "stride %zu at least NH*HS = %zu",
                             HS, row_stride, NH * HS);
    if (B * T * row_stride > U32_MAX_SZ || pos0 + T > (size_t)1 << 24)
        return clf_error_set(err, CLF_ERR_ARG,
                             "rope: sizes B=%zu T=%zu row_stride=%zu pos0=%zu out of range", B, T,
                             row_stride, pos0);
    if (!(theta > 1.0f))
        return clf_error_set(err, CLF_ERR_ARG, "rope: theta %g must be above 1", (double)theta);
    if (!(rope->factor >= 1.0f && rope->mscale > 0.0f && rope->ramp_hi > rope->ramp_lo))
        return clf_error_set(err, CLF_ERR_ARG,
                             "rope: factor %g must be at least 1, mscale %g positive and the ramp "
                             "[%g, %g] increasing",
                             (double)rope->factor, (double)rope->mscale, (double)rope->ramp_lo,
                             (double)rope->ramp_hi);
    if (B == 0 || T == 0 || NH == 0)
        return CLF_OK;
    uint32_t bspan = clf_ops_serial(rt) ? (uint32_t)B : 1u;
    size_t nb = (B + bspan - 1) / bspan;
    float log2_theta = (float)log2((double)theta);
    const int has_pos = pos.buf != NULL;
    const clf_ptr pp = has_pos ? pos : x;
    clf_arg a[] = {
        CLF_ARG_BUF(x.buf),
        CLF_ARG_U64(x.off),
        CLF_ARG_U32(h->t),
        CLF_ARG_U32(B),
        CLF_ARG_U32(T),
        CLF_ARG_U32(NH),
        CLF_ARG_U32(HS),
        CLF_ARG_U32(row_stride),
        CLF_ARG_U32(pos0),
        CLF_ARG_F32(log2_theta),
        CLF_ARG_F32(rope->factor),
        CLF_ARG_F32(rope->ramp_lo),
        CLF_ARG_F32(rope->ramp_hi),
        CLF_ARG_F32(rope->mscale),
        CLF_ARG_I32(inverse ? 1 : 0),
        CLF_ARG_U32(bspan),
        CLF_ARG_BUF(pp.buf),
        CLF_ARG_U64(pp.off),
        CLF_ARG_I32(has_pos),
    };
    return launch_1d(rt, CLF_K_ROPE, nb * T * (HS / 2), clf_ops_serial(rt) ? 64 : 256,
                     (int)(sizeof a / sizeof a[0]), a, err);
}
