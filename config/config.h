/*
 * config.h - the model description: a YAML file parsed, checked and turned
 * into one plain struct that model/ builds from.
 *
 * A model file has two sections (examples in config/models/):
 *
 *     model:                       # what the network is
 *       kind: decoder              # decoder | encoder | encoder-decoder
 *       vocab: {tokenizer: char}   # char | byte | bpe (size: 8000)
 *       context: 64
 *       embedding: {dim: 128, scale: false, dropout: 0.0}
 *       positional: {type: learned}            # learned | sinusoidal | rope | alibi | t5
 *       blocks:
 *         repeat: 4
 *         attention: {heads: 4, causal: true, dropout: 0.0, bias: true}
 *         ffn: {hidden: 512, activation: gelu, bias: true, dropout: 0.0}
 *         norm: {type: layernorm, placement: pre, eps: 1.0e-5, bias: true}
 *         dropout: 0.0
 *       final_norm: {type: layernorm}
 *       head: {type: lm, tie_embedding: true}
 *     train:                       # how it is trained
 *       batch: 12
 *       steps: 2000
 *       optimizer: {type: adamw, lr: 1.0e-3, betas: [0.9, 0.99], eps: 1.0e-8,
 *                   weight_decay: 0.1}
 *       schedule: {type: cosine, warmup: 100, min_lr: 1.0e-4}
 *       grad_clip: 1.0
 *       eval: {every: 250, batches: 20}
 *       seed: 1337
 *
 * Every key is optional and has a default (clf_config_defaults). Unknown
 * keys, duplicate keys, wrong types, values out of range and impossible
 * combinations (heads that do not divide the dimension, a zero context,
 * rope with an odd head size, ...) are errors reported as
 * `file:line:col: what was expected` in err->where / err->msg, followed in
 * the message by the offending line and a caret.
 *
 * Design: the schema is one const table per section, {key, type, offset,
 * range or enum names, sub-table}, walked over the libyaml document tree
 * (as netplan does). Overrides ("train.steps=200", "blocks.attention.heads=8",
 * "train.optimizer.betas=[0.9,0.95]") are parsed as YAML with the same
 * table, after the file, and before cross-field validation; a key path that
 * does not start with a section name ("model." or "train.") is looked up
 * under model. An error in an override names the flag:
 * "--set train.stepz=5: unknown key 'stepz' in train; expected one of: ...".
 *
 * The struct holds no pointers and no libyaml types: it can be copied,
 * compared (clf_config_diff) and stored. clf_config_to_yaml writes a
 * canonical dump (every key, values that read back bit-identically) that
 * checkpoints embed and clf_config_parse_string reads back.
 *
 * Not done here: where the data lives (given on the command line), the
 * tokenizer itself (model/), and anything that needs the data or a device
 * (vocabulary size from the text, memory estimates).
 */
#ifndef CLF_CONFIG_H
#define CLF_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

CLF_API_BEGIN

#define CLF_CONFIG_PATH_MAX 512

/* ---- choices ------------------------------------------------------------- */

typedef enum clf_model_kind {
    CLF_MODEL_DECODER = 0,     /* GPT: causal self-attention, LM head */
    CLF_MODEL_ENCODER,         /* BERT-like: bidirectional, classifier head */
    CLF_MODEL_ENCODER_DECODER, /* "Attention Is All You Need" translator */
} clf_model_kind;

typedef enum clf_tokenizer_type {
    CLF_TOKENIZER_CHAR = 0,  /* one token per Unicode character of the training text */
    CLF_TOKENIZER_BYTE,      /* one token per byte, 256 tokens */
    CLF_TOKENIZER_BPE,       /* byte-pair encoding trained from the data */
    CLF_TOKENIZER_WORDPIECE, /* BERT's WordPiece, from a pretrained model (clformer import) */
} clf_tokenizer_type;

