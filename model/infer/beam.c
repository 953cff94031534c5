/*
 * beam.c - greedy decoding and beam search over a cached model (see
 * beam.h for the exact rules).
 *
 * Design: the search keeps, per live row of the model's caches, its
 * sentence, its summed log-probability and its token history (two
 * [rows, max_len] arrays swapped each step). A step reads the logits of
 * every live row, turns each row into its 2K best (token, log-prob) pairs
 * (one pass: max, log-sum-exp, a small insertion-sorted list), merges the
 * rows of each sentence into its 2K best candidates, finishes eos
 * candidates, picks the next beams, and sends the model the parent of each
 * new row (one cache reorder) and the new tokens (one decoder step). All
 * scratch is sized at create; a search allocates nothing but the result.
 *
 * Not here: the model's numerics (model.h), tokenization (the callers).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/infer/beam.h"

void clf_beam_options_default(clf_beam_options *o)
{
    memset(o, 0, sizeof *o);
    o->beam = 1;
    o->alpha = 1.0;
    o->max_len_a = 1.5;
    o->max_len_b = 10;
    o->batch = 64;
}

clf_status clf_beam_options_check(const clf_beam_options *o, clf_error *err)
{
    if (o->beam < 1 || o->beam > CLF_BEAM_MAX)
        return clf_error_set(err, CLF_ERR_ARG, "beam size %d: expected 1 to %d", o->beam,
                             CLF_BEAM_MAX);
    if (!(o->alpha >= 0.0) || !isfinite(o->alpha))
        return clf_error_set(err, CLF_ERR_ARG, "length penalty alpha %g: expected >= 0", o->alpha);
    if (!(o->max_len_a >= 0.0) || !isfinite(o->max_len_a) || o->max_len_b < 0 ||
        (o->max_len_a == 0.0 && o->max_len_b < 1))
        return clf_error_set(err, CLF_ERR_ARG,
                             "maximum length %g x S + %d: expected a >= 0, b >= 0 and a length "
                             "of at least 1",
                             o->max_len_a, o->max_len_b);
    if (o->batch < 1)
        return clf_error_set(err, CLF_ERR_ARG, "batch %d: expected >= 1 sentences", o->batch);
    return CLF_OK;
}

/* ---- the model's callbacks ------------------------------------------------------ */

static clf_status model_step(void *user, const int32_t *tokens, int B, int pos, float *logits,
                             clf_error *err)
{
    return clf_model_decode_step(user, tokens, B, pos, logits, err);
}

static clf_status model_reorder(void *user, const int32_t *index, int B, clf_error *err)
{
    return clf_model_cache_reorder(user, index, B, err);
}

clf_beam_fns clf_beam_fns_model(clf_model *m)
{
    clf_beam_fns f = {m, model_step, model_reorder};
    return f;
}

void clf_beam_result_free(clf_beam_result *r)
{
    if (r == NULL)
        return;
    free(r->hyp);
    free(r->store);
    memset(r, 0, sizeof *r);
}

/* ---- scratch ---------------------------------------------------------------------- */

typedef struct cand {
    double score; /* summed log-probability with this token */
    double lp;    /* the token's own log-probability */
    int row;      /* live row it extends */
    int32_t tok;
} cand;

typedef struct sent {
    int active;
    int rows; /* live rows this step (contiguous from row0) */
    int row0;
    int finished; /* hypotheses finished so far */
    int max_len;
    int best_len; /* best finished hypothesis (best_len < 0: none) */
    int best_eos;
    double best_score, best_logprob;
} sent;

struct clf_beam_search {
    int max_N, K, V, max_len, C; /* C = candidates kept per row, min(2K, V) */
    int R;                       /* row capacity max(max_N, max_N x K) */
    float *logits;               /* [R, V] */
    double *cum;                 /* [R] summed log-probabilities of the live rows */
    double *cum_next;
    int *row_sent; /* [R] */
    int *row_sent_next;
    int32_t *hist, *hist_next; /* [R, max_len] token histories */
    int32_t *parent, *tok;     /* [R] the next step's reorder index and tokens */
    cand *row_cand;            /* [R, C] per-row best tokens */
    cand *merge;               /* [K x C] a sentence's candidates */
    sent *s;                   /* [max_N] */
    int32_t *best;             /* [max_N, max_len] best finished tokens */
};

