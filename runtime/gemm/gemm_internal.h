/*
 * gemm_internal.h - what the GEMM files share: dispatch.c (validation,
 * entry points), native.c (our engine and its configurations), choice.c
 * (the search and its cache file) and clblast.c (the CLBlast engine).
 *
 * The descriptor reaching these functions has been validated by dispatch.c:
 * m, n, k > 0, leading dimensions and buffer extents checked, batch >= 1.
 * Only runtime/ includes this header.
 */
#ifndef CLF_GEMM_INTERNAL_H
#define CLF_GEMM_INTERNAL_H

#include "runtime/contract.h"
#include "runtime/gemm/gemm.h"

typedef struct gemm_tile {
    size_t mr, vw, nv, nr; /* C block per work-item: mr x nr, nr = vw * nv */
    size_t ly;             /* work-items per work-group */
    size_t kb;             /* k-blocked body: k per block (0: whole K per row block) */
    size_t rb;             /* row blocks per work-item (1 unless k-blocked) */
    size_t stream;         /* B panels packed with non-temporal stores */
    size_t pack_lx;        /* work-group size of the pack kernels */
    size_t pack_kc;        /* k per pack work-item */
    size_t dot;            /* gemm_nt_dot: C block per work-item, dot x dot */
    size_t tm, tn, tk;     /* gemm_tiled: C tile per work-group, k per local stage */
    size_t wm, wn;         /* gemm_tiled: C block per work-item */
} gemm_tile;

/* One configuration of the native engine: a variant of the "gemm" kernel
 * family ("gemm@<name>") compiled with its tile sizes. Register-blocked
 * (gemm_an / gemm_ap: mr x vw*nv per work-item, no local memory) or tiled
 * (gemm_tiled: tm x tn per work-group staged through local memory, wm x wn
 * per work-item). */
#define GEMM_CONFIG_NAME 32
#define GEMM_MAX_CONFIGS 16
typedef struct gemm_config {
    char name[GEMM_CONFIG_NAME]; /* "r8v16x3", "t64x64k16w4x4" */
    int tiled;
    size_t mr, vw, nv;         /* register-blocked */
    size_t kb, rb;             /* register-blocked, k-blocked: k per block, row blocks per item */
    size_t stream;             /* register-blocked: B packed past the caches ("...s") */
    size_t ly;                 /* register-blocked: work-items per work-group */
    size_t tm, tn, tk, wm, wn; /* tiled */
} gemm_config;

/* A configuration and its kernels, built on first use (a failure is
 * remembered: that configuration is then never offered again). */
typedef struct gemm_native {
    gemm_config cfg;
    int tried;
    clf_status status;
    clf_error err; /* why this configuration is unavailable */
    int dropped;   /* the search was told it is unavailable (a notice, once) */
    gemm_tile tile;
    clf_kernel *k_an, *k_ap, *k_nt_dot, *k_tiled, *k_pack_a_n, *k_pack_a_t, *k_pack_b_n,
        *k_pack_b_t;
    clf_kernel *k_nt_dot1;  /* gemm_nt_dot for one row of C */
    clf_kernel *k_epilogue; /* the epilogue alone, after CLBlast */
    clf_kernel *k_splitk;   /* split-K's ordered reduction */
} gemm_native;

/* A candidate of the search: 0 is CLBlast, c > 0 is natives[c - 1]. */
#define GEMM_CAND_CLBLAST 0
#define GEMM_MAX_CANDS (GEMM_MAX_CONFIGS + 1)
_Static_assert(GEMM_MAX_CANDS == CLF_GEMM_MAX_CANDIDATES, "one candidate limit");

typedef struct gemm_class {
    unsigned char ta, tb, lm, ln, lk, lb;
} gemm_class;

typedef struct gemm_choice {
    gemm_class cls;
    size_t m, n, k, batch;    /* the shape that was timed */
    int cand;                 /* the winner */
    int k_whole;              /* the winner runs K in one pass (k_slice = SIZE_MAX) */
    int fresh;                /* timed by this runtime (else read from the cache file) */
    int used;                 /* looked up by this runtime */
    double t[GEMM_MAX_CANDS]; /* seconds per call as timed; -1 = not timed */
} gemm_choice;

