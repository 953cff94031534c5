/*
 * test_bpe.c - the byte-pair-encoding tokenizer (model/text/tokenizer.h,
 * model/text/bpe.c).
 *
 * Checks:
 * - pre-tokenizer: hand-written splits (words with their leading space,
 *   contractions, whitespace runs leaving their last character to the next
 *   word, digits, punctuation, umlauts and ß inside words, typographic
 *   quotes, NBSP, invalid UTF-8 bytes, the CLF_BPE_MAX_PIECE cut at a
 *   character boundary); on random text the pieces tile the input;
 * - training on Sennrich et al.'s toy corpus (" low" x5, " lower" x2,
 *   " newest" x6, " widest" x3) gives the 15 merges derived by hand in
 *   test_sennrich (ties: smaller left id, then smaller right id), stops
 *   early at a smaller vocab_size, and encodes unseen words by rank;
 * - encoding equals a naive reference (GPT-2's bpe(): merge every
 *   occurrence of the lowest-ranked pair, ranks found by a linear search of
 *   the merge list) on random text, and training's own segmentation
 *   (stats.tokens) equals encoding the training text;
 * - exact round trips: random Unicode strings (ASCII, Latin-1, umlauts, ß,
 *   CJK, emoji, controls, NUL, unusual whitespace), random bytes that are
 *   not UTF-8, German text, tiny Shakespeare; characters never seen in
 *   training encode by byte fallback, never to unk;
 * - specials at ids 0..5, never produced by encoding (even text spelling
 *   "<pad>"), skipped by decode, shown by CLF_DECODE_SPECIALS;
 * - JSON: reload gives identical JSON and encodings; non-UTF-8 pieces are
 *   written as byte arrays; a table of corrupted files is refused with
 *   CLF_ERR_FORMAT naming the field;
 * - determinism: the same text (also split into two calls) gives identical
 *   JSON;
 * - gzip input: a file written with zlib reads back; a truncated one is
 *   refused;
 * - a timing line (not an assertion): a vocabulary of 8000 trained on
 *   Multi30k's train.en.gz (../shared/data/multi30k, or generated text
 *   when it is absent), and encoding it, with a round-trip check.
 * No device needed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "model/io/fileio.h"
#include "model/io/json.h"
#include "model/text/tokenizer.h"
#include "runtime/util.h"
#include "tests/test_util.h"

static clf_tokenizer *train(const char *text, size_t len, int32_t vocab, int64_t minf)
{
    clf_bpe_options o;
    clf_bpe_options_init(&o);
    o.vocab_size = vocab;
    o.min_frequency = minf;
    clf_tokenizer *t = NULL;
    clf_error err;
    tu_ok(clf_tokenizer_train_bpe(text, len, &o, &t, &err), &err, "training bpe");
    return t;
}

static char *to_json(const clf_tokenizer *t)
{
    char *j = NULL;
    clf_error err;
    tu_ok(clf_tokenizer_to_json(t, &j, NULL, &err), &err, "serializing");
    return j;
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
    for (size_t i = 0; ok && i < n; i++)
        ok = ids[i] >= CLF_BPE_BYTE_FIRST && ids[i] < clf_tokenizer_vocab_size(t);
    if (ntok != NULL)
        *ntok = n;
    free(ids);
    free(back);
    return ok;
}

/* The piece of id as a C string (pieces here are short and NUL-free). */
static const char *piece(const clf_tokenizer *t, int32_t id)
{
    static char buf[CLF_BPE_MAX_PIECE + 1];
    const char *b;
    size_t l;
    if (!clf_tokenizer_piece(t, id, &b, &l))
        return "?";
    memcpy(buf, b, l);
    buf[l] = '\0';
    return buf;
}

/* ---- pre-tokenizer ------------------------------------------------------------------ */

/* 1 if text splits into exactly the NULL-terminated list want[]. */
static int splits_as(const char *text, size_t len, const char *const *want)
{
    size_t pos = 0, k = 0;
    while (pos < len) {
        size_t end = clf_bpe_pretoken_end(text, len, pos);
        if (want[k] == NULL || strlen(want[k]) != end - pos ||
            memcmp(want[k], text + pos, end - pos) != 0) {
            printf("  piece %zu: got \"%.*s\", want \"%s\"\n", k, (int)(end - pos), text + pos,
                   want[k] ? want[k] : "(end)");
            return 0;
        }
        k++;
        pos = end;
    }
    return want[k] == NULL;
}

