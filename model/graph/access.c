/*
 * access.c - what the API reads and writes of a built model: its sizes,
 * the parameter table, each tensor and the flat buffers of parameters,
 * gradients and Adam moments (the moments: this model's slice of them),
 * the optimizer's settings and state, loss scaling's state.
 *
 * Not here: planning and building the model (build.c, arena.c).
 */
#include <math.h>
#include <string.h>

#include "model/graph/model_internal.h"

/* ---- accessors ------------------------------------------------------------------------ */

clf_model_dims clf_model_dims_get(const clf_model *m) { return m->dims; }
clf_runtime *clf_model_runtime(const clf_model *m) { return m->rt; }
int clf_model_param_count(const clf_model *m) { return m->n_ptab; }

const clf_param_info *clf_model_param_get(const clf_model *m, int i)
{
    return i >= 0 && i < m->n_ptab ? &m->ptab[i] : NULL;
}

int clf_model_param_find(const clf_model *m, const char *name)
{
    for (int i = 0; i < m->n_ptab; i++)
        if (strcmp(m->ptab[i].name, name) == 0)
            return i;
    return -1;
}

static clf_status slot_buffer(const clf_model *m, clf_model_slot slot, clf_buffer **b,
                              clf_error *err)
{
    switch (slot) {
        case CLF_SLOT_PARAM: *b = m->params; break;
        case CLF_SLOT_GRAD: *b = m->grads; break;
        case CLF_SLOT_ADAM_M: *b = m->adam_m; break;
        case CLF_SLOT_ADAM_V: *b = m->adam_v; break;
        case CLF_SLOT_EMA: *b = m->ema; break;
        default: *b = NULL; break;
    }
    if (*b == NULL)
        return clf_error_set(err, CLF_ERR_ARG,
                             "the model has no %s buffer (created without CLF_MODEL_TRAIN?)",
                             slot == CLF_SLOT_GRAD  ? "gradient"
                             : slot == CLF_SLOT_EMA ? "moving-average (train.ema)"
                                                    : "optimizer state");
    return CLF_OK;
}

/* Where tensor t starts in slot's buffer (the ADAM slots hold the
 * optimizer's slice only: a tensor outside it is an error). */
static clf_status slot_offset(const clf_model *m, clf_model_slot slot, const clf_param_info *t,
                              size_t *off, clf_error *err)
{
    *off = t->offset;
    if (slot != CLF_SLOT_ADAM_M && slot != CLF_SLOT_ADAM_V)
        return CLF_OK;
    if (t->offset < m->opt_lo || t->offset + t->numel > m->opt_hi)
        return clf_error_set(err, CLF_ERR_ARG,
                             "%s: its optimizer state is on another rank (this model holds "
                             "[%zu, %zu) of the flat layout)",
                             t->name, m->opt_lo, m->opt_hi);
    *off -= m->opt_lo;
    return CLF_OK;
}

/* Tensor `index` in slot's buffer: the buffer, its offset in bytes, its size. */
static clf_status tensor_place(const clf_model *m, clf_model_slot slot, int index, clf_buffer **b,
                               size_t *off, size_t *bytes, clf_error *err)
{
    clf_status st = slot_buffer(m, slot, b, err);
    if (st != CLF_OK)
        return st;
    const clf_param_info *t = clf_model_param_get(m, index);
    if (t == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "parameter index %d out of range", index);
    if ((st = slot_offset(m, slot, t, off, err)) != CLF_OK)
        return st;
    *off *= sizeof(float);
    *bytes = t->numel * sizeof(float);
    return CLF_OK;
}

/* After a host write to slot: 16-bit weights to rebuild; new parameters
 * restart the moving average from them, a written average is taken as is. */
static void written(clf_model *m, clf_model_slot slot)
{
    if (slot == CLF_SLOT_PARAM) {
        m->w16_stale = 1;
        m->ema_primed = 0;
    } else if (slot == CLF_SLOT_EMA) {
        m->ema_primed = 1;
    }
}

