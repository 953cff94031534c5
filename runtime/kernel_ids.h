/*
 * kernel_ids.h - the kernels the library launches, by id.
 *
 * One row per kernel: its id, its family (cl/<family>.cl) and its name in
 * that source. When a family's program is built (or loaded from the
 * cache), every kernel its rows name is created at once, so a launch finds
 * its handle by index (clf_kernel_of), and a row naming a kernel the
 * source does not define fails that build with the name, on every device.
 * Kernels only the tests and benchmarks launch stay reachable by name
 * (clf_kernel_get). The GEMM engine's kernels are not here: it resolves
 * them once per configuration when it plans a product.
 */
#ifndef CLF_KERNEL_IDS_H
#define CLF_KERNEL_IDS_H

#include "runtime/runtime.h"

#define CLF_KERNEL_TABLE(K)                                                                        \
    K(ATTN_DECODE, "attention", "attn_decode")                                                     \
    K(ATTN_DECODE_ITEM, "attention", "attn_decode_item")                                           \
    K(ATTN_DECODE_COMBINE, "attention", "attn_decode_combine")                                     \
    K(ATTN_QKV_DECODE_ITEM, "decode", "attn_qkv_decode_item")                                      \
    K(KV_STORE, "attention", "kv_store")                                                           \
    K(RELBIAS_TABLE, "attention", "attn_relbias_table")                                            \
    K(SPARSE_KEEP, "attention", "attn_sparse_keep")                                                \
    K(ROWS_MASK, "attention", "attn_rows_mask")                                                    \
    K(PERF_PHI, "attention", "perf_phi")                                                           \
    K(PERF_BHMAX, "attention", "perf_bhmax")                                                       \
    K(PERF_FWD, "attention", "perf_fwd")                                                           \
    K(PERF_OUT, "attention", "perf_out")                                                           \
    K(PERF_BWD_ROWS, "attention", "perf_bwd_rows")                                                 \
    K(PERF_DFQ, "attention", "perf_dfq")                                                           \
    K(PERF_DKV, "attention", "perf_dkv")                                                           \
    K(PERF_DPHI, "attention", "perf_dphi")                                                         \
    K(REL_QR, "attention", "attn_rel_qr")                                                          \
    K(REL_DQ, "attention", "attn_rel_dq")                                                          \
    K(REL_DR, "attention", "attn_rel_dr")                                                          \
    K(CACHE_GATHER, "attention", "cache_gather")                                                   \
    K(WIDEN_BF16, "convert", "widen_bf16")                                                         \
    K(NARROW_BF16, "convert", "narrow_bf16")                                                       \
    K(WIDEN_F16, "convert", "widen_f16")                                                           \
    K(NARROW_F16, "convert", "narrow_f16")                                                         \
    K(ADD_F32, "elementwise", "add_f32")                                                           \
    K(ZERO_F32, "elementwise", "zero_f32")                                                         \
    K(EMA_F32, "elementwise", "ema_f32")                                                           \
    K(SWAP_F32, "elementwise", "swap_f32")                                                         \
    K(AXPY_F32, "elementwise", "axpy_f32")                                                         \
    K(ACT_BACKWARD_RELU, "elementwise", "act_backward_relu")                                       \
    K(ACT_BACKWARD_GELU_ERF, "elementwise", "act_backward_gelu_erf")                               \
    K(ACT_BACKWARD_GELU_TANH, "elementwise", "act_backward_gelu_tanh")                             \
    K(ACT_BACKWARD_SILU, "elementwise", "act_backward_silu")                                       \
    K(BIAS_BACKWARD_ITEM, "elementwise", "bias_backward_item")                                     \
    K(BIAS_BACKWARD_GROUP, "elementwise", "bias_backward_group")                                   \
    K(SWIGLU_FORWARD, "elementwise", "swiglu_forward")                                             \
    K(SWIGLU_BACKWARD, "elementwise", "swiglu_backward")                                           \
    K(EMBED_FORWARD, "embed", "embed_forward")                                                     \
    K(EMBED_BACKWARD_WTE, "embed", "embed_backward_wte")                                           \
    K(EMBED_BACKWARD_WPE, "embed", "embed_backward_wpe")                                           \
    K(SINUSOID_ADD, "embed", "sinusoid_add")                                                       \
    K(ROPE, "embed", "rope")                                                                       \
    K(FLASH_VW, "flash", "attn_flash_vw")                                                          \
    K(FLASH_FWD, "flash", "attn_flash_fwd")                                                        \
    K(FLASH_BWD_DQ, "flash", "attn_flash_bwd_dq")                                                  \
    K(FLASH_BWD_DKV, "flash", "attn_flash_bwd_dkv")                                                \
    K(FLASH_FWD_GROUP, "flash", "attn_flash_fwd_group")                                            \
    K(FLASH_BWD_DQ_GROUP, "flash", "attn_flash_bwd_dq_group")                                      \
    K(FLASH_BWD_DKV_GROUP, "flash", "attn_flash_bwd_dkv_group")                                    \
    K(FLASH_KV_SUM, "flash", "attn_flash_kv_sum")                                                  \
    K(CROSS_ENTROPY, "loss", "cross_entropy")                                                      \
    K(CROSS_ENTROPY_ROWS, "loss", "cross_entropy_rows")                                            \
    K(LAYERNORM_FORWARD_ITEM, "norm", "layernorm_forward_item")                                    \
    K(LAYERNORM_FORWARD_GROUP, "norm", "layernorm_forward_group")                                  \
    K(LAYERNORM_BACKWARD_ITEM, "norm", "layernorm_backward_item")                                  \
    K(LAYERNORM_BACKWARD_GROUP, "norm", "layernorm_backward_group")                                \
    K(LAYERNORM_DWDB_ITEM, "norm", "layernorm_dwdb_item")                                          \
    K(LAYERNORM_DWDB_GROUP, "norm", "layernorm_dwdb_group")                                        \
    K(RMSNORM_FORWARD_ITEM, "norm", "rmsnorm_forward_item")                                        \
    K(NORM_DOT_ITEM, "norm", "norm_dot_item")                                                      \
    K(RMSNORM_FORWARD_GROUP, "norm", "rmsnorm_forward_group")                                      \
    K(RMSNORM_BACKWARD_ITEM, "norm", "rmsnorm_backward_item")                                      \
    K(RMSNORM_BACKWARD_GROUP, "norm", "rmsnorm_backward_group")                                    \
    K(RMSNORM_DW_ITEM, "norm", "rmsnorm_dw_item")                                                  \
    K(RMSNORM_DW_GROUP, "norm", "rmsnorm_dw_group")                                                \
    K(CLIP_SCALE, "optim", "clip_scale")                                                           \
    K(AMP_STEP, "optim", "amp_step")                                                               \
    K(ADAMW, "optim", "adamw")                                                                     \
    K(ADAMW_VEC, "optim", "adamw_vec")                                                             \
    K(ADAMW_P16, "optim", "adamw_p16")                                                             \
    K(PROBE_FMA_WIDTH, "probe", "probe_fma_width")                                                 \
    K(FMA_PEAK_C6, "probe", "fma_peak_c6")                                                         \
    K(FMA_PEAK_C8, "probe", "fma_peak_c8")                                                         \
    K(FMA_PEAK_C12, "probe", "fma_peak_c12")                                                       \
    K(FMA_PEAK_C16, "probe", "fma_peak_c16")                                                       \
    K(DROPOUT, "random", "dropout")                                                                \
    K(ROW_SUM_ITEM, "reduce", "row_sum_item")                                                      \
    K(ROW_SUM_GROUP, "reduce", "row_sum_group")                                                    \
    K(ROW_MAX_ITEM, "reduce", "row_max_item")                                                      \
    K(ROW_MAX_GROUP, "reduce", "row_max_group")                                                    \
    K(ROW_ARGMAX_ITEM, "reduce", "row_argmax_item")                                                \
    K(ROW_ARGMAX_GROUP, "reduce", "row_argmax_group")                                              \
    K(SUM_PARTS_ITEM, "reduce", "sum_parts_item")                                                  \
    K(SUM_PARTS_GROUP, "reduce", "sum_parts_group")                                                \
    K(SUM_FINISH, "reduce", "sum_finish")                                                          \
    K(MEAN_POOL_FORWARD, "reduce", "mean_pool_forward")                                            \
    K(MEAN_POOL_BACKWARD, "reduce", "mean_pool_backward")                                          \
    K(SHAPE_LOOP_COUNT, "shape", "shape_loop_count")                                               \
    K(SHAPE_FMA, "shape", "shape_fma")                                                             \
    K(SHAPE_MULADD, "shape", "shape_muladd")                                                       \
    K(SHAPE_ROWS_ITEM4, "shape", "shape_rows_item4")                                               \
    K(SHAPE_ROWS_ITEM8, "shape", "shape_rows_item8")                                               \
    K(SHAPE_ROWS_ITEM16, "shape", "shape_rows_item16")                                             \
    K(SHAPE_ROWS_GROUP, "shape", "shape_rows_group")

#define CLF_KERNEL_ID_(id, family, name) CLF_K_##id,
typedef enum clf_kernel_id { CLF_KERNEL_TABLE(CLF_KERNEL_ID_) CLF_K_COUNT } clf_kernel_id;
#undef CLF_KERNEL_ID_

/* The kernel of row id, its family's program built (or loaded from the
 * cache) on first use; every later call is an index. */
clf_status clf_kernel_of(clf_runtime *rt, clf_kernel_id id, clf_kernel **out, clf_error *err);
/* The same from the program `family`: a variant "<family>@<tag>" of the
 * id's family, found by name (NULL: the id's own family). */
clf_status clf_kernel_variant_of(clf_runtime *rt, const char *family, clf_kernel_id id,
                                 clf_kernel **out, clf_error *err);
/* The id's kernel name and family ("?" for an id outside the table). */
const char *clf_kernel_id_name(clf_kernel_id id);
const char *clf_kernel_id_family(clf_kernel_id id);

#endif
