/*
 * json.c - see json.h.
 *
 * The reader is a recursive-descent parser over a byte array with an
 * explicit depth counter (so recursion is bounded by max_depth). Strings are
 * scanned once to find their end (an upper bound of the decoded length,
 * since every escape is at least as long as what it decodes to), then
 * decoded into one allocation. Numbers are checked against the JSON grammar
 * first and only then converted with strtod (with the C locale's '.'
 * swapped for the current locale's decimal point, should a program have
 * changed it). Duplicate keys are found by sorting pointers to an object's
 * members once the object is complete: O(n log n) for large headers.
 *
 * The writer appends to a doubling buffer and tracks, per open level,
 * whether it is an object or array and how many items it holds, which is
 * enough to place commas and to catch misuse.
 */
#include "model/io/json.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- UTF-8 ---------------------------------------------------------------- */

int clf_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        v = c & 0x1F;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        v = c & 0x0F;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        v = c & 0x07;
        min = 0x10000;
    } else {
        return 0; /* continuation byte, overlong lead (C0/C1) or F5..FF */
    }
    if (n < (size_t)len)
        return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

int clf_utf8_encode(uint32_t cp, unsigned char out[4])
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF)
        return 0;
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp <= 0x10FFFF) {
        out[0] = (unsigned char)(0xF0 | (cp >> 18));
        out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (unsigned char)(0x80 | (cp & 0x3F));
        return 4;
    }
    return 0;
}

size_t clf_utf8_validate(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = clf_utf8_decode(s + i, n - i, &cp);
        if (k == 0)
            return i;
        i += (size_t)k;
    }
    return n;
}

/* ---- reader ---------------------------------------------------------------- */

typedef struct parser {
    const unsigned char *s;
    size_t n, pos;
    int depth, max_depth;
    const char *source;
    clf_error *err;
} parser;

