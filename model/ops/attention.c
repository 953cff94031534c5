/*
 * ops/attention.c - host wrappers of cl/attention.cl: moving heads between
 * [B, T, NH*HS] slabs and [B, NH, T, HS], and single-query decode attention
 * against a KV cache, alone or with the norm and qkv linear before it
 * (item-by-item devices).
 *
 * Design: the layout kernels give one work-item a whole head row (HS floats)
 * on CPUs and one float on GPUs; decode runs one work-group of a fixed
 * power-of-two size per (b, head) with the scores kept in local memory, so
 * L is limited by the device's local memory (checked here, reported as
 * CLF_ERR_UNSUPPORTED).
 *
 * Not here: causal/padded full-sequence attention (GEMM + softmax in model/).
 */
#include <math.h>
#include <string.h>

#include "model/ops/ops.h"
#include "model/ops/ops_internal.h"

#define U32_MAX_SZ ((size_t)0xFFFFFFFFu)

/* Flash-decoding policy: split a row's cached positions only where groups
 * run in parallel and there are too few rows to fill the device (fewer than
 * SPLIT_FILL work-groups per compute unit), into ranges of at least
 * SPLIT_MIN positions. */
#define SPLIT_FILL 4
#define SPLIT_MIN 128

size_t clf_op_attn_decode_splits(const clf_runtime *rt, size_t rows, size_t L)
{
    const clf_device_info *d = clf_runtime_device(rt);
    const size_t target = SPLIT_FILL * (size_t)(d->compute_units ? d->compute_units : 1);
    if (d->serial_groups || rows == 0 || rows >= target || L < 2 * SPLIT_MIN)
        return 1;
    size_t by_fill = (target + rows - 1) / rows, by_len = L / SPLIT_MIN;
    return by_fill < by_len ? by_fill : by_len;
}

size_t clf_op_attn_decode_scratch(const clf_runtime *rt, size_t rows_max, size_t L_max, size_t HS)
{
    /* splits grow with L and are 1 from SPLIT_FILL groups per compute unit
     * on, so the most any call up to these sizes needs is the largest
     * rows * splits(rows, L_max) below that */
    const clf_device_info *d = clf_runtime_device(rt);
    const size_t target = SPLIT_FILL * (size_t)(d->compute_units ? d->compute_units : 1);
    size_t most = 0;
    for (size_t rows = 1; rows <= rows_max && rows < target; rows++) {
        const size_t p = clf_op_attn_decode_splits(rt, rows, L_max);
        if (p > 1 && rows * p > most)
            most = rows * p;
    }
    return most * (HS + 2);
}

/* About the loop iterations one work-item of the decode kernels runs (a
 * little over: every loop of cl/attention.cl's attn_decode and
 * attn_decode_item counted), for devices that end loops early
 * (clf_device_info.loop_limit). */
static size_t decode_item_loops(int item, size_t W, size_t HS, size_t chunk)
{
    if (item)
        return chunk * (2 * ((HS + 7) / 8) + 2 * (HS % 8) + 3) + (chunk / 64 + 1) * HS + 3 * HS;
    const size_t parts = HS >= W ? 1 : W / HS;
    const size_t values =
        parts == 1 ? (HS + W - 1) / W * (chunk + 1) : (chunk + parts - 1) / parts + parts;
    return (HS + W - 1) / W + (chunk + W - 1) / W * (HS + 2) + values + 64;
}