typedef enum clf_positional_type {
    CLF_POS_LEARNED = 0, /* a learned [context, dim] table added to the embeddings */
    CLF_POS_SINUSOIDAL,  /* fixed sin/cos table added to the embeddings */
    CLF_POS_ROPE,        /* rotary embedding of q and k inside attention */
    CLF_POS_ALIBI,       /* linear per-head biases on the attention scores (ALiBi) */
    CLF_POS_T5,          /* a learned per-head bias of bucketed key - query distances on the
                            self-attention scores (T5): num_buckets, max_distance */
    CLF_POS_RELATIVE,    /* Shaw et al.'s relative positions: learned r_c per block added to
                            the keys inside the score, c = clip(key - query, +-max_distance) */
} clf_positional_type;

/* What self-attention computes. */
typedef enum clf_attention_type {
    CLF_ATTN_SOFTMAX = 0, /* softmax(q k^T / sqrt(d)) v over every key */
    CLF_ATTN_LINFORMER,   /* Linformer: keys and values projected along the sequence to
                             attention.proj rows by learned [proj, context] matrices, then
                             softmax attention over those (encoders) */
    CLF_ATTN_PERFORMER,   /* Performer (FAVOR+): softmax attention through attention.features
                             positive orthogonal random features, redrawn every
                             attention.redraw steps; causal by prefix sums */
} clf_attention_type;

/* RoPE's frequencies for running past the trained context (HF's names):
 * linear divides every frequency by the factor (position interpolation);
 * ntk raises the base to theta * factor^(d / (d - 2)) (static NTK-aware);
 * yarn interpolates the low frequencies only, with a ramp between the
 * dimensions that turn beta_slow and beta_fast times over the original
 * context, and scales q and k by 0.1 ln(factor) + 1. */
typedef enum clf_rope_scaling_type {
    CLF_ROPE_SCALE_NONE = 0,
    CLF_ROPE_SCALE_LINEAR,
    CLF_ROPE_SCALE_NTK,
    CLF_ROPE_SCALE_YARN,
} clf_rope_scaling_type;

typedef enum clf_activation {
    CLF_FFN_RELU = 0,
    CLF_FFN_GELU,      /* exact (erf) GELU, PyTorch's default */
    CLF_FFN_GELU_TANH, /* tanh approximation (GPT-2's) */
    CLF_FFN_SWIGLU,    /* silu(x W1) * (x W3), then W2; hidden is the gate width */
} clf_activation;

typedef enum clf_norm_type {
    CLF_NORM_NONE = 0, /* only allowed for final_norm */
    CLF_NORM_LAYERNORM,
    CLF_NORM_RMSNORM,
} clf_norm_type;

typedef enum clf_norm_placement {
    CLF_NORM_PRE = 0, /* x + f(norm(x)) */
    CLF_NORM_POST,    /* norm(x + f(x)), as in the original paper */
} clf_norm_placement;

typedef enum clf_head_type {
    CLF_HEAD_LM = 0,     /* next-token logits over the vocabulary */
    CLF_HEAD_CLASSIFIER, /* pooled representation -> labels */
    CLF_HEAD_NONE,       /* encoder only: the pooled representation is the output (embeddings) */
} clf_head_type;

typedef enum clf_pool_type {
    CLF_POOL_CLS = 0, /* the first position */
    CLF_POOL_MEAN,    /* mean over non-padding positions */
} clf_pool_type;

typedef enum clf_optimizer_type {
    CLF_OPT_ADAM = 0, /* L2 weight decay added to the gradient (PyTorch Adam) */
    CLF_OPT_ADAMW,    /* decoupled weight decay */
} clf_optimizer_type;

typedef enum clf_schedule_type {
    CLF_SCHED_CONSTANT = 0, /* lr (after linear warmup, if any) */
    CLF_SCHED_COSINE,       /* linear warmup, then cosine from lr to min_lr at `steps` */
    CLF_SCHED_NOAM,         /* lr * dim^-0.5 * min(s^-0.5, s * warmup^-1.5); lr is the factor */
} clf_schedule_type;

