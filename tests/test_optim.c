/*
 * test_optim.c - clip_scale and AdamW (cl/optim.cl) against float64
 * references of torch.nn.utils.clip_grad_norm_ and torch.optim.AdamW.
 *
 * Checks:
 * - clip_scale: gnorm = sqrt(sumsq), gscale = min(1, max_norm/(gnorm+1e-6)),
 *   1 when max_norm <= 0, for norms 0, below, at and above the limit
 *   (rtol 1e-6);
 * - AdamW: 6 steps with a changing learning rate (as a schedule would),
 *   fresh random gradients each step (some tiny, some zero, so eps matters),
 *   gscale read from the device (0.37 and 1), n = 1, 7, 1000, 100003 with
 *   n_decay = 0, about n/2, n, at element offsets; params, m and v against
 *   PyTorch's single-tensor algorithm in float64: p atol 1e-6 rtol 1e-6,
 *   m atol 5e-7 rtol 1e-5 (m cancels O(1) gradients: float error ~1e-7
 *   absolute), v atol 1e-12 rtol 1e-5;
 * - the decay boundary exactly: with zero gradients and zero moments an
 *   element < n_decay becomes p * (float)(1 - lr*wd), the rest stay bit-equal;
 * - a step at lr_mult 0.25 (layer-wise decay's factor), and in the
 *   loss-scaling script every other step at 0.5, against the reference at
 *   lr * lr_mult (its weight decay too);
 * - Adam (weight_decay = 0) and invalid hyper-parameters (step 0, lr_mult
 *   0) refused;
 * - dynamic loss scaling (amp_step + AdamW reading its bias corrections
 *   from the device): a script of clean, inf and NaN steps with the state
 *   (scale, clean run, skipped, Adam's t) exactly as GradScaler's rules
 *   give it after every step; a skipped step leaves params, m and v bit for
 *   bit; a run step matches the float64 AdamW of the unscaled, clipped
 *   gradients at Adam's own t (tolerances as above); the scale never drops
 *   below 1 and interval 0 keeps it fixed.
 * Under a simulator (tu_simulator) n = 100003 is left out: 1000 is already
 * several work-groups and a tail.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/io/safetensors.h"
#include "model/ops/ops.h"
#include "tests/test_util.h"

/* clf_op_adamw_amp from its operands. */
static clf_status adamw_amp(clf_runtime *rt, clf_ptr p, clf_ptr g, clf_ptr m, clf_ptr v,
                            clf_ptr gscale, clf_ptr amp, size_t n, size_t n_decay,
                            const clf_adamw_hparams *h, clf_ptr p16, clf_dtype t16, clf_error *err)
{
    const clf_adamw_args a = {p, g, m, v, gscale, amp, p16, t16, n, n_decay, *h};
    return clf_op_adamw_amp(rt, &a, err);
}

/* Plain AdamW: clf_op_adamw_amp without loss scaling or a 16-bit copy. */
static clf_status adamw(clf_runtime *rt, clf_ptr p, clf_ptr g, clf_ptr m, clf_ptr v, clf_ptr gscale,
                        size_t n, size_t n_decay, const clf_adamw_hparams *h, clf_error *err)
{
    return adamw_amp(rt, p, g, m, v, gscale, (clf_ptr){NULL, 0}, n, n_decay, h, (clf_ptr){NULL, 0},
                     CLF_DT_F32, err);
}

static void test_clip(clf_runtime *rt)
{
    const double sumsq[] = {0.0, 0.25, 1.0, 4.0, 1e6, 4.0};
    const float maxn[] = {1.0f, 1.0f, 1.0f, 1.0f, 0.5f, 0.0f};
    for (int i = 0; i < 6; i++) {
        float s = (float)sumsq[i];
        clf_ptr ds = tu_upload(rt, &s, 1), out = tu_alloc(rt, 4);
        clf_error err;
        tu_ok(clf_op_clip_scale(rt, clf_ptr_at(out, 1), clf_ptr_at(out, 3), ds, maxn[i], &err),
              &err, "clip_scale");
        float got[4];
        tu_download(rt, out, got, 4);
        double norm = sqrt((double)s);
        double want[2] = {maxn[i] > 0 ? fmin(1.0, maxn[i] / (norm + 1e-6)) : 1.0, norm};
        float g2[2] = {got[1], got[3]};
        char name[96];
        snprintf(name, sizeof name, "clip_scale sumsq=%g max_norm=%g", sumsq[i], (double)maxn[i]);
        tu_close(name, g2, want, 2, 0.0, 1e-6);
        TU_CHECK(got[0] == 0.0f && got[2] == 0.0f, "clip_scale writes only its two outputs");
        tu_free(ds);
        tu_free(out);
    }
}

