/*
 * arena.c - a model's device memory: the flat parameter buffers, the
 * activation arena planned by the tensors' lifetimes over the node list,
 * the batch, output and backward scratch, and the inference caches.
 *
 * Design (llm.c's malloc_and_point_activations, with lifetimes as in
 * ggml's allocator): every activation a node writes (its output value and
 * what it keeps for its backward) is a tensor with a lifetime on the
 * step's timeline: node i's forward at time i, its backward at 2N - 1 - i.
 * A tensor lives from its write to its last read; recomputation writes it
 * again later (block recomputation re-runs a block's nodes as its backward
 * begins, attention recomputation the attention node before its backward),
 * which splits its lifetime in two. Tensors whose lifetimes do not meet
 * share a room: inference keeps one block's activations at a time,
 * training keeps everything its backward reads, recomputation keeps a
 * block's output and what the block being differentiated needs. What
 * shares falls out of the lifetimes; no rule names blocks or modes.
 * Rooms and the other named tensors are then carved from one arena: each
 * at a 64-float (256-byte) aligned offset, in as few device allocations
 * as the device's largest allocation allows (one, unless the model is
 * larger than max_alloc).
 *
 * Not here: the parameter plan and create/destroy (build.c).
 */
#include <stdlib.h>
#include <string.h>

#include "model/graph/model_internal.h"
#include "model/ops/ops.h"

#define MI_ARENA_ALIGN 64

/* ---- buffers and carves --------------------------------------------------------- */

/* Request a buffer of n floats (or int32): created with a runtime, counted
 * without one. */
static clf_status abuf(clf_model *m, size_t *category, clf_buffer **dst, size_t n, clf_error *err)
{
    size_t bytes = (n ? n : 1) * sizeof(float);
    *dst = NULL;
    m->bytes += bytes;
    *category += bytes;
    if (m->rt == NULL)
        return CLF_OK;
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 64;
        clf_buffer **o = realloc(m->owned, (size_t)cap * sizeof *o);
        if (o == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
        m->owned = o;
        m->cap_owned = cap;
    }
    clf_status st = clf_buffer_create(m->rt, bytes, dst, err);
    if (st != CLF_OK)
        return st;
    m->owned[m->n_owned++] = *dst;
    return CLF_OK;
}

typedef struct mi_carve {
    clf_ptr *dst;
    size_t floats;
    int half; /* a tensor of 2-byte elements: its offset counts them */
} mi_carve;

