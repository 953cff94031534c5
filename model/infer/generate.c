/*
 * generate.c - the generation loop of generate.h: prefill, decode steps,
 * the sliding window, one host buffer for the sequence and one for the
 * logits.
 */
#include <stdlib.h>
#include <string.h>

#include "model/infer/generate.h"
#include "runtime/util.h"

/* The token a prompt-less generation starts from: a newline, else 0. */
static int32_t start_token(const clf_tokenizer *tok)
{
    int32_t *nl = NULL, t = 0;
    size_t k = 0;
    if (clf_tokenizer_encode(tok, "\n", 1, &nl, &k, NULL) == CLF_OK && k == 1)
        t = nl[0];
    free(nl);
    return t;
}

/* Token i of the generation, tk (-1: the logits were all NaN): appended to
 * seq[*n], counted and handed to on_token; *stop = 1 where it says stop. */
static clf_status emit(const clf_tokenizer *tok, int32_t *seq, size_t *n, int tk, long i,
                       clf_generate_fn on_token, void *user, clf_generate_stats *stats, int *stop,
                       clf_error *err)
{
    if (tk < 0)
        return clf_error_set(err, CLF_ERR_NUMERIC,
                             "generate: the model produced no valid logits (NaN) at token %ld", i);
    seq[(*n)++] = tk;
    stats->tokens++;
    const char *piece = NULL;
    size_t plen = 0;
    if (!clf_tokenizer_piece(tok, tk, &piece, &plen))
        piece = "", plen = 0;
    *stop = on_token != NULL && on_token(user, tk, piece, plen) != 0;
    return CLF_OK;
}

/* Greedy decoding (temperature 0) with the choice on the device
 * (clf_model_greedy_pick): each step is enqueued before the host waits for
 * the token of the step before it, so the device does not wait for the
 * host; the tokens are the sampler's (model.h). seq[0..n) holds the prompt
 * window whose prefill left its logits on the device, pos its length.
 * *fallback = 1, with nothing done, where the device cannot pick. */
static clf_status greedy_on_device(clf_model *m, const clf_tokenizer *tok, int32_t *seq, size_t n,
                                   int T, int pos, long n_tokens, clf_generate_fn on_token,
                                   void *user, clf_generate_stats *stats, int *fallback,
                                   clf_error *err)
{
    int32_t pick[2] = {0, 0};
    clf_event *ev[2] = {NULL, NULL};
    int cur = 0;
    clf_status st = clf_model_greedy_pick(m, 1, &pick[0], &ev[0], err);
    if (st == CLF_ERR_UNSUPPORTED) {
        *fallback = 1;
        return CLF_OK;
    }
    for (long i = 0; st == CLF_OK; i++, cur ^= 1) {
        /* the next step, from this one's pick, while the host waits */
        const int ahead = i + 1 < n_tokens && pos < T;
        if (ahead &&
            ((st = clf_model_decode_picked(m, 1, pos, err)) != CLF_OK ||
             (st = clf_model_greedy_pick(m, 1, &pick[cur ^ 1], &ev[cur ^ 1], err)) != CLF_OK))
            break;
        st = clf_event_wait(ev[cur], err); /* and releases it */
        ev[cur] = NULL;
        if (st != CLF_OK)
            break;
        int stop = 0;
        if ((st = emit(tok, seq, &n, pick[cur], i, on_token, user, stats, &stop, err)) != CLF_OK ||
            stop || i + 1 == n_tokens)
            break;
        if (ahead)
            pos++;
        else { /* the cache is full: slide by re-prefilling the last T - 1 tokens */
            const int k = T > 1 ? T - 1 : 1;
            if ((st = clf_model_prefill(m, seq + n - (size_t)k, 1, k, NULL, err)) == CLF_OK)
                st = clf_model_greedy_pick(m, 1, &pick[cur ^ 1], &ev[cur ^ 1], err);
            pos = k;
            stats->slides++;
        }
    }
    for (int c = 0; c < 2; c++) /* a read still under way writes into pick[] */
        clf_event_wait(ev[c], NULL);
    return st;
}

