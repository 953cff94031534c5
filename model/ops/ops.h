/*
 * ops.h - host-side wrappers of the device kernels: the contract between the
 * kernels in cl/ and the model graph. One section per kernel family, in the
 * order elementwise, reduce, norm, embed, attention, loss, random,
 * optim; each family's wrappers are model/ops/<family>.c and its kernels
 * cl/<family>.cl.
 *
 * Every op enqueues work on the runtime's in-order queue and returns; nothing
 * here waits or reads back, nothing allocates device memory. Pointers are
 * clf_ptr (buffer + element offset). Sizes use llm.c's letters: B batch,
 * T time (query length), S source/key length, C channels, NH heads, HS head
 * size, V vocabulary, R rows, N columns, n element count.
 *
 * Conventions
 * - Layouts are row-major; activations are [B, T, C]. Linear weights are
 *   stored as PyTorch's nn.Linear, [out, in], so y = x W^T + b.
 * - "_backward" ops ACCUMULATE (+=) into parameter gradients (dweight,
 *   dbias, dwte, ...) and into the input gradient named `din`/`dx` only when
 *   the parameter `accumulate` says so; otherwise they overwrite.
 * - Reductions are deterministic: no floating-point atomics, a fixed order,
 *   so a seed reproduces a run bit for bit.
 * - Integer tensors (token ids, targets, masks) are int32 in device memory.
 */
#ifndef CLF_OPS_H
#define CLF_OPS_H

#include "runtime/contract.h"
#include "runtime/convert.h"
#include "runtime/runtime.h"

/* Load (build, or read from the binary cache) every kernel family the ops
 * launch from, fused attention's for storage t, so that no op's first
 * launch builds one: a model calls it while it plans (ops/load.c). */
clf_status clf_ops_load(clf_runtime *rt, clf_dtype t, clf_error *err);
/* The same for what only decoding launches (decode.cl, on devices whose
 * work-groups run item by item), before a model's first cached pass. */
clf_status clf_ops_load_decode(clf_runtime *rt, clf_dtype t, clf_error *err);

/* ---- elementwise (cl/elementwise.cl) ------------------------------------ */

clf_status clf_op_add(clf_runtime *rt, clf_ptr out, clf_ptr a, clf_ptr b, size_t n,
                      clf_error *err); /* out = a + b (out may alias a or b) */
/* out = 0 (+0.0 everywhere) */
clf_status clf_op_zero(clf_runtime *rt, clf_ptr out, size_t n, clf_error *err);
/* e = e + (1 - decay) (p - e) (an exponential moving average of p; decay 0
 * copies p exactly), decay in [0, 1). */
clf_status clf_op_ema(clf_runtime *rt, clf_ptr e, clf_ptr p, float decay, size_t n, clf_error *err);
/* a and b exchanged, bit for bit. */
clf_status clf_op_swap(clf_runtime *rt, clf_ptr a, clf_ptr b, size_t n, clf_error *err);
clf_status clf_op_axpy(clf_runtime *rt, clf_ptr y, float a, clf_ptr x, size_t n,
                       clf_error *err); /* y += a * x */
/* out = a + b, elementwise, for the residual stream (alias of add kept for
 * readability at call sites where one operand is the residual). */
clf_status clf_op_residual(clf_runtime *rt, clf_ptr out, clf_ptr x, clf_ptr residual, size_t n,
                           clf_error *err);

typedef enum clf_act {
    CLF_ACT_NONE = 0,
    CLF_ACT_RELU,
    CLF_ACT_GELU_ERF,  /* x * Phi(x), PyTorch nn.GELU() */
    CLF_ACT_GELU_TANH, /* PyTorch nn.GELU(approximate="tanh"), GPT-2 */
    CLF_ACT_SILU,
} clf_act;

/* din (=|+=) dout * act'(in) */
clf_status clf_op_act_backward(clf_runtime *rt, clf_act act, clf_ptr din, clf_ptr dout, clf_ptr in,
                               size_t n, int accumulate, clf_error *err);
/* dbias[c] (=|+=) sum_r d[r,c]; column sums of [R, N], d stored as d_type
 * (16 bits: d's offset counts 2-byte elements). */
clf_status clf_op_bias_backward_t(clf_runtime *rt, clf_ptr dbias, clf_ptr d, clf_dtype d_type,
                                  size_t R, size_t N, int accumulate, clf_error *err);
