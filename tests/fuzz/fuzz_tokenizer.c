/*
 * fuzz_tokenizer.c - libFuzzer harness: a tokenizer file (clformer's JSON:
 * char, byte, BPE with its merges, WordPiece; or a Hugging Face
 * tokenizer.json: WordPiece or GPT-2's BPE) loaded; when it loads, text
 * encoded (a fixed sentence and the input itself), decoded back, and
 * serialised again (as GPT-2's files too, for BPE).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void exercise(const clf_tokenizer *t, const char *text, size_t len)
{
    int32_t *ids = NULL;
    size_t n = 0;
    char *back = NULL;
    clf_error err;
    if (clf_tokenizer_encode(t, text, len, &ids, &n, &err) == CLF_OK &&
        clf_tokenizer_decode(t, ids, n, &back, NULL, &err) == CLF_OK)
        free(back);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    clf_tokenizer *t = NULL;
    clf_error err;
    if (clf_tokenizer_from_any_json((const char *)data, size, "fuzz", &t, &err) != CLF_OK)
        return 0;
    static const char sentence[] = "To be, or not to be: that is the question.\n";
    exercise(t, sentence, sizeof sentence - 1);
    exercise(t, (const char *)data, size);
    char *json = NULL;
    if (clf_tokenizer_to_json(t, &json, NULL, &err) == CLF_OK)
        free(json);
    char *vocab = NULL, *merges = NULL;
    if (clf_tokenizer_to_gpt2(t, &vocab, &merges, &err) == CLF_OK) {
        free(vocab);
        free(merges);
    }
    clf_tokenizer_destroy(t);
    return 0;
}
