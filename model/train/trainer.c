/*
 * trainer.c - the training loop (see trainer.h for the exact rules).
 *
 * Design: everything the loop needs (host batch buffers, the tokenizer's
 * JSON, the checkpoint path) is prepared before the first step; a step only
 * draws a batch on the host and enqueues the model's work, and the loss is
 * read back (the one blocking call) on logging steps. Evaluation and
 * checkpoints block, by nature. The data generator's state and the elapsed
 * time travel in the checkpoint's metadata as text, so that resuming needs
 * nothing but the file.
 *
 * One loop serves every kind: a batch source (random windows of a text
 * for the decoder; the bucketed sentence loader for the encoder kinds)
 * fills the model's batch, and the evaluation hook computes what the kind
 * has (loss; accuracy; BLEU by greedy decoding on an inference copy).
 *
 * Not here: printing (callbacks), signal handlers (the caller's *stop),
 * creating the model (the caller picks the device and batch).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/train/gradsync.h"
#include "model/train/trainer.h"

#include "model/data/source.h"
#include "model/eval/seqeval.h"
#include "model/train/checkpoint.h"
#include "model/train/schedule.h"
#include "runtime/util.h"

/* Salts for the evaluation generators (re-seeded at every evaluation). */
#define EVAL_SALT_VAL 0x76616c5f6576616cull   /* "val_eval" */
#define EVAL_SALT_TRAIN 0x7472615f6576616cull /* "tra_eval" */

/* ---- evaluation ------------------------------------------------------------------ */

/* Label smoothing is a training regulariser: evaluation reports plain
 * cross-entropy. */
static clf_model_optim eval_begin(clf_model *m)
{
    clf_model_optim saved = clf_model_optim_get(m), o = saved;
    o.label_smoothing = 0.0f;
    clf_model_optim_set(m, &o);
    return saved;
}

/* n batches of B windows drawn from rng; this process evaluates batches
 * share, share + shares, ... (data parallel: its share of the batches one
 * process would evaluate). *sum: the sum of its batches' mean losses. */
static clf_status eval_batches_into(clf_model *m, const clf_dataset *ds, clf_split split, int n,
                                    int B, int shares, int share, clf_rng *rng, int32_t *x,
                                    int32_t *y, double *sum, clf_error *err)
{
    clf_model_dims d = clf_model_dims_get(m);
    clf_model_optim saved = eval_begin(m);
    clf_status st = CLF_OK;
    *sum = 0.0;
    for (int i = 0; i < n; i++) {
        float l = 0.0f;
        if ((st = clf_dataset_sample_batch(ds, split, B, d.T, rng, x, y, err)) != CLF_OK)
            goto fail;
        if (i % shares != share)
            continue; /* another rank's: drawn all the same, to keep the sequence */
        if ((st = clf_model_set_batch(m, clf_batch_decoder(x, y, B, d.T), err)) != CLF_OK)
            goto fail;
        if ((st = clf_model_forward(m, 0, err)) != CLF_OK)
            goto fail;
        if ((st = clf_model_loss(m, &l, err)) != CLF_OK)
            goto fail;
        *sum += (double)l;
    }
fail:
    clf_model_optim_set(m, &saved);
    return st;
}

clf_status clf_trainer_eval_split(clf_model *m, const clf_dataset *ds, clf_split split,
                                  double *loss, uint64_t *targets, clf_error *err)
{
    clf_model_dims d = clf_model_dims_get(m);
    size_t cells = (size_t)d.B * (size_t)d.T;
    int32_t *x = malloc(cells * sizeof *x), *y = malloc(cells * sizeof *y);
    float *l = malloc(cells * sizeof *l);
    clf_model_optim saved = eval_begin(m);
    clf_status st = CLF_OK;
    double sum = 0.0;
    uint64_t count = 0;
    if (x == NULL || y == NULL || l == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "evaluation: out of host memory");
        goto fail;
    }
    size_t W = clf_dataset_eval_windows(ds, split, d.T);
    if (W == 0) {
        st = clf_error_set(err, CLF_ERR_ARG, "evaluation: the %s split has fewer than 2 tokens",
                           split == CLF_SPLIT_VAL ? "validation" : "training");
        goto fail;
    }
    for (size_t w0 = 0; w0 < W; w0 += (size_t)d.B) {
        int nb = (int)((W - w0) < (size_t)d.B ? (W - w0) : (size_t)d.B);
        for (int b = 0; b < nb; b++) {
            size_t len = 0;
            st = clf_dataset_eval_window(ds, split, d.T, w0 + (size_t)b, x + (size_t)b * d.T,
                                         y + (size_t)b * d.T, &len, err);
            if (st != CLF_OK)
                goto fail;
            count += len;
        }
        if ((st = clf_model_set_batch(m, clf_batch_decoder(x, y, nb, d.T), err)) != CLF_OK)
            goto fail;
        if ((st = clf_model_forward(m, 0, err)) != CLF_OK)
            goto fail;
        if ((st = clf_model_losses_read(m, l, err)) != CLF_OK)
            goto fail;
        for (size_t i = 0; i < (size_t)nb * (size_t)d.T; i++)
            if (y[i] != CLF_MODEL_IGNORE_INDEX)
                sum += (double)l[i];
    }
    *loss = sum / (double)count;
    *targets = count;
fail:
    clf_model_optim_set(m, &saved);
    free(x);
    free(y);
    free(l);
    return st;
}

/* ---- the run ----------------------------------------------------------------------- */

typedef struct run {
    clf_model *m;
    const clf_model_config *cfg;
    const clf_dataset *ds; /* decoder */
    const clf_train_data *data;
    const clf_tokenizer *tok;
    const clf_trainer_options *o;
    char path[4096];
    char best_path[4096];
    char *tok_json;
    int32_t *x, *y; /* [B, T] host windows for evaluations (decoder) */
    /* encoder kinds */
    int seq;
    clf_batch_source *src; /* the training batches, every kind */
    clf_batch last;        /* the last training batch (its epoch) */
    clf_seq_batching bo;
    clf_model *infer;      /* BLEU: inference copy, created at the first evaluation */
    double elapsed_before; /* earlier sessions (resume) */
    double t_start;        /* this session's start */
    double best_val;       /* early stopping: the best metric, "lower is better" form */
    int evals_since_best;
    uint64_t best_step;
    /* gradient accumulation (train.accumulate > 1): the step's micro-batches,
     * copied out of the source (which reuses its arrays) so that their
     * target count is known before the first backward */
    int n_micro;
    clf_batch *micro;
    /* data parallel (o->dist): this rank's share of each step's draws */
    int rank, nranks;
    int draws;          /* batches drawn per step: nranks * n_micro */
    clf_gradsync *sync; /* NULL with one process */
    /* ZeRO-1 (train.shard_optimizer with ranks): every rank's slice of the
     * flat layout, and a host copy of it to gather into */
    size_t *slices;       /* [nranks + 1] offsets, NULL unless sharded */
    float *gather;        /* [n_params] */
    int32_t **micro_data; /* [n_micro] one allocation per micro-batch */
    size_t *micro_cap;    /* int32 elements each holds */
    clf_model_amp amp;    /* fp16's loss scaling, read beside a logged step's loss */
} run;

