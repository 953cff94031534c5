/*
 * step.c - the training entry points: batches in (decoder, seq2seq,
 * classifier), forward, backward, the optimizer step, and the read-backs
 * (loss, per-position losses, logits, probabilities, gradient norm).
 *
 * Design: a batch is checked on the host (ids in range, sizes within the
 * limits), copied into one of two host staging slots and written to the
 * device without blocking, so the host can enqueue the next step while the
 * device works; a slot is reused once a marker enqueued after its writes
 * has completed (or after any read-back): no finish. The step enqueues
 * the sum of squares of all gradients, the clip factor and AdamW over the
 * flat buffers: three launches, no host round trip (with fp16's loss
 * scaling the clip factor's kernel also decides, on the device, whether
 * the step runs: cl/optim.cl's amp_step); the loss stays on the
 * device (a mean over B*T rows, rescaled on the host by B*T / count when
 * read, where count is the number of non-ignored targets, known from the
 * host copy of the batch).
 *
 * Not here: the graph itself (forward.c, backward.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/graph/model_internal.h"
#include "model/ops/ops.h"

static clf_status sync_all(clf_model *m, clf_error *err)
{
    clf_status st = clf_runtime_finish(m->rt, err);
    if (st == CLF_OK)
        m->stage_dirty[0] = m->stage_dirty[1] = 0;
    return st;
}

clf_status mi_stage_take(clf_model *m, int32_t **slot, clf_error *err)
{
    const int i = m->stage_next;
    clf_event *done = m->stage_ev[i];
    m->stage_ev[i] = NULL;
    if (!m->stage_dirty[i]) {
        clf_event_release(done); /* a read-back drained the queue since */
    } else {
        /* the slot's batch was uploaded when the step before last began, so
         * its marker has normally completed: this waits for that upload, not
         * for the queue (no marker: a write failed, and only a finish tells) */
        clf_status st = done != NULL ? clf_event_wait(done, err) : sync_all(m, err);
        if (st != CLF_OK)
            return st;
        m->stage_dirty[i] = 0;
    }
    *slot = m->stage[i];
    /* dirty from now: a write enqueued from the slot may be pending even
     * when a later one fails and the batch is never committed (destroy and
     * the next take then drain the queue before the slot is freed or
     * refilled) */
    m->stage_dirty[m->stage_next] = 1;
    return CLF_OK;
}

clf_status mi_stage_commit(clf_model *m, clf_error *err)
{
    clf_status st = clf_runtime_marker(m->rt, &m->stage_ev[m->stage_next], err);
    if (st == CLF_OK)
        m->stage_next = 1 - m->stage_next;
    return st;
}

clf_status mi_check_sizes(const clf_model *m, int B, int S, int T, clf_error *err)
{
    const mi_spec *s = &m->s;
    const int64_t b = B, sl = S, tl = T;
    if (B < 1 || B > s->B)
        return clf_error_set(err, CLF_ERR_ARG, "batch of %d sequences: expected 1..%d", B, s->B);
    if (S < 0 || S > s->Smax || T < 0 || T > s->Tmax)
        return clf_error_set(err, CLF_ERR_ARG,
                             "rows of %d source / %d target tokens: the model is planned for at "
                             "most %d / %d",
                             S, T, s->Smax, s->Tmax);
    if ((size_t)(b * sl) > s->rows_src || (size_t)(b * tl) > s->rows_tgt)
        return clf_error_set(err, CLF_ERR_ARG,
                             "batch %d x (S %d, T %d) exceeds the planned token limits (%zu "
                             "source / %zu target tokens)",
                             B, S, T, s->rows_src, s->rows_tgt);
    return CLF_OK;
}

clf_status mi_check_tokens(const clf_model *m, const int32_t *x, size_t n, const char *what,
                           clf_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (x[i] < 0 || x[i] >= m->s.V)
            return clf_error_set(err, CLF_ERR_ARG, "%s %d at %zu: expected 0 <= id < %d", what,
                                 (int)x[i], i, m->s.V);
    return CLF_OK;
}

