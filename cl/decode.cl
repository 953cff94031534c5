/*
 * decode.cl - decoding's pre-attention norm, its qkv linear and the new
 * position's attention in one launch, for devices whose work-groups run item
 * by item (CPUs), where a launch costs more than the norm and the attention
 * of a small model together: a launch fewer per layer and token, or three
 * fewer with rotary positions.
 *
 * A family of its own so that devices that never take this path (GPUs, and
 * implementations that run groups in parallel) never compile it: it is the
 * largest kernel of the decoding path to compile (PoCL 3.1: about 10 s).
 * The pieces it is made of are shared through common.cl with the kernels it
 * stands in for: norm.cl's norm_dot_item (clf_norm_dot_cols and the row
 * statistics), embed.cl's rope (rope_head) and attention.cl's
 * attn_decode_item (attn_item_pass), so its results are theirs bit for bit.
 *
 * Not here: the unfused kernels (norm.cl, embed.cl, attention.cl).
 */

/* attn_qkv_decode_item: decoding's pre-attention norm, its fused qkv linear
 * and the attention of the new position in one launch, for devices whose
 * work-groups run item by item: one work-item per (b, K/V head j). Row b of
 * x [B, C] is normalised as norm_dot_item normalises it (LayerNorm with nw
 * and optional nb, or RMSNorm with nw) and multiplied by the rows of W
 * [NH*HS + 2*KVH*HS, C] (q's heads, then k's, then v's; KVH = NH / grp)
 * that head j needs, plus bias (has_bias): k and v of head j go to position
 * L - 1 of the caches [B, KVH, Tmax, HS], then each of the grp query heads
 * h = j*grp + i attends to positions [lo, L) as attn_decode_item does with
 * P = 1 (the same sums in the same order: the qkv columns as norm_dot_item
 * computes them, the scores and the online softmax as attn_item_pass) and
 * writes out row b*NH + h [HS]. The work-item reads back the cache rows it
 * wrote; no other work-item reads them. With rope, q and k are rotated at
 * position L - 1 first, as embed.cl's rope rotates them (log2_theta ..
 * mscale: its arguments). No keep mask or relative bias (the host keeps
 * those on the unfused path); ALiBi with alibi. NDRange B*KVH. */
__kernel void attn_qkv_decode_item(__global float *out, ulong out_off, __global const float *x,
                                   ulong x_off, __global const float *nw, ulong nw_off,
                                   __global const float *nb, ulong nb_off, int has_nb, int rms,
                                   float eps, __global const float *W, ulong w_off,
                                   __global const float *bias, ulong bias_off, int has_bias,
                                   __global float *kc, ulong k_off, __global float *vc,
                                   ulong v_off, uint B, uint NH, uint grp, uint HS, uint C,
                                   uint Tmax, uint lo, uint L, float scale, int alibi, int rope,
                                   float log2_theta, float rfactor, float ramp_lo, float ramp_hi,
                                   float mscale)
{
    const uint g = get_global_id(0), KVH = NH / grp;
    if (g >= B * KVH || HS > ATTN_ITEM_HS_MAX || L == 0)
        return;
    const uint b = g / KVH, j = g - b * KVH;
    x += x_off + (ulong)b * C;
    nw += nw_off;
    nb += nb_off;
    W += w_off;
    bias += bias_off;
    const float2 st = rms ? (float2)(0.0f, rms_rstd_item(x, C, eps)) : ln_stats_item(x, C, eps);
    const float m = st.x, rs = st.y;
    __global float *kb = kc + k_off + (ulong)g * Tmax * HS; /* g = b*KVH + j */
    __global float *vb = vc + v_off + (ulong)g * Tmax * HS;
    const ulong q0 = (ulong)j * grp * HS, k0 = (ulong)NH * HS + (ulong)j * HS,
                v0 = (ulong)NH * HS + (ulong)KVH * HS + (ulong)j * HS;
    float s[CLF_NORM_DOT_N], qs[ATTN_ITEM_HS_MAX], acc[ATTN_ITEM_HS_MAX];
    for (uint d0 = 0; d0 < HS; d0 += CLF_NORM_DOT_N) { /* k (in acc until rotated), v */
        const uint n = min((uint)CLF_NORM_DOT_N, HS - d0);
        clf_norm_dot_cols(s, x, m, rs, rms, nw, nb, has_nb, W + (k0 + d0) * C, n, C);
        for (uint c = 0; c < n; c++)
            acc[d0 + c] = has_bias ? s[c] + bias[k0 + d0 + c] : s[c];
        clf_norm_dot_cols(s, x, m, rs, rms, nw, nb, has_nb, W + (v0 + d0) * C, n, C);
        for (uint c = 0; c < n; c++)
            vb[(ulong)(L - 1) * HS + d0 + c] = has_bias ? s[c] + bias[v0 + d0 + c] : s[c];
    }
    if (rope)
        rope_head(acc, HS, (float)(L - 1), log2_theta, rfactor, ramp_lo, ramp_hi, mscale);
    for (uint d = 0; d < HS; d++)
        kb[(ulong)(L - 1) * HS + d] = acc[d];
    for (uint i = 0; i < grp; i++) {
        const uint h = j * grp + i;
        const ulong qh = q0 + (ulong)i * HS;
        for (uint d0 = 0; d0 < HS; d0 += CLF_NORM_DOT_N) {
            const uint n = min((uint)CLF_NORM_DOT_N, HS - d0);
            clf_norm_dot_cols(s, x, m, rs, rms, nw, nb, has_nb, W + (qh + d0) * C, n, C);
            for (uint c = 0; c < n; c++)
                qs[d0 + c] = has_bias ? s[c] + bias[qh + d0 + c] : s[c];
        }
        if (rope)
            rope_head(qs, HS, (float)(L - 1), log2_theta, rfactor, ramp_lo, ramp_hi, mscale);
        for (uint d = 0; d < HS; d++)
            qs[d] *= scale;
        for (uint d = 0; d < HS; d++)
            acc[d] = 0.0f;
        float mx = CLF_NEG_BIG, l = 0.0f;
        attn_item_pass(acc, &mx, &l, qs, kb, vb, kb, vb, 0xFFFFFFFFu, (__global const int *)kb,
                       0, lo, L, L, HS, alibi ? clf_alibi_slope(h, NH) : 0.0f, kb, 0, kb, 0, 0);
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        __global float *o = out + out_off + ((ulong)b * NH + h) * HS;
        for (uint d = 0; d < HS; d++)
            o[d] = acc[d] * inv;
    }
}

