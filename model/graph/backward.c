/*
 * backward.c - the backward graph: the forward of forward.c
 * walked in reverse.
 *
 * Design (llm.c's gpt2_backward): d(logits) is already in the logits
 * buffer (the fused loss wrote it); the gradient of the residual stream
 * lives in one buffer, dres, that every block reads as the gradient of its
 * output and leaves holding the gradient of its input. Parameter gradients
 * accumulate (+=) into the flat grad buffer (GEMMs with beta = 1, bias and
 * norm backward ops in accumulate mode), so micro-batches add up and a tied
 * LM head and token embedding (or shared source and target embeddings)
 * share one gradient. Each sublayer backward takes the gradient of its
 * output, its input, and where to put the gradient of its input (overwrite
 * or add), so pre- and post-norm wiring, encoder, decoder and
 * cross-attention reuse the same functions. An encoder-decoder walks the
 * decoder stack first; every cross-attention adds the gradient of its keys
 * and values into denc (the gradient of the encoder's output: the first
 * one visited overwrites), then the encoder stack is walked from denc, with
 * dres reused as its residual gradient. Dropout masks are regenerated from
 * their keys, never stored. With train.precision bf16 or fp16 the FFN's
 * hidden gradient (dH2, where the activation's derivative is fused into
 * the projection's backward) is stored in 16 bits: the two GEMMs and the
 * bias gradient that read it widen it; with fp16 every gradient arrives
 * multiplied by the loss scale (forward.c's loss), so small ones stay
 * inside half's range.
 *
 * Not here: the forward (forward.c), the optimizer (step.c).
 */
#include <math.h>

#include "model/graph/model_internal.h"
#include "model/ops/ops.h"

/* dx (=|+=) norm backward of dout; dw, db += */
static clf_status norm_bwd(clf_model *m, int type, const mi_norm_a *a, const mi_norm_p *p,
                           clf_ptr dx, clf_ptr dout, clf_ptr x, size_t R, int accumulate,
                           clf_error *err)
{
    const size_t C = (size_t)m->s.C;
    if (type == MI_NORM_RMSNORM)
        return clf_op_rmsnorm_backward(m->rt, dx, mi_grad(m, p->w), dout, x, a->rstd,
                                       mi_par(m, p->w), R, C, accumulate, err);
    return clf_op_layernorm_backward(m->rt, dx, mi_grad(m, p->w), mi_grad(m, p->b), dout, x,
                                     a->mean, a->rstd, mi_par(m, p->w), R, C, accumulate, err);
}

/* For y [R, out] = x [R, in] W^T + b: dW += dy^T x, db += colsum(dy),
 * dx = beta * dx + dy W, then (act not NONE) times act'(act_in) in the
 * same pass, or times act_in itself where that is the derivative the
 * forward stored (mi_ffn_keeps_dact): the gradient of the input of the
 * activation that made x.
 * x and act_in are stored as t, dy as dy_t and dx as dx_t
 * (train.precision), everything else in float32. */
static clf_status linear_bwd_typed(clf_model *m, clf_ptr dx, clf_dtype dx_t, float beta, clf_ptr dy,
                                   clf_dtype dy_t, clf_ptr x, clf_dtype t, size_t w, size_t b,
                                   size_t R, size_t in, size_t out, clf_gemm_act act,
                                   clf_ptr act_in, clf_error *err)
{
    clf_status st;
    /* the bias first: dy is still in cache from the op that wrote it */
    if (b != MI_NONE &&
        (st = clf_op_bias_backward_t(m->rt, mi_grad(m, b), dy, dy_t, R, out, 1, err)) != CLF_OK)
        return st;
    if ((st = mi_gemm(m,
                      &(clf_gemm_desc){.trans_a = 1,
                                       .m = out,
                                       .n = in,
                                       .k = R,
                                       .alpha = 1.0f,
                                       .a = dy,
                                       .lda = out,
                                       .b = x,
                                       .ldb = in,
                                       .beta = 1.0f,
                                       .c = mi_grad(m, w),
                                       .ldc = in,
                                       .a_type = dy_t,
                                       .b_type = t},
                      err)) != CLF_OK)
        return st;
    return mi_gemm(m,
                   &(clf_gemm_desc){.m = R,
                                    .n = in,
                                    .k = out,
                                    .alpha = 1.0f,
                                    .a = dy,
                                    .lda = out,
                                    .b = mi_wpar(m, w),
                                    .ldb = in,
                                    .beta = beta,
                                    .c = dx,
                                    .ldc = in,
                                    .act = mi_ffn_keeps_dact(m) ? CLF_GEMM_ACT_NONE : act,
                                    .act_grad = act != CLF_GEMM_ACT_NONE && !mi_ffn_keeps_dact(m),
                                    .mul_d = act != CLF_GEMM_ACT_NONE && mi_ffn_keeps_dact(m),
                                    .d = act != CLF_GEMM_ACT_NONE ? act_in : mi_nullptr(),
                                    .ldd = in,
                                    .a_type = dy_t,
                                    .b_type = m->s.act16,
                                    .c_type = dx_t,
                                    .d_type = act != CLF_GEMM_ACT_NONE ? t : CLF_DT_F32},
                   err);
}

