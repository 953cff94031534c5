/*
 * common.c - runtime flags, error printing and exit codes shared by the
 * clformer subcommands. Environment variables are read here, in the CLI, and
 * handed to the library as options.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

void cli_runtime_flags_init(cli_runtime_flags *f)
{
    memset(f, 0, sizeof *f);
    f->device = getenv("CLFORMER_DEVICE");
    f->kernel_dir = getenv("CLFORMER_KERNEL_DIR");
    f->gemm = getenv("CLFORMER_GEMM");
    f->shape = getenv("CLFORMER_SHAPE");
    f->binaries = getenv("CLFORMER_KERNEL_BINARIES");
    clf_cache_dir_default(getenv("CLFORMER_CACHE_DIR"), getenv("XDG_CACHE_HOME"), getenv("HOME"),
                          f->cache_dir_buf, sizeof f->cache_dir_buf);
    f->cache_dir = f->cache_dir_buf[0] ? f->cache_dir_buf : NULL;
}

/* The runtime's notices of first-use work: a phase opens with the first
 * (on a terminal a progress line rewritten in place, elsewhere one line,
 * so a first run never sits silent for a minute) and cli_notice_end closes
 * it with one summary line. */
static void on_notice(void *user, const char *event, const char *detail)
{
    cli_notice *n = user;
    const int compile = strcmp(event, "compile") == 0, search = strcmp(event, "gemm-search") == 0;
    if (strcmp(event, "device") == 0) {
        snprintf(n->device, sizeof n->device, "%s", detail);
    } else if (compile || search) {
        if (n->compiled + n->searched == 0) {
            n->t0 = clf_now_seconds();
            if (!n->tty)
                fprintf(stderr,
                        "clformer: first use of %s: compiling kernels and timing GEMM shapes "
                        "(cached afterwards; `clformer tune` does it up front) ...\n",
                        n->device);
        }
        n->compiled += compile;
        n->searched += search;
        if (n->tty)
            fprintf(stderr,
                    "\r\033[Kclformer: first use of %s: %d kernel programs compiled, %d GEMM "
                    "shapes timed (%s %s)",
                    n->device, n->compiled, n->searched, compile ? "compiling" : "timing", detail);
    } else if (strcmp(event, "cache-write") == 0) {
        fprintf(stderr,
                "%sclformer: cannot write the kernel cache (%s); going on without it: compiled "
                "kernels and GEMM timings are not kept for the next run\n",
                n->tty && n->compiled + n->searched > 0 ? "\r\033[K" : "", detail);
    } else if (strcmp(event, "gemm-dropped") == 0) {
        fprintf(stderr, "%sclformer: GEMM configuration %s; left out of the search\n",
                n->tty && n->compiled + n->searched > 0 ? "\r\033[K" : "", detail);
    }
}

void cli_notice_end(const cli_runtime_flags *f)
{
    cli_notice *n = (cli_notice *)&f->notice; /* as cli_runtime_open hands it out */
    if (n->compiled + n->searched == 0)
        return;
    char what[96];
    if (n->compiled > 0 && n->searched > 0)
        snprintf(what, sizeof what, "compiled %d kernel programs and timed %d GEMM shapes",
                 n->compiled, n->searched);
    else if (n->compiled > 0)
        snprintf(what, sizeof what, "compiled %d kernel programs", n->compiled);
    else
        snprintf(what, sizeof what, "timed %d GEMM shapes", n->searched);
    fprintf(stderr, "%sclformer: first use of %s: %s in %.1f s (cached for later runs)\n",
            n->tty ? "\r\033[K" : "", n->device, what, clf_now_seconds() - n->t0);
    n->compiled = n->searched = 0;
}

/* --gemm NAME must name one of the device's native configurations. */
static int check_gemm_config(clf_runtime *rt, const char *name)
{
    const char *const *names = NULL;
    size_t count = 0, i = 1;
    clf_error err;
    clf_status st = clf_gemm_candidates(rt, &names, &count, NULL, &err);
    if (st != CLF_OK) {
        cli_print_error(NULL, &err);
        return cli_exit_code(st);
    }
    while (i < count && strcmp(names[i], name) != 0)
        i++;
    if (i < count)
        return CLI_EXIT_OK;
    fprintf(stderr, "clformer: --gemm: expected auto, clblast, native or one of this device's "
                    "native configurations (");
    for (i = 1; i < count; i++)
        fprintf(stderr, "%s%s", i > 1 ? ", " : "", names[i]);
    fprintf(stderr, "), got '%s'\n", name);
    return CLI_EXIT_USAGE;
}

int cli_shape_parse(const char *s, clf_shape *out)
{
    *out = CLF_SHAPE_AUTO;
    if (s == NULL || s[0] == '\0' || strcmp(s, "auto") == 0)
        return CLI_EXIT_OK;
    if (strcmp(s, "item") == 0 || strcmp(s, "group") == 0) {
        *out = s[0] == 'i' ? CLF_SHAPE_ITEM : CLF_SHAPE_GROUP;
        return CLI_EXIT_OK;
    }
    fprintf(stderr,
            "clformer: --shape (or $CLFORMER_SHAPE): expected auto, item or group, got '%s'\n", s);
    return CLI_EXIT_USAGE;
}

