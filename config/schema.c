/*
 * schema.c - the model file's schema as const tables, the defaults, the
 * enum names, and the two walks that need no YAML parser: the canonical
 * dump (clf_config_to_yaml) and the field-by-field comparison
 * (clf_config_diff).
 *
 * Design: one table per YAML mapping ({key, type, offset, range or enum
 * names, child table}); offsets are into the whole clf_model_config, so a
 * leaf is found from any table without a base pointer. The dump writes
 * every key in table order, numbers with the fewest digits that read back
 * to the same double (and always with a '.', so YAML 1.1 readers such as
 * PyYAML also see floats), strings double-quoted with escapes.
 *
 * Not here: reading YAML (config.c) and cross-field rules (validate.c).
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

#define OFF(m) offsetof(clf_model_config, m)
#define BIG 2147483647.0

/* ---- enum names --------------------------------------------------------------- */

static const char *const kind_names[] = {"decoder", "encoder", "encoder-decoder", NULL};
static const char *const tokenizer_names[] = {"char", "byte", "bpe", "wordpiece", NULL};
static const char *const positional_names[] = {"learned", "sinusoidal", "rope", "alibi",
                                               "t5",      "relative",   NULL};
static const char *const rope_scaling_names[] = {"none", "linear", "ntk", "yarn", NULL};
static const char *const attention_names[] = {"softmax", "linformer", "performer", NULL};
static const char *const activation_names[] = {"relu", "gelu", "gelu_tanh", "swiglu", NULL};
static const char *const norm_names[] = {"none", "layernorm", "rmsnorm", NULL};
static const char *const placement_names[] = {"pre", "post", NULL};
static const char *const head_names[] = {"lm", "classifier", "none", NULL};
static const char *const pool_names[] = {"cls", "mean", NULL};
static const char *const optimizer_names[] = {"adam", "adamw", NULL};
static const char *const schedule_names[] = {"constant", "cosine", "noam", NULL};
static const char *const metric_names[] = {"loss", "accuracy", "bleu", NULL};
static const char *const recompute_names[] = {"none", "block", "attention", NULL};
static const char *const precision_names[] = {"fp32", "bf16", "fp16", NULL};

/* ---- tables ------------------------------------------------------------------------ */

#define T_MAP(k, m, t)                                                                             \
    {                                                                                              \
        .key = k, .type = CLF_CFG_MAP, .offset = OFF(m), .sub = t                                  \
    }
#define T_INT(k, m, l, h)                                                                          \
    {                                                                                              \
        .key = k, .type = CLF_CFG_INT, .offset = OFF(m), .lo = l, .hi = h                          \
    }
#define T_U64(k, m)                                                                                \
    {                                                                                              \
        .key = k, .type = CLF_CFG_U64, .offset = OFF(m)                                            \
    }
#define T_DBL(k, m, l, h, fl)                                                                      \
    {                                                                                              \
        .key = k, .type = CLF_CFG_DOUBLE, .offset = OFF(m), .lo = l, .hi = h, .flags = fl          \
    }
#define T_PAIR(k, m, l, h, fl)                                                                     \
    {                                                                                              \
        .key = k, .type = CLF_CFG_PAIR, .offset = OFF(m), .lo = l, .hi = h, .flags = fl            \
    }
#define T_BOOL(k, m)                                                                               \
    {                                                                                              \
        .key = k, .type = CLF_CFG_BOOL, .offset = OFF(m)                                           \
    }
#define T_ENUM(k, m, n, f0)                                                                        \
    {                                                                                              \
        .key = k, .type = CLF_CFG_ENUM, .offset = OFF(m), .names = n, .first = f0                  \
    }
#define T_STR(k, m)                                                                                \
    {                                                                                              \
        .key = k, .type = CLF_CFG_STRING, .offset = OFF(m),                                        \
        .size = sizeof(((clf_model_config *)0)->m)                                                 \
    }
#define T_END                                                                                      \
    {                                                                                              \
        .key = NULL                                                                                \
    }