void clf_beam_search_destroy(clf_beam_search *s)
{
    if (s == NULL)
        return;
    free(s->logits);
    free(s->cum);
    free(s->cum_next);
    free(s->row_sent);
    free(s->row_sent_next);
    free(s->hist);
    free(s->hist_next);
    free(s->parent);
    free(s->tok);
    free(s->row_cand);
    free(s->merge);
    free(s->s);
    free(s->best);
    free(s);
}

clf_status clf_beam_search_create(int max_N, int K, int V, int max_len, clf_beam_search **out,
                                  clf_error *err)
{
    *out = NULL;
    if (max_N < 1 || K < 1 || K > CLF_BEAM_MAX || V < 1 || max_len < 1)
        return clf_error_set(err, CLF_ERR_ARG,
                             "beam search for %d sentences, beam %d, vocabulary %d, length %d: "
                             "expected positive sizes and a beam of at most %d",
                             max_N, K, V, max_len, CLF_BEAM_MAX);
    clf_beam_search *s = calloc(1, sizeof *s);
    if (s == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "beam search: out of host memory");
    s->max_N = max_N;
    s->K = K;
    s->V = V;
    s->max_len = max_len;
    s->C = 2 * K < V ? 2 * K : V;
    s->R = max_N * K;
    size_t R = (size_t)s->R, L = (size_t)max_len;
    s->logits = malloc(R * (size_t)V * sizeof *s->logits);
    s->cum = malloc(R * sizeof *s->cum);
    s->cum_next = malloc(R * sizeof *s->cum_next);
    s->row_sent = malloc(R * sizeof *s->row_sent);
    s->row_sent_next = malloc(R * sizeof *s->row_sent_next);
    s->hist = malloc(R * L * sizeof *s->hist);
    s->hist_next = malloc(R * L * sizeof *s->hist_next);
    s->parent = malloc(R * sizeof *s->parent);
    s->tok = malloc(R * sizeof *s->tok);
    s->row_cand = malloc(R * (size_t)s->C * sizeof *s->row_cand);
    s->merge = malloc((size_t)K * (size_t)s->C * sizeof *s->merge);
    s->s = malloc((size_t)max_N * sizeof *s->s);
    s->best = malloc((size_t)max_N * L * sizeof *s->best);
    if (!s->logits || !s->cum || !s->cum_next || !s->row_sent || !s->row_sent_next || !s->hist ||
        !s->hist_next || !s->parent || !s->tok || !s->row_cand || !s->merge || !s->s || !s->best) {
        clf_beam_search_destroy(s);
        return clf_error_set(err, CLF_ERR_MEMORY,
                             "beam search: out of host memory (%d rows x %d logits)", max_N * K, V);
    }
    *out = s;
    return CLF_OK;
}

/* ---- one row's candidates ---------------------------------------------------------- */

/* log-sum-exp of a row (NaN counts as -inf). */
static double row_lse(const float *x, int V)
{
    double mx = -INFINITY;
    for (int v = 0; v < V; v++)
        if (x[v] > mx)
            mx = x[v];
    if (mx == -INFINITY)
        return -INFINITY;
    double sum = 0.0;
    for (int v = 0; v < V; v++)
        if (x[v] == x[v])
            sum += exp((double)x[v] - mx);
    return mx + log(sum);
}

/* The C best tokens of a row (excluding `skip` when skip >= 0), sorted by
 * logit descending, ties by lower id: out[0..*n). */
static void row_top(const float *x, int V, int C, int32_t skip, cand *out, int *n)
{
    int k = 0;
    for (int v = 0; v < V; v++) {
        if (v == skip)
            continue;
        float xv = x[v] == x[v] ? x[v] : -INFINITY;
        if (k == C && !((double)xv > out[k - 1].lp))
            continue;
        int j = k < C ? k : C - 1; /* the slot that frees up */
        while (j > 0 && out[j - 1].lp < (double)xv) {
            out[j] = out[j - 1];
            j--;
        }
        out[j].lp = xv;
        out[j].tok = v;
        if (k < C)
            k++;
    }
    *n = k;
}

static int cand_cmp(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    if (a->row != b->row)
        return a->row < b->row ? -1 : 1;
    return a->tok < b->tok ? -1 : a->tok > b->tok;
}

