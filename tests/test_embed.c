/*
 * test_embed.c - token embedding, learned and sinusoidal positions, RoPE
 * (cl/embed.cl, model/ops/embed.c) against float64 references.
 *
 * Checks (sizes include 1 and values that are no multiple of a work-group),
 * embedding and RoPE both through the ops (the device's work split) and
 * with the kernels launched with the GPU's split (one element per work-item,
 * one batch row per work-item):
 * - embed forward: out = scale*wte[tok] (+ wpe[pos0+t]), with and without the
 *   learned table, scale 1 and sqrt(C); atol 1e-6, rtol 1e-6 (one multiply
 *   and one add in float). Operands sit at nonzero element offsets.
 * - embed backward: dwte/dwpe accumulate onto random initial values; atol
 *   1e-5, rtol 1e-5 (sums of at most ~200 terms of size 1 in float). Small V
 *   makes many repeated tokens. Then central finite differences in float64 of
 *   the host reference L = sum(G * forward(wte, wpe)) at sampled entries of
 *   wte and wpe against the device gradient for dout = G (atol 1e-5).
 * - sinusoid_add against the paper's formula in float64; the device works in
 *   float32 like PyTorch, whose angle error grows with the position, so
 *   atol = 2e-6 + 1e-6 * max position; plus one exact-at-small-position check.
 * - rope forward and inverse against float64 rotate_half with HF's angles, on
 *   q and k inside a fused [B, T, 3*NH*HS] row (stride) with the v part and
 *   the row padding untouched (bit-exact); atol 1e-5 + 2e-6 * max position
 *   (OpenCL pow/sin/cos are not correctly rounded); inverse(forward(x)) = x
 *   (atol 1e-5); backward (the inverse applied to G) against central finite
 *   differences in float64 of L = sum(G * rope(x)) (same tolerance). The
 *   same with rope_scaling's frequencies (linear: all pairs divided by the
 *   factor; a ramp between them over the middle pairs with YaRN's scale of
 *   cos and sin; fractional ramp ends) past a short trained context, the
 *   tolerance times mscale^2 and inverse(forward(x)) = mscale^2 x.
 * - packed documents (train.packing): embedding with learned positions
 *   (forward and the table's gradient), sinusoidal positions and RoPE
 *   (forward and inverse) at per-token positions that restart at random
 *   cuts, against float64 references indexed by them, same tolerances.
 * - rope on 16-bit storage (bf16, f16; train.precision's attention): on
 *   values the format holds, every element equals the float32 kernel's
 *   result on the same values rounded once by the host's reference
 *   rounding (model/io/safetensors.h), bit for bit, forward and inverse,
 *   from an odd element offset, with v, the row padding and the elements
 *   around the tensor untouched.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/io/safetensors.h"
#include "model/ops/ops.h"
#include "model/ops/ops_internal.h"
#include "tests/test_util.h"

#define PAD 5 /* leading floats before each device tensor */

static const clf_ptr NOPOS = {NULL, 0}; /* positions pos0 + t */

static clf_ptr up(clf_runtime *rt, const float *x, size_t n)
{
    float *t = calloc(n + PAD, sizeof *t);
    for (size_t i = 0; i < PAD; i++)
        t[i] = 1e30f;
    if (n)
        memcpy(t + PAD, x, n * sizeof *x);
    clf_ptr p = tu_upload(rt, t, n + PAD);
    free(t);
    return clf_ptr_at(p, PAD);
}

static clf_ptr up_i32(clf_runtime *rt, const int32_t *x, size_t n)
{
    int32_t *t = calloc(n + PAD, sizeof *t);
    for (size_t i = 0; i < PAD; i++)
        t[i] = -7;
    memcpy(t + PAD, x, n * sizeof *x);
    clf_ptr p = tu_upload_i32(rt, t, n + PAD);
    free(t);
    return clf_ptr_at(p, PAD);
}

/* ---- the per-element (GPU) work split, launched directly -----------------------
 * The ops pick a whole row per work-item on CPUs and one element per
 * work-item on GPUs. With elem = 1 these wrappers launch the kernels with
 * span = 1 so that both splits are tested on any device. */

static void launch(clf_runtime *rt, const char *name, size_t global, int na, const clf_arg *a)
{
    clf_kernel *k;
    clf_error err;
    tu_ok(clf_kernel_get(rt, "embed", name, &k, &err), &err, name);
    /* 64, or the largest power of two below the kernel's limit (llvmpipe: 32) */
    size_t local = clf_ops_group_size(k, 64);
    tu_ok(clf_kernel_launch(rt, k, 1, &global, &local, na, a, &err), &err, name);
}

