/*
 * test_elementwise.c - add, zero, axpy, residual, the bias gradient, SwiGLU
 * forward and backward, against float64 references.
 *
 * What is checked (tolerances |got - ref| <= atol + rtol |ref|)
 * - ema (decay 0.9 against float64 with atol 1e-6, rtol 4e-7; decay 0 a
 *   bit-exact copy) and swap (bit-exact both ways), same sizes and guards.
 * - add / residual / axpy at n = 1, 7, 33, 257, 1000, 100003, at
 *   nonzero element offsets, and add with out aliasing an input:
 *   atol 1e-7, rtol 2e-7 (one float rounding); zero from offset 1 exactly
 *   +0.0, the element before it untouched.
 * - bias_backward (column sums), both kernel variants, overwrite and
 *   accumulate, at 1x1, 3x5, 17x129, 64x768, 9x95, 1000x33: atol 4e-6 * (largest
 *   column sum of |d|), rtol 0. Two runs give bit-identical results. The
 *   same from d stored as bf16 and f16 at an odd offset (the reference sums
 *   the stored 16-bit values).
 * - Every output is surrounded by guard zones that must stay untouched.
 * - SwiGLU forward/backward at R x H = 1x1, 3x5, 17x129, 64x768, 9x95: atol 2e-6,
 *   rtol 1e-5. The float64 backward reference is checked against central
 *   finite differences of the float64 forward (h = 1e-6, 1e-7 + 1e-6 |d|).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/io/safetensors.h"
#include "model/ops/ops.h"
#include "model/ops/ops_internal.h"
#include "tests/test_util.h"

static const size_t SIZES[] = {1, 7, 33, 257, 1000, 100003};
static const size_t SHAPES[][2] = {{1, 1}, {3, 5}, {17, 129}, {64, 768}, {9, 95}, {1000, 33}};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

static float *rnd(tu_rng *r, size_t n, float lo, float hi)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    tu_fill(r, x, n, lo, hi);
    return x;
}

static void check_basic(clf_runtime *rt, size_t n, tu_rng *rng)
{
    clf_error err;
    char name[96];
    float *a = rnd(rng, n, -3, 3), *b = rnd(rng, n, -3, 3), *got = malloc(n * sizeof *got);
    double *ref = malloc(n * sizeof *ref);
    clf_ptr da = tu_guarded(rt, a, n), db = tu_guarded(rt, b, n), dout = tu_guarded(rt, a, n);

    tu_ok(clf_op_add(rt, dout, da, db, n, &err), &err, "add");
    tu_download(rt, dout, got, n);
    for (size_t i = 0; i < n; i++)
        ref[i] = (double)a[i] + b[i];
    snprintf(name, sizeof name, "add n=%zu", n);
    tu_close(name, got, ref, n, 1e-7, 2e-7);

    tu_ok(clf_op_residual(rt, dout, db, da, n, &err), &err, "residual");
    tu_download(rt, dout, got, n);
    snprintf(name, sizeof name, "residual n=%zu", n);
    tu_close(name, got, ref, n, 1e-7, 2e-7);

    /* zero from element 1 on: element 0 keeps the sum */
    const float kept = got[0];
    tu_ok(clf_op_zero(rt, clf_ptr_at(dout, 1), n - 1, &err), &err, "zero");
    tu_download(rt, dout, got, n);
    int zeros = got[0] == kept;
    for (size_t i = 1; i < n; i++)
        zeros &= got[i] == 0.0f && !signbit(got[i]);
    TU_CHECK(zeros, "zero n=%zu at offset 1: +0.0 everywhere, element 0 untouched", n - 1);

    /* y += a x with y = b */
    tu_ok(clf_op_axpy(rt, db, 0.3f, da, n, &err), &err, "axpy");
    tu_download(rt, db, got, n);
    for (size_t i = 0; i < n; i++)
        ref[i] = (double)b[i] + (double)0.3f * a[i];
    snprintf(name, sizeof name, "axpy n=%zu", n);
    tu_close(name, got, ref, n, 1e-7, 4e-7);

    /* out aliasing a: a = a + a */
    tu_ok(clf_op_add(rt, da, da, da, n, &err), &err, "add aliased");
    tu_download(rt, da, got, n);
    for (size_t i = 0; i < n; i++)
        ref[i] = 2.0 * a[i];
    snprintf(name, sizeof name, "add in place n=%zu", n);
    tu_close(name, got, ref, n, 0.0, 0.0);

    /* the moving average: e = b + 0.1 (a - b) with decay 0.9 (e = b), then
     * decay 0 copies a exactly; swap exchanges a and e bit for bit */
    const float *cur = a;
    float *e0 = malloc(n * sizeof *e0);
    tu_download(rt, db, e0, n);
    tu_download(rt, da, got, n);
    memcpy(a, got, n * sizeof *a); /* da holds 2a now */
    tu_ok(clf_op_ema(rt, db, da, 0.9f, n, &err), &err, "ema");
    tu_download(rt, db, got, n);
    for (size_t i = 0; i < n; i++)
        ref[i] = (double)e0[i] + (double)(1.0f - 0.9f) * ((double)cur[i] - e0[i]);
    snprintf(name, sizeof name, "ema decay 0.9 n=%zu", n);
    tu_close(name, got, ref, n, 1e-6, 4e-7);
    tu_ok(clf_op_ema(rt, db, da, 0.0f, n, &err), &err, "ema copy");
    tu_download(rt, db, got, n);
    TU_CHECK(memcmp(got, cur, n * sizeof *got) == 0, "ema decay 0 n=%zu: a copy, bit for bit", n);
    tu_ok(clf_op_ema(rt, db, da, 0.5f, n, &err), &err, "ema at a = e"); /* e = a: stays */
    tu_ok(clf_op_add(rt, dout, da, da, n, &err), &err, "add for swap");
    tu_ok(clf_op_swap(rt, da, dout, n, &err), &err, "swap");
    tu_download(rt, da, got, n);
    int swapped = 1;
    for (size_t i = 0; i < n; i++)
        swapped &= got[i] == 2.0f * cur[i];
    tu_download(rt, dout, got, n);
    swapped &= memcmp(got, cur, n * sizeof *got) == 0;
    TU_CHECK(swapped, "swap n=%zu: both sides exchanged bit for bit", n);
    TU_CHECK(clf_op_ema(rt, db, da, 1.0f, n, &err) == CLF_ERR_ARG, "ema: decay 1 refused");
    free(e0);
    TU_CHECK(tu_guard_intact(rt, dout, n) && tu_guard_intact(rt, da, n) &&
                 tu_guard_intact(rt, db, n),
             "add/zero/axpy/ema/swap n=%zu: guard zones intact", n);

    tu_free(da);
    tu_free(db);
    tu_free(dout);
    free(a);
    free(b);
    free(got);
    free(ref);
}

