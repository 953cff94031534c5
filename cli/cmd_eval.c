/*
 * cmd_eval.c - `clformer eval DIR --data FILE [--split val|train] [--batch
 * B] [--json]`: the loss and perplexity of a trained model over a whole
 * split of a text file.
 *
 * The text is tokenized with the checkpoint's tokenizer and split as in
 * training (first 90% train, last 10% validation). The split is cut into
 * non-overlapping windows of the model's context and every predicted
 * position counts once (model/data/dataset.h states the exact rule;
 * clf_trainer_eval_split computes it): loss = sum of per-position
 * cross-entropies / number of targets, perplexity = exp(loss). Deterministic:
 * two runs, or another implementation following the rule, give the same
 * number (up to float rounding of the forward).
 *
 * A non-finite loss prints null in JSON (with "finite": false) and exits 1,
 * the numerical-failure status.
 * --json prints {"val_loss": ..., "perplexity": ..., "tokens": ...} (the key
 * is "train_loss" with --split train); "tokens" is the number of targets.
 *
 * The encoder kinds (cli_data.h for --data): a classifier prints its
 * accuracy and loss over the dev set ({"accuracy": ..., "val_loss": ...,
 * "sentences": ...}); a translator translates the validation sources
 * (greedy, or --beam K with --alpha) and prints sacreBLEU's corpus BLEU of
 * the detokenized translations against the raw reference lines, with its
 * sacreBLEU report line and the teacher-forced loss ({"bleu": ..., ...});
 * --hyps FILE writes the translations. Languages come from --src/--tgt, or
 * from the checkpoint (src_lang, tgt_lang written by train).
 */
#include <math.h>
#include <string.h>

#include "cli/cli_data.h"
#include "cli/cli_model.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: clformer eval DIR --data FILE [--split val|train] [--batch B] [--json]\n"
            "                     [--context N [--rope-scaling S]] [runtime flags]\n"
            "Loss and perplexity of the checkpoint in DIR over a whole split of FILE, in\n"
            "non-overlapping windows of the model's context (every position counts once).\n"
            "  --data FILE       the text (split 90/10 as in training)\n"
            "  --split S         val (default) or train\n"
            "  --batch B         windows per forward (default: the model's train.batch)\n"
            "  --json            print {\"val_loss\": ..., \"perplexity\": ..., \"tokens\": ...}\n"
            "Encoder kinds: --data DIR (its validation split: val/valid/dev, or --split NAME)\n"
            "or --data SRC,REF (translation) or --data FILE.tsv (classification); prints the\n"
            "accuracy or corpus BLEU ({\"accuracy\": ...} / {\"bleu\": ...} with --json).\n"
            "  --beam K          translation: beam size (default 1: greedy)\n"
            "  --alpha A         translation: length penalty logprob / len^A (default 1)\n"
            "  --src L, --tgt L  translation: languages of DIR's files (default: the\n"
            "                    checkpoint's)\n"
            "  --hyps FILE       translation: write the translations to FILE\n"
            "  --no-ema          the trained parameters, not the moving average (train.ema) a\n"
            "                    checkpoint may hold and that is otherwise evaluated\n"
            "Decoders:\n" CLI_CONTEXT_FLAGS_HELP CLI_RUNTIME_FLAGS_HELP);
}

/* limits covering both (a 0 cap means "B x longest": the larger) */
static clf_model_limits limits_merge(clf_model_limits a, const clf_model_limits *b)
{
#define MX(f) a.f = a.f > b->f ? a.f : b->f
#define MX0(f) a.f = (a.f == 0 || b->f == 0) ? 0 : (a.f > b->f ? a.f : b->f)
    MX(B);
    MX(S);
    MX(T);
    MX0(src_tokens);
    MX0(tgt_tokens);
#undef MX
#undef MX0
    return a;
}

typedef struct seq_eval_flags {
    const char *split_name, *src, *tgt, *hyps;
    long beam, batch;
    double alpha;
    int no_ema;
} seq_eval_flags;