/* SwiGLU over [R, 2H] -> [R, H]: out = silu(g) * u with g = in[:, :H],
 * u = in[:, H:]. Backward writes din [R, 2H]. */
clf_status clf_op_swiglu_forward(clf_runtime *rt, clf_ptr out, clf_ptr in, size_t R, size_t H,
                                 clf_error *err);
clf_status clf_op_swiglu_backward(clf_runtime *rt, clf_ptr din, clf_ptr dout, clf_ptr in, size_t R,
                                  size_t H, clf_error *err);

/* ---- reductions (cl/reduce.cl) ------------------------------------------ */

/* out[0] = sum of squares of in[0..n) (deterministic two-stage reduction).
 * scratch must hold at least clf_op_sumsq_scratch(rt, n) floats. */
size_t clf_op_sumsq_scratch(clf_runtime *rt, size_t n);
clf_status clf_op_sumsq(clf_runtime *rt, clf_ptr out, clf_ptr in, size_t n, clf_ptr scratch,
                        clf_error *err);
/* out[0] = mean of in[0..n), same scratch rule; n = 0 is CLF_ERR_ARG. */
clf_status clf_op_mean(clf_runtime *rt, clf_ptr out, clf_ptr in, size_t n, clf_ptr scratch,
                       clf_error *err);

/* Greedy choice (cl/reduce.cl), for rows r < R of in [R, N] float32 (row
 * stride ld >= N): idx[r] (int32) = the index of the row's largest value,
 * the lowest index among equal maxima, NaN never chosen, -1 where every
 * value is NaN: what clf_sampler_sample picks at temperature 0 from the
 * same floats; tok[r] (int32; buf NULL: none) the same with 0 for -1, a
 * token the next decoding step can read. CLF_ERR_UNSUPPORTED where N is
 * longer than a device that ends loops early lets a row's scan run. */
clf_status clf_op_row_argmax(clf_runtime *rt, clf_ptr idx, clf_ptr tok, clf_ptr in, size_t ld,
                             size_t R, size_t N, clf_error *err);

/* Pooling (cl/reduce.cl): mean over the kept positions: out [B, C] from x [B, S, C] and keep int32
 * [B, S] (a row without kept positions gives 0). Backward overwrites
 * dx [B, S, C] = keep ? dout / count : 0. */
clf_status clf_op_mean_pool_forward(clf_runtime *rt, clf_ptr out, clf_ptr x, clf_ptr keep, size_t B,
                                    size_t S, size_t C, clf_error *err);
clf_status clf_op_mean_pool_backward(clf_runtime *rt, clf_ptr dx, clf_ptr dout, clf_ptr keep,
                                     size_t B, size_t S, size_t C, clf_error *err);

/* ---- normalisation (cl/norm.cl) ------------------------------------------ */

/* A norm over the last dim of x [R, N]: LayerNorm, out = (x - mean) * rstd
 * * w + b (b.buf NULL: no bias), or (rms) RMSNorm, out = x * rstd * w with
 * rstd = 1/sqrt(mean(x^2) + eps). Forward writes out, stored as out_type
 * (bf16 or f16: rounded to nearest even; out.off then counts 2-byte
 * elements), and saves the row statistics the backward reads (LayerNorm's
 * mean[R], rstd[R], float32). Backward: dx (=, or += with accumulate) from
 * dout, dw += and db += (parameter gradients always accumulate); a NULL
 * dx, dw or db skips that gradient. N = 0 with R > 0 is CLF_ERR_ARG in
 * forward. */
typedef struct clf_norm_args {
    int rms;
    clf_ptr x, w, b;
    clf_ptr mean, rstd;
    size_t R, N;
    float eps;
    clf_ptr out;
    clf_dtype out_type;
    clf_ptr dout, dx, dw, db;
    int accumulate;
} clf_norm_args;
clf_status clf_op_norm_forward(clf_runtime *rt, const clf_norm_args *a, clf_error *err);
clf_status clf_op_norm_backward(clf_runtime *rt, const clf_norm_args *a, clf_error *err);

/* Decoding's norm and the linear after it in one launch (norm_dot_item):
 * y [R, N] (row stride ldy) = act(norm(x) W^T + bias) for x [R, C], the
 * norm's w, b [C] (b.buf NULL: none; RMSNorm has none), W [N, C] and bias
 * [N] (buf NULL: none) all float32, act a CLF_ACTCODE_*. For few rows on
 * devices whose work-groups run item by item: clf_op_norm_dot_fits says
 * whether this device has the kernel's shape (else norm, then GEMM). */
