/*
 * test_trainer_seq.c - the training loop (trainer.h) on the encoder kinds:
 * the same loop as the GPT's, fed by the sentence loader, with the
 * evaluation hooks (loss, accuracy, BLEU), early stopping and resume.
 *
 * Data: written to a temporary folder at start: a toy German -> English
 * digit-word translation (64 training pairs, 16 validation pairs: "drei
 * eins" -> "three one") and a toy sentiment TSV (200 / 40 sentences, label
 * 1 iff the sentence holds "good", 0 iff "bad"), with a BPE of 300 tokens
 * trained on the training text (joint source + target). train.seed comes
 * from the test seed.
 *
 * Checks:
 *   - translator, 3 epochs of 4 batches (16 sentences), dropout 0.1, eval
 *     each epoch: 12 steps logged; exactly 3 evaluations, after steps 4, 8,
 *     12, reporting epochs 1, 2, 3, each with a finite validation loss and
 *     a BLEU in [0, 100];
 *   - interruption and resume: the stop flag after step 6 (inside epoch
 *     2) gives CLF_ERR_INTERRUPTED and a checkpoint at step 6; a new model
 *     resumed from it runs steps 7-12 with losses bit-identical (==) to the
 *     uninterrupted run, the same final validation loss and BLEU, and the
 *     same final parameters (memcmp); the checkpoint carries the loader
 *     state (data_state) and the caller's metadata (src_lang);
 *   - resuming with another token budget is refused;
 *   - classifier: the validation loss and accuracy of clf_seqeval_run over
 *     batches padded by length equal a host computation from the logits of
 *     one unpadded sentence per forward (loss relative 1e-5, accuracy
 *     exact), so padding masks nothing wrong in evaluation;
 *   - early stopping on accuracy (eval every 5 steps, patience 8, 400
 *     steps): the separable toy task reaches >= 95% dev accuracy, the run
 *     stops early (res.early_stopped, last step < 400) exactly `patience`
 *     evaluations after its best, reports that best, and best.safetensors
 *     holds the best step (an early plateau below 95% stopped patience 2 in
 *     about 1 of 30 seeds, and patience 4 in 1 of 200: seed
 *     1795807823683442, 0.925 at step 5, then four evaluations no better);
 *   - a decoder-only metric mismatch (metric bleu on a classifier) is
 *     refused with CLF_ERR_CONFIG.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "model/data/seqdata.h"
#include "model/eval/seqeval.h"
#include "model/graph/model.h"
#include "model/text/tokenizer.h"
#include "model/train/checkpoint.h"
#include "model/train/trainer.h"
#include "tests/test_util.h"

#define MAXS 512

static const char *S2S_YAML =
    "model:\n"
    "  kind: encoder-decoder\n"
    "  vocab: {tokenizer: bpe, size: 300}\n"
    "  context: 24\n"
    "  embedding: {dim: 32, scale: true, dropout: 0.1}\n"
    "  positional: {type: sinusoidal}\n"
    "  blocks:\n"
    "    repeat: 1\n"
    "    attention: {heads: 2, dropout: 0.1}\n"
    "    ffn: {hidden: 64, activation: relu, dropout: 0.1}\n"
    "    dropout: 0.1\n"
    "  share_embeddings: true\n"
    "  head: {type: lm}\n"
    "train:\n"
    "  batch: 16\n"
    "  steps: 0\n"
    "  epochs: 3\n"
    "  label_smoothing: 0.1\n"
    "  optimizer: {type: adam, lr: 1.0, betas: [0.9, 0.98], eps: 1.0e-9, weight_decay: 0.0}\n"
    "  schedule: {type: noam, warmup: 4}\n"
    "  eval: {every: 0}\n"
    "  log_every: 1\n";

static const char *CLS_YAML = "model:\n"
                              "  kind: encoder\n"
                              "  vocab: {tokenizer: bpe, size: 300}\n"
                              "  context: 16\n"
                              "  embedding: {dim: 32, dropout: 0.1}\n"
                              "  positional: {type: learned}\n"
                              "  blocks:\n"
                              "    repeat: 1\n"
                              "    attention: {heads: 2, causal: false}\n"
                              "    ffn: {hidden: 64}\n"
                              "    dropout: 0.1\n"
                              "  head: {type: classifier, labels: 2, pool: mean}\n"
                              "train:\n"
                              "  batch: 16\n"
                              "  steps: 400\n"
                              "  optimizer: {type: adamw, lr: 3.0e-3, weight_decay: 0.0}\n"
                              "  schedule: {type: constant, warmup: 5}\n"
                              "  eval: {every: 5}\n"
                              "  early_stop: {patience: 8, metric: accuracy}\n"
                              "  log_every: 1\n";

typedef struct rec {
    float loss[MAXS + 1];
    int seen[MAXS + 1];
    int n_eval;
    uint64_t eval_step[64];
    int64_t eval_epoch[64];
    double eval_loss[64], eval_bleu[64], eval_acc[64];
    int eval_best[64];
    int stop_at;
    volatile sig_atomic_t *stop;
} rec;

static void on_log(void *user, const clf_train_progress *p)
{
    rec *r = user;
    if (p->step <= MAXS) {
        r->loss[p->step] = (float)p->loss;
        r->seen[p->step] = 1;
    }
    if (r->stop_at > 0 && p->step == (uint64_t)r->stop_at)
        *r->stop = 1;
}

static void on_eval(void *user, const clf_train_eval *e)
{
    rec *r = user;
    if (r->n_eval < 64) {
        int i = r->n_eval++;
        r->eval_step[i] = e->step;
        r->eval_epoch[i] = e->epoch;
        r->eval_loss[i] = e->val_loss;
        r->eval_bleu[i] = e->bleu;
        r->eval_acc[i] = e->accuracy;
        r->eval_best[i] = e->best;
    }
}

static clf_status run(clf_model *m, const clf_model_config *cfg, const clf_train_data *data,
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
    return clf_trainer_run(m, cfg, data, tok, &o, res, e);
}

static clf_model *new_model(clf_runtime *rt, const clf_model_config *cfg,
                            const clf_train_data *data, int V)
{
    clf_model_limits lim;
    clf_model *m = NULL;
    clf_error e;
    tu_ok(clf_trainer_seq_limits(cfg, data, &lim, &e), &e, "limits");
    tu_ok(clf_model_create_ex(rt, cfg, V, &lim, CLF_MODEL_TRAIN, &m, &e), &e, "model create");
    return m;
}

/* ---- toy data ----------------------------------------------------------------------------- */

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "FATAL: writing %s\n", path);
        exit(1);
    }
}

