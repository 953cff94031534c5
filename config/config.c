/*
 * config.c - reading a model file with libyaml: the document tree walked
 * against the schema tables (schema.c), --set overrides, and errors that
 * point at the file position.
 *
 * Design: libyaml composes the whole document (yaml_parser_load); each
 * mapping is checked against its table: keys must be scalars, known and
 * not repeated; each value must have the node type and range its entry
 * says. Quoted scalars are strings: `dim: "128"` is an error, not 128.
 * Every leaf that is set remembers where (file line:col, or which --set),
 * so that cross-field rules (validate.c) can point at the key that broke
 * them. An override "a.b.c=value" parses `value` as a YAML document of its
 * own (so "[0.9, 0.95]" or "{heads: 8}" work) and applies it to the entry
 * that the key path names, with the same checks.
 *
 * Errors: err->where is "file:line:col" (libyaml counts from 0; we print
 * from 1) or "--set key=value"; err->msg says what was expected and, for a
 * file, shows the offending line with a caret under the column.
 *
 * Not done: YAML merge keys (<<) and tags are not interpreted (a merge key
 * is an unknown key); only the first document of a stream is a config, a
 * second one is an error.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "config/config_internal.h"

#define MAX_LOCS 256
#define MAX_FILE_BYTES (1u << 20)
#define PATH_CAP 256

typedef struct cfg_loc {
    size_t off;     /* the leaf's offset in clf_model_config */
    long line, col; /* 1-based, for the file */
    int ovr;        /* -1: set in the file; else the index of the --set */
} cfg_loc;

typedef struct pctx {
    const char *name; /* the file's name in error locations (NULL: none) */
    const char *text; /* the file's text, for the offending line */
    size_t len;
    const char *const *ovrs;
    int cur_ovr; /* -1 while reading the file */
    yaml_document_t *doc;
    clf_model_config *cfg;
    cfg_loc locs[MAX_LOCS];
    int n_locs;
} pctx;

/* ---- error text -------------------------------------------------------------------- */

/* "\n  <line>\n  <spaces>^" for 0-based line/column (columns count
 * characters, as libyaml's marks do). Nothing if the line is not there. */
static void caret_lines(const pctx *c, long line0, long col0, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!c->text || line0 < 0 || col0 < 0)
        return;
    const char *p = c->text, *end = c->text + c->len;
    long l = 0;
    for (; l < line0 && p < end; p++)
        if (*p == '\n')
            l++;
    if (l < line0)
        return;
    const char *e = p;
    while (e < end && *e != '\n' && *e != '\r')
        e++;
    int shown = (int)(e - p) > 160 ? 160 : (int)(e - p);
    char pad[200];
    size_t np = 0;
    long chars = 0;
    for (const char *q = p; q < p + shown && chars < col0 && np + 1 < sizeof pad; q++) {
        if (((unsigned char)*q & 0xC0) == 0x80)
            continue; /* UTF-8 continuation */
        pad[np++] = *q == '\t' ? '\t' : ' ';
        chars++;
    }
    pad[np] = '\0';
    if (chars < col0 && col0 > 160) { /* column beyond what is shown: no caret */
        snprintf(buf, cap, "\n  %.*s%s", shown, p, shown < (int)(e - p) ? "..." : "");
        return;
    }
    snprintf(buf, cap, "\n  %.*s%s\n  %s^", shown, p, shown < (int)(e - p) ? "..." : "", pad);
}

/* Set err for a problem at (line0, col0) of the file, or at the current
 * --set, or at the whole file when line0 < 0. */
static clf_status err_at(const pctx *c, long line0, long col0, clf_error *err, const char *msg)
{
    char where[512];
    if (c->cur_ovr >= 0) {
        snprintf(where, sizeof where, "--set %s", c->ovrs[c->cur_ovr]);
        return clf_error_set_at(err, CLF_ERR_CONFIG, where, "%s", msg);
    }
    if (line0 < 0)
        return clf_error_set_at(err, CLF_ERR_CONFIG, c->name, "%s", msg);
    char lines[512];
    caret_lines(c, line0, col0, lines, sizeof lines);
    snprintf(where, sizeof where, "%s:%ld:%ld", c->name ? c->name : "<config>", line0 + 1,
             col0 + 1);
    return clf_error_set_at(err, CLF_ERR_CONFIG, where, "%s%s", msg, lines);
}

