/*
 * cmd_sample.c - `clformer sample DIR [--prompt TEXT] [--tokens N]
 * [--temperature T] [--top-k K] [--top-p P] [--seed S] [--context N
 * [--rope-scaling S]]`: generate text from a trained model, streaming each
 * token to stdout as it is produced; --context runs it at another context
 * (past the trained one with rotary positions scaled: clf_config_set_context).
 *
 * The generation loop (KV cache, sliding context window) is the library's
 * clf_generate (model/infer/generate.h); this file parses flags, streams
 * each token's text to stdout and prints the timing to stderr. Sampling:
 * model/infer/sampler.h (temperature 0 is greedy; a seed makes the output
 * reproducible).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_model.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: clformer sample DIR [--prompt TEXT] [--tokens N] [--temperature T]\n"
            "                       [--top-k K] [--top-p P] [--seed S] [runtime flags]\n"
            "Generate text from the checkpoint in DIR (or a .safetensors file), streamed.\n"
            "  --prompt TEXT     text to continue (default: a newline)\n"
            "  --tokens N        tokens to generate (default 200)\n"
            "  --temperature T   0 = greedy, 1 = the model's distribution (default 0.8)\n"
            "  --top-k K         sample among the K most likely tokens (0 = off, default)\n"
            "  --top-p P         nucleus: the smallest set with probability >= P (1 = off)\n"
            "  --seed S          random seed (default 1337)\n"
            "  --quiet           do not echo the prompt, no timing line\n" CLI_CONTEXT_FLAGS_HELP
                CLI_RUNTIME_FLAGS_HELP);
}

/* The streamed text's state: the prompt still to echo (NULL once echoed
 * or with --quiet) and the first write error (errno), which stops
 * generation. */
typedef struct sample_out {
    const char *prompt;
    int write_errno;
    const cli_runtime_flags *rf; /* its first-use notices end before the text */
} sample_out;

/* Streams each token's text as it is produced; the prompt (unless NULL)
 * goes first, once the library has accepted it. */
static int print_piece(void *user, int32_t token, const char *piece, size_t len)
{
    sample_out *o = user;
    (void)token;
    cli_notice_end(o->rf);
    errno = 0;
    if (o->prompt != NULL) {
        const size_t n = strlen(o->prompt);
        if (fwrite(o->prompt, 1, n, stdout) != n)
            goto fail;
        o->prompt = NULL;
    }
    if (len > 0 && (fwrite(piece, 1, len, stdout) != len || fflush(stdout) != 0))
        goto fail;
    return 0;
fail:
    o->write_errno = errno != 0 ? errno : EIO;
    return 1;
}

int cli_cmd_sample(int argc, char **argv)
{
    const char *dir = NULL, *prompt = "", *rope_scaling = NULL;
    long n_tokens = 200, top_k = 0, context = 0;
    double temperature = 0.8, top_p = 1.0;
    int quiet = 0;
    uint64_t seed = 1337;
    cli_runtime_flags rf;
    cli_runtime_flags_init(&rf);
    const cli_opt opts[] = {
        {"--prompt", CLI_OPT_TEXT, &prompt, 0, 0, NULL},
        {"--tokens", CLI_OPT_INT, &n_tokens, 1, 100000000, NULL},
        {"--temperature", CLI_OPT_FLOAT, &temperature, 0.0, 100.0, NULL},
        {"--top-k", CLI_OPT_INT, &top_k, 0, 100000000, NULL},
        {"--top-p", CLI_OPT_FLOAT, &top_p, 1e-9, 1.0, NULL},
        {"--seed", CLI_OPT_U64, &seed, 0, 0, NULL},
        {"--quiet", CLI_OPT_BOOL, &quiet, 0, 0, NULL},
        {"--context", CLI_OPT_INT, &context, 1, 1048576, NULL},
        {"--rope-scaling", CLI_OPT_STR, &rope_scaling, 0, 0, NULL},
    };
    const cli_command cmd = {"clformer sample", opts, CLI_COUNT(opts), &rf, &dir, 1,
                             "one DIR",         usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    if (dir == NULL) {
        fprintf(stderr, "clformer sample: DIR (a training run's --out) expected\n");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }

    clf_sampler_options so = clf_sampler_options_default();
    so.temperature = temperature;
    so.top_k = (int)top_k;
    so.top_p = top_p;
    so.seed = seed;

    clf_runtime *rt = NULL;
    clf_checkpoint *ck = NULL;
    clf_model *m = NULL;
    clf_tokenizer *tok = NULL;
    clf_model_config cfg;
    clf_error err;
    clf_error_clear(&err);
    int rc = cli_runtime_open(&rf, &rt);
    if (rc != CLI_EXIT_OK)
        return rc;
    if ((rc = cli_checkpoint_open(dir, &ck, &cfg, &tok)) != CLI_EXIT_OK)
        goto done;
    if (cfg.kind != CLF_MODEL_DECODER) {
        fprintf(stderr,
                "clformer sample: %s holds a model of kind %s; sampling needs a decoder (GPT)%s\n",
                dir, clf_config_kind_name(cfg.kind),
                cfg.kind == CLF_MODEL_ENCODER_DECODER ? ": use `clformer translate`" : "");
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if ((rc = cli_checkpoint_context("clformer sample", ck, &cfg, context, rope_scaling)) !=
        CLI_EXIT_OK)
        goto done;
    if ((rc = cli_checkpoint_model(rt, ck, &(clf_model_limits){.B = 1}, CLF_MODEL_INFER, &m)) !=
        CLI_EXIT_OK)
        goto done;
    sample_out out = {quiet ? NULL : prompt, 0, &rf};
    clf_generate_stats gs;
    clf_status st =
        clf_generate(m, tok, prompt, strlen(prompt), n_tokens, &so, print_piece, &out, &gs, &err);
    if (st != CLF_OK) {
        cli_print_error(NULL, &err); /* a bad prompt reads "prompt: ..." */
        rc = cli_exit_code(st);
        goto done;
    }
    if (out.write_errno == 0 && (fputc('\n', stdout) == EOF || fflush(stdout) != 0))
        out.write_errno = errno != 0 ? errno : EIO;
    if (out.write_errno != 0) {
        fprintf(stderr, "clformer sample: writing the text to standard output failed: %s\n",
                strerror(out.write_errno));
        rc = CLI_EXIT_FAIL;
        goto done;
    }
    if (!quiet)
        fprintf(stderr, "[%ld tokens in %.2fs: %.1f tokens/s; context %d, %ld slides]\n", gs.tokens,
                gs.seconds, gs.seconds > 0 ? (double)gs.tokens / gs.seconds : 0.0,
                clf_model_dims_get(m).T, gs.slides);
    cli_print_profile(rt, stderr); /* prints only with --profile */
    rc = CLI_EXIT_OK;
done:
    clf_checkpoint_close(ck);
    clf_model_destroy(m);
    clf_tokenizer_destroy(tok);
    clf_runtime_destroy(rt);
    return rc;
}
