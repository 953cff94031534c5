/*
 * test_schedule.c - learning-rate schedules against values worked out by
 * hand and an independent float64 transcription of nanoGPT's get_lr
 * (karpathy/nanoGPT train.py, current master) and of the Noam formula.
 *
 * Checks (relative tolerance 1e-12, both sides are double):
 *   - cosine, the CPU recipe (lr 1e-3, min 1e-4, warmup 100, steps 2000):
 *     it=0 -> 1e-3/101, it=99 -> 1e-3*100/101, it=100 -> lr, it=1050 -> the
 *     midpoint (lr+min)/2, it=2000 -> min_lr, it>2000 -> min_lr; every step
 *     against the reference; non-increasing after warmup, increasing in it;
 *   - cosine with warmup 0 and with steps <= warmup (no decay phase);
 *   - constant with and without warmup;
 *   - noam: against the formula at many steps, peak at s = warmup with
 *     value factor*(dim*warmup)^-0.5, and that s=warmup-1 and s=warmup+1
 *     are smaller;
 *   - init rejects min_lr > lr, noam with warmup 0, lr <= 0.
 * No device needed.
 */
#include <math.h>
#include <stdio.h>

#include "config/config.h"
#include "model/train/schedule.h"
#include "tests/test_util.h"

static double ref_nanogpt(int it, double lr, double min_lr, int warmup, int decay)
{
    if (it < warmup)
        return lr * (it + 1) / (warmup + 1);
    if (it > decay)
        return min_lr;
    double ratio = (double)(it - warmup) / (double)(decay - warmup);
    double coeff = 0.5 * (1.0 + cos(3.14159265358979323846 * ratio));
    return min_lr + coeff * (lr - min_lr);
}

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b) + 1e-300; }

static clf_model_config base_cfg(clf_schedule_type type, double lr, double min_lr, int warmup,
                                 int steps)
{
    clf_model_config c;
    clf_config_defaults(&c);
    c.train.schedule.type = type;
    c.train.optimizer.lr = lr;
    c.train.schedule.min_lr = min_lr;
    c.train.schedule.warmup = warmup;
    c.train.steps = steps;
    c.embedding.dim = 512;
    return c;
}

static void test_cosine(void)
{
    clf_model_config c = base_cfg(CLF_SCHED_COSINE, 1e-3, 1e-4, 100, 2000);
    clf_schedule s;
    clf_error e;
    tu_ok(clf_schedule_init(&s, &c, &e), &e, "cosine init");
    TU_CHECK(near(clf_schedule_lr(&s, 0), 1e-3 / 101.0), "cosine it=0: %.17g",
             clf_schedule_lr(&s, 0));
    TU_CHECK(near(clf_schedule_lr(&s, 99), 1e-3 * 100.0 / 101.0), "cosine it=99: %.17g",
             clf_schedule_lr(&s, 99));
    TU_CHECK(near(clf_schedule_lr(&s, 100), 1e-3), "cosine it=100: %.17g",
             clf_schedule_lr(&s, 100));
    TU_CHECK(near(clf_schedule_lr(&s, 1050), 0.5 * (1e-3 + 1e-4)), "cosine midpoint: %.17g",
             clf_schedule_lr(&s, 1050));
    TU_CHECK(near(clf_schedule_lr(&s, 2000), 1e-4), "cosine it=steps: %.17g",
             clf_schedule_lr(&s, 2000));
    TU_CHECK(clf_schedule_lr(&s, 2001) == 1e-4 && clf_schedule_lr(&s, 1000000) == 1e-4,
             "cosine past steps is min_lr");
    int bad = -1, mono = 1;
    double prev = 0.0;
    for (int it = 0; it <= 2100; it++) {
        double got = clf_schedule_lr(&s, (uint64_t)it);
        if (!near(got, ref_nanogpt(it, 1e-3, 1e-4, 100, 2000)) && bad < 0)
            bad = it;
        if (it > 0 && it <= 100 && !(got > prev))
            mono = 0;
        if (it > 100 && got > prev)
            mono = 0;
        prev = got;
    }
    TU_CHECK(bad < 0, "cosine matches nanoGPT's get_lr at every it (first mismatch: %d)", bad);
    TU_CHECK(mono, "cosine: warmup increasing, then non-increasing");

    c = base_cfg(CLF_SCHED_COSINE, 6e-4, 6e-5, 0, 50);
    tu_ok(clf_schedule_init(&s, &c, &e), &e, "cosine init, no warmup");
    TU_CHECK(near(clf_schedule_lr(&s, 0), 6e-4), "cosine, no warmup: it=0 is lr");
    bad = -1;
    for (int it = 0; it <= 60; it++)
        if (!near(clf_schedule_lr(&s, (uint64_t)it), ref_nanogpt(it, 6e-4, 6e-5, 0, 50)) && bad < 0)
            bad = it;
    TU_CHECK(bad < 0, "cosine without warmup matches (first mismatch: %d)", bad);

    c = base_cfg(CLF_SCHED_COSINE, 1e-3, 1e-4, 10, 10);
    tu_ok(clf_schedule_init(&s, &c, &e), &e, "cosine init, steps = warmup");
    TU_CHECK(near(clf_schedule_lr(&s, 9), 1e-3 * 10.0 / 11.0) && clf_schedule_lr(&s, 10) == 1e-4 &&
                 isfinite(clf_schedule_lr(&s, 10)),
             "cosine with steps <= warmup: warmup, then min_lr (no division by zero)");
}

