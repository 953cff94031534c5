/*
 * test_beam.c - greedy decoding and beam search (model/infer/beam.h).
 *
 * On a mock model (no device): logits are a pure function of (sentence,
 * tokens fed so far), computed by the mock from its own per-row "cache"
 * (the sentence and the history of fed tokens), which clf_beam_fns' reorder
 * gathers exactly as clf_model_cache_reorder does. The mock also checks the
 * protocol: each row is fed position p only after positions 0..p-1, and a
 * reorder only names existing rows. References are computed without the
 * search's machinery, straight from the logits function:
 *   - beam 1 equals a plain greedy loop (argmax, lowest id on ties; eos
 *     forced at the maximum length), on random logits, several sentences;
 *   - a constructed case (V = 3) where greedy returns [a a] (p = 0.14) and
 *     beam 2 finds [b] (p = 0.36): the beam's log-probability is higher;
 *   - a beam wide enough that nothing is pruned (V = 4, max length 4, K =
 *     64 > the 40 possible hypotheses) equals exhaustive search over every
 *     hypothesis by logprob / len^alpha, for alpha 0 and alpha 1, on a
 *     sentence where the two alphas choose different lengths (found by
 *     scanning sentences with the exhaustive search), so the length penalty
 *     is seen to act;
 *   - every returned log-probability equals the sum recomputed from the
 *     logits function over the returned tokens + eos (1e-9): the histories
 *     survived the reorders;
 *   - eos: never inside a hypothesis; an eos that is never likely is
 *     forced at the maximum length (len = max_len - 1, finished_by_eos);
 *     without an eos (eos = -1) hypotheses run to max_len and equal greedy;
 *   - batched (9 sentences of different maximum lengths, K = 4, alpha 0.7)
 *     equals each sentence searched alone: same tokens, bit-identical
 *     scores.
 * On tiny random models on the device:
 *   - an encoder-decoder (V 20, 5 padded sources): clf_beam_translate with
 *     beam 1 equals a greedy loop written with clf_model_encode and
 *     clf_model_decode_step over the whole batch (argmax on the host);
 *     beam 3 batched equals beam 3 one sentence at a time (same tokens,
 *     scores within 1e-4); the search's log-probability of each hypothesis
 *     equals minus the sum of the model's teacher-forced per-position
 *     losses (clf_model_losses_read after an eval forward) within 1e-3
 *     + 1e-4 |value|;
 *   (the encoder-decoder again with multi-query self-attention: 1 K/V head)
 *   - a GPT (V 20), one with grouped-query attention (4 heads on 2 K/V
 *     heads, RoPE), and one with ALiBi and a sliding window of 3 keys (so
 *     decoding must ignore the cache's older positions): clf_beam_generate
 *     with beam 1 and no eos equals a greedy loop over clf_model_prefill /
 *     clf_model_decode_step, and beam 3 batched equals beam 3 one prompt at
 *     a time.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "model/graph/model.h"
#include "model/infer/beam.h"
#include "tests/test_util.h"

/* ---- the mock -------------------------------------------------------------------- */

#define MOCK_R 512
#define MOCK_H 64

enum { MOCK_RANDOM = 0, MOCK_TABLE };

typedef struct mock {
    int kind;
    int V;
    int32_t eos;
    double eos_bias; /* added to the eos logit (random kind) */
    uint64_t seed;
    int rows;
    int sent[MOCK_R];
    int len[MOCK_R];
    int32_t hist[MOCK_R][MOCK_H];
    int bad;      /* protocol violations */
    int reorders; /* calls */
} mock;

