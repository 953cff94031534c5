/*
 * cmd_attention.c - `clformer attention RUN --text "..." --out FILE.svg`:
 * what the heads of one attention layer attend to for one input, as
 * heatmaps (svg_chart.c), one panel per head or one head large.
 *
 *   decoder (GPT)       --text is the sequence; its causal self-attention
 *   encoder             --text is the sentence (its specials added as in
 *                       classify/embed); its self-attention
 *   encoder-decoder     --text is the source; the target is --target, or
 *                       else the model's own greedy translation. The
 *                       decoder's self-attention (default), --cross for
 *                       source against target, --encoder for the source's
 *
 * The weights come from clf_model_attention_weights: the model's own fused
 * attention kernel rerun at that layer with identity values.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_model.h"
#include "cli/svg_chart.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: clformer attention RUN --text TEXT --out FILE.svg [--layer L] [--head H]\n"
            "                          [--cross | --encoder] [--target TEXT] [runtime flags]\n"
            "Heatmaps of the attention weights of one layer for one input, a panel per head\n"
            "(queries down, keys across, token labels where they fit), from the model's own\n"
            "attention kernel. A decoder reads --text; an encoder the sentence --text; a\n"
            "translator the source --text and the target --target (default: its own greedy\n"
            "translation), showing the decoder's self-attention, --cross (source against\n"
            "target) or --encoder (the source's self-attention).\n"
            "  --text TEXT       the input (a translator's source sentence)\n"
            "  --out FILE        the SVG file (or .png: rsvg-convert), written atomically\n"
            "  --layer L         block of the stack, from 0 (default: the last)\n"
            "  --head H          one head, drawn large (default: every head)\n"
            "  --target TEXT     a translator's target sentence (forced)\n" CLI_RUNTIME_FLAGS_HELP);
}

/* A token's label: its text with newlines, tabs and spaces made visible,
 * other control bytes as \xNN, a special token as <name>. */
static char *token_label(const clf_tokenizer *tok, int32_t id)
{
    char buf[96];
    size_t n = 0;
    const int sp = clf_tokenizer_special_of(tok, id);
    const char *piece = NULL;
    size_t len = 0;
    if (sp >= 0) {
        snprintf(buf, sizeof buf, "<%s>", clf_tokenizer_special_name((clf_special_token)sp));
        return strdup(buf);
    }
    if (!clf_tokenizer_piece(tok, id, &piece, &len))
        piece = "?", len = 1;
    for (size_t i = 0; i < len && n + 8 < sizeof buf; i++) {
        const unsigned char c = (unsigned char)piece[i];
        if (c == '\n')
            n += (size_t)snprintf(buf + n, sizeof buf - n, "\\n");
        else if (c == '\t')
            n += (size_t)snprintf(buf + n, sizeof buf - n, "\\t");
        else if (c == ' ')
            n += (size_t)snprintf(buf + n, sizeof buf - n, "\xc2\xb7"); /* a middle dot */
        else if (c < 0x20 || c == 0x7f)
            n += (size_t)snprintf(buf + n, sizeof buf - n, "\\x%02x", c);
        else
            buf[n++] = (char)c;
    }
    buf[n] = '\0';
    return strdup(buf);
}

typedef struct attn_args {
    const char *dir, *text, *target, *out;
    long layer, head;
    int cross, encoder, layer_given, head_given;
} attn_args;

/* The input's rows: src [S] (encoder kinds), tgt [T] (decoders and a
 * translator's target side), as token ids; an exit code. */
typedef struct attn_input {
    int32_t *src, *tgt;
    int S, T;
    clf_seqdata *ds;
} attn_input;

static int fail_err(const clf_error *err, clf_status st)
{
    cli_print_error(NULL, err);
    return cli_exit_code(st);
}

