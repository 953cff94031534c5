/*
 * test_reduce.c - row sum / row max and the two-stage whole-tensor sum of
 * squares and mean, both kernel variants, against float64 references.
 *
 * What is checked (|got - ref| <= atol + rtol |ref|)
 * - row_sum, row_max at R x N = 1x1, 3x5, 17x129, 64x768, 257x33, 1000x7,
 *   and 5x0 (sum 0, max -inf): row_sum atol 2e-6 * (sum of |x| in the row)
 *   (taken over the worst row), row_max exact (atol 0, rtol 0).
 * - sumsq and mean at n = 1, 7, 33, 257, 1000, 100003, 1000003 (and sumsq of
 *   n = 0): sumsq rtol 1e-5; mean atol 2e-6 * mean(|x|), with inputs offset
 *   so the mean is not ~0 and, separately, centred so it cancels.
 * - Outputs never write outside their element (guard zones around them stay
 *   intact); two runs are bit-identical; the scratch size is >= 1.
 * - row_argmax (the greedy choice) at R x N = 1x1, 6x7, 12x65, 6x256,
 *   6x1000 and 3x50257, rows 3 floats longer than N: random rows, ties at
 *   the maximum (the lower index wins), NaN among and at the maximum, rows
 *   of NaN only (-1, and token 0), of -inf only, with +inf: exactly what
 *   clf_sampler_sample picks at temperature 0 from the same floats, with
 *   and without the token row.
 * Under a simulator (tu_simulator) the largest of each, 1000x7 and 1000003,
 * are left out: 257x33 has more rows than a launch's groups and 100003 more
 * than one part of the two-stage sum on both paths, with a tail.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/infer/sampler.h"
#include "model/ops/ops.h"
#include "model/ops/ops_internal.h"
#include "tests/test_util.h"

static const char *pn(clf_ops_path p) { return p == CLF_OPS_PATH_ITEM ? "item" : "group"; }

static void check_rows(clf_runtime *rt, clf_ops_path path, size_t R, size_t N, tu_rng *rng)
{
    clf_error err;
    char name[128];
    float *x = malloc((R * N + 1) * sizeof *x), *got = malloc(R * sizeof *got);
    double *ref = malloc(R * sizeof *ref);
    tu_fill(rng, x, R * N, -3, 5);
    clf_ptr dx = tu_upload(rt, x, R * N), out = tu_guarded(rt, NULL, R);

    const double worst_abs = tu_row_sums(x, R, N, ref);
    tu_ok(clf_op_row_sum_ex(rt, path, out, dx, R, N, &err), &err, "row_sum");
    tu_download(rt, out, got, R);
    snprintf(name, sizeof name, "row_sum %s %zux%zu", pn(path), R, N);
    tu_close(name, got, ref, R, 2e-6 * worst_abs + 1e-30, 0.0);
    TU_CHECK(tu_guard_intact(rt, out, R), "%s: guard zones intact", name);

    for (size_t r = 0; r < R; r++) {
        double m = -INFINITY;
        for (size_t j = 0; j < N; j++)
            m = fmax(m, x[r * N + j]);
        ref[r] = m;
    }
    tu_ok(clf_op_row_max_ex(rt, path, out, dx, R, N, &err), &err, "row_max");
    tu_download(rt, out, got, R);
    snprintf(name, sizeof name, "row_max %s %zux%zu", pn(path), R, N);
    tu_close(name, got, ref, R, 0.0, 0.0);
    TU_CHECK(tu_guard_intact(rt, out, R), "%s: guard zones intact", name);

    tu_free(dx);
    tu_free(out);
    free(x);
    free(got);
    free(ref);
}

static void check_total(clf_runtime *rt, clf_ops_path path, size_t n, float lo, float hi,
                        tu_rng *rng)
{
    clf_error err;
    char name[128];
    float *x = malloc((n + 1) * sizeof *x), got, got2;
    tu_fill(rng, x, n, lo, hi);
    size_t P = clf_op_sumsq_scratch_ex(rt, path, n);
    TU_CHECK(P >= 1, "scratch size %zu for n=%zu", P, n);
    clf_ptr dx = tu_upload(rt, x, n), out = tu_guarded(rt, NULL, 1),
            scratch = tu_guarded(rt, NULL, P);
    double ss = 0.0, s = 0.0, sa = 0.0;
    for (size_t i = 0; i < n; i++) {
        ss += (double)x[i] * x[i];
        s += x[i];
        sa += fabs(x[i]);
    }
    tu_ok(clf_op_sumsq_ex(rt, path, out, dx, n, scratch, &err), &err, "sumsq");
    tu_download(rt, out, &got, 1);
    snprintf(name, sizeof name, "sumsq %s n=%zu in [%g, %g]", pn(path), n, lo, hi);
    tu_close(name, &got, &ss, 1, 1e-30, 1e-5);
    TU_CHECK(tu_guard_intact(rt, out, 1) && tu_guard_intact(rt, scratch, P),
             "%s: guard zones intact (P=%zu)", name, P);
    tu_ok(clf_op_sumsq_ex(rt, path, out, dx, n, scratch, &err), &err, "sumsq");
    tu_download(rt, out, &got2, 1);
    TU_CHECK(memcmp(&got, &got2, sizeof got) == 0, "%s: bit-identical rerun", name);

    if (n > 0) {
        double mean = s / n;
        tu_ok(clf_op_mean_ex(rt, path, out, dx, n, scratch, &err), &err, "mean");
        tu_download(rt, out, &got, 1);
        snprintf(name, sizeof name, "mean %s n=%zu in [%g, %g]", pn(path), n, lo, hi);
        tu_close(name, &got, &mean, 1, 2e-6 * sa / n, 0.0);
    }
    tu_free(dx);
    tu_free(out);
    tu_free(scratch);
    free(x);
}

/* row_argmax against the sampler at temperature 0, rows of kind r % 6. */
static void check_argmax(clf_runtime *rt, clf_ops_path path, size_t R, size_t N, tu_rng *rng)
{
    const size_t ld = N + 3;
    float *x = malloc(R * ld * sizeof *x), *raw = malloc(2 * R * sizeof *raw);
    int32_t *want = malloc(R * sizeof *want), *idx = malloc(2 * R * sizeof *idx);
    tu_fill(rng, x, R * ld, -3, 5);
    for (size_t r = 0; r < R; r++) {
        float *row = x + r * ld;
        const size_t a = (size_t)tu_uniform(rng, 0, (double)N) % N;
        const size_t b = (size_t)tu_uniform(rng, 0, (double)N) % N;
        switch (r % 6) {
            case 1: /* a tie at the maximum */ row[a] = row[b] = 9.0f; break;
            case 2: /* NaN among the values and at the maximum */
                for (size_t j = 0; j < N; j += 3)
                    row[j] = NAN;
                row[a] = 9.0f;
                row[b] = NAN;
                break;
            case 3:
                for (size_t j = 0; j < N; j++)
                    row[j] = NAN;
                break;
            case 4:
                for (size_t j = 0; j < N; j++)
                    row[j] = -INFINITY;
                break;
            case 5:
                row[a] = INFINITY;
                row[b] = NAN;
                break;
        }
    }
    clf_sampler_options so = clf_sampler_options_default();
    so.temperature = 0.0;
    clf_sampler *smp = NULL;
    clf_error err;
    tu_ok(clf_sampler_create((int)N, &so, &smp, &err), &err, "sampler");
    for (size_t r = 0; r < R; r++)
        want[r] = clf_sampler_sample(smp, x + r * ld, (int)N);
    clf_sampler_destroy(smp);
    clf_ptr dx = tu_upload(rt, x, R * ld), di = tu_alloc(rt, 2 * R);
    clf_ptr dt = tu_guarded(rt, NULL, R);
    tu_ok(clf_op_row_argmax_ex(rt, path, di, dt, dx, ld, R, N, &err), &err, "row_argmax");
    tu_ok(clf_op_row_argmax_ex(rt, path, clf_ptr_at(di, R), (clf_ptr){0}, dx, ld, R, N, &err), &err,
          "row_argmax without tokens");
    tu_download(rt, di, raw, 2 * R);
    memcpy(idx, raw, 2 * R * sizeof *idx);
    tu_download(rt, dt, raw, R);
    int same = 1, tok_ok = 1;
    for (size_t r = 0; r < R; r++) {
        int32_t t;
        memcpy(&t, &raw[r], sizeof t);
        same = same && idx[r] == want[r] && idx[R + r] == want[r];
        tok_ok = tok_ok && t == (want[r] < 0 ? 0 : want[r]);
    }
    TU_CHECK(same, "row_argmax %s %zux%zu: the sampler's greedy choice in every row", pn(path), R,
             N);
    TU_CHECK(tok_ok && tu_guard_intact(rt, dt, R),
             "row_argmax %s %zux%zu: the token row (0 for -1), nothing written around it", pn(path),
             R, N);
    tu_free(dx);
    tu_free(di);
    tu_free(dt);
    free(x);
    free(raw);
    free(want);
    free(idx);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng rng = tu_rng_new(6);
    static const clf_ops_path paths[] = {CLF_OPS_PATH_ITEM, CLF_OPS_PATH_GROUP};
    static const size_t shapes[][2] = {{1, 1},    {3, 5},    {17, 129}, {64, 768},
                                       {257, 33}, {1000, 7}, {5, 0}};
    static const size_t sizes[] = {1, 7, 33, 257, 1000, 100003, 1000003};
    const int sim = tu_simulator();
    for (size_t p = 0; p < 2; p++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            if (!sim || shapes[s][0] < 1000)
                check_rows(rt, paths[p], shapes[s][0], shapes[s][1], &rng);
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            if (sim && sizes[s] > 100003)
                continue;
            check_total(rt, paths[p], sizes[s], -1, 3, &rng);
            check_total(rt, paths[p], sizes[s], -1, 1, &rng);
        }
        check_total(rt, paths[p], 0, -1, 1, &rng);
        static const size_t am[][2] = {{1, 1}, {6, 7}, {12, 65}, {6, 256}, {6, 1000}, {3, 50257}};
        for (size_t s = 0; s < sizeof am / sizeof am[0]; s++)
            if (!sim || am[s][1] < 50257)
                check_argmax(rt, paths[p], am[s][0], am[s][1], &rng);
    }
    clf_error err;
    clf_ptr out = tu_alloc(rt, 1), s = tu_alloc(rt, 1);
    TU_CHECK(clf_op_mean(rt, out, out, 0, s, &err) == CLF_ERR_ARG, "mean of 0 elements rejected");
    tu_free(out);
    tu_free(s);
    clf_runtime_destroy(rt);
    return tu_finish();
}
