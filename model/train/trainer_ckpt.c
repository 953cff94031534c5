/*
 * trainer_ckpt.c - the trainer's checkpoints: writing one (the data
 * generator's state and the elapsed time travel in its metadata as text,
 * so that resuming needs nothing but the file), resuming from one, and
 * ZeRO-1's gathers of parameters and optimizer state that writing needs.
 *
 * Not here: the loop (trainer.c), evaluations (trainer_eval.c).
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/eval/seqeval.h"
#include "model/train/checkpoint.h"
#include "model/train/schedule.h"
#include "model/train/trainer_internal.h"

/* ZeRO-1: learn every rank's slice (each model knows its own) and check
 * that they tile the flat layout in rank order. */
clf_status tr_shard_open(run *r, clf_error *err)
{
    const clf_trainer_dist *d = r->o->dist;
    const size_t np = clf_model_dims_get(r->m).n_params, n = (size_t)r->nranks;
    size_t lo, hi;
    clf_model_optim_slice(r->m, &lo, &hi);
    if (d->allgather_f32 == NULL)
        return clf_error_set(err, CLF_ERR_ARG,
                             "train.shard_optimizer: the ranks cannot gather (no allgather)");
    double *b = calloc(2 * n, sizeof *b);
    r->slices = calloc(n + 1, sizeof *r->slices);
    r->gather = malloc((np ? np : 1) * sizeof *r->gather);
    if (b == NULL || r->slices == NULL || r->gather == NULL) {
        free(b);
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    }
    b[2 * r->rank] = (double)lo;
    b[2 * r->rank + 1] = (double)hi;
    clf_status st = d->allreduce_f64(d->user, b, 2 * n, err);
    int tiles = st == CLF_OK && b[0] == 0.0 && b[2 * n - 1] == (double)np;
    for (size_t i = 0; tiles && i + 1 < n; i++)
        tiles = b[2 * i + 1] == b[2 * i + 2];
    for (size_t i = 0; i < n; i++)
        r->slices[i] = (size_t)b[2 * i];
    r->slices[n] = np;
    free(b);
    if (st == CLF_OK && !tiles)
        st = clf_error_set(err, CLF_ERR_ARG,
                           "train.shard_optimizer: the ranks' models do not split the optimizer "
                           "state between them (create each with limits.shard = rank, shards = "
                           "%d; this one holds [%zu, %zu) of %zu)",
                           r->nranks, lo, hi, np);
    return st;
}

/* ZeRO-1: every rank updated its slice of the parameters; gather them all. */
clf_status tr_shard_gather_params(run *r, clf_error *err)
{
    clf_buffer *p = clf_model_flat_buffer(r->m, CLF_SLOT_PARAM);
    clf_runtime *rt = clf_model_runtime(r->m);
    const size_t lo = r->slices[r->rank], hi = r->slices[r->rank + 1];
    const size_t np = r->slices[r->nranks];
    clf_status st =
        clf_buffer_read(rt, p, lo * sizeof(float), r->gather + lo, (hi - lo) * sizeof(float), err);
    if (st == CLF_OK)
        st = r->o->dist->allgather_f32(r->o->dist->user, r->gather, r->slices, err);
    /* the others' slices; the host copy stays valid until the next step's read */
    if (st == CLF_OK && lo > 0)
        st = clf_buffer_write_async(rt, p, 0, r->gather, lo * sizeof(float), err);
    if (st == CLF_OK && hi < np)
        st = clf_buffer_write_async(rt, p, hi * sizeof(float), r->gather + hi,
                                    (np - hi) * sizeof(float), err);
    clf_model_params_changed(r->m); /* the others' slices of any 16-bit weights too */
    return st;
}

/* ZeRO-1: both of Adam's moments, whole, on every rank (for a checkpoint). */
static clf_status shard_gather_moments(run *r, float *m, float *v, clf_error *err)
{
    clf_status st = clf_model_flat_read(r->m, CLF_SLOT_ADAM_M, m, err);
    if (st == CLF_OK)
        st = clf_model_flat_read(r->m, CLF_SLOT_ADAM_V, v, err);
    if (st == CLF_OK)
        st = r->o->dist->allgather_f32(r->o->dist->user, m, r->slices, err);
    if (st == CLF_OK)
        st = r->o->dist->allgather_f32(r->o->dist->user, v, r->slices, err);
    return st;
}

