/*
 * test_seqdata.c - sequence datasets and padding-aware batching.
 *
 * Tiny handmade files (plain, gzip, CRLF + BOM) with the byte tokenizer, so
 * that every token is a known byte: exact row contents with their specials,
 * exact truncation statistics, TSV column detection and file:line errors,
 * mismatched parallel files. Batching: every row of every batch checked
 * against the dataset (tokens, pad, masks, tgt_in/tgt_out/-1, labels,
 * indices), every example exactly once per epoch in each order mode with a
 * sentence count and with a token budget (budget and limits respected),
 * determinism from the seed, resume from a saved state (also across an
 * epoch boundary) giving the identical stream, and bucketing against random
 * batching on synthetic lengths (and on Multi30k with the char tokenizer
 * when ../shared/data/multi30k is present: the measured padding
 * efficiencies are printed). Everything here is exact (integers); the one
 * inequality is that bucketed batches pad less than random ones. Also the
 * line splitter and TSV column finder (lines.h) and the run tokenizer built
 * from sentence files (clf_seq_tokenizer_build).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "model/data/lines.h"
#include "model/data/seqdata.h"
#include "model/io/fileio.h"
#include "tests/test_util.h"

static char tmpdir[256];

static const char *tmp_path(const char *name)
{
    static char buf[8][640];
    static int k = 0;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%.255s/%.255s", tmpdir, name);
    return buf[k];
}

/* files written, removed at the end */
static char written[64][64];
static int n_written;

static void remember(const char *name)
{
    for (int i = 0; i < n_written; i++)
        if (strcmp(written[i], name) == 0)
            return;
    if (n_written < 64)
        snprintf(written[n_written++], sizeof written[0], "%s", name);
}

static void write_file(const char *name, const char *text)
{
    remember(name);
    FILE *f = fopen(tmp_path(name), "wb");
    if (!f || fwrite(text, 1, strlen(text), f) != strlen(text)) {
        fprintf(stderr, "cannot write %s\n", tmp_path(name));
        exit(1);
    }
    fclose(f);
}

static void write_gz(const char *name, const char *text)
{
    remember(name);
    gzFile g = gzopen(tmp_path(name), "wb");
    if (!g || gzwrite(g, text, (unsigned)strlen(text)) != (int)strlen(text)) {
        fprintf(stderr, "cannot write %s\n", tmp_path(name));
        exit(1);
    }
    gzclose(g);
}

/* A byte tokenizer with pad, bos, eos, cls (ids 256..259). */
static clf_tokenizer *byte_tok(int with_cls)
{
    clf_tokenizer *t;
    clf_error err;
    int32_t id;
    tu_ok(clf_tokenizer_create(CLF_TOKENIZER_BYTE, NULL, 0, &t, &err), &err, "byte tokenizer");
    tu_ok(clf_tokenizer_add_special(t, CLF_SPECIAL_PAD, &id, &err), &err, "pad");
    tu_ok(clf_tokenizer_add_special(t, CLF_SPECIAL_BOS, &id, &err), &err, "bos");
    tu_ok(clf_tokenizer_add_special(t, CLF_SPECIAL_EOS, &id, &err), &err, "eos");
    if (with_cls)
        tu_ok(clf_tokenizer_add_special(t, CLF_SPECIAL_CLS, &id, &err), &err, "cls");
    return t;
}

enum { PAD = 256, BOS = 257, EOS = 258, CLS = 259 };

/* Row == the bytes of s followed (or preceded) by a special. */
static int row_is(const int32_t *row, int len, const char *s, int32_t first, int32_t last)
{
    int k = 0, n = (int)strlen(s);
    if (len != n + (first >= 0) + (last >= 0))
        return 0;
    if (first >= 0 && row[k++] != first)
        return 0;
    for (int i = 0; i < n; i++)
        if (row[k++] != (unsigned char)s[i])
            return 0;
    return last < 0 || row[k] == last;
}

