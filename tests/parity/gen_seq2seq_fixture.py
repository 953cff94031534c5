#!/usr/bin/env python3
"""gen_seq2seq_fixture.py - PyTorch reference fixtures for tests/test_parity_seq2seq.c.

Builds tiny encoder-decoders with torch.nn.Transformer and tiny encoder
classifiers with torch.nn.TransformerEncoder (dropout 0, training mode so
that torch takes no nested-tensor fast path), maps their parameters to
clformer's names, runs one forward/backward and 10 optimizer steps, and
writes one .safetensors fixture per variant into tests/data/parity/. Run by
hand (never by CI) when the fixtures must change:

    /usr/bin/python3 tests/parity/gen_seq2seq_fixture.py      # torch 1.13, numpy

Encoder-decoders (32 dims, 4 heads, ffn 64, ReLU, vocabulary 37, context 8,
batch 3, source length S = 7, target length T = 6, every row padded
differently): token embeddings scaled by sqrt(32) plus the sinusoidal table
of the paper, torch's src_key_padding_mask / memory_key_padding_mask from
the source pads, the causal tgt_mask and tgt_key_padding_mask, LM head
without bias, cross-entropy with label smoothing 0.1 ignoring -1, Adam
(betas 0.9/0.98, eps 1e-9) with the Noam schedule
lr = 0.5 * 32^-0.5 * min(step^-0.5, step * 4^-1.5), no clipping.
  s2s_post  norm_first=False (the paper), 2 encoder / 1 decoder layers,
            shared source/target embeddings, output tied to them
  s2s_pre   norm_first=True, 1 encoder / 2 decoder layers, separate
            embeddings, untied output projection
(torch.nn.Transformer has encoder.norm and decoder.norm with both
placements; clformer's final_norm: layernorm is the same.)

Encoder classifiers (32 dims, 4 heads, 2 layers, vocabulary 37, context 8,
batch 4 rows of S = 7 with pads, 3 labels):
  cls_pre   norm_first=True, GELU, learned positions, final LayerNorm,
            [CLS] (first position) pooling, AdamW (weight decay 0.05 on
            2-D tensors, betas 0.9/0.999, eps 1e-8) at constant lr 2e-3,
            clipping at 0.5, no label smoothing
  cls_mean  norm_first=False, ReLU, sinusoidal positions with scaled
            embeddings, no final norm, mean pooling over non-pad positions,
            Adam + Noam as above, label smoothing 0.1, one label ignored (-1)
  cls_lin   as cls_pre with Linformer self-attention (blocks.attention.type
            linformer, proj 3): the padding's keys and values zeroed, then
            projected along the sequence by each layer's E and F [3, context]
            (attn.lin_e, attn.lin_f; their first S columns), softmax attention
            over the 3 projected rows

Parameter names (clformer's; torch's in brackets):
  wte [tgt embedding, or the shared one], src_wte [src embedding],
  src_wpe / wpe or wpe [learned positions], lm_head.weight [output Linear],
  encoder.blocks.<l>. / decoder.blocks.<l>. / blocks.<l>.:
    ln1 [norm1], attn.qkv [self_attn.in_proj_weight/bias: rows q, k, v],
    attn.proj [self_attn.out_proj], lnx [norm2 of a decoder layer],
    cross.q [multihead_attn.in_proj rows 0..C), cross.kv [rows C..3C)],
    cross.proj [multihead_attn.out_proj], ln2 [norm2 of an encoder layer,
    norm3 of a decoder layer], ffn.fc [linear1], ffn.proj [linear2];
  encoder.ln_f / decoder.ln_f / ln_f [encoder.norm, decoder.norm],
  classifier [the head Linear].

Fixture contents (float32 unless noted), metadata "format":
"clformer-parity", "version": "1", "variant", "kind", "config" (the model
YAML the C test builds):
  src, src_keep    int32 [B, S] (keep 1 = token, 0 = pad)
  tgt_in, tgt_out  int32 [B, T] (encoder-decoder; tgt_out -1 = ignored)
  labels           int32 [B] (classifier; -1 = ignored)
  param.<name>, grad.<name>, final.<name>
  logits           [B, T, V] or [B, NL] of the initial parameters
  loss             [1]
  train.lr, train.loss, train.gnorm   [10] per step (loss before the update,
                   global gradient norm before clipping)
  final_loss       [1] after the 10 steps
The initial parameters are random everywhere (biases, norm weights around
1) so that every parameter's effect and gradient is tested.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

C, NH, H, V, CTX = 32, 4, 64, 37, 8
PAD, BOS, EOS = 0, 1, 2
STEPS = 10
NORM_EPS = 1e-5
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "parity")

NOAM = dict(type="noam", factor=0.5, warmup=4)
S2S = {
    "s2s_post": dict(norm_first=False, le=2, ld=1, shared=True, tied=True, seed=11,
                     src_len=[7, 5, 3], tgt_len=[6, 4, 2]),
    "s2s_pre": dict(norm_first=True, le=1, ld=2, shared=False, tied=False, seed=12,
                    src_len=[4, 7, 2], tgt_len=[3, 6, 5]),
}
CLS = {
    "cls_pre": dict(norm_first=True, act="gelu", pos="learned", scale=False, final_norm=True,
                    pool="cls", labels=3, opt="adamw", ls=0.0, clip=0.5, seed=21,
                    lens=[7, 4, 6, 2], ignore=[]),
    "cls_mean": dict(norm_first=False, act="relu", pos="sinusoidal", scale=True,
                     final_norm=False, pool="mean", labels=3, opt="adam", ls=0.1, clip=0.0,
                     seed=22, lens=[3, 7, 5, 1], ignore=[2]),
    "cls_lin": dict(norm_first=True, act="gelu", pos="learned", scale=False, final_norm=True,
                    pool="mean", labels=3, opt="adamw", ls=0.0, clip=0.5, seed=23,
                    lens=[7, 4, 6, 2], ignore=[], proj=3),
}


def noam_lr(step):
    return NOAM["factor"] * C ** -0.5 * min(step ** -0.5, step * NOAM["warmup"] ** -1.5)


def b(x):
    return "true" if x else "false"


def s2s_yaml(v):
    return f"""model:
  kind: encoder-decoder
  vocab: {{tokenizer: char, size: {V}}}
  context: {CTX}
  embedding: {{dim: {C}, scale: true, dropout: 0.0}}
  positional: {{type: sinusoidal}}
  blocks:
    repeat: {v['le']}
    encoder_repeat: {v['le']}
    decoder_repeat: {v['ld']}
    attention: {{heads: {NH}, causal: true, dropout: 0.0, bias: true}}
    ffn: {{hidden: {H}, activation: relu, bias: true, dropout: 0.0}}
    norm: {{type: layernorm, placement: {'pre' if v['norm_first'] else 'post'}, eps: {NORM_EPS}, bias: true}}
    dropout: 0.0
  share_embeddings: {b(v['shared'])}
  final_norm: {{type: layernorm}}
  head: {{type: lm, tie_embedding: {b(v['tied'])}}}
