#!/usr/bin/env python3
"""gen_gpt_fixture.py - PyTorch reference fixtures for tests/test_parity_gpt.c.

Builds tiny GPTs in plain PyTorch with exactly clformer's semantics and
parameter names, runs one forward/backward and 10 AdamW steps, and writes
one .safetensors fixture per variant into tests/data/parity/. Run by hand
(never by CI) when the fixtures must change:

    /usr/bin/python3 tests/parity/gen_gpt_fixture.py [VARIANT ...]  # torch 1.13, numpy

Variants (2 layers, 2 heads, 32 dims, context 16, vocabulary 65, batch 4):
  gpt_a  pre-LN LayerNorm (with biases), GELU (erf, nn.GELU()), learned
         positions, biases everywhere, tied LM head, no label smoothing,
         two ignored targets (-1)
  gpt_b  RMSNorm, SwiGLU (fc = [gate rows; up rows]), RoPE (rotate_half,
         theta 10000), no biases, untied head, label smoothing 0.1,
         clipping active (grad_clip 0.05)
  gpt_c  post-LN LayerNorm, ReLU, sinusoidal positions with embeddings
         scaled by sqrt(dim), no final norm, tied head, biases
  gpt_w  as gpt_a with sliding-window attention (window 5: each query sees
         its 5 most recent keys), through an explicit band mask
  gpt_l  ALiBi (no position embedding; for 2 heads the paper's slopes
         2^-4 and 2^-8, bias -slope |i - j| added to the scaled scores),
         RMSNorm, GELU, untied head
  gpt_g  grouped-query attention, as Llama and Qwen2 lay it out: 1 key/value
         head shared by the 2 query heads (kv_heads 1: multi-query; qkv rows
         [q (C); k (HS); v (HS)], k and v repeated per query head as
         repeat_interleave does), RMSNorm, SwiGLU, RoPE on q and k, biases
         on q, k and v (Qwen2) and the output projection, untied head
  gpt_y  as gpt_b (RoPE, RMSNorm, SwiGLU, no biases) with 1 key/value
         head (kv_heads 1) and YaRN rope scaling (factor 4 over
         an original context of 8, beta_fast 32, beta_slow 0.05 so that the
         ramp spans pairs 0..3 of 8): the frequencies and the attention
         factor 0.1 ln 4 + 1 on cos and sin as HF transformers'
         _compute_yarn_parameters (truncated correction range), in float64
  gpt_t  T5's relative position bias (positional.type t5): a learned
         rel_bias [heads, 8 buckets] added to the scaled scores by the
         bucket of key - query (transformers' _relative_position_bucket,
         causal: 4 exact distances, then logarithmic up to max_distance 12),
         no position table, LayerNorm, GELU, tied head, dropout-free
  gpt_r  Shaw et al.'s relative positions (positional.type relative,
         max_distance 3): each block's attn.rel_k [7, head size] r_c added to
         the keys inside the score, e_ts = q_t (k_s + r_c) / sqrt(HS) with
         c = clamp(s - t, -3, 3) + 3, no position table; RMSNorm, SwiGLU,
         2 key/value heads of 2 (multi-head), untied head
  gpt_h  as gpt_a with train.precision bf16: clformer's 16-bit storage
         reproduced by hand at the same points (torch.autocast rounds
         elsewhere): the pre-norm blocks' norm outputs, the FFN's
         pre-activation and GELU output, and the gradient of that
         pre-activation are rounded to bfloat16 (nearest even) as they are
         stored, the attention's q, k, v and output and their gradients
         are stored in bfloat16 (its backward taking dy . y from the output
         as stored, as the fused kernels do), and every matrix product reads its weight (qkv, the
         projections, fc, the tied LM head) as the optimizer's bf16 copy
         of the float32 master; GELU's derivative is taken at the stored
         pre-activation;
         all arithmetic is float32 and a rounding passes gradients through
         unchanged. "logits" are the bf16 training model's, "logits_f32"
         the float32 ones inference uses.
  gpt_p  as gpt_a with packed documents (train.packing): each row holds
         documents cut at fixed places (row 0 one document, row 3 two of
         one token), attention masked to each document (causal inside it),
         learned positions restarting at each document's first token, and
         the target of each document's last token ignored (it belongs to
         the next document), as clformer's windows of documents have it
  gpt_q  packed documents with RoPE (positions restarting), 1 key/value
         head, RMSNorm, SwiGLU, untied head
  gpt_f  Performer attention (blocks.attention.type performer, 24 features,
         redraw 0): phi(x) = exp(w_i . x' - |x'|^2 / 2) / sqrt(24), x' = x
         HS^(-1/4), w_i the rows of the fixture's own Gaussian [24, HS]
         (stored as performer_om, given to the model), causal: y_t =
         sum_{s<=t} phi(q_t).phi(k_s) v_s / sum_{s<=t} phi(q_t).phi(k_s), after
         RoPE; RMSNorm, SwiGLU, untied head
  gpt_s  sparse attention at context 48: a window of 4 beside global keys
         (the first 2), every 7th key back, and 1 random key block of 16
         positions per query block (drawn here, stored as random_blocks);
         learned positions, as gpt_a otherwise

Fixture contents (all float32 unless noted):
  metadata  "format": "clformer-parity", "version": "1", "variant",
            "config": the model YAML (config/ schema) the C test builds
  x, y            int32 [B, T] inputs and targets (y = -1: ignored)
  doc             int32 [B, T] document ids (gpt_p, gpt_q: packing)
  random_blocks   int32 [blocks, R] sparse attention's random key blocks (gpt_s)
  performer_om    [features, HS] Performer's random features (gpt_f)
  param.<name>    initial parameters under clformer's names
  logits          [B, T, V] of the initial parameters on (x, y)
  logits_f32      [B, T, V] the same in float32 (gpt_h only)
  loss            [1]
  grad.<name>     d loss / d param (the tied head's gradient is in grad.wte)
  train.lr        [10] nanoGPT get_lr(it) of each step
  train.loss      [10] loss on (x, y) before step i's update (every step
                  trains on the same batch, so the losses fall measurably)
  train.gnorm     [10] global gradient norm before clipping
  final.<name>    parameters after the 10 steps
  final_loss      [1] loss on (x, y) after the 10 steps

The initial parameters are not GPT-2's initialisation: biases and norm
weights are random too (normal 0.02 around 0 or 1) so that every
parameter's effect and gradient is tested. The safetensors file is written
by hand (8-byte little-endian header length, JSON header padded with spaces
to 8 bytes, then the raw tensors), without the safetensors package.
"""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

