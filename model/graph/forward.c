/*
 * forward.c - the forward graph: embeddings and positions, the blocks
 * (self-attention, cross-attention and feed-forward sublayers with pre- or
 * post-norm), the final norms, the heads (LM or classifier) and the fused
 * loss, for all three kinds.
 *
 * Design: like llm.c's gpt2_forward, a straight sequence of op calls over
 * buffers planned at create; each sublayer is a function of (input, output,
 * sizes, mask) so that the encoder stack (bidirectional, source keep mask),
 * the decoder stack (causal) and the decoder's cross-attention (queries
 * from the decoder, keys and values from the encoder's output, source keep
 * mask) share them. An encoder-decoder runs the encoder stack, then the
 * decoder stack; an encoder classifier runs the encoder stack and pools.
 * Everything is enqueued; nothing is read back. With `cache` (inference)
 * the self-attention stores k and v at positions [pos0, pos0 + T) of the
 * layer's KV cache and attends over [0, pos0 + T) of it, and the
 * cross-attention reads the keys and values mi_encode stored once.
 * Attention is fused (ops/flash.c: no score matrix, q, k, v read in place
 * from the projections or the caches); a single cached position uses the
 * flash-decoding kernels.
 *
 * Dropout sites are keyed by mi_dropout_stream (see model.h); backward
 * regenerates the same masks.
 *
 * Not here: backward (backward.c), the training/inference entry
 * points (step.c, decode.c).
 */
#include <math.h>

#include "model/graph/model_internal.h"
#include "model/ops/ops.h"

/* ---- helpers ------------------------------------------------------------- */

clf_status mi_gemm(clf_model *m, const clf_gemm_desc *d, clf_error *err)
{
    clf_status st = m->planning ? clf_gemm_prepare(m->rt, d, err) : CLF_OK;
    return st == CLF_OK ? clf_gemm(m->rt, d, err) : st;
}

clf_status mi_weights_sync(clf_model *m, clf_error *err)
{
    if (m->params16 == NULL || !m->w16_stale)
        return CLF_OK;
    clf_status st = clf_convert(m->rt, m->s.act16, mi_at(m->params16, 0), CLF_DT_F32,
                                mi_at(m->params, 0), m->dims.n_params, err);
    if (st == CLF_OK)
        m->w16_stale = 0;
    return st;
}

uint64_t mi_dropout_stream(const clf_model *m, int layer, int op)
{
    uint64_t site;
    if (layer == MI_LAYER_SRC_EMB)
        site = 0xFFFF;
    else if (layer < 0)
        site = 0;
    else if (op >= MI_SITE_CROSS_P)
        site = 0x8000 + 2 * (uint64_t)layer + (uint64_t)(op - MI_SITE_CROSS_P);
    else
        site = 1 + 4 * (uint64_t)layer + (uint64_t)op;
    return (m->state.step << 32) ^ ((m->state.micro & 0xFFFF) << 16) ^ (site & 0xFFFF);
}

static clf_status norm_fwd(clf_model *m, int type, const mi_norm_a *a, const mi_norm_p *p,
                           clf_ptr x, size_t R, clf_error *err)
{
    const mi_spec *s = &m->s;
    if (type == MI_NORM_RMSNORM)
        return clf_op_rmsnorm_forward_t(m->rt, a->t, a->out, a->rstd, x, mi_par(m, p->w), R,
                                        (size_t)s->C, s->norm_eps, err);
    return clf_op_layernorm_forward_t(m->rt, a->t, a->out, a->mean, a->rstd, x, mi_par(m, p->w),
                                      mi_par(m, p->b), R, (size_t)s->C, s->norm_eps, err);
}

/* y [R, out] = x [R, in] W^T (+ b) (+ resid [R, out], buf NULL = none),
 * the bias and the residual added as the GEMM stores y; x stored as x_t, y
 * as y_t (16 bits: no residual) */
