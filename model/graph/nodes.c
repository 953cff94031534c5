/*
 * nodes.c - the model as data: the node list built from the spec, the
 * values it passes, the backward's gradient routing, and the GEMM scratch
 * the nodes' products need.
 *
 * Design: a block is written once, here, as the sublayer nodes it is made
 * of; forward.c and backward.c only know what each kind of node computes.
 * Pre-norm:  ln1 = norm(x), res1 = x + attn(ln1),
 *            [lnx = norm(res1), resx = res1 + cross(lnx),]
 *            ln2 = norm(mid), res2 = mid + ffn(ln2): the block's output.
 * Post-norm: res1 = x + attn(x), ln1 = norm(res1),
 *            [resx = ln1 + cross(ln1), lnx = norm(resx),]
 *            res2 = mid + ffn(mid), ln2 = norm(res2): the block's output.
 * The routing pass walks the list in reverse, as backward will, and gives
 * every value a gradient slot: a residual's gradient is its sum's (the
 * same slot, nothing to copy); a sublayer's input whose gradient nothing
 * else feeds gets the other slot, overwritten; a value that is both a
 * sublayer's input and its residual (post-norm) gets its gradient added in
 * place; a norm's input adds into the slot its residual use already holds.
 * So backward needs two [rows, C] slots, plus one for the encoder's output
 * that every cross-attention adds into.
 */
#include <stdlib.h>
#include <string.h>

#include "model/graph/model_internal.h"

/* ---- building the list ------------------------------------------------------ */

typedef struct builder {
    clf_model *m;
    int cap_nodes;
    clf_error *err;
    clf_status st; /* the first failure; later calls do nothing */
} builder;

/* A new value: [rows of stk, C] stored as t, in the room named by room. */
static int add_val(builder *b, const mi_stack *stk, clf_ptr *room, clf_dtype t)
{
    clf_model *m = b->m;
    if (b->st != CLF_OK)
        return MI_NOVAL;
    if (m->n_vals == m->cap_vals) {
        int cap = m->cap_vals ? 2 * m->cap_vals : 64;
        clf_tensor *v = realloc(m->vals, (size_t)cap * sizeof *v);
        if (v != NULL)
            m->vals = v;
        clf_ptr **r = v != NULL ? realloc(m->val_room, (size_t)cap * sizeof *r) : NULL;
        if (r == NULL) {
            b->st = clf_error_set(b->err, CLF_ERR_MEMORY, "out of host memory for the graph");
            return MI_NOVAL;
        }
        m->val_room = r;
        m->cap_vals = cap;
    }
    const size_t rows = stk->src ? m->s.rows_src : m->s.rows_tgt;
    m->vals[m->n_vals] = clf_tensor_at(*room, t, rows, (size_t)m->s.C);
    m->val_room[m->n_vals] = room;
    return m->n_vals++;
}

static mi_node *add_node(builder *b, int kind, int layer, const mi_stack *stk)
{
    clf_model *m = b->m;
    if (b->st != CLF_OK)
        return NULL;
    if (m->n_nodes == b->cap_nodes) {
        int cap = b->cap_nodes ? 2 * b->cap_nodes : 64;
        mi_node *n = realloc(m->nodes, (size_t)cap * sizeof *n);
        if (n == NULL) {
            b->st = clf_error_set(b->err, CLF_ERR_MEMORY, "out of host memory for the graph");
            return NULL;
        }
        m->nodes = n;
        b->cap_nodes = cap;
    }
    mi_node *n = &m->nodes[m->n_nodes++];
    *n = (mi_node){.kind = kind,
                   .layer = layer,
                   .stk = stk,
                   .in = MI_NOVAL,
                   .out = MI_NOVAL,
                   .resid = MI_NOVAL,
                   .mem = MI_NOVAL};
    return n;
}

