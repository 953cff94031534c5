/*
 * cmd_report.c - `clformer report RUN --out report.html`: one
 * self-contained HTML page of a training run (no network, no scripts, the
 * charts inline SVG): the model and its config, the device and timings,
 * the curves (cmd_plot.c's chart), the final metrics, and a preview for
 * the kind: a sample of a decoder, translations of a few validation
 * sentences with their BLEU for a translator, the confusion matrix over
 * the validation set for a classifier. What it reads: RUN/metrics.jsonl
 * (every `train` appends to it; its first record names the data) and the
 * checkpoint.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/cli_data.h"
#include "cli/cli_model.h"
#include "cli/svg_chart.h"

enum { REPORT_SENTENCES = 5, REPORT_LABELS_MAX = 32 };

static void usage(FILE *out)
{
    fprintf(out,
            "usage: clformer report RUN --out report.html [--data PATH] [--prompt TEXT]\n"
            "                       [--tokens N] [runtime flags]\n"
            "One self-contained HTML page of a training run: the model and its config, device\n"
            "and timings, the curves, the final metrics, and a preview: a sample (decoder),\n"
            "translations of the first validation sentences with their BLEU (translator), or\n"
            "the confusion matrix over the validation set (classifier).\n"
            "  --out FILE        the HTML file, written atomically\n"
            "  --data PATH       the data (default: what the run trained on, from its metrics)\n"
            "  --prompt TEXT     a decoder's sample starts from TEXT (default: a newline)\n"
            "  --tokens N        a decoder's sample length (default 300)\n" CLI_RUNTIME_FLAGS_HELP);
}

/* What the run's metrics say: its first session's start, the last end,
 * evaluation and log records (each a parsed line, or NULL). */
typedef struct run_summary {
    clf_json *start, *end, *eval, *log;
    int sessions;
} run_summary;

static void summary_free(run_summary *r)
{
    clf_json_destroy(r->start);
    clf_json_destroy(r->end);
    clf_json_destroy(r->eval);
    clf_json_destroy(r->log);
}

static int keep_record(void *user, clf_json **rec)
{
    run_summary *r = user;
    const clf_json *ev = clf_json_get(*rec, "event");
    const int session = ev != NULL && ev->type == CLF_JSON_STRING;
    const int end = session && strcmp(ev->string, "end") == 0;
    clf_json **slot = session                                  ? (end                ? &r->end
                                                                  : r->start == NULL ? &r->start
                                                                                     : NULL)
                      : clf_json_get(*rec, "val_loss") != NULL ? &r->eval
                      : clf_json_get(*rec, "loss") != NULL     ? &r->log
                                                               : NULL;
    r->sessions += session && !end;
    if (slot != NULL) {
        clf_json_destroy(*slot);
        *slot = *rec;
        *rec = NULL;
    }
    return CLI_EXIT_OK;
}

static int read_summary(const char *dir, run_summary *r)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    int rc = cli_metrics_read("report", path, " (RUN: a `clformer train` run directory)",
                              keep_record, r);
    if (rc == CLI_EXIT_OK && r->start == NULL) {
        fprintf(stderr, "clformer report: %s has no session record (written by `clformer train`)\n",
                path);
        rc = CLI_EXIT_USAGE;
    }
    return rc;
}

static const char *jstr(const clf_json *rec, const char *key)
{
    const clf_json *v = rec != NULL ? clf_json_get(rec, key) : NULL;
    return v != NULL && v->type == CLF_JSON_STRING ? v->string : NULL;
}

static double jnum(const clf_json *rec, const char *key)
{
    const clf_json *v = rec != NULL ? clf_json_get(rec, key) : NULL;
    return v != NULL && v->type == CLF_JSON_NUMBER ? v->number : NAN;
}

