/*
 * test_trainer_dist.c - data-parallel training (clf_trainer_dist) without
 * MPI: two ranks as two threads, each with its own runtime and model, the
 * collectives made of a barrier and shared pointers (sums in rank order, so
 * every rank gets the same bits, as MPI's reductions do). The tiny GPT of
 * test_trainer.c (dropout 0.1 everywhere) on tiny Shakespeare; the seed
 * from the test seed (printed).
 *
 * Checks:
 *   - 2 ranks x batch 4 against one process with batch 4 x accumulate 2
 *     (the same draws and dropout streams): the logged loss of each of 12
 *     steps within relative 1e-5, the final parameters within relative
 *     1e-4 + absolute 1e-5 (Adam's eps at 1e-3, so that it does not turn
 *     the rounding noise of exactly-zero gradients into full steps; the
 *     two runs sum the micro-batches' gradients in different orders, and
 *     an element whose gradient is near zero takes a slightly different
 *     normalised step: 1e-5 is a thousandth of one step at lr 1e-2. With
 *     an absolute 1e-6, seed 1795536152895504 measured 1.115 of the
 *     tolerance on Intel's CPU runtime and 0.612 on PoCL, eight other
 *     seeds 0.008-0.07);
 *   - the evaluation estimate is sharded (each rank evaluates every other
 *     batch of the ones one process draws) and agrees with one process's
 *     within relative 1e-5;
 *   - both ranks end with bit-identical parameters, and only rank 0 wrote
 *     a checkpoint (rank 1's directory stays empty);
 *   - the gradients were summed bucket by bucket (a 4 KiB bucket: several
 *     reductions per step, counted) and the wait is reported;
 *   - ZeRO-1 (train.shard_optimizer): each rank's model holds half of Adam's
 *     moments (the two slices add up to the whole), and the run ends with
 *     the unsharded run's parameters bit for bit on both ranks, and the same
 *     checkpoint tensors (the moments gathered before the write);
 *   - a collective that fails on every rank fails the run with its message
 *     (CLF_ERR_IO), not a hang.
 * Under the sanitizer build this is the leak check of the trainer's
 * data-parallel code (test_mpi.sh runs it under mpirun without one).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "model/data/dataset.h"
#include "model/graph/model.h"
#include "model/io/safetensors.h"
#include "model/text/tokenizer.h"
#include "model/train/trainer.h"
#include "tests/test_util.h"

#define STEPS 12
#define RANKS 2

static const char *YAML_CFG = "model:\n"
                              "  vocab: {tokenizer: char}\n"
                              "  context: 16\n"
                              "  embedding: {dim: 32, dropout: 0.1}\n"
                              "  positional: {type: learned}\n"
                              "  blocks:\n"
                              "    repeat: 2\n"
                              "    attention: {heads: 2, dropout: 0.1}\n"
                              "    ffn: {hidden: 64, activation: gelu}\n"
                              "    dropout: 0.1\n"
                              "train:\n"
                              "  batch: 4\n"
                              "  steps: 12\n"
                              "  optimizer: {type: adamw, lr: 1.0e-2, weight_decay: 0.1,"
                              " eps: 1.0e-3}\n"
                              "  schedule: {type: cosine, warmup: 4, min_lr: 1.0e-3}\n"
                              "  eval: {every: 6, batches: 2}\n"
                              "  log_every: 1\n";

/* ---- the collectives: a barrier and every rank's buffer ---------------------- */

typedef struct group {
    pthread_barrier_t bar;
    void *buf[RANKS];
    int fail_after; /* > 0: the f32 reductions fail from this call on (every rank) */
} group;

typedef struct rank_ctx {
    group *g;
    int rank;
    int f32_calls;
} rank_ctx;

static clf_status allreduce(rank_ctx *c, void *buf, size_t n, int is_f64, clf_error *err)
{
    group *g = c->g;
    g->buf[c->rank] = buf;
    pthread_barrier_wait(&g->bar);
    const size_t sz = is_f64 ? sizeof(double) : sizeof(float);
    void *sum = malloc(n * sz + 1);
    for (size_t i = 0; sum != NULL && i < n; i++) { /* rank order: the same bits everywhere */
        if (is_f64) {
            double s = 0.0;
            for (int r = 0; r < RANKS; r++)
                s += ((const double *)g->buf[r])[i];
            ((double *)sum)[i] = s;
        } else {
            float s = 0.0f;
            for (int r = 0; r < RANKS; r++)
                s += ((const float *)g->buf[r])[i];
            ((float *)sum)[i] = s;
        }
    }
    pthread_barrier_wait(&g->bar); /* everyone has read every buffer */
    if (sum != NULL)
        memcpy(buf, sum, n * sz);
    free(sum);
    return sum != NULL ? CLF_OK : clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
}