typedef struct clf_norm_dot_args {
    int rms;
    clf_ptr x, w, b;
    float eps;
    clf_ptr W, bias;
    unsigned act;
    clf_ptr y;
    size_t ldy, R, C, N;
} clf_norm_dot_args;
int clf_op_norm_dot_fits(const clf_runtime *rt);
clf_status clf_op_norm_dot(clf_runtime *rt, const clf_norm_dot_args *a, clf_error *err);

/* ---- embeddings and positions (cl/embed.cl) ------------------------------ */

/* Rows of heads: B x T rows of NH heads of HS elements, stored as t, rows
 * row_stride elements apart (head h at columns h*HS..., so q, k or v inside
 * a fused qkv, row_stride 3C, are read in place); offsets and strides count
 * t's elements. */
typedef struct clf_heads {
    clf_ptr x;
    clf_dtype t;
    size_t B, T, NH, HS, row_stride;
} clf_heads;

/* Token and position embeddings of tokens int32 [B, T] with tables wte
 * [V, C] and wpe [positions, C] (buf NULL: none). Forward: out[b,t,:] =
 * scale * wte[tokens[b,t], :] (+ wpe[pos0 + t, :], or wpe[pos[b,t], :]
 * where pos.buf is set: int32 [B, T] positions in [0, T), packed documents
 * restarting at each). Backward, from dout: dwte[v,:] += scale * sum over
 * (b,t) with tokens[b,t] == v of dout[b,t,:]; dwpe[t,:] += sum_b
 * dout[b,t,:] (positions from 0, as in training), or the sum over the
 * (b,t) at position t. Deterministic. */
typedef struct clf_embed_args {
    clf_ptr tokens, wte, wpe;
    size_t B, T, C, V;
    size_t pos0;
    clf_ptr pos;
    float scale;
    clf_ptr out;
    clf_ptr dout, dwte, dwpe;
} clf_embed_args;
clf_status clf_op_embed_forward(clf_runtime *rt, const clf_embed_args *a, clf_error *err);
clf_status clf_op_embed_backward(clf_runtime *rt, const clf_embed_args *a, clf_error *err);
/* x[b,t,:] += PE(pos0 + t) (PE(pos[b,t]) where pos.buf is set: int32 [B, T]
 * positions below 2^24) with the sinusoidal table of "Attention Is All You
 * Need": PE[p, 2i] = sin(p / 10000^(2i/C)), PE[p, 2i+1] = cos(same). */
clf_status clf_op_sinusoid_add(clf_runtime *rt, clf_ptr x, size_t B, size_t T, size_t C,
                               size_t pos0, clf_ptr pos, clf_error *err);
/* RoPE's frequencies: pair i turns at f_i = theta^(-2i/HS) (extrapolated)
 * or f_i / factor (interpolated), blended by r_i = clamp((i - ramp_lo) /
 * (ramp_hi - ramp_lo), 0, 1) as HF computes it: e = 1 - r, f_i / factor *
 * (1 - e) + f_i * e. factor 1 is plain RoPE; cos and sin are multiplied by
 * mscale (YaRN's attention temperature; 1 otherwise). */
typedef struct clf_rope {
    float theta, factor, ramp_lo, ramp_hi, mscale;
} clf_rope;
/* Rotary embedding in place on the heads h (16 bits: widened, rotated in
 * float32, rounded back). rotate_half convention (GPT-NeoX / HF Llama):
 * pairs (i, i + HS/2), angle = p * f_i, p = pos0 + t (or pos[b,t] where
 * pos.buf is set: int32 [B, T] positions below 2^24). inverse = 1 applies
 * the transpose (times mscale: the backward pass). */
clf_status clf_op_rope_t(clf_runtime *rt, const clf_heads *h, size_t pos0, clf_ptr pos,
                         const clf_rope *rope, int inverse, clf_error *err);

/* ---- attention (cl/attention.cl, cl/flash/) ----------------------------- */

