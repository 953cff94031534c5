/*
 * import_llama.c - the Llama layout (import.h): Hugging Face folders of
 * model_type llama, mistral and qwen2 into a clformer decoder, and a
 * clformer decoder of that shape out to one.
 *
 * The shape: RMSNorm before attention and FFN (no biases), SwiGLU
 * (gate_proj, up_proj, down_proj), rotary positions (rope_theta,
 * rope_scaling none / linear / yarn), grouped-query attention
 * (num_key_value_heads), a final RMSNorm and an LM head, tied or not.
 * The three model types differ in biases and window only: llama has
 * attention_bias (q, k, v and o) and mlp_bias; qwen2 always has q, k and v
 * biases and none on o (imported as a zero o bias, which is exact);
 * mistral has a sliding_window (blocks.attention.window). Names ("model."
 * prefix optional; lm_head.weight never has it):
 *   embed_tokens.weight                         -> wte
 *   layers.<l>.input_layernorm.weight           -> blocks.<l>.ln1.weight
 *   layers.<l>.self_attn.{q,k,v}_proj           -> blocks.<l>.attn.qkv (rows q, k, v)
 *   layers.<l>.self_attn.o_proj                 -> blocks.<l>.attn.proj
 *   layers.<l>.post_attention_layernorm.weight  -> blocks.<l>.ln2.weight
 *   layers.<l>.mlp.{gate,up}_proj               -> blocks.<l>.ffn.fc (rows gate, up)
 *   layers.<l>.mlp.down_proj                    -> blocks.<l>.ffn.proj
 *   norm.weight                                 -> ln_f.weight
 *   lm_head.weight                              -> lm_head.weight (untied; tied: must
 *                                                  equal embed_tokens if present)
 * The tokenizer is the folder's byte-level BPE (imp_bpe_tokenizer).
 * Refused, naming the field: another hidden_act than silu, a head_dim
 * other than hidden_size / heads, rope_scaling types dynamic, llama3 and
 * longrope and YaRN's own attention factors, qwen2's use_sliding_window.
 *
 * Export writes model_type llama (mistral with a window), attention_bias
 * and mlp_bias from the config, o_proj.bias included with attention biases
 * (so a qwen2 import goes out as a llama with a zero o bias and reads
 * back to the same bits).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/train/import.h"
#include "model/train/import_internal.h"

/* ---- import ----------------------------------------------------------------------- */

static int json_true(const clf_json *doc, const char *key)
{
    const clf_json *v = clf_json_get(doc, key);
    return v != NULL && v->type == CLF_JSON_BOOL && v->boolean;
}

/* An optional integer (absent or null: dflt). */
static clf_status opt_int(const clf_json *doc, const char *path, const char *key, int lo, int hi,
                          int dflt, int *out, clf_error *err)
{
    const clf_json *v = clf_json_get(doc, key);
    if (v == NULL || v->type == CLF_JSON_NULL) {
        *out = dflt;
        return CLF_OK;
    }
    return imp_get_int(doc, path, key, lo, hi, out, err);
}

