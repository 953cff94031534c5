/*
 * norm.cl - LayerNorm and RMSNorm over the last dimension of [R, N], forward
 * and backward.
 *
 * Design
 * - Forward saves per-row statistics (mean and rstd for LayerNorm, rstd for
 *   RMSNorm) for the backward pass. LayerNorm's variance is computed in a
 *   second pass over the row around the mean (the row stays in cache), not as
 *   E[x^2] - E[x]^2, which cancels badly for rows with a large mean.
 * - Backward is two launches: a row kernel for dx (which needs two row sums),
 *   and a column kernel for the parameter gradients dw (and db), which are
 *   column sums over all rows. Column sums are deterministic: a fixed order,
 *   no atomics, no scratch. dx either overwrites or adds (acc); dw and db
 *   always add.
 * - Row kernels come in two variants like reduce.cl: *_item (one work-item
 *   per row, float8 lanes, for CPUs) and *_group (one work-group per row,
 *   lane-strided columns, local-memory tree, for GPUs; never returning
 *   early, see reduce.cl). Column kernels:
 *   *_item (one work-item per 32 adjacent columns walking all rows, blocked
 *   sums) and *_group (a work-group of CLF_COLS_X columns x a power of two
 *   of row lanes up to CLF_COLS_Y, within the kernel's work-group limit:
 *   lanes sum strided rows, then a fixed tree).
 *
 * Formulas (xhat = normalised input, dn = dout * w, means over the row):
 *   LayerNorm  xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + eps)
 *              dx = rstd * (dn - mean(dn) - xhat * mean(dn * xhat))
 *              dw += sum_r dout * xhat, db += sum_r dout
 *   RMSNorm    xhat = x * rstd, rstd = 1 / sqrt(mean(x^2) + eps)
 *              dx = rstd * (dn - xhat * mean(dn * xhat)), dw += sum_r dout * xhat
 *
 * - The forward's output may be stored in 16 bits (out_t, common.cl's
 *   CLF_T_*: rounded to nearest even as it is stored; out_off then counts
 *   2-byte elements): a norm's output is read only by the GEMMs that
 *   follow it, which widen it as they pack. Everything else is float32.
 *
 * norm_dot_item (decoding): a norm and the linear after it in one launch.
 *
 * Not here: fused residual + norm (a later optimisation), group norm.
 */

#define CLF_COLS_X 8
#define CLF_COLS_Y 32
#define CLF_COL_BLOCK 64
#define CLF_COL_W 32 /* columns per work-item of the *_item column kernels */

/* ---- LayerNorm forward ------------------------------------------------------ */

__kernel CLF_ITEM_HINT(float8) void
layernorm_forward_item(__global float *out, ulong out_off, uint out_t,
                       __global float *mean,
                       ulong mean_off, __global float *rstd, ulong rstd_off,
                       __global const float *x, ulong x_off,
                       __global const float *w, ulong w_off,
                       __global const float *b, ulong b_off, int has_b, ulong R,
                       ulong N, float eps)
{
    ulong r = get_global_id(0);
    if (r >= R)
        return;
    const ulong o0 = out_off + r * N; /* out's elements, of its type */
    x += x_off + r * N;
    w += w_off;
    b += b_off;
    const float2 st = ln_stats_item(x, N, eps);
    const float m = st.x, rs = st.y;
    ulong j;
    for (j = 0; j + 8 <= N; j += 8) {
        float8 o = (vload8(0, x + j) - m) * rs * vload8(0, w + j);
        if (has_b)
            o += vload8(0, b + j);
        clf_store8_t(o, out, out_t, o0 + j);
    }
    for (; j < N; j++) {
        float o = (x[j] - m) * rs * w[j];
        if (has_b)
            o += b[j];
        clf_store_t(out, out_t, o0 + j, o);
    }
    mean[mean_off + r] = m;
    rstd[rstd_off + r] = rs;
}

