/*
 * model.h - the Transformer graph built from a clf_model_config: parameters,
 * activations, forward, backward, the optimizer step and cached inference,
 * for the three kinds: decoder (GPT), encoder (classifier) and
 * encoder-decoder (translator).
 *
 * Overview
 *   clf_model_create() plans everything once: every parameter tensor (one
 *   flat device buffer each for parameters, gradients, Adam m and v), every
 *   activation sized for the largest batch (clf_model_limits: batch,
 *   source and target lengths, tokens and attention-score counts), the
 *   scratch of the backward pass (only with CLF_MODEL_TRAIN) and the KV
 *   caches (only with CLF_MODEL_INFER). Nothing is allocated afterwards; a
 *   step only enqueues kernels on the runtime's in-order queue and reads
 *   back nothing unless a *_read / clf_model_loss call asks for it.
 *
 *   Parameters live in one flat buffer: first every weight-decayed matrix
 *   (all 2-D tensors, embeddings included, as nanoGPT does), then the
 *   undecayed vectors (biases, norm weights), each tensor's offset aligned to
 *   16 floats. The table (clf_model_param_info) names every tensor the way
 *   checkpoints and the PyTorch parity fixtures do. A block <p>blocks.<l>:
 *     .ln1.weight [C] (.bias [C] for layernorm with bias)
 *     .attn.qkv.weight [C + 2KC, C]  rows: q [C], then k, then v [KC each:
 *                                kv_heads x head size, C unless grouped];
 *     .attn.qkv.bias [C + 2KC]
 *     .attn.proj.weight [C, C], .bias [C]
 *     .lnx.weight [C] (.bias)             } decoder blocks of an
 *     .cross.q.weight [C, C], .bias [C]   } encoder-decoder only:
 *     .cross.kv.weight [2C, C], .bias [2C]} q from the decoder, k and v
 *     .cross.proj.weight [C, C], .bias [C]} (rows k, then v) from the memory
 *     .ln2.weight [C] (.bias)
 *     .ffn.fc.weight [H, C]  ([2H, C] for swiglu: gate rows, then up rows)
 *     .ffn.fc.bias, .ffn.proj.weight [C, H], .bias [C]
 *   (biases only where attention.bias / ffn.bias say). Per kind:
 *     decoder          wte [V, C], wpe [T, C] (learned positions), blocks.<l>,
 *                      ln_f (final_norm not none), lm_head.weight [V, C]
 *                      (absent when tied to wte)
 *     encoder          wte, wpe, blocks.<l>, ln_f, classifier.weight [NL, C],
 *                      classifier.bias [NL] (none with head none)
 *   With embedding.norm, ln_emb.weight [C] (.bias) follows wpe (src_ln_emb
 *   for the source side of an encoder-decoder).
 *     encoder-decoder  wte [V, C] (target; also the source's with
 *                      share_embeddings), src_wte [V, C] (without), wpe and
 *                      src_wpe [T, C] (learned), encoder.blocks.<l>,
 *                      encoder.ln_f, decoder.blocks.<l>, decoder.ln_f,
 *                      lm_head.weight (absent when tied to wte)
 *   T here is the config's context. Linear weights are stored as
 *   nn.Linear's [out, in]: y = x W^T + b.
 *
 *   Block wiring: pre-norm  x + f(norm(x));  post-norm  norm(x + f(x)), for
 *   each sublayer in turn: self-attention, cross-attention (decoder blocks
 *   of an encoder-decoder), FFN, as torch.nn.TransformerEncoderLayer /
 *   TransformerDecoderLayer (norm1 = ln1, norm2 = lnx, norm3 = ln2). The
 *   final norm (final_norm) closes every stack, as torch.nn.Transformer's
 *   encoder.norm and decoder.norm (which exist with both placements).
 *   Attention: fused qkv GEMM, (rope on q and k; self-attention only),
 *   split into heads, batched q k^T, softmax with the mask and scale
 *   1/sqrt(HS), dropout, batched P v, merge, projection, dropout, residual.
 *   Masks: encoder self-attention and cross-attention hide source pads
 *   (keys whose keep is 0); decoder self-attention is causal. Target pads
 *   sit after the last real token of their row, so causality already hides
 *   them from every real query; a pad query sees earlier pad keys, which is
 *   harmless: its target is ignored and nothing real reads its output.
 *   (torch with tgt_key_padding_mask differs only in those pad rows.)
 *   Source pad queries are computed too (as torch does) and never read.
 *   FFN: fc GEMM, fused bias + activation (or SwiGLU), dropout on the hidden
 *   activation, proj GEMM, dropout, residual. Embeddings: scale (sqrt(C)
 *   with embedding.scale) x table row + positions (learned or sinusoidal,
 *   from position 0 on each side), [the embeddings' norm (BERT),] dropout.
 *   Heads: the LM head (tied: wte)
 *   and the fused cross-entropy (label smoothing, ignore index -1), which in
 *   training writes d(logits) over the logits in place; the classifier: the
 *   first position ([CLS], pool cls) or the mean over non-pad positions
 *   (pool mean) of the encoder's output, a linear layer to NL labels, the
 *   same fused cross-entropy over labels; head none (an embedding model,
 *   e.g. an imported sentence encoder): the pool only, read with
 *   clf_model_pooled_read, no loss and no training.
 *
 *   Dropout masks come from the counter-based generator keyed by
 *   (train.seed, stream(step, micro, site)): `step` is the number of
 *   optimizer steps taken, `micro` the number of backward passes since the
 *   last step (gradient accumulation), `site` the op (an embedding, or
 *   layer l's attention / residual / ffn / cross-attention dropout). A seed
 *   reproduces a run exactly, a resumed run continues it bit for bit, and
 *   backward regenerates the masks.
 *
 *   The host schedule computes the learning rate; clf_model_step takes it as
 *   a number. Gradients are zeroed at create and at the end of every step.
 *
 * Example (training a GPT)
 *   clf_model *m;
 *   clf_model_create(rt, &cfg, tok_vocab, cfg.train.batch, CLF_MODEL_TRAIN, &m, &e);
 *   for (step...) {
 *       clf_model_set_batch(m, clf_batch_decoder(x, y, B, T), &e);   // copied
 *       clf_model_forward(m, 1, &e);
 *       clf_model_backward(m, &e);
 *       clf_model_step(m, lr_of(step), &e);
 *       if (log) clf_model_loss(m, &loss, &e);  // the only read back
 *   }
 *
 * Example (training a translator or a classifier from seqdata.h batches)
 *   clf_seq_limits sl;  clf_seq_loader_limits(L, &sl);
 *   clf_model_limits lim = {sl.max_B, sl.max_S, sl.max_T, sl.max_src_tokens,
 *                           sl.max_tgt_tokens};
 *   clf_model_create_ex(rt, &cfg, V, &lim, CLF_MODEL_TRAIN, &m, &e);
 *   while (clf_seq_loader_next(L, b)) {
 *       clf_batch view = clf_seq_batch_view(b, cfg.kind);   // seqdata.h
 *       clf_model_set_batch(m, view, &e);
 *       clf_model_forward(m, 1, &e);  clf_model_backward(m, &e);  clf_model_step(m, lr, &e);
 *   }
 *
 * Example (generation with a GPT)
 *   clf_model_create(rt, &cfg, V, 1, CLF_MODEL_INFER, &m, &e);
 *   clf_model_prefill(m, prompt, 1, n, logits, &e);      // logits of the last position
 *   for (pos = n; pos < T; pos++) { tok = sample(logits);
 *       clf_model_decode_step(m, &tok, 1, pos, logits, &e); }
 *   (past the context, re-prefill the last T-1 tokens: positions are absolute.)
 *
 * Example (beam search with a translator, N sentences x K beams)
 *   lim = {N * K, max_S, max_T};  clf_model_create_ex(rt, &cfg, V, &lim, CLF_MODEL_INFER, ...);
 *   clf_model_encode(m, src, src_keep, N, S, &e);       // encoder once, cross K/V cached
 *   for (i < N*K) idx[i] = i / K;
 *   clf_model_cache_reorder(m, idx, N * K, &e);         // every beam gets its sentence's cache
 *   for (pos = 0; ; pos++) {
 *       clf_model_decode_step(m, tok, N * K, pos, logits, &e);  // tok = bos at pos 0
 *       ... choose beams: idx[i] = the row beam i continues, tok[i] its token;
 *       clf_model_cache_reorder(m, idx, Bn, &e);         // Bn may shrink as sentences end
 *   }
 *
 * Not here: tokenizers, data, sampling and beam search, schedules,
 * checkpoint files (checkpoint.h).
 */
