/*
 * choice.c - the automatic choice among CLBlast and the native engine's
 * configurations: a bounded search per shape class, and its cache file.
 *
 * Design
 *   A shape class is (trans_a, trans_b, floor(log2) of m, n, k and batch).
 *   The first call of a class times the device's search candidates (CLBlast
 *   and the native configurations it lists, native.c) on the caller's A and
 *   B into a temporary C: two warm-up runs each (they absorb kernel
 *   compilation and size the scratch); a candidate whose warm run is more
 *   than PRUNE_FACTOR times the best one's is out (its warm time is kept
 *   for the table); the rest get ROUNDS rounds of one timed sample each,
 *   interleaved so that a burst of load from elsewhere hits all of them, and
 *   the fastest minimum wins (the minimum is the sample least disturbed: a
 *   single run under load once picked CLBlast for a shape that idle runs
 *   take 1.8x longer on it). Timing is host wall time around a drained
 *   queue, which device events would not improve for launches of this size.
 *   A sample is one run, or for products shorter than SAMPLE_SECONDS the
 *   same number of runs of every candidate enqueued back to back, as a
 *   model's step enqueues them: one run at a time, the drain and the
 *   device's threads waking for each run hid most of the difference
 *   between candidates on sub-millisecond products, and noise then picked
 *   among them (docs/devices.md).
 *
 *   The search is bounded: once a runtime has spent its budget
 *   (gemm_search_budget, 60 s by default) on timing, new classes are timed
 *   on CLBlast and the first native configuration only, as before there
 *   was a search, and saved like the others, so later runs stay quiet (not
 *   saving them was tried: every later process then searched those classes
 *   again, CLBlast's kernels compiled anew in each). The budget meters the
 *   timed runs only: each candidate's first run, which builds and
 *   specialises its kernels, is counted apart (setup_seconds). When it
 *   counted, a cold first run on Intel's CPU runtime (5-8 s of compilation
 *   per configuration) spent the whole budget on its first class and left
 *   the rest of the cpu model's GEMMs on a configuration up to 25% slower
 *   than the best; compilation is paid once per candidate and process
 *   whatever the budget, and the program cache makes it cheap for the
 *   next process. `clformer tune` searches without a budget. Products under
 *   TIMING_TINY_FLOPS are not timed: launch overhead decides them, and the
 *   first native configuration takes them in one launch.
 *
 *   Where the winner is a native configuration that would run the class in
 *   K slices accumulating into C (native.c: deep products), it is then
 *   timed the same way (interleaved rounds, fastest minimum) in slices and
 *   in one pass over K, and the faster is kept with it: slices keep a
 *   work-group's operands in a small cache but read and write C once per
 *   slice, and which of the two costs more depends on the cache sizes,
 *   which a device does not report reliably (PoCL reports the L3 of a CPU,
 *   Intel's runtime its L2).
 *
 *   The choices live in the runtime's GEMM state and in
 *   <cache_dir>/gemm-<device key>.txt: a magic line, the candidate list
 *   after a hash of cl/gemm.cl (with common.cl) as this runtime builds it,
 *   then one line per class with the timed shape, the winner, whether it
 *   runs K in one pass, and every candidate's time. It is written to a
 *   temporary name and renamed; a file that does not parse, or was made
 *   for another candidate list or other kernels (an older clformer, or a
 *   kernel_dir with edited sources), is ignored entirely and rewritten.
 *
 * Not here: running the candidates (dispatch.c, native.c, clblast.c).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/gemm/gemm_internal.h"
#include "runtime/runtime_internal.h"

#define CHOICE_MAGIC "clformer-gemm-choices 6" /* 6: timed in samples of runs */
#define CHOICE_LINE_MAX 1024
#define TIMING_TINY_FLOPS 65536 /* below 2*m*n*k*batch of this, no timing */
#define TIMING_ROUNDS 3         /* timed samples of each candidate, interleaved */
#define SAMPLE_SECONDS 4e-3     /* a shorter product runs back to back for this long */
#define SAMPLE_RUNS_MAX 16      /* at most this many runs a sample */
#define PRUNE_FACTOR 3.0        /* warm run this many times the best: out */
#define SEARCH_BUDGET 60.0      /* seconds per runtime (gemm_search_budget = 0) */

