/*
 * test_model_grad.c - the whole model's backward against finite differences
 * of its own forward, on tiny models covering the paths the PyTorch fixtures
 * do not (dropout at every site, gelu_tanh, post-norm with RMSNorm, no final
 * norm, norms without bias, sinusoidal positions with scaled embeddings,
 * label smoothing with ignored targets), plus gradient accumulation.
 *
 * Method: parameters are set to random values of a useful scale (weights
 * normal(0, 0.25), norm weights 1 + normal(0, 0.1), biases normal(0, 0.1))
 * so that every path carries signal. For each parameter tensor a random
 * direction d (normal entries, on that tensor only) gives the directional
 * derivative two ways: g . d from the device gradient, and central
 * differences D(h) = (L(p + h d) - L(p - h d)) / 2h at h = 2e-3 and 1e-3,
 * Richardson-extrapolated, (4 D(h/2) - D(h)) / 3, so that the h^2 error
 * term cancels (attention's curvature makes it visible otherwise), with L
 * computed by the device forward (train mode, so the dropout masks are the
 * keyed masks the backward regenerates; the micro-batch counter is set back
 * after the backward) and summed in double on the host from the
 * per-position losses. Pass: |fd - g.d| <= 2e-3 |g.d| + 5e-4 (float32
 * forward rounding gives each difference an error of about 1e-7 / h;
 * smooth activations only, so no kink lies between p - hd and p + hd).
 * Also: gradients of two micro-batches accumulate to the sum of each
 * batch's own gradients (relative 1e-5), and clf_model_memory_estimate
 * grows with the batch.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "model/model.h"
#include "test_util.h"

static const char *base_yaml =
    "model:\n"
    "  kind: decoder\n"
    "  vocab: {tokenizer: char, size: 11}\n"
    "  context: 8\n"
    "  embedding: {dim: 16}\n"
    "  blocks:\n"
    "    repeat: 2\n"
    "    attention: {heads: 2}\n"
    "    ffn: {hidden: 24}\n"
    "train:\n"
    "  batch: 2\n"
    "  seed: 5\n";

typedef struct variant {
    const char *name;
    const char *sets[12];
} variant;

static const variant variants[] = {
    {"pre-LN gelu_tanh learned tied, dropout everywhere",
     {"model.blocks.ffn.activation=gelu_tanh", "model.embedding.dropout=0.1",
      "model.blocks.dropout=0.1", "model.blocks.attention.dropout=0.2",
      "model.blocks.ffn.dropout=0.1", NULL}},
    {"post-RMSNorm swiglu rope untied, no final norm, label smoothing, attention dropout",
     {"model.blocks.norm.type=rmsnorm", "model.blocks.norm.placement=post",
      "model.blocks.ffn.activation=swiglu", "model.positional.type=rope",
      "model.head.tie_embedding=false", "model.final_norm.type=none",
      "train.label_smoothing=0.1", "model.blocks.attention.dropout=0.2",
      "model.blocks.attention.bias=false", NULL}},
    {"pre-LN without norm bias, sinusoidal, scaled embeddings, gelu, ffn without bias",
     {"model.blocks.norm.bias=false", "model.positional.type=sinusoidal",
      "model.embedding.scale=true", "model.blocks.ffn.bias=false", NULL}},
};

static void ok(clf_status st, const clf_error *e, const char *what) { tu_ok(st, e, what); }

static double loss_of(clf_model *m, int B, int T, float *rows)
{
    clf_error e;
    ok(clf_model_forward(m, 1, &e), &e, "forward");
    ok(clf_model_losses_read(m, rows, &e), &e, "losses");
    double s = 0;
    for (int i = 0; i < B * T; i++)
        s += rows[i];
    return s / clf_model_target_count(m);
}

static void randomize(clf_model *m, tu_rng *g)
{
    clf_error e;
    for (int i = 0; i < clf_model_param_count(m); i++) {
        const clf_param_info *p = clf_model_param_get(m, i);
        float *w = malloc(p->numel * sizeof *w);
        int is_norm = strstr(p->name, "ln") != NULL && strstr(p->name, ".weight") != NULL;
        for (size_t j = 0; j < p->numel; j++) {
            double z = tu_normal(g);
            w[j] = (float)(p->ndim == 2 ? 0.25 * z : is_norm ? 1.0 + 0.1 * z : 0.1 * z);
        }
        ok(clf_model_tensor_write(m, CLF_SLOT_PARAM, i, w, &e), &e, "write");
        free(w);
    }
}

static void batch(tu_rng *g, int B, int T, int V, int32_t *x, int32_t *y, int ignore)
{
    for (int i = 0; i < B * T; i++) {
        x[i] = (int32_t)(tu_u32(g) % (uint32_t)V);
        y[i] = (int32_t)(tu_u32(g) % (uint32_t)V);
    }
    if (ignore) {
        y[0] = CLF_MODEL_IGNORE_INDEX;
        y[B * T - 3] = CLF_MODEL_IGNORE_INDEX;
    }
}

static void check_variant(clf_runtime *rt, const variant *v, int vi)
{
    clf_error e;
    clf_model_config cfg;
    ok(clf_config_parse_string(base_yaml, "base", NULL, 0, &cfg, &e), &e, "config");
    for (int i = 0; v->sets[i] != NULL; i++)
        ok(clf_config_set(&cfg, v->sets[i], &e), &e, v->sets[i]);
    const int B = 2, T = 8, V = 11;
    clf_model *m = NULL;
    ok(clf_model_create(rt, &cfg, V, B, CLF_MODEL_TRAIN, &m, &e), &e, "create");
    tu_rng g = tu_rng_new(100 + (uint64_t)vi);
    randomize(m, &g);
    int32_t x[16], y[16];
    float rows[16];
    batch(&g, B, T, V, x, y, 1);
    ok(clf_model_set_batch(m, x, y, B, T, &e), &e, "batch");
    ok(clf_model_forward(m, 1, &e), &e, "forward");
    ok(clf_model_backward(m, &e), &e, "backward");
    /* the backward advanced the micro-batch counter: go back to the masks it used */
    clf_model_state st = clf_model_state_get(m);
    st.micro = 0;
    clf_model_state_set(m, &st);

    printf("%s\n", v->name);
    const double h = 2e-3;
    int bad = 0;
    double worst = 0;
    for (int i = 0; i < clf_model_param_count(m); i++) {
        const clf_param_info *p = clf_model_param_get(m, i);
        size_t n = p->numel;
        float *w = malloc(n * sizeof *w), *gr = malloc(n * sizeof *gr), *wp = malloc(n * sizeof *wp);
        double *d = malloc(n * sizeof *d);
        ok(clf_model_tensor_read(m, CLF_SLOT_PARAM, i, w, &e), &e, "read");
        ok(clf_model_tensor_read(m, CLF_SLOT_GRAD, i, gr, &e), &e, "read grad");
        double gd = 0;
        for (size_t j = 0; j < n; j++) {
            d[j] = tu_normal(&g);
            gd += (double)gr[j] * d[j];
        }
        /* central differences at h and h/2, Richardson-extrapolated: the h^2
         * truncation term cancels (the curvature of attention is large) */
        double D[2];
        for (int r = 0; r < 2; r++) {
            double hr = r == 0 ? h : h / 2, lp, lm;
            for (size_t j = 0; j < n; j++)
                wp[j] = (float)(w[j] + hr * d[j]);
            ok(clf_model_tensor_write(m, CLF_SLOT_PARAM, i, wp, &e), &e, "write");
            lp = loss_of(m, B, T, rows);
            for (size_t j = 0; j < n; j++)
                wp[j] = (float)(w[j] - hr * d[j]);
            ok(clf_model_tensor_write(m, CLF_SLOT_PARAM, i, wp, &e), &e, "write");
            lm = loss_of(m, B, T, rows);
            D[r] = (lp - lm) / (2 * hr);
        }
        ok(clf_model_tensor_write(m, CLF_SLOT_PARAM, i, w, &e), &e, "restore");
        double fd = (4 * D[1] - D[0]) / 3;
        double err = fabs(fd - gd), tol = 2e-3 * fabs(gd) + 5e-4;
        worst = fmax(worst, err / tol);
        if (err > tol) {
            printf("  %-32s g.d %+.6e  finite difference %+.6e  (error %.2e > %.2e)\n", p->name,
                   gd, fd, err, tol);
            bad++;
        }
        free(w);
        free(gr);
        free(wp);
        free(d);
    }
    TU_CHECK(bad == 0, "%s: %d tensors' directional derivatives match finite differences "
             "(worst error / tolerance %.3f)", v->name, clf_model_param_count(m) - bad, worst);
    clf_model_destroy(m);
}

