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

static size_t labels(const cli_encoder_run *r) { return (size_t)clf_model_dims_get(r->m).labels; }

static clf_status probs(const cli_encoder_run *r, float *out, const void *user, clf_error *err)
{
    (void)user;
    return clf_seqeval_probs(r->m, r->ds, &r->bo, out, err);
}

/* "LABEL<TAB>PROBABILITY" (ties: the lower label), then with --all (*user)
 * every label's probability. */
static void print_label(const float *p, size_t NL, const void *user)
{
    const int all = *(const int *)user;
    size_t best = 0;
    for (size_t k = 1; k < NL; k++)
        if (p[k] > p[best])
            best = k;
    printf("%zu\t%.4f", best, (double)p[best]);
    for (size_t k = 0; all && k < NL; k++)
        printf("\t%.4f", (double)p[k]);
    printf("\n");
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
    const cli_encoder_rows job = {"classify", 0, labels, probs, print_label, &all};
    return cli_encoder_rows_run(&job, dir, input, batch, &rf);
}
