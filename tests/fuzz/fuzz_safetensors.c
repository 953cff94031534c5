/*
 * fuzz_safetensors.c - libFuzzer harness: a .safetensors file (checkpoints,
 * imports) opened, its metadata walked and every tensor read with its
 * checksum verified when the file carries them. The input goes through an
 * anonymous memory file, since the reader takes a path.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz", 0);
    if (fd < 0)
        return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    clf_st_reader *r = NULL;
    clf_error err;
    if (clf_st_reader_open(path, &r, &err) == CLF_OK) {
        for (size_t i = 0; i < clf_st_reader_metadata_count(r); i++) {
            const char *k, *v;
            clf_st_reader_metadata_at(r, i, &k, &v);
        }
        for (size_t i = 0; i < clf_st_reader_count(r); i++) {
            const clf_st_tensor_info *t = clf_st_reader_tensor(r, i);
            const uint64_t n = t->end - t->begin;
            if (n > (1u << 20))
                continue; /* the layout check bounds it by the input; stay small */
            void *buf = malloc(n ? n : 1);
            if (buf != NULL)
                (void)clf_st_reader_read_raw(r, t, buf, n, &err);
            free(buf);
        }
        clf_st_reader_destroy(r);
    }
    close(fd);
    return 0;
}
