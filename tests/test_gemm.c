/*
 * test_gemm.c - clf_gemm against a float64 reference on random inputs.
 *
 * What is checked
 *   - Both engines explicitly (clf_gemm_with) and through auto (clf_gemm,
 *     clf_gemm_choose): all four transpose combinations at odd shapes
 *     (1x1x1, 7x13x5, 33x65x17, 100x1x300, 257x129x63, ... as MxNxK) that hit
 *     every edge of the native kernel's tiles, with A, B and C at nonzero
 *     offsets inside one shared buffer, leading dimensions larger than the
 *     minimum, and alpha/beta other than 1/0.
 *   - beta == 0 must not read C: C starts as NaN there.
 *   - Elements of C between rows (ldc > n) and around it are never written.
 *   - Strided batches (gaps between matrices, and a zero stride that shares A
 *     or B across the batch).
 *   - k == 0 gives C = beta * C; m == 0 or n == 0 leaves C alone.
 *   - Every configuration the device lists, by name; each k-blocked one
 *     bit for bit its classic sibling (same register block) at shapes with
 *     several k-blocks, row groups and edges.
 *   - Argument errors: lda/ldb/ldc too small, operands past their buffer's
 *     end, overlapping batch outputs, a bad transpose flag, NULL.
 *   - clf_gemm_prepare validates and readies a shape that then runs.
 *   - Epilogues (bias, bias + ReLU / GELU erf / GELU tanh / SiLU into a
 *     second matrix D, a residual D added, an activation's derivative at D
 *     multiplied in) on both engines at shapes taking every native path,
 *     against float64; an activation without D, an epilogue on a batch, a
 *     residual without D or given an activation, a D that is read
 *     overlapping C, a derivative without its activation are refused.
 *   - Split-K (forced: 2, 3, 5 slices) at every transpose, with alpha, beta
 *     and an epilogue (bias + GELU, bias + residual), bit-identical reruns;
 *     a K no P divides runs unsplit.
 *
 * Parts: `test_gemm K/N` runs the K-th of N shares of the configurations
 * (CTest runs 1/2 and 2/2 side by side, so that two cores compile the
 * configurations' kernels); the checks that are not per configuration run
 * in the last part. Without an argument, everything.
 *
 * Tolerance: |got - ref| <= atol + rtol |ref| with rtol = 1e-4 and
 * atol = 1e-5 sqrt(K) max(1, |alpha|). Inputs are uniform in [-1, 1]; a
 * float32 dot product of K such terms accumulates a rounding error with a
 * standard deviation of roughly 2^-24 K / 7 (about 1e-6 at K = 300), so the
 * bound sits tens of standard deviations away for every K used here (at most
 * 1500), while any indexing mistake produces errors of order 0.1 to 1.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ops/ops.h"
#include "runtime/gemm/gemm.h"
#include "runtime/util.h"
#include "tests/gemm_case.h"
#include "tests/test_util.h"

static const size_t
    shapes[][3] =
        {
            /* M, N, K */
            {1, 1, 1},      {7, 13, 5},     {33, 65, 17}, {100, 1, 300},
            {257, 129, 63}, {1, 200, 70},   {64, 48, 1},  {70, 97, 129},
            {16, 16, 1000}, {40, 50, 1500}, /* deeper than K_SLICE_FROM: the native engine slices K */
};

/* Under a simulator (tu_simulator) the shapes that keep its run short: every
 * path (tails, one row, one column, K sliced) at small sizes. */
static const size_t sim_shapes[][3] = {
    /* M, N, K */
    {1, 1, 1}, {7, 13, 5}, {33, 65, 17}, {9, 1, 30}, {1, 20, 7}, {5, 7, 1100},
};

/* light: the first two simulator shapes, one batch case and k == 0 (the
 * simulator's check of a configuration other than the default). */
