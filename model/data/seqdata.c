/*
 * seqdata.c - see seqdata.h.
 *
 * Reading, tokenizing and truncating; batching is in seqdata_batch.c.
 * The dataset keeps every row in two flat int32 arrays with offsets (CSR):
 * source rows with their specials, target tokens without (bos / eos are
 * added when a batch is filled): seqdata_internal.h.
 */
#include "model/data/seqdata.h"
#include "model/data/lines.h"
#include "model/data/seqdata_internal.h"
#include "model/io/fileio.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the dataset ----------------------------------------------------------------------- */

typedef struct i32vec {
    int32_t *p;
    size_t n, cap;
} i32vec;

static int vec_reserve(i32vec *v, size_t extra)
{
    if (v->n + extra <= v->cap)
        return 1;
    size_t cap = v->cap ? v->cap : 1024;
    while (cap < v->n + extra)
        cap *= 2;
    int32_t *p = realloc(v->p, cap * sizeof *p);
    if (!p)
        return 0;
    v->p = p;
    v->cap = cap;
    return 1;
}

void clf_seq_options_default(clf_seq_options *o, clf_model_kind kind, int context)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->max_src = context;
    o->max_tgt = context;
}

void clf_seqdata_destroy(clf_seqdata *ds)
{
    if (!ds)
        return;
    free(ds->src);
    free(ds->src_off);
    free(ds->tgt);
    free(ds->tgt_off);
    free(ds->labels);
    free(ds->lines);
    free(ds);
}

static clf_status need_special(const clf_tokenizer *tok, clf_special_token which, const char *why,
                               int32_t *id, clf_error *err)
{
    *id = clf_tokenizer_special(tok, which);
    if (*id < 0)
        return clf_error_set(err, CLF_ERR_ARG,
                             "the tokenizer has no '%s' token, which %s needs: add it with "
                             "clf_tokenizer_add_special before loading the data",
                             clf_tokenizer_special_name(which), why);
    return CLF_OK;
}

static clf_status check_options(const clf_seq_options *o, int with_targets, clf_error *err)
{
    if (o->kind != CLF_MODEL_ENCODER && o->kind != CLF_MODEL_ENCODER_DECODER)
        return clf_error_set(err, CLF_ERR_ARG,
                             "sequence data is for kind encoder or encoder-decoder, not %s "
                             "(a decoder reads a text corpus: dataset.h)",
                             clf_config_kind_name(o->kind));
    if (o->max_src < 2)
        return clf_error_set(err, CLF_ERR_ARG,
                             "the maximum source length must be >= 2 (a token and its special), "
                             "got %d",
                             o->max_src);
    if (with_targets && o->kind == CLF_MODEL_ENCODER_DECODER && o->max_tgt < 2)
        return clf_error_set(err, CLF_ERR_ARG,
                             "the maximum target length must be >= 2 (bos/eos and a token), got %d",
                             o->max_tgt);
    return CLF_OK;
}

static void side_init(clf_seq_side_stats *s) { memset(s, 0, sizeof *s); }

/* Account one row: full = its length before truncation (specials
 * included), kept = after. */
static void side_add(clf_seq_side_stats *s, int64_t full, int64_t kept)
{
    if (s->sequences == 0 || kept < s->shortest)
        s->shortest = (int32_t)kept;
    s->sequences++;
    s->tokens += kept;
    if (full > kept) {
        s->truncated++;
        s->dropped += full - kept;
    }
    if (full > s->longest)
        s->longest = (int32_t)(full > INT32_MAX ? INT32_MAX : full);
    if (kept > s->longest_kept)
        s->longest_kept = (int32_t)kept;
}

/* Tokenize one line into *scratch (grown as needed). */
static clf_status encode_line(const clf_tokenizer *tok, const clf_span *l, const char *name,
                              int64_t line_no, i32vec *scratch, size_t *n, clf_error *err)
{
    scratch->n = 0;
    /* a token covers at least one byte, except where WordPiece's lowercasing
     * and decomposition lengthen the text: 4 per byte is always enough */
    size_t cap = 4 * l->len + 4;
    if (!vec_reserve(scratch, cap))
        return clf_error_set(err, CLF_ERR_MEMORY, "%s:%" PRId64 ": out of memory", name, line_no);
    clf_status rc = clf_tokenizer_encode_into(tok, l->p, l->len, scratch->p, cap, n, err);
    if (rc != CLF_OK)
        clf_error_prefix(err, "%s:%" PRId64, name, line_no);
    return rc;
}

