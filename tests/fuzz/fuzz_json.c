/*
 * fuzz_json.c - libFuzzer harness: the JSON parser that reads safetensors
 * headers and tokenizer files, with its default limits.
 */
#include <stdint.h>
#include <stdlib.h>

#include "model/io/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    clf_json *doc = NULL;
    clf_error err;
    if (clf_json_parse((const char *)data, size, NULL, &doc, &err) == CLF_OK)
        clf_json_destroy(doc);
    return 0;
}
