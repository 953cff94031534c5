/*
 * test_checkpoint.c - model checkpoints: exact round trips and refusals.
 *
 * Checks:
 *   - save after a few training steps, open, load into a fresh model:
 *     parameters and both Adam moments equal bit for bit, the step and the
 *     metadata (config, tokenizer, caller's pairs) come back;
 *   - an inference model's checkpoint (no optimizer state) loads its
 *     parameters, and asking it for optimizer state is refused;
 *   - refused with CLF_ERR_FORMAT: a truncated file, a flipped byte in the
 *     header, a safetensors file that is not a clformer checkpoint, a model
 *     whose structure differs (heads; norm placement: same shapes), a model
 *     with another vocabulary;
 *   - refused with CLF_ERR_ARG: a caller's metadata key that is reserved, a
 *     save between a backward and its step;
 *   - a failed save (directory missing) leaves no file behind;
 *   - the other kinds: an encoder-decoder trained with token-capped limits
 *     saves, and its parameters load into an inference model planned for
 *     other limits (parameters do not depend on the limits): equal bit for
 *     bit, and an eval forward on the same batch gives the same logits
 *     (relative 1e-6); an encoder classifier's checkpoint round-trips and
 *     is refused by an encoder-decoder and by a classifier with another
 *     number of labels or pooling.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "model/graph/model.h"
#include "model/train/checkpoint.h"
#include "tests/test_util.h"

static const char *yaml = "model:\n"
                          "  vocab: {tokenizer: char, size: 13}\n"
                          "  context: 8\n"
                          "  embedding: {dim: 16}\n"
                          "  blocks: {repeat: 2, attention: {heads: 2}, ffn: {hidden: 32}}\n"
                          "train: {batch: 2, seed: 9}\n";

static void ok(clf_status st, const clf_error *e, const char *what) { tu_ok(st, e, what); }

static void train(clf_model *m, int steps)
{
    clf_error e;
    int32_t x[16], y[16];
    tu_rng g = tu_rng_new(3);
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < 16; i++) {
            x[i] = (int32_t)(tu_u32(&g) % 13);
            y[i] = (int32_t)(tu_u32(&g) % 13);
        }
        ok(clf_model_set_batch(m, clf_batch_decoder(x, y, 2, 8), &e), &e, "batch");
        ok(clf_model_forward(m, 1, &e), &e, "forward");
        ok(clf_model_backward(m, &e), &e, "backward");
        ok(clf_model_step(m, 1e-2f, &e), &e, "step");
    }
}

static int flat_equal(clf_model *a, clf_model *b, clf_model_slot slot)
{
    clf_error e;
    size_t n = clf_model_dims_get(a).n_params;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    ok(clf_model_flat_read(a, slot, x, &e), &e, "read a");
    ok(clf_model_flat_read(b, slot, y, &e), &e, "read b");
    int same = memcmp(x, y, n * 4) == 0;
    free(x);
    free(y);
    return same;
}

static void write_bytes(const char *path, const unsigned char *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(d, 1, n, f) != n) {
        fprintf(stderr, "FATAL: writing %s\n", path);
        exit(1);
    }
    fclose(f);
}

static unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *d = malloc((size_t)sz + 1);
    *n = fread(d, 1, (size_t)sz, f);
    fclose(f);
    return d;
}

/* Open + load into m; the status of the first step that fails. */
static clf_status try_load(const char *path, clf_model *m, unsigned what, clf_error *e)
{
    clf_checkpoint *ck = NULL;
    clf_status st = clf_checkpoint_open(path, &ck, e);
    if (st == CLF_OK)
        st = clf_checkpoint_load(ck, m, what, e);
    clf_checkpoint_close(ck);
    return st;
}

