/*
 * test_import.c - pretrained models: the Unicode tables, WordPiece against
 * Hugging Face tokenizers, and a BERT imported from the Hugging Face layout
 * against a PyTorch forward.
 *
 * Fixtures (tests/data/hf/, made by tests/parity/gen_hf_fixture.py with
 * PyTorch and the `tokenizers` package; CI needs neither):
 *   - wordpiece-cases.json: 295 varied sentences (SST-2, Multi30k German
 *     and English, hand-written ones with accents, CJK, emoji, control
 *     characters, Unicode spaces, over-long words, literal [SEP]) and the
 *     ids `tokenizers` gives them with tiny-bert's tokenizer.json; every
 *     one must come out identical, from the imported tokenizer and after a
 *     round trip through clformer's own JSON form.
 *   - tiny-bert/: a random 2-layer BERT (model.safetensors with BertModel's
 *     names, a pooler and position_ids to be ignored), and
 *     tiny-bert-embed.json: 8 sentences with their ids ([CLS] ... [SEP])
 *     and the L2-normalised mean-pooled embeddings of a float64 PyTorch
 *     forward. The import is run, the sentences are batched together (so
 *     rows are padded: the key mask and the pooling over kept positions
 *     matter) and embedded on the device; each vector must have cosine >=
 *     0.9999 with the reference and no component off by more than 1e-4
 *     (float32 through 2 layers: the observed error is ~1e-6).
 *   - tiny-llama/, tiny-mistral/, tiny-qwen2/: random Llama-layout decoders
 *     (grouped-query and multi-query attention, YaRN and linear rope
 *     scaling, a sliding window, q/k/v biases, tied and untied heads) and
 *     tiny-llama-logits.safetensors, the logits of a float64 PyTorch
 *     forward at every position of tiny-gpt2's two texts: within 1e-4;
 *     exported as a Llama folder and imported again, bit for bit.
 * Import errors are provoked in a temporary copy of the folder: another
 * model_type, a missing tensor, a tensor of another shape, a truncated
 * safetensors file, a missing tokenizer.json; each must fail with its
 * status and a message naming what is wrong.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/clformer.h"
#include "model/text/unicode.h"
#include "tests/test_util.h"

#define HF "tests/data/hf"

static char *slurp(const char *path, size_t *len)
{
    char *text = NULL;
    clf_error err;
    tu_ok(clf_file_read_all(path, (size_t)64 << 20, &text, len, &err), &err, path);
    return text;
}

static clf_json *load_json(const char *path)
{
    size_t len;
    char *text = slurp(path, &len);
    clf_json *doc = NULL;
    clf_error err;
    tu_ok(clf_json_parse(text, len, NULL, &doc, &err), &err, path);
    free(text);
    return doc;
}

static clf_tokenizer *hf_tokenizer(void)
{
    size_t len;
    char *text = slurp(HF "/tiny-bert/tokenizer.json", &len);
    clf_tokenizer *t = NULL;
    clf_error err;
    tu_ok(clf_tokenizer_from_hf(text, len, "tokenizer.json", &t, &err), &err, "from_hf");
    free(text);
    return t;
}

static void test_unicode(void)
{
    uint32_t o[4];
    int n = clf_uni_decompose(0xE9, o); /* é */
    TU_CHECK(n == 2 && o[0] == 'e' && o[1] == 0x301, "NFD of U+00E9: %d", n);
    n = clf_uni_decompose(0x1E08, o); /* C with cedilla and acute */
    TU_CHECK(n == 3 && o[0] == 'C' && o[1] == 0x327 && o[2] == 0x301, "NFD of U+1E08: %d", n);
    n = clf_uni_decompose(0xAC01, o); /* Hangul GAG: L V T */
    TU_CHECK(n == 3 && o[0] == 0x1100 && o[1] == 0x1161 && o[2] == 0x11A8, "Hangul: %d", n);
    n = clf_uni_decompose(0xAC00, o); /* GA: L V */
    TU_CHECK(n == 2 && o[0] == 0x1100 && o[1] == 0x1161, "Hangul LV: %d", n);
    n = clf_uni_decompose('a', o);
    TU_CHECK(n == 1 && o[0] == 'a', "a has no decomposition");
    n = clf_uni_tolower(0x130, o); /* İ -> i + combining dot */
    TU_CHECK(n == 2 && o[0] == 'i' && o[1] == 0x307, "lower U+0130: %d", n);
    n = clf_uni_tolower(0x3A3, o); /* Σ -> σ (no context) */
    TU_CHECK(n == 1 && o[0] == 0x3C3, "lower U+03A3");
    n = clf_uni_tolower(0x410, o); /* Cyrillic А */
    TU_CHECK(n == 1 && o[0] == 0x430, "lower U+0410");
    n = clf_uni_tolower('Q', o);
    TU_CHECK(n == 1 && o[0] == 'q', "lower Q");
    TU_CHECK(clf_uni_class(0x301) & CLF_UNI_MN, "U+0301 is Mn");
    TU_CHECK(clf_uni_class(0x3000) & CLF_UNI_SPACE, "U+3000 is white space");
    TU_CHECK(clf_uni_class(0xA0) & CLF_UNI_SPACE, "U+00A0 is white space");
    TU_CHECK(!(clf_uni_class(0x200B) & CLF_UNI_SPACE), "U+200B is not white space");
    TU_CHECK(clf_uni_class(0x200B) & CLF_UNI_OTHER, "U+200B is Cf");
    TU_CHECK(clf_uni_class(0xE000) & CLF_UNI_OTHER, "U+E000 is Co");
    TU_CHECK(clf_uni_class(0x10FFFF) & CLF_UNI_OTHER, "U+10FFFF is Cn");
    TU_CHECK(clf_uni_class(0xBF) & CLF_UNI_PUNCT, "U+00BF is Po");
    TU_CHECK(clf_uni_class(0x201C) & CLF_UNI_PUNCT, "U+201C is Pi");
    TU_CHECK(clf_uni_class(0x4E00) == 0, "U+4E00 is a letter");
    TU_CHECK(clf_uni_class('$') == 0, "$ is a symbol (Sc), not P*");
}