/* Single-query attention against a KV cache, for generation: q [B, NH, HS]
 * (rows q_stride floats apart, 0 = NH*HS: q inside a fused qkv row, say),
 * kcache/vcache [B, NH, Tmax, HS] with L valid positions, out [B, NH*HS];
 * fused scores, softmax and weighted sum. keep (int32, row b at
 * b * keep_stride, nonzero = attend; buf NULL = none) masks positions, as
 * cross-attention over a padded source does; a row with nothing kept gives
 * zeros. Deterministic.
 * Flash-decoding: each row's positions may be split into ranges, one
 * work-group each (a partial softmax: max, sum, weighted values, into
 * scratch), folded by a second kernel in a fixed order; equal to no split
 * up to float rounding. splits 0: the device's choice, clf_op_attn_decode_
 * splits (1 where work-groups run item by item, or enough rows fill the
 * device; needs clf_op_attn_decode_scratch(rt, B*NH, L, HS) floats of
 * scratch at most, 0 where no split is made up to those sizes, and without
 * scratch no split is made); 1: none; P > 1: P ranges, scratch of
 * B*NH*P*(HS+2) floats. group: the work-group size (0: the device's). */
typedef struct clf_attn_decode {
    clf_ptr out, q, kcache, vcache, keep, scratch;
    size_t q_stride, keep_stride;
    size_t B, NH, HS, Tmax, L;
    size_t kv_heads; /* heads in the caches [B, kv_heads, Tmax, HS], dividing NH (query
                        head h reads K/V head h / (NH / kv_heads)); 0: NH */
    float scale;
    size_t window; /* > 0: only the last `window` positions are seen */
    int alibi;     /* ALiBi biases -slope_h (L - 1 - s) (clf_attn_fused's) */
    clf_ptr rb;    /* a relative bias rb[h * 2 rb_w + L - 1 - s] (clf_op_relbias_table's for
                      T = 1, S = L); rb_w 0: none */
    size_t rb_w;
    clf_ptr qr; /* Shaw's relative positions: row b*NH + h of clf_op_rel_qr's (T = 1), read
                   at clamp(s - (L - 1), -rel_k, rel_k) + rel_k; qr_w 0: none */
    size_t qr_w, rel_k;
    size_t splits, group;
    int item; /* 1: the one-work-item-per-row kernel (for devices whose work-groups
                 run item by item: the device's choice there when group is 0) */
    /* the new position's keys and values (kn.buf NULL: none): row b at b *
     * n_stride, K/V head j at column j * HS (k and v inside the fused qkv);
     * position L - 1 is read from them, and this launch stores them into
     * the caches there (instead of a clf_op_kv_store before it) */
    clf_ptr kn, vn;
    size_t n_stride;
} clf_attn_decode;
clf_status clf_op_attn_decode(clf_runtime *rt, const clf_attn_decode *a, clf_error *err);
size_t clf_op_attn_decode_splits(const clf_runtime *rt, size_t rows, size_t L);
size_t clf_op_attn_decode_scratch(const clf_runtime *rt, size_t rows_max, size_t L_max, size_t HS);

/* Decoding's pre-attention norm, its fused qkv linear and the new
 * position's attention in one launch (attn_qkv_decode_item), for devices
 * whose work-groups run item by item: for rows b < B of x [B, C] (float32),
 * the norm (LayerNorm with w and b, b.buf NULL: none; RMSNorm with w), the
 * linear W [NH*HS + 2*kv_heads*HS, C] with bias (buf NULL: none) giving q,
 * k and v, k and v stored at position L - 1 of the caches [B, kv_heads,
 * Tmax, HS], and out [B*NH, HS] the attention of q over positions [L -
 * window, L) (window 0: [0, L)), with ALiBi biases where alibi is set,
 * and with rope (not NULL) q and k rotated at position L - 1 first (HS
 * even): what clf_op_norm_dot, (clf_op_rope_t,) then clf_op_attn_decode
 * with kn, vn set and one range, compute, the same sums in the same order.
 * No keep mask or relative positions. The op refuses (CLF_ERR_ARG) a device
 * whose work-groups run in parallel; clf_op_attn_qkv_decode_fits says
 * whether the device runs these sizes and they give each of its compute
 * units a work-item (B * kv_heads of them): where they do not, the norm's
 * linear and the attention split the work more finely. */
