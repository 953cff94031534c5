/*
 * test_attn_decode.c - single-query attention against a KV cache
 * (attn_decode in cl/attention.cl) versus a float64 reference.
 *
 * Checks, at (B, NH, HS, Tmax, L) including 1, head sizes below, equal to and
 * above the work-group size, and L not a multiple of anything, through the op
 * and with the kernel launched at work-groups of 128 (the GPU size) and 1:
 * - out = softmax(scale * q.K[:L]^T) V[:L] per (b, head): atol 1e-5,
 *   rtol 1e-4 (float dot products of length HS, exp, and a sum over L);
 * - cache positions >= L are never read: they hold NaN, the output is finite
 *   and matches;
 * - large scores (scale 30, |score| up to ~30*HS/3) stay finite and match
 *   (the max is subtracted before exp);
 * - the op refuses L = 0 and L > Tmax.
 * Flash-decoding (clf_attn_decode.splits): positions split into P ranges
 * (1, 2, 3, 7 and ranges of one position; with and without a keep mask
 * that empties whole ranges and whole rows) against the same reference with
 * the mask, atol 1e-5, rtol 1e-4, in both kernels (work-groups, and one
 * work-item per row: attn_decode_item, the CPUs' choice); reruns
 * bit-identical; the device's choice
 * of P and its scratch bound agree; too many splits or no scratch refused.
 * Grouped-query attention: caches of 2 or 1 K/V heads under 4 or 8 query
 * heads, in the same split cases, against the reference over caches with
 * each K/V head copied to its query heads; K/V heads that do not divide
 * the query heads refused.
 * The new position's keys and values read from fused qkv rows (the caches
 * NaN there) in both kernels, split and masked, with grouped-query heads:
 * the same tolerance, and the caches afterwards hold exactly those rows at
 * L - 1 and are unchanged elsewhere.
 * Sliding windows (1, 16, all and more than all of 61 positions) and ALiBi
 * biases, with q read inside fused qkv rows, at 1 and 3 ranges, against
 * float64 (atol 1e-5, rtol 1e-4).
 * Decoding's norm, qkv linear and attention in one launch
 * (clf_op_attn_qkv_decode), on devices whose work-groups run item by item:
 * LayerNorm with and without its bias, RMSNorm, with and without the
 * linear's bias, grouped-query and multi-query heads, head sizes and
 * widths that are not multiples of 16, windows and ALiBi, rotary positions
 * (plain and YaRN-scaled), one and several rows, against float64 (the output and the new cache rows: atol 1e-5,
 * rtol 1e-4); every other cache entry keeps its bits (NaN past L), and the
 * output and caches are bit for bit those of clf_op_norm_dot (and
 * clf_op_rope_t) followed by clf_op_attn_decode on the same device (the
 * same sums in the same order).
 * Elsewhere the op's refusal is checked.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ops/ops.h"
#include "model/ops/ops_internal.h"
#include "tests/test_util.h"

static void decode_ref(double *out, const float *q, const float *k, const float *v, size_t BH,
                       size_t HS, size_t Tmax, size_t L, double scale)
{
    double *s = malloc(L * sizeof *s);
    for (size_t bh = 0; bh < BH; bh++) {
        const float *qq = q + bh * HS, *kk = k + bh * Tmax * HS, *vv = v + bh * Tmax * HS;
        double mx = -INFINITY, sum = 0;
        for (size_t j = 0; j < L; j++) {
            double a = 0;
            for (size_t d = 0; d < HS; d++)
                a += (double)qq[d] * kk[j * HS + d];
            s[j] = a * scale;
            mx = fmax(mx, s[j]);
        }
        for (size_t j = 0; j < L; j++) {
            s[j] = exp(s[j] - mx);
            sum += s[j];
        }
        for (size_t d = 0; d < HS; d++) {
            double a = 0;
            for (size_t j = 0; j < L; j++)
                a += s[j] * vv[j * HS + d];
            out[bh * HS + d] = a / sum;
        }
    }
    free(s);
}

/* Work-groups of W (0: the device's choice; 128: the GPU's), or W = ITEM:
 * the one-work-item-per-row kernel, so every kernel is tested on any device. */
#define ITEM ((size_t)-1)
/* The GPU's work-group (128), or the largest power of two the decode
 * kernel allows below it (Mesa's llvmpipe: 32). */
static size_t gpu_w(clf_runtime *rt)
{
    clf_kernel *k = NULL;
    clf_error err;
    tu_ok(clf_kernel_get(rt, "attention", "attn_decode", &k, &err), &err, "attn_decode");
    return clf_ops_group_size(k, 128);
}
/* 0 when it ran; 1 when the op refused, rightly, a work-group size the
 * device cannot run that long (a device that ends loops early). */
static int decode(clf_runtime *rt, size_t W, clf_ptr out, clf_ptr q, clf_ptr k, clf_ptr v, size_t B,
                  size_t NH, size_t HS, size_t Tmax, size_t L, float scale)
{
    clf_error err;
    const clf_attn_decode ad = {.out = out,
                                .q = q,
                                .kcache = k,
                                .vcache = v,
                                .B = B,
                                .NH = NH,
                                .HS = HS,
                                .Tmax = Tmax,
                                .L = L,
                                .scale = scale,
                                .group = W == ITEM ? 0 : W,
                                .item = W == ITEM};
    const clf_status st = clf_op_attn_decode(rt, &ad, &err);
    const unsigned lim = clf_runtime_device(rt)->loop_limit;
    if (st == CLF_ERR_UNSUPPORTED && lim != 0 && W != 0) {
        TU_CHECK(strstr(err.msg, "ends a work-item's loops") != NULL,
                 "W=%zu HS=%zu L=%zu refused for the loop limit: %s", W, HS, L, err.msg);
        printf("  skip attn_decode W=%zu HS=%zu L=%zu: %s\n", W, HS, L, err.msg);
        return 1;
    }
    tu_ok(st, &err, "attn_decode");
    return 0;
}