typedef struct builder {
    clf_seqdata *ds;
    i32vec src, tgt, scratch;
    size_t cap_rows;
} builder;

static clf_status builder_init(builder *b, clf_model_kind kind, size_t rows, int targets,
                               int labels, clf_error *err)
{
    memset(b, 0, sizeof *b);
    clf_seqdata *ds = calloc(1, sizeof *ds);
    if (!ds)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory");
    b->ds = ds;
    ds->kind = kind;
    ds->src_pad = ds->tgt_pad = ds->bos = ds->eos = ds->src_sep = -1;
    ds->src_off = calloc(rows + 1, sizeof *ds->src_off);
    ds->lines = calloc(rows ? rows : 1, sizeof *ds->lines);
    if (targets)
        ds->tgt_off = calloc(rows + 1, sizeof *ds->tgt_off);
    if (labels)
        ds->labels = calloc(rows ? rows : 1, sizeof *ds->labels);
    if (!ds->src_off || !ds->lines || (targets && !ds->tgt_off) || (labels && !ds->labels))
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory for %zu examples", rows);
    b->cap_rows = rows;
    side_init(&ds->stats.src);
    side_init(&ds->stats.tgt);
    return CLF_OK;
}

static void builder_free(builder *b)
{
    clf_seqdata_destroy(b->ds);
    free(b->src.p);
    free(b->tgt.p);
    free(b->scratch.p);
    memset(b, 0, sizeof *b);
}

/* Append the source row of a tokenized sentence x[0..n). */
static clf_status add_source(builder *b, const clf_seq_options *o, int32_t special,
                             const int32_t *x, size_t n, clf_error *err)
{
    clf_seqdata *ds = b->ds;
    const size_t extra = ds->src_sep >= 0 ? 2 : 1; /* specials around the tokens */
    size_t keep = n;
    if (keep + extra > (size_t)o->max_src)
        keep = (size_t)o->max_src > extra ? (size_t)o->max_src - extra : 0;
    if (!vec_reserve(&b->src, keep + extra))
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory for source tokens");
    if (o->kind == CLF_MODEL_ENCODER)
        b->src.p[b->src.n++] = special; /* [cls] first */
    memcpy(b->src.p + b->src.n, x, keep * sizeof *x);
    b->src.n += keep;
    if (o->kind == CLF_MODEL_ENCODER_DECODER)
        b->src.p[b->src.n++] = special; /* [eos] last */
    else if (ds->src_sep >= 0)
        b->src.p[b->src.n++] = ds->src_sep; /* BERT's [SEP] last */
    side_add(&ds->stats.src, (int64_t)(n + extra), (int64_t)(keep + extra));
    ds->src_off[ds->n + 1] = (int64_t)b->src.n;
    return CLF_OK;
}

static clf_status add_target(builder *b, const clf_seq_options *o, const int32_t *y, size_t m,
                             clf_error *err)
{
    clf_seqdata *ds = b->ds;
    size_t keep = m;
    if (keep + 1 > (size_t)o->max_tgt)
        keep = (size_t)o->max_tgt - 1;
    if (!vec_reserve(&b->tgt, keep ? keep : 1))
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory for target tokens");
    memcpy(b->tgt.p + b->tgt.n, y, keep * sizeof *y);
    b->tgt.n += keep;
    side_add(&ds->stats.tgt, (int64_t)m + 1, (int64_t)keep + 1);
    ds->tgt_off[ds->n + 1] = (int64_t)b->tgt.n;
    return CLF_OK;
}

static clf_seqdata *builder_finish(builder *b)
{
    clf_seqdata *ds = b->ds;
    ds->src = b->src.p ? b->src.p : malloc(sizeof(int32_t));
    ds->tgt = ds->tgt_off ? (b->tgt.p ? b->tgt.p : malloc(sizeof(int32_t))) : NULL;
    if (!ds->tgt_off)
        free(b->tgt.p);
    free(b->scratch.p);
    ds->stats.examples = (int64_t)ds->n;
    memset(b, 0, sizeof *b);
    return ds;
}

