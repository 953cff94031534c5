/*
 * wordpiece.c - BERT's WordPiece tokenizer (tokenizer.h): the normaliser,
 * the pre-tokenizer, greedy longest-match-first subwords, decoding, the
 * clformer JSON form and the import of a Hugging Face tokenizer.json.
 *
 * Encoding a text, as Hugging Face tokenizers does for a BertNormalizer +
 * BertPreTokenizer + WordPiece model:
 *   1. Added tokens whose "normalized" is false ("[CLS]", "[SEP]", ...) are
 *      matched verbatim in the raw text, longest first, and become their
 *      ids; the text between them goes through 2-4.
 *   2. Normaliser, per code point: clean_text drops NUL, U+FFFD and control
 *      characters (categories Cc, Cf, Cn, Co, Cs except \t \n \r) and maps
 *      whitespace to ' '; chinese_chars puts spaces around CJK ideographs;
 *      strip_accents (default: lowercase) decomposes (NFD) and drops the
 *      nonspacing marks (Mn); lowercase maps with full Unicode lowercasing.
 *   3. Pre-tokenizer: split at whitespace (removed) and around every
 *      punctuation character (ASCII punctuation or category P*), each its
 *      own word.
 *   4. WordPiece: a word longer than max_word_chars code points is [UNK];
 *      otherwise repeatedly take the longest vocabulary entry that starts
 *      the rest of the word (entries after the first carry the "##"
 *      prefix); if none does, the whole word is [UNK].
 * Decoding joins the pieces with spaces, glues "##" continuations to the
 * piece before, and applies the WordPiece decoder's cleanup (" ." -> ".",
 * " n't" -> "n't", ...).
 *
 * Lookups: a hash table from piece bytes to id (open addressing, FNV-1a).
 *
 * Not here: sentence pairs (token types), normalised added tokens, the
 * lstrip / rstrip flags of added tokens, other Hugging Face normalisers
 * and pre-tokenizers (refused at import, naming them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/text/tokenizer_internal.h"
#include "model/text/unicode.h"

#define WP_ERR(...) clf_error_set_at(err, CLF_ERR_FORMAT, "tokenizer", __VA_ARGS__)

void tok_wp_free(tok_wordpiece *wp)
{
    if (wp == NULL)
        return;
    free(wp->slots);
    free(wp->added);
    free(wp);
}

/* ---- the piece table ------------------------------------------------------ */

static int32_t wp_lookup(const clf_tokenizer *t, const char *s, size_t n)
{
    const tok_wordpiece *wp = t->wp;
    size_t mask = wp->cap - 1, i = (size_t)tok_hash_bytes((const unsigned char *)s, n) & mask;
    for (;; i = (i + 1) & mask) {
        int32_t id = wp->slots[i];
        if (id < 0)
            return -1;
        if (t->off[id + 1] - t->off[id] == n && memcmp(t->bytes + t->off[id], s, n) == 0)
            return id;
    }
}

/* A WordPiece tokenizer over n pieces (pieces[i] of len[i] bytes, id i):
 * the table and the index; options and specials are set by the caller.
 * A repeated piece is an error naming both ids. */
