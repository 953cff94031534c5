/*
 * source.c - see source.h: the text-window and sentence sources behind one
 * table of operations.
 */
#include "model/data/source.h"

#include <stdlib.h>
#include <string.h>

typedef struct source_ops {
    clf_status (*next)(clf_batch_source *s, clf_batch *b, clf_error *err);
    clf_status (*total)(clf_batch_source *s, int64_t steps, int64_t epochs, uint64_t *total,
                        clf_error *err);
    int64_t (*epoch)(const clf_batch_source *s);
    const char *key;
    void (*state)(const clf_batch_source *s, char *out);
    clf_status (*restore)(clf_batch_source *s, const char *state, clf_error *err);
    void (*destroy)(clf_batch_source *s);
} source_ops;

struct clf_batch_source {
    const source_ops *ops;
    /* text windows */
    const clf_dataset *ds;
    int B, T;
    clf_rng rng;
    int32_t *x, *y, *doc; /* doc: a dataset of documents' ids (NULL otherwise) */
    /* sentences */
    clf_model_kind kind;
    clf_seq_loader *L;
    clf_seq_batch *b;
};

/* ---- text windows ------------------------------------------------------------------ */

static clf_status text_next(clf_batch_source *s, clf_batch *b, clf_error *err)
{
    clf_status st = clf_dataset_sample_batch(s->ds, CLF_SPLIT_TRAIN, s->B, s->T, &s->rng, s->x,
                                             s->y, s->doc, err);
    if (st != CLF_OK)
        return st;
    *b = clf_batch_packed(s->x, s->y, s->doc, s->B, s->T);
    b->tokens = (double)s->B * (double)s->T;
    return CLF_OK;
}

static clf_status text_total(clf_batch_source *s, int64_t steps, int64_t epochs, uint64_t *total,
                             clf_error *err)
{
    (void)err;
    if (steps > 0) {
        *total = (uint64_t)steps;
        return CLF_OK;
    }
    const uint64_t per_step = (uint64_t)s->B * (uint64_t)s->T;
    const uint64_t n = clf_dataset_size(s->ds, CLF_SPLIT_TRAIN);
    *total = epochs > 0 ? (n + per_step - 1) / per_step * (uint64_t)epochs : 0;
    return CLF_OK;
}

static int64_t text_epoch(const clf_batch_source *s)
{
    (void)s;
    return -1;
}

static void text_state(const clf_batch_source *s, char *out) { clf_rng_to_string(&s->rng, out); }

static clf_status text_restore(clf_batch_source *s, const char *state, clf_error *err)
{
    return clf_rng_from_string(state, &s->rng, err);
}

static void text_destroy(clf_batch_source *s)
{
    free(s->x);
    free(s->y);
    free(s->doc);
}

static const source_ops TEXT_OPS = {text_next,  text_total,   text_epoch,  "data_rng",
                                    text_state, text_restore, text_destroy};

clf_status clf_batch_source_text(const clf_dataset *ds, int B, int T, uint64_t seed,
                                 clf_batch_source **out, clf_error *err)
{
    *out = NULL;
    if (ds == NULL || B <= 0 || T <= 0)
        return clf_error_set(err, CLF_ERR_ARG, "text source: a dataset and B, T > 0 expected");
    clf_batch_source *s = calloc(1, sizeof *s);
    if (s != NULL) {
        s->x = malloc((size_t)B * (size_t)T * sizeof *s->x);
        s->y = malloc((size_t)B * (size_t)T * sizeof *s->y);
        if (clf_dataset_documents(ds, CLF_SPLIT_TRAIN) != NULL)
            s->doc = malloc((size_t)B * (size_t)T * sizeof *s->doc);
    }
    if (s == NULL || s->x == NULL || s->y == NULL ||
        (s->doc == NULL && clf_dataset_documents(ds, CLF_SPLIT_TRAIN) != NULL)) {
        if (s != NULL)
            text_destroy(s);
        free(s);
        return clf_error_set(err, CLF_ERR_MEMORY, "text source: out of host memory");
    }
    s->ops = &TEXT_OPS;
    s->ds = ds;
    s->B = B;
    s->T = T;
    clf_rng_seed(&s->rng, seed);
    *out = s;
    return CLF_OK;
}

