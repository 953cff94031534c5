/*
 * backward.c - the backward graph: the node list of forward.c walked in
 * reverse.
 *
 * Design (llm.c's gpt2_backward): d(logits) is already in the logits
 * buffer (the fused loss wrote it). Each node reads the gradient of its
 * output from a gradient slot and writes, or adds, the gradient of its
 * input to another, as nodes.c's routing pass assigned: the residual
 * stream's gradient stays in one slot through a pre-norm block, a norm's
 * input adds into the slot its residual use holds, and every
 * cross-attention adds the gradient of its keys and values into the
 * encoder output's slot (the first one visited overwrites), from which the
 * encoder stack is walked after the decoder's. Parameter gradients
 * accumulate (+=) into the flat grad buffer (GEMMs with beta = 1, bias and
 * norm backward ops in accumulate mode), so micro-batches add up and a tied
 * LM head and token embedding (or shared source and target embeddings)
 * share one gradient. Recomputation re-runs a block's nodes (or an
 * attention node) forward just before their backward. Dropout masks are
 * regenerated from their keys, never stored. With train.precision bf16 or
 * fp16 the FFN's hidden gradient (dH2, where the activation's derivative is
 * fused into the projection's backward) is stored in 16 bits: the two GEMMs
 * and the bias gradient that read it widen it; with fp16 every gradient
 * arrives multiplied by the loss scale (forward.c's loss), so small ones
 * stay inside half's range.
 *
 * Not here: the forward (forward.c), the routing (nodes.c), the optimizer
 * (step.c).
 */
#include <math.h>

#include "model/graph/model_internal.h"
#include "model/ops/ops.h"

/* dx (=|+=) nm's backward of dout at x [R, C]; dw, db +=. dx and dout:
 * float32 of x's shape. */
static clf_status norm_bwd(clf_model *m, const mi_norm *nm, clf_tensor x, clf_ptr dx, clf_ptr dout,
                           int accumulate, clf_error *err)
{
    const clf_norm_args a = {.rms = nm->type == MI_NORM_RMSNORM,
                             .x = x.p,
                             .w = mi_par(m, nm->p->w),
                             .mean = nm->a->mean,
                             .rstd = nm->a->rstd,
                             .R = x.rows,
                             .N = x.cols,
                             .dout = dout,
                             .dx = dx,
                             .dw = mi_grad(m, nm->p->w),
                             .db = mi_grad(m, nm->p->b),
                             .accumulate = accumulate};
    return clf_op_norm_backward(m->rt, &a, err);
}

/* L's backward (mi_linear): db, dW, dx. */
static clf_status linear_bwd(clf_model *m, const mi_linear *L, clf_error *err)
{
    clf_status st;
    /* the bias first: dy is still in cache from the op that wrote it */
    if (L->p.b != MI_NONE &&
        (st = clf_op_bias_backward_t(m->rt, mi_grad(m, L->p.b), L->dy.p, L->dy.t, L->dy.rows,
                                     L->dy.cols, 1, err)) != CLF_OK)
        return st;
    clf_gemm_desc d = mi_linear_gemm(m, L, MI_GEMM_DW);
    if ((st = mi_gemm(m, &d, err)) != CLF_OK)
        return st;
    d = mi_linear_gemm(m, L, MI_GEMM_DX);
    return mi_gemm(m, &d, err);
}

/* The residual dropout of node n's output (site) backward: d(out) into dC2,
 * where the output projection's backward (mi_node_linears) reads it. */
static clf_status resid_dropout_bwd(clf_model *m, const mi_node *n, int site, size_t R,
                                    clf_error *err)
{
    const mi_spec *s = &m->s;
    if (!(s->p_resid > 0))
        return CLF_OK;
    return clf_op_dropout_backward(m->rt, m->dC2, m->grad_slot[n->g_out], R * (size_t)s->C,
                                   s->p_resid, m->state.seed, mi_dropout_stream(m, n->layer, site),
                                   err);
}

