/*
 * contract.h - the constants the host and the kernels share: one source,
 * read by both compilers. The C code includes it; the runtime puts its
 * text in front of every program it builds (runtime/program.c), so a
 * kernel sees the same values the host sizes its grids, arguments and
 * buffers by. Only #defines of integer constants, valid C and OpenCL C.
 *
 * Kernels must not define these again; a family's own tuning constants
 * that the host never reads stay in its .cl file.
 */
#ifndef CLF_CONTRACT_H
#define CLF_CONTRACT_H

/* ---- storage types (runtime/convert.h's clf_dtype; common.cl's loads) ---- */
#define CLF_T_F32 0u
#define CLF_T_BF16 1u
#define CLF_T_F16 2u

/* ---- activations (runtime/gemm/gemm.h's clf_gemm_act; common.cl's
 * clf_act_eval, the GEMM epilogue's top byte) ---- */
#define CLF_ACTCODE_NONE 0u
#define CLF_ACTCODE_RELU 1u
#define CLF_ACTCODE_GELU_ERF 2u
#define CLF_ACTCODE_GELU_TANH 3u
#define CLF_ACTCODE_SILU 4u

/* ---- the GEMM epilogue code (runtime/gemm/gemm_internal.h's
 * clf_gemm_epi_of; cl/gemm.cl) ---- */
#define GEMM_EPI_BIAS 1u      /* C += bias */
#define GEMM_EPI_RES 2u       /* C += D */
#define GEMM_EPI_DACT 4u      /* C *= act'(D) */
#define GEMM_EPI_CT_SHIFT 3   /* C's storage, 2 bits */
#define GEMM_EPI_DT_SHIFT 5   /* D's storage, 2 bits */
#define GEMM_EPI_GRADC 128u   /* C keeps act'(o) */
#define GEMM_EPI_MULD 256u    /* o *= D */
#define GEMM_EPI_ACT_SHIFT 24 /* the activation: the top byte */

/* ---- elementwise (model/ops/elementwise.c; cl/elementwise.cl) ---- */
#define CLF_ACT_W 16  /* elements per work-item of the activation kernels */
#define CLF_COL_W 32  /* columns per work-item of the *_item column sums */
#define CLF_COLS_X 8  /* columns of a *_group column sum's work-group */
#define CLF_COLS_Y 32 /* at most this many row lanes (the host keeps within the kernel's limit) */

/* ---- the optimizer (model/ops/optim.c; cl/optim.cl) ---- */
#define CLF_ADAMW_W 16 /* elements per work-item of adamw_vec */
/* Dynamic loss scaling's state: one float each (clf_op_amp_step). */
#define CLF_AMP_SCALE 0
#define CLF_AMP_GOOD 1
#define CLF_AMP_SKIPPED 2
#define CLF_AMP_T 3
#define CLF_AMP_NEG_STEP 4
#define CLF_AMP_BC2_SQRT 5
#define CLF_AMP_RUN 6
#define CLF_AMP_SLOTS 7

/* ---- attention (model/ops/flash.c, attention.c; cl/flash/, attention.cl) ---- */
#define FA_HS_MAX 256        /* fused attention's head size limit: its private arrays */
#define FA_GBC 64            /* tile rows of its tile shape, at most */
#define FA_NBK_MAX 64        /* relative-bias buckets its backward sums per row, at most */
#define FA_QRW_MAX 129       /* Shaw relative positions: 2 max_distance + 1, at most */
#define ATTN_ITEM_HS_MAX 256 /* item-shaped decoding's head size limit */
#define CLF_NORM_DOT_N 16    /* norm_dot_item's columns per work-item (cl/norm.cl) */
#define CLF_GEMM_DOT1_N 16   /* gemm_nt_dot1's columns per work-item (cl/gemm.cl) */
#define PERF_M_MAX 256       /* Performer's random features, at most (private arrays) */
#define PERF_HS1_MAX 257     /* Performer's head size + 1, at most */

#endif
