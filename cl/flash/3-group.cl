/* flash/3-group.cl - the work-group shape of every pass, for devices that
 * run work-items in lockstep (0-shared.cl describes the family). */

/* ---- the work-group (tile) shape, for devices that run work-items in lockstep ----
 * One work-group of G work-items (the launch's local size) takes G query
 * rows (forward, dq pass) or G keys (dk/dv pass) of one (b, h), a work-item
 * one row. The other side streams through local memory in tiles of BC rows
 * loaded cooperatively (consecutive work-items read consecutive floats of a
 * row: coalesced), with two barriers per tile: one before a tile is
 * overwritten (every work-item is done reading the previous one) and one
 * after it is loaded. Every work-item reaches every barrier (rows past the
 * end compute on a clamped row and store nothing; the host launches exactly
 * the groups needed, no early return). Tiles outside the group's causal or
 * window band are skipped; per-element masks, ALiBi and dropout as in the
 * blocked shape (dropout draws one Philox word per element). Local memory: 2*BC*HS floats
 * (forward, dq) or 2*BC*(HS + 1) (dk/dv); the host picks BC <= FA_GBC. */

/* Dropout keep decision of element i (random.cl's dropout, one element). */
static inline int fa_keep1(ulong i, uint thr, uint seed0, uint seed1, uint st0, uint st1)
{
    return fa_philox_word(i, st0, st1, seed0, seed1) >= thr;
}

/* Whether query row t (absolute position tq, in segment qseg) sees key s. */
static inline int fa_sees(int tq, int qseg, int s, __global const int *kp, int has_keep,
                          int causal, uint window, uint glob, uint stride, __global const int *spt,
                          uint sp_bs, uint sp_R)
{
    return (!has_keep || (has_keep == 2 ? kp[s] == qseg : kp[s] != 0)) && (!causal || s <= tq) &&
           (!window || s + (int)window > tq ||
            (sp_bs && fa_sparse1(tq, s, glob, stride, spt, sp_bs, sp_R)));
}

