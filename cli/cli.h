/*
 * cli.h - what the clformer subcommands share: runtime flags, error reporting
 * and exit codes.
 *
 * Exit codes: 0 success, 1 a run failed (I/O, device, numerical), 2 bad usage
 * (unknown flag, bad value, a device selector that matches nothing, an
 * invalid config), 130 interrupted by Ctrl-C.
 *
 * Only cli/ prints for the user and exits; the library returns statuses.
 */
#ifndef CLF_CLI_H
#define CLF_CLI_H

#include <stdio.h>

#include "runtime/runtime.h"

enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2, CLI_EXIT_INTERRUPTED = 130 };

/* Flags every device-using subcommand accepts. */
typedef struct cli_runtime_flags {
    const char *device; /* --device, else $CLFORMER_DEVICE */
    int no_cache;       /* --no-cache */
    int profile;        /* --profile */
    const char *gemm;   /* --gemm clblast|native|auto */
    const char *kernel_dir; /* --kernel-dir, else $CLFORMER_KERNEL_DIR */
    const char *cache_dir;  /* --cache-dir, else the XDG default */
    char cache_dir_buf[1024];
} cli_runtime_flags;

#define CLI_RUNTIME_FLAGS_HELP                                                                  \
    "  --device SEL      device: index (0), platform:device (1:0), type (gpu, cpu, gpu:1)\n"   \
    "                    or part of its name; default $CLFORMER_DEVICE, else first GPU/CPU\n" \
    "  --gemm ENGINE     auto (default), clblast or native\n"                                   \
    "  --no-cache        neither read nor write the compiled-kernel cache\n"                    \
    "  --cache-dir DIR   kernel cache (default $CLFORMER_CACHE_DIR, $XDG_CACHE_HOME/clformer)\n" \
    "  --kernel-dir DIR  load cl/*.cl from DIR instead of the embedded copies\n"                \
    "  --profile         print per-kernel counts and device time at the end\n"

void cli_runtime_flags_init(cli_runtime_flags *f);
/* If argv[*i] is a runtime flag, consume it (and its value) and return 1;
 * return 0 if it is not one; on a missing value print usage and return -1. */
int cli_runtime_flag(cli_runtime_flags *f, int argc, char **argv, int *i);
/* Build runtime options from flags; returns 0 or prints and returns exit code. */
int cli_runtime_open(const cli_runtime_flags *f, clf_runtime **rt);
/* Print a library error to stderr as "clformer: <where>: <msg>". */
void cli_print_error(const char *context, const clf_error *err);
/* Exit code for a library status. */
int cli_exit_code(clf_status st);
/* Print the profile table of rt (if profiling). */
void cli_print_profile(clf_runtime *rt, FILE *out);
/* Flag value helper: returns argv[++*i] or NULL after printing an error. */
const char *cli_flag_value(int argc, char **argv, int *i);
/* Strict numeric parsing of flag values; print "--flag: expected ..." on error. */
int cli_parse_int(const char *flag, const char *s, long lo, long hi, long *out);
int cli_parse_float(const char *flag, const char *s, double lo, double hi, double *out);

/* Subcommands. */
int cli_cmd_devices(int argc, char **argv);
int cli_cmd_selftest(int argc, char **argv);
int cli_cmd_train(int argc, char **argv);
int cli_cmd_sample(int argc, char **argv);
int cli_cmd_eval(int argc, char **argv);
int cli_cmd_info(int argc, char **argv);
int cli_cmd_tokenizer(int argc, char **argv);
int cli_cmd_translate(int argc, char **argv);
int cli_cmd_classify(int argc, char **argv);

#endif
