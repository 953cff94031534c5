/*
 * svg_chart.c - line charts as SVG text (svg_chart.h).
 */
#include "cli/svg_chart.h"

#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"

extern char **environ;

enum { LEFT = 78, RIGHT = 24, TOP = 44, GAP = 46, BOTTOM = 40 };

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                      "#9467bd", "#8c564b", "#e377c2", "#17becf"};
#define N_PALETTE (sizeof palette / sizeof palette[0])

typedef cli_buf sbuf;

void cli_buf_printf(cli_buf *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const size_t room = b->cap - b->len;
        const int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->s != NULL && (size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->len <= (size_t)n)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (s == NULL) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

void cli_buf_text(cli_buf *b, const char *t)
{
    for (; *t; t++) {
        switch (*t) {
            case '&': cli_buf_printf(b, "&amp;"); break;
            case '<': cli_buf_printf(b, "&lt;"); break;
            case '>': cli_buf_printf(b, "&gt;"); break;
            case '"': cli_buf_printf(b, "&quot;"); break;
            default:
                if ((unsigned char)*t >= 0x20 || *t == '\t' || *t == '\n')
                    cli_buf_printf(b, "%c", *t);
        }
    }
}

void svg_chart_init(svg_chart *c, int width, const char *title)
{
    memset(c, 0, sizeof *c);
    c->width = width;
    snprintf(c->title, sizeof c->title, "%s", title);
}

int svg_chart_panel(svg_chart *c, const char *title, int height, int allow_log)
{
    if (c->n_panels == SVG_CHART_MAX_PANELS)
        return -1;
    svg_panel *p = &c->panels[c->n_panels];
    snprintf(p->title, sizeof p->title, "%s", title);
    p->height = height;
    p->allow_log = allow_log;
    return c->n_panels++;
}

int svg_chart_series(svg_chart *c, int panel, const char *name, int colour, const double *x,
                     const double *y, size_t n, int markers)
{
    if (c->n_series == SVG_CHART_MAX_SERIES || panel < 0 || panel >= c->n_panels)
        return -1;
    svg_series *s = &c->series[c->n_series++];
    s->panel = panel;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->colour = colour;
    s->markers = markers;
    s->x = x;
    s->y = y;
    s->n = n;
    return 0;
}

int svg_ticks(double lo, double hi, int log_axis, double *out, int cap)
{
    int n = 0;
    if (!(hi > lo))
        return 0;
    if (log_axis) {
        for (double e = ceil(log10(lo) - 1e-9); e <= log10(hi) + 1e-9 && n < cap; e += 1.0)
            out[n++] = pow(10.0, e);
        return n;
    }
    const double raw = (hi - lo) / 6.0;
    const double mag = pow(10.0, floor(log10(raw)));
    const double f = raw / mag;
    const double step = (f < 1.5 ? 1.0 : f < 3.5 ? 2.0 : f < 7.5 ? 5.0 : 10.0) * mag;
    for (double k = ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9 && n < cap; k += 1.0)
        out[n++] = fabs(k * step) < step * 1e-9 ? 0.0 : k * step;
    return n;
}

/* The value range of an axis over the finite (positive, for log) values. */
typedef struct axis {
    double lo, hi;
    int log;
} axis;

static void range_of(const svg_chart *c, int panel, int use_y, double *lo, double *hi, int pos)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int i = 0; i < c->n_series; i++) {
        const svg_series *s = &c->series[i];
        if (panel >= 0 && s->panel != panel)
            continue;
        for (size_t j = 0; j < s->n; j++) {
            const double v = use_y ? s->y[j] : s->x[j];
            if (!isfinite(s->x[j]) || !isfinite(s->y[j]) || (pos && v <= 0))
                continue;
            *lo = v < *lo ? v : *lo;
            *hi = v > *hi ? v : *hi;
        }
    }
}

static axis y_axis(const svg_chart *c, int panel)
{
    axis a = {0.0, 1.0, 0};
    double lo, hi;
    range_of(c, panel, 1, &lo, &hi, 0);
    if (!(lo <= hi))
        return a;
    double plo, phi;
    range_of(c, panel, 1, &plo, &phi, 1);
    if (c->panels[panel].allow_log && plo == lo && phi / plo > 10.0) {
        a.log = 1;
        a.lo = pow(10.0, floor(log10(plo)));
        a.hi = pow(10.0, ceil(log10(phi)));
        return a;
    }
    const double pad = hi > lo ? 0.05 * (hi - lo) : (lo != 0 ? 0.05 * fabs(lo) : 1.0);
    a.lo = lo - pad;
    a.hi = hi + pad;
    if (lo >= 0 && a.lo < 0)
        a.lo = 0.0;
    return a;
}

