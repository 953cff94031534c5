#!/usr/bin/env bash
# run_all.sh - every clformer benchmark next to its peer, on this machine, in
# this run: the GEMM table of build/bench/gemm, then the two GPT models
# (bench/models/gpt-cpu.yaml, gpt-wide.yaml) through build/bench/gpt and
# bench/torch_gpt.py (PyTorch), printed as one table of tokens/s with the
# ratio clformer / PyTorch (above 1 = clformer faster).
#
#   bench/run_all.sh [--build DIR] [--threads N] [--steps N] [--repeat R]
#                    [--models "cpu wide"] [--device SEL] [--python PY]
#                    [--blas-core auto|none|NAME] [--omp-wait best|auto|passive|active]
#                    [--no-gemm] [--no-torch]
#                    [--quick] [--save FILE]
#
# Design: both sides get the same thread count (default: nproc):
# torch.set_num_threads(N) for PyTorch, POCL_CPU_MAX_CU_COUNT=N (and the
# older POCL_MAX_PTHREAD_COUNT) for PoCL, OPENBLAS_NUM_THREADS=N for the
# OpenBLAS under PyTorch and bench/gemm. OpenBLAS 0.3.21 (Debian 12) does not
# know recent CPUs and falls back to its SSE3 "Prescott" kernels, which would
# handicap PyTorch; --blas-core auto (the default, unless OPENBLAS_CORETYPE is
# already set) sets OPENBLAS_CORETYPE=SkylakeX on AVX-512 CPUs and Haswell on
# AVX2 ones. PyTorch's OpenMP threads spin while they wait, and how much that
# helps or hurts depends on the machine and the metric: on a machine whose
# cores are busy with other work PyTorch slowed down up to 6x, and on an idle
# 2-vCPU VM spinning made its training 2x slower but its sampling 1.7x
# faster. --omp-wait best (the default, unless OMP_WAIT_POLICY is set) runs
# PyTorch under both OMP_WAIT_POLICY=PASSIVE and ACTIVE and keeps, per run and
# per metric, the faster: clformer is compared with PyTorch at its best.
# --omp-wait auto sets PASSIVE when the load average exceeds half the cores
# (OpenMP's default otherwise); passive and active force one policy. Each
# side prints one JSON object
# per model; with --repeat R the pair runs R times, alternating sides, and the
# table shows the median of the R medians (helps on a shared, noisy machine),
# followed by each run's own training ratio (the two sides of a run ran back
# to back), whose spread shows how far the machine moved between runs.
# The build directory is configured and the two benchmark targets built when
# needed, so this works from a clean checkout.
#
# Exit status: non-zero only when a benchmark crashed or could not be built,
# never because a ratio is low. A missing PyTorch prints n/a in its column.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="$ROOT/build"
THREADS=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
STEPS=10
WARMUP=3
ROUNDS=5
REPEAT=1
MODELS="cpu wide"
DEVICE=${CLFORMER_DEVICE:-cpu}
PY=/usr/bin/python3
DO_GEMM=1
DO_TORCH=1
SAVE=""
BLAS_CORE=auto
OMP_WAIT=best
GEMM_ARGS=()

usage() { sed -n '2,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
    --build) BUILD=$2; shift ;;
    --threads) THREADS=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    --repeat) REPEAT=$2; shift ;;
    --models) MODELS=$2; shift ;;
    --device) DEVICE=$2; shift ;;
    --python) PY=$2; shift ;;
    --save) SAVE=$2; shift ;;
    --blas-core) BLAS_CORE=$2; shift ;;
    --omp-wait) OMP_WAIT=$2; shift ;;
    --no-gemm) DO_GEMM=0 ;;
    --no-torch) DO_TORCH=0 ;;
    --quick) STEPS=3; WARMUP=1; ROUNDS=2; GEMM_ARGS+=(--quick) ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run_all.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac

export POCL_CPU_MAX_CU_COUNT=$THREADS
export POCL_MAX_PTHREAD_COUNT=$THREADS
export OMP_NUM_THREADS=$THREADS
export OPENBLAS_NUM_THREADS=$THREADS
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
    :
elif [ "$BLAS_CORE" = auto ]; then
    if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=SkylakeX
    elif grep -qw avx2 /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=Haswell; fi
elif [ "$BLAS_CORE" != none ]; then
    export OPENBLAS_CORETYPE=$BLAS_CORE
fi

CORES=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
LOAD1=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
TORCH_POLICIES=("")   # the OMP_WAIT_POLICY of each PyTorch run ("" = as set)
if [ -n "${OMP_WAIT_POLICY:-}" ]; then
    :
elif [ "$OMP_WAIT" = best ]; then
    TORCH_POLICIES=(PASSIVE ACTIVE)
elif [ "$OMP_WAIT" = auto ]; then
    if awk -v l="$LOAD1" -v c="$CORES" 'BEGIN { exit !(l > c / 2) }'; then
        export OMP_WAIT_POLICY=PASSIVE
    fi
