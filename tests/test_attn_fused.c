/*
 * test_attn_fused.c - fused attention (cl/flash/ through ops/flash.c)
 * against a float64 reference on fresh random inputs, in every kernel
 * shape: the blocked kernels in the device's width (FA_VW query rows per
 * work-item: 16 on AVX-512 PoCL, 1 on a GPU or Oclgrind) and in the other
 * (1, or 16 where the device's is 1; on a runtime of its own), and the
 * work-group tiles through local memory (the GPU shape; on a CPU device
 * local memory is emulated but the barriers and tiling are the same).
 *
 * Layouts as the model has them: self-attention reads q, k, v inside one
 * fused [B, T, 3C] projection; cross-attention q from [B, T, C] and k, v
 * from [B, S, 2C] (and again from KV caches [B, NH, Tmax, HS], which must
 * give the same bits); y is written merged into rows wider than C (columns
 * past C are guards that must keep their value). Cases: T in {1, 2, 5, 11,
 * 21, 29, 30, 37, 45, 64, 140, 150, 257, 300, 1000}, S != T, head sizes 16 to 256 (96
 * included), causal and not (causal with S > T: the prefill offset), a keep
 * mask that hides keys and empties a whole row (y = 0, lse = -inf there),
 * sliding windows (5, 9, 16 keys), ALiBi (3 heads: the non-power-of-two
 * slopes), attention dropout (p 0.1 to 0.3) whose mask the reference takes
 * from clf_random_dropout_keep, the host copy of the dropout kernel's
 * decision (tests/test_random.c checks the two agree), so the fused kernels
 * drop exactly what the materialised path dropped. Tolerances: y atol
 * 2e-5, rtol 1e-4; lse atol 1e-4, rtol 1e-5 (float dot products of length
 * HS, exp and sums over S). Reruns are bit-identical (not checked under a
 * checking simulator, whose time goes to its own checks); bad arguments are
 * refused. With CLFORMER_TEST_OWN_SHAPE=1 on a device whose shape is group,
 * the tiles alone.
 * Sparse patterns beside the window (global keys, a stride, random blocks
 * per query block of 16 to 64 positions; clf_attn_sparse_draw's blocks
 * from a fresh seed): the reference applies the definition key by key, the
 * kernels skip the block pairs they judge empty, which must hold no
 * visible key for the results to agree.
 * Packed documents (segments: query t sees key s only in its own
 * document): the reference masks by the case's segment ids.
 * Grouped-query attention (2, 3 and 4 query heads to a K/V head; 1 K/V
 * head: multi-query): the reference reads K/V head h / group, and its
 * dk, dv sum over the group's query heads.
 * Backward: dq, dk, dv written into the model's gradient layouts (a fused
 * [B, T, 3C] dqkv; for cross-attention dq [B, T, C] and dkv [B, S, 2C])
 * against the float64 analytic gradient of sum(dy * y), atol 5e-5, rtol
 * 5e-4; that gradient against central differences of the float64 forward
 * at sampled coordinates (step 1e-2, |error| <= 2e-3 (1 + |g|)); reruns
 * bit-identical.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ops/ops.h"
#include "model/ops/ops_internal.h"
#include "tests/attn_case.h"
#include "tests/test_util.h"

#define GUARD 7.25f

/* The kernel shape under test (the cl/flash/ family's FA_VW), for the messages. */
static size_t g_vw;
/* The shape under test: the blocked kernels (ITEM) or the tiles (GROUP). */
static clf_ops_path g_path = CLF_OPS_PATH_ITEM;
/* check clf_op_attn_probs too (the first pass: the device's own width; the
 * probe runs the device's forward, which the other widths' passes would
 * only repeat at their cost) */
static int g_probs;

#define DROP_SEED 0x5EEDull
#define DROP_STREAM 0xA77E0001ull

/* A case's relative position bias (acase.nb buckets): the table w [NH, nb]
 * and a random bucket of every key - query in [-R0, R0] (the kernels take
 * any bucket map; T5's is the model's business). */
static float *g_relw;
static int32_t *g_relbk;
static size_t g_R0;
static double rel_bias(const acase *c, size_t h, long rel)
{
    return c->nb ? g_relw[h * c->nb + (size_t)g_relbk[(long)g_R0 + rel]] : 0.0;
}
/* Shaw's relative positions (acase.rel_k): the rows' q.r table [B*NH*T, W]
 * (random here: the fused kernels read it as given), W = 2 rel_k + 1. */
static float *g_qr;
static size_t rel_c(const acase *c, long rel)
{
    const long k = (long)c->rel_k;
    return (size_t)((rel < -k ? -k : rel > k ? k : rel) + k);
}
static double shaw_bias(const acase *c, size_t b, size_t h, size_t t, long rel)
{
    return c->rel_k ? g_qr[((b * c->NH + h) * c->T + t) * (2 * c->rel_k + 1) + rel_c(c, rel)] : 0.0;
}

/* Sparse patterns (acase.bs): the random key blocks of each query block
 * (clf_attn_sparse_draw's, from a fresh seed), and whether query tq sees
 * key s past the window band, by the definition (not the kernels' table). */
static int32_t *g_rnd;
static int sparse_sees(const acase *c, long tq, long s)
{
    if (s < (long)c->glob || (c->stride && (tq - s) % (long)c->stride == 0))
        return 1;
    for (size_t r = 0; r < c->rnd; r++)
        if (g_rnd[(size_t)tq / c->bs * c->rnd + r] == (int32_t)((size_t)s / c->bs))
            return 1;
    return 0;
}

/* The K/V head query head h reads (grouped-query attention). */
static size_t kv_head(const acase *c, size_t h) { return h / (c->NH / acase_kvh(c)); }

/* Row (b, h, t)'s probabilities p[s] (0 where hidden) and its log-sum-exp
 * (-inf when it sees nothing); the dropout factor of (t, s) in drop[s]
 * (0 or 1/(1-p); 1 without dropout). */
