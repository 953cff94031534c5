/*
 * native.c - the native GEMM engine's host side (kernels in cl/gemm.cl).
 *
 * Design
 *   The engine is a list of configurations (clf_gemm_configs_list), each a
 *   variant "gemm@<name>" of the kernel family compiled with its tile sizes
 *   as #defines and read back from the built program (its gemm_config
 *   kernel), so host and kernels never disagree. Two shapes:
 *
 *   Register-blocked ("r<mr>v<vw>x<nv>", for devices that run a work-group's
 *   items one after another): a kernel reading A in place (gemm_an) or from
 *   a packed copy (gemm_ap), and B in place or from packed column panels. A
 *   is packed when it is stored transposed (reading it in place strides
 *   through memory) and for the k-blocked configurations; B is packed when
 *   it is stored transposed or when enough row blocks re-read it (m >=
 *   PACK_B_MIN_M) that making its panels contiguous pays off (large
 *   power-of-two row strides otherwise thrash the caches). Products deeper
 *   than K_SLICE_FROM may run as slices of about K_SLICE that accumulate
 *   into C (beta = 1 after the first), which keeps a work-group's A blocks
 *   and B panel in a smaller cache, at the price of reading and writing C
 *   once per slice: whether that pays is measured per shape class
 *   (choice.c; the descriptor's k_slice). A k-blocked configuration
 *   ("r<mr>v<vw>x<nv>k<kb>b<rb>") blocks K inside the kernel instead: one
 *   work-item runs up to rb row blocks of a panel (a product's row blocks
 *   shared evenly among its groups) over each k-block of kb in turn, so it
 *   never slices at launch. With few rows and B
 *   transposed (decoding against [out, in] weights), gemm_nt_dot reads both
 *   operands along k instead, so B is read once and never copied. A bf16 or
 *   f16 A or B is always packed (the packing widens it as it copies), and a
 *   16-bit C is narrowed as it is stored, in one pass (no split-K, no K
 *   slices rounded into it); these run on the register-blocked kernels only
 *   (gemm16.c sends the rest through float32 copies).
 *
 *   Tiled ("t<tm>x<tn>k<tk>w<wm>x<wn>", for devices whose work-items run in
 *   lockstep with real local memory): gemm_tiled stages both operands
 *   through local memory in any storage order, no packing.
 *
 *   Which configurations a device lists follows its probed limits
 *   (work-group size, local memory size) and shape; which one runs a shape
 *   is measured (choice.c).
 *
 *   Packing and split-K use one scratch buffer per runtime, grown to the
 *   largest need so far: a training loop sizes it up front with
 *   clf_gemm_prepare (or reaches its largest shape in the first step) and
 *   never allocates again. clf_gemm_workspace_estimate predicts it without
 *   a device, for clformer info.
 *
 *   Split-K (split_of below) computes K slices side by side when the output
 *   alone cannot fill the device, and sums them in a fixed order.
 *
 * Not here: validation (dispatch.c), choosing between engines (choice.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/gemm/gemm_internal.h"
#include "runtime/runtime_internal.h"

#define PACK_B_MIN_M 32   /* pack an untransposed B from this many rows of C */
#define K_SLICE_FROM 1024 /* deeper products run in slices ... */
#define K_SLICE 512       /* ... of about this depth */
#define PANEL_ALIGN 16    /* floats: where packed B panels may start */

/* ---- the configurations ------------------------------------------------------- */

/* A register-blocked configuration: mr rows x nv vectors of vw per
 * work-item, named "r<mr>v<vw>x<nv>"; k-blocked (kb > 0: k per block, rb
 * row blocks per work-item, cl/gemm.cl's gemm_body), "r<mr>v<vw>x<nv>k<kb>b<rb>";
 * with B packed past the caches (stream), the name ends in "s". */
static void config_add_kb(gemm_state *st, size_t mr, size_t vw, size_t nv, size_t kb, size_t rb,
                          size_t stream)
{
    if (st->n_natives == GEMM_MAX_CONFIGS)
        return;
    gemm_config *c = &st->natives[st->n_natives++].cfg;
    /* work-items per work-group: the classic body's groups are 8 row
     * blocks sharing a column panel; a k-blocked item walks its row blocks
     * itself (cl/gemm.cl) */
    *c = (gemm_config){
        .mr = mr, .vw = vw, .nv = nv, .kb = kb, .rb = rb, .stream = stream, .ly = kb > 0 ? 1 : 8};
    if (kb > 0)
        snprintf(c->name, sizeof c->name, "r%zuv%zux%zuk%zub%zu%s", mr, vw, nv, kb, rb,
                 stream ? "s" : "");
    else
        snprintf(c->name, sizeof c->name, "r%zuv%zux%zu%s", mr, vw, nv, stream ? "s" : "");
}

static void config_add_reg(gemm_state *st, size_t mr, size_t vw, size_t nv)
{
    config_add_kb(st, mr, vw, nv, 0, 1, 0);
}

/* A tiled configuration, if the device's limits admit its work-group and
 * its local arrays (cl/gemm.cl: two TK x (T + 1) float arrays). */
static void config_add_tiled(gemm_state *st, const clf_device_info *dev, size_t tm, size_t tn,
                             size_t tk, size_t wm, size_t wn)
{
    const size_t items = (tm / wm) * (tn / wn);
    const size_t local = sizeof(float) * tk * (tm + 1 + tn + 1);
    if (st->n_natives == GEMM_MAX_CONFIGS || items > dev->max_work_group || local > dev->local_mem)
        return;
    gemm_config *c = &st->natives[st->n_natives++].cfg;
    *c = (gemm_config){.tiled = 1, .tm = tm, .tn = tn, .tk = tk, .wm = wm, .wn = wn};
    snprintf(c->name, sizeof c->name, "t%zux%zuk%zuw%zux%zu", tm, tn, tk, wm, wn);
}