elif [ "$OMP_WAIT" = passive ] || [ "$OMP_WAIT" = active ]; then
    OMP_WAIT_POLICY=$(echo "$OMP_WAIT" | tr a-z A-Z); export OMP_WAIT_POLICY
else
    echo "run_all.sh: --omp-wait: expected best, auto, passive or active" >&2; exit 2
fi

CRASHED=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# ---- build --------------------------------------------------------------------------
JOBS=$THREADS
[ "$JOBS" -gt 2 ] 2>/dev/null || JOBS=2
# (Re-)configure every time: cheap with a cache, and it picks up bench/*.c
# files added since the last configure, so their targets exist.
CMAKE_ARGS=()
[ -f "$BUILD/CMakeCache.txt" ] || CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release)
echo "== configuring $BUILD"
cmake -S "$ROOT" -B "$BUILD" "${CMAKE_ARGS[@]}" >"$TMP/cmake.log" 2>&1 ||
    { cat "$TMP/cmake.log" >&2; echo "run_all.sh: cmake configure failed" >&2; exit 1; }
TARGETS="bench_gpt"
[ "$DO_GEMM" = 1 ] && [ -f "$ROOT/bench/gemm.c" ] && TARGETS="$TARGETS bench_gemm"
echo "== building $TARGETS in $BUILD"
# shellcheck disable=SC2086
cmake --build "$BUILD" -j"$JOBS" --target $TARGETS >"$TMP/build.log" 2>&1 ||
    { tail -40 "$TMP/build.log" >&2; echo "run_all.sh: build failed" >&2; exit 1; }

HAVE_PY=0
if [ -x "$PY" ] || command -v "$PY" >/dev/null 2>&1; then HAVE_PY=1; fi
if [ "$DO_TORCH" = 1 ] && [ "$HAVE_PY" = 1 ]; then
    "$PY" -c 'import torch, numpy, yaml' 2>/dev/null || {
        echo "note: PyTorch, numpy or PyYAML is missing for $PY: the PyTorch column is n/a" \
             "(Debian: apt-get install python3-torch python3-numpy python3-yaml)"
        DO_TORCH=0; }
elif [ "$DO_TORCH" = 1 ]; then
    echo "note: $PY not found: the PyTorch column is n/a"; DO_TORCH=0
fi

