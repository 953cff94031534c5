/*
 * seqdata.h - sentence datasets for the encoder classifier and the
 * encoder-decoder translator: loading (plain or gzip), tokenizing with the
 * model's special tokens, counted truncation, and padding-aware batches by
 * similar length with a deterministic, resumable order.
 *
 * Data
 *   Translation: two parallel files, one sentence per line (source and
 *   target, e.g. train.de.gz / train.en.gz). Their line counts must match.
 *   Classification: a TSV file whose first line is a header; the label
 *   column is named "label" (configurable) and the text column "sentence",
 *   else "text", else "content" (or the configured name); labels are
 *   non-negative integers. Errors name file:line.
 *   Inference: the same from text in memory, without targets or labels
 *   (clf_seqdata_from_text).
 *   Files are read whole through zlib, which reads gzip (by its magic bytes,
 *   whatever the name) and plain files alike. Lines end at '\n'; a trailing
 *   '\r' and a UTF-8 byte-order mark at the start of a file are removed; the
 *   last line needs no '\n'. Empty lines are kept in parallel files (they
 *   keep the alignment) and are errors in a TSV.
 *
 * Token layout (ids from the tokenizer's special tokens, which must exist:
 * add them with clf_tokenizer_add_special before loading)
 *   classifier (kind encoder):  src = [cls] x_1 .. x_n            labels[b]
 *   translator (encoder-decoder): src = x_1 .. x_n [eos]
 *                                 tgt_in  = [bos] y_1 .. y_m
 *                                 tgt_out = y_1 .. y_m [eos]
 *   with a WordPiece tokenizer (BERT) the classifier's rows are
 *   [cls] x_1 .. x_n [sep], as the pretrained model saw them.
 *   pad fills every row past its length; tgt_out has -1 (ignore) there.
 *   Lengths: S = n + 1 (source or classifier row), T = m + 1 (target row).
 *
 * Truncation: rows longer than max_src / max_tgt (specials included) keep
 * their first tokens and still get their specials (the [eos] of a cut
 * source or target is kept: the row is x_1 .. x_{max-1} [eos]). Every cut
 * is counted in clf_seqdata_stats (sequences truncated, tokens dropped,
 * longest before and after) so that the caller reports it; nothing is
 * dropped silently.
 *
 * Batches
 *   Size: `batch` sentences, or a token budget `batch_tokens`: a batch of B
 *   examples whose longest (padded) row is L = max(S, T) takes B * L <=
 *   batch_tokens (one example longer than the budget forms a batch alone);
 *   with both, `batch` caps B as well. Rows are padded to the batch's
 *   longest, rounded up to pad_multiple.
 *   Orders:
 *     CLF_SEQ_ORDER_BUCKETED (training): each epoch, permute all examples
 *       (Fisher-Yates with clf_rng), sort each window of `chunk` consecutive
 *       examples by length (key: max(S, T), then S, then T, then position in
 *       the permutation: a total order, so the result does not depend on the
 *       sort algorithm), cut each window into batches, then permute the
 *       batches. Similar lengths share a batch (little padding), and batch
 *       order and membership still change every epoch. (On Multi30k the
 *       max(S, T) key left fewer padded slots than sorting by source, by
 *       target or by S + T, and it is also the token budget's cost.)
 *     CLF_SEQ_ORDER_SHUFFLED: the permutation cut into batches, no sorting
 *       (the baseline that bucketing is measured against).
 *     CLF_SEQ_ORDER_SORTED (evaluation, inference): all examples sorted by
 *       length (ties by index), no randomness; every batch carries the
 *       examples' original indices so outputs go back to input order.
 *     CLF_SEQ_ORDER_INPUT: input order, consecutive examples.
 *   The generator of epoch e is clf_rng_seed(seed + 0x9E3779B97F4A7C15 * e)
 *   (dataset.h: xoshiro256** seeded by splitmix64), drawn in this order:
 *   the example permutation (for i = N-1 .. 1: j = clf_rng_below(i + 1),
 *   swap i, j), then the batch permutation (the same over batches). An
 *   epoch's batches are thus a function of (data, options, seed, epoch)
 *   alone, and the iteration state is two integers: the epoch and the next
 *   batch in it (clf_seq_loader_state; as text for checkpoint metadata).
 *
 *   clf_seqdata *ds;   clf_seq_options so;  clf_seq_options_default(&so, kind, context);
 *   clf_seqdata_load_pairs("train.de.gz", "train.en.gz", tok, tok, &so, &ds, err);
 *   clf_seq_batching bo;  clf_seq_batching_default(&bo);  bo.batch_tokens = 4096;
 *   clf_seq_loader *L;  clf_seq_loader_create(ds, &bo, &L, err);
 *   clf_seq_batch *b;   clf_seq_batch_create(L, &b, err);   // sized for the largest batch
 *   while (training) {
 *       if (!clf_seq_loader_next(L, b)) { end of epoch: validate; continue; }
 *       upload b->src [B, S], b->src_keep, b->tgt_in [B, T], b->tgt_out ...
 *   }
 *
 * Not here: tokenizer training (the BPE module), streaming corpora larger
 * than memory (files are read whole, CLF_SEQDATA_MAX_BYTES), dropping
 * overlong examples instead of truncating them, multi-reference targets,
 * and device uploads (the batch is host int32 arrays).
 */
