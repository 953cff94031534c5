/*
 * beam.h - batched greedy decoding and beam search, for the encoder-decoder
 * (translation) and the decoder-only model (continuing prompts), on the
 * host over logits the model computes with its caches.
 *
 * The search (clf_beam_search), for N sentences at once, K = beam size:
 *   Start: the caller has the model's caches hold one row per sentence and
 *   hands the logits [N, V] of the first position to predict (the
 *   encoder-decoder: clf_model_encode, then clf_model_decode_step of bos at
 *   position 0; a GPT: clf_model_prefill of the prompts). All K beams of a
 *   sentence would be identical at this point, so the first step expands
 *   from the N rows directly: the K best first tokens of each sentence
 *   become its beams, and one cache reorder copies each sentence's row to
 *   its K beams.
 *   Each step: log-softmax of every live row (double precision); the
 *   candidates of a sentence are (beam, token) pairs scored by the beam's
 *   summed log-probability plus the token's; the 2K best (at most K x V)
 *   are taken in order of score (ties: lower row, then lower token id), as
 *   fairseq's sequence generator does:
 *     - a candidate ending in eos among the first K is finished: its score
 *       is the summed log-probability (eos included) divided by
 *       len^alpha, len = tokens generated with eos counted (fairseq's
 *       length penalty, `score / len ** lenpen`; alpha 0 = no penalty,
 *       alpha 1 = the mean log-probability per token; GNMT's
 *       ((5 + len) / 6)^alpha is not offered);
 *     - the first K candidates not ending in eos are the next live beams.
 *   A sentence is done when it has K finished hypotheses (early stop: live
 *   beams that could still overtake one are not explored, as fairseq and
 *   Hugging Face with early_stopping=True), or at its maximum length: on the
 *   step that generates token max_len, only eos is allowed, so every live
 *   beam finishes. Without an eos (eos < 0, e.g. a char-level GPT) every
 *   beam runs to max_len and finishes there.
 *   The result of a sentence is its best finished hypothesis by normalised
 *   score (ties: the earlier finished). Its tokens exclude eos.
 *   Rows of finished sentences are dropped from the caches at the next
 *   reorder (the batch shrinks as sentences end); a reorder that keeps
 *   every row in place is skipped (greedy decoding reorders only when a
 *   sentence ends).
 *   K = 1 is greedy decoding exactly: the best token of each step, until
 *   eos or max_len.
 *
 * Determinism: the search is a function of the logits alone (total orders
 * everywhere), and a sentence's steps do not depend on the other sentences
 * of its batch, so batched and one-by-one searches agree whenever the model
 * gives a row the same logits in any batch.
 *
 * The model is reached through two callbacks (clf_beam_fns), so the search
 * runs on a mock in tests; clf_beam_fns_model gives the real ones
 * (clf_model_decode_step, clf_model_cache_reorder).
 *
 * Cost per step on the host: one pass over the [rows, V] logits (log-sum-
 * exp and a 2K-best selection per row) and a K x 2K merge per sentence;
 * the device does the decoder step and one cache gather.
 *
 * Not here: sampling (sampler.h), n-best lists (only the best hypothesis is
 * returned), diverse beams, constraints, a minimum length, repetition
 * penalties, GNMT's coverage penalty.
 */
#ifndef CLF_BEAM_H
#define CLF_BEAM_H

#include <stddef.h>
#include <stdint.h>

#include "model/data/seqdata.h"
#include "model/graph/model.h"
#include "runtime/status.h"

CLF_API_BEGIN

#define CLF_BEAM_MAX 64 /* largest beam size */

typedef struct clf_beam_options {
    int beam;     /* K in [1, CLF_BEAM_MAX]; 1 = greedy */
    double alpha; /* length penalty exponent (>= 0): score = logprob / len^alpha */
    /* Maximum generated tokens (eos included) of a sentence with a source
     * of S tokens (its eos included): floor(max_len_a * S + max_len_b),
     * capped by the model's longest target. A GPT: max_len_b counts the
     * new tokens (max_len_a is ignored). */
    double max_len_a;
    int max_len_b;
    int batch; /* sentences per search (the model's rows: batch x beam) */
} clf_beam_options;

/* beam 1 (greedy), alpha 1, max_len_a 1.5, max_len_b 10, batch 64. */
void clf_beam_options_default(clf_beam_options *o);
/* CLF_ERR_ARG naming the option that is out of range. */
clf_status clf_beam_options_check(const clf_beam_options *o, clf_error *err);

