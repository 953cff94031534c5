/*
 * gemm_internal.h - what gemm.c (dispatch, native engine, auto choice)
 * shares with gemm_clblast.c (the CLBlast engine).
 *
 * The descriptor reaching these functions has been validated by gemm.c:
 * m, n, k > 0, leading dimensions and buffer extents checked, batch >= 1.
 * Only runtime/ includes this header.
 */
#ifndef CLF_GEMM_INTERNAL_H
#define CLF_GEMM_INTERNAL_H

#include "gemm.h"

/* Enqueue d on CLBlast (SGEMM, or strided-batched SGEMM when batch > 1) on
 * the runtime's queue. CLBlast failures become CLF_ERR_CLBLAST with the
 * status code and its name; with profiling on, CLBlast's event is recorded
 * under "clblast_sgemm" / "clblast_sgemm_batched". */
clf_status clf_gemm_clblast_run(clf_runtime *rt, const clf_gemm_desc *d, clf_error *err);

/* Symbolic name of a CLBlast status code ("CLBlastInvalidLeadDimA"); OpenCL
 * codes it shares map to their CL_ names. */
const char *clf_gemm_clblast_status_name(int status);

#endif
