/*
 * cmd_info.c - `clformer info MODEL.yaml [--set k=v ...] [--vocab N]
 * [--data FILE] [--batch B] [--json]`: what a model file describes, without
 * a device: parameters per part and in total, FLOPs per token, and the
 * device memory clf_model_create would allocate.
 *
 * Parameter counts follow model.h's tensor table (same shapes): wte [V, C],
 * wpe [T, C] (learned positions) or rel_bias [NH, buckets] (t5), per block ln1/ln2 ([C] weight, + [C] bias
 * for layernorm with bias), attn.qkv [3C, C] (+ [3C]), attn.proj [C, C]
 * (+ [C]), ffn.fc [F, C] (+ [F]; F = H, or 2H for swiglu), ffn.proj [C, H]
 * (+ [C]), ln_f, and lm_head [V, C] unless tied. test_cli.sh checks the total
 * against the count the model itself reports in `clformer train`.
 *
 * FLOPs per token (multiply-add = 2), as nanoGPT's estimate_mfu / Kaplan et
 * al.: with N the parameters used in matrix products for every token (all
 * but the position table and, when untied, the token-embedding lookup),
 *   inference (forward at full context T):  2N + 4 L T C
 *   training (forward + backward):           6N + 12 L T C
 * where 4 L T C is q.k^T and P.v over T keys per layer (the causal mask
 * does half of it on average; the formula counts it whole, as nanoGPT).
 * Generating with the KV cache at position p costs 2N + 4 L p C.
 *
 * Decoder models only, for now (the encoder kinds are refused with a
 * message rather than counted wrong).
 *
 * Vocabulary: --vocab N, else the tokenizer's size: 256 for byte, the
 * distinct characters of --data FILE for char (65 for tiny Shakespeare if
 * no file is given, said in the output), vocab.size for bpe.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_model.h"

typedef struct part {
    const char *name;
    unsigned long long n;
} part;

static void usage(FILE *out)
{
    fprintf(out, "usage: clformer info MODEL.yaml [--set KEY=VALUE ...] [--vocab N] [--data FILE]\n"
                 "                     [--batch B] [--ranks N] [--json]\n"
                 "Parameters per part and in total, FLOPs per token for training and inference,\n"
                 "and device memory for a batch (default: train.batch). Needs no device.\n"
                 "  --set KEY=VALUE   override a config key (repeatable), e.g. train.batch=32\n"
                 "  --vocab N         vocabulary size (default: from the tokenizer / --data)\n"
                 "  --data FILE       build the char vocabulary from this text\n"
                 "  --batch B         batch for the memory estimate\n"
                 "  --ranks N         memory of each of N data-parallel ranks (mpirun -np N; with\n"
                 "                    train.shard_optimizer each holds 1/N of Adam's moments)\n"
                 "  --json            machine-readable output\n");
}

static unsigned long long norm_params(const clf_model_config *c, clf_norm_type t)
{
    unsigned long long C = (unsigned long long)c->embedding.dim;
    if (t == CLF_NORM_NONE)
        return 0;
    if (t == CLF_NORM_LAYERNORM && c->blocks.norm.bias)
        return 2 * C;
    return C;
}

typedef unsigned long long u64;

/* A decoder's parameter and FLOP count, by part. */
typedef struct breakdown {
    u64 C, T, V, L, H;
    u64 wte, wpe, attn, ffn, norms, block, lnf, head, total;
    u64 n_mm;                        /* parameters in matrix products */
    double train_flops, infer_flops; /* per token */
} breakdown;

