/*
 * test_dataset.c - the seeded generator and the dataset (model/data/dataset.h).
 *
 * Checks:
 * - generator: known-answer vectors for xoshiro256** (state {1,2,3,4},
 *   the reference's first 10 outputs) and for splitmix64 seeding (seed
 *   1234567: Vigna's published first outputs); clf_rng_below stays in
 *   range and is uniform (chi-square over 7 and 10 bins, fixed seeds,
 *   bounds far from the threshold); the state saved as text and restored
 *   continues the identical sequence; malformed states are refused;
 * - split: floor(9n/10) train tokens (nanoGPT's 1,003,854 / 111,540 for
 *   tiny Shakespeare, loaded from data/ with the char tokenizer; the val
 *   split starts at character 1,003,854 of the file);
 * - batches: with ids = positions, every row is a contiguous window of the
 *   right split and y = x shifted by one; starts cover [0, n - T) and never
 *   reach n - T; a saved-and-restored generator gives bit-identical
 *   batches (--resume); too-short splits are refused;
 * - evaluation windows: counts and contents for hand-computed cases
 *   (partial last window, exact multiple, n = 2, T > n), padding x = 0 and
 *   y = -1, every target exactly once (n - 1 in all), the iterator equals
 *   random access;
 * - loading: a missing file and an empty file are refused naming the path;
 *   a character outside the tokenizer's vocabulary is refused naming the
 *   file; a UTF-8 file with umlauts loads.
 * No device needed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "model/data/dataset.h"
#include "model/io/fileio.h"
#include "tests/test_util.h"

static void test_rng(void)
{
    printf("generator\n");
    clf_rng r = {{1, 2, 3, 4}};
    static const uint64_t want[10] = {11520ull,
                                      0ull,
                                      1509978240ull,
                                      1215971899390074240ull,
                                      1216172134540287360ull,
                                      607988272756665600ull,
                                      16172922978634559625ull,
                                      8476171486693032832ull,
                                      10595114339597558777ull,
                                      2904607092377533576ull};
    int same = 1;
    for (int i = 0; i < 10; i++)
        same &= clf_rng_next(&r) == want[i];
    TU_CHECK(same, "xoshiro256** from state {1,2,3,4}: the reference's first 10 outputs");
    clf_rng_seed(&r, 1234567);
    TU_CHECK(r.s[0] == 6457827717110365317ull && r.s[1] == 3203168211198807973ull &&
                 r.s[2] == 9817491932198370423ull && r.s[3] == 4593380528125082431ull,
             "seeding = four splitmix64 outputs (seed 1234567: published values)");
    clf_rng_seed(&r, 1337);
    TU_CHECK(clf_rng_next(&r) == 12468955128717782748ull, "seed 1337: first output pinned");

    /* range and uniformity (fixed seeds: deterministic) */
    static const uint64_t ns[2] = {7, 10};
    for (int k = 0; k < 2; k++) {
        uint64_t n = ns[k];
        long count[10] = {0};
        int in_range = 1;
        const long draws = 70000;
        clf_rng_seed(&r, 42 + (uint64_t)k);
        for (long i = 0; i < draws; i++) {
            uint64_t v = clf_rng_below(&r, n);
            in_range &= v < n;
            if (v < n)
                count[v]++;
        }
        double e = (double)draws / (double)n, chi2 = 0;
        for (uint64_t i = 0; i < n; i++)
            chi2 += (count[i] - e) * (count[i] - e) / e;
        /* 99.99th percentile: 27.9 (6 dof), 33.7 (9 dof) */
        TU_CHECK(in_range && chi2 < (n == 7 ? 27.9 : 33.7),
                 "below(%llu): all in range, chi-square %.2f over %ld draws", (unsigned long long)n,
                 chi2, draws);
    }
    clf_rng_seed(&r, 5);
    int ok = 1;
    for (int i = 0; i < 1000; i++) {
        ok &= clf_rng_below(&r, 1) == 0;
        ok &= clf_rng_below(&r, (1ull << 63) + 1) <= (1ull << 63);
        double u = clf_rng_uniform(&r);
        ok &= u >= 0.0 && u < 1.0;
    }
    TU_CHECK(ok && clf_rng_below(&r, 0) == 0, "below(1) = 0, below(2^63 + 1) in range, "
                                              "uniform in [0, 1)");

    /* save / restore */
    clf_rng_seed(&r, tu_seed());
    for (int i = 0; i < 17; i++)
        clf_rng_next(&r);
    char s[CLF_RNG_STRING_MAX];
    clf_rng_to_string(&r, s);
    clf_rng q;
    clf_error err;
    tu_ok(clf_rng_from_string(s, &q, &err), &err, "restore");
    same = 1;
    for (int i = 0; i < 100; i++)
        same &= clf_rng_next(&r) == clf_rng_next(&q);
    TU_CHECK(same && strlen(s) == 13 + 64 + 3, "state as text (%s) restores the same sequence", s);
    static const char *bad[] = {"",
                                "xoshiro256**:",
                                "pcg:0000000000000001,0000000000000002,"
                                "0000000000000003,0000000000000004",
                                "xoshiro256**:0000000000000001,0000000000000002,"
                                "0000000000000003",
                                "xoshiro256**:0000000000000001,0000000000000002,"
                                "0000000000000003,0000000000000004x",
                                "xoshiro256**:000000000000000G,0000000000000002,"
                                "0000000000000003,0000000000000004",
                                "xoshiro256**:0000000000000000,0000000000000000,"
                                "0000000000000000,0000000000000000"};
    ok = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ok &= clf_rng_from_string(bad[i], &q, &err) == CLF_ERR_FORMAT;
    ok &= clf_rng_from_string(NULL, &q, &err) == CLF_ERR_FORMAT;
    TU_CHECK(ok, "malformed states refused (%s)", err.msg);
}