/* float64 torch.optim.AdamW (single tensor) step; g already includes gscale. */
static void adamw_ref(double *p, double *m, double *v, const double *g, size_t n, size_t n_decay,
                      const clf_adamw_hparams *h)
{
    double lr = (double)h->lr * (double)h->lr_mult, b1 = h->beta1, b2 = h->beta2, eps = h->eps,
           wd = h->weight_decay;
    double bc1 = 1.0 - pow(b1, h->step), bc2 = 1.0 - pow(b2, h->step);
    double step_size = lr / bc1, bc2_sqrt = sqrt(bc2);
    for (size_t i = 0; i < n; i++) {
        if (i < n_decay)
            p[i] *= 1.0 - lr * wd;
        m[i] += (1.0 - b1) * (g[i] - m[i]);
        v[i] = v[i] * b2 + (1.0 - b2) * g[i] * g[i];
        double denom = sqrt(v[i]) / bc2_sqrt + eps;
        p[i] += -step_size * m[i] / denom;
    }
}

/* The loss-scaling script: 'F' a finite step, 'I' an inf in the
 * gradients, 'N' a NaN. Host model of the rules beside the device. */
typedef struct amp_ref {
    double scale;
    int good, skipped, t;
} amp_ref;

static void amp_script(clf_runtime *rt, const char *script, double scale0, unsigned interval,
                       tu_rng *r)
{
    const size_t n = 1000, n_decay = 500;
    const float max_norm = 1.0f, b1 = 0.9f, b2 = 0.99f;
    float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g), *got = malloc(n * sizeof *got);
    float *before[3] = {malloc(n * sizeof(float)), malloc(n * sizeof(float)),
                        malloc(n * sizeof(float))};
    double *rp = malloc(n * sizeof *rp), *rm = calloc(n, sizeof *rm), *rv = calloc(n, sizeof *rv);
    double *rg = malloc(n * sizeof *rg);
    tu_fill(r, p, n, -1, 1);
    for (size_t i = 0; i < n; i++)
        rp[i] = p[i];
    clf_ptr dp = tu_alloc(rt, n), dg = tu_alloc(rt, n), dm = tu_alloc(rt, n), dv = tu_alloc(rt, n);
    clf_ptr sc = tu_alloc(rt, 3), amp = tu_alloc(rt, CLF_AMP_SLOTS);
    clf_ptr sumsq = clf_ptr_at(sc, 0), gscale = clf_ptr_at(sc, 1), gnorm = clf_ptr_at(sc, 2);
    clf_ptr bufs[3] = {dp, dm, dv};
    clf_error err;
    tu_ok(clf_ptr_write(rt, dp, p, n, &err), &err, "write");
    tu_ok(clf_ptr_zero(rt, dm, n, &err), &err, "zero");
    tu_ok(clf_ptr_zero(rt, dv, n, &err), &err, "zero");
    float a0[CLF_AMP_SLOTS] = {0};
    a0[CLF_AMP_SCALE] = (float)scale0;
    tu_ok(clf_ptr_write(rt, amp, a0, CLF_AMP_SLOTS, &err), &err, "write");
    amp_ref ref = {scale0, 0, 0, 0};
    clf_adamw_hparams h = {
        .beta1 = b1, .beta2 = b2, .eps = 1e-8f, .weight_decay = 0.1f, .lr_mult = 1.0f};
    int bad_state = 0, bad_skip = 0;
    for (int s = 0; script[s] != '\0'; s++) {
        const char kind = script[s];
        h.lr = 1e-3f * (float)(1 + s % 3); /* a schedule that moves on skipped steps too */
        h.lr_mult = s % 2 ? 0.5f : 1.0f;   /* layer-wise decay's factor on amp's step size */
        h.step = s + 1;                    /* the host's step: unused with amp */
        double ss = 0.0;
        for (size_t i = 0; i < n; i++) {
            const double u = tu_normal(r);
            g[i] = (float)(u * ref.scale); /* arrives scaled (exact: a power of two) */
            ss += (double)g[i] * (double)g[i];
        }
        if (kind != 'F')
            g[n / 3] = kind == 'I' ? INFINITY : NAN;
        float ssf = kind == 'F' ? (float)ss : kind == 'I' ? INFINITY : NAN;
        tu_ok(clf_ptr_write(rt, dg, g, n, &err), &err, "write");
        tu_ok(clf_ptr_write(rt, sumsq, &ssf, 1, &err), &err, "write");
        for (int b = 0; b < 3; b++)
            tu_download(rt, bufs[b], before[b], n);
        tu_ok(clf_op_amp_step(rt, amp, gscale, gnorm, sumsq,
                              &(clf_amp_hparams){max_norm, h.lr, b1, b2, interval}, &err),
              &err, "amp_step");
        tu_ok(adamw_amp(rt, dp, dg, dm, dv, gscale, amp, n, n_decay, &h, (clf_ptr){NULL, 0},
                        CLF_DT_F32, &err),
              &err, "adamw_amp");
        if (kind == 'F') {
            const double norm = sqrt((double)ssf) / ref.scale;
            const double clip = fmin(1.0, (double)max_norm / (norm + 1e-6));
            for (size_t i = 0; i < n; i++)
                rg[i] = (double)g[i] / ref.scale * clip;
            ref.t++;
            clf_adamw_hparams ht = h;
            ht.step = ref.t; /* Adam's own t */
            adamw_ref(rp, rm, rv, rg, n, n_decay, &ht);
            if (++ref.good >= (int)interval && interval > 0) {
                ref.scale *= 2.0;
                ref.good = 0;
            }
        } else {
            for (int b = 0; b < 3; b++) {
                tu_download(rt, bufs[b], got, n);
                bad_skip += memcmp(got, before[b], n * sizeof *got) != 0;
            }
            ref.skipped++;
            ref.good = 0;
            if (interval > 0)
                ref.scale = fmax(1.0, ref.scale / 2.0);
        }
        float a[CLF_AMP_SLOTS];
        tu_download(rt, amp, a, CLF_AMP_SLOTS);
        const int same = a[CLF_AMP_SCALE] == (float)ref.scale && a[CLF_AMP_GOOD] == ref.good &&
                         a[CLF_AMP_SKIPPED] == ref.skipped && a[CLF_AMP_T] == ref.t &&
                         a[CLF_AMP_RUN] == (kind == 'F');
        if (!same && bad_state++ == 0)
            fprintf(stderr,
                    "  step %d (%c): scale %g good %g skipped %g t %g run %g; expected %g %d %d "
                    "%d %d\n",
                    s + 1, kind, (double)a[CLF_AMP_SCALE], (double)a[CLF_AMP_GOOD],
                    (double)a[CLF_AMP_SKIPPED], (double)a[CLF_AMP_T], (double)a[CLF_AMP_RUN],
                    ref.scale, ref.good, ref.skipped, ref.t, kind == 'F');
    }
    char name[160];
    snprintf(name, sizeof name, "loss scaling '%s' from %g, interval %u", script, scale0, interval);
    TU_CHECK(bad_state == 0,
             "%s: scale, clean run, skipped and Adam's t as GradScaler's rules "
             "after every step (final scale %g, t %d, skipped %d)",
             name, ref.scale, ref.t, ref.skipped);
    TU_CHECK(bad_skip == 0, "%s: skipped steps leave params, m and v bit for bit", name);
    char what[200];
    snprintf(what, sizeof what, "%s: params", name);
    tu_download(rt, dp, got, n);
    tu_close(what, got, rp, n, 1e-6, 1e-6);
    snprintf(what, sizeof what, "%s: m", name);
    tu_download(rt, dm, got, n);
    tu_close(what, got, rm, n, 5e-7, 1e-5);
    snprintf(what, sizeof what, "%s: v", name);
    tu_download(rt, dv, got, n);
    tu_close(what, got, rv, n, 1e-12, 1e-5);
    tu_free(dp);
    tu_free(dg);
    tu_free(dm);
    tu_free(dv);
    tu_free(sc);
    tu_free(amp);
    for (int b = 0; b < 3; b++)
        free(before[b]);
    free(p);
    free(g);
    free(got);
    free(rp);
    free(rm);
    free(rv);
    free(rg);
}

