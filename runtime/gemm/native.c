/*
 * native.c - the native GEMM engine's host side (kernels in cl/gemm.cl).
 *
 * Design
 *   A register-blocked kernel reading A in place (gemm_an) or from a packed
 *   copy (gemm_ap), and B in place or from packed column panels. A is packed
 *   when it is stored transposed (reading it in place strides through
 *   memory); B is packed when it is stored transposed or when enough row
 *   blocks re-read it (m >= PACK_B_MIN_M) that making its panels contiguous
 *   pays off (large power-of-two row strides otherwise thrash the caches).
 *   Products deeper than K_SLICE_FROM run as slices of about K_SLICE that
 *   accumulate into C (beta = 1 after the first), which keeps a work-group's
 *   A blocks and B panel in the core's L2. With few rows and B transposed
 *   (decoding against [out, in] weights), gemm_nt_dot reads both operands
 *   along k instead, so B is read once and never copied.
 *
 *   Packing uses one scratch buffer per runtime, grown geometrically and
 *   rarely: a training loop reaches its largest shape in the first step and
 *   never allocates again, or sizes it up front with clf_gemm_prepare. Tile
 *   sizes follow the device's preferred float vector width, are set as
 *   #defines of the "gemm" family, and are read back from the built program
 *   (its gemm_config kernel writes them) so host and kernels never disagree.
 *
 *   Split-K (split_of below) computes K slices side by side when the output
 *   alone cannot fill the device, and sums them in a fixed order.
 *
 * Not here: validation (dispatch.c), choosing between engines (choice.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/gemm/gemm_internal.h"
#include "runtime/runtime_internal.h"

#define PACK_B_MIN_M 32   /* pack an untransposed B from this many rows of C */
#define K_SLICE_FROM 1024 /* deeper products run in slices ... */
#define K_SLICE 512       /* ... of about this depth */

/* ---- the native engine ------------------------------------------------------- */

