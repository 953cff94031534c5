/*
 * import.c - see import.h: a Hugging Face BERT folder into a clformer
 * checkpoint.
 *
 * Design: config.json becomes a clf_model_config (validated like any model
 * file), tokenizer.json a WordPiece clf_tokenizer, and each clformer
 * parameter is assembled in host memory from the file's tensors (read as
 * float32 with their shapes checked by the safetensors reader); then
 * clf_checkpoint_write_params writes the checkpoint. Every tensor of the
 * file is either used or listed as ignored, so nothing is dropped silently.
 */
#include "model/train/import.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/config.h"
#include "model/io/fileio.h"
#include "model/io/json.h"
#include "model/io/safetensors.h"
#include "model/text/tokenizer.h"
#include "model/train/checkpoint.h"
#include "model/train/import_internal.h"

void imp_free(imp *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->bufs[i]);
        free((char *)s->t[i].name);
    }
    free(s->bufs);
    free(s->t);
    free(s->used);
    clf_st_reader_destroy(s->r);
}

/* A new output tensor of rows x cols (cols 0: 1-D), zeroed. */
float *imp_out_tensor(imp *s, const char *name, int64_t rows, int64_t cols, clf_error *err)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        clf_checkpoint_tensor *t = realloc(s->t, (size_t)cap * sizeof *t);
        if (t != NULL)
            s->t = t;
        float **b = realloc(s->bufs, (size_t)cap * sizeof *b);
        if (b != NULL)
            s->bufs = b;
        if (t == NULL || b == NULL) {
            clf_error_set(err, CLF_ERR_MEMORY, "out of host memory importing");
            return NULL;
        }
        s->cap = cap;
    }
    size_t numel = (size_t)rows * (size_t)(cols > 0 ? cols : 1);
    float *data = calloc(numel ? numel : 1, sizeof *data);
    char *nm = strdup(name);
    if (data == NULL || nm == NULL) {
        free(data);
        free(nm);
        clf_error_set(err, CLF_ERR_MEMORY, "out of host memory importing %s", name);
        return NULL;
    }
    clf_checkpoint_tensor *t = &s->t[s->n];
    t->name = nm;
    t->ndim = cols > 0 ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols > 0 ? cols : 1;
    t->data = data;
    s->bufs[s->n++] = data;
    return data;
}

/* Read the file's tensor <prefix><name> (or <prefix><alt>) of shape rows x
 * cols (cols 0: 1-D) into dst; mark it used. */
clf_status imp_read_in(imp *s, const char *name, const char *alt, int64_t rows, int64_t cols,
                       float *dst, clf_error *err)
{
    char full[256];
    snprintf(full, sizeof full, "%s%s", s->prefix, name);
    const clf_st_tensor_info *ti = clf_st_reader_find(s->r, full);
    if (ti == NULL && alt != NULL) {
        snprintf(full, sizeof full, "%s%s", s->prefix, alt);
        ti = clf_st_reader_find(s->r, full);
    }
    if (ti == NULL) {
        char shp[64];
        int64_t sh[2] = {rows, cols};
        clf_st_shape_format(cols > 0 ? 2 : 1, sh, shp, sizeof shp);
        return clf_error_set(err, CLF_ERR_FORMAT, "%s: tensor \"%s%s\" %s is missing", s->path,
                             s->prefix, name, shp);
    }
    for (size_t i = 0; i < clf_st_reader_count(s->r); i++)
        if (clf_st_reader_tensor(s->r, i) == ti)
            s->used[i] = 1;
    int64_t shape[2] = {rows, cols};
    size_t numel = (size_t)rows * (size_t)(cols > 0 ? cols : 1);
    clf_status st = clf_st_reader_read_f32(s->r, full, cols > 0 ? 2 : 1, shape, dst, numel, err);
    if (st != CLF_OK)
        clf_error_prefix(err, "%s", s->path);
    return st;
}

/* One clformer tensor straight from one file tensor. */
clf_status imp_copy1(imp *s, const char *to, const char *from, const char *alt, int64_t rows,
                     int64_t cols, clf_error *err)
{
    float *d = imp_out_tensor(s, to, rows, cols, err);
    return d == NULL ? CLF_ERR_MEMORY : imp_read_in(s, from, alt, rows, cols, d, err);
}

/* ---- config.json ------------------------------------------------------------- */

clf_status imp_read_json(const char *path, clf_json **doc, clf_error *err)
{
    char *text = NULL;
    size_t len = 0;
    clf_status st = clf_file_read_all(path, MAX_JSON, &text, &len, err);
    if (st == CLF_OK) {
        clf_json_options jo = {path, 0, 0};
        st = clf_json_parse(text, len, &jo, doc, err);
    }
    free(text);
    return st;
}

clf_status imp_get_int(const clf_json *doc, const char *path, const char *key, int lo, int hi,
                       int *out, clf_error *err)
{
    const clf_json *v = clf_json_get(doc, key);
    if (v == NULL || !v->is_int || v->integer < lo || v->integer > hi)
        return clf_error_set(err, CLF_ERR_FORMAT, "%s: \"%s\" must be an integer in [%d, %d]", path,
                             key, lo, hi);
    *out = (int)v->integer;
    return CLF_OK;
}

double imp_get_num(const clf_json *doc, const char *key, double dflt)
{
    const clf_json *v = clf_json_get(doc, key);
    return v != NULL && v->type == CLF_JSON_NUMBER ? v->number : dflt;
}

/* Every key imp_get_num and imp_get_str are asked for, with its type. */
static const struct {
    const char *key;
    clf_json_type type;
} typed_keys[] = {
    {"model_type", CLF_JSON_STRING},
    {"hidden_act", CLF_JSON_STRING},
    {"activation_function", CLF_JSON_STRING},
    {"position_embedding_type", CLF_JSON_STRING},
    {"rope_type", CLF_JSON_STRING},
    {"type", CLF_JSON_STRING},
    {"layer_norm_eps", CLF_JSON_NUMBER},
    {"layer_norm_epsilon", CLF_JSON_NUMBER},
    {"rms_norm_eps", CLF_JSON_NUMBER},
    {"rope_theta", CLF_JSON_NUMBER},
    {"attention_dropout", CLF_JSON_NUMBER},
    {"attention_probs_dropout_prob", CLF_JSON_NUMBER},
    {"hidden_dropout_prob", CLF_JSON_NUMBER},
    {"attn_pdrop", CLF_JSON_NUMBER},
    {"embd_pdrop", CLF_JSON_NUMBER},
    {"resid_pdrop", CLF_JSON_NUMBER},
    {"factor", CLF_JSON_NUMBER},
    {"beta_fast", CLF_JSON_NUMBER},
    {"beta_slow", CLF_JSON_NUMBER},
};