static clf_status linear_fwd(clf_model *m, clf_ptr y, clf_dtype y_t, clf_ptr x, clf_dtype x_t,
                             size_t w, size_t b, size_t R, size_t in, size_t out, clf_ptr resid,
                             clf_error *err)
{
    return mi_gemm(m,
                   &(clf_gemm_desc){.trans_b = 1,
                                    .m = R,
                                    .n = out,
                                    .k = in,
                                    .alpha = 1.0f,
                                    .a = x,
                                    .lda = in,
                                    .b = mi_wpar(m, w),
                                    .ldb = in,
                                    .c = y,
                                    .ldc = out,
                                    .bias = b == MI_NONE ? mi_nullptr() : mi_par(m, b),
                                    .residual = resid.buf != NULL,
                                    .d = resid,
                                    .ldd = out,
                                    .a_type = x_t,
                                    .b_type = m->s.act16,
                                    .c_type = y_t},
                   err);
}

/* A sublayer's output projection and its residual connection: out [R, C] =
 * resid + dropout(x [R, in] W^T + b). Without dropout (inference, or
 * p_resid = 0) the residual is added as the GEMM stores out, one pass;
 * with it the projection goes through m->proj first. out.buf NULL:
 * nothing (the attention's recomputation needs only the attention's own
 * activations). */
static clf_status proj_residual(clf_model *m, int l, int site, clf_ptr out, clf_ptr resid,
                                clf_ptr x, clf_dtype x_t, size_t w, size_t b, size_t R, size_t in,
                                int train, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t C = (size_t)s->C;
    if (out.buf == NULL)
        return CLF_OK;
    if (!(train && s->p_resid > 0))
        return linear_fwd(m, out, CLF_DT_F32, x, x_t, w, b, R, in, C, resid, err);
    clf_status st = linear_fwd(m, m->proj, CLF_DT_F32, x, x_t, w, b, R, in, C, mi_nullptr(), err);
    if (st == CLF_OK)
        st = clf_op_dropout_forward(m->rt, m->proj, m->proj, R * C, s->p_resid, m->state.seed,
                                    mi_dropout_stream(m, l, site), err);
    if (st == CLF_OK)
        st = clf_op_residual(m->rt, out, m->proj, resid, R * C, err);
    return st;
}

clf_gemm_act mi_gemm_act(int act)
{
    switch ((clf_act)act) {
        case CLF_ACT_RELU: return CLF_GEMM_ACT_RELU;
        case CLF_ACT_GELU_ERF: return CLF_GEMM_ACT_GELU_ERF;
        case CLF_ACT_GELU_TANH: return CLF_GEMM_ACT_GELU_TANH;
        case CLF_ACT_SILU: return CLF_GEMM_ACT_SILU;
        default: return CLF_GEMM_ACT_NONE;
    }
}

/* ---- sublayers ------------------------------------------------------------ */

/* The fused attention of layer l's site (MI_SITE_ATTN_P or MI_SITE_CROSS_P)
 * for T queries q (rows q_stride apart) over S keys and values, y [B*T, C]
 * merged, lse [B*NH, T]: no score matrix, attention dropout regenerated
 * from the site's Philox stream in training. */
static clf_attn_fused attn_desc(const clf_model *m, int l, int site, clf_ptr y, clf_ptr lse,
                                clf_ptr q, size_t q_stride, size_t B, size_t T, size_t S, int train)
{
    const mi_spec *s = &m->s;
    clf_attn_fused f = {.y = y,
                        .lse = lse,
                        .q = q,
                        .t = s->act16,
                        .y_stride = (size_t)s->C,
                        .q_stride = q_stride,
                        .B = B,
                        .NH = (size_t)s->NH,
                        .T = T,
                        .S = S,
                        .HS = (size_t)s->HS,
                        .scale = 1.0f / sqrtf((float)s->HS)};
    if (train && s->p_attn > 0) {
        f.p_drop = s->p_attn;
        f.seed = m->state.seed;
        f.stream = mi_dropout_stream(m, l, site);
    }
    return f;
}