/* A table row "name | value" (value printf-formatted, escaped). */
static void row(cli_buf *b, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void row(cli_buf *b, const char *name, const char *fmt, ...)
{
    char v[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    cli_buf_printf(b, "<tr><th>");
    cli_buf_text(b, name);
    cli_buf_printf(b, "</th><td>");
    cli_buf_text(b, v);
    cli_buf_printf(b, "</td></tr>\n");
}

/* ---- previews ---------------------------------------------------------------------- */

static int collect_piece(void *user, int32_t token, const char *piece, size_t len)
{
    (void)token;
    cli_buf *b = user;
    char tmp[256];
    while (len > 0) {
        const size_t n = len < sizeof tmp - 1 ? len : sizeof tmp - 1;
        memcpy(tmp, piece, n);
        tmp[n] = '\0';
        cli_buf_text(b, tmp);
        piece += n;
        len -= n;
    }
    return 0;
}

static clf_status preview_sample(cli_buf *b, clf_model *m, const clf_tokenizer *tok,
                                 const char *prompt, long tokens, clf_error *err)
{
    clf_sampler_options so = clf_sampler_options_default();
    cli_buf_printf(b, "<h2>Sample</h2>\n<p class=\"note\">%ld tokens, temperature %g, seed %llu",
                   tokens, so.temperature, (unsigned long long)so.seed);
    cli_buf_printf(b, "%s</p>\n<pre class=\"sample\"><b>", prompt[0] ? ", after the prompt" : "");
    cli_buf_text(b, prompt);
    cli_buf_printf(b, "</b>");
    clf_status st =
        clf_generate(m, tok, prompt, strlen(prompt), tokens, &so, collect_piece, b, NULL, err);
    cli_buf_printf(b, "</pre>\n");
    return st;
}

static clf_status preview_translations(cli_buf *b, clf_model *m, const clf_tokenizer *tok,
                                       const clf_model_config *cfg, const cli_seq_paths *p,
                                       clf_error *err)
{
    char **src = NULL, **ref = NULL;
    size_t ns = 0, nr = 0;
    clf_seqdata *ds = NULL;
    char **hyps = NULL;
    clf_status st = CLF_OK;
    if (cli_read_lines(p->val_src, &src, &ns) != CLI_EXIT_OK ||
        cli_read_lines(p->val_tgt, &ref, &nr) != CLI_EXIT_OK) {
        st = clf_error_set(err, CLF_ERR_IO, "report: cannot read %s or %s", p->val_src, p->val_tgt);
        goto done;
    }
    const size_t n = ns < REPORT_SENTENCES ? ns : REPORT_SENTENCES;
    cli_buf text = {NULL, 0, 0, 0};
    for (size_t i = 0; i < n; i++)
        cli_buf_printf(&text, "%s\n", src[i]);
    clf_seq_options so;
    clf_seq_options_default(&so, cfg->kind, cfg->context);
    if (text.failed)
        st = clf_error_set(err, CLF_ERR_MEMORY, "report: out of host memory");
    else
        st = clf_seqdata_from_text(text.s, text.len, p->val_src, tok, &so, &ds, err);
    free(text.s);
    clf_beam_options bo;
    clf_beam_options_default(&bo);
    bo.batch = REPORT_SENTENCES;
    clf_bleu_score bleu;
    if (st == CLF_OK)
        st = clf_seqeval_bleu(m, tok, ds, (const char *const *)ref, &bo, &bleu, &hyps, err);
    if (st != CLF_OK)
        goto done;
    cli_buf_printf(b,
                   "<h2>Translations</h2>\n<p class=\"note\">The first %zu sentences of %s, "
                   "greedy: BLEU %.2f over them.</p>\n<table class=\"tr\">\n"
                   "<tr><th>source</th><th>translation</th><th>reference</th></tr>\n",
                   n, p->val_src, bleu.score);
    for (size_t i = 0; i < n; i++) {
        cli_buf_printf(b, "<tr><td>");
        cli_buf_text(b, src[i]);
        cli_buf_printf(b, "</td><td>");
        cli_buf_text(b, hyps[i]);
        cli_buf_printf(b, "</td><td>");
        cli_buf_text(b, i < nr ? ref[i] : "");
        cli_buf_printf(b, "</td></tr>\n");
    }
    cli_buf_printf(b, "</table>\n");
done:
    if (hyps != NULL)
        clf_seqeval_hyps_free(hyps, clf_seqdata_size(ds));
    clf_seqdata_destroy(ds);
    clf_lines_free(src, ns);
    clf_lines_free(ref, nr);
    return st;
}

static clf_status preview_confusion(cli_buf *b, clf_model *m, const clf_model_config *cfg,
                                    const clf_tokenizer *tok, const cli_seq_paths *p,
                                    clf_error *err)
{
    clf_seqdata *ds = NULL;
    if (cli_seq_load(cfg, tok, p->val_src, NULL, &ds) != CLI_EXIT_OK)
        return clf_error_set(err, CLF_ERR_IO, "report: cannot load %s", p->val_src);
    const int NL = cfg->head.labels;
    const size_t n = clf_seqdata_size(ds);
    float *probs = malloc(n * (size_t)NL * sizeof *probs);
    long *cm = calloc((size_t)NL * (size_t)NL, sizeof *cm);
    clf_status st = CLF_OK;
    if (NL > REPORT_LABELS_MAX)
        st =
            clf_error_set(err, CLF_ERR_ARG, "report: %d labels (a confusion matrix for at most %d)",
                          NL, REPORT_LABELS_MAX);
    else if (probs == NULL || cm == NULL)
        st = clf_error_set(err, CLF_ERR_MEMORY, "report: out of host memory");
    clf_seq_batching bo;
    clf_seqeval_batching(cfg->train.batch > 0 ? cfg->train.batch : 32, 0, &bo);
    if (st == CLF_OK)
        st = clf_seqeval_probs(m, ds, &bo, probs, err);
    long correct = 0, labelled = 0;
    for (size_t i = 0; st == CLF_OK && i < n; i++) {
        int32_t label = -1;
        int best = 0;
        clf_seqdata_example(ds, i, NULL, NULL, NULL, NULL, &label);
        for (int k = 1; k < NL; k++)
            if (probs[i * (size_t)NL + (size_t)k] > probs[i * (size_t)NL + (size_t)best])
                best = k;
        if (label >= 0 && label < NL) {
            cm[label * NL + best]++;
            labelled++;
            correct += label == best;
        }
    }
    if (st == CLF_OK) {
        cli_buf_printf(b,
                       "<h2>Confusion matrix</h2>\n<p class=\"note\">%s: %ld sentences, accuracy "
                       "%.2f%% (rows: the label, columns: the prediction).</p>\n"
                       "<table class=\"cm\"><tr><th></th>",
                       p->val_src, labelled, labelled ? 100.0 * correct / labelled : 0.0);
        for (int k = 0; k < NL; k++)
            cli_buf_printf(b, "<th>%d</th>", k);
        cli_buf_printf(b, "</tr>\n");
        for (int r = 0; r < NL; r++) {
            cli_buf_printf(b, "<tr><th>%d</th>", r);
            for (int k = 0; k < NL; k++)
                cli_buf_printf(b, "<td class=\"%s\">%ld</td>", r == k ? "diag" : "off",
                               cm[r * NL + k]);
            cli_buf_printf(b, "</tr>\n");
        }
        cli_buf_printf(b, "</table>\n");
    }
    free(probs);
    free(cm);
    clf_seqdata_destroy(ds);
    return st;
}

/* ---- the page ---------------------------------------------------------------------- */

static const char *const page_style =
    "body{font-family:sans-serif;max-width:960px;margin:24px auto;color:#222;padding:0 12px}"
    "h1{margin-bottom:4px}h2{margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:4px}"
    ".sub,.note{color:#555}table{border-collapse:collapse;margin:8px 0}"
    "th,td{padding:4px 10px;text-align:left;border-bottom:1px solid #eee;vertical-align:top}"
    "table.cm td{text-align:right;min-width:48px}td.diag{background:#dbe7ff;font-weight:bold}"
    "pre{background:#f6f6f6;padding:10px;overflow-x:auto;white-space:pre-wrap}"
    ".chart svg{max-width:100%;height:auto}";

/* The run's table: device, steps, time, speed, the final metrics. */
static void run_table(cli_buf *b, const run_summary *r, const clf_model *m,
                      const clf_model_config *cfg)
{
    const clf_model_dims d = clf_model_dims_get(m);
    char np[32], tps[32];
    cli_group_digits((unsigned long long)d.n_real, np, sizeof np);
    cli_buf_printf(b, "<h2>Run</h2>\n<table>\n");
    row(b, "model", "%s: %s parameters, %d layer%s, %d heads, dim %d, context %d, vocabulary %d",
        clf_config_kind_name(cfg->kind), np, d.L, d.L == 1 ? "" : "s", d.NH, d.C, d.T, d.V);
    const char *dev = jstr(r->start, "device"), *data = jstr(r->start, "data");
    row(b, "device", "%s", dev != NULL ? dev : "?");
    row(b, "data", "%s", data != NULL ? data : "?");
    const double step = jnum(r->log, "step"), total = jnum(r->start, "total");
    if (isfinite(step))
        row(b, "steps", "%.0f%s (%d session%s)", step,
            isfinite(total) && total > step ? " (stopped early or still running)" : "", r->sessions,
            r->sessions == 1 ? "" : "s");
    if (isfinite(jnum(r->log, "elapsed_s")))
        row(b, "training time", "%.1f s", jnum(r->log, "elapsed_s"));
    if (isfinite(jnum(r->end, "tokens_per_s"))) {
        cli_group_digits((unsigned long long)(jnum(r->end, "tokens_per_s") + 0.5), tps, sizeof tps);
        row(b, "speed", "%s training tokens/s (the last session)", tps);
    }
    if (isfinite(jnum(r->log, "loss")))
        row(b, "training loss", "%.4f at step %.0f", jnum(r->log, "loss"), step);
    if (isfinite(jnum(r->eval, "val_loss")))
        row(b, "validation loss", "%.4f at step %.0f", jnum(r->eval, "val_loss"),
            jnum(r->eval, "step"));
    if (isfinite(jnum(r->eval, "accuracy")))
        row(b, "validation accuracy", "%.2f%%", 100.0 * jnum(r->eval, "accuracy"));
    if (isfinite(jnum(r->eval, "bleu")))
        row(b, "validation BLEU", "%.2f", jnum(r->eval, "bleu"));
    cli_buf_printf(b, "</table>\n");
}

typedef struct report_args {
    const char *dir, *out, *data, *prompt;
    long tokens;
} report_args;

/* The page into b; an exit code (errors printed). */
static int build_page(cli_buf *b, const report_args *a, const run_summary *r, clf_model *m,
                      const clf_model_config *cfg, const clf_tokenizer *tok, clf_checkpoint *ck,
                      const cli_runtime_flags *rf)
{
    const char *slash = strrchr(a->dir, '/');
    const char *name = slash != NULL && slash[1] ? slash + 1 : a->dir;
    char when[64] = "";
    const time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    cli_buf_printf(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                      "<title>clformer report: ");
    cli_buf_text(b, name);
    cli_buf_printf(b, "</title><style>%s</style></head>\n<body>\n<h1>", page_style);
    cli_buf_text(b, name);
    cli_buf_printf(b, "</h1>\n<p class=\"sub\">A clformer training run, reported %s from ", when);
    cli_buf_text(b, a->dir);
    cli_buf_printf(b, ".</p>\n");
    run_table(b, r, m, cfg);

    char *svg = NULL;
    const char *paths[1] = {a->dir};
    int rc = cli_plot_svg(paths, 1, 0, &svg);
    if (rc != CLI_EXIT_OK)
        return rc;
    const char *body = strstr(svg, "<svg");
    cli_buf_printf(b, "<h2>Curves</h2>\n<div class=\"chart\">%s</div>\n", body ? body : "");
    free(svg);

    clf_error err;
    clf_error_clear(&err);
    clf_status st = CLF_OK;
    const char *data = a->data != NULL ? a->data : jstr(r->start, "data");
    if (cfg->kind == CLF_MODEL_DECODER) {
        st = preview_sample(b, m, tok, a->prompt, a->tokens, &err);
    } else if (data == NULL) {
        cli_buf_printf(b,
                       "<p class=\"note\">No preview: the run's data is unknown (--data).</p>\n");
    } else {
        cli_seq_paths p;
        rc = cli_seq_paths_eval(cfg->kind, data, NULL, clf_checkpoint_meta(ck, "src_lang"),
                                clf_checkpoint_meta(ck, "tgt_lang"), &p);
        if (rc != CLI_EXIT_OK)
            return rc;
        st = cfg->kind == CLF_MODEL_ENCODER_DECODER ? preview_translations(b, m, tok, cfg, &p, &err)
                                                    : preview_confusion(b, m, cfg, tok, &p, &err);
    }
    if (st != CLF_OK) {
        cli_print_error(NULL, &err);
        return cli_exit_code(st);
    }
    cli_notice_end(rf);
    size_t n = clf_config_to_yaml(cfg, NULL, 0);
    char *yaml = malloc(n + 1);
    if (yaml != NULL) {
        clf_config_to_yaml(cfg, yaml, n + 1);
        cli_buf_printf(b, "<h2>Config</h2>\n<pre>");
        cli_buf_text(b, yaml);
        cli_buf_printf(b, "</pre>\n");
        free(yaml);
    }
    cli_buf_printf(b, "</body></html>\n");
    return b->failed ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

int cli_cmd_report(int argc, char **argv)
{
    report_args a = {NULL, NULL, NULL, "", 300};
    cli_runtime_flags rf;
    cli_runtime_flags_init(&rf);
    const cli_opt opts[] = {
        {"--out", CLI_OPT_STR, &a.out, 0, 0, NULL},
        {"--data", CLI_OPT_STR, &a.data, 0, 0, NULL},
        {"--prompt", CLI_OPT_TEXT, &a.prompt, 0, 0, NULL},
        {"--tokens", CLI_OPT_INT, &a.tokens, 1, 100000, NULL},
    };
    const cli_command cmd = {"clformer report", opts, CLI_COUNT(opts), &rf, &a.dir, 1,
                             "one RUN",         usage};
    int rc = cli_parse_args(&cmd, argc, argv);
    if (rc != CLI_PARSE_RUN)
        return rc;
    if (a.dir == NULL || a.out == NULL) {
        fprintf(stderr, "clformer report: %s\n",
                a.dir == NULL ? "RUN expected" : "--out FILE is required");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    clf_error err;
    clf_error_clear(&err);
    if (clf_file_check_target(a.out, &err) != CLF_OK) {
        fprintf(stderr, "clformer report: --out: %s\n", err.msg);
        return CLI_EXIT_FAIL;
    }
    run_summary r;
    memset(&r, 0, sizeof r);
    clf_checkpoint *ck = NULL;
    clf_tokenizer *tok = NULL;
    clf_runtime *rt = NULL;
    clf_model *m = NULL;
    clf_model_config cfg;
    cli_buf b = {NULL, 0, 0, 0};
    if ((rc = read_summary(a.dir, &r)) != CLI_EXIT_OK ||
        (rc = cli_checkpoint_open(a.dir, &ck, &cfg, &tok)) != CLI_EXIT_OK ||
        (rc = cli_runtime_open(&rf, &rt)) != CLI_EXIT_OK)
        goto done;
    /* a sample of one sequence; the translations in one batch */
    const clf_model_limits one = {.B = cfg.kind == CLF_MODEL_DECODER ? 1 : REPORT_SENTENCES};
    const int infer = cfg.kind != CLF_MODEL_ENCODER;
    if ((rc = cli_checkpoint_model(rt, ck, infer ? &one : NULL, infer ? CLF_MODEL_INFER : 0, &m)) !=
            CLI_EXIT_OK ||
        (rc = build_page(&b, &a, &r, m, &cfg, tok, ck, &rf)) != CLI_EXIT_OK)
        goto done;
    if (clf_file_write_atomic(a.out, b.s, b.len, &err) != CLF_OK) {
        fprintf(stderr, "clformer report: %s\n", err.msg);
        rc = CLI_EXIT_FAIL;
        goto done;
    }
    printf("%s: the report of %s (%zu bytes)\n", a.out, a.dir, b.len);
done:
    free(b.s);
    summary_free(&r);
    clf_model_destroy(m);
    clf_runtime_destroy(rt);
    clf_checkpoint_close(ck);
    clf_tokenizer_destroy(tok);
    return rc;
}
