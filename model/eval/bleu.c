/*
 * bleu.c - see bleu.h.
 *
 * Tokenization works on bytes with a growable buffer, one pass per rule of
 * sacreBLEU's, in its order (two buffers used in turn). The n-gram
 * statistics of a segment intern its tokens first (all tokens of the
 * hypothesis and references sorted together, equal strings given one id),
 * then, per order n, sort the n-grams of the hypothesis and of each
 * reference as fixed-size keys of 4 ids, count runs, merge the references by
 * taking each n-gram's maximum count, and look every hypothesis n-gram up by
 * binary search: O(L log L) per segment, no hash tables, no global state.
 */
#include "model/eval/bleu.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- options --------------------------------------------------------------- */

void clf_bleu_options_default(clf_bleu_options *o)
{
    o->tokenize = CLF_BLEU_TOKENIZE_13A;
    o->smooth = CLF_BLEU_SMOOTH_EXP;
    o->smooth_value = -1.0;
    o->effective_order = 0;
}

const char *clf_bleu_tokenize_name(clf_bleu_tokenize t)
{
    switch (t) {
        case CLF_BLEU_TOKENIZE_13A: return "13a";
        case CLF_BLEU_TOKENIZE_NONE: return "none";
    }
    return "?";
}

const char *clf_bleu_smooth_name(clf_bleu_smooth s)
{
    switch (s) {
        case CLF_BLEU_SMOOTH_EXP: return "exp";
        case CLF_BLEU_SMOOTH_NONE: return "none";
        case CLF_BLEU_SMOOTH_FLOOR: return "floor";
        case CLF_BLEU_SMOOTH_ADD_K: return "add-k";
    }
    return "?";
}

/* ---- a growable byte buffer ---------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static int sb_reserve(sbuf *b, size_t extra)
{
    if (b->n + extra + 1 <= b->cap)
        return 1;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + extra + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return 0;
    b->p = p;
    b->cap = cap;
    return 1;
}

/* Callers reserve first; these never fail. */
static void sb_putc(sbuf *b, char c) { b->p[b->n++] = c; }
static void sb_put(sbuf *b, const char *s, size_t n)
{
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

/* ---- Python's whitespace ---------------------------------------------------------- */

/* Length in bytes of the whitespace code point (Python str.isspace) at s,
 * 0 if s[0] does not start one. */
static size_t ws_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20))
        return 1;
    if (c == 0xC2 && n >= 2 && (s[1] == 0x85 || s[1] == 0xA0))
        return 2;
    if (n < 3)
        return 0;
    if (c == 0xE1 && s[1] == 0x9A && s[2] == 0x80) /* U+1680 */
        return 3;
    if (c == 0xE2 && s[1] == 0x80 &&
        (s[2] <= 0x8A ? s[2] >= 0x80 : (s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF)))
        return 3;                                  /* U+2000-200A, U+2028, U+2029, U+202F */
    if (c == 0xE2 && s[1] == 0x81 && s[2] == 0x9F) /* U+205F */
        return 3;
    if (c == 0xE3 && s[1] == 0x80 && s[2] == 0x80) /* U+3000 */
        return 3;
    return 0;
}

/* Length of text without trailing whitespace (str.rstrip()). Whitespace
 * patterns start with ASCII or a lead byte, never inside a character, so a
 * forward scan byte by byte finds them. */
static size_t rstrip_len(const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t pos = 0, end = 0;
    while (pos < len) {
        size_t w = ws_len(s + pos, len - pos);
        if (w) {
            pos += w;
        } else {
            pos++;
            end = pos;
        }
    }
    return end;
}

/* ---- the 13a passes ----------------------------------------------------------------- */

/* dst = src with every non-overlapping pat replaced by rep (str.replace). */
static int pass_replace(sbuf *dst, const sbuf *src, const char *pat, const char *rep)
{
    size_t pl = strlen(pat), rl = strlen(rep);
    dst->n = 0;
    if (!sb_reserve(dst, src->n))
        return 0;
    size_t i = 0;
    while (i < src->n) {
        if (i + pl <= src->n && memcmp(src->p + i, pat, pl) == 0) {
            if (!sb_reserve(dst, rl))
                return 0;
            sb_put(dst, rep, rl);
            i += pl;
        } else {
            if (!sb_reserve(dst, 1))
                return 0;
            sb_putc(dst, src->p[i++]);
        }
    }
    return 1;
}