/* A dataset whose token at position i is i (vocab n). */
static clf_dataset *positions(size_t n)
{
    int32_t *ids = malloc(n * sizeof *ids);
    for (size_t i = 0; i < n; i++)
        ids[i] = (int32_t)i;
    clf_dataset *ds = NULL;
    clf_error err;
    tu_ok(clf_dataset_from_tokens(ids, n, (int32_t)n, &ds, &err), &err, "dataset");
    free(ids);
    return ds;
}

static void test_split_and_batches(void)
{
    printf("split and batches\n");
    static const size_t ns[] = {2, 10, 11, 19, 1000, 1115394};
    static const size_t train[] = {1, 9, 9, 17, 900, 1003854};
    int ok = 1;
    for (int i = 0; i < 6; i++) {
        clf_dataset *ds = positions(ns[i]);
        ok &= clf_dataset_size(ds, CLF_SPLIT_TRAIN) == train[i] &&
              clf_dataset_size(ds, CLF_SPLIT_VAL) == ns[i] - train[i];
        size_t n;
        const int32_t *v = clf_dataset_tokens(ds, CLF_SPLIT_VAL, &n);
        ok &= v[0] == (int32_t)train[i] && n == ns[i] - train[i];
        clf_dataset_destroy(ds);
    }
    TU_CHECK(ok, "train = first floor(9n/10) tokens, val = the rest (n = 2 .. 1115394)");

    /* windows are contiguous, y = x shifted, starts in [0, n - T) */
    const int T = 5, B = 4;
    clf_dataset *ds = positions(200); /* train 180, val 20 */
    int32_t x[4 * 5], y[4 * 5];
    clf_rng r;
    clf_error err;
    clf_rng_seed(&r, tu_seed());
    int seen[20] = {0};
    ok = 1;
    for (int it = 0; it < 3000; it++) {
        clf_split sp = it % 2 ? CLF_SPLIT_VAL : CLF_SPLIT_TRAIN;
        tu_ok(clf_dataset_sample_batch(ds, sp, B, T, &r, x, y, NULL, &err), &err, "sample");
        int32_t lo = sp == CLF_SPLIT_TRAIN ? 0 : 180, n = sp == CLF_SPLIT_TRAIN ? 180 : 20;
        for (int b = 0; b < B; b++) {
            int32_t s = x[b * T] - lo;
            ok &= s >= 0 && s < n - T;
            for (int t = 0; t < T; t++)
                ok &= x[b * T + t] == lo + s + t && y[b * T + t] == lo + s + t + 1;
            if (sp == CLF_SPLIT_VAL && s >= 0 && s < 20)
                seen[s]++;
        }
    }
    int cover = 1;
    for (int s = 0; s < 20; s++)
        cover &= (s < 20 - T) ? seen[s] > 0 : seen[s] == 0;
    TU_CHECK(ok, "every row a contiguous window of its split, y = x shifted by one");
    TU_CHECK(cover, "val starts cover all of [0, 15) and never reach n - T = 15");

    /* resume: save after 2 batches, restore, continue identically */
    clf_rng_seed(&r, 1337);
    int32_t all[5][4 * 5], again[4 * 5], ya[4 * 5];
    char saved[CLF_RNG_STRING_MAX];
    for (int k = 0; k < 5; k++) {
        if (k == 2)
            clf_rng_to_string(&r, saved);
        tu_ok(clf_dataset_sample_batch(ds, CLF_SPLIT_TRAIN, B, T, &r, all[k], y, NULL, &err), &err,
              "sample");
    }
    clf_rng q;
    tu_ok(clf_rng_from_string(saved, &q, &err), &err, "restore");
    ok = 1;
    for (int k = 2; k < 5; k++) {
        tu_ok(clf_dataset_sample_batch(ds, CLF_SPLIT_TRAIN, B, T, &q, again, ya, NULL, &err), &err,
              "sample");
        ok &= memcmp(again, all[k], sizeof again) == 0;
    }
    TU_CHECK(ok, "generator saved after batch 2 and restored: batches 3-5 bit-identical");
    clf_rng_seed(&r, 1337);
    tu_ok(clf_dataset_sample_batch(ds, CLF_SPLIT_TRAIN, B, T, &r, again, ya, NULL, &err), &err,
          "s");
    TU_CHECK(memcmp(again, all[0], sizeof again) == 0, "same seed, same first batch");

    clf_status st = clf_dataset_sample_batch(ds, CLF_SPLIT_VAL, 1, 20, &r, x, y, NULL, &err);
    TU_CHECK(st == CLF_ERR_ARG && strstr(err.msg, "val split holds 20 tokens"),
             "T = 20 on a 20-token split refused: %s", err.msg);
    st = clf_dataset_sample_batch(ds, CLF_SPLIT_VAL, 1, 19, &r, x, y, NULL, &err);
    TU_CHECK(st == CLF_OK && x[0] == 180 && y[18] == 199, "T = 19 on 20 tokens: the one window");
    clf_dataset_destroy(ds);
    clf_dataset *none = NULL;
    st = clf_dataset_from_tokens((int32_t[]){0}, 1, 1, &none, &err);
    TU_CHECK(st == CLF_ERR_ARG && none == NULL, "one token is not a dataset");
    st = clf_dataset_from_tokens((int32_t[]){0, 5}, 2, 5, &none, &err);
    TU_CHECK(st == CLF_ERR_ARG && strstr(err.msg, "id 5"), "ids checked against the vocab");
}

