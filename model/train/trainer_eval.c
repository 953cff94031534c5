/*
 * trainer_eval.c - the trainer's evaluations: the loss over a split (the
 * decoder's fixed windows), the encoder kinds' hook (loss, accuracy, BLEU
 * by greedy decoding on an inference copy), the ranks agreeing on the
 * result, early stopping and the best checkpoint.
 *
 * Not here: the loop (trainer.c), checkpoints (trainer_ckpt.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/eval/seqeval.h"
#include "model/train/checkpoint.h"
#include "model/train/schedule.h"
#include "model/train/trainer_internal.h"

/* ---- evaluation ------------------------------------------------------------------ */

/* Label smoothing is a training regulariser: evaluation reports plain
 * cross-entropy. */
static clf_model_optim eval_begin(clf_model *m)
{
    clf_model_optim saved = clf_model_optim_get(m), o = saved;
    o.label_smoothing = 0.0f;
    clf_model_optim_set(m, &o);
    return saved;
}

/* n batches of B windows drawn from rng; this process evaluates batches
 * share, share + shares, ... (data parallel: its share of the batches one
 * process would evaluate). *sum: the sum of its batches' mean losses. */
static clf_status eval_batches_into(clf_model *m, const clf_dataset *ds, clf_split split, int n,
                                    int B, int shares, int share, clf_rng *rng, int32_t *x,
                                    int32_t *y, int32_t *doc, double *sum, clf_error *err)
{
    clf_model_dims d = clf_model_dims_get(m);
    clf_model_optim saved = eval_begin(m);
    clf_status st = CLF_OK;
    *sum = 0.0;
    for (int i = 0; i < n; i++) {
        float l = 0.0f;
        const int32_t *dd = clf_dataset_documents(ds, split) != NULL ? doc : NULL;
        if ((st = clf_dataset_sample_batch(ds, split, B, d.T, rng, x, y, doc, err)) != CLF_OK)
            goto fail;
        if (i % shares != share)
            continue; /* another rank's: drawn all the same, to keep the sequence */
        if ((st = clf_model_set_batch(m, clf_batch_packed(x, y, dd, B, d.T), err)) != CLF_OK)
            goto fail;
        if ((st = clf_model_forward(m, 0, err)) != CLF_OK)
            goto fail;
        if ((st = clf_model_loss(m, &l, err)) != CLF_OK)
            goto fail;
        *sum += (double)l;
    }
fail:
    clf_model_optim_set(m, &saved);
    return st;
}

clf_status clf_trainer_eval_split(clf_model *m, const clf_dataset *ds, clf_split split,
                                  double *loss, uint64_t *targets, clf_error *err)
{
    clf_model_dims d = clf_model_dims_get(m);
    size_t cells = (size_t)d.B * (size_t)d.T;
    int32_t *x = malloc(cells * sizeof *x), *y = malloc(cells * sizeof *y);
    int32_t *doc = malloc(cells * sizeof *doc);
    const int32_t *dd = clf_dataset_documents(ds, split) != NULL ? doc : NULL;
    float *l = malloc(cells * sizeof *l);
    clf_model_optim saved = eval_begin(m);
    clf_status st = CLF_OK;
    double sum = 0.0;
    uint64_t count = 0;
    if (x == NULL || y == NULL || doc == NULL || l == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "evaluation: out of host memory");
        goto fail;
    }
    size_t W = clf_dataset_eval_windows(ds, split, d.T);
    if (W == 0) {
        st = clf_error_set(err, CLF_ERR_ARG, "evaluation: the %s split has fewer than 2 tokens",
                           split == CLF_SPLIT_VAL ? "validation" : "training");
        goto fail;
    }
    for (size_t w0 = 0; w0 < W; w0 += (size_t)d.B) {
        int nb = (int)((W - w0) < (size_t)d.B ? (W - w0) : (size_t)d.B);
        for (int b = 0; b < nb; b++) {
            size_t len = 0;
            st = clf_dataset_eval_window(ds, split, d.T, w0 + (size_t)b, x + (size_t)b * d.T,
                                         y + (size_t)b * d.T, doc + (size_t)b * d.T, &len, err);
            if (st != CLF_OK)
                goto fail;
        }
        if ((st = clf_model_set_batch(m, clf_batch_packed(x, y, dd, nb, d.T), err)) != CLF_OK)
            goto fail;
        if ((st = clf_model_forward(m, 0, err)) != CLF_OK)
            goto fail;
        if ((st = clf_model_losses_read(m, l, err)) != CLF_OK)
            goto fail;
        for (size_t i = 0; i < (size_t)nb * (size_t)d.T; i++)
            if (y[i] != CLF_MODEL_IGNORE_INDEX) {
                sum += (double)l[i];
                count++;
            }
    }
    *loss = sum / (double)count;
    *targets = count;
