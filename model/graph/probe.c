/*
 * probe.c - the attention weights of one sequence at one attention site
 * (clf_model_attention_weights), for pictures of what a head attends to.
 *
 * Fused attention keeps no probabilities. The forward runs as usual; at
 * the site asked for, right after its fused attention, the descriptor it
 * used (queries, keys, masks, biases, scale) goes to clf_op_attn_probs,
 * which runs the same kernel again with identity values. The model's
 * activations are only read. Once per picture: outside any training step.
 */
#include <string.h>

#include "model/graph/model_internal.h"
#include "model/ops/ops.h"

clf_status mi_probe_attention(clf_model *m, const clf_attn_fused *f, clf_error *err)
{
    if (f->t != CLF_DT_F32)
        return clf_error_set(err, CLF_ERR_ARG,
                             "attention weights: the model stores its activations in 16 bits "
                             "(train.precision); open it for inference (float32)");
    if (f->NH * f->T * f->S > m->probe.cap)
        return clf_error_set(err, CLF_ERR_ARG,
                             "attention weights: %zu heads x %zu queries x %zu keys need %zu "
                             "floats; the buffer holds %zu",
                             f->NH, f->T, f->S, f->NH * f->T * f->S, m->probe.cap);
    clf_status st = clf_op_attn_probs(m->rt, f, m->probe.out, err);
    if (st == CLF_OK) {
        m->probe.T = (int)f->T;
        m->probe.S = (int)f->S;
        m->probe.written = 1;
    }
    return st;
}

clf_status clf_model_attention_weights(clf_model *m, clf_attn_site site, int layer, float *out,
                                       size_t cap, int *T, int *S, clf_error *err)
{
    const int s2s = m->s.kind == MI_KIND_ENCDEC;
    if (site != CLF_ATTN_SELF && !s2s)
        return clf_error_set(err, CLF_ERR_ARG,
                             "attention weights: only an encoder-decoder has %s attention",
                             site == CLF_ATTN_CROSS ? "cross-" : "an encoder's");
    const mi_stack *stk =
        site == CLF_ATTN_ENCODER || m->s.kind == MI_KIND_ENCODER ? &m->enc : &m->dec;
    if (layer < 0 || layer >= stk->n)
        return clf_error_set(err, CLF_ERR_ARG, "attention weights: layer %d of %d (0 to %d)", layer,
                             stk->n, stk->n - 1);
    if (m->s.perf_m > 0)
        return clf_error_set(err, CLF_ERR_ARG,
                             "attention weights: performer attention computes no softmax "
                             "weights (it approximates them through random features)");
    m->probe.active = 1;
    m->probe.layer = stk->first + layer;
    m->probe.cross = site == CLF_ATTN_CROSS;
    m->probe.out = out;
    m->probe.cap = cap;
    m->probe.written = 0;
    clf_status st = clf_model_forward(m, 0, err);
    const int written = m->probe.written, t = m->probe.T, s = m->probe.S;
    memset(&m->probe, 0, sizeof m->probe);
    if (st == CLF_OK && !written)
        st = clf_error_set(err, CLF_ERR_ARG,
                           "attention weights: that attention did not run in the forward (a "
                           "batch without the stack's input?)");
    if (st != CLF_OK)
        return st;
    *T = t;
    *S = s;
    return CLF_OK;
}
