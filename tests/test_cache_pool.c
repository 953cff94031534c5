/*
 * test_cache_pool.c - the KV-cache ops (kv_store, cache_gather, masked
 * decode attention: model/ops/attention.c, cl/attention.cl) and mean
 * pooling (model/ops/reduce.c, cl/reduce.cl) against a naive C reference (float64). Sizes include ones that are multiples of no
 * work-group size.
 *   - kv_store copies k and v rows out of a fused qkv buffer into
 *     positions [pos0, pos0 + T) of two [B, NH, Tmax, HS] caches and leaves
 *     every other cache entry untouched. Exact (a copy): atol = rtol = 0.
 *   - attn_decode_keep (one query against L of Tmax cached positions, with
 *     a keep mask per sequence; a sequence with nothing kept gives zeros):
 *     atol 1e-6, rtol 1e-5, both the channel-split (HS < work-group) and
 *     the per-channel (HS >= work-group) paths.
 *   - mean_pool forward (rows without kept positions give 0) and backward
 *     against the reference, atol 1e-6, rtol 1e-5; the backward also
 *     against central differences of the device forward: for the scalar
 *     L(x) = <w, pool(x)>, (L(x + h d) - L(x - h d)) / 2h with h = 1e-2
 *     (pooling is linear, so the difference has no truncation error) vs
 *     <backward(w), d>, |err| <= 1e-4 (1 + |ref|).
 *   - cache_gather: rows by index and by identity, the first len of each
 *     group of stride elements, the rest of dst untouched, bit for bit
 *     (int32 patterns that would be float denormals or NaNs included).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ops/ops.h"
#include "tests/test_util.h"

/* Keys at columns C.., values at 2C.. of rows of 3C (a fused qkv; with
 * swap, values first: the op reads both from the lower offset) into two
 * caches whose other entries must stay as they were. */
static void kv_case(clf_runtime *rt, tu_rng *g, size_t B, size_t T, size_t NH, size_t HS,
                    size_t Tmax, size_t pos0, int swap)
{
    size_t C = NH * HS, stride = 3 * C, nsrc = B * T * stride, ncache = B * NH * Tmax * HS;
    const size_t kc = swap ? 2 * C : C, vc = swap ? C : 2 * C;
    float *src = malloc(nsrc * sizeof *src), *cache = malloc(2 * ncache * sizeof *cache);
    double *ref = malloc(2 * ncache * sizeof *ref);
    tu_fill(g, src, nsrc, -1, 1);
    tu_fill(g, cache, 2 * ncache, -1, 1);
    for (size_t i = 0; i < 2 * ncache; i++)
        ref[i] = cache[i];
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            for (size_t h = 0; h < NH; h++)
                for (size_t d = 0; d < HS; d++) {
                    const size_t c = ((b * NH + h) * Tmax + pos0 + t) * HS + d;
                    ref[c] = src[(b * T + t) * stride + kc + h * HS + d];
                    ref[ncache + c] = src[(b * T + t) * stride + vc + h * HS + d];
                }
    clf_ptr ds = tu_upload(rt, src, nsrc), dc = tu_upload(rt, cache, 2 * ncache);
    clf_error e;
    const clf_heads hk = {clf_ptr_at(ds, kc), CLF_DT_F32, B, T, NH, HS, stride};
    const clf_heads hv = {clf_ptr_at(ds, vc), CLF_DT_F32, B, T, NH, HS, stride};
    tu_ok(clf_op_kv_store(rt, dc, clf_ptr_at(dc, ncache), &hk, &hv, Tmax, pos0, &e), &e,
          "kv_store");
    tu_download(rt, dc, cache, 2 * ncache);
    char name[128];
    snprintf(name, sizeof name, "kv_store B=%zu T=%zu NH=%zu HS=%zu Tmax=%zu pos0=%zu%s", B, T, NH,
             HS, Tmax, pos0, swap ? " (values first)" : "");
    tu_close(name, cache, ref, 2 * ncache, 0, 0);
    tu_free(ds);
    tu_free(dc);
    free(src);
    free(cache);
    free(ref);
}