/* Targets in [0, N) or ignored; *count = the non-ignored ones. */
static clf_status check_targets(const int32_t *y, size_t n, int N, const char *what, int *count,
                                clf_error *err)
{
    int c = 0;
    for (size_t i = 0; i < n; i++) {
        if (y[i] == CLF_MODEL_IGNORE_INDEX)
            continue;
        if (y[i] < 0 || y[i] >= N)
            return clf_error_set(err, CLF_ERR_ARG,
                                 "%s %d at %zu: expected 0 <= id < %d or %d (ignored)", what,
                                 (int)y[i], i, N, CLF_MODEL_IGNORE_INDEX);
        c++;
    }
    *count = c;
    return CLF_OK;
}

/* Stage n int32 from src at *at of the slot and write them to dst; a keep
 * mask is normalised to 0/1, and NULL means every position is kept. */
static clf_status put(clf_model *m, int32_t *slot, size_t *at, clf_buffer *dst, const int32_t *src,
                      size_t n, int keep, clf_error *err)
{
    int32_t *p = slot + *at;
    for (size_t i = 0; i < n; i++)
        p[i] = !keep ? src[i] : src == NULL ? 1 : (src[i] != 0);
    *at += n;
    return clf_buffer_write_async(m->rt, dst, 0, p, n * sizeof *p, err);
}

/* A packed batch's documents doc [B, T]: non-decreasing along each row. */
static clf_status check_docs(const int32_t *doc, int B, int T, clf_error *err)
{
    for (int b = 0; b < B; b++)
        for (int t = 1; t < T; t++)
            if (doc[(size_t)b * T + t] < doc[(size_t)b * T + t - 1])
                return clf_error_set(err, CLF_ERR_ARG,
                                     "packed documents: row %d goes back from document %d to %d "
                                     "at position %d (expected non-decreasing ids)",
                                     b, (int)doc[(size_t)b * T + t - 1],
                                     (int)doc[(size_t)b * T + t], t);
    return CLF_OK;
}

/* A packed batch's documents as segments (1, 2, ... along the row) and
 * positions restarting at each document, staged at *at of the slot and
 * written to doc_seg, doc_pos. */
static clf_status put_docs(clf_model *m, int32_t *slot, size_t *at, const int32_t *doc, int B,
                           int T, clf_error *err)
{
    const size_t n = (size_t)B * (size_t)T;
    int32_t *seg = slot + *at, *pos = seg + n;
    for (int b = 0; b < B; b++) {
        const int32_t *d = doc + (size_t)b * T;
        int32_t sg = 1, p0 = 0;
        for (int t = 0; t < T; t++) {
            if (t > 0 && d[t] != d[t - 1]) {
                sg++;
                p0 = t;
            }
            seg[(size_t)b * T + t] = sg;
            pos[(size_t)b * T + t] = t - p0;
        }
    }
    *at += 2 * n;
    clf_status st = clf_buffer_write_async(m->rt, m->doc_seg, 0, seg, n * sizeof *seg, err);
    return st != CLF_OK ? st
                        : clf_buffer_write_async(m->rt, m->doc_pos, 0, pos, n * sizeof *pos, err);
}

static void batch_set(clf_model *m, int B, int S, int T, int has_targets, int count)
{
    m->cur_B = B;
    m->picked = m->pickable = 0; /* the token row holds the batch */
    m->cur_S = S;
    m->cur_T = T;
    m->has_targets = has_targets;
    m->count = count;
    m->fwd_train = 0;
    m->fwd_done = 0;
}

/* The parts of a batch the model's kind takes, or an error naming what
 * is missing or extra. */
