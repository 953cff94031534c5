/*
 * json.h - a small JSON reader (DOM) and writer, enough for safetensors
 * headers, tokenizer files and checkpoint metadata.
 *
 * Reading
 *   clf_json_parse() turns text into a tree of clf_json nodes. It is strict
 *   RFC 8259: objects, arrays, strings (every escape, \uXXXX with surrogate
 *   pairs decoded to UTF-8), numbers, true/false/null; nothing after the
 *   value but whitespace. It refuses invalid UTF-8, raw control characters in
 *   strings, lone surrogates, duplicate keys in one object, nesting deeper
 *   than max_depth and input longer than max_bytes. Errors are CLF_ERR_FORMAT
 *   with err->where = the source name and a message
 *       "byte 17 (line 2, column 5): expected ':' after an object key"
 *   (byte offsets count from 0; lines and columns from 1, columns in bytes).
 *
 *   The tree is plain structs, read directly: arrays and objects hold their
 *   children in `items[0..count)`; object members carry their `key`, in file
 *   order. Strings are NUL-terminated and also have a length (they may hold
 *   a NUL from "\u0000"). A number keeps its double value and, when the
 *   literal is an integer that fits in int64, the exact integer (is_int).
 *
 *     clf_json *doc;
 *     if (clf_json_parse(text, len, NULL, &doc, err) != CLF_OK) goto fail;
 *     const clf_json *v = clf_json_get(doc, "version");
 *     if (v == NULL || !v->is_int) ...
 *     clf_json_destroy(doc);
 *
 * Writing
 *   clf_json_writer builds compact JSON (no spaces) into a growing buffer.
 *   Calls return nothing; the first misuse (a value where a key is expected,
 *   unbalanced ends, a non-finite number, a string that is not UTF-8) or
 *   allocation failure is remembered and reported by clf_json_writer_finish().
 *   Doubles are written with the fewest digits that read back to the same
 *   value ("0.1", not "0.10000000000000001").
 *
 *     clf_json_writer w;
 *     clf_json_writer_init(&w);
 *     clf_json_begin_object(&w);
 *     clf_json_key(&w, "kind"); clf_json_string(&w, "char");
 *     clf_json_key(&w, "ids");
 *     clf_json_begin_array(&w); clf_json_int(&w, 3); clf_json_end_array(&w);
 *     clf_json_end_object(&w);
 *     char *text; size_t len;
 *     if (clf_json_writer_finish(&w, &text, &len, err) != CLF_OK) goto fail;   // text: free()
 *
 * Not here: JSON Pointer or path queries, comments or trailing commas (not
 * JSON), pretty printing, streaming (SAX) parsing, number formats beyond
 * double and int64 (integers larger than int64 keep only their double).
 */
#ifndef CLF_JSON_H
#define CLF_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

CLF_API_BEGIN

/* ---- reading ------------------------------------------------------------ */

typedef enum clf_json_type {
    CLF_JSON_NULL = 0,
    CLF_JSON_BOOL,
    CLF_JSON_NUMBER,
    CLF_JSON_STRING,
    CLF_JSON_ARRAY,
    CLF_JSON_OBJECT,
} clf_json_type;

typedef struct clf_json clf_json;
struct clf_json {
    clf_json_type type;
    size_t offset;     /* byte offset of the value's first character in the text */
    char *key;         /* the member's name inside an object (NUL-terminated), else NULL */
    size_t key_len;    /* bytes of key */
    int boolean;       /* CLF_JSON_BOOL: 0 or 1 */
    double number;     /* CLF_JSON_NUMBER */
    int is_int;        /* CLF_JSON_NUMBER: the literal has no fraction or exponent and fits int64 */
    int64_t integer;   /* exact value when is_int */
    char *string;      /* CLF_JSON_STRING: decoded UTF-8, NUL-terminated */
    size_t string_len; /* bytes of string */
    clf_json *items;   /* CLF_JSON_ARRAY / CLF_JSON_OBJECT: the children, in order */
    size_t count;      /* number of children */
};

