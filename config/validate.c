/*
 * validate.c - rules that involve more than one key, and the values that
 * default to another key (clf_config_resolve).
 *
 * Single values (types, ranges, enum names) are checked while parsing,
 * against the schema table; here go the combinations: heads dividing the
 * dimension, rope needing an even head size, the head that each model kind
 * needs, schedules that need a step count, and so on. Each rule names the
 * offending key(s) by their offset in the struct, and a report callback
 * (given by the loader) turns that into the file position where the key was
 * written, or the --set flag that set it.
 *
 * Not here: anything that needs the data (the vocabulary size of a char
 * tokenizer, the number of labels) - the model builder checks those.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"

#define OFF(m) offsetof(clf_model_config, m)
#define NONE CLF_CFG_NO_FIELD

void clf_config_resolve(clf_model_config *c)
{
    if (c->head.tie_embedding < 0)
        c->head.tie_embedding = c->head.type == CLF_HEAD_LM;
    if (c->blocks.attention.kv_heads == 0)
        c->blocks.attention.kv_heads = c->blocks.attention.heads;
    if (c->positional.rope_scaling.type != CLF_ROPE_SCALE_NONE &&
        c->positional.rope_scaling.original_context == 0)
        c->positional.rope_scaling.original_context = c->context;
    if (c->blocks.ffn.hidden == 0 && c->embedding.dim > 0 && c->embedding.dim <= 262144)
        c->blocks.ffn.hidden = 4 * c->embedding.dim;
    if (c->kind == CLF_MODEL_ENCODER_DECODER) {
        if (c->blocks.encoder_repeat == 0)
            c->blocks.encoder_repeat = c->blocks.repeat;
        if (c->blocks.decoder_repeat == 0)
            c->blocks.decoder_repeat = c->blocks.repeat;
    }
    if (c->vocab.tokenizer == CLF_TOKENIZER_BPE && c->vocab.size == 0 && c->vocab.path[0] == '\0')
        c->vocab.size = 8000;
}

typedef struct vstate {
    clf_cfg_report_fn report;
    void *user;
    clf_error *err;
} vstate;

static clf_status bad(const vstate *v, size_t off, size_t off2, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static clf_status bad(const vstate *v, size_t off, size_t off2, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (v->report)
        return v->report(v->user, off, off2, v->err, msg);
    return clf_error_set(v->err, CLF_ERR_CONFIG, "%s", msg);
}

/* Every single value against its table entry, as the parser checks them:
 * a struct filled in by code (not parsed) gets the same guarantees. */
static clf_status check_values(const clf_model_config *c, const clf_cfg_field *table,
                               const vstate *v)
{
    for (const clf_cfg_field *f = table; f->key; f++) {
        const char *p = (const char *)c + f->offset;
        char path[256], want[512];
        if (f->type == CLF_CFG_MAP) {
            clf_status st = check_values(c, f->sub, v);
            if (st != CLF_OK)
                return st;
            continue;
        }
        clf_cfg_path_of(f->offset, path, sizeof path);
        clf_cfg_expected(f, want, sizeof want);
        switch (f->type) {
            case CLF_CFG_INT: {
                int x = *(const int *)p;
                if (!clf_cfg_in_range(f, (double)x))
                    return bad(v, f->offset, NONE, "%s: expected %s, got %d", path, want, x);
                break;
            }
            case CLF_CFG_DOUBLE: {
                double x = *(const double *)p;
                if (!clf_cfg_in_range(f, x))
                    return bad(v, f->offset, NONE, "%s: expected %s, got %g", path, want, x);
                break;
            }
            case CLF_CFG_PAIR: {
                const double *x = (const double *)p;
                if (!clf_cfg_in_range(f, x[0]) || !clf_cfg_in_range(f, x[1]))
                    return bad(v, f->offset, NONE, "%s: expected %s, got [%g, %g]", path, want,
                               x[0], x[1]);
                break;
            }
            case CLF_CFG_BOOL: {
                int x = *(const int *)p;
                if (x != 0 && x != 1)
                    return bad(v, f->offset, NONE, "%s: expected %s, got %d", path, want, x);
                break;
            }
            case CLF_CFG_ENUM: {
                int x = *(const int *)p, n = 0;
                while (f->names[n])
                    n++;
                if (x < f->first || x >= f->first + n)
                    return bad(v, f->offset, NONE, "%s: expected %s, got the value %d", path, want,
                               x);
                break;
            }
            case CLF_CFG_STRING:
                if (memchr(p, '\0', f->size) == NULL)
                    return bad(v, f->offset, NONE, "%s: expected %s (not NUL-terminated)", path,
                               want);
                break;
            case CLF_CFG_U64:
            case CLF_CFG_MAP: break;
        }
    }
    return CLF_OK;
}