static clf_status linear_bwd(clf_model *m, clf_ptr dx, float beta, clf_ptr dy, clf_ptr x,
                             clf_dtype x_t, size_t w, size_t b, size_t R, size_t in, size_t out,
                             clf_error *err)
{
    return linear_bwd_typed(m, dx, CLF_DT_F32, beta, dy, CLF_DT_F32, x, x_t, w, b, R, in, out,
                            CLF_GEMM_ACT_NONE, mi_nullptr(), err);
}

/* The output half shared by self- and cross-attention: the residual
 * dropout (site), then the projection (weights proj_w, proj_b; forward
 * input atty), leaving the attention output's gradient [B*T, C] in m->dC3
 * (stored as s.act16: mi_view). */
static clf_status attn_out_bwd(clf_model *m, int l, int site, clf_ptr dout, clf_ptr atty,
                               size_t proj_w, size_t proj_b, size_t B, size_t T, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t C = (size_t)s->C, BT = B * T;
    clf_ptr d = dout;
    clf_status st;
    if (s->p_resid > 0) {
        d = m->dC2;
        if ((st = clf_op_dropout_backward(m->rt, d, dout, BT * C, s->p_resid, m->state.seed,
                                          mi_dropout_stream(m, l, site), err)) != CLF_OK)
            return st;
    }
    /* the output's gradient and the output as the attention stores them */
    const clf_dtype t = s->act16;
    return linear_bwd_typed(m, mi_view(m->dC3, t), t, 0.0f, d, CLF_DT_F32, atty, t, proj_w, proj_b,
                            BT, C, C, CLF_GEMM_ACT_NONE, mi_nullptr(), err);
}

/* Self-attention of block l: dout [BT, C] -> din (beta: 0 overwrite, 1 add),
 * with `in` the forward input (stored as in_t). */
static clf_status attn_bwd(clf_model *m, int l, clf_ptr dout, clf_ptr in, clf_dtype in_t,
                           clf_ptr din, float beta, size_t B, size_t T, clf_error *err)
{
    const mi_spec *s = &m->s;
    const mi_attn_p *p = &m->bp[l].attn;
    const mi_block_a *a = &m->ba[l];
    const size_t C = (size_t)s->C, NH = (size_t)s->NH, HS = (size_t)s->HS, BT = B * T;
    clf_ptr dqkv = m->dqkv;
    clf_status st;

    if ((st = attn_out_bwd(m, l, MI_SITE_ATTN_OUT, dout, a->atty, p->proj_w, p->proj_b, B, T,
                           err)) != CLF_OK)
        return st;
    const clf_attn_fused f = mi_attn_self(m, l, B, T, 1);
    const clf_attn_fused_grad g = {.dy = mi_view(m->dC3, s->act16),
                                   .dq = dqkv,
                                   .dk = clf_ptr_at(dqkv, C),
                                   .dv = clf_ptr_at(dqkv, 2 * C),
                                   .dsum = m->dsum,
                                   .dq_stride = 3 * C,
                                   .dkv_stride = 3 * C};
    if ((st = clf_op_attn_fused_backward(m->rt, &f, &g, err)) != CLF_OK)
        return st;
    if (s->pos == MI_POS_ROPE &&
        ((st = clf_op_rope_t(m->rt, s->act16, dqkv, B, T, NH, HS, 3 * C, 0, s->rope_theta, 1,
                             err)) != CLF_OK ||
         (st = clf_op_rope_t(m->rt, s->act16, clf_ptr_at(dqkv, C), B, T, NH, HS, 3 * C, 0,
                             s->rope_theta, 1, err)) != CLF_OK))
        return st;
    return linear_bwd_typed(m, din, CLF_DT_F32, beta, dqkv, s->act16, in, in_t, p->qkv_w, p->qkv_b,
                            BT, C, 3 * C, CLF_GEMM_ACT_NONE, mi_nullptr(), err);
}

