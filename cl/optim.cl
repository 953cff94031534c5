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
 * amp_step is clip_scale for fp16 training with dynamic loss scaling
 * (torch.cuda.amp.GradScaler's rules, kept on the device so a step still
 * never reads back). The gradients arrive multiplied by the loss scale S;
 * amp = [S, clean steps since S last changed, steps skipped, Adam's t,
 * -lr/bc1, sqrt(bc2), run]. A non-finite sum of squares (an inf or NaN
 * anywhere in the gradients) skips the step: run = 0, Adam's t stays, S
 * halves (never below 1), the clean count restarts. Otherwise run = 1,
 * gscale = clip / S (clip from the unscaled norm: with S a power of two
 * this is PyTorch's unscale-then-clip to the bit), t advances, and after
 * `interval` clean steps S doubles (interval 0: S is fixed). Adam's bias
 * corrections come from the device's t, in float32 (the host cannot know
 * t without a read-back); adamw reads them from amp[4..6] when `dev` is
 * set and leaves everything untouched when run is 0.
 *
 * adamw_p16 is adamw that also stores each updated parameter, rounded, into
 * p16 (the 16-bit weights the matrix products read under train.precision
 * bf16 | fp16): one pass writes both copies, the float32 masters staying
 * the ones Adam updates.
 *
 * Not here: fused multi-buffer launches, 16-bit master weights, other optimizers.
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

/* amp_step's state: runtime/contract.h's CLF_AMP_* slots. */
__kernel void amp_step(__global float *amp, ulong amp_off, __global float *gscale,
                       ulong gscale_off, __global float *gnorm, ulong gnorm_off,
                       __global const float *sumsq, ulong sumsq_off, float max_norm, float lr,
                       float beta1, float beta2, uint interval)
{
    if (get_global_id(0) != 0)
        return;
    amp += amp_off;
    const float S = amp[CLF_AMP_SCALE], ss = sumsq[sumsq_off];
    const float norm = sqrt(ss) / S;
    gnorm[gnorm_off] = norm;
    if (!isfinite(ss)) {
        gscale[gscale_off] = 0.0f;
        amp[CLF_AMP_RUN] = 0.0f;
        amp[CLF_AMP_SKIPPED] += 1.0f;
        amp[CLF_AMP_GOOD] = 0.0f;
        if (interval > 0)
            amp[CLF_AMP_SCALE] = fmax(1.0f, 0.5f * S);
        return;
    }
    float clip = 1.0f;
    if (max_norm > 0.0f)
        clip = fmin(1.0f, max_norm / (norm + 1e-6f));
    gscale[gscale_off] = clip / S;
    const float t = amp[CLF_AMP_T] + 1.0f;
    amp[CLF_AMP_T] = t;
    amp[CLF_AMP_NEG_STEP] = -(lr / (1.0f - pown(beta1, (int)t)));
    amp[CLF_AMP_BC2_SQRT] = sqrt(1.0f - pown(beta2, (int)t));
    amp[CLF_AMP_RUN] = 1.0f;
    float good = amp[CLF_AMP_GOOD] + 1.0f;
    if (interval > 0 && good >= (float)interval) {
        if (isfinite(2.0f * S))
            amp[CLF_AMP_SCALE] = 2.0f * S;
        good = 0.0f;
    }
    amp[CLF_AMP_GOOD] = good;
}

#define ADAMW_PARAMS                                                                               \
    __global float *p, ulong p_off, __global const float *g, ulong g_off, __global float *m,      \
        ulong m_off, __global float *v, ulong v_off, __global const float *gscale,               \
        ulong gscale_off, ulong n, ulong n_decay, float decay, float w1, float beta2, float w2,  \
        float neg_step_size, float lr_mult, float bc2_sqrt, float eps, __global const float *amp, \
        ulong amp_off, int dev

/* One element's update; returns 0 where it did nothing (past n, or a
 * skipped step), else 1 with the new parameter in *out. Inlined into both
 * kernels: the plain one carries no trace of the 16-bit copy (a branch on
 * it in the loop body halved PoCL's AdamW throughput). */
static inline int adamw_1(ADAMW_PARAMS, ulong i, float *out)
{
    if (i >= n)
        return 0;
    if (dev) {
        amp += amp_off;
        if (amp[CLF_AMP_RUN] == 0.0f)
            return 0;
        neg_step_size = amp[CLF_AMP_NEG_STEP] * lr_mult;
        bc2_sqrt = amp[CLF_AMP_BC2_SQRT];
    }
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
    *out = pi;
    return 1;
}

#define ADAMW_ARGS                                                                                 \
    p, p_off, g, g_off, m, m_off, v, v_off, gscale, gscale_off, n, n_decay, decay, w1, beta2, w2, \
        neg_step_size, lr_mult, bc2_sqrt, eps, amp, amp_off, dev

__kernel void adamw(ADAMW_PARAMS)
{
    float pi;
    adamw_1(ADAMW_ARGS, get_global_id(0), &pi);
}

/* adamw for devices whose work-groups run item by item: a work-item takes
 * CLF_ADAMW_W consecutive elements in vectors (one item per element left
 * PoCL a loop of masked 8-wide operations at 70% of the memory bandwidth
 * on an AMD EPYC); the same operations in the same order, element by
 * element, so both kernels give the same bits. The last item's partial
 * vector goes element by element. CLF_ADAMW_W: runtime/contract.h. */
__kernel void adamw_vec(ADAMW_PARAMS)
{
    const ulong i0 = get_global_id(0) * CLF_ADAMW_W;
    if (i0 >= n)
        return;
    if (dev) {
        __global const float *a = amp + amp_off;
        if (a[CLF_AMP_RUN] == 0.0f)
            return;
        neg_step_size = a[CLF_AMP_NEG_STEP] * lr_mult;
        bc2_sqrt = a[CLF_AMP_BC2_SQRT];
        dev = 0;
    }
    if (i0 + CLF_ADAMW_W > n) {
        for (ulong i = i0; i < n; i++) {
            float pi;
            adamw_1(ADAMW_ARGS, i, &pi);
        }
        return;
    }
    const float16 gi = vload16(0, g + g_off + i0) * gscale[gscale_off];
    float16 pi = vload16(0, p + p_off + i0);
    if (i0 + CLF_ADAMW_W <= n_decay) {
        pi *= decay;
    } else if (i0 < n_decay) {
        const int16 lane = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        pi = select(pi, pi * decay, lane < (int16)((int)(n_decay - i0)));
    }
    float16 mi = vload16(0, m + m_off + i0);
    mi = mi + w1 * (gi - mi);
    float16 vi = vload16(0, v + v_off + i0) * beta2;
    vi = vi + w2 * gi * gi;
    const float16 denom = sqrt(vi) / bc2_sqrt + eps;
    pi = pi + neg_step_size * mi / denom;
    vstore16(mi, 0, m + m_off + i0);
    vstore16(vi, 0, v + v_off + i0);
    vstore16(pi, 0, p + p_off + i0);
}

/* adamw, also storing each updated parameter rounded into p16 (as p16_t). */
__kernel void adamw_p16(ADAMW_PARAMS, __global float *p16, ulong p16_off, uint p16_t)
{
    const ulong i = get_global_id(0);
    float pi;
    if (adamw_1(ADAMW_ARGS, i, &pi))
        clf_store_t(p16, p16_t, p16_off + i, pi);
}