/* Encode every case; the number that differ. */
static int run_cases(const clf_tokenizer *t, const clf_json *cases, const char *what)
{
    int bad = 0;
    for (size_t i = 0; i < cases->count; i++) {
        const clf_json *text = clf_json_get(&cases->items[i], "text");
        const clf_json *ids = clf_json_get(&cases->items[i], "ids");
        int32_t *got = NULL;
        size_t n = 0;
        clf_error err;
        clf_status st = clf_tokenizer_encode(t, text->string, text->string_len, &got, &n, &err);
        int same = st == CLF_OK && n == ids->count;
        for (size_t k = 0; same && k < n; k++)
            same = got[k] == ids->items[k].integer;
        if (!same && bad++ < 5) {
            fprintf(stderr, "  %s case %zu \"%.60s\": %zu ids, expected %zu:", what, i,
                    text->string, n, ids->count);
            for (size_t k = 0; k < n && k < 12; k++)
                fprintf(stderr, " %d", (int)got[k]);
            fprintf(stderr, "\n");
        }
        free(got);
    }
    return bad;
}

static void test_wordpiece(void)
{
    clf_json *doc = load_json(HF "/wordpiece-cases.json");
    const clf_json *cases = clf_json_get(doc, "cases");
    clf_tokenizer *t = hf_tokenizer();
    TU_CHECK(clf_tokenizer_type_of(t) == CLF_TOKENIZER_WORDPIECE, "type wordpiece");
    TU_CHECK(clf_tokenizer_vocab_size(t) == 600, "vocabulary 600, got %d",
             (int)clf_tokenizer_vocab_size(t));
    const char *names[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]"};
    const clf_special_token which[] = {CLF_SPECIAL_PAD, CLF_SPECIAL_UNK, CLF_SPECIAL_CLS,
                                       CLF_SPECIAL_SEP};
    for (int i = 0; i < 4; i++) {
        const char *p;
        size_t l;
        int32_t id = clf_tokenizer_special(t, which[i]);
        TU_CHECK(id >= 0 && clf_tokenizer_piece(t, id, &p, &l) && l == strlen(names[i]) &&
                     memcmp(p, names[i], l) == 0,
                 "special %s", names[i]);
    }
    TU_CHECK(clf_tokenizer_special(t, CLF_SPECIAL_BOS) < 0, "no bos");
    int bad = run_cases(t, cases, "imported");
    TU_CHECK(bad == 0, "%d of %zu sentences tokenize differently from Hugging Face tokenizers", bad,
             cases->count);
    printf("wordpiece: %zu sentences, %d differ from Hugging Face tokenizers\n", cases->count, bad);
    /* clformer's JSON form round trip */
    char *json = NULL;
    size_t jl = 0;
    clf_tokenizer *u = NULL;
    clf_error err;
    tu_ok(clf_tokenizer_to_json(t, &json, &jl, &err), &err, "to_json");
    tu_ok(clf_tokenizer_from_json(json, jl, &u, &err), &err, "from_json");
    bad = run_cases(u, cases, "round trip");
    TU_CHECK(bad == 0, "%d sentences differ after the JSON round trip", bad);
    for (int i = 0; i < CLF_SPECIAL_COUNT; i++)
        TU_CHECK(clf_tokenizer_special(u, (clf_special_token)i) ==
                     clf_tokenizer_special(t, (clf_special_token)i),
                 "special %d after the round trip", i);
    /* decoding: ## pieces glued, the WordPiece decoder's cleanup */
    const char *s = "The movie's ending wasn't great, was it?";
    int32_t *ids = NULL;
    size_t n = 0;
    char *back = NULL;
    tu_ok(clf_tokenizer_encode(t, s, strlen(s), &ids, &n, &err), &err, "encode");
    tu_ok(clf_tokenizer_decode(t, ids, n, &back, NULL, &err), &err, "decode");
    TU_CHECK(strcmp(back, "the movie's ending wasn't great, was it?") == 0, "decoded \"%s\"", back);
    free(back);
    free(ids);
    /* a pretrained vocabulary cannot grow a special */
    TU_CHECK(clf_tokenizer_add_special(u, CLF_SPECIAL_BOS, NULL, &err) == CLF_ERR_UNSUPPORTED,
             "adding bos refused");
    free(json);
    clf_tokenizer_destroy(u);
    clf_tokenizer_destroy(t);
    clf_json_destroy(doc);
}

/* tokenizer.json with `from` replaced by `to` must fail naming `needle`. */
static void hf_refused(const char *from, const char *to, const char *needle)
{
    size_t len;
    char *text = slurp(HF "/tiny-bert/tokenizer.json", &len);
    char *at = strstr(text, from);
    TU_CHECK(at != NULL, "fixture has %s", from);
    if (at == NULL) {
        free(text);
        return;
    }
    size_t fl = strlen(from), tl = strlen(to);
    char *mod = malloc(len + tl + 1);
    memcpy(mod, text, (size_t)(at - text));
    memcpy(mod + (at - text), to, tl);
    memcpy(mod + (at - text) + tl, at + fl, len - (size_t)(at - text) - fl + 1);
    clf_tokenizer *t = NULL;
    clf_error err;
    clf_status st = clf_tokenizer_from_hf(mod, strlen(mod), "tok.json", &t, &err);
    TU_CHECK(st == CLF_ERR_FORMAT && strstr(err.msg, needle) != NULL,
             "%s -> %s refused naming \"%s\": got %d \"%s\"", from, to, needle, (int)st, err.msg);
    clf_tokenizer_destroy(t);
    free(mod);
    free(text);
}

static void test_hf_errors(void)
{
    hf_refused("\"type\": \"WordPiece\",\n    \"unk_token\"",
               "\"type\": \"Unigram\",\n    \"unk_token\"", "Unigram");
    hf_refused("\"BertNormalizer\"", "\"NFKC\"", "NFKC");
    hf_refused("\"BertPreTokenizer\"", "\"Whitespace\"", "Whitespace");
    hf_refused("\"unk_token\": \"[UNK]\"", "\"unk_token\": \"<unk>\"", "<unk>");
    /* an id past the entries: the one left out and the entry past them named */
    hf_refused("\"[CLS]\": 2,", "\"[CLS]\": 7000,", "id 2 has no entry, and \"[CLS]\" has id 7000");
}