typedef struct clf_attn_qkv_decode {
    int rms;
    clf_ptr x, w, b;
    float eps;
    clf_ptr W, bias;
    clf_ptr out, kcache, vcache;
    size_t B, C, NH, kv_heads, HS, Tmax, L, window;
    float scale;
    int alibi;
    const clf_rope *rope; /* NULL: none */
} clf_attn_qkv_decode;
int clf_op_attn_qkv_decode_fits(const clf_runtime *rt, size_t B, size_t kv_heads, size_t HS,
                                size_t C, size_t NH, size_t L);
clf_status clf_op_attn_qkv_decode(clf_runtime *rt, const clf_attn_qkv_decode *a, clf_error *err);

/* KV cache (decoding; kernels in cl/attention.cl). Copy new keys and
 * values from the float32 heads k and v (k and v inside the fused qkv: the
 * same buffer, shape and row stride) into positions [pos0, pos0 + T) of the
 * caches kcache and vcache [B, NH, Tmax, HS], in one launch. */
clf_status clf_op_kv_store(clf_runtime *rt, clf_ptr kcache, clf_ptr vcache, const clf_heads *k,
                           const clf_heads *v, size_t Tmax, size_t pos0, clf_error *err);

/* Row gather of a cache-shaped tensor: for i < rows, g < G, j < len,
 * dst[(i*G + g)*stride + j] = src[(r*G + g)*stride + j] with r = index[i]
 * (int32 on the device; index.buf NULL: r = i). 32-bit words, copied bit
 * for bit (floats or int32). dst must not overlap src. */
clf_status clf_op_cache_gather(clf_runtime *rt, clf_ptr dst, clf_ptr src, clf_ptr index,
                               size_t rows, size_t G, size_t len, size_t stride, clf_error *err);

/* ---- fused attention (cl/flash/) ------------------------------------------ */

/* y = softmax(scale q k^T + mask) v for every (b, h, t) in O(T) memory: no
 * T x S score matrix is stored. q, k, v are read in place from their
 * projections' layouts (row strides q_stride, kv_stride; head h at column
 * h*HS: inside a fused [B, T, 3C] qkv, say) and y is written merged,
 * [B, T, y_stride]; keys and values may instead sit in a KV cache
 * [B, NH, Tmax, HS]: kv_stride HS, kv_batch_stride NH*Tmax*HS,
 * kv_head_stride Tmax*HS (0, 0: the projections' layout, S rows of
 * kv_stride, head h at column h*HS); lse [B*NH, T] gets each row's log-sum-exp for the
 * backward pass. Masks: causal (query t sees keys s <= t + S - T), a
 * sliding window of the `window` most recent keys (0 = none; causal only),
 * keep (int32, row b at b*keep_stride, nonzero = attend; buf NULL = none),
 * ALiBi biases (alibi = 1: -slope_h |t + S - T - s|). A row that sees
 * nothing gives y = 0 and lse = -inf. Attention dropout with probability
 * p_drop keyed by (seed, stream) drops exactly the elements
 * clf_op_dropout_forward would drop from a materialised [B*NH, T, S]
 * probability tensor with the same key. HS <= 256. t: the storage of q,
 * k, v and y and, backward, of dy, dq, dk and dv (CLF_DT_F32, or bf16 /
 * f16: train.precision's attention; offsets and strides then count
 * 16-bit elements); lse, dsum and all arithmetic stay float32. */