static void test_pretokenizer(void)
{
    printf("pre-tokenizer\n");
    static const char *const w1[] = {"Hello", " world", "'s",  " ",   " end", "\n",  "\n",
                                     "ok",    " 123",   "abc", "!!?", " we",  "'ll", " I",
                                     "'m",    " don",   "'t",  "\t",  "x",    "  ",  NULL};
    const char *t1 = "Hello world's  end\n\nok 123abc!!? we'll I'm don't\tx  ";
    TU_CHECK(splits_as(t1, strlen(t1), w1), "GPT-2 style splits of English");
    static const char *const w2[] = {"Zwei",          " junge", " weiße",        " Männer",
                                     " \xe2\x80\x9e", "Straße", "\xe2\x80\x9c.", NULL};
    const char *t2 = "Zwei junge weiße Männer „Straße“.";
    TU_CHECK(splits_as(t2, strlen(t2), w2),
             "umlauts and ß stay inside words, „ and “. are symbols");
    static const char *const w3[] = {"a", "\xc2\xa0",  "b",  " ", "\xc2\xa0",
                                     "c", "!\xff\xfe", "cd", NULL};
    const char *t3 = "a\xc2\xa0"
                     "b \xc2\xa0"
                     "c!\xff\xfe"
                     "cd";
    TU_CHECK(splits_as(t3, strlen(t3), w3), "NBSP is whitespace; invalid bytes are symbols");
    static const char *const w4[] = {" '", "sx", "'", NULL};
    const char *t4 = " 'sx'";
    TU_CHECK(splits_as(t4, strlen(t4), w4), "no contraction after a space, or at the end");

    /* the length cap: 300 'a' -> 256 + 44; 200 'ä' (400 bytes) -> 256 + 144 */
    char buf[512];
    memset(buf, 'a', 300);
    size_t e1 = clf_bpe_pretoken_end(buf, 300, 0), e2 = clf_bpe_pretoken_end(buf, 300, e1);
    for (int i = 0; i < 200; i++)
        memcpy(buf + 2 * i, "\xc3\xa4", 2);
    size_t e3 = clf_bpe_pretoken_end(buf, 400, 0), e4 = clf_bpe_pretoken_end(buf, 400, e3);
    /* 255 'ä' bytes would split a character: the cut must land on 256 */
    buf[0] = 'x';
    for (int i = 0; i < 200; i++)
        memcpy(buf + 1 + 2 * i, "\xc3\xa4", 2);
    size_t e5 = clf_bpe_pretoken_end(buf, 401, 0);
    TU_CHECK(e1 == 256 && e2 == 300 && e3 == 256 && e4 == 400 && e5 == 255,
             "pieces cut at %d bytes on a character boundary: %zu %zu %zu %zu %zu",
             CLF_BPE_MAX_PIECE, e1, e2, e3, e4, e5);
}

/* ---- Sennrich et al.'s example -------------------------------------------------------- */

static char *sennrich_corpus(size_t *len)
{
    static const struct {
        const char *w;
        int n;
    } words[] = {{" low", 5}, {" lower", 2}, {" newest", 6}, {" widest", 3}};
    char *s = malloc(256);
    size_t k = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < words[i].n; j++) {
            memcpy(s + k, words[i].w, strlen(words[i].w));
            k += strlen(words[i].w);
        }
    s[k] = '\0';
    *len = k;
    return s;
}

/*
 * By hand (ids: ' ' 38, d 106, e 107, i 111, l 114, n 116, o 117, r 120,
 * s 121, t 122, w 125; merge r makes 262 + r). Initial counts: es 9, st 9,
 * we 8 (lower 2 + newest 6), " l" 7, lo 7, ow 7, " n" ne ew 6, ...
 *   0 es      9  (es and st tie at 9: left e 107 < s 121)
 *   1 est     9  ([262, t])
 *   2 " l"    7  (" l", lo, ow tie at 7: left ' ' 38 smallest)
 *   3 ow      7  ([264, o] vs [o, w]: left o 117 < 264)
 *   4 " low"  7
 *   5 " n"    6  (" n", ne, ew, w+est tie at 6: ' ' first; "we" lost newest to "est")
 *   6 ew      6  (ne has left n 116 > e 107; [267, e] has left 267)
 *   7 " new"  6  ([267, 268] vs [268, 263]: 267 first)
 *   8 " newest" 6
 *   9 " w"    3  (" w", wi, id, d+est tie at 3: ' ' first)
 *  10 dest    3  ([d, 263]: left d 106 < i 111 < 271)
 *  11 idest   3
 *  12 " widest" 3
 *  13 er      2  ([266, e] vs [e, r]: e first)
 *  14 " lower" 2
 * and then no pair is left: 15 merges, vocabulary 277.
 */