static void test_decode(clf_runtime *rt, size_t W, size_t B, size_t NH, size_t HS, size_t Tmax,
                        size_t L, float scale, tu_rng *r)
{
    size_t BH = B * NH, nq = BH * HS, nc = BH * Tmax * HS;
    float *q = malloc(nq * sizeof *q), *k = malloc(nc * sizeof *k), *v = malloc(nc * sizeof *v);
    float *got = malloc(nq * sizeof *got);
    double *ref = malloc(nq * sizeof *ref);
    tu_fill(r, q, nq, -1, 1);
    tu_fill(r, k, nc, -1, 1);
    tu_fill(r, v, nc, -1, 1);
    for (size_t bh = 0; bh < BH; bh++) /* stale cache entries past L */
        for (size_t j = L; j < Tmax; j++)
            for (size_t d = 0; d < HS; d++) {
                k[(bh * Tmax + j) * HS + d] = NAN;
                v[(bh * Tmax + j) * HS + d] = NAN;
            }
    /* tensors at element offsets 1, 2, 3 of their buffers */
    float *kp = malloc((nc + 2) * sizeof *kp), *vp = malloc((nc + 3) * sizeof *vp);
    kp[0] = kp[1] = 0;
    vp[0] = vp[1] = vp[2] = 0;
    memcpy(kp + 2, k, nc * sizeof *k);
    memcpy(vp + 3, v, nc * sizeof *v);
    clf_ptr dq = tu_upload(rt, q, nq), dkb = tu_upload(rt, kp, nc + 2);
    clf_ptr dvb = tu_upload(rt, vp, nc + 3), dob = tu_alloc(rt, nq + 1);
    if (!decode(rt, W, clf_ptr_at(dob, 1), dq, clf_ptr_at(dkb, 2), clf_ptr_at(dvb, 3), B, NH, HS,
                Tmax, L, scale)) {
        tu_download(rt, clf_ptr_at(dob, 1), got, nq);
        decode_ref(ref, q, k, v, BH, HS, Tmax, L, scale);
        char name[160];
        snprintf(name, sizeof name,
                 "attn_decode W=%zu B=%zu NH=%zu HS=%zu Tmax=%zu L=%zu scale=%.3g", W, B, NH, HS,
                 Tmax, L, (double)scale);
        tu_close(name, got, ref, nq, 1e-5, 1e-4);
    }
    tu_free(dq);
    tu_free(dkb);
    tu_free(dvb);
    tu_free(dob);
    free(q);
    free(k);
    free(v);
    free(kp);
    free(vp);
    free(got);
    free(ref);
}

static void decode_ref_keep(double *out, const float *q, const float *k, const float *v,
                            const int32_t *keep, size_t B, size_t NH, size_t HS, size_t Tmax,
                            size_t L, double scale)
{
    for (size_t bh = 0; bh < B * NH; bh++) {
        const int32_t *kp = keep + (bh / NH) * L;
        const float *qq = q + bh * HS, *kk = k + bh * Tmax * HS, *vv = v + bh * Tmax * HS;
        double mx = -INFINITY, sum = 0;
        for (size_t j = 0; j < L; j++)
            if (kp[j]) {
                double a = 0;
                for (size_t d = 0; d < HS; d++)
                    a += (double)qq[d] * kk[j * HS + d];
                mx = fmax(mx, a * scale);
            }
        for (size_t d = 0; d < HS; d++)
            out[bh * HS + d] = 0;
        for (size_t j = 0; j < L; j++)
            if (kp[j]) {
                double a = 0;
                for (size_t d = 0; d < HS; d++)
                    a += (double)qq[d] * kk[j * HS + d];
                double e = exp(a * scale - mx);
                sum += e;
                for (size_t d = 0; d < HS; d++)
                    out[bh * HS + d] += e * vv[j * HS + d];
            }
        for (size_t d = 0; d < HS; d++)
            out[bh * HS + d] = sum > 0 ? out[bh * HS + d] / sum : 0;
    }
}

/* One decode case: W work-items a group (0: the device's; ITEM), B rows,
 * NH query heads on KVH K/V heads (0: NH; fewer: grouped-query attention,
 * query head h reading K/V head h / (NH / KVH)), head size, cache length,
 * positions, P splits; masked: a keep mask with whole ranges and (for
 * B > 1) the last row empty; fresh: position L - 1's keys and values given
 * as rows of a fused qkv (clf_attn_decode.kn, vn), the caches holding NaN
 * there until the launch stores them. */
typedef struct dcase {
    size_t W, B, NH, KVH, HS, Tmax, L, P;
    int masked, fresh;
} dcase;