B, T, C, NH, L, V = 4, 16, 32, 2, 2, 65
HS = C // NH
STEPS = 10
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "parity")

VARIANTS = {
    "gpt_a": dict(norm="layernorm", placement="pre", norm_bias=True, act="gelu", hidden=4 * C,
                  pos="learned", emb_scale=False, attn_bias=True, ffn_bias=True,
                  final_norm="layernorm", tied=True, label_smoothing=0.0, grad_clip=1.0,
                  ignore=[(0, 0), (3, 5)], seed=1),
    "gpt_b": dict(norm="rmsnorm", placement="pre", norm_bias=False, act="swiglu", hidden=48,
                  pos="rope", emb_scale=False, attn_bias=False, ffn_bias=False,
                  final_norm="rmsnorm", tied=False, label_smoothing=0.1, grad_clip=0.05,
                  ignore=[], seed=2),
    "gpt_c": dict(norm="layernorm", placement="post", norm_bias=True, act="relu", hidden=64,
                  pos="sinusoidal", emb_scale=True, attn_bias=True, ffn_bias=True,
                  final_norm="none", tied=True, label_smoothing=0.0, grad_clip=1.0,
                  ignore=[(1, 15)], seed=3),
    "gpt_w": dict(norm="layernorm", placement="pre", norm_bias=True, act="gelu", hidden=4 * C,
                  pos="learned", emb_scale=False, attn_bias=True, ffn_bias=True,
                  final_norm="layernorm", tied=True, label_smoothing=0.0, grad_clip=1.0,
                  ignore=[(2, 3)], seed=4, window=5),
    "gpt_l": dict(norm="rmsnorm", placement="pre", norm_bias=False, act="gelu", hidden=4 * C,
                  pos="alibi", emb_scale=False, attn_bias=True, ffn_bias=False,
                  final_norm="rmsnorm", tied=False, label_smoothing=0.0, grad_clip=1.0,
                  ignore=[], seed=5),
    "gpt_g": dict(norm="rmsnorm", placement="pre", norm_bias=False, act="swiglu", hidden=48,
                  pos="rope", emb_scale=False, attn_bias=True, ffn_bias=False,
                  final_norm="rmsnorm", tied=False, label_smoothing=0.0, grad_clip=1.0,
                  ignore=[(1, 2)], seed=7, kv_heads=1),
    "gpt_y": dict(norm="rmsnorm", placement="pre", norm_bias=False, act="swiglu", hidden=48,
                  pos="rope", emb_scale=False, attn_bias=False, ffn_bias=False,
                  final_norm="rmsnorm", tied=False, label_smoothing=0.0, grad_clip=1.0,
                  ignore=[], seed=8, kv_heads=1,
                  rope_scaling=dict(type="yarn", factor=4.0, original_context=8,
                                    beta_fast=32.0, beta_slow=0.05)),
    "gpt_t": dict(norm="layernorm", placement="pre", norm_bias=True, act="gelu", hidden=4 * C,
                  pos="t5", emb_scale=False, attn_bias=True, ffn_bias=True,
                  final_norm="layernorm", tied=True, label_smoothing=0.0, grad_clip=1.0,
                  ignore=[(2, 7)], seed=9, t5=(8, 12)),
    "gpt_r": dict(norm="rmsnorm", placement="pre", norm_bias=False, act="swiglu", hidden=48,
                  pos="relative", emb_scale=False, attn_bias=True, ffn_bias=False,
                  final_norm="rmsnorm", tied=False, label_smoothing=0.0, grad_clip=1.0,
                  ignore=[(0, 3)], seed=10, rel_k=3),
    "gpt_p": dict(norm="layernorm", placement="pre", norm_bias=True, act="gelu", hidden=4 * C,
                  pos="learned", emb_scale=False, attn_bias=True, ffn_bias=True,
                  final_norm="layernorm", tied=True, label_smoothing=0.0, grad_clip=1.0,
                  ignore=[(1, 9)], seed=11, docs=[[], [5], [3, 9], [1, 2, 7]]),
    "gpt_q": dict(norm="rmsnorm", placement="pre", norm_bias=False, act="swiglu", hidden=48,
                  pos="rope", emb_scale=False, attn_bias=False, ffn_bias=False,
                  final_norm="rmsnorm", tied=False, label_smoothing=0.0, grad_clip=1.0,
                  ignore=[], seed=12, kv_heads=1, docs=[[], [6], [2, 10], [1, 2, 12]]),
    "gpt_f": dict(norm="rmsnorm", placement="pre", norm_bias=False, act="swiglu", hidden=48,
                  pos="rope", emb_scale=False, attn_bias=True, ffn_bias=False,
                  final_norm="rmsnorm", tied=False, label_smoothing=0.0, grad_clip=1.0,
                  ignore=[(2, 4)], seed=14, performer=24),
    "gpt_s": dict(norm="layernorm", placement="pre", norm_bias=True, act="gelu", hidden=4 * C,
                  pos="learned", emb_scale=False, attn_bias=True, ffn_bias=True,
                  final_norm="layernorm", tied=True, label_smoothing=0.0, grad_clip=1.0,
                  ignore=[(1, 30)], seed=13, T=48, window=4,
                  sparse=dict(block=16, random=1, stride=7, **{"global": 2})),
    "gpt_h": dict(norm="layernorm", placement="pre", norm_bias=True, act="gelu", hidden=4 * C,
                  pos="learned", emb_scale=False, attn_bias=True, ffn_bias=True,
                  final_norm="layernorm", tied=True, label_smoothing=0.0, grad_clip=1.0,
                  ignore=[(0, 0), (3, 5)], seed=6, precision="bf16"),
}
LR, MIN_LR, WARMUP, WD, BETAS, EPS, NORM_EPS = 3e-3, 3e-4, 2, 0.1, (0.9, 0.99), 1e-8, 1e-5


