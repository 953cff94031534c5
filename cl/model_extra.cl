/*
 * model_extra.cl - kernels the model graph needs beyond the op families:
 * writing new keys/values into a KV cache, single-query attention over a
 * padded (keep-masked) cache, mean pooling over non-pad positions, and
 * gathering cache rows by index.
 *
 * kv_store: src holds rows [B, T, row_stride] with head h of a row at
 * columns [h*HS, (h+1)*HS) (k or v inside the fused qkv output, after
 * rope); the cache is [B, NH, Tmax, HS] and position t of (b, h) goes to
 * cache row pos0 + t. One work-item per float, in source order (reads
 * contiguous); 32-bit indices (the host checks the sizes fit).
 *
 * attn_decode_keep: attention.cl's attn_decode with a keep mask over the
 * L cached positions (int32 keep[b * keep_stride + s], 0 = pad), for
 * cross-attention from one decoder position over the encoded source. One
 * work-group per (b, head): scores into local memory, a fixed reduction
 * tree for the max and the sum (deterministic), then the weighted sum of
 * values split as (channel, position class). Masked positions get weight
 * exactly 0; a row with nothing kept gives zeros, not NaN.
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

/* q [BH, HS], k/v [BH, Tmax, HS], out [BH, HS]; group bh = b*NH + h. Local:
 * qs[HS], sc[L], red[W]. */
__kernel void attn_decode_keep(__global float *out, ulong out_off, __global const float *q,
                               ulong q_off, __global const float *kc, ulong k_off,
                               __global const float *vc, ulong v_off, __global const int *keep,
                               ulong keep_off, uint keep_stride, uint BH, uint NH, uint HS,
                               uint Tmax, uint L, float scale, __local float *qs,
                               __local float *sc, __local float *red)
{
    uint bh = get_group_id(0), lid = get_local_id(0), W = get_local_size(0);
    if (bh >= BH)
        return; /* uniform over the group */
    q += q_off + (ulong)bh * HS;
    kc += k_off + (ulong)bh * Tmax * HS;
    vc += v_off + (ulong)bh * Tmax * HS;
    out += out_off + (ulong)bh * HS;
    keep += keep_off + (ulong)(bh / NH) * keep_stride;
    for (uint d = lid; d < HS; d += W)
        qs[d] = q[d];
    barrier(CLK_LOCAL_MEM_FENCE);

    /* scores of kept positions and their max */
    float mx = CLF_NEG_BIG;
    for (uint s = lid; s < L; s += W) {
        float a = CLF_NEG_BIG;
        if (keep[s] != 0) {
            __global const float *kr = kc + (ulong)s * HS;
            a = 0.0f;
            for (uint d = 0; d < HS; d++)
                a += qs[d] * kr[d];
            a *= scale;
        }
        sc[s] = a;
        mx = fmax(mx, a);
    }
    red[lid] = mx;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint o = W / 2; o > 0; o /= 2) {
        if (lid < o)
            red[lid] = fmax(red[lid], red[lid + o]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    mx = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);

    /* exponentials (0 for masked positions) and their sum */
    float sum = 0.0f;
    for (uint s = lid; s < L; s += W) {
        float e = keep[s] != 0 ? exp(sc[s] - mx) : 0.0f;
        sc[s] = e;
        sum += e;
    }
    red[lid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint o = W / 2; o > 0; o /= 2) {
        if (lid < o)
            red[lid] += red[lid + o];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float inv = red[0] > 0.0f ? 1.0f / red[0] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);

    /* weighted sum of values: parts position classes per channel */
    uint parts = HS >= W ? 1 : W / HS;
    uint d = lid % HS, part = lid / HS;
    float acc = 0.0f;
    if (parts == 1) {
        for (uint dd = lid; dd < HS; dd += W) {
            float a = 0.0f;
            for (uint s = 0; s < L; s++)
                a += sc[s] * vc[(ulong)s * HS + dd];
            out[dd] = a * inv;
        }
    } else if (part < parts) {
        for (uint s = part; s < L; s += parts)
            acc += sc[s] * vc[(ulong)s * HS + d];
    }
    red[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (parts > 1 && lid < HS) {
        float a = red[lid];
        for (uint p = 1; p < parts; p++)
            a += red[p * HS + lid];
        out[lid] = a * inv;
    }
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