clf_status clf_generate(clf_model *m, const clf_tokenizer *tok, const char *prompt,
                        size_t prompt_len, long n_tokens, const clf_sampler_options *so,
                        clf_generate_fn on_token, void *user, clf_generate_stats *stats,
                        clf_error *err)
{
    clf_generate_stats none;
    if (stats == NULL)
        stats = &none;
    memset(stats, 0, sizeof *stats);
    if (m == NULL || tok == NULL || (prompt == NULL && prompt_len > 0) || n_tokens < 0)
        return clf_error_set(err, CLF_ERR_ARG,
                             "generate: a model, a tokenizer and n_tokens >= 0 expected");
    const clf_model_dims d = clf_model_dims_get(m);
    const int T = d.T, V = d.V;
    int32_t *ids = NULL, *seq = NULL;
    float *logits = NULL;
    clf_sampler *smp = NULL;
    size_t n_prompt = 0;
    clf_status st =
        clf_tokenizer_encode(tok, prompt_len > 0 ? prompt : "", prompt_len, &ids, &n_prompt, err);
    if (st != CLF_OK) {
        /* the prompt is the caller's argument: text the tokenizer cannot take
         * (invalid UTF-8, a character outside the vocabulary) is a bad
         * argument either way */
        clf_error_prefix(err, "prompt");
        if (st == CLF_ERR_FORMAT) {
            st = CLF_ERR_ARG;
            if (err != NULL)
                err->status = CLF_ERR_ARG;
        }
        return st;
    }
    const size_t cap = (n_prompt > 0 ? n_prompt : 1) + (size_t)n_tokens;
    seq = malloc(cap * sizeof *seq);
    logits = malloc((size_t)V * sizeof *logits);
    if (seq == NULL || logits == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "generate: out of host memory");
        goto done;
    }
    size_t n = 0;
    if (n_prompt == 0)
        seq[n++] = start_token(tok);
    else {
        memcpy(seq, ids, n_prompt * sizeof *seq);
        n = n_prompt;
    }
    if ((st = clf_sampler_create(V, so, &smp, err)) != CLF_OK)
        goto done;
    size_t w = n < (size_t)T ? n : (size_t)T; /* tokens in the cache */
    /* the prompt's, one position's and a slide's products chosen before the
     * first token is out (a search would otherwise stop the text midway) */
    const int rows[3] = {(int)w, 1, (size_t)n_tokens > (size_t)T - w ? T - 1 : 0};
    if (n_tokens > 0 && (st = clf_model_prepare_cached(m, 1, rows, 3, err)) != CLF_OK)
        goto done;
    const double t0 = clf_now_seconds();
    if (n_tokens > 0 && (st = clf_model_prefill(m, seq + n - w, 1, (int)w, logits, err)) != CLF_OK)
        goto done;
    int pos = (int)w;
    int host = so->temperature != 0.0;
    if (!host && n_tokens > 0) {
        st = greedy_on_device(m, tok, seq, n, T, pos, n_tokens, on_token, user, stats, &host, err);
        if (st != CLF_OK || !host)
            n_tokens = 0; /* done (the statistics below still count) */
    }
    for (long i = 0; i < n_tokens; i++) {
        const int tk = clf_sampler_sample(smp, logits, V);
        int stop = 0;
        if ((st = emit(tok, seq, &n, tk, i, on_token, user, stats, &stop, err)) != CLF_OK)
            goto done;
        if (stop)
            break;
        if (i + 1 == n_tokens)
            break;
        if (pos < T) {
            int32_t one = tk;
            if ((st = clf_model_decode_step(m, &one, 1, pos, logits, err)) != CLF_OK)
                goto done;
            pos++;
        } else { /* the cache is full: slide by re-prefilling the last T - 1 tokens */
            const int k = T > 1 ? T - 1 : 1;
            if ((st = clf_model_prefill(m, seq + n - (size_t)k, 1, k, logits, err)) != CLF_OK)
                goto done;
            pos = k;
            stats->slides++;
        }
    }
    stats->seconds = clf_now_seconds() - t0;
done:
    free(ids);
    free(seq);
    free(logits);
    clf_sampler_destroy(smp);
    return st;
}