static void test_constant(void)
{
    clf_model_config c = base_cfg(CLF_SCHED_CONSTANT, 3e-4, 0.0, 0, 100);
    clf_schedule s;
    clf_error e;
    tu_ok(clf_schedule_init(&s, &c, &e), &e, "constant init");
    TU_CHECK(clf_schedule_lr(&s, 0) == 3e-4 && clf_schedule_lr(&s, 99) == 3e-4 &&
                 clf_schedule_lr(&s, 12345) == 3e-4,
             "constant without warmup is lr everywhere");
    c.train.schedule.warmup = 4;
    tu_ok(clf_schedule_init(&s, &c, &e), &e, "constant init, warmup");
    TU_CHECK(near(clf_schedule_lr(&s, 0), 3e-4 / 5.0) &&
                 near(clf_schedule_lr(&s, 3), 3e-4 * 4 / 5.0) && clf_schedule_lr(&s, 4) == 3e-4,
             "constant with warmup 4: lr*(it+1)/5, then lr");
}

static void test_noam(void)
{
    const int dim = 512, warmup = 4000;
    const double factor = 2.0;
    clf_model_config c = base_cfg(CLF_SCHED_NOAM, factor, 0.0, warmup, 100000);
    c.embedding.dim = dim;
    clf_schedule s;
    clf_error e;
    tu_ok(clf_schedule_init(&s, &c, &e), &e, "noam init");
    int bad = -1;
    for (int it = 0; it < 20000; it += 7) {
        double st = it + 1.0;
        double ref = factor * pow(dim, -0.5) * fmin(pow(st, -0.5), st * pow(warmup, -1.5));
        if (!near(clf_schedule_lr(&s, (uint64_t)it), ref) && bad < 0)
            bad = it;
    }
    TU_CHECK(bad < 0, "noam matches the formula (first mismatch: %d)", bad);
    double peak = clf_schedule_lr(&s, warmup - 1); /* s = warmup */
    TU_CHECK(near(peak, factor / sqrt((double)dim * warmup)), "noam peak %.17g", peak);
    TU_CHECK(clf_schedule_lr(&s, warmup - 2) < peak && clf_schedule_lr(&s, warmup) < peak,
             "noam peaks at s = warmup");
}

static void test_invalid(void)
{
    clf_schedule s;
    clf_error e;
    clf_model_config c = base_cfg(CLF_SCHED_COSINE, 1e-3, 2e-3, 10, 100);
    TU_CHECK(clf_schedule_init(&s, &c, &e) == CLF_ERR_CONFIG, "cosine min_lr > lr refused");
    c = base_cfg(CLF_SCHED_NOAM, 1.0, 0.0, 0, 100);
    TU_CHECK(clf_schedule_init(&s, &c, &e) == CLF_ERR_CONFIG, "noam warmup 0 refused");
    c = base_cfg(CLF_SCHED_CONSTANT, 0.0, 0.0, 0, 100);
    TU_CHECK(clf_schedule_init(&s, &c, &e) == CLF_ERR_CONFIG, "lr 0 refused");
}

int main(void)
{
    test_cosine();
    test_constant();
    test_noam();
    test_invalid();
    return tu_finish();
}