/* val split of exactly nval tokens: a dataset of 10 * nval tokens. */
static void check_windows(size_t nval, int T, size_t want_count, size_t want_last_len)
{
    clf_dataset *ds = positions(10 * nval);
    size_t n = clf_dataset_size(ds, CLF_SPLIT_VAL);
    int32_t base = (int32_t)(10 * nval - nval);
    size_t count = clf_dataset_eval_windows(ds, CLF_SPLIT_VAL, T);
    int32_t *x = malloc((size_t)T * sizeof *x), *y = malloc((size_t)T * sizeof *y);
    int32_t *xi = malloc((size_t)T * sizeof *x), *yi = malloc((size_t)T * sizeof *y);
    int *targets = calloc(n, sizeof *targets);
    size_t total = 0, len = 0, ilen = 0, last = 0, iter_count = 0;
    int ok = n == nval && count == want_count;
    clf_error err;
    clf_eval_iter it;
    clf_dataset_eval_begin(ds, CLF_SPLIT_VAL, T, &it);
    for (size_t w = 0; w < count && ok; w++) {
        ok = clf_dataset_eval_window(ds, CLF_SPLIT_VAL, T, w, x, y, NULL, &len, &err) == CLF_OK &&
             len >= 1 && len <= (size_t)T && (len == (size_t)T || w == count - 1);
        for (size_t t = 0; ok && t < (size_t)T; t++) {
            if (t < len) {
                ok = x[t] == base + (int32_t)(w * (size_t)T + t) && y[t] == x[t] + 1;
                targets[y[t] - base]++;
            } else {
                ok = x[t] == 0 && y[t] == -1;
            }
        }
        total += len;
        last = len;
        ok = ok && clf_dataset_eval_next(&it, xi, yi, &ilen) && ilen == len &&
             memcmp(xi, x, (size_t)T * sizeof *x) == 0 && memcmp(yi, y, (size_t)T * sizeof *y) == 0;
        iter_count++;
    }
    ok = ok && !clf_dataset_eval_next(&it, xi, yi, &ilen) && iter_count == count;
    ok = ok && total == n - 1 && last == want_last_len && targets[0] == 0;
    for (size_t i = 1; ok && i < n; i++)
        ok = targets[i] == 1;
    ok = ok && clf_dataset_eval_window(ds, CLF_SPLIT_VAL, T, count, x, y, NULL, &len, &err) ==
                   CLF_ERR_ARG;
    TU_CHECK(ok,
             "val of %zu tokens, T = %d: %zu windows, last has %zu targets, every token but "
             "the first a target once, padding x = 0 / y = -1, iterator agrees",
             nval, T, want_count, want_last_len);
    free(x);
    free(y);
    free(xi);
    free(yi);
    free(targets);
    clf_dataset_destroy(ds);
}

