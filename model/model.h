/*
 * model.h - the Transformer graph built from a clf_model_config: parameters,
 * activations, forward, backward, the optimizer step and KV-cache inference.
 *
 * Overview
 *   clf_model_create() plans everything once: every parameter tensor (one
 *   flat device buffer each for parameters, gradients, Adam m and v), every
 *   activation sized for the maximum batch B x context T, the scratch of the
 *   backward pass (only with CLF_MODEL_TRAIN) and the KV caches (only with
 *   CLF_MODEL_INFER). Nothing is allocated afterwards; a step only enqueues
 *   kernels on the runtime's in-order queue and reads back nothing unless a
 *   *_read / clf_model_loss call asks for it.
 *
 *   Parameters live in one flat buffer: first every weight-decayed matrix
 *   (all 2-D tensors, embeddings included, as nanoGPT does), then the
 *   undecayed vectors (biases, norm weights), each tensor's offset aligned to
 *   16 floats. The table (clf_model_param_info) names every tensor the way
 *   checkpoints and the PyTorch parity fixtures do:
 *     wte [V, C]                      token embedding
 *     wpe [T, C]                      learned positions (positional: learned)
 *     blocks.<l>.ln1.weight [C]       (ln1.bias [C] for layernorm with bias)
 *     blocks.<l>.attn.qkv.weight [3C, C]   rows: q, then k, then v
 *     blocks.<l>.attn.qkv.bias [3C]        (attention.bias)
 *     blocks.<l>.attn.proj.weight [C, C], .bias [C]
 *     blocks.<l>.ln2.weight [C] (.bias)
 *     blocks.<l>.ffn.fc.weight [H, C]  ([2H, C] for swiglu: gate rows, then up rows)
 *     blocks.<l>.ffn.fc.bias, blocks.<l>.ffn.proj.weight [C, H], .bias [C]
 *     ln_f.weight [C] (.bias)          (final_norm not none)
 *     lm_head.weight [V, C]            (absent when tied to wte)
 *   Linear weights are stored as nn.Linear's [out, in]: y = x W^T + b.
 *
 *   Block wiring: pre-norm  x + f(norm(x));  post-norm  norm(x + f(x)).
 *   Attention: fused qkv GEMM, (rope on q and k), split into heads, batched
 *   q k^T, softmax with the causal mask and scale 1/sqrt(HS), dropout,
 *   batched P v, merge, projection, dropout, residual. FFN: fc GEMM, fused
 *   bias + activation (or SwiGLU), dropout on the hidden activation, proj
 *   GEMM, dropout, residual. Then the final norm, the LM head (tied: wte)
 *   and the fused cross-entropy (label smoothing, ignore index -1), which in
 *   training writes d(logits) over the logits in place.
 *
 *   Dropout masks come from the counter-based generator keyed by
 *   (train.seed, stream(step, micro, site)): `step` is the number of
 *   optimizer steps taken, `micro` the number of backward passes since the
 *   last step (gradient accumulation), `site` the op (embedding, or layer l's
 *   attention / residual / ffn dropout). A seed reproduces a run exactly, a
 *   resumed run continues it bit for bit, and backward regenerates the masks.
 *
 *   The host schedule computes the learning rate; clf_model_step takes it as
 *   a number. Gradients are zeroed at create and at the end of every step.
 *
 * Example (training)
 *   clf_model *m;
 *   clf_model_create(rt, &cfg, tok_vocab, cfg.train.batch, CLF_MODEL_TRAIN, &m, &e);
 *   for (step...) {
 *       clf_model_set_batch(m, x, y, B, T, &e);   // host int32 [B, T]; copied
 *       clf_model_forward(m, 1, &e);
 *       clf_model_backward(m, &e);
 *       clf_model_step(m, lr_of(step), &e);
 *       if (log) clf_model_loss(m, &loss, &e);  // the only read back
 *   }
 *
 * Example (generation)
 *   clf_model_create(rt, &cfg, V, 1, CLF_MODEL_INFER, &m, &e);
 *   clf_model_prefill(m, prompt, 1, n, logits, &e);      // logits of the last position
 *   for (pos = n; pos < T; pos++) { tok = sample(logits);
 *       clf_model_decode_step(m, &tok, 1, pos, logits, &e); }
 *   (past the context, re-prefill the last T-1 tokens: positions are absolute.)
 *
 * Not here: tokenizers, data, sampling, schedules, checkpoint files
 * (checkpoint.h), and for now the encoder and encoder-decoder kinds (create
 * refuses them with CLF_ERR_UNSUPPORTED; the block functions in
 * model_forward.c / model_backward.c take the query and key/value inputs,
 * the causal flag and lengths separately so that those kinds reuse them).
 */
