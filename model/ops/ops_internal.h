/*
 * ops_internal.h - small helpers shared by the wrappers in model/ops, and
 * the explicit-variant entry points the tests use.
 *
 * Design
 * - Row and column reductions have two kernel variants (see cl/reduce.cl):
 *   "item" (one work-item per row, for CPUs, where local memory is emulated
 *   in global memory and barriers are costly) and "group" (one work-group
 *   per row with a local-memory tree, for GPUs). clf_ops_path_resolve()
 *   picks one from the device; the public ops in ops.h use it. The *_ex
 *   functions below take the variant explicitly so that tests exercise both
 *   on any device.
 * - Work-group sizes are fixed per kernel and device (PoCL specialises a
 *   kernel again for every new local size): a power of two no larger than a
 *   preferred size and the kernel's limit.
 *
 * Not here: anything public (ops.h), kernel code (cl/).
 */
#ifndef CLF_OPS_INTERNAL_H
#define CLF_OPS_INTERNAL_H

#include <string.h>

#include "model/ops/ops.h"
#include "runtime/kernel_ids.h"

typedef enum clf_ops_path {
    CLF_OPS_PATH_AUTO = 0,
    CLF_OPS_PATH_ITEM,  /* one work-item per row (CPU) */
    CLF_OPS_PATH_GROUP, /* one work-group per row (GPU) */
} clf_ops_path;

/* AUTO -> ITEM on CPUs or where local memory is emulated, else GROUP. */
static inline clf_ops_path clf_ops_path_resolve(const clf_runtime *rt, clf_ops_path p)
{
    if (p != CLF_OPS_PATH_AUTO)
        return p;
    return clf_runtime_device(rt)->serial_groups ? CLF_OPS_PATH_ITEM : CLF_OPS_PATH_GROUP;
}

/* Work-groups run item by item on this device (clf_device_info). */
static inline int clf_ops_serial(const clf_runtime *rt)
{
    return clf_runtime_device(rt)->serial_groups;
}

/* Largest power of two <= want and <= the kernel's work-group limit. */
static inline size_t clf_ops_group_size(const clf_kernel *k, size_t want)
{
    size_t lim = clf_kernel_max_work_group(k);
    if (lim < want)
        want = lim;
    size_t p = 1;
    while (p * 2 <= want)
        p *= 2;
    return p;
}

/* Local size of the 1-D pointwise kernels: 128 on every device type so far
 * (elementwise.cl gives each work-item 8 floats, so a group covers 1024;
 * rt is kept for a per-device choice). */
static inline size_t clf_ops_local_1d(const clf_runtime *rt, const clf_kernel *k)
{
    (void)rt;
    return clf_ops_group_size(k, 128);
}

/* Work-items of a row-per-item kernel grouped into one work-group. */
static inline size_t clf_ops_rows_local(const clf_kernel *k) { return clf_ops_group_size(k, 16); }

/* The column sums' shapes (CLF_COL_W columns per work-item of the *_item
 * kernels; CLF_COLS_X columns x up to CLF_COLS_Y row lanes per work-group of
 * the *_group ones: 8 columns = one 32-byte segment per row; 32 lanes give
 * N/8 groups of 256 items) and adamw_vec's CLF_ADAMW_W elements per
 * work-item: runtime/contract.h, which the kernels see too. */

/* Row lanes of a *_group column kernel: the largest power of two up to
 * CLF_COLS_Y whose work-group of CLF_COLS_X columns fits the
 * kernel's limit (llvmpipe allows 32 items a kernel: 4 lanes). */
static inline size_t clf_ops_cols_lanes(const clf_kernel *k)
{
    size_t lanes = clf_ops_group_size(k, CLF_COLS_X * CLF_COLS_Y) / CLF_COLS_X;
    return lanes ? lanes : 1;
}

/* A buffer argument pair (buffer, element offset). */
#define CLF_ARG_PTR(p) CLF_ARG_BUF((p).buf), CLF_ARG_U64((p).off)
/* Number of entries of an argument array. */
#define CLF_NARGS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Dropout's keep threshold and scale for probability p (cl/random.cl's
 * convention; cl/flash/ draws the same masks). */
