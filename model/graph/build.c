/*
 * build.c - planning and allocating a model, GPT-2 initialisation, the
 * parameter table and host <-> device copies of parameters and optimizer
 * state.
 *
 * Design (as llm.c's gpt2_build_from_checkpoint, ggml's reserve-then-alloc):
 *   1. the parameter table is planned from mi_spec: every tensor with its
 *      name, shape, decay flag and initialiser; decayed tensors are placed
 *      first, each offset aligned to MI_ALIGN floats; the per-block offset
 *      structs (mi_block_p) and the stacks (mi_stack) are filled in;
 *   2. every device buffer is requested with its size: the four flat buffers
 *      (gradients and Adam state only with CLF_MODEL_TRAIN), the block
 *      activations sized by their stack's rows (without CLF_MODEL_TRAIN one
 *      set is shared by all blocks of a stack, since nothing is kept for a
 *      backward), the shared scratch sized for the largest of the stacks,
 *      the backward scratch and the caches (CLF_MODEL_INFER: self-attention
 *      keys and values per decoder block, cross-attention keys and values,
 *      the gather scratch of cache_reorder);
 *   3. with a runtime the buffers are created (nothing is allocated later);
 *      without one (clf_model_memory_plan) only their bytes are summed.
 *
 * Not here: the graph (forward.c, backward.c), the training and
 * inference entry points (step.c, decode.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/graph/model_internal.h"
#include "model/ops/ops.h"
#include "runtime/util.h"

/* ---- the parameter plan -------------------------------------------------- */

typedef struct plan_ent {
    char name[CLF_MODEL_NAME_MAX];
    int ndim;
    size_t rows, cols;
    int decay, init;
    int layer;    /* the block (global index) or -1 */
    size_t *slot; /* where the offset goes */
} plan_ent;

typedef struct plan {
    plan_ent *e;
    int n, cap;
    int layer; /* the block being planned, -1 outside blocks */
} plan;

