/*
 * tokenizer.c - see tokenizer.h: the char and byte kinds, and what every
 * kind shares (pieces, specials, decode, the JSON framing). BPE training,
 * encoding and its JSON members are in text/bpe.c.
 *
 * Pieces are stored as one byte array with an offset table (piece i is
 * bytes[off[i] .. off[i+1])), which fits every kind: 1-4 bytes for char,
 * 1 byte for byte, longer merged pieces for bpe. Specials have empty pieces.
 * The char kind also keeps its code points sorted (ids are in code-point
 * order, so the id is the index) for a binary search, plus a direct table
 * for ASCII, the common case.
 */
#include "model/text/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/io/json.h"
#include "model/text/tokenizer_internal.h"

static const char *const special_names[CLF_SPECIAL_COUNT] = {"pad", "bos", "eos",
                                                             "unk", "cls", "sep"};

const char *clf_tokenizer_special_name(clf_special_token which)
{
    return (unsigned)which < CLF_SPECIAL_COUNT ? special_names[which] : "?";
}

static const char *type_name(clf_tokenizer_type t)
{
    switch (t) {
        case CLF_TOKENIZER_CHAR: return "char";
        case CLF_TOKENIZER_BYTE: return "byte";
        case CLF_TOKENIZER_BPE: return "bpe";
        case CLF_TOKENIZER_WORDPIECE: return "wordpiece";
    }
    return "?";
}

void clf_tokenizer_destroy(clf_tokenizer *t)
{
    if (t == NULL)
        return;
    free(t->bytes);
    free(t->off);
    free(t->cps);
    free(t->merges);
    tok_pair_map_free(&t->ranks);
    tok_wp_free(t->wp);
    free(t->ext);
    free(t->intl);
    free(t);
}

/* Allocate a tokenizer with base pieces and no specials yet: off/bytes sized
 * for base pieces of at most max_piece bytes each. */
static clf_tokenizer *alloc_tok(clf_tokenizer_type type, int32_t base, size_t max_piece)
{
    clf_tokenizer *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->type = type;
    t->base = base;
    t->vocab_size = base;
    for (int i = 0; i < CLF_SPECIAL_COUNT; i++)
        t->special[i] = -1;
    for (int i = 0; i < 128; i++)
        t->ascii[i] = -1;
    t->off = calloc((size_t)base + 1 + CLF_SPECIAL_COUNT, sizeof *t->off);
    t->bytes = malloc((size_t)base * max_piece + 1);
    if (t->off == NULL || t->bytes == NULL) {
        clf_tokenizer_destroy(t);
        return NULL;
    }
    return t;
}