def config_yaml(v):
    """The clformer model description of a variant."""
    b = lambda x: "true" if x else "false"
    window = f", window: {v['window']}" if v.get("window") else ""
    sp = v.get("sparse")
    window += (f", global: {sp['global']}, stride: {sp['stride']}, random_blocks: "
               f"{sp['random']}, block: {sp['block']}" if sp else "")
    window += f", kv_heads: {v['kv_heads']}" if v.get("kv_heads") else ""
    window += (f", type: performer, features: {v['performer']}, redraw: 0"
               if v.get("performer") else "")
    t5 = (f", num_buckets: {v['t5'][0]}, max_distance: {v['t5'][1]}" if v.get("t5") else "")
    t5 += f", max_distance: {v['rel_k']}" if v.get("rel_k") else ""
    return f"""model:
  kind: decoder
  vocab: {{tokenizer: char, size: {V}}}
  context: {v.get('T', T)}
  embedding: {{dim: {C}, scale: {b(v['emb_scale'])}, dropout: 0.0}}
  positional: {{type: {v['pos']}, rope_theta: 10000.0{rope_scaling_yaml(v)}{t5}}}
  blocks:
    repeat: {L}
    attention: {{heads: {NH}, causal: true, dropout: 0.0, bias: {b(v['attn_bias'])}{window}}}
    ffn: {{hidden: {v['hidden']}, activation: {v['act']}, bias: {b(v['ffn_bias'])}, dropout: 0.0}}
    norm: {{type: {v['norm']}, placement: {v['placement']}, eps: {NORM_EPS}, bias: {b(v['norm_bias'])}}}
    dropout: 0.0
  final_norm: {{type: {v['final_norm']}}}
  head: {{type: lm, tie_embedding: {b(v['tied'])}}}
train:
  batch: {B}
  steps: {STEPS}
  optimizer: {{type: adamw, lr: {LR}, betas: [{BETAS[0]}, {BETAS[1]}], eps: {EPS}, weight_decay: {WD}}}
  schedule: {{type: cosine, warmup: {WARMUP}, min_lr: {MIN_LR}}}
  grad_clip: {v['grad_clip']}
  label_smoothing: {v['label_smoothing']}
  precision: {v.get('precision', 'fp32')}
  packing: {b(bool(v.get('docs')))}
  seed: 1337
"""


