/*
 * convert.cl - float32 <-> the 16-bit storage formats, for matrices with
 * row strides and batches (runtime/convert.h).
 *
 * bf16 is the top half of a float32: widening is a shift, narrowing rounds
 * to nearest even on the integer bits (a NaN stays a NaN, quieted; an
 * overflow past bf16's largest finite value becomes an infinity, as the
 * rounding carries into the exponent). f16 is IEEE binary16 through the
 * core vload_half / vstore_half_rte, which need no cl_khr_fp16: values past
 * its range become infinities, tiny ones subnormals or zero.
 *
 * Every kernel is 3-D: (column, row, batch), one element per work-item;
 * element offsets, row strides and batch strides count elements of each
 * side's own type. The arithmetic is integer (bf16) or the conversion
 * built-ins (f16): exact, and the same on every device.
 */

#define CONVERT_ARGS(TO, FROM)                                                                     \
    __global TO *dst, ulong dst_off, ulong dst_ld, ulong dst_stride, __global const FROM *src,     \
        ulong src_off, ulong src_ld, ulong src_stride, ulong rows, ulong cols

#define CONVERT_INDEX                                                                              \
    const ulong j = get_global_id(0), i = get_global_id(1), z = get_global_id(2);                  \
    if (i >= rows || j >= cols)                                                                    \
        return;                                                                                    \
    const ulong s = src_off + z * src_stride + i * src_ld + j;                                     \
    const ulong d = dst_off + z * dst_stride + i * dst_ld + j;

static inline ushort f32_to_bf16(float x)
{
    uint u = as_uint(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: keep the sign and quiet it */
        return (ushort)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (ushort)(u >> 16);
}

__kernel void widen_bf16(CONVERT_ARGS(float, ushort))
{
    CONVERT_INDEX
    dst[d] = as_float((uint)src[s] << 16);
}

__kernel void narrow_bf16(CONVERT_ARGS(ushort, float))
{
    CONVERT_INDEX
    dst[d] = f32_to_bf16(src[s]);
}

__kernel void widen_f16(CONVERT_ARGS(float, half))
{
    CONVERT_INDEX
    dst[d] = vload_half(s, src);
}

__kernel void narrow_f16(CONVERT_ARGS(half, float))
{
    CONVERT_INDEX
    vstore_half_rte(src[s], d, dst);
}
