/*
 * test_json.c - the JSON reader and writer (model/io/json.h) and the UTF-8
 * helpers.
 *
 * Checks: every value type and escape (\uXXXX, surrogate pairs, \u0000),
 * exact integers at the int64 limits, error messages with the exact byte
 * offset (and line/column) for a table of malformed inputs, the depth and
 * size limits, duplicate keys; every proper prefix of a document and random
 * byte corruptions fail cleanly (run under ASan in CI); the writer's exact
 * output for a small document, round trips of random doubles and floats
 * (bit-exact, shortest form), writer misuse reported at finish; UTF-8
 * encode/decode over every scalar value and the classic invalid sequences.
 * No device needed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/io/json.h"
#include "tests/test_util.h"

static clf_json *parse_ok(const char *text)
{
    clf_json *doc = NULL;
    clf_error err;
    clf_status st = clf_json_parse(text, strlen(text), NULL, &doc, &err);
    if (st != CLF_OK) {
        char buf[2048];
        clf_error_format(&err, buf, sizeof buf);
        TU_CHECK(0, "parse %s: %s", text, buf);
        return NULL;
    }
    return doc;
}

/* Expect a CLF_ERR_FORMAT at byte `at` whose message contains what. */
static void parse_fail(const char *text, size_t len, int at, const char *what)
{
    clf_json *doc = NULL;
    clf_error err;
    clf_error_clear(&err);
    clf_status st = clf_json_parse(text, len, NULL, &doc, &err);
    char buf[2048], pos[64], shown[64];
    clf_error_format(&err, buf, sizeof buf);
    snprintf(pos, sizeof pos, "byte %d (", at);
    size_t k = 0;
    for (size_t i = 0; i < len && k + 5 < sizeof shown; i++) /* printable form of the input */
        k += (size_t)snprintf(shown + k, sizeof shown - k,
                              text[i] >= 0x20 && text[i] < 0x7f ? "%c" : "\\x%02x",
                              (unsigned char)text[i]);
    shown[k] = '\0';
    TU_CHECK(st == CLF_ERR_FORMAT && doc == NULL && strstr(buf, pos) != NULL &&
                 strstr(buf, what) != NULL,
             "reject %-24s -> %s", shown, buf);
    clf_json_destroy(doc);
}

static void test_values(void)
{
    printf("values\n");
    clf_json *d = parse_ok(" {\"n\": null, \"t\": true, \"f\": false, \"i\": -42, \"x\": 2.5e-3,"
                           " \"s\": \"hi\", \"a\": [1, [2, {}], []], \"o\": {\"k\": \"v\"}} ");
    if (d == NULL)
        return;
    TU_CHECK(d->type == CLF_JSON_OBJECT && d->count == 8, "object with 8 members");
    const char *order[] = {"n", "t", "f", "i", "x", "s", "a", "o"};
    int in_order = 1;
    for (int i = 0; i < 8; i++)
        in_order &= strcmp(d->items[i].key, order[i]) == 0;
    TU_CHECK(in_order, "members kept in file order");
    TU_CHECK(clf_json_get(d, "n")->type == CLF_JSON_NULL, "null");
    TU_CHECK(clf_json_get(d, "t")->boolean == 1 && clf_json_get(d, "f")->boolean == 0, "bools");
    const clf_json *i = clf_json_get(d, "i");
    TU_CHECK(i->is_int && i->integer == -42 && i->number == -42.0, "integer -42");
    const clf_json *x = clf_json_get(d, "x");
    TU_CHECK(!x->is_int && x->number == 2.5e-3, "2.5e-3 is a double, not an integer");
    TU_CHECK(strcmp(clf_json_get(d, "s")->string, "hi") == 0, "string");
    const clf_json *a = clf_json_get(d, "a");
    TU_CHECK(a->count == 3 && a->items[1].count == 2 &&
                 a->items[1].items[1].type == CLF_JSON_OBJECT && a->items[2].count == 0,
             "nested arrays and empty containers");
    TU_CHECK(a->offset == 75 && a->items[1].offset == 79, "value offsets (%zu, %zu)", a->offset,
             a->items[1].offset);
    TU_CHECK(strcmp(clf_json_get(clf_json_get(d, "o"), "k")->string, "v") == 0, "nested get");
    TU_CHECK(clf_json_get(d, "missing") == NULL && clf_json_get(a, "x") == NULL,
             "get: missing key and non-object give NULL");
    clf_json_destroy(d);
}

