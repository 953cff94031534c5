/*
 * status.c - filling and formatting clf_error records.
 */
#include "runtime/status.h"

#include <stdio.h>
#include <string.h>

clf_status clf_error_setv(clf_error *err, clf_status st, const char *fmt, va_list ap)
{
    if (err == NULL)
        return st;
    err->status = st;
    err->code = 0;
    err->code_name[0] = '\0';
    err->where[0] = '\0';
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    return st;
}

clf_status clf_error_set(clf_error *err, clf_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    clf_error_setv(err, st, fmt, ap);
    va_end(ap);
    return st;
}

clf_status clf_error_set_at(clf_error *err, clf_status st, const char *where, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    clf_error_setv(err, st, fmt, ap);
    va_end(ap);
    if (err != NULL && where != NULL)
        snprintf(err->where, sizeof err->where, "%s", where);
    return st;
}

void clf_error_prefix(clf_error *err, const char *fmt, ...)
{
    if (err == NULL)
        return;
    char head[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    size_t hl = strlen(head), ml = strlen(err->msg);
    if (hl + 2 >= sizeof err->msg)
        return;
    if (hl + 2 + ml >= sizeof err->msg)
        ml = sizeof err->msg - hl - 3;
    memmove(err->msg + hl + 2, err->msg, ml);
    err->msg[hl + 2 + ml] = '\0';
    memcpy(err->msg, head, hl);
    err->msg[hl] = ':';
    err->msg[hl + 1] = ' ';
}

void clf_error_clear(clf_error *err)
{
    if (err == NULL)
        return;
    err->status = CLF_OK;
    err->code = 0;
    err->code_name[0] = '\0';
    err->where[0] = '\0';
    err->msg[0] = '\0';
}

const char *clf_status_name(clf_status st)
{
    switch (st) {
        case CLF_OK: return "ok";
        case CLF_ERR_OPENCL: return "OpenCL error";
        case CLF_ERR_CLBLAST: return "CLBlast error";
        case CLF_ERR_NO_PLATFORM: return "no OpenCL platform";
        case CLF_ERR_NO_DEVICE: return "no such device";
        case CLF_ERR_BUILD: return "kernel build failed";
        case CLF_ERR_IO: return "I/O error";
        case CLF_ERR_FORMAT: return "bad file format";
        case CLF_ERR_CONFIG: return "invalid configuration";
        case CLF_ERR_ARG: return "invalid argument";
        case CLF_ERR_MEMORY: return "out of memory";
        case CLF_ERR_UNSUPPORTED: return "unsupported";
        case CLF_ERR_INTERRUPTED: return "interrupted";
        case CLF_ERR_NUMERIC: return "numerical failure";
    }
    return "unknown status";
}

void clf_error_format(const clf_error *err, char *out, size_t cap)
{
    if (cap == 0)
        return;
    if (err == NULL) {
        out[0] = '\0';
        return;
    }
    if (err->where[0] != '\0' && err->code_name[0] != '\0')
        snprintf(out, cap, "%s: %s [%s]", err->where, err->msg, err->code_name);
    else if (err->where[0] != '\0')
        snprintf(out, cap, "%s: %s", err->where, err->msg);
    else if (err->code_name[0] != '\0')
        snprintf(out, cap, "%s [%s]", err->msg, err->code_name);
    else
        snprintf(out, cap, "%s", err->msg);
}
