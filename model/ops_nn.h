/*
 * ops_nn.h - host wrappers of the Transformer-specific kernels: embeddings
 * and positions, attention head layout, the fused loss, dropout, the
 * optimizer and gradient clipping. Same conventions as ops.h.
 */
#ifndef CLF_OPS_NN_H
#define CLF_OPS_NN_H

#include "ops.h"

/* ---- embeddings and positions (cl/embed.cl) ------------------------------ */

/* out[b,t,:] = scale * wte[tokens[b,t], :] (+ wpe[pos0 + t, :] if wpe.buf).
 * tokens int32 [B, T]. */
clf_status clf_op_embed_forward(clf_runtime *rt, clf_ptr out, clf_ptr tokens, clf_ptr wte,
                                clf_ptr wpe, size_t B, size_t T, size_t C, size_t pos0,
                                float scale, clf_error *err);
/* dwte[v,:] += scale * sum over (b,t) with tokens[b,t]==v of dout[b,t,:];
 * dwpe[pos0+t,:] += sum_b dout[b,t,:] (if dwpe.buf). Deterministic. */
clf_status clf_op_embed_backward(clf_runtime *rt, clf_ptr dwte, clf_ptr dwpe, clf_ptr dout,
                                 clf_ptr tokens, size_t B, size_t T, size_t C, size_t V,
                                 float scale, clf_error *err);
/* x[b,t,:] += PE(pos0 + t) with the sinusoidal table of "Attention Is All You
 * Need": PE[p, 2i] = sin(p / 10000^(2i/C)), PE[p, 2i+1] = cos(same). */
clf_status clf_op_sinusoid_add(clf_runtime *rt, clf_ptr x, size_t B, size_t T, size_t C,
                               size_t pos0, clf_error *err);
/* Rotary embedding in place on x laid out [B, T, NH, HS] with row stride
 * `row_stride` floats between consecutive (b,t) (so q and k inside a fused
 * qkv buffer can be rotated directly). rotate_half convention (GPT-NeoX / HF
 * Llama): pairs (i, i + HS/2), angle = p * theta^(-2i/HS), p = pos0 + t.
 * inverse = 1 applies the transpose rotation (the backward pass). */
clf_status clf_op_rope(clf_runtime *rt, clf_ptr x, size_t B, size_t T, size_t NH, size_t HS,
                       size_t row_stride, size_t pos0, float theta, int inverse,
                       clf_error *err);

/* ---- attention layout (cl/attention.cl) ---------------------------------- */

/* Split a [B, T, NH*HS] slab (rows of `row_stride` floats, e.g. 3C inside a
 * fused qkv) into heads [B, NH, T, HS]; and the inverse. */
clf_status clf_op_heads_split(clf_runtime *rt, clf_ptr out, clf_ptr in, size_t B, size_t T,
                              size_t NH, size_t HS, size_t row_stride, clf_error *err);
/* out [B, T, NH*HS] with rows of `row_stride` floats <- in [B, NH, T, HS].
 * accumulate = 1 adds into out (used to gather q/k/v grads into dqkv). */
clf_status clf_op_heads_merge(clf_runtime *rt, clf_ptr out, clf_ptr in, size_t B, size_t T,
                              size_t NH, size_t HS, size_t row_stride, int accumulate,
                              clf_error *err);
/* Single-query attention against a KV cache, for generation:
 * q [B, NH, HS], kcache/vcache [B, NH, Tmax, HS] with L valid positions,
 * out [B, NH*HS]. Fused scores, softmax and weighted sum. */
clf_status clf_op_attn_decode(clf_runtime *rt, clf_ptr out, clf_ptr q, clf_ptr kcache,
                              clf_ptr vcache, size_t B, size_t NH, size_t HS, size_t Tmax,
                              size_t L, float scale, clf_error *err);
/* The same over a keep-masked cache (cross-attention of one
 * decoder position over the encoded source): q [B, NH, HS], kcache/vcache
 * [B, NH, Tmax, HS] with L valid positions, keep int32 with row b at
 * b * keep_stride (nonzero = attend), out [B, NH*HS]. A row with nothing
 * kept gives zeros. Deterministic. */
clf_status clf_op_attn_decode_keep(clf_runtime *rt, clf_ptr out, clf_ptr q, clf_ptr kcache,
                                   clf_ptr vcache, clf_ptr keep, size_t keep_stride, size_t B,
                                   size_t NH, size_t HS, size_t Tmax, size_t L, float scale,
                                   clf_error *err);

/* ---- loss (cl/loss.cl) ----------------------------------------------------- */

/* Fused softmax + cross-entropy over logits [R, V] and int32 targets [R].
 * Targets equal to ignore_index (e.g. -1 or pad) contribute no loss and no
 * gradient. With label smoothing eps the target distribution is
 * (1-eps) one-hot + eps/V uniform (PyTorch's definition).
 * losses[r] = per-row loss (0 for ignored rows);
 * dlogits[r,:] = grad_scale * (softmax - target dist) (0 for ignored rows);
 * dlogits may alias logits. dlogits.buf NULL = forward only. */
clf_status clf_op_cross_entropy(clf_runtime *rt, clf_ptr losses, clf_ptr dlogits,
                                clf_ptr logits, clf_ptr targets, size_t R, size_t V,
                                float label_smoothing, int ignore_index, float grad_scale,
                                clf_error *err);

/* ---- random numbers and dropout (cl/random.cl) ------------------------------ */

/* Counter-based (Philox4x32-10) dropout: element i of a launch keyed by
 * (seed, stream) is kept with probability 1-p and scaled by 1/(1-p). The
 * same key reproduces the same mask, so backward regenerates it instead of
 * storing it. out may alias in. p == 0 is a copy (or nothing when aliased). */
clf_status clf_op_dropout_forward(clf_runtime *rt, clf_ptr out, clf_ptr in, size_t n, float p,
                                  uint64_t seed, uint64_t stream, clf_error *err);
clf_status clf_op_dropout_backward(clf_runtime *rt, clf_ptr din, clf_ptr dout, size_t n,
                                   float p, uint64_t seed, uint64_t stream, clf_error *err);
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
} clf_adamw_hparams;
clf_status clf_op_adamw(clf_runtime *rt, clf_ptr params, clf_ptr grads, clf_ptr m, clf_ptr v,
                        clf_ptr gscale, size_t n, size_t n_decay, const clf_adamw_hparams *h,
                        clf_error *err);

#endif