#define CLF_JSON_DEFAULT_MAX_DEPTH 64
#define CLF_JSON_DEFAULT_MAX_BYTES ((size_t)256 << 20)

typedef struct clf_json_options {
    const char *source; /* name for messages ("ckpt.safetensors header"); NULL -> "JSON" */
    int max_depth;      /* nesting limit of arrays/objects; 0 -> CLF_JSON_DEFAULT_MAX_DEPTH */
    size_t max_bytes;   /* longest accepted input; 0 -> CLF_JSON_DEFAULT_MAX_BYTES */
} clf_json_options;

/* Parse len bytes of text (no NUL needed). opt may be NULL (defaults). On
 * success *out is the root; free it with clf_json_destroy(). */
clf_status clf_json_parse(const char *text, size_t len, const clf_json_options *opt, clf_json **out,
                          clf_error *err);
/* Free a tree returned by clf_json_parse(). NULL is a no-op. */
void clf_json_destroy(clf_json *root);

/* The member called key of an object; NULL if v is not an object or has none. */
const clf_json *clf_json_get(const clf_json *v, const char *key);
/* "null", "boolean", "number", "string", "array", "object". */
const char *clf_json_type_name(clf_json_type t);

/* ---- writing ------------------------------------------------------------ */

#define CLF_JSON_WRITER_MAX_DEPTH 64

typedef struct clf_json_writer {
    char *buf;
    size_t len, cap;
    int depth;
    char kind[CLF_JSON_WRITER_MAX_DEPTH]; /* 'o' object or 'a' array per open level */
    int items[CLF_JSON_WRITER_MAX_DEPTH]; /* values written so far at each level */
    int after_key;                        /* a key was written, its value is due */
    int done;                             /* the top-level value is complete */
    clf_status status;                    /* first failure, CLF_OK if none */
    char error[256];                      /* its message */
} clf_json_writer;

void clf_json_writer_init(clf_json_writer *w);
/* Free the buffer (after an error, or instead of _finish). */
void clf_json_writer_release(clf_json_writer *w);
/* Hand the text to the caller (*out malloc'ed, NUL-terminated; *len may be
 * NULL) and reset w. Reports the first error (CLF_ERR_ARG for misuse,
 * CLF_ERR_MEMORY) and frees the buffer in that case. */
clf_status clf_json_writer_finish(clf_json_writer *w, char **out, size_t *len, clf_error *err);

void clf_json_begin_object(clf_json_writer *w);
void clf_json_end_object(clf_json_writer *w);
void clf_json_begin_array(clf_json_writer *w);
void clf_json_end_array(clf_json_writer *w);
void clf_json_key(clf_json_writer *w, const char *key);
void clf_json_key_n(clf_json_writer *w, const char *key, size_t n);
void clf_json_string(clf_json_writer *w, const char *s);
void clf_json_string_n(clf_json_writer *w, const char *s, size_t n); /* may hold NULs */
void clf_json_int(clf_json_writer *w, int64_t v);
void clf_json_uint(clf_json_writer *w, uint64_t v);
void clf_json_double(clf_json_writer *w, double v); /* shortest round-trip form */
void clf_json_float(clf_json_writer *w, float v);   /* shortest form that reads back as v */
void clf_json_bool(clf_json_writer *w, int v);
void clf_json_null(clf_json_writer *w);

/* ---- UTF-8 helpers (shared with the tokenizer) ----------------------------- */

/* Decode one code point from s[0..n). Returns its length in bytes (1-4) and
 * stores it in *cp, or 0 if the bytes there are not valid UTF-8 (overlong
 * forms, surrogates, > U+10FFFF and truncated sequences are invalid). */
int clf_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
/* Encode cp (a valid scalar value) into out[0..4); returns the length, or 0
 * for surrogates and values above U+10FFFF. */
int clf_utf8_encode(uint32_t cp, unsigned char out[4]);
/* Offset of the first invalid byte of s[0..n), or n if it is all valid. */
size_t clf_utf8_validate(const unsigned char *s, size_t n);

CLF_API_END

#endif
