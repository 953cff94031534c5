/*
 * create.c - clf_model_create and clf_model_memory_plan: translate
 * a validated clf_model_config into the graph's mi_spec, then build.
 *
 * Design: this is the only model file that includes config/config.h; the
 * graph files see mi_spec (model_internal.h). Checks here are the ones only
 * the model knows (a head a kind cannot use, labels still unknown, limits
 * that do not fit the context); the config module has already validated
 * the rest. The limits fill the spec's planned sizes; nothing about the
 * parameters depends on them.
 *
 * Not here: the graph itself (build.c, forward.c, ...).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "model/graph/model_internal.h"
#include "model/ops/ops.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The planned sizes from the limits (defaults filled in, checked). */
static clf_status spec_limits(mi_spec *s, const clf_model_limits *lim, clf_error *err)
{
    if (lim->B <= 0)
        return clf_error_set(err, CLF_ERR_ARG, "batch %d: expected > 0", lim->B);
    if (lim->S < 0 || lim->T < 0 || lim->S > s->T || lim->T > s->T)
        return clf_error_set(err, CLF_ERR_ARG,
                             "limits: source length %d and target length %d must be in [0, "
                             "context = %d] (0 = the context)",
                             lim->S, lim->T, s->T);
    if (lim->src_tokens < 0 || lim->tgt_tokens < 0)
        return clf_error_set(err, CLF_ERR_ARG, "limits: token caps must be >= 0");
    const int64_t B = lim->B;
    const int has_enc = s->kind != MI_KIND_DECODER, has_dec = s->kind != MI_KIND_ENCODER;
    int64_t S = has_enc ? (lim->S > 0 ? lim->S : s->T) : 0;
    int64_t T = has_dec ? (lim->T > 0 ? lim->T : s->T) : 0;
    int64_t rs = lim->src_tokens > 0 ? min64(lim->src_tokens, B * S) : B * S;
    int64_t rt = lim->tgt_tokens > 0 ? min64(lim->tgt_tokens, B * T) : B * T;
    if ((has_enc && rs < S) || (has_dec && rt < T))
        return clf_error_set(err, CLF_ERR_ARG,
                             "limits: %lld source / %lld target tokens cannot hold one row of "
                             "%lld / %lld",
                             (long long)rs, (long long)rt, (long long)S, (long long)T);
    if (lim->shards < 0 || (lim->shards > 1 && (lim->shard < 0 || lim->shard >= lim->shards)))
        return clf_error_set(err, CLF_ERR_ARG, "limits: optimizer shard %d of %d", lim->shard,
                             lim->shards);
    s->shard = lim->shards > 1 ? lim->shard : 0;
    s->shards = lim->shards > 1 ? lim->shards : 1;
    s->B = lim->B;
    s->Smax = (int)S;
    s->Tmax = (int)T;
    s->rows_src = (size_t)rs;
    s->rows_tgt = (size_t)rt;
    return CLF_OK;
}

/* RoPE's frequencies from positional (HF transformers' rope_scaling
 * formulas, in double, as its Llama computes them). */
