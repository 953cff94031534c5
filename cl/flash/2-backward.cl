/* flash/2-backward.cl - the blocked shape's backward passes, dq then dk/dv,
 * and its width for the host (0-shared.cl describes the family). */

/* ---- backward ---- */

/* Both passes take the same arguments (each reads what it needs), so the
 * host sets them once. dsum [B*NH, T]: D = dy.y per query row, written by
 * the dq pass and read by the dk/dv pass. */
#define FA_BWD_PARAMS                                                                             \
    __global fa_st *dq, ulong dq_off, __global fa_st *dk, ulong dk_off, __global fa_st *dv,        \
        ulong dv_off, ulong dq_stride, ulong dkv_stride, __global float *dsum, ulong dsum_off,   \
        __global const fa_st *dy, ulong dy_off, __global const fa_st *y, ulong y_off,            \
        ulong y_stride, __global const float *lse, ulong lse_off, __global const fa_st *q,       \
        ulong q_off, ulong q_stride, __global const fa_st *k, ulong k_off,                       \
        __global const fa_st *v, ulong v_off, ulong kv_stride, ulong kv_bstride,                 \
        ulong kv_hstride, __global const int *rbk, ulong rbk_off, __global float *drb,           \
        ulong drb_off, uint nbk, __global float *dqr, ulong dqr_off, FA_MASK_PARAMS