static gemm_tile tile_for_device(const clf_device_info *dev)
{
    gemm_tile t = {.ly = 8, .pack_lx = 8, .pack_kc = 16, .dot = 4};
    if (!dev->serial_groups) {
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

/* The tile sizes the gemm program was compiled with (gemm_config). */
static clf_status read_config(clf_runtime *rt, gemm_tile *t, clf_error *err)
{
    clf_kernel *k = NULL;
    clf_buffer *b = NULL;
    int v[7] = {0};
    clf_status s = clf_kernel_get(rt, "gemm", "gemm_config", &k, err);
    if (s == CLF_OK)
        s = clf_buffer_create(rt, sizeof v, &b, err);
    if (s == CLF_OK) {
        const size_t one = 1;
        const clf_arg a[] = {CLF_ARG_BUF(b)};
        s = clf_kernel_launch(rt, k, 1, &one, &one, 1, a, err);
    }
    if (s == CLF_OK)
        s = clf_buffer_read(rt, b, 0, v, sizeof v, err);
    clf_buffer_destroy(b);
    if (s != CLF_OK)
        return s;
    *t = (gemm_tile){.mr = (size_t)v[0],
                     .vw = (size_t)v[1],
                     .nv = (size_t)v[2],
                     .ly = (size_t)v[3],
                     .pack_kc = (size_t)v[4],
                     .pack_lx = (size_t)v[5],
                     .dot = (size_t)v[6]};
    t->nr = t->vw * t->nv;
    return CLF_OK;
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

    clf_status s = clf_kernel_get(rt, "gemm", "gemm_an", &st->k_an, err);
    if (s == CLF_OK)
        s = clf_kernel_get(rt, "gemm", "gemm_ap", &st->k_ap, err);
    if (s == CLF_OK)
        s = clf_kernel_get(rt, "gemm", "gemm_nt_dot", &st->k_nt_dot, err);
    if (s == CLF_OK)
        s = clf_kernel_get(rt, "gemm", "gemm_epilogue", &st->k_epilogue, err);
    if (s == CLF_OK)
        s = clf_kernel_get(rt, "gemm", "gemm_splitk_reduce", &st->k_splitk, err);
    if (s == CLF_OK)
        s = clf_kernel_get(rt, "gemm", "gemm_pack_a_n", &st->k_pack_a_n, err);
    if (s == CLF_OK)
        s = clf_kernel_get(rt, "gemm", "gemm_pack_a_t", &st->k_pack_a_t, err);
    if (s == CLF_OK)
        s = clf_kernel_get(rt, "gemm", "gemm_pack_b_n", &st->k_pack_b_n, err);
    if (s == CLF_OK)
        s = clf_kernel_get(rt, "gemm", "gemm_pack_b_t", &st->k_pack_b_t, err);
    gemm_tile t;
    if (s != CLF_OK || (s = read_config(rt, &t, err)) != CLF_OK)
        return s;
    if (t.mr == 0 || t.nr == 0 || t.ly == 0 || t.pack_lx == 0 || t.pack_kc == 0 || t.dot == 0)
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "gemm: the native kernels report an empty tile (gemm_config)");
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
clf_status clf_gemm_native_init(clf_runtime *rt, gemm_state *st, clf_error *err)
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
        CLF_ARG_U64(d->m),        CLF_ARG_U64(d->n),
        CLF_ARG_U64(0),           CLF_ARG_F32(d->alpha),
        CLF_ARG_BUF(c),           CLF_ARG_U64(0),
        CLF_ARG_U64(1),           CLF_ARG_U64(t->mr),
        CLF_ARG_U64(0),           CLF_ARG_BUF(c),
        CLF_ARG_U64(0),           CLF_ARG_U64(1),
        CLF_ARG_U64(0),           CLF_ARG_U32(0),
        CLF_ARG_F32(d->beta),     CLF_ARG_BUF(c),
        CLF_ARG_U64(d->c.off),    CLF_ARG_U64(d->ldc),
        CLF_ARG_U64(d->stride_c), CLF_GEMM_EPI_ARGS(d, clf_gemm_epi_of(d)),
    };
    const size_t global[3] = {ceil_div(d->n, t->nr), ceil_div(d->m, t->mr), clf_gemm_batch_of(d)};
    const size_t local[3] = {1, t->ly, 1};
    return clf_kernel_launch(rt, st->k_an, 3, global, local, 25, args, err);
}

/* How the native engine runs a validated d (m, n, k > 0). */
typedef struct native_plan {
    int dot;              /* gemm_nt_dot, no packing */
    int pack_a, pack_b;   /* operands copied into the scratch */
    int share_a, share_b; /* zero batch stride: one packed copy serves all */
    size_t pa, pb;        /* floats per packed A / B matrix */
    size_t zc;            /* batch matrices per pass (scratch limit) */
    size_t split;         /* K slices computed side by side (1: none) */
    size_t scratch;       /* floats of scratch needed */
} native_plan;

/* Split-K: P slices of K / P each, run side by side into P partial products
 * and summed in a fixed order (gemm_splitk_reduce). Worth it when the
 * output's tiles are too few to fill the device (a weight gradient: small M
 * x N, K = B*T): the device's choice is the largest P that divides K, keeps
 * slices of at least SPLIT_MIN_K and brings the work-items up to about
 * what fills the device (2 per compute unit where groups run item by item,
 * 256 elsewhere). The runtime's gemm_split_k overrides (tests). Only for
 * one matrix (the batch dimension carries the slices). */
#define SPLIT_MIN_K 256
static size_t split_of(const clf_runtime *rt, const gemm_tile *t, const clf_gemm_desc *d)
{
    const size_t forced = clf_runtime_options_get(rt)->gemm_split_k;
    if (clf_gemm_batch_of(d) > 1 || forced == 1 || d->k < 2)
        return 1;
    size_t pmax;
    if (forced > 1) {
        pmax = forced;
    } else {
        const clf_device_info *dev = clf_runtime_device(rt);
        const size_t cus = dev->compute_units ? dev->compute_units : 1;
        const size_t want = dev->serial_groups ? 2 * cus : 256 * cus;
        const size_t tiles = ceil_div(d->m, t->mr) * ceil_div(d->n, t->nr);
        if (tiles >= want || d->k < 2 * SPLIT_MIN_K)
            return 1;
        pmax = want / tiles;
        if (pmax > d->k / SPLIT_MIN_K)
            pmax = d->k / SPLIT_MIN_K;
        if (pmax > 64)
            pmax = 64;
    }
    for (size_t p = pmax; p >= 2; p--)
        if (d->k % p == 0)
            return p;
    return 1;
}