train:
  batch: 3
  steps: {STEPS}
  optimizer: {{type: adam, lr: {NOAM['factor']}, betas: [0.9, 0.98], eps: 1.0e-9, weight_decay: 0.0}}
  schedule: {{type: noam, warmup: {NOAM['warmup']}}}
  grad_clip: 0.0
  label_smoothing: 0.1
  seed: 1337
"""


def cls_yaml(v):
    lin = f", type: linformer, proj: {v['proj']}" if v.get("proj") else ""
    if v["opt"] == "adamw":
        opt = "{type: adamw, lr: 0.002, betas: [0.9, 0.999], eps: 1.0e-8, weight_decay: 0.05}"
        sched = "{type: constant, warmup: 0}"
    else:
        opt = f"{{type: adam, lr: {NOAM['factor']}, betas: [0.9, 0.98], eps: 1.0e-9, weight_decay: 0.0}}"
        sched = f"{{type: noam, warmup: {NOAM['warmup']}}}"
    return f"""model:
  kind: encoder
  vocab: {{tokenizer: char, size: {V}}}
  context: {CTX}
  embedding: {{dim: {C}, scale: {b(v['scale'])}, dropout: 0.0}}
  positional: {{type: {v['pos']}}}
  blocks:
    repeat: 2
    attention: {{heads: {NH}, causal: false, dropout: 0.0, bias: true{lin}}}
    ffn: {{hidden: {H}, activation: {v['act']}, bias: true, dropout: 0.0}}
    norm: {{type: layernorm, placement: {'pre' if v['norm_first'] else 'post'}, eps: {NORM_EPS}, bias: true}}
    dropout: 0.0
  final_norm: {{type: {'layernorm' if v['final_norm'] else 'none'}}}
  head: {{type: classifier, tie_embedding: false, labels: {v['labels']}, pool: {v['pool']}}}
