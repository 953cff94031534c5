/*
 * ops/flash.c - host wrappers of cl/flash/: fused attention forward and
 * backward in O(T) memory.
 *
 * Design: two shapes of each pass (see cl/flash/). Blocked (ITEM): FA_VW
 * query rows (or keys) per work-item in vector lanes, FA_VW fixed when the
 * program is built and read back from the program's own report
 * (attn_flash_vw) so grid sizes never guess; the shape for devices whose
 * work-groups run item by item. Tiles (GROUP): a work-group per G rows,
 * the other side streamed through local memory; the shape for devices that
 * run work-items in lockstep and have real local memory to hold two tiles.
 * Every pass gets the same mask arguments, appended by mask_args().
 *
 * Not here: decoding against a KV cache (ops/attention.c).
 */
#include <stdio.h>
#include <string.h>

#include "model/ops/ops.h"
#include "model/ops/ops_internal.h"

#define U32_MAX_SZ ((size_t)0xFFFFFFFFu)
/* Room for a pass's arguments: its own, the mask's FA_MASK_ARGS
 * (mask_args; the compiler checks the count) and the tile shape's three. */
#define FA_ARGS_MAX 80
#define FA_MASK_ARGS 33

/* The program for storage t: "flash", or its variant "flash@bf16" /
 * "flash@f16" (the cl/flash/ family's FA_T = t; the variant also has any defines
 * the "flash" family was given, FA_VW say). */
clf_status clf_ops_flash_program(clf_runtime *rt, clf_dtype t, char *fam, size_t cap,
                                 clf_error *err)
{
    if (t == CLF_DT_F32) {
        snprintf(fam, cap, "flash");
        return CLF_OK;
    }
    char defs[32];
    snprintf(fam, cap, "flash@%s", clf_dtype_name(t));
    snprintf(defs, sizeof defs, "#define FA_T %d\n", (int)t);
    return clf_program_set_defines(rt, fam, defs, err);
}

/* The rows (or keys) one work-item of the program takes: the cl/flash/ family's
 * FA_VW, which attn_flash_vw carries as its required work-group size. */
static clf_status flash_vw(clf_runtime *rt, const char *fam, size_t *vw, clf_error *err)
{
    clf_kernel *k = NULL;
    clf_status st = clf_kernel_variant_of(rt, fam, CLF_K_FLASH_VW, &k, err);
    if (st != CLF_OK)
        return st;
    *vw = clf_kernel_required_group(k);
    if (*vw == 0)
        return clf_error_set(err, CLF_ERR_BUILD, "the flash program does not report FA_VW");
    return CLF_OK;
}

static size_t kv_heads(const clf_attn_fused *a) { return a->kv_heads ? a->kv_heads : a->NH; }