clf_attn_fused mi_attn_self(const clf_model *m, int l, size_t B, size_t T, int train)
{
    const mi_block_a *a = &m->ba[l];
    const size_t C = (size_t)m->s.C;
    clf_attn_fused f =
        attn_desc(m, l, MI_SITE_ATTN_P, a->atty, a->lse, a->qkv, 3 * C, B, T, T, train);
    f.k = clf_ptr_at(a->qkv, C);
    f.v = clf_ptr_at(a->qkv, 2 * C);
    f.kv_stride = 3 * C;
    f.alibi = m->s.pos == MI_POS_ALIBI;
    if (m->bp[l].is_enc) {
        f.keep = mi_at(m->src_keep, 0);
        f.keep_stride = T;
    } else {
        f.causal = m->s.causal;
        f.window = (size_t)m->s.window;
    }
    return f;
}

clf_attn_fused mi_attn_cross(const clf_model *m, int l, size_t B, size_t T, size_t S, int train)
{
    const mi_block_a *a = &m->ba[l];
    const size_t C = (size_t)m->s.C;
    clf_attn_fused f =
        attn_desc(m, l, MI_SITE_CROSS_P, a->xatty, a->xlse, a->xq, C, B, T, S, train);
    f.k = a->xkv;
    f.v = clf_ptr_at(a->xkv, C);
    f.kv_stride = 2 * C;
    f.keep = mi_at(m->src_keep, 0);
    f.keep_stride = S;
    return f;
}

/* Keys and values of f from KV caches [Bmax, NH, Tmax, HS]. */
static void attn_desc_cache(clf_attn_fused *f, clf_buffer *kc, clf_buffer *vc, size_t Tmax)
{
    f->k = mi_at(kc, 0);
    f->v = mi_at(vc, 0);
    f->kv_stride = f->HS;
    f->kv_head_stride = Tmax * f->HS;
    f->kv_batch_stride = f->NH * Tmax * f->HS;
}

/* Self-attention of block l: in [B*T, C] (stored as in_t) -> out [B*T, C]
 * = resid + dropout(attention's projection) (proj_residual). Encoder
 * blocks attend in both directions over the kept source positions;
 * decoder blocks causally. */
static clf_status attn_fwd(clf_model *m, int l, clf_ptr in, clf_dtype in_t, clf_ptr out,
                           clf_ptr resid, int Bi, int Ti, int pos0, int train, int cache,
                           clf_error *err)
{
    const mi_spec *s = &m->s;
    const mi_attn_p *p = &m->bp[l].attn;
    mi_block_a *a = &m->ba[l];
    const size_t B = (size_t)Bi, T = (size_t)Ti, C = (size_t)s->C, NH = (size_t)s->NH;
    const size_t HS = (size_t)s->HS, BT = B * T, Tmax = (size_t)s->Tmax;
    clf_ptr qkv = a->qkv, atty = a->atty;
    clf_status st;

    if ((st = linear_fwd(m, qkv, s->act16, in, in_t, p->qkv_w, p->qkv_b, BT, C, 3 * C, mi_nullptr(),
                         err)) != CLF_OK)
        return st;
    if (s->pos == MI_POS_ROPE &&
        ((st = clf_op_rope_t(m->rt, s->act16, qkv, B, T, NH, HS, 3 * C, (size_t)pos0, s->rope_theta,
                             0, err)) != CLF_OK ||
         (st = clf_op_rope_t(m->rt, s->act16, clf_ptr_at(qkv, C), B, T, NH, HS, 3 * C, (size_t)pos0,
                             s->rope_theta, 0, err)) != CLF_OK))
        return st;
    const size_t S = cache ? (size_t)pos0 + T : T;
    if (cache &&
        /* new keys and values go straight from the qkv rows into the caches */
        ((st = clf_op_kv_store(m->rt, mi_at(a->kcache, 0), clf_ptr_at(qkv, C), B, T, NH, HS, 3 * C,
                               Tmax, (size_t)pos0, err)) != CLF_OK ||
         (st = clf_op_kv_store(m->rt, mi_at(a->vcache, 0), clf_ptr_at(qkv, 2 * C), B, T, NH, HS,
                               3 * C, Tmax, (size_t)pos0, err)) != CLF_OK))
        return st;
    if (cache && T == 1) {
        /* one new position: flash-decoding over the cache */
        const clf_attn_decode ad = {.out = atty,
                                    .q = qkv,
                                    .q_stride = 3 * C,
                                    .kcache = mi_at(a->kcache, 0),
                                    .vcache = mi_at(a->vcache, 0),
                                    .scratch = m->decode_part, /* splits: the device's choice */
                                    .B = B,
                                    .NH = NH,
                                    .HS = HS,
                                    .Tmax = Tmax,
                                    .L = S,
                                    .scale = 1.0f / sqrtf((float)HS),
                                    .window = (size_t)s->window,
                                    .alibi = s->pos == MI_POS_ALIBI};
        if ((st = clf_op_attn_decode(m->rt, &ad, err)) != CLF_OK)
            return st;
    } else {
        clf_attn_fused f = mi_attn_self(m, l, B, T, train);
        if (cache) {
            f.S = S;
            attn_desc_cache(&f, a->kcache, a->vcache, Tmax);
        }
        if ((st = clf_op_attn_fused_forward(m->rt, &f, err)) != CLF_OK)
            return st;
    }
    return proj_residual(m, l, MI_SITE_ATTN_OUT, out, resid, atty, s->act16, p->proj_w, p->proj_b,
                         BT, C, train, err);
}