/* The encoder kinds: accuracy or BLEU over a validation set. */
/* The hypotheses, one a line, to path. */
static int write_hyps(const char *path, char **hyps, size_t n)
{
    FILE *hf = fopen(path, "w");
    if (hf == NULL) {
        fprintf(stderr, "clformer eval: cannot write %s\n", path);
        return CLI_EXIT_FAIL;
    }
    for (size_t i = 0; i < n; i++)
        fprintf(hf, "%s\n", hyps[i]);
    if (fclose(hf) != 0) {
        fprintf(stderr, "clformer eval: writing %s failed\n", path);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

/* A non-finite loss is a numerical failure (exit 1), said on stderr; JSON
 * gets null and "finite": false rather than bare nan / inf. */
static int loss_status(double loss)
{
    if (isfinite(loss))
        return CLI_EXIT_OK;
    fprintf(stderr,
            "clformer eval: the loss is not finite (%f): the model diverged or its parameters "
            "are broken\n",
            loss);
    return CLI_EXIT_FAIL;
}

static void print_accuracy(const clf_seqeval_result *r, int json, const char *what, double dt)
{
    if (json) {
        printf("{\"accuracy\": ");
        cli_json_num(stdout, r->accuracy, 6);
        printf(", \"val_loss\": ");
        cli_json_num(stdout, r->loss, 6);
        printf(", \"correct\": %llu, \"sentences\": %llu%s}\n", (unsigned long long)r->correct,
               (unsigned long long)r->labelled, isfinite(r->loss) ? "" : ", \"finite\": false");
    } else
        printf("accuracy %.2f%% (%llu of %llu), loss %.4f on %s (%.1fs)\n", 100.0 * r->accuracy,
               (unsigned long long)r->correct, (unsigned long long)r->labelled, r->loss, what, dt);
}

static int eval_seq(const char *dir, const char *data, int json, const seq_eval_flags *f,
                    const cli_runtime_flags *rf)
{
    clf_checkpoint *ck = NULL;
    clf_model_config cfg;
    clf_tokenizer *tok = NULL;
    clf_runtime *rt = NULL;
    clf_model *m = NULL;
    clf_seqdata *ds = NULL;
    char **refs = NULL, **hyps = NULL;
    size_t n_refs = 0;
    clf_error err;
    clf_error_clear(&err);
    clf_status st = CLF_OK;
    int rc = cli_checkpoint_open(dir, &ck, &cfg, &tok);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (f->no_ema)
        clf_checkpoint_use_raw(ck);
    const int s2s = cfg.kind == CLF_MODEL_ENCODER_DECODER;
    const char *src = f->src ? f->src : clf_checkpoint_meta(ck, "src_lang");
    const char *tgt = f->tgt ? f->tgt : clf_checkpoint_meta(ck, "tgt_lang");
    cli_seq_paths paths;
    if ((rc = cli_seq_paths_eval(cfg.kind, data, f->split_name, src, tgt, &paths)) != CLI_EXIT_OK ||
        (rc = cli_seq_load(&cfg, tok, paths.val_src, s2s ? paths.val_tgt : NULL, &ds)) !=
            CLI_EXIT_OK)
        goto done;
    size_t n = clf_seqdata_size(ds);
    const clf_seqdata_stats *ss = clf_seqdata_stats_get(ds);
    if (ss->src.truncated > 0 || ss->tgt.truncated > 0)
        fprintf(stderr,
                "clformer eval: warning: %lld sources and %lld targets were longer "
                "than the model's context and were cut\n",
                (long long)ss->src.truncated, (long long)ss->tgt.truncated);
    if (s2s) {
        if ((rc = cli_read_lines(paths.val_tgt, &refs, &n_refs)) != CLI_EXIT_OK)
            goto done;
        if (n_refs != n) {
            fprintf(stderr, "clformer eval: %s has %zu lines; %s has %zu\n", paths.val_tgt, n_refs,
                    paths.val_src, n);
            rc = CLI_EXIT_FAIL;
            goto done;
        }
    }
    clf_seq_batching bo;
    clf_seqeval_batching((int)(f->batch > 0 ? f->batch : cfg.train.batch), 0, &bo);
    clf_beam_options beam;
    clf_beam_options_default(&beam);
    beam.beam = (int)f->beam;
    beam.alpha = f->alpha;
    beam.batch = bo.batch;
    clf_seq_limits sl;
    if ((st = clf_seqeval_limits(ds, &bo, &sl, &err)) != CLF_OK)
        goto fail;
    clf_model_limits lim = clf_seqeval_model_limits(&sl);
    if (s2s) {
        clf_model_limits bl;
        clf_beam_model_limits(ds, &beam, cfg.context, &bl);
        lim = limits_merge(lim, &bl);
    }
    if ((rc = cli_runtime_open(rf, &rt)) != CLI_EXIT_OK)
        goto done;
    if ((rc = cli_checkpoint_model(rt, ck, &lim, s2s ? CLF_MODEL_INFER : 0, &m)) != CLI_EXIT_OK)
        goto done;
    double t0 = clf_now_seconds();
    clf_seqeval_result r;
    if ((st = clf_seqeval_run(m, ds, &bo, &r, &err)) != CLF_OK)
        goto fail;
    if (!s2s) {
        cli_notice_end(rf);
        print_accuracy(&r, json, paths.val_src, clf_now_seconds() - t0);
    } else {
        clf_bleu_score b;
        if ((st = clf_seqeval_bleu(m, tok, ds, (const char *const *)refs, &beam, &b, &hyps,
                                   &err)) != CLF_OK)
            goto fail;
        double dt = clf_now_seconds() - t0;
        cli_notice_end(rf);
        char line[256];
        clf_bleu_format(&b, line, sizeof line);
        if (json) {
            printf("{\"bleu\": ");
            cli_json_num(stdout, b.score, 4);
            printf(", \"bp\": ");
            cli_json_num(stdout, b.bp, 4);
            printf(", \"ratio\": ");
            cli_json_num(stdout, b.ratio, 4);
            printf(", \"hyp_len\": %lld, \"ref_len\": %lld, \"val_loss\": ", (long long)b.hyp_len,
                   (long long)b.ref_len);
            cli_json_num(stdout, r.loss, 6);
            printf(", \"sentences\": %zu, \"beam\": %d, \"alpha\": %g%s}\n", n, beam.beam,
                   beam.alpha, isfinite(r.loss) ? "" : ", \"finite\": false");
        } else
            printf("%s\n%zu sentences of %s, %s %d (alpha %g); loss %.4f (%.1fs)\n", line, n,
                   paths.val_src, beam.beam == 1 ? "greedy decoding, beam" : "beam search, beam",
                   beam.beam, beam.alpha, r.loss, dt);
        if (f->hyps != NULL && (rc = write_hyps(f->hyps, hyps, n)) != CLI_EXIT_OK)
            goto done;
    }
    cli_print_profile(rt, stderr); /* prints only with --profile */
    rc = loss_status(r.loss);
    goto done;
fail:
    cli_print_error(NULL, &err);
    rc = cli_exit_code(st);
done:
    clf_seqeval_hyps_free(hyps, ds ? clf_seqdata_size(ds) : 0);
    clf_lines_free(refs, n_refs);
    clf_seqdata_destroy(ds);
    clf_model_destroy(m);
    clf_runtime_destroy(rt);
    clf_checkpoint_close(ck);
    clf_tokenizer_destroy(tok);
    return rc;
}

int cli_cmd_eval(int argc, char **argv)
{
    const char *dir = NULL, *data = NULL;
    int json = 0;
    long batch = 0;
    clf_split split = CLF_SPLIT_VAL;
    const char *split_name = NULL, *rope_scaling = NULL;
    long context = 0;
    seq_eval_flags sf = {NULL, NULL, NULL, NULL, 1, 0, 1.0, 0};
    cli_runtime_flags rf;
    cli_runtime_flags_init(&rf);
    const cli_opt opts[] = {
        {"--data", CLI_OPT_STR, &data, 0, 0, NULL},
        {"--json", CLI_OPT_BOOL, &json, 0, 0, NULL},
        {"--batch", CLI_OPT_INT, &batch, 1, 65536, NULL},
        {"--split", CLI_OPT_STR, &split_name, 0, 0, NULL},
        {"--beam", CLI_OPT_INT, &sf.beam, 1, CLF_BEAM_MAX, NULL},
        {"--alpha", CLI_OPT_FLOAT, &sf.alpha, 0.0, 100.0, NULL},
        {"--src", CLI_OPT_STR, &sf.src, 0, 0, NULL},
        {"--tgt", CLI_OPT_STR, &sf.tgt, 0, 0, NULL},
        {"--hyps", CLI_OPT_STR, &sf.hyps, 0, 0, NULL},
        {"--context", CLI_OPT_INT, &context, 1, 1048576, NULL},
        {"--no-ema", CLI_OPT_BOOL, &sf.no_ema, 0, 0, NULL},
        {"--rope-scaling", CLI_OPT_STR, &rope_scaling, 0, 0, NULL},
    };
    const cli_command cmd = {"clformer eval", opts, CLI_COUNT(opts), &rf, &dir, 1,
                             "one DIR",       usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    if (dir == NULL || data == NULL) {
        fprintf(stderr, "clformer eval: %s\n",
                dir == NULL ? "DIR (a training run's --out) expected" : "--data FILE is required");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    {
        /* the kind decides the data: peek at the checkpoint's config */
        clf_checkpoint *ck = NULL;
        clf_model_config ccfg;
        clf_tokenizer *ctok = NULL;
        int prc = cli_checkpoint_open(dir, &ck, &ccfg, &ctok);
        clf_checkpoint_close(ck);
        clf_tokenizer_destroy(ctok);
        if (prc != CLI_EXIT_OK)
            return prc;
        if (ccfg.head.type == CLF_HEAD_NONE) {
            fprintf(stderr,
                    "clformer eval: %s is an embedding model (no head, nothing to score): "
                    "fine-tune it with a classifier head (train --init) first\n",
                    dir);
            return CLI_EXIT_USAGE;
        }
        if (ccfg.kind != CLF_MODEL_DECODER && (context > 0 || rope_scaling != NULL)) {
            fprintf(stderr,
                    "clformer eval: --context and --rope-scaling are for decoders; %s "
                    "holds a model of kind %s\n",
                    dir, clf_config_kind_name(ccfg.kind));
            return CLI_EXIT_USAGE;
        }
        if (ccfg.kind != CLF_MODEL_DECODER) {
            sf.split_name = split_name;
            sf.batch = batch;
            return eval_seq(dir, data, json, &sf, &rf);
        }
    }
    if (sf.src || sf.tgt || sf.hyps || sf.beam != 1) {
        fprintf(stderr, "clformer eval: --beam, --alpha, --src, --tgt and --hyps are for "
                        "translation models\n");
        return CLI_EXIT_USAGE;
    }
    if (split_name != NULL) {
        if (strcmp(split_name, "val") == 0)
            split = CLF_SPLIT_VAL;
        else if (strcmp(split_name, "train") == 0)
            split = CLF_SPLIT_TRAIN;
        else {
            fprintf(stderr, "clformer: --split: expected val or train, got '%s'\n", split_name);
            return CLI_EXIT_USAGE;
        }
    }

    clf_runtime *rt = NULL;
    clf_model *m = NULL;
    clf_tokenizer *tok = NULL;
    clf_dataset *ds = NULL;
    clf_model_config cfg;
    clf_error err;
    clf_error_clear(&err);
    clf_status st = CLF_OK;
    int rc = cli_runtime_open(&rf, &rt);
    if (rc != CLI_EXIT_OK)
        return rc;
    clf_checkpoint *ck = NULL;
    if ((rc = cli_checkpoint_open(dir, &ck, &cfg, &tok)) != CLI_EXIT_OK ||
        (rc = cli_checkpoint_context("clformer eval", ck, &cfg, context, rope_scaling)) !=
            CLI_EXIT_OK) {
        clf_checkpoint_close(ck);
        goto done;
    }
    if (sf.no_ema)
        clf_checkpoint_use_raw(ck);
    const clf_model_limits lim = {.B = (int)batch};
    rc = cli_checkpoint_model(rt, ck, batch > 0 ? &lim : NULL, 0, &m);
    clf_checkpoint_close(ck);
    if (rc != CLI_EXIT_OK)
        goto done;
    if ((st = clf_dataset_load_opts(data, tok, cfg.train.packing, &ds, &err)) != CLF_OK)
        goto fail;
    const double t0 = clf_now_seconds();
    double loss = 0.0;
    uint64_t targets = 0;
    if ((st = clf_trainer_eval_split(m, ds, split, &loss, &targets, &err)) != CLF_OK)
        goto fail;
    const double dt = clf_now_seconds() - t0;
    cli_notice_end(&rf);
    const char *name = split == CLF_SPLIT_VAL ? "val" : "train";
    if (json) {
        printf("{\"%s_loss\": ", name);
        cli_json_num(stdout, loss, 6);
        printf(", \"perplexity\": ");
        cli_json_num(stdout, exp(loss), 6);
        printf(", \"tokens\": %llu", (unsigned long long)targets);
        if (!isfinite(loss))
            printf(", \"finite\": false");
        printf("}\n");
    } else {
        char nt[32];
        cli_group_digits(targets, nt, sizeof nt);
        printf("%s loss %.4f, perplexity %.3f over %s tokens (%zu windows of %d; %.1fs)\n", name,
               loss, exp(loss), nt, clf_dataset_eval_windows(ds, split, clf_model_dims_get(m).T),
               clf_model_dims_get(m).T, dt);
    }
    cli_print_profile(rt, stderr); /* prints only with --profile */
    rc = loss_status(loss);
    goto done;
fail:
    cli_print_error(NULL, &err);
    rc = cli_exit_code(st);
done:
    clf_dataset_destroy(ds);
    clf_model_destroy(m);
    clf_tokenizer_destroy(tok);
    clf_runtime_destroy(rt);
    return rc;
}