static clf_status make_byte(clf_tokenizer **out, clf_error *err)
{
    clf_tokenizer *t = alloc_tok(CLF_TOKENIZER_BYTE, 256, 1);
    if (t == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory creating a tokenizer");
    for (int i = 0; i < 256; i++) {
        t->bytes[i] = (char)i;
        t->off[i + 1] = (uint32_t)(i + 1);
    }
    *out = t;
    return CLF_OK;
}

/* A char tokenizer over the given ascending code points. */
static clf_status make_char(const uint32_t *cps, int32_t n, clf_tokenizer **out, clf_error *err)
{
    clf_tokenizer *t = alloc_tok(CLF_TOKENIZER_CHAR, n, 4);
    if (t == NULL || (t->cps = malloc((size_t)n * sizeof *t->cps)) == NULL) {
        clf_tokenizer_destroy(t);
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory creating a tokenizer");
    }
    uint32_t pos = 0;
    for (int32_t i = 0; i < n; i++) {
        t->cps[i] = cps[i];
        if (cps[i] < 128)
            t->ascii[cps[i]] = i;
        pos += (uint32_t)clf_utf8_encode(cps[i], (unsigned char *)t->bytes + pos);
        t->off[i + 1] = pos;
    }
    *out = t;
    return CLF_OK;
}

static void describe_cp(uint32_t cp, char *buf, size_t cap)
{
    unsigned char u[5] = {0};
    if (cp >= 0x20 && cp != 0x7F && (cp < 0x80 || cp >= 0xA0) && clf_utf8_encode(cp, u) > 0)
        snprintf(buf, cap, "U+%04X '%s'", (unsigned)cp, (const char *)u);
    else
        snprintf(buf, cap, "U+%04X", (unsigned)cp);
}

static clf_status build_char(const char *text, size_t len, clf_tokenizer **out, clf_error *err)
{
    clf_status st = CLF_OK;
    const unsigned char *s = (const unsigned char *)text;
    unsigned char *seen = NULL;
    uint32_t *cps = NULL;
    int32_t n = 0;

    if (text == NULL || len == 0)
        return clf_error_set(err, CLF_ERR_ARG,
                             "cannot build a character vocabulary from empty "
                             "text");
    seen = calloc(0x110000 / 8, 1);
    if (seen == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory building a tokenizer");
        goto fail;
    }
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = clf_utf8_decode(s + i, len - i, &cp);
        if (k == 0) {
            st = clf_error_set(err, CLF_ERR_FORMAT,
                               "invalid UTF-8 at byte %zu (byte 0x%02X): a "
                               "char tokenizer needs UTF-8 text (use the "
                               "byte tokenizer for other data)",
                               i, s[i]);
            goto fail;
        }
        if (!(seen[cp >> 3] & (1u << (cp & 7)))) {
            seen[cp >> 3] |= (unsigned char)(1u << (cp & 7));
            n++;
        }
        i += (size_t)k;
    }
    cps = malloc((size_t)n * sizeof *cps);
    if (cps == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory building a tokenizer");
        goto fail;
    }
    int32_t k = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++)
        if (seen[cp >> 3] & (1u << (cp & 7)))
            cps[k++] = cp;
    st = make_char(cps, n, out, err);
fail:
    free(seen);
    free(cps);
    return st;
}

clf_status clf_tokenizer_create(clf_tokenizer_type type, const char *text, size_t len,
                                clf_tokenizer **out, clf_error *err)
{
    *out = NULL;
    switch (type) {
        case CLF_TOKENIZER_CHAR: return build_char(text, len, out, err);
        case CLF_TOKENIZER_BYTE: return make_byte(out, err);
        case CLF_TOKENIZER_BPE:
            return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                                 "the bpe tokenizer is not built by "
                                 "clf_tokenizer_create: train one with "
                                 "clf_tokenizer_train_bpe");
        case CLF_TOKENIZER_WORDPIECE:
            return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                                 "a wordpiece tokenizer comes from a pretrained model "
                                 "(clf_tokenizer_from_hf, clformer import)");
    }
    return clf_error_set(err, CLF_ERR_ARG, "unknown tokenizer type %d", (int)type);
}

clf_tokenizer_type clf_tokenizer_type_of(const clf_tokenizer *t) { return t->type; }
int32_t clf_tokenizer_vocab_size(const clf_tokenizer *t)
{
    return t->ext != NULL ? t->ext_size : t->vocab_size;
}
int32_t clf_tokenizer_base_size(const clf_tokenizer *t) { return t->base; }

int32_t clf_tokenizer_special(const clf_tokenizer *t, clf_special_token which)
{
    if ((unsigned)which >= CLF_SPECIAL_COUNT || t->special[which] < 0)
        return -1;
    return t->ext != NULL ? t->ext[t->special[which]] : t->special[which];
}

int clf_tokenizer_special_of(const clf_tokenizer *t, int32_t id)
{
    id = tok_internal(t, id);
    if (id < 0)
        return -1;
    for (int i = 0; i < CLF_SPECIAL_COUNT; i++)
        if (t->special[i] == id)
            return i;
    return -1;
}

