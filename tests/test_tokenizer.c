/*
 * test_tokenizer.c - char and byte tokenizers (model/text/tokenizer.h).
 *
 * Checks:
 * - tiny Shakespeare (data/tinyshakespeare.txt): 65 characters, nanoGPT's
 *   exact vocabulary string and its printed example encode("hii there") =
 *   [46, 47, 47, 1, 58, 46, 43, 56, 43]; the whole file round-trips;
 * - Unicode: German umlauts, accents, CJK, an emoji and a NUL character
 *   build a vocabulary sorted by code point (checked against a naive
 *   O(n^2) reference over the code points), encode to one id per code
 *   point and decode to the identical bytes;
 * - unknown characters: an error naming U+XXXX and the byte offset, or the
 *   unk id once the tokenizer has one; invalid UTF-8 refused with its offset;
 * - byte tokenizer: 256 ids, UTF-8 text becomes its bytes, random binary
 *   round-trips;
 * - JSON: exact serialized form of a small vocabulary; round trips (char
 *   with multi-byte and control characters, byte, with special tokens)
 *   give identical JSON and identical encodings; a table of malformed
 *   tokenizer files refused with CLF_ERR_FORMAT;
 * - decode refuses ids outside the vocabulary; pieces concatenate to decode.
 * No device needed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/io/fileio.h"
#include "model/io/json.h"
#include "model/text/tokenizer.h"
#include "tests/test_util.h"

static clf_tokenizer *make(clf_tokenizer_type type, const char *text, size_t len)
{
    clf_tokenizer *t = NULL;
    clf_error err;
    tu_ok(clf_tokenizer_create(type, text, len, &t, &err), &err, "creating a tokenizer");
    return t;
}

/* encode then decode; 1 if the text comes back byte-identical. */
static int round_trips(const clf_tokenizer *t, const char *text, size_t len, size_t *ntok)
{
    int32_t *ids = NULL;
    size_t n = 0, back_len = 0;
    char *back = NULL;
    clf_error err;
    int ok = clf_tokenizer_encode(t, text, len, &ids, &n, &err) == CLF_OK &&
             clf_tokenizer_decode(t, ids, n, &back, &back_len, &err) == CLF_OK && back_len == len &&
             memcmp(back, text, len) == 0;
    if (ntok != NULL)
        *ntok = n;
    free(ids);
    free(back);
    return ok;
}

static void test_shakespeare(void)
{
    printf("tiny Shakespeare\n");
    const char *src = getenv("CLF_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/data/tinyshakespeare.txt", src ? src : ".");
    char *text = NULL;
    size_t len = 0;
    clf_error err;
    tu_ok(clf_file_read_all(path, 1 << 24, &text, &len, &err), &err, "reading the corpus");
    clf_tokenizer *t = make(CLF_TOKENIZER_CHAR, text, len);
    TU_CHECK(clf_tokenizer_vocab_size(t) == 65 && clf_tokenizer_base_size(t) == 65,
             "65 characters (nanoGPT: vocab size 65), got %d", clf_tokenizer_vocab_size(t));
    const char *chars = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    int same = 1;
    for (int i = 0; i < 65; i++) {
        const char *b;
        size_t n;
        same &= clf_tokenizer_piece(t, i, &b, &n) && n == 1 && b[0] == chars[i];
    }
    TU_CHECK(same, "vocabulary is nanoGPT's sorted(set(text)) in order");
    int32_t *ids = NULL;
    size_t n = 0;
    tu_ok(clf_tokenizer_encode(t, "hii there", 9, &ids, &n, &err), &err, "encode");
    static const int32_t want[9] = {46, 47, 47, 1, 58, 46, 43, 56, 43};
    TU_CHECK(n == 9 && memcmp(ids, want, sizeof want) == 0,
             "encode(\"hii there\") = [46, 47, 47, 1, 58, 46, 43, 56, 43] as nanoGPT prints");
    free(ids);
    size_t ntok = 0;
    int rt = round_trips(t, text, len, &ntok);
    TU_CHECK(rt && ntok == len,
             "whole corpus (%zu characters) encodes to %zu ids and decodes identically", len, ntok);
    TU_CHECK(clf_tokenizer_type_of(t) == CLF_TOKENIZER_CHAR, "type char");
    for (int s = 0; s < CLF_SPECIAL_COUNT; s++)
        same &= clf_tokenizer_special(t, (clf_special_token)s) == -1;
    TU_CHECK(same, "no special tokens by default (all -1)");
    clf_tokenizer_destroy(t);
    free(text);
}

