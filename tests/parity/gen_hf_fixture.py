#!/usr/bin/env python3
"""gen_hf_fixture.py - reference data for tests/test_import.c (WordPiece, BERT
and GPT-2 import), and a reference check of a real BERT.

Make the fixtures (run by hand, never by CI; needs PyTorch and the Hugging
Face `tokenizers` package, e.g. in a venv with --system-site-packages):

    python3 tests/parity/gen_hf_fixture.py make

  tests/data/hf/tiny-bert/        a tiny random BERT in the Hugging Face layout:
    config.json                   2 layers, 32 dims, 4 heads, ffn 64, gelu,
                                  64 positions, 2 token types, eps 1e-12
    tokenizer.json                a WordPiece vocabulary of 600 trained with
                                  `tokenizers` on SST-2 and Multi30k lines
                                  (BertNormalizer lowercasing, BertPreTokenizer,
                                  [CLS] $A [SEP])
    model.safetensors             BertModel's tensor names, float32, with the
                                  position_ids buffer and a pooler (both ignored
                                  by the import)
    1_Pooling/config.json         mean pooling
  tests/data/hf/tiny-bert-embed.json   sentences, their ids with the
                                  specials, and the L2-normalised mean-pooled
                                  embeddings of a float64 BERT forward
                                  written here in PyTorch (the same
                                  formulas as transformers' BertModel)
  tests/data/hf/wordpiece-cases.json   ~300 varied sentences (SST-2 dev,
                                  Multi30k val in German and English, and
                                  hand-written ones: accents, CJK, emoji,
                                  control characters, Unicode spaces, long
                                  words, literal [SEP]) and the ids that
                                  `tokenizers` gives for them without specials

  tests/data/hf/tiny-gpt2/        a tiny random GPT-2 in the Hugging Face layout:
    config.json                   2 layers, 32 dims, 4 heads, gelu_new, 64
                                  positions, eps 1e-5
    vocab.json, merges.txt        a byte-level BPE of 350 tokens trained with
                                  `tokenizers` on tiny Shakespeare (its own
                                  numbering: <|endoftext|> is id 0)
    tokenizer-hf.json             the same as one tokenizer.json
    model.safetensors             GPT2LMHeadModel's names (Conv1D weights
                                  [in, out]) with attn.bias buffers
  tests/data/hf/tiny-gpt2-logits.safetensors  two texts (metadata), their
                                  ids (ids.<i>, I32) and the logits of every
                                  position (logits.<i> [T, V], float32) of a
                                  float64 GPT-2 forward written here in PyTorch

Llama-layout fixtures (needs PyTorch only; reuses tiny-gpt2's byte-level
BPE and the ids of tiny-gpt2-logits.safetensors):

    python3 tests/parity/gen_hf_fixture.py llama

  tests/data/hf/tiny-llama/      model_type llama: 2 layers, 32 dims, 4 query
                                 heads and 2 key/value heads, SwiGLU of 48,
                                 RMSNorm eps 1e-6, rope_theta 500000, YaRN
                                 rope_scaling (factor 4 over 16 positions),
                                 untied lm_head
  tests/data/hf/tiny-mistral/    model_type mistral: 1 key/value head,
                                 sliding_window 8, rope_theta 1e6, untied
  tests/data/hf/tiny-qwen2/      model_type qwen2: 2 key/value heads, biases
                                 on q, k and v, tied embeddings (no lm_head
                                 tensor), linear rope_scaling factor 2
    each: config.json, model.safetensors (LlamaForCausalLM's names,
    "model." prefix, float32), vocab.json and merges.txt (tiny-gpt2's)
  tests/data/hf/tiny-llama-logits.safetensors  for each model M and text i:
                                 logits.M.<i> [T, V] of a float64 forward
                                 written here from transformers'
                                 modeling_llama / modeling_rope_utils
                                 formulas (ids: tiny-gpt2-logits' ids.<i>)

Check a real model against clformer (prints the cosine of every sentence):

    python3 tests/parity/gen_hf_fixture.py check MODEL_DIR SENTENCES CLFORMER_OUT

where CLFORMER_OUT is `clformer embed` output for SENTENCES.
"""
import gzip
import json
import math
import os
import struct
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "..", "shared", "data")
OUT = os.path.join(ROOT, "tests", "data", "hf")

