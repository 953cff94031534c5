/*
 * gemm_case.h - one GEMM test case (shape, transposes, padding, alpha,
 * beta, batch, shared operands, K slicing) laid out in one device buffer
 * with gaps, its float64 reference, and running it through an engine or a
 * named configuration; shared by test_gemm.c (the kernels) and
 * test_gemm_choice.c (the search's choice file).
 */
#ifndef CLF_TESTS_GEMM_CASE_H
#define CLF_TESTS_GEMM_CASE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/gemm/gemm.h"
#include "tests/test_util.h"

typedef struct gcase {
    int ta, tb;
    size_t m, n, k;
    size_t batch;
    size_t pad; /* extra leading-dimension elements */
    float alpha, beta;
    int share_a, share_b; /* batch stride 0 */
    size_t k_slice;       /* the descriptor's k_slice */
} gcase;

/* Layout of A, B, C inside one buffer, element offsets and sizes. */
typedef struct glayout {
    size_t lda, ldb, ldc, sa, sb, sc;
    size_t oa, ob, oc;
    size_t na, nb, nc; /* extents from each offset */
    size_t total;
} glayout;

static inline glayout layout_of(const gcase *g)
{
    glayout L;
    const size_t batch = g->batch > 1 ? g->batch : 1;
    const size_t ar = g->ta ? g->k : g->m, ac = g->ta ? g->m : g->k;
    const size_t br = g->tb ? g->n : g->k, bc = g->tb ? g->k : g->n;
    L.lda = ac + g->pad;
    L.ldb = bc + g->pad + 1;
    L.ldc = g->n + g->pad;
    L.sa = g->share_a ? 0 : ar * L.lda + 3;
    L.sb = g->share_b ? 0 : br * L.ldb + 5;
    L.sc = g->m * L.ldc + 2;
    L.na = (batch - 1) * L.sa + ar * L.lda;
    L.nb = (batch - 1) * L.sb + br * L.ldb;
    L.nc = (batch - 1) * L.sc + g->m * L.ldc;
    L.oa = 7;
    L.ob = L.oa + L.na + 11;
    L.oc = L.ob + L.nb + 13;
    L.total = L.oc + L.nc + 17;
    return L;
}

static inline clf_gemm_desc desc_of(const gcase *g, const glayout *L, clf_buffer *buf)
{
    clf_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.trans_a = g->ta;
    d.trans_b = g->tb;
    d.m = g->m;
    d.n = g->n;
    d.k = g->k;
    d.alpha = g->alpha;
    d.beta = g->beta;
    d.a = (clf_ptr){buf, L->oa};
    d.lda = L->lda;
    d.b = (clf_ptr){buf, L->ob};
    d.ldb = L->ldb;
    d.c = (clf_ptr){buf, L->oc};
    d.ldc = L->ldc;
    d.batch = g->batch;
    d.stride_a = L->sa;
    d.stride_b = L->sb;
    d.stride_c = L->sc;
    d.k_slice = g->k_slice;
    return d;
}

/* The whole buffer after the GEMM, in float64: everything but the C
 * matrices is unchanged. */
static inline void reference(const gcase *g, const glayout *L, const float *in, double *out)
{
    const size_t batch = g->batch > 1 ? g->batch : 1;
    for (size_t i = 0; i < L->total; i++)
        out[i] = in[i];
    for (size_t z = 0; z < batch; z++) {
        const float *A = in + L->oa + z * L->sa;
        const float *B = in + L->ob + z * L->sb;
        const float *C = in + L->oc + z * L->sc;
        double *O = out + L->oc + z * L->sc;
        for (size_t i = 0; i < g->m; i++)
            for (size_t j = 0; j < g->n; j++) {
                double s = 0.0;
                for (size_t p = 0; p < g->k; p++) {
                    double a = g->ta ? A[p * L->lda + i] : A[i * L->lda + p];
                    double b = g->tb ? B[j * L->ldb + p] : B[p * L->ldb + j];
                    s += a * b;
                }
                double c = g->beta != 0.0f ? (double)g->beta * C[i * L->ldc + j] : 0.0;
                O[i * L->ldc + j] = (double)g->alpha * s + c;
            }
    }
}

