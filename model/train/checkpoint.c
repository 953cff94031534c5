/*
 * checkpoint.c - model checkpoints as .safetensors files (see checkpoint.h).
 *
 * Design: saving reads the flat parameter (and Adam) buffers back once and
 * hands the writer pointers into them, one tensor per table entry, so the
 * file's tensors are the table's names and shapes without padding; the
 * writer writes atomically. Loading reads each tensor, checked against the
 * table's shape by the reader, into a host copy of the flat buffer and
 * uploads it in one write (alignment padding stays zero).
 *
 * Not here: the file format itself (safetensors.c), the config's YAML
 * (config/), the tokenizer's JSON (tokenizer.c).
 */
#include "model/train/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/io/safetensors.h"

struct clf_checkpoint {
    char path[1024];
    clf_st_reader *r;
    clf_model_config cfg;
    int vocab;
    uint64_t step, seed;
    int has_optim;
    int has_ema; /* "ema.<name>" tensors: train.ema's moving average */
    int raw;     /* clf_checkpoint_model_create loads the parameters, not the average */
};

static const char *const reserved[] = {
    "format", "version",    "config", "tokenizer",     "vocab",          "step", "seed",
    "optim",  "loss_scale", "ema",    "random_blocks", "performer_draw", NULL};

static int is_reserved(const char *key)
{
    for (int i = 0; reserved[i] != NULL; i++)
        if (strcmp(reserved[i], key) == 0)
            return 1;
    return 0;
}

/* fp16's loss-scaling state from the "loss_scale" metadata ("scale good
 * skipped t"); a checkpoint without it (trained in another precision)
 * starts the scaling afresh with Adam's t at the step count. */
static clf_status load_amp(const struct clf_checkpoint *c, clf_model *m, clf_error *err)
{
    const char *v = clf_st_reader_metadata(c->r, "loss_scale");
    clf_model_amp a = {0};
    if (v == NULL) {
        a.scale = (float)c->cfg.train.loss_scale.init;
        a.adam_t = c->step;
        return clf_model_amp_set(m, &a, err);
    }
    double scale = 0;
    unsigned long long good = 0, skipped = 0, t = 0;
    int used = 0;
    if (sscanf(v, "%lf %llu %llu %llu%n", &scale, &good, &skipped, &t, &used) != 4 ||
        v[used] != '\0' || !(scale >= 1.0 && scale < 3.4e38) || t > c->step)
        return clf_error_set(err, CLF_ERR_FORMAT,
                             "metadata loss_scale '%s': expected 'scale clean skipped t' (scale "
                             ">= 1, t <= step %" PRIu64 ")",
                             v, c->step);
    a.scale = (float)scale;
    a.good = good;
    a.skipped = skipped;
    a.adam_t = t;
    return clf_model_amp_set(m, &a, err);
}

/* ---- saving ------------------------------------------------------------------ */

static clf_status add_all(clf_st_writer *w, clf_model *m, const char *prefix, const float *flat,
                          clf_error *err)
{
    char name[CLF_MODEL_NAME_MAX + 16];
    for (int i = 0; i < clf_model_param_count(m); i++) {
        const clf_param_info *p = clf_model_param_get(m, i);
        int64_t shape[2] = {(int64_t)p->shape[0], (int64_t)p->shape[1]};
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        clf_status st =
            clf_st_writer_add(w, name, CLF_ST_F32, p->ndim, shape, flat + p->offset, err);
        if (st != CLF_OK)
            return st;
    }
    return CLF_OK;
}

/* Sparse attention's random blocks as metadata "random_blocks": the
 * entries ([query blocks, R], -1 = none) as decimal numbers separated by
 * spaces. */
