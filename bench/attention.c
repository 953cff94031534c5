/*
 * bench/attention.c - causal self-attention forward + backward: the fused
 * kernels (cl/flash/) against PyTorch's attention on the same machine, in
 * the same run. (The materialised path, head split, batched GEMMs, a T x T
 * softmax and head merge, what the model ran before issue 10, was measured
 * against them then: docs/design.md; its ops are gone.)
 *
 *   build/bench/attention [--device SEL] [--reps N] [--tokens N] [--heads N]
 *                         [--head-size N] [--T "128 256 ..."] [--no-torch]
 *                         [--profile] [--python PY] [--sparse "W G S R BS"]
 *                         [--linformer K] [--performer M]
 *
 * Batch x T is held at --tokens (default 4096) and the layer is NH heads of
 * HS (default 4 x 64, C = 256), so every T does the same projections' work
 * and only attention's own cost changes. Each path runs once to warm up,
 * then N timed rounds (default 3; median reported) of forward + backward,
 * the queue drained after each. Memory is the runtime's own count of the
 * device bytes each path's working buffers take beyond q/k/v, y and their
 * gradients (scores and probabilities, head copies; lse and the row sums).
 * PyTorch runs bench/torch_attention.py (the same shapes, the textbook
 * attention of nanoGPT without flash: PyTorch 1.13 has no fused CPU
 * attention) with the same thread count, OpenBLAS's core type named for the
 * CPU and the better of its two OpenMP wait policies; the ratio column is
 * PyTorch time / fused time (above 1 = clformer faster).
 *
 * --linformer K adds, at each T, attention in both directions three ways:
 * dense softmax over every key, and Linformer (keys and values projected
 * along the sequence to K rows by two [K, T] matrices, attention over
 * those, and the backward's products and projection gradients, as the
 * model runs it), each forward + backward; the ratio is dense / linformer.
 *
 * --performer M adds, at each T, causal Performer attention with M random
 * features (forward + backward through cl/attention.cl's perf_* kernels)
 * and the dense fused time over it.
 *
 * --sparse adds, at each T, the same tensors through a sparse pattern (a
 * window of W keys beside the first G keys, every S-th key back and R
 * random key blocks of BS positions per query block; 0 turns a part off)
 * and prints its time, the dense fused time over it, and the share of
 * block pairs the pattern visits.
 *
 * Not here: correctness (tests/test_attn_fused.c), the model's use of it
 * (bench/gpt.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ops/ops.h"
#include "runtime/gemm/gemm.h"
#include "runtime/runtime.h"
#include "runtime/util.h"

#ifndef CLF_BENCH_DIR
#define CLF_BENCH_DIR "bench"
#endif

typedef struct bench_args {
    const char *device, *python, *ts;
    int reps, torch, profile;
    size_t tokens, NH, HS;
    size_t sp[5]; /* --sparse: window, global, stride, random blocks, block; sp[4] 0: off */
    size_t lin;   /* --linformer: projected rows; 0: off */
    size_t perf;  /* --performer: random features; 0: off */
} bench_args;

static void die(const clf_error *err, const char *what)
{
    fprintf(stderr, "attention: %s: %s\n", what, err->msg);
    exit(1);
}

#define CK(x, what)                                                                                \
    do {                                                                                           \
        if ((x) != CLF_OK)                                                                         \
            die(&err, what);                                                                       \
    } while (0)

static clf_ptr alloc(clf_runtime *rt, size_t n)
{
    clf_error err;
    clf_buffer *b = NULL;
    CK(clf_buffer_create(rt, n * sizeof(float), &b, &err), "allocation");
    return (clf_ptr){b, 0};
}