static clf_status rope_of_config(const clf_positional_config *p, int T, int HS, clf_rope *r,
                                 clf_error *err)
{
    const double theta = p->rope_theta > 0 ? p->rope_theta : 10000.0, F = p->rope_scaling.factor;
    *r = (clf_rope){(float)theta, 1.0f, 0.0f, 1.0f, 1.0f};
    switch (p->rope_scaling.type) {
        case CLF_ROPE_SCALE_NONE: return CLF_OK;
        case CLF_ROPE_SCALE_LINEAR: /* every pair interpolated */
            *r = (clf_rope){(float)theta, (float)F, -2.0f, -1.0f, 1.0f};
            return CLF_OK;
        case CLF_ROPE_SCALE_NTK:
            if (HS < 4)
                return clf_error_set(err, CLF_ERR_CONFIG,
                                     "positional.rope_scaling.type: ntk needs a head size of at "
                                     "least 4, not %d",
                                     HS);
            r->theta = (float)(theta * pow(F, (double)HS / (double)(HS - 2)));
            return CLF_OK;
        case CLF_ROPE_SCALE_YARN: {
            const double T0 =
                p->rope_scaling.original_context > 0 ? p->rope_scaling.original_context : T;
            /* the pair index that turns `turns` times over T0 positions */
            const double
                lo = floor(HS * log(T0 / (p->rope_scaling.beta_fast * 2 * 3.14159265358979323846)) /
                           (2 * log(theta))),
                hi = ceil(HS * log(T0 / (p->rope_scaling.beta_slow * 2 * 3.14159265358979323846)) /
                          (2 * log(theta)));
            const double l = lo > 0 ? lo : 0, h = hi < HS - 1 ? hi : HS - 1;
            *r = (clf_rope){(float)theta, (float)F, (float)l, (float)(h > l ? h : l + 0.001),
                            (float)(F > 1 ? 0.1 * log(F) + 1.0 : 1.0)};
            return CLF_OK;
        }
    }
    return clf_error_set(err, CLF_ERR_CONFIG, "positional.rope_scaling.type: unknown value");
}

/* What self-attention computes: the window, sparse patterns, linformer's
 * rows, performer's features. */
static clf_status spec_attention(mi_spec *s, const clf_model_config *cfg, clf_error *err)
{
    const clf_attention_config *a = &cfg->blocks.attention;
    s->window = a->window;
    s->glob = a->global;
    s->stride = a->stride;
    s->rnd = a->random_blocks;
    s->sp_bs = s->glob > 0 || s->stride > 0 || s->rnd > 0 ? a->block : 0;
    s->lin_k = clf_config_linformer_rows(cfg);
    s->perf_m = clf_config_performer_features(cfg);
    s->perf_redraw = a->redraw;
    /* what clf_config_validate says, again for configs that skip it */
    if (s->window < 0 || (s->window > 0 && (s->kind != MI_KIND_DECODER || !s->causal)))
        return clf_error_set(err, CLF_ERR_CONFIG,
                             "blocks.attention.window needs causal self-attention (a decoder)");
    if (s->lin_k > 0 && (s->act16 != CLF_DT_F32 || s->kind != MI_KIND_ENCODER))
        return clf_error_set(err, CLF_ERR_CONFIG,
                             "blocks.attention.type linformer: an encoder in train.precision fp32");
    if (s->perf_m > 0 && s->act16 != CLF_DT_F32)
        return clf_error_set(err, CLF_ERR_CONFIG,
                             "blocks.attention.type performer: train.precision fp32");
    return CLF_OK;
}