train:
  batch: 4
  steps: {STEPS}
  optimizer: {opt}
  schedule: {sched}
  grad_clip: {v['clip']}
  label_smoothing: {v['ls']}
  seed: 1337
"""


def sinusoid(n):
    pe = torch.zeros(n, C, dtype=torch.float64)
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    div = torch.pow(10000.0, torch.arange(0, C, 2, dtype=torch.float64) / C)
    pe[:, 0::2] = torch.sin(pos / div)
    pe[:, 1::2] = torch.cos(pos / div)
    return pe.float()


def randomize(module, g):
    """Random values everywhere: weights normal(0, 0.1), biases normal(0, 0.05),
    LayerNorm weights 1 + normal(0, 0.1)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))


# ---- parameter maps: clformer name -> (tensor, row slice or None) ------------------------


def map_norm(out, name, ln):
    out[name + ".weight"] = (ln.weight, None)
    out[name + ".bias"] = (ln.bias, None)


def map_linear(out, name, lin, rows=None):
    out[name + ".weight"] = (lin.weight, rows)
    out[name + ".bias"] = (lin.bias, rows)


def map_mha_self(out, pre, mha):
    out[pre + "attn.qkv.weight"] = (mha.in_proj_weight, None)
    out[pre + "attn.qkv.bias"] = (mha.in_proj_bias, None)
    map_linear(out, pre + "attn.proj", mha.out_proj)


def map_enc_layer(out, pre, layer):
    map_norm(out, pre + "ln1", layer.norm1)
    map_mha_self(out, pre, layer.self_attn)
    map_norm(out, pre + "ln2", layer.norm2)
    map_linear(out, pre + "ffn.fc", layer.linear1)
    map_linear(out, pre + "ffn.proj", layer.linear2)


def map_dec_layer(out, pre, layer):
    map_norm(out, pre + "ln1", layer.norm1)
    map_mha_self(out, pre, layer.self_attn)
    map_norm(out, pre + "lnx", layer.norm2)
    x = layer.multihead_attn
    out[pre + "cross.q.weight"] = (x.in_proj_weight, slice(0, C))
    out[pre + "cross.q.bias"] = (x.in_proj_bias, slice(0, C))
    out[pre + "cross.kv.weight"] = (x.in_proj_weight, slice(C, 3 * C))
    out[pre + "cross.kv.bias"] = (x.in_proj_bias, slice(C, 3 * C))
    map_linear(out, pre + "cross.proj", x.out_proj)
    map_norm(out, pre + "ln2", layer.norm3)
    map_linear(out, pre + "ffn.fc", layer.linear1)
    map_linear(out, pre + "ffn.proj", layer.linear2)