static void embed_fwd(clf_runtime *rt, int elem, clf_ptr out, clf_ptr tok, clf_ptr wte, clf_ptr wpe,
                      size_t B, size_t T, size_t C, size_t pos0, clf_ptr pos, float scale)
{
    clf_error err;
    if (!elem) {
        tu_ok(clf_op_embed_forward(rt,
                                   &(clf_embed_args){.tokens = tok,
                                                     .wte = wte,
                                                     .wpe = wpe,
                                                     .B = B,
                                                     .T = T,
                                                     .C = C,
                                                     .pos0 = pos0,
                                                     .pos = pos,
                                                     .scale = scale,
                                                     .out = out},
                                   &err),
              &err, "embed forward");
        return;
    }
    clf_ptr wp = wpe.buf ? wpe : out, pp = pos.buf ? pos : tok;
    clf_arg a[] = {CLF_ARG_BUF(out.buf),
                   CLF_ARG_U64(out.off),
                   CLF_ARG_BUF(tok.buf),
                   CLF_ARG_U64(tok.off),
                   CLF_ARG_BUF(wte.buf),
                   CLF_ARG_U64(wte.off),
                   CLF_ARG_BUF(wp.buf),
                   CLF_ARG_U64(wp.off),
                   CLF_ARG_I32(wpe.buf != NULL),
                   CLF_ARG_U32(B * T),
                   CLF_ARG_U32(T),
                   CLF_ARG_U32(C),
                   CLF_ARG_U32(0x7FFFFFFF),
                   CLF_ARG_U32(pos0),
                   CLF_ARG_F32(scale),
                   CLF_ARG_U32(1),
                   CLF_ARG_U32(C),
                   CLF_ARG_BUF(pp.buf),
                   CLF_ARG_U64(pp.off),
                   CLF_ARG_I32(pos.buf != NULL)};
    launch(rt, "embed_forward", B * T * C, 20, a);
}

static void embed_bwd(clf_runtime *rt, int elem, clf_ptr dwte, clf_ptr dwpe, clf_ptr dout,
                      clf_ptr tok, clf_ptr pos, size_t B, size_t T, size_t C, size_t V, float scale)
{
    clf_error err;
    if (!elem) {
        tu_ok(clf_op_embed_backward(rt,
                                    &(clf_embed_args){.tokens = tok,
                                                      .B = B,
                                                      .T = T,
                                                      .C = C,
                                                      .V = V,
                                                      .scale = scale,
                                                      .pos = pos,
                                                      .dout = dout,
                                                      .dwte = dwte,
                                                      .dwpe = dwpe},
                                    &err),
              &err, "embed backward");
        return;
    }
    clf_arg a[] = {CLF_ARG_BUF(dwte.buf), CLF_ARG_U64(dwte.off), CLF_ARG_BUF(dout.buf),
                   CLF_ARG_U64(dout.off), CLF_ARG_BUF(tok.buf),  CLF_ARG_U64(tok.off),
                   CLF_ARG_U32(B * T),    CLF_ARG_U32(C),        CLF_ARG_U32(V),
                   CLF_ARG_F32(scale),    CLF_ARG_U32(1),        CLF_ARG_U32(C)};
    launch(rt, "embed_backward_wte", V * C, 12, a);
    if (dwpe.buf) {
        clf_ptr pp = pos.buf ? pos : tok;
        clf_arg b[] = {CLF_ARG_BUF(dwpe.buf),
                       CLF_ARG_U64(dwpe.off),
                       CLF_ARG_BUF(dout.buf),
                       CLF_ARG_U64(dout.off),
                       CLF_ARG_U32(B),
                       CLF_ARG_U32(T),
                       CLF_ARG_U32(C),
                       CLF_ARG_U32(0),
                       CLF_ARG_U32(1),
                       CLF_ARG_U32(C),
                       CLF_ARG_BUF(pp.buf),
                       CLF_ARG_U64(pp.off),
                       CLF_ARG_I32(pos.buf != NULL)};
        launch(rt, "embed_backward_wpe", T * C, 13, b);
    }
}

/* rope with bspan = 1 (the GPU split) when elem, else through the op. */
static void rope_p(clf_runtime *rt, int elem, clf_ptr x, size_t B, size_t T, size_t NH, size_t HS,
                   size_t rs, size_t pos0, clf_ptr pos, const clf_rope *rp, int inverse)
{
    clf_error err;
    if (!elem) {
        tu_ok(clf_op_rope_t(rt, &(clf_heads){x, CLF_DT_F32, B, T, NH, HS, rs}, pos0, pos, rp,
                            inverse, &err),
              &err, "rope");
        return;
    }
    const clf_ptr pp = pos.buf ? pos : x;
    clf_arg a[] = {CLF_ARG_BUF(x.buf),
                   CLF_ARG_U64(x.off),
                   CLF_ARG_U32(CLF_DT_F32),
                   CLF_ARG_U32(B),
                   CLF_ARG_U32(T),
                   CLF_ARG_U32(NH),
                   CLF_ARG_U32(HS),
                   CLF_ARG_U32(rs),
                   CLF_ARG_U32(pos0),
                   CLF_ARG_F32((float)log2(rp->theta)),
                   CLF_ARG_F32(rp->factor),
                   CLF_ARG_F32(rp->ramp_lo),
                   CLF_ARG_F32(rp->ramp_hi),
                   CLF_ARG_F32(rp->mscale),
                   CLF_ARG_I32(inverse),
                   CLF_ARG_U32(1),
                   CLF_ARG_BUF(pp.buf),
                   CLF_ARG_U64(pp.off),
                   CLF_ARG_I32(pos.buf != NULL)};
    launch(rt, "rope", B * T * (HS / 2), 19, a);
}

