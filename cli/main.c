/*
 * main.c - the clformer command line: dispatch to subcommands.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"devices", cli_cmd_devices, "list OpenCL platforms and devices"},
    {"selftest", cli_cmd_selftest, "build every kernel family and check GEMM on a device"},
    {"train", cli_cmd_train,
     "train a model described in YAML (on a text, parallel sentences or a labelled TSV)"},
    {"sample", cli_cmd_sample, "generate text from a trained model"},
    {"eval", cli_cmd_eval, "validation loss and perplexity, accuracy or BLEU of a trained model"},
    {"info", cli_cmd_info, "parameters, FLOPs per token and memory of a model file"},
    {"tokenizer", cli_cmd_tokenizer,
     "train a BPE tokenizer on text files; encode and decode with one"},
    {"translate", cli_cmd_translate,
     "translate sentences (stdin -> stdout) with an encoder-decoder"},
    {"classify", cli_cmd_classify, "label sentences (stdin -> stdout) with an encoder classifier"},
    {"tune", cli_cmd_tune, "time the GEMM candidates on a model's shapes; keep the fastest"},
    {"export", cli_cmd_export, "a checkpoint's parameters in bf16 / f16 (half the size) or f32"},
    {"average", cli_cmd_average, "the mean of several checkpoints' parameters (one model)"},
    {"import", cli_cmd_import, "a Hugging Face folder (BERT, GPT-2, Llama layout) as a checkpoint"},
    {"embed", cli_cmd_embed, "sentence embeddings (stdin -> stdout) with an encoder"},
    {"attention", cli_cmd_attention,
     "heatmaps of one layer's attention weights for one input (SVG)"},
    {"report", cli_cmd_report, "one self-contained HTML page of a training run"},
    {"plot", cli_cmd_plot, "training curves of runs (their metrics.jsonl) as an SVG chart"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: clformer COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "\n`clformer COMMAND --help` describes a command's flags.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            int rc = commands[i].run(argc - 2, argv + 2);
            /* a result that did not reach stdout whole (a full disk, a
             * closed pipe) is a failure; train's stdout is only progress,
             * which a closed pipe may cut short (cmd_train.c) */
            errno = 0;
            if ((fflush(stdout) != 0 || ferror(stdout)) && rc == CLI_EXIT_OK &&
                strcmp(argv[1], "train") != 0) {
                fprintf(stderr, "clformer %s: writing to standard output failed%s%s\n", argv[1],
                        errno != 0 ? ": " : "", errno != 0 ? strerror(errno) : "");
                rc = CLI_EXIT_FAIL;
            }
            return rc;
        }
    fprintf(stderr, "clformer: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