clf_status tok_set_ids(clf_tokenizer *t, const int32_t *ext, int32_t ext_size, clf_error *err)
{
    int32_t *e = malloc((size_t)t->vocab_size * sizeof *e);
    int32_t *in = malloc(((size_t)ext_size + 1) * sizeof *in);
    if (e == NULL || in == NULL) {
        free(e);
        free(in);
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory loading a tokenizer");
    }
    for (int32_t i = 0; i < ext_size; i++)
        in[i] = -1;
    for (int32_t i = 0; i < t->vocab_size; i++) {
        e[i] = ext[i];
        if (ext[i] < -1 || ext[i] >= ext_size) {
            free(e);
            free(in);
            return clf_error_set_at(err, CLF_ERR_FORMAT, "tokenizer",
                                    "model id %d of piece %d is outside [0, %d)", (int)ext[i],
                                    (int)i, (int)ext_size);
        }
        if (ext[i] >= 0 && in[ext[i]] < 0)
            in[ext[i]] = i;
        else if (ext[i] >= 0 && i >= CLF_BPE_BYTE_FIRST) { /* two pieces, one id */
            int32_t other = in[ext[i]];
            free(e);
            free(in);
            return clf_error_set_at(err, CLF_ERR_FORMAT, "tokenizer",
                                    "pieces %d and %d share the model id %d", (int)other, (int)i,
                                    (int)ext[i]);
        }
    }
    free(t->ext);
    free(t->intl);
    t->ext = e;
    t->intl = in;
    t->ext_size = ext_size;
    return CLF_OK;
}

clf_status clf_tokenizer_add_special(clf_tokenizer *t, clf_special_token which, int32_t *id,
                                     clf_error *err)
{
    if ((unsigned)which >= CLF_SPECIAL_COUNT)
        return clf_error_set(err, CLF_ERR_ARG, "unknown special token %d", (int)which);
    if (t->ext != NULL && (t->special[which] < 0 || t->ext[t->special[which]] < 0))
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "the tokenizer of this pretrained model has no %s token, and its "
                             "vocabulary cannot grow one",
                             special_names[which]);
    if (t->special[which] < 0 && t->type == CLF_TOKENIZER_WORDPIECE)
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "the wordpiece tokenizer has no %s token, and a pretrained "
                             "vocabulary cannot grow one",
                             special_names[which]);
    if (t->special[which] < 0) {
        /* off has room for base + CLF_SPECIAL_COUNT + 1 entries */
        t->special[which] = t->vocab_size;
        t->off[t->vocab_size + 1] = t->off[t->vocab_size];
        t->vocab_size++;
    }
    if (id != NULL)
        *id = clf_tokenizer_special(t, which);
    return CLF_OK;
}

/* The id of code point cp in a char tokenizer, -1 if absent. */
static int32_t char_id(const clf_tokenizer *t, uint32_t cp)
{
    if (cp < 128)
        return t->ascii[cp];
    int32_t lo = 0, hi = t->base;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (t->cps[mid] == cp)
            return mid;
        if (t->cps[mid] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

clf_status clf_tokenizer_encode_into(const clf_tokenizer *t, const char *text, size_t len,
                                     int32_t *ids, size_t cap, size_t *n, clf_error *err)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t k = 0;
    *n = 0;
    if (t->type == CLF_TOKENIZER_BYTE) {
        if (cap < len)
            return clf_error_set(err, CLF_ERR_ARG,
                                 "encoding %zu bytes needs room for %zu ids, "
                                 "got %zu",
                                 len, len, cap);
        for (size_t i = 0; i < len; i++)
            ids[i] = s[i];
        *n = len;
        return CLF_OK;
    }
    if (t->type == CLF_TOKENIZER_BPE) {
        clf_status st = tok_bpe_encode(t, text, len, ids, cap, n, err);
        for (size_t i = 0; st == CLF_OK && t->ext != NULL && i < *n; i++)
            ids[i] = t->ext[ids[i]]; /* every byte and merge has a model id */
        return st;
    }
    if (t->type == CLF_TOKENIZER_WORDPIECE) {
        int32_t *w = NULL;
        size_t nw = 0;
        clf_status st = tok_wp_encode(t, text, len, &w, &nw, err);
        if (st == CLF_OK && nw > cap)
            st = clf_error_set(err, CLF_ERR_ARG, "encoding needs room for %zu ids, got %zu", nw,
                               cap);
        if (st == CLF_OK) {
            memcpy(ids, w, nw * sizeof *ids);
            *n = nw;
        }
        free(w);
        return st;
    }
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int b = clf_utf8_decode(s + i, len - i, &cp);
        if (b == 0)
            return clf_error_set(err, CLF_ERR_FORMAT, "invalid UTF-8 at byte %zu (byte 0x%02X)", i,
                                 s[i]);
        int32_t id = char_id(t, cp);
        if (id < 0) {
            id = t->special[CLF_SPECIAL_UNK];
            if (id < 0) {
                char d[32];
                describe_cp(cp, d, sizeof d);
                return clf_error_set(err, CLF_ERR_ARG,
                                     "character %s at byte %zu is not in the "
                                     "tokenizer's vocabulary (%d characters, "
                                     "no unk token)",
                                     d, i, (int)t->base);
            }
        }
        if (k == cap)
            return clf_error_set(err, CLF_ERR_ARG, "encoding needs room for more than %zu ids",
                                 cap);
        ids[k++] = id;
        i += (size_t)b;
    }
    *n = k;
    return CLF_OK;
}