static double run_elapsed(const run *r)
{
    return r->elapsed_before + (clf_now_seconds() - r->t_start);
}

#define MAX_EXTRA 16

/* ZeRO-1: learn every rank's slice (each model knows its own) and check
 * that they tile the flat layout in rank order. */
static clf_status shard_open(run *r, clf_error *err)
{
    const clf_trainer_dist *d = r->o->dist;
    const size_t np = clf_model_dims_get(r->m).n_params, n = (size_t)r->nranks;
    size_t lo, hi;
    clf_model_optim_slice(r->m, &lo, &hi);
    if (d->allgather_f32 == NULL)
        return clf_error_set(err, CLF_ERR_ARG,
                             "train.shard_optimizer: the ranks cannot gather (no allgather)");
    double *b = calloc(2 * n, sizeof *b);
    r->slices = calloc(n + 1, sizeof *r->slices);
    r->gather = malloc((np ? np : 1) * sizeof *r->gather);
    if (b == NULL || r->slices == NULL || r->gather == NULL) {
        free(b);
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    }
    b[2 * r->rank] = (double)lo;
    b[2 * r->rank + 1] = (double)hi;
    clf_status st = d->allreduce_f64(d->user, b, 2 * n, err);
    int tiles = st == CLF_OK && b[0] == 0.0 && b[2 * n - 1] == (double)np;
    for (size_t i = 0; tiles && i + 1 < n; i++)
        tiles = b[2 * i + 1] == b[2 * i + 2];
    for (size_t i = 0; i < n; i++)
        r->slices[i] = (size_t)b[2 * i];
    r->slices[n] = np;
    free(b);
    if (st == CLF_OK && !tiles)
        st = clf_error_set(err, CLF_ERR_ARG,
                           "train.shard_optimizer: the ranks' models do not split the optimizer "
                           "state between them (create each with limits.shard = rank, shards = "
                           "%d; this one holds [%zu, %zu) of %zu)",
                           r->nranks, lo, hi, np);
    return st;
}

/* ZeRO-1: every rank updated its slice of the parameters; gather them all. */
static clf_status shard_gather_params(run *r, clf_error *err)
{
    clf_buffer *p = clf_model_flat_buffer(r->m, CLF_SLOT_PARAM);
    clf_runtime *rt = clf_model_runtime(r->m);
    const size_t lo = r->slices[r->rank], hi = r->slices[r->rank + 1];
    const size_t np = r->slices[r->nranks];
    clf_status st =
        clf_buffer_read(rt, p, lo * sizeof(float), r->gather + lo, (hi - lo) * sizeof(float), err);
    if (st == CLF_OK)
        st = r->o->dist->allgather_f32(r->o->dist->user, r->gather, r->slices, err);
    /* the others' slices; the host copy stays valid until the next step's read */
    if (st == CLF_OK && lo > 0)
        st = clf_buffer_write_async(rt, p, 0, r->gather, lo * sizeof(float), err);
    if (st == CLF_OK && hi < np)
        st = clf_buffer_write_async(rt, p, hi * sizeof(float), r->gather + hi,
                                    (np - hi) * sizeof(float), err);
    clf_model_params_changed(r->m); /* the others' slices of any 16-bit weights too */
    return st;
}

/* ZeRO-1: both of Adam's moments, whole, on every rank (for a checkpoint). */
static clf_status shard_gather_moments(run *r, float *m, float *v, clf_error *err)
{
    clf_status st = clf_model_flat_read(r->m, CLF_SLOT_ADAM_M, m, err);
    if (st == CLF_OK)
        st = clf_model_flat_read(r->m, CLF_SLOT_ADAM_V, v, err);
    if (st == CLF_OK)
        st = r->o->dist->allgather_f32(r->o->dist->user, m, r->slices, err);
    if (st == CLF_OK)
        st = r->o->dist->allgather_f32(r->o->dist->user, v, r->slices, err);
    return st;
}

static clf_status save_to(run *r, const char *path, clf_error *err)
{
    char pos[CLF_SOURCE_STATE_MAX], el[64], best[64], since[32], bstep[32], bt[32], ranks[32];
    clf_checkpoint_extra extra[MAX_EXTRA];
    int n = 0;
    float *am = NULL, *av = NULL;
    if (r->slices != NULL) { /* ZeRO-1: every rank brings its slice of the moments */
        const size_t np = r->slices[r->nranks] ? r->slices[r->nranks] : 1;
        am = malloc(np * sizeof *am);
        av = malloc(np * sizeof *av);
        clf_status st = am == NULL || av == NULL
                            ? clf_error_set(err, CLF_ERR_MEMORY, "out of host memory")
                            : shard_gather_moments(r, am, av, err);
        if (st != CLF_OK || r->rank != 0) {
            free(am);
            free(av);
            return st;
        }
    }
    if (r->rank != 0)
        return CLF_OK; /* data parallel: rank 0 writes for everyone */
    snprintf(el, sizeof el, "%.17g", run_elapsed(r));
    snprintf(best, sizeof best, "%.17g", r->best_val);
    snprintf(since, sizeof since, "%d", r->evals_since_best);
    snprintf(bstep, sizeof bstep, "%llu", (unsigned long long)r->best_step);
    clf_batch_source_state(r->src, pos);
    extra[n++] = (clf_checkpoint_extra){clf_batch_source_state_key(r->src), pos};
    if (r->seq) {
        snprintf(bt, sizeof bt, "%d", r->bo.batch_tokens);
        extra[n++] = (clf_checkpoint_extra){"batch_tokens", bt};
    }
    extra[n++] = (clf_checkpoint_extra){"elapsed_s", el};
    extra[n++] = (clf_checkpoint_extra){"best_val_loss", best};
    extra[n++] = (clf_checkpoint_extra){"evals_since_best", since};
    extra[n++] = (clf_checkpoint_extra){"best_step", bstep};
    snprintf(ranks, sizeof ranks, "%d", r->nranks);
    extra[n++] = (clf_checkpoint_extra){"ranks", ranks};
    for (int i = 0; r->data != NULL && i < r->data->n_extra && n < MAX_EXTRA; i++)
        extra[n++] = r->data->extra[i];
    clf_status st = clf_checkpoint_save_ex(path, r->m, r->cfg, r->tok_json, extra, n, am, av, err);
    free(am);
    free(av);
    return st;
}