static void test_split(clf_runtime *rt, const dcase *c, tu_rng *r)
{
    const size_t B = c->B, NH = c->NH, HS = c->HS, Tmax = c->Tmax, L = c->L, P = c->P;
    const size_t KVH = c->KVH ? c->KVH : NH, grp = NH / KVH;
    const size_t BH = B * NH, nq = BH * HS, nc = B * KVH * Tmax * HS, ne = BH * Tmax * HS;
    float *q = malloc(nq * sizeof *q), *k = malloc(nc * sizeof *k), *v = malloc(nc * sizeof *v);
    float *ke = malloc(ne * sizeof *ke), *ve = malloc(ne * sizeof *ve);
    float *got = malloc(nq * sizeof *got), *again = malloc(nq * sizeof *again);
    double *ref = malloc(nq * sizeof *ref);
    int32_t *keep = malloc(B * L * sizeof *keep);
    tu_fill(r, q, nq, -1, 1);
    tu_fill(r, k, nc, -1, 1);
    tu_fill(r, v, nc, -1, 1);
    /* the reference's caches: each query head's own copy of its K/V head */
    for (size_t bh = 0; bh < BH; bh++) {
        const size_t src = ((bh / NH) * KVH + (bh % NH) / grp) * Tmax * HS;
        memcpy(ke + bh * Tmax * HS, k + src, Tmax * HS * sizeof *k);
        memcpy(ve + bh * Tmax * HS, v + src, Tmax * HS * sizeof *v);
    }
    const size_t chunk = (L + P - 1) / P;
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < L; j++)
            keep[b * L + j] =
                !c->masked || ((j / chunk) % 2 == 0 && (B == 1 || b + 1 < B) && (j % 3 != 1));
    const float scale = (float)(1 / sqrt((double)HS));
    /* fresh: the new position's rows [B, 3 x KVH x HS] (q's columns unused,
     * k then v), the caches NaN at L - 1 */
    const size_t nst = 3 * KVH * HS;
    float *qkv = malloc(B * nst * sizeof *qkv), *kd = malloc(nc * sizeof *kd);
    float *vd = malloc(nc * sizeof *vd);
    tu_fill(r, qkv, B * nst, -1, 1);
    memcpy(kd, k, nc * sizeof *k);
    memcpy(vd, v, nc * sizeof *v);
    if (c->fresh)
        for (size_t b = 0; b < B; b++)
            for (size_t j = 0; j < KVH; j++)
                for (size_t d = 0; d < HS; d++) {
                    const size_t at = ((b * KVH + j) * Tmax + L - 1) * HS + d;
                    kd[at] = vd[at] = NAN;
                    qkv[b * nst + KVH * HS + j * HS + d] = k[at];
                    qkv[b * nst + 2 * KVH * HS + j * HS + d] = v[at];
                }
    clf_ptr dq = tu_upload(rt, q, nq), dk = tu_upload(rt, kd, nc), dv = tu_upload(rt, vd, nc);
    clf_ptr dn = tu_upload(rt, qkv, B * nst);
    clf_ptr dkeep = tu_alloc(rt, B * L), dout = tu_alloc(rt, nq);
    clf_ptr part = tu_alloc(rt, BH * P * (HS + 2));
    clf_error err;
    tu_ok(clf_buffer_write(rt, dkeep.buf, dkeep.off * 4, keep, B * L * 4, &err), &err, "keep");
    clf_ptr kp = c->masked ? dkeep : (clf_ptr){NULL, 0};
    const clf_attn_decode ad = {.out = dout,
                                .q = dq,
                                .kcache = dk,
                                .vcache = dv,
                                .keep = kp,
                                .scratch = part,
                                .keep_stride = L,
                                .B = B,
                                .NH = NH,
                                .HS = HS,
                                .Tmax = Tmax,
                                .L = L,
                                .kv_heads = c->KVH,
                                .scale = scale,
                                .splits = P,
                                .group = c->W == ITEM ? 0 : c->W,
                                .item = c->W == ITEM,
                                .kn = c->fresh ? clf_ptr_at(dn, KVH * HS) : (clf_ptr){NULL, 0},
                                .vn = c->fresh ? clf_ptr_at(dn, 2 * KVH * HS) : (clf_ptr){0},
                                .n_stride = nst};
    tu_ok(clf_op_attn_decode(rt, &ad, &err), &err, "attn_decode split");
    tu_download(rt, dout, got, nq);
    tu_ok(clf_op_attn_decode(rt, &ad, &err), &err, "attn_decode split again");
    tu_download(rt, dout, again, nq);
    if (c->masked)
        decode_ref_keep(ref, q, ke, ve, keep, B, NH, HS, Tmax, L, scale);
    else
        decode_ref(ref, q, ke, ve, BH, HS, Tmax, L, scale);
    char name[160], shape[24];
    snprintf(shape, sizeof shape, c->W == ITEM ? "item" : "W=%zu", c->W);
    snprintf(name, sizeof name, "attn_decode split P=%zu %s B=%zu NH=%zu KV=%zu HS=%zu L=%zu%s%s",
             P, shape, B, NH, KVH, HS, L, c->masked ? " masked" : "", c->fresh ? " fresh" : "");
    tu_close(name, got, ref, nq, 1e-5, 1e-4);
    if (c->fresh) { /* the caches now hold the new rows at L - 1, the rest as it was */
        tu_download(rt, dk, kd, nc);
        tu_download(rt, dv, vd, nc);
        TU_CHECK(memcmp(kd, k, nc * sizeof *k) == 0 && memcmp(vd, v, nc * sizeof *v) == 0,
                 "%s: the launch stored the new keys and values, nothing else", name);
    }
    TU_CHECK(memcmp(got, again, nq * sizeof *got) == 0, "%s: reruns are bit-identical", name);
    if (KVH > 1) {
        clf_attn_decode bad = ad;
        bad.kv_heads = NH + 1;
        TU_CHECK(clf_op_attn_decode(rt, &bad, &err) == CLF_ERR_ARG,
                 "%s: K/V heads that do not divide the query heads are refused", name);
    }
    tu_free(dq);
    tu_free(dk);
    tu_free(dv);
    tu_free(dn);
    free(qkv);
    free(kd);
    free(vd);
    tu_free(dkeep);
    tu_free(dout);
    tu_free(part);
    free(q);
    free(k);
    free(v);
    free(ke);
    free(ve);
    free(got);
    free(again);
    free(ref);
    free(keep);
}