static uint64_t mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* logits after feeding hist[0..n) (hist[0] is bos) */
static void mock_logits(const mock *mk, int sentence, const int32_t *hist, int n, float *out)
{
    if (mk->kind == MOCK_TABLE) {
        /* V = 3: eos 0, a 1, b 2; probabilities by history */
        double p[3];
        if (n == 1) {
            p[0] = 0.1, p[1] = 0.5, p[2] = 0.4;
        } else if (n == 2 && hist[1] == 1) {
            p[0] = 0.3, p[1] = 0.35, p[2] = 0.35;
        } else if (n == 2 && hist[1] == 2) {
            p[0] = 0.9, p[1] = 0.05, p[2] = 0.05;
        } else {
            p[0] = 0.8, p[1] = 0.1, p[2] = 0.1;
        }
        for (int v = 0; v < 3; v++)
            out[v] = (float)log(p[v]);
        return;
    }
    uint64_t h = mix(mk->seed ^ (uint64_t)sentence * 0x1234567ull);
    for (int i = 0; i < n; i++)
        h = mix(h ^ (uint64_t)(hist[i] + 1));
    for (int v = 0; v < mk->V; v++) {
        uint64_t z = mix(h + (uint64_t)v * 0x9E37ull);
        out[v] = (float)(6.0 * ((double)(z >> 11) * 0x1.0p-53) - 3.0);
        if (v == mk->eos)
            out[v] += (float)mk->eos_bias;
    }
}

static clf_status mock_step(void *user, const int32_t *tokens, int B, int pos, float *logits,
                            clf_error *err)
{
    (void)err;
    mock *mk = user;
    if (B != mk->rows)
        mk->bad++;
    for (int i = 0; i < B && i < MOCK_R; i++) {
        if (mk->len[i] != pos || pos >= MOCK_H) {
            mk->bad++;
            continue;
        }
        mk->hist[i][mk->len[i]++] = tokens[i];
        mock_logits(mk, mk->sent[i], mk->hist[i], mk->len[i], logits + (size_t)i * mk->V);
    }
    return CLF_OK;
}

static clf_status mock_reorder(void *user, const int32_t *index, int B, clf_error *err)
{
    (void)err;
    mock *mk = user;
    static int sent[MOCK_R], len[MOCK_R];
    static int32_t hist[MOCK_R][MOCK_H];
    mk->reorders++;
    if (B > MOCK_R) {
        mk->bad++;
        return CLF_OK;
    }
    for (int i = 0; i < B; i++) {
        int j = index[i];
        if (j < 0 || j >= mk->rows) {
            mk->bad++;
            j = 0;
        }
        sent[i] = mk->sent[j];
        len[i] = mk->len[j];
        memcpy(hist[i], mk->hist[j], sizeof hist[i]);
    }
    memcpy(mk->sent, sent, (size_t)B * sizeof *sent);
    memcpy(mk->len, len, (size_t)B * sizeof *len);
    memcpy(mk->hist, hist, (size_t)B * sizeof hist[0]);
    mk->rows = B;
    return CLF_OK;
}

#define BOS 1000 /* the mock never interprets it beyond hashing */

/* "encode" sentences ids[0..N) and feed bos at position 0: first logits */
static void mock_start(mock *mk, const int *ids, int N, float *first)
{
    int32_t bos[MOCK_R];
    mk->rows = N;
    for (int i = 0; i < N; i++) {
        mk->sent[i] = ids[i];
        mk->len[i] = 0;
        bos[i] = BOS;
    }
    clf_error e;
    mock_step(mk, bos, N, 0, first, &e);
}

static clf_beam_fns mock_fns(mock *mk)
{
    clf_beam_fns f = {mk, mock_step, mock_reorder};
    return f;
}

static double log_softmax_at(const float *x, int V, int v)
{
    double mx = -INFINITY, s = 0.0;
    for (int i = 0; i < V; i++)
        mx = fmax(mx, x[i]);
    for (int i = 0; i < V; i++)
        s += exp((double)x[i] - mx);
    return (double)x[v] - mx - log(s);
}

/* summed log-probability of y[0..n) (+ eos when with_eos) for a sentence */
static double mock_logprob(const mock *mk, int sentence, const int32_t *y, int n, int with_eos)
{
    int32_t h[MOCK_H];
    float x[64];
    double lp = 0.0;
    h[0] = BOS;
    for (int i = 0; i <= n; i++) {
        if (i == n && !with_eos)
            break;
        mock_logits(mk, sentence, h, i + 1, x);
        lp += log_softmax_at(x, mk->V, i < n ? y[i] : mk->eos);
        if (i < n)
            h[i + 1] = y[i];
    }
    return lp;
}

