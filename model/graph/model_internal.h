/*
 * model_internal.h - the model's private structures, shared by
 * create.c (config -> spec), build.c (parameter plan, create/destroy,
 * initialisation), nodes.c (the node list, its backward routing and its
 * linear layers), arena.c (device memory), forward.c, backward.c,
 * step.c, decode.c and access.c (the accessors).
 *
 * Design: the config is translated once into mi_spec, a flat struct of the
 * numbers the graph needs, so that the graph files depend on neither
 * config/config.h nor its enums (create.c maps the config's activation to
 * ops.h's clf_act once). Parameter tensors are
 * offsets into the flat buffers (MI_NONE when absent), so the same offset
 * addresses a parameter, its gradient and its Adam moments. Activations are
 * named places in one arena (arena.c), sized at create for the largest batch
 * the limits allow and shared where their lifetimes do not meet.
 *
 * The three kinds are one graph of up to two stacks of blocks (mi_stack):
 *   decoder (GPT)    dec: blocks [0, L), causal self-attention, LM head;
 *   encoder          enc: blocks [0, L), bidirectional self-attention with
 *                    the source keep mask, classifier head;
 *   encoder-decoder  enc: blocks [0, Le) over the source, dec: blocks
 *                    [Le, Le + Ld) over the target, each with causal
 *                    self-attention, cross-attention over the encoder's
 *                    output (source keep mask) and the FFN; LM head.
 * One block array, one set of sublayer nodes (nodes.c); a block's flags
 * (is_enc, has_cross) choose the mask and whether the cross sublayer exists.
 *
 * Letters as llm.c: B batch, T target / decoder time, S source time, C
 * channels, V vocabulary, L layers, NH heads, HS head size, H ffn hidden
 * width, NL labels; "rows" = B*S or B*T.
 */
#ifndef CLF_MODEL_INTERNAL_H
#define CLF_MODEL_INTERNAL_H

#include <stdint.h>

#include "model/graph/model.h"
#include "model/ops/ops.h"
#include "runtime/gemm/gemm.h"

#define MI_NONE ((size_t)-1)
#define MI_ALIGN 16 /* floats: every parameter tensor starts at a multiple */

enum { MI_KIND_DECODER = 0, MI_KIND_ENCODER, MI_KIND_ENCDEC };
enum { MI_HEAD_LM = 0, MI_HEAD_CLASSIFIER, MI_HEAD_NONE };
enum { MI_POOL_CLS = 0, MI_POOL_MEAN };
enum { MI_POS_LEARNED = 0, MI_POS_SINUSOIDAL, MI_POS_ROPE, MI_POS_ALIBI, MI_POS_T5, MI_POS_REL };
enum { MI_NORM_NONE = 0, MI_NORM_LAYERNORM, MI_NORM_RMSNORM };
/* Recomputation: none; block (the blocks of a stack share one set of
 * activations, each keeps its output; backward reruns the block); attn (they
 * share the self-attention's q, k, v, output and log-sum-exp; backward reruns
 * the attention from the kept norm or input). */
enum { MI_RECOMPUTE_NONE = 0, MI_RECOMPUTE_BLOCK, MI_RECOMPUTE_ATTN };
/* Initialisation of a parameter tensor. */
/* MI_INIT_SEQ: Xavier normal, sd sqrt(2 / (rows + cols)) (Linformer's projections) */
enum { MI_INIT_NORMAL = 0, MI_INIT_RESID, MI_INIT_ZERO, MI_INIT_ONE, MI_INIT_SEQ };
/* Dropout sites (mi_dropout_stream's op). */
enum {
    MI_SITE_ATTN_P = 0, /* self-attention probabilities */
    MI_SITE_ATTN_OUT,   /* self-attention output */
    MI_SITE_FFN_H,      /* ffn hidden activation */
    MI_SITE_FFN_OUT,    /* ffn output */
    MI_SITE_CROSS_P,    /* cross-attention probabilities */
    MI_SITE_CROSS_OUT,  /* cross-attention output */
};
/* mi_dropout_stream's layer for the embeddings: the decoder's (GPT, the
 * encoder-only model, the target side) and the source side's. */
#define MI_LAYER_EMB (-1)
#define MI_LAYER_SRC_EMB (-2)