static const char *s2s_yaml =
    "model:\n"
    "  kind: encoder-decoder\n"
    "  vocab: {tokenizer: char, size: 13}\n"
    "  context: 8\n"
    "  embedding: {dim: 16, scale: true}\n"
    "  positional: {type: sinusoidal}\n"
    "  blocks: {repeat: 1, decoder_repeat: 2, attention: {heads: 2}, ffn: {hidden: 32},\n"
    "           norm: {placement: post}}\n"
    "  share_embeddings: true\n"
    "train: {batch: 2, seed: 9}\n";

static const char *cls_yaml =
    "model:\n"
    "  kind: encoder\n"
    "  vocab: {tokenizer: char, size: 13}\n"
    "  context: 8\n"
    "  embedding: {dim: 16}\n"
    "  blocks: {repeat: 2, attention: {heads: 2, causal: false}, ffn: {hidden: 32}}\n"
    "  head: {type: classifier, tie_embedding: false, labels: 3, pool: mean}\n"
    "train: {batch: 2, seed: 9}\n";

static void other_kinds(clf_runtime *rt, const char *path)
{
    clf_error e;
    clf_model_config cfg, ccfg;
    ok(clf_config_parse_string(s2s_yaml, "s2s", NULL, 0, &cfg, &e), &e, "s2s config");
    ok(clf_config_parse_string(cls_yaml, "cls", NULL, 0, &ccfg, &e), &e, "cls config");
    int32_t src[12] = {3, 4, 5, 6, 7, 2, 8, 9, 2, 0, 0, 0};
    int32_t keep[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0};
    int32_t tin[10] = {1, 4, 5, 6, 7, 1, 9, 0, 0, 0};
    int32_t tout[10] = {4, 5, 6, 7, 2, 9, 2, -1, -1, -1};
    clf_model *a = NULL, *b = NULL;
    /* training: token caps below B x longest */
    clf_model_limits la = {3, 6, 5, 12, 10, 0, 0};
    ok(clf_model_create_ex(rt, &cfg, 13, &la, CLF_MODEL_TRAIN, &a, &e), &e, "create s2s");
    for (int s = 0; s < 2; s++) {
        ok(clf_model_set_batch(a, clf_batch_seq2seq(src, keep, tin, tout, 2, 6, 5), &e), &e,
           "batch");
        ok(clf_model_forward(a, 1, &e), &e, "forward");
        ok(clf_model_backward(a, &e), &e, "backward");
        ok(clf_model_step(a, 1e-2f, &e), &e, "step");
    }
    ok(clf_checkpoint_save(path, a, &cfg, "{}", NULL, 0, &e), &e, "save s2s");
    clf_model_limits lb = {4, 8, 8, 0, 0, 0, 0};
    ok(clf_model_create_ex(rt, &cfg, 13, &lb, CLF_MODEL_INFER, &b, &e), &e, "create infer");
    ok(try_load(path, b, CLF_CHECKPOINT_PARAMS, &e), &e, "load s2s params");
    TU_CHECK(flat_equal(a, b, CLF_SLOT_PARAM),
             "encoder-decoder parameters load into a model with other limits");
    float la_logits[2 * 5 * 13], lb_logits[2 * 5 * 13];
    double ref[2 * 5 * 13];
    ok(clf_model_set_batch(a, clf_batch_seq2seq(src, keep, tin, tout, 2, 6, 5), &e), &e, "batch a");
    ok(clf_model_forward(a, 0, &e), &e, "eval a");
    ok(clf_model_logits_read(a, la_logits, &e), &e, "logits a");
    ok(clf_model_set_batch(b, clf_batch_seq2seq(src, keep, tin, tout, 2, 6, 5), &e), &e, "batch b");
    ok(clf_model_forward(b, 0, &e), &e, "eval b");
    ok(clf_model_logits_read(b, lb_logits, &e), &e, "logits b");
    for (int i = 0; i < 2 * 5 * 13; i++)
        ref[i] = la_logits[i];
    tu_close("encoder-decoder logits after a reload", lb_logits, ref, 2 * 5 * 13, 0, 1e-6);
    /* 3 rows fit the batch limit but not the token caps (3 x 6 > 12 source tokens) */
    int32_t src3[18] = {0}, keep3[18] = {0}, tin3[15] = {0}, tout3[15] = {0};
    clf_status st3 =
        clf_model_set_batch(a, clf_batch_seq2seq(src3, keep3, tin3, tout3, 3, 6, 5), &e);
    TU_CHECK(st3 == CLF_ERR_ARG, "a batch over the token caps is refused: %s", e.msg);
    st3 = clf_model_set_batch(a, clf_batch_seq2seq(src3, keep3, tin3, tout3, 3, 4, 3), &e);
    TU_CHECK(st3 == CLF_OK, "3 shorter rows within the caps are taken");
    clf_model_destroy(b);
    clf_model_destroy(a);

    /* classifier */
    ok(clf_model_create(rt, &ccfg, 13, 2, CLF_MODEL_TRAIN, &a, &e), &e, "create cls");
    int32_t labels[2] = {2, 0};
    ok(clf_model_set_batch(a, clf_batch_classify(src, keep, labels, 2, 6), &e), &e, "cls batch");
    ok(clf_model_forward(a, 1, &e), &e, "cls forward");
    ok(clf_model_backward(a, &e), &e, "cls backward");
    ok(clf_model_step(a, 1e-2f, &e), &e, "cls step");
    ok(clf_checkpoint_save(path, a, &ccfg, "{}", NULL, 0, &e), &e, "save cls");
    ok(clf_model_create(rt, &ccfg, 13, 3, CLF_MODEL_TRAIN, &b, &e), &e, "create cls b");
    ok(try_load(path, b, CLF_CHECKPOINT_ALL, &e), &e, "load cls");
    TU_CHECK(flat_equal(a, b, CLF_SLOT_PARAM) && flat_equal(a, b, CLF_SLOT_ADAM_V),
             "classifier parameters and Adam state round-trip");
    clf_model_destroy(b);
    ok(clf_model_create(rt, &cfg, 13, 2, CLF_MODEL_TRAIN, &b, &e), &e, "create s2s b");
    clf_status st = try_load(path, b, CLF_CHECKPOINT_PARAMS, &e);
    TU_CHECK(st == CLF_ERR_FORMAT, "a classifier checkpoint is refused by an encoder-decoder: %s",
             e.msg);
    clf_model_destroy(b);
    const char *other[] = {"model.head.labels=4", "model.head.pool=cls"};
    for (int i = 0; i < 2; i++) {
        clf_model_config c2 = ccfg;
        ok(clf_config_set(&c2, other[i], &e), &e, other[i]);
        ok(clf_model_create(rt, &c2, 13, 2, CLF_MODEL_TRAIN, &b, &e), &e, "create other cls");
        st = try_load(path, b, CLF_CHECKPOINT_PARAMS, &e);
        TU_CHECK(st == CLF_ERR_FORMAT, "a classifier with %s is refused: %s", other[i], e.msg);
        clf_model_destroy(b);
    }
    clf_model_destroy(a);
    remove(path);
}