# ---- machine ---------------------------------------------------------------------------
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
echo
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n)"
echo "cpu: ${CPU:-unknown}, $CORES cores online; threads per side: $THREADS;" \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<detected>}" \
     "OMP_WAIT_POLICY=$([ ${#TORCH_POLICIES[@]} -gt 1 ] && echo "best of PASSIVE and ACTIVE" ||
                       echo "${OMP_WAIT_POLICY:-<default>}")"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null) (above ~0.5 the numbers are noisy)"

# ---- GEMM --------------------------------------------------------------------------
if [ "$DO_GEMM" = 1 ]; then
    echo
    if [ -x "$BUILD/bench/gemm" ]; then
        echo "== GEMM (build/bench/gemm)"
        "$BUILD/bench/gemm" ${DEVICE:+--device "$DEVICE"} --blas-threads "$THREADS" \
            "${GEMM_ARGS[@]}"
        rc=$?
        if [ $rc -ne 0 ]; then echo "run_all.sh: bench/gemm exited with $rc" >&2; CRASHED=1; fi
    else
        echo "== GEMM: build/bench/gemm is not built (bench/gemm.c missing?); skipped"
    fi
fi

# ---- GPT -------------------------------------------------------------------------
for model in $MODELS; do
    for r in $(seq 1 "$REPEAT"); do
        echo
        echo "== GPT $model, run $r/$REPEAT: clformer"
        "$BUILD/bench/gpt" --model "$model" --device "$DEVICE" --steps "$STEPS" \
            --warmup "$WARMUP" --sample-rounds "$ROUNDS" --json >"$TMP/clf-$model-$r.json"
        rc=$?
        if [ $rc -ne 0 ]; then
            echo "run_all.sh: bench/gpt --model $model exited with $rc" >&2
            CRASHED=1; rm -f "$TMP/clf-$model-$r.json"
        else cat "$TMP/clf-$model-$r.json"; fi
        if [ "$DO_TORCH" = 1 ]; then
            for pol in "${TORCH_POLICIES[@]}"; do
                echo "== GPT $model, run $r/$REPEAT: PyTorch${pol:+ (OMP_WAIT_POLICY=$pol)}"
                out="$TMP/torch-$model-$r${pol:+-$pol}.json"
                ( [ -n "$pol" ] && export OMP_WAIT_POLICY=$pol
                  exec "$PY" "$ROOT/bench/torch_gpt.py" --model "$model" --threads "$THREADS" \
                      --steps "$STEPS" --warmup "$WARMUP" --sample-rounds "$ROUNDS" --json ) >"$out"
                rc=$?
                if [ $rc -ne 0 ]; then
                    echo "run_all.sh: torch_gpt.py --model $model exited with $rc" >&2
                    CRASHED=1; rm -f "$out"
                else cat "$out"; fi
            done
        fi
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"

# ---- the table ----------------------------------------------------------------------
echo
if [ "$HAVE_PY" = 1 ]; then
    "$PY" - "$TMP" "$MODELS" "$SAVE" <<'EOF'
import glob, json, os, statistics, sys
tmp, models, save = sys.argv[1], sys.argv[2].split(), sys.argv[3]

def load(impl, model):
    """One dict per run; PyTorch runs under several OpenMP policies
    (torch-MODEL-R-POLICY.json) merge into the fastest per metric."""
    return list(load_runs(impl, model).values())

def load_runs(impl, model):
    """load()'s runs keyed by run number, to pair the two sides' runs."""
    runs = {}
    for f in sorted(glob.glob(os.path.join(tmp, "%s-%s-*.json" % (impl, model)))):
        r = os.path.basename(f)[:-5].split("-")[2]
        with open(f) as fh:
            d = json.loads(fh.read().strip().splitlines()[-1])
        if r not in runs:
            runs[r] = d
            continue
        for k, v in d.items():
            if k.endswith("_tok_s") and v > runs[r].get(k, 0):
                runs[r][k] = v
    return runs

def med(runs, key):
    v = [r[key] for r in runs if key in r]
    return statistics.median(v) if v else None

metrics = [("train", "train_tok_s"), ("forward", "forward_tok_s"),
           ("sample (KV cache)", "sample_tok_s"),
           ("sample (no cache)", "sample_nocache_tok_s")]
fmt = "%-6s %-18s %14s %14s %8s"
print(fmt % ("model", "metric", "clformer tok/s", "PyTorch tok/s", "ratio"))
print(fmt % ("-" * 6, "-" * 18, "-" * 14, "-" * 14, "-" * 8))
out = {}
for m in models:
    c, t = load("clf", m), load("torch", m)
    for label, key in metrics:
        a, b = med(c, key), med(t, key)
        if a is None and b is None:
            continue
        ratio = "%.2f" % (a / b) if a and b else "-"
        print(fmt % (m, label, "%.0f" % a if a else "-", "%.0f" % b if b else "n/a", ratio))
        out.setdefault(m, {})[key] = {"clformer": a, "pytorch": b}
    pc, pt = med(c, "params"), med(t, "params")
    if pc and pt and pc != pt:
        print("warning: %s: parameter counts differ: clformer %d, PyTorch %d" % (m, pc, pt))
    threads = sorted({r.get("threads") for r in c + t})
    out.setdefault(m, {})["threads"] = threads
    out[m]["params"] = {"clformer": pc, "pytorch": pt}
print("ratio = clformer / PyTorch; medians over timed steps (and over --repeat runs)")
# with --repeat, the ratio of each run's pair (the sides run back to back), whose
# spread shows how far the machine moved between runs
for m in models:
    c, t = load_runs("clf", m), load_runs("torch", m)
    rs = [c[r]["train_tok_s"] / t[r]["train_tok_s"] for r in sorted(c, key=int)
          if r in t and c[r].get("train_tok_s") and t[r].get("train_tok_s")]
    if len(rs) > 1:
        print("%s: train ratio of each run's pair: %s" % (m, " ".join("%.2f" % x for x in rs)))
        out.setdefault(m, {})["train_ratio_runs"] = rs
# training MFU of both sides: model FLOPs per token (clformer's count, nanoGPT's
# estimate_mfu formula) times tokens/s over the device's measured FMA peak
for m in models:
    c, t = load("clf", m), load("torch", m)
    ft, pk = med(c, "train_flops_per_token"), med(c, "peak_gflops")
    a, b = med(c, "train_tok_s"), med(t, "train_tok_s")
    if ft and pk and a:
        tm = "%.1f%%" % (100.0 * b * ft / (pk * 1e9)) if b else "n/a"
        print("%s: training MFU clformer %.1f%%, PyTorch %s (%.3g FLOPs/token, measured peak "
              "%.1f GFLOP/s)" % (m, 100.0 * a * ft / (pk * 1e9), tm, ft, pk))
        out.setdefault(m, {})["train_mfu"] = {"clformer": a * ft / (pk * 1e9),
                                              "pytorch": b * ft / (pk * 1e9) if b else None}
if len(glob.glob(os.path.join(tmp, "torch-*-*-*.json"))) > 0:
    print("PyTorch: per run and metric, the faster of OMP_WAIT_POLICY=PASSIVE and ACTIVE")
if save:
    with open(save, "w") as fh:
        json.dump(out, fh, indent=1)
EOF
else
    echo "(no python: raw JSON above)"
fi
exit $CRASHED
