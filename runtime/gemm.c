/*
 * gemm.c - the GEMM dispatch: argument checks, the native engine's host
 * side, and the automatic choice between CLBlast and the native engine.
 *
 * Design
 *   Every entry point validates the descriptor first (leading dimensions,
 *   buffer extents, batch strides) so that both engines see only sound
 *   calls, and handles the degenerate cases itself: m or n == 0 does
 *   nothing, k == 0 scales C by beta (on the native kernel with K = 0).
 *
 *   Native engine (cl/gemm.cl): a register-blocked kernel reading A in place
 *   (gemm_an) or from a packed copy (gemm_ap), and B in place or from packed
 *   column panels. A is packed when it is stored transposed (reading it in
 *   place strides through memory); B is packed when it is stored transposed
 *   or when enough row blocks re-read it (m >= PACK_B_MIN_M) that making its
 *   panels contiguous pays off (large power-of-two row strides otherwise
 *   thrash the caches). Products deeper than K_SLICE_FROM run as slices of
 *   about K_SLICE that accumulate into C (beta = 1 after the first), which
 *   keeps a work-group's A blocks and B panel in the core's L2. With few
 *   rows and B transposed (decoding against [out, in] weights), gemm_nt_dot
 *   reads both operands along k instead, so B is read once and never copied.
 *
 *   Packing uses one scratch buffer per runtime, grown geometrically and
 *   rarely: a training loop reaches its largest shape in the first step and
 *   never allocates again, or sizes it up front with clf_gemm_prepare. Tile
 *   sizes follow the device's preferred float vector width, are set as
 *   #defines of the "gemm" family, and are read back from the built program
 *   (gemm_tile_info, gemm_aux_info) so host and kernels never disagree.
 *
 *   Auto: a shape class is (trans_a, trans_b, floor(log2) of m, n, k and
 *   batch). The first call of a class times both engines on the caller's A
 *   and B into a temporary C: two warm-up runs each (they absorb kernel
 *   compilation and size the scratch), then 3 rounds of one timed run per
 *   engine, interleaved so that a burst of load from elsewhere hits both,
 *   and the faster of the two minimums wins (the minimum is the run least
 *   disturbed; a single run under load once picked CLBlast for the
 *   attention backward shape, which idle runs at 1.8x the native engine's
 *   time). The choice lives in
 *   the runtime's GEMM state and in <cache_dir>/gemm-<device key>.txt, a
 *   small text file written to a temporary name and renamed; a file that
 *   does not parse is ignored entirely and rewritten.
 *
 *   All state hangs off the runtime (clf_runtime_gemm_slot); nothing global.
 *
 * Not here: the CLBlast call itself (gemm_clblast.c), the kernels
 *   (cl/gemm.cl). Checking that C does not overlap A or B is left to the
 *   caller: one allocation legitimately interleaves tensors.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gemm_internal.h"
#include "runtime_internal.h"

#define CHOICE_MAGIC "clformer-gemm-choices 2"
#define CHOICE_LINE_MAX 256
#define PACK_B_MIN_M 32         /* pack an untransposed B from this many rows of C */
#define K_SLICE_FROM 1024       /* deeper products run in slices ... */
#define K_SLICE 512             /* ... of about this depth */
#define TIMING_TINY_FLOPS 65536 /* below 2*m*n*k*batch of this, no timing */
#define TIMING_ROUNDS 3          /* timed runs of each engine, interleaved */

typedef struct gemm_tile {
    size_t mr, vw, nv, nr; /* C block per work-item: mr x nr, nr = vw * nv */
    size_t ly;             /* work-items (row blocks) per work-group */
    size_t pack_lx;        /* work-group size of the pack kernels */
    size_t pack_kc;        /* k per pack work-item */
    size_t dot;            /* gemm_nt_dot: C block per work-item, dot x dot */
} gemm_tile;

typedef struct gemm_class {
    unsigned char ta, tb, lm, ln, lk, lb;
} gemm_class;

typedef struct gemm_choice {
    gemm_class cls;
    clf_gemm_engine engine;
    double t_clblast, t_native; /* seconds per call as timed; -1 = not timed */
} gemm_choice;

typedef struct gemm_state {
    /* native engine: built on first use */
    int native_tried;
    clf_status native_status;
    clf_error native_err; /* why the native engine is unavailable */
    gemm_tile tile;
    clf_kernel *k_an, *k_ap, *k_nt_dot, *k_pack_a_n, *k_pack_a_t, *k_pack_b_n, *k_pack_b_t;
    clf_buffer *scratch;
    size_t scratch_floats;
    /* auto choices */
    int choices_loaded;
    gemm_choice *choices;
    size_t n_choices, cap_choices;
} gemm_state;

void clf_gemm_state_destroy(void *state)
{
    gemm_state *st = state;
    if (st == NULL)
        return;
    clf_buffer_destroy(st->scratch);
    free(st->choices);
    free(st);
}

const char *clf_gemm_engine_name(clf_gemm_engine e)
{
    switch (e) {
    case CLF_GEMM_AUTO: return "auto";
    case CLF_GEMM_CLBLAST: return "clblast";
    case CLF_GEMM_NATIVE: return "native";
    }
    return "unknown";
}