/* Everything the graph needs from the config and the limits. */
typedef struct mi_spec {
    int kind;        /* MI_KIND_* */
    int head;        /* MI_HEAD_* */
    int pool;        /* MI_POOL_* (classifier) */
    int NL;          /* classifier labels */
    int B;           /* largest batch */
    int T;           /* context: rows of learned position tables */
    int Smax, Tmax;  /* longest source / target (decoder) row, <= T */
    size_t rows_src; /* largest B*S of a batch (0 without an encoder) */
    size_t rows_tgt; /* largest B*T (0 without a decoder) */
    int C, V, NH, HS, H;
    int NKV;           /* self-attention's key/value heads, dividing NH (grouped-query
                        * attention; NH = multi-head) */
    int L;             /* all blocks, Le + Ld */
    int Le, Ld;        /* encoder / decoder blocks */
    int fc_rows;       /* H, or 2H for swiglu */
    int pos;           /* MI_POS_* */
    int window;        /* sliding-window attention: keys per query (0 = all) */
    int glob, stride;  /* sparse patterns beside the window: global keys, stride */
    int rnd;           /* random key blocks per query block */
    int sp_bs;         /* block size of the sparse patterns; 0: none */
    int lin_k;         /* linformer: keys and values projected to lin_k rows; 0: softmax */
    int perf_m;        /* performer: random features per head; 0: softmax */
    int perf_redraw;   /* performer: steps between redraws of the features; 0: never */
    int recompute;     /* MI_RECOMPUTE_*: what blocks share and backward recomputes */
    clf_dtype act16;   /* train.precision's storage (a training model only, else
                        * CLF_DT_F32) of the activations only GEMMs and the attention read
                        * (mi_norm_a.t, fch_t; the attention's q, k, v, output and their
                        * gradients: qkv, atty, xq, xkv, xatty, dqkv, the output's gradient
                        * in dC3, RoPE rotating q and k in place) and of the weights the
                        * GEMMs read (params16) */
    int shard, shards; /* ZeRO-1: this model's slice of the optimizer state */
    clf_rope rope;     /* RoPE's frequencies (zeros unless positional.type is rope) */
    int nbk, maxd;     /* t5: buckets and max_distance of the relative bias (0: none) */
    int relk;          /* relative (Shaw): the clip k of key - query (0: none) */
    float emb_scale;   /* 1 or sqrt(C) */
    float p_emb;       /* dropout on embeddings (+ positions) */
    int emb_norm;      /* MI_NORM_*: a norm of embeddings + positions, before the dropout */
    float p_attn;      /* on attention probabilities */
    float p_resid;     /* on each sublayer output before the residual add */
    float p_ffn;       /* on the ffn hidden activation */
    int attn_bias, ffn_bias;
    int act;       /* ops.h clf_act of the ffn (CLF_ACT_SILU: the SwiGLU gate) */
    int swiglu;    /* 1: fc holds gate and value rows, silu(gate) * value */
    int norm;      /* MI_NORM_LAYERNORM | MI_NORM_RMSNORM */
    int norm_post; /* 1 = post-norm */
    int norm_bias; /* layernorm with bias */
    float norm_eps;
    int final_norm; /* MI_NORM_*, after each stack */
    int tied;       /* LM head = wte */
    int shared_emb; /* encoder-decoder: the source uses wte */
    int causal;     /* decoder self-attention */
    uint64_t seed;
} mi_spec;

typedef struct mi_norm_p {
    size_t w, b; /* [C], [C] or MI_NONE */
} mi_norm_p;

/* A linear layer's parameters: weight [out, in] (PyTorch's nn.Linear) and
 * bias [out] (MI_NONE: none). */
typedef struct mi_lin_p {
    size_t w, b;
} mi_lin_p;

typedef struct mi_attn_p {
    mi_lin_p qkv;      /* [3C, C] */
    mi_lin_p proj;     /* [C, C] */
    size_t relk;       /* relative (Shaw): r [2k + 1, HS] (MI_NONE otherwise) */
    size_t line, linf; /* linformer: E, F [lin_k, context] projecting keys, values along the
                          sequence (MI_NONE otherwise) */
} mi_attn_p;

/* Cross-attention: q from the decoder, k and v from the encoder's output
 * (torch's in_proj_weight split as rows [0, C) and [C, 3C)). */
typedef struct mi_cross_p {
    mi_lin_p q;    /* [C, C] */
    mi_lin_p kv;   /* [2C, C] rows k then v */
    mi_lin_p proj; /* [C, C] */
} mi_cross_p;

typedef struct mi_ffn_p {
    mi_lin_p fc;   /* [fc_rows, C] */
    mi_lin_p proj; /* [C, H] */
} mi_ffn_p;

typedef struct mi_block_p {
    int is_enc;              /* encoder block: source rows, keep mask, not causal */
    int has_cross;           /* decoder block of an encoder-decoder */
    int node0, node1;        /* its sublayer nodes: m->nodes[node0, node1) */
    mi_norm_p ln1, lnx, ln2; /* before/after self-attention, cross-attention, ffn */
    mi_attn_p attn;
    mi_cross_p cross;
    mi_ffn_p ffn;
} mi_block_p;

