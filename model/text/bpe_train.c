/*
 * text/bpe_train.c - learning byte-pair-encoding merges from text
 * (clf_bpe_trainer, tokenizer.h); the pre-tokenizer, encoding and the JSON
 * form are in text/bpe.c.
 *
 * Input side: _add pre-tokenizes each text (clf_bpe_pretoken_end) and
 * counts the distinct pre-tokens ("words") in an open-addressing hash table
 * over one byte arena.
 *
 * Training (clf_bpe_trainer_finish), as HF tokenizers' BpeTrainer:
 *   - each word becomes an array of byte ids;
 *   - every adjacent pair of ids has a count (sum of word counts, overlapping
 *     occurrences counted) and a list of the words it occurs in;
 *   - a max-heap of (count, pair) entries, ordered by count, then the
 *     smaller left id, then the smaller right id, is kept lazily: counts
 *     only go down except for pairs containing the id just made (those are
 *     pushed after each merge), so when the top entry's count is stale it is
 *     pushed again with the current count, and when it is current it is the
 *     true maximum;
 *   - a merge visits only the words in its pair's list: their old pairs are
 *     uncounted, the pair replaced left to right, the new pairs counted.
 *   Work per merge is proportional to the words the pair occurs in, not to
 *   the corpus: Multi30k (4 MB, 30k distinct words) learns 7738 merges in
 *   about 0.1 s.
 *
 * Not here: multithreaded counting or training (not needed at these
 * sizes), corpora larger than memory (the word table is; the text need not
 * be: add it in pieces that end at a line start).
 */
#include <stdlib.h>
#include <string.h>

#include "model/io/fileio.h"
#include "model/text/tokenizer_internal.h"

#define OOM(what) clf_error_set(err, CLF_ERR_MEMORY, "out of memory %s", what)

/* ---- word counting (the trainer's input side) --------------------------------------- */

typedef struct bpe_word {
    uint64_t hash;
    size_t off;   /* bytes in the arena */
    uint32_t len; /* <= CLF_BPE_MAX_PIECE */
    int64_t count;
} bpe_word;

struct clf_bpe_trainer {
    clf_bpe_options opt;
    char *arena;
    size_t arena_len, arena_cap;
    bpe_word *words;
    size_t n_words, words_cap;
    int32_t *table; /* word index, -1 free; table_cap a power of two, at most half full */
    size_t table_cap;
    clf_bpe_stats stats;
};

void clf_bpe_options_init(clf_bpe_options *o)
{
    o->vocab_size = 8000;
    o->min_frequency = 2;
}

clf_status clf_bpe_trainer_create(const clf_bpe_options *o, clf_bpe_trainer **out, clf_error *err)
{
    *out = NULL;
    clf_bpe_options d;
    clf_bpe_options_init(&d);
    if (o == NULL)
        o = &d;
    if (o->vocab_size < CLF_BPE_MERGE_FIRST || o->vocab_size > CLF_BPE_MAX_VOCAB)
        return clf_error_set(err, CLF_ERR_ARG,
                             "a bpe vocabulary has %d to %d tokens (6 specials "
                             "+ 256 bytes + merges), got %d",
                             CLF_BPE_MERGE_FIRST, CLF_BPE_MAX_VOCAB, (int)o->vocab_size);
    if (o->min_frequency < 1)
        return clf_error_set(err, CLF_ERR_ARG, "bpe min_frequency must be >= 1, got %lld",
                             (long long)o->min_frequency);
    clf_bpe_trainer *tr = calloc(1, sizeof *tr);
    if (tr == NULL)
        return OOM("creating a bpe trainer");
    tr->opt = *o;
    tr->table_cap = 1024;
    tr->table = malloc(tr->table_cap * sizeof *tr->table);
    if (tr->table == NULL) {
        free(tr);
        return OOM("creating a bpe trainer");
    }
    memset(tr->table, 0xFF, tr->table_cap * sizeof *tr->table);
    *out = tr;
    return CLF_OK;
}