#ifndef CLF_MODEL_H
#define CLF_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "model/data/batch.h"
#include "runtime/runtime.h"

CLF_API_BEGIN

typedef struct clf_model clf_model;
typedef struct clf_model_config clf_model_config; /* config/config.h */

/* Create flags. */
#define CLF_MODEL_TRAIN 1u /* gradients, Adam state, backward scratch */
#define CLF_MODEL_INFER                                                                            \
    2u /* caches for clf_model_encode / _prefill / _decode_step /
                            * _cache_reorder (TRAIN | INFER: both in one model) */

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
    int layer;       /* the block it belongs to (0 .. L-1, an encoder's blocks first), or -1 */
} clf_param_info;

typedef struct clf_model_dims {
    int B;           /* maximum batch */
    int T;           /* context */
    int C;           /* channels */
    int V;           /* vocabulary (the embedding table's rows) */
    int L;           /* layers (blocks of all stacks) */
    int NH;          /* heads */
    int HS;          /* head size */
    int H;           /* ffn hidden width (swiglu: the gate width; fc has 2H rows) */
    size_t n_params; /* floats in the flat buffer (alignment padding included) */
    size_t n_decay;  /* [0, n_decay) is weight-decayed */
    size_t n_real;   /* parameters proper, padding excluded */
    int kind;        /* 0 decoder, 1 encoder, 2 encoder-decoder (config.h's clf_model_kind) */
    int L_enc;       /* encoder blocks (0 for a decoder) */
    int L_dec;       /* decoder blocks (0 for an encoder) */
    int labels;      /* classifier labels NL (0 for an lm head) */
    int max_S;       /* longest source / classifier row of a batch */
    int max_T;       /* longest target (decoder) row of a batch */
} clf_model_dims;

