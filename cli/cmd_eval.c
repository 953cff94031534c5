/*
 * cmd_eval.c - `clformer eval DIR --data FILE [--split val|train] [--batch
 * B] [--json]`: the loss and perplexity of a trained model over a whole
 * split of a text file.
 *
 * The text is tokenized with the checkpoint's tokenizer and split as in
 * training (first 90% train, last 10% validation). The split is cut into
 * non-overlapping windows of the model's context and every predicted
 * position counts once (model/dataset.h states the exact rule;
 * clf_trainer_eval_split computes it): loss = sum of per-position
 * cross-entropies / number of targets, perplexity = exp(loss). Deterministic:
 * two runs, or another implementation following the rule, give the same
 * number (up to float rounding of the forward).
 *
 * --json prints {"val_loss": ..., "perplexity": ..., "tokens": ...} (the key
 * is "train_loss" with --split train); "tokens" is the number of targets.
 */
#include <math.h>
#include <string.h>
#include <time.h>

#include "cli_model.h"
#include "model/dataset.h"
#include "model/trainer.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: clformer eval DIR --data FILE [--split val|train] [--batch B] [--json]\n"
            "                     [runtime flags]\n"
            "Loss and perplexity of the checkpoint in DIR over a whole split of FILE, in\n"
            "non-overlapping windows of the model's context (every position counts once).\n"
            "  --data FILE       the text (split 90/10 as in training)\n"
            "  --split S         val (default) or train\n"
            "  --batch B         windows per forward (default: the model's train.batch)\n"
            "  --json            print {\"val_loss\": ..., \"perplexity\": ..., \"tokens\": ...}\n"
            CLI_RUNTIME_FLAGS_HELP);
}

int cli_cmd_eval(int argc, char **argv)
{
    const char *dir = NULL, *data = NULL;
    int json = 0;
    long batch = 0;
    clf_split split = CLF_SPLIT_VAL;
    cli_runtime_flags rf;
    cli_runtime_flags_init(&rf);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int r = cli_runtime_flag(&rf, argc, argv, &i);
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
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--batch") == 0) {
            if (!cli_int_flag(argc, argv, &i, 1, 65536, &batch))
                return CLI_EXIT_USAGE;
        } else if (strcmp(a, "--split") == 0) {
            const char *v = cli_flag_value(argc, argv, &i);
            if (v == NULL)
                return CLI_EXIT_USAGE;
            if (strcmp(v, "val") == 0)
                split = CLF_SPLIT_VAL;
            else if (strcmp(v, "train") == 0)
                split = CLF_SPLIT_TRAIN;
            else {
                fprintf(stderr, "clformer: --split: expected val or train, got '%s'\n", v);
                return CLI_EXIT_USAGE;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "clformer eval: unknown flag '%s' (see --help)\n", a);
            return CLI_EXIT_USAGE;
        } else if (dir == NULL) {
            dir = a;
        } else {
            fprintf(stderr, "clformer eval: unexpected argument '%s': one DIR expected\n", a);
            return CLI_EXIT_USAGE;
        }
    }
    if (dir == NULL || data == NULL) {
        fprintf(stderr, "clformer eval: %s\n",
                dir == NULL ? "DIR (a training run's --out) expected" : "--data FILE is required");
        usage(stderr);
        return CLI_EXIT_USAGE;
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
    if ((rc = cli_checkpoint_open(rt, dir, 0, (int)batch, &cfg, &tok, &m)) != CLI_EXIT_OK)
        goto done;
    if ((st = clf_dataset_load(data, tok, &ds, &err)) != CLF_OK)
        goto fail;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double loss = 0.0;
    uint64_t targets = 0;
    if ((st = clf_trainer_eval_split(m, ds, split, &loss, &targets, &err)) != CLF_OK)
        goto fail;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    const char *name = split == CLF_SPLIT_VAL ? "val" : "train";
    if (json) {
        printf("{\"%s_loss\": %.6f, \"perplexity\": %.6f, \"tokens\": %llu}\n", name, loss,
               exp(loss), (unsigned long long)targets);
    } else {
        char nt[32];
        cli_group_digits(targets, nt, sizeof nt);
        printf("%s loss %.4f, perplexity %.3f over %s tokens (%zu windows of %d; %.1fs)\n",
               name, loss, exp(loss), nt,
               clf_dataset_eval_windows(ds, split, clf_model_dims_get(m).T),
               clf_model_dims_get(m).T, dt);
    }
    if (rf.profile)
        cli_print_profile(rt, stderr);
    rc = CLI_EXIT_OK;
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
