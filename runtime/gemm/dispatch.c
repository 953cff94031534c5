/*
 * dispatch.c - the GEMM entry points: argument checks, the degenerate cases,
 * and the hand-off to an engine (native.c, clblast.c) or to the auto choice
 * (choice.c).
 *
 * Design
 *   Every entry point validates the descriptor first (leading dimensions,
 *   buffer extents, batch strides) so that both engines see only sound
 *   calls, and handles the degenerate cases itself: m or n == 0 does
 *   nothing, k == 0 scales C by beta (on the native kernel with K = 0,
 *   since CLBlast rejects it).
 *
 *   All state hangs off the runtime (clf_runtime_gemm_slot); nothing global.
 *
 * Not here: the engines (native.c, clblast.c, cl/gemm.cl), the auto choice
 *   (choice.c). Checking that C does not overlap A or B is left to the
 *   caller: one allocation legitimately interleaves tensors.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/gemm/gemm_internal.h"
#include "runtime/runtime_internal.h"

void clf_gemm_state_destroy(void *state)
{
    gemm_state *st = state;
    if (st == NULL)
        return;
    clf_buffer_destroy(st->scratch);
    clf_buffer_destroy(st->conv);
    free(st->choices);
    free(st);
}

const char *clf_gemm_engine_name(clf_gemm_engine e)
{
    switch (e) {
        case CLF_GEMM_AUTO: return "auto";
        case CLF_GEMM_CLBLAST: return "clblast";
        case CLF_GEMM_NATIVE: return "native";
    }
    return "unknown";
}

clf_status clf_gemm_state_get(clf_runtime *rt, gemm_state **out, clf_error *err)
{
    void **slot = clf_runtime_gemm_slot(rt);
    if (*slot == NULL) {
        gemm_state *st = calloc(1, sizeof *st);
        if (st == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "gemm: out of host memory");
        clf_gemm_configs_list(rt, st);
        *slot = st;
    }
    *out = *slot;
    return CLF_OK;
}

clf_status clf_gemm_scratch_grow(clf_runtime *rt, clf_buffer **buf, size_t *floats, size_t need,
                                 const char *what, clf_error *err)
{
    if (need <= *floats)
        return CLF_OK;
    clf_buffer_destroy(*buf);
    *buf = NULL;
    *floats = 0;
    clf_status s = clf_buffer_create(rt, need * sizeof(float), buf, err);
    if (s == CLF_OK)
        s = clf_buffer_fill(rt, *buf, 0, need * sizeof(float), 0u, err);
    if (s != CLF_OK) {
        clf_error_prefix(err, "gemm: allocating the %s", what);
        clf_buffer_destroy(*buf);
        *buf = NULL;
        return s;
    }
    *floats = need;
    return CLF_OK;
}

size_t clf_gemm_workspace_bytes(clf_runtime *rt)
{
    const gemm_state *st = *clf_runtime_gemm_slot(rt);
    return st != NULL ? (st->scratch_floats + st->conv_floats) * sizeof(float) : 0;
}

/* ---- validation ------------------------------------------------------------ */

/* Does the matrix (rows x cols, row stride ld, batch matrices stride apart)
 * starting at element p.off fit in p's buffer? */
static clf_status check_extent(const char *name, clf_dtype type, clf_ptr p, size_t rows,
                               size_t cols, size_t ld, size_t stride, size_t batch, clf_error *err)
{
    const size_t have = clf_buffer_size(p.buf) / clf_dtype_size(type);
    size_t need = 0;
    if (!clf_matrix_end(p.off, rows, cols, ld, stride, batch, &need) || need > have)
        return clf_error_set(err, CLF_ERR_ARG,
                             "gemm: %s (%zu x %zu, ld %zu, offset %zu, batch %zu, stride %zu) "
                             "reaches past the end of its buffer of %zu %s elements",
                             name, rows, cols, ld, p.off, batch, stride, have,
                             clf_dtype_name(type));
    return CLF_OK;
}