static clf_status save(run *r, clf_error *err)
{
    clf_status st = save_to(r, r->path, err);
    if (st != CLF_OK || r->rank != 0)
        return st;
    if (r->o->cb.on_checkpoint)
        r->o->cb.on_checkpoint(r->o->cb.user, r->path, clf_model_state_get(r->m).step);
    return CLF_OK;
}

/* The resumed run's config may differ from the checkpoint's only in how long
 * it runs and how it reports. */
static clf_status check_resume_config(const clf_model_config *ck, const clf_model_config *now,
                                      clf_error *err)
{
    clf_model_config a = *now;
    a.train.steps = ck->train.steps;
    a.train.epochs = ck->train.epochs;
    a.train.eval = ck->train.eval;
    a.train.log_every = ck->train.log_every;
    a.train.early_stop.patience = ck->train.early_stop.patience;
    a.train.shard_optimizer = ck->train.shard_optimizer; /* the file holds whole moments */
    char key[256] = "";
    if (clf_config_diff(ck, &a, key, sizeof key) != 0)
        return clf_error_set(err, CLF_ERR_ARG,
                             "--resume: the model file differs from the checkpoint's config at "
                             "'%s'; only train.steps, train.epochs, train.eval, "
                             "train.log_every, train.early_stop.patience and "
                             "train.shard_optimizer may change",
                             key);
    return CLF_OK;
}

static clf_status parse_double_meta(clf_checkpoint *ck, const char *key, double *out,
                                    clf_error *err)
{
    const char *v = clf_checkpoint_meta(ck, key);
    char *end = NULL;
    if (v == NULL)
        return clf_error_set(err, CLF_ERR_FORMAT,
                             "--resume: the checkpoint has no '%s' (not written by the trainer)",
                             key);
    *out = strtod(v, &end);
    if (end == v || *end != '\0')
        return clf_error_set(err, CLF_ERR_FORMAT,
                             "--resume: checkpoint metadata %s='%s' is "
                             "not a number",
                             key, v);
    return CLF_OK;
}

static clf_status resume(run *r, clf_error *err)
{
    clf_checkpoint *ck = NULL;
    clf_status st = clf_checkpoint_open(r->path, &ck, err);
    if (st != CLF_OK)
        goto fail;
    if ((st = check_resume_config(clf_checkpoint_config(ck), r->cfg, err)) != CLF_OK)
        goto fail;
    if (!clf_checkpoint_has_optim(ck)) {
        st = clf_error_set(err, CLF_ERR_FORMAT,
                           "--resume: %s holds no optimizer state (not a training checkpoint)",
                           r->path);
        goto fail;
    }
    if ((st = clf_checkpoint_load(ck, r->m, CLF_CHECKPOINT_ALL, err)) != CLF_OK)
        goto fail;
    const char *key = clf_batch_source_state_key(r->src);
    const char *pos = clf_checkpoint_meta(ck, key);
    if (pos == NULL) {
        st = clf_error_set(err, CLF_ERR_FORMAT, "--resume: %s has no data position (%s)", r->path,
                           key);
        goto fail;
    }
    if (r->seq) {
        const char *bt = clf_checkpoint_meta(ck, "batch_tokens");
        if (bt == NULL || atoi(bt) != r->bo.batch_tokens) {
            st = clf_error_set(err, CLF_ERR_ARG,
                               "--resume: the checkpoint was trained with a token budget of %s "
                               "per batch; this run asks for %d",
                               bt ? bt : "(none)", r->bo.batch_tokens);
            goto fail;
        }
    }
    {
        /* a step draws ranks x accumulate batches: another rank count would
         * continue from the same position with another global batch */
        const char *rk = clf_checkpoint_meta(ck, "ranks");
        const int was = rk != NULL ? atoi(rk) : 1;
        if (was != r->nranks) {
            st = clf_error_set(err, CLF_ERR_ARG,
                               "--resume: the checkpoint was trained by %d process%s (a global "
                               "batch of %d x train.batch per micro-step); this run has %d. "
                               "Resume with mpirun -np %d",
                               was, was == 1 ? "" : "es", was, r->nranks, was);
            goto fail;
        }
    }
    if ((st = clf_batch_source_restore(r->src, pos, err)) != CLF_OK)
        goto fail;
    {
        const char *bs = clf_checkpoint_meta(ck, "best_step");
        r->best_step = bs != NULL ? strtoull(bs, NULL, 10) : 0;
    }
    double since = 0.0;
    if ((st = parse_double_meta(ck, "elapsed_s", &r->elapsed_before, err)) != CLF_OK ||
        (st = parse_double_meta(ck, "best_val_loss", &r->best_val, err)) != CLF_OK ||
        (st = parse_double_meta(ck, "evals_since_best", &since, err)) != CLF_OK)
        goto fail;
    r->evals_since_best = (int)since;
fail:
    if (st != CLF_OK)
        clf_error_prefix(err, "resuming from %s", r->path);
    clf_checkpoint_close(ck);
    return st;
}

/* ---- evaluation hooks ----------------------------------------------------------------- */

/* The early-stop metric in "lower is better" form. */
static double metric_value(const clf_model_config *cfg, const clf_train_eval *e)
{
    switch (cfg->train.early_stop.metric) {
        case CLF_METRIC_ACCURACY: return -e->accuracy;
        case CLF_METRIC_BLEU: return -e->bleu;
        default: return e->val_loss;
    }
}