static double row_probs(const acase *c, const float *q, size_t qs, const float *k, size_t kvs,
                        const int32_t *keep, size_t b, size_t h, size_t t, double *p, double *drop)
{
    const double scale = 1.0 / sqrt((double)c->HS);
    const float *qr = q + (b * c->T + t) * qs + h * c->HS;
    const long tq = (long)t + (long)c->S - (long)c->T;
    double mx = -INFINITY, sum = 0;
    for (size_t s = 0; s < c->S; s++) {
        p[s] = -INFINITY;
        int seen = c->masked == 2 ? keep[b * c->S + s] == keep[b * c->S + (size_t)tq]
                                  : !(keep && keep[b * c->S + s] == 0);
        if (c->causal)
            seen &= (long)s <= tq;
        if (c->window)
            seen &= (long)s > tq - (long)c->window || (c->bs && sparse_sees(c, tq, (long)s));
        const size_t i = ((b * c->NH + h) * c->T + t) * c->S + s;
        drop[s] = c->p_drop > 0 ? (clf_random_dropout_keep(i, c->p_drop, DROP_SEED, DROP_STREAM)
                                       ? 1.0 / (1.0 - (double)c->p_drop)
                                       : 0.0)
                                : 1.0;
        if (!seen)
            continue;
        const float *kr = k + (b * c->S + s) * kvs + kv_head(c, h) * c->HS;
        double a = 0;
        for (size_t d = 0; d < c->HS; d++)
            a += (double)qr[d] * kr[d];
        p[s] = a * scale;
        if (c->alibi)
            p[s] -= tu_alibi_slope(h, c->NH) * fabs((double)(tq - (long)s));
        p[s] += rel_bias(c, h, (long)s - tq);
        p[s] += shaw_bias(c, b, h, t, (long)s - tq);
        mx = fmax(mx, p[s]);
    }
    for (size_t s = 0; s < c->S; s++) {
        p[s] = p[s] == -INFINITY ? 0 : exp(p[s] - mx);
        sum += p[s];
    }
    for (size_t s = 0; s < c->S && sum > 0; s++)
        p[s] /= sum;
    return sum > 0 ? mx + log(sum) : -INFINITY;
}

/* The rows (b, h, .) of the output a sum needs: every row (NULL), or those
 * of one sequence b (b >= 0; -1: every sequence) and one query head h, or,
 * by_kv, the query heads that read K/V head h. */
typedef struct rowsel {
    long b;
    size_t h;
    int by_kv;
} rowsel;
static int row_in(const acase *c, const rowsel *sel, size_t b, size_t h)
{
    return !sel ||
           ((sel->b < 0 || (size_t)sel->b == b) && (sel->by_kv ? kv_head(c, h) : h) == sel->h);
}

/* The reference on host copies of the layouts: the rows sel names (all for
 * NULL); the others' y and lse are not written. */
static void reference(const acase *c, const float *q, size_t qs, const float *k, const float *v,
                      size_t kvs, const int32_t *keep, const rowsel *sel, double *y, double *lse)
{
    const size_t C = c->NH * c->HS;
    double *p = malloc(c->S * sizeof *p), *drop = malloc(c->S * sizeof *drop);
    for (size_t b = 0; b < c->B; b++)
        for (size_t h = 0; h < c->NH; h++) {
            if (!row_in(c, sel, b, h))
                continue;
            for (size_t t = 0; t < c->T; t++) {
                lse[(b * c->NH + h) * c->T + t] =
                    row_probs(c, q, qs, k, kvs, keep, b, h, t, p, drop);
                /* y[d] = sum over s (ascending) of p[s] drop[s] v[s][d], a key's
                 * row of v at a time */
                double *yr = y + (b * c->T + t) * C + h * c->HS;
                for (size_t d = 0; d < c->HS; d++)
                    yr[d] = 0;
                for (size_t s = 0; s < c->S; s++) {
                    const double w = p[s] * drop[s];
                    const float *vr = v + (b * c->S + s) * kvs + kv_head(c, h) * c->HS;
                    for (size_t d = 0; d < c->HS && w != 0; d++)
                        yr[d] += w * vr[d];
                }
            }
        }
    free(p);
    free(drop);
}

static char g_spname[96]; /* the case's sparse pattern, for the messages */

static void case_name(const acase *c, const char *what, char *out, size_t n)
{
    char shape[32];
    if (g_path == CLF_OPS_PATH_GROUP)
        snprintf(shape, sizeof shape, "tiles");
    else
        snprintf(shape, sizeof shape, "VW %zu", g_vw);
    snprintf(out, n,
             "%s (%s) B=%zu NH=%zu KV=%zu T=%zu S=%zu HS=%zu%s%s%s%s window=%zu p_drop=%g "
             "rel_buckets=%zu rel_k=%zu%s",
             what, shape, c->B, c->NH, acase_kvh(c), c->T, c->S, c->HS, c->causal ? " causal" : "",
             c->cross ? " cross" : "",
             c->masked == 2 ? " segments"
             : c->masked    ? " masked"
                            : "",
             c->alibi ? " alibi" : "", c->window, (double)c->p_drop, c->nb, c->rel_k, g_spname);
}

/* The case's key mask (NULL when unmasked): every fourth key from the
 * second hidden, and the last sequence (of several) sees nothing; with
 * segments (masked 2), each row's documents: ids 1, 2, ... with a new one
 * at about one position in six, the first at a row-dependent place. */
static int32_t *case_keep(const acase *c)
{
    if (!c->masked)
        return NULL;
    int32_t *keep = malloc(c->B * c->S * sizeof *keep);
    TU_CHECK(keep != NULL, "keep mask allocated");
    if (c->masked == 2) {
        for (size_t b = 0; b < c->B; b++) {
            uint32_t x = 0x9E3779B9u * (uint32_t)(b + 1), seg = 1;
            for (size_t s = 0; s < c->S; s++) {
                x = x * 1664525u + 1013904223u;
                if (s > 0 && (x >> 16) % 6 == 0)
                    seg++;
                keep[b * c->S + s] = (int32_t)seg;
            }
        }
        return keep;
    }
    for (size_t b = 0; b < c->B; b++)
        for (size_t s = 0; s < c->S; s++)
            keep[b * c->S + s] = b + 1 < c->B || c->B == 1 ? (s % 4 != 1) : 0;
    return keep;
}

/* The case's relative bias on the host (g_relw, g_relbk) and its tables on
 * the device for a (clf_op_relbias_table); rb, rbk and dw returned for the
 * caller to free. */
static void rel_setup(clf_runtime *rt, const acase *c, clf_attn_fused *a, tu_rng *r, clf_ptr *rb,
                      clf_ptr *rbk, clf_ptr *dw, clf_ptr *dbk)
{
    clf_error err;
    *rb = *rbk = *dw = *dbk = (clf_ptr){NULL, 0};
    if (!c->nb)
        return;
    g_R0 = (c->T > c->S ? c->T : c->S) + 2;
    free(g_relw);
    free(g_relbk);
    g_relw = malloc(c->NH * c->nb * sizeof *g_relw);
    g_relbk = malloc((2 * g_R0 + 1) * sizeof *g_relbk);
    tu_fill(r, g_relw, c->NH * c->nb, -2.0f, 2.0f);
    for (size_t i = 0; i < 2 * g_R0 + 1; i++)
        g_relbk[i] = (int32_t)(tu_u32(r) % c->nb);
    const size_t w = clf_op_relbias_width(c->T, c->S);
    *rb = tu_alloc(rt, c->NH * 2 * w);
    *rbk = tu_alloc(rt, w);
    *dw = tu_upload(rt, g_relw, c->NH * c->nb);
    *dbk = tu_alloc(rt, 2 * g_R0 + 1);
    tu_ok(clf_buffer_write(rt, dbk->buf, dbk->off * 4, g_relbk, (2 * g_R0 + 1) * 4, &err), &err,
          "buckets");
    tu_ok(clf_op_relbias_table(rt, *rb, *rbk, *dw, *dbk, g_R0, c->NH, c->nb, c->T, c->S, &err),
          &err, "relbias_table");
    a->rb = *rb;
    a->rb_w = w;
}