static void test_engine(clf_runtime *rt, const char *e, int light, tu_rng *r)
{
    printf("engine %s: transposes x shapes\n", e);
    const float ab[][2] = {{1.5f, 0.5f}, {1.0f, 0.0f}, {-0.75f, 1.0f}, {2.0f, -1.25f}};
    const int sim = tu_simulator() || light;
    const size_t(*list)[3] = sim ? sim_shapes : shapes;
    const size_t n_list = light ? 2
                          : sim ? sizeof sim_shapes / sizeof sim_shapes[0]
                                : sizeof shapes / sizeof shapes[0];
    int v = 0;
    for (size_t s = 0; s < n_list; s++)
        for (int t = 0; t < 4; t++, v++) {
            /* the deep-K slices are the register-blocked kernels' path; a
             * tiled configuration's 1100-deep product costs the simulator
             * minutes and checks nothing the shallower ones do not */
            if (sim && list[s][2] > 1000 && e[0] == 't')
                continue;
            gcase g = {.ta = t & 1,
                       .tb = t >> 1,
                       .m = list[s][0],
                       .n = list[s][1],
                       .k = list[s][2],
                       .batch = 1,
                       .pad = (size_t)(v % 3) * 3,
                       .alpha = ab[v % 4][0],
                       .beta = ab[v % 4][1]};
            run_case(rt, e, &g, r);
            /* a deep product in the register-blocked kernels' other K
             * slicings: one pass, and slices of an uneven depth */
            if (g.k > 1000 && e[0] != 't' && e[0] != 'c') {
                g.k_slice = SIZE_MAX;
                run_case(rt, e, &g, r);
                g.k_slice = g.k / 3 + 1;
                run_case(rt, e, &g, r);
            }
        }
    printf("engine %s: strided batches\n", e);
    for (int t = 0; t < 4; t++) {
        gcase g = {.ta = t & 1,
                   .tb = t >> 1,
                   .m = 33,
                   .n = 20,
                   .k = 17,
                   .batch = 3,
                   .pad = 1,
                   .alpha = 0.5f,
                   .beta = 1.5f};
        run_case(rt, e, &g, r);
        if (light)
            continue;
        gcase h = {.ta = t & 1,
                   .tb = t >> 1,
                   .m = 70,
                   .n = 50,
                   .k = 9,
                   .batch = 4,
                   .pad = 0,
                   .alpha = 1.0f,
                   .beta = 0.0f};
        run_case(rt, e, &h, r);
    }
    gcase nd = {.tb = 1,
                .m = 9,
                .n = 50,
                .k = 40,
                .batch = 3,
                .pad = 2,
                .alpha = 1.0f,
                .beta = 0.5f}; /* few rows, B transposed: the native dot-product path */
    if (!light)
        run_case(rt, e, &nd, r);
    gcase n1 = nd; /* one row (batch-1 decoding): the one-row dot kernel */
    n1.m = 1;
    n1.n = 37;
    if (!light)
        run_case(rt, e, &n1, r);
    gcase sa = {.m = 65, .n = 31, .k = 12, .batch = 3, .alpha = 1.0f, .beta = 0.25f, .share_a = 1};
    if (!light)
        run_case(rt, e, &sa, r);
    gcase sb = {.ta = 1,
                .tb = 1,
                .m = 9,
                .n = 50,
                .k = 12,
                .batch = 5,
                .alpha = 1.0f,
                .beta = 0.0f,
                .share_b = 1};
    if (!light)
        run_case(rt, e, &sb, r);
    printf("engine %s: k == 0 and empty products\n", e);
    gcase k0 = {.m = 19, .n = 53, .k = 0, .batch = 2, .pad = 2, .alpha = 1.0f, .beta = -0.5f};
    run_case(rt, e, &k0, r);
    gcase k0z = {.ta = 1, .m = 5, .n = 3, .k = 0, .batch = 1, .alpha = 1.0f, .beta = 0.0f};
    run_case(rt, e, &k0z, r);
    gcase m0 = {.m = 0, .n = 5, .k = 3, .batch = 1, .alpha = 1.0f, .beta = 0.0f};
    run_case(rt, e, &m0, r);
    gcase n0 = {.m = 4, .n = 0, .k = 3, .batch = 1, .alpha = 1.0f, .beta = 0.0f};
    run_case(rt, e, &n0, r);
}

static void expect_arg_error(clf_runtime *rt, const clf_gemm_desc *d, const char *needle,
                             const char *what)
{
    clf_error err;
    memset(&err, 0, sizeof err);
    clf_status st = clf_gemm_with(rt, CLF_GEMM_NATIVE, d, &err);
    TU_CHECK(st == CLF_ERR_ARG && strstr(err.msg, needle) != NULL, "%s -> CLF_ERR_ARG (%s)", what,
             st == CLF_OK ? "accepted" : err.msg);
}

static void test_validation(clf_runtime *rt)
{
    printf("argument validation\n");
    clf_ptr p = tu_alloc(rt, 1000);
    clf_gemm_desc ok = {.m = 10,
                        .n = 10,
                        .k = 10,
                        .alpha = 1.0f,
                        .a = {p.buf, 0},
                        .lda = 10,
                        .b = {p.buf, 100},
                        .ldb = 10,
                        .c = {p.buf, 200},
                        .ldc = 10};
    clf_error err;
    TU_CHECK(clf_gemm_with(rt, CLF_GEMM_NATIVE, &ok, &err) == CLF_OK, "a valid call passes");
    clf_gemm_desc d = ok;
    d.lda = 9;
    expect_arg_error(rt, &d, "lda=9", "lda below k");
    d = ok;
    d.trans_a = 1;
    d.m = 12;
    d.lda = 11;
    expect_arg_error(rt, &d, "lda=11", "transposed A with lda below m");
    d = ok;
    d.ldb = 3;
    expect_arg_error(rt, &d, "ldb=3", "ldb below n");
    d = ok;
    d.trans_b = 1;
    d.k = 12;
    d.lda = 12;
    d.ldb = 11;
    expect_arg_error(rt, &d, "ldb=11", "transposed B with ldb below k");
    d = ok;
    d.ldc = 5;
    expect_arg_error(rt, &d, "ldc=5", "ldc below n");
    d = ok;
    d.c.off = 950;
    expect_arg_error(rt, &d, "past the end", "C past the buffer's end");
    d = ok;
    d.b.off = 901;
    expect_arg_error(rt, &d, "B (", "B past the buffer's end");
    d = ok;
    d.batch = 3;
    d.stride_a = 0;
    d.stride_b = 0;
    d.stride_c = 50;
    expect_arg_error(rt, &d, "stride_c=50", "overlapping batch outputs");
    d.stride_c = 400; /* 200 + 2 * 400 + 100 > 1000 */
    expect_arg_error(rt, &d, "past the end", "batch reaching past the buffer");
    d = ok;
    d.trans_a = 2;
    expect_arg_error(rt, &d, "trans_a=2", "a bad transpose flag");
    d = ok;
    d.a.buf = NULL;
    expect_arg_error(rt, &d, "A buffer is NULL", "a NULL A");
    TU_CHECK(clf_gemm(rt, NULL, &err) == CLF_ERR_ARG, "a NULL descriptor -> CLF_ERR_ARG");
    clf_gemm_engine e;
    d = ok;
    d.ldc = 1;
    TU_CHECK(clf_gemm_choose(rt, &d, &e, &err) == CLF_ERR_ARG, "clf_gemm_choose validates too");
    tu_free(p);
}

/* The activation's derivative stored by the forward (CLF_GEMM_EPI_ACT_DERIV)
 * and multiplied in by the backward (CLF_GEMM_EPI_TIMES_D), as a training
 * model's FFN uses
 * them: for every activation, at a shape with edges and (register-blocked
 * engines) a deep one run in K slices, against float64 (C = act'(o), D =
 * act(o); then C = (G W) act'(o)), and bit for bit what the same GEMMs give
 * with the pre-activation kept (CLF_GEMM_EPI_TIMES_DERIV recomputing the
 * derivative): D the same, the backward's C the same. Refusals: an
 * activation's epilogue without its activation, a product with one or
 * without D, an unknown kind, a product on a batch. */