static clf_status eval_text(run *r, clf_train_eval *e, clf_error *err)
{
    const clf_model_config *cfg = r->cfg;
    clf_status st;
    int n = cfg->train.eval.batches;
    size_t nval = clf_dataset_size(r->ds, CLF_SPLIT_VAL);
    clf_model_dims d = clf_model_dims_get(r->m);
    if (n > 0 && nval >= (size_t)d.T + 1) {
        clf_rng vr, tr;
        clf_rng_seed(&vr, cfg->train.seed ^ EVAL_SALT_VAL);
        clf_rng_seed(&tr, cfg->train.seed ^ EVAL_SALT_TRAIN);
        /* data parallel: the batches one process would evaluate, each rank
         * its share, the means averaged */
        double s[2] = {0.0, 0.0};
        st = eval_batches_into(r->m, r->ds, CLF_SPLIT_VAL, n, cfg->train.batch, r->nranks, r->rank,
                               &vr, r->x, r->y, &s[0], err);
        if (st == CLF_OK)
            st = eval_batches_into(r->m, r->ds, CLF_SPLIT_TRAIN, n, cfg->train.batch, r->nranks,
                                   r->rank, &tr, r->x, r->y, &s[1], err);
        if (st == CLF_OK && r->nranks > 1)
            st = r->o->dist->allreduce_f64(r->o->dist->user, s, 2, err);
        e->val_loss = s[0] / (double)n;
        e->train_loss = s[1] / (double)n;
        e->val_tokens = (uint64_t)n * (uint64_t)cfg->train.batch * (uint64_t)d.T;
    } else {
        st = clf_trainer_eval_split(r->m, r->ds, CLF_SPLIT_VAL, &e->val_loss, &e->val_tokens, err);
    }
    return st;
}

static clf_status eval_seq(run *r, clf_train_eval *e, clf_error *err)
{
    const clf_model_config *cfg = r->cfg;
    clf_model_dims d = clf_model_dims_get(r->m);
    clf_seq_batching bo;
    clf_seqeval_result sr;
    clf_status st;
    clf_seqeval_batching(r->bo.batch, r->bo.batch_tokens, &bo);
    if ((st = clf_seqeval_run_shard(r->m, r->data->val, &bo, r->rank, r->nranks, &sr, err)) !=
        CLF_OK)
        return st;
    if (r->nranks > 1) { /* each rank evaluated its share of the batches */
        double s[4] = {sr.targets > 0 ? sr.loss * (double)sr.targets : 0.0, (double)sr.targets,
                       (double)sr.correct, (double)sr.labelled};
        if ((st = r->o->dist->allreduce_f64(r->o->dist->user, s, 4, err)) != CLF_OK)
            return st;
        sr.targets = (uint64_t)s[1];
        sr.loss = s[1] > 0 ? s[0] / s[1] : NAN;
        if (cfg->kind == CLF_MODEL_ENCODER) {
            sr.correct = (uint64_t)s[2];
            sr.labelled = (uint64_t)s[3];
            sr.accuracy = s[3] > 0 ? s[2] / s[3] : NAN;
        }
    }
    e->val_loss = sr.loss;
    e->val_tokens = sr.targets;
    e->accuracy = sr.accuracy;
    if (cfg->kind != CLF_MODEL_ENCODER_DECODER)
        return CLF_OK;
    if (r->infer == NULL) {
        clf_model_limits lim;
        clf_beam_model_limits(r->data->val, &r->data->decode, cfg->context, &lim);
        if ((st = clf_model_create_ex(clf_model_runtime(r->m), cfg, d.V, &lim, CLF_MODEL_INFER,
                                      &r->infer, err)) != CLF_OK) {
            clf_error_prefix(err, "the inference model for BLEU");
            return st;
        }
    }
    /* the trained parameters, copied on the device */
    if ((st = clf_model_flat_copy(r->infer, r->m, CLF_SLOT_PARAM, err)) != CLF_OK)
        return st;
    clf_bleu_score bs;
    if ((st = clf_seqeval_bleu(r->infer, r->tok, r->data->val, r->data->val_refs, &r->data->decode,
                               &bs, NULL, err)) != CLF_OK)
        return st;
    e->bleu = bs.score;
    e->bleu_bp = bs.bp;
    e->bleu_ratio = bs.ratio;
    return CLF_OK;
}

/* Data parallel: every rank evaluated the same parameters; rank 0's figures
 * become everyone's (devices may round differently, and early stopping
 * must decide alike everywhere), and the parameters are checked to be
 * identical on every rank (a checksum, compared with rank 0's). */