static void rope(clf_runtime *rt, int elem, clf_ptr x, size_t B, size_t T, size_t NH, size_t HS,
                 size_t rs, size_t pos0, const clf_rope *rp, int inverse)
{
    rope_p(rt, elem, x, B, T, NH, HS, rs, pos0, NOPOS, rp, inverse);
}

/* rope on x stored as t (bf16 / f16) against the float32 kernel on the same
 * values, rounded once on the host. */
static void test_rope16(clf_runtime *rt, clf_dtype t, size_t B, size_t T, size_t NH, size_t HS,
                        size_t pos0, const clf_rope *rp, tu_rng *r)
{
    const size_t C = NH * HS, rs = 3 * C + 3, n = B * T * rs, off = 5, guard = 3;
    float *x = malloc(n * sizeof *x), *want = malloc(n * sizeof *want);
    uint16_t *h = malloc((n + off + guard) * sizeof *h), *got = malloc((n + off + guard) * 2);
    tu_fill(r, x, n, -2, 2);
    for (size_t i = 0; i < n + off + guard; i++)
        h[i] = 0x7E57u;
    for (size_t i = 0; i < n; i++) {
        h[off + i] = t == CLF_DT_BF16 ? clf_f32_to_bf16(x[i]) : clf_f32_to_f16(x[i]);
        x[i] = t == CLF_DT_BF16 ? clf_bf16_to_f32(h[off + i]) : clf_f16_to_f32(h[off + i]);
    }
    clf_error err;
    clf_buffer *b = NULL;
    tu_ok(clf_buffer_create(rt, (n + off + guard) * 2, &b, &err), &err, "buffer");
    for (int inverse = 0; inverse < 2; inverse++) {
        tu_ok(clf_buffer_write(rt, b, 0, h, (n + off + guard) * 2, &err), &err, "write");
        clf_ptr d32 = up(rt, x, n);
        for (int part = 0; part < 2; part++) {
            const clf_heads h32 = {clf_ptr_at(d32, part * C), CLF_DT_F32, B, T, NH, HS, rs};
            const clf_heads h16 = {(clf_ptr){b, off + part * C}, t, B, T, NH, HS, rs};
            tu_ok(clf_op_rope_t(rt, &h32, pos0, NOPOS, rp, inverse, &err), &err, "rope f32");
            tu_ok(clf_op_rope_t(rt, &h16, pos0, NOPOS, rp, inverse, &err), &err, "rope 16-bit");
        }
        tu_download(rt, d32, want, n);
        tu_ok(clf_buffer_read(rt, b, 0, got, (n + off + guard) * 2, &err), &err, "read");
        size_t bad = 0;
        for (size_t i = 0; i < n + off + guard; i++) {
            const int inside = i >= off && i < off + n;
            const uint16_t w = !inside            ? 0x7E57u
                               : t == CLF_DT_BF16 ? clf_f32_to_bf16(want[i - off])
                                                  : clf_f32_to_f16(want[i - off]);
            bad += got[i] != w;
        }
        TU_CHECK(bad == 0,
                 "rope%s in %s B=%zu T=%zu NH=%zu HS=%zu: the float32 result rounded, bit for bit, "
                 "v, padding and guards untouched (%zu differ)",
                 inverse ? " inverse" : "", clf_dtype_name(t), B, T, NH, HS, bad);
        tu_free(d32);
    }
    clf_buffer_destroy(b);
    free(x);
    free(want);
    free(h);
    free(got);
}

/* ---- embedding ------------------------------------------------------------ */

static void embed_ref(double *out, const int32_t *tok, const float *wte, const float *wpe, size_t B,
                      size_t T, size_t C, size_t pos0, double scale)
{
    for (size_t bt = 0; bt < B * T; bt++)
        for (size_t c = 0; c < C; c++)
            out[bt * C + c] =
                scale * wte[(size_t)tok[bt] * C + c] + (wpe ? wpe[(pos0 + bt % T) * C + c] : 0.0);
}

