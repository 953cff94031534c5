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

#endif