void clf_ops_dropout_params(float p, uint32_t *thr, float *scale);

/* ---- explicit-variant entry points (tests) --------------------------------- */

clf_status clf_op_bias_backward_ex(clf_runtime *rt, clf_ops_path path, clf_ptr dbias, clf_ptr d,
                                   clf_dtype d_type, size_t R, size_t N, int accumulate,
                                   clf_error *err);

clf_status clf_op_row_sum_ex(clf_runtime *rt, clf_ops_path path, clf_ptr out, clf_ptr in, size_t R,
                             size_t N, clf_error *err);
clf_status clf_op_row_max_ex(clf_runtime *rt, clf_ops_path path, clf_ptr out, clf_ptr in, size_t R,
                             size_t N, clf_error *err);
clf_status clf_op_row_argmax_ex(clf_runtime *rt, clf_ops_path path, clf_ptr idx, clf_ptr tok,
                                clf_ptr in, size_t ld, size_t R, size_t N, clf_error *err);
size_t clf_op_sumsq_scratch_ex(clf_runtime *rt, clf_ops_path path, size_t n);
clf_status clf_op_sumsq_ex(clf_runtime *rt, clf_ops_path path, clf_ptr out, clf_ptr in, size_t n,
                           clf_ptr scratch, clf_error *err);
clf_status clf_op_mean_ex(clf_runtime *rt, clf_ops_path path, clf_ptr out, clf_ptr in, size_t n,
                          clf_ptr scratch, clf_error *err);

/* Fused attention in a chosen shape (ITEM: the blocked kernels, GROUP: the
 * local-memory tiles; CLF_ERR_UNSUPPORTED when tiles do not fit). */
/* The fused attention's program for storage t into fam: "flash", or its
 * 16-bit variant "flash@bf16" / "flash@f16" with its defines set (nothing
 * built). */
clf_status clf_ops_flash_program(clf_runtime *rt, clf_dtype t, char *fam, size_t cap,
                                 clf_error *err);
clf_status clf_op_attn_fused_forward_ex(clf_runtime *rt, clf_ops_path path, const clf_attn_fused *a,
                                        clf_error *err);
clf_status clf_op_attn_fused_backward_ex(clf_runtime *rt, clf_ops_path path,
                                         const clf_attn_fused *a, const clf_attn_fused_grad *g,
                                         clf_error *err);

clf_status clf_op_norm_forward_ex(clf_runtime *rt, clf_ops_path path, const clf_norm_args *a,
                                  clf_error *err);
clf_status clf_op_norm_backward_ex(clf_runtime *rt, clf_ops_path path, const clf_norm_args *a,
                                   clf_error *err);

/* The NULL-buffer check of every op: CLF_ERR_ARG "op: what is a NULL buffer". */
static inline clf_status clf_ops_need(clf_ptr p, const char *op, const char *what, clf_error *err)
{
    if (p.buf == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "%s: %s is a NULL buffer", op, what);
    return CLF_OK;
}

/* A kernel written in both shapes: one work-item per row (or column
 * span), or one work-group. */
typedef struct clf_ops_pair {
    clf_kernel_id item, group;
} clf_ops_pair;
static inline clf_kernel_id clf_ops_pick(clf_ops_pair p, clf_ops_path path)
{
    return path == CLF_OPS_PATH_ITEM ? p.item : p.group;
}

/* Launch the row kernel <base>_item or <base>_group of `family` over R rows
 * (path resolved): one work-item a row, or one work-group of up to
 * CLF_OPS_ROW_GROUP a row with a local float buffer appended as the last
 * argument (args has room for it). Defined in norm.c. */
#define CLF_OPS_ROW_GROUP 256
clf_status clf_ops_launch_rows(clf_runtime *rt, clf_ops_pair kernels, clf_ops_path path, size_t R,
                               int nargs, clf_arg *args, clf_error *err);

#endif
