/*
 * embed.cl - token embeddings, learned/sinusoidal positions, rotary embedding.
 *
 * Work split: the embedding kernels give one work-item a "span" of
 * consecutive channels of one row (gid -> row = gid / nspan, channels
 * [part*span, ...)). The host picks span = the whole row on CPUs (float8
 * loops, no per-element index division) and span = 1 on GPUs (one element
 * per work-item, coalesced). sinusoid_add has one work-item per (t, channel
 * pair); rope one per (batch chunk, t, i) with the chunk = B on CPUs, 1 on
 * GPUs.
 *
 * Embedding backward is deterministic without atomics: the work-item owning
 * (vocabulary row v, channel span) scans every token in order and adds the
 * rows whose token is v, so each dwte element is summed in a fixed order.
 * Cost: V*BT token compares per span plus BT*C adds; fine for vocabularies up
 * to a few thousand (a sort-based scheme would be needed for 50k vocabularies).
 *
 * Sinusoidal positions follow PyTorch's tutorial in float32:
 * div = exp((float)(c & ~1) * k), k = (float)(-ln(10000)/C); even c sin,
 * odd c cos of (float)p * div. RoPE follows HF Llama (rotate_half): angle =
 * (float)p * inv_freq, inv_freq = theta^(-2i/HS) in float32 (computed as
 * exp2 of a product with log2(theta), within a few ulp of HF's pow). Both
 * compute each sincos once and apply it to the whole batch (sin and cos are
 * the expensive part on CPUs).
 *
 * Token ids outside [0, V) embed as zeros and get no gradient (the forward op
 * knows no V, so there only negative ids are caught).
 *
 * Not here: fp16, a cos/sin table cached across calls.
 */

/* Span helpers: float8 vectors (vload8/vstore8 need only float alignment)
 * and a scalar tail; PoCL does not vectorise these loops by itself because
 * the pointers may alias. o[d] = a * s[d] (+ p[d]) and o[d] += a * s[d]. */
static void clf_span_scale_add(__global float *o, float a, __global const float *s,
                        __global const float *p, uint n)
{
    uint d = 0;
    if (p) {
        for (; d + 8 <= n; d += 8)
            vstore8(a * vload8(0, s + d) + vload8(0, p + d), 0, o + d);
        for (; d < n; d++)
            o[d] = a * s[d] + p[d];
    } else {
        for (; d + 8 <= n; d += 8)
            vstore8(a * vload8(0, s + d), 0, o + d);
        for (; d < n; d++)
            o[d] = a * s[d];
    }
}

static void clf_span_axpy(__global float *o, float a, __global const float *s, uint n)
{
    uint d = 0;
    for (; d + 8 <= n; d += 8)
        vstore8(vload8(0, o + d) + a * vload8(0, s + d), 0, o + d);
    for (; d < n; d++)
        o[d] += a * s[d];
}

/* out[bt, :] = scale * wte[tok[bt], :] (+ wpe[p, :]), p = pos[bt] with has_pos (packed
 * documents: positions restart at each one), else pos0 + t; out-of-range ids give 0. */
__kernel void embed_forward(__global float *out, ulong out_off, __global const int *tok,
                            ulong tok_off, __global const float *wte, ulong wte_off,
                            __global const float *wpe, ulong wpe_off, int has_wpe, uint BT, uint T,
                            uint C, uint V, uint pos0, float scale, uint span, uint nspan,
                            __global const int *pos, ulong pos_off, int has_pos)
{
    uint gid = get_global_id(0);
    uint row = gid / nspan, part = gid - row * nspan;
    if (row >= BT)
        return;
    uint c0 = part * span, c1 = min(c0 + span, C);
    int id = tok[tok_off + row];
    out += out_off + (ulong)row * C;
    if (id < 0 || (uint)id >= V) {
        for (uint c = c0; c < c1; c++)
            out[c] = 0.0f;
        return;
    }
    __global const float *w = wte + wte_off + (ulong)id * C;
    __global const float *p = 0;
    if (has_wpe)
        p = wpe + wpe_off +
            (ulong)(has_pos ? (uint)pos[pos_off + row] : pos0 + row % T) * C + c0;
    clf_span_scale_add(out + c0, scale, w + c0, p, c1 - c0);
}

/* dwte[v, span] += scale * sum_{bt: tok[bt]==v} dout[bt, span], in token order. */
__kernel void embed_backward_wte(__global float *dwte, ulong dwte_off, __global const float *dout,
                                 ulong dout_off, __global const int *tok, ulong tok_off, uint BT,
                                 uint C, uint V, float scale, uint span, uint nspan)
{
    uint gid = get_global_id(0);
    uint v = gid / nspan, part = gid - v * nspan;
    if (v >= V)
        return;
    uint c0 = part * span, c1 = min(c0 + span, C);
    tok += tok_off;
    dout += dout_off;
    dwte += dwte_off + (ulong)v * C;
    if (span == 1) {
        float acc = 0.0f;
        for (uint bt = 0; bt < BT; bt++)
            if (tok[bt] == (int)v)
                acc += dout[(ulong)bt * C + c0];
        dwte[c0] += scale * acc;
        return;
    }
    for (uint bt = 0; bt < BT; bt++) {
        if (tok[bt] != (int)v)
            continue;
        clf_span_axpy(dwte + c0, scale, dout + (ulong)bt * C + c0, c1 - c0);
    }
}

/* dwpe[pos0 + t, span] += sum_b dout[b, t, span]; with has_pos, dwpe[p, span] += the sum
 * of the rows bt (in order) with pos[bt] = p, for p < T. */
