/*
 * test_parity_gpt.c - the whole decoder-only GPT against PyTorch.
 *
 * For each fixture in tests/data/parity/ (written by
 * tests/parity/gen_gpt_fixture.py with torch 1.13; see that script for the
 * variants: three block layouts, a sliding window, ALiBi, grouped-query
 * attention, bf16 storage), the model is built from the YAML in the fixture's
 * metadata, loaded with the fixture's initial parameters by name, and
 * compared with PyTorch:
 *   - the parameter table: every tensor of the model is in the fixture with
 *     the same shape, and the fixture has no tensor the model lacks;
 *   - logits of an eval forward: |got - ref| <= 1e-5 + 1e-4 |ref|;
 *   - the loss: relative 1e-5;
 *   - every parameter's gradient: |got - ref| <= 1e-4 (|ref| + 0.01 max|ref|)
 *     per tensor (relative 1e-4, with a floor at 1e-6 of the tensor's largest
 *     gradient for elements near zero);
 *   - 10 AdamW steps (the fixture's learning rates, clipping, weight decay on
 *     2-D tensors): the loss before each step to relative 1e-5, the global
 *     gradient norm to relative 1e-4, the final parameters to 1e-4 absolute
 *     and each tensor's update over the steps (final - initial, the key
 *     bias left out as below) to relative L2 1e-3, the final loss to
 *     relative 1e-5. Parameters are O(0.02..1) and an Adam step moves each
 *     by about lr (up to 3e-3 here), so an element whose gradient is small
 *     enough for rounding to matter drifts by a fraction of a step: measured
 *     at most 1.3e-5 on PoCL and 2.7e-5 on an NVIDIA H200 (one wte element
 *     of gpt_p), so the
 *     element bound is 1e-4, a thirtieth of the largest step; the updates'
 *     relative L2 measured at most 3.2e-5 (gpt_g on PoCL);
 *   - KV-cache inference: prefill of the first 5 positions, then one decode
 *     step per position: the logits of every position against the fixture's,
 *     as the eval forward.
 * gpt_h trains with train.precision bf16 against PyTorch rounding by hand
 * at clformer's storage points (the pre-norm outputs, the FFN's hidden
 * layer and its gradient, the attention's q, k, v and output and their
 * gradients) and reading bf16 copies of the weights in every product
 * (gen_gpt_fixture.py). Both sides compute in float32 and round the same
 * values, but not in the same order (the fused attention sums keys in
 * tiles with an online softmax, PyTorch in one softmax and one product),
 * and a value within float32 rounding of a bf16 rounding boundary rounds
 * the other way on one side; each such flip moves that element by 2^-8
 * of itself and everything downstream with it. The fixture's own
 * sensitivity, measured: noise of 1e-7 relative (float32's rounding) on
 * the FFN's pre-activation before it is rounded moves the gradients by up
 * to 5.6e-4 relative L2, and on the attention's output, 1e-5 by 2.3e-4
 * (1e-6 flipped nothing there). So the bounds are the format's, not float32's: each gradient
 * tensor by relative L2 within 1e-3 (half a bf16 rounding is 2^-9 = 2e-3;
 * measured 5.6e-4), the gradient norms within the same 1e-3 (3.4e-4), the
 * losses at every step and after them within 1e-4 relative (8.2e-6), the
 * logits 10 times the float32 bounds, and the parameters by each tensor's
 * update over the 10 steps (final - initial), relative L2 within 3e-2
 * (measured 1.1e-2 on PoCL, 2.2e-2 on Mesa's llvmpipe, whose multiply-adds
 * round twice; the worst tensor is the query and value bias on both, whose
 * small gradients Adam's normalisation magnifies), leaving out the key bias: its gradient is zero but for
 * rounding (softmax is blind to q.b_k, the same in every score of a row),
 * and Adam turns each side's rounding noise there into whole steps of
 * either sign (measured 0.18 with it). Inference (float32) is compared
 * with the fixture's float32 logits.
 * gpt_p and gpt_q pack documents (train.packing; the fixture's doc ids):
 * the same checks, KV-cache decoding on their rows of one document, and
 * isolation: with each row's first document's tokens changed, the logits
 * of every other document are bit-identical.
 * Determinism (with checkpoint.h; gpt_a, and gpt_g's grouped-query
 * attention with and without layer-wise learning-rate decay): train 10
 * steps with dropout 0.1,
 * checkpoint, 10 more; reload the checkpoint into a fresh model and train
 * the same 10 more: the losses are identical bit for bit. Under a
 * simulator flag (the Mesa leg, where each of these costs 4-7 s against
 * under one on PoCL) only the cases with state of their own beyond the
 * model's (gpt_a plain and with EMA, layer-wise decay, Performer's feature
 * redraws) run; the other features' resumes run on every other leg.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "model/graph/model.h"
#include "model/io/safetensors.h"
#include "model/train/checkpoint.h"
#include "tests/parity_util.h"
#include "tests/test_util.h"

static void die(clf_status st, const clf_error *e, const char *what) { tu_ok(st, e, what); }

/* A fixture's sparse attention blocks (random_blocks) and Performer
 * features (performer_om) into m. */
