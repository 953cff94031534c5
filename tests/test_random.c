/*
 * test_random.c - Philox4x32-10 and dropout (cl/random.cl, model/ops/random.c).
 *
 * Checks:
 * - the host generator and the device generator against Random123's
 *   known-answer vectors (tests/kat_vectors of DEShawResearch/random123,
 *   philox4x32 10 lines), and device == host on random counters/keys;
 * - dropout forward bit-exact against the host prediction
 *   (clf_random_dropout_keep, in * (float)(1/(1-p))) at sizes 1, 7, 33, 257,
 *   1000, 100003 with element offsets, in place and out of place;
 * - keep fraction within 6 binomial standard deviations of 1-p, overall and
 *   for each of the four Philox words (i % 4);
 * - reproducibility (same key, identical), a different stream or seed gives
 *   a different mask (difference fraction near 2p(1-p));
 * - backward applies exactly the forward mask and scale;
 * - p = 0 is the identity (copy and in place).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ops/ops.h"
#include "model/ops/ops_internal.h"
#include "tests/test_util.h"

static const uint32_t KAT[3][10] = {
    /* ctr[4], key[2], expected[4] */
    {0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u, 0x6627e8d5u,
     0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
    {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0x408f276du,
     0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
    {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u, 0xd16cfe09u,
     0x94fdccebu, 0x5001e420u, 0x24126ea1u},
};

static clf_ptr upload_u32(clf_runtime *rt, const uint32_t *x, size_t n)
{
    return tu_upload_i32(rt, (const int32_t *)(const void *)x, n);
}

static void download_u32(clf_runtime *rt, clf_ptr p, uint32_t *x, size_t n)
{
    clf_error err;
    tu_ok(clf_buffer_read(rt, p.buf, p.off * 4, x, n * 4, &err), &err, "reading");
}

static void test_philox(clf_runtime *rt)
{
    for (int t = 0; t < 3; t++) {
        uint32_t out[4];
        clf_random_philox4x32_10(&KAT[t][0], &KAT[t][4], out);
        TU_CHECK(memcmp(out, &KAT[t][6], sizeof out) == 0,
                 "host philox4x32-10 known answer %d: got %08x %08x %08x %08x", t, out[0], out[1],
                 out[2], out[3]);
    }
    /* device: the 3 known answers followed by random counters and keys */
    enum { N = 1003 };
    uint32_t *ctr = malloc(N * 4 * 4), *key = malloc(N * 2 * 4), *got = malloc(N * 4 * 4);
    tu_rng r = tu_rng_new(11);
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < 4; j++)
            ctr[4 * i + j] = i < 3 ? KAT[i][j] : tu_u32(&r);
        for (int j = 0; j < 2; j++)
            key[2 * i + j] = i < 3 ? KAT[i][4 + j] : tu_u32(&r);
    }
    clf_ptr dc = upload_u32(rt, ctr, N * 4), dk = upload_u32(rt, key, N * 2);
    clf_ptr dout = tu_alloc(rt, N * 4);
    clf_kernel *k;
    clf_error err;
    tu_ok(clf_kernel_get(rt, "random", "philox4x32_10_raw", &k, &err), &err, "kernel");
    clf_arg a[] = {CLF_ARG_BUF(dout.buf), CLF_ARG_U64(0), CLF_ARG_BUF(dc.buf), CLF_ARG_U64(0),
                   CLF_ARG_BUF(dk.buf),   CLF_ARG_U64(0), CLF_ARG_U64(N)};
    /* 64, or the largest power of two below the kernel's limit (llvmpipe: 32) */
    size_t g = N, l = clf_ops_group_size(k, 64);
    tu_ok(clf_kernel_launch(rt, k, 1, &g, &l, 7, a, &err), &err, "launch");
    download_u32(rt, dout, got, N * 4);
    for (int t = 0; t < 3; t++)
        TU_CHECK(memcmp(got + 4 * t, &KAT[t][6], 16) == 0,
                 "device philox4x32-10 known answer %d: got %08x %08x %08x %08x", t, got[4 * t],
                 got[4 * t + 1], got[4 * t + 2], got[4 * t + 3]);
    int bad = 0;
    for (int i = 3; i < N; i++) {
        uint32_t h[4];
        clf_random_philox4x32_10(ctr + 4 * i, key + 2 * i, h);
        bad += memcmp(h, got + 4 * i, 16) != 0;
    }
    TU_CHECK(bad == 0, "device philox == host philox on %d random counters/keys (%d differ)", N - 3,
             bad);
    tu_free(dc);
    tu_free(dk);
    tu_free(dout);
    free(ctr);
    free(key);
    free(got);
}

/* Inputs away from zero, so a kept element is never 0. */
static void fill_nonzero(tu_rng *r, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = (float)tu_uniform(r, 0.5, 1.5);
        x[i] = (tu_u32(r) & 1) ? v : -v;
    }
}