static void check_bias_backward(clf_runtime *rt, clf_ops_path path, size_t R, size_t N, tu_rng *rng)
{
    clf_error err;
    char name[128];
    const char *pn = path == CLF_OPS_PATH_ITEM ? "item" : "group";
    float *d = rnd(rng, R * N, -2, 2), *old = rnd(rng, N, -1, 1);
    float *got = malloc(N * sizeof *got), *got2 = malloc(N * sizeof *got2);
    double *ref = malloc(N * sizeof *ref);
    double absmax = 0.0;
    for (size_t c = 0; c < N; c++) {
        double s = 0.0, sa = 0.0;
        for (size_t r = 0; r < R; r++) {
            s += d[r * N + c];
            sa += fabs(d[r * N + c]);
        }
        ref[c] = s;
        absmax = fmax(absmax, sa);
    }
    double atol = 4e-6 * absmax;
    clf_ptr dd = tu_guarded(rt, d, R * N), db = tu_guarded(rt, old, N);

    tu_ok(clf_op_bias_backward_ex(rt, path, db, dd, CLF_DT_F32, R, N, 0, &err), &err,
          "bias_backward");
    tu_download(rt, db, got, N);
    snprintf(name, sizeof name, "bias_backward %s %zux%zu", pn, R, N);
    tu_close(name, got, ref, N, atol, 0.0);
    tu_ok(clf_op_bias_backward_ex(rt, path, db, dd, CLF_DT_F32, R, N, 0, &err), &err,
          "bias_backward");
    tu_download(rt, db, got2, N);
    TU_CHECK(memcmp(got, got2, N * sizeof *got) == 0,
             "bias_backward %s %zux%zu: two runs bit-identical", pn, R, N);
    if (path == CLF_OPS_PATH_ITEM) {
        /* the item kernel's documented order, in float32: blocks of 64 rows
         * summed, each block sum added to the total in turn */
        size_t bad = 0;
        for (size_t c = 0; c < N; c++) {
            float t = 0.0f;
            for (size_t r0 = 0; r0 < R; r0 += 64) {
                float b = 0.0f;
                for (size_t r = r0; r < R && r < r0 + 64; r++)
                    b += d[r * N + c];
                t += b;
            }
            bad += memcmp(&t, &got[c], sizeof t) != 0;
        }
        TU_CHECK(bad == 0,
                 "bias_backward item %zux%zu: the sums of 64-row blocks, in order, bit for "
                 "bit (%zu columns differ)",
                 R, N, bad);
    }

    tu_ok(clf_ptr_write(rt, db, old, N, &err), &err, "reset");
    tu_ok(clf_op_bias_backward_ex(rt, path, db, dd, CLF_DT_F32, R, N, 1, &err), &err,
          "bias_backward");
    tu_download(rt, db, got, N);
    for (size_t c = 0; c < N; c++)
        ref[c] += old[c];
    snprintf(name, sizeof name, "bias_backward %s accumulate %zux%zu", pn, R, N);
    tu_close(name, got, ref, N, atol + 1e-6, 0.0);
    TU_CHECK(tu_guard_intact(rt, db, N), "%s: guard zones intact", name);

    tu_free(dd);
    tu_free(db);
    free(d);
    free(old);
    free(got);
    free(got2);
    free(ref);
}

