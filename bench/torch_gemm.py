#!/usr/bin/env python3
"""torch_gemm.py - float32 GEMM throughput of PyTorch (cuBLAS on a GPU, MKL or
OpenBLAS on a CPU) on the shapes bench/gemm takes, for the GPU visit's
report (scripts/gpu-first-light.sh) beside clformer's own table.

    python3 bench/torch_gemm.py --device cuda --shape NT,16384,384,1152 ...

A shape is OP,M,K,N[,BATCH] as bench/gemm reads it (OP: N or T for A, then
B). Each is timed as the median of --reps runs after a warm-up; TF32 is off,
so the product is float32 as clformer's. One JSON object per shape.
"""
import argparse
import json
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--shape", action="append", default=[])
    a = ap.parse_args()
    dev = torch.device(a.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    for sh in a.shape:
        f = sh.split(",")
        op, m, k, n = f[0], int(f[1]), int(f[2]), int(f[3])
        batch = int(f[4]) if len(f) > 4 else 1
        A = torch.randn(batch, *((k, m) if op[0] == "T" else (m, k)), device=dev)
        B = torch.randn(batch, *((n, k) if op[1] == "T" else (k, n)), device=dev)
        opa = A.transpose(1, 2) if op[0] == "T" else A
        opb = B.transpose(1, 2) if op[1] == "T" else B
        times = []
        for r in range(a.reps + 1):
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            torch.bmm(opa, opb)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            if r > 0:
                times.append(time.perf_counter() - t0)
        t = sorted(times)[len(times) // 2]
        print(json.dumps({"shape": sh, "seconds": t,
                          "gflops": round(2.0 * m * n * k * batch / t * 1e-9, 1),
                          "device": str(dev)}))


if __name__ == "__main__":
    main()