/* Request n elements of type t (float32, or a 16-bit type: half the room). */
static clf_status carve_t(clf_model *m, clf_ptr *dst, size_t n, clf_dtype t, clf_error *err)
{
    *dst = mi_nullptr();
    const int half = t != CLF_DT_F32;
    if (half)
        n = (n + 1) / 2;
    if (m->n_carves == m->cap_carves) {
        int cap = m->cap_carves ? 2 * m->cap_carves : 128;
        mi_carve *c = realloc(m->carves, (size_t)cap * sizeof *c);
        if (c == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
        m->carves = c;
        m->cap_carves = cap;
    }
    m->carves[m->n_carves++] = (mi_carve){dst, n ? n : 1, half};
    return CLF_OK;
}

static clf_status carve(clf_model *m, clf_ptr *dst, size_t n, clf_error *err)
{
    return carve_t(m, dst, n, CLF_DT_F32, err);
}

static size_t align_up(size_t x)
{
    return (x + MI_ARENA_ALIGN - 1) / MI_ARENA_ALIGN * MI_ARENA_ALIGN;
}

/* Lay the requests out in chunks of at most `limit` floats, allocate each
 * chunk (abuf, zero-filled) and point the requests into it. */
static clf_status carve_commit(clf_model *m, clf_error *err)
{
    const size_t limit =
        m->rt != NULL ? (size_t)(clf_runtime_device(m->rt)->max_alloc / sizeof(float)) : SIZE_MAX;
    clf_status st = CLF_OK;
    int first = 0;
    while (first < m->n_carves && st == CLF_OK) {
        size_t used = 0;
        int last = first;
        for (; last < m->n_carves; last++) {
            size_t at = align_up(used);
            if (last > first && at + m->carves[last].floats > limit)
                break;
            m->carves[last].dst->off = at; /* the buffer comes below */
            used = at + m->carves[last].floats;
        }
        clf_buffer *chunk = NULL;
        if ((st = abuf(m, &m->mem.activations, &chunk, used, err)) != CLF_OK)
            break;
        /* zeros, not whatever the allocation held: planning times the
         * GEMM engines on these tensors before any step has written them */
        if (chunk != NULL &&
            (st = clf_buffer_fill(m->rt, chunk, 0, used * sizeof(float), 0, err)) != CLF_OK)
            break;
        m->arena_floats += used;
        for (int i = first; i < last; i++) {
            m->carves[i].dst->buf = chunk;
            if (m->carves[i].half)
                m->carves[i].dst->off *= 2;
        }
        first = last;
    }
    free(m->carves);
    m->carves = NULL;
    m->n_carves = m->cap_carves = 0;
    return st;
}

/* ---- the nodes' tensors and their lifetimes ---------------------------------------- */

/* A tensor a node writes, with up to two live intervals [lo, hi] on the
 * timeline (lo < 0: none); split: the time recomputation writes it again
 * (-1: never), which begins its second interval. */
typedef struct mi_tensor {
    clf_ptr *dst;
    size_t floats;
    clf_dtype t;
    int split;
    int lo[2], hi[2];
    int room;
} mi_tensor;

typedef struct tensor_set {
    mi_tensor *v;
    int n, cap;
    int *of_val; /* value id -> tensor */
} tensor_set;

static int add_tensor(tensor_set *ts, clf_ptr *dst, size_t n, clf_dtype t, int split)
{
    if (ts->n == ts->cap) {
        int cap = ts->cap ? 2 * ts->cap : 128;
        mi_tensor *v = realloc(ts->v, (size_t)cap * sizeof *v);
        if (v == NULL)
            return -1;
        ts->v = v;
        ts->cap = cap;
    }
    const size_t f = t != CLF_DT_F32 ? (n + 1) / 2 : n;
    ts->v[ts->n] = (mi_tensor){dst, f ? f : 1, t, split, {-1, -1}, {-1, -1}, -1};
    return ts->n++;
}

/* A read or write of tensor k at time t. */
static void touch(tensor_set *ts, int k, int t)
{
    if (k < 0)
        return;
    mi_tensor *x = &ts->v[k];
    const int i = x->split >= 0 && t >= x->split;
    x->lo[i] = x->lo[i] < 0 || t < x->lo[i] ? t : x->lo[i];
    x->hi[i] = t > x->hi[i] ? t : x->hi[i];
}

static int val_tensor(const tensor_set *ts, int v) { return v < 0 ? -1 : ts->of_val[v]; }

/* What node n keeps for its backward beside its output value, each with
 * its element count and storage: the GEMMs' and attention's activations,
 * the norms' statistics. */
static int node_kept(clf_model *m, const mi_node *n, mi_tensor *k)
{
    const mi_spec *s = &m->s;
    const size_t C = (size_t)s->C, NH = (size_t)s->NH;
    const size_t R = n->stk->src ? s->rows_src : s->rows_tgt;
    int c = 0;
#define KEEP(p, count, type) (k[c++] = (mi_tensor){.dst = (p), .floats = (count), .t = (type)})
    mi_norm_a *na = NULL;
    if (n->kind == MI_NODE_NORM)
        na = (mi_norm_a *)n->norm.a; /* the model's own: the node reads it const */
    if (n->kind == MI_NODE_EMBED && s->emb_norm != MI_NORM_NONE) {
        mi_stack *stk = n->stk->src ? &m->enc : &m->dec;
        KEEP(&stk->xe, R * C, CLF_DT_F32);
        na = &stk->lne_a;
    }
    if (na != NULL) {
        const int type = n->kind == MI_NODE_NORM ? n->norm.type : s->emb_norm;
        if (type == MI_NORM_LAYERNORM)
            KEEP(&na->mean, R, CLF_DT_F32);
        KEEP(&na->rstd, R, CLF_DT_F32);
    }
    if (n->kind == MI_NODE_ATTN || n->kind == MI_NODE_CROSS || n->kind == MI_NODE_FFN) {
        mi_block_a *a = &m->ba[n->layer];
        if (n->kind == MI_NODE_ATTN) {
            KEEP(&a->qkv, R * mi_qkv_cols(s), s->act16);
            KEEP(&a->lse, R * NH, CLF_DT_F32);
            KEEP(&a->atty, R * C, s->act16);
            if (s->lin_k > 0)
                KEEP(&a->lkv, (size_t)s->B * (size_t)s->lin_k * 2 * mi_kv_cols(s), s->act16);
            if (s->perf_m > 0) {
                KEEP(&a->pfq, R * NH * (size_t)s->perf_m, CLF_DT_F32);
                KEEP(&a->pfk, R * NH * (size_t)s->perf_m, CLF_DT_F32);
                KEEP(&a->pnd, R * NH * (size_t)(s->HS + 1), CLF_DT_F32);
            }
        } else if (n->kind == MI_NODE_CROSS) {
            KEEP(&a->xq, R * C, s->act16);
            KEEP(&a->xkv, s->rows_src * 2 * C, s->act16);
            KEEP(&a->xlse, R * NH, CLF_DT_F32);
            KEEP(&a->xatty, R * C, s->act16);
        } else {
            KEEP(&a->fch, R * (size_t)s->fc_rows, a->fch_t);
            KEEP(&a->fch_act, R * (size_t)s->H, a->fch_t);
        }
    }
#undef KEEP
    return c;
}

/* The time recomputation writes node i's tensors again (-1: never): as
 * the backward of its block begins (block recomputation; not the stack's
 * last block, which the forward left in place), or just before its own
 * backward (attention recomputation: the attention's kept tensors). */
static int recompute_time(const clf_model *m, int i, int kept)
{
    const mi_node *n = &m->nodes[i];
    const int N = m->n_nodes, l = n->layer;
    if (!(m->flags & CLF_MODEL_TRAIN) || l < 0 || l == n->stk->first + n->stk->n - 1)
        return -1;
    if (m->s.recompute == MI_RECOMPUTE_BLOCK)
        return 2 * N - 1 - (m->bp[l].node1 - 1);
    if (m->s.recompute == MI_RECOMPUTE_ATTN && n->kind == MI_NODE_ATTN && kept)
        return 2 * N - 1 - i;
    return -1;
}

/* Every tensor the nodes write, with its lifetime. */
static clf_status collect(clf_model *m, tensor_set *ts, clf_error *err)
{
    const int N = m->n_nodes, train = (m->flags & CLF_MODEL_TRAIN) != 0;
    int *first_kept = malloc((size_t)(N + 1) * sizeof *first_kept);
    ts->of_val = malloc((size_t)(m->n_vals > 0 ? m->n_vals : 1) * sizeof *ts->of_val);
    if (first_kept == NULL || ts->of_val == NULL) {
        free(first_kept);
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory planning activations");
    }
    for (int i = 0; i < N; i++) {
        const mi_node *n = &m->nodes[i];
        mi_tensor k[8];
        const int nk = node_kept(m, n, k);
        if (n->out >= 0) {
            const clf_tensor *v = &m->vals[n->out];
            ts->of_val[n->out] = add_tensor(ts, m->val_room[n->out], v->rows * v->cols, v->t,
                                            recompute_time(m, i, 0));
        }
        first_kept[i] = ts->n;
        for (int j = 0; j < nk; j++)
            if (add_tensor(ts, k[j].dst, k[j].floats, k[j].t, recompute_time(m, i, 1)) < 0)
                break;
        if (ts->n != first_kept[i] + nk || (n->out >= 0 && ts->of_val[n->out] < 0)) {
            free(first_kept);
            return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory planning activations");
        }
    }
    first_kept[N] = ts->n;
    /* node i's forward at time t: reads its inputs, writes its output and
     * what it keeps; (training) its backward at 2N - 1 - i reads its input,
     * the memory and what it kept */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < N; i++) {
            const mi_node *n = &m->nodes[i];
            const int t = pass == 0 ? i : 2 * N - 1 - i;
            if (pass == 1 && !train)
                break;
            touch(ts, val_tensor(ts, n->in), t);
            touch(ts, val_tensor(ts, n->mem), t);
            for (int k = first_kept[i]; k < first_kept[i + 1]; k++)
                touch(ts, k, t);
            if (pass == 1)
                continue;
            touch(ts, val_tensor(ts, n->resid), t);
            touch(ts, val_tensor(ts, n->out), t);
        }
    /* recomputation: the forward of the nodes it re-runs, at the time it does */
    for (int i = 0; i < N && train; i++) {
        const mi_node *n = &m->nodes[i];
        const int tb = recompute_time(m, i, 0), ta = recompute_time(m, i, 1);
        if (tb >= 0) {
            touch(ts, val_tensor(ts, n->in), tb);
            touch(ts, val_tensor(ts, n->resid), tb);
            touch(ts, val_tensor(ts, n->mem), tb);
            touch(ts, val_tensor(ts, n->out), tb);
        }
        for (int k = first_kept[i]; k < first_kept[i + 1] && (ta >= 0 || tb >= 0); k++)
            touch(ts, k, ta >= 0 ? ta : tb);
        if (ta >= 0 && tb < 0)
            touch(ts, val_tensor(ts, n->in), ta);
    }
    free(first_kept);
    return CLF_OK;
}