static void test_strings(void)
{
    printf("strings\n");
    clf_json *d = parse_ok("[\"q\\\"b\\\\s\\/b\\bf\\fn\\nr\\rt\\t\", \"\\u00e9\\u20AC\", "
                           "\"\\ud83d\\ude00\", \"a\\u0000b\", \"Gr\xc3\xbc\xc3\x9f"
                           "e\"]");
    if (d == NULL)
        return;
    TU_CHECK(strcmp(d->items[0].string, "q\"b\\s/b\bf\fn\nr\rt\t") == 0, "simple escapes");
    TU_CHECK(strcmp(d->items[1].string, "\xc3\xa9\xe2\x82\xac") == 0 && d->items[1].string_len == 5,
             "\\u00e9\\u20AC -> UTF-8 (2 + 3 bytes)");
    TU_CHECK(strcmp(d->items[2].string, "\xf0\x9f\x98\x80") == 0, "surrogate pair -> U+1F600");
    TU_CHECK(d->items[3].string_len == 3 && memcmp(d->items[3].string, "a\0b", 3) == 0,
             "\\u0000 kept, with the length");
    TU_CHECK(strcmp(d->items[4].string, "Gr\xc3\xbc\xc3\x9f"
                                        "e") == 0,
             "raw UTF-8 passes");
    clf_json_destroy(d);
}

static void test_numbers(void)
{
    printf("numbers\n");
    clf_json *d = parse_ok("[0, -0, 9223372036854775807, -9223372036854775808, "
                           "9223372036854775808, 1E3, 1e-400, 0.1, 18446744073709551614]");
    if (d == NULL)
        return;
    TU_CHECK(d->items[0].is_int && d->items[0].integer == 0, "0");
    TU_CHECK(d->items[1].is_int && d->items[1].integer == 0 && signbit(d->items[1].number),
             "-0 is integer 0 and double -0.0");
    TU_CHECK(d->items[2].is_int && d->items[2].integer == INT64_MAX, "INT64_MAX exact");
    TU_CHECK(d->items[3].is_int && d->items[3].integer == INT64_MIN, "INT64_MIN exact");
    TU_CHECK(!d->items[4].is_int && d->items[4].number == 9223372036854775808.0,
             "2^63 does not fit int64: double only");
    TU_CHECK(!d->items[5].is_int && d->items[5].number == 1000.0, "1E3 (exponent) is a double");
    TU_CHECK(d->items[6].number == 0.0, "underflow to 0 is accepted");
    TU_CHECK(d->items[7].number == 0.1, "0.1 correctly rounded");
    TU_CHECK(!d->items[8].is_int, "2^64-2 is not an int64");
    clf_json_destroy(d);
}