/* Register-blocked tilings, each keeping its accumulators plus one row of B
 * within a vector register file: 16-float vectors with 32 registers
 * (AVX-512), 8-float with 16 (AVX2), 4-float. The preferred vector width a
 * device reports only orders them (its width first): it is a hint, and not
 * a reliable one (Intel's CPU runtime reports 1 and runs the 16-wide
 * tilings fastest on AVX-512), so where work-groups run item by item the
 * search measures them all.
 *
 * The 16-wide list has two bodies. The classic one (a work-item streams all
 * of K for one row block) wins shallow products and transposed B; the
 * k-blocked ones (cl/gemm.cl's gemm_body with GEMM_KB: many row blocks of C
 * per work-item, K in blocks whose B panel stays in L1) win deep and wide
 * ones. Each configuration costs a program build per device, so the list
 * keeps only configurations that won somewhere, and each k-blocked one has
 * its classic sibling (the same register block) listed, which it equals bit
 * for bit (tests/test_gemm.c). Where the device's compiler gives kernels a
 * prefetch instruction (cl/gemm.cl's GEMM_PREFETCH), the k-blocked body
 * prefetches its panel's next k-block while it runs the current one, and
 * both bodies ask for a row block's lines of C before storing them (a store
 * to a line not in cache first reads it). One k-blocked configuration is listed twice, the second
 * ("...s") packing B with non-temporal stores (GEMM_STREAM): worth it where
 * the packed copy outgrows the caches, a loss where it fits, and the device
 * does not say reliably where that boundary is, so the search times both.
 * The measurements behind each choice: docs/devices.md, "Why the native
 * GEMM lists what it lists". */
static void reg_width(gemm_state *st, unsigned vw)
{
    if (vw == 16) {
        config_add_reg(st, 6, 16, 4);  /* 24 accumulators + 4 */
        config_add_reg(st, 12, 16, 2); /* 24 + 2 */
        config_add_reg(st, 8, 16, 3);  /* 24 + 3 */
        config_add_kb(st, 6, 16, 4, 64, 64, 0);
        config_add_kb(st, 8, 16, 3, 96, 48, 0);
        config_add_kb(st, 6, 16, 4, 128, 32, 0);
        config_add_kb(st, 6, 16, 4, 128, 32, 1);
    } else if (vw == 8) {
        config_add_reg(st, 6, 8, 2); /* 12 + 2 */
        config_add_reg(st, 4, 8, 3); /* 12 + 3 */
    } else {
        config_add_reg(st, 4, 4, 2);
    }
}

static void configs_reg(gemm_state *st, const clf_device_info *dev)
{
    if (!dev->serial_groups) { /* a fallback beside the tiles */
        reg_width(st, 4);
        /* and its k-blocked form (small blocks: several per product, more
         * than one row group), outside the search, so that the k-blocked order is
         * checked where items run in lockstep too, Oclgrind included */
        config_add_kb(st, 4, 4, 2, 16, 4, 0);
        return;
    }
    const unsigned p = dev->pref_vec_float;
    if (p == 8) {
        reg_width(st, 8);
        reg_width(st, 16);
    } else {
        reg_width(st, 16);
        reg_width(st, 8);
    }
    if (p <= 4)
        reg_width(st, 4);
}

/* Local-memory tilings, from the common GPU shapes: 256 work-items with
 * 4 x 4 (a balanced default), 8 x 8 (the most reuse per local read, for
 * large products) and 2 x 2 (more work-groups for small ones) per item. */
static void configs_tiled(gemm_state *st, const clf_device_info *dev)
{
    config_add_tiled(st, dev, 64, 64, 16, 4, 4);
    config_add_tiled(st, dev, 128, 128, 8, 8, 8);
    config_add_tiled(st, dev, 128, 64, 16, 8, 4);
    config_add_tiled(st, dev, 32, 32, 16, 2, 2);
}

void clf_gemm_configs_list(clf_runtime *rt, gemm_state *st)
{
    const clf_device_info *dev = clf_runtime_device(rt);
    st->n_natives = 0;
    /* Staging through local memory pays only where it is real memory shared
     * by work-items running together; elsewhere it is one more copy through
     * the same caches. The other shape stays runnable (tests, forced
     * choices) but outside the search. */
    const int lockstep = !dev->serial_groups && !dev->local_mem_is_global && dev->local_mem > 0;
    if (lockstep) {
        configs_tiled(st, dev);
        st->n_search = st->n_natives;
        configs_reg(st, dev);
    } else {
        configs_reg(st, dev);
        st->n_search = st->n_natives;
        configs_tiled(st, dev);
    }
    if (st->n_search == 0) /* no tiled shape fits: the register-blocked ones */
        st->n_search = st->n_natives;
    st->cand_names[0] = "clblast";
    for (size_t i = 0; i < st->n_natives; i++)
        st->cand_names[1 + i] = st->natives[i].cfg.name;
    st->cand_names[1 + st->n_natives] = NULL;
}

/* ---- building a configuration -------------------------------------------------- */

/* The tile sizes the variant was compiled with (its gemm_config kernel). */
static clf_status read_config(clf_runtime *rt, const char *fam, gemm_tile *t, clf_error *err)
{
    clf_kernel *k = NULL;
    clf_buffer *b = NULL;
    int v[15] = {0};
    clf_status s = clf_kernel_get(rt, fam, "gemm_config", &k, err);
    if (s == CLF_OK)
        s = clf_buffer_create(rt, sizeof v, &b, err);
    if (s == CLF_OK) {
        const size_t one = 1;
        const clf_arg a[] = {CLF_ARG_BUF(b)};
        s = clf_kernel_launch(rt, k, 1, &one, &one, 1, a, err);
    }
    if (s == CLF_OK)
        s = clf_buffer_read(rt, b, 0, v, sizeof v, err);
    clf_buffer_destroy(b);
    if (s != CLF_OK)
        return s;
    *t = (gemm_tile){.mr = (size_t)v[0],
                     .vw = (size_t)v[1],
                     .nv = (size_t)v[2],
                     .ly = (size_t)v[3],
                     .pack_kc = (size_t)v[4],
                     .pack_lx = (size_t)v[5],
                     .dot = (size_t)v[6],
                     .tm = (size_t)v[7],
                     .tn = (size_t)v[8],
                     .tk = (size_t)v[9],
                     .wm = (size_t)v[10],
                     .wn = (size_t)v[11],
                     .kb = (size_t)v[12],
                     .rb = (size_t)v[13],
                     .stream = (size_t)v[14]};
    t->nr = t->vw * t->nv;
    return CLF_OK;
}

