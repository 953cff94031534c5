/*
 * test_config.c - the YAML model description (config/): example models,
 * defaults, errors with their exact file:line:col, --set overrides, the
 * canonical dump's round trip and the comparison. No device is needed.
 *
 * Error cases are a table: YAML text (or a file under tests/data/config/),
 * the exact location expected in err->where, and a fragment the message
 * must contain. Locations were worked out by hand from the text (libyaml
 * counts from 0, the messages from 1), not copied from the output.
 * The round trip is checked on the example models, on a config with every
 * value away from its default, and on 500 configs with random doubles
 * (seeded; the seed is printed): parse(dump(cfg)) must equal cfg bit for
 * bit in every field, and dump(parse(dump(cfg))) must equal dump(cfg).
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "tests/test_util.h"

static char text_buf[1 << 16];

static const char *src_dir(void)
{
    const char *s = getenv("CLF_SOURCE_DIR");
    return s && *s ? s : ".";
}

static void path_in_src(char *buf, size_t cap, const char *rel)
{
    snprintf(buf, cap, "%s/%s", src_dir(), rel);
}

/* ---- example models ---------------------------------------------------------------- */

static void test_examples(void)
{
    char dir[1024], path[2048];
    clf_model_config c;
    clf_error e;
    int n = 0;
    path_in_src(dir, sizeof dir, "config/models");
    DIR *d = opendir(dir);
    TU_CHECK(d != NULL, "opendir %s", dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 5, ".yaml") != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        clf_status st = clf_config_load(path, NULL, 0, &c, &e);
        char msg[4096];
        clf_error_format(&e, msg, sizeof msg);
        TU_CHECK(st == CLF_OK, "example %s loads%s%s", de->d_name, st ? ": " : "", st ? msg : "");
        n++;
    }
    closedir(d);
    TU_CHECK(n >= 3, "found %d example models (expected at least 3)", n);

    /* nanoGPT's CPU recipe */
    path_in_src(path, sizeof path, "config/models/gpt-shakespeare-cpu.yaml");
    clf_status st = clf_config_load(path, NULL, 0, &c, &e);
    TU_CHECK(st == CLF_OK, "gpt-shakespeare-cpu loads");
    if (st == CLF_OK) {
        TU_CHECK(c.kind == CLF_MODEL_DECODER && c.blocks.repeat == 4 &&
                     c.blocks.attention.heads == 4 && c.embedding.dim == 128 && c.context == 64,
                 "cpu recipe: 4 layers, 4 heads, 128 dims, context 64");
        TU_CHECK(c.train.batch == 12 && c.train.steps == 2000 && c.train.optimizer.lr == 1e-3 &&
                     c.train.schedule.type == CLF_SCHED_COSINE && c.train.schedule.min_lr == 1e-4 &&
                     c.train.schedule.warmup == 100,
                 "cpu recipe: batch 12, 2000 steps, lr 1e-3 cosine to 1e-4, warmup 100");
        TU_CHECK(c.train.optimizer.type == CLF_OPT_ADAMW && c.train.optimizer.betas[0] == 0.9 &&
                     c.train.optimizer.betas[1] == 0.99 && c.train.optimizer.weight_decay == 0.1 &&
                     c.train.grad_clip == 1.0,
                 "cpu recipe: AdamW 0.9/0.99, weight decay 0.1, clip 1.0");
        TU_CHECK(c.blocks.dropout == 0.0 && c.blocks.attention.dropout == 0.0 &&
                     c.embedding.dropout == 0.0 && c.train.eval.every == 250 &&
                     c.train.eval.batches == 20,
                 "cpu recipe: no dropout, eval every 250 with 20 batches");
        TU_CHECK(c.positional.type == CLF_POS_LEARNED && c.blocks.norm.placement == CLF_NORM_PRE &&
                     c.blocks.norm.type == CLF_NORM_LAYERNORM &&
                     c.blocks.ffn.activation == CLF_FFN_GELU && c.blocks.ffn.hidden == 512 &&
                     c.head.tie_embedding && c.final_norm.type == CLF_NORM_LAYERNORM,
                 "cpu recipe: learned positions, pre-LN, GELU 512, tied head");
        TU_CHECK(clf_config_decoder_layers(&c) == 4 && clf_config_encoder_layers(&c) == 0 &&
                     clf_config_head_size(&c) == 32,
                 "cpu recipe: helpers give 4 decoder layers, 0 encoder layers, head size 32");
    }
    /* train.packing: decoders take it, the sentence kinds refuse it by name */
    const char *pack[1] = {"train.packing=true"};
    st = clf_config_load(path, pack, 1, &c, &e);
    TU_CHECK(st == CLF_OK && c.train.packing == 1, "a decoder takes train.packing: true");
    char tpath[1024], full[2048];
    path_in_src(tpath, sizeof tpath, "config/models/transformer-multi30k.yaml");
    st = clf_config_load(tpath, pack, 1, &c, &e);
    clf_error_format(&e, full, sizeof full);
    TU_CHECK(st == CLF_ERR_CONFIG && strstr(full, "train.packing: packing documents into windows "
                                                  "is for kind decoder") != NULL,
             "an encoder-decoder refuses train.packing: %s", full);
    /* linformer: an encoder with positions of its own, at most the context */
    path_in_src(tpath, sizeof tpath, "config/models/encoder-sst2.yaml");
    const char *lin[2] = {"blocks.attention.type=linformer", "blocks.attention.proj=3"};
    st = clf_config_load(tpath, lin, 2, &c, &e);
    TU_CHECK(st == CLF_OK && clf_config_linformer_rows(&c) == 3, "an encoder takes linformer");
    const char *lin_rope[2] = {"positional.type=rope", "blocks.attention.type=linformer"};
    st = clf_config_load(tpath, lin_rope, 2, &c, &e);
    clf_error_format(&e, full, sizeof full);
    TU_CHECK(st == CLF_ERR_CONFIG && strstr(full, "linformer's projected keys keep no positions "
                                                  "of their own") != NULL,
             "linformer refuses rotary positions: %s", full);
    const char *lin_big[2] = {"blocks.attention.type=linformer", "blocks.attention.proj=100000"};
    st = clf_config_load(tpath, lin_big, 2, &c, &e);
    clf_error_format(&e, full, sizeof full);
    TU_CHECK(st == CLF_ERR_CONFIG && strstr(full, "blocks.attention.proj: expected at most the "
                                                  "context") != NULL,
             "linformer refuses a projection past the context: %s", full);
    /* nanoGPT's GPU recipe */
    path_in_src(path, sizeof path, "config/models/gpt-shakespeare.yaml");
    st = clf_config_load(path, NULL, 0, &c, &e);
    TU_CHECK(st == CLF_OK, "gpt-shakespeare loads");
    if (st == CLF_OK) {
        TU_CHECK(c.blocks.repeat == 6 && c.blocks.attention.heads == 6 && c.embedding.dim == 384 &&
                     c.context == 256 && c.train.batch == 64 && c.train.steps == 5000,
                 "gpu recipe: 6 layers, 6 heads, 384 dims, context 256, batch 64, 5000 steps");
        TU_CHECK(c.blocks.dropout == 0.2 && c.blocks.attention.dropout == 0.2 &&
                     c.embedding.dropout == 0.2 && c.train.eval.batches == 200 &&
                     c.train.optimizer.lr == 1e-3 && c.train.schedule.min_lr == 1e-4 &&
                     c.train.schedule.warmup == 100 && c.train.optimizer.betas[1] == 0.99,
                 "gpu recipe: dropout 0.2, lr 1e-3 to 1e-4, warmup 100, 200 eval batches");
    }
}