static void test_stored_derivative(clf_runtime *rt, const char *engine, int light, tu_rng *r)
{
    static const size_t shapes[][3] = {{33, 65, 17}, {64, 96, 2000}};
    const clf_gemm_act acts[] = {CLF_GEMM_ACT_RELU, CLF_GEMM_ACT_GELU_ERF, CLF_GEMM_ACT_GELU_TANH,
                                 CLF_GEMM_ACT_SILU};
    clf_error e;
    for (size_t si = 0; si < 2; si++)
        for (size_t ai = 0; ai < 4; ai++) {
            const size_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
            const clf_gemm_act act = acts[ai];
            if ((tu_simulator() || light) && (m * n * k > 40000 || act != CLF_GEMM_ACT_GELU_ERF))
                continue;
            /* forward: X [m, k] W^T (W [n, k]) + bias; backward: G [m, n2] V
             * (V [n2, n]) times the derivative, n2 = 24 */
            const size_t n2 = 24;
            float *X = malloc(m * k * 4), *W = malloc(n * k * 4), *bias = malloc(n * 4);
            float *G = malloc(m * n2 * 4), *V = malloc(n2 * n * 4);
            float *c1 = malloc(m * n * 4), *c2 = malloc(m * n * 4), *d1 = malloc(m * n * 4);
            float *d2 = malloc(m * n * 4), *x1 = malloc(m * n * 4), *x2 = malloc(m * n * 4);
            double *rc = malloc(m * n * 8), *rd = malloc(m * n * 8), *rx = malloc(m * n * 8);
            tu_fill(r, X, m * k, -1, 1);
            tu_fill(r, W, n * k, -0.1f, 0.1f);
            tu_fill(r, bias, n, -1, 1);
            tu_fill(r, G, m * n2, -1, 1);
            tu_fill(r, V, n2 * n, -1, 1);
            clf_ptr dX = tu_upload(rt, X, m * k), dW = tu_upload(rt, W, n * k);
            clf_ptr db = tu_upload(rt, bias, n), dG = tu_upload(rt, G, m * n2);
            clf_ptr dV = tu_upload(rt, V, n2 * n);
            clf_ptr C1 = tu_alloc(rt, m * n), C2 = tu_alloc(rt, m * n), D = tu_alloc(rt, m * n);
            clf_ptr B = tu_alloc(rt, m * n);
            clf_gemm_desc f = {.trans_b = 1,
                               .m = m,
                               .n = n,
                               .k = k,
                               .alpha = 1.0f,
                               .a = dX,
                               .lda = k,
                               .b = dW,
                               .ldb = k,
                               .c = C1,
                               .ldc = n,
                               .bias = db,
                               .epi = CLF_GEMM_EPI_ACT,
                               .act = act,
                               .d = D,
                               .ldd = n};
            tu_ok(gemm_by(rt, engine, &f, &e), &e, "forward, pre-activation kept");
            tu_download(rt, C1, c1, m * n);
            tu_download(rt, D, d1, m * n);
            f.c = C2;
            f.epi = CLF_GEMM_EPI_ACT_DERIV;
            tu_ok(gemm_by(rt, engine, &f, &e), &e, "forward, derivative kept");
            tu_download(rt, C2, c2, m * n);
            tu_download(rt, D, d2, m * n);
            clf_gemm_desc b = {.m = m,
                               .n = n,
                               .k = n2,
                               .alpha = 1.0f,
                               .a = dG,
                               .lda = n2,
                               .b = dV,
                               .ldb = n,
                               .c = B,
                               .ldc = n,
                               .epi = CLF_GEMM_EPI_TIMES_DERIV,
                               .act = act,
                               .d = C1,
                               .ldd = n};
            tu_ok(gemm_by(rt, engine, &b, &e), &e, "backward, derivative recomputed");
            tu_download(rt, B, x1, m * n);
            b.epi = CLF_GEMM_EPI_TIMES_D;
            b.act = CLF_GEMM_ACT_NONE;
            b.d = C2;
            tu_ok(gemm_by(rt, engine, &b, &e), &e, "backward, derivative stored");
            tu_download(rt, B, x2, m * n);
            const double atol = 1e-5 * sqrt((double)k) + 1e-6;
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++) {
                    double o = bias[j], g = 0.0;
                    for (size_t q = 0; q < k; q++)
                        o += (double)X[i * k + q] * W[j * k + q];
                    for (size_t q = 0; q < n2; q++)
                        g += (double)G[i * n2 + q] * V[q * n + j];
                    /* ReLU's derivative steps at 0: within the product's
                     * tolerance of it, the reference derivative is that of
                     * the pre-activation the device computed (kept in C1),
                     * which float32 rounding may put on the other side
                     * (seed 1795727127457791, Intel's runtime: o ~ 0+, 0
                     * stored where the float64 step gives 1) */
                    const double at = fabs(o) <= atol ? (double)c1[i * n + j] : o;
                    rc[i * n + j] = tu_act_grad_ref((int)act, at);
                    rd[i * n + j] = tu_act_ref((int)act, o);
                    rx[i * n + j] = g * rc[i * n + j];
                }
            char name[160];
            snprintf(name, sizeof name, "%s stored derivative act=%d m=%zu n=%zu k=%zu: C", engine,
                     (int)act, m, n, k);
            tu_close(name, c2, rc, m * n, atol, 1e-4);
            name[strlen(name) - 1] = 'D';
            tu_close(name, d2, rd, m * n, atol, 1e-4);
            snprintf(name, sizeof name,
                     "%s stored derivative act=%d m=%zu n=%zu k=%zu: the backward's C", engine,
                     (int)act, m, n, k);
            tu_close(name, x2, rx, m * n, 1e-5 * sqrt((double)n2) + 1e-6, 1e-4);
            TU_CHECK(memcmp(d1, d2, m * n * 4) == 0 && memcmp(x1, x2, m * n * 4) == 0,
                     "%s act=%d %zux%zux%zu: D and the backward's C bit for bit those of the "
                     "derivative recomputed from the kept pre-activation",
                     engine, (int)act, m, n, k);
            tu_free(dX), tu_free(dW), tu_free(db), tu_free(dG), tu_free(dV);
            tu_free(C1), tu_free(C2), tu_free(D), tu_free(B);
            free(X), free(W), free(bias), free(G), free(V), free(c1), free(c2), free(d1);
            free(d2), free(x1), free(x2), free(rc), free(rd), free(rx);
        }
    clf_ptr x = tu_alloc(rt, 64);
    clf_gemm_desc bad = {.m = 4,
                         .n = 4,
                         .k = 4,
                         .alpha = 1.0f,
                         .a = x,
                         .b = x,
                         .c = x,
                         .lda = 4,
                         .ldb = 4,
                         .ldc = 4,
                         .d = clf_ptr_at(x, 32),
                         .ldd = 4,
                         .epi = CLF_GEMM_EPI_ACT_DERIV};
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "missing") != NULL,
             "an activation epilogue without its activation is refused: %s", e.msg);
    bad.act = CLF_GEMM_ACT_GELU_ERF;
    bad.epi = CLF_GEMM_EPI_TIMES_D;
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "takes none") != NULL,
             "a product with D given an activation is refused: %s", e.msg);
    bad.epi = (clf_gemm_epi)9;
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "kind") != NULL,
             "an unknown epilogue kind is refused: %s", e.msg);
    bad.epi = CLF_GEMM_EPI_TIMES_D;
    bad.act = CLF_GEMM_ACT_NONE;
    bad.d = (clf_ptr){NULL, 0};
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "needs D") != NULL,
             "a product without D is refused: %s", e.msg);
    bad.d = clf_ptr_at(x, 32);
    bad.batch = 2;
    bad.stride_a = bad.stride_b = 0;
    bad.stride_c = 16;
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "product") != NULL &&
                 strstr(e.msg, "batch") != NULL,
             "a product on a batch is refused, by name: %s", e.msg);
    tu_free(x);
}

