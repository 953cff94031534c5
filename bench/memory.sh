#!/usr/bin/env bash
# memory.sh - what train.recompute and train.precision trade: training
# tokens/s and peak memory with recomputation none, attention and block in
# float32, and none and block with bf16 and fp16 storage, for the bench
# models "wide" (bench/models/gpt-wide.yaml) and "gpu" (gpt-gpu.yaml: the
# shape of nanoGPT's GPU recipe, batch 64 x 256 tokens), clformer next to
# PyTorch with torch.utils.checkpoint around each block (or each block's
# attention sublayer) and torch.autocast("cpu", bfloat16) for bf16 in the
# same run (PyTorch 1.13 has no float16 autocast on a CPU: n/a).
#
#   bench/memory.sh [--build DIR] [--threads N] [--models "wide gpu"]
#                   [--steps N] [--device SEL] [--python PY] [--no-torch]
#
# Memory: clformer's is the runtime's own count of device bytes in live
# buffers at its peak (parameters, gradients, AdamW moments, activations,
# GEMM scratch: every buffer it allocates; `clformer info` predicts it);
# PyTorch's is the growth of the process's resident memory during the train
# steps over its level before them (torch_gpt.py polls /proc/self/statm every
# millisecond): on a CPU that is where its tensors live, gradients and
# AdamW moments included (created in the first step), the allocator's
# caching and the interpreter's own growth too. Compare each side's
# settings with its own float32 "none" (the "of none" columns); across the
# sides the two counts measure different things. clformer's 16-bit storage
# covers what only GEMMs and the fused attention read, and the weights the
# GEMMs read (train.precision in README.md).
#
# Both sides get the same thread count (default: every core); PyTorch runs
# with OMP_WAIT_POLICY=PASSIVE unless it is set (the faster policy for its
# training in bench/run_all.sh's runs on this project's machines) and
# OpenBLAS's core type named for the CPU, as run_all.sh does. Each cell is
# the median of --steps timed steps after one warm-up step (default 2: a
# "gpu" step takes seconds on a CPU).
#
# Exit status: non-zero only when a benchmark crashed or could not be built.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="$ROOT/build"
THREADS=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
MODELS="wide gpu"
STEPS=2
DEVICE=${CLFORMER_DEVICE:-cpu}
PY=/usr/bin/python3
DO_TORCH=1
# precision:recompute cells
CELLS="fp32:none fp32:attention fp32:block bf16:none bf16:block fp16:none fp16:block"

usage() { sed -n '2,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
    --build) BUILD=$2; shift ;;
    --threads) THREADS=$2; shift ;;
    --models) MODELS=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    --device) DEVICE=$2; shift ;;
    --python) PY=$2; shift ;;
    --no-torch) DO_TORCH=0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "memory.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac

export POCL_CPU_MAX_CU_COUNT=$THREADS POCL_MAX_PTHREAD_COUNT=$THREADS
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=SkylakeX
    elif grep -qw avx2 /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=Haswell; fi
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    >"$TMP/cmake.log" 2>&1 || { cat "$TMP/cmake.log" >&2; exit 1; }
cmake --build "$BUILD" -j2 --target bench_gpt >"$TMP/build.log" 2>&1 ||
    { tail -40 "$TMP/build.log" >&2; echo "memory.sh: build failed" >&2; exit 1; }
if [ "$DO_TORCH" = 1 ] && ! "$PY" -c 'import torch, numpy, yaml' 2>/dev/null; then
    echo "note: PyTorch, numpy or PyYAML is missing for $PY: the PyTorch columns are n/a"
    DO_TORCH=0
fi

CRASHED=0
echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $THREADS threads" \
     "per side; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for model in $MODELS; do
    for cell in $CELLS; do
        prec=${cell%%:*} mode=${cell#*:}
        out="$TMP/$model-$prec-$mode"
        echo "== $model, train.precision=$prec train.recompute=$mode"
        "$BUILD/bench/gpt" --model "$model" --device "$DEVICE" --only train --steps "$STEPS" \
            --warmup 1 --json --set "train.recompute=$mode" --set "train.precision=$prec" \
            >"$out.clf" || { echo "memory.sh: bench/gpt failed ($model, $cell)" >&2; CRASHED=1; }
        cat "$out.clf"
        if [ "$DO_TORCH" = 1 ] && [ "$prec" != fp16 ]; then
            "$PY" "$ROOT/bench/torch_gpt.py" --model "$model" --only train --steps "$STEPS" \
                --warmup 1 --threads "$THREADS" --json --set "train.recompute=$mode" \
                --set "train.precision=$prec" >"$out.torch" ||
                { echo "memory.sh: torch_gpt.py failed ($model, $cell)" >&2; CRASHED=1; }
            cat "$out.torch"
        fi
    done
done

"$PY" - "$TMP" "$MODELS" "$CELLS" <<'EOF'
import json, os, sys
tmp, models, cells = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()

def load(path):
    try:
        with open(path) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return {}

MiB = 1048576.0
print()
print("%-5s %-4s %-9s | %9s %9s %7s | %9s %9s %7s | %6s" % (
    "model", "prec", "recompute", "clformer", "MiB", "of none", "PyTorch", "MiB", "of none",
    "speed"))
print("%-5s %-4s %-9s | %9s %9s %7s | %9s %9s %7s | %6s" % (
    "", "", "", "tok/s", "(device)", "", "tok/s", "(RSS +)", "", "ratio"))
print("-" * 91)
for m in models:
    base_c = base_t = None
    for cell in cells:
        prec, mode = cell.split(":")
        c = load(os.path.join(tmp, "%s-%s-%s.clf" % (m, prec, mode)))
        t = load(os.path.join(tmp, "%s-%s-%s.torch" % (m, prec, mode)))
        cm = c.get("train_peak_device_bytes")
        tm = t.get("train_peak_rss_growth_bytes")
        if cell == "fp32:none":
            base_c, base_t = cm, tm
        ct, tt = c.get("train_tok_s"), t.get("train_tok_s")
        fmt = lambda v, f: f % v if v is not None else "n/a"
        pct = lambda v, b: "%.1f%%" % (100.0 * v / b) if v is not None and b else "n/a"
        print("%-5s %-4s %-9s | %9s %9s %7s | %9s %9s %7s | %6s" % (
            m, prec, mode, fmt(ct, "%.0f"), fmt(cm / MiB if cm is not None else None, "%.1f"),
            pct(cm, base_c), fmt(tt, "%.0f"), fmt(tm / MiB if tm is not None else None, "%.1f"),
            pct(tm, base_t), "%.2f" % (ct / tt) if ct and tt else "n/a"))
print("speed ratio = clformer / PyTorch tokens/s; \"of none\": each side's peak over its own "
      "float32 peak without recomputation")
EOF
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $CRASHED