static clf_status batch_shape(const clf_model *m, const clf_batch *b, clf_error *err)
{
    switch (m->s.kind) {
        case MI_KIND_DECODER:
            if (b->tgt_in == NULL || b->src != NULL || b->labels != NULL || b->T < 1)
                return clf_error_set(err, CLF_ERR_ARG,
                                     "a decoder's batch is tgt_in (and tgt_out) [B, T] with T >= "
                                     "1, no source or labels (got %d x %d%s%s)",
                                     b->B, b->T, b->src ? ", a source" : "",
                                     b->labels ? ", labels" : "");
            return CLF_OK;
        case MI_KIND_ENCDEC:
            if (b->src == NULL || b->tgt_in == NULL || b->labels != NULL || b->S < 1 || b->T < 1)
                return clf_error_set(err, CLF_ERR_ARG,
                                     "an encoder-decoder's batch is src [B, S] and tgt_in (and "
                                     "tgt_out) [B, T] with S, T >= 1 (got %d x (%d, %d)%s%s)",
                                     b->B, b->S, b->T, b->src ? "" : ", no source",
                                     b->tgt_in ? "" : ", no target input");
            return CLF_OK;
        default:
            if (b->src == NULL || b->tgt_in != NULL || b->tgt_out != NULL || b->S < 1)
                return clf_error_set(err, CLF_ERR_ARG,
                                     "a classifier's batch is src [B, S] with S >= 1 (and labels "
                                     "[B]), no target tokens (got %d x %d%s%s)",
                                     b->B, b->S, b->src ? "" : ", no source",
                                     b->tgt_in || b->tgt_out ? ", target tokens" : "");
            if (b->labels != NULL && m->s.head == MI_HEAD_NONE)
                return clf_error_set(
                    err, CLF_ERR_ARG,
                    "labels given, but the model has no classifier head (head none)");
            return CLF_OK;
    }
}

clf_status clf_model_set_batch(clf_model *m, clf_batch b, clf_error *err)
{
    clf_status st = batch_shape(m, &b, err);
    if (st != CLF_OK)
        return st;
    if (b.tgt_doc != NULL && m->s.kind != MI_KIND_DECODER)
        return clf_error_set(err, CLF_ERR_ARG,
                             "packed documents (tgt_doc) are for decoders only; this model is an "
                             "encoder kind");
    const int encdec = m->s.kind == MI_KIND_ENCDEC;
    const int S = b.src != NULL ? b.S : 0, T = b.tgt_in != NULL ? b.T : 0;
    const size_t ns = (size_t)b.B * (size_t)S, nt = (size_t)b.B * (size_t)T;
    /* the targets: the next tokens, or a classifier's labels */
    const int32_t *y = b.labels != NULL ? b.labels : b.tgt_out;
    const size_t ny = b.labels != NULL ? (size_t)b.B : nt;
    int count = 0;
    if ((st = mi_check_sizes(m, b.B, S, T, err)) != CLF_OK ||
        (b.src != NULL &&
         (st = mi_check_tokens(m, b.src, ns, encdec ? "source token" : "token", err)) != CLF_OK) ||
        (b.tgt_in != NULL &&
         (st = mi_check_tokens(m, b.tgt_in, nt, encdec ? "target input token" : "token", err)) !=
             CLF_OK) ||
        (y != NULL &&
         (st = check_targets(y, ny, b.labels != NULL ? m->s.NL : m->s.V,
                             b.labels != NULL ? "label" : "target", &count, err)) != CLF_OK) ||
        (b.tgt_doc != NULL && (st = check_docs(b.tgt_doc, b.B, T, err)) != CLF_OK))
        return st;
    int32_t *slot;
    size_t at = 0;
    if ((st = mi_stage_take(m, &slot, err)) != CLF_OK ||
        (b.src != NULL &&
         ((st = put(m, slot, &at, m->src, b.src, ns, 0, err)) != CLF_OK ||
          (st = put(m, slot, &at, m->src_keep, b.src_keep, ns, 1, err)) != CLF_OK)) ||
        (b.tgt_in != NULL && (st = put(m, slot, &at, m->tokens, b.tgt_in, nt, 0, err)) != CLF_OK) ||
        (y != NULL && (st = put(m, slot, &at, m->targets, y, ny, 0, err)) != CLF_OK) ||
        (b.tgt_doc != NULL && (st = put_docs(m, slot, &at, b.tgt_doc, b.B, T, err)) != CLF_OK))
        return st;
    if ((st = mi_stage_commit(m, err)) != CLF_OK)
        return st;
    batch_set(m, b.B, S, T, y != NULL, count);
    m->packed = b.tgt_doc != NULL;
    return CLF_OK;
}