static void set_blocks(clf_model *m, clf_st_reader *r, int features)
{
    clf_error e;
    size_t n = 0;
    if (features && clf_st_reader_find(r, "performer_om") != NULL) {
        float *om = pu_read(r, "performer_om", &n);
        die(clf_model_set_performer_features(m, om, n, &e), &e, "performer features");
        free(om);
    }
    if (clf_st_reader_find(r, "random_blocks") == NULL)
        return;
    int32_t *rb = pu_read(r, "random_blocks", &n);
    die(clf_model_set_sparse_blocks(m, rb, n, &e), &e, "random blocks");
    free(rb);
}

static clf_model *build(clf_runtime *rt, const clf_model_config *cfg, int V, int B, unsigned flags,
                        clf_st_reader *r)
{
    clf_model *m = NULL;
    clf_error e;
    die(clf_model_create(rt, cfg, V, B, flags, &m, &e), &e, "clf_model_create");
    pu_load_params(m, r);
    set_blocks(m, r, 1);
    return m;
}

/* A bf16 fixture's gradients: relative L2 per tensor (see the top). */
#define HALF_GRAD_L2 1e-3
#define HALF_STEP_LOSS 1e-4
#define HALF_UPDATE_L2 3e-2
#define FINAL_ATOL 1e-4     /* float32: each final parameter (see the header) */
#define FP32_UPDATE_L2 1e-3 /* float32: each tensor's update over the steps */

/* A fixture: its config, batch and sizes; half: 16-bit storage (bf16),
 * whose bounds are looser (see the top). */
typedef struct gpt_fx {
    const char *fx;
    clf_st_reader *r;
    clf_model_config cfg;
    int half, B, T, V;
    size_t BT;
    int32_t *x, *y;
    int32_t *doc; /* packed documents (gpt_p, gpt_q), or NULL */
} gpt_fx;

/* Forward, loss (eval and train) and gradients against PyTorch's. */
static void gpt_forward(clf_runtime *rt, const gpt_fx *g)
{
    const char *fx = g->fx;
    clf_st_reader *r = g->r;
    const clf_model_config cfg = g->cfg;
    const int half = g->half, B = g->B, T = g->T, V = g->V;
    const size_t BT = g->BT;
    const int32_t *x = g->x, *y = g->y;
    clf_error e;
    char name[160];
    const double k = half ? 10.0 : 1.0; /* bf16: the logits' bounds x 10 */
    double worst_l2 = 0.0;
    clf_model *m = build(rt, &cfg, V, B, CLF_MODEL_TRAIN, r);
    pu_check_table(m, r, fx);
    float *logits = malloc(BT * (size_t)V * sizeof *logits);
    float *ref_logits = pu_read(r, "logits", NULL), *ref_loss = pu_read(r, "loss", NULL);
    float loss = 0;
    die(clf_model_set_batch(m, clf_batch_packed(x, y, g->doc, B, T), &e), &e, "set_batch");
    die(clf_model_forward(m, 0, &e), &e, "forward");
    die(clf_model_logits_read(m, logits, &e), &e, "logits");
    die(clf_model_loss(m, &loss, &e), &e, "loss");
    snprintf(name, sizeof name, "%s logits", fx);
    pu_close_f(name, logits, ref_logits, BT * (size_t)V, k * 1e-5, k * 1e-4);
    TU_CHECK(pu_rel(loss, ref_loss[0]) <= 1e-5, "%s: eval loss %.8f vs torch %.8f", fx, loss,
             ref_loss[0]);

    die(clf_model_forward(m, 1, &e), &e, "forward train");
    die(clf_model_loss(m, &loss, &e), &e, "loss");
    TU_CHECK(pu_rel(loss, ref_loss[0]) <= 1e-5, "%s: train loss %.8f vs torch %.8f", fx, loss,
             ref_loss[0]);
    die(clf_model_backward(m, &e), &e, "backward");
    for (int i = 0; i < clf_model_param_count(m); i++) {
        const clf_param_info *p = clf_model_param_get(m, i);
        float *g = malloc(p->numel * sizeof *g);
        snprintf(name, sizeof name, "grad.%s", p->name);
        float *ref = pu_read(r, name, NULL);
        die(clf_model_tensor_read(m, CLF_SLOT_GRAD, i, g, &e), &e, name);
        double mx = 0;
        for (size_t j = 0; j < p->numel; j++)
            mx = fmax(mx, fabs(ref[j]));
        snprintf(name, sizeof name, "%s grad.%s", fx, p->name);
        if (half)
            worst_l2 = fmax(worst_l2, pu_rel_l2(g, ref, p->numel));
        else
            pu_close_f(name, g, ref, p->numel, 1e-6 * mx, 1e-4);
        free(ref);
        free(g);
    }
    if (half)
        TU_CHECK(worst_l2 <= HALF_GRAD_L2,
                 "%s: every gradient within relative L2 %g of torch's (worst %.3g)", fx,
                 HALF_GRAD_L2, worst_l2);
    clf_model_destroy(m);
    free(ref_logits);
    free(ref_loss);
    free(logits);
}