static clf_status allreduce_f32(void *user, float *buf, size_t n, clf_error *err)
{
    rank_ctx *c = user;
    c->f32_calls++;
    if (c->g->fail_after > 0 && c->f32_calls >= c->g->fail_after)
        return clf_error_set(err, CLF_ERR_IO, "rank %d: injected reduction failure", c->rank);
    return allreduce(c, buf, n, 0, err);
}

static clf_status allreduce_f64(void *user, double *buf, size_t n, clf_error *err)
{
    return allreduce(user, buf, n, 1, err);
}

static clf_status allgather_f32(void *user, float *buf, const size_t *offsets, clf_error *err)
{
    (void)err;
    rank_ctx *c = user;
    group *g = c->g;
    g->buf[c->rank] = buf;
    pthread_barrier_wait(&g->bar);
    for (int r = 0; r < RANKS; r++)
        if (r != c->rank)
            memcpy(buf + offsets[r], (const float *)g->buf[r] + offsets[r],
                   (offsets[r + 1] - offsets[r]) * sizeof *buf);
    pthread_barrier_wait(&g->bar);
    return CLF_OK;
}

static clf_status bcast_f64(void *user, double *buf, size_t n, clf_error *err)
{
    (void)err;
    rank_ctx *c = user;
    group *g = c->g;
    g->buf[c->rank] = buf;
    pthread_barrier_wait(&g->bar);
    if (c->rank != 0)
        memcpy(buf, g->buf[0], n * sizeof *buf);
    pthread_barrier_wait(&g->bar);
    return CLF_OK;
}

/* Two checkpoints hold the same tensors (names, shapes, bytes). */
static int same_tensors(const char *a, const char *b)
{
    clf_st_reader *ra = NULL, *rb = NULL;
    clf_error e;
    int same = clf_st_reader_open(a, &ra, &e) == CLF_OK &&
               clf_st_reader_open(b, &rb, &e) == CLF_OK &&
               clf_st_reader_count(ra) == clf_st_reader_count(rb);
    for (size_t i = 0; same && i < clf_st_reader_count(ra); i++) {
        const clf_st_tensor_info *x = clf_st_reader_tensor(ra, i);
        const clf_st_tensor_info *y = clf_st_reader_find(rb, x->name);
        const size_t nx = (size_t)(x->end - x->begin);
        same = y != NULL && (size_t)(y->end - y->begin) == nx;
        void *bx = same ? malloc(nx + 1) : NULL, *by = same ? malloc(nx + 1) : NULL;
        same = same && bx != NULL && by != NULL &&
               clf_st_reader_read_raw(ra, x, bx, nx, &e) == CLF_OK &&
               clf_st_reader_read_raw(rb, y, by, nx, &e) == CLF_OK && memcmp(bx, by, nx) == 0;
        free(bx);
        free(by);
    }
    clf_st_reader_destroy(ra);
    clf_st_reader_destroy(rb);
    return same;
}

/* ---- one rank ---------------------------------------------------------------- */

typedef struct rec {
    double loss[STEPS + 1], val[STEPS + 1];
} rec;

static void on_log(void *user, const clf_train_progress *p)
{
    rec *r = user;
    if (p->step <= STEPS)
        r->loss[p->step] = p->loss;
}

static void on_eval(void *user, const clf_train_eval *e)
{
    rec *r = user;
    if (e->step <= STEPS)
        r->val[e->step] = e->val_loss;
}

typedef struct job {
    const clf_model_config *cfg;
    const clf_dataset *ds;
    const clf_tokenizer *tok;
    int V;
    char dir[64];
    rank_ctx ctx;
    int size;  /* 1: no dist */
    int shard; /* ZeRO-1: the model holds its slice of Adam's moments */
    /* results */
    clf_status st;
    clf_error err;
    clf_train_result res;
    rec r;
    float *params;
    size_t np;
    size_t optim_bytes;
} job;

