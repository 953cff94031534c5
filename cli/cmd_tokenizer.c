/*
 * cmd_tokenizer.c - `clformer tokenizer train|encode|decode|info`: train a
 * byte-pair-encoding tokenizer from text files (plain or .gz) into a JSON
 * file, and look at what any tokenizer (a tok.json, or the one inside a
 * run directory's checkpoint) does with text.
 *
 *   clformer tokenizer train --data train.de.gz --data train.en.gz --vocab 8000 --out tok.json
 *   echo "Zwei Männer" | clformer tokenizer encode tok.json --pieces
 *   echo "1 523 2" | clformer tokenizer decode runs/m30k --specials
 *   clformer tokenizer info tok.json
 *
 * Design: every file given with --data feeds one trainer (clf_bpe_trainer),
 * so several files give one joint vocabulary (shared source/target
 * embeddings); the tokenizer is written atomically. encode/decode work line
 * by line on stdin (the newline itself is not encoded), so they can be
 * piped. No device is needed.
 *
 * Not here: training char or byte tokenizers (they need no training: the
 * model's config builds them), or training from a config file (the train
 * command does that when vocab.tokenizer is bpe).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli_model.h"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: clformer tokenizer train --data FILE [--data FILE ...] [--vocab N]\n"
        "                                [--min-frequency N] --out TOK.json\n"
        "       clformer tokenizer encode TOK [--pieces] [--bos] [--eos]   < text\n"
        "       clformer tokenizer decode TOK [--specials]                 < ids\n"
        "       clformer tokenizer info TOK\n"
        "Train a byte-pair-encoding tokenizer (byte-level, as GPT-2: any text encodes\n"
        "and decodes back exactly; special tokens pad=0 bos=1 eos=2 unk=3 cls=4 sep=5),\n"
        "or use one. TOK is a tokenizer JSON file, a checkpoint (.safetensors) or a run\n"
        "directory holding ckpt.safetensors.\n"
        "train:\n"
        "  --data FILE        training text, plain or gzip (.gz); repeat for more files\n"
        "                     (one joint vocabulary)\n"
        "  --vocab N          vocabulary size, specials and the 256 bytes included\n"
        "                     (default 8000, at least 262)\n"
        "  --min-frequency N  merge only pairs seen at least N times (default 2)\n"
        "  --out FILE         where to write the tokenizer (JSON)\n"
        "encode: one line of ids per input line; --pieces prints the pieces instead\n"
        "        (a space shows as \xe2\x96\x81, other bytes as <0xNN>); --bos/--eos add them.\n"
        "decode: one line of text per line of ids; --specials shows <bos>, <pad>, ...\n");
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* A tokenizer from a JSON file, a checkpoint or a run directory. */
static int load_tokenizer(const char *path, clf_tokenizer **tok)
{
    clf_error err;
    clf_status st;
    struct stat sb;
    *tok = NULL;
    if ((stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) || ends_with(path, ".safetensors")) {
        /* a run directory or a checkpoint: the tokenizer it carries */
        clf_checkpoint *ck = NULL;
        st = clf_checkpoint_open(path, &ck, &err);
        if (st == CLF_OK)
            st = clf_checkpoint_tokenizer_create(ck, tok, &err);
        clf_checkpoint_close(ck);
        if (st != CLF_OK) {
            cli_print_error(NULL, &err);
            return st == CLF_ERR_FORMAT || st == CLF_ERR_IO ? CLI_EXIT_FAIL : cli_exit_code(st);
        }
        return CLI_EXIT_OK;
    } else {
        char *json = NULL;
        size_t len = 0;
        st = clf_file_read_all(path, (size_t)256 << 20, &json, &len, &err);
        if (st == CLF_OK) /* ours, or a Hugging Face tokenizer.json */
            st = clf_tokenizer_from_any_json(json, len, path, tok, &err);
        free(json);
    }
    if (st != CLF_OK) {
        cli_print_error(path, &err);
        return cli_exit_code(st);
    }
    return CLI_EXIT_OK;
}