typedef struct mi_norm_a {
    clf_ptr out;  /* [rows, C], stored as t (offset in its elements) */
    clf_dtype t;  /* CLF_DT_F32, or s.act16 for a pre-norm block's norm (read by GEMMs only) */
    clf_ptr mean; /* [rows] (layernorm) */
    clf_ptr rstd; /* [rows] */
} mi_norm_a;

/* What one block keeps for its backward (rows = B*T of its stack; an
 * encoder block's T is S). Pre-norm: ln1 = norm(x), res1 = x + attn(ln1),
 * [lnx = norm(res1), resx = res1 + cross(lnx),] ln2 = norm(res1 | resx),
 * res2 = ... + ffn(ln2) (output). Post-norm: res1 = x + attn(x), ln1 =
 * norm(res1), [resx = ln1 + cross(ln1), lnx = norm(resx),] res2 = (ln1 |
 * lnx) + ffn(...), ln2 = norm(res2) (output). */
typedef struct mi_block_a {
    mi_norm_a ln1, lnx, ln2;
    clf_ptr qkv;        /* [rows, 3C] q, k, v projections (q and k after rope); this and
                         * the attention tensors below stored as s.act16 */
    clf_ptr lse;        /* [B, NH, T] attention rows' log-sum-exp (fused attention) */
    clf_ptr atty;       /* [rows, C] attention output, heads merged */
    clf_ptr res1;       /* [rows, C] */
    clf_ptr fch;        /* [rows, fc_rows] fc output + bias (pre-activation), or its
                         * activation's derivative (mi_ffn_keeps_dact) */
    clf_ptr fch_act;    /* [rows, H] activation (after ffn dropout) */
    clf_dtype fch_t;    /* both stored as: s.act16 where only GEMMs touch them
                         * (mi_ffn_fused_dact), else CLF_DT_F32 */
    clf_ptr res2;       /* [rows, C] */
    clf_buffer *kcache; /* [Bmax, NKV, Tmax, HS] inference only (decoder blocks) */
    clf_buffer *vcache;
    /* cross-attention (has_cross) */
    clf_ptr xq;          /* [rows, C] query projection */
    clf_ptr xkv;         /* [src rows, 2C] key and value projections (unused with a cache) */
    clf_ptr xlse;        /* [B, NH, T] */
    clf_ptr xatty;       /* [rows, C] */
    clf_ptr resx;        /* [rows, C] */
    clf_buffer *xkcache; /* [Bmax, NH, Smax, HS] inference only: the projected memory */
    clf_buffer *xvcache;
    clf_ptr lkv; /* linformer: [B, lin_k, 2 KC] the projected keys, then values */
    /* performer: the queries' and keys' features [B*NH*rows, m] and the rows'
     * numerators and denominator [B*NH*rows, HS + 1] (clf_performer's) */
    clf_ptr pfq, pfk, pnd;
} mi_block_a;

/* A stack of blocks with its embedding and its final norm. */
typedef struct mi_stack {
    int first, n;    /* blocks [first, first + n); n = 0: no such stack */
    int src;         /* 1: reads the source (m->src, keep mask, S), 0: m->tokens, T */
    int drop_layer;  /* MI_LAYER_EMB or MI_LAYER_SRC_EMB */
    size_t wte, wpe; /* parameter offsets (wpe MI_NONE unless learned) */
    size_t rel;      /* t5: its self-attention's relative bias [NH, nbk] (else MI_NONE) */
    clf_ptr relbk;   /* t5: int32 [2 rel_R0 + 1], the bucket of key - query + rel_R0 */
    mi_norm_p lnf;   /* final norm (MI_NONE when final_norm is none) */
    mi_norm_a lnf_a;
    mi_norm_p lne;   /* the embeddings' norm (emb_norm; MI_NONE otherwise) */
    mi_norm_a lne_a; /* its activations: lne_a.out is x0 */
    clf_ptr xe;      /* [rows, C] embeddings + positions before the norm (emb_norm) */
    clf_ptr x0;      /* [rows, C] embeddings (+ positions, norm, dropout): the blocks' input */
    int out;         /* the value id of its output (its final norm's, last block's or x0) */
} mi_stack;

/* A pass over the batch in m->tokens/targets (and
 * m->src/src_keep with m->cur_S): B x T decoder rows at positions pos0...
 * Flags: MI_PASS_TRAIN turns dropout on and makes the loss write
 * d(logits); MI_PASS_CACHE (decoder only) writes k and v into the caches at
 * [pos0, pos0 + T) and attends over [0, pos0 + T) of them, with
 * cross-attention over the cross caches (inference; the encoder does not
 * run); MI_PASS_LAST runs the LM head on the last position of each
 * sequence only (logits [B, V]) and no loss; MI_PASS_ATTN_ONLY makes a
 * self-attention node stop before its output projection (recomputing what
 * its backward reads). */