__kernel void embed_backward_wpe(__global float *dwpe, ulong dwpe_off, __global const float *dout,
                                 ulong dout_off, uint B, uint T, uint C, uint pos0, uint span,
                                 uint nspan, __global const int *pos, ulong pos_off, int has_pos)
{
    uint gid = get_global_id(0);
    uint t = gid / nspan, part = gid - t * nspan;
    if (t >= T)
        return;
    uint c0 = part * span, c1 = min(c0 + span, C);
    if (has_pos) { /* the rows at position t, wherever they are */
        dwpe += dwpe_off + (ulong)t * C;
        dout += dout_off;
        pos += pos_off;
        const uint BT = B * T;
        if (span == 1) {
            float acc = 0.0f;
            for (uint bt = 0; bt < BT; bt++)
                if (pos[bt] == (int)t)
                    acc += dout[(ulong)bt * C + c0];
            dwpe[c0] += acc;
            return;
        }
        for (uint bt = 0; bt < BT; bt++)
            if (pos[bt] == (int)t)
                clf_span_axpy(dwpe + c0, 1.0f, dout + (ulong)bt * C + c0, c1 - c0);
        return;
    }
    dwpe += dwpe_off + (ulong)(pos0 + t) * C;
    dout += dout_off + (ulong)t * C;
    ulong bstride = (ulong)T * C;
    if (span == 1) {
        float acc = 0.0f;
        for (uint b = 0; b < B; b++)
            acc += dout[b * bstride + c0];
        dwpe[c0] += acc;
        return;
    }
    for (uint b = 0; b < B; b++)
        clf_span_axpy(dwpe + c0, 1.0f, dout + b * bstride + c0, c1 - c0);
}

/* x[b, t, 2j] += sin(p * div_j), x[b, t, 2j+1] += cos(p * div_j) for every b, with
 * p = pos0 + t (or pos[b*T + t] with has_pos), div_j = exp((float)(2j) * k), k =
 * (float)(-ln(10000)/C). One work-item per (t, j): one sincos for two channels and all
 * of the batch (with has_pos, one per row). */
__kernel void sinusoid_add(__global float *x, ulong x_off, uint B, uint T, uint C, uint pos0,
                           float k, __global const int *pos, ulong pos_off, int has_pos)
{
    uint npair = (C + 1) / 2;
    uint gid = get_global_id(0);
    uint t = gid / npair, j = gid - t * npair;
    if (t >= T)
        return;
    uint c = 2 * j;
    const float div = exp((float)c * k);
    float a = (float)(pos0 + t) * div;
    float cs;
    float sn = sincos(a, &cs);
    x += x_off + (ulong)t * C + c;
    ulong bstride = (ulong)T * C;
    if (has_pos) {
        for (uint b = 0; b < B; b++) {
            float pc;
            const float ps = sincos((float)pos[pos_off + (ulong)b * T + t] * div, &pc);
            x[b * bstride] += ps;
            if (c + 1 < C)
                x[b * bstride + 1] += pc;
        }
        return;
    }
    if (c + 1 < C) {
        for (uint b = 0; b < B; b++) {
            x[b * bstride] += sn;
            x[b * bstride + 1] += cs;
        }
    } else {
        for (uint b = 0; b < B; b++)
            x[b * bstride] += sn;
    }
}

/* Rotary embedding in place. One work-item per (batch chunk, t, i < HS/2): the
 * angle's sincos is computed once and applied to every head of `bspan`
 * batch rows (bspan = B on CPUs, 1 on GPUs); the position is pos0 + t, or
 * pos[b*T + t] with has_pos (packed documents: one sincos per row). Row
 * (b, t) starts at
 * (b*T + t) * row_stride. log2_theta = log2(theta), from the host in double:
 * inv_freq = 2^(-(2i/HS) * log2(theta)) = theta^(-2i/HS); with a factor
 * other than 1 it is blended with inv_freq / factor by the ramp over i
 * (clf_rope in model/ops/ops.h); mscale multiplies cos and sin. x is stored as
 * x_t (float32, or 16 bits: widened, rotated in float32, rounded back;
 * offsets and strides count its elements). */
__kernel void rope(__global float *x, ulong x_off, uint x_t, uint B, uint T, uint NH, uint HS,
                   uint row_stride, uint pos0, float log2_theta, float factor, float ramp_lo,
                   float ramp_hi, float mscale, int inverse, uint bspan,
                   __global const int *pos, ulong pos_off, int has_pos)
{
    uint hs2 = HS / 2;
    uint gid = get_global_id(0);
    uint ti = gid % (T * hs2), bc = gid / (T * hs2);
    uint t = ti / hs2, i = ti - t * hs2;
    uint b0 = bc * bspan;
    if (b0 >= B)
        return;
    uint b1 = min(b0 + bspan, B);
    const float inv_freq = rope_inv_freq(i, HS, log2_theta, factor, ramp_lo, ramp_hi);
    const float2 e0 = rope_cs((float)(pos0 + t), inv_freq, mscale, inverse);
    for (uint b = b0; b < b1; b++) {
        /* packed documents: this row's own position (no state carried
         * between rows: Intel's CPU compiler got a cached sincos wrong) */
        const float2 e = has_pos ? rope_cs((float)pos[pos_off + (ulong)b * T + t], inv_freq, mscale,
                                           inverse)
                                 : e0;
        const float cs = e.x, sn = e.y;
        const ulong xr = x_off + ((ulong)b * T + t) * row_stride + i;
        for (uint h = 0; h < NH; h++) {
            const ulong r = xr + h * HS;
            float x1 = clf_load_t(x, x_t, r), x2 = clf_load_t(x, x_t, r + hs2);
            clf_store_t(x, x_t, r, x1 * cs - x2 * sn);
            clf_store_t(x, x_t, r + hs2, x2 * cs + x1 * sn);
        }
    }
}
