/*
 * gpt.c - GPT benchmark: training, forward and sampling tokens/s of a
 * clformer model on one device (the peer is bench/torch_gpt.py).
 *
 *   build/bench/gpt [--model cpu|wide | --config FILE] [--set key=value ...]
 *                   [--device SEL] [--steps N] [--warmup N] [--sample-rounds N]
 *                   [--prompt N] [--only train,forward,sample] [--json]
 *                   [--profile] [--gemm auto|clblast|native] [--no-cache]
 *
 * What it measures (medians over the timed repetitions, after warm-up
 * repetitions that also absorb kernel compilation and GEMM engine timing):
 *   train    one optimizer step: set_batch + forward + backward + clipping +
 *            AdamW, closed by reading the loss back (the synchronisation
 *            point); B*T tokens per step.
 *   forward  an eval forward with the loss (no dropout, no d(logits)), closed
 *            by reading the loss back; B*T tokens.
 *   sample   greedy decoding with the KV cache, batch 1: the prompt minus its
 *            last token is prefilled (untimed), then one decode step per
 *            position from the prompt's last token to the end of the
 *            context, as `clformer sample --temperature 0` decodes: each
 *            step's token chosen on the device (clf_model_greedy_pick) and
 *            read back while the next step runs (where the device cannot
 *            choose, the logits read back and argmax'ed on the host each
 *            step); tokens/s = decode steps / time.
 * With train, also the training peak of device memory: the runtime's own
 * count of the bytes in live buffers (parameters, gradients, optimizer
 * state, activations, GEMM scratch: every buffer clformer allocates), at its
 * highest by the end of the timed steps (bench/memory.sh compares it across
 * train.recompute settings and with PyTorch).
 *
 * Design: the model comes from a YAML file (bench/models/gpt-<model>.yaml,
 * the same file torch_gpt.py reads), so both sides build the same network.
 * The directory of this source file is baked in from __FILE__ and tried
 * first, then bench/models relative to the working directory. Tokens are
 * random (splitmix64 from train.seed); the learning rate is constant
 * (schedules cost nothing on the device). Threads: PoCL uses every core
 * unless POCL_CPU_MAX_CU_COUNT / POCL_MAX_PTHREAD_COUNT say otherwise; the
 * device's compute units are printed as the thread count.
 *
 * --profile turns on event profiling (which itself costs time) and prints,
 * per phase, every kernel's count, device time per step or per token, and
 * share, from clf_profile_report over the timed repetitions.
 *
 * Not here: data loading, tokenizers, schedules, checkpoints; comparison
 * with PyTorch (bench/run_all.sh puts the two side by side).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "model/graph/model.h"
#include "runtime/runtime.h"
#include "runtime/util.h"

#define MAX_SETS 32
#define N_BATCHES 4

typedef struct bench_opts {
    const char *model;  /* cpu | wide */
    const char *config; /* explicit YAML path, or NULL */
    const char *sets[MAX_SETS];
    int n_sets;
    const char *device;
    const char *gemm;
    int no_cache;
    int steps, warmup, sample_rounds, prompt;
    int do_train, do_forward, do_sample;
    int json, profile;
} bench_opts;

typedef struct bench_result {
    size_t n_params;             /* in the model (n_real) */
    double flops_tok, peak, mfu; /* training FLOPs per token, the device's peak, their use */
    double train_s, forward_s, sample_tok_s;
    int sample_tokens;
    float train_loss;
    size_t train_peak_bytes; /* device memory, the runtime's count */
} bench_result;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void usage(FILE *out)
{
    fprintf(out, "usage: gpt [--model cpu|wide | --config FILE] [--set key=value ...]\n"
                 "           [--device SEL] [--steps N] [--warmup N] [--sample-rounds N]\n"
                 "           [--prompt N] [--only train,forward,sample] [--json] [--profile]\n"
                 "           [--gemm auto|clblast|native] [--no-cache]\n"
                 "  --model NAME        bench/models/gpt-NAME.yaml (default cpu)\n"
                 "  --steps N           timed train and forward steps (default 10)\n"
                 "  --warmup N          untimed steps first (default 3)\n"
                 "  --sample-rounds N   timed decoding rounds, one context each (default 5)\n"
                 "  --prompt N          prompt length for sampling (default 8)\n"
                 "  --json              one JSON object on stdout, for bench/run_all.sh\n"
                 "  --profile           per-kernel device time of each phase (slows the run)\n");
}