/* Name the configuration's product program ("gemm@<name>": gemm_an and
 * gemm_ap, or gemm_tiled) in fam and give it the configuration's tile
 * sizes as defines (nothing is built). */
static clf_status config_program(clf_runtime *rt, const gemm_config *c, char *fam, size_t cap,
                                 clf_error *err)
{
    char defs[512];
    snprintf(fam, cap, "gemm@%s", c->name);
    if (c->tiled)
        snprintf(defs, sizeof defs,
                 "#define GEMM_TM %zu\n#define GEMM_TN %zu\n#define GEMM_TK %zu\n"
                 "#define GEMM_WM %zu\n#define GEMM_WN %zu\n"
                 "#define GEMM_PARTS (GEMM_PART_PRODUCT | GEMM_PART_AUX)\n",
                 c->tm, c->tn, c->tk, c->wm, c->wn);
    else
        snprintf(defs, sizeof defs,
                 "#define GEMM_VW %zu\n#define GEMM_NV %zu\n#define GEMM_MR %zu\n"
                 "#define GEMM_KB %zu\n#define GEMM_RB %zu\n#define GEMM_STREAM %zu\n"
                 "#define GEMM_LY %zu\n#define GEMM_PARTS GEMM_PART_PRODUCT\n",
                 c->vw, c->nv, c->mr, c->kb, c->rb, c->stream, c->ly);
    return clf_program_set_defines(rt, fam, defs, err);
}

/* The packing program of register-blocked configuration c
 * ("gemm@p<mr>v<vw>x<nv>", "...s" with non-temporal panel stores): the
 * packing kernels depend on the register block and the panel stores alone,
 * so the configurations that differ only in their k-blocking share it. */
static clf_status pack_program(clf_runtime *rt, const gemm_config *c, char *fam, size_t cap,
                               clf_error *err)
{
    char defs[256];
    snprintf(fam, cap, "gemm@p%zuv%zux%zu%s", c->mr, c->vw, c->nv, c->stream ? "s" : "");
    snprintf(defs, sizeof defs,
             "#define GEMM_VW %zu\n#define GEMM_NV %zu\n#define GEMM_MR %zu\n"
             "#define GEMM_STREAM %zu\n#define GEMM_PARTS GEMM_PART_PACK\n",
             c->vw, c->nv, c->mr, c->stream);
    return clf_program_set_defines(rt, fam, defs, err);
}

/* The rest of register-blocked configuration c ("gemm@d<vw>g<ly>": the
 * dot products, split-K's reduction and the lone epilogue), which depends
 * on the vector width and the work-group size alone: one program for the
 * configurations that share them. On PoCL the dot products were a third of
 * a configuration's compile (docs/devices.md). A tiled configuration keeps
 * them in its own program: without them gemm_tiled holds the only call of
 * the epilogue's element function, the compiler inlines it there, and
 * PoCL's work-group compile of gemm_tiled took 9 times as long. */
static clf_status aux_program(clf_runtime *rt, const gemm_config *c, char *fam, size_t cap,
                              clf_error *err)
{
    char defs[128];
    snprintf(fam, cap, "gemm@d%zug%zu", c->vw, c->ly);
    snprintf(defs, sizeof defs,
             "#define GEMM_VW %zu\n#define GEMM_LY %zu\n#define GEMM_PARTS GEMM_PART_AUX\n", c->vw,
             c->ly);
    return clf_program_set_defines(rt, fam, defs, err);
}

/* Every configuration any device lists: each width's register tilings,
 * the lockstep k-blocked one, and the tiled ones under no device limit. */
static void configs_catalogue(gemm_state *st)
{
    const clf_device_info unlimited = {.max_work_group = SIZE_MAX, .local_mem = SIZE_MAX};
    st->n_natives = 0;
    reg_width(st, 16);
    reg_width(st, 8);
    reg_width(st, 4);
    config_add_kb(st, 4, 4, 2, 16, 4, 0);
    configs_tiled(st, &unlimited);
}

/* The programs of configuration c, their defines set (clf_gemm_config_programs'
 * order: products, packing, the rest); a tiled configuration packs nothing
 * and its products program holds the rest ("" for both). */
static clf_status programs_of(clf_runtime *rt, const gemm_config *c,
                              char fam[CLF_GEMM_PROGRAMS][64], clf_error *err)
{
    fam[1][0] = fam[2][0] = '\0';
    clf_status s = config_program(rt, c, fam[0], 64, err);
    if (s == CLF_OK && !c->tiled)
        s = pack_program(rt, c, fam[1], 64, err);
    if (s == CLF_OK && !c->tiled)
        s = aux_program(rt, c, fam[2], 64, err);
    return s;
}

clf_status clf_gemm_config_programs(clf_runtime *rt, const char *name,
                                    char fam[CLF_GEMM_PROGRAMS][64], clf_error *err)
{
    gemm_state *all = calloc(1, sizeof *all);
    if (all == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "gemm: out of host memory");
    configs_catalogue(all);
    clf_status s = clf_error_set(err, CLF_ERR_ARG, "gemm: no configuration '%s'", name);
    for (size_t i = 0; i < all->n_natives; i++)
        if (strcmp(all->natives[i].cfg.name, name) == 0) {
            clf_error_clear(err);
            s = programs_of(rt, &all->natives[i].cfg, fam, err);
            break;
        }
    free(all);
    return s;
}