#define MI_PASS_TRAIN 1u
#define MI_PASS_CACHE 2u
#define MI_PASS_LAST 4u
#define MI_PASS_ATTN_ONLY 8u
typedef struct mi_pass {
    int B, T, S, pos0; /* S: the source length (mi_forward sets it) */
    unsigned flags;
    /* the norm node whose output the node's first linear reads normalised
     * in the same launch (mi_forward, decoding; NULL: none) */
    const struct mi_node *pre_norm;
} mi_pass;

/* ---- the graph as data (nodes.c) -------------------------------------------
 * A model is a list of nodes, built once at create from the spec: per stack
 * an embedding node, the blocks' sublayer nodes (norm, self-attention,
 * cross-attention, feed-forward) and the final norm, then one head node.
 * Nodes pass values: the residual stream and the norms' outputs, [rows, C]
 * of their stack. Forward walks the list; backward walks it in reverse, each
 * node reading the gradient of its output from a gradient slot and writing
 * (or adding) the gradient of its input to another, as a routing pass over
 * the list assigned; recomputation re-runs a block's range of nodes.
 * What a sublayer computes stays in its kind's forward and backward
 * (forward.c, backward.c); how sublayers are wired into a block (pre- or
 * post-norm, cross-attention) is written once, in the list's builder. */
enum {
    MI_NODE_EMBED = 0, /* tokens -> out: embeddings, positions, their norm, dropout */
    MI_NODE_NORM,      /* out = norm(in) */
    MI_NODE_ATTN,      /* out = resid + dropout(proj(self-attention(in))) */
    MI_NODE_CROSS,     /* out = resid + dropout(proj(attention(in, mem))) */
    MI_NODE_FFN,       /* out = resid + dropout(proj(act(fc(in)))) */
    MI_NODE_HEAD,      /* in -> logits (LM head, or pool + classifier) and the loss */
};
/* Gradient slots: [rows, C] float32 buffers (dres, dC1, denc) that hold the
 * gradients of values while backward walks the list. */
enum { MI_GRAD_A = 0, MI_GRAD_B, MI_GRAD_MEM, MI_GRAD_SLOTS };
#define MI_NOVAL (-1)

/* A norm: its type, parameters and what it keeps for backward. */
typedef struct mi_norm {
    int type; /* MI_NORM_* */
    const mi_norm_p *p;
    const mi_norm_a *a;
} mi_norm;

/* One linear layer of a node, with the tensors its products read and
 * write: x [R, in], y [R, out], W [out, in] and b [out] in the parameters.
 * Forward: y = x W^T + b. Backward: dW += dy^T x, db += colsum(dy), dx =
 * beta dx + dy W, then (act not NONE) times act'(act_in) in the same pass,
 * or times act_in itself where that is the derivative the forward stored
 * (mi_ffn_keeps_dact). The shapes, strides and storage come from the
 * tensors (mi_linear_gemm); mi_nodes_prepare checks that they agree. */
typedef struct mi_linear {
    mi_lin_p p;
    clf_tensor x, y;
    clf_tensor dx, dy;
    float beta;
    clf_gemm_act act;
    clf_tensor act_in;
} mi_linear;
#define MI_NODE_LINEARS 3 /* the most a node has (cross-attention: q, kv, output) */

typedef struct mi_node {
    int kind;  /* MI_NODE_* */
    int layer; /* the block, -1 outside blocks */
    const mi_stack *stk;
    int in, out, resid; /* value ids, MI_NOVAL where the kind has none */
    int mem;            /* CROSS: the encoder's output */
    mi_norm norm;       /* NORM */
    /* backward: the slots of d(out) and d(in) (EMBED: its norm's scratch);
     * acc_in: d(in) adds to its slot (a residual shares it), else overwrites;
     * zero_out: nothing wrote d(out) (an encoder output no decoder block
     * reads), so its slot is zeroed first */
    int g_out, g_in, acc_in, zero_out;
    int g_mem, acc_mem; /* CROSS: d(mem) */
} mi_node;

/* nodes.c: the node list and its values from the spec (before the
 * activations are placed), and the backward routing (training). */
clf_status mi_nodes_build(clf_model *m, clf_error *err);
/* arena.c: every device buffer of the model: the flat parameter buffers,
 * the activations the nodes write (placed by their lifetimes), the batch,
 * outputs and scratch, the caches; then the values' and gradient slots'
 * places. With no runtime the bytes are only counted. */