static int parse_int(const char *flag, const char *s, int lo, int hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (s[0] == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi) {
        fprintf(stderr, "gpt: %s: expected an integer in [%d, %d], got '%s'\n", flag, lo, hi, s);
        return 0;
    }
    *out = (int)v;
    return 1;
}

/* 0 ok, 2 usage error. */
static int parse_args(int argc, char **argv, bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->model = "cpu";
    o->steps = 10;
    o->warmup = 3;
    o->sample_rounds = 5;
    o->prompt = 8;
    o->do_train = o->do_forward = o->do_sample = 1;
    o->device = getenv("CLFORMER_DEVICE");
    o->gemm = getenv("CLFORMER_GEMM");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--json") == 0) {
            o->json = 1;
            takes = 0;
        } else if (strcmp(a, "--profile") == 0) {
            o->profile = 1;
            takes = 0;
        } else if (strcmp(a, "--no-cache") == 0) {
            o->no_cache = 1;
            takes = 0;
        }
        if (!takes)
            continue;
        if (v == NULL) {
            fprintf(stderr, "gpt: %s: unknown flag or missing value\n", a);
            usage(stderr);
            return 2;
        }
        i++;
        if (strcmp(a, "--model") == 0) {
            o->model = v;
        } else if (strcmp(a, "--config") == 0) {
            o->config = v;
        } else if (strcmp(a, "--set") == 0) {
            if (o->n_sets == MAX_SETS) {
                fprintf(stderr, "gpt: at most %d --set flags\n", MAX_SETS);
                return 2;
            }
            o->sets[o->n_sets++] = v;
        } else if (strcmp(a, "--device") == 0) {
            o->device = v;
        } else if (strcmp(a, "--gemm") == 0) {
            o->gemm = v;
        } else if (strcmp(a, "--steps") == 0) {
            if (!parse_int(a, v, 1, 1000000, &o->steps))
                return 2;
        } else if (strcmp(a, "--warmup") == 0) {
            if (!parse_int(a, v, 0, 1000000, &o->warmup))
                return 2;
        } else if (strcmp(a, "--sample-rounds") == 0) {
            if (!parse_int(a, v, 1, 1000000, &o->sample_rounds))
                return 2;
        } else if (strcmp(a, "--prompt") == 0) {
            if (!parse_int(a, v, 1, 1000000, &o->prompt))
                return 2;
        } else if (strcmp(a, "--only") == 0) {
            o->do_train = strstr(v, "train") != NULL;
            o->do_forward = strstr(v, "forward") != NULL;
            o->do_sample = strstr(v, "sample") != NULL;
            if (!o->do_train && !o->do_forward && !o->do_sample) {
                fprintf(stderr, "gpt: --only: expected a list of train, forward, sample\n");
                return 2;
            }
        } else {
            fprintf(stderr, "gpt: unknown flag %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    return 0;
}

/* The model file: --config, else gpt-<model>.yaml next to this source, else
 * under bench/models of the working directory. */
static void model_path(const bench_opts *o, char *out, size_t cap)
{
    if (o->config != NULL) {
        snprintf(out, cap, "%s", o->config);
        return;
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", __FILE__);
    char *slash = strrchr(dir, '/');
    if (slash != NULL) {
        *slash = '\0';
        snprintf(out, cap, "%s/models/gpt-%s.yaml", dir, o->model);
        FILE *f = fopen(out, "rb");
        if (f != NULL) {
            fclose(f);
            return;
        }
    }
    snprintf(out, cap, "bench/models/gpt-%s.yaml", o->model);
}

static int vocab_of(const clf_model_config *cfg)
{
    if (cfg->vocab.tokenizer == CLF_TOKENIZER_BYTE)
        return cfg->vocab.size > 256 ? cfg->vocab.size : 256;
    return cfg->vocab.size;
}

static void print_profile(clf_runtime *rt, const char *phase, double per, const char *unit,
                          clf_error *err)
{
    clf_profile_entry *e = NULL;
    int n = 0;
    if (clf_profile_report(rt, &e, &n, err) != CLF_OK) {
        fprintf(stderr, "gpt: profile: %s\n", err->msg);
        return;
    }
    double total = 0.0;
    for (int i = 0; i < n; i++)
        total += e[i].seconds;
    printf("\nprofile of %s (device time from OpenCL events, per %s):\n", phase, unit);
    printf("  %-36s %9s %11s %10s %7s\n", "kernel", "calls", "ms", "avg us", "share");
    for (int i = 0; i < n; i++)
        printf("  %-36s %9.1f %11.3f %10.1f %6.1f%%\n", e[i].name, (double)e[i].count / per,
               e[i].seconds * 1e3 / per, e[i].count ? e[i].seconds * 1e6 / (double)e[i].count : 0.0,
               total > 0 ? 100.0 * e[i].seconds / total : 0.0);
    printf("  %-36s %9s %11.3f\n", "total", "", total * 1e3 / per);
    free(e);
}

static clf_status run_train(clf_model *m, const bench_opts *o, const clf_model_config *cfg,
                            int32_t *const *xs, int32_t *const *ys, int B, int T, bench_result *r,
                            clf_error *err)
{
    clf_runtime *rt = clf_model_runtime(m);
    clf_status st = CLF_OK;
    double *t = calloc((size_t)o->steps, sizeof *t);
    if (t == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory");
    float lr = (float)cfg->train.optimizer.lr;
    for (int i = 0; i < o->warmup + o->steps; i++) {
        if (i == o->warmup && o->profile) {
            st = clf_runtime_finish(rt, err);
            if (st != CLF_OK)
                goto fail;
            clf_profile_reset(rt);
        }
        double t0 = clf_now_seconds();
        st = clf_model_set_batch(m, clf_batch_decoder(xs[i % N_BATCHES], ys[i % N_BATCHES], B, T),
                                 err);
        if (st == CLF_OK)
            st = clf_model_forward(m, 1, err);
        if (st == CLF_OK)
            st = clf_model_backward(m, err);
        if (st == CLF_OK)
            st = clf_model_step(m, lr, err);
        if (st == CLF_OK)
            st = clf_model_loss(m, &r->train_loss, err);
        if (st != CLF_OK)
            goto fail;
        if (i >= o->warmup)
            t[i - o->warmup] = clf_now_seconds() - t0;
    }
    r->train_s = median(t, o->steps);
    size_t now = 0;
    clf_runtime_memory(rt, &now, &r->train_peak_bytes);
    if (o->profile && !o->json)
        print_profile(rt, "a training step", (double)o->steps, "step", err);
fail:
    free(t);
    return st;
}

static clf_status run_forward(clf_model *m, const bench_opts *o, int32_t *const *xs,
                              int32_t *const *ys, int B, int T, bench_result *r, clf_error *err)
{
    clf_runtime *rt = clf_model_runtime(m);
    clf_status st = CLF_OK;
    double *t = calloc((size_t)o->steps, sizeof *t);
    if (t == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory");
    float loss = 0.0f;
    for (int i = 0; i < o->warmup + o->steps; i++) {
        if (i == o->warmup && o->profile) {
            st = clf_runtime_finish(rt, err);
            if (st != CLF_OK)
                goto fail;
            clf_profile_reset(rt);
        }
        double t0 = clf_now_seconds();
        st = clf_model_set_batch(m, clf_batch_decoder(xs[i % N_BATCHES], ys[i % N_BATCHES], B, T),
                                 err);
        if (st == CLF_OK)
            st = clf_model_forward(m, 0, err);
        if (st == CLF_OK)
            st = clf_model_loss(m, &loss, err);
        if (st != CLF_OK)
            goto fail;
        if (i >= o->warmup)
            t[i - o->warmup] = clf_now_seconds() - t0;
    }
    r->forward_s = median(t, o->steps);
    if (o->profile && !o->json)
        print_profile(rt, "an eval forward", (double)o->steps, "forward", err);
fail:
    free(t);
    return st;
}

static int argmax(const float *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

/* One round of greedy decoding with the choice on the device: positions
 * P - 1 .. T - 1 from seq[P - 1], each step enqueued before the host waits
 * for the token before it; seq[P..T] the tokens. *on_device = 0, with
 * nothing run, where the device cannot choose (CLF_ERR_UNSUPPORTED). */
static clf_status greedy_round(clf_model *m, int32_t *seq, int P, int T, int *on_device,
                               clf_error *err)
{
    int32_t pick[2] = {0, 0};
    clf_event *ev[2] = {NULL, NULL};
    clf_status st = clf_model_decode_step(m, &seq[P - 1], 1, P - 1, NULL, err);
    if (st == CLF_OK &&
        (st = clf_model_greedy_pick(m, 1, &pick[0], &ev[0], err)) == CLF_ERR_UNSUPPORTED) {
        *on_device = 0;
        return CLF_OK;
    }
    for (int pos = P, cur = 0; pos <= T && st == CLF_OK; pos++, cur ^= 1) {
        if (pos < T &&
            ((st = clf_model_decode_picked(m, 1, pos, err)) != CLF_OK ||
             (st = clf_model_greedy_pick(m, 1, &pick[cur ^ 1], &ev[cur ^ 1], err)) != CLF_OK))
            break;
        st = clf_event_wait(ev[cur], err); /* and releases it */
        ev[cur] = NULL;
        seq[pos] = pick[cur] < 0 ? 0 : pick[cur];
    }
    for (int c = 0; c < 2; c++) /* a read still under way writes into pick[] */
        clf_event_wait(ev[c], NULL);
    return st;
}

static clf_status run_sample(clf_runtime *rt, const bench_opts *o, const clf_model_config *cfg,
                             int V, bench_result *r, clf_error *err)
{
    clf_model *m = NULL;
    clf_status st;
    int T = cfg->context;
    int P = o->prompt < T ? o->prompt : T - 1;
    if (P < 1)
        P = 1;
    int n = T - (P - 1); /* decode steps per round: positions P-1 .. T-1 */
    float *logits = malloc((size_t)V * sizeof *logits);
    int32_t *seq = malloc((size_t)(T + 1) * sizeof *seq);
    double *rate = calloc((size_t)o->sample_rounds, sizeof *rate);
    if (logits == NULL || seq == NULL || rate == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory");
        goto fail;
    }
    st = clf_model_create(rt, cfg, V, 1, CLF_MODEL_INFER, &m, err);
    if (st != CLF_OK)
        goto fail;
    uint64_t rng = cfg->train.seed + 7;
    for (int i = 0; i < P; i++)
        seq[i] = (int32_t)(clf_splitmix64_next(&rng) % (uint64_t)V);
    /* The prompt minus its last token fills cache positions 0..P-2 once;
     * every round then decodes positions P-1..T-1, overwriting the cache
     * entries it wrote the round before (attention reads only 0..pos). */
    if (P > 1) {
        st = clf_model_prefill(m, seq, 1, P - 1, NULL, err);
        if (st != CLF_OK)
            goto fail;
    }
    int on_device = 1;                                        /* until the device cannot choose */
    for (int round = 0; round <= o->sample_rounds; round++) { /* round 0 warms up */
        st = clf_runtime_finish(rt, err);
        if (st != CLF_OK)
            goto fail;
        if (round == 1 && o->profile)
            clf_profile_reset(rt);
        double t0 = clf_now_seconds();
        if (on_device)
            st = greedy_round(m, seq, P, T, &on_device, err);
        if (st != CLF_OK)
            goto fail;
        for (int pos = P - 1; pos < T && !on_device; pos++) {
            st = clf_model_decode_step(m, &seq[pos], 1, pos, logits, err);
            if (st != CLF_OK)
                goto fail;
            seq[pos + 1] = (int32_t)argmax(logits, V);
        }
        if (round > 0)
            rate[round - 1] = (double)n / (clf_now_seconds() - t0);
    }
    r->sample_tok_s = median(rate, o->sample_rounds);
    r->sample_tokens = n;
    if (o->profile && !o->json)
        print_profile(rt, "sampling (decode steps)", (double)n * o->sample_rounds, "token", err);
fail:
    clf_model_destroy(m);
    free(logits);
    free(seq);
    free(rate);
    return st;
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", (unsigned char)*s);
        else
            putchar(*s);
    }
    putchar('"');
}

/* The runtime on o's device, with o's GEMM engine and profiling; 2 (a
 * usage error) for an unknown --gemm. */
static clf_status open_runtime(const bench_opts *o, clf_runtime **rt, clf_error *err)
{
    clf_runtime_options ro = clf_runtime_options_default();
    char cache[1024];
    clf_cache_dir_default(getenv("CLFORMER_CACHE_DIR"), getenv("XDG_CACHE_HOME"), getenv("HOME"),
                          cache, sizeof cache);
    ro.device = o->device;
    ro.cache_dir = cache[0] ? cache : NULL;
    ro.no_cache = o->no_cache;
    ro.kernel_dir = getenv("CLFORMER_KERNEL_DIR"); /* as the CLI: kernel development */
    if (!clf_binaries_parse(getenv("CLFORMER_KERNEL_BINARIES"), &ro.binaries))
        return clf_error_set(err, CLF_ERR_ARG, "CLFORMER_KERNEL_BINARIES: expected keep or notes");
    ro.profile = o->profile;
    if (o->gemm != NULL && o->gemm[0] != '\0') {
        if (strcmp(o->gemm, "auto") == 0)
            ro.gemm = CLF_GEMM_AUTO;
        else if (strcmp(o->gemm, "clblast") == 0)
            ro.gemm = CLF_GEMM_CLBLAST;
        else if (strcmp(o->gemm, "native") == 0)
            ro.gemm = CLF_GEMM_NATIVE;
        else
            return clf_error_set(err, CLF_ERR_ARG, "--gemm: expected auto, clblast or native");
    }
    return clf_runtime_create(rt, &ro, err);
}

/* N_BATCHES batches of B x T random tokens and targets, from the config's seed. */
static clf_status make_batches(const clf_model_config *cfg, int V, int32_t **xs, int32_t **ys,
                               clf_error *err)
{
    const size_t BT = (size_t)cfg->train.batch * (size_t)cfg->context;
    uint64_t rng = cfg->train.seed;
    for (int b = 0; b < N_BATCHES; b++) {
        xs[b] = malloc(BT * sizeof(int32_t));
        ys[b] = malloc(BT * sizeof(int32_t));
        if (xs[b] == NULL || ys[b] == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "out of memory");
        for (size_t i = 0; i < BT; i++) {
            xs[b][i] = (int32_t)(clf_splitmix64_next(&rng) % (uint64_t)V);
            ys[b][i] = (int32_t)(clf_splitmix64_next(&rng) % (uint64_t)V);
        }
    }
    return CLF_OK;
}

/* Model FLOP utilisation: nanoGPT's estimate_mfu, 6N + 12 L T C per
 * training token (N: the parameters in matrix products, so not the position
 * table, nor the embedding lookup unless it is the tied LM head), over the
 * device's measured peak: into r. */
static clf_status measure_mfu(clf_runtime *rt, const clf_model_config *cfg, int V, bench_result *r,
                              clf_error *err)
{
    const double C = cfg->embedding.dim, L = clf_config_decoder_layers(cfg), T = cfg->context;
    const double wpe = cfg->positional.type == CLF_POS_LEARNED ? T * C : 0.0;
    const double wte = cfg->head.tie_embedding ? 0.0 : (double)V * C;
    r->flops_tok = 6.0 * ((double)r->n_params - wpe - wte) + 12.0 * L * T * C;
    clf_status st = clf_runtime_peak_gflops(rt, &r->peak, err);
    const double BT = (double)cfg->train.batch * T;
    r->mfu = st == CLF_OK && r->peak > 0 ? BT / r->train_s * r->flops_tok / (r->peak * 1e9) : 0.0;
    return st;
}

/* The results: one JSON object (--json) or lines of text. */
static void report(const bench_opts *o, const clf_model_config *cfg, const char *path,
                   const clf_device_info *dev, int V, const bench_result *r)
{
    const int B = cfg->train.batch, T = cfg->context;
    const double BT = (double)B * (double)T;
    if (o->json) {
        printf("{\"impl\": \"clformer\", \"model\": ");
        json_str(o->model);
        printf(", \"config\": ");
        json_str(path);
        printf(", \"device\": ");
        json_str(dev->name);
        printf(", \"threads\": %u, \"params\": %zu, \"B\": %d, \"T\": %d, \"V\": %d",
               dev->compute_units, r->n_params, B, T, V);
        if (o->do_train)
            printf(", \"train_step_ms\": %.4f, \"train_tok_s\": %.2f, \"train_loss\": %.6f, "
                   "\"train_flops_per_token\": %.0f, \"peak_gflops\": %.2f, \"train_mfu\": %.4f, "
                   "\"train_peak_device_bytes\": %zu",
                   r->train_s * 1e3, BT / r->train_s, (double)r->train_loss, r->flops_tok, r->peak,
                   r->mfu, r->train_peak_bytes);
        if (o->do_forward)
            printf(", \"forward_ms\": %.4f, \"forward_tok_s\": %.2f", r->forward_s * 1e3,
                   BT / r->forward_s);
        if (o->do_sample)
            printf(", \"sample_tok_s\": %.2f, \"sample_tokens\": %d", r->sample_tok_s,
                   r->sample_tokens);
        printf("}\n");
        return;
    }
    if (o->do_sample && !(o->do_train || o->do_forward))
        printf("clformer, model %s (%s), B=1 T=%d V=%d\ndevice: %s, %u compute units\n", o->model,
               path, T, V, dev->name, dev->compute_units);
    printf("\n");
    if (o->do_train)
        printf("  %-28s %10.0f tokens/s (%.1f ms/step, loss %.4f)\n"
               "  %-28s %10.1f%% of the measured %.1f GFLOP/s (%.3g FLOPs per token)\n"
               "  %-28s %10.1f MiB (the runtime's count)\n",
               "train (fwd+bwd+clip+AdamW)", BT / r->train_s, r->train_s * 1e3,
               (double)r->train_loss, "model FLOP utilisation", 100.0 * r->mfu, r->peak,
               r->flops_tok, "device memory at its peak", (double)r->train_peak_bytes / 1048576.0);
    if (o->do_forward)
        printf("  %-28s %10.0f tokens/s (%.1f ms/step)\n", "forward (eval, with loss)",
               BT / r->forward_s, r->forward_s * 1e3);
    if (o->do_sample)
        printf("  %-28s %10.0f tokens/s (%d tokens per round)\n", "sample (KV cache, batch 1)",
               r->sample_tok_s, r->sample_tokens);
}

int main(int argc, char **argv)
{
    bench_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc;
    clf_error err;
    clf_error_clear(&err);
    clf_runtime *rt = NULL;
    clf_model *m = NULL;
    int32_t *xs[N_BATCHES] = {0}, *ys[N_BATCHES] = {0};
    bench_result r;
    memset(&r, 0, sizeof r);
    rc = 2; /* the config's or the flags' fault until the device opens */
    char path[1200];
    model_path(&o, path, sizeof path);
    clf_model_config cfg;
    clf_status st = clf_config_load(path, o.sets, o.n_sets, &cfg, &err);
    const int V = st == CLF_OK ? vocab_of(&cfg) : 0;
    if (st == CLF_OK && V <= 0)
        st = clf_error_set(&err, CLF_ERR_CONFIG,
                           "%s: the benchmark needs model.vocab.size for tokenizer %s", path,
                           clf_config_tokenizer_name(cfg.vocab.tokenizer));
    if (st != CLF_OK)
        goto fail;
    if ((st = open_runtime(&o, &rt, &err)) != CLF_OK) {
        rc = st == CLF_ERR_ARG ? 2 : 1;
        goto fail;
    }
    rc = 1;
    const clf_device_info *dev = clf_runtime_device(rt);
    const int B = cfg.train.batch, T = cfg.context;
    if ((st = make_batches(&cfg, V, xs, ys, &err)) != CLF_OK)
        goto fail;
    if (o.do_train || o.do_forward) {
        st = clf_model_create(rt, &cfg, V, B, o.do_train ? CLF_MODEL_TRAIN : 0, &m, &err);
        if (st != CLF_OK)
            goto fail;
        r.n_params = clf_model_dims_get(m).n_real;
        if (!o.json)
            printf("clformer, model %s (%s): %zu parameters, B=%d T=%d V=%d\n"
                   "device: %s (%s), %u compute units (threads)\n",
                   o.model, path, r.n_params, B, T, V, dev->name, dev->platform,
                   dev->compute_units);
        if ((o.do_train && (st = run_train(m, &o, &cfg, xs, ys, B, T, &r, &err)) != CLF_OK) ||
            (o.do_forward && (st = run_forward(m, &o, xs, ys, B, T, &r, &err)) != CLF_OK))
            goto fail;
        clf_model_destroy(m);
        m = NULL;
    }
    if ((o.do_sample && (st = run_sample(rt, &o, &cfg, V, &r, &err)) != CLF_OK) ||
        (o.do_train && (st = measure_mfu(rt, &cfg, V, &r, &err)) != CLF_OK))
        goto fail;
    report(&o, &cfg, path, dev, V, &r);
    rc = 0;
fail:
    if (rc != 0) {
        char buf[CLF_ERROR_MSG_MAX + 1024];
        clf_error_format(&err, buf, sizeof buf);
        fprintf(stderr, "gpt: %s\n", buf);
    }
    for (int b = 0; b < N_BATCHES; b++) {
        free(xs[b]);
        free(ys[b]);
    }
    clf_model_destroy(m);
    clf_runtime_destroy(rt);
    return rc;
}