HAND = [
    "Hello, World! This is a TEST of naïve café déjà-vu.",
    "I can't believe it's 3.14 — really?!",
    "北京欢迎你, 東京 and 서울 are cities.",
    "Emoji: 🤗 👍🏽 ❤️ and the end.",
    "Tabs\tand\nnewlines\r\nand  double  spaces",
    "Unicode\u00a0no-break\u2003em\u3000ideographic spaces",
    "Zero\u200bwidth\u200djoiner and soft\u00adhyphen",
    "Control \x01 \x07 \x1f characters and DEL \x7f here",
    "İstanbul ŞEHİR ıi ß Straße ÆØÅ æøå",
    "Ελληνικά ΣΊΣΥΦΟΣ, Русский ТЕКСТ, العربية",
    "supercalifragilisticexpialidocious" * 4,
    "a" * 100 + " " + "b" * 101,
    "[CLS] literal [SEP] tokens [UNK] and [MASK] in text",
    "e-mail: someone@example.com, url: https://x.org/a?b=c&d=e#f",
    "Numbers 1,234.56 and 10% and $5 and #1 and 1st/2nd.",
    "Quotes “curly” ‘single’ «guillemets» „German“",
    "Ünïcödé Ångström Ñandú Çà Œuvre",
    "Math ∑ ∫ √ ≤ ≥ ≠ ± × ÷ and arrows → ← ⇒",
    "fullwidth ＡＢＣ１２３！ and halfwidth ｶﾀｶﾅ",
    "Combining e\u0301 a\u0308 o\u0302 marks",
    "ﬁ ligature ﬂ and Ⅻ roman and ① circled",
    "",
    "   ",
    "...",
    "don't won't shan't y'all o'clock",
]


def sentences():
    out = list(HAND)
    with open(os.path.join(DATA, "sst2", "dev.tsv"), encoding="utf-8") as f:
        rows = [l.rstrip("\n").split("\t")[1] for l in f][1:]
    out += rows[:150]
    for name in ("val.de.gz", "val.en.gz"):
        with gzip.open(os.path.join(DATA, "multi30k", name), "rt", encoding="utf-8") as f:
            out += [l.rstrip("\n") for l in f][:60]
    return out


def training_text():
    lines = []
    with gzip.open(os.path.join(DATA, "sst2", "train.tsv.gz"), "rt", encoding="utf-8") as f:
        lines += [l.rstrip("\n").split("\t")[0] for l in f][1:4000]
    for name in ("train.de.gz", "train.en.gz"):
        with gzip.open(os.path.join(DATA, "multi30k", name), "rt", encoding="utf-8") as f:
            lines += [l.rstrip("\n") for _, l in zip(range(2000), f)]
    return lines + HAND


def make_tokenizer():
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    trainer = trainers.WordPieceTrainer(vocab_size=600, special_tokens=specials)
    tok.train_from_iterator(training_text(), trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return tok


def write_safetensors(path, tensors, meta=None):
    header, blobs, off = {"__metadata__": dict(meta or {"format": "pt"})}, [], 0
    for name, arr in tensors.items():
        dt = {np.float32: "F32", np.int64: "I64", np.int32: "I32"}[arr.dtype.type]
        b = arr.tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, v in h.items():
        if name == "__metadata__":
            continue
        dt = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}[v["dtype"]]
        a, b = v["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=dt).reshape(v["shape"])
    return out


def bert_embed(cfg, w, ids_list, pool="mean"):
    """transformers' BertModel forward in float64, pooled and normalised."""
    def t(name):
        return torch.tensor(w[name].astype(np.float64))
    C, NH = cfg["hidden_size"], cfg["num_attention_heads"]
    HS, eps = C // NH, cfg["layer_norm_eps"]
    ln = torch.nn.functional.layer_norm
    out = []
    for ids in ids_list:
        S = len(ids)
        x = t("embeddings.word_embeddings.weight")[ids] + t("embeddings.position_embeddings.weight")[:S]
        x = x + t("embeddings.token_type_embeddings.weight")[0]
        x = ln(x, (C,), t("embeddings.LayerNorm.weight"), t("embeddings.LayerNorm.bias"), eps)
        for l in range(cfg["num_hidden_layers"]):
            p = "encoder.layer.%d." % l
            def lin(v, n):
                return v @ t(p + n + ".weight").T + t(p + n + ".bias")
            q, k, v = (lin(x, "attention.self." + n).view(S, NH, HS).transpose(0, 1)
                       for n in ("query", "key", "value"))
            a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(HS), dim=-1) @ v
            a = lin(a.transpose(0, 1).reshape(S, C), "attention.output.dense")
            x = ln(a + x, (C,), t(p + "attention.output.LayerNorm.weight"),
                   t(p + "attention.output.LayerNorm.bias"), eps)
            h = torch.nn.functional.gelu(lin(x, "intermediate.dense"))
            x = ln(lin(h, "output.dense") + x, (C,), t(p + "output.LayerNorm.weight"),
                   t(p + "output.LayerNorm.bias"), eps)
        e = x.mean(0) if pool == "mean" else x[0]
        out.append((e / e.norm().clamp(min=1e-12)).tolist())
    return out


