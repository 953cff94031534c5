/*
 * fuzz_config.c - libFuzzer harness: model files (YAML) through the config
 * loader, as `clformer train MODEL.yaml` and a checkpoint's metadata read
 * them. Any input must end in CLF_OK or an error, never a crash, a leak or
 * undefined behaviour (the build adds ASan + UBSan).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    clf_model_config cfg;
    clf_error err;
    (void)clf_config_parse_string(text, "fuzz.yaml", NULL, 0, &cfg, &err);
    free(text);
    return 0;
}