static int meet(const mi_tensor *a, const mi_tensor *b)
{
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            if (a->lo[i] >= 0 && b->lo[j] >= 0 && a->lo[i] <= b->hi[j] && b->lo[j] <= a->hi[i])
                return 1;
    return 0;
}

static int by_size(const void *a, const void *b)
{
    const mi_tensor *x = *(mi_tensor *const *)a, *y = *(mi_tensor *const *)b;
    if (x->floats != y->floats)
        return x->floats > y->floats ? -1 : 1;
    return x < y ? -1 : x > y; /* the planning order among equals */
}

/* Rooms, largest tensors first: each tensor goes to the smallest room that
 * holds it and none of whose tensors it meets, else to a new room of its
 * size (ggml's and TFLite's greedy by size). */
static clf_status assign_rooms(clf_model *m, tensor_set *ts, clf_error *err)
{
    const size_t n = (size_t)(ts->n > 0 ? ts->n : 1);
    size_t *room = malloc(n * sizeof *room);
    clf_ptr *at = calloc(n, sizeof *at);
    mi_tensor **order = malloc(n * sizeof *order);
    if (room == NULL || at == NULL || order == NULL) {
        free(room);
        free(at);
        free(order);
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory planning activations");
    }
    for (int k = 0; k < ts->n; k++)
        order[k] = &ts->v[k];
    qsort(order, (size_t)ts->n, sizeof *order, by_size);
    int nr = 0;
    for (int k = 0; k < ts->n; k++) {
        mi_tensor *x = order[k];
        int best = -1;
        for (int r = 0; r < nr; r++) {
            if (room[r] < x->floats || (best >= 0 && room[r] >= room[best]))
                continue;
            int free_room = 1;
            for (int j = 0; j < k && free_room; j++)
                free_room = order[j]->room != r || !meet(x, order[j]);
            if (free_room)
                best = r;
        }
        if (best < 0) {
            best = nr++;
            room[best] = x->floats;
        }
        x->room = best;
    }
    clf_status st = CLF_OK;
    for (int r = 0; r < nr && st == CLF_OK; r++)
        st = carve(m, &at[r], room[r], err);
    if (st == CLF_OK)
        st = carve_commit(m, err);
    for (int k = 0; k < ts->n && st == CLF_OK; k++) {
        /* a 16-bit tensor's offset counts its own elements */
        *ts->v[k].dst = clf_tensor_room(at[ts->v[k].room], ts->v[k].t, 0, 0).p;
    }
    free(room);
    free(at);
    free(order);
    return st;
}