static void test_splits(clf_runtime *rt, tu_rng *r)
{
    const size_t Ps[] = {1, 2, 3, 7};
    for (int i = 0; i < 4; i++)
        for (int masked = 0; masked < 2; masked++) {
            const size_t P = Ps[i];
            test_split(rt, &(dcase){0, 2, 3, 0, 16, 40, 37, P, masked, 0}, r);
            test_split(rt, &(dcase){gpu_w(rt), 1, 2, 0, 64, 300, 257, P, masked, 0}, r);
            /* HS % 8 != 0 */
            test_split(rt, &(dcase){ITEM, 2, 2, 0, 20, 300, 257, P, masked, 0}, r);
            /* grouped-query attention: 2 query heads a K/V head; multi-query */
            test_split(rt, &(dcase){0, 2, 4, 2, 16, 40, 37, P, masked, 0}, r);
            test_split(rt, &(dcase){ITEM, 2, 4, 1, 16, 40, 37, P, masked, 0}, r);
            test_split(rt, &(dcase){gpu_w(rt), 1, 8, 2, 32, 100, 97, P, masked, 0}, r);
            /* the new position's keys and values stored by the launch */
            test_split(rt, &(dcase){ITEM, 2, 4, 2, 16, 40, 37, P, masked, 1}, r);
            test_split(rt, &(dcase){gpu_w(rt), 2, 3, 0, 20, 40, 37, P, masked, 1}, r);
            test_split(rt, &(dcase){0, 1, 8, 2, 32, 100, 97, P, masked, 1}, r);
        }
    test_split(rt, &(dcase){0, 1, 2, 0, 8, 9, 9, 9, 1, 0}, r); /* ranges of one position */
    test_split(rt, &(dcase){ITEM, 1, 2, 0, 8, 9, 9, 9, 0, 1}, r);
    if (!tu_simulator())
        test_split(rt, &(dcase){0, 1, 4, 0, 64, 4096, 4096, 16, 0, 0}, r); /* a long context */
    clf_error err;
    const size_t P = clf_op_attn_decode_splits(rt, 2, 4096);
    const size_t need = 2 * P * (64 + 2), have = clf_op_attn_decode_scratch(rt, 2, 4096, 64);
    TU_CHECK(P >= 1 && (P == 1 || need <= have),
             "the device's choice of splits (%zu for 2 rows of 4096) fits its scratch bound "
             "(%zu of %zu floats)",
             P, need, have);
    /* the bound over every row count up to 40 and a context of 1000: each
     * call's rows x splits fit; and contexts too short to split need none */
    const size_t bound = clf_op_attn_decode_scratch(rt, 40, 1000, 16);
    int fits = 1;
    for (size_t rows = 1; rows <= 40; rows++)
        for (size_t L = 1; L <= 1000; L += 37) {
            const size_t p = clf_op_attn_decode_splits(rt, rows, L);
            fits = fits && (p == 1 || rows * p * 18 <= bound);
        }
    TU_CHECK(fits && clf_op_attn_decode_scratch(rt, 64, 255, 64) == 0,
             "the scratch bound holds every call up to its sizes (%zu floats for 40 rows of "
             "1000), and none is needed below 256 positions",
             bound);
    TU_CHECK(clf_runtime_device(rt)->serial_groups ? P == 1 : 1,
             "no splits where work-groups run item by item");
    clf_ptr a = tu_alloc(rt, 64);
    clf_attn_decode small = {.out = a,
                             .q = a,
                             .kcache = a,
                             .vcache = a,
                             .scratch = a,
                             .B = 1,
                             .NH = 1,
                             .HS = 4,
                             .Tmax = 8,
                             .L = 4,
                             .scale = 1.0f,
                             .splits = 5};
    TU_CHECK(clf_op_attn_decode(rt, &small, &err) == CLF_ERR_ARG,
             "more splits than positions are refused");
    small.splits = 2;
    small.scratch = (clf_ptr){NULL, 0};
    TU_CHECK(clf_op_attn_decode(rt, &small, &err) == CLF_ERR_ARG,
             "splits without scratch are refused: %s", err.msg);
    tu_free(a);
}

/* A sliding window (the last W positions) and ALiBi biases (-slope_h (L - 1
 * - j)), with q read inside rows of 3C floats (a fused qkv) and P ranges,
 * against float64. */
static void test_window_alibi(clf_runtime *rt, size_t W, int alibi, size_t P, tu_rng *r)
{
    const size_t B = 2, NH = 3, HS = 16, Tmax = 70, L = 61, C = NH * HS, BH = B * NH;
    const size_t nq = B * 3 * C, nc = BH * Tmax * HS;
    float *q = malloc(nq * sizeof *q), *k = malloc(nc * sizeof *k), *v = malloc(nc * sizeof *v);
    float *got = malloc(BH * HS * sizeof *got);
    double *ref = malloc(BH * HS * sizeof *ref), sc[70];
    tu_fill(r, q, nq, -1, 1);
    tu_fill(r, k, nc, -1, 1);
    tu_fill(r, v, nc, -1, 1);
    const double scale = 1.0 / sqrt((double)HS);
    const size_t lo = W > 0 && L > W ? L - W : 0;
    for (size_t bh = 0; bh < BH; bh++) {
        const size_t b = bh / NH, h = bh % NH;
        const double slope = tu_alibi_slope(h, NH);
        const float *qq = q + b * 3 * C + h * HS;
        double mx = -INFINITY, sum = 0;
        for (size_t j = lo; j < L; j++) {
            double a = 0;
            for (size_t d = 0; d < HS; d++)
                a += (double)qq[d] * k[(bh * Tmax + j) * HS + d];
            sc[j] = a * scale - (alibi ? slope * (double)(L - 1 - j) : 0.0);
            mx = fmax(mx, sc[j]);
        }
        for (size_t j = lo; j < L; j++)
            sum += (sc[j] = exp(sc[j] - mx));
        for (size_t d = 0; d < HS; d++) {
            double a = 0;
            for (size_t j = lo; j < L; j++)
                a += sc[j] * v[(bh * Tmax + j) * HS + d];
            ref[bh * HS + d] = a / sum;
        }
    }
    clf_ptr dq = tu_upload(rt, q, nq), dk = tu_upload(rt, k, nc), dv = tu_upload(rt, v, nc);
    clf_ptr out = tu_alloc(rt, BH * HS), part = tu_alloc(rt, BH * P * (HS + 2));
    const clf_attn_decode ad = {.out = out,
                                .q = dq,
                                .q_stride = 3 * C,
                                .kcache = dk,
                                .vcache = dv,
                                .scratch = part,
                                .B = B,
                                .NH = NH,
                                .HS = HS,
                                .Tmax = Tmax,
                                .L = L,
                                .scale = (float)scale,
                                .window = W,
                                .alibi = alibi,
                                .splits = P};
    clf_error err;
    tu_ok(clf_op_attn_decode(rt, &ad, &err), &err, "attn_decode (window, alibi)");
    tu_download(rt, out, got, BH * HS);
    char name[160];
    snprintf(name, sizeof name, "attn_decode window=%zu alibi=%d splits=%zu, q in qkv rows", W,
             alibi, P);
    tu_close(name, got, ref, BH * HS, 1e-5, 1e-4);
    tu_free(dq);
    tu_free(dk);
    tu_free(dv);
    tu_free(out);
    tu_free(part);
    free(q);
    free(k);
    free(v);
    free(got);
    free(ref);
}

