/*
 * cli_model.c - helpers shared by train, sample, eval and info: config
 * loading with --set overrides, mkdir -p, opening a checkpoint into a model,
 * number and duration formatting.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        fprintf(stderr, "clformer: --out: bad directory name\n");
        return CLI_EXIT_USAGE;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "clformer: cannot create directory %s: %s\n", buf, strerror(errno));
            return CLI_EXIT_FAIL;
        }
        buf[i] = c;
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "clformer: %s is not a directory\n", path);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

int cli_checkpoint_open(clf_runtime *rt, const char *dir, unsigned flags, int B,
                        clf_model_config *cfg, clf_tokenizer **tok, clf_model **m)
{
    char path[4096];
    struct stat sb;
    *tok = NULL;
    *m = NULL;
    if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    else
        snprintf(path, sizeof path, "%s", dir); /* a checkpoint file given directly */
    clf_error err;
    clf_error_clear(&err);
    clf_checkpoint *ck = NULL;
    clf_status st = clf_checkpoint_open(path, &ck, &err);
    if (st != CLF_OK)
        goto fail;
    *cfg = *clf_checkpoint_config(ck);
    const char *tj = clf_checkpoint_tokenizer(ck);
    if (tj == NULL || tj[0] == '\0') {
        st = clf_error_set(&err, CLF_ERR_FORMAT, "%s: the checkpoint holds no tokenizer", path);
        goto fail;
    }
    if ((st = clf_tokenizer_from_json(tj, strlen(tj), tok, &err)) != CLF_OK) {
        clf_error_prefix(&err, "%s: tokenizer", path);
        goto fail;
    }
    if ((st = clf_model_create(rt, cfg, clf_checkpoint_vocab(ck), B > 0 ? B : cfg->train.batch,
                               flags, m, &err)) != CLF_OK)
        goto fail;
    if ((st = clf_checkpoint_load(ck, *m, CLF_CHECKPOINT_PARAMS, &err)) != CLF_OK)
        goto fail;
    clf_checkpoint_close(ck);
    return CLI_EXIT_OK;
fail:
    cli_print_error(NULL, &err);
    clf_checkpoint_close(ck);
    clf_model_destroy(*m);
    clf_tokenizer_destroy(*tok);
    *m = NULL;
    *tok = NULL;
    return st == CLF_ERR_FORMAT || st == CLF_ERR_IO ? CLI_EXIT_FAIL : cli_exit_code(st);
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
