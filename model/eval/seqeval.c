/*
 * seqeval.c - loss, accuracy and BLEU of the encoder kinds over a whole
 * dataset (see seqeval.h for the exact rules).
 *
 * Design: one sorted loader per call (deterministic batches, similar
 * lengths together so padding stays small), host buffers sized from its
 * limits once, per-sentence or per-position losses read back per batch and
 * summed in double. BLEU reuses beam.h's dataset translation and bleu.h's
 * sacreBLEU statistics.
 *
 * Not here: when to evaluate (the trainer), printing.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/eval/seqeval.h"

void clf_seqeval_batching(int batch, int batch_tokens, clf_seq_batching *bo)
{
    clf_seq_batching_default(bo);
    bo->batch = batch > 0 ? batch : 0;
    bo->batch_tokens = batch_tokens > 0 ? batch_tokens : 0;
    if (bo->batch == 0 && bo->batch_tokens == 0)
        bo->batch = 32;
    bo->order = CLF_SEQ_ORDER_SORTED;
}

clf_status clf_seqeval_limits(const clf_seqdata *ds, const clf_seq_batching *bo,
                              clf_seq_limits *out, clf_error *err)
{
    clf_seq_loader *L = NULL;
    clf_status st = clf_seq_loader_create(ds, bo, &L, err);
    if (st != CLF_OK)
        return st;
    clf_seq_loader_limits(L, out);
    clf_seq_loader_destroy(L);
    return CLF_OK;
}

#define MAX_OF(a, b) ((a) > (b) ? (a) : (b))

void clf_seqeval_limits_merge(clf_seq_limits *a, const clf_seq_limits *b)
{
    a->max_B = MAX_OF(a->max_B, b->max_B);
    a->max_S = MAX_OF(a->max_S, b->max_S);
    a->max_T = MAX_OF(a->max_T, b->max_T);
    a->max_src_tokens = MAX_OF(a->max_src_tokens, b->max_src_tokens);
    a->max_tgt_tokens = MAX_OF(a->max_tgt_tokens, b->max_tgt_tokens);
}

clf_model_limits clf_seqeval_model_limits(const clf_seq_limits *sl)
{
    clf_model_limits lim = {.B = sl->max_B,
                            .S = sl->max_S,
                            .T = sl->max_T,
                            .src_tokens = sl->max_src_tokens,
                            .tgt_tokens = sl->max_tgt_tokens};
    return lim;
}

/* An eval forward over every sentence of ds (batched by bo) and, per
 * batch, `width` floats per row read back (pooled: the pooled vectors, else
 * the label probabilities), put at each sentence's input position in out. */
static clf_status per_sentence(clf_model *m, const clf_seqdata *ds, const clf_seq_batching *bo,
                               int pooled, size_t width, float *out, clf_error *err)
{
    clf_seq_loader *L = NULL;
    clf_seq_batch *b = NULL;
    float *buf = NULL;
    clf_status st = clf_seq_loader_create(ds, bo, &L, err);
    if (st == CLF_OK)
        st = clf_seq_batch_create(L, &b, err);
    if (st != CLF_OK)
        goto done;
    clf_seq_limits sl;
    clf_seq_loader_limits(L, &sl);
    if ((buf = malloc((size_t)sl.max_B * width * sizeof *buf)) == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
        goto done;
    }
    while (clf_seq_loader_next(L, b)) {
        const clf_batch in = clf_batch_classify(b->src, b->src_keep, NULL, b->B, b->S);
        if ((st = clf_model_set_batch(m, in, err)) != CLF_OK ||
            (st = clf_model_forward(m, 0, err)) != CLF_OK ||
            (st = pooled ? clf_model_pooled_read(m, buf, err)
                         : clf_model_probs_read(m, buf, err)) != CLF_OK)
            goto done;
        for (int i = 0; i < b->B; i++)
            memcpy(out + (size_t)b->index[i] * width, buf + (size_t)i * width, width * sizeof *buf);
    }
done:
    free(buf);
    clf_seq_batch_destroy(b);
    clf_seq_loader_destroy(L);
    return st;
}

clf_status clf_seqeval_probs(clf_model *m, const clf_seqdata *ds, const clf_seq_batching *bo,
                             float *probs, clf_error *err)
{
    const clf_model_dims d = clf_model_dims_get(m);
    if (d.kind != CLF_MODEL_ENCODER)
        return clf_error_set(err, CLF_ERR_ARG, "label probabilities need an encoder classifier");
    return per_sentence(m, ds, bo, 0, (size_t)d.labels, probs, err);
}