/* The bias gradient of a gradient stored in 16 bits (train.precision's
 * FFN hidden gradient): d rounded on the host, at an odd 2-byte offset;
 * the reference sums the 16-bit values themselves in float64, so the
 * tolerance is float32 summation's, as above. */
static void check_bias_backward16(clf_runtime *rt, clf_ops_path path, clf_dtype t, size_t R,
                                  size_t N, tu_rng *rng)
{
    clf_error err;
    char name[128];
    const size_t off = 3, n = off + R * N;
    uint16_t *d16 = malloc(n * sizeof *d16);
    float *got = malloc(N * sizeof *got);
    double *ref = calloc(N, sizeof *ref), absmax = 0.0;
    for (size_t i = 0; i < n; i++) {
        const float v = (float)tu_uniform(rng, -2.0, 2.0);
        d16[i] = t == CLF_DT_BF16 ? clf_f32_to_bf16(v) : clf_f32_to_f16(v);
    }
    for (size_t c = 0; c < N; c++) {
        double sa = 0.0;
        for (size_t r = 0; r < R; r++) {
            const uint16_t h = d16[off + r * N + c];
            const double v = t == CLF_DT_BF16 ? clf_bf16_to_f32(h) : clf_f16_to_f32(h);
            ref[c] += v;
            sa += fabs(v);
        }
        absmax = fmax(absmax, sa);
    }
    clf_buffer *b;
    tu_ok(clf_buffer_create(rt, n * 2, &b, &err), &err, "buffer");
    tu_ok(clf_buffer_write(rt, b, 0, d16, n * 2, &err), &err, "write");
    clf_ptr db = tu_alloc(rt, N);
    tu_ok(clf_op_bias_backward_ex(rt, path, db, (clf_ptr){b, off}, t, R, N, 0, &err), &err,
          "bias_backward");
    tu_download(rt, db, got, N);
    snprintf(name, sizeof name, "bias_backward %s %s %zux%zu",
             path == CLF_OPS_PATH_ITEM ? "item" : "group", clf_dtype_name(t), R, N);
    tu_close(name, got, ref, N, 4e-6 * absmax, 0.0);
    clf_buffer_destroy(b);
    tu_free(db);
    free(d16);
    free(got);
    free(ref);
}

/* ---- SwiGLU ------------------------------------------------------------------- */

static double silu(double x) { return x / (1.0 + exp(-x)); }

static void swiglu_forward_ref(double *out, const double *in, size_t R, size_t H)
{
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < H; c++)
            out[r * H + c] = silu(in[r * 2 * H + c]) * in[r * 2 * H + H + c];
}

static void swiglu_backward_ref(double *din, const double *dout, const double *in, size_t R,
                                size_t H)
{
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < H; c++) {
            double g = in[r * 2 * H + c], u = in[r * 2 * H + H + c], d = dout[r * H + c];
            double s = 1.0 / (1.0 + exp(-g));
            din[r * 2 * H + c] = d * u * s * (1.0 + g * (1.0 - s));
            din[r * 2 * H + H + c] = d * g * s;
        }
}

