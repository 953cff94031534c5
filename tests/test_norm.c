/*
 * test_norm.c - LayerNorm and RMSNorm forward and backward against float64
 * references, with both kernel variants (one work-item per row, one
 * work-group per row; item / group column kernels for dw, db).
 *
 * What is checked (|got - ref| <= atol + rtol |ref|)
 * - Shapes R x N = 1x1, 3x5, 17x129, 64x768, 9x95, 257x33, 1000x7 (under
 *   the simulator 40x768, 65x33 and 100x7 for the three with most rows);
 *   inputs with a per-row offset up to +-4 (LayerNorm must not cancel), eps
 *   1e-5.
 * - Forward out: atol 2e-5, rtol 1e-5; saved mean: atol 1e-5; saved rstd:
 *   rtol 2e-5 (atol 1e-5); LayerNorm with and without bias.
 * - Backward dx (overwrite, with the old dx NaN, and accumulate): atol 1e-4,
 *   rtol 1e-4 (dx is a difference of O(1) terms times rstd). dw, db always
 *   accumulate onto random old values: atol 4e-6 * (largest column sum of
 *   |terms|) + 1e-5, rtol 0. Backward inputs are the reference mean / rstd
 *   rounded to float, so forward and backward errors are checked separately.
 * - The float64 backward references (dx, dw, db) are checked against central
 *   finite differences of the float64 forward references of the loss
 *   L = sum(out * dout) (h = 1e-6, tolerance 1e-7 + 1e-6 |d|).
 * - Two runs of the backward give bit-identical dw; every output is
 *   surrounded by guard zones that must stay untouched.
 * - norm_dot (decoding's norm and the linear after it, one launch): each
 *   norm kind, with and without bias, every activation, against a float64
 *   norm, product, bias and activation (check_norm_dot states the bound).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/io/safetensors.h"
#include "model/ops/ops.h"
#include "model/ops/ops_internal.h"
#include "tests/test_util.h"

/* The norm ops through clf_norm_args, one path. */
static clf_status ln_forward(clf_runtime *rt, clf_ops_path path, clf_dtype t, clf_ptr out,
                             clf_ptr mean, clf_ptr rstd, clf_ptr x, clf_ptr w, clf_ptr b, size_t R,
                             size_t N, float eps, clf_error *err)
{
    const clf_norm_args a = {.x = x,
                             .w = w,
                             .b = b,
                             .mean = mean,
                             .rstd = rstd,
                             .R = R,
                             .N = N,
                             .eps = eps,
                             .out = out,
                             .out_type = t};
    return clf_op_norm_forward_ex(rt, path, &a, err);
}

static clf_status ln_backward(clf_runtime *rt, clf_ops_path path, clf_ptr dx, clf_ptr dw,
                              clf_ptr db, clf_ptr dout, clf_ptr x, clf_ptr mean, clf_ptr rstd,
                              clf_ptr w, size_t R, size_t N, int accumulate, clf_error *err)
{
    const clf_norm_args a = {.x = x,
                             .w = w,
                             .mean = mean,
                             .rstd = rstd,
                             .R = R,
                             .N = N,
                             .dout = dout,
                             .dx = dx,
                             .dw = dw,
                             .db = db,
                             .accumulate = accumulate};
    return clf_op_norm_backward_ex(rt, path, &a, err);
}

static clf_status rms_forward(clf_runtime *rt, clf_ops_path path, clf_dtype t, clf_ptr out,
                              clf_ptr rstd, clf_ptr x, clf_ptr w, size_t R, size_t N, float eps,
                              clf_error *err)
{
    const clf_norm_args a = {.rms = 1,
                             .x = x,
                             .w = w,
                             .rstd = rstd,
                             .R = R,
                             .N = N,
                             .eps = eps,
                             .out = out,
                             .out_type = t};
    return clf_op_norm_forward_ex(rt, path, &a, err);
}

static clf_status rms_backward(clf_runtime *rt, clf_ops_path path, clf_ptr dx, clf_ptr dw,
                               clf_ptr dout, clf_ptr x, clf_ptr rstd, clf_ptr w, size_t R, size_t N,
                               int accumulate, clf_error *err)
{
    const clf_norm_args a = {.rms = 1,
                             .x = x,
                             .w = w,
                             .rstd = rstd,
                             .R = R,
                             .N = N,
                             .dout = dout,
                             .dx = dx,
                             .dw = dw,
                             .accumulate = accumulate};
    return clf_op_norm_backward_ex(rt, path, &a, err);
}