static clf_status save_sparse(clf_st_writer *w, const clf_model *m, clf_error *err)
{
    const int32_t *rnd = NULL;
    size_t n = 0;
    clf_model_sparse_blocks(m, &rnd, &n);
    if (n == 0)
        return CLF_OK;
    char *text = malloc(n * 12 + 1);
    if (text == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf(text + at, 13, "%s%d", i ? " " : "", (int)rnd[i]);
    clf_status st = clf_st_writer_add_metadata(w, "random_blocks", text, err);
    free(text);
    return st;
}

clf_status clf_checkpoint_save(const char *path, clf_model *m, const clf_model_config *cfg,
                               const char *tokenizer_json, const clf_checkpoint_extra *extra,
                               int n_extra, clf_error *err)
{
    return clf_checkpoint_save_ex(path, m, cfg, tokenizer_json, extra, n_extra, NULL, NULL, err);
}

clf_status clf_checkpoint_save_ex(const char *path, clf_model *m, const clf_model_config *cfg,
                                  const char *tokenizer_json, const clf_checkpoint_extra *extra,
                                  int n_extra, const float *adam_m, const float *adam_v,
                                  clf_error *err)
{
    clf_status st;
    clf_st_writer *w = NULL;
    float *par = NULL, *am = NULL, *av = NULL, *ema = NULL;
    char *yaml = NULL;
    char num[32];
    clf_model_dims d = clf_model_dims_get(m);
    clf_model_state s = clf_model_state_get(m);
    int optim = 0;

    if (s.micro != 0) {
        st = clf_error_set(err, CLF_ERR_ARG,
                           "a checkpoint is taken between steps: %" PRIu64
                           " backward passes are waiting for their step",
                           s.micro);
        goto fail;
    }
    if ((st = clf_model_check_config(m, cfg, d.V, err)) != CLF_OK)
        goto fail;
    for (int i = 0; i < n_extra; i++) {
        if (extra[i].key == NULL || extra[i].value == NULL || is_reserved(extra[i].key)) {
            st = clf_error_set(err, CLF_ERR_ARG,
                               "checkpoint metadata key '%s' is reserved or "
                               "empty",
                               extra[i].key ? extra[i].key : "(null)");
            goto fail;
        }
    }
    size_t n = d.n_params ? d.n_params : 1;
    par = malloc(n * sizeof *par);
    if (par == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory for a checkpoint");
        goto fail;
    }
    if ((st = clf_model_flat_read(m, CLF_SLOT_PARAM, par, err)) != CLF_OK)
        goto fail;
    if (clf_model_has_ema(m) && ((ema = malloc(n * sizeof *ema)) == NULL ||
                                 (st = clf_model_flat_read(m, CLF_SLOT_EMA, ema, err)) != CLF_OK)) {
        if (ema == NULL)
            st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory for a checkpoint");
        goto fail;
    }
    /* Adam state: the caller's (gathered), or the model's when it has one
     * (CLF_MODEL_TRAIN) and holds all of it */
    const float *wm = adam_m, *wv = adam_v;
    if (adam_m != NULL && adam_v != NULL) {
        optim = 1;
    } else if (clf_model_flat_buffer(m, CLF_SLOT_ADAM_M) != NULL) {
        size_t lo, hi;
        clf_model_optim_slice(m, &lo, &hi);
        if (lo != 0 || hi != d.n_params) {
            st = clf_error_set(err, CLF_ERR_ARG,
                               "the model holds a slice [%zu, %zu) of the optimizer state "
                               "(ZeRO-1): gather the moments and pass them",
                               lo, hi);
            goto fail;
        }
        am = malloc(n * sizeof *am);
        av = malloc(n * sizeof *av);
        if (am == NULL || av == NULL) {
            st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory for a checkpoint");
            goto fail;
        }
        if ((st = clf_model_flat_read(m, CLF_SLOT_ADAM_M, am, err)) != CLF_OK ||
            (st = clf_model_flat_read(m, CLF_SLOT_ADAM_V, av, err)) != CLF_OK)
            goto fail;
        wm = am;
        wv = av;
        optim = 1;
    }
    size_t ylen = clf_config_to_yaml(cfg, NULL, 0);
    yaml = malloc(ylen + 1);
    if (yaml == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
        goto fail;
    }
    clf_config_to_yaml(cfg, yaml, ylen + 1);

    if ((st = clf_st_writer_create(&w, err)) != CLF_OK)
        goto fail;
    if ((st = clf_st_writer_add_metadata(w, "format", CLF_CHECKPOINT_FORMAT, err)) != CLF_OK ||
        (st = clf_st_writer_add_metadata(w, "version", CLF_CHECKPOINT_VERSION, err)) != CLF_OK ||
        (st = clf_st_writer_add_metadata(w, "config", yaml, err)) != CLF_OK ||
        (st = clf_st_writer_add_metadata(w, "tokenizer", tokenizer_json ? tokenizer_json : "",
                                         err)) != CLF_OK)
        goto fail;
    snprintf(num, sizeof num, "%d", d.V);
    if ((st = clf_st_writer_add_metadata(w, "vocab", num, err)) != CLF_OK)
        goto fail;
    snprintf(num, sizeof num, "%" PRIu64, s.step);
    if ((st = clf_st_writer_add_metadata(w, "step", num, err)) != CLF_OK)
        goto fail;
    snprintf(num, sizeof num, "%" PRIu64, s.seed);
    if ((st = clf_st_writer_add_metadata(w, "seed", num, err)) != CLF_OK ||
        (st = clf_st_writer_add_metadata(w, "optim", optim ? "1" : "0", err)) != CLF_OK ||
        (st = clf_st_writer_add_metadata(w, "ema", ema ? "1" : "0", err)) != CLF_OK)
        goto fail;
    if ((st = save_sparse(w, m, err)) != CLF_OK)
        goto fail;
    if (clf_model_performer_draw(m) >= 0) { /* the features the parameters go with */
        snprintf(num, sizeof num, "%" PRId64, clf_model_performer_draw(m));
        if ((st = clf_st_writer_add_metadata(w, "performer_draw", num, err)) != CLF_OK)
            goto fail;
    }
    if (optim && clf_model_amp_enabled(m)) { /* fp16's loss scaling: "scale good skipped t" */
        clf_model_amp a;
        char ls[96];
        if ((st = clf_model_amp_get(m, &a, err)) != CLF_OK)
            goto fail;
        snprintf(ls, sizeof ls, "%.9g %" PRIu64 " %" PRIu64 " %" PRIu64, (double)a.scale, a.good,
                 a.skipped, a.adam_t);
        if ((st = clf_st_writer_add_metadata(w, "loss_scale", ls, err)) != CLF_OK)
            goto fail;
    }
    for (int i = 0; i < n_extra; i++)
        if ((st = clf_st_writer_add_metadata(w, extra[i].key, extra[i].value, err)) != CLF_OK)
            goto fail;
    if ((st = add_all(w, m, "", par, err)) != CLF_OK)
        goto fail;
    if (optim && ((st = add_all(w, m, "optim.m.", wm, err)) != CLF_OK ||
                  (st = add_all(w, m, "optim.v.", wv, err)) != CLF_OK))
        goto fail;
    if (ema != NULL && (st = add_all(w, m, "ema.", ema, err)) != CLF_OK)
        goto fail;
    if ((st = clf_st_writer_add_checksums(w, err)) != CLF_OK ||
        (st = clf_st_writer_write(w, path, err)) != CLF_OK)
        goto fail;
    st = CLF_OK;
    goto done;
fail:
    clf_error_prefix(err, "saving checkpoint %s", path);
done:
    clf_st_writer_destroy(w);
    free(yaml);
    free(av);
    free(am);
    free(ema);
    free(par);
    return st;
}

clf_status clf_checkpoint_write_params(const char *path, const clf_model_config *cfg,
                                       const char *tokenizer_json, int vocab,
                                       const clf_checkpoint_tensor *t, int n,
                                       const clf_checkpoint_extra *extra, int n_extra,
                                       clf_error *err)
{
    clf_st_writer *w = NULL;
    char num[32];
    size_t ylen = clf_config_to_yaml(cfg, NULL, 0);
    char *yaml = malloc(ylen + 1);
    clf_status st;
    if (yaml == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
        goto done;
    }
    clf_config_to_yaml(cfg, yaml, ylen + 1);
    if ((st = clf_st_writer_create(&w, err)) != CLF_OK)
        goto done;
    snprintf(num, sizeof num, "%d", vocab);
    if ((st = clf_st_writer_add_metadata(w, "format", CLF_CHECKPOINT_FORMAT, err)) != CLF_OK ||
        (st = clf_st_writer_add_metadata(w, "version", CLF_CHECKPOINT_VERSION, err)) != CLF_OK ||
        (st = clf_st_writer_add_metadata(w, "config", yaml, err)) != CLF_OK ||
        (st = clf_st_writer_add_metadata(w, "tokenizer", tokenizer_json ? tokenizer_json : "",
                                         err)) != CLF_OK ||
        (st = clf_st_writer_add_metadata(w, "vocab", num, err)) != CLF_OK ||
        (st = clf_st_writer_add_metadata(w, "step", "0", err)) != CLF_OK)
        goto done;
    snprintf(num, sizeof num, "%" PRIu64, cfg->train.seed);
    if ((st = clf_st_writer_add_metadata(w, "seed", num, err)) != CLF_OK ||
        (st = clf_st_writer_add_metadata(w, "optim", "0", err)) != CLF_OK)
        goto done;
    for (int i = 0; i < n_extra; i++) {
        if (extra[i].key == NULL || extra[i].value == NULL || is_reserved(extra[i].key)) {
            st = clf_error_set(err, CLF_ERR_ARG, "checkpoint metadata key '%s' is reserved",
                               extra[i].key ? extra[i].key : "(null)");
            goto done;
        }
        if ((st = clf_st_writer_add_metadata(w, extra[i].key, extra[i].value, err)) != CLF_OK)
            goto done;
    }
    for (int i = 0; i < n; i++)
        if ((st = clf_st_writer_add(w, t[i].name, CLF_ST_F32, t[i].ndim, t[i].shape, t[i].data,
                                    err)) != CLF_OK)
            goto done;
    if ((st = clf_st_writer_add_checksums(w, err)) == CLF_OK)
        st = clf_st_writer_write(w, path, err);
done:
    if (st != CLF_OK)
        clf_error_prefix(err, "writing checkpoint %s", path);
    clf_st_writer_destroy(w);
    free(yaml);
    return st;
}

/* ---- opening ------------------------------------------------------------------ */

static int parse_u64(const char *s, uint64_t *out)
{
    if (s == NULL || *s < '0' || *s > '9')
        return 0;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0')
        return 0;
    *out = (uint64_t)v;
    return 1;
}

clf_status clf_checkpoint_open(const char *path, clf_checkpoint **out, clf_error *err)
{
    clf_status st;
    *out = NULL;
    clf_checkpoint *c = calloc(1, sizeof *c);
    if (c == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(c->path, sizeof c->path, "%s/%s", path, CLF_CHECKPOINT_FILE);
    else
        snprintf(c->path, sizeof c->path, "%s", path);
    path = c->path;
    if ((st = clf_st_reader_open(path, &c->r, err)) != CLF_OK)
        goto fail;
    const char *fmt = clf_st_reader_metadata(c->r, "format");
    const char *ver = clf_st_reader_metadata(c->r, "version");
    if (fmt == NULL || strcmp(fmt, CLF_CHECKPOINT_FORMAT) != 0) {
        st = clf_error_set(err, CLF_ERR_FORMAT,
                           "not a clformer checkpoint (metadata format is '%s', expected '%s')",
                           fmt ? fmt : "(none)", CLF_CHECKPOINT_FORMAT);
        goto fail;
    }
    if (ver == NULL || strcmp(ver, CLF_CHECKPOINT_VERSION) != 0) {
        st = clf_error_set(err, CLF_ERR_FORMAT,
                           "checkpoint version '%s'; this build reads version %s",
                           ver ? ver : "(none)", CLF_CHECKPOINT_VERSION);
        goto fail;
    }
    const char *yaml = clf_st_reader_metadata(c->r, "config");
    if (yaml == NULL) {
        st = clf_error_set(err, CLF_ERR_FORMAT, "no config in the metadata");
        goto fail;
    }
    char where[1100];
    snprintf(where, sizeof where, "%s:config", path);
    if ((st = clf_config_parse_string(yaml, where, NULL, 0, &c->cfg, err)) != CLF_OK) {
        st = CLF_ERR_FORMAT;
        if (err != NULL)
            err->status = CLF_ERR_FORMAT;
        goto fail;
    }
    uint64_t v = 0, opt = 0;
    if (!parse_u64(clf_st_reader_metadata(c->r, "vocab"), &v) || v == 0 || v > 0x7FFFFFFF ||
        !parse_u64(clf_st_reader_metadata(c->r, "step"), &c->step) ||
        !parse_u64(clf_st_reader_metadata(c->r, "seed"), &c->seed) ||
        !parse_u64(clf_st_reader_metadata(c->r, "optim"), &opt) || opt > 1) {
        st = clf_error_set(err, CLF_ERR_FORMAT,
                           "metadata vocab, step, seed and optim must be decimal numbers");
        goto fail;
    }
    c->vocab = (int)v;
    c->has_optim = (int)opt;
    const char *ema = clf_st_reader_metadata(c->r, "ema");
    c->has_ema = ema != NULL && strcmp(ema, "1") == 0;
    *out = c;
    return CLF_OK;
fail:
    /* name the file once: a reader's error may carry it already */
    if (err != NULL && strcmp(err->where, path) != 0 && strstr(err->msg, path) == NULL)
        clf_error_prefix(err, "checkpoint %s", path);
    clf_checkpoint_close(c);
    return st;
}

void clf_checkpoint_close(clf_checkpoint *c)
{
    if (c == NULL)
        return;
    clf_st_reader_destroy(c->r);
    free(c);
}

const clf_model_config *clf_checkpoint_config(const clf_checkpoint *c) { return &c->cfg; }
int clf_checkpoint_vocab(const clf_checkpoint *c) { return c->vocab; }
uint64_t clf_checkpoint_step(const clf_checkpoint *c) { return c->step; }
int clf_checkpoint_has_optim(const clf_checkpoint *c) { return c->has_optim; }
int clf_checkpoint_has_ema(const clf_checkpoint *c) { return c->has_ema; }
void clf_checkpoint_use_raw(clf_checkpoint *c) { c->raw = 1; }

const char *clf_checkpoint_tokenizer(const clf_checkpoint *c)
{
    const char *t = clf_st_reader_metadata(c->r, "tokenizer");
    return t ? t : "";
}

const char *clf_checkpoint_meta(const clf_checkpoint *c, const char *key)
{
    return clf_st_reader_metadata(c->r, key);
}

int clf_checkpoint_verified(const clf_checkpoint *c) { return clf_st_reader_checksummed(c->r); }

const char *clf_checkpoint_path(const clf_checkpoint *c) { return c->path; }

clf_status clf_checkpoint_tokenizer_create(const clf_checkpoint *c, clf_tokenizer **out,
                                           clf_error *err)
{
    *out = NULL;
    const char *tj = clf_checkpoint_tokenizer(c);
    if (tj[0] == '\0')
        return clf_error_set(err, CLF_ERR_FORMAT, "%s: the checkpoint holds no tokenizer", c->path);
    clf_status st = clf_tokenizer_from_json(tj, strlen(tj), out, err);
    if (st != CLF_OK)
        clf_error_prefix(err, "%s: tokenizer", c->path);
    return st;
}

clf_status clf_checkpoint_set_context(clf_checkpoint *c, int context, int scaling, clf_error *err)
{
    clf_model_config cfg = c->cfg;
    clf_status st = clf_config_set_context(&cfg, context, scaling, err);
    if (st == CLF_OK)
        c->cfg = cfg;
    return st;
}

clf_status clf_checkpoint_model_create(clf_checkpoint *c, clf_runtime *rt,
                                       const clf_model_limits *lim, unsigned flags, clf_model **out,
                                       clf_error *err)
{
    *out = NULL;
    clf_model_limits dflt = {.B = c->cfg.train.batch};
    clf_status st =
        clf_model_create_ex(rt, &c->cfg, c->vocab, lim != NULL ? lim : &dflt, flags, out, err);
    const unsigned what = CLF_CHECKPOINT_PARAMS | (c->raw ? 0u : CLF_CHECKPOINT_AVERAGE);
    if (st == CLF_OK && (st = clf_checkpoint_load(c, *out, what, err)) != CLF_OK) {
        clf_model_destroy(*out);
        *out = NULL;
    }
    return st;
}

/* ---- fine-tuning from a checkpoint ---------------------------------------------------- */

/* The first field of the body in which a and b differ, NULL if none. */
static const char *body_differs(const clf_model_config *a, const clf_model_config *b)
{
    const clf_blocks_config *x = &a->blocks, *y = &b->blocks;
    const struct {
        const char *key;
        double a, b;
    } f[] = {
        {"kind", a->kind, b->kind},
        {"embedding.dim", a->embedding.dim, b->embedding.dim},
        {"embedding.scale", a->embedding.scale, b->embedding.scale},
        {"embedding.norm", a->embedding.norm, b->embedding.norm},
        {"positional.type", a->positional.type, b->positional.type},
        {"positional.rope_theta", a->positional.rope_theta, b->positional.rope_theta},
        {"blocks.repeat", x->repeat, y->repeat},
        {"blocks.encoder_repeat", x->encoder_repeat, y->encoder_repeat},
        {"blocks.decoder_repeat", x->decoder_repeat, y->decoder_repeat},
        {"blocks.attention.heads", x->attention.heads, y->attention.heads},
        {"blocks.attention.kv_heads", x->attention.kv_heads, y->attention.kv_heads},
        {"blocks.attention.causal", x->attention.causal, y->attention.causal},
        {"blocks.attention.bias", x->attention.bias, y->attention.bias},
        {"blocks.attention.window", x->attention.window, y->attention.window},
        {"blocks.ffn.hidden", x->ffn.hidden, y->ffn.hidden},
        {"blocks.ffn.activation", x->ffn.activation, y->ffn.activation},
        {"blocks.ffn.bias", x->ffn.bias, y->ffn.bias},
        {"blocks.norm.type", x->norm.type, y->norm.type},
        {"blocks.norm.placement", x->norm.placement, y->norm.placement},
        {"blocks.norm.eps", x->norm.eps, y->norm.eps},
        {"blocks.norm.bias", x->norm.bias, y->norm.bias},
        {"final_norm.type", a->final_norm.type, b->final_norm.type},
        {"share_embeddings", a->share_embeddings, b->share_embeddings},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].a != f[i].b)
            return f[i].key;
    return NULL;
}

static void note_name(char *list, size_t cap, int count, const char *name)
{
    size_t at = strlen(list);
    if (at + strlen(name) + 8 < cap)
        snprintf(list + at, cap - at, "%s%s", count ? ", " : "", name);
    else if (at + 6 < cap && strstr(list, "...") == NULL)
        snprintf(list + at, cap - at, ", ...");
}

clf_status clf_checkpoint_init_from(clf_checkpoint *c, clf_model *m, const clf_model_config *cfg,
                                    clf_checkpoint_init_report *rep, clf_error *err)
{
    clf_checkpoint_init_report r;
    memset(&r, 0, sizeof r);
    const char *key = body_differs(cfg, &c->cfg);
    if (key != NULL)
        return clf_error_set(err, CLF_ERR_CONFIG,
                             "--init %s: its model differs from this config in %s (the body "
                             "must match; the head, dropout, context and training may differ)",
                             c->path, key);
    if (clf_model_dims_get(m).V != c->vocab)
        return clf_error_set(err, CLF_ERR_CONFIG,
                             "--init %s: its vocabulary has %d tokens, this model %d", c->path,
                             c->vocab, clf_model_dims_get(m).V);
    const size_t nt = clf_st_reader_count(c->r);
    unsigned char *used = calloc(nt + 1, 1);
    float *buf = NULL;
    size_t cap = 0;
    clf_status st =
        used != NULL ? CLF_OK : clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    for (int i = 0; i < clf_model_param_count(m) && st == CLF_OK; i++) {
        const clf_param_info *p = clf_model_param_get(m, i);
        /* the moving average where the file has one: what it was evaluated with */
        char nm[CLF_MODEL_NAME_MAX + 8];
        snprintf(nm, sizeof nm, "%s%s", c->has_ema ? "ema." : "", p->name);
        const clf_st_tensor_info *t = clf_st_reader_find(c->r, nm);
        if (t == NULL) {
            note_name(r.fresh_names, sizeof r.fresh_names, r.fresh, p->name);
            r.fresh++;
            continue;
        }
        for (size_t k = 0; k < nt; k++)
            if (clf_st_reader_tensor(c->r, k) == t)
                used[k] = 1;
        /* a position table may be longer than the model's context: its first rows */
        const int cut = p->ndim == 2 && t->ndim == 2 && t->shape[1] == (int64_t)p->shape[1] &&
                        t->shape[0] > (int64_t)p->shape[0] &&
                        (strcmp(p->name, "wpe") == 0 || strcmp(p->name, "src_wpe") == 0);
        const int64_t rows = cut ? t->shape[0] : (int64_t)p->shape[0];
        const size_t numel = (size_t)rows * p->shape[1];
        if (numel > cap) {
            float *nb = realloc(buf, numel * sizeof *nb);
            if (nb == NULL) {
                st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
                break;
            }
            buf = nb;
            cap = numel;
        }
        int64_t shape[2] = {rows, (int64_t)p->shape[1]};
        if ((st = clf_st_reader_read_f32(c->r, nm, p->ndim, shape, buf, numel, err)) != CLF_OK)
            break;
        if ((st = clf_model_tensor_write(m, CLF_SLOT_PARAM, i, buf, err)) != CLF_OK)
            break;
        r.loaded++;
        r.cut += cut;
    }
    for (size_t k = 0; k < nt && st == CLF_OK; k++) {
        const char *nm = clf_st_reader_tensor(c->r, k)->name;
        if (used[k] || strncmp(nm, "optim.", 6) == 0 || (c->has_ema && strncmp(nm, "ema.", 4)))
            continue;
        note_name(r.unused_names, sizeof r.unused_names, r.unused, nm);
        r.unused++;
    }
    free(used);
    free(buf);
    if (st != CLF_OK) {
        clf_error_prefix(err, "--init %s", c->path);
        return st;
    }
    if (rep != NULL)
        *rep = r;
    return CLF_OK;
}

/* ---- loading ------------------------------------------------------------------ */

static clf_status read_all(clf_checkpoint *c, clf_model *m, const char *prefix, float *flat,
                           clf_error *err)
{
    char name[CLF_MODEL_NAME_MAX + 16];
    for (int i = 0; i < clf_model_param_count(m); i++) {
        const clf_param_info *p = clf_model_param_get(m, i);
        int64_t shape[2] = {(int64_t)p->shape[0], (int64_t)p->shape[1]};
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        /* F32, or F16 / BF16 (clf_checkpoint_export) widened */
        clf_status st =
            clf_st_reader_read_f32(c->r, name, p->ndim, shape, flat + p->offset, p->numel, err);
        if (st != CLF_OK)
            return st;
    }
    return CLF_OK;
}

/* The file's random blocks into m (a file without them, as `average`
 * writes: the model keeps those drawn from the same seed). */
static clf_status load_sparse(const clf_checkpoint *c, clf_model *m, clf_error *err)
{
    const char *v = clf_st_reader_metadata(c->r, "random_blocks");
    const int32_t *cur = NULL;
    size_t n = 0;
    clf_model_sparse_blocks(m, &cur, &n);
    if (v == NULL || n == 0)
        return CLF_OK;
    int32_t *rnd = malloc(n * sizeof *rnd);
    if (rnd == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    size_t k = 0;
    const char *p = v;
    while (*p != '\0' && k <= n) {
        char *end = NULL;
        const long x = strtol(p, &end, 10);
        if (end == p || x < -1 || x > INT32_MAX)
            break;
        if (k < n)
            rnd[k] = (int32_t)x;
        k++;
        p = end;
        while (*p == ' ')
            p++;
    }
    clf_status st = *p != '\0' || k != n
                        ? clf_error_set(err, CLF_ERR_FORMAT,
                                        "metadata random_blocks: expected %zu block numbers "
                                        "separated by spaces, got '%.40s'",
                                        n, v)
                        : clf_model_set_sparse_blocks(m, rnd, n, err);
    free(rnd);
    return st;
}

clf_status clf_checkpoint_load(clf_checkpoint *c, clf_model *m, unsigned what, clf_error *err)
{
    clf_status st;
    float *flat = NULL;
    clf_model_dims d = clf_model_dims_get(m);
    int n_model = clf_model_param_count(m);
    size_t expect = (size_t)n_model * (1u + (c->has_optim ? 2u : 0u) + (c->has_ema ? 1u : 0u));

    if ((st = clf_model_check_config(m, &c->cfg, c->vocab, err)) != CLF_OK)
        goto fail;
    if (clf_st_reader_count(c->r) != expect) {
        st = clf_error_set(err, CLF_ERR_FORMAT,
                           "the file holds %zu tensors; a model of this config has %zu",
                           clf_st_reader_count(c->r), expect);
        goto fail;
    }
    if ((what & CLF_CHECKPOINT_OPTIM) && !c->has_optim) {
        st = clf_error_set(err, CLF_ERR_FORMAT,
                           "no optimizer state in the file (saved from an inference model)");
        goto fail;
    }
    flat = calloc(d.n_params ? d.n_params : 1, sizeof *flat);
    if (flat == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
        goto fail;
    }
    if ((st = load_sparse(c, m, err)) != CLF_OK)
        goto fail;
    const char *pd = clf_st_reader_metadata(c->r, "performer_draw");
    if (pd != NULL) { /* an inference model uses the features the file was saved with */
        char *end = NULL;
        const long long d = strtoll(pd, &end, 10);
        if (end == pd || *end != '\0' || d < 0) {
            st = clf_error_set(err, CLF_ERR_FORMAT,
                               "metadata performer_draw: expected a draw number, got '%.40s'", pd);
            goto fail;
        }
        clf_model_pin_performer_draw(m, (int64_t)d);
    }
    if (what & CLF_CHECKPOINT_PARAMS) {
        const char *which = (what & CLF_CHECKPOINT_AVERAGE) && c->has_ema ? "ema." : "";
        if ((st = read_all(c, m, which, flat, err)) != CLF_OK ||
            (st = clf_model_flat_write(m, CLF_SLOT_PARAM, flat, err)) != CLF_OK)
            goto fail;
    }
    if (what & CLF_CHECKPOINT_OPTIM) {
        if ((st = read_all(c, m, "optim.m.", flat, err)) != CLF_OK ||
            (st = clf_model_flat_write(m, CLF_SLOT_ADAM_M, flat, err)) != CLF_OK ||
            (st = read_all(c, m, "optim.v.", flat, err)) != CLF_OK ||
            (st = clf_model_flat_write(m, CLF_SLOT_ADAM_V, flat, err)) != CLF_OK ||
            (st = clf_model_zero_grad(m, err)) != CLF_OK)
            goto fail;
        /* the moving average goes on from the file's (a file without one: it
         * starts again from the parameters at the next step) */
        if (c->has_ema && clf_model_has_ema(m) &&
            ((st = read_all(c, m, "ema.", flat, err)) != CLF_OK ||
             (st = clf_model_flat_write(m, CLF_SLOT_EMA, flat, err)) != CLF_OK))
            goto fail;
        clf_model_state s = clf_model_state_get(m);
        s.step = c->step;
        s.micro = 0;
        s.seed = c->seed;
        clf_model_state_set(m, &s);
        if (clf_model_amp_enabled(m) && (st = load_amp(c, m, err)) != CLF_OK)
            goto fail;
    }
    free(flat);
    return CLF_OK;
fail:
    clf_error_prefix(err, "loading checkpoint %s", c->path);
    free(flat);
    return st;
}

/* ---- export ------------------------------------------------------------------- */

/* A tensor the export writes: a parameter, or with a moving average in the
 * file, the average ("ema.<name>", written as <name>). */
static int exported(const clf_checkpoint *c, const char *name)
{
    if (strncmp(name, "optim.", 6) == 0)
        return 0;
    return (strncmp(name, "ema.", 4) == 0) == (c->has_ema != 0);
}

clf_status clf_checkpoint_export(const char *path, const char *out_path, clf_st_dtype dtype,
                                 clf_error *err)
{
    clf_checkpoint *c = NULL;
    clf_st_writer *w = NULL;
    unsigned char *data = NULL;
    clf_status st;
    if (dtype != CLF_ST_F32 && dtype != CLF_ST_F16 && dtype != CLF_ST_BF16)
        return clf_error_set(err, CLF_ERR_ARG, "export: the dtype must be F32, F16 or BF16");
    if ((st = clf_checkpoint_open(path, &c, err)) != CLF_OK)
        return st;
    /* the parameters: every tensor but the optimizer's moments; the moving
     * average under the parameters' names where the file has one */
    const size_t n = clf_st_reader_count(c->r), esz = clf_st_dtype_size(dtype);
    size_t total = 0, biggest = 0;
    for (size_t i = 0; i < n; i++) {
        const clf_st_tensor_info *t = clf_st_reader_tensor(c->r, i);
        if (!exported(c, t->name))
            continue;
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++)
            numel *= (size_t)t->shape[d];
        total += numel;
        biggest = numel > biggest ? numel : biggest;
    }
    float *tmp = malloc((biggest ? biggest : 1) * sizeof *tmp);
    data = malloc((total ? total : 1) * esz);
    if (tmp == NULL || data == NULL) {
        free(tmp);
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
        goto done;
    }
    if ((st = clf_st_writer_create(&w, err)) != CLF_OK) {
        free(tmp);
        goto done;
    }
    size_t at = 0;
    for (size_t i = 0; i < n && st == CLF_OK; i++) {
        const clf_st_tensor_info *t = clf_st_reader_tensor(c->r, i);
        if (!exported(c, t->name))
            continue;
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++)
            numel *= (size_t)t->shape[d];
        if ((st = clf_st_reader_read_f32(c->r, t->name, t->ndim, t->shape, tmp, numel, err)) !=
            CLF_OK)
            break;
        unsigned char *dst = data + at * esz;
        for (size_t j = 0; j < numel; j++) {
            if (dtype == CLF_ST_F32) {
                memcpy(dst + 4 * j, &tmp[j], 4);
            } else {
                const uint16_t h =
                    dtype == CLF_ST_BF16 ? clf_f32_to_bf16(tmp[j]) : clf_f32_to_f16(tmp[j]);
                memcpy(dst + 2 * j, &h, 2);
            }
        }
        st = clf_st_writer_add(w, t->name + (c->has_ema ? 4 : 0), dtype, t->ndim, t->shape, dst,
                               err);
        at += numel;
    }
    free(tmp);
    /* the metadata, without the optimizer state */
    for (size_t i = 0; i < clf_st_reader_metadata_count(c->r) && st == CLF_OK; i++) {
        const char *k, *v;
        clf_st_reader_metadata_at(c->r, i, &k, &v);
        if (strncmp(k, CLF_ST_CRC_PREFIX, sizeof CLF_ST_CRC_PREFIX - 1) != 0) /* made anew */
            st = clf_st_writer_add_metadata(
                w, k, strcmp(k, "optim") == 0 || strcmp(k, "ema") == 0 ? "0" : v, err);
    }
    if (st == CLF_OK)
        st = clf_st_writer_add_checksums(w, err);
    if (st == CLF_OK)
        st = clf_st_writer_write(w, out_path, err);
done:
    clf_st_writer_destroy(w);
    free(data);
    clf_checkpoint_close(c);
    if (st != CLF_OK)
        clf_error_prefix(err, "export %s", path);
    return st;
}

