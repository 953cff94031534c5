/*
 * ops/load.c - loading the ops' kernel families up front.
 *
 * Design: an op fetches its kernel on first use, which builds its family
 * (or reads the build from the binary cache: tens of milliseconds a family
 * on a CPU runtime). A model loads them all while it plans, so that its
 * first step costs what every other step does.
 */
#include <stdio.h>

#include "model/ops/ops.h"
#include "model/ops/ops_internal.h"

clf_status clf_ops_load(clf_runtime *rt, clf_dtype t, clf_error *err)
{
    /* every family model/ops launches from (flash for t: below); convert
     * for the 16-bit copies of weights and activations */
    static const char *const families[] = {"elementwise", "reduce", "norm",   "embed",
                                           "attention",   "loss",   "random", "optim"};
    clf_status st = CLF_OK;
    for (size_t i = 0; i < sizeof families / sizeof families[0] && st == CLF_OK; i++)
        st = clf_program_load(rt, families[i], err);
    char fam[32];
    if (st == CLF_OK && (st = clf_ops_flash_program(rt, t, fam, sizeof fam, err)) == CLF_OK)
        st = clf_program_load(rt, fam, err);
    if (st == CLF_OK && t != CLF_DT_F32)
        st = clf_program_load(rt, "convert", err);
    return st;
}

clf_status clf_ops_load_decode(clf_runtime *rt, clf_dtype t, clf_error *err)
{
    /* decoding's fused norm, qkv and attention, where it can run */
    return t == CLF_DT_F32 && clf_ops_serial(rt) ? clf_program_load(rt, "decode", err) : CLF_OK;
}