/* who: "auto" through clf_gemm (the runtime's engine option), "native" or
 * "clblast" through clf_gemm_with, else a configuration's name through
 * clf_gemm_with_config. */
static inline clf_status gemm_by(clf_runtime *rt, const char *who, const clf_gemm_desc *d,
                                 clf_error *err)
{
    if (strcmp(who, "auto") == 0)
        return clf_gemm(rt, d, err);
    if (strcmp(who, "native") == 0)
        return clf_gemm_with(rt, CLF_GEMM_NATIVE, d, err);
    if (strcmp(who, "clblast") == 0)
        return clf_gemm_with(rt, CLF_GEMM_CLBLAST, d, err);
    return clf_gemm_with_config(rt, who, d, err);
}

static inline void run_case(clf_runtime *rt, const char *who, const gcase *g, tu_rng *r)
{
    const glayout L = layout_of(g);
    float *host = malloc(L.total * sizeof(float));
    float *got = malloc(L.total * sizeof(float));
    double *ref = malloc(L.total * sizeof(double));
    if (host == NULL || got == NULL || ref == NULL) {
        fprintf(stderr, "FATAL: out of memory\n");
        exit(1);
    }
    tu_fill(r, host, L.total, -1.0f, 1.0f);
    if (g->beta == 0.0f) /* C must not be read: poison it */
        for (size_t i = L.oc; i < L.oc + L.nc; i++)
            host[i] = NAN;
    reference(g, &L, host, ref);
    clf_ptr p = tu_upload(rt, host, L.total);
    clf_gemm_desc d = desc_of(g, &L, p.buf);
    clf_error err;
    clf_status st = gemm_by(rt, who, &d, &err);
    char name[160];
    char slice[48] = "";
    if (g->k_slice == SIZE_MAX)
        snprintf(slice, sizeof slice, " K in one pass");
    else if (g->k_slice > 0)
        snprintf(slice, sizeof slice, " K slices of %zu", g->k_slice);
    snprintf(name, sizeof name, "%s %s%s %zux%zux%zu b%zu%s%s pad%zu a%g b%g%s", who,
             g->ta ? "T" : "N", g->tb ? "T" : "N", g->m, g->n, g->k, g->batch,
             g->share_a ? " A-shared" : "", g->share_b ? " B-shared" : "", g->pad, (double)g->alpha,
             (double)g->beta, slice);
    if (st != CLF_OK) {
        char buf[CLF_ERROR_MSG_MAX + 256];
        clf_error_format(&err, buf, sizeof buf);
        TU_CHECK(0, "%s: clf_gemm failed: %s", name, buf);
    } else {
        tu_download(rt, p, got, L.total);
        const double atol = 1e-5 * sqrt((double)(g->k > 0 ? g->k : 1)) *
                            (fabs(g->alpha) > 1.0 ? fabs(g->alpha) : 1.0);
        tu_close(name, got, ref, L.total, atol, 1e-4);
    }
    tu_free(p);
    free(host);
    free(got);
    free(ref);
}

/* C of g after one GEMM from host's values: by configuration `who` with
 * the descriptor's k_slice set to k_slice, or (who NULL) by clf_gemm. */
static inline void gemm_once(clf_runtime *rt, const char *who, size_t k_slice, const gcase *g,
                             const glayout *L, const float *host, float *out)
{
    clf_ptr p = tu_upload(rt, host, L->total);
    clf_gemm_desc d = desc_of(g, L, p.buf);
    d.k_slice = k_slice;
    clf_error err;
    tu_ok(who != NULL ? clf_gemm_with_config(rt, who, &d, &err) : clf_gemm(rt, &d, &err), &err,
          "gemm");
    tu_download(rt, p, out, L->total);
    tu_free(p);
}

#endif
