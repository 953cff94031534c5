/*
 * runtime_internal.h - what runtime/ files share with each other and with the
 * GEMM engines: the raw OpenCL handles behind the opaque types, error
 * helpers, and per-runtime slots for subsystems (GEMM state, program cache).
 *
 * Only files inside runtime/ include this header.
 */
#ifndef CLF_RUNTIME_INTERNAL_H
#define CLF_RUNTIME_INTERNAL_H

#include <CL/cl.h>

#include "runtime/runtime.h"
#include "runtime/util.h"

/* Symbolic name of an OpenCL error code ("CL_OUT_OF_RESOURCES"). */
const char *clf_cl_error_name(cl_int code);
/* CLF_OK if code == CL_SUCCESS; else fill err with CLF_ERR_OPENCL, the code,
 * its name and "what failed" and return CLF_ERR_OPENCL. */
clf_status clf_cl_check(cl_int code, clf_error *err, const char *what);

struct clf_kernel {
    cl_kernel k;
    char name[64];
    size_t max_wg;  /* CL_KERNEL_WORK_GROUP_SIZE on the device */
    size_t reqd_wg; /* reqd_work_group_size's first dimension, 0 if none */
};

cl_mem clf_buffer_mem(const clf_buffer *b);
cl_command_queue clf_runtime_queue(const clf_runtime *rt);
cl_context clf_runtime_context(const clf_runtime *rt);
cl_device_id clf_runtime_device_id(const clf_runtime *rt);

/* The on-disk cache directory ("" when caching is off). */
const char *clf_runtime_cache_dir(const clf_runtime *rt);
/* A string naming device + driver + platform version, safe as a file name
 * component (letters, digits, '-', '_', '.'). */
const char *clf_runtime_device_key(const clf_runtime *rt);

/* A write to the cache (kernel binaries, GEMM choices, the shape) failed
 * with errnum: tells the "cache-write" notice, once per runtime. */
void clf_runtime_cache_write_failed(clf_runtime *rt, const char *path, int errnum);

/* GEMM state slot, owned by gemm/dispatch.c; freed by clf_gemm_state_destroy. */
void **clf_runtime_gemm_slot(clf_runtime *rt);
void clf_gemm_state_destroy(void *state);

/* Record a finished (or pending) event under a name for --profile; takes
 * ownership of the event (releases it). */
void clf_profile_record_event(clf_runtime *rt, const char *name, cl_event ev);

/* Program cache internals (program.c), called by runtime.c. */
typedef struct clf_program_set clf_program_set;
clf_program_set *clf_program_set_create(void);
void clf_program_set_destroy(clf_program_set *ps);
clf_program_set *clf_runtime_programs(clf_runtime *rt);
/* A hash of the family's source as this runtime reads it (embedded or from
 * kernel_dir), common.cl included: what results measured on its kernels,
 * such as the GEMM choices, are valid for. */
clf_status clf_program_source_hash(clf_runtime *rt, const char *family, uint64_t *out,
                                   clf_error *err);

/* The kernels' shape (serial_groups) and the item shape's vector width
 * (pref_vec_float) in d, measured and cached, or forced (shape.c); called
 * once by clf_runtime_create before any other program is built. Never
 * fails: without a measurement d keeps its type's default, with the reason. */
void clf_shape_decide(clf_runtime *rt, clf_device_info *d, clf_shape forced);
/* The rule itself, for the tests: t[0..2] the item shape's seconds at
 * vector widths 4, 8, 16, t[3] the group shape's (negative: did not run or
 * summed wrong); the iterations after which the device ends a work-item's
 * loops (0: none seen), which alone means the group shape; the type's
 * default shape and preferred width. Sets the shape (1 = item) and width,
 * returns the reason's first words. */
const char *clf_shape_choose(const double t[4], unsigned loop_limit, int type_serial,
                             unsigned type_vec, int *serial, unsigned *vec);

#endif