__kernel void attn_flash_bwd_dq(FA_BWD_PARAMS)
{
    const uint nblk = (T + FA_VW - 1) / FA_VW;
    const ulong gid = get_global_id(0);
    if (gid >= (ulong)B * NH * nblk)
        return;
    const uint bh = (uint)(gid / nblk), h = bh % NH, b = bh / NH;
    const uint t0 = (uint)(gid - (ulong)bh * nblk) * FA_VW, nt = min((uint)FA_VW, T - t0);
    const int off = (int)S - (int)T;
    __global const fa_st *kb = k + k_off + (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride;
    __global const fa_st *vb = v + v_off + (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride;
    __global const int *kp = keep + keep_off + (ulong)b * keep_stride;
    const ulong row0 = ((ulong)b * T + t0) * y_stride + (ulong)h * HS;

    faf qt[FA_HS_MAX], gt[FA_HS_MAX], sb[FA_CH]; /* vector-typed: aligned */
    faf qv[FA_HS_MAX]; /* y transposed for D, then dq's rows (qa) before the scale */
    float *qa = (float *)qv;
    fa_load_t(qt, q + q_off + ((ulong)b * T + t0) * q_stride + (ulong)h * HS, q_stride, nt, HS,
              scale);
    fa_load_t(gt, dy + dy_off + row0, y_stride, nt, HS, 1.0f);
    /* D = dy.y with lanes across the rows, summed over d in order: the same
     * sums as dp = dy.v in both passes, so a row that sees one key (y = v)
     * gets dp - D = 0 exactly and ds = 0, as the exact gradient has it (a
     * different order left rounding noise there, which Adam turns into
     * full-size steps on weights whose true gradient is small). */
    fa_load_t(qv, y + y_off + row0, y_stride, nt, HS, 1.0f);
    faf Dr = (faf)(0.0f);
    for (uint d = 0; d < HS; d++)
        Dr += gt[d] * qv[d];
    float Dv[FA_VW], Lv[FA_VW];
    FA_STORE(Dr, 0, Dv);
    for (uint r = 0; r < FA_VW; r++)
        Lv[r] = lse[lse_off + (ulong)bh * T + t0 + min(r, nt - 1)];
    const faf Lraw = FA_LOAD(0, Lv);
    const fai seen = Lraw > (faf)(CLF_NEG_BIG); /* rows that see some key */
    const faf L = select((faf)(0.0f), Lraw, seen);
    const fai tq = (fai)((int)t0 + off) + FA_IOTA;
    const fai qseg = fa_segs(kp, has_keep, (int)t0 + off, nt);
    const float slope = alibi ? clf_alibi_slope(h, NH) : 0.0f;
    __global const float *rbf = rb + rb_off + (ulong)h * 2 * rb_w;
    /* the relative bias's gradient: each row's ds summed by bucket */
    float bacc[FA_VW * FA_NBK_MAX];
    for (uint i = 0; i < FA_VW * nbk; i++)
        bacc[i] = 0.0f;
    __global const float *qrb = rqr + rqr_off + ((ulong)bh * T + t0) * rqr_w;
    /* Shaw's relative positions: each row's ds by clamped distance */
    float racc[FA_VW * FA_QRW_MAX];
    for (uint i = 0; i < FA_VW * rqr_w; i++)
        racc[i] = 0.0f;
    const fal irow = ((fal)((ulong)bh * T + t0) + FA_UL(FA_IOTA)) * (ulong)S;
    int lo, hi;
    fa_key_range(&lo, &hi, t0, nt, T, S, causal, sp_bs ? 0u : window);
    FA_SP_ROWS;

    int init = 0;
    for (int c0 = lo; c0 < hi; c0 += step) {
        const int ce = min(hi, c0 + step);
        int r0, r1;
        if (!fa_sp_chunk(c0, sp_bs, qb0, qb1, window, glob, stride, spt, sp_R, &r0, &r1))
            continue;
        /* ds = p (dp - D) for the chunk's keys */
        for (int s0 = c0; s0 < ce; s0 += FA_BC) {
            const int nc = min(FA_BC, ce - s0);
            int st = 0;
            if (sp_bs && !fa_sp_tile(tq0, tq1, s0, s0 + nc - 1, window, glob, stride, r0 | r1,
                                     &st)) { /* no row sees a key of the tile: ds = 0 */
                for (int c = 0; c < FA_BC; c++)
                    sb[s0 - c0 + c] = (faf)(0.0f);
                continue;
            }
            __global const fa_st *kr[FA_BC], *vr[FA_BC];
            faf sc[FA_BC], dp[FA_BC];
            #pragma unroll
            for (int c = 0; c < FA_BC; c++) {
                const ulong s = (ulong)(s0 + min(c, nc - 1));
                kr[c] = kb + s * kv_stride;
                vr[c] = vb + s * kv_stride;
                sc[c] = (faf)(0.0f);
                dp[c] = (faf)(0.0f);
            }
            /* two loops, not one: the sixteen row pointers of one loop did
             * not fit the registers (PoCL reloaded seven of them per step) */
            for (uint d = 0; d < HS; d++) {
                const faf qd = qt[d];
                #pragma unroll
                for (int c = 0; c < FA_BC; c++)
                    sc[c] += qd * FA_LD(kr[c], d);
            }
            for (uint d = 0; d < HS; d++) {
                const faf gd = gt[d];
                #pragma unroll
                for (int c = 0; c < FA_BC; c++)
                    dp[c] += gd * FA_LD(vr[c], d);
            }
            fai kw[FA_BC];
            if (FA_DROPOUT)
                fa_drop_rows(kw, irow + (ulong)s0, drop_thr, seed0, seed1, stream0, stream1);
            #pragma unroll
            for (int c = 0; c < FA_BC; c++) {
                const fai vis = fa_visible_rows(tq, qseg, s0 + c, c < nc, kp, has_keep, causal,
                                                window, glob, stride, sp_bs, st, r0, r1, qsplit) &
                                seen;
                if (alibi)
                    sc[c] -= slope * FA_F(abs(tq - (fai)(s0 + c)));
                const int bi = (int)t0 - (s0 + c) + (int)S - 1; /* t - s + S - 1 of lane 0 */
                if (rb_w && c < nc)
                    sc[c] += FA_LOAD(0, rbf + bi);
                const int d0 = s0 + c - ((int)t0 + off); /* s - tq of lane 0 */
                if (rqr_w)
                    sc[c] += fa_qr_rows(qrb, rqr_w, rel_k, d0, nt);
                const faf pc = select((faf)(0.0f), FA_EXP(sc[c] - L), vis);
                if (FA_DROPOUT)
                    dp[c] = select((faf)(0.0f), dp[c] * drop_scale, kw[c]);
                sb[s0 - c0 + c] = pc * (dp[c] - Dr); /* ds */
                if (nbk && c < nc) {
                    float dsv[FA_VW];
                    FA_STORE(sb[s0 - c0 + c], 0, dsv);
                    for (uint r = 0; r < nt; r++)
                        bacc[r * nbk + (uint)rbk[rbk_off + (ulong)(bi + (int)r)]] += dsv[r];
                }
                if (rqr_w && c < nc) {
                    float dsv[FA_VW];
                    FA_STORE(sb[s0 - c0 + c], 0, dsv);
                    for (uint r = 0; r < nt; r++)
                        racc[r * rqr_w +
                             (uint)(clamp(d0 - (int)r, -(int)rel_k, (int)rel_k) + (int)rel_k)] += dsv[r];
                }
            }
        }
        /* dq += ds k over the chunk */
        fa_chunk_acc(qa, sb, kb + (ulong)c0 * kv_stride, kv_stride, (uint)(ce - c0), HS, init,
                     NULL);
        init = 1;
    }

    if (init == 0) /* no key in range: dq = 0 */
        for (uint i = 0; i < FA_VW * HS; i++)
            qa[i] = 0.0f;
    fa_rows_store(dq + dq_off + ((ulong)b * T + t0) * dq_stride + (ulong)h * HS, dq_stride, qa, nt,
                  HS, NULL, scale);
    for (uint r = 0; r < nt; r++)
        dsum[dsum_off + (ulong)bh * T + t0 + r] = Dv[r];
    /* drb [B*T, NH*nbk]: row (b, t), this head's buckets */
    for (uint r = 0; r < nt; r++)
        for (uint i = 0; i < nbk; i++)
            drb[drb_off + (((ulong)b * T + t0 + r) * NH + h) * nbk + i] = bacc[r * nbk + i];
    /* dqr [B*NH*T, rqr_w]: the rows' ds by clamped distance */
    for (uint r = 0; r < nt; r++)
        for (uint i = 0; i < rqr_w; i++)
            dqr[dqr_off + ((ulong)bh * T + t0 + r) * rqr_w + i] = racc[r * rqr_w + i];
}

__kernel void attn_flash_bwd_dkv(FA_BWD_PARAMS)
{
    const uint nblk = (S + FA_VW - 1) / FA_VW;
    const ulong gid = get_global_id(0);
    if (gid >= (ulong)B * NH * nblk)
        return;
    const uint bh = (uint)(gid / nblk), h = bh % NH, b = bh / NH;
    const uint s0 = (uint)(gid - (ulong)bh * nblk) * FA_VW, ns = min((uint)FA_VW, S - s0);
    const int off = (int)S - (int)T;

    faf kt[FA_HS_MAX], vt[FA_HS_MAX], pb[FA_CH], sb[FA_CH]; /* vector-typed: aligned */
    float ka[FA_VW * FA_HS_MAX], va[FA_VW * FA_HS_MAX];   /* dk's, dv's rows */
    const ulong kv0 = (ulong)b * kv_bstride + (ulong)(h / kv_group) * kv_hstride + (ulong)s0 * kv_stride;
    fa_load_t(kt, k + k_off + kv0, kv_stride, ns, HS, scale);
    fa_load_t(vt, v + v_off + kv0, kv_stride, ns, HS, 1.0f);
    /* lanes: keys s0 + lane; visible to some query at all? */
    int kl[FA_VW];
    for (uint r = 0; r < FA_VW; r++)
        kl[r] = r < ns && (!has_keep || keep[keep_off + (ulong)b * keep_stride + s0 + r] != 0) ? -1
                                                                                               : 0;
    const fai kvis = FA_LOAD(0, kl);
    __global const int *kp = keep + keep_off + (ulong)b * keep_stride;
    const fai kseg = fa_segs(kp, has_keep, (int)s0, ns); /* the lanes' keys' segments */
    const fai sv = (fai)((int)s0) + FA_IOTA;
    const float slope = alibi ? clf_alibi_slope(h, NH) : 0.0f;
    /* the relative bias by s - t + T - 1: the lanes' keys read forward */
    __global const float *rbr = rb + rb_off + (ulong)h * 2 * rb_w + rb_w;
    /* the queries that may see keys [s0, s0 + ns) */
    int tlo = 0, thi = (int)T;
    if (causal) {
        tlo = max(0, (int)s0 - off);
        if (window && !sp_bs)
            thi = min((int)T, (int)(s0 + ns - 1) + (int)window - off);
    }
    /* sparse patterns: chunks of one query block (by absolute position),
     * those that see none of these keys skipped (the lanes' keys are in one
     * block: sp_bs is a multiple of 16) */
    __global const int *spt = sp + sp_off;
    const int kblk = sp_bs ? (int)s0 / (int)sp_bs : 0;

    int init = 0;
    for (int c0 = tlo, ce; c0 < thi; c0 = ce) {
        ce = sp_bs ? min(thi, (((c0 + off) / (int)sp_bs) + 1) * (int)sp_bs - off)
                   : min(thi, c0 + FA_CH);
        const int qb = sp_bs ? (c0 + off) / (int)sp_bs : 0;
        if (sp_bs && !fa_sp_visit(qb, kblk, sp_bs, window, glob, stride, spt, sp_R))
            continue;
        const int rq = sp_bs ? fa_rnd(spt, sp_R, qb, kblk) : 0; /* a random block of qb */
        /* p (as kept) and ds for the chunk's queries, lanes across the keys */
        for (int t = c0; t < ce; t += FA_BQ) {
            const int nq = min(FA_BQ, ce - t);
            __global const fa_st *qr[FA_BQ], *gr[FA_BQ];
            faf sc[FA_BQ], dp[FA_BQ];
            float L[FA_BQ], D[FA_BQ];
            #pragma unroll
            for (int j = 0; j < FA_BQ; j++) {
                const ulong tj = (ulong)(t + min(j, nq - 1));
                qr[j] = q + q_off + ((ulong)b * T + tj) * q_stride + (ulong)h * HS;
                gr[j] = dy + dy_off + ((ulong)b * T + tj) * y_stride + (ulong)h * HS;
                L[j] = lse[lse_off + (ulong)bh * T + tj];
                D[j] = dsum[dsum_off + (ulong)bh * T + tj];
                sc[j] = (faf)(0.0f);
                dp[j] = (faf)(0.0f);
            }
            for (uint d = 0; d < HS; d++) {
                const faf kd = kt[d], vd = vt[d];
                #pragma unroll
                for (int j = 0; j < FA_BQ; j++) {
                    sc[j] += FA_LD(qr[j], d) * kd;
                    dp[j] += FA_LD(gr[j], d) * vd;
                }
            }
            #pragma unroll
            for (int j = 0; j < FA_BQ; j++) {
                const int tqj = t + j + off;
                fai vis = kvis & FA_ALL(j < nq && L[j] > CLF_NEG_BIG);
                if (has_keep == 2)
                    vis &= kseg == (fai)(kp[t + min(j, nq - 1) + off]);
                if (causal)
                    vis &= sv <= (fai)(tqj);
                if (window && sp_bs) {
                    /* one query, lanes of keys in block kblk */
                    fai ext = (sv + (fai)((int)window) > (fai)(tqj)) | (sv < (fai)((int)glob));
                    if (stride)
                        ext |= (((fai)(tqj)-sv) % (fai)((int)stride)) == (fai)(0);
                    ext |= FA_ALL(rq);
                    vis &= ext;
                } else if (window)
                    vis &= sv + (fai)((int)window) > (fai)(tqj);
                if (alibi)
                    sc[j] -= slope * FA_F(abs((fai)(tqj)-sv));
                if (rb_w)
                    sc[j] += FA_LOAD(0, rbr + ((int)s0 - (t + min(j, nq - 1)) + (int)T - 1));
                if (rqr_w) {
                    /* one query row, lanes of keys: clamp(s - tq) along the lanes */
                    __global const float *qrow =
                        rqr + rqr_off + ((ulong)bh * T + (ulong)(t + min(j, nq - 1))) * rqr_w;
                    const fai cv = clamp(sv - (fai)(t + min(j, nq - 1) + off), (fai)(-(int)rel_k),
                                         (fai)((int)rel_k)) +
                                   (fai)((int)rel_k);
                    int ci[FA_VW];
                    float gv[FA_VW];
                    FA_STORE(cv, 0, ci);
                    for (uint l = 0; l < FA_VW; l++)
                        gv[l] = qrow[ci[l]];
                    sc[j] += FA_LOAD(0, gv);
                }
                faf pj =
                    select((faf)(0.0f), FA_EXP(sc[j] - (L[j] > CLF_NEG_BIG ? L[j] : 0.0f)), vis);
                if (FA_DROPOUT) {
                    const fal i =
                        (fal)(((ulong)bh * T + (ulong)(t + j)) * S + s0) + FA_UL(FA_IOTA);
                    fau w0, w1, w2, w3;
                    fa_philox(i >> 2, stream0, stream1, seed0, seed1, &w0, &w1, &w2, &w3);
                    const fai kw = fa_pick4(w0, w1, w2, w3, FA_I(i & (ulong)3)) >= (fau)(drop_thr);
                    dp[j] = select((faf)(0.0f), dp[j] * drop_scale, kw);
                    sb[t - c0 + j] = pj * (dp[j] - D[j]);                      /* ds */
                    pb[t - c0 + j] = select((faf)(0.0f), pj * drop_scale, kw); /* the kept p */
                } else {
                    sb[t - c0 + j] = pj * (dp[j] - D[j]);
                    pb[t - c0 + j] = pj;
                }
            }
        }
        /* dv += p dy and dk += ds q over the chunk */
        const ulong qrow = (ulong)b * T + (ulong)c0;
        fa_chunk_acc(va, pb, dy + dy_off + qrow * y_stride + (ulong)h * HS, y_stride,
                     (uint)(ce - c0), HS, init, NULL);
        fa_chunk_acc(ka, sb, q + q_off + qrow * q_stride + (ulong)h * HS, q_stride,
                     (uint)(ce - c0), HS, init, NULL);
        init = 1;
    }

    if (init == 0) /* no query in range: dk = dv = 0 */
        for (uint i = 0; i < FA_VW * HS; i++)
            ka[i] = va[i] = 0.0f;
    const ulong row = ((ulong)b * S + s0) * dkv_stride + (ulong)h * HS;
    fa_rows_store(dk + dk_off + row, dkv_stride, ka, ns, HS, NULL, scale);
    fa_rows_store(dv + dv_off + row, dkv_stride, va, ns, HS, NULL, 1.0f);
}

/* FA_VW for the host (as this kernel's required work-group size, which the
 * host queries without launching it). */
__kernel __attribute__((reqd_work_group_size(FA_VW, 1, 1))) void attn_flash_vw(__global int *unused)
{
    (void)unused;
}