static double map(const axis *a, double v, double px0, double px1)
{
    const double t = a->log ? (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo))
                            : (v - a->lo) / (a->hi - a->lo);
    return px0 + t * (px1 - px0);
}

static void tick_label(double v, char *out, size_t cap)
{
    const double a = fabs(v);
    if (a != 0 && (a < 1e-4 || a >= 1e7))
        snprintf(out, cap, "%.3g", v);
    else
        snprintf(out, cap, "%.10g", v);
}

static void draw_axes(sbuf *b, const axis *xa, const axis *ya, int left, int top, int w, int h)
{
    double t[16];
    char lab[32];
    int n = svg_ticks(ya->lo, ya->hi, ya->log, t, 16);
    for (int i = 0; i < n; i++) {
        const double y = map(ya, t[i], top + h, top);
        tick_label(t[i], lab, sizeof lab);
        cli_buf_printf(b,
                       "<line class=\"grid\" x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\"/>"
                       "<text class=\"tick\" x=\"%d\" y=\"%.2f\" text-anchor=\"end\">%s</text>\n",
                       left, y, left + w, y, left - 6, y + 4, lab);
    }
    n = svg_ticks(xa->lo, xa->hi, 0, t, 16);
    for (int i = 0; i < n; i++) {
        const double x = map(xa, t[i], left, left + w);
        tick_label(t[i], lab, sizeof lab);
        cli_buf_printf(
            b,
            "<line class=\"grid\" x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\"/>"
            "<text class=\"tick\" x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
            x, top, x, top + h, x, top + h + 16, lab);
    }
    cli_buf_printf(b, "<rect class=\"frame\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>\n",
                   left, top, w, h);
}

static void draw_series(sbuf *b, const svg_series *s, const axis *xa, const axis *ya, int left,
                        int top, int w, int h)
{
    const char *col = palette[(size_t)s->colour % N_PALETTE];
    cli_buf_printf(b, "<g class=\"series\" data-name=\"");
    cli_buf_text(b, s->name);
    cli_buf_printf(b, "\" data-values=\"");
    for (size_t j = 0; j < s->n; j++)
        if (isfinite(s->x[j]) && isfinite(s->y[j]) && (!ya->log || s->y[j] > 0))
            cli_buf_printf(b, "%s%.17g,%.17g", j ? " " : "", s->x[j], s->y[j]);
    cli_buf_printf(b, "\">\n<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" points=\"",
                   col, s->markers ? "1" : "1.6");
    for (size_t j = 0; j < s->n; j++)
        if (isfinite(s->x[j]) && isfinite(s->y[j]) && (!ya->log || s->y[j] > 0))
            cli_buf_printf(b, "%.2f,%.2f ", map(xa, s->x[j], left, left + w),
                           map(ya, s->y[j], top + h, top));
    cli_buf_printf(b, "\"/>\n");
    for (size_t j = 0; s->markers && j < s->n; j++)
        if (isfinite(s->x[j]) && isfinite(s->y[j]) && (!ya->log || s->y[j] > 0))
            cli_buf_printf(b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"/>\n",
                           map(xa, s->x[j], left, left + w), map(ya, s->y[j], top + h, top), col);
    cli_buf_printf(b, "</g>\n");
}

static void draw_legend(sbuf *b, const svg_chart *c, int right, int top)
{
    int row = 0;
    for (int i = 0; i < c->n_series; i++) {
        const svg_series *s = &c->series[i];
        if (s->panel != 0)
            continue;
        const int y = top + 14 + 16 * row++;
        const char *col = palette[(size_t)s->colour % N_PALETTE];
        cli_buf_printf(
            b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/>",
            right - 230, y - 4, right - 206, y - 4, col);
        if (s->markers)
            cli_buf_printf(b, "<circle cx=\"%d\" cy=\"%d\" r=\"3\" fill=\"%s\"/>", right - 218,
                           y - 4, col);
        cli_buf_printf(b, "<text class=\"legend\" x=\"%d\" y=\"%d\">", right - 200, y);
        cli_buf_text(b, s->name);
        cli_buf_printf(b, "</text>\n");
    }
}

