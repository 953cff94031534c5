/*
 * batch.h - the one batch type: what every model kind trains and evaluates
 * on, and what every batch source (source.h) produces. A view: the arrays
 * belong to whoever filled them (a loader, a test, a caller's buffers) and
 * clf_model_set_batch copies them.
 *
 * Which fields a kind reads:
 *   decoder (GPT)      tgt_in [B, T] tokens, tgt_out [B, T] next-token targets,
 *                      and with packed documents tgt_doc [B, T]
 *   encoder-decoder    src [B, S], src_keep [B, S], tgt_in [B, T], tgt_out [B, T]
 *   encoder classifier src [B, S], src_keep [B, S], labels [B]
 * Targets and labels equal to -1 (CLF_MODEL_IGNORE_INDEX) contribute no loss;
 * tgt_out / labels NULL: a batch without targets (forward only).
 */
#ifndef CLF_BATCH_H
#define CLF_BATCH_H

#include <stdint.h>

#include "runtime/status.h"

CLF_API_BEGIN

typedef struct clf_batch {
    int B;                   /* sequences */
    int S;                   /* source length (encoder kinds); 0 for a decoder */
    int T;                   /* target / decoder length; 0 for a classifier */
    const int32_t *src;      /* [B, S] encoder tokens (NULL for a decoder) */
    const int32_t *src_keep; /* [B, S] nonzero = token, 0 = pad; NULL = no padding */
    const int32_t *tgt_in;   /* [B, T] decoder input tokens (a GPT's x) */
    const int32_t *tgt_out;  /* [B, T] next-token targets (a GPT's y); NULL = none */
    const int32_t *labels;   /* [B] classifier labels; NULL = none */
    /* [B, T] a decoder's packed documents (train.packing): the document each
     * position belongs to, non-decreasing along a row; attention stays
     * inside a document and positions restart at its first token. NULL =
     * one document per row */
    const int32_t *tgt_doc;
    /* set by batch sources, for the trainer */
    double tokens; /* the tokens the batch counts for throughput */
    int64_t epoch; /* the epoch it came from; -1 for random text windows */
    int epoch_end; /* 1 if it is the last batch of its epoch */
} clf_batch;

/* A decoder's batch: x and y [B, T] (y NULL: no targets). */
static inline clf_batch clf_batch_decoder(const int32_t *x, const int32_t *y, int B, int T)
{
    clf_batch b = {.B = B, .T = T, .tgt_in = x, .tgt_out = y, .epoch = -1};
    return b;
}

/* A decoder's batch of packed documents: doc [B, T] as tgt_doc above. */
static inline clf_batch clf_batch_packed(const int32_t *x, const int32_t *y, const int32_t *doc,
                                         int B, int T)
{
    clf_batch b = {.B = B, .T = T, .tgt_in = x, .tgt_out = y, .tgt_doc = doc, .epoch = -1};
    return b;
}

/* An encoder-decoder's batch. */
static inline clf_batch clf_batch_seq2seq(const int32_t *src, const int32_t *src_keep,
                                          const int32_t *tgt_in, const int32_t *tgt_out, int B,
                                          int S, int T)
{
    clf_batch b = {.B = B,
                   .S = S,
                   .T = T,
                   .src = src,
                   .src_keep = src_keep,
                   .tgt_in = tgt_in,
                   .tgt_out = tgt_out,
                   .epoch = -1};
    return b;
}

/* An encoder classifier's batch. */
static inline clf_batch clf_batch_classify(const int32_t *tokens, const int32_t *keep,
                                           const int32_t *labels, int B, int S)
{
    clf_batch b = {.B = B, .S = S, .src = tokens, .src_keep = keep, .labels = labels, .epoch = -1};
    return b;
}

CLF_API_END

#endif