/* rope_scaling of config.json into cfg->positional (P: max_position_embeddings). */
static clf_status rope_scaling(const clf_json *doc, const char *path, int P, clf_model_config *cfg,
                               clf_error *err)
{
    const clf_json *rs = clf_json_get(doc, "rope_scaling");
    if (rs == NULL || rs->type == CLF_JSON_NULL)
        return CLF_OK;
    if (rs->type != CLF_JSON_OBJECT)
        return clf_error_set(err, CLF_ERR_FORMAT, "%s: rope_scaling must be an object or null",
                             path);
    clf_status st = imp_check_types(rs, path, err);
    if (st != CLF_OK)
        return st;
    const char *type = imp_get_str(rs, "rope_type");
    if (type == NULL)
        type = imp_get_str(rs, "type");
    if (type == NULL || strcmp(type, "default") == 0)
        return CLF_OK;
    clf_rope_scaling_type t;
    if (strcmp(type, "linear") == 0)
        t = CLF_ROPE_SCALE_LINEAR;
    else if (strcmp(type, "yarn") == 0)
        t = CLF_ROPE_SCALE_YARN;
    else
        return clf_error_set(err, CLF_ERR_FORMAT,
                             "%s: rope_scaling type \"%s\" is not supported (linear, yarn; "
                             "clformer's ntk is the static form, not HF's dynamic)",
                             path, type);
    static const char *const own[] = {"attention_factor", "mscale", "mscale_all_dim"};
    for (int i = 0; i < 3; i++) {
        const clf_json *v = clf_json_get(rs, own[i]);
        if (v != NULL && v->type != CLF_JSON_NULL)
            return clf_error_set(err, CLF_ERR_FORMAT,
                                 "%s: rope_scaling.%s is not supported (YaRN's temperature is "
                                 "0.1 ln(factor) + 1)",
                                 path, own[i]);
    }
    const double F = imp_get_num(rs, "factor", 0);
    if (!(F >= 1.0 && F <= 65536.0))
        return clf_error_set(err, CLF_ERR_FORMAT,
                             "%s: rope_scaling.factor must be a number in [1, 65536]", path);
    int orig = P;
    if (t == CLF_ROPE_SCALE_YARN && (st = opt_int(rs, path, "original_max_position_embeddings", 1,
                                                  1048576, P, &orig, err)) != CLF_OK)
        return st;
    cfg->positional.rope_scaling.type = t;
    cfg->positional.rope_scaling.factor = F;
    cfg->positional.rope_scaling.original_context = t == CLF_ROPE_SCALE_YARN ? orig : P;
    cfg->positional.rope_scaling.beta_fast = imp_get_num(rs, "beta_fast", 32.0);
    cfg->positional.rope_scaling.beta_slow = imp_get_num(rs, "beta_slow", 1.0);
    return CLF_OK;
}

clf_status imp_llama_config(const clf_json *doc, const char *path, clf_model_config *cfg,
                            clf_error *err)
{
    const char *mt = imp_get_str(doc, "model_type");
    const int qwen2 = strcmp(mt, "qwen2") == 0, mistral = strcmp(mt, "mistral") == 0;
    int L = 0, C = 0, NH = 0, KVH = 0, H = 0, P = 0, V = 0, HD = 0, W = 0;
    clf_status st;
    if ((st = imp_get_int(doc, path, "num_hidden_layers", 1, 1024, &L, err)) != CLF_OK ||
        (st = imp_get_int(doc, path, "hidden_size", 1, 65536, &C, err)) != CLF_OK ||
        (st = imp_get_int(doc, path, "num_attention_heads", 1, 4096, &NH, err)) != CLF_OK ||
        (st = opt_int(doc, path, "num_key_value_heads", 1, 4096, NH, &KVH, err)) != CLF_OK ||
        (st = imp_get_int(doc, path, "intermediate_size", 1, 1048576, &H, err)) != CLF_OK ||
        (st = imp_get_int(doc, path, "max_position_embeddings", 1, 1048576, &P, err)) != CLF_OK ||
        (st = imp_get_int(doc, path, "vocab_size", 1, 16777216, &V, err)) != CLF_OK ||
        (st = opt_int(doc, path, "head_dim", 1, 65536, C / NH, &HD, err)) != CLF_OK ||
        (st = opt_int(doc, path, "sliding_window", 1, 1 << 30, 0, &W, err)) != CLF_OK)
        return st;
    if (HD * NH != C)
        return clf_error_set(err, CLF_ERR_FORMAT,
                             "%s: head_dim %d is not hidden_size %d / num_attention_heads %d "
                             "(clformer's heads split the width)",
                             path, HD, C, NH);
    const char *act = imp_get_str(doc, "hidden_act");
    if (act != NULL && strcmp(act, "silu") != 0)
        return clf_error_set(err, CLF_ERR_FORMAT,
                             "%s: hidden_act \"%s\" is not supported (silu: SwiGLU)", path, act);
    if (qwen2 && json_true(doc, "use_sliding_window"))
        return clf_error_set(err, CLF_ERR_FORMAT,
                             "%s: use_sliding_window: true is not supported (a window on some "
                             "layers only)",
                             path);
    clf_config_defaults(cfg);
    cfg->kind = CLF_MODEL_DECODER;
    cfg->vocab.tokenizer = CLF_TOKENIZER_BPE;
    cfg->vocab.size = V;
    cfg->context = P;
    cfg->embedding.dim = C;
    cfg->embedding.dropout = 0;
    cfg->positional.type = CLF_POS_ROPE;
    cfg->positional.rope_theta = imp_get_num(doc, "rope_theta", 10000.0);
    cfg->blocks.repeat = L;
    cfg->blocks.attention.heads = NH;
    cfg->blocks.attention.kv_heads = KVH;
    cfg->blocks.attention.causal = 1;
    cfg->blocks.attention.dropout = imp_get_num(doc, "attention_dropout", 0.0);
    cfg->blocks.attention.bias = qwen2 || json_true(doc, "attention_bias");
    cfg->blocks.attention.window = mistral ? W : 0;
    cfg->blocks.ffn.hidden = H;
    cfg->blocks.ffn.activation = CLF_FFN_SWIGLU;
    cfg->blocks.ffn.bias = json_true(doc, "mlp_bias");
    cfg->blocks.ffn.dropout = 0;
    cfg->blocks.dropout = 0;
    cfg->blocks.norm.type = CLF_NORM_RMSNORM;
    cfg->blocks.norm.placement = CLF_NORM_PRE;
    cfg->blocks.norm.eps = imp_get_num(doc, "rms_norm_eps", 1e-6);
    cfg->blocks.norm.bias = 0;
    cfg->final_norm.type = CLF_NORM_RMSNORM;
    cfg->head.type = CLF_HEAD_LM;
    cfg->head.tie_embedding = json_true(doc, "tie_word_embeddings");
    if ((st = rope_scaling(doc, path, P, cfg, err)) != CLF_OK)
        return st;
    clf_config_resolve(cfg);
    if ((st = clf_config_validate(cfg, err)) != CLF_OK)
        clf_error_prefix(err, "%s: the model it describes", path);
    return st;
}