/* The largest batch (at most the planned B) with sources of S and targets
 * of T tokens that every planned limit admits; 0 if none does. */
static int plan_batch(const clf_model *m, int S, int T)
{
    for (int b = m->s.B; b >= 1; b--)
        if (mi_check_sizes(m, b, S, T, NULL) == CLF_OK)
            return b;
    return 0;
}

clf_status mi_plan(clf_model *m, clf_error *err)
{
    const int train = (m->flags & CLF_MODEL_TRAIN) != 0;
    if (!train && (m->flags & CLF_MODEL_INFER))
        return CLF_OK;
    const mi_spec *s = &m->s;
    const int S = s->kind == MI_KIND_DECODER ? 0 : s->Smax;
    const int T = s->kind == MI_KIND_ENCODER ? 0 : s->Tmax;
    const mi_pass ps = {.B = plan_batch(m, S, T), .T = T, .S = S};
    if (ps.B == 0)
        return CLF_OK;
    clf_status st = mi_nodes_prepare(m, &ps, err);
    if (st == CLF_OK && s->lin_k > 0)
        st = mi_lin_prepare(m, (size_t)ps.B, (size_t)S, train, err);
    if (st == CLF_OK)
        st = clf_ops_load(m->rt, s->act16, err);
    if (st != CLF_OK)
        clf_error_prefix(err, "planning the model (matrix products and kernels)");
    return st;
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
    clf_status st = mi_forward(
        m, &(mi_pass){.B = m->cur_B, .T = m->cur_T, .flags = train ? MI_PASS_TRAIN : 0u}, err);
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
    return clf_op_zero(m->rt, (clf_ptr){m->grads, 0}, m->dims.n_params, err);
}

/* AdamW over the optimizer's slice (all of it unless sharded), decayed up
 * to n_decay, one launch per run of one learning-rate factor inside it
 * (one launch without layer-wise decay). */
static clf_status adamw_runs(clf_model *m, float lr, clf_ptr gscale, clf_error *err)
{
    const size_t lo = m->opt_lo, hi = m->opt_hi, nd = m->dims.n_decay;
    clf_status st = CLF_OK;
    for (int r = 0; r < m->n_lr_runs && st == CLF_OK; r++) {
        const size_t a0 = m->lr_runs[r].lo > lo ? m->lr_runs[r].lo : lo;
        const size_t a1 = m->lr_runs[r].hi < hi ? m->lr_runs[r].hi : hi;
        if (a1 <= a0)
            continue;
        const clf_adamw_args a = {.params = mi_at(m->params, a0),
                                  .grads = mi_at(m->grads, a0),
                                  .m = mi_at(m->adam_m, a0 - lo),
                                  .v = mi_at(m->adam_v, a0 - lo),
                                  .gscale = gscale,
                                  .amp = mi_amp(m) ? m->amp : mi_nullptr(),
                                  .params16 = m->params16 ? mi_at(m->params16, a0) : mi_nullptr(),
                                  .t16 = m->s.act16,
                                  .n = a1 - a0,
                                  .n_decay = nd <= a0   ? 0
                                             : nd >= a1 ? a1 - a0
                                                        : nd - a0,
                                  .h = {lr, m->optim.beta1, m->optim.beta2, m->optim.eps,
                                        m->optim.weight_decay, (int)(m->state.step + 1),
                                        m->lr_runs[r].mult}};
        st = clf_op_adamw_amp(m->rt, &a, err);
    }
    return st;
}

