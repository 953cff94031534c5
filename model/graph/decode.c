/*
 * decode.c - inference with caches: prefill a prompt through the
 * batched forward, then one position per call; for an encoder-decoder,
 * encode the source once first; gather cache rows for beam search.
 *
 * Design: prefill and decode_step reuse mi_forward with cache = 1 (each
 * decoder block stores its new keys and values in its self-attention cache
 * and attends over everything cached so far; cross-attention reads the
 * keys and values of the encoder's output that clf_model_encode projected
 * once per decoder block) and last_only = 1 (the LM head runs only on the
 * last position of each sequence, one GEMM of B rows), then read the
 * logits [B, V] back. Positions are absolute: with learned or sinusoidal
 * positions a sequence cannot go past the planned length, so a GPT caller
 * that wants to continue re-prefills the most recent tokens (as nanoGPT
 * crops its context).
 *
 * cache_reorder gathers rows on the device (cl/attention.cl's cache_gather:
 * into the gather scratch, then back), only over the positions decoded so
 * far. The host remembers which encoded sentence each cross-cache row
 * holds (xrow); a reorder that leaves that unchanged (beams trading places
 * within their sentence, the common case) skips the cross caches, so a
 * beam step gathers only the self-attention caches.
 *
 * Not here: sampling (temperature, top-k, top-p live in sampler.c / the
 * CLI), beam search itself (its caller: length penalty, eos, n-best).
 */
#include <string.h>

#include "model/graph/model_internal.h"
#include "model/ops/ops.h"

static clf_status need_infer(const clf_model *m, clf_error *err)
{
    if (!(m->flags & CLF_MODEL_INFER))
        return clf_error_set(err, CLF_ERR_ARG,
                             "inference needs a model created with CLF_MODEL_INFER");
    if (m->s.kind == MI_KIND_ENCODER)
        return clf_error_set(err, CLF_ERR_ARG,
                             "an encoder classifier has no decoder: use clf_model_forward");
    return CLF_OK;
}

/* Stage n tokens (checked) into dst (the staging slot's start). */
static clf_status stage_tokens(clf_model *m, clf_buffer *dst, const int32_t *tokens, size_t n,
                               clf_error *err)
{
    int32_t *slot;
    clf_status st;
    if ((st = mi_check_tokens(m, tokens, n, "token", err)) != CLF_OK ||
        (st = mi_stage_take(m, &slot, err)) != CLF_OK)
        return st;
    memcpy(slot, tokens, n * sizeof *tokens);
    if ((st = clf_buffer_write_async(m->rt, dst, 0, slot, n * sizeof *slot, err)) != CLF_OK)
        return st;
    return mi_stage_commit(m, err);
}

static clf_status run_cached(clf_model *m, const int32_t *tokens, int B, int T, int pos0,
                             float *logits, clf_error *err)
{
    clf_status st;
    if ((st = need_infer(m, err)) != CLF_OK)
        return st;
    if (T < 1 || pos0 < 0 || pos0 + T > m->s.Tmax)
        return clf_error_set(err, CLF_ERR_ARG,
                             "positions [%d, %d) run past the longest target of %d tokens", pos0,
                             pos0 + T, m->s.Tmax);
    if (tokens == NULL && (T != 1 || m->picked != B))
        return clf_error_set(err, CLF_ERR_ARG,
                             "decoding %d rows from the device's picks: clf_model_greedy_pick "
                             "chose %d (call it after each prefill or decode step)",
                             B, m->picked);
    if ((st = mi_check_sizes(m, B, 0, T, err)) != CLF_OK)
        return st;
    if (m->s.kind == MI_KIND_ENCDEC && (m->enc_S == 0 || B != m->cache_B))
        return clf_error_set(err, CLF_ERR_ARG,
                             "decoding %d rows: the caches hold %d encoded rows (call "
                             "clf_model_encode, and clf_model_cache_reorder to change the rows)",
                             B, m->enc_S ? m->cache_B : 0);
    if (pos0 > 0 && (B != m->cache_B || pos0 > m->dec_len))
        return clf_error_set(err, CLF_ERR_ARG,
                             "decoding %d rows at position %d: the caches hold %d rows of %d "
                             "positions",
                             B, pos0, m->cache_B, m->dec_len);
    if (tokens != NULL &&
        (st = stage_tokens(m, m->tokens, tokens, (size_t)B * (size_t)T, err)) != CLF_OK)
        return st;
    m->picked = m->pickable = 0; /* the pass reads the picks; the next come from its logits */
    m->cur_T = T;
    m->cur_S = m->enc_S;
    m->has_targets = 0;
    m->packed = 0;
    m->count = 0;
    m->fwd_train = 0;
    m->fwd_done = 0; /* the logits buffer holds [B, V], not a batch's */
    if ((st = mi_forward(
             m, &(mi_pass){.B = B, .T = T, .pos0 = pos0, .flags = MI_PASS_CACHE | MI_PASS_LAST},
             err)) != CLF_OK)
        return st;
    m->cur_B = 0; /* no batch for clf_model_forward: the buffers hold decode state */
    m->cache_B = B;
    m->dec_len = pos0 + T;
    m->pickable = B;
    if (logits == NULL)
        return CLF_OK;
    size_t n = (size_t)B * (size_t)m->s.V;
    if ((st = clf_ptr_read(m->rt, m->logits, logits, n, err)) != CLF_OK)
        return st;
    m->stage_dirty[0] = m->stage_dirty[1] = 0;
    return CLF_OK;
}

