/*
 * text/bpe.c - byte-level byte-pair encoding: the pre-tokenizer,
 * building a tokenizer from merges, encoding and the BPE part of the JSON
 * form (see tokenizer.h for the rules; tokenizer.c has the shared parts,
 * text/bpe_train.c learns the merges).
 *
 * Pair ranks live in an open-addressing hash map, (left << 32 | right) ->
 * rank, shared with the trainer (tok_pair_map).
 *
 * Encoding (tok_bpe_encode): per pre-token, the GPT-2 loop over at most
 * CLF_BPE_MAX_PIECE symbols: find the lowest-ranked adjacent pair (leftmost
 * among equals) by a scan of cached pair ranks, merge it, update the two
 * neighbouring ranks. A call on a long text keeps a cache of the distinct
 * words it has encoded (their bytes point into the text; no copies).
 *
 * Not here: the char/byte kinds, decode and the JSON framing (tokenizer.c);
 * training (text/bpe_train.c); merges across pre-tokens; reading
 * special tokens out of the text.
 */
#include <stdlib.h>
#include <string.h>

#include "model/text/tokenizer_internal.h"

#define BPE_ERR(...) clf_error_set_at(err, CLF_ERR_FORMAT, "tokenizer", __VA_ARGS__)
#define OOM(what) clf_error_set(err, CLF_ERR_MEMORY, "out of memory %s", what)

/* ---- pair map -------------------------------------------------------------------- */

static uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t)(uint32_t)a << 32 | (uint32_t)b; }

static size_t mix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return (size_t)k;
}

static int pair_map_alloc(tok_pair_map *m, size_t cap)
{
    m->keys = malloc(cap * sizeof *m->keys);
    m->vals = malloc(cap * sizeof *m->vals);
    if (m->keys == NULL || m->vals == NULL) {
        free(m->keys);
        free(m->vals);
        m->keys = NULL;
        m->vals = NULL;
        return 0;
    }
    for (size_t i = 0; i < cap; i++)
        m->keys[i] = TOK_PAIR_EMPTY;
    m->cap = cap;
    m->n = 0;
    return 1;
}

int tok_pair_map_init(tok_pair_map *m, size_t expected)
{
    size_t cap = 16;
    while (cap < 2 * expected + 2)
        cap *= 2;
    return pair_map_alloc(m, cap);
}

void tok_pair_map_free(tok_pair_map *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->n = 0;
}

int32_t tok_pair_map_get(const tok_pair_map *m, int32_t left, int32_t right)
{
    if (m->cap == 0)
        return -1;
    uint64_t k = pair_key(left, right);
    size_t mask = m->cap - 1;
    for (size_t i = mix64(k) & mask;; i = (i + 1) & mask) {
        if (m->keys[i] == k)
            return m->vals[i];
        if (m->keys[i] == TOK_PAIR_EMPTY)
            return -1;
    }
}

static void pair_map_insert(tok_pair_map *m, uint64_t k, int32_t v)
{
    size_t mask = m->cap - 1;
    size_t i = mix64(k) & mask;
    while (m->keys[i] != TOK_PAIR_EMPTY && m->keys[i] != k)
        i = (i + 1) & mask;
    if (m->keys[i] == TOK_PAIR_EMPTY)
        m->n++;
    m->keys[i] = k;
    m->vals[i] = v;
}

int tok_pair_map_put(tok_pair_map *m, int32_t left, int32_t right, int32_t val)
{
    if (m->cap == 0 && !tok_pair_map_init(m, 8))
        return 0;
    if (2 * (m->n + 1) > m->cap) {
        tok_pair_map old = *m;
        if (!pair_map_alloc(m, old.cap * 2)) {
            *m = old;
            return 0;
        }
        for (size_t i = 0; i < old.cap; i++)
            if (old.keys[i] != TOK_PAIR_EMPTY)
                pair_map_insert(m, old.keys[i], old.vals[i]);
        tok_pair_map_free(&old);
    }
    pair_map_insert(m, pair_key(left, right), val);
    return 1;
}

/* ---- pre-tokenizer ----------------------------------------------------------------- */

enum { CL_SPACE, CL_LETTER, CL_DIGIT, CL_OTHER };