/* Save a model trained 3 steps, open, load into a new model: parameters,
 * Adam state, step, tokenizer, metadata and config come back bit for bit,
 * and one more step stays identical. Returns the trained model. */
static clf_model *round_trip(clf_runtime *rt, const clf_model_config *cfg, const char *path)
{
    clf_error e;
    clf_model *a = NULL, *b = NULL;
    ok(clf_model_create(rt, cfg, 13, 2, CLF_MODEL_TRAIN, &a, &e), &e, "create a");
    train(a, 3);
    clf_checkpoint_extra ex[] = {{"data_rng", "xoshiro256**:1,2,3,4"}, {"elapsed", "1.5"}};
    ok(clf_checkpoint_save(path, a, cfg, "{\"type\":\"char\"}", ex, 2, &e), &e, "save");
    clf_checkpoint *ck = NULL;
    ok(clf_checkpoint_open(path, &ck, &e), &e, "open");
    TU_CHECK(clf_checkpoint_step(ck) == 3 && clf_checkpoint_vocab(ck) == 13 &&
                 clf_checkpoint_has_optim(ck),
             "step 3, vocab 13, optimizer state recorded");
    TU_CHECK(strcmp(clf_checkpoint_tokenizer(ck), "{\"type\":\"char\"}") == 0,
             "tokenizer JSON round-trips");
    const char *rng = clf_checkpoint_meta(ck, "data_rng");
    TU_CHECK(rng && strcmp(rng, "xoshiro256**:1,2,3,4") == 0, "caller metadata round-trips");
    TU_CHECK(clf_config_diff(clf_checkpoint_config(ck), cfg, NULL, 0) == 0, "config round-trips");
    ok(clf_model_create(rt, clf_checkpoint_config(ck), 13, 2, CLF_MODEL_TRAIN, &b, &e), &e,
       "create b");
    ok(clf_checkpoint_load(ck, b, CLF_CHECKPOINT_ALL, &e), &e, "load");
    clf_checkpoint_close(ck);
    TU_CHECK(flat_equal(a, b, CLF_SLOT_PARAM), "parameters equal bit for bit");
    TU_CHECK(flat_equal(a, b, CLF_SLOT_ADAM_M), "Adam m equal bit for bit");
    TU_CHECK(flat_equal(a, b, CLF_SLOT_ADAM_V), "Adam v equal bit for bit");
    TU_CHECK(clf_model_state_get(b).step == 3, "step restored");
    train(a, 1);
    train(b, 1);
    TU_CHECK(flat_equal(a, b, CLF_SLOT_PARAM), "one more step stays bit-identical");
    clf_model_destroy(b);
    return a;
}