/* 10 AdamW steps from the same initial parameters: losses, gradient norms,
 * the final parameters (bf16: each tensor's update) and loss. */
static void gpt_steps(clf_runtime *rt, const gpt_fx *g)
{
    const char *fx = g->fx;
    clf_st_reader *r = g->r;
    const clf_model_config cfg = g->cfg;
    const int half = g->half, B = g->B, T = g->T, V = g->V;
    const int32_t *x = g->x, *y = g->y;
    clf_error e;
    char name[160];
    float loss = 0;
    size_t nsteps = 0;
    float *lrs = pu_read(r, "train.lr", &nsteps), *ref_losses = pu_read(r, "train.loss", NULL);
    float *ref_gn = pu_read(r, "train.gnorm", NULL);
    clf_model *m = build(rt, &cfg, V, B, CLF_MODEL_TRAIN, r);
    double worst_loss = 0, worst_gn = 0;
    for (size_t it = 0; it < nsteps; it++) {
        float gn = 0;
        die(clf_model_set_batch(m, clf_batch_packed(x, y, g->doc, B, T), &e), &e, "set_batch");
        die(clf_model_forward(m, 1, &e), &e, "forward");
        die(clf_model_loss(m, &loss, &e), &e, "loss");
        die(clf_model_backward(m, &e), &e, "backward");
        die(clf_model_step(m, lrs[it], &e), &e, "step");
        die(clf_model_grad_norm(m, &gn, &e), &e, "grad norm");
        worst_loss = fmax(worst_loss, pu_rel(loss, ref_losses[it]));
        worst_gn = fmax(worst_gn, pu_rel(gn, ref_gn[it]));
        printf("  step %zu: lr %.6g loss %.7f (torch %.7f) gnorm %.6f (torch %.6f)\n", it, lrs[it],
               loss, ref_losses[it], gn, ref_gn[it]);
    }
    const double loss_tol = half ? HALF_STEP_LOSS : 1e-5, gn_tol = half ? HALF_GRAD_L2 : 1e-4;
    TU_CHECK(worst_loss <= loss_tol, "%s: %zu AdamW step losses within %g relative (worst %.3g)",
             fx, nsteps, loss_tol, worst_loss);
    TU_CHECK(worst_gn <= gn_tol, "%s: gradient norms within %g relative (worst %.3g)", fx, gn_tol,
             worst_gn);
    double worst_step = 0;
    char worst_name[128] = "";
    for (int i = 0; i < clf_model_param_count(m); i++) {
        const clf_param_info *p = clf_model_param_get(m, i);
        float *w = malloc(p->numel * sizeof *w);
        snprintf(name, sizeof name, "final.%s", p->name);
        float *ref = pu_read(r, name, NULL);
        die(clf_model_tensor_read(m, CLF_SLOT_PARAM, i, w, &e), &e, name);
        if (!half) {
            snprintf(name, sizeof name, "%s final.%s", fx, p->name);
            pu_close_f(name, w, ref, p->numel, FINAL_ATOL, 0);
        }
        /* the 10 steps' update, (final - initial), by relative L2 */
        snprintf(name, sizeof name, "param.%s", p->name);
        float *w0 = pu_read(r, name, NULL);
        for (size_t j = 0; j < p->numel; j++)
            w[j] -= w0[j], ref[j] -= w0[j];
        /* the key bias's gradient is zero but for rounding (softmax is
         * blind to q.b_k, the same in every score of a row): Adam turns
         * each side's noise into whole steps of either sign */
        const size_t n = strlen(p->name), C = p->numel / 3;
        if (n >= 13 && strcmp(p->name + n - 13, "attn.qkv.bias") == 0)
            for (size_t j = C; j < 2 * C; j++)
                w[j] = ref[j] = 0.0f;
        const double step_l2 = pu_rel_l2(w, ref, p->numel);
        if (step_l2 > worst_step) {
            worst_step = step_l2;
            snprintf(worst_name, sizeof worst_name, "%s", p->name);
        }
        free(w0);
        free(ref);
        free(w);
    }
    const double update_tol = half ? HALF_UPDATE_L2 : FP32_UPDATE_L2;
    TU_CHECK(worst_step <= update_tol,
             "%s: every tensor's update over the %zu steps within relative L2 %g of torch's "
             "(worst %.3g, %s)",
             fx, nsteps, update_tol, worst_step, worst_name);
    float *ref_final = pu_read(r, "final_loss", NULL);
    die(clf_model_set_batch(m, clf_batch_packed(x, y, g->doc, B, T), &e), &e, "set_batch");
    die(clf_model_forward(m, 0, &e), &e, "forward");
    die(clf_model_loss(m, &loss, &e), &e, "loss");
    TU_CHECK(pu_rel(loss, ref_final[0]) <= loss_tol, "%s: loss after %zu steps %.8f vs torch %.8f",
             fx, nsteps, loss, ref_final[0]);
    clf_model_destroy(m);
    free(ref_final);
    free(lrs);
    free(ref_losses);
    free(ref_gn);
}