static clf_status spec_from_config(const clf_model_config *cfg, int vocab_size,
                                   const clf_model_limits *lim, mi_spec *s, clf_model_optim *o,
                                   clf_error *err)
{
    memset(s, 0, sizeof *s);
    memset(o, 0, sizeof *o);
    switch (cfg->kind) {
        case CLF_MODEL_DECODER: s->kind = MI_KIND_DECODER; break;
        case CLF_MODEL_ENCODER: s->kind = MI_KIND_ENCODER; break;
        case CLF_MODEL_ENCODER_DECODER: s->kind = MI_KIND_ENCDEC; break;
        default: return clf_error_set(err, CLF_ERR_CONFIG, "model.kind: unknown value");
    }
    int want_cls = s->kind == MI_KIND_ENCODER;
    if ((cfg->head.type != CLF_HEAD_LM) != want_cls)
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "model.head.type %s: kind %s needs the %s head",
                             clf_config_head_name(cfg->head.type), clf_config_kind_name(cfg->kind),
                             want_cls ? "classifier (or none)" : "lm");
    if (want_cls && cfg->head.type == CLF_HEAD_NONE) {
        s->head = MI_HEAD_NONE;
        s->pool = cfg->head.pool == CLF_POOL_MEAN ? MI_POOL_MEAN : MI_POOL_CLS;
    } else if (want_cls) {
        s->head = MI_HEAD_CLASSIFIER;
        s->NL = cfg->head.labels;
        s->pool = cfg->head.pool == CLF_POOL_MEAN ? MI_POOL_MEAN : MI_POOL_CLS;
        if (s->NL < 2)
            return clf_error_set(err, CLF_ERR_ARG,
                                 "model.head.labels is %d: the classifier needs the number of "
                                 "labels (>= 2) before the model is built (take it from the "
                                 "data first)",
                                 s->NL);
    }
    if (cfg->train.optimizer.type == CLF_OPT_ADAM && cfg->train.optimizer.weight_decay > 0)
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "train.optimizer: adam with L2 weight decay is not supported; "
                             "use adamw (decoupled) or weight_decay: 0");
    int V = vocab_size > cfg->vocab.size ? vocab_size : cfg->vocab.size;
    if (V <= 0)
        return clf_error_set(err, CLF_ERR_ARG, "vocabulary size %d: expected > 0", V);
    const clf_blocks_config *bk = &cfg->blocks;
    s->T = cfg->context;
    s->C = cfg->embedding.dim;
    s->V = V;
    s->Le = clf_config_encoder_layers(cfg);
    s->Ld = clf_config_decoder_layers(cfg);
    s->L = s->Le + s->Ld;
    s->NH = bk->attention.heads;
    s->NKV = clf_config_kv_heads(cfg);
    s->HS = clf_config_head_size(cfg);
    s->H = bk->ffn.hidden > 0 ? bk->ffn.hidden : 4 * s->C;
    if (s->T <= 0 || s->C <= 0 || s->Le < 0 || s->Ld < 0 || s->NH <= 0 || s->HS * s->NH != s->C ||
        s->NKV > s->NH || s->NH % s->NKV != 0)
        return clf_error_set(err, CLF_ERR_CONFIG,
                             "model sizes: context %d, dim %d, heads %d, layers %d are not a "
                             "valid model (validate the config first)",
                             s->T, s->C, s->NH, s->L);
    /* The one mapping from the config's activation to the kernels' (ops.h). */
    switch (bk->ffn.activation) {
        case CLF_FFN_RELU: s->act = CLF_ACT_RELU; break;
        case CLF_FFN_GELU: s->act = CLF_ACT_GELU_ERF; break;
        case CLF_FFN_GELU_TANH: s->act = CLF_ACT_GELU_TANH; break;
        case CLF_FFN_SWIGLU:
            s->act = CLF_ACT_SILU;
            s->swiglu = 1;
            break;
        default: return clf_error_set(err, CLF_ERR_CONFIG, "ffn.activation: unknown value");
    }
    s->fc_rows = s->swiglu ? 2 * s->H : s->H;
    switch (cfg->positional.type) {
        case CLF_POS_LEARNED: s->pos = MI_POS_LEARNED; break;
        case CLF_POS_SINUSOIDAL: s->pos = MI_POS_SINUSOIDAL; break;
        case CLF_POS_ROPE: s->pos = MI_POS_ROPE; break;
        case CLF_POS_ALIBI: s->pos = MI_POS_ALIBI; break;
        case CLF_POS_RELATIVE:
            s->pos = MI_POS_REL;
            s->relk = clf_config_max_distance(cfg);
            if (2 * s->relk + 1 > FA_QRW_MAX)
                return clf_error_set(err, CLF_ERR_CONFIG,
                                     "positional: relative clips at most at %d (validate the "
                                     "config first)",
                                     (FA_QRW_MAX - 1) / 2);
            break;
        case CLF_POS_T5:
            s->pos = MI_POS_T5;
            s->nbk = cfg->positional.num_buckets;
            s->maxd = clf_config_max_distance(cfg);
            if (s->nbk < 4 || s->nbk > FA_NBK_MAX || s->maxd < 1)
                return clf_error_set(err, CLF_ERR_CONFIG,
                                     "positional: t5 needs 4 to %d buckets and a max_distance "
                                     "of at least 1 (validate the config first)",
                                     FA_NBK_MAX);
            break;
        default: return clf_error_set(err, CLF_ERR_CONFIG, "positional.type: unknown value");
    }
    if (s->pos == MI_POS_ROPE && (s->HS % 2) != 0)
        return clf_error_set(err, CLF_ERR_CONFIG, "rope needs an even head size, not %d", s->HS);
    clf_status st;
    if (s->pos == MI_POS_ROPE &&
        (st = rope_of_config(&cfg->positional, s->T, s->HS, &s->rope, err)) != CLF_OK)
        return st;
    s->emb_scale = cfg->embedding.scale ? sqrtf((float)s->C) : 1.0f;
    s->p_emb = (float)cfg->embedding.dropout;
    s->emb_norm = cfg->embedding.norm == CLF_NORM_NONE      ? MI_NORM_NONE
                  : cfg->embedding.norm == CLF_NORM_RMSNORM ? MI_NORM_RMSNORM
                                                            : MI_NORM_LAYERNORM;
    s->p_attn = (float)bk->attention.dropout;
    s->p_resid = (float)bk->dropout;
    s->p_ffn = (float)bk->ffn.dropout;
    s->attn_bias = bk->attention.bias != 0;
    s->ffn_bias = bk->ffn.bias != 0;
    s->norm = bk->norm.type == CLF_NORM_RMSNORM ? MI_NORM_RMSNORM : MI_NORM_LAYERNORM;
    s->norm_post = bk->norm.placement == CLF_NORM_POST;
    s->norm_bias = s->norm == MI_NORM_LAYERNORM && bk->norm.bias != 0;
    s->norm_eps = (float)bk->norm.eps;
    s->final_norm = cfg->final_norm.type == CLF_NORM_NONE      ? MI_NORM_NONE
                    : cfg->final_norm.type == CLF_NORM_RMSNORM ? MI_NORM_RMSNORM
                                                               : MI_NORM_LAYERNORM;
    s->tied = s->head == MI_HEAD_LM && cfg->head.tie_embedding != 0;
    s->shared_emb = s->kind == MI_KIND_ENCDEC && cfg->share_embeddings != 0;
    s->causal = s->kind != MI_KIND_ENCODER && bk->attention.causal != 0;
    s->recompute = cfg->train.recompute == CLF_RECOMPUTE_BLOCK       ? MI_RECOMPUTE_BLOCK
                   : cfg->train.recompute == CLF_RECOMPUTE_ATTENTION ? MI_RECOMPUTE_ATTN
                                                                     : MI_RECOMPUTE_NONE;
    s->act16 = cfg->train.precision == CLF_PRECISION_BF16   ? CLF_DT_BF16
               : cfg->train.precision == CLF_PRECISION_FP16 ? CLF_DT_F16
                                                            : CLF_DT_F32;
    s->seed = cfg->train.seed;
    st = spec_attention(s, cfg, err);
    if (st != CLF_OK)
        return st;

    const clf_optimizer_config *oc = &cfg->train.optimizer;
    o->beta1 = (float)oc->betas[0];
    o->beta2 = (float)oc->betas[1];
    o->eps = (float)oc->eps;
    o->weight_decay = (float)oc->weight_decay;
    o->layer_decay = oc->layer_decay > 0 ? (float)oc->layer_decay : 1.0f;
    o->grad_clip = (float)cfg->train.grad_clip;
    o->label_smoothing = (float)cfg->train.label_smoothing;
    o->loss_scale_init = (float)cfg->train.loss_scale.init;
    o->loss_scale_interval = cfg->train.loss_scale.interval;
    o->ema = (float)cfg->train.ema;
    return spec_limits(s, lim, err);
}