/* plain greedy: argmax (lowest id on ties); eos forced at max_len */
static int ref_greedy(const mock *mk, int sentence, int max_len, int32_t *y)
{
    int32_t h[MOCK_H];
    float x[64];
    int n = 0;
    h[0] = BOS;
    for (int g = 1; g <= max_len; g++) {
        if (g == max_len && mk->eos >= 0)
            return n;
        mock_logits(mk, sentence, h, n + 1, x);
        int best = 0;
        for (int v = 1; v < mk->V; v++)
            if (x[v] > x[best])
                best = v;
        if (best == mk->eos)
            return n;
        y[n++] = best;
        h[n] = best;
    }
    return n;
}

/* exhaustive: every y over non-eos tokens of length n <= max_len - 1, + eos */
typedef struct best_t {
    double score;
    int n;
    int32_t y[MOCK_H];
} best_t;

static void ref_exhaustive_rec(const mock *mk, int sentence, int max_len, double alpha, int32_t *y,
                               int n, best_t *b)
{
    double lp = mock_logprob(mk, sentence, y, n, 1);
    double sc = lp / pow((double)(n + 1), alpha);
    if (sc > b->score) {
        b->score = sc;
        b->n = n;
        memcpy(b->y, y, (size_t)n * sizeof *y);
    }
    if (n + 1 >= max_len)
        return;
    for (int v = 0; v < mk->V; v++) {
        if (v == mk->eos)
            continue;
        y[n] = v;
        ref_exhaustive_rec(mk, sentence, max_len, alpha, y, n + 1, b);
    }
}

static best_t ref_exhaustive(const mock *mk, int sentence, int max_len, double alpha)
{
    best_t b;
    int32_t y[MOCK_H];
    memset(&b, 0, sizeof b);
    b.score = -INFINITY;
    ref_exhaustive_rec(mk, sentence, max_len, alpha, y, 0, &b);
    return b;
}

static int same_tokens(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof *a) == 0);
}

/* run a search on the mock for sentences ids[0..N) */
static void mock_search(mock *mk, clf_beam_search *s, const int *ids, int N, const int *max_len,
                        double alpha, clf_beam_result *res)
{
    static float first[MOCK_R * 64];
    clf_error e;
    mock_start(mk, ids, N, first);
    clf_beam_fns f = mock_fns(mk);
    tu_ok(clf_beam_search_run(s, &f, first, N, 1, max_len, mk->eos, alpha, res, &e), &e,
          "clf_beam_search_run");
}

static void test_greedy(uint64_t seed)
{
    mock mk;
    memset(&mk, 0, sizeof mk);
    mk.kind = MOCK_RANDOM, mk.V = 11, mk.eos = 2, mk.eos_bias = 0.5, mk.seed = seed;
    enum { N = 12 };
    int ids[N], ml[N];
    for (int i = 0; i < N; i++)
        ids[i] = i, ml[i] = 2 + (i * 5) % 17;
    clf_beam_search *s;
    clf_beam_result res = {0};
    clf_error e;
    tu_ok(clf_beam_search_create(N, 1, mk.V, 32, &s, &e), &e, "create");
    mock_search(&mk, s, ids, N, ml, 1.0, &res);
    int bad = 0, eos_inside = 0, lp_bad = 0;
    for (int i = 0; i < N; i++) {
        int32_t y[MOCK_H];
        int n = ref_greedy(&mk, i, ml[i], y);
        if (!same_tokens(res.hyp[i].tokens, res.hyp[i].len, y, n)) {
            bad++;
            fprintf(stderr, "  greedy sentence %d: got %d tokens, reference %d\n", i,
                    res.hyp[i].len, n);
        }
        for (int j = 0; j < res.hyp[i].len; j++)
            eos_inside += res.hyp[i].tokens[j] == mk.eos;
        double lp = mock_logprob(&mk, i, res.hyp[i].tokens, res.hyp[i].len, 1);
        lp_bad += fabs(lp - res.hyp[i].logprob) > 1e-9;
    }
    TU_CHECK(bad == 0 && mk.bad == 0,
             "beam 1 == greedy (%d of %d sentences differ, %d protocol "
             "errors)",
             bad, N, mk.bad);
    TU_CHECK(eos_inside == 0, "greedy hypotheses hold no eos (%d found)", eos_inside);
    TU_CHECK(lp_bad == 0, "greedy log-probabilities recomputed from the logits (%d differ)",
             lp_bad);
    clf_beam_result_free(&res);
    clf_beam_search_destroy(s);
}

