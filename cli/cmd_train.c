/*
 * cmd_train.c - `clformer train MODEL.yaml --data FILE|DIR --out DIR
 * [--device SEL] [--set KEY=VALUE ...] [--steps N] [--resume] [--profile]`,
 * and for the encoder kinds [--val FILE] [--src LANG --tgt LANG]
 * [--batch-tokens N] [--beam K].
 *
 * Reads the model file (with overrides), builds the tokenizer from the text
 * (or, with --resume, takes the checkpoint's), splits the data, creates the
 * model on the device and runs the trainer (model/train/trainer.h), printing its
 * progress: on a terminal one line rewritten in place (\r), otherwise one
 * line per log step; the validation loss at each evaluation; a checkpoint
 * at each evaluation and at the end, DIR/ckpt.safetensors, written
 * atomically. Ctrl-C, SIGTERM and SIGHUP set the trainer's stop flag: it
 * finishes the step, writes a checkpoint and we exit 128 + the signal (130,
 * 143, 129); a second signal kills at once. SIGPIPE is ignored. DIR is
 * locked for the run (a second writer is refused), and temporary files of
 * checkpoint writes a crash interrupted are removed when it starts.
 *
 * The encoder kinds (kind encoder / encoder-decoder) read sentences instead
 * of one text (cli_data.h: a folder such as ../shared/data/multi30k with
 * --src de --tgt en, or explicit files), build the tokenizer the config asks
 * for from the training sentences (BPE trained jointly on source and
 * target), report truncation, plan the model for the longest batches, and
 * run the same trainer (clf_trainer_run) with evaluations of the
 * validation loss, accuracy or BLEU (greedy, or --beam K) each epoch. The
 * languages go into the checkpoint's metadata (src_lang, tgt_lang) for
 * `clformer eval` and `translate`.
 *
 * A fresh run refuses a DIR that already holds a checkpoint (use --resume,
 * or another --out), so a finished run is never overwritten by accident.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_data.h"
#include "cli/cli_model.h"
#include "cli/cli_mpi.h"

/* The signal that asked training to stop (0: none); set by the handler
 * only. The trainer polls it between steps. */
static volatile sig_atomic_t g_stop;

static void on_stop_signal(int sig) { g_stop = sig; }

static const char *signal_name(int sig)
{
    switch (sig) {
        case SIGINT: return "Ctrl-C (SIGINT)";
        case SIGTERM: return "SIGTERM";
        case SIGHUP: return "SIGHUP";
        default: return "a signal";
    }
}

typedef struct ui {
    int tty;
    int line_open; /* a \r progress line is on screen without its newline */
    FILE *out;
    FILE *log;     /* --log: a copy of the metrics (NULL: none) */
    FILE *metrics; /* DIR/metrics.jsonl, appended (NULL: not rank 0) */
    const cli_runtime_flags *rf;
    const clf_model_config *cfg;
    const char *device;
    const char *data; /* --data, for `clformer report` */
} ui;

static void ui_endline(ui *u)
{
    cli_notice_end(u->rf);
    if (u->line_open) {
        fputc('\n', u->out);
        u->line_open = 0;
    }
}

/* One JSON line of w's record (begun with its object open) into the
 * metrics file and --log's copy. Non-finite numbers are left out by the
 * callers (JSON has none). */
static void ui_record(ui *u, clf_json_writer *w)
{
    clf_json_end_object(w);
    char *line = NULL;
    size_t len = 0;
    clf_error err;
    if (clf_json_writer_finish(w, &line, &len, &err) != CLF_OK)
        return; /* out of memory: the record is lost, the run goes on */
    FILE *const sinks[2] = {u->metrics, u->log};
    for (int i = 0; i < 2; i++)
        if (sinks[i] != NULL) {
            fwrite(line, 1, len, sinks[i]);
            fputc('\n', sinks[i]);
            fflush(sinks[i]);
        }
    free(line);
}

static void json_num(clf_json_writer *w, const char *key, double v)
{
    if (isfinite(v)) {
        clf_json_key(w, key);
        clf_json_double(w, v);
    }
}

/* The session's last record (how it ended, where the checkpoint is) and
 * the metrics file closed; a failed write there is told, not fatal: the
 * checkpoint is the run's result (--log's is checked by its caller). */
static void ui_close(ui *u, clf_status st, const clf_train_result *res, const clf_error *err,
                     const char *path)
{
    if (u->metrics == NULL && u->log == NULL)
        return;
    clf_json_writer w;
    clf_json_writer_init(&w);
    clf_json_begin_object(&w);
    clf_json_key(&w, "event");
    clf_json_string(&w, st == CLF_OK                ? "end"
                        : st == CLF_ERR_INTERRUPTED ? "interrupted"
                                                    : "failed");
    clf_json_key(&w, "step");
    clf_json_uint(&w, res->last_step);
    json_num(&w, "tokens_per_s", res->tokens_per_s);
    json_num(&w, "session_s", res->session_s);
    if (res->has_checkpoint) {
        clf_json_key(&w, "checkpoint_step");
        clf_json_uint(&w, res->checkpoint_step);
    }
    if (st != CLF_OK && st != CLF_ERR_INTERRUPTED) {
        clf_json_key(&w, "error");
        clf_json_string(&w, err->msg);
    }
    ui_record(u, &w);
    if (u->metrics != NULL && (ferror(u->metrics) | fclose(u->metrics)))
        fprintf(stderr, "clformer: %s: a write failed; the metrics are incomplete\n", path);
    u->metrics = NULL;
}

