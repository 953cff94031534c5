/*
 * test_parity_seq2seq.c - the encoder-decoder and the encoder classifier
 * against PyTorch (torch.nn.Transformer / nn.TransformerEncoder).
 *
 * For each fixture in tests/data/parity/ written by
 * tests/parity/gen_seq2seq_fixture.py with torch 1.13 (s2s_post: post-LN,
 * shared and tied embeddings, 2 encoder / 1 decoder layers; s2s_pre:
 * norm_first, separate embeddings, untied head, 1 / 2 layers; both with
 * source and target padding, S = 7 != T = 6, label smoothing 0.1, Adam
 * 0.9/0.98/1e-9 with the Noam schedule; cls_pre: pre-LN, GELU, learned
 * positions, [CLS] pooling, AdamW with clipping; cls_mean: post-LN, ReLU,
 * sinusoidal, mean pooling, label smoothing, an ignored label; cls_lin:
 * Linformer self-attention, keys and values projected to 3 rows), the model
 * is built from the fixture's YAML with limits equal to the fixture's batch,
 * loaded with its initial parameters by name, and compared:
 *   - the parameter table: every model tensor is in the fixture with the
 *     same shape and the fixture has no tensor the model lacks;
 *   - logits of an eval forward: |got - ref| <= 1e-5 + 1e-4 |ref| (the
 *     translator's at non-ignored target positions only: torch's
 *     tgt_key_padding_mask changes pad rows, which the loss ignores and
 *     nothing reads; see model.h);
 *   - the loss: relative 1e-5; the classifier's probabilities (host
 *     softmax of the logits) against the softmax of torch's logits;
 *   - every parameter's gradient: |got - ref| <= 1e-4 (|ref| + 0.01
 *     max|ref|) per tensor;
 *   - 10 optimizer steps at the fixture's learning rates: the loss before
 *     each step to relative 1e-5, the gradient norm to relative 1e-4, the
 *     final parameters to 2e-5 absolute, the final loss to relative 1e-5.
 *     Key biases (the k rows of attn.qkv.bias and cross.kv.bias) are the
 *     exception: the loss does not depend on them (softmax is invariant to
 *     adding q.b to every score of a query), their gradient is rounding
 *     noise in both implementations, and Adam with eps 1e-9 turns noise
 *     into full steps of random sign; they are only checked to stay within
 *     3 x (sum of the learning rates) of their start;
 *   - translator inference: clf_model_encode, then clf_model_prefill of 2
 *     positions and clf_model_decode_step for the rest (teacher-forced with
 *     the fixture's tgt_in): every non-pad position's logits against the
 *     fixture's, as the eval forward; then with beams: the 3 sentences are
 *     expanded to 6 rows by clf_model_cache_reorder (index 2,0,1,1,0,2),
 *     decoded 3 positions, reordered again to 4 rows in another order
 *     (dropping two and permuting: the self-attention caches and the cross
 *     caches and source masks move), decoded to the end: each row's logits
 *     against its sentence's reference.
 * Determinism (with checkpoint.h) for both kinds: 4 steps with dropout 0.1
 * at every site (cross-attention included), checkpoint, 4 more; reload the
 * checkpoint into a fresh model and train the same 4: bit-identical losses.
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

typedef struct fixture {
    const char *name;
    clf_st_reader *r;
    clf_model_config cfg;
    int s2s; /* encoder-decoder, else classifier */
    int B, S, T, V, NL;
    int32_t *src, *keep, *tgt_in, *tgt_out, *labels;
} fixture;

static void fx_open(fixture *f, const char *name)
{
    memset(f, 0, sizeof *f);
    f->name = name;
    f->r = pu_open(name, &f->cfg);
    f->s2s = f->cfg.kind == CLF_MODEL_ENCODER_DECODER;
    const clf_st_tensor_info *si = clf_st_reader_find(f->r, "src");
    const clf_st_tensor_info *li = clf_st_reader_find(f->r, "logits");
    f->B = (int)si->shape[0];
    f->S = (int)si->shape[1];
    f->V = f->cfg.vocab.size;
    f->src = pu_read(f->r, "src", NULL);
    f->keep = pu_read(f->r, "src_keep", NULL);
    if (f->s2s) {
        f->T = (int)clf_st_reader_find(f->r, "tgt_in")->shape[1];
        f->tgt_in = pu_read(f->r, "tgt_in", NULL);
        f->tgt_out = pu_read(f->r, "tgt_out", NULL);
    } else {
        f->NL = (int)li->shape[1];
        f->labels = pu_read(f->r, "labels", NULL);
    }
}

