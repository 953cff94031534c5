/*
 * loss.cl - fused softmax + cross-entropy with label smoothing.
 *
 * Two variants of the same computation: cross_entropy, one work-group of W
 * work-items (a power of two chosen by the host) per row, for GPUs; and
 * cross_entropy_rows, one work-item per row with float8 vectors, for CPUs
 * (where a work-group is a loop and its barriers only cost). Three passes
 * over the row: (1) max and sum of the logits, (2) sum of exp(z - max),
 * (3) the gradient. Every reduction has a fixed order (a local-memory tree,
 * or eight lanes folded in a fixed order), so results are bit-reproducible.
 *
 * With label smoothing eps the target distribution is (1-eps) one-hot +
 * eps/V uniform (PyTorch's definition), so
 *   loss = (1-eps)(lse - z_t) + eps (lse - mean z)
 *        = (1-eps)(m - z_t) + eps (m - mean z) + log S,  lse = m + log S,
 * written in the second form to avoid cancelling lse against z_t.
 *   dz_j = grad_scale * (softmax_j - eps/V - (1-eps)[j == t]),
 * where grad_scale is multiplied first by gmul[0], a device float, when
 * has_gmul is set: fp16 training's loss scale, which changes on the device
 * from step to step (a power of two, so the product is exact).
 * dlogits may alias logits: each work-item reads z_j before writing dz_j for
 * the same j, and every read of the row (z_t by all) precedes a barrier with
 * a global-memory fence that precedes every write.
 * A target equal to ignore_index, or outside [0, V), gives loss 0, grad 0.
 *
 * Not here: the mean over rows (the caller's grad_scale and a reduction of
 * the per-row losses), class weights.
 */

__kernel void cross_entropy(__global float *losses, ulong loss_off, __global float *dz,
                            ulong dz_off, __global const float *z, ulong z_off,
                            __global const int *targets, ulong t_off, uint R, uint V,
                            float eps, int ignore_index, float grad_scale, int has_grad,
                            __global const float *gmul, ulong gmul_off, int has_gmul,
                            __local float *red)
{
    /* The host launches exactly R groups, and an ignored row runs every
     * barrier like the others and only writes zeros at the end: PoCL 3.1
     * miscompiles kernels that return before a barrier, even when the whole
     * group returns together (stray writes past the buffers). */
    uint r = get_group_id(0), lid = get_local_id(0), W = get_local_size(0);
    (void)R;
    z += z_off + (ulong)r * V;
    dz += dz_off + (ulong)r * V;
    int tgt = targets[t_off + r];
    int skip = tgt == ignore_index || tgt < 0 || (uint)tgt >= V;
    uint tsafe = skip ? 0u : (uint)tgt;

    float mx = CLF_NEG_BIG, sz = 0.0f;
    for (uint j = lid; j < V; j += W) {
        float a = z[j];
        mx = fmax(mx, a);
        sz += a;
    }
    red[lid] = mx;
    red[W + lid] = sz;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint o = W / 2; o > 0; o /= 2) {
        if (lid < o) {
            red[lid] = fmax(red[lid], red[lid + o]);
            red[W + lid] += red[W + lid + o];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    mx = red[0];
    sz = red[W];
    barrier(CLK_LOCAL_MEM_FENCE);

    float se = 0.0f;
    for (uint j = lid; j < V; j += W)
        se += exp(z[j] - mx);
    red[lid] = se;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint o = W / 2; o > 0; o /= 2) {
        if (lid < o)
            red[lid] += red[lid + o];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    se = red[0];
    float zt = z[tsafe];
    /* Every read of z (z_t here, the whole row in the passes above) happens
     * before any write of dz, which may alias z: the barrier must order
     * global memory too, not only local (a local fence alone lets a GPU
     * reorder the group's global accesses around it). */
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);

    if (skip) {
        if (has_grad)
            for (uint j = lid; j < V; j += W)
                dz[j] = 0.0f;
        if (lid == 0)
            losses[loss_off + r] = 0.0f;
    } else {
        float logS = log(se);
        if (lid == 0)
            losses[loss_off + r] = (1.0f - eps) * (mx - zt) + eps * (mx - sz / (float)V) + logS;
        if (has_grad) {
            if (has_gmul)
                grad_scale *= gmul[gmul_off];
            float inv = 1.0f / se;
            float sm = eps / (float)V;
            for (uint j = lid; j < V; j += W) {
                float p = exp(z[j] - mx) * inv;
                float g = p - sm;
                if (j == (uint)tgt)
                    g -= 1.0f - eps;
                dz[j] = grad_scale * g;
            }
        }
    }
}

/* The same loss with one work-item per row (CPUs: a work-group is a loop
 * there, so the group tree only costs). The row is read as float8 vectors
 * (vload8 needs only float alignment) with eight partial maxima and sums
 * folded in a fixed order, then a scalar tail: deterministic, and it lets
 * the compiler use vector exp. */
__kernel void cross_entropy_rows(__global float *losses, ulong loss_off, __global float *dz,
                                 ulong dz_off, __global const float *z, ulong z_off,
                                 __global const int *targets, ulong t_off, uint R, uint V,
                                 float eps, int ignore_index, float grad_scale, int has_grad,
                                 __global const float *gmul, ulong gmul_off, int has_gmul)
{
    uint r = get_global_id(0);
    if (r >= R)
        return;
    z += z_off + (ulong)r * V;
    dz += dz_off + (ulong)r * V;
    int tgt = targets[t_off + r];
    if (tgt == ignore_index || tgt < 0 || (uint)tgt >= V) {
        if (has_grad)
            for (uint j = 0; j < V; j++)
                dz[j] = 0.0f;
        losses[loss_off + r] = 0.0f;
        return;
    }
    uint V8 = V & ~7u;
    float8 m8 = (float8)(CLF_NEG_BIG), s8 = (float8)(0.0f);
    for (uint j = 0; j < V8; j += 8) {
        float8 a = vload8(0, z + j);
        m8 = fmax(m8, a);
        s8 += a;
    }
    float4 m4 = fmax(m8.lo, m8.hi), s4 = s8.lo + s8.hi;
    float2 m2 = fmax(m4.lo, m4.hi), s2 = s4.lo + s4.hi;
    float mx = fmax(m2.x, m2.y), sz = s2.x + s2.y;
    for (uint j = V8; j < V; j++) {
        mx = fmax(mx, z[j]);
        sz += z[j];
    }
    float8 e8 = (float8)(0.0f);
    for (uint j = 0; j < V8; j += 8)
        e8 += exp(vload8(0, z + j) - mx);
    float4 e4 = e8.lo + e8.hi;
    float2 e2 = e4.lo + e4.hi;
    float se = e2.x + e2.y;
    for (uint j = V8; j < V; j++)
        se += exp(z[j] - mx);
    float zt = z[tgt];
    float logS = log(se);
    losses[loss_off + r] = (1.0f - eps) * (mx - zt) + eps * (mx - sz / (float)V) + logS;
    if (has_grad) {
        if (has_gmul)
            grad_scale *= gmul[gmul_off];
        float inv = 1.0f / se;
        float sm = eps / (float)V;
        for (uint j = 0; j < V8; j += 8)
            vstore8(grad_scale * (exp(vload8(0, z + j) - mx) * inv - sm), 0, dz + j);
        for (uint j = V8; j < V; j++)
            dz[j] = grad_scale * (exp(z[j] - mx) * inv - sm);
        /* z[tgt] may be overwritten by now (in place): use the saved zt */
        dz[tgt] = grad_scale * ((exp(zt - mx) * inv - sm) - (1.0f - eps));
    }
}
