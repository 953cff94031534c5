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
static clf_status norm_bwd(clf_model *m, const mi_norm *nm, clf_ptr dx, clf_ptr dout, clf_ptr x,
                           size_t R, int accumulate, clf_error *err)
{
    const size_t C = (size_t)m->s.C;
    const mi_norm_p *p = nm->p;
    if (nm->type == MI_NORM_RMSNORM)
        return clf_op_rmsnorm_backward(m->rt, dx, mi_grad(m, p->w), dout, x, nm->a->rstd,
                                       mi_par(m, p->w), R, C, accumulate, err);
    return clf_op_layernorm_backward(m->rt, dx, mi_grad(m, p->w), mi_grad(m, p->b), dout, x,
                                     nm->a->mean, nm->a->rstd, mi_par(m, p->w), R, C, accumulate,
                                     err);
}

/* What a linear layer's backward writes and reads besides x: dx = beta *
 * dx + dy W (dx.p.buf NULL: not wanted), then, with act, times
 * act'(act_in) in the same pass, or times act_in itself where that is the
 * derivative the forward stored (mi_ffn_keeps_dact): the gradient of the
 * input of the activation that made x. */
typedef struct mi_lin_grad {
    mi_val dx;
    float beta;
    mi_val dy;
    clf_gemm_act act;
    mi_val act_in;
} mi_lin_grad;

/* For L's y = x W^T + b: dW += dy^T x, db += colsum(dy), and g's dx. */
static clf_status linear_bwd(clf_model *m, const mi_lin *L, mi_val x, const mi_lin_grad *g,
                             clf_error *err)
{
    const int act = g->act != CLF_GEMM_ACT_NONE, keeps = mi_ffn_keeps_dact(m);
    clf_status st;
    /* the bias first: dy is still in cache from the op that wrote it */
    if (L->p.b != MI_NONE && (st = clf_op_bias_backward_t(m->rt, mi_grad(m, L->p.b), g->dy.p,
                                                          g->dy.t, L->R, L->out, 1, err)) != CLF_OK)
        return st;
    if ((st = mi_gemm(m,
                      &(clf_gemm_desc){.trans_a = 1,
                                       .m = L->out,
                                       .n = L->in,
                                       .k = L->R,
                                       .alpha = 1.0f,
                                       .a = g->dy.p,
                                       .lda = L->out,
                                       .b = x.p,
                                       .ldb = L->in,
                                       .beta = 1.0f,
                                       .c = mi_grad(m, L->p.w),
                                       .ldc = L->in,
                                       .a_type = g->dy.t,
                                       .b_type = x.t},
                      err)) != CLF_OK)
        return st;
    return mi_gemm(m,
                   &(clf_gemm_desc){.m = L->R,
                                    .n = L->in,
                                    .k = L->out,
                                    .alpha = 1.0f,
                                    .a = g->dy.p,
                                    .lda = L->out,
                                    .b = mi_wpar(m, L->p.w),
                                    .ldb = L->in,
                                    .beta = g->beta,
                                    .c = g->dx.p,
                                    .ldc = L->in,
                                    .act = keeps ? CLF_GEMM_ACT_NONE : g->act,
                                    .act_grad = act && !keeps,
                                    .mul_d = act && keeps,
                                    .d = act ? g->act_in.p : mi_nullptr(),
                                    .ldd = L->in,
                                    .a_type = g->dy.t,
                                    .b_type = m->s.act16,
                                    .c_type = g->dx.t,
                                    .d_type = act ? g->act_in.t : CLF_DT_F32},
                   err);
}

/* The gradient of node n's output projection (before the residual add):
 * d(out) itself, or through the residual dropout of the site into dC2. */
static clf_status proj_grad(clf_model *m, const mi_node *n, int site, size_t R, mi_val *d,
                            clf_error *err)
{
    const mi_spec *s = &m->s;
    const clf_ptr dout = m->grad_slot[n->g_out];
    *d = (mi_val){dout, CLF_DT_F32};
    if (!(s->p_resid > 0))
        return CLF_OK;
    d->p = m->dC2;
    return clf_op_dropout_backward(m->rt, m->dC2, dout, R * (size_t)s->C, s->p_resid, m->state.seed,
                                   mi_dropout_stream(m, n->layer, site), err);
}

/* The output half shared by self- and cross-attention: the residual
 * dropout (site), then the projection L (forward input atty), leaving the
 * attention output's gradient [R, C] in m->dC3 (stored as s.act16:
 * mi_view). */
