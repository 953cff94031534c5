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
 * spilling depends on the register file, which no query reports). Every
 * kernel and shape is screened with one launch of at least 10 ms; the
 * fastest is then timed: the iteration count doubles until one launch
 * takes at least 50 ms, and the best launch of three counts (wall time
 * around launch + finish, so launch overhead is included but small at
 * that length).
 *
 * Not here: memory bandwidth, per-kernel ceilings.
 */
#include <stdlib.h>

#include "runtime/kernel_ids.h"
#include "runtime/runtime.h"
#include "runtime/util.h"

/* The rate of probe kernel k (flops_per_iter FLOPs per work-item and
 * iteration) in groups of `local`, in GFLOP/s (*gflops): the iteration
 * count doubles until one launch takes at least min_s, then the best of
 * `runs` launches of that length counts. */
static clf_status rate_of(clf_runtime *rt, clf_kernel *k, double flops_per_iter, size_t local,
                          double min_s, int runs, double *gflops, clf_error *err)
{
    const clf_device_info *d = clf_runtime_device(rt);
    const size_t cus = d->compute_units ? d->compute_units : 1;
    /* a device that ends loops early (clf_device_info.loop_limit) would
     * stop the chains short and be credited for work it did not do */
    const uint32_t cap = d->loop_limit ? d->loop_limit / 2 : (1u << 26);
    size_t global = 8 * cus * local;
    clf_buffer *out = NULL;
    clf_status st = clf_buffer_create(rt, global * sizeof(float), &out, err);
    double best = 0.0;
    uint32_t iters = 1024;
    int timed = 0;
    while (st == CLF_OK && timed < runs) {
        const clf_arg a[] = {CLF_ARG_BUF(out), CLF_ARG_U32(iters), CLF_ARG_F32(0.999999f),
                             CLF_ARG_F32(1e-6f)};
        const double t0 = clf_now_seconds();
        if ((st = clf_kernel_launch(rt, k, 1, &global, &local, 4, a, err)) != CLF_OK ||
            (st = clf_runtime_finish(rt, err)) != CLF_OK)
            break;
        const double t = clf_now_seconds() - t0;
        if (t < min_s && iters * 2 <= cap) {
            iters *= 2; /* too short to time well: longer */
            continue;
        }
        if (t < min_s && global < ((size_t)1 << 24)) { /* loops capped: more items */
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
    const clf_device_info *d = clf_runtime_device(rt);
    /* every kernel in every launch shape, screened with one 10 ms launch
     * (a spilling chain count runs at about half the rate); the fastest
     * then timed as the peak is (50 ms launches, best of three). Each
     * timing is a lower bound of the device's rate, so the peak is the
     * best of them all. */
    clf_kernel *win = NULL;
    double win_flops = 0.0, best = 0.0;
    size_t win_local = 1;
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        clf_kernel *k = NULL;
        if ((st = clf_kernel_of(rt, kernels[i].id, &k, err)) != CLF_OK)
            return st;
        const size_t wg = clf_kernel_max_work_group(k) < 256 ? clf_kernel_max_work_group(k) : 256;
        /* launch shapes: where groups run item by item, single items (the
         * kernel's own vectors) and groups of 16 (a compiler that
         * vectorises across work-items); elsewhere groups of up to 256 */
        const size_t locals[2] = {d->serial_groups ? 1 : wg, wg < 16 ? wg : 16};
        const int n_shapes = d->serial_groups ? 2 : 1;
        const double flops = 2.0 * width * kernels[i].chains;
        for (int sh = 0; sh < n_shapes; sh++) {
            double g = 0.0;
            if ((st = rate_of(rt, k, flops, locals[sh], 0.01, 1, &g, err)) != CLF_OK)
                return st;
            if (g > best) {
                best = g;
                win = k;
                win_flops = flops;
                win_local = locals[sh];
            }
        }
    }
    double g = 0.0;
    if (win != NULL && (st = rate_of(rt, win, win_flops, win_local, 0.05, 3, &g, err)) != CLF_OK)
        return st;
    *gflops = g > best ? g : best;
    return CLF_OK;
}