static int cp_class(uint32_t cp)
{
    if (cp < 0x80) {
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F))
            return CL_SPACE;
        if (cp >= '0' && cp <= '9')
            return CL_DIGIT;
        if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'))
            return CL_LETTER;
        return CL_OTHER;
    }
    if (cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
        cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000)
        return CL_SPACE;
    if (cp < 0xA0)
        return CL_OTHER; /* C1 controls */
    if (cp < 0xC0) {
        if (cp == 0xAA || cp == 0xB5 || cp == 0xBA)
            return CL_LETTER;
        if (cp == 0xB2 || cp == 0xB3 || cp == 0xB9 || (cp >= 0xBC && cp <= 0xBE))
            return CL_DIGIT;
        return CL_OTHER;
    }
    if (cp == 0xD7 || cp == 0xF7)
        return CL_OTHER;
    if ((cp >= 0x200B && cp <= 0x2027) || (cp >= 0x2030 && cp <= 0x205E) ||
        (cp >= 0x2060 && cp <= 0x206F) || (cp >= 0x20A0 && cp <= 0x20CF) ||
        (cp >= 0x2190 && cp <= 0x2BFF) || (cp >= 0x3001 && cp <= 0x303F) ||
        (cp >= 0xFE30 && cp <= 0xFE6F) || (cp >= 0xFF01 && cp <= 0xFF0F) ||
        (cp >= 0xFF1A && cp <= 0xFF20) || (cp >= 0xFF3B && cp <= 0xFF40) ||
        (cp >= 0xFF5B && cp <= 0xFF65) || (cp >= 0x1F000 && cp <= 0x1FAFF))
        return CL_OTHER;
    return CL_LETTER;
}

/* Class of the character at s[i] (i < n) and its length in bytes; an
 * invalid UTF-8 byte is one "other" character. */
static int class_at(const unsigned char *s, size_t n, size_t i, size_t *k)
{
    if (s[i] < 0x80) {
        *k = 1;
        return cp_class(s[i]);
    }
    uint32_t cp;
    int b = clf_utf8_decode(s + i, n - i, &cp);
    if (b == 0) {
        *k = 1;
        return CL_OTHER;
    }
    *k = (size_t)b;
    return cp_class(cp);
}

size_t clf_bpe_pretoken_end(const char *text, size_t len, size_t pos)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t lim = len - pos > CLF_BPE_MAX_PIECE ? pos + CLF_BPE_MAX_PIECE : len;
    size_t k, j;
    if (pos >= len)
        return len;
    /* 's 't 're 've 'm 'll 'd */
    if (s[pos] == '\'' && pos + 1 < len) {
        unsigned char c = s[pos + 1];
        if (pos + 2 < len && ((c == 'r' && s[pos + 2] == 'e') || (c == 'v' && s[pos + 2] == 'e') ||
                              (c == 'l' && s[pos + 2] == 'l')))
            return pos + 3;
        if (c == 's' || c == 't' || c == 'm' || c == 'd')
            return pos + 2;
    }
    size_t start = pos;
    int c = class_at(s, len, pos, &k);
    if (c == CL_SPACE && s[pos] == ' ' && pos + 1 < len) {
        int c2 = class_at(s, len, pos + 1, &k);
        if (c2 != CL_SPACE) {
            c = c2;
            start = pos + 1;
        }
    }
    if (c == CL_SPACE) {
        /* \s+(?!\S) leaves the run's last character to the next word; \s+ */
        size_t last = pos;
        j = pos;
        while (j < len) {
            if (class_at(s, len, j, &k) != CL_SPACE)
                break;
            if (j + k > lim)
                return j;
            last = j;
            j += k;
        }
        if (j == len)
            return j;
        return last > pos ? last : j;
    }
    /* ' ?' then a run of one class */
    j = start;
    while (j < len) {
        if (class_at(s, len, j, &k) != c || j + k > lim)
            break;
        j += k;
    }
    return j > pos ? j : pos + 1; /* cannot happen: the first character always fits */
}

uint64_t tok_hash_bytes(const unsigned char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ULL;
    return h;
}

/* ---- building a tokenizer from merges ------------------------------------------------ */