/* "no upper bound" for doubles: the range check treats hi >= 1e300 as none */
#define NOHI 1e308
#define LO_OPEN CLF_CFG_LO_OPEN
#define HI_OPEN CLF_CFG_HI_OPEN

static const clf_cfg_field vocab_t[] = {
    T_ENUM("tokenizer", vocab.tokenizer, tokenizer_names, 0),
    T_INT("size", vocab.size, 0, 16777216),
    T_STR("path", vocab.path),
    T_END,
};
static const clf_cfg_field embedding_t[] = {
    T_INT("dim", embedding.dim, 1, 65536),
    T_BOOL("scale", embedding.scale),
    T_DBL("dropout", embedding.dropout, 0, 1, HI_OPEN),
    T_ENUM("norm", embedding.norm, norm_names, 0),
    T_END,
};
static const clf_cfg_field rope_scaling_t[] = {
    T_ENUM("type", positional.rope_scaling.type, rope_scaling_names, 0),
    T_DBL("factor", positional.rope_scaling.factor, 1, 65536, 0),
    T_INT("original_context", positional.rope_scaling.original_context, 0, 1048576),
    T_DBL("beta_fast", positional.rope_scaling.beta_fast, 0, NOHI, LO_OPEN),
    T_DBL("beta_slow", positional.rope_scaling.beta_slow, 0, NOHI, LO_OPEN),
    T_END,
};
static const clf_cfg_field positional_t[] = {
    T_ENUM("type", positional.type, positional_names, 0),
    T_DBL("rope_theta", positional.rope_theta, 0, NOHI, LO_OPEN),
    T_MAP("rope_scaling", positional.rope_scaling, rope_scaling_t),
    T_INT("num_buckets", positional.num_buckets, 4, 64),
    T_INT("max_distance", positional.max_distance, 0, 1048576),
    T_END,
};
static const clf_cfg_field attention_t[] = {
    T_INT("heads", blocks.attention.heads, 1, 4096),
    T_INT("kv_heads", blocks.attention.kv_heads, 0, 4096),
    T_BOOL("causal", blocks.attention.causal),
    T_DBL("dropout", blocks.attention.dropout, 0, 1, HI_OPEN),
    T_BOOL("bias", blocks.attention.bias),
    T_INT("window", blocks.attention.window, 0, 1 << 30),
    T_INT("global", blocks.attention.global, 0, 1 << 30),
    T_INT("stride", blocks.attention.stride, 0, 1 << 30),
    T_INT("random_blocks", blocks.attention.random_blocks, 0, 64),
    T_INT("block", blocks.attention.block, 16, 128),
    T_ENUM("type", blocks.attention.type, attention_names, 0),
    T_INT("proj", blocks.attention.proj, 0, 1 << 20),
    T_INT("features", blocks.attention.features, 0, 256),
    T_INT("redraw", blocks.attention.redraw, 0, 1 << 30),
    T_END,
};
static const clf_cfg_field ffn_t[] = {
    T_INT("hidden", blocks.ffn.hidden, 0, 1048576),
    T_ENUM("activation", blocks.ffn.activation, activation_names, 0),
    T_BOOL("bias", blocks.ffn.bias),
    T_DBL("dropout", blocks.ffn.dropout, 0, 1, HI_OPEN),
    T_END,
};
static const clf_cfg_field norm_t[] = {
    /* blocks always normalise: "none" is not offered (names from index 1) */
    T_ENUM("type", blocks.norm.type, norm_names + 1, 1),
    T_ENUM("placement", blocks.norm.placement, placement_names, 0),
    T_DBL("eps", blocks.norm.eps, 0, 1, LO_OPEN),
    T_BOOL("bias", blocks.norm.bias),
    T_END,
};
static const clf_cfg_field blocks_t[] = {
    T_INT("repeat", blocks.repeat, 1, 1024),
    T_INT("encoder_repeat", blocks.encoder_repeat, 0, 1024),
    T_INT("decoder_repeat", blocks.decoder_repeat, 0, 1024),
    T_MAP("attention", blocks.attention, attention_t),
    T_MAP("ffn", blocks.ffn, ffn_t),
    T_MAP("norm", blocks.norm, norm_t),
    T_DBL("dropout", blocks.dropout, 0, 1, HI_OPEN),
    T_END,
};
static const clf_cfg_field final_norm_t[] = {
    T_ENUM("type", final_norm.type, norm_names, 0),
    T_END,
};
static const clf_cfg_field head_t[] = {
    T_ENUM("type", head.type, head_names, 0),
    T_BOOL("tie_embedding", head.tie_embedding),
    T_INT("labels", head.labels, 0, 1048576),
    T_ENUM("pool", head.pool, pool_names, 0),
    T_END,
};
static const clf_cfg_field model_t[] = {
    T_ENUM("kind", kind, kind_names, 0),
    T_MAP("vocab", vocab, vocab_t),
    T_INT("context", context, 1, 1048576),
    T_MAP("embedding", embedding, embedding_t),
    T_MAP("positional", positional, positional_t),
    T_MAP("blocks", blocks, blocks_t),
    T_BOOL("share_embeddings", share_embeddings),
    T_MAP("final_norm", final_norm, final_norm_t),
    T_MAP("head", head, head_t),
    T_END,
};

