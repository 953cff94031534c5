/*
 * cmd_sample.c - `clformer sample DIR [--prompt TEXT] [--tokens N]
 * [--temperature T] [--top-k K] [--top-p P] [--seed S]`: generate text from
 * a trained model, streaming each token to stdout as it is produced.
 *
 * Generation uses the KV cache (model.h): the prompt goes through one
 * batched prefill, then every new token is one clf_model_decode_step, the
 * work of one position. Positions are absolute and the cache holds the
 * model's context T; when it is full, the window slides: the last T - 1
 * tokens are prefilled again at positions 0..T-2 (their logits give the
 * next token), and decoding continues at position T - 1. So past the first
 * T tokens, every second token costs a prefill of T - 1 positions; each
 * token still sees at least T - 1 tokens of context, as when a model without
 * a cache crops its input to the last T tokens (nanoGPT's generate).
 *
 * The prompt is encoded with the checkpoint's tokenizer; a character it
 * does not know is an error naming it. An empty prompt starts from a
 * newline (or token 0 if the vocabulary has none). A prompt longer than T
 * is cut to its last T tokens. Sampling: model/sampler.h (temperature 0 is
 * greedy; a seed makes the output reproducible). The text goes to stdout,
 * the timing to stderr.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli_model.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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
            "  --quiet           do not echo the prompt, no timing line\n" CLI_RUNTIME_FLAGS_HELP);
}

int cli_cmd_sample(int argc, char **argv)
{
    const char *dir = NULL, *prompt = "";
    long n_tokens = 200, top_k = 0;
    double temperature = 0.8, top_p = 1.0;
    int quiet = 0;
    uint64_t seed = 1337;
    cli_runtime_flags rf;
    cli_runtime_flags_init(&rf);
    const cli_opt opts[] = {
        {"--prompt", CLI_OPT_STR, &prompt, 0, 0, NULL},
        {"--tokens", CLI_OPT_INT, &n_tokens, 1, 100000000, NULL},
        {"--temperature", CLI_OPT_FLOAT, &temperature, 0.0, 100.0, NULL},
        {"--top-k", CLI_OPT_INT, &top_k, 0, 100000000, NULL},
        {"--top-p", CLI_OPT_FLOAT, &top_p, 1e-9, 1.0, NULL},
        {"--seed", CLI_OPT_U64, &seed, 0, 0, NULL},
        {"--quiet", CLI_OPT_BOOL, &quiet, 0, 0, NULL},
    };
    const cli_command cmd = {"clformer sample", opts, CLI_COUNT(opts), &rf, &dir, 1, "one DIR",
                             usage};
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
    clf_model *m = NULL;
    clf_tokenizer *tok = NULL;
    clf_sampler *smp = NULL;
    int32_t *seq = NULL, *ids = NULL;
    float *logits = NULL;
    clf_model_config cfg;
    clf_error err;
    clf_error_clear(&err);
    clf_status st = CLF_OK;
    int rc = cli_runtime_open(&rf, &rt);
    if (rc != CLI_EXIT_OK)
        return rc;
    if ((rc = cli_checkpoint_open(rt, dir, CLF_MODEL_INFER, 1, &cfg, &tok, &m)) != CLI_EXIT_OK)
        goto done;
    clf_model_dims d = clf_model_dims_get(m);
    const int T = d.T, V = d.V;

    size_t n_prompt = 0;
    if ((st = clf_tokenizer_encode(tok, prompt, strlen(prompt), &ids, &n_prompt, &err)) !=
        CLF_OK) {
        clf_error_prefix(&err, "--prompt");
        goto fail;
    }
    size_t cap = n_prompt + (size_t)n_tokens + 1;
    seq = malloc(cap * sizeof *seq);
    logits = malloc((size_t)V * sizeof *logits);
    if (seq == NULL || logits == NULL) {
        st = clf_error_set(&err, CLF_ERR_MEMORY, "out of host memory");
        goto fail;
    }
    size_t n = 0;
    if (n_prompt == 0) {
        int32_t *nl = NULL;
        size_t k = 0;
        seq[n++] = clf_tokenizer_encode(tok, "\n", 1, &nl, &k, NULL) == CLF_OK && k == 1 ? nl[0]
                                                                                         : 0;
        free(nl);
    } else {
        memcpy(seq, ids, n_prompt * sizeof *seq);
        n = n_prompt;
    }
    if ((st = clf_sampler_create(V, &so, &smp, &err)) != CLF_OK)
        goto fail;

    if (!quiet) {
        fputs(prompt, stdout);
        fflush(stdout);
    }
    double t0 = now_s();
    size_t w = n < (size_t)T ? n : (size_t)T; /* tokens in the cache */
    if ((st = clf_model_prefill(m, seq + n - w, 1, (int)w, logits, &err)) != CLF_OK)
        goto fail;
    int pos = (int)w;
    long slides = 0;
    for (long i = 0; i < n_tokens; i++) {
        int tk = clf_sampler_sample(smp, logits, V);
        if (tk < 0) {
            st = clf_error_set(&err, CLF_ERR_ARG,
                               "the model produced no valid logits (NaN) at token %ld", i);
            goto fail;
        }
        seq[n++] = tk;
        const char *piece = NULL;
        size_t plen = 0;
        if (clf_tokenizer_piece(tok, tk, &piece, &plen) && plen > 0) {
            fwrite(piece, 1, plen, stdout);
            fflush(stdout);
        }
        if (i + 1 == n_tokens)
            break;
        if (pos < T) {
            int32_t one = tk;
            if ((st = clf_model_decode_step(m, &one, 1, pos, logits, &err)) != CLF_OK)
                goto fail;
            pos++;
        } else { /* the cache is full: slide by re-prefilling the last T - 1 tokens */
            int k = T > 1 ? T - 1 : 1;
            if ((st = clf_model_prefill(m, seq + n - (size_t)k, 1, k, logits, &err)) != CLF_OK)
                goto fail;
            pos = k;
            slides++;
        }
    }
    double dt = now_s() - t0;
    fputc('\n', stdout);
    fflush(stdout);
    if (!quiet)
        fprintf(stderr, "[%ld tokens in %.2fs: %.1f tokens/s; context %d, %ld slides]\n",
                n_tokens, dt, dt > 0 ? (double)n_tokens / dt : 0.0, T, slides);
    cli_print_profile(rt, stderr); /* prints only with --profile */
    rc = CLI_EXIT_OK;
    goto done;
fail:
    cli_print_error(NULL, &err);
    rc = cli_exit_code(st);
done:
    free(ids);
    free(seq);
    free(logits);
    clf_sampler_destroy(smp);
    clf_model_destroy(m);
    clf_tokenizer_destroy(tok);
    clf_runtime_destroy(rt);
    return rc;
}