static void test_dropout_size(clf_runtime *rt, size_t n, float p, tu_rng *r)
{
    const size_t pad = 3;
    uint64_t seed = ((uint64_t)tu_u32(r) << 32) | tu_u32(r);
    uint64_t stream = tu_u32(r) % 1000;
    float *x = malloc((n + pad) * sizeof *x), *y = malloc(n * sizeof *y);
    float *y2 = malloc(n * sizeof *y2), *d = malloc(n * sizeof *d);
    fill_nonzero(r, x, n + pad);
    clf_ptr xb = tu_upload(rt, x, n + pad), in = clf_ptr_at(xb, pad);
    clf_ptr ob = tu_alloc(rt, n + 1), out = clf_ptr_at(ob, 1);
    clf_error err;
    tu_ok(clf_op_dropout_forward(rt, out, in, n, p, seed, stream, &err), &err, "dropout");
    tu_download(rt, out, y, n);

    float scale = (float)(1.0 / (1.0 - (double)p));
    size_t kept = 0, bad = 0, kept4[4] = {0, 0, 0, 0}, n4[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        int keep = clf_random_dropout_keep(i, p, seed, stream);
        float want = keep ? x[pad + i] * scale : 0.0f;
        if (memcmp(&want, &y[i], sizeof want) != 0)
            bad++;
        kept += keep;
        kept4[i % 4] += keep;
        n4[i % 4]++;
    }
    TU_CHECK(bad == 0, "dropout n=%zu p=%.2f: device == host prediction bit for bit (%zu differ)",
             n, (double)p, bad);
    if (n >= 100000) {
        double q = 1.0 - p, sd = sqrt(p * q / (double)n);
        double f = (double)kept / (double)n;
        TU_CHECK(fabs(f - q) <= 6.0 * sd + 1e-9,
                 "dropout n=%zu p=%.2f: keep fraction %.5f vs %.5f (6 sd = %.5f)", n, (double)p, f,
                 q, 6 * sd);
        int ok4 = 1;
        for (int j = 0; j < 4; j++) {
            double fj = (double)kept4[j] / (double)n4[j];
            ok4 &= fabs(fj - q) <= 6.0 * sqrt(p * q / (double)n4[j]);
        }
        TU_CHECK(ok4, "dropout n=%zu p=%.2f: keep fraction of each Philox word within 6 sd", n,
                 (double)p);
    }

    /* same key again, in place: identical */
    tu_ok(clf_ptr_write(rt, in, x + pad, n, &err), &err, "write");
    tu_ok(clf_op_dropout_forward(rt, in, in, n, p, seed, stream, &err), &err, "dropout");
    tu_download(rt, in, y2, n);
    TU_CHECK(memcmp(y, y2, n * sizeof *y) == 0,
             "dropout n=%zu p=%.2f: in place, same key -> identical output", n, (double)p);

    /* backward: the same mask and scale applied to a fresh gradient */
    float *g = malloc(n * sizeof *g);
    fill_nonzero(r, g, n);
    clf_ptr gb = tu_upload(rt, g, n), db = tu_alloc(rt, n);
    tu_ok(clf_op_dropout_backward(rt, db, gb, n, p, seed, stream, &err), &err, "backward");
    tu_download(rt, db, d, n);
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = y[i] != 0.0f ? g[i] * scale : 0.0f;
        if (memcmp(&want, &d[i], sizeof want) != 0)
            bad++;
    }
    TU_CHECK(bad == 0, "dropout n=%zu p=%.2f: backward mask == forward mask (%zu differ)", n,
             (double)p, bad);

    /* another stream and another seed: different masks */
    if (n >= 100000) {
        for (int which = 0; which < 2; which++) {
            uint64_t k2 = which ? seed + 1 : seed, s2 = which ? stream : stream + 1;
            tu_ok(clf_op_dropout_forward(rt, db, gb, n, p, k2, s2, &err), &err, "dropout");
            tu_download(rt, db, d, n);
            size_t diff = 0;
            for (size_t i = 0; i < n; i++)
                diff += (d[i] != 0.0f) != (y[i] != 0.0f);
            double q = 2.0 * p * (1.0 - p), f = (double)diff / (double)n;
            double sd = sqrt(q * (1 - q) / (double)n);
            TU_CHECK(fabs(f - q) <= 6 * sd,
                     "dropout p=%.2f: another %s -> masks differ in %.4f of elements (expect "
                     "%.4f)",
                     (double)p, which ? "seed" : "stream", f, q);
        }
    }
    tu_free(gb);
    tu_free(db);
    tu_free(xb);
    tu_free(ob);
    free(g);
    free(x);
    free(y);
    free(y2);
    free(d);
}

static void test_dropout_identity(clf_runtime *rt, tu_rng *r)
{
    const size_t n = 1000;
    float x[1000], y[1000];
    fill_nonzero(r, x, n);
    clf_ptr a = tu_upload(rt, x, n), b = tu_alloc(rt, n);
    clf_error err;
    tu_ok(clf_op_dropout_forward(rt, b, a, n, 0.0f, 5, 6, &err), &err, "dropout p=0");
    tu_download(rt, b, y, n);
    TU_CHECK(memcmp(x, y, sizeof x) == 0, "dropout p=0 copies the input");
    tu_ok(clf_op_dropout_forward(rt, a, a, n, 0.0f, 5, 6, &err), &err, "dropout p=0 in place");
    tu_download(rt, a, y, n);
    TU_CHECK(memcmp(x, y, sizeof x) == 0, "dropout p=0 in place leaves the input");
    tu_ok(clf_op_dropout_backward(rt, b, a, n, 0.0f, 5, 6, &err), &err, "backward p=0");
    tu_download(rt, b, y, n);
    TU_CHECK(memcmp(x, y, sizeof x) == 0, "dropout backward p=0 copies the gradient");
    clf_status st = clf_op_dropout_forward(rt, b, a, n, 1.5f, 5, 6, &err);
    TU_CHECK(st == CLF_ERR_ARG, "dropout p=1.5 is refused");
    tu_free(a);
    tu_free(b);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng r = tu_rng_new(1);
    test_philox(rt);
    const size_t sizes[] = {1, 7, 33, 257, 1000, 100003};
    const float ps[] = {0.1f, 0.5f, 0.9f};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (size_t j = 0; j < 3; j++)
            test_dropout_size(rt, sizes[i], ps[j], &r);
    test_dropout_identity(rt, &r);
    clf_runtime_destroy(rt);
    return tu_finish();
}
