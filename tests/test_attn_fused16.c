/*
 * test_attn_fused16.c - fused attention with 16-bit storage (clf_attn_fused.t
 * bf16 and f16: the cl/flash/ family's variants flash@bf16 and flash@f16, what
 * train.precision bf16 | fp16 runs) against the float32 kernels, which
 * test_attn_fused.c checks against float64.
 *
 * The 16-bit kernels widen what they load and round what they store and
 * otherwise run the float32 kernels' arithmetic, so given the same values
 * their outputs are the float32 outputs rounded to the format, up to the
 * float32 rounding of the sums themselves (the two are separate programs:
 * a compiler may contract or order them differently, as Intel's CPU
 * runtime does, and a sum that cancels to near zero then differs in its
 * absolute last bits). Each case draws q, k, v (and dy) already
 * representable in the format, runs the float32 kernels on them as float32
 * and the 16-bit kernels on them stored in 16 bits, and checks:
 *   - y, dq, dk, dv: each 16-bit value within half a spacing of the format
 *     at the float32 value's magnitude (bf16 2^(e-7), f16 2^(max(e,-14)-10)
 *     for 2^e <= |x| < 2^(e+1)), times 1 + 2^-6, plus 2^-18 of the
 *     tensor's largest magnitude (64 float32 ulps of it: the sums' own
 *     rounding): one correct rounding, no more, for all but near-zero
 *     elements (truncation or a wrong element fails); the backward takes y
 *     as the 16-bit forward stored it, and the float32 backward that same
 *     y widened, so both see one input;
 *   - lse (float32 on both sides): within 1e-6 relative, 1e-6 absolute;
 *   - the columns past the heads in y keep their bits, and reruns are
 *     bit-identical (not checked under a checking simulator);
 *   - both kernel shapes (the blocked kernels and the work-group tiles),
 *     self-attention inside one [B, T, 3C] qkv and cross-attention (q [B,
 *     T, C], kv [B, S, 2C]), causal, padding masks, a sliding window,
 *     ALiBi and attention dropout;
 *   - an unknown storage type is refused.
 * Under a simulator (tu_simulator) the larger cases are a quarter of their
 * length and each case runs in one format, bf16 and f16 in turn (each
 * format's loads and stores still meet both shapes and every feature but
 * one or two of the nine cases).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/io/safetensors.h"
#include "model/ops/ops.h"
#include "model/ops/ops_internal.h"
#include "tests/attn_case.h"
#include "tests/test_util.h"

static uint16_t narrow(clf_dtype t, float x)
{
    return t == CLF_DT_BF16 ? clf_f32_to_bf16(x) : clf_f32_to_f16(x);
}

static float widen(clf_dtype t, uint16_t h)
{
    return t == CLF_DT_BF16 ? clf_bf16_to_f32(h) : clf_f16_to_f32(h);
}

/* n random values in [lo, hi) representable in t: x (as float32) and h (its bits). */
static void fill16(tu_rng *r, clf_dtype t, float *x, uint16_t *h, size_t n, float lo, float hi)
{
    tu_fill(r, x, n, lo, hi);
    for (size_t i = 0; i < n; i++) {
        h[i] = narrow(t, x[i]);
        x[i] = widen(t, h[i]);
    }
}

/* A device copy of n 16-bit values. */
static clf_ptr upload16(clf_runtime *rt, const uint16_t *h, size_t n)
{
    clf_buffer *b = NULL;
    clf_error e;
    tu_ok(clf_buffer_create(rt, n * 2, &b, &e), &e, "buffer");
    tu_ok(clf_buffer_write(rt, b, 0, h, n * 2, &e), &e, "write");
    return (clf_ptr){b, 0};
}

static void download16(clf_runtime *rt, clf_ptr p, uint16_t *h, size_t n)
{
    clf_error e;
    tu_ok(clf_buffer_read(rt, p.buf, p.off * 2, h, n * 2, &e), &e, "read");
}

/* The case's descriptor (tests/attn_case.h) in storage t. */
static clf_attn_fused desc(const acase *c, clf_dtype t, clf_ptr y, clf_ptr lse, clf_ptr q,
                           clf_ptr kv, clf_ptr keep, size_t ys)
{
    return acase_desc(c, t, y, lse, q, kv, keep, ys, 0x5EEDull, 0xA77E0002ull);
}