/* Export: 16-bit parameters, no optimizer state, opened as usual. */
static void export_check(clf_runtime *rt, clf_model *a, const char *path, const char *bad)
{
    clf_error e;
    const clf_st_dtype types[3] = {CLF_ST_F32, CLF_ST_BF16, CLF_ST_F16};
    const double rel[3] = {0.0, 0x1p-8, 0x1p-11}; /* half an ulp of each format */
    const size_t np = clf_model_dims_get(a).n_params;
    float *pa = malloc(np * 4), *pe = malloc(np * 4);
    {
        /* the saved parameters (a has trained on since) */
        clf_checkpoint *ok_ = NULL;
        clf_model *orig = NULL;
        ok(clf_checkpoint_open(path, &ok_, &e), &e, "open");
        ok(clf_checkpoint_model_create(ok_, rt, NULL, CLF_MODEL_INFER, &orig, &e), &e,
           "model from the checkpoint");
        ok(clf_model_flat_read(orig, CLF_SLOT_PARAM, pa, &e), &e, "params");
        clf_model_destroy(orig);
        clf_checkpoint_close(ok_);
    }
    for (int i = 0; i < 3; i++) {
        char xp[512];
        tu_scratch_path("test_checkpoint_export.safetensors", xp, sizeof xp);
        ok(clf_checkpoint_export(path, xp, types[i], &e), &e, "export");
        clf_checkpoint *xk = NULL;
        ok(clf_checkpoint_open(xp, &xk, &e), &e, "open the export");
        TU_CHECK(!clf_checkpoint_has_optim(xk) && clf_checkpoint_step(xk) == 3 &&
                     strcmp(clf_checkpoint_tokenizer(xk), "{\"type\":\"char\"}") == 0,
                 "%s export: no optimizer state, the step and tokenizer kept",
                 clf_st_dtype_name(types[i]));
        clf_model *x = NULL;
        ok(clf_checkpoint_model_create(xk, rt, NULL, CLF_MODEL_INFER, &x, &e), &e,
           "model from the export");
        ok(clf_model_flat_read(x, CLF_SLOT_PARAM, pe, &e), &e, "exported params");
        int close_ = 1;
        for (int t = 0; t < clf_model_param_count(x); t++) {
            const clf_param_info *pi = clf_model_param_get(x, t);
            for (size_t j = pi->offset; j < pi->offset + pi->numel; j++)
                close_ &= fabs((double)pe[j] - pa[j]) <= rel[i] * fabs((double)pa[j]) ||
                          (types[i] == CLF_ST_F16 && fabs((double)pa[j]) < 6.2e-5 &&
                           fabs((double)pe[j] - pa[j]) <= 0x1p-25);
        }
        TU_CHECK(close_, "%s export: every parameter within half an ulp of the format",
                 clf_st_dtype_name(types[i]));
        clf_model_destroy(x);
        clf_checkpoint_close(xk);
        remove(xp);
    }
    TU_CHECK(clf_checkpoint_export(path, bad, CLF_ST_I32, &e) == CLF_ERR_ARG,
             "export to I32 is refused: %s", e.msg);
    free(pa);
    free(pe);
}

