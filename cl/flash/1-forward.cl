/* flash/1-forward.cl - the blocked shape's chunk products and its forward
 * pass (0-shared.cl describes the family; its files form one program). */

/* ---- the chunk products -------------------------------------------------------
 * Each pass first computes a chunk of up to FA_CH scores (or their gradients)
 * with lanes across its own rows (0-shared.cl), into a private buffer w (key or
 * query j of the chunk at w[j], lane r = row r), then multiplies it into a
 * row-major private accumulator out[r * HS + d] (r < FA_VW) against FA_CH
 * rows of X (values, keys, queries or output gradients, row stride xs):
 *     out[r][d] = sum_j w[j][r] X[j][d]  (+ out[r][d] * rs[r] as init says).
 * Here the vectors run along d: FA_PR rows x NV vectors of FA_VW columns stay
 * in registers over the whole chunk, each X row is read once per FA_PR rows
 * as whole vectors and each weight broadcast from private memory, the shape
 * of a GEMM micro-kernel (NV up to FA_PN, then 2, 1 and single columns for a
 * head size that is not a multiple of FA_VW). */
#define FA_CH 128 /* keys (queries) per chunk; a multiple of FA_BC and FA_BQ */
#if FA_VW >= 4
#define FA_PR 4
#else
#define FA_PR FA_VW
#endif
#if FA_VW >= 16 || FA_VW == 1
#define FA_PN 4
#else
#define FA_PN 2
#endif

/* fa_chunk_acc's init: 0 out = the sum; 1 out += the sum; 2 out = out * rs[r] + the sum. */
#define FA_ACC_GROUP(NV)                                                                          \
    for (; d0 + (NV) * FA_VW <= HS; d0 += (NV) * FA_VW) {                                         \
        faf acc[FA_PR][NV];                                                                       \
        _Pragma("unroll") for (int r = 0; r < FA_PR; r++)                                        \
            _Pragma("unroll") for (int v = 0; v < (NV); v++)                                     \
        {                                                                                         \
            float *o = out + (r0 + r) * HS + d0 + v * FA_VW;                                      \
            acc[r][v] = init == 0   ? (faf)(0.0f)                                                 \
                        : init == 1 ? FA_LOAD(0, o)                                               \
                                    : FA_LOAD(0, o) * rs[r0 + r];                                 \
        }                                                                                         \
        __global const fa_st *x = xb + d0;                                                        \
        for (uint j = 0; j < n; j++, x += xs) {                                                   \
            faf xv[NV];                                                                           \
            _Pragma("unroll") for (int v = 0; v < (NV); v++) xv[v] = FA_LDV(x, v * FA_VW);       \
            _Pragma("unroll") for (int r = 0; r < FA_PR; r++)                                    \
            {                                                                                     \
                const faf wr = (faf)(w[j * FA_VW + r0 + r]);                                      \
                _Pragma("unroll") for (int v = 0; v < (NV); v++) acc[r][v] =                     \
                    CLF_FMA(wr, xv[v], acc[r][v]);                                                    \
            }                                                                                     \
        }                                                                                         \
        _Pragma("unroll") for (int r = 0; r < FA_PR; r++)                                        \
            _Pragma("unroll") for (int v = 0; v < (NV); v++)                                     \
                FA_STORE(acc[r][v], 0, out + (r0 + r) * HS + d0 + v * FA_VW);                    \
    }

static void fa_chunk_acc(float *out, const faf *wb, __global const fa_st *xb, ulong xs, uint n,
                         uint HS, int init, const float *rs)
{
    const float *w = (const float *)wb;
    for (uint r0 = 0; r0 < FA_VW; r0 += FA_PR) {
        uint d0 = 0;
#if FA_PN >= 4
        FA_ACC_GROUP(4)
#endif
#if FA_VW > 1
        FA_ACC_GROUP(2)
        FA_ACC_GROUP(1)
#endif
        for (; d0 < HS; d0++) /* columns past the last whole vector */
            for (uint r = r0; r < r0 + FA_PR; r++) {
                const float o = init == 0 ? 0.0f : out[r * HS + d0];
                float a = init == 2 ? o * rs[r] : o;
                for (uint j = 0; j < n; j++)
                    a = CLF_FMA(w[j * FA_VW + r], FA_LD(xb + j * xs, d0), a);
                out[r * HS + d0] = a;
            }
    }
}

/* Store rows r < n of a row-major accumulator, times s and (unless mul is
 * NULL) mul[r], as rows of dst (row stride ds), vectors along d. */
static void fa_rows_store(__global fa_st *dst, ulong ds, const float *acc, uint n, uint HS,
                          const float *mul, float s)
{
    for (uint r = 0; r < n; r++) {
        __global fa_st *o = dst + (ulong)r * ds;
        const float *a = acc + r * HS;
        const float f = mul != NULL ? mul[r] * s : s;
        uint d = 0;
#if FA_VW > 1
        for (; d + FA_VW <= HS; d += FA_VW)
            FA_SVV(FA_LOAD(0, a + d) * f, o, d);
#endif
        for (; d < HS; d++)
            FA_SV(o, d, a[d] * f);
    }
}

/* ---- forward ---- */