static void finish(clf_beam_search *s, int si, const int32_t *hist, int n_tok, int32_t last,
                   int by_eos, double logprob, double alpha)
{
    sent *t = &s->s[si];
    int len = n_tok + (last >= 0 ? 1 : 0); /* tokens in the hypothesis */
    int counted = len + (by_eos ? 1 : 0);
    double score = alpha == 0.0 ? logprob : logprob / pow((double)counted, alpha);
    t->finished++;
    if (t->best_len >= 0 && !(score > t->best_score))
        return;
    int32_t *dst = s->best + (size_t)si * (size_t)s->max_len;
    memcpy(dst, hist, (size_t)n_tok * sizeof *dst);
    if (last >= 0)
        dst[n_tok] = last;
    t->best_len = len;
    t->best_eos = by_eos;
    t->best_score = score;
    t->best_logprob = logprob;
}

/* ---- the search ----------------------------------------------------------------------- */

/* Each row's best candidates for generated token g (the last allowed token:
 * only eos), with log-probabilities and cumulative scores. */
static void row_candidates(clf_beam_search *s, int rows, int g, int32_t eos)
{
    const int V = s->V, C = s->C;
    for (int r = 0; r < rows; r++) {
        const float *x = s->logits + (size_t)r * (size_t)V;
        const sent *t = &s->s[s->row_sent[r]];
        double lse = row_lse(x, V);
        cand *rc = s->row_cand + (size_t)r * (size_t)C;
        int n = 0;
        if (g == t->max_len && eos >= 0) {
            rc[0].lp = x[eos] == x[eos] ? (double)x[eos] : -INFINITY;
            rc[0].tok = eos;
            n = 1;
        } else {
            row_top(x, V, C, -1, rc, &n);
        }
        for (int j = 0; j < C; j++) {
            if (j < n) {
                rc[j].lp = lse == -INFINITY ? -INFINITY : rc[j].lp - lse;
                rc[j].score = s->cum[r] + rc[j].lp;
                rc[j].row = r;
            } else {
                rc[j].row = -1; /* unused */
            }
        }
    }
}

/* Sentence si at token g: merge its rows' candidates, finish hypotheses
 * (eos, or the maximum length), and append its next beams at rows
 * [*next, ...) of the _next arrays. */
static void sentence_step(clf_beam_search *s, int si, int g, int32_t eos, double alpha, int *next)
{
    const int K = s->K, C = s->C;
    const size_t L = (size_t)s->max_len;
    sent *t = &s->s[si];
    int nm = 0;
    for (int r = t->row0; r < t->row0 + t->rows; r++) {
        const cand *rc = s->row_cand + (size_t)r * (size_t)C;
        for (int j = 0; j < C && rc[j].row >= 0; j++)
            s->merge[nm++] = rc[j];
    }
    qsort(s->merge, (size_t)nm, sizeof *s->merge, cand_cmp);
    if (nm > 2 * K)
        nm = 2 * K;
    const int last = g == t->max_len;
    int new_rows = 0;
    const int new_row0 = *next;
    for (int j = 0; j < nm; j++) {
        const cand *c = &s->merge[j];
        const int32_t *h = s->hist + (size_t)c->row * L;
        if (eos >= 0 && c->tok == eos) {
            if (j < K || last)
                finish(s, si, h, g - 1, -1, 1, c->score, alpha);
            continue;
        }
        if (new_rows == K)
            continue;
        if (last) { /* no eos: the maximum length ends the hypothesis */
            finish(s, si, h, g - 1, c->tok, 0, c->score, alpha);
            new_rows++;
            continue;
        }
        int32_t *hn = s->hist_next + (size_t)*next * L;
        memcpy(hn, h, (size_t)(g - 1) * sizeof *hn);
        hn[g - 1] = c->tok;
        s->parent[*next] = c->row;
        s->tok[*next] = c->tok;
        s->cum_next[*next] = c->score;
        s->row_sent_next[*next] = si;
        (*next)++;
        new_rows++;
    }
    if (last || t->finished >= K || *next == new_row0) {
        *next = new_row0; /* done: drop its rows */
        t->active = 0;
        t->rows = 0;
    } else {
        t->row0 = new_row0;
        t->rows = *next - new_row0;
    }
}

