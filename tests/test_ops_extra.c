/*
 * test_ops_extra.c - the model's extra ops (model/ops_extra.h) against a
 * naive C reference: kv_store copies k (or v) rows out of a fused qkv
 * buffer into positions [pos0, pos0 + T) of a [B, NH, Tmax, HS] cache and
 * leaves every other cache entry untouched. Exact (a copy): atol = rtol = 0.
 * Sizes include ones that are multiples of no work-group size.
 */
#include <stdio.h>
#include <stdlib.h>

#include "model/ops_extra.h"
#include "test_util.h"

static void kv_case(clf_runtime *rt, tu_rng *g, size_t B, size_t T, size_t NH, size_t HS,
                    size_t Tmax, size_t pos0)
{
    size_t C = NH * HS, stride = 3 * C, nsrc = B * T * stride, ncache = B * NH * Tmax * HS;
    float *src = malloc(nsrc * sizeof *src), *cache = malloc(ncache * sizeof *cache);
    double *ref = malloc(ncache * sizeof *ref);
    tu_fill(g, src, nsrc, -1, 1);
    tu_fill(g, cache, ncache, -1, 1);
    for (size_t i = 0; i < ncache; i++)
        ref[i] = cache[i];
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            for (size_t h = 0; h < NH; h++)
                for (size_t d = 0; d < HS; d++)
                    ref[((b * NH + h) * Tmax + pos0 + t) * HS + d] =
                        src[(b * T + t) * stride + C + h * HS + d];
    clf_ptr ds = tu_upload(rt, src, nsrc), dc = tu_upload(rt, cache, ncache);
    clf_error e;
    tu_ok(clf_op_kv_store(rt, dc, clf_ptr_at(ds, C), B, T, NH, HS, stride, Tmax, pos0, &e), &e,
          "kv_store");
    tu_download(rt, dc, cache, ncache);
    char name[128];
    snprintf(name, sizeof name, "kv_store B=%zu T=%zu NH=%zu HS=%zu Tmax=%zu pos0=%zu", B, T, NH,
             HS, Tmax, pos0);
    tu_close(name, cache, ref, ncache, 0, 0);
    tu_free(ds);
    tu_free(dc);
    free(src);
    free(cache);
    free(ref);
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng g = tu_rng_new(1);
    kv_case(rt, &g, 1, 1, 1, 1, 1, 0);
    kv_case(rt, &g, 2, 7, 3, 5, 9, 2);
    kv_case(rt, &g, 3, 1, 4, 33, 64, 63);
    kv_case(rt, &g, 4, 33, 2, 16, 40, 7);
    clf_error e;
    clf_ptr c = tu_alloc(rt, 64);
    TU_CHECK(clf_op_kv_store(rt, c, c, 1, 4, 1, 4, 4, 4, 1, &e) == CLF_ERR_ARG,
             "positions past the cache are refused");
    tu_free(c);
    clf_runtime_destroy(rt);
    return tu_finish();
}