static clf_status node_err(const pctx *c, const yaml_node_t *n, clf_error *err, const char *fmt,
                           ...) __attribute__((format(printf, 4, 5)));
static clf_status node_err(const pctx *c, const yaml_node_t *n, clf_error *err, const char *fmt,
                           ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!n)
        return err_at(c, -1, -1, err, msg);
    return err_at(c, (long)n->start_mark.line, (long)n->start_mark.column, err, msg);
}

/* A libyaml reader/scanner/parser/composer error. */
static clf_status syntax_err(const pctx *c, const yaml_parser_t *p, clf_error *err)
{
    char msg[1024];
    const char *problem = p->problem ? p->problem : "unknown error";
    if (p->error == YAML_MEMORY_ERROR)
        return clf_error_set_at(err, CLF_ERR_MEMORY, c->name, "out of memory reading YAML");
    if (p->error == YAML_READER_ERROR) {
        snprintf(msg, sizeof msg, "not valid text at byte %zu: %s", p->problem_offset, problem);
        return err_at(c, -1, -1, err, msg);
    }
    if (p->context)
        snprintf(msg, sizeof msg, "YAML syntax error: %s (%s at line %zu, column %zu)", problem,
                 p->context, p->context_mark.line + 1, p->context_mark.column + 1);
    else
        snprintf(msg, sizeof msg, "YAML syntax error: %s", problem);
    if (c->cur_ovr >= 0) {
        char m2[1100];
        snprintf(m2, sizeof m2, "the value is not valid YAML: %s", msg + 19);
        return err_at(c, -1, -1, err, m2);
    }
    return err_at(c, (long)p->problem_mark.line, (long)p->problem_mark.column, err, msg);
}

/* ---- small helpers --------------------------------------------------------------------- */

