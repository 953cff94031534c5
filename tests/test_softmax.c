/*
 * test_softmax.c - row-wise masked softmax forward and backward against a
 * float64 reference, with both kernel variants (one work-item per row, one
 * work-group per row).
 *
 * What is checked (|got - ref| <= atol + rtol |ref|)
 * - Forward, atol 2e-7, rtol 2e-6, at R x N = 1x1, 3x5, 17x129, 64x768,
 *   257x33, 1000x7 (under the simulator 40x768, 65x33, 100x7 for the last
 *   three) and scale 0.37, with: no mask; an additive mask (finite
 *   values and some -inf, add_rows dividing R); a keep mask (int32, grouped
 *   rows, some groups fully dropped); causal with N = T, N > T (a KV cache)
 *   and N < T (leading rows fully masked); all three combined; in place.
 * - Outputs are surrounded by guard zones that must stay untouched.
 * - Fully-masked rows are exactly 0.0f (bitwise), never NaN.
 * - Logits around 1e4 (scale 1) stay finite and match the reference.
 * - Backward dx = scale * y * (dy - sum dy y), atol 2e-7, rtol 2e-6, given
 *   y from the forward. The float64 backward reference is itself checked
 *   against central finite differences of the float64 forward reference
 *   (with an additive mask and causality; h = 1e-6, tolerance 1e-8 + 1e-6 |d|).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ops/ops.h"
#include "model/ops/ops_internal.h"
#include "tests/test_util.h"

typedef struct mask_ref {
    const float *add; /* [add_rows, N] or NULL */
    size_t add_rows;
    const int32_t *keep; /* [R / keep_group, N] or NULL */
    size_t keep_group;
    size_t causal_T;
} mask_ref;

/* float64 reference: y = softmax(scale * x + add) with dropped entries 0. */
static void softmax_forward_ref(double *y, const double *x, size_t R, size_t N, double scale,
                                const mask_ref *m)
{
    for (size_t r = 0; r < R; r++) {
        const double *xr = x + r * N;
        double *yr = y + r * N;
        double mx = -INFINITY;
        for (size_t j = 0; j < N; j++) {
            double v = scale * xr[j] + (m->add ? m->add[(r % m->add_rows) * N + j] : 0.0);
            int keep = 1;
            if (m->keep && m->keep[(r / m->keep_group) * N + j] == 0)
                keep = 0;
            if (m->causal_T && (double)j > (double)(r % m->causal_T) + (double)N - m->causal_T)
                keep = 0;
            yr[j] = keep ? v : -INFINITY;
            if (yr[j] > mx)
                mx = yr[j];
        }
        if (mx == -INFINITY) {
            for (size_t j = 0; j < N; j++)
                yr[j] = 0.0;
            continue;
        }
        double s = 0.0;
        for (size_t j = 0; j < N; j++) {
            yr[j] = yr[j] == -INFINITY ? 0.0 : exp(yr[j] - mx);
            s += yr[j];
        }
        for (size_t j = 0; j < N; j++)
            yr[j] /= s;
    }
}

static void softmax_backward_ref(double *dx, const double *dy, const double *y, size_t R, size_t N,
                                 double scale)
{
    for (size_t r = 0; r < R; r++) {
        double dot = 0.0;
        for (size_t j = 0; j < N; j++)
            dot += dy[r * N + j] * y[r * N + j];
        for (size_t j = 0; j < N; j++)
            dx[r * N + j] = scale * y[r * N + j] * (dy[r * N + j] - dot);
    }
}

/* The float64 backward against central differences of the float64 forward,
 * for L = sum(y * dy). */
static void check_reference_backward(tu_rng *rng)
{
    enum { R = 6, N = 9, T = 3 };
    double x[R * N], dy[R * N], y[R * N], dx[R * N], yp[R * N], ym[R * N];
    float add[T * N];
    const double scale = 0.7;
    for (size_t i = 0; i < R * N; i++) {
        x[i] = tu_uniform(rng, -3, 3);
        dy[i] = tu_uniform(rng, -1, 1);
    }
    tu_fill(rng, add, T * N, -2, 2);
    add[4] = -INFINITY;
    mask_ref m = {add, T, NULL, 0, T};
    softmax_forward_ref(y, x, R, N, scale, &m);
    softmax_backward_ref(dx, dy, y, R, N, scale);
    double worst = 0.0;
    int bad = 0;
    for (size_t i = 0; i < R * N; i++) {
        const double h = 1e-6;
        double keep = x[i], lp = 0.0, lm = 0.0;
        x[i] = keep + h;
        softmax_forward_ref(yp, x, R, N, scale, &m);
        x[i] = keep - h;
        softmax_forward_ref(ym, x, R, N, scale, &m);
        x[i] = keep;
        for (size_t j = 0; j < R * N; j++) {
            lp += yp[j] * dy[j];
            lm += ym[j] * dy[j];
        }
        double fd = (lp - lm) / (2 * h), e = fabs(fd - dx[i]);
        worst = fmax(worst, e);
        if (e > 1e-8 + 1e-6 * fabs(dx[i]))
            bad++;
    }
    TU_CHECK(bad == 0, "softmax float64 backward vs central differences (worst %.2e)", worst);
}