/* Specials a kind needs; src_special is [cls] (encoder) or [eos]. */
static clf_status resolve_specials(clf_seqdata *ds, const clf_seq_options *o,
                                   const clf_tokenizer *src_tok, const clf_tokenizer *tgt_tok,
                                   int32_t *src_special, clf_error *err)
{
    clf_status rc;
    if ((rc = need_special(src_tok, CLF_SPECIAL_PAD, "padding a batch", &ds->src_pad, err)))
        return rc;
    if (o->kind == CLF_MODEL_ENCODER && clf_tokenizer_type_of(src_tok) == CLF_TOKENIZER_WORDPIECE &&
        (rc = need_special(src_tok, CLF_SPECIAL_SEP, "the end of a sentence (BERT's [SEP])",
                           &ds->src_sep, err)))
        return rc;
    if (o->kind == CLF_MODEL_ENCODER)
        return need_special(src_tok, CLF_SPECIAL_CLS, "the classifier's first position",
                            src_special, err);
    if ((rc = need_special(src_tok, CLF_SPECIAL_EOS, "the end of a source sentence", src_special,
                           err)))
        return rc;
    if (tgt_tok) {
        if ((rc = need_special(tgt_tok, CLF_SPECIAL_PAD, "padding a target batch", &ds->tgt_pad,
                               err)))
            return rc;
        if ((rc = need_special(tgt_tok, CLF_SPECIAL_BOS, "the decoder's first input", &ds->bos,
                               err)))
            return rc;
        if ((rc = need_special(tgt_tok, CLF_SPECIAL_EOS, "the end of a target sentence", &ds->eos,
                               err)))
            return rc;
    }
    return CLF_OK;
}

clf_status clf_seqdata_load_pairs(const char *src_path, const char *tgt_path,
                                  const clf_tokenizer *src_tok, const clf_tokenizer *tgt_tok,
                                  const clf_seq_options *o, clf_seqdata **out, clf_error *err)
{
    char *st = NULL, *tt = NULL;
    size_t sl = 0, tl = 0, ns = 0, nt = 0;
    clf_span *sls = NULL, *tls = NULL;
    builder b;
    memset(&b, 0, sizeof b);
    clf_status rc;
    int32_t src_special = -1;
    *out = NULL;
    if (o->kind != CLF_MODEL_ENCODER_DECODER)
        return clf_error_set(err, CLF_ERR_ARG,
                             "parallel files are for kind encoder-decoder, not %s",
                             clf_config_kind_name(o->kind));
    if ((rc = check_options(o, 1, err)))
        return rc;
    if ((rc = clf_file_read_text(src_path, CLF_SEQDATA_MAX_BYTES, &st, &sl, err)))
        goto fail;
    if ((rc = clf_file_read_text(tgt_path, CLF_SEQDATA_MAX_BYTES, &tt, &tl, err)))
        goto fail;
    if ((rc = clf_lines_split(st, sl, src_path, &sls, &ns, err)))
        goto fail;
    if ((rc = clf_lines_split(tt, tl, tgt_path, &tls, &nt, err)))
        goto fail;
    if (ns != nt) {
        rc = clf_error_set(err, CLF_ERR_FORMAT,
                           "parallel files differ in length: %s has %zu lines, %s has %zu "
                           "(one sentence per line in each, same order)",
                           src_path, ns, tgt_path, nt);
        goto fail;
    }
    if (ns == 0) {
        rc = clf_error_set(err, CLF_ERR_FORMAT, "%s and %s are empty: no sentence pairs", src_path,
                           tgt_path);
        goto fail;
    }
    if ((rc = builder_init(&b, o->kind, ns, 1, 0, err)))
        goto fail;
    if ((rc = resolve_specials(b.ds, o, src_tok, tgt_tok, &src_special, err)))
        goto fail;
    for (size_t i = 0; i < ns; i++) {
        size_t n = 0;
        if ((rc = encode_line(src_tok, &sls[i], src_path, (int64_t)i + 1, &b.scratch, &n, err)))
            goto fail;
        if ((rc = add_source(&b, o, src_special, b.scratch.p, n, err)))
            goto fail;
        if ((rc = encode_line(tgt_tok, &tls[i], tgt_path, (int64_t)i + 1, &b.scratch, &n, err)))
            goto fail;
        if ((rc = add_target(&b, o, b.scratch.p, n, err)))
            goto fail;
        b.ds->lines[i] = (int64_t)i + 1;
        b.ds->n++;
    }
    *out = builder_finish(&b);
fail:
    builder_free(&b);
    free(st);
    free(tt);
    free(sls);
    free(tls);
    return rc;
}

#define TSV_MAX_COLUMNS 64