/* Sparse patterns: fresh random blocks (g_rnd) and the block table on the
 * device for a (freed by the caller). */
static clf_ptr sparse_setup(clf_runtime *rt, const acase *c, clf_attn_fused *a, tu_rng *r)
{
    g_spname[0] = '\0';
    if (!c->bs)
        return (clf_ptr){NULL, 0};
    const size_t nb = (c->S + c->bs - 1) / c->bs;
    free(g_rnd);
    g_rnd = malloc((nb * c->rnd + 1) * sizeof *g_rnd);
    clf_attn_sparse_draw(g_rnd, nb, c->rnd, ((uint64_t)tu_u32(r) << 32) | tu_u32(r));
    a->sp = tu_upload_i32(rt, g_rnd, nb * c->rnd + 1);
    a->sp_bs = c->bs;
    a->sp_nb = nb;
    a->sp_R = c->rnd;
    a->glob = c->glob;
    a->stride = c->stride;
    /* the block pairs where some query sees some key, by the definition */
    size_t visited = 0;
    for (size_t qb = 0; qb < nb; qb++)
        for (size_t kb = 0; kb <= qb; kb++) {
            int any = 0;
            for (size_t t = qb * c->bs; t < (qb + 1) * c->bs && t < c->S && !any; t++)
                for (size_t s = kb * c->bs; s < (kb + 1) * c->bs && s <= t && !any; s++)
                    any = (long)s > (long)t - (long)c->window || sparse_sees(c, (long)t, (long)s);
            visited += any;
        }
    snprintf(g_spname, sizeof g_spname,
             " sparse(global %zu, stride %zu, random %zu of %zu; %zu of %zu block pairs)", c->glob,
             c->stride, c->rnd, c->bs, visited, nb * nb);
    return a->sp;
}

/* Shaw's: a random q.r table for the case, on the device for a. */
static clf_ptr shaw_setup(clf_runtime *rt, const acase *c, clf_attn_fused *a, tu_rng *r)
{
    if (!c->rel_k)
        return (clf_ptr){NULL, 0};
    const size_t n = c->B * c->NH * c->T * (2 * c->rel_k + 1);
    free(g_qr);
    g_qr = malloc(n * sizeof *g_qr);
    tu_fill(r, g_qr, n, -1.5f, 1.5f);
    a->qr = tu_upload(rt, g_qr, n);
    a->qr_w = 2 * c->rel_k + 1;
    a->rel_k = c->rel_k;
    return a->qr;
}

static void rel_free(clf_ptr rb, clf_ptr rbk, clf_ptr dw, clf_ptr dbk)
{
    if (rb.buf != NULL) {
        tu_free(rb);
        tu_free(rbk);
        tu_free(dw);
        tu_free(dbk);
    }
}

/* The op's descriptor for the case, float32 (tests/attn_case.h). */
static clf_attn_fused case_desc(const acase *c, clf_ptr y, clf_ptr lse, clf_ptr q, clf_ptr kv,
                                clf_ptr keep, size_t ys)
{
    return acase_desc(c, CLF_DT_F32, y, lse, q, kv, keep, ys, DROP_SEED, DROP_STREAM);
}