static const char *sval(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

static int is_plain(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static int is_null(const yaml_node_t *n)
{
    if (!is_plain(n))
        return 0;
    const char *s = sval(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static void describe(const yaml_node_t *n, char *buf, size_t cap)
{
    if (n->type == YAML_MAPPING_NODE)
        snprintf(buf, cap, "a mapping");
    else if (n->type == YAML_SEQUENCE_NODE)
        snprintf(buf, cap, "a sequence");
    else if (n->type != YAML_SCALAR_NODE)
        snprintf(buf, cap, "nothing");
    else if (is_null(n))
        snprintf(buf, cap, "nothing (null)");
    else {
        const char *s = sval(n);
        const char *more = strlen(s) > 40 ? "..." : "";
        if (is_plain(n))
            snprintf(buf, cap, "'%.40s%s'", s, more);
        else
            snprintf(buf, cap, "the quoted string \"%.40s%s\"", s, more);
    }
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (la >= 63 || lb >= 63)
        return 99;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* " (did you mean 'x'?)" when one candidate is close, else "". */
static void suggest(const char *word, const char *const *cands, int n, char *buf, size_t cap)
{
    size_t best = 99, lw = strlen(word);
    const char *pick = NULL;
    for (int i = 0; i < n; i++) {
        size_t d = edit_distance(word, cands[i]);
        if (d < best)
            best = d, pick = cands[i];
    }
    size_t limit = lw <= 3 ? 1 : lw <= 6 ? 2 : 3;
    buf[0] = '\0';
    if (pick && best > 0 && best <= limit)
        snprintf(buf, cap, " (did you mean '%s'?)", pick);
}

static void suggest_key(const char *word, const clf_cfg_field *t1, const clf_cfg_field *t2,
                        char *buf, size_t cap)
{
    const char *cands[64];
    int n = 0;
    for (const clf_cfg_field *f = t1; f && f->key && n < 64; f++)
        cands[n++] = f->key;
    for (const clf_cfg_field *f = t2; f && f->key && n < 64; f++)
        cands[n++] = f->key;
    suggest(word, cands, n, buf, cap);
}

static void remember(pctx *c, size_t off, const yaml_node_t *n)
{
    cfg_loc *l = NULL;
    for (int i = 0; i < c->n_locs; i++)
        if (c->locs[i].off == off)
            l = &c->locs[i];
    if (!l) {
        if (c->n_locs >= MAX_LOCS)
            return;
        l = &c->locs[c->n_locs++];
    }
    l->off = off;
    l->line = (long)n->start_mark.line + 1;
    l->col = (long)n->start_mark.column + 1;
    l->ovr = c->cur_ovr;
}

static int parse_long(const char *s, long long *out)
{
    if (!*s)
        return 0;
    for (const char *q = (*s == '-' || *s == '+') ? s + 1 : s; *q; q++)
        if (*q < '0' || *q > '9')
            return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s)
        return 0;
    *out = v;
    return 1;
}

static int parse_u64(const char *s, uint64_t *out)
{
    if (!*s)
        return 0;
    for (const char *q = *s == '+' ? s + 1 : s; *q; q++)
        if (*q < '0' || *q > '9')
            return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || end == s)
        return 0;
    *out = (uint64_t)v;
    return 1;
}

static int parse_double(const char *s, double *out)
{
    int digits = 0;
    if (!*s)
        return 0;
    for (const char *q = s; *q; q++) {
        if (*q >= '0' && *q <= '9')
            digits = 1;
        else if (!strchr("+-.eE", *q))
            return 0; /* no inf, nan or hex floats */
    }
    if (!digits)
        return 0;
    char *end;
    double v = strtod(s, &end);
    if (*end || end == s || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

static int parse_bool(const char *s, int *out)
{
    static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
    for (int i = 0; i < 3; i++) {
        if (!strcasecmp(s, yes[i]))
            return *out = 1, 1;
        if (!strcasecmp(s, no[i]))
            return *out = 0, 1;
    }
    return 0;
}

/* ---- the walk ---------------------------------------------------------------------------- */

static clf_status apply_field(pctx *c, const clf_cfg_field *f, const char *path,
                              const yaml_node_t *n, clf_error *err);

static clf_status apply_map(pctx *c, const clf_cfg_field *table, const char *path,
                            const yaml_node_t *n, clf_error *err)
{
    char keys[512], got[128];
    clf_cfg_key_list(table, keys, sizeof keys);
    if (n->type != YAML_MAPPING_NODE) {
        describe(n, got, sizeof got);
        if (!path[0])
            return node_err(c, n, err, "expected a mapping with keys: %s; got %s", keys, got);
        return node_err(c, n, err, "%s: expected a mapping with keys: %s; got %s",
                        clf_cfg_display(path), keys, got);
    }
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        if (!k || !v)
            return node_err(c, n, err, "malformed mapping in %s", clf_cfg_display(path));
        if (k->type != YAML_SCALAR_NODE) {
            describe(k, got, sizeof got);
            return node_err(c, k, err, "expected a key name in %s, got %s", clf_cfg_display(path),
                            got);
        }
        const char *key = sval(k);
        for (yaml_node_pair_t *q = n->data.mapping.pairs.start; q < p; q++) {
            yaml_node_t *kq = yaml_document_get_node(c->doc, q->key);
            if (kq && kq->type == YAML_SCALAR_NODE && !strcmp(sval(kq), key))
                return node_err(c, k, err, "duplicate key '%s' in %s (first given at line %zu)",
                                key, clf_cfg_display(path), kq->start_mark.line + 1);
        }
        const clf_cfg_field *f = clf_cfg_find(table, key);
        if (!f) {
            char hint[128];
            suggest_key(key, table, NULL, hint, sizeof hint);
            return node_err(c, k, err, "unknown key '%s' in %s; expected one of: %s%s", key,
                            clf_cfg_display(path), keys, hint);
        }
        char sub[PATH_CAP];
        snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", key);
        clf_status st = apply_field(c, f, sub, v, err);
        if (st != CLF_OK)
            return st;
    }
    return CLF_OK;
}

static clf_status bad_value(pctx *c, const clf_cfg_field *f, const char *path, const yaml_node_t *n,
                            clf_error *err)
{
    char want[512], got[128];
    clf_cfg_expected(f, want, sizeof want);
    describe(n, got, sizeof got);
    return node_err(c, n, err, "%s: expected %s, got %s", clf_cfg_display(path), want, got);
}

static clf_status apply_field(pctx *c, const clf_cfg_field *f, const char *path,
                              const yaml_node_t *n, clf_error *err)
{
    char *dst = (char *)c->cfg + f->offset;
    switch (f->type) {
        case CLF_CFG_MAP: return apply_map(c, f->sub, path, n, err);
        case CLF_CFG_INT: {
            long long v;
            if (!is_plain(n) || !parse_long(sval(n), &v) || !clf_cfg_in_range(f, (double)v))
                return bad_value(c, f, path, n, err);
            *(int *)dst = (int)v;
            break;
        }
        case CLF_CFG_U64: {
            uint64_t v;
            if (!is_plain(n) || !parse_u64(sval(n), &v))
                return bad_value(c, f, path, n, err);
            *(uint64_t *)dst = v;
            break;
        }
        case CLF_CFG_DOUBLE: {
            double v;
            if (!is_plain(n) || !parse_double(sval(n), &v) || !clf_cfg_in_range(f, v))
                return bad_value(c, f, path, n, err);
            *(double *)dst = v;
            break;
        }
        case CLF_CFG_PAIR: {
            double v[2];
            if (n->type != YAML_SEQUENCE_NODE ||
                n->data.sequence.items.top - n->data.sequence.items.start != 2)
                return bad_value(c, f, path, n, err);
            for (int i = 0; i < 2; i++) {
                yaml_node_t *it = yaml_document_get_node(c->doc, n->data.sequence.items.start[i]);
                if (!it)
                    return bad_value(c, f, path, n, err);
                if (!is_plain(it) || !parse_double(sval(it), &v[i]) || !clf_cfg_in_range(f, v[i]))
                    return bad_value(c, f, path, it, err);
            }
            ((double *)dst)[0] = v[0];
            ((double *)dst)[1] = v[1];
            break;
        }
        case CLF_CFG_BOOL: {
            int v;
            if (!is_plain(n) || !parse_bool(sval(n), &v))
                return bad_value(c, f, path, n, err);
            *(int *)dst = v;
            break;
        }
        case CLF_CFG_ENUM: {
            int idx = -1, count = 0;
            if (n->type == YAML_SCALAR_NODE)
                for (; f->names[count]; count++)
                    if (!strcmp(f->names[count], sval(n)))
                        idx = count;
            if (idx < 0) {
                char want[512], got[128], hint[128] = "";
                clf_cfg_expected(f, want, sizeof want);
                describe(n, got, sizeof got);
                if (n->type == YAML_SCALAR_NODE)
                    suggest(sval(n), f->names, count, hint, sizeof hint);
                return node_err(c, n, err, "%s: expected %s; got %s%s", clf_cfg_display(path), want,
                                got, hint);
            }
            *(int *)dst = f->first + idx;
            break;
        }
        case CLF_CFG_STRING: {
            if (n->type != YAML_SCALAR_NODE)
                return bad_value(c, f, path, n, err);
            const char *s = is_null(n) ? "" : sval(n);
            if (strlen(s) >= f->size || strlen(s) != n->data.scalar.length)
                return bad_value(c, f, path, n, err);
            memcpy(dst, s, strlen(s) + 1);
            break;
        }
    }
    remember(c, f->offset, n);
    return CLF_OK;
}

/* ---- documents ---------------------------------------------------------------------------- */

/* Nesting deeper than this is refused before the document is composed: no
 * model file nests more than a few levels, and libyaml's composer takes
 * time quadratic in the depth (100,000 '[' took 36 s). */
#define MAX_DEPTH 64

/* Stream text through libyaml's event parser, stopping at the first
 * collection nested deeper than MAX_DEPTH or the first explicit tag (its
 * line and column in the error). Syntax errors are left to load_doc, which
 * reports them. */
static clf_status check_depth(pctx *c, const char *text, size_t len, clf_error *err)
{
    yaml_parser_t p;
    yaml_event_t ev;
    clf_status st = CLF_OK;
    if (!yaml_parser_initialize(&p))
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory starting the YAML parser");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int depth = 0, done = 0;
    while (!done && yaml_parser_parse(&p, &ev)) {
        const yaml_char_t *tag = ev.type == YAML_SCALAR_EVENT           ? ev.data.scalar.tag
                                 : ev.type == YAML_SEQUENCE_START_EVENT ? ev.data.sequence_start.tag
                                 : ev.type == YAML_MAPPING_START_EVENT  ? ev.data.mapping_start.tag
                                                                        : NULL;
        if (tag != NULL) {
            /* a tag changes a value's type behind the schema's back
             * (context: !!str 16); no model file needs one */
            char msg[300];
            snprintf(msg, sizeof msg,
                     "explicit YAML tags (%.200s) are not accepted in a model file: write the "
                     "value plainly",
                     (const char *)tag);
            st = err_at(c, (long)ev.start_mark.line, (long)ev.start_mark.column, err, msg);
            done = 1;
        } else if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
            if (++depth > MAX_DEPTH) {
                char msg[128];
                snprintf(msg, sizeof msg,
                         "nesting deeper than %d levels (a model file needs a few)", MAX_DEPTH);
                st = err_at(c, (long)ev.start_mark.line, (long)ev.start_mark.column, err, msg);
                done = 1;
            }
        } else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            depth--;
        } else if (ev.type == YAML_STREAM_END_EVENT) {
            done = 1;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return st;
}

/* Parse text into doc (one document). On success *loaded = 1 and the caller
 * deletes doc. */
static clf_status load_doc(pctx *c, const char *text, size_t len, yaml_document_t *doc, int *loaded,
                           clf_error *err)
{
    yaml_parser_t p;
    clf_status st = CLF_OK;
    *loaded = 0;
    if ((st = check_depth(c, text, len, err)) != CLF_OK)
        return st;
    if (!yaml_parser_initialize(&p))
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory starting the YAML parser");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    if (!yaml_parser_load(&p, doc)) {
        st = syntax_err(c, &p, err);
        goto fail;
    }
    *loaded = 1;
    yaml_document_t extra;
    if (!yaml_parser_load(&p, &extra)) {
        st = syntax_err(c, &p, err);
        goto fail;
    }
    yaml_node_t *root2 = yaml_document_get_root_node(&extra);
    if (root2) {
        st = node_err(c, root2, err, "expected one YAML document; a second one starts here");
        yaml_document_delete(&extra);
        goto fail;
    }
    yaml_document_delete(&extra);
fail:
    yaml_parser_delete(&p);
    return st;
}

static clf_status apply_override(pctx *c, int idx, clf_error *err)
{
    const char *o = c->ovrs[idx];
    const char *eq = strchr(o, '=');
    char key[PATH_CAP], path[PATH_CAP] = "", keys[512], hint[128];
    yaml_document_t doc;
    int loaded = 0;
    clf_status st = CLF_OK;

    c->cur_ovr = idx;
    if (!eq || eq == o)
        return err_at(c, -1, -1, err, "expected key.path=value, for example train.steps=200");
    if ((size_t)(eq - o) >= sizeof key)
        return err_at(c, -1, -1, err, "the key is too long");
    memcpy(key, o, (size_t)(eq - o));
    key[eq - o] = '\0';

    /* walk the key path; a first segment that is not a section is a model key */
    const clf_cfg_field *table = clf_cfg_root, *f = NULL;
    const clf_cfg_field *model = clf_cfg_find(clf_cfg_root, "model");
    char *seg = key;
    int first = 1;
    for (;;) {
        char *dot = strchr(seg, '.');
        if (dot)
            *dot = '\0';
        if (!*seg)
            return err_at(c, -1, -1, err, "empty key name in the key path");
        f = clf_cfg_find(table, seg);
        if (!f && first) {
            f = clf_cfg_find(model->sub, seg);
            if (f)
                snprintf(path, sizeof path, "model");
        }
        if (!f) {
            char msg[1024];
            if (first) {
                char k2[512];
                clf_cfg_key_list(model->sub, k2, sizeof k2);
                suggest_key(seg, clf_cfg_root, model->sub, hint, sizeof hint);
                snprintf(msg, sizeof msg,
                         "unknown key '%s'; expected model, train or a model key: %s%s", seg, k2,
                         hint);
            } else {
                clf_cfg_key_list(table, keys, sizeof keys);
                suggest_key(seg, table, NULL, hint, sizeof hint);
                snprintf(msg, sizeof msg, "unknown key '%s' in %s; expected one of: %s%s", seg,
                         clf_cfg_display(path), keys, hint);
            }
            return err_at(c, -1, -1, err, msg);
        }
        size_t pl = strlen(path), sl = strlen(seg);
        if (pl + sl + 2 > sizeof path)
            return err_at(c, -1, -1, err, "the key is too long");
        if (pl)
            path[pl++] = '.';
        memcpy(path + pl, seg, sl + 1);
        first = 0;
        if (!dot)
            break;
        if (f->type != CLF_CFG_MAP) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s is a value, not a section: it has no key '%s'",
                     clf_cfg_display(path), dot + 1);
            return err_at(c, -1, -1, err, msg);
        }
        table = f->sub;
        seg = dot + 1;
    }

    st = load_doc(c, eq + 1, strlen(eq + 1), &doc, &loaded, err);
    if (st != CLF_OK)
        goto fail;
    c->doc = &doc;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root && f->type == CLF_CFG_STRING) { /* "vocab.path=" empties a string */
        memset((char *)c->cfg + f->offset, 0, f->size);
    } else if (!root) {
        char want[512], msg[800];
        clf_cfg_expected(f, want, sizeof want);
        snprintf(msg, sizeof msg, "%s: expected %s, got nothing", clf_cfg_display(path), want);
        st = err_at(c, -1, -1, err, msg);
    } else {
        st = apply_field(c, f, path, root, err);
    }
fail:
    c->doc = NULL;
    if (loaded)
        yaml_document_delete(&doc);
    return st;
}

