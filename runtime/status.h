/*
 * status.h - status codes and the error record every library call fills in.
 *
 * Library functions return a clf_status and, on failure, describe what went
 * wrong in a caller-owned clf_error: the status, the raw OpenCL or CLBlast
 * code and its symbolic name (when one is involved), where it happened
 * (file:line:col for configs, the source location otherwise) and a message
 * that says what was expected. Only cli/ decides to print or exit.
 *
 * A clf_error is a plain struct with fixed buffers: no ownership, no freeing,
 * safe to put on the stack and to pass NULL for when the caller does not care.
 */
#ifndef CLF_STATUS_H
#define CLF_STATUS_H

#include <stdarg.h>
#include <stddef.h>

/* Public API markers: declarations between CLF_API_BEGIN and CLF_API_END
 * are exported from the shared library; everything else is compiled with
 * hidden visibility (see CMakeLists.txt). Only public headers use them. */
#if defined(__GNUC__)
#define CLF_API_BEGIN _Pragma("GCC visibility push(default)")
#define CLF_API_END _Pragma("GCC visibility pop")
#else
#define CLF_API_BEGIN
#define CLF_API_END
#endif

CLF_API_BEGIN

typedef enum clf_status {
    CLF_OK = 0,
    CLF_ERR_OPENCL,      /* an OpenCL call failed; err->code holds its cl_int */
    CLF_ERR_CLBLAST,     /* a CLBlast call failed; err->code holds its status */
    CLF_ERR_NO_PLATFORM, /* no OpenCL platform at all */
    CLF_ERR_NO_DEVICE,   /* a device selector matched nothing */
    CLF_ERR_BUILD,       /* a kernel program failed to compile */
    CLF_ERR_IO,          /* reading or writing a file failed */
    CLF_ERR_FORMAT,      /* a file is corrupt, truncated or of another version */
    CLF_ERR_CONFIG,      /* a configuration is invalid (see err->where) */
    CLF_ERR_ARG,         /* an invalid argument from the caller or a flag */
    CLF_ERR_MEMORY,      /* host or device allocation failed or is too large */
    CLF_ERR_UNSUPPORTED, /* the device or build lacks a needed feature */
    CLF_ERR_INTERRUPTED, /* the operation was stopped by the user */
    CLF_ERR_NUMERIC,     /* a computation produced NaN or infinity (e.g. a diverging run) */
} clf_status;

#define CLF_ERROR_MSG_MAX 16384

typedef struct clf_error {
    clf_status status;
    int code;                    /* raw OpenCL/CLBlast code, 0 if none */
    char code_name[64];          /* e.g. "CL_OUT_OF_RESOURCES", "" if none */
    char where[512];             /* "model.yaml:12:5" or "runtime/program.c:385" */
    char msg[CLF_ERROR_MSG_MAX]; /* what happened and what was expected */
} clf_error;

/* Fill err (if not NULL) and return st. The message is printf-formatted. */
clf_status clf_error_set(clf_error *err, clf_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
clf_status clf_error_setv(clf_error *err, clf_status st, const char *fmt, va_list ap);
/* As clf_error_set, also recording where (a location string). */
clf_status clf_error_set_at(clf_error *err, clf_status st, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prepend context to an existing message: "loading x: <old message>". */
void clf_error_prefix(clf_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void clf_error_clear(clf_error *err);
const char *clf_status_name(clf_status st);
/* "where: message" (or just the message), plus " [CODE_NAME]" when set. */
void clf_error_format(const clf_error *err, char *out, size_t cap);

CLF_API_END

#endif