typedef enum clf_recompute {
    CLF_RECOMPUTE_NONE = 0,  /* keep every activation backward needs */
    CLF_RECOMPUTE_BLOCK,     /* keep each block's output; backward recomputes the block */
    CLF_RECOMPUTE_ATTENTION, /* backward recomputes each block's self-attention (q, k, v,
                                its output and row statistics) from the kept norm */
} clf_recompute;

typedef enum clf_precision {
    CLF_PRECISION_FP32 = 0, /* every activation in float32 */
    CLF_PRECISION_BF16,     /* the activations only GEMMs read stored in bf16 (float32 math) */
    CLF_PRECISION_FP16,     /* the same in IEEE half */
} clf_precision;

typedef enum clf_metric_type {
    CLF_METRIC_LOSS = 0, /* validation loss, lower is better */
    CLF_METRIC_ACCURACY, /* classifier accuracy, higher is better */
    CLF_METRIC_BLEU,     /* translation corpus BLEU, higher is better */
} clf_metric_type;

/* Names as written in YAML ("encoder-decoder", "gelu_tanh", ...); "?" for
 * a value out of range. */
const char *clf_config_kind_name(clf_model_kind v);
const char *clf_config_tokenizer_name(clf_tokenizer_type v);
const char *clf_config_positional_name(clf_positional_type v);
const char *clf_config_attention_name(clf_attention_type v);
const char *clf_config_rope_scaling_name(clf_rope_scaling_type v);
const char *clf_config_activation_name(clf_activation v);
const char *clf_config_norm_name(clf_norm_type v);
const char *clf_config_placement_name(clf_norm_placement v);
const char *clf_config_head_name(clf_head_type v);
const char *clf_config_pool_name(clf_pool_type v);
const char *clf_config_schedule_name(clf_schedule_type v);
const char *clf_config_metric_name(clf_metric_type v);

/* ---- the struct ------------------------------------------------------------ */

typedef struct clf_vocab_config {
    clf_tokenizer_type tokenizer;
    /* char/byte: 0 = the tokenizer's size (built from the text / 256); a
     * larger value pads the embedding table. bpe: the vocabulary size to
     * train (default 8000), special tokens included. */
    int size;
    /* bpe only: a tokenizer file to load ("" = train one from the data). */
    char path[CLF_CONFIG_PATH_MAX];
} clf_vocab_config;

typedef struct clf_embedding_config {
    int dim;        /* C, d_model */
    int scale;      /* bool: multiply token embeddings by sqrt(dim) */
    double dropout; /* on embeddings + positions, [0, 1) */
    /* a norm of embeddings + positions before the dropout (BERT's
     * embeddings.LayerNorm); blocks.norm's eps and bias */
    clf_norm_type norm;
} clf_embedding_config;

typedef struct clf_positional_config {
    clf_positional_type type;
    double rope_theta; /* rope base, default 10000 */
    int num_buckets;   /* t5: buckets of key - query distance, [4, 64] (default 32; an
                          encoder's are half for each direction) */
    int max_distance;  /* t5: distances from this on share the last bucket; relative: the
                          clip k, at most 64; 0 = the type's default (t5 128, relative 16:
                          clf_config_max_distance) */
    struct {
        clf_rope_scaling_type type;
        double factor;               /* >= 1; 1 = no change */
        int original_context;        /* the context trained without scaling (yarn's ramp);
                                 0 in a file = model.context (resolved on load) */
        double beta_fast, beta_slow; /* yarn's ramp ends, in turns (32 and 1) */
    } rope_scaling;
} clf_positional_config;

