/*
 * dataset.h - a tokenized text corpus split into train and validation,
 * random training windows from a seeded generator, and the fixed
 * evaluation windows.
 *
 * Split (as nanoGPT's prepare.py, which splits by characters; for the char
 * tokenizer on ASCII text tokens are characters): of n tokens, train is the
 * first floor(9n/10), validation the last n - floor(9n/10). Tiny
 * Shakespeare: 1,115,394 tokens -> 1,003,854 train, 111,540 validation.
 *
 * Training batches (as nanoGPT's get_batch): for b = 0..B-1 in order, a
 * start i_b is drawn uniformly from [0, n_split - T) with
 * clf_rng_below(rng, n_split - T); x[b*T + t] = split[i_b + t] and
 * y[b*T + t] = split[i_b + t + 1] (y is x shifted by one). The split needs
 * at least T + 1 tokens. The generator state is a plain struct: save it with
 * the step for --resume and the batches continue bit-identically.
 *
 * Evaluation windows (the rule other implementations must match to get the
 * same number): a split of n >= 2 tokens is cut into W = ceil((n - 1) / T)
 * non-overlapping windows. Window w (0-based) starts at s = w*T and has
 * len = min(T, n - 1 - s) predicted positions:
 *     x[t] = split[s + t],  y[t] = split[s + t + 1]   for t in [0, len)
 * so every token but the first is a target exactly once (n - 1 targets in
 * all) and each target sees the tokens before it in its own window only.
 * Only the last window can be partial (len < T), and it always has len >= 1.
 * Positions t in [len, T) are filled with x = 0 and y = -1 (ignore). The
 * validation loss is the sum of the per-position losses over all windows
 * divided by n - 1 (not the mean of window means).
 *
 * Documents (train.packing): the text is cut into documents after every
 * run of line breaks holding two newlines or more (a blank line; the run
 * stays with the document before it), each tokenized on its own and the
 * tokens concatenated, every token knowing its document (ids increasing
 * through the text). Windows are drawn and cut exactly as above; besides,
 * a target that belongs to the next document (y[t] where x[t] is the last
 * token of its document) is ignored (-1), and the window's document ids
 * come with it, for the model to keep attention inside each document and
 * restart positions at its first token. An evaluation window's padding
 * positions get a document id of their own (one past the last).
 *
 * The generator: xoshiro256** 1.0 (Blackman & Vigna), state seeded by
 * running splitmix64 from the 64-bit seed (s[0..3] = four successive
 * splitmix64 outputs). clf_rng_below(n) is unbiased by rejection: draw
 * x = clf_rng_next() until x >= (2^64 - n) mod n, then return x mod n (the
 * first draw is accepted with probability > 1 - n/2^64).
 *
 * Not here: variable-length sequence batching with padding (translation and
 * classification data: a later module), shuffling epochs, streaming corpora
 * larger than memory (the whole file is read; limit CLF_DATASET_MAX_BYTES).
 */
#ifndef CLF_DATASET_H
#define CLF_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "model/text/tokenizer.h"
#include "runtime/status.h"

CLF_API_BEGIN

/* ---- the random generator -------------------------------------------------- */

typedef struct clf_rng {
    uint64_t s[4]; /* xoshiro256** state; never all zero */
} clf_rng;

#define CLF_RNG_STRING_MAX 96 /* "xoshiro256**:" (13) + 4 x 16 hex + 3 commas + NUL = 81 */

void clf_rng_seed(clf_rng *r, uint64_t seed);
uint64_t clf_rng_next(clf_rng *r);
/* Uniform in [0, n); n must be > 0 (returns 0 for n == 0). */
uint64_t clf_rng_below(clf_rng *r, uint64_t n);
/* Uniform double in [0, 1) with 53 random bits. */
double clf_rng_uniform(clf_rng *r);
/* The state as text ("xoshiro256**:0123...,....,....,....") for checkpoint
 * metadata, and back. A malformed string -> CLF_ERR_FORMAT. */
void clf_rng_to_string(const clf_rng *r, char out[CLF_RNG_STRING_MAX]);
clf_status clf_rng_from_string(const char *s, clf_rng *r, clf_error *err);

/* ---- the dataset ----------------------------------------------------------- */

#define CLF_DATASET_MAX_BYTES ((size_t)1 << 30) /* largest text file read */
#define CLF_DATASET_IGNORE (-1)                 /* a target that counts for nothing */

