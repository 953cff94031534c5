/*
 * common.cl - definitions shared by every kernel family.
 *
 * Every program is compiled as: generated preamble + common.cl + <family>.cl.
 * The preamble (runtime/program.c) defines, from the device's reported
 * features rather than assumptions:
 *   CLF_DEVICE_CPU / CLF_DEVICE_GPU   1 for the device's type, else 0
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
#ifndef CLF_DEVICE_CPU
#define CLF_DEVICE_CPU 0
#endif
#ifndef CLF_DEVICE_GPU
#define CLF_DEVICE_GPU 0
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