static void test_sennrich(void)
{
    printf("Sennrich et al. toy corpus\n");
    static const char *const want[] = {"es",   "est",   " l",      "ow",      " low",
                                       " n",   "ew",    " new",    " newest", " w",
                                       "dest", "idest", " widest", "er",      " lower"};
    size_t len;
    char *text = sennrich_corpus(&len);
    clf_tokenizer *t = train(text, len, 1000, 1);
    int R = clf_tokenizer_bpe_merge_count(t), same = R == 15;
    for (int r = 0; same && r < R; r++) {
        same = strcmp(piece(t, CLF_BPE_MERGE_FIRST + r), want[r]) == 0;
        if (!same)
            printf("  merge %d: got \"%s\", want \"%s\"\n", r, piece(t, CLF_BPE_MERGE_FIRST + r),
                   want[r]);
    }
    TU_CHECK(same && clf_tokenizer_vocab_size(t) == 277 &&
                 clf_tokenizer_base_size(t) == 277 - CLF_SPECIAL_COUNT,
             "15 merges as derived by hand, vocab 277 (got %d merges, vocab %d)", R,
             clf_tokenizer_vocab_size(t));
    int32_t l, r;
    TU_CHECK(clf_tokenizer_bpe_merge(t, 1, &l, &r) && l == 262 && r == 't' + 6 &&
                 clf_tokenizer_bpe_merge(t, 4, &l, &r) && l == 264 && r == 265 &&
                 !clf_tokenizer_bpe_merge(t, 15, &l, &r) && !clf_tokenizer_bpe_merge(t, -1, &l, &r),
             "merge pairs by id");

    /* unseen words, by rank: " lowest" = " low" + "est"; " newer" = " new" + "er" */
    int32_t *ids = NULL;
    size_t n = 0;
    clf_error err;
    tu_ok(clf_tokenizer_encode(t, " lowest newer", 13, &ids, &n, &err), &err, "encode");
    TU_CHECK(n == 4 && ids[0] == 266 && ids[1] == 263 && ids[2] == 269 && ids[3] == 275,
             "\" lowest newer\" -> [266 263 269 275] (got %zu ids: %d %d %d %d)", n,
             n > 0 ? ids[0] : -1, n > 1 ? ids[1] : -1, n > 2 ? ids[2] : -1, n > 3 ? ids[3] : -1);
    free(ids);
    clf_tokenizer_destroy(t);

    /* a smaller vocabulary stops after the first merges; min_frequency 3 stops at " widest" */
    t = train(text, len, CLF_BPE_MERGE_FIRST + 5, 1);
    TU_CHECK(clf_tokenizer_bpe_merge_count(t) == 5 &&
                 strcmp(piece(t, CLF_BPE_MERGE_FIRST + 4), " low") == 0,
             "vocab_size 267 keeps the first 5 merges");
    clf_tokenizer_destroy(t);
    clf_bpe_trainer *tr = NULL;
    clf_bpe_options o;
    clf_bpe_options_init(&o);
    o.vocab_size = 1000;
    o.min_frequency = 3;
    tu_ok(clf_bpe_trainer_create(&o, &tr, &err), &err, "trainer");
    tu_ok(clf_bpe_trainer_add(tr, text, len, &err), &err, "add");
    tu_ok(clf_bpe_trainer_finish(tr, &t, &err), &err, "finish");
    clf_bpe_stats stats;
    clf_bpe_trainer_stats(tr, &stats);
    TU_CHECK(clf_tokenizer_bpe_merge_count(t) == 13 && stats.merges == 13 &&
                 stats.last_frequency == 3 && stats.words == 16 && stats.unique_words == 4 &&
                 stats.bytes == len && stats.tokens == 5 + 2 * 3 + 6 + 3 && stats.vocab_size == 275,
             "min_frequency 3: 13 merges, last count 3, 16 words (4 distinct), lower = "
             "\" low\"+e+r (got %d merges, last %lld, tokens %llu)",
             (int)stats.merges, (long long)stats.last_frequency, (unsigned long long)stats.tokens);
    clf_tokenizer_destroy(t);
    clf_bpe_trainer_destroy(tr);
    free(text);

    /* argument errors */
    o.vocab_size = 261;
    clf_status st = clf_bpe_trainer_create(&o, &tr, &err);
    TU_CHECK(st == CLF_ERR_ARG && tr == NULL, "vocab_size 261 refused: %s", err.msg);
    o.vocab_size = 300;
    o.min_frequency = 0;
    st = clf_bpe_trainer_create(&o, &tr, &err);
    TU_CHECK(st == CLF_ERR_ARG, "min_frequency 0 refused: %s", err.msg);
    st = clf_tokenizer_train_bpe("", 0, NULL, &t, &err);
    TU_CHECK(st == CLF_ERR_ARG && t == NULL, "empty text refused: %s", err.msg);
    st = clf_tokenizer_create(CLF_TOKENIZER_BPE, "x", 1, &t, &err);
    TU_CHECK(st == CLF_ERR_UNSUPPORTED && t == NULL,
             "clf_tokenizer_create(bpe) points to "
             "training: %s",
             err.msg);
}

/* ---- random text and a naive reference --------------------------------------------- */

/* Append one random code point (from a mix of scripts) as UTF-8. */
static size_t random_char(tu_rng *rng, char *out)
{
    static const uint32_t pool[] = {
        'a',    'e',    'n',    'r',    's',     't',     ' ',      ' ',    ' ',    '.',    ',',
        '\'',   '\n',   '\t',   '0',    '7',     0xE4,    0xF6,     0xFC,   0xC4,   0xD6,   0xDC,
        0xDF,   0xE9,   0xA0,   0xA9,   0x85,    0x00,    0x1F,     0x7F,   0x201E, 0x201C, 0x2014,
        0x2028, 0x3000, 0x4E2D, 0x6587, 0x1F600, 0x1F9D0, 0x10FFFF, 0x0301, 0xFEFF};
    uint32_t r = tu_u32(rng), cp;
    if (r % 5 == 0) /* any scalar value */
        do
            cp = tu_u32(rng) % 0x110000;
        while (cp >= 0xD800 && cp < 0xE000);
    else
        cp = pool[(r >> 8) % (sizeof pool / sizeof pool[0])];
    return (size_t)clf_utf8_encode(cp, (unsigned char *)out);
}

/* GPT-2's bpe() on one pre-token: ids of bytes, then repeatedly take the
 * lowest-ranked adjacent pair (rank = position in the merge list, found by
 * linear search) and merge every occurrence of it left to right. */
static size_t ref_word(const clf_tokenizer *t, const unsigned char *s, size_t n, int32_t *out)
{
    int32_t R = clf_tokenizer_bpe_merge_count(t);
    for (size_t i = 0; i < n; i++)
        out[i] = CLF_BPE_BYTE_FIRST + s[i];
    for (;;) {
        int32_t best = INT32_MAX, a = 0, b = 0;
        for (size_t i = 0; i + 1 < n; i++)
            for (int32_t r = 0; r < R && r < best; r++) {
                int32_t l, rr;
                clf_tokenizer_bpe_merge(t, r, &l, &rr);
                if (l == out[i] && rr == out[i + 1]) {
                    best = r;
                    a = l;
                    b = rr;
                }
            }
        if (best == INT32_MAX)
            return n;
        size_t m = 0;
        for (size_t i = 0; i < n;) {
            if (i + 1 < n && out[i] == a && out[i + 1] == b) {
                out[m++] = CLF_BPE_MERGE_FIRST + best;
                i += 2;
            } else {
                out[m++] = out[i++];
            }
        }
        n = m;
    }
}

