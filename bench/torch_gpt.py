#!/usr/bin/python3
"""torch_gpt.py - the PyTorch peer of bench/gpt: the same GPT, batch and
thread count, timed the same way.

What it measures (each a median over timed repetitions, after warm-up):
  train    tokens/s of one optimizer step: forward + loss + backward +
           gradient clipping + AdamW, B*T tokens per step; and the peak of
           the process's resident memory during the train steps above its
           level before them (a thread reads /proc/self/statm every
           millisecond): the PyTorch side of bench/memory.sh. train.recompute
           (none, attention, block; --set) wraps each block, or each block's
           attention sublayer, in torch.utils.checkpoint; train.precision bf16
           runs the forward under torch.autocast("cpu", bfloat16) (matrix
           products in bf16, what they save for backward in bf16; the
           master weights, gradients and AdamW stay float32). --compile
           runs train and forward through torch.compile(model).
  forward  tokens/s of an eval forward with the loss (no_grad, eval mode;
           under bf16 autocast with train.precision bf16).
  sample   tokens/s of greedy decoding, batch 1, with a KV cache: a short
           prompt (untimed prefill), then one position per step up to the
           context, the argmax read back each step (as bench/gpt reads its
           logits back). Also, unless --no-nocache, the same without a cache:
           a full forward over the sequence so far per token (nanoGPT's
           generate()).

Design: the model is built from the same YAML file as bench/gpt
(bench/models/gpt-<name>.yaml), read with PyYAML; every key the network
needs must be present (the bench files spell all of them out). The network
is nanoGPT's (model.py): LayerNorm with optional bias, fused qkv Linear,
causal attention through F.scaled_dot_product_attention where PyTorch has
it (2.0 on, as nanoGPT does; --attention explicit for the softmax form,
the only one in 1.13), exact GELU, optional tied head, GPT-2
initialisation, AdamW with weight decay on 2-D tensors only.

Not here: RoPE, RMSNorm, SwiGLU, dropout and post-norm (the bench models do
not use them; the script refuses configs that do), data loading (random
tokens from a fixed seed), learning-rate schedules (constant lr).

Usage: torch_gpt.py [--model cpu|wide | --config FILE] [--steps N]
                    [--threads N] [--json] [--only train,forward,sample]
                    [--compile] [--attention auto|sdpa|explicit]
                    [--set train.precision=bf16]
"""
import argparse
import json
import math
import os
import statistics
import sys
import threading
import time

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torch.utils.checkpoint
    import yaml
except ImportError as e:  # the caller (run_all.sh) reports the peer as missing
    sys.stderr.write("torch_gpt.py: %s (on Debian: apt-get install python3-torch "
                     "python3-numpy python3-yaml)\n" % e)
    sys.exit(3)

HERE = os.path.dirname(os.path.abspath(__file__))

# Attention through F.scaled_dot_product_attention where PyTorch has it (2.0
# on), as nanoGPT's model.py does ("flash"): the form a user of a current
# PyTorch runs, and its fused CPU kernel. main() may turn it off
# (--attention explicit); PyTorch 1.13 has only the explicit form.
SDPA = hasattr(F, "scaled_dot_product_attention")


# ---- config -------------------------------------------------------------------------

def need(d, path):
    cur = d
    for k in path.split("."):
        if not isinstance(cur, dict) or k not in cur:
            raise SystemExit("torch_gpt.py: the model file lacks %s (the bench files spell "
                             "out every key)" % path)
        cur = cur[k]
    return cur


def apply_set(doc, kv):
    """--set model.context=1024: the key's path (maps created as needed) gets
    the value parsed as YAML, as clformer's --set does."""
    key, sep, val = kv.partition("=")
    if not sep or not key:
        raise SystemExit("torch_gpt.py: --set %s: expected KEY=VALUE" % kv)
    cur = doc
    parts = key.split(".")
    for k in parts[:-1]:
        cur = cur.setdefault(k, {})
        if not isinstance(cur, dict):
            raise SystemExit("torch_gpt.py: --set %s: %s is not a mapping" % (kv, k))
    cur[parts[-1]] = yaml.safe_load(val)