static void cb_start(void *user, const clf_train_progress *p)
{
    ui *u = user;
    cli_notice_end(u->rf);
    /* the session's record: where it starts, the device and the config */
    clf_json_writer w;
    clf_json_writer_init(&w);
    clf_json_begin_object(&w);
    clf_json_key(&w, "event");
    clf_json_string(&w, p->first_step > 0 ? "resume" : "start");
    clf_json_key(&w, "step");
    clf_json_uint(&w, p->first_step);
    clf_json_key(&w, "total");
    clf_json_uint(&w, p->total);
    clf_json_key(&w, "time");
    clf_json_int(&w, (int64_t)time(NULL));
    clf_json_key(&w, "device");
    clf_json_string(&w, u->device);
    clf_json_key(&w, "data");
    clf_json_string(&w, u->data);
    size_t n = clf_config_to_yaml(u->cfg, NULL, 0);
    char *yaml = malloc(n + 1);
    if (yaml != NULL) {
        clf_config_to_yaml(u->cfg, yaml, n + 1);
        clf_json_key(&w, "config");
        clf_json_string(&w, yaml);
        free(yaml);
    }
    ui_record(u, &w);
    if (p->first_step > 0)
        fprintf(u->out, "resuming at step %llu of %llu\n", (unsigned long long)p->first_step,
                (unsigned long long)p->total);
    fflush(u->out);
}

static void cb_log(void *user, const clf_train_progress *p)
{
    ui *u = user;
    char el[32], eta[32], tps[32];
    cli_format_duration(p->elapsed_s, el, sizeof el);
    cli_format_duration(p->eta_s, eta, sizeof eta);
    if (p->tokens_per_s > 0)
        cli_group_digits((unsigned long long)(p->tokens_per_s + 0.5), tps, sizeof tps);
    else
        snprintf(tps, sizeof tps, "-");
    int w = snprintf(NULL, 0, "%llu", (unsigned long long)p->total);
    if (u->tty)
        fputs("\r\033[K", u->out);
    if (p->epoch >= 0)
        fprintf(u->out, "epoch %lld | ", (long long)p->epoch + 1);
    fprintf(u->out, "step %*llu/%llu | loss %.4f | lr %.3e | ", w, (unsigned long long)p->step,
            (unsigned long long)p->total, p->loss, p->lr);
    if (p->loss_scale > 0) /* fp16's loss scaling */
        fprintf(u->out, "scale %g, %llu skipped | ", p->loss_scale, (unsigned long long)p->skipped);
    fprintf(u->out, "%s tok/s | %.1f ms/step | %s elapsed | ETA %s", tps, p->step_ms, el, eta);
    if (u->tty) {
        u->line_open = 1;
    } else {
        fputc('\n', u->out);
    }
    fflush(u->out);
    clf_json_writer jw;
    clf_json_writer_init(&jw);
    clf_json_begin_object(&jw);
    clf_json_key(&jw, "step");
    clf_json_uint(&jw, p->step);
    if (p->epoch >= 0) {
        clf_json_key(&jw, "epoch");
        clf_json_int(&jw, p->epoch + 1);
    }
    json_num(&jw, "loss", p->loss);
    json_num(&jw, "lr", p->lr);
    json_num(&jw, "tokens_per_s", p->tokens_per_s);
    json_num(&jw, "step_ms", p->step_ms);
    json_num(&jw, "elapsed_s", p->elapsed_s);
    json_num(&jw, "grad_norm", p->grad_norm);
    if (p->loss_scale > 0) {
        json_num(&jw, "loss_scale", p->loss_scale);
        clf_json_key(&jw, "skipped");
        clf_json_uint(&jw, p->skipped);
    }
    ui_record(u, &jw);
}

static void cb_eval(void *user, const clf_train_eval *e)
{
    ui *u = user;
    ui_endline(u);
    if (e->epoch >= 0) {
        fprintf(u->out, "step %llu (epoch %lld): val loss %.4f", (unsigned long long)e->step,
                (long long)e->epoch, e->val_loss);
        if (e->accuracy == e->accuracy)
            fprintf(u->out, ", accuracy %.2f%%", 100.0 * e->accuracy);
        if (e->bleu == e->bleu)
            fprintf(u->out, ", BLEU %.2f (BP %.3f, ratio %.3f)", e->bleu, e->bleu_bp,
                    e->bleu_ratio);
        fprintf(u->out, "%s (%.1fs)\n", e->best ? " *best*" : "", e->seconds);
    } else if (e->train_loss == e->train_loss) /* not NaN */
        fprintf(u->out, "step %llu: val loss %.4f, train loss %.4f (%.1fs)\n",
                (unsigned long long)e->step, e->val_loss, e->train_loss, e->seconds);
    else
        fprintf(u->out, "step %llu: val loss %.4f over %llu tokens (%.1fs)\n",
                (unsigned long long)e->step, e->val_loss, (unsigned long long)e->val_tokens,
                e->seconds);
    fflush(u->out);
    clf_json_writer w;
    clf_json_writer_init(&w);
    clf_json_begin_object(&w);
    clf_json_key(&w, "step");
    clf_json_uint(&w, e->step);
    if (e->epoch >= 0) {
        clf_json_key(&w, "epoch");
        clf_json_int(&w, e->epoch);
    }
    json_num(&w, "val_loss", e->val_loss);
    json_num(&w, "train_loss", e->train_loss);
    json_num(&w, "accuracy", e->accuracy);
    json_num(&w, "bleu", e->bleu);
    json_num(&w, "seconds", e->seconds);
    if (e->best) {
        clf_json_key(&w, "best");
        clf_json_bool(&w, 1);
    }
    ui_record(u, &w);
}