fail:
    clf_model_optim_set(m, &saved);
    free(x);
    free(y);
    free(doc);
    free(l);
    return st;
}

/* ---- evaluation hooks ----------------------------------------------------------------- */

/* The early-stop metric in "lower is better" form. */
static double metric_value(const clf_model_config *cfg, const clf_train_eval *e)
{
    switch (cfg->train.early_stop.metric) {
        case CLF_METRIC_ACCURACY: return -e->accuracy;
        case CLF_METRIC_BLEU: return -e->bleu;
        default: return e->val_loss;
    }
}

static clf_status eval_text(run *r, clf_train_eval *e, clf_error *err)
{
    const clf_model_config *cfg = r->cfg;
    clf_status st;
    int n = cfg->train.eval.batches;
    size_t nval = clf_dataset_size(r->ds, CLF_SPLIT_VAL);
    clf_model_dims d = clf_model_dims_get(r->m);
    if (n > 0 && nval >= (size_t)d.T + 1) {
        clf_rng vr, tr;
        clf_rng_seed(&vr, cfg->train.seed ^ EVAL_SALT_VAL);
        clf_rng_seed(&tr, cfg->train.seed ^ EVAL_SALT_TRAIN);
        /* data parallel: the batches one process would evaluate, each rank
         * its share, the means averaged */
        double s[2] = {0.0, 0.0};
        st = eval_batches_into(r->m, r->ds, CLF_SPLIT_VAL, n, cfg->train.batch, r->nranks, r->rank,
                               &vr, r->x, r->y, r->doc, &s[0], err);
        if (st == CLF_OK)
            st = eval_batches_into(r->m, r->ds, CLF_SPLIT_TRAIN, n, cfg->train.batch, r->nranks,
                                   r->rank, &tr, r->x, r->y, r->doc, &s[1], err);
        if (st == CLF_OK && r->nranks > 1)
            st = r->o->dist->allreduce_f64(r->o->dist->user, s, 2, err);
        e->val_loss = s[0] / (double)n;
        e->train_loss = s[1] / (double)n;
        e->val_tokens = (uint64_t)n * (uint64_t)cfg->train.batch * (uint64_t)d.T;
    } else {
        st = clf_trainer_eval_split(r->m, r->ds, CLF_SPLIT_VAL, &e->val_loss, &e->val_tokens, err);
    }
    return st;
}

static clf_status eval_seq(run *r, clf_train_eval *e, clf_error *err)
{
    const clf_model_config *cfg = r->cfg;
    clf_model_dims d = clf_model_dims_get(r->m);
    clf_seq_batching bo;
    clf_seqeval_result sr;
    clf_status st;
    clf_seqeval_batching(r->bo.batch, r->bo.batch_tokens, &bo);
    if ((st = clf_seqeval_run_shard(r->m, r->data->val, &bo, r->rank, r->nranks, &sr, err)) !=
        CLF_OK)
        return st;
    if (r->nranks > 1) { /* each rank evaluated its share of the batches */
        double s[4] = {sr.targets > 0 ? sr.loss * (double)sr.targets : 0.0, (double)sr.targets,
                       (double)sr.correct, (double)sr.labelled};
        if ((st = r->o->dist->allreduce_f64(r->o->dist->user, s, 4, err)) != CLF_OK)
            return st;
        sr.targets = (uint64_t)s[1];
        sr.loss = s[1] > 0 ? s[0] / s[1] : NAN;
        if (cfg->kind == CLF_MODEL_ENCODER) {
            sr.correct = (uint64_t)s[2];
            sr.labelled = (uint64_t)s[3];
            sr.accuracy = s[3] > 0 ? s[2] / s[3] : NAN;
        }
    }
    e->val_loss = sr.loss;
    e->val_tokens = sr.targets;
    e->accuracy = sr.accuracy;
    if (cfg->kind != CLF_MODEL_ENCODER_DECODER)
        return CLF_OK;
    if (r->infer == NULL) {
        clf_model_limits lim;
        clf_beam_model_limits(r->data->val, &r->data->decode, cfg->context, &lim);
        if ((st = clf_model_create_ex(clf_model_runtime(r->m), cfg, d.V, &lim, CLF_MODEL_INFER,
                                      &r->infer, err)) != CLF_OK) {
            clf_error_prefix(err, "the inference model for BLEU");
            return st;
        }
    }
    /* the trained parameters, copied on the device */
    if ((st = clf_model_flat_copy(r->infer, r->m, CLF_SLOT_PARAM, err)) != CLF_OK)
        return st;
    clf_bleu_score bs;
    if ((st = clf_seqeval_bleu(r->infer, r->tok, r->data->val, r->data->val_refs, &r->data->decode,
                               &bs, NULL, err)) != CLF_OK)
        return st;
    e->bleu = bs.score;
    e->bleu_bp = bs.bp;
    e->bleu_ratio = bs.ratio;
    return CLF_OK;
}