#ifndef CLF_MODEL_H
#define CLF_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "../runtime/runtime.h"

typedef struct clf_model clf_model;
typedef struct clf_model_config clf_model_config; /* config/config.h */

/* Create flags. */
#define CLF_MODEL_TRAIN 1u /* gradients, Adam state, backward scratch */
#define CLF_MODEL_INFER 2u /* KV caches for clf_model_prefill / clf_model_decode_step */

/* Targets equal to this contribute no loss and no gradient. */
#define CLF_MODEL_IGNORE_INDEX (-1)

#define CLF_MODEL_NAME_MAX 96

typedef struct clf_param_info {
    char name[CLF_MODEL_NAME_MAX]; /* "blocks.0.attn.qkv.weight" */
    size_t offset;                 /* in floats, the same in params, grads, m and v */
    size_t numel;
    int ndim;        /* 1 or 2 */
    size_t shape[2]; /* shape[1] = 1 for vectors */
    int decay;       /* 1: in [0, n_decay), weight-decayed */
} clf_param_info;

typedef struct clf_model_dims {
    int B;  /* maximum batch */
    int T;  /* context */
    int C;  /* channels */
    int V;  /* vocabulary (the embedding table's rows) */
    int L;  /* layers */
    int NH; /* heads */
    int HS; /* head size */
    int H;  /* ffn hidden width (swiglu: the gate width; fc has 2H rows) */
    size_t n_params; /* floats in the flat buffer (alignment padding included) */
    size_t n_decay;  /* [0, n_decay) is weight-decayed */
    size_t n_real;   /* parameters proper, padding excluded */
} clf_model_dims;

/* Optimizer settings, from cfg->train at create; may be changed between steps. */
typedef struct clf_model_optim {
    float beta1, beta2, eps, weight_decay;
    float grad_clip; /* 0 = off */
    float label_smoothing;
} clf_model_optim;

/* The training position the dropout keys and the optimizer depend on. */
typedef struct clf_model_state {
    uint64_t step;  /* optimizer steps taken (Adam's t of the last step) */
    uint64_t micro; /* backward passes since the last step */
    uint64_t seed;  /* dropout seed (cfg->train.seed) */
} clf_model_state;

/* ---- lifetime ------------------------------------------------------------ */

/* Build the model for cfg (a resolved, validated config) with a vocabulary
 * of max(vocab_size, cfg->vocab.size) rows and batches of at most B
 * sequences of at most cfg->context tokens. Parameters get GPT-2's
 * initialisation from cfg->train.seed (clf_model_params_init). */
clf_status clf_model_create(clf_runtime *rt, const clf_model_config *cfg, int vocab_size, int B,
                            unsigned flags, clf_model **out, clf_error *err);
void clf_model_destroy(clf_model *m); /* NULL is a no-op */

/* Device bytes create would allocate, without a device (for `clformer info`). */
clf_status clf_model_memory_estimate(const clf_model_config *cfg, int vocab_size, int B,
                                     unsigned flags, size_t *bytes, clf_error *err);

/* CLF_OK if m has the structure cfg describes with vocab_size rows (every
 * setting that changes what the parameters mean: sizes, positions, norms,
 * activation, biases, tying, ...; not the batch, dropout or training
 * settings); else CLF_ERR_FORMAT naming the first setting that differs. */
clf_status clf_model_check_config(const clf_model *m, const clf_model_config *cfg,
                                  int vocab_size, clf_error *err);

clf_model_dims clf_model_dims_get(const clf_model *m);
clf_runtime *clf_model_runtime(const clf_model *m);

/* ---- parameters ------------------------------------------------------------ */

int clf_model_param_count(const clf_model *m);
const clf_param_info *clf_model_param_get(const clf_model *m, int i); /* NULL if out of range */
int clf_model_param_find(const clf_model *m, const char *name);       /* -1 if absent */