/* Rows of one clformer tensor from consecutive file tensors (NULL names end). */
static clf_status stack_rows(imp *s, const char *to, const char *const *from, const int64_t *rows,
                             int n, int64_t cols, clf_error *err)
{
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += rows[i];
    float *d = imp_out_tensor(s, to, total, cols, err);
    if (d == NULL)
        return CLF_ERR_MEMORY;
    clf_status st = CLF_OK;
    for (int i = 0; i < n && st == CLF_OK; i++) {
        st = imp_read_in(s, from[i], NULL, rows[i], cols, d, err);
        d += rows[i] * (cols > 0 ? cols : 1);
    }
    return st;
}

clf_status imp_llama_tensors(imp *s, const clf_model_config *cfg, int zero_o_bias, clf_error *err)
{
    const int64_t C = cfg->embedding.dim, V = cfg->vocab.size, H = cfg->blocks.ffn.hidden;
    const int64_t KV = (int64_t)clf_config_kv_heads(cfg) * clf_config_head_size(cfg);
    char to[128], n[3][128];
    const char *names[3] = {n[0], n[1], n[2]};
    clf_status st;
    s->prefix[0] = '\0';
    if (clf_st_reader_find(s->r, "embed_tokens.weight") == NULL &&
        clf_st_reader_find(s->r, "model.embed_tokens.weight") != NULL)
        snprintf(s->prefix, sizeof s->prefix, "model.");
    if ((st = imp_copy1(s, "wte", "embed_tokens.weight", NULL, V, C, err)) != CLF_OK)
        return st;
    for (int l = 0; l < cfg->blocks.repeat; l++) {
        const int64_t qkv[3] = {C, KV, KV}, fc[2] = {H, H};
#define NAME(i, ...) snprintf(n[i], sizeof n[i], __VA_ARGS__)
#define TO(...) snprintf(to, sizeof to, __VA_ARGS__)
        TO("blocks.%d.ln1.weight", l);
        NAME(0, "layers.%d.input_layernorm.weight", l);
        if ((st = imp_copy1(s, to, n[0], NULL, C, 0, err)) != CLF_OK)
            return st;
        for (int b = 0; b < 1 + cfg->blocks.attention.bias; b++) {
            const char *what = b ? "bias" : "weight";
            TO("blocks.%d.attn.qkv.%s", l, what);
            for (int i = 0; i < 3; i++)
                NAME(i, "layers.%d.self_attn.%c_proj.%s", l, "qkv"[i], what);
            if ((st = stack_rows(s, to, names, qkv, 3, b ? 0 : C, err)) != CLF_OK)
                return st;
        }
        TO("blocks.%d.attn.proj.weight", l);
        NAME(0, "layers.%d.self_attn.o_proj.weight", l);
        if ((st = imp_copy1(s, to, n[0], NULL, C, C, err)) != CLF_OK)
            return st;
        if (cfg->blocks.attention.bias) {
            TO("blocks.%d.attn.proj.bias", l);
            NAME(0, "layers.%d.self_attn.o_proj.bias", l);
            if (zero_o_bias) { /* qwen2 has none: zeros, which is exact */
                if (imp_out_tensor(s, to, C, 0, err) == NULL)
                    return CLF_ERR_MEMORY;
            } else if ((st = imp_copy1(s, to, n[0], NULL, C, 0, err)) != CLF_OK) {
                return st;
            }
        }
        TO("blocks.%d.ln2.weight", l);
        NAME(0, "layers.%d.post_attention_layernorm.weight", l);
        if ((st = imp_copy1(s, to, n[0], NULL, C, 0, err)) != CLF_OK)
            return st;
        for (int b = 0; b < 1 + cfg->blocks.ffn.bias; b++) {
            const char *what = b ? "bias" : "weight";
            TO("blocks.%d.ffn.fc.%s", l, what);
            NAME(0, "layers.%d.mlp.gate_proj.%s", l, what);
            NAME(1, "layers.%d.mlp.up_proj.%s", l, what);
            if ((st = stack_rows(s, to, names, fc, 2, b ? 0 : C, err)) != CLF_OK)
                return st;
            TO("blocks.%d.ffn.proj.%s", l, what);
            NAME(0, "layers.%d.mlp.down_proj.%s", l, what);
            if ((st = imp_copy1(s, to, n[0], NULL, C, b ? 0 : H, err)) != CLF_OK)
                return st;
        }
#undef NAME
#undef TO
    }
    if ((st = imp_copy1(s, "ln_f.weight", "norm.weight", NULL, C, 0, err)) != CLF_OK)
        return st;
    if (cfg->head.tie_embedding)
        return imp_tied_head(s, V, C, "embed_tokens.weight", err);
    char prefix[sizeof s->prefix];
    memcpy(prefix, s->prefix, sizeof prefix);
    s->prefix[0] = '\0'; /* lm_head sits beside the model's tensors */
    st = imp_copy1(s, "lm_head.weight", "lm_head.weight", NULL, V, C, err);
    memcpy(s->prefix, prefix, sizeof prefix);
    return st;
}

