/*
 * test_performer.c - Performer (FAVOR+) attention (cl/attention.cl's perf_*
 * kernels through model/ops/attention.c) against a float64 reference on
 * fresh random inputs.
 *
 * The reference computes phi(x)_i = exp(w_i . x' - |x'|^2 / 2) / sqrt(m),
 * x' = x HS^(-1/4), with no stabiliser (it cancels exactly: the kernels
 * subtract a query row's max and one max over each sequence's keys), and
 * y_t = sum_s phi(q_t).phi(k_s) v_s / sum_s phi(q_t).phi(k_s) over the keys
 * the query sees: every unmasked key (both ways), or s <= t + S - T
 * (causal, queries the last T of S positions). Cases: both ways with a key
 * mask (a masked key's values are large: they must not leak), causal with
 * S = T and with S > T (a prefill's offset), head sizes 4 to 32, 1 to 48
 * features, K/V in a fused [B, S, 3C] row and in a cache layout. y within
 * atol 2e-5, rtol 1e-4 (float32 sums of m products over S keys); the
 * backward's dq, dk, dv against central differences of the float64 forward
 * of L = sum(dy * y) at sampled coordinates (step 1e-3, |error| <= 2e-3 (1 +
 * |g|)), and a rerun bit-identical.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ops/ops.h"
#include "tests/test_util.h"

typedef struct pcase {
    size_t B, NH, T, S, HS, m;
    int causal, masked, cache;
} pcase;

/* Row (b, t) head h of q [B, T, qs]; keys / values row (b, h, s). */
static const float *qrow(const pcase *c, const float *q, size_t qs, size_t b, size_t h, size_t t)
{
    return q + (b * c->T + t) * qs + h * c->HS;
}
static size_t kv_index(const pcase *c, size_t kvs, size_t b, size_t h, size_t s)
{
    /* fused rows [B, S, kvs], or a cache [B, NH, S, HS] */
    return c->cache ? ((b * c->NH + h) * c->S + s) * c->HS : (b * c->S + s) * kvs + h * c->HS;
}

static void phi_ref(const pcase *c, const float *x, const float *om, double *out)
{
    const double s4 = pow((double)c->HS, -0.25);
    double sq = 0;
    for (size_t d = 0; d < c->HS; d++)
        sq += (x[d] * s4) * (x[d] * s4);
    for (size_t i = 0; i < c->m; i++) {
        double p = 0;
        for (size_t d = 0; d < c->HS; d++)
            p += (double)om[i * c->HS + d] * x[d] * s4;
        out[i] = exp(p - 0.5 * sq) / sqrt((double)c->m);
    }
}

/* y [B, T, NH*HS] in float64; L = sum(dy * y) returned when dy is given. */
static double reference(const pcase *c, const float *q, size_t qs, const float *k, const float *v,
                        size_t kvs, const int32_t *keep, const float *om, double *y,
                        const float *dy)
{
    const size_t C = c->NH * c->HS, off = c->S - c->T;
    double *fq = malloc(c->m * sizeof *fq), *fk = malloc(c->m * sizeof *fk), L = 0;
    double *num = malloc(c->HS * sizeof *num);
    for (size_t b = 0; b < c->B; b++)
        for (size_t h = 0; h < c->NH; h++)
            for (size_t t = 0; t < c->T; t++) {
                phi_ref(c, qrow(c, q, qs, b, h, t), om, fq);
                double den = 0;
                memset(num, 0, c->HS * sizeof *num);
                for (size_t s = 0; s < c->S; s++) {
                    if ((c->causal && s > t + off) || (keep && !keep[b * c->S + s]))
                        continue;
                    phi_ref(c, k + kv_index(c, kvs, b, h, s), om, fk);
                    double a = 0;
                    for (size_t i = 0; i < c->m; i++)
                        a += fq[i] * fk[i];
                    den += a;
                    for (size_t d = 0; d < c->HS; d++)
                        num[d] += a * v[kv_index(c, kvs, b, h, s) + d];
                }
                for (size_t d = 0; d < c->HS; d++) {
                    const double yd = den > 0 ? num[d] / den : 0;
                    if (y)
                        y[(b * c->T + t) * C + h * c->HS + d] = yd;
                    if (dy)
                        L += dy[(b * c->T + t) * C + h * c->HS + d] * yd;
                }
            }
    free(fq);
    free(fk);
    free(num);
    return L;
}