/* The largest batch a model is planned for. 0 in a field = its default. */
typedef struct clf_model_limits {
    int B;              /* sequences per batch, >= 1 */
    int S;              /* longest source / classifier row; default: context */
    int T;              /* longest target row (a GPT's sequence); default: context */
    int64_t src_tokens; /* largest B*S of one batch; default B*S */
    int64_t tgt_tokens; /* largest B*T; default B*T */
    /* ZeRO-1 (data parallel): with shards > 1 the model keeps Adam's moments
     * of slice `shard` of `shards` of the flat layout only, and its step
     * updates that slice of the parameters (clf_model_optim_slice) */
    int shard, shards;
} clf_model_limits;

/* Optimizer settings, from cfg->train at create; may be changed between steps. */
typedef struct clf_model_optim {
    float beta1, beta2, eps, weight_decay;
    float layer_decay; /* per-block learning-rates (train.optimizer.layer_decay; 1 = off) */
    float grad_clip;   /* 0 = off */
    float label_smoothing;
    float loss_scale_init;   /* fp16 training's first loss scale (train.loss_scale) */
    int loss_scale_interval; /* clean steps before it doubles; 0 = fixed */
    float ema; /* train.ema: the decay of the parameters' moving average, [0, 1); its buffer
                  exists only if it was above 0 at create */
} clf_model_optim;

