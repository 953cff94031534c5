/*
 * test_trainer.c - the training loop end to end on a tiny GPT (2 layers,
 * 2 heads, dim 32, ffn 64, context 16, dropout 0.1 so that the dropout keys are
 * exercised) over the first 60 KB of tiny Shakespeare. train.seed comes
 * from the test seed (printed), so every run checks a fresh seed.
 *
 * Checks:
 *   - learning: 60 steps (batch 8, lr 1e-2) bring the mean loss of the last
 *     5 steps at least 0.35 below that of the first 5 (~ln V; the drop was
 *     0.55-0.85 over 26 seeds), and the evaluations at steps 20 and 60
 *     report finite losses below ln V - 0.5;
 *   - interruption: the stop flag, raised by the log callback after step
 *     17, ends the run with CLF_ERR_INTERRUPTED, a checkpoint at step 17 and
 *     res.interrupted; steps 1-17 equal the uninterrupted run's bit for bit;
 *   - resume: a new model resumed from that checkpoint runs steps 18-60 with
 *     losses bit-identical (==) to the uninterrupted run, and the final
 *     parameters are identical too;
 *   - resuming with a different learning rate is refused, naming the key;
 *   - clf_trainer_eval_split against a host float64 cross-entropy over the
 *     logits of every evaluation window (relative 1e-5): the windowing and
 *     the averaging over every predicted position;
 *   - the KV-cache path that `clformer sample` uses: prefill of 5 tokens
 *     and 10 decode steps give the logits of the batched forward over the
 *     same sequence at each position (atol 1e-4 + rtol 1e-4);
 *   - greedy generation with the choice on the device (clf_generate at
 *     temperature 0): the same 40 tokens (14 under the simulator flag) as
 *     a host loop of prefill, decode steps and the sampler's greedy
 *     choice, the context sliding past 16;
 *     a callback's stop after 5 tokens ends it there; out-of-order calls
 *     of greedy_pick and decode_picked refused;
 *   - train.accumulate: batch 4 x 2 micro-batches against batch 8 (no
 *     dropout) at every step to relative 2e-5, and with dropout a run
 *     stopped mid-way and resumed bit-identical to the uninterrupted one;
 *   - the host waits for the queue: one per logged step (accumulate 1
 *     or 2), none in a step not logged (not under the simulator flag).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "model/data/dataset.h"
#include "model/graph/model.h"
#include "model/infer/generate.h"
#include "model/text/tokenizer.h"
#include "model/train/checkpoint.h"
#include "model/train/trainer.h"
#include "tests/test_util.h"

#define STEPS 60
#define STOP_AT 17

static const char *YAML_CFG = "model:\n"
                              "  vocab: {tokenizer: char}\n"
                              "  context: 16\n"
                              "  embedding: {dim: 32, dropout: 0.1}\n"
                              "  positional: {type: learned}\n"
                              "  blocks:\n"
                              "    repeat: 2\n"
                              "    attention: {heads: 2, dropout: 0.1}\n"
                              "    ffn: {hidden: 64, activation: gelu}\n"
                              "    dropout: 0.1\n"
                              "train:\n"
                              "  batch: 8\n"
                              "  steps: 60\n"
                              "  optimizer: {type: adamw, lr: 1.0e-2, weight_decay: 0.1}\n"
                              "  schedule: {type: cosine, warmup: 4, min_lr: 1.0e-3}\n"
                              "  eval: {every: 20, batches: 8}\n"
                              "  log_every: 1\n";

typedef struct rec {
    float loss[STEPS + 1];
    int seen[STEPS + 1];
    double val[STEPS + 1];
    int stop_at; /* raise *stop after this step (0 = never) */
    volatile sig_atomic_t *stop;
    double scale[STEPS + 1]; /* fp16's loss scale and skipped steps as logged */
    uint64_t skipped[STEPS + 1];
    const clf_runtime *rt; /* when set: its host waits so far, at each log */
    uint64_t drains[STEPS + 1];
} rec;

static void on_log(void *user, const clf_train_progress *p)
{
    rec *r = user;
    if (p->step <= STEPS) {
        r->loss[p->step] = (float)p->loss;
        r->seen[p->step] = 1;
        r->scale[p->step] = p->loss_scale;
        r->skipped[p->step] = p->skipped;
        r->drains[p->step] = r->rt != NULL ? clf_runtime_drains(r->rt) : 0;
    }
    if (r->stop_at > 0 && p->step == (uint64_t)r->stop_at)
        *r->stop = 1;
}

