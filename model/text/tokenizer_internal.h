/*
 * tokenizer_internal.h - what tokenizer.c (char, byte, the shared parts:
 * pieces, decode, JSON framing) and text/bpe.c (byte-pair encoding:
 * pre-tokenizer, training, encoding, the BPE part of the JSON form) share.
 * Not a public header: only those files (and text/bpe_train.c, the
 * BPE trainer) include it.
 *
 * Design: one struct for every kind. Pieces are one byte array with an
 * offset table (piece i is bytes[off[i] .. off[i+1])), special tokens have
 * empty pieces. The BPE kind adds its merge list and a hash map from a pair
 * of ids to the merge's rank (open addressing, linear probing, keys
 * (left << 32 | right), never all ones because ids are < 2^31).
 */
#ifndef CLF_TOKENIZER_INTERNAL_H
#define CLF_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "model/io/json.h"
#include "model/text/tokenizer.h"

/* Pair (left, right) -> int32 value; capacity a power of two, at most half
 * full. */
typedef struct tok_pair_map {
    uint64_t *keys; /* [cap], TOK_PAIR_EMPTY where free */
    int32_t *vals;  /* [cap] */
    size_t cap, n;
} tok_pair_map;

#define TOK_PAIR_EMPTY UINT64_MAX

/* The WordPiece kind's options and piece index (text/wordpiece.c). */
typedef struct tok_wordpiece {
    int lowercase, strip_accents, clean_text, chinese_chars; /* BertNormalizer */
    char prefix[16];                                         /* "##" */
    size_t prefix_len;
    int32_t max_word_chars; /* longer words are unk */
    int32_t *added;         /* ids matched verbatim in text, longest first */
    int n_added;
    int32_t *slots; /* [cap] piece -> id, -1 where free */
    size_t cap;
} tok_wordpiece;

struct clf_tokenizer {
    clf_tokenizer_type type;
    int32_t base;       /* number of text pieces: ids [0, base) for char/byte,
                           [CLF_SPECIAL_COUNT, vocab_size) for bpe */
    int32_t vocab_size; /* text pieces + specials */
    int32_t special[CLF_SPECIAL_COUNT];
    char *bytes;        /* all pieces, concatenated */
    uint32_t *off;      /* [vocab_size + 1]; char/byte keep room for every special */
    uint32_t *cps;      /* char: [base] code points, ascending */
    int32_t ascii[128]; /* char: id of each ASCII code point, -1 if absent */
    /* bpe */
    int32_t n_merges;   /* vocab_size - CLF_BPE_MERGE_FIRST */
    int32_t *merges;    /* [n_merges][2]: merge r joins (left, right) into id 262 + r */
    tok_pair_map ranks; /* (left, right) -> r */
    tok_wordpiece *wp;  /* wordpiece */
    /* bpe with a pretrained model's numbering (GPT-2's vocab.json): the
     * API's ids are the model's; ext[internal] is the model's id of each
     * internal id (-1: absent), intl[model id] the internal id (-1: a
     * model id no piece has). NULL: the ids are the internal ones. */
    int32_t *ext, *intl;
    int32_t ext_size;
};

/* The internal id of an API id (identity without a map; -1 if none). */
static inline int32_t tok_internal(const clf_tokenizer *t, int32_t id)
{
    if (t->ext == NULL)
        return id >= 0 && id < t->vocab_size ? id : -1;
    return id >= 0 && id < t->ext_size ? t->intl[id] : -1;
}

/* Pair map (text/bpe.c). */
int tok_pair_map_init(tok_pair_map *m, size_t expected);
void tok_pair_map_free(tok_pair_map *m);
int32_t tok_pair_map_get(const tok_pair_map *m, int32_t left, int32_t right); /* -1 if absent */
/* Insert or overwrite; 0 on allocation failure. */
int tok_pair_map_put(tok_pair_map *m, int32_t left, int32_t right, int32_t val);

/* FNV-1a of s[0..n) (word tables). */
uint64_t tok_hash_bytes(const unsigned char *s, size_t n);
/* A BPE tokenizer from its merges ([n_merges][2], copied): pieces, the rank
 * map. Checks what a file could get wrong (CLF_ERR_FORMAT naming
 * merges[r]): ids that are not earlier text pieces, a repeated pair, a piece
 * longer than CLF_BPE_MAX_PIECE. */
clf_status tok_bpe_build(const int32_t *merges, int32_t n_merges, clf_tokenizer **out,
                         clf_error *err);

/* BPE parts of the tokenizer API (text/bpe.c), called by tokenizer.c. */
clf_status tok_bpe_encode(const clf_tokenizer *t, const char *text, size_t len, int32_t *ids,
                          size_t cap, size_t *n, clf_error *err);
/* Write the BPE members ("pre_tokenizer", "vocab", "merges") into an open
 * object. */
void tok_bpe_write_json(const clf_tokenizer *t, clf_json_writer *w);
/* Build a BPE tokenizer from a parsed document whose common members
 * (format, version, type, vocab_size) are already checked. */
clf_status tok_bpe_from_json(const clf_json *doc, int32_t vocab_size, clf_tokenizer **out,
                             clf_error *err);

/* Give t (bpe) the model numbering ext[vocab_size] over ext_size ids
 * (copied; text/gpt2.c builds it). */
clf_status tok_set_ids(clf_tokenizer *t, const int32_t *ext, int32_t ext_size, clf_error *err);

/* A bpe tokenizer from a Hugging Face tokenizer.json's BPE "model" object
 * (its vocab and merges; text/gpt2.c). */
clf_status tok_gpt2_from_hf(const clf_json *model, const char *name, clf_tokenizer **out,
                            clf_error *err);

/* WordPiece parts of the tokenizer API (text/wordpiece.c). */
void tok_wp_free(tok_wordpiece *wp);
/* Encode into a malloc'ed array (*out, *n ids). */
clf_status tok_wp_encode(const clf_tokenizer *t, const char *text, size_t len, int32_t **out,
                         size_t *n, clf_error *err);
clf_status tok_wp_decode(const clf_tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                         char **text, size_t *len, clf_error *err);
/* Write "vocab" and "wordpiece" into an open object. */
void tok_wp_write_json(const clf_tokenizer *t, clf_json_writer *w);
/* Build from a parsed document (common members checked) and its specials. */
clf_status tok_wp_from_json(const clf_json *doc, int32_t vocab_size, const int32_t *special,
                            clf_tokenizer **out, clf_error *err);

#endif