static clf_status native_plan_make(clf_runtime *rt, const gemm_state *st, const clf_gemm_desc *d,
                                   native_plan *p, clf_error *err)
{
    const gemm_tile *t = &st->tile;
    const size_t batch = clf_gemm_batch_of(d);
    const size_t m = d->m, n = d->n, k = d->k;
    const size_t max_floats = (size_t)(clf_runtime_device(rt)->max_alloc / sizeof(float));
    memset(p, 0, sizeof *p);
    p->zc = batch;
    p->split = 1;
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
                             m, n, k, (p->pa + p->pb) * sizeof(float), max_floats * sizeof(float));
    p->split = split_of(rt, t, d);
    if (p->split > 1) {
        const size_t need = p->pa + p->pb + p->split * m * n;
        if (need > max_floats) {
            p->split = 1;
        } else {
            p->scratch = need;
            return CLF_OK;
        }
    }
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

static clf_status native_gemm(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d,
                              clf_error *err)
{
    const gemm_tile *t = &st->tile;
    const size_t batch = clf_gemm_batch_of(d);
    const size_t m = d->m, n = d->n, k = d->k;
    const size_t nbk = ceil_div(m, t->mr), np = ceil_div(n, t->nr);
    native_plan p;
    clf_status s = native_plan_make(rt, st, d, &p, err);
    if (s != CLF_OK)
        return s;
    if (p.dot) {
        const clf_arg args[] = {
            CLF_ARG_U64(m),           CLF_ARG_U64(n),
            CLF_ARG_U64(k),           CLF_ARG_F32(d->alpha),
            CLF_ARG_BUF(d->a.buf),    CLF_ARG_U64(d->a.off),
            CLF_ARG_U64(d->lda),      CLF_ARG_U64(0),
            CLF_ARG_U64(d->stride_a), CLF_ARG_BUF(d->b.buf),
            CLF_ARG_U64(d->b.off),    CLF_ARG_U64(d->ldb),
            CLF_ARG_U64(d->stride_b), CLF_ARG_U32(0),
            CLF_ARG_F32(d->beta),     CLF_ARG_BUF(d->c.buf),
            CLF_ARG_U64(d->c.off),    CLF_ARG_U64(d->ldc),
            CLF_ARG_U64(d->stride_c), CLF_GEMM_EPI_ARGS(d, clf_gemm_epi_of(d)),
        };
        const size_t global[3] = {ceil_div(n, t->dot), ceil_div(m, t->dot), batch};
        const size_t local[3] = {t->ly, 1, 1};
        return clf_kernel_launch(rt, st->k_nt_dot, 3, global, local, 25, args, err);
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
                CLF_ARG_U64(m),           CLF_ARG_U64(k),      CLF_ARG_BUF(d->a.buf),
                CLF_ARG_U64(a_off),       CLF_ARG_U64(d->lda), CLF_ARG_U64(d->stride_a),
                CLF_ARG_BUF(st->scratch), CLF_ARG_U64(0),      CLF_ARG_U64(pa),
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
                CLF_ARG_U64(n),           CLF_ARG_U64(k),      CLF_ARG_BUF(d->b.buf),
                CLF_ARG_U64(b_off),       CLF_ARG_U64(d->ldb), CLF_ARG_U64(d->stride_b),
                CLF_ARG_BUF(st->scratch), CLF_ARG_U64(pb_off), CLF_ARG_U64(pb),
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
        if (p.split > 1) {
            /* the K slices side by side (the batch dimension), then their
             * ordered sum with alpha, beta and the epilogue */
            const size_t P = p.split, kc = k / P, part = pa + pb;
            const clf_arg args[] = {
                CLF_ARG_U64(m),
                CLF_ARG_U64(n),
                CLF_ARG_U64(kc),
                CLF_ARG_F32(1.0f),
                CLF_ARG_BUF(pack_a ? st->scratch : d->a.buf),
                CLF_ARG_U64(pack_a ? 0 : a_off),
                CLF_ARG_U64(pack_a ? t->mr : d->lda),
                CLF_ARG_U64(pack_a ? k * t->mr : t->mr),
                CLF_ARG_U64(pack_a ? kc * t->mr : kc),
                CLF_ARG_BUF(pack_b ? st->scratch : d->b.buf),
                CLF_ARG_U64(pack_b ? pb_off : b_off),
                CLF_ARG_U64(pack_b ? k * t->nr : d->ldb),
                CLF_ARG_U64(pack_b ? kc * t->nr : kc * d->ldb),
                CLF_ARG_U32(pack_b ? 1 : 0),
                CLF_ARG_F32(0.0f),
                CLF_ARG_BUF(st->scratch),
                CLF_ARG_U64(part),
                CLF_ARG_U64(n),
                CLF_ARG_U64(m * n),
                CLF_GEMM_EPI_ARGS(d, 0u),
            };
            const size_t global[3] = {np, nbk, P}, local[3] = {1, t->ly, 1};
            s = clf_kernel_launch(rt, pack_a ? st->k_ap : st->k_an, 3, global, local, 25, args,
                                  err);
            if (s != CLF_OK)
                return s;
            const clf_arg r[] = {
                CLF_ARG_U64(m),
                CLF_ARG_U64(n),
                CLF_ARG_U64(P),
                CLF_ARG_BUF(st->scratch),
                CLF_ARG_U64(part),
                CLF_ARG_F32(d->alpha),
                CLF_ARG_F32(d->beta),
                CLF_ARG_BUF(d->c.buf),
                CLF_ARG_U64(d->c.off),
                CLF_ARG_U64(d->ldc),
                CLF_GEMM_EPI_ARGS(d, clf_gemm_epi_of(d)),
            };
            const size_t rl[2] = {16, 1}, rg[2] = {ceil_div(n, 16) * 16, m};
            return clf_kernel_launch(rt, st->k_splitk, 2, rg, rl, 16, r, err);
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
                /* the epilogue with the last slice only */
                CLF_GEMM_EPI_ARGS(d, k0 + kn == k ? clf_gemm_epi_of(d) : 0u),
            };
            const size_t global[3] = {np, nbk, zn}, local[3] = {1, t->ly, 1};
            s = clf_kernel_launch(rt, pack_a ? st->k_ap : st->k_an, 3, global, local, 25, args,
                                  err);
            if (s != CLF_OK)
                return s;
        }
    }
    return CLF_OK;
}

clf_status clf_gemm_native_run(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d,
                               clf_error *err)
{
    return d->k == 0 ? native_scale_c(rt, st, d, err) : native_gemm(rt, st, d, err);
}

clf_status clf_gemm_native_epilogue(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d,
                                    clf_error *err)
{
    const uint32_t epi = clf_gemm_epi_of(d);
    if (epi == 0)
        return CLF_OK;
    const clf_arg args[] = {
        CLF_ARG_U64(d->m),     CLF_ARG_U64(d->n),   CLF_ARG_BUF(d->c.buf),
        CLF_ARG_U64(d->c.off), CLF_ARG_U64(d->ldc), CLF_GEMM_EPI_ARGS(d, epi),
    };
    const size_t local[2] = {16, 1}, global[2] = {ceil_div(d->n, 16) * 16, d->m};
    return clf_kernel_launch(rt, st->k_epilogue, 2, global, local, 11, args, err);
}

clf_status clf_gemm_native_reserve(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d,
                                   clf_error *err)
{
    native_plan p;
    clf_status s = native_plan_make(rt, st, d, &p, err);
    if (s != CLF_OK)
        return s;
    return p.scratch > 0 ? scratch_reserve(rt, st, p.scratch, err) : CLF_OK;
}