clf_status clf_model_tensor_read(clf_model *m, clf_model_slot slot, int index, float *dst,
                                 clf_error *err)
{
    clf_buffer *b;
    size_t off = 0, bytes = 0;
    clf_status st = tensor_place(m, slot, index, &b, &off, &bytes, err);
    return st == CLF_OK ? clf_buffer_read(m->rt, b, off, dst, bytes, err) : st;
}

clf_status clf_model_tensor_write(clf_model *m, clf_model_slot slot, int index, const float *src,
                                  clf_error *err)
{
    clf_buffer *b;
    size_t off = 0, bytes = 0;
    clf_status st = tensor_place(m, slot, index, &b, &off, &bytes, err);
    if (st != CLF_OK)
        return st;
    written(m, slot);
    return clf_buffer_write(m->rt, b, off, src, bytes, err);
}

/* The part of the flat layout slot's buffer holds: all, or the optimizer's slice. */
static void slot_range(const clf_model *m, clf_model_slot slot, size_t *lo, size_t *hi)
{
    const int adam = slot == CLF_SLOT_ADAM_M || slot == CLF_SLOT_ADAM_V;
    *lo = adam ? m->opt_lo : 0;
    *hi = adam ? m->opt_hi : m->dims.n_params;
}

/* slot's buffer and the part of the flat layout it holds. */
static clf_status slot_span(const clf_model *m, clf_model_slot slot, clf_buffer **b, size_t *lo,
                            size_t *hi, clf_error *err)
{
    clf_status st = slot_buffer(m, slot, b, err);
    if (st == CLF_OK)
        slot_range(m, slot, lo, hi);
    return st;
}

clf_status clf_model_flat_read(clf_model *m, clf_model_slot slot, float *dst, clf_error *err)
{
    clf_buffer *b;
    size_t lo, hi;
    clf_status st = slot_span(m, slot, &b, &lo, &hi, err);
    if (st != CLF_OK)
        return st;
    return clf_buffer_read(m->rt, b, 0, dst + lo, (hi - lo) * sizeof(float), err);
}

clf_status clf_model_flat_write(clf_model *m, clf_model_slot slot, const float *src, clf_error *err)
{
    clf_buffer *b;
    size_t lo, hi;
    clf_status st = slot_span(m, slot, &b, &lo, &hi, err);
    if (st != CLF_OK)
        return st;
    written(m, slot);
    return clf_buffer_write(m->rt, b, 0, src + lo, (hi - lo) * sizeof(float), err);
}

void clf_model_params_changed(clf_model *m) { m->w16_stale = 1; }

int clf_model_has_ema(const clf_model *m) { return m->ema != NULL; }

clf_status clf_model_ema_swap(clf_model *m, clf_error *err)
{
    if (m->ema == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "the model keeps no moving average (train.ema)");
    m->w16_stale = 1;
    return clf_op_swap(m->rt, (clf_ptr){m->params, 0}, (clf_ptr){m->ema, 0}, m->dims.n_params, err);
}

void clf_model_optim_slice(const clf_model *m, size_t *lo, size_t *hi)
{
    *lo = m->opt_lo;
    *hi = m->opt_hi;
}

clf_status clf_model_flat_copy(clf_model *dst, const clf_model *src, clf_model_slot slot,
                               clf_error *err)
{
    clf_buffer *from, *to;
    clf_status st;
    int same = dst->rt == src->rt && dst->dims.n_params == src->dims.n_params &&
               dst->n_ptab == src->n_ptab;
    for (int i = 0; same && i < dst->n_ptab; i++)
        same =
            dst->ptab[i].offset == src->ptab[i].offset && dst->ptab[i].numel == src->ptab[i].numel;
    if (!same)
        return clf_error_set(err, CLF_ERR_ARG,
                             "flat copy: the models are on different runtimes or their parameter "
                             "layouts differ (%zu floats in %d tensors vs %zu in %d)",
                             src->dims.n_params, src->n_ptab, dst->dims.n_params, dst->n_ptab);
    size_t lo, hi, lo2, hi2;
    if ((st = slot_span(src, slot, &from, &lo, &hi, err)) != CLF_OK ||
        (st = slot_span(dst, slot, &to, &lo2, &hi2, err)) != CLF_OK)
        return st;
    if (lo != lo2 || hi != hi2)
        return clf_error_set(err, CLF_ERR_ARG,
                             "flat copy: the models hold different slices of the optimizer "
                             "state ([%zu, %zu) and [%zu, %zu))",
                             lo, hi, lo2, hi2);
    if (slot == CLF_SLOT_PARAM)
        clf_model_params_changed(dst);
    return clf_buffer_copy(dst->rt, from, 0, to, 0, (hi - lo) * sizeof(float), err);
}

