/*
 * ops/reduce.c - host wrappers of cl/reduce.cl: row sum and row max, and the
 * deterministic whole-tensor sum of squares and mean.
 *
 * Design
 * - Row reductions launch the variant clf_ops_path_resolve() picks (one
 *   work-item per row on CPUs, one work-group per row on GPUs).
 * - Whole-tensor sums run in two stages through caller-provided scratch:
 *   [0, n) is cut into P contiguous parts, P = clf_op_sumsq_scratch(rt, n),
 *   one partial sum each, then one work-item adds the P partials in index
 *   order. P depends only on n and the device, so the result is reproducible
 *   bit for bit on a device.
 *
 * Not here: column sums (bias and norm gradients, ops/elementwise.c and
 * ops/norm.c).
 */
#include <stdio.h>

#include "model/ops/ops_internal.h"

/* Whole-tensor sums: at most this many parts, each at least this long. */
#define CPU_PARTS_MAX 64
#define CPU_PART_MIN 16384
#define GPU_PARTS_MAX 1024
#define GPU_PART_MIN 8192

/* A row reduction: its name (for messages) and its kernels. */
typedef struct row_op {
    const char *op;
    clf_ops_pair kernels;
} row_op;

static clf_status row_reduce(clf_runtime *rt, clf_ops_path path, const row_op *ro, clf_ptr out,
                             clf_ptr in, size_t R, size_t N, clf_error *err)
{
    const char *op = ro->op;
    if (R == 0)
        return CLF_OK;
    if (clf_ops_need(out, op, "out", err) || clf_ops_need(in, op, "in", err))
        return CLF_ERR_ARG;
    path = clf_ops_path_resolve(rt, path);
    clf_kernel *k;
    clf_status st = clf_kernel_of(rt, clf_ops_pick(ro->kernels, path), &k, err);
    if (st != CLF_OK)
        return st;
    if (path == CLF_OPS_PATH_ITEM) {
        clf_arg args[] = {CLF_ARG_PTR(out), CLF_ARG_PTR(in), CLF_ARG_U64(R), CLF_ARG_U64(N)};
        size_t global = R, local = clf_ops_rows_local(k);
        return clf_kernel_launch(rt, k, 1, &global, &local, CLF_NARGS(args), args, err);
    }
    size_t local = clf_ops_group_size(k, CLF_OPS_ROW_GROUP), global = R * local;
    clf_arg args[] = {CLF_ARG_PTR(out), CLF_ARG_PTR(in), CLF_ARG_U64(R), CLF_ARG_U64(N),
                      CLF_ARG_LOCAL(local * sizeof(float))};
    return clf_kernel_launch(rt, k, 1, &global, &local, CLF_NARGS(args), args, err);
}

clf_status clf_op_row_sum_ex(clf_runtime *rt, clf_ops_path path, clf_ptr out, clf_ptr in, size_t R,
                             size_t N, clf_error *err)
{
    static const row_op sum = {"row_sum", {CLF_K_ROW_SUM_ITEM, CLF_K_ROW_SUM_GROUP}};
    return row_reduce(rt, path, &sum, out, in, R, N, err);
}

clf_status clf_op_row_max_ex(clf_runtime *rt, clf_ops_path path, clf_ptr out, clf_ptr in, size_t R,
                             size_t N, clf_error *err)
{
    static const row_op max = {"row_max", {CLF_K_ROW_MAX_ITEM, CLF_K_ROW_MAX_GROUP}};
    return row_reduce(rt, path, &max, out, in, R, N, err);
}

/* ---- greedy choice ------------------------------------------------------------ */