static clf_status check(const clf_attn_fused *a, const clf_attn_fused_grad *g, clf_error *err)
{
    const size_t row = a->NH * a->HS, kvrow = kv_heads(a) * a->HS;
    if (kv_heads(a) > a->NH || a->NH % kv_heads(a) != 0)
        return clf_error_set(err, CLF_ERR_ARG, "%zu K/V heads do not divide %zu query heads",
                             kv_heads(a), a->NH);
    if (g != NULL && kv_heads(a) < a->NH && g->dkv_full.buf == NULL)
        return clf_error_set(err, CLF_ERR_ARG,
                             "the backward of grouped-query attention needs dkv_full scratch");
    if (a->HS == 0 || a->HS > FA_HS_MAX || a->NH == 0 || a->S == 0 || a->q_stride < row ||
        (a->kv_stride < kvrow && a->kv_head_stride == 0) || a->kv_stride < a->HS ||
        a->y_stride < row || (a->causal && a->T > a->S) ||
        (g != NULL && (g->dq_stride < row || g->dkv_stride < kvrow)) ||
        (a->keep.buf != NULL && a->keep_stride < a->S) || a->T > 0x7FFFFFFF || a->S > 0x7FFFFFFF ||
        a->B * a->NH * a->T > U32_MAX_SZ || a->B * a->NH * a->S > U32_MAX_SZ)
        return clf_error_set(err, CLF_ERR_ARG,
                             "need 1 <= HS (%zu) <= %d, NH >= 1, S >= 1 (and T <= S when causal), "
                             "row strides of at least NH*HS (K/V heads*HS for k, v and their "
                             "gradients) and a keep stride of at least S",
                             a->HS, FA_HS_MAX);
    if (a->t != CLF_DT_F32 && a->t != CLF_DT_BF16 && a->t != CLF_DT_F16)
        return clf_error_set(err, CLF_ERR_ARG, "unknown storage type %d", (int)a->t);
    if (a->segments && (a->keep.buf == NULL || a->T != a->S))
        return clf_error_set(err, CLF_ERR_ARG,
                             "document segments need their ids (keep) and as many queries as "
                             "keys (T %zu, S %zu)",
                             a->T, a->S);
    if (a->sp_bs != 0 && ((a->sp_R > 0 && a->sp.buf == NULL) || !a->causal || a->window == 0 ||
                          a->sp_bs % 16 != 0 || a->sp_bs > 128 || a->sp_nb * a->sp_bs < a->S ||
                          a->sp_R > 64 || a->glob > 0x7FFFFFFF || a->stride > 0x7FFFFFFF))
        return clf_error_set(err, CLF_ERR_ARG,
                             "sparse patterns need causal attention with a window, blocks of a "
                             "multiple of 16 positions up to 128 (%zu), at most 64 random blocks "
                             "(%zu) and rows of them covering S (%zu blocks for S %zu)",
                             a->sp_bs, a->sp_R, a->sp_nb, a->S);
    if (a->window > 0 && !a->causal)
        return clf_error_set(err, CLF_ERR_ARG, "a sliding window needs causal attention");
    if (a->window > 0x7FFFFFFF)
        return clf_error_set(err, CLF_ERR_ARG, "window %zu is too large", a->window);
    if (!(a->p_drop >= 0.0f && a->p_drop <= 1.0f))
        return clf_error_set(err, CLF_ERR_ARG, "dropout probability %g is outside [0, 1]",
                             (double)a->p_drop);
    if (a->q.buf == NULL || a->k.buf == NULL || a->v.buf == NULL || a->y.buf == NULL ||
        a->lse.buf == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "y, lse, q, k and v are required");
    if (a->rb_w != 0 && (a->rb.buf == NULL || a->rb_w != clf_op_relbias_width(a->T, a->S)))
        return clf_error_set(err, CLF_ERR_ARG,
                             "a relative bias needs its table (clf_op_relbias_table's, width %zu "
                             "for T %zu, S %zu)",
                             clf_op_relbias_width(a->T, a->S), a->T, a->S);
    if (a->qr_w != 0 && (a->qr.buf == NULL || a->qr_w != 2 * a->rel_k + 1 || a->qr_w > FA_QRW_MAX ||
                         (g != NULL && g->dqr.buf == NULL)))
        return clf_error_set(err, CLF_ERR_ARG,
                             "relative positions need their q.r rows of 2 rel_k + 1 <= %d "
                             "entries (%zu, rel_k %zu) and, backward, dqr",
                             FA_QRW_MAX, a->qr_w, a->rel_k);
    if (g != NULL && g->nbk != 0 &&
        (a->rb_w == 0 || g->nbk > FA_NBK_MAX || g->rbk.buf == NULL || g->drb.buf == NULL))
        return clf_error_set(err, CLF_ERR_ARG,
                             "a relative bias's gradient needs the table, its buckets and drb, "
                             "and at most %d buckets (%zu)",
                             FA_NBK_MAX, g->nbk);
    return CLF_OK;
}

