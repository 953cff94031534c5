/*
 * cmd_devices.c - `clformer devices [--json] [--device SEL]`: list every
 * OpenCL platform and device; with --device, mark the one SEL selects so a
 * selector can be checked before a long run. Each device is opened to show
 * the kernels' shape the runtime gives it (measured on a first use, then
 * read from the cache) and why.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static const char *source_name(clf_shape_source s)
{
    switch (s) {
        case CLF_SHAPE_MEASURED: return "measured";
        case CLF_SHAPE_CACHED: return "measured earlier";
        case CLF_SHAPE_FORCED: return "forced";
        case CLF_SHAPE_BY_TYPE: break;
    }
    return "by type";
}

/* Each device as a runtime sees it: opened with the command line's cache
 * and shape, its measured (or cached, or forced) shape and vector width
 * copied in; one that cannot be opened keeps its type's default, and the
 * reason says why. */
static void shapes_of(clf_device_info *d, int n, const cli_runtime_flags *fl, clf_shape shape,
                      clf_binaries binaries)
{
    clf_runtime_options o = clf_runtime_options_default();
    o.cache_dir = fl->cache_dir;
    o.binaries = binaries;
    o.kernel_dir = fl->kernel_dir;
    o.shape = shape;
    for (int i = 0; i < n; i++) {
        char sel[16];
        snprintf(sel, sizeof sel, "%d", d[i].index);
        o.device = sel;
        clf_runtime *rt = NULL;
        clf_error err;
        if (clf_runtime_create(&rt, &o, &err) == CLF_OK) {
            const clf_device_info *x = clf_runtime_device(rt);
            d[i].serial_groups = x->serial_groups;
            d[i].pref_vec_float = x->pref_vec_float;
            d[i].shape_source = x->shape_source;
            d[i].loop_limit = x->loop_limit;
            d[i].fma_slow = x->fma_slow;
            d[i].prefetch_builtin = x->prefetch_builtin;
            snprintf(d[i].shape_reason, sizeof d[i].shape_reason, "%s", x->shape_reason);
        } else {
            snprintf(d[i].shape_reason, sizeof d[i].shape_reason,
                     "by type (the device could not be opened: %.180s)", err.msg);
        }
        clf_runtime_destroy(rt);
    }
}

static void print_json(const clf_device_info *d, int n, int selected, FILE *out)
{
    fprintf(out, "[\n");
    for (int i = 0; i < n; i++) {
        const clf_device_info *x = &d[i];
        fprintf(out,
                "  {\"index\": %d, \"platform_index\": %d, \"device_index\": %d, \"platform\": ",
                x->index, x->platform_index, x->device_index);
        json_string(out, x->platform);
        fprintf(out, ", \"name\": ");
        json_string(out, x->name);
        fprintf(out, ", \"vendor\": ");
        json_string(out, x->vendor);
        fprintf(out,
                ", \"type\": \"%s\", \"compute_units\": %u, \"clock_mhz\": %u, "
                "\"global_mem\": %llu, \"local_mem\": %llu, \"local_mem_is_global\": %s, "
                "\"max_alloc\": %llu, \"max_work_group\": %zu, \"opencl_c\": ",
                x->type, x->compute_units, x->clock_mhz, (unsigned long long)x->global_mem,
                (unsigned long long)x->local_mem, x->local_mem_is_global ? "true" : "false",
                (unsigned long long)x->max_alloc, x->max_work_group);
        json_string(out, x->cl_c_version);
        fprintf(out,
                ", \"fp16\": %s, \"fp64\": %s, \"subgroups\": %s, \"pref_vec_float\": %u, "
                "\"serial_groups\": %s, \"kernel_shapes\": \"%s\", \"shape_source\": \"%s\", "
                "\"loop_limit\": %u, \"fma_slow\": %s, \"prefetch_builtin\": %s, "
                "\"shape_reason\": ",
                x->fp16 ? "true" : "false", x->fp64 ? "true" : "false",
                x->subgroups ? "true" : "false", x->pref_vec_float,
                x->serial_groups ? "true" : "false", x->serial_groups ? "item" : "group",
                source_name(x->shape_source), x->loop_limit, x->fma_slow ? "true" : "false",
                x->prefetch_builtin ? "true" : "false");
        json_string(out, x->shape_reason);
        fprintf(out, ", \"driver\": ");
        json_string(out, x->driver_version);
        fprintf(out, ", \"selected\": %s}%s\n", i == selected ? "true" : "false",
                i + 1 < n ? "," : "");
    }
    fprintf(out, "]\n");
}