clf_status clf_model_prefill(clf_model *m, const int32_t *tokens, int B, int T, float *logits,
                             clf_error *err)
{
    return run_cached(m, tokens, B, T, 0, logits, err);
}

clf_status clf_model_decode_step(clf_model *m, const int32_t *tokens, int B, int pos, float *logits,
                                 clf_error *err)
{
    if (tokens == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "decode_step: tokens is NULL");
    return run_cached(m, tokens, B, 1, pos, logits, err);
}

clf_status clf_model_greedy_pick(clf_model *m, int B, int32_t *picks, clf_event **done,
                                 clf_error *err)
{
    clf_status st;
    if (done != NULL)
        *done = NULL;
    if ((st = need_infer(m, err)) != CLF_OK)
        return st;
    if (picks == NULL || done == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "greedy_pick: picks and done are needed");
    if (m->pickable == 0 || B != m->pickable)
        return clf_error_set(err, CLF_ERR_ARG,
                             "greedy_pick: %d rows, where the logits of a prefill or decode step "
                             "not picked from yet hold %d",
                             B, m->pickable);
    const size_t V = (size_t)m->s.V;
    if ((st = clf_op_row_argmax(m->rt, mi_at(m->picks, 0), mi_at(m->tokens, 0), m->logits, V,
                                (size_t)B, V, err)) != CLF_OK ||
        (st = clf_buffer_read_async(m->rt, m->picks, 0, picks, (size_t)B * sizeof *picks, done,
                                    err)) != CLF_OK)
        return st;
    m->picked = B;
    m->pickable = 0;
    return CLF_OK;
}

clf_status clf_model_decode_picked(clf_model *m, int B, int pos, clf_error *err)
{
    return run_cached(m, NULL, B, 1, pos, NULL, err);
}

clf_status clf_model_prepare_cached(clf_model *m, int B, const int *rows, int n_rows,
                                    clf_error *err)
{
    clf_status st;
    if ((st = need_infer(m, err)) != CLF_OK)
        return st;
    if (m->s.kind != MI_KIND_DECODER)
        return clf_error_set(err, CLF_ERR_ARG, "clf_model_prepare_cached is for decoders");
    if ((st = mi_check_sizes(m, B, 0, 1, err)) != CLF_OK)
        return st;
    for (int i = 0; i < n_rows && st == CLF_OK; i++)
        if (rows[i] >= 1 && rows[i] <= m->s.Tmax)
            st = mi_nodes_prepare(
                m, &(mi_pass){.B = B, .T = rows[i], .flags = MI_PASS_CACHE | MI_PASS_LAST}, err);
    if (st == CLF_OK)
        st = clf_ops_load(m->rt, m->s.act16, err);
    if (st == CLF_OK)
        st = clf_ops_load_decode(m->rt, m->s.act16, err);
    return st;
}

clf_status clf_model_encode(clf_model *m, const int32_t *src, const int32_t *src_keep, int B, int S,
                            clf_error *err)
{
    clf_status st;
    int32_t *slot;
    if ((st = need_infer(m, err)) != CLF_OK)
        return st;
    if (m->s.kind != MI_KIND_ENCDEC)
        return clf_error_set(err, CLF_ERR_ARG, "clf_model_encode is for encoder-decoder models");
    if (src == NULL || S < 1)
        return clf_error_set(err, CLF_ERR_ARG, "encode %d x %d: expected tokens and S >= 1", B, S);
    if ((st = mi_check_sizes(m, B, S, 0, err)) != CLF_OK)
        return st;
    size_t n = (size_t)B * (size_t)S;
    if ((st = mi_check_tokens(m, src, n, "source token", err)) != CLF_OK ||
        (st = mi_stage_take(m, &slot, err)) != CLF_OK)
        return st;
    memcpy(slot, src, n * sizeof *src);
    for (size_t i = 0; i < n; i++)
        slot[n + i] = src_keep == NULL ? 1 : src_keep[i] != 0;
    if ((st = clf_buffer_write_async(m->rt, m->src, 0, slot, n * sizeof *slot, err)) != CLF_OK ||
        (st = clf_buffer_write_async(m->rt, m->src_keep, 0, slot + n, n * sizeof *slot, err)) !=
            CLF_OK)
        return st;
    if ((st = mi_stage_commit(m, err)) != CLF_OK)
        return st;
    m->cur_S = S;
    m->cur_T = 0;
    m->has_targets = 0;
    m->packed = 0;
    m->fwd_train = 0;
    m->fwd_done = 0;
    m->cache_B = 0;
    m->enc_S = 0;
    m->picked = m->pickable = 0;
    if ((st = mi_encode(m, B, S, err)) != CLF_OK)
        return st;
    for (int b = 0; b < B; b++)
        m->xrow[b] = b;
    m->cur_B = 0;
    m->cache_B = B;
    m->enc_S = S;
    m->dec_len = 0;
    return CLF_OK;
}