/* out = norm(in): its output is a new value, stored as the norm stores it. */
static int norm_node(builder *b, int layer, const mi_stack *stk, int type, const mi_norm_p *p,
                     mi_norm_a *a, int in)
{
    mi_node *n = add_node(b, MI_NODE_NORM, layer, stk);
    if (n == NULL)
        return MI_NOVAL;
    n->norm = (mi_norm){type, p, a};
    n->in = in;
    n->out = add_val(b, stk, &a->out, a->t);
    return n->out;
}

/* out (float32, the room at `out`) = resid + sublayer(in). */
static int sub_node(builder *b, int kind, int layer, const mi_stack *stk, int in, int resid,
                    clf_ptr *out, int mem)
{
    mi_node *n = add_node(b, kind, layer, stk);
    if (n == NULL)
        return MI_NOVAL;
    n->in = in;
    n->resid = resid;
    n->mem = mem;
    n->out = add_val(b, stk, out, CLF_DT_F32);
    return n->out;
}

/* Block l's nodes over the value x; returns its output. */
static int block_nodes(builder *b, int l, const mi_stack *stk, int x, int mem)
{
    clf_model *m = b->m;
    const mi_spec *s = &m->s;
    mi_block_p *p = &m->bp[l];
    mi_block_a *a = &m->ba[l];
    int mid;
    p->node0 = m->n_nodes;
    if (!s->norm_post) {
        int ln1 = norm_node(b, l, stk, s->norm, &p->ln1, &a->ln1, x);
        mid = sub_node(b, MI_NODE_ATTN, l, stk, ln1, x, &a->res1, MI_NOVAL);
        if (p->has_cross) {
            int lnx = norm_node(b, l, stk, s->norm, &p->lnx, &a->lnx, mid);
            mid = sub_node(b, MI_NODE_CROSS, l, stk, lnx, mid, &a->resx, mem);
        }
        int ln2 = norm_node(b, l, stk, s->norm, &p->ln2, &a->ln2, mid);
        x = sub_node(b, MI_NODE_FFN, l, stk, ln2, mid, &a->res2, MI_NOVAL);
    } else {
        mid = sub_node(b, MI_NODE_ATTN, l, stk, x, x, &a->res1, MI_NOVAL);
        mid = norm_node(b, l, stk, s->norm, &p->ln1, &a->ln1, mid);
        if (p->has_cross) {
            mid = sub_node(b, MI_NODE_CROSS, l, stk, mid, mid, &a->resx, mem);
            mid = norm_node(b, l, stk, s->norm, &p->lnx, &a->lnx, mid);
        }
        x = sub_node(b, MI_NODE_FFN, l, stk, mid, mid, &a->res2, MI_NOVAL);
        x = norm_node(b, l, stk, s->norm, &p->ln2, &a->ln2, x);
    }
    p->node1 = m->n_nodes;
    return x;
}

/* A stack's nodes: its embedding, its blocks, its final norm. mem: the
 * value its cross-attention reads. */
static void stack_nodes(builder *b, mi_stack *stk, int mem)
{
    clf_model *m = b->m;
    mi_node *e = add_node(b, MI_NODE_EMBED, -1, stk);
    if (e == NULL)
        return;
    /* with an embedding norm, the norm writes the blocks' input */
    clf_ptr *x0 = m->s.emb_norm != MI_NORM_NONE ? &stk->lne_a.out : &stk->x0;
    int x = e->out = add_val(b, stk, x0, CLF_DT_F32);
    for (int l = stk->first; l < stk->first + stk->n; l++)
        x = block_nodes(b, l, stk, x, mem);
    if (m->s.final_norm != MI_NORM_NONE)
        x = norm_node(b, -1, stk, m->s.final_norm, &stk->lnf, &stk->lnf_a, x);
    stk->out = x;
}

/* ---- backward routing -------------------------------------------------------------- */

static int other(int g) { return g == MI_GRAD_A ? MI_GRAD_B : MI_GRAD_A; }

/* The slot of d(in) for a node whose d(out) is in g_out: shared with a
 * residual that already holds part of it (add), else the other slot. */