static void run(clf_runtime *rt, const acase *c, tu_rng *r)
{
    const size_t C = c->NH * c->HS, ys = C + 3, KVH = acase_kvh(c);
    /* self: one [B, T, C + 2 KC] qkv (S = T); cross: q [B, T, C], kv [B, S, 2 KC] */
    const size_t qs = acase_qs(c), kvs = acase_kvs(c);
    const size_t nq = c->B * c->T * qs, nkv = c->cross ? c->B * c->S * kvs : 0;
    float *qh = malloc(nq * sizeof *qh), *kvh = malloc((nkv ? nkv : 1) * sizeof *kvh);
    tu_fill(r, qh, nq, -1.5f, 1.5f);
    if (nkv)
        tu_fill(r, kvh, nkv, -1.5f, 1.5f);
    const float *kvb = c->cross ? kvh : qh;
    const float *kh = kvb + acase_kcol(c), *vh = kvb + acase_vcol(c);
    int32_t *keep = case_keep(c);
    const size_t ny = c->B * c->T * ys, nl = c->B * c->NH * c->T;
    float *yh = malloc(ny * sizeof *yh), *y2 = malloc(ny * sizeof *y2), *lh = malloc(nl * 4);
    float *l2 = malloc(nl * 4), *init = malloc(ny * sizeof *init);
    for (size_t i = 0; i < ny; i++)
        init[i] = GUARD;
    clf_ptr dq = tu_upload(rt, qh, nq), dkv = nkv ? tu_upload(rt, kvh, nkv) : dq;
    clf_ptr dy = tu_upload(rt, init, ny), dl = tu_alloc(rt, nl);
    clf_ptr dk = tu_alloc(rt, c->masked ? c->B * c->S : 1);
    clf_error err;
    if (c->masked)
        tu_ok(clf_buffer_write(rt, dk.buf, dk.off * 4, keep, c->B * c->S * 4, &err), &err, "keep");
    clf_attn_fused a = case_desc(c, dy, dl, dq, dkv, dk, ys);
    clf_ptr rb, rbk, rw, rbkt;
    rel_setup(rt, c, &a, r, &rb, &rbk, &rw, &rbkt);
    const clf_ptr sq = shaw_setup(rt, c, &a, r);
    const clf_ptr spd = sparse_setup(rt, c, &a, r);
    tu_ok(clf_op_attn_fused_forward_ex(rt, g_path, &a, &err), &err, "attn_fused_forward");
    tu_download(rt, dy, yh, ny);
    tu_download(rt, dl, lh, nl);
    /* a rerun's bits: on the devices; under a checking simulator (tu_checker) its
     * time goes to what the simulator checks (races, bounds, barriers) */
    const int rerun = !tu_checker();
    if (rerun) {
        tu_ok(clf_op_attn_fused_forward_ex(rt, g_path, &a, &err), &err, "attn_fused_forward again");
        tu_download(rt, dy, y2, ny);
        tu_download(rt, dl, l2, nl);
    }
    double *yr = malloc(c->B * c->T * C * sizeof *yr), *lr = malloc(nl * sizeof *lr);
    reference(c, qh, qs, kh, vh, kvs, keep, NULL, yr, lr);
    /* y's head columns against the reference, the guards untouched */
    float *yc = malloc(c->B * c->T * C * sizeof *yc);
    int guards = 1;
    for (size_t row = 0; row < c->B * c->T; row++) {
        memcpy(yc + row * C, yh + row * ys, C * sizeof *yc);
        for (size_t j = C; j < ys; j++)
            guards &= yh[row * ys + j] == GUARD;
    }
    char name[320];
    case_name(c, "fused attention", name, sizeof name);
    tu_close(name, yc, yr, c->B * c->T * C, 2e-5, 1e-4);
    /* lse: finite ones close, empty rows -inf exactly */
    int lse_ok = 1;
    double worst = 0;
    for (size_t i = 0; i < nl; i++) {
        if (isinf(lr[i])) {
            lse_ok &= isinf(lh[i]) && lh[i] < 0;
            continue;
        }
        double e = fabs((double)lh[i] - lr[i]);
        worst = fmax(worst, e);
        lse_ok &= e <= 1e-4 + 1e-5 * fabs(lr[i]);
    }
    TU_CHECK(lse_ok, "%s: lse (worst error %.2e; empty rows -inf)", name, worst);
    TU_CHECK(guards, "%s: columns past the heads untouched", name);
    if (rerun)
        TU_CHECK(memcmp(yh, y2, ny * sizeof *yh) == 0 && memcmp(lh, l2, nl * 4) == 0,
                 "%s: reruns are bit-identical", name);
    if (g_probs) {
        /* the probabilities of the first sequence (clf_op_attn_probs: the
         * same forward with identity values), dropout aside */
        const size_t np = c->NH * c->T * c->S;
        float *ph = malloc(np * sizeof *ph);
        double *pr = malloc(np * sizeof *pr), *drop = malloc(c->S * sizeof *drop);
        for (size_t h = 0; h < c->NH; h++)
            for (size_t t = 0; t < c->T; t++)
                row_probs(c, qh, qs, kh, kvs, keep, 0, h, t, pr + (h * c->T + t) * c->S, drop);
        tu_ok(clf_op_attn_probs(rt, &a, ph, &err), &err, "attn_probs");
        char pname[360];
        snprintf(pname, sizeof pname, "%s: probabilities", name);
        tu_close(pname, ph, pr, np, 2e-6, 1e-4);
        free(ph);
        free(pr);
        free(drop);
    }
    if (c->cross) {
        /* the same keys and values in KV caches [B, KVH, Tmax, HS] */
        const size_t Tmax = c->S + 3, nc = c->B * KVH * Tmax * c->HS;
        float *kc = calloc(nc, sizeof *kc), *vc = calloc(nc, sizeof *vc);
        for (size_t b = 0; b < c->B; b++)
            for (size_t h = 0; h < KVH; h++)
                for (size_t t = 0; t < c->S; t++)
                    for (size_t d = 0; d < c->HS; d++) {
                        size_t src = (b * c->S + t) * kvs + h * c->HS + d;
                        size_t dst = ((b * KVH + h) * Tmax + t) * c->HS + d;
                        kc[dst] = kh[src];
                        vc[dst] = vh[src];
                    }
        clf_ptr dkc = tu_upload(rt, kc, nc), dvc = tu_upload(rt, vc, nc);
        clf_attn_fused ac = a;
        ac.k = dkc;
        ac.v = dvc;
        ac.kv_stride = c->HS;
        ac.kv_head_stride = Tmax * c->HS;
        ac.kv_batch_stride = KVH * Tmax * c->HS;
        tu_ok(clf_op_attn_fused_forward_ex(rt, g_path, &ac, &err), &err,
              "attn_fused_forward (cache)");
        tu_download(rt, dy, y2, ny);
        tu_download(rt, dl, l2, nl);
        TU_CHECK(memcmp(yh, y2, ny * sizeof *yh) == 0 && memcmp(lh, l2, nl * 4) == 0,
                 "%s: keys and values read from KV caches give the same bits", name);
        tu_free(dkc);
        tu_free(dvc);
        free(kc);
        free(vc);
    }
    rel_free(rb, rbk, rw, rbkt);
    if (sq.buf != NULL)
        tu_free(sq);
    if (spd.buf != NULL)
        tu_free(spd);
    tu_free(dq);
    if (nkv)
        tu_free(dkv);
    tu_free(dy);
    tu_free(dl);
    tu_free(dk);
    free(qh);
    free(kvh);
    free(keep);
    free(yh);
    free(y2);
    free(lh);
    free(l2);
    free(init);
    free(yr);
    free(lr);
    free(yc);
}

/* float64 analytic gradient of sum(dy * y) (dy [B, T, C]) into dq [B, T, C],
 * dk, dv [B, S, KC] (a K/V head's gradient sums its query heads'). */
static void reference_grad(const acase *c, const float *q, size_t qs, const float *k,
                           const float *v, size_t kvs, const int32_t *keep, const float *dy,
                           double *dq, double *dk, double *dv, double *dw, double *dqr)
{
    const size_t W = 2 * c->rel_k + 1;
    if (c->rel_k)
        memset(dqr, 0, c->B * c->NH * c->T * W * sizeof *dqr);
    if (c->nb)
        memset(dw, 0, c->NH * c->nb * sizeof *dw);
    const size_t C = c->NH * c->HS, HS = c->HS, KC = acase_kc(c);
    const double scale = 1.0 / sqrt((double)HS);
    double *p = malloc(c->S * sizeof *p), *dp = malloc(c->S * sizeof *dp);
    double *drop = malloc(c->S * sizeof *drop);
    memset(dq, 0, c->B * c->T * C * sizeof *dq);
    memset(dk, 0, c->B * c->S * KC * sizeof *dk);
    memset(dv, 0, c->B * c->S * KC * sizeof *dv);
    for (size_t b = 0; b < c->B; b++)
        for (size_t h = 0; h < c->NH; h++)
            for (size_t t = 0; t < c->T; t++) {
                const float *qr = q + (b * c->T + t) * qs + h * HS;
                const float *g = dy + (b * c->T + t) * C + h * HS;
                const size_t kh = kv_head(c, h);
                if (row_probs(c, q, qs, k, kvs, keep, b, h, t, p, drop) == -INFINITY)
                    continue;
                double D = 0;
                for (size_t s = 0; s < c->S; s++) {
                    dp[s] = 0;
                    for (size_t d = 0; d < HS; d++)
                        dp[s] += (double)g[d] * v[(b * c->S + s) * kvs + kh * HS + d];
                    dp[s] *= drop[s];
                    D += p[s] * dp[s];
                }
                const long tq = (long)t + (long)c->S - (long)c->T;
                for (size_t s = 0; s < c->S; s++) {
                    double ds = p[s] * (dp[s] - D);
                    if (c->nb)
                        dw[h * c->nb + (size_t)g_relbk[(long)g_R0 + (long)s - tq]] += ds;
                    if (c->rel_k)
                        dqr[((b * c->NH + h) * c->T + t) * W + rel_c(c, (long)s - tq)] += ds;
                    for (size_t d = 0; d < HS; d++) {
                        dq[(b * c->T + t) * C + h * HS + d] +=
                            scale * ds * k[(b * c->S + s) * kvs + kh * HS + d];
                        dk[(b * c->S + s) * KC + kh * HS + d] += scale * ds * qr[d];
                        dv[(b * c->S + s) * KC + kh * HS + d] += p[s] * drop[s] * g[d];
                    }
                }
            }
    free(p);
    free(dp);
    free(drop);
}