/* Cross-attention of decoder block l: dout [BT, C] -> din (beta) for the
 * queries' input `in`, and the gradient of the encoder's output [BS, C]
 * into denc (beta_enc: 0 overwrite, 1 add). */
static clf_status cross_bwd(clf_model *m, int l, clf_ptr dout, clf_ptr in, clf_dtype in_t,
                            clf_ptr din, float beta, float beta_enc, size_t B, size_t T, size_t S,
                            clf_error *err)
{
    const mi_spec *s = &m->s;
    const mi_cross_p *p = &m->bp[l].cross;
    const mi_block_a *a = &m->ba[l];
    const size_t C = (size_t)s->C;
    const size_t BT = B * T, BS = B * S;
    /* dq [BT, C] then dkv [BS, 2C] in the dqkv scratch (BT + 2 BS <= 3 max rows) */
    clf_ptr dq = m->dqkv, dkv = clf_ptr_at(m->dqkv, BT * C);
    clf_status st;

    if ((st = attn_out_bwd(m, l, MI_SITE_CROSS_OUT, dout, a->xatty, p->proj_w, p->proj_b, B, T,
                           err)) != CLF_OK)
        return st;
    const clf_attn_fused f = mi_attn_cross(m, l, B, T, S, 1);
    const clf_attn_fused_grad g = {.dy = mi_view(m->dC3, s->act16),
                                   .dq = dq,
                                   .dk = dkv,
                                   .dv = clf_ptr_at(dkv, C),
                                   .dsum = m->dsum,
                                   .dq_stride = C,
                                   .dkv_stride = 2 * C};
    if ((st = clf_op_attn_fused_backward(m->rt, &f, &g, err)) != CLF_OK)
        return st;
    const clf_dtype t = s->act16; /* dq and dkv's storage */
    if ((st = linear_bwd_typed(m, m->denc, CLF_DT_F32, beta_enc, dkv, t, mi_stack_out(m, &m->enc),
                               CLF_DT_F32, p->kv_w, p->kv_b, BS, C, 2 * C, CLF_GEMM_ACT_NONE,
                               mi_nullptr(), err)) != CLF_OK)
        return st;
    return linear_bwd_typed(m, din, CLF_DT_F32, beta, dq, t, in, in_t, p->q_w, p->q_b, BT, C, C,
                            CLF_GEMM_ACT_NONE, mi_nullptr(), err);
}

/* Feed-forward of block l: dout [BT, C] -> din (beta), `in` the forward
 * input (stored as in_t). */
