/*
 * cmd_average.c - `clformer average CKPT... --out FILE`: the mean of the
 * parameters of several checkpoints of one model (clf_checkpoint_average),
 * as the Transformer paper averages the last checkpoints of a run:
 *
 *   clformer train config/models/transformer-multi30k.yaml ... --set train.keep_last=5
 *   clformer average runs/multi30k/ckpt-*.safetensors --out runs/multi30k/avg.safetensors
 *   clformer eval runs/multi30k/avg.safetensors --data ../shared/data/multi30k --json
 *
 * No device is needed (host arithmetic). A checkpoint of another model, a
 * missing or corrupt file: exit 2 naming it. FILE is written atomically.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: clformer average CKPT... --out FILE [--no-ema]\n"
                 "Average the parameters of the checkpoints CKPT (run directories or .safetensors\n"
                 "files of one model; each one's moving average where train.ema kept one) into\n"
                 "FILE, a checkpoint that sample, eval, translate, classify and export open.\n"
                 "  --out FILE        the averaged checkpoint (.safetensors), written atomically\n"
                 "  --no-ema          average the trained parameters, not the moving averages\n");
}

enum { MAX_CKPT = 256 };

int cli_cmd_average(int argc, char **argv)
{
    const char *out = NULL;
    int raw = 0;
    const char *paths[MAX_CKPT];
    int n = 0;
    for (int i = 0; i < argc; i++) { /* argv: the arguments after `average` */
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (strcmp(argv[i], "--no-ema") == 0) {
            raw = 1;
        } else if (strcmp(argv[i], "--out") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "clformer average: --out needs a FILE\n");
                return CLI_EXIT_USAGE;
            }
            out = argv[++i];
        } else if (strncmp(argv[i], "--", 2) == 0) {
            fprintf(stderr, "clformer average: unknown flag '%s'\n", argv[i]);
            usage(stderr);
            return CLI_EXIT_USAGE;
        } else if (n == MAX_CKPT) {
            fprintf(stderr, "clformer average: at most %d checkpoints\n", MAX_CKPT);
            return CLI_EXIT_USAGE;
        } else {
            paths[n++] = argv[i];
        }
    }
    if (n == 0 || out == NULL) {
        fprintf(stderr, "clformer average: %s\n",
                n == 0 ? "CKPT... (checkpoints to average) expected" : "--out FILE is required");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    for (int i = 0; i < n; i++)
        if (strcmp(paths[i], out) == 0) {
            fprintf(stderr, "clformer average: --out %s is one of the checkpoints averaged\n", out);
            return CLI_EXIT_USAGE;
        }
    clf_error err;
    clf_status st = clf_checkpoint_average(paths, n, raw, out, &err);
    if (st != CLF_OK) {
        cli_print_error(NULL, &err);
        return st == CLF_ERR_MEMORY ? CLI_EXIT_FAIL : CLI_EXIT_USAGE;
    }
    printf("%s: the mean of %d checkpoint%s\n", out, n, n == 1 ? "" : "s");
    return CLI_EXIT_OK;
}
