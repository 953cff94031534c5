/*
 * cli_data.c - finding, tokenizing and loading the encoder kinds' data for
 * train, eval, translate and classify (see cli_data.h for the forms).
 *
 * Design: paths are resolved and checked first (a missing file is a usage
 * error naming the path and what was looked for), then the tokenizer is
 * built once from the training text, then both sets are loaded with it.
 * BPE training adds each training file whole (a translator's source and
 * target together: one joint vocabulary, as the shared embeddings need);
 * for a TSV only its text column is added, line by line.
 *
 * Not here: the decoder's text data (cmd_train.c / dataset.h).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli_data.h"
#include "cli/cli_model.h"

/* Tokens per sentence of the token budget embed and classify batch by
 * (--batch sentences x this): a batch of short sentences is --batch of
 * them, one of sentences 8 times longer an eighth as many. */
#define CLI_ROW_TOKENS 64

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int copy_path(char *dst, const char *src)
{
    size_t n = strlen(src);
    if (n == 0 || n >= CLI_PATH_MAX) {
        fprintf(stderr, "clformer: bad path '%s'\n", src);
        return 0;
    }
    memcpy(dst, src, n + 1);
    return 1;
}

/* dir/stem or dir/stem.gz into out; 1 if found */
static int find_file(const char *dir, const char *stem, char *out)
{
    static const char *const ext[] = {"", ".gz"};
    for (int i = 0; i < 2; i++) {
        int n = snprintf(out, CLI_PATH_MAX, "%s/%s%s", dir, stem, ext[i]);
        if (n > 0 && n < CLI_PATH_MAX && is_file(out))
            return 1;
    }
    out[0] = '\0';
    return 0;
}

/* "a,b" -> a, b (each a file) */
static int split_pair(const char *spec, char *a, char *b, const char *flag)
{
    const char *c = strchr(spec, ',');
    if (c == NULL || strchr(c + 1, ',') != NULL || c == spec || c[1] == '\0') {
        fprintf(stderr, "clformer: %s %s: expected a folder or two parallel files SRC,TGT\n", flag,
                spec);
        return 0;
    }
    size_t n = (size_t)(c - spec);
    if (n >= CLI_PATH_MAX || strlen(c + 1) >= CLI_PATH_MAX) {
        fprintf(stderr, "clformer: %s: path too long\n", flag);
        return 0;
    }
    memcpy(a, spec, n);
    a[n] = '\0';
    strcpy(b, c + 1);
    for (int i = 0; i < 2; i++) {
        const char *p = i ? b : a;
        if (!is_file(p)) {
            fprintf(stderr, "clformer: %s: no file %s\n", flag, p);
            return 0;
        }
    }
    return 1;
}

/* The languages of DIR/train.<lang>[.gz] files, for the error message. */
static void list_langs(const char *dir, char *out, size_t cap)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    out[0] = '\0';
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *s = e->d_name;
        if (strncmp(s, "train.", 6) != 0 || strstr(s, ".tsv") != NULL)
            continue;
        char lang[CLI_LANG_MAX];
        size_t k = 0;
        for (const char *q = s + 6; *q && *q != '.' && k + 1 < sizeof lang; q++)
            lang[k++] = *q;
        lang[k] = '\0';
        if (k == 0)
            continue;
        int w = snprintf(out + n, cap - n, "%s%s", n ? ", " : "", lang);
        if (w < 0 || (size_t)w >= cap - n)
            break;
        n += (size_t)w;
    }
    closedir(d);
}

static int langs_needed(const char *dir, const char *src_lang, const char *tgt_lang)
{
    if (src_lang != NULL && src_lang[0] && tgt_lang != NULL && tgt_lang[0])
        return 1;
    char langs[256];
    list_langs(dir, langs, sizeof langs);
    fprintf(stderr,
            "clformer: --data %s is a folder of parallel files: give the direction with --src "
            "LANG --tgt LANG (languages found: %s)\n",
            dir, langs[0] ? langs : "none");
    return 0;
}