/* The output half shared by self- and cross-attention: the residual
 * dropout (site), then the projection L, leaving the attention output's
 * gradient [R, C] in L's dx (m->dC3 stored as s.act16). */
static clf_status attn_out_bwd(clf_model *m, const mi_node *n, const mi_linear *L, int site,
                               clf_error *err)
{
    clf_status st = resid_dropout_bwd(m, n, site, L->dy.rows, err);
    return st == CLF_OK ? linear_bwd(m, L, err) : st;
}

/* Node n's self-attention: d(out) -> d(in) (overwritten, or added where
 * acc_in says so). */
static clf_status attn_bwd(clf_model *m, const mi_node *n, const mi_pass *ps, clf_error *err)
{
    const mi_spec *s = &m->s;
    const int l = n->layer;
    const size_t B = (size_t)ps->B, T = (size_t)(n->stk->src ? ps->S : ps->T);
    const size_t C = (size_t)s->C, NH = (size_t)s->NH, HS = (size_t)s->HS;
    const size_t QKV = mi_qkv_cols(s), NKV = (size_t)s->NKV;
    mi_linear L[MI_NODE_LINEARS]; /* q, k, v; the output projection */
    mi_node_linears(m, n, ps, L);
    const clf_ptr dqkv = L[0].dy.p;
    clf_status st;

    if ((st = attn_out_bwd(m, n, &L[1], MI_SITE_ATTN_OUT, err)) != CLF_OK)
        return st;
    if (s->perf_m > 0) { /* performer: through the features kept by the forward */
        const clf_performer pf = mi_perf_desc(m, l, B, T, T, 0);
        const clf_performer_grad pg = {.dy = L[1].dx.p,
                                       .dq = dqkv,
                                       .dk = clf_ptr_at(dqkv, C),
                                       .dv = clf_ptr_at(dqkv, 2 * C),
                                       .u = m->perf_u,
                                       .dfq = m->perf_dfq,
                                       .dfk = m->perf_dfk,
                                       .dq_stride = QKV,
                                       .dkv_stride = QKV};
        const clf_heads hq = {dqkv, s->act16, B, T, NH, HS, QKV};
        const clf_heads hk = {clf_ptr_at(dqkv, C), s->act16, B, T, NKV, HS, QKV};
        const clf_ptr pos = mi_doc_pos(m, n->stk->src);
        if ((st = clf_op_performer_backward(m->rt, &pf, &pg, err)) != CLF_OK ||
            (s->pos == MI_POS_ROPE &&
             ((st = clf_op_rope_t(m->rt, &hq, 0, pos, &s->rope, 1, err)) != CLF_OK ||
              (st = clf_op_rope_t(m->rt, &hk, 0, pos, &s->rope, 1, err)) != CLF_OK)))
            return st;
        return linear_bwd(m, &L[0], err);
    }
    clf_attn_fused f = mi_attn_self(m, l, B, T, 1);
    f.rb = m->rel_rb;
    f.qr = m->rel_qr;
    f.rel_k = (size_t)s->relk;
    /* relative (Shaw): the q.r rows again, from the q the forward kept */
    const clf_heads hq_in = {m->ba[l].qkv, s->act16, B, T, NH, HS, QKV};
    if ((st = mi_rel_table(m, n->stk, T, T, &f.rb_w, err)) != CLF_OK ||
        (st = mi_rel_qr(m, l, &hq_in, &f.qr_w, err)) != CLF_OK)
        return st;
    const size_t nbk = f.rb_w ? (size_t)s->nbk : 0;
    /* linformer: the projected keys' and values' gradients first */
    const int lin = s->lin_k > 0 && m->bp[l].is_enc;
    const clf_attn_fused_grad g = {.dy = L[1].dx.p, /* the projection's dx */
                                   .dq = dqkv,
                                   .dk = lin ? m->lin_dkv : clf_ptr_at(dqkv, C),
                                   .dv = lin ? clf_ptr_at(m->lin_dkv, NKV * HS)
                                             : clf_ptr_at(dqkv, C + NKV * HS),
                                   .dsum = m->dsum,
                                   .dq_stride = QKV,
                                   .dkv_stride = lin ? 2 * NKV * HS : QKV,
                                   .dkv_full = m->dkv_full,
                                   .rbk = m->rel_rbk,
                                   .drb = m->rel_drb,
                                   .nbk = nbk,
                                   .dqr = m->rel_dqr};
    if ((st = clf_op_attn_fused_backward(m->rt, &f, &g, err)) != CLF_OK ||
        (lin && (st = mi_lin_backward(m, l, B, T, dqkv, err)) != CLF_OK))
        return st;
    /* t5: the table's gradient, the rows' bucket sums added up (every block
     * of the stack adds to it) */
    if (nbk && (st = clf_op_bias_backward_t(m->rt, mi_grad(m, n->stk->rel), m->rel_drb, CLF_DT_F32,
                                            B * T, NH * nbk, 1, err)) != CLF_OK)
        return st;
    const clf_heads hq = {dqkv, s->act16, B, T, NH, HS, QKV};
    const clf_heads hk = {clf_ptr_at(dqkv, C), s->act16, B, T, NKV, HS, QKV};
    /* relative: dq += scale dqr r, d(r) += scale dqr^T q */
    if (f.qr_w && (st = clf_op_rel_qr_backward(m->rt, &hq, mi_grad(m, m->bp[l].attn.relk), &hq_in,
                                               mi_par(m, m->bp[l].attn.relk), m->rel_dqr, f.qr_w,
                                               f.scale, err)) != CLF_OK)
        return st;
    const clf_ptr pos = mi_doc_pos(m, n->stk->src);
    if (s->pos == MI_POS_ROPE &&
        ((st = clf_op_rope_t(m->rt, &hq, 0, pos, &s->rope, 1, err)) != CLF_OK ||
         (st = clf_op_rope_t(m->rt, &hk, 0, pos, &s->rope, 1, err)) != CLF_OK))
        return st;
    return linear_bwd(m, &L[0], err);
}