/* One epilogue case: the shape, the epilogue (an activation into D, a
 * residual, or an activation's derivative at D), with or without bias. */
typedef struct epi_case {
    size_t m, n, k;
    int tb, res, dact, with_bias;
    clf_gemm_act act;
} epi_case;

/* One case on `engine`: C and D against float64, columns past n untouched,
 * a D that is read unchanged. */
static void epilogue_case(clf_runtime *rt, const char *engine, tu_rng *r, const epi_case *c)
{
    clf_error e;
    const size_t m = c->m, n = c->n, k = c->k;
    const int reads_d = c->res || c->dact;
    const size_t ld = n + 3, na = m * (k ? k : 1), nb = n * (k ? k : 1);
    float *A = malloc(na * 4), *Bm = malloc(nb * 4), *bias = malloc(n * 4);
    float *C = malloc(m * ld * 4), *D = malloc(m * ld * 4), *R = malloc(m * ld * 4);
    tu_fill(r, A, na, -1, 1);
    tu_fill(r, Bm, nb, -1, 1);
    tu_fill(r, bias, n, -2, 2);
    for (size_t i = 0; i < m * ld; i++)
        C[i] = D[i] = 7.0f;
    if (reads_d) /* residual or activation input: fresh values, 7 past n */
        for (size_t i = 0; i < m; i++)
            tu_fill(r, D + i * ld, n, -3, 3);
    memcpy(R, D, m * ld * 4);
    clf_ptr dA = tu_upload(rt, A, na), dB = tu_upload(rt, Bm, nb);
    clf_ptr dbias = tu_upload(rt, bias, n), dC = tu_upload(rt, C, m * ld);
    clf_ptr dD = tu_upload(rt, D, m * ld);
    const float beta = k == 0 ? 0.5f : 0.0f;
    const clf_gemm_desc d = {.trans_b = c->tb,
                             .m = m,
                             .n = n,
                             .k = k,
                             .alpha = 1.0f,
                             .beta = beta,
                             .a = dA,
                             .lda = k ? k : 1,
                             .b = dB,
                             .ldb = c->tb ? (k ? k : 1) : n,
                             .c = dC,
                             .ldc = ld,
                             .bias = c->with_bias ? dbias : (clf_ptr){NULL, 0},
                             .epi = c->res    ? CLF_GEMM_EPI_RESIDUAL
                                    : c->dact ? CLF_GEMM_EPI_TIMES_DERIV
                                    : c->act  ? CLF_GEMM_EPI_ACT
                                              : CLF_GEMM_EPI_NONE,
                             .act = c->act,
                             .d = c->act || c->res ? dD : (clf_ptr){NULL, 0},
                             .ldd = ld};
    tu_ok(gemm_by(rt, engine, &d, &e), &e, "gemm with an epilogue");
    tu_download(rt, dC, C, m * ld);
    tu_download(rt, dD, D, m * ld);
    double *rc = malloc(m * n * 8), *rd = malloc(m * n * 8);
    float *gc = malloc(m * n * 4), *gd = malloc(m * n * 4);
    int guards = 1;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < ld; j++) {
            if (j >= n) {
                guards &= C[i * ld + j] == 7.0f && D[i * ld + j] == 7.0f;
                continue;
            }
            double acc = beta * 7.0;
            for (size_t q = 0; q < k; q++)
                acc += (double)A[i * k + q] * (c->tb ? Bm[j * k + q] : Bm[q * n + j]);
            acc += c->with_bias ? bias[j] : 0.0;
            acc += c->res ? R[i * ld + j] : 0.0;
            acc *= c->dact ? tu_act_grad_ref((int)c->act, R[i * ld + j]) : 1.0;
            rc[i * n + j] = acc;
            rd[i * n + j] = tu_act_ref((int)c->act, acc);
            gc[i * n + j] = C[i * ld + j];
            gd[i * n + j] = D[i * ld + j];
        }
    char name[160];
    const double atol = 1e-5 * sqrt((double)(k ? k : 1)) + 1e-6;
    snprintf(name, sizeof name,
             "%s epilogue act=%d%s bias=%d residual=%d m=%zu n=%zu k=%zu tb=%d C", engine,
             (int)c->act, c->dact ? "'" : "", c->with_bias, c->res, m, n, k, c->tb);
    tu_close(name, gc, rc, m * n, atol, 1e-4);
    if (reads_d)
        TU_CHECK(memcmp(D, R, m * ld * 4) == 0, "%s: D (read) unchanged", name);
    if (c->act && !c->dact) {
        name[strlen(name) - 1] = 'D';
        tu_close(name, gd, rd, m * n, atol, 1e-4);
    }
    TU_CHECK(guards, "%s: columns past n untouched in C and D", name);
    tu_free(dA);
    tu_free(dB);
    tu_free(dbias);
    tu_free(dC);
    tu_free(dD);
    free(A);
    free(Bm);
    free(bias);
    free(C);
    free(D);
    free(R);
    free(rc);
    free(rd);
    free(gc);
    free(gd);
}