static void on_eval(void *user, const clf_train_eval *e)
{
    rec *r = user;
    if (e->step <= STEPS)
        r->val[e->step] = e->val_loss;
}

static clf_model *new_model(clf_runtime *rt, const clf_model_config *cfg, int V, unsigned flags,
                            int B)
{
    clf_model *m = NULL;
    clf_error e;
    tu_ok(clf_model_create(rt, cfg, V, B, flags, &m, &e), &e, "model create");
    return m;
}

static clf_status run(clf_model *m, const clf_model_config *cfg, const clf_dataset *ds,
                      const clf_tokenizer *tok, const char *dir, int resume, rec *r,
                      clf_train_result *res, clf_error *e)
{
    static volatile sig_atomic_t stop;
    stop = 0;
    r->stop = &stop;
    clf_trainer_options o;
    memset(&o, 0, sizeof o);
    o.out_dir = dir;
    o.resume = resume;
    o.stop = &stop;
    o.cb.user = r;
    o.cb.on_log = on_log;
    o.cb.on_eval = on_eval;
    clf_train_data data;
    memset(&data, 0, sizeof data);
    data.text = ds;
    return clf_trainer_run(m, cfg, &data, tok, &o, res, e);
}

static double host_ce(const float *z, int V, int y)
{
    double mx = z[0];
    for (int i = 1; i < V; i++)
        mx = z[i] > mx ? z[i] : mx;
    double s = 0.0;
    for (int i = 0; i < V; i++)
        s += exp((double)z[i] - mx);
    return log(s) + mx - (double)z[y];
}

static void test_eval_split(clf_model *m, const clf_dataset *ds)
{
    clf_error e;
    double loss = 0.0;
    uint64_t n = 0;
    tu_ok(clf_trainer_eval_split(m, ds, CLF_SPLIT_VAL, &loss, &n, &e), &e, "eval split");
    clf_model_dims d = clf_model_dims_get(m);
    size_t nval = clf_dataset_size(ds, CLF_SPLIT_VAL);
    TU_CHECK(n == nval - 1, "eval_split counts every target once: %llu of %zu tokens",
             (unsigned long long)n, nval);
    size_t W = clf_dataset_eval_windows(ds, CLF_SPLIT_VAL, d.T);
    int32_t *x = malloc((size_t)d.T * sizeof *x), *y = malloc((size_t)d.T * sizeof *y);
    float *z = malloc((size_t)d.T * (size_t)d.V * sizeof *z);
    double sum = 0.0;
    uint64_t cnt = 0;
    for (size_t w = 0; w < W; w++) {
        size_t len = 0;
        tu_ok(clf_dataset_eval_window(ds, CLF_SPLIT_VAL, d.T, w, x, y, NULL, &len, &e), &e,
              "window");
        tu_ok(clf_model_set_batch(m, clf_batch_decoder(x, y, 1, d.T), &e), &e, "set_batch");
        tu_ok(clf_model_forward(m, 0, &e), &e, "forward");
        tu_ok(clf_model_logits_read(m, z, &e), &e, "logits");
        for (size_t t = 0; t < len; t++)
            sum += host_ce(z + t * (size_t)d.V, d.V, y[t]);
        cnt += len;
    }
    double ref = sum / (double)cnt;
    TU_CHECK(fabs(loss - ref) <= 1e-5 * fabs(ref), "eval_split %.8f vs host reference %.8f", loss,
             ref);
    free(x);
    free(y);
    free(z);
}

/* A batch-1 inference model with the checkpoint's parameters. */
static clf_model *load_infer(clf_runtime *rt, const clf_model_config *cfg, int V,
                             const char *ck_path)
{
    clf_error e;
    clf_model *m = new_model(rt, cfg, V, CLF_MODEL_INFER, 1);
    clf_checkpoint *ck = NULL;
    tu_ok(clf_checkpoint_open(ck_path, &ck, &e), &e, "checkpoint open");
    tu_ok(clf_checkpoint_load(ck, m, CLF_CHECKPOINT_PARAMS, &e), &e, "checkpoint load");
    clf_checkpoint_close(ck);
    return m;
}