/* Gradients of two micro-batches add up (no dropout, so the masks don't move). */
static void accumulation(clf_runtime *rt)
{
    clf_error e;
    clf_model_config cfg;
    ok(clf_config_parse_string(base_yaml, "base", NULL, 0, &cfg, &e), &e, "config");
    const int B = 2, T = 8, V = 11;
    clf_model *m = NULL;
    ok(clf_model_create(rt, &cfg, V, B, CLF_MODEL_TRAIN, &m, &e), &e, "create");
    tu_rng g = tu_rng_new(999);
    randomize(m, &g);
    int32_t x1[16], y1[16], x2[16], y2[16];
    batch(&g, B, T, V, x1, y1, 0);
    batch(&g, B, T, V, x2, y2, 1);
    size_t n = clf_model_dims_get(m).n_params;
    float *g1 = malloc(n * sizeof *g1), *g2 = malloc(n * sizeof *g2), *g12 = malloc(n * 4);
    double *sum = malloc(n * sizeof *sum);
    const int32_t *xs[2] = {x1, x2}, *ys[2] = {y1, y2};
    float *outs[2] = {g1, g2};
    for (int k = 0; k < 2; k++) {
        ok(clf_model_zero_grad(m, &e), &e, "zero");
        ok(clf_model_set_batch(m, xs[k], ys[k], B, T, &e), &e, "batch");
        ok(clf_model_forward(m, 1, &e), &e, "forward");
        ok(clf_model_backward(m, &e), &e, "backward");
        ok(clf_model_flat_read(m, CLF_SLOT_GRAD, outs[k], &e), &e, "grads");
    }
    ok(clf_model_zero_grad(m, &e), &e, "zero");
    for (int k = 0; k < 2; k++) {
        ok(clf_model_set_batch(m, xs[k], ys[k], B, T, &e), &e, "batch");
        ok(clf_model_forward(m, 1, &e), &e, "forward");
        ok(clf_model_backward(m, &e), &e, "backward");
    }
    ok(clf_model_flat_read(m, CLF_SLOT_GRAD, g12, &e), &e, "grads");
    for (size_t i = 0; i < n; i++)
        sum[i] = (double)g1[i] + (double)g2[i];
    tu_close("two micro-batches accumulate", g12, sum, n, 1e-7, 1e-5);
    TU_CHECK(clf_model_state_get(m).micro == 4, "micro counts backward passes (%llu)",
             (unsigned long long)clf_model_state_get(m).micro);
    /* a backward without a forward is refused */
    TU_CHECK(clf_model_backward(m, &e) == CLF_ERR_ARG, "backward twice is refused");
    clf_model_destroy(m);
    free(g1);
    free(g2);
    free(g12);
    free(sum);

    size_t b1 = 0, b8 = 0;
    ok(clf_model_memory_estimate(&cfg, V, 1, CLF_MODEL_TRAIN, &b1, &e), &e, "estimate");
    ok(clf_model_memory_estimate(&cfg, V, 8, CLF_MODEL_TRAIN, &b8, &e), &e, "estimate");
    TU_CHECK(b1 > 0 && b8 > b1, "memory estimate grows with the batch (%zu -> %zu bytes)", b1, b8);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    for (int i = 0; i < (int)(sizeof variants / sizeof variants[0]); i++)
        check_variant(rt, &variants[i], i);
    accumulation(rt);
    clf_runtime_destroy(rt);
    return tu_finish();
}