static void fx_close(fixture *f)
{
    free(f->src);
    free(f->keep);
    free(f->tgt_in);
    free(f->tgt_out);
    free(f->labels);
    clf_st_reader_destroy(f->r);
}

static clf_model *build(clf_runtime *rt, const fixture *f, int Bmax, unsigned flags)
{
    clf_model *m = NULL;
    clf_error e;
    clf_model_limits lim = {Bmax, f->S, f->s2s ? f->T : 0, 0, 0, 0, 0};
    die(clf_model_create_ex(rt, &f->cfg, f->V, &lim, flags, &m, &e), &e, "clf_model_create_ex");
    pu_load_params(m, f->r);
    return m;
}

static void set_batch(clf_model *m, const fixture *f)
{
    clf_error e;
    if (f->s2s)
        die(clf_model_set_batch(
                m, clf_batch_seq2seq(f->src, f->keep, f->tgt_in, f->tgt_out, f->B, f->S, f->T), &e),
            &e, "set_batch_seq2seq");
    else
        die(clf_model_set_batch(m, clf_batch_classify(f->src, f->keep, f->labels, f->B, f->S), &e),
            &e, "set_batch_classify");
}

/* Compare translator logits [B*T, V] at the non-ignored target positions. */
static void close_positions(const char *name, const fixture *f, const float *got, const float *ref)
{
    size_t V = (size_t)f->V, n = 0;
    size_t BT = (size_t)f->B * (size_t)f->T;
    float *g = malloc(BT * V * sizeof *g), *r = malloc(BT * V * sizeof *r);
    for (size_t i = 0; i < BT; i++) {
        if (f->tgt_out[i] == -1)
            continue;
        memcpy(g + n * V, got + i * V, V * sizeof *g);
        memcpy(r + n * V, ref + i * V, V * sizeof *r);
        n++;
    }
    pu_close_f(name, g, r, n * V, 1e-5, 1e-4);
    free(g);
    free(r);
}

/* Forward, loss (eval and train) and gradients against PyTorch's. */
static void parity_forward(clf_runtime *rt, const fixture *fp, const char *fx,
                           const float *ref_logits)
{
    const fixture f = *fp;
    clf_error e;
    char name[200];
    const int B = f.B;
    const size_t nlog = f.s2s ? (size_t)B * f.T * f.V : (size_t)B * f.NL;
    clf_model *m = build(rt, &f, B, CLF_MODEL_TRAIN);
    pu_check_table(m, f.r, f.name);
    float *logits = malloc(nlog * sizeof *logits), *probs = malloc(nlog * sizeof *probs);
    float *ref_loss = pu_read(f.r, "loss", NULL);
    float loss = 0;
    set_batch(m, &f);
    die(clf_model_forward(m, 0, &e), &e, "forward");
    die(clf_model_logits_read(m, logits, &e), &e, "logits");
    die(clf_model_loss(m, &loss, &e), &e, "loss");
    snprintf(name, sizeof name, "%s logits", fx);
    if (f.s2s) {
        close_positions(name, &f, logits, ref_logits);
    } else {
        pu_close_f(name, logits, ref_logits, nlog, 1e-5, 1e-4);
        die(clf_model_probs_read(m, probs, &e), &e, "probs");
        double *rp = malloc(nlog * sizeof *rp);
        for (int b = 0; b < B; b++) {
            double mx = -1e300, sum = 0;
            for (int j = 0; j < f.NL; j++)
                mx = fmax(mx, ref_logits[b * f.NL + j]);
            for (int j = 0; j < f.NL; j++)
                sum += exp(ref_logits[b * f.NL + j] - mx);
            for (int j = 0; j < f.NL; j++)
                rp[b * f.NL + j] = exp(ref_logits[b * f.NL + j] - mx) / sum;
        }
        snprintf(name, sizeof name, "%s probabilities", fx);
        tu_close(name, probs, rp, nlog, 1e-6, 1e-4);
        free(rp);
    }
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
        float *ref = pu_read(f.r, name, NULL);
        die(clf_model_tensor_read(m, CLF_SLOT_GRAD, i, g, &e), &e, name);
        double mx = 0;
        for (size_t j = 0; j < p->numel; j++)
            mx = fmax(mx, fabs(ref[j]));
        snprintf(name, sizeof name, "%s grad.%s", fx, p->name);
        pu_close_f(name, g, ref, p->numel, 1e-6 * mx, 1e-4);
        free(ref);
        free(g);
    }
    clf_model_destroy(m);
    free(ref_loss);
    free(logits);
    free(probs);
}

