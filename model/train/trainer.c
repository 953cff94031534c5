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
 * Not here: evaluations (trainer_eval.c), checkpoints and resume
 * (trainer_ckpt.c), printing (callbacks), signal handlers (the caller's
 * *stop), creating the model (the caller picks the device and batch).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/eval/seqeval.h"
#include "model/train/checkpoint.h"
#include "model/train/schedule.h"
#include "model/train/trainer_internal.h"

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

/* The padding of one order's first epoch: 1 - real / slots per side. */
static clf_status padding_of(const clf_seqdata *ds, const clf_seq_batching *bo, double *src,
                             double *tgt, clf_error *err)
{
    clf_seq_loader *L = NULL;
    clf_status st = clf_seq_loader_create(ds, bo, &L, err);
    if (st != CLF_OK)
        return st;
    int64_t sr, sp, tr, tp;
    clf_seq_loader_padding(L, &sr, &sp, &tr, &tp);
    clf_seq_loader_destroy(L);
    *src = sp > 0 ? 1.0 - (double)sr / (double)sp : 0.0;
    *tgt = tp > 0 ? 1.0 - (double)tr / (double)tp : 0.0;
    return CLF_OK;
}

clf_status clf_trainer_seq_padding(const clf_model_config *cfg, const clf_train_data *data,
                                   clf_train_padding *p, clf_error *err)
{
    memset(p, 0, sizeof *p);
    if (data->train == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "trainer: no training sentences");
    clf_seq_batching bo;
    clf_trainer_seq_batching(cfg, data, &bo);
    clf_status st = padding_of(data->train, &bo, &p->src_bucketed, &p->tgt_bucketed, err);
    bo.order = CLF_SEQ_ORDER_SHUFFLED;
    if (st == CLF_OK)
        st = padding_of(data->train, &bo, &p->src_shuffled, &p->tgt_shuffled, err);
    return st;
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
 * (clf_trainer_dist). *tokens: what they count for throughput, every rank's;
 * r->last the last batch, *epoch_end whether any ended an epoch. A logged
 * step (read_logged after its update) keeps what its loss needs, on the
 * device: the micro-batches' losses summed over their targets (the step's
 * target count on the host), and with fp16's loss scaling a copy of the
 * scaling state this step used. */
static clf_status forward_backward(run *r, int logged, double *tokens, int *epoch_end,
                                   clf_error *err)
{
    clf_status st;
    const int amp = logged && clf_model_amp_enabled(r->m);
    if (r->draws <= 1) {
        if ((st = next_batch(r, err)) != CLF_OK || (st = clf_model_forward(r->m, 1, err)) != CLF_OK)
            return st;
        *tokens = r->last.tokens;
        *epoch_end = r->last.epoch_end;
        if ((st = clf_model_backward(r->m, err)) != CLF_OK)
            return st;
        return amp ? clf_model_amp_mark(r->m, err) : CLF_OK;
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
    r->loss_targets = total;
    clf_model_set_loss_scale(r->m, total > 0 ? (float)(1.0 / (double)total) : 0.0f);
    for (int i = 0; i < r->n_micro && st == CLF_OK; i++) {
        /* the dropout streams of draw first + i, as one process would use */
        clf_model_state ms = clf_model_state_get(r->m);
        ms.micro = (uint64_t)(first + i);
        clf_model_state_set(r->m, &ms);
        if ((st = clf_model_set_batch(r->m, r->micro[i], err)) != CLF_OK ||
            (st = clf_model_forward(r->m, 1, err)) != CLF_OK)
            break;
        if (logged)
            st = clf_model_loss_add(r->m, i == 0, err);
        if (st == CLF_OK && r->sync != NULL && i == r->n_micro - 1)
            clf_gradsync_arm(r->sync); /* the last backward's gradients are final */
        if (st == CLF_OK)
            st = clf_model_backward(r->m, err);
    }
    clf_model_set_loss_scale(r->m, 0.0f);
    if (st == CLF_OK && r->sync != NULL)
        st = clf_gradsync_finish(r->sync, err);
    if (st == CLF_OK && amp)
        st = clf_model_amp_mark(r->m, err);
    return st;
}

/* A logged step's figures, read after its update in one pause (nothing of
 * the next step is queued yet): the mean loss over the step's targets (every
 * rank's), the gradient norm, and with fp16 the loss scaling it used. */
static clf_status read_logged(run *r, float *loss, float *grad_norm, clf_error *err)
{
    float li = 0.0f;
    double sum = 0.0;
    clf_status st = clf_model_step_read(r->m, &li, &sum, grad_norm,
                                        clf_model_amp_enabled(r->m) ? &r->amp : NULL, err);
    if (st != CLF_OK || r->draws <= 1) {
        *loss = li;
        return st;
    }
    if (r->sync != NULL &&
        (st = r->o->dist->allreduce_f64(r->o->dist->user, &sum, 1, err)) != CLF_OK)
        return st;
    *loss = r->loss_targets > 0 ? (float)(sum / (double)r->loss_targets) : 0.0f;
    return CLF_OK;
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
            (cfg->train.shard_optimizer && (st = tr_shard_open(r, err)) != CLF_OK))
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
        r->doc = malloc(BT * sizeof *r->doc);
        if (r->x == NULL || r->y == NULL || r->doc == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "trainer: out of host memory");
    }
    return o->resume ? tr_resume(r, err) : CLF_OK;
}

/* Read step `done`'s figures (this waits for the queue), report them, and
 * fold the timing window into the rates. */
static clf_status log_step(run *r, train_clock *c, clf_train_progress *p, uint64_t done, double lr,
                           clf_train_result *res, clf_error *err)
{
    float loss = NAN, gn = NAN;
    clf_status st = read_logged(r, &loss, &gn, err);
    if (st != CLF_OK)
        return st;
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
    p->grad_norm = gn;
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
    /* The training work still queued (that of steps not logged) counts as
     * training: the last step's tail included, which short runs would
     * otherwise miss. */
    clf_status st = clf_runtime_finish(clf_model_runtime(r->m), err);
    if (st != CLF_OK)
        return st;
    clock_fold(c, clf_now_seconds());
    st = tr_evaluate(r, done, res, err);
    if (st == CLF_OK)
        st = tr_save(r, err);
    if (st == CLF_OK && cfg->train.keep_last > 0)
        st = tr_keep(r, done, err);
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
    free(r->doc);
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
    p.grad_norm = NAN;
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
            if (saved_at != it && (st = tr_save(&r, err)) != CLF_OK)
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
        double tokens = 0.0;
        int epoch_end = 0;
        if ((st = forward_backward(&r, is_log, &tokens, &epoch_end, err)) != CLF_OK ||
            (st = clf_model_step(m, (float)lr, err)) != CLF_OK ||
            (r.slices != NULL && (st = tr_shard_gather_params(&r, err)) != CLF_OK))
            goto fail;
        res->last_step = done;
        c.window_steps++;
        c.window_tokens += tokens;
        p.epoch = r.last.epoch;
        const int is_eval = (eval_every > 0 && done % (uint64_t)eval_every == 0) || done == total ||
                            (r.seq && eval_every == 0 && epoch_end);
        if (is_log && (st = log_step(&r, &c, &p, done, lr, res, err)) != CLF_OK)
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
    res->has_checkpoint = r.saved;
    res->checkpoint_step = r.saved_step;
    run_close(&r);
    return st;
}