static void count(const clf_model_config *cfg, long vocab, breakdown *d)
{
    d->C = (u64)cfg->embedding.dim;
    d->T = (u64)cfg->context;
    d->V = (u64)vocab;
    d->L = (u64)clf_config_decoder_layers(cfg);
    d->H = (u64)(cfg->blocks.ffn.hidden > 0 ? cfg->blocks.ffn.hidden : 4 * cfg->embedding.dim);
    const u64 C = d->C, F = cfg->blocks.ffn.activation == CLF_FFN_SWIGLU ? 2 * d->H : d->H;
    const int ab = cfg->blocks.attention.bias, fb = cfg->blocks.ffn.bias;
    d->wte = d->V * C;
    d->wpe = cfg->positional.type == CLF_POS_LEARNED ? d->T * C
             : cfg->positional.type == CLF_POS_T5
                 ? (u64)cfg->blocks.attention.heads * (u64)cfg->positional.num_buckets
                 : 0;
    /* q [C], k and v [kv_heads * head size] each, then the output projection */
    const u64 qkv = C + 2 * (u64)clf_config_kv_heads(cfg) * (u64)clf_config_head_size(cfg);
    d->attn = qkv * C + (ab ? qkv : 0) + C * C + (ab ? C : 0);
    if (cfg->positional.type == CLF_POS_RELATIVE) /* Shaw's r_c: [2 k + 1, head size] */
        d->attn += (2 * (u64)clf_config_max_distance(cfg) + 1) * (u64)clf_config_head_size(cfg);
    d->ffn = F * C + (fb ? F : 0) + C * d->H + (fb ? C : 0);
    d->norms = 2 * norm_params(cfg, cfg->blocks.norm.type);
    d->block = d->attn + d->ffn + d->norms;
    d->lnf = norm_params(cfg, cfg->final_norm.type);
    d->head = cfg->head.tie_embedding ? 0 : d->V * C;
    d->total = d->wte + d->wpe + d->L * d->block + d->lnf + d->head;
    d->n_mm = d->total - d->wpe - (cfg->head.tie_embedding ? 0 : d->wte);
    /* Performer: per token and head, the query's and key's features (2 m
     * HS each), a key's row into the sums and the query's read of them (2 m
     * (HS + 1) each): about 8 m C per layer instead of 4 T C */
    const int pm = clf_config_performer_features(cfg);
    const double attn_flops = pm ? 8.0 * (double)d->L * (double)pm * (double)C
                                 : 4.0 * (double)d->L * (double)d->T * (double)C;
    d->infer_flops = 2.0 * (double)d->n_mm + attn_flops;
    d->train_flops = 6.0 * (double)d->n_mm + 3.0 * attn_flops;
}

double cli_train_flops_per_token(const clf_model_config *cfg, long vocab)
{
    breakdown d;
    count(cfg, vocab, &d);
    return d.train_flops;
}

#define N_CONTEXTS 4

/* Device memory: training at the batch by category, inference at batch 1,
 * and the training activations at contexts around the model's. */
static const char *const recompute_names[] = {"none", "block", "attention"};
#define N_RECOMPUTE 3
static const char *const precision_names[] = {"fp32", "bf16", "fp16"};
#define N_PRECISION 3

typedef struct memory_report {
    clf_model_memory train, infer;
    clf_model_memory by_recompute[N_RECOMPUTE]; /* training at the batch, clf_recompute order */
    int fp32_only;                              /* performer and linformer train in float32 alone */
    clf_model_memory by_precision[N_PRECISION]; /* the same, by clf_precision (bf16 and fp16
                                                   store the same tensors: equal sizes) */
    int contexts[N_CONTEXTS];
    size_t activations[N_CONTEXTS]; /* 0: that context does not plan */
} memory_report;