/* sum(dy * y) of the float64 forward on host copies, over the rows sel
 * names: where only those depend on an input, the differences of this sum
 * are those of the whole one. */
static double objective(const acase *c, const float *q, size_t qs, const float *k, const float *v,
                        size_t kvs, const int32_t *keep, const float *dy, const rowsel *sel)
{
    const size_t C = c->NH * c->HS, HS = c->HS, n = c->B * c->T * C;
    double *y = malloc(n * sizeof *y), *lse = malloc(c->B * c->NH * c->T * sizeof *lse), f = 0;
    reference(c, q, qs, k, v, kvs, keep, sel, y, lse);
    for (size_t i = 0; i < n; i++)
        if (row_in(c, sel, i / (c->T * C), i % C / HS))
            f += dy[i] * y[i];
    free(y);
    free(lse);
    return f;
}

/* The float64 gradients grads (of q, k, v, the T5 table and the Shaw rows,
 * as reference_grad gives them) against central differences of
 * objective() at 3 sampled coordinates each (step 1e-2, |error| <= 2e-3
 * (1 + |g|)). q, k, v in the case's layouts (k, v inside q for
 * self-attention). */
static void check_fd(const acase *c, float *qh, float *kh, float *vh, const int32_t *keep,
                     const float *dyh, const double *const *grads, const char *name, tu_rng *r)
{
    const size_t C = c->NH * c->HS, KC = acase_kc(c), qs = acase_qs(c), kvs = acase_kvs(c);
    float *arrays[5] = {qh, kh, vh, g_relw, g_qr};
    const size_t W = 2 * c->rel_k + 1;
    const size_t strides[5] = {qs, kvs, kvs, c->nb, W},
                 rows[5] = {c->B * c->T, c->B * c->S, c->B * c->S, c->NH, c->B * c->NH * c->T};
    double worst = 0;
    int fd_ok = 1;
    for (int which = 0; which < 5; which++)
        for (int sample = 0; sample < 3; sample++) {
            if ((which == 3 && !c->nb) || (which == 4 && !c->rel_k))
                continue;
            const size_t width = which == 0 ? C : which == 3 ? c->nb : which == 4 ? W : KC;
            size_t row = (size_t)tu_u32(r) % rows[which], col = (size_t)tu_u32(r) % width;
            float *x = arrays[which] + row * strides[which] + col, x0 = *x;
            /* the output rows the coordinate reaches: a query's row (q,
             * the q.r rows), a K/V head's query heads in the key's sequence
             * (k, v), a bias head's rows in every sequence */
            const rowsel sel = which == 0   ? (rowsel){(long)(row / c->T), col / c->HS, 0}
                               : which <= 2 ? (rowsel){(long)(row / c->S), col / c->HS, 1}
                               : which == 3
                                   ? (rowsel){-1, row, 0}
                                   : (rowsel){(long)(row / (c->NH * c->T)), row / c->T % c->NH, 0};
            const float e = 1e-2f;
            *x = x0 + e;
            double fp = objective(c, qh, qs, kh, vh, kvs, keep, dyh, &sel);
            *x = x0 - e;
            double fm = objective(c, qh, qs, kh, vh, kvs, keep, dyh, &sel);
            *x = x0;
            double num = (fp - fm) / (2.0 * (double)e), an = grads[which][row * width + col];
            double err_ = fabs(num - an);
            worst = fmax(worst, err_);
            fd_ok &= err_ <= 2e-3 + 2e-3 * fabs(an);
        }
    TU_CHECK(fd_ok, "%s: the float64 gradient matches central differences (worst %.2e)", name,
             worst);
}