static clf_status plan_add(plan *p, const char *name, int ndim, size_t rows, size_t cols, int init,
                           size_t *slot, clf_error *err)
{
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 64;
        plan_ent *e = realloc(p->e, (size_t)cap * sizeof *e);
        if (e == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory planning parameters");
        p->e = e;
        p->cap = cap;
    }
    plan_ent *e = &p->e[p->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->ndim = ndim;
    e->rows = rows;
    e->cols = ndim == 2 ? cols : 1;
    e->decay = ndim == 2; /* nanoGPT: every 2-D tensor decays, embeddings included */
    e->init = init;
    e->layer = p->layer;
    e->slot = slot;
    return CLF_OK;
}

static clf_status plan_norm(plan *p, const char *prefix, int type, int bias, size_t C,
                            mi_norm_p *np, clf_error *err)
{
    char name[CLF_MODEL_NAME_MAX];
    clf_status st;
    np->w = np->b = MI_NONE;
    if (type == MI_NORM_NONE)
        return CLF_OK;
    snprintf(name, sizeof name, "%s.weight", prefix);
    if ((st = plan_add(p, name, 1, C, 1, MI_INIT_ONE, &np->w, err)) != CLF_OK)
        return st;
    if (type == MI_NORM_LAYERNORM && bias) {
        snprintf(name, sizeof name, "%s.bias", prefix);
        if ((st = plan_add(p, name, 1, C, 1, MI_INIT_ZERO, &np->b, err)) != CLF_OK)
            return st;
    }
    return CLF_OK;
}

/* One linear layer "<prefix>.weight" [rows, cols] (+ "<prefix>.bias" [rows]). */
static clf_status plan_linear(plan *p, const char *prefix, size_t rows, size_t cols, int bias,
                              int init, mi_lin_p *lin, clf_error *err)
{
    char name[CLF_MODEL_NAME_MAX];
    clf_status st;
    lin->w = lin->b = MI_NONE;
    snprintf(name, sizeof name, "%s.weight", prefix);
    if ((st = plan_add(p, name, 2, rows, cols, init, &lin->w, err)) != CLF_OK)
        return st;
    if (bias) {
        snprintf(name, sizeof name, "%s.bias", prefix);
        if ((st = plan_add(p, name, 1, rows, 1, MI_INIT_ZERO, &lin->b, err)) != CLF_OK)
            return st;
    }
    return CLF_OK;
}

/* The blocks of a stack, named "<prefix>blocks.<l>." (prefix "" for a
 * single stack; "encoder." / "decoder." in an encoder-decoder, whose
 * decoder blocks have cross-attention). */
static clf_status plan_blocks(plan *p, const char *prefix, clf_model *m, const mi_stack *stk,
                              clf_error *err)
{
    const mi_spec *s = &m->s;
    mi_block_p *bp = m->bp + stk->first;
    const int n = stk->n, first = stk->first, is_enc = stk->src;
    const int has_cross = !stk->src && s->kind == MI_KIND_ENCDEC;
    char base[48], name[80];
    const size_t C = (size_t)s->C;
    clf_status st;
    for (int l = 0; l < n; l++) {
        mi_block_p *b = &bp[l];
        p->layer = first + l;
        b->is_enc = is_enc;
        b->has_cross = has_cross;
        b->lnx.w = b->lnx.b = MI_NONE;
        b->cross.q.w = b->cross.q.b = b->cross.kv.w = b->cross.kv.b = MI_NONE;
        b->cross.proj.w = b->cross.proj.b = MI_NONE;
        snprintf(base, sizeof base, "%sblocks.%d", prefix, l);
        snprintf(name, sizeof name, "%s.ln1", base);
        if ((st = plan_norm(p, name, s->norm, s->norm_bias, C, &b->ln1, err)) != CLF_OK)
            return st;
        snprintf(name, sizeof name, "%s.attn.qkv", base);
        if ((st = plan_linear(p, name, 3 * C, C, s->attn_bias, MI_INIT_NORMAL, &b->attn.qkv,
                              err)) != CLF_OK)
            return st;
        snprintf(name, sizeof name, "%s.attn.proj", base);
        if ((st = plan_linear(p, name, C, C, s->attn_bias, MI_INIT_RESID, &b->attn.proj, err)) !=
            CLF_OK)
            return st;
        if (has_cross) {
            snprintf(name, sizeof name, "%s.lnx", base);
            if ((st = plan_norm(p, name, s->norm, s->norm_bias, C, &b->lnx, err)) != CLF_OK)
                return st;
            snprintf(name, sizeof name, "%s.cross.q", base);
            if ((st = plan_linear(p, name, C, C, s->attn_bias, MI_INIT_NORMAL, &b->cross.q, err)) !=
                CLF_OK)
                return st;
            snprintf(name, sizeof name, "%s.cross.kv", base);
            if ((st = plan_linear(p, name, 2 * C, C, s->attn_bias, MI_INIT_NORMAL, &b->cross.kv,
                                  err)) != CLF_OK)
                return st;
            snprintf(name, sizeof name, "%s.cross.proj", base);
            if ((st = plan_linear(p, name, C, C, s->attn_bias, MI_INIT_RESID, &b->cross.proj,
                                  err)) != CLF_OK)
                return st;
        }
        snprintf(name, sizeof name, "%s.ln2", base);
        if ((st = plan_norm(p, name, s->norm, s->norm_bias, C, &b->ln2, err)) != CLF_OK)
            return st;
        snprintf(name, sizeof name, "%s.ffn.fc", base);
        if ((st = plan_linear(p, name, (size_t)s->fc_rows, C, s->ffn_bias, MI_INIT_NORMAL,
                              &b->ffn.fc, err)) != CLF_OK)
            return st;
        snprintf(name, sizeof name, "%s.ffn.proj", base);
        if ((st = plan_linear(p, name, C, (size_t)s->H, s->ffn_bias, MI_INIT_RESID, &b->ffn.proj,
                              err)) != CLF_OK)
            return st;
    }
    p->layer = -1;
    return CLF_OK;
}

/* The stacks of the kind: which blocks, what they read, their dropout site. */
static void plan_stacks(clf_model *m)
{
    const mi_spec *s = &m->s;
    memset(&m->enc, 0, sizeof m->enc);
    memset(&m->dec, 0, sizeof m->dec);
    m->enc.wte = m->enc.wpe = m->dec.wte = m->dec.wpe = MI_NONE;
    m->enc.lnf.w = m->enc.lnf.b = m->dec.lnf.w = m->dec.lnf.b = MI_NONE;
    m->enc.lne.w = m->enc.lne.b = m->dec.lne.w = m->dec.lne.b = MI_NONE;
    m->enc.src = 1;
    m->enc.first = 0;
    m->enc.n = s->Le;
    m->enc.drop_layer = s->kind == MI_KIND_ENCDEC ? MI_LAYER_SRC_EMB : MI_LAYER_EMB;
    m->dec.src = 0;
    m->dec.first = s->Le;
    m->dec.n = s->Ld;
    m->dec.drop_layer = MI_LAYER_EMB;
}

static clf_status plan_params(clf_model *m, clf_error *err)
{
    const mi_spec *s = &m->s;
    const size_t V = (size_t)s->V, C = (size_t)s->C, T = (size_t)s->T;
    plan p = {NULL, 0, 0, -1};
    clf_status st;
    mi_stack *enc = &m->enc, *dec = &m->dec;
    m->lm_head = m->cls.w = m->cls.b = MI_NONE;
    plan_stacks(m);
    if (s->kind == MI_KIND_DECODER || s->kind == MI_KIND_ENCODER) {
        /* one stack: wte, wpe, blocks.<l>, ln_f */
        mi_stack *one = s->kind == MI_KIND_DECODER ? dec : enc;
        if ((st = plan_add(&p, "wte", 2, V, C, MI_INIT_NORMAL, &one->wte, err)) != CLF_OK)
            goto fail;
        if (s->pos == MI_POS_LEARNED &&
            (st = plan_add(&p, "wpe", 2, T, C, MI_INIT_NORMAL, &one->wpe, err)) != CLF_OK)
            goto fail;
        if ((st = plan_norm(&p, "ln_emb", s->emb_norm, s->norm_bias, C, &one->lne, err)) != CLF_OK)
            goto fail;
        if ((st = plan_blocks(&p, "", m, one, err)) != CLF_OK)
            goto fail;
        if ((st = plan_norm(&p, "ln_f", s->final_norm, s->norm_bias, C, &one->lnf, err)) != CLF_OK)
            goto fail;
    } else {
        if ((st = plan_add(&p, "wte", 2, V, C, MI_INIT_NORMAL, &dec->wte, err)) != CLF_OK)
            goto fail;
        if (!s->shared_emb &&
            (st = plan_add(&p, "src_wte", 2, V, C, MI_INIT_NORMAL, &enc->wte, err)) != CLF_OK)
            goto fail;
        if (s->pos == MI_POS_LEARNED &&
            ((st = plan_add(&p, "wpe", 2, T, C, MI_INIT_NORMAL, &dec->wpe, err)) != CLF_OK ||
             (st = plan_add(&p, "src_wpe", 2, T, C, MI_INIT_NORMAL, &enc->wpe, err)) != CLF_OK))
            goto fail;
        if ((st = plan_norm(&p, "ln_emb", s->emb_norm, s->norm_bias, C, &dec->lne, err)) !=
                CLF_OK ||
            (st = plan_norm(&p, "src_ln_emb", s->emb_norm, s->norm_bias, C, &enc->lne, err)) !=
                CLF_OK)
            goto fail;
        if ((st = plan_blocks(&p, "encoder.", m, enc, err)) != CLF_OK ||
            (st = plan_norm(&p, "encoder.ln_f", s->final_norm, s->norm_bias, C, &enc->lnf, err)) !=
                CLF_OK ||
            (st = plan_blocks(&p, "decoder.", m, dec, err)) != CLF_OK ||
            (st = plan_norm(&p, "decoder.ln_f", s->final_norm, s->norm_bias, C, &dec->lnf, err)) !=
                CLF_OK)
            goto fail;
    }
    if (s->head == MI_HEAD_LM && !s->tied &&
        (st = plan_add(&p, "lm_head.weight", 2, V, C, MI_INIT_NORMAL, &m->lm_head, err)) != CLF_OK)
        goto fail;
    if (s->head == MI_HEAD_CLASSIFIER && (st = plan_linear(&p, "classifier", (size_t)s->NL, C, 1,
                                                           MI_INIT_NORMAL, &m->cls, err)) != CLF_OK)
        goto fail;

    m->ptab = calloc((size_t)p.n, sizeof *m->ptab);
    m->pinit = calloc((size_t)p.n, sizeof *m->pinit);
    if (m->ptab == NULL || m->pinit == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory for the parameter table");
        goto fail;
    }
    /* decayed tensors first, each group in planning order */
    size_t off = 0, real = 0;
    int k = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < p.n; i++) {
            plan_ent *e = &p.e[i];
            if (e->decay != (pass == 0))
                continue;
            clf_param_info *t = &m->ptab[k];
            snprintf(t->name, sizeof t->name, "%s", e->name);
            t->ndim = e->ndim;
            t->shape[0] = e->rows;
            t->shape[1] = e->cols;
            t->numel = e->rows * e->cols;
            t->decay = e->decay;
            t->layer = e->layer;
            t->offset = off;
            m->pinit[k] = e->init;
            *e->slot = off;
            off += (t->numel + MI_ALIGN - 1) / MI_ALIGN * MI_ALIGN;
            real += t->numel;
            k++;
        }
        if (pass == 0)
            m->dims.n_decay = off;
    }
    m->n_ptab = k;
    m->dims.n_params = off;
    /* ZeRO-1: slice `shard` of `shards`, boundaries on MI_ALIGN floats */
    {
        const size_t blocks = off / MI_ALIGN, sh = (size_t)s->shards, r = (size_t)s->shard;
        m->opt_lo = blocks * r / sh * MI_ALIGN;
        m->opt_hi = blocks * (r + 1) / sh * MI_ALIGN;
    }
    m->dims.n_real = real;
    if (s->tied)
        m->lm_head = dec->wte;
    if (s->shared_emb)
        enc->wte = dec->wte;
    free(p.e);
    return CLF_OK;
