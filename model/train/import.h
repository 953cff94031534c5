/*
 * import.h - pretrained models from a Hugging Face model folder into a
 * clformer checkpoint, and a clformer GPT out to GPT-2's layout.
 *
 * A folder holds config.json, model.safetensors and tokenizer.json (and,
 * for sentence-transformers models, 1_Pooling/config.json). Supported:
 *   BERT-family encoders (config.json "model_type": "bert": BERT, MiniLM,
 *   the sentence-transformers models built on them) as kind encoder,
 *   post-norm LayerNorm blocks with biases, exact GELU, learned positions,
 *   an embedding LayerNorm (embedding.norm), no final norm, head none (an
 *   embedding model) pooled as 1_Pooling says (mean, or [CLS]; default
 *   mean), the WordPiece tokenizer of tokenizer.json.
 * Tensor names (an optional "bert." prefix is accepted):
 *   embeddings.word_embeddings            -> wte
 *   embeddings.position_embeddings        -> wpe (+ token type 0, below)
 *   embeddings.LayerNorm (weight/gamma, bias/beta) -> ln_emb
 *   encoder.layer.<l>.attention.self.{query,key,value} -> blocks.<l>.attn.qkv
 *                                                        (rows q, k, v)
 *   encoder.layer.<l>.attention.output.dense     -> blocks.<l>.attn.proj
 *   encoder.layer.<l>.attention.output.LayerNorm -> blocks.<l>.ln1
 *   encoder.layer.<l>.intermediate.dense         -> blocks.<l>.ffn.fc
 *   encoder.layer.<l>.output.dense               -> blocks.<l>.ffn.proj
 *   encoder.layer.<l>.output.LayerNorm           -> blocks.<l>.ln2
 * Token types: clformer feeds single sentences, whose token type is 0, so
 * token_type_embeddings[0] is added into every row of the position table
 * (exact up to one float32 rounding per element); sentence pairs are not
 * supported. Not imported, and listed in the report: the pooler (unused
 * by mean pooling and by a fresh classifier head), pretraining heads
 * ("cls.*"), position_ids buffers.
 * Refused with CLF_ERR_FORMAT (or CLF_ERR_IO for a missing file) naming
 * the file and the field or tensor: another model_type, position
 * embeddings other than "absolute", an activation other than gelu /
 * gelu_new, a missing tensor, a tensor of another shape (with the
 * expected one), a dtype other than F32 / F16 / BF16, a truncated or
 * corrupt safetensors file, a tokenizer whose vocabulary differs in size
 * from config.json's.
 *
 *   clf_import_report rep;
 *   clf_import_hf("all-MiniLM-L6-v2", "minilm.safetensors", &rep, &err);
 *
 * GPT-2 decoders (config.json "model_type": "gpt2"; an optional
 * "transformer." prefix): pre-norm LayerNorm blocks, gelu_new (tanh GELU),
 * learned positions, the head tied to wte, the byte-level BPE of
 * tokenizer.json or vocab.json + merges.txt with the model's ids
 * (clf_tokenizer_from_gpt2):
 *   wte, wpe -> wte, wpe;  h.<l>.ln_1 / ln_2 -> blocks.<l>.ln1 / ln2
 *   h.<l>.attn.c_attn [C, 3C] -> blocks.<l>.attn.qkv [3C, C] (transposed:
 *   Conv1D stores [in, out]); attn.c_proj, mlp.c_fc, mlp.c_proj likewise
 *   -> attn.proj, ffn.fc, ffn.proj;  ln_f -> ln_f
 *   (h.<l>.attn.bias / masked_bias buffers ignored; an lm_head.weight must
 *   equal wte).
 *
 * The Llama layout (config.json "model_type": "llama", "mistral" or
 * "qwen2"): RMSNorm, SwiGLU, RoPE with rope_theta and rope_scaling (linear,
 * yarn), grouped-query attention, tied or untied head, the folder's
 * byte-level BPE; import_llama.c lists the names and what is refused.
 *
 * Not here: other architectures, SentencePiece tokenizers (Llama 2,
 * Mistral) and pre-tokenizers other than GPT-2's (Llama 3, Qwen2),
 * sharded weights, sentence pairs, downloading.
 */
#ifndef CLF_IMPORT_H
#define CLF_IMPORT_H

#include "runtime/status.h"

CLF_API_BEGIN

typedef struct clf_import_report {
    char model_type[32]; /* "bert" */
    int layers, dim, heads, ffn, context, vocab;
    long long params;        /* parameters written */
    int tensors;             /* tensors written */
    int ignored;             /* tensors of the file not imported */
    char ignored_names[256]; /* the first few of them, comma-separated */
    char pool[8];            /* "mean" or "cls" */
} clf_import_report;

/* Import the Hugging Face model folder dir into the checkpoint out_path
 * (a .safetensors file every clformer command opens), atomically. rep may
 * be NULL. */
clf_status clf_import_hf(const char *dir, const char *out_path, clf_import_report *rep,
                         clf_error *err);

/* Write the checkpoint at ckpt_path (a run directory or a file) as a
 * Hugging Face GPT-2 folder out_dir (created): config.json, model.safetensors
 * (GPT-2's names, Conv1D weights stored [in, out], float32), vocab.json and
 * merges.txt (clf_tokenizer_to_gpt2). The model must be GPT-2's shape: a
 * decoder with a bpe tokenizer, learned positions, pre-norm LayerNorm with
 * biases, biases in attention and FFN, a final LayerNorm, the head tied to
 * the embedding (else CLF_ERR_UNSUPPORTED naming the key). clf_import_hf
 * reads it back to the same parameters, bit for bit. */
clf_status clf_export_gpt2(const char *ckpt_path, const char *out_dir, clf_error *err);

/* Write the checkpoint as a Hugging Face Llama folder (config.json of
 * model_type llama, or mistral with a sliding window; model.safetensors
 * in LlamaForCausalLM's names, float32; vocab.json and merges.txt). The
 * model must have the layout (a decoder with a bpe tokenizer, rope without
 * ntk scaling, pre-norm RMSNorm without biases, SwiGLU, a final RMSNorm;
 * else CLF_ERR_UNSUPPORTED naming the key); clf_import_hf reads it back to
 * the same parameters, bit for bit. */
clf_status clf_export_llama(const char *ckpt_path, const char *out_dir, clf_error *err);

CLF_API_END

#endif
