/*
 * attn_case.h - one fused-attention test case (sizes, masks, dropout) and
 * its op descriptors in the model's layouts, shared by test_attn_fused.c
 * (float32 against float64) and test_attn_fused16.c (16-bit storage
 * against float32).
 *
 * Layouts as the model has them: self-attention reads q, k, v inside one
 * fused [B, T, C + 2 KC] projection (q at column 0, k at C, v at C + KC,
 * KC = kv_heads * HS: C with multi-head attention) and writes dq, dk, dv
 * into a dqkv of the same layout; cross-attention reads q from [B, T, C]
 * and k, v from [B, S, 2 KC], and writes dq [B, T, C] and dk, dv into a
 * [B, S, 2 KC] dkv. Offsets and strides count elements of the storage
 * type t.
 */
#ifndef CLF_TESTS_ATTN_CASE_H
#define CLF_TESTS_ATTN_CASE_H

#include <math.h>

#include "model/ops/ops.h"

typedef struct acase {
    size_t B, NH, T, S, HS;
    int causal, cross;
    int masked; /* 1: a padding keep mask; 2: document segments (packing, T == S) */
    size_t window;
    int alibi;
    float p_drop;
    size_t kv_heads; /* K/V heads (grouped-query attention); 0: NH */
    size_t nb;       /* a relative position bias of nb buckets (test_attn_fused); 0: none */
    size_t rel_k;    /* Shaw's relative positions clipped at rel_k (test_attn_fused); 0: none */
    /* sparse patterns beside the window (test_attn_fused): global keys,
     * stride, random blocks per query block and the block size; bs 0: none */
    size_t glob, stride, rnd, bs;
} acase;

/* K/V heads, their width KC, the row strides of q and of k/v, and the
 * columns of k and v in their rows. */
static inline size_t acase_kvh(const acase *c) { return c->kv_heads ? c->kv_heads : c->NH; }
static inline size_t acase_kc(const acase *c) { return acase_kvh(c) * c->HS; }
static inline size_t acase_qs(const acase *c)
{
    return c->cross ? c->NH * c->HS : c->NH * c->HS + 2 * acase_kc(c);
}
static inline size_t acase_kvs(const acase *c) { return c->cross ? 2 * acase_kc(c) : acase_qs(c); }
static inline size_t acase_kcol(const acase *c) { return c->cross ? 0 : c->NH * c->HS; }
static inline size_t acase_vcol(const acase *c) { return acase_kcol(c) + acase_kc(c); }

/* The forward descriptor: q (with k, v after it for self-attention), kv
 * the cross-attention's, y rows of ys, dropout keyed by (seed, stream). */
static inline clf_attn_fused acase_desc(const acase *c, clf_dtype t, clf_ptr y, clf_ptr lse,
                                        clf_ptr q, clf_ptr kv, clf_ptr keep, size_t ys,
                                        uint64_t seed, uint64_t stream)
{
    const clf_ptr kvb = c->cross ? kv : q;
    return (clf_attn_fused){.y = y,
                            .lse = lse,
                            .q = q,
                            .k = clf_ptr_at(kvb, acase_kcol(c)),
                            .v = clf_ptr_at(kvb, acase_vcol(c)),
                            .keep = c->masked ? keep : (clf_ptr){NULL, 0},
                            .t = t,
                            .y_stride = ys,
                            .q_stride = acase_qs(c),
                            .kv_stride = acase_kvs(c),
                            .kv_heads = c->kv_heads,
                            .keep_stride = c->S,
                            .B = c->B,
                            .NH = c->NH,
                            .T = c->T,
                            .S = c->S,
                            .HS = c->HS,
                            .causal = c->causal,
                            .segments = c->masked == 2,
                            .alibi = c->alibi,
                            .window = c->window,
                            .scale = (float)(1.0 / sqrt((double)c->HS)),
                            .p_drop = c->p_drop,
                            .seed = seed,
                            .stream = stream};
}

/* The backward's outputs: dq (with dk, dv after it for self-attention)
 * in gq, a cross-attention's dk, dv in gkv (with fewer K/V heads the
 * caller adds dkv_full). */
static inline clf_attn_fused_grad acase_grad(const acase *c, clf_ptr dy, clf_ptr gq, clf_ptr gkv,
                                             clf_ptr dsum)
{
    const clf_ptr gkvb = c->cross ? gkv : gq;
    return (clf_attn_fused_grad){.dy = dy,
                                 .dq = gq,
                                 .dk = clf_ptr_at(gkvb, acase_kcol(c)),
                                 .dv = clf_ptr_at(gkvb, acase_vcol(c)),
                                 .dsum = dsum,
                                 .dq_stride = acase_qs(c),
                                 .dkv_stride = acase_kvs(c)};
}

#endif