static clf_status validate(const clf_gemm_desc *d, clf_error *err)
{
    if (d == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "gemm: descriptor is NULL");
    if ((d->trans_a != 0 && d->trans_a != 1) || (d->trans_b != 0 && d->trans_b != 1))
        return clf_error_set(err, CLF_ERR_ARG, "gemm: trans_a=%d trans_b=%d (0 or 1 expected)",
                             d->trans_a, d->trans_b);
    if (d->m == 0 || d->n == 0)
        return CLF_OK; /* nothing to compute, nothing to check */
    const clf_dtype types[4] = {d->a_type, d->b_type, d->c_type, d->d_type};
    for (int i = 0; i < 4; i++)
        if (types[i] != CLF_DT_F32 && types[i] != CLF_DT_BF16 && types[i] != CLF_DT_F16)
            return clf_error_set(err, CLF_ERR_ARG, "gemm: unknown storage type %d for %c",
                                 (int)types[i], "ABCD"[i]);
    const size_t batch = clf_gemm_batch_of(d);
    /* stored shapes: A is m x k (k x m transposed), B is k x n (n x k) */
    const size_t a_rows = d->trans_a ? d->k : d->m, a_cols = d->trans_a ? d->m : d->k;
    const size_t b_rows = d->trans_b ? d->n : d->k, b_cols = d->trans_b ? d->k : d->n;
    if (d->c.buf == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "gemm: C buffer is NULL");
    if (d->ldc < d->n)
        return clf_error_set(err, CLF_ERR_ARG,
                             "gemm: ldc=%zu is smaller than n=%zu, the row length of C", d->ldc,
                             d->n);
    if (batch > 1 && d->stride_c < (d->m - 1) * d->ldc + d->n)
        return clf_error_set(err, CLF_ERR_ARG,
                             "gemm: stride_c=%zu is smaller than one C matrix (%zu floats for "
                             "%zu x %zu with ldc %zu): the batch's outputs would overlap",
                             d->stride_c, (d->m - 1) * d->ldc + d->n, d->m, d->n, d->ldc);
    clf_status s = check_extent("C", d->c_type, d->c, d->m, d->n, d->ldc, d->stride_c, batch, err);
    if (s != CLF_OK)
        return s;
    if (d->epi < CLF_GEMM_EPI_NONE || d->epi > CLF_GEMM_EPI_TIMES_D)
        return clf_error_set(err, CLF_ERR_ARG, "gemm: unknown epilogue kind %d", (int)d->epi);
    if (d->act < CLF_GEMM_ACT_NONE || d->act > CLF_GEMM_ACT_SILU)
        return clf_error_set(err, CLF_ERR_ARG, "gemm: unknown epilogue activation %d", (int)d->act);
    const int reads_d = clf_gemm_epi_reads_d(d); /* else an activation writes D */
    const int names_act = d->epi == CLF_GEMM_EPI_ACT || d->epi == CLF_GEMM_EPI_ACT_DERIV ||
                          d->epi == CLF_GEMM_EPI_TIMES_DERIV;
    if ((d->bias.buf != NULL || d->epi != CLF_GEMM_EPI_NONE) && batch > 1)
        return clf_error_set(err, CLF_ERR_ARG,
                             "gemm: an epilogue (bias, activation, residual, product) needs a "
                             "single matrix, not a batch of %zu",
                             batch);
    if (d->bias.buf != NULL &&
        (s = check_extent("bias", CLF_DT_F32, d->bias, 1, d->n, d->n, 0, 1, err)) != CLF_OK)
        return s;
    if (names_act != (d->act != CLF_GEMM_ACT_NONE))
        return clf_error_set(err, CLF_ERR_ARG, "gemm: %s",
                             names_act ? "the epilogue's activation (act) is missing"
                                       : "an activation (act) given to an epilogue "
                                         "that takes none");
    if (d->epi != CLF_GEMM_EPI_NONE) {
        if (d->d.buf == NULL)
            return clf_error_set(err, CLF_ERR_ARG, "gemm: an epilogue %s needs D (%s)",
                                 d->epi == CLF_GEMM_EPI_RESIDUAL      ? "residual"
                                 : d->epi == CLF_GEMM_EPI_TIMES_DERIV ? "activation derivative"
                                 : d->epi == CLF_GEMM_EPI_TIMES_D     ? "product"
                                                                      : "activation",
                                 d->epi == CLF_GEMM_EPI_RESIDUAL      ? "the matrix added"
                                 : d->epi == CLF_GEMM_EPI_TIMES_DERIV ? "the activation's input"
                                 : d->epi == CLF_GEMM_EPI_TIMES_D ? "the derivative multiplied in"
                                                                  : "the activated output");
        if (d->ldd < d->n)
            return clf_error_set(err, CLF_ERR_ARG, "gemm: ldd=%zu is smaller than n=%zu", d->ldd,
                                 d->n);
        if ((s = check_extent("D", d->d_type, d->d, d->m, d->n, d->ldd, 0, 1, err)) != CLF_OK)
            return s;
        /* byte ranges: C and D may be stored in different types */
        const size_t cs = clf_dtype_size(d->c_type), ds = clf_dtype_size(d->d_type);
        size_t c_end = 0, d_end = 0; /* both checked above */
        if (reads_d && d->d.buf == d->c.buf && d->m > 0 && d->n > 0 &&
            clf_matrix_end(d->c.off, d->m, d->n, d->ldc, 0, 1, &c_end) &&
            clf_matrix_end(d->d.off, d->m, d->n, d->ldd, 0, 1, &d_end) &&
            d->d.off * ds < c_end * cs && d->c.off * cs < d_end * ds)
            return clf_error_set(err, CLF_ERR_ARG,
                                 "gemm: the epilogue's D overlaps C (deep products accumulate C "
                                 "slice by slice, so D would be read changed)");
    }
    if (d->k == 0)
        return CLF_OK; /* A and B are not read */
    if (d->a.buf == NULL || d->b.buf == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "gemm: %s buffer is NULL",
                             d->a.buf == NULL ? "A" : "B");
    if (d->lda < a_cols)
        return clf_error_set(err, CLF_ERR_ARG,
                             "gemm: lda=%zu is smaller than %zu, the row length of A as stored "
                             "(%zu x %zu%s)",
                             d->lda, a_cols, a_rows, a_cols, d->trans_a ? ", transposed" : "");
    if (d->ldb < b_cols)
        return clf_error_set(err, CLF_ERR_ARG,
                             "gemm: ldb=%zu is smaller than %zu, the row length of B as stored "
                             "(%zu x %zu%s)",
                             d->ldb, b_cols, b_rows, b_cols, d->trans_b ? ", transposed" : "");
    s = check_extent("A", d->a_type, d->a, a_rows, a_cols, d->lda, d->stride_a, batch, err);
    if (s == CLF_OK)
        s = check_extent("B", d->b_type, d->b, b_rows, b_cols, d->ldb, d->stride_b, batch, err);
    return s;
}