/* KV-cache inference: prefill 5 positions, then decode one at a time,
 * against the batched forward's logits. */
static void gpt_cached(clf_runtime *rt, const gpt_fx *g)
{
    const char *fx = g->fx;
    clf_st_reader *r = g->r;
    const clf_model_config cfg = g->cfg;
    const int half = g->half, B = g->B, T = g->T, V = g->V;
    const size_t BT = g->BT;
    const int32_t *x = g->x;
    clf_error e;
    char name[160];
    /* inference is float32: a bf16 fixture's float32 logits */
    float *ref_logits = pu_read(r, half ? "logits_f32" : "logits", NULL);
    clf_model *m = build(rt, &cfg, V, B, CLF_MODEL_INFER, r);
    const int P = 5;
    int32_t *prompt = malloc((size_t)B * P * sizeof *prompt), tok[64];
    float *out = malloc((size_t)B * (size_t)V * sizeof *out);
    float *got = malloc(BT * (size_t)V * sizeof *got);
    for (int b = 0; b < B; b++)
        memcpy(prompt + b * P, x + b * T, P * sizeof *prompt);
    die(clf_model_prefill(m, prompt, B, P, out, &e), &e, "prefill");
    for (int b = 0; b < B; b++)
        memcpy(got + ((size_t)b * T + P - 1) * V, out + (size_t)b * V, V * sizeof *out);
    for (int t = P; t < T; t++) {
        for (int b = 0; b < B; b++)
            tok[b] = x[b * T + t];
        die(clf_model_decode_step(m, tok, B, t, out, &e), &e, "decode_step");
        for (int b = 0; b < B; b++)
            memcpy(got + ((size_t)b * T + t) * V, out + (size_t)b * V, V * sizeof *out);
    }
    /* compare positions P-1 .. T-1 (of the rows that are one document:
     * decoding runs one document per row) */
    int ok = 1;
    for (int b = 0; b < B; b++) {
        if (g->doc != NULL && g->doc[(size_t)b * T] != g->doc[(size_t)b * T + T - 1])
            continue;
        size_t o = ((size_t)b * T + P - 1) * V, n = (size_t)(T - P + 1) * V;
        snprintf(name, sizeof name, "%s KV-cache logits, sequence %d", fx, b);
        ok &= pu_close_f(name, got + o, ref_logits + o, n, 1e-5, 1e-4);
    }
    (void)ok;
    clf_model_destroy(m);
    free(got);
    free(out);
    free(prompt);
    free(ref_logits);
}

/* Packed documents do not see each other: with every token of each row's
 * first document replaced, the logits of the row's other documents are
 * bit-identical (and the replaced document's differ). */