static int set_lang(char *dst, const char *lang, const char *flag)
{
    size_t n = strlen(lang);
    if (n == 0 || n >= CLI_LANG_MAX || strchr(lang, '/') != NULL) {
        fprintf(stderr, "clformer: %s %s: expected a short language code such as de\n", flag, lang);
        return 0;
    }
    memcpy(dst, lang, n + 1);
    return 1;
}

/* the parallel files of one split of a folder */
static int split_files(const char *dir, const char *const *splits, int n_splits, const char *src,
                       const char *tgt, char *a, char *b)
{
    char stem[CLI_PATH_MAX];
    for (int i = 0; i < n_splits; i++) {
        snprintf(stem, sizeof stem, "%s.%s", splits[i], src);
        if (!find_file(dir, stem, a))
            continue;
        snprintf(stem, sizeof stem, "%s.%s", splits[i], tgt);
        if (find_file(dir, stem, b))
            return 1;
        fprintf(stderr, "clformer: %s/%s.%s[.gz] exists but %s/%s.%s[.gz] does not\n", dir,
                splits[i], src, dir, splits[i], tgt);
        return 0;
    }
    fprintf(stderr, "clformer: no %s/%s.%s[.gz] with its %s.%s[.gz]%s\n", dir, splits[0], src,
            splits[0], tgt, n_splits > 1 ? " (nor the other validation names: valid, dev)" : "");
    return 0;
}

static int tsv_file(const char *dir, const char *const *splits, int n_splits, char *out)
{
    char stem[CLI_PATH_MAX];
    for (int i = 0; i < n_splits; i++) {
        snprintf(stem, sizeof stem, "%s.tsv", splits[i]);
        if (find_file(dir, stem, out))
            return 1;
    }
    fprintf(stderr, "clformer: no %s/%s.tsv[.gz]%s\n", dir, splits[0],
            n_splits > 1 ? " (nor val.tsv, valid.tsv)" : "");
    return 0;
}

/* A folder of pairs: both languages given and kept in p. */
static int dir_langs(cli_seq_paths *p, const char *data, const char *src_lang, const char *tgt_lang)
{
    return langs_needed(data, src_lang, tgt_lang) && set_lang(p->src_lang, src_lang, "--src") &&
           set_lang(p->tgt_lang, tgt_lang, "--tgt");
}

static const char *const VAL_SPLITS[] = {"val", "valid", "dev"};
static const char *const DEV_SPLITS[] = {"dev", "val", "valid"};