static void test_pairs_files(void)
{
    clf_tokenizer *tok = byte_tok(0);
    clf_seq_options o;
    clf_seq_options_default(&o, CLF_MODEL_ENCODER_DECODER, 64);
    const char *src_txt = "ab\ncde\n\nf\xc3\xa4\n";
    const char *tgt_txt = "x\nyz\nw\nuv"; /* no final newline */
    write_file("p.de", src_txt);
    write_file("p.en", tgt_txt);
    write_gz("p.de.gz", src_txt);
    write_gz("p.en.gz", tgt_txt);
    write_file("crlf.de", "\xef\xbb\xbf"
                          "ab\r\ncde\r\n\r\nf\xc3\xa4\r\n");
    const char *names[][2] = {{"p.de", "p.en"}, {"p.de.gz", "p.en.gz"}, {"crlf.de", "p.en.gz"}};
    for (int v = 0; v < 3; v++) {
        clf_seqdata *ds;
        clf_error err;
        char a[640], b[640];
        snprintf(a, sizeof a, "%s", tmp_path(names[v][0]));
        snprintf(b, sizeof b, "%s", tmp_path(names[v][1]));
        tu_ok(clf_seqdata_load_pairs(a, b, tok, tok, &o, &ds, &err), &err, "load pairs");
        TU_CHECK(clf_seqdata_size(ds) == 4, "%s: %zu examples, want 4", names[v][0],
                 clf_seqdata_size(ds));
        static const char *const want_src[] = {"ab", "cde", "", "f\xc3\xa4"};
        static const char *const want_tgt[] = {"x", "yz", "w", "uv"};
        for (size_t i = 0; i < 4; i++) {
            const int32_t *s, *t;
            int sl, tl;
            int32_t label;
            clf_seqdata_example(ds, i, &s, &sl, &t, &tl, &label);
            TU_CHECK(row_is(s, sl, want_src[i], -1, EOS), "%s: source %zu is x + [eos]",
                     names[v][0], i);
            TU_CHECK(row_is(t, tl, want_tgt[i], -1, -1), "%s: target %zu is y", names[v][0], i);
            TU_CHECK(label == -1 && clf_seqdata_line(ds, i) == (int64_t)i + 1, "label/line %zu", i);
        }
        const clf_seqdata_stats *st = clf_seqdata_stats_get(ds);
        TU_CHECK(st->examples == 4 && st->src.tokens == 2 + 3 + 0 + 3 + 4 &&
                     st->tgt.tokens == 1 + 2 + 1 + 2 + 4 && st->src.truncated == 0 &&
                     st->src.longest == 4 && st->src.shortest == 1 && st->tgt.longest == 3,
                 "%s: stats src %lld tokens (want 12), tgt %lld (want 10), longest %d", names[v][0],
                 (long long)st->src.tokens, (long long)st->tgt.tokens, st->src.longest);
        clf_seqdata_destroy(ds);
    }
    /* mismatched line counts name both files and counts */
    {
        write_file("short.en", "x\nyz\nw\n");
        clf_seqdata *ds = NULL;
        clf_error err;
        char a[640], b[640];
        snprintf(a, sizeof a, "%s", tmp_path("p.de.gz"));
        snprintf(b, sizeof b, "%s", tmp_path("short.en"));
        clf_status st = clf_seqdata_load_pairs(a, b, tok, tok, &o, &ds, &err);
        TU_CHECK(st == CLF_ERR_FORMAT && strstr(err.msg, a) && strstr(err.msg, b) &&
                     strstr(err.msg, "has 4 lines") && strstr(err.msg, "has 3"),
                 "mismatch error: %s", st ? err.msg : "(none)");
        TU_CHECK(ds == NULL, "no dataset on error");
    }
    /* missing file; truncated gzip; a decoder kind; a tokenizer without bos */
    {
        clf_seqdata *ds = NULL;
        clf_error err;
        char a[640], b[640];
        snprintf(a, sizeof a, "%s", tmp_path("nonexistent.de"));
        snprintf(b, sizeof b, "%s", tmp_path("p.en"));
        clf_status st = clf_seqdata_load_pairs(a, b, tok, tok, &o, &ds, &err);
        TU_CHECK(st == CLF_ERR_IO && strstr(err.msg, "nonexistent.de"), "missing file: %s",
                 st ? err.msg : "(none)");

        /* cut a gzip file in half */
        char *full = NULL;
        size_t n = 0;
        FILE *f = fopen(tmp_path("p.en.gz"), "rb");
        full = malloc(4096);
        n = fread(full, 1, 4096, f);
        fclose(f);
        remember("cut.gz");
        f = fopen(tmp_path("cut.gz"), "wb");
        fwrite(full, 1, n / 2, f);
        fclose(f);
        free(full);
        char *data = NULL;
        size_t len = 0;
        st = clf_file_read_text(tmp_path("cut.gz"), CLF_SEQDATA_MAX_BYTES, &data, &len, &err);
        TU_CHECK(st == CLF_ERR_FORMAT && strstr(err.msg, "cut.gz"), "truncated gzip: %s",
                 st ? err.msg : "(accepted)");
        free(data);

        clf_seq_options od = o;
        od.kind = CLF_MODEL_DECODER;
        snprintf(a, sizeof a, "%s", tmp_path("p.de"));
        st = clf_seqdata_load_pairs(a, b, tok, tok, &od, &ds, &err);
        TU_CHECK(st == CLF_ERR_ARG, "decoder kind must be refused");

        clf_tokenizer *plain;
        tu_ok(clf_tokenizer_create(CLF_TOKENIZER_BYTE, NULL, 0, &plain, &err), &err, "tok");
        int32_t id;
        tu_ok(clf_tokenizer_add_special(plain, CLF_SPECIAL_PAD, &id, &err), &err, "pad");
        tu_ok(clf_tokenizer_add_special(plain, CLF_SPECIAL_EOS, &id, &err), &err, "eos");
        st = clf_seqdata_load_pairs(a, b, plain, plain, &o, &ds, &err);
        TU_CHECK(st == CLF_ERR_ARG && strstr(err.msg, "'bos'"), "missing bos: %s",
                 st ? err.msg : "(accepted)");
        clf_tokenizer_destroy(plain);
    }
    clf_tokenizer_destroy(tok);
}

