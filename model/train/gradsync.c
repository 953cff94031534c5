/*
 * gradsync.c - summing a step's gradients across data-parallel ranks,
 * bucket by bucket as backward produces them (design in gradsync.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/train/gradsync.h"
#include "runtime/util.h"

/* The default bucket: 1 MiB where the device computes apart from the host
 * (a GPU: its backward runs on while the host reduces); one bucket after
 * the whole backward where the device is the host's own CPU, whose cores
 * the host's reduction (MPI polls) would take from the backward (measured:
 * docs/distributed.md). */
#define DEFAULT_BUCKET_BYTES ((size_t)1 << 20)

typedef struct grange {
    size_t off, n; /* floats in the flat layout */
} grange;

typedef struct bucket {
    int first, count; /* into the step's pending ranges */
    clf_event *read;  /* the last read of the bucket (in-order queue: all of it) */
} bucket;

struct clf_gradsync {
    clf_model *m;
    clf_trainer_dist d;
    clf_buffer *grads;
    float *host; /* mirror of the flat gradient buffer */
    /* the ranges of each group: group 0 = layer -1 (outside blocks), g = layer g-1 */
    int n_groups;
    grange *ranges;
    int n_ranges;
    int *group_first, *group_count;
    /* this step */
    int *pending; /* indices into ranges, in the order groups arrived */
    int n_pending, open_first;
    size_t open_bytes;
    bucket *buckets;
    int n_buckets;
    double wait_s;
    size_t default_bucket;
};

void clf_gradsync_destroy(clf_gradsync *g)
{
    if (g == NULL)
        return;
    /* queued reads and writes use the host mirror: let them finish (a run
     * that failed mid-reduction leaves some behind) */
    clf_runtime_finish(clf_model_runtime(g->m), NULL);
    for (int i = 0; i < g->n_buckets; i++)
        clf_event_release(g->buckets[i].read);
    clf_model_set_grad_hook(g->m, NULL, NULL);
    free(g->host);
    free(g->ranges);
    free(g->group_first);
    free(g->group_count);
    free(g->pending);
    free(g->buckets);
    free(g);
}

/* Enqueue the reads of the open bucket's ranges. */
static clf_status close_bucket(clf_gradsync *g, clf_error *err)
{
    if (g->n_pending == g->open_first)
        return CLF_OK;
    bucket *b = &g->buckets[g->n_buckets];
    b->first = g->open_first;
    b->count = g->n_pending - g->open_first;
    b->read = NULL;
    clf_runtime *rt = clf_model_runtime(g->m);
    for (int i = 0; i < b->count; i++) {
        const grange *r = &g->ranges[g->pending[b->first + i]];
        clf_event *ev = NULL;
        clf_status st = clf_buffer_read_async(rt, g->grads, r->off * sizeof(float),
                                              g->host + r->off, r->n * sizeof(float), &ev, err);
        if (st != CLF_OK)
            return st;
        clf_event_release(b->read); /* the queue is in order: the last read covers all */
        b->read = ev;
    }
    g->n_buckets++;
    g->open_first = g->n_pending;
    g->open_bytes = 0;
    return CLF_OK;
}

static clf_status on_grads(void *user, int layer, clf_error *err)
{
    clf_gradsync *g = user;
    const int grp = layer + 1;
    if (grp < 0 || grp >= g->n_groups || g->n_pending + g->group_count[grp] > g->n_ranges)
        return clf_error_set(err, CLF_ERR_ARG,
                             "gradient reduction: layer %d unknown or reported twice", layer);
    for (int i = 0; i < g->group_count[grp]; i++) {
        const int k = g->group_first[grp] + i;
        g->pending[g->n_pending++] = k;
        g->open_bytes += g->ranges[k].n * sizeof(float);
    }
    const size_t cap = g->d.bucket_bytes > 0 ? g->d.bucket_bytes : g->default_bucket;
    if (layer == -1 || g->open_bytes >= cap)
        return close_bucket(g, err);
    return CLF_OK;
}

