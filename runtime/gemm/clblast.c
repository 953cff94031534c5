/*
 * gemm/clblast.c - the CLBlast engine behind clf_gemm.
 *
 * Design
 *   A thin adapter: the validated clf_gemm_desc maps one to one onto
 *   CLBlastSgemm (batch 1) or CLBlastSgemmStridedBatched (batch > 1) in
 *   row-major layout, enqueued on the runtime's in-order queue so it orders
 *   with our own kernels without extra synchronisation. A CLBlast status
 *   becomes CLF_ERR_CLBLAST carrying the code and its symbolic name. With
 *   profiling on, the event CLBlast returns (its last kernel) is handed to
 *   the runtime's profiler.
 *
 * Not here: argument validation and the k == 0 / empty cases (gemm/dispatch.c does
 *   them before any engine runs), choosing between engines, and CLBlast's
 *   own tuning (its database decides its kernels; CLBlast compiles and caches
 *   them in memory on first use, which costs seconds on PoCL the first time).
 *   CLBlast may allocate temporary buffers inside a call (its indirect GEMM
 *   path); the C API of CLBlast 1.5 offers no way to hand it a scratch.
 */
#include <clblast_c.h>
#include <stdio.h>

#include "runtime/gemm/gemm_internal.h"
#include "runtime/runtime_internal.h"

const char *clf_gemm_clblast_status_name(int status)
{
    switch (status) {
#define E(x)                                                                                       \
    case x: return #x;
        E(CLBlastNotImplemented)
        E(CLBlastInvalidMatrixA)
        E(CLBlastInvalidMatrixB)
        E(CLBlastInvalidMatrixC)
        E(CLBlastInvalidVectorX)
        E(CLBlastInvalidVectorY)
        E(CLBlastInvalidDimension)
        E(CLBlastInvalidLeadDimA)
        E(CLBlastInvalidLeadDimB)
        E(CLBlastInvalidLeadDimC)
        E(CLBlastInvalidIncrementX)
        E(CLBlastInvalidIncrementY)
        E(CLBlastInsufficientMemoryA)
        E(CLBlastInsufficientMemoryB)
        E(CLBlastInsufficientMemoryC)
        E(CLBlastInsufficientMemoryX)
        E(CLBlastInsufficientMemoryY)
        E(CLBlastInsufficientMemoryTemp)
        E(CLBlastInvalidBatchCount)
        E(CLBlastInvalidOverrideKernel)
        E(CLBlastMissingOverrideParameter)
        E(CLBlastInvalidLocalMemUsage)
        E(CLBlastNoHalfPrecision)
        E(CLBlastNoDoublePrecision)
        E(CLBlastInvalidVectorScalar)
        E(CLBlastInsufficientMemoryScalar)
        E(CLBlastDatabaseError)
        E(CLBlastUnknownError)
        E(CLBlastUnexpectedError)
#undef E
        default:
            /* The remaining CLBlast codes are OpenCL's own numbers. */
            return clf_cl_error_name((cl_int)status);
    }
}

clf_status clf_gemm_clblast_run(clf_runtime *rt, const clf_gemm_desc *d, clf_error *err)
{
    cl_command_queue q = clf_runtime_queue(rt);
    const int profiling = clf_runtime_profiling(rt);
    cl_event ev = NULL;
    const CLBlastTranspose ta = d->trans_a ? CLBlastTransposeYes : CLBlastTransposeNo;
    const CLBlastTranspose tb = d->trans_b ? CLBlastTransposeYes : CLBlastTransposeNo;
    const int batched = d->batch > 1;
    CLBlastStatusCode s;
    if (!batched)
        s = CLBlastSgemm(CLBlastLayoutRowMajor, ta, tb, d->m, d->n, d->k, d->alpha,
                         clf_buffer_mem(d->a.buf), d->a.off, d->lda, clf_buffer_mem(d->b.buf),
                         d->b.off, d->ldb, d->beta, clf_buffer_mem(d->c.buf), d->c.off, d->ldc, &q,
                         profiling ? &ev : NULL);
    else
        s = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, ta, tb, d->m, d->n, d->k, d->alpha,
                                       clf_buffer_mem(d->a.buf), d->a.off, d->lda, d->stride_a,
                                       clf_buffer_mem(d->b.buf), d->b.off, d->ldb, d->stride_b,
                                       d->beta, clf_buffer_mem(d->c.buf), d->c.off, d->ldc,
                                       d->stride_c, d->batch, &q, profiling ? &ev : NULL);
    if (s != CLBlastSuccess) {
        if (ev != NULL)
            clReleaseEvent(ev);
        clf_error_set(err, CLF_ERR_CLBLAST,
                      "CLBlast %s failed (status %d, %s) for M=%zu N=%zu K=%zu trans_a=%d "
                      "trans_b=%d lda=%zu ldb=%zu ldc=%zu batch=%zu",
                      batched ? "SgemmStridedBatched" : "Sgemm", (int)s,
                      clf_gemm_clblast_status_name((int)s), d->m, d->n, d->k, d->trans_a,
                      d->trans_b, d->lda, d->ldb, d->ldc, d->batch > 1 ? d->batch : 1);
        if (err != NULL) {
            err->code = (int)s;
            snprintf(err->code_name, sizeof err->code_name, "%s",
                     clf_gemm_clblast_status_name((int)s));
        }
        return CLF_ERR_CLBLAST;
    }
    if (ev != NULL)
        clf_profile_record_event(rt, batched ? "clblast_sgemm_batched" : "clblast_sgemm", ev);
    return CLF_OK;
}