/* Validation errors: point at the key that was set last among the two
 * involved (an override beats the file), else at the file. */
static clf_status report_loc(void *user, size_t off, size_t off2, clf_error *err, const char *msg)
{
    pctx *c = user;
    const cfg_loc *l1 = NULL, *l2 = NULL, *l;
    for (int i = 0; i < c->n_locs; i++) {
        if (c->locs[i].off == off)
            l1 = &c->locs[i];
        if (off2 != CLF_CFG_NO_FIELD && c->locs[i].off == off2)
            l2 = &c->locs[i];
    }
    l = (l2 && l2->ovr >= 0 && !(l1 && l1->ovr >= 0)) ? l2 : l1 ? l1 : l2;
    int saved = c->cur_ovr;
    clf_status st;
    if (!l) {
        c->cur_ovr = -1;
        st = c->name ? err_at(c, -1, -1, err, msg) : clf_error_set(err, CLF_ERR_CONFIG, "%s", msg);
    } else if (l->ovr >= 0) {
        c->cur_ovr = l->ovr;
        st = err_at(c, -1, -1, err, msg);
    } else {
        c->cur_ovr = -1;
        st = err_at(c, l->line - 1, l->col - 1, err, msg);
    }
    c->cur_ovr = saved;
    return st;
}

static clf_status finish(pctx *c, int n_overrides, clf_error *err)
{
    for (int i = 0; i < n_overrides; i++) {
        clf_status st = apply_override(c, i, err);
        if (st != CLF_OK)
            return st;
    }
    c->cur_ovr = -1;
    clf_config_resolve(c->cfg);
    return clf_cfg_validate_with(c->cfg, report_loc, c, err);
}