/* ([\{-\~\[-\` -\&\(-\+\:-\@\/]) */
static int is_split_punct(unsigned char c)
{
    return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
           (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == 0x2F;
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_dot_comma(unsigned char c) { return c == '.' || c == ','; }

enum { RULE_PUNCT, RULE_BEFORE, RULE_AFTER, RULE_DASH };

/* One regex rule as a non-overlapping left-to-right substitution. For the
 * two-character rules a match at i consumes bytes i and i+1 and the scan
 * resumes at i+2, as re.sub does (on bytes this equals Python on code
 * points: see bleu.h). */
static int pass_rule(sbuf *dst, const sbuf *src, int rule)
{
    const unsigned char *s = (const unsigned char *)src->p;
    size_t n = src->n, i = 0;
    dst->n = 0;
    /* each byte becomes at most 3 (" c " or "c . " / " . c" over 2 bytes) */
    if (!sb_reserve(dst, 3 * n + 4))
        return 0;
    while (i < n) {
        unsigned char a = s[i], b = i + 1 < n ? s[i + 1] : 0;
        int two = i + 1 < n;
        switch (rule) {
            case RULE_PUNCT:
                if (is_split_punct(a)) {
                    sb_putc(dst, ' ');
                    sb_putc(dst, (char)a);
                    sb_putc(dst, ' ');
                } else {
                    sb_putc(dst, (char)a);
                }
                i++;
                continue;
            case RULE_BEFORE: /* ([^0-9])([\.,]) -> "\1 \2 " */
                if (two && !is_digit(a) && is_dot_comma(b)) {
                    sb_putc(dst, (char)a);
                    sb_putc(dst, ' ');
                    sb_putc(dst, (char)b);
                    sb_putc(dst, ' ');
                    i += 2;
                    continue;
                }
                break;
            case RULE_AFTER: /* ([\.,])([^0-9]) -> " \1 \2" */
                if (two && is_dot_comma(a) && !is_digit(b)) {
                    sb_putc(dst, ' ');
                    sb_putc(dst, (char)a);
                    sb_putc(dst, ' ');
                    sb_putc(dst, (char)b);
                    i += 2;
                    continue;
                }
                break;
            case RULE_DASH: /* ([0-9])(-) -> "\1 \2 " */
                if (two && is_digit(a) && b == '-') {
                    sb_putc(dst, (char)a);
                    sb_putc(dst, ' ');
                    sb_putc(dst, '-');
                    sb_putc(dst, ' ');
                    i += 2;
                    continue;
                }
                break;
        }
        sb_putc(dst, (char)a);
        i++;
    }
    return 1;
}

/* dst = the whitespace-separated words of src joined by single spaces. */
static int pass_split_join(sbuf *dst, const char *src, size_t n)
{
    const unsigned char *s = (const unsigned char *)src;
    dst->n = 0;
    if (!sb_reserve(dst, n))
        return 0;
    size_t i = 0;
    int in_word = 0, any = 0;
    while (i < n) {
        size_t w = ws_len(s + i, n - i);
        if (w) {
            in_word = 0;
            i += w;
            continue;
        }
        if (!in_word && any)
            sb_putc(dst, ' ');
        sb_putc(dst, (char)s[i++]);
        in_word = any = 1;
    }
    dst->p[dst->n] = '\0';
    return 1;
}

/* Preprocess one segment as sacreBLEU's BLEU._preprocess_segment does:
 * rstrip, then the tokenizer; result in out (NUL-terminated). */
static clf_status preprocess(clf_bleu_tokenize tok, const char *text, size_t len, sbuf *out,
                             clf_error *err)
{
    sbuf a = {0}, b = {0};
    len = rstrip_len(text, len);
    if (tok == CLF_BLEU_TOKENIZE_NONE) {
        if (!pass_split_join(out, text, len))
            goto fail;
        return CLF_OK;
    }
    if (!sb_reserve(&a, len + 2))
        goto fail;
    sb_put(&a, text, len);
    static const char *const reps[][2] = {
        {"<skipped>", ""}, {"-\n", ""},   {"\n", " "},   {"&quot;", "\""},
        {"&amp;", "&"},    {"&lt;", "<"}, {"&gt;", ">"},
    };
    sbuf *cur = &a, *nxt = &b;
    for (size_t r = 0; r < sizeof reps / sizeof reps[0]; r++) {
        if (!pass_replace(nxt, cur, reps[r][0], reps[r][1]))
            goto fail;
        sbuf *t = cur;
        cur = nxt;
        nxt = t;
    }
    /* " {line} " */
    nxt->n = 0;
    if (!sb_reserve(nxt, cur->n + 2))
        goto fail;
    sb_putc(nxt, ' ');
    sb_put(nxt, cur->p, cur->n);
    sb_putc(nxt, ' ');
    {
        sbuf *t = cur;
        cur = nxt;
        nxt = t;
    }
    static const int rules[] = {RULE_PUNCT, RULE_BEFORE, RULE_AFTER, RULE_DASH};
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        if (!pass_rule(nxt, cur, rules[r]))
            goto fail;
        sbuf *t = cur;
        cur = nxt;
        nxt = t;
    }
    if (!pass_split_join(out, cur->p, cur->n))
        goto fail;
    free(a.p);
    free(b.p);
    return CLF_OK;
fail: /* every failure here is an allocation */
    free(a.p);
    free(b.p);
    return clf_error_set(err, CLF_ERR_MEMORY, "BLEU: out of memory tokenizing a %zu-byte segment",
                         len);
}

clf_status clf_bleu_tokenize_13a(const char *text, size_t len, char **out, size_t *out_len,
                                 clf_error *err)
{
    sbuf o = {0};
    *out = NULL;
    clf_status st = preprocess(CLF_BLEU_TOKENIZE_13A, text ? text : "", text ? len : 0, &o, err);
    if (st != CLF_OK) {
        free(o.p);
        return st;
    }
    if (!o.p) { /* empty input: never reserved */
        o.p = malloc(1);
        if (!o.p)
            return clf_error_set(err, CLF_ERR_MEMORY, "BLEU: out of memory");
        o.p[0] = '\0';
    }
    *out = o.p;
    if (out_len)
        *out_len = o.n;
    return CLF_OK;
}

/* ---- n-gram statistics ------------------------------------------------------------- */

typedef struct tok_ref {
    const char *p;
    uint32_t len;
    int32_t seg; /* 0 = hypothesis, 1.. = references */
    int32_t pos; /* index within its segment */
} tok_ref;

typedef struct ngram {
    int32_t id[CLF_BLEU_ORDER]; /* token ids, -1 past the order */
    int64_t count;
} ngram;

static int tok_cmp(const void *a, const void *b)
{
    const tok_ref *x = a, *y = b;
    uint32_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, m);
    if (c)
        return c;
    return (x->len > y->len) - (x->len < y->len);
}

