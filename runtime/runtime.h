/*
 * runtime.h - the OpenCL runtime: devices, the device handle, programs,
 * buffers, kernel launches, profiling.
 *
 * Overview
 *   clf_devices_list() enumerates every platform and device without creating
 *   anything; clf_devices_select() resolves a selector string ("0", "1:0",
 *   "gpu", "gpu:1", "cpu", or a case-insensitive name substring) against that
 *   list. clf_runtime_create() opens a context and one in-order queue on the
 *   selected device. That handle is the only mutable state the library keeps:
 *   programs, kernels and the GEMM engine choice hang off it.
 *
 *   Programs are compiled per kernel family ("elementwise", "norm", ...):
 *   source = generated #define preamble (device features, precision, tile
 *   sizes) + cl/common.cl + cl/<family>.cl. Compiled binaries are cached on
 *   disk keyed by a hash of source, options, device, driver and platform
 *   version; see program.c.
 *
 *   Device memory is addressed as (buffer, element offset) pairs, clf_ptr, so
 *   one allocation can hold many tensors without sub-buffer alignment rules.
 *   Kernels take the buffer and the offset as separate arguments.
 *
 * Example
 *   clf_runtime_options o = clf_runtime_options_default();
 *   o.device = "cpu";
 *   clf_runtime *rt; clf_error e;
 *   if (clf_runtime_create(&rt, &o, &e) != CLF_OK) { ...report e... }
 *   clf_buffer *b; clf_buffer_create(rt, 1024 * sizeof(float), &b, &e);
 *   clf_kernel *k; clf_kernel_get(rt, "elementwise", "zero_f32", &k, &e);
 *   clf_arg a[] = { CLF_ARG_BUF(b), CLF_ARG_U64(0), CLF_ARG_U64(1024) };
 *   size_t g = 1024 / 8; (zero_f32 clears 8 floats per work-item)
 *   clf_kernel_launch(rt, k, 1, &g, NULL, 3, a, &e);
 *   clf_buffer_destroy(b); clf_runtime_destroy(rt);
 *
 * Not here: tensors with shapes (model/), the GEMM interface (gemm.h).
 * Only runtime/ includes <CL/cl.h>.
 */
#ifndef CLF_RUNTIME_H
#define CLF_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

CLF_API_BEGIN

/* ---- devices ------------------------------------------------------------ */

/* How a device's kernel shape was decided (clf_device_info.shape_source). */
typedef enum clf_shape_source {
    CLF_SHAPE_BY_TYPE = 0, /* from the device type alone: not measured (yet) */
    CLF_SHAPE_MEASURED,    /* timed by this runtime (and cached) */
    CLF_SHAPE_CACHED,      /* timed earlier, read from the cache */
    CLF_SHAPE_FORCED,      /* the caller's choice (clf_runtime_options.shape) */
} clf_shape_source;