/* 10 optimizer steps from the same initial parameters: losses, gradient
 * norms, the final parameters and loss against PyTorch's. */
static void parity_steps(clf_runtime *rt, const fixture *fp, const char *fx)
{
    const fixture f = *fp;
    clf_error e;
    char name[200];
    const int B = f.B;
    float loss = 0;
    size_t nsteps = 0;
    float *lrs = pu_read(f.r, "train.lr", &nsteps), *ref_losses = pu_read(f.r, "train.loss", NULL);
    float *ref_gn = pu_read(f.r, "train.gnorm", NULL);
    clf_model *m = build(rt, &f, B, CLF_MODEL_TRAIN);
    double worst_loss = 0, worst_gn = 0;
    for (size_t it = 0; it < nsteps; it++) {
        float gn = 0;
        set_batch(m, &f);
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
    TU_CHECK(worst_loss <= 1e-5, "%s: %zu step losses within 1e-5 relative (worst %.3g)", fx,
             nsteps, worst_loss);
    TU_CHECK(worst_gn <= 1e-4, "%s: gradient norms within 1e-4 relative (worst %.3g)", fx,
             worst_gn);
    double lr_sum = 0;
    for (size_t it = 0; it < nsteps; it++)
        lr_sum += lrs[it];
    for (int i = 0; i < clf_model_param_count(m); i++) {
        const clf_param_info *p = clf_model_param_get(m, i);
        float *w = malloc(p->numel * sizeof *w);
        snprintf(name, sizeof name, "final.%s", p->name);
        float *ref = pu_read(f.r, name, NULL);
        die(clf_model_tensor_read(m, CLF_SLOT_PARAM, i, w, &e), &e, name);
        /* A key bias adds q.b to every score of a query: softmax ignores it,
         * its exact gradient is 0 and the computed one rounding noise, which
         * Adam (eps 1e-9) turns into full-size steps of either sign. Those
         * rows are checked to stay within the steps' reach of their start,
         * the rest to 2e-5. */
        size_t k0 = 0, k1 = 0, C = (size_t)f.cfg.embedding.dim;
        if (strstr(p->name, "attn.qkv.bias") != NULL)
            k0 = C, k1 = 2 * C;
        else if (strstr(p->name, "cross.kv.bias") != NULL)
            k0 = 0, k1 = C;
        if (k1 > k0) {
            snprintf(name, sizeof name, "param.%s", p->name);
            float *w0 = pu_read(f.r, name, NULL);
            double drift = 0;
            for (size_t j = k0; j < k1; j++) {
                drift = fmax(drift, fabs((double)w[j] - w0[j]));
                w[j] = ref[j]; /* excluded from the comparison below */
            }
            TU_CHECK(drift <= 3 * lr_sum,
                     "%s final.%s: key-bias rows (zero gradient) moved at "
                     "most %.3g (bound 3 x sum of lr = %.3g)",
                     fx, p->name, drift, 3 * lr_sum);
            free(w0);
        }
        snprintf(name, sizeof name, "%s final.%s", fx, p->name);
        pu_close_f(name, w, ref, p->numel, 2e-5, 0);
        free(ref);
        free(w);
    }
    float *ref_final = pu_read(f.r, "final_loss", NULL);
    set_batch(m, &f);
    die(clf_model_forward(m, 0, &e), &e, "forward");
    die(clf_model_loss(m, &loss, &e), &e, "loss");
    TU_CHECK(pu_rel(loss, ref_final[0]) <= 1e-5, "%s: loss after %zu steps %.8f vs torch %.8f", fx,
             nsteps, loss, ref_final[0]);
    clf_model_destroy(m);
    free(ref_final);
    free(lrs);
    free(ref_losses);
    free(ref_gn);
}

/* An encoder-decoder's cached inference (encode, prefill 2 positions,
 * decode the rest) and beams (expand, decode, reorder: drop and permute,
 * decode) against the batched logits. */
static void parity_decoding(clf_runtime *rt, const fixture *fp, const char *fx,
                            const float *ref_logits)
{
    const fixture f = *fp;
    clf_error e;
    char name[200];
    const int B = f.B;
    /* ---- cached inference: encode, prefill 2 positions, decode the rest ---- */
    const int T = f.T, V = f.V, P = 2, Bx = 2 * B;
    clf_model *m = build(rt, &f, Bx, CLF_MODEL_INFER);
    float *got = calloc((size_t)B * T * V, sizeof *got);
    float *out = malloc((size_t)Bx * V * sizeof *out);
    int32_t *prompt = malloc((size_t)B * P * sizeof *prompt), tok[16];
    die(clf_model_encode(m, f.src, f.keep, B, f.S, &e), &e, "encode");
    for (int b = 0; b < B; b++)
        memcpy(prompt + b * P, f.tgt_in + b * T, P * sizeof *prompt);
    die(clf_model_prefill(m, prompt, B, P, out, &e), &e, "prefill");
    for (int b = 0; b < B; b++)
        memcpy(got + ((size_t)b * T + P - 1) * V, out + (size_t)b * V, V * sizeof *out);
    for (int t = P; t < T; t++) {
        for (int b = 0; b < B; b++)
            tok[b] = f.tgt_in[b * T + t];
        die(clf_model_decode_step(m, tok, B, t, out, &e), &e, "decode_step");
        for (int b = 0; b < B; b++)
            memcpy(got + ((size_t)b * T + t) * V, out + (size_t)b * V, V * sizeof *out);
    }
    /* positions before P-1 were not produced: take the reference there */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < P - 1; t++)
            memcpy(got + ((size_t)b * T + t) * V, ref_logits + ((size_t)b * T + t) * V,
                   V * sizeof *got);
    snprintf(name, sizeof name, "%s cached decoding logits", fx);
    close_positions(name, &f, got, ref_logits);

    /* ---- beams: expand, decode, reorder (drop + permute), decode ---- */
    const int32_t expand[6] = {2, 0, 1, 1, 0, 2};
    const int32_t later[4] = {4, 1, 3, 0}; /* rows of the 6 above */
    int sent[6], rows = Bx, worst_ok = 1;
    double worst = 0;
    die(clf_model_encode(m, f.src, f.keep, B, f.S, &e), &e, "encode again");
    die(clf_model_cache_reorder(m, expand, Bx, &e), &e, "cache_reorder expand");
    for (int i = 0; i < Bx; i++)
        sent[i] = expand[i];
    for (int t = 0; t < T; t++) {
        if (t == 3) {
            int ns[6];
            for (int i = 0; i < 4; i++)
                ns[i] = sent[later[i]];
            rows = 4;
            memcpy(sent, ns, sizeof ns);
            die(clf_model_cache_reorder(m, later, rows, &e), &e, "cache_reorder later");
        }
        for (int i = 0; i < rows; i++)
            tok[i] = f.tgt_in[sent[i] * T + t];
        die(clf_model_decode_step(m, tok, rows, t, out, &e), &e, "decode_step beams");
        for (int i = 0; i < rows; i++) {
            int b = sent[i];
            if (f.tgt_out[b * T + t] == -1)
                continue;
            const float *ref = ref_logits + ((size_t)b * T + t) * V;
            for (int j = 0; j < V; j++) {
                double err = fabs(out[(size_t)i * V + j] - ref[j]);
                double tol = 1e-5 + 1e-4 * fabs(ref[j]);
                worst = fmax(worst, err / tol);
                worst_ok &= err <= tol;
            }
        }
    }
    TU_CHECK(worst_ok,
             "%s: beam rows after cache_reorder (expand 3 -> 6, then 6 -> 4 "
             "reordered) match their sentences' logits (worst error / tolerance %.3f)",
             fx, worst);
    /* refusals */
    const int32_t bad_idx[2] = {0, 7};
    TU_CHECK(clf_model_cache_reorder(m, bad_idx, 2, &e) == CLF_ERR_ARG,
             "cache_reorder refuses a row index past the cached rows");
    TU_CHECK(clf_model_decode_step(m, tok, 3, T - 1, out, &e) == CLF_ERR_ARG,
             "decode_step refuses a batch other than the cached rows");
    clf_model_destroy(m);
    free(got);
    free(out);
    free(prompt);
}

