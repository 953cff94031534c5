/*
 * svg_chart.h - line charts as SVG text: panels stacked vertically, each
 * with its own y axis (linear, or logarithmic when asked), a shared x
 * range, series drawn as polylines (or markers), and one legend. Axis
 * ticks fall on round numbers (1, 2 or 5 times a power of ten; powers of
 * ten on a log axis).
 *
 *   svg_chart c;
 *   svg_chart_init(&c, 880, "loss against step");
 *   int p = svg_chart_panel(&c, "loss", 300, 1);           // log y when it spans decades
 *   svg_chart_series(&c, p, "run/train", 0, xs, ys, n, 0); // colour 0, a line
 *   char *svg = svg_chart_render(&c, "step");              // free(); NULL: out of memory
 *   svg_chart_free(&c);
 *
 * Each panel's <g> carries its mapping as data- attributes (data-x0,
 * data-x1, data-y0, data-y1: the value range; data-left, data-top,
 * data-width, data-height: its plot area in pixels; data-log="1" for a
 * log axis) and each series' <polyline> or markers its values
 * (data-values="x,y x,y ..."), so a test can check every plotted point
 * against the logged value it came from. Text is XML-escaped.
 *
 * Not here: reading metrics (cmd_plot.c), raster output.
 */
#ifndef CLI_SVG_CHART_H
#define CLI_SVG_CHART_H

#include <stddef.h>

/* A growing string for SVG and HTML text; `failed` once an allocation
 * failed (then it stays, and the text is to be dropped). */
typedef struct cli_buf {
    char *s;
    size_t len, cap;
    int failed;
} cli_buf;
void cli_buf_printf(cli_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* t as XML / HTML character data (also inside attribute values): & < > "
 * escaped, control characters other than tab and newline dropped. */
void cli_buf_text(cli_buf *b, const char *t);

enum { SVG_CHART_MAX_PANELS = 4, SVG_CHART_MAX_SERIES = 64 };

typedef struct svg_series {
    int panel;
    char name[128];
    int colour;  /* index into the palette (runs) */
    int markers; /* 1: points as circles joined by a thin line (evaluations) */
    const double *x, *y;
    size_t n;
} svg_series;

typedef struct svg_panel {
    char title[64];
    int height;
    int allow_log; /* a log y axis when the values span more than a decade */
} svg_panel;

typedef struct svg_chart {
    int width;
    char title[256];
    svg_panel panels[SVG_CHART_MAX_PANELS];
    int n_panels;
    svg_series series[SVG_CHART_MAX_SERIES];
    int n_series;
} svg_chart;

void svg_chart_init(svg_chart *c, int width, const char *title);
/* A panel below the others; its index, or -1 when there are too many. */
int svg_chart_panel(svg_chart *c, const char *title, int height, int allow_log);
/* A series of n points (x, y borrowed until render; non-finite points are
 * skipped); 0, or -1 when there are too many. */
int svg_chart_series(svg_chart *c, int panel, const char *name, int colour, const double *x,
                     const double *y, size_t n, int markers);
/* The whole SVG document, malloc'ed and NUL-terminated; NULL when out of
 * memory. x_label names the shared x axis. */
char *svg_chart_render(const svg_chart *c, const char *x_label);

/* Heatmaps of attention weights: one panel per head (in a grid of up to
 * four columns), rows the queries, columns the keys, a cell's shade its
 * weight (white 0 to dark blue 1), token labels along both axes where the
 * cells are big enough to hold them. Each panel's <g class="heatmap">
 * names its head (data-title) and each cell's <rect> carries
 * data-row, data-col and data-w (the weight, %.9g): what a test compares.
 * Cells of weight below 1/512 are not drawn (the panel is white there). */
typedef struct svg_heatmap {
    const char *title;
    int n_panels;
    const char *const *panel_titles; /* [n_panels] */
    int T, S;                        /* rows (queries), columns (keys) */
    const float *w;                  /* [n_panels, T, S] */
    const char *const *row_labels;   /* [T] */
    const char *const *col_labels;   /* [S] */
} svg_heatmap;
char *svg_heatmap_render(const svg_heatmap *h);

/* The curves of n runs (directories or metrics files: cmd_plot.c) as an
 * SVG document (*svg malloc'ed); an exit code, errors printed. */
int cli_plot_svg(const char *const *paths, int n, int by_time, char **svg);

/* Write a picture to out: the SVG as it is, or (out ending in .png) the PNG
 * rsvg-convert draws of it (Debian's librsvg2-bin; exit 2 naming it when
 * missing). Atomic either way; an exit code, errors printed as cmd's. */
int cli_write_picture(const char *cmd, const char *out, const char *svg);

/* Round tick positions in [lo, hi] (at most cap): linear steps of 1, 2 or
 * 5 x 10^k giving 4 to 10 ticks, or powers of ten (log). Returns the
 * count. */
int svg_ticks(double lo, double hi, int log_axis, double *out, int cap);

#endif