clf_status mi_alloc(clf_model *m, clf_error *err);
/* Rows of a node's values for a batch of B with sources of S and targets of
 * T tokens: B*S on the source side, B*T on the target side. */
size_t mi_node_rows(const mi_node *n, size_t B, size_t T, size_t S);
/* The linear layers of node n for the pass's batch, into L (at most
 * MI_NODE_LINEARS); returns how many. Forward, backward, the workspace and
 * planning all read a node's products from here. */
int mi_node_linears(const clf_model *m, const mi_node *n, const mi_pass *ps, mi_linear *L);
/* A linear layer's products as GEMMs: the forward y = x W^T (+ b as it
 * stores), the weight gradient dW += dy^T x, the input gradient dx. */
enum { MI_GEMM_FWD = 0, MI_GEMM_DW, MI_GEMM_DX };
clf_gemm_desc mi_linear_gemm(const clf_model *m, const mi_linear *L, int which);
/* The GEMM engine's packing scratch over every product of a step (the
 * nodes' linear layers at the planned rows, and their backward). */
size_t mi_nodes_workspace(const clf_model *m);
/* Ready every product of a pass over ps's batch, and of its backward in a
 * training model (engine chosen, kernels built, packing scratch sized:
 * clf_gemm_prepare), so that the first step only enqueues. */
clf_status mi_nodes_prepare(clf_model *m, const mi_pass *ps, clf_error *err);

struct clf_model {
    clf_runtime *rt;
    mi_spec s;
    unsigned flags;
    clf_model_dims dims;
    clf_model_optim optim;
    clf_model_state state;
    float loss_scale; /* > 0: the loss gradient's scale (accumulation), else 1 / count */

    /* parameter table, in memory order */
    clf_param_info *ptab;
    int *pinit; /* [n_ptab] MI_INIT_* */
    int n_ptab;
    /* the flat layout in runs of one learning-rate factor (layer-wise
     * decay; one run of 1 without it), covering [0, n_params) in order */
    struct mi_lr_run {
        size_t lo, hi;
        float mult;
    } * lr_runs;
    int n_lr_runs;
    size_t lm_head; /* = dec.wte if tied; MI_NONE for a classifier */
    mi_lin_p cls;   /* classifier [NL, C], [NL] */
    mi_stack enc, dec;
    mi_block_p *bp; /* [L] */

    /* flat buffers of n_params floats */
    clf_buffer *params, *grads, *adam_m, *adam_v;
    clf_buffer *ema; /* train.ema's moving average (NULL when off) */
    int ema_primed;  /* 0: the next step copies the parameters into ema */
    /* The weights the matrix products read, in 16 bits (stored as s.act16;
     * NULL when that is float32): a copy of params in the same layout,
     * written by the optimizer beside the float32 masters and rebuilt from
     * them (one conversion, enqueued by the next forward) after any other
     * write of the parameters (w16_stale). */
    clf_buffer *params16;
    int w16_stale;
    size_t opt_lo, opt_hi;         /* the optimizer's slice of the flat layout */
    clf_model_grad_hook grad_hook; /* clf_model_set_grad_hook */
    void *grad_hook_user;

    /* forward activations */
    mi_block_a *ba;       /* [L] */
    clf_buffer *tokens;   /* int32 [rows_tgt] decoder tokens */
    clf_buffer *targets;  /* int32 [max(rows_tgt, B)] decoder targets or labels */
    clf_buffer *picks;    /* int32 [rows_tgt] greedy choices (clf_model_greedy_pick), -1: NaN */
    clf_buffer *src;      /* int32 [rows_src] source tokens */
    clf_buffer *src_keep; /* int32 [rows_src] 1 = token, 0 = pad */
    clf_buffer *doc_seg;  /* decoders: int32 [rows_tgt] a packed batch's segments (1, 2, ...
                           * along each row, one per document) */
    clf_buffer *doc_pos;  /* decoders: int32 [rows_tgt] positions restarting at each
                           * document */
    clf_ptr pooled;       /* [B, C] mean pool (classifier or embedding model) */
    clf_ptr logits;       /* [rows_tgt, V] or [B, NL]; d(logits) after a train forward */
    clf_ptr losses;       /* [max(rows_tgt, B)] */
    clf_ptr scalars;      /* [5]: loss mean, sumsq, gscale, gnorm, loss sum (clf_model_loss_add) */
    clf_ptr amp;          /* [CLF_AMP_SLOTS] dynamic loss scaling (mi_amp: fp16 training) */
    clf_ptr amp_seen;     /* [CLF_AMP_SLOTS] a copy of amp before a step (clf_model_amp_mark) */
    clf_ptr red;          /* reduction scratch */
    clf_ptr qkv;          /* [rows, 3C] scratch (inference: mi_encode's cross keys) */
    clf_ptr proj;         /* [rows, C] a sublayer's projection before dropout (training
                           * with p_resid > 0 only) */