__kernel void layernorm_forward_group(__global float *out, ulong out_off, uint out_t,
                                      __global float *mean,
                                      ulong mean_off, __global float *rstd, ulong rstd_off,
                                      __global const float *x, ulong x_off,
                                      __global const float *w, ulong w_off,
                                      __global const float *b, ulong b_off, int has_b, ulong R,
                                      ulong N, float eps, __local float *buf)
{
    ulong r = get_group_id(0);
    uint lid = get_local_id(0), L = get_local_size(0);
    ulong n = r < R ? N : 0; /* no early return (barriers) */
    const ulong o0 = out_off + r * N;
    x += x_off + r * N;
    w += w_off;
    b += b_off;
    float s = 0.0f;
    for (ulong j = lid; j < n; j += L)
        s += x[j];
    float m = clf_group_sum(s, buf) / (float)N;
    float v = 0.0f;
    for (ulong j = lid; j < n; j += L) {
        float d = x[j] - m;
        v += d * d;
    }
    float rs = 1.0f / sqrt(clf_group_sum(v, buf) / (float)N + eps);
    for (ulong j = lid; j < n; j += L) {
        float o = (x[j] - m) * rs * w[j];
        if (has_b)
            o += b[j];
        clf_store_t(out, out_t, o0 + j, o);
    }
    if (lid == 0 && r < R) {
        mean[mean_off + r] = m;
        rstd[rstd_off + r] = rs;
    }
}

/* ---- LayerNorm backward: dx ------------------------------------------------- */

__kernel CLF_ITEM_HINT(float8) void
layernorm_backward_item(__global float *dx, ulong dx_off,
                        __global const float *dout, ulong dout_off,
                        __global const float *x, ulong x_off,
                        __global const float *mean, ulong mean_off,
                        __global const float *rstd, ulong rstd_off,
                        __global const float *w, ulong w_off, ulong R, ulong N,
                        int acc)
{
    ulong r = get_global_id(0);
    if (r >= R)
        return;
    dx += dx_off + r * N;
    dout += dout_off + r * N;
    x += x_off + r * N;
    w += w_off;
    float m = mean[mean_off + r], rs = rstd[rstd_off + r];
    ulong j;
    float8 a8 = (float8)(0.0f), b8 = (float8)(0.0f);
    for (j = 0; j + 8 <= N; j += 8) {
        float8 dn = vload8(0, dout + j) * vload8(0, w + j);
        a8 += dn;
        b8 += dn * ((vload8(0, x + j) - m) * rs);
    }
    float sdn = clf_hsum8(a8), sdnx = clf_hsum8(b8);
    for (; j < N; j++) {
        float dn = dout[j] * w[j];
        sdn += dn;
        sdnx += dn * ((x[j] - m) * rs);
    }
    float mdn = sdn / (float)N, mdnx = sdnx / (float)N;
    for (j = 0; j + 8 <= N; j += 8) {
        float8 dn = vload8(0, dout + j) * vload8(0, w + j);
        float8 g = rs * (dn - mdn - (vload8(0, x + j) - m) * rs * mdnx);
        if (acc)
            g += vload8(0, dx + j);
        vstore8(g, 0, dx + j);
    }
    for (; j < N; j++) {
        float dn = dout[j] * w[j];
        float g = rs * (dn - mdn - (x[j] - m) * rs * mdnx);
        if (acc)
            g += dx[j];
        dx[j] = g;
    }
}

__kernel void layernorm_backward_group(__global float *dx, ulong dx_off,
                                       __global const float *dout, ulong dout_off,
                                       __global const float *x, ulong x_off,
                                       __global const float *mean, ulong mean_off,
                                       __global const float *rstd, ulong rstd_off,
                                       __global const float *w, ulong w_off, ulong R, ulong N,
                                       int acc, __local float *buf)
{
    ulong r = get_group_id(0);
    uint lid = get_local_id(0), L = get_local_size(0);
    ulong n = r < R ? N : 0; /* no early return (barriers) */
    dx += dx_off + r * N;
    dout += dout_off + r * N;
    x += x_off + r * N;
    w += w_off;
    float m = r < R ? mean[mean_off + r] : 0.0f, rs = r < R ? rstd[rstd_off + r] : 0.0f;
    float sdn = 0.0f, sdnx = 0.0f;
    for (ulong j = lid; j < n; j += L) {
        float dn = dout[j] * w[j];
        sdn += dn;
        sdnx += dn * ((x[j] - m) * rs);
    }
    float mdn = clf_group_sum(sdn, buf) / (float)N;
    float mdnx = clf_group_sum(sdnx, buf) / (float)N;
    for (ulong j = lid; j < n; j += L) {
        float dn = dout[j] * w[j];
        float g = rs * (dn - mdn - (x[j] - m) * rs * mdnx);
        if (acc)
            g += dx[j];
        dx[j] = g;
    }
}