static clf_status state_get(clf_runtime *rt, gemm_state **out, clf_error *err)
{
    void **slot = clf_runtime_gemm_slot(rt);
    if (*slot == NULL) {
        gemm_state *st = calloc(1, sizeof *st);
        if (st == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "gemm: out of host memory");
        *slot = st;
    }
    *out = *slot;
    return CLF_OK;
}

/* ---- validation ------------------------------------------------------------ */

static size_t batch_of(const clf_gemm_desc *d) { return d->batch > 1 ? d->batch : 1; }

/* Does the matrix (rows x cols, row stride ld, batch matrices stride apart)
 * starting at element p.off fit in p's buffer? */
static clf_status check_extent(const char *name, clf_ptr p, size_t rows, size_t cols, size_t ld,
                               size_t stride, size_t batch, clf_error *err)
{
    const size_t have = clf_buffer_size(p.buf) / sizeof(float);
    /* last element + 1 = off + (batch-1)*stride + (rows-1)*ld + cols, without overflow */
    size_t need = p.off, t;
    if (__builtin_mul_overflow(batch - 1, stride, &t) || __builtin_add_overflow(need, t, &need) ||
        __builtin_mul_overflow(rows - 1, ld, &t) || __builtin_add_overflow(need, t, &need) ||
        __builtin_add_overflow(need, cols, &need) || need > have)
        return clf_error_set(err, CLF_ERR_ARG,
                             "gemm: %s (%zu x %zu, ld %zu, offset %zu, batch %zu, stride %zu) "
                             "reaches past the end of its buffer of %zu floats",
                             name, rows, cols, ld, p.off, batch, stride, have);
    return CLF_OK;
}

static clf_status validate(const clf_gemm_desc *d, clf_error *err)
{
    if (d == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "gemm: descriptor is NULL");
    if ((d->trans_a != 0 && d->trans_a != 1) || (d->trans_b != 0 && d->trans_b != 1))
        return clf_error_set(err, CLF_ERR_ARG, "gemm: trans_a=%d trans_b=%d (0 or 1 expected)",
                             d->trans_a, d->trans_b);
    if (d->m == 0 || d->n == 0)
        return CLF_OK; /* nothing to compute, nothing to check */
    const size_t batch = batch_of(d);
    /* stored shapes: A is m x k (k x m transposed), B is k x n (n x k) */
    const size_t a_rows = d->trans_a ? d->k : d->m, a_cols = d->trans_a ? d->m : d->k;
    const size_t b_rows = d->trans_b ? d->n : d->k, b_cols = d->trans_b ? d->k : d->n;
    if (d->c.buf == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "gemm: C buffer is NULL");
    if (d->ldc < d->n)
        return clf_error_set(err, CLF_ERR_ARG,
                             "gemm: ldc=%zu is smaller than n=%zu, the row length of C", d->ldc,
                             d->n);
    if (batch > 1 && d->stride_c < (d->m - 1) * d->ldc + d->n)
        return clf_error_set(err, CLF_ERR_ARG,
                             "gemm: stride_c=%zu is smaller than one C matrix (%zu floats for "
                             "%zu x %zu with ldc %zu): the batch's outputs would overlap",
                             d->stride_c, (d->m - 1) * d->ldc + d->n, d->m, d->n, d->ldc);
    clf_status s = check_extent("C", d->c, d->m, d->n, d->ldc, d->stride_c, batch, err);
    if (s != CLF_OK)
        return s;
    if (d->k == 0)
        return CLF_OK; /* A and B are not read */
    if (d->a.buf == NULL || d->b.buf == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "gemm: %s buffer is NULL",
                             d->a.buf == NULL ? "A" : "B");
    if (d->lda < a_cols)
        return clf_error_set(err, CLF_ERR_ARG,
                             "gemm: lda=%zu is smaller than %zu, the row length of A as stored "
                             "(%zu x %zu%s)",
                             d->lda, a_cols, a_rows, a_cols, d->trans_a ? ", transposed" : "");
    if (d->ldb < b_cols)
        return clf_error_set(err, CLF_ERR_ARG,
                             "gemm: ldb=%zu is smaller than %zu, the row length of B as stored "
                             "(%zu x %zu%s)",
                             d->ldb, b_cols, b_rows, b_cols, d->trans_b ? ", transposed" : "");
    s = check_extent("A", d->a, a_rows, a_cols, d->lda, d->stride_a, batch, err);
    if (s == CLF_OK)
        s = check_extent("B", d->b, b_rows, b_cols, d->ldb, d->stride_b, batch, err);
    return s;
}

/* ---- the native engine ------------------------------------------------------- */

static gemm_tile tile_for_device(const clf_device_info *dev)
{
    gemm_tile t = {.ly = 8, .pack_lx = 8, .pack_kc = 16, .dot = 4};
    if (strcmp(dev->type, "gpu") == 0) {
        t.vw = 4, t.nv = 2, t.mr = 4;
    } else if (dev->pref_vec_float >= 16) { /* 32 vector registers (AVX-512) */
        t.vw = 16, t.nv = 3, t.mr = 8;
    } else if (dev->pref_vec_float >= 8) { /* 16 vector registers (AVX2) */
        t.vw = 8, t.nv = 2, t.mr = 6;
    } else {
        t.vw = 4, t.nv = 2, t.mr = 4;
    }
    t.nr = t.vw * t.nv;
    return t;
}