clf_status tok_bpe_build(const int32_t *merges, int32_t n_merges, clf_tokenizer **out,
                         clf_error *err)
{
    clf_status st = CLF_OK;
    clf_tokenizer *t = calloc(1, sizeof *t);
    int32_t V = CLF_BPE_MERGE_FIRST + n_merges;
    *out = NULL;
    if (t == NULL)
        return OOM("creating a tokenizer");
    t->type = CLF_TOKENIZER_BPE;
    t->vocab_size = V;
    t->base = V - CLF_SPECIAL_COUNT;
    for (int i = 0; i < CLF_SPECIAL_COUNT; i++)
        t->special[i] = i;
    for (int i = 0; i < 128; i++)
        t->ascii[i] = -1;
    t->n_merges = n_merges;
    t->off = malloc(((size_t)V + 1) * sizeof *t->off);
    t->merges = malloc(((size_t)n_merges + 1) * 2 * sizeof *t->merges);
    if (t->off == NULL || t->merges == NULL || !tok_pair_map_init(&t->ranks, (size_t)n_merges)) {
        st = OOM("creating a tokenizer");
        goto fail;
    }
    memcpy(t->merges, merges, (size_t)n_merges * 2 * sizeof *merges);
    /* lengths first (checked), then the bytes */
    uint64_t total = 0;
    t->off[0] = 0;
    for (int32_t id = 0; id < V; id++) {
        uint32_t l;
        if (id < CLF_BPE_BYTE_FIRST) {
            l = 0;
        } else if (id < CLF_BPE_MERGE_FIRST) {
            l = 1;
        } else {
            int32_t r = id - CLF_BPE_MERGE_FIRST, a = merges[2 * r], b = merges[2 * r + 1];
            if (a < CLF_BPE_BYTE_FIRST || a >= id || b < CLF_BPE_BYTE_FIRST || b >= id) {
                st = BPE_ERR("merges[%d] = [%d, %d]: a merge joins two text pieces made before it "
                             "(ids in [%d, %d))",
                             (int)r, (int)a, (int)b, CLF_BPE_BYTE_FIRST, (int)id);
                goto fail;
            }
            l = (t->off[a + 1] - t->off[a]) + (t->off[b + 1] - t->off[b]);
            if (l > CLF_BPE_MAX_PIECE) {
                st = BPE_ERR("merges[%d] makes a piece of %u bytes; pieces have at most %d", (int)r,
                             (unsigned)l, CLF_BPE_MAX_PIECE);
                goto fail;
            }
            int32_t prev = tok_pair_map_get(&t->ranks, a, b);
            if (prev >= 0) {
                st = BPE_ERR("merges[%d] = [%d, %d] repeats merges[%d]", (int)r, (int)a, (int)b,
                             (int)prev);
                goto fail;
            }
            if (!tok_pair_map_put(&t->ranks, a, b, r)) {
                st = OOM("creating a tokenizer");
                goto fail;
            }
        }
        total += l;
        t->off[id + 1] = (uint32_t)total;
    }
    t->bytes = malloc((size_t)total + 1);
    if (t->bytes == NULL) {
        st = OOM("creating a tokenizer");
        goto fail;
    }
    for (int32_t id = CLF_BPE_BYTE_FIRST; id < V; id++) {
        char *p = t->bytes + t->off[id];
        if (id < CLF_BPE_MERGE_FIRST) {
            *p = (char)(id - CLF_BPE_BYTE_FIRST);
        } else {
            int32_t r = id - CLF_BPE_MERGE_FIRST, a = merges[2 * r], b = merges[2 * r + 1];
            uint32_t la = t->off[a + 1] - t->off[a];
            memcpy(p, t->bytes + t->off[a], la);
            memcpy(p + la, t->bytes + t->off[b], t->off[b + 1] - t->off[b]);
        }
    }
    *out = t;
    return CLF_OK;
fail:
    clf_tokenizer_destroy(t);
    return st;
}

int32_t clf_tokenizer_bpe_merge_count(const clf_tokenizer *t)
{
    return t->type == CLF_TOKENIZER_BPE ? t->n_merges : 0;
}

int clf_tokenizer_bpe_merge(const clf_tokenizer *t, int32_t r, int32_t *left, int32_t *right)
{
    if (t->type != CLF_TOKENIZER_BPE || r < 0 || r >= t->n_merges)
        return 0;
    *left = t->merges[2 * r];
    *right = t->merges[2 * r + 1];
    return 1;
}

/* ---- encoding --------------------------------------------------------------------- */

