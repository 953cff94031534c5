/*
 * model_backward.c - the backward graph: the forward of model_forward.c
 * walked in reverse.
 *
 * Design (llm.c's gpt2_backward): d(logits) is already in the logits
 * buffer (the fused loss wrote it); the gradient of the residual stream
 * lives in one buffer, dres, that every block reads as the gradient of its
 * output and leaves holding the gradient of its input. Parameter gradients
 * accumulate (+=) into the flat grad buffer (GEMMs with beta = 1, bias and
 * norm backward ops in accumulate mode), so micro-batches add up and a tied
 * LM head and token embedding share one gradient. Each sublayer backward
 * takes the gradient of its output, its input, and where to put the
 * gradient of its input (overwrite or add), so pre- and post-norm wiring
 * (and later encoder and cross-attention stacks) reuse the same functions.
 * Dropout masks are regenerated from their keys, never stored.
 *
 * Not here: the forward (model_forward.c), the optimizer (model_train.c).
 */
#include <math.h>

#include "model_internal.h"
#include "ops_nn.h"

static clf_act act_op(int a)
{
    switch (a) {
    case MI_ACT_RELU: return CLF_ACT_RELU;
    case MI_ACT_GELU_TANH: return CLF_ACT_GELU_TANH;
    default: return CLF_ACT_GELU_ERF;
    }
}

/* dx (=|+=) norm backward of dout; dw, db += */
static clf_status norm_bwd(clf_model *m, int type, const mi_norm_a *a, const mi_norm_p *p,
                           clf_ptr dx, clf_ptr dout, clf_ptr x, size_t R, int accumulate,
                           clf_error *err)
{
    const size_t C = (size_t)m->s.C;
    if (type == MI_NORM_RMSNORM)
        return clf_op_rmsnorm_backward(m->rt, dx, mi_grad(m, p->w), dout, x, mi_at(a->rstd, 0),
                                       mi_par(m, p->w), R, C, accumulate, err);
    return clf_op_layernorm_backward(m->rt, dx, mi_grad(m, p->w), mi_grad(m, p->b), dout, x,
                                     mi_at(a->mean, 0), mi_at(a->rstd, 0), mi_par(m, p->w), R, C,
                                     accumulate, err);
}

/* For y [R, out] = x [R, in] W^T + b: dW += dy^T x, db += colsum(dy),
 * dx = beta * dx + dy W. */
static clf_status linear_bwd(clf_model *m, clf_ptr dx, float beta, clf_ptr dy, clf_ptr x,
                             size_t w, size_t b, size_t R, size_t in, size_t out,
                             clf_error *err)
{
    clf_status st;
    if ((st = mi_gemm(m, 1, 0, out, in, R, 1.0f, dy, out, x, in, 1.0f, mi_grad(m, w), in,
                      err)) != CLF_OK)
        return st;
    if (b != MI_NONE &&
        (st = clf_op_bias_backward(m->rt, mi_grad(m, b), dy, R, out, 1, err)) != CLF_OK)
        return st;
    return mi_gemm(m, 0, 0, R, in, out, 1.0f, dy, out, mi_par(m, w), in, beta, dx, in, err);
}

/* The attention core's backward over heads, the reverse of attn_core_fwd:
 * from dyh [B*NH, T, HS] (gradient of the heads' outputs), with q
 * [B*NH, T, HS], keys and values [B*NH, S, HS] and layer l's probabilities
 * att [B*NH, T, S], the gradients of q, k and v are merged into rows
 * (dq_dst with dq_stride floats per row, etc.; overwritten), e.g. the three
 * thirds of a fused dqkv. S may differ from T (cross-attention). */