static clf_status plan_memory(const clf_model_config *cfg, long vocab, long batch, long ranks,
                              memory_report *r, clf_error *err)
{
    const clf_model_limits lim_1 = {.B = 1};
    clf_model_limits lim_b = {.B = (int)batch};
    clf_status st = CLF_OK;
    /* ZeRO-1 under `ranks` processes: the largest rank's slice (the last
     * one takes the alignment's remainder) */
    if (ranks > 1 && cfg->train.shard_optimizer)
        lim_b.shard = (int)ranks - 1, lim_b.shards = (int)ranks;
    st = clf_model_memory_plan(cfg, (int)vocab, &lim_b, CLF_MODEL_TRAIN, &r->train, err);
    if (st == CLF_OK)
        st = clf_model_memory_plan(cfg, (int)vocab, &lim_1, CLF_MODEL_INFER, &r->infer, err);
    for (int i = 0; i < N_RECOMPUTE && st == CLF_OK; i++) {
        clf_model_config c = *cfg;
        c.train.recompute = (clf_recompute)i;
        st = clf_model_memory_plan(&c, (int)vocab, &lim_b, CLF_MODEL_TRAIN, &r->by_recompute[i],
                                   err);
    }
    r->fp32_only = clf_config_performer_features(cfg) > 0 || clf_config_linformer_rows(cfg) > 0;
    for (int i = 0; i < N_PRECISION && st == CLF_OK; i++) {
        clf_model_config c = *cfg;
        c.train.precision = (clf_precision)i;
        if (i > 0 && r->fp32_only)
            r->by_precision[i] = r->by_precision[0];
        else
            st = clf_model_memory_plan(&c, (int)vocab, &lim_b, CLF_MODEL_TRAIN, &r->by_precision[i],
                                       err);
    }
    for (int i = 0; i < N_CONTEXTS && st == CLF_OK; i++) {
        clf_model_config c = *cfg;
        c.context = cfg->context / 2 << i; /* context/2, 1x, 2x, 4x */
        r->contexts[i] = c.context;
        clf_model_memory m;
        clf_error ignored;
        r->activations[i] =
            c.context > 0 && clf_model_memory_plan(&c, (int)vocab, &lim_b, CLF_MODEL_TRAIN, &m,
                                                   &ignored) == CLF_OK
                ? m.activations
                : 0;
    }
    return st;
}

/* "12.3 MiB", "4.5 GiB", "3.2 TiB": a size in a unit that keeps it short. */
static const char *size_str(size_t bytes, char *buf, size_t cap)
{
    const double b = (double)bytes;
    if (b >= 1024.0 * 1024 * 1024 * 1024)
        snprintf(buf, cap, "%.1f TiB", b / (1024.0 * 1024 * 1024 * 1024));
    else if (b >= 1024.0 * 1024 * 1024)
        snprintf(buf, cap, "%.1f GiB", b / (1024.0 * 1024 * 1024));
    else
        snprintf(buf, cap, "%.1f MiB", b / (1024.0 * 1024));
    return buf;
}

/* One line: the training plan's total and activations for each setting. */
static void print_by(const char *what, const char *const *names, const clf_model_memory *plans,
                     int n)
{
    char a[32], b[32];
    printf("by %s:", what);
    for (int i = 0; i < n; i++)
        printf("%s %s %s (activations %s)", i ? "," : "", names[i],
               size_str(plans[i].total, a, sizeof a), size_str(plans[i].activations, b, sizeof b));
    printf("\n");
}