void clf_bpe_trainer_destroy(clf_bpe_trainer *tr)
{
    if (tr == NULL)
        return;
    free(tr->arena);
    free(tr->words);
    free(tr->table);
    free(tr);
}

void clf_bpe_trainer_stats(const clf_bpe_trainer *tr, clf_bpe_stats *stats)
{
    *stats = tr->stats;
    stats->unique_words = tr->n_words;
}

static int table_grow(clf_bpe_trainer *tr)
{
    size_t cap = tr->table_cap * 2;
    int32_t *t = malloc(cap * sizeof *t);
    if (t == NULL)
        return 0;
    memset(t, 0xFF, cap * sizeof *t);
    for (size_t w = 0; w < tr->n_words; w++) {
        size_t i = (size_t)tr->words[w].hash & (cap - 1);
        while (t[i] >= 0)
            i = (i + 1) & (cap - 1);
        t[i] = (int32_t)w;
    }
    free(tr->table);
    tr->table = t;
    tr->table_cap = cap;
    return 1;
}

static int count_word(clf_bpe_trainer *tr, const unsigned char *s, size_t n)
{
    uint64_t h = tok_hash_bytes(s, n);
    size_t mask = tr->table_cap - 1, i = (size_t)h & mask;
    for (; tr->table[i] >= 0; i = (i + 1) & mask) {
        bpe_word *w = &tr->words[tr->table[i]];
        if (w->hash == h && w->len == n && memcmp(tr->arena + w->off, s, n) == 0) {
            w->count++;
            return 1;
        }
    }
    if (tr->n_words >= INT32_MAX - 1)
        return 0;
    if (tr->n_words == tr->words_cap) {
        size_t cap = tr->words_cap ? 2 * tr->words_cap : 1024;
        bpe_word *nw = realloc(tr->words, cap * sizeof *nw);
        if (nw == NULL)
            return 0;
        tr->words = nw;
        tr->words_cap = cap;
    }
    if (tr->arena_len + n > tr->arena_cap) {
        size_t cap = tr->arena_cap ? 2 * tr->arena_cap : 65536;
        while (cap < tr->arena_len + n)
            cap *= 2;
        char *na = realloc(tr->arena, cap);
        if (na == NULL)
            return 0;
        tr->arena = na;
        tr->arena_cap = cap;
    }
    memcpy(tr->arena + tr->arena_len, s, n);
    bpe_word *w = &tr->words[tr->n_words];
    w->hash = h;
    w->off = tr->arena_len;
    w->len = (uint32_t)n;
    w->count = 1;
    tr->arena_len += n;
    tr->table[i] = (int32_t)tr->n_words++;
    if (2 * tr->n_words > tr->table_cap && !table_grow(tr))
        return 0;
    return 1;
}

clf_status clf_bpe_trainer_add(clf_bpe_trainer *tr, const char *text, size_t len, clf_error *err)
{
    const unsigned char *s = (const unsigned char *)text;
    for (size_t pos = 0; pos < len;) {
        size_t end = clf_bpe_pretoken_end(text, len, pos);
        if (!count_word(tr, s + pos, end - pos))
            return OOM("counting the words of the bpe training text");
        tr->stats.words++;
        pos = end;
    }
    tr->stats.bytes += len;
    return CLF_OK;
}

clf_status clf_bpe_trainer_add_file(clf_bpe_trainer *tr, const char *path, clf_error *err)
{
    char *text = NULL;
    size_t len = 0;
    clf_status st = clf_file_read_text(path, CLF_BPE_MAX_TEXT, &text, &len, err);
    if (st != CLF_OK)
        return st;
    st = clf_bpe_trainer_add(tr, text, len, err);
    free(text);
    if (st != CLF_OK)
        clf_error_prefix(err, "%s", path);
    return st;
}

