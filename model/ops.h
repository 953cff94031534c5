/*
 * ops.h - host-side wrappers of the device kernels: the contract between the
 * kernels in cl/ and the model graph.
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

#include "../runtime/runtime.h"

/* ---- elementwise (cl/elementwise.cl) ------------------------------------ */

clf_status clf_op_add(clf_runtime *rt, clf_ptr out, clf_ptr a, clf_ptr b, size_t n,
                      clf_error *err); /* out = a + b (out may alias a or b) */
clf_status clf_op_scale(clf_runtime *rt, clf_ptr out, clf_ptr in, float s, size_t n,
                        clf_error *err); /* out = s * in */
clf_status clf_op_axpy(clf_runtime *rt, clf_ptr y, float a, clf_ptr x, size_t n,
                       clf_error *err); /* y += a * x */
/* out = a + b, elementwise, for the residual stream (alias of add kept for
 * readability at call sites where one operand is the residual). */
clf_status clf_op_residual(clf_runtime *rt, clf_ptr out, clf_ptr x, clf_ptr residual,
                           size_t n, clf_error *err);

typedef enum clf_act {
    CLF_ACT_NONE = 0,
    CLF_ACT_RELU,
    CLF_ACT_GELU_ERF,  /* x * Phi(x), PyTorch nn.GELU() */
    CLF_ACT_GELU_TANH, /* PyTorch nn.GELU(approximate="tanh"), GPT-2 */
    CLF_ACT_SILU,
} clf_act;

/* out = act(in) */
clf_status clf_op_act_forward(clf_runtime *rt, clf_act act, clf_ptr out, clf_ptr in, size_t n,
                              clf_error *err);
/* din (=|+=) dout * act'(in) */
clf_status clf_op_act_backward(clf_runtime *rt, clf_act act, clf_ptr din, clf_ptr dout,
                               clf_ptr in, size_t n, int accumulate, clf_error *err);
/* Fused bias + activation over [R, N]: h[r,c] += bias[c] (in place, kept as the
 * pre-activation for backward); out[r,c] = act(h[r,c]). act NONE: only the
 * bias add (out may equal h). bias.buf NULL: no bias. */
clf_status clf_op_bias_act_forward(clf_runtime *rt, clf_act act, clf_ptr h, clf_ptr bias,
                                   clf_ptr out, size_t R, size_t N, clf_error *err);
/* dbias[c] (=|+=) sum_r d[r,c]; column sums of [R, N]. */
clf_status clf_op_bias_backward(clf_runtime *rt, clf_ptr dbias, clf_ptr d, size_t R, size_t N,
                                int accumulate, clf_error *err);
/* SwiGLU over [R, 2H] -> [R, H]: out = silu(g) * u with g = in[:, :H],
 * u = in[:, H:]. Backward writes din [R, 2H]. */
clf_status clf_op_swiglu_forward(clf_runtime *rt, clf_ptr out, clf_ptr in, size_t R, size_t H,
                                 clf_error *err);
clf_status clf_op_swiglu_backward(clf_runtime *rt, clf_ptr din, clf_ptr dout, clf_ptr in,
                                  size_t R, size_t H, clf_error *err);

/* ---- reductions (cl/reduce.cl) ------------------------------------------ */

clf_status clf_op_row_sum(clf_runtime *rt, clf_ptr out, clf_ptr in, size_t R, size_t N,
                          clf_error *err); /* out[r] = sum_c in[r,c] */
clf_status clf_op_row_max(clf_runtime *rt, clf_ptr out, clf_ptr in, size_t R, size_t N,
                          clf_error *err); /* out[r] = max_c in[r,c] */
/* out[0] = sum of squares of in[0..n) (deterministic two-stage reduction).
 * scratch must hold at least clf_op_sumsq_scratch(rt, n) floats. */
size_t clf_op_sumsq_scratch(clf_runtime *rt, size_t n);
clf_status clf_op_sumsq(clf_runtime *rt, clf_ptr out, clf_ptr in, size_t n, clf_ptr scratch,
                        clf_error *err);
/* out[0] = mean of in[0..n), same scratch rule; n = 0 is CLF_ERR_ARG. */
clf_status clf_op_mean(clf_runtime *rt, clf_ptr out, clf_ptr in, size_t n, clf_ptr scratch,
                       clf_error *err);

/* ---- softmax (cl/softmax.cl) --------------------------------------------- */

/* Row-wise y = softmax(scale * x + mask) over [R, N], numerically stable.
 * A masked entry gets probability 0; a fully-masked row is all zeros (not NaN).
 * Masks, all optional and combinable:
 *  - additive: float [additive_rows, N]; row r uses row r % additive_rows.
 *  - keep: int32 [G, N], nonzero = attend; row r uses row r / keep_group_rows
 *    (padding masks: group = batch, keep_group_rows = NH * T).
 *  - causal: row r is query q = r % causal_T; columns j > q + (N - causal_T)
 *    are masked (so with a KV cache of N >= T keys the last T queries align).
 * A mask given with additive_rows or keep_group_rows = 0 is CLF_ERR_ARG. */
typedef struct clf_softmax_mask {
    clf_ptr additive; /* buf NULL = none */
    size_t additive_rows;
    clf_ptr keep; /* buf NULL = none */
    size_t keep_group_rows;
    size_t causal_T; /* 0 = not causal */
} clf_softmax_mask;

clf_status clf_op_softmax_forward(clf_runtime *rt, clf_ptr y, clf_ptr x, size_t R, size_t N,
                                  float scale, const clf_softmax_mask *mask, clf_error *err);
/* dx = scale * y * (dy - sum_c dy*y); masked entries (y = 0) get 0. */
clf_status clf_op_softmax_backward(clf_runtime *rt, clf_ptr dx, clf_ptr dy, clf_ptr y, size_t R,
                                   size_t N, float scale, clf_error *err);

/* ---- normalisation (cl/norm.cl) ------------------------------------------ */

/* LayerNorm over the last dim of [R, N]: out = (x - mean) * rstd * w + b.
 * Saves mean[R] and rstd[R] for backward. b.buf NULL = no bias. */
clf_status clf_op_layernorm_forward(clf_runtime *rt, clf_ptr out, clf_ptr mean, clf_ptr rstd,
                                    clf_ptr x, clf_ptr w, clf_ptr b, size_t R, size_t N,
                                    float eps, clf_error *err);
/* dx (=|+=) ...; dw += ..., db += ... (parameter grads always accumulate).
 * A NULL dx, dw or db (buf NULL) skips that gradient. N = 0 is CLF_ERR_ARG. */
clf_status clf_op_layernorm_backward(clf_runtime *rt, clf_ptr dx, clf_ptr dw, clf_ptr db,
                                     clf_ptr dout, clf_ptr x, clf_ptr mean, clf_ptr rstd,
                                     clf_ptr w, size_t R, size_t N, int accumulate,
                                     clf_error *err);
/* RMSNorm: out = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps). */
clf_status clf_op_rmsnorm_forward(clf_runtime *rt, clf_ptr out, clf_ptr rstd, clf_ptr x,
                                  clf_ptr w, size_t R, size_t N, float eps, clf_error *err);
clf_status clf_op_rmsnorm_backward(clf_runtime *rt, clf_ptr dx, clf_ptr dw, clf_ptr dout,
                                   clf_ptr x, clf_ptr rstd, clf_ptr w, size_t R, size_t N,
                                   int accumulate, clf_error *err);

#endif