def gpt2_logits(cfg, w, ids):
    """transformers' GPT2LMHeadModel forward in float64: logits [T, V]."""
    def t(name):
        return torch.tensor(w[name].astype(np.float64))
    C, NH, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    HS, T = C // NH, len(ids)
    ln = torch.nn.functional.layer_norm
    x = t("wte.weight")[ids] + t("wpe.weight")[:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(cfg["n_layer"]):
        p = "h.%d." % l
        h = ln(x, (C,), t(p + "ln_1.weight"), t(p + "ln_1.bias"), eps)
        qkv = h @ t(p + "attn.c_attn.weight") + t(p + "attn.c_attn.bias")
        q, k, v = (z.view(T, NH, HS).transpose(0, 1) for z in qkv.split(C, dim=1))
        s = (q @ k.transpose(1, 2) / math.sqrt(HS)).masked_fill(~mask, float("-inf"))
        a = (torch.softmax(s, dim=-1) @ v).transpose(0, 1).reshape(T, C)
        x = x + a @ t(p + "attn.c_proj.weight") + t(p + "attn.c_proj.bias")
        h = ln(x, (C,), t(p + "ln_2.weight"), t(p + "ln_2.bias"), eps)
        m = torch.nn.functional.gelu(h @ t(p + "mlp.c_fc.weight") + t(p + "mlp.c_fc.bias"),
                                     approximate="tanh")
        x = x + m @ t(p + "mlp.c_proj.weight") + t(p + "mlp.c_proj.bias")
    x = ln(x, (C,), t("ln_f.weight"), t("ln_f.bias"), eps)
    return (x @ t("wte.weight").T).tolist()


def make_gpt2(rng):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    d = os.path.join(OUT, "tiny-gpt2")
    os.makedirs(d, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=350, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    with open(os.path.join(ROOT, "data", "tinyshakespeare.txt"), encoding="utf-8") as f:
        text = f.read()
    tok.train_from_iterator(text.split("\n\n"), trainer)
    tok.model.save(d)  # vocab.json, merges.txt
    tok.save(os.path.join(d, "tokenizer-hf.json"))
    V, C, L, NH, P = tok.get_vocab_size(), 32, 2, 4, 64
    cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": C, "n_layer": L,
           "n_head": NH, "n_positions": P, "n_ctx": P, "n_inner": None, "vocab_size": V,
           "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.1,
           "embd_pdrop": 0.1, "attn_pdrop": 0.1, "bos_token_id": 0, "eos_token_id": 0}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)

    def r(*shape, s=0.2):
        return (rng.standard_normal(shape) * s).astype(np.float32)
    w = {"wte.weight": r(V, C, s=0.5), "wpe.weight": r(P, C, s=0.3)}
    for l in range(L):
        p = "h.%d." % l
        w[p + "ln_1.weight"], w[p + "ln_1.bias"] = 1 + r(C, s=0.1), r(C, s=0.1)
        w[p + "attn.bias"] = np.tril(np.ones((P, P), dtype=np.float32)).reshape(1, 1, P, P)
        w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"] = r(C, 3 * C), r(3 * C, s=0.05)
        w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"] = r(C, C), r(C, s=0.05)
        w[p + "ln_2.weight"], w[p + "ln_2.bias"] = 1 + r(C, s=0.1), r(C, s=0.1)
        w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"] = r(C, 4 * C), r(4 * C, s=0.05)
        w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"] = r(4 * C, C), r(C, s=0.05)
    w["ln_f.weight"], w["ln_f.bias"] = 1 + r(C, s=0.1), r(C, s=0.1)
    write_safetensors(os.path.join(d, "model.safetensors"), w)
    texts = ["First Citizen:\nBefore we proceed any further, hear me speak.",
             "Caf\u00e9 na\u00efve \u2014 don't  stop\ttabs 123"]
    out, meta = {}, {"format": "clformer-gpt2-reference", "count": str(len(texts))}
    for i, s in enumerate(texts):
        ids = tok.encode(s).ids
        out["ids.%d" % i] = np.array(ids, dtype=np.int32)
        out["logits.%d" % i] = np.array(gpt2_logits(cfg, w, ids), dtype=np.float32)
        meta["text.%d" % i] = s
    write_safetensors(os.path.join(OUT, "tiny-gpt2-logits.safetensors"), out, meta)
    return V


