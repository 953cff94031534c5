/*
 * cmd_tune.c - `clformer tune MODEL.yaml [--set k=v ...] [--vocab N]
 * [--data FILE] [--batch B] [--keep] [--json]`: run the GEMM search for
 * every product shape of one training step of the model on the device, up
 * front, and print what it chose.
 *
 * The model is created for training (which plans each GEMM shape of the
 * forward and backward passes, clf_gemm_prepare); with the runtime's
 * gemm_retune the saved choices for those classes are set aside, so each is
 * timed anew on this device and saved for later runs (the file's other
 * classes stay). --keep shows the saved choices instead, searching only
 * classes not in it. Either way the table lists the model's classes, each
 * searched in full: the search budget other commands have (compilation
 * included: a cold first run on a slow compiler spends it early) does not
 * apply here.
 * The table: per shape class, the shape that was timed, each candidate's
 * time per call (CLBlast and the native configurations the device searches;
 * "-" where a candidate was not timed), the winner, its GFLOP/s and their
 * share of the device's measured FMA peak. A deep product's candidates are
 * timed in the native engine's default K slices; a winner marked "+1pass"
 * then timed faster in one pass over K, and runs so.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_model.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: clformer tune MODEL.yaml [--set KEY=VALUE ...] [--vocab N] [--data FILE]\n"
                 "                     [--batch B] [--keep] [--json] [runtime flags]\n"
                 "Time CLBlast and the native GEMM configurations on every matrix-product shape\n"
                 "of one training step of MODEL on the device, keep the fastest per shape class\n"
                 "(in the cache directory, for later runs) and print the table.\n"
                 "  --set KEY=VALUE   override a model-file setting (repeatable)\n"
                 "  --vocab N         vocabulary size (default: from the tokenizer / --data)\n"
                 "  --data FILE       build the char vocabulary from this text\n"
                 "  --batch B         batch size (default: train.batch)\n"
                 "  --keep            reuse the saved choices; time only shapes not yet saved\n"
                 "  --json            the table as JSON\n" CLI_RUNTIME_FLAGS_HELP);
}

static void print_table(const clf_gemm_tuned *rows, size_t n, const char *const *names,
                        size_t n_search, double peak)
{
    printf("%-3s %-22s %5s", "op", "M x N x K", "batch");
    for (size_t c = 0; c < n_search; c++)
        printf(" %14s", names[c]);
    printf("  %-14s %8s %6s\n", "chosen", "GFLOP/s", "peak");
    for (size_t i = 0; i < n; i++) {
        const clf_gemm_tuned *r = &rows[i];
        char shape[64];
        snprintf(shape, sizeof shape, "%zu x %zu x %zu", r->m, r->n, r->k);
        printf("%c%c  %-22s %5zu", r->trans_a ? 'T' : 'N', r->trans_b ? 'T' : 'N', shape, r->batch);
        for (size_t c = 0; c < n_search; c++) {
            if (r->seconds[c] >= 0)
                printf(" %11.3f ms", 1e3 * r->seconds[c]);
            else
                printf(" %14s", "-");
        }
        const double t = r->seconds[r->winner];
        const double gf =
            t > 0 ? 2.0 * (double)r->m * (double)r->n * (double)r->k * (double)r->batch / t * 1e-9
                  : 0.0;
        char chosen[64];
        snprintf(chosen, sizeof chosen, "%s%s", names[r->winner], r->k_whole ? "+1pass" : "");
        printf("  %-14s", chosen);
        if (t > 0)
            printf(" %8.1f %5.0f%%\n", gf, peak > 0 ? 100.0 * gf / peak : 0.0);
        else
            printf(" %8s %6s\n", "-", "-");
    }
}

static void print_json(const clf_gemm_tuned *rows, size_t n, const char *const *names,
                       size_t n_search, double peak, const char *device)
{
    printf("{\"device\": \"");
    for (const char *p = device; *p; p++)
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if ((unsigned char)*p >= 0x20)
            putchar(*p);
    printf("\", \"peak_gflops\": %.1f, \"candidates\": [", peak);
    for (size_t c = 0; c < n_search; c++)
        printf("%s\"%s\"", c ? ", " : "", names[c]);
    printf("], \"shapes\": [");
    for (size_t i = 0; i < n; i++) {
        const clf_gemm_tuned *r = &rows[i];
        printf("%s\n  {\"trans_a\": %d, \"trans_b\": %d, \"m\": %zu, \"n\": %zu, \"k\": %zu, "
               "\"batch\": %zu, \"chosen\": \"%s\", \"k_one_pass\": %s, \"seconds\": {",
               i ? "," : "", r->trans_a, r->trans_b, r->m, r->n, r->k, r->batch, names[r->winner],
               r->k_whole ? "true" : "false");
        int first = 1;
        for (size_t c = 0; c < n_search; c++)
            if (r->seconds[c] >= 0) {
                printf("%s\"%s\": %.6g", first ? "" : ", ", names[c], r->seconds[c]);
                first = 0;
            }
        printf("}}");
    }
    printf("\n]}\n");
}

int cli_cmd_tune(int argc, char **argv)
{
    const char *path = NULL, *data = NULL;
    cli_list sets = {{NULL}, 0};
    long vocab = 0, batch = 0;
    int json = 0, keep = 0;
    cli_runtime_flags rf;
    cli_runtime_flags_init(&rf);
    const cli_opt opts[] = {
        {"--set", CLI_OPT_SET, &sets, 0, 0, NULL},
        {"--vocab", CLI_OPT_INT, &vocab, 1, 100000000, NULL},
        {"--batch", CLI_OPT_INT, &batch, 1, 1000000, NULL},
        {"--data", CLI_OPT_STR, &data, 0, 0, NULL},
        {"--keep", CLI_OPT_BOOL, &keep, 0, 0, NULL},
        {"--json", CLI_OPT_BOOL, &json, 0, 0, NULL},
    };
    const cli_command cmd = {"clformer tune", opts, CLI_COUNT(opts),  &rf,
                             &path,           1,    "one MODEL.yaml", usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    if (path == NULL) {
        fprintf(stderr, "clformer tune: MODEL.yaml expected\n");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (rf.gemm != NULL && strcmp(rf.gemm, "auto") != 0) {
        fprintf(stderr, "clformer tune: --gemm %s: the search needs --gemm auto (the default)\n",
                rf.gemm);
        return CLI_EXIT_USAGE;
    }
    if (rf.no_cache)
        fprintf(stderr, "clformer tune: note: --no-cache: the choices last for this run only\n");
    clf_model_config cfg;
    int rc = cli_config_load(path, &sets, &cfg);
    if (rc != CLI_EXIT_OK)
        return rc;
    const char *note = "";
    if ((rc = cli_pick_vocab(&cfg, data, &vocab, &note)) != CLI_EXIT_OK)
        return rc;
    if (batch == 0)
        batch = cfg.train.batch;
    rf.gemm_retune = !keep;
    rf.gemm_search_all = 1;
    clf_runtime *rt = NULL;
    clf_model *m = NULL;
    clf_gemm_tuned *rows = NULL;
    clf_error err;
    clf_status st = CLF_OK;
    if ((rc = cli_runtime_open(&rf, &rt)) != CLI_EXIT_OK)
        return rc;
    if (!json) {
        printf("device: %s\n", clf_runtime_device(rt)->name);
        printf("model: %s, batch %ld, vocabulary %ld%s\n", path, batch, vocab, note);
        printf("timing the GEMM candidates on every product shape of a training step...\n");
        fflush(stdout);
    }
    const double t0 = clf_now_seconds();
    if ((st = clf_model_create(rt, &cfg, (int)vocab, (int)batch, CLF_MODEL_TRAIN, &m, &err)) !=
        CLF_OK)
        goto fail;
    const double searched = clf_now_seconds() - t0;
    const char *const *names = NULL;
    size_t count = 0, n_search = 0, n = 0;
    if ((st = clf_gemm_candidates(rt, &names, &count, &n_search, &err)) != CLF_OK)
        goto fail;
    rows = calloc(256, sizeof *rows);
    if (rows == NULL) {
        st = clf_error_set(&err, CLF_ERR_MEMORY, "out of host memory");
        goto fail;
    }
    if ((st = clf_gemm_tuning(rt, rows, 256, &n, &err)) != CLF_OK)
        goto fail;
    size_t kept = 0; /* this model's classes only (the file may hold others) */
    for (size_t i = 0; i < n; i++)
        if (rows[i].used)
            rows[kept++] = rows[i];
    n = kept;
    double peak = 0.0;
    if ((st = clf_runtime_peak_gflops(rt, &peak, &err)) != CLF_OK)
        goto fail;
    if (json) {
        print_json(rows, n, names, n_search, peak, clf_runtime_device(rt)->name);
    } else {
        double timing = 0.0, setup = 0.0;
        if ((st = clf_gemm_search_seconds(rt, &timing, &setup, &err)) != CLF_OK)
            goto fail;
        printf("%zu shape classes in %.1f s (model build included: %.1f s timing the "
               "candidates, %.1f s in their first runs, which build kernels); measured FMA peak "
               "%.1f GFLOP/s\n\n",
               n, searched, timing, setup, peak);
        print_table(rows, n, names, n_search, peak);
        if (count > n_search) {
            printf("\nnot searched on this device (runnable, e.g. by the tests):");
            for (size_t c = n_search; c < count; c++)
                printf(" %s", names[c]);
            printf("\n");
        }
    }
    goto done;
fail:
    cli_print_error(NULL, &err);
    rc = cli_exit_code(st);
done:
    free(rows);
    clf_model_destroy(m);
    clf_runtime_destroy(rt);
    return rc;
}