static const clf_cfg_field optimizer_t[] = {
    T_ENUM("type", train.optimizer.type, optimizer_names, 0),
    T_DBL("lr", train.optimizer.lr, 0, NOHI, LO_OPEN),
    T_PAIR("betas", train.optimizer.betas, 0, 1, HI_OPEN),
    T_DBL("eps", train.optimizer.eps, 0, NOHI, LO_OPEN),
    T_DBL("weight_decay", train.optimizer.weight_decay, 0, NOHI, 0),
    T_DBL("layer_decay", train.optimizer.layer_decay, 0, 1, LO_OPEN),
    T_END,
};
static const clf_cfg_field schedule_t[] = {
    T_ENUM("type", train.schedule.type, schedule_names, 0),
    T_INT("warmup", train.schedule.warmup, 0, BIG),
    T_DBL("min_lr", train.schedule.min_lr, 0, NOHI, 0),
    T_END,
};
static const clf_cfg_field eval_t[] = {
    T_INT("every", train.eval.every, 0, BIG),
    T_INT("batches", train.eval.batches, 0, BIG),
    T_END,
};
static const clf_cfg_field early_stop_t[] = {
    T_INT("patience", train.early_stop.patience, 0, BIG),
    T_ENUM("metric", train.early_stop.metric, metric_names, 0),
    T_END,
};
static const clf_cfg_field loss_scale_t[] = {
    T_DBL("init", train.loss_scale.init, 1, 1.8446744073709552e19, 0),
    T_INT("interval", train.loss_scale.interval, 0, BIG),
    T_END,
};
static const clf_cfg_field train_t[] = {
    T_INT("batch", train.batch, 1, 1048576),
    T_INT("batch_tokens", train.batch_tokens, 0, BIG),
    T_INT("steps", train.steps, 0, BIG),
    T_INT("epochs", train.epochs, 0, 1000000),
    T_MAP("optimizer", train.optimizer, optimizer_t),
    T_MAP("schedule", train.schedule, schedule_t),
    T_DBL("grad_clip", train.grad_clip, 0, NOHI, 0),
    T_DBL("label_smoothing", train.label_smoothing, 0, 1, HI_OPEN),
    T_MAP("eval", train.eval, eval_t),
    T_MAP("early_stop", train.early_stop, early_stop_t),
    T_U64("seed", train.seed),
    T_INT("log_every", train.log_every, 1, BIG),
    T_INT("accumulate", train.accumulate, 1, 65536),
    T_ENUM("recompute", train.recompute, recompute_names, 0),
    T_ENUM("precision", train.precision, precision_names, 0),
    T_MAP("loss_scale", train.loss_scale, loss_scale_t),
    T_BOOL("shard_optimizer", train.shard_optimizer),
    T_DBL("ema", train.ema, 0, 1, HI_OPEN),
    T_INT("keep_last", train.keep_last, 0, 1000000),
    T_BOOL("packing", train.packing),
    T_END,
};

