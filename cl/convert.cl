/*
 * convert.cl - float32 <-> the 16-bit storage formats, for matrices with
 * row strides and batches (runtime/convert.h).
 *
 * The formats and their rounding are common.cl's (clf_f32_to_bf16; f16
 * through the core vload_half / vstore_half_rte, which need no
 * cl_khr_fp16: values past its range become infinities, tiny ones
 * subnormals or zero), the ones every kernel that stores 16 bits uses.
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

__kernel void widen_bf16(CONVERT_ARGS(float, ushort))
{
    CONVERT_INDEX
    dst[d] = as_float((uint)src[s] << 16);
}

__kernel void narrow_bf16(CONVERT_ARGS(ushort, float))
{
    CONVERT_INDEX
    dst[d] = clf_f32_to_bf16(src[s]);
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