static void test_adamw(clf_runtime *rt, size_t n, size_t n_decay, float wd, tu_rng *r)
{
    const size_t off = 2;
    float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g), *got = malloc(n * sizeof *got);
    double *rp = malloc(n * sizeof *rp), *rm = calloc(n, sizeof *rm), *rv = calloc(n, sizeof *rv);
    double *rg = malloc(n * sizeof *rg);
    tu_fill(r, p, n, -1, 1);
    for (size_t i = 0; i < n; i++)
        rp[i] = p[i];
    clf_ptr pb = tu_alloc(rt, n + off), gb = tu_alloc(rt, n + off);
    clf_ptr mb = tu_alloc(rt, n + off), vb = tu_alloc(rt, n + off), sb = tu_alloc(rt, 2);
    clf_ptr dp = clf_ptr_at(pb, off), dg = clf_ptr_at(gb, off), dm = clf_ptr_at(mb, off);
    clf_ptr dv = clf_ptr_at(vb, off), ds = clf_ptr_at(sb, 1);
    clf_error err;
    tu_ok(clf_ptr_write(rt, dp, p, n, &err), &err, "write");
    clf_adamw_hparams h = {.lr = 1e-3f,
                           .beta1 = 0.9f,
                           .beta2 = 0.99f,
                           .eps = 1e-8f,
                           .weight_decay = wd,
                           .step = 0,
                           .lr_mult = 1.0f};
    const float lrs[] = {1e-3f, 3e-3f, 2e-3f, 1e-3f, 5e-4f, 1e-4f};
    for (int s = 0; s < 6; s++) {
        h.step = s + 1;
        h.lr = lrs[s];
        h.lr_mult = s == 4 ? 0.25f : 1.0f; /* a slice at a quarter of the rate */
        float gscale = (s % 2) ? 0.37f : 1.0f;
        for (size_t i = 0; i < n; i++) {
            double u = tu_normal(r);
            int kind = (int)(tu_u32(r) % 10);
            g[i] = (float)(kind == 0 ? 0.0 : kind == 1 ? 1e-7 * u : u);
            rg[i] = (double)(g[i] * gscale); /* the device multiplies in float */
        }
        tu_ok(clf_ptr_write(rt, dg, g, n, &err), &err, "write");
        tu_ok(clf_ptr_write(rt, ds, &gscale, 1, &err), &err, "write");
        tu_ok(adamw(rt, dp, dg, dm, dv, ds, n, n_decay, &h, &err), &err, "adamw");
        adamw_ref(rp, rm, rv, rg, n, n_decay, &h);
    }
    char name[128];
    snprintf(name, sizeof name, "adamw 6 steps params n=%zu n_decay=%zu wd=%g", n, n_decay,
             (double)wd);
    tu_download(rt, dp, got, n);
    tu_close(name, got, rp, n, 1e-6, 1e-6);
    snprintf(name, sizeof name, "adamw 6 steps m n=%zu n_decay=%zu", n, n_decay);
    tu_download(rt, dm, got, n);
    tu_close(name, got, rm, n, 5e-7, 1e-5);
    snprintf(name, sizeof name, "adamw 6 steps v n=%zu n_decay=%zu", n, n_decay);
    tu_download(rt, dv, got, n);
    tu_close(name, got, rv, n, 1e-12, 1e-5);

    /* decay boundary, exactly: zero gradient and zero moments */
    tu_ok(clf_ptr_write(rt, dp, p, n, &err), &err, "write");
    tu_ok(clf_ptr_zero(rt, dg, n, &err), &err, "zero");
    tu_ok(clf_ptr_zero(rt, dm, n, &err), &err, "zero");
    tu_ok(clf_ptr_zero(rt, dv, n, &err), &err, "zero");
    h.step = 1;
    h.lr = 0.01f;
    tu_ok(adamw(rt, dp, dg, dm, dv, ds, n, n_decay, &h, &err), &err, "adamw");
    tu_download(rt, dp, got, n);
    float decay = (float)(1.0 - (double)h.lr * (double)wd);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = i < n_decay ? p[i] * decay : p[i];
        bad += memcmp(&want, &got[i], sizeof want) != 0;
    }
    TU_CHECK(bad == 0,
             "adamw n=%zu n_decay=%zu: decay applies exactly to [0, n_decay) (%zu "
             "differ)",
             n, n_decay, bad);
    float pad[2];
    tu_download(rt, pb, pad, 2);
    TU_CHECK(pad[0] == 0.0f && pad[1] == 0.0f, "adamw n=%zu writes nothing before its offset", n);

    tu_free(pb);
    tu_free(gb);
    tu_free(mb);
    tu_free(vb);
    tu_free(sb);
    free(p);
    free(g);
    free(got);
    free(rp);
    free(rm);
    free(rv);
    free(rg);
}

