/*
 * model_forward.c - the forward graph: embeddings and positions, the blocks
 * (attention and feed-forward sublayers with pre- or post-norm), the final
 * norm, the LM head and the fused loss.
 *
 * Design: like llm.c's gpt2_forward, a straight sequence of op calls over
 * buffers planned at create; each sublayer is a function of (input, output,
 * sizes) so that an encoder stack (non-causal, padding mask) and a decoder
 * with cross-attention can call the same functions later. Everything is
 * enqueued; nothing is read back. With `cache` (inference) the attention
 * stores k and v at positions [pos0, pos0 + T) of the layer's KV cache and
 * attends over [0, pos0 + T) of it; a single position uses the fused decode
 * kernel instead of GEMM + softmax + GEMM.
 *
 * Dropout sites are keyed by mi_dropout_stream (see model.h); backward
 * regenerates the same masks.
 *
 * Not here: backward (model_backward.c), the training/inference entry
 * points (model_train.c, model_decode.c).
 */
#include <math.h>

#include "model_internal.h"
#include "ops_extra.h"
#include "ops_nn.h"

/* ---- helpers ------------------------------------------------------------- */

clf_status mi_gemm(clf_model *m, int ta, int tb, size_t M, size_t N, size_t K, float alpha,
                   clf_ptr a, size_t lda, clf_ptr b, size_t ldb, float beta, clf_ptr c,
                   size_t ldc, clf_error *err)
{
    return mi_gemm_batched(m, ta, tb, M, N, K, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1,
                           err);
}

clf_status mi_gemm_batched(clf_model *m, int ta, int tb, size_t M, size_t N, size_t K,
                           float alpha, clf_ptr a, size_t lda, size_t sa, clf_ptr b, size_t ldb,
                           size_t sb, float beta, clf_ptr c, size_t ldc, size_t sc,
                           size_t batch, clf_error *err)
{
    clf_gemm_desc d;
    d.trans_a = ta;
    d.trans_b = tb;
    d.m = M;
    d.n = N;
    d.k = K;
    d.alpha = alpha;
    d.beta = beta;
    d.a = a;
    d.lda = lda;
    d.b = b;
    d.ldb = ldb;
    d.c = c;
    d.ldc = ldc;
    d.batch = batch;
    d.stride_a = sa;
    d.stride_b = sb;
    d.stride_c = sc;
    return clf_gemm(m->rt, &d, err);
}

uint64_t mi_dropout_stream(const clf_model *m, int layer, int op)
{
    uint64_t site = layer < 0 ? 0 : 1 + 4 * (uint64_t)layer + (uint64_t)op;
    return (m->state.step << 32) ^ ((m->state.micro & 0xFFFF) << 16) ^ (site & 0xFFFF);
}

static clf_act act_op(int a)
{
    switch (a) {
    case MI_ACT_RELU: return CLF_ACT_RELU;
    case MI_ACT_GELU_TANH: return CLF_ACT_GELU_TANH;
    default: return CLF_ACT_GELU_ERF;
    }
}

static clf_status norm_fwd(clf_model *m, int type, mi_norm_a *a, const mi_norm_p *p, clf_ptr x,
                           size_t R, clf_error *err)
{
    const mi_spec *s = &m->s;
    if (type == MI_NORM_RMSNORM)
        return clf_op_rmsnorm_forward(m->rt, mi_at(a->out, 0), mi_at(a->rstd, 0), x,
                                      mi_par(m, p->w), R, (size_t)s->C, s->norm_eps, err);
    return clf_op_layernorm_forward(m->rt, mi_at(a->out, 0), mi_at(a->mean, 0),
                                    mi_at(a->rstd, 0), x, mi_par(m, p->w), mi_par(m, p->b), R,
                                    (size_t)s->C, s->norm_eps, err);
}

/* y [R, out] = x [R, in] W^T (+ b) */
static clf_status linear_fwd(clf_model *m, clf_ptr y, clf_ptr x, size_t w, size_t b, size_t R,
                             size_t in, size_t out, clf_error *err)
{
    clf_status st = mi_gemm(m, 0, 1, R, out, in, 1.0f, x, in, mi_par(m, w), in, 0.0f, y, out,
                            err);
    if (st != CLF_OK || b == MI_NONE)
        return st;
    return clf_op_bias_act_forward(m->rt, CLF_ACT_NONE, y, mi_par(m, b), y, R, out, err);
}

/* ---- sublayers ------------------------------------------------------------ */

