/*
 * gemm.cl - clformer's own SGEMM: register-blocked, no local memory.
 *
 * C = alpha * op(A) * op(B) + beta * C, row-major, as in runtime/gemm/gemm.h.
 *
 * Design
 *   Each work-item computes a GEMM_MR x GEMM_NR block of C (GEMM_NR =
 *   GEMM_NV vectors of GEMM_VW floats) held in registers. Per k it loads
 *   GEMM_NV vectors of one row of B and, for each of the GEMM_MR rows, one
 *   scalar of A that is broadcast into GEMM_NV fused multiply-adds. On a CPU
 *   with AVX-512 (preferred float vector width 16) the default 8 x 48 block
 *   keeps 24 accumulators + 3 B vectors in the 32 vector registers; the
 *   scalar A operand becomes an embedded broadcast of a memory operand.
 *   A work-group is 1 x GEMM_LY work-items: GEMM_LY row blocks sharing one
 *   column panel of B, which stays in cache while they run one after another
 *   (PoCL runs a work-group's items in a loop on one core).
 *
 *   B is read either directly (not transposed, row stride ldb) or from a
 *   packed copy made by gemm_pack_b_n / gemm_pack_b_t: panels of GEMM_NR
 *   columns, each K x GEMM_NR contiguous and zero-padded past N. Packing
 *   turns a transposed B into the layout the inner loop wants, removes the
 *   column edge, and avoids the cache-set conflicts that large power-of-two
 *   row strides cause when a panel is re-read by many row blocks. The host
 *   (runtime/gemm/native.c) decides when to pack.
 *
 *   A is read in place (gemm_an, A stored M x K: GEMM_MR row streams, rows
 *   past M clamped to M - 1 for reading and never stored) or from a packed
 *   copy (gemm_ap) made by gemm_pack_a_n / gemm_pack_a_t: row blocks of
 *   K x GEMM_MR, zero-padded past M, read as one sequential stream. A stored
 *   transposed is always packed (in place it would stride through memory a
 *   row of A^T per k). The column edge of an unpacked B (j0 + GEMM_NR > N)
 *   takes a slower loop that gathers the cut vector with zero fill; only the
 *   last panel takes it.
 *
 *   With GEMM_KB > 0 (a k-blocked variant) a work-item owns up to GEMM_RB
 *   row blocks of one panel (the row blocks are shared evenly among the
 *   groups launched) and walks K in blocks of GEMM_KB, every row block
 *   per k-block, so the panel's k-block stays in L1 (gemm_body's comment);
 *   the work-group is one item and dimension 1 of the NDRange counts
 *   groups of GEMM_RB row blocks.
 *
 *   gemm_nt_dot serves few rows of C with B stored transposed (decoding
 *   against [out, in] weights): dot products along k over both operands, so
 *   B is streamed once and never copied.
 *
 *   batch > 1 is the third NDRange dimension: matrix z starts at
 *   a_off + z * stride_a (likewise B, C; packed B at z * stride_b).
 *   beta == 0 never reads C (C may hold garbage or NaN). K == 0 gives
 *   C = beta * C.
 *
 * Tile sizes come from the host through clf_program_set_defines("gemm", ...);
 * the defaults below follow the device's preferred vector width.
 * gemm_config writes the values the program was really built with for the
 * host to read, so the host never guesses.
 *
 * gemm_tiled (compiled only where GEMM_TM is defined: the local-memory
 * variants of this family) is the shape for devices whose work-items run in
 * lockstep with real local memory: see its own comment below.
 *
 * Not here: complex or double precision.
 */
#ifndef GEMM_VW
#if !CLF_SERIAL_GROUPS
#define GEMM_VW 4
#elif defined(CLF_PREF_VEC_FLOAT) && CLF_PREF_VEC_FLOAT >= 16
#define GEMM_VW 16
#elif defined(CLF_PREF_VEC_FLOAT) && CLF_PREF_VEC_FLOAT >= 8
#define GEMM_VW 8
#else
#define GEMM_VW 4
#endif
#endif
#ifndef GEMM_NV
#if GEMM_VW >= 16
#define GEMM_NV 3
#else
#define GEMM_NV 2
#endif
#endif
#ifndef GEMM_MR
#if GEMM_VW >= 16
#define GEMM_MR 8
#elif GEMM_VW >= 8
#define GEMM_MR 6
#else
#define GEMM_MR 4
#endif
#endif
#ifndef GEMM_KB
#define GEMM_KB 0 /* > 0: K in blocks of this depth (gemm_body) */
#endif
#ifndef GEMM_RB
#define GEMM_RB 1 /* row blocks per work-item (k-blocked only) */
#endif
#if GEMM_KB > 0 && GEMM_RB < 1
#error "GEMM_RB must be at least 1"
#endif
/* Software prefetch of the next k-block and of C's lines (gemm_body), where
 * items run one after another on a core with caches to fill (a GPU's items
 * run in lockstep and hide latency by switching warps), and only where the
 * runtime's probe built and ran clang's builtin on a __global pointer
 * (CLF_PREFETCH_BUILTIN: PoCL's native targets), which becomes a prefetch
 * instruction, for reading or writing. OpenCL C's own prefetch() is no such
 * instruction where the builtin is missing: PoCL compiles it to nothing,
 * and Intel's CPU runtime (whose SPIR-V path cannot lower llvm.prefetch)
 * to a call into its library per cache line, which took a product of K = 1
 * twice the time of its stores alone (docs/devices.md); so it is used only
 * when the build asks for GEMM_PREFETCH without the builtin. Never when
 * compiled to SPIR (test_spirv's offline check of the device's own
 * source). */
#ifndef GEMM_PREFETCH
#if CLF_SERIAL_GROUPS && CLF_PREFETCH_BUILTIN
#define GEMM_PREFETCH 1
#else
#define GEMM_PREFETCH 0
#endif
#endif
#if CLF_PREFETCH_BUILTIN && !defined(__SPIR__) && !defined(__SPIR64__) && !defined(__SPIRV__)
#define GEMM_PF_READ(p) __builtin_prefetch((p), 0, 3)
#define GEMM_PF_WRITE(p) __builtin_prefetch((p), 1, 3)
#else
#define GEMM_PF_READ(p) prefetch((p), 1)
#define GEMM_PF_WRITE(p) prefetch((p), 1)
#endif
#define GEMM_LINE 16 /* floats per cache line prefetched (64 bytes) */
/* and C's lines ahead of its stores (gemm_body; -DGEMM_PREFETCH_C=0 in the
 * build options turns it off alone, for measuring it) */
#ifndef GEMM_PREFETCH_C
#define GEMM_PREFETCH_C GEMM_PREFETCH
#endif
/* GEMM_STREAM 1 (a configuration named "...s"): the B packing writes its
 * full panels with non-temporal stores, past the caches, where items run
 * one after another and the compiler has the builtin (else the variant
 * reports 0 in gemm_config and the host drops it). A packed copy larger
 * than the caches is evicted before the product reads it, and writing it
 * through them first reads every line it overwrites; one that fits them is
 * better left there: which holds for a shape is measured (native.c). */
#ifndef GEMM_STREAM
#define GEMM_STREAM 0
#endif
#if GEMM_STREAM && CLF_SERIAL_GROUPS && defined(__has_builtin)
#if __has_builtin(__builtin_nontemporal_store)
#define GEMM_STREAMS 1
#endif
#endif
#ifndef GEMM_STREAMS
#define GEMM_STREAMS 0
#endif
#ifndef GEMM_LY
#if GEMM_KB > 0
#define GEMM_LY 1 /* a work-item walks its row blocks itself */
#else
#define GEMM_LY 8
#endif
#endif
/* What the program holds (GEMM_PARTS, bits): GEMM_PART_PACK the packing
 * kernels, GEMM_PART_PRODUCT gemm_an, gemm_ap and gemm_tiled,
 * GEMM_PART_AUX the dot products, split-K's reduction and the lone
 * epilogue; gemm_config is in every program; by default all. The host
 * builds a configuration from three programs (runtime/gemm/native.c): its
 * products, a packing program shared by the configurations with its
 * register block and panel stores, and the rest, which depends on the
 * vector width and the work-group size alone, shared by the configurations
 * with both; so no kernel is compiled twice for the same defines. */
