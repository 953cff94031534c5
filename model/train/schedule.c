/*
 * schedule.c - learning-rate schedules (constant, cosine as nanoGPT, noam).
 *
 * Design: a pure function of a small struct and the step index, in double
 * precision, so that a resumed run recomputes exactly the rates of an
 * uninterrupted one. The formulas and their sources are in schedule.h.
 *
 * Not here: anything stateful (plateau detection), per-group rates.
 */
#include <math.h>
#include <string.h>

#include "model/train/schedule.h"

static const double SCHED_PI = 3.14159265358979323846;

clf_status clf_schedule_init(clf_schedule *s, const clf_model_config *cfg, clf_error *err)
{
    memset(s, 0, sizeof *s);
    s->type = cfg->train.schedule.type;
    s->lr = cfg->train.optimizer.lr;
    s->min_lr = cfg->train.schedule.min_lr;
    s->warmup = cfg->train.schedule.warmup;
    s->steps = cfg->train.steps;
    s->dim = cfg->embedding.dim;
    if (!(s->lr > 0.0) || !isfinite(s->lr))
        return clf_error_set(err, CLF_ERR_CONFIG,
                             "train.optimizer.lr: expected a positive number, got %g", s->lr);
    if (s->warmup < 0)
        return clf_error_set(err, CLF_ERR_CONFIG, "train.schedule.warmup: expected >= 0, got %d",
                             s->warmup);
    switch (s->type) {
        case CLF_SCHED_CONSTANT: break;
        case CLF_SCHED_COSINE:
            if (!(s->min_lr >= 0.0) || s->min_lr > s->lr)
                return clf_error_set(err, CLF_ERR_CONFIG,
                                     "train.schedule.min_lr: expected a number in [0, lr = %g], "
                                     "got %g",
                                     s->lr, s->min_lr);
            break;
        case CLF_SCHED_NOAM:
            if (s->warmup <= 0)
                return clf_error_set(err, CLF_ERR_CONFIG,
                                     "train.schedule.warmup: noam needs warmup > 0, got %d",
                                     s->warmup);
            if (s->dim <= 0)
                return clf_error_set(err, CLF_ERR_CONFIG,
                                     "embedding.dim: noam needs dim > 0, got %d", s->dim);
            break;
        default:
            return clf_error_set(err, CLF_ERR_CONFIG, "train.schedule.type: unknown value %d",
                                 (int)s->type);
    }
    return CLF_OK;
}

double clf_schedule_lr(const clf_schedule *s, uint64_t it)
{
    double t = (double)it;
    switch (s->type) {
        case CLF_SCHED_CONSTANT:
            if (it < (uint64_t)s->warmup)
                return s->lr * (t + 1.0) / ((double)s->warmup + 1.0);
            return s->lr;
        case CLF_SCHED_COSINE: {
            if (it < (uint64_t)s->warmup)
                return s->lr * (t + 1.0) / ((double)s->warmup + 1.0);
            /* it >= warmup from here. nanoGPT: it > lr_decay_iters -> min_lr. With
         * steps <= warmup there is no decay phase: min_lr (nanoGPT divides by
         * zero at it == warmup == lr_decay_iters; we return min_lr there). */
            if (it > (uint64_t)(s->steps > 0 ? s->steps : 0) || s->steps <= s->warmup)
                return s->min_lr;
            double r = (t - (double)s->warmup) / ((double)s->steps - (double)s->warmup);
            double coeff = 0.5 * (1.0 + cos(SCHED_PI * r));
            return s->min_lr + coeff * (s->lr - s->min_lr);
        }
        case CLF_SCHED_NOAM: {
            double st = t + 1.0;
            double a = 1.0 / sqrt(st);
            double b = st * pow((double)s->warmup, -1.5);
            return s->lr / sqrt((double)s->dim) * (a < b ? a : b);
        }
        default: return 0.0;
    }
}