clf_status clf_tokenizer_encode(const clf_tokenizer *t, const char *text, size_t len, int32_t **ids,
                                size_t *n, clf_error *err)
{
    *ids = NULL;
    *n = 0;
    if (t->type == CLF_TOKENIZER_WORDPIECE) /* lowercasing may lengthen the text */
        return tok_wp_encode(t, text, len, ids, n, err);
    int32_t *buf = malloc((len ? len : 1) * sizeof *buf);
    if (buf == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory encoding %zu bytes of text", len);
    clf_status st = clf_tokenizer_encode_into(t, text, len, buf, len, n, err);
    if (st != CLF_OK) {
        free(buf);
        return st;
    }
    *ids = buf;
    return CLF_OK;
}

int clf_tokenizer_piece(const clf_tokenizer *t, int32_t id, const char **bytes, size_t *len)
{
    id = tok_internal(t, id);
    if (id < 0)
        return 0;
    *bytes = t->bytes + t->off[id];
    *len = t->off[id + 1] - t->off[id];
    return 1;
}

clf_status clf_tokenizer_decode(const clf_tokenizer *t, const int32_t *ids, size_t n, char **text,
                                size_t *len, clf_error *err)
{
    return clf_tokenizer_decode_ex(t, ids, n, 0, text, len, err);
}

/* The text of token id: its piece, or "<name>" for a special when shown. */
static const char *token_text(const clf_tokenizer *t, int32_t id, unsigned flags, char *buf,
                              size_t *l)
{
    if (flags & CLF_DECODE_SPECIALS) {
        int sp = clf_tokenizer_special_of(t, id);
        if (sp >= 0) {
            *l = (size_t)snprintf(buf, 8, "<%s>", special_names[sp]);
            return buf;
        }
    }
    id = tok_internal(t, id);
    if (id < 0) { /* a model id that no piece has: nothing */
        *l = 0;
        return "";
    }
    *l = t->off[id + 1] - t->off[id];
    return t->bytes + t->off[id];
}

clf_status clf_tokenizer_decode_ex(const clf_tokenizer *t, const int32_t *ids, size_t n,
                                   unsigned flags, char **text, size_t *len, clf_error *err)
{
    char buf[8];
    size_t l;
    *text = NULL;
    if (len != NULL)
        *len = 0;
    if (t->type == CLF_TOKENIZER_WORDPIECE)
        return tok_wp_decode(t, ids, n, flags, text, len, err);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= clf_tokenizer_vocab_size(t))
            return clf_error_set(err, CLF_ERR_ARG,
                                 "token id %d at position %zu is outside the "
                                 "vocabulary (%d tokens)",
                                 (int)ids[i], i, (int)clf_tokenizer_vocab_size(t));
        token_text(t, ids[i], flags, buf, &l);
        total += l;
    }
    char *out = malloc(total + 1);
    if (out == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory decoding %zu tokens", n);
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = token_text(t, ids[i], flags, buf, &l);
        memcpy(out + pos, p, l);
        pos += l;
    }
    out[pos] = '\0';
    *text = out;
    if (len != NULL)
        *len = pos;
    return CLF_OK;
}

/* ---- JSON ------------------------------------------------------------------ */