/* The training position the dropout keys and the optimizer depend on. */
typedef struct clf_model_state {
    uint64_t step;  /* optimizer steps taken (Adam's t of the last step) */
    uint64_t micro; /* backward passes since the last step */
    uint64_t seed;  /* dropout seed (cfg->train.seed) */
} clf_model_state;

/* fp16 training's dynamic loss scaling (train.precision fp16,
 * train.loss_scale): its state lives on the device, read and written here
 * (blocking) for the progress line and checkpoints. */
typedef struct clf_model_amp {
    float scale;      /* the loss scale the next backward multiplies by */
    uint64_t good;    /* clean steps since the scale last changed */
    uint64_t skipped; /* steps skipped for an inf or NaN in the gradients */
    uint64_t adam_t;  /* steps Adam has taken (its bias corrections' t) */
} clf_model_amp;

/* ---- lifetime ------------------------------------------------------------ */

/* Build the model for cfg (a resolved, validated config) with a vocabulary
 * of max(vocab_size, cfg->vocab.size) rows and batches of at most B
 * sequences of at most cfg->context tokens (source and target). Parameters
 * get GPT-2's initialisation from cfg->train.seed (clf_model_params_init).
 * A classifier needs cfg->head.labels >= 2 (resolve "from the data" first). */
clf_status clf_model_create(clf_runtime *rt, const clf_model_config *cfg, int vocab_size, int B,
                            unsigned flags, clf_model **out, clf_error *err);
/* As clf_model_create, planned for the limits (lengths <= context; the
 * token and attention caps let a token-budget loader's batches, e.g. many
 * short rows or a few long ones, fit without planning for B x longest).
 * The parameters do not depend on the limits: checkpoints load either way. */
/* (Both refuse, with CLF_ERR_MEMORY and the planned bytes by category, a
 * model whose buffers would exceed the device's global memory.) */
clf_status clf_model_create_ex(clf_runtime *rt, const clf_model_config *cfg, int vocab_size,
                               const clf_model_limits *lim, unsigned flags, clf_model **out,
                               clf_error *err);
void clf_model_destroy(clf_model *m); /* NULL is a no-op */

/* A model's device memory by category, in bytes. */
typedef struct clf_model_memory {
    size_t params;      /* the flat parameter buffer (and, training with train.precision
                           bf16 | fp16, its 16-bit copy the products read) */
    size_t grads;       /* its gradient (CLF_MODEL_TRAIN) */
    size_t optim;       /* Adam's two moments (CLF_MODEL_TRAIN) */
    size_t ema;         /* train.ema's moving average of the parameters (CLF_MODEL_TRAIN) */
    size_t activations; /* the activation arena: forward activations kept for backward,
                           backward and sublayer scratch, logits (grows with B, T and, while
                           attention materialises its scores, with T^2) */
    size_t caches;      /* KV caches and their reorder scratch (CLF_MODEL_INFER) */
    size_t batch;       /* token, target and mask inputs */
    size_t workspace;   /* the native GEMM engine's packing scratch, owned by the runtime:
                           estimated from the step's product shapes
                           (clf_gemm_workspace_estimate), not allocated by the model */
    size_t total;       /* all of the above */
} clf_model_memory;

/* What create allocated, and the GEMM workspace its products will need. */
clf_model_memory clf_model_memory_get(const clf_model *m);
/* The same without a device, for a config planned for lim and created
 * with flags (for `clformer info`; device-dependent scratch, such as the
 * reductions' and flash-decoding's, is estimated). */
clf_status clf_model_memory_plan(const clf_model_config *cfg, int vocab_size,
                                 const clf_model_limits *lim, unsigned flags, clf_model_memory *out,
                                 clf_error *err);

