/*
 * model_config.c - clf_model_create and clf_model_memory_estimate: translate
 * a validated clf_model_config into the graph's mi_spec, then build.
 *
 * Design: this is the only model file that includes config/config.h; the
 * graph files see mi_spec (model_internal.h). Checks here are the ones only
 * the model knows (a kind or head it does not build yet, a batch that does
 * not fit); the config module has already validated the rest.
 *
 * Not here: the graph itself (model_build.c, model_forward.c, ...).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../config/config.h"
#include "model_internal.h"

static clf_status spec_from_config(const clf_model_config *cfg, int vocab_size, int B,
                                   mi_spec *s, clf_model_optim *o, clf_error *err)
{
    memset(s, 0, sizeof *s);
    memset(o, 0, sizeof *o);
    if (cfg->kind != CLF_MODEL_DECODER)
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "model.kind %s: only the decoder kind is built so far",
                             clf_config_kind_name(cfg->kind));
    if (cfg->head.type != CLF_HEAD_LM)
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "model.head.type %s: a decoder needs the lm head",
                             clf_config_head_name(cfg->head.type));
    if (cfg->train.optimizer.type == CLF_OPT_ADAM && cfg->train.optimizer.weight_decay > 0)
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "train.optimizer: adam with L2 weight decay is not supported; "
                             "use adamw (decoupled) or weight_decay: 0");
    int V = vocab_size > cfg->vocab.size ? vocab_size : cfg->vocab.size;
    if (V <= 0)
        return clf_error_set(err, CLF_ERR_ARG, "vocabulary size %d: expected > 0", V);
    if (B <= 0)
        return clf_error_set(err, CLF_ERR_ARG, "batch %d: expected > 0", B);
    const clf_blocks_config *bk = &cfg->blocks;
    s->B = B;
    s->T = cfg->context;
    s->C = cfg->embedding.dim;
    s->V = V;
    s->L = clf_config_decoder_layers(cfg);
    s->NH = bk->attention.heads;
    s->HS = clf_config_head_size(cfg);
    s->H = bk->ffn.hidden > 0 ? bk->ffn.hidden : 4 * s->C;
    if (s->T <= 0 || s->C <= 0 || s->L < 0 || s->NH <= 0 || s->HS * s->NH != s->C)
        return clf_error_set(err, CLF_ERR_CONFIG,
                             "model sizes: context %d, dim %d, heads %d, layers %d are not a "
                             "valid model (validate the config first)",
                             s->T, s->C, s->NH, s->L);
    switch (bk->ffn.activation) {
    case CLF_FFN_RELU: s->act = MI_ACT_RELU; break;
    case CLF_FFN_GELU: s->act = MI_ACT_GELU; break;
    case CLF_FFN_GELU_TANH: s->act = MI_ACT_GELU_TANH; break;
    case CLF_FFN_SWIGLU: s->act = MI_ACT_SWIGLU; break;
    default: return clf_error_set(err, CLF_ERR_CONFIG, "ffn.activation: unknown value");
    }
    s->fc_rows = s->act == MI_ACT_SWIGLU ? 2 * s->H : s->H;
    switch (cfg->positional.type) {
    case CLF_POS_LEARNED: s->pos = MI_POS_LEARNED; break;
    case CLF_POS_SINUSOIDAL: s->pos = MI_POS_SINUSOIDAL; break;
    case CLF_POS_ROPE: s->pos = MI_POS_ROPE; break;
    default: return clf_error_set(err, CLF_ERR_CONFIG, "positional.type: unknown value");
    }
    if (s->pos == MI_POS_ROPE && (s->HS % 2) != 0)
        return clf_error_set(err, CLF_ERR_CONFIG, "rope needs an even head size, not %d", s->HS);
    s->rope_theta = (float)(cfg->positional.rope_theta > 0 ? cfg->positional.rope_theta
                                                            : 10000.0);
    s->emb_scale = cfg->embedding.scale ? sqrtf((float)s->C) : 1.0f;
    s->p_emb = (float)cfg->embedding.dropout;
    s->p_attn = (float)bk->attention.dropout;
    s->p_resid = (float)bk->dropout;
    s->p_ffn = (float)bk->ffn.dropout;
    s->attn_bias = bk->attention.bias != 0;
    s->ffn_bias = bk->ffn.bias != 0;
    s->norm = bk->norm.type == CLF_NORM_RMSNORM ? MI_NORM_RMSNORM : MI_NORM_LAYERNORM;
    s->norm_post = bk->norm.placement == CLF_NORM_POST;
    s->norm_bias = s->norm == MI_NORM_LAYERNORM && bk->norm.bias != 0;
    s->norm_eps = (float)bk->norm.eps;
    s->final_norm = cfg->final_norm.type == CLF_NORM_NONE       ? MI_NORM_NONE
                    : cfg->final_norm.type == CLF_NORM_RMSNORM ? MI_NORM_RMSNORM
                                                               : MI_NORM_LAYERNORM;
    s->tied = cfg->head.tie_embedding != 0;
    s->causal = bk->attention.causal != 0;
    s->seed = cfg->train.seed;

    const clf_optimizer_config *oc = &cfg->train.optimizer;
    o->beta1 = (float)oc->betas[0];
    o->beta2 = (float)oc->betas[1];
    o->eps = (float)oc->eps;
    o->weight_decay = (float)oc->weight_decay;
    o->grad_clip = (float)cfg->train.grad_clip;
    o->label_smoothing = (float)cfg->train.label_smoothing;
    return CLF_OK;
}

clf_status clf_model_create(clf_runtime *rt, const clf_model_config *cfg, int vocab_size, int B,
                            unsigned flags, clf_model **out, clf_error *err)
{
    *out = NULL;
    if (rt == NULL || cfg == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "clf_model_create: runtime and config required");
    mi_spec s;
    clf_model_optim o;
    clf_status st = spec_from_config(cfg, vocab_size, B, &s, &o, err);
    if (st != CLF_OK)
        return st;
    return mi_model_build(rt, &s, flags, &o, out, NULL, err);
}

clf_status clf_model_memory_estimate(const clf_model_config *cfg, int vocab_size, int B,
                                     unsigned flags, size_t *bytes, clf_error *err)
{
    mi_spec s;
    clf_model_optim o;
    clf_status st = spec_from_config(cfg, vocab_size, B, &s, &o, err);
    if (st != CLF_OK)
        return st;
    return mi_model_build(NULL, &s, flags, &o, NULL, bytes, err);
}

clf_status clf_model_check_config(const clf_model *m, const clf_model_config *cfg,
                                  int vocab_size, clf_error *err)
{
    mi_spec s;
    clf_model_optim o;
    clf_status st = spec_from_config(cfg, vocab_size, m->s.B, &s, &o, err);
    if (st != CLF_OK)
        return st;
    const mi_spec *a = &m->s;
    const struct {
        const char *key;
        double model, config;
    } f[] = {
        {"vocabulary size", a->V, s.V},
        {"context", a->T, s.T},
        {"embedding.dim", a->C, s.C},
        {"blocks.repeat", a->L, s.L},
        {"blocks.attention.heads", a->NH, s.NH},
        {"blocks.ffn.hidden", a->H, s.H},
        {"blocks.ffn.activation (index)", a->act, s.act},
        {"positional.type (index)", a->pos, s.pos},
        {"positional.rope_theta", a->pos == MI_POS_ROPE ? a->rope_theta : 0,
         s.pos == MI_POS_ROPE ? s.rope_theta : 0},
        {"embedding.scale (factor)", a->emb_scale, s.emb_scale},
        {"blocks.attention.bias", a->attn_bias, s.attn_bias},
        {"blocks.ffn.bias", a->ffn_bias, s.ffn_bias},
        {"blocks.attention.causal", a->causal, s.causal},
        {"blocks.norm.type (index)", a->norm, s.norm},
        {"blocks.norm.bias", a->norm_bias, s.norm_bias},
        {"blocks.norm.placement (1 = post)", a->norm_post, s.norm_post},
        {"blocks.norm.eps", a->norm_eps, s.norm_eps},
        {"final_norm.type (index)", a->final_norm, s.final_norm},
        {"head.tie_embedding", a->tied, s.tied},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].model != f[i].config)
            return clf_error_set(err, CLF_ERR_FORMAT,
                                 "the model and the configuration differ in %s: %g here, %g "
                                 "there",
                                 f[i].key, f[i].model, f[i].config);
    return CLF_OK;
}