#ifndef CLF_SEQDATA_H
#define CLF_SEQDATA_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "model/data/batch.h"
#include "model/data/dataset.h"
#include "model/text/tokenizer.h"
#include "runtime/status.h"

CLF_API_BEGIN

#define CLF_SEQDATA_MAX_BYTES ((size_t)1 << 30) /* largest (uncompressed) file read */
#define CLF_SEQ_COLUMN_MAX 64
#define CLF_SEQ_STATE_STRING_MAX 128

/* ---- the dataset ------------------------------------------------------------------ */

typedef struct clf_seq_options {
    /* CLF_MODEL_ENCODER (classifier) or CLF_MODEL_ENCODER_DECODER (translator). */
    clf_model_kind kind;
    int max_src; /* longest source / classifier row S, specials included, >= 2 */
    int max_tgt; /* longest target row T (= target tokens + 1), >= 2 */
    /* TSV columns: "" = auto ("sentence", "text", "content" / "label"). */
    char text_column[CLF_SEQ_COLUMN_MAX];
    char label_column[CLF_SEQ_COLUMN_MAX];
} clf_seq_options;

/* kind, max_src = max_tgt = context (the model's, from its config). */
void clf_seq_options_default(clf_seq_options *o, clf_model_kind kind, int context);

/* What loading did to one side (source / classifier sentences, or targets). */
typedef struct clf_seq_side_stats {
    int64_t sequences;    /* rows on this side */
    int64_t tokens;       /* tokens kept, specials included (row lengths summed) */
    int64_t truncated;    /* rows cut to the maximum length */
    int64_t dropped;      /* tokens removed by those cuts */
    int32_t longest;      /* longest row before truncation, specials included */
    int32_t longest_kept; /* longest row after */
    int32_t shortest;     /* shortest row */
} clf_seq_side_stats;

typedef struct clf_seqdata_stats {
    int64_t examples;
    clf_seq_side_stats src; /* source or classifier sentences */
    clf_seq_side_stats tgt; /* targets (all zero without targets) */
    int32_t labels;         /* classifier: max label + 1 (0 without labels) */
} clf_seqdata_stats;

typedef struct clf_seqdata clf_seqdata;

/* Parallel files (translator). src_tok and tgt_tok may be the same. */
clf_status clf_seqdata_load_pairs(const char *src_path, const char *tgt_path,
                                  const clf_tokenizer *src_tok, const clf_tokenizer *tgt_tok,
                                  const clf_seq_options *o, clf_seqdata **out, clf_error *err);
/* A TSV with a header (classifier). */
clf_status clf_seqdata_load_tsv(const char *path, const clf_tokenizer *tok,
                                const clf_seq_options *o, clf_seqdata **out, clf_error *err);
