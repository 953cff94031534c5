/*
 * probe.cl - measuring the device: its fp32 multiply-add peak.
 *
 * fma_peak_c<N>: every work-item runs N independent chains of multiply-adds
 * on vectors of the device's preferred float width, `iters` times, and
 * writes one sum so that nothing is optimised away. The host counts
 * 2 * N * width * iters FLOPs per work-item and keeps the best of the
 * chain counts: enough chains must be in flight to cover an FMA unit's
 * latency, yet all of them must stay in registers. Which count does both
 * depends on the register file, which no query reports: 16 chains of the
 * preferred width fit an AVX-512 CPU's 32 registers but spill from AVX2's
 * 16, where fewer chains run faster (docs/devices.md); so the host
 * measures 6, 8, 12 and 16.
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
#define PROBE_CAT_(a, b) a##b
#define PROBE_CAT(a, b) PROBE_CAT_(a, b)
#if PROBE_VW == 1
typedef float probe_v;
#else
typedef PROBE_CAT(float, PROBE_VW) probe_v;
#endif

/* The width the kernels were built with, for the host (its required
 * work-group size; never launched). */
__kernel __attribute__((reqd_work_group_size(PROBE_VW, 1, 1))) void
probe_fma_width(__global float *unused)
{
    (void)unused;
}

/* One kernel per chain count (CHAINS). */
#define PROBE_FMA_PEAK(CHAINS)                                                             \
    __kernel void fma_peak_c##CHAINS(__global float *out, uint iters, float m, float c)      \
    {                                                                                      \
        const uint gid = get_global_id(0);                                                 \
        probe_v a[CHAINS];                                                                 \
        _Pragma("unroll") for (int i = 0; i < CHAINS; i++) a[i] =                           \
            (probe_v)((float)(gid + (uint)i) * 1e-7f);                                     \
        for (uint it = 0; it < iters; it++) {                                              \
            _Pragma("unroll") for (int i = 0; i < CHAINS; i++) a[i] =                       \
                CLF_FMA(a[i], (probe_v)(m), (probe_v)(c));                                 \
        }                                                                                  \
        probe_v s = a[0];                                                                  \
        _Pragma("unroll") for (int i = 1; i < CHAINS; i++) s += a[i];                       \
        out[gid] = probe_sum(s);                                                           \
    }

/* A vector's elements summed (the kernels' one output per item). */
static inline float probe_sum(probe_v s)
{
#if PROBE_VW == 1
    return s;
#else
    float t[PROBE_VW];
    PROBE_CAT(vstore, PROBE_VW)(s, 0, t);
    float r = 0.0f;
    for (int i = 0; i < PROBE_VW; i++)
        r += t[i];
    return r;
#endif
}

PROBE_FMA_PEAK(6)
PROBE_FMA_PEAK(8)
PROBE_FMA_PEAK(12)
PROBE_FMA_PEAK(16)