static clf_status ffn_bwd(clf_model *m, int l, clf_ptr dout, clf_ptr in, clf_dtype in_t,
                          clf_ptr din, float beta, size_t BT, clf_error *err)
{
    const mi_spec *s = &m->s;
    const mi_ffn_p *p = &m->bp[l].ffn;
    const mi_block_a *a = &m->ba[l];
    const size_t C = (size_t)s->C, H = (size_t)s->H, F = (size_t)s->fc_rows;
    clf_ptr d = dout, dact = m->dH1, dfch = m->dH2;
    clf_ptr fch = a->fch;
    clf_status st;

    if (s->p_resid > 0) {
        d = m->dC2;
        if ((st = clf_op_dropout_backward(m->rt, d, dout, BT * C, s->p_resid, m->state.seed,
                                          mi_dropout_stream(m, l, MI_SITE_FFN_OUT), err)) != CLF_OK)
            return st;
    }
    if (mi_ffn_fused_dact(s)) {
        /* dfch = (d W) act'(pre-activation) in one pass, stored as m->dH2_t
         * (fch holds act' itself where mi_ffn_keeps_dact) */
        if ((st = linear_bwd_typed(m, dfch, m->dH2_t, 0.0f, d, CLF_DT_F32, a->fch_act, a->fch_t,
                                   p->proj_w, p->proj_b, BT, H, C, mi_gemm_act(s->act), fch,
                                   err)) != CLF_OK)
            return st;
    } else {
        /* dact = d W; its dropout; then through the gate or activation */
        if ((st = linear_bwd(m, dact, 0.0f, d, a->fch_act, a->fch_t, p->proj_w, p->proj_b, BT, H, C,
                             err)) != CLF_OK)
            return st;
        if (s->p_ffn > 0 &&
            (st = clf_op_dropout_backward(m->rt, dact, dact, BT * H, s->p_ffn, m->state.seed,
                                          mi_dropout_stream(m, l, MI_SITE_FFN_H), err)) != CLF_OK)
            return st;
        st = s->swiglu
                 ? clf_op_swiglu_backward(m->rt, dfch, dact, fch, BT, H, err)
                 : clf_op_act_backward(m->rt, (clf_act)s->act, dfch, dact, fch, BT * H, 0, err);
        if (st != CLF_OK)
            return st;
    }
    return linear_bwd_typed(m, din, CLF_DT_F32, beta, dfch, m->dH2_t, in, in_t, p->fc_w, p->fc_b,
                            BT, C, F, CLF_GEMM_ACT_NONE, mi_nullptr(), err);
}

/* dres: gradient of block l's output on entry, of its input on exit. S:
 * the source length of its cross-attention; beta_enc for denc. */
static clf_status block_bwd(clf_model *m, int l, clf_ptr dres, size_t B, size_t T, size_t S,
                            float beta_enc, clf_error *err)
{
    const mi_spec *s = &m->s;
    const mi_block_p *p = &m->bp[l];
    const mi_block_a *a = &m->ba[l];
    const size_t BT = B * T, n = BT * (size_t)s->C;
    clf_ptr x = mi_block_in(m, l), d1 = m->dC1;
    clf_ptr ln1 = a->ln1.out, ln2 = a->ln2.out, lnx = a->lnx.out;
    clf_ptr res1 = a->res1, res2 = a->res2, resx = a->resx;
    clf_status st;
    if (!s->norm_post) {
        /* res2 = mid + ffn(ln2(mid)); [resx = res1 + cross(lnx(res1));] res1 = x + attn(ln1(x)) */
        clf_ptr mid = p->has_cross ? resx : res1;
        if ((st = ffn_bwd(m, l, dres, ln2, a->ln2.t, d1, 0.0f, BT, err)) != CLF_OK ||
            (st = norm_bwd(m, s->norm, &a->ln2, &p->ln2, dres, d1, mid, BT, 1, err)) != CLF_OK)
            return st;
        if (p->has_cross &&
            ((st = cross_bwd(m, l, dres, lnx, a->lnx.t, d1, 0.0f, beta_enc, B, T, S, err)) !=
                 CLF_OK ||
             (st = norm_bwd(m, s->norm, &a->lnx, &p->lnx, dres, d1, res1, BT, 1, err)) != CLF_OK))
            return st;
        if ((st = attn_bwd(m, l, dres, ln1, a->ln1.t, d1, 0.0f, B, T, err)) != CLF_OK ||
            (st = norm_bwd(m, s->norm, &a->ln1, &p->ln1, dres, d1, x, BT, 1, err)) != CLF_OK)
            return st;
        return CLF_OK;
    }
    /* out = ln2(res2), res2 = mid + ffn(mid), [mid = lnx(resx), resx = ln1 + cross(ln1),]
     * ln1 = ln1(res1), res1 = x + attn(x) */
    clf_ptr mid = p->has_cross ? lnx : ln1;
    if ((st = norm_bwd(m, s->norm, &a->ln2, &p->ln2, d1, dres, res2, BT, 0, err)) != CLF_OK ||
        (st = ffn_bwd(m, l, d1, mid, CLF_DT_F32, d1, 1.0f, BT, err)) != CLF_OK)
        return st; /* d1 = d mid */
    if (p->has_cross) {
        if ((st = norm_bwd(m, s->norm, &a->lnx, &p->lnx, dres, d1, resx, BT, 0, err)) !=
                CLF_OK || /* dres = d resx */
            (st = cross_bwd(m, l, dres, ln1, CLF_DT_F32, d1, 0.0f, beta_enc, B, T, S, err)) !=
                CLF_OK ||
            (st = clf_op_add(m->rt, d1, d1, dres, n, err)) != CLF_OK) /* d1 = d ln1 */
            return st;
    }
    if ((st = norm_bwd(m, s->norm, &a->ln1, &p->ln1, dres, d1, res1, BT, 0, err)) != CLF_OK ||
        (st = attn_bwd(m, l, dres, x, CLF_DT_F32, dres, 1.0f, B, T, err)) != CLF_OK)
        return st;
    return CLF_OK;
}

