/*
 * args.c - the one command-line parser every subcommand uses (cli.h).
 *
 * Design: a subcommand describes its flags in a table (name, kind, where the
 * value goes, bounds) and hands argv over; this file does the walking, the
 * strict value parsing and every usage message, so all subcommands accept
 * the same forms (`--flag VALUE` and `--flag=VALUE`, `-h`/`--help`, `-` as
 * a positional meaning standard input) and word their errors alike:
 *   clformer eval: unknown flag '--bogus' (see --help)
 *   clformer: --top-p: expected a number in [1e-09, 1], got '2'
 * The runtime flags (--device, --gemm, ...) come from a second table over a
 * cli_runtime_flags, so a device-using subcommand only points at one.
 *
 * Not here: what a flag means, checks that need more than one flag, or
 * missing positionals (the subcommand words those).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* The device flags, as a table over f (CLI_RUNTIME_FLAGS_HELP documents them). */
enum { RUNTIME_OPTS = 8 };

static void runtime_opts(cli_runtime_flags *f, cli_opt out[RUNTIME_OPTS])
{
    const cli_opt t[RUNTIME_OPTS] = {
        {"--device", CLI_OPT_STR, &f->device, 0, 0, NULL},
        {"--gemm", CLI_OPT_STR, &f->gemm, 0, 0, NULL},
        {"--kernel-dir", CLI_OPT_STR, &f->kernel_dir, 0, 0, NULL},
        {"--cache-dir", CLI_OPT_STR, &f->cache_dir, 0, 0, NULL},
        {"--no-cache", CLI_OPT_BOOL, &f->no_cache, 0, 0, NULL},
        {"--profile", CLI_OPT_BOOL, &f->profile, 0, 0, NULL},
        {"--shape", CLI_OPT_STR, &f->shape, 0, 0, NULL},
        {"--kernel-binaries", CLI_OPT_STR, &f->binaries, 0, 0, NULL},
    };
    memcpy(out, t, sizeof t);
}

/* The table entry named by arg ("--name" or "--name=value"), or NULL. */
static const cli_opt *find_opt(const cli_opt *opts, int n, const char *arg,
                               const char **inline_value)
{
    for (int k = 0; k < n; k++) {
        size_t len = strlen(opts[k].name);
        if (strncmp(arg, opts[k].name, len) != 0)
            continue;
        if (arg[len] == '\0') {
            *inline_value = NULL;
            return &opts[k];
        }
        if (arg[len] == '=') {
            *inline_value = arg + len + 1;
            return &opts[k];
        }
    }
    return NULL;
}

static int parse_u64(const char *flag, const char *s, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || *end != '\0' || errno != 0) {
        fprintf(stderr, "clformer: %s: expected a non-negative integer, got '%s'\n", flag, s);
        return 0;
    }
    *out = (uint64_t)v;
    return 1;
}

/* Store value v of flag o; 1 on success, 0 after printing why not. */
static int store(const cli_opt *o, const char *v)
{
    switch (o->kind) {
        case CLI_OPT_BOOL: *(int *)o->dst = 1; return 1;
        case CLI_OPT_STR:
        case CLI_OPT_TEXT: *(const char **)o->dst = v; return 1;
        case CLI_OPT_INT:
            return cli_parse_int(o->name, v, (long)o->lo, (long)o->hi, (long *)o->dst);
        case CLI_OPT_FLOAT: return cli_parse_float(o->name, v, o->lo, o->hi, (double *)o->dst);
        case CLI_OPT_U64: return parse_u64(o->name, v, (uint64_t *)o->dst);
        case CLI_OPT_SET:
            if (strchr(v, '=') == NULL || v[0] == '=') {
                fprintf(stderr, "clformer: %s %s: expected KEY=VALUE, e.g. --set train.steps=200\n",
                        o->name, v);
                return 0;
            }
            /* fall through */
        case CLI_OPT_LIST: {
            cli_list *l = o->dst;
            if (l->n >= CLI_LIST_MAX) {
                fprintf(stderr, "clformer: %s: given more than %d times\n", o->name, CLI_LIST_MAX);
                return 0;
            }
            l->v[l->n++] = v;
            return 1;
        }
    }
    return 0;
}

int cli_parse_args(const cli_command *cmd, int argc, char **argv)
{
    cli_opt rt[RUNTIME_OPTS];
    if (cmd->runtime != NULL)
        runtime_opts(cmd->runtime, rt);
    int n_pos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cmd->usage(stdout);
            return CLI_EXIT_OK;
        }
        if (a[0] != '-' || a[1] == '\0') {
            if (n_pos < cmd->n_positional) {
                cmd->positional[n_pos++] = a;
                continue;
            }
            if (cmd->n_positional == 0)
                fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", cmd->name, a);
            else
                fprintf(stderr, "%s: unexpected argument '%s': %s expected\n", cmd->name, a,
                        cmd->positional_what);
            return CLI_EXIT_USAGE;
        }
        const cli_opt *o = find_opt(cmd->opts, cmd->n_opts, a, &v);
        if (o == NULL && cmd->runtime != NULL)
            o = find_opt(rt, RUNTIME_OPTS, a, &v);
        if (o == NULL) {
            fprintf(stderr, "%s: unknown flag '%s' (see --help)\n", cmd->name, a);
            return CLI_EXIT_USAGE;
        }
        if (o->kind == CLI_OPT_BOOL && v != NULL) {
            fprintf(stderr, "clformer: %s takes no value, got '%s'\n", o->name, a);
            return CLI_EXIT_USAGE;
        }
        if (o->kind != CLI_OPT_BOOL && v == NULL) {
            if (i + 1 >= argc) {
                fprintf(stderr, "clformer: %s expects a value\n", o->name);
                return CLI_EXIT_USAGE;
            }
            /* a value that is one of this command's flags is a forgotten
             * value, not text (--prompt --quiet); --prompt=--quiet says it */
            const char *nv = NULL;
            const char *next = argv[i + 1];
            if (next[0] == '-' && next[1] == '-' &&
                (find_opt(cmd->opts, cmd->n_opts, next, &nv) != NULL ||
                 (cmd->runtime != NULL && find_opt(rt, RUNTIME_OPTS, next, &nv) != NULL))) {
                fprintf(stderr,
                        "clformer: %s expects a value, got the flag %s (for that text, write "
                        "%s=%s)\n",
                        o->name, next, o->name, next);
                return CLI_EXIT_USAGE;
            }
            v = argv[++i];
        }
        if (o->kind == CLI_OPT_STR && v[0] == '\0') { /* --device "": not the default */
            fprintf(stderr, "clformer: %s: expected a value, got an empty string\n", o->name);
            return CLI_EXIT_USAGE;
        }
        if (!store(o, v))
            return CLI_EXIT_USAGE;
        if (o->seen != NULL)
            *o->seen = 1;
    }
    return CLI_PARSE_RUN;
}
