#!/usr/bin/env python3
"""torch_gemm.py - float32 GEMM throughput of PyTorch (cuBLAS on a GPU, MKL or
OpenBLAS on a CPU) on the shapes bench/gemm takes: the peer column of
bench/run_all.sh's GEMM table and of the GPU visit's report
(scripts/gpu-first-light.sh).

    python3 bench/torch_gemm.py [--device cpu|cuda] [--threads N] [--reps N]
                                --shape OP,M,K,N[,BATCH] ...

A shape is OP,M,K,N[,BATCH] as bench/gemm reads it (OP: N or T for A, then
B). Timed as bench/gemm times: one warm-up, then the median of --reps
samples, each sample as many products back to back as fill 10 ms (at most
64), into a preallocated output (torch.mm / torch.bmm with out=, so the
output's allocation is not timed, as it is not on bench/gemm's side). TF32
is off, so the product is float32 as clformer's. One JSON object per shape,
then one naming the library: {"blas": "mkl" | "openblas" | ...}.
"""
import argparse
import json
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="0: PyTorch's default")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--shape", action="append", default=[])
    a = ap.parse_args()
    dev = torch.device(a.device)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    for sh in a.shape:
        f = sh.split(",")
        op, m, k, n = f[0], int(f[1]), int(f[2]), int(f[3])
        batch = int(f[4]) if len(f) > 4 else 1
        A = torch.randn(batch, *((k, m) if op[0] == "T" else (m, k)), device=dev)
        B = torch.randn(batch, *((n, k) if op[1] == "T" else (k, n)), device=dev)
        opa = A.transpose(1, 2) if op[0] == "T" else A
        opb = B.transpose(1, 2) if op[1] == "T" else B
        C = torch.empty(batch, m, n, device=dev)
        if batch == 1:
            opa, opb, C = opa[0], opb[0], C[0]
            prod = lambda: torch.mm(opa, opb, out=C)  # noqa: E731
        else:
            prod = lambda: torch.bmm(opa, opb, out=C)  # noqa: E731
        sync()
        t0 = time.perf_counter()
        prod()
        sync()
        one = time.perf_counter() - t0
        inner = max(1, min(64, int(0.01 / max(one, 1e-7))))
        times = []
        for _ in range(a.reps):
            sync()
            t0 = time.perf_counter()
            for _ in range(inner):
                prod()
            sync()
            times.append((time.perf_counter() - t0) / inner)
        t = sorted(times)[len(times) // 2]
        print(json.dumps({"shape": sh, "seconds": t,
                          "gflops": round(2.0 * m * n * k * batch / t * 1e-9, 1),
                          "device": str(dev), "threads": torch.get_num_threads()}))
    blas = "cublas" if dev.type == "cuda" else (
        "mkl" if torch.backends.mkl.is_available() else "openblas/other")
    print(json.dumps({"blas": blas, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