    /* backward scratch (CLF_MODEL_TRAIN) */
    clf_ptr dres;          /* [rows, C] gradient of the residual stream */
    clf_ptr denc;          /* [rows_src, C] gradient of the encoder's output (encoder-decoder) */
    clf_ptr dC1, dC2, dC3; /* [rows, C] (dC3 holds the attention output's gradient as
                            * s.act16: clf_tensor_room) */
    clf_ptr dqkv;          /* [rows, 3C] */
    clf_ptr dH1, dH2;      /* [rows, fc_rows] (dH1 only without mi_ffn_fused_dact) */
    clf_dtype dH2_t;       /* dH2's storage: s.act16 with mi_ffn_fused_dact (the FFN's
                            * hidden gradient, read by GEMMs and the bias gradient only) */
    clf_ptr dsum;          /* [B, NH, T] fused attention backward's dy.y per row */
    clf_ptr dkv_full;      /* [rows, 2C] grouped-query attention's per-query-head dk, dv
                            * before the group sums (NKV < NH only), as s.act16 */
    /* t5: one attention call's bias tables (clf_op_relbias_table, rebuilt
     * before each call) and, training, its rows' ds by bucket */
    clf_ptr rel_rb, rel_rbk, rel_drb;
    /* relative (Shaw): one call's q.r rows [rows * NH, 2k + 1] and their
     * gradient (training) */
    clf_ptr rel_qr, rel_dqr;
    size_t rel_R0; /* the bucket maps cover key - query in [-rel_R0, rel_R0] */
    /* sparse patterns (s.sp_bs): the random key blocks [sp_nb, s.rnd] of
     * the sp_nb query blocks over Tmax, on the device and (sp_rnd) the host
     * (checkpoints keep them), and decoding's keep rows [B, Tmax] */
    clf_ptr sp_table, sp_keep;
    clf_ptr lin_dkv; /* linformer's backward: [B, lin_k, 2 KC] the projected keys' and
                        values' gradients */
    /* performer: every layer's features om [L, m, HS]; the draw they hold (-1
     * none yet; the draw a model follows is its step / redraw, or pinned by
     * a checkpoint for inference, or fixed by clf_model_set_performer_
     * features); scratch cmax [B*NH], rmax [rows*NH], and the backward's u
     * [rows*NH, HS + 1], dfq, dfk [rows*NH, m] */
    clf_ptr perf_om, perf_cmax, perf_rmax, perf_u, perf_dfq, perf_dfk;
    int64_t perf_draw, perf_pin;
    int perf_fixed;
    float *perf_host; /* host [L, m, HS]: the features as drawn (allocated at build) */
    double *perf_blk; /* host [HS, HS]: Gram-Schmidt's block */
    int32_t *sp_rnd;
    size_t sp_nb;

    /* the graph: nodes in forward order, their values, the gradient slots */
    mi_node *nodes;
    int n_nodes;
    clf_tensor *vals;   /* [rows of its stack at most, C] */
    clf_ptr **val_room; /* [n_vals] the field that names each value's place
                         * (arena.c places it there, then sets vals[].p) */
    int n_vals, cap_vals;
    clf_ptr grad_slot[MI_GRAD_SLOTS]; /* dres, dC1, denc */

    /* inference (CLF_MODEL_INFER) */
    clf_buffer *index;   /* int32 [B] cache_reorder's rows */
    clf_buffer *gather;  /* scratch of the largest cache */
    clf_ptr decode_part; /* flash-decoding's partial softmaxes (NULL: never split) */
    int32_t *xrow;       /* [B] host: the encoded sentence each cross-cache row holds */
    int32_t *xrow_new;   /* [B] */
    int cache_B;         /* rows in the caches (0 = nothing cached) */
    int dec_len;         /* positions in the self-attention caches */
    int pickable;        /* rows of logits a cached pass left for clf_model_greedy_pick */
    int picked;          /* rows of m->tokens that clf_model_greedy_pick wrote (0: none) */
    int enc_S;           /* source length of the cross caches (0 = none) */

    /* every buffer above, for destroy; activations and scratch (the clf_ptr
     * fields) are carved from the arena: named offsets into chunks of at
     * most the device's largest allocation */
    clf_buffer **owned;
    int n_owned, cap_owned;
    struct mi_carve *carves; /* arena requests, until they are carved (build.c) */
    int n_carves, cap_carves;
    size_t arena_floats;  /* floats in the arena's chunks */
    size_t bytes;         /* device bytes allocated */
    clf_model_memory mem; /* the same by category */