/* ---- the import ------------------------------------------------------------------- */

static char tmpdir[256];

static void copy_file(const char *from, const char *to, size_t keep)
{
    size_t len;
    char *data = slurp(from, &len);
    FILE *f = fopen(to, "wb");
    size_t n = keep < len ? keep : len;
    TU_CHECK(f != NULL && fwrite(data, 1, n, f) == n, "write %s", to);
    if (f)
        fclose(f);
    free(data);
}

/* A copy of tests/data/hf/<src> (config.json and files[0 .. n)) in
 * tmpdir/name, config.json mutated by replacing cfg_from with cfg_to when
 * given. */
static void copy_folder(const char *src, const char *const *files, int n, const char *name,
                        const char *cfg_from, const char *cfg_to)
{
    char d[512], p[640], q[640];
    snprintf(d, sizeof d, "%s/%s", tmpdir, name);
    TU_CHECK(mkdir(d, 0755) == 0, "mkdir %s", d);
    for (int i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/%s/%s", HF, src, files[i]);
        snprintf(q, sizeof q, "%s/%s", d, files[i]);
        copy_file(p, q, (size_t)-1);
    }
    size_t len;
    snprintf(p, sizeof p, "%s/%s/config.json", HF, src);
    char *cfg = slurp(p, &len);
    snprintf(p, sizeof p, "%s/config.json", d);
    FILE *f = fopen(p, "wb");
    char *at = cfg_from ? strstr(cfg, cfg_from) : NULL;
    TU_CHECK(cfg_from == NULL || at != NULL, "%s: the text to replace is in the config", name);
    if (at != NULL) {
        fwrite(cfg, 1, (size_t)(at - cfg), f);
        fputs(cfg_to, f);
        fputs(at + strlen(cfg_from), f);
    } else {
        fputs(cfg, f);
    }
    fclose(f);
    free(cfg);
}

/* A copy of tiny-bert in tmpdir/name. */
static void make_copy(const char *name, const char *cfg_from, const char *cfg_to)
{
    static const char *const files[] = {"tokenizer.json", "model.safetensors"};
    copy_folder("tiny-bert", files, 2, name, cfg_from, cfg_to);
}

/* Rewrite name/model.safetensors without `drop`, or with `reshape` one row
 * shorter. */
static void rewrite_weights(const char *name, const char *drop, const char *reshape)
{
    char p[640];
    clf_error err;
    clf_st_reader *r = NULL;
    clf_st_writer *w = NULL;
    tu_ok(clf_st_reader_open(HF "/tiny-bert/model.safetensors", &r, &err), &err, "open");
    tu_ok(clf_st_writer_create(&w, &err), &err, "writer");
    size_t n = clf_st_reader_count(r);
    void **keep = calloc(n, sizeof *keep);
    for (size_t i = 0; i < n; i++) {
        const clf_st_tensor_info *t = clf_st_reader_tensor(r, i);
        if (drop != NULL && strcmp(t->name, drop) == 0)
            continue;
        size_t bytes = (size_t)(t->end - t->begin);
        keep[i] = malloc(bytes ? bytes : 1);
        tu_ok(clf_st_reader_read_raw(r, t, keep[i], bytes, &err), &err, "read");
        int64_t shape[CLF_ST_MAX_DIMS];
        memcpy(shape, t->shape, sizeof shape);
        if (reshape != NULL && strcmp(t->name, reshape) == 0)
            shape[0]--; /* the data is larger than the shape: only a prefix is described */
        tu_ok(clf_st_writer_add(w, t->name, t->dtype, t->ndim, shape, keep[i], &err), &err, "add");
    }
    snprintf(p, sizeof p, "%s/%s/model.safetensors", tmpdir, name);
    tu_ok(clf_st_writer_write(w, p, &err), &err, "write");
    for (size_t i = 0; i < n; i++)
        free(keep[i]);
    free(keep);
    clf_st_writer_destroy(w);
    clf_st_reader_destroy(r);
}

static void import_refused(const char *name, clf_status want, const char *needle)
{
    char d[512], out[640];
    snprintf(d, sizeof d, "%s/%s", tmpdir, name);
    snprintf(out, sizeof out, "%s/%s.safetensors", tmpdir, name);
    clf_error err;
    clf_error_clear(&err);
    clf_status st = clf_import_hf(d, out, NULL, &err);
    TU_CHECK(st == want && strstr(err.msg, needle) != NULL,
             "import of %s: want status %d naming \"%s\", got %d \"%s\"", name, (int)want, needle,
             (int)st, err.msg);
    TU_CHECK(access(out, F_OK) != 0, "no checkpoint left by the failed import of %s", name);
}