static void decode_keep_case(clf_runtime *rt, tu_rng *g, size_t B, size_t NH, size_t HS,
                             size_t Tmax, size_t L, size_t stride)
{
    size_t nq = B * NH * HS, nc = B * NH * Tmax * HS;
    float *q = malloc(nq * sizeof *q), *k = malloc(nc * sizeof *k), *v = malloc(nc * sizeof *v);
    float *out = malloc(nq * sizeof *out);
    int32_t *keep = malloc(B * stride * sizeof *keep);
    double *ref = malloc(nq * sizeof *ref), *w = malloc(L * sizeof *w);
    tu_fill(g, q, nq, -1, 1);
    tu_fill(g, k, nc, -1, 1);
    tu_fill(g, v, nc, -1, 1);
    for (size_t i = 0; i < B * stride; i++)
        keep[i] = tu_u32(g) % 4 != 0;
    for (size_t b = 0; b < B; b++)
        keep[b * stride] = 1;
    if (B > 1) /* the last sequence keeps nothing */
        for (size_t s = 0; s < stride; s++)
            keep[(B - 1) * stride + s] = 0;
    const double scale = 1.0 / sqrt((double)HS);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < NH; h++) {
            size_t bh = b * NH + h;
            double mx = -1e300, sum = 0;
            for (size_t s = 0; s < L; s++) {
                double a = 0;
                for (size_t d = 0; d < HS; d++)
                    a += (double)q[bh * HS + d] * k[(bh * Tmax + s) * HS + d];
                w[s] = a * scale;
                if (keep[b * stride + s])
                    mx = fmax(mx, w[s]);
            }
            for (size_t s = 0; s < L; s++) {
                w[s] = keep[b * stride + s] ? exp(w[s] - mx) : 0.0;
                sum += w[s];
            }
            for (size_t d = 0; d < HS; d++) {
                double a = 0;
                for (size_t s = 0; s < L; s++)
                    a += w[s] * v[(bh * Tmax + s) * HS + d];
                ref[bh * HS + d] = sum > 0 ? a / sum : 0.0;
            }
        }
    clf_ptr dq = tu_upload(rt, q, nq), dk = tu_upload(rt, k, nc), dv = tu_upload(rt, v, nc);
    clf_ptr dkeep = tu_upload_i32(rt, keep, B * stride), dout = tu_alloc(rt, nq);
    clf_error e;
    const clf_attn_decode ad = {.out = dout,
                                .q = dq,
                                .kcache = dk,
                                .vcache = dv,
                                .keep = dkeep,
                                .keep_stride = stride,
                                .B = B,
                                .NH = NH,
                                .HS = HS,
                                .Tmax = Tmax,
                                .L = L,
                                .scale = (float)scale};
    tu_ok(clf_op_attn_decode(rt, &ad, &e), &e, "attn_decode_keep");
    tu_download(rt, dout, out, nq);
    char name[128];
    snprintf(name, sizeof name, "attn_decode_keep B=%zu NH=%zu HS=%zu Tmax=%zu L=%zu", B, NH, HS,
             Tmax, L);
    tu_close(name, out, ref, nq, 1e-6, 1e-5);
    tu_free(dq);
    tu_free(dk);
    tu_free(dv);
    tu_free(dkeep);
    tu_free(dout);
    free(q);
    free(k);
    free(v);
    free(out);
    free(keep);
    free(ref);
    free(w);
}