/* ---- the choice cache ------------------------------------------------------------- */

static unsigned char log2_bucket(size_t x)
{
    unsigned char b = 0;
    while (x > 1) {
        x >>= 1;
        b++;
    }
    return b;
}

static gemm_class class_of(const clf_gemm_desc *d)
{
    gemm_class c = {(unsigned char)d->trans_a, (unsigned char)d->trans_b,
                    log2_bucket(d->m),         log2_bucket(d->n),
                    log2_bucket(d->k),         log2_bucket(clf_gemm_batch_of(d))};
    return c;
}

static int class_eq(gemm_class a, gemm_class b)
{
    return a.ta == b.ta && a.tb == b.tb && a.lm == b.lm && a.ln == b.ln && a.lk == b.lk &&
           a.lb == b.lb;
}

static gemm_choice *choice_find(gemm_state *st, gemm_class c)
{
    for (size_t i = 0; i < st->n_choices; i++)
        if (class_eq(st->choices[i].cls, c))
            return &st->choices[i];
    return NULL;
}

static clf_status choice_add(gemm_state *st, const gemm_choice *c, clf_error *err)
{
    gemm_choice *old = choice_find(st, c->cls);
    if (old != NULL) {
        *old = *c;
        return CLF_OK;
    }
    if (st->n_choices == st->cap_choices) {
        size_t cap = st->cap_choices ? st->cap_choices * 2 : 16;
        gemm_choice *nc = realloc(st->choices, cap * sizeof *nc);
        if (nc == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "gemm: out of host memory");
        st->choices = nc;
        st->cap_choices = cap;
    }
    st->choices[st->n_choices++] = *c;
    return CLF_OK;
}

static int choice_path(clf_runtime *rt, char *out, size_t cap)
{
    const char *dir = clf_runtime_cache_dir(rt);
    const char *key = clf_runtime_device_key(rt);
    if (dir == NULL || dir[0] == '\0' || key == NULL || key[0] == '\0')
        return 0;
    int n = snprintf(out, cap, "%s/gemm-%s.txt", dir, key);
    return n > 0 && (size_t)n < cap;
}

/* The candidate list line: "candidates <hash> clblast r8v16x3 ...", the
 * hash that of cl/gemm.cl as built (choices timed on other kernels are
 * stale, as those timed on another list). */
static void candidates_line(const gemm_state *st, char *out, size_t cap)
{
    size_t used =
        (size_t)snprintf(out, cap, "candidates %016llx", (unsigned long long)st->kernels_hash);
    for (size_t c = 0; c <= st->n_natives && used < cap; c++)
        used += (size_t)snprintf(out + used, cap - used, " %s", st->cand_names[c]);
}

/* Write every choice to the cache file (temp + rename). Best effort: the
 * cache only saves re-timing, so a failure to write is not an error. */
static void choices_save(clf_runtime *rt, gemm_state *st)
{
    char path[4096], tmp[4200], cands[CHOICE_LINE_MAX];
    if (!choice_path(rt, path, sizeof path))
        return;
    clf_error ignored;
    if (clf_mkdir_p(clf_runtime_cache_dir(rt), &ignored) != CLF_OK) {
        clf_runtime_cache_write_failed(rt, clf_runtime_cache_dir(rt), errno);
        return;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *fp = fopen(tmp, "w");
    if (fp == NULL) {
        clf_runtime_cache_write_failed(rt, tmp, errno);
        return;
    }
    candidates_line(st, cands, sizeof cands);
    int ok = fprintf(fp, "%s\n%s\n", CHOICE_MAGIC, cands) > 0;
    for (size_t i = 0; ok && i < st->n_choices; i++) {
        const gemm_choice *c = &st->choices[i];
        ok = fprintf(fp, "%u %u %u %u %u %u %zu %zu %zu %zu %s %d", c->cls.ta, c->cls.tb, c->cls.lm,
                     c->cls.ln, c->cls.lk, c->cls.lb, c->m, c->n, c->k, c->batch,
                     st->cand_names[c->cand], c->k_whole) > 0;
        for (size_t j = 0; ok && j <= st->n_natives; j++)
            ok = fprintf(fp, " %.6g", c->t[j]) > 0;
        ok = ok && fputc('\n', fp) != EOF;
    }
    if (fclose(fp) != 0)
        ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        clf_runtime_cache_write_failed(rt, path, errno);
        remove(tmp);
    }
}

