/*
 * model_extra.cl - kernels the model graph needs beyond the op families:
 * writing new keys/values into a KV cache.
 *
 * kv_store: src holds rows [B, T, row_stride] with head h of a row at
 * columns [h*HS, (h+1)*HS) (k or v inside the fused qkv output, after
 * rope); the cache is [B, NH, Tmax, HS] and position t of (b, h) goes to
 * cache row pos0 + t. One work-item per float, in source order (reads
 * contiguous); 32-bit indices (the host checks the sizes fit).
 *
 * Not here: attention itself (attention.cl: attn_decode reads the cache).
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
