/*
 * parity_util.h - reading the PyTorch parity fixtures, which the scripts in
 * tests/parity/ write and test_parity_gpt.c / test_parity_seq2seq.c read.
 *
 * A fixture is tests/data/parity/NAME.safetensors with metadata
 * format=clformer-parity, version=1 and config=<the model's YAML>, and
 * tensors: param.<clformer parameter name> (the initial weights), the
 * inputs, and PyTorch's outputs (float32 or int32). Every helper exits the
 * test with a message when the fixture is not what it should be: a broken
 * fixture is not a numerical result.
 */
#ifndef CLF_PARITY_UTIL_H
#define CLF_PARITY_UTIL_H

#include <stddef.h>

#include "config/config.h"
#include "model/graph/model.h"
#include "model/io/safetensors.h"

/* Open tests/data/parity/<name>.safetensors (relative to the source tree,
 * the tests' working directory) and parse its config. */
clf_st_reader *pu_open(const char *name, clf_model_config *cfg);
/* A whole tensor in a malloc'ed buffer (float or int32; *numel if not NULL). */
void *pu_read(clf_st_reader *r, const char *name, size_t *numel);
/* Write every param.<name> of the fixture into m's parameters. */
void pu_load_params(clf_model *m, clf_st_reader *r);
/* One check: m's parameter table and the fixture's param.* tensors are the
 * same set, with the same shapes. */
void pu_check_table(clf_model *m, clf_st_reader *r, const char *name);
/* tu_close against a float32 reference. */
int pu_close_f(const char *name, const float *got, const float *ref, size_t n, double atol,
               double rtol);
/* |a - b| / |b| */
double pu_rel(double a, double b);
/* ||got - ref|| / ||ref|| over n elements (2-norms) */
double pu_rel_l2(const float *got, const float *ref, size_t n);

#endif