/* ---- running on a candidate ----------------------------------------------------- */

clf_status clf_gemm_native_default(clf_runtime *rt, gemm_state *st, gemm_native **out,
                                   clf_error *err)
{
    const char *want = clf_runtime_options_get(rt)->gemm_config;
    if (want != NULL && want[0] != '\0') {
        for (size_t i = 0; i < st->n_natives; i++)
            if (strcmp(want, st->natives[i].cfg.name) == 0) {
                *out = &st->natives[i];
                return clf_gemm_native_init(rt, *out, err);
            }
        char list[512] = "";
        for (size_t i = 0, used = 0; i < st->n_natives && used < sizeof list; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                     st->natives[i].cfg.name);
        return clf_error_set(err, CLF_ERR_ARG,
                             "gemm: no native configuration '%s' on this device (it has %s)", want,
                             list);
    }
    clf_status s = CLF_ERR_UNSUPPORTED;
    for (size_t i = 0; i < st->n_natives; i++)
        if ((s = clf_gemm_native_init(rt, &st->natives[i], i == 0 ? err : NULL)) == CLF_OK) {
            *out = &st->natives[i];
            return CLF_OK;
        }
    if (st->n_natives == 0)
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "gemm: the device admits no native configuration");
    return s;
}

/* d validated, m, n > 0. */
clf_status clf_gemm_cand_run(clf_runtime *rt, gemm_state *st, int cand, const clf_gemm_desc *d,
                             clf_error *err)
{
    gemm_native *nat = NULL;
    clf_status s;
    if (cand > 0 && (size_t)cand <= st->n_natives) {
        nat = &st->natives[cand - 1];
        if ((s = clf_gemm_native_init(rt, nat, err)) != CLF_OK)
            return s;
    } else if ((s = clf_gemm_native_default(rt, st, &nat, err)) != CLF_OK) {
        return s;
    }
    /* k == 0 (C = beta * C) always runs natively: CLBlast rejects it. */
    if (d->k == 0 || cand != GEMM_CAND_CLBLAST)
        return clf_gemm_native_run(rt, st, nat, d, err);
    if ((s = clf_gemm_clblast_run(rt, d, err)) != CLF_OK)
        return s;
    return clf_gemm_native_epilogue(rt, nat, d, err);
}