static void run(clf_runtime *rt, const pcase *c, tu_rng *r)
{
    clf_error err;
    const size_t C = c->NH * c->HS, qs = 3 * C, kvs = 3 * C, BH = c->B * c->NH;
    /* q in a fused [B, T, 3C] row; k, v in one of [B, S, 3C] (or caches) */
    const size_t nq = c->B * c->T * qs, nkv = c->cache ? BH * c->S * c->HS : c->B * c->S * kvs;
    float *q = malloc(nq * sizeof *q), *kv = malloc(nkv * sizeof *kv), *vv = malloc(nkv * 4);
    float *om = malloc(c->m * c->HS * sizeof *om), *dy = malloc(c->B * c->T * C * 4);
    int32_t *keep = c->masked ? malloc(c->B * c->S * sizeof *keep) : NULL;
    tu_fill(r, q, nq, -1.5f, 1.5f);
    tu_fill(r, kv, nkv, -1.5f, 1.5f);
    tu_fill(r, vv, nkv, -1.5f, 1.5f);
    tu_fill(r, dy, c->B * c->T * C, -1, 1);
    for (size_t i = 0; i < c->m * c->HS; i++) /* standard normal rows (Box-Muller) */
        om[i] = (float)(sqrt(-2 * log((tu_u32(r) + 1.0) / 4294967297.0)) *
                        cos(6.283185307179586 * tu_u32(r) / 4294967296.0));
    /* keys at kv (a cache) or column C of kv's rows; values in vv (a cache)
     * or at column 2C */
    const float *kh = c->cache ? kv : kv + C;
    float *vw = c->cache ? vv : kv + 2 * C;
    for (size_t i = 0; keep && i < c->B * c->S; i++) {
        keep[i] = (tu_u32(r) % 4) != 0 || i % c->S == 0;
        if (!keep[i]) /* a masked key's value: large, so that a leak shows */
            for (size_t h = 0; h < c->NH; h++)
                for (size_t d = 0; d < c->HS; d++)
                    vw[kv_index(c, kvs, i / c->S, h, i % c->S) + d] = 1000.0f;
    }
    const float *vh2 = vw;
    clf_ptr dq = tu_upload(rt, q, nq), dkv = tu_upload(rt, kv, nkv);
    clf_ptr dvc = c->cache ? tu_upload(rt, vv, nkv) : dkv;
    clf_ptr dom = tu_upload(rt, om, c->m * c->HS), ddy = tu_upload(rt, dy, c->B * c->T * C);
    clf_ptr dk = c->masked ? tu_upload_i32(rt, keep, c->B * c->S) : (clf_ptr){NULL, 0};
    clf_ptr y = tu_alloc(rt, c->B * c->T * C);
    clf_performer p = {.y = y,
                       .q = dq,
                       .k = c->cache ? dkv : clf_ptr_at(dkv, C),
                       .v = c->cache ? dvc : clf_ptr_at(dkv, 2 * C),
                       .keep = dk,
                       .om = dom,
                       .fq = tu_alloc(rt, BH * c->T * c->m),
                       .fk = tu_alloc(rt, BH * c->S * c->m),
                       .nd = tu_alloc(rt, BH * c->T * (c->HS + 1)),
                       .cmax = tu_alloc(rt, BH),
                       .rmax = tu_alloc(rt, BH * c->S),
                       .y_stride = C,
                       .q_stride = qs,
                       .kv_stride = c->cache ? c->HS : kvs,
                       .kv_batch_stride = c->cache ? c->NH * c->S * c->HS : 0,
                       .kv_head_stride = c->cache ? c->S * c->HS : 0,
                       .keep_stride = c->S,
                       .B = c->B,
                       .NH = c->NH,
                       .T = c->T,
                       .S = c->S,
                       .HS = c->HS,
                       .m = c->m,
                       .causal = c->causal};
    char name[200];
    snprintf(name, sizeof name, "performer B=%zu NH=%zu T=%zu S=%zu HS=%zu m=%zu%s%s%s", c->B,
             c->NH, c->T, c->S, c->HS, c->m, c->causal ? " causal" : " both ways",
             c->masked ? " masked" : "", c->cache ? " cache layout" : "");
    tu_ok(clf_op_performer_forward(rt, &p, &err), &err, "performer forward");
    float *got = malloc(c->B * c->T * C * sizeof *got);
    double *ref = malloc(c->B * c->T * C * sizeof *ref);
    tu_download(rt, y, got, c->B * c->T * C);
    reference(c, q, qs, kh, vh2, kvs, keep, om, ref, NULL);
    tu_close(name, got, ref, c->B * c->T * C, 2e-5, 1e-4);

    if (!c->cache) { /* the backward (training layouts) */
        clf_ptr gq = tu_alloc(rt, nq), gkv = tu_alloc(rt, nkv);
        const clf_performer_grad g = {.dy = ddy,
                                      .dq = gq,
                                      .dk = clf_ptr_at(gkv, C),
                                      .dv = clf_ptr_at(gkv, 2 * C),
                                      .u = tu_alloc(rt, BH * c->T * (c->HS + 1)),
                                      .dfq = tu_alloc(rt, BH * c->T * c->m),
                                      .dfk = tu_alloc(rt, BH * c->S * c->m),
                                      .dq_stride = qs,
                                      .dkv_stride = kvs};
        tu_ok(clf_op_performer_backward(rt, &p, &g, &err), &err, "performer backward");
        float *gqh = malloc(nq * 4), *gkh = malloc(nkv * 4), *again = malloc(nkv * 4);
        tu_download(rt, gq, gqh, nq);
        tu_download(rt, gkv, gkh, nkv);
        tu_ok(clf_op_performer_backward(rt, &p, &g, &err), &err, "performer backward again");
        tu_download(rt, gkv, again, nkv);
        TU_CHECK(memcmp(gkh, again, nkv * 4) == 0, "%s: backward reruns bit-identical", name);
        /* central differences of L at sampled q, k and v coordinates */
        enum { NSAMP = 24 };
        double worst = 0;
        for (int sidx = 0; sidx < NSAMP; sidx++) {
            const int which = sidx % 3; /* q, k, v */
            float *arr = which == 0 ? q : kv;
            const size_t rows = which == 0 ? c->B * c->T : c->B * c->S;
            const size_t row = tu_u32(r) % rows, col = (size_t)which * C + tu_u32(r) % C;
            if (which && keep && !keep[row])
                continue;
            float *e = arr + row * qs + col, e0 = *e;
            const double hstep = 1e-3;
            *e = (float)(e0 + hstep);
            const double lp = reference(c, q, qs, kv + C, kv + 2 * C, kvs, keep, om, NULL, dy);
            *e = (float)(e0 - hstep);
            const double lm = reference(c, q, qs, kv + C, kv + 2 * C, kvs, keep, om, NULL, dy);
            *e = e0;
            const double fd = (lp - lm) / (2 * hstep);
            const double gv = which == 0 ? gqh[row * qs + col] : gkh[row * kvs + col];
            worst = fmax(worst, fabs(gv - fd) / (2e-3 * (1 + fabs(gv))));
        }
        TU_CHECK(worst <= 1.0,
                 "%s: dq, dk, dv match central differences (worst error / "
                 "tolerance %.3f)",
                 name, worst);
        free(gqh);
        free(gkh);
        free(again);
        tu_free(gq);
        tu_free(gkv);
        tu_free(g.u);
        tu_free(g.dfq);
        tu_free(g.dfk);
    }
    tu_free(dq);
    tu_free(dkv);
    if (c->cache)
        tu_free(dvc);
    tu_free(dom);
    tu_free(ddy);
    if (c->masked)
        tu_free(dk);
    tu_free(y);
    tu_free(p.fq);
    tu_free(p.fk);
    tu_free(p.nd);
    tu_free(p.cmax);
    tu_free(p.rmax);
    free(q);
    free(kv);
    free(vv);
    free(om);
    free(dy);
    free(keep);
    free(got);
    free(ref);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng r = tu_rng_new(9);
    const pcase cases[] = {
        /* B NH T S HS m causal masked cache */
        {1, 1, 1, 1, 4, 1, 0, 0, 0},     {2, 2, 9, 9, 8, 16, 0, 1, 0},
        {2, 3, 13, 13, 16, 32, 1, 0, 0}, {1, 2, 37, 37, 32, 48, 1, 0, 0},
        {2, 2, 5, 12, 8, 16, 1, 0, 0},   {1, 2, 1, 20, 16, 24, 1, 0, 1},
        {2, 1, 30, 30, 16, 8, 0, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run(rt, &cases[i], &r);
    clf_runtime_destroy(rt);
    return tu_finish();
}
