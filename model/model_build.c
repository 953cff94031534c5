/*
 * model_build.c - planning and allocating a model, GPT-2 initialisation, the
 * parameter table and host <-> device copies of parameters and optimizer
 * state.
 *
 * Design (as llm.c's gpt2_build_from_checkpoint, ggml's reserve-then-alloc):
 *   1. the parameter table is planned from mi_spec: every tensor with its
 *      name, shape, decay flag and initialiser; decayed tensors are placed
 *      first, each offset aligned to MI_ALIGN floats; the per-block offset
 *      structs (mi_block_p) are filled in;
 *   2. every device buffer is requested with its size: the four flat buffers
 *      (gradients and Adam state only with CLF_MODEL_TRAIN), the block
 *      activations (without CLF_MODEL_TRAIN one set is shared by all layers,
 *      since nothing is kept for a backward), the shared scratch, the
 *      backward scratch and the KV caches (CLF_MODEL_INFER);
 *   3. with a runtime the buffers are created (nothing is allocated later);
 *      without one (clf_model_memory_estimate) only their bytes are summed.
 *
 * Not here: the graph (model_forward.c, model_backward.c), the training and
 * inference entry points (model_train.c, model_decode.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "ops.h"

/* ---- the parameter plan -------------------------------------------------- */

typedef struct plan_ent {
    char name[CLF_MODEL_NAME_MAX];
    int ndim;
    size_t rows, cols;
    int decay, init;
    size_t *slot; /* where the offset goes */
} plan_ent;

typedef struct plan {
    plan_ent *e;
    int n, cap;
} plan;

static clf_status plan_add(plan *p, const char *name, int ndim, size_t rows, size_t cols,
                           int init, size_t *slot, clf_error *err)
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
                              int init, size_t *w, size_t *b, clf_error *err)
{
    char name[CLF_MODEL_NAME_MAX];
    clf_status st;
    *w = *b = MI_NONE;
    snprintf(name, sizeof name, "%s.weight", prefix);
    if ((st = plan_add(p, name, 2, rows, cols, init, w, err)) != CLF_OK)
        return st;
    if (bias) {
        snprintf(name, sizeof name, "%s.bias", prefix);
        if ((st = plan_add(p, name, 1, rows, 1, MI_INIT_ZERO, b, err)) != CLF_OK)
            return st;
    }
    return CLF_OK;
}

/* A stack of blocks named "<prefix>blocks.<l>." (prefix "" for the decoder
 * of a GPT; "encoder." / "decoder." for the encoder-decoder later). */
static clf_status plan_blocks(plan *p, const char *prefix, const mi_spec *s, mi_block_p *bp,
                              clf_error *err)
{
    char base[40], name[64];
    const size_t C = (size_t)s->C;
    clf_status st;
    for (int l = 0; l < s->L; l++) {
        mi_block_p *b = &bp[l];
        snprintf(base, sizeof base, "%sblocks.%d", prefix, l);
        snprintf(name, sizeof name, "%s.ln1", base);
        if ((st = plan_norm(p, name, s->norm, s->norm_bias, C, &b->ln1, err)) != CLF_OK)
            return st;
        snprintf(name, sizeof name, "%s.attn.qkv", base);
        if ((st = plan_linear(p, name, 3 * C, C, s->attn_bias, MI_INIT_NORMAL, &b->attn.qkv_w,
                              &b->attn.qkv_b, err)) != CLF_OK)
            return st;
        snprintf(name, sizeof name, "%s.attn.proj", base);
        if ((st = plan_linear(p, name, C, C, s->attn_bias, MI_INIT_RESID, &b->attn.proj_w,
                              &b->attn.proj_b, err)) != CLF_OK)
            return st;
        snprintf(name, sizeof name, "%s.ln2", base);
        if ((st = plan_norm(p, name, s->norm, s->norm_bias, C, &b->ln2, err)) != CLF_OK)
            return st;
        snprintf(name, sizeof name, "%s.ffn.fc", base);
        if ((st = plan_linear(p, name, (size_t)s->fc_rows, C, s->ffn_bias, MI_INIT_NORMAL,
                              &b->ffn.fc_w, &b->ffn.fc_b, err)) != CLF_OK)
            return st;
        snprintf(name, sizeof name, "%s.ffn.proj", base);
        if ((st = plan_linear(p, name, C, (size_t)s->H, s->ffn_bias, MI_INIT_RESID,
                              &b->ffn.proj_w, &b->ffn.proj_b, err)) != CLF_OK)
            return st;
    }
    return CLF_OK;
}