/* ---- the other buffers ------------------------------------------------------------ */

static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

/* The flat buffers: parameters (and their 16-bit copy), gradients, the
 * optimizer's slice of the Adam moments, the parameters' moving average. */
static clf_status alloc_params(clf_model *m, clf_error *err)
{
    const size_t NP = m->dims.n_params;
    clf_status st;
    if ((st = abuf(m, &m->mem.params, &m->params, NP, err)) != CLF_OK)
        return st;
    /* the 16-bit weights the products read (two per float of the buffer) */
    if (m->s.act16 != CLF_DT_F32 &&
        (st = abuf(m, &m->mem.params, &m->params16, (NP + 1) / 2, err)) != CLF_OK)
        return st;
    if (!(m->flags & CLF_MODEL_TRAIN))
        return CLF_OK;
    if ((st = abuf(m, &m->mem.grads, &m->grads, NP, err)) != CLF_OK ||
        (st = abuf(m, &m->mem.optim, &m->adam_m, m->opt_hi - m->opt_lo, err)) != CLF_OK)
        return st;
    if (m->optim.ema > 0 && (st = abuf(m, &m->mem.ema, &m->ema, NP, err)) != CLF_OK)
        return st;
    return abuf(m, &m->mem.optim, &m->adam_v, m->opt_hi - m->opt_lo, err);
}