/* The attention core over heads: q [B, NH, T, HS] against keys/values of S
 * positions (the matrix of each (b, h) kstride floats after the previous):
 * probabilities into layer l's att [B*NH, T, S] (then dropout), output heads
 * merged into its atty [B*T, C]. */
static clf_status attn_core_fwd(clf_model *m, int l, clf_ptr q, clf_ptr keys, clf_ptr vals,
                                size_t B, size_t T, size_t S, size_t kstride, int train,
                                clf_error *err)
{
    const mi_spec *s = &m->s;
    mi_block_a *a = &m->ba[l];
    const size_t NH = (size_t)s->NH, HS = (size_t)s->HS, C = (size_t)s->C;
    const float scale = 1.0f / sqrtf((float)HS);
    clf_ptr att = mi_at(a->att, 0), pre = mi_at(m->preatt, 0), yh = mi_at(m->atty_h, 0);
    clf_status st;
    if ((st = mi_gemm_batched(m, 0, 1, T, S, HS, 1.0f, q, HS, T * HS, keys, HS, kstride, 0.0f,
                              pre, S, T * S, B * NH, err)) != CLF_OK)
        return st;
    clf_softmax_mask mask = {{NULL, 0}, 0, {NULL, 0}, 0, s->causal ? T : 0};
    if ((st = clf_op_softmax_forward(m->rt, att, pre, B * NH * T, S, scale, &mask, err)) !=
        CLF_OK)
        return st;
    clf_ptr P = att;
    if (train && s->p_attn > 0) {
        if ((st = clf_op_dropout_forward(m->rt, pre, att, B * NH * T * S, s->p_attn,
                                         m->state.seed, mi_dropout_stream(m, l, 0), err)) !=
            CLF_OK)
            return st;
        P = pre;
    }
    if ((st = mi_gemm_batched(m, 0, 0, T, HS, S, 1.0f, P, S, T * S, vals, HS, kstride, 0.0f, yh,
                              HS, T * HS, B * NH, err)) != CLF_OK)
        return st;
    return clf_op_heads_merge(m->rt, mi_at(a->atty, 0), yh, B, T, NH, HS, C, 0, err);
}

/* Self-attention of layer l: in [B*T, C] -> out [B*T, C] (projection output,
 * after dropout, before the residual). */
static clf_status attn_fwd(clf_model *m, int l, clf_ptr in, clf_ptr out, int Bi, int Ti,
                           int pos0, int train, int cache, clf_error *err)
{
    const mi_spec *s = &m->s;
    const mi_attn_p *p = &m->bp[l].attn;
    mi_block_a *a = &m->ba[l];
    const size_t B = (size_t)Bi, T = (size_t)Ti, C = (size_t)s->C, NH = (size_t)s->NH;
    const size_t HS = (size_t)s->HS, BT = B * T, Tmax = (size_t)s->T;
    const float scale = 1.0f / sqrtf((float)HS);
    clf_ptr qkv = mi_at(m->qkv, 0), q = mi_at(a->q, 0), k = mi_at(a->k, 0), v = mi_at(a->v, 0);
    clf_ptr atty = mi_at(a->atty, 0);
    clf_status st;

    if ((st = linear_fwd(m, qkv, in, p->qkv_w, p->qkv_b, BT, C, 3 * C, err)) != CLF_OK)
        return st;
    if (s->pos == MI_POS_ROPE &&
        ((st = clf_op_rope(m->rt, qkv, B, T, NH, HS, 3 * C, (size_t)pos0, s->rope_theta, 0,
                           err)) != CLF_OK ||
         (st = clf_op_rope(m->rt, clf_ptr_at(qkv, C), B, T, NH, HS, 3 * C, (size_t)pos0,
                           s->rope_theta, 0, err)) != CLF_OK))
        return st;
    if ((st = clf_op_heads_split(m->rt, q, qkv, B, T, NH, HS, 3 * C, err)) != CLF_OK)
        return st;
    clf_ptr keys = k, vals = v;
    size_t S = T, kstride = T * HS;
    if (!cache) {
        if ((st = clf_op_heads_split(m->rt, k, clf_ptr_at(qkv, C), B, T, NH, HS, 3 * C, err)) !=
                CLF_OK ||
            (st = clf_op_heads_split(m->rt, v, clf_ptr_at(qkv, 2 * C), B, T, NH, HS, 3 * C,
                                     err)) != CLF_OK)
            return st;
    } else {
        /* new keys and values go straight from the qkv rows into the caches */
        keys = mi_at(a->kcache, 0);
        vals = mi_at(a->vcache, 0);
        if ((st = clf_op_kv_store(m->rt, keys, clf_ptr_at(qkv, C), B, T, NH, HS, 3 * C, Tmax,
                                  (size_t)pos0, err)) != CLF_OK ||
            (st = clf_op_kv_store(m->rt, vals, clf_ptr_at(qkv, 2 * C), B, T, NH, HS, 3 * C, Tmax,
                                  (size_t)pos0, err)) != CLF_OK)
            return st;
        S = (size_t)pos0 + T;
        kstride = Tmax * HS;
    }
    if (cache && T == 1) {
        /* one new position: fused scores + softmax + weighted sum over the cache */
        if ((st = clf_op_attn_decode(m->rt, atty, q, keys, vals, B, NH, HS, Tmax, S, scale,
                                     err)) != CLF_OK)
            return st;
    } else if ((st = attn_core_fwd(m, l, q, keys, vals, B, T, S, kstride, train, err)) !=
               CLF_OK) {
        return st;
    }
    if ((st = linear_fwd(m, out, atty, p->proj_w, p->proj_b, BT, C, C, err)) != CLF_OK)
        return st;
    if (train && s->p_resid > 0)
        return clf_op_dropout_forward(m->rt, out, out, BT * C, s->p_resid, m->state.seed,
                                      mi_dropout_stream(m, l, 1), err);
    return CLF_OK;
}

