/*
 * probe.cl - measuring the device: its fp32 multiply-add peak.
 *
 * fma_peak: every work-item runs PROBE_CHAINS independent chains of
 * multiply-adds on vectors of the device's preferred float width (enough
 * chains to cover an FMA unit's latency on CPUs and GPUs), `iters` times,
 * and writes one sum so that nothing is optimised away. The host counts
 * 2 * PROBE_CHAINS * width * iters FLOPs per work-item.
 */
#if CLF_PREF_VEC_FLOAT >= 16
#define PROBE_VW 16
#elif CLF_PREF_VEC_FLOAT >= 8
#define PROBE_VW 8
#elif CLF_PREF_VEC_FLOAT >= 4
#define PROBE_VW 4
#else
#define PROBE_VW 1
#endif
#define PROBE_CHAINS 16
#define PROBE_CAT_(a, b) a##b
#define PROBE_CAT(a, b) PROBE_CAT_(a, b)
#if PROBE_VW == 1
typedef float probe_v;
#else
typedef PROBE_CAT(float, PROBE_VW) probe_v;
#endif

/* The width the kernel was built with, for the host (its required
 * work-group size; never launched). */
__kernel __attribute__((reqd_work_group_size(PROBE_VW * PROBE_CHAINS, 1, 1))) void
probe_fma_flops_per_iter(__global float *unused)
{
    (void)unused;
}

__kernel void fma_peak(__global float *out, uint iters, float m, float c)
{
    const uint gid = get_global_id(0);
    probe_v a[PROBE_CHAINS];
#pragma unroll
    for (int i = 0; i < PROBE_CHAINS; i++)
        a[i] = (probe_v)((float)(gid + (uint)i) * 1e-7f);
    for (uint it = 0; it < iters; it++) {
#pragma unroll
        for (int i = 0; i < PROBE_CHAINS; i++)
            a[i] = CLF_FMA(a[i], (probe_v)(m), (probe_v)(c));
    }
    probe_v s = a[0];
#pragma unroll
    for (int i = 1; i < PROBE_CHAINS; i++)
        s += a[i];
#if PROBE_VW == 1
    out[gid] = s;
#else
    float t[PROBE_VW];
    PROBE_CAT(vstore, PROBE_VW)(s, 0, t);
    float r = 0.0f;
    for (int i = 0; i < PROBE_VW; i++)
        r += t[i];
    out[gid] = r;
#endif
}