/* Sentences in memory, one per line, without targets or labels (inference:
 * `clformer translate` / `classify` on standard input): source rows only,
 * batches have T = 0 and labels -1. tok is the source tokenizer; name is
 * used in messages. */
clf_status clf_seqdata_from_text(const char *text, size_t len, const char *name,
                                 const clf_tokenizer *tok, const clf_seq_options *o,
                                 clf_seqdata **out, clf_error *err);
void clf_seqdata_destroy(clf_seqdata *ds);

size_t clf_seqdata_size(const clf_seqdata *ds);
const clf_seqdata_stats *clf_seqdata_stats_get(const clf_seqdata *ds);
int clf_seqdata_has_targets(const clf_seqdata *ds); /* targets or labels */
/* Example i (0-based, input order): its source row (specials included, see
 * the layout above) and target tokens y (no specials; NULL/0 without), and
 * label (-1 without). Any output pointer may be NULL. */
void clf_seqdata_example(const clf_seqdata *ds, size_t i, const int32_t **src, int *src_len,
                         const int32_t **tgt, int *tgt_len, int32_t *label);
/* The line of example i in its file (1-based; a TSV's header is line 1). */
int64_t clf_seqdata_line(const clf_seqdata *ds, size_t i);
/* "29000 examples; source: 512345 tokens, longest 41, none truncated;
 * target: ..., 3 truncated (12 tokens dropped)". snprintf-like. */
size_t clf_seqdata_stats_format(const clf_seqdata_stats *st, char *buf, size_t cap);

/* ---- batching ------------------------------------------------------------------------- */

typedef enum clf_seq_order {
    CLF_SEQ_ORDER_BUCKETED = 0, /* training: shuffled windows sorted by length */
    CLF_SEQ_ORDER_SHUFFLED,     /* random batches (no sorting) */
    CLF_SEQ_ORDER_SORTED,       /* by length, deterministic (evaluation, inference) */
    CLF_SEQ_ORDER_INPUT,        /* input order */
} clf_seq_order;

typedef struct clf_seq_batching {
    int batch;        /* sentences per batch (a cap when batch_tokens is set); 0 = none */
    int batch_tokens; /* B * max(S, T) budget; 0 = off (then batch > 0) */
    clf_seq_order order;
    int chunk;        /* bucketed: examples per sorting window; 0 = 64 batches' worth */
    int pad_multiple; /* round S and T up to a multiple of this (1 = no rounding) */
    uint64_t seed;
} clf_seq_batching;

/* batch 32, no token budget, bucketed, chunk 0, pad_multiple 1, seed 1337. */
void clf_seq_batching_default(clf_seq_batching *o);

/* One batch, host arrays packed row-major with the batch's own S and T. */
typedef struct clf_seq_batch {
    int B, S, T;        /* this batch; T = 0 without targets */
    int32_t *src;       /* [B, S] source / classifier tokens, pad after each row */
    int32_t *src_keep;  /* [B, S] 1 = token, 0 = pad */
    int32_t *tgt_in;    /* [B, T] bos y_1 .. y_m, pad after */
    int32_t *tgt_out;   /* [B, T] y_1 .. y_m eos, -1 after */
    int32_t *tgt_keep;  /* [B, T] 1 = token, 0 = pad */
    int32_t *labels;    /* [B] classifier labels (-1 without labels) */
    int64_t *index;     /* [B] example indices (input order, 0-based) */
    int64_t src_tokens; /* non-pad entries of src */
    int64_t tgt_tokens; /* non-ignored entries of tgt_out (loss normaliser) */
    int64_t epoch;      /* the epoch and position this batch came from */
    int64_t position;
    /* capacities (clf_seq_loader_limits) */
    int max_B;
    int64_t cap_src, cap_tgt;
} clf_seq_batch;

/* Upper bounds over every batch any epoch can produce, for planning device
 * memory once. */
typedef struct clf_seq_limits {
    int max_B;              /* examples (with a token budget: budget / shortest row) */
    int max_S, max_T;       /* padded row lengths */
    int64_t max_src_tokens; /* B * S */
    int64_t max_tgt_tokens; /* B * T */
} clf_seq_limits;