static void gpt_isolated(clf_runtime *rt, const gpt_fx *g)
{
    const int B = g->B, T = g->T, V = g->V;
    clf_error e;
    clf_model *m = build(rt, &g->cfg, V, B, CLF_MODEL_INFER, g->r);
    float *a = malloc(g->BT * (size_t)V * sizeof *a), *b = malloc(g->BT * (size_t)V * sizeof *b);
    int32_t *x2 = malloc(g->BT * sizeof *x2);
    die(clf_model_set_batch(m, clf_batch_packed(g->x, NULL, g->doc, B, T), &e), &e, "set_batch");
    die(clf_model_forward(m, 0, &e), &e, "forward");
    die(clf_model_logits_read(m, a, &e), &e, "logits");
    for (size_t i = 0; i < g->BT; i++) /* a different token in each first document */
        x2[i] = g->doc[i] == g->doc[i - i % (size_t)T] ? (g->x[i] + 1) % V : g->x[i];
    die(clf_model_set_batch(m, clf_batch_packed(x2, NULL, g->doc, B, T), &e), &e, "set_batch");
    die(clf_model_forward(m, 0, &e), &e, "forward");
    die(clf_model_logits_read(m, b, &e), &e, "logits");
    size_t same_rest = 0, rest = 0, changed = 0, first = 0;
    for (size_t i = 0; i < g->BT; i++) {
        const int in_first = g->doc[i] == g->doc[i - i % (size_t)T];
        const int eq = memcmp(a + i * V, b + i * V, (size_t)V * sizeof *a) == 0;
        rest += !in_first;
        same_rest += !in_first && eq;
        first += in_first;
        changed += in_first && !eq;
    }
    TU_CHECK(rest > 0 && same_rest == rest && changed == first,
             "%s: with each row's first document changed, the %zu positions of the other "
             "documents give bit-identical logits (%zu do) and the first documents' %zu all "
             "change (%zu do)",
             g->fx, rest, same_rest, first, changed);
    clf_model_destroy(m);
    free(a);
    free(b);
    free(x2);
}

static void parity(clf_runtime *rt, const char *fx)
{
    gpt_fx g = {.fx = fx};
    g.r = pu_open(fx, &g.cfg);
    g.half = g.cfg.train.precision != CLF_PRECISION_FP32;
    const clf_st_tensor_info *xi = clf_st_reader_find(g.r, "x");
    const clf_st_tensor_info *li = clf_st_reader_find(g.r, "logits");
    g.B = (int)xi->shape[0], g.T = (int)xi->shape[1], g.V = (int)li->shape[2];
    g.BT = (size_t)g.B * (size_t)g.T;
    g.x = pu_read(g.r, "x", NULL);
    g.y = pu_read(g.r, "y", NULL);
    g.doc = clf_st_reader_find(g.r, "doc") != NULL ? pu_read(g.r, "doc", NULL) : NULL;
    TU_CHECK((g.doc != NULL) == (g.cfg.train.packing != 0),
             "%s: document ids exactly where train.packing is on", fx);
    printf("%s: B=%d T=%d V=%d%s\n", fx, g.B, g.T, g.V, g.doc ? " (packed documents)" : "");
    gpt_forward(rt, &g);
    gpt_steps(rt, &g);
    gpt_cached(rt, &g);
    if (g.doc != NULL)
        gpt_isolated(rt, &g);
    free(g.x);
    free(g.y);
    free(g.doc);
    clf_st_reader_destroy(g.r);
}

/* ---- determinism across a checkpoint ---------------------------------------------- */

static void train_steps(clf_model *m, const int32_t *data, size_t n, int B, int T, int from,
                        int count, int packed, float *losses)
{
    clf_error e;
    int32_t *x = malloc((size_t)B * T * sizeof *x), *y = malloc((size_t)B * T * sizeof *y);
    int32_t *doc = malloc((size_t)B * T * sizeof *doc);
    for (int s = from; s < from + count; s++) {
        for (int b = 0; b < B; b++) { /* a fixed, step-dependent window per row */
            size_t i0 = ((size_t)s * 131 + (size_t)b * 977) % (n - (size_t)T - 1);
            for (int t = 0; t < T; t++) {
                x[b * T + t] = data[i0 + t];
                y[b * T + t] = data[i0 + t + 1];
                doc[b * T + t] = (int32_t)((i0 + (size_t)t) / 5); /* documents of 5 tokens */
            }
        }
        die(clf_model_set_batch(m, clf_batch_packed(x, y, packed ? doc : NULL, B, T), &e), &e,
            "set_batch");
        die(clf_model_forward(m, 1, &e), &e, "forward");
        die(clf_model_backward(m, &e), &e, "backward");
        die(clf_model_step(m, 1e-3f, &e), &e, "step");
        die(clf_model_loss(m, &losses[s - from], &e), &e, "loss");
    }
    free(x);
    free(y);
    free(doc);
}