static void test_embed(clf_runtime *rt, int elem, size_t B, size_t T, size_t C, size_t V,
                       size_t pos0, int with_wpe, float scale, tu_rng *r)
{
    size_t BT = B * T, P = pos0 + T + 2;
    int32_t *tok = malloc(BT * sizeof *tok);
    float *wte = malloc(V * C * sizeof *wte), *wpe = malloc(P * C * sizeof *wpe);
    float *got = malloc(BT * C * sizeof *got), *G = malloc(BT * C * sizeof *G);
    float *dwte0 = malloc(V * C * sizeof *dwte0), *dwpe0 = malloc(P * C * sizeof *dwpe0);
    float *gte = malloc(V * C * sizeof *gte), *gpe = malloc(P * C * sizeof *gpe);
    double *ref = malloc(BT * C * sizeof *ref), *rte = malloc(V * C * sizeof *rte);
    double *rpe = malloc(P * C * sizeof *rpe);
    for (size_t i = 0; i < BT; i++)
        tok[i] = (int32_t)(tu_u32(r) % V);
    tu_fill(r, wte, V * C, -1, 1);
    tu_fill(r, wpe, P * C, -1, 1);
    tu_fill(r, G, BT * C, -1, 1);
    tu_fill(r, dwte0, V * C, -1, 1);
    tu_fill(r, dwpe0, P * C, -1, 1);
    char name[160];
    snprintf(name, sizeof name, "embed fwd%s B=%zu T=%zu C=%zu V=%zu pos0=%zu wpe=%d s=%.3g",
             elem ? " (per element)" : "", B, T, C, V, pos0, with_wpe, (double)scale);

    clf_ptr dtok = up_i32(rt, tok, BT), dwte = up(rt, wte, V * C), dwpe = up(rt, wpe, P * C);
    clf_ptr dout = up(rt, G, BT * C); /* overwritten by forward */
    clf_ptr none = {NULL, 0};
    clf_error err;
    embed_fwd(rt, elem, dout, dtok, dwte, with_wpe ? dwpe : none, B, T, C, pos0, NOPOS, scale);
    tu_download(rt, dout, got, BT * C);
    embed_ref(ref, tok, wte, with_wpe ? wpe : NULL, B, T, C, pos0, scale);
    tu_close(name, got, ref, BT * C, 1e-6, 1e-6);

    /* backward (the table is indexed from position 0: pos0 = 0 here) */
    clf_ptr gd = up(rt, G, BT * C), gdte = up(rt, dwte0, V * C), gdpe = up(rt, dwpe0, P * C);
    embed_bwd(rt, elem, gdte, with_wpe ? gdpe : none, gd, dtok, NOPOS, B, T, C, V, scale);
    tu_download(rt, gdte, gte, V * C);
    tu_download(rt, gdpe, gpe, P * C);
    for (size_t i = 0; i < V * C; i++)
        rte[i] = dwte0[i];
    for (size_t i = 0; i < P * C; i++)
        rpe[i] = dwpe0[i];
    for (size_t bt = 0; bt < BT; bt++)
        for (size_t c = 0; c < C; c++) {
            rte[(size_t)tok[bt] * C + c] += (double)scale * G[bt * C + c];
            if (with_wpe)
                rpe[(bt % T) * C + c] += G[bt * C + c];
        }
    snprintf(name, sizeof name, "embed bwd dwte%s B=%zu T=%zu C=%zu V=%zu",
             elem ? " (per element)" : "", B, T, C, V);
    tu_close(name, gte, rte, V * C, 1e-5, 1e-5);
    snprintf(name, sizeof name, "embed bwd dwpe B=%zu T=%zu C=%zu (wpe=%d)", B, T, C, with_wpe);
    tu_close(name, gpe, rpe, P * C, 1e-5, 1e-5);

    /* finite differences of L = sum G * forward (pos0 = 0) against a fresh gradient */
    tu_ok(clf_ptr_zero(rt, gdte, V * C, &err), &err, "zero");
    tu_ok(clf_ptr_zero(rt, gdpe, P * C, &err), &err, "zero");
    embed_bwd(rt, elem, gdte, with_wpe ? gdpe : none, gd, dtok, NOPOS, B, T, C, V, scale);
    tu_download(rt, gdte, gte, V * C);
    tu_download(rt, gdpe, gpe, P * C);
    enum { NS = 24 };
    float gs[2 * NS];
    double fd[2 * NS];
    size_t ns = 0;
    double *o = malloc(BT * C * sizeof *o);
    float *wte_p = malloc(V * C * sizeof *wte_p), *wpe_p = malloc(P * C * sizeof *wpe_p);
    for (int s = 0; s < 2 * NS; s++) {
        int table = s >= NS; /* 0 wte, 1 wpe */
        if (table && !with_wpe)
            break;
        size_t n = table ? T * C : V * C, i = tu_u32(r) % n;
        /* a token that occurs, half of the time */
        if (!table && (s & 1))
            i = (size_t)tok[tu_u32(r) % BT] * C + tu_u32(r) % C;
        /* perturb in float and difference by the deltas actually applied */
        double L[2], dlt[2];
        for (int k = 0; k < 2; k++) {
            memcpy(wte_p, wte, V * C * sizeof *wte);
            memcpy(wpe_p, wpe, P * C * sizeof *wpe);
            float *w = table ? wpe_p : wte_p;
            float w0 = w[i];
            w[i] = (float)(w0 + (k ? -1e-2 : 1e-2));
            dlt[k] = (double)w[i] - (double)w0;
            embed_ref(o, tok, wte_p, with_wpe ? wpe_p : NULL, B, T, C, 0, scale);
            double acc = 0;
            for (size_t j = 0; j < BT * C; j++)
                acc += G[j] * o[j];
            L[k] = acc;
        }
        fd[ns] = (L[0] - L[1]) / (dlt[0] - dlt[1]);
        gs[ns] = table ? gpe[i] : gte[i];
        ns++;
    }
    snprintf(name, sizeof name, "embed bwd vs finite differences B=%zu T=%zu C=%zu V=%zu", B, T, C,
             V);
    tu_close(name, gs, fd, ns, 1e-5, 1e-4);
    free(o);
    free(wte_p);
    free(wpe_p);

    tu_free(dtok);
    tu_free(dwte);
    tu_free(dwpe);
    tu_free(dout);
    tu_free(gd);
    tu_free(gdte);
    tu_free(gdpe);
    free(tok);
    free(wte);
    free(wpe);
    free(got);
    free(G);
    free(dwte0);
    free(dwpe0);
    free(gte);
    free(gpe);
    free(ref);
    free(rte);
    free(rpe);
}