static clf_status compile_wg(clf_runtime *rt, clf_kernel *k, size_t out[3], clf_error *err)
{
    cl_int rc = clGetKernelWorkGroupInfo(k->k, clf_runtime_device_id(rt),
                                         CL_KERNEL_COMPILE_WORK_GROUP_SIZE, 3 * sizeof(size_t),
                                         out, NULL);
    return clf_cl_check(rc, err, "clGetKernelWorkGroupInfo(CL_KERNEL_COMPILE_WORK_GROUP_SIZE)");
}

static clf_status native_build(clf_runtime *rt, gemm_state *st, clf_error *err)
{
    const gemm_tile want = tile_for_device(clf_runtime_device(rt));
    char defs[512];
    snprintf(defs, sizeof defs,
             "#define GEMM_VW %zu\n#define GEMM_NV %zu\n#define GEMM_MR %zu\n"
             "#define GEMM_LY %zu\n#define GEMM_PACK_LX %zu\n#define GEMM_PACK_KC %zu\n",
             want.vw, want.nv, want.mr, want.ly, want.pack_lx, want.pack_kc);
    /* Fails only when the family was built already (e.g. a warm-up of every
     * family); the tile is read back from the program below either way. */
    clf_error ignored;
    (void)clf_program_set_defines(rt, "gemm", defs, &ignored);

    clf_kernel *info = NULL, *pinfo = NULL;
    clf_status s = clf_kernel_get(rt, "gemm", "gemm_tile_info", &info, err);
    if (s == CLF_OK)
        s = clf_kernel_get(rt, "gemm", "gemm_aux_info", &pinfo, err);
    if (s == CLF_OK)
        s = clf_kernel_get(rt, "gemm", "gemm_an", &st->k_an, err);
    if (s == CLF_OK)
        s = clf_kernel_get(rt, "gemm", "gemm_ap", &st->k_ap, err);
    if (s == CLF_OK)
        s = clf_kernel_get(rt, "gemm", "gemm_nt_dot", &st->k_nt_dot, err);
    if (s == CLF_OK)
        s = clf_kernel_get(rt, "gemm", "gemm_pack_a_n", &st->k_pack_a_n, err);
    if (s == CLF_OK)
        s = clf_kernel_get(rt, "gemm", "gemm_pack_a_t", &st->k_pack_a_t, err);
    if (s == CLF_OK)
        s = clf_kernel_get(rt, "gemm", "gemm_pack_b_n", &st->k_pack_b_n, err);
    if (s == CLF_OK)
        s = clf_kernel_get(rt, "gemm", "gemm_pack_b_t", &st->k_pack_b_t, err);
    if (s != CLF_OK)
        return s;
    size_t wi[3], wg[3], wp[3];
    if ((s = compile_wg(rt, info, wi, err)) != CLF_OK ||
        (s = compile_wg(rt, st->k_an, wg, err)) != CLF_OK ||
        (s = compile_wg(rt, pinfo, wp, err)) != CLF_OK)
        return s;
    gemm_tile t = {.mr = wi[0], .vw = wi[1], .nv = wi[2], .ly = wg[1], .pack_kc = wp[0],
                   .pack_lx = wp[1], .dot = wp[2]};
    t.nr = t.vw * t.nv;
    if (t.mr == 0 || t.nr == 0 || t.ly == 0 || t.pack_lx == 0 || t.pack_kc == 0 || t.dot == 0)
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "gemm: the device does not report the native kernels' compiled "
                             "work-group sizes (needed to read their tile sizes)");
    if (t.ly > clf_kernel_max_work_group(st->k_an) ||
        t.pack_lx > clf_kernel_max_work_group(st->k_pack_b_n))
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "gemm: native kernels need work-groups of %zu and %zu items; the "
                             "device allows %zu",
                             t.ly, t.pack_lx, clf_kernel_max_work_group(st->k_an));
    st->tile = t;
    return CLF_OK;
}

/* Build the native engine once; a failure is remembered and repeated. */
static clf_status native_init(clf_runtime *rt, gemm_state *st, clf_error *err)
{
    if (!st->native_tried) {
        st->native_tried = 1;
        st->native_status = native_build(rt, st, &st->native_err);
        if (st->native_status != CLF_OK)
            clf_error_prefix(&st->native_err, "native GEMM engine unavailable");
    }
    if (st->native_status != CLF_OK && err != NULL)
        *err = st->native_err;
    return st->native_status;
}

