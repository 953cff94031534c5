/*
 * tokenizer.h - text <-> token ids: character-level, byte-level,
 * byte-pair-encoding (BPE) and WordPiece subword tokenizers.
 *
 * Kinds (clf_tokenizer_type from config/config.h)
 *   char  One token per Unicode code point found in the text the vocabulary
 *         is built from, ids in increasing code-point order. For ASCII text
 *         this is exactly nanoGPT's char-level vocabulary
 *         (sorted(set(text)): 65 tokens for tiny Shakespeare, '\n' = 0,
 *         ' ' = 1, ...). Text must be valid UTF-8.
 *   byte  256 tokens, id = byte value; any byte string encodes, nothing is
 *         unknown.
 *   bpe   Byte-level byte-pair encoding as GPT-2's, trained from data
 *         (clf_bpe_trainer below): the 256 bytes plus merged byte sequences,
 *         so any byte string encodes (nothing is unknown, no unk is ever
 *         produced) and decode(encode(s)) == s exactly, umlauts and all.
 *         A GPT-2 vocabulary (clf_tokenizer_from_gpt2) is this kind with the
 *         pretrained model's numbering: the API's ids are the model's.
 *   wordpiece  BERT's WordPiece from a pretrained model's tokenizer.json
 *         (clf_tokenizer_from_hf; text/wordpiece.c describes the rules):
 *         normalised (lowercase, accents stripped, CJK split, control
 *         characters dropped, as the file says), split at whitespace and
 *         punctuation, then greedy longest-match subwords ("##" pieces);
 *         unknown words are [UNK]; the specials are entries of the
 *         vocabulary ([PAD], [UNK], [CLS], [SEP]). Token for token as
 *         Hugging Face tokenizers (tests/test_import.c).
 *
 * Vocabulary layout
 *   char, byte: ids [0, base) are text pieces, each a byte string (a UTF-8
 *   character for char, one byte for byte); special tokens (pad, bos, eos,
 *   unk, cls, sep) are optional and, when added, take the next ids
 *   [base, vocab_size). A special that is absent has id -1.
 *   bpe: the six specials always exist, at fixed ids first: pad 0, bos 1,
 *   eos 2, unk 3, cls 4, sep 5 (so padding is id 0); byte b is id 6 + b
 *   (CLF_BPE_BYTE_FIRST + b); merge r makes id 262 + r (CLF_BPE_MERGE_FIRST
 *   + r). vocab_size = 262 + merges, specials included.
 * Specials never come out of encoding text (except unk for the char kind,
 * below): a caller adds bos/eos/cls/sep ids itself. Text that spells
 * "<pad>" is encoded as ordinary text. Decode turns specials into nothing,
 * or into "<pad>", "<bos>", ... with CLF_DECODE_SPECIALS.
 *
 * Unknown characters (char kind only): encoding a character that is not in
 * the vocabulary maps it to unk when the tokenizer has an unk token;
 * otherwise it is an error, CLF_ERR_ARG, naming the character (U+XXXX) and
 * its byte offset. Invalid UTF-8 in the text is CLF_ERR_FORMAT with the
 * byte offset (char kind; byte and bpe take any bytes).
 *
 * BPE
 *   Pre-tokenization (the same in training and encoding; merges never cross
 *   a pre-token): GPT-2's pattern
 *     's|'t|'re|'ve|'m|'ll|'d| ?L+| ?N+| ?[^\sLN]+|\s+(?!\S)|\s+
 *   i.e. a word takes the one space before it (" cat"), runs of letters,
 *   digits and other symbols are separate pieces, and a run of whitespace
 *   leaves its last character to the next word. Unicode classes are an
 *   approximation without tables: ASCII letters and every code point from
 *   U+0080 up are letters (umlauts, accents, Cyrillic, CJK), except the
 *   whitespace (U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029,
 *   U+202F, U+205F, U+3000), the Latin-1 and general punctuation and
 *   symbol blocks, arrows/math/box/shapes/dingbats (U+2190-U+2BFF), CJK
 *   punctuation, fullwidth ASCII punctuation and emoji, which are "other";
 *   digits are 0-9 and the Latin-1 superscripts and fractions. Bytes that
 *   are not valid UTF-8 are "other", one byte each. A pre-token is at most
 *   CLF_BPE_MAX_PIECE bytes: a longer run is cut at the last character
 *   boundary that fits (so encoding is linear in the text, and pieces are
 *   bounded).
 *   Training: count the pre-tokens, then repeatedly merge the most frequent
 *   adjacent pair of ids (counting overlapping occurrences, as Sennrich et
 *   al. and HF tokenizers), ties broken by the smaller left id, then the
 *   smaller right id, until vocab_size is reached or no pair occurs
 *   min_frequency times. Incremental: a pair -> words index and a lazy
 *   max-heap, so a merge only touches the words that contain its pair.
 *   Encoding: each pre-token is merged by rank (the lowest-ranked adjacent
 *   pair first, leftmost first among equals), exactly as GPT-2's bpe().
 *   One encode call caches the ids of the distinct words of its text.
 *
 * Serialization: a JSON object, stored in checkpoint metadata or a file:
 *   {"format":"clformer-tokenizer","version":1,"type":"char","vocab_size":65,
 *    "vocab":["\n"," ","!",...],
 *    "specials":{"pad":-1,"bos":-1,"eos":-1,"unk":-1,"cls":-1,"sep":-1}}
 * ("byte" has no "vocab"). BPE:
 *   {"format":"clformer-tokenizer","version":1,"type":"bpe","vocab_size":8000,
 *    "pre_tokenizer":"gpt2","vocab":[null,null,null,null,null,null,"\u0000",
 *    ...,[195],...," the",...],"merges":[[38,122],[107,121],...],
 *    "specials":{"pad":0,"bos":1,"eos":2,"unk":3,"cls":4,"sep":5}}
 * where vocab[id] is the piece of every id (null for the specials): a
 * string when the bytes are valid UTF-8, else an array of byte values
 * (pieces may split a character); merges[r] = [left, right] ids. The
 * merges define the vocabulary; "vocab" is there to be read by people and
 * must agree byte for byte. Loading checks everything (unknown keys, the
 * version, one code point per char entry in strictly increasing order,
 * specials exactly filling [base, vocab_size) or at 0..5 for bpe, merges
 * referring only to earlier ids, no duplicate merge, pieces of at most
 * CLF_BPE_MAX_PIECE bytes, every vocab entry in its canonical form) and
 * reports CLF_ERR_FORMAT with the offending field; a newer version or
 * unknown type is refused with a clear message.
 *
 *   clf_tokenizer *tok;
 *   clf_tokenizer_create(CLF_TOKENIZER_CHAR, text, len, &tok, err);
 *   clf_bpe_options o; clf_bpe_options_init(&o); o.vocab_size = 8000;
 *   clf_tokenizer_train_bpe(text, len, &o, &tok, err);          // or a trainer
 *   int32_t *ids; size_t n;
 *   clf_tokenizer_encode(tok, "To be", 5, &ids, &n, err);  // free(ids)
 *
 * Encoding and decoding do not modify the tokenizer: one tokenizer can serve
 * several threads.
 *
 * Not here: normalization for char, byte and bpe (text is taken as it
 * is), recognizing special tokens written in the text (except WordPiece's
 * added tokens), exact Unicode categories in the BPE pre-tokenizer (its
 * approximation above; WordPiece has the tables of text/unicode.h),
 * sentencepiece-style unigram models, dropout in BPE.
 */