clf_status clf_op_attn_decode(clf_runtime *rt, const clf_attn_decode *ad, clf_error *err)
{
    const clf_ptr out = ad->out, q = ad->q, kcache = ad->kcache, vcache = ad->vcache,
                  keep = ad->keep, scratch = ad->scratch;
    const size_t keep_stride = ad->keep_stride, B = ad->B, NH = ad->NH, HS = ad->HS,
                 Tmax = ad->Tmax, L = ad->L, group = ad->group;
    const float scale = ad->scale;
    const int has_keep = keep.buf != NULL, has_new = ad->kn.buf != NULL;
    const char *what = has_keep ? "attn_decode_keep" : "attn_decode";
    clf_kernel *k = NULL, *kc = NULL;
    clf_status st;
    const size_t BH = B * NH, KVH = ad->kv_heads ? ad->kv_heads : NH;
    const size_t lo = ad->window > 0 && L > ad->window ? L - ad->window : 0, seen = L - lo;
    const size_t P = ad->splits > 0                  ? ad->splits
                     : scratch.buf == NULL || L == 0 ? 1
                                                     : clf_op_attn_decode_splits(rt, BH, seen);
    if (L == 0 || L > Tmax || HS == 0 || NH == 0 || KVH > NH || NH % KVH != 0 ||
        B * KVH * Tmax * HS > U32_MAX_SZ || (ad->q_stride != 0 && ad->q_stride < NH * HS) ||
        (has_keep && (keep_stride < L || B * keep_stride > U32_MAX_SZ)) || P > seen ||
        (P > 1 && (scratch.buf == NULL || BH * P * (HS + 2) > U32_MAX_SZ)) ||
        (has_new && (ad->vn.buf == NULL || ad->n_stride < KVH * HS))) {
        st = clf_error_set(err, CLF_ERR_ARG,
                           "need 1 <= L (%zu) <= Tmax (%zu), HS (%zu) and NH (%zu) >= 1, K/V "
                           "heads (%zu) dividing NH, a q stride of 0 or >= NH*HS, the cache "
                           "under 2^32 floats, a keep stride (%zu) >= L, and 1 <= splits "
                           "(%zu) <= the positions seen, with scratch for more than one, and "
                           "new keys with values in rows of at least K/V heads x HS",
                           L, Tmax, HS, NH, KVH, keep_stride, P);
        goto fail;
    }
    const int item = ad->item || (group == 0 && clf_ops_serial(rt));
    if (item && HS > ATTN_ITEM_HS_MAX) {
        st = clf_error_set(err, CLF_ERR_UNSUPPORTED,
                           "head size %zu: decoding item by item holds at most %d per head", HS,
                           ATTN_ITEM_HS_MAX);
        goto fail;
    }
    if ((st = clf_kernel_of(rt, item ? CLF_K_ATTN_DECODE_ITEM : CLF_K_ATTN_DECODE, &k, err)) !=
            CLF_OK ||
        (P > 1 && (st = clf_kernel_of(rt, CLF_K_ATTN_DECODE_COMBINE, &kc, err)) != CLF_OK))
        goto fail;
    if (B == 0)
        return CLF_OK;
    clf_ptr mask = has_keep ? keep : q; /* any valid buffer when absent */
    clf_ptr part = P > 1 ? scratch : out;
    /* the group kernel's work-group and local memory (not the item kernel's) */
    size_t W = 1, chunk = (seen + P - 1) / P;
    if (!item) {
        W = group ? group : clf_ops_group_size(k, clf_ops_serial(rt) ? 16 : 128);
        const size_t lbytes = (HS + chunk + W) * sizeof(float);
        const clf_device_info *di = clf_runtime_device(rt);
        if (di->local_mem != 0 && lbytes > di->local_mem) {
            st = clf_error_set(err, CLF_ERR_UNSUPPORTED,
                               "a cache range of %zu positions with head size %zu needs %zu bytes "
                               "of local memory; %s has %llu",
                               chunk, HS, lbytes, di->name, (unsigned long long)di->local_mem);
            goto fail;
        }
    }
    /* a quarter of the limit kept back: the estimate counts iterations, the
     * device may count loop entries and exits too */
    const unsigned lim = clf_runtime_device(rt)->loop_limit;
    const size_t loops = decode_item_loops(item, W, HS, chunk);
    if (lim != 0 && loops > (size_t)lim / 4 * 3) {
        st = clf_error_set(err, CLF_ERR_UNSUPPORTED,
                           "a range of %zu positions with head size %zu takes each work-item "
                           "(%s%zu) about %zu loop iterations; %s ends a work-item's loops "
                           "after %u (the results would be wrong): use larger work-groups or "
                           "more ranges (splits)",
                           chunk, HS, item ? "one a range, " : "work-groups of ", item ? 1 : W,
                           loops, clf_runtime_device(rt)->name, lim);
        goto fail;
    }
    size_t global = BH * P * W;
    clf_arg a[] = {
        CLF_ARG_PTR(out),
        CLF_ARG_PTR(q),
        CLF_ARG_U64(ad->q_stride ? ad->q_stride : NH * HS),
        CLF_ARG_PTR(kcache),
        CLF_ARG_PTR(vcache),
        CLF_ARG_PTR(has_new ? ad->kn : q), /* any valid buffer when absent */
        CLF_ARG_PTR(has_new ? ad->vn : q),
        CLF_ARG_U64(ad->n_stride),
        CLF_ARG_I32(has_new),
        CLF_ARG_PTR(mask),
        CLF_ARG_U32(keep_stride),
        CLF_ARG_I32(has_keep),
        CLF_ARG_U32(NH),
        CLF_ARG_U32(NH / KVH),
        CLF_ARG_U32(HS),
        CLF_ARG_U32(Tmax),
        CLF_ARG_U32(lo),
        CLF_ARG_U32(L),
        CLF_ARG_F32(scale),
        CLF_ARG_I32(ad->alibi != 0),
        CLF_ARG_PTR(ad->rb_w ? ad->rb : q), /* any valid buffer when absent */
        CLF_ARG_U32(ad->rb_w),
        CLF_ARG_PTR(ad->qr_w ? ad->qr : q),
        CLF_ARG_U32(ad->qr_w),
        CLF_ARG_U32(ad->rel_k),
        CLF_ARG_U32(P),
        CLF_ARG_PTR(part),
        /* the group kernel's local memory: qs[HS], sc[chunk], red[W] */
        CLF_ARG_LOCAL(HS * sizeof(float)),
        CLF_ARG_LOCAL(chunk * sizeof(float)),
        CLF_ARG_LOCAL(W * sizeof(float)),
    };
    if ((st = clf_kernel_launch(rt, k, 1, &global, &W, CLF_NARGS(a) - (item ? 3 : 0), a, err)) !=
        CLF_OK)
        goto fail;
    if (P == 1)
        return CLF_OK;
    size_t n = BH * HS, local = clf_ops_local_1d(rt, kc);
    clf_arg c[] = {CLF_ARG_PTR(out), CLF_ARG_PTR(scratch), CLF_ARG_U32(BH), CLF_ARG_U32(HS),
                   CLF_ARG_U32(P)};
    if ((st = clf_kernel_launch(rt, kc, 1, &n, &local, CLF_NARGS(c), c, err)) != CLF_OK)
        goto fail;
    return CLF_OK;
fail:
    clf_error_prefix(err, "%s", what);
    return st;
}