#define EPS 1e-5

/* ---- float64 references (llm.c style) ------------------------------------------- */

static void layernorm_forward_ref(double *out, double *mean, double *rstd, const double *x,
                                  const double *w, const double *b, size_t R, size_t N)
{
    for (size_t r = 0; r < R; r++) {
        const double *xr = x + r * N;
        double m = 0.0, v = 0.0;
        for (size_t j = 0; j < N; j++)
            m += xr[j];
        m /= N;
        for (size_t j = 0; j < N; j++)
            v += (xr[j] - m) * (xr[j] - m);
        v /= N;
        double s = 1.0 / sqrt(v + EPS);
        for (size_t j = 0; j < N; j++)
            out[r * N + j] = (xr[j] - m) * s * w[j] + (b ? b[j] : 0.0);
        mean[r] = m;
        rstd[r] = s;
    }
}

/* dx = (or +=) ...; dw += ...; db += ... */
static void layernorm_backward_ref(double *dx, double *dw, double *db, const double *dout,
                                   const double *x, const double *mean, const double *rstd,
                                   const double *w, size_t R, size_t N, int acc)
{
    for (size_t r = 0; r < R; r++) {
        const double *xr = x + r * N, *dr = dout + r * N;
        double sdn = 0.0, sdnx = 0.0;
        for (size_t j = 0; j < N; j++) {
            double xh = (xr[j] - mean[r]) * rstd[r], dn = dr[j] * w[j];
            sdn += dn;
            sdnx += dn * xh;
        }
        sdn /= N;
        sdnx /= N;
        for (size_t j = 0; j < N; j++) {
            double xh = (xr[j] - mean[r]) * rstd[r], dn = dr[j] * w[j];
            double g = rstd[r] * (dn - sdn - xh * sdnx);
            dx[r * N + j] = acc ? dx[r * N + j] + g : g;
            dw[j] += dr[j] * xh;
            if (db)
                db[j] += dr[j];
        }
    }
}

static void rmsnorm_forward_ref(double *out, double *rstd, const double *x, const double *w,
                                size_t R, size_t N)
{
    for (size_t r = 0; r < R; r++) {
        double ss = 0.0;
        for (size_t j = 0; j < N; j++)
            ss += x[r * N + j] * x[r * N + j];
        double s = 1.0 / sqrt(ss / N + EPS);
        for (size_t j = 0; j < N; j++)
            out[r * N + j] = x[r * N + j] * s * w[j];
        rstd[r] = s;
    }
}

static void rmsnorm_backward_ref(double *dx, double *dw, const double *dout, const double *x,
                                 const double *rstd, const double *w, size_t R, size_t N, int acc)
{
    for (size_t r = 0; r < R; r++) {
        double s = 0.0;
        for (size_t j = 0; j < N; j++)
            s += dout[r * N + j] * w[j] * x[r * N + j] * rstd[r];
        s /= N;
        for (size_t j = 0; j < N; j++) {
            double xh = x[r * N + j] * rstd[r];
            double g = rstd[r] * (dout[r * N + j] * w[j] - xh * s);
            dx[r * N + j] = acc ? dx[r * N + j] + g : g;
            dw[j] += dout[r * N + j] * xh;
        }
    }
}

/* ---- finite differences of the references ---------------------------------------- */

/* L = sum(out * dout) for the norm `kind` (0 LayerNorm, 1 RMSNorm). */
static double loss_ref(int kind, const double *x, const double *w, const double *b,
                       const double *dout, size_t R, size_t N)
{
    double out[64], mean[8], rstd[8];
    if (kind == 0)
        layernorm_forward_ref(out, mean, rstd, x, w, b, R, N);
    else
        rmsnorm_forward_ref(out, rstd, x, w, R, N);
    double L = 0.0;
    for (size_t i = 0; i < R * N; i++)
        L += out[i] * dout[i];
    return L;
}

static int fd_compare(double *p, size_t n, const double *analytic, int kind, double *x, double *w,
                      double *b, const double *dout, size_t R, size_t N, double *worst)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const double h = 1e-6;
        double keep = p[i];
        p[i] = keep + h;
        double lp = loss_ref(kind, x, w, b, dout, R, N);
        p[i] = keep - h;
        double lm = loss_ref(kind, x, w, b, dout, R, N);
        p[i] = keep;
        double fd = (lp - lm) / (2 * h), e = fabs(fd - analytic[i]);
        *worst = fmax(*worst, e);
        if (e > 1e-7 + 1e-6 * fabs(analytic[i]))
            bad++;
    }
    return bad;
}