/* The next rows become the current ones. */
static void swap_rows(clf_beam_search *s)
{
    double *tc = s->cum;
    s->cum = s->cum_next;
    s->cum_next = tc;
    int *ts = s->row_sent;
    s->row_sent = s->row_sent_next;
    s->row_sent_next = ts;
    int32_t *th = s->hist;
    s->hist = s->hist_next;
    s->hist_next = th;
}

/* Check the arguments and size the result for N sentences. */
static clf_status search_begin(clf_beam_search *s, int N, int pos0, const int *max_len, int32_t eos,
                               double alpha, clf_beam_result *res, clf_error *err)
{
    const size_t L = (size_t)s->max_len;
    if (N < 1 || N > s->max_N || pos0 < 0 || eos >= s->V || !(alpha >= 0.0))
        return clf_error_set(err, CLF_ERR_ARG,
                             "beam search of %d sentences (at most %d), position %d, eos %d "
                             "(vocabulary %d), alpha %g: out of range",
                             N, s->max_N, pos0, (int)eos, s->V, alpha);
    for (int i = 0; i < N; i++)
        if (max_len[i] < 1 || max_len[i] > s->max_len)
            return clf_error_set(err, CLF_ERR_ARG,
                                 "beam search: sentence %d's maximum length %d is outside "
                                 "[1, %d]",
                                 i, max_len[i], s->max_len);
    if (res->N < N || res->hyp == NULL || res->store == NULL) {
        clf_beam_result_free(res);
        res->hyp = malloc((size_t)N * sizeof *res->hyp);
        res->store = malloc((size_t)N * L * sizeof *res->store);
        if (res->hyp == NULL || res->store == NULL) {
            clf_beam_result_free(res);
            return clf_error_set(err, CLF_ERR_MEMORY, "beam search: out of host memory");
        }
    }
    res->N = N;
    /* one row per sentence, nothing generated */
    for (int i = 0; i < N; i++) {
        sent *t = &s->s[i];
        memset(t, 0, sizeof *t);
        t->active = 1;
        t->rows = 1;
        t->row0 = i;
        t->max_len = max_len[i];
        t->best_len = -1;
        s->cum[i] = 0.0;
        s->row_sent[i] = i;
    }
    return CLF_OK;
}

clf_status clf_beam_search_run(clf_beam_search *s, const clf_beam_fns *fns,
                               const float *first_logits, int N, int pos0, const int *max_len,
                               int32_t eos, double alpha, clf_beam_result *res, clf_error *err)
{
    const size_t L = (size_t)s->max_len;
    clf_status st = search_begin(s, N, pos0, max_len, eos, alpha, res, err);
    if (st != CLF_OK)
        return st;
    if (first_logits != s->logits)
        memcpy(s->logits, first_logits, (size_t)N * (size_t)s->V * sizeof *s->logits);
    int rows = N;
    for (int g = 1; rows > 0; g++) { /* g: the token being generated (1-based) */
        row_candidates(s, rows, g, eos);
        int next = 0;
        for (int si = 0; si < N; si++)
            if (s->s[si].active)
                sentence_step(s, si, g, eos, alpha, &next);
        if (next == 0)
            break;
        /* the model: reorder (unless every row stays), then one step */
        int same = next == rows;
        for (int i = 0; same && i < next; i++)
            same = s->parent[i] == i;
        if (!same && (st = fns->reorder(fns->user, s->parent, next, err)) != CLF_OK)
            goto fail;
        if ((st = fns->step(fns->user, s->tok, next, pos0 + g - 1, s->logits, err)) != CLF_OK)
            goto fail;
        rows = next;
        swap_rows(s);
    }
    for (int i = 0; i < N; i++) {
        const sent *t = &s->s[i];
        clf_beam_hyp *h = &res->hyp[i];
        int32_t *dst = res->store + (size_t)i * L;
        int len = t->best_len > 0 ? t->best_len : 0;
        memcpy(dst, s->best + (size_t)i * L, (size_t)len * sizeof *dst);
        h->tokens = dst;
        h->len = len;
        h->finished_by_eos = t->best_eos;
        h->logprob = t->best_len >= 0 ? t->best_logprob : -INFINITY;
        h->score = t->best_len >= 0 ? t->best_score : -INFINITY;
    }
fail:
    if (st != CLF_OK)
        clf_error_prefix(err, "beam search");
    return st;
}