static void test_truncation(void)
{
    clf_tokenizer *tok = byte_tok(1);
    clf_seq_options o;
    clf_seq_options_default(&o, CLF_MODEL_ENCODER_DECODER, 4);
    o.max_tgt = 3;
    write_file("t.src", "abcdef\nab\nabc\n");
    write_file("t.tgt", "uvwxyz\nuv\nu\n");
    clf_seqdata *ds;
    clf_error err;
    char a[640], b[640];
    snprintf(a, sizeof a, "%s", tmp_path("t.src"));
    snprintf(b, sizeof b, "%s", tmp_path("t.tgt"));
    tu_ok(clf_seqdata_load_pairs(a, b, tok, tok, &o, &ds, &err), &err, "load");
    const int32_t *s, *t;
    int sl, tl;
    clf_seqdata_example(ds, 0, &s, &sl, &t, &tl, NULL);
    TU_CHECK(row_is(s, sl, "abc", -1, EOS), "truncated source keeps 3 tokens + eos");
    TU_CHECK(row_is(t, tl, "uv", -1, -1), "truncated target keeps 2 tokens (T = 3)");
    clf_seqdata_example(ds, 2, &s, &sl, &t, &tl, NULL);
    TU_CHECK(row_is(s, sl, "abc", -1, EOS), "a source of exactly max_src is kept whole");
    const clf_seqdata_stats *st = clf_seqdata_stats_get(ds);
    /* sources 7, 3, 4 long with eos; max 4: one cut, 3 dropped.
     * targets 7, 3, 2 with the shift; max 3: one cut, 4 dropped. */
    TU_CHECK(st->src.truncated == 1 && st->src.dropped == 3 && st->src.longest == 7 &&
                 st->src.longest_kept == 4,
             "source truncation stats: %lld cut, %lld dropped, longest %d/%d",
             (long long)st->src.truncated, (long long)st->src.dropped, st->src.longest,
             st->src.longest_kept);
    TU_CHECK(st->tgt.truncated == 1 && st->tgt.dropped == 4 && st->tgt.longest == 7 &&
                 st->tgt.longest_kept == 3,
             "target truncation stats: %lld cut, %lld dropped", (long long)st->tgt.truncated,
             (long long)st->tgt.dropped);
    char line[512];
    clf_seqdata_stats_format(st, line, sizeof line);
    printf("stats line: %s\n", line);
    TU_CHECK(strstr(line, "1 truncated to 4 (3 tokens dropped, longest was 7)") != NULL,
             "stats line reports the truncation: %s", line);
    clf_seqdata_destroy(ds);

    /* classifier: [cls] + first max_src - 1 tokens */
    clf_seq_options_default(&o, CLF_MODEL_ENCODER, 3);
    tu_ok(clf_seqdata_from_text("hello\nhi\n", 9, "stdin", tok, &o, &ds, &err), &err, "text");
    clf_seqdata_example(ds, 0, &s, &sl, NULL, NULL, NULL);
    TU_CHECK(row_is(s, sl, "he", CLS, -1), "classifier row is [cls] h e");
    st = clf_seqdata_stats_get(ds);
    TU_CHECK(st->src.truncated == 1 && st->src.dropped == 3 && !clf_seqdata_has_targets(ds),
             "classifier truncation: %lld cut, %lld dropped", (long long)st->src.truncated,
             (long long)st->src.dropped);
    clf_seqdata_destroy(ds);
    clf_tokenizer_destroy(tok);
}