def load_spec(path, sets=()):
    with open(path) as f:
        doc = yaml.safe_load(f)
    for kv in sets:
        apply_set(doc, kv)
    s = {}
    tok = need(doc, "model.vocab.tokenizer")
    size = int(need(doc, "model.vocab.size"))
    if tok == "byte":
        s["V"] = max(256, size)
    elif size > 0:
        s["V"] = size
    else:
        raise SystemExit("torch_gpt.py: vocab.size must be set for tokenizer %s" % tok)
    s["T"] = int(need(doc, "model.context"))
    s["C"] = int(need(doc, "model.embedding.dim"))
    s["L"] = int(need(doc, "model.blocks.repeat"))
    s["NH"] = int(need(doc, "model.blocks.attention.heads"))
    s["H"] = int(need(doc, "model.blocks.ffn.hidden")) or 4 * s["C"]
    s["attn_bias"] = bool(need(doc, "model.blocks.attention.bias"))
    s["ffn_bias"] = bool(need(doc, "model.blocks.ffn.bias"))
    s["norm_bias"] = bool(need(doc, "model.blocks.norm.bias"))
    s["eps"] = float(need(doc, "model.blocks.norm.eps"))
    s["act"] = need(doc, "model.blocks.ffn.activation")
    s["tied"] = bool(need(doc, "model.head.tie_embedding"))
    s["B"] = int(need(doc, "train.batch"))
    opt = need(doc, "train.optimizer")
    s["lr"] = float(opt["lr"])
    s["betas"] = tuple(float(b) for b in opt["betas"])
    s["adam_eps"] = float(opt["eps"])
    s["wd"] = float(opt["weight_decay"])
    s["opt"] = opt["type"]
    s["clip"] = float(need(doc, "train.grad_clip"))
    s["seed"] = int(need(doc, "train.seed"))
    s["recompute"] = doc.get("train", {}).get("recompute", "none")
    s["precision"] = doc.get("train", {}).get("precision", "fp32")
    checks = [
        (need(doc, "model.kind") == "decoder", "kind: decoder"),
        (need(doc, "model.positional.type") == "learned", "positional: learned"),
        (need(doc, "model.blocks.norm.type") == "layernorm", "norm: layernorm"),
        (need(doc, "model.blocks.norm.placement") == "pre", "norm placement: pre"),
        (need(doc, "model.final_norm.type") == "layernorm", "final_norm: layernorm"),
        (not need(doc, "model.embedding.scale"), "embedding.scale: false"),
        (s["act"] in ("gelu", "gelu_tanh", "relu"), "activation gelu, gelu_tanh or relu"),
        (s["opt"] == "adamw", "optimizer adamw"),
        (s["recompute"] in ("none", "attention", "block"), "recompute none, attention or block"),
        (s["precision"] in ("fp32", "bf16"),
         "precision fp32 or bf16 (torch.autocast on a CPU has no float16 in PyTorch 1.13)"),
        (float(need(doc, "model.blocks.attention.dropout")) == 0.0 and
         float(need(doc, "model.blocks.ffn.dropout")) == 0.0 and
         float(need(doc, "model.blocks.dropout")) == 0.0 and
         float(need(doc, "model.embedding.dropout")) == 0.0, "no dropout"),
    ]
    for ok, what in checks:
        if not ok:
            raise SystemExit("torch_gpt.py: the PyTorch peer only builds %s" % what)
    if s["C"] % s["NH"]:
        raise SystemExit("torch_gpt.py: heads do not divide dim")
    return s


# ---- the model (nanoGPT's, for PyTorch 1.13) ------------------------------------------

class LayerNorm(nn.Module):
    def __init__(self, C, bias, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))
        self.bias = nn.Parameter(torch.zeros(C)) if bias else None
        self.eps = eps

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)