static void determinism(clf_runtime *rt, const char *name, const char *extra)
{
    clf_error e;
    clf_st_reader *r = NULL;
    char fixture[256];
    snprintf(fixture, sizeof fixture, "tests/data/parity/%s.safetensors", name);
    die(clf_st_reader_open(fixture, &r, &e), &e, "fixture");
    clf_model_config cfg;
    die(clf_config_parse_string(clf_st_reader_metadata(r, "config"), name, NULL, 0, &cfg, &e), &e,
        "config");
    printf("determinism: %s%s%s\n", name, extra ? ", " : "", extra ? extra : "");
    if (extra != NULL)
        die(clf_config_set(&cfg, extra, &e), &e, extra);
    /* exercise every dropout site */
    const char *sets[] = {"model.embedding.dropout=0.1", "model.blocks.dropout=0.1",
                          "model.blocks.attention.dropout=0.1", "model.blocks.ffn.dropout=0.1"};
    for (int i = 0; i < 4; i++) /* Performer has no attention probabilities to drop */
        if (i != 2 || cfg.blocks.attention.type != CLF_ATTN_PERFORMER)
            die(clf_config_set(&cfg, sets[i], &e), &e, sets[i]);
    const int B = 4, T = cfg.context, V = 65; /* gpt_s: 48 */
    size_t n = 4096;
    int32_t *data = malloc(n * sizeof *data);
    tu_rng g = tu_rng_new(7);
    for (size_t i = 0; i < n; i++) /* a learnable sequence: mostly +1 steps */
        data[i] = (int32_t)((i == 0 ? 0 : data[i - 1] + 1 + (tu_u32(&g) % 8 == 0)) % V);

    char path[256];
    tu_scratch_path("test_parity_ckpt.safetensors", path, sizeof path);
    float a[20], b[10];
    clf_model *m = NULL;
    die(clf_model_create(rt, &cfg, V, B, CLF_MODEL_TRAIN, &m, &e), &e, "create");
    /* the fixture's random blocks, not those drawn from the seed: the
     * checkpoint keeps them; Performer's features its own, redrawn from the
     * seed on the schedule */
    set_blocks(m, r, 0);
    clf_st_reader_destroy(r);
    const int32_t *rb0 = NULL;
    size_t nrb = 0;
    clf_model_sparse_blocks(m, &rb0, &nrb);
    int32_t *rb = nrb ? malloc(nrb * sizeof *rb) : NULL;
    if (nrb)
        memcpy(rb, rb0, nrb * sizeof *rb);
    train_steps(m, data, n, B, T, 0, 10, cfg.train.packing, a);
    clf_checkpoint_extra ex[] = {{"test", "determinism"}};
    die(clf_checkpoint_save(path, m, &cfg, "{}", ex, 1, &e), &e, "checkpoint save");
    train_steps(m, data, n, B, T, 10, 10, cfg.train.packing, a + 10);
    /* train.ema: the moving average goes on from the checkpoint's too */
    const size_t np = clf_model_dims_get(m).n_params;
    float *ema_a = clf_model_has_ema(m) ? malloc(np * sizeof *ema_a) : NULL;
    float *ema_b = ema_a ? malloc(np * sizeof *ema_b) : NULL;
    if (ema_a != NULL)
        die(clf_model_flat_read(m, CLF_SLOT_EMA, ema_a, &e), &e, "ema");
    clf_model_destroy(m);

    clf_checkpoint *ck = NULL;
    die(clf_checkpoint_open(path, &ck, &e), &e, "checkpoint open");
    const char *meta = clf_checkpoint_meta(ck, "test");
    TU_CHECK(meta && strcmp(meta, "determinism") == 0, "checkpoint keeps extra metadata");
    TU_CHECK(strcmp(clf_checkpoint_tokenizer(ck), "{}") == 0, "checkpoint keeps the tokenizer");
    TU_CHECK(clf_config_diff(clf_checkpoint_config(ck), &cfg, NULL, 0) == 0,
             "checkpoint config equals the run's");
    die(clf_model_create(rt, clf_checkpoint_config(ck), clf_checkpoint_vocab(ck), B,
                         CLF_MODEL_TRAIN, &m, &e),
        &e, "create 2");
    die(clf_checkpoint_load(ck, m, CLF_CHECKPOINT_ALL, &e), &e, "checkpoint load");
    TU_CHECK(clf_model_state_get(m).step == 10, "resumed at step %llu (expected 10)",
             (unsigned long long)clf_model_state_get(m).step);
    if (nrb) {
        const int32_t *rb1 = NULL;
        size_t n1 = 0;
        clf_model_sparse_blocks(m, &rb1, &n1);
        TU_CHECK(n1 == nrb && memcmp(rb, rb1, nrb * sizeof *rb) == 0,
                 "%s: the checkpoint brings back the %zu random blocks it was trained with", name,
                 nrb);
    }
    free(rb);
    train_steps(m, data, n, B, T, 10, 10, cfg.train.packing, b);
    if (ema_a != NULL) {
        die(clf_model_flat_read(m, CLF_SLOT_EMA, ema_b, &e), &e, "ema 2");
        TU_CHECK(memcmp(ema_a, ema_b, np * sizeof *ema_a) == 0,
                 "%s: the moving average after the resumed steps is bit-identical", name);
    }
    free(ema_a);
    free(ema_b);
    int same = memcmp(a + 10, b, sizeof b) == 0;
    for (int i = 0; i < 10; i++)
        printf("  step %2d: %.9g  resumed %.9g\n", 10 + i, a[10 + i], b[i]);
    TU_CHECK(same, "%s: 10 steps after reloading a checkpoint are bit-identical", name);
    if (cfg.blocks.attention.type == CLF_ATTN_PERFORMER && cfg.blocks.attention.redraw > 0)
        TU_CHECK(clf_model_performer_draw(m) == 19 / cfg.blocks.attention.redraw,
                 "%s: the features were drawn again every %d steps (draw %lld at step 19)", name,
                 cfg.blocks.attention.redraw, (long long)clf_model_performer_draw(m));
    TU_CHECK(a[19] < a[0], "the loss falls while training with dropout (%.4f -> %.4f)", a[0],
             a[19]);
    clf_model_destroy(m);
    clf_checkpoint_close(ck);
    remove(path);
    free(data);
}