/* Parse one line "ta tb lm ln lk lb m n k batch winner whole t_0 .. t_last";
 * 0 if bad (any field out of range, the winner not a candidate, a time
 * short). */
static int choice_parse(const gemm_state *st, const char *line, gemm_choice *c)
{
    unsigned v[6], whole;
    size_t dims[4];
    char win[GEMM_CONFIG_NAME + 1];
    int used = -1;
    if (sscanf(line, "%u %u %u %u %u %u %zu %zu %zu %zu %32s %u%n", &v[0], &v[1], &v[2], &v[3],
               &v[4], &v[5], &dims[0], &dims[1], &dims[2], &dims[3], win, &whole, &used) != 12 ||
        used < 0)
        return 0;
    if (v[0] > 1 || v[1] > 1 || whole > 1)
        return 0;
    for (int i = 2; i < 6; i++)
        if (v[i] > 63)
            return 0;
    memset(c, 0, sizeof *c);
    c->cand = -1;
    for (size_t j = 0; j <= st->n_natives; j++)
        if (strcmp(win, st->cand_names[j]) == 0)
            c->cand = (int)j;
    if (c->cand < 0)
        return 0;
    const char *p = line + used;
    for (size_t j = 0; j <= st->n_natives; j++) {
        int n = -1;
        if (sscanf(p, " %lf%n", &c->t[j], &n) != 1 || n < 0 || !isfinite(c->t[j]) || c->t[j] < -1.0)
            return 0;
        p += n;
    }
    if (*p != '\n' && *p != '\0')
        return 0;
    c->cls = (gemm_class){(unsigned char)v[0], (unsigned char)v[1], (unsigned char)v[2],
                          (unsigned char)v[3], (unsigned char)v[4], (unsigned char)v[5]};
    c->k_whole = (int)whole;
    c->m = dims[0], c->n = dims[1], c->k = dims[2], c->batch = dims[3];
    c->fresh = c->used = 0;
    /* the shape must belong to its class */
    const clf_gemm_desc d = {
        .trans_a = v[0], .trans_b = v[1], .m = c->m, .n = c->n, .k = c->k, .batch = c->batch};
    return c->m > 0 && c->n > 0 && c->k > 0 && c->batch > 0 && class_eq(class_of(&d), c->cls);
}

/* Load the cache file once. Anything malformed, or a candidate list other
 * than this device's, discards the whole file, which is then rewritten with
 * what this runtime knows. (With gemm_retune its classes are searched again
 * when they are met; the others stay as they were.) */
static void choices_load(clf_runtime *rt, gemm_state *st)
{
    st->choices_loaded = 1;
    clf_error ignored; /* unreadable: hash 0, as good as any for a key */
    if (clf_program_source_hash(rt, "gemm", &st->kernels_hash, &ignored) != CLF_OK)
        st->kernels_hash = 0;
    char path[4096], cands[CHOICE_LINE_MAX];
    if (!choice_path(rt, path, sizeof path))
        return;
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return; /* no file yet */
    char line[CHOICE_LINE_MAX];
    int bad = 0;
    candidates_line(st, cands, sizeof cands);
    strcat(cands, "\n");
    if (fgets(line, sizeof line, fp) == NULL || strcmp(line, CHOICE_MAGIC "\n") != 0 ||
        fgets(line, sizeof line, fp) == NULL || strcmp(line, cands) != 0)
        bad = 1;
    while (!bad && fgets(line, sizeof line, fp) != NULL) {
        gemm_choice c;
        size_t len = strlen(line);
        if (len == 0 || line[len - 1] != '\n' || !choice_parse(st, line, &c) ||
            choice_find(st, c.cls) != NULL || choice_add(st, &c, NULL) != CLF_OK)
            bad = 1;
    }
    if (ferror(fp))
        bad = 1;
    fclose(fp);
    if (bad) {
        st->n_choices = 0;
        choices_save(rt, st);
    }
}

/* ---- the search ---------------------------------------------------------------------- */

/* Seconds per run of `runs` runs of candidate cand on d, enqueued back to
 * back between two drains of the queue. */
