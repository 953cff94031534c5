/*
 * choice.c - the automatic choice between CLBlast and the native engine.
 *
 * Design
 *   A shape class is (trans_a, trans_b, floor(log2) of m, n, k and batch).
 *   The first call of a class times both engines on the caller's A and B
 *   into a temporary C: two warm-up runs each (they absorb kernel
 *   compilation and size the scratch), then 3 rounds of one timed run per
 *   engine, interleaved so that a burst of load from elsewhere hits both,
 *   and the faster of the two minimums wins (the minimum is the run least
 *   disturbed; a single run under load once picked CLBlast for the attention
 *   backward shape, which idle runs at 1.8x the native engine's time). The
 *   choice lives in the runtime's GEMM state and in
 *   <cache_dir>/gemm-<device key>.txt, a small text file written to a
 *   temporary name and renamed; a file that does not parse is ignored
 *   entirely and rewritten.
 *
 * Not here: running the engines (dispatch.c, native.c, clblast.c).
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

#define CHOICE_MAGIC "clformer-gemm-choices 2"
#define CHOICE_LINE_MAX 256
#define TIMING_TINY_FLOPS 65536 /* below 2*m*n*k*batch of this, no timing */
#define TIMING_ROUNDS 3         /* timed runs of each engine, interleaved */

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

/* Write every choice to the cache file (temp + rename). Best effort: the
 * cache only saves re-timing, so a failure to write is not an error. */
static void choices_save(clf_runtime *rt, gemm_state *st)
{
    char path[4096], tmp[4200];
    if (!choice_path(rt, path, sizeof path))
        return;
    clf_error ignored;
    if (clf_mkdir_p(clf_runtime_cache_dir(rt), &ignored) != CLF_OK)
        return;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *fp = fopen(tmp, "w");
    if (fp == NULL)
        return;
    int ok = fprintf(fp, "%s\n", CHOICE_MAGIC) > 0;
    for (size_t i = 0; ok && i < st->n_choices; i++) {
        const gemm_choice *c = &st->choices[i];
        ok = fprintf(fp, "%u %u %u %u %u %u %s %.6g %.6g\n", c->cls.ta, c->cls.tb, c->cls.lm,
                     c->cls.ln, c->cls.lk, c->cls.lb, clf_gemm_engine_name(c->engine), c->t_clblast,
                     c->t_native) > 0;
    }
    if (fclose(fp) != 0)
        ok = 0;
    if (!ok || rename(tmp, path) != 0)
        remove(tmp);
}

/* Parse one line "ta tb lm ln lk lb engine t_clblast t_native"; 0 if bad. */
static int choice_parse(const char *line, gemm_choice *c)
{
    unsigned v[6];
    char eng[16];
    double tc, tn;
    int used = -1;
    if (sscanf(line, "%u %u %u %u %u %u %15s %lf %lf%n", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
               eng, &tc, &tn, &used) != 9 ||
        used < 0)
        return 0;
    if (line[used] != '\n' && line[used] != '\0')
        return 0;
    if (v[0] > 1 || v[1] > 1)
        return 0;
    for (int i = 2; i < 6; i++)
        if (v[i] > 63)
            return 0;
    if (!isfinite(tc) || !isfinite(tn) || tc < -1.0 || tn < -1.0)
        return 0;
    if (strcmp(eng, "clblast") == 0)
        c->engine = CLF_GEMM_CLBLAST;
    else if (strcmp(eng, "native") == 0)
        c->engine = CLF_GEMM_NATIVE;
    else
        return 0;
    c->cls = (gemm_class){(unsigned char)v[0], (unsigned char)v[1], (unsigned char)v[2],
                          (unsigned char)v[3], (unsigned char)v[4], (unsigned char)v[5]};
    c->t_clblast = tc;
    c->t_native = tn;
    return 1;
}

/* Load the cache file once. Anything malformed discards the whole file,
 * which is then rewritten with what this runtime knows. */