static clf_status attn_out_bwd(clf_model *m, const mi_node *n, const mi_lin *L, clf_ptr atty,
                               int site, clf_error *err)
{
    const clf_dtype t = m->s.act16;
    mi_lin_grad g = {.dx = {mi_view(m->dC3, t), t}};
    clf_status st = proj_grad(m, n, site, L->R, &g.dy, err);
    /* the output's gradient and the output as the attention stores them */
    return st == CLF_OK ? linear_bwd(m, L, (mi_val){atty, t}, &g, err) : st;
}

/* Node n's self-attention: d(out) -> d(in) (overwritten, or added where
 * acc_in says so). */
static clf_status attn_bwd(clf_model *m, const mi_node *n, const mi_pass *ps, clf_error *err)
{
    const mi_spec *s = &m->s;
    const int l = n->layer;
    const mi_attn_p *p = &m->bp[l].attn;
    const mi_block_a *a = &m->ba[l];
    const mi_val in = m->vals[n->in];
    const size_t B = (size_t)ps->B, T = (size_t)(n->stk->src ? ps->S : ps->T);
    const size_t C = (size_t)s->C, NH = (size_t)s->NH, HS = (size_t)s->HS, BT = B * T;
    const mi_lin lq = {p->qkv, BT, C, 3 * C}, lp = {p->proj, BT, C, C};
    clf_ptr dqkv = m->dqkv;
    clf_status st;

    if ((st = attn_out_bwd(m, n, &lp, a->atty, MI_SITE_ATTN_OUT, err)) != CLF_OK)
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
    const mi_lin_grad g_in = {.dx = {m->grad_slot[n->g_in], CLF_DT_F32},
                              .beta = (float)n->acc_in,
                              .dy = {dqkv, s->act16}};
    return linear_bwd(m, &lq, in, &g_in, err);
}

/* Node n's cross-attention: d(out) -> d(in) (acc_in) for the queries'
 * input, and the gradient of the encoder's output [BS, C] into its slot
 * (acc_mem: the first node visited overwrites, the others add). */
static clf_status cross_bwd(clf_model *m, const mi_node *n, const mi_pass *ps, clf_error *err)
{
    const mi_spec *s = &m->s;
    const int l = n->layer;
    const mi_cross_p *p = &m->bp[l].cross;
    const mi_block_a *a = &m->ba[l];
    const mi_val in = m->vals[n->in], mem = m->vals[n->mem];
    const size_t C = (size_t)s->C, B = (size_t)ps->B, T = (size_t)ps->T, S = (size_t)ps->S;
    const size_t BT = B * T, BS = B * S;
    const mi_lin lq = {p->q, BT, C, C}, lkv = {p->kv, BS, C, 2 * C}, lp = {p->proj, BT, C, C};
    /* dq [BT, C] then dkv [BS, 2C] in the dqkv scratch (BT + 2 BS <= 3 max rows) */
    clf_ptr dq = m->dqkv, dkv = clf_ptr_at(m->dqkv, BT * C);
    clf_status st;

    if ((st = attn_out_bwd(m, n, &lp, a->xatty, MI_SITE_CROSS_OUT, err)) != CLF_OK)
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
    const mi_lin_grad g_mem = {
        .dx = {m->grad_slot[n->g_mem], CLF_DT_F32}, .beta = (float)n->acc_mem, .dy = {dkv, t}};
    const mi_lin_grad g_in = {
        .dx = {m->grad_slot[n->g_in], CLF_DT_F32}, .beta = (float)n->acc_in, .dy = {dq, t}};
    if ((st = linear_bwd(m, &lkv, mem, &g_mem, err)) != CLF_OK)
        return st;
    return linear_bwd(m, &lq, in, &g_in, err);
}

