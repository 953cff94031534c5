/*
 * lines.c - see lines.h.
 */
#include "model/data/lines.h"

#include <stdlib.h>
#include <string.h>

#include "model/io/fileio.h"

clf_status clf_lines_split(const char *text, size_t len, const char *name, clf_span **lines,
                           size_t *n, clf_error *err)
{
    size_t count = 0, i = 0;
    *lines = NULL;
    *n = 0;
    if (len >= 3 && (unsigned char)text[0] == 0xEF && (unsigned char)text[1] == 0xBB &&
        (unsigned char)text[2] == 0xBF) {
        text += 3;
        len -= 3;
    }
    for (size_t k = 0; k < len; k++)
        count += text[k] == '\n';
    if (len > 0 && text[len - 1] != '\n')
        count++;
    clf_span *ls = malloc((count ? count : 1) * sizeof *ls);
    if (!ls)
        return clf_error_set(err, CLF_ERR_MEMORY, "%s: out of memory for %zu lines", name, count);
    for (size_t k = 0; k < count; k++) {
        const char *p = text + i;
        const char *e = memchr(p, '\n', len - i);
        size_t l = e ? (size_t)(e - p) : len - i;
        i += l + 1;
        if (l > 0 && p[l - 1] == '\r')
            l--;
        ls[k].p = p;
        ls[k].len = l;
    }
    *lines = ls;
    *n = count;
    return CLF_OK;
}

void clf_lines_free(char **lines, size_t n)
{
    if (lines == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
}

clf_status clf_lines_read(const char *path, size_t max_bytes, char ***lines, size_t *n,
                          clf_error *err)
{
    char *text = NULL;
    size_t len = 0, count = 0;
    clf_span *sp = NULL;
    *lines = NULL;
    *n = 0;
    clf_status st = clf_file_read_text(path, max_bytes, &text, &len, err);
    if (st != CLF_OK || (st = clf_lines_split(text, len, path, &sp, &count, err)) != CLF_OK) {
        free(text);
        return st;
    }
    char **out = calloc(count > 0 ? count : 1, sizeof *out);
    for (size_t k = 0; out != NULL && k < count; k++) {
        if ((out[k] = malloc(sp[k].len + 1)) == NULL) {
            clf_lines_free(out, k);
            out = NULL;
            break;
        }
        memcpy(out[k], sp[k].p, sp[k].len);
        out[k][sp[k].len] = '\0';
    }
    free(sp);
    free(text);
    if (out == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "%s: out of memory for %zu lines", path, count);
    *lines = out;
    *n = count;
    return CLF_OK;
}

size_t clf_tsv_fields(const clf_span *l, clf_span *f, size_t cap)
{
    size_t k = 0, start = 0;
    for (size_t i = 0; i <= l->len; i++) {
        if (i == l->len || l->p[i] == '\t') {
            if (k < cap) {
                f[k].p = l->p + start;
                f[k].len = i - start;
            }
            k++;
            start = i + 1;
        }
    }
    return k;
}

#define TSV_HEADER_MAX 64

int clf_tsv_column(const clf_span *header, const char *const *names, int n_names)
{
    clf_span f[TSV_HEADER_MAX];
    size_t nf = clf_tsv_fields(header, f, TSV_HEADER_MAX);
    if (nf > TSV_HEADER_MAX)
        nf = TSV_HEADER_MAX;
    for (int k = 0; k < n_names; k++)
        for (size_t c = 0; c < nf; c++)
            if (strlen(names[k]) == f[c].len && memcmp(f[c].p, names[k], f[c].len) == 0)
                return (int)c;
    return -1;
}
