#!/usr/bin/python3
"""torch_ddp.py - the PyTorch peer of clformer's data-parallel training:
the GPT of bench/torch_gpt.py trained by DistributedDataParallel over gloo
(PyTorch's CPU backend), timed per optimizer step.

  torch_ddp.py [--model cpu|wide | --config FILE] --ranks N --threads T
               [--batch B] [--steps S] [--json]

--ranks 1 runs one process (no DDP) with T threads; --ranks N spawns N
processes on this machine, T threads each, each with batch B (default: the
model file's batch / N, so the global batch stays the model file's), and
DDP sums (averages) the gradients during backward in its buckets, as
clformer's trainer does. Printed: tokens/s of the global batch (the median
step after warm-up; every rank's slowest step counts), and the time of one
gloo allreduce of the whole gradient (the model's parameters, float32).
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_gpt  # noqa: E402 (the model, its spec and the batches)

torch = torch_gpt.torch


def worker(rank, args, spec, port, out):
    import torch.distributed as dist
    torch.set_num_threads(args.threads)
    torch.manual_seed(spec["seed"])
    distributed = args.ranks > 1
    if distributed:
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                                world_size=args.ranks)
    s = dict(spec)
    s["B"] = args.batch
    model = torch_gpt.GPT(s)
    n_params = sum(p.numel() for p in model.parameters())
    net = torch.nn.parallel.DistributedDataParallel(model) if distributed else model
    opt = torch_gpt.make_optimizer(model, s, None)
    data = torch_gpt.batches(s, 8, spec["seed"] + rank)
    times = []
    for i in range(args.warmup + args.steps):
        x, y = data[i % len(data)]
        if distributed:
            dist.barrier()
        t0 = time.perf_counter()
        _, loss = net(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if s["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), s["clip"])
        opt.step()
        loss.item()
        dt = time.perf_counter() - t0
        if distributed:
            t = torch.tensor([dt], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            dt = t.item()
        if i >= args.warmup:
            times.append(dt)
    ar = float("nan")
    if distributed:
        g = torch.ones(n_params, dtype=torch.float32)
        ts = []
        for i in range(13):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(g)
            if i >= 3:
                ts.append(time.perf_counter() - t0)
        ar = statistics.median(ts)
        dist.destroy_process_group()
    if rank == 0:
        step = statistics.median(times)
        out.put({"ranks": args.ranks, "threads": args.threads, "batch": args.batch,
                 "params": n_params, "step_ms": step * 1e3,
                 "tokens_per_s": args.ranks * args.batch * s["T"] / step,
                 "grad_allreduce_ms": ar * 1e3, "torch": torch.__version__})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="cpu")
    ap.add_argument("--config")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    path = args.config or os.path.join(HERE, "models", "gpt-%s.yaml" % args.model)
    spec = torch_gpt.load_spec(path)
    if args.batch <= 0:
        args.batch = max(1, spec["B"] // args.ranks)
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    if args.ranks == 1:
        worker(0, args, spec, 0, out)
    else:
        port = 29500 + os.getpid() % 1000
        mp.spawn(worker, args=(args, spec, port, out), nprocs=args.ranks, join=True)
    r = out.get()
    if args.json:
        print(json.dumps(r))
    else:
        print("PyTorch %s, %d rank(s) x %d thread(s), batch %d each: %.0f tokens/s "
              "(%.1f ms/step); gloo allreduce of %d gradients: %.2f ms"
              % (r["torch"], r["ranks"], r["threads"], r["batch"], r["tokens_per_s"],
                 r["step_ms"], r["params"], r["grad_allreduce_ms"]))


if __name__ == "__main__":
    main()