typedef enum clf_split {
    CLF_SPLIT_TRAIN = 0,
    CLF_SPLIT_VAL,
} clf_split;

typedef struct clf_dataset clf_dataset;

/* Read a text file (plain or gzip-compressed) for building a tokenizer or a
 * dataset: *text is malloc'ed, NUL-terminated. A missing or unreadable file
 * is CLF_ERR_IO with the path; an empty one or a corrupt gzip stream
 * CLF_ERR_FORMAT. */
clf_status clf_dataset_read_text(const char *path, char **text, size_t *len, clf_error *err);
/* The tokenizer a decoder trains with on text[0, len) (the file `name`),
 * as its config's vocabulary says: read from vocab.path (clformer's
 * tokenizer JSON, or a Hugging Face tokenizer.json), byte-level BPE trained
 * on the text (vocab.tokenizer bpe, vocab.size tokens), or char / word
 * built from the text. */
clf_status clf_dataset_tokenizer(const clf_model_config *cfg, const char *text, size_t len,
                                 const char *name, clf_tokenizer **tok, clf_error *err);
/* Read, tokenize and split path. Errors name the path. */
clf_status clf_dataset_load(const char *path, const clf_tokenizer *tok, clf_dataset **out,
                            clf_error *err);
/* As clf_dataset_load, as documents (see above) where documents is nonzero. */
clf_status clf_dataset_load_opts(const char *path, const clf_tokenizer *tok, int documents,
                                 clf_dataset **out, clf_error *err);
/* Text in memory as documents (see above). */
clf_status clf_dataset_from_documents(const char *text, size_t len, const char *name,
                                      const clf_tokenizer *tok, clf_dataset **out, clf_error *err);
/* Tokenize and split text already in memory; name is used in messages. */
clf_status clf_dataset_from_text(const char *text, size_t len, const char *name,
                                 const clf_tokenizer *tok, clf_dataset **out, clf_error *err);
/* Split ids already tokenized (copied); vocab bounds every id, for checks. */
clf_status clf_dataset_from_tokens(const int32_t *ids, size_t n, int32_t vocab, clf_dataset **out,
                                   clf_error *err);
void clf_dataset_destroy(clf_dataset *ds);

/* Tokens of a split (pointer into the dataset) and their number. */
const int32_t *clf_dataset_tokens(const clf_dataset *ds, clf_split split, size_t *n);
size_t clf_dataset_size(const clf_dataset *ds, clf_split split);
int32_t clf_dataset_vocab(const clf_dataset *ds);
/* The document id of each token of a split (pointer into the dataset), or
 * NULL for a dataset read as one stream; the documents a split touches. */
const int32_t *clf_dataset_documents(const clf_dataset *ds, clf_split split);
size_t clf_dataset_document_count(const clf_dataset *ds, clf_split split);

/* B random windows of T tokens (see above) into x and y, each [B, T]
 * row-major, and (unless NULL) their document ids into doc [B, T]. The
 * split must hold at least T + 1 tokens, else CLF_ERR_ARG. */
clf_status clf_dataset_sample_batch(const clf_dataset *ds, clf_split split, int B, int T,
                                    clf_rng *rng, int32_t *x, int32_t *y, int32_t *doc,
                                    clf_error *err);

/* Evaluation windows (see above): how many for context T (0 if the split has
 * fewer than 2 tokens), and window w into x[T], y[T] (doc[T] unless NULL)
 * with *len predicted positions (with documents, those ending one are
 * ignored among them). */
size_t clf_dataset_eval_windows(const clf_dataset *ds, clf_split split, int T);
clf_status clf_dataset_eval_window(const clf_dataset *ds, clf_split split, int T, size_t w,
                                   int32_t *x, int32_t *y, int32_t *doc, size_t *len,
                                   clf_error *err);

/* The same as an iterator:
 *   clf_eval_iter it; clf_dataset_eval_begin(ds, CLF_SPLIT_VAL, T, &it);
 *   while (clf_dataset_eval_next(&it, x, y, &len)) { ... } */
typedef struct clf_eval_iter {
    const clf_dataset *ds;
    clf_split split;
    int T;
    size_t next, count;
} clf_eval_iter;

void clf_dataset_eval_begin(const clf_dataset *ds, clf_split split, int T, clf_eval_iter *it);
/* Fill the next window; returns 1, or 0 when all windows are done. */
int clf_dataset_eval_next(clf_eval_iter *it, int32_t *x, int32_t *y, size_t *len);

CLF_API_END

#endif
