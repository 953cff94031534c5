/*
 * test_loss.c - fused softmax cross-entropy (cl/loss.cl) against float64.
 *
 * Checks at (R, V) = (1,1), (7,33), (33,257), (64,1000), (5,5000), label
 * smoothing 0 and 0.1, some rows ignored (ignore_index -1) and one row with an
 * out-of-range target, grad_scale = 1/valid rows; through the op, and both
 * kernels launched directly (row per work-item; group per row with groups
 * of 256, the GPU size, and 1):
 * - per-row losses vs float64 PyTorch definition
 *   loss = (1-eps)(-log p_t) + eps * mean_j(-log p_j): atol 2e-5, rtol 1e-5;
 * - dlogits vs float64 grad_scale*(p - (1-eps) onehot - eps/V): atol 1e-7,
 *   rtol 1e-4 (the gradient's scale is grad_scale ~ 1/R);
 * - dlogits vs central finite differences of the float64 loss
 *   L = grad_scale * sum_r loss_r (h = 1e-4; up to 3 rows, every logit when
 *   V <= 300, else the target and 200 random ones): same tolerance;
 * - ignored rows give loss 0 and gradient 0 exactly;
 * - in place (dlogits aliasing logits) and forward-only give the same bits;
 * - stability: logits shifted by +/-1000 (loss then float-limited:
 *   atol 2e-3) stay finite.
 * Under a simulator (tu_simulator) (64, 1000) is (16, 1000): the rows are
 * independent, and V = 1000 still takes groups of 256 round their loop.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ops/ops.h"
#include "model/ops/ops_internal.h"
#include "tests/test_util.h"

/* float64 loss of one row; grad (if not NULL) gets d loss / d z. */
static double ce_row(const double *z, int t, size_t V, double eps, double *grad)
{
    double m = -INFINITY, s = 0, mean = 0;
    for (size_t j = 0; j < V; j++)
        m = fmax(m, z[j]);
    for (size_t j = 0; j < V; j++) {
        s += exp(z[j] - m);
        mean += z[j];
    }
    mean /= (double)V;
    double lse = m + log(s);
    if (grad)
        for (size_t j = 0; j < V; j++)
            grad[j] = exp(z[j] - lse) - eps / (double)V - ((int)j == t ? 1.0 - eps : 0.0);
    return (1.0 - eps) * (lse - z[t]) + eps * (lse - mean);
}

/* W = 0: through the op (the device's choice); W = ROWS: the one-row-per-
 * work-item kernel (CPUs); else the work-group-per-row kernel with groups of
 * W (the GPU's 256, or 1; fewer where the kernel allows fewer), so that
 * every variant is tested on any device. */
#define ROWS ((size_t)-1)
static void ce(clf_runtime *rt, size_t W, clf_ptr losses, clf_ptr dz, clf_ptr z, clf_ptr t,
               size_t R, size_t V, float eps, int ignore, float gs, clf_ptr gmul)
{
    clf_error err;
    if (W == 0) {
        tu_ok(clf_op_cross_entropy(
                  rt, &(clf_xent_args){losses, dz, z, t, gmul, R, V, eps, gs, ignore}, &err),
              &err, "cross_entropy");
        return;
    }
    clf_kernel *k;
    int rows = W == ROWS;
    tu_ok(clf_kernel_get(rt, "loss", rows ? "cross_entropy_rows" : "cross_entropy", &k, &err), &err,
          "kernel");
    clf_ptr d = dz.buf ? dz : z;
    size_t l = clf_ops_group_size(k, rows ? 16 : W); /* within the kernel's limit */
    clf_arg a[] = {CLF_ARG_BUF(losses.buf),
                   CLF_ARG_U64(losses.off),
                   CLF_ARG_BUF(d.buf),
                   CLF_ARG_U64(d.off),
                   CLF_ARG_BUF(z.buf),
                   CLF_ARG_U64(z.off),
                   CLF_ARG_BUF(t.buf),
                   CLF_ARG_U64(t.off),
                   CLF_ARG_U32(R),
                   CLF_ARG_U32(V),
                   CLF_ARG_F32(eps),
                   CLF_ARG_I32(ignore),
                   CLF_ARG_F32(gs),
                   CLF_ARG_I32(dz.buf != NULL),
                   CLF_ARG_BUF(gmul.buf ? gmul.buf : z.buf),
                   CLF_ARG_U64(gmul.off),
                   CLF_ARG_I32(gmul.buf != NULL),
                   CLF_ARG_LOCAL(2 * l * sizeof(float))};
    size_t g = rows ? R : R * l; /* one group a row */
    tu_ok(clf_kernel_launch(rt, k, 1, &g, &l, rows ? 17 : 18, a, &err), &err, "cross_entropy W");
}

