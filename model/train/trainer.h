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
 *            elapsed, ETA (kernels are built and GEMM shapes timed when
 *            the model is created, so every step counts in the rates)
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
 * The encoder kinds (clf_trainer_run_data): the same loop, with batches
 * from the sentence loader of seqdata.h instead of random windows:
 *   batches  bucketed by length (CLF_SEQ_ORDER_BUCKETED), train.batch
 *            sentences each, or a token budget (clf_train_data.batch_tokens,
 *            B x max(S, T) slots, train.batch then caps B); seeded by
 *            train.seed, one epoch = one pass over the training sentences.
 *   total    train.steps, or with steps 0 train.epochs x the batches of each
 *            epoch (exact: each epoch is planned ahead to count them).
 *   eval     eval.every > 0: every that many steps; eval.every 0: at the end
 *            of every epoch; and after the last step. Each evaluation
 *            computes over the whole validation set (eval.batches is not
 *            used): the loss (label smoothing off), the classifier's
 *            accuracy, and the translator's corpus BLEU (seqeval.h:
 *            sacreBLEU 13a on detokenized text) with clf_train_data.decode
 *            (beam 1: greedy), run on an inference copy of the model
 *            created at the first evaluation (parameters copied in before
 *            each).
 *   early stop  train.early_stop.patience evaluations without a better
 *            train.early_stop.metric: loss (lower is better), accuracy
 *            (classifier) or bleu (translator), both higher is better.
 *   resume   the loader's position (epoch, next batch) is in the checkpoint
 *            (data_state), with the token budget; a resumed run continues
 *            bit for bit, as the GPT's.
 *
 * Not here: printing, signal handling (the caller sets *stop), gradient
 * accumulation, several devices.
 */
#ifndef CLF_TRAINER_H
#define CLF_TRAINER_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "model/data/dataset.h"
#include "model/data/seqdata.h"
#include "model/graph/model.h"
#include "model/infer/beam.h"
#include "model/text/tokenizer.h"
#include "model/train/checkpoint.h"
#include "runtime/status.h"

CLF_API_BEGIN

typedef struct clf_train_progress {
    uint64_t step;       /* optimizer steps done */
    uint64_t total;      /* steps of the whole run */
    uint64_t first_step; /* the step this process started from (resume) */
    double loss;         /* training loss of the last step (only on logging steps) */
    double lr;           /* learning rate of the last step */
    double tokens_per_s; /* training tokens per second since the previous log */
    double elapsed_s;    /* wall time of the run, earlier sessions (resume) included */
    double eta_s;        /* estimated time to the last step (training only); < 0 unknown */
    double step_ms;      /* mean wall time of a step since the previous log */
    int64_t epoch;       /* encoder kinds: the epoch of the last batch (0-based); -1 for a
                            decoder */
    double loss_scale;   /* fp16's loss scale this step's backward used (logging steps):
                            0 without loss scaling */
    uint64_t skipped;    /* steps fp16's loss scaling skipped before this one (an inf or
                            NaN in their gradients) */
    double grad_norm;    /* the gradients' global norm before clipping, of the last step
                            (logging steps; NAN on other calls) */
} clf_train_progress;

typedef struct clf_train_eval {
    uint64_t step;
    double val_loss;
    double train_loss;   /* estimate over eval.batches train windows; NAN with batches 0 */
    uint64_t val_tokens; /* targets the validation loss averages over */
    double seconds;      /* time the evaluation took */
    int64_t epoch;       /* encoder kinds: epochs completed at this evaluation; -1 for a
                            decoder */
    double accuracy;     /* classifier: validation accuracy in [0, 1]; else NAN */
    double bleu;         /* translator: validation corpus BLEU in [0, 100]; else NAN */
    double bleu_bp;      /* its brevity penalty and hypothesis/reference length ratio */
    double bleu_ratio;
    int best; /* 1 if this evaluation is the best so far by the early-stop metric */
} clf_train_eval;

