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

#include <stdint.h>
#include <stdio.h>

#include "model/clformer.h"

enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2, CLI_EXIT_INTERRUPTED = 130 };

/* What the first run on a device says of its slow work (kernels compiled,
 * GEMM candidates timed): one phase at a time, on stderr, a progress line
 * rewritten in place on a terminal (one opening line elsewhere), then one
 * summary line (what, how many, how long) from cli_notice_end, which a
 * command calls before its output starts. cli_runtime_open points the
 * runtime's notify hook at the flags' own copy. */
typedef struct cli_notice {
    char device[256];
    int compiled, searched; /* this phase's programs built and shapes timed */
    int tty;                /* stderr is a terminal: a progress line */
    double t0;              /* the phase's first notice */
} cli_notice;

/* Flags every device-using subcommand accepts. */
typedef struct cli_runtime_flags {
    const char *device;     /* --device, else $CLFORMER_DEVICE */
    int no_cache;           /* --no-cache */
    int profile;            /* --profile */
    const char *gemm;       /* --gemm auto|clblast|native|CONFIG */
    const char *kernel_dir; /* --kernel-dir, else $CLFORMER_KERNEL_DIR */
    const char *cache_dir;  /* --cache-dir, else the XDG default */
    const char *shape;      /* --shape auto|item|group, else $CLFORMER_SHAPE */
    const char *binaries;   /* --kernel-binaries keep|notes, else $CLFORMER_KERNEL_BINARIES */
    int gemm_retune;        /* not a flag: `clformer tune` sets it (without --keep) */
    int gemm_search_all;    /* not a flag: `clformer tune` sets it (no search budget) */
    cli_notice notice;      /* not a flag: the runtime's notices (the flags object
                               must not be const: cli_runtime_open hands it out) */
    char cache_dir_buf[1024];
} cli_runtime_flags;

#define CLI_RUNTIME_FLAGS_HELP                                                                     \
    "  --device SEL      device: index (0), platform:device (1:0), type (gpu, cpu, gpu:1)\n"       \
    "                    or part of its name; default $CLFORMER_DEVICE, else first GPU/CPU\n"      \
    "  --gemm ENGINE     auto (default: the fastest per shape, `clformer tune`), clblast,\n"       \
    "                    native, or a native configuration by name (r8v16x3, ...)\n"               \
    "  --no-cache        neither read nor write the compiled-kernel cache\n"                       \
    "  --cache-dir DIR   kernel cache (default $CLFORMER_CACHE_DIR, $XDG_CACHE_HOME/clformer)\n"   \
    "  --kernel-dir DIR  load the kernel sources from DIR (laid out as cl/), not the built-in\n"   \
    "  --shape SHAPE     kernel shape: auto (measured once per device), item or group\n"           \
    "                    (a work-item or a work-group per row); or $CLFORMER_SHAPE\n"              \
    "  --kernel-binaries WHAT  what the kernel cache keeps: keep (default: binaries) or\n"         \
    "                    notes (no binary: built again at each start; for PoCL, whose\n"           \
    "                    binaries cost a second compile); or $CLFORMER_KERNEL_BINARIES\n"          \
    "  --profile         print per-kernel counts and device time at the end\n"

void cli_runtime_flags_init(cli_runtime_flags *f);
/* The end of a phase of first-use work: its progress line cleared and its
 * summary printed (nothing when there was none). Call before output. */
void cli_notice_end(const cli_runtime_flags *f);
/* --shape's value (NULL: auto) as the library's option; 0, or prints and
 * returns the usage exit code. */
int cli_shape_parse(const char *s, clf_shape *out);
/* --kernel-binaries' value (NULL: keep) as the library's option; 0, or
 * prints and returns 2. */
int cli_binaries_parse(const char *s, clf_binaries *out);
/* Build runtime options from flags; returns 0 or prints and returns exit code. */
int cli_runtime_open(const cli_runtime_flags *f, clf_runtime **rt);
/* Print a library error to stderr as "clformer: <where>: <msg>". */
void cli_print_error(const char *context, const clf_error *err);
/* Exit code for a library status. */
int cli_exit_code(clf_status st);
/* A JSON number with `decimals` digits after the point, or null when v is
 * NaN or infinite (JSON has no such numbers). */
