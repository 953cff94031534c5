/*
 * metrics.c - reading a run's metrics.jsonl (`clformer train` appends a JSON
 * record per line to it) for plot and report: each whole record in file
 * order; a torn line, which a run killed while writing leaves behind (its
 * next session starts a new line), is said on stderr and passed over.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

enum { METRICS_MAX_BYTES = 256 << 20 };

int cli_metrics_read(const char *cmd, const char *path, const char *hint, cli_metrics_fn fn,
                     void *user)
{
    char *text = NULL;
    size_t len = 0;
    clf_error err;
    clf_error_clear(&err);
    if (clf_file_read_all(path, METRICS_MAX_BYTES, &text, &len, &err) != CLF_OK) {
        fprintf(stderr, "clformer %s: %s%s\n", cmd, err.msg, errno == ENOENT ? hint : "");
        return CLI_EXIT_USAGE;
    }
    int rc = CLI_EXIT_OK;
    size_t line = 1;
    for (char *p = text; p < text + len && rc == CLI_EXIT_OK; line++) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p));
        const size_t n = nl != NULL ? (size_t)(nl - p) : (size_t)(text + len - p);
        if (n > 0) {
            clf_json *rec = NULL;
            clf_json_options o = {path, 0, 0};
            if (clf_json_parse(p, n, &o, &rec, &err) != CLF_OK)
                fprintf(stderr, "clformer %s: %s line %zu: not a whole record (%s); skipped\n", cmd,
                        path, line, err.msg);
            else
                rc = fn(user, &rec);
            clf_json_destroy(rec);
        }
        p += n + 1;
    }
    free(text);
    return rc;
}