static void human_bytes(uint64_t b, char *out, size_t cap)
{
    if (b >= (1ull << 30))
        snprintf(out, cap, "%.1f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(out, cap, "%.1f MiB", (double)b / (double)(1ull << 20));
    else
        snprintf(out, cap, "%.0f KiB", (double)b / 1024.0);
}

static void print_table(const clf_device_info *d, int n, int selected, FILE *out)
{
    fprintf(out,
            "%-3s %-5s %-24s %-40s %-5s %4s %6s %9s %9s %9s %6s %-10s %-4s %-4s %-3s %3s %-6s "
            "%s\n",
            "#", "P:D", "platform", "device", "type", "CUs", "MHz", "global", "local", "max-alloc",
            "max-wg", "OpenCL C", "fp16", "fp64", "sub", "vec", "shapes", "driver");
    for (int i = 0; i < n; i++) {
        const clf_device_info *x = &d[i];
        char g[32], l[32], a[32], pd[32], idx[16];
        human_bytes(x->global_mem, g, sizeof g);
        human_bytes(x->local_mem, l, sizeof l);
        human_bytes(x->max_alloc, a, sizeof a);
        snprintf(pd, sizeof pd, "%d:%d", x->platform_index, x->device_index);
        snprintf(idx, sizeof idx, "%s%d", i == selected ? "*" : "", i);
        const char *ver =
            strncmp(x->cl_c_version, "OpenCL C ", 9) == 0 ? x->cl_c_version + 9 : x->cl_c_version;
        fprintf(out,
                "%-3s %-5s %-24.24s %-40.40s %-5s %4u %6u %9s %9s%s %9s %6zu %-10.10s %-4s %-4s "
                "%-3s %3u "
                "%-6s %s\n",
                idx, pd, x->platform, x->name, x->type, x->compute_units, x->clock_mhz, g, l,
                x->local_mem_is_global ? "*" : " ", a, x->max_work_group, ver,
                x->fp16 ? "yes" : "no", x->fp64 ? "yes" : "no", x->subgroups ? "yes" : "no",
                x->pref_vec_float, x->serial_groups ? "item" : "group", x->driver_version);
    }
    fprintf(out, "(local memory marked * is emulated in global memory; sub: subgroups; vec: "
                 "float vector width\n (measured for the item shape, else as the device "
                 "reports it); shapes: the kernels' shape on the\n device, item = one work-item "
                 "per row with vector loops, group = a work-group per row; why:)\n");
    for (int i = 0; i < n; i++)
        fprintf(out, "  %d: %s, %s: %s\n", i, d[i].serial_groups ? "item" : "group",
                source_name(d[i].shape_source), d[i].shape_reason);
    if (selected >= 0)
        fprintf(out, "* selected: %d (%s)\n", selected, d[selected].name);
}

static void usage(FILE *out)
{
    fprintf(out, "usage: clformer devices [--json] [--device SEL] [--peak]\n"
                 "List OpenCL platforms and devices; with --device, mark the device SEL "
                 "selects\n(without it, the default device is marked). Each device is "
                 "opened to show the kernels'\nshape it gets and why (measured on first use, "
                 "then cached; $CLFORMER_SHAPE forces one).\n--peak also measures "
                 "the marked device's fp32 multiply-add peak (GFLOP/s; about a\nsecond), the "
                 "denominator of the benchmarks' model FLOP utilisation.\n");
}

int cli_cmd_devices(int argc, char **argv)
{
    int json = 0, peak = 0;
    const char *sel = getenv("CLFORMER_DEVICE");
    const cli_opt opts[] = {
        {"--json", CLI_OPT_BOOL, &json, 0, 0, NULL},
        {"--peak", CLI_OPT_BOOL, &peak, 0, 0, NULL},
        {"--device", CLI_OPT_STR, &sel, 0, 0, NULL},
    };
    const cli_command cmd = {"clformer devices", opts, CLI_COUNT(opts), NULL, NULL, 0, NULL, usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    clf_device_info *d = NULL;
    int n = 0;
    clf_error err;
    clf_status st = clf_devices_list(&d, &n, &err);
    if (st != CLF_OK) {
        cli_print_error(NULL, &err);
        return cli_exit_code(st);
    }
    int selected = -1;
    st = clf_devices_select(d, n, sel, &selected, &err);
    if (st != CLF_OK) {
        cli_print_error(NULL, &err);
        free(d);
        return cli_exit_code(st);
    }
    cli_runtime_flags fl;
    cli_runtime_flags_init(&fl);
    clf_shape shape = CLF_SHAPE_AUTO;
    clf_binaries binaries = CLF_BINARIES_KEEP;
    int rc = cli_shape_parse(fl.shape, &shape);
    if (rc == CLI_EXIT_OK)
        rc = cli_binaries_parse(fl.binaries, &binaries);
    if (rc != CLI_EXIT_OK) {
        free(d);
        return rc;
    }
    shapes_of(d, n, &fl, shape, binaries);
    if (json)
        print_json(d, n, selected, stdout);
    else
        print_table(d, n, selected, stdout);
    free(d);
    if (peak) {
        clf_runtime_options o = clf_runtime_options_default();
        o.device = sel;
        o.cache_dir = fl.cache_dir;
        o.binaries = binaries;
        clf_runtime *rt = NULL;
        double g = 0.0;
        if ((st = clf_runtime_create(&rt, &o, &err)) != CLF_OK ||
            (st = clf_runtime_peak_gflops(rt, &g, &err)) != CLF_OK) {
            cli_print_error("--peak", &err);
            clf_runtime_destroy(rt);
            return cli_exit_code(st);
        }
        if (json)
            printf("{\"peak_gflops\": %.2f}\n", g);
        else
            printf("measured fp32 peak of %s: %.1f GFLOP/s\n", clf_runtime_device(rt)->name, g);
        clf_runtime_destroy(rt);
    }
    return CLI_EXIT_OK;
}