typedef struct clf_device_info {
    int index;          /* global index over all platforms */
    int platform_index; /* index of the platform */
    int device_index;   /* index within the platform */
    char platform[256];
    char platform_version[256];
    char name[256];
    char vendor[256];
    char type[16]; /* "cpu" | "gpu" | "accelerator" | "other" */
    unsigned compute_units;
    unsigned clock_mhz;
    uint64_t global_mem;     /* bytes */
    uint64_t local_mem;      /* bytes */
    int local_mem_is_global; /* local memory emulated in global memory */
    uint64_t max_alloc;      /* CL_DEVICE_MAX_MEM_ALLOC_SIZE, bytes */
    size_t max_work_group;
    unsigned mem_base_align; /* bits */
    unsigned pref_vec_float; /* preferred float vector width */
    char cl_c_version[128];
    char driver_version[256];
    int fp16;      /* cl_khr_fp16 */
    int fp64;      /* cl_khr_fp64 */
    int subgroups; /* cl_khr_subgroups or cl_intel_subgroups (reported; no kernel uses them yet) */
    /* Derived, the one input of the kernels' shape choices: a work-group runs
     * its items one after another, so kernels take one work-item per row
     * with long vector loops ("item") instead of cooperative groups with
     * local-memory trees ("group"), and the native GEMM its register-blocked
     * CPU tile. Enumeration sets it from the device's type (a CPU, or local
     * memory emulated in global memory); a runtime sets it, and the
     * preferred vector width for the item shape, from a measurement
     * (runtime/shape.c), cached with the device's other facts. */
    int serial_groups;
    /* Where serial_groups (and, for item, pref_vec_float) came from, and
     * why: */
    clf_shape_source shape_source;
    char shape_reason[256];
    /* Measured with the shape: the loop iterations after which the device
     * ends a work-item's loops, silently (0: none seen in 2^18; Mesa 22's
     * llvmpipe stops at 65535, counted over all of an item's loops). A
     * kernel launch whose items would run longer gives wrong results. */
    unsigned loop_limit;
    /* Measured with the shape: OpenCL's fma() runs many times slower than
     * a * b + c (emulated in software: Mesa 22's llvmpipe), so the kernels
     * write a * b + c (the preamble's CLF_FMA_FAST 0). */
    int fma_slow;
    /* Probed with the shape: clang's __builtin_prefetch on a __global
     * pointer builds and runs (the preamble's CLF_PREFETCH_BUILTIN; the
     * native GEMM's software prefetch uses it where items run one after
     * another, else OpenCL C's prefetch()). */
    int prefetch_builtin;
} clf_device_info;

/* Enumerate all devices. *out is malloc'ed; free it with free().
 * No platform at all -> CLF_ERR_NO_PLATFORM with a message on installing PoCL. */
clf_status clf_devices_list(clf_device_info **out, int *count, clf_error *err);

/* Resolve sel against devs. sel NULL or "" picks the default: the first GPU,
 * else the first CPU, else device 0. No match -> CLF_ERR_NO_DEVICE with the
 * available devices listed in the message. */
clf_status clf_devices_select(const clf_device_info *devs, int count, const char *sel, int *index,
                              clf_error *err);

/* ---- the device handle ---------------------------------------------------- */

typedef enum clf_gemm_engine {
    CLF_GEMM_AUTO = 0, /* search CLBlast and the native configurations once per
                          device and shape class, cache the choice */
    CLF_GEMM_CLBLAST,
    CLF_GEMM_NATIVE,
} clf_gemm_engine;

typedef enum clf_shape {
    CLF_SHAPE_AUTO = 0, /* measure (runtime/shape.c) */
    CLF_SHAPE_ITEM,     /* one work-item per row, vector loops */
    CLF_SHAPE_GROUP,    /* one work-group per row, local-memory trees */
} clf_shape;

/* What the kernel cache keeps of a program built from source. A binary
 * saves its build at every later start, but asking an implementation for
 * one may compile every kernel of the program once more: PoCL 3.1 compiles
 * each for any work-group size (7.5 s for a GEMM program whose build took
 * 0.4 s), though its launches compile their own. A note saves that
 * compile and costs a build from source at every later start (PoCL, which
 * keeps its own builds: 27-56 ms a program). docs/devices.md has the
 * figures. */
typedef enum clf_binaries {
    CLF_BINARIES_KEEP = 0, /* the program's binary */
    CLF_BINARIES_NOTE,     /* a note that the source was built on this device:
                              built again from source at each start, unannounced */
} clf_binaries;

/* "keep" or "notes" (the CLI's --kernel-binaries, $CLFORMER_KERNEL_BINARIES)
 * into *out; NULL or "" is keep. Returns 0 for anything else (*out keep). */
int clf_binaries_parse(const char *text, clf_binaries *out);

