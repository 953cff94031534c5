#!/usr/bin/env python3
"""gen_bert_fixture.py - reference data for tests/test_import.c (WordPiece and
BERT import), and a reference check of a real model.

Make the fixtures (run by hand, never by CI; needs PyTorch and the Hugging
Face `tokenizers` package, e.g. in a venv with --system-site-packages):

    python3 tests/parity/gen_bert_fixture.py make

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

Check a real model against clformer (prints the cosine of every sentence):

    python3 tests/parity/gen_bert_fixture.py check MODEL_DIR SENTENCES CLFORMER_OUT

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


def write_safetensors(path, tensors):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, arr in tensors.items():
        dt = {np.float32: "F32", np.int64: "I64"}[arr.dtype.type]
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
        dt = {"F32": np.float32, "F16": np.float16, "I64": np.int64}[v["dtype"]]
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
    print("wrote %s: vocabulary %d, %d embedding sentences, %d tokenizer cases"
          % (OUT, V, len(sents), len(cases)))


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
    print("worst cosine %.8f over %d sentences" % (worst, len(sents)))


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "make":
        make()
    elif len(sys.argv) == 5 and sys.argv[1] == "check":
        check(*sys.argv[2:])
    else:
        sys.exit(__doc__)