/* FA_MASK_PARAMS, in order, after the pass's own n arguments; the count
 * of both. */
static int mask_args(const clf_attn_fused *a, clf_arg *args, int n)
{
    /* 1: a padding mask, 2: document segments */
    const int has_keep = a->keep.buf == NULL ? 0 : a->segments ? 2 : 1;
    const clf_ptr keep = has_keep ? a->keep : a->q; /* any valid buffer when absent */
    uint32_t thr = 0;
    float dscale = 1.0f;
    if (a->p_drop > 0.0f)
        clf_ops_dropout_params(a->p_drop, &thr, &dscale);
    const clf_arg m[] = {
        CLF_ARG_PTR(keep),
        CLF_ARG_U64(a->keep_stride),
        CLF_ARG_I32(has_keep),
        CLF_ARG_U32(a->B),
        CLF_ARG_U32(a->NH),
        CLF_ARG_U32(a->NH / kv_heads(a)),
        CLF_ARG_U32(a->T),
        CLF_ARG_U32(a->S),
        CLF_ARG_U32(a->HS),
        CLF_ARG_I32(a->causal != 0),
        CLF_ARG_U32(a->window),
        CLF_ARG_I32(a->alibi != 0),
        CLF_ARG_F32(a->scale),
        CLF_ARG_U32(thr),
        CLF_ARG_F32(dscale),
        CLF_ARG_U32((uint32_t)a->seed),
        CLF_ARG_U32((uint32_t)(a->seed >> 32)),
        CLF_ARG_U32((uint32_t)a->stream),
        CLF_ARG_U32((uint32_t)(a->stream >> 32)),
        CLF_ARG_PTR(a->rb_w ? a->rb : a->q),
        CLF_ARG_U32(a->rb_w),
        CLF_ARG_PTR(a->qr_w ? a->qr : a->q),
        CLF_ARG_U32(a->qr_w),
        CLF_ARG_U32(a->rel_k),
        CLF_ARG_U32(a->glob),
        CLF_ARG_U32(a->stride),
        CLF_ARG_PTR(a->sp_bs && a->sp_R ? a->sp : a->q),
        CLF_ARG_U32(a->sp_bs),
        CLF_ARG_U32(a->sp_R),
    };
    _Static_assert(CLF_NARGS(m) == FA_MASK_ARGS, "FA_MASK_ARGS counts FA_MASK_PARAMS");
    memcpy(args + n, m, sizeof m);
    return n + CLF_NARGS(m);
}

/* Work-group size: 1 where groups run item by item (a work-item is a whole
 * block; bigger groups made PoCL's passes 1.9x slower at T = 64), else up
 * to 64 rows. */
static size_t flash_local(const clf_runtime *rt, const clf_kernel *k)
{
    return clf_ops_serial(rt) ? 1 : clf_ops_group_size(k, 64);
}

/* Key/value strides between sequences and between heads (0: the
 * projections' layout, S rows of kv_stride, head h at column h*HS). */
static size_t kv_bstride(const clf_attn_fused *a)
{
    return a->kv_batch_stride ? a->kv_batch_stride : a->S * a->kv_stride;
}
static size_t kv_hstride(const clf_attn_fused *a)
{
    return a->kv_head_stride ? a->kv_head_stride : a->HS;
}

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

/* The tile shape's tile rows for head size HS: the largest power of two <=
 * FA_GBC (runtime/contract.h) whose two tiles of BC x (HS + 1) floats fit in
 * half the device's local memory; 0 if not even one row fits. */
static size_t tile_rows(const clf_runtime *rt, size_t HS)
{
    const clf_device_info *d = clf_runtime_device(rt);
    size_t bc = FA_GBC;
    while (bc > 0 && 2 * bc * (HS + 1) * sizeof(float) > d->local_mem / 2)
        bc /= 2;
    return bc;
}