/* Data parallel: every rank evaluated the same parameters; rank 0's figures
 * become everyone's (devices may round differently, and early stopping
 * must decide alike everywhere), and the parameters are checked to be
 * identical on every rank (a checksum, compared with rank 0's). */
static clf_status agree_eval(run *r, clf_train_eval *e, clf_error *err)
{
    const clf_trainer_dist *d = r->o->dist;
    double v[6] = {e->val_loss, e->train_loss, e->accuracy, e->bleu, e->bleu_bp, e->bleu_ratio};
    clf_status st = d->bcast_f64(d->user, v, 6, err);
    if (st != CLF_OK)
        return st;
    e->val_loss = v[0];
    e->train_loss = v[1];
    e->accuracy = v[2];
    e->bleu = v[3];
    e->bleu_bp = v[4];
    e->bleu_ratio = v[5];
    const size_t np = clf_model_dims_get(r->m).n_params;
    float *p = malloc((np ? np : 1) * sizeof *p);
    if (p == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    st = clf_model_flat_read(r->m, CLF_SLOT_PARAM, p, err);
    const uint64_t h = st == CLF_OK ? clf_hash64(p, np * sizeof *p, 0) : 0;
    free(p);
    if (st != CLF_OK)
        return st;
    /* exact in doubles: the hash in two 32-bit halves */
    double mine[2] = {(double)(h >> 32), (double)(h & 0xFFFFFFFFu)}, ref[2] = {mine[0], mine[1]};
    double differ = 0.0;
    if ((st = d->bcast_f64(d->user, ref, 2, err)) != CLF_OK)
        return st;
    differ = ref[0] != mine[0] || ref[1] != mine[1];
    if ((st = d->allreduce_f64(d->user, &differ, 1, err)) != CLF_OK)
        return st;
    if (differ > 0)
        return clf_error_set(err, CLF_ERR_NUMERIC,
                             "data parallel: after step %llu the parameters of %.0f rank(s) differ "
                             "from rank 0's (this is rank %d: checksum %016llx, rank 0's "
                             "%08llx%08llx)",
                             (unsigned long long)e->step, differ, r->rank, (unsigned long long)h,
                             (unsigned long long)ref[0], (unsigned long long)ref[1]);
    return CLF_OK;
}

clf_status tr_evaluate(run *r, uint64_t step, clf_train_result *res, clf_error *err)
{
    double t0 = clf_now_seconds();
    clf_train_eval e;
    memset(&e, 0, sizeof e);
    e.step = step;
    e.train_loss = NAN;
    e.accuracy = NAN;
    e.bleu = NAN;
    e.bleu_bp = NAN;
    e.bleu_ratio = NAN;
    e.epoch = -1;
    /* train.ema: the moving average is what is evaluated (swapped in on the
     * device, and back) */
    const int ema = clf_model_has_ema(r->m);
    clf_status st = ema ? clf_model_ema_swap(r->m, err) : CLF_OK;
    if (st == CLF_OK && r->seq) {
        e.epoch = r->last.epoch + (r->last.epoch_end ? 1 : 0); /* epochs completed */
        st = eval_seq(r, &e, err);
    } else if (st == CLF_OK) {
        st = eval_text(r, &e, err);
    }
    if (ema) {
        clf_status back = clf_model_ema_swap(r->m, err);
        st = st == CLF_OK ? back : st;
    }
    if (st == CLF_OK && r->nranks > 1)
        st = agree_eval(r, &e, err);
    if (st != CLF_OK)
        return st;
    e.seconds = clf_now_seconds() - t0;
    res->last_val_loss = e.val_loss;
    res->last_accuracy = e.accuracy;
    res->last_bleu = e.bleu;
    double v = metric_value(r->cfg, &e);
    if (v < r->best_val) {
        r->best_val = v;
        r->best_step = step;
        r->evals_since_best = 0;
        e.best = 1;
    } else {
        r->evals_since_best++;
    }
    if (r->o->cb.on_eval)
        r->o->cb.on_eval(r->o->cb.user, &e);
    if (e.best && r->seq) {
        /* the best model so far, for early stopping on a noisy metric */
        if ((st = tr_save_to(r, r->best_path, err)) != CLF_OK)
            return st;
    }
    return CLF_OK;
}