static clf_status native_build(clf_runtime *rt, gemm_native *nat, clf_error *err)
{
    const gemm_config *c = &nat->cfg;
    char progs[CLF_GEMM_PROGRAMS][64];
    clf_status s = programs_of(rt, c, progs, err);
    /* a tiled configuration's products program holds the rest */
    const char *fam = progs[0], *pfam = progs[1], *afam = c->tiled ? progs[0] : progs[2];
    /* which configurations have a kernel: any, register-blocked, tiled */
    enum { ANY, REG, TILED };
    struct {
        const char *fam, *name;
        clf_kernel **k;
        int only;
    } ks[] = {
        {fam, "gemm_an", &nat->k_an, REG},
        {fam, "gemm_ap", &nat->k_ap, REG},
        {fam, "gemm_tiled", &nat->k_tiled, TILED},
        {pfam, "gemm_pack_a_n", &nat->k_pack_a_n, REG},
        {pfam, "gemm_pack_a_t", &nat->k_pack_a_t, REG},
        {pfam, "gemm_pack_b_n", &nat->k_pack_b_n, REG},
        {pfam, "gemm_pack_b_t", &nat->k_pack_b_t, REG},
        {afam, "gemm_nt_dot", &nat->k_nt_dot, ANY},
        {afam, "gemm_nt_dot1", &nat->k_nt_dot1, ANY},
        {afam, "gemm_epilogue", &nat->k_epilogue, ANY},
        {afam, "gemm_splitk_reduce", &nat->k_splitk, ANY},
    };
    for (size_t i = 0; s == CLF_OK && i < sizeof ks / sizeof ks[0]; i++)
        if (ks[i].only != (c->tiled ? REG : TILED))
            s = clf_kernel_get(rt, ks[i].fam, ks[i].name, ks[i].k, err);
    gemm_tile t, pt = {0}, at;
    if (s != CLF_OK || (s = read_config(rt, fam, &t, err)) != CLF_OK ||
        (s = read_config(rt, afam, &at, err)) != CLF_OK ||
        (!c->tiled && (s = read_config(rt, pfam, &pt, err)) != CLF_OK))
        return s;
    /* the shared programs were built for this configuration's block,
     * panels, width and work-group */
    if ((!c->tiled && (pt.mr != t.mr || pt.vw != t.vw || pt.nv != t.nv || pt.stream != t.stream ||
                       at.vw != t.vw || at.ly != t.ly || t.ly != c->ly)) ||
        at.dot == 0 || at.ly == 0)
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "gemm: configuration %s: its packing or dot-product program reports "
                             "another block (gemm_config)",
                             c->name);
    t.pack_kc = c->tiled ? 0 : pt.pack_kc;
    t.pack_lx = c->tiled ? 0 : pt.pack_lx;
    t.dot = at.dot;
    if (c->stream && !t.stream)
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "gemm: configuration %s: the device's compiler offers no "
                             "non-temporal store to kernels whose work-items run one by one",
                             c->name);
    if (t.mr == 0 || t.nr == 0 || t.ly == 0 || (!c->tiled && (t.pack_lx == 0 || t.pack_kc == 0)) ||
        t.rb == 0 ||
        (c->tiled &&
         (t.tm != c->tm || t.tn != c->tn || t.tk != c->tk || t.wm != c->wm || t.wn != c->wn)) ||
        (!c->tiled && (t.mr != c->mr || t.vw != c->vw || t.nv != c->nv || t.kb != c->kb ||
                       t.rb != c->rb || t.stream != c->stream)))
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "gemm: configuration %s: the kernels report another tile "
                             "(gemm_config)",
                             c->name);
    const size_t need = c->tiled ? (t.tm / t.wm) * (t.tn / t.wn) : t.ly;
    clf_kernel *main = c->tiled ? nat->k_tiled : nat->k_an;
    if (need > clf_kernel_max_work_group(main) ||
        (!c->tiled && t.pack_lx > clf_kernel_max_work_group(nat->k_pack_b_n)))
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "gemm: configuration %s needs work-groups of %zu items; the device "
                             "allows %zu for this kernel",
                             c->name, need, clf_kernel_max_work_group(main));
    nat->tile = t;
    return CLF_OK;
}

/* Build configuration nat once; a failure is remembered and repeated. */
clf_status clf_gemm_native_init(clf_runtime *rt, gemm_native *nat, clf_error *err)
{
    if (!nat->tried) {
        nat->tried = 1;
        nat->status = native_build(rt, nat, &nat->err);
        if (nat->status != CLF_OK)
            clf_error_prefix(&nat->err, "native GEMM engine unavailable");
    }
    if (nat->status != CLF_OK && err != NULL)
        *err = nat->err;
    return nat->status;
}

/* The shared scratch, grown to exactly the largest need so far (a training
 * step's shapes are all reserved up front by clf_gemm_prepare, so it grows
 * a few times while planning and never in the loop). */
static clf_status scratch_reserve(clf_runtime *rt, gemm_state *st, size_t floats, clf_error *err)
{
    return clf_gemm_scratch_grow(rt, &st->scratch, &st->scratch_floats, floats, "packing scratch",
                                 err);
}

size_t clf_gemm_workspace_estimate(int trans_a, int trans_b, size_t m, size_t n, size_t k)
{
    if (trans_b && !trans_a && m < PACK_B_MIN_M)
        return 0; /* gemm_nt_dot: nothing packed */
    /* A is packed when transposed, and by the k-blocked configurations
     * always (native_plan_make): the estimate counts it */
    const size_t pa = m * k;
    const size_t pb = trans_b || m >= PACK_B_MIN_M ? n * k : 0;
    return (pa + pb) * sizeof(float);
}

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

/* C = beta * C on the native kernel (K = 0: no A or B is read). */
static clf_status native_scale_c(clf_runtime *rt, gemm_native *nat, const clf_gemm_desc *d,
                                 clf_error *err)
{
    const gemm_tile *t = &nat->tile;
    clf_buffer *c = d->c.buf;
    const clf_arg args[] = {
        CLF_ARG_U64(d->m),        CLF_ARG_U64(d->n),
        CLF_ARG_U64(0),           CLF_ARG_F32(d->alpha),
        CLF_ARG_BUF(c),           CLF_ARG_U64(0),
        CLF_ARG_U64(1),           CLF_ARG_U64(t->mr),
        CLF_ARG_U64(0),           CLF_ARG_BUF(c),
        CLF_ARG_U64(0),           CLF_ARG_U64(1),
        CLF_ARG_U64(0),           CLF_ARG_U32(0),
        CLF_ARG_F32(d->beta),     CLF_ARG_BUF(c),
        CLF_ARG_U64(d->c.off),    CLF_ARG_U64(d->ldc),
        CLF_ARG_U64(d->stride_c), CLF_GEMM_EPI_ARGS(d, clf_gemm_epi_of(d)),
    };
    const size_t global[3] = {ceil_div(d->n, t->nr), ceil_div(ceil_div(d->m, t->mr), t->rb),
                              clf_gemm_batch_of(d)};
    const size_t local[3] = {1, t->ly, 1};
    return clf_kernel_launch(rt, nat->k_an, 3, global, local, 25, args, err);
}