/* The candidate an engine setting runs for validated d (m, n > 0), and
 * the K slicing auto chose with it (*k_slice: 0 where nothing was chosen;
 * k_slice may be NULL). */
static clf_status cand_for(clf_runtime *rt, gemm_state *st, clf_gemm_engine engine,
                           const clf_gemm_desc *d, int *cand, size_t *k_slice, clf_error *err)
{
    if (k_slice != NULL)
        *k_slice = 0;
    switch (engine) {
        case CLF_GEMM_CLBLAST: *cand = GEMM_CAND_CLBLAST; return CLF_OK;
        case CLF_GEMM_NATIVE: *cand = -1; return CLF_OK; /* the default native */
        case CLF_GEMM_AUTO:
            if (d->k == 0) {
                *cand = -1; /* C = beta * C: the native kernel does it */
                return CLF_OK;
            }
            return clf_gemm_auto_choose(rt, st, d, cand, k_slice, err);
    }
    return clf_error_set(err, CLF_ERR_ARG, "gemm: unknown engine %d", (int)engine);
}

/* ---- public entry points -------------------------------------------------------------- */

/* The choice is made for the float32 product a 16-bit descriptor runs as:
 * ask with that one. */
static clf_status no_choice16(const clf_gemm_desc *d, clf_error *err)
{
    return clf_gemm_is16(d) ? clf_error_set(err, CLF_ERR_UNSUPPORTED,
                                            "gemm: the choice for a 16-bit descriptor is its "
                                            "float32 twin's (ask with a_type = b_type = c_type "
                                            "= f32 on float32 buffers)")
                            : CLF_OK;
}

clf_status clf_gemm_choose(clf_runtime *rt, const clf_gemm_desc *d, clf_gemm_engine *out,
                           clf_error *err)
{
    clf_status s = validate(d, err);
    if (s == CLF_OK)
        s = no_choice16(d, err);
    if (s != CLF_OK)
        return s;
    const clf_gemm_engine forced = clf_runtime_options_get(rt)->gemm;
    if (forced != CLF_GEMM_AUTO) {
        *out = forced;
        return CLF_OK;
    }
    gemm_state *st = NULL;
    int cand = -1;
    if ((s = clf_gemm_state_get(rt, &st, err)) != CLF_OK)
        return s;
    if (d->m > 0 && d->n > 0 &&
        (s = cand_for(rt, st, CLF_GEMM_AUTO, d, &cand, NULL, err)) != CLF_OK)
        return s;
    *out = cand == GEMM_CAND_CLBLAST ? CLF_GEMM_CLBLAST : CLF_GEMM_NATIVE;
    return CLF_OK;
}

clf_status clf_gemm_choice(clf_runtime *rt, const clf_gemm_desc *d, const char **name,
                           clf_error *err)
{
    gemm_state *st = NULL;
    clf_status s = validate(d, err);
    if (s == CLF_OK)
        s = no_choice16(d, err);
    if (s == CLF_OK)
        s = clf_gemm_state_get(rt, &st, err);
    int cand = -1;
    if (s == CLF_OK && d->m > 0 && d->n > 0)
        s = cand_for(rt, st, clf_runtime_options_get(rt)->gemm, d, &cand, NULL, err);
    gemm_native *nat = NULL;
    if (s == CLF_OK && cand < 0)
        s = clf_gemm_native_default(rt, st, &nat, err);
    if (s != CLF_OK)
        return s;
    *name = nat != NULL ? nat->cfg.name : st->cand_names[cand];
    return CLF_OK;
}

