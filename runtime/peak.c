/*
 * peak.c - the device's measured fp32 peak (cl/probe.cl's fma_peak), the
 * denominator of model FLOP utilisation in the benchmarks.
 *
 * Design: enough work-items to fill every compute unit (8 work-groups per
 * compute unit: of one item and of 16 where groups run item by item, so
 * both a compiler that keeps the kernel's vectors and one that vectorises
 * across work-items reach their best; of up to 256 items elsewhere), each
 * running independent FMA chains, as many as each of the probe's kernels
 * has (6, 8, 12, 16: the count that covers the FMA latency without
 * spilling depends on the register file, which no query reports); the
 * iteration count doubles until one launch takes at least 50 ms, then the
 * best launch of three per kernel and shape counts (wall time around launch
 * + finish, so launch overhead is included but small at that length), and
 * the peak is the best of them all.
 *
 * Not here: memory bandwidth, per-kernel ceilings.
 */
#include <stdlib.h>

#include "runtime/kernel_ids.h"
#include "runtime/runtime.h"
#include "runtime/util.h"

/* The best rate of one probe kernel k doing flops_per_iter FLOPs per
 * work-item and iteration, in GFLOP/s (*gflops). */
static clf_status peak_of(clf_runtime *rt, clf_kernel *k, double flops_per_iter, double *gflops,
                          clf_error *err)
{
    clf_buffer *out = NULL;
    clf_status st = CLF_OK;
    *gflops = 0.0;
    const clf_device_info *d = clf_runtime_device(rt);
    const size_t cus = d->compute_units ? d->compute_units : 1;
    const size_t wg = clf_kernel_max_work_group(k) < 256 ? clf_kernel_max_work_group(k) : 256;
    /* launch shapes: where groups run item by item, single items (the
     * kernel's own vectors) and groups of 16 (a compiler that vectorises
     * across work-items); elsewhere groups of up to 256 */
    size_t locals[2] = {1, wg < 16 ? wg : 16};
    int n_shapes = 2;
    if (!d->serial_groups) {
        locals[0] = wg;
        n_shapes = 1;
    }
    /* a device that ends loops early (clf_device_info.loop_limit) would
     * stop the chains short and be credited for work it did not do */
    const uint32_t cap = d->loop_limit ? d->loop_limit / 2 : (1u << 26);
    double best = 0.0;
    for (int shape = 0; shape < n_shapes && st == CLF_OK; shape++) {
        size_t local = locals[shape], global = 8 * cus * local;
        if ((st = clf_buffer_create(rt, global * sizeof(float), &out, err)) != CLF_OK)
            break;
        uint32_t iters = 1024;
        int timed = 0;
        while (st == CLF_OK && timed < 3) {
            const clf_arg a[] = {CLF_ARG_BUF(out), CLF_ARG_U32(iters), CLF_ARG_F32(0.999999f),
                                 CLF_ARG_F32(1e-6f)};
            const double t0 = clf_now_seconds();
            if ((st = clf_kernel_launch(rt, k, 1, &global, &local, 4, a, err)) != CLF_OK ||
                (st = clf_runtime_finish(rt, err)) != CLF_OK)
                break;
            const double t = clf_now_seconds() - t0;
            if (t < 0.05 && iters * 2 <= cap) {
                iters *= 2; /* too short to time well: longer */
                continue;
            }
            if (t < 0.05 && global < ((size_t)1 << 24)) { /* loops capped: more items */
                global *= 2;
                clf_buffer_destroy(out);
                out = NULL;
                st = clf_buffer_create(rt, global * sizeof(float), &out, err);
                continue;
            }
            const double g = flops_per_iter * (double)iters * (double)global / t * 1e-9;
            if (g > best)
                best = g;
            timed++;
        }
        clf_buffer_destroy(out);
        out = NULL;
    }
    if (st == CLF_OK)
        *gflops = best;
    return st;
}

clf_status clf_runtime_peak_gflops(clf_runtime *rt, double *gflops, clf_error *err)
{
    static const struct {
        clf_kernel_id id;
        int chains;
    } kernels[] = {{CLF_K_FMA_PEAK_C6, 6},
                   {CLF_K_FMA_PEAK_C8, 8},
                   {CLF_K_FMA_PEAK_C12, 12},
                   {CLF_K_FMA_PEAK_C16, 16}};
    clf_kernel *kw = NULL;
    clf_status st;
    *gflops = 0.0;
    if ((st = clf_kernel_of(rt, CLF_K_PROBE_FMA_WIDTH, &kw, err)) != CLF_OK)
        return st;
    const double width = (double)clf_kernel_required_group(kw);
    double best = 0.0;
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        clf_kernel *k = NULL;
        double g = 0.0;
        if ((st = clf_kernel_of(rt, kernels[i].id, &k, err)) != CLF_OK ||
            (st = peak_of(rt, k, 2.0 * width * kernels[i].chains, &g, err)) != CLF_OK)
            return st;
        if (g > best)
            best = g;
    }
    *gflops = best;
    return CLF_OK;
}
