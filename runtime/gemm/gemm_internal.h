/*
 * gemm_internal.h - what the GEMM files share: dispatch.c (validation,
 * entry points), native.c (our engine), choice.c (the auto choice and its
 * cache file) and clblast.c (the CLBlast engine).
 *
 * The descriptor reaching these functions has been validated by dispatch.c:
 * m, n, k > 0, leading dimensions and buffer extents checked, batch >= 1.
 * Only runtime/ includes this header.
 */
#ifndef CLF_GEMM_INTERNAL_H
#define CLF_GEMM_INTERNAL_H

#include "runtime/gemm/gemm.h"

typedef struct gemm_tile {
    size_t mr, vw, nv, nr; /* C block per work-item: mr x nr, nr = vw * nv */
    size_t ly;             /* work-items (row blocks) per work-group */
    size_t pack_lx;        /* work-group size of the pack kernels */
    size_t pack_kc;        /* k per pack work-item */
    size_t dot;            /* gemm_nt_dot: C block per work-item, dot x dot */
} gemm_tile;

typedef struct gemm_class {
    unsigned char ta, tb, lm, ln, lk, lb;
} gemm_class;

typedef struct gemm_choice {
    gemm_class cls;
    clf_gemm_engine engine;
    double t_clblast, t_native; /* seconds per call as timed; -1 = not timed */
} gemm_choice;

typedef struct gemm_state {
    /* native engine: built on first use */
    int native_tried;
    clf_status native_status;
    clf_error native_err; /* why the native engine is unavailable */
    gemm_tile tile;
    clf_kernel *k_an, *k_ap, *k_nt_dot, *k_pack_a_n, *k_pack_a_t, *k_pack_b_n, *k_pack_b_t;
    clf_kernel *k_epilogue; /* the epilogue alone, after CLBlast */
    clf_kernel *k_splitk;   /* split-K's ordered reduction */
    clf_buffer *scratch;
    size_t scratch_floats;
    /* auto choices */
    int choices_loaded;
    gemm_choice *choices;
    size_t n_choices, cap_choices;
} gemm_state;

static inline size_t clf_gemm_batch_of(const clf_gemm_desc *d)
{
    return d->batch > 1 ? d->batch : 1;
}

/* The epilogue code the kernels take (cl/gemm.cl: bit 0 bias, act << 1). */
static inline uint32_t clf_gemm_epi_of(const clf_gemm_desc *d)
{
    return (d->bias.buf != NULL ? 1u : 0u) | ((uint32_t)d->act << 1);
}

/* The epilogue's six kernel arguments (any valid buffer stands in for an
 * absent bias or D; the kernel does not read them then). */
#define CLF_GEMM_EPI_ARGS(d, epi)                                                                  \
    CLF_ARG_BUF((d)->bias.buf ? (d)->bias.buf : (d)->c.buf),                                       \
        CLF_ARG_U64((d)->bias.buf ? (d)->bias.off : 0), CLF_ARG_U32(epi),                          \
        CLF_ARG_BUF((d)->d.buf ? (d)->d.buf : (d)->c.buf),                                         \
        CLF_ARG_U64((d)->d.buf ? (d)->d.off : 0), CLF_ARG_U64((d)->d.buf ? (d)->ldd : 0)

/* dispatch.c: the runtime's GEMM state (created on first use). */
clf_status clf_gemm_state_get(clf_runtime *rt, gemm_state **out, clf_error *err);
/* dispatch.c: run validated d (m, n > 0) on engine e (not AUTO). */
clf_status clf_gemm_engine_run(clf_runtime *rt, gemm_state *st, clf_gemm_engine e,
                               const clf_gemm_desc *d, clf_error *err);

/* native.c: build the native engine once (a failure is remembered and
 * repeated); run validated d with m, n > 0 (k == 0: C = beta * C); size the
 * packing scratch for d up front (clf_gemm_prepare). */
clf_status clf_gemm_native_init(clf_runtime *rt, gemm_state *st, clf_error *err);
clf_status clf_gemm_native_run(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d,
                               clf_error *err);
/* native.c: d's epilogue alone over C (after CLBlast); nothing without one. */
clf_status clf_gemm_native_epilogue(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d,
                                    clf_error *err);
clf_status clf_gemm_native_reserve(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d,
                                   clf_error *err);

/* choice.c: the auto choice for validated d with m, n, k > 0 (from the
 * cache, else timed and remembered). */
clf_status clf_gemm_auto_choose(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d,
                                clf_gemm_engine *out, clf_error *err);

/* Enqueue d on CLBlast (SGEMM, or strided-batched SGEMM when batch > 1) on
 * the runtime's queue. CLBlast failures become CLF_ERR_CLBLAST with the
 * status code and its name; with profiling on, CLBlast's event is recorded
 * under "clblast_sgemm" / "clblast_sgemm_batched". */
clf_status clf_gemm_clblast_run(clf_runtime *rt, const clf_gemm_desc *d, clf_error *err);

/* Symbolic name of a CLBlast status code ("CLBlastInvalidLeadDimA"); OpenCL
 * codes it shares map to their CL_ names. */
const char *clf_gemm_clblast_status_name(int status);

#endif