/* The batch, the outputs (logits, losses, the loss's scalars, pooled
 * vectors) and the forward's scratch. */
static clf_status alloc_io(clf_model *m, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t B = (size_t)s->B, C = (size_t)s->C, Rs = s->rows_src, Rt = s->rows_tgt;
    const size_t R = zmax(Rs, Rt), nlab = zmax(Rt, B); /* targets, or labels */
    const size_t nred = zmax(zmax(R, nlab), m->dims.n_params);
    const size_t red = m->rt != NULL ? clf_op_sumsq_scratch(m->rt, nred) : nred / 64 + 4096;
    const size_t nlogits = s->head == MI_HEAD_CLASSIFIER ? B * (size_t)s->NL
                           : s->head == MI_HEAD_NONE     ? 1
                                                         : Rt * (size_t)s->V;
    clf_status st;
    if ((st = abuf(m, &m->mem.batch, &m->tokens, Rt, err)) != CLF_OK ||
        (st = abuf(m, &m->mem.batch, &m->targets, nlab, err)) != CLF_OK ||
        (st = abuf(m, &m->mem.batch, &m->picks, Rt, err)) != CLF_OK ||
        (st = abuf(m, &m->mem.batch, &m->src, Rs, err)) != CLF_OK ||
        (st = abuf(m, &m->mem.batch, &m->src_keep, Rs, err)) != CLF_OK ||
        (s->kind == MI_KIND_DECODER &&
         ((st = abuf(m, &m->mem.batch, &m->doc_seg, Rt, err)) != CLF_OK ||
          (st = abuf(m, &m->mem.batch, &m->doc_pos, Rt, err)) != CLF_OK)) ||
        (st = carve(m, &m->logits, nlogits, err)) != CLF_OK ||
        (st = carve(m, &m->losses, nlab, err)) != CLF_OK ||
        (st = carve(m, &m->scalars, 5, err)) != CLF_OK ||
        (st = carve(m, &m->red, red, err)) != CLF_OK)
        return st;
    /* the sublayers add their residuals in their projections' write-out;
     * only dropout before the add needs the projection on its own */
    if ((m->flags & CLF_MODEL_TRAIN) && s->p_resid > 0 &&
        (st = carve(m, &m->proj, R * C, err)) != CLF_OK)
        return st;
    if (s->head != MI_HEAD_LM && s->pool == MI_POOL_MEAN &&
        (st = carve(m, &m->pooled, B * C, err)) != CLF_OK)
        return st;
    if (s->pos == MI_POS_REL &&
        (st = carve(m, &m->rel_qr, R * (size_t)s->NH * (size_t)(2 * s->relk + 1), err)) != CLF_OK)
        return st;
    if (s->perf_m > 0 && /* performer's features and forward scratch */
        ((st = carve(m, &m->perf_om, (size_t)s->L * (size_t)s->perf_m * (size_t)s->HS, err)) !=
             CLF_OK ||
         (st = carve(m, &m->perf_cmax, B * (size_t)s->NH, err)) != CLF_OK ||
         (st = carve(m, &m->perf_rmax, R * (size_t)s->NH, err)) != CLF_OK))
        return st;
    if (s->sp_bs > 0) { /* sparse patterns' block table; decoding's keep rows */
        m->sp_nb = ((size_t)s->Tmax + (size_t)s->sp_bs - 1) / (size_t)s->sp_bs;
        if ((st = carve(m, &m->sp_table, m->sp_nb * (size_t)s->rnd + 1, err)) != CLF_OK ||
            ((m->flags & CLF_MODEL_INFER) &&
             (st = carve(m, &m->sp_keep, B * (size_t)s->Tmax, err)) != CLF_OK))
            return st;
    }
    if (s->pos == MI_POS_T5) { /* the relative bias's bucket maps and one call's tables */
        const size_t M = (size_t)(s->Tmax > s->Smax ? s->Tmax : s->Smax);
        const size_t w = clf_op_relbias_width(M, M);
        m->rel_R0 = M;
        if ((st = carve(m, &m->rel_rb, (size_t)s->NH * 2 * w, err)) != CLF_OK ||
            (st = carve(m, &m->rel_rbk, w, err)) != CLF_OK ||
            (m->enc.n > 0 && (st = carve(m, &m->enc.relbk, 2 * M + 1, err)) != CLF_OK) ||
            (m->dec.n > 0 && (st = carve(m, &m->dec.relbk, 2 * M + 1, err)) != CLF_OK))
            return st;
    }
    return CLF_OK;
}