/* ---- training --------------------------------------------------------------------- */

typedef struct bpe_pair {
    int32_t a, b;
    int64_t count;
    int32_t *words; /* words it occurs (or once occurred) in, no adjacent duplicates */
    int32_t n, cap;
    int32_t touched; /* the merge that last made it, for pushing once */
} bpe_pair;

typedef struct heap_entry {
    int64_t count;
    int32_t a, b, p;
} heap_entry;

typedef struct train_state {
    tok_pair_map map; /* (a, b) -> index into pairs */
    bpe_pair *pairs;
    int32_t n_pairs, pairs_cap;
    heap_entry *heap;
    size_t heap_n, heap_cap;
} train_state;

/* a before b in the heap: larger count, then smaller left, then smaller right */
static int heap_before(const heap_entry *x, const heap_entry *y)
{
    if (x->count != y->count)
        return x->count > y->count;
    if (x->a != y->a)
        return x->a < y->a;
    return x->b < y->b;
}

static int heap_push(train_state *s, int64_t count, int32_t p)
{
    if (s->heap_n == s->heap_cap) {
        size_t cap = s->heap_cap ? 2 * s->heap_cap : 4096;
        heap_entry *h = realloc(s->heap, cap * sizeof *h);
        if (h == NULL)
            return 0;
        s->heap = h;
        s->heap_cap = cap;
    }
    heap_entry e = {count, s->pairs[p].a, s->pairs[p].b, p};
    size_t i = s->heap_n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!heap_before(&e, &s->heap[up]))
            break;
        s->heap[i] = s->heap[up];
        i = up;
    }
    s->heap[i] = e;
    return 1;
}

static heap_entry heap_pop(train_state *s)
{
    heap_entry top = s->heap[0], e = s->heap[--s->heap_n];
    size_t i = 0, n = s->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && heap_before(&s->heap[c + 1], &s->heap[c]))
            c++;
        if (!heap_before(&s->heap[c], &e))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n > 0)
        s->heap[i] = e;
    return top;
}

/* The index of pair (a, b), created with count 0 if new; -1 on OOM. */
static int32_t pair_index(train_state *s, int32_t a, int32_t b)
{
    int32_t p = tok_pair_map_get(&s->map, a, b);
    if (p >= 0)
        return p;
    if (s->n_pairs == s->pairs_cap) {
        int32_t cap = s->pairs_cap ? 2 * s->pairs_cap : 4096;
        bpe_pair *np = realloc(s->pairs, (size_t)cap * sizeof *np);
        if (np == NULL)
            return -1;
        s->pairs = np;
        s->pairs_cap = cap;
    }
    p = s->n_pairs;
    if (!tok_pair_map_put(&s->map, a, b, p))
        return -1;
    s->n_pairs++;
    bpe_pair *q = &s->pairs[p];
    memset(q, 0, sizeof *q);
    q->a = a;
    q->b = b;
    q->touched = -1;
    return p;
}

static int pair_add_word(bpe_pair *q, int32_t w)
{
    if (q->n > 0 && q->words[q->n - 1] == w)
        return 1;
    if (q->n == q->cap) {
        int32_t cap = q->cap ? 2 * q->cap : 4;
        int32_t *nw = realloc(q->words, (size_t)cap * sizeof *nw);
        if (nw == NULL)
            return 0;
        q->words = nw;
        q->cap = cap;
    }
    q->words[q->n++] = w;
    return 1;
}

static void train_state_free(train_state *s)
{
    for (int32_t p = 0; p < s->n_pairs; p++)
        free(s->pairs[p].words);
    free(s->pairs);
    free(s->heap);
    tok_pair_map_free(&s->map);
}

/* The merge loop's working set: every word's symbols (in place of its
 * bytes), the pairs touched by the current merge. */