clf_status tr_save_to(run *r, const char *path, clf_error *err)
{
    char pos[CLF_SOURCE_STATE_MAX], el[64], best[64], since[32], bstep[32], bt[32], ranks[32];
    clf_checkpoint_extra extra[MAX_EXTRA];
    int n = 0;
    float *am = NULL, *av = NULL;
    if (r->slices != NULL) { /* ZeRO-1: every rank brings its slice of the moments */
        const size_t np = r->slices[r->nranks] ? r->slices[r->nranks] : 1;
        am = malloc(np * sizeof *am);
        av = malloc(np * sizeof *av);
        clf_status st = am == NULL || av == NULL
                            ? clf_error_set(err, CLF_ERR_MEMORY, "out of host memory")
                            : shard_gather_moments(r, am, av, err);
        if (st != CLF_OK || r->rank != 0) {
            free(am);
            free(av);
            return st;
        }
    }
    if (r->rank != 0)
        return CLF_OK; /* data parallel: rank 0 writes for everyone */
    snprintf(el, sizeof el, "%.17g", run_elapsed(r));
    snprintf(best, sizeof best, "%.17g", r->best_val);
    snprintf(since, sizeof since, "%d", r->evals_since_best);
    snprintf(bstep, sizeof bstep, "%llu", (unsigned long long)r->best_step);
    clf_batch_source_state(r->src, pos);
    extra[n++] = (clf_checkpoint_extra){clf_batch_source_state_key(r->src), pos};
    if (r->seq) {
        snprintf(bt, sizeof bt, "%d", r->bo.batch_tokens);
        extra[n++] = (clf_checkpoint_extra){"batch_tokens", bt};
    }
    extra[n++] = (clf_checkpoint_extra){"elapsed_s", el};
    extra[n++] = (clf_checkpoint_extra){"best_val_loss", best};
    extra[n++] = (clf_checkpoint_extra){"evals_since_best", since};
    extra[n++] = (clf_checkpoint_extra){"best_step", bstep};
    snprintf(ranks, sizeof ranks, "%d", r->nranks);
    extra[n++] = (clf_checkpoint_extra){"ranks", ranks};
    for (int i = 0; r->data != NULL && i < r->data->n_extra && n < MAX_EXTRA; i++)
        extra[n++] = r->data->extra[i];
    clf_status st = clf_checkpoint_save_ex(path, r->m, r->cfg, r->tok_json, extra, n, am, av, err);
    free(am);
    free(av);
    return st;
}

clf_status tr_save(run *r, clf_error *err)
{
    /* A save that fails after its rename (syncing the directory) has
     * replaced the checkpoint: a new inode at the path says so. */
    struct stat before, after;
    const int existed = stat(r->path, &before) == 0;
    clf_status st = tr_save_to(r, r->path, err);
    if (st == CLF_OK || (stat(r->path, &after) == 0 && (!existed || after.st_ino != before.st_ino ||
                                                        after.st_dev != before.st_dev))) {
        r->saved = 1;
        r->saved_step = clf_model_state_get(r->m).step;
    }
    if (st != CLF_OK || r->rank != 0)
        return st;
    if (r->o->cb.on_checkpoint)
        r->o->cb.on_checkpoint(r->o->cb.user, r->path, clf_model_state_get(r->m).step);
    return CLF_OK;
}

/* The resumed run's config may differ from the checkpoint's only in how long
 * it runs and how it reports. */
static clf_status check_resume_config(const clf_model_config *ck, const clf_model_config *now,
                                      clf_error *err)
{
    clf_model_config a = *now;
    a.train.steps = ck->train.steps;
    a.train.epochs = ck->train.epochs;
    a.train.eval = ck->train.eval;
    a.train.log_every = ck->train.log_every;
    a.train.early_stop.patience = ck->train.early_stop.patience;
    a.train.shard_optimizer = ck->train.shard_optimizer; /* the file holds whole moments */
    char key[256] = "";
    if (clf_config_diff(ck, &a, key, sizeof key) != 0)
        return clf_error_set(err, CLF_ERR_ARG,
                             "--resume: the model file differs from the checkpoint's config at "
                             "'%s'; only train.steps, train.epochs, train.eval, "
                             "train.log_every, train.early_stop.patience and "
                             "train.shard_optimizer may change",
                             key);
    return CLF_OK;
}

static clf_status parse_double_meta(clf_checkpoint *ck, const char *key, double *out,
                                    clf_error *err)
{
    const char *v = clf_checkpoint_meta(ck, key);
    char *end = NULL;
    if (v == NULL)
        return clf_error_set(err, CLF_ERR_FORMAT,
                             "--resume: the checkpoint has no '%s' (not written by the trainer)",
                             key);
    *out = strtod(v, &end);
    if (end == v || *end != '\0')
        return clf_error_set(err, CLF_ERR_FORMAT,
                             "--resume: checkpoint metadata %s='%s' is "
                             "not a number",
                             key, v);
    return CLF_OK;
}