static void run_backward(clf_runtime *rt, const acase *c, tu_rng *r)
{
    const size_t C = c->NH * c->HS, ys = C, KC = acase_kc(c);
    const size_t qs = acase_qs(c), kvs = acase_kvs(c);
    const size_t nq = c->B * c->T * qs, nkv = c->cross ? c->B * c->S * kvs : 0;
    float *qh = malloc(nq * sizeof *qh), *kvh = malloc((nkv ? nkv : 1) * sizeof *kvh);
    tu_fill(r, qh, nq, -1.5f, 1.5f);
    if (nkv)
        tu_fill(r, kvh, nkv, -1.5f, 1.5f);
    float *kvb = c->cross ? kvh : qh;
    float *kh = kvb + acase_kcol(c), *vh = kvb + acase_vcol(c);
    int32_t *keep = case_keep(c);
    const size_t ny = c->B * c->T * C, nl = c->B * c->NH * c->T;
    float *dyh = malloc(ny * sizeof *dyh);
    tu_fill(r, dyh, ny, -1, 1);
    clf_ptr dq = tu_upload(rt, qh, nq), dkv = nkv ? tu_upload(rt, kvh, nkv) : dq;
    clf_ptr dy = tu_upload(rt, dyh, ny), y = tu_alloc(rt, ny), lse = tu_alloc(rt, nl);
    clf_ptr dsum = tu_alloc(rt, nl), dkeep = tu_alloc(rt, c->masked ? c->B * c->S : 1);
    /* gradients in the model's layouts: one dqkv, or dq and a dkv */
    const size_t ngq = c->B * c->T * qs, ngkv = c->cross ? c->B * c->S * kvs : 0;
    clf_ptr gq = tu_alloc(rt, ngq), gkv = ngkv ? tu_alloc(rt, ngkv) : gq;
    clf_error err;
    if (c->masked)
        tu_ok(clf_buffer_write(rt, dkeep.buf, dkeep.off * 4, keep, c->B * c->S * 4, &err), &err,
              "keep");
    clf_attn_fused a = case_desc(c, y, lse, dq, dkv, dkeep, ys);
    clf_attn_fused_grad g = acase_grad(c, dy, gq, gkv, dsum);
    clf_ptr rb, rbk, rw, rbkt, drb = {NULL, 0}, dqrd = {NULL, 0};
    rel_setup(rt, c, &a, r, &rb, &rbk, &rw, &rbkt);
    const clf_ptr sq = shaw_setup(rt, c, &a, r);
    const clf_ptr spd = sparse_setup(rt, c, &a, r);
    const size_t nqr = c->B * c->NH * c->T * (2 * c->rel_k + 1);
    if (c->rel_k) {
        dqrd = tu_alloc(rt, nqr);
        g.dqr = dqrd;
    }
    if (c->nb) {
        drb = tu_alloc(rt, c->B * c->T * c->NH * c->nb);
        g.rbk = rbk;
        g.drb = drb;
        g.nbk = c->nb;
    }
    /* grouped: the per-query-head shares before the group sums */
    clf_ptr full = tu_alloc(rt, c->B * c->S * 2 * C);
    if (KC < C)
        g.dkv_full = full;
    tu_ok(clf_op_attn_fused_forward_ex(rt, g_path, &a, &err), &err, "forward");
    tu_ok(clf_op_attn_fused_backward_ex(rt, g_path, &a, &g, &err), &err, "backward");
    float *gqh = malloc(ngq * sizeof *gqh), *gkvh = malloc((ngkv ? ngkv : 1) * sizeof *gkvh);
    float *again = malloc(ngq * sizeof *again);
    tu_download(rt, gq, gqh, ngq);
    if (ngkv)
        tu_download(rt, gkv, gkvh, ngkv);
    const int rerun = !tu_checker(); /* as in run() */
    if (rerun) {
        tu_ok(clf_op_attn_fused_backward_ex(rt, g_path, &a, &g, &err), &err, "backward again");
        tu_download(rt, gq, again, ngq);
    }
    const size_t nk = c->B * c->S * KC;
    double *rq = malloc(ny * sizeof *rq), *rk = malloc(nk * sizeof *rk), *rv = malloc(nk * 8);
    const size_t nw = c->NH * (c->nb ? c->nb : 1);
    double *rw_ = malloc(nw * sizeof *rw_), *rqr = malloc((nqr ? nqr : 1) * sizeof *rqr);
    reference_grad(c, qh, qs, kh, vh, kvs, keep, dyh, rq, rk, rv, rw_, rqr);
    /* gather the device gradients out of their layouts */
    float *oq = malloc(ny * 4), *ok_ = malloc(nk * 4), *ov = malloc(nk * 4);
    const float *gkb = c->cross ? gkvh : gqh;
    const float *gk = gkb + acase_kcol(c), *gv = gkb + acase_vcol(c);
    for (size_t row = 0; row < c->B * c->T; row++)
        memcpy(oq + row * C, gqh + row * qs, C * 4);
    for (size_t row = 0; row < c->B * c->S; row++) {
        memcpy(ok_ + row * KC, gk + row * kvs, KC * 4);
        memcpy(ov + row * KC, gv + row * kvs, KC * 4);
    }
    char name[320];
    case_name(c, "fused attention backward", name, sizeof name);
    char nm[340];
    snprintf(nm, sizeof nm, "%s dq", name);
    tu_close(nm, oq, rq, ny, 5e-5, 5e-4);
    snprintf(nm, sizeof nm, "%s dk", name);
    tu_close(nm, ok_, rk, nk, 5e-5, 5e-4);
    snprintf(nm, sizeof nm, "%s dv", name);
    tu_close(nm, ov, rv, nk, 5e-5, 5e-4);
    if (rerun)
        TU_CHECK(memcmp(gqh, again, ngq * 4) == 0, "%s: reruns are bit-identical", name);
    if (c->nb) {
        /* the bias table's gradient: the column sums of drb [B*T, NH*nb] */
        const size_t rows_ = c->B * c->T, cols = c->NH * c->nb;
        float *dh = malloc(rows_ * cols * sizeof *dh), *gw = calloc(cols, sizeof *gw);
        tu_download(rt, drb, dh, rows_ * cols);
        for (size_t i = 0; i < rows_; i++)
            for (size_t j = 0; j < cols; j++)
                gw[j] += dh[i * cols + j];
        snprintf(nm, sizeof nm, "%s d(relative bias)", name);
        tu_close(nm, gw, rw_, cols, 1e-4, 5e-4);
        free(dh);
        free(gw);
    }
    if (c->rel_k) {
        float *gqr = malloc(nqr * sizeof *gqr);
        tu_download(rt, dqrd, gqr, nqr);
        snprintf(nm, sizeof nm, "%s d(q.r rows)", name);
        tu_close(nm, gqr, rqr, nqr, 5e-5, 5e-4);
        free(gqr);
    }
    if (c->causal && c->S == c->T && !c->masked && c->p_drop == 0) {
        /* query 0 sees key 0 alone: p = 1, y = v, so dp - D and its dq are 0
         * exactly when D = dy.y is summed as dp = dy.v is (the kernels' own
         * rounding noise there is what Adam would amplify into weight steps) */
        int zero = 1;
        for (size_t b = 0; b < c->B; b++)
            for (size_t j = 0; j < C; j++)
                zero &= oq[b * c->T * C + j] == 0.0f;
        TU_CHECK(zero, "%s: dq of the first query (one key in sight) is exactly 0", name);
    }
    /* the float64 gradient against central differences, at sampled coordinates */
    const double *grads[5] = {rq, rk, rv, rw_, rqr};
    check_fd(c, qh, kh, vh, keep, dyh, grads, name, r);
    rel_free(rb, rbk, rw, rbkt);
    if (drb.buf != NULL)
        tu_free(drb);
    if (sq.buf != NULL) {
        tu_free(sq);
        tu_free(dqrd);
    }
    if (spd.buf != NULL)
        tu_free(spd);
    free(rw_);
    free(rqr);
    tu_free(dq);
    if (nkv)
        tu_free(dkv);
    tu_free(dy);
    tu_free(y);
    tu_free(lse);
    tu_free(dsum);
    tu_free(dkeep);
    tu_free(full);
    tu_free(gq);
    if (ngkv)
        tu_free(gkv);
    free(qh);
    free(kvh);
    free(keep);
    free(dyh);
    free(gqh);
    free(gkvh);
    free(again);
    free(rq);
    free(rk);
    free(rv);
    free(oq);
    free(ok_);
    free(ov);
}

/* Shaw's q.r rows and their backward (clf_op_rel_qr, clf_op_rel_qr_backward)
 * against float64: q as heads inside rows of a fused qkv, dq the same
 * layout starting from random values (the op adds), dr accumulated onto
 * random values. atol 2e-5, rtol 1e-4 (dot products of HS, sums of B NH T). */