static clf_status scratch_reserve(clf_runtime *rt, gemm_state *st, size_t floats, clf_error *err)
{
    if (floats <= st->scratch_floats)
        return CLF_OK;
    const size_t max_floats = (size_t)(clf_runtime_device(rt)->max_alloc / sizeof(float));
    size_t grow = floats + floats / 4; /* a little headroom: grow rarely */
    if (grow < st->scratch_floats * 2)
        grow = st->scratch_floats * 2;
    if (grow > max_floats)
        grow = floats;
    clf_buffer *nb = NULL;
    clf_status s = clf_buffer_create(rt, grow * sizeof(float), &nb, err);
    if (s != CLF_OK) {
        clf_error_prefix(err, "gemm: allocating the packing scratch");
        return s;
    }
    /* Queued kernels keep the old buffer alive until they finish. */
    clf_buffer_destroy(st->scratch);
    st->scratch = nb;
    st->scratch_floats = grow;
    return CLF_OK;
}

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

/* C = beta * C on the native kernel (K = 0: no A or B is read). */
static clf_status native_scale_c(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d,
                                 clf_error *err)
{
    const gemm_tile *t = &st->tile;
    clf_buffer *c = d->c.buf;
    const clf_arg args[] = {
        CLF_ARG_U64(d->m),        CLF_ARG_U64(d->n),      CLF_ARG_U64(0),
        CLF_ARG_F32(d->alpha),    CLF_ARG_BUF(c),         CLF_ARG_U64(0),
        CLF_ARG_U64(1),           CLF_ARG_U64(t->mr),     CLF_ARG_U64(0),
        CLF_ARG_BUF(c),           CLF_ARG_U64(0),         CLF_ARG_U64(1),
        CLF_ARG_U64(0),           CLF_ARG_U32(0),         CLF_ARG_F32(d->beta),
        CLF_ARG_BUF(c),           CLF_ARG_U64(d->c.off),  CLF_ARG_U64(d->ldc),
        CLF_ARG_U64(d->stride_c),
    };
    const size_t global[3] = {ceil_div(d->n, t->nr), ceil_div(d->m, t->mr), batch_of(d)};
    const size_t local[3] = {1, t->ly, 1};
    return clf_kernel_launch(rt, st->k_an, 3, global, local, 19, args, err);
}

/* How the native engine runs a validated d (m, n, k > 0). */
typedef struct native_plan {
    int dot;              /* gemm_nt_dot, no packing */
    int pack_a, pack_b;   /* operands copied into the scratch */
    int share_a, share_b; /* zero batch stride: one packed copy serves all */
    size_t pa, pb;        /* floats per packed A / B matrix */
    size_t zc;            /* batch matrices per pass (scratch limit) */
    size_t scratch;       /* floats of scratch needed */
} native_plan;

static clf_status native_plan_make(clf_runtime *rt, const gemm_state *st, const clf_gemm_desc *d,
                                   native_plan *p, clf_error *err)
{
    const gemm_tile *t = &st->tile;
    const size_t batch = batch_of(d);
    const size_t m = d->m, n = d->n, k = d->k;
    const size_t max_floats = (size_t)(clf_runtime_device(rt)->max_alloc / sizeof(float));
    memset(p, 0, sizeof *p);
    p->zc = batch;
    if (d->trans_b && !d->trans_a && m < PACK_B_MIN_M) {
        p->dot = 1; /* few rows, B transposed: dot products read B once */
        return CLF_OK;
    }
    p->pack_a = d->trans_a;
    p->pack_b = d->trans_b || m >= PACK_B_MIN_M;
    p->pa = p->pack_a ? ceil_div(m, t->mr) * k * t->mr : 0;
    p->pb = p->pack_b ? ceil_div(n, t->nr) * k * t->nr : 0;
    if (p->pa + p->pb > max_floats && p->pack_b && !d->trans_b) {
        p->pack_b = 0;
        p->pb = 0;
    }
    if (p->pa + p->pb > max_floats)
        return clf_error_set(err, CLF_ERR_MEMORY,
                             "gemm: packing a transposed operand of M=%zu N=%zu K=%zu needs %zu "
                             "bytes of scratch, more than the device's largest allocation (%zu)",
                             m, n, k, (p->pa + p->pb) * sizeof(float),
                             max_floats * sizeof(float));
    if (p->pa + p->pb == 0)
        return CLF_OK;
    p->share_a = batch > 1 && d->stride_a == 0;
    p->share_b = batch > 1 && d->stride_b == 0;
    const size_t per = (p->share_a ? 0 : p->pa) + (p->share_b ? 0 : p->pb);
    const size_t fixed = (p->share_a ? p->pa : 0) + (p->share_b ? p->pb : 0);
    if (per > 0 && (max_floats - fixed) / per < p->zc)
        p->zc = (max_floats - fixed) / per;
    if (p->zc == 0)
        p->zc = 1;
    p->scratch = (p->share_a ? p->pa : p->pa * p->zc) + (p->share_b ? p->pb : p->pb * p->zc);
    return CLF_OK;
}