typedef struct clf_trainer_callbacks {
    void *user;
    /* The run is about to start (after a resume, state reflects it). */
    void (*on_start)(void *user, const clf_train_progress *p);
    void (*on_log)(void *user, const clf_train_progress *p);
    void (*on_eval)(void *user, const clf_train_eval *e);
    void (*on_checkpoint)(void *user, const char *path, uint64_t step);
} clf_trainer_callbacks;

/* Data-parallel training: `size` processes (ranks) run the same trainer on
 * the same config, each with its own model on its own device, and these
 * collectives join them (the CLI implements them with MPI; the library
 * never links it). Every rank draws every batch of a step (size x
 * train.accumulate micro-batches, the same sequence one process with
 * train.accumulate = size x accumulate would draw) and runs forward and
 * backward on its own share (rank r: micro-batches r*A .. r*A+A-1, with
 * their dropout streams), each scaled by 1 / (the targets of the whole
 * step); the gradients are then summed across ranks, bucket by bucket as
 * backward produces them, so every rank applies the same update to the
 * same parameters. Evaluations run on every rank and rank 0's result is
 * used by all; checkpoints are written by rank 0 only, and carry `size`
 * (a resume with another size is refused).
 *
 * train.shard_optimizer (ZeRO-1): each rank's model is created with
 * limits.shard = rank, shards = size, so it holds and updates only its
 * slice of Adam's moments and of the parameters; after each step the
 * ranks gather the updated parameters (allgather_f32), and before a
 * checkpoint the moments. The update is elementwise, so the result is the
 * unsharded run's bit for bit. */
typedef struct clf_trainer_dist {
    int rank, size; /* size <= 1: one process (the other members unused) */
    void *user;
    /* every rank's n values summed, in place, on every rank */
    clf_status (*allreduce_f32)(void *user, float *buf, size_t n, clf_error *err);
    clf_status (*allreduce_f64)(void *user, double *buf, size_t n, clf_error *err);
    /* rank 0's n values to every rank, in place */
    clf_status (*bcast_f64)(void *user, double *buf, size_t n, clf_error *err);
    /* every rank's slice buf[offsets[r] .. offsets[r+1]) to every rank, in
     * place (offsets: size + 1 ascending floats); needed with
     * train.shard_optimizer only */
    clf_status (*allgather_f32)(void *user, float *buf, const size_t *offsets, clf_error *err);
    size_t bucket_bytes; /* gradients per reduction; 0: 1 MiB on a GPU, all of them after
                            backward on a CPU device (gradsync.h) */
} clf_trainer_dist;

typedef struct clf_trainer_options {
    const char *out_dir;          /* must exist; the checkpoint goes here */
    int resume;                   /* 1 = continue from out_dir's checkpoint */
    volatile sig_atomic_t *stop;  /* may be NULL; nonzero = checkpoint and stop */
    clf_trainer_callbacks cb;     /* every member may be NULL */
    const clf_trainer_dist *dist; /* NULL: one process */
} clf_trainer_options;

typedef struct clf_train_result {
    uint64_t first_step, last_step; /* this session's range */
    uint64_t total;
    double last_loss;     /* last logged training loss (NAN if none) */
    double last_val_loss; /* last evaluation (NAN if none) */
    double last_accuracy; /* last evaluation's accuracy / BLEU (NAN if none) */
    double last_bleu;
    double best_metric;  /* best evaluation by the early-stop metric (NAN if none) */
    uint64_t best_step;  /* its step */
    double elapsed_s;    /* the run's wall time, earlier sessions included */
    double session_s;    /* this session's wall time */
    double tokens_per_s; /* training tokens per second over this session (evaluations
                             excluded; every rank's tokens) */
    double comm_wait_s;  /* data parallel: host time inside the gradient reductions (waiting
                            for the other ranks, and the transfers) */
    int interrupted;
    int early_stopped;
    int has_checkpoint;       /* the out_dir's checkpoint is this run's, also after an error */
    uint64_t checkpoint_step; /* the step it holds: where --resume continues */
} clf_train_result;

