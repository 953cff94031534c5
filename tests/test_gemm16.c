/*
 * test_gemm16.c - clf_gemm with A, B and C stored in 16 bits (bf16, f16)
 * against a float64 reference on fresh random inputs, on both engines.
 *
 * The reference takes the 16-bit values themselves (the inputs rounded on
 * the host by model/io/safetensors.h's conversions, which test_convert
 * shows the device's widening reproduces exactly), so what is measured is
 * the product and the final rounding:
 *   - a float32 C: |got - ref| <= 1e-5 sqrt(K) + 1e-4 |ref| (float32
 *     accumulation, as test_gemm);
 *   - a 16-bit C: the same plus half a unit in the last place of the format
 *     (2^-8 |ref| for bf16, 2^-11 |ref| for f16): the float32 result
 *     rounded to nearest even once.
 * Cases: every transpose pair at shapes that cross the native tiles' edges,
 * every operand at an offset with a leading dimension past its row,
 * batches (A shared with stride 0), beta 0 over a C of NaNs (never read)
 * and beta 0.5 over a 16-bit C (widened, then narrowed again), the
 * epilogue (bias + GELU into a float32 D, C in bf16), gaps between rows of
 * C left untouched, every configuration the device lists by name (the
 * register-blocked ones widen A and B in their packing kernels, the others
 * through the conversion scratch), and the scratch: the native engine's
 * packed panels alone where it reads 16 bits directly, the conversion
 * scratch counted by clf_gemm_workspace_bytes and readied by
 * clf_gemm_prepare elsewhere.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/io/safetensors.h"
#include "runtime/gemm/gemm.h"
#include "tests/test_util.h"

/* one matrix as stored: rows x cols, row stride ld, batch stride, offset */
typedef struct mat {
    clf_dtype t;
    size_t rows, cols, ld, stride, off, n_batch, elems;
    clf_buffer *buf;
    uint16_t *h16; /* host copy as stored (16-bit types) */
    float *h32;    /* host copy as stored (float32) */
} mat;

static double value(const mat *a, size_t z, size_t i, size_t j)
{
    const size_t p = a->off + z * a->stride + i * a->ld + j;
    if (a->t == CLF_DT_F32)
        return a->h32[p];
    return a->t == CLF_DT_BF16 ? clf_bf16_to_f32(a->h16[p]) : clf_f16_to_f32(a->h16[p]);
}

static uint16_t narrow(clf_dtype t, float x)
{
    return t == CLF_DT_BF16 ? clf_f32_to_bf16(x) : clf_f32_to_f16(x);
}

/* Fill with uniform values in [-1, 1] (stored rounded), NaN where nan_fill. */
static void mat_make(clf_runtime *rt, mat *a, clf_dtype t, size_t rows, size_t cols, size_t n_batch,
                     int nan_fill, tu_rng *r)
{
    clf_error e;
    a->t = t;
    a->rows = rows;
    a->cols = cols;
    a->ld = cols + 2;
    a->stride = rows * a->ld + 5;
    a->off = 3;
    a->n_batch = n_batch;
    a->elems = a->off + n_batch * a->stride + 4;
    a->h16 = calloc(a->elems, 2);
    a->h32 = calloc(a->elems, 4);
    for (size_t i = 0; i < a->elems; i++) {
        const float v = nan_fill ? NAN : (float)tu_uniform(r, -1.0, 1.0);
        a->h32[i] = v;
        a->h16[i] = t == CLF_DT_F32 ? 0 : narrow(t, v);
    }
    tu_ok(clf_buffer_create(rt, a->elems * clf_dtype_size(t), &a->buf, &e), &e, "buffer");
    tu_ok(clf_buffer_write(rt, a->buf, 0, t == CLF_DT_F32 ? (void *)a->h32 : (void *)a->h16,
                           a->elems * clf_dtype_size(t), &e),
          &e, "write");
}