static clf_status native_run(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d,
                             clf_error *err)
{
    const gemm_tile *t = &st->tile;
    const size_t batch = batch_of(d);
    const size_t m = d->m, n = d->n, k = d->k;
    const size_t nbk = ceil_div(m, t->mr), np = ceil_div(n, t->nr);
    native_plan p;
    clf_status s = native_plan_make(rt, st, d, &p, err);
    if (s != CLF_OK)
        return s;
    if (p.dot) {
        const clf_arg args[] = {
            CLF_ARG_U64(m),          CLF_ARG_U64(n),          CLF_ARG_U64(k),
            CLF_ARG_F32(d->alpha),   CLF_ARG_BUF(d->a.buf),   CLF_ARG_U64(d->a.off),
            CLF_ARG_U64(d->lda),     CLF_ARG_U64(0),          CLF_ARG_U64(d->stride_a),
            CLF_ARG_BUF(d->b.buf),   CLF_ARG_U64(d->b.off),   CLF_ARG_U64(d->ldb),
            CLF_ARG_U64(d->stride_b), CLF_ARG_U32(0),         CLF_ARG_F32(d->beta),
            CLF_ARG_BUF(d->c.buf),   CLF_ARG_U64(d->c.off),   CLF_ARG_U64(d->ldc),
            CLF_ARG_U64(d->stride_c),
        };
        const size_t global[3] = {ceil_div(n, t->dot), ceil_div(m, t->dot), batch};
        const size_t local[3] = {t->ly, 1, 1};
        return clf_kernel_launch(rt, st->k_nt_dot, 3, global, local, 19, args, err);
    }
    if (p.scratch > 0 && (s = scratch_reserve(rt, st, p.scratch, err)) != CLF_OK)
        return s;
    const int pack_a = p.pack_a, pack_b = p.pack_b, share_a = p.share_a, share_b = p.share_b;
    const size_t pa = p.pa, pb = p.pb, zc = p.zc;
    for (size_t z0 = 0; z0 < batch; z0 += zc) {
        const size_t zn = batch - z0 < zc ? batch - z0 : zc;
        const size_t a_off = d->a.off + z0 * d->stride_a, b_off = d->b.off + z0 * d->stride_b;
        const size_t sp_a = share_a ? 0 : pa, sp_b = share_b ? 0 : pb;
        const size_t za = share_a ? 1 : zn, zb = share_b ? 1 : zn;
        const size_t pb_off = pa * za; /* B panels follow A blocks in the scratch */
        if (pack_a) {
            const clf_arg args[] = {
                CLF_ARG_U64(m),          CLF_ARG_U64(k),     CLF_ARG_BUF(d->a.buf),
                CLF_ARG_U64(a_off),      CLF_ARG_U64(d->lda), CLF_ARG_U64(d->stride_a),
                CLF_ARG_BUF(st->scratch), CLF_ARG_U64(0),     CLF_ARG_U64(pa),
            };
            /* the first dimension runs along the source rows (see cl/gemm.cl) */
            size_t global[3] = {ceil_div(k, t->pack_kc), nbk, za};
            if (d->trans_a)
                global[0] = nbk, global[1] = ceil_div(k, t->pack_kc);
            const size_t local[3] = {t->pack_lx, 1, 1};
            s = clf_kernel_launch(rt, d->trans_a ? st->k_pack_a_t : st->k_pack_a_n, 3, global,
                                  local, 9, args, err);
            if (s != CLF_OK)
                return s;
        }
        if (pack_b) {
            const clf_arg args[] = {
                CLF_ARG_U64(n),          CLF_ARG_U64(k),        CLF_ARG_BUF(d->b.buf),
                CLF_ARG_U64(b_off),      CLF_ARG_U64(d->ldb),   CLF_ARG_U64(d->stride_b),
                CLF_ARG_BUF(st->scratch), CLF_ARG_U64(pb_off),  CLF_ARG_U64(pb),
            };
            size_t global[3] = {ceil_div(k, t->pack_kc), np, zb};
            if (!d->trans_b)
                global[0] = np, global[1] = ceil_div(k, t->pack_kc);
            const size_t local[3] = {t->pack_lx, 1, 1};
            s = clf_kernel_launch(rt, d->trans_b ? st->k_pack_b_t : st->k_pack_b_n, 3, global,
                                  local, 9, args, err);
            if (s != CLF_OK)
                return s;
        }
        /* deep products run as slices of depth at most K_SLICE, accumulating
         * into C, so a work-group's A blocks and B panel stay in cache */
        const size_t n_slices = k > K_SLICE_FROM ? ceil_div(k, K_SLICE) : 1;
        const size_t ks = ceil_div(k, n_slices);
        for (size_t k0 = 0; k0 < k; k0 += ks) {
            const size_t kn = k - k0 < ks ? k - k0 : ks;
            const clf_arg args[] = {
                CLF_ARG_U64(m),
                CLF_ARG_U64(n),
                CLF_ARG_U64(kn),
                CLF_ARG_F32(d->alpha),
                CLF_ARG_BUF(pack_a ? st->scratch : d->a.buf),
                CLF_ARG_U64(pack_a ? k0 * t->mr : a_off + k0),
                CLF_ARG_U64(pack_a ? t->mr : d->lda),
                CLF_ARG_U64(pack_a ? k * t->mr : t->mr),
                CLF_ARG_U64(pack_a ? sp_a : d->stride_a),
                CLF_ARG_BUF(pack_b ? st->scratch : d->b.buf),
                CLF_ARG_U64(pack_b ? pb_off + k0 * t->nr : b_off + k0 * d->ldb),
                CLF_ARG_U64(pack_b ? k * t->nr : d->ldb),
                CLF_ARG_U64(pack_b ? sp_b : d->stride_b),
                CLF_ARG_U32(pack_b ? 1 : 0),
                CLF_ARG_F32(k0 == 0 ? d->beta : 1.0f),
                CLF_ARG_BUF(d->c.buf),
                CLF_ARG_U64(d->c.off + z0 * d->stride_c),
                CLF_ARG_U64(d->ldc),
                CLF_ARG_U64(d->stride_c),
            };
            const size_t global[3] = {np, nbk, zn}, local[3] = {1, t->ly, 1};
            s = clf_kernel_launch(rt, pack_a ? st->k_ap : st->k_an, 3, global, local, 19, args,
                                  err);
            if (s != CLF_OK)
                return s;
        }
    }
    return CLF_OK;
}

