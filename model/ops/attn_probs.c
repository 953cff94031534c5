/*
 * attn_probs.c - the probabilities of a fused attention (clf_op_attn_probs).
 *
 * Fused attention computes y = P V block by block with an online softmax
 * and keeps no P. Run the same forward with the values replaced by HS
 * columns of the identity, value row s = e_(s - j0) for j0 <= s < j0 + HS
 * (else 0): y's row t is then P[t, j0 .. j0 + HS), computed by the very
 * arithmetic the model's attention uses (scores, masks, biases, the
 * softmax), and ceil(S / HS) launches give every column. The kernel reads
 * keys and values with one layout, so the keys are copied into new rows
 * beside the values: [S, 2 KVH HS], keys first.
 */
#include <stdlib.h>
#include <string.h>

#include "model/ops/ops.h"

clf_status clf_op_attn_probs(clf_runtime *rt, const clf_attn_fused *a, float *out, clf_error *err)
{
    if (a->t != CLF_DT_F32)
        return clf_error_set(err, CLF_ERR_ARG, "attention probabilities: float32 storage only");
    const size_t T = a->T, S = a->S, NH = a->NH, HS = a->HS;
    const size_t KVH = a->kv_heads ? a->kv_heads : NH;
    const size_t hstride = a->kv_head_stride ? a->kv_head_stride : HS;
    if (T == 0 || S == 0 || NH == 0 || HS == 0)
        return clf_error_set(err, CLF_ERR_ARG, "attention probabilities: empty sizes");
    const size_t row = 2 * KVH * HS;
    /* the first sequence's keys, as the forward reads them */
    const size_t kspan = (S - 1) * a->kv_stride + (KVH - 1) * hstride + HS;
    float *kh = malloc(kspan * sizeof *kh);
    float *kv = calloc(S * row, sizeof *kv);
    float *y = malloc(T * NH * HS * sizeof *y);
    clf_buffer *kvb = NULL, *yb = NULL, *lseb = NULL;
    clf_status st = CLF_OK;
    if (kh == NULL || kv == NULL || y == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "attention probabilities: out of host memory");
        goto done;
    }
    if ((st = clf_ptr_read(rt, a->k, kh, kspan, err)) != CLF_OK ||
        (st = clf_buffer_create(rt, S * row * sizeof(float), &kvb, err)) != CLF_OK ||
        (st = clf_buffer_create(rt, T * NH * HS * sizeof(float), &yb, err)) != CLF_OK ||
        (st = clf_buffer_create(rt, NH * T * sizeof(float), &lseb, err)) != CLF_OK)
        goto done;
    for (size_t s = 0; s < S; s++)
        for (size_t g = 0; g < KVH; g++)
            memcpy(kv + s * row + g * HS, kh + s * a->kv_stride + g * hstride, HS * sizeof *kv);
    clf_attn_fused p = *a;
    p.B = 1;
    p.k = (clf_ptr){kvb, 0};
    p.v = (clf_ptr){kvb, KVH * HS};
    p.kv_stride = row;
    p.kv_head_stride = HS;
    p.kv_batch_stride = S * row;
    p.y = (clf_ptr){yb, 0};
    p.y_stride = NH * HS;
    p.lse = (clf_ptr){lseb, 0};
    p.p_drop = 0.0f;
    for (size_t j0 = 0; j0 < S && st == CLF_OK; j0 += HS) {
        for (size_t s = 0; s < S; s++)
            for (size_t g = 0; g < KVH; g++) {
                float *v = kv + s * row + KVH * HS + g * HS;
                memset(v, 0, HS * sizeof *v);
                if (s >= j0 && s < j0 + HS)
                    v[s - j0] = 1.0f;
            }
        const size_t nj = S - j0 < HS ? S - j0 : HS;
        if ((st = clf_ptr_write(rt, p.k, kv, S * row, err)) != CLF_OK ||
            (st = clf_op_attn_fused_forward(rt, &p, err)) != CLF_OK ||
            (st = clf_ptr_read(rt, p.y, y, T * NH * HS, err)) != CLF_OK)
            break;
        for (size_t h = 0; h < NH; h++)
            for (size_t t = 0; t < T; t++)
                memcpy(out + (h * T + t) * S + j0, y + t * NH * HS + h * HS, nj * sizeof *y);
    }
done:
    clf_buffer_destroy(lseb);
    clf_buffer_destroy(yb);
    clf_buffer_destroy(kvb);
    free(y);
    free(kv);
    free(kh);
    return st;
}