static int read_source(const attn_args *a, const clf_model_config *cfg, const clf_tokenizer *tok,
                       attn_input *in)
{
    clf_error err;
    clf_error_clear(&err);
    clf_seq_options so;
    clf_seq_options_default(&so, cfg->kind, cfg->context);
    clf_status st =
        clf_seqdata_from_text(a->text, strlen(a->text), "--text", tok, &so, &in->ds, &err);
    if (st != CLF_OK)
        return fail_err(&err, st);
    if (clf_seqdata_size(in->ds) != 1) {
        fprintf(stderr, "clformer attention: --text: expected one sentence (one line), got %zu\n",
                clf_seqdata_size(in->ds));
        return CLI_EXIT_USAGE;
    }
    const int32_t *src = NULL;
    clf_seqdata_example(in->ds, 0, &src, &in->S, NULL, NULL, NULL);
    if ((in->src = malloc((size_t)in->S * sizeof *in->src)) == NULL)
        return CLI_EXIT_FAIL;
    memcpy(in->src, src, (size_t)in->S * sizeof *src);
    return CLI_EXIT_OK;
}

/* ids of text, after `first` (-1: none), at most cap of them. */
static int encode_row(const clf_tokenizer *tok, const char *what, const char *text, int32_t first,
                      int cap, int32_t **row, int *n)
{
    clf_error err;
    clf_error_clear(&err);
    int32_t *ids = NULL;
    size_t k = 0;
    clf_status st = clf_tokenizer_encode(tok, text, strlen(text), &ids, &k, &err);
    if (st != CLF_OK) {
        fprintf(stderr, "clformer attention: %s: %s\n", what, err.msg);
        return CLI_EXIT_USAGE;
    }
    const size_t lead = first >= 0, keep = k + lead > (size_t)cap ? (size_t)cap - lead : k;
    if (keep + lead == 0) {
        free(ids);
        fprintf(stderr, "clformer attention: %s is empty\n", what);
        return CLI_EXIT_USAGE;
    }
    *row = malloc((keep + lead) * sizeof **row);
    if (*row == NULL) {
        free(ids);
        return CLI_EXIT_FAIL;
    }
    if (lead)
        (*row)[0] = first;
    memcpy(*row + lead, ids + (k - keep), keep * sizeof *ids); /* the last tokens */
    *n = (int)(keep + lead);
    free(ids);
    return CLI_EXIT_OK;
}

/* A translator's target row: bos, then --target's tokens or the model's
 * greedy translation of the source. */