typedef struct clf_attention_config {
    int heads;      /* NH; HS = dim / heads */
    int kv_heads;   /* key/value heads of self-attention, dividing heads (grouped-query
                       attention; 1 = multi-query); 0 in a file = heads (resolved on load) */
    int causal;     /* bool: decoder self-attention masks the future */
    double dropout; /* on attention probabilities, [0, 1) */
    int bias;       /* bool: q/k/v and output projections have biases */
    int window;     /* > 0: each query sees only the `window` most recent keys
                       (sliding-window attention; decoder only); 0 = all */
    /* Sparse patterns beside the window (its local part; decoders): a query
     * also sees */
    int global;              /* the first `global` positions (Longformer's global tokens) */
    int stride;              /* every `stride`-th key back from itself (the Sparse
                          Transformer's strided pattern) */
    int random_blocks;       /* R random key blocks of its query block (BigBird), drawn from
                          train.seed once per model and kept in its checkpoints */
    int block;               /* positions per block (random blocks, and the blocks the fused
                          kernels skip); a multiple of 16 in [16, 128], default 64 */
    clf_attention_type type; /* softmax (default) | linformer */
    int proj;                /* linformer: keys and values projected to this many rows
                                (at most the context); 0 (default) = context / 4 */
    int features;            /* performer: random features per head, at most 256; 0
                                (default) = twice the head size, at most 256 */
    int redraw;              /* performer: steps between redraws of the features; 0 =
                                never; default 1000 */
} clf_attention_config;

typedef struct clf_ffn_config {
    int hidden; /* width of the hidden layer; 0 in a file = 4 * dim (resolved on load) */
    clf_activation activation;
    int bias;       /* bool */
    double dropout; /* on the hidden activation (torch.nn.Transformer's), [0, 1) */
} clf_ffn_config;

typedef struct clf_norm_config {
    clf_norm_type type; /* layernorm | rmsnorm (never none in blocks) */
    clf_norm_placement placement;
    double eps;
    int bias; /* bool: layernorm has a bias (ignored for rmsnorm) */
} clf_norm_config;

typedef struct clf_blocks_config {
    int repeat; /* number of blocks (layers) of a decoder or an encoder */
    /* encoder-decoder only: layers of each stack; 0 in a file = repeat
     * (resolved on load). Must stay 0 for the other kinds. */
    int encoder_repeat;
    int decoder_repeat;
    clf_attention_config attention; /* self- and (encoder-decoder) cross-attention */
    clf_ffn_config ffn;
    clf_norm_config norm;
    double dropout; /* on each sublayer's output before the residual add, [0, 1) */
} clf_blocks_config;

typedef struct clf_final_norm_config {
    clf_norm_type type; /* none | layernorm | rmsnorm; eps and bias from blocks.norm */
} clf_final_norm_config;

typedef struct clf_head_config {
    clf_head_type type;
    int tie_embedding;  /* bool, lm only: output projection = token embedding^T;
                          default (-1 until resolved): 1 for an lm head, else 0 */
    int labels;         /* classifier: number of labels (0 = from the data) */
    clf_pool_type pool; /* classifier: cls | mean */
} clf_head_config;

typedef struct clf_optimizer_config {
    clf_optimizer_type type;
    double lr;           /* peak learning rate (the factor for noam) */
    double betas[2];     /* [0, 1) each */
    double eps;          /* > 0 */
    double weight_decay; /* >= 0; never applied to biases, norms */
    double layer_decay;  /* (0, 1]: block k of L (from 0) learns at lr * layer_decay^(L - k),
                            the embeddings at lr * layer_decay^(L + 1), the final norm and
                            the head at lr; 1 = off */
} clf_optimizer_config;

typedef struct clf_schedule_config {
    clf_schedule_type type;
    int warmup;    /* linear warmup steps (noam: its warmup parameter, > 0) */
    double min_lr; /* cosine: final lr, <= lr */
} clf_schedule_config;

typedef struct clf_eval_config {
    int every;   /* steps between evaluations; 0 = each epoch (or only at the end) */
    int batches; /* validation batches per evaluation; 0 = the whole split */
} clf_eval_config;

typedef struct clf_early_stop_config {
    int patience; /* evaluations without improvement before stopping; 0 = off */
    clf_metric_type metric;
} clf_early_stop_config;

/* Dynamic loss scaling for precision fp16 (torch.cuda.amp.GradScaler's
 * rules): the loss gradient is multiplied by the scale, a step whose
 * gradients hold an inf or NaN is skipped and halves it, `interval` clean
 * steps in a row double it. */