/* Node n's cross-attention: d(out) -> d(in) (acc_in) for the queries'
 * input, and the gradient of the encoder's output [BS, C] into its slot
 * (acc_mem: the first node visited overwrites, the others add). */
static clf_status cross_bwd(clf_model *m, const mi_node *n, const mi_pass *ps, clf_error *err)
{
    const mi_spec *s = &m->s;
    const int l = n->layer;
    const size_t C = (size_t)s->C, B = (size_t)ps->B, T = (size_t)ps->T, S = (size_t)ps->S;
    mi_linear L[MI_NODE_LINEARS]; /* q; k and v; the output projection */
    mi_node_linears(m, n, ps, L);
    /* dq [BT, C] then dkv [BS, 2C] in the dqkv scratch */
    const clf_ptr dq = L[0].dy.p, dkv = L[1].dy.p;
    clf_status st;

    if ((st = attn_out_bwd(m, n, &L[2], MI_SITE_CROSS_OUT, err)) != CLF_OK)
        return st;
    const clf_attn_fused f = mi_attn_cross(m, l, B, T, S, 1);
    const clf_attn_fused_grad g = {.dy = L[2].dx.p, /* the projection's dx */
                                   .dq = dq,
                                   .dk = dkv,
                                   .dv = clf_ptr_at(dkv, C),
                                   .dsum = m->dsum,
                                   .dq_stride = C,
                                   .dkv_stride = 2 * C};
    if ((st = clf_op_attn_fused_backward(m->rt, &f, &g, err)) != CLF_OK)
        return st;
    if ((st = linear_bwd(m, &L[1], err)) != CLF_OK)
        return st;
    return linear_bwd(m, &L[0], err);
}

