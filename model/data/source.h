/*
 * source.h - the one batch-source interface the trainer loops over, for
 * every model kind: the next training batch, the run's length, and the
 * position to store in a checkpoint and restore on --resume.
 *
 * Two sources today:
 *   text windows   a decoder's stream: B random windows of T + 1 tokens of
 *                  the training split per batch (with their document ids
 *                  where the dataset holds documents), drawn from a xoshiro256**
 *                  generator seeded with the run's seed (dataset.h); no
 *                  epochs; the position is the generator state ("data_rng").
 *   sentences      the encoder kinds' stream: the sentence loader's batches
 *                  (seqdata.h), epoch after epoch; the position is the
 *                  loader's (epoch, batch) state ("data_state").
 * Both are deterministic functions of the seed and the position, so a
 * resumed run draws exactly the batches an uninterrupted one would.
 *
 *   clf_batch_source *src;  clf_batch_source_text(ds, B, T, seed, &src, &e);
 *   clf_batch b;
 *   while (...) { clf_batch_source_next(src, &b, &e); clf_model_set_batch(m, &b, &e); ... }
 *
 * Not here: evaluation data (the trainer's evaluations read the validation
 * split or set directly), sharding across processes.
 */
#ifndef CLF_SOURCE_H
#define CLF_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "model/data/batch.h"
#include "model/data/dataset.h"
#include "model/data/seqdata.h"
#include "runtime/status.h"

CLF_API_BEGIN

typedef struct clf_batch_source clf_batch_source;

/* Positions are stored as text of at most this many bytes (NUL included). */
#define CLF_SOURCE_STATE_MAX 128

/* A decoder's source over ds's training split: batches of B x T windows
 * (ds must outlive the source). */
clf_status clf_batch_source_text(const clf_dataset *ds, int B, int T, uint64_t seed,
                                 clf_batch_source **out, clf_error *err);

/* An encoder kind's source over the sentences of train (outliving the
 * source) with the loader options bo; kind picks the fields (a classifier's
 * labels, or a translator's targets). */
clf_status clf_batch_source_sentences(const clf_seqdata *train, const clf_seq_batching *bo,
                                      clf_model_kind kind, clf_batch_source **out, clf_error *err);

void clf_batch_source_destroy(clf_batch_source *s); /* NULL is a no-op */

/* The next training batch, a view valid until the next call: its arrays,
 * tokens (for throughput: a decoder's B x T, a translator's target tokens, a
 * classifier's sentence tokens), epoch and epoch_end. */
clf_status clf_batch_source_next(clf_batch_source *s, clf_batch *b, clf_error *err);

/* Steps of a run of `steps` (0: none given) or `epochs` (0: none given),
 * whichever ends first; an epoch of text windows is ceil(train tokens /
 * (B x T)) batches. 0 if neither is given. */
clf_status clf_batch_source_total_steps(clf_batch_source *s, int64_t steps, int64_t epochs,
                                        uint64_t *total, clf_error *err);

/* The epoch the next batch comes from (-1 for text windows). */
int64_t clf_batch_source_epoch(const clf_batch_source *s);

/* The position: the checkpoint metadata key it is stored under
 * ("data_rng" or "data_state") and its text; restore reads the text back. */
const char *clf_batch_source_state_key(const clf_batch_source *s);
void clf_batch_source_state(const clf_batch_source *s, char out[CLF_SOURCE_STATE_MAX]);
clf_status clf_batch_source_restore(clf_batch_source *s, const char *state, clf_error *err);

CLF_API_END

#endif