clf_status imp_check_types(const clf_json *doc, const char *path, clf_error *err)
{
    for (size_t i = 0; i < sizeof typed_keys / sizeof typed_keys[0]; i++) {
        const clf_json *v = clf_json_get(doc, typed_keys[i].key);
        if (v != NULL && v->type != CLF_JSON_NULL && v->type != typed_keys[i].type)
            return clf_error_set(err, CLF_ERR_FORMAT, "%s: byte %zu: \"%s\" must be a %s, not a %s",
                                 path, v->offset, typed_keys[i].key,
                                 clf_json_type_name(typed_keys[i].type),
                                 clf_json_type_name(v->type));
    }
    return CLF_OK;
}

const char *imp_get_str(const clf_json *doc, const char *key)
{
    const clf_json *v = clf_json_get(doc, key);
    return v != NULL && v->type == CLF_JSON_STRING ? v->string : NULL;
}

/* The pooling of a sentence-transformers folder: "mean" unless
 * 1_Pooling/config.json asks for the [CLS] token. */
static clf_status read_pool(const char *dir, int *mean, clf_error *err)
{
    char path[4096];
    *mean = 1;
    snprintf(path, sizeof path, "%s/1_Pooling/config.json", dir);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return CLF_OK;
    fclose(f);
    clf_json *doc = NULL;
    clf_status st = imp_read_json(path, &doc, err);
    if (st != CLF_OK)
        return st;
    /* sentence-transformers concatenates every pooling set: exactly one,
     * mean or [CLS], is what clformer computes */
    static const char *const modes[] = {
        "pooling_mode_cls_token",           "pooling_mode_mean_tokens",
        "pooling_mode_max_tokens",          "pooling_mode_mean_sqrt_len_tokens",
        "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"};
    char set[256] = "";
    int n_set = 0, which = -1;
    for (int i = 0; i < 6 && st == CLF_OK; i++) {
        const clf_json *v = clf_json_get(doc, modes[i]);
        if (v == NULL || v->type == CLF_JSON_NULL)
            continue;
        if (v->type != CLF_JSON_BOOL)
            st = clf_error_set(err, CLF_ERR_FORMAT, "%s: byte %zu: \"%s\" must be true or false",
                               path, v->offset, modes[i]);
        else if (v->boolean) {
            snprintf(set + strlen(set), sizeof set - strlen(set), "%s%s", n_set ? ", " : "",
                     modes[i]);
            n_set++;
            which = i;
        }
    }
    if (st == CLF_OK && (n_set != 1 || which > 1))
        st = clf_error_set(err, CLF_ERR_FORMAT,
                           "%s: sets %s; clformer pools by exactly one of pooling_mode_mean_tokens "
                           "and pooling_mode_cls_token (sentence-transformers would concatenate "
                           "several; max, sqrt-length, weighted and last-token pooling are not "
                           "supported)",
                           path, n_set ? set : "no pooling mode");
    if (st == CLF_OK)
        *mean = which == 1;
    clf_json_destroy(doc);
    return st;
}

static clf_status bert_config(const clf_json *doc, const char *path, clf_model_config *cfg,
                              clf_error *err)
{
    int L = 0, C = 0, NH = 0, H = 0, P = 0, V = 0;
    clf_status st;
    const char *pos = imp_get_str(doc, "position_embedding_type");
    const char *act = imp_get_str(doc, "hidden_act");
    if ((st = imp_get_int(doc, path, "num_hidden_layers", 1, 1024, &L, err)) != CLF_OK ||
        (st = imp_get_int(doc, path, "hidden_size", 1, 65536, &C, err)) != CLF_OK ||
        (st = imp_get_int(doc, path, "num_attention_heads", 1, 4096, &NH, err)) != CLF_OK ||
        (st = imp_get_int(doc, path, "intermediate_size", 1, 1048576, &H, err)) != CLF_OK ||
        (st = imp_get_int(doc, path, "max_position_embeddings", 1, 1048576, &P, err)) != CLF_OK ||
        (st = imp_get_int(doc, path, "vocab_size", 1, 16777216, &V, err)) != CLF_OK)
        return st;
    if (pos != NULL && strcmp(pos, "absolute") != 0)
        return clf_error_set(err, CLF_ERR_FORMAT,
                             "%s: position_embedding_type \"%s\" is not supported (absolute)", path,
                             pos);
    clf_activation a;
    if (act == NULL || strcmp(act, "gelu") == 0)
        a = CLF_FFN_GELU;
    else if (strcmp(act, "gelu_new") == 0 || strcmp(act, "gelu_pytorch_tanh") == 0)
        a = CLF_FFN_GELU_TANH;
    else if (strcmp(act, "relu") == 0)
        a = CLF_FFN_RELU;
    else
        return clf_error_set(err, CLF_ERR_FORMAT,
                             "%s: hidden_act \"%s\" is not supported (gelu, gelu_new, relu)", path,
                             act);
    clf_config_defaults(cfg);
    cfg->kind = CLF_MODEL_ENCODER;
    cfg->vocab.tokenizer = CLF_TOKENIZER_WORDPIECE;
    cfg->vocab.size = V;
    cfg->context = P;
    cfg->embedding.dim = C;
    cfg->embedding.scale = 0;
    cfg->embedding.dropout = imp_get_num(doc, "hidden_dropout_prob", 0.1);
    cfg->embedding.norm = CLF_NORM_LAYERNORM;
    cfg->positional.type = CLF_POS_LEARNED;
    cfg->blocks.repeat = L;
    cfg->blocks.attention.heads = NH;
    cfg->blocks.attention.causal = 0;
    cfg->blocks.attention.dropout = imp_get_num(doc, "attention_probs_dropout_prob", 0.1);
    cfg->blocks.attention.bias = 1;
    cfg->blocks.ffn.hidden = H;
    cfg->blocks.ffn.activation = a;
    cfg->blocks.ffn.bias = 1;
    cfg->blocks.ffn.dropout = 0;
    cfg->blocks.dropout = imp_get_num(doc, "hidden_dropout_prob", 0.1);
    cfg->blocks.norm.type = CLF_NORM_LAYERNORM;
    cfg->blocks.norm.placement = CLF_NORM_POST;
    cfg->blocks.norm.eps = imp_get_num(doc, "layer_norm_eps", 1e-12);
    cfg->blocks.norm.bias = 1;
    cfg->final_norm.type = CLF_NORM_NONE;
    cfg->head.type = CLF_HEAD_NONE;
    cfg->head.tie_embedding = 0;
    cfg->head.pool = CLF_POOL_MEAN;
    clf_config_resolve(cfg);
    if ((st = clf_config_validate(cfg, err)) != CLF_OK)
        clf_error_prefix(err, "%s: the model it describes", path);
    return st;
}

