/*
 * gemm.h - the one GEMM interface of clformer.
 *
 * Row-major, C = alpha * op(A) * op(B) + beta * C, where op(A) is M x K and
 * op(B) is K x N. Leading dimensions are row strides of the stored matrices
 * (for A stored transposed, A is K x M with lda >= M). Offsets are in
 * elements. batch > 1 runs a strided batch: matrix i of A starts at
 * a.off + i * stride_a (likewise B and C), used for attention heads.
 *
 * An epilogue may follow in the same pass: bias (N floats) added to every
 * row of C, then one of the clf_gemm_epi kinds: an activation of the
 * result written to a second matrix D (C keeps the value before it, what a
 * backward pass needs, or the activation's derivative); a residual, D read
 * and added to C (a residual connection's add); or an activation's
 * derivative at D multiplied into C (D holds the activation's input, C
 * becomes the gradient of that input, the backward of an activation), or
 * D itself multiplied in where D holds that derivative already (the same
 * function of the same value, so the same bits). One value names the kind,
 * so no two of them can be asked for at once. A D that is read must not
 * overlap C. The native engine applies it as it stores C; after CLBlast it
 * is one more pass.
 *
 * A, B, C and D may each be stored in 16 bits (a_type, b_type, c_type,
 * d_type: bf16 or f16; offsets, leading dimensions and strides then count
 * 2-byte elements): the products are computed in float32 all the same,
 * 16-bit values widened exactly as they are read and results narrowed
 * (round to nearest even) as they are stored, so every engine serves every
 * format and no device needs cl_khr_fp16. The register-blocked native
 * configurations read and write them in their own kernels; other paths
 * widen A, B and C into the engine's conversion scratch (gemm16.c). D is
 * read and written in its type by every engine's epilogue. Bias stays
 * float32.
 *
 * Two engines sit behind it: CLBlast, and our own (cl/gemm.cl) in several
 * configurations. CLF_GEMM_AUTO times them once per device and shape class,
 * keeps the choice for the runtime's lifetime and in the on-disk cache.
 */
#ifndef CLF_GEMM_H
#define CLF_GEMM_H

#include "runtime/convert.h"
#include "runtime/runtime.h"

CLF_API_BEGIN

/* The epilogue's activation (the model's ops.h clf_act, same formulas). */
typedef enum clf_gemm_act {
    CLF_GEMM_ACT_NONE = 0,
    CLF_GEMM_ACT_RELU,
    CLF_GEMM_ACT_GELU_ERF,
    CLF_GEMM_ACT_GELU_TANH,
    CLF_GEMM_ACT_SILU,
} clf_gemm_act;

/* What the GEMM does as it stores C, after the bias; D [m, n] (row stride
 * ldd, stored as d_type) is read or written as the kind says, and act is
 * the activation of the kinds that name one (else CLF_GEMM_ACT_NONE). */
typedef enum clf_gemm_epi {
    CLF_GEMM_EPI_NONE = 0,    /* C */
    CLF_GEMM_EPI_ACT,         /* D = act(C); C keeps the pre-activation */
    CLF_GEMM_EPI_ACT_DERIV,   /* D = act(C); C = act'(C), what a backward multiplies by */
    CLF_GEMM_EPI_RESIDUAL,    /* C += D */
    CLF_GEMM_EPI_TIMES_DERIV, /* C *= act'(D) */
    CLF_GEMM_EPI_TIMES_D,     /* C *= D (a derivative CLF_GEMM_EPI_ACT_DERIV stored) */
} clf_gemm_epi;

typedef struct clf_gemm_desc {
    int trans_a, trans_b; /* 0 = as stored, 1 = transposed */
    size_t m, n, k;
    float alpha, beta;
    clf_ptr a;
    size_t lda;
    clf_ptr b;
    size_t ldb;
    clf_ptr c;
    size_t ldc;
    size_t batch; /* 0 or 1 = one matrix */
    size_t stride_a, stride_b, stride_c;
    /* epilogue (one matrix only): C += bias (buf NULL = none), then epi */
    clf_ptr bias;
    clf_gemm_epi epi;
    clf_gemm_act act;
    clf_ptr d;
    size_t ldd;
    /* storage of A, B, C and D (0 = CLF_DT_F32) */
    clf_dtype a_type, b_type, c_type, d_type;
    /* the native register-blocked engine's K slices, which accumulate into
     * C one after another: 0 = as auto chose for the shape's class (on an
     * explicit engine, or before a choice: slices of about 512 past a depth
     * of 1024); any other value = slices of at most that depth, so k_slice
     * >= k runs K in one pass */
    size_t k_slice;
} clf_gemm_desc;

/* Run on the engine chosen by the runtime's options (auto by default). */
clf_status clf_gemm(clf_runtime *rt, const clf_gemm_desc *d, clf_error *err);
/* Run on one engine explicitly (tests, benchmarks). */
clf_status clf_gemm_with(clf_runtime *rt, clf_gemm_engine engine, const clf_gemm_desc *d,
                         clf_error *err);