def rope_scaling_yaml(v):
    rs = v.get("rope_scaling")
    if not rs:
        return ""
    return (f", rope_scaling: {{type: {rs['type']}, factor: {rs['factor']}, "
            f"original_context: {rs['original_context']}, beta_fast: {rs['beta_fast']}, "
            f"beta_slow: {rs['beta_slow']}}}")


def get_lr(it):
    """nanoGPT train.py get_lr, lr_decay_iters = STEPS."""
    if it < WARMUP:
        return LR * (it + 1) / (WARMUP + 1)
    if it > STEPS:
        return MIN_LR
    r = (it - WARMUP) / (STEPS - WARMUP)
    return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * r)) * (LR - MIN_LR)


def make_params(v, g):
    """Parameters in clformer's naming; 2-D ones are weight-decayed."""
    p = {}
    n = lambda *shape, sd=0.02, mean=0.0: (torch.randn(*shape, generator=g) * sd + mean)
    resid = 0.02 / math.sqrt(2 * L)
    F_rows = 2 * v["hidden"] if v["act"] == "swiglu" else v["hidden"]
    p["wte"] = n(V, C)
    if v["pos"] == "learned":
        p["wpe"] = n(v.get("T", T), C)
    if v["pos"] == "t5":
        p["rel_bias"] = n(NH, v["t5"][0], sd=0.5)

    def norm(name):
        p[name + ".weight"] = n(C, mean=1.0, sd=0.1)
        if v["norm"] == "layernorm" and v["norm_bias"]:
            p[name + ".bias"] = n(C, sd=0.05)

    for l in range(L):
        pre = f"blocks.{l}."
        norm(pre + "ln1")
        qkv_rows = C + 2 * kv_heads(v) * HS
        p[pre + "attn.qkv.weight"] = n(qkv_rows, C)
        if v["attn_bias"]:
            p[pre + "attn.qkv.bias"] = n(qkv_rows, sd=0.05)
        if v["pos"] == "relative":
            p[pre + "attn.rel_k"] = n(2 * v["rel_k"] + 1, HS, sd=0.5)
        p[pre + "attn.proj.weight"] = n(C, C, sd=resid)
        if v["attn_bias"]:
            p[pre + "attn.proj.bias"] = n(C, sd=0.05)
        norm(pre + "ln2")
        p[pre + "ffn.fc.weight"] = n(F_rows, C)
        if v["ffn_bias"]:
            p[pre + "ffn.fc.bias"] = n(F_rows, sd=0.05)
        p[pre + "ffn.proj.weight"] = n(C, v["hidden"], sd=resid)
        if v["ffn_bias"]:
            p[pre + "ffn.proj.bias"] = n(C, sd=0.05)
    if v["final_norm"] != "none":
        p["ln_f.weight"] = n(C, mean=1.0, sd=0.1)
        if v["final_norm"] == "layernorm" and v["norm_bias"]:
            p["ln_f.bias"] = n(C, sd=0.05)
    if not v["tied"]:
        p["lm_head.weight"] = n(V, C)
    return {k: t.float().requires_grad_(True) for k, t in p.items()}