static void choices_load(clf_runtime *rt, gemm_state *st)
{
    st->choices_loaded = 1;
    char path[4096];
    if (!choice_path(rt, path, sizeof path))
        return;
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return; /* no file yet */
    char line[CHOICE_LINE_MAX];
    int bad = 0;
    if (fgets(line, sizeof line, fp) == NULL || strcmp(line, CHOICE_MAGIC "\n") != 0)
        bad = 1;
    while (!bad && fgets(line, sizeof line, fp) != NULL) {
        gemm_choice c;
        size_t len = strlen(line);
        if (len == 0 || line[len - 1] != '\n' || !choice_parse(line, &c) ||
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

/* ---- timing both engines ------------------------------------------------------------ */

static clf_status time_run(clf_runtime *rt, gemm_state *st, clf_gemm_engine e,
                           const clf_gemm_desc *d, double *sec, clf_error *err)
{
    clf_status s = clf_runtime_finish(rt, err);
    if (s != CLF_OK)
        return s;
    const double t0 = clf_now_seconds();
    s = clf_gemm_engine_run(rt, st, e, d, err);
    if (s == CLF_OK)
        s = clf_runtime_finish(rt, err);
    *sec = clf_now_seconds() - t0;
    return s;
}

/* Time both engines on d's A and B, writing into a temporary C. An engine
 * that fails is reported with time -1 (and loses); both are -1 when the
 * temporary C cannot be allocated. */
static clf_status time_engines(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d,
                               double *t_clblast, double *t_native, clf_error *err)
{
    const size_t batch = clf_gemm_batch_of(d);
    const size_t c_floats = (batch - 1) * d->stride_c + (d->m - 1) * d->ldc + d->n;
    clf_buffer *tmp = NULL;
    *t_clblast = *t_native = -1.0;
    clf_error alloc_err;
    if (clf_buffer_create(rt, c_floats * sizeof(float), &tmp, &alloc_err) != CLF_OK)
        return CLF_OK; /* no room for a scratch C: nothing timed, the caller falls back */
    clf_status s = clf_buffer_fill(rt, tmp, 0, c_floats * sizeof(float), 0u, err);
    if (s != CLF_OK)
        goto fail;
    clf_gemm_desc dt = *d;
    dt.c = (clf_ptr){tmp, 0};
    /* the products alone: an epilogue would write D, which timing must not */
    dt.bias = (clf_ptr){NULL, 0};
    dt.act = CLF_GEMM_ACT_NONE;
    dt.d = (clf_ptr){NULL, 0};
    const clf_gemm_engine eng[2] = {CLF_GEMM_CLBLAST, CLF_GEMM_NATIVE};
    double t[2];
    int ok[2] = {1, 1};
    clf_error ignored;
    for (int i = 0; i < 2; i++) {
        /* warm-up: compiles kernels, sizes the scratch */
        if (time_run(rt, st, eng[i], &dt, &t[i], &ignored) != CLF_OK ||
            time_run(rt, st, eng[i], &dt, &t[i], &ignored) != CLF_OK)
            ok[i] = 0;
    }
    t[0] = t[1] = HUGE_VAL;
    for (int round = 0; round < TIMING_ROUNDS; round++)
        for (int i = 0; i < 2; i++) {
            double ti = 0.0;
            if (!ok[i])
                continue;
            if (time_run(rt, st, eng[i], &dt, &ti, &ignored) != CLF_OK)
                ok[i] = 0;
            else if (ti < t[i])
                t[i] = ti;
        }
    *t_clblast = ok[0] ? t[0] : -1.0;
    *t_native = ok[1] ? t[1] : -1.0;
    /* the queue may hold a failed engine's partial work: drain it */
    s = clf_runtime_finish(rt, err);
fail:
    clf_buffer_destroy(tmp);
    return s;
}

/* ---- the choice ---------------------------------------------------------------------- */

/* The auto choice for validated d with m, n, k > 0. */
clf_status clf_gemm_auto_choose(clf_runtime *rt, gemm_state *st, const clf_gemm_desc *d,
                                clf_gemm_engine *out, clf_error *err)
{
    if (!st->choices_loaded)
        choices_load(rt, st);
    const gemm_class cls = class_of(d);
    const gemm_choice *found = choice_find(st, cls);
    if (found != NULL) {
        *out = found->engine;
        return CLF_OK;
    }
    const int gpu = !clf_runtime_device(rt)->serial_groups; /* groups run in parallel */
    clf_error native_err;
    if (clf_gemm_native_init(rt, st, &native_err) != CLF_OK) {
        *out = CLF_GEMM_CLBLAST; /* not remembered: the build may work next time */
        return CLF_OK;
    }
    gemm_choice c = {.cls = cls, .t_clblast = -1.0, .t_native = -1.0};
    const double flops =
        2.0 * (double)d->m * (double)d->n * (double)d->k * (double)clf_gemm_batch_of(d);
    if (flops < TIMING_TINY_FLOPS) {
        /* launch overhead dominates; CLBlast's extra kernels cost most on CPUs */
        c.engine = gpu ? CLF_GEMM_CLBLAST : CLF_GEMM_NATIVE;
    } else {
        clf_status s = time_engines(rt, st, d, &c.t_clblast, &c.t_native, err);
        if (s != CLF_OK)
            return s;
        if (c.t_clblast < 0 && c.t_native < 0) {
            /* nothing could be timed: the device's usual winner, not remembered */
            *out = gpu ? CLF_GEMM_CLBLAST : CLF_GEMM_NATIVE;
            return CLF_OK;
        }
        if (c.t_clblast < 0)
            c.engine = CLF_GEMM_NATIVE;
        else if (c.t_native < 0)
            c.engine = CLF_GEMM_CLBLAST;
        else
            c.engine = c.t_native <= c.t_clblast ? CLF_GEMM_NATIVE : CLF_GEMM_CLBLAST;
    }
    clf_status s = choice_add(st, &c, err);
    if (s != CLF_OK)
        return s;
    choices_save(rt, st);
    *out = c.engine;
    return CLF_OK;
}
