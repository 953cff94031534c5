/*
 * model_internal.h - the model's private structures, shared by
 * model_config.c (config -> spec), model_build.c (planning, allocation,
 * initialisation, accessors), model_forward.c, model_backward.c and
 * model_decode.c.
 *
 * Design: the config is translated once into mi_spec, a flat struct of the
 * numbers the graph needs, so that the graph files depend on neither
 * config/config.h nor its enums (config.h and ops.h both name activations
 * CLF_ACT_*; a translation unit cannot include both). Parameter tensors are
 * offsets into the flat buffers (MI_NONE when absent), so the same offset
 * addresses a parameter, its gradient and its Adam moments. Activations are
 * one device buffer each, sized for B x T at create.
 *
 * Letters as llm.c: B batch, T time, C channels, V vocabulary, L layers,
 * NH heads, HS head size, H ffn hidden width, BT = B * T rows.
 */
#ifndef CLF_MODEL_INTERNAL_H
#define CLF_MODEL_INTERNAL_H

#include <stdint.h>

#include "../runtime/gemm.h"
#include "model.h"

#define MI_NONE ((size_t)-1)
#define MI_ALIGN 16 /* floats: every parameter tensor starts at a multiple */

enum { MI_POS_LEARNED = 0, MI_POS_SINUSOIDAL, MI_POS_ROPE };
enum { MI_ACT_RELU = 0, MI_ACT_GELU, MI_ACT_GELU_TANH, MI_ACT_SWIGLU };
enum { MI_NORM_NONE = 0, MI_NORM_LAYERNORM, MI_NORM_RMSNORM };
/* Initialisation of a parameter tensor. */
enum { MI_INIT_NORMAL = 0, MI_INIT_RESID, MI_INIT_ZERO, MI_INIT_ONE };

/* Everything the graph needs from the config. */
typedef struct mi_spec {
    int B, T, C, V, L, NH, HS, H;
    int fc_rows;          /* H, or 2H for swiglu */
    int pos;              /* MI_POS_* */
    float rope_theta;
    float emb_scale;      /* 1 or sqrt(C) */
    float p_emb;          /* dropout on embeddings (+ positions) */
    float p_attn;         /* on attention probabilities */
    float p_resid;        /* on each sublayer output before the residual add */
    float p_ffn;          /* on the ffn hidden activation */
    int attn_bias, ffn_bias;
    int act;              /* MI_ACT_* */
    int norm;             /* MI_NORM_LAYERNORM | MI_NORM_RMSNORM */
    int norm_post;        /* 1 = post-norm */
    int norm_bias;        /* layernorm with bias */
    float norm_eps;
    int final_norm;       /* MI_NORM_* */
    int tied;             /* LM head = wte */
    int causal;
    uint64_t seed;
} mi_spec;

typedef struct mi_norm_p {
    size_t w, b; /* [C], [C] or MI_NONE */
} mi_norm_p;

typedef struct mi_attn_p {
    size_t qkv_w;  /* [3C, C] */
    size_t qkv_b;  /* [3C] */
    size_t proj_w; /* [C, C] */
    size_t proj_b; /* [C] */
} mi_attn_p;

typedef struct mi_ffn_p {
    size_t fc_w;   /* [fc_rows, C] */
    size_t fc_b;   /* [fc_rows] */
    size_t proj_w; /* [C, H] */
    size_t proj_b; /* [C] */
} mi_ffn_p;

typedef struct mi_block_p {
    mi_norm_p ln1, ln2;
    mi_attn_p attn;
    mi_ffn_p ffn;
} mi_block_p;

typedef struct mi_norm_a {
    clf_buffer *out;  /* [BT, C] */
    clf_buffer *mean; /* [BT] (layernorm) */
    clf_buffer *rstd; /* [BT] */
} mi_norm_a;

/* What one block keeps for its backward. Pre-norm: ln1 = norm(x),
 * res1 = x + attn(ln1), ln2 = norm(res1), res2 = res1 + ffn(ln2) (output).
 * Post-norm: res1 = x + attn(x), ln1 = norm(res1), res2 = ln1 + ffn(ln1),
 * ln2 = norm(res2) (output). */
typedef struct mi_block_a {
    mi_norm_a ln1, ln2;
    clf_buffer *q, *k, *v; /* [B, NH, T, HS] (q and k after rope; k, v unused with a cache) */
    clf_buffer *att;       /* [B, NH, T, T] softmax probabilities (before dropout) */
    clf_buffer *atty;      /* [BT, C] attention output, heads merged */
    clf_buffer *res1;      /* [BT, C] */
    clf_buffer *fch;       /* [BT, fc_rows] fc output + bias (pre-activation) */
    clf_buffer *fch_act;   /* [BT, H] activation (after ffn dropout) */
    clf_buffer *res2;      /* [BT, C] */
    clf_buffer *kcache;    /* [B, NH, T, HS] inference only */
    clf_buffer *vcache;
} mi_block_a;

struct clf_model {
    clf_runtime *rt;
    mi_spec s;
    unsigned flags;
    clf_model_dims dims;
    clf_model_optim optim;
    clf_model_state state;