clf_status clf_seqdata_load_tsv(const char *path, const clf_tokenizer *tok,
                                const clf_seq_options *o, clf_seqdata **out, clf_error *err)
{
    char *text = NULL;
    size_t len = 0, nl = 0;
    clf_span *ls = NULL, f[TSV_MAX_COLUMNS];
    builder b;
    memset(&b, 0, sizeof b);
    clf_status rc;
    int32_t cls = -1;
    *out = NULL;
    if (o->kind != CLF_MODEL_ENCODER)
        return clf_error_set(err, CLF_ERR_ARG, "a labelled TSV is for kind encoder, not %s",
                             clf_config_kind_name(o->kind));
    if ((rc = check_options(o, 1, err)))
        return rc;
    if ((rc = clf_file_read_text(path, CLF_SEQDATA_MAX_BYTES, &text, &len, err)))
        goto fail;
    if ((rc = clf_lines_split(text, len, path, &ls, &nl, err)))
        goto fail;
    if (nl == 0) {
        rc = clf_error_set(err, CLF_ERR_FORMAT, "%s is empty: expected a header line", path);
        goto fail;
    }
    size_t ncol = clf_tsv_fields(&ls[0], f, TSV_MAX_COLUMNS);
    if (ncol > TSV_MAX_COLUMNS) {
        rc = clf_error_set(err, CLF_ERR_FORMAT, "%s:1: %zu columns, at most %d supported", path,
                           ncol, TSV_MAX_COLUMNS);
        goto fail;
    }
    /* find the columns */
    const char *label_name = o->label_column[0] ? o->label_column : "label";
    const char *text_names[] = {"sentence", "text", "content"};
    const int label_col = clf_tsv_column(&ls[0], &label_name, 1);
    const int text_col = o->text_column[0]
                             ? clf_tsv_column(&ls[0], (const char *const[]){o->text_column}, 1)
                             : clf_tsv_column(&ls[0], text_names, 3);
    if (label_col < 0 || text_col < 0 || label_col == text_col) {
        char hdr[512];
        size_t h = 0;
        for (size_t c = 0; c < ncol && h + 4 < sizeof hdr; c++) {
            int w = snprintf(hdr + h, sizeof hdr - h, "%s'%.*s'", c ? ", " : "",
                             (int)(f[c].len > 60 ? 60 : f[c].len), f[c].p);
            h += w > 0 ? (size_t)w : 0;
            if (h >= sizeof hdr)
                h = sizeof hdr - 1;
        }
        rc = clf_error_set(err, CLF_ERR_FORMAT,
                           "%s:1: the header must name a label column '%s' and a text column "
                           "%s%s%s; found %s",
                           path, label_name, o->text_column[0] ? "'" : "",
                           o->text_column[0] ? o->text_column : "('sentence', 'text' or 'content')",
                           o->text_column[0] ? "'" : "", hdr);
        goto fail;
    }
    if ((rc = builder_init(&b, o->kind, nl - 1, 0, 1, err)))
        goto fail;
    if ((rc = resolve_specials(b.ds, o, tok, NULL, &cls, err)))
        goto fail;
    int32_t max_label = -1;
    for (size_t i = 1; i < nl; i++) {
        int64_t line_no = (int64_t)i + 1;
        size_t k = clf_tsv_fields(&ls[i], f, TSV_MAX_COLUMNS);
        if (ls[i].len == 0) {
            rc = clf_error_set(err, CLF_ERR_FORMAT,
                               "%s:%" PRId64 ": empty line (expected %zu tab-separated columns)",
                               path, line_no, ncol);
            goto fail;
        }
        if (k != ncol) {
            rc = clf_error_set(err, CLF_ERR_FORMAT,
                               "%s:%" PRId64 ": %zu tab-separated columns, expected %zu as in the "
                               "header",
                               path, line_no, k, ncol);
            goto fail;
        }
        const clf_span *lf = &f[label_col];
        int64_t v = 0;
        int ok = lf->len > 0 && lf->len <= 9;
        for (size_t c = 0; ok && c < lf->len; c++) {
            if (lf->p[c] < '0' || lf->p[c] > '9')
                ok = 0;
            else
                v = v * 10 + (lf->p[c] - '0');
        }
        if (!ok) {
            rc =
                clf_error_set(err, CLF_ERR_FORMAT,
                              "%s:%" PRId64 ": label '%.*s' in column '%s' is not a "
                              "non-negative integer",
                              path, line_no, (int)(lf->len > 40 ? 40 : lf->len), lf->p, label_name);
            goto fail;
        }
        size_t n = 0;
        if ((rc = encode_line(tok, &f[text_col], path, line_no, &b.scratch, &n, err)))
            goto fail;
        if ((rc = add_source(&b, o, cls, b.scratch.p, n, err)))
            goto fail;
        b.ds->labels[b.ds->n] = (int32_t)v;
        if (v > max_label)
            max_label = (int32_t)v;
        b.ds->lines[b.ds->n] = line_no;
        b.ds->n++;
    }
    if (b.ds->n == 0) {
        rc = clf_error_set(err, CLF_ERR_FORMAT, "%s has a header but no examples", path);
        goto fail;
    }
    b.ds->stats.labels = max_label + 1;
    *out = builder_finish(&b);
fail:
    builder_free(&b);
    free(text);
    free(ls);
    return rc;
}