static void test_kv_decode(clf_runtime *rt, const clf_model_config *cfg, int V, const char *ck_path,
                           const clf_dataset *ds)
{
    clf_error e;
    clf_model *m = load_infer(rt, cfg, V, ck_path);
    clf_model_dims d = clf_model_dims_get(m);
    const int P = 5, N = 10; /* P + N <= T */
    size_t nt = 0;
    const int32_t *toks = clf_dataset_tokens(ds, CLF_SPLIT_VAL, &nt);
    float *full = malloc((size_t)d.T * (size_t)V * sizeof *full);
    float *step = malloc((size_t)V * sizeof *step);
    double *ref = malloc((size_t)V * sizeof *ref);
    int32_t seq[16];
    memcpy(seq, toks, (size_t)(P + N) * sizeof *seq);
    tu_ok(clf_model_set_batch(m, clf_batch_decoder(seq, NULL, 1, P + N), &e), &e, "set_batch");
    tu_ok(clf_model_forward(m, 0, &e), &e, "forward");
    tu_ok(clf_model_logits_read(m, full, &e), &e, "logits");
    tu_ok(clf_model_prefill(m, seq, 1, P, step, &e), &e, "prefill");
    int ok = 1;
    for (int pos = P - 1; pos < P + N - 1 && ok; pos++) {
        if (pos >= P)
            tu_ok(clf_model_decode_step(m, &seq[pos], 1, pos, step, &e), &e, "decode");
        for (int i = 0; i < V; i++)
            ref[i] = full[(size_t)pos * (size_t)V + (size_t)i];
        char name[64];
        snprintf(name, sizeof name, "KV-cache logits at position %d", pos);
        ok = tu_close(name, step, ref, (size_t)V, 1e-4, 1e-4);
    }
    free(full);
    free(step);
    free(ref);
    clf_model_destroy(m);
}

/* Tokens clf_generate emits, up to a stop after `stop` of them (0: none). */
typedef struct gen_rec {
    int32_t tok[64];
    int n, stop;
} gen_rec;

static int gen_collect(void *user, int32_t token, const char *piece, size_t len)
{
    (void)piece;
    (void)len;
    gen_rec *g = user;
    if (g->n < 64)
        g->tok[g->n] = token;
    g->n++;
    return g->stop > 0 && g->n >= g->stop;
}

static void test_greedy(clf_runtime *rt, const clf_model_config *cfg, int V, const char *ck_path,
                        const clf_tokenizer *tok)
{
    clf_error e;
    clf_model *m = load_infer(rt, cfg, V, ck_path);
    /* 40 tokens; 14 under the simulator flag (Mesa's leg: still 4 slides) */
    const int T = clf_model_dims_get(m).T, N = tu_simulator() ? 14 : 40;
    const char *prompt = "ROMEO:";
    /* the host's loop: the sampler's greedy choice from each step's logits,
     * the window sliding by a prefill of the last T - 1 tokens */
    int32_t *ids = NULL, seq[64];
    size_t n = 0;
    tu_ok(clf_tokenizer_encode(tok, prompt, strlen(prompt), &ids, &n, &e), &e, "encode");
    memcpy(seq, ids, n * sizeof *seq);
    free(ids);
    float *logits = malloc((size_t)V * sizeof *logits);
    clf_sampler_options so = clf_sampler_options_default();
    so.temperature = 0.0;
    clf_sampler *smp = NULL;
    tu_ok(clf_sampler_create(V, &so, &smp, &e), &e, "sampler");
    tu_ok(clf_model_prefill(m, seq, 1, (int)n, logits, &e), &e, "prefill");
    int pos = (int)n;
    const size_t n0 = n;
    for (int i = 0; i < N; i++) {
        seq[n++] = clf_sampler_sample(smp, logits, V);
        if (i + 1 == N)
            break;
        if (pos < T)
            tu_ok(clf_model_decode_step(m, &seq[n - 1], 1, pos++, logits, &e), &e, "decode");
        else {
            tu_ok(clf_model_prefill(m, seq + n - (T - 1), 1, T - 1, logits, &e), &e, "slide");
            pos = T - 1;
        }
    }
    gen_rec g = {.n = 0};
    clf_generate_stats st;
    tu_ok(clf_generate(m, tok, prompt, strlen(prompt), N, &so, gen_collect, &g, &st, &e), &e,
          "generate greedy");
    TU_CHECK(g.n == N && st.tokens == N && st.slides > 0 &&
                 memcmp(g.tok, seq + n0, (size_t)N * sizeof *seq) == 0,
             "greedy generation on the device: the host loop's %d tokens (%d emitted, %ld slides)",
             N, g.n, st.slides);
    gen_rec s5 = {.n = 0, .stop = 5};
    tu_ok(clf_generate(m, tok, prompt, strlen(prompt), N, &so, gen_collect, &s5, &st, &e), &e,
          "generate greedy, stopped");
    TU_CHECK(s5.n == 5 && st.tokens == 5 && memcmp(s5.tok, seq + n0, 5 * sizeof *seq) == 0,
             "greedy generation stopped by its callback after 5 tokens (%d)", s5.n);
    /* the calls' order: a pick needs a step's logits, a picked step a pick */
    int32_t p = 0;
    clf_event *ev = NULL;
    tu_ok(clf_model_prefill(m, seq, 1, 3, logits, &e), &e, "prefill");
    const int host = clf_sampler_sample(smp, logits, V);
    TU_CHECK(clf_model_decode_picked(m, 1, 3, &e) == CLF_ERR_ARG,
             "decode_picked before a pick is refused");
    tu_ok(clf_model_greedy_pick(m, 1, &p, &ev, &e), &e, "greedy_pick");
    tu_ok(clf_event_wait(ev, &e), &e, "pick read"); /* and releases it */
    TU_CHECK(p == host, "greedy_pick after a 3-token prefill: %d, the sampler's %d", p, host);
    TU_CHECK(clf_model_greedy_pick(m, 1, &p, &ev, &e) == CLF_ERR_ARG && ev == NULL,
             "a second pick from the same logits is refused");
    clf_sampler_destroy(smp);
    free(logits);
    clf_model_destroy(m);
}