__kernel void attn_flash_fwd(__global fa_st *y, ulong y_off, ulong y_stride, __global float *lse,
                             ulong lse_off, __global const fa_st *q, ulong q_off, ulong q_stride,
                             __global const fa_st *k, ulong k_off, __global const fa_st *v,
                             ulong v_off, ulong kv_stride, ulong kv_bstride, ulong kv_hstride,
                             FA_MASK_PARAMS)
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

    faf qt[FA_HS_MAX], sb[FA_CH]; /* vector-typed: aligned */
    float ya[FA_VW * FA_HS_MAX];  /* y's rows, unnormalised */
    fa_load_t(qt, q + q_off + ((ulong)b * T + t0) * q_stride + (ulong)h * HS, q_stride, nt, HS,
              scale);
    const fai tq = (fai)((int)t0 + off) + FA_IOTA; /* the lanes' absolute positions */
    const fai qseg = fa_segs(kp, has_keep, (int)t0 + off, nt);
    const float slope = alibi ? clf_alibi_slope(h, NH) : 0.0f;
    __global const float *rbf = rb + rb_off + (ulong)h * 2 * rb_w; /* relative bias by t - s */
    __global const float *qrb = rqr + rqr_off + ((ulong)bh * T + t0) * rqr_w; /* the rows' q.r */
    const fal irow = ((fal)((ulong)bh * T + t0) + FA_UL(FA_IOTA)) * (ulong)S;
    int lo, hi;
    fa_key_range(&lo, &hi, t0, nt, T, S, causal, sp_bs ? 0u : window);
    FA_SP_ROWS;

    faf m = (faf)(CLF_NEG_BIG), l = (faf)(0.0f);
    int init = 0;
    for (int c0 = lo; c0 < hi; c0 += step) {
        const int ce = min(hi, c0 + step);
        int r0, r1;
        if (!fa_sp_chunk(c0, sp_bs, qb0, qb1, window, glob, stride, spt, sp_R, &r0, &r1))
            continue;
        /* the chunk's scores (-inf where not seen) and their maximum */
        faf mt = m;
        for (int s0 = c0; s0 < ce; s0 += FA_BC) {
            const int nc = min(FA_BC, ce - s0);
            int st = 0;
            if (sp_bs && !fa_sp_tile(tq0, tq1, s0, s0 + nc - 1, window, glob, stride, r0 | r1,
                                     &st)) { /* no row sees a key of the tile */
                for (int c = 0; c < FA_BC; c++)
                    sb[s0 - c0 + c] = (faf)(-INFINITY);
                continue;
            }
            __global const fa_st *kr[FA_BC];
            faf sc[FA_BC];
            #pragma unroll
            for (int c = 0; c < FA_BC; c++) {
                kr[c] = kb + (ulong)(s0 + min(c, nc - 1)) * kv_stride;
                sc[c] = (faf)(0.0f);
            }
            for (uint d = 0; d < HS; d++) {
                const faf qd = qt[d];
                #pragma unroll
                for (int c = 0; c < FA_BC; c++)
                    sc[c] += qd * FA_LD(kr[c], d);
            }
            #pragma unroll
            for (int c = 0; c < FA_BC; c++) {
                const fai vis = fa_visible_rows(tq, qseg, s0 + c, c < nc, kp, has_keep, causal,
                                                window, glob, stride, sp_bs, st, r0, r1, qsplit);
                if (alibi)
                    sc[c] -= slope * FA_F(abs(tq - (fai)(s0 + c)));
                if (rb_w && c < nc)
                    sc[c] += FA_LOAD(0, rbf + ((int)t0 - (s0 + c) + (int)S - 1));
                if (rqr_w)
                    sc[c] += fa_qr_rows(qrb, rqr_w, rel_k, s0 + c - ((int)t0 + off), nt);
                sc[c] = select((faf)(-INFINITY), sc[c], vis);
                mt = fmax(mt, sc[c]);
                sb[s0 - c0 + c] = sc[c];
            }
        }
        /* probabilities against the new maximum; l sums them undropped */
        const faf corr = FA_EXP(m - mt);
        l *= corr;
        for (int s0 = c0; s0 < ce; s0 += FA_BC) {
            fai kw[FA_BC];
            if (FA_DROPOUT)
                fa_drop_rows(kw, irow + (ulong)s0, drop_thr, seed0, seed1, stream0, stream1);
            #pragma unroll
            for (int c = 0; c < FA_BC; c++) {
                const int j = s0 - c0 + c;
                faf p = select((faf)(0.0f), FA_EXP(sb[j] - mt), sb[j] > (faf)(-INFINITY));
                l += p;
                if (FA_DROPOUT)
                    p = select((faf)(0.0f), p * drop_scale, kw[c]);
                sb[j] = p;
            }
        }
        float cv[FA_VW];
        FA_STORE(corr, 0, cv);
        fa_chunk_acc(ya, sb, vb + (ulong)c0 * kv_stride, kv_stride, (uint)(ce - c0), HS, init, cv);
        init = 2;
        m = mt;
    }

    float mv[FA_VW], lv[FA_VW], inv[FA_VW];
    FA_STORE(m, 0, mv);
    FA_STORE(l, 0, lv);
    for (uint r = 0; r < FA_VW; r++)
        inv[r] = lv[r] > 0.0f ? 1.0f / lv[r] : 0.0f;
    if (init == 0) /* no key in range: y = 0 */
        for (uint i = 0; i < FA_VW * HS; i++)
            ya[i] = 0.0f;
    fa_rows_store(y + y_off + ((ulong)b * T + t0) * y_stride + (ulong)h * HS, y_stride, ya, nt, HS,
                  inv, 1.0f);
    for (uint r = 0; r < nt; r++)
        lse[lse_off + (ulong)bh * T + t0 + r] = lv[r] > 0.0f ? mv[r] + log(lv[r]) : -INFINITY;
}