class Attention(nn.Module):
    def __init__(self, s):
        super().__init__()
        C = s["C"]
        self.NH = s["NH"]
        self.qkv = nn.Linear(C, 3 * C, bias=s["attn_bias"])
        self.proj = nn.Linear(C, C, bias=s["attn_bias"])
        T = s["T"]
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        B, T, C = x.shape
        NH, HS = self.NH, C // self.NH
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, NH, HS).transpose(1, 2)
        k = k.view(B, T, NH, HS).transpose(1, 2)
        v = v.view(B, T, NH, HS).transpose(1, 2)
        if SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HS))
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)

    def decode(self, x, pos, kc, vc):
        """x [1, 1, C] at position pos; kc, vc [1, NH, T, HS] caches."""
        C = x.shape[-1]
        NH, HS = self.NH, C // self.NH
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(1, NH, 1, HS)
        kc[:, :, pos] = k.view(1, NH, HS)
        vc[:, :, pos] = v.view(1, NH, HS)
        if SDPA:
            y = F.scaled_dot_product_attention(q, kc[:, :, :pos + 1], vc[:, :, :pos + 1])
        else:
            att = (q @ kc[:, :, :pos + 1].transpose(-2, -1)) * (1.0 / math.sqrt(HS))
            att = F.softmax(att, dim=-1)
            y = att @ vc[:, :, :pos + 1]
        y = y.view(1, 1, C)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.ln1 = LayerNorm(s["C"], s["norm_bias"], s["eps"])
        self.attn = Attention(s)
        self.ln2 = LayerNorm(s["C"], s["norm_bias"], s["eps"])
        self.fc = nn.Linear(s["C"], s["H"], bias=s["ffn_bias"])
        self.act = {"gelu": nn.GELU(), "gelu_tanh": nn.GELU(approximate="tanh"),
                    "relu": nn.ReLU()}[s["act"]]
        self.fc_proj = nn.Linear(s["H"], s["C"], bias=s["ffn_bias"])

    def forward(self, x, recompute_attn=False):
        if recompute_attn:
            x = x + torch.utils.checkpoint.checkpoint(lambda y: self.attn(self.ln1(y)), x)
        else:
            x = x + self.attn(self.ln1(x))
        return x + self.fc_proj(self.act(self.fc(self.ln2(x))))

    def decode(self, x, pos, kc, vc):
        x = x + self.attn.decode(self.ln1(x), pos, kc, vc)
        return x + self.fc_proj(self.act(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.s = s
        self.wte = nn.Embedding(s["V"], s["C"])
        self.wpe = nn.Embedding(s["T"], s["C"])
        self.blocks = nn.ModuleList([Block(s) for _ in range(s["L"])])
        self.ln_f = LayerNorm(s["C"], s["norm_bias"], s["eps"])
        self.lm_head = nn.Linear(s["C"], s["V"], bias=False)
        if s["tied"]:
            self.lm_head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02
                if name.endswith("attn.proj.weight") or name.endswith("fc_proj.weight"):
                    std = 0.02 / math.sqrt(2 * s["L"])
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        rc = self.s["recompute"] if self.training else "none"
        for b in self.blocks:
            if rc == "block":
                x = torch.utils.checkpoint.checkpoint(b, x)
            else:
                x = b(x, rc == "attention")
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def new_cache(self):
        s = self.s
        HS = s["C"] // s["NH"]
        return [(torch.zeros(1, s["NH"], s["T"], HS), torch.zeros(1, s["NH"], s["T"], HS))
                for _ in range(s["L"])]

    def decode(self, tok, pos, cache):
        """One token (python int) at position pos -> logits [V]."""
        x = self.wte.weight[tok].view(1, 1, -1) + self.wpe.weight[pos].view(1, 1, -1)
        for b, (kc, vc) in zip(self.blocks, cache):
            x = b.decode(x, pos, kc, vc)
        return self.lm_head(self.ln_f(x)).view(-1)


def make_optimizer(model, s, foreach):
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    nodecay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": s["wd"]},
              {"params": nodecay, "weight_decay": 0.0}]
    kw = {}
    if foreach is not None:
        kw["foreach"] = foreach
    return torch.optim.AdamW(groups, lr=s["lr"], betas=s["betas"], eps=s["adam_eps"], **kw)


# ---- timing ------------------------------------------------------------------------------

def batches(s, n, seed):
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(n):
        x = torch.from_numpy(rng.randint(0, s["V"], size=(s["B"], s["T"])).astype(np.int64))
        y = torch.from_numpy(rng.randint(0, s["V"], size=(s["B"], s["T"])).astype(np.int64))
        out.append((x, y))
    return out


class RssPeak:
    """The most resident memory (bytes) /proc/self/statm showed while
    running, polled every millisecond by a thread (PyTorch's kernels release
    the GIL, so the poller runs during them)."""

    def __init__(self):
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.base = self.peak = self.now()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def now(self):
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page

    def run(self):
        while not self.stop.wait(0.001):
            self.peak = max(self.peak, self.now())

    def finish(self):
        self.stop.set()
        self.thread.join()
        self.peak = max(self.peak, self.now())
        return self.peak - self.base


def bench_train(model, s, data, warmup, steps, foreach):
    """(median step seconds, last loss, peak resident growth in bytes)"""
    opt = make_optimizer(model, s, foreach)
    model.train()
    times = []
    loss_v = float("nan")
    rss = RssPeak()
    for i in range(warmup + steps):
        x, y = data[i % len(data)]
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=s["precision"] == "bf16"):
            _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if s["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), s["clip"])
        opt.step()
        loss_v = loss.item()
        t1 = time.perf_counter()
        if i >= warmup:
            times.append(t1 - t0)
    return statistics.median(times), loss_v, rss.finish()


def bench_forward(model, s, data, warmup, steps):
    model.eval()
    times = []
    with torch.no_grad():
        for i in range(warmup + steps):
            x, y = data[i % len(data)]
            t0 = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=s["precision"] == "bf16"):
                _, loss = model(x, y)
            loss.item()
            t1 = time.perf_counter()
            if i >= warmup:
                times.append(t1 - t0)
    return statistics.median(times)