def take(t, rows):
    t = t.detach()
    return (t if rows is None else t[rows]).numpy().astype(np.float32).copy()


def take_grad(t, rows):
    g = t.grad if t.grad is not None else torch.zeros_like(t)
    return (g if rows is None else g[rows]).detach().numpy().astype(np.float32).copy()


# ---- models ----------------------------------------------------------------------------


class Seq2Seq(nn.Module):
    def __init__(self, v):
        super().__init__()
        self.v = v
        self.tgt_emb = nn.Embedding(V, C)
        self.src_emb = self.tgt_emb if v["shared"] else nn.Embedding(V, C)
        self.tf = nn.Transformer(d_model=C, nhead=NH, num_encoder_layers=v["le"],
                                 num_decoder_layers=v["ld"], dim_feedforward=H, dropout=0.0,
                                 activation=F.relu, layer_norm_eps=NORM_EPS, batch_first=True,
                                 norm_first=v["norm_first"])
        self.out = None if v["tied"] else nn.Linear(C, V, bias=False)

    def forward(self, src, src_keep, tgt_in):
        S, T = src.shape[1], tgt_in.shape[1]
        xs = self.src_emb(src) * math.sqrt(C) + sinusoid(S)
        xt = self.tgt_emb(tgt_in) * math.sqrt(C) + sinusoid(T)
        src_pad = src_keep == 0
        tgt_pad = tgt_in == PAD
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(T)
        h = self.tf(xs, xt, tgt_mask=tgt_mask, src_key_padding_mask=src_pad,
                    tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
        w = self.tgt_emb.weight if self.out is None else self.out.weight
        return F.linear(h, w)

    def names(self):
        out = {"wte": (self.tgt_emb.weight, None)}
        if not self.v["shared"]:
            out["src_wte"] = (self.src_emb.weight, None)
        for l, layer in enumerate(self.tf.encoder.layers):
            map_enc_layer(out, f"encoder.blocks.{l}.", layer)
        map_norm(out, "encoder.ln_f", self.tf.encoder.norm)
        for l, layer in enumerate(self.tf.decoder.layers):
            map_dec_layer(out, f"decoder.blocks.{l}.", layer)
        map_norm(out, "decoder.ln_f", self.tf.decoder.norm)
        if self.out is not None:
            out["lm_head.weight"] = (self.out.weight, None)
        return out


class LinformerLayer(nn.TransformerEncoderLayer):
    """nn.TransformerEncoderLayer with Linformer self-attention: the padding's
    keys and values zeroed, projected along the sequence by E and F."""

    def __init__(self, *args, proj, **kw):
        super().__init__(*args, **kw)
        self.lin_e = nn.Parameter(torch.zeros(proj, CTX))
        self.lin_f = nn.Parameter(torch.zeros(proj, CTX))

    def _sa_block(self, x, attn_mask, key_padding_mask, *args, **kw):
        Bn, S, _ = x.shape
        HS, P = C // NH, self.lin_e.shape[0]
        q, k, v = F.linear(x, self.self_attn.in_proj_weight, self.self_attn.in_proj_bias).split(
            C, dim=-1)
        keep = (~key_padding_mask).float()[:, :, None]
        kp = torch.einsum("ps,bsc->bpc", self.lin_e[:, :S], k * keep)
        vp = torch.einsum("ps,bsc->bpc", self.lin_f[:, :S], v * keep)
        q = q.view(Bn, S, NH, HS).transpose(1, 2)
        kp = kp.view(Bn, P, NH, HS).transpose(1, 2)
        vp = vp.view(Bn, P, NH, HS).transpose(1, 2)
        att = F.softmax((q @ kp.transpose(-2, -1)) / math.sqrt(HS), dim=-1)
        y = (att @ vp).transpose(1, 2).reshape(Bn, S, C)
        return self.dropout1(self.self_attn.out_proj(y))


class Classifier(nn.Module):
    def __init__(self, v):
        super().__init__()
        self.v = v
        self.emb = nn.Embedding(V, C)
        self.wpe = nn.Parameter(torch.zeros(CTX, C)) if v["pos"] == "learned" else None
        act = F.gelu if v["act"] == "gelu" else F.relu
        if v.get("proj"):
            layer = LinformerLayer(C, NH, H, 0.0, act, NORM_EPS, batch_first=True,
                                   norm_first=v["norm_first"], proj=v["proj"])
        else:
            layer = nn.TransformerEncoderLayer(C, NH, H, 0.0, act, NORM_EPS, batch_first=True,
                                               norm_first=v["norm_first"])
        norm = nn.LayerNorm(C, eps=NORM_EPS) if v["final_norm"] else None
        self.enc = nn.TransformerEncoder(layer, 2, norm=norm, enable_nested_tensor=False)
        self.head = nn.Linear(C, v["labels"])

    def forward(self, src, keep):
        S = src.shape[1]
        x = self.emb(src) * (math.sqrt(C) if self.v["scale"] else 1.0)
        x = x + (self.wpe[:S] if self.wpe is not None else sinusoid(S))
        h = self.enc(x, src_key_padding_mask=keep == 0)
        if self.v["pool"] == "cls":
            pooled = h[:, 0]
        else:
            k = keep.float()[:, :, None]
            pooled = (h * k).sum(1) / k.sum(1).clamp(min=1.0)
        return self.head(pooled)

    def names(self):
        out = {"wte": (self.emb.weight, None)}
        if self.wpe is not None:
            out["wpe"] = (self.wpe, None)
        for l, layer in enumerate(self.enc.layers):
            map_enc_layer(out, f"blocks.{l}.", layer)
            if self.v.get("proj"):
                out[f"blocks.{l}.attn.lin_e"] = (layer.lin_e, None)
                out[f"blocks.{l}.attn.lin_f"] = (layer.lin_f, None)
        if self.enc.norm is not None:
            map_norm(out, "ln_f", self.enc.norm)
        map_linear(out, "classifier", self.head)
        return out


# ---- data ----------------------------------------------------------------------------


def s2s_batch(v, g):
    B, S, T = len(v["src_len"]), max(v["src_len"]), max(v["tgt_len"])
    src = torch.full((B, S), PAD, dtype=torch.long)
    keep = torch.zeros((B, S), dtype=torch.long)
    tgt_in = torch.full((B, T), PAD, dtype=torch.long)
    tgt_out = torch.full((B, T), -1, dtype=torch.long)
    for i in range(B):
        n, m = v["src_len"][i], v["tgt_len"][i]
        src[i, : n - 1] = torch.randint(3, V, (n - 1,), generator=g)
        src[i, n - 1] = EOS
        keep[i, :n] = 1
        y = torch.randint(3, V, (m - 1,), generator=g)
        tgt_in[i, 0] = BOS
        tgt_in[i, 1:m] = y
        tgt_out[i, : m - 1] = y
        tgt_out[i, m - 1] = EOS
    return src, keep, tgt_in, tgt_out


def cls_batch(v, g):
    B, S = len(v["lens"]), max(v["lens"])
    src = torch.full((B, S), PAD, dtype=torch.long)
    keep = torch.zeros((B, S), dtype=torch.long)
    for i, n in enumerate(v["lens"]):
        src[i, 0] = 3  # [CLS]
        if n > 1:
            src[i, 1:n] = torch.randint(4, V, (n - 1,), generator=g)
        keep[i, :n] = 1
    labels = torch.randint(0, v["labels"], (B,), generator=g)
    for i in v["ignore"]:
        labels[i] = -1
    return src, keep, labels


# ---- the fixture ----------------------------------------------------------------------------


def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": metadata}
    blobs, off = [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        dtype = {np.dtype("float32"): "F32", np.dtype("int32"): "I32"}[a.dtype]
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for raw in blobs:
            f.write(raw)
    os.replace(tmp, path)


def make_fixture(name, kind, v):
    torch.manual_seed(v["seed"])
    g = torch.Generator().manual_seed(v["seed"])
    model = Seq2Seq(v) if kind == "s2s" else Classifier(v)
    randomize(model, g)
    model.train()  # dropout is 0; training mode keeps torch off its nested-tensor fast path
    names = model.names()
    params = list(model.parameters())
    out = {}
    if kind == "s2s":
        src, keep, tgt_in, tgt_out = s2s_batch(v, g)
        inputs = (src, keep, tgt_in)
        targets, ls = tgt_out, 0.1
        for k, t in (("src", src), ("src_keep", keep), ("tgt_in", tgt_in), ("tgt_out", tgt_out)):
            out[k] = t.numpy().astype(np.int32)
        yaml = s2s_yaml(v)
    else:
        src, keep, labels = cls_batch(v, g)
        inputs = (src, keep)
        targets, ls = labels, v["ls"]
        for k, t in (("src", src), ("src_keep", keep), ("labels", labels)):
            out[k] = t.numpy().astype(np.int32)
        yaml = cls_yaml(v)

    def loss_of():
        logits = model(*inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                               ignore_index=-1, label_smoothing=ls)
        return logits, loss

    for k, (t, rows) in names.items():
        out["param." + k] = take(t, rows)
    logits, loss = loss_of()
    loss.backward()
    out["logits"] = logits.detach().numpy().astype(np.float32)
    out["loss"] = np.array([loss.item()], dtype=np.float32)
    for k, (t, rows) in names.items():
        out["grad." + k] = take_grad(t, rows)
    model.zero_grad(set_to_none=True)

    if kind == "cls" and v["opt"] == "adamw":
        decay = [p for p in params if p.dim() == 2]
        nodecay = [p for p in params if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                                 {"params": nodecay, "weight_decay": 0.0}],
                                lr=2e-3, betas=(0.9, 0.999), eps=1e-8)
        lr_of = lambda step: 2e-3
        clip = v["clip"]
    else:
        opt = torch.optim.Adam(params, lr=1.0, betas=(0.9, 0.98), eps=1e-9)
        lr_of = noam_lr
        clip = v.get("clip", 0.0)
    lrs, losses, gnorms = [], [], []
    for it in range(STEPS):
        lr = lr_of(it + 1)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad(set_to_none=True)
        _, l = loss_of()
        l.backward()
        gn = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in params
                           if p.grad is not None))
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        lrs.append(lr)
        losses.append(l.item())
        gnorms.append(gn)
    with torch.no_grad():
        _, fl = loss_of()
    out["train.lr"] = np.array(lrs, dtype=np.float32)
    out["train.loss"] = np.array(losses, dtype=np.float32)
    out["train.gnorm"] = np.array(gnorms, dtype=np.float32)
    out["final_loss"] = np.array([fl.item()], dtype=np.float32)
    for k, (t, rows) in names.items():
        out["final." + k] = take(t, rows)

    meta = {"format": "clformer-parity", "version": "1", "variant": name,
            "kind": "encoder-decoder" if kind == "s2s" else "encoder", "config": yaml,
            "torch": torch.__version__}
    os.makedirs(OUT_DIR, exist_ok=True)
    path = os.path.join(OUT_DIR, name + ".safetensors")
    write_safetensors(path, out, meta)
    print(f"{path}: {os.path.getsize(path)} bytes, {len(names)} tensors, loss {loss.item():.6f}, "
          f"losses {[round(a, 5) for a in losses]}, gnorms {[round(a, 4) for a in gnorms]}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    only = sys.argv[1:]  # optional fixture names: only those
    for name, v in S2S.items():
        if not only or name in only:
            make_fixture(name, "s2s", v)
    for name, v in CLS.items():
        if not only or name in only:
            make_fixture(name, "cls", v)