static void test_tsv(void)
{
    clf_tokenizer *tok = byte_tok(1);
    clf_seq_options o;
    clf_seq_options_default(&o, CLF_MODEL_ENCODER, 64);
    clf_seqdata *ds;
    clf_error err;
    /* sentence, label in either order; "content" accepted; extra columns */
    write_gz("a.tsv.gz", "label\tsentence\n0\tbad film\n1\tgood\n2\tok .\n");
    write_file("b.tsv", "id\tcontent\tlabel\n7\tnice\t1\n8\tmeh\t0\n");
    tu_ok(clf_seqdata_load_tsv(tmp_path("a.tsv.gz"), tok, &o, &ds, &err), &err, "a.tsv.gz");
    const int32_t *s;
    int sl;
    int32_t label;
    TU_CHECK(clf_seqdata_size(ds) == 3 && clf_seqdata_stats_get(ds)->labels == 3, "a.tsv: 3 rows");
    clf_seqdata_example(ds, 0, &s, &sl, NULL, NULL, &label);
    TU_CHECK(row_is(s, sl, "bad film", CLS, -1) && label == 0, "a.tsv row 0");
    clf_seqdata_example(ds, 2, &s, &sl, NULL, NULL, &label);
    TU_CHECK(row_is(s, sl, "ok .", CLS, -1) && label == 2 && clf_seqdata_line(ds, 2) == 4,
             "a.tsv row 2 (line 4)");
    clf_seqdata_destroy(ds);
    tu_ok(clf_seqdata_load_tsv(tmp_path("b.tsv"), tok, &o, &ds, &err), &err, "b.tsv");
    clf_seqdata_example(ds, 1, &s, &sl, NULL, NULL, &label);
    TU_CHECK(clf_seqdata_size(ds) == 2 && row_is(s, sl, "meh", CLS, -1) && label == 0,
             "b.tsv: content column found");
    clf_seqdata_destroy(ds);
    /* configured names */
    write_file("c.tsv", "y\tx\n1\tfoo\n");
    clf_seq_options oc = o;
    snprintf(oc.text_column, sizeof oc.text_column, "x");
    snprintf(oc.label_column, sizeof oc.label_column, "y");
    tu_ok(clf_seqdata_load_tsv(tmp_path("c.tsv"), tok, &oc, &ds, &err), &err, "c.tsv");
    clf_seqdata_example(ds, 0, &s, &sl, NULL, NULL, &label);
    TU_CHECK(row_is(s, sl, "foo", CLS, -1) && label == 1, "c.tsv configured columns");
    clf_seqdata_destroy(ds);
    TU_CHECK(clf_seqdata_load_tsv(tmp_path("c.tsv"), tok, &o, &ds, &err) == CLF_ERR_FORMAT &&
                 strstr(err.msg, "c.tsv:1:") && strstr(err.msg, "'y', 'x'"),
             "missing columns name the header: %s", err.msg);

    /* errors with file:line */
    struct {
        const char *name, *text, *want;
    } bad[] = {
        {"bad1.tsv", "label\tsentence\n1\tfine\npos\tnot a number\n", "bad1.tsv:3: label 'pos'"},
        {"bad2.tsv", "label\tsentence\n1\tfine\n0\n", "bad2.tsv:3: 1 tab-separated columns"},
        {"bad3.tsv", "label\tsentence\n1\tfine\n-1\tneg\n", "bad3.tsv:3: label '-1'"},
        {"bad4.tsv", "label\tsentence\n1\tfine\n\n0\tx\n", "bad4.tsv:3: empty line"},
        {"bad5.tsv", "label\tsentence\n", "has a header but no examples"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(bad[i].name, bad[i].text);
        clf_status st = clf_seqdata_load_tsv(tmp_path(bad[i].name), tok, &o, &ds, &err);
        TU_CHECK(st == CLF_ERR_FORMAT && strstr(err.msg, bad[i].want), "%s: %s (want \"%s\")",
                 bad[i].name, st ? err.msg : "(accepted)", bad[i].want);
    }
    /* invalid UTF-8 would be the tokenizer's error; here: no cls token */
    clf_tokenizer *nocls = byte_tok(0);
    TU_CHECK(clf_seqdata_load_tsv(tmp_path("b.tsv"), nocls, &o, &ds, &err) == CLF_ERR_ARG &&
                 strstr(err.msg, "'cls'"),
             "classifier needs cls: %s", err.msg);
    clf_tokenizer_destroy(nocls);
    clf_tokenizer_destroy(tok);
}

/* ---- batching ---------------------------------------------------------------- */

/* Synthetic parallel text: n lines, lengths from a seeded generator. */
static char *synth(size_t n, uint64_t seed, int lo, int hi)
{
    tu_rng r = tu_rng_new(seed);
    size_t cap = n * (size_t)(hi + 2) + 1, k = 0;
    char *t = malloc(cap);
    for (size_t i = 0; i < n; i++) {
        int len = lo + (int)(tu_u32(&r) % (uint32_t)(hi - lo + 1));
        for (int j = 0; j < len; j++)
            t[k++] = (char)('a' + tu_u32(&r) % 26);
        t[k++] = '\n';
    }
    t[k] = '\0';
    return t;
}

/* Check one batch against the dataset; returns 1 if it is right. */
static int check_batch(const clf_seqdata *ds, const clf_seq_batch *b, const clf_seq_batching *bo,
                       const clf_seq_limits *lim)
{
    int ok = 1, max_s = 0, max_t = 0;
    int64_t src_tokens = 0, tgt_tokens = 0;
    for (int r = 0; r < b->B; r++) {
        const int32_t *s, *y;
        int sl, yl;
        int32_t label;
        clf_seqdata_example(ds, (size_t)b->index[r], &s, &sl, &y, &yl, &label);
        max_s = sl > max_s ? sl : max_s;
        max_t = (y ? yl + 1 : 0) > max_t ? (y ? yl + 1 : 0) : max_t;
        for (int j = 0; j < b->S; j++) {
            int32_t want = j < sl ? s[j] : PAD;
            ok &= b->src[r * b->S + j] == want && b->src_keep[r * b->S + j] == (j < sl);
        }
        src_tokens += sl;
        ok &= b->labels[r] == label;
        if (y) {
            for (int j = 0; j < b->T; j++) {
                int32_t in = j == 0 ? BOS : j <= yl ? y[j - 1] : PAD;
                int32_t out = j < yl ? y[j] : j == yl ? EOS : -1;
                ok &= b->tgt_in[r * b->T + j] == in && b->tgt_out[r * b->T + j] == out &&
                      b->tgt_keep[r * b->T + j] == (j <= yl);
            }
            tgt_tokens += yl + 1;
        }
    }
    int pm = bo->pad_multiple;
    int want_S = (max_s + pm - 1) / pm * pm, want_T = (max_t + pm - 1) / pm * pm;
    ok &= b->S == want_S && b->T == want_T;
    ok &= b->src_tokens == src_tokens && b->tgt_tokens == tgt_tokens;
    ok &= b->B >= 1 && b->B <= lim->max_B && b->S <= lim->max_S && b->T <= lim->max_T;
    int64_t B = b->B, S = b->S, T = b->T;
    ok &= B * S <= lim->max_src_tokens && B * T <= lim->max_tgt_tokens;
    if (bo->batch > 0)
        ok &= b->B <= bo->batch;
    if (bo->batch_tokens > 0) {
        int L = b->S > b->T ? b->S : b->T;
        ok &= b->B == 1 || (int64_t)b->B * L <= bo->batch_tokens;
    }
    return ok;
}

/* Run one epoch; check batches; count appearances; return the number of
 * batches and a hash of the stream. */
static size_t run_epoch(const clf_seqdata *ds, clf_seq_loader *L, clf_seq_batch *b,
                        const clf_seq_batching *bo, int *seen, uint64_t *hash, int *bad)
{
    clf_seq_limits lim;
    clf_seq_loader_limits(L, &lim);
    size_t nb = 0;
    while (clf_seq_loader_next(L, b)) {
        if (!check_batch(ds, b, bo, &lim))
            (*bad)++;
        for (int r = 0; r < b->B; r++) {
            seen[b->index[r]]++;
            *hash = (*hash ^ (uint64_t)b->index[r]) * 0x100000001B3ull;
        }
        *hash = (*hash ^ 0xFFFF) * 0x100000001B3ull;
        nb++;
    }
    return nb;
}

/* Every batching mode over the pairs and the classifier's sentences: each
 * batch's contents, padding and limits, every example once an epoch, and
 * epochs that differ (shuffled orders) or repeat. */
static void batching_modes(const clf_seqdata *ds, const clf_seqdata *cls_ds, size_t N)
{
    clf_error err;
    int *seen = calloc(N, sizeof *seen);
    struct {
        int batch, tokens, pm;
        clf_seq_order order;
    } modes[] = {
        {16, 0, 1, CLF_SEQ_ORDER_BUCKETED},  {16, 0, 1, CLF_SEQ_ORDER_SHUFFLED},
        {16, 0, 1, CLF_SEQ_ORDER_SORTED},    {16, 0, 1, CLF_SEQ_ORDER_INPUT},
        {0, 300, 1, CLF_SEQ_ORDER_BUCKETED}, {10, 300, 8, CLF_SEQ_ORDER_BUCKETED},
        {0, 20, 1, CLF_SEQ_ORDER_SHUFFLED}, /* budget below the longest: singletons */
        {7, 0, 4, CLF_SEQ_ORDER_SORTED},
    };
    for (int which = 0; which < 2; which++) {
        const clf_seqdata *d = which ? cls_ds : ds;
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            clf_seq_batching bo;
            clf_seq_batching_default(&bo);
            bo.batch = modes[m].batch;
            bo.batch_tokens = modes[m].tokens;
            bo.pad_multiple = modes[m].pm;
            bo.order = modes[m].order;
            bo.chunk = 100;
            bo.seed = 42;
            clf_seq_loader *L;
            clf_seq_batch *b;
            tu_ok(clf_seq_loader_create(d, &bo, &L, &err), &err, "loader");
            tu_ok(clf_seq_batch_create(L, &b, &err), &err, "batch");
            uint64_t hashes[3];
            int bad = 0, once = 1;
            for (int e = 0; e < 3; e++) {
                memset(seen, 0, N * sizeof *seen);
                hashes[e] = 1469598103934665603ull;
                size_t planned = clf_seq_loader_batches(L);
                size_t nb = run_epoch(d, L, b, &bo, seen, &hashes[e], &bad);
                once &= nb == planned;
                for (size_t i = 0; i < N; i++)
                    once &= seen[i] == 1;
            }
            const char *kind = which ? "classifier" : "pairs";
            TU_CHECK(bad == 0, "%s mode %zu: %d batches with wrong contents/padding/limits", kind,
                     m, bad);
            TU_CHECK(once, "%s mode %zu: every example exactly once per epoch", kind, m);
            int shuffled = bo.order == CLF_SEQ_ORDER_BUCKETED || bo.order == CLF_SEQ_ORDER_SHUFFLED;
            TU_CHECK(shuffled ? hashes[0] != hashes[1] && hashes[1] != hashes[2]
                              : hashes[0] == hashes[1] && hashes[1] == hashes[2],
                     "%s mode %zu: epochs %s", kind, m, shuffled ? "differ" : "repeat");
            clf_seq_batch_destroy(b);
            clf_seq_loader_destroy(L);
        }
    }
    free(seen);
}

