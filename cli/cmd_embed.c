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
                "clformer embed: %s holds a model of kind %s; sentence embeddings need an "
                "encoder\n",
                dir, clf_config_kind_name(cfg.kind));
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if ((rc = cli_read_sentences("embed", input, &cfg, tok, &ds)) != CLI_EXIT_OK || ds == NULL)
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
    const size_t C = (size_t)clf_model_dims_get(m).C;
    if ((out = malloc(n * C * sizeof *out)) == NULL) {
        st = clf_error_set(&err, CLF_ERR_MEMORY, "embed: out of host memory");
        goto fail;
    }
    if ((st = clf_seqeval_embed(m, ds, &bo, !raw, out, &err)) != CLF_OK)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        const float *v = out + i * C;
        fputs(json ? "[" : "", stdout);
        for (size_t j = 0; j < C; j++)
            printf(j == 0 ? "%.9g" : json ? ", %.9g" : " %.9g", (double)v[j]);
        fputs(json ? "]\n" : "\n", stdout);
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