static void pool_case(clf_runtime *rt, tu_rng *g, size_t B, size_t S, size_t C)
{
    size_t nx = B * S * C, np = B * C;
    float *x = malloc(nx * sizeof *x), *out = malloc(np * sizeof *out);
    float *dy = malloc(np * sizeof *dy), *dx = malloc(nx * sizeof *dx);
    float *dir = malloc(nx * sizeof *dir), *xp = malloc(nx * sizeof *xp);
    int32_t *keep = malloc(B * S * sizeof *keep);
    double *ref = malloc(np * sizeof *ref), *dref = malloc(nx * sizeof *dref);
    tu_fill(g, x, nx, -1, 1);
    tu_fill(g, dy, np, -1, 1);
    tu_fill(g, dir, nx, -1, 1);
    for (size_t i = 0; i < B * S; i++)
        keep[i] = tu_u32(g) % 3 != 0;
    if (B > 1)
        for (size_t s = 0; s < S; s++)
            keep[(B - 1) * S + s] = 0;
    for (size_t b = 0; b < B; b++) {
        size_t cnt = 0;
        for (size_t s = 0; s < S; s++)
            cnt += keep[b * S + s] != 0;
        for (size_t c = 0; c < C; c++) {
            double a = 0;
            for (size_t s = 0; s < S; s++)
                if (keep[b * S + s])
                    a += x[(b * S + s) * C + c];
            ref[b * C + c] = cnt ? a / (double)cnt : 0.0;
            for (size_t s = 0; s < S; s++)
                dref[(b * S + s) * C + c] =
                    keep[b * S + s] && cnt ? (double)dy[b * C + c] / (double)cnt : 0.0;
        }
    }
    clf_error e;
    clf_ptr px = tu_upload(rt, x, nx), pk = tu_upload_i32(rt, keep, B * S);
    clf_ptr po = tu_alloc(rt, np), pdy = tu_upload(rt, dy, np), pdx = tu_upload(rt, x, nx);
    tu_ok(clf_op_mean_pool_forward(rt, po, px, pk, B, S, C, &e), &e, "mean_pool_forward");
    tu_ok(clf_op_mean_pool_backward(rt, pdx, pdy, pk, B, S, C, &e), &e, "mean_pool_backward");
    tu_download(rt, po, out, np);
    tu_download(rt, pdx, dx, nx);
    char name[128];
    snprintf(name, sizeof name, "mean_pool_forward B=%zu S=%zu C=%zu", B, S, C);
    tu_close(name, out, ref, np, 1e-6, 1e-5);
    snprintf(name, sizeof name, "mean_pool_backward B=%zu S=%zu C=%zu", B, S, C);
    tu_close(name, dx, dref, nx, 1e-6, 1e-5);
    /* central differences of the device forward along dir */
    const double h = 1e-2;
    double L[2], gd = 0;
    for (int sgn = 0; sgn < 2; sgn++) {
        for (size_t i = 0; i < nx; i++)
            xp[i] = (float)(x[i] + (sgn ? -h : h) * dir[i]);
        tu_free(px);
        px = tu_upload(rt, xp, nx);
        tu_ok(clf_op_mean_pool_forward(rt, po, px, pk, B, S, C, &e), &e, "forward");
        tu_download(rt, po, out, np);
        L[sgn] = 0;
        for (size_t i = 0; i < np; i++)
            L[sgn] += (double)dy[i] * out[i];
    }
    for (size_t i = 0; i < nx; i++)
        gd += (double)dx[i] * dir[i];
    double fd = (L[0] - L[1]) / (2 * h);
    TU_CHECK(fabs(fd - gd) <= 1e-4 * (1 + fabs(gd)),
             "mean_pool_backward B=%zu S=%zu C=%zu vs central differences: %.8g vs %.8g", B, S, C,
             fd, gd);
    tu_free(px);
    tu_free(pk);
    tu_free(po);
    tu_free(pdy);
    tu_free(pdx);
    free(x);
    free(out);
    free(dy);
    free(dx);
    free(dir);
    free(xp);
    free(keep);
    free(ref);
    free(dref);
}