    /* host staging of batches: two slots, a slot is reused once the writes
     * from it are done (its marker, or a finish) */
    int32_t *stage[2];
    size_t stage_len; /* int32 per slot */
    int stage_dirty[2];
    clf_event *stage_ev[2]; /* a marker enqueued after the slot's writes */
    int stage_next;

    /* the current batch and what has run */
    int cur_B, cur_T, cur_S;
    int has_targets;
    int packed;    /* the batch packs documents (doc_seg, doc_pos hold them) */
    int count;     /* non-ignored targets (labels) */
    int fwd_train; /* last forward was a train forward (dlogits ready) */
    int fwd_done;  /* a forward ran since set_batch */
    int step_done; /* a step ran (grad norm valid) */

    /* clf_model_attention_weights' request, read by the forward at the
     * attention it names (mi_probe_attention) */
    struct {
        int active, layer, cross;
        float *out;  /* [NH, T, S] */
        size_t cap;  /* floats out holds */
        int T, S;    /* what it wrote */
        int written; /* the site ran */
    } probe;
};

/* build.c */
clf_status mi_model_build(clf_runtime *rt, const mi_spec *s, unsigned flags,
                          const clf_model_optim *optim, clf_model **out,
                          clf_model_memory *plan_only, clf_error *err);
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
/* A packed batch's per-token positions for the decoder's stack (restarting
 * at each document), {NULL, 0} otherwise: positions are pos0 + t. */
static inline clf_ptr mi_doc_pos(const clf_model *m, int src)
{
    return m->packed && !src ? mi_at(m->doc_pos, 0) : mi_nullptr();
}
/* Self-attention's fused projection: q [C], then k and v [NKV * HS] each. */
static inline size_t mi_kv_cols(const mi_spec *s) { return (size_t)s->NKV * (size_t)s->HS; }
static inline size_t mi_qkv_cols(const mi_spec *s) { return (size_t)s->C + 2 * mi_kv_cols(s); }