/* Feed-forward of layer l: in [BT, C] -> out [BT, C]. */
static clf_status ffn_fwd(clf_model *m, int l, clf_ptr in, clf_ptr out, size_t BT, int train,
                          clf_error *err)
{
    const mi_spec *s = &m->s;
    const mi_ffn_p *p = &m->bp[l].ffn;
    mi_block_a *a = &m->ba[l];
    const size_t C = (size_t)s->C, H = (size_t)s->H, F = (size_t)s->fc_rows;
    clf_ptr fch = mi_at(a->fch, 0), act = mi_at(a->fch_act, 0);
    clf_status st;

    if ((st = mi_gemm(m, 0, 1, BT, F, C, 1.0f, in, C, mi_par(m, p->fc_w), C, 0.0f, fch, F,
                      err)) != CLF_OK)
        return st;
    if (s->act == MI_ACT_SWIGLU) {
        if (p->fc_b != MI_NONE &&
            (st = clf_op_bias_act_forward(m->rt, CLF_ACT_NONE, fch, mi_par(m, p->fc_b), fch, BT,
                                          F, err)) != CLF_OK)
            return st;
        st = clf_op_swiglu_forward(m->rt, act, fch, BT, H, err);
    } else {
        st = clf_op_bias_act_forward(m->rt, act_op(s->act), fch, mi_par(m, p->fc_b), act, BT, H,
                                     err);
    }
    if (st != CLF_OK)
        return st;
    if (train && s->p_ffn > 0 &&
        (st = clf_op_dropout_forward(m->rt, act, act, BT * H, s->p_ffn, m->state.seed,
                                     mi_dropout_stream(m, l, 2), err)) != CLF_OK)
        return st;
    if ((st = linear_fwd(m, out, act, p->proj_w, p->proj_b, BT, H, C, err)) != CLF_OK)
        return st;
    if (train && s->p_resid > 0)
        return clf_op_dropout_forward(m->rt, out, out, BT * C, s->p_resid, m->state.seed,
                                      mi_dropout_stream(m, l, 3), err);
    return CLF_OK;
}

/* The output of block l (its residual stream), [BT, C]. */
clf_ptr mi_block_out(const clf_model *m, int l)
{
    if (l < 0)
        return mi_at(m->x0, 0);
    return m->s.norm_post ? mi_at(m->ba[l].ln2.out, 0) : mi_at(m->ba[l].res2, 0);
}