/* Sparse attention beside the window, and packing: which kinds take them. */
static clf_status check_sparse_packing(const clf_model_config *c, const vstate *v, const char *kind)
{
    const clf_attention_config *at = &c->blocks.attention;
    if (at->global > 0 || at->stride > 0 || at->random_blocks > 0) {
        const size_t key = at->global > 0   ? OFF(blocks.attention.global)
                           : at->stride > 0 ? OFF(blocks.attention.stride)
                                            : OFF(blocks.attention.random_blocks);
        const char *name = at->global > 0 ? "global" : at->stride > 0 ? "stride" : "random_blocks";
        if (c->kind != CLF_MODEL_DECODER || !at->causal || at->window <= 0)
            return bad(v, key, OFF(blocks.attention.window),
                       "blocks.attention.%s: sparse patterns add to the sliding window of causal "
                       "self-attention (kind decoder, causal: true, window > 0: their local part); "
                       "got kind %s, window %d",
                       name, kind, at->window);
    }
    if (at->type == CLF_ATTN_LINFORMER) {
        const clf_positional_type pt = c->positional.type;
        if (c->kind != CLF_MODEL_ENCODER)
            return bad(v, OFF(blocks.attention.type), OFF(kind),
                       "blocks.attention.type: linformer projects an encoder's keys and values "
                       "along the sequence (kind encoder), not kind %s",
                       kind);
        if (pt != CLF_POS_LEARNED && pt != CLF_POS_SINUSOIDAL)
            return bad(v, OFF(blocks.attention.type), OFF(positional.type),
                       "blocks.attention.type: linformer's projected keys keep no positions of "
                       "their own: positional.type learned or sinusoidal, not %s",
                       clf_config_positional_name(pt));
        if (at->proj > c->context)
            return bad(v, OFF(blocks.attention.proj), OFF(context),
                       "blocks.attention.proj: expected at most the context %d, got %d", c->context,
                       at->proj);
        if (c->train.precision != CLF_PRECISION_FP32)
            return bad(v, OFF(blocks.attention.type), OFF(train.precision),
                       "blocks.attention.type: linformer trains in train.precision fp32, not %s",
                       c->train.precision == CLF_PRECISION_BF16 ? "bf16" : "fp16");
    }
    if (at->type == CLF_ATTN_PERFORMER) {
        const clf_positional_type pt = c->positional.type;
        const char *why =
            pt == CLF_POS_ALIBI || pt == CLF_POS_T5 || pt == CLF_POS_RELATIVE
                ? "positional.type: alibi, t5 and relative act on the scores, which "
                  "random features never form (learned, sinusoidal or rope)"
            : at->window > 0 || at->global > 0 || at->stride > 0 || at->random_blocks > 0
                ? "a window or sparse pattern selects scores, which random features "
                  "never form"
            : clf_config_kv_heads(c) != at->heads
                ? "one key/value head per query head (kv_heads = heads)"
            : at->dropout > 0  ? "no attention dropout (there are no probabilities)"
            : c->train.packing ? "no train.packing (documents need per-document sums)"
            : c->train.precision != CLF_PRECISION_FP32 ? "train.precision fp32"
            : c->embedding.dim / at->heads > 256       ? "a head size of at most 256"
                                                       : NULL;
        if (why != NULL)
            return bad(v, OFF(blocks.attention.type), NONE,
                       "blocks.attention.type: performer needs %s", why);
    }
    if (at->block % 16 != 0)
        return bad(v, OFF(blocks.attention.block), NONE,
                   "blocks.attention.block: expected a multiple of 16 in [16, 128], got %d",
                   at->block);
    if (c->train.packing && c->kind != CLF_MODEL_DECODER)
        return bad(v, OFF(train.packing), OFF(kind),
                   "train.packing: packing documents into windows is for kind decoder (the "
                   "sentence kinds batch by length instead), not kind %s",
                   kind);
    return CLF_OK;
}

