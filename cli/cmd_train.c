/*
 * cmd_train.c - `clformer train MODEL.yaml --data FILE --out DIR [--device
 * SEL] [--set KEY=VALUE ...] [--steps N] [--resume] [--profile]`.
 *
 * Reads the model file (with overrides), builds the tokenizer from the text
 * (or, with --resume, takes the checkpoint's), splits the data, creates the
 * model on the device and runs the trainer (model/trainer.h), printing its
 * progress: on a terminal one line rewritten in place (\r), otherwise one
 * line per log step; the validation loss at each evaluation; a checkpoint
 * at each evaluation and at the end, DIR/ckpt.safetensors, written
 * atomically. Ctrl-C sets the trainer's stop flag: it finishes the step,
 * writes a checkpoint and we exit 130 (a second Ctrl-C kills at once).
 *
 * A fresh run refuses a DIR that already holds a checkpoint (use --resume,
 * or another --out), so a finished run is never overwritten by accident.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_model.h"
#include "model/checkpoint.h"
#include "model/dataset.h"
#include "model/trainer.h"

static volatile sig_atomic_t g_stop; /* set by the SIGINT handler only */

static void on_sigint(int sig)
{
    (void)sig;
    g_stop = 1;
}

typedef struct ui {
    int tty;
    int line_open; /* a \r progress line is on screen without its newline */
    FILE *out;
} ui;

static void ui_endline(ui *u)
{
    if (u->line_open) {
        fputc('\n', u->out);
        u->line_open = 0;
    }
}

static void cb_start(void *user, const clf_train_progress *p)
{
    ui *u = user;
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
        snprintf(tps, sizeof tps, "-"); /* the warm-up step */
    int w = snprintf(NULL, 0, "%llu", (unsigned long long)p->total);
    if (u->tty)
        fputs("\r\033[K", u->out);
    fprintf(u->out,
            "step %*llu/%llu | loss %.4f | lr %.3e | %s tok/s | %.1f ms/step | %s elapsed | "
            "ETA %s",
            w, (unsigned long long)p->step, (unsigned long long)p->total, p->loss, p->lr, tps,
            p->step_ms, el, eta);
    if (u->tty) {
        u->line_open = 1;
    } else {
        fputc('\n', u->out);
    }
    fflush(u->out);
}

static void cb_eval(void *user, const clf_train_eval *e)
{
    ui *u = user;
    ui_endline(u);
    if (e->train_loss == e->train_loss) /* not NaN */
        fprintf(u->out, "step %llu: val loss %.4f, train loss %.4f (%.1fs)\n",
                (unsigned long long)e->step, e->val_loss, e->train_loss, e->seconds);
    else
        fprintf(u->out, "step %llu: val loss %.4f over %llu tokens (%.1fs)\n",
                (unsigned long long)e->step, e->val_loss, (unsigned long long)e->val_tokens,
                e->seconds);
    fflush(u->out);
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
            "usage: clformer train MODEL.yaml --data FILE --out DIR [--set KEY=VALUE ...]\n"
            "                      [--steps N] [--resume] [runtime flags]\n"
            "Train the model MODEL.yaml describes on a text file (first 90%% train, last 10%%\n"
            "validation), with a checkpoint DIR/ckpt.safetensors at each evaluation and at\n"
            "the end. Ctrl-C writes a checkpoint and stops (exit 130).\n"
            "  --data FILE       training text (e.g. data/tinyshakespeare.txt)\n"
            "  --out DIR         run directory (created); must not hold a checkpoint unless\n"
            "                    --resume\n"
            "  --set KEY=VALUE   override a config key (repeatable), e.g. train.steps=200\n"
            "  --steps N         shortcut for --set train.steps=N\n"
            "  --resume          continue from DIR's checkpoint (bit-identical to an\n"
            "                    uninterrupted run; train.steps may be raised)\n" CLI_RUNTIME_FLAGS_HELP);
}

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