/* Inference: every decoder block's key and value caches (and its cross
 * caches), cache_reorder's index and gather scratch, mi_encode's scratch,
 * flash-decoding's partial results. */
static clf_status alloc_caches(clf_model *m, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t B = (size_t)s->B, C = (size_t)s->C;
    const size_t self = B * (size_t)s->Tmax * mi_kv_cols(s), cross = B * (size_t)s->Smax * C;
    clf_status st;
    for (int l = 0; l < s->L; l++) {
        mi_block_a *a = &m->ba[l];
        if (m->bp[l].is_enc)
            continue;
        if ((st = abuf(m, &m->mem.caches, &a->kcache, self, err)) != CLF_OK ||
            (st = abuf(m, &m->mem.caches, &a->vcache, self, err)) != CLF_OK)
            return st;
        if (m->bp[l].has_cross &&
            ((st = abuf(m, &m->mem.caches, &a->xkcache, cross, err)) != CLF_OK ||
             (st = abuf(m, &m->mem.caches, &a->xvcache, cross, err)) != CLF_OK))
            return st;
    }
    /* mi_encode projects the cross-attention memory through this */
    if (s->kind == MI_KIND_ENCDEC && (st = carve(m, &m->qkv, s->rows_src * 2 * C, err)) != CLF_OK)
        return st;
    if ((st = abuf(m, &m->mem.caches, &m->index, B, err)) != CLF_OK ||
        (st = abuf(m, &m->mem.caches, &m->gather, zmax(self, cross), err)) != CLF_OK)
        return st;
    /* flash-decoding's parts: in the arena, for the most any decode call of
     * this model can split into (none where groups run item by item, or
     * the contexts are too short to split) */
    const size_t part =
        m->rt != NULL
            ? clf_op_attn_decode_scratch(m->rt, B * (size_t)s->NH,
                                         zmax((size_t)s->Tmax, (size_t)s->Smax), (size_t)s->HS)
            : 0;
    if (part > 0 && (st = carve(m, &m->decode_part, part, err)) != CLF_OK)
        return st;
    return CLF_OK;
}

/* The backward's scratch: the gradient slots, the sublayers' gradients,
 * fp16's loss-scaling state. */
