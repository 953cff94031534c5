/*
 * bench/gemm.c - GFLOP/s of CLBlast, of the native engine's configurations
 * and of OpenBLAS at Transformer shapes, with the ratios, the fastest native
 * configuration and what auto picks (the search's choice for the shape).
 *
 *   build/bench/gemm [--device SEL] [--reps N] [--blas-threads N] [--quick]
 *                    [--no-cache] [--configs] [--shape OP,M,K,N[,BATCH] ...]
 *                    [--list-shapes] [--peer FILE ...]
 *
 * Each candidate runs once to warm up (kernel compilation, scratch sizing),
 * then N timed rounds (default 5) in which CLBlast, each native
 * configuration the device searches and OpenBLAS take turns, so that on a
 * shared machine all three see the same load; each device sample is
 * followed by clf_runtime_finish; medians are reported. A product shorter
 * than 10 ms runs several times back to back in each sample (the same
 * count on every side): timed one at a time, a 0.4 ms product measured
 * anywhere from 75% to 114% of OpenBLAS in three runs on an idle 2-core
 * Xeon, its time mostly that of threads waking. OpenBLAS (cblas_sgemm,
 * when built with it) runs on the same shapes in the same process with 2
 * threads by default. The native
 * result is compared with OpenBLAS's (or CLBlast's) as a sanity check.
 * Shapes are M x K x N with op(A) M x K and op(B) K x N, row-major; "TN" is
 * a transposed A (weight gradients, dW = X^T dY), "NT" a transposed B
 * (input gradients dX = dY W^T, attention scores Q K^T). --shape (any number
 * of times) replaces the table with the shapes given, e.g. --shape
 * NN,2048,1024,256 (a model's own products, from its --profile).
 * --configs prints, under each shape, every native configuration's GFLOP/s
 * (what pruning or extending the search's list is decided from).
 * --list-shapes prints the shapes (OP,M,K,N,BATCH, one per line) and exits;
 * --peer FILE adds a column of another library's GFLOP/s on them, read from
 * bench/torch_gemm.py's JSON lines (MKL through PyTorch from PyPI, say:
 * bench/run_all.sh does this), with native's share of it. The peer ran
 * before this process, in the same run, not interleaved with the others.
 *
 * Not here: correctness testing (tests/test_gemm.c does that).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/gemm/gemm.h"
#include "runtime/runtime.h"
#include "runtime/util.h"

#ifdef CLF_HAVE_OPENBLAS
#include <cblas.h>
#endif

typedef struct shape {
    const char *what;
    int ta, tb;
    size_t m, k, n, batch;
} shape;

static const shape table[] = {
    {"attn proj, T=768 C=128 -> 512", 0, 0, 768, 128, 512, 1},
    {"MLP in, BT=4096 C=256 -> 1024", 0, 0, 4096, 256, 1024, 1},
    {"MLP in, BT=4096 C=768 -> 3072", 0, 0, 4096, 768, 3072, 1},
    {"logits, BT=4096 C=256 -> V=4096", 0, 0, 4096, 256, 4096, 1},
    {"MLP out, T=768 512 -> 128", 0, 0, 768, 512, 128, 1},
    {"logits, T=512 C=768 -> V=50257", 0, 0, 512, 768, 50257, 1},
    {"dW = X^T dY (768x4096 . 4096x3072)", 1, 0, 768, 4096, 3072, 1},
    {"dX = dY W^T (4096x3072 . 3072x768)", 0, 1, 4096, 3072, 768, 1},
    {"dW = X^T dY (256x4096 . 4096x1024)", 1, 0, 256, 4096, 1024, 1},
    {"dX = dY W^T (4096x1024 . 1024x256)", 0, 1, 4096, 1024, 256, 1},
    {"fwd, W as [out,in]: 4096x256 . 1024x256^T", 0, 1, 4096, 256, 1024, 1},
    {"attn Q K^T, 64 heads, T=128 hs=64", 0, 1, 128, 64, 128, 64},
    {"attn P V, 64 heads, T=128 hs=64", 0, 0, 128, 128, 64, 64},
    {"decode MLP, 1 token: 768 -> 3072", 0, 0, 1, 768, 3072, 1},
    {"decode logits, 1 token, W [V,C]: V=50257", 0, 1, 1, 768, 50257, 1},
};
#define N_TABLE (sizeof table / sizeof table[0])
#define MAX_SHAPES 32
#define MAX_PEERS 4
#define INNER_SECONDS 0.01 /* a timed sample lasts at least this long ... */
#define INNER_MAX 64       /* ... in at most this many products */