/* CLF_OK if m has the structure cfg describes with vocab_size rows (every
 * setting that changes what the parameters mean: sizes, positions, norms,
 * activation, biases, tying, ...; not the batch, dropout or training
 * settings); else CLF_ERR_FORMAT naming the first setting that differs. */
clf_status clf_model_check_config(const clf_model *m, const clf_model_config *cfg, int vocab_size,
                                  clf_error *err);

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
    CLF_SLOT_EMA, /* the parameters' exponential moving average (train.ema) */
} clf_model_slot;

/* Blocking copies of one tensor (numel floats) between the host and a flat
 * buffer. Reading a missing slot (grads without CLF_MODEL_TRAIN) fails. */
clf_status clf_model_tensor_read(clf_model *m, clf_model_slot slot, int index, float *dst,
                                 clf_error *err);
clf_status clf_model_tensor_write(clf_model *m, clf_model_slot slot, int index, const float *src,
                                  clf_error *err);
/* The whole flat buffer (n_params floats), for checkpoints. */
clf_status clf_model_flat_read(clf_model *m, clf_model_slot slot, float *dst, clf_error *err);
clf_status clf_model_flat_write(clf_model *m, clf_model_slot slot, const float *src,
                                clf_error *err);
/* Copy one slot's flat buffer from src into dst on the device (enqueued, no
 * host copy): both models on one runtime with the same parameter layout
 * (one config; an inference model built from a training one). */
clf_status clf_model_flat_copy(clf_model *dst, const clf_model *src, clf_model_slot slot,
                               clf_error *err);

/* The slice [*lo, *hi) of the flat layout whose Adam moments the model
 * holds and whose parameters clf_model_step updates: [0, n_params) unless
 * created with limits.shards > 1 (slice boundaries aligned; host arrays of
 * the ADAM slots still use the whole layout: flat reads fill, and flat
 * writes take, only the slice). */
void clf_model_optim_slice(const clf_model *m, size_t *lo, size_t *hi);

/* The device buffer of one slot's flat parameter layout (NULL for a slot
 * the model lacks), for copies the caller enqueues itself. */
clf_buffer *clf_model_flat_buffer(const clf_model *m, clf_model_slot slot);
/* positional.type t5: the bucket of a key - query distance rel, as
 * transformers' T5Attention._relative_position_bucket gives it (in float32
 * like PyTorch): bidirectional (an encoder's) half of num_buckets each way,
 * else the past only; num_buckets / 2 (of each direction) exact
 * distances, then logarithmic ones up to max_distance, beyond which the
 * last bucket. */
int clf_model_t5_bucket(int rel, int bidirectional, int num_buckets, int max_distance);

/* Say that the parameters were written through clf_model_flat_buffer:
 * a model whose products read 16-bit weights (train.precision bf16 |
 * fp16) rebuilds them from the float32 parameters before its next
 * forward. The writes above and clf_model_step keep them current by
 * themselves. */
void clf_model_params_changed(clf_model *m);

/* train.ema: a training model created with optim.ema > 0 keeps a moving
 * average of its parameters (CLF_SLOT_EMA, all of the flat layout);
 * clf_model_step updates it after the parameters, e += (1 - ema) (p - e),
 * the first update (after create, init or a load of the parameters
 * without one of the EMA) copying them. clf_model_ema_swap exchanges the
 * parameters and the EMA bit for bit on the device (an evaluation of the
 * EMA between two swaps). */
int clf_model_has_ema(const clf_model *m);
clf_status clf_model_ema_swap(clf_model *m, clf_error *err);

/* Sparse attention's random key blocks (blocks.attention.random_blocks):
 * [query blocks, R] (-1 = none), drawn from train.seed when the model is
 * built; checkpoints keep them and set them back (set: each entry a key
 * block at or before its query block, or -1; the block table is rebuilt). */