/* ---- running on an engine ------------------------------------------------------ */

/* d validated, m, n > 0. */
static clf_status engine_run(clf_runtime *rt, gemm_state *st, clf_gemm_engine e,
                             const clf_gemm_desc *d, clf_error *err)
{
    clf_status s;
    if (d->k == 0 || e == CLF_GEMM_NATIVE) {
        /* k == 0 (C = beta * C) always runs natively: CLBlast rejects it. */
        s = native_init(rt, st, err);
        if (s != CLF_OK)
            return s;
        return d->k == 0 ? native_scale_c(rt, st, d, err) : native_run(rt, st, d, err);
    }
    return clf_gemm_clblast_run(rt, d, err);
}

/* ---- the choice cache ------------------------------------------------------------- */

static unsigned char log2_bucket(size_t x)
{
    unsigned char b = 0;
    while (x > 1) {
        x >>= 1;
        b++;
    }
    return b;
}

static gemm_class class_of(const clf_gemm_desc *d)
{
    gemm_class c = {(unsigned char)d->trans_a, (unsigned char)d->trans_b, log2_bucket(d->m),
                    log2_bucket(d->n), log2_bucket(d->k), log2_bucket(batch_of(d))};
    return c;
}

static int class_eq(gemm_class a, gemm_class b)
{
    return a.ta == b.ta && a.tb == b.tb && a.lm == b.lm && a.ln == b.ln && a.lk == b.lk &&
           a.lb == b.lb;
}

static gemm_choice *choice_find(gemm_state *st, gemm_class c)
{
    for (size_t i = 0; i < st->n_choices; i++)
        if (class_eq(st->choices[i].cls, c))
            return &st->choices[i];
    return NULL;
}

static clf_status choice_add(gemm_state *st, const gemm_choice *c, clf_error *err)
{
    gemm_choice *old = choice_find(st, c->cls);
    if (old != NULL) {
        *old = *c;
        return CLF_OK;
    }
    if (st->n_choices == st->cap_choices) {
        size_t cap = st->cap_choices ? st->cap_choices * 2 : 16;
        gemm_choice *nc = realloc(st->choices, cap * sizeof *nc);
        if (nc == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "gemm: out of host memory");
        st->choices = nc;
        st->cap_choices = cap;
    }
    st->choices[st->n_choices++] = *c;
    return CLF_OK;
}

static int choice_path(clf_runtime *rt, char *out, size_t cap)
{
    const char *dir = clf_runtime_cache_dir(rt);
    const char *key = clf_runtime_device_key(rt);
    if (dir == NULL || dir[0] == '\0' || key == NULL || key[0] == '\0')
        return 0;
    int n = snprintf(out, cap, "%s/gemm-%s.txt", dir, key);
    return n > 0 && (size_t)n < cap;
}

/* Write every choice to the cache file (temp + rename). Best effort: the
 * cache only saves re-timing, so a failure to write is not an error. */
static void choices_save(clf_runtime *rt, gemm_state *st)
{
    char path[4096], tmp[4200];
    if (!choice_path(rt, path, sizeof path))
        return;
    clf_error ignored;
    if (clf_mkdir_p(clf_runtime_cache_dir(rt), &ignored) != CLF_OK)
        return;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *fp = fopen(tmp, "w");
    if (fp == NULL)
        return;
    int ok = fprintf(fp, "%s\n", CHOICE_MAGIC) > 0;
    for (size_t i = 0; ok && i < st->n_choices; i++) {
        const gemm_choice *c = &st->choices[i];
        ok = fprintf(fp, "%u %u %u %u %u %u %s %.6g %.6g\n", c->cls.ta, c->cls.tb, c->cls.lm,
                     c->cls.ln, c->cls.lk, c->cls.lb, clf_gemm_engine_name(c->engine),
                     c->t_clblast, c->t_native) > 0;
    }
    if (fclose(fp) != 0)
        ok = 0;
    if (!ok || rename(tmp, path) != 0)
        remove(tmp);
}

