/*
 * gpt2.c - GPT-2's byte-level BPE vocabulary (vocab.json + merges.txt, or a
 * tokenizer.json with a BPE model) as a clformer bpe tokenizer with the
 * model's numbering, and back (tokenizer.h).
 *
 * GPT-2 writes each byte as one printable character (its bytes_to_unicode:
 * the printable Latin-1 bytes stand for themselves, the other 68 bytes
 * become U+0100 ...). A piece is the string of its bytes' characters;
 * merges.txt lists the merges by rank, "left right" per line after a
 * "#version" line. clformer's bpe tokenizer is the same algorithm with its
 * own numbering (6 specials, the 256 bytes, then one id per merge), so
 * the import builds that tokenizer from the merges (each side found by its
 * bytes) and attaches the model's id of every piece (tok_set_ids): the API
 * then speaks the model's ids. <|endoftext|> is the eos and the bos (as in
 * GPT-2); clformer's own names <|pad|>, <|bos|>, <|unk|>, <|cls|>, <|sep|>
 * (written by the export) are the other specials. Where the numbering
 * turns out to be clformer's own, no map is kept (an exported clformer
 * model comes back exactly as it was).
 *
 * Not here: tokenizers whose pieces are not byte-level (SentencePiece),
 * added tokens matched in text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/text/tokenizer_internal.h"

#define G2_ERR(...) clf_error_set_at(err, CLF_ERR_FORMAT, name, __VA_ARGS__)

/* GPT-2's byte <-> character table. */
static void byte_chars(uint32_t cp_of[256])
{
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        cp_of[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
    }
}

/* A piece written as GPT-2 characters into bytes; -1 if a character is
 * not one of the 256. */
static int chars_to_bytes(const char *s, size_t n, const int16_t *byte_of, unsigned char *out,
                          size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = clf_utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (l == 0 || cp >= 512 || byte_of[cp] < 0 || k == cap)
            return -1;
        out[k++] = (unsigned char)byte_of[cp];
        i += (size_t)l;
    }
    return (int)k;
}

static const char *const special_text[CLF_SPECIAL_COUNT] = {"<|pad|>", "<|bos|>", "<|endoftext|>",
                                                            "<|unk|>", "<|cls|>", "<|sep|>"};

/* A hash from piece bytes to an internal id, over the pieces made so far. */
typedef struct piece_index {
    int32_t *slots;
    size_t cap;
} piece_index;

static int32_t index_find(const piece_index *ix, const clf_tokenizer *t, const unsigned char *s,
                          size_t n)
{
    size_t i = (size_t)tok_hash_bytes(s, n) & (ix->cap - 1);
    for (;; i = (i + 1) & (ix->cap - 1)) {
        int32_t id = ix->slots[i];
        if (id < 0)
            return -1;
        if (t->off[id + 1] - t->off[id] == n && memcmp(t->bytes + t->off[id], s, n) == 0)
            return id;
    }
}

static void index_put(piece_index *ix, const unsigned char *s, size_t n, int32_t id)
{
    size_t i = (size_t)tok_hash_bytes(s, n) & (ix->cap - 1);
    while (ix->slots[i] >= 0)
        i = (i + 1) & (ix->cap - 1);
    ix->slots[i] = id;
}

/* The merges as (left, right) strings, in rank order, pointing into the
 * JSON document or into txt (a copy of merges.txt, cut into lines). */
typedef struct merge_list {
    const char **ls, **rs;
    size_t *ll, *rl;
    size_t n;
    char *txt;
} merge_list;

static void merges_free(merge_list *ml)
{
    free(ml->ls);
    free(ml->rs);
    free(ml->ll);
    free(ml->rl);
    free(ml->txt);
}

static void merge_set(merge_list *ml, const char *l, size_t ln, const char *r, size_t rn)
{
    ml->ls[ml->n] = l;
    ml->ll[ml->n] = ln;
    ml->rs[ml->n] = r;
    ml->rl[ml->n] = rn;
    ml->n++;
}