static int target_row(const attn_args *a, const clf_model_config *cfg, const clf_tokenizer *tok,
                      clf_model *m, attn_input *in)
{
    const int32_t bos = clf_tokenizer_special(tok, CLF_SPECIAL_BOS);
    const int32_t eos = clf_tokenizer_special(tok, CLF_SPECIAL_EOS);
    if (a->target != NULL)
        return encode_row(tok, "--target", a->target, bos, cfg->context, &in->tgt, &in->T);
    clf_error err;
    clf_error_clear(&err);
    clf_beam_options o;
    clf_beam_options_default(&o);
    o.batch = 1;
    int32_t **hyp = NULL;
    clf_status st = clf_beam_translate_dataset(m, in->ds, bos, eos, &o, &hyp, &err);
    if (st != CLF_OK)
        return fail_err(&err, st);
    int n = 0;
    while (hyp[0][n] >= 0)
        n++;
    if (n + 1 > cfg->context)
        n = cfg->context - 1;
    in->tgt = malloc((size_t)(n + 1) * sizeof *in->tgt);
    if (in->tgt != NULL) {
        in->tgt[0] = bos;
        memcpy(in->tgt + 1, hyp[0], (size_t)n * sizeof *in->tgt);
        in->T = n + 1;
    }
    free(hyp[0]);
    free(hyp);
    return in->tgt != NULL ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* The heatmaps of w [NH, T, S] into a->out. */
static int draw(const attn_args *a, const clf_tokenizer *tok, const float *w, int NH, int T, int S,
                const int32_t *rows, const int32_t *cols, const char *what)
{
    const int one = a->head_given;
    char title[256], (*ptitle)[32] = calloc((size_t)NH, sizeof *ptitle);
    const char **pt = calloc((size_t)NH, sizeof *pt);
    char **rl = calloc((size_t)T, sizeof *rl), **cl = calloc((size_t)S, sizeof *cl);
    int rc = CLI_EXIT_FAIL;
    if (ptitle == NULL || pt == NULL || rl == NULL || cl == NULL)
        goto done;
    for (int h = 0; h < NH; h++) {
        snprintf(ptitle[h], sizeof ptitle[h], "head %d", h);
        pt[h] = ptitle[h];
    }
    for (int t = 0; t < T; t++)
        if ((rl[t] = token_label(tok, rows[t])) == NULL)
            goto done;
    for (int s = 0; s < S; s++)
        if ((cl[s] = cols != NULL ? token_label(tok, cols[s]) : NULL) == NULL &&
            (cl[s] = malloc(16)) != NULL)
            snprintf(cl[s], 16, "k%d", s); /* linformer's projected keys */
    snprintf(title, sizeof title, "%s, layer %ld%s", what, a->layer,
             one ? "" : ": every head (queries down, keys across)");
    const svg_heatmap hm = {title,
                            one ? 1 : NH,
                            one ? pt + a->head : pt,
                            T,
                            S,
                            one ? w + (size_t)a->head * (size_t)T * (size_t)S : w,
                            (const char *const *)rl,
                            (const char *const *)cl};
    char *svg = svg_heatmap_render(&hm);
    if (svg == NULL)
        fprintf(stderr, "clformer attention: out of memory drawing the heatmaps\n");
    else if ((rc = cli_write_picture("clformer attention", a->out, svg)) != CLI_EXIT_OK) {
        /* told */
    } else {
        printf("%s: %s, layer %ld, %d head%s, %d queries x %d keys\n", a->out, what, a->layer,
               one ? 1 : NH, one || NH == 1 ? "" : "s", T, S);
        rc = CLI_EXIT_OK;
    }
    free(svg);
done:
    for (int t = 0; rl != NULL && t < T; t++)
        free(rl[t]);
    for (int s = 0; cl != NULL && s < S; s++)
        free(cl[s]);
    free(rl);
    free(cl);
    free(pt);
    free(ptitle);
    return rc;
}

static int parse(int argc, char **argv, attn_args *a, cli_runtime_flags *rf)
{
    const cli_opt opts[] = {
        {"--text", CLI_OPT_TEXT, &a->text, 0, 0, NULL},
        {"--target", CLI_OPT_TEXT, &a->target, 0, 0, NULL},
        {"--out", CLI_OPT_STR, &a->out, 0, 0, NULL},
        {"--layer", CLI_OPT_INT, &a->layer, 0, 1000, &a->layer_given},
        {"--head", CLI_OPT_INT, &a->head, 0, 1000, &a->head_given},
        {"--cross", CLI_OPT_BOOL, &a->cross, 0, 0, NULL},
        {"--encoder", CLI_OPT_BOOL, &a->encoder, 0, 0, NULL},
    };
    const cli_command cmd = {
        "clformer attention", opts, CLI_COUNT(opts), rf, &a->dir, 1, "one RUN", usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    if (a->dir == NULL || a->text == NULL || a->out == NULL) {
        fprintf(stderr, "clformer attention: %s\n",
                a->dir == NULL    ? "RUN expected"
                : a->text == NULL ? "--text TEXT is required"
                                  : "--out FILE is required");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (a->cross && a->encoder) {
        fprintf(stderr, "clformer attention: --cross and --encoder name two layers: give one\n");
        return CLI_EXIT_USAGE;
    }
    return CLI_PARSE_RUN;
}

int cli_cmd_attention(int argc, char **argv)
{
    attn_args a;
    memset(&a, 0, sizeof a);
    cli_runtime_flags rf;
    cli_runtime_flags_init(&rf);
    int rc = parse(argc, argv, &a, &rf);
    if (rc != CLI_PARSE_RUN)
        return rc;
    clf_error err;
    clf_error_clear(&err);
    if (clf_file_check_target(a.out, &err) != CLF_OK) {
        fprintf(stderr, "clformer attention: --out: %s\n", err.msg);
        return CLI_EXIT_FAIL;
    }
    clf_checkpoint *ck = NULL;
    clf_tokenizer *tok = NULL;
    clf_runtime *rt = NULL;
    clf_model *m = NULL;
    clf_model_config cfg;
    attn_input in;
    memset(&in, 0, sizeof in);
    float *w = NULL;
    if ((rc = cli_checkpoint_open(a.dir, &ck, &cfg, &tok)) != CLI_EXIT_OK)
        goto done;
    const int s2s = cfg.kind == CLF_MODEL_ENCODER_DECODER, dec = cfg.kind == CLF_MODEL_DECODER;
    if ((a.cross || a.encoder) && !s2s) {
        fprintf(stderr,
                "clformer attention: --%s is for a translator (kind encoder-decoder); %s "
                "is a %s\n",
                a.cross ? "cross" : "encoder", a.dir, clf_config_kind_name(cfg.kind));
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (a.target != NULL && !s2s) {
        fprintf(stderr, "clformer attention: --target is for a translator\n");
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    const int heads = cfg.blocks.attention.heads;
    const int n_layers = cfg.kind == CLF_MODEL_ENCODER || a.encoder
                             ? clf_config_encoder_layers(&cfg)
                             : clf_config_decoder_layers(&cfg);
    if (!a.layer_given)
        a.layer = n_layers - 1;
    if (a.layer >= n_layers || (a.head_given && a.head >= heads)) {
        fprintf(stderr, "clformer attention: --%s %ld: the model has %d %s (0 to %d)\n",
                a.layer >= n_layers ? "layer" : "head", a.layer >= n_layers ? a.layer : a.head,
                a.layer >= n_layers ? n_layers : heads, a.layer >= n_layers ? "layers" : "heads",
                (a.layer >= n_layers ? n_layers : heads) - 1);
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (dec)
        rc = encode_row(tok, "--text", a.text, -1, cfg.context, &in.tgt, &in.T);
    else
        rc = read_source(&a, &cfg, tok, &in);
    if (rc != CLI_EXIT_OK || (rc = cli_runtime_open(&rf, &rt)) != CLI_EXIT_OK)
        goto done;
    const clf_model_limits lim = {.B = 1, .S = in.S, .T = s2s ? cfg.context : 0};
    if ((rc = cli_checkpoint_model(rt, ck, dec ? &(clf_model_limits){.B = 1} : &lim,
                                   s2s ? CLF_MODEL_INFER : 0, &m)) != CLI_EXIT_OK ||
        (s2s && (rc = target_row(&a, &cfg, tok, m, &in)) != CLI_EXIT_OK))
        goto done;
    const clf_batch b = {
        .B = 1, .S = in.S, .T = in.T, .src = in.src, .tgt_in = in.tgt, .epoch = -1};
    const int keys = in.S > in.T ? in.S : in.T;
    const size_t cap = (size_t)heads * (size_t)(in.T > in.S ? in.T : in.S) * (size_t)keys;
    const clf_attn_site site = a.cross     ? CLF_ATTN_CROSS
                               : a.encoder ? CLF_ATTN_ENCODER
                                           : CLF_ATTN_SELF;
    int T = 0, S = 0;
    clf_status st = CLF_OK;
    if ((w = malloc(cap * sizeof *w)) == NULL)
        st = clf_error_set(&err, CLF_ERR_MEMORY, "attention: out of host memory");
    if (st == CLF_OK)
        st = clf_model_set_batch(m, b, &err);
    if (st == CLF_OK)
        st = clf_model_attention_weights(m, site, (int)a.layer, w, cap, &T, &S, &err);
    if (st != CLF_OK) {
        rc = fail_err(&err, st);
        goto done;
    }
    cli_notice_end(&rf);
    /* queries: the source's rows in an encoder, else the target's; keys:
     * the source's for cross and encoder attention (none to name where
     * linformer projected them) */
    const int src_q = site == CLF_ATTN_ENCODER || cfg.kind == CLF_MODEL_ENCODER;
    const int src_k = src_q || site == CLF_ATTN_CROSS;
    const int32_t *rows = src_q ? in.src : in.tgt;
    const int32_t *cols = S == (src_k ? in.S : in.T) ? (src_k ? in.src : in.tgt) : NULL;
    const char *what = site == CLF_ATTN_CROSS     ? "cross-attention (target against source)"
                       : site == CLF_ATTN_ENCODER ? "encoder self-attention"
                       : s2s                      ? "decoder self-attention"
                       : dec                      ? "self-attention (causal)"
                                                  : "self-attention";
    rc = draw(&a, tok, w, heads, T, S, rows, cols, what);
done:
    free(w);
    free(in.src);
    free(in.tgt);
    clf_seqdata_destroy(in.ds);
    clf_model_destroy(m);
    clf_runtime_destroy(rt);
    clf_checkpoint_close(ck);
    clf_tokenizer_destroy(tok);
    return rc;
}