/* ---- the models ------------------------------------------------------------------------ */

clf_status clf_beam_translate(clf_model *m, clf_beam_search *s, const int32_t *src,
                              const int32_t *keep, int N, int S, int32_t bos, int32_t eos,
                              const clf_beam_options *o, clf_beam_result *res, clf_error *err)
{
    clf_model_dims d = clf_model_dims_get(m);
    clf_beam_search *own = NULL;
    int32_t *tok = NULL;
    int *max_len = NULL;
    clf_status st;
    if ((st = clf_beam_options_check(o, err)) != CLF_OK)
        return st;
    if (d.kind != CLF_MODEL_ENCODER_DECODER)
        return clf_error_set(err, CLF_ERR_ARG, "translation needs an encoder-decoder model");
    if (N < 1 || (int64_t)N * o->beam > d.B)
        return clf_error_set(err, CLF_ERR_ARG, "%d sentences x beam %d: the model holds %d rows", N,
                             o->beam, d.B);
    if (bos < 0 || bos >= d.V || eos < 0 || eos >= d.V)
        return clf_error_set(err, CLF_ERR_ARG, "bos %d / eos %d: not in the vocabulary of %d",
                             (int)bos, (int)eos, d.V);
    if (s == NULL) {
        if ((st = clf_beam_search_create(N, o->beam, d.V, d.max_T, &own, err)) != CLF_OK)
            return st;
        s = own;
    }
    if (s->K != o->beam || s->V != d.V || N > s->max_N) {
        st = clf_error_set(err, CLF_ERR_ARG,
                           "the beam search scratch was made for beam %d, vocabulary %d, %d "
                           "sentences",
                           s->K, s->V, s->max_N);
        goto fail;
    }
    tok = malloc((size_t)N * sizeof *tok);
    max_len = malloc((size_t)N * sizeof *max_len);
    if (tok == NULL || max_len == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "translate: out of host memory");
        goto fail;
    }
    int cap = d.max_T < s->max_len ? d.max_T : s->max_len;
    for (int i = 0; i < N; i++) {
        int len = S;
        if (keep != NULL) {
            len = 0;
            for (int j = 0; j < S; j++)
                len += keep[(size_t)i * (size_t)S + (size_t)j] != 0;
        }
        double ml = floor(o->max_len_a * len + o->max_len_b);
        max_len[i] = ml < 1.0 ? 1 : ml > cap ? cap : (int)ml;
        tok[i] = bos;
    }
    if ((st = clf_model_encode(m, src, keep, N, S, err)) != CLF_OK)
        goto fail;
    if ((st = clf_model_decode_step(m, tok, N, 0, s->logits, err)) != CLF_OK)
        goto fail;
    clf_beam_fns fns = clf_beam_fns_model(m);
    st = clf_beam_search_run(s, &fns, s->logits, N, 1, max_len, eos, o->alpha, res, err);
fail:
    free(tok);
    free(max_len);
    clf_beam_search_destroy(own);
    return st;
}

clf_status clf_beam_generate(clf_model *m, clf_beam_search *s, const int32_t *prompts, int N,
                             int T0, int32_t eos, const clf_beam_options *o, clf_beam_result *res,
                             clf_error *err)
{
    clf_model_dims d = clf_model_dims_get(m);
    clf_beam_search *own = NULL;
    int *max_len = NULL;
    clf_status st;
    if ((st = clf_beam_options_check(o, err)) != CLF_OK)
        return st;
    if (d.kind != CLF_MODEL_DECODER)
        return clf_error_set(err, CLF_ERR_ARG, "generation needs a decoder-only model");
    if (N < 1 || (int64_t)N * o->beam > d.B || T0 < 1 || T0 > d.max_T)
        return clf_error_set(err, CLF_ERR_ARG,
                             "%d prompts of %d tokens x beam %d: the model holds %d rows of %d", N,
                             T0, o->beam, d.B, d.max_T);
    int ml = o->max_len_b < d.max_T - T0 + 1 ? o->max_len_b : d.max_T - T0 + 1;
    if (ml < 1)
        return clf_error_set(err, CLF_ERR_ARG, "nothing to generate (max_len_b %d)", o->max_len_b);
    if (s == NULL) {
        if ((st = clf_beam_search_create(N, o->beam, d.V, ml, &own, err)) != CLF_OK)
            return st;
        s = own;
    }
    if (s->K != o->beam || s->V != d.V || N > s->max_N || ml > s->max_len) {
        st = clf_error_set(err, CLF_ERR_ARG,
                           "the beam search scratch was made for beam %d, vocabulary %d, %d "
                           "sentences, %d tokens",
                           s->K, s->V, s->max_N, s->max_len);
        goto fail;
    }
    max_len = malloc((size_t)N * sizeof *max_len);
    if (max_len == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "generate: out of host memory");
        goto fail;
    }
    for (int i = 0; i < N; i++)
        max_len[i] = ml;
    if ((st = clf_model_prefill(m, prompts, N, T0, s->logits, err)) != CLF_OK)
        goto fail;
    clf_beam_fns fns = clf_beam_fns_model(m);
    st = clf_beam_search_run(s, &fns, s->logits, N, T0, max_len, eos, o->alpha, res, err);