/* ---- export ----------------------------------------------------------------------- */

/* Why c cannot be written in the Llama layout, NULL if it can. */
static const char *not_llama(const clf_model_config *c)
{
    const char *why = imp_not_plain_decoder(c);
    if (why != NULL)
        return why;
    if (c->positional.type != CLF_POS_ROPE)
        return "positional.type must be rope";
    if (c->positional.rope_scaling.type == CLF_ROPE_SCALE_NTK)
        return "positional.rope_scaling.type ntk has no Hugging Face form (linear or yarn)";
    if (c->blocks.norm.type != CLF_NORM_RMSNORM || c->blocks.norm.bias ||
        c->blocks.norm.placement != CLF_NORM_PRE)
        return "blocks.norm must be a pre-norm rmsnorm";
    if (c->final_norm.type != CLF_NORM_RMSNORM)
        return "final_norm.type must be rmsnorm";
    if (c->blocks.ffn.activation != CLF_FFN_SWIGLU)
        return "blocks.ffn.activation must be swiglu";
    if (c->blocks.attention.window > 0 && (c->blocks.attention.bias || c->blocks.ffn.bias))
        return "a sliding window is Mistral's layout, which has no biases";
    if (c->blocks.attention.global > 0 || c->blocks.attention.stride > 0 ||
        c->blocks.attention.random_blocks > 0)
        return "sparse attention (blocks.attention.global, stride, random_blocks) has no "
               "Hugging Face form";
    return NULL;
}

