/*
 * model_decode.c - inference with a KV cache: prefill a prompt through the
 * batched forward, then one position per call.
 *
 * Design: both calls reuse mi_forward with cache = 1 (each layer stores its
 * new keys and values in its cache and attends over everything cached so
 * far) and last_only = 1 (the LM head runs only on the last position of
 * each sequence, one GEMM of B rows), then read the logits [B, V] back.
 * Positions are absolute: with learned or sinusoidal positions a sequence
 * cannot go past the context, so a caller that wants to continue re-prefills
 * the most recent tokens (as nanoGPT crops its context).
 *
 * Not here: sampling (temperature, top-k, top-p live in the CLI), beam
 * search (a later issue).
 */
#include "model_internal.h"

static clf_status run_cached(clf_model *m, const int32_t *tokens, int B, int T, int pos0,
                             float *logits, clf_error *err)
{
    clf_status st;
    if (!(m->flags & CLF_MODEL_INFER))
        return clf_error_set(err, CLF_ERR_ARG,
                             "inference needs a model created with CLF_MODEL_INFER");
    if (pos0 < 0 || pos0 + T > m->s.T)
        return clf_error_set(err, CLF_ERR_ARG,
                             "positions [%d, %d) run past the context of %d tokens", pos0,
                             pos0 + T, m->s.T);
    if ((st = clf_model_set_batch(m, tokens, NULL, B, T, err)) != CLF_OK)
        return st;
    if ((st = mi_forward(m, B, T, pos0, 0, 1, 1, err)) != CLF_OK)
        return st;
    if (logits == NULL)
        return CLF_OK;
    size_t n = (size_t)B * (size_t)m->s.V;
    if ((st = clf_buffer_read(m->rt, m->logits, 0, logits, n * sizeof(float), err)) != CLF_OK)
        return st;
    m->stage_dirty[0] = m->stage_dirty[1] = 0;
    return CLF_OK;
}

clf_status clf_model_prefill(clf_model *m, const int32_t *tokens, int B, int T, float *logits,
                             clf_error *err)
{
    return run_cached(m, tokens, B, T, 0, logits, err);
}

clf_status clf_model_decode_step(clf_model *m, const int32_t *tokens, int B, int pos,
                                 float *logits, clf_error *err)
{
    return run_cached(m, tokens, B, 1, pos, logits, err);
}
