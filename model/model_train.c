/*
 * model_train.c - the training entry points: batches in, forward, backward,
 * the optimizer step, and the read-backs (loss, per-position losses,
 * logits, gradient norm).
 *
 * Design: a batch is copied into one of two host staging slots and written
 * to the device without blocking, so the host can enqueue the next step
 * while the device works; a slot is reused only after a finish (taken here
 * when both slots are in flight, or by any read-back). The step enqueues
 * the sum of squares of all gradients, the clip factor and AdamW over the
 * flat buffers: three launches, no host round trip; the loss stays on the
 * device (a mean over B*T rows, rescaled on the host by B*T / count when
 * read, where count is the number of non-ignored targets, known from the
 * host copy of the batch).
 *
 * Not here: the graph itself (model_forward.c, model_backward.c).
 */
#include <string.h>

#include "model_internal.h"
#include "ops_nn.h"

static clf_status sync_all(clf_model *m, clf_error *err)
{
    clf_status st = clf_runtime_finish(m->rt, err);
    if (st == CLF_OK)
        m->stage_dirty[0] = m->stage_dirty[1] = 0;
    return st;
}

clf_status clf_model_set_batch(clf_model *m, const int32_t *x, const int32_t *y, int B, int T,
                               clf_error *err)
{
    clf_status st;
    if (x == NULL || B < 1 || B > m->s.B || T < 1 || T > m->s.T)
        return clf_error_set(err, CLF_ERR_ARG,
                             "batch %d x %d: expected tokens and 1 <= B <= %d, 1 <= T <= %d", B,
                             T, m->s.B, m->s.T);
    size_t n = (size_t)B * (size_t)T;
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        if (x[i] < 0 || x[i] >= m->s.V)
            return clf_error_set(err, CLF_ERR_ARG, "token %d at %zu: expected 0 <= id < %d",
                                 (int)x[i], i, m->s.V);
        if (y == NULL)
            continue;
        if (y[i] == CLF_MODEL_IGNORE_INDEX)
            continue;
        if (y[i] < 0 || y[i] >= m->s.V)
            return clf_error_set(err, CLF_ERR_ARG,
                                 "target %d at %zu: expected 0 <= id < %d or %d (ignored)",
                                 (int)y[i], i, m->s.V, CLF_MODEL_IGNORE_INDEX);
        count++;
    }
    int slot = m->stage_next;
    if (m->stage_dirty[slot] && (st = sync_all(m, err)) != CLF_OK)
        return st;
    int32_t *stg = m->stage[slot];
    memcpy(stg, x, n * sizeof *x);
    if ((st = clf_buffer_write_async(m->rt, m->tokens, 0, stg, n * sizeof *x, err)) != CLF_OK)
        return st;
    if (y != NULL) {
        memcpy(stg + n, y, n * sizeof *y);
        if ((st = clf_buffer_write_async(m->rt, m->targets, 0, stg + n, n * sizeof *y, err)) !=
            CLF_OK)
            return st;
    }
    m->stage_dirty[slot] = 1;
    m->stage_next = 1 - slot;
    m->cur_B = B;
    m->cur_T = T;
    m->has_targets = y != NULL;
    m->count = count;
    m->fwd_train = 0;
    m->fwd_done = 0;
    return CLF_OK;
}

clf_status clf_model_forward(clf_model *m, int train, clf_error *err)
{
    if (m->cur_B == 0)
        return clf_error_set(err, CLF_ERR_ARG, "clf_model_forward: no batch set");
    if (train && !m->has_targets)
        return clf_error_set(err, CLF_ERR_ARG, "clf_model_forward: training needs targets");
    if (train && !(m->flags & CLF_MODEL_TRAIN))
        return clf_error_set(err, CLF_ERR_ARG,
                             "clf_model_forward: the model was created without CLF_MODEL_TRAIN");
    m->fwd_done = 0;
    m->fwd_train = 0;
    clf_status st = mi_forward(m, m->cur_B, m->cur_T, 0, train != 0, 0, 0, err);
    if (st != CLF_OK)
        return st;
    m->fwd_done = 1;
    m->fwd_train = train != 0;
    return CLF_OK;
}

clf_status clf_model_backward(clf_model *m, clf_error *err)
{
    if (!m->fwd_train)
        return clf_error_set(err, CLF_ERR_ARG,
                             "clf_model_backward: needs a train forward first (once per forward)");
    m->fwd_train = 0;
    clf_status st = mi_backward(m, err);
    if (st != CLF_OK)
        return st;
    m->state.micro++;
    return CLF_OK;
}

