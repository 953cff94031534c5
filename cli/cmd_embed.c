/*
 * cmd_embed.c - `clformer embed DIR [--batch N] [--json] [--raw] [--input
 * FILE] < sentences.txt`: one sentence embedding per input line.
 *
 * Each line is tokenized with the checkpoint's tokenizer ([CLS] ... [SEP]
 * for WordPiece, cut at the model's context with a warning on stderr),
 * batched by length, run through the encoder (an eval forward) and pooled
 * as the model's head.pool says (mean over the tokens, or [CLS]); the
 * vector is scaled to unit length (as sentence-transformers'
 * Normalize; --raw keeps the pooled vector) and printed in input order:
 * numbers separated by spaces, one line per sentence, or with --json one
 * JSON array per line.
 *
 * Not here: similarity search, pairs of sentences.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_data.h"
#include "cli/cli_model.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: clformer embed DIR [--batch N] [--json] [--raw] [--input FILE]\n"
                 "                      [runtime flags] < sentences.txt\n"
                 "Print one sentence embedding per input line with the encoder in DIR (a run\n"
                 "directory or a .safetensors file, e.g. from `clformer import`): its output\n"
                 "pooled as the model says (mean over the tokens, or [CLS]) and scaled to unit\n"
                 "length, as numbers separated by spaces, in input order.\n"
                 "  --batch N         sentences per forward (default 64)\n"
                 "  --json            one JSON array per line\n"
                 "  --raw             the pooled vector as it is (not normalised)\n"
                 "  --input FILE      read FILE (plain or gzip) instead of standard "
                 "input\n" CLI_RUNTIME_FLAGS_HELP);
}

int cli_cmd_embed(int argc, char **argv)
{
    const char *dir = NULL, *input = NULL;
    long batch = 64;
    int json = 0, raw = 0;
    cli_runtime_flags rf;
    cli_runtime_flags_init(&rf);
    const cli_opt opts[] = {
        {"--batch", CLI_OPT_INT, &batch, 1, 65536, NULL},
        {"--json", CLI_OPT_BOOL, &json, 0, 0, NULL},
        {"--raw", CLI_OPT_BOOL, &raw, 0, 0, NULL},
        {"--input", CLI_OPT_STR, &input, 0, 0, NULL},
    };
    const cli_command cmd = {"clformer embed", opts, CLI_COUNT(opts), &rf, &dir, 1,
                             "one DIR",        usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    if (dir == NULL) {
        fprintf(stderr, "clformer embed: DIR (a checkpoint or a run directory) expected\n");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    clf_error err;
    clf_error_clear(&err);
    cli_encoder_run r;
    float *out = NULL;
    clf_status st = CLF_OK;
    int rc = cli_encoder_open("embed", dir, input, batch, 1, &rf, &r);
    if (rc != CLI_EXIT_OK || r.ds == NULL)
        goto done;
    const size_t n = clf_seqdata_size(r.ds), C = (size_t)clf_model_dims_get(r.m).C;
    if ((out = malloc(n * C * sizeof *out)) == NULL) {
        st = clf_error_set(&err, CLF_ERR_MEMORY, "embed: out of host memory");
        goto fail;
    }
    if ((st = clf_seqeval_embed(r.m, r.ds, &r.bo, !raw, out, &err)) != CLF_OK)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        const float *v = out + i * C;
        fputs(json ? "[" : "", stdout);
        for (size_t j = 0; j < C; j++)
            printf(j == 0 ? "%.9g" : json ? ", %.9g" : " %.9g", (double)v[j]);
        fputs(json ? "]\n" : "\n", stdout);
    }
    fflush(stdout);
    cli_print_profile(r.rt, stderr); /* prints only with --profile */
    rc = CLI_EXIT_OK;
    goto done;
fail:
    cli_print_error(NULL, &err);
    rc = cli_exit_code(st);
done:
    free(out);
    cli_encoder_close(&r);
    return rc;
}