/* How the native engine runs a validated d (m, n, k > 0). */
typedef struct native_plan {
    int dot;              /* gemm_nt_dot, no packing */
    int pack_a, pack_b;   /* operands copied into the scratch */
    int share_a, share_b; /* zero batch stride: one packed copy serves all */
    size_t pa, pb;        /* floats per packed A / B matrix */
    size_t zc;            /* batch matrices per pass (scratch limit) */
    size_t split;         /* K slices computed side by side (1: none) */
    size_t scratch;       /* floats of scratch needed */
    int one_pass;         /* no K slices (a 16-bit C) */
} native_plan;

/* Split-K: P slices of K / P each, run side by side into P partial products
 * and summed in a fixed order (gemm_splitk_reduce). Worth it when the
 * output's tiles are too few to fill the device (a weight gradient: small M
 * x N, K = B*T): the device's choice is the largest P that divides K, keeps
 * slices of at least SPLIT_MIN_K and brings the work-items up to about
 * what fills the device (2 per compute unit where groups run item by item,
 * 256 elsewhere; a tiled configuration's work-groups count as their items,
 * or as one where they run item by item). The runtime's gemm_split_k overrides (tests). Only for
 * one matrix (the batch dimension carries the slices). */
#define SPLIT_MIN_K 256
static size_t split_of(const clf_runtime *rt, const gemm_tile *t, const clf_gemm_desc *d)
{
    const size_t forced = clf_runtime_options_get(rt)->gemm_split_k;
    if (clf_gemm_batch_of(d) > 1 || forced == 1 || d->k < 2)
        return 1;
    size_t pmax;
    if (forced > 1) {
        pmax = forced;
    } else {
        const clf_device_info *dev = clf_runtime_device(rt);
        const size_t cus = dev->compute_units ? dev->compute_units : 1;
        const size_t want = dev->serial_groups ? 2 * cus : 256 * cus;
        size_t tiles; /* work-items, or work-groups where they run item by item */
        if (t->tm > 0) {
            tiles = ceil_div(d->m, t->tm) * ceil_div(d->n, t->tn);
            if (!dev->serial_groups)
                tiles *= (t->tm / t->wm) * (t->tn / t->wn);
        } else {
            tiles = ceil_div(ceil_div(d->m, t->mr), t->rb) * ceil_div(d->n, t->nr);
        }
        if (tiles >= want || d->k < 2 * SPLIT_MIN_K)
            return 1;
        pmax = want / tiles;
        if (pmax > d->k / SPLIT_MIN_K)
            pmax = d->k / SPLIT_MIN_K;
        if (pmax > 64)
            pmax = 64;
    }
    for (size_t p = pmax; p >= 2; p--)
        if (d->k % p == 0)
            return p;
    return 1;
}

/* Split-K's second half: C = alpha * (the P partial products, [m, n] each
 * from scratch[part_off], summed in order) + beta * C, then d's epilogue. */
static clf_status splitk_reduce(clf_runtime *rt, const gemm_state *st, const gemm_native *nat,
                                const clf_gemm_desc *d, size_t P, size_t part_off, clf_error *err)
{
    const clf_arg r[] = {
        CLF_ARG_U64(d->m),
        CLF_ARG_U64(d->n),
        CLF_ARG_U64(P),
        CLF_ARG_BUF(st->scratch),
        CLF_ARG_U64(part_off),
        CLF_ARG_F32(d->alpha),
        CLF_ARG_F32(d->beta),
        CLF_ARG_BUF(d->c.buf),
        CLF_ARG_U64(d->c.off),
        CLF_ARG_U64(d->ldc),
        CLF_GEMM_EPI_ARGS(d, clf_gemm_epi_of(d)),
    };
    const size_t rl[2] = {16, 1}, rg[2] = {ceil_div(d->n, 16) * 16, d->m};
    return clf_kernel_launch(rt, nat->k_splitk, 2, rg, rl, 16, r, err);
}

/* The scratch floats of p's packed copies: A's blocks, then B's panels,
 * which start aligned to 16 floats (a streaming configuration stores whole
 * vectors of up to 16 there). */
static void plan_packed_sizes(native_plan *p, const gemm_tile *t, size_t m, size_t n, size_t k)
{
    p->pa = p->pack_a ? ceil_div(ceil_div(m, t->mr) * k * t->mr, PANEL_ALIGN) * PANEL_ALIGN : 0;
    p->pb = p->pack_b ? ceil_div(n, t->nr) * k * t->nr : 0;
}

