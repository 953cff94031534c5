/*
 * test_convert.c - float32 <-> bf16 / f16 on the device (runtime/convert.h,
 * cl/convert.cl) against the host's C reference (model/io/safetensors.h:
 * clf_f32_to_bf16 and friends, themselves checked against Python's struct
 * in test_safetensors).
 *
 * Checks, bit for bit (a NaN: any NaN of the format, sign kept for bf16):
 *   - narrowing special values: +-0, +-inf, NaNs, the largest finite values
 *     and the first values past them (overflow to infinity), ties at every
 *     rounding position (round to nearest even, both parities), f16's
 *     smallest normal and subnormals and the values that round into and out
 *     of them, float32 subnormals;
 *   - narrowing 4096 random floats over the whole exponent range (fresh
 *     seed), and widening every one of the 65,536 16-bit patterns, for both
 *     formats;
 *   - a strided batch (offsets, row strides, batch strides) converts only
 *     its elements: the ones between rows are left as they were;
 *   - bad arguments are refused (16-bit to 16-bit, a matrix past its
 *     buffer).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/io/safetensors.h"
#include "runtime/convert.h"
#include "tests/test_util.h"

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int is_nan16(clf_dtype t, uint16_t h)
{
    return t == CLF_DT_BF16 ? (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu) != 0
                            : (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0;
}

static uint16_t ref_narrow(clf_dtype t, float x)
{
    return t == CLF_DT_BF16 ? clf_f32_to_bf16(x) : clf_f32_to_f16(x);
}

/* Narrow n floats on the device and compare with the reference. */
static void check_narrow(clf_runtime *rt, clf_dtype t, const float *x, size_t n, const char *what)
{
    clf_error e;
    clf_buffer *src = NULL, *dst = NULL;
    tu_ok(clf_buffer_create(rt, n * 4, &src, &e), &e, "buffer");
    tu_ok(clf_buffer_create(rt, n * 2, &dst, &e), &e, "buffer");
    tu_ok(clf_buffer_write(rt, src, 0, x, n * 4, &e), &e, "write");
    tu_ok(clf_convert(rt, t, (clf_ptr){dst, 0}, CLF_DT_F32, (clf_ptr){src, 0}, n, &e), &e,
          "narrow");
    uint16_t *got = malloc(n * 2);
    tu_ok(clf_buffer_read(rt, dst, 0, got, n * 2, &e), &e, "read");
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; i++) {
        const uint16_t want = ref_narrow(t, x[i]);
        const int ok = is_nan16(t, want)
                           ? is_nan16(t, got[i]) && (t == CLF_DT_F16 || (got[i] ^ want) < 0x8000u)
                           : got[i] == want;
        if (!ok && bad++ == 0)
            first = i;
    }
    uint32_t fb = 0;
    if (first < n)
        memcpy(&fb, &x[first], 4);
    TU_CHECK(bad == 0,
             "%s: narrow %zu values to %s bit for bit (%zu differ; first 0x%08x -> 0x%04x, "
             "want 0x%04x)",
             what, n, clf_dtype_name(t), bad, (unsigned)fb, first < n ? got[first] : 0,
             first < n ? ref_narrow(t, x[first]) : 0);
    free(got);
    clf_buffer_destroy(src);
    clf_buffer_destroy(dst);
}