static void test_constructed(void)
{
    mock mk;
    memset(&mk, 0, sizeof mk);
    mk.kind = MOCK_TABLE, mk.V = 3, mk.eos = 0;
    int id = 0, ml = 6;
    clf_beam_search *s1, *s2;
    clf_beam_result r1 = {0}, r2 = {0};
    clf_error e;
    tu_ok(clf_beam_search_create(1, 1, 3, 8, &s1, &e), &e, "create");
    tu_ok(clf_beam_search_create(1, 2, 3, 8, &s2, &e), &e, "create");
    mock_search(&mk, s1, &id, 1, &ml, 0.0, &r1);
    mock_search(&mk, s2, &id, 1, &ml, 0.0, &r2);
    int32_t aa[2] = {1, 1}, b[1] = {2};
    TU_CHECK(same_tokens(r1.hyp[0].tokens, r1.hyp[0].len, aa, 2) &&
                 fabs(r1.hyp[0].logprob - log(0.5 * 0.35 * 0.8)) < 1e-6,
             "greedy takes [a a] with p 0.14 (got %d tokens, logprob %.6f)", r1.hyp[0].len,
             r1.hyp[0].logprob);
    TU_CHECK(same_tokens(r2.hyp[0].tokens, r2.hyp[0].len, b, 1) &&
                 fabs(r2.hyp[0].logprob - log(0.4 * 0.9)) < 1e-6 &&
                 r2.hyp[0].logprob > r1.hyp[0].logprob + 0.5,
             "beam 2 finds [b] with p 0.36, above greedy (got %d tokens, logprob %.6f)",
             r2.hyp[0].len, r2.hyp[0].logprob);
    clf_beam_result_free(&r1);
    clf_beam_result_free(&r2);
    clf_beam_search_destroy(s1);
    clf_beam_search_destroy(s2);
}

static void test_exhaustive(uint64_t seed)
{
    mock mk;
    memset(&mk, 0, sizeof mk);
    mk.kind = MOCK_RANDOM, mk.V = 4, mk.eos = 0, mk.eos_bias = -0.5, mk.seed = seed;
    const int ml = 4;
    /* a sentence whose best hypothesis depends on the length penalty */
    int sentence = -1;
    best_t b0, b1;
    for (int i = 0; i < 2000 && sentence < 0; i++) {
        b0 = ref_exhaustive(&mk, i, ml, 0.0);
        b1 = ref_exhaustive(&mk, i, ml, 1.0);
        if (b0.n != b1.n)
            sentence = i;
    }
    TU_CHECK(sentence >= 0, "found a sentence where alpha 0 and alpha 1 choose different "
                            "lengths");
    if (sentence < 0)
        return;
    clf_beam_search *s;
    clf_beam_result res = {0};
    clf_error e;
    tu_ok(clf_beam_search_create(1, 64, mk.V, ml, &s, &e), &e, "create");
    for (int a = 0; a < 2; a++) {
        const best_t *b = a == 0 ? &b0 : &b1;
        mock_search(&mk, s, &sentence, 1, &ml, (double)a, &res);
        TU_CHECK(same_tokens(res.hyp[0].tokens, res.hyp[0].len, b->y, b->n) &&
                     fabs(res.hyp[0].score - b->score) < 1e-9 && res.hyp[0].finished_by_eos,
                 "unpruned beam == exhaustive search, alpha %d (sentence %d: got %d tokens "
                 "score %.9f, reference %d tokens score %.9f)",
                 a, sentence, res.hyp[0].len, res.hyp[0].score, b->n, b->score);
    }
    TU_CHECK(mk.bad == 0 && mk.reorders > 0, "protocol (errors %d, reorders %d)", mk.bad,
             mk.reorders);
    clf_beam_result_free(&res);
    clf_beam_search_destroy(s);
}

