/*
 * test_sampler.c - host sampling: greedy, temperature, top-k, top-p and
 * the seeded generator. No device needed.
 *
 * Checks:
 *   - SplitMix64 from state 0 gives the published first outputs
 *     (0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F);
 *   - greedy (temperature 0) is the argmax, lowest index on ties, NaN
 *     skipped, on random logits of sizes 1, 7, 33, 257, 1000;
 *   - determinism: two samplers with one seed give the same 2000 tokens; a
 *     different seed gives a different sequence;
 *   - top_k = 1 is greedy at any temperature; with top_k = k no token
 *     outside the k largest is ever drawn;
 *   - top_p: no token outside the nucleus (the shortest prefix of the
 *     sorted probabilities reaching p) is drawn;
 *   - frequencies over N = 200000 draws match the float64 reference
 *     distribution (softmax(z/T), cut by top-k / top-p and renormalised)
 *     within 6 standard errors + 1e-3 per token, which no seed fails in
 *     practice (a false alarm has probability < 1e-7 per token);
 *   - bad options are refused.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/infer/sampler.h"
#include "runtime/util.h"
#include "tests/test_util.h"

static clf_sampler *make(double temp, int k, double p, uint64_t seed, int V)
{
    clf_sampler_options o = clf_sampler_options_default();
    o.temperature = temp;
    o.top_k = k;
    o.top_p = p;
    o.seed = seed;
    clf_sampler *s = NULL;
    clf_error e;
    tu_ok(clf_sampler_create(V, &o, &s, &e), &e, "sampler create");
    return s;
}

static void test_rng(void)
{
    uint64_t st = 0;
    uint64_t a = clf_splitmix64_next(&st), b = clf_splitmix64_next(&st),
             c = clf_splitmix64_next(&st);
    TU_CHECK(a == 0xE220A8397B1DCDAFull && b == 0x6E789E6AA1B965F4ull && c == 0x06C45D188009454Full,
             "splitmix64(0): %016llx %016llx %016llx", (unsigned long long)a, (unsigned long long)b,
             (unsigned long long)c);
    st = 42;
    double lo = 1.0, hi = 0.0;
    for (int i = 0; i < 100000; i++) {
        double u = clf_splitmix64_uniform(&st);
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
    }
    TU_CHECK(lo >= 0.0 && lo < 1e-3 && hi < 1.0 && hi > 1.0 - 1e-3, "uniform in [0,1): %g %g", lo,
             hi);
}

static void test_greedy(void)
{
    tu_rng r = tu_rng_new(1);
    const int sizes[] = {1, 7, 33, 257, 1000};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        int V = sizes[t];
        float *z = malloc((size_t)V * sizeof *z);
        tu_fill(&r, z, (size_t)V, -3.0f, 3.0f);
        int ref = 0;
        for (int i = 1; i < V; i++)
            if (z[i] > z[ref])
                ref = i;
        clf_sampler *s = make(0.0, 0, 1.0, 7, V);
        TU_CHECK(clf_sampler_sample(s, z, V) == ref, "greedy V=%d", V);
        clf_sampler *s1 = make(0.8, 1, 1.0, 7, V);
        TU_CHECK(clf_sampler_sample(s1, z, V) == ref, "top_k=1 is greedy, V=%d", V);
        if (V >= 7) {
            /* ties: the lowest index wins; NaN is never chosen */
            z[ref] = 5.0f;
            z[V - 1] = 5.0f;
            z[0] = NAN;
            int want = ref == 0 ? V - 1 : ref;
            TU_CHECK(clf_sampler_sample(s, z, V) == want, "greedy ties/NaN V=%d", V);
        }
        clf_sampler_destroy(s);
        clf_sampler_destroy(s1);
        free(z);
    }
    float allnan[3] = {NAN, NAN, NAN};
    clf_sampler *s = make(1.0, 0, 1.0, 1, 3);
    TU_CHECK(clf_sampler_sample(s, allnan, 3) == -1, "all-NaN logits give -1");
    TU_CHECK(clf_sampler_sample(s, allnan, 4) == -1, "V above capacity gives -1");
    clf_sampler_destroy(s);
}

static void test_determinism(void)
{
    const int V = 65;
    tu_rng r = tu_rng_new(2);
    float z[65];
    tu_fill(&r, z, V, -2.0f, 2.0f);
    uint64_t seed = tu_seed();
    clf_sampler *a = make(0.9, 20, 0.95, seed, V), *b = make(0.9, 20, 0.95, seed, V),
                *c = make(0.9, 20, 0.95, seed + 1, V);
    int same = 1, diff = 0;
    for (int i = 0; i < 2000; i++) {
        int x = clf_sampler_sample(a, z, V), y = clf_sampler_sample(b, z, V),
            w = clf_sampler_sample(c, z, V);
        same &= x == y;
        diff |= x != w;
    }
    TU_CHECK(same, "same seed, same tokens");
    TU_CHECK(diff, "another seed, another sequence");
    clf_sampler_destroy(a);
    clf_sampler_destroy(b);
    clf_sampler_destroy(c);
}