clf_status clf_seqeval_embed(clf_model *m, const clf_seqdata *ds, const clf_seq_batching *bo,
                             int normalize, float *vecs, clf_error *err)
{
    const clf_model_dims d = clf_model_dims_get(m);
    const size_t C = (size_t)d.C, n = clf_seqdata_size(ds);
    if (d.kind != CLF_MODEL_ENCODER)
        return clf_error_set(err, CLF_ERR_ARG, "sentence embeddings need an encoder-only model");
    clf_status st = per_sentence(m, ds, bo, 1, C, vecs, err);
    for (size_t i = 0; st == CLF_OK && normalize && i < n; i++) {
        float *v = vecs + i * C;
        double ss = 0;
        for (size_t j = 0; j < C; j++)
            ss += (double)v[j] * (double)v[j];
        /* as torch.nn.functional.normalize: x / max(|x|, 1e-12) */
        double scale = 1.0 / (sqrt(ss) > 1e-12 ? sqrt(ss) : 1e-12);
        for (size_t j = 0; j < C; j++)
            v[j] = (float)((double)v[j] * scale);
    }
    return st;
}

clf_status clf_seqeval_run(clf_model *m, const clf_seqdata *ds, const clf_seq_batching *bo,
                           clf_seqeval_result *out, clf_error *err)
{
    return clf_seqeval_run_shard(m, ds, bo, 0, 1, out, err);
}

clf_status clf_seqeval_run_shard(clf_model *m, const clf_seqdata *ds, const clf_seq_batching *bo,
                                 int shard, int shards, clf_seqeval_result *out, clf_error *err)
{
    clf_model_dims d = clf_model_dims_get(m);
    clf_seq_loader *L = NULL;
    clf_seq_batch *b = NULL;
    float *buf = NULL;
    clf_model_optim saved = clf_model_optim_get(m), o = saved;
    clf_status st;
    const int cls = d.kind == CLF_MODEL_ENCODER;
    double sum = 0.0;
    uint64_t count = 0, correct = 0, labelled = 0;
    memset(out, 0, sizeof *out);
    out->loss = NAN;
    out->accuracy = NAN;
    if (d.kind == CLF_MODEL_DECODER)
        return clf_error_set(err, CLF_ERR_ARG, "seqeval: a decoder-only model has no sentences");
    if (!clf_seqdata_has_targets(ds))
        return clf_error_set(err, CLF_ERR_ARG,
                             "evaluation needs targets or labels; the dataset has none");
    if (shards < 1 || shard < 0 || shard >= shards)
        return clf_error_set(err, CLF_ERR_ARG, "seqeval: shard %d of %d", shard, shards);
    o.label_smoothing = 0.0f;
    clf_model_optim_set(m, &o);
    if ((st = clf_seq_loader_create(ds, bo, &L, err)) != CLF_OK ||
        (st = clf_seq_batch_create(L, &b, err)) != CLF_OK)
        goto fail;
    clf_seq_limits sl;
    clf_seq_loader_limits(L, &sl);
    size_t cells =
        cls ? (size_t)sl.max_B * (size_t)(d.labels > 0 ? d.labels : 1) : (size_t)sl.max_tgt_tokens;
    buf = malloc((cells > 0 ? cells : 1) * sizeof *buf);
    if (buf == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "evaluation: out of host memory");
        goto fail;
    }
    for (long index = 0; clf_seq_loader_next(L, b); index++) {
        if (index % shards != shard)
            continue;
        const clf_batch view =
            clf_seq_batch_view(b, cls ? CLF_MODEL_ENCODER : CLF_MODEL_ENCODER_DECODER);
        if ((st = clf_model_set_batch(m, view, err)) != CLF_OK ||
            (st = clf_model_forward(m, 0, err)) != CLF_OK)
            goto fail;
        if (cls) {
            if ((st = clf_model_logits_read(m, buf, err)) != CLF_OK)
                goto fail;
            float *ls = malloc((size_t)b->B * sizeof *ls);
            if (ls == NULL) {
                st = clf_error_set(err, CLF_ERR_MEMORY, "evaluation: out of host memory");
                goto fail;
            }
            if ((st = clf_model_losses_read(m, ls, err)) != CLF_OK) {
                free(ls);
                goto fail;
            }
            for (int i = 0; i < b->B; i++) {
                if (b->labels[i] < 0)
                    continue;
                const float *z = buf + (size_t)i * (size_t)d.labels;
                int best = 0;
                for (int k = 1; k < d.labels; k++)
                    if (z[k] > z[best])
                        best = k;
                correct += best == b->labels[i];
                labelled++;
                sum += (double)ls[i];
                count++;
            }
            free(ls);
        } else {
            if ((st = clf_model_losses_read(m, buf, err)) != CLF_OK)
                goto fail;
            size_t n = (size_t)b->B * (size_t)b->T;
            for (size_t i = 0; i < n; i++)
                if (b->tgt_out[i] != CLF_MODEL_IGNORE_INDEX) {
                    sum += (double)buf[i];
                    count++;
                }
        }
    }
    out->loss = count > 0 ? sum / (double)count : NAN;
    out->targets = count;
    if (cls) {
        out->correct = correct;
        out->labelled = labelled;
        out->accuracy = labelled > 0 ? (double)correct / (double)labelled : NAN;
    }