static clf_status time_run(clf_runtime *rt, gemm_state *st, int cand, const clf_gemm_desc *d,
                           int runs, double *sec, clf_error *err)
{
    clf_status s = clf_runtime_finish(rt, err);
    if (s != CLF_OK)
        return s;
    const double t0 = clf_now_seconds();
    for (int i = 0; i < runs && s == CLF_OK; i++)
        s = clf_gemm_cand_run(rt, st, cand, d, err);
    if (s == CLF_OK)
        s = clf_runtime_finish(rt, err);
    *sec = (clf_now_seconds() - t0) / runs;
    return s;
}

/* Runs per timed sample for products whose warm run took `warm` seconds:
 * enough back to back for a sample of SAMPLE_SECONDS, at most
 * SAMPLE_RUNS_MAX. */
static int sample_runs(double warm)
{
    if (!(warm > 0.0) || warm >= SAMPLE_SECONDS)
        return 1;
    const double r = ceil(SAMPLE_SECONDS / warm);
    return r < SAMPLE_RUNS_MAX ? (int)r : SAMPLE_RUNS_MAX;
}

/* What the search times for d: its A and B into a temporary C (*tmp, zeros;
 * NULL when there is no room for it: nothing is timed then), the product
 * alone (an epilogue would write D, which timing must not), in the engine's
 * default K slicing. */
static clf_status timing_twin(clf_runtime *rt, const clf_gemm_desc *d, clf_gemm_desc *dt,
                              clf_buffer **tmp, clf_error *err)
{
    const size_t batch = clf_gemm_batch_of(d);
    const size_t c_floats = (batch - 1) * d->stride_c + (d->m - 1) * d->ldc + d->n;
    clf_error alloc_err;
    *tmp = NULL;
    if (clf_buffer_create(rt, c_floats * sizeof(float), tmp, &alloc_err) != CLF_OK) {
        *tmp = NULL;
        return CLF_OK;
    }
    clf_status s = clf_buffer_fill(rt, *tmp, 0, c_floats * sizeof(float), 0u, err);
    if (s != CLF_OK) {
        clf_buffer_destroy(*tmp);
        *tmp = NULL;
        return s;
    }
    *dt = *d;
    dt->c = (clf_ptr){*tmp, 0};
    dt->bias = (clf_ptr){NULL, 0};
    dt->epi = CLF_GEMM_EPI_NONE;
    dt->act = CLF_GEMM_ACT_NONE;
    dt->d = (clf_ptr){NULL, 0};
    dt->c_type = dt->d_type = CLF_DT_F32;
    dt->k_slice = 0;
    return CLF_OK;
}

/* A native configuration that cannot be built or run on this device leaves
 * the search with a notice, once per runtime (the search goes on without
 * it; a forced --gemm NAME reports the error instead). */
static void notice_dropped(clf_runtime *rt, gemm_state *st, size_t cand)
{
    if (cand == GEMM_CAND_CLBLAST || cand > st->n_natives)
        return;
    gemm_native *nat = &st->natives[cand - 1];
    const clf_runtime_options *o = clf_runtime_options_get(rt);
    if (!nat->tried || nat->status == CLF_OK || nat->dropped)
        return;
    nat->dropped = 1;
    if (o->notify != NULL) {
        char what[600];
        snprintf(what, sizeof what, "%s: %.500s", nat->cfg.name, nat->err.msg);
        o->notify(o->notify_user, "gemm-dropped", what);
    }
}

/* Time candidates 0 .. n-1 on dt (timing_twin); t[c] = seconds per call, -1
 * for a candidate that failed or was not timed. *setup = the seconds of
 * each candidate's first run, which builds and specialises its kernels and
 * sizes its scratch (what a later process mostly finds cached). */