/* ---- decoding: norm, qkv and attention in one launch ---- */

/* About the loop iterations of one attn_qkv_decode_item work-item (a little
 * over), for devices that end loops early. */
static size_t qkv_decode_loops(size_t C, size_t NH, size_t KVH, size_t HS, size_t L)
{
    const size_t grp = NH / KVH, blocks = (HS + CLF_NORM_DOT_N - 1) / CLF_NORM_DOT_N;
    const size_t cols = (grp + 2) * blocks * (C / 16 + C % 16 + 3) + 2 * C / 8 + 2 * C % 8;
    return cols + grp * (decode_item_loops(1, 1, HS, L) + 3 * HS);
}

/* Whether the kernel runs these sizes on this device: work-groups item by
 * item, a head within the item kernels' limit, K/V heads dividing the
 * heads, and (a device that ends loops early) loops well inside its limit. */
static int qkv_decode_runs(const clf_runtime *rt, size_t kv_heads, size_t HS, size_t C, size_t NH,
                           size_t L)
{
    const unsigned lim = clf_runtime_device(rt)->loop_limit;
    return clf_ops_serial(rt) && HS >= 1 && HS <= ATTN_ITEM_HS_MAX && kv_heads >= 1 &&
           NH % kv_heads == 0 &&
           (lim == 0 || qkv_decode_loops(C, NH, kv_heads, HS, L) <= (size_t)lim / 4 * 3);
}

int clf_op_attn_qkv_decode_fits(const clf_runtime *rt, size_t B, size_t kv_heads, size_t HS,
                                size_t C, size_t NH, size_t L)
{
    const unsigned cu = clf_runtime_device(rt)->compute_units;
    return qkv_decode_runs(rt, kv_heads, HS, C, NH, L) && B * kv_heads >= (cu ? cu : 1);
}

clf_status clf_op_attn_qkv_decode(clf_runtime *rt, const clf_attn_qkv_decode *a, clf_error *err)
{
    const char *op = "attn_qkv_decode";
    const size_t B = a->B, C = a->C, NH = a->NH, KVH = a->kv_heads, HS = a->HS, L = a->L;
    const size_t lo = a->window > 0 && L > a->window ? L - a->window : 0;
    if (B == 0)
        return CLF_OK;
    const clf_rope *rope = a->rope;
    if (rope != NULL &&
        (HS % 2 != 0 || L > (size_t)1 << 24 || !(rope->theta > 1.0f) || !(rope->factor >= 1.0f) ||
         !(rope->mscale > 0.0f) || !(rope->ramp_hi > rope->ramp_lo)))
        return clf_error_set(err, CLF_ERR_ARG,
                             "%s: rotary positions need an even head size (%zu), positions below "
                             "2^24 (%zu), theta above 1, a factor of at least 1, a positive mscale "
                             "and an increasing ramp",
                             op, HS, L);
    if (C == 0 || L == 0 || L > a->Tmax || !qkv_decode_runs(rt, KVH, HS, C, NH, L) ||
        B * NH * HS > U32_MAX_SZ || B * KVH * a->Tmax * HS > U32_MAX_SZ)
        return clf_error_set(err, CLF_ERR_ARG,
                             "%s: %zu rows of %zu columns, %zu heads over %zu K/V heads of size "
                             "%zu, position %zu of %zu: expected C >= 1, 1 <= L <= Tmax, K/V "
                             "heads dividing the heads, 1 <= HS <= %d, the caches under 2^32 "
                             "floats, and a device whose work-groups run item by item (and "
                             "whose loop limit, if any, these sizes keep well inside)",
                             op, B, C, NH, KVH, HS, L, a->Tmax, ATTN_ITEM_HS_MAX);
    if (clf_ops_need(a->x, op, "x", err) || clf_ops_need(a->w, op, "w", err) ||
        clf_ops_need(a->W, op, "W", err) || clf_ops_need(a->out, op, "out", err) ||
        clf_ops_need(a->kcache, op, "kcache", err) || clf_ops_need(a->vcache, op, "vcache", err))
        return CLF_ERR_ARG;
    const int has_nb = !a->rms && a->b.buf != NULL, has_bias = a->bias.buf != NULL;
    clf_kernel *k = NULL;
    clf_status st = clf_kernel_of(rt, CLF_K_ATTN_QKV_DECODE_ITEM, &k, err);
    if (st != CLF_OK)
        return st;
    const clf_arg args[] = {CLF_ARG_PTR(a->out),
                            CLF_ARG_PTR(a->x),
                            CLF_ARG_PTR(a->w),
                            CLF_ARG_PTR(has_nb ? a->b : a->w), /* any valid buffer when absent */
                            CLF_ARG_I32(has_nb),
                            CLF_ARG_I32(a->rms != 0),
                            CLF_ARG_F32(a->eps),
                            CLF_ARG_PTR(a->W),
                            CLF_ARG_PTR(has_bias ? a->bias : a->W),
                            CLF_ARG_I32(has_bias),
                            CLF_ARG_PTR(a->kcache),
                            CLF_ARG_PTR(a->vcache),
                            CLF_ARG_U32(B),
                            CLF_ARG_U32(NH),
                            CLF_ARG_U32(NH / KVH),
                            CLF_ARG_U32(HS),
                            CLF_ARG_U32(C),
                            CLF_ARG_U32(a->Tmax),
                            CLF_ARG_U32(lo),
                            CLF_ARG_U32(L),
                            CLF_ARG_F32(a->scale),
                            CLF_ARG_I32(a->alibi != 0),
                            CLF_ARG_I32(rope != NULL),
                            CLF_ARG_F32(rope ? (float)log2((double)rope->theta) : 0.0f),
                            CLF_ARG_F32(rope ? rope->factor : 1.0f),
                            CLF_ARG_F32(rope ? rope->ramp_lo : 0.0f),
                            CLF_ARG_F32(rope ? rope->ramp_hi : 1.0f),
                            CLF_ARG_F32(rope ? rope->mscale : 1.0f)};
    /* a work-group per work-item: the device spreads groups over its cores */
    const size_t global = B * KVH, local = 1;
    if ((st = clf_kernel_launch(rt, k, 1, &global, &local, CLF_NARGS(args), args, err)) != CLF_OK)
        clf_error_prefix(err, "%s", op);
    return st;
}

