/*
 * gemm16.c - GEMM with 16-bit storage (bf16, f16) for any of A, B and C.
 *
 * Design: the product is the float32 one of every engine. Where the
 * configuration that runs the product is a register-blocked native one
 * and is known without timing (named, the native engine, or the auto
 * choice for the class: a class met first in 16 bits is searched on
 * temporary float32 operands of its shape, choose_twin), its packing
 * kernels read a 16-bit A and B directly and widen them into the float32
 * panels they copy anyway, and its store narrows a 16-bit C: no extra
 * pass, no conversion scratch. Otherwise (CLBlast, a tiled configuration)
 * each 16-bit operand is widened (exactly: cl/convert.cl) into the
 * runtime's conversion scratch as a dense float32 copy (a shared operand,
 * batch stride 0, once); a 16-bit C is computed into the scratch (its old
 * values widened first when beta != 0) and narrowed back, rounded to
 * nearest even. The float32 descriptor then takes the ordinary path. The
 * scratch grows to the largest need, exactly, and clf_gemm_prepare sizes
 * it up front like the packing scratch. The cost is one extra pass over
 * each 16-bit operand, against the m n k of the product.
 *
 * A 16-bit D (the epilogue's) needs nothing here: every engine's epilogue
 * reads and writes it in its type.
 *
 * Not here: 16-bit operands in the tiled and few-row kernels.
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

/* The stored shapes of d's A and B, and how many matrices of each a batch
 * holds (one for an operand shared by the batch, stride 0). */
typedef struct dims16 {
    size_t a_rows, a_cols, b_rows, b_cols, na, nb;
} dims16;

static dims16 dims_of(const clf_gemm_desc *d)
{
    const size_t batch = clf_gemm_batch_of(d);
    dims16 g = {d->trans_a ? d->k : d->m,
                d->trans_a ? d->m : d->k,
                d->trans_b ? d->n : d->k,
                d->trans_b ? d->k : d->n,
                batch > 1 && d->stride_a == 0 ? 1 : batch,
                batch > 1 && d->stride_b == 0 ? 1 : batch};
    return g;
}

/* The auto choice for the class of d's float32 twin, made now if it is
 * not made yet: the search times the candidates on float32 A and B of the
 * twin's shape, a temporary buffer (zero: the values do not change the
 * timing) released right after, as the search's own temporary C is. So a
 * class met first in 16 bits leaves no float32 copy behind. */
static clf_status choose_twin(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d,
                              clf_error *err)
{
    int cand = 0;
    clf_gemm_desc x = *d;
    x.a_type = x.b_type = x.c_type = x.d_type = CLF_DT_F32;
    if (d->k == 0 || clf_gemm_auto_known(rt, st, &x, &cand, NULL))
        return CLF_OK;
    const dims16 g = dims_of(d);
    const size_t fa = g.na * g.a_rows * g.a_cols, fb = g.nb * g.b_rows * g.b_cols;
    clf_buffer *tmp = NULL;
    clf_status s = clf_buffer_create(rt, (fa + fb) * sizeof(float), &tmp, err);
    if (s == CLF_OK)
        s = clf_buffer_fill(rt, tmp, 0, (fa + fb) * sizeof(float), 0u, err);
    if (s == CLF_OK) {
        x.a = (clf_ptr){tmp, 0}, x.lda = g.a_cols, x.stride_a = g.na > 1 ? g.a_rows * g.a_cols : 0;
        x.b = (clf_ptr){tmp, fa}, x.ldb = g.b_cols, x.stride_b = g.nb > 1 ? g.b_rows * g.b_cols : 0;
        s = clf_gemm_auto_choose(rt, st, &x, &cand, NULL, err); /* times into its own C */
    }
    clf_buffer_destroy(tmp);
    return s;
}

/* The native configuration that will run d's float32 twin x when it is
 * known without timing (an explicit candidate, the native engine, or a
 * choice already made) and reads and writes d's 16-bit A, B and C itself
 * (x then takes the K slicing chosen with it); else NULL. */