typedef struct clf_loss_scale_config {
    double init;  /* the first scale; default 65536 (2^16) */
    int interval; /* clean steps before the scale doubles; 0 = fixed; default 2000 */
} clf_loss_scale_config;

typedef struct clf_train_config {
    int batch;        /* B: sequences per step (the encoder kinds: at most, with batch_tokens) */
    int batch_tokens; /* encoder kinds: a budget of B * max(S, T) tokens per batch; 0 = off */
    clf_recompute recompute;          /* activation recomputation (gradient checkpointing) */
    clf_precision precision;          /* storage of the activations the GEMMs read (training) */
    clf_loss_scale_config loss_scale; /* precision fp16 only */
    int accumulate;      /* micro-batches per optimizer step, gradients summed on the device
                         (the step sees the mean over all their targets); default 1 */
    int shard_optimizer; /* data parallel: each rank keeps and updates its slice of Adam's
                                moments and the ranks gather the updated parameters (ZeRO-1);
                                default 0 */
    double ema;          /* [0, 1): an exponential moving average of the parameters with this
                      decay, kept on the device and updated after every step; evaluation,
                      best selection, checkpoints' inference use and export use it; 0 = off */
    int packing;         /* decoders: the corpus is documents (split at blank lines); a
                            window's documents attend only inside themselves, positions restart
                            at each, and no target crosses into the next; default 0 */
    int keep_last;       /* keep the checkpoints of the last N evaluations beside the run's
                      (DIR/ckpt-<step>.safetensors, for `clformer average`); 0 = off */
    int steps;           /* optimizer steps; 0 = until `epochs` (then epochs must be > 0) */
    int epochs;          /* 0 = off; else stop after this many passes (or `steps`, if first) */
    clf_optimizer_config optimizer;
    clf_schedule_config schedule;
    double grad_clip;       /* global gradient-norm clip; 0 = off */
    double label_smoothing; /* [0, 1) */
    clf_eval_config eval;
    clf_early_stop_config early_stop;
    uint64_t seed;
    int log_every; /* steps between progress updates (the live line), >= 1 */
} clf_train_config;

typedef struct clf_model_config {
    /* model: */
    clf_model_kind kind;
    clf_vocab_config vocab;
    int context; /* T: maximum sequence length (source and target), > 0 */
    clf_embedding_config embedding;
    clf_positional_config positional;
    clf_blocks_config blocks;
    int share_embeddings; /* bool, encoder-decoder: source and target share one table */
    clf_final_norm_config final_norm;
    clf_head_config head;
    /* train: */
    clf_train_config train;
} clf_model_config;

/* ---- API ---------------------------------------------------------------------- */

/* The defaults every missing key takes (a small pre-LN GPT, AdamW). The
 * struct is zeroed first, so two defaulted configs compare equal bytewise. */
void clf_config_defaults(clf_model_config *cfg);

/* Read a YAML file, apply overrides ("key.path=value", may be NULL when
 * n_overrides is 0), fill derived values (clf_config_resolve) and validate.
 * On failure *out is unspecified and err says where and what. */
clf_status clf_config_load(const char *path, const char *const *overrides, int n_overrides,
                           clf_model_config *out, clf_error *err);

/* As clf_config_load for YAML text in memory (e.g. a checkpoint's metadata);
 * name_for_errors stands for the file name in error locations. */
clf_status clf_config_parse_string(const char *yaml_text, const char *name_for_errors,
                                   const char *const *overrides, int n_overrides,
                                   clf_model_config *out, clf_error *err);

/* Apply one "key.path=value" override to an already loaded config, then
 * resolve and validate again (used e.g. to change train.steps on resume). */
clf_status clf_config_set(clf_model_config *cfg, const char *override, clf_error *err);

/* Fill values that default to another field: ffn.hidden = 4*dim when 0,
 * encoder/decoder_repeat = repeat when 0 (encoder-decoder only), vocab.size
 * = 8000 for bpe when 0. Idempotent. */
void clf_config_resolve(clf_model_config *cfg);