static void test_eval_windows(void)
{
    printf("evaluation windows\n");
    check_windows(10, 4, 3, 1);          /* 9 targets: 4 + 4 + 1 */
    check_windows(9, 4, 2, 4);           /* 8 targets: 4 + 4, no partial window */
    check_windows(2, 4, 1, 1);           /* 1 target */
    check_windows(5, 64, 1, 4);          /* T > n: one window of 4 */
    check_windows(101, 7, 15, 2);        /* 100 targets: 14 * 7 + 2 */
    check_windows(111540, 64, 1743, 51); /* tiny Shakespeare val: 111539 = 1742 * 64 + 51 */
    clf_dataset *ds = positions(19);     /* val of 2 tokens */
    TU_CHECK(clf_dataset_eval_windows(ds, CLF_SPLIT_VAL, 0) == 0, "T = 0: no windows");
    clf_dataset_destroy(ds);
}

static void test_loading(void)
{
    printf("loading\n");
    clf_error err;
    clf_dataset *ds = NULL;
    clf_tokenizer *byte = NULL;
    tu_ok(clf_tokenizer_create(CLF_TOKENIZER_BYTE, NULL, 0, &byte, &err), &err, "byte");
    char dir[] = "/tmp/clf_test_ds_XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        exit(1);
    }
    char missing[256], empty[256], uni[256];
    snprintf(missing, sizeof missing, "%s/missing.txt", dir);
    snprintf(empty, sizeof empty, "%s/empty.txt", dir);
    snprintf(uni, sizeof uni, "%s/umlaut.txt", dir);
    clf_status st = clf_dataset_load(missing, byte, &ds, &err);
    TU_CHECK(st == CLF_ERR_IO && ds == NULL && strstr(err.msg, missing), "missing file: %s",
             err.msg);
    tu_ok(clf_file_write_atomic(empty, "", 0, &err), &err, "write");
    st = clf_dataset_load(empty, byte, &ds, &err);
    TU_CHECK(st == CLF_ERR_FORMAT && ds == NULL && strstr(err.msg, empty) &&
                 strstr(err.msg, "empty"),
             "empty file: %s", err.msg);

    const char *text = "Sch\xc3\xb6ne Gr\xc3\xbc\xc3\x9f"
                       "e aus M\xc3\xbcnchen und K\xc3\xb6ln.\n";
    tu_ok(clf_file_write_atomic(uni, text, strlen(text), &err), &err, "write");
    char *t = NULL;
    size_t tl = 0;
    tu_ok(clf_dataset_read_text(uni, &t, &tl, &err), &err, "read");
    clf_tokenizer *ch = NULL;
    tu_ok(clf_tokenizer_create(CLF_TOKENIZER_CHAR, t, tl, &ch, &err), &err, "char");
    st = clf_dataset_load(uni, ch, &ds, &err);
    size_t ncp = 0;
    for (size_t i = 0; i < tl; i++)
        ncp += ((unsigned char)t[i] & 0xC0) != 0x80;
    TU_CHECK(st == CLF_OK &&
                 clf_dataset_size(ds, CLF_SPLIT_TRAIN) + clf_dataset_size(ds, CLF_SPLIT_VAL) ==
                     ncp &&
                 clf_dataset_vocab(ds) == clf_tokenizer_vocab_size(ch),
             "UTF-8 file with umlauts: %zu characters -> %zu tokens", ncp, ncp);
    clf_dataset_destroy(ds);
    ds = NULL;
    clf_tokenizer *ascii = NULL;
    tu_ok(clf_tokenizer_create(CLF_TOKENIZER_CHAR, "abc", 3, &ascii, &err), &err, "char");
    st = clf_dataset_load(uni, ascii, &ds, &err);
    TU_CHECK(st == CLF_ERR_ARG && ds == NULL && strstr(err.msg, uni) && strstr(err.msg, "U+0053"),
             "character outside the vocabulary: %s", err.msg);
    /* the same text gzip-compressed reads back the same; cut in half, it is refused */
    char gz[256];
    snprintf(gz, sizeof gz, "%s/umlaut.txt.gz", dir);
    gzFile g = gzopen(gz, "wb");
    for (int i = 0; i < 200; i++)
        gzwrite(g, text, (unsigned)strlen(text));
    gzclose(g);
    char *zt = NULL;
    size_t zl = 0;
    st = clf_dataset_read_text(gz, &zt, &zl, &err);
    int same = st == CLF_OK && zl == 200 * tl;
    for (int i = 0; same && i < 200; i++)
        same = memcmp(zt + (size_t)i * tl, t, tl) == 0;
    TU_CHECK(same, "a gzip-compressed text reads as the plain text: %s",
             st == CLF_OK ? "ok" : err.msg);
    free(zt);
    zt = NULL;
    FILE *fz = fopen(gz, "rb");
    char raw[4096];
    size_t nraw = fz ? fread(raw, 1, sizeof raw, fz) : 0;
    if (fz)
        fclose(fz);
    tu_ok(clf_file_write_atomic(gz, raw, nraw / 2, &err), &err, "truncate gz");
    st = clf_dataset_read_text(gz, &zt, &zl, &err);
    TU_CHECK(st == CLF_ERR_FORMAT && zt == NULL && strstr(err.msg, gz),
             "a truncated gzip file is refused naming it: %s", err.msg);
    unlink(gz);
    free(t);
    clf_tokenizer_destroy(ascii);
    clf_tokenizer_destroy(ch);
    unlink(empty);
    unlink(uni);
    rmdir(dir);

    /* tiny Shakespeare: nanoGPT's split */
    const char *src = getenv("CLF_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/data/tinyshakespeare.txt", src ? src : ".");
    tu_ok(clf_dataset_read_text(path, &t, &tl, &err), &err, "corpus");
    tu_ok(clf_tokenizer_create(CLF_TOKENIZER_CHAR, t, tl, &ch, &err), &err, "char");
    tu_ok(clf_dataset_load(path, ch, &ds, &err), &err, "load");
    size_t nv;
    const int32_t *val = clf_dataset_tokens(ds, CLF_SPLIT_VAL, &nv);
    char *head = NULL;
    tu_ok(clf_tokenizer_decode(ch, val, 40, &head, NULL, &err), &err, "decode");
    TU_CHECK(clf_dataset_size(ds, CLF_SPLIT_TRAIN) == 1003854 && nv == 111540 &&
                 clf_dataset_vocab(ds) == 65 && memcmp(head, t + 1003854, 40) == 0,
             "tiny Shakespeare: 1,003,854 train / 111,540 val tokens (nanoGPT's), vocab 65; "
             "val starts at character 1,003,854");
    TU_CHECK(clf_dataset_eval_windows(ds, CLF_SPLIT_VAL, 64) == 1743,
             "1743 evaluation windows of 64 over the val split");
    free(head);
    free(t);
    clf_dataset_destroy(ds);
    clf_dataset_destroy(NULL);
    clf_tokenizer_destroy(ch);
    clf_tokenizer_destroy(byte);
}