void cli_json_num(FILE *out, double v, int decimals);
/* Print the profile table of rt (if profiling). */
void cli_print_profile(clf_runtime *rt, FILE *out);
/* Strict numeric parsing of flag values; print "--flag: expected ..." on error. */
int cli_parse_int(const char *flag, const char *s, long lo, long hi, long *out);
int cli_parse_float(const char *flag, const char *s, double lo, double hi, double *out);

/* ---- command-line parsing (args.c) ----
 * A subcommand lists its flags in a table and calls cli_parse_args, which
 * accepts "--flag VALUE" and "--flag=VALUE", -h/--help (the usage on
 * stdout), the runtime flags above when `runtime` is set, and up to
 * n_positional other arguments ("-" included), and prints every usage
 * error itself. */
#define CLI_LIST_MAX 128

/* A flag that may be given more than once, in order. */
typedef struct cli_list {
    const char *v[CLI_LIST_MAX];
    int n;
} cli_list;

typedef enum cli_opt_kind {
    CLI_OPT_BOOL,  /* int *: set to 1; takes no value */
    CLI_OPT_STR,   /* const char **: the value, not empty (a name, a path) */
    CLI_OPT_TEXT,  /* const char **: any text, empty included (--prompt) */
    CLI_OPT_INT,   /* long *: an integer in [lo, hi] */
    CLI_OPT_FLOAT, /* double *: a finite number in [lo, hi] */
    CLI_OPT_U64,   /* uint64_t *: a non-negative integer */
    CLI_OPT_LIST,  /* cli_list *: each value appended */
    CLI_OPT_SET    /* cli_list *: each KEY=VALUE appended (--set) */
} cli_opt_kind;

typedef struct cli_opt {
    const char *name; /* "--batch" */
    cli_opt_kind kind;
    void *dst;
    double lo, hi; /* bounds of CLI_OPT_INT and CLI_OPT_FLOAT */
    int *seen;     /* optional: set to 1 when the flag is given */
} cli_opt;

typedef struct cli_command {
    const char *name; /* "clformer eval", the prefix of its messages */
    const cli_opt *opts;
    int n_opts;
    cli_runtime_flags *runtime; /* NULL: the subcommand opens no device */
    const char **positional;    /* n_positional slots, filled in order */
    int n_positional;
    const char *positional_what; /* "one DIR", for "unexpected argument" */
    void (*usage)(FILE *out);
} cli_command;

enum { CLI_PARSE_RUN = -1 };

/* CLI_PARSE_RUN when the command should go on, else its exit code:
 * CLI_EXIT_OK after --help, CLI_EXIT_USAGE after printing what was wrong. */
int cli_parse_args(const cli_command *cmd, int argc, char **argv);

#define CLI_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* A decoder's training FLOPs per token, 6N + 12 L T C (clformer info's
 * count, nanoGPT's estimate_mfu): the numerator of model FLOP utilisation. */
double cli_train_flops_per_token(const clf_model_config *cfg, long vocab);

/* A run's metrics.jsonl (cli/metrics.c): fn gets each whole record in file
 * order and may keep it (setting *rec to NULL); a torn line is said on
 * stderr and passed over. An exit code: fn's first nonzero one, or
 * CLI_EXIT_USAGE when the file cannot be read (hint appended where it does
 * not exist). */
typedef int (*cli_metrics_fn)(void *user, clf_json **rec);
int cli_metrics_read(const char *cmd, const char *path, const char *hint, cli_metrics_fn fn,
                     void *user);

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
int cli_cmd_export(int argc, char **argv);
int cli_cmd_average(int argc, char **argv);
int cli_cmd_tune(int argc, char **argv);
int cli_cmd_import(int argc, char **argv);
int cli_cmd_embed(int argc, char **argv);
int cli_cmd_plot(int argc, char **argv);
int cli_cmd_attention(int argc, char **argv);
int cli_cmd_report(int argc, char **argv);

#endif