/* Value id's first R rows. */
static inline clf_tensor mi_val(const clf_model *m, int id, size_t R)
{
    return clf_tensor_rows(m->vals[id], 0, R, 1);
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
/* A weight as the matrix products read it: the 16-bit copy (stored as
 * s.act16) where there is one, else the float32 parameter. */
static inline clf_ptr mi_wpar(const clf_model *m, size_t off)
{
    return m->params16 == NULL ? mi_par(m, off) : mi_at(m->params16, off);
}
/* The 16-bit weights are rebuilt from the float32 parameters before the
 * next forward reads them (forward.c; a no-op without them). */
clf_status mi_weights_sync(clf_model *m, clf_error *err);

/* step.c: plan at create: every product of a step over the largest batch
 * the limits allow is prepared (mi_nodes_prepare) and the ops' kernel
 * families loaded (clf_ops_load), so that the first step builds no kernels
 * and times no GEMM engines: an ordinary step. Inference-only models plan
 * nothing (prompt and beam shapes vary; they are prepared on first use). */
clf_status mi_plan(clf_model *m, clf_error *err);
/* step.c: a free staging slot of stage_len int32 (once the writes from it
 * are done, if it is in flight), in flight from then on; mi_stage_commit
 * marks the end of its writes and moves on to the other slot once they are
 * enqueued. */
clf_status mi_stage_take(clf_model *m, int32_t **slot, clf_error *err);
clf_status mi_stage_commit(clf_model *m, clf_error *err);
/* Check sizes of a batch against the limits (S = 0: no source, T = 0: no
 * target side). */
clf_status mi_check_sizes(const clf_model *m, int B, int S, int T, clf_error *err);
/* Tokens x[0, n) in [0, V) (`what` names them in messages). */
clf_status mi_check_tokens(const clf_model *m, const int32_t *x, size_t n, const char *what,
                           clf_error *err);

/* forward.c: one forward pass over the batch (mi_pass above). */
clf_status mi_forward(clf_model *m, const mi_pass *pass, clf_error *err);
/* One node's forward over the pass's batch (its stack's rows). */
clf_status mi_node_forward(clf_model *m, const mi_node *n, const mi_pass *ps, clf_error *err);
/* The encoder stack over m->src [B, S] (eval), then every decoder block's
 * cross keys and values of its output into the cross caches. */
clf_status mi_encode(clf_model *m, int B, int S, clf_error *err);
/* GEMM through the runtime (clf_gemm). */
clf_status mi_gemm(clf_model *m, const clf_gemm_desc *d, clf_error *err);
/* Performer: every layer's features made current (drawn again when the
 * draw the model follows changed; a no-op otherwise). */
clf_status mi_perf_sync(clf_model *m, clf_error *err);
/* Block l's performer over B sequences of T queries and S keys (cache: the
 * keys and values in the KV caches). */
clf_performer mi_perf_desc(const clf_model *m, int l, size_t B, size_t T, size_t S, int cache);
/* Linformer (s.lin_k, encoder blocks): block l's keys and values of B
 * sequences of T rows, the padding's zeroed in qkv, projected along the
 * sequence into lkv; and backward from lin_dkv: E's and F's gradients
 * accumulated, the keys' and values' gradients written into dqkv (the
 * padding's zeroed). */
clf_status mi_lin_project(clf_model *m, int l, size_t B, size_t T, clf_error *err);
clf_status mi_lin_backward(clf_model *m, int l, size_t B, size_t T, clf_ptr dqkv, clf_error *err);
/* The probabilities of fused attention f (the forward's own descriptor at
 * the site m->probe names), for its first sequence, into m->probe.out:
 * clf_model_attention_weights (probe.c). */
clf_status mi_probe_attention(clf_model *m, const clf_attn_fused *f, clf_error *err);
/* Its products chosen (clf_gemm_prepare) for B sequences of T rows. */
clf_status mi_lin_prepare(clf_model *m, size_t B, size_t T, int train, clf_error *err);
/* The fused attention descriptor of block l's self-attention (q, k, v in
 * its qkv activation, y its atty; causal or the source keep mask) and of
 * its cross-attention (xq, xkv; the source keep mask), with the site's
 * dropout when train: what forward runs and backward differentiates. */
clf_attn_fused mi_attn_self(const clf_model *m, int l, size_t B, size_t T, int train);
/* t5: the relative bias tables of stack stk's self-attention for T queries
 * and S keys in m->rel_rb, m->rel_rbk (rebuilt before each call); *width
 * the kernels' rb_w, 0 without a relative bias. */
clf_status mi_rel_table(clf_model *m, const mi_stack *stk, size_t T, size_t S, size_t *width,
                        clf_error *err);
/* relative (Shaw): block l's q.r rows of the queries hq in m->rel_qr; *W
 * their width (2k + 1), 0 without. */
clf_status mi_rel_qr(clf_model *m, int l, const clf_heads *hq, size_t *W, clf_error *err);
clf_attn_fused mi_attn_cross(const clf_model *m, int l, size_t B, size_t T, size_t S, int train);
/* Dropout stream of a site for the current (step, micro). Sites: 0 the
 * decoder's embedding (layer MI_LAYER_EMB), 0xFFFF the source embedding
 * (MI_LAYER_SRC_EMB), 1 + 4 l + {0 attention probs, 1 attention output, 2
 * ffn hidden, 3 ffn output} for block l, 0x8000 + 2 l + {0 cross probs, 1
 * cross output}. */
uint64_t mi_dropout_stream(const clf_model *m, int layer, int op);
/* A stack's output (its final norm's, or its last block's, or x0). */
clf_ptr mi_stack_out(const clf_model *m, const mi_stack *st);

/* The GEMM epilogue's activation for the model's (ops.h clf_act; the same
 * formulas). */
clf_gemm_act mi_gemm_act(int act);
/* Whether the FFN's backward takes its activation's derivative in the
 * epilogue of the GEMM that makes the hidden gradient (no SwiGLU gate, no
 * dropout on the hidden activation): then no separate buffer holds the
 * gradient of the activation's output (m->dH1). */
static inline int mi_ffn_fused_dact(const mi_spec *s) { return !s->swiglu && !(s->p_ffn > 0); }
/* The FFN's fch holds the activation's derivative after a training pass
 * (the forward's GEMM stores it, the backward's multiplies by it): a
 * training model whose backward fuses the derivative, in float32 (the
 * derivative of the value fch would hold, so the same bits; 16-bit storage
 * rounds the pre-activation before the derivative is taken, as the PyTorch
 * recipes the parity tests follow do, so it keeps the pre-activation).
 * Otherwise, and after a pass that does not train, fch holds the
 * pre-activation. */
static inline int mi_ffn_keeps_dact(const clf_model *m)
{
    return mi_ffn_fused_dact(&m->s) && (m->flags & CLF_MODEL_TRAIN) != 0 &&
           m->s.act16 == CLF_DT_F32;
}

/* Dynamic loss scaling runs where gradients are stored in IEEE half: a
 * training model with train.precision fp16 (bf16 has float32's range). */
static inline int mi_amp(const clf_model *m) { return m->amp.buf != NULL; }
/* Loss scaling's state as stored at src (amp or amp_seen), blocking. */
clf_status mi_amp_read(clf_model *m, clf_ptr src, clf_model_amp *out, clf_error *err);

/* backward.c */
clf_status mi_backward(clf_model *m, clf_error *err);

#endif