/* Cross-attention of decoder block l: queries from in [B*T, C], keys and
 * values from the encoder's output [B*S, C] (projected here; with `cache`,
 * the cross caches mi_encode filled, S = m->enc_S), masked by the source
 * keep mask -> out [B*T, C] = resid + dropout(projection). */
static clf_status cross_fwd(clf_model *m, int l, clf_ptr in, clf_dtype in_t, clf_ptr out,
                            clf_ptr resid, int Bi, int Ti, int Si, int train, int cache,
                            clf_error *err)
{
    const mi_spec *s = &m->s;
    const mi_cross_p *p = &m->bp[l].cross;
    mi_block_a *a = &m->ba[l];
    const size_t B = (size_t)Bi, T = (size_t)Ti, S = (size_t)Si, C = (size_t)s->C;
    const size_t NH = (size_t)s->NH, HS = (size_t)s->HS, BT = B * T, BS = B * S;
    clf_ptr q = a->xq, atty = a->xatty;
    clf_ptr keep = mi_at(m->src_keep, 0);
    clf_status st;

    if ((st = linear_fwd(m, q, s->act16, in, in_t, p->q_w, p->q_b, BT, C, C, mi_nullptr(), err)) !=
        CLF_OK)
        return st;
    if (!cache && (st = linear_fwd(m, a->xkv, s->act16, mi_stack_out(m, &m->enc), CLF_DT_F32,
                                   p->kv_w, p->kv_b, BS, C, 2 * C, mi_nullptr(), err)) != CLF_OK)
        return st;
    if (cache && T == 1) {
        const clf_attn_decode ad = {.out = atty,
                                    .q = q,
                                    .kcache = mi_at(a->xkcache, 0),
                                    .vcache = mi_at(a->xvcache, 0),
                                    .keep = keep,
                                    .scratch = m->decode_part,
                                    .keep_stride = S,
                                    .B = B,
                                    .NH = NH,
                                    .HS = HS,
                                    .Tmax = (size_t)s->Smax,
                                    .L = S,
                                    .scale = 1.0f / sqrtf((float)HS)};
        if ((st = clf_op_attn_decode(m->rt, &ad, err)) != CLF_OK)
            return st;
    } else {
        clf_attn_fused f = mi_attn_cross(m, l, B, T, S, train);
        if (cache)
            attn_desc_cache(&f, a->xkcache, a->xvcache, (size_t)s->Smax);
        if ((st = clf_op_attn_fused_forward(m->rt, &f, err)) != CLF_OK)
            return st;
    }
    return proj_residual(m, l, MI_SITE_CROSS_OUT, out, resid, atty, s->act16, p->proj_w, p->proj_b,
                         BT, C, train, err);
}