fail:
    free(max_len);
    clf_beam_search_destroy(own);
    return st;
}

void clf_beam_model_limits(const clf_seqdata *ds, const clf_beam_options *o, int context,
                           clf_model_limits *lim)
{
    memset(lim, 0, sizeof *lim);
    const clf_seqdata_stats *st = clf_seqdata_stats_get(ds);
    int n =
        (int)(clf_seqdata_size(ds) < (size_t)o->batch ? clf_seqdata_size(ds) : (size_t)o->batch);
    lim->B = (n > 0 ? n : 1) * o->beam;
    lim->S = st->src.longest_kept > 0 ? st->src.longest_kept : 1;
    lim->T = context;
}

clf_status clf_beam_translate_dataset(clf_model *m, const clf_seqdata *ds, int32_t bos, int32_t eos,
                                      const clf_beam_options *o, int32_t ***out, clf_error *err)
{
    clf_model_dims d = clf_model_dims_get(m);
    size_t n = clf_seqdata_size(ds);
    int32_t **hyps = NULL;
    clf_seq_loader *L = NULL;
    clf_seq_batch *b = NULL;
    clf_beam_search *s = NULL;
    clf_beam_result res = {0};
    clf_status st;
    *out = NULL;
    if ((st = clf_beam_options_check(o, err)) != CLF_OK)
        return st;
    hyps = calloc(n > 0 ? n : 1, sizeof *hyps);
    if (hyps == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "translate: out of host memory");
        goto fail;
    }
    if (n == 0) {
        *out = hyps;
        return CLF_OK;
    }
    clf_seq_batching bo;
    clf_seq_batching_default(&bo);
    bo.batch = o->batch;
    bo.order = CLF_SEQ_ORDER_SORTED;
    if ((st = clf_seq_loader_create(ds, &bo, &L, err)) != CLF_OK ||
        (st = clf_seq_batch_create(L, &b, err)) != CLF_OK)
        goto fail;
    int N = (int)(n < (size_t)o->batch ? n : (size_t)o->batch);
    if ((st = clf_beam_search_create(N, o->beam, d.V, d.max_T, &s, err)) != CLF_OK)
        goto fail;
    while (clf_seq_loader_next(L, b)) {
        st = clf_beam_translate(m, s, b->src, b->src_keep, b->B, b->S, bos, eos, o, &res, err);
        if (st != CLF_OK)
            goto fail;
        for (int i = 0; i < b->B; i++) {
            const clf_beam_hyp *h = &res.hyp[i];
            int32_t *t = malloc(((size_t)h->len + 1) * sizeof *t);
            if (t == NULL) {
                st = clf_error_set(err, CLF_ERR_MEMORY, "translate: out of host memory");
                goto fail;
            }
            memcpy(t, h->tokens, (size_t)h->len * sizeof *t);
            t[h->len] = -1;
            hyps[b->index[i]] = t;
        }
    }
    *out = hyps;
    hyps = NULL;
fail:
    if (hyps != NULL) {
        for (size_t i = 0; i < n; i++)
            free(hyps[i]);
        free(hyps);
    }
    clf_beam_result_free(&res);
    clf_beam_search_destroy(s);
    clf_seq_batch_destroy(b);
    clf_seq_loader_destroy(L);
    return st;
}