/* SORTED: lengths never decrease; INPUT: indices 0..N-1 in order */
static void batching_orders(const clf_seqdata *ds, size_t N)
{
    clf_error err;
    clf_seq_batching bo;
    clf_seq_batching_default(&bo);
    bo.order = CLF_SEQ_ORDER_SORTED;
    clf_seq_loader *L;
    clf_seq_batch *b;
    tu_ok(clf_seq_loader_create(ds, &bo, &L, &err), &err, "loader");
    tu_ok(clf_seq_batch_create(L, &b, &err), &err, "batch");
    int prev = 0, mono = 1;
    while (clf_seq_loader_next(L, b)) {
        for (int r = 0; r < b->B; r++) {
            int sl, yl;
            clf_seqdata_example(ds, (size_t)b->index[r], NULL, &sl, NULL, &yl, NULL);
            int key = sl > yl + 1 ? sl : yl + 1;
            mono &= key >= prev;
            prev = key;
        }
    }
    TU_CHECK(mono, "sorted order: max(S, T) never decreases");
    clf_seq_batch_destroy(b);
    clf_seq_loader_destroy(L);
    bo.order = CLF_SEQ_ORDER_INPUT;
    tu_ok(clf_seq_loader_create(ds, &bo, &L, &err), &err, "loader");
    tu_ok(clf_seq_batch_create(L, &b, &err), &err, "batch");
    int64_t next = 0;
    int inorder = 1;
    while (clf_seq_loader_next(L, b))
        for (int r = 0; r < b->B; r++)
            inorder &= b->index[r] == next++;
    TU_CHECK(inorder && next == (int64_t)N, "input order keeps indices 0..N-1");
    clf_seq_batch_destroy(b);
    clf_seq_loader_destroy(L);
}