clf_status clf_gradsync_create(clf_model *m, const clf_trainer_dist *d, clf_gradsync **out,
                               clf_error *err)
{
    *out = NULL;
    clf_gradsync *g = calloc(1, sizeof *g);
    if (g == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    g->m = m;
    g->d = *d;
    g->grads = clf_model_flat_buffer(m, CLF_SLOT_GRAD);
    g->default_bucket = strcmp(clf_runtime_device(clf_model_runtime(m))->type, "cpu") == 0
                            ? SIZE_MAX
                            : DEFAULT_BUCKET_BYTES;
    const size_t np = clf_model_dims_get(m).n_params;
    const int nt = clf_model_param_count(m);
    int max_layer = -1;
    for (int i = 0; i < nt; i++)
        if (clf_model_param_get(m, i)->layer > max_layer)
            max_layer = clf_model_param_get(m, i)->layer;
    g->n_groups = max_layer + 2;
    g->host = malloc((np ? np : 1) * sizeof *g->host);
    g->ranges = malloc((size_t)(nt ? nt : 1) * sizeof *g->ranges);
    g->group_first = calloc((size_t)g->n_groups, sizeof *g->group_first);
    g->group_count = calloc((size_t)g->n_groups, sizeof *g->group_count);
    g->pending = malloc((size_t)(nt ? nt : 1) * sizeof *g->pending);
    g->buckets = malloc((size_t)(nt ? nt : 1) * sizeof *g->buckets);
    if (g->grads == NULL || g->host == NULL || g->ranges == NULL || g->group_first == NULL ||
        g->group_count == NULL || g->pending == NULL || g->buckets == NULL) {
        const int no_grads = g->grads == NULL;
        clf_gradsync_destroy(g);
        return clf_error_set(err, no_grads ? CLF_ERR_ARG : CLF_ERR_MEMORY, "gradient reduction: %s",
                             no_grads ? "the model has no gradients" : "out of host memory");
    }
    /* Group by group, each tensor's slot up to the next tensor (its padding
     * included), runs of adjacent slots merged. Tensors are in offset order. */
    int n = 0;
    for (int grp = 0; grp < g->n_groups; grp++) {
        g->group_first[grp] = n;
        for (int i = 0; i < nt; i++) {
            const clf_param_info *t = clf_model_param_get(m, i);
            if (t->layer + 1 != grp)
                continue;
            const size_t end = i + 1 < nt ? clf_model_param_get(m, i + 1)->offset : np;
            if (n > g->group_first[grp] && g->ranges[n - 1].off + g->ranges[n - 1].n == t->offset)
                g->ranges[n - 1].n = end - g->ranges[n - 1].off;
            else
                g->ranges[n++] = (grange){t->offset, end - t->offset};
        }
        g->group_count[grp] = n - g->group_first[grp];
    }
    g->n_ranges = n;
    *out = g;
    return CLF_OK;
}

void clf_gradsync_arm(clf_gradsync *g)
{
    for (int i = 0; i < g->n_buckets; i++)
        clf_event_release(g->buckets[i].read);
    g->n_buckets = 0;
    g->n_pending = g->open_first = 0;
    g->open_bytes = 0;
    clf_model_set_grad_hook(g->m, on_grads, g);
}

clf_status clf_gradsync_finish(clf_gradsync *g, clf_error *err)
{
    clf_model_set_grad_hook(g->m, NULL, NULL);
    clf_status st = close_bucket(g, err); /* nothing stays open after layer -1; to be sure */
    clf_runtime *rt = clf_model_runtime(g->m);
    for (int b = 0; b < g->n_buckets && st == CLF_OK; b++) {
        bucket *k = &g->buckets[b];
        st = clf_event_wait(k->read, err); /* the device's backward up to this bucket */
        k->read = NULL;
        const double t0 = clf_now_seconds();
        for (int i = 0; i < k->count && st == CLF_OK; i++) {
            const grange *r = &g->ranges[g->pending[k->first + i]];
            st = g->d.allreduce_f32(g->d.user, g->host + r->off, r->n, err);
            if (st == CLF_OK)
                st = clf_buffer_write_async(rt, g->grads, r->off * sizeof(float), g->host + r->off,
                                            r->n * sizeof(float), err);
        }
        g->wait_s += clf_now_seconds() - t0; /* the other ranks, and the transfer */
    }
    if (st == CLF_OK && g->n_pending != g->n_ranges)
        st = clf_error_set(err, CLF_ERR_ARG,
                           "gradient reduction: the backward reported %d of the %d gradient "
                           "ranges (was the reduction armed for this backward?)",
                           g->n_pending, g->n_ranges);
    return st;
}

double clf_gradsync_wait_s(const clf_gradsync *g) { return g->wait_s; }