/* Distinct code points of valid UTF-8, sorted, by brute force. */
static size_t naive_vocab(const char *text, size_t len, uint32_t *out)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = clf_utf8_decode((const unsigned char *)text + i, len - i, &cp);
        i += (size_t)k;
        int have = 0;
        for (size_t j = 0; j < n; j++)
            have |= out[j] == cp;
        if (!have) {
            size_t j = n++;
            while (j > 0 && out[j - 1] > cp) {
                out[j] = out[j - 1];
                j--;
            }
            out[j] = cp;
        }
    }
    return n;
}

static const char unicode_text[] = "Gr\xc3\xbc\xc3\x9f"
                                   "e aus K\xc3\xb6ln! \xc3\x84pfel, \xc3\x96l, \xc3\x9c"
                                   "bel.\n"
                                   "na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xe2\x82\xac"
                                   "5 \xe6\x97\xa5\xe6\x9c\xac "
                                   "\xf0\x9f\x98\x80\tZ\0end";

static void test_unicode(void)
{
    printf("Unicode\n");
    size_t len = sizeof unicode_text - 1; /* includes the NUL character */
    clf_tokenizer *t = make(CLF_TOKENIZER_CHAR, unicode_text, len);
    uint32_t ref[128];
    size_t nref = naive_vocab(unicode_text, len, ref);
    int sorted = clf_tokenizer_vocab_size(t) == (int32_t)nref;
    for (int32_t i = 0; sorted && i < clf_tokenizer_vocab_size(t); i++) {
        const char *b;
        size_t n;
        uint32_t cp;
        sorted = clf_tokenizer_piece(t, i, &b, &n) &&
                 clf_utf8_decode((const unsigned char *)b, n, &cp) == (int)n && cp == ref[i];
    }
    TU_CHECK(sorted, "vocabulary = the %zu distinct code points in code-point order", nref);
    size_t ntok = 0;
    size_t ncp = 0;
    for (size_t i = 0; i < len; i++)
        ncp += ((unsigned char)unicode_text[i] & 0xC0) != 0x80;
    int rt = round_trips(t, unicode_text, len, &ntok);
    TU_CHECK(rt && ntok == ncp,
             "umlauts, euro sign, CJK, emoji, tab and NUL round-trip, one id per code point "
             "(%zu)",
             ntok);

    /* the umlauts of a word map to single ids */
    int32_t *ids = NULL;
    size_t n = 0;
    clf_error err;
    tu_ok(clf_tokenizer_encode(t, "\xc3\xbc\xc3\x9f", 4, &ids, &n, &err), &err, "encode");
    const char *b0, *b1;
    size_t l0, l1;
    TU_CHECK(n == 2 && clf_tokenizer_piece(t, ids[0], &b0, &l0) && l0 == 2 &&
                 memcmp(b0, "\xc3\xbc", 2) == 0 && clf_tokenizer_piece(t, ids[1], &b1, &l1) &&
                 memcmp(b1, "\xc3\x9f", 2) == 0,
             "\"\xc3\xbc\xc3\x9f\" -> 2 ids whose pieces are the 2-byte characters");
    free(ids);

    /* unknown characters */
    clf_status st = clf_tokenizer_encode(t, "ab\xc3\xa0", 4, &ids, &n, &err);
    TU_CHECK(st == CLF_ERR_ARG && ids == NULL && strstr(err.msg, "U+00E0") &&
                 strstr(err.msg, "at byte 2"),
             "unknown character without unk: CLF_ERR_ARG: %s", err.msg);
    int32_t base = clf_tokenizer_vocab_size(t), unk = -1, again = -1;
    tu_ok(clf_tokenizer_add_special(t, CLF_SPECIAL_UNK, &unk, &err), &err, "add unk");
    tu_ok(clf_tokenizer_add_special(t, CLF_SPECIAL_UNK, &again, &err), &err, "add unk again");
    TU_CHECK(unk == base && again == unk && clf_tokenizer_vocab_size(t) == base + 1 &&
                 clf_tokenizer_base_size(t) == base,
             "unk added as id %d (after the %d characters); adding again returns it", unk, base);
    st = clf_tokenizer_encode(t, "ab\xc3\xa0Z", 5, &ids, &n, &err);
    TU_CHECK(st == CLF_OK && n == 4 && ids[2] == unk, "with unk: the unknown character -> unk");
    char *text = NULL;
    size_t tl = 0;
    st = clf_tokenizer_decode(t, ids, n, &text, &tl, &err);
    TU_CHECK(st == CLF_OK && tl == 3 && strcmp(text, "abZ") == 0,
             "special tokens decode to nothing");
    free(text);
    free(ids);

    /* invalid UTF-8 */
    st = clf_tokenizer_encode(t, "abc\xff", 4, &ids, &n, &err);
    TU_CHECK(st == CLF_ERR_FORMAT && strstr(err.msg, "byte 3"), "invalid UTF-8 in encode: %s",
             err.msg);
    clf_tokenizer *bad = NULL;
    st = clf_tokenizer_create(CLF_TOKENIZER_CHAR, "ok\xc3", 3, &bad, &err);
    TU_CHECK(st == CLF_ERR_FORMAT && bad == NULL && strstr(err.msg, "byte 2"),
             "invalid UTF-8 when building: %s", err.msg);
    st = clf_tokenizer_create(CLF_TOKENIZER_CHAR, "", 0, &bad, &err);
    TU_CHECK(st == CLF_ERR_ARG && bad == NULL, "empty text refused: %s", err.msg);
    st = clf_tokenizer_create(CLF_TOKENIZER_BPE, "x", 1, &bad, &err);
    TU_CHECK(st == CLF_ERR_UNSUPPORTED && bad == NULL, "bpe not built here: %s", err.msg);

    /* decode range checks */
    int32_t out_of_range[2] = {0, clf_tokenizer_vocab_size(t)};
    st = clf_tokenizer_decode(t, out_of_range, 2, &text, NULL, &err);
    TU_CHECK(st == CLF_ERR_ARG && text == NULL && strstr(err.msg, "position 1"),
             "id == vocab size refused: %s", err.msg);
    int32_t neg = -1;
    st = clf_tokenizer_decode(t, &neg, 1, &text, NULL, &err);
    TU_CHECK(st == CLF_ERR_ARG, "negative id refused");
    clf_tokenizer_destroy(t);
}