#ifndef CLF_TOKENIZER_H
#define CLF_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "runtime/status.h"

CLF_API_BEGIN

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
 * is ignored (may be NULL). bpe: CLF_ERR_UNSUPPORTED (it needs a vocabulary
 * size: use clf_tokenizer_train_bpe or a clf_bpe_trainer). */
clf_status clf_tokenizer_create(clf_tokenizer_type type, const char *text, size_t len,
                                clf_tokenizer **out, clf_error *err);
void clf_tokenizer_destroy(clf_tokenizer *t);

clf_tokenizer_type clf_tokenizer_type_of(const clf_tokenizer *t);
/* All ids: text pieces + special tokens. */
int32_t clf_tokenizer_vocab_size(const clf_tokenizer *t);
/* Text pieces only: ids [0, base) for char and byte, [6, vocab_size) for
 * bpe. */
int32_t clf_tokenizer_base_size(const clf_tokenizer *t);

/* "pad", "bos", "eos", "unk", "cls", "sep". */
const char *clf_tokenizer_special_name(clf_special_token which);
/* The id of a special token, -1 if the tokenizer has none. */
int32_t clf_tokenizer_special(const clf_tokenizer *t, clf_special_token which);
/* Give the tokenizer a special token (the next free id) and return its id;
 * if it already has one, return that id (always, for bpe). */
