#!/usr/bin/env python3
"""torch_recipe.py - nanoGPT's character-level Shakespeare CPU recipe in PyTorch,
scored the way `clformer eval` scores a checkpoint, so the two can be compared
seed for seed on the same machine.

Recipe (nanoGPT README, CPU): 4 layers, 4 heads, 128 dims, context 64, batch 12,
2000 iterations, AdamW lr 1e-3 (betas 0.9/0.99, wd 0.1 on 2-D parameters),
warmup 100 then cosine to 1e-4 (nanoGPT's get_lr), grad clip 1.0, no dropout,
no biases, tied head. The model and optimizer come from bench/torch_gpt.py
(nanoGPT's model for torch 1.13), built from bench/models/gpt-cpu.yaml (the
same model with every key spelled out); the schedule comes from
config/models/gpt-shakespeare-cpu.yaml.

Data: the first 90% of the characters train, the last 10% validate; batches
are nanoGPT's `torch.randint(len(data) - block_size, (batch_size,))` windows
under torch.manual_seed(seed). Score: the whole validation split cut into
non-overlapping windows of the context, every target once (model/data/dataset.h's
rule), mean cross-entropy over all targets.

    /usr/bin/python3 bench/torch_recipe.py --seed 1337 [--threads 2]

--compile trains through torch.compile(model) (PyTorch 2; its compilation is
counted in train_seconds, as a user of it pays it; the evaluation stays
eager). --device cuda runs it on a GPU (scripts/gpu-first-light.sh: the GPU recipe's
model, bench/models/gpt-gpu.yaml, beside clformer's); train_seconds then
waits for the device before it is read.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_gpt  # noqa: E402


def get_lr(it, lr, min_lr, warmup, decay_iters):
    # nanoGPT train.py (master): linear warmup over (it+1)/(warmup+1), then cosine.
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay_iters:
        return min_lr
    ratio = (it - warmup) / (decay_iters - warmup)
    coeff = 0.5 * (1.0 + math.cos(math.pi * ratio))
    return min_lr + coeff * (lr - min_lr)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=os.path.join(root, "config/models/gpt-shakespeare-cpu.yaml"))
    ap.add_argument("--model", default=os.path.join(here, "models/gpt-cpu.yaml"))
    ap.add_argument("--data", default=os.path.join(root, "data/tinyshakespeare.txt"))
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="cpu | cuda")
    ap.add_argument("--compile", action="store_true", help="train through torch.compile(model)")
    a = ap.parse_args()
    dev = torch.device(a.device)
    if a.threads > 0:
        torch.set_num_threads(a.threads)

    with open(a.data, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n = int(0.9 * len(data))
    train, val = data[:n], data[n:]

    import yaml
    with open(a.config) as f:
        doc = yaml.safe_load(f)
    s = torch_gpt.load_spec(a.model)
    if s["V"] != len(chars):
        raise SystemExit("torch_recipe.py: %s has vocabulary %d, the text has %d characters"
                         % (a.model, s["V"], len(chars)))
    sched = doc["train"]["schedule"]
    lr, min_lr, warmup = s["lr"], float(sched["min_lr"]), int(sched["warmup"])

    torch.manual_seed(a.seed)
    model = torch_gpt.GPT(s).to(dev)
    opt = torch_gpt.make_optimizer(model, s, None)
    step_model = torch.compile(model) if a.compile else model
    B, T = s["B"], s["T"]
    t0 = time.time()
    for it in range(a.steps):
        for g in opt.param_groups:
            g["lr"] = get_lr(it, lr, min_lr, warmup, a.steps)
        ix = torch.randint(len(train) - T, (B,))
        x = torch.stack([train[i:i + T] for i in ix]).to(dev)
        y = torch.stack([train[i + 1:i + 1 + T] for i in ix]).to(dev)
        _, loss = step_model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), s["clip"])
        opt.step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    train_s = time.time() - t0

    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        nv = len(val)
        for w in range(0, nv - 1, T):
            ln = min(T, nv - 1 - w)
            x = val[w:w + ln].view(1, -1).to(dev)
            y = val[w + 1:w + 1 + ln].view(1, -1).to(dev)
            logits, _ = model(x)
            total += F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1),
                                     reduction="sum").item()
            count += ln
    print(json.dumps({"seed": a.seed, "val_loss": total / count, "tokens": count,
                      "steps": a.steps, "train_seconds": round(train_s, 3),
                      "ms_per_step": round(1e3 * train_s / max(a.steps, 1), 2),
                      "device": str(dev), "threads": torch.get_num_threads(),
                      "compiled": a.compile}))


if __name__ == "__main__":
    main()
