/*
 * cmd_export.c - `clformer export DIR --dtype bf16|f16|f32 --out FILE`:
 * a checkpoint's parameters, without the optimizer state, in 16 bits (half
 * the size) or 32, with its config and tokenizer, for the inference
 * commands (sample, eval, translate, classify take the FILE where they take
 * a run DIR); `--format gpt2 --out FOLDER`: a GPT as a Hugging Face GPT-2
 * folder (clf_export_gpt2), `--format llama --out FOLDER`: a Llama-layout
 * decoder as a Hugging Face Llama (or Mistral) folder (clf_export_llama);
 * `clformer import` reads either back bit for bit.
 *
 *   clformer export runs/cpu --dtype bf16 --out gpt-cpu.bf16.safetensors
 *   clformer sample gpt-cpu.bf16.safetensors --prompt "ROMEO:"
 *   clformer export runs/bpe-gpt --format gpt2 --out hf-gpt2/
 *
 * No device is needed: the tensors are converted on the host
 * (clf_checkpoint_export), rounding to nearest even.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

/* The files a Hugging Face export writes into its folder. */
static const char *const hf_files[] = {"config.json", "model.safetensors", "vocab.json",
                                       "merges.txt"};

/* Without --force, an export replaces nothing that would be lost: a
 * training checkpoint (one with optimizer state: --resume needs it) at
 * --out, or the files of a Hugging Face folder already at --out. 1 (after
 * saying why) when out is such a target. */
static int would_clobber(const char *out, int folder)
{
    struct stat sb;
    if (folder) {
        char path[4096], names[256] = "";
        for (size_t i = 0; i < sizeof hf_files / sizeof hf_files[0]; i++) {
            snprintf(path, sizeof path, "%s/%s", out, hf_files[i]);
            if (stat(path, &sb) == 0)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                         names[0] ? ", " : "", hf_files[i]);
        }
        if (names[0] == '\0')
            return 0;
        fprintf(stderr,
                "clformer export: --out %s already holds %s: pass --force to replace them, or "
                "choose a new folder\n",
                out, names);
        return 1;
    }
    if (stat(out, &sb) != 0 || !S_ISREG(sb.st_mode))
        return 0;
    clf_checkpoint *ck = NULL;
    clf_error err;
    const int training =
        clf_checkpoint_open(out, &ck, &err) == CLF_OK && clf_checkpoint_has_optim(ck);
    const unsigned long long step = training ? (unsigned long long)clf_checkpoint_step(ck) : 0;
    clf_checkpoint_close(ck);
    if (!training)
        return 0;
    fprintf(stderr,
            "clformer export: --out %s is a training checkpoint (step %llu, with the optimizer "
            "state --resume needs): pass --force to replace it with bare parameters, or choose "
            "another name\n",
            out, step);
    return 1;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: clformer export DIR --out FILE [--dtype bf16|f16|f32] [--force]\n"
            "       clformer export DIR --format gpt2|llama --out FOLDER [--force]\n"
            "Write the parameters of DIR's checkpoint (a run directory or a .safetensors\n"
            "file) to FILE as bfloat16 (default), float16 or float32, with the model's config\n"
            "and tokenizer and without the optimizer state: bf16 and f16 are half the size.\n"
            "sample, eval, translate and classify open FILE as they open a run directory\n"
            "(the parameters widened back to float32). f16 overflows beyond 65504 (to inf)\n"
            "and loses precision below 6e-5; bf16 keeps float32's range with 8 bits of\n"
            "mantissa.\n"
            "  --out FILE        the exported checkpoint (.safetensors), written atomically\n"
            "  --force           replace a training checkpoint at --out, or the files of a\n"
            "                    Hugging Face folder at --out (refused without it)\n"
            "  --dtype T         bf16 (default), f16 or f32\n"
            "  --format F        clformer (default: a checkpoint FILE) or gpt2: a Hugging Face\n"
            "                    GPT-2 folder (config.json, model.safetensors, vocab.json,\n"
            "                    merges.txt) of a GPT with a bpe tokenizer and GPT-2's shape,\n"
            "                    or llama: a Hugging Face Llama folder (Mistral's with a\n"
            "                    sliding window) of a decoder with RMSNorm, SwiGLU and RoPE\n");
}

int cli_cmd_export(int argc, char **argv)
{
    const char *dir = NULL, *out = NULL, *dtype = "bf16", *format = "clformer";
    int force = 0;
    const cli_opt opts[] = {
        {"--out", CLI_OPT_STR, &out, 0, 0, NULL},
        {"--force", CLI_OPT_BOOL, &force, 0, 0, NULL},
        {"--dtype", CLI_OPT_STR, &dtype, 0, 0, NULL},
        {"--format", CLI_OPT_STR, &format, 0, 0, NULL},
    };
    const cli_command cmd = {"clformer export", opts, CLI_COUNT(opts), NULL, &dir, 1,
                             "one DIR",         usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    if (dir == NULL || out == NULL) {
        fprintf(stderr, "clformer export: %s\n",
                dir == NULL ? "DIR (a training run's --out, or a checkpoint file) expected"
                            : "--out FILE is required");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const int gpt2 = strcmp(format, "gpt2") == 0, llama = strcmp(format, "llama") == 0;
    if (!force && would_clobber(out, gpt2 || llama))
        return CLI_EXIT_USAGE;
    if (gpt2 || llama) {
        clf_error err;
        clf_status st = gpt2 ? clf_export_gpt2(dir, out, &err) : clf_export_llama(dir, out, &err);
        if (st != CLF_OK) {
            cli_print_error(NULL, &err);
            return st == CLF_ERR_UNSUPPORTED ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
        }
        printf("%s: %s as a Hugging Face %s folder (config.json, model.safetensors, "
               "vocab.json, merges.txt)\n",
               out, dir, gpt2 ? "GPT-2" : "Llama");
        return CLI_EXIT_OK;
    }
    if (strcmp(format, "clformer") != 0) {
        fprintf(stderr, "clformer export: --format: expected clformer, gpt2 or llama, got '%s'\n",
                format);
        return CLI_EXIT_USAGE;
    }
    clf_st_dtype t;
    if (strcmp(dtype, "bf16") == 0) {
        t = CLF_ST_BF16;
    } else if (strcmp(dtype, "f16") == 0) {
        t = CLF_ST_F16;
    } else if (strcmp(dtype, "f32") == 0) {
        t = CLF_ST_F32;
    } else {
        fprintf(stderr, "clformer export: --dtype: expected bf16, f16 or f32, got '%s'\n", dtype);
        return CLI_EXIT_USAGE;
    }
    clf_error err;
    clf_status st = clf_checkpoint_export(dir, out, t, &err);
    if (st != CLF_OK) {
        cli_print_error(NULL, &err);
        return st == CLF_ERR_FORMAT || st == CLF_ERR_IO ? CLI_EXIT_FAIL : cli_exit_code(st);
    }
    printf("%s: the parameters of %s as %s\n", out, dir, dtype);
    return CLI_EXIT_OK;
}