static const char *path_name(clf_ops_path p) { return p == CLF_OPS_PATH_ITEM ? "item" : "group"; }

/* One forward (+ backward) case. T is the causal/additive period: a divisor
 * of R. keep groups are R / G rows each. */
static void run_case(clf_runtime *rt, clf_ops_path path, size_t R, size_t N, size_t T,
                     size_t causal_T, int use_add, size_t G, float scale, float lo, float hi,
                     int in_place, int backward, tu_rng *rng)
{
    clf_error err;
    char name[192];
    size_t n = R * N;
    float *x = malloc(n * sizeof *x), *got = malloc(n * sizeof *got);
    float *add = NULL;
    int32_t *keep = NULL;
    double *xd = malloc(n * sizeof *xd), *ref = malloc(n * sizeof *ref);
    tu_fill(rng, x, n, lo, hi);
    for (size_t i = 0; i < n; i++)
        xd[i] = x[i];
    mask_ref m = {NULL, 0, NULL, 0, causal_T};
    clf_softmax_mask dm = {{NULL, 0}, 0, {NULL, 0}, 0, causal_T};
    if (use_add) {
        add = malloc(T * N * sizeof *add);
        tu_fill(rng, add, T * N, -3, 1);
        for (size_t i = 0; i < T * N; i += 5)
            add[i] = -INFINITY;
        m.add = add;
        m.add_rows = T;
        dm.additive = tu_upload(rt, add, T * N);
        dm.additive_rows = T;
    }
    size_t group_rows = G ? R / G : 0;
    if (G) {
        keep = malloc(G * N * sizeof *keep);
        for (size_t i = 0; i < G * N; i++)
            keep[i] = (tu_u32(rng) % 4) != 0 ? (int32_t)(1 + tu_u32(rng) % 3) : 0;
        if (G >= 2) /* group 1 fully dropped */
            memset(keep + N, 0, N * sizeof *keep);
        m.keep = keep;
        m.keep_group = group_rows;
        dm.keep = tu_upload_i32(rt, keep, G * N);
        dm.keep_group_rows = group_rows;
    }
    clf_ptr dx = tu_upload(rt, x, n);
    clf_ptr dy = in_place ? dx : tu_guarded(rt, NULL, n);
    tu_ok(clf_op_softmax_forward_ex(rt, path, dy, dx, R, N, scale, &dm, &err), &err,
          "softmax_forward");
    tu_download(rt, dy, got, n);
    softmax_forward_ref(ref, xd, R, N, scale, &m);
    snprintf(name, sizeof name, "softmax %s %zux%zu add=%d keep=%zu causal=%zu%s", path_name(path),
             R, N, use_add, G, causal_T, in_place ? " in place" : "");
    tu_close(name, got, ref, n, 2e-7, 2e-6);
    if (!in_place)
        TU_CHECK(tu_guard_intact(rt, dy, n), "%s: guard zones intact", name);

    /* fully-masked rows: exact zeros */
    size_t masked_rows = 0, exact = 0;
    for (size_t r = 0; r < R; r++) {
        int all = 1;
        for (size_t j = 0; j < N && all; j++)
            if (ref[r * N + j] != 0.0)
                all = 0;
        if (!all)
            continue;
        masked_rows++;
        int z = 1;
        for (size_t j = 0; j < N; j++) {
            uint32_t bits;
            memcpy(&bits, &got[r * N + j], 4);
            if (bits != 0)
                z = 0;
        }
        exact += z;
    }
    if (masked_rows > 0)
        TU_CHECK(exact == masked_rows, "%s: %zu of %zu fully-masked rows exactly +0.0", name, exact,
                 masked_rows);

    if (backward) {
        /* dx = scale * y (dy - sum dy y), with y the device forward */
        float *g = malloc(n * sizeof *g);
        double *gd = malloc(n * sizeof *gd), *yd = malloc(n * sizeof *yd);
        tu_fill(rng, g, n, -1, 1);
        for (size_t i = 0; i < n; i++) {
            gd[i] = g[i];
            yd[i] = got[i];
        }
        clf_ptr dg = tu_guarded(rt, g, n), dgx = tu_guarded(rt, NULL, n);
        tu_ok(clf_op_softmax_backward_ex(rt, path, dgx, dg, dy, R, N, scale, &err), &err,
              "softmax_backward");
        tu_download(rt, dgx, got, n);
        softmax_backward_ref(ref, gd, yd, R, N, scale);
        snprintf(name, sizeof name, "softmax backward %s %zux%zu add=%d keep=%zu causal=%zu",
                 path_name(path), R, N, use_add, G, causal_T);
        tu_close(name, got, ref, n, 2e-7, 2e-6);
        /* in place: dx aliasing dy */
        tu_ok(clf_op_softmax_backward_ex(rt, path, dg, dg, dy, R, N, scale, &err), &err,
              "softmax_backward in place");
        tu_download(rt, dg, got, n);
        snprintf(name, sizeof name, "softmax backward in place %s %zux%zu", path_name(path), R, N);
        tu_close(name, got, ref, n, 2e-7, 2e-6);
        TU_CHECK(tu_guard_intact(rt, dg, n) && tu_guard_intact(rt, dgx, n),
                 "%s: guard zones intact", name);
        tu_free(dg);
        tu_free(dgx);
        free(g);
        free(gd);
        free(yd);
    }

    if (!in_place)
        tu_free(dy);
    tu_free(dx);
    if (use_add)
        tu_free(dm.additive);
    if (G)
        tu_free(dm.keep);
    free(add);
    free(keep);
    free(x);
    free(got);
    free(xd);
    free(ref);
}