clf_status clf_model_zero_grad(clf_model *m, clf_error *err)
{
    if (m->grads == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "the model has no gradients");
    return clf_buffer_fill(m->rt, m->grads, 0, m->dims.n_params * sizeof(float), 0, err);
}

clf_status clf_model_step(clf_model *m, float lr, clf_error *err)
{
    clf_status st;
    if (!(m->flags & CLF_MODEL_TRAIN))
        return clf_error_set(err, CLF_ERR_ARG,
                             "clf_model_step: the model was created without CLF_MODEL_TRAIN");
    size_t n = m->dims.n_params;
    clf_ptr sumsq = mi_at(m->scalars, 1), gscale = mi_at(m->scalars, 2);
    clf_ptr gnorm = mi_at(m->scalars, 3);
    if ((st = clf_op_sumsq(m->rt, sumsq, mi_at(m->grads, 0), n, mi_at(m->red, 0), err)) !=
            CLF_OK ||
        (st = clf_op_clip_scale(m->rt, gscale, gnorm, sumsq, m->optim.grad_clip, err)) != CLF_OK)
        return st;
    clf_adamw_hparams h;
    h.lr = lr;
    h.beta1 = m->optim.beta1;
    h.beta2 = m->optim.beta2;
    h.eps = m->optim.eps;
    h.weight_decay = m->optim.weight_decay;
    h.step = (int)(m->state.step + 1);
    if ((st = clf_op_adamw(m->rt, mi_at(m->params, 0), mi_at(m->grads, 0), mi_at(m->adam_m, 0),
                           mi_at(m->adam_v, 0), gscale, n, m->dims.n_decay, &h, err)) != CLF_OK)
        return st;
    if ((st = clf_model_zero_grad(m, err)) != CLF_OK)
        return st;
    m->state.step++;
    m->state.micro = 0;
    m->step_done = 1;
    return CLF_OK;
}

static clf_status need_loss(const clf_model *m, clf_error *err)
{
    if (!m->fwd_done || !m->has_targets)
        return clf_error_set(err, CLF_ERR_ARG, "no loss: run a forward over a batch with targets");
    return CLF_OK;
}

clf_status clf_model_loss(clf_model *m, float *out, clf_error *err)
{
    clf_status st = need_loss(m, err);
    if (st != CLF_OK)
        return st;
    float mean;
    if ((st = clf_buffer_read(m->rt, m->scalars, 0, &mean, sizeof mean, err)) != CLF_OK)
        return st;
    m->stage_dirty[0] = m->stage_dirty[1] = 0; /* a blocking read drained the queue */
    double rows = (double)m->cur_B * (double)m->cur_T;
    *out = m->count > 0 ? (float)((double)mean * rows / (double)m->count) : 0.0f;
    return CLF_OK;
}

clf_status clf_model_losses_read(clf_model *m, float *out, clf_error *err)
{
    clf_status st = need_loss(m, err);
    if (st != CLF_OK)
        return st;
    size_t n = (size_t)m->cur_B * (size_t)m->cur_T;
    if ((st = clf_buffer_read(m->rt, m->losses, 0, out, n * sizeof(float), err)) != CLF_OK)
        return st;
    m->stage_dirty[0] = m->stage_dirty[1] = 0;
    return CLF_OK;
}

clf_status clf_model_logits_read(clf_model *m, float *out, clf_error *err)
{
    if (!m->fwd_done || m->fwd_train)
        return clf_error_set(err, CLF_ERR_ARG,
                             "no logits: run an eval forward (train = 0) first; a train forward "
                             "overwrites them with their gradient");
    size_t n = (size_t)m->cur_B * (size_t)m->cur_T * (size_t)m->s.V;
    clf_status st = clf_buffer_read(m->rt, m->logits, 0, out, n * sizeof(float), err);
    if (st != CLF_OK)
        return st;
    m->stage_dirty[0] = m->stage_dirty[1] = 0;
    return CLF_OK;
}

clf_status clf_model_grad_norm(clf_model *m, float *out, clf_error *err)
{
    if (!m->step_done)
        return clf_error_set(err, CLF_ERR_ARG, "no gradient norm: no step has run");
    clf_status st = clf_buffer_read(m->rt, m->scalars, 3 * sizeof(float), out, sizeof *out, err);
    if (st == CLF_OK)
        m->stage_dirty[0] = m->stage_dirty[1] = 0;
    return st;
}
