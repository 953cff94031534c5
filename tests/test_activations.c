/*
 * test_activations.c - ReLU, GELU (erf and tanh forms), SiLU: forward and
 * backward on the device against float64 references.
 *
 * What is checked
 * - The float64 references are the textbook formulas: GELU erf form
 *   0.5 x (1 + erf(x / sqrt 2)); tanh form 0.5 x (1 + tanh(sqrt(2/pi)
 *   (x + 0.044715 x^3))); SiLU x / (1 + exp(-x)); ReLU max(x, 0).
 * - The float64 derivative references are checked against central finite
 *   differences of the float64 forward references (h = 1e-5, |error| <=
 *   1e-7 + 1e-6 |d|), away from ReLU's kink.
 * - Device forward (the GEMM epilogue the model computes activations in)
 *   and backward (overwrite and accumulate) against those references at
 *   n = 1, 7, 33, 257, 1000, 100003 with inputs in [-6, 6] plus special
 *   values (0, +-1e-8, +-20, +-50, +-100): atol 2e-6, rtol 1e-5.
 * - Outputs are surrounded by guard zones that must stay untouched.
 * - Overwrite mode must not read the old gradient (prefilled with NaN), and
 *   CLF_ACT_NONE's backward is the identity.
 * Under a simulator (tu_simulator) n = 100003 is left out (1000 is already
 * several work-groups and GEMM tiles, with a tail).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ops/ops.h"
#include "runtime/gemm/gemm.h"
#include "tests/test_util.h"

static const clf_act ACTS[] = {CLF_ACT_RELU, CLF_ACT_GELU_ERF, CLF_ACT_GELU_TANH, CLF_ACT_SILU};
static const char *const ACT_NAMES[] = {"none", "relu", "gelu_erf", "gelu_tanh", "silu"};

/* float64 derivative references against central differences of the forward. */
static void check_reference_grads(void)
{
    tu_rng rng = tu_rng_new(1);
    for (size_t ai = 0; ai < sizeof ACTS / sizeof ACTS[0]; ai++) {
        clf_act a = ACTS[ai];
        double worst = 0.0, at = 0.0;
        int bad = 0;
        for (int i = 0; i < 2000; i++) {
            double x = tu_uniform(&rng, -8.0, 8.0);
            if (a == CLF_ACT_RELU && fabs(x) < 1e-3)
                continue;
            const double h = 1e-5;
            double fd = (tu_act_ref((int)a, x + h) - tu_act_ref((int)a, x - h)) / (2.0 * h);
            double d = tu_act_grad_ref((int)a, x);
            double e = fabs(fd - d);
            if (e > 1e-7 + 1e-6 * fabs(d))
                bad++;
            if (e > worst) {
                worst = e;
                at = x;
            }
        }
        TU_CHECK(bad == 0, "%s: float64 derivative vs central differences (worst %.2e at x=%.4f)",
                 ACT_NAMES[a], worst, at);
    }
}

static void fill_inputs(tu_rng *rng, float *x, size_t n)
{
    static const float special[] = {0.0f,  1e-8f,  -1e-8f, 20.0f,  -20.0f,
                                    50.0f, -50.0f, 100.0f, -100.0f};
    tu_fill(rng, x, n, -6.0f, 6.0f);
    if (n >= 100)
        memcpy(x + n / 2, special, sizeof special);
}

/* out = act(in) over n floats, as the model computes activations: in the
 * GEMM's epilogue (a 1 x n product of depth 0 with beta 1 leaves C = in,
 * then D = act(C)). */
static clf_status act_forward(clf_runtime *rt, clf_act a, clf_ptr out, clf_ptr in, size_t n,
                              clf_error *err)
{
    const clf_gemm_desc d = {.m = 1,
                             .n = n,
                             .k = 0,
                             .alpha = 1.0f,
                             .beta = 1.0f,
                             .a = in,
                             .lda = 1,
                             .b = in,
                             .ldb = n,
                             .c = in,
                             .ldc = n,
                             .epi = CLF_GEMM_EPI_ACT,
                             .act = (clf_gemm_act)a,
                             .d = out,
                             .ldd = n};
    return clf_gemm(rt, &d, err);
}