typedef struct clf_attn_fused {
    clf_ptr y, lse, q, k, v, keep;
    clf_dtype t;
    size_t y_stride, q_stride, kv_stride, keep_stride;
    size_t kv_batch_stride, kv_head_stride;
    size_t B, NH, T, S, HS;
    size_t kv_heads; /* K/V heads, dividing NH: query head h reads K/V head h / (NH /
                        kv_heads) (grouped-query attention; 1: multi-query); 0: NH */
    int causal, alibi;
    /* keep holds segment ids instead (packed documents, T == S): query t
     * sees key s only where keep[s] == keep[t] */
    int segments;
    size_t window;
    float scale;
    float p_drop;
    uint64_t seed, stream;
    /* a relative position bias added to the scaled scores (positional.type
     * t5): rb [NH, 2 rb_w] from clf_op_relbias_table for this T and S; rb_w
     * 0: none */
    clf_ptr rb;
    size_t rb_w;
    /* Shaw's relative positions (positional.type relative): qr [B*NH*T,
     * 2 rel_k + 1], row (b, h, t) = scale q.r_c (clf_op_rel_qr), added to
     * the score of key s at c = clamp(s - tq, -rel_k, rel_k) + rel_k; qr_w
     * (2 rel_k + 1) 0: none */
    clf_ptr qr;
    size_t qr_w, rel_k;
    /* sparse patterns beside the window (causal, window > 0): a query also
     * sees the keys below glob, every stride-th key back, and the keys of
     * its block's random blocks (blocks of sp_bs positions; sp [sp_nb,
     * sp_R] int32, row qb its random key blocks, -1 = none:
     * clf_attn_sparse_draw's). Block pairs where no query sees a key are
     * skipped. sp_bs 0: none */
    size_t glob, stride, sp_bs, sp_nb, sp_R;
    clf_ptr sp;
} clf_attn_fused;
/* Performer (FAVOR+) attention, float32 (cl/attention.cl's perf_*): y =
 * softmax attention approximated through m positive random features of
 * om [m, HS] (the layer's), both ways (keep: the keys' padding mask, buf
 * NULL = none) or causal (queries the last T of S positions). q, k, v, y
 * in clf_attn_fused's layouts (kv_batch_stride, kv_head_stride 0: the
 * projections'; one K/V head per query head). Scratch the caller owns,
 * kept for the backward: fq [B*NH*T*m], fk [B*NH*S*m], nd [B*NH*T*(HS+1)];
 * cmax [B*NH], rmax [B*NH*S]. */
typedef struct clf_performer {
    clf_ptr y, q, k, v, keep, om, fq, fk, nd, cmax, rmax;
    size_t y_stride, q_stride, kv_stride, kv_batch_stride, kv_head_stride, keep_stride;
    size_t B, NH, T, S, HS, m;
    int causal;
} clf_performer;
clf_status clf_op_performer_forward(clf_runtime *rt, const clf_performer *p, clf_error *err);
/* Its backward from dy (y's layout): dq (rows of dq_stride), dk and dv
 * (rows of dkv_stride) written; scratch u [B*NH*T*(HS+1)], dfq [B*NH*T*m],
 * dfk [B*NH*S*m]. Deterministic (every sum in sequence order). */
typedef struct clf_performer_grad {
    clf_ptr dy, dq, dk, dv, u, dfq, dfk;
    size_t dq_stride, dkv_stride;
} clf_performer_grad;
clf_status clf_op_performer_backward(clf_runtime *rt, const clf_performer *p,
                                     const clf_performer_grad *g, clf_error *err);
/* Columns [col0, col0 + ncols) of the float32 rows x (row stride stride)
 * whose keep entry (int32 [rows]) is 0 set to 0. */
clf_status clf_op_rows_mask(clf_runtime *rt, clf_ptr x, size_t stride, size_t col0, size_t ncols,
                            clf_ptr keep, size_t rows, clf_error *err);
/* Of the nb (nb + 1) / 2 causal pairs of blocks of bs positions, how many
 * hold a key some query of the pair sees under the window, glob, stride and
 * the random blocks rnd [nb, R]: the pairs the fused kernels visit (the
 * rule of the cl/flash/ family's fa_sp_visit, on the host). */
size_t clf_attn_sparse_visits(size_t nb, size_t bs, size_t window, size_t glob, size_t stride,
                              const int32_t *rnd, size_t R);
/* R distinct random key blocks at or before each of nb query blocks (all of
 * them where there are at most R), ascending, from seed: rnd [nb, R], -1
 * past the drawn ones. */
void clf_attn_sparse_draw(int32_t *rnd, size_t nb, size_t R, uint64_t seed);
/* Sparse patterns while decoding: keep [B, keep_stride] (row b, positions
 * [0, L)) = which keys the query at L - 1 sees under a's window, glob,
 * stride and block table (a decoding step's keep mask, with no window). */
clf_status clf_op_sparse_keep(clf_runtime *rt, clf_ptr keep, size_t keep_stride, size_t B, size_t L,
                              const clf_attn_fused *a, clf_error *err);
clf_status clf_op_attn_fused_forward(clf_runtime *rt, const clf_attn_fused *a, clf_error *err);
/* The probabilities a's forward computes for its first sequence, out [NH,
 * T, S] on the host (row (h, t) over the keys; 0 where hidden; a row that
 * sees no key all 0), without dropout: the forward run on a's queries and
 * keys (copied beside the new values) with the values replaced by HS
 * columns of the identity at a time, so y holds P's columns (attn_probs.c).
 * float32 storage; allocates its scratch (not for a training step). */