static clf_status perr(parser *p, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static clf_status perr(parser *p, size_t at, const char *fmt, ...)
{
    if (at > p->n)
        at = p->n;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at; i++) {
        if (p->s[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return clf_error_set_at(p->err, CLF_ERR_FORMAT, p->source,
                            "byte %zu (line %zu, column %zu): %s", at, line, col, what);
}

/* A short printable description of the byte at pos, for messages. */
static const char *found(parser *p, size_t pos, char buf[32])
{
    if (pos >= p->n)
        return "end of input";
    unsigned c = p->s[pos];
    if (c >= 0x20 && c < 0x7F)
        snprintf(buf, 32, "'%c'", (char)c);
    else
        snprintf(buf, 32, "byte 0x%02X", c);
    return buf;
}

static void skip_ws(parser *p)
{
    while (p->pos < p->n) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

static void free_contents(clf_json *v)
{
    free(v->key);
    free(v->string);
    for (size_t i = 0; i < v->count; i++)
        free_contents(&v->items[i]);
    free(v->items);
}

void clf_json_destroy(clf_json *root)
{
    if (root == NULL)
        return;
    free_contents(root);
    free(root);
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static clf_status read_hex4(parser *p, size_t at, uint32_t *out)
{
    if (p->n - at < 4)
        return perr(p, at, "expected 4 hex digits after \\u, found end of input");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p->s[at + (size_t)i]);
        if (h < 0) {
            char b[32];
            return perr(p, at + (size_t)i, "expected a hex digit in \\u escape, found %s",
                        found(p, at + (size_t)i, b));
        }
        v = v * 16 + (uint32_t)h;
    }
    *out = v;
    return CLF_OK;
}

/* p->pos is at the opening quote. On success *out (length *out_len) owns a decoded
 * NUL-terminated string and p->pos is past the closing quote. */
/* The character a one-letter escape stands for, or -1 (\u is not one). */
static int simple_escape(unsigned char e)
{
    switch (e) {
        case '"': return '"';
        case '\\': return '\\';
        case '/': return '/';
        case 'b': return '\b';
        case 'f': return '\f';
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        default: return -1;
    }
}

/* The \uXXXX escape at p->s[*i] (with the low surrogate that must follow a
 * high one) as a code point; *i moves past it. */
static clf_status unicode_escape(parser *p, size_t *i, size_t end, uint32_t *cp)
{
    const size_t esc = *i;
    if (read_hex4(p, esc + 2, cp) != CLF_OK)
        return p->err ? p->err->status : CLF_ERR_FORMAT;
    *i += 6;
    if (*cp >= 0xDC00 && *cp <= 0xDFFF)
        return perr(p, esc, "lone low surrogate \\u%04X in a string", (unsigned)*cp);
    if (*cp < 0xD800 || *cp > 0xDBFF)
        return CLF_OK;
    uint32_t lo;
    if (*i + 1 >= end || p->s[*i] != '\\' || p->s[*i + 1] != 'u')
        return perr(p, esc,
                    "high surrogate \\u%04X is not followed by a low surrogate \\uDC00-\\uDFFF",
                    (unsigned)*cp);
    if (read_hex4(p, *i + 2, &lo) != CLF_OK)
        return p->err ? p->err->status : CLF_ERR_FORMAT;
    if (lo < 0xDC00 || lo > 0xDFFF)
        return perr(p, esc, "high surrogate \\u%04X is followed by \\u%04X, not a low surrogate",
                    (unsigned)*cp, (unsigned)lo);
    *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
    *i += 6;
    return CLF_OK;
}

/* The characters of the string between open + 1 and end (the closing quote)
 * into buf, unescaped and checked; *len bytes. */
static clf_status unescape(parser *p, size_t open, size_t end, char *buf, size_t *len)
{
    size_t i = open + 1;
    *len = 0;
    while (i < end) {
        const unsigned char c = p->s[i];
        if (c == '\\') {
            const int simple = simple_escape(p->s[i + 1]);
            if (simple >= 0) {
                buf[(*len)++] = (char)simple;
                i += 2;
                continue;
            }
            if (p->s[i + 1] != 'u') {
                char b[32];
                return perr(p, i + 1, "invalid escape \\%s in a string", found(p, i + 1, b));
            }
            uint32_t cp;
            clf_status st = unicode_escape(p, &i, end, &cp);
            if (st != CLF_OK)
                return st;
            unsigned char u[4];
            const int k = clf_utf8_encode(cp, u);
            memcpy(buf + *len, u, (size_t)k);
            *len += (size_t)k;
            continue;
        }
        if (c < 0x20)
            return perr(p, i, "control character 0x%02X in a string must be escaped", c);
        if (c < 0x80) {
            buf[(*len)++] = (char)c;
            i++;
            continue;
        }
        uint32_t cp;
        const int k = clf_utf8_decode(p->s + i, end - i, &cp);
        if (k == 0)
            return perr(p, i, "invalid UTF-8 in a string");
        memcpy(buf + *len, p->s + i, (size_t)k);
        *len += (size_t)k;
        i += (size_t)k;
    }
    return CLF_OK;
}

static clf_status parse_string(parser *p, char **out, size_t *out_len)
{
    size_t open = p->pos, i = p->pos + 1;
    while (i < p->n && p->s[i] != '"')
        i += p->s[i] == '\\' ? 2 : 1;
    if (i >= p->n)
        return perr(p, open, "unterminated string");
    const size_t end = i; /* the closing quote */
    char *buf = malloc(end - open);
    if (buf == NULL)
        return clf_error_set(p->err, CLF_ERR_MEMORY, "out of memory parsing %s", p->source);
    size_t len = 0;
    clf_status st = unescape(p, open, end, buf, &len);
    if (st != CLF_OK) {
        free(buf);
        return st;
    }
    buf[len] = '\0';
    *out = buf;
    *out_len = len;
    p->pos = end + 1;
    return CLF_OK;
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static clf_status parse_number(parser *p, clf_json *v)
{
    size_t start = p->pos, i = p->pos;
    char b[32];
    int integral = 1;
    if (i < p->n && p->s[i] == '-')
        i++;
    if (i >= p->n || !is_digit(p->s[i]))
        return perr(p, i, "expected a digit in a number, found %s", found(p, i, b));
    if (p->s[i] == '0') {
        i++;
        if (i < p->n && is_digit(p->s[i]))
            return perr(p, start, "numbers may not have leading zeros");
    } else {
        while (i < p->n && is_digit(p->s[i]))
            i++;
    }
    if (i < p->n && p->s[i] == '.') {
        integral = 0;
        i++;
        if (i >= p->n || !is_digit(p->s[i]))
            return perr(p, i, "expected a digit after the decimal point, found %s", found(p, i, b));
        while (i < p->n && is_digit(p->s[i]))
            i++;
    }
    if (i < p->n && (p->s[i] == 'e' || p->s[i] == 'E')) {
        integral = 0;
        i++;
        if (i < p->n && (p->s[i] == '+' || p->s[i] == '-'))
            i++;
        if (i >= p->n || !is_digit(p->s[i]))
            return perr(p, i, "expected a digit in the exponent, found %s", found(p, i, b));
        while (i < p->n && is_digit(p->s[i]))
            i++;
    }
    size_t len = i - start;
    char tmp[512];
    if (len >= sizeof tmp)
        return perr(p, start, "number literal of %zu characters is too long", len);
    memcpy(tmp, p->s + start, len);
    tmp[len] = '\0';
    char dp = localeconv()->decimal_point[0];
    if (dp != '.' && dp != '\0') {
        char *d = strchr(tmp, '.');
        if (d != NULL)
            *d = dp;
    }
    errno = 0;
    double d = strtod(tmp, NULL);
    if (errno == ERANGE && isinf(d))
        return perr(p, start, "number %.*s is out of the range of a double", (int)len,
                    (const char *)p->s + start);
    v->type = CLF_JSON_NUMBER;
    v->number = d;
    v->is_int = 0;
    if (integral) {
        const unsigned char *q = p->s + start;
        int neg = *q == '-';
        if (neg)
            q++;
        uint64_t acc = 0;
        int overflow = 0;
        for (; q < p->s + i; q++) {
            uint64_t dig = (uint64_t)(*q - '0');
            if (acc > (UINT64_MAX - dig) / 10) {
                overflow = 1;
                break;
            }
            acc = acc * 10 + dig;
        }
        if (!overflow) {
            if (!neg && acc <= (uint64_t)INT64_MAX) {
                v->is_int = 1;
                v->integer = (int64_t)acc;
            } else if (neg && acc <= (uint64_t)INT64_MAX + 1) {
                v->is_int = 1;
                v->integer = acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc;
            }
        }
    }
    p->pos = i;
    return CLF_OK;
}

static clf_status parse_value(parser *p, clf_json *v);

static int cmp_keys(const void *a, const void *b)
{
    const clf_json *x = *(const clf_json *const *)a, *y = *(const clf_json *const *)b;
    size_t m = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, m);
    if (c != 0)
        return c;
    return x->key_len < y->key_len ? -1 : x->key_len > y->key_len ? 1 : 0;
}

static clf_status check_duplicates(parser *p, clf_json *v)
{
    if (v->count < 2)
        return CLF_OK;
    const clf_json **idx = malloc(v->count * sizeof *idx);
    if (idx == NULL)
        return clf_error_set(p->err, CLF_ERR_MEMORY, "out of memory parsing %s", p->source);
    for (size_t i = 0; i < v->count; i++)
        idx[i] = &v->items[i];
    qsort(idx, v->count, sizeof *idx, cmp_keys);
    clf_status st = CLF_OK;
    for (size_t i = 1; i < v->count; i++) {
        if (cmp_keys(&idx[i - 1], &idx[i]) == 0) {
            const clf_json *later = idx[i]->offset > idx[i - 1]->offset ? idx[i] : idx[i - 1];
            st = perr(p, later->offset, "duplicate key \"%.200s\" in the object at byte %zu",
                      later->key, v->offset);
            break;
        }
    }
    free(idx);
    return st;
}

/* Arrays and objects. p->pos is at '[' or '{'. */
static clf_status parse_container(parser *p, clf_json *v, int is_object)
{
    clf_status st = CLF_OK;
    size_t cap = 0;
    char b[32];
    unsigned char close = is_object ? '}' : ']';

    if (p->depth >= p->max_depth)
        return perr(p, p->pos, "nesting deeper than the limit of %d levels", p->max_depth);
    p->depth++;
    v->type = is_object ? CLF_JSON_OBJECT : CLF_JSON_ARRAY;
    p->pos++;
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == close) {
        p->pos++;
        p->depth--;
        return CLF_OK;
    }
    for (;;) {
        if (v->count == cap) {
            size_t ncap = cap ? cap * 2 : 4;
            clf_json *ni = realloc(v->items, ncap * sizeof *ni);
            if (ni == NULL) {
                st = clf_error_set(p->err, CLF_ERR_MEMORY, "out of memory parsing %s", p->source);
                goto fail;
            }
            v->items = ni;
            cap = ncap;
        }
        clf_json *item = &v->items[v->count];
        memset(item, 0, sizeof *item);
        v->count++;
        if (is_object) {
            skip_ws(p);
            if (p->pos >= p->n || p->s[p->pos] != '"') {
                st = perr(p, p->pos, "expected a string key in an object, found %s",
                          found(p, p->pos, b));
                goto fail;
            }
            st = parse_string(p, &item->key, &item->key_len);
            if (st != CLF_OK)
                goto fail;
            skip_ws(p);
            if (p->pos >= p->n || p->s[p->pos] != ':') {
                st = perr(p, p->pos, "expected ':' after an object key, found %s",
                          found(p, p->pos, b));
                goto fail;
            }
            p->pos++;
        }
        st = parse_value(p, item);
        if (st != CLF_OK)
            goto fail;
        skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos++;
            skip_ws(p);
            continue;
        }
        if (p->pos < p->n && p->s[p->pos] == close) {
            p->pos++;
            break;
        }
        st = perr(p, p->pos, "expected ',' or '%c' in %s, found %s", close,
                  is_object ? "an object" : "an array", found(p, p->pos, b));
        goto fail;
    }
    if (cap > v->count) {
        clf_json *ni = realloc(v->items, v->count * sizeof *ni);
        if (ni != NULL)
            v->items = ni;
    }
    if (is_object) {
        st = check_duplicates(p, v);
        if (st != CLF_OK)
            return st; /* the caller frees v */
    }
    p->depth--;
    return CLF_OK;

fail:
    return st; /* items so far are complete or zeroed: the caller's free handles them */
}

static int match_word(parser *p, const char *w)
{
    size_t n = strlen(w);
    return p->n - p->pos >= n && memcmp(p->s + p->pos, w, n) == 0;
}

static clf_status parse_value(parser *p, clf_json *v)
{
    char b[32];
    skip_ws(p);
    v->offset = p->pos;
    if (p->pos >= p->n)
        return perr(p, p->pos, "expected a value, found end of input");
    unsigned char c = p->s[p->pos];
    switch (c) {
        case '{': return parse_container(p, v, 1);
        case '[': return parse_container(p, v, 0);
        case '"': v->type = CLF_JSON_STRING; return parse_string(p, &v->string, &v->string_len);
        case 't':
            if (!match_word(p, "true"))
                break;
            v->type = CLF_JSON_BOOL;
            v->boolean = 1;
            p->pos += 4;
            return CLF_OK;
        case 'f':
            if (!match_word(p, "false"))
                break;
            v->type = CLF_JSON_BOOL;
            v->boolean = 0;
            p->pos += 5;
            return CLF_OK;
        case 'n':
            if (!match_word(p, "null"))
                break;
            v->type = CLF_JSON_NULL;
            p->pos += 4;
            return CLF_OK;
        default:
            if (c == '-' || is_digit(c))
                return parse_number(p, v);
            break;
    }
    return perr(p, p->pos,
                "expected a value (object, array, string, number, true, false or "
                "null), found %s",
                found(p, p->pos, b));
}

clf_status clf_json_parse(const char *text, size_t len, const clf_json_options *opt, clf_json **out,
                          clf_error *err)
{
    parser p;
    clf_status st;
    clf_json *root = NULL;
    char b[32];

    *out = NULL;
    memset(&p, 0, sizeof p);
    p.s = (const unsigned char *)text;
    p.n = len;
    p.err = err;
    p.source = opt != NULL && opt->source != NULL ? opt->source : "JSON";
    p.max_depth = opt != NULL && opt->max_depth > 0 ? opt->max_depth : CLF_JSON_DEFAULT_MAX_DEPTH;
    size_t max_bytes =
        opt != NULL && opt->max_bytes > 0 ? opt->max_bytes : CLF_JSON_DEFAULT_MAX_BYTES;
    if (len > max_bytes)
        return clf_error_set_at(err, CLF_ERR_FORMAT, p.source,
                                "%zu bytes of JSON, more than the limit of %zu", len, max_bytes);
    if (text == NULL && len > 0)
        return clf_error_set(err, CLF_ERR_ARG, "clf_json_parse: NULL text");
    root = calloc(1, sizeof *root);
    if (root == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory parsing %s", p.source);
    st = parse_value(&p, root);
    if (st != CLF_OK)
        goto fail;
    skip_ws(&p);
    if (p.pos != p.n) {
        st = perr(&p, p.pos, "unexpected %s after the end of the JSON value", found(&p, p.pos, b));
        goto fail;
    }
    *out = root;
    return CLF_OK;

fail:
    clf_json_destroy(root);
    return st;
}

const clf_json *clf_json_get(const clf_json *v, const char *key)
{
    if (v == NULL || v->type != CLF_JSON_OBJECT)
        return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < v->count; i++) {
        const clf_json *m = &v->items[i];
        if (m->key_len == n && memcmp(m->key, key, n) == 0)
            return m;
    }
    return NULL;
}

const char *clf_json_type_name(clf_json_type t)
{
    switch (t) {
        case CLF_JSON_NULL: return "null";
        case CLF_JSON_BOOL: return "boolean";
        case CLF_JSON_NUMBER: return "number";
        case CLF_JSON_STRING: return "string";
        case CLF_JSON_ARRAY: return "array";
        case CLF_JSON_OBJECT: return "object";
    }
    return "unknown";
}

/* ---- writer ---------------------------------------------------------------- */

static void w_fail(clf_json_writer *w, clf_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void w_fail(clf_json_writer *w, clf_status st, const char *fmt, ...)
{
    if (w->status != CLF_OK)
        return;
    w->status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->error, sizeof w->error, fmt, ap);
    va_end(ap);
}

static void w_put(clf_json_writer *w, const char *s, size_t n)
{
    if (w->status != CLF_OK)
        return;
    if (w->len + n + 1 > w->cap) {
        size_t ncap = w->cap ? w->cap : 256;
        while (w->len + n + 1 > ncap)
            ncap *= 2;
        char *nb = realloc(w->buf, ncap);
        if (nb == NULL) {
            w_fail(w, CLF_ERR_MEMORY, "out of memory writing JSON (%zu bytes)", ncap);
            return;
        }
        w->buf = nb;
        w->cap = ncap;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

void clf_json_writer_init(clf_json_writer *w)
{
    memset(w, 0, sizeof *w);
    w->status = CLF_OK;
}

void clf_json_writer_release(clf_json_writer *w)
{
    free(w->buf);
    clf_json_writer_init(w);
}

/* Before any value: check the position is right and place a comma. */
static int w_value_begin(clf_json_writer *w, const char *what)
{
    if (w->status != CLF_OK)
        return 0;
    if (w->done) {
        w_fail(w, CLF_ERR_ARG, "JSON writer: %s after the top-level value was complete", what);
        return 0;
    }
    if (w->depth > 0) {
        int d = w->depth - 1;
        if (w->kind[d] == 'o') {
            if (!w->after_key) {
                w_fail(w, CLF_ERR_ARG, "JSON writer: %s inside an object without a key", what);
                return 0;
            }
            w->after_key = 0;
        } else {
            if (w->items[d] > 0)
                w_put(w, ",", 1);
            w->items[d]++;
        }
    }
    return 1;
}

static void w_value_end(clf_json_writer *w)
{
    if (w->depth == 0)
        w->done = 1;
}

static void w_escaped(clf_json_writer *w, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t bad = clf_utf8_validate(u, n);
    if (bad != n) {
        w_fail(w, CLF_ERR_ARG, "JSON writer: string is not valid UTF-8 at byte %zu", bad);
        return;
    }
    w_put(w, "\"", 1);
    size_t run = 0; /* start of the pending unescaped run */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = u[i];
        const char *rep = NULL;
        char hex[8];
        switch (c) {
            case '"': rep = "\\\""; break;
            case '\\': rep = "\\\\"; break;
            case '\n': rep = "\\n"; break;
            case '\r': rep = "\\r"; break;
            case '\t': rep = "\\t"; break;
            case '\b': rep = "\\b"; break;
            case '\f': rep = "\\f"; break;
            default:
                if (c < 0x20) {
                    snprintf(hex, sizeof hex, "\\u%04x", c);
                    rep = hex;
                }
        }
        if (rep != NULL) {
            w_put(w, s + run, i - run);
            w_put(w, rep, strlen(rep));
            run = i + 1;
        }
    }
    w_put(w, s + run, n - run);
    w_put(w, "\"", 1);
}

static void w_open(clf_json_writer *w, char kind)
{
    if (!w_value_begin(w, kind == 'o' ? "an object" : "an array"))
        return;
    if (w->depth >= CLF_JSON_WRITER_MAX_DEPTH) {
        w_fail(w, CLF_ERR_ARG, "JSON writer: nesting deeper than %d levels",
               CLF_JSON_WRITER_MAX_DEPTH);
        return;
    }
    w->kind[w->depth] = kind;
    w->items[w->depth] = 0;
    w->depth++;
    w_put(w, kind == 'o' ? "{" : "[", 1);
}

static void w_close(clf_json_writer *w, char kind)
{
    if (w->status != CLF_OK)
        return;
    const char *name = kind == 'o' ? "object" : "array";
    if (w->depth == 0 || w->kind[w->depth - 1] != kind) {
        w_fail(w, CLF_ERR_ARG, "JSON writer: end of an %s that is not open", name);
        return;
    }
    if (w->after_key) {
        w_fail(w, CLF_ERR_ARG, "JSON writer: object ended after a key without its value");
        return;
    }
    w->depth--;
    w_put(w, kind == 'o' ? "}" : "]", 1);
    w_value_end(w);
}

void clf_json_begin_object(clf_json_writer *w) { w_open(w, 'o'); }
void clf_json_end_object(clf_json_writer *w) { w_close(w, 'o'); }
void clf_json_begin_array(clf_json_writer *w) { w_open(w, 'a'); }
void clf_json_end_array(clf_json_writer *w) { w_close(w, 'a'); }

void clf_json_key_n(clf_json_writer *w, const char *key, size_t n)
{
    if (w->status != CLF_OK)
        return;
    if (w->depth == 0 || w->kind[w->depth - 1] != 'o') {
        w_fail(w, CLF_ERR_ARG, "JSON writer: key \"%.100s\" outside an object", key);
        return;
    }
    if (w->after_key) {
        w_fail(w, CLF_ERR_ARG, "JSON writer: key \"%.100s\" where a value was due", key);
        return;
    }
    int d = w->depth - 1;
    if (w->items[d] > 0)
        w_put(w, ",", 1);
    w->items[d]++;
    w_escaped(w, key, n);
    w_put(w, ":", 1);
    w->after_key = 1;
}

void clf_json_key(clf_json_writer *w, const char *key) { clf_json_key_n(w, key, strlen(key)); }

void clf_json_string_n(clf_json_writer *w, const char *s, size_t n)
{
    if (!w_value_begin(w, "a string"))
        return;
    w_escaped(w, s, n);
    w_value_end(w);
}

void clf_json_string(clf_json_writer *w, const char *s) { clf_json_string_n(w, s, strlen(s)); }

static void w_raw_value(clf_json_writer *w, const char *what, const char *text)
{
    if (!w_value_begin(w, what))
        return;
    w_put(w, text, strlen(text));
    w_value_end(w);
}

void clf_json_int(clf_json_writer *w, int64_t v)
{
    char b[32];
    snprintf(b, sizeof b, "%lld", (long long)v);
    w_raw_value(w, "a number", b);
}

void clf_json_uint(clf_json_writer *w, uint64_t v)
{
    char b[32];
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    w_raw_value(w, "a number", b);
}

/* printf's %g in the current locale -> JSON's '.' decimal point. */
static void fix_decimal_point(char *b)
{
    char dp = localeconv()->decimal_point[0];
    if (dp == '.' || dp == '\0')
        return;
    char *d = strchr(b, dp);
    if (d != NULL)
        *d = '.';
}

static double read_back(const char *b)
{
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%s", b);
    char dp = localeconv()->decimal_point[0];
    if (dp != '.' && dp != '\0') {
        char *d = strchr(tmp, '.');
        if (d != NULL)
            *d = dp;
    }
    return strtod(tmp, NULL);
}

void clf_json_double(clf_json_writer *w, double v)
{
    if (!isfinite(v)) {
        w_fail(w, CLF_ERR_ARG, "JSON writer: %f cannot be written (JSON has no NaN or infinity)",
               v);
        return;
    }
    char b[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, v);
        fix_decimal_point(b);
        if (read_back(b) == v)
            break;
    }
    w_raw_value(w, "a number", b);
}

void clf_json_float(clf_json_writer *w, float v)
{
    if (!isfinite(v)) {
        w_fail(w, CLF_ERR_ARG, "JSON writer: %f cannot be written (JSON has no NaN or infinity)",
               (double)v);
        return;
    }
    char b[40];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, (double)v);
        fix_decimal_point(b);
        if ((float)read_back(b) == v)
            break;
    }
    w_raw_value(w, "a number", b);
}

void clf_json_bool(clf_json_writer *w, int v) { w_raw_value(w, "a boolean", v ? "true" : "false"); }

void clf_json_null(clf_json_writer *w) { w_raw_value(w, "null", "null"); }

clf_status clf_json_writer_finish(clf_json_writer *w, char **out, size_t *len, clf_error *err)
{
    *out = NULL;
    if (len != NULL)
        *len = 0;
    if (w->status == CLF_OK && (!w->done || w->depth != 0))
        w_fail(w, CLF_ERR_ARG, "JSON writer: finished with %d unclosed level(s)%s", w->depth,
               w->done || w->depth ? "" : " and no value");
    if (w->status != CLF_OK) {
        clf_status st = clf_error_set(err, w->status, "%s", w->error);
        clf_json_writer_release(w);
        return st;
    }
    *out = w->buf;
    if (len != NULL)
        *len = w->len;
    clf_json_writer_init(w);
    return CLF_OK;
}