static void cb_ckpt(void *user, const char *path, uint64_t step)
{
    ui *u = user;
    ui_endline(u);
    fprintf(u->out, "checkpoint: %s (step %llu)\n", path, (unsigned long long)step);
    fflush(u->out);
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: clformer train MODEL.yaml --data FILE|DIR --out DIR [--set KEY=VALUE ...]\n"
            "                      [--steps N] [--resume | --init CKPT] [--log FILE]\n"
            "                      [runtime flags]\n"
            "                      [--val FILE] [--src L --tgt L] [--batch-tokens N] [--beam K]\n"
            "Train the model MODEL.yaml describes, with a checkpoint DIR/ckpt.safetensors at\n"
            "each evaluation and at the end. Ctrl-C, SIGTERM or SIGHUP writes a checkpoint\n"
            "and stops (exit 130, 143, 129); a second one stops at once.\n"
            "A decoder (GPT) trains on a text file: first 90%% train, last 10%% validation.\n"
            "A translator (kind encoder-decoder) trains on parallel sentences: --data DIR with\n"
            "DIR/train.L.gz and DIR/val.L.gz for L = --src and --tgt, or --data SRC,TGT with\n"
            "--val SRC,TGT. A classifier (kind encoder) trains on a TSV with a header naming a\n"
            "label column and a sentence/text column: --data DIR (train.tsv[.gz], dev.tsv) or\n"
            "--data FILE --val FILE. These evaluate each epoch (validation loss, accuracy or\n"
            "BLEU) and keep the best evaluation's model in DIR/best.safetensors too.\n"
            "  --data FILE|DIR   training data (e.g. data/tinyshakespeare.txt)\n"
            "  --out DIR         run directory (created); must not hold a checkpoint unless\n"
            "                    --resume\n"
            "  --set KEY=VALUE   override a config key (repeatable), e.g. train.steps=200\n"
            "  --steps N         shortcut for --set train.steps=N (applied after every --set)\n"
            "  --resume          continue from DIR's checkpoint (bit-identical to an\n"
            "                    uninterrupted run; train.steps may be raised)\n"
            "  --init CKPT       start from the parameters of a checkpoint of the same body\n"
            "                    (e.g. `clformer import`): fine-tuning; a new head is\n"
            "                    initialised, the tokenizer is CKPT's\n"
            "  --val FILE        validation file(s) when --data names files (SRC,TGT or a TSV)\n"
            "  --src L, --tgt L  translation direction: the languages of DIR/train.L.gz\n"
            "  --batch-tokens N  shortcut for --set train.batch_tokens=N: batches of at most\n"
            "                    N (padded) tokens, sorted by length; train.batch then caps\n"
            "                    the sentences (default 0: train.batch sentences per batch)\n"
            "  --beam K          BLEU at each evaluation with beam K (default 1: "
            "greedy)\n"
            "  --log FILE        a copy of DIR/metrics.jsonl, which every run appends to: a\n"
            "                    JSON line per session start (device, config), log step (loss,\n"
            "                    lr, tokens/s, gradient norm), evaluation, and session end\n"
            "Data parallel: `mpirun -np N clformer train ...` trains on N processes, each\n"
            "on its own device (the selector's type, by local rank) with train.batch x\n"
            "train.accumulate per step, gradients summed after backward: the result of one\n"
            "process with train.accumulate x N. Rank 0 prints and writes the "
            "checkpoints.\n" CLI_RUNTIME_FLAGS_HELP);
}

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* After an error in a run: the step it reached and where --resume goes on
 * (the checkpoint on disk is the last one written whole: a failed write
 * leaves it as it was). */
static void print_resume_point(const clf_train_result *res, const char *out)
{
    if (res->has_checkpoint)
        fprintf(stderr,
                "clformer: the run stopped after step %llu of %llu; %s/%s holds step %llu: "
                "continue from it with --resume\n",
                (unsigned long long)res->last_step, (unsigned long long)res->total, out,
                CLF_CHECKPOINT_FILE, (unsigned long long)res->checkpoint_step);
    else
        fprintf(stderr,
                "clformer: the run stopped after step %llu of %llu, before its first "
                "checkpoint: nothing to resume\n",
                (unsigned long long)res->last_step, (unsigned long long)res->total);
}

/* Run the trainer with progress output and Ctrl-C handling; print the
 * summary. Returns an exit code. */