static clf_status native_plan_make(clf_runtime *rt, const gemm_native *nat, const clf_gemm_desc *d,
                                   native_plan *p, clf_error *err)
{
    const gemm_tile *t = &nat->tile;
    const size_t batch = clf_gemm_batch_of(d);
    const size_t m = d->m, n = d->n, k = d->k;
    const size_t max_floats = (size_t)(clf_runtime_device(rt)->max_alloc / sizeof(float));
    memset(p, 0, sizeof *p);
    p->zc = batch;
    p->split = 1;
    /* a 16-bit operand is always packed: the packing widens it; a 16-bit C
     * is stored by gemm_an / gemm_ap only, in one pass (no split-K, no
     * slices accumulating into it) */
    const int a16 = d->a_type != CLF_DT_F32, b16 = d->b_type != CLF_DT_F32;
    const int c16 = d->c_type != CLF_DT_F32;
    p->one_pass = c16;
    if (d->trans_b && !d->trans_a && m < PACK_B_MIN_M && !a16 && !b16 && !c16) {
        p->dot = 1; /* few rows, B transposed: dot products read B once */
        return CLF_OK;
    }
    /* A k-blocked configuration reads A packed however it is stored: in
     * place, its k loop addresses GEMM_MR clamped rows, which a compiler
     * may recompute and spill inside the loop; packed, the loop walks one
     * pointer, for a copy of M x K floats against 2 M N K flops (measured:
     * docs/design.md, GEMM). */
    const int a_optional = !d->trans_a && !a16;
    p->pack_a = !a_optional || t->kb > 0;
    p->pack_b = d->trans_b || m >= PACK_B_MIN_M || b16;
    /* too large for one allocation: read in place what may be, A first */
    plan_packed_sizes(p, t, m, n, k);
    if (p->pa + p->pb > max_floats && p->pack_a && a_optional) {
        p->pack_a = 0;
        plan_packed_sizes(p, t, m, n, k);
    }
    if (p->pa + p->pb > max_floats && p->pack_b && !d->trans_b && !b16) {
        p->pack_b = 0;
        plan_packed_sizes(p, t, m, n, k);
    }
    if (p->pa + p->pb > max_floats)
        return clf_error_set(err, CLF_ERR_MEMORY,
                             "gemm: packing a transposed or 16-bit operand of M=%zu N=%zu K=%zu "
                             "needs %zu bytes of scratch, more than the device's largest "
                             "allocation (%zu)",
                             m, n, k, (p->pa + p->pb) * sizeof(float), max_floats * sizeof(float));
    p->split = c16 ? 1 : split_of(rt, t, d);
    if (p->split > 1) {
        const size_t need = p->pa + p->pb + p->split * m * n;
        if (need > max_floats) {
            p->split = 1;
        } else {
            p->scratch = need;
            return CLF_OK;
        }
    }
    if (p->pa + p->pb == 0)
        return CLF_OK;
    p->share_a = batch > 1 && d->stride_a == 0;
    p->share_b = batch > 1 && d->stride_b == 0;
    const size_t per = (p->share_a ? 0 : p->pa) + (p->share_b ? 0 : p->pb);
    const size_t fixed = (p->share_a ? p->pa : 0) + (p->share_b ? p->pb : 0);
    if (per > 0 && (max_floats - fixed) / per < p->zc)
        p->zc = (max_floats - fixed) / per;
    if (p->zc == 0)
        p->zc = 1;
    p->scratch = (p->share_a ? p->pa : p->pa * p->zc) + (p->share_b ? p->pb : p->pb * p->zc);
    return CLF_OK;
}

/* Few rows, B transposed: gemm_nt_dot (blocks of t->dot x t->dot), or for
 * one row gemm_nt_dot1 (CLF_GEMM_DOT1_N columns a work-item: the square
 * block would repeat its dot products over clamped rows). Nothing packed. */
static clf_status launch_dot(clf_runtime *rt, const gemm_native *nat, const clf_gemm_desc *d,
                             clf_error *err)
{
    const gemm_tile *t = &nat->tile;
    const size_t m = d->m, n = d->n, k = d->k, batch = clf_gemm_batch_of(d);
    const clf_arg args[] = {
        CLF_ARG_U64(m),           CLF_ARG_U64(n),
        CLF_ARG_U64(k),           CLF_ARG_F32(d->alpha),
        CLF_ARG_BUF(d->a.buf),    CLF_ARG_U64(d->a.off),
        CLF_ARG_U64(d->lda),      CLF_ARG_U64(0),
        CLF_ARG_U64(d->stride_a), CLF_ARG_BUF(d->b.buf),
        CLF_ARG_U64(d->b.off),    CLF_ARG_U64(d->ldb),
        CLF_ARG_U64(d->stride_b), CLF_ARG_U32(0),
        CLF_ARG_F32(d->beta),     CLF_ARG_BUF(d->c.buf),
        CLF_ARG_U64(d->c.off),    CLF_ARG_U64(d->ldc),
        CLF_ARG_U64(d->stride_c), CLF_GEMM_EPI_ARGS(d, clf_gemm_epi_of(d)),
    };
    const size_t global[3] = {m == 1 ? ceil_div(n, CLF_GEMM_DOT1_N) : ceil_div(n, t->dot),
                              m == 1 ? 1 : ceil_div(m, t->dot), batch};
    const size_t local[3] = {t->ly, 1, 1};
    return clf_kernel_launch(rt, m == 1 ? nat->k_nt_dot1 : nat->k_nt_dot, 3, global, local, 25,
                             args, err);
}