static void test_import_errors(void)
{
    make_copy("roberta", "\"bert\"", "\"roberta\"");
    import_refused("roberta", CLF_ERR_FORMAT, "roberta");
    make_copy("relu6", "\"gelu\"", "\"relu6\"");
    import_refused("relu6", CLF_ERR_FORMAT, "relu6");
    /* a wrongly typed key is an error, not its default */
    make_copy("eps-str", "\"layer_norm_eps\": 1e-12", "\"layer_norm_eps\": \"0.5\"");
    import_refused("eps-str", CLF_ERR_FORMAT, "\"layer_norm_eps\" must be a number, not a string");
    make_copy("act-num", "\"hidden_act\": \"gelu\"", "\"hidden_act\": 3");
    import_refused("act-num", CLF_ERR_FORMAT, "\"hidden_act\" must be a string, not a number");
    make_copy("type-num", "\"model_type\": \"bert\"", "\"model_type\": 7");
    import_refused("type-num", CLF_ERR_FORMAT, "\"model_type\" must be a string, not a number");
    /* sentence-transformers pooling: exactly one of mean and [CLS] */
    {
        char pd[640], pp[700];
        make_copy("pool2", NULL, NULL);
        snprintf(pd, sizeof pd, "%s/pool2/1_Pooling", tmpdir);
        snprintf(pp, sizeof pp, "%s/config.json", pd);
        mkdir(pd, 0755);
        FILE *f = fopen(pp, "w");
        if (f != NULL) {
            fputs("{\"pooling_mode_cls_token\": true, \"pooling_mode_mean_tokens\": true}", f);
            fclose(f);
        }
        import_refused("pool2", CLF_ERR_FORMAT,
                       "sets pooling_mode_cls_token, pooling_mode_mean_tokens");
        f = fopen(pp, "w");
        if (f != NULL) {
            fputs("{\"pooling_mode_max_tokens\": true, \"pooling_mode_mean_tokens\": false}", f);
            fclose(f);
        }
        import_refused("pool2", CLF_ERR_FORMAT, "sets pooling_mode_max_tokens");
    }
    make_copy("missing", NULL, NULL);
    rewrite_weights("missing", "encoder.layer.1.output.dense.weight", NULL);
    import_refused("missing", CLF_ERR_FORMAT, "encoder.layer.1.output.dense.weight");
    make_copy("shape", NULL, NULL);
    rewrite_weights("shape", NULL, "encoder.layer.0.intermediate.dense.weight");
    import_refused("shape", CLF_ERR_FORMAT, "[64, 32]");
    make_copy("truncated", NULL, NULL);
    char p[640];
    snprintf(p, sizeof p, "%s/truncated/model.safetensors", tmpdir);
    copy_file(HF "/tiny-bert/model.safetensors", p, 100000);
    import_refused("truncated", CLF_ERR_FORMAT, "model.safetensors");
    make_copy("notok", NULL, NULL);
    snprintf(p, sizeof p, "%s/notok/tokenizer.json", tmpdir);
    unlink(p);
    import_refused("notok", CLF_ERR_IO, "tokenizer.json");
    make_copy("vocab", "\"vocab_size\": 600", "\"vocab_size\": 601");
    import_refused("vocab", CLF_ERR_FORMAT, "601");
}

static void test_import_embed(clf_runtime *rt)
{
    char out[640];
    snprintf(out, sizeof out, "%s/tiny.safetensors", tmpdir);
    clf_error err;
    clf_import_report rep;
    tu_ok(clf_import_hf(HF "/tiny-bert", out, &rep, &err), &err, "import");
    TU_CHECK(rep.layers == 2 && rep.dim == 32 && rep.heads == 4 && rep.vocab == 600 &&
                 rep.context == 64 && rep.ignored == 3 && strcmp(rep.pool, "mean") == 0,
             "report: %d layers, dim %d, %d ignored (%s)", rep.layers, rep.dim, rep.ignored,
             rep.ignored_names);
    TU_CHECK(strstr(rep.ignored_names, "pooler.dense.weight") != NULL, "pooler listed");

    clf_json *doc = load_json(HF "/tiny-bert-embed.json");
    const clf_json *sents = clf_json_get(doc, "sentences"), *ids = clf_json_get(doc, "ids");
    const clf_json *emb = clf_json_get(doc, "embeddings");
    size_t n = sents->count, tl = 0;
    char *text = NULL;
    for (size_t i = 0; i < n; i++) {
        text = realloc(text, tl + sents->items[i].string_len + 2);
        memcpy(text + tl, sents->items[i].string, sents->items[i].string_len);
        tl += sents->items[i].string_len;
        text[tl++] = '\n';
    }
    clf_checkpoint *ck = NULL;
    clf_tokenizer *tok = NULL;
    clf_seqdata *ds = NULL;
    clf_model *m = NULL;
    tu_ok(clf_checkpoint_open(out, &ck, &err), &err, "open the import");
    tu_ok(clf_checkpoint_tokenizer_create(ck, &tok, &err), &err, "its tokenizer");
    const clf_model_config *cfg = clf_checkpoint_config(ck);
    TU_CHECK(cfg->head.type == CLF_HEAD_NONE && cfg->embedding.norm == CLF_NORM_LAYERNORM &&
                 cfg->blocks.norm.placement == CLF_NORM_POST,
             "the imported config");
    clf_seq_options so;
    clf_seq_options_default(&so, CLF_MODEL_ENCODER, cfg->context);
    tu_ok(clf_seqdata_from_text(text, tl, "sentences", tok, &so, &ds, &err), &err, "sentences");
    TU_CHECK(clf_seqdata_size(ds) == n, "%zu sentences", clf_seqdata_size(ds));
    for (size_t i = 0; i < n && i < clf_seqdata_size(ds); i++) {
        const int32_t *src;
        int len;
        clf_seqdata_example(ds, i, &src, &len, NULL, NULL, NULL);
        const clf_json *want = &ids->items[i];
        int same = (size_t)len == want->count;
        for (int k = 0; same && k < len; k++)
            same = src[k] == want->items[k].integer;
        TU_CHECK(same, "sentence %zu: [CLS] ids [SEP] as tokenizers (%d ids, want %zu)", i, len,
                 want->count);
    }
    clf_seq_batching bo;
    clf_seqeval_batching(8, 0, &bo); /* all in one padded batch */
    clf_seq_limits sl;
    tu_ok(clf_seqeval_limits(ds, &bo, &sl, &err), &err, "limits");
    const clf_model_limits lim = clf_seqeval_model_limits(&sl);
    tu_ok(clf_checkpoint_model_create(ck, rt, &lim, 0, &m, &err), &err, "model");
    const size_t C = 32;
    float *v = calloc(n * C, sizeof *v);
    tu_ok(clf_seqeval_embed(m, ds, &bo, 1, v, &err), &err, "embed");
    double worst = 1, maxdiff = 0;
    for (size_t i = 0; i < n; i++) {
        const clf_json *e = &emb->items[i];
        double dot = 0, na = 0, nb = 0;
        for (size_t j = 0; j < C; j++) {
            double a = v[i * C + j], b = e->items[j].number;
            dot += a * b;
            na += a * a;
            nb += b * b;
            maxdiff = fmax(maxdiff, fabs(a - b));
        }
        double cos = dot / sqrt(na * nb);
        worst = fmin(worst, cos);
        TU_CHECK(cos >= 0.9999, "sentence %zu: cosine %.7f with the PyTorch reference", i, cos);
    }
    TU_CHECK(maxdiff <= 1e-4, "largest component difference %.3g (tolerance 1e-4)", maxdiff);
    printf("import + embed: %zu sentences, worst cosine %.9f, largest difference %.3g\n", n, worst,
           maxdiff);
    /* no logits and no training for an embedding model */
    TU_CHECK(clf_model_logits_read(m, v, &err) == CLF_ERR_ARG, "no logits without a head");
    clf_model *mt = NULL;
    TU_CHECK(clf_checkpoint_model_create(ck, rt, &lim, CLF_MODEL_TRAIN, &mt, &err) ==
                     CLF_ERR_UNSUPPORTED &&
                 strstr(err.msg, "--init") != NULL,
             "training head none refused: %s", err.msg);
    free(v);
    free(text);
    clf_model_destroy(m);
    clf_seqdata_destroy(ds);
    clf_tokenizer_destroy(tok);
    clf_checkpoint_close(ck);
    clf_json_destroy(doc);
    unlink(out);
}