/* ---- defaults ------------------------------------------------------------------------- */

static void test_defaults(void)
{
    clf_model_config c, d;
    clf_error e;
    char key[128];
    clf_config_defaults(&d);
    clf_config_resolve(&d);
    TU_CHECK(clf_config_validate(&d, &e) == CLF_OK, "the defaults are valid");
    TU_CHECK(d.blocks.ffn.hidden == 4 * d.embedding.dim, "resolve: ffn.hidden = 4 * dim (%d)",
             d.blocks.ffn.hidden);

    clf_status st = clf_config_parse_string("model: {}\ntrain: {}\n", "t.yaml", NULL, 0, &c, &e);
    TU_CHECK(st == CLF_OK && !clf_config_diff(&c, &d, key, sizeof key),
             "empty sections give the defaults (first difference: '%s')", st ? "?" : key);

    st = clf_config_parse_string("model:\n  context: 32\n  embedding: {dim: 64}\n", "t.yaml", NULL,
                                 0, &c, &e);
    TU_CHECK(st == CLF_OK && c.context == 32 && c.embedding.dim == 64 &&
                 c.blocks.ffn.hidden == 256 && c.train.steps == d.train.steps &&
                 c.blocks.attention.heads == d.blocks.attention.heads,
             "a partial file: given keys set, the rest default, ffn.hidden follows dim (%d)",
             c.blocks.ffn.hidden);

    /* encoder-decoder: the two stacks default to blocks.repeat */
    st = clf_config_parse_string("model:\n  kind: encoder-decoder\n  blocks: {repeat: 3, "
                                 "decoder_repeat: 2}\n  share_embeddings: true\n",
                                 "t.yaml", NULL, 0, &c, &e);
    TU_CHECK(st == CLF_OK && clf_config_encoder_layers(&c) == 3 &&
                 clf_config_decoder_layers(&c) == 2 && c.share_embeddings,
             "encoder-decoder: encoder_repeat defaults to repeat (3), decoder_repeat given (2)");

    /* an encoder classifier as issue 4 will need it */
    st = clf_config_parse_string(
        "model:\n  kind: encoder\n  vocab: {tokenizer: bpe}\n  embedding: {scale: true}\n"
        "  positional: {type: sinusoidal}\n  blocks:\n    attention: {causal: false}\n"
        "    norm: {placement: post}\n  final_norm: {type: none}\n"
        "  head: {type: classifier, tie_embedding: false, labels: 2, pool: mean}\n"
        "train:\n  optimizer: {type: adam, betas: [0.9, 0.98], eps: 1.0e-9, weight_decay: 0}\n"
        "  schedule: {type: noam, warmup: 400}\n  label_smoothing: 0.1\n  epochs: 3\n"
        "  early_stop: {patience: 2, metric: accuracy}\n",
        "t.yaml", NULL, 0, &c, &e);
    {
        char m[4096];
        clf_error_format(&e, m, sizeof m);
        TU_CHECK(st == CLF_OK && c.kind == CLF_MODEL_ENCODER &&
                     c.head.type == CLF_HEAD_CLASSIFIER && c.head.pool == CLF_POOL_MEAN &&
                     c.head.labels == 2 && c.vocab.size == 8000 &&
                     c.blocks.norm.placement == CLF_NORM_POST &&
                     c.train.schedule.type == CLF_SCHED_NOAM && c.train.optimizer.eps == 1e-9 &&
                     c.train.label_smoothing == 0.1 && clf_config_decoder_layers(&c) == 0,
                 "encoder classifier with bpe (size 8000), post-LN, noam, label smoothing%s%s",
                 st ? ": " : "", st ? m : "");
    }

    /* aliases are resolved by libyaml */
    st = clf_config_parse_string("train:\n  steps: &n 300\n  eval: {every: *n}\n", "t.yaml", NULL,
                                 0, &c, &e);
    TU_CHECK(st == CLF_OK && c.train.eval.every == 300, "a YAML alias supplies a value");
}

