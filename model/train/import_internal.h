/*
 * import_internal.h - what the Hugging Face importers and exporters share
 * (import.c: BERT, GPT-2 and the helpers; import_llama.c: the Llama
 * layout): the tensors being assembled, config.json's fields, the
 * byte-level BPE of a folder, writing a folder.
 */
#ifndef CLF_IMPORT_INTERNAL_H
#define CLF_IMPORT_INTERNAL_H

#include <stdint.h>

#include "config/config.h"
#include "model/io/json.h"
#include "model/io/safetensors.h"
#include "model/text/tokenizer.h"
#include "model/train/checkpoint.h"

#define MAX_JSON ((size_t)64 << 20)

/* The checkpoint's tensors being assembled from the file's. */
typedef struct imp {
    char path[4096]; /* the safetensors file, for messages */
    char prefix[16]; /* "", "bert.", "transformer." or "model." */
    clf_st_reader *r;
    unsigned char *used; /* [tensors of r] */
    clf_checkpoint_tensor *t;
    float **bufs;
    int n, cap;
} imp;

void imp_free(imp *s);
/* A new output tensor of rows x cols (cols 0: 1-D), zeroed. */
float *imp_out_tensor(imp *s, const char *name, int64_t rows, int64_t cols, clf_error *err);
/* Read the file's tensor <prefix><name> (or <prefix><alt>) of shape rows x
 * cols (cols 0: 1-D) into dst; mark it used. */
clf_status imp_read_in(imp *s, const char *name, const char *alt, int64_t rows, int64_t cols,
                       float *dst, clf_error *err);
/* One clformer tensor straight from one file tensor. */
clf_status imp_copy1(imp *s, const char *to, const char *from, const char *alt, int64_t rows,
                     int64_t cols, clf_error *err);

clf_status imp_read_json(const char *path, clf_json **doc, clf_error *err);
/* An integer field in [lo, hi] (else CLF_ERR_FORMAT naming path and key). */
clf_status imp_get_int(const clf_json *doc, const char *path, const char *key, int lo, int hi,
                       int *out, clf_error *err);
double imp_get_num(const clf_json *doc, const char *key, double dflt); /* dflt: absent */
const char *imp_get_str(const clf_json *doc, const char *key);         /* NULL: absent */
/* The keys imp_get_num and imp_get_str read (a default when absent) must,
 * when present and not null, have their type: CLF_ERR_FORMAT naming the
 * file, the key, its byte offset and both types otherwise (a wrongly typed
 * key is a mistake to report, not an absent one to default). doc: an
 * object of path (config.json, or its rope_scaling). */
clf_status imp_check_types(const clf_json *doc, const char *path, clf_error *err);

/* The file's lm_head.weight (unprefixed), if there is one, of a model whose
 * head is tied: it must equal the embedding already assembled (s->t[0],
 * the file's `wte`); it is marked used. */
clf_status imp_tied_head(imp *s, int64_t V, int64_t C, const char *wte, clf_error *err);
/* What a decoder needs to go out to any Hugging Face layout (a byte-level
 * BPE, no embedding scale or norm, causal): why not, or NULL. */
const char *imp_not_plain_decoder(const clf_model_config *c);

/* The byte-level BPE of a folder: tokenizer.json, else vocab.json +
 * merges.txt. */
clf_status imp_bpe_tokenizer(const char *dir, clf_tokenizer **tok, clf_error *err);

clf_status imp_write_text(const char *path, const char *text, clf_error *err);
/* out_dir (created if missing): model.safetensors from w, config.json,
 * vocab.json and merges.txt. */
clf_status imp_write_folder(const char *out_dir, clf_st_writer *w, const char *cfg_json,
                            const char *vocab, const char *merges, clf_error *err);

/* Host copies a writer holds until it writes: imp_hold allocates n floats
 * kept in h (NULL when out of memory); imp_export frees them. */
typedef struct imp_held {
    float **p;
    int n, cap;
    const char *from; /* the checkpoint's names read: "" or "ema." (its moving average) */
} imp_held;
float *imp_hold(imp_held *h, size_t n);
/* The checkpoint's tensor h->from + name, read as float32. */
clf_status imp_read_param(clf_st_reader *r, const imp_held *h, const char *name, int ndim,
                          const int64_t *shape, float *x, size_t n, clf_error *err);

/* A Hugging Face layout to export to: why a config cannot be written in it
 * (NULL: it can), its config.json, its weights from the checkpoint's
 * reader into the writer. */
typedef struct imp_layout {
    const char *name; /* "GPT-2", for "the GPT-2 layout: ..." */
    const char *(*why_not)(const clf_model_config *c);
    clf_status (*config_json)(const clf_model_config *c, int64_t V, const clf_tokenizer *tok,
                              char **out, clf_error *err);
    clf_status (*weights)(const clf_model_config *c, int64_t V, clf_st_reader *r, clf_st_writer *w,
                          imp_held *h, clf_error *err);
} imp_layout;
/* The checkpoint at ckpt_path as the folder out_dir in layout L, with its
 * tokenizer as vocab.json and merges.txt. */
clf_status imp_export(const char *ckpt_path, const char *out_dir, const imp_layout *L,
                      clf_error *err);

/* The Llama layout (import_llama.c): config.json of model_type llama,
 * mistral or qwen2 as a clformer config, and the file's tensors
 * (zero_o_bias: qwen2's attention has q, k and v biases and none on o). */
clf_status imp_llama_config(const clf_json *doc, const char *path, clf_model_config *cfg,
                            clf_error *err);
clf_status imp_llama_tensors(imp *s, const clf_model_config *cfg, int zero_o_bias, clf_error *err);

#endif