static void mat_free(mat *a)
{
    clf_buffer_destroy(a->buf);
    free(a->h16);
    free(a->h32);
}

static double gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

static double gelu_grad(double x)
{
    return 0.5 * (1.0 + erf(x / sqrt(2.0))) +
           x * exp(-0.5 * x * x) / sqrt(2.0 * 3.14159265358979323846);
}

/* Half a unit in the last place, relative, of a storage type. */
static double half_ulp(clf_dtype t)
{
    return t == CLF_DT_BF16 ? 0x1p-8 : t == CLF_DT_F16 ? 0x1p-11 : 0.0;
}

/* The epilogue of a case (batch 1): bias + GELU written to D; a residual D
 * added; GELU's derivative at D multiplied in (C in any storage: the
 * epilogue works in float32 before C is narrowed). */
enum { EPI_NONE = 0, EPI_ACT, EPI_RES, EPI_DACT };
static const char *const epi_name[] = {"", ", bias+GELU -> D", ", + D", ", * GELU'(D)"};

typedef struct gcase {
    clf_dtype ta, tb, tc;
    int trans_a, trans_b;
    size_t m, n, k, batch;
    int share_a;
    float alpha, beta;
    int epilogue; /* EPI_* */
    clf_dtype td; /* D's storage */
} gcase;