clf_status clf_tokenizer_to_json(const clf_tokenizer *t, char **json, size_t *len, clf_error *err)
{
    clf_json_writer w;
    clf_json_writer_init(&w);
    clf_json_begin_object(&w);
    clf_json_key(&w, "format");
    clf_json_string(&w, CLF_TOKENIZER_FORMAT);
    clf_json_key(&w, "version");
    clf_json_int(&w, CLF_TOKENIZER_VERSION);
    clf_json_key(&w, "type");
    clf_json_string(&w, type_name(t->type));
    clf_json_key(&w, "vocab_size");
    clf_json_int(&w, t->vocab_size);
    if (t->type == CLF_TOKENIZER_CHAR) {
        clf_json_key(&w, "vocab");
        clf_json_begin_array(&w);
        for (int32_t i = 0; i < t->base; i++)
            clf_json_string_n(&w, t->bytes + t->off[i], t->off[i + 1] - t->off[i]);
        clf_json_end_array(&w);
    } else if (t->type == CLF_TOKENIZER_BPE) {
        tok_bpe_write_json(t, &w);
        if (t->ext != NULL) { /* a pretrained model's numbering */
            clf_json_key(&w, "model_ids");
            clf_json_begin_object(&w);
            clf_json_key(&w, "size");
            clf_json_int(&w, t->ext_size);
            clf_json_key(&w, "ids");
            clf_json_begin_array(&w);
            for (int32_t i = 0; i < t->vocab_size; i++)
                clf_json_int(&w, t->ext[i]);
            clf_json_end_array(&w);
            clf_json_end_object(&w);
        }
    } else if (t->type == CLF_TOKENIZER_WORDPIECE) {
        tok_wp_write_json(t, &w);
    }
    clf_json_key(&w, "specials");
    clf_json_begin_object(&w);
    for (int i = 0; i < CLF_SPECIAL_COUNT; i++) {
        clf_json_key(&w, special_names[i]);
        clf_json_int(&w, t->special[i]);
    }
    clf_json_end_object(&w);
    clf_json_end_object(&w);
    clf_status st = clf_json_writer_finish(&w, json, len, err);
    if (st != CLF_OK)
        clf_error_prefix(err, "serializing the tokenizer");
    return st;
}

#define TOK_ERR(...) clf_error_set_at(err, CLF_ERR_FORMAT, "tokenizer", __VA_ARGS__)

static clf_status load_specials(const clf_json *sp, int32_t *special, clf_error *err)
{
    if (sp->type != CLF_JSON_OBJECT)
        return TOK_ERR("\"specials\" must be an object of ids");
    for (size_t i = 0; i < sp->count; i++) {
        const clf_json *m = &sp->items[i];
        int which = -1;
        for (int k = 0; k < CLF_SPECIAL_COUNT; k++)
            if (strcmp(m->key, special_names[k]) == 0)
                which = k;
        if (which < 0)
            return TOK_ERR("unknown special token \"%s\" (expected pad, bos, eos, unk, cls, sep)",
                           m->key);
        if (m->type != CLF_JSON_NUMBER || !m->is_int || m->integer < -1 || m->integer > INT32_MAX)
            return TOK_ERR("special token \"%s\" must be an id or -1", m->key);
        special[which] = (int32_t)m->integer;
    }
    return CLF_OK;
}