/* Epilogue descriptors the GEMM refuses, and one it takes. */
static void epilogue_refusals(clf_runtime *rt, const char *engine)
{
    clf_error e;
    clf_gemm_desc bad = {0};
    clf_ptr x = tu_alloc(rt, 64);
    bad.m = bad.n = bad.k = 4;
    bad.a = bad.b = bad.c = x;
    bad.lda = bad.ldb = bad.ldc = 4;
    bad.alpha = 1.0f;
    bad.epi = CLF_GEMM_EPI_ACT;
    bad.act = CLF_GEMM_ACT_RELU;
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG, "an activation without D is refused: %s",
             e.msg);
    bad.epi = CLF_GEMM_EPI_NONE;
    bad.act = CLF_GEMM_ACT_NONE;
    bad.bias = x;
    bad.batch = 2;
    bad.stride_a = bad.stride_b = 0;
    bad.stride_c = 16;
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG, "an epilogue on a batch is refused: %s",
             e.msg);
    bad.bias = (clf_ptr){NULL, 0};
    bad.epi = CLF_GEMM_EPI_RESIDUAL;
    bad.d = clf_ptr_at(x, 32);
    bad.ldd = 4;
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG, "a residual on a batch is refused: %s",
             e.msg);
    bad.batch = 0;
    bad.d = (clf_ptr){NULL, 0};
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "residual") != NULL,
             "a residual without D is refused: %s", e.msg);
    bad.d = clf_ptr_at(x, 13);
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "overlaps") != NULL,
             "a residual D overlapping C is refused: %s", e.msg);
    bad.d = clf_ptr_at(x, 32);
    bad.act = CLF_GEMM_ACT_RELU;
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "takes none") != NULL,
             "a residual given an activation is refused: %s", e.msg);
    bad.epi = CLF_GEMM_EPI_TIMES_DERIV;
    bad.d = clf_ptr_at(x, 13);
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "overlaps") != NULL,
             "an activation's derivative at a D overlapping C is refused: %s", e.msg);
    bad.act = CLF_GEMM_ACT_NONE;
    bad.d = clf_ptr_at(x, 32);
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "missing") != NULL,
             "an activation's derivative without the activation is refused: %s", e.msg);
    bad.epi = CLF_GEMM_EPI_RESIDUAL;
    bad.a = clf_ptr_at(x, 48);
    bad.b = clf_ptr_at(x, 48);
    tu_ok(gemm_by(rt, engine, &bad, &e), &e, "a residual D beside C");
    tu_free(x);
}

/* Epilogues (bias, bias + activation into D, a residual D added, an
 * activation's derivative at D multiplied in; the last two with or without
 * bias) at shapes that take every native path (row blocks with edges, the
 * deep-K slices, the few-rows dot kernel, k = 0) on `engine` (epilogue_case;
 * the activations' slopes and derivatives are at most 1.13 in size), and
 * the descriptors it refuses. */
static void test_epilogue(clf_runtime *rt, const char *engine, int light, tu_rng *r)
{
    static const size_t shapes[][4] = {
        /* m, n, k, trans_b */
        {1, 1, 1, 0},   {7, 13, 5, 0},  {33, 65, 17, 1},   {3, 70, 64, 1},
        {1, 37, 64, 1}, {100, 1, 3, 0}, {64, 96, 2000, 0}, {5, 9, 0, 0},
    };
    const clf_gemm_act acts[] = {CLF_GEMM_ACT_NONE, CLF_GEMM_ACT_RELU, CLF_GEMM_ACT_GELU_ERF,
                                 CLF_GEMM_ACT_GELU_TANH, CLF_GEMM_ACT_SILU};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        /* mode 0-4: activation acts[mode] into D; 5: a residual; 6-9: the
         * derivative of acts[mode - 5] */
        for (int mode = 0; mode < 10; mode++)
            for (int with_bias = 0; with_bias < 2; with_bias++) {
                const int res = mode == 5, dact = mode > 5, ai = dact ? mode - 5 : res ? 0 : mode;
                const epi_case c = {shapes[si][0], shapes[si][1], shapes[si][2], (int)shapes[si][3],
                                    res,           dact,          with_bias,     acts[ai]};
                const int reads_d = res || dact;
                if (c.act == CLF_GEMM_ACT_NONE && !with_bias && !res)
                    continue;
                if (tu_simulator() && c.m * c.n * c.k > 20000)
                    continue;
                if (light &&
                    (c.m * c.n * c.k > 2000 || (c.act != CLF_GEMM_ACT_GELU_ERF && c.act != 0) ||
                     (reads_d && !with_bias)))
                    continue;
                epilogue_case(rt, engine, r, &c);
            }
    epilogue_refusals(rt, engine);
}