static clf_status attn_core_bwd(clf_model *m, int l, clf_ptr dyh, clf_ptr q, clf_ptr k,
                                clf_ptr v, size_t B, size_t T, size_t S, clf_ptr dq_dst,
                                size_t dq_stride, clf_ptr dk_dst, size_t dk_stride,
                                clf_ptr dv_dst, size_t dv_stride, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t NH = (size_t)s->NH, HS = (size_t)s->HS, BNH = B * NH;
    const size_t TS = T * S, THS = T * HS, SHS = S * HS, natt = BNH * TS;
    const float scale = 1.0f / sqrtf((float)HS);
    clf_ptr att = mi_at(m->ba[l].att, 0), pre = mi_at(m->preatt, 0), datt = mi_at(m->datt, 0);
    clf_ptr dhead = mi_at(m->dhead, 0);
    clf_status st;

    /* y = P v with P the (dropped) probabilities */
    clf_ptr P = att;
    if (s->p_attn > 0) {
        if ((st = clf_op_dropout_forward(m->rt, pre, att, natt, s->p_attn, m->state.seed,
                                         mi_dropout_stream(m, l, 0), err)) != CLF_OK)
            return st;
        P = pre;
    }
    if ((st = mi_gemm_batched(m, 0, 1, T, S, HS, 1.0f, dyh, HS, THS, v, HS, SHS, 0.0f, datt, S,
                              TS, BNH, err)) != CLF_OK || /* dP = dy v^T */
        (st = mi_gemm_batched(m, 1, 0, S, HS, T, 1.0f, P, S, TS, dyh, HS, THS, 0.0f, dhead, HS,
                              SHS, BNH, err)) != CLF_OK || /* dv = P^T dy */
        (st = clf_op_heads_merge(m->rt, dv_dst, dhead, B, S, NH, HS, dv_stride, 0, err)) !=
            CLF_OK)
        return st;
    if (s->p_attn > 0 &&
        (st = clf_op_dropout_backward(m->rt, datt, datt, natt, s->p_attn, m->state.seed,
                                      mi_dropout_stream(m, l, 0), err)) != CLF_OK)
        return st;
    /* softmax: dS (into the scores scratch, free again) */
    if ((st = clf_op_softmax_backward(m->rt, pre, datt, att, BNH * T, S, scale, err)) != CLF_OK)
        return st;
    /* S = q k^T: dq = dS k, dk = dS^T q */
    if ((st = mi_gemm_batched(m, 0, 0, T, HS, S, 1.0f, pre, S, TS, k, HS, SHS, 0.0f, dhead, HS,
                              THS, BNH, err)) != CLF_OK ||
        (st = clf_op_heads_merge(m->rt, dq_dst, dhead, B, T, NH, HS, dq_stride, 0, err)) !=
            CLF_OK ||
        (st = mi_gemm_batched(m, 1, 0, S, HS, T, 1.0f, pre, S, TS, q, HS, THS, 0.0f, dhead, HS,
                              SHS, BNH, err)) != CLF_OK ||
        (st = clf_op_heads_merge(m->rt, dk_dst, dhead, B, S, NH, HS, dk_stride, 0, err)) !=
            CLF_OK)
        return st;
    return CLF_OK;
}

/* Self-attention of layer l: dout [BT, C] -> din (beta: 0 overwrite, 1 add),
 * with `in` the forward input. */
static clf_status attn_bwd(clf_model *m, int l, clf_ptr dout, clf_ptr in, clf_ptr din,
                           float beta, size_t B, size_t T, clf_error *err)
{
    const mi_spec *s = &m->s;
    const mi_attn_p *p = &m->bp[l].attn;
    const mi_block_a *a = &m->ba[l];
    const size_t C = (size_t)s->C, NH = (size_t)s->NH, HS = (size_t)s->HS, BT = B * T;
    clf_ptr d = dout, datty = mi_at(m->dC3, 0), dyh = mi_at(m->datty_h, 0);
    clf_ptr dqkv = mi_at(m->dqkv, 0);
    clf_status st;

    if (s->p_resid > 0) {
        d = mi_at(m->dC2, 0);
        if ((st = clf_op_dropout_backward(m->rt, d, dout, BT * C, s->p_resid, m->state.seed,
                                          mi_dropout_stream(m, l, 1), err)) != CLF_OK)
            return st;
    }
    /* projection: d -> datty [BT, C] -> heads */
    if ((st = linear_bwd(m, datty, 0.0f, d, mi_at(a->atty, 0), p->proj_w, p->proj_b, BT, C, C,
                         err)) != CLF_OK ||
        (st = clf_op_heads_split(m->rt, dyh, datty, B, T, NH, HS, C, err)) != CLF_OK)
        return st;
    if ((st = attn_core_bwd(m, l, dyh, mi_at(a->q, 0), mi_at(a->k, 0), mi_at(a->v, 0), B, T, T,
                            dqkv, 3 * C, clf_ptr_at(dqkv, C), 3 * C, clf_ptr_at(dqkv, 2 * C),
                            3 * C, err)) != CLF_OK)
        return st;
    if (s->pos == MI_POS_ROPE &&
        ((st = clf_op_rope(m->rt, dqkv, B, T, NH, HS, 3 * C, 0, s->rope_theta, 1, err)) !=
             CLF_OK ||
         (st = clf_op_rope(m->rt, clf_ptr_at(dqkv, C), B, T, NH, HS, 3 * C, 0, s->rope_theta, 1,
                           err)) != CLF_OK))
        return st;
    return linear_bwd(m, din, beta, dqkv, in, p->qkv_w, p->qkv_b, BT, C, 3 * C, err);
}