/* The document's keys and its format, version, type and vocab_size. */
static clf_status check_header(const clf_json *doc, clf_error *err)
{
    static const char *const keys[] = {"format",        "version", "type",      "vocab_size",
                                       "specials",      "vocab",   "wordpiece", "model_ids",
                                       "pre_tokenizer", "merges"};
    if (doc->type != CLF_JSON_OBJECT)
        return TOK_ERR("expected a JSON object, found a JSON %s", clf_json_type_name(doc->type));
    for (size_t i = 0; i < doc->count; i++) {
        int known = 0;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            known |= strcmp(doc->items[i].key, keys[k]) == 0;
        if (!known)
            return TOK_ERR("unknown key \"%s\" (expected format, version, type, vocab_size, "
                           "vocab, specials; bpe: pre_tokenizer, merges; wordpiece: wordpiece)",
                           doc->items[i].key);
    }
    const clf_json *fmt = clf_json_get(doc, "format"), *ver = clf_json_get(doc, "version"),
                   *typ = clf_json_get(doc, "type"), *vs = clf_json_get(doc, "vocab_size");
    if (fmt == NULL || fmt->type != CLF_JSON_STRING || strcmp(fmt->string, CLF_TOKENIZER_FORMAT))
        return TOK_ERR("\"format\" must be \"%s\": not a clformer tokenizer", CLF_TOKENIZER_FORMAT);
    if (ver == NULL || !ver->is_int || ver->integer < 1)
        return TOK_ERR("\"version\" must be a positive integer");
    if (ver->integer > CLF_TOKENIZER_VERSION)
        return TOK_ERR("version %lld was written by a newer clformer (this one reads version %d)",
                       (long long)ver->integer, CLF_TOKENIZER_VERSION);
    if (typ == NULL || typ->type != CLF_JSON_STRING)
        return TOK_ERR("\"type\" must be a string (char, byte, bpe or wordpiece)");
    if (vs == NULL || !vs->is_int || vs->integer < 1 || vs->integer > INT32_MAX)
        return TOK_ERR("\"vocab_size\" must be a positive integer");
    if ((strcmp(typ->string, "char") == 0 || strcmp(typ->string, "byte") == 0) &&
        (clf_json_get(doc, "merges") != NULL || clf_json_get(doc, "pre_tokenizer") != NULL))
        return TOK_ERR("a %s tokenizer has no \"%s\" (only bpe does)", typ->string,
                       clf_json_get(doc, "merges") != NULL ? "merges" : "pre_tokenizer");
    return CLF_OK;
}

/* A char tokenizer from "vocab": one-character strings in increasing
 * code-point order. */