static int cmd_train(int argc, char **argv)
{
    cli_list data = {{NULL}, 0};
    const char *out = NULL;
    long vocab = 8000, minf = 2;
    const cli_opt opts[] = {
        {"--data", CLI_OPT_LIST, &data, 0, 0, NULL},
        {"--out", CLI_OPT_STR, &out, 0, 0, NULL},
        {"--vocab", CLI_OPT_INT, &vocab, CLF_BPE_MERGE_FIRST, CLF_BPE_MAX_VOCAB, NULL},
        {"--min-frequency", CLI_OPT_INT, &minf, 1, 1000000000, NULL},
    };
    const cli_command cmd = {
        "clformer tokenizer train", opts, CLI_COUNT(opts), NULL, NULL, 0, NULL, usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    if (data.n == 0 || out == NULL) {
        fprintf(stderr, "clformer tokenizer train: %s is required (see --help)\n",
                data.n == 0 ? "--data FILE" : "--out FILE");
        return CLI_EXIT_USAGE;
    }

    clf_error err;
    clf_status st;
    clf_bpe_options o;
    clf_bpe_options_init(&o);
    o.vocab_size = (int32_t)vocab;
    o.min_frequency = minf;
    clf_bpe_trainer *tr = NULL;
    clf_tokenizer *tok = NULL;
    char *json = NULL;
    size_t json_len = 0;
    const char *context = NULL;
    char num[32], num2[32], num3[32];
    double t0 = clf_now_seconds();
    if ((st = clf_bpe_trainer_create(&o, &tr, &err)) != CLF_OK)
        goto fail;
    for (int i = 0; i < data.n; i++) {
        clf_bpe_stats before, after;
        clf_bpe_trainer_stats(tr, &before);
        if ((st = clf_bpe_trainer_add_file(tr, data.v[i], &err)) != CLF_OK)
            goto fail;
        clf_bpe_trainer_stats(tr, &after);
        cli_group_digits(after.bytes - before.bytes, num, sizeof num);
        cli_group_digits(after.words - before.words, num2, sizeof num2);
        printf("read %s: %s bytes, %s words\n", data.v[i], num, num2);
    }
    double t1 = clf_now_seconds();
    if ((st = clf_bpe_trainer_finish(tr, &tok, &err)) != CLF_OK)
        goto fail;
    double t2 = clf_now_seconds();
    clf_bpe_stats s;
    clf_bpe_trainer_stats(tr, &s);
    cli_group_digits(s.words, num, sizeof num);
    cli_group_digits(s.unique_words, num2, sizeof num2);
    printf("counted %s words (%s distinct) in %.2f s\n", num, num2, t1 - t0);
    printf("learned %d merges in %.2f s (the last pair seen %lld times): vocabulary %d = "
           "6 specials + 256 bytes + %d merges\n",
           (int)s.merges, t2 - t1, (long long)s.last_frequency, (int)s.vocab_size, (int)s.merges);
    if (s.vocab_size < o.vocab_size)
        printf("note: --vocab %ld asked for more, but no other pair occurs %ld times or more; "
               "the vocabulary has %d tokens\n",
               vocab, minf, (int)s.vocab_size);
    cli_group_digits(s.tokens, num3, sizeof num3);
    printf("the training text is %s tokens: %.2f per word, %.2f bytes per token\n", num3,
           s.words ? (double)s.tokens / (double)s.words : 0.0,
           s.tokens ? (double)s.bytes / (double)s.tokens : 0.0);
    if ((st = clf_tokenizer_to_json(tok, &json, &json_len, &err)) != CLF_OK)
        goto fail;
    json[json_len] = '\n'; /* replaces the NUL: the file ends with a newline */
    context = out;
    if ((st = clf_file_write_atomic(out, json, json_len + 1, &err)) != CLF_OK)
        goto fail;
    cli_group_digits(json_len + 1, num, sizeof num);
    printf("wrote %s (%s bytes)\n", out, num);
fail:
    if (st != CLF_OK)
        cli_print_error(context, &err);
    free(json);
    clf_tokenizer_destroy(tok);
    clf_bpe_trainer_destroy(tr);
    return cli_exit_code(st);
}

/* A piece for people: valid UTF-8 as it is, with ' ' as U+2581 and control
 * characters and stray bytes as <0xNN>. */
static void print_piece(const char *p, size_t l, FILE *out)
{
    const unsigned char *s = (const unsigned char *)p;
    for (size_t i = 0; i < l;) {
        uint32_t cp;
        int k = clf_utf8_decode(s + i, l - i, &cp);
        if (k == 0 || cp < 0x20 || cp == 0x7F) {
            fprintf(out, "<0x%02X>", s[i]);
            i++;
        } else if (cp == ' ') {
            fputs("\xe2\x96\x81", out);
            i++;
        } else {
            fwrite(s + i, 1, (size_t)k, out);
            i += (size_t)k;
        }
    }
}

static int read_line(char **line, size_t *cap, size_t *len)
{
    ssize_t n = getline(line, cap, stdin);
    if (n < 0)
        return 0;
    *len = (size_t)n;
    if (*len > 0 && (*line)[*len - 1] == '\n')
        (*line)[--*len] = '\0';
    return 1;
}

static int cmd_encode(int argc, char **argv)
{
    const char *path = NULL;
    int pieces = 0, bos = 0, eos = 0;
    const cli_opt opts[] = {
        {"--pieces", CLI_OPT_BOOL, &pieces, 0, 0, NULL},
        {"--bos", CLI_OPT_BOOL, &bos, 0, 0, NULL},
        {"--eos", CLI_OPT_BOOL, &eos, 0, 0, NULL},
    };
    const cli_command cmd = {
        "clformer tokenizer encode", opts, CLI_COUNT(opts), NULL, &path, 1, "one TOK", usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    if (path == NULL) {
        fprintf(stderr, "clformer tokenizer encode: TOK is required (see --help)\n");
        return CLI_EXIT_USAGE;
    }
    clf_tokenizer *tok = NULL;
    int rc = load_tokenizer(path, &tok);
    if (rc != CLI_EXIT_OK)
        return rc;
    int32_t sp_bos = clf_tokenizer_special(tok, CLF_SPECIAL_BOS),
            sp_eos = clf_tokenizer_special(tok, CLF_SPECIAL_EOS);
    if ((bos && sp_bos < 0) || (eos && sp_eos < 0)) {
        fprintf(stderr, "clformer tokenizer encode: this tokenizer has no %s token\n",
                bos && sp_bos < 0 ? "bos" : "eos");
        clf_tokenizer_destroy(tok);
        return CLI_EXIT_USAGE;
    }
    char *line = NULL;
    size_t cap = 0, len = 0;
    clf_error err;
    while (read_line(&line, &cap, &len)) {
        int32_t *ids = NULL;
        size_t n = 0;
        clf_status st = clf_tokenizer_encode(tok, line, len, &ids, &n, &err);
        if (st != CLF_OK) {
            cli_print_error("encode", &err);
            rc = cli_exit_code(st);
            break;
        }
        int first = 1;
        if (bos) {
            fputs(pieces ? "<bos>" : "", stdout);
            if (!pieces)
                printf("%d", (int)sp_bos);
            first = 0;
        }
        for (size_t i = 0; i < n; i++) {
            if (!first)
                putchar(' ');
            first = 0;
            if (pieces) {
                const char *p;
                size_t l;
                clf_tokenizer_piece(tok, ids[i], &p, &l);
                print_piece(p, l, stdout);
            } else {
                printf("%d", (int)ids[i]);
            }
        }
        if (eos) {
            if (!first)
                putchar(' ');
            if (pieces)
                fputs("<eos>", stdout);
            else
                printf("%d", (int)sp_eos);
        }
        putchar('\n');
        free(ids);
    }
    free(line);
    clf_tokenizer_destroy(tok);
    return rc;
}

static int cmd_decode(int argc, char **argv)
{
    const char *path = NULL;
    unsigned flags = 0;
    int specials = 0;
    const cli_opt opts[] = {{"--specials", CLI_OPT_BOOL, &specials, 0, 0, NULL}};
    const cli_command cmd = {
        "clformer tokenizer decode", opts, CLI_COUNT(opts), NULL, &path, 1, "one TOK", usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    if (specials)
        flags |= CLF_DECODE_SPECIALS;
    if (path == NULL) {
        fprintf(stderr, "clformer tokenizer decode: TOK is required (see --help)\n");
        return CLI_EXIT_USAGE;
    }
    clf_tokenizer *tok = NULL;
    int rc = load_tokenizer(path, &tok);
    if (rc != CLI_EXIT_OK)
        return rc;
    char *line = NULL;
    size_t cap = 0, len = 0, lineno = 0;
    int32_t *ids = NULL;
    clf_error err;
    while (rc == CLI_EXIT_OK && read_line(&line, &cap, &len)) {
        lineno++;
        int32_t *ni = realloc(ids, (len / 2 + 1) * sizeof *ni); /* ids are >= 1 char + a space */
        if (ni == NULL) {
            fprintf(stderr, "clformer: out of memory\n");
            rc = CLI_EXIT_FAIL;
            break;
        }
        ids = ni;
        size_t n = 0;
        for (char *p = line;;) {
            while (*p == ' ' || *p == '\t' || *p == ',' || *p == '\r')
                p++;
            if (*p == '\0')
                break;
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p || v < 0 || v > INT32_MAX) {
                fprintf(stderr,
                        "clformer tokenizer decode: line %zu: expected token ids, found "
                        "'%.20s'\n",
                        lineno, p);
                rc = CLI_EXIT_USAGE;
                break;
            }
            ids[n++] = (int32_t)v;
            p = end;
        }
        if (rc != CLI_EXIT_OK)
            break;
        char *text = NULL;
        size_t tl = 0;
        clf_status st = clf_tokenizer_decode_ex(tok, ids, n, flags, &text, &tl, &err);
        if (st != CLF_OK) {
            char ctx[64];
            snprintf(ctx, sizeof ctx, "line %zu", lineno);
            cli_print_error(ctx, &err);
            rc = cli_exit_code(st);
            break;
        }
        fwrite(text, 1, tl, stdout);
        putchar('\n');
        free(text);
    }
    free(ids);
    free(line);
    clf_tokenizer_destroy(tok);
    return rc;
}

static int cmd_info(int argc, char **argv)
{
    const char *path = NULL;
    const cli_command cmd = {"clformer tokenizer info", NULL, 0, NULL, &path, 1, "one TOK", usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    if (path == NULL) {
        fprintf(stderr, "clformer tokenizer info: one TOK expected (see --help)\n");
        return CLI_EXIT_USAGE;
    }
    clf_tokenizer *tok = NULL;
    int rc = load_tokenizer(path, &tok);
    if (rc != CLI_EXIT_OK)
        return rc;
    clf_tokenizer_type type = clf_tokenizer_type_of(tok);
    int32_t V = clf_tokenizer_vocab_size(tok);
    printf("type        %s\n", clf_config_tokenizer_name(type));
    printf("vocab_size  %d (%d text pieces)\n", (int)V, (int)clf_tokenizer_base_size(tok));
    printf("specials   ");
    for (int i = 0; i < CLF_SPECIAL_COUNT; i++) {
        int32_t id = clf_tokenizer_special(tok, (clf_special_token)i);
        if (id >= 0)
            printf(" %s=%d", clf_tokenizer_special_name((clf_special_token)i), (int)id);
    }
    printf("%s\n", clf_tokenizer_special(tok, CLF_SPECIAL_PAD) < 0 &&
                           clf_tokenizer_special(tok, CLF_SPECIAL_UNK) < 0 &&
                           clf_tokenizer_special(tok, CLF_SPECIAL_BOS) < 0
                       ? " (none)"
                       : "");
    if (type == CLF_TOKENIZER_BPE) {
        int32_t R = clf_tokenizer_bpe_merge_count(tok);
        size_t total = 0, longest = 0;
        int32_t longest_id = CLF_BPE_MERGE_FIRST;
        for (int32_t id = CLF_BPE_MERGE_FIRST; id < V; id++) {
            const char *p;
            size_t l;
            clf_tokenizer_piece(tok, id, &p, &l);
            total += l;
            if (l > longest) {
                longest = l;
                longest_id = id;
            }
        }
        printf("merges      %d (pre-tokenizer %s)\n", (int)R, CLF_BPE_PRE_TOKENIZER);
        if (R > 0) {
            printf("pieces      %.2f bytes on average (merged ones), longest %zu: ",
                   (double)total / R, longest);
            const char *p;
            size_t l;
            clf_tokenizer_piece(tok, longest_id, &p, &l);
            print_piece(p, l, stdout);
            printf("\nfirst merges");
            for (int32_t r = 0; r < R && r < 12; r++) {
                clf_tokenizer_piece(tok, CLF_BPE_MERGE_FIRST + r, &p, &l);
                putchar(' ');
                print_piece(p, l, stdout);
            }
            printf("\nlast merges ");
            for (int32_t r = R > 12 ? R - 12 : 0; r < R; r++) {
                clf_tokenizer_piece(tok, CLF_BPE_MERGE_FIRST + r, &p, &l);
                putchar(' ');
                print_piece(p, l, stdout);
            }
            putchar('\n');
        }
    }
    clf_tokenizer_destroy(tok);
    return CLI_EXIT_OK;
}

int cli_cmd_tokenizer(int argc, char **argv)
{
    if (argc < 1) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *sub = argv[0];
    if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0 || strcmp(sub, "help") == 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(sub, "train") == 0)
        return cmd_train(argc - 1, argv + 1);
    if (strcmp(sub, "encode") == 0)
        return cmd_encode(argc - 1, argv + 1);
    if (strcmp(sub, "decode") == 0)
        return cmd_decode(argc - 1, argv + 1);
    if (strcmp(sub, "info") == 0)
        return cmd_info(argc - 1, argv + 1);
    fprintf(stderr, "clformer tokenizer: unknown subcommand '%s' (train, encode, decode, info)\n",
            sub);
    return CLI_EXIT_USAGE;
}
