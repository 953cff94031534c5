/*
 * cmd_classify.c - `clformer classify DIR [--batch N] [--all] [--input
 * FILE] < sentences.txt`: label each line with a trained encoder
 * classifier.
 *
 * Each line is tokenized with the checkpoint's tokenizer ([cls] first, cut
 * at the model's context with a warning on stderr), batched by length, run
 * through the encoder and the classifier head (an eval forward: no
 * dropout), and printed in input order as "LABEL<TAB>PROBABILITY": the
 * most probable label (ties: the lower) and its softmax probability. With
 * --all, the probabilities of every label follow ("LABEL<TAB>P0<TAB>P1...").
 *
 * Not here: label names (labels are the integers of the training TSV),
 * calibration, thresholds.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_data.h"
#include "cli/cli_model.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: clformer classify DIR [--batch N] [--all] [--input FILE] [runtime flags]\n"
            "                         < sentences.txt\n"
            "Label one sentence per line with the encoder classifier in DIR (or a .safetensors\n"
            "file): prints \"LABEL<TAB>PROBABILITY\" per line, in input order.\n"
            "  --batch N         sentences per forward (default 64)\n"
            "  --all             also print every label's probability\n"
            "  --input FILE      read FILE (plain or gzip) instead of standard "
            "input\n" CLI_RUNTIME_FLAGS_HELP);
}

int cli_cmd_classify(int argc, char **argv)
{
    const char *dir = NULL, *input = NULL;
    long batch = 64;
    int all = 0;
    cli_runtime_flags rf;
    cli_runtime_flags_init(&rf);
    const cli_opt opts[] = {
        {"--batch", CLI_OPT_INT, &batch, 1, 65536, NULL},
        {"--all", CLI_OPT_BOOL, &all, 0, 0, NULL},
        {"--input", CLI_OPT_STR, &input, 0, 0, NULL},
    };
    const cli_command cmd = {"clformer classify", opts, CLI_COUNT(opts), &rf, &dir, 1,
                             "one DIR",           usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    if (dir == NULL) {
        fprintf(stderr, "clformer classify: DIR (a training run's --out) expected\n");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }

    clf_error err;
    clf_error_clear(&err);
    clf_checkpoint *ck = NULL;
    clf_model_config cfg;
    clf_tokenizer *tok = NULL;
    clf_runtime *rt = NULL;
    clf_model *m = NULL;
    clf_seqdata *ds = NULL;
    float *out = NULL;
    clf_status st = CLF_OK;
    int rc = cli_checkpoint_open(dir, &ck, &cfg, &tok);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cfg.kind != CLF_MODEL_ENCODER) {
        fprintf(stderr,
                "clformer classify: %s holds a model of kind %s; classification "
                "needs an encoder classifier\n",
                dir, clf_config_kind_name(cfg.kind));
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (cfg.head.type == CLF_HEAD_NONE) {
        fprintf(stderr,
                "clformer classify: %s is an embedding model (no classifier head): use `clformer "
                "embed`, or fine-tune it with a classifier head (train --init)\n",
                dir);
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if ((rc = cli_read_sentences("classify", input, &cfg, tok, &ds)) != CLI_EXIT_OK || ds == NULL)
        goto done; /* an empty input: nothing to do */
    size_t n = clf_seqdata_size(ds);
    clf_seq_batching bo;
    clf_seqeval_batching((int)batch, 0, &bo);
    clf_seq_limits sl;
    if ((st = clf_seqeval_limits(ds, &bo, &sl, &err)) != CLF_OK)
        goto fail;
    const clf_model_limits lim = clf_seqeval_model_limits(&sl);
    if ((rc = cli_runtime_open(&rf, &rt)) != CLI_EXIT_OK ||
        (rc = cli_checkpoint_model(rt, ck, &lim, 0, &m)) != CLI_EXIT_OK)
        goto done;
    const int NL = clf_model_dims_get(m).labels;
    if ((out = malloc(n * (size_t)NL * sizeof *out)) == NULL) {
        st = clf_error_set(&err, CLF_ERR_MEMORY, "classify: out of host memory");
        goto fail;
    }
    if ((st = clf_seqeval_probs(m, ds, &bo, out, &err)) != CLF_OK)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        const float *p = out + i * (size_t)NL;
        int best = 0;
        for (int k = 1; k < NL; k++)
            if (p[k] > p[best])
                best = k;
        printf("%d\t%.4f", best, (double)p[best]);
        for (int k = 0; all && k < NL; k++)
            printf("\t%.4f", (double)p[k]);
        printf("\n");
    }
    fflush(stdout);
    cli_print_profile(rt, stderr); /* prints only with --profile */
    rc = CLI_EXIT_OK;
    goto done;
fail:
    cli_print_error(NULL, &err);
    rc = cli_exit_code(st);
done:
    free(out);
    clf_seqdata_destroy(ds);
    clf_model_destroy(m);
    clf_runtime_destroy(rt);
    clf_checkpoint_close(ck);
    clf_tokenizer_destroy(tok);
    return rc;
}
