/*
 * lines.h - text files as lines and TSV rows: the one line splitter and the
 * one TSV column finder that the sentence sets, the tokenizer builder and the
 * CLI's reference files share.
 *
 * A line ends at '\n' (a final line needs none); a trailing '\r' is dropped,
 * and so is a leading UTF-8 byte-order mark of the text. Spans point into the
 * caller's text: they live as long as it does.
 */
#ifndef CLF_LINES_H
#define CLF_LINES_H

#include <stddef.h>

#include "runtime/status.h"

CLF_API_BEGIN

typedef struct clf_span {
    const char *p;
    size_t len;
} clf_span;

/* The lines of text[0..len): *lines malloc'ed (free()), *n of them. name is
 * for the out-of-memory message. */
clf_status clf_lines_split(const char *text, size_t len, const char *name, clf_span **lines,
                           size_t *n, clf_error *err);

/* The lines of a text file (plain or gzip, at most max_bytes) as malloc'ed
 * strings in a malloc'ed array; free with clf_lines_free. */
clf_status clf_lines_read(const char *path, size_t max_bytes, char ***lines, size_t *n,
                          clf_error *err);
void clf_lines_free(char **lines, size_t n); /* NULL is a no-op */

/* Split a TSV line at tabs into up to cap fields; returns the field count,
 * which may exceed cap. */
size_t clf_tsv_fields(const clf_span *line, clf_span *fields, size_t cap);

/* The index of the first of names[0..n_names) that is a column of the TSV
 * header line, or -1. */
int clf_tsv_column(const clf_span *header, const char *const *names, int n_names);

CLF_API_END

#endif