clf_status clf_op_attn_probs(clf_runtime *rt, const clf_attn_fused *a, float *out, clf_error *err);
/* Its backward from y, lse and dy (dy in y's layout): dq, dk, dv written
 * (not accumulated) in their projections' gradient layouts (row strides
 * dq_stride, dkv_stride; head h at column h*HS: dq, dk, dv inside a fused
 * [B, T, 3C] dqkv, say), the probabilities recomputed from lse and the
 * dropout mask regenerated, no T x S buffer, no atomics, deterministic;
 * keys nobody sees get 0. dsum: scratch of B*NH*T floats. */
typedef struct clf_attn_fused_grad {
    clf_ptr dy, dq, dk, dv, dsum;
    size_t dq_stride, dkv_stride;
    /* with fewer K/V heads than query heads: scratch of B*S rows of 2*NH*HS
     * elements of t, where the dk/dv pass writes each query head's share
     * before the shares of a group are summed (in head order) into dk, dv */
    clf_ptr dkv_full;
    /* with a relative bias: rbk (clf_op_relbias_table's buckets) and drb
     * [B*T, NH*nbk] written with each query row's ds summed by bucket (a
     * column sum gives the table's gradient); nbk 0: none */
    clf_ptr rbk, drb;
    size_t nbk;
    /* with Shaw's relative positions: dqr [B*NH*T, qr_w] written with each
     * row's ds by clamped distance (clf_op_rel_qr_backward takes it) */
    clf_ptr dqr;
} clf_attn_fused_grad;
/* Shaw's relative positions around the fused attention: qr [B*NH*T, W]
 * (W = 2 rel_k + 1) = scale q_(b,t,h) . r_c from q (heads of h->x, stored
 * as h->t) and r [W, HS]; the backward adds scale sum_c dqr r_c into dq
 * (the heads of dq, stored as dq->t) and scale sum over (b, t, h) of dqr q
 * into dr (accumulated), deterministically. */
clf_status clf_op_rel_qr(clf_runtime *rt, clf_ptr qr, const clf_heads *q, clf_ptr r, size_t W,
                         float scale, clf_error *err);
clf_status clf_op_rel_qr_backward(clf_runtime *rt, const clf_heads *dq, clf_ptr dr,
                                  const clf_heads *q, clf_ptr r, clf_ptr dqr, size_t W, float scale,
                                  clf_error *err);
/* The table width clf_op_relbias_table and the kernels use for T queries
 * and S keys: T + S - 1 and room for the widest lanes. */
size_t clf_op_relbias_width(size_t T, size_t S);
/* The relative bias of a call of T queries (the last T of S positions):
 * rb [NH, 2 width] floats and rbk [width] int32 from the table w [NH, NB]
 * and bk [2 R0 + 1] int32, the bucket of key - query + R0 (R0 >= T - 1,
 * S - 1; cl/attention.cl's attn_relbias_table). */
clf_status clf_op_relbias_table(clf_runtime *rt, clf_ptr rb, clf_ptr rbk, clf_ptr w, clf_ptr bk,
                                size_t R0, size_t NH, size_t NB, size_t T, size_t S,
                                clf_error *err);
clf_status clf_op_attn_fused_backward(clf_runtime *rt, const clf_attn_fused *a,
                                      const clf_attn_fused_grad *g, clf_error *err);

/* ---- loss (cl/loss.cl) ----------------------------------------------------- */

/* Fused softmax + cross-entropy over logits [R, V] and int32 targets [R].
 * Targets equal to ignore_index (e.g. -1 or pad) contribute no loss and no
 * gradient. With label smoothing eps the target distribution is
 * (1-eps) one-hot + eps/V uniform (PyTorch's definition).
 * losses[r] = per-row loss (0 for ignored rows);
 * dlogits[r,:] = grad_scale * (softmax - target dist) (0 for ignored rows),
 * grad_scale first multiplied by grad_mul[0] where grad_mul.buf is set (a
 * factor that lives on the device: fp16 training's loss scale);
 * dlogits may alias logits. dlogits.buf NULL = forward only. */
typedef struct clf_xent_args {
    clf_ptr losses, dlogits, logits, targets, grad_mul;
    size_t R, V;
    float label_smoothing, grad_scale;
    int ignore_index;
} clf_xent_args;
clf_status clf_op_cross_entropy(clf_runtime *rt, const clf_xent_args *a, clf_error *err);