static clf_status llama_config_json(const clf_model_config *c, int64_t V, const clf_tokenizer *tok,
                                    char **out, clf_error *err)
{
    const int mistral = c->blocks.attention.window > 0;
    clf_json_writer jw;
    clf_json_writer_init(&jw);
    clf_json_begin_object(&jw);
    clf_json_key(&jw, "architectures");
    clf_json_begin_array(&jw);
    clf_json_string(&jw, mistral ? "MistralForCausalLM" : "LlamaForCausalLM");
    clf_json_end_array(&jw);
    clf_json_key(&jw, "model_type");
    clf_json_string(&jw, mistral ? "mistral" : "llama");
    const struct {
        const char *key;
        int64_t v;
    } ints[] = {{"hidden_size", c->embedding.dim},
                {"intermediate_size", c->blocks.ffn.hidden},
                {"num_hidden_layers", c->blocks.repeat},
                {"num_attention_heads", c->blocks.attention.heads},
                {"num_key_value_heads", clf_config_kv_heads(c)},
                {"head_dim", clf_config_head_size(c)},
                {"max_position_embeddings", c->context},
                {"vocab_size", V},
                {"bos_token_id", clf_tokenizer_special(tok, CLF_SPECIAL_BOS)},
                {"eos_token_id", clf_tokenizer_special(tok, CLF_SPECIAL_EOS)}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        clf_json_key(&jw, ints[i].key);
        clf_json_int(&jw, ints[i].v);
    }
    if (mistral) {
        clf_json_key(&jw, "sliding_window");
        clf_json_int(&jw, c->blocks.attention.window);
    }
    clf_json_key(&jw, "rms_norm_eps");
    clf_json_double(&jw, c->blocks.norm.eps);
    clf_json_key(&jw, "rope_theta");
    clf_json_double(&jw, c->positional.rope_theta);
    clf_json_key(&jw, "attention_dropout");
    clf_json_double(&jw, c->blocks.attention.dropout);
    clf_json_key(&jw, "rope_scaling");
    const clf_rope_scaling_type rs = c->positional.rope_scaling.type;
    if (rs == CLF_ROPE_SCALE_NONE) {
        clf_json_null(&jw);
    } else {
        clf_json_begin_object(&jw);
        clf_json_key(&jw, "rope_type");
        clf_json_string(&jw, clf_config_rope_scaling_name(rs));
        clf_json_key(&jw, "factor");
        clf_json_double(&jw, c->positional.rope_scaling.factor);
        if (rs == CLF_ROPE_SCALE_YARN) {
            clf_json_key(&jw, "original_max_position_embeddings");
            clf_json_int(&jw, c->positional.rope_scaling.original_context);
            clf_json_key(&jw, "beta_fast");
            clf_json_double(&jw, c->positional.rope_scaling.beta_fast);
            clf_json_key(&jw, "beta_slow");
            clf_json_double(&jw, c->positional.rope_scaling.beta_slow);
        }
        clf_json_end_object(&jw);
    }
    clf_json_key(&jw, "hidden_act");
    clf_json_string(&jw, "silu");
    if (!mistral) {
        clf_json_key(&jw, "attention_bias");
        clf_json_bool(&jw, c->blocks.attention.bias);
        clf_json_key(&jw, "mlp_bias");
        clf_json_bool(&jw, c->blocks.ffn.bias);
    }
    clf_json_key(&jw, "tie_word_embeddings");
    clf_json_bool(&jw, c->head.tie_embedding);
    clf_json_key(&jw, "torch_dtype");
    clf_json_string(&jw, "float32");
    clf_json_end_object(&jw);
    return clf_json_writer_finish(&jw, out, NULL, err);
}

