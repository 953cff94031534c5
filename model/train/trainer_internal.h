/*
 * trainer_internal.h - the trainer's run, shared by trainer.c (the loop,
 * the batches, logging), trainer_eval.c (evaluations, early stopping) and
 * trainer_ckpt.c (checkpoints, resume, ZeRO-1's gathers).
 */
#ifndef CLF_TRAINER_INTERNAL_H
#define CLF_TRAINER_INTERNAL_H

#include "model/data/source.h"
#include "model/train/gradsync.h"
#include "model/train/trainer.h"
#include "runtime/util.h"

/* Salts for the evaluation generators (re-seeded at every evaluation). */
#define EVAL_SALT_VAL 0x76616c5f6576616cull   /* "val_eval" */
#define EVAL_SALT_TRAIN 0x7472615f6576616cull /* "tra_eval" */
#define MAX_EXTRA 16 /* metadata entries of a checkpoint the trainer writes */

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
    int32_t *doc;   /* [B, T] their document ids (train.packing) */
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
    clf_model_amp amp;    /* fp16's loss scaling a logged step used, read beside its loss */
    int64_t loss_targets; /* the targets of all a step's draws (its mean loss) */
    int saved;            /* r->path holds a checkpoint of this run (resumed or written) */
    uint64_t saved_step;  /* its step */
} run;

/* train.keep_last: the checkpoint just written kept as
 * DIR/ckpt-<step>.safetensors (a hard link, else a copy), and those of
 * earlier steps beyond the newest keep_last removed (rank 0). */
clf_status tr_keep(run *r, uint64_t step, clf_error *err);

/* Training time so far, earlier sessions included. */
static inline double run_elapsed(const run *r)
{
    return r->elapsed_before + (clf_now_seconds() - r->t_start);
}

/* trainer_eval.c: the evaluation at `step` (its hook for the kind, the
 * ranks agreeing, early stopping's bookkeeping, the best checkpoint) into res. */
clf_status tr_evaluate(run *r, uint64_t step, clf_train_result *res, clf_error *err);

/* trainer_ckpt.c */
/* ZeRO-1: every rank's slice of the flat layout, checked to tile it. */
clf_status tr_shard_open(run *r, clf_error *err);
/* ZeRO-1: the parameters every rank updated, into every model. */
clf_status tr_shard_gather_params(run *r, clf_error *err);
/* A checkpoint of the run at path (atomically). */
clf_status tr_save_to(run *r, const char *path, clf_error *err);
/* The run's checkpoint (o->out_dir), rank 0 writing. */
clf_status tr_save(run *r, clf_error *err);
/* --resume: the checkpoint's parameters, optimizer state, data position and
 * time, after checking its config against this run's. */
clf_status tr_resume(run *r, clf_error *err);

#endif