clf_status clf_model_step(clf_model *m, float lr, clf_error *err)
{
    clf_status st;
    if (!(m->flags & CLF_MODEL_TRAIN))
        return clf_error_set(err, CLF_ERR_ARG,
                             "clf_model_step: the model was created without CLF_MODEL_TRAIN");
    size_t n = m->dims.n_params;
    clf_ptr sumsq = clf_ptr_at(m->scalars, 1), gscale = clf_ptr_at(m->scalars, 2);
    clf_ptr gnorm = clf_ptr_at(m->scalars, 3);
    if ((st = clf_op_sumsq(m->rt, sumsq, mi_at(m->grads, 0), n, m->red, err)) != CLF_OK)
        return st;
    const clf_amp_hparams ap = {m->optim.grad_clip, lr, m->optim.beta1, m->optim.beta2,
                                (unsigned)m->optim.loss_scale_interval};
    if (mi_amp(m))
        st = clf_op_amp_step(m->rt, m->amp, gscale, gnorm, sumsq, &ap, err);
    else
        st = clf_op_clip_scale(m->rt, gscale, gnorm, sumsq, m->optim.grad_clip, err);
    if (st != CLF_OK)
        return st;
    if ((st = adamw_runs(m, lr, gscale, err)) != CLF_OK)
        return st;
    if (m->ema != NULL && (st = clf_op_ema(m->rt, (clf_ptr){m->ema, 0}, (clf_ptr){m->params, 0},
                                           m->ema_primed ? m->optim.ema : 0.0f, n, err)) != CLF_OK)
        return st;
    m->ema_primed = 1;
    if ((st = clf_model_zero_grad(m, err)) != CLF_OK)
        return st;
    m->state.step++;
    m->state.micro = 0;
    m->step_done = 1;
    return CLF_OK;
}

/* Rows of the loss and logits: B*T, or B for a classifier. */
static size_t loss_rows(const clf_model *m)
{
    return m->s.head != MI_HEAD_LM ? (size_t)m->cur_B : (size_t)m->cur_B * (size_t)m->cur_T;
}

static size_t logit_cols(const clf_model *m)
{
    return m->s.head == MI_HEAD_CLASSIFIER ? (size_t)m->s.NL : (size_t)m->s.V;
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
    if ((st = clf_ptr_read(m->rt, m->scalars, &mean, 1, err)) != CLF_OK)
        return st;
    m->stage_dirty[0] = m->stage_dirty[1] = 0; /* a blocking read drained the queue */
    double rows = (double)loss_rows(m);
    *out = m->count > 0 ? (float)((double)mean * rows / (double)m->count) : 0.0f;
    return CLF_OK;
}

clf_status clf_model_losses_read(clf_model *m, float *out, clf_error *err)
{
    clf_status st = need_loss(m, err);
    if (st != CLF_OK)
        return st;
    size_t n = loss_rows(m);
    if ((st = clf_ptr_read(m->rt, m->losses, out, n, err)) != CLF_OK)
        return st;
    m->stage_dirty[0] = m->stage_dirty[1] = 0;
    return CLF_OK;
}

clf_status clf_model_logits_read(clf_model *m, float *out, clf_error *err)
{
    if (m->s.head == MI_HEAD_NONE)
        return clf_error_set(err, CLF_ERR_ARG,
                             "no logits: the model has no head (an embedding model: read its "
                             "pooled vectors with clf_model_pooled_read)");
    if (!m->fwd_done || m->fwd_train)
        return clf_error_set(err, CLF_ERR_ARG,
                             "no logits: run an eval forward (train = 0) first; a train forward "
                             "overwrites them with their gradient");
    size_t n = loss_rows(m) * logit_cols(m);
    clf_status st = clf_ptr_read(m->rt, m->logits, out, n, err);
    if (st != CLF_OK)
        return st;
    m->stage_dirty[0] = m->stage_dirty[1] = 0;
    return CLF_OK;
}