typedef struct clf_runtime_options {
    const char *device;        /* selector, NULL = default */
    const char *cache_dir;     /* NULL = no on-disk cache */
    int no_cache;              /* 1 = neither read nor write the cache */
    const char *kernel_dir;    /* NULL = embedded sources, else load cl/ files from here */
    const char *build_options; /* NULL, or compiler options added after "-cl-std=CL1.2"
                                  (e.g. "-cl-opt-disable"); part of the cache key */
    int profile;               /* 1 = record an event per launch */
    clf_binaries binaries;     /* what the kernel cache keeps of a program built */
    clf_gemm_engine gemm;
    size_t gemm_split_k;       /* native GEMM's K split: 0 = the device's choice (split
                                  only when the output's tiles cannot fill the device),
                                  1 = never, P = P slices wherever P divides K */
    const char *gemm_config;   /* with gemm = native: the native configuration to use
                                 by name ("r8v16x3", clf_gemm_candidates lists them);
                                 NULL = the device's first */
    int gemm_retune;           /* 1 = ignore the saved GEMM choices: search every
                                 shape class again (and save the new choices) */
    clf_shape shape;           /* the kernels' shape: CLF_SHAPE_AUTO (measured once per
                                  device, cached), or forced: item or group */
    double gemm_search_budget; /* seconds the GEMM search may spend per runtime
                                  before it narrows to CLBlast against the first
                                  native configuration; 0 = the default (60) */
    /* Told of the slow first-use work, for a progress line: "device" with
     * the device's name once it is chosen (before anything is built),
     * "compile" with
     * the kernel family built from source (not from the cache), and
     * "gemm-search" with the shape being timed ("NT 768x384x128"), and
     * "gemm-dropped" with a native configuration the search leaves out
     * ("t64x64k16w4x4: <why>"), and "cache-write" once, with the file and
     * the system's reason ("DIR/kernels/x.bin: No space left on device"),
     * when the first write to the cache fails (the run goes on uncached).
     * NULL: nothing is told. Called on the caller's thread. */
    void (*notify)(void *user, const char *event, const char *detail);
    void *notify_user;
} clf_runtime_options;

clf_runtime_options clf_runtime_options_default(void);

/* Resolve the default cache directory from an environment (the CLI passes
 * getenv results): $CLFORMER_CACHE_DIR, else $XDG_CACHE_HOME/clformer, else
 * $HOME/.cache/clformer. Writes "" if none can be formed. */
void clf_cache_dir_default(const char *clformer_cache_dir, const char *xdg_cache_home,
                           const char *home, char *out, size_t cap);

typedef struct clf_runtime clf_runtime;

clf_status clf_runtime_create(clf_runtime **out, const clf_runtime_options *opt, clf_error *err);
void clf_runtime_destroy(clf_runtime *rt); /* NULL is a no-op */
const clf_device_info *clf_runtime_device(const clf_runtime *rt);
const clf_runtime_options *clf_runtime_options_get(const clf_runtime *rt);
/* Block until all queued work is done. */
clf_status clf_runtime_finish(clf_runtime *rt, clf_error *err);
/* Host waits for everything queued so far (finishes, blocking reads and
 * writes) since rt was created: a training step's budget of them is what
 * tests hold it to. */
uint64_t clf_runtime_drains(const clf_runtime *rt);
/* Flush the queue without waiting. */
clf_status clf_runtime_flush(clf_runtime *rt, clf_error *err);

/* ---- buffers ------------------------------------------------------------ */

typedef struct clf_buffer clf_buffer;

/* A float-or-int element address in device memory: buffer + element offset. */
typedef struct clf_ptr {
    clf_buffer *buf;
    size_t off; /* in elements (4-byte units) */
} clf_ptr;

static inline clf_ptr clf_ptr_at(clf_ptr p, size_t elems)
{
    p.off += elems;
    return p;
}

/* Allocate bytes of device memory (rejects more than max_alloc with a clear
 * message). Contents are undefined until written. */
clf_status clf_buffer_create(clf_runtime *rt, size_t bytes, clf_buffer **out, clf_error *err);
void clf_buffer_destroy(clf_buffer *b); /* NULL is a no-op; before its runtime's destroy */
/* Device bytes in live buffers of rt now, and the most there ever were
 * (every allocation clformer makes goes through clf_buffer_create). */