/* ---- LayerNorm backward: dw += sum_r dout * xhat, db += sum_r dout ---------- */

/* One work-item per CLF_COL_W adjacent columns walking all rows (see
 * bias_backward_item in elementwise.cl): four float8 sums per gradient for a
 * full block, private arrays for the last partial block. */
__kernel CLF_ITEM_HINT(float8) void
layernorm_dwdb_item(__global float *dw, ulong dw_off, __global float *db,
                    ulong db_off, int has_db, __global const float *dout,
                    ulong dout_off, __global const float *x, ulong x_off,
                    __global const float *mean, ulong mean_off,
                    __global const float *rstd, ulong rstd_off, ulong R, ulong N)
{
    dw += dw_off;
    db += db_off;
    dout += dout_off;
    x += x_off;
    mean += mean_off;
    rstd += rstd_off;
    ulong c0 = get_global_id(0) * CLF_COL_W;
    if (c0 >= N)
        return;
    if (c0 + CLF_COL_W <= N) {
        float8 tw0 = 0.0f, tw1 = 0.0f, tw2 = 0.0f, tw3 = 0.0f;
        float8 tb0 = 0.0f, tb1 = 0.0f, tb2 = 0.0f, tb3 = 0.0f;
        for (ulong r0 = 0; r0 < R; r0 += CLF_COL_BLOCK) {
            ulong r1 = min(R, r0 + (ulong)CLF_COL_BLOCK);
            float8 sw0 = 0.0f, sw1 = 0.0f, sw2 = 0.0f, sw3 = 0.0f;
            float8 sb0 = 0.0f, sb1 = 0.0f, sb2 = 0.0f, sb3 = 0.0f;
            for (ulong r = r0; r < r1; r++) {
                __global const float *pd = dout + r * N + c0, *px = x + r * N + c0;
                float m = mean[r], rs = rstd[r];
                float8 d0 = vload8(0, pd), d1 = vload8(1, pd), d2 = vload8(2, pd),
                       d3 = vload8(3, pd);
                sw0 += d0 * ((vload8(0, px) - m) * rs);
                sw1 += d1 * ((vload8(1, px) - m) * rs);
                sw2 += d2 * ((vload8(2, px) - m) * rs);
                sw3 += d3 * ((vload8(3, px) - m) * rs);
                sb0 += d0;
                sb1 += d1;
                sb2 += d2;
                sb3 += d3;
            }
            tw0 += sw0;
            tw1 += sw1;
            tw2 += sw2;
            tw3 += sw3;
            tb0 += sb0;
            tb1 += sb1;
            tb2 += sb2;
            tb3 += sb3;
        }
        __global float *o = dw + c0;
        vstore8(vload8(0, o) + tw0, 0, o);
        vstore8(vload8(1, o) + tw1, 1, o);
        vstore8(vload8(2, o) + tw2, 2, o);
        vstore8(vload8(3, o) + tw3, 3, o);
        if (has_db) {
            o = db + c0;
            vstore8(vload8(0, o) + tb0, 0, o);
            vstore8(vload8(1, o) + tb1, 1, o);
            vstore8(vload8(2, o) + tb2, 2, o);
            vstore8(vload8(3, o) + tb3, 3, o);
        }
        return;
    }
    uint w = (uint)(N - c0);
    float tw[CLF_COL_W], tb[CLF_COL_W], sw[CLF_COL_W], sb[CLF_COL_W];
    for (uint c = 0; c < w; c++)
        tw[c] = tb[c] = 0.0f;
    for (ulong r0 = 0; r0 < R; r0 += CLF_COL_BLOCK) {
        ulong r1 = min(R, r0 + (ulong)CLF_COL_BLOCK);
        for (uint c = 0; c < w; c++)
            sw[c] = sb[c] = 0.0f;
        for (ulong r = r0; r < r1; r++) {
            float m = mean[r], rs = rstd[r];
            for (uint c = 0; c < w; c++) {
                float d = dout[r * N + c0 + c];
                sw[c] += d * ((x[r * N + c0 + c] - m) * rs);
                sb[c] += d;
            }
        }
        for (uint c = 0; c < w; c++) {
            tw[c] += sw[c];
            tb[c] += sb[c];
        }
    }
    for (uint c = 0; c < w; c++) {
        dw[c0 + c] += tw[c];
        if (has_db)
            db[c0 + c] += tb[c];
    }
}