/* The engine auto picks (or picked) for this shape; may time both. */
clf_status clf_gemm_choose(clf_runtime *rt, const clf_gemm_desc *d, clf_gemm_engine *out,
                           clf_error *err);
const char *clf_gemm_engine_name(clf_gemm_engine e);

/* ---- the native configurations and the search ------------------------------
 * Auto searches, per shape class (transposes, floor(log2) of m, n, k and
 * batch), CLBlast and the native configurations this device lists, timing
 * each on the caller's operands, and keeps the fastest for the runtime's
 * lifetime and in <cache_dir>/gemm-<device>.txt. */
#define CLF_GEMM_MAX_CANDIDATES 17
/* names[0] is "clblast", names[1 .. count-1] the native configurations the
 * device can run ("r8v16x3": register-blocked, 8 rows x 3 vectors of 16;
 * "r6v16x4k64b64": the same blocked over K, 64 deep, 64 row blocks per
 * work-item; "t64x64k16w4x4": local-memory tiles of 64 x 64, 16 deep, 4 x 4 per
 * work-item). The search times names[0 .. n_search-1]; the rest run on
 * request only. */
clf_status clf_gemm_candidates(clf_runtime *rt, const char *const **names, size_t *count,
                               size_t *n_search, clf_error *err);
/* The programs of native configuration `name` into fam, their defines set,
 * nothing built (clf_program_source then gives their sources: the SPIR-V
 * check of the tests): [0] its products ("gemm@<name>"), [1] its packing
 * ("gemm@p<mr>v<vw>x<nv>", shared by the register-blocked configurations
 * with that block; "" for a tiled one, which packs nothing), [2] its dot
 * products, split-K's reduction and lone epilogue ("gemm@d<vw>g<ly>",
 * shared by the configurations of that vector width and work-group size;
 * "" for a tiled one, whose products program holds them). Any
 * configuration some device lists is named, whether or not this one lists
 * it. */
#define CLF_GEMM_PROGRAMS 3
clf_status clf_gemm_config_programs(clf_runtime *rt, const char *name,
                                    char fam[CLF_GEMM_PROGRAMS][64], clf_error *err);
/* Run d on one candidate by name (tests, benchmarks). */
clf_status clf_gemm_with_config(clf_runtime *rt, const char *name, const clf_gemm_desc *d,
                                clf_error *err);
/* The candidate auto runs for d's shape (searching its class now if needed;
 * the forced engine's when the runtime's gemm option is not auto). */
clf_status clf_gemm_choice(clf_runtime *rt, const clf_gemm_desc *d, const char **name,
                           clf_error *err);
/* The search's results so far, one row per shape class (from this runtime's
 * timing or the cache file; with gemm_retune, the classes this runtime timed
 * again and those of the file it has not needed). */
typedef struct clf_gemm_tuned {
    int trans_a, trans_b;
    size_t m, n, k, batch; /* the shape that was timed */
    size_t winner;         /* index into the candidate names */
    int k_whole;           /* the winner runs K in one pass (timed faster than slices) */
    int used;              /* a shape of this class ran (or was prepared) in this runtime */
    double seconds[CLF_GEMM_MAX_CANDIDATES]; /* per call; < 0 = not timed */
} clf_gemm_tuned;
clf_status clf_gemm_tuning(clf_runtime *rt, clf_gemm_tuned *rows, size_t cap, size_t *n,
                           clf_error *err);
/* Seconds this runtime's search has spent: timing the candidates (what
 * gemm_search_budget meters) and in each candidate's first run, which builds
 * and specialises its kernels (not metered). */
clf_status clf_gemm_search_seconds(clf_runtime *rt, double *timing, double *setup, clf_error *err);
/* Ready what a later clf_gemm of d's shape needs, so that the call itself
 * only enqueues kernels: builds the native engine, makes (times, caches) the
 * auto choice for d's shape class, and sizes the native engine's packing
 * scratch for d. Call it while planning, with each shape of a training step
 * (the largest last is cheapest). May read d's A and B; never writes C. */
clf_status clf_gemm_prepare(clf_runtime *rt, const clf_gemm_desc *d, clf_error *err);
/* Bytes of packing scratch the native register-blocked engine needs for one
 * product of this shape (without a device: a transposed A packed whole, B
 * packed whole when transposed or when m >= 32 rows re-read it, nothing for
 * the few-row dot-product path; tile rounding, at most a tile's rows and
 * columns, is left out). The engine's scratch is the largest of these over
 * the shapes it ran. Split-K partials (devices whose outputs cannot fill
 * them) and CLBlast's own temporaries are not predicted. */
size_t clf_gemm_workspace_estimate(int trans_a, int trans_b, size_t m, size_t n, size_t k);
/* Bytes of the GEMM engines' shared scratch now allocated on rt (packing,
 * split-K partials, 16-bit operands widened). */
size_t clf_gemm_workspace_bytes(clf_runtime *rt);

CLF_API_END

#endif