/* ---- errors ------------------------------------------------------------------------------ */

typedef struct bad_case {
    const char *text; /* YAML text, named t.yaml */
    const char *where;
    const char *fragment;
} bad_case;

static const bad_case bad_cases[] = {
    {"model:\n  blocks:\n    attention:\n      hedas: 4\n", "t.yaml:4:7",
     "unknown key 'hedas' in blocks.attention; expected one of: heads, kv_heads, causal, "
     "dropout, bias, window"},
    {"model:\n  context: four\n", "t.yaml:2:12", "context: expected an integer"},
    {"model:\n  embedding: {dim: \"128\"}\n", "t.yaml:2:20",
     "embedding.dim: expected an integer in [1, 65536], got the quoted string \"128\""},
    {"train:\n  steps: 2.5\n", "t.yaml:2:10", "train.steps: expected an integer >= 0, got '2.5'"},
    {"model:\n  embedding: {scale: maybe}\n", "t.yaml:2:22",
     "embedding.scale: expected true or false, got 'maybe'"},
    {"model:\n  blocks: {dropout: 1.0}\n", "t.yaml:2:21",
     "blocks.dropout: expected a number in [0, 1), got '1.0'"},
    {"train:\n  optimizer: {betas: [0.9]}\n", "t.yaml:2:22",
     "train.optimizer.betas: expected a pair of numbers [a, b], each in [0, 1)"},
    {"train:\n  optimizer:\n    betas: [0.9, 1.5]\n", "t.yaml:3:18", "got '1.5'"},
    {"model:\n  context: 0\n", "t.yaml:2:12", "context: expected an integer in [1, 1048576]"},
    {"model:\n  embedding: {dim: 128}\n  blocks:\n    attention: {heads: 5}\n", "t.yaml:4:24",
     "5 heads do not divide embedding.dim 128"},
    /* heads left at its default: the error points at the dim that broke it */
    {"model:\n  embedding:\n    dim: 130\n", "t.yaml:3:10",
     "4 heads do not divide embedding.dim 130"},
    {"model:\n  embedding: {dim: 12}\n  blocks: {attention: {heads: 4}}\n"
     "  positional: {type: rope}\n",
     "t.yaml:4:22", "rope needs an even head size"},
    {"model:\n  kind: encoder\n  head: {type: classifier, labels: 2}\n  blocks:\n"
     "    attention: {causal: false, window: 8}\n",
     "t.yaml:5:40",
     "a sliding window needs causal self-attention (kind decoder with causal: true)"},
    {"model:\n  blocks:\n    attention: {causal: false, window: 8}\n", "t.yaml:3:40",
     "not kind decoder with causal: false"},
    {"model:\n  blocks:\n    attention: {window: -1}\n", "t.yaml:3:25",
     "blocks.attention.window: expected an integer in [0, 1073741824]"},
    {"model:\n  embedding: {dim: 1024}\n  blocks: {attention: {heads: 2}}\n", "t.yaml:3:31",
     "a head size of 512 (embedding.dim 1024 / 2 heads) is over the fused attention's 256"},
    {"model:\n  positional: {type: alibl}\n", "t.yaml:2:22",
     "expected one of: learned, sinusoidal, rope, alibi, t5, relative; got 'alibl' (did you mean "
     "'alibi'?)"},
    {"model:\n  blocks:\n    ffn: {activation: gleu}\n", "t.yaml:3:23",
     "expected one of: relu, gelu, gelu_tanh, swiglu; got 'gleu' (did you mean 'gelu'?)"},
    {"model:\n  blocks:\n    norm: {type: none}\n", "t.yaml:3:18",
     "blocks.norm.type: expected one of: layernorm, rmsnorm; got 'none'"},
    {"train:\n  steps: 100\n  batch: 4\n  steps: 200\n", "t.yaml:4:3",
     "duplicate key 'steps' in train (first given at line 2)"},
    {"model:\n  context: 64\n  embedding: {dim: 128\n  blocks: {repeat: 2}\n", "t.yaml:4:9",
     "YAML syntax error: did not find expected ',' or '}'"},
    {"model:\n\tcontext: 4\n", "t.yaml:2:1",
     "YAML syntax error: found character that cannot start any token"},
    {"model: 5\n", "t.yaml:1:8", "model: expected a mapping with keys: kind, vocab, context"},
    {"- a\n", "t.yaml:1:1", "expected a mapping with keys: model, train; got a sequence"},
    {"", "t.yaml", "the config is empty"},
    {"model: {}\n---\ntrain: {}\n", "t.yaml:3:1", "expected one YAML document"},
    {"model:\n  kind: encoder\n  blocks: {attention: {causal: false}}\n"
     "  head: {type: classifier, tie_embedding: true}\n",
     "t.yaml:4:43", "head.tie_embedding: only an lm head"},
    {"model:\n  kind: encoder\n  head: {type: classifier}\n", "t.yaml:2:9",
     "kind encoder attends in both directions"},
    {"model:\n  head: {type: classifier, tie_embedding: false}\n", "t.yaml:2:16",
     "kind decoder needs an lm head"},
    {"model:\n  blocks: {encoder_repeat: 2}\n", "t.yaml:2:28",
     "blocks.encoder_repeat: only for kind encoder-decoder"},
    {"train:\n  label_smoothing: 1.0\n", "t.yaml:2:20",
     "train.label_smoothing: expected a number in [0, 1)"},
    {"train:\n  steps: 50\n  schedule: {type: noam, warmup: 0}\n", "t.yaml:3:34",
     "the noam schedule needs warmup >= 1"},
    {"train:\n  stpes: 5\n", "t.yaml:2:3",
     "unknown key 'stpes' in train; expected one of: batch, batch_tokens, steps, epochs, "
     "optimizer"},
    {"train:\n  optimizer: {lr: -1}\n", "t.yaml:2:19", "expected a number > 0, got '-1'"},
    {"train:\n  grad_clip: .inf\n", "t.yaml:2:14", "expected a number >= 0, got '.inf'"},
    {"model:\n  [a, b]: 3\n", "t.yaml:2:3", "expected a key name in model, got a sequence"},
    {"train:\n  steps: 0\n  epochs: 3\n", "t.yaml:2:10",
     "cosine decays over train.steps, which is 0"},
    {"train:\n  steps: 0\n", "t.yaml:2:10", "0 steps needs train.epochs > 0"},
    {"train:\n  seed: -1\n", "t.yaml:2:9", "train.seed: expected a non-negative integer"},
    {"train:\n  schedule: {min_lr: 0.5}\n", "t.yaml:2:22", "is above train.optimizer.lr"},
    {"model:\n  blocks:\n", "t.yaml:2:10", "blocks: expected a mapping with keys: repeat"},
    {"model:\n  vocab: {tokenizer: byte, size: 100}\n", "t.yaml:2:34",
     "the byte tokenizer has 256 tokens"},
    {"model:\n  kind: encoder\n  blocks: {attention: {causal: false}}\n"
     "  head: {type: classifier, tie_embedding: false}\n"
     "train:\n  early_stop: {metric: bleu}\n",
     "t.yaml:6:24", "bleu needs kind encoder-decoder"},
};