/* The spacing of t's values around |x| (its subnormals' below the normal range). */
static double spacing(clf_dtype t, double x)
{
    int e = 0;
    if (x == 0.0)
        return t == CLF_DT_BF16 ? 0x1p-133 : 0x1p-24;
    frexp(fabs(x), &e); /* 2^(e-1) <= |x| < 2^e */
    e -= 1;
    return t == CLF_DT_BF16 ? ldexp(1.0, (e < -126 ? -126 : e) - 7)
                            : ldexp(1.0, (e < -14 ? -14 : e) - 10);
}

/* got (16-bit) against want (float32): one correct rounding apart. */
static void close16(const char *what, clf_dtype t, const uint16_t *got, const float *want, size_t n)
{
    size_t bad = 0, worst_i = 0;
    double worst = 0, big = 0;
    for (size_t i = 0; i < n; i++)
        big = fmax(big, fabs((double)want[i]));
    for (size_t i = 0; i < n; i++) {
        const double g = widen(t, got[i]), w = want[i], e = fabs(g - w);
        const double r = e / (0.5 * spacing(t, w) * (1.0 + 0x1p-6) + 0x1p-18 * big);
        if (!(r <= 1.0))
            bad++;
        if (!(r <= worst))
            worst = r, worst_i = i;
    }
    TU_CHECK(bad == 0,
             "%s: %zu values one rounding from float32's (%zu outside; worst %.3f of the bound "
             "at %zu: %.8g vs %.8g)",
             what, n, bad, worst, worst_i, (double)widen(t, got[worst_i]), (double)want[worst_i]);
}