static void parity(clf_runtime *rt, const char *fx)
{
    fixture f;
    fx_open(&f, fx);
    printf("%s: %s B=%d S=%d T=%d V=%d labels=%d\n", fx, f.s2s ? "encoder-decoder" : "encoder", f.B,
           f.S, f.T, f.V, f.NL);
    float *ref_logits = pu_read(f.r, "logits", NULL);
    parity_forward(rt, &f, fx, ref_logits);
    parity_steps(rt, &f, fx);
    if (f.s2s)
        parity_decoding(rt, &f, fx, ref_logits);
    free(ref_logits);
    fx_close(&f);
}

/* ---- determinism across a checkpoint ---------------------------------------------- */

static void train_steps(clf_model *m, const fixture *f, int count, float *losses)
{
    clf_error e;
    for (int s = 0; s < count; s++) {
        set_batch(m, f);
        die(clf_model_forward(m, 1, &e), &e, "forward");
        die(clf_model_backward(m, &e), &e, "backward");
        die(clf_model_step(m, 1e-3f, &e), &e, "step");
        die(clf_model_loss(m, &losses[s], &e), &e, "loss");
    }
}

static void determinism(clf_runtime *rt, const char *fx)
{
    fixture f;
    fx_open(&f, fx);
    clf_error e;
    const char *sets[] = {"model.embedding.dropout=0.1", "model.blocks.dropout=0.1",
                          "model.blocks.attention.dropout=0.1", "model.blocks.ffn.dropout=0.1"};
    for (int i = 0; i < 4; i++)
        die(clf_config_set(&f.cfg, sets[i], &e), &e, sets[i]);
    char path[256], name[96];
    snprintf(name, sizeof name, "test_parity_%s_ckpt.safetensors", fx);
    tu_scratch_path(name, path, sizeof path);
    float a[8], b[4];
    clf_model *m = build(rt, &f, f.B, CLF_MODEL_TRAIN);
    train_steps(m, &f, 4, a);
    die(clf_checkpoint_save(path, m, &f.cfg, "{}", NULL, 0, &e), &e, "checkpoint save");
    train_steps(m, &f, 4, a + 4);
    clf_model_destroy(m);

    clf_checkpoint *ck = NULL;
    die(clf_checkpoint_open(path, &ck, &e), &e, "checkpoint open");
    TU_CHECK(clf_config_diff(clf_checkpoint_config(ck), &f.cfg, NULL, 0) == 0,
             "%s: checkpoint config equals the run's", fx);
    clf_model_limits lim = {f.B, f.S, f.s2s ? f.T : 0, 0, 0, 0, 0};
    die(clf_model_create_ex(rt, clf_checkpoint_config(ck), clf_checkpoint_vocab(ck), &lim,
                            CLF_MODEL_TRAIN, &m, &e),
        &e, "create 2");
    die(clf_checkpoint_load(ck, m, CLF_CHECKPOINT_ALL, &e), &e, "checkpoint load");
    train_steps(m, &f, 4, b);
    for (int i = 0; i < 4; i++)
        printf("  %s step %d: %.9g  resumed %.9g\n", fx, 4 + i, a[4 + i], b[i]);
    TU_CHECK(memcmp(a + 4, b, sizeof b) == 0,
             "%s: 4 steps with dropout after reloading a checkpoint are bit-identical", fx);
    TU_CHECK(a[7] < a[0], "%s: the loss falls while training with dropout (%.4f -> %.4f)", fx, a[0],
             a[7]);
    clf_model_destroy(m);
    clf_checkpoint_close(ck);
    remove(path);
    fx_close(&f);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    parity(rt, "s2s_post");
    parity(rt, "s2s_pre");
    parity(rt, "cls_pre");
    parity(rt, "cls_mean");
    parity(rt, "cls_lin"); /* linformer self-attention */
    determinism(rt, "s2s_pre");
    determinism(rt, "cls_mean");
    determinism(rt, "cls_lin");
    clf_runtime_destroy(rt);
    return tu_finish();
}