clf_status clf_seqdata_from_text(const char *text, size_t len, const char *name,
                                 const clf_tokenizer *tok, const clf_seq_options *o,
                                 clf_seqdata **out, clf_error *err)
{
    clf_span *ls = NULL;
    size_t nl = 0;
    builder b;
    memset(&b, 0, sizeof b);
    clf_status rc;
    int32_t special = -1;
    *out = NULL;
    if ((rc = check_options(o, 0, err)))
        return rc;
    if ((rc = clf_lines_split(text, len, name, &ls, &nl, err)))
        goto fail;
    if (nl == 0) {
        rc = clf_error_set(err, CLF_ERR_FORMAT, "%s is empty: no sentences", name);
        goto fail;
    }
    if ((rc = builder_init(&b, o->kind, nl, 0, 0, err)))
        goto fail;
    if ((rc = resolve_specials(b.ds, o, tok, NULL, &special, err)))
        goto fail;
    for (size_t i = 0; i < nl; i++) {
        size_t n = 0;
        if ((rc = encode_line(tok, &ls[i], name, (int64_t)i + 1, &b.scratch, &n, err)))
            goto fail;
        if ((rc = add_source(&b, o, special, b.scratch.p, n, err)))
            goto fail;
        b.ds->lines[i] = (int64_t)i + 1;
        b.ds->n++;
    }
    *out = builder_finish(&b);
fail:
    builder_free(&b);
    free(ls);
    return rc;
}

size_t clf_seqdata_size(const clf_seqdata *ds) { return ds->n; }
const clf_seqdata_stats *clf_seqdata_stats_get(const clf_seqdata *ds) { return &ds->stats; }
int clf_seqdata_has_targets(const clf_seqdata *ds) { return ds->tgt_off || ds->labels; }
int64_t clf_seqdata_line(const clf_seqdata *ds, size_t i) { return i < ds->n ? ds->lines[i] : 0; }

void clf_seqdata_example(const clf_seqdata *ds, size_t i, const int32_t **src, int *src_len,
                         const int32_t **tgt, int *tgt_len, int32_t *label)
{
    if (src)
        *src = ds->src + ds->src_off[i];
    if (src_len)
        *src_len = (int)(ds->src_off[i + 1] - ds->src_off[i]);
    if (tgt)
        *tgt = ds->tgt_off ? ds->tgt + ds->tgt_off[i] : NULL;
    if (tgt_len)
        *tgt_len = ds->tgt_off ? (int)(ds->tgt_off[i + 1] - ds->tgt_off[i]) : 0;
    if (label)
        *label = ds->labels ? ds->labels[i] : -1;
}

static size_t side_format(const clf_seq_side_stats *s, const char *what, char *buf, size_t cap)
{
    int n;
    if (s->truncated)
        n = snprintf(buf, cap,
                     "%s: %" PRId64 " tokens, rows %" PRId32 "..%" PRId32 ", %" PRId64
                     " truncated to %" PRId32 " (%" PRId64 " tokens dropped, longest was %" PRId32
                     ")",
                     what, s->tokens, s->shortest, s->longest_kept, s->truncated, s->longest_kept,
                     s->dropped, s->longest);
    else
        n = snprintf(buf, cap,
                     "%s: %" PRId64 " tokens, rows %" PRId32 "..%" PRId32 ", none truncated", what,
                     s->tokens, s->shortest, s->longest_kept);
    return n < 0 ? 0 : (size_t)n;
}

size_t clf_seqdata_stats_format(const clf_seqdata_stats *st, char *buf, size_t cap)
{
    char a[256], b[256] = "";
    side_format(&st->src, "source", a, sizeof a);
    if (st->tgt.sequences)
        side_format(&st->tgt, "; target", b, sizeof b);
    int n;
    if (st->labels)
        n = snprintf(buf, cap, "%" PRId64 " examples, %" PRId32 " labels; %s", st->examples,
                     st->labels, a);
    else
        n = snprintf(buf, cap, "%" PRId64 " examples; %s%s", st->examples, a, b);
    return n < 0 ? 0 : (size_t)n;
}