static void check_path(clf_runtime *rt, clf_ops_path path, tu_rng *rng)
{
    static const size_t full[][2] = {{1, 1}, {3, 5}, {17, 129}, {64, 768}, {257, 33}, {1000, 7}};
    /* under the simulator fewer rows where there are many: rows are
     * independent work-groups (or items) running the same code */
    static const size_t sim[][2] = {{1, 1}, {3, 5}, {17, 129}, {40, 768}, {65, 33}, {100, 7}};
    const size_t(*shapes)[2] = tu_simulator() ? sim : full;
    for (size_t s = 0; s < sizeof full / sizeof full[0]; s++) {
        size_t R = shapes[s][0], N = shapes[s][1];
        run_case(rt, path, R, N, 1, 0, 0, 0, 0.37f, -6, 6, 0, 1, rng); /* no mask */
        run_case(rt, path, R, N, R, 0, 1, 0, 0.37f, -6, 6, 0, 0, rng); /* additive per row */
        run_case(rt, path, R, N, 1, 0, 1, 0, 0.37f, -6, 6, 0, 0, rng); /* additive shared */
        run_case(rt, path, R, N, 1, 0, 0, R, 0.37f, -6, 6, 0, 1, rng); /* keep per row */
        run_case(rt, path, R, N, 1, N, 0, 0, 0.37f, -6, 6, 0, 1, rng); /* causal square-ish */
    }
    /* attention-like: B=2, NH=3, T=16 rows per head; keys N */
    const size_t B = 2, NH = 3, T = 16, R = B * NH * T;
    run_case(rt, path, R, T, T, T, 0, 0, 0.25f, -6, 6, 0, 1, rng);     /* causal N = T */
    run_case(rt, path, R, T + 5, T, T, 0, 0, 0.25f, -6, 6, 0, 1, rng); /* KV cache N > T */
    run_case(rt, path, R, T - 5, T, T, 0, 0, 0.25f, -6, 6, 0, 1, rng); /* N < T: empty rows */
    run_case(rt, path, R, T, T, T, 1, B, 0.25f, -6, 6, 0, 1, rng);     /* all combined */
    run_case(rt, path, R, 77, T, T, 1, B, 0.25f, -6, 6, 0, 1, rng);    /* combined, odd N */
    run_case(rt, path, R, 77, T, 0, 1, B, 0.25f, -6, 6, 1, 0, rng);    /* in place */
    /* large logits */
    run_case(rt, path, 33, 257, 1, 0, 0, 0, 1.0f, 1e4f - 10, 1e4f + 10, 0, 1, rng);
    run_case(rt, path, 33, 257, 1, 0, 0, 0, 1.0f, -1e4f - 10, -1e4f + 10, 0, 0, rng);
}

/* Bit-identical reruns, and argument checks. */
static void check_misc(clf_runtime *rt, tu_rng *rng)
{
    clf_error err;
    const size_t R = 50, N = 300;
    float *x = malloc(R * N * sizeof *x), *a = malloc(R * N * sizeof *a),
          *b = malloc(R * N * sizeof *b);
    tu_fill(rng, x, R * N, -5, 5);
    clf_ptr dx = tu_upload(rt, x, R * N), dy = tu_alloc(rt, R * N);
    tu_ok(clf_op_softmax_forward(rt, dy, dx, R, N, 1.0f, NULL, &err), &err, "softmax");
    tu_download(rt, dy, a, R * N);
    tu_ok(clf_op_softmax_forward(rt, dy, dx, R, N, 1.0f, NULL, &err), &err, "softmax");
    tu_download(rt, dy, b, R * N);
    TU_CHECK(memcmp(a, b, R * N * sizeof *a) == 0, "softmax reruns are bit-identical");
    clf_softmax_mask bad = {dx, 0, {NULL, 0}, 0, 0};
    TU_CHECK(clf_op_softmax_forward(rt, dy, dx, R, N, 1.0f, &bad, &err) == CLF_ERR_ARG,
             "an additive mask with additive_rows 0 is rejected");
    tu_free(dx);
    tu_free(dy);
    free(x);
    free(a);
    free(b);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng rng = tu_rng_new(4);
    check_reference_backward(&rng);
    check_path(rt, CLF_OPS_PATH_ITEM, &rng);
    check_path(rt, CLF_OPS_PATH_GROUP, &rng);
    check_misc(rt, &rng);
    clf_runtime_destroy(rt);
    return tu_finish();
}
