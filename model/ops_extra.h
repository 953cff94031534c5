/*
 * ops_extra.h - ops the model graph needs beyond ops.h / ops_nn.h, with
 * their kernels in cl/model_extra.cl. Same conventions as ops.h: enqueue
 * only, clf_ptr arguments, no allocation.
 */
#ifndef CLF_OPS_EXTRA_H
#define CLF_OPS_EXTRA_H

#include "ops.h"

/* Copy new keys (or values) from rows src [B, T, row_stride] (head h at
 * columns h*HS..., e.g. k inside the fused qkv with row_stride 3C) into
 * positions [pos0, pos0 + T) of a cache [B, NH, Tmax, HS]. */
clf_status clf_op_kv_store(clf_runtime *rt, clf_ptr cache, clf_ptr src, size_t B, size_t T,
                           size_t NH, size_t HS, size_t row_stride, size_t Tmax, size_t pos0,
                           clf_error *err);

/* Mean over the kept positions: out [B, C] from x [B, S, C] and keep int32
 * [B, S] (a row without kept positions gives 0). Backward overwrites
 * dx [B, S, C] = keep ? dout / count : 0. */
clf_status clf_op_mean_pool_forward(clf_runtime *rt, clf_ptr out, clf_ptr x, clf_ptr keep,
                                    size_t B, size_t S, size_t C, clf_error *err);
clf_status clf_op_mean_pool_backward(clf_runtime *rt, clf_ptr dx, clf_ptr dout, clf_ptr keep,
                                     size_t B, size_t S, size_t C, clf_error *err);

/* Row gather of a cache-shaped tensor: for i < rows, g < G, j < len,
 * dst[(i*G + g)*stride + j] = src[(r*G + g)*stride + j] with r = index[i]
 * (int32 on the device; index.buf NULL: r = i). 32-bit words, copied bit
 * for bit (floats or int32). dst must not overlap src. */
clf_status clf_op_cache_gather(clf_runtime *rt, clf_ptr dst, clf_ptr src, clf_ptr index,
                               size_t rows, size_t G, size_t len, size_t stride,
                               clf_error *err);

#endif
