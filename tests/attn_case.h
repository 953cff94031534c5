/*
 * attn_case.h - one fused-attention test case (sizes, masks, dropout) and
 * its op descriptors in the model's layouts, shared by test_attn_fused.c
 * (float32 against float64) and test_attn_fused16.c (16-bit storage
 * against float32).
 *
 * Layouts as the model has them: self-attention reads q, k, v inside one
 * fused [B, T, 3C] projection (q at column 0, k at C, v at 2C) and writes
 * dq, dk, dv into a [B, T, 3C] dqkv; cross-attention reads q from
 * [B, T, C] and k, v from [B, S, 2C], and writes dq [B, T, C] and
 * dk, dv into a [B, S, 2C] dkv. Offsets and strides count elements of the
 * storage type t.
 */
#ifndef CLF_TESTS_ATTN_CASE_H
#define CLF_TESTS_ATTN_CASE_H

#include <math.h>

#include "model/ops/ops.h"

typedef struct acase {
    size_t B, NH, T, S, HS;
    int causal, cross, masked;
    size_t window;
    int alibi;
    float p_drop;
} acase;

/* The forward descriptor: q (with k, v after it for self-attention), kv
 * the cross-attention's, y rows of ys, dropout keyed by (seed, stream). */
static inline clf_attn_fused acase_desc(const acase *c, clf_dtype t, clf_ptr y, clf_ptr lse,
                                        clf_ptr q, clf_ptr kv, clf_ptr keep, size_t ys,
                                        uint64_t seed, uint64_t stream)
{
    const size_t C = c->NH * c->HS;
    return (clf_attn_fused){.y = y,
                            .lse = lse,
                            .q = q,
                            .k = c->cross ? kv : clf_ptr_at(q, C),
                            .v = c->cross ? clf_ptr_at(kv, C) : clf_ptr_at(q, 2 * C),
                            .keep = c->masked ? keep : (clf_ptr){NULL, 0},
                            .t = t,
                            .y_stride = ys,
                            .q_stride = c->cross ? C : 3 * C,
                            .kv_stride = c->cross ? 2 * C : 3 * C,
                            .keep_stride = c->S,
                            .B = c->B,
                            .NH = c->NH,
                            .T = c->T,
                            .S = c->S,
                            .HS = c->HS,
                            .causal = c->causal,
                            .alibi = c->alibi,
                            .window = c->window,
                            .scale = (float)(1.0 / sqrt((double)c->HS)),
                            .p_drop = c->p_drop,
                            .seed = seed,
                            .stream = stream};
}

/* The backward's outputs: dq (with dk, dv after it for self-attention)
 * in gq, a cross-attention's dk, dv in gkv. */
static inline clf_attn_fused_grad acase_grad(const acase *c, clf_ptr dy, clf_ptr gq, clf_ptr gkv,
                                             clf_ptr dsum)
{
    const size_t C = c->NH * c->HS;
    return (clf_attn_fused_grad){.dy = dy,
                                 .dq = gq,
                                 .dk = c->cross ? gkv : clf_ptr_at(gq, C),
                                 .dv = c->cross ? clf_ptr_at(gkv, C) : clf_ptr_at(gq, 2 * C),
                                 .dsum = dsum,
                                 .dq_stride = c->cross ? C : 3 * C,
                                 .dkv_stride = c->cross ? 2 * C : 3 * C};
}

#endif