static clf_status wp_build(char **pieces, const size_t *len, int32_t n, clf_tokenizer **out,
                           clf_error *err)
{
    *out = NULL;
    size_t total = 0;
    for (int32_t i = 0; i < n; i++)
        total += len[i];
    clf_tokenizer *t = calloc(1, sizeof *t);
    if (t == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory loading a tokenizer");
    t->type = CLF_TOKENIZER_WORDPIECE;
    t->base = t->vocab_size = n;
    for (int i = 0; i < CLF_SPECIAL_COUNT; i++)
        t->special[i] = -1;
    t->off = calloc((size_t)n + 1, sizeof *t->off);
    t->bytes = malloc(total + 1);
    t->wp = calloc(1, sizeof *t->wp);
    size_t cap = 16;
    while (cap < 2 * (size_t)n)
        cap *= 2;
    if (t->wp != NULL)
        t->wp->slots = malloc(cap * sizeof *t->wp->slots);
    if (t->off == NULL || t->bytes == NULL || t->wp == NULL || t->wp->slots == NULL ||
        total > UINT32_MAX) {
        clf_tokenizer_destroy(t);
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory loading a tokenizer");
    }
    t->wp->cap = cap;
    memset(t->wp->slots, 0xFF, cap * sizeof *t->wp->slots);
    size_t pos = 0;
    for (int32_t i = 0; i < n; i++) {
        memcpy(t->bytes + pos, pieces[i], len[i]);
        pos += len[i];
        t->off[i + 1] = (uint32_t)pos;
        int32_t prev = wp_lookup(t, pieces[i], len[i]);
        if (prev >= 0) {
            clf_status st = WP_ERR("vocabulary entries %d and %d are both \"%.*s\"", (int)prev,
                                   (int)i, (int)(len[i] < 64 ? len[i] : 64), pieces[i]);
            clf_tokenizer_destroy(t);
            return st;
        }
        size_t k = (size_t)tok_hash_bytes((const unsigned char *)pieces[i], len[i]) & (cap - 1);
        while (t->wp->slots[k] >= 0)
            k = (k + 1) & (cap - 1);
        t->wp->slots[k] = i;
    }
    t->wp->lowercase = t->wp->strip_accents = t->wp->clean_text = t->wp->chinese_chars = 1;
    memcpy(t->wp->prefix, "##", 3);
    t->wp->prefix_len = 2;
    t->wp->max_word_chars = 100;
    *out = t;
    return CLF_OK;
}

/* ---- encoding ----------------------------------------------------------------- */

static int is_chinese(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static int is_space(uint32_t c) { return (clf_uni_class(c) & CLF_UNI_SPACE) != 0; }

static int is_punct(uint32_t c)
{
    if (c < 0x80)
        return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
               (c >= 123 && c <= 126);
    return (clf_uni_class(c) & CLF_UNI_PUNCT) != 0;
}

/* A growing array of code points. */
typedef struct cpbuf {
    uint32_t *p;
    size_t n, cap;
} cpbuf;

static int cp_push(cpbuf *b, uint32_t c)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 256;
        uint32_t *p = realloc(b->p, cap * sizeof *p);
        if (p == NULL)
            return 0;
        b->p = p;
        b->cap = cap;
    }
    b->p[b->n++] = c;
    return 1;
}

/* Normalise one code point into b (BertNormalizer). */
static int normalise(const tok_wordpiece *wp, uint32_t c, cpbuf *b)
{
    if (wp->clean_text) {
        if (c == 0 || c == 0xFFFD)
            return 1;
        if (c == '\t' || c == '\n' || c == '\r' || is_space(c))
            return cp_push(b, ' ');
        if (clf_uni_class(c) & CLF_UNI_OTHER)
            return 1;
    }
    if (wp->chinese_chars && is_chinese(c))
        return cp_push(b, ' ') && cp_push(b, c) && cp_push(b, ' ');
    uint32_t d[4];
    int nd = 1;
    d[0] = c;
    if (wp->strip_accents)
        nd = clf_uni_decompose(c, d);
    for (int i = 0; i < nd; i++) {
        if (wp->strip_accents && (clf_uni_class(d[i]) & CLF_UNI_MN))
            continue;
        if (!wp->lowercase) {
            if (!cp_push(b, d[i]))
                return 0;
            continue;
        }
        uint32_t l[4];
        int nl = clf_uni_tolower(d[i], l);
        for (int k = 0; k < nl; k++)
            if (!cp_push(b, l[k]))
                return 0;
    }
    return 1;
}

/* A growing array of ids. */
typedef struct idbuf {
    int32_t *p;
    size_t n, cap;
} idbuf;

static int id_push(idbuf *b, int32_t id)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        int32_t *p = realloc(b->p, cap * sizeof *p);
        if (p == NULL)
            return 0;
        b->p = p;
        b->cap = cap;
    }
    b->p[b->n++] = id;
    return 1;
}

/* WordPiece over one word of n code points; scratch holds its UTF-8. */
static int wordpiece(const clf_tokenizer *t, const uint32_t *w, size_t n, char *scratch,
                     size_t *bpos, idbuf *ids)
{
    const tok_wordpiece *wp = t->wp;
    int32_t unk = t->special[CLF_SPECIAL_UNK];
    if (n > (size_t)wp->max_word_chars)
        return unk >= 0 ? id_push(ids, unk) : -1;
    /* scratch: the prefix, then the word's UTF-8; bpos[i] = byte of char i */
    size_t P = wp->prefix_len, pos = P;
    memcpy(scratch, wp->prefix, P);
    for (size_t i = 0; i < n; i++) {
        bpos[i] = pos;
        pos += (size_t)clf_utf8_encode(w[i], (unsigned char *)scratch + pos);
    }
    bpos[n] = pos;
    size_t mark = ids->n, start = 0;
    while (start < n) {
        int32_t id = -1;
        size_t end = n;
        for (; end > start; end--) {
            /* the prefix sits right before char start only for start 0; copy it */
            if (start > 0) {
                size_t s0 = bpos[start] - P;
                char save[8];
                memcpy(save, scratch + s0, P);
                memcpy(scratch + s0, wp->prefix, P);
                id = wp_lookup(t, scratch + s0, bpos[end] - s0);
                memcpy(scratch + s0, save, P);
            } else {
                id = wp_lookup(t, scratch + bpos[0], bpos[end] - bpos[0]);
            }
            if (id >= 0)
                break;
        }
        if (id < 0) { /* no piece starts here: the whole word is unknown */
            ids->n = mark;
            return unk >= 0 ? id_push(ids, unk) : -1;
        }
        if (!id_push(ids, id))
            return 0;
        start = end;
    }
    return 1;
}