/* ITEM: the blocked kernels (FA_VW rows per work-item); GROUP: the tile
 * kernels. AUTO: blocked where work-groups run item by item or local
 * memory is emulated in global memory, tiles elsewhere when they fit. */
static clf_ops_path flash_path(const clf_runtime *rt, clf_ops_path p, size_t HS)
{
    const clf_device_info *d = clf_runtime_device(rt);
    if (p == CLF_OPS_PATH_AUTO)
        p = d->serial_groups || d->local_mem_is_global || tile_rows(rt, HS) == 0
                ? CLF_OPS_PATH_ITEM
                : CLF_OPS_PATH_GROUP;
    return p;
}

/* Launch one pass over `rows` rows (T queries or S keys) per (b, h) in the
 * path's shape; args has room for the tile shape's three extra arguments
 * after its first n. */
static clf_status flash_launch(clf_runtime *rt, clf_ops_path path, clf_ops_pair kernels,
                               const clf_attn_fused *a, size_t rows, clf_arg *args, int n,
                               clf_error *err)
{
    clf_kernel *k = NULL;
    char fam[32];
    clf_status st = clf_ops_flash_program(rt, a->t, fam, sizeof fam, err);
    if (st != CLF_OK)
        return st;
    if (path == CLF_OPS_PATH_GROUP) {
        const size_t bc = tile_rows(rt, a->HS);
        if (bc == 0)
            return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                                 "no room in local memory for tiles of head size %zu", a->HS);
        if ((st = clf_kernel_variant_of(rt, fam, kernels.group, &k, err)) != CLF_OK)
            return st;
        size_t local = clf_ops_group_size(k, 64);
        size_t global = a->B * a->NH * ceil_div(rows, local) * local;
        args[n] = CLF_ARG_U32(bc);
        args[n + 1] = CLF_ARG_LOCAL(bc * (a->HS + 1) * sizeof(float));
        args[n + 2] = CLF_ARG_LOCAL(bc * (a->HS + 1) * sizeof(float));
        return clf_kernel_launch(rt, k, 1, &global, &local, n + 3, args, err);
    }
    size_t vw = 1;
    if ((st = flash_vw(rt, fam, &vw, err)) != CLF_OK ||
        (st = clf_kernel_variant_of(rt, fam, kernels.item, &k, err)) != CLF_OK)
        return st;
    size_t global = a->B * a->NH * ceil_div(rows, vw), local = flash_local(rt, k);
    return clf_kernel_launch(rt, k, 1, &global, &local, n, args, err);
}

clf_status clf_op_attn_fused_forward_ex(clf_runtime *rt, clf_ops_path path, const clf_attn_fused *a,
                                        clf_error *err)
{
    clf_status st = check(a, NULL, err);
    if (st != CLF_OK)
        goto fail;
    if (a->B * a->NH * a->T == 0)
        return CLF_OK;
    const clf_arg own[] = {
        CLF_ARG_PTR(a->y),          CLF_ARG_U64(a->y_stride),  CLF_ARG_PTR(a->lse),
        CLF_ARG_PTR(a->q),          CLF_ARG_U64(a->q_stride),  CLF_ARG_PTR(a->k),
        CLF_ARG_PTR(a->v),          CLF_ARG_U64(a->kv_stride), CLF_ARG_U64(kv_bstride(a)),
        CLF_ARG_U64(kv_hstride(a)),
    };
    clf_arg args[FA_ARGS_MAX];
    _Static_assert(CLF_NARGS(own) + FA_MASK_ARGS + 3 <= FA_ARGS_MAX, "room for the arguments");
    memcpy(args, own, sizeof own);
    const int n = mask_args(a, args, CLF_NARGS(own));
    if ((st = flash_launch(rt, flash_path(rt, path, a->HS),
                           (clf_ops_pair){CLF_K_FLASH_FWD, CLF_K_FLASH_FWD_GROUP}, a, a->T, args, n,
                           err)) != CLF_OK)
        goto fail;
    return CLF_OK;
fail:
    clf_error_prefix(err, "attn_fused_forward");
    return st;
}