/* ---- KV cache ---- */

clf_status clf_op_kv_store(clf_runtime *rt, clf_ptr kcache, clf_ptr vcache, const clf_heads *h,
                           const clf_heads *hv, size_t Tmax, size_t pos0, clf_error *err)
{
    const size_t B = h->B, T = h->T, NH = h->NH, HS = h->HS, row_stride = h->row_stride;
    /* both read from one buffer, at the lower offset, each at its columns */
    const size_t base = h->x.off < hv->x.off ? h->x.off : hv->x.off;
    const clf_ptr src = {h->x.buf, base};
    const size_t k_col = h->x.off - base, v_col = hv->x.off - base;
    clf_kernel *k = NULL;
    clf_status st;
    size_t n = B * NH * T * HS;
    if (hv->x.buf != h->x.buf || hv->t != h->t || hv->B != B || hv->T != T || hv->NH != NH ||
        hv->HS != HS || hv->row_stride != row_stride) {
        st = clf_error_set(err, CLF_ERR_ARG,
                           "keys and values must be heads of one buffer, of "
                           "one shape and row stride");
        goto fail;
    }
    if (h->t != CLF_DT_F32 || pos0 + T > Tmax || row_stride < NH * HS ||
        B * NH * Tmax * HS > U32_MAX_SZ ||
        B * T * row_stride + (k_col > v_col ? k_col : v_col) > U32_MAX_SZ) {
        st = clf_error_set(err, CLF_ERR_ARG,
                           "positions [%zu, %zu) do not fit a cache of %zu, the row stride %zu is "
                           "below NH*HS = %zu, the sizes are over 2^32 floats, or the source is "
                           "not float32",
                           pos0, pos0 + T, Tmax, row_stride, NH * HS);
        goto fail;
    }
    if (n == 0)
        return CLF_OK;
    if ((st = clf_kernel_of(rt, CLF_K_KV_STORE, &k, err)) != CLF_OK)
        goto fail;
    size_t local = clf_ops_local_1d(rt, k);
    clf_arg a[] = {CLF_ARG_PTR(kcache),     CLF_ARG_PTR(vcache), CLF_ARG_PTR(src),
                   CLF_ARG_U32(k_col),      CLF_ARG_U32(v_col),  CLF_ARG_U32(n),
                   CLF_ARG_U32(T),          CLF_ARG_U32(NH),     CLF_ARG_U32(HS),
                   CLF_ARG_U32(row_stride), CLF_ARG_U32(Tmax),   CLF_ARG_U32(pos0)};
    if ((st = clf_kernel_launch(rt, k, 1, &n, &local, CLF_NARGS(a), a, err)) != CLF_OK)
        goto fail;
    return CLF_OK;
fail:
    clf_error_prefix(err, "kv_store");
    return st;
}

