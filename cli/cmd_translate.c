/*
 * cmd_translate.c - `clformer translate DIR [--beam K] [--alpha A]
 * [--batch N] [--max-len-a A] [--max-len-b B] [--input FILE]
 * < source.txt > hypotheses.txt`: translate one sentence per line with a
 * trained encoder-decoder.
 *
 * The lines are tokenized with the checkpoint's tokenizer (sources longer
 * than the model's context are cut, and reported on stderr), sorted by
 * length into batches of N sentences, searched with beam K (model/infer/beam.h:
 * 1 = greedy; length penalty score / len^alpha; at most max_len_a x S +
 * max_len_b tokens for a source of S tokens), detokenized, and printed in
 * input order, one line per input line (an empty line gets a translation
 * too). A summary (sentences, tokens, time) goes to stderr.
 *
 * Not here: n-best output, sampling, streaming (the input is read whole).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_data.h"
#include "cli/cli_model.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: clformer translate DIR [--beam K] [--alpha A] [--batch N] [--max-len-a A]\n"
            "                          [--max-len-b B] [--input FILE] [runtime flags]\n"
            "                          < source.txt > hypotheses.txt\n"
            "Translate one sentence per line with the encoder-decoder checkpoint in DIR (or a\n"
            ".safetensors file); the translations come out in input order.\n"
            "  --beam K          beam size (default 5; 1 = greedy)\n"
            "  --alpha A         length penalty: hypotheses ranked by logprob / len^A (default 1)\n"
            "  --batch N         sentences searched together (default 64)\n"
            "  --max-len-a A     at most A x source tokens + B tokens per translation\n"
            "  --max-len-b B     (defaults 1.5 and 10; capped by the model's context)\n"
            "  --input FILE      read FILE (plain or gzip) instead of standard input\n"
            "  --quiet           no summary on stderr\n" CLI_RUNTIME_FLAGS_HELP);
}

/* The flags into bo and the rest (CLI_PARSE_RUN to go on, else an exit code). */
static int parse(int argc, char **argv, const char **dir, const char **input, int *quiet,
                 clf_beam_options *bo, cli_runtime_flags *rf)
{
    clf_beam_options_default(bo);
    long beam = 5, batch = bo->batch, max_len_b = bo->max_len_b;
    double alpha = bo->alpha, max_len_a = bo->max_len_a;
    const cli_opt opts[] = {
        {"--beam", CLI_OPT_INT, &beam, 1, CLF_BEAM_MAX, NULL},
        {"--batch", CLI_OPT_INT, &batch, 1, 65536, NULL},
        {"--max-len-b", CLI_OPT_INT, &max_len_b, 0, 1000000, NULL},
        {"--alpha", CLI_OPT_FLOAT, &alpha, 0.0, 100.0, NULL},
        {"--max-len-a", CLI_OPT_FLOAT, &max_len_a, 0.0, 1000.0, NULL},
        {"--input", CLI_OPT_STR, input, 0, 0, NULL},
        {"--quiet", CLI_OPT_BOOL, quiet, 0, 0, NULL},
    };
    const cli_command cmd = {
        "clformer translate", opts, CLI_COUNT(opts), rf, dir, 1, "one DIR", usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    bo->beam = (int)beam;
    bo->batch = (int)batch;
    bo->max_len_b = (int)max_len_b;
    bo->alpha = alpha;
    bo->max_len_a = max_len_a;
    if (*dir == NULL) {
        fprintf(stderr, "clformer translate: DIR (a training run's --out) expected\n");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    clf_error err;
    clf_error_clear(&err);
    if (clf_beam_options_check(bo, &err) != CLF_OK) {
        fprintf(stderr, "clformer translate: %s\n", err.msg);
        return CLI_EXIT_USAGE;
    }
    return CLI_PARSE_RUN;
}

/* One detokenized hypothesis a line; *tokens counts the generated tokens. */
static clf_status print_hyps(const clf_tokenizer *tok, int32_t *const *ids, size_t n,
                             long long *tokens, clf_error *err)
{
    for (size_t i = 0; i < n; i++) {
        char *h = NULL;
        clf_status st = clf_seqeval_detok(tok, ids[i], SIZE_MAX, &h, err);
        if (st != CLF_OK)
            return st;
        for (const int32_t *t = ids[i]; *t >= 0; t++)
            (*tokens)++;
        fputs(h, stdout);
        fputc('\n', stdout);
        free(h);
    }
    fflush(stdout);
    return CLF_OK;
}

int cli_cmd_translate(int argc, char **argv)
{
    const char *dir = NULL, *input = NULL;
    int quiet = 0;
    clf_beam_options bo;
    cli_runtime_flags rf;
    cli_runtime_flags_init(&rf);
    int pr = parse(argc, argv, &dir, &input, &quiet, &bo, &rf);
    if (pr != CLI_PARSE_RUN)
        return pr;
    clf_error err;
    clf_error_clear(&err);
    clf_checkpoint *ck = NULL;
    clf_model_config cfg;
    clf_tokenizer *tok = NULL;
    clf_runtime *rt = NULL;
    clf_model *m = NULL;
    clf_seqdata *ds = NULL;
    int32_t **ids = NULL;
    size_t n = 0;
    clf_status st = CLF_OK;
    int rc = cli_checkpoint_open(dir, &ck, &cfg, &tok);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cfg.kind != CLF_MODEL_ENCODER_DECODER) {
        fprintf(stderr,
                "clformer translate: %s holds a model of kind %s; translation needs "
                "an encoder-decoder\n",
                dir, clf_config_kind_name(cfg.kind));
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    int32_t bos = clf_tokenizer_special(tok, CLF_SPECIAL_BOS);
    int32_t eos = clf_tokenizer_special(tok, CLF_SPECIAL_EOS);
    if ((rc = cli_read_sentences("translate", input, &cfg, tok, &ds)) != CLI_EXIT_OK || ds == NULL)
        goto done; /* an empty input: nothing to do */
    n = clf_seqdata_size(ds);
    if ((rc = cli_runtime_open(&rf, &rt)) != CLI_EXIT_OK)
        goto done;
    {
        clf_model_limits lim;
        clf_beam_model_limits(ds, &bo, cfg.context, &lim);
        if ((rc = cli_checkpoint_model(rt, ck, &lim, CLF_MODEL_INFER, &m)) != CLI_EXIT_OK)
            goto done;
    }
    double t0 = clf_now_seconds();
    if ((st = clf_beam_translate_dataset(m, ds, bos, eos, &bo, &ids, &err)) != CLF_OK)
        goto fail;
    double dt = clf_now_seconds() - t0;
    long long out_tokens = 0;
    cli_notice_end(&rf);
    if ((st = print_hyps(tok, ids, n, &out_tokens, &err)) != CLF_OK)
        goto fail;
    if (!quiet)
        fprintf(stderr,
                "translated %zu sentences (%lld source tokens -> %lld tokens) with beam %d in "
                "%.1fs (%.1f sentences/s)\n",
                n, (long long)clf_seqdata_stats_get(ds)->src.tokens, out_tokens, bo.beam, dt,
                dt > 0 ? n / dt : 0.0);
    cli_print_profile(rt, stderr); /* prints only with --profile */
    rc = CLI_EXIT_OK;
    goto done;
fail:
    cli_print_error(NULL, &err);
    rc = cli_exit_code(st);
done:
    if (ids != NULL) {
        for (size_t i = 0; i < n; i++)
            free(ids[i]);
        free(ids);
    }
    clf_seqdata_destroy(ds);
    clf_model_destroy(m);
    clf_runtime_destroy(rt);
    clf_checkpoint_close(ck);
    clf_tokenizer_destroy(tok);
    return rc;
}