static clf_status block_fwd(clf_model *m, int l, clf_ptr x, int B, int T, int pos0, int train,
                            int cache, clf_error *err)
{
    const mi_spec *s = &m->s;
    const mi_block_p *p = &m->bp[l];
    mi_block_a *a = &m->ba[l];
    const size_t BT = (size_t)B * (size_t)T, n = BT * (size_t)s->C;
    clf_ptr proj = mi_at(m->proj, 0), res1 = mi_at(a->res1, 0), res2 = mi_at(a->res2, 0);
    clf_ptr ln1 = mi_at(a->ln1.out, 0), ln2 = mi_at(a->ln2.out, 0);
    clf_status st;
    if (!s->norm_post) {
        if ((st = norm_fwd(m, s->norm, &a->ln1, &p->ln1, x, BT, err)) != CLF_OK ||
            (st = attn_fwd(m, l, ln1, proj, B, T, pos0, train, cache, err)) != CLF_OK ||
            (st = clf_op_residual(m->rt, res1, proj, x, n, err)) != CLF_OK ||
            (st = norm_fwd(m, s->norm, &a->ln2, &p->ln2, res1, BT, err)) != CLF_OK ||
            (st = ffn_fwd(m, l, ln2, proj, BT, train, err)) != CLF_OK ||
            (st = clf_op_residual(m->rt, res2, proj, res1, n, err)) != CLF_OK)
            return st;
        return CLF_OK;
    }
    if ((st = attn_fwd(m, l, x, proj, B, T, pos0, train, cache, err)) != CLF_OK ||
        (st = clf_op_residual(m->rt, res1, proj, x, n, err)) != CLF_OK ||
        (st = norm_fwd(m, s->norm, &a->ln1, &p->ln1, res1, BT, err)) != CLF_OK ||
        (st = ffn_fwd(m, l, ln1, proj, BT, train, err)) != CLF_OK ||
        (st = clf_op_residual(m->rt, res2, proj, ln1, n, err)) != CLF_OK ||
        (st = norm_fwd(m, s->norm, &a->ln2, &p->ln2, res2, BT, err)) != CLF_OK)
        return st;
    return CLF_OK;
}

/* The input of the LM head: the final norm's output, or the last block's. */
clf_ptr mi_head_in(const clf_model *m)
{
    if (m->s.final_norm != MI_NORM_NONE)
        return mi_at(m->lnf_a.out, 0);
    return mi_block_out(m, m->s.L - 1);
}

/* ---- the whole forward ----------------------------------------------------------- */

clf_status mi_forward(clf_model *m, int Bi, int Ti, int pos0, int train, int cache,
                      int last_only, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t B = (size_t)Bi, T = (size_t)Ti, C = (size_t)s->C, V = (size_t)s->V;
    const size_t BT = B * T;
    clf_ptr x0 = mi_at(m->x0, 0), logits = mi_at(m->logits, 0);
    clf_status st;

    if ((st = clf_op_embed_forward(m->rt, x0, mi_at(m->tokens, 0), mi_par(m, m->wte),
                                   mi_par(m, m->wpe), B, T, C, (size_t)pos0, s->emb_scale,
                                   err)) != CLF_OK)
        return st;
    if (s->pos == MI_POS_SINUSOIDAL &&
        (st = clf_op_sinusoid_add(m->rt, x0, B, T, C, (size_t)pos0, err)) != CLF_OK)
        return st;
    if (train && s->p_emb > 0 &&
        (st = clf_op_dropout_forward(m->rt, x0, x0, BT * C, s->p_emb, m->state.seed,
                                     mi_dropout_stream(m, -1, 0), err)) != CLF_OK)
        return st;
    for (int l = 0; l < s->L; l++)
        if ((st = block_fwd(m, l, mi_block_out(m, l - 1), Bi, Ti, pos0, train, cache, err)) !=
            CLF_OK)
            return st;
    if (s->final_norm != MI_NORM_NONE &&
        (st = norm_fwd(m, s->final_norm, &m->lnf_a, &m->lnf, mi_block_out(m, s->L - 1), BT,
                       err)) != CLF_OK)
        return st;
    clf_ptr xf = mi_head_in(m), wout = mi_par(m, m->lm_head);
    if (last_only) /* the last position of each sequence: rows (T-1) + b*T */
        return mi_gemm(m, 0, 1, B, V, C, 1.0f, clf_ptr_at(xf, (T - 1) * C), T * C, wout, C,
                       0.0f, logits, V, err);
    if ((st = mi_gemm(m, 0, 1, BT, V, C, 1.0f, xf, C, wout, C, 0.0f, logits, V, err)) != CLF_OK)
        return st;
    if (!m->has_targets)
        return CLF_OK;
    float gs = m->count > 0 ? 1.0f / (float)m->count : 0.0f;
    clf_ptr dlogits = train ? logits : mi_nullptr();
    if ((st = clf_op_cross_entropy(m->rt, mi_at(m->losses, 0), dlogits, logits,
                                   mi_at(m->targets, 0), BT, V, m->optim.label_smoothing,
                                   CLF_MODEL_IGNORE_INDEX, gs, err)) != CLF_OK)
        return st;
    return clf_op_mean(m->rt, mi_at(m->scalars, 0), mi_at(m->losses, 0), BT, mi_at(m->red, 0),
                       err);
}
