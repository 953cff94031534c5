/*
 * checkpoint.h - saving and restoring a model: parameters, AdamW state, the
 * training position, the config and the tokenizer, in one .safetensors file.
 *
 * The file (safetensors.h, written atomically: temporary file, fsync,
 * rename, so a crash never leaves a torn checkpoint):
 *   tensors   "<name>" F32 for every parameter of the model's table
 *             ("wte", "blocks.0.attn.qkv.weight", ...; model.h), and with
 *             the optimizer state "optim.m.<name>", "optim.v.<name>";
 *   metadata  "format": "clformer-checkpoint", "version": "1",
 *             "config": the canonical YAML of the config (clf_config_to_yaml),
 *             "tokenizer": the tokenizer's JSON (tokenizer.h),
 *             "vocab": the model's vocabulary rows, "step": optimizer steps
 *             taken, "seed": the dropout seed, "optim": "1" or "0",
 *             with fp16's loss scaling (clf_model_amp) and the optimizer
 *             state "loss_scale": "<scale> <clean steps> <skipped> <Adam's
 *             t>" (absent on loading: the configured first scale, t = step),
 *             plus the caller's own pairs (the trainer's data generator state,
 *             elapsed time, ...); these may not reuse the names above.
 *
 * Loading refuses, with CLF_ERR_FORMAT and a message naming the file and
 * what differs: a file that is not a clformer checkpoint of this version, a
 * truncated or corrupt file (safetensors.h checks the layout), a config that
 * does not parse, a model whose structure differs from the checkpoint's
 * config (clf_model_check_config), a missing, extra or differently shaped
 * tensor, and optimizer state asked for but absent.
 *
 *   clf_checkpoint *ck;
 *   clf_checkpoint_open("runs/cpu", &ck, err);        // a run directory or a file
 *   clf_checkpoint_tokenizer_create(ck, &tok, err);
 *   clf_checkpoint_model_create(ck, rt, &(clf_model_limits){.B = 1}, CLF_MODEL_INFER, &m, err);
 *   ... clf_checkpoint_meta(ck, "data_rng") ...
 *   clf_checkpoint_close(ck);
 * (Resuming creates the model itself and calls clf_checkpoint_load with
 * CLF_CHECKPOINT_ALL.)
 *
 * Not here: where checkpoints live and when they are written (trainer.h),
 * comparing a resumed run's config with the checkpoint's (the trainer uses
 * clf_config_diff), gradients (a checkpoint is taken between steps).
 */
#ifndef CLF_CHECKPOINT_H
#define CLF_CHECKPOINT_H

#include <stdint.h>

#include "config/config.h"
#include "model/graph/model.h"
#include "model/io/safetensors.h"
#include "model/text/tokenizer.h"
#include "runtime/status.h"

CLF_API_BEGIN

#define CLF_CHECKPOINT_FORMAT "clformer-checkpoint"
#define CLF_CHECKPOINT_VERSION "1"
/* The checkpoint's file name inside a run directory. */
#define CLF_CHECKPOINT_FILE "ckpt.safetensors"

/* What clf_checkpoint_load restores. */
#define CLF_CHECKPOINT_PARAMS 1u /* parameters only (sampling, evaluation) */
#define CLF_CHECKPOINT_OPTIM                                                                       \
    2u /* Adam moments and the step (resume), and train.ema's
                                    moving average when both have one */
/* with PARAMS: the file's moving average (train.ema) as the parameters,
 * when it has one (what evaluation, inference and export use) */
#define CLF_CHECKPOINT_AVERAGE 4u
#define CLF_CHECKPOINT_ALL 3u

/* A caller's metadata pair. */
typedef struct clf_checkpoint_extra {
    const char *key;
    const char *value;
} clf_checkpoint_extra;

/* Write m (parameters; Adam state when the model has it), cfg, the
 * tokenizer's JSON ("" allowed) and extra pairs to path, atomically. Blocks
 * until the device work queued before it is done. Refused between a
 * backward and its step (gradients are not saved). */
clf_status clf_checkpoint_save(const char *path, clf_model *m, const clf_model_config *cfg,
                               const char *tokenizer_json, const clf_checkpoint_extra *extra,
                               int n_extra, clf_error *err);
/* The same with Adam's moments from the host (n_params floats each, the
 * flat layout): for a model that holds a slice of them only (ZeRO-1: the
 * ranks gathered them first). NULL: from the model, as above. */
clf_status clf_checkpoint_save_ex(const char *path, clf_model *m, const clf_model_config *cfg,
                                  const char *tokenizer_json, const clf_checkpoint_extra *extra,
                                  int n_extra, const float *adam_m, const float *adam_v,
                                  clf_error *err);

typedef struct clf_checkpoint clf_checkpoint;

/* A parameter tensor in host memory, for writing a checkpoint without a
 * device (importers). */
typedef struct clf_checkpoint_tensor {
    const char *name; /* the model's name ("blocks.0.attn.qkv.weight") */
    int ndim;         /* 1 or 2 */
    int64_t shape[2];
    const float *data;
} clf_checkpoint_tensor;

/* Write a parameters-only checkpoint (step 0, no optimizer state) from host
 * tensors: cfg (validated), the tokenizer's JSON, the vocabulary size and
 * extra metadata pairs, atomically. Names and shapes are not checked here:
 * loading the file into a model of cfg does that. */
clf_status clf_checkpoint_write_params(const char *path, const clf_model_config *cfg,
                                       const char *tokenizer_json, int vocab,
                                       const clf_checkpoint_tensor *t, int n,
                                       const clf_checkpoint_extra *extra, int n_extra,
                                       clf_error *err);