static void print_memory(const memory_report *r, long batch, long ranks, int shard,
                         int cfg_recompute, int cfg_precision)
{
    const clf_model_memory *t = &r->train;
    char a[32], b[32], c[32], d[32];
    if (ranks > 1)
        printf("device memory of each of %ld data-parallel ranks (global batch %ld x %ld%s), "
               "training at batch %ld:\n",
               ranks, ranks, batch,
               shard ? "; train.shard_optimizer: Adam's moments split between them" : "", batch);
    else
        printf("device memory, training at batch %ld:\n", batch);
    printf("  %-24s %14s\n", "parameters", size_str(t->params, a, sizeof a));
    printf("  %-24s %14s\n", "gradients", size_str(t->grads, a, sizeof a));
    printf("  %-24s %14s\n", "Adam moments", size_str(t->optim, a, sizeof a));
    if (t->ema > 0)
        printf("  %-24s %14s  (train.ema)\n", "moving average", size_str(t->ema, a, sizeof a));
    printf("  %-24s %14s\n", "activations and scratch", size_str(t->activations, a, sizeof a));
    printf("  %-24s %14s\n", "batch inputs", size_str(t->batch, a, sizeof a));
    printf("  %-24s %14s  (native engine's packing, estimated)\n", "GEMM workspace",
           size_str(t->workspace, a, sizeof a));
    printf("  %-24s %14s  (train.recompute: %s, train.precision: %s)\n", "total",
           size_str(t->total, a, sizeof a), recompute_names[cfg_recompute],
           precision_names[cfg_precision]);
    print_by("train.recompute", recompute_names, r->by_recompute, N_RECOMPUTE);
    if (r->fp32_only)
        printf("by train.precision: fp32 only (blocks.attention.type performer or linformer)\n");
    else
        print_by("train.precision (16 bits: what GEMMs and attention read, weights)",
                 precision_names, r->by_precision, N_PRECISION);
    printf("device memory, inference at batch 1: %s (parameters %s, activations %s, KV caches "
           "%s)\n",
           size_str(r->infer.total, a, sizeof a), size_str(r->infer.params, b, sizeof b),
           size_str(r->infer.activations, c, sizeof c), size_str(r->infer.caches, d, sizeof d));
    printf("training activations by context (batch %ld; fused attention keeps no T x T "
           "scores, so they grow linearly):\n  %8s %14s %16s\n",
           batch, "context", "activations", "per token");
    for (int i = 0; i < N_CONTEXTS; i++)
        if (r->activations[i] > 0)
            printf("  %8d %14s %12.1f KiB\n", r->contexts[i],
                   size_str(r->activations[i], a, sizeof a),
                   (double)r->activations[i] / 1024.0 / ((double)batch * r->contexts[i]));
}

/* A window and sparse patterns: what a query sees, and the share of the
 * causal block pairs the fused kernels visit at the full context (the
 * random blocks drawn from train.seed, as the model draws them). */
static void print_sparse(const clf_model_config *cfg)
{
    const clf_attention_config *a = &cfg->blocks.attention;
    if (a->type == CLF_ATTN_PERFORMER)
        printf("attention: performer, %d positive orthogonal random features per head, drawn "
               "again every %d steps%s; O(T) time and memory\n",
               clf_config_performer_features(cfg), a->redraw, a->redraw ? "" : " (never)");
    if (a->window <= 0)
        return;
    if (a->global <= 0 && a->stride <= 0 && a->random_blocks <= 0) {
        printf("attention: each query sees its %d most recent keys (sliding window)\n", a->window);
        return;
    }
    const size_t bs = (size_t)a->block;
    size_t v = 0, pairs = 0;
    clf_model_sparse_share(cfg, &v, &pairs);
    char parts[160] = "";
    size_t n = 0;
    if (a->global > 0)
        n += (size_t)snprintf(parts + n, sizeof parts - n, ", the first %d", a->global);
    if (a->stride > 0 && n < sizeof parts)
        n += (size_t)snprintf(parts + n, sizeof parts - n, ", every %d-th key back", a->stride);
    if (a->random_blocks > 0 && n < sizeof parts)
        snprintf(parts + n, sizeof parts - n, ", %d random block%s of %zu", a->random_blocks,
                 a->random_blocks == 1 ? "" : "s", bs);
    printf("attention: sparse, each query sees its %d most recent keys%s;\n  the fused kernels "
           "visit %zu of the %zu causal block pairs of %zu at context %d (%.1f%%)\n",
           a->window, parts, v, pairs, bs, cfg->context,
           100.0 * (double)v / (double)(pairs ? pairs : 1));
}