/* Reference distribution in float64: softmax(z/T) over all, sorted, cut. */
static void ref_dist(const float *z, int V, double T, int k, double p, double *out)
{
    int *idx = malloc((size_t)V * sizeof *idx);
    for (int i = 0; i < V; i++)
        idx[i] = i;
    for (int i = 0; i < V; i++) /* selection sort: desc by z, asc by index */
        for (int j = i + 1; j < V; j++)
            if (z[idx[j]] > z[idx[i]] || (z[idx[j]] == z[idx[i]] && idx[j] < idx[i])) {
                int t = idx[i];
                idx[i] = idx[j];
                idx[j] = t;
            }
    int n = (k > 0 && k < V) ? k : V;
    double m = z[idx[0]], tot = 0.0;
    double *pr = calloc((size_t)V, sizeof *pr);
    for (int i = 0; i < n; i++)
        tot += (pr[i] = exp((z[idx[i]] - m) / T));
    if (p < 1.0) {
        double acc = 0.0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            acc += pr[i] / tot;
            if (acc >= p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
        tot = 0.0;
        for (int i = 0; i < n; i++)
            tot += pr[i];
    }
    memset(out, 0, (size_t)V * sizeof *out);
    for (int i = 0; i < n; i++)
        out[idx[i]] = pr[i] / tot;
    free(pr);
    free(idx);
}

static void check_freq(const char *name, double T, int k, double p)
{
    const int V = 12, N = 200000;
    tu_rng r = tu_rng_new(3 + (uint64_t)k * 17 + (uint64_t)(p * 1000));
    float z[12];
    tu_fill(&r, z, V, -2.0f, 2.0f);
    double ref[12], cnt[12] = {0};
    ref_dist(z, V, T, k, p, ref);
    clf_sampler *s = make(T, k, p, tu_seed() ^ 0x5eedull, V);
    int outside = 0;
    for (int i = 0; i < N; i++) {
        int t = clf_sampler_sample(s, z, V);
        if (t < 0 || t >= V || ref[t] == 0.0)
            outside++;
        else
            cnt[t] += 1.0;
    }
    clf_sampler_destroy(s);
    TU_CHECK(outside == 0, "%s: %d draws outside the allowed set", name, outside);
    int worst = 0;
    double worst_excess = -1e300;
    int ok = 1;
    for (int t = 0; t < V; t++) {
        double f = cnt[t] / N, se = sqrt(ref[t] * (1.0 - ref[t]) / N);
        double excess = fabs(f - ref[t]) - (6.0 * se + 1e-3);
        if (excess > worst_excess) {
            worst_excess = excess;
            worst = t;
        }
        if (excess > 0)
            ok = 0;
    }
    TU_CHECK(ok, "%s: token %d frequency %.5f vs reference %.5f", name, worst, cnt[worst] / N,
             ref[worst]);
}

static void test_bad_options(void)
{
    clf_sampler_options o = clf_sampler_options_default();
    clf_sampler *s = NULL;
    clf_error e;
    o.temperature = -1.0;
    TU_CHECK(clf_sampler_create(10, &o, &s, &e) == CLF_ERR_ARG && strstr(e.msg, "temperature"),
             "negative temperature refused");
    o = clf_sampler_options_default();
    o.top_p = 0.0;
    TU_CHECK(clf_sampler_create(10, &o, &s, &e) == CLF_ERR_ARG && strstr(e.msg, "top-p"),
             "top_p 0 refused");
    o = clf_sampler_options_default();
    o.top_k = -2;
    TU_CHECK(clf_sampler_create(10, &o, &s, &e) == CLF_ERR_ARG && strstr(e.msg, "top-k"),
             "top_k < 0 refused");
    TU_CHECK(s == NULL, "no sampler on failure");
}

int main(void)
{
    test_rng();
    test_greedy();
    test_determinism();
    check_freq("temperature 1", 1.0, 0, 1.0);
    check_freq("temperature 0.5", 0.5, 0, 1.0);
    check_freq("temperature 2", 2.0, 0, 1.0);
    check_freq("top-k 4", 1.0, 4, 1.0);
    check_freq("top-p 0.7", 1.0, 0, 0.7);
    check_freq("top-k 6 + top-p 0.8, T 0.8", 0.8, 6, 0.8);
    test_bad_options();
    return tu_finish();
}