int cli_binaries_parse(const char *s, clf_binaries *out)
{
    if (clf_binaries_parse(s, out))
        return CLI_EXIT_OK;
    fprintf(stderr,
            "clformer: --kernel-binaries (or $CLFORMER_KERNEL_BINARIES): expected keep or notes, "
            "got '%s'\n",
            s);
    return CLI_EXIT_USAGE;
}

int cli_runtime_open(const cli_runtime_flags *f, clf_runtime **rt)
{
    clf_runtime_options o = clf_runtime_options_default();
    int rc = cli_shape_parse(f->shape, &o.shape);
    if (rc != CLI_EXIT_OK)
        return rc;
    rc = cli_binaries_parse(f->binaries, &o.binaries);
    if (rc != CLI_EXIT_OK)
        return rc;
    o.device = f->device;
    o.no_cache = f->no_cache;
    o.cache_dir = f->cache_dir;
    o.kernel_dir = f->kernel_dir;
    o.profile = f->profile;
    o.gemm_retune = f->gemm_retune;
    if (f->gemm_search_all)
        o.gemm_search_budget = 1e9; /* the search is what the command is for */
    if (f->gemm != NULL && f->gemm[0] != '\0') {
        if (strcmp(f->gemm, "auto") == 0)
            o.gemm = CLF_GEMM_AUTO;
        else if (strcmp(f->gemm, "clblast") == 0)
            o.gemm = CLF_GEMM_CLBLAST;
        else if (strcmp(f->gemm, "native") == 0)
            o.gemm = CLF_GEMM_NATIVE;
        else /* a native configuration by name, checked below */
            o.gemm = CLF_GEMM_NATIVE, o.gemm_config = f->gemm;
    }
    clf_error err;
    clf_error_clear(&err);
    /* every cli_runtime_flags is a command's own (non-const) local: its
     * notice state may be written through the runtime's hook */
    cli_notice *notice = (cli_notice *)&f->notice;
    notice->tty = isatty(fileno(stderr));
    o.notify = on_notice;
    o.notify_user = notice;
    clf_status st = clf_runtime_create(rt, &o, &err);
    if (st != CLF_OK) {
        cli_print_error(NULL, &err);
        return cli_exit_code(st);
    }
    if (o.gemm_config != NULL && (rc = check_gemm_config(*rt, o.gemm_config)) != CLI_EXIT_OK) {
        clf_runtime_destroy(*rt);
        *rt = NULL;
        return rc;
    }
    return CLI_EXIT_OK;
}

void cli_print_error(const char *context, const clf_error *err)
{
    static char buf[CLF_ERROR_MSG_MAX + 1024];
    clf_error_format(err, buf, sizeof buf);
    if (context != NULL)
        fprintf(stderr, "clformer: %s: %s\n", context, buf);
    else
        fprintf(stderr, "clformer: %s\n", buf);
}

int cli_exit_code(clf_status st)
{
    switch (st) {
        case CLF_OK: return CLI_EXIT_OK;
        case CLF_ERR_NO_DEVICE:
        case CLF_ERR_CONFIG:
        case CLF_ERR_ARG: return CLI_EXIT_USAGE;
        case CLF_ERR_INTERRUPTED: return CLI_EXIT_INTERRUPTED;
        default: return CLI_EXIT_FAIL;
    }
}

void cli_json_num(FILE *out, double v, int decimals)
{
    if (isfinite(v))
        fprintf(out, "%.*f", decimals, v);
    else
        fputs("null", out);
}

void cli_print_profile(clf_runtime *rt, FILE *out)
{
    if (!clf_runtime_profiling(rt))
        return;
    clf_profile_entry *e = NULL;
    int n = 0;
    clf_error err;
    if (clf_profile_report(rt, &e, &n, &err) != CLF_OK) {
        cli_print_error("profile", &err);
        return;
    }
    double total = 0.0;
    for (int i = 0; i < n; i++)
        total += e[i].seconds;
    fprintf(out, "\nprofile (device time from OpenCL events):\n");
    fprintf(out, "  %-36s %10s %12s %10s %7s\n", "kernel", "count", "total ms", "avg us", "share");
    for (int i = 0; i < n; i++)
        fprintf(out, "  %-36s %10llu %12.2f %10.1f %6.1f%%\n", e[i].name,
                (unsigned long long)e[i].count, e[i].seconds * 1e3,
                e[i].count ? e[i].seconds * 1e6 / (double)e[i].count : 0.0,
                total > 0 ? 100.0 * e[i].seconds / total : 0.0);
    fprintf(out, "  %-36s %10s %12.2f\n", "total", "", total * 1e3);
    free(e);
    size_t now = 0, peak = 0;
    clf_runtime_memory(rt, &now, &peak);
    fprintf(out,
            "device memory in clformer's buffers: peak %.1f MiB, %.1f MiB now (CLBlast's own "
            "temporaries not counted)\n",
            (double)peak / 1048576.0, (double)now / 1048576.0);
}

int cli_parse_int(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (s[0] == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi) {
        fprintf(stderr, "clformer: %s: expected an integer in [%ld, %ld], got '%s'\n", flag, lo, hi,
                s);
        return 0;
    }
    *out = v;
    return 1;
}

int cli_parse_float(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (s[0] == '\0' || *end != '\0' || errno != 0 || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "clformer: %s: expected a number in [%g, %g], got '%s'\n", flag, lo, hi, s);
        return 0;
    }
    *out = v;
    return 1;
}