static const char *german =
    "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.\n"
    "Mehrere Männer mit Schutzhelmen bedienen ein Antriebsradsystem.\n"
    "Ein kleines Mädchen klettert in ein Spielhaus aus Holz.\n"
    "Ein Mann in einem blauen Hemd steht auf einer Leiter und putzt ein Fenster.\n"
    "Zwei Männer stehen am Herd und bereiten Essen zu.\n"
    "Ein Mann in grün hält eine Gitarre, während der andere Mann sein Hemd ansieht.\n"
    "Ein Mann lächelt einen ausgestopften Löwen an.\n"
    "Ein schickes Mädchen spricht mit dem Handy während sie langsam die Straße entlangschwebt.\n"
    "Eine Frau mit einer großen Geldbörse geht an einem Tor vorbei.\n"
    "Jungen tanzen mitten in der Nacht auf Pfosten.\n"
    "Two young, White males are outside near many bushes.\n"
    "Several men in hard hats are operating a giant pulley system.\n"
    "A little girl climbing into a wooden playhouse.\n"
    "A man in a blue shirt is standing on a ladder cleaning a window.\n"
    "Two men are at the stove preparing food.\n";

static void test_random_and_reference(void)
{
    printf("random text: round trips and the naive reference\n");
    tu_rng rng = tu_rng_new(11);
    /* a training text: German + English repeated, plus random characters */
    size_t cap = 200000, len = 0;
    char *text = malloc(cap + 8);
    while (len + strlen(german) < cap / 2) {
        memcpy(text + len, german, strlen(german));
        len += strlen(german);
    }
    while (len < cap)
        len += random_char(&rng, text + len);
    clf_tokenizer *t = train(text, len, 700, 2);
    TU_CHECK(clf_tokenizer_vocab_size(t) == 700, "700 tokens learned (got %d)",
             clf_tokenizer_vocab_size(t));
    size_t ntok = 0;
    int ok = round_trips(t, german, strlen(german), &ntok);
    TU_CHECK(ok && ntok < strlen(german) / 3, "German text round-trips, %zu bytes -> %zu tokens",
             strlen(german), ntok);
    const char *umlauts = "Öl, Ärger, Übermut: süße Bäume, große Füße — „schön“ ẞ";
    TU_CHECK(round_trips(t, umlauts, strlen(umlauts), NULL), "umlauts and ß round-trip");

    int rt_ok = 1, ref_ok = 1, tile_ok = 1;
    char s[4096];
    int32_t ids[4096], want[4096];
    for (int trial = 0; trial < 300; trial++) {
        size_t n = 0, target = 1 + tu_u32(&rng) % 1500;
        int bytes = trial % 4 == 3; /* arbitrary bytes, mostly invalid UTF-8 */
        while (n < target)
            if (bytes)
                s[n++] = (char)(tu_u32(&rng) & 0xFF);
            else
                n += random_char(&rng, s + n);
        if (trial == 7) { /* a long run to exercise the cap and the encoder on 256 symbols */
            memset(s, 'e', 600);
            n = 600;
        }
        rt_ok &= round_trips(t, s, n, NULL);
        /* reference: pre-tokens tile the text and each is <= CLF_BPE_MAX_PIECE */
        size_t k = 0, m = 0;
        clf_error err;
        tu_ok(clf_tokenizer_encode_into(t, s, n, ids, n, &k, &err), &err, "encode_into");
        for (size_t pos = 0; pos < n;) {
            size_t end = clf_bpe_pretoken_end(s, n, pos);
            tile_ok &= end > pos && end <= n && end - pos <= CLF_BPE_MAX_PIECE;
            m += ref_word(t, (const unsigned char *)s + pos, end - pos, want + m);
            pos = end;
        }
        ref_ok &= k == m && memcmp(ids, want, k * sizeof *ids) == 0;
    }
    TU_CHECK(rt_ok, "300 random strings (Unicode, and raw bytes) round-trip exactly");
    TU_CHECK(tile_ok, "pre-tokens tile the text, at most %d bytes each", CLF_BPE_MAX_PIECE);
    TU_CHECK(ref_ok, "encoding equals GPT-2's merge loop (naive reference) on 300 strings");

    /* byte fallback: never-seen characters encode to bytes, never to unk */
    const char *unseen = "\xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 \xe2\x82\xac \x01";
    int32_t *out = NULL;
    size_t no = 0;
    clf_error err;
    tu_ok(clf_tokenizer_encode(t, unseen, strlen(unseen), &out, &no, &err), &err, "encode");
    int no_unk = 1;
    for (size_t i = 0; i < no; i++)
        no_unk &= out[i] != clf_tokenizer_special(t, CLF_SPECIAL_UNK) &&
                  clf_tokenizer_special_of(t, out[i]) < 0;
    TU_CHECK(no_unk && round_trips(t, unseen, strlen(unseen), NULL),
             "unseen CJK/emoji/euro encode by byte fallback (%zu ids), no unk", no);
    free(out);

    /* encode_into with too little room */
    size_t k = 0;
    clf_status st = clf_tokenizer_encode_into(t, "hello world", 11, ids, 1, &k, &err);
    TU_CHECK(st == CLF_ERR_ARG, "encode_into refuses a buffer that is too small: %s", err.msg);

    /* training's segmentation == encoding the training text (the cached path) */
    clf_bpe_trainer *tr = NULL;
    clf_bpe_options o;
    clf_bpe_options_init(&o);
    o.vocab_size = 700;
    clf_tokenizer *t2 = NULL;
    tu_ok(clf_bpe_trainer_create(&o, &tr, &err), &err, "trainer");
    tu_ok(clf_bpe_trainer_add(tr, text, len, &err), &err, "add");
    tu_ok(clf_bpe_trainer_finish(tr, &t2, &err), &err, "finish");
    clf_bpe_stats stats;
    clf_bpe_trainer_stats(tr, &stats);
    out = NULL;
    tu_ok(clf_tokenizer_encode(t2, text, len, &out, &no, &err), &err, "encode");
    TU_CHECK(stats.tokens == no, "the trained segmentation has %llu tokens, encoding %zu",
             (unsigned long long)stats.tokens, no);
    free(out);
    clf_tokenizer_destroy(t2);
    clf_bpe_trainer_destroy(tr);
    clf_tokenizer_destroy(t);
    free(text);
}