fail:
    free(p.e);
    return st;
}

/* ---- create / destroy ------------------------------------------------------------- */

void clf_model_destroy(clf_model *m)
{
    if (m == NULL)
        return;
    /* a non-blocking write may still read a staging slot: drain the queue
     * before the slots are freed */
    if (m->rt != NULL && (m->stage_dirty[0] || m->stage_dirty[1]))
        clf_runtime_finish(m->rt, NULL);
    for (int i = m->n_owned - 1; i >= 0; i--)
        clf_buffer_destroy(m->owned[i]);
    free(m->owned);
    free(m->carves);
    free(m->val_room);
    free(m->vals);
    free(m->nodes);
    free(m->stage[1]);
    free(m->stage[0]);
    free(m->xrow_new);
    free(m->xrow);
    free(m->ba);
    free(m->bp);
    free(m->pinit);
    free(m->ptab);
    free(m);
}

clf_status mi_model_build(clf_runtime *rt, const mi_spec *s, unsigned flags,
                          const clf_model_optim *optim, clf_model **out,
                          clf_model_memory *plan_only, clf_error *err)
{
    clf_status st;
    clf_model *m = calloc(1, sizeof *m);
    if (out != NULL)
        *out = NULL;
    if (m == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    m->rt = rt;
    m->s = *s;
    if (!(flags & CLF_MODEL_TRAIN))
        m->s.act16 = CLF_DT_F32; /* train.precision is a training setting */
    m->flags = flags;
    m->optim = *optim;
    m->state.seed = s->seed;
    m->dims.B = s->B;
    m->dims.T = s->T;
    m->dims.C = s->C;
    m->dims.V = s->V;
    m->dims.L = s->L;
    m->dims.NH = s->NH;
    m->dims.HS = s->HS;
    m->dims.H = s->H;
    m->dims.kind = s->kind;
    m->dims.L_enc = s->Le;
    m->dims.L_dec = s->Ld;
    m->dims.labels = s->NL;
    m->dims.max_S = s->Smax;
    m->dims.max_T = s->Tmax;
    size_t nl = s->L > 0 ? (size_t)s->L : 1;
    m->bp = calloc(nl, sizeof *m->bp);
    m->ba = calloc(nl, sizeof *m->ba);
    /* a slot: src, src_keep, tgt_in, tgt_out (or labels), cache_reorder's index */
    m->stage_len = 2 * s->rows_src + 2 * s->rows_tgt + 2 * (size_t)s->B + 2;
    m->stage[0] = malloc(m->stage_len * sizeof(int32_t));
    m->stage[1] = malloc(m->stage_len * sizeof(int32_t));
    m->xrow = calloc((size_t)s->B, sizeof *m->xrow);
    m->xrow_new = calloc((size_t)s->B, sizeof *m->xrow_new);
    if (m->bp == NULL || m->ba == NULL || m->stage[0] == NULL || m->stage[1] == NULL ||
        m->xrow == NULL || m->xrow_new == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
        goto fail;
    }
    if ((st = plan_params(m, err)) != CLF_OK)
        goto fail;
    if ((st = mi_nodes_build(m, err)) != CLF_OK)
        goto fail;
    if ((st = mi_alloc(m, err)) != CLF_OK) {
        clf_error_prefix(err, "allocating the model (%zu bytes so far)", m->bytes);
        goto fail;
    }
    m->mem.workspace = mi_nodes_workspace(m);
    m->mem.total = m->bytes + m->mem.workspace;
    if (rt == NULL) {
        *plan_only = m->mem;
        clf_model_destroy(m);
        return CLF_OK;
    }
    if ((st = clf_model_params_init(m, s->seed, err)) != CLF_OK || (st = mi_plan(m, err)) != CLF_OK)
        goto fail;
    *out = m;
    return CLF_OK;
fail:
    clf_model_destroy(m);
    return st;
}

/* ---- initialisation ------------------------------------------------------------------ */

/* Uniform in (0, 1), 53 bits. */
static double uniform01(uint64_t *x)
{
    return ((double)(clf_splitmix64_next(x) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Box-Muller, one normal per pair of uniforms (the cosine branch). */
static double normal01(uint64_t *x)
{
    double u1 = uniform01(x), u2 = uniform01(x);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

clf_status clf_model_params_init(clf_model *m, uint64_t seed, clf_error *err)
{
    size_t NP = m->dims.n_params;
    float *h = calloc(NP ? NP : 1, sizeof *h);
    clf_status st;
    if (h == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory for %zu parameters", NP);
    uint64_t x = seed;
    /* GPT-2 scales the residual projections by 1/sqrt(number of residual
     * branches): 2 per block, 3 in a decoder block with cross-attention */
    int branches = 2 * m->s.Le + (m->s.kind == MI_KIND_ENCDEC ? 3 : 2) * m->s.Ld;
    double sd = 0.02, sd_resid = 0.02 / sqrt((double)(branches > 0 ? branches : 1));
    for (int i = 0; i < m->n_ptab; i++) {
        const clf_param_info *t = &m->ptab[i];
        float *p = h + t->offset;
        for (size_t j = 0; j < t->numel; j++) {
            switch (m->pinit[i]) {
                case MI_INIT_NORMAL: p[j] = (float)(sd * normal01(&x)); break;
                case MI_INIT_RESID: p[j] = (float)(sd_resid * normal01(&x)); break;
                case MI_INIT_ONE: p[j] = 1.0f; break;
                default: p[j] = 0.0f; break;
            }
        }
    }
    st = clf_buffer_write(m->rt, m->params, 0, h, NP * sizeof(float), err);
    free(h);
    if (st != CLF_OK)
        return st;
    m->w16_stale = 1;
    if (m->flags & CLF_MODEL_TRAIN) {
        if ((st = clf_buffer_fill(m->rt, m->grads, 0, NP * 4, 0, err)) != CLF_OK ||
            (st = clf_buffer_fill(m->rt, m->adam_m, 0, clf_buffer_size(m->adam_m), 0, err)) !=
                CLF_OK ||
            (st = clf_buffer_fill(m->rt, m->adam_v, 0, clf_buffer_size(m->adam_v), 0, err)) !=
                CLF_OK)
            return st;
    }
    m->state.step = 0;
    m->state.micro = 0;
    m->step_done = 0;
    if (mi_amp(m)) {
        const clf_model_amp a = {.scale = m->optim.loss_scale_init};
        if ((st = clf_model_amp_set(m, &a, err)) != CLF_OK)
            return st;
    }
    return clf_runtime_finish(m->rt, err);
}

/* ---- accessors ------------------------------------------------------------------------ */

clf_model_dims clf_model_dims_get(const clf_model *m) { return m->dims; }
clf_runtime *clf_model_runtime(const clf_model *m) { return m->rt; }
int clf_model_param_count(const clf_model *m) { return m->n_ptab; }

const clf_param_info *clf_model_param_get(const clf_model *m, int i)
{
    return i >= 0 && i < m->n_ptab ? &m->ptab[i] : NULL;
}

int clf_model_param_find(const clf_model *m, const char *name)
{
    for (int i = 0; i < m->n_ptab; i++)
        if (strcmp(m->ptab[i].name, name) == 0)
            return i;
    return -1;
}

static clf_status slot_buffer(const clf_model *m, clf_model_slot slot, clf_buffer **b,
                              clf_error *err)
{
    switch (slot) {
        case CLF_SLOT_PARAM: *b = m->params; break;
        case CLF_SLOT_GRAD: *b = m->grads; break;
        case CLF_SLOT_ADAM_M: *b = m->adam_m; break;
        case CLF_SLOT_ADAM_V: *b = m->adam_v; break;
        default: *b = NULL; break;
    }
    if (*b == NULL)
        return clf_error_set(err, CLF_ERR_ARG,
                             "the model has no %s buffer (created without CLF_MODEL_TRAIN?)",
                             slot == CLF_SLOT_GRAD ? "gradient" : "optimizer state");
    return CLF_OK;
}

/* Where tensor t starts in slot's buffer (the ADAM slots hold the
 * optimizer's slice only: a tensor outside it is an error). */
static clf_status slot_offset(const clf_model *m, clf_model_slot slot, const clf_param_info *t,
                              size_t *off, clf_error *err)
{
    *off = t->offset;
    if (slot != CLF_SLOT_ADAM_M && slot != CLF_SLOT_ADAM_V)
        return CLF_OK;
    if (t->offset < m->opt_lo || t->offset + t->numel > m->opt_hi)
        return clf_error_set(err, CLF_ERR_ARG,
                             "%s: its optimizer state is on another rank (this model holds "
                             "[%zu, %zu) of the flat layout)",
                             t->name, m->opt_lo, m->opt_hi);
    *off -= m->opt_lo;
    return CLF_OK;
}

clf_status clf_model_tensor_read(clf_model *m, clf_model_slot slot, int index, float *dst,
                                 clf_error *err)
{
    clf_buffer *b;
    size_t off = 0;
    clf_status st = slot_buffer(m, slot, &b, err);
    if (st != CLF_OK)
        return st;
    const clf_param_info *t = clf_model_param_get(m, index);
    if (t == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "parameter index %d out of range", index);
    if ((st = slot_offset(m, slot, t, &off, err)) != CLF_OK)
        return st;
    return clf_buffer_read(m->rt, b, off * sizeof(float), dst, t->numel * sizeof(float), err);
}

clf_status clf_model_tensor_write(clf_model *m, clf_model_slot slot, int index, const float *src,
                                  clf_error *err)
{
    clf_buffer *b;
    clf_status st = slot_buffer(m, slot, &b, err);
    if (st != CLF_OK)
        return st;
    const clf_param_info *t = clf_model_param_get(m, index);
    if (t == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "parameter index %d out of range", index);
    size_t off = 0;
    if ((st = slot_offset(m, slot, t, &off, err)) != CLF_OK)
        return st;
    if (slot == CLF_SLOT_PARAM)
        clf_model_params_changed(m);
    return clf_buffer_write(m->rt, b, off * sizeof(float), src, t->numel * sizeof(float), err);
}

/* The part of the flat layout slot's buffer holds: all, or the optimizer's slice. */
static void slot_range(const clf_model *m, clf_model_slot slot, size_t *lo, size_t *hi)
{
    const int adam = slot == CLF_SLOT_ADAM_M || slot == CLF_SLOT_ADAM_V;
    *lo = adam ? m->opt_lo : 0;
    *hi = adam ? m->opt_hi : m->dims.n_params;
}

clf_status clf_model_flat_read(clf_model *m, clf_model_slot slot, float *dst, clf_error *err)
{
    clf_buffer *b;
    size_t lo, hi;
    clf_status st = slot_buffer(m, slot, &b, err);
    if (st != CLF_OK)
        return st;
    slot_range(m, slot, &lo, &hi);
    return clf_buffer_read(m->rt, b, 0, dst + lo, (hi - lo) * sizeof(float), err);
}

clf_status clf_model_flat_write(clf_model *m, clf_model_slot slot, const float *src, clf_error *err)
{
    clf_buffer *b;
    size_t lo, hi;
    clf_status st = slot_buffer(m, slot, &b, err);
    if (st != CLF_OK)
        return st;
    slot_range(m, slot, &lo, &hi);
    if (slot == CLF_SLOT_PARAM)
        clf_model_params_changed(m);
    return clf_buffer_write(m->rt, b, 0, src + lo, (hi - lo) * sizeof(float), err);
}

void clf_model_params_changed(clf_model *m) { m->w16_stale = 1; }

void clf_model_optim_slice(const clf_model *m, size_t *lo, size_t *hi)
{
    *lo = m->opt_lo;
    *hi = m->opt_hi;
}

clf_status clf_model_flat_copy(clf_model *dst, const clf_model *src, clf_model_slot slot,
                               clf_error *err)
{
    clf_buffer *from, *to;
    clf_status st;
    int same = dst->rt == src->rt && dst->dims.n_params == src->dims.n_params &&
               dst->n_ptab == src->n_ptab;
    for (int i = 0; same && i < dst->n_ptab; i++)
        same =
            dst->ptab[i].offset == src->ptab[i].offset && dst->ptab[i].numel == src->ptab[i].numel;
    if (!same)
        return clf_error_set(err, CLF_ERR_ARG,
                             "flat copy: the models are on different runtimes or their parameter "
                             "layouts differ (%zu floats in %d tensors vs %zu in %d)",
                             src->dims.n_params, src->n_ptab, dst->dims.n_params, dst->n_ptab);
    if ((st = slot_buffer(src, slot, &from, err)) != CLF_OK ||
        (st = slot_buffer(dst, slot, &to, err)) != CLF_OK)
        return st;
    size_t lo, hi, lo2, hi2;
    slot_range(src, slot, &lo, &hi);
    slot_range(dst, slot, &lo2, &hi2);
    if (lo != lo2 || hi != hi2)
        return clf_error_set(err, CLF_ERR_ARG,
                             "flat copy: the models hold different slices of the optimizer "
                             "state ([%zu, %zu) and [%zu, %zu))",
                             lo, hi, lo2, hi2);
    if (slot == CLF_SLOT_PARAM)
        clf_model_params_changed(dst);
    return clf_buffer_copy(dst->rt, from, 0, to, 0, (hi - lo) * sizeof(float), err);
}

clf_buffer *clf_model_flat_buffer(const clf_model *m, clf_model_slot slot)
{
    clf_buffer *b = NULL;
    return slot_buffer(m, slot, &b, NULL) == CLF_OK ? b : NULL;
}

void clf_model_set_grad_hook(clf_model *m, clf_model_grad_hook fn, void *user)
{
    m->grad_hook = fn;
    m->grad_hook_user = user;
}

clf_model_optim clf_model_optim_get(const clf_model *m) { return m->optim; }
void clf_model_optim_set(clf_model *m, const clf_model_optim *o) { m->optim = *o; }
clf_model_state clf_model_state_get(const clf_model *m) { return m->state; }
void clf_model_state_set(clf_model *m, const clf_model_state *s) { m->state = *s; }
int clf_model_target_count(const clf_model *m) { return m->count; }

void clf_model_set_loss_scale(clf_model *m, float scale) { m->loss_scale = scale > 0 ? scale : 0; }

int clf_model_amp_enabled(const clf_model *m) { return mi_amp(m); }

clf_status clf_model_amp_get(clf_model *m, clf_model_amp *out, clf_error *err)
{
    if (!mi_amp(m))
        return clf_error_set(err, CLF_ERR_ARG, "no loss scaling: not an fp16 training model");
    float a[CLF_AMP_SLOTS];
    clf_status st = clf_ptr_read(m->rt, m->amp, a, CLF_AMP_SLOTS, err);
    if (st != CLF_OK)
        return st;
    m->stage_dirty[0] = m->stage_dirty[1] = 0; /* a blocking read drained the queue */
    out->scale = a[CLF_AMP_SCALE];
    out->good = (uint64_t)a[CLF_AMP_GOOD];
    out->skipped = (uint64_t)a[CLF_AMP_SKIPPED];
    out->adam_t = (uint64_t)a[CLF_AMP_T];
    return CLF_OK;
}

clf_status clf_model_amp_set(clf_model *m, const clf_model_amp *in, clf_error *err)
{
    if (!mi_amp(m))
        return clf_error_set(err, CLF_ERR_ARG, "no loss scaling: not an fp16 training model");
    const double cap = 16777216.0; /* counts are kept in float32: exact below 2^24 */
    if (!(in->scale >= 1.0f && isfinite(in->scale)) || (double)in->good >= cap ||
        (double)in->skipped >= cap || (double)in->adam_t >= cap)
        return clf_error_set(err, CLF_ERR_ARG,
                             "loss scale %g (expected finite and >= 1) or counts past 2^24",
                             (double)in->scale);
    float a[CLF_AMP_SLOTS] = {0};
    a[CLF_AMP_SCALE] = in->scale;
    a[CLF_AMP_GOOD] = (float)in->good;
    a[CLF_AMP_SKIPPED] = (float)in->skipped;
    a[CLF_AMP_T] = (float)in->adam_t;
    a[CLF_AMP_RUN] = 1.0f;
    return clf_ptr_write(m->rt, m->amp, a, CLF_AMP_SLOTS, err);
}

clf_model_memory clf_model_memory_get(const clf_model *m) { return m->mem; }