void clf_runtime_memory(const clf_runtime *rt, size_t *now, size_t *peak);
size_t clf_buffer_size(const clf_buffer *b);
/* Blocking host<->device copies at a byte offset. */
clf_status clf_buffer_write(clf_runtime *rt, clf_buffer *b, size_t byte_off, const void *src,
                            size_t bytes, clf_error *err);
clf_status clf_buffer_read(clf_runtime *rt, clf_buffer *b, size_t byte_off, void *dst, size_t bytes,
                           clf_error *err);
/* Non-blocking write: src must stay valid until the next finish. */
clf_status clf_buffer_write_async(clf_runtime *rt, clf_buffer *b, size_t byte_off, const void *src,
                                  size_t bytes, clf_error *err);
/* Non-blocking read: dst is filled once *done has completed
 * (clf_event_wait), and must stay valid until then. */
typedef struct clf_event clf_event;
clf_status clf_buffer_read_async(clf_runtime *rt, clf_buffer *b, size_t byte_off, void *dst,
                                 size_t bytes, clf_event **done, clf_error *err);
/* Block until e has completed (flushing the queue first), then release it. */
clf_status clf_event_wait(clf_event *e, clf_error *err);
void clf_event_release(clf_event *e); /* without waiting; NULL is a no-op */
/* An event that completes once everything enqueued before it has. */
clf_status clf_runtime_marker(clf_runtime *rt, clf_event **done, clf_error *err);
/* Fill bytes with a 4-byte pattern (a float or int), enqueued. */
clf_status clf_buffer_fill(clf_runtime *rt, clf_buffer *b, size_t byte_off, size_t bytes,
                           uint32_t pattern, clf_error *err);
clf_status clf_buffer_copy(clf_runtime *rt, clf_buffer *src, size_t src_off, clf_buffer *dst,
                           size_t dst_off, size_t bytes, clf_error *err);

/* Convenience over clf_ptr, counts in floats. */
clf_status clf_ptr_write(clf_runtime *rt, clf_ptr p, const float *src, size_t n, clf_error *err);
clf_status clf_ptr_read(clf_runtime *rt, clf_ptr p, float *dst, size_t n, clf_error *err);
clf_status clf_ptr_zero(clf_runtime *rt, clf_ptr p, size_t n, clf_error *err);

/* ---- programs and kernels ---------------------------------------------- */

typedef struct clf_kernel clf_kernel;

/* Kernel `name` of the program `family` (cl/<family>.cl), building (or
 * loading from the cache) the program on first use. Kernels are owned by
 * the runtime. The library's own launches use runtime/kernel_ids.h's
 * table instead (a handle by index). */
clf_status clf_kernel_get(clf_runtime *rt, const char *family, const char *name, clf_kernel **out,
                          clf_error *err);
/* Build the program of a family now (used for warm-up and load-time reports). */
clf_status clf_program_load(clf_runtime *rt, const char *family, clf_error *err);
/* The source a family is compiled from on this device (the generated
 * preamble, common.cl, <family>.cl), malloc'ed: for kernel development and
 * for checking the kernels with other compilers. */
clf_status clf_program_source(clf_runtime *rt, const char *family, char **out, clf_error *err);
/* Names of every kernel family, NULL-terminated (from the embedded list). */
const char *const *clf_program_families(void);

/* Statistics of program loading, for reports and tests. */
typedef struct clf_program_stats {
    int built;        /* compiled from source, announced ("compile") */
    int cache_hits;   /* loaded from the binary cache */
    int rebuilt;      /* built from source again without notice: the cache notes
                         the source as built on this device, not its binary */
    int cache_reject; /* cache entries found corrupt or stale and rebuilt */
    double load_seconds;
} clf_program_stats;
clf_program_stats clf_runtime_program_stats(const clf_runtime *rt);

/* The preamble: extra #defines a family is compiled with. Set before the first
 * clf_kernel_get of that family (setting the defines it was built with again
 * is a no-op). A name "<family>@<tag>" is a variant: one more program from
 * <family>.cl with the family's defines, then defines of its own (the GEMM
 * tile configurations, fused attention's 16-bit storage). */