clf_status clf_op_row_argmax_ex(clf_runtime *rt, clf_ops_path path, clf_ptr idx, clf_ptr tok,
                                clf_ptr in, size_t ld, size_t R, size_t N, clf_error *err)
{
    const char *op = "row_argmax";
    if (R == 0)
        return CLF_OK;
    if (clf_ops_need(idx, op, "idx", err) || clf_ops_need(in, op, "in", err))
        return CLF_ERR_ARG;
    if (N == 0 || ld < N || N > 0x7FFFFFFF)
        return clf_error_set(err, CLF_ERR_ARG,
                             "%s: rows of %zu values, row stride %zu (expected 1 <= N <= ld, N "
                             "under 2^31)",
                             op, N, ld);
    path = clf_ops_path_resolve(rt, path);
    clf_kernel *k;
    clf_status st = clf_kernel_of(
        rt, clf_ops_pick((clf_ops_pair){CLF_K_ROW_ARGMAX_ITEM, CLF_K_ROW_ARGMAX_GROUP}, path), &k,
        err);
    if (st != CLF_OK)
        return st;
    const size_t local = path == CLF_OPS_PATH_ITEM ? clf_ops_rows_local(k)
                                                   : clf_ops_group_size(k, CLF_OPS_ROW_GROUP);
    /* a quarter of the limit kept back, as the decode kernels keep it */
    const unsigned lim = clf_runtime_device(rt)->loop_limit;
    const size_t scan = path == CLF_OPS_PATH_ITEM ? N : (N + local - 1) / local + 16;
    if (lim != 0 && scan > (size_t)lim / 4 * 3)
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "%s: rows of %zu values take %zu loop iterations; %s ends a "
                             "work-item's loops after %u",
                             op, N, scan, clf_runtime_device(rt)->name, lim);
    const int has_tok = tok.buf != NULL;
    const clf_arg args[] = {CLF_ARG_PTR(idx),
                            CLF_ARG_PTR(has_tok ? tok : idx), /* any valid buffer when absent */
                            CLF_ARG_I32(has_tok),
                            CLF_ARG_PTR(in),
                            CLF_ARG_U64(ld),
                            CLF_ARG_U64(R),
                            CLF_ARG_U64(N),
                            CLF_ARG_LOCAL(local * sizeof(float)),
                            CLF_ARG_LOCAL(local * sizeof(int32_t))};
    if (path == CLF_OPS_PATH_ITEM) {
        size_t global = R;
        return clf_kernel_launch(rt, k, 1, &global, &local, CLF_NARGS(args) - 2, args, err);
    }
    size_t global = R * local;
    return clf_kernel_launch(rt, k, 1, &global, &local, CLF_NARGS(args), args, err);
}

clf_status clf_op_row_argmax(clf_runtime *rt, clf_ptr idx, clf_ptr tok, clf_ptr in, size_t ld,
                             size_t R, size_t N, clf_error *err)
{
    return clf_op_row_argmax_ex(rt, CLF_OPS_PATH_AUTO, idx, tok, in, ld, R, N, err);
}

/* ---- whole-tensor sums ----------------------------------------------------------- */

size_t clf_op_sumsq_scratch_ex(clf_runtime *rt, clf_ops_path path, size_t n)
{
    path = clf_ops_path_resolve(rt, path);
    size_t pmax = path == CLF_OPS_PATH_ITEM ? CPU_PARTS_MAX : GPU_PARTS_MAX;
    size_t pmin = path == CLF_OPS_PATH_ITEM ? CPU_PART_MIN : GPU_PART_MIN;
    size_t P = (n + pmin - 1) / pmin;
    if (P > pmax)
        P = pmax;
    return P < 1 ? 1 : P;
}

size_t clf_op_sumsq_scratch(clf_runtime *rt, size_t n)
{
    return clf_op_sumsq_scratch_ex(rt, CLF_OPS_PATH_AUTO, n);
}

/* What a whole-tensor sum computes: its name, squares or not, the divisor. */
typedef struct sum_kind {
    const char *op;
    int sq;
    float div;
} sum_kind;

static clf_status total_sum(clf_runtime *rt, clf_ops_path path, const sum_kind *kind, clf_ptr out,
                            clf_ptr in, size_t n, clf_ptr scratch, clf_error *err)
{
    const char *op = kind->op;
    const int sq = kind->sq;
    const float div = kind->div;
    if (clf_ops_need(out, op, "out", err) || clf_ops_need(scratch, op, "scratch", err))
        return CLF_ERR_ARG;
    path = clf_ops_path_resolve(rt, path);
    size_t P = clf_op_sumsq_scratch_ex(rt, path, n);
    size_t chunk = (n + P - 1) / P;
    chunk = (chunk + 7) / 8 * 8; /* float8 loops: only the last part has a tail */
    clf_kernel *k;
    clf_status st;
    if (n > 0) {
        if (clf_ops_need(in, op, "in", err))
            return CLF_ERR_ARG;
        if (path == CLF_OPS_PATH_ITEM) {
            st = clf_kernel_of(rt, CLF_K_SUM_PARTS_ITEM, &k, err);
            if (st != CLF_OK)
                return st;
            clf_arg args[] = {CLF_ARG_PTR(scratch), CLF_ARG_PTR(in), CLF_ARG_U64(n),
                              CLF_ARG_U64(chunk),   CLF_ARG_U32(P),  CLF_ARG_I32(sq)};
            size_t global = P, local = 1;
            st = clf_kernel_launch(rt, k, 1, &global, &local, CLF_NARGS(args), args, err);
        } else {
            st = clf_kernel_of(rt, CLF_K_SUM_PARTS_GROUP, &k, err);
            if (st != CLF_OK)
                return st;
            size_t local = clf_ops_group_size(k, CLF_OPS_ROW_GROUP), global = P * local;
            clf_arg args[] = {CLF_ARG_PTR(scratch),
                              CLF_ARG_PTR(in),
                              CLF_ARG_U64(n),
                              CLF_ARG_U64(chunk),
                              CLF_ARG_U32(P),
                              CLF_ARG_I32(sq),
                              CLF_ARG_LOCAL(local * sizeof(float))};
            st = clf_kernel_launch(rt, k, 1, &global, &local, CLF_NARGS(args), args, err);
        }
        if (st != CLF_OK)
            return st;
    } else {
        st = clf_ptr_zero(rt, scratch, P, err);
        if (st != CLF_OK)
            return st;
    }
    st = clf_kernel_of(rt, CLF_K_SUM_FINISH, &k, err);
    if (st != CLF_OK)
        return st;
    clf_arg args[] = {CLF_ARG_PTR(out), CLF_ARG_PTR(scratch), CLF_ARG_U32(P), CLF_ARG_F32(div)};
    size_t one = 1;
    return clf_kernel_launch(rt, k, 1, &one, &one, CLF_NARGS(args), args, err);
}