static void gather_case(clf_runtime *rt, tu_rng *g, size_t Bsrc, size_t rows, size_t G, size_t len,
                        size_t stride, int use_index)
{
    size_t nsrc = Bsrc * G * stride, ndst = rows * G * stride;
    uint32_t *src = malloc(nsrc * 4), *dst = malloc(ndst * 4), *ref = malloc(ndst * 4);
    int32_t *index = malloc(rows * sizeof *index);
    for (size_t i = 0; i < nsrc; i++) /* all bit patterns: denormals, NaNs, ints */
        src[i] = tu_u32(g);
    for (size_t i = 0; i < ndst; i++)
        dst[i] = ref[i] = tu_u32(g);
    for (size_t i = 0; i < rows; i++)
        index[i] = use_index ? (int32_t)(tu_u32(g) % Bsrc) : (int32_t)i;
    for (size_t i = 0; i < rows; i++)
        for (size_t gg = 0; gg < G; gg++)
            for (size_t j = 0; j < len; j++)
                ref[(i * G + gg) * stride + j] = src[((size_t)index[i] * G + gg) * stride + j];
    clf_ptr ps = tu_upload_i32(rt, (const int32_t *)src, nsrc);
    clf_ptr pd = tu_upload_i32(rt, (const int32_t *)dst, ndst);
    clf_ptr pi = tu_upload_i32(rt, index, rows);
    clf_error e;
    clf_ptr none = {NULL, 0};
    tu_ok(clf_op_cache_gather(rt, pd, ps, use_index ? pi : none, rows, G, len, stride, &e), &e,
          "cache_gather");
    tu_ok(clf_ptr_read(rt, pd, (float *)dst, ndst, &e), &e, "read");
    TU_CHECK(memcmp(dst, ref, ndst * 4) == 0,
             "cache_gather rows=%zu of %zu G=%zu len=%zu stride=%zu %s: bit for bit", rows, Bsrc, G,
             len, stride, use_index ? "by index" : "identity");
    tu_free(ps);
    tu_free(pd);
    tu_free(pi);
    free(src);
    free(dst);
    free(ref);
    free(index);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng g = tu_rng_new(1);
    decode_keep_case(rt, &g, 1, 1, 1, 1, 1, 1);
    decode_keep_case(rt, &g, 2, 3, 5, 9, 7, 8);
    decode_keep_case(rt, &g, 3, 2, 33, 40, 33, 33);
    decode_keep_case(rt, &g, 4, 4, 8, 64, 57, 60);
    pool_case(rt, &g, 1, 1, 1);
    pool_case(rt, &g, 3, 7, 33);
    pool_case(rt, &g, 5, 13, 257);
    gather_case(rt, &g, 1, 1, 1, 1, 1, 1);
    gather_case(rt, &g, 3, 7, 4, 5, 9, 1);
    gather_case(rt, &g, 6, 4, 2, 33, 33, 1);
    gather_case(rt, &g, 5, 5, 3, 17, 40, 0);
    kv_case(rt, &g, 1, 1, 1, 1, 1, 0, 0);
    kv_case(rt, &g, 2, 7, 3, 5, 9, 2, 0);
    kv_case(rt, &g, 3, 1, 4, 33, 64, 63, 0);
    kv_case(rt, &g, 4, 33, 2, 16, 40, 7, 1);
    clf_error e;
    clf_ptr c = tu_alloc(rt, 64), c2 = tu_alloc(rt, 64);
    const clf_heads h4 = {c, CLF_DT_F32, 1, 4, 1, 4, 4};
    TU_CHECK(clf_op_kv_store(rt, c, c, &h4, &h4, 4, 1, &e) == CLF_ERR_ARG,
             "positions past the cache are refused");
    const clf_heads h2 = {c2, CLF_DT_F32, 1, 1, 1, 4, 4}, h1 = {c, CLF_DT_F32, 1, 1, 1, 4, 4};
    TU_CHECK(clf_op_kv_store(rt, c, c, &h1, &h2, 4, 0, &e) == CLF_ERR_ARG,
             "keys and values from two buffers are refused");
    tu_free(c);
    tu_free(c2);
    clf_runtime_destroy(rt);
    return tu_finish();
}