static void route_in(mi_node *n, int *slot)
{
    if (slot[n->in] >= 0) {
        n->g_in = slot[n->in];
        n->acc_in = 1;
    } else {
        n->g_in = other(n->g_out);
        n->acc_in = 0;
        slot[n->in] = n->g_in;
    }
}

static clf_status route(clf_model *m, clf_error *err)
{
    int *slot = malloc((size_t)(m->n_vals > 0 ? m->n_vals : 1) * sizeof *slot);
    if (slot == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory for the graph");
    for (int v = 0; v < m->n_vals; v++)
        slot[v] = -1;
    for (int i = m->n_nodes - 1; i >= 0; i--) {
        mi_node *n = &m->nodes[i];
        if (n->kind == MI_NODE_HEAD) {
            n->g_in = MI_GRAD_A;
            slot[n->in] = MI_GRAD_A;
            continue;
        }
        n->g_out = slot[n->out];
        if (n->g_out < 0) { /* an encoder's output no cross-attention reads */
            n->g_out = MI_GRAD_MEM;
            n->zero_out = 1;
        }
        if (n->kind == MI_NODE_EMBED) {
            n->g_in = other(n->g_out);
            continue;
        }
        if (n->kind != MI_NODE_NORM && n->resid != n->in)
            slot[n->resid] = n->g_out; /* x + f(.): x's gradient is the sum's */
        if (n->kind != MI_NODE_NORM && n->resid == n->in) {
            n->g_in = n->g_out; /* x + f(x): f's input gradient adds in place */
            n->acc_in = 1;
            slot[n->in] = n->g_out;
        } else {
            route_in(n, slot);
        }
        if (n->kind == MI_NODE_CROSS) {
            n->acc_mem = slot[n->mem] >= 0;
            n->g_mem = slot[n->mem] = MI_GRAD_MEM;
        }
    }
    free(slot);
    return CLF_OK;
}

/* How each activation is stored (train.precision): a pre-norm block's norm
 * outputs feed only the projections after them, post-norm ones are the
 * residual stream; the FFN's hidden activations and their gradient where
 * only GEMMs touch them (mi_ffn_fused_dact). */
static void storage_types(clf_model *m)
{
    const mi_spec *s = &m->s;
    const clf_dtype tn = s->norm_post ? CLF_DT_F32 : s->act16;
    const clf_dtype th = mi_ffn_fused_dact(s) ? s->act16 : CLF_DT_F32;
    for (int l = 0; l < s->L; l++) {
        mi_block_a *a = &m->ba[l];
        a->ln1.t = a->lnx.t = a->ln2.t = tn;
        a->fch_t = th;
    }
    m->enc.lnf_a.t = m->enc.lne_a.t = m->dec.lnf_a.t = m->dec.lne_a.t = CLF_DT_F32;
    m->dH2_t = th;
}

clf_status mi_nodes_build(clf_model *m, clf_error *err)
{
    const mi_spec *s = &m->s;
    storage_types(m);
    builder b = {.m = m, .err = err, .st = CLF_OK};
    int mem = MI_NOVAL;
    if (s->kind != MI_KIND_DECODER) {
        stack_nodes(&b, &m->enc, MI_NOVAL);
        mem = m->enc.out;
    }
    if (s->kind != MI_KIND_ENCODER)
        stack_nodes(&b, &m->dec, mem);
    const mi_stack *last = s->kind == MI_KIND_ENCODER ? &m->enc : &m->dec;
    mi_node *h = add_node(&b, MI_NODE_HEAD, -1, last);
    if (h != NULL)
        h->in = last->out;
    if (b.st != CLF_OK)
        return b.st;
    return (m->flags & CLF_MODEL_TRAIN) ? route(m, err) : CLF_OK;
}

size_t mi_node_rows(const mi_node *n, size_t B, size_t T, size_t S)
{
    return B * (n->stk->src ? S : T);
}

/* ---- the nodes' linear layers ------------------------------------------------------ */

static mi_linear lin(mi_lin_p p, clf_tensor x, clf_tensor y)
{
    return (mi_linear){.p = p, .x = x, .y = y};
}

/* The head's product: the LM head (with MI_PASS_LAST the last position of
 * each sequence only), or the classifier over the pooled vectors or the
 * first position of each sequence. */
static int head_linears(const clf_model *m, const mi_node *n, const mi_pass *ps, mi_linear *L)
{
    const mi_spec *s = &m->s;
    const size_t C = (size_t)s->C, B = (size_t)ps->B, T = (size_t)ps->T, S = (size_t)ps->S;
    const size_t V = (size_t)s->V, NL = (size_t)s->NL;
    if (s->head == MI_HEAD_NONE)
        return 0;
    if (s->head == MI_HEAD_LM) {
        const int last = (ps->flags & MI_PASS_LAST) != 0;
        const clf_tensor in = mi_val(m, n->in, B * T);
        const clf_tensor din = clf_tensor_at(m->grad_slot[n->g_in], CLF_DT_F32, B * T, C);
        const clf_tensor logits = clf_tensor_at(m->logits, CLF_DT_F32, last ? B : B * T, V);
        L[0] = lin((mi_lin_p){m->lm_head, MI_NONE}, last ? clf_tensor_rows(in, T - 1, B, T) : in,
                   logits);
        L[0].dx = din;
        L[0].dy = logits;
        return 1;
    }
    const int mean = s->pool == MI_POOL_MEAN;
    const clf_tensor logits = clf_tensor_at(m->logits, CLF_DT_F32, B, NL);
    if (mean) {
        L[0] = lin(m->cls, clf_tensor_at(m->pooled, CLF_DT_F32, B, C), logits);
        L[0].dx = clf_tensor_at(m->dC3, CLF_DT_F32, B, C);
    } else { /* each sequence's first position */
        const clf_tensor din = clf_tensor_at(m->grad_slot[n->g_in], CLF_DT_F32, B * S, C);
        L[0] = lin(m->cls, clf_tensor_rows(mi_val(m, n->in, B * S), 0, B, S), logits);
        L[0].dx = clf_tensor_rows(din, 0, B, S);
    }
    L[0].dy = logits;
    return 1;
}

int mi_node_linears(const clf_model *m, const mi_node *n, const mi_pass *ps, mi_linear *L)
{
    const mi_spec *s = &m->s;
    const size_t C = (size_t)s->C, H = (size_t)s->H, F = (size_t)s->fc_rows, QKV = mi_qkv_cols(s);
    const size_t B = (size_t)ps->B, R = mi_node_rows(n, B, (size_t)ps->T, (size_t)ps->S);
    const clf_dtype t = s->act16, f32 = CLF_DT_F32;
    if (n->kind == MI_NODE_HEAD)
        return head_linears(m, n, ps, L);
    if (n->kind == MI_NODE_EMBED || n->kind == MI_NODE_NORM)
        return 0;
    const mi_block_a *a = &m->ba[n->layer];
    const mi_block_p *bp = &m->bp[n->layer];
    const clf_tensor in = mi_val(m, n->in, R), out = mi_val(m, n->out, R);
    const clf_tensor din = clf_tensor_at(m->grad_slot[n->g_in], f32, R, C);
    /* the output projection's gradient: after the residual dropout, in dC2 */
    const clf_tensor dproj =
        clf_tensor_at(s->p_resid > 0 ? m->dC2 : m->grad_slot[n->g_out], f32, R, C);
    /* the attention output's gradient, stored as the attention stores it */
    const clf_tensor datt = clf_tensor_room(m->dC3, t, R, C);
    const float acc = (float)n->acc_in;
    switch (n->kind) {
        case MI_NODE_ATTN:
            L[0] = lin(bp->attn.qkv, in, clf_tensor_at(a->qkv, t, R, QKV));
            L[0].dx = din, L[0].beta = acc, L[0].dy = clf_tensor_at(m->dqkv, t, R, QKV);
            L[1] = lin(bp->attn.proj, clf_tensor_at(a->atty, t, R, C), out);
            L[1].dx = datt, L[1].dy = dproj;
            return 2;
        case MI_NODE_CROSS: {
            const size_t BS = B * (size_t)ps->S;
            /* dq [R, C] then dkv [BS, 2C] in the dqkv scratch (R + 2 BS <= 3 max rows) */
            L[0] = lin(bp->cross.q, in, clf_tensor_at(a->xq, t, R, C));
            L[0].dx = din, L[0].beta = acc, L[0].dy = clf_tensor_at(m->dqkv, t, R, C);
            L[1] = lin(bp->cross.kv, mi_val(m, n->mem, BS), clf_tensor_at(a->xkv, t, BS, 2 * C));
            L[1].dx = clf_tensor_at(m->grad_slot[n->g_mem], f32, BS, C);
            L[1].beta = (float)n->acc_mem;
            L[1].dy = clf_tensor_at(clf_ptr_at(m->dqkv, R * C), t, BS, 2 * C);
            L[2] = lin(bp->cross.proj, clf_tensor_at(a->xatty, t, R, C), out);
            L[2].dx = datt, L[2].dy = dproj;
            return 3;
        }
        default: { /* MI_NODE_FFN */
            const clf_tensor fch = clf_tensor_at(a->fch, a->fch_t, R, F);
            const clf_tensor dfch = clf_tensor_at(m->dH2, m->dH2_t, R, F);
            L[0] = lin(bp->ffn.fc, in, fch);
            L[0].dx = din, L[0].beta = acc, L[0].dy = dfch;
            L[1] = lin(bp->ffn.proj, clf_tensor_at(a->fch_act, a->fch_t, R, H), out);
            L[1].dy = dproj;
            /* fused: dfch = (d W) act'(pre-activation) in one pass (fch holds
             * act' itself where mi_ffn_keeps_dact); else d(act) into dH1 */
            if (mi_ffn_fused_dact(s)) {
                L[1].dx = dfch;
                L[1].act = mi_gemm_act(s->act);
                L[1].act_in = fch;
            } else {
                L[1].dx = clf_tensor_at(m->dH1, f32, R, H);
            }
            return 2;
        }
    }
}

clf_gemm_desc mi_linear_gemm(const clf_model *m, const mi_linear *L, int which)
{
    /* W [out, in] as the products read it (mi_wpar) */
    const clf_tensor W = clf_tensor_at(mi_wpar(m, L->p.w), m->s.act16, L->y.cols, L->x.cols);
    if (which == MI_GEMM_FWD)
        return (clf_gemm_desc){.trans_b = 1,
                               .m = L->x.rows,
                               .n = W.rows,
                               .k = W.cols,
                               .alpha = 1.0f,
                               .a = L->x.p,
                               .lda = L->x.ld,
                               .b = W.p,
                               .ldb = W.ld,
                               .c = L->y.p,
                               .ldc = L->y.ld,
                               .bias = L->p.b == MI_NONE ? mi_nullptr() : mi_par(m, L->p.b),
                               .a_type = L->x.t,
                               .b_type = W.t,
                               .c_type = L->y.t};
    if (which == MI_GEMM_DW)
        return (clf_gemm_desc){.trans_a = 1,
                               .m = W.rows,
                               .n = W.cols,
                               .k = L->dy.rows,
                               .alpha = 1.0f,
                               .a = L->dy.p,
                               .lda = L->dy.ld,
                               .b = L->x.p,
                               .ldb = L->x.ld,
                               .beta = 1.0f,
                               .c = mi_grad(m, L->p.w),
                               .ldc = W.cols,
                               .a_type = L->dy.t,
                               .b_type = L->x.t};
    const int act = L->act != CLF_GEMM_ACT_NONE, keeps = mi_ffn_keeps_dact(m);
    return (clf_gemm_desc){.m = L->dy.rows,
                           .n = W.cols,
                           .k = W.rows,
                           .alpha = 1.0f,
                           .a = L->dy.p,
                           .lda = L->dy.ld,
                           .b = W.p,
                           .ldb = W.ld,
                           .beta = L->beta,
                           .c = L->dx.p,
                           .ldc = L->dx.ld,
                           .epi = !act    ? CLF_GEMM_EPI_NONE
                                  : keeps ? CLF_GEMM_EPI_TIMES_D
                                          : CLF_GEMM_EPI_TIMES_DERIV,
                           .act = keeps ? CLF_GEMM_ACT_NONE : L->act,
                           .d = act ? L->act_in.p : mi_nullptr(),
                           .ldd = act ? L->act_in.ld : 0,
                           .a_type = L->dy.t,
                           .b_type = W.t,
                           .c_type = L->dx.t,
                           .d_type = act ? L->act_in.t : CLF_DT_F32};
}

/* ---- the GEMM scratch and planning -------------------------------------------------- */

static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

size_t mi_nodes_workspace(const clf_model *m)
{
    const mi_spec *s = &m->s;
    const int train = (m->flags & CLF_MODEL_TRAIN) != 0;
    /* the planned tokens as one sequence: every node's rows at their most;
     * a classifier's rows are sequences, at most B */
    const mi_pass tokens = {.B = 1, .T = (int)s->rows_tgt, .S = (int)s->rows_src};
    const mi_pass seqs = {.B = s->B, .T = s->Tmax, .S = s->Smax};
    size_t w = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const mi_node *n = &m->nodes[i];
        const int cls = n->kind == MI_NODE_HEAD && s->head == MI_HEAD_CLASSIFIER;
        mi_linear L[MI_NODE_LINEARS];
        const int k = mi_node_linears(m, n, cls ? &seqs : &tokens, L);
        for (int j = 0; j < k; j++)
            for (int which = MI_GEMM_FWD; which <= (train ? MI_GEMM_DX : MI_GEMM_FWD); which++) {
                const clf_gemm_desc d = mi_linear_gemm(m, &L[j], which);
                w = zmax(w, clf_gemm_workspace_estimate(d.trans_a, d.trans_b, d.m, d.n, d.k));
            }
    }
    return w;
}