/* ---- specials ------------------------------------------------------------------------ */

static void test_specials(void)
{
    printf("special tokens\n");
    clf_tokenizer *t = train(german, strlen(german), 400, 2);
    int fixed = 1;
    for (int i = 0; i < CLF_SPECIAL_COUNT; i++) {
        const char *b;
        size_t l;
        fixed &= clf_tokenizer_special(t, (clf_special_token)i) == i &&
                 clf_tokenizer_special_of(t, i) == i && clf_tokenizer_piece(t, i, &b, &l) && l == 0;
    }
    fixed &= clf_tokenizer_special_of(t, CLF_BPE_BYTE_FIRST) == -1 &&
             clf_tokenizer_special_of(t, -1) == -1;
    TU_CHECK(fixed, "pad 0, bos 1, eos 2, unk 3, cls 4, sep 5, empty pieces");
    int32_t id = -1, V = clf_tokenizer_vocab_size(t);
    clf_error err;
    tu_ok(clf_tokenizer_add_special(t, CLF_SPECIAL_SEP, &id, &err), &err, "add_special");
    TU_CHECK(id == 5 && clf_tokenizer_vocab_size(t) == V, "add_special returns the fixed id");

    const char *spelled = "<pad><bos> text <eos>";
    int32_t *ids = NULL;
    size_t n = 0;
    tu_ok(clf_tokenizer_encode(t, spelled, strlen(spelled), &ids, &n, &err), &err, "encode");
    int none = 1;
    for (size_t i = 0; i < n; i++)
        none &= ids[i] >= CLF_BPE_BYTE_FIRST;
    TU_CHECK(none, "text spelling \"<pad><bos>\" encodes to no special id");
    free(ids);

    int32_t seq[64];
    size_t k = 0;
    seq[k++] = 1; /* bos */
    tu_ok(clf_tokenizer_encode_into(t, "Ein Mann", 8, seq + k, 60, &n, &err), &err, "encode");
    k += n;
    seq[k++] = 2; /* eos */
    seq[k++] = 0;
    seq[k++] = 0;
    char *s = NULL;
    size_t sl = 0;
    tu_ok(clf_tokenizer_decode(t, seq, k, &s, &sl, &err), &err, "decode");
    TU_CHECK(sl == 8 && strcmp(s, "Ein Mann") == 0, "decode skips specials: \"%s\"", s);
    free(s);
    tu_ok(clf_tokenizer_decode_ex(t, seq, k, CLF_DECODE_SPECIALS, &s, &sl, &err), &err,
          "decode_ex");
    TU_CHECK(strcmp(s, "<bos>Ein Mann<eos><pad><pad>") == 0 && sl == strlen(s),
             "CLF_DECODE_SPECIALS shows them: \"%s\"", s);
    free(s);
    int32_t bad = V;
    clf_status st = clf_tokenizer_decode(t, &bad, 1, &s, NULL, &err);
    TU_CHECK(st == CLF_ERR_ARG, "decode refuses id %d: %s", (int)V, err.msg);
    clf_tokenizer_destroy(t);
}

/* ---- JSON --------------------------------------------------------------------------- */

/* Replace the first occurrence of from by to in s (new string), NULL if absent. */
static char *replace(const char *s, const char *from, const char *to)
{
    const char *p = strstr(s, from);
    if (p == NULL)
        return NULL;
    size_t a = (size_t)(p - s), lf = strlen(from), lt = strlen(to), ls = strlen(s);
    char *r = malloc(ls - lf + lt + 1);
    memcpy(r, s, a);
    memcpy(r + a, to, lt);
    memcpy(r + a + lt, p + lf, ls - a - lf + 1);
    return r;
}