/* model.merges: strings "left right" or pairs [left, right]. */
static clf_status merges_from_json(const clf_json *arr, const char *name, merge_list *ml,
                                   clf_error *err)
{
    for (size_t r = 0; r < arr->count; r++) {
        const clf_json *m = &arr->items[r];
        if (m->type == CLF_JSON_STRING) {
            const char *sp = memchr(m->string, ' ', m->string_len);
            if (sp == NULL || sp == m->string || sp + 1 == m->string + m->string_len)
                return G2_ERR("model.merges[%zu] \"%s\" is not \"left right\"", r, m->string);
            const size_t ln = (size_t)(sp - m->string);
            merge_set(ml, m->string, ln, sp + 1, m->string_len - ln - 1);
        } else if (m->type == CLF_JSON_ARRAY && m->count == 2 &&
                   m->items[0].type == CLF_JSON_STRING && m->items[1].type == CLF_JSON_STRING) {
            merge_set(ml, m->items[0].string, m->items[0].string_len, m->items[1].string,
                      m->items[1].string_len);
        } else {
            return G2_ERR("model.merges[%zu] must be \"left right\" or [left, right]", r);
        }
    }
    return CLF_OK;
}

/* merges.txt: "left right" per line, after an optional "#version" line. */
static clf_status merges_from_text(const char *name, merge_list *ml, clf_error *err)
{
    char *line = ml->txt;
    int lineno = 0;
    while (line != NULL && *line != '\0') {
        char *nl = strchr(line, '\n');
        if (nl != NULL)
            *nl = '\0';
        lineno++;
        size_t n = strlen(line);
        if (n > 0 && line[n - 1] == '\r')
            line[--n] = '\0';
        if (n > 0 && !(lineno == 1 && strncmp(line, "#version", 8) == 0)) {
            char *sp = strchr(line, ' ');
            if (sp == NULL || sp == line || sp[1] == '\0' || strchr(sp + 1, ' ') != NULL)
                return G2_ERR("line %d: expected \"left right\"", lineno);
            const size_t ln = (size_t)(sp - line);
            merge_set(ml, line, ln, sp + 1, n - ln - 1);
        }
        line = nl != NULL ? nl + 1 : NULL;
    }
    return CLF_OK;
}

