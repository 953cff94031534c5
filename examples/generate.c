/*
 * generate.c - the smallest program built on libclformer: open a trained
 * model and continue a prompt with it.
 *
 *   cc generate.c $(pkg-config --cflags --libs clformer) -o generate
 *   ./generate runs/cpu "ROMEO:" 100
 *
 * Arguments: a run directory (a `clformer train --out`) or a .safetensors
 * checkpoint, a prompt (default: a newline) and a token count (default 100).
 * The device comes from CLFORMER_DEVICE (default: the first GPU, else the
 * first CPU). Compiled kernels are cached where and as the clformer command
 * caches them ($CLFORMER_CACHE_DIR, else $XDG_CACHE_HOME/clformer, else
 * ~/.cache/clformer; binaries, or notes with CLFORMER_KERNEL_BINARIES=notes),
 * so only a first run on a device compiles them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clformer.h>

static int print_piece(void *user, int32_t token, const char *piece, size_t len)
{
    (void)user;
    (void)token;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    return 0; /* nonzero would stop here */
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: %s CHECKPOINT [PROMPT] [TOKENS]\n", argv[0]);
        return 2;
    }
    const char *prompt = argc > 2 ? argv[2] : "";
    const long tokens = argc > 3 ? strtol(argv[3], NULL, 10) : 100;

    clf_error err;
    clf_error_clear(&err);
    clf_runtime *rt = NULL;
    clf_checkpoint *ck = NULL;
    clf_tokenizer *tok = NULL;
    clf_model *m = NULL;
    char cache_dir[1024];
    clf_cache_dir_default(getenv("CLFORMER_CACHE_DIR"), getenv("XDG_CACHE_HOME"), getenv("HOME"),
                          cache_dir, sizeof cache_dir);
    clf_runtime_options opt = clf_runtime_options_default();
    opt.device = getenv("CLFORMER_DEVICE");
    opt.cache_dir = cache_dir[0] != '\0' ? cache_dir : NULL;
    if (!clf_binaries_parse(getenv("CLFORMER_KERNEL_BINARIES"), &opt.binaries)) {
        fprintf(stderr, "generate: CLFORMER_KERNEL_BINARIES: expected keep or notes\n");
        return 2;
    }

    clf_sampler_options so = clf_sampler_options_default();
    so.temperature = 0.8;
    clf_generate_stats stats;
    clf_status st = clf_runtime_create(&rt, &opt, &err);
    if (st == CLF_OK)
        st = clf_checkpoint_open(argv[1], &ck, &err);
    if (st == CLF_OK)
        st = clf_checkpoint_tokenizer_create(ck, &tok, &err);
    if (st == CLF_OK) {
        const clf_model_limits one = {.B = 1};
        st = clf_checkpoint_model_create(ck, rt, &one, CLF_MODEL_INFER, &m, &err);
    }
    if (st == CLF_OK) {
        fputs(prompt, stdout);
        st = clf_generate(m, tok, prompt, strlen(prompt), tokens, &so, print_piece, NULL, &stats,
                          &err);
        fputc('\n', stdout);
    }
    if (st == CLF_OK)
        fprintf(stderr, "[clformer %s on %s: %ld tokens, %.1f tokens/s]\n", clf_version(),
                clf_runtime_device(rt)->name, stats.tokens,
                stats.seconds > 0 ? stats.tokens / stats.seconds : 0.0);
    else {
        char msg[CLF_ERROR_MSG_MAX];
        clf_error_format(&err, msg, sizeof msg);
        fprintf(stderr, "generate: %s\n", msg);
    }
    clf_model_destroy(m);
    clf_tokenizer_destroy(tok);
    clf_checkpoint_close(ck);
    clf_runtime_destroy(rt);
    return st == CLF_OK ? 0 : 1;
}