/* ---- sinusoidal positions ------------------------------------------------------- */

static void test_sinusoid(clf_runtime *rt, size_t B, size_t T, size_t C, size_t pos0, double atol,
                          tu_rng *r)
{
    size_t n = B * T * C;
    float *x = malloc(n * sizeof *x), *got = malloc(n * sizeof *got);
    double *ref = malloc(n * sizeof *ref);
    tu_fill(r, x, n, -1, 1);
    clf_ptr dx = up(rt, x, n);
    clf_error err;
    tu_ok(clf_op_sinusoid_add(rt, dx, B, T, C, pos0, NOPOS, &err), &err, "sinusoid_add");
    tu_download(rt, dx, got, n);
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            for (size_t c = 0; c < C; c++) {
                double p = (double)(pos0 + t);
                double a = p / pow(10000.0, (double)(c - c % 2) / (double)C);
                size_t i = (b * T + t) * C + c;
                ref[i] = x[i] + (c % 2 ? cos(a) : sin(a));
            }
    char name[128];
    snprintf(name, sizeof name, "sinusoid_add B=%zu T=%zu C=%zu pos0=%zu", B, T, C, pos0);
    tu_close(name, got, ref, n, atol, 0.0);
    tu_free(dx);
    free(x);
    free(got);
    free(ref);
}

/* ---- rotary embedding --------------------------------------------------------------- */

/* x rows of `rs` floats, heads at column `col0`; sign -1 = inverse. Pair
 * i's frequency: theta^(-2i/HS), blended with itself / factor by the ramp
 * r = clamp((i - lo) / (hi - lo), 0, 1): f / factor * r + f * (1 - r). */
static void rope_ref_p(double *y, const double *x, size_t BT, size_t T, size_t NH, size_t HS,
                       size_t rs, size_t col0, size_t pos0, const int32_t *pos, const clf_rope *rp,
                       int sign)
{
    size_t half = HS / 2;
    for (size_t bt = 0; bt < BT; bt++)
        for (size_t h = 0; h < NH; h++)
            for (size_t i = 0; i < half; i++) {
                double f = pow(rp->theta, -(double)(2 * i) / (double)HS);
                double ramp = ((double)i - rp->ramp_lo) / ((double)rp->ramp_hi - rp->ramp_lo);
                ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
                f = f / rp->factor * ramp + f * (1 - ramp);
                double a = (double)(pos ? (size_t)pos[bt] : pos0 + bt % T) * f;
                double c = rp->mscale * cos(a), s = sign * rp->mscale * sin(a);
                size_t o = bt * rs + col0 + h * HS + i;
                double x1 = x[o], x2 = x[o + half];
                y[o] = x1 * c - x2 * s;
                y[o + half] = x2 * c + x1 * s;
            }
}

static void rope_ref(double *y, const double *x, size_t BT, size_t T, size_t NH, size_t HS,
                     size_t rs, size_t col0, size_t pos0, const clf_rope *rp, int sign)
{
    rope_ref_p(y, x, BT, T, NH, HS, rs, col0, pos0, NULL, rp, sign);
}

