/*
 * gemm16.c - GEMM with 16-bit storage (bf16, f16) for any of A, B and C.
 *
 * Design: the product is the float32 one of every engine. Each 16-bit
 * operand is widened (exactly: cl/convert.cl) into the runtime's conversion
 * scratch as a dense float32 copy (a shared operand, batch stride 0, once);
 * a 16-bit C is computed into the scratch (its old values widened first
 * when beta != 0) and narrowed back, rounded to nearest even. The float32
 * descriptor then takes the ordinary path: the auto choice, the search and
 * the epilogue (bias, activation into a float32 D) are the float32 ones.
 * The scratch grows to the largest need, exactly, and clf_gemm_prepare
 * sizes it up front like the packing scratch. The cost is one extra pass
 * over each 16-bit operand, against the m n k of the product.
 *
 * Not here: kernels that read 16-bit operands directly (a later step when
 * the model stores its activations in 16 bits and the extra pass shows).
 */
#include "runtime/gemm/gemm_internal.h"

int clf_gemm_is16(const clf_gemm_desc *d)
{
    return d->a_type != CLF_DT_F32 || d->b_type != CLF_DT_F32 || d->c_type != CLF_DT_F32;
}

/* Point *p (row stride *ld, batch stride *stride) at n dense float32
 * matrices of rows x cols at element off of the conversion scratch, and,
 * with copy, widen src's into them. */
static clf_status to_f32(clf_runtime *rt, gemm_state *st, size_t off, clf_dtype t, clf_ptr src,
                         size_t src_ld, size_t src_stride, size_t rows, size_t cols, size_t n,
                         int copy, clf_ptr *p, size_t *ld, size_t *stride, clf_error *err)
{
    *p = (clf_ptr){st->conv, off};
    *ld = cols;
    *stride = n > 1 ? rows * cols : 0;
    return copy ? clf_convert_matrix(rt, CLF_DT_F32, *p, *ld, *stride, t, src, src_ld, src_stride,
                                     rows, cols, n, err)
                : CLF_OK;
}

clf_status clf_gemm16_run(clf_runtime *rt, gemm_state *st, clf_gemm_engine engine, int cand,
                          int prepare, const clf_gemm_desc *d, clf_error *err)
{
    const size_t batch = clf_gemm_batch_of(d);
    const size_t a_rows = d->trans_a ? d->k : d->m, a_cols = d->trans_a ? d->m : d->k;
    const size_t b_rows = d->trans_b ? d->n : d->k, b_cols = d->trans_b ? d->k : d->n;
    const int a16 = d->k > 0 && d->a_type != CLF_DT_F32, b16 = d->k > 0 && d->b_type != CLF_DT_F32;
    const int c16 = d->c_type != CLF_DT_F32;
    /* matrices to widen: one for an operand shared by the batch */
    const size_t na = batch > 1 && d->stride_a == 0 ? 1 : batch;
    const size_t nb = batch > 1 && d->stride_b == 0 ? 1 : batch;
    const size_t fa = a16 ? na * a_rows * a_cols : 0, fb = b16 ? nb * b_rows * b_cols : 0;
    const size_t fc = c16 ? batch * d->m * d->n : 0;
    clf_status s = clf_gemm_scratch_grow(rt, &st->conv, &st->conv_floats, fa + fb + fc,
                                         "16-bit conversion scratch", err);
    if (s != CLF_OK)
        return s;
    clf_gemm_desc x = *d;
    x.a_type = x.b_type = x.c_type = CLF_DT_F32;
    if (a16 && (s = to_f32(rt, st, 0, d->a_type, d->a, d->lda, d->stride_a, a_rows, a_cols, na,
                           !prepare, &x.a, &x.lda, &x.stride_a, err)) != CLF_OK)
        return s;
    if (b16 && (s = to_f32(rt, st, fa, d->b_type, d->b, d->ldb, d->stride_b, b_rows, b_cols, nb,
                           !prepare, &x.b, &x.ldb, &x.stride_b, err)) != CLF_OK)
        return s;
    /* a 16-bit C: its old values are read only when beta != 0 */
    if (c16 && (s = to_f32(rt, st, fa + fb, d->c_type, d->c, d->ldc, d->stride_c, d->m, d->n, batch,
                           !prepare && d->beta != 0.0f, &x.c, &x.ldc, &x.stride_c, err)) != CLF_OK)
        return s;
    if (prepare)
        return clf_gemm_prepare(rt, &x, err);
    s = cand >= 0 ? clf_gemm_cand_run(rt, st, cand, &x, err) : clf_gemm_with(rt, engine, &x, err);
    if (s == CLF_OK && c16)
        s = clf_convert_matrix(rt, d->c_type, d->c, d->ldc, d->stride_c, CLF_DT_F32, x.c, x.ldc,
                               x.stride_c, d->m, d->n, batch, err);
    return s;
}