/* A stack's backward: dout is the gradient of its output (the final norm's,
 * or the last block's; it may be dres itself when there is no final norm),
 * dres the residual gradient buffer; then the embeddings. S: the source
 * length for the decoder's cross-attention. */
static clf_status stack_bwd(clf_model *m, const mi_stack *stk, clf_ptr dout, clf_ptr dres, size_t B,
                            size_t T, size_t S, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t C = (size_t)s->C, V = (size_t)s->V, BT = B * T;
    clf_status st;
    if (s->final_norm != MI_NORM_NONE) {
        clf_ptr last = stk->n > 0 ? mi_block_out(m, stk->first + stk->n - 1) : stk->x0;
        if ((st = norm_bwd(m, s->final_norm, &stk->lnf_a, &stk->lnf, dres, dout, last, BT, 0,
                           err)) != CLF_OK)
            return st;
    } else if (dout.buf != dres.buf || dout.off != dres.off) {
        if ((st = clf_buffer_copy(m->rt, dout.buf, dout.off * 4, dres.buf, dres.off * 4, BT * C * 4,
                                  err)) != CLF_OK)
            return st;
    }
    for (int l = stk->first + stk->n - 1; l >= stk->first; l--) {
        float beta_enc = l == stk->first + stk->n - 1 ? 0.0f : 1.0f;
        /* recomputation: the shared activations hold the stack's last
         * block from the forward; every other block is run again first */
        if (s->recompute == MI_RECOMPUTE_BLOCK && l != stk->first + stk->n - 1 &&
            (st = mi_block_recompute(m, l, (int)B, (int)T, (int)S, err)) != CLF_OK)
            return st;
        /* attention recomputation: the shared q, k, v and output hold the
         * last block's; every other block's attention runs again */
        if (s->recompute == MI_RECOMPUTE_ATTN && l != stk->first + stk->n - 1 &&
            (st = mi_attn_recompute(m, l, (int)B, (int)T, err)) != CLF_OK)
            return st;
        if ((st = block_bwd(m, l, dres, B, T, S, beta_enc, err)) != CLF_OK ||
            (m->grad_hook != NULL && (st = m->grad_hook(m->grad_hook_user, l, err)) != CLF_OK))
            return st;
    }
    clf_ptr dx0 = dres;
    if (s->p_emb > 0) {
        dx0 = m->dC2;
        if ((st = clf_op_dropout_backward(m->rt, dx0, dres, BT * C, s->p_emb, m->state.seed,
                                          mi_dropout_stream(m, stk->drop_layer, 0), err)) != CLF_OK)
            return st;
    }
    if (s->emb_norm != MI_NORM_NONE) { /* through the embeddings' norm, into dC1 */
        clf_ptr dxe = m->dC1;
        if ((st = norm_bwd(m, s->emb_norm, &stk->lne_a, &stk->lne, dxe, dx0, stk->xe, BT, 0,
                           err)) != CLF_OK)
            return st;
        dx0 = dxe;
    }
    clf_ptr tokens = stk->src ? mi_at(m->src, 0) : mi_at(m->tokens, 0);
    return clf_op_embed_backward(m->rt, mi_grad(m, stk->wte), mi_grad(m, stk->wpe), dx0, tokens, B,
                                 T, C, V, s->emb_scale, err);
}

/* The classifier's backward into dx [B*S, C] (the gradient of the encoder's
 * output, overwritten). */