static clf_status native_gemm(clf_runtime *rt, gemm_state *st, gemm_native *nat,
                              const clf_gemm_desc *d, clf_error *err)
{
    const gemm_tile *t = &nat->tile;
    const size_t batch = clf_gemm_batch_of(d);
    const size_t m = d->m, n = d->n, k = d->k;
    const size_t nbk = ceil_div(m, t->mr), np = ceil_div(n, t->nr);
    native_plan p;
    clf_status s = native_plan_make(rt, nat, d, &p, err);
    if (s != CLF_OK)
        return s;
    if (p.dot)
        return launch_dot(rt, nat, d, err);
    if (p.scratch > 0 && (s = scratch_reserve(rt, st, p.scratch, err)) != CLF_OK)
        return s;
    const int pack_a = p.pack_a, pack_b = p.pack_b, share_a = p.share_a, share_b = p.share_b;
    const size_t pa = p.pa, pb = p.pb, zc = p.zc;
    for (size_t z0 = 0; z0 < batch; z0 += zc) {
        const size_t zn = batch - z0 < zc ? batch - z0 : zc;
        const size_t a_off = d->a.off + z0 * d->stride_a, b_off = d->b.off + z0 * d->stride_b;
        const size_t sp_a = share_a ? 0 : pa, sp_b = share_b ? 0 : pb;
        const size_t za = share_a ? 1 : zn, zb = share_b ? 1 : zn;
        const size_t pb_off = pa * za; /* B panels follow A blocks in the scratch */
        if (pack_a) {
            const clf_arg args[] = {
                CLF_ARG_U64(m),         CLF_ARG_U64(k),           CLF_ARG_BUF(d->a.buf),
                CLF_ARG_U64(a_off),     CLF_ARG_U64(d->lda),      CLF_ARG_U64(d->stride_a),
                CLF_ARG_U32(d->a_type), CLF_ARG_BUF(st->scratch), CLF_ARG_U64(0),
                CLF_ARG_U64(pa),
            };
            /* the first dimension runs along the source rows (see cl/gemm.cl) */
            size_t global[3] = {ceil_div(k, t->pack_kc), nbk, za};
            if (d->trans_a)
                global[0] = nbk, global[1] = ceil_div(k, t->pack_kc);
            const size_t local[3] = {t->pack_lx, 1, 1};
            s = clf_kernel_launch(rt, d->trans_a ? nat->k_pack_a_t : nat->k_pack_a_n, 3, global,
                                  local, 10, args, err);
            if (s != CLF_OK)
                return s;
        }
        if (pack_b) {
            const clf_arg args[] = {
                CLF_ARG_U64(n),         CLF_ARG_U64(k),           CLF_ARG_BUF(d->b.buf),
                CLF_ARG_U64(b_off),     CLF_ARG_U64(d->ldb),      CLF_ARG_U64(d->stride_b),
                CLF_ARG_U32(d->b_type), CLF_ARG_BUF(st->scratch), CLF_ARG_U64(pb_off),
                CLF_ARG_U64(pb),
            };
            size_t global[3] = {ceil_div(k, t->pack_kc), np, zb};
            if (!d->trans_b)
                global[0] = np, global[1] = ceil_div(k, t->pack_kc);
            const size_t local[3] = {t->pack_lx, 1, 1};
            s = clf_kernel_launch(rt, d->trans_b ? nat->k_pack_b_t : nat->k_pack_b_n, 3, global,
                                  local, 10, args, err);
            if (s != CLF_OK)
                return s;
        }
        if (p.split > 1) {
            /* the K slices side by side (the batch dimension), then their
             * ordered sum with alpha, beta and the epilogue */
            const size_t P = p.split, kc = k / P, part = pa + pb;
            const clf_arg args[] = {
                CLF_ARG_U64(m),
                CLF_ARG_U64(n),
                CLF_ARG_U64(kc),
                CLF_ARG_F32(1.0f),
                CLF_ARG_BUF(pack_a ? st->scratch : d->a.buf),
                CLF_ARG_U64(pack_a ? 0 : a_off),
                CLF_ARG_U64(pack_a ? t->mr : d->lda),
                CLF_ARG_U64(pack_a ? k * t->mr : t->mr),
                CLF_ARG_U64(pack_a ? kc * t->mr : kc),
                CLF_ARG_BUF(pack_b ? st->scratch : d->b.buf),
                CLF_ARG_U64(pack_b ? pb_off : b_off),
                CLF_ARG_U64(pack_b ? k * t->nr : d->ldb),
                CLF_ARG_U64(pack_b ? kc * t->nr : kc * d->ldb),
                CLF_ARG_U32(pack_b ? 1 : 0),
                CLF_ARG_F32(0.0f),
                CLF_ARG_BUF(st->scratch),
                CLF_ARG_U64(part),
                CLF_ARG_U64(n),
                CLF_ARG_U64(m * n),
                CLF_GEMM_EPI_ARGS(d, 0u),
            };
            const size_t global[3] = {np, ceil_div(nbk, t->rb), P}, local[3] = {1, t->ly, 1};
            s = clf_kernel_launch(rt, pack_a ? nat->k_ap : nat->k_an, 3, global, local, 25, args,
                                  err);
            if (s != CLF_OK)
                return s;
            return splitk_reduce(rt, st, nat, d, P, part, err);
        }
        /* deep products may run as slices accumulating into C, so that a
         * work-group's A blocks and B panel stay in cache: of the depth the
         * descriptor asks (the auto choice's, which times both ways), else
         * of at most K_SLICE past K_SLICE_FROM */
        const size_t n_slices = p.one_pass         ? 1
                                : d->k_slice       ? (d->k_slice >= k ? 1 : ceil_div(k, d->k_slice))
                                : t->kb > 0        ? 1 /* it blocks K itself */
                                : k > K_SLICE_FROM ? ceil_div(k, K_SLICE)
                                                   : 1;
        const size_t ks = ceil_div(k, n_slices);
        for (size_t k0 = 0; k0 < k; k0 += ks) {
            const size_t kn = k - k0 < ks ? k - k0 : ks;
            const clf_arg args[] = {
                CLF_ARG_U64(m),
                CLF_ARG_U64(n),
                CLF_ARG_U64(kn),
                CLF_ARG_F32(d->alpha),
                CLF_ARG_BUF(pack_a ? st->scratch : d->a.buf),
                CLF_ARG_U64(pack_a ? k0 * t->mr : a_off + k0),
                CLF_ARG_U64(pack_a ? t->mr : d->lda),
                CLF_ARG_U64(pack_a ? k * t->mr : t->mr),
                CLF_ARG_U64(pack_a ? sp_a : d->stride_a),
                CLF_ARG_BUF(pack_b ? st->scratch : d->b.buf),
                CLF_ARG_U64(pack_b ? pb_off + k0 * t->nr : b_off + k0 * d->ldb),
                CLF_ARG_U64(pack_b ? k * t->nr : d->ldb),
                CLF_ARG_U64(pack_b ? sp_b : d->stride_b),
                CLF_ARG_U32(pack_b ? 1 : 0),
                CLF_ARG_F32(k0 == 0 ? d->beta : 1.0f),
                CLF_ARG_BUF(d->c.buf),
                CLF_ARG_U64(d->c.off + z0 * d->stride_c),
                CLF_ARG_U64(d->ldc),
                CLF_ARG_U64(d->stride_c),
                /* the epilogue with the last slice only */
                CLF_GEMM_EPI_ARGS(d, k0 + kn == k ? clf_gemm_epi_of(d) : 0u),
            };
            const size_t global[3] = {np, ceil_div(nbk, t->rb), zn}, local[3] = {1, t->ly, 1};
            s = clf_kernel_launch(rt, pack_a ? nat->k_ap : nat->k_an, 3, global, local, 25, args,
                                  err);
            if (s != CLF_OK)
                return s;
        }
    }
    return CLF_OK;
}

/* ---- the tiled configurations ------------------------------------------------ */

static size_t tiled_split(const clf_runtime *rt, const gemm_tile *t, const clf_gemm_desc *d)
{
    const size_t max_floats = (size_t)(clf_runtime_device(rt)->max_alloc / sizeof(float));
    const size_t p = d->k > 0 ? split_of(rt, t, d) : 1;
    return p > 1 && p * d->m * d->n <= max_floats ? p : 1;
}

/* gemm_tiled reads both operands in place in any storage order, so no
 * packing: one launch, or with split-K the slices as a batch of partial
 * products (matrix p's A and B advanced by p slices of K) and their ordered
 * sum. K == 0 runs the kernel with an empty loop: C = beta * C. */