/* Node n's feed-forward: d(out) -> d(in) (acc_in). */
static clf_status ffn_bwd(clf_model *m, const mi_node *n, const mi_pass *ps, clf_error *err)
{
    const mi_spec *s = &m->s;
    const int l = n->layer;
    const mi_ffn_p *p = &m->bp[l].ffn;
    const mi_block_a *a = &m->ba[l];
    const mi_val in = m->vals[n->in];
    const size_t C = (size_t)s->C, H = (size_t)s->H, F = (size_t)s->fc_rows;
    const size_t BT = mi_node_rows(n, (size_t)ps->B, (size_t)ps->T, (size_t)ps->S);
    const mi_lin lfc = {p->fc, BT, C, F}, lp = {p->proj, BT, H, C};
    const mi_val act = {a->fch_act, a->fch_t}, dfch = {m->dH2, m->dH2_t};
    clf_ptr dact = m->dH1, fch = a->fch;
    mi_lin_grad g = {.dx = dfch}; /* of the projection */
    clf_status st;

    if ((st = proj_grad(m, n, MI_SITE_FFN_OUT, BT, &g.dy, err)) != CLF_OK)
        return st;
    if (mi_ffn_fused_dact(s)) {
        /* dfch = (d W) act'(pre-activation) in one pass, stored as m->dH2_t
         * (fch holds act' itself where mi_ffn_keeps_dact) */
        g.act = mi_gemm_act(s->act);
        g.act_in = (mi_val){fch, a->fch_t};
        if ((st = linear_bwd(m, &lp, act, &g, err)) != CLF_OK)
            return st;
    } else {
        /* dact = d W; its dropout; then through the gate or activation */
        g.dx = (mi_val){dact, CLF_DT_F32};
        if ((st = linear_bwd(m, &lp, act, &g, err)) != CLF_OK)
            return st;
        if (s->p_ffn > 0 &&
            (st = clf_op_dropout_backward(m->rt, dact, dact, BT * H, s->p_ffn, m->state.seed,
                                          mi_dropout_stream(m, l, MI_SITE_FFN_H), err)) != CLF_OK)
            return st;
        st = s->swiglu
                 ? clf_op_swiglu_backward(m->rt, dfch.p, dact, fch, BT, H, err)
                 : clf_op_act_backward(m->rt, (clf_act)s->act, dfch.p, dact, fch, BT * H, 0, err);
        if (st != CLF_OK)
            return st;
    }
    const mi_lin_grad g_in = {
        .dx = {m->grad_slot[n->g_in], CLF_DT_F32}, .beta = (float)n->acc_in, .dy = dfch};
    return linear_bwd(m, &lfc, in, &g_in, err);
}

/* A stack's embeddings: d(x0) in the node's g_out slot; through the
 * dropout (into dC2) and the embeddings' norm (into the other slot) to the
 * token and position tables. */
static clf_status embed_bwd(clf_model *m, const mi_node *n, const mi_pass *ps, clf_error *err)
{
    const mi_spec *s = &m->s;
    const mi_stack *stk = n->stk;
    const size_t B = (size_t)ps->B, T = (size_t)(stk->src ? ps->S : ps->T);
    const size_t C = (size_t)s->C, V = (size_t)s->V, BT = B * T;
    clf_ptr dx0 = m->grad_slot[n->g_out];
    clf_status st;
    if (s->p_emb > 0) {
        clf_ptr d = m->dC2;
        if ((st = clf_op_dropout_backward(m->rt, d, dx0, BT * C, s->p_emb, m->state.seed,
                                          mi_dropout_stream(m, stk->drop_layer, 0), err)) != CLF_OK)
            return st;
        dx0 = d;
    }
    if (s->emb_norm != MI_NORM_NONE) {
        clf_ptr dxe = m->grad_slot[n->g_in];
        if ((st = norm_bwd(m, &(mi_norm){s->emb_norm, &stk->lne, &stk->lne_a}, dxe, dx0, stk->xe,
                           BT, 0, err)) != CLF_OK)
            return st;
        dx0 = dxe;
    }
    clf_ptr tokens = stk->src ? mi_at(m->src, 0) : mi_at(m->tokens, 0);
    return clf_op_embed_backward(m->rt, mi_grad(m, stk->wte), mi_grad(m, stk->wpe), dx0, tokens, B,
                                 T, C, V, s->emb_scale, err);
}

/* The classifier's backward into dx [B*S, C] (the gradient of the encoder's
 * output, overwritten). */
static clf_status classifier_bwd(clf_model *m, clf_ptr dx, clf_ptr xf, size_t B, size_t S,
                                 clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t C = (size_t)s->C, NL = (size_t)s->NL;
    clf_ptr dlogits = m->logits;
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
                                       .c = mi_grad(m, m->cls.w),
                                       .ldc = C},
                      err)) != CLF_OK ||
        (st = clf_op_bias_backward(m->rt, mi_grad(m, m->cls.b), dlogits, B, NL, 1, err)) != CLF_OK)
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
                                           .b = mi_wpar(m, m->cls.w),
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
                                    .b = mi_wpar(m, m->cls.w),
                                    .ldb = C,
                                    .c = dx,
                                    .ldc = S * C,
                                    .b_type = m->s.act16},
                   err);
}