static void test_ce(clf_runtime *rt, size_t W, size_t R, size_t V, float eps, double shift,
                    tu_rng *r)
{
    const int ignore = -1;
    float *z = malloc(R * V * sizeof *z), *got_l = malloc(R * sizeof *got_l);
    float *got_g = malloc(R * V * sizeof *got_g), *g2 = malloc(R * V * sizeof *g2);
    float *l2 = malloc(R * sizeof *l2);
    double *zd = malloc(V * sizeof *zd), *ref_l = malloc(R * sizeof *ref_l);
    double *ref_g = malloc(R * V * sizeof *ref_g);
    int32_t *t = malloc(R * sizeof *t);
    for (size_t i = 0; i < R * V; i++)
        z[i] = (float)(3.0 * tu_normal(r) + shift);
    size_t valid = 0;
    for (size_t i = 0; i < R; i++) {
        t[i] = (int32_t)(tu_u32(r) % V);
        if (R > 1 && i % 5 == 3)
            t[i] = ignore;
        if (R > 6 && i == 6)
            t[i] = (int32_t)V; /* out of range: treated as ignored */
        valid += t[i] != ignore && t[i] >= 0 && t[i] < (int32_t)V;
    }
    float gs = valid ? 1.0f / (float)valid : 1.0f;
    for (size_t i = 0; i < R; i++) {
        if (t[i] < 0 || t[i] >= (int32_t)V) {
            ref_l[i] = 0;
            for (size_t j = 0; j < V; j++)
                ref_g[i * V + j] = 0;
            continue;
        }
        for (size_t j = 0; j < V; j++)
            zd[j] = z[i * V + j];
        ref_l[i] = ce_row(zd, t[i], V, eps, ref_g + i * V);
        for (size_t j = 0; j < V; j++)
            ref_g[i * V + j] *= gs;
    }

    clf_ptr dz = tu_upload(rt, z, R * V), dt = tu_upload_i32(rt, t, R);
    clf_ptr dl = tu_alloc(rt, R), dg = tu_alloc(rt, R * V), none = {NULL, 0};
    ce(rt, W, dl, dg, dz, dt, R, V, eps, ignore, gs, none);
    tu_download(rt, dl, got_l, R);
    tu_download(rt, dg, got_g, R * V);
    char name[160];
    int big = shift != 0.0;
    char how[32];
    if (W == ROWS)
        snprintf(how, sizeof how, "rows");
    else
        snprintf(how, sizeof how, "W=%zu", W);
    snprintf(name, sizeof name, "cross_entropy %s loss R=%zu V=%zu eps=%.2g shift=%g", how, R, V,
             (double)eps, shift);
    tu_close(name, got_l, ref_l, R, big ? 2e-3 : 2e-5, 1e-5);
    snprintf(name, sizeof name, "cross_entropy %s dlogits R=%zu V=%zu eps=%.2g shift=%g", how, R, V,
             (double)eps, shift);
    tu_close(name, got_g, ref_g, R * V, 1e-7, 1e-4);

    size_t bad = 0;
    for (size_t i = 0; i < R; i++)
        if (t[i] < 0 || t[i] >= (int32_t)V) {
            bad += got_l[i] != 0.0f;
            for (size_t j = 0; j < V; j++)
                bad += got_g[i * V + j] != 0.0f;
        }
    TU_CHECK(bad == 0, "cross_entropy R=%zu V=%zu: ignored rows give exactly 0 (%zu nonzero)", R, V,
             bad);

    /* forward only, then in place: same bits */
    ce(rt, W, dl, none, dz, dt, R, V, eps, ignore, gs, none);
    tu_download(rt, dl, l2, R);
    TU_CHECK(memcmp(l2, got_l, R * sizeof *l2) == 0,
             "cross_entropy R=%zu V=%zu: forward-only losses identical", R, V);
    /* a device multiplier (fp16's loss scale, a power of two): exactly
     * 1024 times the gradient, the same losses */
    const float mul = 1024.0f;
    clf_ptr dmul = tu_upload(rt, &mul, 1);
    ce(rt, W, dl, dg, dz, dt, R, V, eps, ignore, gs, dmul);
    tu_download(rt, dg, g2, R * V);
    tu_download(rt, dl, l2, R);
    size_t off = 0;
    for (size_t i = 0; i < R * V; i++)
        off += g2[i] != mul * got_g[i];
    TU_CHECK(off == 0 && memcmp(l2, got_l, R * sizeof *l2) == 0,
             "cross_entropy %s R=%zu V=%zu: a device multiplier of %g scales the gradient "
             "exactly (%zu differ)",
             how, R, V, (double)mul, off);
    tu_free(dmul);
    ce(rt, W, dl, dz, dz, dt, R, V, eps, ignore, gs, none);
    tu_download(rt, dz, g2, R * V);
    tu_download(rt, dl, l2, R);
    TU_CHECK(memcmp(g2, got_g, R * V * sizeof *g2) == 0 && memcmp(l2, got_l, R * sizeof *l2) == 0,
             "cross_entropy R=%zu V=%zu: in place (dlogits = logits) identical", R, V);

    /* central differences of L = gs * sum_r loss_r on up to 3 valid rows */
    if (!big) {
        size_t nfd = 0, rows = 0, cap = 3 * V;
        float *gf = malloc(cap * sizeof *gf);
        double *fd = malloc(cap * sizeof *fd);
        for (size_t i = 0; i < R && rows < 3; i++) {
            if (t[i] < 0 || t[i] >= (int32_t)V)
                continue;
            rows++;
            /* every column of small rows; the target and 200 random columns of large */
            size_t ncol = V <= 300 ? V : 201;
            for (size_t c = 0; c < ncol; c++) {
                size_t j = V <= 300 ? c : c == 0 ? (size_t)t[i] : tu_u32(r) % V;
                double h = 1e-4, L[2];
                for (int k = 0; k < 2; k++) {
                    for (size_t jj = 0; jj < V; jj++)
                        zd[jj] = z[i * V + jj];
                    zd[j] += k ? -h : h;
                    L[k] = gs * ce_row(zd, t[i], V, eps, NULL);
                }
                fd[nfd] = (L[0] - L[1]) / (2 * h);
                gf[nfd++] = got_g[i * V + j];
            }
        }
        snprintf(name, sizeof name, "cross_entropy dlogits vs finite differences R=%zu V=%zu", R,
                 V);
        tu_close(name, gf, fd, nfd, 1e-7, 1e-4);
        free(gf);
        free(fd);
    }
    tu_free(dz);
    tu_free(dt);
    tu_free(dl);
    tu_free(dg);
    free(z);
    free(got_l);
    free(got_g);
    free(g2);
    free(l2);
    free(zd);
    free(ref_l);
    free(ref_g);
    free(t);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng r = tu_rng_new(5);
    const size_t shapes[][2] = {
        {1, 1}, {7, 33}, {33, 257}, {tu_simulator() ? 16 : 64, 1000}, {5, 5000}};
    const size_t Ws[] = {0, 256, 1, ROWS};
    for (int w = 0; w < 4; w++) {
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            test_ce(rt, Ws[w], shapes[i][0], shapes[i][1], 0.0f, 0.0, &r);
            test_ce(rt, Ws[w], shapes[i][0], shapes[i][1], 0.1f, 0.0, &r);
        }
        test_ce(rt, Ws[w], 7, 65, 0.1f, 1000.0, &r);
        test_ce(rt, Ws[w], 7, 65, 0.0f, -1000.0, &r);
    }
    clf_error err;
    clf_ptr a = tu_alloc(rt, 4);
    TU_CHECK(clf_op_cross_entropy(rt, &(clf_xent_args){a, a, a, a, {NULL, 0}, 1, 0, 0.0f, 1.0f, -1},
                                  &err) == CLF_ERR_ARG,
             "cross_entropy refuses V = 0");
    tu_free(a);
    clf_runtime_destroy(rt);
    return tu_finish();
}