static size_t mem_now(const clf_runtime *rt)
{
    size_t now = 0, peak = 0;
    clf_runtime_memory(rt, &now, &peak);
    return now;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The attention's tensors: qkv [B, T, 3C], y, dy [B, T, C], dqkv. */
typedef struct io {
    size_t B, T, NH, HS, C;
    clf_ptr qkv, y, dy, dqkv;
} io;

static clf_status fused_step(clf_runtime *rt, const io *x, clf_ptr lse, clf_ptr dsum,
                             const bench_args *ba, clf_ptr rnd, clf_error *err)
{
    const size_t C = x->C;
    clf_attn_fused a = {.y = x->y,
                        .lse = lse,
                        .q = x->qkv,
                        .k = clf_ptr_at(x->qkv, C),
                        .v = clf_ptr_at(x->qkv, 2 * C),
                        .y_stride = C,
                        .q_stride = 3 * C,
                        .kv_stride = 3 * C,
                        .B = x->B,
                        .NH = x->NH,
                        .T = x->T,
                        .S = x->T,
                        .HS = x->HS,
                        .causal = 1,
                        .scale = 1.0f / sqrtf((float)x->HS)};
    if (ba != NULL) { /* the sparse pattern */
        a.window = ba->sp[0];
        a.glob = ba->sp[1];
        a.stride = ba->sp[2];
        a.sp_R = ba->sp[3];
        a.sp_bs = ba->sp[4];
        a.sp_nb = (x->T + a.sp_bs - 1) / a.sp_bs;
        a.sp = rnd;
    }
    const clf_attn_fused_grad g = {.dy = x->dy,
                                   .dq = x->dqkv,
                                   .dk = clf_ptr_at(x->dqkv, C),
                                   .dv = clf_ptr_at(x->dqkv, 2 * C),
                                   .dsum = dsum,
                                   .dq_stride = 3 * C,
                                   .dkv_stride = 3 * C};
    clf_status st;
    if ((st = clf_op_attn_fused_forward(rt, &a, err)) != CLF_OK ||
        (st = clf_op_attn_fused_backward(rt, &a, &g, err)) != CLF_OK)
        return st;
    return clf_runtime_finish(rt, err);
}

/* Attention in both directions, forward + backward: dense over every key
 * (lin 0), or Linformer's: kv [B, K, 2C] = E or F [K, T] x the keys or
 * values, attention over them, then the backward's dk, dv into dkv, E's
 * and F's gradients sequence by sequence and the keys' and values'
 * gradients, as model/graph/forward.c runs them. */
static clf_status bidir_step(clf_runtime *rt, const io *x, clf_ptr lse, clf_ptr dsum, size_t K,
                             clf_ptr ef, clf_ptr def, clf_ptr kv, clf_ptr dkv, clf_error *err)
{
    const size_t C = x->C, T = x->T, B = x->B;
    clf_attn_fused a = {.y = x->y,
                        .lse = lse,
                        .q = x->qkv,
                        .k = clf_ptr_at(x->qkv, C),
                        .v = clf_ptr_at(x->qkv, 2 * C),
                        .y_stride = C,
                        .q_stride = 3 * C,
                        .kv_stride = 3 * C,
                        .B = B,
                        .NH = x->NH,
                        .T = T,
                        .S = T,
                        .HS = x->HS,
                        .scale = 1.0f / sqrtf((float)x->HS)};
    clf_attn_fused_grad g = {.dy = x->dy,
                             .dq = x->dqkv,
                             .dk = clf_ptr_at(x->dqkv, C),
                             .dv = clf_ptr_at(x->dqkv, 2 * C),
                             .dsum = dsum,
                             .dq_stride = 3 * C,
                             .dkv_stride = 3 * C};
    clf_status st = CLF_OK;
    if (K > 0) {
        for (size_t part = 0; part < 2 && st == CLF_OK; part++) {
            const clf_gemm_desc d = {.m = K,
                                     .n = C,
                                     .k = T,
                                     .alpha = 1.0f,
                                     .a = clf_ptr_at(ef, part * K * T),
                                     .lda = T,
                                     .b = clf_ptr_at(x->qkv, C + part * C),
                                     .ldb = 3 * C,
                                     .c = clf_ptr_at(kv, part * C),
                                     .ldc = 2 * C,
                                     .batch = B,
                                     .stride_b = T * 3 * C,
                                     .stride_c = K * 2 * C};
            st = clf_gemm(rt, &d, err);
        }
        a.k = kv;
        a.v = clf_ptr_at(kv, C);
        a.kv_stride = 2 * C;
        a.S = K;
        g.dk = dkv;
        g.dv = clf_ptr_at(dkv, C);
        g.dkv_stride = 2 * C;
    }
    if (st != CLF_OK || (st = clf_op_attn_fused_forward(rt, &a, err)) != CLF_OK ||
        (st = clf_op_attn_fused_backward(rt, &a, &g, err)) != CLF_OK)
        return st;
    for (size_t part = 0; part < 2 && K > 0 && st == CLF_OK; part++) {
        for (size_t b = 0; b < B && st == CLF_OK; b++) {
            const clf_gemm_desc dw = {.trans_b = 1,
                                      .m = K,
                                      .n = T,
                                      .k = C,
                                      .alpha = 1.0f,
                                      .beta = 1.0f,
                                      .a = clf_ptr_at(dkv, b * K * 2 * C + part * C),
                                      .lda = 2 * C,
                                      .b = clf_ptr_at(x->qkv, b * T * 3 * C + C + part * C),
                                      .ldb = 3 * C,
                                      .c = clf_ptr_at(def, part * K * T),
                                      .ldc = T};
            st = clf_gemm(rt, &dw, err);
        }
        const clf_gemm_desc dx = {.trans_a = 1,
                                  .m = T,
                                  .n = C,
                                  .k = K,
                                  .alpha = 1.0f,
                                  .a = clf_ptr_at(ef, part * K * T),
                                  .lda = T,
                                  .b = clf_ptr_at(dkv, part * C),
                                  .ldb = 2 * C,
                                  .c = clf_ptr_at(x->dqkv, C + part * C),
                                  .ldc = 3 * C,
                                  .batch = B,
                                  .stride_b = K * 2 * C,
                                  .stride_c = T * 3 * C};
        if (st == CLF_OK)
            st = clf_gemm(rt, &dx, err);
    }
    return st != CLF_OK ? st : clf_runtime_finish(rt, err);
}

/* Causal Performer attention with M features, forward + backward, median
 * of reps rounds in ms (t: scratch for the rounds). */
static double performer_ms(clf_runtime *rt, const io *x, size_t M, int reps, double *t)
{
    clf_error err;
    const size_t C = x->C, BH = x->B * x->NH, T = x->T, HS = x->HS;
    float *oh = malloc(M * HS * sizeof *oh);
    uint64_t s = 11;
    for (size_t i = 0; i < M * HS; i++) /* uniform of unit variance */
        oh[i] = (float)(((double)(clf_splitmix64_next(&s) >> 11) / 9007199254740992.0 - 0.5) *
                        sqrt(12.0));
    clf_ptr om = alloc(rt, M * HS);
    CK(clf_ptr_write(rt, om, oh, M * HS, &err), "upload");
    free(oh);
    const clf_performer p = {.y = x->y,
                             .q = x->qkv,
                             .k = clf_ptr_at(x->qkv, C),
                             .v = clf_ptr_at(x->qkv, 2 * C),
                             .om = om,
                             .fq = alloc(rt, BH * T * M),
                             .fk = alloc(rt, BH * T * M),
                             .nd = alloc(rt, BH * T * (HS + 1)),
                             .cmax = alloc(rt, BH),
                             .rmax = alloc(rt, BH * T),
                             .y_stride = C,
                             .q_stride = 3 * C,
                             .kv_stride = 3 * C,
                             .B = x->B,
                             .NH = x->NH,
                             .T = T,
                             .S = T,
                             .HS = HS,
                             .m = M,
                             .causal = 1};
    const clf_performer_grad g = {.dy = x->dy,
                                  .dq = x->dqkv,
                                  .dk = clf_ptr_at(x->dqkv, C),
                                  .dv = clf_ptr_at(x->dqkv, 2 * C),
                                  .u = alloc(rt, BH * T * (HS + 1)),
                                  .dfq = alloc(rt, BH * T * M),
                                  .dfk = alloc(rt, BH * T * M),
                                  .dq_stride = 3 * C,
                                  .dkv_stride = 3 * C};
    for (int r = -1; r < reps; r++) { /* one round to warm up */
        const double t0 = clf_now_seconds();
        CK(clf_op_performer_forward(rt, &p, &err), "performer");
        CK(clf_op_performer_backward(rt, &p, &g, &err), "performer backward");
        CK(clf_runtime_finish(rt, &err), "finish");
        if (r >= 0)
            t[r] = (clf_now_seconds() - t0) * 1e3;
    }
    const clf_ptr all[] = {om, p.fq, p.fk, p.nd, p.cmax, p.rmax, g.u, g.dfq, g.dfk};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        clf_buffer_destroy(all[i].buf);
    return median(t, reps);
}

/* PyTorch's forward + backward median in ms for (B, T), or NAN: the better
 * of its OpenMP threads spinning and sleeping between calls (which one
 * wins depends on the machine and the shape; bench/run_all.sh does the
 * same), unless OMP_WAIT_POLICY is set. */
static double torch_ms(const bench_args *a, size_t B, size_t T)
{
    const char *set = getenv("OMP_WAIT_POLICY");
    const char *policies[2] = {"PASSIVE", "ACTIVE"};
    double best = NAN;
    for (int i = 0; i < (set ? 1 : 2); i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd,
                 "%s%s %s %s/torch_attention.py --batch %zu --T %zu --heads %zu --head-size %zu "
                 "--reps %d 2>/dev/null",
                 set ? "" : "OMP_WAIT_POLICY=", set ? "" : policies[i], a->python, CLF_BENCH_DIR, B,
                 T, a->NH, a->HS, a->reps);
        FILE *p = popen(cmd, "r");
        if (p == NULL)
            continue;
        double ms = NAN;
        char line[256];
        while (fgets(line, sizeof line, p) != NULL)
            if (sscanf(line, "ms %lf", &ms) == 1)
                break;
        pclose(p);
        if (!isnan(ms) && (isnan(best) || ms < best))
            best = ms;
    }
    return best;
}