    /* parameter table, in memory order */
    clf_param_info *ptab;
    int *pinit; /* [n_ptab] MI_INIT_* */
    int n_ptab;
    size_t wte, wpe, lm_head; /* offsets; wpe MI_NONE unless learned; lm_head = wte if tied */
    mi_norm_p lnf;
    mi_block_p *bp; /* [L] */

    /* flat buffers of n_params floats */
    clf_buffer *params, *grads, *adam_m, *adam_v;

    /* forward activations */
    mi_block_a *ba;        /* [L] */
    clf_buffer *tokens;    /* int32 [BT] */
    clf_buffer *targets;   /* int32 [BT] */
    clf_buffer *x0;        /* [BT, C] embeddings (+ positions, dropout) */
    mi_norm_a lnf_a;       /* final norm */
    clf_buffer *logits;    /* [BT, V]; d(logits) after a train forward */
    clf_buffer *losses;    /* [BT] */
    clf_buffer *scalars;   /* [4]: loss mean, sumsq, gscale, gnorm */
    clf_buffer *red;       /* reduction scratch */
    clf_buffer *qkv;       /* [BT, 3C] scratch */
    clf_buffer *preatt;    /* [B, NH, T, T] scores / dropped probs scratch */
    clf_buffer *atty_h;    /* [B, NH, T, HS] scratch */
    clf_buffer *proj;      /* [BT, C] sublayer output scratch */

    /* backward scratch (CLF_MODEL_TRAIN) */
    clf_buffer *dres;      /* [BT, C] gradient of the residual stream */
    clf_buffer *dC1, *dC2, *dC3; /* [BT, C] */
    clf_buffer *dqkv;      /* [BT, 3C] */
    clf_buffer *dH1, *dH2; /* [BT, fc_rows] */
    clf_buffer *datt;      /* [B, NH, T, T] */
    clf_buffer *dhead;     /* [B, NH, T, HS] */
    clf_buffer *datty_h;   /* [B, NH, T, HS] */

    /* every buffer above, for destroy */
    clf_buffer **owned;
    int n_owned, cap_owned;
    size_t bytes; /* device bytes allocated */

    /* host staging of batches: two slots, a slot is reused only after a finish */
    int32_t *stage[2];
    int stage_dirty[2];
    int stage_next;

    /* the current batch and what has run */
    int cur_B, cur_T;
    int has_targets;
    int count;          /* non-ignored targets */
    int fwd_train;      /* last forward was a train forward (dlogits ready) */
    int fwd_done;       /* a forward ran since set_batch */
    int step_done;      /* a step ran (grad norm valid) */
};

/* model_build.c */
clf_status mi_model_build(clf_runtime *rt, const mi_spec *s, unsigned flags,
                          const clf_model_optim *optim, clf_model **out, size_t *bytes_only,
                          clf_error *err);
static inline clf_ptr mi_at(clf_buffer *b, size_t off)
{
    clf_ptr p = {b, off};
    return p;
}
static inline clf_ptr mi_nullptr(void)
{
    clf_ptr p = {NULL, 0};
    return p;
}
/* params / grads pointer of a parameter offset, {NULL, 0} for MI_NONE. */
static inline clf_ptr mi_par(const clf_model *m, size_t off)
{
    return off == MI_NONE ? mi_nullptr() : mi_at(m->params, off);
}
static inline clf_ptr mi_grad(const clf_model *m, size_t off)
{
    return off == MI_NONE ? mi_nullptr() : mi_at(m->grads, off);
}

/* model_forward.c: the batch in m->tokens/targets, B x T rows at positions
 * pos0...; train = 1 turns dropout on and makes the loss write d(logits);
 * cache = 1 writes k and v into the caches at [pos0, pos0 + T) and attends
 * over [0, pos0 + T) of them (inference); last_only = 1 runs the LM head on
 * the last position of each sequence only (logits [B, V]) and no loss. */
clf_status mi_forward(clf_model *m, int B, int T, int pos0, int train, int cache,
                      int last_only, clf_error *err);
clf_status mi_gemm(clf_model *m, int ta, int tb, size_t M, size_t N, size_t K, float alpha,
                   clf_ptr a, size_t lda, clf_ptr b, size_t ldb, float beta, clf_ptr c,
                   size_t ldc, clf_error *err);
clf_status mi_gemm_batched(clf_model *m, int ta, int tb, size_t M, size_t N, size_t K,
                           float alpha, clf_ptr a, size_t lda, size_t sa, clf_ptr b, size_t ldb,
                           size_t sb, float beta, clf_ptr c, size_t ldc, size_t sc,
                           size_t batch, clf_error *err);
/* Dropout stream of a site for the current (step, micro). Sites: 0 the
 * embedding, 1 + 4 l + {0 attention probs, 1 attention output, 2 ffn
 * hidden, 3 ffn output}. */
uint64_t mi_dropout_stream(const clf_model *m, int layer, int op);
/* The residual stream after block l ([BT, C]; l = -1: the embeddings), and
 * the input of the LM head (the final norm's output, or the last block's). */
clf_ptr mi_block_out(const clf_model *m, int l);
clf_ptr mi_head_in(const clf_model *m);

/* model_backward.c */
clf_status mi_backward(clf_model *m, clf_error *err);

#endif