/* Decoding's fused norm + qkv + attention (clf_op_attn_qkv_decode) for
 * rows x [B, C]: norm 0 LayerNorm, 1 LayerNorm with its bias, 2 RMSNorm;
 * bias: the qkv linear's. */
typedef struct qcase {
    size_t B, NH, KVH, HS, C, Tmax, L, window;
    int norm, bias, alibi;
    const clf_rope *rope; /* NULL: none */
} qcase;

/* RoPE's rotation of x[0..HS) at position p in float64 (clf_rope's
 * frequencies, cos and sin times mscale), pairs (i, i + HS/2). */
static void rope_ref(double *x, size_t HS, double p, const clf_rope *r)
{
    for (size_t i = 0; i < HS / 2; i++) {
        double f = pow((double)r->theta, -2.0 * (double)i / (double)HS);
        if (r->factor != 1.0f) {
            double t = ((double)i - r->ramp_lo) / ((double)r->ramp_hi - r->ramp_lo);
            const double e = 1.0 - (t < 0 ? 0 : t > 1 ? 1 : t);
            f = f / r->factor * (1.0 - e) + f * e;
        }
        const double cs = cos(p * f) * r->mscale, sn = sin(p * f) * r->mscale;
        const double x1 = x[i], x2 = x[i + HS / 2];
        x[i] = x1 * cs - x2 * sn;
        x[i + HS / 2] = x2 * cs + x1 * sn;
    }
}