static void check_reference_backward(tu_rng *rng)
{
    enum { R = 4, N = 7 };
    for (int kind = 0; kind <= 1; kind++) {
        double x[R * N], dout[R * N], w[N], b[N], dx[R * N], dw[N] = {0}, db[N] = {0};
        double out[R * N], mean[R], rstd[R];
        for (size_t i = 0; i < R * N; i++) {
            x[i] = tu_uniform(rng, -2, 2) + (double)(i / N);
            dout[i] = tu_uniform(rng, -1, 1);
        }
        for (size_t j = 0; j < N; j++) {
            w[j] = tu_uniform(rng, 0.5, 1.5);
            b[j] = tu_uniform(rng, -0.5, 0.5);
        }
        if (kind == 0) {
            layernorm_forward_ref(out, mean, rstd, x, w, b, R, N);
            layernorm_backward_ref(dx, dw, db, dout, x, mean, rstd, w, R, N, 0);
        } else {
            rmsnorm_forward_ref(out, rstd, x, w, R, N);
            rmsnorm_backward_ref(dx, dw, dout, x, rstd, w, R, N, 0);
        }
        double worst = 0.0;
        int bad = fd_compare(x, R * N, dx, kind, x, w, b, dout, R, N, &worst);
        bad += fd_compare(w, N, dw, kind, x, w, b, dout, R, N, &worst);
        if (kind == 0)
            bad += fd_compare(b, N, db, kind, x, w, b, dout, R, N, &worst);
        TU_CHECK(bad == 0, "%s float64 backward (dx, dw%s) vs central differences (worst %.2e)",
                 kind == 0 ? "layernorm" : "rmsnorm", kind == 0 ? ", db" : "", worst);
    }
}

/* ---- device checks ---------------------------------------------------------------------- */

typedef struct host {
    size_t R, N;
    float *x, *w, *b, *dout, *dx_old, *dw_old, *db_old;
    double *xd, *wd, *bd, *doutd;
} host;

static float *rnd(tu_rng *rng, size_t n, float lo, float hi)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    tu_fill(rng, p, n, lo, hi);
    return p;
}