/* What a run trains on: a decoder's text, or the encoder kinds' sentences. */
typedef struct clf_train_data {
    const clf_dataset *text;           /* decoder: the text and its train/val splits */
    const clf_seqdata *train;          /* encoder / encoder-decoder: training sentences */
    const clf_seqdata *val;            /*   validation sentences (with targets or labels) */
    const char *const *val_refs;       /*   translator: raw reference lines of val for BLEU
                                         (NULL: val's targets decoded) */
    int batch_tokens;                  /*   token budget per batch (0: train.batch sentences) */
    clf_beam_options decode;           /*   translator: decoding for BLEU (clf_beam_options_default
                                         for greedy; .batch sentences per search) */
    const clf_checkpoint_extra *extra; /* more metadata for every checkpoint (e.g. the
                                          languages); may be NULL */
    int n_extra;
} clf_train_data;

/* The sentence loader's options for a run (bucketed, seeded by train.seed). */
void clf_trainer_seq_batching(const clf_model_config *cfg, const clf_train_data *data,
                              clf_seq_batching *bo);
/* The share of padded slots in the first epoch's training batches, source
 * and target (0 for a classifier's), length-bucketed as the run batches
 * them and shuffled without sorting (the baseline bucketing is measured
 * against): 1 - real tokens / (B x row length) summed over the batches. */
typedef struct clf_train_padding {
    double src_bucketed, tgt_bucketed, src_shuffled, tgt_shuffled;
} clf_train_padding;
clf_status clf_trainer_seq_padding(const clf_model_config *cfg, const clf_train_data *data,
                                   clf_train_padding *p, clf_error *err);

/* The limits to create an encoder kind's model with (clf_model_create_ex),
 * covering the training batches of every epoch and the evaluation batches. */
clf_status clf_trainer_seq_limits(const clf_model_config *cfg, const clf_train_data *data,
                                  clf_model_limits *lim, clf_error *err);
/* Whether a text data set can train cfg's decoder (a training split longer
 * than the context, a validation split of 2 tokens or more): the trainer
 * checks it; a caller may ask before opening a device. */
clf_status clf_trainer_check_text(const clf_model_config *cfg, const clf_dataset *ds,
                                  clf_error *err);
/* Steps of the run: train.steps, or train.epochs passes over the data (a
 * decoder: ceil(train tokens / (B x T)) batches an epoch; the encoder
 * kinds: the sentence loader's batches an epoch), a step taking
 * train.accumulate x ranks of those batches (ranks: the data-parallel
 * processes, 1 without), as clf_trainer_run counts them. */
clf_status clf_trainer_total_steps(const clf_model_config *cfg, const clf_train_data *data,
                                   int ranks, uint64_t *total, clf_error *err);

/* Run (or continue) training, for every model kind. m was created from cfg
 * with CLF_MODEL_TRAIN: a decoder with a batch of at least
 * cfg->train.batch, the encoder kinds with clf_model_create_ex and
 * clf_trainer_seq_limits. tok is the tokenizer the data was encoded with
 * (it goes into the checkpoint). With resume, the checkpoint in out_dir is
 * loaded into m first; its config must equal cfg except for train.steps,
 * train.eval and train.log_every (CLF_ERR_ARG naming the first key that
 * differs otherwise). Returns CLF_ERR_INTERRUPTED after a stop (the
 * checkpoint written; *res filled). */
clf_status clf_trainer_run(clf_model *m, const clf_model_config *cfg, const clf_train_data *data,
                           const clf_tokenizer *tok, const clf_trainer_options *o,
                           clf_train_result *res, clf_error *err);

/* Loss over a whole split by the evaluation windows of dataset.h, with the
 * model's context and up to its maximum batch of windows per forward: *loss
 * = sum of per-target losses / *targets. */
clf_status clf_trainer_eval_split(clf_model *m, const clf_dataset *ds, clf_split split,
                                  double *loss, uint64_t *targets, clf_error *err);

CLF_API_END

#endif