/* Documents (train.packing): the cut after blank lines (runs of line breaks
 * with two newlines or more, "\r\n" included), each document's tokens, the
 * ids in windows, and targets into the next document ignored. */
static void test_documents(void)
{
    printf("documents\n");
    clf_error err;
    const char *text = "ab\n\ncd\r\n\r\n\nef\ng\n\nh\nij\n\n\nklmnopqrstuvwxyz0123456789";
    const size_t len = strlen(text);
    clf_tokenizer *ch = NULL;
    clf_dataset *ds = NULL, *flat = NULL;
    tu_ok(clf_tokenizer_create(CLF_TOKENIZER_CHAR, text, len, &ch, &err), &err, "char");
    tu_ok(clf_dataset_from_documents(text, len, "docs", ch, &ds, &err), &err, "documents");
    tu_ok(clf_dataset_from_text(text, len, "flat", ch, &flat, &err), &err, "flat");
    /* the documents' first bytes: "ab", "cd", "ef\ng", "h\nij", "klm..." */
    const size_t starts[] = {0, 4, 11, 17, 24};
    size_t n = 0, nf = 0, bad = 0;
    const int32_t *ids = clf_dataset_tokens(ds, CLF_SPLIT_TRAIN, &n);
    const int32_t *fids = clf_dataset_tokens(flat, CLF_SPLIT_TRAIN, &nf);
    const int32_t *dd = clf_dataset_documents(ds, CLF_SPLIT_TRAIN);
    TU_CHECK(dd != NULL && clf_dataset_documents(flat, CLF_SPLIT_TRAIN) == NULL && n == nf &&
                 clf_dataset_size(ds, CLF_SPLIT_VAL) == clf_dataset_size(flat, CLF_SPLIT_VAL),
             "documents: the same tokens and split as one stream (%zu and %zu train tokens)", n,
             nf);
    for (size_t i = 0; i < n && dd != NULL; i++) {
        int32_t want = 0;
        for (size_t k = 1; k < sizeof starts / sizeof starts[0]; k++)
            want += i >= starts[k];
        bad += dd[i] != want || ids[i] != fids[i];
    }
    const int32_t *vd = clf_dataset_documents(ds, CLF_SPLIT_VAL);
    TU_CHECK(bad == 0 && vd != NULL && vd[0] == 4 &&
                 clf_dataset_document_count(ds, CLF_SPLIT_TRAIN) == 5,
             "documents: cut after each blank line, the line breaks with the document before "
             "(%zu tokens wrong)",
             bad);

    /* windows: the same draws as one stream, the target leaving each
     * document ignored, the ids given */
    enum { B = 6, T = 9 };
    int32_t x[B * T], y[B * T], doc[B * T], fx[B * T], fy[B * T];
    clf_rng r, q;
    clf_rng_seed(&r, 5);
    clf_rng_seed(&q, 5);
    tu_ok(clf_dataset_sample_batch(ds, CLF_SPLIT_TRAIN, B, T, &r, x, y, doc, &err), &err, "s");
    tu_ok(clf_dataset_sample_batch(flat, CLF_SPLIT_TRAIN, B, T, &q, fx, fy, NULL, &err), &err, "s");
    size_t wrong = 0, ignored = 0;
    for (int b = 0; b < B; b++) {
        size_t i0 = 0; /* the window's start: where its tokens and ids line up */
        for (; i0 + T < n; i0++)
            if (memcmp(ids + i0, fx + b * T, T * sizeof *x) == 0 &&
                memcmp(dd + i0, doc + b * T, T * sizeof *doc) == 0)
                break;
        for (int t = 0; t < T; t++) {
            const int cross = dd[i0 + (size_t)t + 1] != dd[i0 + (size_t)t];
            wrong += x[b * T + t] != fx[b * T + t] ||
                     y[b * T + t] != (cross ? CLF_DATASET_IGNORE : fy[b * T + t]) ||
                     doc[b * T + t] != dd[i0 + (size_t)t];
            ignored += cross;
        }
    }
    TU_CHECK(wrong == 0 && ignored > 0,
             "document windows: the stream's draws, %zu targets into the next document ignored, "
             "the ids given (%zu wrong)",
             ignored, wrong);
    /* an evaluation window's padding is a document of its own */
    size_t W = clf_dataset_eval_windows(ds, CLF_SPLIT_TRAIN, T), l = 0;
    tu_ok(clf_dataset_eval_window(ds, CLF_SPLIT_TRAIN, T, W - 1, x, y, doc, &l, &err), &err, "w");
    int pad_ok = l < T;
    for (size_t t = l; t < T; t++)
        pad_ok &= doc[t] == doc[l - 1] + 1 && y[t] == CLF_DATASET_IGNORE;
    TU_CHECK(pad_ok,
             "the last evaluation window's %zu padding positions: a document past the "
             "last, ignored",
             T - l);
    clf_dataset_destroy(ds);
    clf_dataset_destroy(flat);
    clf_tokenizer_destroy(ch);
}

int main(void)
{
    tu_seed();
    test_rng();
    test_split_and_batches();
    test_eval_windows();
    test_loading();
    test_documents();
    return tu_finish();
}
