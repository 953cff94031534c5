/*
 * trainer.h - the training loop as library code: batches, the learning-rate
 * schedule, optimizer steps, periodic evaluation, checkpoints, --resume and
 * a clean stop. The caller (cli/cmd_train.c, tests) owns the runtime, the
 * model, the dataset and the tokenizer, and sees progress only through
 * callbacks: the library never prints.
 *
 * One run
 *   it = the model's step (0 for a fresh model; the checkpoint's after
 *   resume); total = train.steps (or, with steps 0 and epochs > 0, epochs *
 *   ceil(train tokens / (B * T)) random batches). For each it < total:
 *     lr = clf_schedule_lr(it)                      (schedule.h)
 *     x, y = clf_dataset_sample_batch(train, B, T, data rng)
 *     set_batch, forward(train), backward, step(lr)
 *     done = it + 1
 *     log:   done % log_every == 0, the first step of the session, or the
 *            last: read the loss back (the only device round trip of a
 *            step) and call on_log with step/total, loss, lr, tokens/s,
 *            elapsed, ETA (the session's first step is a warm-up, kernel
 *            builds and GEMM tuning, left out of the rates and the ETA)
 *     eval:  done % eval.every == 0 (eval.every > 0), and at the last step:
 *            the validation loss (and a train-split estimate), on_eval, then
 *            a checkpoint (on_checkpoint)
 *     stop:  *stop set (a signal handler, a callback), looked at before
 *            each step: a checkpoint at the current step (unless one was
 *            just written), then CLF_ERR_INTERRUPTED.
 *     early stop: train.early_stop.patience > 0 (metric loss): after that
 *            many evaluations without a new best validation loss, stop
 *            (CLF_OK, res->early_stopped); the best and the count are in
 *            the checkpoint, so resuming keeps counting.
 *   The data generator is clf_rng_seed(train.seed) (dataset.h); dropout is
 *   keyed inside the model by (train.seed, step). Both, the parameters, the
 *   Adam moments and the step are in the checkpoint, so a run resumed from
 *   any checkpoint produces bit-identical losses to one never interrupted.
 *
 * Evaluation
 *   eval.batches > 0: the mean loss of that many random windows of each
 *   split, B x T each, drawn from generators re-seeded at every evaluation
 *   from train.seed (so every evaluation of a run sees the same windows and
 *   evaluations never disturb the training batches). eval.batches == 0: the
 *   whole validation split as clf_trainer_eval_split (exact, slow on large
 *   splits; the one place the loop allocates: its window buffers, once per
 *   evaluation).
 *   clf_trainer_eval_split: the deterministic rule of dataset.h (non-
 *   overlapping windows of the context, every target once), B windows per
 *   forward, per-position losses summed in double and divided by the number
 *   of targets. This is `clformer eval`.
 *
 * Checkpoints: <out_dir>/ckpt.safetensors, through checkpoint.h (atomic:
 * temporary file, fsync, rename), with the data generator's state and the
 * run's elapsed time in the metadata.
 *
 * Not here: printing, signal handling (the caller sets *stop), gradient
 * accumulation, several devices, the encoder kinds' data (later issues).
 */
#ifndef CLF_TRAINER_H
#define CLF_TRAINER_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "model/dataset.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "runtime/status.h"

#define CLF_TRAINER_CKPT_NAME "ckpt.safetensors"

typedef struct clf_train_progress {
    uint64_t step;       /* optimizer steps done */
    uint64_t total;      /* steps of the whole run */
    uint64_t first_step; /* the step this process started from (resume) */
    double loss;         /* training loss of the last step (only on logging steps) */
    double lr;           /* learning rate of the last step */
    double tokens_per_s; /* training tokens per second since the previous log; 0 for
                            the session's first step, a warm-up (kernel builds, GEMM
                            tuning) left out of every rate and of the ETA */
    double elapsed_s;    /* wall time of the run, earlier sessions (resume) included */
    double eta_s;        /* estimated time to the last step (training only); < 0 unknown */
    double step_ms;      /* mean wall time of a step since the previous log */
} clf_train_progress;

typedef struct clf_train_eval {
    uint64_t step;
    double val_loss;
    double train_loss; /* estimate over eval.batches train windows; NAN with batches 0 */
    uint64_t val_tokens; /* targets the validation loss averages over */
    double seconds;      /* time the evaluation took */
} clf_train_eval;

typedef struct clf_trainer_callbacks {
    void *user;
    /* The run is about to start (after a resume, state reflects it). */
    void (*on_start)(void *user, const clf_train_progress *p);
    void (*on_log)(void *user, const clf_train_progress *p);
    void (*on_eval)(void *user, const clf_train_eval *e);
    void (*on_checkpoint)(void *user, const char *path, uint64_t step);
} clf_trainer_callbacks;

typedef struct clf_trainer_options {
    const char *out_dir;         /* must exist; the checkpoint goes here */
    int resume;                  /* 1 = continue from out_dir's checkpoint */
    volatile sig_atomic_t *stop; /* may be NULL; nonzero = checkpoint and stop */
    clf_trainer_callbacks cb;    /* every member may be NULL */
} clf_trainer_options;

typedef struct clf_train_result {
    uint64_t first_step, last_step; /* this session's range */
    uint64_t total;
    double last_loss;     /* last logged training loss (NAN if none) */
    double last_val_loss; /* last evaluation (NAN if none) */
    double elapsed_s;     /* the run's wall time, earlier sessions included */
    double session_s;     /* this session's wall time */
    double tokens_per_s;  /* training tokens per second over this session (evaluations
                             and the warm-up step excluded) */
    int interrupted;
    int early_stopped;
} clf_train_result;

/* Steps a config asks for on a dataset (steps, or epochs as above). */
uint64_t clf_trainer_total_steps(const clf_model_config *cfg, const clf_dataset *ds);

/* Run (or continue) training. m was created from cfg with CLF_MODEL_TRAIN
 * and a batch of at least cfg->train.batch, tok is the tokenizer ds was
 * encoded with (it goes into the checkpoint). With resume, the checkpoint in
 * out_dir is loaded into m first; its config must equal cfg except for
 * train.steps, train.eval and train.log_every (CLF_ERR_ARG naming the first
 * key that differs otherwise). Returns CLF_ERR_INTERRUPTED after a stop
 * (the checkpoint written; *res filled). */
clf_status clf_trainer_run(clf_model *m, const clf_model_config *cfg, const clf_dataset *ds,
                           const clf_tokenizer *tok, const clf_trainer_options *o,
                           clf_train_result *res, clf_error *err);

/* Loss over a whole split by the evaluation windows of dataset.h, with the
 * model's context and up to its maximum batch of windows per forward: *loss
 * = sum of per-target losses / *targets. */
clf_status clf_trainer_eval_split(clf_model *m, const clf_dataset *ds, clf_split split,
                                  double *loss, uint64_t *targets, clf_error *err);

/* Mean loss of n random B x T windows of split drawn from rng. */
clf_status clf_trainer_eval_batches(clf_model *m, const clf_dataset *ds, clf_split split, int n,
                                    clf_rng *rng, double *loss, clf_error *err);

#endif