static int ngram_cmp(const void *a, const void *b)
{
    const ngram *x = a, *y = b;
    for (int k = 0; k < CLF_BLEU_ORDER; k++)
        if (x->id[k] != y->id[k])
            return x->id[k] < y->id[k] ? -1 : 1;
    return 0;
}

/* Count the tokens of a space-separated string (as preprocess produces). */
static size_t count_tokens(const sbuf *b)
{
    size_t n = 0;
    for (size_t i = 0; i < b->n; i++)
        if (b->p[i] != ' ' && (i == 0 || b->p[i - 1] == ' '))
            n++;
    return n;
}

/* Sorted unique n-grams of order n over ids[0..L) with counts; returns the
 * number written to out (capacity >= L). */
static size_t ngram_runs(const int32_t *ids, size_t L, int n, ngram *out)
{
    if (L < (size_t)n)
        return 0;
    size_t m = L - (size_t)n + 1;
    for (size_t i = 0; i < m; i++) {
        for (int k = 0; k < CLF_BLEU_ORDER; k++)
            out[i].id[k] = k < n ? ids[i + (size_t)k] : -1;
        out[i].count = 1;
    }
    qsort(out, m, sizeof *out, ngram_cmp);
    size_t u = 0;
    for (size_t i = 0; i < m; i++) {
        if (u > 0 && ngram_cmp(&out[u - 1], &out[i]) == 0)
            out[u - 1].count++;
        else
            out[u++] = out[i];
    }
    return u;
}