/* GPT-2 initialisation, uploaded once: weights normal(0, 0.02), the residual
 * projections (attn.proj, ffn.proj) normal(0, 0.02/sqrt(2 L)), biases 0,
 * norm weights 1. The host generator is splitmix64(seed) feeding Box-Muller
 * in double precision, drawn tensor by tensor in table order. Also zeroes
 * the gradients and the Adam state and resets the state to step 0. */
clf_status clf_model_params_init(clf_model *m, uint64_t seed, clf_error *err);

typedef enum clf_model_slot {
    CLF_SLOT_PARAM = 0,
    CLF_SLOT_GRAD,
    CLF_SLOT_ADAM_M,
    CLF_SLOT_ADAM_V,
} clf_model_slot;

/* Blocking copies of one tensor (numel floats) between the host and a flat
 * buffer. Reading a missing slot (grads without CLF_MODEL_TRAIN) fails. */
clf_status clf_model_tensor_read(clf_model *m, clf_model_slot slot, int index, float *dst,
                                 clf_error *err);
clf_status clf_model_tensor_write(clf_model *m, clf_model_slot slot, int index,
                                  const float *src, clf_error *err);
/* The whole flat buffer (n_params floats), for checkpoints. */
clf_status clf_model_flat_read(clf_model *m, clf_model_slot slot, float *dst, clf_error *err);
clf_status clf_model_flat_write(clf_model *m, clf_model_slot slot, const float *src,
                                clf_error *err);

/* ---- training ------------------------------------------------------------------ */

/* Copy a batch into the model: x tokens int32 [B, T], y targets int32 [B, T]
 * (NULL: no loss, e.g. for generation or logits only). 1 <= B <= max batch,
 * 1 <= T <= context; tokens must be in [0, V), targets in [0, V) or
 * CLF_MODEL_IGNORE_INDEX (checked here, on the host). The arrays are copied
 * to model-owned staging memory and written without blocking. */
clf_status clf_model_set_batch(clf_model *m, const int32_t *x, const int32_t *y, int B, int T,
                               clf_error *err);
/* Forward over the batch. train = 1: dropout on, and the loss op writes
 * d(logits) over the logits for clf_model_backward (needs targets). train
 * = 0: no dropout, logits kept for clf_model_logits_read. */
clf_status clf_model_forward(clf_model *m, int train, clf_error *err);
/* Backward of the last train forward; gradients accumulate (+=) into the
 * flat grad buffer (so several micro-batches add up; the loss of each is a
 * mean over its own non-ignored targets). */
clf_status clf_model_backward(clf_model *m, clf_error *err);
/* Global-norm clipping and the AdamW (Adam when weight_decay = 0) update
 * with learning rate lr, then the gradients are zeroed and step advances. */
clf_status clf_model_step(clf_model *m, float lr, clf_error *err);
clf_status clf_model_zero_grad(clf_model *m, clf_error *err);

/* Read-backs (blocking). loss: mean over the non-ignored targets of the last
 * forward. losses: per position [B*T] (0 where ignored). logits: [B*T, V]
 * after an eval forward. grad_norm: global norm before clipping, of the last
 * step. */
clf_status clf_model_loss(clf_model *m, float *out, clf_error *err);
clf_status clf_model_losses_read(clf_model *m, float *out, clf_error *err);
clf_status clf_model_logits_read(clf_model *m, float *out, clf_error *err);
clf_status clf_model_grad_norm(clf_model *m, float *out, clf_error *err);
/* Number of non-ignored targets in the current batch. */
int clf_model_target_count(const clf_model *m);

clf_model_optim clf_model_optim_get(const clf_model *m);
void clf_model_optim_set(clf_model *m, const clf_model_optim *o);
clf_model_state clf_model_state_get(const clf_model *m);
void clf_model_state_set(clf_model *m, const clf_model_state *s);

/* ---- inference (needs CLF_MODEL_INFER) ----------------------------------------- */

/* Run the prompt tokens [B, T] at positions 0..T-1 through the batched
 * forward, fill the KV caches, and write the logits of the last position
 * [B, V] (NULL: skip). */
clf_status clf_model_prefill(clf_model *m, const int32_t *tokens, int B, int T, float *logits,
                             clf_error *err);
/* One token per sequence, tokens [B], at position pos (the caches hold
 * 0..pos-1 from earlier calls; pos < context): logits [B, V]. Costs one
 * position's work. */
clf_status clf_model_decode_step(clf_model *m, const int32_t *tokens, int B, int pos,
                                 float *logits, clf_error *err);

#endif