/* "OP,M,K,N[,BATCH]" (OP: NN, NT, TN or TT) into *sh; 0 if malformed. */
static int parse_shape(const char *s, shape *sh)
{
    char op[3] = {0};
    unsigned long m = 0, k = 0, n = 0, b = 1;
    char tail = 0;
    const int got = sscanf(s, "%2[NT],%lu,%lu,%lu,%lu%c", op, &m, &k, &n, &b, &tail);
    if ((got != 4 && got != 5) || strlen(op) != 2 || m == 0 || k == 0 || n == 0 || b == 0)
        return 0;
    *sh = (shape){"--shape", op[0] == 'T', op[1] == 'T', m, k, n, b};
    return 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static void die(const char *what, const clf_error *err)
{
    char buf[CLF_ERROR_MSG_MAX + 256];
    clf_error_format(err, buf, sizeof buf);
    fprintf(stderr, "bench/gemm: %s: %s\n", what, buf);
    exit(1);
}

/* Seconds per product of `inner` products run back to back on candidate
 * `name` ("clblast" or a native configuration) and then synchronised, or -1
 * on failure (reported). */
static double time_once(clf_runtime *rt, const char *name, const clf_gemm_desc *d, int inner)
{
    clf_error err;
    if (clf_runtime_finish(rt, &err) != CLF_OK)
        die("finish", &err);
    const double t0 = clf_now_seconds();
    for (int i = 0; i < inner; i++)
        if (clf_gemm_with_config(rt, name, d, &err) != CLF_OK) {
            char buf[CLF_ERROR_MSG_MAX + 256];
            clf_error_format(&err, buf, sizeof buf);
            fprintf(stderr, "bench/gemm: %s failed: %s\n", name, buf);
            return -1.0;
        }
    if (clf_runtime_finish(rt, &err) != CLF_OK)
        die("finish", &err);
    return (clf_now_seconds() - t0) / inner;
}

#ifdef CLF_HAVE_OPENBLAS
static double time_openblas(const shape *sh, const float *a, const float *b, float *c, int inner)
{
    const size_t ar = sh->ta ? sh->k : sh->m, ac = sh->ta ? sh->m : sh->k;
    const size_t br = sh->tb ? sh->n : sh->k, bc = sh->tb ? sh->k : sh->n;
    const double t0 = clf_now_seconds();
    for (int i = 0; i < inner; i++)
        for (size_t z = 0; z < sh->batch; z++)
            cblas_sgemm(CblasRowMajor, sh->ta ? CblasTrans : CblasNoTrans,
                        sh->tb ? CblasTrans : CblasNoTrans, (int)sh->m, (int)sh->n, (int)sh->k,
                        1.0f, a + z * ar * ac, (int)ac, b + z * br * bc, (int)bc, 0.0f,
                        c + z * sh->m * sh->n, (int)sh->n);
    return (clf_now_seconds() - t0) / inner;
}
#endif

static void fill(float *x, size_t n, unsigned *seed)
{
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        x[i] = (float)((*seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

static double max_rel_diff(const float *x, const float *y, size_t n)
{
    double md = 0.0, mx = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        if (!(d <= md))
            md = d;
        if (fabs((double)y[i]) > mx)
            mx = fabs((double)y[i]);
    }
    return mx > 0 ? md / mx : md;
}

static void usage(void)
{
    fprintf(stderr, "usage: gemm [--device SEL] [--reps N] [--blas-threads N] [--quick] "
                    "[--no-cache] [--configs] [--shape OP,M,K,N[,BATCH] ...] [--list-shapes] "
                    "[--peer FILE ...]\n");
}

/* The run: the device, its candidates, the options. */
/* Another library's figures, from bench/torch_gemm.py's JSON lines. */
typedef struct peer {
    char name[32]; /* its "blas" line: mkl, openblas/other, cublas */
    char shape[MAX_SHAPES][48];
    double gflops[MAX_SHAPES];
    size_t n;
} peer;

typedef struct bench {
    clf_runtime *rt;
    peer peers[MAX_PEERS];
    size_t n_peers;
    const char *const *names; /* names[0] clblast, then the native configurations searched */
    size_t n_cand;
    int reps, quick, all_configs;
    double peak;
} bench;

/* "OP,M,K,N,BATCH" of sh into buf. */
static void shape_key(const shape *sh, char *buf, size_t len)
{
    snprintf(buf, len, "%c%c,%zu,%zu,%zu,%zu", sh->ta ? 'T' : 'N', sh->tb ? 'T' : 'N', sh->m, sh->k,
             sh->n, sh->batch);
}

/* A peer's JSON lines ({"shape": "NN,M,K,N,B", "gflops": G} per shape, a
 * {"blas": NAME} line) into *p; 0 with a message if unreadable. */
static int read_peer(const char *path, peer *p)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "gemm: --peer %s: cannot open it\n", path);
        return 0;
    }
    char line[512];
    snprintf(p->name, sizeof p->name, "peer");
    p->n = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        const char *b = strstr(line, "\"blas\": \"");
        const char *s = strstr(line, "\"shape\": \""), *g = strstr(line, "\"gflops\": ");
        if (b != NULL)
            sscanf(b + 9, "%31[^\"]", p->name);
        if (s != NULL && g != NULL && p->n < MAX_SHAPES &&
            sscanf(s + 10, "%47[^\"]", p->shape[p->n]) == 1 &&
            sscanf(g + 10, "%lf", &p->gflops[p->n]) == 1)
            p->n++;
    }
    fclose(f);
    if (p->n == 0)
        fprintf(stderr, "gemm: --peer %s: no {\"shape\": ..., \"gflops\": ...} lines\n", path);
    return p->n > 0;
}