/* On engine, or (config non-NULL) on that candidate by name. */
static void run(clf_runtime *rt, clf_gemm_engine engine, const char *config, const gcase *g,
                tu_rng *r)
{
    clf_error e;
    const size_t nb = g->batch, na = g->share_a ? 1 : nb;
    mat A, B, C, D;
    mat_make(rt, &A, g->ta, g->trans_a ? g->k : g->m, g->trans_a ? g->m : g->k, na, 0, r);
    mat_make(rt, &B, g->tb, g->trans_b ? g->n : g->k, g->trans_b ? g->k : g->n, nb, 0, r);
    mat_make(rt, &C, g->tc, g->m, g->n, nb, g->beta == 0.0f, r);
    /* D: random values to read, NaNs where the epilogue writes it */
    mat_make(rt, &D, g->td, g->m, g->n, 1, g->epilogue == EPI_ACT, r);
    float *bias = malloc(g->n * 4);
    clf_buffer *bb = NULL;
    for (size_t j = 0; j < g->n; j++)
        bias[j] = (float)tu_uniform(r, -0.5, 0.5);
    tu_ok(clf_buffer_create(rt, g->n * 4, &bb, &e), &e, "bias");
    tu_ok(clf_buffer_write(rt, bb, 0, bias, g->n * 4, &e), &e, "bias");
    clf_gemm_desc d = {.trans_a = g->trans_a,
                       .trans_b = g->trans_b,
                       .m = g->m,
                       .n = g->n,
                       .k = g->k,
                       .alpha = g->alpha,
                       .beta = g->beta,
                       .a = {A.buf, A.off},
                       .lda = A.ld,
                       .b = {B.buf, B.off},
                       .ldb = B.ld,
                       .c = {C.buf, C.off},
                       .ldc = C.ld,
                       .batch = nb,
                       .stride_a = g->share_a ? 0 : A.stride,
                       .stride_b = B.stride,
                       .stride_c = C.stride,
                       .a_type = g->ta,
                       .b_type = g->tb,
                       .c_type = g->tc};
    if (g->epilogue != EPI_NONE) {
        d.d = (clf_ptr){D.buf, D.off};
        d.ldd = D.ld;
        d.d_type = g->td;
    }
    if (g->epilogue == EPI_ACT)
        d.bias = (clf_ptr){bb, 0}, d.epi = CLF_GEMM_EPI_ACT, d.act = CLF_GEMM_ACT_GELU_ERF;
    if (g->epilogue == EPI_RES)
        d.epi = CLF_GEMM_EPI_RESIDUAL;
    if (g->epilogue == EPI_DACT)
        d.epi = CLF_GEMM_EPI_TIMES_DERIV, d.act = CLF_GEMM_ACT_GELU_ERF;
    tu_ok(config != NULL ? clf_gemm_with_config(rt, config, &d, &e)
                         : clf_gemm_with(rt, engine, &d, &e),
          &e, "gemm16");
    void *raw = malloc(C.elems * 4), *draw = malloc(D.elems * 4);
    tu_ok(clf_buffer_read(rt, C.buf, 0, raw, C.elems * clf_dtype_size(g->tc), &e), &e, "read C");
    tu_ok(clf_buffer_read(rt, D.buf, 0, draw, D.elems * clf_dtype_size(g->td), &e), &e, "read D");
    const double atol = 1e-5 * sqrt((double)g->k + 1.0) * fmax(1.0, fabs(g->alpha));
    double worst = 0.0, worst_d = 0.0;
    size_t gaps_bad = 0;
    for (size_t z = 0; z < nb; z++)
        for (size_t i = 0; i < g->m; i++)
            for (size_t j = 0; j < g->n; j++) {
                double s = 0.0;
                for (size_t p = 0; p < g->k; p++) {
                    const size_t za = g->share_a ? 0 : z;
                    const double a = g->trans_a ? value(&A, za, p, i) : value(&A, za, i, p);
                    const double b = g->trans_b ? value(&B, z, j, p) : value(&B, z, p, j);
                    s += a * b;
                }
                double ref = g->alpha * s + (g->beta != 0.0f ? g->beta * value(&C, z, i, j) : 0);
                double scale = 1.0; /* of the float32 error in ref */
                if (g->epilogue == EPI_ACT)
                    ref += bias[j];
                if (g->epilogue == EPI_RES)
                    ref += value(&D, 0, i, j);
                if (g->epilogue == EPI_DACT) {
                    scale = gelu_grad(value(&D, 0, i, j));
                    ref *= scale;
                }
                const size_t q = C.off + z * C.stride + i * C.ld + j;
                const double got = g->tc == CLF_DT_F32    ? ((float *)raw)[q]
                                   : g->tc == CLF_DT_BF16 ? clf_bf16_to_f32(((uint16_t *)raw)[q])
                                                          : clf_f16_to_f32(((uint16_t *)raw)[q]);
                const double tol =
                    atol * fmax(1.0, fabs(scale)) + (1e-4 + half_ulp(g->tc)) * fabs(ref);
                const double err_ = fabs(got - ref) / tol;
                worst = isnan(err_) ? INFINITY : fmax(worst, err_);
                if (g->epilogue == EPI_ACT) {
                    const size_t qd = D.off + i * D.ld + j;
                    const double gd = g->td == CLF_DT_F32 ? ((float *)draw)[qd]
                                      : g->td == CLF_DT_BF16
                                          ? clf_bf16_to_f32(((uint16_t *)draw)[qd])
                                          : clf_f16_to_f32(((uint16_t *)draw)[qd]);
                    const double want = gelu(ref);
                    const double dd =
                        fabs(gd - want) / (atol + 1e-4 * fabs(ref) + half_ulp(g->td) * fabs(want));
                    worst_d = isnan(dd) ? INFINITY : fmax(worst_d, dd);
                }
            }
    /* the gaps of C (between rows, between matrices, around) are untouched,
     * and a D that is only read is unchanged */
    for (size_t q = 0; q < C.elems; q++) {
        const size_t w = q < C.off ? 0 : (q - C.off) % C.stride,
                     z = q < C.off ? nb : (q - C.off) / C.stride;
        const int inside = q >= C.off && z < nb && w / C.ld < g->m && w % C.ld < g->n;
        if (inside)
            continue;
        gaps_bad += g->tc == CLF_DT_F32 ? memcmp((float *)raw + q, C.h32 + q, 4) != 0
                                        : ((uint16_t *)raw)[q] != C.h16[q];
    }
    if (g->epilogue == EPI_RES || g->epilogue == EPI_DACT)
        gaps_bad += memcmp(draw, g->td == CLF_DT_F32 ? (void *)D.h32 : (void *)D.h16,
                           D.elems * clf_dtype_size(g->td)) != 0;
    char name[240];
    snprintf(name, sizeof name, "%s A %s%s B %s%s C %s: %zux%zux%zu batch %zu%s beta %g%s%s%s",
             config != NULL ? config : clf_gemm_engine_name(engine), clf_dtype_name(g->ta),
             g->trans_a ? "^T" : "", clf_dtype_name(g->tb), g->trans_b ? "^T" : "",
             clf_dtype_name(g->tc), g->m, g->n, g->k, nb, g->share_a ? " (A shared)" : "",
             (double)g->beta, epi_name[g->epilogue], g->epilogue ? " D " : "",
             g->epilogue ? clf_dtype_name(g->td) : "");
    TU_CHECK(worst <= 1.0 && worst_d <= 1.0 && gaps_bad == 0,
             "%s (worst %.3f of the tolerance, D %.3f, %zu gap elements written)", name, worst,
             worst_d, gaps_bad);
    free(raw);
    free(draw);
    free(bias);
    clf_buffer_destroy(bb);
    mat_free(&A);
    mat_free(&B);
    mat_free(&C);
    mat_free(&D);
}