/* Write the parameters of the checkpoint at path (a run directory or a
 * file) to out_path as dtype (CLF_ST_BF16 or CLF_ST_F16: half the size;
 * CLF_ST_F32), with its metadata (config, tokenizer, step) and without the
 * optimizer state: a checkpoint every inference command opens (the
 * parameters widened back to float32 on load). Atomic, as saving. */
clf_status clf_checkpoint_export(const char *path, const char *out_path, clf_st_dtype dtype,
                                 clf_error *err);

/* Open and check a checkpoint: format, version, config, vocabulary, step.
 * path is a run directory (its CLF_CHECKPOINT_FILE) or a .safetensors file. */
clf_status clf_checkpoint_open(const char *path, clf_checkpoint **out, clf_error *err);
void clf_checkpoint_close(clf_checkpoint *c); /* NULL is a no-op */
/* 1 if the file carries checksums (every tensor read from it is verified:
 * a corrupt one is CLF_ERR_FORMAT naming it); 0 for a file written before
 * clformer wrote them, read unverified. */
int clf_checkpoint_verified(const clf_checkpoint *c);
/* The file opened (DIR/ckpt.safetensors for a run directory). */
const char *clf_checkpoint_path(const clf_checkpoint *c);

const clf_model_config *clf_checkpoint_config(const clf_checkpoint *c);
const char *clf_checkpoint_tokenizer(const clf_checkpoint *c); /* "" if none */
int clf_checkpoint_vocab(const clf_checkpoint *c);
uint64_t clf_checkpoint_step(const clf_checkpoint *c);
int clf_checkpoint_has_optim(const clf_checkpoint *c);
/* 1 if the file holds train.ema's moving average ("ema.<name>" tensors). */
int clf_checkpoint_has_ema(const clf_checkpoint *c);
/* clf_checkpoint_model_create loads the trained parameters, not the
 * moving average it otherwise prefers (eval --no-ema). */
void clf_checkpoint_use_raw(clf_checkpoint *c);
/* Any metadata value by key (the caller's pairs included); NULL if absent. */
const char *clf_checkpoint_meta(const clf_checkpoint *c, const char *key);

/* Copy the checkpoint into m (created from a config with the same model
 * structure and vocabulary). CLF_CHECKPOINT_OPTIM also restores the Adam
 * moments and the step (m needs CLF_MODEL_TRAIN) and zeroes the gradients. */
clf_status clf_checkpoint_load(clf_checkpoint *c, clf_model *m, unsigned what, clf_error *err);

/* What clf_checkpoint_init_from did. */
typedef struct clf_checkpoint_init_report {
    int loaded;            /* the model's tensors taken from the checkpoint */
    int fresh;             /* the model's tensors it lacks (kept as initialised) */
    char fresh_names[256]; /* the first of them, comma-separated */
    int unused;            /* the checkpoint's tensors the model has no place for */
    char unused_names[256];
    int cut; /* position tables cut to the model's shorter context */
} clf_checkpoint_init_report;

/* Start m (created from cfg, its own initialisation done) from the
 * parameters of a checkpoint of the same architecture: fine-tuning
 * (`train --init`). cfg may differ from the checkpoint's in the head (a
 * classifier on an embedding model), dropout, the context (a shorter
 * context takes the first rows of the position table) and anything about
 * training; the body must agree (kind, dim, layers, heads, ffn, activation,
 * norms, positions, biases: else CLF_ERR_CONFIG naming the first key that
 * differs) and so must the vocabulary. Every tensor of m found in the
 * checkpoint with its shape is loaded; those absent (a new head) keep their
 * initialisation; a tensor of another shape is CLF_ERR_FORMAT naming it.
 * The optimizer state and the step are not taken. */
clf_status clf_checkpoint_init_from(clf_checkpoint *c, clf_model *m, const clf_model_config *cfg,
                                    clf_checkpoint_init_report *rep, clf_error *err);

/* The tokenizer the checkpoint carries (CLF_ERR_FORMAT if it has none). */
clf_status clf_checkpoint_tokenizer_create(const clf_checkpoint *c, clf_tokenizer **out,
                                           clf_error *err);

/* Run the checkpoint's model at another context: clf_config_set_context on
 * its config (what clf_checkpoint_config returns afterwards), before
 * clf_checkpoint_model_create. */
clf_status clf_checkpoint_set_context(clf_checkpoint *c, int context, int scaling, clf_error *err);

/* The mean of the parameters of n checkpoints of one model (each one's
 * moving average where it has one, what each was evaluated with, unless
 * raw: then the trained parameters), summed
 * in double in the order given, written to out_path as a parameters-only
 * checkpoint with the first's config and tokenizer ("averaged_from": n):
 * the Transformer paper's average of the last checkpoints. Checkpoints of
 * another model (config, vocabulary or tokenizer) are CLF_ERR_ARG naming
 * the first that differs. */
clf_status clf_checkpoint_average(const char *const *paths, int n, int raw, const char *out_path,
                                  clf_error *err);

/* A model on rt for the checkpoint's config and vocabulary, planned for lim
 * (NULL: the config's training batch) and created with flags, with the
 * checkpoint's parameters loaded. */
clf_status clf_checkpoint_model_create(clf_checkpoint *c, clf_runtime *rt,
                                       const clf_model_limits *lim, unsigned flags, clf_model **out,
                                       clf_error *err);

CLF_API_END

#endif