/* ---- GPT-2 ------------------------------------------------------------------------------ */

/* The reference texts, ids and logits (tiny-gpt2-logits.safetensors). */
typedef struct gpt2_ref {
    clf_st_reader *r;
    int count;
} gpt2_ref;

static gpt2_ref gpt2_ref_open(void)
{
    gpt2_ref g = {NULL, 0};
    clf_error err;
    tu_ok(clf_st_reader_open(HF "/tiny-gpt2-logits.safetensors", &g.r, &err), &err, "reference");
    const char *c = g.r ? clf_st_reader_metadata(g.r, "count") : NULL;
    g.count = c ? atoi(c) : 0;
    return g;
}

static int32_t *ref_ids(gpt2_ref *g, int i, int *T)
{
    char name[32];
    clf_error err;
    snprintf(name, sizeof name, "ids.%d", i);
    const clf_st_tensor_info *t = clf_st_reader_find(g->r, name);
    *T = t ? (int)t->shape[0] : 0;
    int32_t *ids = calloc((size_t)*T + 1, sizeof *ids);
    int64_t shape[1] = {*T};
    tu_ok(clf_st_reader_read(g->r, name, CLF_ST_I32, 1, shape, ids, (size_t)*T * 4, &err), &err,
          name);
    return ids;
}

static void check_encodes(const clf_tokenizer *t, gpt2_ref *g, const char *what)
{
    for (int i = 0; i < g->count; i++) {
        char key[32];
        snprintf(key, sizeof key, "text.%d", i);
        const char *text = clf_st_reader_metadata(g->r, key);
        int T;
        int32_t *want = ref_ids(g, i, &T), *got = NULL;
        size_t n = 0;
        clf_error err;
        tu_ok(clf_tokenizer_encode(t, text, strlen(text), &got, &n, &err), &err, "encode");
        int same = (int)n == T;
        for (int k = 0; same && k < T; k++)
            same = got[k] == want[k];
        TU_CHECK(same, "%s: text %d encodes to the ids of tokenizers (%zu ids, want %d)", what, i,
                 n, T);
        char *back = NULL;
        tu_ok(clf_tokenizer_decode(t, got, n, &back, NULL, &err), &err, "decode");
        TU_CHECK(strcmp(back, text) == 0, "%s: text %d decodes back exactly", what, i);
        free(back);
        free(got);
        free(want);
    }
}

static void test_gpt2_tokenizer(void)
{
    gpt2_ref g = gpt2_ref_open();
    size_t vl, ml, hl;
    char *v = slurp(HF "/tiny-gpt2/vocab.json", &vl), *m = slurp(HF "/tiny-gpt2/merges.txt", &ml);
    char *h = slurp(HF "/tiny-gpt2/tokenizer-hf.json", &hl);
    clf_tokenizer *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    clf_error err;
    tu_ok(clf_tokenizer_from_gpt2(v, vl, m, ml, "vocab.json", "merges.txt", &a, &err), &err,
          "from_gpt2");
    tu_ok(clf_tokenizer_from_hf(h, hl, "tokenizer-hf.json", &b, &err), &err, "from_hf (BPE)");
    TU_CHECK(clf_tokenizer_type_of(a) == CLF_TOKENIZER_BPE && clf_tokenizer_vocab_size(a) == 350,
             "350 ids, got %d", (int)clf_tokenizer_vocab_size(a));
    TU_CHECK(clf_tokenizer_special(a, CLF_SPECIAL_EOS) == 0 &&
                 clf_tokenizer_special(a, CLF_SPECIAL_BOS) == 0 &&
                 clf_tokenizer_special(a, CLF_SPECIAL_PAD) == -1,
             "<|endoftext|> (id 0) is eos and bos; no pad");
    TU_CHECK(clf_tokenizer_special_of(a, 0) >= 0, "id 0 is a special");
    check_encodes(a, &g, "vocab.json + merges.txt");
    check_encodes(b, &g, "tokenizer.json");
    /* clformer's JSON keeps the numbering; GPT-2's files written back read the same */
    char *json = NULL, *v2 = NULL, *m2 = NULL;
    tu_ok(clf_tokenizer_to_json(a, &json, NULL, &err), &err, "to_json");
    tu_ok(clf_tokenizer_from_json(json, strlen(json), &c, &err), &err, "from_json");
    check_encodes(c, &g, "clformer JSON round trip");
    tu_ok(clf_tokenizer_to_gpt2(a, &v2, &m2, &err), &err, "to_gpt2");
    tu_ok(clf_tokenizer_from_gpt2(v2, strlen(v2), m2, strlen(m2), "v2", NULL, &d, &err), &err,
          "from_gpt2 again");
    check_encodes(d, &g, "GPT-2 files round trip");
    /* errors: a merge of pieces not made yet, a character outside GPT-2's 256 */
    clf_tokenizer *x = NULL;
    const char *bad_merges = "#version: 0.2\nzq xw\n";
    TU_CHECK(clf_tokenizer_from_gpt2(v, vl, bad_merges, strlen(bad_merges), "v", "m", &x, &err) ==
                     CLF_ERR_FORMAT &&
                 strstr(err.msg, "no earlier piece") != NULL && strcmp(err.where, "m") == 0,
             "a merge of unknown pieces refused, under the merges' name: %s: %s", err.where,
             err.msg);
    const char *no_merges =
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}, \"pre_tokenizer\": "
        "{\"type\": \"ByteLevel\"}}";
    TU_CHECK(clf_tokenizer_from_hf(no_merges, strlen(no_merges), "t", &x, &err) == CLF_ERR_FORMAT &&
                 strstr(err.msg, "no merges") != NULL,
             "a BPE tokenizer.json without merges refused (found by fuzzing): %s", err.msg);
    const char *bad_char = "#version: 0.2\n\xe2\x82\xac a\n";
    TU_CHECK(clf_tokenizer_from_gpt2(v, vl, bad_char, strlen(bad_char), "v", "m", &x, &err) ==
                     CLF_ERR_FORMAT &&
                 strstr(err.msg, "byte-level") != NULL && strcmp(err.where, "m") == 0,
             "a non-byte character refused, under the merges' name: %s: %s", err.where, err.msg);
    free(json);
    free(v2);
    free(m2);
    clf_tokenizer_destroy(a);
    clf_tokenizer_destroy(b);
    clf_tokenizer_destroy(c);
    clf_tokenizer_destroy(d);
    free(v);
    free(m);
    free(h);
    clf_st_reader_destroy(g.r);
}