/* Normalise, pre-tokenize and WordPiece text[0..len) into ids. Returns
 * CLF_OK, or an error for invalid UTF-8, a word with no unk token, memory. */
static clf_status encode_plain(const clf_tokenizer *t, const unsigned char *s, size_t len,
                               size_t base_off, idbuf *ids, clf_error *err)
{
    cpbuf b = {NULL, 0, 0};
    char *scratch = NULL;
    size_t *bpos = NULL;
    clf_status st = CLF_OK;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = clf_utf8_decode(s + i, len - i, &cp);
        if (k == 0) {
            st = clf_error_set(err, CLF_ERR_FORMAT, "invalid UTF-8 at byte %zu (byte 0x%02X)",
                               base_off + i, s[i]);
            goto done;
        }
        if (!normalise(t->wp, cp, &b))
            goto oom;
        i += (size_t)k;
    }
    scratch = malloc(4 * b.n + 16);
    bpos = malloc((b.n + 1) * sizeof *bpos);
    if (scratch == NULL || bpos == NULL)
        goto oom;
    for (size_t i = 0; i < b.n;) {
        if (is_space(b.p[i])) {
            i++;
            continue;
        }
        size_t j = i + 1;
        if (!is_punct(b.p[i]))
            while (j < b.n && !is_space(b.p[j]) && !is_punct(b.p[j]))
                j++;
        int r = wordpiece(t, b.p + i, j - i, scratch, bpos, ids);
        if (r == 0)
            goto oom;
        if (r < 0) {
            st = clf_error_set(err, CLF_ERR_ARG,
                               "a word of the text is not in the vocabulary and the tokenizer "
                               "has no unk token");
            goto done;
        }
        i = j;
    }
    goto done;
oom:
    st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory encoding %zu bytes of text", len);
done:
    free(b.p);
    free(scratch);
    free(bpos);
    return st;
}

clf_status tok_wp_encode(const clf_tokenizer *t, const char *text, size_t len, int32_t **out,
                         size_t *n, clf_error *err)
{
    const tok_wordpiece *wp = t->wp;
    const unsigned char *s = (const unsigned char *)text;
    idbuf ids = {NULL, 0, 0};
    clf_status st = CLF_OK;
    size_t seg = 0, i = 0;
    *out = NULL;
    *n = 0;
    while (i < len) {
        /* an added token at i? (the list is longest first) */
        int32_t hit = -1;
        size_t hl = 0;
        for (int a = 0; a < wp->n_added && hit < 0; a++) {
            int32_t id = wp->added[a];
            size_t l = t->off[id + 1] - t->off[id];
            if (l > 0 && l <= len - i && memcmp(s + i, t->bytes + t->off[id], l) == 0) {
                hit = id;
                hl = l;
            }
        }
        if (hit < 0) {
            i++;
            continue;
        }
        if ((st = encode_plain(t, s + seg, i - seg, seg, &ids, err)) != CLF_OK)
            goto fail;
        if (!id_push(&ids, hit))
            goto oom;
        i += hl;
        seg = i;
    }
    if ((st = encode_plain(t, s + seg, len - seg, seg, &ids, err)) != CLF_OK)
        goto fail;
    if (ids.p == NULL && (ids.p = malloc(sizeof *ids.p)) == NULL)
        goto oom;
    *out = ids.p;
    *n = ids.n;
    return CLF_OK;
oom:
    st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory encoding %zu bytes of text", len);
fail:
    free(ids.p);
    return st;
}

/* ---- decoding --------------------------------------------------------------------- */

/* The WordPiece decoder's cleanup: spaces before punctuation and
 * contractions removed, in its order. */
static size_t cleanup(char *s, size_t n)
{
    static const char *const from[] = {" .",  " ?",      " !",  " ,",   " ' ", " n't",
                                       " 'm", " do not", " 's", " 've", " 're"};
    static const char *const to[] = {".",  "?",       "!",  ",",   "'",  "n't",
                                     "'m", " do not", "'s", "'ve", "'re"};
    for (size_t r = 0; r < sizeof from / sizeof from[0]; r++) {
        size_t fl = strlen(from[r]), tl = strlen(to[r]), w = 0;
        for (size_t i = 0; i < n;) {
            if (i + fl <= n && memcmp(s + i, from[r], fl) == 0) {
                memmove(s + w, to[r], tl);
                w += tl;
                i += fl;
            } else {
                s[w++] = s[i++];
            }
        }
        n = w;
    }
    return n;
}