static clf_status check_model(const clf_model_config *c, const vstate *v)
{
    const int C = c->embedding.dim, NH = c->blocks.attention.heads;
    const char *kind = clf_config_kind_name(c->kind);

    if (NH > C || C % NH != 0)
        return bad(v, OFF(blocks.attention.heads), OFF(embedding.dim),
                   "blocks.attention.heads: %d heads do not divide embedding.dim %d "
                   "(the head size must be dim / heads)",
                   NH, C);
    const int KVH = clf_config_kv_heads(c);
    if (KVH < 1 || KVH > NH || NH % KVH != 0)
        return bad(v, OFF(blocks.attention.kv_heads), OFF(blocks.attention.heads),
                   "blocks.attention.kv_heads: expected a number of key/value heads that divides "
                   "blocks.attention.heads %d (1 = multi-query, %d = multi-head), got %d",
                   NH, NH, KVH);
    if (c->positional.type == CLF_POS_ROPE && (C / NH) % 2 != 0)
        return bad(v, OFF(positional.type), OFF(blocks.attention.heads),
                   "positional.type: rope needs an even head size, but embedding.dim %d / "
                   "blocks.attention.heads %d = %d",
                   C, NH, C / NH);
    if (c->positional.type == CLF_POS_T5) {
        /* T5's buckets: half exact, half logarithmic up to max_distance (an
         * encoder's in each direction) */
        const int bidir = c->kind != CLF_MODEL_DECODER, nb = c->positional.num_buckets;
        const int exact = c->kind == CLF_MODEL_ENCODER ? nb / 4 : nb / 2; /* the fewest */
        if (bidir && nb % 2 != 0)
            return bad(v, OFF(positional.num_buckets), OFF(kind),
                       "positional.num_buckets: an encoder's buckets split between the two "
                       "directions: expected an even number, got %d",
                       nb);
        if (clf_config_max_distance(c) <= exact)
            return bad(v, OFF(positional.max_distance), OFF(positional.num_buckets),
                       "positional.max_distance: expected above the %d exact distances of %d "
                       "buckets, got %d",
                       exact, nb, clf_config_max_distance(c));
    }
    if (c->positional.type == CLF_POS_RELATIVE && clf_config_max_distance(c) > 64)
        return bad(v, OFF(positional.max_distance), OFF(positional.type),
                   "positional.max_distance: relative positions clip distances at most at 64 "
                   "(2 k + 1 learned vectors per block), got %d",
                   c->positional.max_distance);
    const clf_rope_scaling_type rs = c->positional.rope_scaling.type;
    if (rs != CLF_ROPE_SCALE_NONE && c->positional.type != CLF_POS_ROPE)
        return bad(v, OFF(positional.rope_scaling.type), OFF(positional.type),
                   "positional.rope_scaling.type: %s scaling is for rotary positions "
                   "(positional.type: rope), not %s",
                   clf_config_rope_scaling_name(rs),
                   clf_config_positional_name(c->positional.type));
    if (rs == CLF_ROPE_SCALE_YARN &&
        !(c->positional.rope_scaling.beta_fast > c->positional.rope_scaling.beta_slow))
        return bad(v, OFF(positional.rope_scaling.beta_fast),
                   OFF(positional.rope_scaling.beta_slow),
                   "positional.rope_scaling.beta_fast: expected above beta_slow %g, got %g",
                   c->positional.rope_scaling.beta_slow, c->positional.rope_scaling.beta_fast);
    if (C / NH > 256)
        return bad(v, OFF(blocks.attention.heads), OFF(embedding.dim),
                   "blocks.attention.heads: a head size of %d (embedding.dim %d / %d heads) is "
                   "over the fused attention's 256",
                   C / NH, C, NH);
    if (c->blocks.attention.window > 0 &&
        (c->kind != CLF_MODEL_DECODER || !c->blocks.attention.causal))
        return bad(v, OFF(blocks.attention.window), OFF(kind),
                   "blocks.attention.window: a sliding window needs causal self-attention "
                   "(kind decoder with causal: true), not kind %s%s",
                   kind, c->kind == CLF_MODEL_DECODER ? " with causal: false" : "");
    if (c->train.optimizer.layer_decay != 1.0 && c->kind == CLF_MODEL_ENCODER_DECODER)
        return bad(v, OFF(train.optimizer.layer_decay), OFF(kind),
                   "train.optimizer.layer_decay: layer-wise learning rates are for one stack of "
                   "blocks (kind decoder or encoder), not kind %s",
                   kind);
    clf_status st = check_sparse_packing(c, v, kind);
    if (st != CLF_OK)
        return st;
    if (c->train.ema > 0 && c->train.shard_optimizer)
        return bad(v, OFF(train.ema), OFF(train.shard_optimizer),
                   "train.ema: the moving average is kept whole on every rank, which "
                   "train.shard_optimizer (each rank updating its slice) does not allow");
    if (c->blocks.ffn.hidden <= 0)
        return bad(v, OFF(blocks.ffn.hidden), NONE,
                   "blocks.ffn.hidden: expected an integer >= 1, got %d", c->blocks.ffn.hidden);

    /* what each kind needs */
    if (c->kind == CLF_MODEL_ENCODER) {
        if (c->blocks.attention.causal)
            return bad(v, OFF(blocks.attention.causal), OFF(kind),
                       "blocks.attention.causal: kind encoder attends in both directions; set "
                       "causal: false");
        if (c->head.type == CLF_HEAD_LM)
            return bad(v, OFF(head.type), OFF(kind),
                       "head.type: kind encoder needs a classifier head (or none: an embedding "
                       "model), got %s",
                       clf_config_head_name(c->head.type));
    } else {
        if (!c->blocks.attention.causal)
            return bad(v, OFF(blocks.attention.causal), OFF(kind),
                       "blocks.attention.causal: kind %s predicts the next token and needs "
                       "causal: true",
                       kind);
        if (c->head.type != CLF_HEAD_LM)
            return bad(v, OFF(head.type), OFF(kind), "head.type: kind %s needs an lm head, got %s",
                       kind, clf_config_head_name(c->head.type));
    }
    if (c->kind != CLF_MODEL_ENCODER_DECODER) {
        if (c->blocks.encoder_repeat != 0)
            return bad(v, OFF(blocks.encoder_repeat), OFF(kind),
                       "blocks.encoder_repeat: only for kind encoder-decoder (kind is %s; use "
                       "blocks.repeat)",
                       kind);
        if (c->blocks.decoder_repeat != 0)
            return bad(v, OFF(blocks.decoder_repeat), OFF(kind),
                       "blocks.decoder_repeat: only for kind encoder-decoder (kind is %s; use "
                       "blocks.repeat)",
                       kind);
        if (c->share_embeddings)
            return bad(v, OFF(share_embeddings), OFF(kind),
                       "share_embeddings: only for kind encoder-decoder (kind is %s)", kind);
    } else if (c->blocks.encoder_repeat < 1 || c->blocks.decoder_repeat < 1) {
        return bad(v, OFF(blocks.encoder_repeat), OFF(blocks.decoder_repeat),
                   "blocks.encoder_repeat/decoder_repeat: both stacks need at least one block");
    }

    /* the head */
    if (c->head.tie_embedding && c->head.type != CLF_HEAD_LM)
        return bad(v, OFF(head.tie_embedding), OFF(head.type),
                   "head.tie_embedding: only an lm head can share the token embedding "
                   "(head.type is %s)",
                   clf_config_head_name(c->head.type));
    if (c->head.type == CLF_HEAD_CLASSIFIER && c->head.labels == 1)
        return bad(v, OFF(head.labels), NONE,
                   "head.labels: a classifier needs at least 2 labels (or 0 = from the data)");
    if (c->head.type == CLF_HEAD_NONE && c->head.labels != 0)
        return bad(v, OFF(head.labels), OFF(head.type),
                   "head.labels: only for a classifier head (head.type is none)");
    if (c->head.type == CLF_HEAD_LM && c->head.labels != 0)
        return bad(v, OFF(head.labels), OFF(head.type),
                   "head.labels: only for a classifier head (head.type is lm)");

    /* the vocabulary */
    if (c->vocab.tokenizer == CLF_TOKENIZER_BYTE && c->vocab.size != 0 && c->vocab.size < 256)
        return bad(v, OFF(vocab.size), OFF(vocab.tokenizer),
                   "vocab.size: the byte tokenizer has 256 tokens; expected 0 or >= 256, got %d",
                   c->vocab.size);
    if (c->vocab.tokenizer != CLF_TOKENIZER_BPE && c->vocab.tokenizer != CLF_TOKENIZER_WORDPIECE &&
        c->vocab.path[0] != '\0')
        return bad(v, OFF(vocab.path), OFF(vocab.tokenizer),
                   "vocab.path: a tokenizer file is only read for tokenizer: bpe or wordpiece");
    return CLF_OK;
}