def bench_sample(model, s, prompt_len, rounds, cache):
    """Median tokens/s over rounds of greedy decoding from prompt_len to T."""
    model.eval()
    T = s["T"]
    rng = np.random.RandomState(s["seed"] + 7)
    prompt = [int(t) for t in rng.randint(0, s["V"], size=prompt_len)]
    rates = []
    with torch.no_grad():
        for r in range(rounds + 1):  # round 0 is the warm-up
            seq = list(prompt)
            if cache:
                kv = model.new_cache()
                for p in range(prompt_len - 1):  # prefill (untimed)
                    model.decode(seq[p], p, kv)
                t0 = time.perf_counter()
                for pos in range(prompt_len - 1, T):
                    logits = model.decode(seq[pos], pos, kv)
                    seq.append(int(torch.argmax(logits).item()))
                t1 = time.perf_counter()
                n = T - (prompt_len - 1)
            else:
                t0 = time.perf_counter()
                n = 0
                while len(seq) <= T:
                    idx = torch.tensor([seq[-T:]], dtype=torch.long)
                    logits, _ = model(idx)
                    seq.append(int(torch.argmax(logits[0, -1]).item()))
                    n += 1
                t1 = time.perf_counter()
            if r > 0:
                rates.append(n / (t1 - t0))
    return statistics.median(rates)