char *svg_chart_render(const svg_chart *c, const char *x_label)
{
    sbuf b = {NULL, 0, 0, 0};
    int height = TOP + BOTTOM;
    for (int p = 0; p < c->n_panels; p++)
        height += c->panels[p].height + (p > 0 ? GAP : 0);
    const int w = c->width - LEFT - RIGHT;
    axis xa = {0.0, 1.0, 0};
    range_of(c, -1, 0, &xa.lo, &xa.hi, 0);
    if (!(xa.lo < xa.hi)) {
        const double v = isfinite(xa.lo) ? xa.lo : 0.0;
        xa.lo = v - 1.0;
        xa.hi = v + 1.0;
    }
    cli_buf_printf(&b,
                   "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                   "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
                   "<style>.grid{stroke:#e3e3e3;stroke-width:1}.frame{fill:none;stroke:#444}"
                   ".tick{fill:#444;font-size:11px}.title{font-size:15px;font-weight:bold}"
                   ".ptitle{font-size:13px;fill:#222}.legend{font-size:12px;fill:#222}</style>\n"
                   "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                   "<text class=\"title\" x=\"%d\" y=\"24\">",
                   c->width, height, c->width, height, LEFT);
    cli_buf_text(&b, c->title);
    cli_buf_printf(&b, "</text>\n");
    int top = TOP;
    for (int p = 0; p < c->n_panels; p++) {
        const int h = c->panels[p].height;
        const axis ya = y_axis(c, p);
        cli_buf_printf(&b,
                       "<g class=\"panel\" data-title=\"%s\" data-x0=\"%.17g\" data-x1=\"%.17g\" "
                       "data-y0=\"%.17g\" data-y1=\"%.17g\" data-log=\"%d\" data-left=\"%d\" "
                       "data-top=\"%d\" data-width=\"%d\" data-height=\"%d\">\n",
                       c->panels[p].title, xa.lo, xa.hi, ya.lo, ya.hi, ya.log, LEFT, top, w, h);
        draw_axes(&b, &xa, &ya, LEFT, top, w, h);
        cli_buf_printf(&b,
                       "<text class=\"ptitle\" transform=\"translate(%d,%d) rotate(-90)\" "
                       "text-anchor=\"middle\">",
                       18, top + h / 2);
        cli_buf_text(&b, c->panels[p].title);
        cli_buf_printf(&b, "%s</text>\n", ya.log ? " (log)" : "");
        for (int i = 0; i < c->n_series; i++)
            if (c->series[i].panel == p)
                draw_series(&b, &c->series[i], &xa, &ya, LEFT, top, w, h);
        if (p == 0)
            draw_legend(&b, c, LEFT + w, top);
        cli_buf_printf(&b, "</g>\n");
        top += h + GAP;
    }
    cli_buf_printf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", LEFT + w / 2, height - 8);
    cli_buf_text(&b, x_label);
    cli_buf_printf(&b, "</text>\n</svg>\n");
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* ---- heatmaps --------------------------------------------------------------------- */

/* The cell size and the label room for a T x S panel. */
static int heat_cell(const svg_heatmap *h)
{
    const int big = h->T > h->S ? h->T : h->S;
    const int cell = (h->n_panels == 1 ? 640 : 280) / (big > 0 ? big : 1);
    return cell < 2 ? 2 : cell > 22 ? 22 : cell;
}

static void heat_panel(sbuf *b, const svg_heatmap *h, int p, int x0, int y0, int cell, int lab)
{
    const float *w = h->w + (size_t)p * (size_t)h->T * (size_t)h->S;
    cli_buf_printf(b, "<g class=\"heatmap\" data-title=\"");
    cli_buf_text(b, h->panel_titles[p]);
    cli_buf_printf(
        b, "\" data-rows=\"%d\" data-cols=\"%d\">\n<text class=\"ptitle\" x=\"%d\" y=\"%d\">", h->T,
        h->S, x0, y0 - lab - 8);
    cli_buf_text(b, h->panel_titles[p]);
    cli_buf_printf(
        b, "</text>\n<rect class=\"frame\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>\n", x0,
        y0, cell * h->S, cell * h->T);
    for (int t = 0; t < h->T; t++)
        for (int s = 0; s < h->S; s++) {
            const float v = w[(size_t)t * (size_t)h->S + (size_t)s];
            if (!(v >= 1.0f / 512.0f))
                continue;
            const int shade = (int)(255.0f * (1.0f - (v > 1.0f ? 1.0f : v)) + 0.5f);
            cli_buf_printf(
                b,
                "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                "fill=\"rgb(%d,%d,255)\" data-row=\"%d\" data-col=\"%d\" data-w=\"%.9g\"/>\n",
                x0 + s * cell, y0 + t * cell, cell, cell, shade, shade, t, s, (double)v);
        }
    if (cell >= 8) { /* token labels: keys above, queries on the left */
        for (int s = 0; s < h->S; s++) {
            cli_buf_printf(b, "<text class=\"tok\" transform=\"translate(%d,%d) rotate(-60)\">",
                           x0 + s * cell + cell / 2 + 3, y0 - 4);
            cli_buf_text(b, h->col_labels[s]);
            cli_buf_printf(b, "</text>\n");
        }
        for (int t = 0; t < h->T; t++) {
            cli_buf_printf(b, "<text class=\"tok\" x=\"%d\" y=\"%d\" text-anchor=\"end\">", x0 - 4,
                           y0 + t * cell + cell / 2 + 4);
            cli_buf_text(b, h->row_labels[t]);
            cli_buf_printf(b, "</text>\n");
        }
    }
    cli_buf_printf(b, "</g>\n");
}

char *svg_heatmap_render(const svg_heatmap *h)
{
    sbuf b = {NULL, 0, 0, 0};
    const int cell = heat_cell(h), lab = cell >= 8 ? 56 : 0;
    const int cols = h->n_panels < 4 ? h->n_panels : 4;
    const int rows = (h->n_panels + cols - 1) / cols;
    const int pw = lab + cell * h->S + 24, ph = lab + cell * h->T + 40;
    const int tw = 40 + 8 * (int)strlen(h->title); /* room for the title */
    const int width = 20 + cols * pw > tw ? 20 + cols * pw : tw, height = 44 + rows * ph;
    cli_buf_printf(&b,
                   "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                   "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
                   "<style>.frame{fill:none;stroke:#888}.title{font-size:15px;font-weight:bold}"
                   ".ptitle{font-size:13px;fill:#222}.tok{font-size:%dpx;fill:#333;"
                   "font-family:monospace}</style>\n"
                   "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                   "<text class=\"title\" x=\"20\" y=\"24\">",
                   width, height, width, height, cell < 12 ? cell : 12);
    cli_buf_text(&b, h->title);
    cli_buf_printf(&b, "</text>\n");
    for (int p = 0; p < h->n_panels; p++) {
        const int x0 = 20 + (p % cols) * pw + lab, y0 = 44 + (p / cols) * ph + lab + 20;
        heat_panel(&b, h, p, x0, y0, cell, lab);
    }
    cli_buf_printf(&b, "</svg>\n");
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* ---- writing a picture ------------------------------------------------------------- */

/* the rendered PNG of svg (through rsvg-convert) into *png; an exit code */
static int svg_to_png(const char *cmd, const char *out, const char *svg, char **png, size_t *n)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s.tmp.XXXXXX", out);
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "%s: --out %s: cannot make a temporary folder beside it: %s\n", cmd, out,
                strerror(errno));
        return CLI_EXIT_FAIL;
    }
    char sp[4300], pp[4300];
    snprintf(sp, sizeof sp, "%s/picture.svg", dir);
    snprintf(pp, sizeof pp, "%s/picture.png", dir);
    clf_error err;
    clf_error_clear(&err);
    int rc = CLI_EXIT_FAIL;
    if (clf_file_write_atomic(sp, svg, strlen(svg), &err) != CLF_OK) {
        fprintf(stderr, "%s: %s\n", cmd, err.msg);
        goto done;
    }
    char *argv[] = {"rsvg-convert", "-o", pp, sp, NULL};
    pid_t pid;
    int status = 0, e = posix_spawnp(&pid, "rsvg-convert", NULL, NULL, argv, environ);
    if (e != 0) {
        fprintf(stderr,
                "%s: --out %s: a PNG is drawn by rsvg-convert, which %s (Debian: apt-get install "
                "librsvg2-bin); or write the SVG (--out FILE.svg)\n",
                cmd, out, e == ENOENT ? "is not installed" : strerror(e));
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "%s: rsvg-convert failed to draw %s\n", cmd, out);
        goto done;
    }
    if (clf_file_read_all(pp, (size_t)1 << 30, png, n, &err) != CLF_OK) {
        fprintf(stderr, "%s: %s\n", cmd, err.msg);
        goto done;
    }
    rc = CLI_EXIT_OK;
done:
    remove(sp);
    remove(pp);
    rmdir(dir);
    return rc;
}

int cli_write_picture(const char *cmd, const char *out, const char *svg)
{
    const size_t ol = strlen(out);
    const int png = ol > 4 && strcasecmp(out + ol - 4, ".png") == 0;
    char *bytes = NULL;
    size_t n = 0;
    int rc = png ? svg_to_png(cmd, out, svg, &bytes, &n) : CLI_EXIT_OK;
    clf_error err;
    clf_error_clear(&err);
    if (rc == CLI_EXIT_OK &&
        clf_file_write_atomic(out, png ? bytes : svg, png ? n : strlen(svg), &err) != CLF_OK) {
        fprintf(stderr, "%s: %s\n", cmd, err.msg);
        rc = CLI_EXIT_FAIL;
    }
    free(bytes);
    return rc;
}
