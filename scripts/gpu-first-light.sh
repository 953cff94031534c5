#!/usr/bin/env bash
# gpu-first-light.sh - a whole first visit to a GPU machine in one command:
# environment, build, devices, selftest, the suite, a fixed number of steps
# of the GPU recipe beside PyTorch's, the GEMM table beside PyTorch's
# (cuBLAS), a profile, and a summary, each step under its own time limit and
# all of it under one deadline, into a report directory. Nothing stops at a
# failure: each step's result and time go to the report.
#
#   scripts/gpu-first-light.sh [--dry-run] [--device SEL] [--debs DIR]
#                              [--data FILE] [--out DIR] [--budget SECONDS]
#                              [--recipe-steps N] [--build DIR]
#
#   --device SEL   the device (default gpu; --dry-run: cpu)
#   --debs DIR     the .deb files of scripts/gpu-debs.sh (default .gpu-debs):
#                  unpacked and used by scripts/gpu-env.sh (not --dry-run)
#   --data FILE    tiny Shakespeare (default data/tinyshakespeare.txt)
#   --out DIR      the report directory (default runs/first-light); when $OUT
#                  is set, as the GPU machine sets it, the summary and the
#                  whole report as first-light.tgz are copied there at the end
#                  (the machine returns at most 8 files)
#   --budget S     the deadline in seconds (default 540: nine minutes, so a
#                  second, corrected call fits in the machine's 15)
#   --recipe-steps N  the recipe's steps, clformer's and PyTorch's (default 100;
#                  20 in a dry run); their limits grow with N
#   --build DIR    the build directory (default build-first-light); the
#                  build step configures and builds its targets there
#   --dry-run      here, on CPUs: the .deb files fetched if missing
#                  (scripts/gpu-debs.sh) and used as there, PoCL alone, the
#                  CPU recipe, a few tests, and the checks that the visit's
#                  files travel (the tree, the .deb folder and the data
#                  within 64 MiB, no absolute path of this machine in what
#                  runs there). scripts/test.sh runs it after its PoCL leg.
#
# How the nine minutes are sized (each limit is also cut to what is left):
# build 150 s (13 s on 2 cores here; 16 there), devices and selftest 60 s,
# the suite 200 s (the PoCL leg is 75 s warm on 2 cores, mostly compiling,
# which a GPU driver does faster per program but for every program again),
# the recipe 60 s and PyTorch's 45 s (RECIPE_STEPS steps and the evaluation),
# the GEMM tables 60 s and 30 s. 605 s of limits against 540: the last steps
# are cut first, and the summary is always written.
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
DRY=0 SEL="" DEBS=.gpu-debs DATA=data/tinyshakespeare.txt BUDGET=540 TARGETS="" STEPS=""
BUILD=$ROOT/build-first-light
REPORT=runs/first-light
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    --device) SEL=$2; shift ;;
    --debs) DEBS=$2; shift ;;
    --data) DATA=$2; shift ;;
    --out) REPORT=$2; shift ;;
    --budget) BUDGET=$2; shift ;;
    --recipe-steps) STEPS=$2; shift ;;
    --build) BUILD=$2; shift ;;
    *) echo "gpu-first-light: unknown argument '$1' (see the script's header)" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$SEL" ] || { [ "$DRY" = 1 ] && SEL=cpu || SEL=gpu; }
mkdir -p "$REPORT" || exit 1
REPORT=$(cd "$REPORT" && pwd)
START=$(date +%s)
DEADLINE=$((START + BUDGET))
JOBS=$(nproc 2>/dev/null || echo 2)
mkdir -p "$BUILD" || exit 1
BUILD=$(cd "$BUILD" && pwd)
: >"$REPORT/steps.tsv"

# step NAME LIMIT COMMAND: run COMMAND (bash -c) with at most LIMIT seconds,
# cut to the deadline less 5 s for the summary; its output in NAME.log.
step() {
  local name=$1 limit=$2 cmd=$3
  local left=$((DEADLINE - $(date +%s) - 5))
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "$limit" -lt 5 ]; then
    printf '%s\tskipped\t0\tno time left\n' "$name" >>"$REPORT/steps.tsv"
    echo "== $name: skipped (no time left)"
    return 1
  fi
  echo "== $name (limit ${limit}s)"
  local t0 rc
  t0=$(date +%s.%N)
  timeout -k 5 "$limit" bash -c "$cmd" >"$REPORT/$name.log" 2>&1
  rc=$?
  local dt
  dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')
  local what=ok
  [ "$rc" = 0 ] || what="failed (exit $rc$([ "$rc" = 124 ] && echo ', time limit'))"
  printf '%s\t%s\t%.1f\t%s\n' "$name" "$rc" "$dt" "$what" >>"$REPORT/steps.tsv"
  printf '   %s, %.0f s\n' "$what" "$dt"
  return "$rc"
}