/* Resumable position: the next batch is batch `position` of epoch `epoch`. */
typedef struct clf_seq_loader_state {
    int64_t epoch;
    int64_t position;
} clf_seq_loader_state;

typedef struct clf_seq_loader clf_seq_loader;

/* The loader reads ds (which must outlive it) and plans epoch 0. Invalid
 * options (neither batch nor batch_tokens, negative values, pad_multiple
 * < 1) -> CLF_ERR_ARG. */
clf_status clf_seq_loader_create(const clf_seqdata *ds, const clf_seq_batching *o,
                                 clf_seq_loader **out, clf_error *err);
void clf_seq_loader_destroy(clf_seq_loader *L);

void clf_seq_loader_limits(const clf_seq_loader *L, clf_seq_limits *lim);
/* Batches in the current epoch (fixed for `batch` alone; may vary by epoch
 * with a token budget). */
size_t clf_seq_loader_batches(const clf_seq_loader *L);
/* Padding of the current epoch: real tokens and padded slots (B*S or B*T
 * summed over its batches), source and target. */
void clf_seq_loader_padding(const clf_seq_loader *L, int64_t *src_real, int64_t *src_padded,
                            int64_t *tgt_real, int64_t *tgt_padded);

/* A batch sized for the loader's limits. */
clf_status clf_seq_batch_create(const clf_seq_loader *L, clf_seq_batch **out, clf_error *err);
void clf_seq_batch_destroy(clf_seq_batch *b);

/* Fill b with the next batch and return 1; at the end of an epoch return 0
 * (b untouched) and move to the start of the next epoch, so that the
 * following call begins it. Never fails: everything is planned ahead. */
int clf_seq_loader_next(clf_seq_loader *L, clf_seq_batch *b);
/* b as the one batch type for a model of kind (a classifier: source and
 * labels, tokens = source tokens; a translator: source and targets, tokens
 * = target tokens), with its epoch. */
clf_batch clf_seq_batch_view(const clf_seq_batch *b, clf_model_kind kind);

void clf_seq_loader_get_state(const clf_seq_loader *L, clf_seq_loader_state *s);
/* Jump to a saved state (replanning that epoch). A position past the
 * epoch's batches -> CLF_ERR_ARG. */
clf_status clf_seq_loader_set_state(clf_seq_loader *L, const clf_seq_loader_state *s,
                                    clf_error *err);
/* "seq:epoch=3,position=120,examples=29000,seed=1337" for checkpoint
 * metadata, and back: reading checks that the example count and seed are
 * the loader's (a resume on other data or with another seed is refused,
 * CLF_ERR_ARG) and then sets the state. */
void clf_seq_loader_state_to_string(const clf_seq_loader *L, char out[CLF_SEQ_STATE_STRING_MAX]);
clf_status clf_seq_loader_state_from_string(clf_seq_loader *L, const char *s, clf_error *err);

/* ---- the tokenizer of a run (seqvocab.c) ---- */

typedef struct clf_seq_vocab_info {
    int from_path;          /* 1: read from cfg->vocab.path */
    int merges;             /* bpe: merges learned */
    double bytes_per_token; /* bpe: on the training text */
    double seconds;         /* time to build */
} clf_seq_vocab_info;

/* The tokenizer cfg asks for, built from a run's training sentences:
 * vocab.path set: that file (tokenizer JSON); bpe: trained with vocab.size
 * on the text (a translator: train_src and train_tgt, one joint vocabulary;
 * a classifier: train_tgt NULL and train_src a TSV whose header names its
 * text column sentence, text or content); char: the code points of the same
 * text; byte. Every special token (pad, bos, eos, unk, cls, sep) is present.
 * info may be NULL. */
clf_status clf_seq_tokenizer_build(const clf_model_config *cfg, const char *train_src,
                                   const char *train_tgt, clf_tokenizer **out,
                                   clf_seq_vocab_info *info, clf_error *err);

/* Give a char or byte tokenizer every special token (bpe has them). */
clf_status clf_seq_tokenizer_specials(clf_tokenizer *tok, clf_error *err);

CLF_API_END

#endif