/* train.ema 0.9 on gpt_a: after each of 6 steps the device's average is the
 * float64 average of the parameters read back after every step (the first
 * step copies them), within 1e-6; an evaluation of it (clf_model_ema_swap)
 * exchanges the two bit for bit and a second swap restores them; a
 * checkpoint's inference load takes the average, a resume both. */
static void check_ema(clf_runtime *rt)
{
    clf_error e;
    clf_st_reader *r = NULL;
    die(clf_st_reader_open("tests/data/parity/gpt_a.safetensors", &r, &e), &e, "fixture");
    clf_model_config cfg;
    die(clf_config_parse_string(clf_st_reader_metadata(r, "config"), "gpt_a", NULL, 0, &cfg, &e),
        &e, "config");
    clf_st_reader_destroy(r);
    die(clf_config_set(&cfg, "train.ema=0.9", &e), &e, "ema");
    const int B = 4, T = 16, V = 65;
    size_t n = 4096;
    int32_t *data = malloc(n * sizeof *data);
    for (size_t i = 0; i < n; i++)
        data[i] = (int32_t)((i * 7 + i / 13) % V);
    clf_model *m = NULL;
    die(clf_model_create(rt, &cfg, V, B, CLF_MODEL_TRAIN, &m, &e), &e, "create");
    const size_t np = clf_model_dims_get(m).n_params;
    float *p = malloc(np * sizeof *p), *q = malloc(np * sizeof *q), *g = malloc(np * sizeof *g);
    double *ref = malloc(np * sizeof *ref), worst = 0;
    float loss;
    for (int s = 0; s < 6; s++) {
        train_steps(m, data, n, B, T, s, 1, 0, &loss);
        die(clf_model_flat_read(m, CLF_SLOT_PARAM, p, &e), &e, "params");
        for (size_t i = 0; i < np; i++)
            ref[i] = s == 0 ? p[i] : ref[i] + 0.1 * ((double)p[i] - ref[i]);
    }
    die(clf_model_flat_read(m, CLF_SLOT_EMA, g, &e), &e, "ema");
    size_t moved = 0;
    for (size_t i = 0; i < np; i++) {
        worst = fmax(worst, fabs(g[i] - ref[i]));
        moved += g[i] != p[i];
    }
    TU_CHECK(worst <= 1e-6 && moved > np / 2,
             "ema: the device's average of 6 steps within 1e-6 of float64 (%.3g), apart from the "
             "parameters (%zu of %zu differ)",
             worst, moved, np);
    die(clf_model_ema_swap(m, &e), &e, "swap");
    die(clf_model_flat_read(m, CLF_SLOT_PARAM, q, &e), &e, "params 2");
    int ok = memcmp(q, g, np * sizeof *q) == 0;
    die(clf_model_flat_read(m, CLF_SLOT_EMA, q, &e), &e, "ema 2");
    ok = ok && memcmp(q, p, np * sizeof *q) == 0;
    die(clf_model_ema_swap(m, &e), &e, "swap back");
    die(clf_model_flat_read(m, CLF_SLOT_PARAM, q, &e), &e, "params 3");
    ok = ok && memcmp(q, p, np * sizeof *q) == 0;
    TU_CHECK(ok, "ema: a swap exchanges parameters and average bit for bit, a second restores "
                 "them");
    /* a checkpoint: inference loads the average, --no-ema-style loads the parameters */
    char path[256];
    tu_scratch_path("test_parity_ema.safetensors", path, sizeof path);
    die(clf_checkpoint_save(path, m, &cfg, "{}", NULL, 0, &e), &e, "save");
    clf_checkpoint *ck = NULL;
    clf_model *mi = NULL;
    die(clf_checkpoint_open(path, &ck, &e), &e, "open");
    TU_CHECK(clf_checkpoint_has_ema(ck), "ema: the checkpoint holds the average");
    const clf_model_limits lim = {.B = 1};
    die(clf_checkpoint_model_create(ck, rt, &lim, 0, &mi, &e), &e, "inference model");
    die(clf_model_flat_read(mi, CLF_SLOT_PARAM, q, &e), &e, "inference params");
    ok = memcmp(q, g, np * sizeof *q) == 0;
    clf_model_destroy(mi);
    clf_checkpoint_use_raw(ck);
    die(clf_checkpoint_model_create(ck, rt, &lim, 0, &mi, &e), &e, "raw model");
    die(clf_model_flat_read(mi, CLF_SLOT_PARAM, q, &e), &e, "raw params");
    ok = ok && memcmp(q, p, np * sizeof *q) == 0;
    TU_CHECK(ok, "ema: a checkpoint's inference model takes the average, use_raw the parameters");
    clf_model_destroy(mi);
    clf_checkpoint_close(ck);
    remove(path);
    clf_model_destroy(m);
    free(data);
    free(p);
    free(q);
    free(g);
    free(ref);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    parity(rt, "gpt_a");
    parity(rt, "gpt_b");
    parity(rt, "gpt_c");
    parity(rt, "gpt_w"); /* sliding-window attention (window 5 of context 16) */
    parity(rt, "gpt_l"); /* ALiBi */
    parity(rt, "gpt_g"); /* grouped-query attention (1 K/V head for 2 query heads) */
    parity(rt, "gpt_y"); /* multi-query attention with YaRN rope scaling */
    parity(rt, "gpt_t"); /* T5's relative position bias */
    parity(rt, "gpt_r"); /* Shaw's relative positions */
    parity(rt, "gpt_h"); /* bf16 storage */
    parity(rt, "gpt_p"); /* packed documents, learned positions */
    parity(rt, "gpt_q"); /* packed documents, RoPE, multi-query */
    parity(rt, "gpt_s"); /* sparse attention: window, global keys, stride, random blocks */
    parity(rt, "gpt_f"); /* Performer */
    determinism(rt, "gpt_a", NULL);
    determinism(rt, "gpt_g", "train.optimizer.layer_decay=0.7");
    determinism(rt, "gpt_a", "train.ema=0.99");
    determinism(rt, "gpt_f", "model.blocks.attention.redraw=3");
    if (!tu_simulator()) {
        determinism(rt, "gpt_g", NULL);
        determinism(rt, "gpt_y", NULL);
        determinism(rt, "gpt_t", NULL);
        determinism(rt, "gpt_r", NULL);
        determinism(rt, "gpt_p", NULL);
        determinism(rt, "gpt_q", NULL);
        determinism(rt, "gpt_s", NULL);
    }
    check_ema(rt);
    clf_runtime_destroy(rt);
    return tu_finish();
}