static clf_status time_candidates(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *dt,
                                  size_t n, double *t, double *setup, clf_error *err)
{
    for (size_t c = 0; c < GEMM_MAX_CANDS; c++)
        t[c] = -1.0;
    *setup = 0.0;
    int live[GEMM_MAX_CANDS];
    double best_warm = HUGE_VAL;
    clf_error ignored;
    for (size_t c = 0; c < n; c++) {
        /* warm-up: compiles kernels, sizes the scratch; the second is timed */
        live[c] = time_run(rt, st, (int)c, dt, 1, &t[c], &ignored) == CLF_OK;
        if (live[c])
            *setup += t[c];
        live[c] = live[c] && time_run(rt, st, (int)c, dt, 1, &t[c], &ignored) == CLF_OK;
        if (!live[c]) {
            t[c] = -1.0;
            notice_dropped(rt, st, c);
        } else if (t[c] < best_warm)
            best_warm = t[c];
    }
    for (size_t c = 0; c < n; c++)
        if (live[c] && t[c] > PRUNE_FACTOR * best_warm)
            live[c] = 0; /* clearly slower: its warm time stands */
    /* the same count for every candidate */
    const int runs = sample_runs(best_warm);
    for (int round = 0; round < TIMING_ROUNDS; round++)
        for (size_t c = 0; c < n; c++) {
            double tc = 0.0;
            if (!live[c])
                continue;
            if (time_run(rt, st, (int)c, dt, runs, &tc, &ignored) != CLF_OK) {
                live[c] = 0;
                t[c] = -1.0;
            } else if (round == 0 || tc < t[c]) {
                t[c] = tc;
            }
        }
    /* the queue may hold a failed candidate's partial work: drain it */
    return clf_runtime_finish(rt, err);
}

/* Time candidate cand on dt in its default K slices and in one pass
 * (after a warm-up of the latter), TIMING_ROUNDS interleaved rounds each:
 * 1 where one pass has the faster minimum. A failed run keeps the slices. */
static int time_whole(clf_runtime *rt, gemm_state *st, int cand, const clf_gemm_desc *dt)
{
    clf_gemm_desc whole = *dt;
    whole.k_slice = SIZE_MAX;
    double t_sliced = HUGE_VAL, t_whole = HUGE_VAL, tc = 0.0;
    clf_error ignored;
    if (time_run(rt, st, cand, &whole, 1, &tc, &ignored) != CLF_OK)
        return 0;
    const int runs = sample_runs(tc);
    for (int round = 0; round < TIMING_ROUNDS; round++) {
        if (time_run(rt, st, cand, dt, runs, &tc, &ignored) != CLF_OK)
            return 0;
        t_sliced = tc < t_sliced ? tc : t_sliced;
        if (time_run(rt, st, cand, &whole, runs, &tc, &ignored) != CLF_OK)
            return 0;
        t_whole = tc < t_whole ? tc : t_whole;
    }
    return t_whole < t_sliced;
}

/* ---- the choice ---------------------------------------------------------------------- */

static void choice_give(gemm_choice *c, int *cand, size_t *k_slice)
{
    c->used = 1;
    *cand = c->cand;
    if (k_slice != NULL)
        *k_slice = c->k_whole ? SIZE_MAX : 0;
}

int clf_gemm_auto_known(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d, int *cand,
                        size_t *k_slice)
{
    if (!st->choices_loaded)
        choices_load(rt, st);
    gemm_choice *found = choice_find(st, class_of(d));
    if (found == NULL || (!found->fresh && clf_runtime_options_get(rt)->gemm_retune))
        return 0;
    choice_give(found, cand, k_slice);
    return 1;
}