/* ---- random numbers and dropout (cl/random.cl) ------------------------------ */

/* Counter-based (Philox4x32-10) dropout: element i of a launch keyed by
 * (seed, stream) is kept with probability 1-p and scaled by 1/(1-p). The
 * same key reproduces the same mask, so backward regenerates it instead of
 * storing it. out may alias in. p == 0 is a copy (or nothing when aliased). */
clf_status clf_op_dropout_forward(clf_runtime *rt, clf_ptr out, clf_ptr in, size_t n, float p,
                                  uint64_t seed, uint64_t stream, clf_error *err);
clf_status clf_op_dropout_backward(clf_runtime *rt, clf_ptr din, clf_ptr dout, size_t n, float p,
                                   uint64_t seed, uint64_t stream, clf_error *err);
/* The same generator on the host: Random123's philox4x32_R(10, ctr, key). */
void clf_random_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* Whether dropout keeps element i of a launch keyed by (seed, stream), exactly
 * as the device decides: word i % 4 of philox(ctr = (i/4 lo, i/4 hi, stream lo,
 * stream hi), key = (seed lo, seed hi)) >= round(p * 2^32). */
int clf_random_dropout_keep(uint64_t i, float p, uint64_t seed, uint64_t stream);

/* ---- optimizer (cl/optim.cl) ------------------------------------------------ */

/* Global gradient-norm clipping without a host round trip:
 * gscale[0] = min(1, max_norm / (sqrt(sumsq[0]) + 1e-6)), gnorm[0] = sqrt(sumsq[0]).
 * max_norm <= 0 -> gscale = 1. sumsq comes from clf_op_sumsq over the flat grads. */
clf_status clf_op_clip_scale(clf_runtime *rt, clf_ptr gscale, clf_ptr gnorm, clf_ptr sumsq,
                             float max_norm, clf_error *err);
/* AdamW over one flat parameter buffer of n floats; elements [0, n_decay)
 * get decoupled weight decay, the rest (biases, norms) none. Gradients are
 * multiplied by gscale[0] first (the clip factor). step counts from 1.
 * Adam (not W) is weight_decay = 0. */
typedef struct clf_adamw_hparams {
    float lr, beta1, beta2, eps, weight_decay;
    int step;
    float lr_mult; /* > 0: this slice learns at lr * lr_mult (layer-wise decay's factor;
                      1 without), its weight decay too; with amp, amp's step size is
                      multiplied by it */
} clf_adamw_hparams;

/* Dynamic loss scaling (cl/optim.cl's amp_step), in place of
 * clf_op_clip_scale: amp holds CLF_AMP_SLOTS floats (runtime/contract.h) and
 * the gradients arrive multiplied by amp[CLF_AMP_SCALE]. A non-finite
 * sumsq skips the step (amp[CLF_AMP_RUN] = 0), counts it and halves the
 * scale (never below 1); otherwise gscale = clip / scale, Adam's t
 * advances, its bias corrections for lr, beta1, beta2 go to amp, and after
 * `interval` clean steps the scale doubles (interval 0: fixed scale). */
typedef struct clf_amp_hparams {
    float max_norm, lr, beta1, beta2;
    unsigned interval;
} clf_amp_hparams;
clf_status clf_op_amp_step(clf_runtime *rt, clf_ptr amp, clf_ptr gscale, clf_ptr gnorm,
                           clf_ptr sumsq, const clf_amp_hparams *p, clf_error *err);
/* AdamW over n floats of params, grads and the moments m, v, elements
 * [0, n_decay) decayed; gradients multiplied by gscale[0] (the clip
 * factor). After clf_op_amp_step (amp.buf set) h.step is unused (Adam's t
 * and the bias corrections come from amp) and nothing changes where amp
 * says skip; amp.buf NULL: plain AdamW, h.step its t. t16 bf16 or f16:
 * each updated parameter is also stored, rounded, into params16 (n
 * elements of t16 from its offset), the 16-bit weights the products read;
 * CLF_DT_F32: no such copy. */
typedef struct clf_adamw_args {
    clf_ptr params, grads, m, v, gscale, amp, params16;
    clf_dtype t16;
    size_t n, n_decay;
    clf_adamw_hparams h;
} clf_adamw_args;
clf_status clf_op_adamw_amp(clf_runtime *rt, const clf_adamw_args *a, clf_error *err);

#endif