clf_status tok_wp_decode(const clf_tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                         char **text, size_t *len, clf_error *err)
{
    const tok_wordpiece *wp = t->wp;
    size_t cap = 1;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab_size)
            return clf_error_set(err, CLF_ERR_ARG,
                                 "token id %d at position %zu is outside the vocabulary (%d "
                                 "tokens)",
                                 (int)ids[i], i, (int)t->vocab_size);
        cap += t->off[ids[i] + 1] - t->off[ids[i]] + 1;
    }
    char *out = malloc(cap);
    if (out == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory decoding %zu tokens", n);
    size_t pos = 0;
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        if (!(flags & CLF_DECODE_SPECIALS) && clf_tokenizer_special_of(t, ids[i]) >= 0)
            continue;
        const char *p = t->bytes + t->off[ids[i]];
        size_t l = t->off[ids[i] + 1] - t->off[ids[i]];
        if (l >= wp->prefix_len && memcmp(p, wp->prefix, wp->prefix_len) == 0 && !first) {
            p += wp->prefix_len;
            l -= wp->prefix_len;
        } else if (!first) {
            out[pos++] = ' ';
        }
        memcpy(out + pos, p, l);
        pos += l;
        first = 0;
    }
    pos = cleanup(out, pos);
    out[pos] = '\0';
    *text = out;
    if (len != NULL)
        *len = pos;
    return CLF_OK;
}

/* ---- clformer JSON ------------------------------------------------------------------ */

void tok_wp_write_json(const clf_tokenizer *t, clf_json_writer *w)
{
    const tok_wordpiece *wp = t->wp;
    clf_json_key(w, "vocab");
    clf_json_begin_array(w);
    for (int32_t i = 0; i < t->vocab_size; i++)
        clf_json_string_n(w, t->bytes + t->off[i], t->off[i + 1] - t->off[i]);
    clf_json_end_array(w);
    clf_json_key(w, "wordpiece");
    clf_json_begin_object(w);
    clf_json_key(w, "lowercase");
    clf_json_bool(w, wp->lowercase);
    clf_json_key(w, "strip_accents");
    clf_json_bool(w, wp->strip_accents);
    clf_json_key(w, "clean_text");
    clf_json_bool(w, wp->clean_text);
    clf_json_key(w, "chinese_chars");
    clf_json_bool(w, wp->chinese_chars);
    clf_json_key(w, "prefix");
    clf_json_string_n(w, wp->prefix, wp->prefix_len);
    clf_json_key(w, "max_word_chars");
    clf_json_int(w, wp->max_word_chars);
    clf_json_key(w, "added");
    clf_json_begin_array(w);
    for (int a = 0; a < wp->n_added; a++)
        clf_json_int(w, wp->added[a]);
    clf_json_end_array(w);
    clf_json_end_object(w);
}

/* Pieces from a JSON array of strings (id = index) into a new tokenizer. */
static clf_status pieces_from_array(const clf_json *voc, clf_tokenizer **out, clf_error *err)
{
    if (voc == NULL || voc->type != CLF_JSON_ARRAY || voc->count == 0 || voc->count > INT32_MAX)
        return WP_ERR("a wordpiece tokenizer needs \"vocab\", a non-empty array of strings");
    char **p = malloc(voc->count * sizeof *p);
    size_t *l = malloc(voc->count * sizeof *l);
    clf_status st = CLF_OK;
    if (p == NULL || l == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory loading a tokenizer");
        goto done;
    }
    for (size_t i = 0; i < voc->count; i++) {
        const clf_json *e = &voc->items[i];
        if (e->type != CLF_JSON_STRING || e->string_len == 0 || e->string_len > 1024) {
            st = WP_ERR("vocab[%zu] must be a string of 1 to 1024 bytes", i);
            goto done;
        }
        p[i] = e->string;
        l[i] = e->string_len;
    }
    st = wp_build(p, l, (int32_t)voc->count, out, err);
done:
    free(p);
    free(l);
    return st;
}

static clf_status set_added(clf_tokenizer *t, const int32_t *ids, int n, clf_error *err)
{
    tok_wordpiece *wp = t->wp;
    free(wp->added);
    wp->added = NULL;
    wp->n_added = 0;
    if (n == 0)
        return CLF_OK;
    if ((wp->added = malloc((size_t)n * sizeof *wp->added)) == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory loading a tokenizer");
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab_size)
            return WP_ERR("added token id %d is outside the vocabulary", (int)ids[i]);
        /* insertion by length, longest first (then by id) */
        int k = wp->n_added++;
        size_t li = t->off[ids[i] + 1] - t->off[ids[i]];
        while (k > 0) {
            int32_t o = wp->added[k - 1];
            size_t lo = t->off[o + 1] - t->off[o];
            if (lo > li || (lo == li && o < ids[i]))
                break;
            wp->added[k] = o;
            k--;
        }
        wp->added[k] = ids[i];
    }
    return CLF_OK;
}