/* BPE of one pre-token s[0..n) (1 <= n <= CLF_BPE_MAX_PIECE) into out;
 * returns the number of ids. */
static size_t bpe_word_encode(const clf_tokenizer *t, const unsigned char *s, size_t n,
                              int32_t *out)
{
    int32_t rk[CLF_BPE_MAX_PIECE];
    for (size_t i = 0; i < n; i++)
        out[i] = CLF_BPE_BYTE_FIRST + s[i];
    if (n < 2)
        return n;
    for (size_t i = 0; i + 1 < n; i++) {
        int32_t r = tok_pair_map_get(&t->ranks, out[i], out[i + 1]);
        rk[i] = r < 0 ? INT32_MAX : r;
    }
    while (n > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < n; i++)
            if (rk[i] < rk[best])
                best = i;
        if (rk[best] == INT32_MAX)
            break;
        out[best] = CLF_BPE_MERGE_FIRST + rk[best];
        memmove(out + best + 1, out + best + 2, (n - best - 2) * sizeof *out);
        memmove(rk + best + 1, rk + best + 2, (n - best - 2) * sizeof *rk);
        n--;
        if (best > 0) {
            int32_t r = tok_pair_map_get(&t->ranks, out[best - 1], out[best]);
            rk[best - 1] = r < 0 ? INT32_MAX : r;
        }
        if (best + 1 < n) {
            int32_t r = tok_pair_map_get(&t->ranks, out[best], out[best + 1]);
            rk[best] = r < 0 ? INT32_MAX : r;
        }
    }
    return n;
}

/* A per-call cache of encoded words: open addressing over entries whose
 * bytes point into the text being encoded. */
typedef struct word_cache {
    struct wc_entry {
        const unsigned char *s; /* NULL: free */
        uint32_t len, n;        /* bytes, ids */
        size_t ids;             /* offset into ids */
    } * e;
    size_t cap, used;
    int32_t *ids;
    size_t ids_len, ids_cap;
} word_cache;

#define WORD_CACHE_MIN_TEXT 4096         /* shorter texts are encoded without a cache */
#define WORD_CACHE_MAX ((size_t)1 << 19) /* entries; more words go uncached */

clf_status tok_bpe_encode(const clf_tokenizer *t, const char *text, size_t len, int32_t *ids,
                          size_t cap, size_t *n, clf_error *err)
{
    const unsigned char *s = (const unsigned char *)text;
    int32_t tmp[CLF_BPE_MAX_PIECE];
    word_cache wc;
    size_t k = 0;
    memset(&wc, 0, sizeof wc);
    *n = 0;
    if (len >= WORD_CACHE_MIN_TEXT) {
        wc.cap = 4096;
        wc.e = calloc(wc.cap, sizeof *wc.e);
        wc.ids_cap = 16384;
        wc.ids = malloc(wc.ids_cap * sizeof *wc.ids);
        if (wc.e == NULL || wc.ids == NULL) {
            free(wc.e);
            free(wc.ids);
            memset(&wc, 0, sizeof wc); /* go on without a cache */
        }
    }
    for (size_t pos = 0; pos < len;) {
        size_t end = clf_bpe_pretoken_end(text, len, pos), wl = end - pos, m;
        const int32_t *src = tmp;
        struct wc_entry *slot = NULL;
        if (wl == 1) {
            tmp[0] = CLF_BPE_BYTE_FIRST + s[pos];
            m = 1;
        } else if (wc.cap > 0) {
            uint64_t h = tok_hash_bytes(s + pos, wl);
            size_t mask = wc.cap - 1, i = (size_t)h & mask;
            while (wc.e[i].s != NULL && !(wc.e[i].len == wl && memcmp(wc.e[i].s, s + pos, wl) == 0))
                i = (i + 1) & mask;
            if (wc.e[i].s != NULL) {
                src = wc.ids + wc.e[i].ids;
                m = wc.e[i].n;
            } else {
                m = bpe_word_encode(t, s + pos, wl, tmp);
                slot = &wc.e[i];
            }
        } else {
            m = bpe_word_encode(t, s + pos, wl, tmp);
        }
        if (cap - k < m) {
            free(wc.e);
            free(wc.ids);
            return clf_error_set(err, CLF_ERR_ARG, "encoding needs room for more than %zu ids",
                                 cap);
        }
        memcpy(ids + k, src, m * sizeof *ids);
        k += m;
        if (slot != NULL && wc.used < WORD_CACHE_MAX) {
            /* remember the word; on allocation failure just stop caching */
            if (wc.ids_len + m > wc.ids_cap) {
                size_t nc = wc.ids_cap * 2;
                int32_t *ni = realloc(wc.ids, nc * sizeof *ni);
                if (ni == NULL)
                    goto next;
                wc.ids = ni;
                wc.ids_cap = nc;
            }
            slot->s = s + pos;
            slot->len = (uint32_t)wl;
            slot->n = (uint32_t)m;
            slot->ids = wc.ids_len;
            memcpy(wc.ids + wc.ids_len, tmp, m * sizeof *tmp);
            wc.ids_len += m;
            if (2 * ++wc.used > wc.cap) {
                size_t nc = wc.cap * 2;
                struct wc_entry *ne = calloc(nc, sizeof *ne);
                if (ne == NULL) {
                    wc.used = WORD_CACHE_MAX; /* full: no more inserts */
                    goto next;
                }
                for (size_t i = 0; i < wc.cap; i++) {
                    if (wc.e[i].s == NULL)
                        continue;
                    size_t j = (size_t)tok_hash_bytes(wc.e[i].s, wc.e[i].len) & (nc - 1);
                    while (ne[j].s != NULL)
                        j = (j + 1) & (nc - 1);
                    ne[j] = wc.e[i];
                }
                free(wc.e);
                wc.e = ne;
                wc.cap = nc;
            }
        }
    next:
        pos = end;
    }
    free(wc.e);
    free(wc.ids);
    *n = k;
    return CLF_OK;
}