static void test_eos(uint64_t seed)
{
    mock mk;
    memset(&mk, 0, sizeof mk);
    mk.kind = MOCK_RANDOM, mk.V = 9, mk.eos = 3, mk.eos_bias = -40.0, mk.seed = seed;
    enum { N = 4 };
    int ids[N] = {0, 1, 2, 3}, ml[N] = {1, 2, 5, 9};
    clf_beam_search *s;
    clf_beam_result res = {0};
    clf_error e;
    tu_ok(clf_beam_search_create(N, 3, mk.V, 16, &s, &e), &e, "create");
    mock_search(&mk, s, ids, N, ml, 1.0, &res);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        bad += res.hyp[i].len != ml[i] - 1 || !res.hyp[i].finished_by_eos;
        for (int j = 0; j < res.hyp[i].len; j++)
            bad += res.hyp[i].tokens[j] == mk.eos;
    }
    TU_CHECK(bad == 0, "an unlikely eos is forced at the maximum length (%d problems)", bad);
    /* no eos at all */
    mk.eos = -1;
    clf_beam_search_destroy(s);
    tu_ok(clf_beam_search_create(N, 1, mk.V, 16, &s, &e), &e, "create");
    mock_search(&mk, s, ids, N, ml, 1.0, &res);
    bad = 0;
    for (int i = 0; i < N; i++) {
        int32_t y[MOCK_H];
        int n = ref_greedy(&mk, ids[i], ml[i], y);
        bad += n != ml[i] || res.hyp[i].finished_by_eos ||
               !same_tokens(res.hyp[i].tokens, res.hyp[i].len, y, n);
    }
    TU_CHECK(bad == 0, "without eos, hypotheses run to max_len and equal greedy (%d differ)", bad);
    clf_beam_result_free(&res);
    clf_beam_search_destroy(s);
}

static void test_batched(uint64_t seed)
{
    mock mk;
    memset(&mk, 0, sizeof mk);
    mk.kind = MOCK_RANDOM, mk.V = 13, mk.eos = 5, mk.eos_bias = 1.0, mk.seed = seed;
    enum { N = 9, K = 4 };
    int ids[N], ml[N];
    for (int i = 0; i < N; i++)
        ids[i] = 100 + i, ml[i] = 1 + (i * 7) % 15;
    clf_beam_search *s;
    clf_beam_result all = {0}, one = {0};
    clf_error e;
    tu_ok(clf_beam_search_create(N, K, mk.V, 16, &s, &e), &e, "create");
    mock_search(&mk, s, ids, N, ml, 0.7, &all);
    int bad = 0, lp_bad = 0;
    for (int i = 0; i < N; i++) {
        mock_search(&mk, s, &ids[i], 1, &ml[i], 0.7, &one);
        if (!same_tokens(all.hyp[i].tokens, all.hyp[i].len, one.hyp[0].tokens, one.hyp[0].len) ||
            all.hyp[i].score != one.hyp[0].score || all.hyp[i].logprob != one.hyp[0].logprob)
            bad++;
        double lp = mock_logprob(&mk, ids[i], all.hyp[i].tokens, all.hyp[i].len,
                                 all.hyp[i].finished_by_eos);
        lp_bad += fabs(lp - all.hyp[i].logprob) > 1e-9;
    }
    TU_CHECK(bad == 0 && mk.bad == 0,
             "batched == one by one, beam %d (%d of %d differ, %d "
             "protocol errors)",
             K, bad, N, mk.bad);
    TU_CHECK(lp_bad == 0, "beam log-probabilities recomputed from the logits (%d differ)", lp_bad);
    clf_beam_result_free(&all);
    clf_beam_result_free(&one);
    clf_beam_search_destroy(s);
}