#define GEMM_PART_PACK 1
#define GEMM_PART_PRODUCT 2
#define GEMM_PART_AUX 4
#ifndef GEMM_PARTS
#define GEMM_PARTS (GEMM_PART_PACK | GEMM_PART_PRODUCT | GEMM_PART_AUX)
#endif
#ifndef GEMM_PACK_LX
#define GEMM_PACK_LX 8
#endif
#define GEMM_PACK_KC 16 /* k per pack work-item: one float16 (fixed) */
#define GEMM_DOT 4      /* gemm_nt_dot: C block of GEMM_DOT x GEMM_DOT (fixed) */

#if GEMM_VW != 2 && GEMM_VW != 4 && GEMM_VW != 8 && GEMM_VW != 16
#error "GEMM_VW must be 2, 4, 8 or 16"
#endif

#define GEMM_NR (GEMM_VW * GEMM_NV)
#define GEMM_CAT_(a, b) a##b
#define GEMM_CAT(a, b) GEMM_CAT_(a, b)
#define floatV GEMM_CAT(float, GEMM_VW)
#define vloadV GEMM_CAT(vload, GEMM_VW)
#define vstoreV GEMM_CAT(vstore, GEMM_VW)
/* The register-blocked, dot and packing kernels are written in vectors, a
 * work-item one SIMD stream. vec_type_hint says so: a compiler that
 * vectorises across work-items (Intel's CPU runtime) then compiles them as
 * written instead of re-vectorising them, which took it most of a
 * configuration's build time and gained nothing (docs/devices.md). */
#define GEMM_HINT(T) __attribute__((vec_type_hint(T)))

/* The tile configuration the program was compiled with, for the host: one
 * work-item writes it (MR, VW, NV, LY, PACK_KC, PACK_LX, DOT, the tiled
 * sizes, KB, RB, STREAMS). Launched once when the engine is built, so host
 * and kernels never disagree. (Reading it
 * from reqd_work_group_size attributes instead would declare work-groups of
 * up to MR x VW x NV items, which a device with a smaller limit may refuse
 * to build.) */
__kernel void gemm_config(__global int *out)
{
    if (get_global_id(0) != 0)
        return;
    out[0] = GEMM_MR;
    out[1] = GEMM_VW;
    out[2] = GEMM_NV;
    out[3] = GEMM_LY;
    out[4] = GEMM_PACK_KC;
    out[5] = GEMM_PACK_LX;
    out[6] = GEMM_DOT;
    out[12] = GEMM_KB;
    out[13] = GEMM_RB;
    out[14] = GEMM_STREAMS;
#ifdef GEMM_TM
    out[7] = GEMM_TM;
    out[8] = GEMM_TN;
    out[9] = GEMM_TK;
    out[10] = GEMM_WM;
    out[11] = GEMM_WN;
#else
    out[7] = out[8] = out[9] = out[10] = out[11] = 0;
#endif
}

/* A vector of GEMM_VW elements of a tensor stored as float32, bf16 or f16
 * (common.cl's clf_load<W>_t, clf_store<W>_t), widened or narrowed exactly. */
#define gemm_src_V GEMM_CAT(GEMM_CAT(clf_load, GEMM_VW), _t)
#define gemm_dst_V GEMM_CAT(GEMM_CAT(clf_store, GEMM_VW), _t)

#if GEMM_PARTS & GEMM_PART_PACK
/* ---- packing -----------------------------------------------------------------
 * B panels: P[p_off + z * stride_p + (jp * K + k) * GEMM_NR + j]
 *             = op(B)[k][jp * GEMM_NR + j], zero past N.
 * A blocks: P[p_off + z * stride_p + (ib * K + k) * GEMM_MR + r]
 *             = op(A)[ib * GEMM_MR + r][k], zero past M,
 * read by gemm_ap with a_blk = K * GEMM_MR.
 * A work-item moves GEMM_PACK_KC consecutive k of one panel or block, so its
 * writes fill one contiguous stretch and its reads take whole cache lines
 * (a work-item per element would cost more in scheduling than in copying).
 * NDRange: the first dimension runs along the source's rows, so neighbouring
 * work-items read neighbouring memory: (ceil(K / GEMM_PACK_KC), blocks,
 * batch) where a source row holds one block's k (gemm_pack_a_n, _b_t), and
 * (blocks, ceil(K / GEMM_PACK_KC), batch) where it holds many blocks at one k
 * (gemm_pack_a_t, _b_n). */

/* Store the 16 lanes of v at d[0], d[s], ..., d[15 s]: one column of a
 * transposed 16-row chunk. */
#define GEMM_SCATTER16(d, s, v)                                                   \
    do {                                                                         \
        __global float *d_ = (d);                                                \
        d_[0 * (s)] = (v).s0, d_[1 * (s)] = (v).s1, d_[2 * (s)] = (v).s2;        \
        d_[3 * (s)] = (v).s3, d_[4 * (s)] = (v).s4, d_[5 * (s)] = (v).s5;        \
        d_[6 * (s)] = (v).s6, d_[7 * (s)] = (v).s7, d_[8 * (s)] = (v).s8;        \
        d_[9 * (s)] = (v).s9, d_[10 * (s)] = (v).sa, d_[11 * (s)] = (v).sb;      \
        d_[12 * (s)] = (v).sc, d_[13 * (s)] = (v).sd, d_[14 * (s)] = (v).se;     \
        d_[15 * (s)] = (v).sf;                                                   \
    } while (0)

/* Transpose 16 vectors of 16 lanes in place (m[i] lane j <-> m[j] lane i):
 * four stages, stage s swapping the off-diagonal s x s blocks of every
 * 2s x 2s block with two shuffles per pair of vectors (the flash family's
 * fa_transpose at width 16). */