/* Node n's backward. */
static clf_status node_bwd(clf_model *m, const mi_node *n, const mi_pass *ps, clf_error *err)
{
    const size_t B = (size_t)ps->B, T = (size_t)ps->T, S = (size_t)ps->S;
    const mi_val in = m->vals[n->in];
    const clf_ptr din = m->grad_slot[n->g_in];
    switch (n->kind) {
        case MI_NODE_EMBED: return embed_bwd(m, n, ps, err);
        case MI_NODE_NORM:
            return norm_bwd(m, &n->norm, din, m->grad_slot[n->g_out], in.p,
                            mi_node_rows(n, B, T, S), n->acc_in, err);
        case MI_NODE_ATTN: return attn_bwd(m, n, ps, err);
        case MI_NODE_CROSS: return cross_bwd(m, n, ps, err);
        case MI_NODE_FFN: return ffn_bwd(m, n, ps, err);
        default:
            if (m->s.kind == MI_KIND_ENCODER)
                return classifier_bwd(m, din, in.p, B, S, err);
            /* LM head: logits = xf Wout^T */
            return linear_bwd(
                m, &(mi_lin){{m->lm_head, MI_NONE}, B * T, (size_t)m->s.C, (size_t)m->s.V}, in,
                &(mi_lin_grad){.dx = {din, CLF_DT_F32}, .dy = {m->logits, CLF_DT_F32}}, err);
    }
}

/* Before node i's backward, what recomputation restores: with block
 * recomputation the blocks of a stack share one set of activations, which
 * holds the stack's last block from the forward, so every other block is
 * run forward again on entering it (its last node); with attention
 * recomputation the blocks share the self-attention's q, k, v, output and
 * log-sum-exp, so every other block's attention runs again. Dropout masks
 * come back bit for bit (same step, micro-batch and site). */
static clf_status recompute(clf_model *m, int i, const mi_pass *ps, clf_error *err)
{
    const mi_node *n = &m->nodes[i];
    const int l = n->layer;
    if (l < 0 || l == n->stk->first + n->stk->n - 1)
        return CLF_OK;
    const mi_block_p *bp = &m->bp[l];
    mi_pass p = *ps;
    p.flags = MI_PASS_TRAIN;
    clf_status st = CLF_OK;
    if (m->s.recompute == MI_RECOMPUTE_BLOCK && i == bp->node1 - 1)
        for (int j = bp->node0; j < bp->node1 && st == CLF_OK; j++)
            st = mi_node_forward(m, &m->nodes[j], &p, err);
    if (m->s.recompute == MI_RECOMPUTE_ATTN && n->kind == MI_NODE_ATTN) {
        p.flags |= MI_PASS_ATTN_ONLY; /* backward does not read the projection's output */
        st = mi_node_forward(m, n, &p, err);
    }
    return st;
}

clf_status mi_backward(clf_model *m, clf_error *err)
{
    const mi_pass ps = {.B = m->cur_B, .T = m->cur_T, .S = m->cur_S};
    const size_t C = (size_t)m->s.C;
    clf_status st = CLF_OK;
    for (int i = m->n_nodes - 1; i >= 0 && st == CLF_OK; i--) {
        const mi_node *n = &m->nodes[i];
        if (n->zero_out) /* an encoder output no decoder block reads */
            st = clf_ptr_zero(m->rt, m->grad_slot[n->g_out],
                              mi_node_rows(n, (size_t)ps.B, (size_t)ps.T, (size_t)ps.S) * C, err);
        if (st == CLF_OK)
            st = recompute(m, i, &ps, err);
        if (st == CLF_OK)
            st = node_bwd(m, n, &ps, err);
        /* a block's gradients are complete when its first node is done */
        if (st == CLF_OK && m->grad_hook != NULL && n->layer >= 0 && i == m->bp[n->layer].node0)
            st = m->grad_hook(m->grad_hook_user, n->layer, err);
    }
    if (st == CLF_OK && m->grad_hook != NULL) /* the tensors outside blocks */
        st = m->grad_hook(m->grad_hook_user, -1, err);
    return st;
}