/* Intern the tokens of segments 0..R (sorted, equal strings share an id):
 * ids[seg_off[k] + i] is token i of segment k. */
static clf_status intern_tokens(const sbuf *seg, int R, const size_t *seg_off, size_t all,
                                int32_t *ids, clf_error *err)
{
    tok_ref *toks = malloc((all ? all : 1) * sizeof *toks);
    if (!toks)
        return clf_error_set(err, CLF_ERR_MEMORY, "BLEU: out of memory counting n-grams");
    size_t t = 0;
    for (int k = 0; k <= R; k++) {
        const char *p = seg[k].p;
        size_t n = seg[k].n, i = 0;
        int32_t pos = 0;
        while (i < n) {
            size_t j = i;
            while (j < n && p[j] != ' ')
                j++;
            toks[t].p = p + i;
            toks[t].len = (uint32_t)(j - i);
            toks[t].seg = k;
            toks[t].pos = pos++;
            t++;
            i = j + 1;
        }
    }
    qsort(toks, all, sizeof *toks, tok_cmp);
    int32_t next_id = -1;
    for (size_t i = 0; i < all; i++) {
        if (i == 0 || tok_cmp(&toks[i - 1], &toks[i]) != 0)
            next_id++;
        ids[seg_off[toks[i].seg] + (size_t)toks[i].pos] = next_id;
    }
    free(toks);
    return CLF_OK;
}

/* The closest reference length to the hypothesis (ties: the shorter), as
 * sacreBLEU. */
static int64_t closest_ref_len(const size_t *seg_len, int R)
{
    int64_t hyp_len = (int64_t)seg_len[0], closest_diff = -1, closest_len = -1;
    for (int k = 1; k <= R; k++) {
        int64_t rl = (int64_t)seg_len[k];
        int64_t diff = hyp_len > rl ? hyp_len - rl : rl - hyp_len;
        if (closest_diff == -1 || diff < closest_diff) {
            closest_diff = diff;
            closest_len = rl;
        } else if (diff == closest_diff && rl < closest_len) {
            closest_len = rl;
        }
    }
    return closest_len;
}

/* Clipped n-gram matches of the hypothesis (segment 0) against the
 * references (1..R): correct[n-1] and total[n-1] for n = 1..CLF_BLEU_ORDER. */
static clf_status count_matches(const int32_t *ids, const size_t *seg_len, const size_t *seg_off,
                                int R, size_t all, size_t max_len, int64_t *correct, int64_t *total,
                                clf_error *err)
{
    const size_t ref_all = all - seg_len[0];
    ngram *hg = malloc((seg_len[0] ? seg_len[0] : 1) * sizeof *hg);
    ngram *rg = malloc((ref_all ? ref_all : 1) * sizeof *rg);
    ngram *tmp = malloc((max_len ? max_len : 1) * sizeof *tmp);
    clf_status rc = CLF_OK;
    if (!hg || !rg || !tmp) {
        rc = clf_error_set(err, CLF_ERR_MEMORY, "BLEU: out of memory counting n-grams");
        goto done;
    }
    for (int n = 1; n <= CLF_BLEU_ORDER; n++) {
        size_t nh = ngram_runs(ids, seg_len[0], n, hg);
        /* every reference's runs, then the maximum count per n-gram */
        size_t nr = 0;
        for (int k = 1; k <= R; k++) {
            size_t u = ngram_runs(ids + seg_off[k], seg_len[k], n, tmp);
            memcpy(rg + nr, tmp, u * sizeof *tmp);
            nr += u;
        }
        if (R > 1) {
            qsort(rg, nr, sizeof *rg, ngram_cmp);
            size_t u = 0;
            for (size_t i = 0; i < nr; i++) {
                if (u > 0 && ngram_cmp(&rg[u - 1], &rg[i]) == 0) {
                    if (rg[i].count > rg[u - 1].count)
                        rg[u - 1].count = rg[i].count;
                } else {
                    rg[u++] = rg[i];
                }
            }
            nr = u;
        }
        for (size_t i = 0; i < nh; i++) {
            total[n - 1] += hg[i].count;
            const ngram *m = nr ? bsearch(&hg[i], rg, nr, sizeof *rg, ngram_cmp) : NULL;
            if (m)
                correct[n - 1] += hg[i].count < m->count ? hg[i].count : m->count;
        }
    }
done:
    free(hg);
    free(rg);
    free(tmp);
    return rc;
}

