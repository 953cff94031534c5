/*
 * common.cl - definitions shared by every kernel family.
 *
 * Every program is compiled as: generated preamble + common.cl + <family>.cl.
 * The preamble (runtime/program.c) defines, from the device's reported
 * features rather than assumptions:
 *   CLF_SERIAL_GROUPS                 1 when work-groups run item by item (a CPU
 *                                     device, or emulated local memory: the
 *                                     device info's serial_groups), else 0
 *   CLF_HAS_FP64, CLF_HAS_FP16        1 when the extension is reported
 *   CLF_MAX_WG                        the device's maximum work-group size
 *   CLF_PREF_VEC_FLOAT                preferred float vector width
 *   CLF_LOCAL_MEM_BYTES               local memory size
 * plus any family-specific defines (tile sizes) the host sets.
 *
 * Kernel conventions: a tensor argument is a pair (__global T *x, ulong x_off)
 * with the offset in elements; the kernel advances the pointer first. Sizes
 * are ulong (uint where a kernel's index math is known to fit). Every kernel
 * bounds-checks: global sizes are rounded up to the work-group size.
 */
#ifndef CLF_SERIAL_GROUPS
#define CLF_SERIAL_GROUPS 0
#endif
#ifndef CLF_HAS_FP64
#define CLF_HAS_FP64 0
#endif
#ifndef CLF_HAS_FP16
#define CLF_HAS_FP16 0
#endif
#ifndef CLF_MAX_WG
#define CLF_MAX_WG 256
#endif

/* Largest finite float, used as -infinity stand-in where inf arithmetic would
 * produce NaN (e.g. inf - inf in a fully masked softmax row). */
#define CLF_NEG_BIG (-3.402823466e+38f)

/* ---- reductions shared by the row kernels (reduce, softmax, norm) ---- */

/* Fixed pairwise combination of eight lanes. */
static inline float clf_hsum8(float8 a)
{
    return ((a.s0 + a.s1) + (a.s2 + a.s3)) + ((a.s4 + a.s5) + (a.s6 + a.s7));
}
static inline float clf_hmax8(float8 a)
{
    return fmax(fmax(fmax(a.s0, a.s1), fmax(a.s2, a.s3)), fmax(fmax(a.s4, a.s5), fmax(a.s6, a.s7)));
}

/* Tree reductions over a work-group of power-of-two size, in a fixed order;
 * every work-item gets the result. buf holds get_local_size(0) floats. Call
 * them from every work-item of the group (they contain barriers). */
static inline float clf_group_sum(float v, __local float *buf)
{
    uint lid = get_local_id(0);
    buf[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = get_local_size(0) / 2; h > 0; h >>= 1) {
        if (lid < h)
            buf[lid] += buf[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = buf[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}
static inline float clf_group_max(float v, __local float *buf)
{
    uint lid = get_local_id(0);
    buf[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = get_local_size(0) / 2; h > 0; h >>= 1) {
        if (lid < h)
            buf[lid] = fmax(buf[lid], buf[lid + h]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = buf[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* ---- Philox4x32-10 constants (random.cl's generator, flash.cl's dropout) ---- */
#define CLF_PHILOX_M0 0xD2511F53u
#define CLF_PHILOX_M1 0xCD9E8D57u
#define CLF_PHILOX_W0 0x9E3779B9u
#define CLF_PHILOX_W1 0xBB67AE85u

#define CLF_PHILOX_BUMP(k0, k1)                                                         \
    do {                                                                                \
        k0 += CLF_PHILOX_W0;                                                            \
        k1 += CLF_PHILOX_W1;                                                            \
    } while (0)

/* ---- ALiBi (Press et al., "Train short, test long", 2022) ---- */
/* Head h's slope among NH heads: the geometric sequence 2^(-8(h+1)/n) for
 * the largest power of two n <= NH, then the odd terms of the 2n sequence
 * for the remaining heads (the paper's get_slopes). The bias of query
 * position i on key position j is -slope * |i - j|. */
static inline float clf_alibi_slope(uint h, uint NH)
{
    uint n = 1;
    while (n * 2 <= NH)
        n *= 2;
    return h < n ? exp2(-8.0f * (float)(h + 1) / (float)n)
                 : exp2(-4.0f * (float)(2 * (h - n) + 1) / (float)n);
}