/* Feed-forward of block l: in [BT, C] (stored as in_t) -> out [BT, C] =
 * resid + dropout(ffn(in)); the hidden activations stored as a->fch_t. */
static clf_status ffn_fwd(clf_model *m, int l, clf_ptr in, clf_dtype in_t, clf_ptr out,
                          clf_ptr resid, size_t BT, int train, clf_error *err)
{
    const mi_spec *s = &m->s;
    const mi_ffn_p *p = &m->bp[l].ffn;
    mi_block_a *a = &m->ba[l];
    const size_t C = (size_t)s->C, H = (size_t)s->H, F = (size_t)s->fc_rows;
    clf_ptr fch = a->fch, act = a->fch_act;
    clf_status st;

    /* fc, its bias and (not SwiGLU) its activation in one pass: act gets
     * the activation; fch keeps what backward needs of the pre-activation:
     * where backward fuses the activation's derivative into a GEMM
     * (mi_ffn_fused_dact) and the model trains, the derivative itself
     * (computed here once from the value the activation sees, instead of
     * again in backward: the same bits in float32), else the pre-activation */
    clf_gemm_desc fc = {.trans_b = 1,
                        .m = BT,
                        .n = F,
                        .k = C,
                        .alpha = 1.0f,
                        .a = in,
                        .lda = C,
                        .b = mi_wpar(m, p->fc_w),
                        .ldb = C,
                        .c = fch,
                        .ldc = F,
                        .bias = p->fc_b == MI_NONE ? mi_nullptr() : mi_par(m, p->fc_b),
                        .a_type = in_t,
                        .b_type = m->s.act16,
                        .c_type = a->fch_t};
    if (!s->swiglu) {
        fc.act = mi_gemm_act(s->act);
        fc.d = act;
        fc.ldd = H;
        fc.d_type = a->fch_t;
        fc.c_act_grad = mi_ffn_keeps_dact(m);
    }
    if ((st = mi_gemm(m, &fc, err)) != CLF_OK)
        return st;
    if (s->swiglu && (st = clf_op_swiglu_forward(m->rt, act, fch, BT, H, err)) != CLF_OK)
        return st;
    if (train && s->p_ffn > 0 &&
        (st = clf_op_dropout_forward(m->rt, act, act, BT * H, s->p_ffn, m->state.seed,
                                     mi_dropout_stream(m, l, MI_SITE_FFN_H), err)) != CLF_OK)
        return st;
    return proj_residual(m, l, MI_SITE_FFN_OUT, out, resid, act, a->fch_t, p->proj_w, p->proj_b, BT,
                         H, train, err);
}

/* ---- blocks and stacks ---------------------------------------------------------- */

clf_ptr mi_block_out(const clf_model *m, int l)
{
    return m->s.norm_post ? m->ba[l].ln2.out : m->ba[l].res2;
}

static const mi_stack *stack_of(const clf_model *m, int l)
{
    return m->bp[l].is_enc ? &m->enc : &m->dec;
}

clf_ptr mi_block_in(const clf_model *m, int l)
{
    const mi_stack *st = stack_of(m, l);
    return l == st->first ? st->x0 : mi_block_out(m, l - 1);
}

clf_ptr mi_stack_out(const clf_model *m, const mi_stack *st)
{
    if (m->s.final_norm != MI_NORM_NONE)
        return st->lnf_a.out;
    return st->n > 0 ? mi_block_out(m, st->first + st->n - 1) : st->x0;
}

/* Block l over B x T rows of its stack (an encoder block's T is S); S is
 * the source length its cross-attention reads. */