def kv_heads(v):
    return v.get("kv_heads", NH)


def norm_fwd(v, kind, x, p, name):
    w = p[name + ".weight"]
    if kind == "rmsnorm":
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + NORM_EPS) * w
    return F.layer_norm(x, (C,), w, p.get(name + ".bias"), NORM_EPS)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope_inv_freq(v):
    """inv_freq and the attention factor, as HF transformers computes them
    (modeling_rope_utils: default, and _compute_yarn_parameters)."""
    base, dim = 10000.0, HS
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    rs = v.get("rope_scaling")
    if not rs:
        return 1.0 / pos_freqs, 1.0
    assert rs["type"] == "yarn"
    factor = rs["factor"]

    def correction_dim(num_rotations):
        return (dim * math.log(rs["original_context"] / (num_rotations * 2 * math.pi))) / (
            2 * math.log(base))

    low = max(math.floor(correction_dim(rs["beta_fast"])), 0)
    high = min(math.ceil(correction_dim(rs["beta_slow"])), dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low), 0, 1)
    extrapolation_factor = 1 - ramp
    inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation_factor) + (
        1.0 / pos_freqs) * extrapolation_factor
    return inv_freq, 0.1 * math.log(factor) + 1.0


def performer_om(v):
    """The variant's random features [m, HS]: Gaussian rows from its seed."""
    g = torch.Generator().manual_seed(1000 + v["seed"])
    return torch.randn(v["performer"], HS, generator=g)


def sp_blocks(v):
    """Random key blocks per query block ([nb][R], -1 = none): drawn here from
    the variant's seed with numpy (any draw will do; the fixture stores it
    and the test gives it to the model)."""
    sp, Tn = v["sparse"], v.get("T", T)
    nb, R = (Tn + sp["block"] - 1) // sp["block"], sp["random"]
    rs = np.random.RandomState(v["seed"])
    out = []
    for qb in range(nb):
        c = sorted(rs.choice(qb + 1, size=min(R, qb + 1), replace=False).tolist())
        out.append(c + [-1] * (R - len(c)))
    return out


def doc_ids(v):
    """[B, T] document ids from the cut positions of each row."""
    d = torch.zeros(B, T, dtype=torch.int64)
    for b, cuts in enumerate(v["docs"]):
        for c in cuts:
            d[b, c:] += 1
    return d + 10 * torch.arange(B).view(B, 1)  # ids only have to rise along a row


def positions(v, Tn):
    """[B, T] positions: t, or restarting at each packed document's first token."""
    if not v.get("docs"):
        return torch.arange(Tn).view(1, Tn).expand(B, Tn)
    d = doc_ids(v)
    pos = torch.zeros(B, Tn, dtype=torch.int64)
    for b in range(B):
        for t in range(1, Tn):
            pos[b, t] = 0 if d[b, t] != d[b, t - 1] else pos[b, t - 1] + 1
    return pos


def rope(v, x):  # x [B, NH, T, HS]
    inv_freq, attention_factor = rope_inv_freq(v)
    t = positions(v, x.shape[2]).double()  # [B, T]
    freqs = t.unsqueeze(-1) * inv_freq  # [B, T, HS/2]
    emb = torch.cat((freqs, freqs), dim=-1).unsqueeze(1)  # [B, 1, T, HS]
    cos, sin = (emb.cos() * attention_factor).float(), (emb.sin() * attention_factor).float()
    return x * cos + rotate_half(x) * sin


def sinusoid(Tn):
    pe = torch.zeros(Tn, C, dtype=torch.float64)
    pos = torch.arange(Tn, dtype=torch.float64)[:, None]
    div = torch.pow(10000.0, torch.arange(0, C, 2, dtype=torch.float64) / C)
    pe[:, 0::2] = torch.sin(pos / div)
    pe[:, 1::2] = torch.cos(pos / div)
    return pe.float()


