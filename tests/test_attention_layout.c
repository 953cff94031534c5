/*
 * test_attention_layout.c - heads_split / heads_merge (cl/attention.cl).
 *
 * Checks, for q, k and v slices of a fused [B, T, 3*NH*HS + pad] buffer at a
 * nonzero element offset, sizes including 1 and odd head sizes, through the
 * ops (the device's work split) and with the kernels launched one float per
 * work-item (the GPU split):
 * - split is an exact permutation: out[b,h,t,d] == in[(b*T+t)*rs + col + h*HS + d]
 *   (bit-exact);
 * - merge overwrite is the exact inverse, writing only its slice (the other
 *   slices and the padding columns keep their values, bit-exact);
 * - merge accumulate: out + in in float (rtol 1.2e-7, a single rounding);
 * - merge is the adjoint (backward) of split: <split(x), y> == <x, merge(y)>,
 *   both sums in float64 on the host (rtol 1e-12); for a permutation this is
 *   the gradient check (the finite difference of a linear map is exact).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ops/ops.h"
#include "model/ops/ops_internal.h"
#include "tests/test_util.h"

#define PAD 3

/* The ops give a work-item a whole head row on CPUs and one float on GPUs;
 * with elem = 1 the kernels are launched one float per work-item (the GPU
 * split) so that both are tested on any device. */
static void layout(clf_runtime *rt, int elem, int merge, clf_ptr out, clf_ptr in, size_t B,
                   size_t T, size_t NH, size_t HS, size_t rs, int acc)
{
    clf_error err;
    if (!elem) {
        if (merge)
            tu_ok(clf_op_heads_merge(rt, out, in, B, T, NH, HS, rs, acc, &err), &err, "merge");
        else
            tu_ok(clf_op_heads_split(rt, out, in, B, T, NH, HS, rs, &err), &err, "split");
        return;
    }
    clf_kernel *k;
    const char *name = merge ? "heads_merge" : "heads_split";
    tu_ok(clf_kernel_get(rt, "attention", name, &k, &err), &err, name);
    clf_arg a[12];
    int na = 0;
    a[na++] = CLF_ARG_BUF(out.buf);
    a[na++] = CLF_ARG_U64(out.off);
    a[na++] = CLF_ARG_BUF(in.buf);
    a[na++] = CLF_ARG_U64(in.off);
    a[na++] = CLF_ARG_U32(B * T * NH);
    a[na++] = CLF_ARG_U32(T);
    a[na++] = CLF_ARG_U32(NH);
    a[na++] = CLF_ARG_U32(HS);
    a[na++] = CLF_ARG_U32(rs);
    if (merge)
        a[na++] = CLF_ARG_I32(acc);
    a[na++] = CLF_ARG_U32(1);
    a[na++] = CLF_ARG_U32(HS);
    /* 64, or the largest power of two below the kernel's limit (llvmpipe: 32) */
    size_t g = B * T * NH * HS, l = clf_ops_group_size(k, 64);
    tu_ok(clf_kernel_launch(rt, k, 1, &g, &l, na, a, &err), &err, name);
}