/* Run a decoder at `context` positions instead of the trained model.context
 * (`sample --context`, `eval --context`). Learned positions keep their
 * context (their table has that many rows); past the trained context,
 * rotary positions take positional.rope_scaling: `scaling` (a
 * clf_rope_scaling_type) at factor context / trained with original_context
 * the trained one, or with -1 the config's own scaling, or yarn at that
 * factor where the config has none; ALiBi and sinusoidal positions run as
 * they are. scaling >= 0 only past the trained context. Errors say what was
 * expected (CLF_ERR_ARG). */
clf_status clf_config_set_context(clf_model_config *cfg, int context, int scaling, clf_error *err);

/* Cross-field checks on a resolved config (load and parse run it already).
 * The error names the offending key ("blocks.attention.heads: 5 does not
 * divide embedding.dim 128"); err->where is empty (no file position). */
clf_status clf_config_validate(const clf_model_config *cfg, clf_error *err);

/* Canonical YAML of cfg: every key, in schema order, numbers that read back
 * to the same bits. snprintf-like: writes at most cap bytes (NUL included)
 * and returns the length the full text needs (excluding the NUL); call with
 * (NULL, 0) to size a buffer. */
size_t clf_config_to_yaml(const clf_model_config *cfg, char *buf, size_t cap);

/* 0 if a and b are equal in every field; else 1, with the first differing
 * key path ("train.optimizer.lr") written into key (if not NULL). */
int clf_config_diff(const clf_model_config *a, const clf_model_config *b, char *key,
                    size_t key_cap);

/* Derived sizes, for model/ (on a resolved config). */
static inline int clf_config_head_size(const clf_model_config *c)
{
    return c->blocks.attention.heads > 0 ? c->embedding.dim / c->blocks.attention.heads : 0;
}
/* positional.max_distance, 0 meaning the type's default. */
static inline int clf_config_max_distance(const clf_model_config *c)
{
    return c->positional.max_distance > 0           ? c->positional.max_distance
           : c->positional.type == CLF_POS_RELATIVE ? 16
                                                    : 128;
}
/* Linformer's projected rows (proj, 0 meaning context / 4, at least 1);
 * 0 for softmax attention. */
static inline int clf_config_linformer_rows(const clf_model_config *c)
{
    if (c->blocks.attention.type != CLF_ATTN_LINFORMER)
        return 0;
    return c->blocks.attention.proj > 0 ? c->blocks.attention.proj
           : c->context / 4 > 0         ? c->context / 4
                                        : 1;
}
/* Performer's random features per head (features, 0 meaning twice the head
 * size, at most 256); 0 for other attention. */
static inline int clf_config_performer_features(const clf_model_config *c)
{
    if (c->blocks.attention.type != CLF_ATTN_PERFORMER)
        return 0;
    const int hs2 =
        2 * (c->embedding.dim / (c->blocks.attention.heads > 0 ? c->blocks.attention.heads : 1));
    return c->blocks.attention.features > 0 ? c->blocks.attention.features : hs2 < 256 ? hs2 : 256;
}
/* Self-attention's key/value heads (kv_heads, 0 meaning heads). */
static inline int clf_config_kv_heads(const clf_model_config *c)
{
    return c->blocks.attention.kv_heads > 0 ? c->blocks.attention.kv_heads
                                            : c->blocks.attention.heads;
}
/* Layers of the encoder stack (0 for a decoder-only model). */
static inline int clf_config_encoder_layers(const clf_model_config *c)
{
    return c->kind == CLF_MODEL_DECODER   ? 0
           : c->kind == CLF_MODEL_ENCODER ? c->blocks.repeat
                                          : c->blocks.encoder_repeat;
}
/* Layers of the decoder stack (0 for an encoder-only model). */
static inline int clf_config_decoder_layers(const clf_model_config *c)
{
    return c->kind == CLF_MODEL_ENCODER   ? 0
           : c->kind == CLF_MODEL_DECODER ? c->blocks.repeat
                                          : c->blocks.decoder_repeat;
}

CLF_API_END

#endif
