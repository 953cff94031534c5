/*
 * cmd_import.c - `clformer import DIR --out FILE`: a Hugging Face model
 * folder (config.json, model.safetensors, tokenizer.json or vocab.json +
 * merges.txt) of a BERT-family encoder, a GPT-2 or a Llama-layout decoder
 * (llama, mistral, qwen2) as a clformer checkpoint that embed, classify,
 * sample, eval and `train --init` open.
 *
 *   clformer import all-MiniLM-L6-v2 --out minilm.safetensors
 *   echo "A man is eating food." | clformer embed minilm.safetensors
 *
 * No device is needed (clf_import_hf converts on the host). Every import
 * error (a missing file, an unsupported model_type or activation, a
 * missing or differently shaped tensor, a truncated safetensors file)
 * exits 2 with the file and what was expected.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: clformer import DIR --out FILE\n"
                 "Import the Hugging Face model folder DIR (config.json, model.safetensors,\n"
                 "tokenizer.json or vocab.json + merges.txt; a sentence-transformers folder's\n"
                 "1_Pooling/config.json) as the clformer checkpoint FILE. Supported:\n"
                 "  bert  BERT-family encoders (BERT, MiniLM, sentence-transformers models on\n"
                 "        them) with their WordPiece tokenizer: an embedding model (head none)\n"
                 "        that `embed` runs and `train --init` fine-tunes with a classifier head\n"
                 "  gpt2  GPT-2 decoders with their byte-level BPE: `sample`, `eval`, `train\n"
                 "        --init`\n"
                 "  llama, mistral, qwen2  the Llama layout (RMSNorm, SwiGLU, RoPE with its\n"
                 "        scaling, grouped-query attention) with a byte-level BPE\n"
                 "  --out FILE        the checkpoint (.safetensors), written atomically\n");
}

int cli_cmd_import(int argc, char **argv)
{
    const char *dir = NULL, *out = NULL;
    const cli_opt opts[] = {
        {"--out", CLI_OPT_STR, &out, 0, 0, NULL},
    };
    const cli_command cmd = {"clformer import", opts, CLI_COUNT(opts), NULL, &dir, 1,
                             "one DIR",         usage};
    int pr = cli_parse_args(&cmd, argc, argv);
    if (pr != CLI_PARSE_RUN)
        return pr;
    if (dir == NULL || out == NULL) {
        fprintf(stderr, "clformer import: %s\n",
                dir == NULL ? "DIR (a Hugging Face model folder) expected"
                            : "--out FILE is required");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    clf_error err;
    clf_import_report rep;
    /* the output first: a file that cannot be written fails as in every
     * other command (exit 1), before the import's work */
    clf_status st = clf_file_check_target(out, &err);
    if (st != CLF_OK) {
        cli_print_error("--out", &err);
        return CLI_EXIT_FAIL;
    }
    st = clf_import_hf(dir, out, &rep, &err);
    if (st != CLF_OK) {
        cli_print_error(NULL, &err);
        return st == CLF_ERR_MEMORY ? CLI_EXIT_FAIL : CLI_EXIT_USAGE;
    }
    const int gpt2 = strcmp(rep.model_type, "bert") != 0; /* a decoder: no pooling */
    printf(
        "%s: %s, %d layers, %d heads x %d, dim %d, ffn %d, context %d, vocabulary %d (%s)%s%s%s; "
        "%lld parameters in %d tensors\n",
        out, rep.model_type, rep.layers, rep.heads, rep.dim / rep.heads, rep.dim, rep.ffn,
        rep.context, rep.vocab, gpt2 ? "byte-level bpe" : "wordpiece", gpt2 ? "" : ", ",
        gpt2 ? "" : rep.pool, gpt2 ? "" : " pooling", rep.params, rep.tensors);
    if (rep.ignored > 0)
        printf("not imported (%d): %s\n", rep.ignored, rep.ignored_names);
    return CLI_EXIT_OK;
}