fail:
    clf_model_optim_set(m, &saved);
    free(buf);
    clf_seq_batch_destroy(b);
    clf_seq_loader_destroy(L);
    return st;
}

clf_status clf_seqeval_detok(const clf_tokenizer *tok, const int32_t *tokens, size_t n, char **text,
                             clf_error *err)
{
    size_t k = 0;
    while (k < n && tokens[k] >= 0)
        k++;
    char *t = NULL;
    size_t len = 0;
    clf_status st = clf_tokenizer_decode(tok, tokens, k, &t, &len, err);
    if (st != CLF_OK)
        return st;
    size_t a = 0;
    while (a < len && isspace((unsigned char)t[a]))
        a++;
    while (len > a && isspace((unsigned char)t[len - 1]))
        len--;
    memmove(t, t + a, len - a);
    t[len - a] = '\0';
    *text = t;
    return CLF_OK;
}

void clf_seqeval_hyps_free(char **hyps, size_t n)
{
    if (hyps == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(hyps[i]);
    free(hyps);
}

clf_status clf_seqeval_bleu(clf_model *m, const clf_tokenizer *tok, const clf_seqdata *ds,
                            const char *const *refs, const clf_beam_options *o, clf_bleu_score *out,
                            char ***hyps_out, clf_error *err)
{
    size_t n = clf_seqdata_size(ds);
    int32_t **ids = NULL;
    char **hyps = NULL;
    char *ref = NULL;
    clf_status st;
    clf_bleu_options bo;
    clf_bleu_options_default(&bo);
    clf_bleu_stats stats;
    memset(&stats, 0, sizeof stats);
    if (hyps_out)
        *hyps_out = NULL;
    int32_t bos = clf_tokenizer_special(tok, CLF_SPECIAL_BOS);
    int32_t eos = clf_tokenizer_special(tok, CLF_SPECIAL_EOS);
    if (bos < 0 || eos < 0)
        return clf_error_set(err, CLF_ERR_ARG, "BLEU: the tokenizer has no bos/eos tokens");
    if (refs == NULL && !clf_seqdata_has_targets(ds))
        return clf_error_set(err, CLF_ERR_ARG,
                             "BLEU: no references (the dataset has no "
                             "targets)");
    if ((st = clf_beam_translate_dataset(m, ds, bos, eos, o, &ids, err)) != CLF_OK)
        return st;
    hyps = calloc(n > 0 ? n : 1, sizeof *hyps);
    if (hyps == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "BLEU: out of host memory");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        if ((st = clf_seqeval_detok(tok, ids[i], SIZE_MAX, &hyps[i], err)) != CLF_OK)
            goto fail;
        const char *r = NULL;
        if (refs != NULL) {
            r = refs[i];
        } else {
            const int32_t *y = NULL;
            int ny = 0;
            clf_seqdata_example(ds, i, NULL, NULL, &y, &ny, NULL);
            free(ref);
            ref = NULL;
            if ((st = clf_seqeval_detok(tok, y, (size_t)ny, &ref, err)) != CLF_OK)
                goto fail;
            r = ref;
        }
        if ((st = clf_bleu_add(&stats, &bo, hyps[i], &r, 1, err)) != CLF_OK)
            goto fail;
    }
    clf_bleu_compute(&stats, &bo, out);
    if (hyps_out) {
        *hyps_out = hyps;
        hyps = NULL;
    }
fail:
    free(ref);
    clf_seqeval_hyps_free(hyps, n);
    if (ids != NULL) {
        for (size_t i = 0; i < n; i++)
            free(ids[i]);
        free(ids);
    }
    return st;
}