static void make_data(const char *dir, char **joint_s2s, char **joint_cls)
{
    static const char *de[] = {"null",  "eins",  "zwei",   "drei", "vier",
                               "fuenf", "sechs", "sieben", "acht", "neun"};
    static const char *en[] = {"zero", "one", "two",   "three", "four",
                               "five", "six", "seven", "eight", "nine"};
    static const char *filler[] = {"movie", "film", "story", "plot", "acting", "it", "this"};
    size_t cap = 1 << 16;
    char *src[2], *tgt[2], *tsv[2];
    for (int i = 0; i < 2; i++) {
        src[i] = calloc(cap, 1);
        tgt[i] = calloc(cap, 1);
        tsv[i] = calloc(cap, 1);
        strcpy(tsv[i], "sentence\tlabel\n");
    }
    tu_rng r = tu_rng_new(1234); /* fixed data for every seed */
    for (int i = 0; i < 80; i++) {
        int k = i < 64 ? 0 : 1, n = 2 + (int)(tu_u32(&r) % 5);
        for (int j = 0; j < n; j++) {
            int w = (int)(tu_u32(&r) % 10);
            strcat(src[k], de[w]);
            strcat(tgt[k], en[w]);
            strcat(src[k], j + 1 < n ? " " : "\n");
            strcat(tgt[k], j + 1 < n ? " " : "\n");
        }
    }
    for (int i = 0; i < 240; i++) {
        int k = i < 200 ? 0 : 1, n = 3 + (int)(tu_u32(&r) % 5), lab = (int)(tu_u32(&r) % 2);
        int p = (int)(tu_u32(&r) % (uint32_t)n);
        for (int j = 0; j < n; j++) {
            strcat(tsv[k], j == p ? (lab ? "good" : "bad") : filler[tu_u32(&r) % 7]);
            strcat(tsv[k], j + 1 < n ? " " : "");
        }
        strcat(tsv[k], lab ? "\t1\n" : "\t0\n");
    }
    write_file(dir, "train.de", src[0]);
    write_file(dir, "train.en", tgt[0]);
    write_file(dir, "val.de", src[1]);
    write_file(dir, "val.en", tgt[1]);
    write_file(dir, "train.tsv", tsv[0]);
    write_file(dir, "dev.tsv", tsv[1]);
    *joint_s2s = malloc(2 * cap);
    strcpy(*joint_s2s, src[0]);
    strcat(*joint_s2s, tgt[0]);
    *joint_cls = strdup(tsv[0]);
    for (int i = 0; i < 2; i++) {
        free(src[i]);
        free(tgt[i]);
        free(tsv[i]);
    }
}