LLAMAS = {
    "llama": dict(model_type="llama", kv=2, theta=500000.0, tied=False, qkv_bias=False,
                  window=None, scaling={"rope_type": "yarn", "factor": 4.0,
                                        "original_max_position_embeddings": 16}),
    "mistral": dict(model_type="mistral", kv=1, theta=1e6, tied=False, qkv_bias=False, window=8,
                    scaling=None),
    "qwen2": dict(model_type="qwen2", kv=2, theta=10000.0, tied=True, qkv_bias=True, window=None,
                  scaling={"type": "linear", "factor": 2.0}),
}


def rope_parameters(cfg, dim):
    """inv_freq (float64) and the attention factor, as transformers'
    modeling_rope_utils computes them for default, linear and yarn."""
    base = cfg["rope_theta"]
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    inv_freq = 1.0 / pos_freqs
    rs = cfg.get("rope_scaling")
    if not rs:
        return inv_freq, 1.0
    kind, factor = rs.get("rope_type", rs.get("type")), rs["factor"]
    if kind == "linear":
        return inv_freq / factor, 1.0
    assert kind == "yarn"
    orig = rs["original_max_position_embeddings"]
    beta_fast, beta_slow = rs.get("beta_fast", 32), rs.get("beta_slow", 1)

    def correction_dim(rot):
        return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low), 0, 1)
    extra = 1 - ramp
    return (inv_freq / factor) * (1 - extra) + inv_freq * extra, 0.1 * math.log(factor) + 1.0