clf_status clf_tokenizer_add_special(clf_tokenizer *t, clf_special_token which, int32_t *id,
                                     clf_error *err);
/* Which special token id is (a clf_special_token), -1 for a text piece or an
 * id out of range. */
int clf_tokenizer_special_of(const clf_tokenizer *t, int32_t id);

/* Encode text[0..len). *ids is malloc'ed (free()), *n tokens. */
clf_status clf_tokenizer_encode(const clf_tokenizer *t, const char *text, size_t len, int32_t **ids,
                                size_t *n, clf_error *err);
/* Encode into a caller buffer of cap ids; len ids always suffice (every
 * token covers at least one byte). Too small -> CLF_ERR_ARG. */
clf_status clf_tokenizer_encode_into(const clf_tokenizer *t, const char *text, size_t len,
                                     int32_t *ids, size_t cap, size_t *n, clf_error *err);
/* Decode ids into text (*text malloc'ed and NUL-terminated, *len bytes;
 * len may be NULL). Special tokens produce nothing; an id outside
 * [0, vocab_size) is CLF_ERR_ARG. Byte-level output is the raw bytes, which
 * need not be valid UTF-8. */
clf_status clf_tokenizer_decode(const clf_tokenizer *t, const int32_t *ids, size_t n, char **text,
                                size_t *len, clf_error *err);
/* Decode with flags: CLF_DECODE_SPECIALS writes each special token as
 * "<pad>", "<bos>", "<eos>", "<unk>", "<cls>", "<sep>". */
#define CLF_DECODE_SPECIALS 1u
clf_status clf_tokenizer_decode_ex(const clf_tokenizer *t, const int32_t *ids, size_t n,
                                   unsigned flags, char **text, size_t *len, clf_error *err);
/* The bytes of one token (for streaming output): "" for special tokens.
 * Returns 0 (and sets nothing) if id is out of range. */
int clf_tokenizer_piece(const clf_tokenizer *t, int32_t id, const char **bytes, size_t *len);

/* Serialize to / load from the JSON form described above. *json is
 * malloc'ed and NUL-terminated; len may be NULL. */
clf_status clf_tokenizer_to_json(const clf_tokenizer *t, char **json, size_t *len, clf_error *err);
clf_status clf_tokenizer_from_json(const char *json, size_t len, clf_tokenizer **out,
                                   clf_error *err);

/* A WordPiece tokenizer from a Hugging Face tokenizer.json (name: the file,
 * for messages): a WordPiece model with a BertNormalizer, the
 * BertPreTokenizer and a [CLS] $A [SEP] post-processor; its [UNK], [PAD],
 * [CLS] and [SEP] become the unk, pad, cls and sep specials (ids of the
 * pretrained vocabulary; bos and eos do not exist). Anything else is
 * CLF_ERR_FORMAT naming the part. */
clf_status clf_tokenizer_from_hf(const char *json, size_t len, const char *name,
                                 clf_tokenizer **out, clf_error *err);
/* GPT-2's byte-level BPE from its vocab.json and merges.txt (name: for
 * messages): a bpe tokenizer whose ids are the model's (vocab.json's);
 * <|endoftext|> is eos and bos, pad/unk/cls/sep do not exist unless the
 * vocabulary names them <|pad|>, <|unk|>, <|cls|>, <|sep|> (as
 * clf_tokenizer_to_gpt2 writes them). A merge whose sides are not earlier
 * pieces, a character that is not one of GPT-2's 256 byte characters, a
 * piece with no vocabulary entry: CLF_ERR_FORMAT naming it, under name
 * (vocab.json's) or merges_name (merges.txt's; NULL: name) as it is the
 * vocabulary's fault or the merges'. */
clf_status clf_tokenizer_from_gpt2(const char *vocab_json, size_t vlen, const char *merges_txt,
                                   size_t mlen, const char *name, const char *merges_name,
                                   clf_tokenizer **out, clf_error *err);
/* A bpe tokenizer as GPT-2's vocab.json and merges.txt (both malloc'ed,
 * NUL-terminated): the pieces in GPT-2's byte characters with their ids,
 * the specials as <|pad|>, <|bos|>, <|endoftext|> (eos), <|unk|>, <|cls|>,
 * <|sep|>. Another kind is CLF_ERR_UNSUPPORTED. */