typedef struct merge_work {
    int32_t *syms; /* symbols of word w at syms[soff[w]], slen[w] of them */
    size_t *soff;
    uint32_t *slen;
    int32_t *stamp; /* the merge that last visited word w */
    int32_t *touched;
    int32_t n_touched, touched_cap;
} merge_work;

/* Remember pair q as touched by merge R (once). 0 when out of memory. */
static int touch(train_state *s, merge_work *mw, int32_t q, int32_t R)
{
    if (s->pairs[q].touched == R)
        return 1;
    s->pairs[q].touched = R;
    if (mw->n_touched == mw->touched_cap) {
        int32_t nc = mw->touched_cap ? 2 * mw->touched_cap : 256;
        int32_t *nt = realloc(mw->touched, (size_t)nc * sizeof *nt);
        if (nt == NULL)
            return 0;
        mw->touched = nt;
        mw->touched_cap = nc;
    }
    mw->touched[mw->n_touched++] = q;
    return 1;
}

/* Words -> byte symbols; the initial pair counts and word lists; the heap.
 * 0 when out of memory. */
static int init_pairs(const clf_bpe_trainer *tr, train_state *s, merge_work *mw, int64_t minf)
{
    for (size_t w = 0; w < tr->n_words; w++) {
        const bpe_word *wd = &tr->words[w];
        const unsigned char *b = (const unsigned char *)tr->arena + wd->off;
        mw->soff[w] = wd->off;
        mw->slen[w] = wd->len;
        mw->stamp[w] = -1;
        int32_t *sy = mw->syms + wd->off;
        for (uint32_t i = 0; i < wd->len; i++)
            sy[i] = CLF_BPE_BYTE_FIRST + b[i];
        for (uint32_t i = 0; i + 1 < wd->len; i++) {
            int32_t p = pair_index(s, sy[i], sy[i + 1]);
            if (p < 0 || !pair_add_word(&s->pairs[p], (int32_t)w))
                return 0;
            s->pairs[p].count += wd->count;
        }
    }
    for (int32_t p = 0; p < s->n_pairs; p++)
        if (s->pairs[p].count >= minf && !heap_push(s, s->pairs[p].count, p))
            return 0;
    return 1;
}

/* Merge (a, b) -> X, the R-th merge, in word w: its pairs' counts move from
 * the old symbols to the new ones, and pairs containing X learn the word.
 * 0 when out of memory. */
static int merge_word(const clf_bpe_trainer *tr, train_state *s, merge_work *mw, int32_t w,
                      int32_t a, int32_t b, int32_t X, int32_t R)
{
    if (mw->stamp[w] == R)
        return 1;
    mw->stamp[w] = R;
    int32_t *sy = mw->syms + mw->soff[w];
    uint32_t n = mw->slen[w], i, m;
    for (i = 0; i + 1 < n; i++)
        if (sy[i] == a && sy[i + 1] == b)
            break;
    if (i + 1 >= n)
        return 1; /* a stale entry: the pair left this word in an earlier merge */
    const int64_t f = tr->words[w].count;
    for (i = 0; i + 1 < n; i++)
        s->pairs[tok_pair_map_get(&s->map, sy[i], sy[i + 1])].count -= f;
    for (i = 0, m = 0; i < n;) {
        if (i + 1 < n && sy[i] == a && sy[i + 1] == b) {
            sy[m++] = X;
            i += 2;
        } else {
            sy[m++] = sy[i++];
        }
    }
    mw->slen[w] = m;
    for (i = 0; i + 1 < m; i++) {
        int32_t q = pair_index(s, sy[i], sy[i + 1]);
        if (q < 0)
            return 0;
        s->pairs[q].count += f;
        if (sy[i] != X && sy[i + 1] != X)
            continue;
        if (!pair_add_word(&s->pairs[q], w) || !touch(s, mw, q, R))
            return 0;
    }
    return 1;
}