static void check_widen_all(clf_runtime *rt, clf_dtype t)
{
    const size_t n = 65536;
    uint16_t *h = malloc(n * 2);
    float *got = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        h[i] = (uint16_t)i;
    clf_error e;
    clf_buffer *src = NULL, *dst = NULL;
    tu_ok(clf_buffer_create(rt, n * 2, &src, &e), &e, "buffer");
    tu_ok(clf_buffer_create(rt, n * 4, &dst, &e), &e, "buffer");
    tu_ok(clf_buffer_write(rt, src, 0, h, n * 2, &e), &e, "write");
    tu_ok(clf_convert(rt, CLF_DT_F32, (clf_ptr){dst, 0}, t, (clf_ptr){src, 0}, n, &e), &e, "widen");
    tu_ok(clf_buffer_read(rt, dst, 0, got, n * 4, &e), &e, "read");
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const float want = t == CLF_DT_BF16 ? clf_bf16_to_f32(h[i]) : clf_f16_to_f32(h[i]);
        bad += isnan(want) ? !isnan(got[i]) : memcmp(&want, &got[i], 4) != 0;
    }
    TU_CHECK(bad == 0, "widen all 65,536 %s patterns exactly (%zu differ)", clf_dtype_name(t), bad);
    free(h);
    free(got);
    clf_buffer_destroy(src);
    clf_buffer_destroy(dst);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng g = tu_rng_new(17);
    clf_error e;

    /* special values, then the rounding boundaries of each format */
    float sp[256];
    size_t n = 0;
    const uint32_t bits[] = {
        0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u,
        0x7F800001u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F7F8000u, 0x7F7F7FFFu, 0x00000001u,
        0x807FFFFFu, 0x00800000u, 0x3F808000u, 0x3F818000u, 0x3F808001u, 0x3F817FFFu,
        0x477FE000u, 0x477FEFFFu, 0x477FF000u, 0x477FFFFFu, 0x38800000u, 0x387FFFFFu,
        0x33800000u, 0x33000000u, 0x33000001u, 0x32FFFFFFu, 0x33C00000u, 0x34400000u,
        0x3F801000u, 0x3F803000u, 0x3F800FFFu, 0xC7800000u, 0x387FE000u, 0x387FF000u,
    };
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
        sp[n++] = from_bits(bits[i]);
    for (int k = 0; k < 16; k++) /* ties at bit k of the mantissa, both parities */
        for (uint32_t odd = 0; odd < 2 && n < 256; odd++)
            sp[n++] = from_bits(0x3F800000u | (odd << (k + 1)) | (1u << k));
    check_narrow(rt, CLF_DT_BF16, sp, n, "special values");
    check_narrow(rt, CLF_DT_F16, sp, n, "special values");

    /* random floats over the whole exponent range, both signs */
    const size_t nr = tu_simulator() ? 512 : 4096;
    float *r = malloc(nr * 4);
    for (size_t i = 0; i < nr; i++)
        r[i] = from_bits(tu_u32(&g));
    check_narrow(rt, CLF_DT_BF16, r, nr, "random bit patterns");
    check_narrow(rt, CLF_DT_F16, r, nr, "random bit patterns");
    for (size_t i = 0; i < nr; i++) /* and values in f16's range */
        r[i] = (float)tu_uniform(&g, -70000.0, 70000.0) * (float)pow(2.0, -(double)(i % 40));
    check_narrow(rt, CLF_DT_F16, r, nr, "values in f16's range");
    free(r);

    if (!tu_simulator()) {
        check_widen_all(rt, CLF_DT_BF16);
        check_widen_all(rt, CLF_DT_F16);
    }

    /* a strided batch: 2 matrices of 3 x 5, row stride 7, batch stride 25,
     * offset 3 in the 16-bit buffer; from a dense f32 source at offset 1 */
    {
        const size_t rows = 3, cols = 5, ld = 7, stride = 25, off = 3, total = off + 2 * stride;
        float src[1 + 2 * 15];
        for (size_t i = 0; i < sizeof src / 4; i++)
            src[i] = (float)tu_uniform(&g, -4.0, 4.0);
        uint16_t init[64], got[64];
        for (size_t i = 0; i < total; i++)
            init[i] = (uint16_t)(0xABC0u + i);
        clf_buffer *bs = NULL, *bd = NULL;
        tu_ok(clf_buffer_create(rt, sizeof src, &bs, &e), &e, "buffer");
        tu_ok(clf_buffer_create(rt, total * 2, &bd, &e), &e, "buffer");
        tu_ok(clf_buffer_write(rt, bs, 0, src, sizeof src, &e), &e, "write");
        tu_ok(clf_buffer_write(rt, bd, 0, init, total * 2, &e), &e, "write");
        tu_ok(clf_convert_matrix(rt, CLF_DT_BF16, (clf_ptr){bd, off}, ld, stride, CLF_DT_F32,
                                 (clf_ptr){bs, 1}, cols, rows * cols, rows, cols, 2, &e),
              &e, "strided");
        tu_ok(clf_buffer_read(rt, bd, 0, got, total * 2, &e), &e, "read");
        int ok = 1;
        for (size_t i = 0; i < total; i++) {
            uint16_t want = init[i];
            if (i >= off) {
                const size_t z = (i - off) / stride, w = (i - off) % stride;
                if (z < 2 && w / ld < rows && w % ld < cols)
                    want = clf_f32_to_bf16(src[1 + z * rows * cols + (w / ld) * cols + w % ld]);
            }
            ok &= got[i] == want;
        }
        TU_CHECK(ok, "a strided batch converts its elements and leaves the gaps");
        TU_CHECK(clf_convert_matrix(rt, CLF_DT_BF16, (clf_ptr){bd, off}, ld, stride, CLF_DT_F32,
                                    (clf_ptr){bs, 1}, cols, rows * cols, rows, cols, 3,
                                    &e) == CLF_ERR_ARG &&
                     strstr(e.msg, "does not fit") != NULL,
                 "a batch past the buffer is refused: %s", e.msg);
        TU_CHECK(clf_convert(rt, CLF_DT_F16, (clf_ptr){bd, 0}, CLF_DT_BF16, (clf_ptr){bd, 0}, 4,
                             &e) == CLF_ERR_ARG,
                 "16-bit to 16-bit is refused: %s", e.msg);
        clf_buffer_destroy(bs);
        clf_buffer_destroy(bd);
    }
    clf_runtime_destroy(rt);
    return tu_finish();
}