clf_status clf_op_cache_gather(clf_runtime *rt, clf_ptr dst, clf_ptr src, clf_ptr index,
                               size_t rows, size_t G, size_t len, size_t stride, clf_error *err)
{
    clf_kernel *k = NULL;
    clf_status st;
    size_t n = rows * G * len;
    if (len > stride || rows * G * stride > U32_MAX_SZ) {
        st = clf_error_set(err, CLF_ERR_ARG,
                           "rows of %zu elements do not fit a stride of %zu, or the tensor is "
                           "over 2^32 elements",
                           len, stride);
        goto fail;
    }
    if (n == 0)
        return CLF_OK;
    if ((st = clf_kernel_of(rt, CLF_K_CACHE_GATHER, &k, err)) != CLF_OK)
        goto fail;
    size_t local = clf_ops_local_1d(rt, k);
    int use_index = index.buf != NULL;
    clf_ptr idx = use_index ? index : src; /* any valid buffer when unused */
    clf_arg a[] = {CLF_ARG_PTR(dst), CLF_ARG_PTR(src), CLF_ARG_PTR(idx), CLF_ARG_I32(use_index),
                   CLF_ARG_U32(n),   CLF_ARG_U32(G),   CLF_ARG_U32(len), CLF_ARG_U32(stride)};
    if ((st = clf_kernel_launch(rt, k, 1, &n, &local, CLF_NARGS(a), a, err)) != CLF_OK)
        goto fail;
    return CLF_OK;
fail:
    clf_error_prefix(err, "cache_gather");
    return st;
}

size_t clf_op_relbias_width(size_t T, size_t S) { return T + S - 1 + 16; }

clf_status clf_op_relbias_table(clf_runtime *rt, clf_ptr rb, clf_ptr rbk, clf_ptr w, clf_ptr bk,
                                size_t R0, size_t NH, size_t NB, size_t T, size_t S, clf_error *err)
{
    if (T == 0 || S == 0 || NH == 0 || NB == 0 || R0 + 1 < T || R0 + 1 < S ||
        NH * 2 * clf_op_relbias_width(T, S) > 0xFFFFFFFFu)
        return clf_error_set(err, CLF_ERR_ARG,
                             "relbias_table: T %zu, S %zu, NH %zu, NB %zu need buckets for key - "
                             "query in [-R0, R0] with R0 (%zu) >= T - 1, S - 1",
                             T, S, NH, NB, R0);
    if (clf_ops_need(rb, "relbias_table", "rb", err) ||
        clf_ops_need(rbk, "relbias_table", "rbk", err) ||
        clf_ops_need(w, "relbias_table", "w", err) || clf_ops_need(bk, "relbias_table", "bk", err))
        return CLF_ERR_ARG;
    clf_kernel *k = NULL;
    clf_status st = clf_kernel_of(rt, CLF_K_RELBIAS_TABLE, &k, err);
    if (st != CLF_OK)
        return st;
    const size_t width = clf_op_relbias_width(T, S);
    clf_arg a[] = {CLF_ARG_PTR(rb), CLF_ARG_PTR(rbk),  CLF_ARG_PTR(w),  CLF_ARG_PTR(bk),
                   CLF_ARG_U32(R0), CLF_ARG_U32(NH),   CLF_ARG_U32(NB), CLF_ARG_U32(T),
                   CLF_ARG_U32(S),  CLF_ARG_U32(width)};
    size_t local = clf_ops_local_1d(rt, k);
    size_t global = (NH * 2 * width + local - 1) / local * local;
    return clf_kernel_launch(rt, k, 1, &global, &local, CLF_NARGS(a), a, err);
}

/* One launch of a 1-D kernel over n work-items (the group size the device's). */
static clf_status launch_1d(clf_runtime *rt, clf_kernel_id id, size_t n, int nargs,
                            const clf_arg *args, clf_error *err)
{
    clf_kernel *k = NULL;
    clf_status st = clf_kernel_of(rt, id, &k, err);
    if (st != CLF_OK || n == 0)
        return st;
    size_t local = clf_ops_local_1d(rt, k);
    size_t global = (n + local - 1) / local * local;
    return clf_kernel_launch(rt, k, 1, &global, &local, nargs, args, err);
}

static size_t perf_kvb(const clf_performer *p)
{
    return p->kv_batch_stride ? p->kv_batch_stride : p->S * p->kv_stride;
}
static size_t perf_kvh(const clf_performer *p)
{
    return p->kv_head_stride ? p->kv_head_stride : p->HS;
}

static clf_status perf_check(const clf_performer *p, clf_error *err)
{
    if (p->HS == 0 || p->m == 0 || p->m > PERF_M_MAX || p->HS + 1 > PERF_HS1_MAX || p->S == 0 ||
        p->T > p->S || (!p->causal && p->T != p->S && p->keep.buf != NULL) ||
        p->B * p->NH * p->S * (p->m + p->HS + 1) > 0xFFFFFFFFu || p->q_stride < p->NH * p->HS ||
        p->y_stride < p->NH * p->HS)
        return clf_error_set(err, CLF_ERR_ARG,
                             "performer: head size %zu (at most %d), %zu features (at most %d), "
                             "T %zu <= S %zu and row strides of at least NH*HS",
                             p->HS, PERF_HS1_MAX - 1, p->m, PERF_M_MAX, p->T, p->S);
    return CLF_OK;
}