/* ---- tiny models on the device ----------------------------------------------------- */

static const char *S2S_YAML = "model:\n"
                              "  kind: encoder-decoder\n"
                              "  vocab: {tokenizer: char}\n"
                              "  context: 16\n"
                              "  embedding: {dim: 16, scale: true}\n"
                              "  positional: {type: sinusoidal}\n"
                              "  blocks:\n"
                              "    repeat: 1\n"
                              "    attention: {heads: 2}\n"
                              "    ffn: {hidden: 32, activation: relu}\n"
                              "    norm: {placement: post}\n"
                              "  share_embeddings: true\n"
                              "  head: {type: lm}\n";

static const char *GPT_YAML = "model:\n"
                              "  kind: decoder\n"
                              "  vocab: {tokenizer: char}\n"
                              "  context: 16\n"
                              "  embedding: {dim: 16}\n"
                              "  blocks: {repeat: 1, attention: {heads: 2}, ffn: {hidden: 32}}\n";

/* ALiBi and a sliding window of 3 keys (the cache holds more: decoding must
 * look at its last 3 positions only) */
static const char *GPT_ALIBI_YAML = "model:\n"
                                    "  kind: decoder\n"
                                    "  vocab: {tokenizer: char}\n"
                                    "  context: 16\n"
                                    "  embedding: {dim: 24}\n"
                                    "  positional: {type: alibi}\n"
                                    "  blocks: {repeat: 2, attention: {heads: 3, window: 3}, ffn: "
                                    "{hidden: 32}}\n";

/* Grouped-query attention (4 query heads on 2 K/V heads) with RoPE: the
 * caches hold 2 heads, which the search's reorders gather */
static const char *GPT_GQA_YAML = "model:\n"
                                  "  kind: decoder\n"
                                  "  vocab: {tokenizer: char}\n"
                                  "  context: 16\n"
                                  "  embedding: {dim: 16}\n"
                                  "  positional: {type: rope}\n"
                                  "  blocks: {repeat: 2, attention: {heads: 4, kv_heads: 2}, ffn: "
                                  "{hidden: 32}}\n";

static int argmax(const float *x, int V)
{
    int b = 0;
    for (int v = 1; v < V; v++)
        if (x[v] > x[b])
            b = v;
    return b;
}