/* Node n's feed-forward: d(out) -> d(in) (acc_in). */
static clf_status ffn_bwd(clf_model *m, const mi_node *n, const mi_pass *ps, clf_error *err)
{
    const mi_spec *s = &m->s;
    const int l = n->layer;
    const mi_block_a *a = &m->ba[l];
    const size_t H = (size_t)s->H;
    const size_t BT = mi_node_rows(n, (size_t)ps->B, (size_t)ps->T, (size_t)ps->S);
    mi_linear L[MI_NODE_LINEARS]; /* fc; the output projection */
    mi_node_linears(m, n, ps, L);
    const clf_ptr dact = m->dH1, dfch = m->dH2, fch = a->fch;
    clf_status st;

    /* fused (mi_ffn_fused_dact): the projection's backward writes dfch =
     * (d W) act'(pre-activation) in one pass; else d(act) into dH1, then
     * its dropout and the gate or activation */
    if ((st = resid_dropout_bwd(m, n, MI_SITE_FFN_OUT, BT, err)) != CLF_OK ||
        (st = linear_bwd(m, &L[1], err)) != CLF_OK)
        return st;
    if (!mi_ffn_fused_dact(s)) {
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
    return linear_bwd(m, &L[0], err);
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
        if ((st = norm_bwd(m, &(mi_norm){s->emb_norm, &stk->lne, &stk->lne_a},
                           clf_tensor_at(stk->xe, CLF_DT_F32, BT, C), dxe, dx0, 0, err)) != CLF_OK)
            return st;
        dx0 = dxe;
    }
    clf_ptr tokens = stk->src ? mi_at(m->src, 0) : mi_at(m->tokens, 0);
    const clf_embed_args e = {.tokens = tokens,
                              .B = B,
                              .T = T,
                              .C = C,
                              .V = V,
                              .scale = s->emb_scale,
                              .pos = mi_doc_pos(m, stk->src),
                              .dout = dx0,
                              .dwte = mi_grad(m, stk->wte),
                              .dwpe = mi_grad(m, stk->wpe)};
    return clf_op_embed_backward(m->rt, &e, err);
}

/* The head node's backward: its product's (mi_node_linears: the LM head's
 * or the classifier's), then a classifier's pooling: through the mean
 * pool, or only the first position of each sequence gets a gradient. */
static clf_status head_bwd(clf_model *m, const mi_node *n, const mi_pass *ps, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t B = (size_t)ps->B, S = (size_t)ps->S, C = (size_t)s->C;
    const int cls = s->kind == MI_KIND_ENCODER, mean = s->pool == MI_POOL_MEAN;
    const clf_ptr dx = m->grad_slot[n->g_in];
    mi_linear L[MI_NODE_LINEARS];
    if (mi_node_linears(m, n, ps, L) == 0)
        return CLF_OK;
    clf_status st;
    if (cls && !mean && (st = clf_ptr_zero(m->rt, dx, B * S * C, err)) != CLF_OK)
        return st;
    if ((st = linear_bwd(m, &L[0], err)) != CLF_OK || !(cls && mean))
        return st;
    return clf_op_mean_pool_backward(m->rt, dx, L[0].dx.p, mi_at(m->src_keep, 0), B, S, C, err);
}

/* Node n's backward. */
static clf_status node_bwd(clf_model *m, const mi_node *n, const mi_pass *ps, clf_error *err)
{
    const size_t B = (size_t)ps->B, T = (size_t)ps->T, S = (size_t)ps->S;
    switch (n->kind) {
        case MI_NODE_EMBED: return embed_bwd(m, n, ps, err);
        case MI_NODE_NORM:
            return norm_bwd(m, &n->norm, mi_val(m, n->in, mi_node_rows(n, B, T, S)),
                            m->grad_slot[n->g_in], m->grad_slot[n->g_out], n->acc_in, err);
        case MI_NODE_ATTN: return attn_bwd(m, n, ps, err);
        case MI_NODE_CROSS: return cross_bwd(m, n, ps, err);
        case MI_NODE_FFN: return ffn_bwd(m, n, ps, err);
        default: return head_bwd(m, n, ps, err);
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
