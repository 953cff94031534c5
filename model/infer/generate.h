/*
 * generate.h - text generation from a decoder: the prompt through one
 * batched prefill, then one clf_model_decode_step per new token (the work of
 * one position), with the model's context as a sliding window.
 *
 * Positions are absolute and the KV cache holds the model's context T; when
 * it is full the window slides: the last T - 1 tokens are prefilled again at
 * positions 0..T-2 (their logits give the next token) and decoding goes on at
 * position T - 1. Past the first T tokens every second token costs a prefill
 * of T - 1 positions, and every token sees at least T - 1 tokens of context,
 * as when a model without a cache crops its input to the last T tokens
 * (nanoGPT's generate).
 *
 * Not here: picking a token from logits (sampler.h), beam search (beam.h).
 */
#ifndef CLF_GENERATE_H
#define CLF_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "model/graph/model.h"
#include "model/infer/sampler.h"
#include "model/text/tokenizer.h"
#include "runtime/status.h"

CLF_API_BEGIN

/* Called once per generated token with its text (possibly empty, e.g. a
 * special token); a nonzero return stops generation after that token. */
typedef int (*clf_generate_fn)(void *user, int32_t token, const char *piece, size_t len);

typedef struct clf_generate_stats {
    long tokens;    /* tokens generated */
    long slides;    /* times the context window slid */
    double seconds; /* wall time from the prefill to the last token */
} clf_generate_stats;

/* Continue prompt[0..prompt_len) (UTF-8, encoded with tok; a character the
 * tokenizer does not know is CLF_ERR_ARG naming it) by n_tokens tokens drawn
 * with the sampler options so, calling on_token for each. An empty prompt
 * starts from a newline (token 0 if the vocabulary has none); a prompt longer
 * than the context keeps its last T tokens. m is a decoder created with
 * CLF_MODEL_INFER and batch >= 1. Logits that are not finite end generation
 * with CLF_ERR_NUMERIC. stats may be NULL. */
clf_status clf_generate(clf_model *m, const clf_tokenizer *tok, const char *prompt,
                        size_t prompt_len, long n_tokens, const clf_sampler_options *so,
                        clf_generate_fn on_token, void *user, clf_generate_stats *stats,
                        clf_error *err);

CLF_API_END

#endif
