/*
 * convert.c - float32 <-> bf16 / f16 on the device (design in convert.h;
 * kernels in cl/convert.cl).
 */
#include "runtime/convert.h"
#include "runtime/kernel_ids.h"
#include "runtime/util.h"

size_t clf_dtype_size(clf_dtype t) { return t == CLF_DT_F32 ? 4 : 2; }

const char *clf_dtype_name(clf_dtype t)
{
    switch (t) {
        case CLF_DT_F32: return "f32";
        case CLF_DT_BF16: return "bf16";
        case CLF_DT_F16: return "f16";
    }
    return "unknown";
}

/* Does a matrix of t (rows x cols, ld, batch at stride) from element off fit in buf? */
static int fits(clf_dtype t, clf_ptr p, size_t ld, size_t stride, size_t rows, size_t cols,
                size_t batch)
{
    size_t end = 0;
    return p.buf != NULL && clf_matrix_end(p.off, rows, cols, ld, stride, batch, &end) &&
           end <= clf_buffer_size(p.buf) / clf_dtype_size(t);
}

clf_status clf_convert_matrix(clf_runtime *rt, clf_dtype to, clf_ptr dst, size_t dst_ld,
                              size_t dst_stride, clf_dtype from, clf_ptr src, size_t src_ld,
                              size_t src_stride, size_t rows, size_t cols, size_t batch,
                              clf_error *err)
{
    if (rows == 0 || cols == 0 || batch == 0)
        return CLF_OK;
    if (to != CLF_DT_F32 && from != CLF_DT_F32)
        return clf_error_set(err, CLF_ERR_ARG, "convert: %s to %s: one side must be f32",
                             clf_dtype_name(from), clf_dtype_name(to));
    if (dst_ld < cols || src_ld < cols || !fits(to, dst, dst_ld, dst_stride, rows, cols, batch) ||
        !fits(from, src, src_ld, src_stride, rows, cols, batch))
        return clf_error_set(err, CLF_ERR_ARG,
                             "convert: %zu x %zu x %zu (%s ld %zu stride %zu from %s ld %zu "
                             "stride %zu) does not fit its buffers",
                             batch, rows, cols, clf_dtype_name(to), dst_ld, dst_stride,
                             clf_dtype_name(from), src_ld, src_stride);
    if (to == CLF_DT_F32 && from == CLF_DT_F32) {
        if (dst_ld == cols && src_ld == cols &&
            (batch == 1 || (dst_stride == rows * cols && src_stride == rows * cols)))
            return clf_buffer_copy(rt, src.buf, src.off * 4, dst.buf, dst.off * 4,
                                   batch * rows * cols * 4, err);
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "convert: a strided f32 copy (use the GEMM or a copy per row)");
    }
    const clf_kernel_id id = from == CLF_DT_BF16  ? CLF_K_WIDEN_BF16
                             : from == CLF_DT_F16 ? CLF_K_WIDEN_F16
                             : to == CLF_DT_BF16  ? CLF_K_NARROW_BF16
                                                  : CLF_K_NARROW_F16;
    clf_kernel *k;
    clf_status st = clf_kernel_of(rt, id, &k, err);
    if (st != CLF_OK)
        return st;
    const clf_arg args[] = {
        CLF_ARG_BUF(dst.buf), CLF_ARG_U64(dst.off), CLF_ARG_U64(dst_ld), CLF_ARG_U64(dst_stride),
        CLF_ARG_BUF(src.buf), CLF_ARG_U64(src.off), CLF_ARG_U64(src_ld), CLF_ARG_U64(src_stride),
        CLF_ARG_U64(rows),    CLF_ARG_U64(cols),
    };
    size_t lx = clf_kernel_max_work_group(k) >= 64 ? 64 : 1;
    const size_t local[3] = {lx, 1, 1};
    const size_t global[3] = {(cols + lx - 1) / lx * lx, rows, batch};
    return clf_kernel_launch(rt, k, 3, global, local, 10, args, err);
}

clf_status clf_convert(clf_runtime *rt, clf_dtype to, clf_ptr dst, clf_dtype from, clf_ptr src,
                       size_t n, clf_error *err)
{
    return clf_convert_matrix(rt, to, dst, n, n, from, src, n, n, 1, n, 1, err);
}
