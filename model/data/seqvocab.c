/*
 * seqvocab.c - the tokenizer of an encoder kind's run, built from its
 * training sentences (clf_seq_tokenizer_build in seqdata.h).
 *
 * The text a tokenizer learns from is the translator's source and target
 * files (joint vocabulary) or the classifier TSV's text column, read with
 * lines.h. BPE streams it into a clf_bpe_trainer; char collects it into one
 * text; byte needs none.
 */
#include <stdlib.h>
#include <string.h>

#include "model/data/lines.h"
#include "model/data/seqdata.h"
#include "model/io/fileio.h"
#include "runtime/util.h"

static const char *const TEXT_COLUMNS[] = {"sentence", "text", "content"};

/* Append s[0..n) and a newline to the growing text *joint. */
static clf_status append_line(char **joint, size_t *jlen, const char *s, size_t n, clf_error *err)
{
    char *nj = realloc(*joint, *jlen + n + 2);
    if (nj == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    memcpy(nj + *jlen, s, n);
    *jlen += n;
    nj[(*jlen)++] = '\n';
    nj[*jlen] = '\0';
    *joint = nj;
    return CLF_OK;
}

/* The learning text of one file: every line of a sentence file, or the text
 * column of a TSV (its header names it: sentence, text or content). Each
 * non-empty piece goes to the BPE trainer tr and/or the joint text. */
static clf_status add_file(const char *path, int tsv, clf_bpe_trainer *tr, char **joint,
                           size_t *jlen, clf_error *err)
{
    if (tr != NULL && !tsv)
        return clf_bpe_trainer_add_file(tr, path, err);
    char *text = NULL;
    size_t len = 0, nl = 0;
    clf_span *ls = NULL, f[64];
    clf_status st = clf_file_read_text(path, CLF_SEQDATA_MAX_BYTES, &text, &len, err);
    if (st != CLF_OK)
        return st;
    if (!tsv) { /* char: the file as it is */
        st = append_line(joint, jlen, text, len, err);
        free(text);
        return st;
    }
    if ((st = clf_lines_split(text, len, path, &ls, &nl, err)) != CLF_OK)
        goto done;
    int col = nl > 0 ? clf_tsv_column(&ls[0], TEXT_COLUMNS, 3) : -1;
    if (col < 0) {
        st = nl == 0
                 ? clf_error_set(err, CLF_ERR_FORMAT, "%s: no header line", path)
                 : clf_error_set(err, CLF_ERR_FORMAT,
                                 "%s:1: no text column ('sentence', 'text' or 'content')", path);
        goto done;
    }
    for (size_t i = 1; i < nl && st == CLF_OK; i++) {
        size_t k = clf_tsv_fields(&ls[i], f, 64);
        if ((size_t)col >= k || (size_t)col >= 64 || f[col].len == 0)
            continue;
        if (tr != NULL)
            st = clf_bpe_trainer_add(tr, f[col].p, f[col].len, err);
        if (st == CLF_OK && joint != NULL)
            st = append_line(joint, jlen, f[col].p, f[col].len, err);
    }
done:
    free(ls);
    free(text);
    return st;
}

clf_status clf_seq_tokenizer_specials(clf_tokenizer *tok, clf_error *err)
{
    /* bpe has all six; a pretrained wordpiece vocabulary has what it has */
    if (clf_tokenizer_type_of(tok) == CLF_TOKENIZER_BPE ||
        clf_tokenizer_type_of(tok) == CLF_TOKENIZER_WORDPIECE)
        return CLF_OK;
    for (int s = 0; s < CLF_SPECIAL_COUNT; s++) {
        int32_t id;
        clf_status st = clf_tokenizer_add_special(tok, (clf_special_token)s, &id, err);
        if (st != CLF_OK)
            return st;
    }
    return CLF_OK;
}

/* vocab.path: a tokenizer saved as JSON. */
static clf_status from_path(const char *path, clf_tokenizer **out, clf_error *err)
{
    char *text = NULL;
    size_t len = 0;
    clf_status st = clf_file_read_text(path, CLF_SEQDATA_MAX_BYTES, &text, &len, err);
    if (st == CLF_OK)
        st = clf_tokenizer_from_any_json(text, len, path, out, err);
    free(text);
    if (st != CLF_OK)
        clf_error_prefix(err, "vocab.path %s", path);
    return st;
}

clf_status clf_seq_tokenizer_build(const clf_model_config *cfg, const char *train_src,
                                   const char *train_tgt, clf_tokenizer **out,
                                   clf_seq_vocab_info *info, clf_error *err)
{
    clf_seq_vocab_info none;
    if (info == NULL)
        info = &none;
    memset(info, 0, sizeof *info);
    *out = NULL;
    const double t0 = clf_now_seconds();
    const int tsv = train_tgt == NULL || train_tgt[0] == '\0';
    const char *files[2] = {train_src, tsv ? NULL : train_tgt};
    clf_bpe_trainer *tr = NULL;
    char *joint = NULL;
    size_t jlen = 0;
    clf_status st = CLF_OK;
    if (cfg->vocab.path[0] != '\0') {
        info->from_path = 1;
        st = from_path(cfg->vocab.path, out, err);
    } else if (cfg->vocab.tokenizer == CLF_TOKENIZER_WORDPIECE) {
        st = clf_error_set(err, CLF_ERR_CONFIG,
                           "vocab.tokenizer wordpiece is a pretrained vocabulary: start from the "
                           "pretrained model (train --init CKPT, from `clformer import`) or set "
                           "vocab.path to its tokenizer.json");
    } else if (cfg->vocab.tokenizer == CLF_TOKENIZER_BYTE) {
        st = clf_tokenizer_create(CLF_TOKENIZER_BYTE, NULL, 0, out, err);
    } else if (cfg->vocab.tokenizer == CLF_TOKENIZER_BPE) {
        clf_bpe_options bo;
        clf_bpe_options_init(&bo);
        if (cfg->vocab.size > 0)
            bo.vocab_size = cfg->vocab.size;
        st = clf_bpe_trainer_create(&bo, &tr, err);
        for (int i = 0; i < 2 && files[i] != NULL && st == CLF_OK; i++)
            st = add_file(files[i], tsv, tr, NULL, NULL, err);
        if (st == CLF_OK && (st = clf_bpe_trainer_finish(tr, out, err)) == CLF_OK) {
            clf_bpe_stats bs;
            clf_bpe_trainer_stats(tr, &bs);
            info->merges = (int)bs.merges;
            info->bytes_per_token = bs.tokens > 0 ? (double)bs.bytes / (double)bs.tokens : 0.0;
        }
    } else { /* char: the code points of the training text */
        for (int i = 0; i < 2 && files[i] != NULL && st == CLF_OK; i++)
            st = add_file(files[i], tsv, NULL, &joint, &jlen, err);
        if (st == CLF_OK)
            st = clf_tokenizer_create(CLF_TOKENIZER_CHAR, joint, jlen, out, err);
    }
    if (st == CLF_OK)
        st = clf_seq_tokenizer_specials(*out, err);
    info->seconds = clf_now_seconds() - t0;
    free(joint);
    clf_bpe_trainer_destroy(tr);
    if (st != CLF_OK) {
        clf_tokenizer_destroy(*out);
        *out = NULL;
    }
    return st;
}