static void *run_rank(void *arg)
{
    job *j = arg;
    clf_runtime *rt = tu_runtime();
    clf_model *m = NULL;
    clf_error e;
    clf_model_limits lim = {.B = j->cfg->train.batch};
    if (j->shard)
        lim.shard = j->ctx.rank, lim.shards = j->size;
    tu_ok(clf_model_create_ex(rt, j->cfg, j->V, &lim, CLF_MODEL_TRAIN, &m, &e), &e, "model create");
    j->optim_bytes = clf_model_memory_get(m).optim;
    clf_trainer_dist d = {.rank = j->ctx.rank,
                          .size = j->size,
                          .user = &j->ctx,
                          .allreduce_f32 = allreduce_f32,
                          .allreduce_f64 = allreduce_f64,
                          .bcast_f64 = bcast_f64,
                          .allgather_f32 = allgather_f32,
                          .bucket_bytes = 4096};
    clf_trainer_options o;
    memset(&o, 0, sizeof o);
    o.out_dir = j->dir;
    o.dist = j->size > 1 ? &d : NULL;
    o.cb.user = &j->r;
    o.cb.on_log = on_log;
    o.cb.on_eval = on_eval;
    clf_train_data data;
    memset(&data, 0, sizeof data);
    data.text = j->ds;
    j->st = clf_trainer_run(m, j->cfg, &data, j->tok, &o, &j->res, &j->err);
    j->np = clf_model_dims_get(m).n_params;
    j->params = malloc(j->np * sizeof *j->params);
    tu_ok(clf_model_flat_read(m, CLF_SLOT_PARAM, j->params, &e), &e, "params");
    clf_model_destroy(m);
    clf_runtime_destroy(rt);
    return NULL;
}

static void job_init(job *j, const clf_model_config *cfg, const clf_dataset *ds,
                     const clf_tokenizer *tok, int V, group *g, int rank, int size)
{
    memset(j, 0, sizeof *j);
    j->cfg = cfg;
    j->ds = ds;
    j->tok = tok;
    j->V = V;
    j->ctx.g = g;
    j->ctx.rank = rank;
    j->size = size;
    snprintf(j->dir, sizeof j->dir, "/tmp/clf_dist_XXXXXX");
    if (mkdtemp(j->dir) == NULL) {
        fprintf(stderr, "FATAL: mkdtemp\n");
        exit(1);
    }
}

static void job_free(job *j)
{
    char path[128];
    snprintf(path, sizeof path, "%s/ckpt.safetensors", j->dir);
    remove(path);
    snprintf(path, sizeof path, "%s/best.safetensors", j->dir);
    remove(path);
    rmdir(j->dir);
    free(j->params);
}

/* Both ranks to the end; returns the jobs filled. */
static void run_ranks(job *jobs, const clf_model_config *cfg, const clf_dataset *ds,
                      const clf_tokenizer *tok, int V, group *g, int shard)
{
    pthread_t th[RANKS];
    pthread_barrier_init(&g->bar, NULL, RANKS);
    for (int r = 0; r < RANKS; r++) {
        job_init(&jobs[r], cfg, ds, tok, V, g, r, RANKS);
        jobs[r].shard = shard;
        pthread_create(&th[r], NULL, run_rank, &jobs[r]);
    }
    for (int r = 0; r < RANKS; r++)
        pthread_join(th[r], NULL);
    pthread_barrier_destroy(&g->bar);
}