/* The peer's GFLOP/s on sh (its shape written with or without ",1"); < 0 if absent. */
static double peer_gflops(const peer *p, const shape *sh)
{
    char key[48], key1[48];
    shape_key(sh, key, sizeof key);
    snprintf(key1, sizeof key1, "%s", key);
    if (sh->batch == 1)
        key1[strlen(key1) - 2] = 0;
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->shape[i], key) == 0 || strcmp(p->shape[i], key1) == 0)
            return p->gflops[i];
    return -1.0;
}

/* Every candidate and OpenBLAS on d (A = a, B = b on the host; OpenBLAS
 * writes c_ref): a warm-up, then turns so that they see the same load on a
 * shared machine; the medians into t_c (< 0: did not run) and *t_ob. */
static void time_all(const bench *bn, const clf_gemm_desc *d, const shape *sh, const float *a,
                     const float *b, float *c_ref, double *t_c, double *t_ob)
{
    double tt[CLF_GEMM_MAX_CANDIDATES][64], to[64];
    for (size_t c = 0; c < bn->n_cand; c++)
        t_c[c] = time_once(bn->rt, bn->names[c], d, 1);
    *t_ob = -1.0;
#ifdef CLF_HAVE_OPENBLAS
    *t_ob = time_openblas(sh, a, b, c_ref, 1);
#else
    (void)sh, (void)a, (void)b, (void)c_ref;
#endif
    /* products shorter than INNER_SECONDS run several times back to back
     * per timed sample (every side the same count): one at a time, a
     * sub-millisecond product's time is mostly its threads waking */
    int inner = 1;
    const double probe =
        bn->n_cand > 1 && t_c[1] > 0 ? time_once(bn->rt, bn->names[1], d, 1) : -1.0;
    if (probe > 0 && probe < INNER_SECONDS)
        inner = probe * INNER_MAX > INNER_SECONDS ? (int)(INNER_SECONDS / probe) + 1 : INNER_MAX;
    for (int r = 0; r < bn->reps; r++) {
        for (size_t c = 0; c < bn->n_cand; c++)
            if (t_c[c] > 0)
                tt[c][r] = time_once(bn->rt, bn->names[c], d, inner);
#ifdef CLF_HAVE_OPENBLAS
        to[r] = time_openblas(sh, a, b, c_ref, inner);
#else
        to[r] = -1.0;
#endif
    }
    for (size_t c = 0; c < bn->n_cand; c++)
        if (t_c[c] > 0)
            t_c[c] = median(tt[c], bn->reps);
    if (*t_ob > 0)
        *t_ob = median(to, bn->reps);
}

/* One row of the table: the shape, GFLOP/s of each side, the ratios, the
 * best native configuration, auto's choice and the check. */