# ---- the environment -------------------------------------------------------------
if [ "$DRY" = 1 ]; then
  # the .deb files fetched if missing, unpacked and put first on every path
  # as there (scripts/gpu-env.sh), then PoCL alone, as the GPU machine will
  # have its driver alone
  [ -d "$DEBS" ] || step debs 60 "scripts/gpu-debs.sh '$DEBS'"
  if [ -d "$DEBS" ]; then
    # shellcheck disable=SC1091
    . scripts/gpu-env.sh "$DEBS" >"$REPORT/env.log" 2>&1
  fi
  icd=$(cat /etc/OpenCL/vendors/pocl.icd 2>/dev/null)
  mkdir -p "$BUILD-vendors"
  [ -n "$icd" ] && echo "$icd" >"$BUILD-vendors/pocl.icd"
  export OCL_ICD_VENDORS=$BUILD-vendors
  RECIPE=config/models/gpt-shakespeare-cpu.yaml TORCH_MODEL=bench/models/gpt-cpu.yaml
  TORCH_DEVICE=cpu RECIPE_STEPS=20 SUITE="-R '^(test_runtime|test_shape|test_reduce|test_attn_decode)\$'"
  # what the dry run's steps run (the suite's other programs are built and
  # tested by scripts/test.sh's own build)
  TARGETS="--target clformer bench_gemm test_runtime test_shape test_reduce test_attn_decode"
  SHAPES="--shape NT,768,128,384 --shape NN,768,512,128 --shape TN,128,768,512"
  # what travels: the tree git would carry, the .deb folder, the data
  step travel 30 "
    tree=\$(git ls-files -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
    debs=\$(du -sb '$DEBS' 2>/dev/null | cut -f1); debs=\${debs:-0}
    data=\$(du -b '$DATA' 2>/dev/null | cut -f1); data=\${data:-0}
    echo \"tree \$tree bytes, .deb folder (\$([ -d '$DEBS' ] && echo present || echo 'absent here: scripts/gpu-debs.sh fetches it')) \$debs, data \$data\"
    [ \$((tree + debs + data)) -le \$((64 * 1024 * 1024)) ] || { echo 'over 64 MiB'; exit 1; }
    grep -n -E '(/wo''rk/|/ro''ot/|/ho''me/)' scripts/gpu-first-light.sh scripts/gpu-env.sh bench/torch_recipe.py bench/torch_gemm.py && { echo 'an absolute path of this machine'; exit 1; }
    git check-ignore -q '$DEBS' 2>/dev/null && echo '$DEBS is ignored by git: name it in the run tool'\"'\"'s carry'
    exit 0"
else
  if [ -d "$DEBS" ]; then
    # shellcheck disable=SC1091
    . scripts/gpu-env.sh "$DEBS" >"$REPORT/env.log" 2>&1
  else
    echo "no $DEBS: using what the machine has" >"$REPORT/env.log"
  fi
  RECIPE=config/models/gpt-shakespeare.yaml TORCH_MODEL=bench/models/gpt-gpu.yaml
  TORCH_DEVICE=cuda RECIPE_STEPS=100 SUITE="-E '^(install_and_example|mpi_data_parallel|kill_resume|format|layers.*)\$'"
  SHAPES="--shape NT,16384,384,1152 --shape NT,16384,384,384 --shape NT,16384,384,1536 --shape NT,16384,1536,384 --shape NT,16384,384,65 --shape TN,384,16384,1536 --shape NN,16384,1536,384"
fi
[ -n "$STEPS" ] && RECIPE_STEPS=$STEPS
case $RECIPE_STEPS in
  '' | *[!0-9]*) echo "gpu-first-light: --recipe-steps: expected a whole number, got '$RECIPE_STEPS'" >&2; exit 2 ;;
esac
echo "device $SEL, report in $REPORT, deadline ${BUDGET}s, recipe $RECIPE_STEPS steps" | tee "$REPORT/plan.txt"

# ---- the machine: what the later steps rely on, for the report --------------------------
step machine 20 "uname -srm; nproc; (nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true)
  gcc --version | head -1; cmake --version | head -1; echo \"OCL_ICD_VENDORS=\${OCL_ICD_VENDORS:-unset}\"
  cat \"\${OCL_ICD_VENDORS:-/etc/OpenCL/vendors}\"/*.icd 2>/dev/null; ls /etc/OpenCL/vendors 2>/dev/null
  ldconfig -p | grep -i -E 'libOpenCL|nvidia-opencl|libcuda\\.' || true"

# ---- build, devices, selftest --------------------------------------------------------
step build 150 "cmake -S . -B '$BUILD' -DCMAKE_BUILD_TYPE=Release && cmake --build '$BUILD' -j$JOBS $TARGETS"
CLF=$BUILD/clformer
export CLFORMER_CACHE_DIR=${CLFORMER_CACHE_DIR:-$BUILD/cache}
step devices 60 "'$CLF' devices --json --device $SEL && '$CLF' devices --device $SEL --peak"
step selftest 60 "'$CLF' selftest --device $SEL"

# ---- the suite on the device ---------------------------------------------------------
step suite 200 "CLFORMER_TEST_DEVICE=$SEL ctest --test-dir '$BUILD' -j$JOBS --timeout 120 \
  --output-on-failure --output-junit '$REPORT/suite.xml' $SUITE"