static void check_error(const char *what, clf_status st, const clf_error *e, const char *where,
                        const char *fragment)
{
    char full[20000];
    clf_error_format(e, full, sizeof full);
    int ok = st == CLF_ERR_CONFIG && strcmp(e->where, where) == 0 && strstr(e->msg, fragment);
    TU_CHECK(ok, "%s -> %s: ...%s...", what, where, fragment);
    if (!ok)
        printf("       got status %s, where '%s', message:\n       %s\n", clf_status_name(st),
               e->where, full);
}

static void test_errors(void)
{
    clf_model_config c;
    clf_error e;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *b = &bad_cases[i];
        clf_error_clear(&e);
        clf_status st = clf_config_parse_string(b->text, "t.yaml", NULL, 0, &c, &e);
        char what[64];
        snprintf(what, sizeof what, "bad case %zu", i);
        check_error(what, st, &e, b->where, b->fragment);
    }

    /* the offending line and a caret under the column */
    clf_config_parse_string("model:\n  blocks:\n    attention:\n      hedas: 4\n", "t.yaml", NULL,
                            0, &c, &e);
    TU_CHECK(strstr(e.msg, "\n        hedas: 4\n        ^") != NULL,
             "the message shows the line and a caret under column 7");
    /* a tab before the column keeps the caret aligned */
    clf_config_parse_string("model: {context:\t0}\n", "t.yaml", NULL, 0, &c, &e);
    TU_CHECK(strcmp(e.where, "t.yaml:1:18") == 0 && strstr(e.msg, "\n                  \t^"),
             "caret after a tab (where %s)", e.where);

    /* files on disk: the where carries the path as given */
    static const struct {
        const char *file, *pos, *fragment;
    } files[] = {
        {"unknown-key.yaml", "4:7", "unknown key 'hedas' in blocks.attention"},
        {"wrong-type.yaml", "3:12", "expected an integer in [1, 1048576], got 'four'"},
        {"heads-not-divide.yaml", "4:24", "5 heads do not divide embedding.dim 128"},
        {"zero-context.yaml", "2:12", "context: expected an integer in [1, 1048576], got '0'"},
        {"bad-enum.yaml", "3:23", "got 'gleu' (did you mean 'gelu'?)"},
        {"duplicate-key.yaml", "4:3", "duplicate key 'steps' in train"},
        {"malformed.yaml", "4:9", "did not find expected ',' or '}'"},
        {"unknown-section.yaml", "3:1", "unknown key 'modle'"},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char rel[256], path[1024], where[1100];
        snprintf(rel, sizeof rel, "tests/data/config/%s", files[i].file);
        path_in_src(path, sizeof path, rel);
        snprintf(where, sizeof where, "%s:%s", path, files[i].pos);
        clf_error_clear(&e);
        clf_status st = clf_config_load(path, NULL, 0, &c, &e);
        check_error(files[i].file, st, &e, where, files[i].fragment);
    }

    clf_status st = clf_config_load("no/such/model.yaml", NULL, 0, &c, &e);
    TU_CHECK(st == CLF_ERR_IO && strcmp(e.where, "no/such/model.yaml") == 0,
             "a missing file is an I/O error naming the path");

    /* a string longer than its field */
    char big[1200];
    int n = snprintf(big, sizeof big, "model:\n  vocab: {tokenizer: bpe, path: ");
    for (int i = 0; i < 600; i++)
        big[n++] = 'a';
    snprintf(big + n, sizeof big - (size_t)n, "}\n");
    st = clf_config_parse_string(big, "t.yaml", NULL, 0, &c, &e);
    check_error("a 600-byte path", st, &e, "t.yaml:2:33", "a string of at most 511 bytes");
}

