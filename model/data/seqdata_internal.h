/*
 * seqdata_internal.h - the dataset's layout, shared by seqdata.c (loading)
 * and seqdata_batch.c (batching). Not for use outside model/seqdata*.c.
 */
#ifndef CLF_SEQDATA_INTERNAL_H
#define CLF_SEQDATA_INTERNAL_H

#include <stdint.h>

#include "model/data/seqdata.h"

struct clf_seqdata {
    clf_model_kind kind;
    size_t n;
    int32_t *src;     /* all source rows, specials included */
    int64_t *src_off; /* [n + 1] */
    int32_t *tgt;     /* all target tokens y (no specials); NULL without targets */
    int64_t *tgt_off; /* [n + 1] */
    int32_t *labels;  /* [n]; NULL without labels */
    int64_t *lines;   /* [n] 1-based line numbers */
    int32_t src_pad, tgt_pad, bos, eos;
    int32_t src_sep; /* encoder rows end with it (WordPiece's [SEP]); -1: none */
    clf_seqdata_stats stats;
};

#endif
