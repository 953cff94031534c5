/*
 * kernels_embedded.h - the kernel sources of cl/ compiled into the binary.
 *
 * The table is generated at build time by cmake/embed_kernels.cmake and ends
 * with an entry whose family is NULL. "common" is cl/common.cl, "contract"
 * runtime/contract.h; every other entry is a kernel family compiled as
 * preamble + contract + common + family.
 */
#ifndef CLF_KERNELS_EMBEDDED_H
#define CLF_KERNELS_EMBEDDED_H

#include <stddef.h>

typedef struct clf_embedded_source {
    const char *family;
    const char *text;
    size_t size;
} clf_embedded_source;

extern const clf_embedded_source clf_embedded_sources[];

#endif
