/*
 * cli_data.h - the encoder kinds' data on the command line: where the
 * sentences are (a folder or explicit files), building the tokenizer a
 * config asks for from them (BPE trained on the training text: source and
 * target together for a translator), loading them into seqdata.h sets,
 * reference lines for BLEU, and opening a checkpoint whose model limits
 * depend on the data. Every function prints its own errors (cli/) and
 * returns an exit code (cli.h).
 *
 * Data forms
 *   translation (kind encoder-decoder)
 *     --data DIR         DIR/<split>.<src>[.gz] and DIR/<split>.<tgt>[.gz],
 *                        split train; validation: val, valid or dev (the
 *                        first found); languages from --src/--tgt (or the
 *                        checkpoint's metadata for eval)
 *     --data SRC,TGT     two parallel files (and --val SRC,TGT for training)
 *   classification (kind encoder)
 *     --data DIR         DIR/train.tsv[.gz]; validation DIR/dev.tsv[.gz]
 *                        (or val.tsv, valid.tsv)
 *     --data FILE        a TSV (and --val FILE for training)
 *   A TSV has a header naming a label column ("label") and a text column
 *   ("sentence", "text" or "content"); see seqdata.h.
 *
 * Not here: the decoder's text files (dataset.h), the training loop.
 */
#ifndef CLF_CLI_DATA_H
#define CLF_CLI_DATA_H

#include <stddef.h>

#include "cli/cli.h"

#define CLI_PATH_MAX 4096
#define CLI_LANG_MAX 32

typedef struct cli_seq_paths {
    clf_model_kind kind;
    char train_src[CLI_PATH_MAX]; /* translation source, or the classification TSV */
    char train_tgt[CLI_PATH_MAX]; /* translation target ("" for a classifier) */
    char val_src[CLI_PATH_MAX];
    char val_tgt[CLI_PATH_MAX];
    char src_lang[CLI_LANG_MAX]; /* "" when the files were given explicitly */
    char tgt_lang[CLI_LANG_MAX];
} cli_seq_paths;

/* Training data: data as above, val (NULL or the explicit validation
 * file(s)), languages (NULL = not given). Needs both a training and a
 * validation set. */
int cli_seq_paths_train(clf_model_kind kind, const char *data, const char *val,
                        const char *src_lang, const char *tgt_lang, cli_seq_paths *p);
/* Evaluation data: the `split` (NULL = validation) of a folder, or
 * explicit file(s); fills val_src / val_tgt. */
int cli_seq_paths_eval(clf_model_kind kind, const char *data, const char *split,
                       const char *src_lang, const char *tgt_lang, cli_seq_paths *p);

/* Load a set: translation src + tgt (tgt NULL: sources only), a TSV
 * (tgt ignored), rows cut at the config's context (reported by the caller
 * from the stats). */
int cli_seq_load(const clf_model_config *cfg, const clf_tokenizer *tok, const char *src,
                 const char *tgt, clf_seqdata **ds);
/* "name: 29,000 sentences; source: ... (3 truncated ...)" to out, and a
 * warning line when anything was truncated. */
void cli_seq_report(const char *what, const clf_seqdata *ds, FILE *out);

/* The tokenizer cfg asks for, built from the training files of p
 * (clf_seq_tokenizer_build), with one line about it to out. */
int cli_seq_tokenizer(const clf_model_config *cfg, const cli_seq_paths *p, FILE *out,
                      clf_tokenizer **tok);
/* The lines of a text file (clf_lines_read); free with clf_lines_free. */
int cli_read_lines(const char *path, char ***lines, size_t *n);

/* The sentences of --input (or standard input), one a line, tokenized for
 * cfg's kind and context, with a warning from `cmd` when some were cut. *ds
 * stays NULL for an empty input. */
int cli_read_sentences(const char *cmd, const char *input, const clf_model_config *cfg,
                       const clf_tokenizer *tok, clf_seqdata **ds);

/* An encoder checkpoint run over sentences (classify, embed): everything
 * cli_encoder_open made, released by cli_encoder_close. */
typedef struct cli_encoder_run {
    clf_checkpoint *ck;
    clf_model_config cfg;
    clf_tokenizer *tok;
    clf_runtime *rt;
    clf_model *m;
    clf_seqdata *ds; /* NULL: the input was empty (nothing to do) */
    clf_seq_batching bo;
} cli_encoder_run;

/* Open DIR's checkpoint for `cmd`, which needs an encoder (with a head
 * unless head_none_ok; a refusal names what to use instead), read the
 * sentences of --input or standard input, batch them by `batch` and create
 * the model planned for them on the device of rf. Returns an exit code;
 * *r is filled as far as it got (cli_encoder_close releases it either way). */
int cli_encoder_open(const char *cmd, const char *dir, const char *input, long batch,
                     int head_none_ok, const cli_runtime_flags *rf, cli_encoder_run *r);
void cli_encoder_close(cli_encoder_run *r);

/* An encoder command that makes one row of floats per input sentence
 * (classify's probabilities, embed's vectors): how wide a row is, how the
 * rows are computed, how one is printed. */
typedef struct cli_encoder_rows {
    const char *cmd;  /* "classify" */
    int head_none_ok; /* as cli_encoder_open */
    size_t (*cols)(const cli_encoder_run *r);
    clf_status (*compute)(const cli_encoder_run *r, float *out, const void *user, clf_error *err);
    void (*print)(const float *row, size_t cols, const void *user);
    const void *user; /* the command's flags */
} cli_encoder_rows;
/* Run such a command over --input (or standard input) with DIR's model:
 * open (cli_encoder_open), compute the rows, print them in input order,
 * the profile with --profile; an exit code. */
int cli_encoder_rows_run(const cli_encoder_rows *job, const char *dir, const char *input,
                         long batch, const cli_runtime_flags *rf);

/* Read all of standard input (or a file with path != NULL) into *text. */
int cli_read_input(const char *path, char **text, size_t *len);

#endif