def alibi_slopes(n_heads):
    """The ALiBi paper's get_slopes: 2^(-8 (h+1) / n) for the largest power
    of two n <= n_heads, then every other slope of the 2n sequence."""
    n = 2 ** int(math.floor(math.log2(n_heads)))
    s = [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]
    s += [2.0 ** (-8.0 * (h + 1) / (2 * n)) for h in range(0, 2 * n, 2)][: n_heads - n]
    return torch.tensor(s, dtype=torch.float32)


def t5_bucket(relative_position, bidirectional, num_buckets, max_distance):
    """transformers' T5Attention._relative_position_bucket (key - query)."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    large = max_exact + (torch.log(relative_position.float() / max_exact)
                         / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return relative_buckets + torch.where(is_small, relative_position, large)


def attention(v, x, p, pre):
    Bn, Tn, _ = x.shape
    qkv = st16(v, F.linear(x, wq(v, p[pre + "attn.qkv.weight"]), p.get(pre + "attn.qkv.bias")))
    KVH = kv_heads(v)
    q, k, val = qkv.split([C, KVH * HS, KVH * HS], dim=2)
    q = q.view(Bn, Tn, NH, HS).transpose(1, 2)
    k = k.view(Bn, Tn, KVH, HS).transpose(1, 2)
    val = val.view(Bn, Tn, KVH, HS).transpose(1, 2)
    if v["pos"] == "rope":
        q, k = rope(v, q), rope(v, k)
    # grouped-query attention: query head h reads K/V head h // (NH // KVH)
    k = k.repeat_interleave(NH // KVH, dim=1)
    val = val.repeat_interleave(NH // KVH, dim=1)
    if v.get("performer"):  # FAVOR+ with the fixture's features, causal
        om = performer_om(v)
        s4 = HS ** -0.25
        phi = lambda x: torch.exp((x * s4) @ om.t() - ((x * s4) ** 2).sum(-1, keepdim=True) / 2
                                  ) / math.sqrt(om.shape[0])
        a = phi(q) @ phi(k).transpose(-2, -1)  # [B, NH, T, T]
        a = a * torch.ones(Tn, Tn).tril()
        y = (a @ val) / a.sum(-1, keepdim=True)
        y = y.transpose(1, 2).contiguous().view(Bn, Tn, C)
        return F.linear(y, wq(v, p[pre + "attn.proj.weight"]), p.get(pre + "attn.proj.bias"))
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HS))
    if v["pos"] == "relative":  # Shaw: q_t . r_clamp(s - t) inside the score
        kk = v["rel_k"]
        ti = torch.arange(Tn).view(Tn, 1)
        si = torch.arange(Tn).view(1, Tn)
        rg = p[pre + "attn.rel_k"][(si - ti).clamp(-kk, kk) + kk]  # [T, T, HS]
        att = att + torch.einsum("bhtd,tsd->bhts", q, rg) * (1.0 / math.sqrt(HS))
    i = torch.arange(Tn).view(Tn, 1)
    j = torch.arange(Tn).view(1, Tn)
    if v["pos"] == "alibi":
        att = att - alibi_slopes(NH).view(1, NH, 1, 1) * (i - j).abs().float()
    if v["pos"] == "t5":
        bucket = t5_bucket(j - i, False, v["t5"][0], v["t5"][1])  # [T, T]
        att = att + p["rel_bias"][:, bucket].unsqueeze(0)
    mask = j <= i
    if v.get("window"):
        band = j > i - v["window"]  # the band: the `window` most recent keys
        sp = v.get("sparse")
        if sp:  # beside the band: global keys, every stride-th key back, random blocks
            bs = sp["block"]
            rnd = torch.zeros(Tn, Tn, dtype=torch.bool)
            for t in range(Tn):
                for kb in sp_blocks(v)[t // bs]:
                    if kb >= 0:
                        rnd[t, kb * bs:(kb + 1) * bs] = True
            band = band | (j < sp["global"]) | ((i - j) % sp["stride"] == 0) | rnd
        mask = mask & band
    if v.get("docs"):  # packed documents: each sees only its own
        d = doc_ids(v)
        mask = mask.view(1, 1, Tn, Tn) & (d.view(Bn, 1, Tn, 1) == d.view(Bn, 1, 1, Tn))
    att = att.masked_fill(~mask, float("-inf"))
    if v.get("half"):  # clformer's fused attention over 16-bit storage
        y = Bf16Both.apply(FusedAttention.apply(att, val).transpose(1, 2).contiguous().view(Bn, Tn, C))
    else:
        att = F.softmax(att, dim=-1)
        y = (att @ val).transpose(1, 2).contiguous().view(Bn, Tn, C)
    return F.linear(y, wq(v, p[pre + "attn.proj.weight"]), p.get(pre + "attn.proj.bias"))


def bf16(x):
    """Stored in bfloat16 (round to nearest even), the gradient unchanged."""
    return x + (x.bfloat16().float() - x).detach()


class Bf16Both(torch.autograd.Function):
    """A tensor stored in bfloat16 whose gradient is stored in bfloat16 too:
    clformer's attention q, k, v and output and their gradients."""

    @staticmethod
    def forward(ctx, x):
        return x.bfloat16().float()

    @staticmethod
    def backward(ctx, g):
        return g.bfloat16().float()


