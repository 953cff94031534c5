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

/* embed's flags the rows need. */
typedef struct embed_flags {
    int json, raw;
} embed_flags;

static size_t width(const cli_encoder_run *r) { return (size_t)clf_model_dims_get(r->m).C; }

static clf_status vectors(const cli_encoder_run *r, float *out, const void *user, clf_error *err)
{
    const embed_flags *f = user;
    return clf_seqeval_embed(r->m, r->ds, &r->bo, !f->raw, out, err);
}

/* Numbers separated by spaces, or (--json) one JSON array. */
static void print_vector(const float *v, size_t C, const void *user)
{
    const int json = ((const embed_flags *)user)->json;
    fputs(json ? "[" : "", stdout);
    for (size_t j = 0; j < C; j++)
        printf(j == 0 ? "%.9g" : json ? ", %.9g" : " %.9g", (double)v[j]);
    fputs(json ? "]\n" : "\n", stdout);
}

int cli_cmd_embed(int argc, char **argv)
{
    const char *dir = NULL, *input = NULL;
    long batch = 64;
    embed_flags f = {0, 0};
    cli_runtime_flags rf;
    cli_runtime_flags_init(&rf);
    const cli_opt opts[] = {
        {"--batch", CLI_OPT_INT, &batch, 1, 65536, NULL},
        {"--json", CLI_OPT_BOOL, &f.json, 0, 0, NULL},
        {"--raw", CLI_OPT_BOOL, &f.raw, 0, 0, NULL},
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
    const cli_encoder_rows job = {"embed", 1, width, vectors, print_vector, &f};
    return cli_encoder_rows_run(&job, dir, input, batch, &rf);
}
