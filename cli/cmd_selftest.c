/*
 * cmd_selftest.c - `clformer selftest`: open a device, load every kernel
 * family (reporting compile vs cache), and check GEMM through each engine
 * against a float64 host reference. A quick way to see that a device and
 * driver work before a long run.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static int check_gemm(clf_runtime *rt, clf_gemm_engine eng, size_t M, size_t N, size_t K, int ta,
                      int tb, double *worst_out)
{
    clf_error err;
    float *a = malloc(M * K * 4), *b = malloc(K * N * 4), *c = malloc(M * N * 4);
    clf_buffer *da = NULL, *db = NULL, *dc = NULL;
    int ok = 0;
    if (a == NULL || b == NULL || c == NULL)
        goto done;
    uint64_t s = 12345;
    for (size_t i = 0; i < M * K; i++)
        a[i] =
            (float)((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 40) / 16777216.0f -
            0.5f;
    for (size_t i = 0; i < K * N; i++)
        b[i] =
            (float)((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 40) / 16777216.0f -
            0.5f;
    if (clf_buffer_create(rt, M * K * 4, &da, &err) != CLF_OK ||
        clf_buffer_create(rt, K * N * 4, &db, &err) != CLF_OK ||
        clf_buffer_create(rt, M * N * 4, &dc, &err) != CLF_OK ||
        clf_buffer_write(rt, da, 0, a, M * K * 4, &err) != CLF_OK ||
        clf_buffer_write(rt, db, 0, b, K * N * 4, &err) != CLF_OK)
        goto fail;
    clf_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.trans_a = ta;
    d.trans_b = tb;
    d.m = M;
    d.n = N;
    d.k = K;
    d.alpha = 1.0f;
    d.beta = 0.0f;
    d.a = (clf_ptr){da, 0};
    d.lda = ta ? M : K;
    d.b = (clf_ptr){db, 0};
    d.ldb = tb ? K : N;
    d.c = (clf_ptr){dc, 0};
    d.ldc = N;
    if (clf_gemm_with(rt, eng, &d, &err) != CLF_OK ||
        clf_buffer_read(rt, dc, 0, c, M * N * 4, &err) != CLF_OK)
        goto fail;
    double worst = 0.0;
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double r = 0.0;
            for (size_t k = 0; k < K; k++)
                r += (double)(ta ? a[k * M + i] : a[i * K + k]) *
                     (double)(tb ? b[j * K + k] : b[k * N + j]);
            double e = fabs(r - c[i * N + j]);
            if (e > worst || isnan(e))
                worst = isnan(e) ? INFINITY : e;
        }
    *worst_out = worst;
    ok = worst <= 1e-4 * sqrt((double)K);
    goto done;
fail:
    cli_print_error("selftest gemm", &err);
done:
    clf_buffer_destroy(da);
    clf_buffer_destroy(db);
    clf_buffer_destroy(dc);
    free(a);
    free(b);
    free(c);
    return ok;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: clformer selftest [runtime flags]\n"
            "Compile every kernel family for the device and run a small GEMM check.\n%s",
            CLI_RUNTIME_FLAGS_HELP);
}

int cli_cmd_selftest(int argc, char **argv)
{
    cli_runtime_flags fl;
    cli_runtime_flags_init(&fl);
    const cli_command cmd = {"clformer selftest", NULL, 0, &fl, NULL, 0, NULL, usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    clf_runtime *rt = NULL;
    int rc = cli_runtime_open(&fl, &rt);
    if (rc != CLI_EXIT_OK)
        return rc;
    printf("device: %s (%s, driver %s)\n", clf_runtime_device(rt)->name,
           clf_runtime_device(rt)->platform, clf_runtime_device(rt)->driver_version);
    clf_error err;
    const char *const *fams = clf_program_families();
    for (int i = 0; fams[i] != NULL; i++) {
        clf_program_stats before = clf_runtime_program_stats(rt);
        clf_status st = clf_program_load(rt, fams[i], &err);
        clf_program_stats after = clf_runtime_program_stats(rt);
        if (st != CLF_OK) {
            cli_print_error(fams[i], &err);
            clf_runtime_destroy(rt);
            return cli_exit_code(st);
        }
        printf("  kernels %-14s %-9s %7.1f ms\n", fams[i],
               after.cache_hits > before.cache_hits ? "cached"
               : after.rebuilt > before.rebuilt     ? "rebuilt"
                                                    : "compiled",
               (after.load_seconds - before.load_seconds) * 1e3);
    }
    clf_program_stats ps = clf_runtime_program_stats(rt);
    printf("program load: %d compiled, %d from cache, %d built again from a noted source, %d "
           "cache entries rejected, %.3f s\n",
           ps.built, ps.cache_hits, ps.rebuilt, ps.cache_reject, ps.load_seconds);
    int failures = 0;
    const clf_gemm_engine engines[] = {CLF_GEMM_NATIVE, CLF_GEMM_CLBLAST};
    const size_t shapes[][3] = {{64, 96, 48}, {33, 17, 129}};
    for (size_t e = 0; e < 2; e++)
        for (size_t s = 0; s < 2; s++)
            for (int t = 0; t < 4; t++) {
                double worst = 0.0;
                int ok = check_gemm(rt, engines[e], shapes[s][0], shapes[s][1], shapes[s][2], t & 1,
                                    t >> 1, &worst);
                failures += !ok;
                printf("  gemm %-7s M=%-3zu N=%-3zu K=%-3zu %s%s  max error %.2e  %s\n",
                       clf_gemm_engine_name(engines[e]), shapes[s][0], shapes[s][1], shapes[s][2],
                       t & 1 ? "T" : "N", t >> 1 ? "T" : "N", worst, ok ? "ok" : "FAILED");
            }
    cli_print_profile(rt, stdout);
    clf_runtime_destroy(rt);
    printf("selftest: %s\n", failures ? "FAILED" : "ok");
    return failures ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
