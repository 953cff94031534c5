#!/usr/bin/env bash
# data_parallel.sh - clformer's data-parallel training next to PyTorch DDP,
# on this machine, in this run: the same global batch trained as one
# process on every core and as N ranks of one core each.
#
#   bench/data_parallel.sh [--build DIR] [--model cpu|wide] [--steps N]
#                          [--ranks N] [--python PY] [--no-torch]
#
# clformer: `clformer train bench/models/gpt-<model>.yaml` on tiny
# Shakespeare for --steps (default 300) steps, its summary's training
# tokens/s (evaluations excluded), as 1 process with POCL_CPU_MAX_CU_COUNT =
# N and batch B, and as `mpirun -np N` ranks with one compute unit and batch
# B / N each (B: the model file's batch); the 2-rank line also gives the
# time spent in the gradient reductions. PyTorch: bench/torch_ddp.py, the
# same model, 1 process x N threads and N DDP processes (gloo) x 1 thread.
# PyTorch runs as bench/run_all.sh runs it (OPENBLAS_CORETYPE for the CPU,
# the faster of OMP_WAIT_POLICY PASSIVE and ACTIVE). Then MPI_Allreduce's latency and bandwidth (build/bench/allreduce) up to
# the model's gradient size. Scaling here is bounded by the machine's cores:
# N ranks of one core each do the same arithmetic as one process with N
# cores, plus the reductions; the ratio of the two lines is the efficiency.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
MODEL=cpu
STEPS=300
RANKS=2
PY=/usr/bin/python3
TORCH=1
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --python) PY=$2; shift 2 ;;
    --no-torch) TORCH=0; shift ;;
    *) echo "usage: bench/data_parallel.sh [--build DIR] [--model cpu|wide] [--steps N] [--ranks N] [--python PY] [--no-torch]" >&2; exit 2 ;;
  esac
done
BIN=$BUILD/clformer
CFG=$ROOT/bench/models/gpt-$MODEL.yaml
DATA=$ROOT/data/tinyshakespeare.txt
MPIRUN=(mpirun --oversubscribe -np "$RANKS")
if [ "$(id -u)" -eq 0 ]; then MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np "$RANKS"); fi
command -v mpirun >/dev/null || { echo "data_parallel.sh: mpirun not found (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 1; }
[ -x "$BIN" ] && [ -x "$BUILD/bench/allreduce" ] || cmake --build "$BUILD" -j"$(nproc)" --target clformer bench_allreduce >/dev/null || exit 1
TMP=$(mktemp -d "${TMPDIR:-/tmp}/clf_dp.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

B=$(sed -n 's/^ *batch: *\([0-9]*\).*/\1/p' "$CFG" | head -1)
BR=$((B / RANKS))
SETS=(--steps "$STEPS" --set train.eval.every=0 --set train.eval.batches=1 --set train.log_every=100)

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load average $(cut -d' ' -f1 /proc/loadavg)"
echo "model: $CFG, global batch $B, $STEPS steps"
tok_s() { sed -n 's/.*(\([0-9,]*\) training tok\/s).*/\1/p' "$1" | tr -d ,; }

POCL_CPU_MAX_CU_COUNT=$RANKS "$BIN" train "$CFG" --data "$DATA" --out "$TMP/one" "${SETS[@]}" >"$TMP/one.out" 2>&1 || { tail -3 "$TMP/one.out"; exit 1; }
POCL_CPU_MAX_CU_COUNT=1 "${MPIRUN[@]}" "$BIN" train "$CFG" --data "$DATA" --out "$TMP/dp" "${SETS[@]}" \
  --set train.batch="$BR" >"$TMP/dp.out" 2>&1 || { tail -3 "$TMP/dp.out"; exit 1; }
c1=$(tok_s "$TMP/one.out")
cN=$(tok_s "$TMP/dp.out")
wait_line=$(grep -a -o "waiting on gradient reductions.*" "$TMP/dp.out")

# PyTorch at its best, as bench/run_all.sh: OpenBLAS told the CPU it does
# not know (0.3.21 falls back to SSE3 kernels), and each run under both
# OpenMP wait policies, the faster kept
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
fi
torch_best() { # RANKS THREADS BATCH: the best tokens/s (and its allreduce ms) as "tok ms"
  local best="" r
  for pol in PASSIVE ACTIVE; do
    r=$(OMP_WAIT_POLICY=$pol OPENBLAS_NUM_THREADS=$2 "$PY" "$ROOT/bench/torch_ddp.py" --model "$MODEL" \
      --ranks "$1" --threads "$2" --batch "$3" --json 2>>"$TMP/torch.err" |
      "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(round(d["tokens_per_s"]), "%.2f" % d["grad_allreduce_ms"])') || continue
    if [ -z "$best" ] || [ "${r%% *}" -gt "${best%% *}" ]; then best=$r; fi
  done
  echo "${best:-n/a n/a}"
}
t1="n/a" tN="n/a" ar_t="n/a"
if [ $TORCH -eq 1 ]; then
  read -r t1 _ <<<"$(torch_best 1 "$RANKS" "$B")"
  read -r tN ar_t <<<"$(torch_best "$RANKS" 1 "$BR")"
fi
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'; }
printf '\n%-34s %14s %14s %10s\n' "training tokens/s" "clformer" "PyTorch" "ratio"
printf '%-34s %14s %14s %10s\n' "1 process x $RANKS cores, batch $B" "$c1" "$t1" "$(ratio "$c1" "$t1")"
printf '%-34s %14s %14s %10s\n' "$RANKS ranks x 1 core, batch $BR each" "$cN" "$tN" "$(ratio "$cN" "$tN")"
printf '%-34s %14s %14s\n' "efficiency ($RANKS ranks / 1 process)" "$(ratio "$cN" "$c1")" "$(ratio "$tN" "$t1")"
echo "clformer, $RANKS ranks: $wait_line"
echo "PyTorch DDP (gloo): one allreduce of the whole gradient: $ar_t ms"

NP=$(sed -n 's/^model: \([0-9,]*\) parameters.*/\1/p' "$TMP/one.out" | tr -d ,)
MIB=$(( (NP * 4 + 1048575) / 1048576 * 2 ))
echo
echo "MPI_Allreduce on this machine (the model's gradient: $NP floats, $((NP * 4)) bytes):"
"${MPIRUN[@]}" "$BUILD/bench/allreduce" --max-mib "$MIB"