static clf_status check_train(const clf_model_config *c, const vstate *v)
{
    const clf_train_config *t = &c->train;
    if (t->steps == 0 && t->epochs == 0)
        return bad(v, OFF(train.steps), OFF(train.epochs),
                   "train.steps: 0 steps needs train.epochs > 0 (one of them must bound "
                   "training)");
    /* warmup > steps is allowed, as in nanoGPT: a short run (--set
     * train.steps=30) simply ends inside the warmup. */
    if (t->schedule.type == CLF_SCHED_COSINE) {
        if (t->steps == 0)
            return bad(v, OFF(train.schedule.type), OFF(train.steps),
                       "train.schedule.type: cosine decays over train.steps, which is 0");
        if (t->schedule.min_lr > t->optimizer.lr)
            return bad(v, OFF(train.schedule.min_lr), OFF(train.optimizer.lr),
                       "train.schedule.min_lr: %g is above train.optimizer.lr %g",
                       t->schedule.min_lr, t->optimizer.lr);
    }
    if (t->schedule.type == CLF_SCHED_NOAM && t->schedule.warmup < 1)
        return bad(v, OFF(train.schedule.warmup), OFF(train.schedule.type),
                   "train.schedule.warmup: the noam schedule needs warmup >= 1");
    if (t->batch_tokens > 0 && c->kind == CLF_MODEL_DECODER)
        return bad(v, OFF(train.batch_tokens), OFF(kind),
                   "train.batch_tokens: a token budget batches the encoder kinds' sentences; "
                   "a decoder trains on windows of train.batch x context tokens");
    if (t->early_stop.metric == CLF_METRIC_ACCURACY && c->head.type != CLF_HEAD_CLASSIFIER)
        return bad(v, OFF(train.early_stop.metric), OFF(head.type),
                   "train.early_stop.metric: accuracy needs a classifier head");
    if (t->early_stop.metric == CLF_METRIC_BLEU && c->kind != CLF_MODEL_ENCODER_DECODER)
        return bad(v, OFF(train.early_stop.metric), OFF(kind),
                   "train.early_stop.metric: bleu needs kind encoder-decoder");
    return CLF_OK;
}

