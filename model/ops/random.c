/*
 * ops/random.c - host wrappers of cl/random.cl (dropout from Philox4x32-10)
 * and a host implementation of the same generator.
 *
 * Design: dropout never stores its mask. Element i of a launch keyed by
 * (seed, stream) uses word i % 4 of philox(ctr = (i/4, stream), key = seed)
 * and is kept iff that word >= round(p * 2^32); kept elements are scaled by
 * 1/(1-p). The backward pass regenerates the identical mask from the same
 * key. The host functions here compute exactly what the device computes, so
 * tests (and any host-side code) can predict a mask bit for bit.
 *
 * Not here: random initialisation of parameters (host side, in model/).
 */
#include <math.h>

#include "model/ops/ops.h"
#include "model/ops/ops_internal.h"

void clf_random_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* Keep threshold: a word w keeps its element iff w >= thr. */
static uint32_t dropout_threshold(float p)
{
    double t = floor((double)p * 4294967296.0 + 0.5);
    if (t <= 0.0)
        return 0;
    if (t >= 4294967295.0)
        return 0xFFFFFFFFu;
    return (uint32_t)t;
}

void clf_ops_dropout_params(float p, uint32_t *thr, float *scale)
{
    /* p = 1 drops everything: threshold 2^32-1 keeps only one word value in
     * 2^32, and scale 0 zeroes that one too. */
    *thr = p >= 1.0f ? 0xFFFFFFFFu : dropout_threshold(p);
    *scale = p >= 1.0f ? 0.0f : (float)(1.0 / (1.0 - (double)p));
}

int clf_random_dropout_keep(uint64_t i, float p, uint64_t seed, uint64_t stream)
{
    if (p <= 0.0f)
        return 1;
    if (p >= 1.0f)
        return 0;
    uint64_t g = i / 4;
    uint32_t ctr[4] = {(uint32_t)g, (uint32_t)(g >> 32), (uint32_t)stream,
                       (uint32_t)(stream >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t w[4];
    clf_random_philox4x32_10(ctr, key, w);
    return w[i % 4] >= dropout_threshold(p);
}

static clf_status dropout_apply(clf_runtime *rt, const char *what, clf_ptr out, clf_ptr in,
                                size_t n, float p, uint64_t seed, uint64_t stream, clf_error *err)
{
    clf_status st;
    clf_kernel *k = NULL;
    if (!(p >= 0.0f && p <= 1.0f)) {
        st = clf_error_set(err, CLF_ERR_ARG, "dropout probability %g is outside [0, 1]", (double)p);
        goto fail;
    }
    if (n == 0)
        return CLF_OK;
    if (p == 0.0f) {
        if (out.buf == in.buf && out.off == in.off)
            return CLF_OK;
        st = clf_buffer_copy(rt, in.buf, in.off * sizeof(float), out.buf, out.off * sizeof(float),
                             n * sizeof(float), err);
        if (st != CLF_OK)
            goto fail;
        return CLF_OK;
    }
    st = clf_kernel_of(rt, CLF_K_DROPOUT, &k, err);
    if (st != CLF_OK)
        goto fail;
    uint32_t thr;
    float scale;
    clf_ops_dropout_params(p, &thr, &scale);
    size_t global = (n + 3) / 4;
    size_t local = clf_kernel_max_work_group(k);
    if (local == 0 || local > 256)
        local = 256;
    clf_arg a[] = {
        CLF_ARG_BUF(out.buf),
        CLF_ARG_U64(out.off),
        CLF_ARG_BUF(in.buf),
        CLF_ARG_U64(in.off),
        CLF_ARG_U64(n),
        CLF_ARG_U32(thr),
        CLF_ARG_F32(scale),
        CLF_ARG_U32((uint32_t)seed),
        CLF_ARG_U32((uint32_t)(seed >> 32)),
        CLF_ARG_U32((uint32_t)stream),
        CLF_ARG_U32((uint32_t)(stream >> 32)),
    };
    st = clf_kernel_launch(rt, k, 1, &global, &local, (int)(sizeof a / sizeof a[0]), a, err);
    if (st != CLF_OK)
        goto fail;
    return CLF_OK;
fail:
    clf_error_prefix(err, "%s", what);
    return st;
}

clf_status clf_op_dropout_forward(clf_runtime *rt, clf_ptr out, clf_ptr in, size_t n, float p,
                                  uint64_t seed, uint64_t stream, clf_error *err)
{
    return dropout_apply(rt, "dropout_forward", out, in, n, p, seed, stream, err);
}

clf_status clf_op_dropout_backward(clf_runtime *rt, clf_ptr din, clf_ptr dout, size_t n, float p,
                                   uint64_t seed, uint64_t stream, clf_error *err)
{
    return dropout_apply(rt, "dropout_backward", din, dout, n, p, seed, stream, err);
}