/* Feed-forward of layer l: dout [BT, C] -> din (beta), `in` the forward input. */
static clf_status ffn_bwd(clf_model *m, int l, clf_ptr dout, clf_ptr in, clf_ptr din,
                          float beta, size_t BT, clf_error *err)
{
    const mi_spec *s = &m->s;
    const mi_ffn_p *p = &m->bp[l].ffn;
    const mi_block_a *a = &m->ba[l];
    const size_t C = (size_t)s->C, H = (size_t)s->H, F = (size_t)s->fc_rows;
    clf_ptr d = dout, dact = mi_at(m->dH1, 0), dfch = mi_at(m->dH2, 0);
    clf_ptr fch = mi_at(a->fch, 0);
    clf_status st;

    if (s->p_resid > 0) {
        d = mi_at(m->dC2, 0);
        if ((st = clf_op_dropout_backward(m->rt, d, dout, BT * C, s->p_resid, m->state.seed,
                                          mi_dropout_stream(m, l, 3), err)) != CLF_OK)
            return st;
    }
    if ((st = linear_bwd(m, dact, 0.0f, d, mi_at(a->fch_act, 0), p->proj_w, p->proj_b, BT, H, C,
                         err)) != CLF_OK)
        return st;
    if (s->p_ffn > 0 &&
        (st = clf_op_dropout_backward(m->rt, dact, dact, BT * H, s->p_ffn, m->state.seed,
                                      mi_dropout_stream(m, l, 2), err)) != CLF_OK)
        return st;
    if (s->act == MI_ACT_SWIGLU)
        st = clf_op_swiglu_backward(m->rt, dfch, dact, fch, BT, H, err);
    else
        st = clf_op_act_backward(m->rt, act_op(s->act), dfch, dact, fch, BT * H, 0, err);
    if (st != CLF_OK)
        return st;
    return linear_bwd(m, din, beta, dfch, in, p->fc_w, p->fc_b, BT, C, F, err);
}

/* dres: gradient of block l's output on entry, of its input on exit. */
static clf_status block_bwd(clf_model *m, int l, size_t B, size_t T, clf_error *err)
{
    const mi_spec *s = &m->s;
    const mi_block_p *p = &m->bp[l];
    const mi_block_a *a = &m->ba[l];
    const size_t BT = B * T;
    clf_ptr x = mi_block_out(m, l - 1), dres = mi_at(m->dres, 0), d1 = mi_at(m->dC1, 0);
    clf_ptr ln1 = mi_at(a->ln1.out, 0), ln2 = mi_at(a->ln2.out, 0);
    clf_ptr res1 = mi_at(a->res1, 0), res2 = mi_at(a->res2, 0);
    clf_status st;
    if (!s->norm_post) {
        /* res2 = res1 + ffn(ln2(res1)); res1 = x + attn(ln1(x)) */
        if ((st = ffn_bwd(m, l, dres, ln2, d1, 0.0f, BT, err)) != CLF_OK ||
            (st = norm_bwd(m, s->norm, &a->ln2, &p->ln2, dres, d1, res1, BT, 1, err)) !=
                CLF_OK ||
            (st = attn_bwd(m, l, dres, ln1, d1, 0.0f, B, T, err)) != CLF_OK ||
            (st = norm_bwd(m, s->norm, &a->ln1, &p->ln1, dres, d1, x, BT, 1, err)) != CLF_OK)
            return st;
        return CLF_OK;
    }
    /* out = ln2(res2), res2 = ln1 + ffn(ln1), ln1 = ln1(res1), res1 = x + attn(x) */
    if ((st = norm_bwd(m, s->norm, &a->ln2, &p->ln2, d1, dres, res2, BT, 0, err)) != CLF_OK ||
        (st = ffn_bwd(m, l, d1, ln1, d1, 1.0f, BT, err)) != CLF_OK ||
        (st = norm_bwd(m, s->norm, &a->ln1, &p->ln1, dres, d1, res1, BT, 0, err)) != CLF_OK ||
        (st = attn_bwd(m, l, dres, x, dres, 1.0f, B, T, err)) != CLF_OK)
        return st;
    return CLF_OK;
}

clf_status mi_backward(clf_model *m, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t B = (size_t)m->cur_B, T = (size_t)m->cur_T, C = (size_t)s->C;
    const size_t V = (size_t)s->V, BT = B * T;
    clf_ptr dlogits = mi_at(m->logits, 0), dres = mi_at(m->dres, 0), d1 = mi_at(m->dC1, 0);
    clf_ptr xf = mi_head_in(m);
    clf_status st;

    /* LM head: logits = xf Wout^T */
    clf_ptr dxf = s->final_norm != MI_NORM_NONE ? d1 : dres;
    if ((st = linear_bwd(m, dxf, 0.0f, dlogits, xf, m->lm_head, MI_NONE, BT, C, V, err)) !=
        CLF_OK)
        return st;
    if (s->final_norm != MI_NORM_NONE &&
        (st = norm_bwd(m, s->final_norm, &m->lnf_a, &m->lnf, dres, d1,
                       mi_block_out(m, s->L - 1), BT, 0, err)) != CLF_OK)
        return st;
    for (int l = s->L - 1; l >= 0; l--)
        if ((st = block_bwd(m, l, B, T, err)) != CLF_OK)
            return st;
    clf_ptr dx0 = dres;
    if (s->p_emb > 0) {
        dx0 = mi_at(m->dC2, 0);
        if ((st = clf_op_dropout_backward(m->rt, dx0, dres, BT * C, s->p_emb, m->state.seed,
                                          mi_dropout_stream(m, -1, 0), err)) != CLF_OK)
            return st;
    }
    return clf_op_embed_backward(m->rt, mi_grad(m, m->wte), mi_grad(m, m->wpe), dx0,
                                 mi_at(m->tokens, 0), B, T, C, V, s->emb_scale, err);
}