/* Features of x (rows of R per (b, h)) in mode 0 (queries), 1 (keys) or 2
 * (the keys' row maxima into cmax). */
static clf_status perf_phi(clf_runtime *rt, const clf_performer *p, clf_ptr f, clf_ptr x, size_t xs,
                           size_t xb, size_t xh, size_t R, clf_ptr cmax, int mode, clf_error *err)
{
    const int has_keep = mode != 0 && p->keep.buf != NULL;
    const clf_ptr keep = has_keep ? p->keep : x;
    clf_arg a[] = {CLF_ARG_PTR(f),        CLF_ARG_PTR(x),
                   CLF_ARG_U64(xs),       CLF_ARG_U64(xb),
                   CLF_ARG_U64(xh),       CLF_ARG_U32(p->B),
                   CLF_ARG_U32(p->NH),    CLF_ARG_U32(1),
                   CLF_ARG_U32(R),        CLF_ARG_U32(p->HS),
                   CLF_ARG_U32(p->m),     CLF_ARG_PTR(p->om),
                   CLF_ARG_PTR(keep),     CLF_ARG_U64(p->keep_stride),
                   CLF_ARG_I32(has_keep), CLF_ARG_PTR(cmax),
                   CLF_ARG_I32(mode)};
    return launch_1d(rt, CLF_K_PERF_PHI, p->B * p->NH * R, CLF_NARGS(a), a, err);
}

clf_status clf_op_performer_forward(clf_runtime *rt, const clf_performer *p, clf_error *err)
{
    clf_status st = perf_check(p, err);
    if (st != CLF_OK)
        return st;
    const size_t BH = p->B * p->NH, kb = perf_kvb(p), kh = perf_kvh(p);
    if ((st = perf_phi(rt, p, p->fq, p->q, p->q_stride, p->T * p->q_stride, p->HS, p->T, p->cmax, 0,
                       err)) != CLF_OK ||
        (st = perf_phi(rt, p, p->fk, p->k, p->kv_stride, kb, kh, p->S, p->rmax, 2, err)) != CLF_OK)
        return st;
    clf_arg mx[] = {CLF_ARG_PTR(p->cmax), CLF_ARG_PTR(p->rmax), CLF_ARG_U32(BH), CLF_ARG_U32(p->S)};
    if ((st = launch_1d(rt, CLF_K_PERF_BHMAX, BH, CLF_NARGS(mx), mx, err)) != CLF_OK ||
        (st = perf_phi(rt, p, p->fk, p->k, p->kv_stride, kb, kh, p->S, p->cmax, 1, err)) != CLF_OK)
        return st;
    clf_arg fw[] = {CLF_ARG_PTR(p->nd), CLF_ARG_PTR(p->fq),        CLF_ARG_PTR(p->fk),
                    CLF_ARG_PTR(p->v),  CLF_ARG_U64(p->kv_stride), CLF_ARG_U64(kb),
                    CLF_ARG_U64(kh),    CLF_ARG_U32(p->B),         CLF_ARG_U32(p->NH),
                    CLF_ARG_U32(1),     CLF_ARG_U32(p->T),         CLF_ARG_U32(p->S),
                    CLF_ARG_U32(p->HS), CLF_ARG_U32(p->m),         CLF_ARG_I32(p->causal)};
    if ((st = launch_1d(rt, CLF_K_PERF_FWD, BH * (p->HS + 1), CLF_NARGS(fw), fw, err)) != CLF_OK)
        return st;
    clf_arg o[] = {CLF_ARG_PTR(p->y), CLF_ARG_U64(p->y_stride), CLF_ARG_PTR(p->nd),
                   CLF_ARG_U32(p->B), CLF_ARG_U32(p->NH),       CLF_ARG_U32(p->T),
                   CLF_ARG_U32(p->HS)};
    return launch_1d(rt, CLF_K_PERF_OUT, p->B * p->T * p->NH * p->HS, CLF_NARGS(o), o, err);
}