/* Per-kernel device time of the timed rounds so far (--profile), then reset. */
static void print_profile(clf_runtime *rt)
{
    clf_error err;
    clf_profile_entry *e = NULL;
    int n = 0;
    CK(clf_profile_report(rt, &e, &n, &err), "profile");
    for (int i = 0; i < n; i++)
        printf("    %-28s %6llu launches %10.3f ms\n", e[i].name, (unsigned long long)e[i].count,
               e[i].seconds * 1e3);
    free(e);
    clf_profile_reset(rt);
}

static void usage(void)
{
    fprintf(stderr, "usage: attention [--device SEL] [--reps N] [--tokens N] [--heads N] "
                    "[--head-size N] [--T \"128 256 ...\"] [--no-torch] [--profile] "
                    "[--python PY] [--sparse \"W G S R BS\"] [--linformer K] [--performer M]\n");
    exit(2);
}

/* One row of the table: the fused paths (and PyTorch's) at T. */
static void bench_T(clf_runtime *rt, const bench_args *ap, size_t T)
{
    const bench_args a = *ap;
    clf_error err;
    const size_t B = a.tokens / T ? a.tokens / T : 1, C = a.NH * a.HS, BT = B * T;
    io x = {B,
            T,
            a.NH,
            a.HS,
            C,
            alloc(rt, BT * 3 * C),
            alloc(rt, BT * C),
            alloc(rt, BT * C),
            alloc(rt, BT * 3 * C)};
    float *h = malloc(BT * 3 * C * sizeof *h);
    uint64_t s = 42;
    for (size_t i = 0; i < BT * 3 * C; i++)
        h[i] = (float)((double)(clf_splitmix64_next(&s) >> 11) / 9007199254740992.0 - 0.5);
    CK(clf_ptr_write(rt, x.qkv, h, BT * 3 * C, &err), "upload");
    CK(clf_ptr_write(rt, x.dy, h, BT * C, &err), "upload");
    free(h);
    double *t = malloc((size_t)a.reps * sizeof *t), fused = NAN;
    /* fused */
    const size_t m0 = mem_now(rt);
    clf_ptr lse = alloc(rt, B * a.NH * T), dsum = alloc(rt, B * a.NH * T);
    const double fused_mib = (double)(mem_now(rt) - m0) / 1048576.0;
    CK(fused_step(rt, &x, lse, dsum, NULL, lse, &err), "fused attention");
    for (int r = 0; r < a.reps; r++) {
        double t0 = clf_now_seconds();
        CK(fused_step(rt, &x, lse, dsum, NULL, lse, &err), "fused attention");
        t[r] = (clf_now_seconds() - t0) * 1e3;
    }
    fused = median(t, a.reps);
    if (a.profile)
        print_profile(rt);
    double sparse = NAN, visited = NAN;
    if (a.sp[4]) { /* the same through the sparse pattern */
        const size_t nb = (T + a.sp[4] - 1) / a.sp[4], R = a.sp[3];
        int32_t *rh = malloc((nb * R + 1) * sizeof *rh);
        clf_attn_sparse_draw(rh, nb, R, 1);
        clf_ptr rnd = alloc(rt, nb * R + 1);
        CK(clf_buffer_write(rt, rnd.buf, 0, rh, (nb * R + 1) * sizeof *rh, &err), "upload");
        const size_t v = clf_attn_sparse_visits(nb, a.sp[4], a.sp[0], a.sp[1], a.sp[2], rh, R);
        visited = 100.0 * (double)v / (double)(nb * (nb + 1) / 2);
        CK(fused_step(rt, &x, lse, dsum, &a, rnd, &err), "sparse attention");
        for (int r = 0; r < a.reps; r++) {
            double t0 = clf_now_seconds();
            CK(fused_step(rt, &x, lse, dsum, &a, rnd, &err), "sparse attention");
            t[r] = (clf_now_seconds() - t0) * 1e3;
        }
        sparse = median(t, a.reps);
        clf_buffer_destroy(rnd.buf);
        free(rh);
        if (a.profile)
            print_profile(rt);
    }
    double bidir = NAN, linf = NAN;
    if (a.lin) { /* both directions: dense, then Linformer's */
        const size_t K = a.lin;
        clf_ptr ef = alloc(rt, 2 * K * T), def = alloc(rt, 2 * K * T);
        clf_ptr kv = alloc(rt, B * K * 2 * C), dkv = alloc(rt, B * K * 2 * C);
        float *eh = malloc(2 * K * T * sizeof *eh);
        uint64_t s2 = 7;
        for (size_t i = 0; i < 2 * K * T; i++) /* Xavier-normal scale, uniform */
            eh[i] = (float)(((double)(clf_splitmix64_next(&s2) >> 11) / 9007199254740992.0 - 0.5) *
                            sqrt(24.0 / (double)(K + T)));
        CK(clf_ptr_write(rt, ef, eh, 2 * K * T, &err), "upload");
        free(eh);
        for (int pass = 0; pass < 2; pass++) {
            const size_t k = pass ? K : 0;
            CK(bidir_step(rt, &x, lse, dsum, k, ef, def, kv, dkv, &err), "attention");
            for (int r = 0; r < a.reps; r++) {
                double t0 = clf_now_seconds();
                CK(bidir_step(rt, &x, lse, dsum, k, ef, def, kv, dkv, &err), "attention");
                t[r] = (clf_now_seconds() - t0) * 1e3;
            }
            *(pass ? &linf : &bidir) = median(t, a.reps);
        }
        clf_buffer_destroy(ef.buf);
        clf_buffer_destroy(def.buf);
        clf_buffer_destroy(kv.buf);
        clf_buffer_destroy(dkv.buf);
    }
    clf_buffer_destroy(lse.buf);
    clf_buffer_destroy(dsum.buf);
    const double tm = a.torch ? torch_ms(&a, B, T) : NAN;
    printf("%6zu %4zu | %12.2f %12.2f | %10.2f %8.2f", T, B, fused, fused_mib, tm, tm / fused);
    if (a.sp[4])
        printf(" | %10.2f %8.2f %9.1f%%", sparse, fused / sparse, visited);
    if (a.lin)
        printf(" | %10.2f %10.2f %8.2f", bidir, linf, bidir / linf);
    if (a.perf) {
        const double pm = performer_ms(rt, &x, a.perf, a.reps, t);
        printf(" | %10.2f %8.2f", pm, fused / pm);
        if (a.profile) {
            printf("\n");
            print_profile(rt);
        }
    }
    printf("\n");
    fflush(stdout);
    free(t);
    clf_buffer_destroy(x.qkv.buf);
    clf_buffer_destroy(x.y.buf);
    clf_buffer_destroy(x.dy.buf);
    clf_buffer_destroy(x.dqkv.buf);
}