int cli_cmd_train(int argc, char **argv)
{
    const char *model_path = NULL, *data = NULL, *out = NULL;
    cli_sets sets;
    memset(&sets, 0, sizeof sets);
    cli_runtime_flags rf;
    cli_runtime_flags_init(&rf);
    int resume = 0;
    char steps_set[64];
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int r = cli_set_flag(&sets, argc, argv, &i);
        if (r == 0)
            r = cli_runtime_flag(&rf, argc, argv, &i);
        if (r < 0)
            return CLI_EXIT_USAGE;
        if (r > 0)
            continue;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return CLI_EXIT_OK;
        } else if (strcmp(a, "--data") == 0) {
            if ((data = cli_flag_value(argc, argv, &i)) == NULL)
                return CLI_EXIT_USAGE;
        } else if (strcmp(a, "--out") == 0) {
            if ((out = cli_flag_value(argc, argv, &i)) == NULL)
                return CLI_EXIT_USAGE;
        } else if (strcmp(a, "--resume") == 0) {
            resume = 1;
        } else if (strcmp(a, "--steps") == 0) {
            long n = 0;
            if (!cli_int_flag(argc, argv, &i, 1, 2000000000L, &n))
                return CLI_EXIT_USAGE;
            snprintf(steps_set, sizeof steps_set, "train.steps=%ld", n);
            if (sets.n >= CLI_MAX_SETS) {
                fprintf(stderr, "clformer: too many --set\n");
                return CLI_EXIT_USAGE;
            }
            sets.v[sets.n++] = steps_set;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "clformer train: unknown flag '%s' (see --help)\n", a);
            return CLI_EXIT_USAGE;
        } else if (model_path == NULL) {
            model_path = a;
        } else {
            fprintf(stderr, "clformer train: unexpected argument '%s': one MODEL.yaml expected\n",
                    a);
            return CLI_EXIT_USAGE;
        }
    }
    if (model_path == NULL || data == NULL || out == NULL) {
        fprintf(stderr, "clformer train: %s\n",
                model_path == NULL ? "MODEL.yaml expected"
                : data == NULL     ? "--data FILE is required"
                                   : "--out DIR is required");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }

    clf_model_config cfg;
    int rc = cli_config_load(model_path, &sets, &cfg);
    if (rc != CLI_EXIT_OK)
        return rc;
    char ckpt_path[4096];
    snprintf(ckpt_path, sizeof ckpt_path, "%s/%s", out, CLF_TRAINER_CKPT_NAME);
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
    if ((rc = cli_mkdir_p(out)) != CLI_EXIT_OK)
        return rc;

    clf_error err;
    clf_error_clear(&err);
    clf_status st = CLF_OK;
    char *text = NULL;
    size_t len = 0;
    clf_tokenizer *tok = NULL;
    clf_dataset *ds = NULL;
    clf_runtime *rt = NULL;
    clf_model *m = NULL;
    clf_checkpoint *ck = NULL;
    rc = CLI_EXIT_OK;

    if ((st = clf_dataset_read_text(data, &text, &len, &err)) != CLF_OK)
        goto fail;
    if (resume) {
        if ((st = clf_checkpoint_open(ckpt_path, &ck, &err)) != CLF_OK)
            goto fail;
        const char *tj = clf_checkpoint_tokenizer(ck);
        if ((st = clf_tokenizer_from_json(tj, strlen(tj), &tok, &err)) != CLF_OK)
            goto fail;
        clf_checkpoint_close(ck);
        ck = NULL;
    } else {
        if ((st = clf_tokenizer_create(cfg.vocab.tokenizer, text, len, &tok, &err)) != CLF_OK)
            goto fail;
    }
    if ((st = clf_dataset_from_text(text, len, data, tok, &ds, &err)) != CLF_OK)
        goto fail;
    free(text);
    text = NULL;
    if ((rc = cli_runtime_open(&rf, &rt)) != CLI_EXIT_OK)
        goto done;
    if ((st = clf_model_create(rt, &cfg, clf_tokenizer_vocab_size(tok), cfg.train.batch,
                               CLF_MODEL_TRAIN, &m, &err)) != CLF_OK)
        goto fail;

    clf_model_dims d = clf_model_dims_get(m);
    char np[32], ntr[32], nva[32];
    cli_group_digits(d.n_real, np, sizeof np);
    cli_group_digits(clf_dataset_size(ds, CLF_SPLIT_TRAIN), ntr, sizeof ntr);
    cli_group_digits(clf_dataset_size(ds, CLF_SPLIT_VAL), nva, sizeof nva);
    printf("device: %s\n", clf_runtime_device(rt)->name);
    printf("model: %s parameters (%d layers, %d heads, dim %d, context %d, vocabulary %d)\n", np,
           d.L, d.NH, d.C, d.T, d.V);
    printf("data: %s: %s train tokens, %s validation tokens\n", data, ntr, nva);
    printf("training: %llu steps of %d x %d tokens, %s lr %g, checkpoints in %s\n",
           (unsigned long long)clf_trainer_total_steps(&cfg, ds), cfg.train.batch, cfg.context,
           clf_config_schedule_name(cfg.train.schedule.type), cfg.train.optimizer.lr, out);
    fflush(stdout);

    ui u = {isatty(fileno(stdout)), 0, stdout};
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

    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND; /* a second Ctrl-C takes the default action */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    clf_train_result res;
    st = clf_trainer_run(m, &cfg, ds, tok, &o, &res, &err);
    sigaction(SIGINT, &old, NULL);
    ui_endline(&u);

    if (st == CLF_OK || st == CLF_ERR_INTERRUPTED) {
        char el[32], tps[32];
        cli_format_duration(res.session_s, el, sizeof el);
        cli_group_digits((unsigned long long)(res.tokens_per_s + 0.5), tps, sizeof tps);
        if (st == CLF_ERR_INTERRUPTED)
            printf("interrupted at step %llu of %llu; continue with --resume\n",
                   (unsigned long long)res.last_step, (unsigned long long)res.total);
        else if (res.early_stopped)
            printf("early stop at step %llu: no improvement in %d evaluations\n",
                   (unsigned long long)res.last_step, cfg.train.early_stop.patience);
        printf("done: steps %llu-%llu in %s (%s training tok/s)", (unsigned long long)res.first_step,
               (unsigned long long)res.last_step, el, tps);
        if (res.last_val_loss == res.last_val_loss)
            printf(", val loss %.4f", res.last_val_loss);
        printf("\n");
        if (rf.profile)
            cli_print_profile(rt, stdout);
        rc = st == CLF_OK ? CLI_EXIT_OK : CLI_EXIT_INTERRUPTED;
        goto done;
    }
fail:
    cli_print_error(NULL, &err);
    rc = cli_exit_code(st);
done:
    free(text);
    clf_checkpoint_close(ck);
    clf_model_destroy(m);
    clf_runtime_destroy(rt);
    clf_dataset_destroy(ds);
    clf_tokenizer_destroy(tok);
    return rc;
}