/* Device-side copy into an inference model (BLEU's copy), and its refusals. */
static void copy_check(clf_runtime *rt, const clf_model_config *cfg, clf_model *a)
{
    clf_error e;
    clf_model *b = NULL;
    clf_status st0;
    ok(clf_model_create(rt, cfg, 13, 1, CLF_MODEL_INFER, &b, &e), &e, "create infer");
    ok(clf_model_flat_copy(b, a, CLF_SLOT_PARAM, &e), &e, "flat copy");
    TU_CHECK(flat_equal(a, b, CLF_SLOT_PARAM), "copied parameters equal bit for bit");
    st0 = clf_model_flat_copy(b, a, CLF_SLOT_ADAM_M, &e);
    TU_CHECK(st0 == CLF_ERR_ARG, "copying into a missing slot is refused: %s", e.msg);
    clf_model_destroy(b);
    ok(clf_model_create(rt, cfg, 17, 1, CLF_MODEL_INFER, &b, &e), &e, "create V=17");
    st0 = clf_model_flat_copy(b, a, CLF_SLOT_PARAM, &e);
    TU_CHECK(st0 == CLF_ERR_ARG, "copying between other layouts is refused: %s", e.msg);
    clf_model_destroy(b);
}

/* Saves and loads that are refused: reserved metadata, between backward
 * and step, into a missing directory; truncated, corrupt and foreign files;
 * models of another shape or vocabulary. */