static void test_layout(clf_runtime *rt, int elem, size_t B, size_t T, size_t NH, size_t HS,
                        tu_rng *r)
{
    size_t C = NH * HS, rs = 3 * C + 2, nx = B * T * rs, nh = B * NH * T * HS;
    float *x = malloc((nx + PAD) * sizeof *x), *heads = malloc(nh * sizeof *heads);
    float *y = malloc(nh * sizeof *y), *got = malloc((nx + PAD) * sizeof *got);
    double *ref = malloc(nx * sizeof *ref);
    tu_fill(r, x, nx + PAD, -1, 1);
    tu_fill(r, y, nh, -1, 1);
    clf_ptr xb = tu_upload(rt, x, nx + PAD), dx = clf_ptr_at(xb, PAD);
    clf_ptr hb = tu_alloc(rt, nh + 1), dh = clf_ptr_at(hb, 1);
    clf_ptr yb = tu_upload(rt, y, nh);
    const float *xs = x + PAD;
    clf_error err;
    for (size_t part = 0; part < 3; part++) {
        size_t col = part * C;
        layout(rt, elem, 0, dh, clf_ptr_at(dx, col), B, T, NH, HS, rs, 0);
        tu_download(rt, dh, heads, nh);
        size_t bad = 0;
        double dot1 = 0, dot2 = 0;
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < NH; h++)
                for (size_t t = 0; t < T; t++)
                    for (size_t d = 0; d < HS; d++) {
                        size_t o = ((b * NH + h) * T + t) * HS + d;
                        size_t i = (b * T + t) * rs + col + h * HS + d;
                        bad += memcmp(&heads[o], &xs[i], sizeof(float)) != 0;
                        dot1 += (double)heads[o] * y[o];
                    }
        TU_CHECK(bad == 0, "heads_split%s B=%zu T=%zu NH=%zu HS=%zu slice %zu exact (%zu differ)",
                 elem ? " (per element)" : "", B, T, NH, HS, part, bad);

        /* merge(y) into a copy of x: overwrite only the slice */
        tu_ok(clf_ptr_write(rt, dx, xs, nx, &err), &err, "write");
        layout(rt, elem, 1, clf_ptr_at(dx, col), yb, B, T, NH, HS, rs, 0);
        tu_download(rt, xb, got, nx + PAD);
        bad = 0;
        for (size_t i = 0; i < nx + PAD; i++) {
            float want = i < PAD ? x[i] : xs[i - PAD];
            if (i >= PAD) {
                size_t j = i - PAD, bt = j / rs, c = j % rs;
                if (c >= col && c < col + C) {
                    size_t h = (c - col) / HS, d = (c - col) % HS;
                    size_t b = bt / T, t = bt % T;
                    want = y[((b * NH + h) * T + t) * HS + d];
                    dot2 += (double)xs[j] * want;
                }
            }
            bad += memcmp(&want, &got[i], sizeof want) != 0;
        }
        TU_CHECK(bad == 0,
                 "heads_merge%s B=%zu T=%zu NH=%zu HS=%zu slice %zu exact, rest untouched "
                 "(%zu differ)",
                 elem ? " (per element)" : "", B, T, NH, HS, part, bad);
        char name[128];
        snprintf(name, sizeof name, "merge is split's adjoint B=%zu T=%zu NH=%zu HS=%zu", B, T, NH,
                 HS);
        float d1 = (float)dot1;
        tu_close(name, &d1, &dot2, 1, 1e-6, 1e-6);

        /* merge accumulate */
        tu_ok(clf_ptr_write(rt, dx, xs, nx, &err), &err, "write");
        layout(rt, elem, 1, clf_ptr_at(dx, col), yb, B, T, NH, HS, rs, 1);
        tu_download(rt, dx, got, nx);
        for (size_t j = 0; j < nx; j++) {
            size_t bt = j / rs, c = j % rs;
            ref[j] = xs[j];
            if (c >= col && c < col + C) {
                size_t h = (c - col) / HS, d = (c - col) % HS, b = bt / T, t = bt % T;
                ref[j] += y[((b * NH + h) * T + t) * HS + d];
            }
        }
        snprintf(name, sizeof name, "heads_merge accumulate B=%zu T=%zu NH=%zu HS=%zu s%zu", B, T,
                 NH, HS, part);
        tu_close(name, got, ref, nx, 0.0, 1.2e-7);
    }
    tu_free(xb);
    tu_free(hb);
    tu_free(yb);
    free(x);
    free(heads);
    free(y);
    free(got);
    free(ref);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng r = tu_rng_new(3);
    for (int elem = 0; elem < 2; elem++) {
        test_layout(rt, elem, 1, 1, 1, 1, &r);
        test_layout(rt, elem, 2, 7, 3, 5, &r);
        test_layout(rt, elem, 3, 33, 4, 8, &r);
        test_layout(rt, elem, 2, 64, 4, 32, &r);
        test_layout(rt, elem, 1, 17, 2, 64, &r);
    }
    clf_error err;
    clf_ptr a = tu_alloc(rt, 16);
    TU_CHECK(clf_op_heads_split(rt, a, a, 1, 1, 2, 4, 7, &err) == CLF_ERR_ARG,
             "heads_split refuses a row stride below NH*HS");
    tu_free(a);
    clf_runtime_destroy(rt);
    return tu_finish();
}