static gemm_native *direct_config(clf_runtime *rt, gemm_state *st, clf_gemm_engine engine, int cand,
                                  clf_gemm_desc *x, const clf_gemm_desc *d)
{
    gemm_native *nat = NULL;
    size_t k_slice = 0;
    if (cand < 0 && engine == CLF_GEMM_AUTO && !clf_gemm_auto_known(rt, st, x, &cand, &k_slice))
        return NULL;
    if (x->k_slice == 0)
        x->k_slice = k_slice; /* the first call of a class makes the choice on widened copies */
    if (cand == GEMM_CAND_CLBLAST || (cand < 0 && engine == CLF_GEMM_CLBLAST))
        return NULL;
    if (cand > 0 && (size_t)cand <= st->n_natives) {
        nat = &st->natives[cand - 1];
        if (clf_gemm_native_init(rt, nat, NULL) != CLF_OK)
            return NULL;
    } else if (clf_gemm_native_default(rt, st, &nat, NULL) != CLF_OK) {
        return NULL;
    }
    return clf_gemm_native_reads16(nat, d) ? nat : NULL;
}

clf_status clf_gemm16_run(clf_runtime *rt, gemm_state *st, clf_gemm_engine engine, int cand,
                          int prepare, const clf_gemm_desc *d, clf_error *err)
{
    const size_t batch = clf_gemm_batch_of(d);
    const dims16 g = dims_of(d);
    clf_gemm_desc x = *d;
    x.a_type = x.b_type = x.c_type = CLF_DT_F32;
    clf_status s = CLF_OK;
    if (cand < 0 && engine == CLF_GEMM_AUTO && (s = choose_twin(rt, st, d, err)) != CLF_OK)
        return s;
    gemm_native *nat = d->k > 0 ? direct_config(rt, st, engine, cand, &x, d) : NULL;
    /* read directly by nat's packing, or widened here */
    const int a16 = !nat && d->k > 0 && d->a_type != CLF_DT_F32;
    const int b16 = !nat && d->k > 0 && d->b_type != CLF_DT_F32;
    const int c16 = !nat && d->c_type != CLF_DT_F32;
    if (nat != NULL)
        x.a_type = d->a_type, x.b_type = d->b_type, x.c_type = d->c_type;
    const size_t fa = a16 ? g.na * g.a_rows * g.a_cols : 0;
    const size_t fb = b16 ? g.nb * g.b_rows * g.b_cols : 0;
    const size_t fc = c16 ? batch * d->m * d->n : 0;
    s = fa + fb + fc > 0 ? clf_gemm_scratch_grow(rt, &st->conv, &st->conv_floats, fa + fb + fc,
                                                 "16-bit conversion scratch", err)
                         : CLF_OK;
    if (s != CLF_OK)
        return s;
    if (a16 && (s = to_f32(rt, st, 0, d->a_type, d->a, d->lda, d->stride_a, g.a_rows, g.a_cols,
                           g.na, !prepare, &x.a, &x.lda, &x.stride_a, err)) != CLF_OK)
        return s;
    if (b16 && (s = to_f32(rt, st, fa, d->b_type, d->b, d->ldb, d->stride_b, g.b_rows, g.b_cols,
                           g.nb, !prepare, &x.b, &x.ldb, &x.stride_b, err)) != CLF_OK)
        return s;
    /* a 16-bit C: its old values are read only when beta != 0 */
    if (c16 && (s = to_f32(rt, st, fa + fb, d->c_type, d->c, d->ldc, d->stride_c, d->m, d->n, batch,
                           !prepare && d->beta != 0.0f, &x.c, &x.ldc, &x.stride_c, err)) != CLF_OK)
        return s;
    if (prepare)
        return nat != NULL ? clf_gemm_native_reserve(rt, st, nat, &x, err)
                           : clf_gemm_prepare(rt, &x, err);
    s = nat != NULL ? clf_gemm_native_run(rt, st, nat, &x, err)
        : cand >= 0 ? clf_gemm_cand_run(rt, st, cand, &x, err)
                    : clf_gemm_with(rt, engine, &x, err);
    if (s == CLF_OK && c16)
        s = clf_convert_matrix(rt, d->c_type, d->c, d->ldc, d->stride_c, CLF_DT_F32, x.c, x.ldc,
                               x.stride_c, d->m, d->n, batch, err);
    return s;
}