/* ---- sentences ----------------------------------------------------------------------- */

static clf_status seq_next(clf_batch_source *s, clf_batch *b, clf_error *err)
{
    /* the loader ends an epoch with a 0; the next call starts the next one */
    if (!clf_seq_loader_next(s->L, s->b) && !clf_seq_loader_next(s->L, s->b))
        return clf_error_set(err, CLF_ERR_ARG, "the training set gives no batches");
    clf_seq_loader_state ls;
    clf_seq_loader_get_state(s->L, &ls);
    *b = clf_seq_batch_view(s->b, s->kind);
    b->epoch_end = ls.position >= (int64_t)clf_seq_loader_batches(s->L);
    return CLF_OK;
}

/* Counts each epoch's batches; the loader is moved back to the start. */
static clf_status seq_total(clf_batch_source *s, int64_t steps, int64_t epochs, uint64_t *total,
                            clf_error *err)
{
    const uint64_t want = steps > 0 ? (uint64_t)steps : 0;
    uint64_t sum = 0;
    clf_status st;
    if (epochs > 0) {
        for (int64_t ep = 0; ep < epochs; ep++) {
            clf_seq_loader_state ls = {ep, 0};
            if ((st = clf_seq_loader_set_state(s->L, &ls, err)) != CLF_OK)
                return st;
            sum += clf_seq_loader_batches(s->L);
            if (want > 0 && sum >= want)
                break;
        }
        clf_seq_loader_state s0 = {0, 0};
        if ((st = clf_seq_loader_set_state(s->L, &s0, err)) != CLF_OK)
            return st;
    }
    *total = want > 0 && (sum == 0 || want < sum) ? want : sum;
    return CLF_OK;
}

static int64_t seq_epoch(const clf_batch_source *s)
{
    clf_seq_loader_state ls;
    clf_seq_loader_get_state(s->L, &ls);
    return ls.epoch;
}

static void seq_state(const clf_batch_source *s, char *out)
{
    clf_seq_loader_state_to_string(s->L, out);
}

static clf_status seq_restore(clf_batch_source *s, const char *state, clf_error *err)
{
    return clf_seq_loader_state_from_string(s->L, state, err);
}

static void seq_destroy(clf_batch_source *s)
{
    clf_seq_batch_destroy(s->b);
    clf_seq_loader_destroy(s->L);
}

static const source_ops SEQ_OPS = {seq_next,  seq_total,   seq_epoch,  "data_state",
                                   seq_state, seq_restore, seq_destroy};

clf_status clf_batch_source_sentences(const clf_seqdata *train, const clf_seq_batching *bo,
                                      clf_model_kind kind, clf_batch_source **out, clf_error *err)
{
    *out = NULL;
    clf_batch_source *s = calloc(1, sizeof *s);
    if (s == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "sentence source: out of host memory");
    s->ops = &SEQ_OPS;
    s->kind = kind;
    clf_status st = clf_seq_loader_create(train, bo, &s->L, err);
    if (st == CLF_OK)
        st = clf_seq_batch_create(s->L, &s->b, err);
    if (st != CLF_OK) {
        seq_destroy(s);
        free(s);
        return st;
    }
    *out = s;
    return CLF_OK;
}

/* ---- the interface ------------------------------------------------------------------ */

void clf_batch_source_destroy(clf_batch_source *s)
{
    if (s == NULL)
        return;
    s->ops->destroy(s);
    free(s);
}

clf_status clf_batch_source_next(clf_batch_source *s, clf_batch *b, clf_error *err)
{
    return s->ops->next(s, b, err);
}

clf_status clf_batch_source_total_steps(clf_batch_source *s, int64_t steps, int64_t epochs,
                                        uint64_t *total, clf_error *err)
{
    return s->ops->total(s, steps, epochs, total, err);
}

int64_t clf_batch_source_epoch(const clf_batch_source *s) { return s->ops->epoch(s); }

const char *clf_batch_source_state_key(const clf_batch_source *s) { return s->ops->key; }

void clf_batch_source_state(const clf_batch_source *s, char out[CLF_SOURCE_STATE_MAX])
{
    s->ops->state(s, out);
}

clf_status clf_batch_source_restore(clf_batch_source *s, const char *state, clf_error *err)
{
    return s->ops->restore(s, state, err);
}