static void check_rel_qr(clf_runtime *rt, size_t B, size_t NH, size_t T, size_t HS, size_t k,
                         tu_rng *r)
{
    const size_t W = 2 * k + 1, rs = 3 * NH * HS + 5, nq = B * T * rs, nqr = B * NH * T * W;
    const float scale = (float)(1.0 / sqrt((double)HS));
    float *q = malloc(nq * 4), *dq = malloc(nq * 4), *rr = malloc(W * HS * 4);
    float *dr = malloc(W * HS * 4), *dqr = malloc(nqr * 4);
    float *got = malloc((nq > W * HS ? nq : W * HS) * 4);
    tu_fill(r, q, nq, -1, 1);
    tu_fill(r, dq, nq, -1, 1);
    tu_fill(r, rr, W * HS, -1, 1);
    tu_fill(r, dr, W * HS, -1, 1);
    tu_fill(r, dqr, nqr, -1, 1);
    clf_ptr dq_q = tu_upload(rt, q, nq), dq_dq = tu_upload(rt, dq, nq),
            dr_ = tu_upload(rt, rr, W * HS);
    clf_ptr d_dr = tu_upload(rt, dr, W * HS), d_dqr = tu_upload(rt, dqr, nqr),
            d_qr = tu_alloc(rt, nqr);
    const clf_heads hq = {dq_q, CLF_DT_F32, B, T, NH, HS, rs},
                    hd = {dq_dq, CLF_DT_F32, B, T, NH, HS, rs};
    clf_error err;
    tu_ok(clf_op_rel_qr(rt, d_qr, &hq, dr_, W, scale, &err), &err, "rel_qr");
    tu_ok(clf_op_rel_qr_backward(rt, &hd, d_dr, &hq, dr_, d_dqr, W, scale, &err), &err,
          "rel_qr_backward");
    const size_t nref = nq > nqr ? (nq > W * HS ? nq : W * HS) : (nqr > W * HS ? nqr : W * HS);
    double *ref = malloc(nref * sizeof *ref);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < NH; h++)
            for (size_t t = 0; t < T; t++)
                for (size_t c = 0; c < W; c++) {
                    double a = 0;
                    for (size_t d = 0; d < HS; d++)
                        a += (double)q[(b * T + t) * rs + h * HS + d] * rr[c * HS + d];
                    ref[((b * NH + h) * T + t) * W + c] = scale * a;
                }
    float *g = malloc(nqr * 4);
    tu_download(rt, d_qr, g, nqr);
    char name[96];
    snprintf(name, sizeof name, "rel_qr B=%zu NH=%zu T=%zu HS=%zu k=%zu", B, NH, T, HS, k);
    tu_close(name, g, ref, nqr, 2e-5, 1e-4);
    for (size_t i = 0; i < nq; i++)
        ref[i] = dq[i];
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            for (size_t h = 0; h < NH; h++)
                for (size_t d = 0; d < HS; d++) {
                    double a = 0;
                    for (size_t c = 0; c < W; c++)
                        a += (double)dqr[((b * NH + h) * T + t) * W + c] * rr[c * HS + d];
                    ref[(b * T + t) * rs + h * HS + d] += scale * a;
                }
    tu_download(rt, dq_dq, got, nq);
    snprintf(name, sizeof name, "rel_qr backward dq (added; the rest of the rows untouched) T=%zu",
             T);
    tu_close(name, got, ref, nq, 2e-5, 1e-4);
    for (size_t c = 0; c < W; c++)
        for (size_t d = 0; d < HS; d++) {
            double a = 0;
            for (size_t b = 0; b < B; b++)
                for (size_t h = 0; h < NH; h++)
                    for (size_t t = 0; t < T; t++)
                        a += (double)dqr[((b * NH + h) * T + t) * W + c] *
                             q[(b * T + t) * rs + h * HS + d];
            ref[c * HS + d] = dr[c * HS + d] + scale * a;
        }
    tu_download(rt, d_dr, got, W * HS);
    snprintf(name, sizeof name, "rel_qr backward dr (accumulated) T=%zu", T);
    tu_close(name, got, ref, W * HS, 2e-5, 1e-4);
    tu_free(dq_q);
    tu_free(dq_dq);
    tu_free(dr_);
    tu_free(d_dr);
    tu_free(d_dqr);
    tu_free(d_qr);
    free(q);
    free(dq);
    free(rr);
    free(dr);
    free(dqr);
    free(got);
    free(g);
    free(ref);
}

/* Every case on a runtime whose flash program has FA_VW = vw (0: the
 * device's own choice): in the blocked kernels if items, in the tiles if
 * tiles; with quarter 1 to 4, the blocked kernels take only the cases i
 * with i % 4 == quarter - 1 (the tiles still take every case). */