static clf_status load_text(const char *text, size_t len, const char *name,
                            const char *const *overrides, int n_overrides, clf_model_config *out,
                            clf_error *err)
{
    static const pctx zero_ctx;
    pctx *c = malloc(sizeof *c);
    clf_model_config cfg;
    yaml_document_t doc;
    int loaded = 0;
    clf_status st;

    if (!c)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory reading a config");
    *c = zero_ctx;
    c->name = name;
    c->text = text;
    c->len = len;
    c->ovrs = overrides;
    c->cur_ovr = -1;
    c->cfg = &cfg;
    clf_config_defaults(&cfg);
    if (n_overrides > 0 && !overrides) {
        st =
            clf_error_set(err, CLF_ERR_ARG, "n_overrides is %d but overrides is NULL", n_overrides);
        goto fail;
    }

    st = load_doc(c, text, len, &doc, &loaded, err);
    if (st != CLF_OK)
        goto fail;
    c->doc = &doc;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        st = err_at(c, -1, -1, err,
                    "the config is empty; expected a mapping with keys: model, train");
        goto fail;
    }
    st = apply_map(c, clf_cfg_root, "", root, err);
    if (st != CLF_OK)
        goto fail;
    c->doc = NULL;
    st = finish(c, n_overrides, err);
    if (st != CLF_OK)
        goto fail;
    *out = cfg;