clf_status clf_bleu_add(clf_bleu_stats *st, const clf_bleu_options *o, const char *hyp,
                        const char *const *refs, int n_refs, clf_error *err)
{
    clf_bleu_options def;
    if (!o) {
        clf_bleu_options_default(&def);
        o = &def;
    }
    clf_status rc = CLF_OK;
    int R = 0;
    for (int r = 0; r < n_refs; r++)
        R += refs && refs[r] ? 1 : 0;
    if (!hyp || R == 0)
        return clf_error_set(err, CLF_ERR_ARG,
                             "BLEU: a segment needs a hypothesis and at least one reference "
                             "(got %s hypothesis, %d of %d references)",
                             hyp ? "a" : "no", R, n_refs);
    sbuf *seg = calloc((size_t)R + 1, sizeof *seg);
    size_t *seg_len = calloc((size_t)R + 1, sizeof *seg_len);
    size_t *seg_off = calloc((size_t)R + 2, sizeof *seg_off);
    int32_t *ids = NULL;
    if (!seg || !seg_len || !seg_off) {
        rc = clf_error_set(err, CLF_ERR_MEMORY, "BLEU: out of memory counting n-grams");
        goto fail;
    }
    /* preprocess: segment 0 is the hypothesis, 1..R the given references */
    const size_t hyp_raw = strlen(hyp);
    if ((rc = preprocess(o->tokenize, hyp, hyp_raw, &seg[0], err)) != CLF_OK)
        goto fail;
    for (int r = 0, k = 1; r < n_refs; r++)
        if (refs[r] &&
            (rc = preprocess(o->tokenize, refs[r], strlen(refs[r]), &seg[k++], err)) != CLF_OK)
            goto fail;
    size_t all = 0, max_len = 0;
    for (int k = 0; k <= R; k++) {
        seg_len[k] = count_tokens(&seg[k]);
        seg_off[k] = all;
        all += seg_len[k];
        if (seg_len[k] > max_len)
            max_len = seg_len[k];
    }
    seg_off[R + 1] = all;
    if ((ids = malloc((all ? all : 1) * sizeof *ids)) == NULL) {
        rc = clf_error_set(err, CLF_ERR_MEMORY, "BLEU: out of memory counting n-grams");
        goto fail;
    }
    int64_t correct[CLF_BLEU_ORDER] = {0}, total[CLF_BLEU_ORDER] = {0};
    if ((rc = intern_tokens(seg, R, seg_off, all, ids, err)) != CLF_OK ||
        (rc = count_matches(ids, seg_len, seg_off, R, all, max_len, correct, total, err)) != CLF_OK)
        goto fail;
    st->segments++;
    st->hyp_len += (int64_t)seg_len[0];
    st->ref_len += closest_ref_len(seg_len, R);
    for (int k = 0; k < CLF_BLEU_ORDER; k++) {
        st->correct[k] += correct[k];
        st->total[k] += total[k];
    }
    if (hyp_raw >= 2 && hyp[hyp_raw - 2] == ' ' && hyp[hyp_raw - 1] == '.')
        st->tokenized_like++;
fail:
    if (seg)
        for (int k = 0; k <= R; k++)
            free(seg[k].p);
    free(seg);
    free(seg_len);
    free(seg_off);
    free(ids);
    return rc;
}

/* ---- the score ------------------------------------------------------------------------ */

static double my_log(double x) { return x == 0.0 ? -9999999999.0 : log(x); }