static clf_status block_fwd(clf_model *m, int l, int B, int T, int S, int pos0, int train,
                            int cache, clf_error *err)
{
    const mi_spec *s = &m->s;
    const mi_block_p *p = &m->bp[l];
    mi_block_a *a = &m->ba[l];
    const size_t BT = (size_t)B * (size_t)T;
    clf_ptr x = mi_block_in(m, l);
    clf_ptr res1 = a->res1, res2 = a->res2;
    clf_ptr ln1 = a->ln1.out, ln2 = a->ln2.out;
    clf_ptr resx = a->resx, lnx = a->lnx.out;
    clf_status st;
    /* each sublayer adds its residual as its output projection stores */
    if (!s->norm_post) {
        /* res1 = x + attn(ln1(x)); [resx = res1 + cross(lnx(res1));] res2 = . + ffn(ln2(.)) */
        clf_ptr mid = p->has_cross ? resx : res1;
        if ((st = norm_fwd(m, s->norm, &a->ln1, &p->ln1, x, BT, err)) != CLF_OK ||
            (st = attn_fwd(m, l, ln1, a->ln1.t, res1, x, B, T, pos0, train, cache, err)) != CLF_OK)
            return st;
        if (p->has_cross &&
            ((st = norm_fwd(m, s->norm, &a->lnx, &p->lnx, res1, BT, err)) != CLF_OK ||
             (st = cross_fwd(m, l, lnx, a->lnx.t, resx, res1, B, T, S, train, cache, err)) !=
                 CLF_OK))
            return st;
        if ((st = norm_fwd(m, s->norm, &a->ln2, &p->ln2, mid, BT, err)) != CLF_OK ||
            (st = ffn_fwd(m, l, ln2, a->ln2.t, res2, mid, BT, train, err)) != CLF_OK)
            return st;
        return CLF_OK;
    }
    /* ln1 = norm(x + attn(x)); [lnx = norm(ln1 + cross(ln1));] ln2 = norm(. + ffn(.)) */
    clf_ptr mid = p->has_cross ? lnx : ln1;
    if ((st = attn_fwd(m, l, x, CLF_DT_F32, res1, x, B, T, pos0, train, cache, err)) != CLF_OK ||
        (st = norm_fwd(m, s->norm, &a->ln1, &p->ln1, res1, BT, err)) != CLF_OK)
        return st;
    if (p->has_cross &&
        ((st = cross_fwd(m, l, ln1, CLF_DT_F32, resx, ln1, B, T, S, train, cache, err)) != CLF_OK ||
         (st = norm_fwd(m, s->norm, &a->lnx, &p->lnx, resx, BT, err)) != CLF_OK))
        return st;
    if ((st = ffn_fwd(m, l, mid, CLF_DT_F32, res2, mid, BT, train, err)) != CLF_OK ||
        (st = norm_fwd(m, s->norm, &a->ln2, &p->ln2, res2, BT, err)) != CLF_OK)
        return st;
    return CLF_OK;
}

clf_status mi_block_recompute(clf_model *m, int l, int B, int T, int S, clf_error *err)
{
    return block_fwd(m, l, B, T, S, 0, 1, 0, err);
}

clf_status mi_attn_recompute(clf_model *m, int l, int B, int T, clf_error *err)
{
    /* the attention's input: ln1's output (pre-norm) or the block's input */
    const int post = m->s.norm_post;
    clf_ptr in = post ? mi_block_in(m, l) : m->ba[l].ln1.out;
    return attn_fwd(m, l, in, post ? CLF_DT_F32 : m->ba[l].ln1.t, mi_nullptr(), mi_nullptr(), B, T,
                    0, 1, 0, err);
}

/* A stack over B x T rows of its tokens at positions pos0...: embeddings
 * (+ positions, dropout), blocks, final norm. S: the source length for
 * cross-attention (decoder stack of an encoder-decoder). */