class FusedAttention(torch.autograd.Function):
    """softmax(scores) v as clformer's fused kernels differentiate it with a
    16-bit output: the backward takes D = dy . y from the output as stored
    (bfloat16), where autograd's softmax backward would use the exact one:
    ds = p (dy v^T - D)."""

    @staticmethod
    def forward(ctx, scores, val):
        p = F.softmax(scores, dim=-1)
        y = p @ val
        ctx.save_for_backward(p, val, y.bfloat16().float())
        return y

    @staticmethod
    def backward(ctx, dy):
        p, val, y16 = ctx.saved_tensors
        dp = dy @ val.transpose(-2, -1)
        D = (dy * y16).sum(-1, keepdim=True)
        return p * (dp - D), p.transpose(-2, -1) @ dy


def st16(v, x):
    return Bf16Both.apply(x) if v.get("half") else x


def wq(v, w):
    """A weight as the products read it: the optimizer's bf16 copy of the
    float32 master (rounded to nearest even) under the bf16 training
    model, its gradient going to the master unchanged; float32 otherwise.
    Biases, norms and the embedding lookup read the float32 masters."""
    return bf16(w) if v.get("half") else w


class GeluBf16(torch.autograd.Function):
    """clformer's bf16 FFN hidden layer: GELU of the float32 pre-activation h
    stored in bf16; backward takes GELU's derivative at h as stored (bf16)
    and stores the gradient of h in bf16."""

    @staticmethod
    def forward(ctx, h):
        ctx.save_for_backward(h.bfloat16().float())
        return F.gelu(h).bfloat16().float()

    @staticmethod
    def backward(ctx, g):
        (h,) = ctx.saved_tensors
        cdf = 0.5 * (1.0 + torch.erf(h * (1.0 / math.sqrt(2.0))))
        pdf = torch.exp(-0.5 * h * h) * (1.0 / math.sqrt(2.0 * math.pi))
        return (g * (cdf + h * pdf)).bfloat16().float()


def ffn(v, x, p, pre):
    h = F.linear(x, wq(v, p[pre + "ffn.fc.weight"]), p.get(pre + "ffn.fc.bias"))
    if v.get("half"):
        assert v["act"] == "gelu"
        h = GeluBf16.apply(h)
    elif v["act"] == "swiglu":
        gate, up = h.split(v["hidden"], dim=-1)
        h = F.silu(gate) * up
    elif v["act"] == "gelu":
        h = F.gelu(h)  # exact erf form, as nn.GELU()
    else:
        h = F.relu(h)
    return F.linear(h, wq(v, p[pre + "ffn.proj.weight"]), p.get(pre + "ffn.proj.bias"))