clf_status clf_bpe_trainer_finish(clf_bpe_trainer *tr, clf_tokenizer **out, clf_error *err)
{
    clf_status st = CLF_OK;
    train_state s;
    memset(&s, 0, sizeof s);
    merge_work mw;
    memset(&mw, 0, sizeof mw);
    const size_t W = tr->n_words;
    const int32_t target = tr->opt.vocab_size - CLF_BPE_MERGE_FIRST;
    const int64_t minf = tr->opt.min_frequency;
    int32_t R = 0, *merges = NULL;
    int64_t last = 0;
    *out = NULL;
    if (tr->stats.bytes == 0)
        return clf_error_set(err, CLF_ERR_ARG, "no text to train a bpe tokenizer on");
    mw.syms = malloc((tr->arena_len + 1) * sizeof *mw.syms);
    mw.soff = malloc((W + 1) * sizeof *mw.soff);
    mw.slen = malloc((W + 1) * sizeof *mw.slen);
    mw.stamp = malloc((W + 1) * sizeof *mw.stamp);
    merges = malloc(((size_t)target + 1) * 2 * sizeof *merges);
    if (mw.syms == NULL || mw.soff == NULL || mw.slen == NULL || mw.stamp == NULL ||
        merges == NULL || !tok_pair_map_init(&s.map, 4096) || !init_pairs(tr, &s, &mw, minf))
        goto oom;
    while (R < target && s.heap_n > 0) {
        heap_entry e = heap_pop(&s);
        const int64_t cur = s.pairs[e.p].count;
        if (cur != e.count) { /* stale: requeue with the current count */
            if (cur >= minf && !heap_push(&s, cur, e.p))
                goto oom;
            continue;
        }
        const int32_t a = e.a, b = e.b, X = CLF_BPE_MERGE_FIRST + R;
        /* take the word list: pair_index may move s.pairs */
        int32_t *list = s.pairs[e.p].words, n_list = s.pairs[e.p].n;
        s.pairs[e.p].words = NULL;
        s.pairs[e.p].n = s.pairs[e.p].cap = 0;
        mw.n_touched = 0;
        int ok = 1;
        for (int32_t li = 0; li < n_list && ok; li++)
            ok = merge_word(tr, &s, &mw, list[li], a, b, X, R);
        free(list);
        for (int32_t k = 0; k < mw.n_touched && ok; k++) {
            int32_t q = mw.touched[k];
            ok = s.pairs[q].count < minf || heap_push(&s, s.pairs[q].count, q);
        }
        if (!ok)
            goto oom;
        merges[2 * R] = a;
        merges[2 * R + 1] = b;
        last = cur;
        R++;
    }
    if ((st = tok_bpe_build(merges, R, out, err)) != CLF_OK)
        goto done;
    tr->stats.merges = R;
    tr->stats.vocab_size = CLF_BPE_MERGE_FIRST + R;
    tr->stats.last_frequency = last;
    tr->stats.tokens = 0;
    for (size_t w = 0; w < W; w++)
        tr->stats.tokens += (uint64_t)tr->words[w].count * mw.slen[w];
    goto done;
oom:
    st = OOM("training a bpe tokenizer");
done:
    train_state_free(&s);
    free(mw.syms);
    free(mw.soff);
    free(mw.slen);
    free(mw.stamp);
    free(mw.touched);
    free(merges);
    return st;
}

clf_status clf_tokenizer_train_bpe(const char *text, size_t len, const clf_bpe_options *o,
                                   clf_tokenizer **out, clf_error *err)
{
    clf_bpe_trainer *tr = NULL;
    *out = NULL;
    clf_status st = clf_bpe_trainer_create(o, &tr, err);
    if (st == CLF_OK)
        st = clf_bpe_trainer_add(tr, text, len, err);
    if (st == CLF_OK)
        st = clf_bpe_trainer_finish(tr, out, err);
    clf_bpe_trainer_destroy(tr);
    return st;
}
