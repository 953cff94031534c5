/*
 * sampler.c - greedy, temperature, top-k and nucleus (top-p) sampling from
 * a row of logits on the host, with a seeded SplitMix64 generator.
 *
 * Design: the exact procedure is documented in sampler.h. Candidates are
 * heap-sorted once per token under a total order (logit descending, index
 * ascending, NaN dropped), so the result is unique whatever the sort; with
 * top_k a partial selection (a heap of the k best) first cuts the sort to k
 * items. Probabilities are computed in double with the maximum subtracted.
 *
 * Not here: repetition penalties, beam search.
 */
#include <math.h>
#include <stdlib.h>

#include "model/infer/sampler.h"
#include "runtime/util.h"

struct clf_sampler {
    clf_sampler_options o;
    uint64_t state;
    int cap;
    int *idx;     /* [cap] candidate indices */
    double *prob; /* [cap] unnormalised probabilities of the sorted candidates */
};

clf_sampler_options clf_sampler_options_default(void)
{
    clf_sampler_options o = {1.0, 0, 1.0, 1337};
    return o;
}

clf_status clf_sampler_create(int max_vocab, const clf_sampler_options *o, clf_sampler **out,
                              clf_error *err)
{
    *out = NULL;
    if (max_vocab <= 0)
        return clf_error_set(err, CLF_ERR_ARG, "sampler: vocabulary %d: expected > 0", max_vocab);
    if (!(o->temperature >= 0.0) || !isfinite(o->temperature))
        return clf_error_set(err, CLF_ERR_ARG, "temperature: expected a finite number >= 0, got %g",
                             o->temperature);
    if (o->top_k < 0)
        return clf_error_set(err, CLF_ERR_ARG, "top-k: expected >= 0 (0 = off), got %d", o->top_k);
    if (!(o->top_p > 0.0 && o->top_p <= 1.0))
        return clf_error_set(err, CLF_ERR_ARG, "top-p: expected a number in (0, 1], got %g",
                             o->top_p);
    clf_sampler *s = calloc(1, sizeof *s);
    if (s == NULL)
        goto fail;
    s->o = *o;
    s->state = o->seed;
    s->cap = max_vocab;
    s->idx = malloc((size_t)max_vocab * sizeof *s->idx);
    s->prob = malloc((size_t)max_vocab * sizeof *s->prob);
    if (s->idx == NULL || s->prob == NULL)
        goto fail;
    *out = s;
    return CLF_OK;
fail:
    clf_sampler_destroy(s);
    return clf_error_set(err, CLF_ERR_MEMORY, "sampler: out of host memory for %d tokens",
                         max_vocab);
}

void clf_sampler_destroy(clf_sampler *s)
{
    if (s == NULL)
        return;
    free(s->idx);
    free(s->prob);
    free(s);
}

/* a before b: larger logit first, then lower index; NaN last. */
static int before(const float *z, int a, int b)
{
    float x = z[a], y = z[b];
    int xn = isnan(x), yn = isnan(y);
    if (xn != yn)
        return yn;
    if (!xn && x != y)
        return x > y;
    return a < b;
}

/* Sort idx[0..n) best first with `before` (heap sort: no recursion, no allocation,
 * a total order so the result is unique). */
static void sift(const float *z, int *idx, int root, int n)
{
    for (;;) {
        int c = 2 * root + 1;
        if (c >= n)
            return;
        /* max-heap on "after": the root is the element that sorts last */
        if (c + 1 < n && before(z, idx[c], idx[c + 1]))
            c++;
        if (!before(z, idx[root], idx[c]))
            return;
        int t = idx[root];
        idx[root] = idx[c];
        idx[c] = t;
        root = c;
    }
}

static void sort_candidates(const float *z, int *idx, int n)
{
    for (int i = n / 2 - 1; i >= 0; i--)
        sift(z, idx, i, n);
    for (int end = n - 1; end > 0; end--) {
        int t = idx[0];
        idx[0] = idx[end];
        idx[end] = t;
        sift(z, idx, 0, end);
    }
}

/* Move the k best (by `before`) to idx[0..k), any order: partial selection
 * with a min-heap of size k. */
static void select_top_k(const float *z, int *idx, int n, int k)
{
    /* heap of the k best so far, root = the worst among them */
    for (int i = k / 2 - 1; i >= 0; i--)
        sift(z, idx, i, k);
    for (int i = k; i < n; i++) {
        if (before(z, idx[i], idx[0])) {
            int t = idx[0];
            idx[0] = idx[i];
            idx[i] = t;
            sift(z, idx, 0, k);
        }
    }
}

int clf_sampler_sample(clf_sampler *s, const float *z, int V)
{
    if (V <= 0 || V > s->cap)
        return -1;
    if (s->o.temperature == 0.0) {
        int best = -1;
        for (int i = 0; i < V; i++)
            if (!isnan(z[i]) && (best < 0 || z[i] > z[best]))
                best = i;
        return best;
    }
    int n = 0;
    for (int i = 0; i < V; i++)
        if (!isnan(z[i]))
            s->idx[n++] = i;
    if (n == 0)
        return -1;
    if (s->o.top_k > 0 && s->o.top_k < n) {
        select_top_k(z, s->idx, n, s->o.top_k);
        n = s->o.top_k;
    }
    sort_candidates(z, s->idx, n);
    double inv_t = 1.0 / s->o.temperature;
    double zmax = (double)z[s->idx[0]];
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        double e = exp(((double)z[s->idx[i]] - zmax) * inv_t);
        s->prob[i] = e;
        total += e;
    }
    if (s->o.top_p < 1.0) {
        double want = s->o.top_p * total, acc = 0.0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            acc += s->prob[i];
            if (acc >= want) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
        total = acc;
    }
    double u = clf_splitmix64_uniform(&s->state) * total, acc = 0.0;
    for (int i = 0; i < n; i++) {
        acc += s->prob[i];
        if (u < acc)
            return s->idx[i];
    }
    return s->idx[n - 1]; /* rounding: u * total >= the summed total */
}