clf_status clf_tokenizer_to_gpt2(const clf_tokenizer *t, char **vocab_json, char **merges_txt,
                                 clf_error *err);
/* Either form: clformer's ("format": "clformer-tokenizer") or a Hugging
 * Face tokenizer.json (a "model" object). */
clf_status clf_tokenizer_from_any_json(const char *json, size_t len, const char *name,
                                       clf_tokenizer **out, clf_error *err);

/* ---- BPE ------------------------------------------------------------------ */

#define CLF_BPE_BYTE_FIRST CLF_SPECIAL_COUNT          /* id of byte 0x00 */
#define CLF_BPE_MERGE_FIRST (CLF_SPECIAL_COUNT + 256) /* id made by merge 0 (262) */
#define CLF_BPE_MAX_VOCAB (1 << 22)                   /* largest vocab_size accepted */
#define CLF_BPE_MAX_PIECE 256                         /* longest pre-token / piece, bytes */
#define CLF_BPE_PRE_TOKENIZER "gpt2"                  /* the rule above, as named in JSON */

typedef struct clf_bpe_options {
    int32_t vocab_size;    /* wanted, specials and bytes included: [262, CLF_BPE_MAX_VOCAB];
                              default 8000 */
    int64_t min_frequency; /* merge only pairs seen at least this often (>= 1); default 2 */
} clf_bpe_options;

void clf_bpe_options_init(clf_bpe_options *o);

/* What a trainer saw and did (for reports). */
typedef struct clf_bpe_stats {
    uint64_t bytes;         /* text added */
    uint64_t words;         /* pre-tokens in it */
    uint64_t unique_words;  /* distinct pre-tokens */
    int32_t merges;         /* merges learned (after finish) */
    int32_t vocab_size;     /* CLF_BPE_MERGE_FIRST + merges */
    int64_t last_frequency; /* count of the last merged pair (0 if none) */
    uint64_t tokens;        /* the added text's length in tokens once trained */
} clf_bpe_stats;

typedef struct clf_bpe_trainer clf_bpe_trainer;

/* A trainer collects pre-token counts from any number of texts (each text
 * is pre-tokenized on its own: no word spans two calls), then learns the
 * merges. Training is deterministic: the same texts (in any order and
 * split into any calls at pre-token boundaries) give the same tokenizer. */
clf_status clf_bpe_trainer_create(const clf_bpe_options *o, clf_bpe_trainer **out, clf_error *err);
void clf_bpe_trainer_destroy(clf_bpe_trainer *tr);
clf_status clf_bpe_trainer_add(clf_bpe_trainer *tr, const char *text, size_t len, clf_error *err);
/* Add a file, plain or gzip-compressed (clf_file_read_text). */
clf_status clf_bpe_trainer_add_file(clf_bpe_trainer *tr, const char *path, clf_error *err);
/* Learn the merges and return the tokenizer. The trainer can be destroyed
 * afterwards (or finished again: same result). Fewer merges than asked
 * when the text runs out of pairs seen min_frequency times. */
clf_status clf_bpe_trainer_finish(clf_bpe_trainer *tr, clf_tokenizer **out, clf_error *err);
void clf_bpe_trainer_stats(const clf_bpe_trainer *tr, clf_bpe_stats *stats);

/* Train on one text: create, add, finish. o may be NULL (defaults). */
clf_status clf_tokenizer_train_bpe(const char *text, size_t len, const clf_bpe_options *o,
                                   clf_tokenizer **out, clf_error *err);

/* Merges of a bpe tokenizer (0 for other kinds) and merge r's pair:
 * returns 1 and sets *left, *right (ids), or 0 if r is out of range. */
int32_t clf_tokenizer_bpe_merge_count(const clf_tokenizer *t);
int clf_tokenizer_bpe_merge(const clf_tokenizer *t, int32_t r, int32_t *left, int32_t *right);

/* The BPE pre-tokenizer: the end of the pre-token that starts at pos
 * (pos < len); always > pos. */
size_t clf_bpe_pretoken_end(const char *text, size_t len, size_t pos);

/* The largest text file (decompressed) the BPE trainer reads (fileio.h's
 * clf_file_read_text). */
#define CLF_BPE_MAX_TEXT ((size_t)1 << 30)

CLF_API_END

#endif
