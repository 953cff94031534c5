/*
 * model_extra.cl - kernels the model graph needs beyond the op families:
 * writing new keys/values into a KV cache, mean pooling over non-pad
 * positions, and gathering cache rows by index (single-query attention,
 * with or without a keep mask, is attention.cl's attn_decode).
 *
 * kv_store: src holds rows [B, T, row_stride] with head h of a row at
 * columns [h*HS, (h+1)*HS) (k or v inside the fused qkv output, after
 * rope); the cache is [B, NH, Tmax, HS] and position t of (b, h) goes to
 * cache row pos0 + t. One work-item per float, in source order (reads
 * contiguous); 32-bit indices (the host checks the sizes fit).
 *
 * mean_pool_forward / _backward: out[b, c] = sum_s keep[b,s] x[b,s,c] /
 * max(1, sum_s keep[b,s]), and its transpose dx[b,s,c] = keep[b,s]
 * dout[b,c] / count (overwrite). One work-item per (b, c), looping over s
 * in order (deterministic); consecutive items read consecutive channels.
 *
 * cache_gather: dst row i <- src row index[i] (use_index = 0: row i) for
 * rows of G groups of `len` elements with `stride` elements between groups
 * (a cache [B, NH, Tmax, HS]: G = NH, stride = Tmax*HS, len = positions
 * used * HS). Elements move as 32-bit words (uint), so float and int32
 * buffers (the source keep mask) are copied bit for bit.
 *
 * Not here: full-sequence attention (GEMMs + softmax in model/), the
 * unmasked decode attention (attention.cl).
 */
__kernel void kv_store(__global float *cache, ulong cache_off, __global const float *src,
                       ulong src_off, uint n, uint T, uint NH, uint HS, uint row_stride,
                       uint Tmax, uint pos0)
{
    uint i = get_global_id(0);
    if (i >= n)
        return;
    cache += cache_off;
    src += src_off;
    uint d = i % HS;
    uint h = (i / HS) % NH;
    uint bt = i / (HS * NH);
    uint t = bt % T;
    uint b = bt / T;
    cache[(((ulong)b * NH + h) * Tmax + pos0 + t) * HS + d] = src[(ulong)bt * row_stride + h * HS + d];
}

/* One item per (b, c): n = B*C. */
__kernel void mean_pool_forward(__global float *out, ulong out_off, __global const float *x,
                                ulong x_off, __global const int *keep, ulong keep_off, uint n,
                                uint S, uint C)
{
    uint i = get_global_id(0);
    if (i >= n)
        return;
    uint b = i / C, c = i - b * C;
    x += x_off + (ulong)b * S * C + c;
    keep += keep_off + (ulong)b * S;
    float acc = 0.0f;
    uint cnt = 0;
    for (uint s = 0; s < S; s++) {
        if (keep[s] != 0) {
            acc += x[(ulong)s * C];
            cnt++;
        }
    }
    out[out_off + i] = acc / (float)max(cnt, 1u);
}

__kernel void mean_pool_backward(__global float *dx, ulong dx_off, __global const float *dout,
                                 ulong dout_off, __global const int *keep, ulong keep_off,
                                 uint n, uint S, uint C)
{
    uint i = get_global_id(0);
    if (i >= n)
        return;
    uint b = i / C, c = i - b * C;
    dx += dx_off + (ulong)b * S * C + c;
    keep += keep_off + (ulong)b * S;
    uint cnt = 0;
    for (uint s = 0; s < S; s++)
        cnt += keep[s] != 0;
    float g = dout[dout_off + i] / (float)max(cnt, 1u);
    for (uint s = 0; s < S; s++)
        dx[(ulong)s * C] = keep[s] != 0 ? g : 0.0f;
}

/* n = rows * G * len items; item (i, g, j) copies src[(r*G + g)*stride + j]
 * to dst[(i*G + g)*stride + j] with r = index[i] (or i). */
__kernel void cache_gather(__global uint *dst, ulong dst_off, __global const uint *src,
                           ulong src_off, __global const int *index, ulong index_off,
                           int use_index, uint n, uint G, uint len, uint stride)
{
    uint e = get_global_id(0);
    if (e >= n)
        return;
    uint j = e % len, ig = e / len;
    uint g = ig % G, i = ig / G;
    uint r = use_index ? (uint)index[index_off + i] : i;
    dst[dst_off + ((ulong)i * G + g) * stride + j] = src[src_off + ((ulong)r * G + g) * stride + j];
}
