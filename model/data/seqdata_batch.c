/*
 * seqdata_batch.c - batching of a clf_seqdata (see seqdata.h).
 *
 * The loader plans a whole epoch up front (example order, batch boundaries,
 * batch order) into arrays allocated once at creation, so that
 * clf_seq_loader_next never allocates or fails. Rows are read straight
 * from the dataset's flat arrays (seqdata_internal.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/data/seqdata.h"
#include "model/data/seqdata_internal.h"

/* ---- the loader ---------------------------------------------------------------------- */

typedef struct sort_item {
    int32_t s, t;  /* row lengths */
    int64_t pos;   /* position before sorting (the tie-break) */
    int64_t index; /* example */
} sort_item;

struct clf_seq_loader {
    const clf_seqdata *ds;
    clf_seq_batching o;
    size_t n;
    int64_t chunk;  /* resolved window (bucketed) */
    int32_t *S, *T; /* [n] row lengths: source row, target row (m + 1; 0 without) */
    clf_seq_limits lim;
    /* the current epoch's plan */
    int64_t epoch;
    size_t pos;     /* next batch (in batch order) */
    int64_t *order; /* [n] examples in batch-cut order */
    size_t *bstart; /* [n + 1] batch k = order[bstart[k] .. bstart[k+1]) */
    size_t *bperm;  /* [n] batch order */
    size_t nb;
    sort_item *items; /* [n] scratch */
    int64_t pad_src_real, pad_src_slots, pad_tgt_real, pad_tgt_slots;
};

void clf_seq_batching_default(clf_seq_batching *o)
{
    memset(o, 0, sizeof *o);
    o->batch = 32;
    o->batch_tokens = 0;
    o->order = CLF_SEQ_ORDER_BUCKETED;
    o->chunk = 0;
    o->pad_multiple = 1;
    o->seed = 1337;
}

static int32_t round_up(int32_t x, int m) { return m > 1 ? (x + m - 1) / m * m : x; }

static int32_t cost_of(const clf_seq_loader *L, size_t i)
{
    int32_t c = L->S[i] > L->T[i] ? L->S[i] : L->T[i];
    return round_up(c, L->o.pad_multiple);
}