clf_status clf_op_performer_backward(clf_runtime *rt, const clf_performer *p,
                                     const clf_performer_grad *g, clf_error *err)
{
    clf_status st = perf_check(p, err);
    if (st != CLF_OK)
        return st;
    const size_t BH = p->B * p->NH, kb = perf_kvb(p), kh = perf_kvh(p), HS = p->HS;
    clf_arg r[] = {CLF_ARG_PTR(g->u),        CLF_ARG_PTR(g->dy), CLF_ARG_PTR(p->y),
                   CLF_ARG_U64(p->y_stride), CLF_ARG_PTR(p->nd), CLF_ARG_U32(p->B),
                   CLF_ARG_U32(p->NH),       CLF_ARG_U32(p->T),  CLF_ARG_U32(HS)};
    if ((st = launch_1d(rt, CLF_K_PERF_BWD_ROWS, BH * p->T, CLF_NARGS(r), r, err)) != CLF_OK)
        return st;
    clf_arg q[] = {CLF_ARG_PTR(g->dfq), CLF_ARG_PTR(g->u),         CLF_ARG_PTR(p->fk),
                   CLF_ARG_PTR(p->v),   CLF_ARG_U64(p->kv_stride), CLF_ARG_U64(kb),
                   CLF_ARG_U64(kh),     CLF_ARG_U32(p->B),         CLF_ARG_U32(p->NH),
                   CLF_ARG_U32(1),      CLF_ARG_U32(p->T),         CLF_ARG_U32(p->S),
                   CLF_ARG_U32(HS),     CLF_ARG_U32(p->m),         CLF_ARG_I32(p->causal)};
    if ((st = launch_1d(rt, CLF_K_PERF_DFQ, BH * p->m, CLF_NARGS(q), q, err)) != CLF_OK)
        return st;
    for (int mode = 0; mode < 2; mode++) {
        clf_arg k[] = {CLF_ARG_PTR(g->dfk),
                       CLF_ARG_PTR(g->dv),
                       CLF_ARG_U64(g->dkv_stride),
                       CLF_ARG_U64(p->S * g->dkv_stride),
                       CLF_ARG_U64(HS),
                       CLF_ARG_PTR(g->u),
                       CLF_ARG_PTR(p->fq),
                       CLF_ARG_PTR(p->fk),
                       CLF_ARG_PTR(p->v),
                       CLF_ARG_U64(p->kv_stride),
                       CLF_ARG_U64(kb),
                       CLF_ARG_U64(kh),
                       CLF_ARG_U32(p->B),
                       CLF_ARG_U32(p->NH),
                       CLF_ARG_U32(p->T),
                       CLF_ARG_U32(p->S),
                       CLF_ARG_U32(HS),
                       CLF_ARG_U32(p->m),
                       CLF_ARG_I32(p->causal),
                       CLF_ARG_I32(mode)};
        if ((st = launch_1d(rt, CLF_K_PERF_DKV, BH * (mode == 0 ? p->m : HS), CLF_NARGS(k), k,
                            err)) != CLF_OK)
            return st;
    }
    for (int side = 0; side < 2; side++) { /* queries, then keys */
        const size_t R = side ? p->S : p->T;
        const size_t ds = side ? g->dkv_stride : g->dq_stride;
        clf_arg d[] = {CLF_ARG_PTR(side ? g->dk : g->dq),
                       CLF_ARG_U64(ds),
                       CLF_ARG_U64(R * ds),
                       CLF_ARG_U64(HS),
                       CLF_ARG_PTR(side ? p->k : p->q),
                       CLF_ARG_U64(side ? p->kv_stride : p->q_stride),
                       CLF_ARG_U64(side ? kb : p->T * p->q_stride),
                       CLF_ARG_U64(side ? kh : HS),
                       CLF_ARG_PTR(side ? p->fk : p->fq),
                       CLF_ARG_PTR(side ? g->dfk : g->dfq),
                       CLF_ARG_U32(p->B),
                       CLF_ARG_U32(p->NH),
                       CLF_ARG_U32(R),
                       CLF_ARG_U32(HS),
                       CLF_ARG_U32(p->m),
                       CLF_ARG_PTR(p->om)};
        if ((st = launch_1d(rt, CLF_K_PERF_DPHI, BH * R, CLF_NARGS(d), d, err)) != CLF_OK)
            return st;
    }
    return CLF_OK;
}

clf_status clf_op_rows_mask(clf_runtime *rt, clf_ptr x, size_t stride, size_t col0, size_t ncols,
                            clf_ptr keep, size_t rows, clf_error *err)
{
    if (col0 + ncols > stride || rows * stride > 0xFFFFFFFFu || keep.buf == NULL)
        return clf_error_set(err, CLF_ERR_ARG,
                             "rows_mask: columns [%zu, %zu) of rows of %zu, %zu rows, and a keep "
                             "mask",
                             col0, col0 + ncols, stride, rows);
    clf_arg args[] = {CLF_ARG_PTR(x),     CLF_ARG_U32(stride), CLF_ARG_U32(col0),
                      CLF_ARG_U32(ncols), CLF_ARG_PTR(keep),   CLF_ARG_U32(rows)};
    return launch_1d(rt, CLF_K_ROWS_MASK, rows * ncols, CLF_NARGS(args), args, err);
}