/* Gradient accumulation: batch 4 x accumulate 2 against batch 8 x 1,
 * without dropout (its masks are keyed by micro-batch), over 12 steps:
 * the same windows (the source draws them in the same order), so every
 * step's loss agrees to float rounding: relative 2e-4. The gradients are
 * summed in another order, and Adam divides each by its own running RMS,
 * so a component near zero whose rounding differs moves by up to lr: over
 * 12 steps that reaches 5e-5 for some seeds (CLFORMER_TEST_SEED=
 * 1795503256321777; most give 1e-7). With dropout and accumulate 2, a run stopped
 * after step 5 and resumed equals the uninterrupted one bit for bit. */
/* Remove the run directories (their checkpoints) a test made. */
static void remove_runs(const char *const *dirs, int n)
{
    for (int i = 0; i < n; i++) {
        char f[4200];
        snprintf(f, sizeof f, "%s/%s", dirs[i], CLF_CHECKPOINT_FILE);
        unlink(f);
        snprintf(f, sizeof f, "%s/best.safetensors", dirs[i]);
        unlink(f);
        rmdir(dirs[i]);
    }
}

/* The host's waits for the queue in training (clf_runtime_drains): 20
 * steps logged at steps 1, 5, 10, 15 and 20 and evaluated at 20 only. A
 * logged step reads its figures once, after its update; a step not logged
 * waits for nothing (a batch's staging slot is reused once the marker after
 * its upload has completed, not after a finish). With accumulate 2 too:
 * the micro-batches' losses are summed on the device, read with the rest. */
static void test_drains(clf_runtime *rt, const clf_model_config *base, int V, const clf_dataset *ds,
                        const clf_tokenizer *tok)
{
    clf_model_config cfg = *base;
    cfg.train.steps = 20;
    cfg.train.log_every = 5;
    cfg.train.eval.every = 0;
    for (int acc = 1; acc <= 2; acc++) {
        char dir[] = "/tmp/clf_trainer_d_XXXXXX";
        if (mkdtemp(dir) == NULL) {
            TU_CHECK(0, "mkdtemp");
            return;
        }
        cfg.train.batch = 8 / acc;
        cfg.train.accumulate = acc;
        rec x;
        memset(&x, 0, sizeof x);
        x.rt = rt;
        clf_train_result r;
        clf_error e;
        clf_model *m = new_model(rt, &cfg, V, CLF_MODEL_TRAIN, cfg.train.batch);
        tu_ok(run(m, &cfg, ds, tok, dir, 0, &x, &r, &e), &e, "drains run");
        clf_model_destroy(m);
        const int at[5] = {1, 5, 10, 15, 20};
        int ok = 1;
        for (int i = 1; i < 5; i++)
            ok &= x.seen[at[i - 1]] && x.seen[at[i]] && x.drains[at[i]] - x.drains[at[i - 1]] == 1;
        TU_CHECK(ok,
                 "accumulate %d: 1 host wait per 4 or 5 steps, one logged (steps 1-5: %llu, "
                 "5-10: %llu, 10-15: %llu, 15-20: %llu)",
                 acc, (unsigned long long)(x.drains[5] - x.drains[1]),
                 (unsigned long long)(x.drains[10] - x.drains[5]),
                 (unsigned long long)(x.drains[15] - x.drains[10]),
                 (unsigned long long)(x.drains[20] - x.drains[15]));
        const char *dirs[1] = {dir};
        remove_runs(dirs, 1);
    }
}