/* offset of a section is unused for MAPs at the root (they span the struct) */
const clf_cfg_field clf_cfg_root[] = {
    {.key = "model", .type = CLF_CFG_MAP, .offset = 0, .sub = model_t},
    {.key = "train", .type = CLF_CFG_MAP, .offset = OFF(train), .sub = train_t},
    T_END,
};

/* ---- enum names by value ------------------------------------------------------------ */

static const char *name_of(const char *const *names, int v)
{
    for (int i = 0; names[i]; i++)
        if (i == v)
            return names[i];
    return "?";
}

const char *clf_config_kind_name(clf_model_kind v) { return name_of(kind_names, (int)v); }
const char *clf_config_attention_name(clf_attention_type v)
{
    return name_of(attention_names, (int)v);
}
const char *clf_config_tokenizer_name(clf_tokenizer_type v)
{
    return name_of(tokenizer_names, (int)v);
}
const char *clf_config_positional_name(clf_positional_type v)
{
    return name_of(positional_names, (int)v);
}
const char *clf_config_rope_scaling_name(clf_rope_scaling_type v)
{
    return name_of(rope_scaling_names, (int)v);
}
const char *clf_config_activation_name(clf_activation v)
{
    return name_of(activation_names, (int)v);
}
const char *clf_config_norm_name(clf_norm_type v) { return name_of(norm_names, (int)v); }
const char *clf_config_placement_name(clf_norm_placement v)
{
    return name_of(placement_names, (int)v);
}
const char *clf_config_head_name(clf_head_type v) { return name_of(head_names, (int)v); }
const char *clf_config_pool_name(clf_pool_type v) { return name_of(pool_names, (int)v); }
const char *clf_config_schedule_name(clf_schedule_type v)
{
    return name_of(schedule_names, (int)v);
}
const char *clf_config_metric_name(clf_metric_type v) { return name_of(metric_names, (int)v); }

/* ---- defaults ------------------------------------------------------------------------ */

void clf_config_defaults(clf_model_config *c)
{
    memset(c, 0, sizeof(*c));
    c->kind = CLF_MODEL_DECODER;
    c->vocab.tokenizer = CLF_TOKENIZER_CHAR;
    c->vocab.size = 0;
    c->context = 64;
    c->embedding.dim = 128;
    c->embedding.scale = 0;
    c->embedding.dropout = 0.0;
    c->embedding.norm = CLF_NORM_NONE;
    c->positional.type = CLF_POS_LEARNED;
    c->positional.rope_theta = 10000.0;
    c->positional.num_buckets = 32;
    c->positional.max_distance = 0; /* the type's */
    c->positional.rope_scaling.type = CLF_ROPE_SCALE_NONE;
    c->positional.rope_scaling.factor = 1.0;
    c->positional.rope_scaling.beta_fast = 32.0;
    c->positional.rope_scaling.beta_slow = 1.0;
    c->blocks.repeat = 4;
    c->blocks.attention.heads = 4;
    c->blocks.attention.kv_heads = 0; /* heads */
    c->blocks.attention.causal = 1;
    c->blocks.attention.dropout = 0.0;
    c->blocks.attention.bias = 1;
    c->blocks.attention.block = 64;
    c->blocks.attention.redraw = 1000;
    c->blocks.ffn.hidden = 0; /* 4 * dim */
    c->blocks.ffn.activation = CLF_FFN_GELU;
    c->blocks.ffn.bias = 1;
    c->blocks.ffn.dropout = 0.0;
    c->blocks.norm.type = CLF_NORM_LAYERNORM;
    c->blocks.norm.placement = CLF_NORM_PRE;
    c->blocks.norm.eps = 1e-5;
    c->blocks.norm.bias = 1;
    c->blocks.dropout = 0.0;
    c->share_embeddings = 0;
    c->final_norm.type = CLF_NORM_LAYERNORM;
    c->head.type = CLF_HEAD_LM;
    c->head.tie_embedding = -1; /* resolved: 1 for an lm head, else 0 */
    c->head.labels = 0;
    c->head.pool = CLF_POOL_CLS;

    c->train.batch = 12;
    c->train.accumulate = 1;
    c->train.loss_scale.init = 65536.0;
    c->train.loss_scale.interval = 2000;
    c->train.steps = 2000;
    c->train.epochs = 0;
    c->train.optimizer.type = CLF_OPT_ADAMW;
    c->train.optimizer.lr = 1e-3;
    c->train.optimizer.betas[0] = 0.9;
    c->train.optimizer.betas[1] = 0.99;
    c->train.optimizer.eps = 1e-8;
    c->train.optimizer.weight_decay = 0.1;
    c->train.optimizer.layer_decay = 1.0;
    c->train.schedule.type = CLF_SCHED_COSINE;
    c->train.schedule.warmup = 100;
    c->train.schedule.min_lr = 1e-4;
    c->train.grad_clip = 1.0;
    c->train.label_smoothing = 0.0;
    c->train.eval.every = 250;
    c->train.eval.batches = 20;
    c->train.early_stop.patience = 0;
    c->train.early_stop.metric = CLF_METRIC_LOSS;
    c->train.seed = 1337;
    c->train.log_every = 10;
}