def main():
    ap = argparse.ArgumentParser(description="PyTorch peer of bench/gpt")
    ap.add_argument("--model", default="cpu", help="cpu | wide: bench/models/gpt-<name>.yaml")
    ap.add_argument("--config", help="a model YAML file instead of --model")
    ap.add_argument("--steps", type=int, default=10, help="timed train/forward steps")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--sample-rounds", type=int, default=5)
    ap.add_argument("--prompt", type=int, default=8, help="prompt length for sampling")
    ap.add_argument("--threads", type=int, default=0, help="0 = all cores (os.cpu_count())")
    ap.add_argument("--foreach", choices=["default", "on", "off"], default="default",
                    help="AdamW's foreach implementation (default: PyTorch's choice)")
    ap.add_argument("--only", default="train,forward,sample,nocache",
                    help="comma-separated subset of train,forward,sample,nocache")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("--attention", choices=["auto", "sdpa", "explicit"], default="auto",
                    help="auto: F.scaled_dot_product_attention where PyTorch has it (as "
                         "nanoGPT), else the explicit softmax")
    ap.add_argument("--compile", action="store_true",
                    help="train and forward through torch.compile(model) (PyTorch 2; its "
                         "compilation is in the warm-up steps; sampling stays eager)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config key, as clformer --set (repeatable)")
    a = ap.parse_args()
    global SDPA
    if a.attention == "sdpa" and not SDPA:
        sys.exit("torch_gpt.py: --attention sdpa needs PyTorch 2 (this is %s)" % torch.__version__)
    if a.attention == "explicit":
        SDPA = False

    path = a.config or os.path.join(HERE, "models", "gpt-%s.yaml" % a.model)
    s = load_spec(path, a.set)
    threads = a.threads if a.threads > 0 else (os.cpu_count() or 1)
    torch.set_num_threads(threads)
    torch.manual_seed(s["seed"])
    model = GPT(s)
    n_params = sum(p.numel() for p in model.parameters())
    eager = model
    if a.compile:
        if not hasattr(torch, "compile"):
            sys.exit("torch_gpt.py: --compile needs PyTorch 2 (this is %s)" % torch.__version__)
        model = torch.compile(model)
    only = set(a.only.split(","))
    foreach = {"default": None, "on": True, "off": False}[a.foreach]
    prompt_len = max(1, min(a.prompt, s["T"] - 1))
    BT = s["B"] * s["T"]
    res = {"impl": "pytorch", "version": torch.__version__, "model": a.model,
           "compiled": a.compile, "attention": "sdpa" if SDPA else "explicit",
           "config": os.path.relpath(path), "threads": torch.get_num_threads(),
           "params": n_params, "B": s["B"], "T": s["T"], "V": s["V"]}
    data = batches(s, 4, s["seed"])
    if "train" in only:
        t, loss, grown = bench_train(model, s, data, a.warmup, a.steps, foreach)
        res.update(train_step_ms=t * 1e3, train_tok_s=BT / t, train_loss=loss,
                   train_peak_rss_growth_bytes=grown, recompute=s["recompute"],
                   precision=s["precision"])
    if "forward" in only:
        t = bench_forward(model, s, data, a.warmup, a.steps)
        res.update(forward_ms=t * 1e3, forward_tok_s=BT / t)
    if "sample" in only:
        res["sample_tok_s"] = bench_sample(eager, s, prompt_len, a.sample_rounds, True)
        res["sample_tokens"] = s["T"] - (prompt_len - 1)
    if "nocache" in only:
        res["sample_nocache_tok_s"] = bench_sample(eager, s, prompt_len,
                                                   max(1, a.sample_rounds // 2), False)
    if a.json:
        print(json.dumps(res))
        return
    print("PyTorch %s, model %s (%s): %d parameters, B=%d T=%d V=%d, %d threads" % (
        res["version"], a.model, res["config"], n_params, s["B"], s["T"], s["V"],
        res["threads"]))
    for key, label, ms in (("train_tok_s", "train (fwd+bwd+clip+AdamW)", "train_step_ms"),
                           ("forward_tok_s", "forward (eval, with loss)", "forward_ms"),
                           ("sample_tok_s", "sample (KV cache, batch 1)", None),
                           ("sample_nocache_tok_s", "sample (no cache, batch 1)", None)):
        if key in res:
            extra = " (%.1f ms/step)" % res[ms] if ms else ""
            print("  %-28s %10.0f tokens/s%s" % (label, res[key], extra))


if __name__ == "__main__":
    main()