static void test_json(void)
{
    printf("JSON\n");
    clf_error err;
    /* the German/English text: umlaut pieces, and byte pieces that are not UTF-8 */
    clf_tokenizer *t = train(german, strlen(german), 500, 2);
    char *j = to_json(t);
    clf_tokenizer *u = NULL;
    tu_ok(clf_tokenizer_from_json(j, strlen(j), &u, &err), &err, "reloading");
    char *j2 = to_json(u);
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    tu_ok(clf_tokenizer_encode(t, german, strlen(german), &a, &na, &err), &err, "encode");
    tu_ok(clf_tokenizer_encode(u, german, strlen(german), &b, &nb, &err), &err, "encode");
    TU_CHECK(strcmp(j, j2) == 0 && na == nb && memcmp(a, b, na * sizeof *a) == 0 &&
                 clf_tokenizer_type_of(u) == CLF_TOKENIZER_BPE &&
                 clf_tokenizer_vocab_size(u) == clf_tokenizer_vocab_size(t) &&
                 clf_tokenizer_vocab_size(t) > 300,
             "reload: identical JSON (%zu bytes, vocab %d) and encodings", strlen(j),
             clf_tokenizer_vocab_size(t));
    char head[256];
    snprintf(head, sizeof head,
             "{\"format\":\"clformer-tokenizer\",\"version\":1,\"type\":"
             "\"bpe\",\"vocab_size\":%d,\"pre_tokenizer\":\"gpt2\",\"vocab\":[null,null,"
             "null,null,null,null,\"\\u0000\",",
             clf_tokenizer_vocab_size(t));
    TU_CHECK(strncmp(j, head, strlen(head)) == 0 && strstr(j, ",[195],") != NULL &&
                 strstr(j, "\"ä\"") != NULL &&
                 strstr(j, "\"specials\":{\"pad\":0,\"bos\":1,\"eos\":2,\"unk\":3,\"cls\":4,"
                           "\"sep\":5}}") != NULL,
             "layout: specials null, bytes from \\u0000, byte 0xC3 as [195], \"ä\" a string");
    free(a);
    free(b);
    free(j2);
    clf_tokenizer_destroy(u);
    clf_tokenizer_destroy(t);
    free(j);

    /* corruptions of the Sennrich tokenizer's JSON */
    size_t len;
    char *text = sennrich_corpus(&len);
    t = train(text, len, 1000, 1);
    free(text);
    j = to_json(t);
    clf_tokenizer_destroy(t);
    static const struct {
        const char *from, *to, *want;
    } edits[] = {
        {"\"merges\":[[107,121]", "\"merges\":[[107,999]", "merges[0] = [107, 999]"},
        {"\"merges\":[[107,121]", "\"merges\":[[262,121]", "made before it"},
        {"\"merges\":[[107,121]", "\"merges\":[[2,121]", "merges[0] = [2, 121]"},
        {"[262,122]", "[107,121]", "merges[1] = [107, 121] repeats merges[0]"},
        {"[262,122]", "[262,122,1]", "merges[1] must be an array of two ids"},
        {"[262,122]", "[262,-1]", "merges[1][1] must be a token id"},
        {"\"vocab_size\":277", "\"vocab_size\":278", "\"merges\" has 15 entries"},
        {"\"vocab_size\":277", "\"vocab_size\":100", "vocab_size >= 262"},
        {"\"pre_tokenizer\":\"gpt2\",", "", "needs \"pre_tokenizer\""},
        {"\"pre_tokenizer\":\"gpt2\"", "\"pre_tokenizer\":\"gpt4\"", "unknown pre_tokenizer"},
        {"\"es\"", "\"ez\"", "vocab[262] is not the piece"},
        {"\"vocab\":[null", "\"vocab\":[\"x\"", "vocab[0] must be null"},
        {",\"a\",", ",[97],", "vocab[103] is valid UTF-8 and must be written as a string"},
        {",[195],", ",[196],", "vocab[201] is not the piece"},
        {",[195],", ",[300],", "vocab[201][0] must be a byte value"},
        {",[195],", ",true,", "vocab[201] must be a string or an array"},
        {",\"a\",", ",", "\"vocab\" has 276 entries"},
        {"\"pad\":0", "\"pad\":7", "special token \"pad\" at id 0, found 7"},
        {",\"sep\":5", "", "special token \"sep\" at id 5, found -1"},
        {"\"type\":\"bpe\"", "\"type\":\"char\"", "has no \"merges\""},
        {"\"merges\":", "\"merge\":", "unknown key \"merge\""},
        {"}}", "}", "byte"},
    };
    int all = 1;
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char *bad = replace(j, edits[i].from, edits[i].to);
        if (bad == NULL) {
            printf("  WRONG: the edit \"%s\" does not apply\n", edits[i].from);
            all = 0;
            continue;
        }
        clf_error_clear(&err);
        u = NULL;
        clf_status st = clf_tokenizer_from_json(bad, strlen(bad), &u, &err);
        char fm[CLF_ERROR_MSG_MAX + 600];
        clf_error_format(&err, fm, sizeof fm);
        int ok = st == CLF_ERR_FORMAT && u == NULL && strstr(fm, edits[i].want) != NULL &&
                 strncmp(fm, "tokenizer", 9) == 0;
        printf("  %s %s\n", ok ? "refused:" : "WRONG:  ", fm);
        all &= ok;
        clf_tokenizer_destroy(u);
        free(bad);
    }
    TU_CHECK(all, "%zu corrupted bpe files refused with a message naming the field",
             sizeof edits / sizeof edits[0]);
    free(j);

    /* a merge chain whose piece would exceed CLF_BPE_MAX_PIECE: a, aa, aaaa, ... 512 */
    char doc[8192];
    int k = snprintf(doc, sizeof doc,
                     "{\"format\":\"clformer-tokenizer\",\"version\":1,"
                     "\"type\":\"bpe\",\"vocab_size\":%d,\"pre_tokenizer\":"
                     "\"gpt2\",\"vocab\":[",
                     CLF_BPE_MERGE_FIRST + 9);
    for (int i = 0; i < CLF_BPE_MERGE_FIRST + 9; i++)
        k += snprintf(doc + k, sizeof doc - (size_t)k, "%snull", i ? "," : "");
    k += snprintf(doc + k, sizeof doc - (size_t)k, "],\"merges\":[[103,103]");
    for (int r = 1; r < 9; r++)
        k += snprintf(doc + k, sizeof doc - (size_t)k, ",[%d,%d]", 261 + r, 261 + r);
    snprintf(doc + k, sizeof doc - (size_t)k,
             "],\"specials\":{\"pad\":0,\"bos\":1,\"eos\":2,"
             "\"unk\":3,\"cls\":4,\"sep\":5}}");
    clf_status st = clf_tokenizer_from_json(doc, strlen(doc), &u, &err);
    TU_CHECK(st == CLF_ERR_FORMAT && strstr(err.msg, "merges[8] makes a piece of 512 bytes"),
             "an over-long piece refused: %s", err.msg);
}