/* The imported tiny GPT-2's logits at every position against PyTorch. */
static void test_gpt2_logits(clf_runtime *rt)
{
    char out[640];
    snprintf(out, sizeof out, "%s/gpt2.safetensors", tmpdir);
    clf_error err;
    clf_import_report rep;
    tu_ok(clf_import_hf(HF "/tiny-gpt2", out, &rep, &err), &err, "import gpt2");
    TU_CHECK(strcmp(rep.model_type, "gpt2") == 0 && rep.layers == 2 && rep.vocab == 350 &&
                 rep.context == 64 && rep.ignored == 2,
             "gpt2 report: %s, %d layers, %d ignored (%s)", rep.model_type, rep.layers, rep.ignored,
             rep.ignored_names);
    gpt2_ref g = gpt2_ref_open();
    clf_checkpoint *ck = NULL;
    clf_model *m = NULL;
    tu_ok(clf_checkpoint_open(out, &ck, &err), &err, "open");
    const clf_model_limits lim = {.B = 1};
    tu_ok(clf_checkpoint_model_create(ck, rt, &lim, 0, &m, &err), &err, "model");
    const size_t V = 350;
    double worst = 0;
    for (int i = 0; i < g.count && m != NULL; i++) {
        int T;
        int32_t *ids = ref_ids(&g, i, &T);
        float *got = calloc((size_t)T * V, sizeof *got), *want = calloc((size_t)T * V, 4);
        char name[32];
        snprintf(name, sizeof name, "logits.%d", i);
        int64_t shape[2] = {T, (int64_t)V};
        tu_ok(clf_st_reader_read_f32(g.r, name, 2, shape, want, (size_t)T * V, &err), &err, name);
        tu_ok(clf_model_set_batch(m, clf_batch_decoder(ids, NULL, 1, T), &err), &err, "batch");
        tu_ok(clf_model_forward(m, 0, &err), &err, "forward");
        tu_ok(clf_model_logits_read(m, got, &err), &err, "logits");
        double md = 0;
        for (size_t k = 0; k < (size_t)T * V; k++)
            md = fmax(md, fabs((double)got[k] - (double)want[k]));
        worst = fmax(worst, md);
        TU_CHECK(md <= 2e-4, "text %d: logits of %d positions within 2e-4 of PyTorch (%.3g)", i, T,
                 md);
        free(got);
        free(want);
        free(ids);
    }
    printf("gpt2 import: logits within %.3g of the PyTorch reference\n", worst);
    clf_model_destroy(m);
    clf_checkpoint_close(ck);
    clf_st_reader_destroy(g.r);
    unlink(out);
}

/* Two checkpoints with the same tokenizer, model config (the training
 * settings aside: a Hugging Face config.json has none) and tensors, bit for
 * bit. */
static void same_checkpoints(const char *ck1, const char *ck2, const char *what)
{
    clf_error err;
    clf_checkpoint *a = NULL, *b = NULL;
    tu_ok(clf_checkpoint_open(ck1, &a, &err), &err, "open 1");
    tu_ok(clf_checkpoint_open(ck2, &b, &err), &err, "open 2");
    if (a != NULL && b != NULL) {
        TU_CHECK(strcmp(clf_checkpoint_tokenizer(a), clf_checkpoint_tokenizer(b)) == 0,
                 "%s: the tokenizer comes back identical", what);
        char key[128];
        clf_model_config ca = *clf_checkpoint_config(a), cb = *clf_checkpoint_config(b);
        cb.train = ca.train;
        TU_CHECK(!clf_config_diff(&ca, &cb, key, sizeof key),
                 "%s: the model's config comes back identical (differs in %s)", what, key);
        clf_st_reader *ra = NULL, *rb = NULL;
        tu_ok(clf_st_reader_open(ck1, &ra, &err), &err, "reader 1");
        tu_ok(clf_st_reader_open(ck2, &rb, &err), &err, "reader 2");
        size_t n = clf_st_reader_count(ra), same = 0;
        for (size_t i = 0; i < n; i++) {
            const clf_st_tensor_info *x = clf_st_reader_tensor(ra, i);
            const clf_st_tensor_info *y = clf_st_reader_find(rb, x->name);
            size_t bytes = (size_t)(x->end - x->begin);
            if (y == NULL || (size_t)(y->end - y->begin) != bytes)
                continue;
            unsigned char *p = malloc(bytes), *q = malloc(bytes);
            tu_ok(clf_st_reader_read_raw(ra, x, p, bytes, &err), &err, "raw 1");
            tu_ok(clf_st_reader_read_raw(rb, y, q, bytes, &err), &err, "raw 2");
            same += memcmp(p, q, bytes) == 0;
            free(p);
            free(q);
        }
        TU_CHECK(same == n && n == clf_st_reader_count(rb) && n > 0,
                 "%s: every tensor comes back bit for bit (%zu of %zu)", what, same, n);
        clf_st_reader_destroy(ra);
        clf_st_reader_destroy(rb);
    }
    clf_checkpoint_close(a);
    clf_checkpoint_close(b);
}