static void test_qkv_decode(clf_runtime *rt, const qcase *c, tu_rng *r)
{
    const size_t B = c->B, NH = c->NH, KVH = c->KVH, HS = c->HS, C = c->C, Tmax = c->Tmax;
    const size_t L = c->L, grp = NH / KVH, QKV = (NH + 2 * KVH) * HS, nc = B * KVH * Tmax * HS;
    const size_t lo = c->window > 0 && L > c->window ? L - c->window : 0;
    const double eps = 1e-5, scale = 1.0 / sqrt((double)HS);
    float *x = malloc(B * C * sizeof *x), *nw = malloc(C * sizeof *nw),
          *nb = malloc(C * sizeof *nb);
    float *W = malloc(QKV * C * sizeof *W), *bias = malloc(QKV * sizeof *bias);
    float *k = malloc(nc * sizeof *k), *v = malloc(nc * sizeof *v);
    float *got = malloc(B * NH * HS * sizeof *got), *gk = malloc(nc * sizeof *gk);
    float *gv = malloc(nc * sizeof *gv), *uo = malloc(B * NH * HS * sizeof *uo);
    float *uk = malloc(nc * sizeof *uk), *uv = malloc(nc * sizeof *uv);
    double *y = malloc(B * QKV * sizeof *y), *ref = malloc(B * NH * HS * sizeof *ref);
    double *rk = malloc(B * KVH * HS * sizeof *rk), *rv = malloc(B * KVH * HS * sizeof *rv);
    double *sc = malloc(L * sizeof *sc);
    tu_fill(r, x, B * C, -2, 2);
    tu_fill(r, nw, C, 0.5f, 1.5f);
    tu_fill(r, nb, C, -0.5f, 0.5f);
    tu_fill(r, W, QKV * C, -1.5f / sqrtf((float)C), 1.5f / sqrtf((float)C));
    tu_fill(r, bias, QKV, -0.5f, 0.5f);
    tu_fill(r, k, nc, -1, 1);
    tu_fill(r, v, nc, -1, 1);
    for (size_t g = 0; g < B * KVH; g++) /* the new row's old contents, and stale rows past L */
        for (size_t j = L - 1; j < Tmax; j++)
            for (size_t d = 0; d < HS; d++)
                k[(g * Tmax + j) * HS + d] = v[(g * Tmax + j) * HS + d] = NAN;
    /* float64: the norm, the linear, the attention (K/V head h / grp) */
    for (size_t b = 0; b < B; b++) {
        const float *xr = x + b * C;
        double mean = 0, var = 0;
        for (size_t i = 0; i < C; i++)
            mean += c->norm == 2 ? 0.0 : xr[i];
        mean /= (double)C;
        for (size_t i = 0; i < C; i++)
            var += ((double)xr[i] - mean) * ((double)xr[i] - mean);
        const double rs = 1.0 / sqrt(var / (double)C + eps);
        for (size_t o = 0; o < QKV; o++) {
            double a = c->bias ? bias[o] : 0.0;
            for (size_t i = 0; i < C; i++) {
                double h = ((double)xr[i] - mean) * rs * nw[i] + (c->norm == 1 ? nb[i] : 0.0);
                a += h * W[o * C + i];
            }
            y[b * QKV + o] = a;
        }
        if (c->rope != NULL) /* q's and k's heads turned to position L - 1 */
            for (size_t h = 0; h < NH + KVH; h++)
                rope_ref(y + b * QKV + h * HS, HS, (double)(L - 1), c->rope);
        for (size_t j = 0; j < KVH; j++)
            for (size_t d = 0; d < HS; d++) {
                rk[(b * KVH + j) * HS + d] = y[b * QKV + NH * HS + j * HS + d];
                rv[(b * KVH + j) * HS + d] = y[b * QKV + (NH + KVH) * HS + j * HS + d];
            }
        for (size_t h = 0; h < NH; h++) {
            const size_t g = b * KVH + h / grp;
            const double slope = c->alibi ? tu_alibi_slope(h, NH) : 0.0;
            double mx = -INFINITY, sum = 0;
            for (size_t s = lo; s < L; s++) {
                double a = 0;
                for (size_t d = 0; d < HS; d++)
                    a += y[b * QKV + h * HS + d] *
                         (s == L - 1 ? rk[g * HS + d] : (double)k[(g * Tmax + s) * HS + d]);
                sc[s] = a * scale - slope * (double)(L - 1 - s);
                mx = fmax(mx, sc[s]);
            }
            for (size_t s = lo; s < L; s++)
                sum += (sc[s] = exp(sc[s] - mx));
            for (size_t d = 0; d < HS; d++) {
                double a = 0;
                for (size_t s = lo; s < L; s++)
                    a += sc[s] * (s == L - 1 ? rv[g * HS + d] : (double)v[(g * Tmax + s) * HS + d]);
                ref[(b * NH + h) * HS + d] = a / sum;
            }
        }
    }
    clf_ptr dx = tu_upload(rt, x, B * C), dnw = tu_upload(rt, nw, C), dnb = tu_upload(rt, nb, C);
    clf_ptr dW = tu_upload(rt, W, QKV * C), dbias = tu_upload(rt, bias, QKV);
    clf_ptr dk = tu_upload(rt, k, nc), dv = tu_upload(rt, v, nc), dout = tu_alloc(rt, B * NH * HS);
    clf_attn_qkv_decode q = {.rms = c->norm == 2,
                             .x = dx,
                             .w = dnw,
                             .b = c->norm == 1 ? dnb : (clf_ptr){0},
                             .eps = (float)eps,
                             .W = dW,
                             .bias = c->bias ? dbias : (clf_ptr){0},
                             .out = dout,
                             .kcache = dk,
                             .vcache = dv,
                             .B = B,
                             .C = C,
                             .NH = NH,
                             .kv_heads = KVH,
                             .HS = HS,
                             .Tmax = Tmax,
                             .L = L,
                             .window = c->window,
                             .scale = (float)scale,
                             .alibi = c->alibi,
                             .rope = c->rope};
    char name[200];
    snprintf(name, sizeof name,
             "attn_qkv_decode B=%zu NH=%zu KVH=%zu HS=%zu C=%zu L=%zu/%zu window=%zu %s bias=%d "
             "alibi=%d rope=%s",
             B, NH, KVH, HS, C, L, Tmax, c->window,
             c->norm == 2 ? "rmsnorm"
             : c->norm    ? "layernorm+b"
                          : "layernorm",
             c->bias, c->alibi,
             c->rope == NULL           ? "no"
             : c->rope->factor != 1.0f ? "yarn"
                                       : "yes");
    clf_error err;
    const clf_status st = clf_op_attn_qkv_decode(rt, &q, &err);
    if (!clf_ops_serial(rt)) {
        TU_CHECK(st == CLF_ERR_ARG, "%s: refused where work-groups run in parallel", name);
        goto done;
    }
    tu_ok(st, &err, name);
    tu_download(rt, dout, got, B * NH * HS);
    tu_download(rt, dk, gk, nc);
    tu_download(rt, dv, gv, nc);
    tu_close(name, got, ref, B * NH * HS, 1e-5, 1e-4);
    /* the new rows against float64; every other entry keeps its bits */
    double *rkv = malloc(2 * B * KVH * HS * sizeof *rkv);
    float *new_kv = malloc(2 * B * KVH * HS * sizeof *new_kv);
    int kept = 1;
    for (size_t g = 0; g < B * KVH; g++)
        for (size_t j = 0; j < Tmax; j++)
            for (size_t d = 0; d < HS; d++) {
                const size_t i = (g * Tmax + j) * HS + d;
                if (j == L - 1) {
                    new_kv[g * HS + d] = gk[i];
                    new_kv[(B * KVH + g) * HS + d] = gv[i];
                    rkv[g * HS + d] = rk[g * HS + d];
                    rkv[(B * KVH + g) * HS + d] = rv[g * HS + d];
                } else if (memcmp(&gk[i], &k[i], 4) != 0 || memcmp(&gv[i], &v[i], 4) != 0)
                    kept = 0;
            }
    char kvname[240];
    snprintf(kvname, sizeof kvname, "%s: new cache rows", name);
    tu_close(kvname, new_kv, rkv, 2 * B * KVH * HS, 1e-5, 1e-4);
    TU_CHECK(kept, "%s: every other cache entry keeps its bits", name);
    free(rkv);
    free(new_kv);
    /* the unfused ops on the same device: norm_dot into qkv rows, then the
     * decode kernel reading the new keys and values from them */
    clf_ptr qkv = tu_alloc(rt, B * QKV), uk_d = tu_upload(rt, k, nc), uv_d = tu_upload(rt, v, nc);
    clf_ptr uout = tu_alloc(rt, B * NH * HS);
    const clf_norm_dot_args nd = {.rms = q.rms,
                                  .x = dx,
                                  .w = dnw,
                                  .b = q.b,
                                  .eps = q.eps,
                                  .W = dW,
                                  .bias = q.bias,
                                  .act = CLF_ACTCODE_NONE,
                                  .y = qkv,
                                  .ldy = QKV,
                                  .R = B,
                                  .C = C,
                                  .N = QKV};
    const clf_attn_decode ad = {.out = uout,
                                .q = qkv,
                                .q_stride = QKV,
                                .kcache = uk_d,
                                .vcache = uv_d,
                                .kv_heads = KVH,
                                .B = B,
                                .NH = NH,
                                .HS = HS,
                                .Tmax = Tmax,
                                .L = L,
                                .scale = q.scale,
                                .window = c->window,
                                .alibi = c->alibi,
                                .splits = 1,
                                .item = 1,
                                .kn = clf_ptr_at(qkv, NH * HS),
                                .vn = clf_ptr_at(qkv, (NH + KVH) * HS),
                                .n_stride = QKV};
    tu_ok(clf_op_norm_dot(rt, &nd, &err), &err, "norm_dot");
    if (c->rope != NULL) {
        const clf_heads hq = {qkv, CLF_DT_F32, B, 1, NH, HS, QKV};
        const clf_heads hk = {clf_ptr_at(qkv, NH * HS), CLF_DT_F32, B, 1, KVH, HS, QKV};
        tu_ok(clf_op_rope_t(rt, &hq, L - 1, (clf_ptr){0}, c->rope, 0, &err), &err, "rope q");
        tu_ok(clf_op_rope_t(rt, &hk, L - 1, (clf_ptr){0}, c->rope, 0, &err), &err, "rope k");
    }
    tu_ok(clf_op_attn_decode(rt, &ad, &err), &err, "attn_decode");
    tu_download(rt, uout, uo, B * NH * HS);
    tu_download(rt, uk_d, uk, nc);
    tu_download(rt, uv_d, uv, nc);
    TU_CHECK(memcmp(uo, got, B * NH * HS * sizeof *got) == 0 &&
                 memcmp(uk, gk, nc * sizeof *gk) == 0 && memcmp(uv, gv, nc * sizeof *gv) == 0,
             "%s: bit for bit the unfused norm_dot and attn_decode", name);
    tu_free(qkv);
    tu_free(uk_d);
    tu_free(uv_d);
    tu_free(uout);
done:
    tu_free(dx);
    tu_free(dnw);
    tu_free(dnb);
    tu_free(dW);
    tu_free(dbias);
    tu_free(dk);
    tu_free(dv);
    tu_free(dout);
    free(x);
    free(nw);
    free(nb);
    free(W);
    free(bias);
    free(k);
    free(v);
    free(got);
    free(gk);
    free(gv);
    free(uo);
    free(uk);
    free(uv);
    free(y);
    free(ref);
    free(rk);
    free(rv);
    free(sc);
}