typedef struct gemm_state {
    /* the native configurations this device can run; the first n_search
     * are the search's candidates (with CLBlast), natives[0] is what
     * "native" means when asked for explicitly */
    gemm_native natives[GEMM_MAX_CONFIGS];
    size_t n_natives, n_search;
    const char *cand_names[GEMM_MAX_CANDS + 1]; /* NULL-terminated */
    clf_buffer *scratch;                        /* packing and split-K partials, shared by all */
    size_t scratch_floats;
    clf_buffer *conv; /* 16-bit operands widened to float32 (gemm16.c) */
    size_t conv_floats;
    /* auto choices, measured on the kernels of source hash kernels_hash */
    int choices_loaded;
    uint64_t kernels_hash;
    gemm_choice *choices;
    size_t n_choices, cap_choices;
    double search_seconds; /* spent timing so far (the budget's meter) */
    double setup_seconds;  /* spent in candidates' first runs (building kernels) */
} gemm_state;

static inline size_t clf_gemm_batch_of(const clf_gemm_desc *d)
{
    return d->batch > 1 ? d->batch : 1;
}

/* The epilogue code the kernels take (runtime/contract.h's GEMM_EPI_*:
 * bias, residual, the activation's derivative, C's storage (read by
 * gemm_an / gemm_ap only: a 16-bit C reaches no other kernel), D's
 * storage, C keeps the derivative, times D, and the activation in the top
 * byte, see cl/gemm.cl). */
static inline uint32_t clf_gemm_epi_of(const clf_gemm_desc *d)
{
    static const uint32_t kind[] = {0u,           0u, GEMM_EPI_GRADC, GEMM_EPI_RES, GEMM_EPI_DACT,
                                    GEMM_EPI_MULD};
    return (d->bias.buf != NULL ? GEMM_EPI_BIAS : 0u) | kind[d->epi] |
           ((uint32_t)d->c_type << GEMM_EPI_CT_SHIFT) | ((uint32_t)d->d_type << GEMM_EPI_DT_SHIFT) |
           ((uint32_t)d->act << GEMM_EPI_ACT_SHIFT);
}

/* Whether d's epilogue reads D (else, with a kind, it writes D). */
static inline int clf_gemm_epi_reads_d(const clf_gemm_desc *d)
{
    return d->epi == CLF_GEMM_EPI_RESIDUAL || d->epi == CLF_GEMM_EPI_TIMES_DERIV ||
           d->epi == CLF_GEMM_EPI_TIMES_D;
}

/* The epilogue's six kernel arguments (any valid buffer stands in for an
 * absent bias or D; the kernel does not read them then). */
#define CLF_GEMM_EPI_ARGS(d, epi)                                                                  \
    CLF_ARG_BUF((d)->bias.buf ? (d)->bias.buf : (d)->c.buf),                                       \
        CLF_ARG_U64((d)->bias.buf ? (d)->bias.off : 0), CLF_ARG_U32(epi),                          \
        CLF_ARG_BUF((d)->d.buf ? (d)->d.buf : (d)->c.buf),                                         \
        CLF_ARG_U64((d)->d.buf ? (d)->d.off : 0), CLF_ARG_U64((d)->d.buf ? (d)->ldd : 0)

/* dispatch.c: the runtime's GEMM state (created on first use, with the
 * device's configurations listed by native.c). */
clf_status clf_gemm_state_get(clf_runtime *rt, gemm_state **out, clf_error *err);
/* dispatch.c: grow one of the state's scratch buffers (*buf holding
 * *floats) to exactly `need` floats, zeroed (a prepare may time candidates
 * on it before anything is written). The old buffer is released first, so
 * the runtime's memory count never holds both; queued kernels keep it alive
 * on the device until they finish. Nothing happens when it is large enough. */
clf_status clf_gemm_scratch_grow(clf_runtime *rt, clf_buffer **buf, size_t *floats, size_t need,
                                 const char *what, clf_error *err);