clf_status clf_model_pooled_read(clf_model *m, float *out, clf_error *err)
{
    if (m->s.kind != MI_KIND_ENCODER)
        return clf_error_set(err, CLF_ERR_ARG,
                             "no pooled vectors: only an encoder-only model pools its output");
    if (!m->fwd_done || m->fwd_train)
        return clf_error_set(err, CLF_ERR_ARG, "no pooled vectors: run an eval forward first");
    const size_t B = (size_t)m->cur_B, S = (size_t)m->cur_S, C = (size_t)m->s.C;
    clf_status st;
    if (m->s.pool == MI_POOL_MEAN) {
        st = clf_ptr_read(m->rt, m->pooled, out, B * C, err);
    } else { /* the first position of each row */
        clf_ptr x = mi_stack_out(m, &m->enc);
        st = CLF_OK;
        for (size_t b = 0; b < B && st == CLF_OK; b++)
            st = clf_ptr_read(m->rt, clf_ptr_at(x, b * S * C), out + b * C, C, err);
    }
    if (st == CLF_OK)
        m->stage_dirty[0] = m->stage_dirty[1] = 0;
    return st;
}

clf_status clf_model_probs_read(clf_model *m, float *out, clf_error *err)
{
    clf_status st = clf_model_logits_read(m, out, err);
    if (st != CLF_OK)
        return st;
    size_t R = loss_rows(m), N = logit_cols(m);
    for (size_t r = 0; r < R; r++) {
        float *x = out + r * N;
        double mx = x[0], sum = 0;
        for (size_t j = 1; j < N; j++)
            mx = x[j] > mx ? x[j] : mx;
        for (size_t j = 0; j < N; j++)
            sum += exp((double)x[j] - mx);
        for (size_t j = 0; j < N; j++)
            x[j] = (float)(exp((double)x[j] - mx) / sum);
    }
    return CLF_OK;
}

clf_status clf_model_loss_add(clf_model *m, int first, clf_error *err)
{
    clf_status st = need_loss(m, err);
    if (st != CLF_OK)
        return st;
    clf_ptr sum = clf_ptr_at(m->scalars, 4);
    if (first && (st = clf_ptr_zero(m->rt, sum, 1, err)) != CLF_OK)
        return st;
    /* the mean over the rows times the rows: the sum over the targets
     * (ignored positions hold 0) */
    return clf_op_axpy(m->rt, sum, (float)loss_rows(m), m->scalars, 1, err);
}

clf_status clf_model_step_read(clf_model *m, float *loss, double *loss_sum, float *grad_norm,
                               clf_model_amp *amp, clf_error *err)
{
    clf_status st = need_loss(m, err);
    if (st != CLF_OK)
        return st;
    if (!m->step_done)
        return clf_error_set(err, CLF_ERR_ARG, "no gradient norm: no step has run");
    if (amp != NULL && !mi_amp(m))
        return clf_error_set(err, CLF_ERR_ARG, "no loss scaling: not an fp16 training model");
    float s[5]; /* loss mean, sumsq, gscale, gnorm, loss sum */
    if ((st = clf_ptr_read(m->rt, m->scalars, s, 5, err)) != CLF_OK)
        return st;
    m->stage_dirty[0] = m->stage_dirty[1] = 0; /* a blocking read drained the queue */
    const double rows = (double)loss_rows(m);
    *loss = m->count > 0 ? (float)((double)s[0] * rows / (double)m->count) : 0.0f;
    *grad_norm = s[3];
    if (loss_sum != NULL)
        *loss_sum = s[4];
    return amp != NULL ? mi_amp_read(m, m->amp_seen, amp, err) : CLF_OK;
}

clf_status clf_model_grad_norm(clf_model *m, float *out, clf_error *err)
{
    if (!m->step_done)
        return clf_error_set(err, CLF_ERR_ARG, "no gradient norm: no step has run");
    clf_status st = clf_ptr_read(m->rt, clf_ptr_at(m->scalars, 3), out, 1, err);
    if (st == CLF_OK)
        m->stage_dirty[0] = m->stage_dirty[1] = 0;
    return st;
}