/* determinism and resume */
static void batching_resume(const clf_seqdata *ds)
{
    clf_error err;
    clf_seq_batching bo;
    clf_seq_batching_default(&bo);
    bo.batch_tokens = 400;
    bo.batch = 0;
    bo.seed = 7;
    clf_seq_loader *A, *B, *C;
    clf_seq_batch *ba, *bb;
    tu_ok(clf_seq_loader_create(ds, &bo, &A, &err), &err, "A");
    tu_ok(clf_seq_loader_create(ds, &bo, &B, &err), &err, "B");
    bo.seed = 8;
    tu_ok(clf_seq_loader_create(ds, &bo, &C, &err), &err, "C");
    tu_ok(clf_seq_batch_create(A, &ba, &err), &err, "batch");
    tu_ok(clf_seq_batch_create(A, &bb, &err), &err, "batch");
    /* the same seed: the same stream over 2 epochs; another seed differs */
    int same = 1, differ = 0;
    for (int k = 0; k < 2 * (int)clf_seq_loader_batches(A) + 2; k++) {
        int ga = clf_seq_loader_next(A, ba), gb = clf_seq_loader_next(B, bb);
        same &= ga == gb && (!ga || (ba->B == bb->B && ba->S == bb->S && ba->T == bb->T &&
                                     memcmp(ba->index, bb->index, (size_t)ba->B * 8) == 0 &&
                                     memcmp(ba->src, bb->src, (size_t)(ba->B * ba->S) * 4) == 0));
        int gc = clf_seq_loader_next(C, bb);
        if (ga && gc && (ba->B != bb->B || ba->index[0] != bb->index[0]))
            differ = 1;
    }
    TU_CHECK(same, "the same seed gives the same batches");
    TU_CHECK(differ, "another seed gives other batches");
    clf_seq_loader_destroy(B);
    clf_seq_loader_destroy(C);
    clf_seq_loader_destroy(A);

    /* resume: save after k batches (mid-epoch, at the epoch's end, and
     * after the end-of-epoch signal), restore into a fresh loader, and
     * the next 40 results are identical */
    bo.seed = 7;
    tu_ok(clf_seq_loader_create(ds, &bo, &A, &err), &err, "A");
    size_t nb0 = clf_seq_loader_batches(A);
    size_t cuts[] = {5, nb0, nb0 + 1, nb0 + 9};
    int resumed = 1;
    for (size_t c = 0; c < 4; c++) {
        clf_seq_loader_state st0 = {0, 0};
        tu_ok(clf_seq_loader_set_state(A, &st0, &err), &err, "rewind");
        for (size_t k = 0; k < cuts[c]; k++)
            clf_seq_loader_next(A, ba);
        char state[CLF_SEQ_STATE_STRING_MAX];
        clf_seq_loader_state_to_string(A, state);
        tu_ok(clf_seq_loader_create(ds, &bo, &B, &err), &err, "B");
        tu_ok(clf_seq_loader_state_from_string(B, state, &err), &err, state);
        for (int k = 0; k < 40; k++) {
            int ga = clf_seq_loader_next(A, ba), gb = clf_seq_loader_next(B, bb);
            resumed &= ga == gb && (!ga || (ba->B == bb->B && ba->epoch == bb->epoch &&
                                            ba->position == bb->position &&
                                            memcmp(ba->index, bb->index, (size_t)ba->B * 8) == 0));
        }
        if (c == 1)
            printf("state at the end of epoch 0: %s\n", state);
        clf_seq_loader_destroy(B);
    }
    TU_CHECK(resumed, "resume from a saved state continues identically");
    /* refused: other data size, other seed, garbage, a position past the epoch */
    clf_seq_loader_state_to_string(A, (char[CLF_SEQ_STATE_STRING_MAX]){0});
    TU_CHECK(clf_seq_loader_state_from_string(A, "seq:epoch=1,position=0,examples=999,seed=7",
                                              &err) == CLF_ERR_ARG &&
                 strstr(err.msg, "999"),
             "resume on other data refused: %s", err.msg);
    TU_CHECK(clf_seq_loader_state_from_string(A, "seq:epoch=1,position=0,examples=1000,seed=9",
                                              &err) == CLF_ERR_ARG,
             "resume with another seed refused");
    TU_CHECK(clf_seq_loader_state_from_string(A, "epoch 3", &err) == CLF_ERR_FORMAT,
             "malformed state refused");
    clf_seq_loader_state far = {0, 1000000};
    clf_seq_loader_state before, after;
    clf_seq_loader_get_state(A, &before);
    TU_CHECK(clf_seq_loader_set_state(A, &far, &err) == CLF_ERR_ARG, "position past the end");
    clf_seq_loader_get_state(A, &after);
    TU_CHECK(before.epoch == after.epoch && before.position == after.position,
             "a refused state leaves the loader as it was");
    clf_seq_loader_destroy(A);
    clf_seq_batch_destroy(ba);
    clf_seq_batch_destroy(bb);
}

/* bad options */
static void batching_bad_options(const clf_seqdata *ds)
{
    clf_error err;
    clf_seq_batching bo;
    clf_seq_batching_default(&bo);
    bo.batch = 0;
    clf_seq_loader *L = NULL;
    TU_CHECK(clf_seq_loader_create(ds, &bo, &L, &err) == CLF_ERR_ARG && L == NULL,
             "neither batch nor batch_tokens refused");
    bo.batch = 4;
    bo.pad_multiple = 0;
    TU_CHECK(clf_seq_loader_create(ds, &bo, &L, &err) == CLF_ERR_ARG, "pad_multiple 0 refused");
}

/* bucketing pads less than random batches */
static void batching_padding(const clf_seqdata *ds)
{
    clf_error err;
    double eff[2][3];
    for (int k = 0; k < 2; k++) {
        clf_seq_batching bo;
        clf_seq_batching_default(&bo);
        bo.batch = 32;
        bo.order = k ? CLF_SEQ_ORDER_SHUFFLED : CLF_SEQ_ORDER_BUCKETED;
        clf_seq_loader *L;
        tu_ok(clf_seq_loader_create(ds, &bo, &L, &err), &err, "loader");
        int64_t sr, sp, tr, tp;
        clf_seq_loader_padding(L, &sr, &sp, &tr, &tp);
        eff[k][0] = (double)sr / (double)sp;
        eff[k][1] = (double)tr / (double)tp;
        eff[k][2] = (double)(sr + tr) / (double)(sp + tp);
        clf_seq_loader_destroy(L);
    }
    printf("synthetic (independent uniform lengths, batch 32): real/padded tokens source "
           "%.3f bucketed vs %.3f random, target %.3f vs %.3f, both %.3f vs %.3f\n",
           eff[0][0], eff[1][0], eff[0][1], eff[1][1], eff[0][2], eff[1][2]);
    /* typically 0.77 vs 0.54: a margin of 0.1 holds for any seed */
    TU_CHECK(eff[0][2] > eff[1][2] + 0.1, "bucketing pads less: %.3f vs %.3f", eff[0][2],
             eff[1][2]);
}