static void test_translator(clf_runtime *rt, uint64_t seed, const char *const *sets, int n_sets)
{
    enum { N = 5, S = 9, V = 20, K = 3, T = 12 };
    const int32_t PAD = 0, BOSID = 1, EOSID = 2;
    clf_model_config cfg;
    clf_error e;
    tu_ok(clf_config_parse_string(S2S_YAML, "test_beam.yaml", sets, n_sets, &cfg, &e), &e,
          "config");
    cfg.train.seed = seed;
    clf_model_limits lim = {N * K, S, T, 0, 0, 0, 0};
    clf_model *m;
    tu_ok(clf_model_create_ex(rt, &cfg, V, &lim, CLF_MODEL_INFER, &m, &e), &e, "create");
    tu_ok(clf_model_params_init(m, seed, &e), &e, "init");
    int32_t src[N * S], keep[N * S];
    tu_rng r = tu_rng_new(41);
    for (int i = 0; i < N; i++) {
        int n = 3 + (int)(tu_u32(&r) % 6);
        for (int j = 0; j < S; j++) {
            src[i * S + j] = j < n ? 6 + (int32_t)(tu_u32(&r) % (V - 6)) : j == n ? EOSID : PAD;
            keep[i * S + j] = j <= n;
        }
    }
    clf_beam_options o;
    clf_beam_options_default(&o);
    o.max_len_a = 0.0;
    o.max_len_b = 10;
    /* greedy by hand over the whole batch */
    int32_t y[N][T], tok[N];
    int len[N], done[N];
    float *logits = malloc((size_t)N * K * V * sizeof *logits);
    tu_ok(clf_model_encode(m, src, keep, N, S, &e), &e, "encode");
    for (int i = 0; i < N; i++)
        tok[i] = BOSID, len[i] = 0, done[i] = 0;
    for (int pos = 0; pos < o.max_len_b; pos++) {
        tu_ok(clf_model_decode_step(m, tok, N, pos, logits, &e), &e, "decode_step");
        for (int i = 0; i < N; i++) {
            if (done[i])
                continue;
            int t = pos + 1 == o.max_len_b ? EOSID : argmax(logits + (size_t)i * V, V);
            if (t == EOSID)
                done[i] = 1;
            else
                y[i][len[i]++] = t;
            tok[i] = t;
        }
    }
    clf_beam_result res = {0}, one = {0};
    tu_ok(clf_beam_translate(m, NULL, src, keep, N, S, BOSID, EOSID, &o, &res, &e), &e,
          "translate beam 1");
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += !same_tokens(res.hyp[i].tokens, res.hyp[i].len, y[i], len[i]);
    TU_CHECK(bad == 0, "translator: beam 1 == greedy by hand (%d of %d differ)", bad, N);
    /* beam 3: batched vs one by one */
    o.beam = K;
    tu_ok(clf_beam_translate(m, NULL, src, keep, N, S, BOSID, EOSID, &o, &res, &e), &e,
          "translate beam 3");
    bad = 0;
    for (int i = 0; i < N; i++) {
        tu_ok(clf_beam_translate(m, NULL, src + i * S, keep + i * S, 1, S, BOSID, EOSID, &o, &one,
                                 &e),
              &e, "translate one");
        if (!same_tokens(res.hyp[i].tokens, res.hyp[i].len, one.hyp[0].tokens, one.hyp[0].len) ||
            fabs(res.hyp[i].score - one.hyp[0].score) > 1e-4)
            bad++;
    }
    TU_CHECK(bad == 0, "translator: beam %d batched == one by one (%d of %d differ)", K, bad, N);
    /* the search's log-probabilities against teacher-forced losses */
    int32_t tin[N * T], tout[N * T];
    int Tn = 1;
    for (int i = 0; i < N; i++)
        Tn = res.hyp[i].len + 1 > Tn ? res.hyp[i].len + 1 : Tn;
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < Tn; j++) {
            int n = res.hyp[i].len;
            tin[i * Tn + j] = j == 0 ? BOSID : j <= n ? res.hyp[i].tokens[j - 1] : PAD;
            tout[i * Tn + j] = j < n ? res.hyp[i].tokens[j] : j == n ? EOSID : -1;
        }
    }
    tu_ok(clf_model_set_batch(m, clf_batch_seq2seq(src, keep, tin, tout, N, S, Tn), &e), &e,
          "set_batch");
    tu_ok(clf_model_forward(m, 0, &e), &e, "forward");
    float losses[N * T];
    tu_ok(clf_model_losses_read(m, losses, &e), &e, "losses");
    double worst = 0.0;
    for (int i = 0; i < N; i++) {
        double lp = 0.0;
        for (int j = 0; j <= res.hyp[i].len; j++)
            lp -= losses[i * Tn + j];
        double d = fabs(lp - res.hyp[i].logprob) / (1e-3 + 1e-4 * fabs(lp));
        worst = d > worst ? d : worst;
    }
    TU_CHECK(worst <= 1.0,
             "translator: search log-probabilities == teacher-forced losses (worst "
             "%.3f of the tolerance)",
             worst);
    clf_beam_result_free(&res);
    clf_beam_result_free(&one);
    free(logits);
    clf_model_destroy(m);
}

