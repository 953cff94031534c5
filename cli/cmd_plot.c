/*
 * cmd_plot.c - `clformer plot RUN [RUN...] --out FILE.svg`: the curves of
 * training runs from their metrics (DIR/metrics.jsonl, which every `train`
 * appends to): training and validation loss, learning rate and training
 * tokens/s against step or wall time, several runs overlaid, one colour
 * each, with a legend. The SVG is written atomically (svg_chart.c draws it).
 *
 * A resumed run's records are read as the run went on: the records after a
 * session's start at step s replace any of an earlier session past s (a
 * run resumed from an older checkpoint repeats those steps).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/svg_chart.h"

enum { PLOT_MAX_RUNS = 8 };

/* One curve's points. */
typedef struct curve {
    double *x, *y;
    double *step; /* the step of each point (resume truncation, time lookup) */
    size_t n, cap;
} curve;

enum { C_TRAIN, C_VAL, C_LR, C_TPS, N_CURVES };

typedef struct run_metrics {
    char name[128];
    curve c[N_CURVES];
    curve elapsed;    /* (step, elapsed_s) of each log record: wall time of a step */
    const char *path; /* the file being read */
} run_metrics;

static int curve_add(curve *c, double step, double x, double y)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        double *nx = realloc(c->x, cap * sizeof *nx);
        if (nx != NULL)
            c->x = nx;
        double *ny = realloc(c->y, cap * sizeof *ny);
        if (ny != NULL)
            c->y = ny;
        double *ns = realloc(c->step, cap * sizeof *ns);
        if (ns != NULL)
            c->step = ns;
        if (nx == NULL || ny == NULL || ns == NULL)
            return -1;
        c->cap = cap;
    }
    c->step[c->n] = step;
    c->x[c->n] = x;
    c->y[c->n++] = y;
    return 0;
}

static void curve_cut(curve *c, double step)
{
    while (c->n > 0 && c->step[c->n - 1] > step)
        c->n--;
}

static void run_free(run_metrics *r)
{
    for (int i = 0; i <= N_CURVES; i++) {
        curve *c = i < N_CURVES ? &r->c[i] : &r->elapsed;
        free(c->x);
        free(c->y);
        free(c->step);
    }
}

static int num(const clf_json *rec, const char *key, double *out)
{
    const clf_json *v = clf_json_get(rec, key);
    if (v == NULL || v->type != CLF_JSON_NUMBER)
        return 0;
    *out = v->number;
    return 1;
}

/* The wall time of a step: that of the last log record at or before it. */
static double time_of(const run_metrics *r, double step)
{
    double t = NAN;
    for (size_t i = 0; i < r->elapsed.n && r->elapsed.step[i] <= step; i++)
        t = r->elapsed.y[i];
    return t;
}

/* One record into the run's curves; -1 when out of memory. */
static int take_record(run_metrics *r, const clf_json *rec)
{
    double step, v;
    if (!num(rec, "step", &step))
        return 0;
    const clf_json *ev = clf_json_get(rec, "event");
    if (ev != NULL && ev->type == CLF_JSON_STRING) {
        if (strcmp(ev->string, "start") == 0 || strcmp(ev->string, "resume") == 0) {
            for (int i = 0; i < N_CURVES; i++)
                curve_cut(&r->c[i], step);
            curve_cut(&r->elapsed, step);
        }
        return 0;
    }
    int rc = 0;
    if (num(rec, "elapsed_s", &v))
        rc |= curve_add(&r->elapsed, step, step, v);
    if (num(rec, "loss", &v))
        rc |= curve_add(&r->c[C_TRAIN], step, step, v);
    if (num(rec, "val_loss", &v))
        rc |= curve_add(&r->c[C_VAL], step, step, v);
    if (num(rec, "lr", &v))
        rc |= curve_add(&r->c[C_LR], step, step, v);
    if (num(rec, "tokens_per_s", &v))
        rc |= curve_add(&r->c[C_TPS], step, step, v);
    return rc;
}

static int take_one(void *user, clf_json **rec)
{
    run_metrics *r = user;
    if (take_record(r, *rec) == 0)
        return CLI_EXIT_OK;
    fprintf(stderr, "clformer plot: out of memory reading %s\n", r->path);
    return CLI_EXIT_FAIL;
}