static int run_trainer(clf_model *m, const clf_model_config *cfg, const clf_train_data *data,
                       const clf_tokenizer *tok, const char *out, int resume,
                       const cli_runtime_flags *rf, clf_runtime *rt, const clf_trainer_dist *dist,
                       FILE *log, const char *data_arg)
{
    ui u = {isatty(fileno(stdout)),       0,       stdout, log, NULL, rf, cfg,
            clf_runtime_device(rt)->name, data_arg};
    /* every run keeps its metrics beside its checkpoint, appended across
     * --resume (rank 0, holding the run lock, writes it) */
    char mpath[4200];
    snprintf(mpath, sizeof mpath, "%s/metrics.jsonl", out);
    if ((dist == NULL || dist->rank == 0) && (u.metrics = fopen(mpath, "a+")) == NULL)
        fprintf(stderr, "clformer: %s: cannot open for appending (%s); training without it\n",
                mpath, strerror(errno));
    /* a run killed while writing a record left it torn: end that line, so
     * this session's records stay lines of their own */
    if (u.metrics != NULL && fseek(u.metrics, -1, SEEK_END) == 0 && fgetc(u.metrics) != '\n')
        fputc('\n', u.metrics);
    clf_trainer_options o;
    memset(&o, 0, sizeof o);
    o.out_dir = out;
    o.resume = resume;
    o.stop = &g_stop;
    o.cb.user = &u;
    o.cb.on_start = cb_start;
    o.cb.on_log = cb_log;
    o.cb.on_eval = cb_eval;
    o.cb.on_checkpoint = cb_ckpt;
    o.dist = dist;

    clf_error err;
    clf_error_clear(&err);
    /* Ctrl-C, SIGTERM (schedulers, timeout) and SIGHUP (a closed terminal)
     * all finish the step, write a checkpoint and exit 128 + the signal; a
     * second one takes the default action at once */
    static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa, old[3];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++)
        sigaction(stop_signals[i], &sa, &old[i]);
    clf_train_result res;
    clf_status st = clf_trainer_run(m, cfg, data, tok, &o, &res, &err);
    for (int i = 0; i < 3; i++)
        sigaction(stop_signals[i], &old[i], NULL);
    ui_endline(&u);
    ui_close(&u, st, &res, &err, mpath);

    if (st != CLF_OK && st != CLF_ERR_INTERRUPTED) {
        cli_print_error(NULL, &err);
        if (res.total > 0) /* it failed past the start: what the run keeps */
            print_resume_point(&res, out);
        return cli_exit_code(st);
    }
    char el[32], tps[32];
    cli_format_duration(res.session_s, el, sizeof el);
    cli_group_digits((unsigned long long)(res.tokens_per_s + 0.5), tps, sizeof tps);
    if (st == CLF_ERR_INTERRUPTED)
        printf("interrupted by %s at step %llu of %llu; continue with --resume\n",
               signal_name(g_stop), (unsigned long long)res.last_step,
               (unsigned long long)res.total);
    else if (res.early_stopped)
        printf("early stop at step %llu: no improvement in %d evaluations\n",
               (unsigned long long)res.last_step, cfg->train.early_stop.patience);
    printf("done: steps %llu-%llu in %s (%s training tok/s)", (unsigned long long)res.first_step,
           (unsigned long long)res.last_step, el, tps);
    if (res.last_val_loss == res.last_val_loss)
        printf(", val loss %.4f", res.last_val_loss);
    if (res.last_accuracy == res.last_accuracy)
        printf(", accuracy %.2f%%", 100.0 * res.last_accuracy);
    if (res.last_bleu == res.last_bleu)
        printf(", BLEU %.2f", res.last_bleu);
    printf("\n");
    if (cfg->kind != CLF_MODEL_DECODER && res.best_metric == res.best_metric)
        printf("best %s %.4f at step %llu (%s/best.safetensors)\n",
               clf_config_metric_name(cfg->train.early_stop.metric),
               cfg->train.early_stop.metric == CLF_METRIC_ACCURACY ? 100.0 * res.best_metric
                                                                   : res.best_metric,
               (unsigned long long)res.best_step, out);
    if (dist != NULL && dist->size > 1)
        printf("data parallel: %d ranks, global batch %d x %d per step; waiting on gradient "
               "reductions %.1f s (%.1f%% of this session)\n",
               dist->size, dist->size,
               cfg->train.batch * (cfg->train.accumulate > 1 ? cfg->train.accumulate : 1),
               res.comm_wait_s, res.session_s > 0 ? 100.0 * res.comm_wait_s / res.session_s : 0.0);
    if (rf->profile) {
        cli_print_profile(rt, stdout);
        const clf_model_memory mm = clf_model_memory_get(m);
        size_t now = 0, mem_peak = 0;
        clf_runtime_memory(rt, &now, &mem_peak);
        printf("clformer info's estimate: %.1f MiB (parameters %.1f, gradients %.1f, Adam %.1f, "
               "activations and scratch %.1f, batch %.1f, GEMM workspace %.1f; the engine "
               "allocated %.1f): the peak is %+.1f%% of it\n",
               mm.total / 1048576.0, mm.params / 1048576.0, mm.grads / 1048576.0,
               mm.optim / 1048576.0, mm.activations / 1048576.0, mm.batch / 1048576.0,
               mm.workspace / 1048576.0, clf_gemm_workspace_bytes(rt) / 1048576.0,
               mm.total > 0 ? 100.0 * ((double)mem_peak / (double)mm.total - 1.0) : 0.0);
        double peak = 0.0;
        if (cfg->kind == CLF_MODEL_DECODER && res.tokens_per_s > 0 &&
            clf_runtime_peak_gflops(rt, &peak, &err) == CLF_OK && peak > 0) {
            const double f = cli_train_flops_per_token(cfg, clf_model_dims_get(m).V);
            const double g = res.tokens_per_s * f * 1e-9;
            printf("model FLOP utilisation: %.1f%% (%.1f GFLOP/s of the device's measured %.1f; "
                   "6N + 12LTC = %.3g FLOPs per training token)\n",
                   100.0 * g / peak, g, peak, f);
        }
    }
    return st == CLF_OK ? CLI_EXIT_OK : 128 + (g_stop > 0 ? (int)g_stop : SIGINT);
}

/* The training files' fingerprints ("src[+tgt]", each bytes:crc32 of the
 * file as stored), or "" when one cannot be read (then nothing is
 * checked; the data readers report the file). */
static void seq_fingerprint(const cli_seq_paths *p, char *out, size_t cap)
{
    const char *files[2] = {p->train_src, p->train_tgt};
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < 2 && files[i][0] != '\0'; i++) {
        char *bytes = NULL, one[64];
        size_t n = 0;
        clf_error err;
        if (clf_file_read_all(files[i], (size_t)1 << 34, &bytes, &n, &err) != CLF_OK) {
            out[0] = '\0';
            return;
        }
        clf_fingerprint(bytes, n, one, sizeof one);
        free(bytes);
        used +=
            (size_t)snprintf(out + used, used < cap ? cap - used : 0, "%s%s", i ? "+" : "", one);
    }
    if (used >= cap)
        out[0] = '\0';
}

/* The tokenizer of a checkpoint (resume), and the fingerprint of the data
 * it was trained on ("" if it predates them) into fp. */
static int tokenizer_from_checkpoint(const char *ckpt_path, clf_tokenizer **tok, char *fp,
                                     size_t cap)
{
    clf_error err;
    clf_error_clear(&err);
    clf_checkpoint *ck = NULL;
    fp[0] = '\0';
    clf_status st = clf_checkpoint_open(ckpt_path, &ck, &err);
    if (st == CLF_OK) {
        const char *tj = clf_checkpoint_tokenizer(ck);
        const char *f = clf_checkpoint_meta(ck, "data_fingerprint");
        snprintf(fp, cap, "%s", f != NULL ? f : "");
        st = clf_tokenizer_from_json(tj, strlen(tj), tok, &err);
    }
    clf_checkpoint_close(ck);
    if (st != CLF_OK) {
        cli_print_error(NULL, &err);
        return cli_exit_code(st);
    }
    return CLI_EXIT_OK;
}

typedef struct seq_flags {
    const char *val, *src, *tgt;
    long beam;
} seq_flags;

/* --init: the run's tokenizer is the checkpoint's, of the type the config
 * names. */
static int tokenizer_from_init(const char *init, const clf_model_config *cfg, clf_tokenizer **tok)
{
    char fp[160];
    int rc = tokenizer_from_checkpoint(init, tok, fp, sizeof fp);
    if (rc == CLI_EXIT_OK && clf_tokenizer_type_of(*tok) != cfg->vocab.tokenizer) {
        fprintf(stderr,
                "clformer train: --init %s carries a %s tokenizer, but the config's "
                "vocab.tokenizer is %s\n",
                init, clf_config_tokenizer_name(clf_tokenizer_type_of(*tok)),
                clf_config_tokenizer_name(cfg->vocab.tokenizer));
        clf_tokenizer_destroy(*tok);
        *tok = NULL;
        rc = CLI_EXIT_USAGE;
    }
    return rc;
}