clf_status clf_op_attn_fused_forward(clf_runtime *rt, const clf_attn_fused *a, clf_error *err)
{
    return clf_op_attn_fused_forward_ex(rt, CLF_OPS_PATH_AUTO, a, err);
}

/* Grouped-query attention: dk, dv = the sums of each group's query-head
 * shares in g->dkv_full (attn_flash_kv_sum). */
static clf_status kv_sum(clf_runtime *rt, const clf_attn_fused *a, const clf_attn_fused_grad *g,
                         clf_error *err)
{
    char fam[32];
    clf_kernel *k = NULL;
    clf_status st = clf_ops_flash_program(rt, a->t, fam, sizeof fam, err);
    if (st == CLF_OK)
        st = clf_kernel_variant_of(rt, fam, CLF_K_FLASH_KV_SUM, &k, err);
    if (st != CLF_OK)
        return st;
    const size_t rows = a->B * a->S, KVH = kv_heads(a);
    const clf_arg args[] = {CLF_ARG_PTR(g->dk),         CLF_ARG_PTR(g->dv),
                            CLF_ARG_U64(g->dkv_stride), CLF_ARG_PTR(g->dkv_full),
                            CLF_ARG_U64(rows),          CLF_ARG_U32(a->NH),
                            CLF_ARG_U32(a->NH / KVH),   CLF_ARG_U32(a->HS)};
    size_t global = rows * KVH * a->HS, local = clf_ops_local_1d(rt, k);
    return clf_kernel_launch(rt, k, 1, &global, &local, CLF_NARGS(args), args, err);
}

clf_status clf_op_attn_fused_backward_ex(clf_runtime *rt, clf_ops_path path,
                                         const clf_attn_fused *a, const clf_attn_fused_grad *g,
                                         clf_error *err)
{
    clf_status st = check(a, g, err);
    if (st != CLF_OK)
        goto fail;
    if (a->B * a->NH * a->T == 0)
        return CLF_OK;
    if (g->dy.buf == NULL || g->dq.buf == NULL || g->dk.buf == NULL || g->dv.buf == NULL ||
        g->dsum.buf == NULL) {
        st = clf_error_set(err, CLF_ERR_ARG, "dy, dq, dk, dv and dsum are required");
        goto fail;
    }
    /* grouped: the dk/dv pass writes every query head's share into dkv_full */
    const int grouped = kv_heads(a) < a->NH;
    const size_t full_stride = 2 * a->NH * a->HS;
    const clf_ptr dk = grouped ? g->dkv_full : g->dk;
    const clf_ptr dv = grouped ? clf_ptr_at(g->dkv_full, a->NH * a->HS) : g->dv;
    const clf_arg own[] = {
        CLF_ARG_PTR(g->dq),
        CLF_ARG_PTR(dk),
        CLF_ARG_PTR(dv),
        CLF_ARG_U64(g->dq_stride),
        CLF_ARG_U64(grouped ? full_stride : g->dkv_stride),
        CLF_ARG_PTR(g->dsum),
        CLF_ARG_PTR(g->dy),
        CLF_ARG_PTR(a->y),
        CLF_ARG_U64(a->y_stride),
        CLF_ARG_PTR(a->lse),
        CLF_ARG_PTR(a->q),
        CLF_ARG_U64(a->q_stride),
        CLF_ARG_PTR(a->k),
        CLF_ARG_PTR(a->v),
        CLF_ARG_U64(a->kv_stride),
        CLF_ARG_U64(kv_bstride(a)),
        CLF_ARG_U64(kv_hstride(a)),
        CLF_ARG_PTR(g->nbk ? g->rbk : a->q), /* any valid buffer when absent */
        CLF_ARG_PTR(g->nbk ? g->drb : a->lse),
        CLF_ARG_U32(g->nbk),
        CLF_ARG_PTR(a->qr_w ? g->dqr : a->lse),
    };
    clf_arg args[FA_ARGS_MAX];
    _Static_assert(CLF_NARGS(own) + FA_MASK_ARGS + 3 <= FA_ARGS_MAX, "room for the arguments");
    memcpy(args, own, sizeof own);
    const int n = mask_args(a, args, CLF_NARGS(own));
    path = flash_path(rt, path, a->HS);
    /* the dq pass over query rows, then the dk/dv pass over keys */
    if ((st = flash_launch(rt, path, (clf_ops_pair){CLF_K_FLASH_BWD_DQ, CLF_K_FLASH_BWD_DQ_GROUP},
                           a, a->T, args, n, err)) != CLF_OK ||
        (st = flash_launch(rt, path, (clf_ops_pair){CLF_K_FLASH_BWD_DKV, CLF_K_FLASH_BWD_DKV_GROUP},
                           a, a->S, args, n, err)) != CLF_OK ||
        (grouped && (st = kv_sum(rt, a, g, err)) != CLF_OK))
        goto fail;
    return CLF_OK;
fail:
    clf_error_prefix(err, "attn_fused_backward");
    return st;
}