static clf_status get_bool(const clf_json *o, const char *key, int *v, clf_error *err)
{
    const clf_json *b = clf_json_get(o, key);
    if (b == NULL || b->type != CLF_JSON_BOOL)
        return WP_ERR("\"wordpiece\".\"%s\" must be true or false", key);
    *v = b->boolean;
    return CLF_OK;
}

clf_status tok_wp_from_json(const clf_json *doc, int32_t vocab_size, const int32_t *special,
                            clf_tokenizer **out, clf_error *err)
{
    clf_tokenizer *t = NULL;
    int32_t *added = NULL;
    const clf_json *o = clf_json_get(doc, "wordpiece");
    clf_status st = pieces_from_array(clf_json_get(doc, "vocab"), &t, err);
    if (st != CLF_OK)
        return st;
    tok_wordpiece *wp = t->wp;
    const clf_json *pre = o ? clf_json_get(o, "prefix") : NULL;
    const clf_json *mw = o ? clf_json_get(o, "max_word_chars") : NULL;
    const clf_json *ad = o ? clf_json_get(o, "added") : NULL;
    if (o == NULL || o->type != CLF_JSON_OBJECT) {
        st = WP_ERR("a wordpiece tokenizer needs its \"wordpiece\" options object");
        goto fail;
    }
    if ((st = get_bool(o, "lowercase", &wp->lowercase, err)) != CLF_OK ||
        (st = get_bool(o, "strip_accents", &wp->strip_accents, err)) != CLF_OK ||
        (st = get_bool(o, "clean_text", &wp->clean_text, err)) != CLF_OK ||
        (st = get_bool(o, "chinese_chars", &wp->chinese_chars, err)) != CLF_OK)
        goto fail;
    if (pre == NULL || pre->type != CLF_JSON_STRING || pre->string_len == 0 ||
        pre->string_len >= sizeof wp->prefix) {
        st = WP_ERR("\"wordpiece\".\"prefix\" must be a string of 1 to %zu bytes",
                    sizeof wp->prefix - 1);
        goto fail;
    }
    memcpy(wp->prefix, pre->string, pre->string_len + 1);
    wp->prefix_len = pre->string_len;
    if (mw == NULL || !mw->is_int || mw->integer < 1 || mw->integer > 1000000) {
        st = WP_ERR("\"wordpiece\".\"max_word_chars\" must be an integer in [1, 1000000]");
        goto fail;
    }
    wp->max_word_chars = (int32_t)mw->integer;
    if (ad == NULL || ad->type != CLF_JSON_ARRAY || ad->count > 4096) {
        st = WP_ERR("\"wordpiece\".\"added\" must be an array of ids");
        goto fail;
    }
    if ((added = malloc((ad->count + 1) * sizeof *added)) == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory loading a tokenizer");
        goto fail;
    }
    for (size_t i = 0; i < ad->count; i++) {
        if (!ad->items[i].is_int || ad->items[i].integer < 0 ||
            ad->items[i].integer >= t->vocab_size) {
            st = WP_ERR("\"wordpiece\".\"added\"[%zu] is not an id of the vocabulary", i);
            goto fail;
        }
        added[i] = (int32_t)ad->items[i].integer;
    }
    if ((st = set_added(t, added, (int)ad->count, err)) != CLF_OK)
        goto fail;
    if (vocab_size != t->vocab_size) {
        st = WP_ERR("vocab_size is %d but \"vocab\" has %d entries", (int)vocab_size,
                    (int)t->vocab_size);
        goto fail;
    }
    for (int i = 0; i < CLF_SPECIAL_COUNT; i++) {
        if (special[i] >= vocab_size) {
            st = WP_ERR("special token \"%s\" has id %d, outside the vocabulary",
                        clf_tokenizer_special_name((clf_special_token)i), (int)special[i]);
            goto fail;
        }
        t->special[i] = special[i];
    }
    free(added);
    *out = t;
    return CLF_OK;
fail:
    free(added);
    clf_tokenizer_destroy(t);
    return st;
}

/* ---- Hugging Face tokenizer.json ---------------------------------------------------- */

#define HF_ERR(...) clf_error_set_at(err, CLF_ERR_FORMAT, name, __VA_ARGS__)

/* The id of a token by its text, -1 if absent. */
static int32_t find_piece(const clf_tokenizer *t, const char *s)
{
    return wp_lookup(t, s, strlen(s));
}

/* An optional boolean member: v keeps its value when the member is absent
 * or null. */