/* An embedding model (head none) has no loss: nothing to train. */
static clf_status check_trainable(const mi_spec *s, unsigned flags, clf_error *err)
{
    if (s->head == MI_HEAD_NONE && (flags & CLF_MODEL_TRAIN))
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "model.head.type none: an embedding model has no loss to train; "
                             "fine-tune it with a classifier head (clformer train --init)");
    return CLF_OK;
}

static clf_model_limits limits_of_batch(int B)
{
    clf_model_limits l;
    memset(&l, 0, sizeof l);
    l.B = B;
    return l;
}

clf_status clf_model_create(clf_runtime *rt, const clf_model_config *cfg, int vocab_size, int B,
                            unsigned flags, clf_model **out, clf_error *err)
{
    *out = NULL;
    if (rt == NULL || cfg == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "clf_model_create: runtime and config required");
    clf_model_limits lim = limits_of_batch(B);
    return clf_model_create_ex(rt, cfg, vocab_size, &lim, flags, out, err);
}

clf_status clf_model_create_ex(clf_runtime *rt, const clf_model_config *cfg, int vocab_size,
                               const clf_model_limits *lim, unsigned flags, clf_model **out,
                               clf_error *err)
{
    *out = NULL;
    if (rt == NULL || cfg == NULL || lim == NULL)
        return clf_error_set(err, CLF_ERR_ARG,
                             "clf_model_create_ex: runtime, config and limits required");
    mi_spec s;
    clf_model_optim o;
    clf_status st = spec_from_config(cfg, vocab_size, lim, &s, &o, err);
    if (st != CLF_OK)
        return st;
    if ((st = check_trainable(&s, flags, err)) != CLF_OK)
        return st;
    /* what the model will allocate, against what the device has: a clear
     * refusal up front instead of a failed allocation (or, where the driver
     * overcommits, a machine that swaps) */
    clf_model_memory plan;
    if ((st = mi_model_build(NULL, &s, flags, &o, NULL, &plan, err)) != CLF_OK)
        return st;
    const uint64_t have = clf_runtime_device(rt)->global_mem;
    if (have > 0 && plan.total > have)
        return clf_error_set(
            err, CLF_ERR_MEMORY,
            "the model needs %.2f GiB of device memory (parameters %.2f, gradients %.2f, Adam "
            "%.2f, activations %.2f, caches %.2f, GEMM workspace %.2f GiB) at batch %d, but %s "
            "has %.2f GiB: lower "
            "train.batch and raise train.accumulate (the same optimizer step in smaller "
            "micro-batches), or set train.recompute=block",
            (double)plan.total / 1073741824.0, (double)plan.params / 1073741824.0,
            (double)plan.grads / 1073741824.0, (double)plan.optim / 1073741824.0,
            (double)plan.activations / 1073741824.0, (double)plan.caches / 1073741824.0,
            (double)plan.workspace / 1073741824.0, lim->B, clf_runtime_device(rt)->name,
            (double)have / 1073741824.0);
    return mi_model_build(rt, &s, flags, &o, out, NULL, err);
}