/* Split-K, forced through the runtime option (the device's choice splits
 * only products whose output cannot fill the device): P = 2, 3, 5 slices
 * at every transpose, odd M and N, K a multiple of P (60, 1200), alpha and
 * beta, against float64 (run_case); reruns bit-identical; with an
 * epilogue; a P that does not divide K falls back to no split. */
/* Every native configuration the device lists (the search's and the
 * others: a CPU still checks the GPU-shaped tiled ones, and the reverse),
 * through its name; then "native", the default, through clf_gemm_with. A
 * name the device does not list is refused. */
/* Which configurations this run tests (index c of clf_gemm_candidates'
 * list, 1 .. count - 1). A classic register block and its k-blocked forms
 * (the same "r<mr>v<vw>x<nv>" before a 'k') stay in one part, since
 * test_kblocked compares them; the blocks are dealt in list order, each to
 * the part holding the fewest configurations so far. */
typedef struct parts {
    size_t part, n; /* this run: part `part` (0-based) of `n` */
    unsigned char of[CLF_GEMM_MAX_CANDIDATES + 1];
} parts;

static size_t block_len(const char *name)
{
    const char *k = strchr(name, 'k');
    return k != NULL ? (size_t)(k - name) : strlen(name);
}

static parts parts_make(clf_runtime *rt, size_t part, size_t n)
{
    parts ps = {.part = part, .n = n};
    const char *const *names = NULL;
    size_t count = 0, size[64] = {0};
    clf_error err;
    tu_ok(clf_gemm_candidates(rt, &names, &count, NULL, &err), &err, "candidates");
    for (size_t c = 1; c < count && c <= CLF_GEMM_MAX_CANDIDATES; c++) {
        size_t j = 1;
        while (j < c && !(block_len(names[j]) == block_len(names[c]) &&
                          strncmp(names[j], names[c], block_len(names[c])) == 0))
            j++;
        if (j < c) { /* a block already dealt */
            ps.of[c] = ps.of[j];
        } else {
            size_t best = 0;
            for (size_t q = 1; q < n && q < 64; q++)
                best = size[q] < size[best] ? q : best;
            ps.of[c] = (unsigned char)best;
        }
        size[ps.of[c]]++;
    }
    return ps;
}

static int in_part(const parts *ps, size_t c)
{
    return c > CLF_GEMM_MAX_CANDIDATES || ps->of[c] == ps->part;
}

static void test_configs(clf_runtime *rt, const parts *ps, tu_rng *r)
{
    const char *const *names = NULL;
    size_t count = 0, n_search = 0;
    clf_error err;
    tu_ok(clf_gemm_candidates(rt, &names, &count, &n_search, &err), &err, "candidates");
    TU_CHECK(count >= 2 && strcmp(names[0], "clblast") == 0 && n_search >= 2 && n_search <= count &&
                 names[count] == NULL,
             "candidates: clblast and %zu native configurations, %zu searched", count - 1,
             n_search - 1);
    for (size_t c = 1; c < count; c++) {
        if (!in_part(ps, c))
            continue;
        /* in full: the configurations the search may pick here (under the
         * simulator only the first, the default); the rest lightly (their
         * kernel is a searched configuration's with other tile sizes, and
         * on a device that would not pick them it may be slow) */
        const int light = tu_simulator() ? c > 1 : c >= n_search;
        if (!tu_gemm_config_runs(rt, names[c])) {
            TU_CHECK(c > 1, "the first configuration (the default) runs: %s", names[c]);
            continue;
        }
        printf("configuration %s%s\n", names[c], c < n_search ? " (searched)" : "");
        test_engine(rt, names[c], light, r);
        test_epilogue(rt, names[c], light, r);
        test_stored_derivative(rt, names[c], light, r);
    }
    if (ps->part + 1 < ps->n)
        return;
    test_engine(rt, "native", 1, r);
    gcase g = {.m = 3, .n = 3, .k = 3, .batch = 1, .alpha = 1.0f};
    const glayout L = layout_of(&g);
    clf_ptr p = tu_alloc(rt, L.total);
    clf_gemm_desc d = desc_of(&g, &L, p.buf);
    TU_CHECK(clf_gemm_with_config(rt, "r99v3x1", &d, &err) == CLF_ERR_ARG &&
                 strstr(err.msg, "r99v3x1") != NULL,
             "an unknown configuration is refused by name (%s)", err.msg);
    tu_free(p);
}

/* Each k-blocked configuration (r<mr>v<vw>x<nv>k<kb>b<rb>) against its
 * classic sibling r<mr>v<vw>x<nv>, which the device lists beside it: bit
 * for bit (the k-blocked order sums every element as the classic one, k
 * ascending into one accumulator, parking it between k-blocks), at every
 * transpose with a partial last k-block, several row groups and a partial
 * one, a column edge, alpha, beta and a batch. Both ran against float64 in
 * test_configs. */
