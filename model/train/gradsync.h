/*
 * gradsync.h - summing a step's gradients across data-parallel ranks
 * (clf_trainer_dist), overlapped with the backward that produces them.
 *
 * Design (as PyTorch DDP's buckets, llm.c's per-layer reduction): the
 * model's grad hook reports each block as soon as its gradients are
 * enqueued; its tensors join the open bucket, and a bucket that reaches
 * bucket_bytes (or the last group, the tensors outside blocks) is read
 * back asynchronously into a host mirror of the flat gradient buffer.
 * gradsync_finish then takes the buckets in order: wait for its read,
 * sum it across ranks, enqueue its write back. While the host waits on
 * bucket i and on the other ranks, the device is still running the
 * backward of the blocks below; the optimizer's kernels, enqueued after
 * the writes, see the summed gradients. The host time spent inside the
 * reductions (the other ranks and the transfer, not this device's
 * backward) is counted: train's "waiting on gradient reductions".
 *
 * The bucket (clf_trainer_dist.bucket_bytes) defaults to 1 MiB on a device
 * that computes apart from the host, and to the whole gradient (reduced
 * after backward) on the host's own CPU, where the overlap costs more than
 * it hides (see gradsync.c).
 *
 * Ranges: a block's tensors in the flat layout are two runs (its decayed
 * matrices, then its vectors), each kept whole with the alignment padding
 * between tensors (zeros, summed as zeros).
 */
#ifndef CLF_GRADSYNC_H
#define CLF_GRADSYNC_H

#include "model/train/trainer.h"

typedef struct clf_gradsync clf_gradsync;

clf_status clf_gradsync_create(clf_model *m, const clf_trainer_dist *d, clf_gradsync **out,
                               clf_error *err);
void clf_gradsync_destroy(clf_gradsync *g); /* NULL is a no-op */
/* The next clf_model_backward reads its gradients out bucket by bucket. */
void clf_gradsync_arm(clf_gradsync *g);
/* After that backward: every bucket summed across ranks and written back
 * (enqueued); the model's hook is removed. */
clf_status clf_gradsync_finish(clf_gradsync *g, clf_error *err);
/* Host seconds spent in the reductions so far (waiting for the other
 * ranks and the transfers; not the wait for this device's backward). */
double clf_gradsync_wait_s(const clf_gradsync *g);

#endif