/* The auto choice for validated d with m, n, k > 0. */
clf_status clf_gemm_auto_choose(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d, int *cand,
                                size_t *k_slice, clf_error *err)
{
    if (!st->choices_loaded)
        choices_load(rt, st);
    const gemm_class cls = class_of(d);
    gemm_choice *found = choice_find(st, cls);
    if (k_slice != NULL)
        *k_slice = 0;
    if (found != NULL && (found->fresh || !clf_runtime_options_get(rt)->gemm_retune)) {
        choice_give(found, cand, k_slice);
        return CLF_OK;
    }
    /* where nothing is timed: the first native configuration that builds
     * and runs here (one launch; CLBlast's extra kernels cost most on small
     * products); those before it leave the search with a notice */
    gemm_native *first = NULL;
    if (st->n_natives == 0 || clf_gemm_native_default(rt, st, &first, NULL) != CLF_OK) {
        *cand = GEMM_CAND_CLBLAST; /* not remembered: the build may work next time */
        return CLF_OK;
    }
    const int fallback = 1 + (int)(first - st->natives);
    for (int c = 1; c < fallback; c++)
        notice_dropped(rt, st, (size_t)c);
    gemm_choice c = {.cls = cls,
                     .m = d->m,
                     .n = d->n,
                     .k = d->k,
                     .batch = clf_gemm_batch_of(d),
                     .cand = fallback,
                     .fresh = 1,
                     .used = 1};
    for (size_t j = 0; j < GEMM_MAX_CANDS; j++)
        c.t[j] = -1.0;
    const double flops =
        2.0 * (double)d->m * (double)d->n * (double)d->k * (double)clf_gemm_batch_of(d);
    if (flops >= TIMING_TINY_FLOPS) {
        const double budget = clf_runtime_options_get(rt)->gemm_search_budget > 0
                                  ? clf_runtime_options_get(rt)->gemm_search_budget
                                  : SEARCH_BUDGET;
        const size_t n = st->search_seconds < budget ? 1 + st->n_search : 2;
        const clf_runtime_options *o = clf_runtime_options_get(rt);
        if (o->notify != NULL) {
            char what[96];
            snprintf(what, sizeof what, "%c%c %zux%zux%zu%s", d->trans_a ? 'T' : 'N',
                     d->trans_b ? 'T' : 'N', d->m, d->n, d->k,
                     clf_gemm_batch_of(d) > 1 ? " (batch)" : "");
            o->notify(o->notify_user, "gemm-search", what);
        }
        const double t0 = clf_now_seconds();
        double setup = 0.0;
        clf_gemm_desc dt;
        clf_buffer *tmp = NULL;
        clf_status s = timing_twin(rt, d, &dt, &tmp, err);
        if (s == CLF_OK && tmp != NULL)
            s = time_candidates(rt, st, &dt, n, c.t, &setup, err);
        int best = -1;
        for (size_t j = 0; s == CLF_OK && tmp != NULL && j < n; j++)
            if (c.t[j] >= 0 && (best < 0 || c.t[j] < c.t[best]))
                best = (int)j;
        if (best > 0 && clf_gemm_native_sliced(rt, &st->natives[best - 1], &dt)) {
            c.k_whole = time_whole(rt, st, best, &dt);
            s = clf_runtime_finish(rt, err);
        }
        clf_buffer_destroy(tmp);
        const double spent = clf_now_seconds() - t0;
        /* the budget meters timing; building kernels is paid once per
         * candidate (and mostly cached on disk for later processes) */
        st->setup_seconds += setup < spent ? setup : spent;
        st->search_seconds += setup < spent ? spent - setup : 0.0;
        if (s != CLF_OK)
            return s;
        if (best < 0) {
            *cand = fallback; /* nothing could be timed: not remembered */
            return CLF_OK;
        }
        c.cand = best;
    }
    clf_status s = choice_add(st, &c, err);
    if (s != CLF_OK)
        return s;
    choices_save(rt, st);
    *cand = c.cand;
    if (k_slice != NULL)
        *k_slice = c.k_whole ? SIZE_MAX : 0;
    return CLF_OK;
}

clf_status clf_gemm_tuning(clf_runtime *rt, clf_gemm_tuned *rows, size_t cap, size_t *n,
                           clf_error *err)
{
    gemm_state *st = NULL;
    clf_status s = clf_gemm_state_get(rt, &st, err);
    if (s != CLF_OK)
        return s;
    if (!st->choices_loaded)
        choices_load(rt, st);
    *n = 0;
    for (size_t i = 0; i < st->n_choices && *n < cap; i++) {
        const gemm_choice *c = &st->choices[i];
        clf_gemm_tuned *r = &rows[(*n)++];
        memset(r, 0, sizeof *r);
        r->trans_a = c->cls.ta, r->trans_b = c->cls.tb;
        r->m = c->m, r->n = c->n, r->k = c->k, r->batch = c->batch;
        r->winner = (size_t)c->cand;
        r->k_whole = c->k_whole;
        r->used = c->used;
        for (size_t j = 0; j < CLF_GEMM_MAX_CANDIDATES; j++)
            r->seconds[j] = j <= st->n_natives ? c->t[j] : -1.0;
    }
    return CLF_OK;
}

clf_status clf_gemm_search_seconds(clf_runtime *rt, double *timing, double *setup, clf_error *err)
{
    gemm_state *st = NULL;
    clf_status s = clf_gemm_state_get(rt, &st, err);
    if (s != CLF_OK)
        return s;
    *timing = st->search_seconds;
    *setup = st->setup_seconds;
    return CLF_OK;
}