/* A runtime of the test's device forced onto one engine. */
static clf_runtime *runtime_on(clf_gemm_engine engine)
{
    clf_error e;
    clf_runtime_options o = tu_options();
    o.cache_dir = getenv("CLFORMER_CACHE_DIR");
    o.gemm = engine;
    clf_runtime *rt = NULL;
    tu_ok(clf_runtime_create(&rt, &o, &e), &e, "a runtime on one engine");
    return rt;
}

/* C [300, 300] (stored as tc) = A [300, 200] A^T, A in bf16: buffers made
 * here, nothing written (prepare reads no values). */
static clf_gemm_desc desc300(clf_runtime *rt, clf_buffer **a, clf_buffer **c, clf_dtype tc)
{
    clf_error e;
    tu_ok(clf_buffer_create(rt, 300 * 200 * 2, a, &e), &e, "buffer");
    tu_ok(clf_buffer_create(rt, 300 * 300 * clf_dtype_size(tc), c, &e), &e, "buffer");
    return (clf_gemm_desc){.trans_b = 1,
                           .m = 300,
                           .n = 300,
                           .k = 200,
                           .alpha = 1.0f,
                           .a = {*a, 0},
                           .lda = 200,
                           .b = {*a, 0},
                           .ldb = 200,
                           .c = {*c, 0},
                           .ldc = 300,
                           .a_type = CLF_DT_BF16,
                           .b_type = CLF_DT_BF16,
                           .c_type = tc};
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng r = tu_rng_new(16);
    const int sim = tu_simulator();
    const size_t shapes[][3] = {{7, 13, 5}, {33, 65, 17}, {64, 48, 128}};
    const size_t n_shapes = sim ? 2 : 3;
    const clf_dtype types[][3] = {
        {CLF_DT_BF16, CLF_DT_BF16, CLF_DT_F32},  {CLF_DT_F16, CLF_DT_F16, CLF_DT_F32},
        {CLF_DT_BF16, CLF_DT_F32, CLF_DT_BF16},  {CLF_DT_F32, CLF_DT_F16, CLF_DT_F16},
        {CLF_DT_BF16, CLF_DT_BF16, CLF_DT_BF16},
    };
    const clf_gemm_engine engines[] = {CLF_GEMM_NATIVE, CLF_GEMM_CLBLAST};
    for (size_t en = 0; en < (sim ? 1u : 2u); en++)
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
            for (int tr = 0; tr < 4; tr++)
                for (size_t s = 0; s < n_shapes; s++) {
                    gcase g = {.ta = types[t][0],
                               .tb = types[t][1],
                               .tc = types[t][2],
                               .trans_a = tr & 1,
                               .trans_b = tr >> 1,
                               .m = shapes[s][0],
                               .n = shapes[s][1],
                               .k = shapes[s][2],
                               .batch = 1,
                               .alpha = 0.75f,
                               .beta = (s + (size_t)tr) % 2 ? 0.5f : 0.0f};
                    run(rt, engines[en], NULL, &g, &r);
                }
    /* batches, A shared; the epilogue with a bf16 C */
    for (size_t en = 0; en < (sim ? 1u : 2u); en++) {
        gcase b = {CLF_DT_F16, CLF_DT_BF16, CLF_DT_BF16, 0, 1, 9, 11, 21, 3, 1, 1.0f, 0.5f, 0, 0};
        run(rt, engines[en], NULL, &b, &r);
        gcase ep = {CLF_DT_BF16, CLF_DT_BF16, CLF_DT_BF16, 0,    1,    17, 40,
                    24,          1,           0,           1.0f, 0.0f, 1,  0};
        run(rt, engines[en], NULL, &ep, &r);
    }
    /* a 16-bit D: written by an activation, read by a residual and by an
     * activation's derivative, into a 16-bit C (float32 C for the
     * activation on float32 operands), on both engines, through 16-bit or
     * float32 operands, in the register blocks, the few-row kernel,
     * split-K's reduction and CLBlast's epilogue pass. GELU' at an f16 D
     * into an f16 C from float32 operands is train.precision fp16's FFN
     * backward. */
    for (size_t en = 0; en < (sim ? 1u : 2u); en++)
        for (int mode = EPI_ACT; mode <= EPI_DACT; mode++)
            for (int v = 0; v < 2; v++) {
                const clf_dtype td = v ? CLF_DT_F16 : CLF_DT_BF16;
                const clf_dtype tab = v ? CLF_DT_F32 : CLF_DT_BF16;
                const clf_dtype tc = !v ? CLF_DT_BF16 : mode == EPI_ACT ? CLF_DT_F32 : CLF_DT_F16;
                /* v = 1: few rows against a transposed B (the dot-product kernel) */
                gcase g = {tab, tab, tc, !v, 1, 29, 53, sim ? 9 : 40, 1, 0, 0.5f, 0.0f, mode, td};
                run(rt, engines[en], NULL, &g, &r);
            }
    if (!sim) {
        /* split-K (a 1-tile output, deep) reads a bf16 D in its reduction;
         * a deep product into a bf16 C runs in one pass (no slices rounded
         * into C) */
        gcase sk = {CLF_DT_F32, CLF_DT_F32, CLF_DT_F32, 1,    0,    9,       20,
                    2048,       1,          0,          1.0f, 0.0f, EPI_RES, CLF_DT_BF16};
        run(rt, CLF_GEMM_NATIVE, NULL, &sk, &r);
        gcase deep = {CLF_DT_BF16, CLF_DT_BF16, CLF_DT_BF16, 0,    0,    40,      70,
                      1500,        1,           0,           1.0f, 0.0f, EPI_ACT, CLF_DT_BF16};
        run(rt, CLF_GEMM_NATIVE, NULL, &deep, &r);
    }
    /* every configuration the device lists: the register-blocked ones read
     * the 16-bit A and B in their packing, the others through the
     * conversion scratch; edges, every transpose, a batch with A shared */
    {
        clf_error e;
        const char *const *names = NULL;
        size_t count = 0;
        tu_ok(clf_gemm_candidates(rt, &names, &count, NULL, &e), &e, "candidates");
        const clf_dtype ct[][3] = {{CLF_DT_BF16, CLF_DT_F16, CLF_DT_F32},
                                   {CLF_DT_F16, CLF_DT_BF16, CLF_DT_BF16}};
        int runs[CLF_GEMM_MAX_CANDIDATES + 1] = {0};
        for (size_t c = 1; c < count; c++)
            runs[c] = tu_gemm_config_runs(rt, names[c]);
        TU_CHECK(count > 1 && runs[1], "the first configuration (the default) runs: %s",
                 count > 1 ? names[1] : "(none)");
        for (size_t c = 1; c < count; c++)
            for (int tr = 0; tr < 4 && runs[c]; tr++) {
                /* tr 2: bias + GELU into an f16 D; tr 3: GELU' at a bf16 D
                 * into a bf16 C */
                const int row = tr == 1 || tr == 3;
                gcase g = {.ta = ct[row][0],
                           .tb = ct[row][1],
                           .tc = ct[row][2],
                           .trans_a = tr & 1,
                           .trans_b = tr >> 1,
                           .m = 37,
                           .n = 70,
                           .k = sim ? 9 : 35,
                           .batch = 1,
                           .alpha = 0.5f,
                           .beta = tr == 1 ? 0.5f : 0.0f,
                           .epilogue = tr == 2   ? EPI_ACT
                                       : tr == 3 ? EPI_DACT
                                                 : EPI_NONE,
                           .td = tr == 2 ? CLF_DT_F16 : CLF_DT_BF16};
                run(rt, CLF_GEMM_AUTO, names[c], &g, &r);
            }
        for (size_t c = 1; c < count && !sim; c++) {
            if (!runs[c])
                continue;
            gcase b = {CLF_DT_BF16, CLF_DT_BF16, CLF_DT_F32, 1,    0,    13, 50,
                       19,          3,           1,          1.0f, 0.0f, 0,  0};
            run(rt, CLF_GEMM_AUTO, names[c], &b, &r);
        }
    }
    /* the native engine reads a 16-bit A and B in its packing: the
     * workspace is the packed float32 panels alone (at most a tile's rows
     * and columns past 300 x 200 each), not a widened copy besides them
     * (the conversion path needs 2 x 300 x 200 floats more) */
    {
        clf_runtime *nrt = runtime_on(CLF_GEMM_NATIVE);
        clf_buffer *a = NULL, *c = NULL;
        const clf_gemm_desc d = desc300(nrt, &a, &c, CLF_DT_F32);
        clf_error e;
        tu_ok(clf_gemm_prepare(nrt, &d, &e), &e, "prepare");
        const size_t ws = clf_gemm_workspace_bytes(nrt);
        TU_CHECK(ws >= 2 * 300 * 200 * 4 && ws <= (2 * 300 + 16 + 64) * 200 * 4,
                 "native on a bf16 A and B: %zu bytes of workspace, the packed panels alone", ws);
        clf_buffer_destroy(a);
        clf_buffer_destroy(c);
        clf_runtime_destroy(nrt);
    }
    /* the conversion scratch (CLBlast reads float32 only): readied by
     * prepare, counted as workspace */
    {
        clf_runtime *crt = runtime_on(CLF_GEMM_CLBLAST);
        clf_buffer *a = NULL, *c = NULL;
        const clf_gemm_desc d = desc300(crt, &a, &c, CLF_DT_BF16);
        clf_error e;
        const size_t before = clf_gemm_workspace_bytes(crt);
        tu_ok(clf_gemm_prepare(crt, &d, &e), &e, "prepare");
        const size_t after = clf_gemm_workspace_bytes(crt);
        TU_CHECK(after >= before && after >= (2 * 300 * 200 + 300 * 300) * 4,
                 "prepare sizes the conversion scratch (%zu bytes of workspace, was %zu)", after,
                 before);
        clf_gemm_engine pick;
        TU_CHECK(clf_gemm_choose(crt, &d, &pick, &e) == CLF_ERR_UNSUPPORTED,
                 "the choice is asked with the float32 twin: %s", e.msg);
        clf_buffer_destroy(a);
        clf_buffer_destroy(c);
        clf_runtime_destroy(crt);
    }
    clf_runtime_destroy(rt);
    return tu_finish();
}
