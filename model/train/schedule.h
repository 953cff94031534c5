/*
 * schedule.h - learning-rate schedules, computed on the host: the trainer
 * asks for the rate of each optimizer step and hands it to clf_model_step.
 *
 * `it` is the 0-based index of the optimizer step about to be taken (the
 * number of steps already taken), as nanoGPT's `iter_num`.
 *
 *   constant  lr, after a linear warmup when warmup > 0:
 *               it <  warmup: lr * (it + 1) / (warmup + 1)
 *               otherwise:    lr
 *   cosine    nanoGPT's get_lr (karpathy/nanoGPT train.py at commit
 *             e2221318, the current master; older versions used
 *             lr * it / warmup, which makes step 0's rate 0; we follow the
 *             current code, as the PyTorch parity fixture does):
 *               it <  warmup:  lr * (it + 1) / (warmup + 1)
 *               it >  steps:   min_lr
 *               otherwise:     min_lr + 0.5 (1 + cos(pi r)) (lr - min_lr),
 *                              r = (it - warmup) / (steps - warmup)
 *             with nanoGPT's lr_decay_iters = train.steps (its max_iters),
 *             so the rate reaches min_lr exactly at it = steps.
 *   noam      "Attention Is All You Need" (5.3), times a factor (train.
 *             optimizer.lr, 1.0 in the paper; the Annotated Transformer uses
 *             1.0 or 2.0):
 *               s = it + 1,  lr = factor * dim^-0.5 * min(s^-0.5, s * warmup^-1.5)
 *             peaking at factor * (dim * warmup)^-0.5 at s = warmup.
 *
 * All arithmetic is in double; the result is rounded to float only by the
 * caller that needs a float. The struct is a plain copy of the few config
 * fields involved, so a schedule outlives the config it came from.
 *
 * Not here: per-parameter-group rates, restarts, plateau schedules (they
 * need the validation loss).
 */
#ifndef CLF_SCHEDULE_H
#define CLF_SCHEDULE_H

#include <stdint.h>

#include "config/config.h"
#include "runtime/status.h"

CLF_API_BEGIN

typedef struct clf_schedule {
    clf_schedule_type type;
    double lr;     /* peak rate (noam: the factor) */
    double min_lr; /* cosine: the final rate */
    int warmup;    /* linear warmup steps (noam: its warmup parameter) */
    int steps;     /* cosine: the decay horizon (nanoGPT's lr_decay_iters) */
    int dim;       /* noam: d_model */
} clf_schedule;

/* From a resolved, validated config: train.schedule, train.optimizer.lr,
 * train.steps, embedding.dim. Rejects (CLF_ERR_CONFIG) what would make the
 * formulas meaningless: lr <= 0, warmup < 0, noam with warmup 0 or dim 0,
 * min_lr < 0 or > lr for cosine. */
clf_status clf_schedule_init(clf_schedule *s, const clf_model_config *cfg, clf_error *err);

/* The learning rate of optimizer step `it` (0-based). */
double clf_schedule_lr(const clf_schedule *s, uint64_t it);

CLF_API_END

#endif