/* ---- JSON ------------------------------------------------------------------------ */

void tok_bpe_write_json(const clf_tokenizer *t, clf_json_writer *w)
{
    clf_json_key(w, "pre_tokenizer");
    clf_json_string(w, CLF_BPE_PRE_TOKENIZER);
    clf_json_key(w, "vocab");
    clf_json_begin_array(w);
    for (int32_t id = 0; id < t->vocab_size; id++) {
        const unsigned char *p = (const unsigned char *)t->bytes + t->off[id];
        size_t l = t->off[id + 1] - t->off[id];
        if (id < CLF_BPE_BYTE_FIRST) {
            clf_json_null(w);
        } else if (clf_utf8_validate(p, l) == l) {
            clf_json_string_n(w, (const char *)p, l);
        } else {
            clf_json_begin_array(w);
            for (size_t i = 0; i < l; i++)
                clf_json_int(w, p[i]);
            clf_json_end_array(w);
        }
    }
    clf_json_end_array(w);
    clf_json_key(w, "merges");
    clf_json_begin_array(w);
    for (int32_t r = 0; r < t->n_merges; r++) {
        clf_json_begin_array(w);
        clf_json_int(w, t->merges[2 * r]);
        clf_json_int(w, t->merges[2 * r + 1]);
        clf_json_end_array(w);
    }
    clf_json_end_array(w);
}

/* vocab[id] agrees with the piece and is in canonical form. */
static clf_status check_vocab_entry(const clf_tokenizer *t, const clf_json *v, int32_t id,
                                    clf_error *err)
{
    const unsigned char *p = (const unsigned char *)t->bytes + t->off[id];
    size_t l = t->off[id + 1] - t->off[id];
    if (id < CLF_BPE_BYTE_FIRST) {
        if (v->type != CLF_JSON_NULL)
            return BPE_ERR("vocab[%d] must be null: id %d is the special token \"%s\"", (int)id,
                           (int)id, clf_tokenizer_special_name((clf_special_token)id));
        return CLF_OK;
    }
    int utf8 = clf_utf8_validate(p, l) == l;
    if (v->type == CLF_JSON_STRING) {
        if (!utf8 || v->string_len != l || memcmp(v->string, p, l) != 0)
            return BPE_ERR("vocab[%d] is not the piece that the merges make for id %d", (int)id,
                           (int)id);
        return CLF_OK;
    }
    if (v->type == CLF_JSON_ARRAY) {
        if (utf8)
            return BPE_ERR("vocab[%d] is valid UTF-8 and must be written as a string", (int)id);
        if (v->count != l)
            return BPE_ERR("vocab[%d] is not the piece that the merges make for id %d", (int)id,
                           (int)id);
        for (size_t i = 0; i < l; i++) {
            const clf_json *b = &v->items[i];
            if (b->type != CLF_JSON_NUMBER || !b->is_int || b->integer < 0 || b->integer > 255)
                return BPE_ERR("vocab[%d][%zu] must be a byte value 0..255", (int)id, i);
            if (b->integer != p[i])
                return BPE_ERR("vocab[%d] is not the piece that the merges make for id %d", (int)id,
                               (int)id);
        }
        return CLF_OK;
    }
    return BPE_ERR("vocab[%d] must be a string or an array of byte values, found a %s", (int)id,
                   clf_json_type_name(v->type));
}

