/*
 * parity_util.c - reading the PyTorch parity fixtures (parity_util.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/parity_util.h"
#include "tests/test_util.h"

clf_st_reader *pu_open(const char *name, clf_model_config *cfg)
{
    char path[512];
    clf_error e;
    clf_st_reader *r = NULL;
    snprintf(path, sizeof path, "tests/data/parity/%s.safetensors", name);
    tu_ok(clf_st_reader_open(path, &r, &e), &e, path);
    const char *fmt = clf_st_reader_metadata(r, "format");
    const char *ver = clf_st_reader_metadata(r, "version");
    const char *yaml = clf_st_reader_metadata(r, "config");
    if (!(fmt && ver && yaml && strcmp(fmt, "clformer-parity") == 0 && strcmp(ver, "1") == 0)) {
        fprintf(stderr, "FATAL: %s is not a clformer-parity v1 fixture with a config\n", path);
        exit(1);
    }
    tu_ok(clf_config_parse_string(yaml, path, NULL, 0, cfg, &e), &e, "fixture config");
    return r;
}

void *pu_read(clf_st_reader *r, const char *name, size_t *numel)
{
    const clf_st_tensor_info *t = clf_st_reader_find(r, name);
    if (t == NULL) {
        fprintf(stderr, "FATAL: fixture has no tensor %s\n", name);
        exit(1);
    }
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= (size_t)t->shape[i];
    void *p = malloc(n * 4 + 4);
    if (p == NULL) {
        fprintf(stderr, "FATAL: out of host memory for fixture tensor %s\n", name);
        exit(1);
    }
    clf_error e;
    tu_ok(clf_st_reader_read_raw(r, t, p, n * 4 + 4, &e), &e, name);
    if (numel)
        *numel = n;
    return p;
}

void pu_load_params(clf_model *m, clf_st_reader *r)
{
    clf_error e;
    for (int i = 0; i < clf_model_param_count(m); i++) {
        const clf_param_info *p = clf_model_param_get(m, i);
        char name[160];
        snprintf(name, sizeof name, "param.%s", p->name);
        float *w = pu_read(r, name, NULL);
        tu_ok(clf_model_tensor_write(m, CLF_SLOT_PARAM, i, w, &e), &e, name);
        free(w);
    }
}

void pu_check_table(clf_model *m, clf_st_reader *r, const char *fx)
{
    int in_fixture = 0, bad = 0;
    for (size_t i = 0; i < clf_st_reader_count(r); i++)
        if (strncmp(clf_st_reader_tensor(r, i)->name, "param.", 6) == 0)
            in_fixture++;
    for (int i = 0; i < clf_model_param_count(m); i++) {
        const clf_param_info *p = clf_model_param_get(m, i);
        char name[160];
        snprintf(name, sizeof name, "param.%s", p->name);
        const clf_st_tensor_info *t = clf_st_reader_find(r, name);
        int ok = t != NULL && t->ndim == p->ndim && (size_t)t->shape[0] == p->shape[0] &&
                 (p->ndim == 1 || (size_t)t->shape[1] == p->shape[1]);
        if (!ok) {
            printf("  %s: %s missing or of another shape\n", fx, p->name);
            bad++;
        }
    }
    TU_CHECK(bad == 0 && in_fixture == clf_model_param_count(m),
             "%s: parameter table matches the fixture (%d model tensors, %d in the fixture, %d "
             "mismatched)",
             fx, clf_model_param_count(m), in_fixture, bad);
}

int pu_close_f(const char *name, const float *got, const float *ref, size_t n, double atol,
               double rtol)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    if (d == NULL) {
        fprintf(stderr, "FATAL: out of host memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        d[i] = ref[i];
    int ok = tu_close(name, got, d, n, atol, rtol);
    free(d);
    return ok;
}

double pu_rel(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-30); }

double pu_rel_l2(const float *got, const float *ref, size_t n)
{
    double dd = 0.0, rr = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)got[i] - (double)ref[i];
        dd += d * d;
        rr += (double)ref[i] * (double)ref[i];
    }
    return sqrt(dd / fmax(rr, 1e-300));
}