static void rm_dir(const char *dir)
{
    static const char *names[] = {
        "train.de", "train.en",          "val.de",          "val.en", "train.tsv",
        "dev.tsv",  CLF_CHECKPOINT_FILE, "best.safetensors"};
    char path[4200];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* ---- the translator ----------------------------------------------------------------------- */

/* The padding share (clf_trainer_seq_padding) against a host count of the
 * shuffled order's batches, and bucketing below it on both sides. */
static void check_padding(const clf_model_config *cfg, const clf_train_data *data,
                          const clf_seqdata *tr)
{
    clf_error e;
    clf_train_padding pd;
    tu_ok(clf_trainer_seq_padding(cfg, data, &pd, &e), &e, "padding");
    {
        clf_seq_batching sb;
        clf_trainer_seq_batching(cfg, data, &sb);
        sb.order = CLF_SEQ_ORDER_SHUFFLED;
        clf_seq_loader *L = NULL;
        clf_seq_batch *bt = NULL;
        tu_ok(clf_seq_loader_create(tr, &sb, &L, &e), &e, "loader");
        tu_ok(clf_seq_batch_create(L, &bt, &e), &e, "batch");
        double real = 0, slots = 0;
        for (size_t i = 0; i < clf_seq_loader_batches(L) && clf_seq_loader_next(L, bt); i++) {
            for (int k = 0; k < bt->B * bt->S; k++)
                real += bt->src_keep[k] != 0;
            slots += (double)bt->B * bt->S;
        }
        clf_seq_batch_destroy(bt);
        clf_seq_loader_destroy(L);
        TU_CHECK(fabs(pd.src_shuffled - (1.0 - real / slots)) < 1e-12 &&
                     pd.src_bucketed < pd.src_shuffled && pd.tgt_bucketed < pd.tgt_shuffled &&
                     pd.src_bucketed >= 0 && pd.tgt_bucketed >= 0,
                 "padding: bucketed %.3f / %.3f, shuffled %.3f / %.3f (source counted %.3f)",
                 pd.src_bucketed, pd.tgt_bucketed, pd.src_shuffled, pd.tgt_shuffled,
                 1.0 - real / slots);
    }
}

static void test_translator(clf_runtime *rt, const char *data_dir, const char *text)
{
    clf_error e;
    clf_model_config cfg;
    tu_ok(clf_config_parse_string(S2S_YAML, "test_trainer_seq.yaml", NULL, 0, &cfg, &e), &e,
          "config");
    cfg.train.seed = tu_seed() % 1000000007ull;
    clf_bpe_options bo;
    clf_bpe_options_init(&bo);
    bo.vocab_size = 300;
    clf_tokenizer *tok = NULL;
    tu_ok(clf_tokenizer_train_bpe(text, strlen(text), &bo, &tok, &e), &e, "bpe");
    const int V = clf_tokenizer_vocab_size(tok);
    char p1[4200], p2[4200];
    clf_seq_options so;
    clf_seq_options_default(&so, CLF_MODEL_ENCODER_DECODER, cfg.context);
    clf_seqdata *tr = NULL, *va = NULL;
    snprintf(p1, sizeof p1, "%s/train.de", data_dir);
    snprintf(p2, sizeof p2, "%s/train.en", data_dir);
    tu_ok(clf_seqdata_load_pairs(p1, p2, tok, tok, &so, &tr, &e), &e, "train pairs");
    snprintf(p1, sizeof p1, "%s/val.de", data_dir);
    snprintf(p2, sizeof p2, "%s/val.en", data_dir);
    tu_ok(clf_seqdata_load_pairs(p1, p2, tok, tok, &so, &va, &e), &e, "val pairs");
    clf_train_data data;
    memset(&data, 0, sizeof data);
    data.train = tr;
    data.val = va;
    clf_beam_options_default(&data.decode);
    data.decode.batch = 8;
    clf_checkpoint_extra extra[] = {{"src_lang", "de"}, {"tgt_lang", "en"}};
    data.extra = extra;
    data.n_extra = 2;

    char dir_a[] = "/tmp/clf_trseq_a_XXXXXX", dir_b[] = "/tmp/clf_trseq_b_XXXXXX";
    if (mkdtemp(dir_a) == NULL || mkdtemp(dir_b) == NULL) {
        fprintf(stderr, "FATAL: mkdtemp\n");
        exit(1);
    }
    uint64_t total = 0;
    tu_ok(clf_trainer_total_steps(&cfg, &data, 1, &total, &e), &e, "total");
    TU_CHECK(total == 12, "3 epochs of 64 sentences in batches of 16: %llu steps (12)",
             (unsigned long long)total);
    check_padding(&cfg, &data, tr);

    /* A: uninterrupted */
    static rec a, b, b2;
    clf_train_result ra, rb;
    clf_model *ma = new_model(rt, &cfg, &data, V);
    tu_ok(run(ma, &cfg, &data, tok, dir_a, 0, &a, &ra, &e), &e, "run A");
    int all = 1;
    for (int s = 1; s <= 12; s++)
        all &= a.seen[s] && isfinite(a.loss[s]);
    TU_CHECK(all && ra.last_step == 12, "A: 12 steps logged with finite losses");
    int evals_ok = a.n_eval == 3;
    for (int i = 0; evals_ok && i < 3; i++)
        evals_ok = a.eval_step[i] == (uint64_t)(4 * (i + 1)) && a.eval_epoch[i] == i + 1 &&
                   isfinite(a.eval_loss[i]) && a.eval_bleu[i] >= 0.0 && a.eval_bleu[i] <= 100.0;
    TU_CHECK(evals_ok,
             "A: one evaluation per epoch (%d evaluations; first at step %llu, epoch "
             "%lld, loss %.4f, BLEU %.3f)",
             a.n_eval, (unsigned long long)a.eval_step[0], (long long)a.eval_epoch[0],
             a.eval_loss[0], a.eval_bleu[0]);

    /* B: stopped after step 6, resumed */
    b.stop_at = 6;
    clf_model *mb = new_model(rt, &cfg, &data, V);
    clf_status st = run(mb, &cfg, &data, tok, dir_b, 0, &b, &rb, &e);
    TU_CHECK(st == CLF_ERR_INTERRUPTED && rb.last_step == 6,
             "B: the stop flag ends the run at step 6 (status %s, step %llu)", clf_status_name(st),
             (unsigned long long)rb.last_step);
    clf_model_destroy(mb);
    char ck_b[4200];
    snprintf(ck_b, sizeof ck_b, "%s/%s", dir_b, CLF_CHECKPOINT_FILE);
    clf_checkpoint *ck = NULL;
    if (clf_checkpoint_open(ck_b, &ck, &e) == CLF_OK) {
        const char *ds = clf_checkpoint_meta(ck, "data_state");
        const char *sl = clf_checkpoint_meta(ck, "src_lang");
        TU_CHECK(clf_checkpoint_step(ck) == 6 && ds != NULL && strstr(ds, "epoch=1") != NULL &&
                     sl != NULL && strcmp(sl, "de") == 0,
                 "B: checkpoint at step 6 with the loader state '%s' and src_lang '%s'",
                 ds ? ds : "(none)", sl ? sl : "(none)");
        clf_checkpoint_close(ck);
    } else {
        TU_CHECK(0, "B: the stop wrote a checkpoint (%s)", e.msg);
    }
    /* another token budget: refused */
    {
        clf_train_data d2 = data;
        d2.batch_tokens = 64;
        clf_model *mc = new_model(rt, &cfg, &d2, V);
        static rec c;
        clf_train_result rc;
        st = run(mc, &cfg, &d2, tok, dir_b, 1, &c, &rc, &e);
        TU_CHECK(st == CLF_ERR_ARG && strstr(e.msg, "token budget") != NULL,
                 "resume with another token budget is refused: %s", e.msg);
        clf_model_destroy(mc);
    }
    clf_model *mr = new_model(rt, &cfg, &data, V);
    tu_ok(run(mr, &cfg, &data, tok, dir_b, 1, &b2, &rb, &e), &e, "run B resumed");
    int same = 1, bad = -1;
    for (int s = 7; s <= 12; s++)
        if (!(b2.seen[s] && b2.loss[s] == a.loss[s]) && bad < 0) {
            same = 0;
            bad = s;
        }
    TU_CHECK(same && rb.first_step == 6 && rb.last_step == 12,
             "resumed steps 7-12 are bit-identical to the uninterrupted run (first difference: "
             "step %d)",
             bad);
    int le = b2.n_eval - 1;
    TU_CHECK(le >= 0 && b2.eval_loss[le] == a.eval_loss[2] && b2.eval_bleu[le] == a.eval_bleu[2],
             "resumed final evaluation equals the uninterrupted one (loss %.9g / %.9g, BLEU "
             "%.6f / %.6f)",
             le >= 0 ? b2.eval_loss[le] : NAN, a.eval_loss[2], le >= 0 ? b2.eval_bleu[le] : NAN,
             a.eval_bleu[2]);
    clf_model_dims d = clf_model_dims_get(ma);
    float *pa = malloc(d.n_params * sizeof *pa), *pb = malloc(d.n_params * sizeof *pb);
    tu_ok(clf_model_flat_read(ma, CLF_SLOT_PARAM, pa, &e), &e, "params A");
    tu_ok(clf_model_flat_read(mr, CLF_SLOT_PARAM, pb, &e), &e, "params B");
    TU_CHECK(memcmp(pa, pb, d.n_params * sizeof *pa) == 0,
             "final parameters of the resumed run are identical");
    free(pa);
    free(pb);
    clf_model_destroy(ma);
    clf_model_destroy(mr);
    clf_seqdata_destroy(tr);
    clf_seqdata_destroy(va);
    clf_tokenizer_destroy(tok);
    rm_dir(dir_a);
    rm_dir(dir_b);
}

/* ---- the classifier ------------------------------------------------------------------------ */

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

static void check_eval(clf_model *m, const clf_seqdata *va)
{
    clf_error e;
    clf_seq_batching bo;
    clf_seqeval_batching(16, 0, &bo);
    clf_seqeval_result r;
    tu_ok(clf_seqeval_run(m, va, &bo, &r, &e), &e, "seqeval");
    double sum = 0.0;
    uint64_t correct = 0;
    size_t n = clf_seqdata_size(va);
    for (size_t i = 0; i < n; i++) {
        const int32_t *src = NULL;
        int S = 0;
        int32_t lab = -1;
        float z[2];
        clf_seqdata_example(va, i, &src, &S, NULL, NULL, &lab);
        tu_ok(clf_model_set_batch(m, clf_batch_classify(src, NULL, &lab, 1, S), &e), &e,
              "set batch");
        tu_ok(clf_model_forward(m, 0, &e), &e, "forward");
        tu_ok(clf_model_logits_read(m, z, &e), &e, "logits");
        sum += host_ce(z, 2, lab);
        correct += (z[1] > z[0] ? 1 : 0) == lab;
    }
    double ref = sum / (double)n;
    TU_CHECK(fabs(r.loss - ref) <= 1e-5 * fabs(ref) + 1e-7 && r.correct == correct &&
                 r.labelled == n,
             "padded evaluation == one unpadded sentence at a time: loss %.8f / %.8f, correct "
             "%llu / %llu of %zu",
             r.loss, ref, (unsigned long long)r.correct, (unsigned long long)correct, n);
}

static void test_classifier(clf_runtime *rt, const char *data_dir, const char *text)
{
    clf_error e;
    clf_model_config cfg;
    tu_ok(clf_config_parse_string(CLS_YAML, "test_trainer_seq_cls.yaml", NULL, 0, &cfg, &e), &e,
          "config");
    cfg.train.seed = tu_seed() % 1000000007ull;
    clf_bpe_options bo;
    clf_bpe_options_init(&bo);
    bo.vocab_size = 300;
    clf_tokenizer *tok = NULL;
    tu_ok(clf_tokenizer_train_bpe(text, strlen(text), &bo, &tok, &e), &e, "bpe");
    clf_seq_options so;
    clf_seq_options_default(&so, CLF_MODEL_ENCODER, cfg.context);
    clf_seqdata *tr = NULL, *va = NULL;
    char p[4200];
    snprintf(p, sizeof p, "%s/train.tsv", data_dir);
    tu_ok(clf_seqdata_load_tsv(p, tok, &so, &tr, &e), &e, "train tsv");
    snprintf(p, sizeof p, "%s/dev.tsv", data_dir);
    tu_ok(clf_seqdata_load_tsv(p, tok, &so, &va, &e), &e, "dev tsv");
    clf_train_data data;
    memset(&data, 0, sizeof data);
    data.train = tr;
    data.val = va;
    char dir[] = "/tmp/clf_trseq_c_XXXXXX";
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "FATAL: mkdtemp\n");
        exit(1);
    }
    static rec c;
    clf_train_result res;
    clf_model *m = new_model(rt, &cfg, &data, clf_tokenizer_vocab_size(tok));
    check_eval(m, va); /* untrained: near-chance logits */
    tu_ok(run(m, &cfg, &data, tok, dir, 0, &c, &res, &e), &e, "classifier run");
    int best_i = -1;
    for (int i = 0; i < c.n_eval; i++)
        if (c.eval_best[i])
            best_i = i;
    TU_CHECK(res.early_stopped && res.last_step < 400 && best_i >= 0 &&
                 c.n_eval - 1 - best_i == 8 && res.best_step == c.eval_step[best_i] &&
                 res.best_metric >= 0.95,
             "early stop on accuracy: stopped at step %llu after %d evaluations, 8 after the "
             "best (step %llu, accuracy %.3f)",
             (unsigned long long)res.last_step, c.n_eval,
             (unsigned long long)(best_i >= 0 ? c.eval_step[best_i] : 0), res.best_metric);
    check_eval(m, va); /* trained */
    snprintf(p, sizeof p, "%s/best.safetensors", dir);
    clf_checkpoint *ck = NULL;
    if (clf_checkpoint_open(p, &ck, &e) == CLF_OK) {
        TU_CHECK(best_i >= 0 && clf_checkpoint_step(ck) == c.eval_step[best_i],
                 "best.safetensors holds the best step (%llu)",
                 (unsigned long long)clf_checkpoint_step(ck));
        clf_checkpoint_close(ck);
    } else {
        TU_CHECK(0, "best.safetensors written (%s)", e.msg);
    }
    clf_model_destroy(m);
    /* metric bleu on a classifier */
    cfg.train.early_stop.metric = CLF_METRIC_BLEU;
    m = new_model(rt, &cfg, &data, clf_tokenizer_vocab_size(tok));
    static rec c2;
    clf_status st = run(m, &cfg, &data, tok, dir, 0, &c2, &res, &e);
    TU_CHECK(st == CLF_ERR_CONFIG && strstr(e.msg, "bleu") != NULL,
             "metric bleu on a classifier is refused: %s", e.msg);
    clf_model_destroy(m);
    clf_seqdata_destroy(tr);
    clf_seqdata_destroy(va);
    clf_tokenizer_destroy(tok);
    rm_dir(dir);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    char dir[] = "/tmp/clf_trseq_data_XXXXXX";
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "FATAL: mkdtemp\n");
        return 1;
    }
    char *joint_s2s = NULL, *joint_cls = NULL;
    make_data(dir, &joint_s2s, &joint_cls);
    test_translator(rt, dir, joint_s2s);
    test_classifier(rt, dir, joint_cls);
    free(joint_s2s);
    free(joint_cls);
    rm_dir(dir);
    clf_runtime_destroy(rt);
    return tu_finish();
}