/* Parse one line "ta tb lm ln lk lb engine t_clblast t_native"; 0 if bad. */
static int choice_parse(const char *line, gemm_choice *c)
{
    unsigned v[6];
    char eng[16];
    double tc, tn;
    int used = -1;
    if (sscanf(line, "%u %u %u %u %u %u %15s %lf %lf%n", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
               eng, &tc, &tn, &used) != 9 ||
        used < 0)
        return 0;
    if (line[used] != '\n' && line[used] != '\0')
        return 0;
    if (v[0] > 1 || v[1] > 1)
        return 0;
    for (int i = 2; i < 6; i++)
        if (v[i] > 63)
            return 0;
    if (!isfinite(tc) || !isfinite(tn) || tc < -1.0 || tn < -1.0)
        return 0;
    if (strcmp(eng, "clblast") == 0)
        c->engine = CLF_GEMM_CLBLAST;
    else if (strcmp(eng, "native") == 0)
        c->engine = CLF_GEMM_NATIVE;
    else
        return 0;
    c->cls = (gemm_class){(unsigned char)v[0], (unsigned char)v[1], (unsigned char)v[2],
                          (unsigned char)v[3], (unsigned char)v[4], (unsigned char)v[5]};
    c->t_clblast = tc;
    c->t_native = tn;
    return 1;
}

/* Load the cache file once. Anything malformed discards the whole file,
 * which is then rewritten with what this runtime knows. */
static void choices_load(clf_runtime *rt, gemm_state *st)
{
    st->choices_loaded = 1;
    char path[4096];
    if (!choice_path(rt, path, sizeof path))
        return;
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return; /* no file yet */
    char line[CHOICE_LINE_MAX];
    int bad = 0;
    if (fgets(line, sizeof line, fp) == NULL || strcmp(line, CHOICE_MAGIC "\n") != 0)
        bad = 1;
    while (!bad && fgets(line, sizeof line, fp) != NULL) {
        gemm_choice c;
        size_t len = strlen(line);
        if (len == 0 || line[len - 1] != '\n' || !choice_parse(line, &c) ||
            choice_find(st, c.cls) != NULL || choice_add(st, &c, NULL) != CLF_OK)
            bad = 1;
    }
    if (ferror(fp))
        bad = 1;
    fclose(fp);
    if (bad) {
        st->n_choices = 0;
        choices_save(rt, st);
    }
}

/* ---- timing both engines ------------------------------------------------------------ */

static clf_status time_run(clf_runtime *rt, gemm_state *st, clf_gemm_engine e,
                           const clf_gemm_desc *d, double *sec, clf_error *err)
{
    clf_status s = clf_runtime_finish(rt, err);
    if (s != CLF_OK)
        return s;
    const double t0 = clf_now_seconds();
    s = engine_run(rt, st, e, d, err);
    if (s == CLF_OK)
        s = clf_runtime_finish(rt, err);
    *sec = clf_now_seconds() - t0;
    return s;
}

/* Time both engines on d's A and B, writing into a temporary C. An engine
 * that fails is reported with time -1 (and loses); both are -1 when the
 * temporary C cannot be allocated. */
static clf_status time_engines(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d,
                               double *t_clblast, double *t_native, clf_error *err)
{
    const size_t batch = batch_of(d);
    const size_t c_floats = (batch - 1) * d->stride_c + (d->m - 1) * d->ldc + d->n;
    clf_buffer *tmp = NULL;
    *t_clblast = *t_native = -1.0;
    clf_error alloc_err;
    if (clf_buffer_create(rt, c_floats * sizeof(float), &tmp, &alloc_err) != CLF_OK)
        return CLF_OK; /* no room for a scratch C: nothing timed, the caller falls back */
    clf_status s = clf_buffer_fill(rt, tmp, 0, c_floats * sizeof(float), 0u, err);
    if (s != CLF_OK)
        goto fail;
    clf_gemm_desc dt = *d;
    dt.c = (clf_ptr){tmp, 0};
    const clf_gemm_engine eng[2] = {CLF_GEMM_CLBLAST, CLF_GEMM_NATIVE};
    double t[2];
    int ok[2] = {1, 1};
    clf_error ignored;
    for (int i = 0; i < 2; i++) {
        /* warm-up: compiles kernels, sizes the scratch */
        if (time_run(rt, st, eng[i], &dt, &t[i], &ignored) != CLF_OK ||
            time_run(rt, st, eng[i], &dt, &t[i], &ignored) != CLF_OK)
            ok[i] = 0;
    }
    t[0] = t[1] = HUGE_VAL;
    for (int round = 0; round < TIMING_ROUNDS; round++)
        for (int i = 0; i < 2; i++) {
            double ti = 0.0;
            if (!ok[i])
                continue;
            if (time_run(rt, st, eng[i], &dt, &ti, &ignored) != CLF_OK)
                ok[i] = 0;
            else if (ti < t[i])
                t[i] = ti;
        }
    *t_clblast = ok[0] ? t[0] : -1.0;
    *t_native = ok[1] ? t[1] : -1.0;
    /* the queue may hold a failed engine's partial work: drain it */
    s = clf_runtime_finish(rt, err);
fail:
    clf_buffer_destroy(tmp);
    return s;
}

/* ---- public entry points -------------------------------------------------------------- */