static clf_status char_from_json(const clf_json *voc, clf_tokenizer **t, clf_error *err)
{
    if (voc == NULL || voc->type != CLF_JSON_ARRAY || voc->count == 0 || voc->count > 0x110000)
        return TOK_ERR("a char tokenizer needs \"vocab\", a non-empty array of characters");
    uint32_t *cps = malloc(voc->count * sizeof *cps);
    if (cps == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory loading a tokenizer");
    clf_status st = CLF_OK;
    for (size_t i = 0; i < voc->count && st == CLF_OK; i++) {
        const clf_json *c = &voc->items[i];
        uint32_t cp = 0;
        if (c->type != CLF_JSON_STRING || c->string_len == 0 ||
            clf_utf8_decode((const unsigned char *)c->string, c->string_len, &cp) !=
                (int)c->string_len)
            st = TOK_ERR("vocab[%zu] must be a string of exactly one character", i);
        else if (i > 0 && cp <= cps[i - 1])
            st = TOK_ERR("vocab[%zu] (U+%04X) is not after vocab[%zu] (U+%04X): the vocabulary "
                         "must be in increasing code-point order",
                         i, (unsigned)cp, i - 1, (unsigned)cps[i - 1]);
        cps[i] = cp;
    }
    if (st == CLF_OK)
        st = make_char(cps, (int32_t)voc->count, t, err);
    free(cps);
    return st;
}

/* A char or byte tokenizer's specials must fill [base, vocab_size) exactly,
 * each id once; then they are set on t. */
static clf_status place_specials(clf_tokenizer *t, const int32_t *special, int64_t vocab_size,
                                 clf_error *err)
{
    int nspec = 0;
    for (int i = 0; i < CLF_SPECIAL_COUNT; i++) {
        if (special[i] < 0)
            continue;
        nspec++;
        if (special[i] < t->base || special[i] >= vocab_size)
            return TOK_ERR("special token \"%s\" has id %d, outside [%d, %lld): specials follow "
                           "the %d text tokens",
                           special_names[i], (int)special[i], (int)t->base, (long long)vocab_size,
                           (int)t->base);
        for (int j = 0; j < i; j++)
            if (special[j] == special[i])
                return TOK_ERR("special tokens \"%s\" and \"%s\" share id %d", special_names[j],
                               special_names[i], (int)special[i]);
    }
    if (vocab_size != (int64_t)t->base + nspec)
        return TOK_ERR("vocab_size is %lld but the tokenizer has %d text tokens and %d special "
                       "tokens",
                       (long long)vocab_size, (int)t->base, nspec);
    for (int i = 0; i < CLF_SPECIAL_COUNT; i++)
        t->special[i] = special[i];
    t->vocab_size = (int32_t)vocab_size;
    for (int32_t id = t->base; id < t->vocab_size; id++)
        t->off[id + 1] = t->off[id];
    return CLF_OK;
}

clf_status clf_tokenizer_from_json(const char *json, size_t len, clf_tokenizer **out,
                                   clf_error *err)
{
    clf_json *doc = NULL;
    clf_tokenizer *t = NULL;
    int32_t special[CLF_SPECIAL_COUNT];
    for (int i = 0; i < CLF_SPECIAL_COUNT; i++)
        special[i] = -1;
    *out = NULL;
    clf_json_options jo = {"tokenizer", 0, 0};
    clf_status st = clf_json_parse(json, len, &jo, &doc, err);
    if (st != CLF_OK || (st = check_header(doc, err)) != CLF_OK)
        goto done;
    const clf_json *typ = clf_json_get(doc, "type"), *vs = clf_json_get(doc, "vocab_size"),
                   *voc = clf_json_get(doc, "vocab"), *sp = clf_json_get(doc, "specials");
    if (sp != NULL && (st = load_specials(sp, special, err)) != CLF_OK)
        goto done;
    if (strcmp(typ->string, "byte") == 0) {
        st = voc != NULL ? TOK_ERR("a byte tokenizer has no \"vocab\"") : make_byte(&t, err);
        if (st == CLF_OK)
            st = place_specials(t, special, vs->integer, err);
    } else if (strcmp(typ->string, "char") == 0) {
        st = char_from_json(voc, &t, err);
        if (st == CLF_OK)
            st = place_specials(t, special, vs->integer, err);
    } else if (strcmp(typ->string, "bpe") == 0) {
        st = tok_bpe_from_json(doc, (int32_t)vs->integer, &t, err);
        /* all six specials, at their fixed ids 0..5 */
        for (int i = 0; i < CLF_SPECIAL_COUNT && st == CLF_OK; i++)
            if (special[i] != i)
                st = TOK_ERR("a bpe tokenizer has special token \"%s\" at id %d, found %d",
                             special_names[i], i, (int)special[i]);
        const clf_json *mi = clf_json_get(doc, "model_ids");
        if (st == CLF_OK && mi != NULL) {
            const clf_json *sz = clf_json_get(mi, "size"), *ids = clf_json_get(mi, "ids");
            if (sz == NULL || !sz->is_int || sz->integer < 1 || sz->integer > CLF_BPE_MAX_VOCAB ||
                ids == NULL || ids->type != CLF_JSON_ARRAY || ids->count != (size_t)t->vocab_size) {
                st = TOK_ERR("\"model_ids\" must be {\"size\": N, \"ids\": [one per piece]}");
            } else {
                int32_t *e = malloc(ids->count * sizeof *e);
                if (e == NULL)
                    st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory loading a tokenizer");
                for (size_t i = 0; e != NULL && i < ids->count && st == CLF_OK; i++) {
                    if (!ids->items[i].is_int || ids->items[i].integer < -1 ||
                        ids->items[i].integer >= sz->integer)
                        st = TOK_ERR("model_ids.ids[%zu] must be -1 or an id below %lld", i,
                                     (long long)sz->integer);
                    else
                        e[i] = (int32_t)ids->items[i].integer;
                }
                if (st == CLF_OK)
                    st = tok_set_ids(t, e, (int32_t)sz->integer, err);
                free(e);
            }
        }
    } else if (strcmp(typ->string, "wordpiece") == 0) {
        st = tok_wp_from_json(doc, (int32_t)vs->integer, special, &t, err);
    } else {
        st = TOK_ERR("unknown type \"%s\" (expected char, byte, bpe or wordpiece)", typ->string);
    }
    if (st == CLF_OK) {
        *out = t;
        t = NULL;
    }
done:
    clf_json_destroy(doc);
    clf_tokenizer_destroy(t);
    return st;
}