clf_status clf_op_attn_fused_backward(clf_runtime *rt, const clf_attn_fused *a,
                                      const clf_attn_fused_grad *g, clf_error *err)
{
    return clf_op_attn_fused_backward_ex(rt, CLF_OPS_PATH_AUTO, a, g, err);
}

/* ---- sparse patterns' random blocks ---- */

size_t clf_attn_sparse_visits(size_t nb, size_t bs, size_t window, size_t glob, size_t stride,
                              const int32_t *rnd, size_t R)
{
    size_t v = 0;
    for (size_t qb = 0; qb < nb; qb++)
        for (size_t kb = 0; kb <= qb; kb++) {
            /* the distances tq - s the pair spans: [dmin, dmax] */
            const size_t dmin = qb > kb ? (qb - kb - 1) * bs + 1 : 0, dmax = (qb - kb + 1) * bs - 1;
            int in =
                dmin < window || kb * bs < glob || (stride > 0 && dmax / stride * stride >= dmin);
            for (size_t r = 0; r < R; r++)
                in |= rnd[qb * R + r] == (int32_t)kb;
            v += (size_t)in;
        }
    return v;
}

void clf_attn_sparse_draw(int32_t *rnd, size_t nb, size_t R, uint64_t seed)
{
    uint64_t x = seed ^ 0x5BA55E0D5EEDull; /* splitmix64 */
    for (size_t qb = 0; qb < nb; qb++) {
        const size_t n = qb + 1, k = R < n ? (R < 64 ? R : 64) : n;
        int32_t pick[64]; /* R <= 64 (the schema's bound) */
        size_t m = 0;
        for (size_t i = 0; i < k; i++) {
            /* the i-th draw: uniform over the n - i blocks not drawn yet */
            x += 0x9E3779B97F4A7C15ull;
            uint64_t z = x;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            z ^= z >> 31;
            size_t j = (size_t)(z % (uint64_t)(n - i)), c = 0;
            for (size_t b = 0; b < n; b++) { /* the j-th block not yet drawn */
                int taken = 0;
                for (size_t t = 0; t < m; t++)
                    taken |= pick[t] == (int32_t)b;
                if (!taken && c++ == j) {
                    pick[m++] = (int32_t)b;
                    break;
                }
            }
        }
        for (size_t i = 1; i < m; i++) /* ascending */
            for (size_t t = i; t > 0 && pick[t - 1] > pick[t]; t--) {
                const int32_t tmp = pick[t];
                pick[t] = pick[t - 1];
                pick[t - 1] = tmp;
            }
        for (size_t r = 0; r < R; r++)
            rnd[qb * R + r] = r < m ? pick[r] : -1;
    }
}
