/*
 * build.c - building a model: the parameter plan, create and destroy, GPT-2
 * initialisation.
 *
 * Design (as llm.c's gpt2_build_from_checkpoint, ggml's reserve-then-alloc):
 *   1. the parameter table is planned from mi_spec: every tensor with its
 *      name, shape, decay flag and initialiser; decayed tensors are placed
 *      first, each offset aligned to MI_ALIGN floats; the per-block offset
 *      structs (mi_block_p) and the stacks (mi_stack) are filled in;
 *   2. the node list is built from the spec (nodes.c);
 *   3. every device buffer is requested and placed (arena.c): with a runtime
 *      the buffers are created (nothing is allocated later); without one
 *      (clf_model_memory_plan) only their bytes are summed;
 *   4. the parameters are initialised and every product of a step prepared
 *      (step.c's mi_plan).
 *
 * Not here: the graph (nodes.c, forward.c, backward.c), the accessors
 * (access.c), the training and inference entry points (step.c, decode.c).
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

/* One parameter group of a block: a norm or a linear layer; cross: only
 * in a block with cross-attention. */
typedef struct block_part {
    const char *name;
    int cross;
    size_t rows, cols;
    int bias, init;
    mi_norm_p *norm;
    mi_lin_p *lin;
} block_part;

/* The blocks of a stack, named "<prefix>blocks.<l>." (prefix "" for a
 * single stack; "encoder." / "decoder." in an encoder-decoder, whose
 * decoder blocks have cross-attention), each block's parts in the order
 * PyTorch's modules list them. */
static clf_status plan_blocks(plan *p, const char *prefix, clf_model *m, const mi_stack *stk,
                              clf_error *err)
{
    const mi_spec *s = &m->s;
    const int has_cross = !stk->src && s->kind == MI_KIND_ENCDEC;
    const size_t C = (size_t)s->C, F = (size_t)s->fc_rows, H = (size_t)s->H;
    const int ab = s->attn_bias, fb = s->ffn_bias, N = MI_INIT_NORMAL, R = MI_INIT_RESID;
    char name[CLF_MODEL_NAME_MAX - 8]; /* room for ".weight" */
    clf_status st = CLF_OK;
    for (int l = 0; l < stk->n && st == CLF_OK; l++) {
        mi_block_p *b = &m->bp[stk->first + l];
        const block_part parts[] = {
            {"ln1", 0, 0, 0, 0, 0, &b->ln1, NULL},
            {"attn.qkv", 0, mi_qkv_cols(s), C, ab, N, NULL, &b->attn.qkv},
            {"attn.proj", 0, C, C, ab, R, NULL, &b->attn.proj},
            {"lnx", 1, 0, 0, 0, 0, &b->lnx, NULL},
            {"cross.q", 1, C, C, ab, N, NULL, &b->cross.q},
            {"cross.kv", 1, 2 * C, C, ab, N, NULL, &b->cross.kv},
            {"cross.proj", 1, C, C, ab, R, NULL, &b->cross.proj},
            {"ln2", 0, 0, 0, 0, 0, &b->ln2, NULL},
            {"ffn.fc", 0, F, C, fb, N, NULL, &b->ffn.fc},
            {"ffn.proj", 0, C, H, fb, R, NULL, &b->ffn.proj},
        };
        p->layer = stk->first + l;
        b->is_enc = stk->src;
        b->has_cross = has_cross;
        b->attn.relk = b->attn.line = b->attn.linf = MI_NONE;
        if (s->lin_k > 0) { /* linformer's projections along the sequence */
            snprintf(name, sizeof name, "%sblocks.%d.attn.lin_e", prefix, l);
            st = plan_add(p, name, 2, (size_t)s->lin_k, (size_t)s->T, MI_INIT_SEQ, &b->attn.line,
                          err);
            snprintf(name, sizeof name, "%sblocks.%d.attn.lin_f", prefix, l);
            if (st == CLF_OK)
                st = plan_add(p, name, 2, (size_t)s->lin_k, (size_t)s->T, MI_INIT_SEQ,
                              &b->attn.linf, err);
        }
        if (s->pos == MI_POS_REL) { /* Shaw's r_c of clipped key - query distances */
            snprintf(name, sizeof name, "%sblocks.%d.attn.rel_k", prefix, l);
            st = plan_add(p, name, 2, (size_t)(2 * s->relk + 1), (size_t)s->HS, N, &b->attn.relk,
                          err);
        }
        for (size_t k = 0; k < sizeof parts / sizeof parts[0] && st == CLF_OK; k++) {
            const block_part *q = &parts[k];
            const int absent = q->cross && !has_cross;
            snprintf(name, sizeof name, "%sblocks.%d.%s", prefix, l, q->name);
            if (q->norm != NULL)
                st = plan_norm(p, name, absent ? MI_NORM_NONE : s->norm, s->norm_bias, C, q->norm,
                               err);
            else if (absent)
                q->lin->w = q->lin->b = MI_NONE;
            else
                st = plan_linear(p, name, q->rows, q->cols, q->bias, q->init, q->lin, err);
        }
    }
    p->layer = -1;
    return st;
}