static clf_status opt_bool(const clf_json *o, const char *key, int *v, const char *name,
                           clf_error *err)
{
    const clf_json *b = clf_json_get(o, key);
    if (b == NULL || b->type == CLF_JSON_NULL)
        return CLF_OK;
    if (b->type != CLF_JSON_BOOL)
        return HF_ERR("normalizer.%s must be true, false or null", key);
    *v = b->boolean;
    return CLF_OK;
}

/* cls and sep from the post-processor (TemplateProcessing or BertProcessing). */
static clf_status hf_post(const clf_json *pp, clf_tokenizer *t, const char *name, clf_error *err)
{
    if (pp == NULL || pp->type == CLF_JSON_NULL)
        return CLF_OK;
    const clf_json *ty = clf_json_get(pp, "type");
    if (ty == NULL || ty->type != CLF_JSON_STRING)
        return HF_ERR("post_processor.type must be a string");
    if (strcmp(ty->string, "BertProcessing") == 0) {
        const char *keys[2] = {"cls", "sep"};
        const clf_special_token which[2] = {CLF_SPECIAL_CLS, CLF_SPECIAL_SEP};
        for (int i = 0; i < 2; i++) {
            const clf_json *e = clf_json_get(pp, keys[i]);
            if (e == NULL || e->type != CLF_JSON_ARRAY || e->count != 2 || !e->items[1].is_int ||
                e->items[1].integer < 0 || e->items[1].integer >= t->vocab_size)
                return HF_ERR("post_processor.%s must be [token, id] with an id of the vocabulary",
                              keys[i]);
            t->special[which[i]] = (int32_t)e->items[1].integer;
        }
        return CLF_OK;
    }
    if (strcmp(ty->string, "TemplateProcessing") != 0)
        return HF_ERR("post_processor type \"%s\" is not supported (BertProcessing or "
                      "TemplateProcessing [CLS] $A [SEP])",
                      ty->string);
    const clf_json *single = clf_json_get(pp, "single");
    if (single == NULL || single->type != CLF_JSON_ARRAY || single->count != 3)
        return HF_ERR("post_processor.single: expected the template [CLS] $A [SEP]");
    const clf_special_token which[3] = {CLF_SPECIAL_CLS, CLF_SPECIAL_COUNT, CLF_SPECIAL_SEP};
    for (int i = 0; i < 3; i++) {
        const clf_json *it = &single->items[i];
        const clf_json *sp = clf_json_get(it, "SpecialToken");
        const clf_json *sq = clf_json_get(it, "Sequence");
        if (i == 1) {
            if (sq == NULL)
                return HF_ERR("post_processor.single[1]: expected the sequence $A");
            continue;
        }
        const clf_json *id = sp ? clf_json_get(sp, "id") : NULL;
        int32_t tok = id && id->type == CLF_JSON_STRING ? find_piece(t, id->string) : -1;
        if (tok < 0)
            return HF_ERR("post_processor.single[%d]: expected a special token of the vocabulary",
                          i);
        t->special[which[i]] = tok;
    }
    return CLF_OK;
}

clf_status clf_tokenizer_from_any_json(const char *json, size_t len, const char *name,
                                       clf_tokenizer **out, clf_error *err)
{
    clf_json *doc = NULL;
    clf_json_options jo = {name, 0, 0};
    *out = NULL;
    clf_status st = clf_json_parse(json, len, &jo, &doc, err);
    if (st != CLF_OK)
        return st;
    const int hf = doc->type == CLF_JSON_OBJECT && clf_json_get(doc, "format") == NULL &&
                   clf_json_get(doc, "model") != NULL;
    clf_json_destroy(doc);
    return hf ? clf_tokenizer_from_hf(json, len, name, out, err)
              : clf_tokenizer_from_json(json, len, out, err);
}

/* GPT-2's byte-level BPE inside a tokenizer.json (its pre-tokenizer must
 * be ByteLevel without a prefix space). */
static clf_status hf_bpe(const clf_json *doc, const clf_json *model, const char *name,
                         clf_tokenizer **out, clf_error *err)
{
    const clf_json *pt = clf_json_get(doc, "pre_tokenizer");
    const clf_json *ptt = pt ? clf_json_get(pt, "type") : NULL;
    if (ptt == NULL || ptt->type != CLF_JSON_STRING || strcmp(ptt->string, "ByteLevel") != 0)
        return HF_ERR("a BPE model needs the ByteLevel pre_tokenizer (GPT-2's), found \"%s\"",
                      ptt && ptt->type == CLF_JSON_STRING ? ptt->string : "?");
    const clf_json *aps = clf_json_get(pt, "add_prefix_space");
    if (aps != NULL && aps->type == CLF_JSON_BOOL && aps->boolean)
        return HF_ERR("pre_tokenizer.add_prefix_space true is not supported (GPT-2's is false)");
    return tok_gpt2_from_hf(model, name, out, err);
}