static void print_text(const char *path, const clf_model_config *cfg, const breakdown *d,
                       const char *vocab_note, long batch, long ranks, const memory_report *mr)
{
    char b[64];
    char kv[64] = "";
    const int kvh = clf_config_kv_heads(cfg);
    if (kvh < cfg->blocks.attention.heads)
        snprintf(kv, sizeof kv, " (keys and values: %d head%s, %s)", kvh, kvh == 1 ? "" : "s",
                 kvh == 1 ? "multi-query" : "grouped-query");
    char pos[160] = "";
    const clf_positional_config *pc = &cfg->positional;
    if (pc->type == CLF_POS_ROPE && pc->rope_scaling.type == CLF_ROPE_SCALE_NONE)
        snprintf(pos, sizeof pos, " (theta %g)", pc->rope_theta);
    else if (pc->type == CLF_POS_T5)
        snprintf(pos, sizeof pos, " (%d buckets, max_distance %d)", pc->num_buckets,
                 clf_config_max_distance(cfg));
    else if (pc->type == CLF_POS_RELATIVE)
        snprintf(pos, sizeof pos, " (clipped at %d)", clf_config_max_distance(cfg));
    else if (pc->type == CLF_POS_ROPE)
        snprintf(pos, sizeof pos, " (theta %g, %s scaling x%g over a trained context of %d)",
                 pc->rope_theta, clf_config_rope_scaling_name(pc->rope_scaling.type),
                 pc->rope_scaling.factor, pc->rope_scaling.original_context);
    printf("%s: %s, %llu layers, %d heads x %d%s, dim %llu, ffn %llu (%s), context %llu,\n"
           "  %s positions%s, %s-norm %s\n",
           path, clf_config_kind_name(cfg->kind), d->L, cfg->blocks.attention.heads,
           clf_config_head_size(cfg), kv, d->C, d->H,
           clf_config_activation_name(cfg->blocks.ffn.activation), d->T,
           clf_config_positional_name(cfg->positional.type), pos,
           clf_config_placement_name(cfg->blocks.norm.placement),
           clf_config_norm_name(cfg->blocks.norm.type));
    printf("vocabulary: %llu (%s)%s\n", d->V, clf_config_tokenizer_name(cfg->vocab.tokenizer),
           vocab_note);
    print_sparse(cfg);
    printf("\n");
    printf("parameters:\n");
    const part parts[] = {
        {"token embedding (wte)", d->wte},
        {cfg->positional.type == CLF_POS_T5 ? "positions (rel_bias)" : "positions (wpe)", d->wpe},
        {"blocks", d->L * d->block},
        {"  attention, per block", d->attn},
        {"  feed-forward, per block", d->ffn},
        {"  norms, per block", d->norms},
        {"final norm", d->lnf},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        cli_group_digits(parts[i].n, b, sizeof b);
        printf("  %-28s %14s\n", parts[i].name, b);
    }
    if (cfg->head.tie_embedding) {
        printf("  %-28s %14s\n", "lm head", "tied to wte");
    } else {
        cli_group_digits(d->head, b, sizeof b);
        printf("  %-28s %14s\n", "lm head", b);
    }
    cli_group_digits(d->total, b, sizeof b);
    printf("  %-28s %14s\n\n", "total", b);
    cli_group_digits(d->n_mm, b, sizeof b);
    printf("FLOPs per token (N = %s parameters in matrix products; L, T, C = %llu, %llu, %llu):\n",
           b, d->L, d->T, d->C);
    printf("  training   6N + 12 L T C = %.4g  (%.4g per step of %ld x %llu tokens)\n",
           d->train_flops, d->train_flops * (double)batch * (double)d->T, batch, d->T);
    printf("  inference  2N +  4 L T C = %.4g  (at full context; with the KV cache at\n"
           "                                         position p: 2N + 4 L p C)\n\n",
           d->infer_flops);
    print_memory(mr, batch, ranks, cfg->train.shard_optimizer, (int)cfg->train.recompute,
                 (int)cfg->train.precision);
}