static void print_row(const bench *bn, const shape *sh, const double *t_c, size_t best, double t_ob,
                      const char *chosen, const char *check)
{
    const double flops = 2.0 * (double)sh->m * sh->n * sh->k * sh->batch;
    const double t_clb = t_c[0], t_nat = best > 0 ? t_c[best] : -1.0;
    char op[3] = {sh->ta ? 'T' : 'N', sh->tb ? 'T' : 'N', 0};
    char g_clb[16] = "-", g_nat[16] = "-", g_ob[16] = "-", r_nat[16] = "-", r_clb[16] = "-";
    char p_nat[16] = "-";
    if (t_nat > 0 && bn->peak > 0)
        snprintf(p_nat, sizeof p_nat, "%.0f%%", 100.0 * flops / t_nat * 1e-9 / bn->peak);
    if (t_clb > 0)
        snprintf(g_clb, sizeof g_clb, "%.1f", flops / t_clb * 1e-9);
    if (t_nat > 0)
        snprintf(g_nat, sizeof g_nat, "%.1f", flops / t_nat * 1e-9);
    if (t_ob > 0)
        snprintf(g_ob, sizeof g_ob, "%.1f", flops / t_ob * 1e-9);
    if (t_ob > 0 && t_nat > 0)
        snprintf(r_nat, sizeof r_nat, "%.0f%%", 100.0 * t_ob / t_nat);
    if (t_ob > 0 && t_clb > 0)
        snprintf(r_clb, sizeof r_clb, "%.0f%%", 100.0 * t_ob / t_clb);
    printf("%-42s %-2s %5zu %5zu %6zu %5zu | %8s %8s %8s | %7s %7s %6s |", sh->what, op, sh->m,
           sh->k, sh->n, sh->batch, g_clb, g_nat, g_ob, r_nat, r_clb, p_nat);
    for (size_t p = 0; p < bn->n_peers; p++) {
        const double g = peer_gflops(&bn->peers[p], sh);
        char g_p[16] = "-", r_p[16] = "-";
        if (g > 0)
            snprintf(g_p, sizeof g_p, "%.1f", g);
        if (g > 0 && t_nat > 0)
            snprintf(r_p, sizeof r_p, "%.0f%%", 100.0 * flops / t_nat * 1e-9 / g);
        printf(" %8s %7s |", g_p, r_p);
    }
    printf(" %-14s %-14s %s\n", best > 0 ? bn->names[best] : "-", chosen, check);
    if (bn->all_configs) {
        printf("    ");
        for (size_t c = 1; c < bn->n_cand; c++)
            if (t_c[c] > 0)
                printf(" %s %.1f%s", bn->names[c], flops / t_c[c] * 1e-9, c == best ? "*" : "");
        printf("\n");
    }
    fflush(stdout);
}

/* One shape: random operands on the device, every side timed, the best
 * native result checked against OpenBLAS (or CLBlast without it). */
