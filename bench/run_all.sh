#!/usr/bin/env bash
# run_all.sh - every clformer benchmark next to its peer, on this machine, in
# this run: the GEMM table of build/bench/gemm, then the two GPT models
# (bench/models/gpt-cpu.yaml, gpt-wide.yaml) through build/bench/gpt and
# bench/torch_gpt.py (PyTorch), printed as one table of tokens/s with the
# ratio clformer / PyTorch (above 1 = clformer faster).
#
#   bench/run_all.sh [--build DIR] [--threads N] [--steps N] [--repeat R]
#                    [--models "cpu wide"] [--device SEL] [--python PY ...]
#                    [--venv DIR] [--torch-configs "eager compile bf16"]
#                    [--blas-core auto|none|NAME] [--omp-wait best|auto|passive|active]
#                    [--opencl "system intel"] [--intel-opencl DIR]
#                    [--no-gemm] [--no-torch]
#                    [--quick] [--save FILE]
#
# clformer runs on each OpenCL implementation of --opencl (default both):
# system, the ICDs this machine registers (Debian's PoCL, unless the
# environment says otherwise; --device picks the device), and intel, Intel's
# CPU runtime from DIR (default BUILD/intel-opencl; scripts/install-intel-
# opencl.sh installs it there from PyPI when it is missing, as torch-venv.sh
# does PyTorch: the runtime a user of a CPU can install beside PyTorch, for
# AMD CPUs as for Intel's). Each gets a column; the ratio takes clformer's
# faster implementation per metric, measured in the same run, and names it,
# as it takes PyTorch's fastest configuration.
#
# Peers: each --python (default Debian's /usr/bin/python3, PyTorch 1.13 on
# OpenBLAS) and --venv DIR (DIR/bin/python; bench/torch-venv.sh makes it
# with PyTorch 2.15 from PyPI when it is missing: MKL, oneDNN,
# torch.compile) is a PyTorch of its own. Each runs in the configurations of
# --torch-configs it supports: eager; compile (torch.compile, PyTorch 2;
# train and forward only); bf16 (torch.autocast bfloat16 on train and
# forward, PyTorch 2, only where the CPU has bf16 arithmetic, avx512_bf16 or
# amx_bf16: informative, as clformer computes in float32). The ratio is
# clformer over the fastest float32 configuration of any peer, per metric.
# The GEMM table gains a column per peer whose PyTorch has MKL
# (bench/torch_gemm.py on the same shapes, run just before it).
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
PYS=()              # the peers' pythons (--python, --venv); default Debian's
VENVS=()
TORCH_CONFIGS="eager compile bf16"
DO_GEMM=1
DO_TORCH=1
SAVE=""
BLAS_CORE=auto
OMP_WAIT=best
GEMM_ARGS=()
OPENCLS="system intel"
INTEL_DIR=""

usage() { sed -n '2,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
    --build) BUILD=$2; shift ;;
    --threads) THREADS=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    --repeat) REPEAT=$2; shift ;;
    --models) MODELS=$2; shift ;;
    --device) DEVICE=$2; shift ;;
    --python) PYS+=("$2"); shift ;;
    --venv) VENVS+=("$2"); shift ;;
    --torch-configs) TORCH_CONFIGS=$2; shift ;;
    --save) SAVE=$2; shift ;;
    --blas-core) BLAS_CORE=$2; shift ;;
    --omp-wait) OMP_WAIT=$2; shift ;;
    --opencl) OPENCLS=$2; shift ;;
    --intel-opencl) INTEL_DIR=$2; shift ;;
    --no-gemm) DO_GEMM=0 ;;
    --no-torch) DO_TORCH=0 ;;
    --quick) STEPS=3; WARMUP=1; ROUNDS=2; GEMM_ARGS+=(--quick) ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run_all.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac
[ -n "$INTEL_DIR" ] || INTEL_DIR="$BUILD/intel-opencl"
case "$INTEL_DIR" in /*) ;; *) INTEL_DIR="$PWD/$INTEL_DIR" ;; esac

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

# the peers: each python that imports torch, numpy and yaml, with the
# configurations it supports (TMP/peers.tsv: impl, label, float32 or not)
for v in "${VENVS[@]}"; do
    "$ROOT/bench/torch-venv.sh" "$v" || { echo "run_all.sh: --venv $v failed" >&2; exit 1; }
    PYS+=("$v/bin/python")
done
[ ${#PYS[@]} -gt 0 ] || PYS=(/usr/bin/python3)
PY=""                 # the python that prints the table (any of the peers', else python3)
BF16_HW=0
grep -qw -e avx512_bf16 -e amx_bf16 /proc/cpuinfo 2>/dev/null && BF16_HW=1
: >"$TMP/peers.tsv"
PEER_PY=()            # PEER_PY[i]: the python of peer i
MKL_PEERS=()          # the indices of the peers whose PyTorch has MKL
for i in "${!PYS[@]}"; do
    p=${PYS[$i]}
    command -v "$p" >/dev/null 2>&1 || [ -x "$p" ] || { echo "note: $p not found: no peer"; continue; }
    [ -n "$PY" ] || PY=$p
    [ "$DO_TORCH" = 1 ] || continue
    info=$("$p" -c 'import torch, numpy, yaml
print(torch.__version__.split("+")[0], int(hasattr(torch, "compile")),
      int(torch.backends.mkl.is_available()))' 2>/dev/null) || {
        echo "note: PyTorch, numpy or PyYAML is missing for $p: not a peer" \
             "(Debian: apt-get install python3-torch python3-numpy python3-yaml)"
        continue; }
    read -r ver has_compile has_mkl <<<"$info"
    PEER_PY[i]=$p
    [ "$has_mkl" = 1 ] && MKL_PEERS+=("$i")
    for cfg in $TORCH_CONFIGS; do
        case $cfg in
        eager) printf 'p%d%s\t%s eager\t1\n' "$i" "$cfg" "$ver" ;;
        compile) [ "$has_compile" = 1 ] && printf 'p%d%s\t%s compile\t1\n' "$i" "$cfg" "$ver" ;;
        bf16) [ "$has_compile" = 1 ] && [ "$BF16_HW" = 1 ] &&
              printf 'p%d%s\t%s bf16\t0\n' "$i" "$cfg" "$ver" ;;
        *) echo "run_all.sh: --torch-configs: expected eager, compile or bf16, not $cfg" >&2; exit 2 ;;
        esac
    done >>"$TMP/peers.tsv"
done
[ -n "$PY" ] || { command -v python3 >/dev/null 2>&1 && PY=python3; }

# clformer's OpenCL implementations (TMP/clfs.tsv: impl, label)
: >"$TMP/clfs.tsv"
for o in $OPENCLS; do
    case $o in
    system) printf 'clfsys\tclformer system\n' ;;
    intel)
        if [ -s "$INTEL_DIR/env.sh" ] ||
            "$ROOT/scripts/install-intel-opencl.sh" "$INTEL_DIR" >"$TMP/intel.log" 2>&1; then
            printf 'clfintel\tclformer intel\n'
        else
            tail -3 "$TMP/intel.log" >&2
            echo "note: Intel's CPU runtime could not be installed in $INTEL_DIR: clformer runs" \
                 "on the system's OpenCL only" >&2
        fi ;;
    *) echo "run_all.sh: --opencl: expected system or intel, not $o" >&2; exit 2 ;;
    esac
done >>"$TMP/clfs.tsv"
[ -s "$TMP/clfs.tsv" ] || { echo "run_all.sh: --opencl: no implementation" >&2; exit 2; }
# clf_run IMPL COMMAND...: COMMAND with IMPL's OpenCL (Intel's runtime alone,
# through its own vendors directory, with THREADS worker threads)
clf_run() {
    local impl=$1
    shift
    case $impl in
    clfintel) ( . "$INTEL_DIR/env.sh" && export CL_CONFIG_CPU_TBB_NUM_WORKERS=$THREADS &&
                exec "$@" ) ;;
    *) "$@" ;;
    esac
}
[ -s "$TMP/peers.tsv" ] || DO_TORCH=0
HAVE_PY=0
[ -n "$PY" ] && HAVE_PY=1

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
        PEER_ARGS=()
        if [ "$DO_TORCH" = 1 ]; then
            shapes=$("$BUILD/bench/gemm" --list-shapes "${GEMM_ARGS[@]}" | sed 's/^/--shape /')
            for i in "${MKL_PEERS[@]}"; do
                echo "== GEMM: ${PEER_PY[$i]} (PyTorch with MKL), bench/torch_gemm.py"
                # shellcheck disable=SC2086
                "${PEER_PY[$i]}" "$ROOT/bench/torch_gemm.py" --threads "$THREADS" $shapes \
                    >"$TMP/gemm-peer$i.jsonl" && PEER_ARGS+=(--peer "$TMP/gemm-peer$i.jsonl")
            done
        fi
        while IFS=$'\t' read -r impl label; do
            echo "== GEMM (build/bench/gemm), $label"
            clf_run "$impl" "$BUILD/bench/gemm" ${DEVICE:+--device "$DEVICE"} \
                --blas-threads "$THREADS" "${GEMM_ARGS[@]}" "${PEER_ARGS[@]}" </dev/null
            rc=$?
            if [ $rc -ne 0 ]; then echo "run_all.sh: bench/gemm exited with $rc" >&2; CRASHED=1; fi
        done <"$TMP/clfs.tsv"
    else
        echo "== GEMM: build/bench/gemm is not built (bench/gemm.c missing?); skipped"
    fi
fi

# ---- GPT -------------------------------------------------------------------------
for model in $MODELS; do
    for r in $(seq 1 "$REPEAT"); do
        echo
        while IFS=$'\t' read -r impl label; do
            echo "== GPT $model, run $r/$REPEAT: $label"
            clf_run "$impl" "$BUILD/bench/gpt" --model "$model" --device "$DEVICE" \
                --steps "$STEPS" --warmup "$WARMUP" --sample-rounds "$ROUNDS" --json \
                </dev/null >"$TMP/$impl-$model-$r.json"
            rc=$?
            if [ $rc -ne 0 ]; then
                echo "run_all.sh: bench/gpt --model $model ($label) exited with $rc" >&2
                CRASHED=1; rm -f "$TMP/$impl-$model-$r.json"
            else cat "$TMP/$impl-$model-$r.json"; fi
        done <"$TMP/clfs.tsv"
        while IFS=$'\t' read -r impl label _; do
            [ "$DO_TORCH" = 1 ] || break
            i=${impl#p}; i=${i%%[a-z]*}
            extra=()
            case $impl in
            *compile) extra=(--compile --only "train,forward") ;;
            *bf16) extra=(--only "train,forward" --set train.precision=bf16) ;;
            esac
            for pol in "${TORCH_POLICIES[@]}"; do
                echo "== GPT $model, run $r/$REPEAT: PyTorch $label${pol:+ (OMP_WAIT_POLICY=$pol)}"
                out="$TMP/$impl-$model-$r${pol:+-$pol}.json"
                ( [ -n "$pol" ] && export OMP_WAIT_POLICY=$pol
                  exec "${PEER_PY[$i]}" "$ROOT/bench/torch_gpt.py" --model "$model" \
                      --threads "$THREADS" --steps "$STEPS" --warmup "$WARMUP" \
                      --sample-rounds "$ROUNDS" --json "${extra[@]}" ) >"$out" 2>"$out.err"
                rc=$?
                if [ $rc -ne 0 ]; then
                    tail -5 "$out.err" >&2
                    echo "run_all.sh: torch_gpt.py --model $model ($label) exited with $rc" >&2
                    CRASHED=1; rm -f "$out"
                else cat "$out"; fi
            done
        done <"$TMP/peers.tsv"
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"

# ---- the table ----------------------------------------------------------------------
echo
if [ "$HAVE_PY" = 1 ]; then
    "$PY" - "$TMP" "$MODELS" "$SAVE" <<'EOF'
import glob, json, os, statistics, sys
tmp, models, save = sys.argv[1], sys.argv[2].split(), sys.argv[3]

# the peers: impl (file prefix), label, float32 (1) or not (bf16: informative)
peers = []
with open(os.path.join(tmp, "peers.tsv")) as fh:
    for line in fh:
        impl, label, fp32 = line.rstrip("\n").split("\t")
        peers.append((impl, label, fp32 == "1"))
# clformer on each OpenCL implementation: impl (file prefix), label
clfs = []
with open(os.path.join(tmp, "clfs.tsv")) as fh:
    for line in fh:
        impl, label = line.rstrip("\n").split("\t")
        clfs.append((impl, label))

def load_runs(impl, model):
    """One dict per run, keyed by run number; runs under several OpenMP
    policies (IMPL-MODEL-R-POLICY.json) merge into the fastest per metric."""
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

def load(impl, model):
    return list(load_runs(impl, model).values())

def med(runs, key):
    v = [r[key] for r in runs if key in r]
    return statistics.median(v) if v else None

metrics = [("train", "train_tok_s"), ("forward", "forward_tok_s"),
           ("sample (KV cache)", "sample_tok_s"),
           ("sample (no cache)", "sample_nocache_tok_s")]
heads = [label for _, label in clfs] + [label for _, label, _ in peers]
w = max([14] + [len(h) + 1 for h in heads])
print(("%-6s %-18s" + " %*s" * len(heads) + " %8s  %s") % tuple(
    ["model", "metric"] + sum([[w, h] for h in heads], []) + ["ratio", "clformer's fastest / "
                                                               "PyTorch's fastest float32"]))
out = {}
for m in models:
    for label, key in metrics:
        cv = [med(load(impl, m), key) for impl, _ in clfs]
        vals = [med(load(impl, m), key) for impl, _, _ in peers]
        if all(v is None for v in cv + vals):
            continue
        cb = [(v, clfs[i][1]) for i, v in enumerate(cv) if v]
        a, a_label = max(cb) if cb else (None, "-")
        fp = [(v, peers[i][1]) for i, v in enumerate(vals) if v and peers[i][2]]
        best, best_label = max(fp) if fp else (None, "-")
        ratio = "%.2f" % (a / best) if a and best else "-"
        cells = ["%.0f" % v if v else "-" for v in cv + vals]
        print(("%-6s %-18s" + " %*s" * len(cells) + " %8s  %s") % tuple(
            [m, label] + sum([[w, x] for x in cells], []) + [ratio, "%s / %s" % (
                a_label, best_label)]))
        o = out.setdefault(m, {})[key] = {"clformer": a, "clformer_fastest": a_label,
                                         "fastest_fp32": best_label,
                                         "ratio": a / best if a and best else None}
        for i, v in enumerate(cv):
            o[clfs[i][1]] = v
        for i, v in enumerate(vals):
            o[peers[i][1]] = v
    c = [r for impl, _ in clfs for r in load(impl, m)]
    pc = med(c, "params")
    for impl, label, _ in peers:
        pt = med(load(impl, m), "params")
        if pc and pt and pc != pt:
            print("warning: %s: parameter counts differ: clformer %d, PyTorch %s %d"
                  % (m, pc, label, pt))
    out.setdefault(m, {})["threads"] = sorted({r.get("threads") for impl in
                                               [i for i, _ in clfs] + [i for i, _, _ in peers]
                                               for r in load(impl, m)})
print("ratio = clformer on its fastest OpenCL implementation / the fastest float32 PyTorch "
      "configuration (both named); medians over timed steps (and over --repeat runs); bf16 "
      "columns are informative")
# with --repeat, each run's training ratio against that run's fastest float32
# peer (the sides ran back to back): the spread shows how far the machine moved
for m in models:
    cs = [load_runs(impl, m) for impl, _ in clfs]
    ps = [load_runs(impl, m) for impl, _, fp32 in peers if fp32]
    rs = []
    for r in sorted({r for c in cs for r in c}, key=int):
        a = max([c[r]["train_tok_s"] for c in cs if r in c and c[r].get("train_tok_s")] or [0])
        b = max([p[r]["train_tok_s"] for p in ps if r in p and p[r].get("train_tok_s")] or [0])
        if a and b:
            rs.append(a / b)
    if len(rs) > 1:
        print("%s: train ratio of each run: %s" % (m, " ".join("%.2f" % x for x in rs)))
        out.setdefault(m, {})["train_ratio_runs"] = rs
# training MFU: model FLOPs per token (clformer's count, nanoGPT's estimate_mfu
# formula) times tokens/s over the device's measured FMA peak, every side
for m in models:
    c = [r for impl, _ in clfs for r in load(impl, m)]
    ft, pk = med(c, "train_flops_per_token"), med(c, "peak_gflops")
    best = max([med(load(impl, m), "train_tok_s") or 0 for impl, _ in clfs] or [0])
    if ft and pk and best:
        sides = []
        for impl, label in clfs:
            a = med(load(impl, m), "train_tok_s")
            if a:
                sides.append("%s %.1f%%" % (label, 100.0 * a * ft / (pk * 1e9)))
        for impl, label, _ in peers:
            b = med(load(impl, m), "train_tok_s")
            if b:
                sides.append("PyTorch %s %.1f%%" % (label, 100.0 * b * ft / (pk * 1e9)))
        print("%s: training MFU %s (%.3g FLOPs/token, measured peak %.1f GFLOP/s)"
              % (m, ", ".join(sides), ft, pk))
        out.setdefault(m, {})["train_mfu_clformer"] = best * ft / (pk * 1e9)
if glob.glob(os.path.join(tmp, "p*-*-*-*.json")):
    print("PyTorch: per run and metric, the faster of OMP_WAIT_POLICY=PASSIVE and ACTIVE")
if save:
    with open(save, "w") as fh:
        json.dump(out, fh, indent=1)
EOF
else
    echo "(no python: raw JSON above)"
fi
exit $CRASHED