/* Rows [r0, r0 + rows) of checkpoint tensor `from` (cols 0: 1-D) as `to`. */
static clf_status put_rows(clf_st_reader *r, clf_st_writer *w, imp_held *h, const char *from,
                           int64_t total, int64_t cols, int64_t r0, int64_t rows, const char *to,
                           clf_error *err)
{
    const size_t width = (size_t)(cols > 0 ? cols : 1), n = (size_t)total * width;
    float *x = malloc(n * sizeof *x), *y = imp_hold(h, (size_t)rows * width);
    clf_status st = x == NULL || y == NULL
                        ? clf_error_set(err, CLF_ERR_MEMORY, "out of host memory exporting")
                        : CLF_OK;
    int64_t shape[2] = {total, cols};
    if (st == CLF_OK)
        st = imp_read_param(r, h, from, cols > 0 ? 2 : 1, shape, x, n, err);
    if (st == CLF_OK) {
        memcpy(y, x + (size_t)r0 * width, (size_t)rows * width * sizeof *y);
        int64_t out[2] = {rows, cols};
        st = clf_st_writer_add(w, to, CLF_ST_F32, cols > 0 ? 2 : 1, out, y, err);
    }
    free(x);
    return st;
}

static clf_status llama_weights(const clf_model_config *c, int64_t V, clf_st_reader *r,
                                clf_st_writer *w, imp_held *h, clf_error *err)
{
    const int64_t C = c->embedding.dim, H = c->blocks.ffn.hidden;
    const int64_t KV = (int64_t)clf_config_kv_heads(c) * clf_config_head_size(c);
    char from[128], to[128];
    clf_status st = put_rows(r, w, h, "wte", V, C, 0, V, "model.embed_tokens.weight", err);
    for (int l = 0; l < c->blocks.repeat && st == CLF_OK; l++) {
#define F(...) snprintf(from, sizeof from, __VA_ARGS__)
#define T(...) snprintf(to, sizeof to, __VA_ARGS__)
        F("blocks.%d.ln1.weight", l);
        T("model.layers.%d.input_layernorm.weight", l);
        st = put_rows(r, w, h, from, C, 0, 0, C, to, err);
        const int64_t q0[3] = {0, C, C + KV}, qn[3] = {C, KV, KV};
        for (int b = 0; b < 1 + c->blocks.attention.bias && st == CLF_OK; b++) {
            const char *what = b ? "bias" : "weight";
            F("blocks.%d.attn.qkv.%s", l, what);
            for (int i = 0; i < 3 && st == CLF_OK; i++) {
                T("model.layers.%d.self_attn.%c_proj.%s", l, "qkv"[i], what);
                st = put_rows(r, w, h, from, C + 2 * KV, b ? 0 : C, q0[i], qn[i], to, err);
            }
            F("blocks.%d.attn.proj.%s", l, what);
            T("model.layers.%d.self_attn.o_proj.%s", l, what);
            if (st == CLF_OK)
                st = put_rows(r, w, h, from, C, b ? 0 : C, 0, C, to, err);
        }
        F("blocks.%d.ln2.weight", l);
        T("model.layers.%d.post_attention_layernorm.weight", l);
        if (st == CLF_OK)
            st = put_rows(r, w, h, from, C, 0, 0, C, to, err);
        for (int b = 0; b < 1 + c->blocks.ffn.bias && st == CLF_OK; b++) {
            const char *what = b ? "bias" : "weight";
            F("blocks.%d.ffn.fc.%s", l, what);
            T("model.layers.%d.mlp.gate_proj.%s", l, what);
            st = put_rows(r, w, h, from, 2 * H, b ? 0 : C, 0, H, to, err);
            T("model.layers.%d.mlp.up_proj.%s", l, what);
            if (st == CLF_OK)
                st = put_rows(r, w, h, from, 2 * H, b ? 0 : C, H, H, to, err);
            F("blocks.%d.ffn.proj.%s", l, what);
            T("model.layers.%d.mlp.down_proj.%s", l, what);
            if (st == CLF_OK)
                st = put_rows(r, w, h, from, C, b ? 0 : H, 0, C, to, err);
        }
#undef F
#undef T
    }
    if (st == CLF_OK)
        st = put_rows(r, w, h, "ln_f.weight", C, 0, 0, C, "model.norm.weight", err);
    if (st == CLF_OK && !c->head.tie_embedding)
        st = put_rows(r, w, h, "lm_head.weight", V, C, 0, V, "lm_head.weight", err);
    return st;
}

clf_status clf_export_llama(const char *ckpt_path, const char *out_dir, clf_error *err)
{
    static const imp_layout llama = {"Llama", not_llama, llama_config_json, llama_weights};
    return imp_export(ckpt_path, out_dir, &llama, err);
}