static void bench_shape(const bench *bn, const shape *sh, unsigned *seed)
{
    clf_runtime *rt = bn->rt;
    clf_error err;
    const size_t ar = sh->ta ? sh->k : sh->m, ac = sh->ta ? sh->m : sh->k;
    const size_t br = sh->tb ? sh->n : sh->k, bc = sh->tb ? sh->k : sh->n;
    const size_t na = ar * ac * sh->batch, nb = br * bc * sh->batch, nc = sh->m * sh->n * sh->batch;
    float *a = malloc(na * sizeof(float)), *b = malloc(nb * sizeof(float));
    float *c_nat = malloc(nc * sizeof(float)), *c_ref = malloc(nc * sizeof(float));
    if (a == NULL || b == NULL || c_nat == NULL || c_ref == NULL) {
        fprintf(stderr, "bench/gemm: out of host memory\n");
        exit(1);
    }
    fill(a, na, seed);
    fill(b, nb, seed);
    clf_buffer *da = NULL, *db = NULL, *dc = NULL;
    if (clf_buffer_create(rt, na * sizeof(float), &da, &err) != CLF_OK ||
        clf_buffer_create(rt, nb * sizeof(float), &db, &err) != CLF_OK ||
        clf_buffer_create(rt, nc * sizeof(float), &dc, &err) != CLF_OK ||
        clf_buffer_write(rt, da, 0, a, na * sizeof(float), &err) != CLF_OK ||
        clf_buffer_write(rt, db, 0, b, nb * sizeof(float), &err) != CLF_OK)
        die("uploading", &err);
    const clf_gemm_desc d = {.trans_a = sh->ta,
                             .trans_b = sh->tb,
                             .m = sh->m,
                             .n = sh->n,
                             .k = sh->k,
                             .alpha = 1.0f,
                             .beta = 0.0f,
                             .a = {da, 0},
                             .lda = ac,
                             .b = {db, 0},
                             .ldb = bc,
                             .c = {dc, 0},
                             .ldc = sh->n,
                             .batch = sh->batch,
                             .stride_a = ar * ac,
                             .stride_b = br * bc,
                             .stride_c = sh->m * sh->n};
    double t_c[CLF_GEMM_MAX_CANDIDATES], t_ob = -1.0;
    time_all(bn, &d, sh, a, b, c_ref, t_c, &t_ob);
    size_t best = 0; /* the fastest native configuration (0: none ran) */
    for (size_t c = 1; c < bn->n_cand; c++)
        if (t_c[c] > 0 && (best == 0 || t_c[c] < t_c[best]))
            best = c;
    const double t_clb = t_c[0], t_nat = best > 0 ? t_c[best] : -1.0;
    if (t_nat > 0 && (time_once(rt, bn->names[best], &d, 1) < 0 ||
                      clf_buffer_read(rt, dc, 0, c_nat, nc * sizeof(float), &err) != CLF_OK))
        die("downloading", &err);
#ifndef CLF_HAVE_OPENBLAS
    /* no CPU BLAS: check against CLBlast */
    if (t_clb > 0 && time_once(rt, "clblast", &d, 1) > 0 &&
        clf_buffer_read(rt, dc, 0, c_ref, nc * sizeof(float), &err) != CLF_OK)
        die("downloading", &err);
#endif
    const char *chosen = "?";
    if (clf_gemm_choice(rt, &d, &chosen, &err) != CLF_OK)
        die("choosing", &err);
    char check[64] = "-";
    if (t_nat > 0 && (t_clb > 0 || t_ob > 0))
        snprintf(check, sizeof check, "%.1e", max_rel_diff(c_nat, c_ref, nc));
    print_row(bn, sh, t_c, best, t_ob, chosen, check);
    clf_buffer_destroy(da);
    clf_buffer_destroy(db);
    clf_buffer_destroy(dc);
    free(a);
    free(b);
    free(c_nat);
    free(c_ref);
}

/* The device and the BLAS beside it, the measured peak, the candidates,
 * the table's header. */
static void print_header(bench *bn, int blas_threads)
{
    clf_error err;
    const clf_device_info *dev = clf_runtime_device(bn->rt);
    printf("device: %s (%s, %u compute units, driver %s)\n", dev->name, dev->platform,
           dev->compute_units, dev->driver_version);
#ifdef CLF_HAVE_OPENBLAS
    openblas_set_num_threads(blas_threads);
    printf("OpenBLAS: %d threads, core %s (%s)\n", openblas_get_num_threads(),
           openblas_get_corename(), openblas_get_config());
    const char *core = openblas_get_corename();
    if (core != NULL && (strcmp(core, "Prescott") == 0 || strcmp(core, "Core2") == 0 ||
                         strcmp(core, "Nehalem") == 0 || strcmp(core, "Katmai") == 0))
        printf("note: OpenBLAS fell back to a generic SSE kernel (it does not recognise this "
               "CPU);\n      for its AVX-512/AVX2 kernels rerun with OPENBLAS_CORETYPE=SkylakeX "
               "or OPENBLAS_CORETYPE=Haswell\n");
#else
    (void)blas_threads;
    printf("OpenBLAS: not built in (install libopenblas-dev and reconfigure)\n");
#endif
    if (clf_runtime_peak_gflops(bn->rt, &bn->peak, &err) != CLF_OK)
        die("measuring the peak", &err);
    printf("median of %d runs after a warm-up; GFLOP/s = 2*M*N*K*batch / time; the device's "
           "measured fp32 FMA peak %.1f GFLOP/s (peak%%: native's share of it)\n\n",
           bn->reps, bn->peak);
    size_t n_all = 0;
    if (clf_gemm_candidates(bn->rt, &bn->names, &n_all, &bn->n_cand, &err) != CLF_OK)
        die("listing the GEMM candidates", &err);
    printf("native configurations timed: ");
    for (size_t c = 1; c < bn->n_cand; c++)
        printf("%s%s", c > 1 ? ", " : "", bn->names[c]);
    printf(" (the best per shape is reported as native)\n");
    for (size_t p = 0; p < bn->n_peers; p++)
        printf("peer %s: %zu shapes from bench/torch_gemm.py (nat/%.3s: native's share of it)\n",
               bn->peers[p].name, bn->peers[p].n, bn->peers[p].name);
    printf("%-42s %-2s %5s %5s %6s %5s | %8s %8s %8s | %7s %7s %6s |", "shape", "op", "M", "K", "N",
           "batch", "clblast", "native", "openblas", "nat/ob", "clb/ob", "peak%");
    for (size_t p = 0; p < bn->n_peers; p++) {
        char r[16];
        snprintf(r, sizeof r, "nat/%.3s", bn->peers[p].name);
        printf(" %8.8s %7s |", bn->peers[p].name, r);
    }
    printf(" %-14s %-14s %s\n", "best native", "auto", "check");
}

