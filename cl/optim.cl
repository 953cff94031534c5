/*
 * optim.cl - gradient-norm clipping factor and AdamW.
 *
 * clip_scale turns the sum of squares of all gradients (from the
 * deterministic reduction in reduce.cl) into the clip factor on the device,
 * so a training step never reads back: gscale = min(1, max_norm/(norm+1e-6))
 * as torch.nn.utils.clip_grad_norm_.
 *
 * adamw follows torch.optim.AdamW's single-tensor path operation by
 * operation, in float32: g = grad * gscale;
 *   p *= 1 - lr*wd                         (decayed range only)
 *   m  = m + (1-beta1) * (g - m)           (lerp)
 *   v  = v * beta2 + (1-beta2) * g * g     (addcmul)
 *   p  = p + (-lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps)   (addcdiv)
 * The step-dependent scalars are computed in double on the host.
 *
 * Not here: fused multi-buffer launches, fp16 master weights, other optimizers.
 */

__kernel void clip_scale(__global float *gscale, ulong gscale_off, __global float *gnorm,
                         ulong gnorm_off, __global const float *sumsq, ulong sumsq_off,
                         float max_norm)
{
    if (get_global_id(0) != 0)
        return;
    float norm = sqrt(sumsq[sumsq_off]);
    float s = 1.0f;
    if (max_norm > 0.0f)
        s = fmin(1.0f, max_norm / (norm + 1e-6f));
    gnorm[gnorm_off] = norm;
    gscale[gscale_off] = s;
}

__kernel void adamw(__global float *p, ulong p_off, __global const float *g, ulong g_off,
                    __global float *m, ulong m_off, __global float *v, ulong v_off,
                    __global const float *gscale, ulong gscale_off, ulong n, ulong n_decay,
                    float decay, float w1, float beta2, float w2, float neg_step_size,
                    float bc2_sqrt, float eps)
{
    ulong i = get_global_id(0);
    if (i >= n)
        return;
    float gi = g[g_off + i] * gscale[gscale_off];
    float pi = p[p_off + i];
    if (i < n_decay)
        pi *= decay;
    float mi = m[m_off + i];
    mi = mi + w1 * (gi - mi);
    float vi = v[v_off + i] * beta2;
    vi = vi + w2 * gi * gi;
    float denom = sqrt(vi) / bc2_sqrt + eps;
    pi = pi + neg_step_size * mi / denom;
    m[m_off + i] = mi;
    v[v_off + i] = vi;
    p[p_off + i] = pi;
}