fail:
    if (loaded)
        yaml_document_delete(&doc);
    free(c);
    return st;
}

/* ---- public ---------------------------------------------------------------------------------- */

clf_status clf_config_parse_string(const char *yaml_text, const char *name_for_errors,
                                   const char *const *overrides, int n_overrides,
                                   clf_model_config *out, clf_error *err)
{
    if (!yaml_text || !out)
        return clf_error_set(err, CLF_ERR_ARG, "no config text");
    return load_text(yaml_text, strlen(yaml_text), name_for_errors ? name_for_errors : "<config>",
                     overrides, n_overrides, out, err);
}

clf_status clf_config_load(const char *path, const char *const *overrides, int n_overrides,
                           clf_model_config *out, clf_error *err)
{
    char *text = NULL;
    size_t len = 0;
    clf_status st;
    FILE *fp = NULL;

    if (!path || !out)
        return clf_error_set(err, CLF_ERR_ARG, "no config path");
    fp = fopen(path, "rb");
    if (!fp) {
        st = clf_error_set_at(err, CLF_ERR_IO, path, "cannot open the model file: %s",
                              strerror(errno));
        goto fail;
    }
    text = malloc(MAX_FILE_BYTES + 1);
    if (!text) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory reading %s", path);
        goto fail;
    }
    len = fread(text, 1, MAX_FILE_BYTES + 1, fp);
    if (ferror(fp)) {
        st = clf_error_set_at(err, CLF_ERR_IO, path, "cannot read the model file: %s",
                              strerror(errno));
        goto fail;
    }
    if (len > MAX_FILE_BYTES) {
        st = clf_error_set_at(err, CLF_ERR_CONFIG, path,
                              "the model file is larger than %u bytes; is it a model file?",
                              MAX_FILE_BYTES);
        goto fail;
    }
    text[len] = '\0';
    if (memchr(text, '\0', len)) {
        st = clf_error_set_at(err, CLF_ERR_CONFIG, path,
                              "the model file contains NUL bytes; expected YAML text");
        goto fail;
    }
    st = load_text(text, len, path, overrides, n_overrides, out, err);
fail:
    if (fp)
        fclose(fp);
    free(text);
    return st;
}

clf_status clf_config_set(clf_model_config *cfg, const char *override, clf_error *err)
{
    static const pctx zero_ctx;
    const char *ovrs[1] = {override};
    clf_model_config tmp = *cfg;
    clf_status st;
    pctx *c = malloc(sizeof *c);
    if (!c)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory applying --set");
    if (!override) {
        free(c);
        return clf_error_set(err, CLF_ERR_ARG, "no override");
    }
    *c = zero_ctx;
    c->ovrs = ovrs;
    c->cur_ovr = -1;
    c->cfg = &tmp;
    st = finish(c, 1, err);
    if (st == CLF_OK)
        *cfg = tmp;
    free(c);
    return st;
}