/* --init: the parameters of a checkpoint of the same body into m. */
static int apply_init(const char *init, clf_model *m, const clf_model_config *cfg)
{
    clf_error err;
    clf_error_clear(&err);
    clf_checkpoint *ck = NULL;
    clf_checkpoint_init_report r;
    clf_status st = clf_checkpoint_open(init, &ck, &err);
    if (st == CLF_OK)
        st = clf_checkpoint_init_from(ck, m, cfg, &r, &err);
    clf_checkpoint_close(ck);
    if (st != CLF_OK) {
        cli_print_error(NULL, &err);
        return st == CLF_ERR_FORMAT || st == CLF_ERR_IO ? CLI_EXIT_USAGE : cli_exit_code(st);
    }
    printf("init: %d tensors from %s", r.loaded, init);
    if (r.cut > 0)
        printf(" (position table cut to the context)");
    if (r.fresh > 0)
        printf("; initialised afresh: %s", r.fresh_names);
    if (r.unused > 0)
        printf("; not used: %s", r.unused_names);
    printf("\n");
    return CLI_EXIT_OK;
}

/* The encoder kinds: sentences, tokenizer, limits, model, trainer. */
/* The model and the run of an encoder kind, before training starts. */
static clf_status print_seq_plan(const clf_model_config *cfg, const clf_model *m, clf_runtime *rt,
                                 const clf_train_data *td, uint64_t total, int draws,
                                 const clf_model_limits *lim, const char *out, clf_error *err)
{
    const int s2s = cfg->kind == CLF_MODEL_ENCODER_DECODER;
    clf_model_dims d = clf_model_dims_get(m);
    char np[32];
    cli_group_digits(d.n_real, np, sizeof np);
    printf("device: %s\n", clf_runtime_device(rt)->name);
    if (s2s)
        printf("model: %s parameters (encoder-decoder, %d+%d layers, %d heads, dim %d, ffn %d, "
               "context %d, vocabulary %d)\n",
               np, d.L_enc, d.L_dec, d.NH, d.C, d.H, d.T, d.V);
    else
        printf("model: %s parameters (encoder classifier, %d layers, %d heads, dim %d, ffn %d, "
               "context %d, vocabulary %d, %d labels, %s pooling)\n",
               np, d.L_enc, d.NH, d.C, d.H, d.T, d.V, d.labels,
               clf_config_pool_name(cfg->head.pool));
    char bt[64] = "";
    if (cfg->train.batch_tokens > 0)
        snprintf(bt, sizeof bt, "up to %d tokens and ", cfg->train.batch_tokens);
    uint64_t per_epoch = 0;
    {
        clf_model_config one = *cfg;
        one.train.steps = 0;
        one.train.epochs = 1;
        one.train.accumulate = 1;
        clf_status st = clf_trainer_total_steps(&one, td, 1, &per_epoch, err);
        if (st != CLF_OK)
            return st;
    }
    if (cfg->kind != CLF_MODEL_DECODER) {
        clf_train_padding pd;
        clf_status st = clf_trainer_seq_padding(cfg, td, &pd, err);
        if (st != CLF_OK)
            return st;
        if (cfg->kind == CLF_MODEL_ENCODER_DECODER)
            printf("padding: %.1f%% of source and %.1f%% of target slots in length-bucketed "
                   "batches (%.1f%% and %.1f%% shuffled)\n",
                   100 * pd.src_bucketed, 100 * pd.tgt_bucketed, 100 * pd.src_shuffled,
                   100 * pd.tgt_shuffled);
        else
            printf("padding: %.1f%% of the slots in length-bucketed batches (%.1f%% shuffled)\n",
                   100 * pd.src_bucketed, 100 * pd.src_shuffled);
    }
    const double per_step = (double)draws; /* batches a step takes */
    printf("training: %llu steps (%.1f epochs of %llu batches, %d a step) of %s%d sentences "
           "(largest batch %d x %d/%d), %s lr %g, checkpoints in %s\n",
           (unsigned long long)total,
           per_epoch > 0 ? (double)total * per_step / (double)per_epoch : 0.0,
           (unsigned long long)per_epoch, draws, bt, cfg->train.batch, lim->B, lim->S, lim->T,
           clf_config_schedule_name(cfg->train.schedule.type), cfg->train.optimizer.lr, out);
    return CLF_OK;
}

/* --out: the directory is created and locked (one run writes it at a time:
 * *lock, released by the caller), temporary files of writes a crash
 * interrupted are removed, and the checkpoint in it must exist with
 * --resume and not without. */