/* ---- lookups ------------------------------------------------------------------------- */

const clf_cfg_field *clf_cfg_find(const clf_cfg_field *table, const char *key)
{
    for (const clf_cfg_field *f = table; f->key; f++)
        if (strcmp(f->key, key) == 0)
            return f;
    return NULL;
}

void clf_cfg_key_list(const clf_cfg_field *table, char *buf, size_t cap)
{
    size_t n = 0;
    if (cap == 0)
        return;
    buf[0] = '\0';
    for (const clf_cfg_field *f = table; f->key; f++) {
        int w = snprintf(buf + n, cap - n, "%s%s", f == table ? "" : ", ", f->key);
        if (w < 0 || (size_t)w >= cap - n)
            return;
        n += (size_t)w;
    }
}

int clf_cfg_in_range(const clf_cfg_field *f, double x)
{
    if (!isfinite(x))
        return 0;
    if ((f->flags & CLF_CFG_LO_OPEN) ? !(x > f->lo) : !(x >= f->lo))
        return 0;
    if (f->hi >= 1e300)
        return 1;
    return (f->flags & CLF_CFG_HI_OPEN) ? x < f->hi : x <= f->hi;
}

const char *clf_cfg_enum_text(const clf_cfg_field *f, int v)
{
    return name_of(f->names, v - f->first);
}

const char *clf_cfg_display(const char *path)
{
    if (path[0] == '\0')
        return "the top level";
    if (strncmp(path, "model.", 6) == 0)
        return path + 6;
    return path;
}

static int path_walk(const clf_cfg_field *table, size_t off, const char *prefix, char *buf,
                     size_t cap)
{
    for (const clf_cfg_field *f = table; f->key; f++) {
        char p[256];
        snprintf(p, sizeof p, "%s%s%s", prefix, prefix[0] ? "." : "", f->key);
        if (f->type == CLF_CFG_MAP) {
            if (path_walk(f->sub, off, p, buf, cap))
                return 1;
        } else if (f->offset == off) {
            snprintf(buf, cap, "%s", clf_cfg_display(p));
            return 1;
        }
    }
    return 0;
}

void clf_cfg_path_of(size_t offset, char *buf, size_t cap)
{
    if (!path_walk(clf_cfg_root, offset, "", buf, cap))
        snprintf(buf, cap, "?");
}

