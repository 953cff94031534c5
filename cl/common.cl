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
 *   CLF_PREFETCH_BUILTIN              1 when clang's __builtin_prefetch on a
 *                                     __global pointer built and ran on the
 *                                     device (a probe, runtime/shape.c)
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
#ifndef CLF_PREFETCH_BUILTIN
#define CLF_PREFETCH_BUILTIN 0
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

/* ---- 16-bit storage ----------------------------------------------------------
 * A tensor may be stored as float32, bf16 or f16 (runtime/convert.h's
 * clf_dtype: 0, 1, 2); kernels compute in float32 and convert as they load
 * and store. bf16 is the top half of a float32: widening is a shift,
 * narrowing rounds to nearest even on the integer bits (a NaN stays a NaN,
 * quieted; an overflow past bf16's largest finite value becomes an
 * infinity, as the rounding carries into the exponent). f16 goes through
 * the core vload_half / vstore_half_rte, which need no cl_khr_fp16. Indices
 * count elements of the tensor's own type. */

static inline ushort clf_f32_to_bf16(float x)
{
    uint u = as_uint(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: keep the sign and quiet it */
        return (ushort)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (ushort)(u >> 16);
}

/* Element i of p, stored as t. */
static inline float clf_load_t(const __global float *p, uint t, ulong i)
{
    if (t == CLF_T_F32)
        return p[i];
    if (t == CLF_T_BF16)
        return as_float((uint)((const __global ushort *)p)[i] << 16);
    return vload_half(i, (const __global half *)p);
}

/* Store v as element i of p, stored as t. */
static inline void clf_store_t(__global float *p, uint t, ulong i, float v)
{
    if (t == CLF_T_F32)
        p[i] = v;
    else if (t == CLF_T_BF16)
        ((__global ushort *)p)[i] = clf_f32_to_bf16(v);
    else
        vstore_half_rte(v, i, (__global half *)p);
}

/* The same for W consecutive elements from element i (W = 2, 4, 8, 16):
 * clf_load<W>_t, clf_store<W>_t, and clf_f32_to_bf16_<W>, the rounding of
 * clf_f32_to_bf16 lane by lane. */
#define CLF_CAT_(a, b) a##b
#define CLF_CAT(a, b) CLF_CAT_(a, b)
#define CLF_TYPED_VEC(W)                                                                          \
    static inline CLF_CAT(ushort, W) CLF_CAT(clf_f32_to_bf16_, W)(CLF_CAT(float, W) x)           \
    {                                                                                             \
        const CLF_CAT(uint, W) u = CLF_CAT(as_uint, W)(x);                                        \
        const CLF_CAT(uint, W) rn = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;                       \
        const CLF_CAT(uint, W) qn = (u >> 16) | 0x0040u;                                          \
        return CLF_CAT(convert_ushort, W)(select(rn, qn, (u & 0x7FFFFFFFu) > 0x7F800000u));       \
    }                                                                                             \
    static inline CLF_CAT(float, W)                                                               \
        CLF_CAT(CLF_CAT(clf_load, W), _t)(const __global float *p, uint t, ulong i)               \
    {                                                                                             \
        if (t == CLF_T_F32)                                                                       \
            return CLF_CAT(vload, W)(0, p + i);                                                   \
        if (t == CLF_T_BF16)                                                                      \
            return CLF_CAT(as_float, W)(                                                          \
                CLF_CAT(convert_uint, W)(CLF_CAT(vload, W)(0, (const __global ushort *)p + i))    \
                << 16);                                                                           \
        return CLF_CAT(vload_half, W)(0, (const __global half *)p + i);                           \
    }                                                                                             \
    static inline void CLF_CAT(CLF_CAT(clf_store, W), _t)(CLF_CAT(float, W) v, __global float *p, \
                                                          uint t, ulong i)                        \
    {                                                                                             \
        if (t == CLF_T_F32)                                                                       \
            CLF_CAT(vstore, W)(v, 0, p + i);                                                      \
        else if (t == CLF_T_BF16)                                                                 \
            CLF_CAT(vstore, W)(CLF_CAT(clf_f32_to_bf16_, W)(v), 0, (__global ushort *)p + i);     \
        else                                                                                      \
            CLF_CAT(CLF_CAT(vstore_half, W), _rte)(v, 0, (__global half *)p + i);                 \
    }
CLF_TYPED_VEC(2)
CLF_TYPED_VEC(4)
CLF_TYPED_VEC(8)
CLF_TYPED_VEC(16)

/* Largest finite float, used as -infinity stand-in where inf arithmetic would
 * produce NaN (e.g. inf - inf in a fully masked softmax row). */
#define CLF_NEG_BIG (-3.402823466e+38f)

/* An item kernel written in vectors of T, a work-item one SIMD stream (the
 * norms' rows and the bias gradient's column blocks in float8 lanes):
 * vec_type_hint says so, and a compiler that vectorises across work-items
 * (Intel's CPU runtime) then compiles it as written instead of packing
 * several items' vectors together, which ran layernorm_backward_item up
 * to a third slower there (docs/devices.md). */
#define CLF_ITEM_HINT(T) __attribute__((vec_type_hint(T)))

/* ---- reductions shared by the row kernels (reduce, norm) ---- */

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

/* ---- Philox4x32-10 (random.cl's dropout and generator, the flash family's dropout) ----
 * Salmon et al. (SC11), bit-compatible with Random123's philox4x32_R(10):
 * counter (c0..c3), key (k0, k1). CLF_PHILOX10 runs the ten rounds in place
 * on c0..c3 of any uint type (uint, or a vector of them), UL the 64-bit type
 * of the same width, CVT_UL and CVT_U converting to and from it: the 32x32->64
 * products as 64-bit multiplies, unrolled (the compiler vectorises these
 * across work-items; a rolled loop with mul_hi was 7x slower on PoCL). */
#define CLF_PHILOX_M0 0xD2511F53u
#define CLF_PHILOX_M1 0xCD9E8D57u
#define CLF_PHILOX_W0 0x9E3779B9u
#define CLF_PHILOX_W1 0xBB67AE85u

#define CLF_PHILOX_ROUND(c0, c1, c2, c3, k0, k1, UL, CVT_UL, CVT_U)                            \
    do {                                                                                   \
        const UL p0_ = CVT_UL(c0) * (ulong)CLF_PHILOX_M0;                                  \
        const UL p1_ = CVT_UL(c2) * (ulong)CLF_PHILOX_M1;                                  \
        c0 = CVT_U(p1_ >> 32) ^ c1 ^ (k0);                                                 \
        c2 = CVT_U(p0_ >> 32) ^ c3 ^ (k1);                                                 \
        c1 = CVT_U(p1_);                                                                   \
        c3 = CVT_U(p0_);                                                                   \
    } while (0)
#define CLF_PHILOX_BUMP(k0, k1)                                                            \
    do {                                                                                   \
        k0 += CLF_PHILOX_W0;                                                               \
        k1 += CLF_PHILOX_W1;                                                               \
    } while (0)
#define CLF_PHILOX_RB(c0, c1, c2, c3, k0, k1, UL, CVT_UL, CVT_U)                               \
    CLF_PHILOX_ROUND(c0, c1, c2, c3, k0, k1, UL, CVT_UL, CVT_U);                               \
    CLF_PHILOX_BUMP(k0, k1)
#define CLF_PHILOX10(c0, c1, c2, c3, k0, k1, UL, CVT_UL, CVT_U)                                \
    do {                                                                                   \
        CLF_PHILOX_RB(c0, c1, c2, c3, k0, k1, UL, CVT_UL, CVT_U);                              \
        CLF_PHILOX_RB(c0, c1, c2, c3, k0, k1, UL, CVT_UL, CVT_U);                              \
        CLF_PHILOX_RB(c0, c1, c2, c3, k0, k1, UL, CVT_UL, CVT_U);                              \
        CLF_PHILOX_RB(c0, c1, c2, c3, k0, k1, UL, CVT_UL, CVT_U);                              \
        CLF_PHILOX_RB(c0, c1, c2, c3, k0, k1, UL, CVT_UL, CVT_U);                              \
        CLF_PHILOX_RB(c0, c1, c2, c3, k0, k1, UL, CVT_UL, CVT_U);                              \
        CLF_PHILOX_RB(c0, c1, c2, c3, k0, k1, UL, CVT_UL, CVT_U);                              \
        CLF_PHILOX_RB(c0, c1, c2, c3, k0, k1, UL, CVT_UL, CVT_U);                              \
        CLF_PHILOX_RB(c0, c1, c2, c3, k0, k1, UL, CVT_UL, CVT_U);                              \
        CLF_PHILOX_ROUND(c0, c1, c2, c3, k0, k1, UL, CVT_UL, CVT_U); /* round 10 */            \
    } while (0)
#define CLF_TO_ULONG(x) ((ulong)(x))
#define CLF_TO_UINT(x) ((uint)(x))

static inline uint4 clf_philox4x32_10(uint4 c, uint2 k)
{
    uint c0 = c.x, c1 = c.y, c2 = c.z, c3 = c.w, k0 = k.x, k1 = k.y;
    CLF_PHILOX10(c0, c1, c2, c3, k0, k1, ulong, CLF_TO_ULONG, CLF_TO_UINT);
    return (uint4)(c0, c1, c2, c3);
}

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

/* ---- activations (elementwise.cl's kernels, gemm.cl's epilogue), e^x for x <= 0 ---- */

#define CLF_SQRT1_2 0.70710678118654752f
#define CLF_INV_SQRT_2PI 0.39894228040143268f
#define CLF_SQRT_2_OVER_PI 0.79788456080286536f
#define CLF_GELU_K 0.044715f

/* ---- CLF_FMA(a, b, c): a * b + c in the inner loops ----------------------------------------------
 * OpenCL's fma() must round once; a device whose generated code has no fused
 * multiply-add emulates it exactly in software, many times slower than
 * a * b + c (docs/devices.md). runtime/shape.c times the two and the
 * preamble says which is fast (CLF_FMA_FAST; a program built before that is
 * measured gets fma()). Where fma() is fast it is used, so those devices keep
 * its single rounding; elsewhere the compiler may fuse a * b + c or not. */
#if !defined(CLF_FMA_FAST) || CLF_FMA_FAST
#define CLF_FMA(a, b, c) fma(a, b, c)
#else
#define CLF_FMA(a, b, c) ((a) * (b) + (c))
#endif

/* ---- e^x for x <= 0, for T = float, float2, float4, float8 and float16 -------------------------------
 * Cody-Waite reduction x = k ln2 + r, |r| <= ln2 / 2, with k rounded to
 * nearest by adding 1.5 * 2^23 (so k is also read back from the bits of the
 * sum), then Cephes' expf polynomial (relative error about 1 ulp) and 2^k
 * built in the exponent field. x below -87 is raised to -87 (e^-87 = 1.6e-38,
 * the smallest normal range): the result is then within 2e-38 of e^x. Only
 * products, sums, selects and integer operations, so it stays in vector
 * registers. The products and sums are written as such, not as fma(): a
 * compiler may fuse them (clang does for x86 with FMA, so the bits are those
 * of fma() there), while OpenCL's fma() must be exact, which a device
 * without a fused multiply-add of its own builds as an exact emulation
 * (Mesa's llvmpipe: seconds of compilation per vector exp). */
#define CLF_EXP_NONPOS(T, S, IT)                                                              \
    static inline T clf_exp_nonpos##S(T x)                                                          \
    {                                                                                        \
        x = select(x, (T)(-87.0f), x < -87.0f);                                              \
        T y = x * 1.44269504088896341f + 12582912.0f;                                        \
        T k = y - 12582912.0f;                                                               \
        T r = k * -0.693359375f + x;                                                         \
        r = k * 2.12194440e-4f + r;                                                          \
        T p = (T)(1.9875691500e-4f);                                                         \
        p = p * r + 1.3981999507e-3f;                                                        \
        p = p * r + 8.3334519073e-3f;                                                        \
        p = p * r + 4.1665795894e-2f;                                                        \
        p = p * r + 1.6666665459e-1f;                                                        \
        p = p * r + 5.0000001201e-1f;                                                        \
        p = p * (r * r) + r + 1.0f;                                                          \
        return p * as_##T((as_##IT(y) - 0x4B400000 + 127) << 23);                             \
    }

CLF_EXP_NONPOS(float, , int)
CLF_EXP_NONPOS(float2, 2, int2)
CLF_EXP_NONPOS(float4, 4, int4)
CLF_EXP_NONPOS(float8, 8, int8)
CLF_EXP_NONPOS(float16, 16, int16)

/* ---- activations: value and derivative, for T = float, float2 ... float16 ---- */

/* GELU (erf):  x Phi(x); Phi(x) = erfc(-x / sqrt 2) / 2 via erfc_pos(z), z >= 0:
 *   Numerical Recipes' erfcc, a Chebyshev fit with fractional error < 1.2e-7
 *   (so Phi(x) for x << 0 keeps its relative accuracy).
 * GELU (tanh): 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
 *   = x * sigmoid(2u); with a = exp(-2|u|) in (0, 1]:
 *   sigmoid(2u) = 1/(1+a) (u >= 0) or a/(1+a), 1 - tanh(u)^2 = 4a/(1+a)^2.
 * SiLU: x sigmoid(x), sigmoid from a = e^-|x| as for GELU (tanh), so the
 *   scalar and vector forms give the same bits (PoCL's exp() does not). */
#define CLF_ACT_FUNCS(T, S)                                                                   \
    static inline T clf_none##S(T x) { return x; }                                                  \
    static inline T clf_none_grad##S(T x) { (void)x; return (T)(1.0f); }                            \
    static inline T clf_relu##S(T x) { return select((T)(0.0f), x, x > 0.0f); }                     \
    static inline T clf_relu_grad##S(T x) { return select((T)(0.0f), (T)(1.0f), x > 0.0f); }        \
    static inline T clf_erfc_pos##S(T z)                                                            \
    {                                                                                        \
        T t = 1.0f / (1.0f + 0.5f * z);                                                      \
        T p = -1.26551223f +                                                                 \
              t * (1.00002368f +                                                             \
                   t * (0.37409196f +                                                        \
                        t * (0.09678418f +                                                   \
                             t * (-0.18628806f +                                             \
                                  t * (0.27886807f +                                         \
                                       t * (-1.13520398f +                                   \
                                            t * (1.48851587f +                               \
                                                 t * (-0.82215223f + t * 0.17087277f))))))));\
        return t * clf_exp_nonpos##S(p - z * z);                                             \
    }                                                                                        \
    static inline T clf_phi##S(T x)                                                                 \
    {                                                                                        \
        T r = 0.5f * clf_erfc_pos##S(fabs(x) * CLF_SQRT1_2); /* Phi(-|x|) */                 \
        return select(r, 1.0f - r, x > 0.0f);                                                \
    }                                                                                        \
    static inline T clf_gelu_erf##S(T x) { return x * clf_phi##S(x); }                              \
    /* the derivative from Phi(x) (given): the erfc shared with the value */                 \
    static inline T clf_gelu_erf_grad_phi##S(T x, T ph)                                             \
    {                                                                                        \
        return ph + x * (CLF_INV_SQRT_2PI * clf_exp_nonpos##S(-0.5f * x * x));               \
    }                                                                                        \
    static inline T clf_gelu_erf_grad##S(T x) { return clf_gelu_erf_grad_phi##S(x, clf_phi##S(x)); } \
    static inline T clf_gelu_tanh##S(T x)                                                           \
    {                                                                                        \
        T u = CLF_SQRT_2_OVER_PI * (x + CLF_GELU_K * x * x * x);                             \
        T a = clf_exp_nonpos##S(-2.0f * fabs(u)), inv = 1.0f / (1.0f + a);                                 \
        return x * select(a * inv, inv, u >= 0.0f);                                          \
    }                                                                                        \
    static inline T clf_gelu_tanh_grad##S(T x)                                                      \
    {                                                                                        \
        T x2 = x * x;                                                                        \
        T u = CLF_SQRT_2_OVER_PI * (x + CLF_GELU_K * x2 * x);                                \
        T du = CLF_SQRT_2_OVER_PI * (1.0f + 3.0f * CLF_GELU_K * x2);                         \
        T a = clf_exp_nonpos##S(-2.0f * fabs(u)), inv = 1.0f / (1.0f + a);                                 \
        return select(a * inv, inv, u >= 0.0f) + 2.0f * x * du * a * inv * inv;              \
    }                                                                                        \
    static inline T clf_sigmoid##S(T x)                                                             \
    {                                                                                        \
        T a = clf_exp_nonpos##S(-fabs(x)), inv = 1.0f / (1.0f + a);                          \
        return select(a * inv, inv, x >= 0.0f);                                              \
    }                                                                                        \
    static inline T clf_silu##S(T x) { return x * clf_sigmoid##S(x); }                              \
    static inline T clf_silu_grad_sig##S(T x, T s) { return s * (1.0f + x * (1.0f - s)); }          \
    static inline T clf_silu_grad##S(T x) { return clf_silu_grad_sig##S(x, clf_sigmoid##S(x)); }    \
    /* the values of x[0 .. n-1] in a[], and with want_g their derivatives */              \
    /* in g[] (else g[] = 1), sharing what both compute: the same bits as */                 \
    /* clf_<act> and clf_<act>_grad; act as the GEMM epilogue's code */                      \
    /* (contract.h's CLF_ACTCODE_*). One test of act for the n values (n is */              \
    /* a constant once inlined: a GEMM epilogue's row of vectors, each */                     \
    /* activation's code unrolled over them). A caller that needs no */                       \
    /* derivative (a forward in evaluation) skips its second exponential. */                 \
    static inline void clf_act_evaln##S(uint act, int n, const T *x, int want_g, T *a, T *g)  \
    {                                                                                        \
        _Pragma("unroll") for (int i = 0; i < n; i++) g[i] = (T)(1.0f);                      \
        if (act == CLF_ACTCODE_GELU_ERF) {                                                   \
            if (want_g) {                                                                    \
                _Pragma("unroll") for (int i = 0; i < n; i++) {                              \
                    const T ph = clf_phi##S(x[i]);                                           \
                    g[i] = clf_gelu_erf_grad_phi##S(x[i], ph);                               \
                    a[i] = x[i] * ph;                                                        \
                }                                                                            \
            } else {                                                                         \
                _Pragma("unroll") for (int i = 0; i < n; i++) a[i] = x[i] * clf_phi##S(x[i]); \
            }                                                                                \
        } else if (act == CLF_ACTCODE_SILU) {                                                \
            if (want_g) {                                                                    \
                _Pragma("unroll") for (int i = 0; i < n; i++) {                              \
                    const T sg = clf_sigmoid##S(x[i]);                                       \
                    g[i] = clf_silu_grad_sig##S(x[i], sg);                                   \
                    a[i] = x[i] * sg;                                                        \
                }                                                                            \
            } else {                                                                         \
                _Pragma("unroll") for (int i = 0; i < n; i++) a[i] = clf_silu##S(x[i]);      \
            }                                                                                \
        } else if (act == CLF_ACTCODE_GELU_TANH) {                                           \
            if (want_g) {                                                                    \
                _Pragma("unroll") for (int i = 0; i < n; i++) g[i] = clf_gelu_tanh_grad##S(x[i]); \
            }                                                                                \
            _Pragma("unroll") for (int i = 0; i < n; i++) a[i] = clf_gelu_tanh##S(x[i]);     \
        } else if (act == CLF_ACTCODE_RELU) {                                                \
            _Pragma("unroll") for (int i = 0; i < n; i++) {                                  \
                if (want_g)                                                                  \
                    g[i] = clf_relu_grad##S(x[i]);                                           \
                a[i] = clf_relu##S(x[i]);                                                    \
            }                                                                                \
        } else {                                                                             \
            _Pragma("unroll") for (int i = 0; i < n; i++) a[i] = x[i];                       \
        }                                                                                    \
    }                                                                                        \
    /* the same for one value: its activation, its derivative in *g */                       \
    static inline T clf_act_eval##S(uint act, T x, int want_g, T *g)                          \
    {                                                                                        \
        T a;                                                                                 \
        clf_act_evaln##S(act, 1, &x, want_g, &a, g);                                         \
        return a;                                                                            \
    }

CLF_ACT_FUNCS(float, )
CLF_ACT_FUNCS(float2, 2)
CLF_ACT_FUNCS(float4, 4)
CLF_ACT_FUNCS(float8, 8)
CLF_ACT_FUNCS(float16, 16)

/* ---- rows of norms, one work-item (norm.cl, attention.cl) ---- */

/* A row's LayerNorm statistics {mean, rstd} of x[0..N), one work-item:
 * float8 lanes, then the tail; two passes (the variance about the mean). */
static inline float2 ln_stats_item(__global const float *x, ulong N, float eps)
{
    ulong j;
    float8 a8 = (float8)(0.0f);
    for (j = 0; j + 8 <= N; j += 8)
        a8 += vload8(0, x + j);
    float s = clf_hsum8(a8);
    for (; j < N; j++)
        s += x[j];
    const float m = s / (float)N;
    a8 = (float8)(0.0f);
    for (j = 0; j + 8 <= N; j += 8) {
        float8 d = vload8(0, x + j) - m;
        a8 += d * d;
    }
    float v = clf_hsum8(a8);
    for (; j < N; j++) {
        float d = x[j] - m;
        v += d * d;
    }
    return (float2)(m, 1.0f / sqrt(v / (float)N + eps));
}

/* A row's RMSNorm rstd of x[0..N), one work-item, lanes as ln_stats_item. */
static inline float rms_rstd_item(__global const float *x, ulong N, float eps)
{
    ulong j;
    float8 a8 = (float8)(0.0f);
    for (j = 0; j + 8 <= N; j += 8) {
        float8 v = vload8(0, x + j);
        a8 += v * v;
    }
    float ss = clf_hsum8(a8);
    for (; j < N; j++)
        ss += x[j] * x[j];
    return 1.0f / sqrt(ss / (float)N + eps);
}

/* Decoding's norm and the linear after it (norm.cl's norm_dot_item,
 * attention.cl's attn_qkv_decode_item), one work-item's block of
 * CLF_NORM_DOT_N columns: s[c] = sum_k xhat[k] W[c, k] for the rows c <
 * CLF_NORM_DOT_N of W (row stride C; rows from n on, n >= 1, read row n - 1
 * and their sums are not meant to be used), where xhat = (x - m) * rs * nw
 * (+ nb with has_nb) for LayerNorm, x * rs * nw for RMSNorm. One pass over
 * the block's weights, 16 lanes a column, then the tail. */
static inline void clf_norm_dot_cols(float *s, __global const float *x, float m, float rs,
                                     int rms, __global const float *nw,
                                     __global const float *nb, int has_nb,
                                     __global const float *W, ulong n, ulong C)
{
    ulong k;
    __global const float *wr[CLF_NORM_DOT_N];
    float16 acc[CLF_NORM_DOT_N];
#pragma unroll
    for (int c = 0; c < CLF_NORM_DOT_N; c++) {
        wr[c] = W + min((ulong)c, n - 1) * C;
        acc[c] = (float16)(0.0f);
    }
    for (k = 0; k + 16 <= C; k += 16) {
        float16 h;
        if (rms) {
            h = vload16(0, x + k) * rs * vload16(0, nw + k);
        } else {
            h = (vload16(0, x + k) - m) * rs * vload16(0, nw + k);
            if (has_nb)
                h += vload16(0, nb + k);
        }
#pragma unroll
        for (int c = 0; c < CLF_NORM_DOT_N; c++)
            acc[c] = CLF_FMA(h, vload16(0, wr[c] + k), acc[c]);
    }
#pragma unroll
    for (int c = 0; c < CLF_NORM_DOT_N; c++)
        s[c] = clf_hsum8(acc[c].lo + acc[c].hi);
    for (; k < C; k++) {
        float h = rms ? x[k] * rs * nw[k] : (x[k] - m) * rs * nw[k];
        if (!rms && has_nb)
            h += nb[k];
#pragma unroll
        for (int c = 0; c < CLF_NORM_DOT_N; c++)
            s[c] = CLF_FMA(h, wr[c][k], s[c]);
    }
}

/* ---- rotary positions (embed.cl's rope, attention.cl's decoding) ---- */

/* cos and sin of RoPE's angle p * inv_freq, times mscale; sin negated for
 * the inverse rotation. */
static inline float2 rope_cs(float p, float inv_freq, float mscale, int inverse)
{
    float cs;
    float sn = sincos(p * inv_freq, &cs);
    if (mscale != 1.0f) {
        cs *= mscale;
        sn *= mscale;
    }
    return (float2)(cs, inverse ? -sn : sn);
}

/* Pair i's frequency of a head of HS: theta^(-2i/HS) from log2_theta, and
 * with a factor other than 1 blended with its interpolation by the ramp
 * over i (clf_rope in model/ops/ops.h). */
static inline float rope_inv_freq(uint i, uint HS, float log2_theta, float factor, float ramp_lo,
                                  float ramp_hi)
{
    float inv_freq = exp2(-((float)(2 * i) / (float)HS) * log2_theta);
    if (factor != 1.0f) {
        float e = 1.0f - clamp(((float)i - ramp_lo) / (ramp_hi - ramp_lo), 0.0f, 1.0f);
        inv_freq = inv_freq / factor * (1.0f - e) + inv_freq * e;
    }
    return inv_freq;
}

/* RoPE's rotation of one head x[0..HS) (private) at position p: pairs (i,
 * i + HS/2), as embed.cl's rope rotates them. */
static inline void rope_head(float *x, uint HS, float p, float log2_theta, float factor,
                             float ramp_lo, float ramp_hi, float mscale)
{
    const uint hs2 = HS / 2;
    for (uint i = 0; i < hs2; i++) {
        const float2 e =
            rope_cs(p, rope_inv_freq(i, HS, log2_theta, factor, ramp_lo, ramp_hi), mscale, 0);
        const float x1 = x[i], x2 = x[i + hs2];
        x[i] = x1 * e.x - x2 * e.y;
        x[i + hs2] = x2 * e.x + x1 * e.y;
    }
}

/* ---- decoding's attention, one work-item (attention.cl, decode.cl) ---- */

#define ATTN_ITEM_CHUNK 64 /* ATTN_ITEM_HS_MAX: runtime/contract.h */

/* One work-item's pass over positions [s0, s1) of a (b, head): the query
 * qs (scaled), key and value rows kb, vb (HS apart; position snew's from
 * knr, vnr instead), the keep mask kp (has_keep), the biases (slope: ALiBi;
 * rbh with rb_w, qrh with rqr_w: relative positions, as attn_decode's) ->
 * *m, *l and acc[0..HS) updated (the online softmax's max, sum and
 * unnormalised output). */
static inline void attn_item_pass(float *acc, float *m_io, float *l_io, const float *qs,
                                  __global const float *kb, __global const float *vb,
                                  __global const float *knr, __global const float *vnr,
                                  uint snew, __global const int *kp, int has_keep, uint s0,
                                  uint s1, uint L, uint HS, float slope,
                                  __global const float *rbh, uint rb_w,
                                  __global const float *qrh, uint rqr_w, uint rel_k)
{
    const uint hv = HS / 8 * 8;
    float sc[ATTN_ITEM_CHUNK];
    float m = *m_io, l = *l_io;
    for (uint c0 = s0; c0 < s1; c0 += ATTN_ITEM_CHUNK) {
        const uint nc = min((uint)ATTN_ITEM_CHUNK, s1 - c0);
        float mc = m;
        for (uint c = 0; c < nc; c++) {
            const uint s = c0 + c;
            float a = CLF_NEG_BIG;
            if (!has_keep || kp[s] != 0) {
                __global const float *kr = s == snew ? knr : kb + (ulong)s * HS;
                float8 v8 = (float8)(0.0f);
                for (uint d = 0; d < hv; d += 8)
                    v8 = CLF_FMA(vload8(0, qs + d), vload8(0, kr + d), v8);
                a = clf_hsum8(v8);
                for (uint d = hv; d < HS; d++)
                    a = CLF_FMA(qs[d], kr[d], a);
                a -= slope * (float)(L - 1 - s);
                if (rb_w)
                    a += rbh[L - 1 - s];
                if (rqr_w)
                    a += qrh[clamp((int)s - (int)(L - 1), -(int)rel_k, (int)rel_k) + (int)rel_k];
                mc = fmax(mc, a);
            }
            sc[c] = a;
        }
        const float corr = clf_exp_nonpos(m - mc);
        l *= corr;
        for (uint d = 0; d < HS; d++)
            acc[d] *= corr;
        for (uint c = 0; c < nc; c++) {
            const uint s = c0 + c;
            if (has_keep && kp[s] == 0)
                continue;
            const float e = clf_exp_nonpos(sc[c] - mc);
            l += e;
            __global const float *vr = s == snew ? vnr : vb + (ulong)s * HS;
            for (uint d = 0; d < hv; d += 8)
                vstore8(CLF_FMA((float8)(e), vload8(0, vr + d), vload8(0, acc + d)), 0, acc + d);
            for (uint d = hv; d < HS; d++)
                acc[d] = CLF_FMA(e, vr[d], acc[d]);
        }
        m = mc;
    }
    *m_io = m;
    *l_io = l;
}