int cli_seq_paths_train(clf_model_kind kind, const char *data, const char *val,
                        const char *src_lang, const char *tgt_lang, cli_seq_paths *p)
{
    memset(p, 0, sizeof *p);
    p->kind = kind;
    if (kind == CLF_MODEL_ENCODER_DECODER) {
        if (is_dir(data)) {
            if (!dir_langs(p, data, src_lang, tgt_lang))
                return CLI_EXIT_USAGE;
            static const char *const tr[] = {"train"};
            if (!split_files(data, tr, 1, src_lang, tgt_lang, p->train_src, p->train_tgt))
                return CLI_EXIT_USAGE;
            if (val == NULL &&
                !split_files(data, VAL_SPLITS, 3, src_lang, tgt_lang, p->val_src, p->val_tgt))
                return CLI_EXIT_USAGE;
        } else if (!split_pair(data, p->train_src, p->train_tgt, "--data")) {
            return CLI_EXIT_USAGE;
        } else if (val == NULL) {
            fprintf(stderr, "clformer: --data SRC,TGT needs --val SRC,TGT (validation files)\n");
            return CLI_EXIT_USAGE;
        }
        if (val != NULL && !split_pair(val, p->val_src, p->val_tgt, "--val"))
            return CLI_EXIT_USAGE;
        if (!is_dir(data)) {
            if (src_lang && !set_lang(p->src_lang, src_lang, "--src"))
                return CLI_EXIT_USAGE;
            if (tgt_lang && !set_lang(p->tgt_lang, tgt_lang, "--tgt"))
                return CLI_EXIT_USAGE;
        }
        return CLI_EXIT_OK;
    }
    /* classifier */
    if (is_dir(data)) {
        static const char *const tr[] = {"train"};
        if (!tsv_file(data, tr, 1, p->train_src))
            return CLI_EXIT_USAGE;
        if (val == NULL && !tsv_file(data, DEV_SPLITS, 3, p->val_src))
            return CLI_EXIT_USAGE;
    } else {
        if (!is_file(data)) {
            fprintf(stderr, "clformer: --data %s: no such file or folder\n", data);
            return CLI_EXIT_USAGE;
        }
        if (!copy_path(p->train_src, data))
            return CLI_EXIT_USAGE;
        if (val == NULL) {
            fprintf(stderr, "clformer: --data FILE.tsv needs --val FILE.tsv (validation set)\n");
            return CLI_EXIT_USAGE;
        }
    }
    if (val != NULL) {
        if (!is_file(val)) {
            fprintf(stderr, "clformer: --val %s: no such file\n", val);
            return CLI_EXIT_USAGE;
        }
        if (!copy_path(p->val_src, val))
            return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

int cli_seq_paths_eval(clf_model_kind kind, const char *data, const char *split,
                       const char *src_lang, const char *tgt_lang, cli_seq_paths *p)
{
    memset(p, 0, sizeof *p);
    p->kind = kind;
    const char *one[1] = {split};
    const char *const *splits = split ? one : (kind == CLF_MODEL_ENCODER ? DEV_SPLITS : VAL_SPLITS);
    int ns = split ? 1 : 3;
    if (kind == CLF_MODEL_ENCODER_DECODER) {
        if (is_dir(data)) {
            if (!dir_langs(p, data, src_lang, tgt_lang))
                return CLI_EXIT_USAGE;
            if (!split_files(data, splits, ns, src_lang, tgt_lang, p->val_src, p->val_tgt))
                return CLI_EXIT_USAGE;
            return CLI_EXIT_OK;
        }
        return split_pair(data, p->val_src, p->val_tgt, "--data") ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    if (is_dir(data))
        return tsv_file(data, splits, ns, p->val_src) ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (!is_file(data)) {
        fprintf(stderr, "clformer: --data %s: no such file or folder\n", data);
        return CLI_EXIT_USAGE;
    }
    return copy_path(p->val_src, data) ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

/* ---- the tokenizer --------------------------------------------------------------------- */

static int fail_err(const clf_error *e, clf_status st)
{
    cli_print_error(NULL, e);
    return cli_exit_code(st);
}

int cli_seq_tokenizer(const clf_model_config *cfg, const cli_seq_paths *p, FILE *out,
                      clf_tokenizer **tok)
{
    clf_error e;
    clf_error_clear(&e);
    clf_seq_vocab_info info;
    const int tsv = p->kind == CLF_MODEL_ENCODER;
    clf_status st =
        clf_seq_tokenizer_build(cfg, p->train_src, tsv ? NULL : p->train_tgt, tok, &info, &e);
    if (st != CLF_OK)
        return fail_err(&e, st);
    const int V = (int)clf_tokenizer_vocab_size(*tok);
    if (info.from_path)
        fprintf(out, "tokenizer: %s from %s, %d tokens\n",
                clf_config_tokenizer_name(clf_tokenizer_type_of(*tok)), cfg->vocab.path, V);
    else if (cfg->vocab.tokenizer == CLF_TOKENIZER_BPE)
        fprintf(out,
                "tokenizer: bpe, %d tokens (%d merges) trained on %s%s%s in %.1fs: %.2f bytes "
                "per token\n",
                V, info.merges, p->train_src, tsv ? "" : " + ", tsv ? "" : p->train_tgt,
                info.seconds, info.bytes_per_token);
    else
        fprintf(out, "tokenizer: %s, %d tokens (special tokens included)\n",
                clf_config_tokenizer_name(cfg->vocab.tokenizer), V);
    return CLI_EXIT_OK;
}

int cli_read_lines(const char *path, char ***lines, size_t *n)
{
    clf_error e;
    clf_error_clear(&e);
    clf_status st = clf_lines_read(path, CLF_SEQDATA_MAX_BYTES, lines, n, &e);
    return st == CLF_OK ? CLI_EXIT_OK : fail_err(&e, st);
}

int cli_seq_load(const clf_model_config *cfg, const clf_tokenizer *tok, const char *src,
                 const char *tgt, clf_seqdata **ds)
{
    clf_error e;
    clf_error_clear(&e);
    clf_seq_options so;
    clf_seq_options_default(&so, cfg->kind, cfg->context);
    clf_status st;
    if (cfg->kind == CLF_MODEL_ENCODER) {
        st = clf_seqdata_load_tsv(src, tok, &so, ds, &e);
    } else if (tgt != NULL) {
        st = clf_seqdata_load_pairs(src, tgt, tok, tok, &so, ds, &e);
    } else {
        char *text = NULL;
        size_t len = 0;
        st = clf_file_read_text(src, CLF_SEQDATA_MAX_BYTES, &text, &len, &e);
        if (st == CLF_OK)
            st = clf_seqdata_from_text(text, len, src, tok, &so, ds, &e);
        free(text);
    }
    if (st != CLF_OK) {
        *ds = NULL;
        return fail_err(&e, st);
    }
    return CLI_EXIT_OK;
}

void cli_seq_report(const char *what, const clf_seqdata *ds, FILE *out)
{
    char line[1024];
    const clf_seqdata_stats *st = clf_seqdata_stats_get(ds);
    clf_seqdata_stats_format(st, line, sizeof line);
    fprintf(out, "%s: %s\n", what, line);
    if (st->src.truncated > 0 || st->tgt.truncated > 0)
        fprintf(out,
                "warning: %s: %lld sources and %lld targets were longer than the context and "
                "were cut (raise model.context to keep them whole)\n",
                what, (long long)st->src.truncated, (long long)st->tgt.truncated);
}

int cli_read_sentences(const char *cmd, const char *input, const clf_model_config *cfg,
                       const clf_tokenizer *tok, clf_seqdata **ds)
{
    char *text = NULL;
    size_t len = 0;
    *ds = NULL;
    int rc = cli_read_input(input, &text, &len);
    if (rc != CLI_EXIT_OK || len == 0) {
        free(text);
        return rc;
    }
    clf_error e;
    clf_error_clear(&e);
    clf_seq_options so;
    clf_seq_options_default(&so, cfg->kind, cfg->context);
    clf_status st =
        clf_seqdata_from_text(text, len, input ? input : "standard input", tok, &so, ds, &e);
    free(text);
    if (st != CLF_OK)
        return fail_err(&e, st);
    const clf_seqdata_stats *ss = clf_seqdata_stats_get(*ds);
    if (ss->src.truncated > 0)
        fprintf(stderr,
                "clformer %s: warning: %lld of %zu sentences were longer than the model's "
                "context (%d tokens) and were cut\n",
                cmd, (long long)ss->src.truncated, clf_seqdata_size(*ds), cfg->context);
    return CLI_EXIT_OK;
}

int cli_read_input(const char *path, char **text, size_t *len)
{
    if (path != NULL) {
        clf_error e;
        clf_error_clear(&e);
        clf_status st = clf_file_read_text(path, CLF_SEQDATA_MAX_BYTES, text, len, &e);
        return st == CLF_OK ? CLI_EXIT_OK : fail_err(&e, st);
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, stdin);
        n += r;
        if (r == 0)
            break;
    }
    if (buf == NULL) {
        fprintf(stderr, "clformer: out of memory reading standard input\n");
        return CLI_EXIT_FAIL;
    }
    if (ferror(stdin)) {
        free(buf);
        fprintf(stderr, "clformer: reading standard input: %s\n", strerror(errno));
        return CLI_EXIT_FAIL;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return CLI_EXIT_OK;
}

int cli_encoder_open(const char *cmd, const char *dir, const char *input, long batch,
                     int head_none_ok, const cli_runtime_flags *rf, cli_encoder_run *r)
{
    memset(r, 0, sizeof *r);
    int rc = cli_checkpoint_open(dir, &r->ck, &r->cfg, &r->tok);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (r->cfg.kind != CLF_MODEL_ENCODER) {
        fprintf(stderr, "clformer %s: %s holds a model of kind %s; %s\n", cmd, dir,
                clf_config_kind_name(r->cfg.kind),
                head_none_ok ? "sentence embeddings need an encoder"
                             : "classification needs an encoder classifier");
        return CLI_EXIT_USAGE;
    }
    if (!head_none_ok && r->cfg.head.type == CLF_HEAD_NONE) {
        fprintf(stderr,
                "clformer %s: %s is an embedding model (no classifier head): use `clformer "
                "embed`, or fine-tune it with a classifier head (train --init)\n",
                cmd, dir);
        return CLI_EXIT_USAGE;
    }
    if ((rc = cli_read_sentences(cmd, input, &r->cfg, r->tok, &r->ds)) != CLI_EXIT_OK ||
        r->ds == NULL)
        return rc; /* an empty input: nothing to do */
    clf_error err;
    clf_error_clear(&err);
    /* a token budget beside the sentence cap: sorted by length, the batch
     * holding the longest sentences gets fewer of them, so one long line
     * does not pad --batch rows to its length (nor size the model and its
     * products for that many rows) */
    clf_seqeval_batching((int)batch, (int)(batch * CLI_ROW_TOKENS), &r->bo);
    clf_seq_limits sl;
    clf_status st = clf_seqeval_limits(r->ds, &r->bo, &sl, &err);
    if (st != CLF_OK) {
        cli_print_error(NULL, &err);
        return cli_exit_code(st);
    }
    const clf_model_limits lim = clf_seqeval_model_limits(&sl);
    if ((rc = cli_runtime_open(rf, &r->rt)) != CLI_EXIT_OK)
        return rc;
    return cli_checkpoint_model(r->rt, r->ck, &lim, 0, &r->m);
}

void cli_encoder_close(cli_encoder_run *r)
{
    clf_seqdata_destroy(r->ds);
    clf_model_destroy(r->m);
    clf_runtime_destroy(r->rt);
    clf_checkpoint_close(r->ck);
    clf_tokenizer_destroy(r->tok);
    memset(r, 0, sizeof *r);
}

int cli_encoder_rows_run(const cli_encoder_rows *job, const char *dir, const char *input,
                         long batch, const cli_runtime_flags *rf)
{
    clf_error err;
    clf_error_clear(&err);
    cli_encoder_run r;
    float *out = NULL;
    int rc = cli_encoder_open(job->cmd, dir, input, batch, job->head_none_ok, rf, &r);
    if (rc == CLI_EXIT_OK && r.ds != NULL) {
        const size_t n = clf_seqdata_size(r.ds), cols = job->cols(&r);
        clf_status st = CLF_OK;
        if ((out = malloc(n * cols * sizeof *out)) == NULL)
            st = clf_error_set(&err, CLF_ERR_MEMORY, "%s: out of host memory", job->cmd);
        if (st == CLF_OK)
            st = job->compute(&r, out, job->user, &err);
        /* a non-finite number is a numerical failure, never an answer */
        for (size_t i = 0; st == CLF_OK && i < n * cols; i++)
            if (!isfinite(out[i]))
                st = clf_error_set(&err, CLF_ERR_NUMERIC,
                                   "%s: the output is not finite (%g at line %lld of the input, "
                                   "column %zu): the model's parameters are NaN or infinite, "
                                   "or it overflowed; nothing was printed",
                                   job->cmd, (double)out[i],
                                   (long long)clf_seqdata_line(r.ds, i / cols), i % cols + 1);
        if (st != CLF_OK) {
            cli_print_error(NULL, &err);
            rc = cli_exit_code(st);
        } else {
            cli_notice_end(rf);
            for (size_t i = 0; i < n; i++)
                job->print(out + i * cols, cols, job->user);
            fflush(stdout);
            cli_print_profile(r.rt, stderr); /* prints only with --profile */
        }
    }
    free(out);
    cli_encoder_close(&r);
    return rc;
}