static void test_batching(void)
{
    clf_tokenizer *tok = byte_tok(1);
    const size_t N = 1000;
    char *src = synth(N, 1, 0, 40), *tgt = synth(N, 2, 1, 50);
    write_file("s.src", src);
    write_gz("s.tgt.gz", tgt);
    clf_seq_options o;
    clf_seq_options_default(&o, CLF_MODEL_ENCODER_DECODER, 48);
    clf_seqdata *ds, *cls_ds;
    clf_error err;
    char a[640], bpath[640];
    snprintf(a, sizeof a, "%s", tmp_path("s.src"));
    snprintf(bpath, sizeof bpath, "%s", tmp_path("s.tgt.gz"));
    tu_ok(clf_seqdata_load_pairs(a, bpath, tok, tok, &o, &ds, &err), &err, "synthetic pairs");
    TU_CHECK(clf_seqdata_stats_get(ds)->tgt.truncated > 0, "some targets exceed 48 and are cut");
    clf_seq_options oc;
    clf_seq_options_default(&oc, CLF_MODEL_ENCODER, 30);
    tu_ok(clf_seqdata_from_text(src, strlen(src), "synthetic", tok, &oc, &cls_ds, &err), &err,
          "synthetic sentences");

    batching_modes(ds, cls_ds, N);
    batching_orders(ds, N);
    batching_resume(ds);
    batching_bad_options(ds);
    batching_padding(ds);
    free(src);
    free(tgt);
    clf_seqdata_destroy(ds);
    clf_seqdata_destroy(cls_ds);
    clf_tokenizer_destroy(tok);
}

/* Multi30k with the char tokenizer (when the data is there): padding of
 * bucketed against random batches. */
static void multi30k_padding(void)
{
    const char *de = "../shared/data/multi30k/train.de.gz";
    const char *en = "../shared/data/multi30k/train.en.gz";
    if (access(de, R_OK) != 0 || access(en, R_OK) != 0) {
        printf("note: %s not readable, Multi30k padding measurement skipped\n", de);
        return;
    }
    clf_error err;
    char *td, *te;
    size_t ld, le;
    tu_ok(clf_file_read_text(de, CLF_SEQDATA_MAX_BYTES, &td, &ld, &err), &err, de);
    tu_ok(clf_file_read_text(en, CLF_SEQDATA_MAX_BYTES, &te, &le, &err), &err, en);
    char *both = malloc(ld + le + 1);
    memcpy(both, td, ld);
    memcpy(both + ld, te, le);
    clf_tokenizer *tok;
    int32_t id;
    tu_ok(clf_tokenizer_create(CLF_TOKENIZER_CHAR, both, ld + le, &tok, &err), &err, "char tok");
    clf_special_token sp[] = {CLF_SPECIAL_PAD, CLF_SPECIAL_BOS, CLF_SPECIAL_EOS, CLF_SPECIAL_UNK};
    for (int k = 0; k < 4; k++)
        tu_ok(clf_tokenizer_add_special(tok, sp[k], &id, &err), &err, "special");
    free(both);
    free(td);
    free(te);
    clf_seq_options o;
    clf_seq_options_default(&o, CLF_MODEL_ENCODER_DECODER, 256);
    clf_seqdata *ds;
    tu_ok(clf_seqdata_load_pairs(de, en, tok, tok, &o, &ds, &err), &err, "multi30k");
    char line[512];
    clf_seqdata_stats_format(clf_seqdata_stats_get(ds), line, sizeof line);
    printf("Multi30k train (char tokens): %s\n", line);
    TU_CHECK(clf_seqdata_size(ds) == 29000, "Multi30k train has %zu pairs, want 29000",
             clf_seqdata_size(ds));
    struct {
        int batch, tokens;
    } cfgs[] = {{128, 0}, {0, 8192}};
    for (int c = 0; c < 2; c++) {
        double e[2][2];
        int64_t slots[2];
        size_t nbat[2];
        for (int k = 0; k < 2; k++) {
            clf_seq_batching bo;
            clf_seq_batching_default(&bo);
            bo.batch = cfgs[c].batch;
            bo.batch_tokens = cfgs[c].tokens;
            bo.order = k ? CLF_SEQ_ORDER_SHUFFLED : CLF_SEQ_ORDER_BUCKETED;
            clf_seq_loader *L;
            tu_ok(clf_seq_loader_create(ds, &bo, &L, &err), &err, "loader");
            int64_t sr, spd, tr, tp;
            clf_seq_loader_padding(L, &sr, &spd, &tr, &tp);
            e[k][0] = (double)sr / (double)spd;
            e[k][1] = (double)tr / (double)tp;
            nbat[k] = clf_seq_loader_batches(L);
            slots[k] = spd + tp;
            clf_seq_loader_destroy(L);
        }
        printf("Multi30k %s %d: real/padded source %.3f bucketed vs %.3f random, target %.3f vs "
               "%.3f; padded slots random/bucketed %.2fx; %zu vs %zu batches\n",
               cfgs[c].batch ? "batch" : "batch_tokens",
               cfgs[c].batch ? cfgs[c].batch : cfgs[c].tokens, e[0][0], e[1][0], e[0][1], e[1][1],
               (double)slots[1] / (double)slots[0], nbat[0], nbat[1]);
        TU_CHECK(e[0][0] > e[1][0] && e[0][1] > e[1][1], "Multi30k: bucketing pads less");
    }
    clf_seqdata_destroy(ds);
    clf_tokenizer_destroy(tok);
}