clf_status clf_cfg_validate_with(const clf_model_config *cfg, clf_cfg_report_fn report, void *user,
                                 clf_error *err)
{
    vstate v = {report, user, err};
    clf_status st = check_values(cfg, clf_cfg_root, &v);
    if (st != CLF_OK)
        return st;
    st = check_model(cfg, &v);
    if (st != CLF_OK)
        return st;
    return check_train(cfg, &v);
}

clf_status clf_config_validate(const clf_model_config *cfg, clf_error *err)
{
    return clf_cfg_validate_with(cfg, NULL, NULL, err);
}

clf_status clf_config_set_context(clf_model_config *cfg, int context, int scaling, clf_error *err)
{
    const int T0 = cfg->context;
    const clf_positional_type pos = cfg->positional.type;
    if (context < 1 || context > 1048576)
        return clf_error_set(err, CLF_ERR_ARG, "expected a context in [1, 1048576], got %d",
                             context);
    if (pos == CLF_POS_LEARNED && context != T0)
        return clf_error_set(err, CLF_ERR_ARG,
                             "the model learned a table of %d positions (positional.type: "
                             "learned): its context stays %d",
                             T0, T0);
    if (scaling >= 0 && (context <= T0 || pos != CLF_POS_ROPE))
        return clf_error_set(err, CLF_ERR_ARG,
                             "rope scaling applies to rotary positions past the trained context "
                             "(positional.type: rope, context above %d); this model has %s "
                             "positions and the context asked is %d",
                             T0, clf_config_positional_name(pos), context);
    if (scaling > CLF_ROPE_SCALE_YARN)
        return clf_error_set(err, CLF_ERR_ARG, "rope scaling %d: unknown", scaling);
    if (context > T0 && pos == CLF_POS_ROPE &&
        (scaling >= 0 || cfg->positional.rope_scaling.type == CLF_ROPE_SCALE_NONE)) {
        cfg->positional.rope_scaling.type =
            scaling >= 0 ? (clf_rope_scaling_type)scaling : CLF_ROPE_SCALE_YARN;
        const int none = cfg->positional.rope_scaling.type == CLF_ROPE_SCALE_NONE;
        cfg->positional.rope_scaling.factor = none ? 1.0 : (double)context / (double)T0;
        cfg->positional.rope_scaling.original_context = none ? 0 : T0;
    }
    cfg->context = context;
    return clf_config_validate(cfg, err);
}
