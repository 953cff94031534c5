/*
 * forward.c - the forward graph: embeddings and positions, the blocks
 * (self-attention, cross-attention and feed-forward sublayers with pre- or
 * post-norm), the final norms, the heads (LM or classifier) and the fused
 * loss, for all three kinds.
 *
 * Design: like llm.c's gpt2_forward, a straight sequence of op calls over
 * buffers planned at create, one function per kind of node (nodes.c); the
 * list's walk is the forward (mi_forward). Each sublayer node reads its
 * input, residual and (cross-attention) memory values, so the encoder
 * stack (bidirectional, source keep mask), the decoder stack (causal) and
 * the decoder's cross-attention (queries from the decoder, keys and values
 * from the encoder's output, source keep mask) share the functions; its
 * products are the node's linear layers (mi_node_linears).
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
 * Not here: the list and its wiring (nodes.c), backward (backward.c), the
 * training/inference entry points (step.c, decode.c).
 */
#include <math.h>

#include "model/graph/model_internal.h"
#include "model/ops/ops.h"

/* ---- helpers ------------------------------------------------------------- */

clf_status mi_gemm(clf_model *m, const clf_gemm_desc *d, clf_error *err)
{
    return clf_gemm(m->rt, d, err);
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

/* nm over x [R, C] (float32), into its output (stored as nm->a->t). */
static clf_status norm_fwd(clf_model *m, const mi_norm *nm, clf_tensor x, clf_error *err)
{
    const clf_norm_args a = {.rms = nm->type == MI_NORM_RMSNORM,
                             .x = x.p,
                             .w = mi_par(m, nm->p->w),
                             .b = mi_par(m, nm->p->b),
                             .mean = nm->a->mean,
                             .rstd = nm->a->rstd,
                             .R = x.rows,
                             .N = x.cols,
                             .eps = m->s.norm_eps,
                             .out = nm->a->out,
                             .out_type = nm->a->t};
    return clf_op_norm_forward(m->rt, &a, err);
}

/* L's y = x W^T + b (+ resid, y's shape, as y is stored, y then in
 * float32; NULL: none). */
static clf_status linear_fwd(clf_model *m, const mi_linear *L, const clf_tensor *resid,
                             clf_error *err)
{
    clf_gemm_desc d = mi_linear_gemm(m, L, MI_GEMM_FWD);
    if (resid != NULL) {
        d.epi = CLF_GEMM_EPI_RESIDUAL;
        d.d = resid->p;
        d.ldd = resid->ld;
        d.d_type = resid->t;
    }
    return mi_gemm(m, &d, err);
}

/* Decoding fuses a norm into the linear that reads it (clf_op_norm_dot):
 * node i, a norm whose output only node i + 1's first linear reads (a
 * pre-norm block's attention or feed-forward with an activation, or the LM
 * head), in a cached pass of one position over few rows, on a device whose
 * work-groups run item by item (where a launch costs more than the norm),
 * with float32 weights and activations. Whether node i is fused: mi_forward
 * then skips it and hands it to node i + 1 (mi_pass.pre_norm). */
#define MI_NORM_DOT_ROWS 16 /* the most rows: beams of one position */

static int norm_fuses(clf_model *m, int i, const mi_pass *ps)
{
    const mi_spec *s = &m->s;
    if ((ps->flags & (MI_PASS_CACHE | MI_PASS_TRAIN | MI_PASS_ATTN_ONLY)) != MI_PASS_CACHE ||
        ps->T != 1 || ps->B > MI_NORM_DOT_ROWS || i + 1 >= m->n_nodes || m->params16 != NULL ||
        !clf_op_norm_dot_fits(m->rt))
        return 0;
    const mi_node *nn = &m->nodes[i], *nx = &m->nodes[i + 1];
    if (nn->kind != MI_NODE_NORM || nx->in != nn->out || nx->resid == nn->out ||
        nn->norm.a->t != CLF_DT_F32 || nx->stk->src || nn->stk->src)
        return 0;
    const int ok_kind =
        nx->kind == MI_NODE_ATTN ||
        (nx->kind == MI_NODE_FFN && !s->swiglu && mi_gemm_act(s->act) != CLF_GEMM_ACT_NONE) ||
        (nx->kind == MI_NODE_HEAD && s->kind != MI_KIND_ENCODER);
    const size_t rows = (size_t)ps->B, C = (size_t)s->C;
    if (!ok_kind || mi_val(m, nn->in, rows).ld != C)
        return 0;
    for (int j = 0; j < m->n_nodes; j++) /* nothing else reads the norm's output */
        if (j != i + 1 && (m->nodes[j].in == nn->out || m->nodes[j].resid == nn->out ||
                           m->nodes[j].mem == nn->out))
            return 0;
    return 1;
}

/* L's forward into y: act(x W^T + b), x the output of ps->pre_norm computed
 * from the norm's input in the same launch (norm_fuses); act a
 * CLF_ACTCODE_*. */
static clf_status norm_linear_fwd(clf_model *m, const mi_pass *ps, const mi_linear *L, unsigned act,
                                  clf_tensor y, clf_error *err)
{
    const mi_node *nn = ps->pre_norm;
    const clf_norm_dot_args a = {.rms = nn->norm.type == MI_NORM_RMSNORM,
                                 .x = mi_val(m, nn->in, L->x.rows).p,
                                 .w = mi_par(m, nn->norm.p->w),
                                 .b = mi_par(m, nn->norm.p->b),
                                 .eps = m->s.norm_eps,
                                 .W = mi_par(m, L->p.w),
                                 .bias = mi_par(m, L->p.b),
                                 .act = act,
                                 .y = y.p,
                                 .ldy = y.ld,
                                 .R = L->x.rows,
                                 .C = L->x.cols,
                                 .N = L->y.cols};
    return clf_op_norm_dot(m->rt, &a, err);
}

/* Decoding's self-attention through its fused norm (norm_fuses), its qkv
 * linear and the attention itself in one launch (clf_op_attn_qkv_decode):
 * one new position of a cached pass, float32 throughout, and none of the
 * features the kernel leaves to the unfused path (relative positions, a
 * packed batch's rotary positions, sparse patterns, performer features),
 * where the device has a
 * work-item for each of its compute units. The attention's output goes to
 * a->atty as clf_op_attn_decode writes it. Returns 0 where it does not
 * apply (*st untouched). */
static int norm_qkv_attn_fwd(clf_model *m, const mi_node *n, const mi_pass *ps, const mi_linear *L,
                             size_t S, clf_status *st, clf_error *err)
{
    const mi_spec *s = &m->s;
    const mi_node *nn = ps->pre_norm;
    const size_t B = (size_t)ps->B;
    if (nn == NULL || n->stk->src || ps->T != 1 || !(ps->flags & MI_PASS_CACHE) || s->perf_m > 0 ||
        s->sp_bs || s->act16 || s->pos == MI_POS_T5 || s->pos == MI_POS_REL ||
        (s->pos == MI_POS_ROPE && mi_doc_pos(m, 0).buf != NULL) ||
        !clf_op_attn_qkv_decode_fits(m->rt, B, (size_t)s->NKV, (size_t)s->HS, (size_t)s->C,
                                     (size_t)s->NH, S))
        return 0;
    mi_block_a *a = &m->ba[n->layer];
    const clf_attn_qkv_decode q = {.rms = nn->norm.type == MI_NORM_RMSNORM,
                                   .x = mi_val(m, nn->in, B).p,
                                   .w = mi_par(m, nn->norm.p->w),
                                   .b = mi_par(m, nn->norm.p->b),
                                   .eps = s->norm_eps,
                                   .W = mi_par(m, L->p.w),
                                   .bias = mi_par(m, L->p.b),
                                   .out = a->atty,
                                   .kcache = mi_at(a->kcache, 0),
                                   .vcache = mi_at(a->vcache, 0),
                                   .B = B,
                                   .C = (size_t)s->C,
                                   .NH = (size_t)s->NH,
                                   .kv_heads = (size_t)s->NKV,
                                   .HS = (size_t)s->HS,
                                   .Tmax = (size_t)s->Tmax,
                                   .L = S,
                                   .window = (size_t)s->window,
                                   .scale = 1.0f / sqrtf((float)s->HS),
                                   .alibi = s->pos == MI_POS_ALIBI,
                                   .rope = s->pos == MI_POS_ROPE ? &s->rope : NULL};
    *st = clf_op_attn_qkv_decode(m->rt, &q, err);
    return 1;
}

/* L's forward, y = x W^T + b, or through the norm before it (pre_norm). */
static clf_status first_linear_fwd(clf_model *m, const mi_pass *ps, const mi_linear *L,
                                   clf_error *err)
{
    return ps->pre_norm != NULL ? norm_linear_fwd(m, ps, L, CLF_ACTCODE_NONE, L->y, err)
                                : linear_fwd(m, L, NULL, err);
}

/* Node n's output projection L and its residual connection: out (L's y) =
 * resid + dropout(x W^T + b). Without dropout (inference, or p_resid = 0)
 * the residual is added as the GEMM stores out, one pass; with it the
 * projection goes through m->proj first. */
static clf_status proj_residual(clf_model *m, const mi_node *n, const mi_linear *L, int site,
                                int train, clf_error *err)
{
    const mi_spec *s = &m->s;
    const clf_tensor resid = mi_val(m, n->resid, L->y.rows);
    const size_t RC = L->y.rows * L->y.cols;
    if (!(train && s->p_resid > 0))
        return linear_fwd(m, L, &resid, err);
    mi_linear P = *L;
    P.y = clf_tensor_at(m->proj, CLF_DT_F32, L->y.rows, L->y.cols);
    clf_status st = linear_fwd(m, &P, NULL, err);
    if (st == CLF_OK)
        st = clf_op_dropout_forward(m->rt, m->proj, m->proj, RC, s->p_resid, m->state.seed,
                                    mi_dropout_stream(m, n->layer, site), err);
    if (st == CLF_OK)
        st = clf_op_residual(m->rt, L->y.p, m->proj, resid.p, RC, err);
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

/* The fields the fused attention of layer l's site (MI_SITE_ATTN_P or
 * MI_SITE_CROSS_P) shares with every attention of the model, on f's y,
 * lse, q and sizes: storage, heads, scale, and in training the site's
 * dropout, regenerated from its Philox stream. */
static clf_attn_fused attn_desc(const clf_model *m, int l, int site, clf_attn_fused f, int train)
{
    const mi_spec *s = &m->s;
    f.t = s->act16;
    f.y_stride = (size_t)s->C;
    f.NH = (size_t)s->NH;
    f.HS = (size_t)s->HS;
    f.scale = 1.0f / sqrtf((float)s->HS);
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
    const size_t C = (size_t)m->s.C, QKV = mi_qkv_cols(&m->s);
    clf_attn_fused f = attn_desc(
        m, l, MI_SITE_ATTN_P,
        (clf_attn_fused){
            .y = a->atty, .lse = a->lse, .q = a->qkv, .q_stride = QKV, .B = B, .T = T, .S = T},
        train);
    /* k and v after q, with NKV heads each */
    f.k = clf_ptr_at(a->qkv, C);
    f.v = clf_ptr_at(a->qkv, C + mi_kv_cols(&m->s));
    f.kv_stride = QKV;
    f.kv_heads = (size_t)m->s.NKV;
    f.alibi = m->s.pos == MI_POS_ALIBI;
    if (m->bp[l].is_enc && m->s.lin_k > 0) {
        /* linformer: the keys and values projected along the sequence
         * (mi_lin_project), every one of them seen */
        f.k = a->lkv;
        f.v = clf_ptr_at(a->lkv, mi_kv_cols(&m->s));
        f.kv_stride = 2 * mi_kv_cols(&m->s);
        f.S = (size_t)m->s.lin_k;
    } else if (m->bp[l].is_enc) {
        f.keep = mi_at(m->src_keep, 0);
        f.keep_stride = T;
    } else {
        f.causal = m->s.causal;
        f.window = (size_t)m->s.window;
        if (m->s.sp_bs) { /* sparse patterns beside the window */
            f.glob = (size_t)m->s.glob;
            f.stride = (size_t)m->s.stride;
            f.sp = m->sp_table;
            f.sp_bs = (size_t)m->s.sp_bs;
            f.sp_nb = m->sp_nb;
            f.sp_R = (size_t)m->s.rnd;
        }
        if (m->packed) { /* attention stays inside each document */
            f.keep = mi_at(m->doc_seg, 0);
            f.keep_stride = T;
            f.segments = 1;
        }
    }
    return f;
}

clf_attn_fused mi_attn_cross(const clf_model *m, int l, size_t B, size_t T, size_t S, int train)
{
    const mi_block_a *a = &m->ba[l];
    const size_t C = (size_t)m->s.C;
    clf_attn_fused f = attn_desc(
        m, l, MI_SITE_CROSS_P,
        (clf_attn_fused){
            .y = a->xatty, .lse = a->xlse, .q = a->xq, .q_stride = C, .B = B, .T = T, .S = S},
        train);
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
    f->kv_batch_stride = (f->kv_heads ? f->kv_heads : f->NH) * Tmax * f->HS;
}

/* Linformer's product along the sequence for part (0 keys, 1 values) of
 * block l's B sequences of T rows: lkv's part [B, lin_k, KC] = E[:, :T] x
 * qkv's part (E: lin_e or lin_f [lin_k, context], one for every sequence). */
static clf_gemm_desc lin_gemm(const clf_model *m, int l, int part, size_t B, size_t T)
{
    const mi_spec *s = &m->s;
    const mi_block_a *a = &m->ba[l];
    const size_t KC = mi_kv_cols(s), QKV = mi_qkv_cols(s), K = (size_t)s->lin_k;
    const mi_attn_p *ap = &m->bp[l].attn;
    return (clf_gemm_desc){.m = K,
                           .n = KC,
                           .k = T,
                           .alpha = 1.0f,
                           .a = mi_par(m, part ? ap->linf : ap->line),
                           .lda = (size_t)s->T,
                           .b = clf_ptr_at(a->qkv, (size_t)s->C + (size_t)part * KC),
                           .ldb = QKV,
                           .c = clf_ptr_at(a->lkv, (size_t)part * KC),
                           .ldc = 2 * KC,
                           .batch = B,
                           .stride_a = 0,
                           .stride_b = T * QKV,
                           .stride_c = K * 2 * KC};
}

clf_status mi_lin_project(clf_model *m, int l, size_t B, size_t T, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t KC = mi_kv_cols(s);
    clf_status st;
    /* the padding's keys and values out of the sums */
    if ((st = clf_op_rows_mask(m->rt, clf_ptr_at(m->ba[l].qkv, (size_t)s->C), mi_qkv_cols(s), 0,
                               2 * KC, mi_at(m->src_keep, 0), B * T, err)) != CLF_OK)
        return st;
    for (int part = 0; part < 2; part++) {
        const clf_gemm_desc d = lin_gemm(m, l, part, B, T);
        if ((st = mi_gemm(m, &d, err)) != CLF_OK)
            return st;
    }
    return CLF_OK;
}

/* Linformer's backward products for part (0 keys, 1 values): dw, d(E) +=
 * d(lkv part)_b x (qkv part)_b^T for sequence b; dx, d(qkv part) =
 * E[:, :T]^T x d(lkv part) for every sequence. */
static clf_gemm_desc lin_gemm_dw(const clf_model *m, int l, int part, size_t b, size_t T)
{
    const mi_spec *s = &m->s;
    const size_t KC = mi_kv_cols(s), QKV = mi_qkv_cols(s), K = (size_t)s->lin_k;
    const mi_attn_p *ap = &m->bp[l].attn;
    const clf_gemm_desc f = lin_gemm(m, l, part, 1, T);
    return (clf_gemm_desc){.trans_b = 1,
                           .m = K,
                           .n = T,
                           .k = KC,
                           .alpha = 1.0f,
                           .beta = 1.0f,
                           .a = clf_ptr_at(m->lin_dkv, b * K * 2 * KC + (size_t)part * KC),
                           .lda = 2 * KC,
                           .b = clf_ptr_at(f.b, b * T * QKV),
                           .ldb = QKV,
                           .c = mi_grad(m, part ? ap->linf : ap->line),
                           .ldc = (size_t)s->T};
}

static clf_gemm_desc lin_gemm_dx(const clf_model *m, int l, int part, size_t B, size_t T,
                                 clf_ptr dqkv)
{
    const mi_spec *s = &m->s;
    const size_t KC = mi_kv_cols(s), QKV = mi_qkv_cols(s), K = (size_t)s->lin_k;
    return (clf_gemm_desc){.trans_a = 1,
                           .m = T,
                           .n = KC,
                           .k = K,
                           .alpha = 1.0f,
                           .a = lin_gemm(m, l, part, B, T).a,
                           .lda = (size_t)s->T,
                           .b = clf_ptr_at(m->lin_dkv, (size_t)part * KC),
                           .ldb = 2 * KC,
                           .c = clf_ptr_at(dqkv, (size_t)s->C + (size_t)part * KC),
                           .ldc = QKV,
                           .batch = B,
                           .stride_a = 0,
                           .stride_b = K * 2 * KC,
                           .stride_c = T * QKV};
}

clf_status mi_lin_backward(clf_model *m, int l, size_t B, size_t T, clf_ptr dqkv, clf_error *err)
{
    const mi_spec *s = &m->s;
    clf_status st = CLF_OK;
    for (int part = 0; part < 2 && st == CLF_OK; part++) {
        for (size_t b = 0; b < B && st == CLF_OK; b++) { /* in order: deterministic */
            const clf_gemm_desc dw = lin_gemm_dw(m, l, part, b, T);
            st = mi_gemm(m, &dw, err);
        }
        const clf_gemm_desc dx = lin_gemm_dx(m, l, part, B, T, dqkv);
        if (st == CLF_OK)
            st = mi_gemm(m, &dx, err);
    }
    /* the padding's keys and values were zeros */
    if (st == CLF_OK)
        st = clf_op_rows_mask(m->rt, clf_ptr_at(dqkv, (size_t)s->C), mi_qkv_cols(s), 0,
                              2 * mi_kv_cols(s), mi_at(m->src_keep, 0), B * T, err);
    return st;
}

clf_status mi_lin_prepare(clf_model *m, size_t B, size_t T, int train, clf_error *err)
{
    clf_status st = CLF_OK;
    for (int l = 0; l < m->s.L && st == CLF_OK; l++) {
        if (m->s.lin_k <= 0 || !m->bp[l].is_enc)
            continue;
        const clf_gemm_desc f = lin_gemm(m, l, 0, B, T);
        if ((st = clf_gemm_prepare(m->rt, &f, err)) != CLF_OK || !train)
            continue;
        const clf_gemm_desc dw = lin_gemm_dw(m, l, 0, 0, T),
                            dx = lin_gemm_dx(m, l, 0, B, T, m->dqkv);
        if ((st = clf_gemm_prepare(m->rt, &dw, err)) == CLF_OK)
            st = clf_gemm_prepare(m->rt, &dx, err);
    }
    return st;
}

clf_status mi_rel_table(clf_model *m, const mi_stack *stk, size_t T, size_t S, size_t *width,
                        clf_error *err)
{
    *width = 0;
    if (m->s.pos != MI_POS_T5)
        return CLF_OK;
    *width = clf_op_relbias_width(T, S);
    return clf_op_relbias_table(m->rt, m->rel_rb, m->rel_rbk, mi_par(m, stk->rel), stk->relbk,
                                m->rel_R0, (size_t)m->s.NH, (size_t)m->s.nbk, T, S, err);
}

clf_status mi_rel_qr(clf_model *m, int l, const clf_heads *hq, size_t *W, clf_error *err)
{
    *W = 0;
    if (m->s.pos != MI_POS_REL)
        return CLF_OK;
    *W = (size_t)(2 * m->s.relk + 1);
    return clf_op_rel_qr(m->rt, m->rel_qr, hq, mi_par(m, m->bp[l].attn.relk), *W,
                         1.0f / sqrtf((float)m->s.HS), err);
}

clf_performer mi_perf_desc(const clf_model *m, int l, size_t B, size_t T, size_t S, int cache)
{
    const mi_spec *s = &m->s;
    const mi_block_a *a = &m->ba[l];
    const size_t C = (size_t)s->C, QKV = mi_qkv_cols(s), HS = (size_t)s->HS;
    const size_t Tmax = (size_t)s->Tmax, NH = (size_t)s->NH;
    const int enc = m->bp[l].is_enc;
    clf_performer p = {.y = a->atty,
                       .q = a->qkv,
                       .k = clf_ptr_at(a->qkv, C),
                       .v = clf_ptr_at(a->qkv, 2 * C),
                       .om = clf_ptr_at(m->perf_om, (size_t)l * (size_t)s->perf_m * HS),
                       .fq = a->pfq,
                       .fk = a->pfk,
                       .nd = a->pnd,
                       .cmax = m->perf_cmax,
                       .rmax = m->perf_rmax,
                       .y_stride = C,
                       .q_stride = QKV,
                       .kv_stride = QKV,
                       .B = B,
                       .NH = NH,
                       .T = T,
                       .S = S,
                       .HS = HS,
                       .m = (size_t)s->perf_m,
                       .causal = !enc && s->causal};
    if (enc) { /* the source's padding */
        p.keep = mi_at(m->src_keep, 0);
        p.keep_stride = T;
    }
    if (cache) { /* keys and values from the caches [B, NH, Tmax, HS] */
        p.k = mi_at(a->kcache, 0);
        p.v = mi_at(a->vcache, 0);
        p.kv_stride = HS;
        p.kv_head_stride = Tmax * HS;
        p.kv_batch_stride = NH * Tmax * HS;
    }
    return p;
}

/* Node n's self-attention: in [B*T, C] -> out [B*T, C] = resid +
 * dropout(attention's projection) (proj_residual; with MI_PASS_ATTN_ONLY
 * the attention alone). Encoder blocks attend in both directions over the
 * kept source positions; decoder blocks causally. */
static clf_status attn_fwd(clf_model *m, const mi_node *n, const mi_pass *ps, clf_error *err)
{
    const mi_spec *s = &m->s;
    const int l = n->layer, train = (ps->flags & MI_PASS_TRAIN) != 0;
    const int cache = (ps->flags & MI_PASS_CACHE) != 0;
    mi_block_a *a = &m->ba[l];
    const size_t pos0 = n->stk->src ? 0 : (size_t)ps->pos0;
    const size_t B = (size_t)ps->B, T = (size_t)(n->stk->src ? ps->S : ps->T), C = (size_t)s->C;
    const size_t NH = (size_t)s->NH, HS = (size_t)s->HS, Tmax = (size_t)s->Tmax;
    clf_ptr qkv = a->qkv, atty = a->atty;
    mi_linear L[MI_NODE_LINEARS]; /* q, k, v; the output projection */
    mi_node_linears(m, n, ps, L);
    clf_status st;

    if (cache && norm_qkv_attn_fwd(m, n, ps, &L[0], pos0 + T, &st, err))
        return st != CLF_OK || (ps->flags & MI_PASS_ATTN_ONLY)
                   ? st
                   : proj_residual(m, n, &L[1], MI_SITE_ATTN_OUT, train, err);
    if ((st = first_linear_fwd(m, ps, &L[0], err)) != CLF_OK)
        return st;
    /* q, k and v: heads of the qkv rows, read in place */
    const size_t QKV = mi_qkv_cols(s), NKV = (size_t)s->NKV;
    const clf_heads hq = {qkv, s->act16, B, T, NH, HS, QKV};
    const clf_heads hk = {clf_ptr_at(qkv, C), s->act16, B, T, NKV, HS, QKV};
    const clf_heads hv = {clf_ptr_at(qkv, C + NKV * HS), s->act16, B, T, NKV, HS, QKV};
    if (s->pos == MI_POS_ROPE &&
        ((st = clf_op_rope_t(m->rt, &hq, pos0, mi_doc_pos(m, n->stk->src), &s->rope, 0, err)) !=
             CLF_OK ||
         (st = clf_op_rope_t(m->rt, &hk, pos0, mi_doc_pos(m, n->stk->src), &s->rope, 0, err)) !=
             CLF_OK))
        return st;
    const size_t S = cache ? pos0 + T : T;
    /* one new position (and no pattern or features needing the cache
     * first): the decode kernel stores its key and value as it reads them */
    const int fresh = cache && T == 1 && s->perf_m == 0 && !s->sp_bs;
    if (cache && !fresh &&
        /* new keys and values go straight from the qkv rows into the caches */
        (st = clf_op_kv_store(m->rt, mi_at(a->kcache, 0), mi_at(a->vcache, 0), &hk, &hv, Tmax, pos0,
                              err)) != CLF_OK)
        return st;
    if (s->perf_m > 0) { /* performer: through random features, prefix sums */
        const clf_performer pf = mi_perf_desc(m, l, B, T, S, cache);
        if ((st = clf_op_performer_forward(m->rt, &pf, err)) != CLF_OK)
            return st;
    } else if (cache && T == 1) {
        /* one new position: flash-decoding over the cache */
        clf_attn_decode ad = {.out = atty,
                              .q = qkv,
                              .q_stride = QKV,
                              .kcache = mi_at(a->kcache, 0),
                              .vcache = mi_at(a->vcache, 0),
                              .kv_heads = NKV,
                              .scratch = m->decode_part, /* splits: the device's choice */
                              .B = B,
                              .NH = NH,
                              .HS = HS,
                              .Tmax = Tmax,
                              .L = S,
                              .scale = 1.0f / sqrtf((float)HS),
                              .window = (size_t)s->window,
                              .alibi = s->pos == MI_POS_ALIBI,
                              .rb = m->rel_rb,
                              .qr = m->rel_qr,
                              .rel_k = (size_t)s->relk};
        if (fresh) {
            ad.kn = hk.x;
            ad.vn = hv.x;
            ad.n_stride = QKV;
        }
        if (s->sp_bs) { /* sparse patterns: this position's keys as a keep mask */
            const clf_attn_fused sf = mi_attn_self(m, l, B, 1, 0);
            ad.keep = m->sp_keep;
            ad.keep_stride = Tmax;
            ad.window = 0;
            if ((st = clf_op_sparse_keep(m->rt, m->sp_keep, Tmax, B, S, &sf, err)) != CLF_OK)
                return st;
        }
        if ((st = mi_rel_table(m, n->stk, 1, S, &ad.rb_w, err)) != CLF_OK ||
            (st = mi_rel_qr(m, l, &hq, &ad.qr_w, err)) != CLF_OK ||
            (st = clf_op_attn_decode(m->rt, &ad, err)) != CLF_OK)
            return st;
    } else {
        clf_attn_fused f = mi_attn_self(m, l, B, T, train);
        if (cache) {
            f.S = S;
            attn_desc_cache(&f, a->kcache, a->vcache, Tmax);
        }
        f.rb = m->rel_rb;
        f.qr = m->rel_qr;
        f.rel_k = (size_t)s->relk;
        if (s->lin_k > 0 && m->bp[l].is_enc && (st = mi_lin_project(m, l, B, T, err)) != CLF_OK)
            return st;
        if ((st = mi_rel_table(m, n->stk, T, f.S, &f.rb_w, err)) != CLF_OK ||
            (st = mi_rel_qr(m, l, &hq, &f.qr_w, err)) != CLF_OK ||
            (st = clf_op_attn_fused_forward(m->rt, &f, err)) != CLF_OK)
            return st;
        if (m->probe.active && m->probe.layer == l && !m->probe.cross &&
            (st = mi_probe_attention(m, &f, err)) != CLF_OK)
            return st;
    }
    if (ps->flags & MI_PASS_ATTN_ONLY)
        return CLF_OK;
    return proj_residual(m, n, &L[1], MI_SITE_ATTN_OUT, train, err);
}

/* Node n's cross-attention: queries from in [B*T, C], keys and values from
 * the encoder's output mem [B*S, C] (projected here; with MI_PASS_CACHE,
 * the cross caches mi_encode filled), masked by the source keep mask ->
 * out [B*T, C] = resid + dropout(projection). */
static clf_status cross_fwd(clf_model *m, const mi_node *n, const mi_pass *ps, clf_error *err)
{
    const mi_spec *s = &m->s;
    const int l = n->layer, train = (ps->flags & MI_PASS_TRAIN) != 0;
    const int cache = (ps->flags & MI_PASS_CACHE) != 0;
    mi_block_a *a = &m->ba[l];
    const size_t B = (size_t)ps->B, T = (size_t)ps->T, S = (size_t)ps->S;
    const size_t NH = (size_t)s->NH, HS = (size_t)s->HS;
    clf_ptr q = a->xq, atty = a->xatty;
    clf_ptr keep = mi_at(m->src_keep, 0);
    mi_linear L[MI_NODE_LINEARS]; /* q; k and v; the output projection */
    mi_node_linears(m, n, ps, L);
    clf_status st;

    if ((st = linear_fwd(m, &L[0], NULL, err)) != CLF_OK)
        return st;
    if (!cache && (st = linear_fwd(m, &L[1], NULL, err)) != CLF_OK)
        return st;
    if (cache && T == 1) {
        clf_attn_decode ad = {.out = atty,
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
        if (m->probe.active && m->probe.layer == l && m->probe.cross &&
            (st = mi_probe_attention(m, &f, err)) != CLF_OK)
            return st;
    }
    return proj_residual(m, n, &L[2], MI_SITE_CROSS_OUT, train, err);
}

/* Node n's feed-forward: in [BT, C] -> out [BT, C] = resid +
 * dropout(ffn(in)); the hidden activations stored as a->fch_t. */
static clf_status ffn_fwd(clf_model *m, const mi_node *n, const mi_pass *ps, clf_error *err)
{
    const mi_spec *s = &m->s;
    const int l = n->layer, train = (ps->flags & MI_PASS_TRAIN) != 0;
    mi_block_a *a = &m->ba[l];
    const size_t H = (size_t)s->H;
    const size_t BT = mi_node_rows(n, (size_t)ps->B, (size_t)ps->T, (size_t)ps->S);
    clf_ptr fch = a->fch, act = a->fch_act;
    mi_linear L[MI_NODE_LINEARS]; /* fc; the output projection */
    mi_node_linears(m, n, ps, L);
    clf_status st;

    /* fc, its bias and (not SwiGLU) its activation in one pass: act gets
     * the activation; fch keeps what backward needs of the pre-activation:
     * where backward fuses the activation's derivative into a GEMM
     * (mi_ffn_fused_dact) and this pass trains, the derivative itself
     * (computed here once from the value the activation sees, instead of
     * again in backward: the same bits in float32), else the pre-activation
     * (a pass that does not train, which no backward reads, skips the
     * derivative's work) */
    clf_gemm_desc fc = mi_linear_gemm(m, &L[0], MI_GEMM_FWD);
    if (!s->swiglu && mi_gemm_act(s->act) != CLF_GEMM_ACT_NONE) {
        fc.epi = train && mi_ffn_keeps_dact(m) ? CLF_GEMM_EPI_ACT_DERIV : CLF_GEMM_EPI_ACT;
        fc.act = mi_gemm_act(s->act);
        fc.d = act;
        fc.ldd = H;
        fc.d_type = a->fch_t;
    }
    if (ps->pre_norm != NULL) /* the activation into act, which the projection reads */
        st = norm_linear_fwd(m, ps, &L[0], (unsigned)fc.act,
                             clf_tensor_at(act, a->fch_t, L[0].y.rows, H), err);
    else
        st = mi_gemm(m, &fc, err);
    if (st != CLF_OK)
        return st;
    if (s->swiglu && (st = clf_op_swiglu_forward(m->rt, act, fch, BT, H, err)) != CLF_OK)
        return st;
    if (train && s->p_ffn > 0 &&
        (st = clf_op_dropout_forward(m->rt, act, act, BT * H, s->p_ffn, m->state.seed,
                                     mi_dropout_stream(m, l, MI_SITE_FFN_H), err)) != CLF_OK)
        return st;
    return proj_residual(m, n, &L[1], MI_SITE_FFN_OUT, train, err);
}

/* ---- the embedding node and the stacks' values ------------------------------------ */

clf_ptr mi_stack_out(const clf_model *m, const mi_stack *st) { return m->vals[st->out].p; }

/* A stack's embeddings over B x T rows of its tokens at positions pos0...:
 * embeddings (+ positions, their norm, dropout) into x0. */
static clf_status embed_fwd(clf_model *m, const mi_stack *stk, size_t B, size_t T, int pos0,
                            int train, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t C = (size_t)s->C, BT = B * T;
    clf_ptr x0 = stk->x0;
    /* with an embedding norm, embeddings + positions go to xe, normed into x0 */
    clf_ptr xe = s->emb_norm != MI_NORM_NONE ? stk->xe : x0;
    clf_ptr tokens = stk->src ? mi_at(m->src, 0) : mi_at(m->tokens, 0);
    clf_status st;
    const clf_embed_args e = {.tokens = tokens,
                              .wte = mi_par(m, stk->wte),
                              .wpe = mi_par(m, stk->wpe),
                              .B = B,
                              .T = T,
                              .C = C,
                              .pos0 = (size_t)pos0,
                              .pos = mi_doc_pos(m, stk->src),
                              .scale = s->emb_scale,
                              .out = xe};
    if ((st = clf_op_embed_forward(m->rt, &e, err)) != CLF_OK)
        return st;
    if (s->pos == MI_POS_SINUSOIDAL &&
        (st = clf_op_sinusoid_add(m->rt, xe, B, T, C, (size_t)pos0, mi_doc_pos(m, stk->src),
                                  err)) != CLF_OK)
        return st;
    if (s->emb_norm != MI_NORM_NONE &&
        (st = norm_fwd(m, &(mi_norm){s->emb_norm, &stk->lne, &stk->lne_a},
                       clf_tensor_at(xe, CLF_DT_F32, BT, C), err)) != CLF_OK)
        return st;
    if (train && s->p_emb > 0 &&
        (st = clf_op_dropout_forward(m->rt, x0, x0, BT * C, s->p_emb, m->state.seed,
                                     mi_dropout_stream(m, stk->drop_layer, 0), err)) != CLF_OK)
        return st;
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
    const clf_xent_args x = {.losses = m->losses,
                             .dlogits = dlogits,
                             .logits = logits,
                             .targets = mi_at(m->targets, 0),
                             .grad_mul = gmul,
                             .R = R,
                             .V = N,
                             .label_smoothing = m->optim.label_smoothing,
                             .grad_scale = gs,
                             .ignore_index = CLF_MODEL_IGNORE_INDEX};
    if ((st = clf_op_cross_entropy(m->rt, &x, err)) != CLF_OK)
        return st;
    return clf_op_mean(m->rt, m->scalars, m->losses, R, m->red, err);
}

/* The head node over the last stack's output: the mean pool (an encoder
 * pooling by mean; an embedding model stops there), the head's product (the
 * LM head, or the classifier over the pooled vectors or each sequence's
 * first position), and the loss over the batch's targets. */
static clf_status head_fwd(clf_model *m, const mi_node *n, const mi_pass *ps, clf_error *err)
{
    const mi_spec *s = &m->s;
    const int train = (ps->flags & MI_PASS_TRAIN) != 0;
    mi_linear L[MI_NODE_LINEARS];
    const int k = mi_node_linears(m, n, ps, L);
    clf_status st;
    if (s->kind == MI_KIND_ENCODER && s->pool == MI_POOL_MEAN &&
        (st = clf_op_mean_pool_forward(m->rt, m->pooled, m->vals[n->in].p, mi_at(m->src_keep, 0),
                                       (size_t)ps->B, (size_t)ps->S, (size_t)s->C, err)) != CLF_OK)
        return st;
    if (k == 0)
        return CLF_OK;
    if ((st = first_linear_fwd(m, ps, &L[0], err)) != CLF_OK)
        return st;
    if ((ps->flags & MI_PASS_LAST) || !m->has_targets)
        return CLF_OK;
    return loss_fwd(m, L[0].y.rows, L[0].y.cols, train, err);
}

clf_status mi_node_forward(clf_model *m, const mi_node *n, const mi_pass *ps, clf_error *err)
{
    const int train = (ps->flags & MI_PASS_TRAIN) != 0;
    const size_t B = (size_t)ps->B, T = (size_t)ps->T, S = (size_t)ps->S;
    switch (n->kind) {
        case MI_NODE_EMBED:
            /* the source side: S rows per sequence, positions from 0 */
            return n->stk->src ? embed_fwd(m, n->stk, B, S, 0, train, err)
                               : embed_fwd(m, n->stk, B, T, ps->pos0, train, err);
        case MI_NODE_NORM:
            return norm_fwd(m, &n->norm, mi_val(m, n->in, mi_node_rows(n, B, T, S)), err);
        case MI_NODE_ATTN: return attn_fwd(m, n, ps, err);
        case MI_NODE_CROSS: return cross_fwd(m, n, ps, err);
        case MI_NODE_FFN: return ffn_fwd(m, n, ps, err);
        default: return head_fwd(m, n, ps, err);
    }
}

clf_status mi_forward(clf_model *m, const mi_pass *pass, clf_error *err)
{
    const int cache = (pass->flags & MI_PASS_CACHE) != 0;
    mi_pass p = *pass;
    /* cached decoding attends over the source mi_encode cached */
    p.S = cache ? m->enc_S : m->cur_S;
    clf_status st = mi_weights_sync(m, err);
    if (st == CLF_OK)
        st = mi_perf_sync(m, err);
    for (int i = 0; i < m->n_nodes && st == CLF_OK; i++) {
        if (cache && m->nodes[i].stk->src) /* the encoder ran once, in mi_encode */
            continue;
        if (norm_fuses(m, i, &p)) { /* node i + 1 computes it */
            p.pre_norm = &m->nodes[i];
            continue;
        }
        st = mi_node_forward(m, &m->nodes[i], &p, err);
        p.pre_norm = NULL;
    }
    return st;
}

clf_status mi_encode(clf_model *m, int Bi, int Si, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t B = (size_t)Bi, S = (size_t)Si, C = (size_t)s->C, NH = (size_t)s->NH;
    const size_t HS = (size_t)s->HS, Smax = (size_t)s->Smax;
    clf_ptr scratch = m->qkv;
    clf_status st;
    const mi_pass p = {.B = Bi, .S = Si};
    if ((st = mi_perf_sync(m, err)) != CLF_OK)
        return st;
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].stk->src && m->nodes[i].kind != MI_NODE_HEAD &&
            (st = mi_node_forward(m, &m->nodes[i], &p, err)) != CLF_OK)
            return st;
    for (int i = 0; i < m->n_nodes; i++) {
        const mi_node *n = &m->nodes[i];
        if (n->kind != MI_NODE_CROSS)
            continue;
        const mi_block_a *a = &m->ba[n->layer];
        mi_linear L[MI_NODE_LINEARS]; /* q; k and v, projected here into the scratch */
        mi_node_linears(m, n, &p, L);
        L[1].y = clf_tensor_at(scratch, CLF_DT_F32, B * S, 2 * C);
        /* keys and values: heads of the scratch's rows */
        const clf_heads hk = {scratch, CLF_DT_F32, B, S, NH, HS, 2 * C};
        clf_heads hv = hk;
        hv.x = clf_ptr_at(scratch, C);
        if ((st = linear_fwd(m, &L[1], NULL, err)) != CLF_OK ||
            (st = clf_op_kv_store(m->rt, mi_at(a->xkcache, 0), mi_at(a->xvcache, 0), &hk, &hv, Smax,
                                  0, err)) != CLF_OK)
            return st;
    }
    return CLF_OK;
}