/* The model as the search sees it. step: run one position for the B cached
 * rows with tokens [B] at position pos, write logits [B, V]. reorder: new
 * row i = old row index[i] for i < B (see clf_model_cache_reorder). */
typedef struct clf_beam_fns {
    void *user;
    clf_status (*step)(void *user, const int32_t *tokens, int B, int pos, float *logits,
                       clf_error *err);
    clf_status (*reorder)(void *user, const int32_t *index, int B, clf_error *err);
} clf_beam_fns;

/* The callbacks of a model created with CLF_MODEL_INFER. */
clf_beam_fns clf_beam_fns_model(clf_model *m);

/* The best hypothesis of each sentence. */
typedef struct clf_beam_hyp {
    int32_t *tokens; /* generated tokens, eos excluded (points into the result) */
    int len;
    int finished_by_eos; /* 0: cut at the maximum length */
    double logprob;      /* summed log-probability of the tokens (and eos) */
    double score;        /* logprob / (len + finished_by_eos)^alpha */
} clf_beam_hyp;

typedef struct clf_beam_result {
    int N;
    clf_beam_hyp *hyp; /* [N] */
    int32_t *store;    /* token storage */
} clf_beam_result;

void clf_beam_result_free(clf_beam_result *r); /* frees the members; NULL-safe */

/* Scratch for searches of up to max_N sentences, beam K, vocabulary V and
 * max_len generated tokens; allocated once, reused by every search. */
typedef struct clf_beam_search clf_beam_search;
clf_status clf_beam_search_create(int max_N, int K, int V, int max_len, clf_beam_search **out,
                                  clf_error *err);
void clf_beam_search_destroy(clf_beam_search *s);

/* Search N sentences whose caches are rows 0..N-1 and whose first logits
 * are first_logits [N, V] (the next position is pos0). max_len [N]: the
 * most tokens to generate per sentence, eos included (>= 1, <= the
 * search's max_len; the step callback is fed positions pos0 .. pos0 +
 * max_len - 2, which must be valid). eos < 0: no eos. alpha: the length penalty. Fills
 * res (res->N = N, hypotheses in sentence order); res is the caller's,
 * freed with clf_beam_result_free (it may be passed again: reused). */
clf_status clf_beam_search_run(clf_beam_search *s, const clf_beam_fns *fns,
                               const float *first_logits, int N, int pos0, const int *max_len,
                               int32_t eos, double alpha, clf_beam_result *res, clf_error *err);

/* ---- the models -------------------------------------------------------------- */

/* Encoder-decoder: translate src [N, S] (keep [N, S], NULL = no padding;
 * the layout of seqdata.h: x_1 .. x_n eos, pad after) with bos/eos ids.
 * The model (CLF_MODEL_INFER) must hold N x K rows. s may be NULL (a
 * scratch is created for the call). */
clf_status clf_beam_translate(clf_model *m, clf_beam_search *s, const int32_t *src,
                              const int32_t *keep, int N, int S, int32_t bos, int32_t eos,
                              const clf_beam_options *o, clf_beam_result *res, clf_error *err);

/* Decoder-only: continue N prompts of T0 tokens each (prompts [N, T0]) by
 * up to o->max_len_b tokens (capped by the context), stopping at eos (< 0:
 * none). */
clf_status clf_beam_generate(clf_model *m, clf_beam_search *s, const int32_t *prompts, int N,
                             int T0, int32_t eos, const clf_beam_options *o, clf_beam_result *res,
                             clf_error *err);

/* Translate every example of a dataset (clf_seqdata_from_text, or a
 * parallel set whose targets are ignored) in batches of o->batch sentences
 * sorted by length, with the tokenizer's bos and eos: (*out)[i] is example
 * i's hypothesis tokens (malloc'ed, -1 terminated; free each and the
 * array). m must be an encoder-decoder created with CLF_MODEL_INFER for at
 * least o->batch x o->beam rows and the dataset's longest source
 * (clf_beam_model_limits). */
clf_status clf_beam_translate_dataset(clf_model *m, const clf_seqdata *ds, int32_t bos, int32_t eos,
                                      const clf_beam_options *o, int32_t ***out, clf_error *err);

/* The inference limits a model needs for clf_beam_translate_dataset on ds
 * with o: B = batch x beam, S = the longest source, T = context. */
void clf_beam_model_limits(const clf_seqdata *ds, const clf_beam_options *o, int context,
                           clf_model_limits *lim);

CLF_API_END

#endif