/* gemm16.c: a descriptor with a 16-bit A, B or C: run (cand >= 0: that
 * candidate; else by engine) or, with prepare set, only ready it, through
 * float32 copies in st->conv. d is validated, m, n > 0. */
int clf_gemm_is16(const clf_gemm_desc *d);
clf_status clf_gemm16_run(clf_runtime *rt, gemm_state *st, clf_gemm_engine engine, int cand,
                          int prepare, const clf_gemm_desc *d, clf_error *err);
/* dispatch.c: the native configuration "native" means (the runtime's
 * gemm_config by name, else the first that builds), built. */
clf_status clf_gemm_native_default(clf_runtime *rt, gemm_state *st, gemm_native **out,
                                   clf_error *err);
/* dispatch.c: run validated d (m, n > 0) on candidate cand. */
clf_status clf_gemm_cand_run(clf_runtime *rt, gemm_state *st, int cand, const clf_gemm_desc *d,
                             clf_error *err);

/* native.c: list the configurations the device can run, by its probed
 * limits (work-group size, local memory) and shape (work-groups run item by
 * item or in lockstep), into st->natives; the search's share first. */
void clf_gemm_configs_list(clf_runtime *rt, gemm_state *st);
/* native.c: build configuration nat once (a failure is remembered and
 * repeated); run validated d with m, n > 0 on it (k == 0: C = beta * C);
 * size the shared scratch for d up front (clf_gemm_prepare). */
clf_status clf_gemm_native_init(clf_runtime *rt, gemm_native *nat, clf_error *err);
clf_status clf_gemm_native_run(clf_runtime *rt, gemm_state *st, gemm_native *nat,
                               const clf_gemm_desc *d, clf_error *err);
/* native.c: d's epilogue alone over C (after CLBlast); nothing without one. */
clf_status clf_gemm_native_epilogue(clf_runtime *rt, gemm_native *nat, const clf_gemm_desc *d,
                                    clf_error *err);
clf_status clf_gemm_native_reserve(clf_runtime *rt, gemm_state *st, gemm_native *nat,
                                   const clf_gemm_desc *d, clf_error *err);
/* native.c: whether nat by default runs d (k_slice 0, float32) as K
 * slices accumulating into C, so that one pass over K is an alternative
 * worth timing. */
int clf_gemm_native_sliced(clf_runtime *rt, const gemm_native *nat, const clf_gemm_desc *d);
/* native.c: whether nat runs d as it is stored: always for a float32 A, B
 * and C (any D); for a bf16 or f16 A, B or C, the register-blocked
 * configurations (their packing widens as it copies, their store narrows)
 * with k > 0. */
int clf_gemm_native_reads16(const gemm_native *nat, const clf_gemm_desc *d);

/* choice.c: the auto choice (a candidate, and the k_slice to run it with:
 * 0 or SIZE_MAX, K in one pass) for validated d with m, n, k > 0 (from the
 * cache, else searched and remembered). k_slice may be NULL. */
clf_status clf_gemm_auto_choose(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d, int *cand,
                                size_t *k_slice, clf_error *err);
/* choice.c: the auto choice for d's class if it is already made (this
 * runtime or the cache file): 1, *cand and *k_slice (may be NULL), else 0;
 * never times. */
int clf_gemm_auto_known(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d, int *cand,
                        size_t *k_slice);

/* Enqueue d on CLBlast (SGEMM, or strided-batched SGEMM when batch > 1) on
 * the runtime's queue. CLBlast failures become CLF_ERR_CLBLAST with the
 * status code and its name; with profiling on, CLBlast's event is recorded
 * under "clblast_sgemm" / "clblast_sgemm_batched". */
clf_status clf_gemm_clblast_run(clf_runtime *rt, const clf_gemm_desc *d, clf_error *err);

/* Symbolic name of a CLBlast status code ("CLBlastInvalidLeadDimA"); OpenCL
 * codes it shares map to their CL_ names. */
const char *clf_gemm_clblast_status_name(int status);

#endif