clf_status clf_model_sparse_blocks(const clf_model *m, const int32_t **rnd, size_t *n);
clf_status clf_model_set_sparse_blocks(clf_model *m, const int32_t *rnd, size_t n, clf_error *err);
/* Performer (blocks.attention.type performer): the features' draw the model
 * holds (-1 none yet, or not a performer), drawn from train.seed, the layer
 * and draw step / redraw; an inference model pins a checkpoint's draw;
 * clf_model_set_performer_features gives every layer om [features, head
 * size] and stops redrawing (tests, fixtures). */
int64_t clf_model_performer_draw(const clf_model *m);
void clf_model_pin_performer_draw(clf_model *m, int64_t draw);
clf_status clf_model_set_performer_features(clf_model *m, const float *om, size_t n,
                                            clf_error *err);
/* A config's sparse pattern at its full context, with the random blocks
 * the model would draw: *visited of the *pairs causal block pairs have a
 * key some query sees (the pairs the fused kernels visit; 0 and 0 without
 * sparse patterns). */
void clf_model_sparse_share(const clf_model_config *cfg, size_t *visited, size_t *pairs);

/* ---- training ------------------------------------------------------------------ */

/* Called by clf_model_backward as soon as the kernels that finish a group
 * of gradients are enqueued (not run): layer = a block's index once its
 * tensors' gradients are final, then -1 for every tensor outside blocks.
 * Blocks come deepest first (L-1 down to 0). A data-parallel trainer
 * enqueues reads of those gradients here, so that reducing them overlaps
 * the rest of the backward. An error fails the backward. */
typedef clf_status (*clf_model_grad_hook)(void *user, int layer, clf_error *err);
void clf_model_set_grad_hook(clf_model *m, clf_model_grad_hook fn, void *user); /* NULL: none */

/* Copy a batch (data/batch.h) into the model: what the kind reads, checked
 * against the limits it was created for (sizes, token ids below the
 * vocabulary, targets and labels in range or -1). A batch shaped for another
 * kind is CLF_ERR_ARG. Copies are staged and uploaded asynchronously. */
clf_status clf_model_set_batch(clf_model *m, clf_batch b, clf_error *err);
/* Forward over the batch. train = 1: dropout on, and the loss op writes
 * d(logits) over the logits for clf_model_backward (needs targets). train
 * = 0: no dropout, logits kept for clf_model_logits_read. */
clf_status clf_model_forward(clf_model *m, int train, clf_error *err);
/* Backward of the last train forward; gradients accumulate (+=) into the
 * flat grad buffer (so several micro-batches add up; the loss of each is a
 * mean over its own non-ignored targets). */
clf_status clf_model_backward(clf_model *m, clf_error *err);
/* Gradient accumulation: with scale > 0 the next train forwards' loss
 * gradient is scaled by `scale` instead of 1 / (the batch's target count),
 * so micro-batches of one step, each with scale 1 / (the targets of all of
 * them), sum to the gradient of their mean loss; 0 restores the default.
 * The reported loss stays each batch's own mean. */
void clf_model_set_loss_scale(clf_model *m, float scale);
/* Global-norm clipping and the AdamW (Adam when weight_decay = 0) update
 * with learning rate lr, then the gradients are zeroed and step advances.
 * With loss scaling (clf_model_amp_enabled) the gradients arrive
 * multiplied by the scale, which the step divides out; a step whose
 * gradients hold an inf or NaN changes no parameter or moment (step still
 * advances: it counts batches, as the learning-rate schedule does). */
clf_status clf_model_step(clf_model *m, float lr, clf_error *err);
/* Whether the model scales its loss (an fp16 training model), and its
 * state on the device (get: a blocking read; set: scale >= 1, counts below
 * 2^24). */
int clf_model_amp_enabled(const clf_model *m);
clf_status clf_model_amp_get(clf_model *m, clf_model_amp *out, clf_error *err);
/* Keep a copy of the state on the device, enqueued (before a step: what its
 * backward used), for clf_model_step_read. */