clf_status clf_program_set_defines(clf_runtime *rt, const char *family, const char *defines,
                                   clf_error *err);

/* Kernel arguments. */
typedef enum clf_arg_kind {
    CLF_ARG_KIND_BUF,
    CLF_ARG_KIND_I32,
    CLF_ARG_KIND_U32,
    CLF_ARG_KIND_U64,
    CLF_ARG_KIND_F32,
    CLF_ARG_KIND_LOCAL, /* __local memory of v.local bytes */
} clf_arg_kind;

typedef struct clf_arg {
    clf_arg_kind kind;
    union {
        clf_buffer *buf;
        int32_t i32;
        uint32_t u32;
        uint64_t u64;
        float f32;
        size_t local;
    } v;
} clf_arg;

#define CLF_ARG_BUF(b) ((clf_arg){.kind = CLF_ARG_KIND_BUF, .v.buf = (b)})
#define CLF_ARG_I32(x) ((clf_arg){.kind = CLF_ARG_KIND_I32, .v.i32 = (int32_t)(x)})
#define CLF_ARG_U32(x) ((clf_arg){.kind = CLF_ARG_KIND_U32, .v.u32 = (uint32_t)(x)})
#define CLF_ARG_U64(x) ((clf_arg){.kind = CLF_ARG_KIND_U64, .v.u64 = (uint64_t)(x)})
#define CLF_ARG_F32(x) ((clf_arg){.kind = CLF_ARG_KIND_F32, .v.f32 = (float)(x)})
#define CLF_ARG_LOCAL(n) ((clf_arg){.kind = CLF_ARG_KIND_LOCAL, .v.local = (size_t)(n)})

/* Enqueue a launch. global[i] is rounded up to a multiple of local[i] when
 * local is given (kernels bounds-check); local NULL lets the driver choose.
 * Dimensions 1 and 2 may hold at most CLF_MAX_GROUPS_YZ work-groups on any
 * device (CLF_ERR_ARG otherwise: some GPU drivers cap them and OpenCL cannot
 * say which). With profiling on, the launch's event is recorded under the
 * kernel name. */
#define CLF_MAX_GROUPS_YZ 65535
clf_status clf_kernel_launch(clf_runtime *rt, clf_kernel *k, int dims, const size_t *global,
                             const size_t *local, int nargs, const clf_arg *args, clf_error *err);
/* Largest work-group size this kernel can be launched with on the device. */
size_t clf_kernel_max_work_group(const clf_kernel *k);
/* The first dimension of the kernel's reqd_work_group_size attribute (0 if
 * it has none): also how a program reports a compile-time constant to the
 * host without a launch (the cl/flash/ family's attn_flash_vw). */
size_t clf_kernel_required_group(const clf_kernel *k);

/* ---- measuring the device ----------------------------------------------- */

/* The device's fp32 multiply-add peak in GFLOP/s, measured (cl/probe.cl):
 * every compute unit running independent FMA chains on vectors of the
 * preferred width, the best of three launches of at least 50 ms each. The
 * denominator of model FLOP utilisation; takes a fraction of a second. */
clf_status clf_runtime_peak_gflops(clf_runtime *rt, double *gflops, clf_error *err);

/* ---- profiling ---------------------------------------------------------- */

typedef struct clf_profile_entry {
    char name[64];
    uint64_t count;
    double seconds; /* summed device time from events */
} clf_profile_entry;

/* Collect finished events into per-name totals; entries sorted by time,
 * descending. *out malloc'ed (free()). Waits for the queue. */
clf_status clf_profile_report(clf_runtime *rt, clf_profile_entry **out, int *count, clf_error *err);
void clf_profile_reset(clf_runtime *rt);
/* Record time spent in an opaque call (e.g. a CLBlast GEMM) under name. */
int clf_runtime_profiling(const clf_runtime *rt);

CLF_API_END

#endif
