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

static int add_val(builder *b, clf_ptr p, clf_dtype t)
{
    clf_model *m = b->m;
    if (b->st != CLF_OK)
        return MI_NOVAL;
    if (m->n_vals == m->cap_vals) {
        int cap = m->cap_vals ? 2 * m->cap_vals : 64;
        mi_val *v = realloc(m->vals, (size_t)cap * sizeof *v);
        if (v == NULL) {
            b->st = clf_error_set(b->err, CLF_ERR_MEMORY, "out of host memory for the graph");
            return MI_NOVAL;
        }
        m->vals = v;
        m->cap_vals = cap;
    }
    m->vals[m->n_vals] = (mi_val){p, t};
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
    n->out = add_val(b, a->out, a->t);
    return n->out;
}

/* out (float32, the room at `out`) = resid + sublayer(in). */
static int sub_node(builder *b, int kind, int layer, const mi_stack *stk, int in, int resid,
                    clf_ptr out, int mem)
{
    mi_node *n = add_node(b, kind, layer, stk);
    if (n == NULL)
        return MI_NOVAL;
    n->in = in;
    n->resid = resid;
    n->mem = mem;
    n->out = add_val(b, out, CLF_DT_F32);
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
        mid = sub_node(b, MI_NODE_ATTN, l, stk, ln1, x, a->res1, MI_NOVAL);
        if (p->has_cross) {
            int lnx = norm_node(b, l, stk, s->norm, &p->lnx, &a->lnx, mid);
            mid = sub_node(b, MI_NODE_CROSS, l, stk, lnx, mid, a->resx, mem);
        }
        int ln2 = norm_node(b, l, stk, s->norm, &p->ln2, &a->ln2, mid);
        x = sub_node(b, MI_NODE_FFN, l, stk, ln2, mid, a->res2, MI_NOVAL);
    } else {
        mid = sub_node(b, MI_NODE_ATTN, l, stk, x, x, a->res1, MI_NOVAL);
        mid = norm_node(b, l, stk, s->norm, &p->ln1, &a->ln1, mid);
        if (p->has_cross) {
            mid = sub_node(b, MI_NODE_CROSS, l, stk, mid, mid, a->resx, mem);
            mid = norm_node(b, l, stk, s->norm, &p->lnx, &a->lnx, mid);
        }
        x = sub_node(b, MI_NODE_FFN, l, stk, mid, mid, a->res2, MI_NOVAL);
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
    int x = e->out = add_val(b, stk->x0, CLF_DT_F32);
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

clf_status mi_nodes_build(clf_model *m, clf_error *err)
{
    const mi_spec *s = &m->s;
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
    m->grad_slot[MI_GRAD_A] = m->dres;
    m->grad_slot[MI_GRAD_B] = m->dC1;
    m->grad_slot[MI_GRAD_MEM] = m->denc;
    return (m->flags & CLF_MODEL_TRAIN) ? route(m, err) : CLF_OK;
}

size_t mi_node_rows(const mi_node *n, size_t B, size_t T, size_t S)
{
    return B * (n->stk->src ? S : T);
}

/* ---- the GEMM scratch --------------------------------------------------------------- */

static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

/* The largest packing scratch of one linear layer's products: y = x W^T on
 * R rows, and in training dx = dy W and dW += dy^T x. */
static size_t linear_workspace(size_t R, size_t in, size_t out, int train)
{
    size_t w = clf_gemm_workspace_estimate(0, 1, R, out, in);
    if (train) {
        w = zmax(w, clf_gemm_workspace_estimate(0, 0, R, in, out));
        w = zmax(w, clf_gemm_workspace_estimate(1, 0, out, in, R));
    }
    return w;
}

size_t mi_nodes_workspace(const clf_model *m)
{
    const mi_spec *s = &m->s;
    const int train = (m->flags & CLF_MODEL_TRAIN) != 0;
    const size_t C = (size_t)s->C, H = (size_t)s->H, F = (size_t)s->fc_rows;
    size_t w = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const mi_node *n = &m->nodes[i];
        const size_t R = n->stk->src ? s->rows_src : s->rows_tgt;
        switch (n->kind) {
            case MI_NODE_ATTN:
                w = zmax(w, linear_workspace(R, C, 3 * C, train)); /* q, k, v */
                w = zmax(w, linear_workspace(R, C, C, train));     /* output */
                break;
            case MI_NODE_CROSS:
                w = zmax(w, linear_workspace(R, C, C, train));               /* q and output */
                w = zmax(w, linear_workspace(s->rows_src, C, 2 * C, train)); /* k, v */
                break;
            case MI_NODE_FFN:
                w = zmax(w, linear_workspace(R, C, F, train));
                w = zmax(w, linear_workspace(R, H, C, train));
                break;
            case MI_NODE_HEAD:
                if (s->head == MI_HEAD_LM)
                    w = zmax(w, linear_workspace(R, C, (size_t)s->V, train));
                else if (s->head == MI_HEAD_CLASSIFIER)
                    w = zmax(w, linear_workspace((size_t)s->B, C, (size_t)s->NL, train));
                break;
            default: break;
        }
    }
    return w;
}