# ---- the recipe beside PyTorch --------------------------------------------------------
rm -rf "$BUILD/recipe"
step recipe $((30 + RECIPE_STEPS * 3 / 10)) "'$CLF' train $RECIPE --data '$DATA' --out '$BUILD/recipe' --device $SEL \
  --steps $RECIPE_STEPS --set train.log_every=10 --set train.eval.every=$RECIPE_STEPS \
  --set train.eval.batches=20 --profile --log '$REPORT/recipe.jsonl'"
# the machine's python3 has PyTorch; here it may not (a dry run then skips
# the two PyTorch steps, after checking that their scripts compile)
PY=python3
for p in python3 /usr/bin/python3; do
  if $p -c 'import torch, yaml' 2>/dev/null; then PY=$p; break; fi
done
if ! $PY -c 'import torch, yaml' 2>/dev/null && [ "$DRY" = 1 ]; then
  PY=""
  for f in bench/torch_recipe.py bench/torch_gemm.py; do
    python3 -m py_compile "$f" || printf '%s\t1\t0\tdoes not compile\n' "$f" >>"$REPORT/steps.tsv"
  done
fi
torch_step() {
  if [ -z "$PY" ]; then
    printf '%s\tskipped\t0\tno PyTorch here (the scripts compile)\n' "$1" >>"$REPORT/steps.tsv"
    echo "== $1: skipped (no PyTorch here)"
    return 0
  fi
  step "$@"
}
torch_step torch_recipe $((35 + RECIPE_STEPS / 10)) "$PY bench/torch_recipe.py --config $RECIPE --model $TORCH_MODEL \
  --data '$DATA' --steps $RECIPE_STEPS --device $TORCH_DEVICE"

# ---- GEMM: clformer's table, then PyTorch's on the same shapes --------------------------
step gemm 60 "'$BUILD/bench/gemm' --device $SEL --configs --reps 3 $SHAPES"
torch_step torch_gemm 30 "$PY bench/torch_gemm.py --device $TORCH_DEVICE --reps 5 $SHAPES"

# ---- the summary ------------------------------------------------------------------------
S=$REPORT/summary.md
# a step's JSON lines, else the end of its log
json_or_tail() { grep -E '^\{' "$REPORT/$1.log" 2>/dev/null || tail -3 "$REPORT/$1.log" 2>/dev/null; }
{
  echo "# First light: device $SEL ($([ "$DRY" = 1 ] && echo 'dry run, CPU' || echo 'GPU'))"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(( $(date +%s) - START )) s of ${BUDGET}"
  echo
  echo "## Steps"
  echo
  echo "| step | exit | seconds | result |"
  echo "|---|---|---|---|"
  awk -F'\t' '{printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4}' "$REPORT/steps.tsv"
  echo
  echo "## Device"
  echo
  grep -E '^\*|peak|selected' "$REPORT/devices.log" 2>/dev/null | head -6
  echo
  echo "## Suite"
  echo
  grep -E 'tests passed|tests failed|Total Test time' "$REPORT/suite.log" 2>/dev/null
  grep -E '\*\*\*(Failed|Timeout|Exception)|Not Run' "$REPORT/suite.log" 2>/dev/null | head -20
  grep -m 20 -E '^  FAIL|FATAL' "$REPORT/suite.log" 2>/dev/null
  echo
  echo "## Recipe, $RECIPE_STEPS steps"
  echo
  echo "clformer ($RECIPE):"
  grep -E "^step +$RECIPE_STEPS/|val loss|^done|model FLOP" "$REPORT/recipe.log" 2>/dev/null
  echo
  echo "PyTorch ($TORCH_MODEL, no dropout; schedule from $RECIPE):"
  json_or_tail torch_recipe
  echo
  echo "Profile, top kernels:"
  awk '/^profile/{p=1; next} p && NF {print; if (++n == 11) exit}' "$REPORT/recipe.log" 2>/dev/null
  echo
  echo "## GEMM (GFLOP/s)"
  echo
  grep -E '^--shape|peak' "$REPORT/gemm.log" 2>/dev/null
  echo
  echo "PyTorch:"
  json_or_tail torch_gemm
  echo
  echo "## First lines of each failed step"
  awk -F'\t' '$2 != "0" && $2 != "skipped" {print $1}' "$REPORT/steps.tsv" | while read -r n; do
    echo
    echo "### $n"
    echo '```'
    grep -m 12 -i -E 'error|fail|fatal|refus|not found|no module' "$REPORT/$n.log" 2>/dev/null || tail -12 "$REPORT/$n.log"
    echo '```'
  done
} >"$S"
echo "summary: $S"
cat "$S"
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
  cp "$S" "$OUT/summary.md"
  tar czf "$OUT/first-light.tgz" -C "$(dirname "$REPORT")" "$(basename "$REPORT")"
fi
# the exit status: every step that ran passed
! awk -F'\t' '$2 != "0" && $2 != "skipped"' "$REPORT/steps.tsv" | grep -q .