int main(void)
{
    clf_error e;
    clf_model_config cfg;
    tu_ok(clf_config_parse_string(YAML_CFG, "test_trainer_dist.yaml", NULL, 0, &cfg, &e), &e,
          "config");
    cfg.train.seed = tu_seed() % 1000000007ull;
    clf_tokenizer *tok = NULL;
    clf_dataset *ds = NULL;
    tu_char_text(60000, &tok, &ds);
    const int V = clf_tokenizer_vocab_size(tok);

    /* one process, accumulate 2 */
    clf_model_config acc = cfg;
    acc.train.accumulate = 2;
    job one;
    group none = {.fail_after = 0};
    job_init(&one, &acc, ds, tok, V, &none, 0, 1);
    run_rank(&one);
    tu_ok(one.st, &one.err, "one process");

    /* two ranks */
    group g = {.fail_after = 0};
    job two[RANKS];
    run_ranks(two, &cfg, ds, tok, V, &g, 0);
    for (int r = 0; r < RANKS; r++)
        tu_ok(two[r].st, &two[r].err, "a rank");

    double worst = 0.0;
    for (int s = 1; s <= STEPS; s++) {
        const double d = fabs(two[0].r.loss[s] - one.r.loss[s]) / fabs(one.r.loss[s]);
        worst = d > worst ? d : worst;
    }
    TU_CHECK(worst <= 1e-5 && one.r.loss[STEPS] > 0, "losses of %d steps agree (worst %.2e)", STEPS,
             worst);
    double vw = 0.0;
    for (int s = 6; s <= STEPS; s += 6) {
        const double dv = fabs(two[0].r.val[s] - one.r.val[s]) / one.r.val[s];
        vw = dv > vw ? dv : vw;
    }
    TU_CHECK(vw <= 1e-5 && one.r.val[STEPS] > 0,
             "the evaluation estimates (each rank half of the batches) agree with one process's "
             "(steps 6, 12: worst relative %.2e)",
             vw);
    double pw = 0.0;
    for (size_t i = 0; i < one.np; i++) {
        const double d =
            fabs((double)two[0].params[i] - one.params[i]) / (1e-5 + 1e-4 * fabs(one.params[i]));
        pw = d > pw ? d : pw;
    }
    TU_CHECK(pw <= 1.0, "parameters after %d steps agree (worst %.3f of the tolerance)", STEPS, pw);
    TU_CHECK(two[0].np == two[1].np &&
                 memcmp(two[0].params, two[1].params, two[0].np * sizeof(float)) == 0,
             "both ranks hold bit-identical parameters");
    char ck0[128], ck1[128];
    snprintf(ck0, sizeof ck0, "%s/ckpt.safetensors", two[0].dir);
    snprintf(ck1, sizeof ck1, "%s/ckpt.safetensors", two[1].dir);
    TU_CHECK(access(ck0, F_OK) == 0 && access(ck1, F_OK) != 0,
             "rank 0 wrote the checkpoint, rank 1 nothing");
    /* 4 KiB buckets: the blocks' 12.6 K-float tensors each fill several */
    TU_CHECK(two[0].ctx.f32_calls >= 3 * STEPS && two[0].res.comm_wait_s >= 0.0,
             "gradients reduced bucket by bucket (%d reductions over %d steps, %.4f s waited)",
             two[0].ctx.f32_calls, STEPS, two[0].res.comm_wait_s);
    /* ZeRO-1: the same run with the moments split between the ranks */
    clf_model_config zc = cfg;
    zc.train.shard_optimizer = 1;
    group gz = {.fail_after = 0};
    job z[RANKS];
    run_ranks(z, &zc, ds, tok, V, &gz, 1);
    for (int r = 0; r < RANKS; r++)
        tu_ok(z[r].st, &z[r].err, "a sharded rank");
    TU_CHECK(memcmp(z[0].params, two[0].params, z[0].np * sizeof(float)) == 0 &&
                 memcmp(z[1].params, two[0].params, z[0].np * sizeof(float)) == 0,
             "ZeRO-1: both ranks end with the unsharded run's parameters, bit for bit");
    TU_CHECK(z[0].optim_bytes + z[1].optim_bytes == two[0].optim_bytes &&
                 z[0].optim_bytes < two[0].optim_bytes && z[1].optim_bytes > 0,
             "ZeRO-1: each rank holds its slice of Adam's moments (%zu + %zu of %zu bytes)",
             z[0].optim_bytes, z[1].optim_bytes, two[0].optim_bytes);
    char zk[128];
    snprintf(zk, sizeof zk, "%s/ckpt.safetensors", z[0].dir);
    TU_CHECK(same_tensors(ck0, zk), "ZeRO-1: the checkpoint (moments gathered) equals the "
                                    "unsharded run's, tensor for tensor");
    for (int r = 0; r < RANKS; r++)
        job_free(&z[r]);
    /* ZeRO-1 with 16-bit weights (train.precision bf16): each rank's
     * optimizer writes the bf16 copy of its slice only; the gathered
     * slices must reach the copy too, or the ranks' products read stale
     * weights and leave the unsharded run */
    clf_model_config hc = cfg;
    hc.train.precision = CLF_PRECISION_BF16;
    job h[RANKS], hz[RANKS];
    run_ranks(h, &hc, ds, tok, V, &g, 0);
    hc.train.shard_optimizer = 1;
    run_ranks(hz, &hc, ds, tok, V, &gz, 1);
    for (int r = 0; r < RANKS; r++)
        tu_ok(h[r].st, &h[r].err, "a bf16 rank"),
            tu_ok(hz[r].st, &hz[r].err, "a bf16 sharded rank");
    TU_CHECK(memcmp(hz[0].params, h[0].params, h[0].np * sizeof(float)) == 0 &&
                 memcmp(hz[1].params, h[0].params, h[0].np * sizeof(float)) == 0 &&
                 memcmp(h[0].params, two[0].params, h[0].np * sizeof(float)) != 0,
             "ZeRO-1 in bf16: both ranks end with the unsharded bf16 run's parameters, bit for "
             "bit (and not float32's)");
    for (int r = 0; r < RANKS; r++)
        job_free(&h[r]), job_free(&hz[r]);
    job_free(&one);
    for (int r = 0; r < RANKS; r++)
        job_free(&two[r]);

    /* a failing collective fails the run on every rank */
    group bad = {.fail_after = 5};
    run_ranks(two, &cfg, ds, tok, V, &bad, 0);
    TU_CHECK(two[0].st == CLF_ERR_IO && two[1].st == CLF_ERR_IO &&
                 strstr(two[1].err.msg, "injected reduction failure") != NULL,
             "a failed reduction fails the run (%d, '%s')", (int)two[1].st, two[1].err.msg);
    for (int r = 0; r < RANKS; r++)
        job_free(&two[r]);

    clf_dataset_destroy(ds);
    clf_tokenizer_destroy(tok);
    return tu_finish();
}