static void num_text(double v, char *buf, size_t cap)
{
    if (v >= 1e300)
        snprintf(buf, cap, "inf");
    else if (fabs(v) < 9e18 && v == (double)(long long)v) /* the cast is defined only in range */
        snprintf(buf, cap, "%lld", (long long)v);
    else
        snprintf(buf, cap, "%g", v);
}

static void range_text(const clf_cfg_field *f, char *buf, size_t cap)
{
    char lo[32], hi[32];
    num_text(f->lo, lo, sizeof lo);
    num_text(f->hi, hi, sizeof hi);
    int no_hi = f->hi >= 1e300 || (f->type == CLF_CFG_INT && f->hi >= BIG);
    if (no_hi)
        snprintf(buf, cap, "%s %s", (f->flags & CLF_CFG_LO_OPEN) ? ">" : ">=", lo);
    else
        snprintf(buf, cap, "in %c%s, %s%c", (f->flags & CLF_CFG_LO_OPEN) ? '(' : '[', lo, hi,
                 (f->flags & CLF_CFG_HI_OPEN) ? ')' : ']');
}

void clf_cfg_expected(const clf_cfg_field *f, char *buf, size_t cap)
{
    char r[96];
    switch (f->type) {
        case CLF_CFG_MAP: {
            char keys[512];
            clf_cfg_key_list(f->sub, keys, sizeof keys);
            snprintf(buf, cap, "a mapping with keys: %s", keys);
            break;
        }
        case CLF_CFG_INT:
            range_text(f, r, sizeof r);
            snprintf(buf, cap, "an integer %s", r);
            break;
        case CLF_CFG_U64: snprintf(buf, cap, "a non-negative integer"); break;
        case CLF_CFG_DOUBLE:
            range_text(f, r, sizeof r);
            snprintf(buf, cap, "a number %s", r);
            break;
        case CLF_CFG_PAIR:
            range_text(f, r, sizeof r);
            snprintf(buf, cap, "a pair of numbers [a, b], each %s", r);
            break;
        case CLF_CFG_BOOL: snprintf(buf, cap, "true or false"); break;
        case CLF_CFG_ENUM: {
            size_t n = (size_t)snprintf(buf, cap, "one of:");
            for (int i = 0; f->names[i] && n < cap; i++)
                n += (size_t)snprintf(buf + n, cap - n, "%s %s", i ? "," : "", f->names[i]);
            break;
        }
        case CLF_CFG_STRING:
            snprintf(buf, cap, "a string of at most %zu bytes", f->size - 1);
            break;
    }
}

/* ---- dump ------------------------------------------------------------------------------- */

typedef struct out_buf {
    char *buf;
    size_t cap, len; /* len counts what the full text needs */
} out_buf;