static size_t run_all(size_t vw, int items, int tiles, int quarter, tu_rng *r)
{
    clf_runtime *rt = tu_runtime();
    clf_error err;
    if (vw) {
        char defs[64];
        snprintf(defs, sizeof defs, "#define FA_VW %zu\n", vw);
        tu_ok(clf_program_set_defines(rt, "flash", defs, &err), &err, "FA_VW");
    }
    clf_kernel *k = NULL;
    tu_ok(clf_kernel_get(rt, "flash", "attn_flash_vw", &k, &err), &err, "attn_flash_vw");
    g_vw = clf_kernel_required_group(k);
    TU_CHECK(vw == 0 || g_vw == vw, "the program reports FA_VW %zu (asked %zu)", g_vw, vw);
    const int sim = tu_simulator();
    const acase cases[] = {
        /* B NH T S HS causal cross masked window alibi p_drop */
        {1, 1, 1, 1, 16, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 2, 2, 2, 16, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 3, 37, 37, 32, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 2, 37, 37, 96, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 2, 37, 53, 64, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 2, 5, 29, 16, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 1, 64, 64, 128, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {3, 2, 11, 13, 24, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 2, 257, 257, 32, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 1, 1000, 1000, 16, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        /* sliding windows (in and out of tile alignment), ALiBi, dropout */
        {2, 2, 64, 64, 32, 1, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 2, 37, 45, 16, 1, 1, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 3, 37, 37, 32, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 3, 29, 29, 16, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 2, 37, 37, 32, 1, 0, 0, 0, 0, 0.2f, 0, 0, 0, 0, 0, 0, 0},
        {2, 2, 21, 33, 16, 0, 1, 1, 0, 0, 0.3f, 0, 0, 0, 0, 0, 0, 0},
        {1, 4, 45, 45, 32, 1, 0, 1, 9, 1, 0.1f, 0, 0, 0, 0, 0, 0, 0},
        {1, 1, 30, 30, 256, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        /* past one chunk of 128 keys / queries (the cl/flash/ family's FA_CH): dropout,
         * a keep mask, a window spanning two chunks with ALiBi */
        {1, 2, 150, 150, 32, 1, 0, 0, 0, 0, 0.2f, 0, 0, 0, 0, 0, 0, 0},
        {2, 2, 140, 300, 16, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 2, 300, 300, 16, 1, 0, 0, 140, 1, 0, 0, 0, 0, 0, 0, 0, 0},
        /* grouped-query attention: 2 and 4 query heads to a K/V head (1 K/V
         * head: multi-query), self and cross, with a mask, a window, ALiBi
         * and dropout, past one chunk */
        {2, 4, 37, 37, 32, 1, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0},
        {1, 4, 29, 29, 16, 0, 0, 1, 0, 1, 0.2f, 1, 0, 0, 0, 0, 0, 0},
        {2, 6, 21, 33, 16, 0, 1, 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0},
        {1, 4, 45, 45, 32, 1, 0, 0, 9, 0, 0.1f, 2, 0, 0, 0, 0, 0, 0},
        {1, 4, 150, 150, 16, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0},
        /* a relative position bias (positional.type t5): causal and both
         * ways with a keep mask, a window with grouped heads, dropout past
         * one chunk, the most buckets the backward sums */
        {2, 3, 37, 37, 32, 1, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0},
        {1, 2, 29, 29, 16, 0, 0, 1, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0},
        {1, 4, 45, 45, 32, 1, 0, 0, 9, 0, 0, 2, 5, 0, 0, 0, 0, 0},
        {1, 2, 150, 150, 16, 1, 0, 0, 0, 0, 0.2f, 0, 32, 0, 0, 0, 0, 0},
        {2, 2, 21, 21, 16, 0, 0, 1, 0, 0, 0, 0, 64, 0, 0, 0, 0, 0},
        /* Shaw's relative positions: clipped distances past and within the
         * rows, both ways with a keep mask, grouped heads with dropout past
         * one chunk, the widest clip */
        {2, 3, 37, 37, 32, 1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0},
        {1, 2, 29, 29, 16, 0, 0, 1, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0},
        {1, 4, 150, 150, 16, 1, 0, 0, 0, 0, 0.2f, 2, 0, 16, 0, 0, 0, 0},
        {1, 2, 21, 21, 16, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0, 0, 0},
        /* packed documents (segments): causal and both ways, a window with
         * ALiBi, dropout and grouped heads past one chunk, with either kind
         * of relative position */
        {2, 3, 37, 37, 32, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 2, 29, 29, 16, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 4, 150, 150, 16, 1, 0, 2, 9, 1, 0.2f, 2, 0, 0, 0, 0, 0, 0},
        {2, 2, 45, 45, 16, 1, 0, 2, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0},
        {2, 2, 45, 45, 16, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0},
        /* sparse patterns beside a window: global keys, a stride, random
         * blocks, each alone and together, blocks of 16 and 32, with a
         * keep mask, ALiBi, dropout and grouped heads, past one chunk */
        {1, 2, 100, 100, 16, 1, 0, 0, 5, 0, 0, 0, 0, 0, 3, 0, 0, 16},
        {2, 2, 70, 70, 16, 1, 0, 0, 4, 0, 0, 0, 0, 0, 0, 7, 0, 16},
        {1, 2, 130, 130, 16, 1, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0, 2, 16},
        {1, 4, 300, 300, 16, 1, 0, 1, 9, 1, 0.2f, 2, 0, 0, 2, 11, 2, 32},
        {2, 3, 150, 150, 32, 1, 0, 0, 16, 0, 0, 0, 0, 0, 4, 32, 1, 64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int blocked = items && (quarter == 0 || i % 4 == (size_t)quarter - 1);
        if (!blocked && !tiles)
            continue;
        acase c = cases[i];
        if (sim && c.T * c.S * c.HS > 40000) { /* an eighth, or a sixteenth past 80000 */
            const size_t f = (c.T / 8) * (c.S / 8) * c.HS > 80000 ? 16 : 8;
            c.T = c.T / f > 0 ? c.T / f : 1, c.S = c.cross ? c.S / f + 1 : c.T;
        }
        if (blocked) {
            g_path = CLF_OPS_PATH_ITEM;
            run(rt, &c, r);
            run_backward(rt, &c, r);
        }
        if (tiles) {
            g_path = CLF_OPS_PATH_GROUP;
            run(rt, &c, r);
            run_backward(rt, &c, r);
        }
    }
    g_path = CLF_OPS_PATH_ITEM;
    clf_ptr a = tu_alloc(rt, 64);
    clf_attn_fused bad = {.y = a,
                          .lse = a,
                          .q = a,
                          .k = a,
                          .v = a,
                          .y_stride = 4,
                          .q_stride = 4,
                          .kv_stride = 4,
                          .B = 1,
                          .NH = 1,
                          .T = 3,
                          .S = 2,
                          .HS = 4,
                          .causal = 1,
                          .scale = 1.0f};
    TU_CHECK(clf_op_attn_fused_forward(rt, &bad, &err) == CLF_ERR_ARG,
             "causal with more queries than keys is refused: %s", err.msg);
    bad.causal = 0;
    bad.HS = 300;
    TU_CHECK(clf_op_attn_fused_forward(rt, &bad, &err) == CLF_ERR_ARG,
             "a head size over 256 is refused");
    bad.HS = 4;
    bad.window = 2;
    TU_CHECK(clf_op_attn_fused_forward(rt, &bad, &err) == CLF_ERR_ARG,
             "a window without causal attention is refused: %s", err.msg);
    bad.window = 0;
    bad.p_drop = 1.5f;
    TU_CHECK(clf_op_attn_fused_forward(rt, &bad, &err) == CLF_ERR_ARG,
             "a dropout probability over 1 is refused: %s", err.msg);
    tu_free(a);
    clf_runtime_destroy(rt);
    return g_vw;
}

int main(void)
{
    tu_rng r = tu_rng_new(31);
    /* the blocked kernels in the device's width and the tiles, then the
     * blocked kernels in every other width cl/flash/ has (16 rows: AVX-512;
     * 8: AVX2; 4; 1: one row per work-item), each with its own product
     * blocking (the cl/flash/ family's FA_PR x FA_PN) */
    clf_runtime *probe = tu_runtime();
    const int serial = clf_runtime_device(probe)->serial_groups;
    clf_runtime_destroy(probe);
    if (tu_own_shape() && !serial) { /* the tiles alone */
        printf("(the blocked kernels: not here, CLFORMER_TEST_OWN_SHAPE=1)\n");
        g_probs = 1;
        run_all(0, 0, 1, 0, &r);
        return tu_finish();
    }
    {
        clf_runtime *rt = tu_runtime();
        check_rel_qr(rt, 2, 3, 17, 16, 4, &r);
        check_rel_qr(rt, 1, 2, 5, 32, 64, &r);
        clf_runtime_destroy(rt);
    }
    /* Under a simulator (tu_simulator(): Oclgrind, hundreds of times
     * slower) each of the four widths, the device's first, takes a quarter
     * of the cases: every case still runs in the tiles (the kernels whose
     * local memory and barriers the simulator checks) and in one width. */
    const int sim = tu_simulator();
    g_probs = 1;
    const size_t vw = run_all(0, 1, 1, sim ? 1 : 0, &r);
    g_probs = 0;
    static const size_t widths[] = {16, 8, 4, 1};
    int other = 0;
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        if (widths[i] != vw)
            run_all(widths[i], 1, 0, sim ? 2 + other++ % 3 : 0, &r);
    return tu_finish();
}