/* ---- determinism, gzip, timing ---------------------------------------------------------- */

static void test_determinism(void)
{
    printf("determinism\n");
    size_t len = strlen(german);
    clf_tokenizer *t1 = train(german, len, 450, 2), *t2 = train(german, len, 450, 2), *t3 = NULL;
    /* the same text in two calls, split at a line start */
    const char *cut = strstr(german, "\nTwo") + 1;
    clf_bpe_options o;
    clf_bpe_options_init(&o);
    o.vocab_size = 450;
    clf_bpe_trainer *tr = NULL;
    clf_error err;
    tu_ok(clf_bpe_trainer_create(&o, &tr, &err), &err, "trainer");
    tu_ok(clf_bpe_trainer_add(tr, cut, strlen(cut), &err), &err, "add");
    tu_ok(clf_bpe_trainer_add(tr, german, (size_t)(cut - german), &err), &err, "add");
    tu_ok(clf_bpe_trainer_finish(tr, &t3, &err), &err, "finish");
    clf_tokenizer *t4 = NULL;
    tu_ok(clf_bpe_trainer_finish(tr, &t4, &err), &err, "finish again");
    clf_bpe_trainer_destroy(tr);
    char *j1 = to_json(t1), *j2 = to_json(t2), *j3 = to_json(t3), *j4 = to_json(t4);
    TU_CHECK(strcmp(j1, j2) == 0 && strcmp(j1, j3) == 0 && strcmp(j1, j4) == 0,
             "same text -> same vocabulary (twice, in two calls in another order, finish "
             "twice)");
    free(j1);
    free(j2);
    free(j3);
    free(j4);
    clf_tokenizer_destroy(t1);
    clf_tokenizer_destroy(t2);
    clf_tokenizer_destroy(t3);
    clf_tokenizer_destroy(t4);
}

static void test_gzip(void)
{
    printf("gzip input\n");
    char path[1024], plain[1024];
    tu_scratch_path("test_bpe.txt.gz", path, sizeof path);
    tu_scratch_path("test_bpe.txt", plain, sizeof plain);
    gzFile f = gzopen(path, "wb");
    TU_CHECK(f != NULL, "create %s", path);
    if (f == NULL)
        return;
    size_t len = strlen(german);
    for (int i = 0; i < 50; i++)
        gzwrite(f, german, (unsigned)len);
    gzclose(f);
    clf_error err;
    char *text = NULL;
    size_t n = 0;
    clf_status st = clf_file_read_text(path, CLF_BPE_MAX_TEXT, &text, &n, &err);
    int same = st == CLF_OK && n == 50 * len;
    for (int i = 0; same && i < 50; i++)
        same = memcmp(text + (size_t)i * len, german, len) == 0;
    TU_CHECK(same && text[n] == '\0', "a gzip file reads back (%zu bytes): %s", n,
             st == CLF_OK ? "ok" : err.msg);
    free(text);
    /* the same as plain text */
    tu_ok(clf_file_write_atomic(plain, german, len, &err), &err, "write plain");
    st = clf_file_read_text(plain, CLF_BPE_MAX_TEXT, &text, &n, &err);
    TU_CHECK(st == CLF_OK && n == len && memcmp(text, german, len) == 0, "a plain file reads");
    free(text);
    st = clf_file_read_text(plain, 10, &text, &n, &err);
    TU_CHECK(st == CLF_ERR_IO && strstr(err.msg, "larger than 10 bytes"), "size limit: %s",
             err.msg);
    /* truncate the gzip file */
    char *gz = NULL;
    size_t gzn = 0;
    tu_ok(clf_file_read_all(path, 1 << 20, &gz, &gzn, &err), &err, "read gz");
    tu_ok(clf_file_write_atomic(path, gz, gzn / 2, &err), &err, "truncate");
    free(gz);
    text = NULL;
    st = clf_file_read_text(path, CLF_BPE_MAX_TEXT, &text, &n, &err);
    TU_CHECK(st == CLF_ERR_FORMAT && text == NULL, "a truncated gzip file refused: %s", err.msg);
    st = clf_file_read_text("/nonexistent/x.gz", CLF_BPE_MAX_TEXT, &text, &n, &err);
    TU_CHECK(st == CLF_ERR_IO && strstr(err.msg, "/nonexistent/x.gz"), "missing file: %s", err.msg);
    remove(path);
    remove(plain);
}