/* ---- averaging ---------------------------------------------------------------- */

clf_status clf_checkpoint_average(const char *const *paths, int n, int raw, const char *out_path,
                                  clf_error *err)
{
    if (n < 1)
        return clf_error_set(err, CLF_ERR_ARG, "average: no checkpoints");
    clf_checkpoint **c = calloc((size_t)n, sizeof *c);
    clf_checkpoint_tensor *t = NULL;
    double *acc = NULL;
    int nt = 0;
    clf_status st = c != NULL ? CLF_OK : clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    for (int i = 0; i < n && st == CLF_OK; i++) {
        if ((st = clf_checkpoint_open(paths[i], &c[i], err)) != CLF_OK)
            break;
        if (raw)
            c[i]->has_ema = 0; /* read as a file without one: its parameters */
        char key[128] = "";
        clf_model_config a = c[0]->cfg, b = c[i]->cfg;
        b.train = a.train;
        const int other_cfg = clf_config_diff(&a, &b, key, sizeof key) != 0;
        if (other_cfg || c[i]->vocab != c[0]->vocab ||
            strcmp(clf_checkpoint_tokenizer(c[i]), clf_checkpoint_tokenizer(c[0])) != 0)
            st = clf_error_set(err, CLF_ERR_ARG,
                               "average: %s is another model than %s (%s differs): only "
                               "checkpoints of one model average",
                               paths[i], paths[0],
                               other_cfg                    ? key
                               : c[i]->vocab != c[0]->vocab ? "the vocabulary"
                                                            : "the tokenizer");
    }
    const size_t nr = st == CLF_OK ? clf_st_reader_count(c[0]->r) : 0;
    if (st == CLF_OK && (t = calloc(nr + 1, sizeof *t)) == NULL)
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    /* every parameter (each file's moving average where it has one): the mean
     * of the files' values, summed in double in the order given */
    for (size_t k = 0; k < nr && st == CLF_OK; k++) {
        const clf_st_tensor_info *ti = clf_st_reader_tensor(c[0]->r, k);
        if (!exported(c[0], ti->name))
            continue;
        const char *name = ti->name + (c[0]->has_ema ? 4 : 0);
        size_t numel = 1;
        for (int d = 0; d < ti->ndim; d++)
            numel *= (size_t)ti->shape[d];
        free(acc);
        acc = calloc(numel ? numel : 1, sizeof *acc);
        float *mean = malloc((numel ? numel : 1) * sizeof *mean);
        float *x = malloc((numel ? numel : 1) * sizeof *x);
        t[nt] = (clf_checkpoint_tensor){
            strdup(name), ti->ndim, {ti->shape[0], ti->ndim > 1 ? ti->shape[1] : 1}, mean};
        nt++;
        if (acc == NULL || mean == NULL || x == NULL || t[nt - 1].name == NULL) {
            free(x);
            st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
            break;
        }
        for (int i = 0; i < n && st == CLF_OK; i++) {
            char nm[CLF_MODEL_NAME_MAX + 8];
            snprintf(nm, sizeof nm, "%s%s", c[i]->has_ema ? "ema." : "", name);
            st = clf_st_reader_read_f32(c[i]->r, nm, ti->ndim, ti->shape, x, numel, err);
            if (st != CLF_OK)
                clf_error_prefix(err, "%s", paths[i]);
            for (size_t j = 0; st == CLF_OK && j < numel; j++)
                acc[j] += x[j];
        }
        for (size_t j = 0; j < numel; j++)
            mean[j] = (float)(acc[j] / n);
        free(x);
    }
    if (st == CLF_OK) {
        /* the first's metadata of its own (languages, where it was imported
         * from, ...), and how many were averaged */
        clf_checkpoint_extra extra[64];
        int ne = 0;
        char from[32];
        snprintf(from, sizeof from, "%d", n);
        for (size_t i = 0; i < clf_st_reader_metadata_count(c[0]->r) && ne < 63; i++) {
            const char *k, *v;
            clf_st_reader_metadata_at(c[0]->r, i, &k, &v);
            if (!is_reserved(k) && strcmp(k, "averaged_from") != 0 &&
                strncmp(k, CLF_ST_CRC_PREFIX, sizeof CLF_ST_CRC_PREFIX - 1) != 0)
                extra[ne++] = (clf_checkpoint_extra){k, v};
        }
        extra[ne++] = (clf_checkpoint_extra){"averaged_from", from};
        st = clf_checkpoint_write_params(out_path, &c[0]->cfg, clf_checkpoint_tokenizer(c[0]),
                                         c[0]->vocab, t, nt, extra, ne, err);
    }
    for (int i = 0; i < nt; i++) {
        free((char *)t[i].name);
        free((float *)t[i].data);
    }
    free(t);
    free(acc);
    for (int i = 0; c != NULL && i < n; i++)
        clf_checkpoint_close(c[i]);
    free(c);
    return st;
}