static clf_status plan_params(clf_model *m, clf_error *err)
{
    const mi_spec *s = &m->s;
    plan p = {NULL, 0, 0};
    clf_status st;
    m->wte = m->wpe = m->lm_head = MI_NONE;
    if ((st = plan_add(&p, "wte", 2, (size_t)s->V, (size_t)s->C, MI_INIT_NORMAL, &m->wte,
                       err)) != CLF_OK)
        goto fail;
    if (s->pos == MI_POS_LEARNED &&
        (st = plan_add(&p, "wpe", 2, (size_t)s->T, (size_t)s->C, MI_INIT_NORMAL, &m->wpe,
                       err)) != CLF_OK)
        goto fail;
    if ((st = plan_blocks(&p, "", s, m->bp, err)) != CLF_OK)
        goto fail;
    if ((st = plan_norm(&p, "ln_f", s->final_norm, s->norm_bias, (size_t)s->C, &m->lnf, err)) !=
        CLF_OK)
        goto fail;
    if (!s->tied && (st = plan_add(&p, "lm_head.weight", 2, (size_t)s->V, (size_t)s->C,
                                   MI_INIT_NORMAL, &m->lm_head, err)) != CLF_OK)
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
    m->dims.n_real = real;
    if (s->tied)
        m->lm_head = m->wte;
    free(p.e);
    return CLF_OK;
fail:
    free(p.e);
    return st;
}

/* ---- buffers -------------------------------------------------------------------- */

/* Request a buffer of n floats (or int32): created with a runtime, counted
 * without one. */