static void test_corpus(void)
{
    const char *src = getenv("CLF_SOURCE_DIR");
    char path[1024];
    clf_error err;
    char *text = NULL;
    size_t len = 0;

    /* tiny Shakespeare (in the repository): round trip and the cached encoder */
    snprintf(path, sizeof path, "%s/data/tinyshakespeare.txt", src ? src : ".");
    if (clf_file_read_all(path, 1 << 24, &text, &len, &err) == CLF_OK) {
        printf("tiny Shakespeare\n");
        double t0 = clf_now_seconds();
        clf_tokenizer *t = train(text, len, 2000, 2);
        double t1 = clf_now_seconds();
        size_t ntok = 0;
        TU_CHECK(round_trips(t, text, len, &ntok), "tiny Shakespeare round-trips");
        double t2 = clf_now_seconds();
        printf("  timing: vocab 2000 trained in %.2f s; %zu bytes -> %zu tokens "
               "(%.2f bytes/token), encode+decode %.2f s\n",
               t1 - t0, len, ntok, (double)len / (double)ntok, t2 - t1);
        clf_tokenizer_destroy(t);
        free(text);
    }

    /* Multi30k (outside the repository: ../shared/data), else generated text */
    snprintf(path, sizeof path, "%s/../shared/data/multi30k/train.en.gz", src ? src : ".");
    clf_bpe_options o;
    clf_bpe_options_init(&o);
    o.vocab_size = 8000;
    clf_bpe_trainer *tr = NULL;
    tu_ok(clf_bpe_trainer_create(&o, &tr, &err), &err, "trainer");
    double t0 = clf_now_seconds();
    if (clf_file_read_text(path, CLF_BPE_MAX_TEXT, &text, &len, &err) == CLF_OK) {
        printf("Multi30k train.en.gz\n");
    } else {
        printf("generated text (%s is absent)\n", path);
        tu_rng rng = tu_rng_new(99);
        static const char *const syll[] = {"ka", "ro", "ni", "st", "er", "en", "ä",   "ß",
                                           "um", "ch", "ei", "lo", "tu", "ma", "ver", "ge"};
        size_t cap = 2000000;
        text = malloc(cap + 64);
        len = 0;
        while (len < cap) {
            int w = 1 + (int)(tu_u32(&rng) % 4);
            for (int i = 0; i < w; i++) {
                /* Zipf-like: a few syllable combinations dominate */
                uint32_t r = tu_u32(&rng);
                const char *s = syll[(r % 16) * (r % 3 ? (r >> 8) % 2 : 1) % 16];
                memcpy(text + len, s, strlen(s));
                len += strlen(s);
            }
            text[len++] = tu_u32(&rng) % 12 == 0 ? '\n' : ' ';
        }
    }
    double t1 = clf_now_seconds();
    tu_ok(clf_bpe_trainer_add(tr, text, len, &err), &err, "add");
    double t2 = clf_now_seconds();
    clf_tokenizer *t = NULL;
    tu_ok(clf_bpe_trainer_finish(tr, &t, &err), &err, "finish");
    double t3 = clf_now_seconds();
    clf_bpe_stats st;
    clf_bpe_trainer_stats(tr, &st);
    clf_bpe_trainer_destroy(tr);
    int32_t *ids = NULL;
    size_t n = 0;
    tu_ok(clf_tokenizer_encode(t, text, len, &ids, &n, &err), &err, "encode");
    double t4 = clf_now_seconds();
    char *back = NULL;
    size_t bl = 0;
    tu_ok(clf_tokenizer_decode(t, ids, n, &back, &bl, &err), &err, "decode");
    double t5 = clf_now_seconds();
    TU_CHECK(bl == len && memcmp(back, text, len) == 0 && n == st.tokens,
             "the corpus round-trips; encoding gives training's %llu tokens (got %zu)",
             (unsigned long long)st.tokens, n);
    printf("  timing: read %.2f s, count %llu words (%llu distinct) %.2f s, %d merges %.2f s "
           "(last count %lld), vocab %d\n",
           t1 - t0, (unsigned long long)st.words, (unsigned long long)st.unique_words, t2 - t1,
           (int)st.merges, t3 - t2, (long long)st.last_frequency, clf_tokenizer_vocab_size(t));
    printf("  timing: encode %zu bytes -> %zu tokens (%.2f tokens/word) in %.3f s (%.1f MB/s), "
           "decode %.3f s\n",
           len, n, (double)n / (double)st.words, t4 - t3, (double)len / 1e6 / (t4 - t3 + 1e-9),
           t5 - t4);
    /* per-sentence encoding (no cache), as a translation data loader would */
    double t6 = clf_now_seconds();
    size_t total = 0;
    int32_t *buf = malloc((len + 1) * sizeof *buf);
    for (size_t pos = 0; pos < len;) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len, k = 0;
        tu_ok(clf_tokenizer_encode_into(t, text + pos, end - pos, buf, len, &k, &err), &err,
              "encode line");
        total += k;
        pos = end + 1;
    }
    printf("  timing: line by line %zu tokens in %.3f s\n", total, clf_now_seconds() - t6);
    free(buf);
    free(ids);
    free(back);
    free(text);
    clf_tokenizer_destroy(t);
}

int main(void)
{
    tu_seed();
    test_pretokenizer();
    test_sennrich();
    test_random_and_reference();
    test_specials();
    test_json();
    test_determinism();
    test_gzip();
    test_corpus();
    return tu_finish();
}