static int item_cmp(const void *a, const void *b)
{
    const sort_item *x = a, *y = b;
    int32_t kx = x->s > x->t ? x->s : x->t, ky = y->s > y->t ? y->s : y->t;
    if (kx != ky)
        return kx < ky ? -1 : 1;
    if (x->s != y->s)
        return x->s < y->s ? -1 : 1;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Sort order[a..b) by (max(S, T), S, T, current position). */
static void sort_window(clf_seq_loader *L, size_t a, size_t b)
{
    for (size_t i = a; i < b; i++) {
        int64_t e = L->order[i];
        L->items[i - a] = (sort_item){L->S[e], L->T[e], (int64_t)i, e};
    }
    qsort(L->items, b - a, sizeof *L->items, item_cmp);
    for (size_t i = a; i < b; i++)
        L->order[i] = L->items[i - a].index;
}

/* Cut order[a..b) greedily into batches appended to bstart. */
static void cut_window(clf_seq_loader *L, size_t a, size_t b)
{
    const int cap = L->o.batch, budget = L->o.batch_tokens;
    size_t start = a;
    int64_t B = 0, mx = 0;
    for (size_t i = a; i < b; i++) {
        int64_t c = cost_of(L, (size_t)L->order[i]);
        int64_t nm = c > mx ? c : mx;
        if (B > 0 && ((cap > 0 && B + 1 > cap) || (budget > 0 && (B + 1) * nm > budget))) {
            L->bstart[L->nb++] = start;
            start = i;
            B = 0;
            nm = c;
        }
        B++;
        mx = nm;
    }
    if (b > a)
        L->bstart[L->nb++] = start;
    L->bstart[L->nb] = b;
}

static void plan_epoch(clf_seq_loader *L, int64_t epoch)
{
    size_t n = L->n;
    clf_rng rng;
    clf_rng_seed(&rng, L->o.seed + 0x9E3779B97F4A7C15ull * (uint64_t)epoch);
    for (size_t i = 0; i < n; i++)
        L->order[i] = (int64_t)i;
    clf_seq_order ord = L->o.order;
    if ((ord == CLF_SEQ_ORDER_BUCKETED || ord == CLF_SEQ_ORDER_SHUFFLED) && n > 1) {
        for (size_t i = n - 1; i > 0; i--) {
            size_t j = (size_t)clf_rng_below(&rng, (uint64_t)i + 1);
            int64_t t = L->order[i];
            L->order[i] = L->order[j];
            L->order[j] = t;
        }
    }
    L->nb = 0;
    if (ord == CLF_SEQ_ORDER_BUCKETED) {
        for (size_t a = 0; a < n; a += (size_t)L->chunk) {
            size_t b = a + (size_t)L->chunk < n ? a + (size_t)L->chunk : n;
            sort_window(L, a, b);
            cut_window(L, a, b);
        }
    } else {
        if (ord == CLF_SEQ_ORDER_SORTED)
            sort_window(L, 0, n);
        cut_window(L, 0, n);
    }
    for (size_t k = 0; k < L->nb; k++)
        L->bperm[k] = k;
    if (ord == CLF_SEQ_ORDER_BUCKETED && L->nb > 1) {
        for (size_t k = L->nb - 1; k > 0; k--) {
            size_t j = (size_t)clf_rng_below(&rng, (uint64_t)k + 1);
            size_t t = L->bperm[k];
            L->bperm[k] = L->bperm[j];
            L->bperm[j] = t;
        }
    }
    /* padding of this plan */
    L->pad_src_real = L->pad_src_slots = L->pad_tgt_real = L->pad_tgt_slots = 0;
    for (size_t k = 0; k < L->nb; k++) {
        int32_t ms = 0, mt = 0;
        for (size_t i = L->bstart[k]; i < L->bstart[k + 1]; i++) {
            int64_t e = L->order[i];
            ms = L->S[e] > ms ? L->S[e] : ms;
            mt = L->T[e] > mt ? L->T[e] : mt;
            L->pad_src_real += L->S[e];
            L->pad_tgt_real += L->T[e];
        }
        int64_t B = (int64_t)(L->bstart[k + 1] - L->bstart[k]);
        L->pad_src_slots += B * round_up(ms, L->o.pad_multiple);
        L->pad_tgt_slots += B * round_up(mt, L->o.pad_multiple);
    }
    L->epoch = epoch;
    L->pos = 0;
}

void clf_seq_loader_destroy(clf_seq_loader *L)
{
    if (!L)
        return;
    free(L->S);
    free(L->T);
    free(L->order);
    free(L->bstart);
    free(L->bperm);
    free(L->items);
    free(L);
}

clf_status clf_seq_loader_create(const clf_seqdata *ds, const clf_seq_batching *o,
                                 clf_seq_loader **out, clf_error *err)
{
    *out = NULL;
    if (o->batch < 0 || o->batch_tokens < 0 || (o->batch == 0 && o->batch_tokens == 0))
        return clf_error_set(err, CLF_ERR_ARG,
                             "batching needs batch > 0 (sentences) or batch_tokens > 0 (a token "
                             "budget); got batch %d, batch_tokens %d",
                             o->batch, o->batch_tokens);
    if (o->pad_multiple < 1 || o->chunk < 0)
        return clf_error_set(err, CLF_ERR_ARG,
                             "pad_multiple must be >= 1 and chunk >= 0 (got %d, %d)",
                             o->pad_multiple, o->chunk);
    if ((unsigned)o->order > CLF_SEQ_ORDER_INPUT)
        return clf_error_set(err, CLF_ERR_ARG, "unknown batch order %d", (int)o->order);
    clf_seq_loader *L = calloc(1, sizeof *L);
    if (!L)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory");
    size_t n = ds->n;
    L->ds = ds;
    L->o = *o;
    L->n = n;
    L->S = malloc(n * sizeof *L->S);
    L->T = malloc(n * sizeof *L->T);
    L->order = malloc(n * sizeof *L->order);
    L->bstart = malloc((n + 1) * sizeof *L->bstart);
    L->bperm = malloc(n * sizeof *L->bperm);
    L->items = malloc(n * sizeof *L->items);
    if (!L->S || !L->T || !L->order || !L->bstart || !L->bperm || !L->items) {
        clf_seq_loader_destroy(L);
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory planning %zu examples", n);
    }
    int32_t max_s = 0, max_t = 0, min_cost = INT32_MAX;
    int64_t sum_cost = 0;
    for (size_t i = 0; i < n; i++) {
        L->S[i] = (int32_t)(ds->src_off[i + 1] - ds->src_off[i]);
        L->T[i] = ds->tgt_off ? (int32_t)(ds->tgt_off[i + 1] - ds->tgt_off[i]) + 1 : 0;
        max_s = L->S[i] > max_s ? L->S[i] : max_s;
        max_t = L->T[i] > max_t ? L->T[i] : max_t;
        int32_t c = cost_of(L, i);
        min_cost = c < min_cost ? c : min_cost;
        sum_cost += c;
    }
    /* the sorting window */
    int64_t per_batch = o->batch;
    if (o->batch_tokens > 0) {
        int64_t mean = n ? (sum_cost + (int64_t)n - 1) / (int64_t)n : 1;
        per_batch = o->batch_tokens / (mean > 0 ? mean : 1);
        if (o->batch > 0 && o->batch < per_batch)
            per_batch = o->batch;
        if (per_batch < 1)
            per_batch = 1;
    }
    L->chunk = o->chunk > 0 ? o->chunk : 64 * per_batch;
    if (L->chunk > (int64_t)n)
        L->chunk = (int64_t)(n ? n : 1);
    /* limits over every epoch */
    clf_seq_limits *lim = &L->lim;
    lim->max_S = round_up(max_s, o->pad_multiple);
    lim->max_T = round_up(max_t, o->pad_multiple);
    int64_t maxB = (int64_t)n;
    if (o->batch > 0 && o->batch < maxB)
        maxB = o->batch;
    if (o->batch_tokens > 0) {
        int64_t byb = o->batch_tokens / (min_cost > 0 ? min_cost : 1);
        if (byb < 1)
            byb = 1;
        if (byb < maxB)
            maxB = byb;
    }
    if (maxB < 1)
        maxB = 1;
    lim->max_B = (int)maxB;
    lim->max_src_tokens = maxB * lim->max_S;
    lim->max_tgt_tokens = maxB * lim->max_T;
    int64_t mS = lim->max_S, mT = lim->max_T;
    if (o->batch_tokens > 0) {
        /* B * L <= budget with L = max(S, T), unless B == 1 (then L <= the
         * longest row): so B * S <= max(budget, max_S). */
        int64_t budget = o->batch_tokens;
        int64_t bs = budget > mS ? budget : mS, bt = budget > mT ? budget : mT;
        if (bs < lim->max_src_tokens)
            lim->max_src_tokens = bs;
        if (bt < lim->max_tgt_tokens)
            lim->max_tgt_tokens = bt;
    }
    plan_epoch(L, 0);
    *out = L;
    return CLF_OK;
}

void clf_seq_loader_limits(const clf_seq_loader *L, clf_seq_limits *lim) { *lim = L->lim; }
size_t clf_seq_loader_batches(const clf_seq_loader *L) { return L->nb; }

void clf_seq_loader_padding(const clf_seq_loader *L, int64_t *src_real, int64_t *src_padded,
                            int64_t *tgt_real, int64_t *tgt_padded)
{
    if (src_real)
        *src_real = L->pad_src_real;
    if (src_padded)
        *src_padded = L->pad_src_slots;
    if (tgt_real)
        *tgt_real = L->pad_tgt_real;
    if (tgt_padded)
        *tgt_padded = L->pad_tgt_slots;
}

void clf_seq_batch_destroy(clf_seq_batch *b)
{
    if (!b)
        return;
    free(b->src);
    free(b->src_keep);
    free(b->tgt_in);
    free(b->tgt_out);
    free(b->tgt_keep);
    free(b->labels);
    free(b->index);
    free(b);
}

clf_status clf_seq_batch_create(const clf_seq_loader *L, clf_seq_batch **out, clf_error *err)
{
    *out = NULL;
    clf_seq_batch *b = calloc(1, sizeof *b);
    if (!b)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory");
    size_t ns = (size_t)L->lim.max_src_tokens, nt = (size_t)L->lim.max_tgt_tokens,
           nb = (size_t)L->lim.max_B;
    b->max_B = L->lim.max_B;
    b->cap_src = L->lim.max_src_tokens;
    b->cap_tgt = L->lim.max_tgt_tokens;
    b->src = malloc((ns ? ns : 1) * sizeof *b->src);
    b->src_keep = malloc((ns ? ns : 1) * sizeof *b->src_keep);
    b->tgt_in = malloc((nt ? nt : 1) * sizeof *b->tgt_in);
    b->tgt_out = malloc((nt ? nt : 1) * sizeof *b->tgt_out);
    b->tgt_keep = malloc((nt ? nt : 1) * sizeof *b->tgt_keep);
    b->labels = malloc(nb * sizeof *b->labels);
    b->index = malloc(nb * sizeof *b->index);
    if (!b->src || !b->src_keep || !b->tgt_in || !b->tgt_out || !b->tgt_keep || !b->labels ||
        !b->index) {
        clf_seq_batch_destroy(b);
        return clf_error_set(err, CLF_ERR_MEMORY,
                             "out of memory for a batch of %zu source and %zu target tokens", ns,
                             nt);
    }
    *out = b;
    return CLF_OK;
}

static void fill_batch(const clf_seq_loader *L, size_t k, clf_seq_batch *b)
{
    const clf_seqdata *ds = L->ds;
    size_t a = L->bstart[k], e = L->bstart[k + 1];
    int B = (int)(e - a);
    int32_t ms = 0, mt = 0;
    for (size_t i = a; i < e; i++) {
        int64_t x = L->order[i];
        ms = L->S[x] > ms ? L->S[x] : ms;
        mt = L->T[x] > mt ? L->T[x] : mt;
    }
    int S = round_up(ms, L->o.pad_multiple), T = round_up(mt, L->o.pad_multiple);
    b->B = B;
    b->S = S;
    b->T = T;
    b->src_tokens = b->tgt_tokens = 0;
    for (int r = 0; r < B; r++) {
        int64_t x = L->order[a + (size_t)r];
        b->index[r] = x;
        b->labels[r] = ds->labels ? ds->labels[x] : -1;
        const int32_t *src = ds->src + ds->src_off[x];
        int sl = L->S[x];
        int32_t *row = b->src + (size_t)r * (size_t)S, *keep = b->src_keep + (size_t)r * (size_t)S;
        for (int j = 0; j < S; j++) {
            row[j] = j < sl ? src[j] : ds->src_pad;
            keep[j] = j < sl;
        }
        b->src_tokens += sl;
        if (T > 0) {
            const int32_t *y = ds->tgt + ds->tgt_off[x];
            int m = L->T[x] - 1;
            size_t off = (size_t)r * (size_t)T;
            int32_t *in = b->tgt_in + off, *outr = b->tgt_out + off, *tk = b->tgt_keep + off;
            for (int j = 0; j < T; j++) {
                in[j] = j == 0 ? ds->bos : j <= m ? y[j - 1] : ds->tgt_pad;
                outr[j] = j < m ? y[j] : j == m ? ds->eos : -1;
                tk[j] = j <= m;
            }
            b->tgt_tokens += m + 1;
        }
    }
}

int clf_seq_loader_next(clf_seq_loader *L, clf_seq_batch *b)
{
    if (L->pos >= L->nb) {
        plan_epoch(L, L->epoch + 1);
        return 0;
    }
    b->epoch = L->epoch;
    b->position = (int64_t)L->pos;
    fill_batch(L, L->bperm[L->pos], b);
    L->pos++;
    return 1;
}

void clf_seq_loader_get_state(const clf_seq_loader *L, clf_seq_loader_state *s)
{
    s->epoch = L->epoch;
    s->position = (int64_t)L->pos;
}

clf_status clf_seq_loader_set_state(clf_seq_loader *L, const clf_seq_loader_state *s,
                                    clf_error *err)
{
    if (s->epoch < 0 || s->position < 0)
        return clf_error_set(err, CLF_ERR_ARG,
                             "batch state: negative epoch %" PRId64 " or position %" PRId64,
                             s->epoch, s->position);
    int64_t old_epoch = L->epoch;
    size_t old_pos = L->pos;
    if (s->epoch != L->epoch)
        plan_epoch(L, s->epoch);
    if ((size_t)s->position > L->nb) {
        size_t nb = L->nb;
        if (old_epoch != L->epoch)
            plan_epoch(L, old_epoch); /* leave the loader as it was */
        L->pos = old_pos;
        return clf_error_set(err, CLF_ERR_ARG,
                             "batch state: position %" PRId64 " is past the %zu batches of epoch "
                             "%" PRId64 " (other data or batch options?)",
                             s->position, nb, s->epoch);
    }
    L->pos = (size_t)s->position;
    return CLF_OK;
}

void clf_seq_loader_state_to_string(const clf_seq_loader *L, char out[CLF_SEQ_STATE_STRING_MAX])
{
    snprintf(out, CLF_SEQ_STATE_STRING_MAX,
             "seq:epoch=%" PRId64 ",position=%zu,examples=%zu,seed=%" PRIu64, L->epoch, L->pos,
             L->n, L->o.seed);
}

clf_status clf_seq_loader_state_from_string(clf_seq_loader *L, const char *s, clf_error *err)
{
    long long epoch = -1, position = -1;
    unsigned long long examples = 0, seed = 0;
    int used = 0;
    if (!s ||
        sscanf(s, "seq:epoch=%lld,position=%lld,examples=%llu,seed=%llu%n", &epoch, &position,
               &examples, &seed, &used) != 4 ||
        s[used] != '\0')
        return clf_error_set(err, CLF_ERR_FORMAT,
                             "batch state '%s': expected "
                             "\"seq:epoch=E,position=P,examples=N,seed=S\"",
                             s ? s : "(null)");
    if (examples != (unsigned long long)L->n)
        return clf_error_set(err, CLF_ERR_ARG,
                             "batch state was saved for %llu examples, the data has %zu: resume "
                             "with the same data",
                             examples, L->n);
    if (seed != (unsigned long long)L->o.seed)
        return clf_error_set(err, CLF_ERR_ARG,
                             "batch state was saved with seed %llu, the loader has %" PRIu64, seed,
                             L->o.seed);
    clf_seq_loader_state st = {epoch, position};
    return clf_seq_loader_set_state(L, &st, err);
}

clf_batch clf_seq_batch_view(const clf_seq_batch *b, clf_model_kind kind)
{
    clf_batch v;
    if (kind == CLF_MODEL_ENCODER) {
        v = clf_batch_classify(b->src, b->src_keep, b->labels, b->B, b->S);
        v.tokens = (double)b->src_tokens;
    } else {
        v = clf_batch_seq2seq(b->src, b->src_keep, b->tgt_in, b->tgt_out, b->B, b->S, b->T);
        v.tokens = (double)b->tgt_tokens;
    }
    v.epoch = b->epoch;
    return v;
}