static clf_status stack_fwd(clf_model *m, const mi_stack *stk, int Bi, int Ti, int S, int pos0,
                            int train, int cache, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t B = (size_t)Bi, T = (size_t)Ti, C = (size_t)s->C, BT = B * T;
    clf_ptr x0 = stk->x0;
    /* with an embedding norm, embeddings + positions go to xe, normed into x0 */
    clf_ptr xe = s->emb_norm != MI_NORM_NONE ? stk->xe : x0;
    clf_ptr tokens = stk->src ? mi_at(m->src, 0) : mi_at(m->tokens, 0);
    clf_status st;
    if ((st = clf_op_embed_forward(m->rt, xe, tokens, mi_par(m, stk->wte), mi_par(m, stk->wpe), B,
                                   T, C, (size_t)pos0, s->emb_scale, err)) != CLF_OK)
        return st;
    if (s->pos == MI_POS_SINUSOIDAL &&
        (st = clf_op_sinusoid_add(m->rt, xe, B, T, C, (size_t)pos0, err)) != CLF_OK)
        return st;
    if (s->emb_norm != MI_NORM_NONE &&
        (st = norm_fwd(m, s->emb_norm, &stk->lne_a, &stk->lne, xe, BT, err)) != CLF_OK)
        return st;
    if (train && s->p_emb > 0 &&
        (st = clf_op_dropout_forward(m->rt, x0, x0, BT * C, s->p_emb, m->state.seed,
                                     mi_dropout_stream(m, stk->drop_layer, 0), err)) != CLF_OK)
        return st;
    for (int l = stk->first; l < stk->first + stk->n; l++)
        if ((st = block_fwd(m, l, Bi, Ti, S, pos0, train, cache, err)) != CLF_OK)
            return st;
    if (s->final_norm != MI_NORM_NONE) {
        clf_ptr last = stk->n > 0 ? mi_block_out(m, stk->first + stk->n - 1) : x0;
        if ((st = norm_fwd(m, s->final_norm, &stk->lnf_a, &stk->lnf, last, BT, err)) != CLF_OK)
            return st;
    }
    return CLF_OK;
}

/* ---- heads and the whole forward ---------------------------------------------------- */

/* The fused loss over R rows of logits [R, N] with m->targets, its mean into
 * scalars[0]. */
static clf_status loss_fwd(clf_model *m, size_t R, size_t N, int train, clf_error *err)
{
    clf_ptr logits = m->logits;
    float gs = m->loss_scale > 0.0f ? m->loss_scale : m->count > 0 ? 1.0f / (float)m->count : 0.0f;
    clf_ptr dlogits = train ? logits : mi_nullptr();
    clf_status st;
    /* fp16: times the loss scale, which lives on the device */
    clf_ptr gmul = mi_amp(m) ? clf_ptr_at(m->amp, CLF_AMP_SCALE) : mi_nullptr();
    if ((st = clf_op_cross_entropy(m->rt, m->losses, dlogits, logits, mi_at(m->targets, 0), R, N,
                                   m->optim.label_smoothing, CLF_MODEL_IGNORE_INDEX, gs, gmul,
                                   err)) != CLF_OK)
        return st;
    return clf_op_mean(m->rt, m->scalars, m->losses, R, m->red, err);
}

/* Classifier over the encoder's output [B*S, C]: pool (first position, or
 * mean over kept positions), linear to NL labels, loss. Without a head
 * (an embedding model) only the mean pool runs. */
static clf_status classifier_fwd(clf_model *m, int Bi, int Si, int train, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t B = (size_t)Bi, S = (size_t)Si, C = (size_t)s->C, NL = (size_t)s->NL;
    clf_ptr xf = mi_stack_out(m, &m->enc), logits = m->logits;
    clf_ptr X = xf;
    size_t ldx = S * C; /* the first row of each sequence */
    clf_status st;
    if (s->pool == MI_POOL_MEAN) {
        X = m->pooled;
        ldx = C;
        if ((st = clf_op_mean_pool_forward(m->rt, X, xf, mi_at(m->src_keep, 0), B, S, C, err)) !=
            CLF_OK)
            return st;
    }
    if (s->head == MI_HEAD_NONE)
        return CLF_OK;
    if ((st = mi_gemm(m,
                      &(clf_gemm_desc){.trans_b = 1,
                                       .m = B,
                                       .n = NL,
                                       .k = C,
                                       .alpha = 1.0f,
                                       .a = X,
                                       .lda = ldx,
                                       .b = mi_wpar(m, m->cls_w),
                                       .ldb = C,
                                       .c = logits,
                                       .ldc = NL,
                                       .b_type = m->s.act16},
                      err)) != CLF_OK ||
        (st = clf_op_bias_act_forward(m->rt, CLF_ACT_NONE, logits, mi_par(m, m->cls_b), logits, B,
                                      NL, err)) != CLF_OK)
        return st;
    if (!m->has_targets)
        return CLF_OK;
    return loss_fwd(m, B, NL, train, err);
}