def forward(v, p, x, y):
    Bn, Tn = x.shape
    h = p["wte"][x] * (math.sqrt(C) if v["emb_scale"] else 1.0)
    if v["pos"] == "learned":
        h = h + p["wpe"][positions(v, Tn)]
    elif v["pos"] == "sinusoidal":
        h = h + sinusoid(Tn)
    for l in range(L):
        pre = f"blocks.{l}."
        if v["placement"] == "pre":
            st = bf16 if v.get("half") else (lambda t: t)  # the norm outputs' storage
            h = h + attention(v, st(norm_fwd(v, v["norm"], h, p, pre + "ln1")), p, pre)
            h = h + ffn(v, st(norm_fwd(v, v["norm"], h, p, pre + "ln2")), p, pre)
        else:
            h = norm_fwd(v, v["norm"], h + attention(v, h, p, pre), p, pre + "ln1")
            h = norm_fwd(v, v["norm"], h + ffn(v, h, p, pre), p, pre + "ln2")
    if v["final_norm"] != "none":
        h = norm_fwd(v, v["final_norm"], h, p, "ln_f")
    w_out = p["wte"] if v["tied"] else p["lm_head.weight"]
    logits = F.linear(h, wq(v, w_out))
    loss = F.cross_entropy(logits.view(-1, V), y.view(-1), ignore_index=-1,
                           label_smoothing=v["label_smoothing"])
    return logits, loss


def batch(v, g):
    x = torch.randint(0, V, (B, v.get("T", T)), generator=g)
    y = torch.randint(0, V, (B, v.get("T", T)), generator=g)
    for (bi, ti) in v["ignore"]:
        y[bi, ti] = -1
    if v.get("docs"):  # a document's last target is the next document's: ignored
        d = doc_ids(v)
        y[:, :-1][d[:, 1:] != d[:, :-1]] = -1
    return x, y


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


def make_fixture(name, v):
    torch.manual_seed(v["seed"])
    g = torch.Generator().manual_seed(v["seed"])
    p = make_params(v, g)
    x, y = batch(v, g)
    out = {"x": x.numpy().astype(np.int32), "y": y.numpy().astype(np.int32)}
    if v.get("docs"):
        out["doc"] = doc_ids(v).numpy().astype(np.int32)
    if v.get("sparse"):
        out["random_blocks"] = np.array(sp_blocks(v), dtype=np.int32)
    if v.get("performer"):
        out["performer_om"] = performer_om(v).numpy().astype(np.float32)
    for k, t in p.items():
        out["param." + k] = t.detach().numpy().copy()

    if v.get("precision") == "bf16":
        with torch.no_grad():
            out["logits_f32"] = forward(v, p, x, y)[0].numpy()
        v = dict(v, half=True)  # training: clformer's bf16 storage from here on
    logits, loss = forward(v, p, x, y)
    loss.backward()
    out["logits"] = logits.detach().numpy()
    out["loss"] = np.array([loss.item()], dtype=np.float32)
    for k, t in p.items():
        out["grad." + k] = t.grad.detach().numpy().copy()
        t.grad = None

    decay = [t for k, t in p.items() if t.dim() == 2]
    nodecay = [t for k, t in p.items() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=EPS)
    lrs, losses, gnorms = [], [], []
    for it in range(STEPS):
        bx, by = x, y  # one batch, over-fitted: the losses move measurably
        lr = get_lr(it)
        for group in opt.param_groups:
            group["lr"] = lr
        _, l = forward(v, p, bx, by)
        opt.zero_grad(set_to_none=True)
        l.backward()
        gn = torch.nn.utils.clip_grad_norm_(list(p.values()), v["grad_clip"])
        opt.step()
        lrs.append(lr)
        losses.append(l.item())
        gnorms.append(gn.item())
    with torch.no_grad():
        _, fl = forward(v, p, x, y)
    out["train.lr"] = np.array(lrs, dtype=np.float32)
    out["train.loss"] = np.array(losses, dtype=np.float32)
    out["train.gnorm"] = np.array(gnorms, dtype=np.float32)
    out["final_loss"] = np.array([fl.item()], dtype=np.float32)
    for k, t in p.items():
        out["final." + k] = t.detach().numpy().copy()

    meta = {"format": "clformer-parity", "version": "1", "variant": name,
            "config": config_yaml(v), "torch": torch.__version__}
    os.makedirs(OUT_DIR, exist_ok=True)
    path = os.path.join(OUT_DIR, name + ".safetensors")
    write_safetensors(path, out, meta)
    print(f"{path}: {os.path.getsize(path)} bytes, loss {loss.item():.6f}, "
          f"losses {[round(a, 5) for a in losses]}, gnorms {[round(a, 4) for a in gnorms]}")


if __name__ == "__main__":
    import sys
    torch.set_num_threads(1)
    # optional variant names: only those (the others' files stay as they are)
    for name, v in VARIANTS.items():
        if len(sys.argv) < 2 or name in sys.argv[1:]:
            make_fixture(name, v)