/* Gather rows of one cache-shaped buffer [Bmax, G, stride] in place through
 * the gather scratch: row i <- row index[i], the first len elements of
 * each group. */
static clf_status gather_inplace(clf_model *m, clf_buffer *buf, size_t Bn, size_t G, size_t len,
                                 size_t stride, clf_error *err)
{
    clf_ptr tmp = mi_at(m->gather, 0), p = mi_at(buf, 0);
    clf_status st = clf_op_cache_gather(m->rt, tmp, p, mi_at(m->index, 0), Bn, G, len, stride, err);
    if (st != CLF_OK)
        return st;
    return clf_op_cache_gather(m->rt, p, tmp, mi_nullptr(), Bn, G, len, stride, err);
}

clf_status clf_model_cache_reorder(clf_model *m, const int32_t *index, int Bn, clf_error *err)
{
    const mi_spec *s = &m->s;
    clf_status st;
    int32_t *slot;
    if ((st = need_infer(m, err)) != CLF_OK)
        return st;
    if (m->cache_B == 0)
        return clf_error_set(err, CLF_ERR_ARG, "cache_reorder: nothing is cached");
    if (index == NULL || Bn < 1 || Bn > s->B)
        return clf_error_set(err, CLF_ERR_ARG, "cache_reorder: %d rows, expected 1..%d", Bn, s->B);
    for (int i = 0; i < Bn; i++)
        if (index[i] < 0 || index[i] >= m->cache_B)
            return clf_error_set(err, CLF_ERR_ARG,
                                 "cache_reorder: index[%d] = %d, expected 0 <= row < %d", i,
                                 (int)index[i], m->cache_B);
    if (s->kind == MI_KIND_ENCDEC && (size_t)Bn * (size_t)m->enc_S > s->rows_src)
        return clf_error_set(err, CLF_ERR_ARG,
                             "cache_reorder: %d rows of %d source tokens exceed the planned %zu",
                             Bn, m->enc_S, s->rows_src);
    /* the cross caches move only if some row's sentence changes */
    int cross = 0;
    if (s->kind == MI_KIND_ENCDEC) {
        for (int i = 0; i < Bn; i++) {
            m->xrow_new[i] = m->xrow[index[i]];
            cross |= i >= m->cache_B || m->xrow_new[i] != m->xrow[i];
        }
        cross |= Bn != m->cache_B;
    }
    int self = m->dec_len > 0;
    if (self || cross) {
        if ((st = mi_stage_take(m, &slot, err)) != CLF_OK)
            return st;
        memcpy(slot, index, (size_t)Bn * sizeof *index);
        if ((st = clf_buffer_write_async(m->rt, m->index, 0, slot, (size_t)Bn * sizeof *slot,
                                         err)) != CLF_OK)
            return st;
        if ((st = mi_stage_commit(m, err)) != CLF_OK)
            return st;
    }
    const size_t NH = (size_t)s->NH, NKV = (size_t)s->NKV, HS = (size_t)s->HS, B = (size_t)Bn;
    const size_t Tst = (size_t)s->Tmax * HS, Sst = (size_t)s->Smax * HS;
    const size_t tl = (size_t)m->dec_len * HS, sl = (size_t)m->enc_S * HS;
    for (int l = m->dec.first; l < m->dec.first + m->dec.n; l++) {
        mi_block_a *a = &m->ba[l];
        if (self && ((st = gather_inplace(m, a->kcache, B, NKV, tl, Tst, err)) != CLF_OK ||
                     (st = gather_inplace(m, a->vcache, B, NKV, tl, Tst, err)) != CLF_OK))
            return st;
        if (cross && ((st = gather_inplace(m, a->xkcache, B, NH, sl, Sst, err)) != CLF_OK ||
                      (st = gather_inplace(m, a->xvcache, B, NH, sl, Sst, err)) != CLF_OK))
            return st;
    }
    if (cross) {
        /* the keep mask [B, S] of the encoded batch: rows of enc_S */
        if ((st = gather_inplace(m, m->src_keep, B, 1, (size_t)m->enc_S, (size_t)m->enc_S, err)) !=
            CLF_OK)
            return st;
        memcpy(m->xrow, m->xrow_new, (size_t)Bn * sizeof *m->xrow);
    }
    m->cache_B = Bn;
    m->picked = m->pickable = 0; /* rows moved: pick after the next step */
    return CLF_OK;
}