clf_status clf_model_amp_mark(clf_model *m, clf_error *err);
clf_status clf_model_amp_set(clf_model *m, const clf_model_amp *in, clf_error *err);
clf_status clf_model_zero_grad(clf_model *m, clf_error *err);

/* Read-backs (blocking). loss: mean over the non-ignored targets (labels)
 * of the last forward. losses: per position [B*T] (a classifier: per
 * sequence [B]; 0 where ignored). logits: [B*T, V] (a classifier: [B, NL])
 * after an eval forward; probs: their softmax (computed on the host in
 * double, e.g. a classifier's label probabilities). grad_norm: global norm
 * before clipping, of the last step. */
clf_status clf_model_loss(clf_model *m, float *out, clf_error *err);
clf_status clf_model_losses_read(clf_model *m, float *out, clf_error *err);
clf_status clf_model_logits_read(clf_model *m, float *out, clf_error *err);
clf_status clf_model_probs_read(clf_model *m, float *out, clf_error *err);
/* After an eval forward of an encoder-only model (classifier or head none):
 * its output pooled per row as head.pool says (mean over the kept
 * positions, or the first position), [B, C]: sentence embeddings. */
clf_status clf_model_pooled_read(clf_model *m, float *out, clf_error *err);
clf_status clf_model_grad_norm(clf_model *m, float *out, clf_error *err);
/* After a training forward: its loss summed over its targets added on the
 * device to a running sum (first: the sum starts there), enqueued; the sum
 * of a step's micro-batches without reading each one back. */
clf_status clf_model_loss_add(clf_model *m, int first, clf_error *err);
/* After a step: the loss of its (last) forward, as clf_model_loss, the
 * running sum of clf_model_loss_add (loss_sum, when not NULL) and the
 * gradient norm in one read, which waits for the update; with amp (not
 * NULL) also the loss scaling clf_model_amp_mark kept before the step.
 * A logged training step's one pause: the next step is enqueued after it. */
clf_status clf_model_step_read(clf_model *m, float *loss, double *loss_sum, float *grad_norm,
                               clf_model_amp *amp, clf_error *err);
/* Number of non-ignored targets in the current batch. */
int clf_model_target_count(const clf_model *m);

clf_model_optim clf_model_optim_get(const clf_model *m);
void clf_model_optim_set(clf_model *m, const clf_model_optim *o);
clf_model_state clf_model_state_get(const clf_model *m);
void clf_model_state_set(clf_model *m, const clf_model_state *s);

/* ---- inference (needs CLF_MODEL_INFER) ----------------------------------------- */

/* Run the prompt tokens [B, T] at positions 0..T-1 through the batched
 * forward, fill the KV caches, and write the logits of the last position
 * [B, V] (NULL: skip). An encoder-decoder's decoder prompt (e.g. bos and a
 * forced prefix) attends over the encoded source: B = the cached rows. */
clf_status clf_model_prefill(clf_model *m, const int32_t *tokens, int B, int T, float *logits,
                             clf_error *err);
/* One token per sequence, tokens [B], at position pos (the caches hold
 * 0..pos-1 from earlier calls; pos < the longest target): logits [B, V].
 * Costs one position's work. An encoder-decoder starts at pos 0 (bos)
 * after clf_model_encode; B = the cached rows. */
clf_status clf_model_decode_step(clf_model *m, const int32_t *tokens, int B, int pos, float *logits,
                                 clf_error *err);