static clf_status classifier_bwd(clf_model *m, clf_ptr dx, size_t B, size_t S, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t C = (size_t)s->C, NL = (size_t)s->NL;
    clf_ptr dlogits = m->logits, xf = mi_stack_out(m, &m->enc);
    clf_status st;
    clf_ptr X = xf;
    size_t ldx = S * C;
    if (s->pool == MI_POOL_MEAN) {
        X = m->pooled;
        ldx = C;
    }
    if ((st = mi_gemm(m,
                      &(clf_gemm_desc){.trans_a = 1,
                                       .m = NL,
                                       .n = C,
                                       .k = B,
                                       .alpha = 1.0f,
                                       .a = dlogits,
                                       .lda = NL,
                                       .b = X,
                                       .ldb = ldx,
                                       .beta = 1.0f,
                                       .c = mi_grad(m, m->cls_w),
                                       .ldc = C},
                      err)) != CLF_OK ||
        (st = clf_op_bias_backward(m->rt, mi_grad(m, m->cls_b), dlogits, B, NL, 1, err)) != CLF_OK)
        return st;
    if (s->pool == MI_POOL_MEAN) {
        clf_ptr dpool = m->dC3;
        if ((st = mi_gemm(m,
                          &(clf_gemm_desc){.m = B,
                                           .n = C,
                                           .k = NL,
                                           .alpha = 1.0f,
                                           .a = dlogits,
                                           .lda = NL,
                                           .b = mi_wpar(m, m->cls_w),
                                           .ldb = C,
                                           .c = dpool,
                                           .ldc = C,
                                           .b_type = m->s.act16},
                          err)) != CLF_OK)
            return st;
        return clf_op_mean_pool_backward(m->rt, dx, dpool, mi_at(m->src_keep, 0), B, S, C, err);
    }
    /* only the first position of each sequence gets a gradient */
    if ((st = clf_ptr_zero(m->rt, dx, B * S * C, err)) != CLF_OK)
        return st;
    return mi_gemm(m,
                   &(clf_gemm_desc){.m = B,
                                    .n = C,
                                    .k = NL,
                                    .alpha = 1.0f,
                                    .a = dlogits,
                                    .lda = NL,
                                    .b = mi_wpar(m, m->cls_w),
                                    .ldb = C,
                                    .c = dx,
                                    .ldc = S * C,
                                    .b_type = m->s.act16},
                   err);
}

static clf_status backward(clf_model *m, clf_error *err);

clf_status mi_backward(clf_model *m, clf_error *err)
{
    clf_status st = backward(m, err);
    if (st == CLF_OK && m->grad_hook != NULL) /* the tensors outside blocks */
        st = m->grad_hook(m->grad_hook_user, -1, err);
    return st;
}

static clf_status backward(clf_model *m, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t B = (size_t)m->cur_B, T = (size_t)m->cur_T, S = (size_t)m->cur_S;
    const size_t C = (size_t)s->C, V = (size_t)s->V, BT = B * T;
    clf_ptr dres = m->dres, d1 = m->dC1;
    const int fnorm = s->final_norm != MI_NORM_NONE;
    clf_status st;

    if (s->kind == MI_KIND_ENCODER) {
        clf_ptr dxf = fnorm ? d1 : dres;
        if ((st = classifier_bwd(m, dxf, B, S, err)) != CLF_OK)
            return st;
        return stack_bwd(m, &m->enc, dxf, dres, B, S, 0, err);
    }
    /* LM head: logits = xf Wout^T */
    clf_ptr dxf = fnorm ? d1 : dres;
    if ((st = linear_bwd(m, dxf, 0.0f, m->logits, mi_stack_out(m, &m->dec), CLF_DT_F32, m->lm_head,
                         MI_NONE, BT, C, V, err)) != CLF_OK)
        return st;
    if ((st = stack_bwd(m, &m->dec, dxf, dres, B, T, S, err)) != CLF_OK)
        return st;
    if (s->kind != MI_KIND_ENCDEC)
        return CLF_OK;
    /* the encoder, from the gradient its output got from every cross-attention */
    clf_ptr denc = m->denc;
    if (m->dec.n == 0 && (st = clf_ptr_zero(m->rt, denc, B * S * C, err)) != CLF_OK)
        return st;
    return stack_bwd(m, &m->enc, denc, fnorm ? dres : denc, B, S, 0, err);
}