static void test_kblocked(clf_runtime *rt, const parts *ps, tu_rng *r)
{
    const char *const *names = NULL;
    size_t count = 0, n_search = 0;
    clf_error err;
    tu_ok(clf_gemm_candidates(rt, &names, &count, &n_search, &err), &err, "candidates");
    const int sim = tu_simulator();
    for (size_t c = 1; c < count; c++) {
        const char *kb = strchr(names[c], 'k');
        if (names[c][0] != 'r' || kb == NULL || !in_part(ps, c))
            continue;
        char sib[64];
        snprintf(sib, sizeof sib, "%.*s", (int)(kb - names[c]), names[c]);
        int listed = 0;
        for (size_t j = 1; j < count; j++)
            listed |= strcmp(names[j], sib) == 0;
        TU_CHECK(listed, "k-blocked %s: its classic sibling %s is listed", names[c], sib);
        if (!listed)
            continue;
        printf("k-blocked %s against %s, bit for bit\n", names[c], sib);
        for (int t = 0; t < 4; t++) {
            gcase g = {.ta = t & 1,
                       .tb = t >> 1,
                       .m = sim ? 40 : 400,
                       .n = sim ? 21 : 70,
                       .k = sim ? 150 : 300,
                       .batch = 2,
                       .pad = 1,
                       .alpha = 0.75f,
                       .beta = t == 1 ? 0.0f : 0.5f};
            const glayout L = layout_of(&g);
            float *host = malloc(L.total * sizeof(float));
            float *got = malloc(L.total * sizeof(float));
            float *want = malloc(L.total * sizeof(float));
            if (host == NULL || got == NULL || want == NULL) {
                fprintf(stderr, "FATAL: out of memory\n");
                exit(1);
            }
            tu_fill(r, host, L.total, -1.0f, 1.0f);
            gemm_once(rt, names[c], 0, &g, &L, host, got);
            gemm_once(rt, sib, 0, &g, &L, host, want);
            size_t diff = 0;
            for (size_t i = 0; i < L.total; i++)
                diff += memcmp(&got[i], &want[i], sizeof(float)) != 0;
            TU_CHECK(diff == 0, "%s %c%c %zux%zux%zu b2: %zu elements differ from %s", names[c],
                     g.ta ? 'T' : 'N', g.tb ? 'T' : 'N', g.m, g.n, g.k, diff, sib);
            free(host);
            free(got);
            free(want);
        }
    }
}

/* One configuration (who) on a runtime with P forced. */
static void split_case(clf_runtime *rt, const char *who, size_t P, tu_rng *r)
{
    const int sim = tu_simulator();
    clf_error err;
    printf("split-K, P = %zu, %s\n", P, who);
    for (int t = 0; t < 4; t++) {
        gcase g = {.ta = t & 1,
                   .tb = t >> 1,
                   .m = sim ? 13 : 37,
                   .n = sim ? 11 : 129,
                   .k = 60,
                   .batch = 1,
                   .pad = 1,
                   .alpha = 1.5f,
                   .beta = 0.5f};
        run_case(rt, who, &g, r);
        if (!sim) {
            g.k = 1200;
            g.m = 70;
            g.n = 33;
            g.beta = 0.0f;
            run_case(rt, who, &g, r);
        }
    }
    /* reruns bit-identical; an epilogue after the reduction */
    const size_t m = 29, n = 51, k = 120;
    float *a = malloc(m * k * 4), *b = malloc(k * n * 4), *bias = malloc(n * 4);
    float *c1 = malloc(m * n * 4), *c2 = malloc(m * n * 4), *dd = malloc(m * n * 4);
    tu_fill(r, a, m * k, -1, 1);
    tu_fill(r, b, k * n, -1, 1);
    tu_fill(r, bias, n, -1, 1);
    clf_ptr da = tu_upload(rt, a, m * k), db = tu_upload(rt, b, k * n);
    clf_ptr dbias = tu_upload(rt, bias, n), dc = tu_alloc(rt, m * n), dd_ = tu_alloc(rt, m * n);
    clf_gemm_desc d = {.trans_a = 1,
                       .m = m,
                       .n = n,
                       .k = k,
                       .alpha = 1.0f,
                       .a = da,
                       .lda = m,
                       .b = db,
                       .ldb = n,
                       .c = dc,
                       .ldc = n,
                       .bias = dbias,
                       .epi = CLF_GEMM_EPI_ACT,
                       .act = CLF_GEMM_ACT_GELU_ERF,
                       .d = dd_,
                       .ldd = n};
    tu_ok(clf_runtime_finish(rt, &err), &err, "finish");
    clf_profile_entry *pe = NULL;
    int npe = 0;
    size_t before = 0, after = 0;
    tu_ok(clf_profile_report(rt, &pe, &npe, &err), &err, "profile");
    for (int i = 0; i < npe; i++)
        if (strcmp(pe[i].name, "gemm_splitk_reduce") == 0)
            before = (size_t)pe[i].count;
    free(pe);
    tu_ok(gemm_by(rt, who, &d, &err), &err, "split gemm");
    tu_download(rt, dc, c1, m * n);
    tu_download(rt, dd_, dd, m * n);
    tu_ok(gemm_by(rt, who, &d, &err), &err, "split gemm again");
    tu_download(rt, dc, c2, m * n);
    TU_CHECK(memcmp(c1, c2, m * n * 4) == 0, "split-K P=%zu %s: reruns bit-identical", P, who);
    tu_ok(clf_profile_report(rt, &pe, &npe, &err), &err, "profile");
    for (int i = 0; i < npe; i++)
        if (strcmp(pe[i].name, "gemm_splitk_reduce") == 0)
            after = (size_t)pe[i].count;
    free(pe);
    TU_CHECK(after == before + 2,
             "split-K P=%zu %s: the products ran split (gemm_splitk_reduce launched)", P, who);
    double *rc = malloc(m * n * 8), *rd = malloc(m * n * 8);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double acc = bias[j];
            for (size_t q = 0; q < k; q++)
                acc += (double)a[q * m + i] * b[q * n + j];
            rc[i * n + j] = acc;
            rd[i * n + j] = tu_act_ref((int)CLF_GEMM_ACT_GELU_ERF, acc);
        }
    char name[96];
    snprintf(name, sizeof name, "split-K P=%zu %s TN with bias + GELU: C", P, who);
    tu_close(name, c1, rc, m * n, 1e-4, 1e-4);
    snprintf(name, sizeof name, "split-K P=%zu %s TN with bias + GELU: D", P, who);
    tu_close(name, dd, rd, m * n, 1e-4, 1e-4);
    /* bias + a residual after the reduction: D (fresh values) added */
    tu_fill(r, dd, m * n, -2, 2);
    tu_ok(clf_ptr_write(rt, dd_, dd, m * n, &err), &err, "residual");
    d.epi = CLF_GEMM_EPI_RESIDUAL;
    d.act = CLF_GEMM_ACT_NONE;
    tu_ok(gemm_by(rt, who, &d, &err), &err, "split gemm with a residual");
    tu_download(rt, dc, c1, m * n);
    for (size_t i = 0; i < m * n; i++)
        rc[i] += dd[i];
    snprintf(name, sizeof name, "split-K P=%zu %s TN with bias + residual: C", P, who);
    tu_close(name, c1, rc, m * n, 1e-4, 1e-4);
    tu_free(da);
    tu_free(db);
    tu_free(dbias);
    tu_free(dc);
    tu_free(dd_);
    free(a);
    free(b);
    free(bias);
    free(c1);
    free(c2);
    free(dd);
    free(rc);
    free(rd);
    /* K = 61 is prime: no P divides it, the product runs unsplit */
    gcase g = {.ta = 1, .tb = 0, .m = 9, .n = 17, .k = 61, .batch = 1, .alpha = 1.0f};
    run_case(rt, who, &g, r);
}