static void test_bytes(void)
{
    printf("byte tokenizer\n");
    clf_tokenizer *t = make(CLF_TOKENIZER_BYTE, NULL, 0);
    clf_error err;
    int32_t *ids = NULL;
    size_t n = 0;
    TU_CHECK(clf_tokenizer_vocab_size(t) == 256, "256 ids");
    tu_ok(clf_tokenizer_encode(t, "K\xc3\xb6ln", 5, &ids, &n, &err), &err, "encode");
    TU_CHECK(n == 5 && ids[0] == 'K' && ids[1] == 0xC3 && ids[2] == 0xB6 && ids[4] == 'n',
             "UTF-8 text -> its bytes (\xc3\xb6 = 0xC3 0xB6)");
    free(ids);
    tu_rng r = tu_rng_new(31);
    char bin[4096];
    for (size_t i = 0; i < sizeof bin; i++)
        bin[i] = (char)(tu_u32(&r) & 0xFF);
    TU_CHECK(round_trips(t, bin, sizeof bin, NULL) &&
                 round_trips(t, unicode_text, sizeof unicode_text - 1, NULL),
             "random binary and UTF-8 text round-trip");
    /* pieces concatenate to the decoded text */
    int32_t all[256];
    for (int i = 0; i < 256; i++)
        all[i] = 255 - i;
    char *text = NULL;
    size_t tl = 0;
    tu_ok(clf_tokenizer_decode(t, all, 256, &text, &tl, &err), &err, "decode");
    int same = tl == 256;
    for (int i = 0; same && i < 256; i++) {
        const char *b;
        size_t l;
        same = clf_tokenizer_piece(t, all[i], &b, &l) && l == 1 && text[i] == b[0] &&
               (unsigned char)b[0] == 255 - i;
    }
    TU_CHECK(same, "pieces concatenate to decode, id = byte value");
    const char *b;
    size_t l;
    TU_CHECK(!clf_tokenizer_piece(t, 256, &b, &l) && !clf_tokenizer_piece(t, -1, &b, &l),
             "piece refuses out-of-range ids");
    free(text);
    clf_tokenizer_destroy(t);
}

