/*
 * fuzz_text.c - libFuzzer harness: training text as the data readers take
 * it: a char tokenizer built from the bytes (valid UTF-8 or refused), the
 * text encoded and decoded back (it must round-trip), and, for short
 * inputs (up to 96 bytes), a small BPE trained on it and used.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    clf_tokenizer *t = NULL;
    clf_error err;
    if (clf_tokenizer_create(CLF_TOKENIZER_CHAR, text, size, &t, &err) == CLF_OK) {
        int32_t *ids = NULL;
        size_t n = 0;
        char *back = NULL;
        size_t blen = 0;
        if (clf_tokenizer_encode(t, text, size, &ids, &n, &err) == CLF_OK &&
            clf_tokenizer_decode(t, ids, n, &back, &blen, &err) == CLF_OK) {
            if (blen != size || memcmp(back, text, size) != 0)
                abort(); /* a char tokenizer must round-trip its own text */
            free(back);
        }
        free(ids);
        clf_tokenizer_destroy(t);
    }
    if (size > 0 && size <= 96) { /* BPE training costs per byte: keep it short */
        clf_bpe_options o;
        clf_bpe_options_init(&o);
        o.vocab_size = 262 + 16;
        if (clf_tokenizer_train_bpe(text, size, &o, &t, &err) == CLF_OK) {
            int32_t *ids = NULL;
            size_t n = 0;
            if (clf_tokenizer_encode(t, text, size, &ids, &n, &err) == CLF_OK)
                free(ids);
            clf_tokenizer_destroy(t);
        }
    }
    return 0;
}