clf_buffer *clf_model_flat_buffer(const clf_model *m, clf_model_slot slot)
{
    clf_buffer *b = NULL;
    return slot_buffer(m, slot, &b, NULL) == CLF_OK ? b : NULL;
}

void clf_model_set_grad_hook(clf_model *m, clf_model_grad_hook fn, void *user)
{
    m->grad_hook = fn;
    m->grad_hook_user = user;
}

clf_model_optim clf_model_optim_get(const clf_model *m) { return m->optim; }
void clf_model_optim_set(clf_model *m, const clf_model_optim *o) { m->optim = *o; }
clf_model_state clf_model_state_get(const clf_model *m) { return m->state; }
void clf_model_state_set(clf_model *m, const clf_model_state *s) { m->state = *s; }
int clf_model_target_count(const clf_model *m) { return m->count; }

void clf_model_set_loss_scale(clf_model *m, float scale) { m->loss_scale = scale > 0 ? scale : 0; }

int clf_model_amp_enabled(const clf_model *m) { return mi_amp(m); }

clf_status clf_model_amp_get(clf_model *m, clf_model_amp *out, clf_error *err)
{
    if (!mi_amp(m))
        return clf_error_set(err, CLF_ERR_ARG, "no loss scaling: not an fp16 training model");
    return mi_amp_read(m, m->amp, out, err);
}

clf_status clf_model_amp_mark(clf_model *m, clf_error *err)
{
    if (!mi_amp(m))
        return clf_error_set(err, CLF_ERR_ARG, "no loss scaling: not an fp16 training model");
    const size_t f = sizeof(float);
    return clf_buffer_copy(m->rt, m->amp.buf, m->amp.off * f, m->amp_seen.buf, m->amp_seen.off * f,
                           CLF_AMP_SLOTS * f, err);
}

clf_status mi_amp_read(clf_model *m, clf_ptr src, clf_model_amp *out, clf_error *err)
{
    float a[CLF_AMP_SLOTS];
    clf_status st = clf_ptr_read(m->rt, src, a, CLF_AMP_SLOTS, err);
    if (st != CLF_OK)
        return st;
    m->stage_dirty[0] = m->stage_dirty[1] = 0; /* a blocking read drained the queue */
    out->scale = a[CLF_AMP_SCALE];
    out->good = (uint64_t)a[CLF_AMP_GOOD];
    out->skipped = (uint64_t)a[CLF_AMP_SKIPPED];
    out->adam_t = (uint64_t)a[CLF_AMP_T];
    return CLF_OK;
}

clf_status clf_model_amp_set(clf_model *m, const clf_model_amp *in, clf_error *err)
{
    if (!mi_amp(m))
        return clf_error_set(err, CLF_ERR_ARG, "no loss scaling: not an fp16 training model");
    const double cap = 16777216.0; /* counts are kept in float32: exact below 2^24 */
    if (!(in->scale >= 1.0f && isfinite(in->scale)) || (double)in->good >= cap ||
        (double)in->skipped >= cap || (double)in->adam_t >= cap)
        return clf_error_set(err, CLF_ERR_ARG,
                             "loss scale %g (expected finite and >= 1) or counts past 2^24",
                             (double)in->scale);
    float a[CLF_AMP_SLOTS] = {0};
    a[CLF_AMP_SCALE] = in->scale;
    a[CLF_AMP_GOOD] = (float)in->good;
    a[CLF_AMP_SKIPPED] = (float)in->skipped;
    a[CLF_AMP_T] = (float)in->adam_t;
    a[CLF_AMP_RUN] = 1.0f;
    return clf_ptr_write(m->rt, m->amp, a, CLF_AMP_SLOTS, err);
}

clf_model_memory clf_model_memory_get(const clf_model *m) { return m->mem; }