clf_status clf_op_sparse_keep(clf_runtime *rt, clf_ptr keep, size_t keep_stride, size_t B, size_t L,
                              const clf_attn_fused *a, clf_error *err)
{
    if (a->sp_bs == 0 || (a->sp_R > 0 && a->sp.buf == NULL) || keep_stride < L || L == 0 ||
        B * keep_stride > 0xFFFFFFFFu || (L - 1) / a->sp_bs >= a->sp_nb)
        return clf_error_set(err, CLF_ERR_ARG,
                             "sparse_keep: %zu rows of %zu positions (stride %zu) need random "
                             "blocks covering them (%zu blocks of %zu)",
                             B, L, keep_stride, a->sp_nb, a->sp_bs);
    clf_arg args[] = {CLF_ARG_PTR(keep),      CLF_ARG_U32(keep_stride),
                      CLF_ARG_U32(B),         CLF_ARG_U32(L),
                      CLF_ARG_U32(a->window), CLF_ARG_U32(a->glob),
                      CLF_ARG_U32(a->stride), CLF_ARG_PTR(a->sp_R ? a->sp : keep),
                      CLF_ARG_U32(a->sp_bs),  CLF_ARG_U32(a->sp_R)};
    return launch_1d(rt, CLF_K_SPARSE_KEEP, B * L, CLF_NARGS(args), args, err);
}

static clf_status rel_heads_ok(const clf_heads *h, size_t W, const char *what, clf_error *err)
{
    if (h->HS == 0 || h->NH == 0 || W == 0 || W > FA_QRW_MAX || h->row_stride < h->NH * h->HS ||
        h->B * h->T * h->NH * h->HS > 0xFFFFFFFFu || h->B * h->NH * h->T * W > 0xFFFFFFFFu)
        return clf_error_set(err, CLF_ERR_ARG,
                             "%s: heads of %zu x %zu in rows of %zu, %zu relative distances (at "
                             "most %d)",
                             what, h->NH, h->HS, h->row_stride, W, FA_QRW_MAX);
    return CLF_OK;
}

clf_status clf_op_rel_qr(clf_runtime *rt, clf_ptr qr, const clf_heads *q, clf_ptr r, size_t W,
                         float scale, clf_error *err)
{
    clf_status st = rel_heads_ok(q, W, "rel_qr", err);
    if (st != CLF_OK || q->B * q->T == 0)
        return st;
    clf_kernel *k = NULL;
    if ((st = clf_kernel_of(rt, CLF_K_REL_QR, &k, err)) != CLF_OK)
        return st;
    clf_arg a[] = {
        CLF_ARG_PTR(qr),    CLF_ARG_PTR(q->x), CLF_ARG_U32(q->t),  CLF_ARG_U64(q->row_stride),
        CLF_ARG_PTR(r),     CLF_ARG_U32(q->B), CLF_ARG_U32(q->NH), CLF_ARG_U32(q->T),
        CLF_ARG_U32(q->HS), CLF_ARG_U32(W),    CLF_ARG_F32(scale)};
    size_t local = clf_ops_local_1d(rt, k), n = q->B * q->NH * q->T * W;
    size_t global = (n + local - 1) / local * local;
    return clf_kernel_launch(rt, k, 1, &global, &local, CLF_NARGS(a), a, err);
}

clf_status clf_op_rel_qr_backward(clf_runtime *rt, const clf_heads *dq, clf_ptr dr,
                                  const clf_heads *q, clf_ptr r, clf_ptr dqr, size_t W, float scale,
                                  clf_error *err)
{
    clf_status st = rel_heads_ok(q, W, "rel_qr_backward", err);
    if (st == CLF_OK)
        st = rel_heads_ok(dq, W, "rel_qr_backward", err);
    if (st != CLF_OK || q->B * q->T == 0)
        return st;
    clf_kernel *kq = NULL, *kr = NULL;
    if ((st = clf_kernel_of(rt, CLF_K_REL_DQ, &kq, err)) != CLF_OK ||
        (st = clf_kernel_of(rt, CLF_K_REL_DR, &kr, err)) != CLF_OK)
        return st;
    clf_arg a[] = {CLF_ARG_PTR(dq->x), CLF_ARG_U32(dq->t), CLF_ARG_U64(dq->row_stride),
                   CLF_ARG_PTR(dqr),   CLF_ARG_PTR(r),     CLF_ARG_U32(q->B),
                   CLF_ARG_U32(q->NH), CLF_ARG_U32(q->T),  CLF_ARG_U32(q->HS),
                   CLF_ARG_U32(W),     CLF_ARG_F32(scale)};
    size_t local = clf_ops_local_1d(rt, kq), n = q->B * q->T * q->NH * q->HS;
    size_t global = (n + local - 1) / local * local;
    if ((st = clf_kernel_launch(rt, kq, 1, &global, &local, CLF_NARGS(a), a, err)) != CLF_OK)
        return st;
    clf_arg b[] = {CLF_ARG_PTR(dr),    CLF_ARG_PTR(dqr),           CLF_ARG_PTR(q->x),
                   CLF_ARG_U32(q->t),  CLF_ARG_U64(q->row_stride), CLF_ARG_U32(q->B),
                   CLF_ARG_U32(q->NH), CLF_ARG_U32(q->T),          CLF_ARG_U32(q->HS),
                   CLF_ARG_U32(W),     CLF_ARG_F32(scale)};
    local = clf_ops_local_1d(rt, kr);
    global = (W * q->HS + local - 1) / local * local;
    return clf_kernel_launch(rt, kr, 1, &global, &local, CLF_NARGS(b), b, err);
}