/* ---- the tensors ---------------------------------------------------------------- */

static clf_status bert_tensors(imp *s, const clf_model_config *cfg, clf_error *err)
{
    const int64_t C = cfg->embedding.dim, V = cfg->vocab.size, P = cfg->context;
    const int64_t H = cfg->blocks.ffn.hidden;
    char to[128], a[128], b[128];
    clf_status st;
    /* "bert." prefix (a BertFor... checkpoint) or none (BertModel) */
    s->prefix[0] = '\0';
    if (clf_st_reader_find(s->r, "embeddings.word_embeddings.weight") == NULL &&
        clf_st_reader_find(s->r, "bert.embeddings.word_embeddings.weight") != NULL)
        snprintf(s->prefix, sizeof s->prefix, "bert.");
    if ((st = imp_copy1(s, "wte", "embeddings.word_embeddings.weight", NULL, V, C, err)) != CLF_OK)
        return st;
    /* positions + token type 0 */
    float *wpe = imp_out_tensor(s, "wpe", P, C, err);
    if (wpe == NULL)
        return CLF_ERR_MEMORY;
    if ((st = imp_read_in(s, "embeddings.position_embeddings.weight", NULL, P, C, wpe, err)) !=
        CLF_OK)
        return st;
    char tt[128];
    snprintf(tt, sizeof tt, "%sembeddings.token_type_embeddings.weight", s->prefix);
    const clf_st_tensor_info *ti = clf_st_reader_find(s->r, tt);
    if (ti != NULL) {
        if (ti->ndim != 2 || ti->shape[1] != C || ti->shape[0] < 1 || ti->shape[0] > 1024)
            return clf_error_set(err, CLF_ERR_FORMAT,
                                 "%s: tensor \"%s\" must be [types, %lld] with 1 to 1024 types",
                                 s->path, tt, (long long)C);
        float *types = malloc((size_t)(ti->shape[0] * C) * sizeof *types);
        if (types == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory importing");
        st = imp_read_in(s, "embeddings.token_type_embeddings.weight", NULL, ti->shape[0], C, types,
                         err);
        for (int64_t p = 0; p < P && st == CLF_OK; p++)
            for (int64_t j = 0; j < C; j++)
                wpe[p * C + j] += types[j];
        free(types);
        if (st != CLF_OK)
            return st;
    }
    if ((st = imp_copy1(s, "ln_emb.weight", "embeddings.LayerNorm.weight",
                        "embeddings.LayerNorm.gamma", C, 0, err)) != CLF_OK ||
        (st = imp_copy1(s, "ln_emb.bias", "embeddings.LayerNorm.bias", "embeddings.LayerNorm.beta",
                        C, 0, err)) != CLF_OK)
        return st;
    for (int l = 0; l < cfg->blocks.repeat; l++) {
        static const char *const qkv[3] = {"query", "key", "value"};
        snprintf(to, sizeof to, "blocks.%d.attn.qkv.weight", l);
        float *w = imp_out_tensor(s, to, 3 * C, C, err);
        if (w == NULL)
            return CLF_ERR_MEMORY;
        for (int i = 0; i < 3; i++) {
            snprintf(a, sizeof a, "encoder.layer.%d.attention.self.%s.weight", l, qkv[i]);
            if ((st = imp_read_in(s, a, NULL, C, C, w + (size_t)i * (size_t)(C * C), err)) !=
                CLF_OK)
                return st;
        }
        snprintf(to, sizeof to, "blocks.%d.attn.qkv.bias", l);
        float *bq = imp_out_tensor(s, to, 3 * C, 0, err);
        if (bq == NULL)
            return CLF_ERR_MEMORY;
        for (int i = 0; i < 3; i++) {
            snprintf(a, sizeof a, "encoder.layer.%d.attention.self.%s.bias", l, qkv[i]);
            if ((st = imp_read_in(s, a, NULL, C, 0, bq + (size_t)i * (size_t)C, err)) != CLF_OK)
                return st;
        }
        static const struct {
            const char *to, *from;
            int out_c; /* rows: 0 C, 1 H */
            int in_c;  /* cols: 0 C, 1 H, -1 1-D */
        } map[] = {
            {"attn.proj.weight", "attention.output.dense.weight", 0, 0},
            {"attn.proj.bias", "attention.output.dense.bias", 0, -1},
            {"ln1.weight", "attention.output.LayerNorm.weight", 0, -1},
            {"ln1.bias", "attention.output.LayerNorm.bias", 0, -1},
            {"ffn.fc.weight", "intermediate.dense.weight", 1, 0},
            {"ffn.fc.bias", "intermediate.dense.bias", 1, -1},
            {"ffn.proj.weight", "output.dense.weight", 0, 1},
            {"ffn.proj.bias", "output.dense.bias", 0, -1},
            {"ln2.weight", "output.LayerNorm.weight", 0, -1},
            {"ln2.bias", "output.LayerNorm.bias", 0, -1},
        };
        for (size_t k = 0; k < sizeof map / sizeof map[0]; k++) {
            snprintf(to, sizeof to, "blocks.%d.%s", l, map[k].to);
            snprintf(a, sizeof a, "encoder.layer.%d.%s", l, map[k].from);
            /* old checkpoints name LayerNorm parameters gamma and beta */
            snprintf(b, sizeof b, "%s", a);
            char *dot = strrchr(b, '.');
            if (strstr(a, "LayerNorm") != NULL && dot != NULL)
                snprintf(dot + 1, sizeof b - (size_t)(dot + 1 - b), "%s",
                         strcmp(dot + 1, "weight") == 0 ? "gamma" : "beta");
            int64_t rows = map[k].out_c ? H : C;
            int64_t cols = map[k].in_c < 0 ? 0 : map[k].in_c ? H : C;
            if ((st = imp_copy1(s, to, a, b, rows, cols, err)) != CLF_OK)
                return st;
        }
    }
    return CLF_OK;
}

/* ---- GPT-2 ------------------------------------------------------------------------- */

/* A GPT-2 block's tensors: clformer's name, GPT-2's (after "h.<l>."),
 * whether it is a Conv1D weight stored [in, out], and clformer's shape in
 * units of dims[] = {C, H, -, 3C} (cols -1: 1-D). Import and export both
 * walk this table. */
static const struct gpt2_name {
    const char *ours, *theirs;
    int conv, rows, cols;
} gpt2_block[] = {
    {"ln1.weight", "ln_1.weight", 0, 0, -1},
    {"ln1.bias", "ln_1.bias", 0, 0, -1},
    {"attn.qkv.weight", "attn.c_attn.weight", 1, 3, 0},
    {"attn.qkv.bias", "attn.c_attn.bias", 0, 3, -1},
    {"attn.proj.weight", "attn.c_proj.weight", 1, 0, 0},
    {"attn.proj.bias", "attn.c_proj.bias", 0, 0, -1},
    {"ln2.weight", "ln_2.weight", 0, 0, -1},
    {"ln2.bias", "ln_2.bias", 0, 0, -1},
    {"ffn.fc.weight", "mlp.c_fc.weight", 1, 1, 0},
    {"ffn.fc.bias", "mlp.c_fc.bias", 0, 1, -1},
    {"ffn.proj.weight", "mlp.c_proj.weight", 1, 0, 1},
    {"ffn.proj.bias", "mlp.c_proj.bias", 0, 0, -1},
};
#define GPT2_BLOCK_N (sizeof gpt2_block / sizeof gpt2_block[0])

static clf_status gpt2_config(const clf_json *doc, const char *path, clf_model_config *cfg,
                              clf_error *err)
{
    int L = 0, C = 0, NH = 0, P = 0, V = 0, H = 0;
    clf_status st;
    const char *act = imp_get_str(doc, "activation_function");
    const clf_json *inner = clf_json_get(doc, "n_inner");
    const char *pos_key = clf_json_get(doc, "n_positions") != NULL ? "n_positions" : "n_ctx";
    if ((st = imp_get_int(doc, path, "n_layer", 1, 1024, &L, err)) != CLF_OK ||
        (st = imp_get_int(doc, path, "n_embd", 1, 65536, &C, err)) != CLF_OK ||
        (st = imp_get_int(doc, path, "n_head", 1, 4096, &NH, err)) != CLF_OK ||
        (st = imp_get_int(doc, path, pos_key, 1, 1048576, &P, err)) != CLF_OK ||
        (st = imp_get_int(doc, path, "vocab_size", 1, 16777216, &V, err)) != CLF_OK)
        return st;
    if (inner != NULL && inner->type != CLF_JSON_NULL) {
        if ((st = imp_get_int(doc, path, "n_inner", 1, 1048576, &H, err)) != CLF_OK)
            return st;
    } else {
        H = 4 * C;
    }
    static const char *const unsupported[] = {"scale_attn_by_inverse_layer_idx",
                                              "reorder_and_upcast_attn", "add_cross_attention"};
    for (int i = 0; i < 3; i++) {
        const clf_json *b = clf_json_get(doc, unsupported[i]);
        if (b != NULL && b->type == CLF_JSON_BOOL && b->boolean)
            return clf_error_set(err, CLF_ERR_FORMAT, "%s: \"%s\": true is not supported", path,
                                 unsupported[i]);
    }
    const clf_json *sc = clf_json_get(doc, "scale_attn_weights");
    if (sc != NULL && sc->type == CLF_JSON_BOOL && !sc->boolean)
        return clf_error_set(err, CLF_ERR_FORMAT,
                             "%s: \"scale_attn_weights\": false is not supported", path);
    clf_activation a;
    if (act == NULL || strcmp(act, "gelu_new") == 0 || strcmp(act, "gelu_pytorch_tanh") == 0)
        a = CLF_FFN_GELU_TANH;
    else if (strcmp(act, "gelu") == 0)
        a = CLF_FFN_GELU;
    else if (strcmp(act, "relu") == 0)
        a = CLF_FFN_RELU;
    else
        return clf_error_set(err, CLF_ERR_FORMAT,
                             "%s: activation_function \"%s\" is not supported (gelu_new, gelu, "
                             "relu)",
                             path, act);
    clf_config_defaults(cfg);
    cfg->kind = CLF_MODEL_DECODER;
    cfg->vocab.tokenizer = CLF_TOKENIZER_BPE;
    cfg->vocab.size = V;
    cfg->context = P;
    cfg->embedding.dim = C;
    cfg->embedding.scale = 0;
    cfg->embedding.dropout = imp_get_num(doc, "embd_pdrop", 0.1);
    cfg->embedding.norm = CLF_NORM_NONE;
    cfg->positional.type = CLF_POS_LEARNED;
    cfg->blocks.repeat = L;
    cfg->blocks.attention.heads = NH;
    cfg->blocks.attention.causal = 1;
    cfg->blocks.attention.dropout = imp_get_num(doc, "attn_pdrop", 0.1);
    cfg->blocks.attention.bias = 1;
    cfg->blocks.ffn.hidden = H;
    cfg->blocks.ffn.activation = a;
    cfg->blocks.ffn.bias = 1;
    cfg->blocks.ffn.dropout = 0;
    cfg->blocks.dropout = imp_get_num(doc, "resid_pdrop", 0.1);
    cfg->blocks.norm.type = CLF_NORM_LAYERNORM;
    cfg->blocks.norm.placement = CLF_NORM_PRE;
    cfg->blocks.norm.eps = imp_get_num(doc, "layer_norm_epsilon", 1e-5);
    cfg->blocks.norm.bias = 1;
    cfg->final_norm.type = CLF_NORM_LAYERNORM;
    cfg->head.type = CLF_HEAD_LM;
    cfg->head.tie_embedding = 1;
    clf_config_resolve(cfg);
    if ((st = clf_config_validate(cfg, err)) != CLF_OK)
        clf_error_prefix(err, "%s: the model it describes", path);
    return st;
}

/* A Conv1D weight [in, out] of the file as clformer's [out, in]. */
static clf_status read_t(imp *s, const char *to, const char *from, int64_t in, int64_t out,
                         clf_error *err)
{
    float *d = imp_out_tensor(s, to, out, in, err);
    float *tmp = d != NULL ? malloc((size_t)(in * out) * sizeof *tmp) : NULL;
    if (tmp == NULL)
        return d == NULL ? CLF_ERR_MEMORY
                         : clf_error_set(err, CLF_ERR_MEMORY, "out of host memory importing");
    clf_status st = imp_read_in(s, from, NULL, in, out, tmp, err);
    for (int64_t i = 0; st == CLF_OK && i < in; i++)
        for (int64_t o = 0; o < out; o++)
            d[o * in + i] = tmp[i * out + o];
    free(tmp);
    return st;
}

static clf_status gpt2_tensors(imp *s, const clf_model_config *cfg, clf_error *err)
{
    const int64_t C = cfg->embedding.dim, V = cfg->vocab.size, P = cfg->context;
    const int64_t H = cfg->blocks.ffn.hidden;
    char to[128], a[128];
    clf_status st;
    s->prefix[0] = '\0';
    if (clf_st_reader_find(s->r, "wte.weight") == NULL &&
        clf_st_reader_find(s->r, "transformer.wte.weight") != NULL)
        snprintf(s->prefix, sizeof s->prefix, "transformer.");
    if ((st = imp_copy1(s, "wte", "wte.weight", NULL, V, C, err)) != CLF_OK ||
        (st = imp_copy1(s, "wpe", "wpe.weight", NULL, P, C, err)) != CLF_OK)
        return st;
    for (int l = 0; l < cfg->blocks.repeat; l++) {
        for (size_t k = 0; k < GPT2_BLOCK_N; k++) {
            const struct gpt2_name *g = &gpt2_block[k];
            const int64_t dims[4] = {C, H, 0, 3 * C};
            const int64_t rows = dims[g->rows];
            const int64_t cols = g->cols < 0 ? 0 : dims[g->cols];
            snprintf(to, sizeof to, "blocks.%d.%s", l, g->ours);
            snprintf(a, sizeof a, "h.%d.%s", l, g->theirs);
            st = g->conv ? read_t(s, to, a, cols, rows, err)
                         : imp_copy1(s, to, a, NULL, rows, cols, err);
            if (st != CLF_OK)
                return st;
        }
    }
    if ((st = imp_copy1(s, "ln_f.weight", "ln_f.weight", NULL, C, 0, err)) != CLF_OK ||
        (st = imp_copy1(s, "ln_f.bias", "ln_f.bias", NULL, C, 0, err)) != CLF_OK)
        return st;
    /* an lm_head must be the token embedding (GPT-2 ties them) */
    return imp_tied_head(s, V, C, "wte.weight", err);
}

clf_status imp_tied_head(imp *s, int64_t V, int64_t C, const char *wte, clf_error *err)
{
    const clf_st_tensor_info *lm = clf_st_reader_find(s->r, "lm_head.weight");
    if (lm == NULL)
        return CLF_OK;
    size_t n = (size_t)(V * C);
    float *x = malloc(n * sizeof *x);
    if (x == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory importing");
    int64_t shape[2] = {V, C};
    clf_status st = clf_st_reader_read_f32(s->r, "lm_head.weight", 2, shape, x, n, err);
    if (st == CLF_OK && memcmp(x, s->t[0].data, n * sizeof *x) != 0)
        st = clf_error_set(err, CLF_ERR_FORMAT,
                           "%s: lm_head.weight differs from %s, but the model ties them", s->path,
                           wte);
    for (size_t i = 0; st == CLF_OK && i < clf_st_reader_count(s->r); i++)
        if (clf_st_reader_tensor(s->r, i) == lm)
            s->used[i] = 1;
    free(x);
    return st;
}

/* The tokenizer of a GPT-2 folder: tokenizer.json, else vocab.json + merges.txt. */
clf_status imp_bpe_tokenizer(const char *dir, clf_tokenizer **tok, clf_error *err)
{
    char path[4096], mpath[4096];
    char *a = NULL, *b = NULL;
    size_t al = 0, bl = 0;
    clf_status st;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "rb");
    if (f != NULL) {
        fclose(f);
        if ((st = clf_file_read_all(path, MAX_JSON, &a, &al, err)) == CLF_OK)
            st = clf_tokenizer_from_hf(a, al, path, tok, err);
        free(a);
        return st;
    }
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    snprintf(mpath, sizeof mpath, "%s/merges.txt", dir);
    if ((st = clf_file_read_all(path, MAX_JSON, &a, &al, err)) == CLF_OK &&
        (st = clf_file_read_all(mpath, MAX_JSON, &b, &bl, err)) == CLF_OK)
        st = clf_tokenizer_from_gpt2(a, al, b, bl, path, mpath, tok, err);
    free(a);
    free(b);
    return st;
}

clf_status clf_import_hf(const char *dir, const char *out_path, clf_import_report *rep,
                         clf_error *err)
{
    char path[4096];
    clf_json *doc = NULL;
    clf_tokenizer *tok = NULL;
    char *tok_text = NULL, *tok_json = NULL;
    size_t tok_len = 0;
    imp s;
    clf_model_config cfg;
    clf_import_report r;
    memset(&s, 0, sizeof s);
    memset(&r, 0, sizeof r);
    int mean = 1;
    snprintf(path, sizeof path, "%s/config.json", dir);
    clf_status st = imp_read_json(path, &doc, err);
    if (st == CLF_OK)
        st = imp_check_types(doc, path, err);
    if (st != CLF_OK)
        goto done;
    const char *mt = imp_get_str(doc, "model_type");
    const int llama = mt != NULL && (strcmp(mt, "llama") == 0 || strcmp(mt, "mistral") == 0 ||
                                     strcmp(mt, "qwen2") == 0);
    const int gpt2 = mt != NULL && strcmp(mt, "gpt2") == 0, bpe = gpt2 || llama;
    if (mt == NULL || (strcmp(mt, "bert") != 0 && !bpe)) {
        st = clf_error_set(err, CLF_ERR_FORMAT,
                           "%s: model_type \"%s\" is not supported (clformer imports \"bert\": "
                           "BERT, MiniLM and the sentence-transformers models on them, "
                           "\"gpt2\", and the Llama layout: \"llama\", \"mistral\", \"qwen2\")",
                           path, mt ? mt : "(none)");
        goto done;
    }
    snprintf(r.model_type, sizeof r.model_type, "%s", mt);
    if (gpt2 || llama) {
        if ((st = (gpt2 ? gpt2_config(doc, path, &cfg, err)
                        : imp_llama_config(doc, path, &cfg, err))) != CLF_OK)
            goto done;
    } else {
        if ((st = bert_config(doc, path, &cfg, err)) != CLF_OK ||
            (st = read_pool(dir, &mean, err)) != CLF_OK)
            goto done;
        cfg.head.pool = mean ? CLF_POOL_MEAN : CLF_POOL_CLS;
    }
    /* the tokenizer */
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (bpe) {
        if ((st = imp_bpe_tokenizer(dir, &tok, err)) != CLF_OK)
            goto done;
    } else if ((st = clf_file_read_all(path, MAX_JSON, &tok_text, &tok_len, err)) != CLF_OK ||
               (st = clf_tokenizer_from_hf(tok_text, tok_len, path, &tok, err)) != CLF_OK) {
        goto done;
    }
    /* a GPT's embedding may have rows past the tokenizer's (clformer pads) */
    if (bpe ? clf_tokenizer_vocab_size(tok) > cfg.vocab.size
            : clf_tokenizer_vocab_size(tok) != cfg.vocab.size) {
        st = clf_error_set(err, CLF_ERR_FORMAT,
                           "%s: the tokenizer has %d tokens, but config.json's vocab_size is %d",
                           dir, (int)clf_tokenizer_vocab_size(tok), cfg.vocab.size);
        goto done;
    }
    if (!bpe && (clf_tokenizer_special(tok, CLF_SPECIAL_CLS) < 0 ||
                 clf_tokenizer_special(tok, CLF_SPECIAL_SEP) < 0 ||
                 clf_tokenizer_special(tok, CLF_SPECIAL_PAD) < 0)) {
        st = clf_error_set(err, CLF_ERR_FORMAT,
                           "%s: a BERT tokenizer needs [CLS], [SEP] and [PAD] tokens", path);
        goto done;
    }
    if ((st = clf_tokenizer_to_json(tok, &tok_json, NULL, err)) != CLF_OK)
        goto done;
    /* the weights */
    snprintf(s.path, sizeof s.path, "%s/model.safetensors", dir);
    if ((st = clf_st_reader_open(s.path, &s.r, err)) != CLF_OK) {
        if (err != NULL && strstr(err->msg, s.path) == NULL)
            clf_error_prefix(err, "%s", s.path);
        goto done;
    }
    if ((s.used = calloc(clf_st_reader_count(s.r) + 1, 1)) == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory importing");
        goto done;
    }
    if ((st = gpt2    ? gpt2_tensors(&s, &cfg, err)
              : llama ? imp_llama_tensors(&s, &cfg, strcmp(mt, "qwen2") == 0, err)
                      : bert_tensors(&s, &cfg, err)) != CLF_OK)
        goto done;
    for (size_t i = 0; i < clf_st_reader_count(s.r); i++) {
        if (s.used[i])
            continue;
        const char *nm = clf_st_reader_tensor(s.r, i)->name;
        size_t at = strlen(r.ignored_names);
        if (at + strlen(nm) + 8 < sizeof r.ignored_names)
            snprintf(r.ignored_names + at, sizeof r.ignored_names - at, "%s%s",
                     r.ignored ? ", " : "", nm);
        else if (at + 6 < sizeof r.ignored_names && !strstr(r.ignored_names, "..."))
            snprintf(r.ignored_names + at, sizeof r.ignored_names - at, ", ...");
        r.ignored++;
    }
    snprintf(path, sizeof path, "%s", dir);
    const clf_checkpoint_extra extra[] = {{"imported_from", path}, {"imported_type", r.model_type}};
    if ((st = clf_checkpoint_write_params(out_path, &cfg, tok_json, cfg.vocab.size, s.t, s.n, extra,
                                          2, err)) != CLF_OK)
        goto done;
    r.layers = cfg.blocks.repeat;
    r.dim = cfg.embedding.dim;
    r.heads = cfg.blocks.attention.heads;
    r.ffn = cfg.blocks.ffn.hidden;
    r.context = cfg.context;
    r.vocab = cfg.vocab.size;
    r.tensors = s.n;
    for (int i = 0; i < s.n; i++)
        r.params += s.t[i].shape[0] * s.t[i].shape[1];
    snprintf(r.pool, sizeof r.pool, "%s", bpe ? "-" : mean ? "mean" : "cls");
    if (rep != NULL)
        *rep = r;
done:
    imp_free(&s);
    clf_json_destroy(doc);
    clf_tokenizer_destroy(tok);
    free(tok_text);
    free(tok_json);
    if (st != CLF_OK)
        clf_error_prefix(err, "import %s", dir);
    return st;
}

/* ---- export to the GPT-2 layout ------------------------------------------------------- */

/* Why cfg cannot be written as a GPT-2, NULL if it can. */
const char *imp_not_plain_decoder(const clf_model_config *c)
{
    if (c->kind != CLF_MODEL_DECODER)
        return "model.kind must be decoder";
    if (c->vocab.tokenizer != CLF_TOKENIZER_BPE)
        return "vocab.tokenizer must be bpe (a byte-level BPE)";
    if (c->embedding.scale || c->embedding.norm != CLF_NORM_NONE)
        return "embedding.scale and embedding.norm must be off";
    if (!c->blocks.attention.causal)
        return "blocks.attention.causal must be true";
    return NULL;
}

static const char *not_gpt2(const clf_model_config *c)
{
    const char *why = imp_not_plain_decoder(c);
    if (why != NULL)
        return why;
    if (c->positional.type != CLF_POS_LEARNED)
        return "positional.type must be learned";
    if (c->blocks.norm.type != CLF_NORM_LAYERNORM || !c->blocks.norm.bias ||
        c->blocks.norm.placement != CLF_NORM_PRE)
        return "blocks.norm must be a pre-norm layernorm with bias";
    if (c->final_norm.type != CLF_NORM_LAYERNORM)
        return "final_norm.type must be layernorm";
    if (!c->blocks.attention.bias || !c->blocks.ffn.bias)
        return "blocks.attention.bias and blocks.ffn.bias must be true";
    if (c->blocks.ffn.activation == CLF_FFN_SWIGLU)
        return "blocks.ffn.activation swiglu has no GPT-2 form";
    if (c->blocks.attention.window != 0)
        return "blocks.attention.window must be 0";
    if (clf_config_kv_heads(c) != c->blocks.attention.heads)
        return "blocks.attention.kv_heads must equal blocks.attention.heads (GPT-2 has no "
               "grouped-query attention)";
    if (!c->head.tie_embedding)
        return "head.tie_embedding must be true";
    return NULL;
}

clf_status imp_write_text(const char *path, const char *text, clf_error *err)
{
    return clf_file_write_atomic(path, text, strlen(text), err);
}

/* config.json of checkpoint c (vocabulary V, tokenizer tok) as GPT-2's. */
static clf_status gpt2_config_json(const clf_model_config *c, int64_t V, const clf_tokenizer *tok,
                                   char **out, clf_error *err)
{
    const int64_t C = c->embedding.dim, P = c->context, H = c->blocks.ffn.hidden;
    clf_json_writer jw;
    clf_json_writer_init(&jw);
    clf_json_begin_object(&jw);
    clf_json_key(&jw, "architectures");
    clf_json_begin_array(&jw);
    clf_json_string(&jw, "GPT2LMHeadModel");
    clf_json_end_array(&jw);
    clf_json_key(&jw, "model_type");
    clf_json_string(&jw, "gpt2");
    const struct {
        const char *key;
        int64_t v;
    } ints[] = {{"n_embd", C},
                {"n_layer", c->blocks.repeat},
                {"n_head", c->blocks.attention.heads},
                {"n_positions", P},
                {"n_ctx", P},
                {"n_inner", H},
                {"vocab_size", V}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        clf_json_key(&jw, ints[i].key);
        clf_json_int(&jw, ints[i].v);
    }
    const struct {
        const char *key;
        double v;
    } dbls[] = {{"layer_norm_epsilon", c->blocks.norm.eps},
                {"embd_pdrop", c->embedding.dropout},
                {"attn_pdrop", c->blocks.attention.dropout},
                {"resid_pdrop", c->blocks.dropout}};
    for (size_t i = 0; i < sizeof dbls / sizeof dbls[0]; i++) {
        clf_json_key(&jw, dbls[i].key);
        clf_json_double(&jw, dbls[i].v);
    }
    clf_json_key(&jw, "activation_function");
    clf_json_string(&jw, c->blocks.ffn.activation == CLF_FFN_GELU_TANH ? "gelu_new"
                         : c->blocks.ffn.activation == CLF_FFN_GELU    ? "gelu"
                                                                       : "relu");
    clf_json_key(&jw, "tie_word_embeddings");
    clf_json_bool(&jw, 1);
    clf_json_key(&jw, "bos_token_id");
    clf_json_int(&jw, clf_tokenizer_special(tok, CLF_SPECIAL_BOS));
    clf_json_key(&jw, "eos_token_id");
    clf_json_int(&jw, clf_tokenizer_special(tok, CLF_SPECIAL_EOS));
    clf_json_end_object(&jw);
    return clf_json_writer_finish(&jw, out, NULL, err);
}

/* One tensor of the export: ours, GPT-2's name, whether it is a Conv1D
 * weight (stored [in, out]), clformer's shape (cols 0: 1-D). */
typedef struct gpt2_tensor {
    char from[96], to[96];
    int conv;
    int64_t rows, cols;
} gpt2_tensor;

/* Tensor i of block k in GPT-2's order (k = -1: the embeddings, k = L:
 * the final norm). */
static gpt2_tensor gpt2_tensor_at(const clf_model_config *c, int64_t V, int k, size_t i)
{
    const int64_t C = c->embedding.dim, H = c->blocks.ffn.hidden;
    const int64_t dims[4] = {C, H, 0, 3 * C};
    gpt2_tensor t = {.conv = 0};
    if (k == -1) { /* the embeddings */
        snprintf(t.from, sizeof t.from, "%s", i == 0 ? "wte" : "wpe");
        snprintf(t.to, sizeof t.to, "%s", i == 0 ? "wte.weight" : "wpe.weight");
        t.rows = i == 0 ? V : c->context;
        t.cols = C;
    } else if (k == c->blocks.repeat) { /* the final norm */
        snprintf(t.from, sizeof t.from, "ln_f.%s", i == 0 ? "weight" : "bias");
        snprintf(t.to, sizeof t.to, "ln_f.%s", i == 0 ? "weight" : "bias");
        t.rows = C;
    } else {
        const struct gpt2_name *g = &gpt2_block[i];
        snprintf(t.from, sizeof t.from, "blocks.%d.%s", k, g->ours);
        snprintf(t.to, sizeof t.to, "h.%d.%s", k, g->theirs);
        t.conv = g->conv;
        t.rows = dims[g->rows];
        t.cols = g->cols < 0 ? 0 : dims[g->cols];
    }
    return t;
}

/* The weights from the checkpoint's reader r into the writer w, Conv1D
 * ones transposed to [in, out]. */
static clf_status gpt2_weights(const clf_model_config *c, int64_t V, clf_st_reader *r,
                               clf_st_writer *w, imp_held *h, clf_error *err)
{
    const int L = c->blocks.repeat;
    clf_status st = CLF_OK;
    for (int k = -1; k <= L && st == CLF_OK; k++) {
        const size_t nm = k == -1 ? 2 : k == L ? 2 : GPT2_BLOCK_N;
        for (size_t i = 0; i < nm && st == CLF_OK; i++) {
            const gpt2_tensor t = gpt2_tensor_at(c, V, k, i);
            const size_t n = (size_t)t.rows * (size_t)(t.cols > 0 ? t.cols : 1);
            float *x = malloc(n * sizeof *x), *y = imp_hold(h, n);
            int64_t shape[2] = {t.rows, t.cols};
            if (x == NULL || y == NULL)
                st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory exporting");
            else
                st = imp_read_param(r, h, t.from, t.cols > 0 ? 2 : 1, shape, x, n, err);
            if (st == CLF_OK && t.conv) {
                for (int64_t o = 0; o < t.rows; o++)
                    for (int64_t j = 0; j < t.cols; j++)
                        y[j * t.rows + o] = x[o * t.cols + j];
                int64_t hf[2] = {t.cols, t.rows};
                st = clf_st_writer_add(w, t.to, CLF_ST_F32, 2, hf, y, err);
            } else if (st == CLF_OK) {
                memcpy(y, x, n * sizeof *x);
                st = clf_st_writer_add(w, t.to, CLF_ST_F32, t.cols > 0 ? 2 : 1, shape, y, err);
            }
            free(x);
        }
    }
    return st;
}

/* The export's files in out_dir (created if missing). */
clf_status imp_write_folder(const char *out_dir, clf_st_writer *w, const char *cfg_json,
                            const char *vocab, const char *merges, clf_error *err)
{
    char path[4096];
    clf_status st;
    if (mkdir(out_dir, 0755) != 0 && errno != EEXIST)
        return clf_error_set(err, CLF_ERR_IO, "cannot create %s: %s", out_dir, strerror(errno));
    if ((st = clf_st_writer_add_metadata(w, "format", "pt", err)) != CLF_OK)
        return st;
    snprintf(path, sizeof path, "%s/model.safetensors", out_dir);
    if ((st = clf_st_writer_write(w, path, err)) != CLF_OK)
        return st;
    snprintf(path, sizeof path, "%s/config.json", out_dir);
    if ((st = imp_write_text(path, cfg_json, err)) != CLF_OK)
        return st;
    snprintf(path, sizeof path, "%s/vocab.json", out_dir);
    if ((st = imp_write_text(path, vocab, err)) != CLF_OK)
        return st;
    snprintf(path, sizeof path, "%s/merges.txt", out_dir);
    return imp_write_text(path, merges, err);
}

clf_status imp_read_param(clf_st_reader *r, const imp_held *h, const char *name, int ndim,
                          const int64_t *shape, float *x, size_t n, clf_error *err)
{
    char full[256];
    snprintf(full, sizeof full, "%s%s", h->from, name);
    return clf_st_reader_read_f32(r, full, ndim, shape, x, n, err);
}

float *imp_hold(imp_held *h, size_t n)
{
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 64;
        float **p = realloc(h->p, (size_t)cap * sizeof *p);
        if (p == NULL)
            return NULL;
        h->p = p;
        h->cap = cap;
    }
    float *x = malloc((n ? n : 1) * sizeof *x);
    if (x != NULL)
        h->p[h->n++] = x;
    return x;
}