int cli_cmd_info(int argc, char **argv)
{
    const char *path = NULL, *data = NULL;
    cli_list sets = {{NULL}, 0};
    long vocab = 0, batch = 0, ranks = 1;
    int json = 0;
    const cli_opt opts[] = {
        {"--set", CLI_OPT_SET, &sets, 0, 0, NULL},
        {"--vocab", CLI_OPT_INT, &vocab, 1, 100000000, NULL},
        {"--batch", CLI_OPT_INT, &batch, 1, 1000000, NULL},
        {"--data", CLI_OPT_STR, &data, 0, 0, NULL},
        {"--json", CLI_OPT_BOOL, &json, 0, 0, NULL},
        {"--ranks", CLI_OPT_INT, &ranks, 1, 65536, NULL},
    };
    const cli_command cmd = {"clformer info", opts, CLI_COUNT(opts),  NULL,
                             &path,           1,    "one MODEL.yaml", usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    if (path == NULL) {
        fprintf(stderr, "clformer info: MODEL.yaml expected\n");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    clf_model_config cfg;
    int rc = cli_config_load(path, &sets, &cfg);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cfg.kind != CLF_MODEL_DECODER) {
        fprintf(stderr,
                "clformer info: the parameter and FLOP breakdown covers decoder models so far "
                "(this file has model.kind: %s)\n",
                clf_config_kind_name(cfg.kind));
        return CLI_EXIT_FAIL;
    }
    const char *vocab_note = "";
    if ((rc = cli_pick_vocab(&cfg, data, &vocab, &vocab_note)) != CLI_EXIT_OK)
        return rc;
    if (batch == 0)
        batch = cfg.train.batch;
    breakdown d;
    count(&cfg, vocab, &d);
    memory_report mr;
    clf_error err;
    clf_status st = plan_memory(&cfg, vocab, batch, ranks, &mr, &err);
    if (st != CLF_OK) {
        cli_print_error("memory estimate", &err);
        return cli_exit_code(st);
    }
    if (json)
        printf("{\"parameters\": %llu, \"embedding\": %llu, \"positions\": %llu, "
               "\"per_block\": %llu, \"blocks\": %llu, \"attention_per_block\": %llu, "
               "\"ffn_per_block\": %llu, \"norms_per_block\": %llu, \"final_norm\": %llu, "
               "\"lm_head\": %llu, \"vocab\": %llu, \"layers\": %llu, "
               "\"train_flops_per_token\": %.0f, \"infer_flops_per_token\": %.0f, "
               "\"batch\": %ld, \"train_memory_bytes\": %zu, \"infer_memory_bytes\": %zu, "
               "\"train_memory\": {\"params\": %zu, \"grads\": %zu, \"optim\": %zu, "
               "\"activations\": %zu, \"batch\": %zu, \"workspace\": %zu}, "
               "\"train_memory_by_recompute\": {\"none\": %zu, \"block\": %zu, "
               "\"attention\": %zu}, \"train_memory_by_precision\": {\"fp32\": %zu, "
               "\"bf16\": %zu, \"fp16\": %zu}}\n",
               d.total, d.wte, d.wpe, d.block, d.L * d.block, d.attn, d.ffn, d.norms, d.lnf, d.head,
               d.V, d.L, d.train_flops, d.infer_flops, batch, mr.train.total, mr.infer.total,
               mr.train.params, mr.train.grads, mr.train.optim, mr.train.activations,
               mr.train.batch, mr.train.workspace, mr.by_recompute[0].total,
               mr.by_recompute[1].total, mr.by_recompute[2].total, mr.by_precision[0].total,
               mr.by_precision[1].total, mr.by_precision[2].total);
    else
        print_text(path, &cfg, &d, vocab_note, batch, ranks, &mr);
    return CLI_EXIT_OK;
}