clf_status clf_gemm_prepare(clf_runtime *rt, const clf_gemm_desc *d, clf_error *err)
{
    clf_status s = validate(d, err);
    if (s != CLF_OK)
        return s;
    if (d->m == 0 || d->n == 0)
        return CLF_OK;
    gemm_state *st = NULL;
    int cand = -1;
    gemm_native *nat = NULL;
    if ((s = clf_gemm_state_get(rt, &st, err)) != CLF_OK)
        return s;
    if (clf_gemm_is16(d))
        return clf_gemm16_run(rt, st, clf_runtime_options_get(rt)->gemm, -1, 1, d, err);
    if ((s = cand_for(rt, st, clf_runtime_options_get(rt)->gemm, d, &cand, NULL, err)) != CLF_OK)
        return s;
    /* every path may need the default native (k == 0, CLBlast's epilogue) */
    if ((s = clf_gemm_native_default(rt, st, &nat, err)) != CLF_OK)
        return s;
    if (cand == GEMM_CAND_CLBLAST)
        return CLF_OK;
    if (cand > 0) {
        nat = &st->natives[cand - 1];
        if ((s = clf_gemm_native_init(rt, nat, err)) != CLF_OK)
            return s;
    }
    return clf_gemm_native_reserve(rt, st, nat, d, err);
}

clf_status clf_gemm_with(clf_runtime *rt, clf_gemm_engine engine, const clf_gemm_desc *d,
                         clf_error *err)
{
    clf_status s = validate(d, err);
    if (s != CLF_OK)
        return s;
    if (engine != CLF_GEMM_AUTO && engine != CLF_GEMM_CLBLAST && engine != CLF_GEMM_NATIVE)
        return clf_error_set(err, CLF_ERR_ARG, "gemm: unknown engine %d", (int)engine);
    if (d->m == 0 || d->n == 0)
        return CLF_OK;
    gemm_state *st = NULL;
    int cand = -1;
    if ((s = clf_gemm_state_get(rt, &st, err)) != CLF_OK)
        return s;
    if (clf_gemm_is16(d))
        return clf_gemm16_run(rt, st, engine, -1, 0, d, err);
    size_t k_slice = 0;
    if ((s = cand_for(rt, st, engine, d, &cand, &k_slice, err)) != CLF_OK)
        return s;
    if (k_slice != 0 && d->k_slice == 0) {
        clf_gemm_desc x = *d;
        x.k_slice = k_slice;
        return clf_gemm_cand_run(rt, st, cand, &x, err);
    }
    return clf_gemm_cand_run(rt, st, cand, d, err);
}

clf_status clf_gemm(clf_runtime *rt, const clf_gemm_desc *d, clf_error *err)
{
    return clf_gemm_with(rt, clf_runtime_options_get(rt)->gemm, d, err);
}

clf_status clf_gemm_candidates(clf_runtime *rt, const char *const **names, size_t *count,
                               size_t *n_search, clf_error *err)
{
    gemm_state *st = NULL;
    clf_status s = clf_gemm_state_get(rt, &st, err);
    if (s != CLF_OK)
        return s;
    *names = st->cand_names;
    *count = 1 + st->n_natives;
    if (n_search != NULL)
        *n_search = 1 + st->n_search;
    return CLF_OK;
}

clf_status clf_gemm_with_config(clf_runtime *rt, const char *name, const clf_gemm_desc *d,
                                clf_error *err)
{
    clf_status s = validate(d, err);
    gemm_state *st = NULL;
    if (s != CLF_OK || (s = clf_gemm_state_get(rt, &st, err)) != CLF_OK)
        return s;
    for (size_t c = 0; c <= st->n_natives; c++)
        if (name != NULL && strcmp(name, st->cand_names[c]) == 0)
            return d->m == 0 || d->n == 0 ? CLF_OK
                   : clf_gemm_is16(d)     ? clf_gemm16_run(rt, st, CLF_GEMM_AUTO, (int)c, 0, d, err)
                                          : clf_gemm_cand_run(rt, st, (int)c, d, err);
    return clf_error_set(err, CLF_ERR_ARG,
                         "gemm: no configuration '%s' on this device (clf_gemm_candidates "
                         "lists them)",
                         name != NULL ? name : "(null)");
}