/* A clformer GPT with a BPE vocabulary out to GPT-2's layout and back: the
 * same bits, the same tokenizer. */
static void test_gpt2_round_trip(clf_runtime *rt)
{
    static const char *yaml = "model:\n"
                              "  kind: decoder\n"
                              "  vocab: {tokenizer: bpe, size: 300}\n"
                              "  context: 16\n"
                              "  embedding: {dim: 32, dropout: 0.1}\n"
                              "  blocks:\n"
                              "    repeat: 2\n"
                              "    attention: {heads: 4, dropout: 0.1}\n"
                              "    ffn: {hidden: 80, activation: gelu_tanh}\n"
                              "    norm: {eps: 1.0e-5}\n"
                              "    dropout: 0.1\n"
                              "  final_norm: {type: layernorm}\n"
                              "train: {seed: 5}\n";
    clf_error err;
    clf_model_config cfg;
    clf_tokenizer *tok = NULL;
    clf_model *m = NULL;
    tu_ok(clf_config_parse_string(yaml, "gpt", NULL, 0, &cfg, &err), &err, "config");
    size_t tl;
    char *text = slurp("data/tinyshakespeare.txt", &tl);
    clf_bpe_options bo;
    clf_bpe_options_init(&bo);
    bo.vocab_size = 300;
    tu_ok(clf_tokenizer_train_bpe(text, tl < 200000 ? tl : 200000, &bo, &tok, &err), &err, "bpe");
    free(text);
    tu_ok(clf_model_create(rt, &cfg, clf_tokenizer_vocab_size(tok), 1, 0, &m, &err), &err, "model");
    char *tj = NULL, ck1[640], dir[640], ck2[640];
    tu_ok(clf_tokenizer_to_json(tok, &tj, NULL, &err), &err, "tokenizer json");
    snprintf(ck1, sizeof ck1, "%s/gpt.safetensors", tmpdir);
    snprintf(dir, sizeof dir, "%s/gpt-hf", tmpdir);
    snprintf(ck2, sizeof ck2, "%s/gpt-back.safetensors", tmpdir);
    tu_ok(clf_checkpoint_save(ck1, m, &cfg, tj, NULL, 0, &err), &err, "save");
    tu_ok(clf_export_gpt2(ck1, dir, &err), &err, "export gpt2");
    tu_ok(clf_import_hf(dir, ck2, NULL, &err), &err, "import it back");
    same_checkpoints(ck1, ck2, "gpt2");
    /* a model GPT-2 cannot hold is refused, naming why */
    clf_model_config c2 = cfg;
    c2.blocks.norm.placement = CLF_NORM_POST;
    clf_model *m2 = NULL;
    char ck3[640];
    snprintf(ck3, sizeof ck3, "%s/post.safetensors", tmpdir);
    tu_ok(clf_model_create(rt, &c2, clf_tokenizer_vocab_size(tok), 1, 0, &m2, &err), &err, "m2");
    tu_ok(clf_checkpoint_save(ck3, m2, &c2, tj, NULL, 0, &err), &err, "save post");
    snprintf(dir, sizeof dir, "%s/post-hf", tmpdir);
    TU_CHECK(clf_export_gpt2(ck3, dir, &err) == CLF_ERR_UNSUPPORTED &&
                 strstr(err.msg, "pre-norm") != NULL,
             "a post-norm GPT is refused: %s", err.msg);
    clf_model_destroy(m2);
    free(tj);
    clf_model_destroy(m);
    clf_tokenizer_destroy(tok);
}

/* A copy of tiny-<src>, a Llama-layout folder, in tmpdir/name. */
static void llama_copy(const char *src, const char *name, const char *cfg_from, const char *cfg_to)
{
    static const char *const files[] = {"vocab.json", "merges.txt", "model.safetensors"};
    char from[64];
    snprintf(from, sizeof from, "tiny-%s", src);
    copy_folder(from, files, 3, name, cfg_from, cfg_to);
}

/* The Llama layout: tiny random llama (GQA, YaRN), mistral (multi-query,
 * a sliding window) and qwen2 (q/k/v biases, tied, linear scaling)
 * imported; their logits at every position of tiny-gpt2's texts against a
 * float64 PyTorch forward (tiny-llama-logits.safetensors) within 1e-4;
 * export --format llama and import again: the same checkpoint, bit for
 * bit. */