/* Greedy decoding without a round trip a token. After a prefill or decode
 * step of B rows, clf_model_greedy_pick enqueues each row's greedy choice
 * from the step's logits (the index of the largest, the lowest among equal
 * maxima, NaN never chosen, -1 where every logit is NaN: what
 * clf_sampler_sample picks at temperature 0 from the logits the step
 * would have returned) into the device's token row, and a read of the
 * choices into picks[B], which is filled, and must stay valid, until *done
 * is waited on (clf_event_wait, which releases it). Then
 * clf_model_decode_picked runs position pos from those tokens (a -1 row
 * runs token 0, and the caller stops at the -1), leaving its logits on the
 * device for the next pick: the next step is enqueued before the host
 * waits for this one's choice, so the device never waits for the host.
 *   prefill(m, prompt, 1, n, NULL); greedy_pick(m, 1, &p[0], &e[0]);
 *   for (i = 0; ; i++) { decode_picked(m, 1, n + i); greedy_pick(m, 1, &p[~i&1]...);
 *       wait(e[i&1]); emit p[i&1]; }
 * CLF_ERR_UNSUPPORTED from greedy_pick where the device cannot scan a
 * vocabulary this long in one work-item's loop (decode_step then). */
clf_status clf_model_greedy_pick(clf_model *m, int B, int32_t *picks, clf_event **done,
                                 clf_error *err);
clf_status clf_model_decode_picked(clf_model *m, int B, int pos, clf_error *err);
/* Which attention of an encoder-decoder clf_model_attention_weights reads
 * (decoder-only and encoder-only models have one stack: CLF_ATTN_SELF). */
typedef enum clf_attn_site {
    CLF_ATTN_SELF = 0, /* the decoder's (or the only stack's) self-attention */
    CLF_ATTN_ENCODER,  /* an encoder-decoder's encoder self-attention */
    CLF_ATTN_CROSS     /* an encoder-decoder's decoder cross-attention */
} clf_attn_site;
/* The attention weights of the current batch's first sequence at one
 * site, from an eval forward (no dropout) over the batch: block `layer`
 * (numbered within its stack, as the parameters "blocks.L." /
 * "encoder.blocks.L." / "decoder.blocks.L." are) at `site`. out [NH, T, S]: row
 * (h, t) the probabilities over the S keys (0 where masked; a row that
 * sees no key is all 0); *T and *S the sizes written (S = linformer's
 * projected keys where the layer projects them). The weights are the
 * fused forward's own: the same kernel run on the layer's queries and keys
 * with the values replaced by columns of the identity (so y = the
 * probabilities), HS keys at a time. Performer attention has none:
 * CLF_ERR_ARG. cap: floats out holds (CLF_ERR_ARG naming the need when
 * short). A model created without CLF_MODEL_TRAIN's 16-bit activations. */
clf_status clf_model_attention_weights(clf_model *m, clf_attn_site site, int layer, float *out,
                                       size_t cap, int *T, int *S, clf_error *err);
/* A decoder: ready the products of cached passes of B sequences of each
 * rows[i] positions (0 < rows[i] <= the context; others are skipped), and
 * build every kernel family a pass runs, so that prefill and decode_step
 * of those sizes only enqueue: the GEMM search times these shapes now (or
 * finds them in the cache), not in the middle of a generation. */
clf_status clf_model_prepare_cached(clf_model *m, int B, const int *rows, int n_rows,
                                    clf_error *err);
/* Encoder-decoder: run the encoder once over src [B, S] with src_keep
 * [B, S] (NULL = no padding) and store each decoder block's cross-attention
 * keys and values of its output (and the keep mask) in the caches; the
 * decoder's self-attention caches are emptied. Then decode from pos 0. */
clf_status clf_model_encode(clf_model *m, const int32_t *src, const int32_t *src_keep, int B, int S,
                            clf_error *err);
/* Gather the cache rows: new row i = old row index[i] (0 <= index[i] < the
 * cached rows), for i < Bn <= max batch, in every cache (self-attention
 * positions decoded so far; cross-attention keys, values and the source
 * mask when a row's sentence changes). A device gather, no host round trip:
 * beam search reorders its beams each step with it, expands N encoded
 * sentences into N x K beams, and drops finished sentences (Bn shrinks). */
clf_status clf_model_cache_reorder(clf_model *m, const int32_t *index, int Bn, clf_error *err);

CLF_API_END

#endif
