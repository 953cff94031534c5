/*
 * tokenizer.h - text <-> token ids: character-level and byte-level
 * tokenizers, with a layout that the byte-pair encoder joins later.
 *
 * Kinds (clf_tokenizer_type from config/config.h)
 *   char  One token per Unicode code point found in the text the vocabulary
 *         is built from, ids in increasing code-point order. For ASCII text
 *         this is exactly nanoGPT's char-level vocabulary
 *         (sorted(set(text)): 65 tokens for tiny Shakespeare, '\n' = 0,
 *         ' ' = 1, ...). Text must be valid UTF-8.
 *   byte  256 tokens, id = byte value; any byte string encodes, nothing is
 *         unknown.
 *   bpe   reserved for the byte-pair encoder (CLF_ERR_UNSUPPORTED here).
 *
 * Vocabulary layout, shared by every kind: ids [0, base) are text pieces,
 * each a byte string (a UTF-8 character for char, one byte for byte, a
 * merged byte sequence for bpe); special tokens (pad, bos, eos, unk, cls,
 * sep) are optional and, when added, take the next ids [base, vocab_size).
 * A special that is absent has id -1. Specials never come out of encoding
 * text, except unk (below), and decode to nothing.
 *
 * Unknown characters (char kind only): encoding a character that is not in
 * the vocabulary maps it to unk when the tokenizer has an unk token;
 * otherwise it is an error, CLF_ERR_ARG, naming the character (U+XXXX) and
 * its byte offset. Invalid UTF-8 in the text is CLF_ERR_FORMAT with the
 * byte offset.
 *
 * Serialization: a JSON object, stored in checkpoint metadata or a file:
 *   {"format":"clformer-tokenizer","version":1,"type":"char","vocab_size":65,
 *    "vocab":["\n"," ","!",...],
 *    "specials":{"pad":-1,"bos":-1,"eos":-1,"unk":-1,"cls":-1,"sep":-1}}
 * ("byte" has no "vocab"). Loading checks everything (unknown keys, the
 * version, one code point per entry in strictly increasing order, specials
 * exactly filling [base, vocab_size)) and reports CLF_ERR_FORMAT with the
 * offending field; a newer version or type is refused with a clear message.
 * BPE adds its own "vocab" (pieces) and "merges" under "type":"bpe".
 *
 *   clf_tokenizer *tok;
 *   clf_tokenizer_create(CLF_TOKENIZER_CHAR, text, len, &tok, err);
 *   int32_t *ids; size_t n;
 *   clf_tokenizer_encode(tok, "To be", 5, &ids, &n, err);  // free(ids)
 *
 * Not here: normalization (NFC etc.: text is taken as it is), lowercasing,
 * pre-tokenization rules, BPE training and merging (the BPE module).
 */
#ifndef CLF_TOKENIZER_H
#define CLF_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "runtime/status.h"

typedef enum clf_special_token {
    CLF_SPECIAL_PAD = 0,
    CLF_SPECIAL_BOS,
    CLF_SPECIAL_EOS,
    CLF_SPECIAL_UNK,
    CLF_SPECIAL_CLS,
    CLF_SPECIAL_SEP,
    CLF_SPECIAL_COUNT
} clf_special_token;

#define CLF_TOKENIZER_FORMAT "clformer-tokenizer"
#define CLF_TOKENIZER_VERSION 1

typedef struct clf_tokenizer clf_tokenizer;

/* Build a tokenizer of the given type. char: the vocabulary is every
 * distinct code point of text[0..len) (non-empty, valid UTF-8). byte: text
 * is ignored (may be NULL). bpe: CLF_ERR_UNSUPPORTED. */
clf_status clf_tokenizer_create(clf_tokenizer_type type, const char *text, size_t len,
                                clf_tokenizer **out, clf_error *err);
void clf_tokenizer_destroy(clf_tokenizer *t);

clf_tokenizer_type clf_tokenizer_type_of(const clf_tokenizer *t);
/* All ids: text pieces + special tokens. */
int32_t clf_tokenizer_vocab_size(const clf_tokenizer *t);
/* Text pieces only (ids [0, base)). */
int32_t clf_tokenizer_base_size(const clf_tokenizer *t);

/* "pad", "bos", "eos", "unk", "cls", "sep". */
const char *clf_tokenizer_special_name(clf_special_token which);
/* The id of a special token, -1 if the tokenizer has none. */
int32_t clf_tokenizer_special(const clf_tokenizer *t, clf_special_token which);
/* Give the tokenizer a special token (the next free id) and return its id;
 * if it already has one, return that id. */
clf_status clf_tokenizer_add_special(clf_tokenizer *t, clf_special_token which, int32_t *id,
                                     clf_error *err);

/* Encode text[0..len). *ids is malloc'ed (free()), *n tokens. */
clf_status clf_tokenizer_encode(const clf_tokenizer *t, const char *text, size_t len,
                                int32_t **ids, size_t *n, clf_error *err);
/* Encode into a caller buffer of cap ids; len ids always suffice (every
 * token covers at least one byte). Too small -> CLF_ERR_ARG. */
clf_status clf_tokenizer_encode_into(const clf_tokenizer *t, const char *text, size_t len,
                                     int32_t *ids, size_t cap, size_t *n, clf_error *err);
/* Decode ids into text (*text malloc'ed and NUL-terminated, *len bytes;
 * len may be NULL). Special tokens produce nothing; an id outside
 * [0, vocab_size) is CLF_ERR_ARG. Byte-level output is the raw bytes, which
 * need not be valid UTF-8. */
clf_status clf_tokenizer_decode(const clf_tokenizer *t, const int32_t *ids, size_t n,
                                char **text, size_t *len, clf_error *err);
/* The bytes of one token (for streaming output): "" for special tokens.
 * Returns 0 (and sets nothing) if id is out of range. */
int clf_tokenizer_piece(const clf_tokenizer *t, int32_t id, const char **bytes, size_t *len);

/* Serialize to / load from the JSON form described above. *json is
 * malloc'ed and NUL-terminated; len may be NULL. */
clf_status clf_tokenizer_to_json(const clf_tokenizer *t, char **json, size_t *len,
                                 clf_error *err);
clf_status clf_tokenizer_from_json(const char *json, size_t len, clf_tokenizer **out,
                                   clf_error *err);

#endif