static void test_errors(void)
{
    printf("errors (with byte offsets)\n");
    static const struct {
        const char *text;
        int at;           /* expected byte offset */
        const char *what; /* expected text of the message */
    } cases[] = {
        {"", 0, "(line 1, column 1): expected a value, found end of input"},
        {"   ", 3, "expected a value, found end of input"},
        {"{", 1, "(line 1, column 2): expected a string key in an object, found end of input"},
        {"[1,]", 3, "(line 1, column 4): expected a value"},
        {"[1 2]", 3, "expected ',' or ']' in an array, found '2'"},
        {"{\"a\" 1}", 5, "(line 1, column 6): expected ':' after an object key, found '1'"},
        {"{\"a\":1,}", 7, "expected a string key in an object, found '}'"},
        {"{\"a\":1,\"b\":2,\"a\":3}", 17, "(line 1, column 18): duplicate key \"a\""},
        {"01", 0, "numbers may not have leading zeros"},
        {"-", 1, "expected a digit in a number"},
        {"1.", 2, "(line 1, column 3): expected a digit after the decimal point"},
        {"1e+", 3, "expected a digit in the exponent"},
        {"1e400", 0, "out of the range of a double"},
        {".5", 0, "expected a value"},
        {"+1", 0, "expected a value"},
        {"\"abc", 0, "unterminated string"},
        {"\"a\x01\"", 2, "(line 1, column 3): control character 0x01 in a string"},
        {"\"\\x\"", 2, "invalid escape \\'x'"},
        {"\"\\u12G4\"", 5, "expected a hex digit in \\u escape, found 'G'"},
        {"\"\\ud800\"", 1, "high surrogate \\uD800 is not followed by a low surrogate"},
        {"\"\\ud800\\u0041\"", 1, "is followed by \\u0041, not a low surrogate"},
        {"\"\\udc00\"", 1, "lone low surrogate \\uDC00"},
        {"\"\xff\"", 1, "invalid UTF-8 in a string"},
        {"\"\xc0\xaf\"", 1, "invalid UTF-8"},         /* overlong '/' */
        {"\"\xed\xa0\x80\"", 1, "invalid UTF-8"},     /* encoded surrogate */
        {"\"\xf4\x90\x80\x80\"", 1, "invalid UTF-8"}, /* > U+10FFFF */
        {"\"\xe2\x82\"", 1, "invalid UTF-8"},         /* truncated sequence */
        {"tru", 0, "expected a value"},
        {"nul", 0, "expected a value"},
        {"[1] x", 4, "(line 1, column 5): unexpected 'x' after the end of the JSON value"},
        {"{\n  \"a\": ?\n}", 9, "(line 2, column 8): expected a value"},
        {"[\n\n  1,\n  2\n  3]", 14, "(line 5, column 3): expected ',' or ']'"},
        {"{1:2}", 1, "expected a string key"},
        {"[true false]", 6, "expected ',' or ']'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        parse_fail(cases[i].text, strlen(cases[i].text), cases[i].at, cases[i].what);
    parse_fail("[1]\0", 4, 3, "unexpected byte 0x00");

    /* depth: 64 nested arrays parse, 65 do not */
    char deep[200];
    for (int depth = 64; depth <= 65; depth++) {
        int k = 0;
        for (int i = 0; i < depth; i++)
            deep[k++] = '[';
        for (int i = 0; i < depth; i++)
            deep[k++] = ']';
        deep[k] = '\0';
        clf_json *d = NULL;
        clf_error err;
        clf_status st = clf_json_parse(deep, (size_t)k, NULL, &d, &err);
        if (depth == 64)
            TU_CHECK(st == CLF_OK, "64 nested arrays parse (the default limit)");
        else
            TU_CHECK(st == CLF_ERR_FORMAT && strstr(err.msg, "byte 64") &&
                         strstr(err.msg, "limit of 64"),
                     "65 nested arrays: %s", err.msg);
        clf_json_destroy(d);
    }
    clf_json_options o = {"small.json", 3, 4};
    clf_json *d = NULL;
    clf_error err;
    clf_status st = clf_json_parse("[1,2]", 5, &o, &d, &err);
    TU_CHECK(st == CLF_ERR_FORMAT && strstr(err.msg, "limit of 4") &&
                 strcmp(err.where, "small.json") == 0,
             "size limit, source name in where: %s: %s", err.where, err.msg);
    st = clf_json_parse("[[[[]]]]", 8, &(clf_json_options){NULL, 3, 0}, &d, &err);
    TU_CHECK(st == CLF_ERR_FORMAT && strstr(err.msg, "byte 3"), "custom depth limit 3: %s",
             err.msg);
}

/* Every proper prefix of an object fails; random corruptions never crash. */
static void test_robustness(void)
{
    printf("robustness\n");
    const char *doc = "{\"a\":[1,2.5,-3e2,true,false,null],\"s\":\"x\\u00e9\\ud83d\\ude00\\n\","
                      "\"o\":{\"k\":{}}}";
    size_t n = strlen(doc);
    int prefixes_ok = 1;
    for (size_t cut = 0; cut < n; cut++) {
        clf_json *d = NULL;
        clf_error err;
        clf_status st = clf_json_parse(doc, cut, NULL, &d, &err);
        if (st != CLF_ERR_FORMAT || d != NULL) {
            prefixes_ok = 0;
            printf("  prefix of %zu bytes: status %d\n", cut, (int)st);
        }
        clf_json_destroy(d);
    }
    TU_CHECK(prefixes_ok, "all %zu proper prefixes are refused", n);
    clf_json *full = parse_ok(doc);
    clf_json_destroy(full);

    tu_rng r = tu_rng_new(11);
    char buf[256];
    int clean = 1, accepted = 0;
    for (int trial = 0; trial < 3000; trial++) {
        memcpy(buf, doc, n);
        int flips = 1 + (int)(tu_u32(&r) % 3);
        for (int f = 0; f < flips; f++)
            buf[tu_u32(&r) % n] = (char)(tu_u32(&r) & 0xFF);
        clf_json *d = NULL;
        clf_error err;
        clf_status st = clf_json_parse(buf, n, NULL, &d, &err);
        if (st == CLF_OK)
            accepted++;
        else if (st != CLF_ERR_FORMAT || d != NULL || strstr(err.msg, "byte ") == NULL)
            clean = 0;
        clf_json_destroy(d);
    }
    TU_CHECK(clean,
             "3000 corrupted documents: each parses or fails with a byte offset "
             "(%d happened to stay valid)",
             accepted);
}

static void test_writer(void)
{
    printf("writer\n");
    clf_json_writer w;
    clf_error err;
    char *out = NULL;
    size_t len = 0;
    clf_json_writer_init(&w);
    clf_json_begin_object(&w);
    clf_json_key(&w, "a");
    clf_json_begin_array(&w);
    clf_json_int(&w, 1);
    clf_json_int(&w, -2);
    clf_json_bool(&w, 1);
    clf_json_bool(&w, 0);
    clf_json_null(&w);
    clf_json_begin_object(&w);
    clf_json_end_object(&w);
    clf_json_begin_array(&w);
    clf_json_end_array(&w);
    clf_json_end_array(&w);
    clf_json_key(&w, "s\"");
    clf_json_string_n(&w, "x\"\\\n\t\x01\x1f\x7f\xc3\xa9\0z", 12);
    clf_json_key(&w, "d");
    clf_json_begin_array(&w);
    clf_json_double(&w, 0.1);
    clf_json_double(&w, 1e20);
    clf_json_double(&w, -0.0);
    clf_json_double(&w, 1.0 / 3.0);
    clf_json_float(&w, 0.1f);
    clf_json_float(&w, 3.14159274f);
    clf_json_uint(&w, UINT64_MAX);
    clf_json_int(&w, INT64_MIN);
    clf_json_end_array(&w);
    clf_json_end_object(&w);
    clf_status st = clf_json_writer_finish(&w, &out, &len, &err);
    const char *want = "{\"a\":[1,-2,true,false,null,{},[]],"
                       "\"s\\\"\":\"x\\\"\\\\\\n\\t\\u0001\\u001f\x7f\xc3\xa9\\u0000z\","
                       "\"d\":[0.1,1e+20,-0,0.3333333333333333,0.1,3.1415927,"
                       "18446744073709551615,-9223372036854775808]}";
    TU_CHECK(st == CLF_OK && out != NULL && strcmp(out, want) == 0 && len == strlen(want),
             "exact compact output:\n       got  %s\n       want %s", out ? out : "(null)", want);
    clf_json *d = out ? parse_ok(out) : NULL;
    if (d != NULL) {
        const clf_json *s = clf_json_get(d, "s\"");
        TU_CHECK(s != NULL && s->string_len == 12 &&
                     memcmp(s->string, "x\"\\\n\t\x01\x1f\x7f\xc3\xa9\0z", 12) == 0,
                 "escaped string reads back byte-exact");
        TU_CHECK(clf_json_get(d, "d")->items[3].number == 1.0 / 3.0, "1/3 reads back exactly");
    }
    clf_json_destroy(d);
    free(out);

    /* random doubles and floats: bit-exact round trip */
    tu_rng r = tu_rng_new(12);
    clf_json_writer_init(&w);
    clf_json_begin_array(&w);
    enum { ND = 2000 };
    static double dv[ND];
    static float fv[ND];
    for (int i = 0; i < ND; i++) {
        uint64_t bits;
        do {
            bits = ((uint64_t)tu_u32(&r) << 32) | tu_u32(&r);
            memcpy(&dv[i], &bits, 8);
        } while (!isfinite(dv[i]));
        uint32_t fb;
        do {
            fb = tu_u32(&r);
            memcpy(&fv[i], &fb, 4);
        } while (!isfinite(fv[i]));
        clf_json_double(&w, dv[i]);
        clf_json_float(&w, fv[i]);
    }
    clf_json_end_array(&w);
    st = clf_json_writer_finish(&w, &out, &len, &err);
    d = st == CLF_OK ? parse_ok(out) : NULL;
    int exact = d != NULL && d->count == 2 * ND;
    for (int i = 0; exact && i < ND; i++) {
        double g = d->items[2 * i].number;
        float gf = (float)d->items[2 * i + 1].number;
        exact = memcmp(&g, &dv[i], 8) == 0 && memcmp(&gf, &fv[i], 4) == 0;
        if (!exact)
            printf("  item %d: %.17g -> %.17g, %.9g -> %.9g\n", i, dv[i], g, (double)fv[i],
                   (double)gf);
    }
    TU_CHECK(exact, "%d random doubles and floats round-trip bit-exactly", ND);
    clf_json_destroy(d);
    free(out);
}

static void writer_misuse(const char *what, int kind)
{
    clf_json_writer w;
    clf_error err;
    char *out = (char *)1;
    clf_json_writer_init(&w);
    switch (kind) {
        case 0:
            clf_json_begin_object(&w);
            clf_json_int(&w, 1);
            clf_json_end_object(&w);
            break;
        case 1: clf_json_begin_array(&w); break;
        case 2:
            clf_json_begin_array(&w);
            clf_json_end_object(&w);
            break;
        case 3: clf_json_double(&w, NAN); break;
        case 4: clf_json_string(&w, "bad \xff utf-8"); break;
        case 5:
            clf_json_int(&w, 1);
            clf_json_int(&w, 2);
            break;
        case 6:
            clf_json_begin_array(&w);
            clf_json_key(&w, "k");
            clf_json_end_array(&w);
            break;
        case 7:
            clf_json_begin_object(&w);
            clf_json_key(&w, "k");
            clf_json_end_object(&w);
            break;
        case 8: break;
        case 9: clf_json_float(&w, INFINITY); break;
    }
    clf_status st = clf_json_writer_finish(&w, &out, NULL, &err);
    TU_CHECK(st == CLF_ERR_ARG && out == NULL, "writer misuse refused at finish (%s): %s", what,
             err.msg);
}

static void test_writer_misuse(void)
{
    printf("writer misuse\n");
    writer_misuse("value without key", 0);
    writer_misuse("unclosed array", 1);
    writer_misuse("mismatched end", 2);
    writer_misuse("NaN", 3);
    writer_misuse("invalid UTF-8", 4);
    writer_misuse("two top-level values", 5);
    writer_misuse("key in an array", 6);
    writer_misuse("key without value", 7);
    writer_misuse("nothing written", 8);
    writer_misuse("infinite float", 9);
}

static void test_utf8(void)
{
    printf("UTF-8 helpers\n");
    int ok = 1;
    for (uint32_t cp = 0; cp <= 0x10FFFF && ok; cp++) {
        unsigned char b[4];
        int k = clf_utf8_encode(cp, b);
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            ok = k == 0;
            continue;
        }
        int want = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        uint32_t back = 0xFFFFFFFF;
        ok = k == want && clf_utf8_decode(b, (size_t)k, &back) == k && back == cp &&
             clf_utf8_decode(b, (size_t)k - 1, &back) == 0;
        if (!ok)
            printf("  U+%04X: encode %d bytes\n", (unsigned)cp, k);
    }
    TU_CHECK(ok, "encode/decode round trip over all scalar values, surrogates refused, "
                 "truncations refused");
    unsigned char big[4];
    TU_CHECK(clf_utf8_encode(0x110000, big) == 0, "U+110000 is not encodable");
    static const struct {
        const char *s;
        size_t n;
    } bad[] = {{"\x80", 1},
               {"\xbf", 1},
               {"\xc0\x80", 2},
               {"\xc1\xbf", 2},
               {"\xe0\x80\x80", 3},
               {"\xe0\x9f\xbf", 3},
               {"\xed\xa0\x80", 3},
               {"\xed\xbf\xbf", 3},
               {"\xf0\x80\x80\x80", 4},
               {"\xf4\x90\x80\x80", 4},
               {"\xf5\x80\x80\x80", 4},
               {"\xff", 1},
               {"\xc3\x28", 2}};
    int all_bad = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint32_t cp;
        if (clf_utf8_decode((const unsigned char *)bad[i].s, bad[i].n, &cp) != 0) {
            all_bad = 0;
            printf("  case %zu accepted\n", i);
        }
    }
    TU_CHECK(all_bad, "overlong, surrogate, out-of-range, stray continuation bytes refused");
    const char *mixed = "ok \xc3\xa9 then \xe2\x82 bad";
    TU_CHECK(clf_utf8_validate((const unsigned char *)mixed, strlen(mixed)) == 11,
             "validate points at the first bad byte");
}

int main(void)
{
    tu_seed();
    test_values();
    test_strings();
    test_numbers();
    test_errors();
    test_robustness();
    test_writer();
    test_writer_misuse();
    test_utf8();
    return tu_finish();
}