void clf_bleu_compute(const clf_bleu_stats *st, const clf_bleu_options *o, clf_bleu_score *out)
{
    clf_bleu_options def;
    if (!o) {
        clf_bleu_options_default(&def);
        o = &def;
    }
    memset(out, 0, sizeof *out);
    out->hyp_len = st->hyp_len;
    out->ref_len = st->ref_len;
    for (int k = 0; k < CLF_BLEU_ORDER; k++) {
        out->correct[k] = st->correct[k];
        out->total[k] = st->total[k];
    }
    out->ratio = st->ref_len ? (double)st->hyp_len / (double)st->ref_len : 0.0;
    if (st->hyp_len < st->ref_len)
        out->bp = st->hyp_len > 0 ? exp(1.0 - (double)st->ref_len / (double)st->hyp_len) : 0.0;
    else
        out->bp = 1.0;

    int any = 0;
    for (int k = 0; k < CLF_BLEU_ORDER; k++)
        any |= st->correct[k] != 0;
    if (!any)
        return; /* score 0, precisions 0 (sacreBLEU's early stop) */

    double value = o->smooth_value;
    if (value < 0)
        value = o->smooth == CLF_BLEU_SMOOTH_FLOOR ? 0.1 : 1.0;
    double smooth_mteval = 1.0;
    int eff_order = CLF_BLEU_ORDER;
    for (int n = 1; n <= CLF_BLEU_ORDER; n++) {
        double c = (double)st->correct[n - 1], t = (double)st->total[n - 1];
        if (o->smooth == CLF_BLEU_SMOOTH_ADD_K && n > 1) {
            c += value;
            t += value;
        }
        if (t == 0.0)
            break;
        if (o->effective_order)
            eff_order = n;
        if (c == 0.0) {
            if (o->smooth == CLF_BLEU_SMOOTH_EXP) {
                smooth_mteval *= 2.0;
                out->precisions[n - 1] = 100.0 / (smooth_mteval * t);
            } else if (o->smooth == CLF_BLEU_SMOOTH_FLOOR) {
                out->precisions[n - 1] = 100.0 * value / t;
            }
        } else {
            out->precisions[n - 1] = 100.0 * c / t;
        }
    }
    double sum = 0.0;
    for (int n = 0; n < eff_order; n++)
        sum += my_log(out->precisions[n]);
    out->score = out->bp * exp(sum / (double)eff_order);
}

clf_status clf_bleu_corpus(const char *const *hyps, size_t n, const char *const *const *refs,
                           int n_refs, const clf_bleu_options *o, clf_bleu_score *out,
                           clf_bleu_stats *stats, clf_error *err)
{
    clf_bleu_stats st;
    memset(&st, 0, sizeof st);
    const char **row = NULL;
    clf_status rc = CLF_OK;
    if (n == 0 || n_refs < 1)
        return clf_error_set(err, CLF_ERR_ARG,
                             "BLEU: need at least one segment and one reference stream "
                             "(got %zu segments, %d reference streams)",
                             n, n_refs);
    row = malloc((size_t)n_refs * sizeof *row);
    if (!row)
        return clf_error_set(err, CLF_ERR_MEMORY, "BLEU: out of memory");
    for (size_t i = 0; i < n; i++) {
        for (int r = 0; r < n_refs; r++)
            row[r] = refs[r] ? refs[r][i] : NULL;
        rc = clf_bleu_add(&st, o, hyps[i], row, n_refs, err);
        if (rc != CLF_OK) {
            clf_error_prefix(err, "segment %zu", i + 1);
            goto fail;
        }
    }
    clf_bleu_compute(&st, o, out);
    if (stats)
        *stats = st;
fail:
    free(row);
    return rc;
}

size_t clf_bleu_format(const clf_bleu_score *s, char *buf, size_t cap)
{
    int n = snprintf(buf, cap,
                     "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %" PRId64
                     " ref_len = %" PRId64 ")",
                     s->score, s->precisions[0], s->precisions[1], s->precisions[2],
                     s->precisions[3], s->bp, s->ratio, s->hyp_len, s->ref_len);
    return n < 0 ? 0 : (size_t)n;
}