clf_status mi_forward(clf_model *m, const mi_pass *pass, clf_error *err)
{
    const int Bi = pass->B, Ti = pass->T, pos0 = pass->pos0;
    const int train = (pass->flags & MI_PASS_TRAIN) != 0;
    const int cache = (pass->flags & MI_PASS_CACHE) != 0;
    const int last_only = (pass->flags & MI_PASS_LAST) != 0;
    const mi_spec *s = &m->s;
    const size_t B = (size_t)Bi, T = (size_t)Ti, C = (size_t)s->C, V = (size_t)s->V;
    const size_t BT = B * T;
    clf_ptr logits = m->logits;
    clf_status st;

    if ((st = mi_weights_sync(m, err)) != CLF_OK)
        return st;
    if (s->kind != MI_KIND_DECODER && !cache &&
        (st = stack_fwd(m, &m->enc, Bi, m->cur_S, 0, 0, train, 0, err)) != CLF_OK)
        return st;
    if (s->kind == MI_KIND_ENCODER)
        return classifier_fwd(m, Bi, m->cur_S, train, err);
    int S = cache ? m->enc_S : m->cur_S;
    if ((st = stack_fwd(m, &m->dec, Bi, Ti, S, pos0, train, cache, err)) != CLF_OK)
        return st;
    clf_ptr xf = mi_stack_out(m, &m->dec), wout = mi_wpar(m, m->lm_head);
    if (last_only) /* the last position of each sequence: rows (T-1) + b*T */
        return mi_gemm(m,
                       &(clf_gemm_desc){.trans_b = 1,
                                        .m = B,
                                        .n = V,
                                        .k = C,
                                        .alpha = 1.0f,
                                        .a = clf_ptr_at(xf, (T - 1) * C),
                                        .lda = T * C,
                                        .b = wout,
                                        .ldb = C,
                                        .c = logits,
                                        .ldc = V,
                                        .b_type = m->s.act16},
                       err);
    if ((st = mi_gemm(m,
                      &(clf_gemm_desc){.trans_b = 1,
                                       .m = BT,
                                       .n = V,
                                       .k = C,
                                       .alpha = 1.0f,
                                       .a = xf,
                                       .lda = C,
                                       .b = wout,
                                       .ldb = C,
                                       .c = logits,
                                       .ldc = V,
                                       .b_type = m->s.act16},
                      err)) != CLF_OK)
        return st;
    if (!m->has_targets)
        return CLF_OK;
    return loss_fwd(m, BT, V, train, err);
}

clf_status mi_encode(clf_model *m, int Bi, int Si, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t B = (size_t)Bi, S = (size_t)Si, C = (size_t)s->C, NH = (size_t)s->NH;
    const size_t HS = (size_t)s->HS, Smax = (size_t)s->Smax;
    clf_ptr scratch = m->qkv, mem = mi_stack_out(m, &m->enc);
    clf_status st;
    if ((st = stack_fwd(m, &m->enc, Bi, Si, 0, 0, 0, 0, err)) != CLF_OK)
        return st;
    for (int l = m->dec.first; l < m->dec.first + m->dec.n; l++) {
        const mi_cross_p *p = &m->bp[l].cross;
        mi_block_a *a = &m->ba[l];
        if ((st = linear_fwd(m, scratch, CLF_DT_F32, mem, CLF_DT_F32, p->kv_w, p->kv_b, B * S, C,
                             2 * C, mi_nullptr(), err)) != CLF_OK ||
            (st = clf_op_kv_store(m->rt, mi_at(a->xkcache, 0), scratch, B, S, NH, HS, 2 * C, Smax,
                                  0, err)) != CLF_OK ||
            (st = clf_op_kv_store(m->rt, mi_at(a->xvcache, 0), clf_ptr_at(scratch, C), B, S, NH, HS,
                                  2 * C, Smax, 0, err)) != CLF_OK)
            return st;
    }
    return CLF_OK;
}