static int check_out(const char *out, int resume, char *ckpt_path, size_t cap, clf_dir_lock **lock)
{
    clf_error err;
    char stale[256];
    int rc = cli_mkdir_p(out);
    if (rc != CLI_EXIT_OK)
        return rc;
    clf_status st = clf_dir_lock_acquire(out, lock, stale, sizeof stale, &err);
    if (st != CLF_OK) {
        cli_print_error("--out", &err);
        return cli_exit_code(st);
    }
    if (stale[0] != '\0')
        fprintf(stderr,
                "clformer train: note: took over the lock of %s (%s), which ended without "
                "releasing it\n",
                stale, out);
    static const char *const written[] = {CLF_CHECKPOINT_FILE, "best.safetensors"};
    for (int i = 0; i < 2; i++) {
        int removed = 0;
        if (clf_remove_stale_tmp(out, written[i], &removed, &err) == CLF_OK && removed > 0)
            fprintf(stderr,
                    "clformer train: note: removed %d temporary %s.tmp.* file%s left by an "
                    "interrupted write\n",
                    removed, written[i], removed > 1 ? "s" : "");
    }
    snprintf(ckpt_path, cap, "%s/%s", out, CLF_CHECKPOINT_FILE);
    if (!resume && file_exists(ckpt_path)) {
        fprintf(stderr,
                "clformer train: %s already holds a checkpoint; continue it with --resume, or "
                "choose another --out (or delete it)\n",
                ckpt_path);
        return CLI_EXIT_USAGE;
    }
    if (resume && !file_exists(ckpt_path)) {
        fprintf(stderr, "clformer train: --resume: no checkpoint at %s\n", ckpt_path);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* One run's arguments (cmd_train's flags, resolved). */
typedef struct train_args {
    const char *init, *data, *out, *ckpt_path;
    int resume;
    const seq_flags *sf;
    const cli_runtime_flags *rf;
    const clf_trainer_dist *dist;
    FILE *log;
} train_args;

/* What a run trains on: the data's fingerprint (kept in the checkpoint, so
 * that --resume refuses other data), the tokenizer, what the trainer reads
 * and the model's limits. A decoder reads one text (its dataset); the
 * encoder kinds read sentences (their files, the sets, BLEU's references). */
typedef struct train_inputs {
    char fp[160];
    clf_tokenizer *tok;
    clf_train_data td;
    clf_model_limits lim;
    clf_checkpoint_extra extra[3];
    char *text;
    size_t len;
    clf_dataset *ds;
    cli_seq_paths paths;
    clf_seqdata *tr, *va;
    char **refs;
    size_t n_refs;
} train_inputs;

static void inputs_free(train_inputs *in)
{
    free(in->text);
    clf_dataset_destroy(in->ds);
    clf_seqdata_destroy(in->tr);
    clf_seqdata_destroy(in->va);
    clf_lines_free(in->refs, in->n_refs);
    clf_tokenizer_destroy(in->tok);
}

static int fail_with(clf_status st, clf_error *err)
{
    cli_print_error(NULL, err);
    return cli_exit_code(st);
}

/* The data's files and their fingerprint (a decoder's text is read here). */
static int inputs_open(const train_args *a, const clf_model_config *cfg, train_inputs *in)
{
    clf_error err;
    clf_error_clear(&err);
    if (cfg->kind != CLF_MODEL_DECODER) {
        int rc =
            cli_seq_paths_train(cfg->kind, a->data, a->sf->val, a->sf->src, a->sf->tgt, &in->paths);
        if (rc == CLI_EXIT_OK)
            seq_fingerprint(&in->paths, in->fp, sizeof in->fp);
        return rc;
    }
    clf_status st = clf_dataset_read_text(a->data, &in->text, &in->len, &err);
    if (st != CLF_OK)
        return fail_with(st, &err);
    clf_fingerprint(in->text, in->len, in->fp, sizeof in->fp);
    return CLI_EXIT_OK;
}

/* The tokenizer: a resumed run's (on the same data, else refused),
 * --init's, or the one the config asks for, built from the training data
 * (the library's policy for each kind). */
static int inputs_tokenizer(const train_args *a, const clf_model_config *cfg, train_inputs *in)
{
    if (a->resume) {
        char fp_ckpt[160];
        int rc = tokenizer_from_checkpoint(a->ckpt_path, &in->tok, fp_ckpt, sizeof fp_ckpt);
        if (rc == CLI_EXIT_OK && in->fp[0] != '\0' && fp_ckpt[0] != '\0' &&
            strcmp(in->fp, fp_ckpt) != 0) {
            fprintf(stderr,
                    "clformer train: --resume: %s was trained on other data (bytes:crc32 %s); "
                    "--data %s is %s now. Resume with the same data, or train into a new "
                    "--out\n",
                    a->ckpt_path, fp_ckpt, a->data, in->fp);
            rc = CLI_EXIT_USAGE;
        }
        return rc;
    }
    if (a->init != NULL)
        return tokenizer_from_init(a->init, cfg, &in->tok);
    if (cfg->kind != CLF_MODEL_DECODER) /* every special token (clf_seq_tokenizer_build) */
        return cli_seq_tokenizer(cfg, &in->paths, stdout, &in->tok);
    clf_error err;
    clf_error_clear(&err);
    clf_status st = clf_dataset_tokenizer(cfg, in->text, in->len, a->data, &in->tok, &err);
    return st == CLF_OK ? CLI_EXIT_OK : fail_with(st, &err);
}

/* The encoder kinds' sentences: both sets, BLEU's references, the labels a
 * classifier's head needs when the config leaves them to the data, and the
 * model's limits for the longest batches. */
static int inputs_sentences(const train_args *a, clf_model_config *cfg, train_inputs *in)
{
    const int s2s = cfg->kind == CLF_MODEL_ENCODER_DECODER;
    const cli_seq_paths *p = &in->paths;
    clf_error err;
    clf_error_clear(&err);
    int rc;
    if ((rc = cli_seq_load(cfg, in->tok, p->train_src, s2s ? p->train_tgt : NULL, &in->tr)) !=
            CLI_EXIT_OK ||
        (rc = cli_seq_load(cfg, in->tok, p->val_src, s2s ? p->val_tgt : NULL, &in->va)) !=
            CLI_EXIT_OK)
        return rc;
    cli_seq_report("train", in->tr, stdout);
    cli_seq_report("validation", in->va, stdout);
    if (s2s && (rc = cli_read_lines(p->val_tgt, &in->refs, &in->n_refs)) != CLI_EXIT_OK)
        return rc;
    if (s2s && in->n_refs != clf_seqdata_size(in->va)) {
        fprintf(stderr, "clformer: %s has %zu lines, the validation set %zu sentences\n",
                p->val_tgt, in->n_refs, clf_seqdata_size(in->va));
        return CLI_EXIT_FAIL;
    }
    clf_status st = CLF_OK;
    if (cfg->kind == CLF_MODEL_ENCODER && cfg->head.labels == 0) {
        const int nl = clf_seqdata_stats_get(in->tr)->labels;
        const int nv = clf_seqdata_stats_get(in->va)->labels;
        const int n = nl > nv ? nl : nv;
        char set[64];
        snprintf(set, sizeof set, "head.labels=%d", n < 2 ? 2 : n);
        st = clf_config_set(cfg, set, &err);
    }
    clf_train_data *td = &in->td;
    td->train = in->tr;
    td->val = in->va;
    td->val_refs = s2s ? (const char *const *)in->refs : NULL;
    td->batch_tokens = cfg->train.batch_tokens;
    clf_beam_options_default(&td->decode);
    td->decode.beam = (int)a->sf->beam;
    td->decode.batch = cfg->train.batch > 0 ? cfg->train.batch : 64;
    if (p->src_lang[0])
        in->extra[td->n_extra++] = (clf_checkpoint_extra){"src_lang", p->src_lang};
    if (p->tgt_lang[0])
        in->extra[td->n_extra++] = (clf_checkpoint_extra){"tgt_lang", p->tgt_lang};
    if (st == CLF_OK)
        st = clf_trainer_seq_limits(cfg, td, &in->lim, &err);
    return st == CLF_OK ? CLI_EXIT_OK : fail_with(st, &err);
}

/* What the trainer reads and the model's limits. */
static int inputs_data(const train_args *a, clf_model_config *cfg, train_inputs *in)
{
    memset(&in->td, 0, sizeof in->td);
    in->td.extra = in->extra;
    if (in->fp[0] != '\0')
        in->extra[in->td.n_extra++] = (clf_checkpoint_extra){"data_fingerprint", in->fp};
    if (cfg->kind != CLF_MODEL_DECODER)
        return inputs_sentences(a, cfg, in);
    clf_error err;
    clf_error_clear(&err);
    clf_status st =
        cfg->train.packing
            ? clf_dataset_from_documents(in->text, in->len, a->data, in->tok, &in->ds, &err)
            : clf_dataset_from_text(in->text, in->len, a->data, in->tok, &in->ds, &err);
    free(in->text);
    in->text = NULL;
    if (st == CLF_OK) /* before opening the device */
        st = clf_trainer_check_text(cfg, in->ds, &err);
    in->td.text = in->ds;
    in->lim = (clf_model_limits){.B = cfg->train.batch};
    return st == CLF_OK ? CLI_EXIT_OK : fail_with(st, &err);
}

/* What the run is: the device, the model, the data, the steps. */
static clf_status print_plan(const train_args *a, const clf_model_config *cfg,
                             const train_inputs *in, const clf_model *m, clf_runtime *rt,
                             uint64_t total, clf_error *err)
{
    const int ranks = a->dist != NULL ? a->dist->size : 1;
    const int accumulate = cfg->train.accumulate > 1 ? cfg->train.accumulate : 1;
    if (cfg->kind != CLF_MODEL_DECODER)
        return print_seq_plan(cfg, m, rt, &in->td, total, ranks * accumulate, &in->lim, a->out,
                              err);
    clf_model_dims d = clf_model_dims_get(m);
    char np[32], ntr[32], nva[32];
    cli_group_digits(d.n_real, np, sizeof np);
    cli_group_digits(clf_dataset_size(in->ds, CLF_SPLIT_TRAIN), ntr, sizeof ntr);
    cli_group_digits(clf_dataset_size(in->ds, CLF_SPLIT_VAL), nva, sizeof nva);
    printf("device: %s\n", clf_runtime_device(rt)->name);
    printf("model: %s parameters (%d layers, %d heads, dim %d, context %d, vocabulary %d)\n", np,
           d.L, d.NH, d.C, d.T, d.V);
    printf("data: %s: %s train tokens, %s validation tokens\n", a->data, ntr, nva);
    if (cfg->train.packing) {
        const size_t nd = clf_dataset_document_count(in->ds, CLF_SPLIT_TRAIN);
        printf("packing: %zu documents in the training split, %.1f tokens each on average "
               "(attention and positions restart at each; targets into the next are ignored)\n",
               nd, nd ? (double)clf_dataset_size(in->ds, CLF_SPLIT_TRAIN) / (double)nd : 0.0);
    }
    if (a->dist != NULL)
        printf("data parallel: %d ranks, each %d x %d tokens%s per step\n", a->dist->size,
               cfg->train.batch, cfg->context, accumulate > 1 ? " x train.accumulate" : "");
    printf("training: %llu steps of %d x %d tokens, %s lr %g, checkpoints in %s\n",
           (unsigned long long)total, cfg->train.batch, cfg->context,
           clf_config_schedule_name(cfg->train.schedule.type), cfg->train.optimizer.lr, a->out);
    return CLF_OK;
}

/* One run of any kind: its inputs, the device, the model (with --init's
 * parameters), the trainer. */
static int train(const train_args *a, clf_model_config *cfg)
{
    train_inputs in;
    memset(&in, 0, sizeof in);
    clf_runtime *rt = NULL;
    clf_model *m = NULL;
    clf_error err;
    clf_error_clear(&err);
    clf_status st = CLF_OK;
    uint64_t total = 0;
    int rc;
    if ((rc = inputs_open(a, cfg, &in)) != CLI_EXIT_OK ||
        (rc = inputs_tokenizer(a, cfg, &in)) != CLI_EXIT_OK ||
        (rc = inputs_data(a, cfg, &in)) != CLI_EXIT_OK)
        goto done;
    if ((st = clf_trainer_total_steps(cfg, &in.td, a->dist != NULL ? a->dist->size : 1, &total,
                                      &err)) != CLF_OK)
        goto fail;
    if ((rc = cli_runtime_open(a->rf, &rt)) != CLI_EXIT_OK)
        goto done;
    if (a->dist != NULL && cfg->train.shard_optimizer) /* ZeRO-1: this rank's slice of Adam */
        in.lim.shard = a->dist->rank, in.lim.shards = a->dist->size;
    if ((st = clf_model_create_ex(rt, cfg, clf_tokenizer_vocab_size(in.tok), &in.lim,
                                  CLF_MODEL_TRAIN, &m, &err)) != CLF_OK ||
        (st = print_plan(a, cfg, &in, m, rt, total, &err)) != CLF_OK)
        goto fail;
    if (a->init != NULL && (rc = apply_init(a->init, m, cfg)) != CLI_EXIT_OK)
        goto done;
    fflush(stdout);
    rc =
        run_trainer(m, cfg, &in.td, in.tok, a->out, a->resume, a->rf, rt, a->dist, a->log, a->data);
    goto done;
fail:
    rc = fail_with(st, &err);
done:
    clf_model_destroy(m);
    clf_runtime_destroy(rt);
    inputs_free(&in);
    return rc;
}

static int cmd_train(int argc, char **argv, const cli_mpi *mp);

/* Under mpirun, each rank joins the job first and leaves it last (an
 * error on one rank aborts them all: see cli_mpi.h). */
int cli_cmd_train(int argc, char **argv)
{
    cli_mpi mp;
    int rc = cli_mpi_init(&mp);
    if (rc != CLI_EXIT_OK)
        return rc;
    return cli_mpi_finish(&mp, cmd_train(argc, argv, &mp));
}

static int cmd_train(int argc, char **argv, const cli_mpi *mp)
{
    const char *model_path = NULL, *data = NULL, *out = NULL, *init = NULL, *log_path = NULL;
    cli_list sets = {{NULL}, 0};
    cli_runtime_flags rf;
    cli_runtime_flags_init(&rf);
    seq_flags sf = {NULL, NULL, NULL, 1};
    int resume = 0, seq_flag = 0, steps_given = 0, bt_given = 0;
    long steps = 0, batch_tokens = 0;
    char steps_set[64], bt_set[64];
    const cli_opt opts[] = {
        {"--set", CLI_OPT_SET, &sets, 0, 0, NULL},
        {"--data", CLI_OPT_STR, &data, 0, 0, NULL},
        {"--out", CLI_OPT_STR, &out, 0, 0, NULL},
        {"--val", CLI_OPT_STR, &sf.val, 0, 0, &seq_flag},
        {"--src", CLI_OPT_STR, &sf.src, 0, 0, &seq_flag},
        {"--tgt", CLI_OPT_STR, &sf.tgt, 0, 0, &seq_flag},
        {"--batch-tokens", CLI_OPT_INT, &batch_tokens, 1, 100000000, &bt_given},
        {"--beam", CLI_OPT_INT, &sf.beam, 1, CLF_BEAM_MAX, &seq_flag},
        {"--resume", CLI_OPT_BOOL, &resume, 0, 0, NULL},
        {"--init", CLI_OPT_STR, &init, 0, 0, NULL},
        {"--log", CLI_OPT_STR, &log_path, 0, 0, NULL},
        {"--steps", CLI_OPT_INT, &steps, 1, 2000000000, &steps_given},
    };
    const cli_command cmd = {"clformer train", opts, CLI_COUNT(opts),  &rf,
                             &model_path,      1,    "one MODEL.yaml", usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    /* the shortcuts are --set overrides given last */
    if (sets.n + steps_given + bt_given > CLI_LIST_MAX) {
        fprintf(stderr, "clformer: --set: given more than %d times\n", CLI_LIST_MAX);
        return CLI_EXIT_USAGE;
    }
    if (steps_given) {
        snprintf(steps_set, sizeof steps_set, "train.steps=%ld", steps);
        sets.v[sets.n++] = steps_set;
    }
    if (bt_given) {
        snprintf(bt_set, sizeof bt_set, "train.batch_tokens=%ld", batch_tokens);
        sets.v[sets.n++] = bt_set;
    }
    if (model_path == NULL || data == NULL || out == NULL) {
        fprintf(stderr, "clformer train: %s\n",
                model_path == NULL ? "MODEL.yaml expected"
                : data == NULL     ? "--data FILE is required"
                                   : "--out DIR is required");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }

    if (init != NULL && resume) {
        fprintf(stderr, "clformer train: --init starts a new run from a checkpoint's parameters; "
                        "--resume continues a run: give one of them\n");
        return CLI_EXIT_USAGE;
    }
    clf_model_config cfg;
    int rc = cli_config_load(model_path, &sets, &cfg);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cfg.head.type == CLF_HEAD_NONE) {
        fprintf(stderr,
                "clformer train: %s has no head (head.type none, an embedding model): give it "
                "a classifier head to fine-tune it\n",
                model_path);
        return CLI_EXIT_USAGE;
    }
    if (cfg.kind == CLF_MODEL_DECODER && seq_flag) {
        fprintf(stderr,
                "clformer train: --val, --src, --tgt and --beam are for "
                "the encoder kinds; %s is a decoder trained on one text\n",
                model_path);
        return CLI_EXIT_USAGE;
    }
    char ckpt_path[4096], dev_sel[64];
    clf_dir_lock *lock = NULL;
    const clf_trainer_dist *dist = mp->active && mp->size > 1 ? &mp->dist : NULL;
    FILE *log = NULL;
    if (log_path != NULL && mp->rank == 0 && (log = fopen(log_path, "a")) == NULL) {
        fprintf(stderr, "clformer: --log %s: cannot open for appending: %s\n", log_path,
                strerror(errno));
        return CLI_EXIT_USAGE;
    }
    rf.device = cli_mpi_device(mp, rf.device, dev_sel, sizeof dev_sel);
    /* a closed pipe on the progress output (train ... | head) must not kill
     * the run: its writes fail quietly instead */
    signal(SIGPIPE, SIG_IGN);
    struct stat sb;
    const int existed = stat(out, &sb) == 0;
    if (mp->rank != 0) /* data parallel: rank 0 checks, locks and writes --out */
        rc = snprintf(ckpt_path, sizeof ckpt_path, "%s/%s", out, CLF_CHECKPOINT_FILE) <
                     (int)sizeof ckpt_path
                 ? CLI_EXIT_OK
                 : CLI_EXIT_USAGE;
    else
        rc = check_out(out, resume, ckpt_path, sizeof ckpt_path, &lock);
    if (rc == CLI_EXIT_OK) {
        const train_args a = {init, data, out, ckpt_path, resume, &sf, &rf, dist, log};
        rc = train(&a, &cfg);
    }
    if (log != NULL && fclose(log) != 0 && rc == CLI_EXIT_OK) {
        fprintf(stderr, "clformer: --log %s: write failed\n", log_path);
        rc = CLI_EXIT_FAIL;
    }
    clf_dir_lock_release(lock);
    if (rc != CLI_EXIT_OK && lock != NULL && !existed) {
        /* a run that failed before writing anything leaves no empty --out
         * behind (rmdir removes it only if nothing else is in it) */
        char lock_path[4200];
        snprintf(lock_path, sizeof lock_path, "%s/.clformer.lock", out);
        if (rmdir(out) != 0 && remove(lock_path) == 0 && rmdir(out) != 0) {
            /* something was written: keep it */
        }
    }
    return rc;
}