static clf_status alloc_grads(clf_model *m, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t C = (size_t)s->C, NH = (size_t)s->NH, F = (size_t)s->fc_rows;
    const size_t R = zmax(s->rows_src, s->rows_tgt);
    clf_status st;
    if (s->act16 == CLF_DT_F16 && ((st = carve(m, &m->amp, CLF_AMP_SLOTS, err)) != CLF_OK ||
                                   (st = carve(m, &m->amp_seen, CLF_AMP_SLOTS, err)) != CLF_OK))
        return st;
    if ((st = carve(m, &m->dres, R * C, err)) != CLF_OK ||
        (st = carve(m, &m->dC1, R * C, err)) != CLF_OK ||
        (st = carve(m, &m->dC2, R * C, err)) != CLF_OK ||
        (st = carve(m, &m->dC3, R * C, err)) != CLF_OK ||
        (st = carve_t(m, &m->dqkv, R * 3 * C, s->act16, err)) != CLF_OK ||
        (st = carve_t(m, &m->dH2, R * F, m->dH2_t, err)) != CLF_OK ||
        (st = carve(m, &m->dsum, R * NH, err)) != CLF_OK)
        return st;
    if (s->NKV < s->NH && (st = carve_t(m, &m->dkv_full, R * 2 * C, s->act16, err)) != CLF_OK)
        return st;
    if (s->perf_m > 0 &&
        ((st = carve(m, &m->perf_u, R * NH * (size_t)(s->HS + 1), err)) != CLF_OK ||
         (st = carve(m, &m->perf_dfq, R * NH * (size_t)s->perf_m, err)) != CLF_OK ||
         (st = carve(m, &m->perf_dfk, R * NH * (size_t)s->perf_m, err)) != CLF_OK))
        return st;
    if (s->lin_k > 0 &&
        (st = carve_t(m, &m->lin_dkv, (size_t)s->B * (size_t)s->lin_k * 2 * mi_kv_cols(s), s->act16,
                      err)) != CLF_OK)
        return st;
    if (s->pos == MI_POS_T5 && (st = carve(m, &m->rel_drb, R * NH * (size_t)s->nbk, err)) != CLF_OK)
        return st;
    if (s->pos == MI_POS_REL &&
        (st = carve(m, &m->rel_dqr, R * NH * (size_t)(2 * s->relk + 1), err)) != CLF_OK)
        return st;
    if (!mi_ffn_fused_dact(s) && (st = carve(m, &m->dH1, R * F, err)) != CLF_OK)
        return st;
    if (s->kind == MI_KIND_ENCDEC && (st = carve(m, &m->denc, s->rows_src * C, err)) != CLF_OK)
        return st;
    return CLF_OK;
}

clf_status mi_alloc(clf_model *m, clf_error *err)
{
    tensor_set ts = {0};
    clf_status st = alloc_params(m, err);
    if (st == CLF_OK)
        st = alloc_io(m, err);
    if (st == CLF_OK && (m->flags & CLF_MODEL_INFER))
        st = alloc_caches(m, err);
    if (st == CLF_OK && (m->flags & CLF_MODEL_TRAIN))
        st = alloc_grads(m, err);
    /* the named tensors first, then the rooms, in one commit */
    if (st == CLF_OK)
        st = collect(m, &ts, err);
    if (st == CLF_OK)
        st = assign_rooms(m, &ts, err);
    free(ts.v);
    free(ts.of_val);
    if (st != CLF_OK)
        return st;
    for (int v = 0; v < m->n_vals; v++) /* the values' rooms, now placed */
        m->vals[v].p = *m->val_room[v];
    if (m->s.emb_norm != MI_NORM_NONE) { /* the embeddings' norm writes the blocks' input */
        m->enc.x0 = m->enc.lne_a.out;
        m->dec.x0 = m->dec.lne_a.out;
    }
    m->grad_slot[MI_GRAD_A] = m->dres;
    m->grad_slot[MI_GRAD_B] = m->dC1;
    m->grad_slot[MI_GRAD_MEM] = m->denc;
    return CLF_OK;
}