/* model.vocab (token: id, ids 0 .. n-1) as a WordPiece tokenizer. */
static clf_status hf_vocab(const clf_json *model, const char *name, clf_tokenizer **out,
                           clf_error *err)
{
    const clf_json *voc = clf_json_get(model, "vocab");
    if (voc == NULL || voc->type != CLF_JSON_OBJECT || voc->count == 0 || voc->count > (1u << 22))
        return HF_ERR("model.vocab must be a non-empty object of token: id");
    const size_t n = voc->count;
    char **pieces = calloc(n, sizeof *pieces);
    size_t *plen = calloc(n, sizeof *plen);
    clf_status st = CLF_OK;
    if (pieces == NULL || plen == NULL)
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory importing a tokenizer");
    const clf_json *past = NULL; /* the first entry with an id of n or more */
    for (size_t i = 0; i < n && st == CLF_OK; i++) {
        const clf_json *e = &voc->items[i];
        if (!e->is_int || e->integer < 0)
            st = HF_ERR("model.vocab[\"%s\"]: the ids must be integers 0 .. %zu", e->key, n - 1);
        else if ((size_t)e->integer >= n)
            past = past != NULL ? past : e; /* named with the id it leaves out, below */
        else if (pieces[e->integer] != NULL)
            st = HF_ERR("model.vocab: id %lld is given twice", (long long)e->integer);
        else if (e->key_len == 0 || e->key_len > 1024)
            st = HF_ERR("model.vocab: entry %lld is empty or longer than 1024 bytes",
                        (long long)e->integer);
        else {
            pieces[e->integer] = e->key;
            plen[e->integer] = e->key_len;
        }
    }
    if (st == CLF_OK && past != NULL) {
        size_t gap = 0;
        while (gap < n && pieces[gap] != NULL)
            gap++;
        st = HF_ERR("model.vocab: %zu entries, so ids 0 .. %zu, each once; id %zu has no entry, "
                    "and \"%s\" has id %lld",
                    n, n - 1, gap, past->key, (long long)past->integer);
    }
    if (st == CLF_OK)
        st = wp_build(pieces, plen, (int32_t)n, out, err);
    free(pieces);
    free(plen);
    return st;
}

/* The WordPiece model's options: subword prefix, longest word, unknown token. */
static clf_status hf_wordpiece_options(const clf_json *model, clf_tokenizer *t, const char *name,
                                       clf_error *err)
{
    tok_wordpiece *wp = t->wp;
    const clf_json *pre = clf_json_get(model, "continuing_subword_prefix");
    const clf_json *mw = clf_json_get(model, "max_input_chars_per_word");
    const clf_json *unk = clf_json_get(model, "unk_token");
    if (pre != NULL && pre->type == CLF_JSON_STRING) {
        if (pre->string_len == 0 || pre->string_len >= sizeof wp->prefix)
            return HF_ERR("model.continuing_subword_prefix must be 1 to %zu bytes",
                          sizeof wp->prefix - 1);
        memcpy(wp->prefix, pre->string, pre->string_len + 1);
        wp->prefix_len = pre->string_len;
    }
    if (mw != NULL && mw->is_int) {
        if (mw->integer < 1 || mw->integer > 1000000)
            return HF_ERR("model.max_input_chars_per_word must be in [1, 1000000]");
        wp->max_word_chars = (int32_t)mw->integer;
    }
    if (unk != NULL && unk->type == CLF_JSON_STRING &&
        (t->special[CLF_SPECIAL_UNK] = find_piece(t, unk->string)) < 0)
        return HF_ERR("model.unk_token \"%s\" is not in the vocabulary", unk->string);
    return CLF_OK;
}

/* The normaliser (none, or BertNormalizer) and the pre-tokenizer (BertPreTokenizer). */
static clf_status hf_normalizer(const clf_json *doc, clf_tokenizer *t, const char *name,
                                clf_error *err)
{
    tok_wordpiece *wp = t->wp;
    const clf_json *nz = clf_json_get(doc, "normalizer");
    if (nz == NULL || nz->type == CLF_JSON_NULL) {
        wp->lowercase = wp->strip_accents = wp->clean_text = wp->chinese_chars = 0;
    } else {
        const clf_json *nt = clf_json_get(nz, "type");
        if (nt == NULL || nt->type != CLF_JSON_STRING || strcmp(nt->string, "BertNormalizer"))
            return HF_ERR("normalizer type \"%s\" is not supported (BertNormalizer)",
                          nt && nt->type == CLF_JSON_STRING ? nt->string : "?");
        int strip = -1;
        clf_status st;
        if ((st = opt_bool(nz, "clean_text", &wp->clean_text, name, err)) != CLF_OK ||
            (st = opt_bool(nz, "handle_chinese_chars", &wp->chinese_chars, name, err)) != CLF_OK ||
            (st = opt_bool(nz, "lowercase", &wp->lowercase, name, err)) != CLF_OK ||
            (st = opt_bool(nz, "strip_accents", &strip, name, err)) != CLF_OK)
            return st;
        wp->strip_accents = strip < 0 ? wp->lowercase : strip; /* null: as lowercase */
    }
    const clf_json *pt = clf_json_get(doc, "pre_tokenizer");
    const clf_json *ptt = pt ? clf_json_get(pt, "type") : NULL;
    if (ptt == NULL || ptt->type != CLF_JSON_STRING || strcmp(ptt->string, "BertPreTokenizer"))
        return HF_ERR("pre_tokenizer type \"%s\" is not supported (BertPreTokenizer)",
                      ptt && ptt->type == CLF_JSON_STRING ? ptt->string : "?");
    return CLF_OK;
}