int main(int argc, char **argv)
{
    bench_args a = {.device = getenv("CLFORMER_DEVICE"),
                    .python = "/usr/bin/python3",
                    .ts = "128 256 512 1024 2048 4096",
                    .reps = 3,
                    .torch = 1,
                    .tokens = 4096,
                    .NH = 4,
                    .HS = 64};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--device") && v)
            a.device = argv[++i];
        else if (!strcmp(argv[i], "--reps") && v)
            a.reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tokens") && v)
            a.tokens = (size_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--heads") && v)
            a.NH = (size_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--head-size") && v)
            a.HS = (size_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--T") && v)
            a.ts = argv[++i];
        else if (!strcmp(argv[i], "--python") && v)
            a.python = argv[++i];
        else if (!strcmp(argv[i], "--no-torch"))
            a.torch = 0;
        else if (!strcmp(argv[i], "--profile"))
            a.profile = 1;
        else if (!strcmp(argv[i], "--performer") && v)
            a.perf = (size_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--linformer") && v)
            a.lin = (size_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--sparse") && v) {
            if (sscanf(argv[++i], "%zu %zu %zu %zu %zu", &a.sp[0], &a.sp[1], &a.sp[2], &a.sp[3],
                       &a.sp[4]) != 5 ||
                a.sp[0] == 0 || a.sp[4] < 16 || a.sp[4] > 128 || a.sp[4] % 16 || a.sp[3] > 64)
                usage();
        } else
            usage();
    }
    if (a.reps < 1 || a.NH == 0 || a.HS == 0 || a.tokens == 0)
        usage();
    clf_error err;
    clf_runtime_options o = clf_runtime_options_default();
    o.device = a.device;
    o.profile = a.profile;
    clf_runtime *rt = NULL;
    CK(clf_runtime_create(&rt, &o, &err), "runtime");
    printf("device: %s; causal self-attention, %zu tokens per step (B x T), %zu heads of %zu; "
           "forward + backward, median of %d\n",
           clf_runtime_device(rt)->name, a.tokens, a.NH, a.HS, a.reps);
    if (a.sp[4])
        printf("sparse: window %zu, global %zu, stride %zu, %zu random blocks of %zu\n", a.sp[0],
               a.sp[1], a.sp[2], a.sp[3], a.sp[4]);
    printf("%6s %4s | %12s %12s | %10s %8s", "T", "B", "fused ms", "fused MiB", "torch ms",
           "torch/fused");
    if (a.sp[4])
        printf(" | %10s %8s %10s", "sparse ms", "dense/sp", "pairs");
    if (a.lin)
        printf(" | %10s %10s %8s", "bidir ms", "linf ms", "bidir/lin");
    if (a.perf)
        printf(" | %10s %8s", "perf ms", "fused/perf");
    printf("\n");
    const char *p = a.ts;
    char *end;
    for (size_t T = strtoul(p, &end, 10); end != p; p = end, T = strtoul(p, &end, 10))
        bench_T(rt, &a, T);
    clf_runtime_destroy(rt);
    return 0;
}