/* The merges from model.merges (merge_arr) or merges.txt's text. */
static clf_status merges_read(const clf_json *merge_arr, const char *merge_txt, size_t merge_len,
                              const char *name, merge_list *ml, clf_error *err)
{
    size_t cap = 0;
    memset(ml, 0, sizeof *ml);
    if (merge_arr == NULL && merge_txt == NULL)
        return G2_ERR("no merges: a BPE model needs model.merges (or merges.txt)");
    if (merge_arr != NULL) {
        if (merge_arr->type != CLF_JSON_ARRAY)
            return G2_ERR("model.merges must be an array");
        cap = merge_arr->count + 1;
    } else {
        if ((ml->txt = malloc(merge_len + 1)) == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "out of memory importing a tokenizer");
        if (merge_len > 0)
            memcpy(ml->txt, merge_txt, merge_len);
        ml->txt[merge_len] = '\0';
        for (size_t i = 0; i < merge_len; i++)
            cap += ml->txt[i] == '\n';
        cap += 2;
    }
    ml->ls = malloc(cap * sizeof *ml->ls);
    ml->rs = malloc(cap * sizeof *ml->rs);
    ml->ll = malloc(cap * sizeof *ml->ll);
    ml->rl = malloc(cap * sizeof *ml->rl);
    if (ml->ls == NULL || ml->rs == NULL || ml->ll == NULL || ml->rl == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory importing a tokenizer");
    return merge_arr != NULL ? merges_from_json(merge_arr, name, ml, err)
                             : merges_from_text(name, ml, err);
}

/* The pieces merges make, in one growing buffer, indexed by their bytes
 * (single bytes need no index). */
typedef struct merged {
    unsigned char *bytes;
    size_t total, cap;
    size_t *off, *len; /* [merge] */
    piece_index ix;
} merged;

/* The internal id of the piece s[0, n) among the bytes and the pieces of
 * merges so far; -1 if none. */
static int32_t merged_find(const merged *mg, const unsigned char *s, size_t n)
{
    if (n == 1)
        return CLF_BPE_BYTE_FIRST + s[0];
    for (size_t i = (size_t)tok_hash_bytes(s, n) & (mg->ix.cap - 1);;
         i = (i + 1) & (mg->ix.cap - 1)) {
        int32_t id = mg->ix.slots[i];
        if (id < 0)
            return -1;
        if (id >= CLF_BPE_MERGE_FIRST) {
            size_t q = (size_t)(id - CLF_BPE_MERGE_FIRST);
            if (mg->len[q] == n && memcmp(mg->bytes + mg->off[q], s, n) == 0)
                return id;
        }
    }
}

/* Merge r makes the piece a + b: stored and indexed. */
static clf_status merged_add(merged *mg, size_t r, const unsigned char *a, size_t na,
                             const unsigned char *b, size_t nb, clf_error *err)
{
    if (mg->total + na + nb > mg->cap) {
        unsigned char *np = realloc(mg->bytes, 2 * mg->cap + na + nb);
        if (np == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "out of memory importing a tokenizer");
        mg->bytes = np;
        mg->cap = 2 * mg->cap + na + nb;
    }
    memcpy(mg->bytes + mg->total, a, na);
    memcpy(mg->bytes + mg->total + na, b, nb);
    mg->off[r] = mg->total;
    mg->len[r] = na + nb;
    mg->total += na + nb;
    /* a piece made twice would be one id for two merges: GPT-2 never does */
    size_t i = (size_t)tok_hash_bytes(mg->bytes + mg->off[r], mg->len[r]) & (mg->ix.cap - 1);
    while (mg->ix.slots[i] >= 0)
        i = (i + 1) & (mg->ix.cap - 1);
    mg->ix.slots[i] = CLF_BPE_MERGE_FIRST + (int32_t)r;
    return CLF_OK;
}

/* The merges as pairs of internal ids (pairs [2 n]), each side found by
 * its bytes among the pieces before it. */
static clf_status merge_pairs(const merge_list *ml, const int16_t *byte_of, piece_index *ix,
                              const char *name, int32_t *pairs, clf_error *err)
{
    merged mg = {.cap = 1 << 16, .ix = *ix};
    mg.bytes = malloc(mg.cap);
    mg.off = malloc((ml->n + 1) * sizeof *mg.off);
    mg.len = malloc((ml->n + 1) * sizeof *mg.len);
    clf_status st = CLF_OK;
    if (mg.bytes == NULL || mg.off == NULL || mg.len == NULL)
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory importing a tokenizer");
    memset(ix->slots, 0xFF, ix->cap * sizeof *ix->slots);
    for (size_t r = 0; r < ml->n && st == CLF_OK; r++) {
        unsigned char a[CLF_BPE_MAX_PIECE], b[CLF_BPE_MAX_PIECE];
        const int na = chars_to_bytes(ml->ls[r], ml->ll[r], byte_of, a, sizeof a);
        const int nb = chars_to_bytes(ml->rs[r], ml->rl[r], byte_of, b, sizeof b);
        if (na <= 0 || nb <= 0 || na + nb > CLF_BPE_MAX_PIECE) {
            st = G2_ERR("merge %zu \"%.*s %.*s\": not byte-level pieces of at most %d bytes", r,
                        (int)ml->ll[r], ml->ls[r], (int)ml->rl[r], ml->rs[r], CLF_BPE_MAX_PIECE);
            break;
        }
        pairs[2 * r] = merged_find(&mg, a, (size_t)na);
        pairs[2 * r + 1] = merged_find(&mg, b, (size_t)nb);
        if (pairs[2 * r] < 0 || pairs[2 * r + 1] < 0) {
            st = G2_ERR("merge %zu \"%.*s %.*s\": its %s side is no earlier piece", r,
                        (int)ml->ll[r], ml->ls[r], (int)ml->rl[r], ml->rs[r],
                        pairs[2 * r] < 0 ? "left" : "right");
            break;
        }
        st = merged_add(&mg, r, a, (size_t)na, b, (size_t)nb, err);
    }
    free(mg.bytes);
    free(mg.off);
    free(mg.len);
    return st;
}

/* The model's id of every internal piece (ext [V], from the vocabulary
 * object) and the model's vocabulary size *E. */
static clf_status vocab_ids(const clf_json *vocab, const clf_tokenizer *t, const int16_t *byte_of,
                            piece_index *ix, const char *name, int32_t *ext, int32_t *E,
                            clf_error *err)
{
    const int32_t V = t->vocab_size;
    *E = 0;
    for (size_t i = 0; i < vocab->count; i++) {
        const clf_json *e = &vocab->items[i];
        if (!e->is_int || e->integer < 0 || e->integer >= CLF_BPE_MAX_VOCAB)
            return G2_ERR("vocabulary entry \"%s\": the id must be an integer in [0, %d)", e->key,
                          CLF_BPE_MAX_VOCAB);
        if (e->integer + 1 > *E)
            *E = (int32_t)e->integer + 1;
    }
    for (int32_t i = 0; i < V; i++)
        ext[i] = -1;
    /* index the internal pieces by bytes once more (the final tokenizer) */
    memset(ix->slots, 0xFF, ix->cap * sizeof *ix->slots);
    for (int32_t id = CLF_BPE_BYTE_FIRST; id < V; id++)
        index_put(ix, (const unsigned char *)t->bytes + t->off[id], t->off[id + 1] - t->off[id],
                  id);
    for (size_t i = 0; i < vocab->count; i++) {
        const clf_json *e = &vocab->items[i];
        int sp = -1;
        for (int k = 0; k < CLF_SPECIAL_COUNT; k++)
            if (strcmp(e->key, special_text[k]) == 0)
                sp = k;
        if (sp >= 0) {
            ext[sp] = (int32_t)e->integer;
            if (sp == CLF_SPECIAL_EOS && ext[CLF_SPECIAL_BOS] < 0)
                ext[CLF_SPECIAL_BOS] = (int32_t)e->integer; /* GPT-2: one token for both */
            continue;
        }
        unsigned char buf[CLF_BPE_MAX_PIECE];
        int n = chars_to_bytes(e->key, e->key_len, byte_of, buf, sizeof buf);
        int32_t id = n > 0 ? index_find(ix, t, buf, (size_t)n) : -1;
        if (id < 0)
            continue; /* a token no merge makes (an added token): never produced */
        if (ext[id] >= 0)
            return G2_ERR("vocabulary entries %d and %lld are the same piece", (int)ext[id],
                          (long long)e->integer);
        ext[id] = (int32_t)e->integer;
    }
    for (int32_t id = CLF_BPE_BYTE_FIRST; id < V; id++)
        if (ext[id] < 0)
            return G2_ERR("the piece of %s %d has no entry in the vocabulary",
                          id < CLF_BPE_MERGE_FIRST ? "byte" : "merge",
                          id < CLF_BPE_MERGE_FIRST ? id - CLF_BPE_BYTE_FIRST
                                                   : id - CLF_BPE_MERGE_FIRST);
    return CLF_OK;
}

/* The common part: vocabulary entries (token -> id, from an object) and
 * merges as strings "left right" or [left, right] (from an array, or the
 * lines of merges.txt given as text). */
static clf_status build(const clf_json *vocab, const clf_json *merge_arr, const char *merge_txt,
                        size_t merge_len, const char *name, const char *mname, clf_tokenizer **out,
                        clf_error *err)
{
    uint32_t cp_of[256];
    int16_t byte_of[512];
    byte_chars(cp_of);
    for (int i = 0; i < 512; i++)
        byte_of[i] = -1;
    for (int b = 0; b < 256; b++)
        byte_of[cp_of[b]] = (int16_t)b;
    *out = NULL;
    if (vocab == NULL || vocab->type != CLF_JSON_OBJECT || vocab->count == 0 ||
        vocab->count > CLF_BPE_MAX_VOCAB)
        return G2_ERR("the vocabulary must be a non-empty object of token: id");
    merge_list ml;
    clf_tokenizer *t = NULL;
    int32_t *pairs = NULL, *ext = NULL, E = 0;
    piece_index ix = {NULL, 1024};
    clf_status st = merges_read(merge_arr, merge_txt, merge_len, mname, &ml, err);
    if (st != CLF_OK)
        goto done;
    while (ix.cap < 2 * (ml.n + 300))
        ix.cap *= 2;
    pairs = malloc((ml.n + 1) * 2 * sizeof *pairs);
    ix.slots = malloc(ix.cap * sizeof *ix.slots);
    if (pairs == NULL || ix.slots == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory importing a tokenizer");
        goto done;
    }
    if ((st = merge_pairs(&ml, byte_of, &ix, mname, pairs, err)) != CLF_OK ||
        (st = tok_bpe_build(pairs, (int32_t)ml.n, &t, err)) != CLF_OK)
        goto done;
    const int32_t V = t->vocab_size;
    if ((ext = malloc((size_t)V * sizeof *ext)) == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory importing a tokenizer");
        goto done;
    }
    if ((st = vocab_ids(vocab, t, byte_of, &ix, name, ext, &E, err)) != CLF_OK)
        goto done;
    int identity = E == V;
    for (int32_t i = 0; i < V && identity; i++)
        identity = ext[i] == i;
    if (!identity && (st = tok_set_ids(t, ext, E, err)) != CLF_OK)
        goto done;
    *out = t;
    t = NULL;
done:
    clf_tokenizer_destroy(t);
    free(ext);
    free(pairs);
    free(ix.slots);
    merges_free(&ml);
    return st;
}

clf_status clf_tokenizer_from_gpt2(const char *vocab_json, size_t vlen, const char *merges_txt,
                                   size_t mlen, const char *name, const char *merges_name,
                                   clf_tokenizer **out, clf_error *err)
{
    clf_json *doc = NULL;
    clf_json_options jo = {name, 0, 0};
    *out = NULL;
    clf_status st = clf_json_parse(vocab_json, vlen, &jo, &doc, err);
    if (st == CLF_OK)
        st = build(doc, NULL, merges_txt, mlen, name, merges_name ? merges_name : name, out, err);
    clf_json_destroy(doc);
    return st;
}

clf_status tok_gpt2_from_hf(const clf_json *model, const char *name, clf_tokenizer **out,
                            clf_error *err)
{
    return build(clf_json_get(model, "vocab"), clf_json_get(model, "merges"), NULL, 0, name, name,
                 out, err);
}

/* ---- writing ------------------------------------------------------------------------- */

/* A piece as GPT-2 characters (UTF-8) into w's string. */
static void piece_chars(const unsigned char *p, size_t n, const uint32_t *cp_of, char *out,
                        size_t *len)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += (size_t)clf_utf8_encode(cp_of[p[i]], (unsigned char *)out + k);
    *len = k;
}