static clf_status abuf(clf_model *m, clf_buffer **dst, size_t n, clf_error *err)
{
    size_t bytes = (n ? n : 1) * sizeof(float);
    *dst = NULL;
    m->bytes += bytes;
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

static clf_status alloc_norm(clf_model *m, mi_norm_a *a, int type, size_t BT, clf_error *err)
{
    clf_status st;
    a->out = a->mean = a->rstd = NULL;
    if (type == MI_NORM_NONE)
        return CLF_OK;
    if ((st = abuf(m, &a->out, BT * (size_t)m->s.C, err)) != CLF_OK)
        return st;
    if (type == MI_NORM_LAYERNORM && (st = abuf(m, &a->mean, BT, err)) != CLF_OK)
        return st;
    return abuf(m, &a->rstd, BT, err);
}

static clf_status alloc_block(clf_model *m, mi_block_a *a, clf_error *err)
{
    const mi_spec *s = &m->s;
    size_t BT = (size_t)s->B * (size_t)s->T, C = (size_t)s->C;
    size_t att = (size_t)s->B * (size_t)s->NH * (size_t)s->T * (size_t)s->T;
    clf_status st;
    if ((st = alloc_norm(m, &a->ln1, s->norm, BT, err)) != CLF_OK ||
        (st = alloc_norm(m, &a->ln2, s->norm, BT, err)) != CLF_OK ||
        (st = abuf(m, &a->q, BT * C, err)) != CLF_OK ||
        (st = abuf(m, &a->k, BT * C, err)) != CLF_OK ||
        (st = abuf(m, &a->v, BT * C, err)) != CLF_OK ||
        (st = abuf(m, &a->att, att, err)) != CLF_OK ||
        (st = abuf(m, &a->atty, BT * C, err)) != CLF_OK ||
        (st = abuf(m, &a->res1, BT * C, err)) != CLF_OK ||
        (st = abuf(m, &a->fch, BT * (size_t)s->fc_rows, err)) != CLF_OK ||
        (st = abuf(m, &a->fch_act, BT * (size_t)s->H, err)) != CLF_OK ||
        (st = abuf(m, &a->res2, BT * C, err)) != CLF_OK)
        return st;
    return CLF_OK;
}

static clf_status alloc_buffers(clf_model *m, clf_error *err)
{
    const mi_spec *s = &m->s;
    const int train = (m->flags & CLF_MODEL_TRAIN) != 0;
    size_t B = (size_t)s->B, T = (size_t)s->T, C = (size_t)s->C, V = (size_t)s->V;
    size_t BT = B * T, NP = m->dims.n_params;
    size_t att = B * (size_t)s->NH * T * T;
    clf_status st;

    if ((st = abuf(m, &m->params, NP, err)) != CLF_OK)
        return st;
    if (train && ((st = abuf(m, &m->grads, NP, err)) != CLF_OK ||
                  (st = abuf(m, &m->adam_m, NP, err)) != CLF_OK ||
                  (st = abuf(m, &m->adam_v, NP, err)) != CLF_OK))
        return st;

    for (int l = 0; l < s->L; l++) {
        if (train || l == 0) {
            if ((st = alloc_block(m, &m->ba[l], err)) != CLF_OK)
                return st;
        } else {
            m->ba[l] = m->ba[0]; /* inference: one set of activations for every layer */
        }
        m->ba[l].kcache = m->ba[l].vcache = NULL;
        if ((m->flags & CLF_MODEL_INFER) &&
            ((st = abuf(m, &m->ba[l].kcache, BT * C, err)) != CLF_OK ||
             (st = abuf(m, &m->ba[l].vcache, BT * C, err)) != CLF_OK))
            return st;
    }
    size_t nred = BT > NP ? BT : NP;
    size_t red = m->rt != NULL ? clf_op_sumsq_scratch(m->rt, nred) : nred / 64 + 4096;
    if ((st = abuf(m, &m->tokens, BT, err)) != CLF_OK ||
        (st = abuf(m, &m->targets, BT, err)) != CLF_OK ||
        (st = abuf(m, &m->x0, BT * C, err)) != CLF_OK ||
        (st = alloc_norm(m, &m->lnf_a, s->final_norm, BT, err)) != CLF_OK ||
        (st = abuf(m, &m->logits, BT * V, err)) != CLF_OK ||
        (st = abuf(m, &m->losses, BT, err)) != CLF_OK ||
        (st = abuf(m, &m->scalars, 4, err)) != CLF_OK ||
        (st = abuf(m, &m->red, red, err)) != CLF_OK ||
        (st = abuf(m, &m->qkv, BT * 3 * C, err)) != CLF_OK ||
        (st = abuf(m, &m->preatt, att, err)) != CLF_OK ||
        (st = abuf(m, &m->atty_h, BT * C, err)) != CLF_OK ||
        (st = abuf(m, &m->proj, BT * C, err)) != CLF_OK)
        return st;
    if (!train)
        return CLF_OK;
    size_t F = (size_t)s->fc_rows;
    if ((st = abuf(m, &m->dres, BT * C, err)) != CLF_OK ||
        (st = abuf(m, &m->dC1, BT * C, err)) != CLF_OK ||
        (st = abuf(m, &m->dC2, BT * C, err)) != CLF_OK ||
        (st = abuf(m, &m->dC3, BT * C, err)) != CLF_OK ||
        (st = abuf(m, &m->dqkv, BT * 3 * C, err)) != CLF_OK ||
        (st = abuf(m, &m->dH1, BT * F, err)) != CLF_OK ||
        (st = abuf(m, &m->dH2, BT * F, err)) != CLF_OK ||
        (st = abuf(m, &m->datt, att, err)) != CLF_OK ||
        (st = abuf(m, &m->dhead, BT * C, err)) != CLF_OK ||
        (st = abuf(m, &m->datty_h, BT * C, err)) != CLF_OK)
        return st;
    return CLF_OK;
}

/* ---- create / destroy ------------------------------------------------------------- */

void clf_model_destroy(clf_model *m)
{
    if (m == NULL)
        return;
    for (int i = m->n_owned - 1; i >= 0; i--)
        clf_buffer_destroy(m->owned[i]);
    free(m->owned);
    free(m->stage[1]);
    free(m->stage[0]);
    free(m->ba);
    free(m->bp);
    free(m->pinit);
    free(m->ptab);
    free(m);
}

clf_status mi_model_build(clf_runtime *rt, const mi_spec *s, unsigned flags,
                          const clf_model_optim *optim, clf_model **out, size_t *bytes_only,
                          clf_error *err)
{
    clf_status st;
    clf_model *m = calloc(1, sizeof *m);
    if (out != NULL)
        *out = NULL;
    if (m == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    m->rt = rt;
    m->s = *s;
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
    size_t nl = s->L > 0 ? (size_t)s->L : 1;
    m->bp = calloc(nl, sizeof *m->bp);
    m->ba = calloc(nl, sizeof *m->ba);
    size_t BT = (size_t)s->B * (size_t)s->T;
    m->stage[0] = malloc(2 * BT * sizeof(int32_t));
    m->stage[1] = malloc(2 * BT * sizeof(int32_t));
    if (m->bp == NULL || m->ba == NULL || m->stage[0] == NULL || m->stage[1] == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
        goto fail;
    }
    if ((st = plan_params(m, err)) != CLF_OK)
        goto fail;
    if ((st = alloc_buffers(m, err)) != CLF_OK) {
        clf_error_prefix(err, "allocating the model (%zu bytes so far)", m->bytes);
        goto fail;
    }
    if (rt == NULL) {
        *bytes_only = m->bytes;
        clf_model_destroy(m);
        return CLF_OK;
    }
    if ((st = clf_model_params_init(m, s->seed, err)) != CLF_OK)
        goto fail;
    *out = m;
    return CLF_OK;
fail:
    clf_model_destroy(m);
    return st;
}

/* ---- initialisation ------------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1), 53 bits. */
static double uniform01(uint64_t *x)
{
    return ((double)(splitmix64(x) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
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
    double sd = 0.02, sd_resid = 0.02 / sqrt(2.0 * (m->s.L > 0 ? m->s.L : 1));
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
    if (m->flags & CLF_MODEL_TRAIN) {
        if ((st = clf_buffer_fill(m->rt, m->grads, 0, NP * 4, 0, err)) != CLF_OK ||
            (st = clf_buffer_fill(m->rt, m->adam_m, 0, NP * 4, 0, err)) != CLF_OK ||
            (st = clf_buffer_fill(m->rt, m->adam_v, 0, NP * 4, 0, err)) != CLF_OK)
            return st;
    }
    m->state.step = 0;
    m->state.micro = 0;
    m->step_done = 0;
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

static clf_status slot_buffer(clf_model *m, clf_model_slot slot, clf_buffer **b, clf_error *err)
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

clf_status clf_model_tensor_read(clf_model *m, clf_model_slot slot, int index, float *dst,
                                 clf_error *err)
{
    clf_buffer *b;
    clf_status st = slot_buffer(m, slot, &b, err);
    if (st != CLF_OK)
        return st;
    const clf_param_info *t = clf_model_param_get(m, index);
    if (t == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "parameter index %d out of range", index);
    return clf_buffer_read(m->rt, b, t->offset * sizeof(float), dst, t->numel * sizeof(float),
                           err);
}

clf_status clf_model_tensor_write(clf_model *m, clf_model_slot slot, int index,
                                  const float *src, clf_error *err)
{
    clf_buffer *b;
    clf_status st = slot_buffer(m, slot, &b, err);
    if (st != CLF_OK)
        return st;
    const clf_param_info *t = clf_model_param_get(m, index);
    if (t == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "parameter index %d out of range", index);
    return clf_buffer_write(m->rt, b, t->offset * sizeof(float), src, t->numel * sizeof(float),
                            err);
}

clf_status clf_model_flat_read(clf_model *m, clf_model_slot slot, float *dst, clf_error *err)
{
    clf_buffer *b;
    clf_status st = slot_buffer(m, slot, &b, err);
    if (st != CLF_OK)
        return st;
    return clf_buffer_read(m->rt, b, 0, dst, m->dims.n_params * sizeof(float), err);
}

clf_status clf_model_flat_write(clf_model *m, clf_model_slot slot, const float *src,
                                clf_error *err)
{
    clf_buffer *b;
    clf_status st = slot_buffer(m, slot, &b, err);
    if (st != CLF_OK)
        return st;
    return clf_buffer_write(m->rt, b, 0, src, m->dims.n_params * sizeof(float), err);
}

clf_model_optim clf_model_optim_get(const clf_model *m) { return m->optim; }
void clf_model_optim_set(clf_model *m, const clf_model_optim *o) { m->optim = *o; }
clf_model_state clf_model_state_get(const clf_model *m) { return m->state; }
void clf_model_state_set(clf_model *m, const clf_model_state *s) { m->state = *s; }
int clf_model_target_count(const clf_model *m) { return m->count; }