/* Added tokens (the verbatim ones are matched in text) and the pad: the
 * padding's pad_token, else [PAD]. */
static clf_status hf_added(const clf_json *doc, clf_tokenizer *t, const char *name, clf_error *err)
{
    const clf_json *at = clf_json_get(doc, "added_tokens");
    clf_status st = CLF_OK;
    if (at != NULL && at->type == CLF_JSON_ARRAY && at->count > 0) {
        int32_t *added = malloc(at->count * sizeof *added);
        int n_added = 0;
        if (added == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "out of memory importing a tokenizer");
        for (size_t i = 0; i < at->count && st == CLF_OK; i++) {
            const clf_json *id = clf_json_get(&at->items[i], "id");
            const clf_json *ct = clf_json_get(&at->items[i], "content");
            const clf_json *nm = clf_json_get(&at->items[i], "normalized");
            if (id == NULL || !id->is_int || ct == NULL || ct->type != CLF_JSON_STRING) {
                st = HF_ERR("added_tokens[%zu] needs an integer id and a string content", i);
                break;
            }
            int32_t tok = find_piece(t, ct->string);
            if (tok < 0 || tok != id->integer)
                st = HF_ERR("added_tokens[%zu] \"%s\" (id %lld) is not that entry of the "
                            "vocabulary",
                            i, ct->string, (long long)id->integer);
            else if (nm == NULL || nm->type != CLF_JSON_BOOL || !nm->boolean)
                added[n_added++] = tok;
        }
        if (st == CLF_OK)
            st = set_added(t, added, n_added, err);
        free(added);
        if (st != CLF_OK)
            return st;
    }
    const clf_json *pad = clf_json_get(doc, "padding");
    const clf_json *padtok = pad ? clf_json_get(pad, "pad_token") : NULL;
    if (padtok != NULL && padtok->type == CLF_JSON_STRING)
        t->special[CLF_SPECIAL_PAD] = find_piece(t, padtok->string);
    if (t->special[CLF_SPECIAL_PAD] < 0)
        t->special[CLF_SPECIAL_PAD] = find_piece(t, "[PAD]");
    return CLF_OK;
}

clf_status clf_tokenizer_from_hf(const char *json, size_t len, const char *name,
                                 clf_tokenizer **out, clf_error *err)
{
    clf_json *doc = NULL;
    clf_tokenizer *t = NULL;
    *out = NULL;
    clf_json_options jo = {name, 0, 0};
    clf_status st = clf_json_parse(json, len, &jo, &doc, err);
    if (st != CLF_OK)
        return st;
    const clf_json *model = clf_json_get(doc, "model");
    const clf_json *mty = model ? clf_json_get(model, "type") : NULL;
    if (model == NULL || mty == NULL || mty->type != CLF_JSON_STRING)
        st = HF_ERR("no \"model\" with a \"type\": not a Hugging Face tokenizer.json");
    else if (strcmp(mty->string, "BPE") == 0) /* GPT-2's byte level */
        st = hf_bpe(doc, model, name, out, err);
    else if (strcmp(mty->string, "WordPiece") != 0)
        st = HF_ERR("model type \"%s\" is not supported (WordPiece, or GPT-2's BPE)", mty->string);
    else if ((st = hf_vocab(model, name, &t, err)) == CLF_OK &&
             (st = hf_wordpiece_options(model, t, name, err)) == CLF_OK &&
             (st = hf_normalizer(doc, t, name, err)) == CLF_OK &&
             (st = hf_post(clf_json_get(doc, "post_processor"), t, name, err)) == CLF_OK &&
             (st = hf_added(doc, t, name, err)) == CLF_OK) {
        *out = t;
        t = NULL;
    }
    clf_tokenizer_destroy(t);
    clf_json_destroy(doc);
    return st;
}