/* ---- overrides ------------------------------------------------------------------------------ */

static void test_overrides(void)
{
    char path[1024];
    clf_model_config c, before;
    clf_error e;
    path_in_src(path, sizeof path, "config/models/gpt-shakespeare-cpu.yaml");

    const char *ok[] = {"train.steps=5",
                        "train.steps=200",
                        "blocks.attention.heads=8",
                        "train.optimizer.betas=[0.9,0.95]",
                        "model.embedding.dim=256",
                        "positional.type=rope",
                        "train.seed=18446744073709551615",
                        "head={type: lm, tie_embedding: false}",
                        "train.eval.batches=0",
                        "vocab.path="};
    clf_status st = clf_config_load(path, ok, (int)(sizeof ok / sizeof ok[0]), &c, &e);
    char m[4096];
    clf_error_format(&e, m, sizeof m);
    TU_CHECK(st == CLF_OK, "overrides apply%s%s", st ? ": " : "", st ? m : "");
    if (st == CLF_OK) {
        TU_CHECK(c.train.steps == 200, "the last override of a key wins (steps %d)", c.train.steps);
        TU_CHECK(c.blocks.attention.heads == 8 && c.embedding.dim == 256 &&
                     c.blocks.ffn.hidden == 512,
                 "heads 8, dim 256 (given without 'model.'), ffn.hidden from the file stays 512");
        TU_CHECK(c.train.optimizer.betas[0] == 0.9 && c.train.optimizer.betas[1] == 0.95,
                 "a flow sequence sets betas");
        TU_CHECK(c.positional.type == CLF_POS_ROPE && c.train.seed == UINT64_MAX &&
                     !c.head.tie_embedding && c.train.eval.batches == 0 && !c.vocab.path[0],
                 "enum, u64 max, a mapping value, a zero and an empty string");
    }

    static const struct {
        const char *ovr, *fragment;
    } bad[] = {
        {"train.stepz=5", "--set train.stepz=5: unknown key 'stepz' in train; expected one of: "
                          "batch, batch_tokens, steps, epochs, optimizer"},
        {"train.batch_tokens=4096", "train.batch_tokens: a token budget batches the encoder "
                                    "kinds' sentences"},
        {"train.batch_tokens=-1", "train.batch_tokens: expected an integer >= 0, got '-1'"},
        {"contxt=5", "unknown key 'contxt'; expected model, train or a model key: kind, vocab"},
        {"train.steps", "--set train.steps: expected key.path=value"},
        {"train.steps=abc", "--set train.steps=abc: train.steps: expected an integer >= 0, got "
                            "'abc'"},
        {"blocks.attention.heads=5", "--set blocks.attention.heads=5: blocks.attention.heads: 5 "
                                     "heads do not divide embedding.dim 128"},
        {"blocks.attention.kv_heads=3",
         "--set blocks.attention.kv_heads=3: blocks.attention.kv_heads: expected a number of "
         "key/value heads that divides blocks.attention.heads 4 (1 = multi-query, 4 = "
         "multi-head), got 3"},
        /* heads comes from the file, dim from the flag: the flag is blamed */
        {"embedding.dim=130", "--set embedding.dim=130: blocks.attention.heads: 4 heads do not "
                              "divide embedding.dim 130"},
        {"positional.rope_scaling.type=yarn",
         "--set positional.rope_scaling.type=yarn: positional.rope_scaling.type: yarn scaling is "
         "for rotary positions (positional.type: rope), not learned"},
        {"positional.rope_scaling={type: linear, factor: 0.5}",
         "positional.rope_scaling.factor: expected a number in [1, 65536], got '0.5'"},
        {"positional={type: rope, rope_scaling: {type: yarn, beta_fast: 1, beta_slow: 2}}",
         "positional.rope_scaling.beta_fast: expected above beta_slow 2, got 1"},
        {"positional.rope_scaling.type=dynamic",
         "positional.rope_scaling.type: expected one of: none, linear, ntk, yarn; got 'dynamic'"},
        {"train.ema=1", "train.ema: expected a number in [0, 1), got '1'"},
        {"positional={type: t5, num_buckets: 8, max_distance: 4}",
         "positional.max_distance: expected above the 4 exact distances of 8 buckets, got 4"},
        {"positional.num_buckets=65", "positional.num_buckets: expected an integer in [4, 64]"},
        {"positional={type: relative, max_distance: 65}",
         "positional.max_distance: relative positions clip distances at most at 64"},
        {"train={ema: 0.99, shard_optimizer: true}",
         "train.ema: the moving average is kept whole on every rank, which "
         "train.shard_optimizer"},
        {"train.keep_last=-1", "train.keep_last: expected an integer in [0, 1000000], got '-1'"},
        {"blocks.attention.global=4",
         "blocks.attention.global: sparse patterns add to the sliding window of causal "
         "self-attention (kind decoder, causal: true, window > 0: their local part); got kind "
         "decoder, window 0"},
        {"blocks.attention={window: 8, stride: 4, block: 24}",
         "blocks.attention.block: expected a multiple of 16 in [16, 128], got 24"},
        {"blocks.attention.type=linformer",
         "blocks.attention.type: linformer projects an encoder's keys and values along the "
         "sequence (kind encoder), not kind decoder"},
        {"blocks.attention={type: performer, window: 8}",
         "blocks.attention.type: performer needs a window or sparse pattern selects scores, which "
         "random features never form"},
        {"blocks.attention={type: performer, dropout: 0.1}",
         "blocks.attention.type: performer needs no attention dropout"},
        {"blocks.attention.features=257", "blocks.attention.features: expected an integer in [0, "
                                          "256]"},
        {"blocks.attention.random_blocks=65",
         "blocks.attention.random_blocks: expected an integer in [0, 64]"},
        {"train.steps.x=1", "train.steps is a value, not a section"},
        {"train.steps=", "--set train.steps=: train.steps: expected an integer >= 0, got "
                         "nothing"},
        {"train.optimizer.betas=[0.9", "the value is not valid YAML"},
        {".steps=1", "empty key name"},
        {"train.optimizer={lr: 1, bogus: 2}", "unknown key 'bogus' in train.optimizer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *one[1] = {bad[i].ovr};
        clf_error_clear(&e);
        st = clf_config_load(path, one, 1, &c, &e);
        char full[20000];
        clf_error_format(&e, full, sizeof full);
        int good = st == CLF_ERR_CONFIG && strstr(full, bad[i].fragment) != NULL;
        TU_CHECK(good, "--set %s is refused: ...%s...", bad[i].ovr, bad[i].fragment);
        if (!good)
            printf("       got %s: %s\n", clf_status_name(st), full);
    }

    /* clf_config_set on a loaded config: applied, or refused leaving it as it was */
    st = clf_config_load(path, NULL, 0, &c, &e);
    before = c;
    st = clf_config_set(&c, "train.steps=300", &e);
    TU_CHECK(st == CLF_OK && c.train.steps == 300, "clf_config_set changes train.steps");
    before.train.steps = 300;
    st = clf_config_set(&c, "blocks.attention.heads=3", &e);
    TU_CHECK(st == CLF_ERR_CONFIG && !clf_config_diff(&c, &before, NULL, 0) &&
                 strcmp(e.where, "--set blocks.attention.heads=3") == 0,
             "a refused clf_config_set leaves the config unchanged and names the flag");
}

/* ---- dump, round trip, diff ---------------------------------------------------------------- */

static int round_trip(const clf_model_config *c, const char *what)
{
    clf_model_config back;
    clf_error e;
    char key[128], m[4096];
    size_t n = clf_config_to_yaml(c, text_buf, sizeof text_buf);
    if (n >= sizeof text_buf) {
        TU_CHECK(0, "%s: dump fits (%zu bytes)", what, n);
        return 0;
    }
    clf_status st = clf_config_parse_string(text_buf, "dump", NULL, 0, &back, &e);
    if (st != CLF_OK) {
        clf_error_format(&e, m, sizeof m);
        TU_CHECK(0, "%s: the dump parses: %s\n%s", what, m, text_buf);
        return 0;
    }
    if (clf_config_diff(c, &back, key, sizeof key)) {
        TU_CHECK(0, "%s: parse(dump) differs at %s\n%s", what, key, text_buf);
        return 0;
    }
    static char again[1 << 16];
    clf_config_to_yaml(&back, again, sizeof again);
    if (strcmp(again, text_buf) != 0) {
        TU_CHECK(0, "%s: dump(parse(dump)) == dump", what);
        return 0;
    }
    return 1;
}

static double rnd_in(tu_rng *r, double lo, double hi)
{
    /* random mantissa bits and a spread of magnitudes, clamped into [lo, hi) */
    double mag = pow(10.0, tu_uniform(r, -12.0, 0.0));
    double x = lo + (hi - lo) * mag * tu_uniform(r, 0.0, 1.0);
    return x < hi ? x : lo;
}

static void test_round_trip(void)
{
    char path[1024], key[128];
    clf_model_config c;
    clf_error e;
    const char *names[] = {"gpt-shakespeare-cpu.yaml", "gpt-shakespeare.yaml",
                           "gpt-tiny-test.yaml"};
    for (int i = 0; i < 3; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "config/models/%s", names[i]);
        path_in_src(path, sizeof path, rel);
        if (clf_config_load(path, NULL, 0, &c, &e) != CLF_OK) {
            TU_CHECK(0, "load %s", names[i]);
            continue;
        }
        TU_CHECK(round_trip(&c, names[i]), "%s round-trips through the dump", names[i]);
    }

    /* every value away from its default, awkward strings and doubles */
    clf_config_defaults(&c);
    c.kind = CLF_MODEL_ENCODER_DECODER;
    c.vocab.tokenizer = CLF_TOKENIZER_BPE;
    c.vocab.size = 10000;
    snprintf(c.vocab.path, sizeof c.vocab.path, "a \"quoted\" \\path\\ # not: a comment\tü\n");
    c.context = 100;
    c.embedding.dim = 512;
    c.embedding.scale = 1;
    c.embedding.dropout = 0.1 + 0.2; /* 0.30000000000000004 */
    c.positional.type = CLF_POS_ROPE;
    c.positional.rope_theta = 500000.0;
    c.positional.num_buckets = 24;
    c.positional.max_distance = 77;
    c.positional.rope_scaling.type = CLF_ROPE_SCALE_YARN;
    c.positional.rope_scaling.factor = 2.5;
    c.positional.rope_scaling.original_context = 77;
    c.positional.rope_scaling.beta_fast = 16.5;
    c.positional.rope_scaling.beta_slow = 0.1 + 0.2;
    c.blocks.repeat = 6;
    c.blocks.encoder_repeat = 5;
    c.blocks.decoder_repeat = 7;
    c.blocks.attention.heads = 8;
    c.blocks.attention.kv_heads = 2;
    c.blocks.attention.dropout = 1.0 / 3.0;
    c.blocks.attention.bias = 0;
    c.blocks.ffn.hidden = 2048;
    c.blocks.ffn.activation = CLF_FFN_SWIGLU;
    c.blocks.ffn.bias = 0;
    c.blocks.ffn.dropout = 1e-17;
    c.blocks.norm.type = CLF_NORM_RMSNORM;
    c.blocks.norm.placement = CLF_NORM_POST;
    c.blocks.norm.eps = 1e-6;
    c.blocks.norm.bias = 0;
    c.blocks.dropout = 0.1;
    c.share_embeddings = 1;
    c.final_norm.type = CLF_NORM_NONE;
    c.head.tie_embedding = 0;
    c.head.pool = CLF_POOL_MEAN;
    c.train.batch = 128;
    c.train.steps = 100000;
    c.train.epochs = 20;
    c.train.optimizer.type = CLF_OPT_ADAM;
    c.train.optimizer.lr = 2.0;
    c.train.optimizer.betas[0] = 0.9;
    c.train.optimizer.betas[1] = 0.98;
    c.train.optimizer.eps = 1e-9;
    c.train.optimizer.weight_decay = 1e-300;
    c.train.schedule.type = CLF_SCHED_NOAM;
    c.train.schedule.warmup = 4000;
    c.train.schedule.min_lr = 123456789012345678.0;
    c.train.grad_clip = 5e15;
    c.train.label_smoothing = 0.1;
    c.train.eval.every = 0;
    c.train.eval.batches = 0;
    c.train.early_stop.patience = 5;
    c.train.early_stop.metric = CLF_METRIC_BLEU;
    c.train.seed = UINT64_MAX;
    c.train.ema = 0.9990000000000001;
    c.train.keep_last = 7;
    c.train.log_every = 1;
    clf_status st = clf_config_validate(&c, &e);
    TU_CHECK(st == CLF_OK, "the all-non-default config is valid%s%s", st ? ": " : "",
             st ? e.msg : "");
    TU_CHECK(round_trip(&c, "all non-default"), "every non-default value round-trips");

    clf_model_config d;
    clf_config_defaults(&d);
    clf_config_resolve(&d);
    clf_config_diff(&c, &d, key, sizeof key);
    TU_CHECK(strcmp(key, "kind") == 0, "diff names the first differing key ('%s')", key);

    /* random doubles in every continuous field */
    tu_rng r = tu_rng_new(7);
    int fails = 0;
    for (int t = 0; t < 500 && fails < 3; t++) {
        clf_config_defaults(&c);
        clf_config_resolve(&c);
        c.embedding.dropout = rnd_in(&r, 0, 1);
        c.positional.rope_theta = rnd_in(&r, 1e-3, 1e9);
        c.blocks.attention.dropout = rnd_in(&r, 0, 1);
        c.blocks.ffn.dropout = rnd_in(&r, 0, 1);
        c.blocks.norm.eps = rnd_in(&r, 1e-12, 1);
        c.blocks.dropout = rnd_in(&r, 0, 1);
        c.train.optimizer.lr = rnd_in(&r, 1e-8, 10);
        c.train.optimizer.betas[0] = rnd_in(&r, 0, 1);
        c.train.optimizer.betas[1] = rnd_in(&r, 0, 1);
        c.train.optimizer.eps = rnd_in(&r, 1e-12, 1);
        c.train.optimizer.weight_decay = rnd_in(&r, 0, 1e3);
        c.train.schedule.min_lr = c.train.optimizer.lr * tu_uniform(&r, 0, 1);
        c.train.grad_clip = rnd_in(&r, 0, 1e20);
        c.train.label_smoothing = rnd_in(&r, 0, 1);
        c.train.seed = ((uint64_t)tu_u32(&r) << 32) | tu_u32(&r);
        if (clf_config_validate(&c, &e) != CLF_OK) {
            TU_CHECK(0, "random config %d is valid: %s", t, e.msg);
            fails++;
            continue;
        }
        char what[64];
        snprintf(what, sizeof what, "random config %d", t);
        if (!round_trip(&c, what))
            fails++;
    }
    TU_CHECK(fails == 0, "500 configs with random doubles round-trip bit-exactly");

    /* snprintf-like sizing */
    clf_config_defaults(&c);
    size_t need = clf_config_to_yaml(&c, NULL, 0);
    char small[10];
    size_t got = clf_config_to_yaml(&c, small, sizeof small);
    TU_CHECK(need > 100 && got == need && strlen(small) == 9,
             "to_yaml returns the full length (%zu) and truncates with a NUL", need);
}