/* fp16 storage with dynamic loss scaling from a first scale of 2^32: the
 * FFN's half-precision hidden gradient overflows, so the first steps are
 * skipped and the scale halves each time until it fits; then, 4 clean
 * steps in a row double it. Near where it fits some steps still overflow
 * and others not (the gradients change as the model learns), so the run is
 * long enough for the skips to take the scale below that band: over 24
 * steps from 2^40, 1 seed in 30 never saw 4 clean steps in a row
 * (CLFORMER_TEST_SEED=1795815213259188: 15 skips, then clean runs of 1, 2
 * and 3 between skips). The progress reports it (at step s the scale
 * and skip count left by steps 1 .. s-1: kept on the device before the
 * step's own decision, read with the loss after it); a run stopped after
 * step 10 (inside the skipping or just past it) and resumed from its
 * checkpoint matches the uninterrupted run bit for bit, scale and skip
 * count included (the checkpoint's "loss_scale"). */
enum { LS_STEPS = 40 };
static void test_loss_scaling(clf_runtime *rt, const clf_model_config *base, int V,
                              const clf_dataset *ds, const clf_tokenizer *tok)
{
    clf_error e;
    clf_model_config cfg = *base;
    cfg.train.steps = LS_STEPS;
    cfg.train.precision = CLF_PRECISION_FP16;
    cfg.train.loss_scale.init = 0x1p32;
    cfg.train.loss_scale.interval = 4;
    char da[] = "/tmp/clf_trainer_f_XXXXXX", db[] = "/tmp/clf_trainer_g_XXXXXX";
    if (mkdtemp(da) == NULL || mkdtemp(db) == NULL) {
        TU_CHECK(0, "mkdtemp");
        return;
    }
    rec a, b, b2;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&b2, 0, sizeof b2);
    clf_train_result r;
    clf_model *m = new_model(rt, &cfg, V, CLF_MODEL_TRAIN, cfg.train.batch);
    tu_ok(run(m, &cfg, ds, tok, da, 0, &a, &r, &e), &e, "fp16, uninterrupted");
    clf_model_destroy(m);
    /* step s was skipped iff the count logged at s + 1 is one more than at s */
    int first_clean = 0;
    for (int s = 1; s < LS_STEPS && !first_clean; s++)
        if (a.skipped[s + 1] == a.skipped[s])
            first_clean = s;
    const int k = first_clean - 1; /* skipped in a row from the start */
    TU_CHECK(a.scale[1] == 0x1p32 && a.skipped[1] == 0 && k >= 3 && k + 5 <= LS_STEPS &&
                 a.skipped[k + 1] == (uint64_t)k && a.scale[k + 1] == 0x1p32 / (double)(1u << k),
             "fp16 from scale 2^32: steps 1-%d skipped (halving to %g), step %d the first "
             "clean one",
             k, k >= 0 ? a.scale[k + 1] : 0.0, first_clean);
    /* every logged step follows the rules: a skip halves, the 4th clean step in a row doubles */
    int rules = 1, run_len = 0, doublings = 0;
    for (int s = 2; s <= LS_STEPS; s++) {
        const int skip = a.skipped[s] == a.skipped[s - 1] + 1;
        run_len = skip ? 0 : run_len + 1;
        const int dbl = run_len == 4;
        if (dbl)
            run_len = 0;
        doublings += dbl;
        rules &= (skip || a.skipped[s] == a.skipped[s - 1]) &&
                 a.scale[s] == (skip  ? fmax(1.0, a.scale[s - 1] / 2)
                                : dbl ? 2 * a.scale[s - 1]
                                      : a.scale[s - 1]);
    }
    TU_CHECK(rules && doublings > 0 && isfinite(a.loss[LS_STEPS]) && a.loss[LS_STEPS] < a.loss[1],
             "then a skip halves the scale and 4 clean steps in a row double it at every step "
             "(%d doublings, %llu skipped by step %d, scale %g), and the loss falls (%.4f -> "
             "%.4f)",
             doublings, (unsigned long long)a.skipped[LS_STEPS], LS_STEPS, a.scale[LS_STEPS],
             (double)a.loss[1], (double)a.loss[LS_STEPS]);
    b.stop_at = 10;
    m = new_model(rt, &cfg, V, CLF_MODEL_TRAIN, cfg.train.batch);
    clf_status st = run(m, &cfg, ds, tok, db, 0, &b, &r, &e);
    TU_CHECK(st == CLF_ERR_INTERRUPTED, "fp16: stopped after step 10");
    clf_model_destroy(m);
    m = new_model(rt, &cfg, V, CLF_MODEL_TRAIN, cfg.train.batch);
    tu_ok(run(m, &cfg, ds, tok, db, 1, &b2, &r, &e), &e, "fp16, resumed");
    clf_model_destroy(m);
    int same = 1;
    for (int s = 1; s <= LS_STEPS; s++) {
        const rec *x = s <= 10 ? &b : &b2;
        same &= x->seen[s] && x->loss[s] == a.loss[s] && x->scale[s] == a.scale[s] &&
                x->skipped[s] == a.skipped[s];
    }
    TU_CHECK(same, "fp16: stopped at 10 and resumed, every step bit-identical (losses, scale, "
                   "skipped)");
    const char *dirs[2] = {da, db};
    remove_runs(dirs, 2);
}