static void out_printf(out_buf *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_printf(out_buf *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int w = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (w > 0)
        o->len += (size_t)w;
}

/* The shortest text that reads back to the same double: plain decimals
 * between 1e-4 and 1e15 ("0.001", "10000.0"), else the shortest %.*g with a
 * '.' in the mantissa ("1.0e-05"), so that YAML 1.1 readers also see a float. */
static void fmt_double(double v, char *buf, size_t cap)
{
    char t[40];
    double a = fabs(v);
    if (a == 0.0 || (a >= 1e-4 && a < 1e15)) { /* plain decimals: 0.001, 10000.0 */
        for (int p = 1; p <= 20; p++) {
            snprintf(t, sizeof t, "%.*f", p, v);
            if (strtod(t, NULL) == v) {
                snprintf(buf, cap, "%s", t);
                return;
            }
        }
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(t, sizeof t, "%.*g", p, v);
        if (strtod(t, NULL) == v)
            break;
    }
    char *e = strchr(t, 'e');
    if (strchr(t, '.') || strchr(t, 'n') || strchr(t, 'i')) {
        snprintf(buf, cap, "%s", t);
    } else if (e) {
        snprintf(buf, cap, "%.*s.0%s", (int)(e - t), t, e);
    } else {
        snprintf(buf, cap, "%s.0", t);
    }
}

static void dump_string(out_buf *o, const char *s, size_t size)
{
    out_printf(o, "\"");
    for (size_t i = 0; i < size && s[i]; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\')
            out_printf(o, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            out_printf(o, "\\x%02x", ch);
        else
            out_printf(o, "%c", ch);
    }
    out_printf(o, "\"");
}

static void dump_table(out_buf *o, const clf_model_config *c, const clf_cfg_field *table,
                       int indent)
{
    const char *base = (const char *)c;
    for (const clf_cfg_field *f = table; f->key; f++) {
        const char *p = base + f->offset;
        char num[64], num2[64];
        out_printf(o, "%*s%s:", indent, "", f->key);
        switch (f->type) {
            case CLF_CFG_MAP:
                out_printf(o, "\n");
                dump_table(o, c, f->sub, indent + 2);
                continue;
            case CLF_CFG_INT: out_printf(o, " %d", *(const int *)p); break;
            case CLF_CFG_U64: out_printf(o, " %" PRIu64, *(const uint64_t *)p); break;
            case CLF_CFG_DOUBLE:
                fmt_double(*(const double *)p, num, sizeof num);
                out_printf(o, " %s", num);
                break;
            case CLF_CFG_PAIR:
                fmt_double(((const double *)p)[0], num, sizeof num);
                fmt_double(((const double *)p)[1], num2, sizeof num2);
                out_printf(o, " [%s, %s]", num, num2);
                break;
            case CLF_CFG_BOOL: out_printf(o, " %s", *(const int *)p ? "true" : "false"); break;
            case CLF_CFG_ENUM: out_printf(o, " %s", clf_cfg_enum_text(f, *(const int *)p)); break;
            case CLF_CFG_STRING:
                out_printf(o, " ");
                dump_string(o, p, f->size);
                break;
        }
        out_printf(o, "\n");
    }
}

size_t clf_config_to_yaml(const clf_model_config *cfg, char *buf, size_t cap)
{
    out_buf o = {buf, cap, 0};
    if (buf && cap)
        buf[0] = '\0';
    dump_table(&o, cfg, clf_cfg_root, 0);
    return o.len;
}

/* ---- diff --------------------------------------------------------------------------------- */

static int diff_table(const clf_model_config *a, const clf_model_config *b,
                      const clf_cfg_field *table, const char *prefix, char *key, size_t cap)
{
    for (const clf_cfg_field *f = table; f->key; f++) {
        char p[256];
        snprintf(p, sizeof p, "%s%s%s", prefix, prefix[0] ? "." : "", f->key);
        if (f->type == CLF_CFG_MAP) {
            if (diff_table(a, b, f->sub, p, key, cap))
                return 1;
            continue;
        }
        const char *pa = (const char *)a + f->offset, *pb = (const char *)b + f->offset;
        int differ = 0;
        switch (f->type) {
            case CLF_CFG_INT:
            case CLF_CFG_BOOL:
            case CLF_CFG_ENUM: differ = *(const int *)pa != *(const int *)pb; break;
            case CLF_CFG_U64: differ = *(const uint64_t *)pa != *(const uint64_t *)pb; break;
            case CLF_CFG_DOUBLE: /* bitwise: 0.0 and -0.0 differ, as in the dump */
                differ = memcmp(pa, pb, sizeof(double)) != 0;
                break;
            case CLF_CFG_PAIR: differ = memcmp(pa, pb, 2 * sizeof(double)) != 0; break;
            case CLF_CFG_STRING: differ = strncmp(pa, pb, f->size) != 0; break;
            case CLF_CFG_MAP: break;
        }
        if (differ) {
            if (key && cap)
                snprintf(key, cap, "%s", clf_cfg_display(p));
            return 1;
        }
    }
    return 0;
}

int clf_config_diff(const clf_model_config *a, const clf_model_config *b, char *key, size_t key_cap)
{
    if (key && key_cap)
        key[0] = '\0';
    return diff_table(a, b, clf_cfg_root, "", key, key_cap);
}