static void test_rope(clf_runtime *rt, int elem, size_t B, size_t T, size_t NH, size_t HS,
                      size_t pos0, const clf_rope *rp, tu_rng *r)
{
    /* fused qkv rows plus 3 floats of padding: q at 0, k at NH*HS, v untouched */
    size_t C = NH * HS, rs = 3 * C + 3, BT = B * T, n = BT * rs;
    float *x = malloc(n * sizeof *x), *got = malloc(n * sizeof *got), *G = malloc(n * sizeof *G);
    double *xd = malloc(n * sizeof *xd), *ref = malloc(n * sizeof *ref);
    tu_fill(r, x, n, -1, 1);
    tu_fill(r, G, n, -1, 1);
    for (size_t i = 0; i < n; i++)
        xd[i] = x[i];
    const double m2 = (double)rp->mscale * rp->mscale;
    double atol = (1e-5 + 2e-6 * (double)(pos0 + T)) * m2;
    char name[160];
    for (int inverse = 0; inverse < 2; inverse++) {
        clf_ptr dx = up(rt, x, n);
        for (int part = 0; part < 2; part++)
            rope(rt, elem, clf_ptr_at(dx, part * C), B, T, NH, HS, rs, pos0, rp, inverse);
        tu_download(rt, dx, got, n);
        memcpy(ref, xd, n * sizeof *ref);
        for (int part = 0; part < 2; part++)
            rope_ref(ref, xd, BT, T, NH, HS, rs, part * C, pos0, rp, inverse ? -1 : 1);
        snprintf(name, sizeof name,
                 "rope%s%s B=%zu T=%zu NH=%zu HS=%zu pos0=%zu theta=%g factor=%g ramp=[%g,%g] "
                 "mscale=%g",
                 inverse ? " inverse" : "", elem ? " (bspan 1)" : "", B, T, NH, HS, pos0,
                 (double)rp->theta, (double)rp->factor, (double)rp->ramp_lo, (double)rp->ramp_hi,
                 (double)rp->mscale);
        tu_close(name, got, ref, n, atol, 0.0);
        size_t bad = 0;
        for (size_t bt = 0; bt < BT; bt++)
            bad += memcmp(got + bt * rs + 2 * C, x + bt * rs + 2 * C, (C + 3) * sizeof *x) != 0;
        TU_CHECK(bad == 0, "rope%s HS=%zu: v part and row padding untouched (%zu rows differ)",
                 inverse ? " inverse" : "", HS, bad);
        if (inverse == 0) {
            /* inverse(forward(x)) == mscale^2 x on q and k */
            for (int part = 0; part < 2; part++)
                rope(rt, elem, clf_ptr_at(dx, part * C), B, T, NH, HS, rs, pos0, rp, 1);
            tu_download(rt, dx, got, n);
            memcpy(ref, xd, n * sizeof *ref);
            for (size_t bt = 0; bt < BT; bt++)
                for (size_t c = 0; c < 2 * C; c++)
                    ref[bt * rs + c] *= m2;
            snprintf(name, sizeof name, "rope inverse(forward(x)) == mscale^2 x HS=%zu", HS);
            tu_close(name, got, ref, n, 1e-5 * m2, 0.0);
        }
        tu_free(dx);
    }

    /* backward: the inverse rotation of G against central differences of
     * L = sum G * rope(x) over the q part, in float64 */
    clf_ptr dg = up(rt, G, n);
    rope(rt, elem, dg, B, T, NH, HS, rs, pos0, rp, 1);
    tu_download(rt, dg, got, n);
    enum { NS = 32 };
    float gs[NS];
    double fd[NS];
    double *xp = malloc(n * sizeof *xp);
    for (int s = 0; s < NS; s++) {
        size_t bt = tu_u32(r) % BT, c = tu_u32(r) % C, i = bt * rs + c;
        double h = 1e-4, L[2];
        for (int k = 0; k < 2; k++) {
            memcpy(xp, xd, n * sizeof *xp);
            xp[i] += k ? -h : h;
            memcpy(ref, xp, n * sizeof *ref);
            rope_ref(ref, xp, BT, T, NH, HS, rs, 0, pos0, rp, 1);
            double acc = 0;
            for (size_t j = 0; j < BT; j++)
                for (size_t cc = 0; cc < C; cc++)
                    acc += G[j * rs + cc] * ref[j * rs + cc];
            L[k] = acc;
        }
        fd[s] = (L[0] - L[1]) / (2 * h);
        gs[s] = got[i];
    }
    snprintf(name, sizeof name, "rope backward vs finite differences HS=%zu T=%zu", HS, T);
    tu_close(name, gs, fd, NS, atol, 0.0);
    tu_free(dg);
    free(xp);
    free(x);
    free(got);
    free(G);
    free(xd);
    free(ref);
}

/* ---- packed documents: per-token positions ---------------------------------------- */

/* Positions of B rows of T tokens cut into documents at random (each row
 * restarts at 0 at every cut; about one cut in `every` positions, and one
 * wherever a position would reach T, the rows of the position table). */