static void test_validate_direct(void)
{
    clf_model_config c;
    clf_error e;
    clf_config_defaults(&c);
    clf_config_resolve(&c);
    c.embedding.dim = 0;
    clf_status st = clf_config_validate(&c, &e);
    TU_CHECK(st == CLF_ERR_CONFIG &&
                 strstr(e.msg, "embedding.dim: expected an integer in [1, "
                               "65536], got 0") &&
                 e.where[0] == '\0',
             "validate on a struct from code: dim 0 refused (%s)", e.msg);
    clf_config_defaults(&c);
    clf_config_resolve(&c);
    c.blocks.attention.heads = 5;
    st = clf_config_validate(&c, &e);
    TU_CHECK(st == CLF_ERR_CONFIG && strstr(e.msg, "5 heads do not divide"),
             "validate: 5 heads with dim 128 refused");
    clf_config_defaults(&c);
    clf_config_resolve(&c);
    c.kind = (clf_model_kind)7;
    st = clf_config_validate(&c, &e);
    TU_CHECK(st == CLF_ERR_CONFIG && strstr(e.msg, "kind: expected one of: decoder, encoder, "
                                                   "encoder-decoder"),
             "validate: an enum out of range refused");
    clf_config_defaults(&c);
    clf_config_resolve(&c);
    c.train.optimizer.lr = NAN;
    st = clf_config_validate(&c, &e);
    TU_CHECK(st == CLF_ERR_CONFIG && strstr(e.msg, "train.optimizer.lr"),
             "validate: a NaN learning rate refused");

    /* another context (sample/eval --context): clf_config_set_context */
    clf_config_defaults(&c);
    clf_config_resolve(&c);
    st = clf_config_set_context(&c, 128, -1, &e);
    TU_CHECK(st == CLF_ERR_ARG && c.context == 64 &&
                 strstr(e.msg, "learned a table of 64 positions (positional.type: learned): its "
                               "context stays 64"),
             "set_context: learned positions keep their context (%s)", e.msg);
    st = clf_config_set_context(&c, 64, -1, &e);
    TU_CHECK(st == CLF_OK && c.context == 64, "set_context: the same context is fine");
    c.positional.type = CLF_POS_ROPE;
    st = clf_config_set_context(&c, 32, -1, &e);
    TU_CHECK(st == CLF_OK && c.context == 32 &&
                 c.positional.rope_scaling.type == CLF_ROPE_SCALE_NONE,
             "set_context: rope inside the trained context is unscaled");
    st = clf_config_set_context(&c, 80, -1, &e);
    TU_CHECK(st == CLF_OK && c.context == 80 &&
                 c.positional.rope_scaling.type == CLF_ROPE_SCALE_YARN &&
                 c.positional.rope_scaling.factor == 2.5 &&
                 c.positional.rope_scaling.original_context == 32,
             "set_context: rope past the trained context takes yarn at context / trained");
    st = clf_config_set_context(&c, 160, -1, &e);
    TU_CHECK(st == CLF_OK && c.context == 160 && c.positional.rope_scaling.factor == 2.5 &&
                 c.positional.rope_scaling.original_context == 32,
             "set_context: a model with its own rope_scaling keeps it");
    st = clf_config_set_context(&c, 320, CLF_ROPE_SCALE_NTK, &e);
    TU_CHECK(st == CLF_OK && c.positional.rope_scaling.type == CLF_ROPE_SCALE_NTK &&
                 c.positional.rope_scaling.factor == 2.0 &&
                 c.positional.rope_scaling.original_context == 160,
             "set_context: a scaling asked for replaces it, over the context it replaces");
    st = clf_config_set_context(&c, 100, CLF_ROPE_SCALE_LINEAR, &e);
    TU_CHECK(st == CLF_ERR_ARG && c.context == 320 && strstr(e.msg, "past the trained context"),
             "set_context: a scaling inside the trained context is refused (%s)", e.msg);
    clf_config_defaults(&c);
    c.positional.type = CLF_POS_ALIBI;
    clf_config_resolve(&c);
    st = clf_config_set_context(&c, 1000, -1, &e);
    TU_CHECK(st == CLF_OK && c.context == 1000 &&
                 c.positional.rope_scaling.type == CLF_ROPE_SCALE_NONE,
             "set_context: ALiBi runs past its context as it is");
    st = clf_config_set_context(&c, 0, -1, &e);
    TU_CHECK(st == CLF_ERR_ARG && strstr(e.msg, "expected a context in [1, 1048576], got 0"),
             "set_context: context 0 refused");

    TU_CHECK(!strcmp(clf_config_kind_name(CLF_MODEL_ENCODER_DECODER), "encoder-decoder") &&
                 !strcmp(clf_config_activation_name(CLF_FFN_GELU_TANH), "gelu_tanh") &&
                 !strcmp(clf_config_norm_name(CLF_NORM_RMSNORM), "rmsnorm") &&
                 !strcmp(clf_config_schedule_name(CLF_SCHED_NOAM), "noam") &&
                 !strcmp(clf_config_norm_name((clf_norm_type)9), "?"),
             "enum names");
}

int main(void)
{
    printf("test_config (seed %llu)\n", (unsigned long long)tu_seed());
    test_examples();
    test_defaults();
    test_errors();
    test_overrides();
    test_round_trip();
    test_validate_direct();
    return tu_finish();
}