static void test_llama(clf_runtime *rt)
{
    static const struct {
        const char *name, *type;
        int kv, window;
    } M[] = {{"llama", "llama", 2, 0}, {"mistral", "mistral", 1, 8}, {"qwen2", "qwen2", 2, 0}};
    gpt2_ref g = gpt2_ref_open();
    clf_st_reader *ref = NULL;
    clf_error err;
    tu_ok(clf_st_reader_open(HF "/tiny-llama-logits.safetensors", &ref, &err), &err, "reference");
    for (size_t k = 0; k < sizeof M / sizeof M[0] && ref != NULL; k++) {
        char dir[640], out[640], hf[640], back[640];
        snprintf(dir, sizeof dir, "%s/tiny-%s", HF, M[k].name);
        snprintf(out, sizeof out, "%s/%s.safetensors", tmpdir, M[k].name);
        snprintf(hf, sizeof hf, "%s/%s-hf", tmpdir, M[k].name);
        snprintf(back, sizeof back, "%s/%s-back.safetensors", tmpdir, M[k].name);
        clf_import_report rep;
        tu_ok(clf_import_hf(dir, out, &rep, &err), &err, M[k].name);
        TU_CHECK(strcmp(rep.model_type, M[k].type) == 0 && rep.layers == 2 && rep.vocab == 350 &&
                     rep.ignored == 0,
                 "%s report: %s, %d layers, %d ignored (%s)", M[k].name, rep.model_type, rep.layers,
                 rep.ignored, rep.ignored_names);
        clf_checkpoint *ck = NULL;
        clf_model *m = NULL;
        tu_ok(clf_checkpoint_open(out, &ck, &err), &err, "open");
        const clf_model_config *c = ck ? clf_checkpoint_config(ck) : NULL;
        TU_CHECK(c != NULL && clf_config_kv_heads(c) == M[k].kv &&
                     c->blocks.attention.window == M[k].window,
                 "%s: %d key/value heads, window %d", M[k].name, M[k].kv, M[k].window);
        const clf_model_limits lim = {.B = 1};
        tu_ok(clf_checkpoint_model_create(ck, rt, &lim, 0, &m, &err), &err, "model");
        const size_t V = 350;
        for (int i = 0; i < g.count && m != NULL; i++) {
            int T;
            int32_t *ids = ref_ids(&g, i, &T);
            float *got = calloc((size_t)T * V, sizeof *got), *want = calloc((size_t)T * V, 4);
            char name[48];
            snprintf(name, sizeof name, "logits.%s.%d", M[k].name, i);
            int64_t shape[2] = {T, (int64_t)V};
            tu_ok(clf_st_reader_read_f32(ref, name, 2, shape, want, (size_t)T * V, &err), &err,
                  name);
            tu_ok(clf_model_set_batch(m, clf_batch_decoder(ids, NULL, 1, T), &err), &err, "batch");
            tu_ok(clf_model_forward(m, 0, &err), &err, "forward");
            tu_ok(clf_model_logits_read(m, got, &err), &err, "logits");
            double md = 0;
            for (size_t j = 0; j < (size_t)T * V; j++)
                md = fmax(md, fabs((double)got[j] - (double)want[j]));
            TU_CHECK(md <= 1e-4, "%s text %d: logits of %d positions within 1e-4 of PyTorch (%.3g)",
                     M[k].name, i, T, md);
            free(got);
            free(want);
            free(ids);
        }
        if (M[k].window) { /* with a sparse pattern beside the window, no HF form */
            char sp[660], sphf[660];
            snprintf(sp, sizeof sp, "%s/%s-sparse.safetensors", tmpdir, M[k].name);
            snprintf(sphf, sizeof sphf, "%s/%s-sparse-hf", tmpdir, M[k].name);
            clf_model_config scfg = *c;
            tu_ok(clf_config_set(&scfg, "blocks.attention.global=2", &err), &err, "sparse");
            clf_model *ms = NULL;
            tu_ok(clf_model_create(rt, &scfg, (int)V, 1, CLF_MODEL_INFER, &ms, &err), &err,
                  "sparse model");
            tu_ok(clf_checkpoint_save(sp, ms, &scfg, clf_checkpoint_tokenizer(ck), NULL, 0, &err),
                  &err, "save sparse");
            clf_model_destroy(ms);
            TU_CHECK(clf_export_llama(sp, sphf, &err) == CLF_ERR_UNSUPPORTED &&
                         strstr(err.msg, "sparse attention") != NULL,
                     "%s with global keys is refused by the Llama export: %s", M[k].name, err.msg);
        }
        clf_model_destroy(m);
        clf_checkpoint_close(ck);
        tu_ok(clf_export_llama(out, hf, &err), &err, "export llama");
        tu_ok(clf_import_hf(hf, back, &rep, &err), &err, "import it back");
        same_checkpoints(out, back, M[k].name);
        TU_CHECK(strcmp(rep.model_type, M[k].window ? "mistral" : "llama") == 0,
                 "%s goes out as model_type %s", M[k].name, rep.model_type);
    }
    clf_st_reader_destroy(ref);
    clf_st_reader_destroy(g.r);

    /* what the layout cannot hold is refused, naming the field */
    llama_copy("llama", "l-dynamic", "\"yarn\"", "\"dynamic\"");
    import_refused("l-dynamic", CLF_ERR_FORMAT, "rope_scaling type \"dynamic\" is not supported");
    llama_copy("llama", "l-gelu", "\"silu\"", "\"gelu\"");
    import_refused("l-gelu", CLF_ERR_FORMAT, "hidden_act \"gelu\" is not supported");
    llama_copy("llama", "l-headdim", "\"head_dim\": 8", "\"head_dim\": 16");
    import_refused("l-headdim", CLF_ERR_FORMAT, "head_dim 16 is not hidden_size 32");
    llama_copy("llama", "l-kv", "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3");
    import_refused("l-kv", CLF_ERR_CONFIG, "blocks.attention.kv_heads");
    llama_copy("llama", "l-tied", "\"tie_word_embeddings\": false",
               "\"tie_word_embeddings\": true");
    import_refused("l-tied", CLF_ERR_FORMAT, "lm_head.weight differs from embed_tokens.weight");
    llama_copy("llama", "l-bias", "\"attention_bias\": false", "\"attention_bias\": true");
    import_refused("l-bias", CLF_ERR_FORMAT, "self_attn.q_proj.bias");
    llama_copy("qwen2", "q-window", "\"use_sliding_window\": false",
               "\"use_sliding_window\": true");
    import_refused("q-window", CLF_ERR_FORMAT, "use_sliding_window");
    /* and the export refuses what has no Llama form */
    char ck[640], dir[640];
    snprintf(ck, sizeof ck, "%s/gpt.safetensors", tmpdir); /* test_gpt2_round_trip's GPT-2 */
    snprintf(dir, sizeof dir, "%s/gpt-llama", tmpdir);
    TU_CHECK(clf_export_llama(ck, dir, &err) == CLF_ERR_UNSUPPORTED &&
                 strstr(err.msg, "positional.type must be rope") != NULL,
             "a GPT-2 is refused by the Llama export: %s", err.msg);
}

static void rm_tree(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

int main(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/clf_import_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_unicode();
    test_wordpiece();
    test_hf_errors();
    test_import_errors();
    test_gpt2_tokenizer();
    clf_runtime *rt = tu_runtime();
    if (rt != NULL) {
        test_import_embed(rt);
        test_gpt2_logits(rt);
        test_gpt2_round_trip(rt);
        test_llama(rt);
    }
    clf_runtime_destroy(rt);
    rm_tree(tmpdir);
    return tu_finish();
}
