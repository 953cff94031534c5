/*
 * dataset.c - see dataset.h.
 *
 * The dataset owns one int32 array of all tokens; the splits are a prefix
 * and a suffix of it. Sampling and evaluation windows only read it, so one
 * dataset can serve any number of generators.
 */
#include "model/data/dataset.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/io/fileio.h"
#include "runtime/util.h"

/* ---- generator -------------------------------------------------------------- */

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void clf_rng_seed(clf_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = clf_splitmix64_next(&x);
    /* splitmix64 is a bijection of its counter, so four successive outputs
     * cannot all be zero. */
}

uint64_t clf_rng_next(clf_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t clf_rng_below(clf_rng *r, uint64_t n)
{
    if (n == 0)
        return 0;
    uint64_t threshold = (0 - n) % n; /* (2^64 - n) mod n = 2^64 mod n */
    for (;;) {
        uint64_t x = clf_rng_next(r);
        if (x >= threshold)
            return x % n;
    }
}

double clf_rng_uniform(clf_rng *r)
{
    return (double)(clf_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

void clf_rng_to_string(const clf_rng *r, char out[CLF_RNG_STRING_MAX])
{
    snprintf(out, CLF_RNG_STRING_MAX,
             "xoshiro256**:%016" PRIx64 ",%016" PRIx64 ",%016" PRIx64 ",%016" PRIx64, r->s[0],
             r->s[1], r->s[2], r->s[3]);
}

clf_status clf_rng_from_string(const char *s, clf_rng *r, clf_error *err)
{
    static const char prefix[] = "xoshiro256**:";
    clf_rng v;
    const char *p = s;
    if (s == NULL || strncmp(s, prefix, sizeof prefix - 1) != 0)
        goto bad;
    p += sizeof prefix - 1;
    for (int i = 0; i < 4; i++) {
        uint64_t x = 0;
        for (int k = 0; k < 16; k++) {
            char c = *p++;
            int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (h < 0)
                goto bad;
            x = (x << 4) | (uint64_t)h;
        }
        v.s[i] = x;
        if (*p != (i < 3 ? ',' : '\0'))
            goto bad;
        p++;
    }
    if ((v.s[0] | v.s[1] | v.s[2] | v.s[3]) == 0)
        goto bad;
    *r = v;
    return CLF_OK;
bad:
    return clf_error_set(err, CLF_ERR_FORMAT,
                         "random generator state \"%.100s\" is malformed "
                         "(expected xoshiro256**: and four 16-digit "
                         "lower-case hex words, not all zero)",
                         s ? s : "(null)");
}

/* ---- dataset ---------------------------------------------------------------- */

struct clf_dataset {
    int32_t *ids;   /* all tokens */
    int32_t *doc;   /* the document of each token (increasing ids), or NULL: one stream */
    size_t n;       /* all */
    size_t n_train; /* ids[0, n_train) train, ids[n_train, n) validation */
    int32_t vocab;
};

clf_status clf_dataset_read_text(const char *path, char **text, size_t *len, clf_error *err)
{
    clf_status st = clf_file_read_text(path, CLF_DATASET_MAX_BYTES, text, len, err);
    if (st != CLF_OK)
        return st;
    if (*len == 0) {
        free(*text);
        *text = NULL;
        return clf_error_set(err, CLF_ERR_FORMAT, "%s is empty: a text corpus is needed", path);
    }
    return CLF_OK;
}

clf_status clf_dataset_from_tokens(const int32_t *ids, size_t n, int32_t vocab, clf_dataset **out,
                                   clf_error *err)
{
    *out = NULL;
    if (n < 2)
        return clf_error_set(err, CLF_ERR_ARG, "a dataset needs at least 2 tokens, got %zu", n);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return clf_error_set(err, CLF_ERR_ARG,
                                 "token %zu has id %d, outside the "
                                 "vocabulary [0, %d)",
                                 i, (int)ids[i], (int)vocab);
    clf_dataset *ds = calloc(1, sizeof *ds);
    if (ds == NULL || (ds->ids = malloc(n * sizeof *ds->ids)) == NULL) {
        free(ds);
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory for a dataset of %zu tokens", n);
    }
    memcpy(ds->ids, ids, n * sizeof *ids);
    ds->n = n;
    /* floor(9n/10) without overflow for any size_t n */
    ds->n_train = n / 10 * 9 + n % 10 * 9 / 10;
    ds->vocab = vocab;
    *out = ds;
    return CLF_OK;
}

clf_status clf_dataset_from_text(const char *text, size_t len, const char *name,
                                 const clf_tokenizer *tok, clf_dataset **out, clf_error *err)
{
    int32_t *ids = NULL;
    size_t n = 0;
    *out = NULL;
    if (len == 0)
        return clf_error_set(err, CLF_ERR_FORMAT, "%s is empty: a text corpus is needed", name);
    clf_status st = clf_tokenizer_encode(tok, text, len, &ids, &n, err);
    if (st != CLF_OK) {
        clf_error_prefix(err, "tokenizing %s", name);
        return st;
    }
    st = clf_dataset_from_tokens(ids, n, clf_tokenizer_vocab_size(tok), out, err);
    if (st != CLF_OK)
        clf_error_prefix(err, "%s", name);
    free(ids);
    return st;
}

clf_status clf_dataset_load(const char *path, const clf_tokenizer *tok, clf_dataset **out,
                            clf_error *err)
{
    char *text = NULL;
    size_t len = 0;
    *out = NULL;
    clf_status st = clf_dataset_read_text(path, &text, &len, err);
    if (st != CLF_OK)
        return st;
    st = clf_dataset_from_text(text, len, path, tok, out, err);
    free(text);
    return st;
}

/* The end of the document that starts at i: just past the first run of
 * line breaks ('\n', '\r') holding two '\n' or more, or len. */
static size_t doc_end(const char *text, size_t len, size_t i)
{
    while (i < len) {
        if (text[i] != '\n' && text[i] != '\r') {
            i++;
            continue;
        }
        size_t j = i, nl = 0;
        for (; j < len && (text[j] == '\n' || text[j] == '\r'); j++)
            nl += text[j] == '\n';
        if (nl >= 2)
            return j;
        i = j;
    }
    return len;
}

clf_status clf_dataset_from_documents(const char *text, size_t len, const char *name,
                                      const clf_tokenizer *tok, clf_dataset **out, clf_error *err)
{
    *out = NULL;
    if (len == 0)
        return clf_error_set(err, CLF_ERR_FORMAT, "%s is empty: a text corpus is needed", name);
    int32_t *ids = NULL, *doc = NULL;
    size_t n = 0, cap = 0;
    int32_t ndoc = 0;
    clf_status st = CLF_OK;
    for (size_t a = 0; a < len && st == CLF_OK;) {
        const size_t e = doc_end(text, len, a);
        int32_t *d = NULL;
        size_t dn = 0;
        if ((st = clf_tokenizer_encode(tok, text + a, e - a, &d, &dn, err)) != CLF_OK) {
            clf_error_prefix(err, "tokenizing %s (the document at byte %zu)", name, a);
            break;
        }
        if (n + dn > cap) {
            size_t nc = cap ? cap : 4096;
            while (nc < n + dn)
                nc *= 2;
            int32_t *ni = realloc(ids, nc * sizeof *ni),
                    *nd = ni ? realloc(doc, nc * sizeof *nd) : NULL;
            if (ni != NULL)
                ids = ni;
            if (nd == NULL) {
                free(d);
                st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory reading the documents of %s",
                                   name);
                break;
            }
            doc = nd;
            cap = nc;
        }
        for (size_t i = 0; i < dn; i++) {
            ids[n + i] = d[i];
            doc[n + i] = ndoc;
        }
        ndoc += dn > 0 && ndoc < INT32_MAX;
        n += dn;
        free(d);
        a = e;
    }
    if (st == CLF_OK &&
        (st = clf_dataset_from_tokens(ids, n, clf_tokenizer_vocab_size(tok), out, err)) != CLF_OK)
        clf_error_prefix(err, "%s", name);
    if (st == CLF_OK) {
        (*out)->doc = doc;
        doc = NULL;
    }
    free(ids);
    free(doc);
    return st;
}

clf_status clf_dataset_load_opts(const char *path, const clf_tokenizer *tok, int documents,
                                 clf_dataset **out, clf_error *err)
{
    char *text = NULL;
    size_t len = 0;
    *out = NULL;
    clf_status st = clf_dataset_read_text(path, &text, &len, err);
    if (st != CLF_OK)
        return st;
    st = documents ? clf_dataset_from_documents(text, len, path, tok, out, err)
                   : clf_dataset_from_text(text, len, path, tok, out, err);
    free(text);
    return st;
}

const int32_t *clf_dataset_documents(const clf_dataset *ds, clf_split split)
{
    if (ds->doc == NULL)
        return NULL;
    return split == CLF_SPLIT_TRAIN ? ds->doc : ds->doc + ds->n_train;
}

size_t clf_dataset_document_count(const clf_dataset *ds, clf_split split)
{
    size_t n;
    const int32_t *d = clf_dataset_documents(ds, split);
    if (d == NULL)
        return 0;
    n = clf_dataset_size(ds, split);
    return n == 0 ? 0 : (size_t)(d[n - 1] - d[0]) + 1;
}

void clf_dataset_destroy(clf_dataset *ds)
{
    if (ds == NULL)
        return;
    free(ds->ids);
    free(ds->doc);
    free(ds);
}

const int32_t *clf_dataset_tokens(const clf_dataset *ds, clf_split split, size_t *n)
{
    if (split == CLF_SPLIT_TRAIN) {
        *n = ds->n_train;
        return ds->ids;
    }
    *n = ds->n - ds->n_train;
    return ds->ids + ds->n_train;
}

size_t clf_dataset_size(const clf_dataset *ds, clf_split split)
{
    return split == CLF_SPLIT_TRAIN ? ds->n_train : ds->n - ds->n_train;
}

int32_t clf_dataset_vocab(const clf_dataset *ds) { return ds->vocab; }

static const char *split_name(clf_split s) { return s == CLF_SPLIT_TRAIN ? "train" : "val"; }

/* Documents: targets that would cross into the next document are ignored,
 * and doc (unless NULL) gets the window's document ids. */
static void window_docs(const int32_t *dd, size_t i, size_t l, int32_t *y, int32_t *doc)
{
    if (dd == NULL)
        return;
    for (size_t t = 0; t < l; t++) {
        if (dd[i + t + 1] != dd[i + t])
            y[t] = CLF_DATASET_IGNORE;
        if (doc != NULL)
            doc[t] = dd[i + t];
    }
}

clf_status clf_dataset_sample_batch(const clf_dataset *ds, clf_split split, int B, int T,
                                    clf_rng *rng, int32_t *x, int32_t *y, int32_t *doc,
                                    clf_error *err)
{
    size_t n;
    const int32_t *tok = clf_dataset_tokens(ds, split, &n), *dd = clf_dataset_documents(ds, split);
    if (B < 1 || T < 1)
        return clf_error_set(err, CLF_ERR_ARG, "batch %d x context %d: both must be >= 1", B, T);
    if (n < (size_t)T + 1)
        return clf_error_set(err, CLF_ERR_ARG,
                             "the %s split holds %zu tokens, fewer than "
                             "context + 1 = %d: use a larger text or a "
                             "smaller context",
                             split_name(split), n, T + 1);
    for (int b = 0; b < B; b++) {
        size_t i = (size_t)clf_rng_below(rng, (uint64_t)(n - (size_t)T));
        memcpy(x + (size_t)b * (size_t)T, tok + i, (size_t)T * sizeof *x);
        memcpy(y + (size_t)b * (size_t)T, tok + i + 1, (size_t)T * sizeof *y);
        window_docs(dd, i, (size_t)T, y + (size_t)b * (size_t)T,
                    doc ? doc + (size_t)b * (size_t)T : NULL);
    }
    return CLF_OK;
}

size_t clf_dataset_eval_windows(const clf_dataset *ds, clf_split split, int T)
{
    size_t n = clf_dataset_size(ds, split);
    if (n < 2 || T < 1)
        return 0;
    return (n - 1 + (size_t)T - 1) / (size_t)T;
}

clf_status clf_dataset_eval_window(const clf_dataset *ds, clf_split split, int T, size_t w,
                                   int32_t *x, int32_t *y, int32_t *doc, size_t *len,
                                   clf_error *err)
{
    size_t n;
    const int32_t *tok = clf_dataset_tokens(ds, split, &n), *dd = clf_dataset_documents(ds, split);
    size_t count = clf_dataset_eval_windows(ds, split, T);
    *len = 0;
    if (w >= count)
        return clf_error_set(err, CLF_ERR_ARG,
                             "evaluation window %zu of the %s split does not "
                             "exist (%zu windows of context %d)",
                             w, split_name(split), count, T);
    size_t s = w * (size_t)T;
    size_t l = n - 1 - s < (size_t)T ? n - 1 - s : (size_t)T;
    memcpy(x, tok + s, l * sizeof *x);
    memcpy(y, tok + s + 1, l * sizeof *y);
    window_docs(dd, s, l, y, doc);
    for (size_t t = l; t < (size_t)T; t++) {
        x[t] = 0;
        y[t] = -1;
        if (doc != NULL && dd != NULL) /* the padding: a document of its own */
            doc[t] = dd[s + l - 1] + 1;
    }
    *len = l;
    return CLF_OK;
}

void clf_dataset_eval_begin(const clf_dataset *ds, clf_split split, int T, clf_eval_iter *it)
{
    it->ds = ds;
    it->split = split;
    it->T = T;
    it->next = 0;
    it->count = clf_dataset_eval_windows(ds, split, T);
}

int clf_dataset_eval_next(clf_eval_iter *it, int32_t *x, int32_t *y, size_t *len)
{
    if (it->next >= it->count)
        return 0;
    if (clf_dataset_eval_window(it->ds, it->split, it->T, it->next, x, y, NULL, len, NULL) !=
        CLF_OK)
        return 0;
    it->next++;
    return 1;
}

clf_status clf_dataset_tokenizer(const clf_model_config *cfg, const char *text, size_t len,
                                 const char *name, clf_tokenizer **tok, clf_error *err)
{
    clf_status st;
    *tok = NULL;
    if (cfg->vocab.path[0] != '\0') { /* a tokenizer file (bpe, wordpiece) */
        char *tj = NULL;
        size_t tl = 0;
        if ((st = clf_file_read_text(cfg->vocab.path, (size_t)256 << 20, &tj, &tl, err)) == CLF_OK)
            st = clf_tokenizer_from_any_json(tj, tl, cfg->vocab.path, tok, err);
        free(tj);
        if (st != CLF_OK)
            clf_error_prefix(err, "vocab.path");
        return st;
    }
    if (cfg->vocab.tokenizer == CLF_TOKENIZER_BPE) { /* trained on the text */
        clf_bpe_options bo;
        clf_bpe_options_init(&bo);
        if (cfg->vocab.size > 0)
            bo.vocab_size = cfg->vocab.size;
        return clf_tokenizer_train_bpe(text, len, &bo, tok, err);
    }
    st = clf_tokenizer_create(cfg->vocab.tokenizer, text, len, tok, err);
    if (st != CLF_OK && err != NULL && strstr(err->msg, name) == NULL)
        clf_error_prefix(err, "%s", name); /* which file the text came from */
    return st;
}