__kernel void attn_flash_fwd_group(__global fa_st *y, ulong y_off, ulong y_stride,
                                   __global float *lse, ulong lse_off, __global const fa_st *q,
                                   ulong q_off, ulong q_stride, __global const fa_st *k,
                                   ulong k_off, __global const fa_st *v, ulong v_off,
                                   ulong kv_stride, ulong kv_bstride, ulong kv_hstride,
                                   FA_MASK_PARAMS, uint BC, __local float *ks, __local float *vs)
{
    const uint G = get_local_size(0), lid = get_local_id(0);
    const uint nblk = (T + G - 1) / G, grp = get_group_id(0);
    const uint bh = grp / nblk, h = bh % NH, b = bh / NH;
    const uint t0 = (grp - bh * nblk) * G, nt = min(G, T - t0), t = t0 + min(lid, nt - 1);
    const int valid = lid < nt, tq = (int)t + (int)S - (int)T;
    __global const int *kp = keep + keep_off + (ulong)b * keep_stride;
    const int qseg = has_keep == 2 ? kp[tq] : 0;
    __global const fa_st *kb = k + k_off + (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride;
    __global const fa_st *vb = v + v_off + (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride;
    __global const fa_st *qr = q + q_off + ((ulong)b * T + t) * q_stride + (ulong)h * HS;
    const float slope = alibi ? clf_alibi_slope(h, NH) : 0.0f;
    __global const float *rbf = rb + rb_off + (ulong)h * 2 * rb_w;
    __global const float *qrr = rqr + rqr_off + ((ulong)bh * T + t) * rqr_w;
    const ulong irow = ((ulong)bh * T + t) * S;
    float qv[FA_HS_MAX], acc[FA_HS_MAX], sc[FA_GBC];
    for (uint d = 0; d < HS; d++) {
        qv[d] = FA_LD(qr, d) * scale;
        acc[d] = 0.0f;
    }
    int lo, hi;
    fa_key_range(&lo, &hi, t0, nt, T, S, causal, sp_bs ? 0u : window);
    float m = CLF_NEG_BIG, l = 0.0f;
    for (int s0 = lo; s0 < hi; s0 += (int)BC) {
        const int nc = min((int)BC, hi - s0);
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile is no longer read */
        for (uint i = lid; i < (uint)nc * HS; i += G) {
            const uint r = i / HS, d = i - r * HS;
            ks[i] = FA_LD(kb, (ulong)(s0 + (int)r) * kv_stride + d);
            vs[i] = FA_LD(vb, (ulong)(s0 + (int)r) * kv_stride + d);
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* the tile is loaded */
        float mt = m;
        for (int c = 0; c < nc; c++) {
            const int s = s0 + c;
            float a = CLF_NEG_BIG;
            if (fa_sees(tq, qseg, s, kp, has_keep, causal, window, glob, stride, sp + sp_off, sp_bs, sp_R)) {
                a = 0.0f;
                for (uint d = 0; d < HS; d++)
                    a += qv[d] * ks[c * HS + d];
                a -= slope * (float)abs(tq - s);
                if (rb_w)
                    a += rbf[(int)t - s + (int)S - 1];
                if (rqr_w)
                    a += qrr[clamp(s - tq, -(int)rel_k, (int)rel_k) + (int)rel_k];
                mt = fmax(mt, a);
            }
            sc[c] = a;
        }
        const float corr = clf_exp_nonpos(m - mt);
        l *= corr;
        for (uint d = 0; d < HS; d++)
            acc[d] *= corr;
        for (int c = 0; c < nc; c++) {
            const int s = s0 + c;
            float p = fa_sees(tq, qseg, s, kp, has_keep, causal, window, glob, stride, sp + sp_off, sp_bs, sp_R) ? clf_exp_nonpos(sc[c] - mt) : 0.0f;
            l += p;
            if (FA_DROPOUT && p != 0.0f)
                p = fa_keep1(irow + (ulong)s, drop_thr, seed0, seed1, stream0, stream1)
                        ? p * drop_scale
                        : 0.0f;
            if (p != 0.0f)
                for (uint d = 0; d < HS; d++)
                    acc[d] += p * vs[c * HS + d];
        }
        m = mt;
    }
    if (valid) {
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        __global fa_st *yr = y + y_off + ((ulong)b * T + t) * y_stride + (ulong)h * HS;
        for (uint d = 0; d < HS; d++)
            FA_SV(yr, d, acc[d] * inv);
        lse[lse_off + (ulong)bh * T + t] = l > 0.0f ? m + log(l) : -INFINITY;
    }
}

__kernel void attn_flash_bwd_dq_group(FA_BWD_PARAMS, uint BC, __local float *ks,
                                      __local float *vs)
{
    const uint G = get_local_size(0), lid = get_local_id(0);
    const uint nblk = (T + G - 1) / G, grp = get_group_id(0);
    const uint bh = grp / nblk, h = bh % NH, b = bh / NH;
    const uint t0 = (grp - bh * nblk) * G, nt = min(G, T - t0), t = t0 + min(lid, nt - 1);
    const int valid = lid < nt, tq = (int)t + (int)S - (int)T;
    __global const int *kp = keep + keep_off + (ulong)b * keep_stride;
    const int qseg = has_keep == 2 ? kp[tq] : 0;
    __global const fa_st *kb = k + k_off + (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride;
    __global const fa_st *vb = v + v_off + (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride;
    const ulong row = ((ulong)b * T + t) * y_stride + (ulong)h * HS;
    __global const fa_st *qr = q + q_off + ((ulong)b * T + t) * q_stride + (ulong)h * HS;
    const float slope = alibi ? clf_alibi_slope(h, NH) : 0.0f;
    __global const float *rbf = rb + rb_off + (ulong)h * 2 * rb_w;
    const ulong irow = ((ulong)bh * T + t) * S;
    float qv[FA_HS_MAX], gv[FA_HS_MAX], acc[FA_HS_MAX], bacc[FA_NBK_MAX], racc[FA_QRW_MAX];
    for (uint i = 0; i < nbk; i++)
        bacc[i] = 0.0f;
    for (uint i = 0; i < rqr_w; i++)
        racc[i] = 0.0f;
    __global const float *qrr = rqr + rqr_off + ((ulong)bh * T + t) * rqr_w;
    float D = 0.0f;
    for (uint d = 0; d < HS; d++) {
        qv[d] = FA_LD(qr, d) * scale;
        gv[d] = FA_LD(dy, dy_off + row + d);
        D += gv[d] * FA_LD(y, y_off + row + d);
        acc[d] = 0.0f;
    }
    const float L = lse[lse_off + (ulong)bh * T + t];
    const int seen = L > CLF_NEG_BIG;
    int lo, hi;
    fa_key_range(&lo, &hi, t0, nt, T, S, causal, sp_bs ? 0u : window);
    for (int s0 = lo; s0 < hi; s0 += (int)BC) {
        const int nc = min((int)BC, hi - s0);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint i = lid; i < (uint)nc * HS; i += G) {
            const uint r = i / HS, d = i - r * HS;
            ks[i] = FA_LD(kb, (ulong)(s0 + (int)r) * kv_stride + d);
            vs[i] = FA_LD(vb, (ulong)(s0 + (int)r) * kv_stride + d);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int c = 0; c < nc && seen; c++) {
            const int s = s0 + c;
            if (!fa_sees(tq, qseg, s, kp, has_keep, causal, window, glob, stride, sp + sp_off, sp_bs, sp_R))
                continue;
            float a = 0.0f, dp = 0.0f;
            for (uint d = 0; d < HS; d++) {
                a += qv[d] * ks[c * HS + d];
                dp += gv[d] * vs[c * HS + d];
            }
            a -= slope * (float)abs(tq - s);
            const int bi = (int)t - s + (int)S - 1;
            if (rb_w)
                a += rbf[bi];
            const int ci = clamp(s - tq, -(int)rel_k, (int)rel_k) + (int)rel_k;
            if (rqr_w)
                a += qrr[ci];
            if (FA_DROPOUT)
                dp = fa_keep1(irow + (ulong)s, drop_thr, seed0, seed1, stream0, stream1)
                         ? dp * drop_scale
                         : 0.0f;
            const float ds = clf_exp_nonpos(a - L) * (dp - D);
            if (nbk)
                bacc[rbk[rbk_off + (ulong)bi]] += ds;
            if (rqr_w)
                racc[ci] += ds;
            for (uint d = 0; d < HS; d++)
                acc[d] += ds * ks[c * HS + d];
        }
    }
    if (valid) {
        __global fa_st *dqrow = dq + dq_off + ((ulong)b * T + t) * dq_stride + (ulong)h * HS;
        for (uint d = 0; d < HS; d++)
            FA_SV(dqrow, d, scale * acc[d]);
        dsum[dsum_off + (ulong)bh * T + t] = D;
        for (uint i = 0; i < nbk; i++)
            drb[drb_off + (((ulong)b * T + t) * NH + h) * nbk + i] = bacc[i];
        for (uint i = 0; i < rqr_w; i++)
            dqr[dqr_off + ((ulong)bh * T + t) * rqr_w + i] = racc[i];
    }
}

__kernel void attn_flash_bwd_dkv_group(FA_BWD_PARAMS, uint BC, __local float *qs,
                                       __local float *gs)
{
    const uint G = get_local_size(0), lid = get_local_id(0);
    const uint nblk = (S + G - 1) / G, grp = get_group_id(0);
    const uint bh = grp / nblk, h = bh % NH, b = bh / NH;
    const uint s0 = (grp - bh * nblk) * G, ns = min(G, S - s0), s = s0 + min(lid, ns - 1);
    const int valid = lid < ns, off = (int)S - (int)T;
    __local float *Ls = qs + BC * HS, *Ds = gs + BC * HS; /* after the tiles' rows */
    const ulong kv0 = (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride + (ulong)s * kv_stride;
    const float slope = alibi ? clf_alibi_slope(h, NH) : 0.0f;
    __global const float *rbr = rb + rb_off + (ulong)h * 2 * rb_w + rb_w;
    float kv[FA_HS_MAX], vv[FA_HS_MAX], ak[FA_HS_MAX], av[FA_HS_MAX];
    for (uint d = 0; d < HS; d++) {
        kv[d] = FA_LD(k, k_off + kv0 + d) * scale;
        vv[d] = FA_LD(v, v_off + kv0 + d);
        ak[d] = 0.0f;
        av[d] = 0.0f;
    }
    const int kept = !has_keep || keep[keep_off + (ulong)b * keep_stride + s] != 0;
    /* the queries that may see keys [s0, s0 + ns) */
    int tlo = 0, thi = (int)T;
    if (causal) {
        tlo = max(0, (int)s0 - off);
        if (window && !sp_bs)
            thi = min((int)T, (int)(s0 + ns - 1) + (int)window - off);
    }
    for (int t0 = tlo; t0 < thi; t0 += (int)BC) {
        const int nq = min((int)BC, thi - t0);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint i = lid; i < (uint)nq * HS; i += G) {
            const uint r = i / HS, d = i - r * HS;
            const ulong tr = (ulong)b * T + (ulong)(t0 + (int)r);
            qs[i] = FA_LD(q, q_off + tr * q_stride + (ulong)h * HS + d);
            gs[i] = FA_LD(dy, dy_off + tr * y_stride + (ulong)h * HS + d);
        }
        for (uint i = lid; i < (uint)nq; i += G) {
            Ls[i] = lse[lse_off + (ulong)bh * T + (ulong)(t0 + (int)i)];
            Ds[i] = dsum[dsum_off + (ulong)bh * T + (ulong)(t0 + (int)i)];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int c = 0; c < nq && kept; c++) {
            const int tq = t0 + c + off;
            const float L = Ls[c];
            if (!(L > CLF_NEG_BIG) || (causal && (int)s > tq) ||
                (window && (int)s + (int)window <= tq &&
                 !(sp_bs && fa_sparse1(tq, (int)s, glob, stride, sp + sp_off, sp_bs, sp_R))) ||
                (has_keep == 2 && keep[keep_off + (ulong)b * keep_stride + (ulong)tq] !=
                                      keep[keep_off + (ulong)b * keep_stride + s]))
                continue;
            float a = 0.0f, dp = 0.0f;
            for (uint d = 0; d < HS; d++) {
                a += qs[c * HS + d] * kv[d];
                dp += gs[c * HS + d] * vv[d];
            }
            a -= slope * (float)abs(tq - (int)s);
            if (rb_w)
                a += rbr[(int)s - (t0 + c) + (int)T - 1];
            if (rqr_w)
                a += rqr[rqr_off + ((ulong)bh * T + (ulong)(t0 + c)) * rqr_w +
                        (ulong)(clamp((int)s - tq, -(int)rel_k, (int)rel_k) + (int)rel_k)];
            float p = clf_exp_nonpos(a - L), pm = p;
            if (FA_DROPOUT) {
                const int kw = fa_keep1(((ulong)bh * T + (ulong)(t0 + c)) * S + s, drop_thr, seed0,
                                        seed1, stream0, stream1);
                dp = kw ? dp * drop_scale : 0.0f;
                pm = kw ? p * drop_scale : 0.0f;
            }
            const float ds = p * (dp - Ds[c]);
            for (uint d = 0; d < HS; d++) {
                ak[d] += ds * qs[c * HS + d];
                av[d] += pm * gs[c * HS + d];
            }
        }
    }
    if (valid) {
        const ulong r = ((ulong)b * S + s) * dkv_stride + (ulong)h * HS;
        for (uint d = 0; d < HS; d++) {
            FA_SV(dk, dk_off + r + d, scale * ak[d]);
            FA_SV(dv, dv_off + r + d, av[d]);
        }
    }
}

/* Grouped-query attention's dk and dv: K/V head g's gradient is the sum,
 * in head order, of its kv_group query heads' (the dk/dv pass wrote those
 * per query head into full: rows of 2 * NH * HS, dk's heads then dv's).
 * One work-item per element of dk (and of dv). */
__kernel void attn_flash_kv_sum(__global fa_st *dk, ulong dk_off, __global fa_st *dv, ulong dv_off,
                                ulong dkv_stride, __global const fa_st *full, ulong full_off,
                                ulong rows, uint NH, uint kv_group, uint HS)
{
    const uint KVH = NH / kv_group;
    const ulong i = get_global_id(0);
    if (i >= rows * KVH * HS)
        return;
    const ulong r = i / ((ulong)KVH * HS);
    const uint e = (uint)(i - r * KVH * HS), g = e / HS, d = e - g * HS;
    const ulong src = full_off + r * 2 * NH * HS + (ulong)g * kv_group * HS + d;
    float sk = 0.0f, sv = 0.0f;
    for (uint j = 0; j < kv_group; j++) {
        sk += FA_LD(full, src + (ulong)j * HS);
        sv += FA_LD(full, src + (ulong)NH * HS + (ulong)j * HS);
    }
    const ulong dst = r * dkv_stride + (ulong)g * HS + d;
    FA_SV(dk, dk_off + dst, sk);
    FA_SV(dv, dv_off + dst, sv);
}