clf_status tok_bpe_from_json(const clf_json *doc, int32_t vocab_size, clf_tokenizer **out,
                             clf_error *err)
{
    clf_status st = CLF_OK;
    clf_tokenizer *t = NULL;
    int32_t *merges = NULL;
    const clf_json *pre = clf_json_get(doc, "pre_tokenizer"), *voc = clf_json_get(doc, "vocab"),
                   *mer = clf_json_get(doc, "merges");
    *out = NULL;
    if (vocab_size < CLF_BPE_MERGE_FIRST || vocab_size > CLF_BPE_MAX_VOCAB)
        return BPE_ERR("a bpe tokenizer has vocab_size >= %d (6 specials + 256 bytes) and <= %d, "
                       "got %d",
                       CLF_BPE_MERGE_FIRST, CLF_BPE_MAX_VOCAB, (int)vocab_size);
    if (pre == NULL || pre->type != CLF_JSON_STRING)
        return BPE_ERR("a bpe tokenizer needs \"pre_tokenizer\": \"%s\"", CLF_BPE_PRE_TOKENIZER);
    if (strcmp(pre->string, CLF_BPE_PRE_TOKENIZER) != 0)
        return BPE_ERR("unknown pre_tokenizer \"%s\" (this clformer has \"%s\")", pre->string,
                       CLF_BPE_PRE_TOKENIZER);
    int32_t R = vocab_size - CLF_BPE_MERGE_FIRST;
    if (mer == NULL || mer->type != CLF_JSON_ARRAY)
        return BPE_ERR("a bpe tokenizer needs \"merges\", an array of [left, right] id pairs");
    if (mer->count != (size_t)R)
        return BPE_ERR("\"merges\" has %zu entries but vocab_size %d needs %d (vocab_size - %d)",
                       mer->count, (int)vocab_size, (int)R, CLF_BPE_MERGE_FIRST);
    if (voc == NULL || voc->type != CLF_JSON_ARRAY)
        return BPE_ERR("a bpe tokenizer needs \"vocab\", an array of the pieces of every id");
    if (voc->count != (size_t)vocab_size)
        return BPE_ERR("\"vocab\" has %zu entries but vocab_size is %d", voc->count,
                       (int)vocab_size);
    merges = malloc(((size_t)R + 1) * 2 * sizeof *merges);
    if (merges == NULL)
        return OOM("loading a tokenizer");
    for (int32_t r = 0; r < R; r++) {
        const clf_json *m = &mer->items[r];
        if (m->type != CLF_JSON_ARRAY || m->count != 2) {
            st = BPE_ERR("merges[%d] must be an array of two ids", (int)r);
            goto fail;
        }
        for (int k = 0; k < 2; k++) {
            const clf_json *x = &m->items[k];
            if (x->type != CLF_JSON_NUMBER || !x->is_int || x->integer < 0 ||
                x->integer > INT32_MAX) {
                st = BPE_ERR("merges[%d][%d] must be a token id", (int)r, k);
                goto fail;
            }
            merges[2 * r + k] = (int32_t)x->integer;
        }
    }
    st = tok_bpe_build(merges, R, &t, err);
    if (st != CLF_OK)
        goto fail;
    for (int32_t id = 0; id < vocab_size; id++) {
        st = check_vocab_entry(t, &voc->items[id], id, err);
        if (st != CLF_OK)
            goto fail;
    }
    *out = t;
    t = NULL;
fail:
    free(merges);
    clf_tokenizer_destroy(t);
    return st;
}
