/*
 * cli_model.c - helpers shared by train, sample, eval and info: config
 * loading with --set overrides, mkdir -p, opening a checkpoint into a model,
 * number and duration formatting.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_model.h"

int cli_config_load(const char *path, const cli_list *s, clf_model_config *cfg)
{
    clf_error err;
    clf_error_clear(&err);
    clf_status st = clf_config_load(path, s->v, s->n, cfg, &err);
    if (st != CLF_OK) {
        cli_print_error(NULL, &err);
        return cli_exit_code(st) == CLI_EXIT_FAIL && st != CLF_ERR_IO ? CLI_EXIT_USAGE
                                                                      : cli_exit_code(st);
    }
    return CLI_EXIT_OK;
}

int cli_mkdir_p(const char *path)
{
    clf_error err;
    clf_error_clear(&err);
    clf_status st = clf_mkdir_p(path, &err);
    if (st != CLF_OK) {
        cli_print_error("--out", &err);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

/* Checkpoint problems (a missing, corrupt or foreign file) are failures (1),
 * not usage errors. */
static int checkpoint_fail(const clf_error *err, clf_status st)
{
    cli_print_error(NULL, err);
    return st == CLF_ERR_FORMAT || st == CLF_ERR_IO ? CLI_EXIT_FAIL : cli_exit_code(st);
}

int cli_checkpoint_open(const char *dir, clf_checkpoint **ck, clf_model_config *cfg,
                        clf_tokenizer **tok)
{
    clf_error err;
    clf_error_clear(&err);
    *tok = NULL;
    clf_status st = clf_checkpoint_open(dir, ck, &err);
    if (st == CLF_OK) {
        *cfg = *clf_checkpoint_config(*ck);
        st = clf_checkpoint_tokenizer_create(*ck, tok, &err);
    }
    if (st != CLF_OK) {
        clf_checkpoint_close(*ck);
        *ck = NULL;
        return checkpoint_fail(&err, st);
    }
    if (!clf_checkpoint_verified(*ck))
        fprintf(stderr,
                "clformer: note: %s carries no checksums (written by a clformer before they "
                "were added): it is read unverified\n",
                clf_checkpoint_path(*ck));
    return CLI_EXIT_OK;
}

int cli_checkpoint_model(clf_runtime *rt, clf_checkpoint *ck, const clf_model_limits *lim,
                         unsigned flags, clf_model **m)
{
    clf_error err;
    clf_error_clear(&err);
    clf_status st = clf_checkpoint_model_create(ck, rt, lim, flags, m, &err);
    return st == CLF_OK ? CLI_EXIT_OK : checkpoint_fail(&err, st);
}

int cli_checkpoint_context(const char *cmd, clf_checkpoint *ck, clf_model_config *cfg, long context,
                           const char *rope_scaling)
{
    int scaling = -1;
    if (rope_scaling != NULL) {
        for (int i = CLF_ROPE_SCALE_NONE; i <= CLF_ROPE_SCALE_YARN; i++)
            if (strcmp(rope_scaling, clf_config_rope_scaling_name((clf_rope_scaling_type)i)) == 0)
                scaling = i;
        if (scaling < 0) {
            fprintf(stderr, "%s: --rope-scaling: expected none, linear, ntk or yarn, got '%s'\n",
                    cmd, rope_scaling);
            return CLI_EXIT_USAGE;
        }
    }
    if (context == 0) {
        if (rope_scaling == NULL)
            return CLI_EXIT_OK;
        fprintf(stderr, "%s: --rope-scaling needs --context past the trained context (%d)\n", cmd,
                cfg->context);
        return CLI_EXIT_USAGE;
    }
    const int T0 = cfg->context, had = cfg->positional.rope_scaling.type;
    clf_error err;
    clf_error_clear(&err);
    if (clf_checkpoint_set_context(ck, (int)context, scaling, &err) != CLF_OK) {
        fprintf(stderr, "%s: --context %ld: %s\n", cmd, context, err.msg);
        return CLI_EXIT_USAGE;
    }
    *cfg = *clf_checkpoint_config(ck);
    if (scaling < 0 && had == CLF_ROPE_SCALE_NONE &&
        cfg->positional.rope_scaling.type != CLF_ROPE_SCALE_NONE)
        fprintf(stderr,
                "%s: context %ld is past the trained %d: rotary positions scaled by yarn, "
                "factor %.4g (--rope-scaling to choose)\n",
                cmd, context, T0, cfg->positional.rope_scaling.factor);
    return CLI_EXIT_OK;
}

void cli_group_digits(unsigned long long v, char *out, size_t cap)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", v);
    size_t o = 0;
    for (int i = 0; i < n && o + 1 < cap; i++) {
        if (i > 0 && (n - i) % 3 == 0 && o + 2 < cap)
            out[o++] = ',';
        out[o++] = tmp[i];
    }
    out[o] = '\0';
}

void cli_format_duration(double s, char *out, size_t cap)
{
    if (!(s >= 0) || s > 1e9) {
        snprintf(out, cap, "?");
        return;
    }
    if (s < 60.0) {
        snprintf(out, cap, "%.1fs", s);
        return;
    }
    unsigned long t = (unsigned long)(s + 0.5);
    if (t < 3600)
        snprintf(out, cap, "%lum%02lus", t / 60, t % 60);
    else
        snprintf(out, cap, "%luh%02lum%02lus", t / 3600, (t / 60) % 60, t % 60);
}

static int vocab_from_data(const char *data, long *vocab)
{
    char *text = NULL;
    size_t len = 0;
    clf_tokenizer *tok = NULL;
    clf_error err;
    clf_status st = clf_dataset_read_text(data, &text, &len, &err);
    if (st == CLF_OK)
        st = clf_tokenizer_create(CLF_TOKENIZER_CHAR, text, len, &tok, &err);
    free(text);
    if (st != CLF_OK) {
        if (strstr(err.msg, data) == NULL)
            clf_error_prefix(&err, "%s", data);
        cli_print_error("--data", &err);
        return cli_exit_code(st);
    }
    *vocab = clf_tokenizer_vocab_size(tok);
    clf_tokenizer_destroy(tok);
    return CLI_EXIT_OK;
}

int cli_pick_vocab(const clf_model_config *cfg, const char *data, long *vocab, const char **note)
{
    int rc = CLI_EXIT_OK;
    *note = "";
    if (*vocab == 0) {
        if (cfg->vocab.tokenizer == CLF_TOKENIZER_BYTE) {
            *vocab = 256;
        } else if (cfg->vocab.tokenizer == CLF_TOKENIZER_CHAR && data != NULL) {
            rc = vocab_from_data(data, vocab);
        } else if (cfg->vocab.tokenizer == CLF_TOKENIZER_CHAR) {
            *vocab = 65;
            *note = " (assumed: tiny Shakespeare's characters; pass --vocab or --data)";
        } else {
            *vocab = cfg->vocab.size;
        }
    }
    if (cfg->vocab.size > *vocab)
        *vocab = cfg->vocab.size;
    return rc;
}