clf_status tr_resume(run *r, clf_error *err)
{
    clf_checkpoint *ck = NULL;
    clf_status st = clf_checkpoint_open(r->path, &ck, err);
    if (st != CLF_OK)
        goto fail;
    if ((st = check_resume_config(clf_checkpoint_config(ck), r->cfg, err)) != CLF_OK)
        goto fail;
    if (!clf_checkpoint_has_optim(ck)) {
        st = clf_error_set(err, CLF_ERR_FORMAT,
                           "--resume: %s holds no optimizer state (not a training checkpoint)",
                           r->path);
        goto fail;
    }
    if ((st = clf_checkpoint_load(ck, r->m, CLF_CHECKPOINT_ALL, err)) != CLF_OK)
        goto fail;
    const char *key = clf_batch_source_state_key(r->src);
    const char *pos = clf_checkpoint_meta(ck, key);
    if (pos == NULL) {
        st = clf_error_set(err, CLF_ERR_FORMAT, "--resume: %s has no data position (%s)", r->path,
                           key);
        goto fail;
    }
    if (r->seq) {
        const char *bt = clf_checkpoint_meta(ck, "batch_tokens");
        if (bt == NULL || atoi(bt) != r->bo.batch_tokens) {
            st = clf_error_set(err, CLF_ERR_ARG,
                               "--resume: the checkpoint was trained with a token budget of %s "
                               "per batch; this run asks for %d",
                               bt ? bt : "(none)", r->bo.batch_tokens);
            goto fail;
        }
    }
    {
        /* a step draws ranks x accumulate batches: another rank count would
         * continue from the same position with another global batch */
        const char *rk = clf_checkpoint_meta(ck, "ranks");
        const int was = rk != NULL ? atoi(rk) : 1;
        if (was != r->nranks) {
            st = clf_error_set(err, CLF_ERR_ARG,
                               "--resume: the checkpoint was trained by %d process%s (a global "
                               "batch of %d x train.batch per micro-step); this run has %d. "
                               "Resume with mpirun -np %d",
                               was, was == 1 ? "" : "es", was, r->nranks, was);
            goto fail;
        }
    }
    if ((st = clf_batch_source_restore(r->src, pos, err)) != CLF_OK)
        goto fail;
    {
        const char *bs = clf_checkpoint_meta(ck, "best_step");
        r->best_step = bs != NULL ? strtoull(bs, NULL, 10) : 0;
    }
    double since = 0.0;
    if ((st = parse_double_meta(ck, "elapsed_s", &r->elapsed_before, err)) != CLF_OK ||
        (st = parse_double_meta(ck, "best_val_loss", &r->best_val, err)) != CLF_OK ||
        (st = parse_double_meta(ck, "evals_since_best", &since, err)) != CLF_OK)
        goto fail;
    r->evals_since_best = (int)since;
    r->saved = 1;
    r->saved_step = clf_model_state_get(r->m).step;
fail:
    if (st != CLF_OK)
        clf_error_prefix(err, "resuming from %s", r->path);
    clf_checkpoint_close(ck);
    return st;
}

static int cmp_u64_desc(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

clf_status tr_keep(run *r, uint64_t step, clf_error *err)
{
    if (r->rank != 0)
        return CLF_OK;
    const char *dir = r->o->out_dir;
    char keep[4200];
    snprintf(keep, sizeof keep, "%s/ckpt-%llu.safetensors", dir, (unsigned long long)step);
    unlink(keep); /* a resumed run evaluating the same step again */
    if (link(r->path, keep) != 0) {
        clf_status st = tr_save_to(r, keep, err);
        if (st != CLF_OK)
            return st;
    }
    /* the newest keep_last of DIR/ckpt-<step>.safetensors stay */
    DIR *d = opendir(dir);
    if (d == NULL)
        return clf_error_set(err, CLF_ERR_IO, "cannot list %s: %s", dir, strerror(errno));
    uint64_t *steps = NULL;
    size_t n = 0, cap = 0;
    clf_status st = CLF_OK;
    for (struct dirent *e; (e = readdir(d)) != NULL && st == CLF_OK;) {
        unsigned long long s;
        char tail[32];
        if (sscanf(e->d_name, "ckpt-%llu.safetenso%31s", &s, tail) != 2 || strcmp(tail, "rs") != 0)
            continue;
        if (n == cap) {
            uint64_t *g = realloc(steps, (cap = cap ? 2 * cap : 16) * sizeof *g);
            if (g == NULL) {
                st = clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
                break;
            }
            steps = g;
        }
        steps[n++] = s;
    }
    closedir(d);
    if (st == CLF_OK && n > 0)
        qsort(steps, n, sizeof *steps, cmp_u64_desc);
    for (size_t i = (size_t)r->cfg->train.keep_last; st == CLF_OK && i < n; i++) {
        snprintf(keep, sizeof keep, "%s/ckpt-%llu.safetensors", dir, (unsigned long long)steps[i]);
        if (unlink(keep) != 0 && errno != ENOENT)
            st = clf_error_set(err, CLF_ERR_IO, "cannot remove %s: %s", keep, strerror(errno));
    }
    free(steps);
    return st;
}
