/*
 * random.cl - counter-based random numbers (Philox4x32-10) and dropout.
 *
 * Philox4x32-10 is the generator of Salmon et al., "Parallel random numbers:
 * as easy as 1, 2, 3" (SC11), bit-compatible with Random123's philox4x32_R(10,
 * ctr, key) (checked against its kat_vectors in tests/test_random.c). It is a
 * pure function of a 128-bit counter and a 64-bit key, so any element's random
 * bits can be regenerated anywhere: dropout's backward recomputes the mask of
 * its forward instead of storing it.
 *
 * Dropout stream layout: key = (seed lo, seed hi); element i of a launch uses
 * word i % 4 of philox(ctr = (i/4 lo, i/4 hi, stream lo, stream hi), key).
 * An element is kept iff its word >= thr, thr = round(p * 2^32) (computed on
 * the host), and scaled by `scale` = 1/(1-p). One work-item produces four
 * elements (one Philox call).
 *
 * Not here: other distributions (normal init happens on the host), dropout
 * masks stored as bits.
 */

/* Raw generator, for the known-answer tests: ctr [n,4], key [n,2] -> out [n,4]. */
__kernel void philox4x32_10_raw(__global uint *out, ulong out_off, __global const uint *ctr,
                                ulong ctr_off, __global const uint *key, ulong key_off, ulong n)
{
    ulong i = get_global_id(0);
    if (i >= n)
        return;
    out += out_off + 4 * i;
    ctr += ctr_off + 4 * i;
    key += key_off + 2 * i;
    uint4 r = clf_philox4x32_10((uint4)(ctr[0], ctr[1], ctr[2], ctr[3]), (uint2)(key[0], key[1]));
    out[0] = r.x;
    out[1] = r.y;
    out[2] = r.z;
    out[3] = r.w;
}

/* out[i] = keep(i) ? in[i] * scale : 0 for i < n; out may alias in. Used for
 * both directions (backward applies the same mask to the gradient). */
__kernel void dropout(__global float *out, ulong out_off, __global const float *in, ulong in_off,
                      ulong n, uint thr, float scale, uint key0, uint key1, uint s0, uint s1)
{
    ulong g = get_global_id(0);
    ulong base = 4 * g;
    if (base >= n)
        return;
    out += out_off + base;
    in += in_off + base;
    uint4 r = clf_philox4x32_10((uint4)((uint)g, (uint)(g >> 32), s0, s1), (uint2)(key0, key1));
    if (base + 4 <= n) {
        float a = in[0], b = in[1], c = in[2], d = in[3];
        out[0] = r.x >= thr ? a * scale : 0.0f;
        out[1] = r.y >= thr ? b * scale : 0.0f;
        out[2] = r.z >= thr ? c * scale : 0.0f;
        out[3] = r.w >= thr ? d * scale : 0.0f;
    } else { /* the last 1 to 3 elements */
        ulong m = n - base;
        out[0] = r.x >= thr ? in[0] * scale : 0.0f;
        if (m > 1)
            out[1] = r.y >= thr ? in[1] * scale : 0.0f;
        if (m > 2)
            out[2] = r.z >= thr ? in[2] * scale : 0.0f;
    }
}