static void test_lines(void)
{
    clf_error e;
    clf_span *ls = NULL;
    size_t n = 0;
    const char *text = "\xEF\xBB\xBFsentence\tlabel\r\nhello\t1\n\nlast\t0";
    tu_ok(clf_lines_split(text, strlen(text), "t", &ls, &n, &e), &e, "split");
    TU_CHECK(n == 4, "4 lines (BOM dropped, final line without newline kept), got %zu", n);
    TU_CHECK(n == 4 && ls[0].len == 14 && memcmp(ls[0].p, "sentence\tlabel", 14) == 0,
             "first line without BOM and CR");
    TU_CHECK(n == 4 && ls[2].len == 0 && ls[3].len == 6, "an empty line and the last line");
    const char *label[] = {"label"}, *texts[] = {"text", "sentence"}, *none[] = {"x"};
    TU_CHECK(clf_tsv_column(&ls[0], label, 1) == 1, "label is column 1");
    TU_CHECK(clf_tsv_column(&ls[0], texts, 2) == 0, "the first listed name present wins: sentence");
    TU_CHECK(clf_tsv_column(&ls[0], none, 1) == -1, "an absent column is -1");
    clf_span f[2];
    TU_CHECK(clf_tsv_fields(&ls[1], f, 2) == 2 && f[1].len == 1 && f[1].p[0] == '1',
             "fields of a row");
    clf_span three = {"a\tb\tc", 5};
    TU_CHECK(clf_tsv_fields(&three, f, 2) == 3, "the field count beyond cap is still reported");
    free(ls);
    ls = NULL;
    tu_ok(clf_lines_split("", 0, "t", &ls, &n, &e), &e, "split empty");
    TU_CHECK(n == 0, "no lines in empty text");
    free(ls);

    write_file("lines.txt", "one\r\ntwo\n");
    char **lines = NULL;
    tu_ok(clf_lines_read(tmp_path("lines.txt"), 1 << 20, &lines, &n, &e), &e, "read lines");
    TU_CHECK(n == 2 && strcmp(lines[0], "one") == 0 && strcmp(lines[1], "two") == 0,
             "read lines as strings");
    clf_lines_free(lines, n);
    TU_CHECK(clf_lines_read(tmp_path("missing.txt"), 1 << 20, &lines, &n, &e) == CLF_ERR_IO,
             "a missing file is an I/O error");
}

static void test_run_tokenizer(void)
{
    clf_error e;
    clf_model_config cfg;
    clf_config_defaults(&cfg);
    cfg.kind = CLF_MODEL_ENCODER;
    cfg.vocab.tokenizer = CLF_TOKENIZER_CHAR;
    write_file("tok.tsv", "label\tsentence\n1\tabc\n0\tcab\n1\t\n");
    clf_tokenizer *tok = NULL;
    clf_seq_vocab_info info;
    tu_ok(clf_seq_tokenizer_build(&cfg, tmp_path("tok.tsv"), NULL, &tok, &info, &e), &e,
          "char tokenizer from a TSV's text column");
    /* a, b, c and the newline that joins lines, then the six specials; the
     * label column is not learned */
    TU_CHECK(tok != NULL && clf_tokenizer_vocab_size(tok) == 4 + CLF_SPECIAL_COUNT,
             "char vocabulary: 4 characters + %d specials, got %d", CLF_SPECIAL_COUNT,
             tok ? (int)clf_tokenizer_vocab_size(tok) : -1);
    int32_t *ids = NULL;
    size_t n = 0;
    TU_CHECK(tok != NULL && clf_tokenizer_encode(tok, "1", 1, &ids, &n, &e) == CLF_OK && n == 1 &&
                 ids[0] == clf_tokenizer_special(tok, CLF_SPECIAL_UNK),
             "a label digit is not in the vocabulary (it encodes as unk)");
    free(ids);
    clf_tokenizer_destroy(tok);
    tok = NULL;

    write_file("tok.src", "hallo welt\n");
    write_file("tok.tgt", "hello world\n");
    cfg.kind = CLF_MODEL_ENCODER_DECODER;
    cfg.vocab.tokenizer = CLF_TOKENIZER_BPE;
    cfg.vocab.size = 270;
    tu_ok(clf_seq_tokenizer_build(&cfg, tmp_path("tok.src"), tmp_path("tok.tgt"), &tok, &info, &e),
          &e, "bpe tokenizer from a source and a target file");
    TU_CHECK(tok != NULL && clf_tokenizer_type_of(tok) == CLF_TOKENIZER_BPE && info.merges > 0 &&
                 info.bytes_per_token > 1.0,
             "bpe learned merges (%d) on the joint text, %.2f bytes per token", info.merges,
             info.bytes_per_token);
    clf_tokenizer_destroy(tok);
    tok = NULL;

    cfg.kind = CLF_MODEL_ENCODER;
    write_file("notext.tsv", "label\tpremise\n1\tx\n");
    clf_status st = clf_seq_tokenizer_build(&cfg, tmp_path("notext.tsv"), NULL, &tok, NULL, &e);
    TU_CHECK(st == CLF_ERR_FORMAT && strstr(e.msg, "no text column") != NULL && tok == NULL,
             "a TSV without a text column is refused naming it: %s", e.msg);
}

int main(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/clf_seqdata_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    test_pairs_files();
    test_truncation();
    test_tsv();
    test_lines();
    test_run_tokenizer();
    test_batching();
    multi30k_padding();
    /* clean up the temporary files */
    for (int i = 0; i < n_written; i++)
        unlink(tmp_path(written[i]));
    if (rmdir(tmpdir) != 0)
        fprintf(stderr, "note: could not remove %s\n", tmpdir);
    return tu_finish();
}