/* AdamW writing the 16-bit weights beside the float32 masters
 * (train.precision bf16 | fp16): over 3 steps the float32 parameters and
 * moments are bit for bit those of the same steps without the copy, and
 * after each step the copy holds every parameter rounded to t (the host's
 * clf_f32_to_bf16 / clf_f32_to_f16), from an odd element offset, with the
 * elements around it untouched; a skipped step (amp run 0) leaves it as it
 * was. */
static void test_adamw16(clf_runtime *rt, clf_dtype t, size_t n, tu_rng *r)
{
    const size_t off = 3, guard = 5 + (n % 2); /* n + off + guard even: whole fill words */
    float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g);
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    uint16_t *h16 = malloc((n + off + guard) * sizeof *h16);
    tu_fill(r, p, n, -2, 2);
    clf_ptr pa = tu_alloc(rt, n), pb = tu_alloc(rt, n), gb = tu_alloc(rt, n);
    clf_ptr ma = tu_alloc(rt, n), va = tu_alloc(rt, n), mb = tu_alloc(rt, n), vb = tu_alloc(rt, n);
    clf_ptr sb = tu_alloc(rt, 1), amp = tu_alloc(rt, CLF_AMP_SLOTS);
    clf_buffer *b16 = NULL;
    clf_error err;
    tu_ok(clf_buffer_create(rt, (n + off + guard) * 2, &b16, &err), &err, "buffer");
    tu_ok(clf_buffer_fill(rt, b16, 0, (n + off + guard) * 2, 0xA5A5A5A5u, &err), &err, "fill");
    tu_ok(clf_ptr_write(rt, pa, p, n, &err), &err, "write");
    tu_ok(clf_ptr_write(rt, pb, p, n, &err), &err, "write");
    const float one = 1.0f;
    tu_ok(clf_ptr_write(rt, sb, &one, 1, &err), &err, "write");
    clf_adamw_hparams h = {.lr = 3e-3f,
                           .beta1 = 0.9f,
                           .beta2 = 0.99f,
                           .eps = 1e-8f,
                           .weight_decay = 0.1f,
                           .lr_mult = 1.0f};
    const clf_ptr p16 = {b16, off};
    size_t bad = 0, badf = 0, first = n;
    for (int step = 1; step <= 3; step++) {
        h.step = step;
        for (size_t i = 0; i < n; i++)
            g[i] = (float)tu_normal(r);
        tu_ok(clf_ptr_write(rt, gb, g, n, &err), &err, "write");
        tu_ok(adamw(rt, pa, gb, ma, va, sb, n, n / 2, &h, &err), &err, "adamw");
        tu_ok(adamw_amp(rt, pb, gb, mb, vb, sb, (clf_ptr){NULL, 0}, n, n / 2, &h, p16, t, &err),
              &err, "adamw with a 16-bit copy");
        tu_download(rt, pa, want, n);
        tu_download(rt, pb, got, n);
        badf += memcmp(want, got, n * sizeof *got) != 0;
        tu_ok(clf_buffer_read(rt, b16, 0, h16, (n + off + guard) * 2, &err), &err, "read");
        for (size_t i = 0; i < n + off + guard; i++) {
            const int inside = i >= off && i < off + n;
            const uint16_t w = !inside            ? 0xA5A5
                               : t == CLF_DT_BF16 ? clf_f32_to_bf16(got[i - off])
                                                  : clf_f32_to_f16(got[i - off]);
            if (h16[i] != w && bad++ == 0)
                first = i;
        }
    }
    tu_download(rt, ma, want, n);
    tu_download(rt, mb, got, n);
    badf += memcmp(want, got, n * sizeof *got) != 0;
    TU_CHECK(badf == 0,
             "adamw %s n=%zu: float32 parameters and moments bit for bit those "
             "without the copy",
             clf_dtype_name(t), n);
    TU_CHECK(bad == 0,
             "adamw %s n=%zu: the copy is every parameter rounded, the guards "
             "untouched (%zu wrong, first at %zu)",
             clf_dtype_name(t), n, bad, first);

    /* a skipped step (amp run 0) leaves the copy as it was */
    const float skip[CLF_AMP_SLOTS] = {[CLF_AMP_SCALE] = 1.0f, [CLF_AMP_RUN] = 0.0f};
    tu_ok(clf_ptr_write(rt, amp, skip, CLF_AMP_SLOTS, &err), &err, "write");
    uint16_t *before = malloc((n + off + guard) * sizeof *before);
    memcpy(before, h16, (n + off + guard) * sizeof *before);
    tu_ok(adamw_amp(rt, pb, gb, mb, vb, sb, amp, n, n / 2, &h, p16, t, &err), &err,
          "adamw skipped");
    tu_ok(clf_buffer_read(rt, b16, 0, h16, (n + off + guard) * 2, &err), &err, "read");
    TU_CHECK(memcmp(before, h16, (n + off + guard) * 2) == 0,
             "adamw %s: a skipped step leaves the copy untouched", clf_dtype_name(t));
    TU_CHECK(adamw_amp(rt, pb, gb, mb, vb, sb, amp, n, n / 2, &h, (clf_ptr){NULL, 0}, t, &err) ==
                 CLF_ERR_ARG,
             "adamw refuses a %s copy without its buffer", clf_dtype_name(t));
    free(before);
    clf_buffer_destroy(b16);
    tu_free(pa), tu_free(pb), tu_free(gb), tu_free(ma), tu_free(va), tu_free(mb), tu_free(vb);
    tu_free(sb), tu_free(amp);
    free(p), free(g), free(want), free(got), free(h16);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng r = tu_rng_new(6);
    test_clip(rt);
    const size_t ns[] = {1, 7, 1000, 100003};
    for (size_t i = 0; i < (tu_simulator() ? 3 : 4); i++) {
        size_t n = ns[i];
        test_adamw(rt, n, 0, 0.1f, &r);
        test_adamw(rt, n, n / 2 + 1 > n ? n : n / 2 + 1, 0.1f, &r);
        test_adamw(rt, n, n, 0.1f, &r);
    }
    test_adamw(rt, 1000, 500, 0.0f, &r); /* Adam */
    test_adamw16(rt, CLF_DT_BF16, 1001, &r);
    test_adamw16(rt, CLF_DT_F16, 4099, &r);
    amp_script(rt, "FFIFFFNFFFF", 1024.0, 3, &r);
    amp_script(rt, "IIFIII", 4.0, 2, &r);      /* halves to the floor of 1 and stays */
    amp_script(rt, "FFFFIFFFF", 256.0, 0, &r); /* interval 0: a fixed scale */
    clf_error err;
    clf_ptr a = tu_alloc(rt, 4);
    clf_adamw_hparams h = {.lr = 1e-3f,
                           .beta1 = 0.9f,
                           .beta2 = 0.99f,
                           .eps = 1e-8f,
                           .weight_decay = 0.1f,
                           .step = 0,
                           .lr_mult = 1.0f};
    TU_CHECK(adamw(rt, a, a, a, a, a, 1, 1, &h, &err) == CLF_ERR_ARG, "adamw refuses step 0");
    h.step = 1;
    h.lr_mult = 0.0f;
    TU_CHECK(adamw(rt, a, a, a, a, a, 1, 1, &h, &err) == CLF_ERR_ARG, "adamw refuses lr_mult 0");
    h.lr_mult = 1.0f;
    TU_CHECK(adamw(rt, a, a, a, a, a, 1, 2, &h, &err) == CLF_ERR_ARG, "adamw refuses n_decay > n");
    tu_free(a);
    clf_runtime_destroy(rt);
    return tu_finish();
}