/* Split-K, forced through the runtime option (the device's choice splits
 * only products whose output cannot fill the device): P = 2, 3, 5 slices
 * on every native configuration, at every transpose, odd M and N, K a
 * multiple of P (60, 1200), alpha and beta, against float64 (run_case);
 * reruns bit-identical; with an epilogue (bias + GELU, bias + residual); a
 * P that does not divide K falls back to no split. */
static void test_split_k(const parts *ps, tu_rng *r)
{
    const size_t Ps[] = {2, 3, 5};
    for (int pi = 0; pi < 3; pi++) {
        clf_runtime_options o = tu_options();
        o.cache_dir = getenv("CLFORMER_CACHE_DIR"); /* compiled kernels */
        o.gemm = CLF_GEMM_NATIVE;
        o.gemm_split_k = Ps[pi];
        o.profile = 1; /* to see that the reduction ran */
        clf_runtime *rt = NULL;
        clf_error err;
        tu_ok(clf_runtime_create(&rt, &o, &err), &err, "runtime with split-K");
        const char *const *names = NULL;
        size_t count = 0;
        /* the configurations the search may pick (under the simulator the
         * default only) */
        size_t n_search = 0;
        tu_ok(clf_gemm_candidates(rt, &names, &count, &n_search, &err), &err, "candidates");
        for (size_t c = 1; c < (tu_simulator() ? 2 : n_search); c++)
            if (in_part(ps, c))
                split_case(rt, names[c], Ps[pi], r);
        clf_runtime_destroy(rt);
    }
}

int main(int argc, char **argv)
{
    unsigned part = 1, n = 1;
    if (argc > 2 || (argc == 2 && (sscanf(argv[1], "%u/%u", &part, &n) != 2 || n < 1 || n > 64 ||
                                   part < 1 || part > n))) {
        fprintf(stderr, "usage: test_gemm [K/N] (the K-th of N parts)\n");
        return 2;
    }
    clf_runtime *rt = tu_runtime();
    tu_rng r = tu_rng_new(2);
    const parts ps = parts_make(rt, part - 1, n);
    test_configs(rt, &ps, &r);
    test_kblocked(rt, &ps, &r);
    test_split_k(&ps, &r);
    if (part < n) { /* the rest in the last part */
        clf_runtime_destroy(rt);
        return tu_finish();
    }
    test_validation(rt);
    /* CLBlast's kernels are not ours to check under a simulator (and slow there) */
    if (!tu_simulator()) {
        test_engine(rt, "clblast", 0, &r);
        test_epilogue(rt, "clblast", 0, &r);
        test_stored_derivative(rt, "clblast", 0, &r);
    }
    printf("engine auto (clf_gemm with the runtime's options)\n");
    const int sim = tu_simulator();
    for (int t = 0; t < 4; t++) {
        gcase g = {.ta = t & 1,
                   .tb = t >> 1,
                   .m = sim ? 37 : 257,
                   .n = sim ? 29 : 129,
                   .k = sim ? 23 : 63,
                   .batch = 1,
                   .pad = 1,
                   .alpha = 1.5f,
                   .beta = 0.5f};
        run_case(rt, "auto", &g, &r);
        gcase b = {.ta = t & 1,
                   .tb = t >> 1,
                   .m = 32,
                   .n = 32,
                   .k = 16,
                   .batch = 8,
                   .alpha = 0.125f,
                   .beta = 0.0f};
        run_case(rt, "auto", &b, &r);
    }
    printf("clf_gemm_prepare, then the call\n");
    {
        gcase g = {.ta = 1,
                   .m = sim ? 30 : 130,
                   .n = sim ? 20 : 70,
                   .k = 45,
                   .batch = 2,
                   .pad = 1,
                   .alpha = 1.0f,
                   .beta = 0.5f};
        const glayout L = layout_of(&g);
        clf_ptr p = tu_alloc(rt, L.total);
        clf_gemm_desc d = desc_of(&g, &L, p.buf);
        clf_error err;
        TU_CHECK(clf_gemm_prepare(rt, &d, &err) == CLF_OK, "clf_gemm_prepare succeeds");
        d.lda = 1;
        TU_CHECK(clf_gemm_prepare(rt, &d, &err) == CLF_ERR_ARG, "clf_gemm_prepare validates");
        tu_free(p);
        run_case(rt, "auto", &g, &r);
    }
    clf_runtime_destroy(rt);
    return tu_finish();
}