static clf_status tiled_gemm(clf_runtime *rt, gemm_state *st, gemm_native *nat,
                             const clf_gemm_desc *d, clf_error *err)
{
    const gemm_tile *t = &nat->tile;
    const size_t m = d->m, n = d->n, k = d->k;
    const size_t rx = t->tn / t->wn, ry = t->tm / t->wm;
    const size_t local[3] = {rx, ry, 1};
    const size_t P = tiled_split(rt, t, d);
    if (P > 1) {
        const size_t kc = k / P;
        clf_status s = scratch_reserve(rt, st, P * m * n, err);
        if (s != CLF_OK)
            return s;
        const clf_arg args[] = {
            CLF_ARG_U64(m),
            CLF_ARG_U64(n),
            CLF_ARG_U64(kc),
            CLF_ARG_F32(1.0f),
            CLF_ARG_BUF(d->a.buf),
            CLF_ARG_U64(d->a.off),
            CLF_ARG_U64(d->lda),
            CLF_ARG_U64(d->trans_a ? kc * d->lda : kc),
            CLF_ARG_U32(d->trans_a),
            CLF_ARG_BUF(d->b.buf),
            CLF_ARG_U64(d->b.off),
            CLF_ARG_U64(d->ldb),
            CLF_ARG_U64(d->trans_b ? kc : kc * d->ldb),
            CLF_ARG_U32(d->trans_b),
            CLF_ARG_F32(0.0f),
            CLF_ARG_BUF(st->scratch),
            CLF_ARG_U64(0),
            CLF_ARG_U64(n),
            CLF_ARG_U64(m * n),
            CLF_GEMM_EPI_ARGS(d, 0u),
        };
        const size_t global[3] = {ceil_div(n, t->tn) * rx, ceil_div(m, t->tm) * ry, P};
        s = clf_kernel_launch(rt, nat->k_tiled, 3, global, local, 25, args, err);
        if (s != CLF_OK)
            return s;
        return splitk_reduce(rt, st, nat, d, P, 0, err);
    }
    /* k == 0: A and B are never read; any valid buffer stands in */
    clf_buffer *a = d->k > 0 ? d->a.buf : d->c.buf, *b = d->k > 0 ? d->b.buf : d->c.buf;
    const clf_arg args[] = {
        CLF_ARG_U64(m),
        CLF_ARG_U64(n),
        CLF_ARG_U64(k),
        CLF_ARG_F32(d->alpha),
        CLF_ARG_BUF(a),
        CLF_ARG_U64(d->k > 0 ? d->a.off : 0),
        CLF_ARG_U64(d->lda),
        CLF_ARG_U64(d->stride_a),
        CLF_ARG_U32(d->trans_a),
        CLF_ARG_BUF(b),
        CLF_ARG_U64(d->k > 0 ? d->b.off : 0),
        CLF_ARG_U64(d->ldb),
        CLF_ARG_U64(d->stride_b),
        CLF_ARG_U32(d->trans_b),
        CLF_ARG_F32(d->beta),
        CLF_ARG_BUF(d->c.buf),
        CLF_ARG_U64(d->c.off),
        CLF_ARG_U64(d->ldc),
        CLF_ARG_U64(d->stride_c),
        CLF_GEMM_EPI_ARGS(d, clf_gemm_epi_of(d)),
    };
    const size_t global[3] = {ceil_div(n, t->tn) * rx, ceil_div(m, t->tm) * ry,
                              clf_gemm_batch_of(d)};
    return clf_kernel_launch(rt, nat->k_tiled, 3, global, local, 25, args, err);
}

clf_status clf_gemm_native_run(clf_runtime *rt, gemm_state *st, gemm_native *nat,
                               const clf_gemm_desc *d, clf_error *err)
{
    if (!clf_gemm_native_reads16(nat, d))
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "gemm: configuration %s reads no 16-bit operand of this descriptor "
                             "(gemm16.c widens them first)",
                             nat->cfg.name);
    if (nat->cfg.tiled)
        return tiled_gemm(rt, st, nat, d, err);
    return d->k == 0 ? native_scale_c(rt, nat, d, err) : native_gemm(rt, st, nat, d, err);
}

clf_status clf_gemm_native_epilogue(clf_runtime *rt, gemm_native *nat, const clf_gemm_desc *d,
                                    clf_error *err)
{
    const uint32_t epi = clf_gemm_epi_of(d);
    if (epi == 0)
        return CLF_OK;
    const clf_arg args[] = {
        CLF_ARG_U64(d->m),     CLF_ARG_U64(d->n),   CLF_ARG_BUF(d->c.buf),
        CLF_ARG_U64(d->c.off), CLF_ARG_U64(d->ldc), CLF_GEMM_EPI_ARGS(d, epi),
    };
    const size_t local[2] = {16, 1}, global[2] = {ceil_div(d->n, 16) * 16, d->m};
    return clf_kernel_launch(rt, nat->k_epilogue, 2, global, local, 11, args, err);
}

clf_status clf_gemm_native_reserve(clf_runtime *rt, gemm_state *st, gemm_native *nat,
                                   const clf_gemm_desc *d, clf_error *err)
{
    size_t need = 0;
    if (nat->cfg.tiled) {
        need = tiled_split(rt, &nat->tile, d) * d->m * d->n;
        if (need == d->m * d->n)
            need = 0;
    } else {
        native_plan p;
        clf_status s = native_plan_make(rt, nat, d, &p, err);
        if (s != CLF_OK)
            return s;
        need = p.scratch;
    }
    return need > 0 ? scratch_reserve(rt, st, need, err) : CLF_OK;
}

int clf_gemm_native_sliced(clf_runtime *rt, const gemm_native *nat, const clf_gemm_desc *d)
{
    native_plan p;
    clf_error ignored;
    return !nat->cfg.tiled && nat->cfg.kb == 0 && d->k > K_SLICE_FROM &&
           native_plan_make(rt, nat, d, &p, &ignored) == CLF_OK && !p.dot && !p.one_pass &&
           p.split == 1;
}

int clf_gemm_native_reads16(const gemm_native *nat, const clf_gemm_desc *d)
{
    if (d->a_type == CLF_DT_F32 && d->b_type == CLF_DT_F32 && d->c_type == CLF_DT_F32)
        return 1;
    return !nat->cfg.tiled && d->k > 0;
}