clf_status imp_export(const char *ckpt_path, const char *out_dir, const imp_layout *L,
                      clf_error *err)
{
    clf_checkpoint *ck = NULL;
    clf_tokenizer *tok = NULL;
    clf_st_reader *r = NULL;
    clf_st_writer *w = NULL;
    char *vocab = NULL, *merges = NULL, *cfg_json = NULL;
    imp_held h = {NULL, 0, 0, ""};
    clf_status st = clf_checkpoint_open(ckpt_path, &ck, err);
    if (st != CLF_OK)
        return st;
    const clf_model_config *c = clf_checkpoint_config(ck);
    const int64_t V = clf_checkpoint_vocab(ck);
    h.from = clf_checkpoint_has_ema(ck) ? "ema." : ""; /* what evaluation used */
    const char *why = L->why_not(c);
    if (why != NULL)
        st = clf_error_set(err, CLF_ERR_UNSUPPORTED, "the %s layout: %s", L->name, why);
    if (st == CLF_OK)
        st = clf_checkpoint_tokenizer_create(ck, &tok, err);
    if (st == CLF_OK)
        st = clf_tokenizer_to_gpt2(tok, &vocab, &merges, err);
    if (st == CLF_OK)
        st = L->config_json(c, V, tok, &cfg_json, err);
    if (st == CLF_OK)
        st = clf_st_reader_open(clf_checkpoint_path(ck), &r, err);
    if (st == CLF_OK)
        st = clf_st_writer_create(&w, err);
    if (st == CLF_OK)
        st = L->weights(c, V, r, w, &h, err);
    if (st == CLF_OK)
        st = imp_write_folder(out_dir, w, cfg_json, vocab, merges, err);
    for (int i = 0; i < h.n; i++)
        free(h.p[i]);
    free(h.p);
    clf_st_writer_destroy(w);
    clf_st_reader_destroy(r);
    free(cfg_json);
    free(vocab);
    free(merges);
    clf_tokenizer_destroy(tok);
    clf_checkpoint_close(ck);
    if (st != CLF_OK)
        clf_error_prefix(err, "export %s", ckpt_path);
    return st;
}

clf_status clf_export_gpt2(const char *ckpt_path, const char *out_dir, clf_error *err)
{
    static const imp_layout gpt2 = {"GPT-2", not_gpt2, gpt2_config_json, gpt2_weights};
    return imp_export(ckpt_path, out_dir, &gpt2, err);
}