/* RUN (a run directory or a metrics file) into r; an exit code. */
static int read_run(const char *arg, run_metrics *r)
{
    char path[4200];
    const size_t al = strlen(arg);
    struct stat sb;
    if ((al > 6 && strcmp(arg + al - 6, ".jsonl") == 0) ||
        (stat(arg, &sb) == 0 && S_ISREG(sb.st_mode)))
        snprintf(path, sizeof path, "%s", arg);
    else /* a run directory */
        snprintf(path, sizeof path, "%s/metrics.jsonl", arg);
    /* the legend's name: the run directory's (or file's) last component */
    char base[4200];
    snprintf(base, sizeof base, "%s", arg);
    size_t bl = strlen(base);
    while (bl > 1 && base[bl - 1] == '/')
        base[--bl] = '\0';
    const char *slash = strrchr(base, '/');
    snprintf(r->name, sizeof r->name, "%s", slash != NULL && slash[1] ? slash + 1 : base);

    r->path = path;
    int rc = cli_metrics_read("plot", path,
                              " (a run's metrics.jsonl: does RUN hold a `clformer train` run?)",
                              take_one, r);
    r->path = NULL;
    if (rc == CLI_EXIT_OK && r->c[C_TRAIN].n + r->c[C_VAL].n == 0) {
        fprintf(stderr, "clformer plot: %s holds no logged step or evaluation yet\n", path);
        rc = CLI_EXIT_USAGE;
    }
    return rc;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: clformer plot RUN [RUN...] --out FILE.svg|FILE.png [--x step|time]\n"
                 "Draw the training curves of runs (run directories, whose metrics.jsonl every\n"
                 "`clformer train` appends to, or such files): training and validation loss\n"
                 "(log scale when it spans more than a decade), learning rate and training\n"
                 "tokens/s, the runs overlaid with a legend. FILE is written atomically: an\n"
                 "SVG, or a PNG where it ends in .png (drawn by rsvg-convert, librsvg2-bin).\n"
                 "  --out FILE        the SVG (or .png) file\n"
                 "  --x AXIS          step (default) or time (the run's wall-clock seconds,\n"
                 "                    earlier sessions included)\n");
}

/* The runs' curves as a chart, against step or wall time. */
static char *render(run_metrics *runs, int n, int by_time)
{
    static const char *const panel_names[] = {"loss", "learning rate", "tokens/s"};
    static const int heights[] = {300, 150, 150};
    svg_chart c;
    char title[256];
    snprintf(title, sizeof title, "%s", n == 1 ? runs[0].name : "training runs");
    svg_chart_init(&c, 900, title);
    for (int p = 0; p < 3; p++)
        svg_chart_panel(&c, panel_names[p], heights[p], p == 0);
    for (int i = 0; i < n; i++) {
        run_metrics *r = &runs[i];
        if (by_time)
            for (int k = 0; k < N_CURVES; k++)
                for (size_t j = 0; j < r->c[k].n; j++)
                    r->c[k].x[j] = time_of(r, r->c[k].step[j]);
        char nm[160];
        snprintf(nm, sizeof nm, "%.120s train", r->name);
        svg_chart_series(&c, 0, nm, i, r->c[C_TRAIN].x, r->c[C_TRAIN].y, r->c[C_TRAIN].n, 0);
        snprintf(nm, sizeof nm, "%.120s val", r->name);
        svg_chart_series(&c, 0, nm, i, r->c[C_VAL].x, r->c[C_VAL].y, r->c[C_VAL].n, 1);
        svg_chart_series(&c, 1, r->name, i, r->c[C_LR].x, r->c[C_LR].y, r->c[C_LR].n, 0);
        svg_chart_series(&c, 2, r->name, i, r->c[C_TPS].x, r->c[C_TPS].y, r->c[C_TPS].n, 0);
    }
    return svg_chart_render(&c, by_time ? "wall time (s)" : "step");
}

int cli_plot_svg(const char *const *paths, int n, int by_time, char **svg)
{
    run_metrics runs[PLOT_MAX_RUNS];
    memset(runs, 0, sizeof runs);
    int rc = n >= 1 && n <= PLOT_MAX_RUNS ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    for (int i = 0; i < n && rc == CLI_EXIT_OK; i++)
        rc = read_run(paths[i], &runs[i]);
    *svg = rc == CLI_EXIT_OK ? render(runs, n, by_time) : NULL;
    if (rc == CLI_EXIT_OK && *svg == NULL) {
        fprintf(stderr, "clformer plot: out of memory drawing the chart\n");
        rc = CLI_EXIT_FAIL;
    }
    for (int i = 0; i < n; i++)
        run_free(&runs[i]);
    return rc;
}

int cli_cmd_plot(int argc, char **argv)
{
    const char *out = NULL, *xaxis = "step";
    const char *args[PLOT_MAX_RUNS] = {NULL};
    const cli_opt opts[] = {
        {"--out", CLI_OPT_STR, &out, 0, 0, NULL},
        {"--x", CLI_OPT_STR, &xaxis, 0, 0, NULL},
    };
    const cli_command cmd = {"clformer plot",
                             opts,
                             CLI_COUNT(opts),
                             NULL,
                             args,
                             PLOT_MAX_RUNS,
                             "RUN directories (at most 8)",
                             usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    int n = 0;
    while (n < PLOT_MAX_RUNS && args[n] != NULL)
        n++;
    if (n == 0 || out == NULL) {
        fprintf(stderr, "clformer plot: %s\n", n == 0 ? "RUN expected" : "--out FILE is required");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(xaxis, "step") != 0 && strcmp(xaxis, "time") != 0) {
        fprintf(stderr, "clformer plot: --x: expected step or time, got '%s'\n", xaxis);
        return CLI_EXIT_USAGE;
    }
    clf_error err;
    clf_error_clear(&err);
    if (clf_file_check_target(out, &err) != CLF_OK) {
        fprintf(stderr, "clformer plot: --out: %s\n", err.msg);
        return CLI_EXIT_FAIL;
    }
    char *svg = NULL;
    int rc = cli_plot_svg(args, n, xaxis[0] == 't', &svg);
    if (rc == CLI_EXIT_OK)
        rc = cli_write_picture("clformer plot", out, svg);
    if (rc == CLI_EXIT_OK)
        printf("%s: %d run%s\n", out, n, n == 1 ? "" : "s");
    free(svg);
    return rc;
}