/* Loss L = sum(out * dout); its gradient by central differences. */
static void check_swiglu_reference(tu_rng *rng)
{
    const size_t R = 3, H = 5, n = R * 2 * H;
    double in[30], dout[15], din[30], out[15];
    for (size_t i = 0; i < n; i++)
        in[i] = tu_uniform(rng, -3, 3);
    for (size_t i = 0; i < R * H; i++)
        dout[i] = tu_uniform(rng, -1, 1);
    swiglu_backward_ref(din, dout, in, R, H);
    double worst = 0.0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const double h = 1e-6;
        double keep = in[i], lp = 0.0, lm = 0.0;
        in[i] = keep + h;
        swiglu_forward_ref(out, in, R, H);
        for (size_t j = 0; j < R * H; j++)
            lp += out[j] * dout[j];
        in[i] = keep - h;
        swiglu_forward_ref(out, in, R, H);
        for (size_t j = 0; j < R * H; j++)
            lm += out[j] * dout[j];
        in[i] = keep;
        double fd = (lp - lm) / (2 * h), e = fabs(fd - din[i]);
        worst = fmax(worst, e);
        if (e > 1e-7 + 1e-6 * fabs(din[i]))
            bad++;
    }
    TU_CHECK(bad == 0, "swiglu float64 backward vs central differences (worst %.2e)", worst);
}

static void check_swiglu(clf_runtime *rt, size_t R, size_t H, tu_rng *rng)
{
    clf_error err;
    char name[96];
    size_t n = R * 2 * H;
    float *in = rnd(rng, n, -4, 4), *dout = rnd(rng, R * H, -2, 2);
    float *got = malloc(n * sizeof *got);
    double *ind = malloc(n * sizeof *ind), *doutd = malloc(R * H * sizeof *doutd);
    double *ref = malloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++)
        ind[i] = in[i];
    for (size_t i = 0; i < R * H; i++)
        doutd[i] = dout[i];
    clf_ptr din_ = tu_guarded(rt, in, n), ddout = tu_guarded(rt, dout, R * H);
    clf_ptr dy = tu_guarded(rt, NULL, R * H), dg = tu_guarded(rt, NULL, n);

    tu_ok(clf_op_swiglu_forward(rt, dy, din_, R, H, &err), &err, "swiglu_forward");
    tu_download(rt, dy, got, R * H);
    swiglu_forward_ref(ref, ind, R, H);
    snprintf(name, sizeof name, "swiglu forward %zux%zu", R, H);
    tu_close(name, got, ref, R * H, 2e-6, 1e-5);

    tu_ok(clf_op_swiglu_backward(rt, dg, ddout, din_, R, H, &err), &err, "swiglu_backward");
    tu_download(rt, dg, got, n);
    swiglu_backward_ref(ref, doutd, ind, R, H);
    snprintf(name, sizeof name, "swiglu backward %zux%zu", R, H);
    tu_close(name, got, ref, n, 2e-6, 1e-5);
    TU_CHECK(tu_guard_intact(rt, dy, R * H) && tu_guard_intact(rt, dg, n),
             "swiglu %zux%zu: guard zones intact", R, H);

    tu_free(din_);
    tu_free(ddout);
    tu_free(dy);
    tu_free(dg);
    free(in);
    free(dout);
    free(got);
    free(ind);
    free(doutd);
    free(ref);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng rng = tu_rng_new(3);
    for (size_t i = 0; i < sizeof SIZES / sizeof SIZES[0]; i++)
        check_basic(rt, SIZES[i], &rng);
    for (size_t s = 0; s < NSHAPES; s++) {
        check_bias_backward(rt, CLF_OPS_PATH_ITEM, SHAPES[s][0], SHAPES[s][1], &rng);
        check_bias_backward(rt, CLF_OPS_PATH_GROUP, SHAPES[s][0], SHAPES[s][1], &rng);
        for (clf_dtype t = CLF_DT_BF16; t <= CLF_DT_F16; t++) {
            check_bias_backward16(rt, CLF_OPS_PATH_ITEM, t, SHAPES[s][0], SHAPES[s][1], &rng);
            check_bias_backward16(rt, CLF_OPS_PATH_GROUP, t, SHAPES[s][0], SHAPES[s][1], &rng);
        }
    }
    check_swiglu_reference(&rng);
    for (size_t s = 0; s < NSHAPES - 1; s++)
        check_swiglu(rt, SHAPES[s][0], SHAPES[s][1], &rng);
    /* More rows than a launch may hold in its second dimension (65535
     * groups on some GPUs): the rows go in dimension 0. */
    if (!tu_simulator())
        check_swiglu(rt, 70000, 3, &rng);
    clf_runtime_destroy(rt);
    return tu_finish();
}