def llama_logits(cfg, w, ids):
    """transformers' LlamaForCausalLM (and Mistral's, Qwen2's) forward in
    float64: logits [T, V]."""
    def t(name):
        return torch.tensor(w[name].astype(np.float64))
    C, NH, KV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    HS, T, eps = C // NH, len(ids), cfg["rms_norm_eps"]

    def rms(x, name):
        return t(name) * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))

    def rot(x):
        return torch.cat((-x[..., HS // 2:], x[..., : HS // 2]), dim=-1)

    inv_freq, af = rope_parameters(cfg, HS)
    ang = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos() * af, emb.sin() * af
    i = torch.arange(T).view(T, 1)
    j = torch.arange(T).view(1, T)
    mask = j <= i
    if cfg.get("sliding_window"):
        mask = mask & (i - j < cfg["sliding_window"])
    x = t("model.embed_tokens.weight")[ids]
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l

        def lin(v, n):
            y = v @ t(p + n + ".weight").T
            return y + t(p + n + ".bias") if (p + n + ".bias") in w else y
        h = rms(x, p + "input_layernorm.weight")
        q = lin(h, "self_attn.q_proj").view(T, NH, HS).transpose(0, 1)
        k = lin(h, "self_attn.k_proj").view(T, KV, HS).transpose(0, 1)
        v = lin(h, "self_attn.v_proj").view(T, KV, HS).transpose(0, 1)
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        k, v = k.repeat_interleave(NH // KV, dim=0), v.repeat_interleave(NH // KV, dim=0)
        s = (q @ k.transpose(1, 2) / math.sqrt(HS)).masked_fill(~mask, float("-inf"))
        a = (torch.softmax(s, dim=-1) @ v).transpose(0, 1).reshape(T, C)
        x = x + lin(a, "self_attn.o_proj")
        h = rms(x, p + "post_attention_layernorm.weight")
        x = x + lin(torch.nn.functional.silu(lin(h, "mlp.gate_proj")) * lin(h, "mlp.up_proj"),
                    "mlp.down_proj")
    x = rms(x, "model.norm.weight")
    head = "model.embed_tokens.weight" if cfg["tie_word_embeddings"] else "lm_head.weight"
    return (x @ t(head).T).tolist()


def make_llamas():
    import shutil
    rng = np.random.default_rng(37)
    ref = read_safetensors(os.path.join(OUT, "tiny-gpt2-logits.safetensors"))
    texts = sorted(k for k in ref if k.startswith("ids."))
    V, C, L, NH, H, P = 350, 32, 2, 4, 48, 64
    out = {}

    def r(*shape, s=0.2):
        return (rng.standard_normal(shape) * s).astype(np.float32)
    for name, m in LLAMAS.items():
        d = os.path.join(OUT, "tiny-" + name)
        os.makedirs(d, exist_ok=True)
        for f in ("vocab.json", "merges.txt"):
            shutil.copy(os.path.join(OUT, "tiny-gpt2", f), os.path.join(d, f))
        KV, HS = m["kv"], C // NH
        cfg = {"architectures": [{"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                                  "qwen2": "Qwen2ForCausalLM"}[name]],
               "model_type": m["model_type"], "hidden_size": C, "intermediate_size": H,
               "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": KV,
               "max_position_embeddings": P, "rms_norm_eps": 1e-6, "rope_theta": m["theta"],
               "rope_scaling": m["scaling"], "vocab_size": V, "hidden_act": "silu",
               "tie_word_embeddings": m["tied"], "bos_token_id": 0, "eos_token_id": 0,
               "torch_dtype": "float32"}
        if name == "llama":
            cfg.update(attention_bias=False, mlp_bias=False, head_dim=HS)
        if name == "mistral":
            cfg["sliding_window"] = m["window"]
        if name == "qwen2":
            cfg.update(use_sliding_window=False, sliding_window=None, max_window_layers=L)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        w = {"model.embed_tokens.weight": r(V, C, s=0.5)}
        for l in range(L):
            p = "model.layers.%d." % l
            w[p + "input_layernorm.weight"] = 1 + r(C, s=0.1)
            w[p + "self_attn.q_proj.weight"] = r(NH * HS, C)
            w[p + "self_attn.k_proj.weight"] = r(KV * HS, C)
            w[p + "self_attn.v_proj.weight"] = r(KV * HS, C)
            if m["qkv_bias"]:
                for n, rows in (("q", NH * HS), ("k", KV * HS), ("v", KV * HS)):
                    w[p + "self_attn.%s_proj.bias" % n] = r(rows, s=0.05)
            w[p + "self_attn.o_proj.weight"] = r(C, NH * HS)
            w[p + "post_attention_layernorm.weight"] = 1 + r(C, s=0.1)
            w[p + "mlp.gate_proj.weight"] = r(H, C)
            w[p + "mlp.up_proj.weight"] = r(H, C)
            w[p + "mlp.down_proj.weight"] = r(C, H)
        w["model.norm.weight"] = 1 + r(C, s=0.1)
        if not m["tied"]:
            w["lm_head.weight"] = r(V, C, s=0.5)
        write_safetensors(os.path.join(d, "model.safetensors"), w)
        for k in texts:
            ids = [int(x) for x in ref[k]]
            out["logits.%s.%s" % (name, k[4:])] = np.array(llama_logits(cfg, w, ids),
                                                            dtype=np.float32)
    write_safetensors(os.path.join(OUT, "tiny-llama-logits.safetensors"), out,
                      {"format": "clformer-llama-reference", "count": str(len(texts))})
    print("wrote %s: %s" % (OUT, ", ".join("tiny-" + n for n in LLAMAS)))


def make():
    torch.manual_seed(2026)
    rng = np.random.default_rng(2026)
    tok = make_tokenizer()
    d = os.path.join(OUT, "tiny-bert")
    os.makedirs(os.path.join(d, "1_Pooling"), exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    V = tok.get_vocab_size()
    cfg = {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 32,
           "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
           "hidden_act": "gelu", "max_position_embeddings": 64, "type_vocab_size": 2,
           "vocab_size": V, "layer_norm_eps": 1e-12, "hidden_dropout_prob": 0.1,
           "attention_probs_dropout_prob": 0.1, "position_embedding_type": "absolute",
           "pad_token_id": 0}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(d, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": 32, "pooling_mode_cls_token": False,
                   "pooling_mode_mean_tokens": True}, f, indent=2)
    C, H, P = 32, 64, 64

    def r(*shape, s=0.2):
        return (rng.standard_normal(shape) * s).astype(np.float32)
    w = {"embeddings.position_ids": np.arange(P, dtype=np.int64).reshape(1, P),
         "embeddings.word_embeddings.weight": r(V, C, s=0.5),
         "embeddings.position_embeddings.weight": r(P, C, s=0.5),
         "embeddings.token_type_embeddings.weight": r(2, C, s=0.5),
         "embeddings.LayerNorm.weight": 1 + r(C, s=0.1), "embeddings.LayerNorm.bias": r(C, s=0.1)}
    for l in range(2):
        p = "encoder.layer.%d." % l
        for n in ("query", "key", "value"):
            w[p + "attention.self.%s.weight" % n] = r(C, C)
            w[p + "attention.self.%s.bias" % n] = r(C, s=0.05)
        w[p + "attention.output.dense.weight"] = r(C, C)
        w[p + "attention.output.dense.bias"] = r(C, s=0.05)
        w[p + "attention.output.LayerNorm.weight"] = 1 + r(C, s=0.1)
        w[p + "attention.output.LayerNorm.bias"] = r(C, s=0.1)
        w[p + "intermediate.dense.weight"] = r(H, C)
        w[p + "intermediate.dense.bias"] = r(H, s=0.05)
        w[p + "output.dense.weight"] = r(C, H)
        w[p + "output.dense.bias"] = r(C, s=0.05)
        w[p + "output.LayerNorm.weight"] = 1 + r(C, s=0.1)
        w[p + "output.LayerNorm.bias"] = r(C, s=0.1)
    w["pooler.dense.weight"] = r(C, C)
    w["pooler.dense.bias"] = r(C)
    write_safetensors(os.path.join(d, "model.safetensors"), w)

    sents = ["A man is eating food.", "A man is riding a white horse on an enclosed ground.",
             "The new movie is awesome!", "Ein Mann schläft in einem grünen Raum auf einem Sofa.",
             "an utterly charming and hilarious film that reminded me of the best of the disney "
             "comedies from the 60s .", "Zwei junge, weiße Männer sind im Freien in der Nähe "
             "vieler Büsche.", "x", "Café? Déjà vu... 北京 🤗"]
    ids = [tok.encode(s).ids for s in sents]
    emb = bert_embed(cfg, w, ids)
    with open(os.path.join(OUT, "tiny-bert-embed.json"), "w") as f:
        json.dump({"sentences": sents, "ids": ids, "embeddings": emb}, f)

    cases = [{"text": s, "ids": tok.encode(s, add_special_tokens=False).ids} for s in sentences()]
    with open(os.path.join(OUT, "wordpiece-cases.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer": "tiny-bert/tokenizer.json", "cases": cases}, f, ensure_ascii=False)
    Vg = make_gpt2(rng)
    print("wrote %s: vocabulary %d, %d embedding sentences, %d tokenizer cases; GPT-2 vocabulary %d"
          % (OUT, V, len(sents), len(cases), Vg))


def check(model_dir, sent_path, clf_out):
    from tokenizers import Tokenizer
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    with open(sent_path, encoding="utf-8") as f:
        sents = [l.rstrip("\n") for l in f]
    ref = bert_embed(cfg, w, [tok.encode(s).ids for s in sents])
    with open(clf_out) as f:
        got = [[float(x) for x in l.split()] for l in f]
    worst = 1.0
    for s, a, b in zip(sents, ref, got):
        a, b = np.array(a), np.array(b)
        cos = float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
        worst = min(worst, cos)
        print("%.8f  %s" % (cos, s))
    print("worst cosine %.10f (1 - cos = %.2e) over %d sentences" % (worst, 1 - worst, len(sents)))


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "make":
        make()
    elif len(sys.argv) == 2 and sys.argv[1] == "llama":
        make_llamas()
    elif len(sys.argv) == 5 and sys.argv[1] == "check":
        check(*sys.argv[2:])
    else:
        sys.exit(__doc__)