static void doc_positions(int32_t *pos, size_t B, size_t T, unsigned every, tu_rng *r)
{
    for (size_t b = 0; b < B; b++) {
        int32_t p = (int32_t)(tu_u32(r) % 3); /* rows may start inside a document */
        for (size_t t = 0; t < T; t++, p++) {
            if (t > 0 && (tu_u32(r) % every == 0 || p >= (int32_t)T))
                p = 0;
            pos[b * T + t] = t == 0 ? 0 : p;
        }
    }
}

/* Embedding, learned positions (forward and the table's gradient),
 * sinusoidal positions and RoPE (forward and inverse) with per-token
 * positions, against float64 references that index by them: the same
 * tolerances as the plain tests. */
static void test_packed(clf_runtime *rt, int elem, size_t B, size_t T, size_t C, size_t NH,
                        tu_rng *r)
{
    const size_t BT = B * T, V = 11, HS = C / NH, rs = 3 * C + 3;
    int32_t *tok = malloc(BT * sizeof *tok), *pos = malloc(BT * sizeof *pos);
    float *wte = malloc(V * C * sizeof *wte), *wpe = malloc(T * C * sizeof *wpe);
    float *G = malloc(BT * C * sizeof *G), *got = malloc(BT * rs * sizeof *got);
    float *x = malloc(BT * rs * sizeof *x), *dpe0 = malloc(T * C * sizeof *dpe0);
    double *ref = malloc(BT * rs * sizeof *ref), *xd = malloc(BT * rs * sizeof *xd);
    doc_positions(pos, B, T, 5, r);
    for (size_t i = 0; i < BT; i++)
        tok[i] = (int32_t)(tu_u32(r) % V);
    tu_fill(r, wte, V * C, -1, 1);
    tu_fill(r, wpe, T * C, -1, 1);
    tu_fill(r, G, BT * C, -1, 1);
    tu_fill(r, dpe0, T * C, -1, 1);
    tu_fill(r, x, BT * rs, -1, 1);
    char name[160];
    clf_ptr dtok = up_i32(rt, tok, BT), dpos = up_i32(rt, pos, BT), dwte = up(rt, wte, V * C);
    clf_ptr dwpe = up(rt, wpe, T * C), dout = up(rt, G, BT * C), gd = up(rt, G, BT * C);
    clf_ptr gdpe = up(rt, dpe0, T * C), gdte = up(rt, wte, V * C);
    clf_error err;

    embed_fwd(rt, elem, dout, dtok, dwte, dwpe, B, T, C, 0, dpos, 1.0f);
    tu_download(rt, dout, got, BT * C);
    for (size_t bt = 0; bt < BT; bt++)
        for (size_t c = 0; c < C; c++)
            ref[bt * C + c] = (double)wte[(size_t)tok[bt] * C + c] + wpe[(size_t)pos[bt] * C + c];
    snprintf(name, sizeof name, "packed embed fwd%s B=%zu T=%zu C=%zu",
             elem ? " (per element)" : "", B, T, C);
    tu_close(name, got, ref, BT * C, 1e-6, 1e-6);

    embed_bwd(rt, elem, gdte, gdpe, gd, dtok, dpos, B, T, C, V, 1.0f);
    tu_download(rt, gdpe, got, T * C);
    for (size_t i = 0; i < T * C; i++)
        ref[i] = dpe0[i];
    for (size_t bt = 0; bt < BT; bt++)
        for (size_t c = 0; c < C; c++)
            ref[(size_t)pos[bt] * C + c] += G[bt * C + c];
    snprintf(name, sizeof name, "packed embed bwd dwpe%s B=%zu T=%zu C=%zu",
             elem ? " (per element)" : "", B, T, C);
    tu_close(name, got, ref, T * C, 1e-5, 1e-5);

    if (!elem) { /* sinusoid_add has one split */
        clf_ptr dx = up(rt, G, BT * C);
        tu_ok(clf_op_sinusoid_add(rt, dx, B, T, C, 0, dpos, &err), &err, "sinusoid_add");
        tu_download(rt, dx, got, BT * C);
        for (size_t bt = 0; bt < BT; bt++)
            for (size_t c = 0; c < C; c++) {
                double a = pos[bt] / pow(10000.0, (double)(c - c % 2) / (double)C);
                ref[bt * C + c] = G[bt * C + c] + (c % 2 ? cos(a) : sin(a));
            }
        snprintf(name, sizeof name, "packed sinusoid_add B=%zu T=%zu C=%zu", B, T, C);
        tu_close(name, got, ref, BT * C, 2e-6 + 1e-6 * (double)T, 0.0);
        tu_free(dx);
    }

    const clf_rope rp = {10000.0f, 1, 0, 1, 1};
    for (size_t i = 0; i < BT * rs; i++)
        xd[i] = x[i];
    for (int inverse = 0; inverse < 2; inverse++) {
        clf_ptr dx = up(rt, x, BT * rs);
        for (int part = 0; part < 2; part++)
            rope_p(rt, elem, clf_ptr_at(dx, part * C), B, T, NH, HS, rs, 0, dpos, &rp, inverse);
        tu_download(rt, dx, got, BT * rs);
        memcpy(ref, xd, BT * rs * sizeof *ref);
        for (int part = 0; part < 2; part++)
            rope_ref_p(ref, xd, BT, T, NH, HS, rs, part * C, 0, pos, &rp, inverse ? -1 : 1);
        snprintf(name, sizeof name, "packed rope%s%s B=%zu T=%zu NH=%zu HS=%zu",
                 inverse ? " inverse" : "", elem ? " (bspan 1)" : "", B, T, NH, HS);
        tu_close(name, got, ref, BT * rs, 1e-5 + 2e-6 * (double)T, 0.0);
        tu_free(dx);
    }
    tu_free(dtok);
    tu_free(dpos);
    tu_free(dwte);
    tu_free(dwpe);
    tu_free(dout);
    tu_free(gd);
    tu_free(gdpe);
    tu_free(gdte);
    free(tok);
    free(pos);
    free(wte);
    free(wpe);
    free(G);
    free(got);
    free(x);
    free(dpe0);
    free(ref);
    free(xd);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng r = tu_rng_new(2);

    for (int elem = 0; elem < 2; elem++) {
        test_embed(rt, elem, 1, 1, 1, 1, 0, 1, 1.0f, &r);
        test_embed(rt, elem, 2, 7, 33, 5, 0, 1, 1.0f, &r);
        test_embed(rt, elem, 3, 33, 64, 65, 3, 1, 8.0f, &r);
        test_embed(rt, elem, 2, 33, 257, 17, 0, 0, (float)sqrt(257.0), &r);
        /* (the simulator: the vocabulary past 256 and a T of 64 at a smaller
         * batch and width; the backward reads every row once per token) */
        if (tu_simulator())
            test_embed(rt, elem, 2, 64, 48, 257, 0, 1, 1.0f, &r);
        else
            test_embed(rt, elem, 4, 64, 128, 257, 0, 1, 1.0f, &r);

        const clf_rope plain = {10000.0f, 1, 0, 1, 1}, big = {500000.0f, 1, 0, 1, 1};
        test_rope(rt, elem, 1, 1, 1, 2, 0, &plain, &r);
        test_rope(rt, elem, 2, 7, 3, 8, 0, &plain, &r);
        test_rope(rt, elem, 2, 33, 4, 16, 5, &plain, &r);
        test_rope(rt, elem, 3, 17, 2, 64, 30, &big, &r);
        /* rope_scaling: linear (every pair interpolated), a ramp over the
         * middle pairs with YaRN's temperature, a ramp at fractional ends,
         * positions past a short "trained" context */
        const clf_rope linear = {10000.0f, 4.0f, -2.0f, -1.0f, 1.0f},
                       yarn = {10000.0f, 8.0f, 2.0f, 9.0f, 1.2079442f},
                       frac = {500000.0f, 2.5f, 0.5f, 3.25f, 1.0916291f};
        test_rope(rt, elem, 2, 33, 4, 16, 100, &linear, &r);
        test_rope(rt, elem, 2, 40, 2, 32, 200, &yarn, &r);
        test_rope(rt, elem, 1, 17, 3, 8, 7, &frac, &r);
        test_packed(rt, elem, 1, 1, 4, 1, &r);
        test_packed(rt, elem, 3, 37, 48, 3, &r);
        test_packed(rt, elem, 4, 64, 64, 2, &r);
    }
    const clf_rope plain = {10000.0f, 1, 0, 1, 1}, yarn = {10000.0f, 4.0f, 1.0f, 5.0f, 1.1386294f};
    test_rope16(rt, CLF_DT_BF16, 2, 33, 4, 16, 5, &plain, &r);
    test_rope16(rt, CLF_DT_F16, 3, 17, 2, 64, 30, &plain, &r);
    test_rope16(rt, CLF_DT_BF16, 2, 33, 4, 16, 50, &yarn, &r);
    test_sinusoid(rt, 1, 1, 2, 0, 2e-6, &r);
    test_sinusoid(rt, 2, 7, 32, 0, 2e-6 + 1e-6 * 7, &r);
    test_sinusoid(rt, 3, 33, 33, 5, 2e-6 + 1e-6 * 38, &r);
    test_sinusoid(rt, 2, 64, 128, 100, 2e-6 + 1e-6 * 164, &r);
    test_sinusoid(rt, 1, 3, 1, 7, 2e-6 + 1e-6 * 10, &r);

    clf_runtime_destroy(rt);
    return tu_finish();
}