static clf_status agree_eval(run *r, clf_train_eval *e, clf_error *err)
{
    const clf_trainer_dist *d = r->o->dist;
    double v[6] = {e->val_loss, e->train_loss, e->accuracy, e->bleu, e->bleu_bp, e->bleu_ratio};
    clf_status st = d->bcast_f64(d->user, v, 6, err);
    if (st != CLF_OK)
        return st;
    e->val_loss = v[0];
    e->train_loss = v[1];
    e->accuracy = v[2];
    e->bleu = v[3];
    e->bleu_bp = v[4];
    e->bleu_ratio = v[5];
    const size_t np = clf_model_dims_get(r->m).n_params;
    float *p = malloc((np ? np : 1) * sizeof *p);
    if (p == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    st = clf_model_flat_read(r->m, CLF_SLOT_PARAM, p, err);
    const uint64_t h = st == CLF_OK ? clf_hash64(p, np * sizeof *p, 0) : 0;
    free(p);
    if (st != CLF_OK)
        return st;
    /* exact in doubles: the hash in two 32-bit halves */
    double mine[2] = {(double)(h >> 32), (double)(h & 0xFFFFFFFFu)}, ref[2] = {mine[0], mine[1]};
    double differ = 0.0;
    if ((st = d->bcast_f64(d->user, ref, 2, err)) != CLF_OK)
        return st;
    differ = ref[0] != mine[0] || ref[1] != mine[1];
    if ((st = d->allreduce_f64(d->user, &differ, 1, err)) != CLF_OK)
        return st;
    if (differ > 0)
        return clf_error_set(err, CLF_ERR_NUMERIC,
                             "data parallel: after step %llu the parameters of %.0f rank(s) differ "
                             "from rank 0's (this is rank %d: checksum %016llx, rank 0's "
                             "%08llx%08llx)",
                             (unsigned long long)e->step, differ, r->rank, (unsigned long long)h,
                             (unsigned long long)ref[0], (unsigned long long)ref[1]);
    return CLF_OK;
}

static clf_status evaluate(run *r, uint64_t step, clf_train_result *res, clf_error *err)
{
    double t0 = clf_now_seconds();
    clf_train_eval e;
    memset(&e, 0, sizeof e);
    e.step = step;
    e.train_loss = NAN;
    e.accuracy = NAN;
    e.bleu = NAN;
    e.bleu_bp = NAN;
    e.bleu_ratio = NAN;
    e.epoch = -1;
    clf_status st;
    if (r->seq) {
        e.epoch = r->last.epoch + (r->last.epoch_end ? 1 : 0); /* epochs completed */
        st = eval_seq(r, &e, err);
    } else {
        st = eval_text(r, &e, err);
    }
    if (st == CLF_OK && r->nranks > 1)
        st = agree_eval(r, &e, err);
    if (st != CLF_OK)
        return st;
    e.seconds = clf_now_seconds() - t0;
    res->last_val_loss = e.val_loss;
    res->last_accuracy = e.accuracy;
    res->last_bleu = e.bleu;
    double v = metric_value(r->cfg, &e);
    if (v < r->best_val) {
        r->best_val = v;
        r->best_step = step;
        r->evals_since_best = 0;
        e.best = 1;
    } else {
        r->evals_since_best++;
    }
    if (r->o->cb.on_eval)
        r->o->cb.on_eval(r->o->cb.user, &e);
    if (e.best && r->seq) {
        /* the best model so far, for early stopping on a noisy metric */
        if ((st = save_to(r, r->best_path, err)) != CLF_OK)
            return st;
    }
    return CLF_OK;
}

/* ---- batch sources ---------------------------------------------------------------------- */

void clf_trainer_seq_batching(const clf_model_config *cfg, const clf_train_data *data,
                              clf_seq_batching *bo)
{
    clf_seq_batching_default(bo);
    bo->batch_tokens = data->batch_tokens > 0 ? data->batch_tokens : 0;
    bo->batch = cfg->train.batch;
    bo->order = CLF_SEQ_ORDER_BUCKETED;
    bo->seed = cfg->train.seed;
}

clf_status clf_trainer_seq_limits(const clf_model_config *cfg, const clf_train_data *data,
                                  clf_model_limits *lim, clf_error *err)
{
    clf_seq_batching bo, ev;
    clf_seq_limits a, b;
    clf_status st;
    if (data->train == NULL || data->val == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "trainer: no training or validation sentences");
    clf_trainer_seq_batching(cfg, data, &bo);
    if ((st = clf_seqeval_limits(data->train, &bo, &a, err)) != CLF_OK)
        return st;
    clf_seqeval_batching(bo.batch, bo.batch_tokens, &ev);
    if ((st = clf_seqeval_limits(data->val, &ev, &b, err)) != CLF_OK)
        return st;
    clf_seqeval_limits_merge(&a, &b);
    *lim = clf_seqeval_model_limits(&a);
    return CLF_OK;
}

/* The training batches of a run: text windows for a decoder, the sentence
 * loader for the encoder kinds (bo filled for them). */
static clf_status source_create(const clf_model_config *cfg, const clf_train_data *data,
                                clf_seq_batching *bo, clf_batch_source **out, clf_error *err)
{
    if (cfg->kind == CLF_MODEL_DECODER)
        return clf_batch_source_text(data->text, cfg->train.batch, cfg->context, cfg->train.seed,
                                     out, err);
    clf_trainer_seq_batching(cfg, data, bo);
    return clf_batch_source_sentences(data->train, bo, cfg->kind, out, err);
}

/* Steps of a run whose source yields `batches` (train.steps if set, else
 * the epochs' batches), a step drawing `draws` of them. */
static uint64_t steps_of(const clf_model_config *cfg, uint64_t batches, uint64_t draws)
{
    return cfg->train.steps == 0 && draws > 1 ? (batches + draws - 1) / draws : batches;
}

clf_status clf_trainer_total_steps(const clf_model_config *cfg, const clf_train_data *data,
                                   int ranks, uint64_t *total, clf_error *err)
{
    clf_seq_batching bo;
    clf_batch_source *src = NULL;
    clf_status st = source_create(cfg, data, &bo, &src, err);
    if (st == CLF_OK)
        st = clf_batch_source_total_steps(src, cfg->train.steps, cfg->train.epochs, total, err);
    clf_batch_source_destroy(src);
    if (st == CLF_OK)
        *total = steps_of(cfg, *total,
                          (uint64_t)(cfg->train.accumulate > 1 ? cfg->train.accumulate : 1) *
                              (uint64_t)(ranks > 1 ? ranks : 1));
    return st;
}

/* Put the next training batch into the model (r->last). */
static clf_status next_batch(run *r, clf_error *err)
{
    clf_status st = clf_batch_source_next(r->src, &r->last, err);
    return st == CLF_OK ? clf_model_set_batch(r->m, r->last, err) : st;
}

/* Targets (or labels) of a batch that count towards the loss. */
static int64_t batch_targets(const clf_batch *b)
{
    const int32_t *t = b->labels != NULL ? b->labels : b->tgt_out;
    const int64_t n = b->labels != NULL ? b->B : (int64_t)b->B * b->T;
    int64_t c = 0;
    for (int64_t i = 0; t != NULL && i < n; i++)
        c += t[i] != CLF_MODEL_IGNORE_INDEX;
    return c;
}

/* Copy the source's batch into micro-batch slot i (its arrays reused). */
static clf_status micro_copy(run *r, int i, const clf_batch *b, clf_error *err)
{
    const size_t ns = (size_t)b->B * (size_t)b->S, nt = (size_t)b->B * (size_t)b->T;
    const size_t need = 2 * ns + 2 * nt + (size_t)b->B;
    if (need > r->micro_cap[i]) {
        int32_t *p = realloc(r->micro_data[i], need * sizeof *p);
        if (p == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
        r->micro_data[i] = p;
        r->micro_cap[i] = need;
    }
    int32_t *p = r->micro_data[i];
    clf_batch c = *b;
#define COPY_FIELD(f, n)                                                                           \
    if (b->f != NULL) {                                                                            \
        memcpy(p, b->f, (n) * sizeof *p);                                                          \
        c.f = p;                                                                                   \
        p += (n);                                                                                  \
    }
    COPY_FIELD(src, ns)
    COPY_FIELD(src_keep, ns)
    COPY_FIELD(tgt_in, nt)
    COPY_FIELD(tgt_out, nt)
    COPY_FIELD(labels, (size_t)b->B)
#undef COPY_FIELD
    r->micro[i] = c;
    return CLF_OK;
}

/* One optimizer step's forward and backward passes: one batch, or
 * train.accumulate micro-batches whose gradients add up on the device,
 * each scaled by 1 / (the targets of all of them), so the step sees the
 * mean over all their targets, as one batch of them all would. Data
 * parallel: the step's draws are every rank's micro-batches, this rank runs
 * its own, and the gradients are summed across ranks before the return
 * (clf_trainer_dist). *loss (when not NULL, a log step): the mean loss over
 * the step's targets (reading it back per micro-batch is the only host
 * round trip). *tokens: what they count for throughput, every rank's; r->last
 * the last batch, *epoch_end whether any ended an epoch. */
/* A logged step's loss after its forward (the read waits for the queue up
 * to there), and with fp16's loss scaling the scaling state in the same
 * pause: nothing is queued behind the forward yet, so this costs no second
 * drain (read after the step, it would wait for backward and AdamW). */
static clf_status read_loss(run *r, float *loss, clf_error *err)
{
    clf_status st = clf_model_loss(r->m, loss, err);
    if (st == CLF_OK && clf_model_amp_enabled(r->m))
        st = clf_model_amp_get(r->m, &r->amp, err);
    return st;
}

static clf_status forward_backward(run *r, float *loss, double *tokens, int *epoch_end,
                                   clf_error *err)
{
    clf_status st;
    if (r->draws <= 1) {
        if ((st = next_batch(r, err)) != CLF_OK ||
            (st = clf_model_forward(r->m, 1, err)) != CLF_OK ||
            (loss != NULL && (st = read_loss(r, loss, err)) != CLF_OK))
            return st;
        *tokens = r->last.tokens;
        *epoch_end = r->last.epoch_end;
        return clf_model_backward(r->m, err);
    }
    /* every rank draws the whole step; this rank keeps draws first .. first+n_micro-1 */
    const int first = r->rank * r->n_micro;
    int64_t total = 0;
    *tokens = 0.0;
    *epoch_end = 0;
    for (int j = 0; j < r->draws; j++) {
        if ((st = clf_batch_source_next(r->src, &r->last, err)) != CLF_OK)
            return st;
        if (j >= first && j < first + r->n_micro &&
            (st = micro_copy(r, j - first, &r->last, err)) != CLF_OK)
            return st;
        total += batch_targets(&r->last);
        *tokens += r->last.tokens;
        *epoch_end |= r->last.epoch_end;
    }
    double sum = 0.0;
    clf_model_set_loss_scale(r->m, total > 0 ? (float)(1.0 / (double)total) : 0.0f);
    for (int i = 0; i < r->n_micro && st == CLF_OK; i++) {
        float li = 0.0f;
        /* the dropout streams of draw first + i, as one process would use */
        clf_model_state ms = clf_model_state_get(r->m);
        ms.micro = (uint64_t)(first + i);
        clf_model_state_set(r->m, &ms);
        if ((st = clf_model_set_batch(r->m, r->micro[i], err)) != CLF_OK ||
            (st = clf_model_forward(r->m, 1, err)) != CLF_OK)
            break;
        if (loss != NULL && (st = read_loss(r, &li, err)) == CLF_OK)
            sum += (double)li * (double)batch_targets(&r->micro[i]);
        if (st == CLF_OK && r->sync != NULL && i == r->n_micro - 1)
            clf_gradsync_arm(r->sync); /* the last backward's gradients are final */
        if (st == CLF_OK)
            st = clf_model_backward(r->m, err);
    }
    clf_model_set_loss_scale(r->m, 0.0f);
    if (st == CLF_OK && r->sync != NULL)
        st = clf_gradsync_finish(r->sync, err);
    if (st == CLF_OK && r->sync != NULL && loss != NULL)
        st = r->o->dist->allreduce_f64(r->o->dist->user, &sum, 1, err);
    if (loss != NULL)
        *loss = total > 0 ? (float)(sum / (double)total) : 0.0f;
    return st;
}

clf_status clf_trainer_check_text(const clf_model_config *cfg, const clf_dataset *ds,
                                  clf_error *err)
{
    const int T = cfg->context;
    if (clf_dataset_size(ds, CLF_SPLIT_TRAIN) < (size_t)T + 1)
        return clf_error_set(err, CLF_ERR_ARG,
                             "the training split has %zu tokens; context %d needs at least %d",
                             clf_dataset_size(ds, CLF_SPLIT_TRAIN), T, T + 1);
    if (clf_dataset_size(ds, CLF_SPLIT_VAL) < 2)
        return clf_error_set(err, CLF_ERR_ARG,
                             "the validation split has %zu tokens; at least 2 are needed",
                             clf_dataset_size(ds, CLF_SPLIT_VAL));
    return CLF_OK;
}

/* ---- the run ---------------------------------------------------------------------------- */

static clf_status check_data(run *r, const clf_model_config *cfg, clf_error *err)
{
    clf_model_dims d = clf_model_dims_get(r->m);
    const int B = cfg->train.batch, T = cfg->context;
    int metric = cfg->train.early_stop.metric;
    if (metric == CLF_METRIC_ACCURACY && cfg->kind != CLF_MODEL_ENCODER)
        return clf_error_set(err, CLF_ERR_CONFIG,
                             "train.early_stop.metric: accuracy needs a classifier (kind "
                             "encoder)");
    if (metric == CLF_METRIC_BLEU && cfg->kind != CLF_MODEL_ENCODER_DECODER)
        return clf_error_set(err, CLF_ERR_CONFIG,
                             "train.early_stop.metric: bleu needs a translator (kind "
                             "encoder-decoder)");
    if (r->seq) {
        if (r->data->train == NULL || r->data->val == NULL)
            return clf_error_set(err, CLF_ERR_ARG,
                                 "trainer: the %s kind trains on sentences (clf_train_data "
                                 "train and val)",
                                 clf_config_kind_name(cfg->kind));
        if (!clf_seqdata_has_targets(r->data->train) || !clf_seqdata_has_targets(r->data->val))
            return clf_error_set(err, CLF_ERR_ARG,
                                 "trainer: the training and validation sentences need %s",
                                 cfg->kind == CLF_MODEL_ENCODER ? "labels" : "targets");
        if (d.kind != (int)cfg->kind)
            return clf_error_set(err, CLF_ERR_ARG,
                                 "trainer: the model is not of the config's "
                                 "kind");
        return CLF_OK;
    }
    if (r->ds == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "trainer: a decoder trains on a text dataset");
    if (B <= 0 || B > d.B || T != d.T)
        return clf_error_set(err, CLF_ERR_ARG,
                             "trainer: the model was created for batch %d x context %d; the "
                             "config asks for %d x %d",
                             d.B, d.T, B, T);
    return clf_trainer_check_text(cfg, r->ds, err);
}

/* Training time, kept apart from evaluations, for the rates and the ETA.
 * (Kernel builds and GEMM timing happen when the model is created, so the
 * first step is an ordinary one.) */
typedef struct train_clock {
    double t_mark;         /* start of the current timing window */
    double window_time;    /* training time in the window */
    uint64_t window_steps; /* steps in the window */
    double window_tokens;  /* tokens of the window's steps */
    double train_time;     /* this session, evaluations excluded */
    double timed_tokens;   /* tokens in train_time */
    uint64_t timed_steps;  /* steps in train_time */
} train_clock;

/* Close the window at time t (its time counts as training). */
static void clock_fold(train_clock *c, double t)
{
    c->window_time += t - c->t_mark;
    c->train_time += t - c->t_mark;
    c->t_mark = t;
}

/* Check the arguments and prepare r: the batch source, the step count, the
 * checkpoint paths, the tokenizer's JSON, host batches; then resume. */
static clf_status run_open(run *r, uint64_t *total, clf_error *err)
{
    const clf_model_config *cfg = r->cfg;
    const clf_trainer_options *o = r->o;
    clf_status st;
    if (o->out_dir == NULL || o->out_dir[0] == '\0')
        return clf_error_set(err, CLF_ERR_ARG, "trainer: no output directory");
    if ((st = check_data(r, cfg, err)) != CLF_OK)
        return st;
    if ((st = source_create(cfg, r->data, &r->bo, &r->src, err)) != CLF_OK ||
        (st = clf_batch_source_total_steps(r->src, cfg->train.steps, cfg->train.epochs, total,
                                           err)) != CLF_OK)
        return st;
    r->n_micro = cfg->train.accumulate > 1 ? cfg->train.accumulate : 1;
    r->nranks = o->dist != NULL && o->dist->size > 1 ? o->dist->size : 1;
    r->rank = r->nranks > 1 ? o->dist->rank : 0;
    r->draws = r->n_micro * r->nranks;
    if (r->nranks > 1) {
        const clf_trainer_dist *d = o->dist;
        if (r->rank < 0 || r->rank >= r->nranks || d->allreduce_f32 == NULL ||
            d->allreduce_f64 == NULL || d->bcast_f64 == NULL)
            return clf_error_set(err, CLF_ERR_ARG,
                                 "trainer: data parallel: rank %d of %d, or a collective missing",
                                 r->rank, r->nranks);
        if ((st = clf_gradsync_create(r->m, d, &r->sync, err)) != CLF_OK ||
            (cfg->train.shard_optimizer && (st = shard_open(r, err)) != CLF_OK))
            return st;
    }
    *total = steps_of(cfg, *total, (uint64_t)r->draws); /* epochs count batches */
    if (r->draws > 1) {
        r->micro = calloc((size_t)r->n_micro, sizeof *r->micro);
        r->micro_data = calloc((size_t)r->n_micro, sizeof *r->micro_data);
        r->micro_cap = calloc((size_t)r->n_micro, sizeof *r->micro_cap);
        if (r->micro == NULL || r->micro_data == NULL || r->micro_cap == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    }
    if (*total == 0)
        return clf_error_set(err, CLF_ERR_CONFIG,
                             "train.steps: 0 steps to run (set train.steps or train.epochs)");
    int n = snprintf(r->path, sizeof r->path, "%s/%s", o->out_dir, CLF_CHECKPOINT_FILE);
    int n2 = snprintf(r->best_path, sizeof r->best_path, "%s/best.safetensors", o->out_dir);
    if (n < 0 || (size_t)n >= sizeof r->path || n2 < 0 || (size_t)n2 >= sizeof r->best_path)
        return clf_error_set(err, CLF_ERR_ARG, "output directory path too long");
    if ((st = clf_tokenizer_to_json(r->tok, &r->tok_json, NULL, err)) != CLF_OK)
        return st;
    if (!r->seq) {
        const size_t BT = (size_t)cfg->train.batch * (size_t)cfg->context;
        r->x = malloc(BT * sizeof *r->x);
        r->y = malloc(BT * sizeof *r->y);
        if (r->x == NULL || r->y == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "trainer: out of host memory");
    }
    return o->resume ? resume(r, err) : CLF_OK;
}

/* Read the loss after step `done` (this waits for the queue), report it,
 * and fold the timing window into the rates. */
static clf_status log_step(run *r, train_clock *c, clf_train_progress *p, uint64_t done, double lr,
                           float loss, clf_train_result *res, clf_error *err)
{
    clock_fold(c, clf_now_seconds());
    c->timed_steps += c->window_steps;
    c->timed_tokens += c->window_tokens;
    p->step = done;
    p->loss = loss;
    p->lr = lr;
    p->tokens_per_s = c->window_time > 0 ? c->window_tokens / c->window_time : 0;
    p->step_ms = c->window_steps > 0 ? 1e3 * c->window_time / c->window_steps : 0;
    p->eta_s = (double)(p->total - done) * (c->train_time / (double)c->timed_steps);
    p->elapsed_s = run_elapsed(r);
    res->last_loss = loss;
    if (clf_model_amp_enabled(r->m)) {
        p->loss_scale = r->amp.scale;
        p->skipped = r->amp.skipped;
    }
    if (!isfinite(loss))
        return clf_error_set(err, CLF_ERR_NUMERIC,
                             "training diverged: loss %g at step %llu (lr %g); lower "
                             "train.optimizer.lr or set train.grad_clip",
                             (double)loss, (unsigned long long)done, lr);
    if (r->o->cb.on_log)
        r->o->cb.on_log(r->o->cb.user, p);
    c->window_time = 0.0;
    c->window_steps = 0;
    c->window_tokens = 0.0;
    return CLF_OK;
}

/* The evaluation after step `done` and its checkpoint; *stop = 1 when early
 * stopping ends the run here. */
static clf_status eval_step(run *r, train_clock *c, uint64_t done, uint64_t total, int *stop,
                            clf_train_result *res, clf_error *err)
{
    const clf_model_config *cfg = r->cfg;
    /* The training work still queued (a logged step's loss is read after
     * its forward, before its backward and update) counts as training: the
     * last step's tail included, which short runs would otherwise miss. */
    clf_status st = clf_runtime_finish(clf_model_runtime(r->m), err);
    if (st != CLF_OK)
        return st;
    clock_fold(c, clf_now_seconds());
    st = evaluate(r, done, res, err);
    if (st == CLF_OK)
        st = save(r, err);
    if (st != CLF_OK)
        return st;
    c->t_mark = clf_now_seconds();
    const int patience = cfg->train.early_stop.patience;
    *stop = patience > 0 && (r->seq || cfg->train.early_stop.metric == CLF_METRIC_LOSS) &&
            r->evals_since_best >= patience && done < total;
    return CLF_OK;
}

static void run_close(run *r)
{
    free(r->tok_json);
    free(r->x);
    free(r->y);
    clf_model_destroy(r->infer);
    clf_batch_source_destroy(r->src);
    for (int i = 0; r->micro_data != NULL && i < r->n_micro; i++)
        free(r->micro_data[i]);
    free(r->micro_data);
    free(r->micro_cap);
    free(r->micro);
    clf_gradsync_destroy(r->sync); /* finishes the queue: r->gather's writes too */
    if (r->sync == NULL && r->gather != NULL)
        clf_runtime_finish(clf_model_runtime(r->m), NULL);
    free(r->slices);
    free(r->gather);
}

clf_status clf_trainer_run(clf_model *m, const clf_model_config *cfg, const clf_train_data *data,
                           const clf_tokenizer *tok, const clf_trainer_options *o,
                           clf_train_result *res, clf_error *err)
{
    run r;
    memset(&r, 0, sizeof r);
    memset(res, 0, sizeof *res);
    res->last_loss = res->last_val_loss = res->last_accuracy = res->last_bleu = NAN;
    res->best_metric = NAN;
    r.m = m;
    r.cfg = cfg;
    r.ds = data->text;
    r.data = data;
    r.tok = tok;
    r.o = o;
    r.seq = cfg->kind != CLF_MODEL_DECODER;
    r.best_val = INFINITY;
    r.t_start = clf_now_seconds();
    uint64_t total = 0;
    clf_schedule sched;
    clf_status st = run_open(&r, &total, err);
    if (st != CLF_OK || (st = clf_schedule_init(&sched, cfg, err)) != CLF_OK)
        goto fail;

    const uint64_t first = clf_model_state_get(m).step;
    const int log_every = cfg->train.log_every > 0 ? cfg->train.log_every : 1;
    const int eval_every = cfg->train.eval.every;
    clf_train_progress p;
    memset(&p, 0, sizeof p);
    p.step = p.first_step = first;
    p.total = total;
    p.loss = NAN;
    p.lr = clf_schedule_lr(&sched, first);
    p.elapsed_s = run_elapsed(&r);
    p.epoch = clf_batch_source_epoch(r.src);
    res->first_step = res->last_step = first;
    res->total = total;
    if (o->cb.on_start)
        o->cb.on_start(o->cb.user, &p);

    /* data parallel: the ranks start the clock together (one may still
     * have been compiling kernels or timing GEMMs) */
    if (r.nranks > 1) {
        double ready = 1.0;
        if ((st = o->dist->allreduce_f64(o->dist->user, &ready, 1, err)) != CLF_OK)
            goto fail;
    }
    train_clock c = {.t_mark = clf_now_seconds()};
    uint64_t saved_at = o->resume ? first : UINT64_MAX; /* step of the last checkpoint */
    for (uint64_t it = first; it < total; it++) {
        int stop_now = o->stop != NULL && *o->stop;
        if (r.nranks > 1) { /* one rank's signal stops them all at the same step */
            double any = stop_now;
            if ((st = o->dist->allreduce_f64(o->dist->user, &any, 1, err)) != CLF_OK)
                goto fail;
            stop_now = any > 0;
        }
        if (stop_now) {
            if (saved_at != it && (st = save(&r, err)) != CLF_OK)
                goto fail;
            res->interrupted = 1;
            st = clf_error_set(err, CLF_ERR_INTERRUPTED, "training stopped at step %llu of %llu",
                               (unsigned long long)it, (unsigned long long)total);
            goto done;
        }
        const double lr = clf_schedule_lr(&sched, it);
        const uint64_t done = it + 1;
        /* the session's first step is reported too: progress from the start */
        const int is_log = done == first + 1 || done % (uint64_t)log_every == 0 || done == total;
        float loss = 0.0f;
        double tokens = 0.0;
        int epoch_end = 0;
        if ((st = forward_backward(&r, is_log ? &loss : NULL, &tokens, &epoch_end, err)) !=
                CLF_OK ||
            (st = clf_model_step(m, (float)lr, err)) != CLF_OK ||
            (r.slices != NULL && (st = shard_gather_params(&r, err)) != CLF_OK))
            goto fail;
        res->last_step = done;
        c.window_steps++;
        c.window_tokens += tokens;
        p.epoch = r.last.epoch;
        const int is_eval = (eval_every > 0 && done % (uint64_t)eval_every == 0) || done == total ||
                            (r.seq && eval_every == 0 && epoch_end);
        if (is_log && (st = log_step(&r, &c, &p, done, lr, loss, res, err)) != CLF_OK)
            goto fail;
        int stop = 0;
        if (is_eval && (st = eval_step(&r, &c, done, total, &stop, res, err)) != CLF_OK)
            goto fail;
        if (is_eval)
            saved_at = done;
        if (stop) {
            res->early_stopped = 1;
            goto done;
        }
    }
    /* Here the run is complete (a stop that arrives during the last step
     * changes nothing: the final checkpoint is written), or a resumed run
     * had nothing left to do (its checkpoint is the one it came from). */
done:
    res->session_s = clf_now_seconds() - r.t_start;
    res->comm_wait_s = r.sync != NULL ? clf_gradsync_wait_s(r.sync) : 0.0;
    res->elapsed_s = run_elapsed(&r);
    res->tokens_per_s = c.train_time > 0 ? c.timed_tokens / c.train_time : 0.0;
    res->best_metric =
        isfinite(r.best_val)
            ? (cfg->train.early_stop.metric == CLF_METRIC_LOSS ? r.best_val : -r.best_val)
            : NAN;
    res->best_step = r.best_step;
fail:
    run_close(&r);
    return st;
}
