/*
 * config_internal.h - the schema tables shared by config/'s files (not a
 * public header: nothing outside config/ includes it).
 *
 * The schema is a tree of const tables. Each entry names a key, the type of
 * YAML node it takes, where the value lives in clf_model_config (offset),
 * the allowed range or enum names, and for a mapping its child table. The
 * parser (config.c), the dump and diff (schema.c) and the validator's key
 * names (validate.c) all walk the same tables, so a new key is one line.
 */
#ifndef CLF_CONFIG_INTERNAL_H
#define CLF_CONFIG_INTERNAL_H

#include <stddef.h>

#include "config/config.h"

typedef enum clf_cfg_type {
    CLF_CFG_MAP = 0, /* a mapping: sub is the child table */
    CLF_CFG_INT,     /* int, range [lo, hi] */
    CLF_CFG_U64,     /* uint64_t, any non-negative integer */
    CLF_CFG_DOUBLE,  /* double, range per flags */
    CLF_CFG_PAIR,    /* double[2] written as [a, b], each in range */
    CLF_CFG_BOOL,    /* int 0/1 */
    CLF_CFG_ENUM,    /* an enum stored as int; names[v - first] */
    CLF_CFG_STRING,  /* char[size] */
} clf_cfg_type;

/* Range flags for numbers: open ends exclude lo / hi. */
#define CLF_CFG_LO_OPEN 1
#define CLF_CFG_HI_OPEN 2

typedef struct clf_cfg_field {
    const char *key;
    clf_cfg_type type;
    size_t offset;                   /* into clf_model_config */
    const struct clf_cfg_field *sub; /* MAP: child table, ended by key NULL */
    const char *const *names;        /* ENUM: names, ended by NULL */
    int first;                       /* ENUM: the value of names[0] */
    double lo, hi;                   /* INT, DOUBLE, PAIR ranges */
    int flags;                       /* CLF_CFG_LO_OPEN | CLF_CFG_HI_OPEN */
    size_t size;                     /* STRING: capacity including NUL */
} clf_cfg_field;

/* The top-level table: model, train. */
extern const clf_cfg_field clf_cfg_root[];

/* x inside the field's range (finite; open ends per flags; hi >= 1e300 =
 * no upper bound). */
int clf_cfg_in_range(const clf_cfg_field *f, double x);
/* Find key in table (NULL if absent). */
const clf_cfg_field *clf_cfg_find(const clf_cfg_field *table, const char *key);
/* "heads, causal, dropout, bias" into buf. */
void clf_cfg_key_list(const clf_cfg_field *table, char *buf, size_t cap);
/* The display path of the leaf at offset ("blocks.attention.heads",
 * "train.steps": model keys without "model."); "?" if unknown. */
void clf_cfg_path_of(size_t offset, char *buf, size_t cap);
/* The display name of a section path: "model.blocks" -> "blocks",
 * "model" -> "model", "" -> "the top level". */
const char *clf_cfg_display(const char *path);
/* The text of an enum value ("?" if out of range). */
const char *clf_cfg_enum_text(const clf_cfg_field *f, int v);
/* Describe what a field accepts: "an integer >= 1", "one of: pre, post". */
void clf_cfg_expected(const clf_cfg_field *f, char *buf, size_t cap);

/* Cross-field validation that reports offending fields by offset, so that
 * the loader can point at the file position of the key (report may be NULL:
 * then no position). off2 is another involved field or CLF_CFG_NO_FIELD. */
#define CLF_CFG_NO_FIELD ((size_t)-1)
typedef clf_status (*clf_cfg_report_fn)(void *user, size_t off, size_t off2, clf_error *err,
                                        const char *msg);
clf_status clf_cfg_validate_with(const clf_model_config *cfg, clf_cfg_report_fn report, void *user,
                                 clf_error *err);

#endif