static char *to_json(const clf_tokenizer *t)
{
    char *j = NULL;
    clf_error err;
    tu_ok(clf_tokenizer_to_json(t, &j, NULL, &err), &err, "to_json");
    return j;
}

static void test_json_form(void)
{
    printf("JSON form\n");
    clf_error err;
    clf_tokenizer *t = make(CLF_TOKENIZER_CHAR, "ba\nb", 4);
    char *j = to_json(t);
    const char *want = "{\"format\":\"clformer-tokenizer\",\"version\":1,\"type\":\"char\","
                       "\"vocab_size\":3,\"vocab\":[\"\\n\",\"a\",\"b\"],\"specials\":{"
                       "\"pad\":-1,\"bos\":-1,\"eos\":-1,\"unk\":-1,\"cls\":-1,\"sep\":-1}}";
    TU_CHECK(strcmp(j, want) == 0, "exact JSON of a 3-character tokenizer:\n       %s", j);
    free(j);
    clf_tokenizer_destroy(t);

    /* char with multi-byte characters, control characters and specials */
    size_t len = sizeof unicode_text - 1;
    t = make(CLF_TOKENIZER_CHAR, unicode_text, len);
    int32_t pad, eos;
    tu_ok(clf_tokenizer_add_special(t, CLF_SPECIAL_PAD, &pad, &err), &err, "pad");
    tu_ok(clf_tokenizer_add_special(t, CLF_SPECIAL_EOS, &eos, &err), &err, "eos");
    j = to_json(t);
    clf_tokenizer *u = NULL;
    clf_status st = clf_tokenizer_from_json(j, strlen(j), &u, &err);
    TU_CHECK(st == CLF_OK, "char tokenizer with specials reloads: %s", st ? err.msg : "");
    if (st == CLF_OK) {
        char *j2 = to_json(u);
        int32_t *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        tu_ok(clf_tokenizer_encode(t, unicode_text, len, &a, &na, &err), &err, "encode");
        tu_ok(clf_tokenizer_encode(u, unicode_text, len, &b, &nb, &err), &err, "encode");
        TU_CHECK(strcmp(j, j2) == 0 && na == nb && memcmp(a, b, na * sizeof *a) == 0 &&
                     clf_tokenizer_special(u, CLF_SPECIAL_PAD) == pad &&
                     clf_tokenizer_special(u, CLF_SPECIAL_EOS) == eos &&
                     clf_tokenizer_special(u, CLF_SPECIAL_BOS) == -1 &&
                     clf_tokenizer_vocab_size(u) == clf_tokenizer_vocab_size(t),
                 "same JSON, same ids, same specials (pad %d, eos %d) after reload", pad, eos);
        TU_CHECK(round_trips(u, unicode_text, len, NULL), "reloaded tokenizer round-trips text");
        free(a);
        free(b);
        free(j2);
    }
    clf_tokenizer_destroy(u);
    free(j);
    clf_tokenizer_destroy(t);

    t = make(CLF_TOKENIZER_BYTE, NULL, 0);
    j = to_json(t);
    st = clf_tokenizer_from_json(j, strlen(j), &u, &err);
    TU_CHECK(st == CLF_OK && clf_tokenizer_type_of(u) == CLF_TOKENIZER_BYTE &&
                 clf_tokenizer_vocab_size(u) == 256,
             "byte tokenizer reloads: %s", j);
    clf_tokenizer_destroy(u);
    free(j);
    clf_tokenizer_destroy(t);

    static const struct {
        const char *json;
        clf_status st;
        const char *want;
    } bad[] = {
        {"{\"format\":\"other\",\"version\":1,\"type\":\"byte\",\"vocab_size\":256}",
         CLF_ERR_FORMAT, "not a clformer tokenizer"},
        {"{\"format\":\"clformer-tokenizer\",\"version\":2,\"type\":\"byte\",\"vocab_size\":256}",
         CLF_ERR_FORMAT, "version 2 was written by a newer clformer"},
        {"{\"format\":\"clformer-tokenizer\",\"version\":1,\"type\":\"byte\",\"vocab_size\":256,"
         "\"extra\":1}",
         CLF_ERR_FORMAT, "unknown key \"extra\""},
        {"{\"format\":\"clformer-tokenizer\",\"version\":1,\"type\":\"byte\",\"vocab_size\":257}",
         CLF_ERR_FORMAT, "vocab_size is 257 but the tokenizer has 256 text tokens"},
        {"{\"format\":\"clformer-tokenizer\",\"version\":1,\"type\":\"char\",\"vocab_size\":2,"
         "\"vocab\":[\"b\",\"a\"]}",
         CLF_ERR_FORMAT, "vocab[1] (U+0061) is not after vocab[0]"},
        {"{\"format\":\"clformer-tokenizer\",\"version\":1,\"type\":\"char\",\"vocab_size\":2,"
         "\"vocab\":[\"a\",\"a\"]}",
         CLF_ERR_FORMAT, "increasing code-point order"},
        {"{\"format\":\"clformer-tokenizer\",\"version\":1,\"type\":\"char\",\"vocab_size\":1,"
         "\"vocab\":[\"ab\"]}",
         CLF_ERR_FORMAT, "vocab[0] must be a string of exactly one"},
        {"{\"format\":\"clformer-tokenizer\",\"version\":1,\"type\":\"char\",\"vocab_size\":1,"
         "\"vocab\":[\"\"]}",
         CLF_ERR_FORMAT, "exactly one character"},
        {"{\"format\":\"clformer-tokenizer\",\"version\":1,\"type\":\"char\",\"vocab_size\":2,"
         "\"vocab\":[\"a\"],\"specials\":{\"pad\":0}}",
         CLF_ERR_FORMAT, "\"pad\" has id 0, outside [1, 2)"},
        {"{\"format\":\"clformer-tokenizer\",\"version\":1,\"type\":\"char\",\"vocab_size\":3,"
         "\"vocab\":[\"a\"],\"specials\":{\"pad\":1,\"eos\":1}}",
         CLF_ERR_FORMAT, "share id 1"},
        {"{\"format\":\"clformer-tokenizer\",\"version\":1,\"type\":\"char\",\"vocab_size\":2,"
         "\"vocab\":[\"a\"],\"specials\":{\"mask\":1}}",
         CLF_ERR_FORMAT, "unknown special token \"mask\""},
        {"{\"format\":\"clformer-tokenizer\",\"version\":1,\"type\":\"char\",\"vocab_size\":1}",
         CLF_ERR_FORMAT, "needs \"vocab\""},
        {"{\"format\":\"clformer-tokenizer\",\"version\":1,\"type\":\"byte\",\"vocab_size\":256,"
         "\"vocab\":[]}",
         CLF_ERR_FORMAT, "byte tokenizer has no \"vocab\""},
        {"{\"format\":\"clformer-tokenizer\",\"version\":1,\"type\":\"word\",\"vocab_size\":5}",
         CLF_ERR_FORMAT, "unknown type \"word\""},
        {"{\"format\":\"clformer-tokenizer\",\"version\":1,\"type\":\"bpe\",\"vocab_size\":5}",
         CLF_ERR_FORMAT, "vocab_size >= 262"},
        {"{\"format\":\"clformer-tokenizer\",\"version\":1,", CLF_ERR_FORMAT,
         "byte 43 (line 1, column 44)"},
        {"[]", CLF_ERR_FORMAT, "expected a JSON object"},
    };
    int all = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        clf_error_clear(&err);
        u = NULL;
        st = clf_tokenizer_from_json(bad[i].json, strlen(bad[i].json), &u, &err);
        char fm[CLF_ERROR_MSG_MAX + 600];
        clf_error_format(&err, fm, sizeof fm);
        int ok = st == bad[i].st && u == NULL && strstr(fm, bad[i].want) != NULL &&
                 strncmp(fm, "tokenizer", 9) == 0;
        printf("  %s %s\n", ok ? "refused:" : "WRONG:  ", fm);
        all &= ok;
        clf_tokenizer_destroy(u);
    }
    TU_CHECK(all, "%zu malformed tokenizer files refused with a message naming the field",
             sizeof bad / sizeof bad[0]);
    clf_tokenizer_destroy(NULL);
}

int main(void)
{
    tu_seed();
    test_shakespeare();
    test_unicode();
    test_bytes();
    test_json_form();
    return tu_finish();
}