static void test_accumulate(clf_runtime *rt, const clf_model_config *base, int V,
                            const clf_dataset *ds, const clf_tokenizer *tok)
{
    clf_error e;
    clf_model_config cfg = *base;
    cfg.train.steps = 12;
    cfg.embedding.dropout = cfg.blocks.attention.dropout = cfg.blocks.dropout = 0.0;
    rec x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    clf_train_result r;
    char dx[] = "/tmp/clf_trainer_x_XXXXXX", dy[] = "/tmp/clf_trainer_y_XXXXXX";
    char dz[] = "/tmp/clf_trainer_z_XXXXXX", dw[] = "/tmp/clf_trainer_w_XXXXXX";
    if (mkdtemp(dx) == NULL || mkdtemp(dy) == NULL || mkdtemp(dz) == NULL || mkdtemp(dw) == NULL) {
        TU_CHECK(0, "mkdtemp");
        return;
    }
    cfg.train.batch = 8;
    cfg.train.accumulate = 1;
    clf_model *m = new_model(rt, &cfg, V, CLF_MODEL_TRAIN, 8);
    tu_ok(run(m, &cfg, ds, tok, dx, 0, &x, &r, &e), &e, "batch 8");
    clf_model_destroy(m);
    cfg.train.batch = 4;
    cfg.train.accumulate = 2;
    m = new_model(rt, &cfg, V, CLF_MODEL_TRAIN, 4);
    tu_ok(run(m, &cfg, ds, tok, dy, 0, &y, &r, &e), &e, "batch 4 x 2");
    clf_model_destroy(m);
    double worst = 0;
    int all = 1;
    for (int s = 1; s <= 12; s++) {
        all &= x.seen[s] && y.seen[s];
        worst = fmax(worst, fabs((double)x.loss[s] - y.loss[s]) / fabs((double)x.loss[s]));
    }
    TU_CHECK(all && worst <= 2e-4,
             "accumulate: batch 4 x 2 micro-batches matches batch 8 at every step (worst "
             "relative difference %.2e; step 12: %.7f vs %.7f)",
             worst, (double)y.loss[12], (double)x.loss[12]);

    /* with dropout: interrupted and resumed mid-run, bit-identical */
    cfg = *base;
    cfg.train.steps = 12;
    cfg.train.batch = 4;
    cfg.train.accumulate = 2;
    rec a, b, b2;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&b2, 0, sizeof b2);
    m = new_model(rt, &cfg, V, CLF_MODEL_TRAIN, 4);
    tu_ok(run(m, &cfg, ds, tok, dz, 0, &a, &r, &e), &e, "accumulate 2, uninterrupted");
    clf_model_destroy(m);
    b.stop_at = 5;
    m = new_model(rt, &cfg, V, CLF_MODEL_TRAIN, 4);
    clf_status st = run(m, &cfg, ds, tok, dw, 0, &b, &r, &e);
    TU_CHECK(st == CLF_ERR_INTERRUPTED, "accumulate 2: stopped after step 5");
    clf_model_destroy(m);
    m = new_model(rt, &cfg, V, CLF_MODEL_TRAIN, 4);
    tu_ok(run(m, &cfg, ds, tok, dw, 1, &b2, &r, &e), &e, "accumulate 2, resumed");
    clf_model_destroy(m);
    int same = 1;
    for (int s = 1; s <= 12; s++)
        same &=
            (s <= 5 ? b.seen[s] && b.loss[s] == a.loss[s] : b2.seen[s] && b2.loss[s] == a.loss[s]);
    TU_CHECK(same, "accumulate 2 with dropout: stopped at 5 and resumed, steps 1-12 bit-identical");
    const char *dirs[4] = {dx, dy, dz, dw};
    remove_runs(dirs, 4);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    clf_error e;
    clf_model_config cfg;
    tu_ok(clf_config_parse_string(YAML_CFG, "test_trainer.yaml", NULL, 0, &cfg, &e), &e, "config");
    cfg.train.seed = tu_seed() % 1000000007ull;

    clf_tokenizer *tok = NULL;
    clf_dataset *ds = NULL;
    tu_char_text(60000, &tok, &ds);
    const int V = clf_tokenizer_vocab_size(tok);

    char dir_a[] = "/tmp/clf_trainer_a_XXXXXX", dir_b[] = "/tmp/clf_trainer_b_XXXXXX";
    if (mkdtemp(dir_a) == NULL || mkdtemp(dir_b) == NULL) {
        fprintf(stderr, "FATAL: mkdtemp\n");
        return 1;
    }

    /* A: uninterrupted */
    rec a;
    memset(&a, 0, sizeof a);
    clf_train_result ra;
    clf_model *ma = new_model(rt, &cfg, V, CLF_MODEL_TRAIN, cfg.train.batch);
    tu_ok(run(ma, &cfg, ds, tok, dir_a, 0, &a, &ra, &e), &e, "run A");
    int all = 1;
    for (int s = 1; s <= STEPS; s++)
        all &= a.seen[s];
    TU_CHECK(all && ra.last_step == STEPS && !ra.interrupted, "A: %d steps logged",
             (int)ra.last_step);
    /* Seed-dependent bars, set from 200 seeds on PoCL: the first-5 minus last-5 loss drop is
     * 0.70 +- 0.07 (least 0.39), the validation loss at step 20 (8 batches) 3.28 +- 0.06 (most
     * 3.41; with 2 batches the estimate alone varied enough to cross ln V - 0.5 once). */
    double first5 = 0, last5 = 0;
    for (int s = 1; s <= 5; s++) {
        first5 += a.loss[s] / 5.0;
        last5 += a.loss[STEPS - 5 + s] / 5.0;
    }
    TU_CHECK(last5 < first5 - 0.25, "A: loss falls: first 5 steps %.4f, last 5 %.4f", first5,
             last5);
    TU_CHECK(isfinite(a.val[20]) && isfinite(a.val[STEPS]) && a.val[20] < log((double)V) - 0.5 &&
                 a.val[STEPS] < log((double)V) - 0.5,
             "A: val loss at 20 / %d: %.4f / %.4f, both below ln V - 0.5 = %.4f", STEPS, a.val[20],
             a.val[STEPS], log((double)V) - 0.5);

    /* B: interrupted after STOP_AT, then resumed into a new model */
    rec b;
    memset(&b, 0, sizeof b);
    b.stop_at = STOP_AT;
    clf_train_result rb;
    clf_model *mb = new_model(rt, &cfg, V, CLF_MODEL_TRAIN, cfg.train.batch);
    clf_status st = run(mb, &cfg, ds, tok, dir_b, 0, &b, &rb, &e);
    TU_CHECK(st == CLF_ERR_INTERRUPTED && rb.interrupted && rb.last_step == STOP_AT,
             "B: stop flag ends the run at step %d (status %s, last step %llu)", STOP_AT,
             clf_status_name(st), (unsigned long long)rb.last_step);
    char ck_b[4200];
    snprintf(ck_b, sizeof ck_b, "%s/%s", dir_b, CLF_CHECKPOINT_FILE);
    clf_checkpoint *ck = NULL;
    if (clf_checkpoint_open(ck_b, &ck, &e) == CLF_OK) {
        TU_CHECK(clf_checkpoint_step(ck) == STOP_AT, "B: the stop wrote a checkpoint at step %llu",
                 (unsigned long long)clf_checkpoint_step(ck));
        clf_checkpoint_close(ck);
    } else {
        TU_CHECK(0, "B: the stop wrote a checkpoint (%s)", e.msg);
    }
    int same = 1, bad = -1;
    for (int s = 1; s <= STOP_AT; s++)
        if (!(b.seen[s] && b.loss[s] == a.loss[s]) && bad < 0) {
            same = 0;
            bad = s;
        }
    TU_CHECK(same, "B: steps 1-%d equal A's bit for bit (first difference: step %d)", STOP_AT, bad);
    clf_model_destroy(mb);

    /* resume with a changed learning rate: refused */
    clf_model_config bad_cfg = cfg;
    bad_cfg.train.optimizer.lr = 2.0 * cfg.train.optimizer.lr;
    clf_model *mc = new_model(rt, &bad_cfg, V, CLF_MODEL_TRAIN, cfg.train.batch);
    rec c;
    memset(&c, 0, sizeof c);
    clf_train_result rc;
    st = run(mc, &bad_cfg, ds, tok, dir_b, 1, &c, &rc, &e);
    TU_CHECK(st == CLF_ERR_ARG && strstr(e.msg, "train.optimizer.lr") != NULL,
             "resume with another lr refused naming the key: %s", e.msg);
    clf_model_destroy(mc);

    rec b2;
    memset(&b2, 0, sizeof b2);
    clf_model *mr = new_model(rt, &cfg, V, CLF_MODEL_TRAIN, cfg.train.batch);
    tu_ok(run(mr, &cfg, ds, tok, dir_b, 1, &b2, &rb, &e), &e, "run B resumed");
    same = 1;
    bad = -1;
    for (int s = STOP_AT + 1; s <= STEPS; s++)
        if (!(b2.seen[s] && b2.loss[s] == a.loss[s]) && bad < 0) {
            same = 0;
            bad = s;
        }
    TU_CHECK(same && rb.first_step == STOP_AT && rb.last_step == STEPS,
             "resumed steps %d-%d are bit-identical to the uninterrupted run (first difference: "
             "step %d: %.9g vs %.9g)",
             STOP_AT + 1, STEPS, bad, bad > 0 ? b2.loss[bad] : 0.0, bad > 0 ? a.loss[bad] : 0.0);
    TU_CHECK(b2.val[STEPS] == a.val[STEPS], "resumed final val loss %.9g == %.9g", b2.val[STEPS],
             a.val[STEPS]);
    clf_model_dims d = clf_model_dims_get(ma);
    float *pa = malloc(d.n_params * sizeof *pa), *pb = malloc(d.n_params * sizeof *pb);
    tu_ok(clf_model_flat_read(ma, CLF_SLOT_PARAM, pa, &e), &e, "params A");
    tu_ok(clf_model_flat_read(mr, CLF_SLOT_PARAM, pb, &e), &e, "params B");
    TU_CHECK(memcmp(pa, pb, d.n_params * sizeof *pa) == 0,
             "final parameters of the resumed run are identical");
    free(pa);
    free(pb);
    clf_model_destroy(mr);

    test_eval_split(ma, ds);
    clf_model_destroy(ma);

    char ck_a[4200];
    snprintf(ck_a, sizeof ck_a, "%s/%s", dir_a, CLF_CHECKPOINT_FILE);
    test_kv_decode(rt, &cfg, V, ck_a, ds);
    test_greedy(rt, &cfg, V, ck_a, tok);
    test_accumulate(rt, &cfg, V, ds, tok);
    /* the host's waits are the host's own behaviour, the same on every
     * implementation: not under the simulator flag (the Mesa leg, where
     * these two runs cost seconds each); every other leg counts them */
    if (!tu_simulator())
        test_drains(rt, &cfg, V, ds, tok);
    test_loss_scaling(rt, &cfg, V, ds, tok);

    unlink(ck_a);
    unlink(ck_b);
    rmdir(dir_a);
    rmdir(dir_b);
    clf_dataset_destroy(ds);
    clf_tokenizer_destroy(tok);
    clf_runtime_destroy(rt);
    return tu_finish();
}
