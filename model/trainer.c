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
 * Not here: printing (callbacks), signal handlers (the caller's *stop),
 * creating the model (the caller picks the device and batch).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/checkpoint.h"
#include "model/schedule.h"
#include "model/trainer.h"

/* Salts for the evaluation generators (re-seeded at every evaluation). */
#define EVAL_SALT_VAL 0x76616c5f6576616cull   /* "val_eval" */
#define EVAL_SALT_TRAIN 0x7472615f6576616cull /* "tra_eval" */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

uint64_t clf_trainer_total_steps(const clf_model_config *cfg, const clf_dataset *ds)
{
    if (cfg->train.steps > 0)
        return (uint64_t)cfg->train.steps;
    if (cfg->train.epochs <= 0 || ds == NULL)
        return 0;
    uint64_t per_step = (uint64_t)cfg->train.batch * (uint64_t)cfg->context;
    uint64_t n = clf_dataset_size(ds, CLF_SPLIT_TRAIN);
    uint64_t per_epoch = (n + per_step - 1) / per_step;
    return per_epoch * (uint64_t)cfg->train.epochs;
}

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

static clf_status eval_batches_into(clf_model *m, const clf_dataset *ds, clf_split split, int n,
                                    int B, clf_rng *rng, int32_t *x, int32_t *y, double *loss,
                                    clf_error *err)
{
    clf_model_dims d = clf_model_dims_get(m);
    clf_model_optim saved = eval_begin(m);
    double sum = 0.0;
    clf_status st = CLF_OK;
    for (int i = 0; i < n; i++) {
        float l = 0.0f;
        if ((st = clf_dataset_sample_batch(ds, split, B, d.T, rng, x, y, err)) != CLF_OK)
            goto fail;
        if ((st = clf_model_set_batch(m, x, y, B, d.T, err)) != CLF_OK)
            goto fail;
        if ((st = clf_model_forward(m, 0, err)) != CLF_OK)
            goto fail;
        if ((st = clf_model_loss(m, &l, err)) != CLF_OK)
            goto fail;
        sum += (double)l;
    }
    *loss = n > 0 ? sum / n : NAN;
fail:
    clf_model_optim_set(m, &saved);
    return st;
}

clf_status clf_trainer_eval_batches(clf_model *m, const clf_dataset *ds, clf_split split, int n,
                                    clf_rng *rng, double *loss, clf_error *err)
{
    clf_model_dims d = clf_model_dims_get(m);
    size_t cells = (size_t)d.B * (size_t)d.T;
    int32_t *x = malloc(cells * sizeof *x), *y = malloc(cells * sizeof *y);
    clf_status st;
    if (x == NULL || y == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "evaluation: out of host memory");
        goto fail;
    }
    st = eval_batches_into(m, ds, split, n, d.B, rng, x, y, loss, err);
fail:
    free(x);
    free(y);
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
        st = clf_error_set(err, CLF_ERR_ARG,
                           "evaluation: the %s split has fewer than 2 tokens",
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
        if ((st = clf_model_set_batch(m, x, y, nb, d.T, err)) != CLF_OK)
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
    const clf_dataset *ds;
    const clf_trainer_options *o;
    char path[4096];
    char *tok_json;
    int32_t *x, *y; /* [B, T] host batches */
    clf_rng data_rng;
    double elapsed_before; /* earlier sessions (resume) */
    double t_start;        /* this session's start */
    double best_val;       /* early stopping */
    int evals_since_best;
} run;

static double run_elapsed(const run *r) { return r->elapsed_before + (now_s() - r->t_start); }

static clf_status save(run *r, clf_error *err)
{
    char rng[CLF_RNG_STRING_MAX], el[64], best[64], since[32];
    clf_rng_to_string(&r->data_rng, rng);
    snprintf(el, sizeof el, "%.17g", run_elapsed(r));
    snprintf(best, sizeof best, "%.17g", r->best_val);
    snprintf(since, sizeof since, "%d", r->evals_since_best);
    const clf_checkpoint_extra extra[] = {
        {"data_rng", rng},
        {"elapsed_s", el},
        {"best_val_loss", best},
        {"evals_since_best", since},
    };
    clf_status st = clf_checkpoint_save(r->path, r->m, r->cfg, r->tok_json, extra,
                                        (int)(sizeof extra / sizeof extra[0]), err);
    if (st != CLF_OK)
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
    char key[256] = "";
    if (clf_config_diff(ck, &a, key, sizeof key) != 0)
        return clf_error_set(err, CLF_ERR_ARG,
                             "--resume: the model file differs from the checkpoint's config at "
                             "'%s'; only train.steps, train.epochs, train.eval, "
                             "train.log_every and train.early_stop.patience may change",
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
        return clf_error_set(err, CLF_ERR_FORMAT, "--resume: checkpoint metadata %s='%s' is "
                             "not a number", key, v);
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
    const char *rng = clf_checkpoint_meta(ck, "data_rng");
    if (rng == NULL) {
        st = clf_error_set(err, CLF_ERR_FORMAT,
                           "--resume: %s has no data generator state (data_rng)", r->path);
        goto fail;
    }
    if ((st = clf_rng_from_string(rng, &r->data_rng, err)) != CLF_OK)
        goto fail;
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

static clf_status evaluate(run *r, uint64_t step, clf_train_result *res, clf_error *err)
{
    const clf_model_config *cfg = r->cfg;
    double t0 = now_s();
    clf_train_eval e;
    memset(&e, 0, sizeof e);
    e.step = step;
    e.train_loss = NAN;
    clf_status st;
    int n = cfg->train.eval.batches;
    size_t nval = clf_dataset_size(r->ds, CLF_SPLIT_VAL);
    clf_model_dims d = clf_model_dims_get(r->m);
    if (n > 0 && nval >= (size_t)d.T + 1) {
        clf_rng vr, tr;
        clf_rng_seed(&vr, cfg->train.seed ^ EVAL_SALT_VAL);
        clf_rng_seed(&tr, cfg->train.seed ^ EVAL_SALT_TRAIN);
        st = eval_batches_into(r->m, r->ds, CLF_SPLIT_VAL, n, cfg->train.batch, &vr, r->x, r->y,
                               &e.val_loss, err);
        if (st == CLF_OK)
            st = eval_batches_into(r->m, r->ds, CLF_SPLIT_TRAIN, n, cfg->train.batch, &tr, r->x,
                                   r->y, &e.train_loss, err);
        e.val_tokens = (uint64_t)n * (uint64_t)cfg->train.batch * (uint64_t)d.T;
    } else {
        st = clf_trainer_eval_split(r->m, r->ds, CLF_SPLIT_VAL, &e.val_loss, &e.val_tokens, err);
    }
    if (st != CLF_OK)
        return st;
    e.seconds = now_s() - t0;
    res->last_val_loss = e.val_loss;
    if (e.val_loss < r->best_val) {
        r->best_val = e.val_loss;
        r->evals_since_best = 0;
    } else {
        r->evals_since_best++;
    }
    if (r->o->cb.on_eval)
        r->o->cb.on_eval(r->o->cb.user, &e);
    return CLF_OK;
}

clf_status clf_trainer_run(clf_model *m, const clf_model_config *cfg, const clf_dataset *ds,
                           const clf_tokenizer *tok, const clf_trainer_options *o,
                           clf_train_result *res, clf_error *err)
{
    run r;
    memset(&r, 0, sizeof r);
    memset(res, 0, sizeof *res);
    res->last_loss = NAN;
    res->last_val_loss = NAN;
    r.m = m;
    r.cfg = cfg;
    r.ds = ds;
    r.o = o;
    r.best_val = INFINITY;
    r.t_start = now_s();
    clf_status st = CLF_OK;
    clf_model_dims d = clf_model_dims_get(m);
    const int B = cfg->train.batch, T = cfg->context;
    const uint64_t total = clf_trainer_total_steps(cfg, ds);
    clf_schedule sched;

    if (o->out_dir == NULL || o->out_dir[0] == '\0') {
        st = clf_error_set(err, CLF_ERR_ARG, "trainer: no output directory");
        goto fail;
    }
    if (B <= 0 || B > d.B || T != d.T) {
        st = clf_error_set(err, CLF_ERR_ARG,
                           "trainer: the model was created for batch %d x context %d; the "
                           "config asks for %d x %d",
                           d.B, d.T, B, T);
        goto fail;
    }
    if (total == 0) {
        st = clf_error_set(err, CLF_ERR_CONFIG,
                           "train.steps: 0 steps to run (set train.steps or train.epochs)");
        goto fail;
    }
    if (clf_dataset_size(ds, CLF_SPLIT_TRAIN) < (size_t)T + 1) {
        st = clf_error_set(err, CLF_ERR_ARG,
                           "the training split has %zu tokens; context %d needs at least %d",
                           clf_dataset_size(ds, CLF_SPLIT_TRAIN), T, T + 1);
        goto fail;
    }
    if (clf_dataset_size(ds, CLF_SPLIT_VAL) < 2) {
        st = clf_error_set(err, CLF_ERR_ARG,
                           "the validation split has %zu tokens; at least 2 are needed",
                           clf_dataset_size(ds, CLF_SPLIT_VAL));
        goto fail;
    }
    if ((st = clf_schedule_init(&sched, cfg, err)) != CLF_OK)
        goto fail;
    {
        int n = snprintf(r.path, sizeof r.path, "%s/%s", o->out_dir, CLF_TRAINER_CKPT_NAME);
        if (n < 0 || (size_t)n >= sizeof r.path) {
            st = clf_error_set(err, CLF_ERR_ARG, "output directory path too long");
            goto fail;
        }
    }
    if ((st = clf_tokenizer_to_json(tok, &r.tok_json, NULL, err)) != CLF_OK)
        goto fail;
    r.x = malloc((size_t)B * (size_t)T * sizeof *r.x);
    r.y = malloc((size_t)B * (size_t)T * sizeof *r.y);
    if (r.x == NULL || r.y == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "trainer: out of host memory");
        goto fail;
    }
    clf_rng_seed(&r.data_rng, cfg->train.seed);
    if (o->resume && (st = resume(&r, err)) != CLF_OK)
        goto fail;

    const uint64_t first = clf_model_state_get(m).step;
    const int log_every = cfg->train.log_every > 0 ? cfg->train.log_every : 1;
    const int eval_every = cfg->train.eval.every;
    const double tokens_per_step = (double)B * (double)T;
    clf_train_progress p;
    memset(&p, 0, sizeof p);
    p.step = first;
    p.total = total;
    p.first_step = first;
    p.loss = NAN;
    p.lr = clf_schedule_lr(&sched, first);
    p.elapsed_s = run_elapsed(&r);
    res->first_step = res->last_step = first;
    res->total = total;
    if (o->cb.on_start)
        o->cb.on_start(o->cb.user, &p);

    double train_time = 0.0;       /* this session, evaluations excluded */
    double t_mark = now_s();       /* start of the current timing window */
    double window_time = 0.0;      /* training time in the window */
    uint64_t window_steps = 0;
    uint64_t timed_steps = 0;      /* steps in train_time (the warm-up step excluded) */
    uint64_t saved_at = o->resume ? first : UINT64_MAX; /* step of the last checkpoint */

    for (uint64_t it = first; it < total; it++) {
        if (o->stop != NULL && *o->stop) {
            if (saved_at != it && (st = save(&r, err)) != CLF_OK)
                goto fail;
            res->interrupted = 1;
            st = clf_error_set(err, CLF_ERR_INTERRUPTED, "training stopped at step %llu of %llu",
                               (unsigned long long)it, (unsigned long long)total);
            goto done;
        }
        double lr = clf_schedule_lr(&sched, it);
        if ((st = clf_dataset_sample_batch(ds, CLF_SPLIT_TRAIN, B, T, &r.data_rng, r.x, r.y,
                                           err)) != CLF_OK ||
            (st = clf_model_set_batch(m, r.x, r.y, B, T, err)) != CLF_OK ||
            (st = clf_model_forward(m, 1, err)) != CLF_OK ||
            (st = clf_model_backward(m, err)) != CLF_OK ||
            (st = clf_model_step(m, (float)lr, err)) != CLF_OK)
            goto fail;
        const uint64_t done = it + 1;
        res->last_step = done;
        window_steps++;
        int is_eval = (eval_every > 0 && done % (uint64_t)eval_every == 0) || done == total;
        int is_log = done % (uint64_t)log_every == 0 || done == total;
        if (done == first + 1) {
            /* The first step of a session is a warm-up (kernel builds, GEMM
             * tuning): it is reported but left out of the rates and the ETA. */
            float loss = 0.0f;
            if ((st = clf_model_loss(m, &loss, err)) != CLF_OK)
                goto fail;
            p.step = done;
            p.loss = loss;
            p.lr = lr;
            p.tokens_per_s = 0.0;
            p.step_ms = 1e3 * (now_s() - t_mark);
            p.elapsed_s = run_elapsed(&r);
            p.eta_s = -1.0;
            res->last_loss = loss;
            if (o->cb.on_log)
                o->cb.on_log(o->cb.user, &p);
            window_steps = 0;
            t_mark = now_s();
            is_log = 0;
        }
        if (is_log) {
            float loss = 0.0f;
            if ((st = clf_model_loss(m, &loss, err)) != CLF_OK) /* waits for the queue */
                goto fail;
            double t = now_s();
            window_time += t - t_mark;
            train_time += t - t_mark;
            t_mark = t;
            timed_steps += window_steps;
            p.step = done;
            p.loss = loss;
            p.lr = lr;
            p.tokens_per_s = window_time > 0 ? tokens_per_step * window_steps / window_time : 0;
            p.step_ms = window_steps > 0 ? 1e3 * window_time / window_steps : 0;
            p.elapsed_s = run_elapsed(&r);
            p.eta_s = (double)(total - done) * (train_time / (double)timed_steps);
            res->last_loss = loss;
            if (!isfinite(loss)) {
                st = clf_error_set(err, CLF_ERR_CONFIG,
                                   "training diverged: loss %g at step %llu (lr %g); lower "
                                   "train.optimizer.lr or set train.grad_clip",
                                   (double)loss, (unsigned long long)done, lr);
                goto fail;
            }
            if (o->cb.on_log)
                o->cb.on_log(o->cb.user, &p);
            window_time = 0.0;
            window_steps = 0;
        }
        if (is_eval) {
            double t = now_s();
            if (!is_log && done != first + 1) {
                window_time += t - t_mark;
                train_time += t - t_mark;
            }
            if ((st = evaluate(&r, done, res, err)) != CLF_OK)
                goto fail;
            if ((st = save(&r, err)) != CLF_OK)
                goto fail;
            saved_at = done;
            t_mark = now_s();
            int patience = cfg->train.early_stop.patience;
            if (patience > 0 && cfg->train.early_stop.metric == CLF_METRIC_LOSS &&
                r.evals_since_best >= patience && done < total) {
                res->early_stopped = 1;
                goto done;
            }
        }
    }
    /* Here the run is complete (a stop that arrives during the last step
     * changes nothing: the final checkpoint is written), or a resumed run
     * had nothing left to do (its checkpoint is the one it came from). */
done:
    {
        double t = now_s();
        res->session_s = t - r.t_start;
        res->elapsed_s = run_elapsed(&r);
        res->tokens_per_s = train_time > 0 ? tokens_per_step * (double)timed_steps / train_time
                                           : 0.0;
    }
fail:
    free(r.tok_json);
    free(r.x);
    free(r.y);
    return st;
}