static void run(clf_runtime *rt, const acase *c, clf_dtype t, clf_ops_path path, tu_rng *r)
{
    const size_t C = c->NH * c->HS, ys = C + 3;
    const size_t qs = acase_qs(c), kvs = acase_kvs(c);
    const size_t nq = c->B * c->T * qs, nkv = c->cross ? c->B * c->S * kvs : 1;
    const size_t ny = c->B * c->T * ys, nl = c->B * c->NH * c->T;
    const size_t ngq = nq, ngkv = nkv;
    char name[200];
    snprintf(name, sizeof name, "%s %s B%zu NH%zu T%zu S%zu HS%zu%s%s%s%s%s%s", clf_dtype_name(t),
             path == CLF_OPS_PATH_GROUP ? "tiles" : "blocked", c->B, c->NH, c->T, c->S, c->HS,
             c->causal ? " causal" : "", c->cross ? " cross" : "", c->masked ? " masked" : "",
             c->window ? " window" : "", c->alibi ? " alibi" : "", c->p_drop > 0 ? " dropout" : "");
    float *qf = malloc(nq * 4), *kvf = malloc(nkv * 4), *dyf = malloc(ny * 4);
    uint16_t *qh = malloc(nq * 2), *kvh = malloc(nkv * 2), *dyh = malloc(ny * 2);
    fill16(r, t, qf, qh, nq, -1.5f, 1.5f);
    fill16(r, t, kvf, kvh, nkv, -1.5f, 1.5f);
    fill16(r, t, dyf, dyh, ny, -1.0f, 1.0f);
    int32_t *keep = malloc(c->B * c->S * sizeof *keep);
    for (size_t i = 0; i < c->B * c->S; i++)
        keep[i] = !c->masked || (tu_u32(r) % 4 != 0);
    if (c->masked && !c->causal)
        for (size_t s = 0; s < c->S; s++)
            keep[s] = 0; /* sequence 0 sees nothing: y = 0, lse = -inf */
    clf_error err;
    clf_ptr dkeep = tu_alloc(rt, c->B * c->S);
    tu_ok(clf_buffer_write(rt, dkeep.buf, dkeep.off * 4, keep, c->B * c->S * 4, &err), &err,
          "keep");

    /* float32 */
    /* guard patterns for y and (16-bit) every output buffer */
    const size_t ng = ny > ngq ? (ny > ngkv ? ny : ngkv) : (ngq > ngkv ? ngq : ngkv);
    float *guard = malloc(ny * 4);
    uint16_t *guard16 = malloc(ng * 2);
    for (size_t i = 0; i < ng; i++)
        guard16[i] = 0x5A5Au;
    for (size_t i = 0; i < ny; i++)
        guard[i] = 7.25f;
    clf_ptr q32 = tu_upload(rt, qf, nq), kv32 = tu_upload(rt, kvf, nkv);
    clf_ptr y32 = tu_upload(rt, guard, ny), l32 = tu_alloc(rt, nl), s32 = tu_alloc(rt, nl);
    clf_ptr gq32 = tu_alloc(rt, ngq), gkv32 = tu_alloc(rt, ngkv);
    clf_attn_fused a32 = desc(c, CLF_DT_F32, y32, l32, q32, kv32, dkeep, ys);
    tu_ok(clf_op_attn_fused_forward_ex(rt, path, &a32, &err), &err, "forward f32");
    /* 16 bits */
    clf_ptr q16 = upload16(rt, qh, nq), kv16 = upload16(rt, kvh, nkv);
    clf_ptr y16 = upload16(rt, guard16, ny), l16 = tu_alloc(rt, nl), s16 = tu_alloc(rt, nl);
    clf_ptr dy16 = upload16(rt, dyh, ny), gq16 = upload16(rt, guard16, ngq);
    clf_ptr gkv16 = upload16(rt, guard16, ngkv);
    clf_attn_fused a16 = desc(c, t, y16, l16, q16, kv16, dkeep, ys);
    tu_ok(clf_op_attn_fused_forward_ex(rt, path, &a16, &err), &err, "forward 16-bit");

    float *yf = malloc(ny * 4), *lf = malloc(nl * 4), *lg = malloc(nl * 4);
    uint16_t *yg = malloc(ny * 2), *again = malloc((ny > ngq ? ny : ngq) * 2);
    tu_download(rt, y32, yf, ny);
    tu_download(rt, l32, lf, nl);
    tu_download(rt, l16, lg, nl);
    download16(rt, y16, yg, ny);
    /* y's head columns, and the guards */
    float *want = malloc(ny * 4);
    uint16_t *got = malloc(ny * 2);
    size_t n = 0;
    int guards = 1;
    for (size_t row = 0; row < c->B * c->T; row++)
        for (size_t j = 0; j < ys; j++) {
            if (j >= C) {
                guards &= yg[row * ys + j] == 0x5A5Au;
                continue;
            }
            want[n] = yf[row * ys + j];
            got[n++] = yg[row * ys + j];
        }
    char nm[260];
    snprintf(nm, sizeof nm, "%s: y", name);
    close16(nm, t, got, want, n);
    TU_CHECK(guards, "%s: columns past the heads keep their bits", name);
    int lse_ok = 1;
    for (size_t i = 0; i < nl; i++)
        lse_ok &= isinf(lf[i]) ? isinf(lg[i]) && lg[i] < 0
                               : fabs((double)lg[i] - lf[i]) <= 1e-6 + 1e-6 * fabs(lf[i]);
    TU_CHECK(lse_ok, "%s: lse as float32's", name);
    /* a rerun's bits: on the devices; under a checking simulator (tu_checker) its
     * time goes to what the simulator checks (races, bounds, barriers) */
    const int rerun = !tu_checker();
    if (rerun) {
        tu_ok(clf_op_attn_fused_forward_ex(rt, path, &a16, &err), &err, "forward 16-bit again");
        download16(rt, y16, again, ny);
        TU_CHECK(memcmp(again, yg, ny * 2) == 0, "%s: forward reruns bit-identical", name);
    }

    /* backward: both sides from the y the 16-bit forward stored */
    for (size_t i = 0; i < ny; i++)
        yf[i] = widen(t, yg[i]);
    float *dyw = malloc(ny * 4);
    for (size_t i = 0; i < ny; i++)
        dyw[i] = dyf[i];
    clf_ptr dy32 = tu_upload(rt, dyw, ny);
    tu_ok(clf_ptr_write(rt, y32, yf, ny, &err), &err, "y");
    const clf_attn_fused_grad g32 = acase_grad(c, dy32, gq32, gkv32, s32);
    const clf_attn_fused_grad g16 = acase_grad(c, dy16, gq16, gkv16, s16);
    tu_ok(clf_op_attn_fused_backward_ex(rt, path, &a32, &g32, &err), &err, "backward f32");
    tu_ok(clf_op_attn_fused_backward_ex(rt, path, &a16, &g16, &err), &err, "backward 16-bit");
    float *gqf = malloc(ngq * 4), *gkvf = malloc(ngkv * 4);
    uint16_t *gqg = malloc(ngq * 2), *gkvg = malloc(ngkv * 2);
    tu_download(rt, gq32, gqf, ngq);
    download16(rt, gq16, gqg, ngq);
    if (c->cross) {
        tu_download(rt, gkv32, gkvf, ngkv);
        download16(rt, gkv16, gkvg, ngkv);
        snprintf(nm, sizeof nm, "%s: dq", name);
        close16(nm, t, gqg, gqf, ngq);
        snprintf(nm, sizeof nm, "%s: dk, dv", name);
        close16(nm, t, gkvg, gkvf, ngkv);
    } else {
        snprintf(nm, sizeof nm, "%s: dq, dk, dv", name);
        close16(nm, t, gqg, gqf, ngq);
    }
    if (rerun) {
        tu_ok(clf_op_attn_fused_backward_ex(rt, path, &a16, &g16, &err), &err, "backward again");
        download16(rt, gq16, again, ngq);
        TU_CHECK(memcmp(again, gqg, ngq * 2) == 0, "%s: backward reruns bit-identical", name);
    }

    clf_ptr frees[] = {dkeep, q32, kv32, y32, l32, s32, gq32, gkv32, l16, s16, dy32};
    for (size_t i = 0; i < sizeof frees / sizeof frees[0]; i++)
        tu_free(frees[i]);
    clf_ptr frees16[] = {q16, kv16, y16, dy16, gq16, gkv16};
    for (size_t i = 0; i < sizeof frees16 / sizeof frees16[0]; i++)
        clf_buffer_destroy(frees16[i].buf);
    void *hf[] = {qf, kvf, dyf,   qh,   kvh, dyh, keep, guard, guard16, yf,  lf,
                  lg, yg,  again, want, got, dyw, gqf,  gkvf,  gqg,     gkvg};
    for (size_t i = 0; i < sizeof hf / sizeof hf[0]; i++)
        free(hf[i]);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng r = tu_rng_new(37);
    const int sim = tu_simulator();
    const acase cases[] = {
        /* B NH T S HS causal cross masked window alibi p_drop */
        {2, 2, 8, 8, 8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 3, 37, 37, 32, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 2, 37, 37, 96, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 2, 37, 53, 64, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 2, 5, 29, 16, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 2, 64, 64, 32, 1, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 3, 29, 29, 32, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 2, 37, 37, 32, 1, 0, 0, 0, 0, 0.2f, 0, 0, 0, 0, 0, 0, 0},
        {2, 2, 21, 33, 16, 0, 1, 1, 0, 0, 0.3f, 0, 0, 0, 0, 0, 0, 0},
    };
    const clf_dtype ts[] = {CLF_DT_BF16, CLF_DT_F16};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        acase c = cases[i];
        if (sim && c.T * c.S * c.HS > 40000)
            c.T = c.T / 4, c.S = c.cross ? c.S / 4 + 1 : c.T;
        for (int k = 0; k < 2; k++) {
            if (sim && (size_t)k != i % 2)
                continue;
            run(rt, &c, ts[k], CLF_OPS_PATH_ITEM, &r);
            run(rt, &c, ts[k], CLF_OPS_PATH_GROUP, &r);
        }
    }
    clf_ptr a = tu_alloc(rt, 64);
    clf_attn_fused bad = desc(&(acase){1, 1, 2, 2, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
                              (clf_dtype)7, a, a, a, a, a, 4);
    clf_error err;
    TU_CHECK(clf_op_attn_fused_forward(rt, &bad, &err) == CLF_ERR_ARG,
             "an unknown storage type is refused: %s", err.msg);
    tu_free(a);
    clf_runtime_destroy(rt);
    return tu_finish();
}