static inline void gemm_transpose16(float16 *m)
{
    const uint16 io = (uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#pragma unroll
    for (uint s = 1; s < 16; s <<= 1) {
        const int16 up = (io & s) != (uint16)(0);
        const uint16 lo = select(io, io + (uint16)(16 - s), up);
        const uint16 hi = select(io + (uint16)(s), io + (uint16)(16), up);
#pragma unroll
        for (uint i = 0; i < 16; i++)
            if (!(i & s)) {
                const float16 a = m[i], b = m[i + s];
                m[i] = shuffle2(a, b, lo);
                m[i + s] = shuffle2(a, b, hi);
            }
    }
}

/* Store vector x (type T, stored by VSTORE) of a full B panel row at p:
 * in a GEMM_STREAMS variant past the caches, p then aligned to T (the host
 * aligns the panels). */
#if GEMM_STREAMS
#define GEMM_PANEL_STORE(VSTORE, T, x, p) __builtin_nontemporal_store((x), (__global T *)(p))
#else
#define GEMM_PANEL_STORE(VSTORE, T, x, p) VSTORE((x), 0, (p))
#endif

/* The source's storage (s_type: common.cl's CLF_T_*): float32, or bf16 /
 * f16 widened exactly as they are read (gemm_src_V), so a 16-bit operand is
 * packed straight into float32 panels. Offsets, strides and indices count
 * elements of the source's own type. Only a float32 source's whole chunks
 * take the unrolled copies, with plain vector loads; 16-bit sources and the
 * edges take rolled loops that test the storage per load. Unrolled, every
 * load carried all three storages' code, a tenth of the configurations'
 * compile time on PoCL for paths that 16-bit storage alone takes
 * (docs/devices.md). */

/* The k-chunk of one source row from element i, zero-padded past K, into
 * t[]. */
static inline void gemm_pack_row(const __global float *S, uint s_type, ulong i, ulong kleft,
                                 float *t)
{
    if (kleft >= GEMM_PACK_KC && s_type == CLF_T_F32) {
        vstore16(vload16(0, S + i), 0, t);
    } else {
#pragma unroll 1
        for (int kk = 0; kk < GEMM_PACK_KC; kk++)
            t[kk] = (ulong)kk < kleft ? clf_load_t(S, s_type, i + (ulong)kk) : 0.0f;
    }
}

#define GEMM_PACK_ARGS                                                                     \
    ulong MN, ulong K, __global const float *S, ulong s_off, ulong lds, ulong stride_s,     \
        uint s_type, __global float *P, ulong p_off, ulong stride_p

/* B not transposed: stored K x N, row stride lds. Rows of the panel are
 * contiguous in both layouts: a row copy each. */
__kernel GEMM_HINT(float16) __attribute__((reqd_work_group_size(GEMM_PACK_LX, 1, 1))) void
gemm_pack_b_n(GEMM_PACK_ARGS)
{
    const ulong jp = get_global_id(0);
    const ulong k0 = get_global_id(1) * GEMM_PACK_KC;
    const ulong z = get_global_id(2);
    const ulong j0 = jp * GEMM_NR;
    if (k0 >= K || j0 >= MN)
        return;
    const ulong kn = min((ulong)GEMM_PACK_KC, K - k0);
    const ulong src = s_off + z * stride_s + k0 * lds + j0;
    __global float *dst = P + p_off + z * stride_p + (jp * K + k0) * GEMM_NR;
    if (kn == GEMM_PACK_KC && j0 + GEMM_NR <= MN && s_type == CLF_T_F32) {
#pragma unroll
        for (int kk = 0; kk < GEMM_PACK_KC; kk++)
#pragma unroll
            for (int v = 0; v < GEMM_NV; v++)
                GEMM_PANEL_STORE(vstoreV, floatV,
                                 vloadV(0, S + src + (ulong)kk * lds + (ulong)(v * GEMM_VW)),
                                 dst + kk * GEMM_NR + v * GEMM_VW);
    } else if (j0 + GEMM_NR <= MN) {
        for (ulong kk = 0; kk < kn; kk++)
#pragma unroll
            for (int v = 0; v < GEMM_NV; v++)
                vstoreV(gemm_src_V(S, s_type, src + kk * lds + (ulong)(v * GEMM_VW)), v,
                        dst + kk * GEMM_NR);
    } else {
        for (ulong kk = 0; kk < kn; kk++)
            for (int j = 0; j < GEMM_NR; j++)
                dst[kk * GEMM_NR + j] =
                    (j0 + (ulong)j < MN) ? clf_load_t(S, s_type, src + kk * lds + (ulong)j) : 0.0f;
    }
}

/* B transposed: stored N x K, row stride lds; op(B)[k][j] = S[j * lds + k].
 * Each of the panel's GEMM_NR source rows gives GEMM_PACK_KC contiguous k. */
__kernel GEMM_HINT(float16) __attribute__((reqd_work_group_size(GEMM_PACK_LX, 1, 1))) void
gemm_pack_b_t(GEMM_PACK_ARGS)
{
    const ulong k0 = get_global_id(0) * GEMM_PACK_KC;
    const ulong jp = get_global_id(1);
    const ulong z = get_global_id(2);
    const ulong j0 = jp * GEMM_NR;
    if (k0 >= K || j0 >= MN)
        return;
    const ulong kn = min((ulong)GEMM_PACK_KC, K - k0);
    const ulong src = s_off + z * stride_s + j0 * lds + k0;
    __global float *dst = P + p_off + z * stride_p + (jp * K + k0) * GEMM_NR;
    if (kn == GEMM_PACK_KC && j0 + GEMM_NR <= MN) {
#if GEMM_NR % 16 == 0
        /* 16 source rows at a time, transposed in registers: a store of 16
         * panel columns per k instead of 16 single stores per row */
        if (s_type == CLF_T_F32) {
            for (int j = 0; j < GEMM_NR; j += 16) {
                float16 m[16];
#pragma unroll
                for (int r = 0; r < 16; r++)
                    m[r] = vload16(0, S + src + (ulong)(j + r) * lds);
                gemm_transpose16(m);
#pragma unroll
                for (int kk = 0; kk < 16; kk++)
                    GEMM_PANEL_STORE(vstore16, float16, m[kk], dst + kk * GEMM_NR + j);
            }
            return;
        }
#endif
#pragma unroll 1
        for (int j = 0; j < GEMM_NR; j++) {
            const float16 v = clf_load16_t(S, s_type, src + (ulong)j * lds);
            GEMM_SCATTER16(dst + j, GEMM_NR, v);
        }
        return;
    }
    for (int j = 0; j < GEMM_NR; j++) {
        float t[GEMM_PACK_KC];
        if (j0 + (ulong)j < MN) {
            gemm_pack_row(S, s_type, src + (ulong)j * lds, K - k0, t);
        } else {
#pragma unroll
            for (int kk = 0; kk < GEMM_PACK_KC; kk++)
                t[kk] = 0.0f;
        }
        for (ulong kk = 0; kk < kn; kk++)
            dst[kk * GEMM_NR + (ulong)j] = t[kk];
    }
}

/* A not transposed: stored M x K, row stride lds. Each of the block's
 * GEMM_MR source rows gives GEMM_PACK_KC contiguous k. */
__kernel GEMM_HINT(float16) __attribute__((reqd_work_group_size(GEMM_PACK_LX, 1, 1))) void
gemm_pack_a_n(GEMM_PACK_ARGS)
{
    const ulong k0 = get_global_id(0) * GEMM_PACK_KC;
    const ulong ib = get_global_id(1);
    const ulong z = get_global_id(2);
    const ulong i0 = ib * GEMM_MR;
    if (k0 >= K || i0 >= MN)
        return;
    const ulong kn = min((ulong)GEMM_PACK_KC, K - k0);
    const ulong src = s_off + z * stride_s + i0 * lds + k0;
    __global float *dst = P + p_off + z * stride_p + (ib * K + k0) * GEMM_MR;
    if (kn == GEMM_PACK_KC && i0 + GEMM_MR <= MN && s_type == CLF_T_F32) {
#pragma unroll
        for (int r = 0; r < GEMM_MR; r++) {
            const float16 v = vload16(0, S + src + (ulong)r * lds);
            GEMM_SCATTER16(dst + r, GEMM_MR, v);
        }
        return;
    }
#pragma unroll 1
    for (int r = 0; r < GEMM_MR; r++) {
        float t[GEMM_PACK_KC];
        if (i0 + (ulong)r < MN) {
            gemm_pack_row(S, s_type, src + (ulong)r * lds, K - k0, t);
        } else {
#pragma unroll
            for (int kk = 0; kk < GEMM_PACK_KC; kk++)
                t[kk] = 0.0f;
        }
        for (ulong kk = 0; kk < kn; kk++)
            dst[kk * GEMM_MR + (ulong)r] = t[kk];
    }
}

/* Copy GEMM_MR consecutive source elements from element i to d[0 ..
 * GEMM_MR - 1] in vectors (as scalars, PoCL makes a row of 6 or 12 single
 * loads and stores: the copy then took 2-3x its memory traffic). */
#if GEMM_MR == 16 || GEMM_MR == 8 || GEMM_MR == 4 || GEMM_MR == 2
#define GEMM_COPY_MR(d, S, t, i)                                                                \
    GEMM_CAT(vstore, GEMM_MR)(GEMM_CAT(GEMM_CAT(clf_load, GEMM_MR), _t)((S), (t), (i)), 0, (d))
#elif GEMM_MR == 12 || GEMM_MR == 6
#if GEMM_MR == 12 /* as two vectors (literal widths: they are pasted into names) */
#define GEMM_MR_HI 8
#define GEMM_MR_LO 4
#else
#define GEMM_MR_HI 4
#define GEMM_MR_LO 2
#endif
#define GEMM_COPY_MR(d, S, t, i)                                                                 \
    do {                                                                                         \
        GEMM_CAT(vstore, GEMM_MR_HI)                                                             \
        (GEMM_CAT(GEMM_CAT(clf_load, GEMM_MR_HI), _t)((S), (t), (i)), 0, (d));                   \
        GEMM_CAT(vstore, GEMM_MR_LO)                                                             \
        (GEMM_CAT(GEMM_CAT(clf_load, GEMM_MR_LO), _t)((S), (t), (i) + GEMM_MR_HI), 0,            \
         (d) + GEMM_MR_HI);                                                                      \
    } while (0)
#else
#define GEMM_COPY_MR(d, S, t, i)                                                                 \
    do {                                                                                         \
        _Pragma("unroll") for (int r_ = 0; r_ < GEMM_MR; r_++)(d)[r_] =                          \
            clf_load_t((S), (t), (i) + (ulong)r_);                                               \
    } while (0)
#endif

/* A transposed: stored K x M, row stride lds; op(A)[i][k] = S[k * lds + i].
 * Rows of the block are contiguous in both layouts. */
__kernel GEMM_HINT(float16) __attribute__((reqd_work_group_size(GEMM_PACK_LX, 1, 1))) void
gemm_pack_a_t(GEMM_PACK_ARGS)
{
    const ulong ib = get_global_id(0);
    const ulong k0 = get_global_id(1) * GEMM_PACK_KC;
    const ulong z = get_global_id(2);
    const ulong i0 = ib * GEMM_MR;
    if (k0 >= K || i0 >= MN)
        return;
    const ulong kn = min((ulong)GEMM_PACK_KC, K - k0);
    const ulong src = s_off + z * stride_s + k0 * lds + i0;
    __global float *dst = P + p_off + z * stride_p + (ib * K + k0) * GEMM_MR;
    if (kn == GEMM_PACK_KC && i0 + GEMM_MR <= MN) {
        if (s_type == CLF_T_F32) {
#pragma unroll
            for (int kk = 0; kk < GEMM_PACK_KC; kk++)
                GEMM_COPY_MR(dst + kk * GEMM_MR, S, CLF_T_F32, src + (ulong)kk * lds);
        } else {
#pragma unroll 1
            for (int kk = 0; kk < GEMM_PACK_KC; kk++)
                GEMM_COPY_MR(dst + kk * GEMM_MR, S, s_type, src + (ulong)kk * lds);
        }
        return;
    }
    for (ulong kk = 0; kk < kn; kk++)
        for (int r = 0; r < GEMM_MR; r++)
            dst[kk * GEMM_MR + (ulong)r] =
                (i0 + (ulong)r < MN) ? clf_load_t(S, s_type, src + kk * lds + (ulong)r) : 0.0f;
}

#endif /* GEMM_PART_PACK */

/* ---- the register-blocked product ---------------------------------------- */

/* One k step: B row in bv[], then GEMM_MR broadcasts of A. A_AT(r) is the
 * A element of tile row r at the current k. */
#define GEMM_STEP(LOAD_B, A_AT)                                                  \
    {                                                                            \
        floatV bv[GEMM_NV];                                                      \
        _Pragma("unroll") for (int v = 0; v < GEMM_NV; v++) bv[v] = LOAD_B(v);   \
        _Pragma("unroll") for (int r = 0; r < GEMM_MR; r++)                      \
        {                                                                        \
            const floatV av = (floatV)(A_AT(r));                                 \
            _Pragma("unroll") for (int v = 0; v < GEMM_NV; v++) acc[r][v] =      \
                CLF_FMA(av, bv[v], acc[r][v]);                                       \
        }                                                                        \
    }

#define GEMM_LOAD_B_VEC(v) vloadV((v), b)
#define GEMM_A_ROWS(r) a[arow[r] + k]
#define GEMM_A_PACKED(r) a[r]

/* Vector v of a B row whose panel is cut by N (nleft columns remain). */
static inline floatV gemm_load_b_edge(const __global float *b, int v, ulong nleft)
{
    if ((ulong)(v + 1) * GEMM_VW <= nleft)
        return vloadV(v, b);
    float t[GEMM_VW];
#pragma unroll
    for (int e = 0; e < GEMM_VW; e++) {
        const ulong j = (ulong)(v * GEMM_VW + e);
        t[e] = j < nleft ? b[j] : 0.0f;
    }
    return vloadV(0, t);
}
#define GEMM_LOAD_B_EDGE(v) gemm_load_b_edge(b, (v), N - j0)

/* The epilogue (epi), applied to o = alpha * product + beta * C in the order
 * of the unfused ops: bit 0 adds bias[j] to column j; bit 1 then adds D
 * (row stride ldd: a residual connection); bit 2 then multiplies by the
 * derivative of the activation named in bits 24.. at D (D holds the
 * activation's input: C becomes the gradient of that input, the backward
 * of an activation); bit 8 then multiplies by D itself (D holds that
 * derivative already, stored by bit 7). Without bit 2 an activation writes
 * act(o) to D, C keeping o, or with bit 7 act'(o) (what a backward
 * multiplies by with bit 8, instead of recomputing it from o: the same
 * function of the same o, so the same bits). Bits 3-4 and 5-6 give C's and
 * D's storage (common.cl's CLF_T_*; a 16-bit C only in gemm_an / gemm_ap).
 * D is read (bits 1, 2, 8) or written (an activation alone), never both;
 * the host keeps a D it reads apart from C, which deep products accumulate
 * slice by slice. The functions are common.cl's, the ones elementwise.cl's
 * kernels use, so a fused and an unfused layer give the same bits. */
/* The bits: runtime/contract.h's GEMM_EPI_*. */
/* C's storage (gemm_an / gemm_ap only) and D's */
#define GEMM_EPI_CT(epi) (((epi) >> GEMM_EPI_CT_SHIFT) & 3u)
#define GEMM_EPI_DT(epi) (((epi) >> GEMM_EPI_DT_SHIFT) & 3u)
/* The activation takes the top byte: extracted as (epi >> 3) & 7 below the
 * storage bits, the activation's switch saw 0 under Oclgrind whenever a
 * storage bit was set (its printf made it right again: a miscompile of the
 * masked switch), so no mask is needed here; and a whole byte, because
 * LLVM narrows what is left of a 32-bit shift to that many bits, and
 * Oclgrind refused the 23-bit constants of epi >> 9 ("unsupported constant
 * int size: 3 bytes"). */
#define GEMM_EPI_ACT(epi) ((epi) >> GEMM_EPI_ACT_SHIFT)
#define GEMM_ACT_V(name) GEMM_CAT(name, GEMM_VW)

/* The epilogue of N values: one value (T float, N 1), or a row of the
 * register block (T floatV, N GEMM_NV), with its clf_act_evaln: o[i]
 * (alpha * AB + beta * C) with its bias b[i] and D's element d[i]
 * (meaningful where the code reads D) -> o[i] what C stores; dv[i] what D
 * stores, where the code writes D (returns 1). The additions and products
 * in the unfused order (bias, residual, the derivative at D, D multiplied
 * in), then one activation: at D for a derivative, else at o. One call of
 * clf_act_evaln serves every code (value and derivative together, the
 * same bits as clf_<act> and clf_<act>_grad; the derivative only where the
 * code stores or multiplies by it) takes all N, so the activations' code
 * appears at one call site, unrolled over the N values. */
#define GEMM_EPI_FN(T, NAME, N, ACT_EVALN)                                                    \
    static inline int NAME(uint epi, T *o, const T *b, const T *d, T *dv)                     \
    {                                                                                         \
        const uint act = GEMM_EPI_ACT(epi);                                                   \
        T x[N], g[N];                                                                         \
        _Pragma("unroll") for (int i = 0; i < N; i++)                                        \
        {                                                                                     \
            if (epi & GEMM_EPI_BIAS)                                                          \
                o[i] += b[i];                                                                 \
            if (epi & GEMM_EPI_RES)                                                           \
                o[i] += d[i];                                                                 \
            x[i] = o[i];                                                                      \
            if (epi & GEMM_EPI_DACT)                                                          \
                x[i] = d[i];                                                                  \
            else if (epi & GEMM_EPI_MULD)                                                     \
                x[i] = o[i] *= d[i];                                                          \
            g[i] = (T)(1.0f);                                                                 \
            dv[i] = x[i];                                                                     \
        }                                                                                     \
        if (act != 0u)                                                                        \
            ACT_EVALN(act, N, x, (epi & (GEMM_EPI_GRADC | GEMM_EPI_DACT)) != 0u, dv, g);      \
        _Pragma("unroll") for (int i = 0; i < N; i++)                                        \
        {                                                                                     \
            if (epi & GEMM_EPI_DACT) {                                                        \
                o[i] *= g[i];                                                                 \
                if (epi & GEMM_EPI_MULD)                                                      \
                    o[i] *= d[i];                                                             \
            }                                                                                 \
            if (epi & GEMM_EPI_GRADC)                                                         \
                o[i] = g[i];                                                                  \
        }                                                                                     \
        return (epi & GEMM_EPI_GRADC) || (act != 0u && !(epi & GEMM_EPI_DACT));               \
    }
GEMM_EPI_FN(float, gemm_epi_s, 1, clf_act_evaln)
GEMM_EPI_FN(floatV, gemm_epi_row, GEMM_NV, GEMM_ACT_V(clf_act_evaln))

/* One element's epilogue, D's element di read or written as the code says
 * (bias b its bias element): what C stores. */
static inline float gemm_epi_1(uint epi, float o, __global const float *b, __global float *D,
                               ulong di)
{
    const uint dt = GEMM_EPI_DT(epi);
    const float bv = (epi & GEMM_EPI_BIAS) ? *b : 0.0f;
    const float d = (epi & (GEMM_EPI_RES | GEMM_EPI_DACT | GEMM_EPI_MULD)) ? clf_load_t(D, dt, di)
                                                                           : 0.0f;
    float dv;
    if (gemm_epi_s(epi, &o, &bv, &d, &dv))
        clf_store_t(D, dt, di, dv);
    return o;
}

/* The epilogue's extra arguments (every GEMM kernel takes them). */
#define GEMM_EPI_ARGS                                                                       \
    __global const float *bias, ulong bias_off, uint epi, __global float *D, ulong d_off,    \
        ulong ldd

/* Write the tile: rows past M and columns past N are skipped; beta == 0
 * does not read C. Then the epilogue. C (element c0 of C) and D (element
 * d0) are stored as the epilogue code says (GEMM_EPI_CT, GEMM_EPI_DT).
 *
 * A plain store (no epilogue, beta 0, float32 C, whole vectors) is unrolled
 * over the whole register block. Anything else goes row by row from a
 * private copy of the block: a row's vectors loaded, its epilogue computed
 * on all of them in one call (gemm_epi_row), then stored. Whole float32
 * rows (every panel but a last one cut by N) take plain vector loads and
 * stores, the row's vectors unrolled; 16-bit storage and the cut panel
 * take loops over the row's vectors that test the storage and the edge
 * per vector (loading, computing and storing a vector at a time that way,
 * an activation's or a residual's epilogue cost much more on a CPU:
 * docs/devices.md). The activations' code thus appears once per row of
 * vectors and the 16-bit loads and stores once per vector of a row instead
 * of once per register, which keeps the program small enough to compile
 * quickly everywhere (a whole unrolled block made compilers spend most of
 * a configuration's build on it), at the cost of one copy of the block per
 * row block stored. */
static inline void gemm_store(floatV acc[GEMM_MR][GEMM_NV], __global float *C, ulong c0, ulong ldc,
                              ulong i0, ulong j0, ulong M, ulong N, float alpha, float beta,
                              __global const float *bias, uint epi, __global float *D, ulong d0,
                              ulong ldd)
{
    const int full_cols = j0 + GEMM_NR <= N;
    if (full_cols && epi == 0u && beta == 0.0f) {
#pragma unroll
        for (int r = 0; r < GEMM_MR; r++) {
            if (i0 + (ulong)r >= M)
                break;
            __global float *c = C + c0 + (i0 + (ulong)r) * ldc + j0;
#pragma unroll
            for (int v = 0; v < GEMM_NV; v++)
                vstoreV(alpha * acc[r][v], v, c);
        }
        return;
    }
    const uint ct = GEMM_EPI_CT(epi), dt = GEMM_EPI_DT(epi);
    const int reads_d = (epi & (GEMM_EPI_RES | GEMM_EPI_DACT | GEMM_EPI_MULD)) != 0u;
    floatV t[GEMM_MR][GEMM_NV];
#pragma unroll
    for (int r = 0; r < GEMM_MR; r++)
#pragma unroll
        for (int v = 0; v < GEMM_NV; v++)
            t[r][v] = acc[r][v];
    /* whole float32 rows (every panel but a last one cut by N): plain
     * vector loads and stores, the row's vectors unrolled; else (16-bit
     * storage, the cut panel) a vector at a time, gathered at the edge */
    const int plain = full_cols && ct == CLF_T_F32 && dt == CLF_T_F32;
#pragma nounroll
    for (int r = 0; r < GEMM_MR; r++) {
        if (i0 + (ulong)r >= M)
            break;
        const ulong c = c0 + (i0 + (ulong)r) * ldc + j0;
        const ulong dr = d0 + (i0 + (ulong)r) * ldd + j0;
        /* the row's vectors read (C, bias, D), then its epilogue in one
         * call, then stored; vectors past N are zeros, never stored */
        floatV o[GEMM_NV], bin[GEMM_NV], din[GEMM_NV], dout[GEMM_NV];
        if (plain) {
#pragma unroll
            for (int v = 0; v < GEMM_NV; v++) {
                o[v] = alpha * t[r][v];
                if (beta != 0.0f)
                    o[v] = CLF_FMA((floatV)(beta), vloadV(v, C + c), o[v]);
                bin[v] = (epi & GEMM_EPI_BIAS) ? vloadV(v, bias + j0) : (floatV)(0.0f);
                din[v] = reads_d ? vloadV(v, D + dr) : (floatV)(0.0f);
            }
        } else {
#pragma nounroll
            for (int v = 0; v < GEMM_NV; v++) {
                const ulong jv = (ulong)(v * GEMM_VW);
                floatV cin = (floatV)(0.0f);
                bin[v] = din[v] = (floatV)(0.0f);
                if (j0 + jv >= N) {
                    o[v] = cin;
                    continue;
                }
                if (j0 + jv + GEMM_VW <= N) {
                    if (beta != 0.0f)
                        cin = gemm_src_V(C, ct, c + jv);
                    if (epi & GEMM_EPI_BIAS)
                        bin[v] = vloadV(v, bias + j0);
                    if (reads_d)
                        din[v] = gemm_src_V(D, dt, dr + jv);
                } else { /* the last columns: gathered, the same vector epilogue */
                    float cb[GEMM_VW], bb[GEMM_VW], db[GEMM_VW];
                    for (int e = 0; e < GEMM_VW; e++) {
                        const int in = j0 + jv + (ulong)e < N;
                        cb[e] = in && beta != 0.0f ? clf_load_t(C, ct, c + jv + (ulong)e) : 0.0f;
                        bb[e] = in && (epi & GEMM_EPI_BIAS) ? bias[j0 + jv + (ulong)e] : 0.0f;
                        db[e] = in && reads_d ? clf_load_t(D, dt, dr + jv + (ulong)e) : 0.0f;
                    }
                    cin = vloadV(0, cb);
                    bin[v] = vloadV(0, bb);
                    din[v] = vloadV(0, db);
                }
                o[v] = alpha * t[r][v];
                if (beta != 0.0f)
                    o[v] = CLF_FMA((floatV)(beta), cin, o[v]);
            }
        }
        const int wd = gemm_epi_row(epi, o, bin, din, dout);
        if (plain) {
#pragma unroll
            for (int v = 0; v < GEMM_NV; v++) {
                vstoreV(o[v], v, C + c);
                if (wd)
                    vstoreV(dout[v], v, D + dr);
            }
            continue;
        }
#pragma nounroll
        for (int v = 0; v < GEMM_NV; v++) {
            const ulong jv = (ulong)(v * GEMM_VW);
            if (j0 + jv >= N)
                break;
            if (j0 + jv + GEMM_VW <= N) {
                gemm_dst_V(o[v], C, ct, c + jv);
                if (wd)
                    gemm_dst_V(dout[v], D, dt, dr + jv);
            } else {
                float cs[GEMM_VW], ds[GEMM_VW];
                vstoreV(o[v], 0, cs);
                vstoreV(dout[v], 0, ds);
                for (int e = 0; e < GEMM_VW && j0 + jv + (ulong)e < N; e++) {
                    clf_store_t(C, ct, c + jv + (ulong)e, cs[e]);
                    if (wd)
                        clf_store_t(D, dt, dr + jv + (ulong)e, ds[e]);
                }
            }
        }
    }
}

#if GEMM_PREFETCH_C
/* Ask for the cache lines of a row block's tile of a matrix m of sz-byte
 * elements (element off is its first; rows ld elements apart): rows i0 ..
 * i0 + GEMM_MR - 1 below M, columns j0 .. j0 + w - 1; for writing (C's,
 * ahead of the stores) or reading (D's, ahead of the epilogue's loads). */
static inline void gemm_prefetch_tile(const __global char *m, ulong off, ulong ld, ulong sz,
                                      ulong i0, ulong j0, ulong M, ulong w, int write)
{
    const ulong bytes = w * sz;
    for (int r = 0; r < GEMM_MR && i0 + (ulong)r < M; r++) {
        const __global char *row = m + (off + (i0 + (ulong)r) * ld + j0) * sz;
        /* a line every 64 bytes, then the last byte's (a row need not
         * start on a line): l == bytes stands for that last one */
        for (ulong l = 0;; l = min(l + GEMM_LINE * 4, bytes)) {
            const __global char *p = l < bytes ? row + l : row + bytes - 1;
            if (write)
                GEMM_PF_WRITE(p);
            else
                GEMM_PF_READ(p);
            if (l == bytes)
                break;
        }
    }
}
#endif

/* The body of both kernels; a_packed is a compile-time constant after
 * inlining. In place, A's tile rows are clamped to M - 1 (read, never
 * stored); packed, they are zero padding.
 *
 * A work-item computes GEMM_RB row blocks of one column panel. Classic
 * (GEMM_KB 0, GEMM_RB 1) it runs its one row block over the whole of K,
 * and the GEMM_LY items of a work-group share the panel. K-blocked
 * (GEMM_KB > 0) it runs every row block over a k-block of GEMM_KB before
 * the next k-block (the loop order of a BLIS macro-kernel): the panel's
 * k-block (GEMM_KB x GEMM_NR floats) then stays in the L1 cache while the
 * row blocks re-read it, where the classic order re-reads the whole K x
 * GEMM_NR panel for each row block, from L2 once it outgrows L1 (at K = 768
 * with 64 columns, 192 KiB). Between k-blocks a row block's accumulators
 * wait in part[]: GEMM_MR x GEMM_NV vectors stored and reloaded once per
 * GEMM_KB steps. Every element is summed in the same order either way (k
 * ascending into one accumulator), so both give the same bits. */
static inline void gemm_body(const int a_packed, ulong M, ulong N, ulong K, float alpha,
                             const __global float *A, ulong a_off, ulong lda, ulong a_blk,
                             ulong stride_a, const __global float *B, ulong b_off, ulong ldb,
                             ulong stride_b, uint b_packed, float beta, __global float *C,
                             ulong c_off, ulong ldc, ulong stride_c, GEMM_EPI_ARGS)
{
    const ulong jp = get_global_id(0);
    const ulong z = get_global_id(2);
    const ulong j0 = jp * GEMM_NR;
    ulong ib0, nb;
    if (GEMM_RB == 1) {
        ib0 = get_global_id(1);
        nb = 1;
    } else {
        /* the row blocks shared evenly among the groups launched (at least
         * ceil(blocks / GEMM_RB), which the host launches): as many per
         * group as the fewest groups need, not GEMM_RB each and the rest to
         * the last, which would hold a core up where the groups are few
         * (measured: docs/design.md, GEMM). */
        const ulong nbt = (M + GEMM_MR - 1) / GEMM_MR, ng = get_global_size(1);
        const ulong per = min((ulong)GEMM_RB, (nbt + ng - 1) / ng);
        ib0 = get_global_id(1) * per;
        if (ib0 >= nbt)
            return;
        nb = min(per, nbt - ib0);
    }
    if (ib0 * GEMM_MR >= M || j0 >= N)
        return;
    /* K == 0 runs one empty k-block, which stores C = beta * C (and the
     * epilogue): one store site */
    const ulong kb = GEMM_KB > 0 ? GEMM_KB : max(K, (ulong)1);
    const __global float *a0 = A + a_off + z * stride_a;
    const ulong c0 = c_off + z * stride_c;
    const __global float *b0;
    ulong bstep;
    if (b_packed) {
        b0 = B + b_off + z * stride_b + jp * ldb;
        bstep = GEMM_NR;
    } else {
        b0 = B + b_off + z * stride_b + j0;
        bstep = ldb;
    }
    const int b_vec = b_packed || j0 + GEMM_NR <= N;
    floatV part[GEMM_RB][GEMM_MR][GEMM_NV];
    floatV acc[GEMM_MR][GEMM_NV];
#pragma unroll
    for (int r = 0; r < GEMM_MR; r++)
#pragma unroll
        for (int v = 0; v < GEMM_NV; v++)
            acc[r][v] = (floatV)(0.0f);
    for (ulong k0 = 0; k0 == 0 || k0 < K; k0 += kb) {
        const ulong kn = min(kb, K - k0);
        const int last = GEMM_KB == 0 || k0 + kn >= K; /* row blocks end in this k-block */
        for (ulong q = 0; q < nb; q++) {
            const ulong ib = ib0 + q, i0 = ib * GEMM_MR;
            if (GEMM_KB > 0) {
#pragma unroll
                for (int r = 0; r < GEMM_MR; r++)
#pragma unroll
                    for (int v = 0; v < GEMM_NV; v++)
                        acc[r][v] = k0 == 0 ? (floatV)(0.0f) : part[q][r][v];
            }
            const __global float *b = b0 + k0 * bstep;
#if GEMM_KB > 0 && GEMM_PREFETCH
            /* the panel's next k-block, a share of its cache lines per row
             * block, so that it is in cache when the first row block of the
             * next k-block reaches it (without, that row block waits on
             * memory once B outgrows the caches; figures in native.c) */
            if (b_packed && k0 + kb < K) {
                const ulong lines = (min(kb, K - k0 - kb) * GEMM_NR + GEMM_LINE - 1) / GEMM_LINE;
                const ulong per = (lines + nb - 1) / nb;
                const __global float *nx = b0 + (k0 + kb) * GEMM_NR;
                for (ulong l = q * per; l < min(lines, (q + 1) * per); l++)
                    GEMM_PF_READ(nx + l * GEMM_LINE);
            }
#endif
#if GEMM_PREFETCH_C
            /* in its last k-block (classic: its only one) a row block's
             * lines of C are asked for, for writing, as its products start,
             * so that its stores at the end do not wait on memory: each
             * store otherwise first reads its line, and a row block's rows
             * lie ldc apart (a float32 C only; figures in native.c) */
            if (last && GEMM_EPI_CT(epi) == CLF_T_F32)
                gemm_prefetch_tile((const __global char *)C, c0, ldc, 4, i0, j0, M,
                                   min((ulong)GEMM_NR, N - j0), 1);
            /* and the lines of D that the epilogue reads (a residual, a
             * stored derivative): written by an earlier kernel, they have
             * often left the caches, and without this the store waits on
             * memory at every vector of a row (measured on the backward's
             * dH product: docs/devices.md, the Xeon family 6 model 207) */
            if (last && (epi & (GEMM_EPI_RES | GEMM_EPI_DACT | GEMM_EPI_MULD)) != 0u)
                gemm_prefetch_tile((const __global char *)D, d_off, ldd,
                                   GEMM_EPI_DT(epi) == CLF_T_F32 ? 4 : 2, i0, j0, M,
                                   min((ulong)GEMM_NR, N - j0), 0);
#endif
            if (a_packed) {
                const __global float *a = a0 + ib * a_blk + k0 * GEMM_MR;
                if (b_vec) {
                    for (ulong k = 0; k < kn; k++) {
                        GEMM_STEP(GEMM_LOAD_B_VEC, GEMM_A_PACKED)
                        b += bstep;
                        a += GEMM_MR;
                    }
                } else {
                    for (ulong k = 0; k < kn; k++) {
                        GEMM_STEP(GEMM_LOAD_B_EDGE, GEMM_A_PACKED)
                        b += bstep;
                        a += GEMM_MR;
                    }
                }
            } else {
                const __global float *a = a0 + k0;
                ulong arow[GEMM_MR];
#pragma unroll
                for (int r = 0; r < GEMM_MR; r++)
                    arow[r] = min(i0 + (ulong)r, M - 1) * lda;
                if (b_vec) {
                    for (ulong k = 0; k < kn; k++) {
                        GEMM_STEP(GEMM_LOAD_B_VEC, GEMM_A_ROWS)
                        b += bstep;
                    }
                } else {
                    for (ulong k = 0; k < kn; k++) {
                        GEMM_STEP(GEMM_LOAD_B_EDGE, GEMM_A_ROWS)
                        b += bstep;
                    }
                }
            }
            if (!last) { /* k-blocked: the sums wait for the next k-block */
#pragma unroll
                for (int r = 0; r < GEMM_MR; r++)
#pragma unroll
                    for (int v = 0; v < GEMM_NV; v++)
                        part[q][r][v] = acc[r][v];
            } else { /* stored as it ends, its lines of C already asked for */
                gemm_store(acc, C, c0, ldc, i0, j0, M, N, alpha, beta, bias + bias_off, epi, D,
                           d_off, ldd);
            }
        }
    }
}

/* Both kernels take the same arguments. NDRange: (column panels, row
 * blocks, batch), work-group (1, GEMM_LY, 1); k-blocked, (column panels,
 * groups of GEMM_RB row blocks, batch), work-group (1, 1, 1).
 *   A: in place (gemm_an: M x K, row stride lda; a_blk unused) or packed
 *      (gemm_ap: row blocks a_blk = K * GEMM_MR apart; lda unused).
 *   B: b_packed = 0: in place, K x N with row stride ldb; 1: panels made by
 *      gemm_pack_b_*, ldb floats apart, matrix z at b_off + z * stride_b.
 * K may be a slice of the packed depth (a_blk and ldb keep the full
 * strides): the host splits a deep product into slices that fit the cache. */
#define GEMM_KERNEL_ARGS                                                                  \
    ulong M, ulong N, ulong K, float alpha, __global const float *A, ulong a_off, ulong lda, \
        ulong a_blk, ulong stride_a, __global const float *B, ulong b_off, ulong ldb,        \
        ulong stride_b, uint b_packed, float beta, __global float *C, ulong c_off,           \
        ulong ldc, ulong stride_c, GEMM_EPI_ARGS

#if GEMM_PARTS & GEMM_PART_PRODUCT
__kernel GEMM_HINT(floatV) __attribute__((reqd_work_group_size(1, GEMM_LY, 1))) void
gemm_an(GEMM_KERNEL_ARGS)
{
    gemm_body(0, M, N, K, alpha, A, a_off, lda, a_blk, stride_a, B, b_off, ldb, stride_b,
              b_packed, beta, C, c_off, ldc, stride_c, bias, bias_off, epi, D, d_off, ldd);
}

__kernel GEMM_HINT(floatV) __attribute__((reqd_work_group_size(1, GEMM_LY, 1))) void
gemm_ap(GEMM_KERNEL_ARGS)
{
    gemm_body(1, M, N, K, alpha, A, a_off, lda, a_blk, stride_a, B, b_off, ldb, stride_b,
              b_packed, beta, C, c_off, ldc, stride_c, bias, bias_off, epi, D, d_off, ldd);
}
#endif

/* ---- small M with B transposed: dot products along k ------------------------
 * For few rows of C (decoding: M = 1..16) packing a transposed B would copy
 * all of it to read it once. Here both A (M x K) and B (stored N x K) are
 * read along k in vectors: a work-item keeps DM x DN vector partial sums
 * and reduces them at the end, so B is read from memory once per DM rows of
 * C. Rows and columns past the edge are clamped for reading and never
 * stored. NDRange: (ceil(N / DN), ceil(M / DM), batch), work-group
 * (GEMM_LY, 1, 1). Arguments as gemm_an; lda and ldb are the row strides of
 * A and of the stored B. gemm_nt_dot: GEMM_DOT x GEMM_DOT blocks;
 * gemm_nt_dot1: one row of C (batch-1 decoding), CLF_GEMM_DOT1_N columns per
 * work-item: the square block would repeat each dot product over its
 * clamped rows, and on CPUs fewer, larger work-items cost less to schedule.
 */

static inline float gemm_hsum(floatV v)
{
#if GEMM_VW == 16
    const float8 h8 = v.lo + v.hi;
    const float4 h4 = h8.lo + h8.hi;
#elif GEMM_VW == 8
    const float4 h4 = v.lo + v.hi;
#elif GEMM_VW == 4
    const float4 h4 = v;
#endif
#if GEMM_VW >= 4
    const float2 h2 = h4.lo + h4.hi;
#else
    const float2 h2 = v;
#endif
    return h2.x + h2.y;
}

#define GEMM_NT_DOT(NAME, DM, DN)                                                          \
    __kernel GEMM_HINT(floatV) __attribute__((reqd_work_group_size(GEMM_LY, 1, 1))) void   \
    NAME(GEMM_KERNEL_ARGS)                                                                 \
{                                                                                          \
    const ulong j0 = get_global_id(0) * DN;                                                \
    const ulong i0 = get_global_id(1) * DM;                                                \
    const ulong z = get_global_id(2);                                                      \
    (void)a_blk;                                                                           \
    (void)b_packed;                                                                        \
    if (i0 >= M || j0 >= N)                                                                \
        return;                                                                            \
    const __global float *a = A + a_off + z * stride_a;                                    \
    const __global float *b = B + b_off + z * stride_b;                                    \
    const __global float *ar[DM];                                                          \
    const __global float *br[DN];                                                          \
_Pragma("unroll")                                                                          \
    for (int r = 0; r < DM; r++)                                                           \
        ar[r] = a + min(i0 + (ulong)r, M - 1) * lda;                                       \
_Pragma("unroll")                                                                          \
    for (int c = 0; c < DN; c++)                                                           \
        br[c] = b + min(j0 + (ulong)c, N - 1) * ldb;                                       \
    floatV acc[DM][DN];                                                                    \
_Pragma("unroll")                                                                          \
    for (int r = 0; r < DM; r++)                                                           \
_Pragma("unroll")                                                                          \
        for (int c = 0; c < DN; c++)                                                       \
            acc[r][c] = (floatV)(0.0f);                                                    \
    const ulong kv = K / GEMM_VW * GEMM_VW;                                                \
    for (ulong k = 0; k < kv; k += GEMM_VW) {                                              \
        floatV av[DM], bv[DN];                                                             \
_Pragma("unroll")                                                                          \
        for (int r = 0; r < DM; r++)                                                       \
            av[r] = vloadV(0, ar[r] + k);                                                  \
_Pragma("unroll")                                                                          \
        for (int c = 0; c < DN; c++)                                                       \
            bv[c] = vloadV(0, br[c] + k);                                                  \
_Pragma("unroll")                                                                          \
        for (int r = 0; r < DM; r++)                                                       \
_Pragma("unroll")                                                                          \
            for (int c = 0; c < DN; c++)                                                   \
                acc[r][c] = CLF_FMA(av[r], bv[c], acc[r][c]);                              \
    }                                                                                      \
    float s[DM][DN];                                                                       \
_Pragma("unroll")                                                                          \
    for (int r = 0; r < DM; r++)                                                           \
_Pragma("unroll")                                                                          \
        for (int c = 0; c < DN; c++)                                                       \
            s[r][c] = gemm_hsum(acc[r][c]);                                                \
    for (ulong k = kv; k < K; k++)                                                         \
_Pragma("unroll")                                                                          \
        for (int r = 0; r < DM; r++)                                                       \
_Pragma("unroll")                                                                          \
            for (int c = 0; c < DN; c++)                                                   \
                s[r][c] = CLF_FMA(ar[r][k], br[c][k], s[r][c]);                            \
    C += c_off + z * stride_c;                                                             \
_Pragma("unroll")                                                                          \
    for (int r = 0; r < DM; r++) {                                                         \
        if (i0 + (ulong)r >= M)                                                            \
            break;                                                                         \
        __global float *cr = C + (i0 + (ulong)r) * ldc + j0;                               \
        const ulong dr = d_off + (i0 + (ulong)r) * ldd + j0;                               \
_Pragma("unroll")                                                                          \
        for (int c = 0; c < DN; c++) {                                                     \
            if (j0 + (ulong)c >= N)                                                        \
                break;                                                                     \
            float o = alpha * s[r][c];                                                     \
            if (beta != 0.0f)                                                              \
                o = CLF_FMA(beta, cr[c], o);                                               \
            cr[c] = gemm_epi_1(epi, o, bias + bias_off + j0 + (ulong)c, D, dr + (ulong)c); \
        }                                                                                  \
    }                                                                                      \
}
#if GEMM_PARTS & GEMM_PART_AUX
GEMM_NT_DOT(gemm_nt_dot, GEMM_DOT, GEMM_DOT)
GEMM_NT_DOT(gemm_nt_dot1, 1, CLF_GEMM_DOT1_N)

/* Split-K's reduction: C = alpha * sum_p part[p] + beta * C, summed in the
 * order p = 0, 1, ... (deterministic), then the epilogue. part holds P
 * dense [M, N] partial products. One work-item per element, NDRange (N, M). */
__kernel void gemm_splitk_reduce(ulong M, ulong N, ulong P, __global const float *part,
                                 ulong part_off, float alpha, float beta, __global float *C,
                                 ulong c_off, ulong ldc, GEMM_EPI_ARGS)
{
    const ulong j = get_global_id(0), i = get_global_id(1);
    if (i >= M || j >= N)
        return;
    __global const float *p = part + part_off + i * N + j;
    float s = 0.0f;
    for (ulong q = 0; q < P; q++)
        s += p[q * M * N];
    __global float *c = C + c_off + i * ldc + j;
    float o = alpha * s;
    if (beta != 0.0f)
        o = CLF_FMA(beta, *c, o);
    *c = gemm_epi_1(epi, o, bias + bias_off + j, D, d_off + i * ldd + j);
}

/* The epilogue alone, after a GEMM that had none (CLBlast's): C [M, N]
 * (row stride ldc) through gemm_epi_1. One work-item per
 * element, NDRange (N, M). The same functions as the fused store, so both engines give the
 * same bits for the same C. */
__kernel void gemm_epilogue(ulong M, ulong N, __global float *C, ulong c_off, ulong ldc,
                            GEMM_EPI_ARGS)
{
    const ulong j = get_global_id(0), i = get_global_id(1);
    if (i >= M || j >= N)
        return;
    __global float *c = C + c_off + i * ldc + j;
    *c = gemm_epi_1(epi, *c, bias + bias_off + j, D, d_off + i * ldd + j);
}
#endif /* GEMM_PART_AUX */

/* ---- local-memory tiling (GPU-shaped variants) ---------------------------------
 * A work-group computes a GEMM_TM x GEMM_TN tile of C with
 * (GEMM_TN / GEMM_WN) x (GEMM_TM / GEMM_WM) work-items, each holding
 * GEMM_WM x GEMM_WN accumulators in registers. Per step of GEMM_TK along k
 * the group stages op(A)'s TM x TK and op(B)'s TK x TN pieces in local
 * memory (zero past M, N and K), then every item runs TK rank-1 updates from
 * there. Items own strided rows and columns (row ty + r * RY, column
 * tx + c * RX): neighbouring items read neighbouring local words (no bank
 * conflicts) and store neighbouring columns of C (coalesced). The staging
 * loads follow the operand's storage order (trans_a / trans_b), so
 * neighbouring items read neighbouring global words in all four cases, and
 * the local arrays are padded by one column so that the transposing writes
 * do not collide in one bank. A barrier follows each load and each use.
 * Arguments as the register-blocked kernels, with trans_a / trans_b in
 * place of the packing fields; NDRange (ceil(N / TN) * RX, ceil(M / TM) *
 * RY, batch). The k sum runs in order with one fma per k, then alpha, beta
 * and the epilogue as gemm_store does. */
#if defined(GEMM_TM) && (GEMM_PARTS & GEMM_PART_PRODUCT)
#define GEMM_RX (GEMM_TN / GEMM_WN)
#define GEMM_RY (GEMM_TM / GEMM_WM)
#define GEMM_NT (GEMM_RX * GEMM_RY)
#if GEMM_RX * GEMM_WN != GEMM_TN || GEMM_RY * GEMM_WM != GEMM_TM
#error "GEMM_TN and GEMM_TM must be multiples of GEMM_WN and GEMM_WM"
#endif

__kernel __attribute__((reqd_work_group_size(GEMM_RX, GEMM_RY, 1))) void
gemm_tiled(ulong M, ulong N, ulong K, float alpha, __global const float *A, ulong a_off,
           ulong lda, ulong stride_a, uint trans_a, __global const float *B, ulong b_off,
           ulong ldb, ulong stride_b, uint trans_b, float beta, __global float *C, ulong c_off,
           ulong ldc, ulong stride_c, GEMM_EPI_ARGS)
{
    __local float as[GEMM_TK][GEMM_TM + 1];
    __local float bs[GEMM_TK][GEMM_TN + 1];
    const int tx = (int)get_local_id(0), ty = (int)get_local_id(1);
    const int lid = ty * GEMM_RX + tx;
    const ulong n0 = get_group_id(0) * GEMM_TN, m0 = get_group_id(1) * GEMM_TM;
    const ulong z = get_global_id(2);
    const __global float *a = A + a_off + z * stride_a;
    const __global float *b = B + b_off + z * stride_b;
    float acc[GEMM_WM][GEMM_WN];
#pragma unroll
    for (int r = 0; r < GEMM_WM; r++)
#pragma unroll
        for (int c = 0; c < GEMM_WN; c++)
            acc[r][c] = 0.0f;

    for (ulong k0 = 0; k0 < K; k0 += GEMM_TK) {
        for (int e = lid; e < GEMM_TM * GEMM_TK; e += GEMM_NT) {
            int mm, kk;
            if (trans_a) /* stored K x M: neighbouring e along m */
                mm = e % GEMM_TM, kk = e / GEMM_TM;
            else
                kk = e % GEMM_TK, mm = e / GEMM_TK;
            const ulong i = m0 + (ulong)mm, k = k0 + (ulong)kk;
            float v = 0.0f;
            if (i < M && k < K)
                v = trans_a ? a[k * lda + i] : a[i * lda + k];
            as[kk][mm] = v;
        }
        for (int e = lid; e < GEMM_TN * GEMM_TK; e += GEMM_NT) {
            int nn, kk;
            if (trans_b) /* stored N x K: neighbouring e along k */
                kk = e % GEMM_TK, nn = e / GEMM_TK;
            else
                nn = e % GEMM_TN, kk = e / GEMM_TN;
            const ulong j = n0 + (ulong)nn, k = k0 + (ulong)kk;
            float v = 0.0f;
            if (j < N && k < K)
                v = trans_b ? b[j * ldb + k] : b[k * ldb + j];
            bs[kk][nn] = v;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const int kn = K - k0 < (ulong)GEMM_TK ? (int)(K - k0) : GEMM_TK;
        for (int kk = 0; kk < kn; kk++) {
            float av[GEMM_WM], bv[GEMM_WN];
#pragma unroll
            for (int r = 0; r < GEMM_WM; r++)
                av[r] = as[kk][ty + r * GEMM_RY];
#pragma unroll
            for (int c = 0; c < GEMM_WN; c++)
                bv[c] = bs[kk][tx + c * GEMM_RX];
#pragma unroll
            for (int r = 0; r < GEMM_WM; r++)
#pragma unroll
                for (int c = 0; c < GEMM_WN; c++)
                    acc[r][c] = CLF_FMA(av[r], bv[c], acc[r][c]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    __global float *cz = C + c_off + z * stride_c;
#pragma unroll
    for (int r = 0; r < GEMM_WM; r++) {
        const ulong i = m0 + (ulong)(ty + r * GEMM_RY);
        if (i >= M)
            break;
#pragma unroll
        for (int c = 0; c < GEMM_WN; c++) {
            const ulong j = n0 + (ulong)(tx + c * GEMM_RX);
            if (j >= N)
                break;
            float o = alpha * acc[r][c];
            if (beta != 0.0f)
                o = CLF_FMA(beta, cz[i * ldc + j], o);
            cz[i * ldc + j] = gemm_epi_1(epi, o, bias + bias_off + j, D, d_off + i * ldd + j);
        }
    }
}
#endif