static double *to_d(const float *x, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

static host host_make(size_t R, size_t N, tu_rng *rng)
{
    host h = {R, N, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    h.x = rnd(rng, R * N, -2, 2);
    for (size_t r = 0; r < R; r++) {
        float off = (float)tu_uniform(rng, -4, 4);
        for (size_t j = 0; j < N; j++)
            h.x[r * N + j] += off;
    }
    h.w = rnd(rng, N, 0.5f, 1.5f);
    h.b = rnd(rng, N, -0.5f, 0.5f);
    h.dout = rnd(rng, R * N, -1, 1);
    h.dx_old = rnd(rng, R * N, -1, 1);
    h.dw_old = rnd(rng, N, -1, 1);
    h.db_old = rnd(rng, N, -1, 1);
    h.xd = to_d(h.x, R * N);
    h.wd = to_d(h.w, N);
    h.bd = to_d(h.b, N);
    h.doutd = to_d(h.dout, R * N);
    return h;
}

static void host_free(host *h)
{
    free(h->x);
    free(h->w);
    free(h->b);
    free(h->dout);
    free(h->dx_old);
    free(h->dw_old);
    free(h->db_old);
    free(h->xd);
    free(h->wd);
    free(h->bd);
    free(h->doutd);
}

static const char *pn(clf_ops_path p) { return p == CLF_OPS_PATH_ITEM ? "item" : "group"; }

/* atol for column sums of R terms: 4e-6 * max_c sum_r |dout * xhat| + 1e-5. */
static double col_atol(const double *dout, const double *xh, size_t R, size_t N)
{
    double m = 0.0;
    for (size_t c = 0; c < N; c++) {
        double s = 0.0;
        for (size_t r = 0; r < R; r++)
            s += fabs(dout[r * N + c] * (xh ? xh[r * N + c] : 1.0));
        m = fmax(m, s);
    }
    return 4e-6 * m + 1e-5;
}

/* A 16-bit output: n elements at OUT16_OFF of a buffer filled with a
 * sentinel, which must survive around them. */
#define OUT16_OFF 3
#define OUT16_SENTINEL 0x5A5Au
static clf_buffer *out16_make(clf_runtime *rt, size_t n)
{
    clf_error e;
    clf_buffer *b = NULL;
    const size_t len = n + 2 * OUT16_OFF;
    uint16_t *h = malloc(len * 2);
    for (size_t i = 0; i < len; i++)
        h[i] = OUT16_SENTINEL;
    tu_ok(clf_buffer_create(rt, len * 2, &b, &e), &e, "16-bit output");
    tu_ok(clf_buffer_write(rt, b, 0, h, len * 2, &e), &e, "16-bit output");
    free(h);
    return b;
}

/* The same arithmetic as the float32 output f32, rounded to nearest even as
 * it is stored: bit for bit the host's rounding of f32 (safetensors.h's,
 * which test_convert compares with the device's). Frees the buffer. */
static void out16_check(clf_runtime *rt, clf_buffer *b, clf_dtype t, const float *f32, size_t n,
                        const char *name)
{
    clf_error e;
    const size_t len = n + 2 * OUT16_OFF;
    uint16_t *h = malloc(len * 2);
    tu_ok(clf_buffer_read(rt, b, 0, h, len * 2, &e), &e, "16-bit output");
    size_t bad = 0, outside = 0;
    for (size_t i = 0; i < n; i++) {
        const uint16_t want = t == CLF_DT_BF16 ? clf_f32_to_bf16(f32[i]) : clf_f32_to_f16(f32[i]);
        bad += h[OUT16_OFF + i] != want;
    }
    for (size_t i = 0; i < OUT16_OFF; i++)
        outside += (h[i] != OUT16_SENTINEL) + (h[OUT16_OFF + n + i] != OUT16_SENTINEL);
    TU_CHECK(bad == 0 && outside == 0,
             "%s stored as %s: the float32 output rounded (%zu of %zu differ, %zu outside written)",
             name, clf_dtype_name(t), bad, n, outside);
    free(h);
    clf_buffer_destroy(b);
}

static void check_layernorm(clf_runtime *rt, clf_ops_path path, size_t R, size_t N, int bias,
                            tu_rng *rng)
{
    clf_error err;
    char name[160];
    size_t n = R * N;
    host h = host_make(R, N, rng);
    double *out = malloc(n * sizeof *out), *mean = malloc(R * sizeof *mean),
           *rstd = malloc(R * sizeof *rstd), *dx = malloc(n * sizeof *dx),
           *dw = malloc(N * sizeof *dw), *db = malloc(N * sizeof *db),
           *xh = calloc(n ? n : 1, sizeof *xh);
    float *got = malloc(n * sizeof *got), *meanf = malloc(R * sizeof *meanf),
          *rstdf = malloc(R * sizeof *rstdf), *nan = malloc(n * sizeof *nan);
    for (size_t i = 0; i < n; i++)
        nan[i] = NAN;
    layernorm_forward_ref(out, mean, rstd, h.xd, h.wd, bias ? h.bd : NULL, R, N);

    clf_ptr dx_ = tu_upload(rt, h.x, n), dw_ = tu_upload(rt, h.w, N), db_ = tu_upload(rt, h.b, N);
    clf_ptr dout_ = tu_guarded(rt, NULL, n), dmean = tu_guarded(rt, NULL, R),
            drstd = tu_guarded(rt, NULL, R);
    tu_ok(ln_forward(rt, path, CLF_DT_F32, dout_, dmean, drstd, dx_, dw_,
                     bias ? db_ : (clf_ptr){NULL, 0}, R, N, (float)EPS, &err),
          &err, "layernorm_forward");
    snprintf(name, sizeof name, "layernorm %s bias=%d %zux%zu", pn(path), bias, R, N);
    tu_download(rt, dout_, got, n);
    tu_close(name, got, out, n, 2e-5, 1e-5);
    for (int t = CLF_DT_BF16; t <= CLF_DT_F16; t++) {
        clf_buffer *o16 = out16_make(rt, n);
        tu_ok(ln_forward(rt, path, (clf_dtype)t, (clf_ptr){o16, OUT16_OFF}, dmean, drstd, dx_, dw_,
                         bias ? db_ : (clf_ptr){NULL, 0}, R, N, (float)EPS, &err),
              &err, "layernorm_forward 16-bit");
        snprintf(name, sizeof name, "layernorm %s bias=%d %zux%zu", pn(path), bias, R, N);
        out16_check(rt, o16, (clf_dtype)t, got, n, name);
    }
    tu_download(rt, dmean, meanf, R);
    snprintf(name, sizeof name, "layernorm %s %zux%zu: mean", pn(path), R, N);
    tu_close(name, meanf, mean, R, 1e-5, 0.0);
    tu_download(rt, drstd, rstdf, R);
    snprintf(name, sizeof name, "layernorm %s %zux%zu: rstd", pn(path), R, N);
    tu_close(name, rstdf, rstd, R, 1e-5, 2e-5);

    /* backward from the reference statistics rounded to float */
    for (size_t r = 0; r < R; r++) {
        meanf[r] = (float)mean[r];
        rstdf[r] = (float)rstd[r];
        mean[r] = meanf[r];
        rstd[r] = rstdf[r];
    }
    tu_ok(clf_ptr_write(rt, dmean, meanf, R, &err), &err, "mean");
    tu_ok(clf_ptr_write(rt, drstd, rstdf, R, &err), &err, "rstd");
    clf_ptr ddout = tu_upload(rt, h.dout, n), ddx = tu_guarded(rt, nan, n);
    clf_ptr ddw = tu_guarded(rt, h.dw_old, N), ddb = tu_guarded(rt, h.db_old, N);
    for (size_t j = 0; j < N; j++) {
        dw[j] = h.dw_old[j];
        db[j] = h.db_old[j];
    }
    for (size_t r = 0; r < R; r++)
        for (size_t j = 0; j < N; j++)
            xh[r * N + j] = (h.xd[r * N + j] - mean[r]) * rstd[r];
    layernorm_backward_ref(dx, dw, db, h.doutd, h.xd, mean, rstd, h.wd, R, N, 0);
    tu_ok(ln_backward(rt, path, ddx, ddw, ddb, ddout, dx_, dmean, drstd, dw_, R, N, 0, &err), &err,
          "layernorm_backward");
    tu_download(rt, ddx, got, n);
    snprintf(name, sizeof name, "layernorm backward %s %zux%zu: dx", pn(path), R, N);
    tu_close(name, got, dx, n, 1e-4, 1e-4);
    tu_download(rt, ddw, got, N);
    snprintf(name, sizeof name, "layernorm backward %s %zux%zu: dw", pn(path), R, N);
    tu_close(name, got, dw, N, col_atol(h.doutd, xh, R, N), 0.0);
    float *dw1 = malloc(N * sizeof *dw1);
    memcpy(dw1, got, N * sizeof *dw1);
    tu_download(rt, ddb, got, N);
    snprintf(name, sizeof name, "layernorm backward %s %zux%zu: db", pn(path), R, N);
    tu_close(name, got, db, N, col_atol(h.doutd, NULL, R, N), 0.0);

    /* accumulate into dx; dw, db accumulate a second time */
    tu_ok(clf_ptr_write(rt, ddx, h.dx_old, n, &err), &err, "dx old");
    for (size_t i = 0; i < n; i++)
        dx[i] = h.dx_old[i];
    layernorm_backward_ref(dx, dw, db, h.doutd, h.xd, mean, rstd, h.wd, R, N, 1);
    tu_ok(ln_backward(rt, path, ddx, ddw, ddb, ddout, dx_, dmean, drstd, dw_, R, N, 1, &err), &err,
          "layernorm_backward acc");
    tu_download(rt, ddx, got, n);
    snprintf(name, sizeof name, "layernorm backward accumulate %s %zux%zu: dx", pn(path), R, N);
    tu_close(name, got, dx, n, 1e-4, 1e-4);
    tu_download(rt, ddw, got, N);
    snprintf(name, sizeof name, "layernorm backward accumulate %s %zux%zu: dw", pn(path), R, N);
    tu_close(name, got, dw, N, 2 * col_atol(h.doutd, xh, R, N), 0.0);
    tu_download(rt, ddb, got, N);
    snprintf(name, sizeof name, "layernorm backward accumulate %s %zux%zu: db", pn(path), R, N);
    tu_close(name, got, db, N, 2 * col_atol(h.doutd, NULL, R, N), 0.0);

    /* determinism: the same accumulation from the same start is bit-identical */
    tu_ok(clf_ptr_write(rt, ddw, h.dw_old, N, &err), &err, "dw old");
    tu_ok(ln_backward(rt, path, ddx, ddw, ddb, ddout, dx_, dmean, drstd, dw_, R, N, 0, &err), &err,
          "layernorm_backward again");
    tu_download(rt, ddw, got, N);
    TU_CHECK(memcmp(got, dw1, N * sizeof *got) == 0,
             "layernorm backward %s %zux%zu: dw bit-identical on rerun", pn(path), R, N);
    TU_CHECK(tu_guard_intact(rt, dout_, n) && tu_guard_intact(rt, dmean, R) &&
                 tu_guard_intact(rt, drstd, R) && tu_guard_intact(rt, ddx, n) &&
                 tu_guard_intact(rt, ddw, N) && tu_guard_intact(rt, ddb, N),
             "layernorm %s %zux%zu: guard zones of all outputs intact", pn(path), R, N);

    free(dw1);
    tu_free(dx_);
    tu_free(dw_);
    tu_free(db_);
    tu_free(dout_);
    tu_free(dmean);
    tu_free(drstd);
    tu_free(ddout);
    tu_free(ddx);
    tu_free(ddw);
    tu_free(ddb);
    host_free(&h);
    free(out);
    free(mean);
    free(rstd);
    free(dx);
    free(dw);
    free(db);
    free(xh);
    free(got);
    free(meanf);
    free(rstdf);
    free(nan);
}

static void check_rmsnorm(clf_runtime *rt, clf_ops_path path, size_t R, size_t N, tu_rng *rng)
{
    clf_error err;
    char name[160];
    size_t n = R * N;
    host h = host_make(R, N, rng);
    double *out = malloc(n * sizeof *out), *rstd = malloc(R * sizeof *rstd),
           *dx = malloc(n * sizeof *dx), *dw = malloc(N * sizeof *dw),
           *xh = calloc(n ? n : 1, sizeof *xh);
    float *got = malloc(n * sizeof *got), *rstdf = malloc(R * sizeof *rstdf),
          *nan = malloc(n * sizeof *nan);
    for (size_t i = 0; i < n; i++)
        nan[i] = NAN;
    rmsnorm_forward_ref(out, rstd, h.xd, h.wd, R, N);

    clf_ptr dx_ = tu_upload(rt, h.x, n), dw_ = tu_upload(rt, h.w, N);
    clf_ptr dout_ = tu_guarded(rt, NULL, n), drstd = tu_guarded(rt, NULL, R);
    tu_ok(rms_forward(rt, path, CLF_DT_F32, dout_, drstd, dx_, dw_, R, N, (float)EPS, &err), &err,
          "rmsnorm_forward");
    snprintf(name, sizeof name, "rmsnorm %s %zux%zu", pn(path), R, N);
    tu_download(rt, dout_, got, n);
    tu_close(name, got, out, n, 2e-5, 1e-5);
    for (int t = CLF_DT_BF16; t <= CLF_DT_F16; t++) {
        clf_buffer *o16 = out16_make(rt, n);
        tu_ok(rms_forward(rt, path, (clf_dtype)t, (clf_ptr){o16, OUT16_OFF}, drstd, dx_, dw_, R, N,
                          (float)EPS, &err),
              &err, "rmsnorm_forward 16-bit");
        snprintf(name, sizeof name, "rmsnorm %s %zux%zu", pn(path), R, N);
        out16_check(rt, o16, (clf_dtype)t, got, n, name);
    }
    tu_download(rt, drstd, rstdf, R);
    snprintf(name, sizeof name, "rmsnorm %s %zux%zu: rstd", pn(path), R, N);
    tu_close(name, rstdf, rstd, R, 1e-5, 2e-5);

    for (size_t r = 0; r < R; r++) {
        rstdf[r] = (float)rstd[r];
        rstd[r] = rstdf[r];
    }
    tu_ok(clf_ptr_write(rt, drstd, rstdf, R, &err), &err, "rstd");
    clf_ptr ddout = tu_upload(rt, h.dout, n), ddx = tu_guarded(rt, nan, n);
    clf_ptr ddw = tu_guarded(rt, h.dw_old, N);
    for (size_t j = 0; j < N; j++)
        dw[j] = h.dw_old[j];
    for (size_t r = 0; r < R; r++)
        for (size_t j = 0; j < N; j++)
            xh[r * N + j] = h.xd[r * N + j] * rstd[r];
    rmsnorm_backward_ref(dx, dw, h.doutd, h.xd, rstd, h.wd, R, N, 0);
    tu_ok(rms_backward(rt, path, ddx, ddw, ddout, dx_, drstd, dw_, R, N, 0, &err), &err,
          "rmsnorm_backward");
    tu_download(rt, ddx, got, n);
    snprintf(name, sizeof name, "rmsnorm backward %s %zux%zu: dx", pn(path), R, N);
    tu_close(name, got, dx, n, 1e-4, 1e-4);
    tu_download(rt, ddw, got, N);
    snprintf(name, sizeof name, "rmsnorm backward %s %zux%zu: dw", pn(path), R, N);
    tu_close(name, got, dw, N, col_atol(h.doutd, xh, R, N), 0.0);

    tu_ok(clf_ptr_write(rt, ddx, h.dx_old, n, &err), &err, "dx old");
    for (size_t i = 0; i < n; i++)
        dx[i] = h.dx_old[i];
    rmsnorm_backward_ref(dx, dw, h.doutd, h.xd, rstd, h.wd, R, N, 1);
    tu_ok(rms_backward(rt, path, ddx, ddw, ddout, dx_, drstd, dw_, R, N, 1, &err), &err,
          "rmsnorm_backward acc");
    tu_download(rt, ddx, got, n);
    snprintf(name, sizeof name, "rmsnorm backward accumulate %s %zux%zu: dx", pn(path), R, N);
    tu_close(name, got, dx, n, 1e-4, 1e-4);
    tu_download(rt, ddw, got, N);
    snprintf(name, sizeof name, "rmsnorm backward accumulate %s %zux%zu: dw", pn(path), R, N);
    tu_close(name, got, dw, N, 2 * col_atol(h.doutd, xh, R, N), 0.0);
    TU_CHECK(tu_guard_intact(rt, dout_, n) && tu_guard_intact(rt, drstd, R) &&
                 tu_guard_intact(rt, ddx, n) && tu_guard_intact(rt, ddw, N),
             "rmsnorm %s %zux%zu: guard zones of all outputs intact", pn(path), R, N);

    tu_free(dx_);
    tu_free(dw_);
    tu_free(dout_);
    tu_free(drstd);
    tu_free(ddout);
    tu_free(ddx);
    tu_free(ddw);
    host_free(&h);
    free(out);
    free(rstd);
    free(dx);
    free(dw);
    free(xh);
    free(got);
    free(rstdf);
    free(nan);
}

/* norm_dot (decoding's norm + linear) against float64: the norm of each row
 * (kind 0 LayerNorm with bias, 1 without, 2 RMSNorm), then y = act(xhat W^T
 * + bias) into rows of stride N + 3, whose 3 extra columns (NaN) must stay
 * as they were. atol 2e-6 * (largest sum over k of |xhat_k W_jk|) + 1e-6
 * (float32 sums of C terms), rtol 1e-5 (the activation's own rounding). */
static void check_norm_dot(clf_runtime *rt, size_t R, size_t C, size_t N, int kind, int bias,
                           unsigned act, tu_rng *rng)
{
    const size_t ldy = N + 3;
    float *x = rnd(rng, R * C, -2, 2), *w = rnd(rng, C, 0.5f, 1.5f), *b = rnd(rng, C, -0.5f, 0.5f);
    float *W = rnd(rng, N * C, -1, 1), *bs = rnd(rng, N, -1, 1), *y = malloc(R * ldy * sizeof *y);
    double *ref = malloc(R * ldy * sizeof *ref), *xh = malloc(C * sizeof *xh), worst = 0.0;
    for (size_t r = 0; r < R; r++)
        x[r * C] += 3.0f * (float)r; /* a row offset LayerNorm must remove */
    for (size_t i = 0; i < R * ldy; i++)
        y[i] = NAN;
    for (size_t r = 0; r < R; r++) {
        double m = 0.0, v = 0.0;
        for (size_t k = 0; k < C; k++)
            m += kind == 2 ? 0.0 : x[r * C + k] / (double)C;
        for (size_t k = 0; k < C; k++)
            v += (x[r * C + k] - m) * (x[r * C + k] - m) / (double)C;
        for (size_t k = 0; k < C; k++)
            xh[k] = (x[r * C + k] - m) / sqrt(v + 1e-5) * w[k] + (kind == 0 ? b[k] : 0.0);
        for (size_t j = 0; j < ldy; j++) {
            if (j >= N) {
                ref[r * ldy + j] = NAN;
                continue;
            }
            double o = bias ? bs[j] : 0.0, mag = 0.0;
            for (size_t k = 0; k < C; k++) {
                o += xh[k] * W[j * C + k];
                mag += fabs(xh[k] * W[j * C + k]);
            }
            worst = fmax(worst, mag);
            ref[r * ldy + j] = tu_act_ref((int)act, o);
        }
    }
    clf_ptr dx = tu_upload(rt, x, R * C), dw = tu_upload(rt, w, C), db = tu_upload(rt, b, C);
    clf_ptr dW = tu_upload(rt, W, N * C), dbs = tu_upload(rt, bs, N);
    clf_ptr dy = tu_upload(rt, y, R * ldy);
    const clf_norm_dot_args a = {.rms = kind == 2,
                                 .x = dx,
                                 .w = dw,
                                 .b = kind == 0 ? db : (clf_ptr){0},
                                 .eps = 1e-5f,
                                 .W = dW,
                                 .bias = bias ? dbs : (clf_ptr){0},
                                 .act = act,
                                 .y = dy,
                                 .ldy = ldy,
                                 .R = R,
                                 .C = C,
                                 .N = N};
    clf_error err;
    tu_ok(clf_op_norm_dot(rt, &a, &err), &err, "norm_dot");
    tu_download(rt, dy, y, R * ldy);
    char name[128];
    snprintf(name, sizeof name, "norm_dot %s bias=%d act=%u %zux%zu -> %zu",
             kind == 2 ? "rmsnorm"
             : kind    ? "layernorm (no b)"
                       : "layernorm",
             bias, act, R, C, N);
    int pads = 1;
    for (size_t r = 0; r < R; r++)
        for (size_t j = N; j < ldy; j++) {
            pads &= isnan(y[r * ldy + j]);
            y[r * ldy + j] = 0.0f, ref[r * ldy + j] = 0.0;
        }
    tu_close(name, y, ref, R * ldy, 2e-6 * worst + 1e-6, 1e-5);
    TU_CHECK(pads, "%s: the columns past N untouched", name);
    tu_free(dx);
    tu_free(dw);
    tu_free(db);
    tu_free(dW);
    tu_free(dbs);
    tu_free(dy);
    free(x);
    free(w);
    free(b);
    free(W);
    free(bs);
    free(y);
    free(ref);
    free(xh);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng rng = tu_rng_new(5);
    check_reference_backward(&rng);
    static const size_t full[][2] = {{1, 1},  {3, 5},    {17, 129}, {64, 768},
                                     {9, 95}, {257, 33}, {1000, 7}};
    /* Under the simulator the shapes with many rows keep fewer: a row is a
     * work-group (or a work-item) of its own, so more rows only repeat the
     * same code, and the column sums still give each row lane several rows
     * and an uneven last share (lanes stride rows by 32). */
    static const size_t sim[][2] = {{1, 1},  {3, 5},   {17, 129}, {40, 768},
                                    {9, 95}, {65, 33}, {100, 7}};
    const size_t(*shapes)[2] = tu_simulator() ? sim : full;
    static const clf_ops_path paths[] = {CLF_OPS_PATH_ITEM, CLF_OPS_PATH_GROUP};
    for (size_t p = 0; p < 2; p++)
        for (size_t s = 0; s < sizeof full / sizeof full[0]; s++) {
            check_layernorm(rt, paths[p], shapes[s][0], shapes[s][1], 1, &rng);
            check_layernorm(rt, paths[p], shapes[s][0], shapes[s][1], 0, &rng);
            check_rmsnorm(rt, paths[p], shapes[s][0], shapes[s][1], &rng);
        }
    /* R, C, N: one row (decoding), C and N past no vector or block
     * multiple, the LM head of a 65-character vocabulary, a beam of 4 */
    static const size_t nd[][3] = {{1, 1, 1}, {1, 128, 384}, {3, 37, 50}, {2, 96, 65}, {4, 13, 17}};
    for (size_t s = 0; s < sizeof nd / sizeof nd[0]; s++)
        for (int kind = 0; kind < 3; kind++)
            check_norm_dot(rt, nd[s][0], nd[s][1], nd[s][2], kind, (int)((s + kind) % 2),
                           (unsigned)((s + kind) % 5), &rng);
    clf_runtime_destroy(rt);
    return tu_finish();
}