int main(int argc, char **argv)
{
    const char *device = getenv("CLFORMER_DEVICE");
    int blas_threads = 2, no_cache = 0, list = 0;
    static bench bn = {.reps = 5};
    shape given[MAX_SHAPES];
    size_t n_given = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
            device = argv[++i];
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            bn.reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--blas-threads") == 0 && i + 1 < argc)
            blas_threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--quick") == 0)
            bn.quick = 1;
        else if (strcmp(argv[i], "--configs") == 0)
            bn.all_configs = 1;
        else if (strcmp(argv[i], "--no-cache") == 0)
            no_cache = 1;
        else if (strcmp(argv[i], "--list-shapes") == 0)
            list = 1;
        else if (strcmp(argv[i], "--peer") == 0 && i + 1 < argc) {
            if (bn.n_peers == MAX_PEERS) {
                fprintf(stderr, "gemm: at most %d --peer files\n", MAX_PEERS);
                return 2;
            }
            if (!read_peer(argv[++i], &bn.peers[bn.n_peers++]))
                return 2;
        } else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
            if (n_given == MAX_SHAPES || !parse_shape(argv[++i], &given[n_given++])) {
                fprintf(stderr,
                        "gemm: --shape '%s': expected OP,M,K,N[,BATCH] with OP one of "
                        "NN NT TN TT and positive sizes (at most %d shapes)\n",
                        argv[i], MAX_SHAPES);
                return 2;
            }
        } else {
            usage();
            return 2;
        }
    }
    if (bn.reps < 1 || bn.reps > 64 || blas_threads < 1) {
        usage();
        return 2;
    }
    const shape *shapes = n_given ? given : table;
    const size_t n_shapes = n_given ? n_given : N_TABLE;
    if (list) {
        for (size_t s = 0; s < n_shapes; s++) {
            char key[48];
            shape_key(&shapes[s], key, sizeof key);
            if (!(bn.quick &&
                  (double)shapes[s].m * shapes[s].n * shapes[s].k * shapes[s].batch > 4e9))
                printf("%s\n", key);
        }
        return 0;
    }
    char cache_dir[1024];
    clf_cache_dir_default(getenv("CLFORMER_CACHE_DIR"), getenv("XDG_CACHE_HOME"), getenv("HOME"),
                          cache_dir, sizeof cache_dir);
    clf_runtime_options o = clf_runtime_options_default();
    o.device = device;
    o.cache_dir = cache_dir[0] ? cache_dir : NULL;
    o.no_cache = no_cache;
    o.kernel_dir = getenv("CLFORMER_KERNEL_DIR"); /* as the CLI: kernel development */
    if (!clf_binaries_parse(getenv("CLFORMER_KERNEL_BINARIES"), &o.binaries)) {
        fprintf(stderr, "bench/gemm: CLFORMER_KERNEL_BINARIES: expected keep or notes\n");
        return 2;
    }
    o.gemm = CLF_GEMM_AUTO;
    clf_error err;
    if (clf_runtime_create(&bn.rt, &o, &err) != CLF_OK)
        die("opening the device", &err);
    print_header(&bn, blas_threads);
    unsigned seed = 12345u;
    for (size_t s = 0; s < n_shapes; s++)
        if (!(bn.quick && (double)shapes[s].m * shapes[s].n * shapes[s].k * shapes[s].batch > 4e9))
            bench_shape(&bn, &shapes[s], &seed);
    clf_runtime_destroy(bn.rt);
    return 0;
}