/* The auto choice for validated d with m, n, k > 0. */
static clf_status choose(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d,
                         clf_gemm_engine *out, clf_error *err)
{
    if (!st->choices_loaded)
        choices_load(rt, st);
    const gemm_class cls = class_of(d);
    const gemm_choice *found = choice_find(st, cls);
    if (found != NULL) {
        *out = found->engine;
        return CLF_OK;
    }
    const int gpu = strcmp(clf_runtime_device(rt)->type, "gpu") == 0;
    clf_error native_err;
    if (native_init(rt, st, &native_err) != CLF_OK) {
        *out = CLF_GEMM_CLBLAST; /* not remembered: the build may work next time */
        return CLF_OK;
    }
    gemm_choice c = {.cls = cls, .t_clblast = -1.0, .t_native = -1.0};
    const double flops = 2.0 * (double)d->m * (double)d->n * (double)d->k * (double)batch_of(d);
    if (flops < TIMING_TINY_FLOPS) {
        /* launch overhead dominates; CLBlast's extra kernels cost most on CPUs */
        c.engine = gpu ? CLF_GEMM_CLBLAST : CLF_GEMM_NATIVE;
    } else {
        clf_status s = time_engines(rt, st, d, &c.t_clblast, &c.t_native, err);
        if (s != CLF_OK)
            return s;
        if (c.t_clblast < 0 && c.t_native < 0) {
            /* nothing could be timed: the device's usual winner, not remembered */
            *out = gpu ? CLF_GEMM_CLBLAST : CLF_GEMM_NATIVE;
            return CLF_OK;
        }
        if (c.t_clblast < 0)
            c.engine = CLF_GEMM_NATIVE;
        else if (c.t_native < 0)
            c.engine = CLF_GEMM_CLBLAST;
        else
            c.engine = c.t_native <= c.t_clblast ? CLF_GEMM_NATIVE : CLF_GEMM_CLBLAST;
    }
    clf_status s = choice_add(st, &c, err);
    if (s != CLF_OK)
        return s;
    choices_save(rt, st);
    *out = c.engine;
    return CLF_OK;
}

clf_status clf_gemm_choose(clf_runtime *rt, const clf_gemm_desc *d, clf_gemm_engine *out,
                           clf_error *err)
{
    clf_status s = validate(d, err);
    if (s != CLF_OK)
        return s;
    const clf_gemm_engine forced = clf_runtime_options_get(rt)->gemm;
    if (forced != CLF_GEMM_AUTO) {
        *out = forced;
        return CLF_OK;
    }
    gemm_state *st = NULL;
    if ((s = state_get(rt, &st, err)) != CLF_OK)
        return s;
    if (d->m == 0 || d->n == 0 || d->k == 0) {
        *out = CLF_GEMM_NATIVE; /* nothing, or C = beta * C: the native kernel does it */
        return CLF_OK;
    }
    return choose(rt, st, d, out, err);
}

clf_status clf_gemm_prepare(clf_runtime *rt, const clf_gemm_desc *d, clf_error *err)
{
    clf_status s = validate(d, err);
    if (s != CLF_OK)
        return s;
    if (d->m == 0 || d->n == 0)
        return CLF_OK;
    gemm_state *st = NULL;
    if ((s = state_get(rt, &st, err)) != CLF_OK)
        return s;
    clf_gemm_engine engine = clf_runtime_options_get(rt)->gemm;
    if (engine == CLF_GEMM_AUTO && d->k > 0 && (s = choose(rt, st, d, &engine, err)) != CLF_OK)
        return s;
    if (engine == CLF_GEMM_CLBLAST && d->k > 0)
        return CLF_OK;
    if ((s = native_init(rt, st, err)) != CLF_OK || d->k == 0)
        return s;
    native_plan p;
    if ((s = native_plan_make(rt, st, d, &p, err)) != CLF_OK)
        return s;
    return p.scratch > 0 ? scratch_reserve(rt, st, p.scratch, err) : CLF_OK;
}

clf_status clf_gemm_with(clf_runtime *rt, clf_gemm_engine engine, const clf_gemm_desc *d,
                         clf_error *err)
{
    clf_status s = validate(d, err);
    if (s != CLF_OK)
        return s;
    if (engine != CLF_GEMM_AUTO && engine != CLF_GEMM_CLBLAST && engine != CLF_GEMM_NATIVE)
        return clf_error_set(err, CLF_ERR_ARG, "gemm: unknown engine %d", (int)engine);
    if (d->m == 0 || d->n == 0)
        return CLF_OK;
    gemm_state *st = NULL;
    if ((s = state_get(rt, &st, err)) != CLF_OK)
        return s;
    if (engine == CLF_GEMM_AUTO && d->k > 0) {
        s = choose(rt, st, d, &engine, err);
        if (s != CLF_OK)
            return s;
    }
    return engine_run(rt, st, engine, d, err);
}

clf_status clf_gemm(clf_runtime *rt, const clf_gemm_desc *d, clf_error *err)
{
    return clf_gemm_with(rt, clf_runtime_options_get(rt)->gemm, d, err);
}