static void refusals(clf_runtime *rt, const clf_model_config *cfg, clf_model *a, const char *path,
                     const char *bad)
{
    clf_error e;
    clf_model *b = NULL;
    clf_checkpoint_extra rsv[] = {{"step", "7"}};
    TU_CHECK(clf_checkpoint_save(bad, a, cfg, "", rsv, 1, &e) == CLF_ERR_ARG,
             "a reserved metadata key is refused");
    {
        int32_t x[16] = {0}, y[16] = {0};
        ok(clf_model_set_batch(a, clf_batch_decoder(x, y, 2, 8), &e), &e, "batch");
        ok(clf_model_forward(a, 1, &e), &e, "forward");
        ok(clf_model_backward(a, &e), &e, "backward");
        clf_status st = clf_checkpoint_save(bad, a, cfg, "", NULL, 0, &e);
        TU_CHECK(st == CLF_ERR_ARG, "saving between backward and step is refused: %s", e.msg);
        ok(clf_model_step(a, 0.0f, &e), &e, "step");
    }
    TU_CHECK(clf_checkpoint_save("/nonexistent-dir/x.safetensors", a, cfg, "", NULL, 0, &e) !=
                     CLF_OK &&
                 fopen("/nonexistent-dir/x.safetensors", "rb") == NULL,
             "a failed save leaves no file");

    size_t n = 0;
    unsigned char *bytes = read_bytes(path, &n);
    write_bytes(bad, bytes, n / 2);
    clf_status st = try_load(bad, a, CLF_CHECKPOINT_ALL, &e);
    TU_CHECK(st == CLF_ERR_FORMAT, "a truncated file is refused: %s", e.msg);
    unsigned char *flip = malloc(n);
    memcpy(flip, bytes, n);
    flip[12] ^= 0x5A; /* inside the JSON header */
    write_bytes(bad, flip, n);
    st = try_load(bad, a, CLF_CHECKPOINT_ALL, &e);
    TU_CHECK(st == CLF_ERR_FORMAT, "a corrupt header is refused: %s", e.msg);
    free(flip);
    st = try_load("tests/data/parity/gpt_a.safetensors", a, CLF_CHECKPOINT_ALL, &e);
    TU_CHECK(st == CLF_ERR_FORMAT, "a file that is not a checkpoint is refused: %s", e.msg);

    const char *other[] = {"model.blocks.attention.heads=4", "model.blocks.norm.placement=post"};
    for (int i = 0; i < 2; i++) {
        clf_model_config c2 = *cfg;
        ok(clf_config_set(&c2, other[i], &e), &e, other[i]);
        ok(clf_model_create(rt, &c2, 13, 2, CLF_MODEL_TRAIN, &b, &e), &e, "create other");
        st = try_load(path, b, CLF_CHECKPOINT_ALL, &e);
        TU_CHECK(st == CLF_ERR_FORMAT, "a model with %s is refused: %s", other[i], e.msg);
        clf_model_destroy(b);
    }
    ok(clf_model_create(rt, cfg, 17, 2, CLF_MODEL_TRAIN, &b, &e), &e, "create V=17");
    st = try_load(path, b, CLF_CHECKPOINT_PARAMS, &e);
    TU_CHECK(st == CLF_ERR_FORMAT, "a model with another vocabulary is refused: %s", e.msg);
    clf_model_destroy(b);
    free(bytes);
}

/* An inference model: parameters only, and its checkpoint has no
 * optimizer state. */
static void infer_params(clf_runtime *rt, const clf_model_config *cfg, const char *path,
                         const char *bad)
{
    clf_error e;
    clf_model *b = NULL;
    clf_status st;
    ok(clf_model_create(rt, cfg, 13, 1, CLF_MODEL_INFER, &b, &e), &e, "create infer");
    ok(try_load(path, b, CLF_CHECKPOINT_PARAMS, &e), &e, "load params into inference model");
    ok(clf_checkpoint_save(bad, b, cfg, "", NULL, 0, &e), &e, "save inference model");
    clf_model *c = NULL;
    ok(clf_model_create(rt, cfg, 13, 2, CLF_MODEL_TRAIN, &c, &e), &e, "create c");
    st = try_load(bad, c, CLF_CHECKPOINT_ALL, &e);
    TU_CHECK(st == CLF_ERR_FORMAT, "optimizer state missing is refused: %s", e.msg);
    ok(try_load(bad, c, CLF_CHECKPOINT_PARAMS, &e), &e, "params of an inference checkpoint");
    TU_CHECK(flat_equal(b, c, CLF_SLOT_PARAM), "inference checkpoint round-trips parameters");
    clf_model_destroy(c);
    clf_model_destroy(b);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    clf_error e;
    clf_model_config cfg;
    ok(clf_config_parse_string(yaml, "test", NULL, 0, &cfg, &e), &e, "config");
    char path[512], bad[512];
    tu_scratch_path("test_checkpoint.safetensors", path, sizeof path);
    tu_scratch_path("test_checkpoint_bad.safetensors", bad, sizeof bad);
    clf_model *a = round_trip(rt, &cfg, path);
    export_check(rt, a, path, bad);
    copy_check(rt, &cfg, a);
    refusals(rt, &cfg, a, path, bad);
    infer_params(rt, &cfg, path, bad);
    clf_model_destroy(a);
    remove(path);
    remove(bad);
    other_kinds(rt, path);
    clf_runtime_destroy(rt);
    return tu_finish();
}