static void test_gpt(clf_runtime *rt, uint64_t seed, const char *yaml, const char *what)
{
    enum { N = 3, T0 = 4, V = 20, NEW = 8 };
    clf_model_config cfg;
    clf_error e;
    tu_ok(clf_config_parse_string(yaml, "test_beam_gpt.yaml", NULL, 0, &cfg, &e), &e, "config");
    clf_model *m;
    tu_ok(clf_model_create(rt, &cfg, V, 3 * N, CLF_MODEL_INFER, &m, &e), &e, "create");
    tu_ok(clf_model_params_init(m, seed, &e), &e, "init");
    int32_t prompts[N * T0], tok[N], y[N][NEW];
    tu_rng r = tu_rng_new(43);
    for (int i = 0; i < N * T0; i++)
        prompts[i] = (int32_t)(tu_u32(&r) % V);
    float logits[N * V];
    tu_ok(clf_model_prefill(m, prompts, N, T0, logits, &e), &e, "prefill");
    for (int g = 0; g < NEW; g++) {
        for (int i = 0; i < N; i++)
            y[i][g] = tok[i] = argmax(logits + i * V, V);
        if (g + 1 < NEW)
            tu_ok(clf_model_decode_step(m, tok, N, T0 + g, logits, &e), &e, "decode_step");
    }
    clf_beam_options o;
    clf_beam_options_default(&o);
    o.max_len_b = NEW;
    clf_beam_result res = {0};
    tu_ok(clf_beam_generate(m, NULL, prompts, N, T0, -1, &o, &res, &e), &e, "generate");
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += !same_tokens(res.hyp[i].tokens, res.hyp[i].len, y[i], NEW);
    TU_CHECK(bad == 0, "%s: beam 1 without eos == greedy by hand (%d of %d differ)", what, bad, N);
    /* beam 3: the batch against each prompt alone */
    clf_beam_result one = {0};
    o.beam = 3;
    tu_ok(clf_beam_generate(m, NULL, prompts, N, T0, -1, &o, &res, &e), &e, "generate beam 3");
    bad = 0;
    for (int i = 0; i < N; i++) {
        tu_ok(clf_beam_generate(m, NULL, prompts + i * T0, 1, T0, -1, &o, &one, &e), &e,
              "generate one");
        if (!same_tokens(res.hyp[i].tokens, res.hyp[i].len, one.hyp[0].tokens, one.hyp[0].len) ||
            fabs(res.hyp[i].score - one.hyp[0].score) > 1e-4)
            bad++;
    }
    TU_CHECK(bad == 0, "%s: beam 3 batched == one by one (%d of %d differ)", what, bad, N);
    clf_beam_result_free(&one);
    clf_beam_result_free(&res);
    clf_model_destroy(m);
}

int main(void)
{
    uint64_t seed = tu_seed();
    test_greedy(seed);
    test_constructed();
    test_exhaustive(seed);
    test_eos(seed);
    test_batched(seed);
    {
        clf_beam_options o;
        clf_error e;
        clf_beam_options_default(&o);
        o.beam = 0;
        TU_CHECK(clf_beam_options_check(&o, &e) == CLF_ERR_ARG, "beam 0 is refused");
    }
    clf_runtime *rt = tu_runtime();
    printf("translator, multi-head attention\n");
    test_translator(rt, seed, NULL, 0);
    /* multi-query self-attention: the self-attention caches hold 1 head, the
     * cross-attention caches 2 */
    const char *mqa[] = {"model.blocks.attention.kv_heads=1"};
    printf("translator, multi-query self-attention\n");
    test_translator(rt, seed, mqa, 1);
    test_gpt(rt, seed, GPT_YAML, "GPT");
    test_gpt(rt, seed, GPT_ALIBI_YAML, "GPT with ALiBi and a window of 3");
    test_gpt(rt, seed, GPT_GQA_YAML, "GPT with grouped-query attention (4 heads on 2 K/V heads)");
    clf_runtime_destroy(rt);
    return tu_finish();
}