static void test_qkv_decodes(clf_runtime *rt, tu_rng *r)
{
    const clf_rope rope = {.theta = 10000.0f, .factor = 1.0f, .ramp_hi = 1.0f, .mscale = 1.0f};
    const clf_rope yarn = {
        .theta = 500.0f, .factor = 4.0f, .ramp_lo = 1.0f, .ramp_hi = 6.0f, .mscale = 1.1f};
    const qcase cases[] = {
        /* the benchmark's cpu model: 4 heads of 32, C 128, a full context */
        {.B = 1, .NH = 4, .KVH = 4, .HS = 32, .C = 128, .Tmax = 64, .L = 64},
        /* grouped-query heads, HS and C off 16, LayerNorm's bias, the linear's */
        {.B = 2, .NH = 4, .KVH = 2, .HS = 20, .C = 70, .Tmax = 40, .L = 33, .norm = 1, .bias = 1},
        /* one K/V head (multi-query), RMSNorm, a window, ALiBi */
        {.B = 3,
         .NH = 3,
         .KVH = 1,
         .HS = 16,
         .C = 48,
         .Tmax = 30,
         .L = 17,
         .window = 5,
         .norm = 2,
         .bias = 1,
         .alibi = 1},
        /* the first position; a window wider than the context */
        {.B = 1, .NH = 2, .KVH = 2, .HS = 1, .C = 3, .Tmax = 4, .L = 1, .window = 200, .alibi = 1},
        /* a head wider than a block of columns, a window of one position */
        {.B = 2, .NH = 2, .KVH = 1, .HS = 40, .C = 33, .Tmax = 12, .L = 9, .window = 1, .norm = 1},
        /* rotary positions (the Llama layout: RMSNorm, grouped-query heads) */
        {.B = 1,
         .NH = 4,
         .KVH = 2,
         .HS = 32,
         .C = 128,
         .Tmax = 70,
         .L = 61,
         .norm = 2,
         .rope = &rope},
        /* YaRN's scaled rotary positions, HS off 16, LayerNorm, biases */
        {.B = 2,
         .NH = 2,
         .KVH = 2,
         .HS = 20,
         .C = 40,
         .Tmax = 50,
         .L = 47,
         .norm = 1,
         .bias = 1,
         .rope = &yarn},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_qkv_decode(rt, &cases[i], r);
    clf_error err;
    clf_ptr a = tu_alloc(rt, 64);
    clf_attn_qkv_decode bad = {.x = a,
                               .w = a,
                               .W = a,
                               .out = a,
                               .kcache = a,
                               .vcache = a,
                               .B = 1,
                               .C = 2,
                               .NH = 2,
                               .kv_heads = 2,
                               .HS = 2,
                               .Tmax = 4,
                               .L = 0,
                               .scale = 1.0f};
    TU_CHECK(clf_op_attn_qkv_decode(rt, &bad, &err) == CLF_ERR_ARG,
             "attn_qkv_decode refuses L = 0");
    bad.L = 5;
    TU_CHECK(clf_op_attn_qkv_decode(rt, &bad, &err) == CLF_ERR_ARG,
             "attn_qkv_decode refuses L > Tmax");
    bad.L = 2;
    bad.NH = 3;
    TU_CHECK(clf_op_attn_qkv_decode(rt, &bad, &err) == CLF_ERR_ARG,
             "attn_qkv_decode refuses K/V heads that do not divide the heads");
    bad.NH = 2;
    bad.HS = ATTN_ITEM_HS_MAX + 1;
    TU_CHECK(clf_op_attn_qkv_decode(rt, &bad, &err) == CLF_ERR_ARG,
             "attn_qkv_decode refuses a head over %d", ATTN_ITEM_HS_MAX);
    tu_free(a);
}

/* Sparse attention's decoding keep rows (attn_sparse_keep) against the
 * definition, for every position L of a context; and linformer's row mask
 * (attn_rows_mask): exactly the masked rows' columns become 0, everything
 * else keeps its bits. */
static void test_mask_kernels(clf_runtime *rt, tu_rng *r)
{
    clf_error err;
    const size_t B = 3, Tm = 70, bs = 16, nb = (Tm + bs - 1) / bs, R = 2;
    int32_t rnd[(70 + 15) / 16 * 2];
    clf_attn_sparse_draw(rnd, nb, R, 99);
    clf_attn_fused a = {.window = 5, .glob = 3, .stride = 7, .sp_bs = bs, .sp_nb = nb, .sp_R = R};
    a.sp = tu_upload_i32(rt, rnd, nb * R);
    clf_ptr keep = tu_alloc(rt, B * Tm);
    float *got = malloc(B * Tm * sizeof *got);
    size_t bad = 0;
    for (size_t L = 1; L <= Tm; L += 3) {
        tu_ok(clf_op_sparse_keep(rt, keep, Tm, B, L, &a, &err), &err, "sparse_keep");
        tu_download(rt, keep, got, B * Tm);
        for (size_t b = 0; b < B; b++)
            for (size_t s = 0; s < L; s++) {
                const size_t tq = L - 1;
                int in = s + a.window > tq || s < a.glob || (tq - s) % a.stride == 0;
                for (size_t k = 0; k < R; k++)
                    in |= rnd[tq / bs * R + k] == (int32_t)(s / bs);
                int32_t v;
                memcpy(&v, &got[b * Tm + s], sizeof v);
                bad += v != in;
            }
    }
    TU_CHECK(bad == 0, "sparse_keep: every position's keep row as the pattern says (%zu wrong)",
             bad);
    /* rows_mask: columns [4, 9) of rows of 11 */
    const size_t rows = 13, stride = 11;
    float *x = malloc(rows * stride * sizeof *x), *y = malloc(rows * stride * sizeof *y);
    int32_t km[13];
    tu_fill(r, x, rows * stride, -1, 1);
    for (size_t i = 0; i < rows; i++)
        km[i] = (int32_t)(tu_u32(r) % 2);
    clf_ptr dx = tu_upload(rt, x, rows * stride), dk = tu_upload_i32(rt, km, rows);
    tu_ok(clf_op_rows_mask(rt, dx, stride, 4, 5, dk, rows, &err), &err, "rows_mask");
    tu_download(rt, dx, y, rows * stride);
    bad = 0;
    for (size_t i = 0; i < rows; i++)
        for (size_t c = 0; c < stride; c++) {
            const float want = !km[i] && c >= 4 && c < 9 ? 0.0f : x[i * stride + c];
            bad += memcmp(&y[i * stride + c], &want, sizeof want) != 0;
        }
    TU_CHECK(bad == 0,
             "rows_mask: the masked rows' columns zeroed, every other bit kept (%zu "
             "wrong)",
             bad);
    tu_free(a.sp);
    tu_free(keep);
    tu_free(dx);
    tu_free(dk);
    free(got);
    free(x);
    free(y);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng r = tu_rng_new(4);
    test_mask_kernels(rt, &r);
    const size_t Ws[] = {0, gpu_w(rt), 1, ITEM};
    for (int i = 0; i < 4; i++) {
        size_t W = Ws[i];
        test_decode(rt, W, 1, 1, 1, 1, 1, 1.0f, &r);
        test_decode(rt, W, 2, 3, 7, 40, 33, (float)(1 / sqrt(7.0)), &r);
        test_decode(rt, W, 1, 4, 32, 64, 64, (float)(1 / sqrt(32.0)), &r);
        test_decode(rt, W, 2, 2, 64, 300, 257, 0.125f, &r);
        test_decode(rt, W, 1, 2, 128, 1100, 1000, (float)(1 / sqrt(128.0)), &r);
        test_decode(rt, W, 1, 6, 5, 9, 2, 1.0f, &r);
        test_decode(rt, W, 2, 2, 16, 50, 50, 30.0f, &r);
    }
    /* small groups over long ranges: right, or refused where the device
     * would end the items' loops early */
    for (size_t w = 1; w <= 4; w *= 2)
        for (size_t hs = 32; hs <= 128; hs *= 2)
            test_decode(rt, w, 1, 2, hs, 1010, 1000, 0.1f, &r);
    test_splits(rt, &r);
    test_qkv_decodes(rt, &r);

    const size_t windows[] = {0, 1, 16, 61, 200};
    for (int i = 0; i < 5; i++)
        for (int alibi = 0; alibi < 2; alibi++)
            for (size_t P = 1; P <= 3; P += 2) /* ranges: at most one per position seen */
                test_window_alibi(rt, windows[i], alibi, windows[i] == 1 ? 1 : P, &r);
    clf_error err;
    clf_ptr a = tu_alloc(rt, 64);
    clf_attn_decode bad = {.out = a,
                           .q = a,
                           .kcache = a,
                           .vcache = a,
                           .B = 1,
                           .NH = 1,
                           .HS = 4,
                           .Tmax = 8,
                           .L = 0,
                           .scale = 1.0f};
    TU_CHECK(clf_op_attn_decode(rt, &bad, &err) == CLF_ERR_ARG, "attn_decode refuses L = 0");
    bad.L = 9;
    TU_CHECK(clf_op_attn_decode(rt, &bad, &err) == CLF_ERR_ARG, "attn_decode refuses L > Tmax");
    tu_free(a);
    clf_runtime_destroy(rt);
    return tu_finish();
}