static int same_shape(clf_tensor a, clf_tensor b) { return a.rows == b.rows && a.cols == b.cols; }

/* Whether L's tensors agree: y has x's rows; in training dx and dy have
 * x's and y's shapes, and act_in dx's. */
static int linear_agrees(const mi_linear *L, int train)
{
    if (L->x.rows != L->y.rows)
        return 0;
    if (!train)
        return 1;
    return same_shape(L->dx, L->x) && same_shape(L->dy, L->y) &&
           (L->act == CLF_GEMM_ACT_NONE || same_shape(L->act_in, L->dx));
}

clf_status mi_nodes_prepare(clf_model *m, const mi_pass *ps, clf_error *err)
{
    const int train = (m->flags & CLF_MODEL_TRAIN) != 0;
    clf_status st = CLF_OK;
    for (int i = 0; i < m->n_nodes && st == CLF_OK; i++) {
        mi_linear L[MI_NODE_LINEARS];
        const int k = mi_node_linears(m, &m->nodes[i], ps, L);
        for (int j = 0; j < k; j++)
            if (!linear_agrees(&L[j], train))
                return clf_error_set(err, CLF_ERR_ARG,
                                     "model graph: node %d's linear layer %d has tensors of "
                                     "different shapes (an error in the graph's builder)",
                                     i, j);
        for (int j = 0; j < k && st == CLF_OK; j++)
            for (int which = MI_GEMM_FWD; which <= (train ? MI_GEMM_DX : MI_GEMM_FWD); which++) {
                const clf_gemm_desc d = mi_linear_gemm(m, &L[j], which);
                if ((st = clf_gemm_prepare(m->rt, &d, err)) != CLF_OK)
                    break;
            }
    }
    return st;
}