__kernel void layernorm_dwdb_group(__global float *dw, ulong dw_off, __global float *db,
                                   ulong db_off, int has_db, __global const float *dout,
                                   ulong dout_off, __global const float *x, ulong x_off,
                                   __global const float *mean, ulong mean_off,
                                   __global const float *rstd, ulong rstd_off, ulong R, ulong N)
{
    __local float pw[CLF_COLS_Y][CLF_COLS_X];
    __local float pb[CLF_COLS_Y][CLF_COLS_X];
    dw += dw_off;
    db += db_off;
    dout += dout_off;
    x += x_off;
    mean += mean_off;
    rstd += rstd_off;
    ulong c = get_global_id(0);
    uint lx = get_local_id(0), ly = get_local_id(1), ny = get_local_size(1);
    float sw = 0.0f, sb = 0.0f;
    if (c < N)
        for (ulong r = ly; r < R; r += ny) {
            float d = dout[r * N + c];
            sw += d * ((x[r * N + c] - mean[r]) * rstd[r]);
            sb += d;
        }
    pw[ly][lx] = sw;
    pb[ly][lx] = sb;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = ny / 2; h > 0; h >>= 1) {
        if (ly < h) {
            pw[ly][lx] += pw[ly + h][lx];
            pb[ly][lx] += pb[ly + h][lx];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (ly == 0 && c < N) {
        dw[c] += pw[0][lx];
        if (has_db)
            db[c] += pb[0][lx];
    }
}

/* ---- RMSNorm forward ---------------------------------------------------------- */

__kernel CLF_ITEM_HINT(float8) void
rmsnorm_forward_item(__global float *out, ulong out_off, uint out_t,
                     __global float *rstd,
                     ulong rstd_off, __global const float *x, ulong x_off,
                     __global const float *w, ulong w_off, ulong R, ulong N,
                     float eps)
{
    ulong r = get_global_id(0);
    if (r >= R)
        return;
    const ulong o0 = out_off + r * N;
    x += x_off + r * N;
    w += w_off;
    const float rs = rms_rstd_item(x, N, eps);
    ulong j;
    for (j = 0; j + 8 <= N; j += 8)
        clf_store8_t(vload8(0, x + j) * rs * vload8(0, w + j), out, out_t, o0 + j);
    for (; j < N; j++)
        clf_store_t(out, out_t, o0 + j, x[j] * rs * w[j]);
    rstd[rstd_off + r] = rs;
}

__kernel void rmsnorm_forward_group(__global float *out, ulong out_off, uint out_t,
                                    __global float *rstd,
                                    ulong rstd_off, __global const float *x, ulong x_off,
                                    __global const float *w, ulong w_off, ulong R, ulong N,
                                    float eps, __local float *buf)
{
    ulong r = get_group_id(0);
    uint lid = get_local_id(0), L = get_local_size(0);
    ulong n = r < R ? N : 0; /* no early return (barriers) */
    const ulong o0 = out_off + r * N;
    x += x_off + r * N;
    w += w_off;
    float ss = 0.0f;
    for (ulong j = lid; j < n; j += L)
        ss += x[j] * x[j];
    float rs = 1.0f / sqrt(clf_group_sum(ss, buf) / (float)N + eps);
    for (ulong j = lid; j < n; j += L)
        clf_store_t(out, out_t, o0 + j, x[j] * rs * w[j]);
    if (lid == 0 && r < R)
        rstd[rstd_off + r] = rs;
}

/* ---- decoding: the norm and the linear after it, one launch ----------------------
 * norm_dot_item: for few rows (decoding: a batch at one position), row r of
 * x [R, C] normalised (LayerNorm with w and optional b, or RMSNorm with w:
 * the statistics and the normalised values computed as the forward kernels
 * above compute them) and the linear that reads it: y[r, j] = act(sum_k
 * xhat[k] W[j, k] + bias[j]) for CLF_NORM_DOT_N columns j per work-item, W
 * [N, C] (a linear's weight, [out, in]), act a CLF_ACTCODE_* of
 * contract.h, as the GEMM epilogue applies it. A pre-norm block's
 * attention and feed-forward and the LM head read their norm this way while
 * decoding, without a launch of the norm's own to write the normalised row
 * and read it back. Each work-item recomputes its row's statistics: C reads
 * of a row in cache, against CLF_NORM_DOT_N x C reads of weights. NDRange
 * (ceil(N / CLF_NORM_DOT_N), R), for devices whose work-groups run item by item.
 */
__kernel void norm_dot_item(__global float *y, ulong y_off, ulong ldy, __global const float *x,
                            ulong x_off, __global const float *nw, ulong nw_off,
                            __global const float *nb, ulong nb_off, int has_nb, int rms, float eps,
                            __global const float *W, ulong w_off, __global const float *bias,
                            ulong bias_off, int has_bias, uint act, ulong R, ulong C, ulong N)
{
    const ulong j0 = get_global_id(0) * CLF_NORM_DOT_N, r = get_global_id(1);
    if (r >= R || j0 >= N)
        return;
    x += x_off + r * C;
    nw += nw_off;
    nb += nb_off;
    const float2 st = rms ? (float2)(0.0f, rms_rstd_item(x, C, eps)) : ln_stats_item(x, C, eps);
    const float m = st.x, rs = st.y;
    float s[CLF_NORM_DOT_N];
    clf_norm_dot_cols(s, x, m, rs, rms, nw, nb, has_nb, W + w_off + j0 * C,
                      min((ulong)CLF_NORM_DOT_N, N - j0), C);
    y += y_off + r * ldy;
    for (int c = 0; c < CLF_NORM_DOT_N && j0 + (ulong)c < N; c++) {
        float o = s[c], g;
        if (has_bias)
            o += bias[bias_off + j0 + (ulong)c];
        if (act != CLF_ACTCODE_NONE)
            o = clf_act_eval(act, o, 0, &g);
        y[j0 + (ulong)c] = o;
    }
}

/* ---- RMSNorm backward: dx ------------------------------------------------------ */

__kernel CLF_ITEM_HINT(float8) void
rmsnorm_backward_item(__global float *dx, ulong dx_off, __global const float *dout,
                      ulong dout_off, __global const float *x, ulong x_off,
                      __global const float *rstd, ulong rstd_off,
                      __global const float *w, ulong w_off, ulong R, ulong N,
                      int acc)
{
    ulong r = get_global_id(0);
    if (r >= R)
        return;
    dx += dx_off + r * N;
    dout += dout_off + r * N;
    x += x_off + r * N;
    w += w_off;
    float rs = rstd[rstd_off + r];
    ulong j;
    float8 a8 = (float8)(0.0f);
    for (j = 0; j + 8 <= N; j += 8)
        a8 += vload8(0, dout + j) * vload8(0, w + j) * vload8(0, x + j);
    float s = clf_hsum8(a8);
    for (; j < N; j++)
        s += dout[j] * w[j] * x[j];
    /* mean(dn * xhat) = rs * sum(dn * x) / N */
    float c = rs * rs * s / (float)N;
    for (j = 0; j + 8 <= N; j += 8) {
        float8 g = rs * (vload8(0, dout + j) * vload8(0, w + j) - vload8(0, x + j) * c);
        if (acc)
            g += vload8(0, dx + j);
        vstore8(g, 0, dx + j);
    }
    for (; j < N; j++) {
        float g = rs * (dout[j] * w[j] - x[j] * c);
        if (acc)
            g += dx[j];
        dx[j] = g;
    }
}

__kernel void rmsnorm_backward_group(__global float *dx, ulong dx_off,
                                     __global const float *dout, ulong dout_off,
                                     __global const float *x, ulong x_off,
                                     __global const float *rstd, ulong rstd_off,
                                     __global const float *w, ulong w_off, ulong R, ulong N,
                                     int acc, __local float *buf)
{
    ulong r = get_group_id(0);
    uint lid = get_local_id(0), L = get_local_size(0);
    ulong n = r < R ? N : 0; /* no early return (barriers) */
    dx += dx_off + r * N;
    dout += dout_off + r * N;
    x += x_off + r * N;
    w += w_off;
    float rs = r < R ? rstd[rstd_off + r] : 0.0f;
    float s = 0.0f;
    for (ulong j = lid; j < n; j += L)
        s += dout[j] * w[j] * x[j];
    float c = rs * rs * clf_group_sum(s, buf) / (float)N;
    for (ulong j = lid; j < n; j += L) {
        float g = rs * (dout[j] * w[j] - x[j] * c);
        if (acc)
            g += dx[j];
        dx[j] = g;
    }
}

/* ---- RMSNorm backward: dw += sum_r dout * x * rstd ----------------------------- */

__kernel CLF_ITEM_HINT(float8) void
rmsnorm_dw_item(__global float *dw, ulong dw_off, __global const float *dout,
                ulong dout_off, __global const float *x, ulong x_off,
                __global const float *rstd, ulong rstd_off, ulong R, ulong N)
{
    dw += dw_off;
    dout += dout_off;
    x += x_off;
    rstd += rstd_off;
    ulong c0 = get_global_id(0) * CLF_COL_W;
    if (c0 >= N)
        return;
    if (c0 + CLF_COL_W <= N) {
        float8 t0 = 0.0f, t1 = 0.0f, t2 = 0.0f, t3 = 0.0f;
        for (ulong r0 = 0; r0 < R; r0 += CLF_COL_BLOCK) {
            ulong r1 = min(R, r0 + (ulong)CLF_COL_BLOCK);
            float8 s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
            for (ulong r = r0; r < r1; r++) {
                __global const float *pd = dout + r * N + c0, *px = x + r * N + c0;
                float rs = rstd[r];
                s0 += vload8(0, pd) * (vload8(0, px) * rs);
                s1 += vload8(1, pd) * (vload8(1, px) * rs);
                s2 += vload8(2, pd) * (vload8(2, px) * rs);
                s3 += vload8(3, pd) * (vload8(3, px) * rs);
            }
            t0 += s0;
            t1 += s1;
            t2 += s2;
            t3 += s3;
        }
        __global float *o = dw + c0;
        vstore8(vload8(0, o) + t0, 0, o);
        vstore8(vload8(1, o) + t1, 1, o);
        vstore8(vload8(2, o) + t2, 2, o);
        vstore8(vload8(3, o) + t3, 3, o);
        return;
    }
    uint w = (uint)(N - c0);
    float t[CLF_COL_W], s[CLF_COL_W];
    for (uint c = 0; c < w; c++)
        t[c] = 0.0f;
    for (ulong r0 = 0; r0 < R; r0 += CLF_COL_BLOCK) {
        ulong r1 = min(R, r0 + (ulong)CLF_COL_BLOCK);
        for (uint c = 0; c < w; c++)
            s[c] = 0.0f;
        for (ulong r = r0; r < r1; r++) {
            float rs = rstd[r];
            for (uint c = 0; c < w; c++)
                s[c] += dout[r * N + c0 + c] * (x[r * N + c0 + c] * rs);
        }
        for (uint c = 0; c < w; c++)
            t[c] += s[c];
    }
    for (uint c = 0; c < w; c++)
        dw[c0 + c] += t[c];
}

__kernel void rmsnorm_dw_group(__global float *dw, ulong dw_off, __global const float *dout,
                               ulong dout_off, __global const float *x, ulong x_off,
                               __global const float *rstd, ulong rstd_off, ulong R, ulong N)
{
    __local float part[CLF_COLS_Y][CLF_COLS_X];
    dw += dw_off;
    dout += dout_off;
    x += x_off;
    rstd += rstd_off;
    ulong c = get_global_id(0);
    uint lx = get_local_id(0), ly = get_local_id(1), ny = get_local_size(1);
    float s = 0.0f;
    if (c < N)
        for (ulong r = ly; r < R; r += ny)
            s += dout[r * N + c] * (x[r * N + c] * rstd[r]);
    part[ly][lx] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = ny / 2; h > 0; h >>= 1) {
        if (ly < h)
            part[ly][lx] += part[ly + h][lx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (ly == 0 && c < N)
        dw[c] += part[0][lx];
}