clf_status clf_model_memory_plan(const clf_model_config *cfg, int vocab_size,
                                 const clf_model_limits *lim, unsigned flags, clf_model_memory *out,
                                 clf_error *err)
{
    mi_spec s;
    clf_model_optim o;
    memset(out, 0, sizeof *out);
    clf_status st = spec_from_config(cfg, vocab_size, lim, &s, &o, err);
    if (st != CLF_OK)
        return st;
    if ((st = check_trainable(&s, flags, err)) != CLF_OK)
        return st;
    return mi_model_build(NULL, &s, flags, &o, NULL, out, err);
}

clf_status clf_model_check_config(const clf_model *m, const clf_model_config *cfg, int vocab_size,
                                  clf_error *err)
{
    mi_spec s;
    clf_model_optim o;
    clf_model_limits lim = limits_of_batch(1);
    clf_status st = spec_from_config(cfg, vocab_size, &lim, &s, &o, err);
    if (st != CLF_OK)
        return st;
    const mi_spec *a = &m->s;
    const struct {
        const char *key;
        double model, config;
    } f[] = {
        {"model.kind (index)", a->kind, s.kind},
        {"vocabulary size", a->V, s.V},
        {"context", a->T, s.T},
        {"embedding.dim", a->C, s.C},
        {"encoder layers", a->Le, s.Le},
        {"decoder layers", a->Ld, s.Ld},
        {"blocks.attention.heads", a->NH, s.NH},
        {"blocks.attention.kv_heads", a->NKV, s.NKV},
        {"blocks.ffn.hidden", a->H, s.H},
        {"blocks.ffn.activation (index)", a->act, s.act},
        {"positional.type (index)", a->pos, s.pos},
        {"positional.rope_theta", a->rope.theta, s.rope.theta},
        {"positional.num_buckets", a->nbk, s.nbk},
        {"positional.max_distance", a->maxd, s.maxd},
        {"positional.max_distance (relative)", a->relk, s.relk},
        {"positional.rope_scaling.factor", a->rope.factor, s.rope.factor},
        {"positional.rope_scaling (ramp start)", a->rope.ramp_lo, s.rope.ramp_lo},
        {"positional.rope_scaling (ramp end)", a->rope.ramp_hi, s.rope.ramp_hi},
        {"positional.rope_scaling (attention factor)", a->rope.mscale, s.rope.mscale},
        {"embedding.scale (factor)", a->emb_scale, s.emb_scale},
        {"blocks.attention.bias", a->attn_bias, s.attn_bias},
        {"blocks.ffn.bias", a->ffn_bias, s.ffn_bias},
        {"blocks.attention.causal", a->causal, s.causal},
        {"blocks.attention.window", a->window, s.window},
        {"blocks.attention.global", a->glob, s.glob},
        {"blocks.attention.stride", a->stride, s.stride},
        {"blocks.attention.random_blocks", a->rnd, s.rnd},
        {"blocks.attention.block (when sparse)", a->sp_bs, s.sp_bs},
        {"blocks.attention.proj (linformer)", a->lin_k, s.lin_k},
        {"blocks.attention.features (performer)", a->perf_m, s.perf_m},
        {"blocks.norm.type (index)", a->norm, s.norm},
        {"blocks.norm.bias", a->norm_bias, s.norm_bias},
        {"blocks.norm.placement (1 = post)", a->norm_post, s.norm_post},
        {"blocks.norm.eps", a->norm_eps, s.norm_eps},
        {"final_norm.type (index)", a->final_norm, s.final_norm},
        {"embedding.norm (index)", a->emb_norm, s.emb_norm},
        {"head.type (index)", a->head, s.head},
        {"head.tie_embedding", a->tied, s.tied},
        {"share_embeddings", a->shared_emb, s.shared_emb},
        {"head.labels", a->NL, s.NL},
        {"head.pool (index)", a->pool, s.pool},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].model != f[i].config)
            return clf_error_set(err, CLF_ERR_FORMAT,
                                 "the model and the configuration differ in %s: %g here, %g "
                                 "there",
                                 f[i].key, f[i].model, f[i].config);
    return CLF_OK;
}

void clf_model_sparse_share(const clf_model_config *cfg, size_t *visited, size_t *pairs)
{
    const clf_attention_config *a = &cfg->blocks.attention;
    *visited = *pairs = 0;
    if (a->global <= 0 && a->stride <= 0 && a->random_blocks <= 0)
        return;
    const size_t bs = (size_t)a->block, nb = ((size_t)cfg->context + bs - 1) / bs;
    const size_t R = (size_t)a->random_blocks, W = (size_t)a->window, S = (size_t)a->stride;
    int32_t *rnd = malloc((nb * R + 1) * sizeof *rnd);
    if (rnd == NULL)
        return;
    clf_attn_sparse_draw(rnd, nb, R, cfg->train.seed);
    *visited = clf_attn_sparse_visits(nb, bs, W, (size_t)a->global, S, rnd, R);
    *pairs = nb * (nb + 1) / 2;
    free(rnd);
}
