#!/usr/bin/env python3
"""torch_attention.py - PyTorch's causal self-attention forward + backward,
the peer of bench/attention.c (which runs it and prints the ratio).

    python3 bench/torch_attention.py --batch B --T T --heads NH --head-size HS
                                     [--reps N] [--threads N]

The layer is the textbook attention nanoGPT falls back to without flash
(q k^T / sqrt(HS), a causal mask, softmax, times v) on q, k, v sliced from
one [B, T, 3C] projection output, the output merged back to [B, T, C];
PyTorch 1.13 has no fused attention for CPUs. One warm-up round, then N
timed rounds; prints "ms <median>" (forward + backward of sum(y * dy)).
"""
import argparse
import os
import statistics
import time


def blas_core():
    """OpenBLAS 0.3.21 (Debian 12) does not know recent CPUs and falls back
    to its SSE3 kernels; name the core type from the CPU's flags, as
    bench/run_all.sh does, unless the caller chose one. Must run before
    torch (and its OpenBLAS) is loaded."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return
    if " avx512f" in flags:
        os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
    elif " avx2" in flags:
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"


blas_core()
import torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--T", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--head-size", type=int, required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    B, T, NH, HS = a.batch, a.T, a.heads, a.head_size
    C = NH * HS
    qkv = (torch.rand(B, T, 3 * C) - 0.5).requires_grad_(True)
    dy = torch.rand(B, T, C) - 0.5
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))

    def step():
        q, k, v = qkv.split(C, dim=2)
        q = q.view(B, T, NH, HS).transpose(1, 2)
        k = k.view(B, T, NH, HS).transpose(1, 2)
        v = v.view(B, T, NH, HS).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / HS ** 0.5)
        att = att.masked_fill(~mask, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        qkv.grad = None
        y.backward(dy)

    step()
    times = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    print("ms %.4f" % statistics.median(times))


if __name__ == "__main__":
    main()