static void check_device(clf_runtime *rt, clf_act a, size_t n, tu_rng *rng)
{
    clf_error err;
    float *x = malloc(n * sizeof *x), *dout = malloc(n * sizeof *dout);
    float *old = malloc(n * sizeof *old), *got = malloc(n * sizeof *got);
    double *ref = malloc(n * sizeof *ref);
    fill_inputs(rng, x, n);
    tu_fill(rng, dout, n, -2.0f, 2.0f);
    tu_fill(rng, old, n, -1.0f, 1.0f);
    clf_ptr dx = tu_upload(rt, x, n), ddout = tu_upload(rt, dout, n);
    clf_ptr dy = tu_guarded(rt, NULL, n), dold = tu_guarded(rt, old, n);
    char name[96];

    tu_ok(act_forward(rt, a, dy, dx, n, &err), &err, "act_forward");
    tu_download(rt, dy, got, n);
    for (size_t i = 0; i < n; i++)
        ref[i] = tu_act_ref((int)a, x[i]);
    snprintf(name, sizeof name, "%s forward n=%zu", ACT_NAMES[a], n);
    tu_close(name, got, ref, n, 2e-6, 1e-5);

    /* overwrite: din prefilled with NaN must not leak through */
    float *nan = malloc(n * sizeof *nan);
    for (size_t i = 0; i < n; i++)
        nan[i] = NAN;
    clf_ptr ddin = tu_guarded(rt, nan, n);
    tu_ok(clf_op_act_backward(rt, a, ddin, ddout, dx, n, 0, &err), &err, "act_backward");
    tu_download(rt, ddin, got, n);
    for (size_t i = 0; i < n; i++)
        ref[i] = (double)dout[i] * tu_act_grad_ref((int)a, x[i]);
    snprintf(name, sizeof name, "%s backward n=%zu", ACT_NAMES[a], n);
    tu_close(name, got, ref, n, 2e-6, 1e-5);

    tu_ok(clf_op_act_backward(rt, a, dold, ddout, dx, n, 1, &err), &err, "act_backward acc");
    tu_download(rt, dold, got, n);
    for (size_t i = 0; i < n; i++)
        ref[i] = (double)old[i] + (double)dout[i] * tu_act_grad_ref((int)a, x[i]);
    snprintf(name, sizeof name, "%s backward accumulate n=%zu", ACT_NAMES[a], n);
    tu_close(name, got, ref, n, 2e-6, 1e-5);
    TU_CHECK(tu_guard_intact(rt, dy, n) && tu_guard_intact(rt, ddin, n) &&
                 tu_guard_intact(rt, dold, n),
             "%s n=%zu: guard zones intact", ACT_NAMES[a], n);

    tu_free(ddin);
    free(nan);
    tu_free(dx);
    tu_free(ddout);
    tu_free(dy);
    tu_free(dold);
    free(x);
    free(dout);
    free(old);
    free(got);
    free(ref);
}

/* The identity's backward, and both GELU forms being close to each other. */
static void check_misc(clf_runtime *rt, tu_rng *rng)
{
    clf_error err;
    const size_t n = 513;
    float x[513], got[513];
    double ref[513];
    tu_fill(rng, x, n, -4.0f, 4.0f);
    clf_ptr src = tu_upload(rt, x, n);
    float ones[513];
    for (size_t i = 0; i < n; i++)
        ones[i] = 1.0f;
    clf_ptr g = tu_upload(rt, ones, n);
    tu_ok(clf_op_act_backward(rt, CLF_ACT_NONE, g, src, src, n, 1, &err), &err, "none bwd");
    tu_download(rt, g, got, n);
    for (size_t i = 0; i < n; i++)
        ref[i] = 1.0 + x[i];
    tu_close("none backward accumulate", got, ref, n, 1e-6, 1e-6);

    double worst = 0.0;
    for (double v = -5.0; v <= 5.0; v += 0.01)
        worst = fmax(worst, fabs(tu_act_ref((int)CLF_ACT_GELU_ERF, v) -
                                 tu_act_ref((int)CLF_ACT_GELU_TANH, v)));
    TU_CHECK(worst > 1e-5 && worst < 1e-3,
             "gelu erf and tanh forms differ by %.2e (expected "
             "a few 1e-4)",
             worst);
    tu_free(src);
    tu_free(g);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng rng = tu_rng_new(2);
    check_reference_grads();
    static const size_t sizes[] = {1, 7, 33, 257, 1000, 100003};
    for (size_t ai = 0; ai < sizeof ACTS / sizeof ACTS[0]; ai++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
            if (!tu_simulator() || sizes[si] <= 1000)
                check_device(rt, ACTS[ai], sizes[si], &rng);
    check_misc(rt, &rng);
    clf_runtime_destroy(rt);
    return tu_finish();
}