clf_status clf_tokenizer_to_gpt2(const clf_tokenizer *t, char **vocab_json, char **merges_txt,
                                 clf_error *err)
{
    uint32_t cp_of[256];
    byte_chars(cp_of);
    *vocab_json = *merges_txt = NULL;
    if (t->type != CLF_TOKENIZER_BPE)
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "the GPT-2 layout needs a byte-level BPE tokenizer (vocab.tokenizer: "
                             "bpe), not %s",
                             t->type == CLF_TOKENIZER_CHAR ? "char" : "another kind");
    clf_json_writer w;
    clf_json_writer_init(&w);
    clf_json_begin_object(&w);
    char *buf = malloc(2 * CLF_BPE_MAX_PIECE + 16);
    size_t mcap = 64 + (size_t)t->n_merges * (4 * CLF_BPE_MAX_PIECE + 2), ml = 0;
    char *m = malloc(mcap < ((size_t)1 << 30) ? mcap : ((size_t)1 << 30));
    if (buf == NULL || m == NULL) {
        free(buf);
        free(m);
        clf_json_writer_release(&w);
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory writing a tokenizer");
    }
    for (int32_t id = 0; id < t->vocab_size; id++) {
        int32_t model_id = t->ext != NULL ? t->ext[id] : id;
        if (model_id < 0)
            continue;
        if (id < CLF_BPE_BYTE_FIRST) {
            /* GPT-2's one special stands for bos and eos: write it once */
            if (t->ext != NULL && id == CLF_SPECIAL_BOS && model_id == t->ext[CLF_SPECIAL_EOS])
                continue;
            clf_json_key(&w, special_text[id]);
        } else {
            size_t l;
            piece_chars((const unsigned char *)t->bytes + t->off[id], t->off[id + 1] - t->off[id],
                        cp_of, buf, &l);
            clf_json_key_n(&w, buf, l);
        }
        clf_json_int(&w, model_id);
    }
    clf_json_end_object(&w);
    ml = (size_t)snprintf(m, mcap, "#version: 0.2\n");
    for (int32_t r = 0; r < t->n_merges; r++) {
        for (int k = 0; k < 2; k++) {
            int32_t id = t->merges[2 * r + k];
            size_t l;
            piece_chars((const unsigned char *)t->bytes + t->off[id], t->off[id + 1] - t->off[id],
                        cp_of, m + ml, &l);
            ml += l;
            m[ml++] = k ? '\n' : ' ';
        }
    }
    m[ml] = '\0';
    free(buf);
    clf_status st = clf_json_writer_finish(&w, vocab_json, NULL, err);
    if (st != CLF_OK) {
        free(m);
        return st;
    }
    *merges_txt = m;
    return CLF_OK;
}