clf_status clf_op_sumsq_ex(clf_runtime *rt, clf_ops_path path, clf_ptr out, clf_ptr in, size_t n,
                           clf_ptr scratch, clf_error *err)
{
    return total_sum(rt, path, &(sum_kind){"sumsq", 1, 1.0f}, out, in, n, scratch, err);
}

clf_status clf_op_mean_ex(clf_runtime *rt, clf_ops_path path, clf_ptr out, clf_ptr in, size_t n,
                          clf_ptr scratch, clf_error *err)
{
    if (n == 0)
        return clf_error_set(err, CLF_ERR_ARG, "mean: the mean of 0 elements is undefined");
    return total_sum(rt, path, &(sum_kind){"mean", 0, (float)n}, out, in, n, scratch, err);
}

clf_status clf_op_sumsq(clf_runtime *rt, clf_ptr out, clf_ptr in, size_t n, clf_ptr scratch,
                        clf_error *err)
{
    return clf_op_sumsq_ex(rt, CLF_OPS_PATH_AUTO, out, in, n, scratch, err);
}

clf_status clf_op_mean(clf_runtime *rt, clf_ptr out, clf_ptr in, size_t n, clf_ptr scratch,
                       clf_error *err)
{
    return clf_op_mean_ex(rt, CLF_OPS_PATH_AUTO, out, in, n, scratch, err);
}

/* ---- pooling ---- */

#define U32_MAX_SZ ((size_t)0xFFFFFFFFu)

static clf_status pool_launch(clf_runtime *rt, clf_kernel_id id, clf_ptr out, clf_ptr in,
                              clf_ptr keep, size_t B, size_t S, size_t C, clf_error *err)
{
    clf_kernel *k = NULL;
    clf_status st;
    size_t n = B * C;
    if (B * S * C > U32_MAX_SZ) {
        st = clf_error_set(err, CLF_ERR_ARG, "B*S*C = %zu over 2^32", B * S * C);
        goto fail;
    }
    if (n == 0)
        return CLF_OK;
    if ((st = clf_kernel_of(rt, id, &k, err)) != CLF_OK)
        goto fail;
    size_t local = clf_ops_local_1d(rt, k);
    clf_arg a[] = {CLF_ARG_PTR(out), CLF_ARG_PTR(in), CLF_ARG_PTR(keep),
                   CLF_ARG_U32(n),   CLF_ARG_U32(S),  CLF_ARG_U32(C)};
    if ((st = clf_kernel_launch(rt, k, 1, &n, &local, CLF_NARGS(a), a, err)) != CLF_OK)
        goto fail;
    return CLF_OK;
fail:
    clf_error_prefix(err, "%s", clf_kernel_id_name(id));
    return st;
}

clf_status clf_op_mean_pool_forward(clf_runtime *rt, clf_ptr out, clf_ptr x, clf_ptr keep, size_t B,
                                    size_t S, size_t C, clf_error *err)
{
    return pool_launch(rt, CLF_K_MEAN_POOL_FORWARD, out, x, keep, B, S, C, err);
}

clf_status clf_op_mean_pool_backward(clf_runtime *rt, clf_ptr dx, clf_ptr dout, clf_ptr keep,
                                     size_t B, size_t S, size_t C, clf_error *err)
{
    return pool_launch(rt, CLF_K_MEAN_POOL_BACKWARD, dx, dout, keep, B, S, C, err);
}