/* The stacks of the kind: which blocks, what they read, their dropout site. */
static void plan_stacks(clf_model *m)
{
    const mi_spec *s = &m->s;
    memset(&m->enc, 0, sizeof m->enc);
    memset(&m->dec, 0, sizeof m->dec);
    m->enc.wte = m->enc.wpe = m->dec.wte = m->dec.wpe = MI_NONE;
    m->enc.rel = m->dec.rel = MI_NONE;
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

/* T5's bucket of a key - query distance (transformers' T5Attention.
 * _relative_position_bucket, in float32 as PyTorch computes it): an
 * encoder's (bidirectional) half the buckets for each direction; a
 * decoder's the past only; max_exact exact distances, then logarithmic
 * ones up to max_distance, beyond which the last bucket. */
int clf_model_t5_bucket(int rel, int bidirectional, int nb, int maxd)
{
    int ret = 0;
    if (bidirectional) {
        nb /= 2;
        ret += rel > 0 ? nb : 0;
        rel = rel < 0 ? -rel : rel;
    } else {
        rel = rel < 0 ? -rel : 0;
    }
    const int exact = nb / 2;
    if (rel < exact)
        return ret + rel;
    const float v = logf((float)rel / (float)exact) / (float)log((double)maxd / (double)exact) *
                    (float)(nb - exact);
    const int large = exact + (int)v;
    return ret + (large < nb - 1 ? large : nb - 1);
}

/* t5: each stack's bucket map, once (an encoder's both ways, a decoder's
 * causal). */
static clf_status upload_buckets(clf_model *m, clf_error *err)
{
    const mi_spec *s = &m->s;
    if (s->pos != MI_POS_T5)
        return CLF_OK;
    const size_t n = 2 * m->rel_R0 + 1;
    int32_t *b = malloc(n * sizeof *b);
    if (b == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    clf_status st = CLF_OK;
    const mi_stack *stk[2] = {&m->enc, &m->dec};
    for (int k = 0; k < 2 && st == CLF_OK; k++) {
        if (stk[k]->n == 0)
            continue;
        for (size_t i = 0; i < n; i++)
            b[i] = clf_model_t5_bucket((int)i - (int)m->rel_R0,
                                       stk[k]->src || s->kind == MI_KIND_ENCODER, s->nbk, s->maxd);
        st = clf_buffer_write(m->rt, stk[k]->relbk.buf, stk[k]->relbk.off * sizeof(float), b,
                              n * sizeof *b, err);
    }
    free(b);
    return st;
}

/* Sparse patterns: the random blocks, drawn from the run's seed when the
 * model is built, onto the device. */
static clf_status upload_sparse(clf_model *m, clf_error *err)
{
    const mi_spec *s = &m->s;
    if (s->sp_bs == 0)
        return CLF_OK;
    const size_t nb = m->sp_nb, R = (size_t)s->rnd;
    if (m->sp_rnd == NULL) {
        m->sp_rnd = malloc((nb * R + 1) * sizeof *m->sp_rnd);
        if (m->sp_rnd == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
        clf_attn_sparse_draw(m->sp_rnd, nb, R, s->seed);
    }
    if (m->rt == NULL || R == 0)
        return CLF_OK;
    return clf_buffer_write(m->rt, m->sp_table.buf, m->sp_table.off * sizeof(float), m->sp_rnd,
                            nb * R * sizeof *m->sp_rnd, err);
}

static double normal01(uint64_t *x);

/* Performer: one layer's features [m, HS] from seed: blocks of HS rows,
 * each the Gram-Schmidt orthonormalisation of Gaussian rows (the last
 * block cut to what is left), every row then scaled by the norm of a
 * Gaussian vector of HS entries (FAVOR+'s orthogonal random features:
 * the rows' lengths as independent Gaussian rows have them). */
static void perf_draw_layer(float *om, double *blk, size_t m, size_t HS, uint64_t seed)
{
    uint64_t x = seed;
    for (size_t r0 = 0; r0 < m; r0 += HS) {
        for (size_t i = 0; i < HS * HS; i++)
            blk[i] = normal01(&x);
        for (size_t i = 0; i < HS; i++) { /* Gram-Schmidt, twice for accuracy */
            double *ri = blk + i * HS;
            for (int pass = 0; pass < 2; pass++)
                for (size_t j = 0; j < i; j++) {
                    const double *rj = blk + j * HS;
                    double d = 0;
                    for (size_t k = 0; k < HS; k++)
                        d += ri[k] * rj[k];
                    for (size_t k = 0; k < HS; k++)
                        ri[k] -= d * rj[k];
                }
            double n = 0;
            for (size_t k = 0; k < HS; k++)
                n += ri[k] * ri[k];
            n = sqrt(n);
            for (size_t k = 0; k < HS; k++)
                ri[k] /= n > 0 ? n : 1;
        }
        for (size_t i = 0; i < HS && r0 + i < m; i++) {
            double len = 0;
            for (size_t k = 0; k < HS; k++) {
                const double g = normal01(&x);
                len += g * g;
            }
            len = sqrt(len);
            for (size_t k = 0; k < HS; k++)
                om[(r0 + i) * HS + k] = (float)(blk[i * HS + k] * len);
        }
    }
}

/* Performer: the host scratch every draw of the features reuses. */
static clf_status perf_alloc(clf_model *m, clf_error *err)
{
    const size_t HS = (size_t)m->s.HS;
    if (m->s.perf_m == 0)
        return CLF_OK;
    m->perf_host = malloc((size_t)m->s.L * (size_t)m->s.perf_m * HS * sizeof *m->perf_host);
    m->perf_blk = malloc(HS * HS * sizeof *m->perf_blk);
    if (m->perf_host == NULL || m->perf_blk == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    return CLF_OK;
}

clf_status mi_perf_sync(clf_model *m, clf_error *err)
{
    const mi_spec *s = &m->s;
    if (s->perf_m == 0 || m->perf_fixed)
        return CLF_OK;
    const int64_t want = m->perf_pin >= 0     ? m->perf_pin
                         : s->perf_redraw > 0 ? (int64_t)(m->state.step / (uint64_t)s->perf_redraw)
                                              : 0;
    if (want == m->perf_draw)
        return CLF_OK;
    const size_t per = (size_t)s->perf_m * (size_t)s->HS;
    if (m->perf_host == NULL || m->perf_blk == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "performer features: no host scratch");
    for (int l = 0; l < s->L; l++) {
        uint64_t h = s->seed ^ 0x9E3779B97F4A7C15ull * (uint64_t)(l + 1);
        h = clf_splitmix64_next(&h) ^ (uint64_t)want * 0xD1B54A32D192ED03ull;
        perf_draw_layer(m->perf_host + (size_t)l * per, m->perf_blk, (size_t)s->perf_m,
                        (size_t)s->HS, h);
    }
    /* once per draw (every `redraw` steps; the scratch is the build's): the
     * write waits for the queue */
    clf_status st = m->rt == NULL
                        ? CLF_OK
                        : clf_buffer_write(m->rt, m->perf_om.buf, m->perf_om.off * sizeof(float),
                                           m->perf_host, (size_t)s->L * per * sizeof(float), err);
    if (st == CLF_OK)
        m->perf_draw = want;
    return st;
}

int64_t clf_model_performer_draw(const clf_model *m) { return m->s.perf_m ? m->perf_draw : -1; }

void clf_model_pin_performer_draw(clf_model *m, int64_t draw)
{
    if (m->s.perf_m && !(m->flags & CLF_MODEL_TRAIN))
        m->perf_pin = draw;
}

clf_status clf_model_set_performer_features(clf_model *m, const float *om, size_t n, clf_error *err)
{
    const size_t per = (size_t)m->s.perf_m * (size_t)m->s.HS;
    if (m->s.perf_m == 0 || n != per)
        return clf_error_set(err, CLF_ERR_ARG,
                             "performer features: the model takes [%d, %d] per layer, got %zu "
                             "values",
                             m->s.perf_m, m->s.HS, n);
    for (int l = 0; l < m->s.L; l++) {
        clf_status st = clf_buffer_write(m->rt, m->perf_om.buf,
                                         (m->perf_om.off + (size_t)l * per) * sizeof(float), om,
                                         per * sizeof *om, err);
        if (st != CLF_OK)
            return st;
    }
    m->perf_fixed = 1;
    return CLF_OK;
}

clf_status clf_model_sparse_blocks(const clf_model *m, const int32_t **rnd, size_t *n)
{
    *rnd = m->sp_rnd;
    *n = m->s.sp_bs ? m->sp_nb * (size_t)m->s.rnd : 0;
    return CLF_OK;
}

clf_status clf_model_set_sparse_blocks(clf_model *m, const int32_t *rnd, size_t n, clf_error *err)
{
    const size_t nb = m->sp_nb, R = (size_t)m->s.rnd;
    if (m->s.sp_bs == 0 || n != nb * R)
        return clf_error_set(err, CLF_ERR_ARG,
                             "random blocks: the model takes %zu (%zu query blocks x %zu), got %zu",
                             m->s.sp_bs ? nb * R : 0, nb, R, n);
    for (size_t i = 0; i < n; i++)
        if (rnd[i] < -1 || rnd[i] > (int32_t)(i / R))
            return clf_error_set(err, CLF_ERR_ARG,
                                 "random blocks: entry %zu (query block %zu) is %d: expected a "
                                 "key block in [0, %zu] or -1",
                                 i, i / R, (int)rnd[i], i / R);
    memcpy(m->sp_rnd, rnd, n * sizeof *rnd);
    return upload_sparse(m, err);
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
        if (s->pos == MI_POS_T5 && (st = plan_add(&p, "rel_bias", 2, (size_t)s->NH, (size_t)s->nbk,
                                                  MI_INIT_NORMAL, &one->rel, err)) != CLF_OK)
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
        if (s->pos == MI_POS_T5 &&
            ((st = plan_add(&p, "encoder.rel_bias", 2, (size_t)s->NH, (size_t)s->nbk,
                            MI_INIT_NORMAL, &enc->rel, err)) != CLF_OK ||
             (st = plan_add(&p, "decoder.rel_bias", 2, (size_t)s->NH, (size_t)s->nbk,
                            MI_INIT_NORMAL, &dec->rel, err)) != CLF_OK))
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

/* A tensor's learning-rate factor under layer-wise decay d over L blocks:
 * d^(L - k) in block k, d^(L + 1) for the embeddings (and their norm), 1
 * for the final norm and the head. A tied LM head is the embedding. */
static float lr_factor(const clf_model *m, const clf_param_info *t)
{
    const float d = m->optim.layer_decay;
    const int L = m->s.L;
    if (d == 1.0f)
        return 1.0f;
    if (t->layer >= 0)
        return powf(d, (float)(L - t->layer));
    const int embedding = strcmp(t->name, "wte") == 0 || strcmp(t->name, "wpe") == 0 ||
                          strncmp(t->name, "ln_emb.", 7) == 0;
    return embedding ? powf(d, (float)(L + 1)) : 1.0f;
}

/* The flat layout's runs of one learning-rate factor (each tensor's run
 * reaching to the next tensor's offset: the alignment padding between
 * them has no gradient). */
static clf_status plan_lr_runs(clf_model *m, clf_error *err)
{
    m->lr_runs = calloc((size_t)m->n_ptab + 1, sizeof *m->lr_runs);
    if (m->lr_runs == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory for the learning rates");
    int n = 0;
    for (int i = 0; i < m->n_ptab; i++) {
        const float f = lr_factor(m, &m->ptab[i]);
        const size_t hi = i + 1 < m->n_ptab ? m->ptab[i + 1].offset : m->dims.n_params;
        if (n > 0 && m->lr_runs[n - 1].mult == f)
            m->lr_runs[n - 1].hi = hi;
        else
            m->lr_runs[n++] = (struct mi_lr_run){m->ptab[i].offset, hi, f};
    }
    if (n == 0)
        m->lr_runs[n++] = (struct mi_lr_run){0, m->dims.n_params, 1.0f};
    m->n_lr_runs = n;
    return CLF_OK;
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
    clf_event_release(m->stage_ev[0]);
    clf_event_release(m->stage_ev[1]);
    for (int i = m->n_owned - 1; i >= 0; i--)
        clf_buffer_destroy(m->owned[i]);
    free(m->lr_runs);
    free(m->owned);
    free(m->carves);
    free(m->val_room);
    free(m->vals);
    free(m->nodes);
    free(m->stage[1]);
    free(m->stage[0]);
    free(m->xrow_new);
    free(m->xrow);
    free(m->sp_rnd);
    free(m->perf_host);
    free(m->perf_blk);
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
    m->perf_draw = m->perf_pin = -1;
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
    /* a slot: src, src_keep, tgt_in, tgt_out (or labels), a packed batch's
     * segments and positions, cache_reorder's index */
    m->stage_len = 2 * s->rows_src + 4 * s->rows_tgt + 2 * (size_t)s->B + 2;
    m->stage[0] = malloc(m->stage_len * sizeof(int32_t));
    m->stage[1] = malloc(m->stage_len * sizeof(int32_t));
    m->xrow = calloc((size_t)s->B, sizeof *m->xrow);
    m->xrow_new = calloc((size_t)s->B, sizeof *m->xrow_new);
    if (m->bp == NULL || m->ba == NULL || m->stage[0] == NULL || m->stage[1] == NULL ||
        m->xrow == NULL || m->xrow_new == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
        goto fail;
    }
    if ((st = plan_params(m, err)) != CLF_OK || (st = plan_lr_runs(m, err)) != CLF_OK)
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
    if ((st = clf_model_params_init(m, s->seed, err)) != CLF_OK ||
        (st = mi_plan(m, err)) != CLF_OK || (st = upload_buckets(m, err)) != CLF_OK ||
        (st = upload_sparse(m, err)) != CLF_OK || (st = perf_alloc(m, err)) != CLF_OK)
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
                case MI_INIT_SEQ:
                    p[j] = (float)(sqrt(2.0 / (double)(t->shape[0] + t->shape[1])) * normal01(&x));
                    break;
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
        if ((st = clf_buffer_fill(m->rt, m->grads, 0, NP * sizeof(float), 0, err)) != CLF_OK ||
            (st = clf_buffer_fill(m->rt, m->adam_m, 0, clf_buffer_size(m->adam_m), 0, err)) !=
                CLF_OK ||
            (st = clf_buffer_fill(m->rt, m->adam_v, 0, clf_buffer_size(m->adam_v), 0, err)) !=
                CLF_OK)
            return st;
    }
    m->state.step = 0;
    m->state.micro = 0;
    m->step_done = 0;
    m->ema_primed = 0;
    if (mi_amp(m)) {
        const clf_model_amp a = {.scale = m->optim.loss_scale_init};
        if ((st = clf_model_amp_set(m, &a, err)) != CLF_OK)
            return st;
    }
    return clf_runtime_finish(m->rt, err);
}
