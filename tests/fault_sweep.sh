#!/usr/bin/env bash
# fault_sweep.sh - every failure point of a command, taken on purpose.
#
#   tests/fault_sweep.sh BIN [--every K] [--scenarios "export tokenizer train train-fresh
#     sample eval translate import"]
#
# BIN: a clformer built with -DCLF_FAULT=ON (tests/fault/inject.c), best with
# -DCLF_SANITIZE=ON. For each scenario the undisturbed run is done twice: the
# first writes the reference output, the second counts the points it reaches
# (CLFORMER_FAULT_COUNT=1). Then the command runs once per point N (every
# K-th with --every K, always the last ten: a deterministic sample) with
# CLFORMER_FAULT=N: the N-th allocation, file or OpenCL call fails. Each run
# must
#   - exit 0 having recovered (the output equal to the reference), or exit 1
#     or 2 with a "clformer" error line on stderr;
#   - not crash (no signal, no AddressSanitizer, UndefinedBehaviorSanitizer
#     or LeakSanitizer report);
#   - leave the output as the reference (an earlier, equal run wrote it: a
#     failed run replaced nothing) and no temporary file (*.tmp.*) behind;
#     a command that prints its result (sample, eval --json, translate) has
#     printed the reference, or when it failed a beginning of it.
# The train scenario resumes a 2-step run of the CPU recipe to step 4 (two
# steps, an evaluation, a checkpoint) under each fault; train-fresh runs the
# 4 steps from scratch (evaluations and checkpoints at 2 and 4). The
# checkpoint must then hold step 2's parameters or step 4's, bit for bit
# (the reference runs' tensors; the metadata holds wall-clock times), or
# be absent (from scratch), and a failed run resumed (or started again
# where it left no checkpoint) without a fault must reach step 4's
# parameters bit for bit;
# a run that stops inside the training loop must say which step the
# checkpoint holds, and be right.
# Prints one line per scenario, "SCENARIO: K points, R runs, C clean", and
# each failure with its point and the first lines of its stderr (all of it
# in $FAULT_LOG_DIR/NAME-N.err when FAULT_LOG_DIR is set); exit 1 if any
# run failed.
set -u
BIN=${1:?usage: tests/fault_sweep.sh BIN [--every K] [--scenarios LIST]}
shift
EVERY=1
SCEN="export tokenizer train train-fresh sample eval translate import"
while [ $# -gt 0 ]; do
  case $1 in
    --every) EVERY=$2; shift ;;
    --scenarios) SCEN=$2; shift ;;
    *) echo "fault_sweep: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/clf_fault.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# a leak is read from the report (pocl_compile_leak), the exit status stays
# the command's own
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}exitcode=0"
failed=0

head -c 60000 "$ROOT/data/tinyshakespeare.txt" >"$TMP/small.txt"
# a run to export (a few steps of the CPU recipe; the device as the suite's)
ASAN_OPTIONS=detect_leaks=0 "$BIN" train "$ROOT/config/models/gpt-shakespeare-cpu.yaml" --data "$TMP/small.txt" \
  --out "$TMP/run" --steps 2 --set train.eval.every=2 --set train.eval.batches=1 >"$TMP/train.log" 2>&1 ||
  { echo "fault_sweep: the training run to export failed:" >&2; tail -5 "$TMP/train.log" >&2; exit 1; }

# pocl_compile_leak ERR: the run's only sanitizer report is LeakSanitizer's,
# every leak allocated inside PoCL, in a run that compiled kernels from
# source. PoCL 3.1 leaks 16 bytes compiling a program its own cache does
# not hold; a fault that makes a run measure its device or GEMM choices
# again can pick other kernel variants, which are such programs. Counted
# apart ("PoCL's compile leak"), not a failure; any other frame fails.
pocl_compile_leak() {
  grep -q "ERROR: LeakSanitizer" "$1" && ! grep -q -E "ERROR: AddressSanitizer|runtime error:" "$1" &&
    grep -q -E "compiled [0-9]+ kernel programs" "$1" &&
    awk '/leak of/ {want = 1; next} want && /^ +#1 / {if ($0 !~ /libpocl/) bad = 1; want = 0}
         END {exit bad}' "$1"
}

pocl_note() { [ "$1" -eq 0 ] || echo " ($1 of them with PoCL's compile leak)"; }

# keep_err NAME N: a failed run's whole stderr into $FAULT_LOG_DIR (when set)
keep_err() {
  [ -n "${FAULT_LOG_DIR:-}" ] || return 0
  mkdir -p "$FAULT_LOG_DIR" && cp "$TMP/err" "$FAULT_LOG_DIR/$(echo "$1" | tr -c 'a-z0-9\n' '_')-$2.err"
}

# scenario NAME OUT CMD...: the command writes OUT, or its standard output
# when OUT is "-" (then a failed run may have printed a beginning of the
# reference, streamed, and nothing else). Its standard input is $IN.
scenario() {
  local name=$1 out=$2 so=/dev/null
  shift 2
  if [ "$out" = - ]; then out=$TMP/stdout so=$TMP/stdout; fi
  rm -f "$out"
  # once to fill the caches (GEMM choices, kernel binaries), where PoCL's
  # first compilation of a program leaks 16 bytes (not clformer's)
  ASAN_OPTIONS=detect_leaks=0 "$@" <"$IN" >/dev/null 2>&1
  rm -f "$out"
  "$@" <"$IN" >"$so" 2>"$TMP/ref.err" || { echo "  FAIL $name: the undisturbed run failed: $(head -3 "$TMP/ref.err")"; failed=1; return; }
  cp "$out" "$TMP/ref.out"
  local k
  k=$(CLFORMER_FAULT_COUNT=1 "$@" <"$IN" 2>&1 >/dev/null | sed -n 's/^clformer-fault: \([0-9]*\) points.*/\1/p')
  [ -n "$k" ] || { echo "  FAIL $name: no point count (is $BIN built with -DCLF_FAULT=ON?)"; failed=1; return; }
  local runs=0 clean=0 pocl=0 n
  for n in $(seq 1 "$k"); do
    [ $((n % EVERY)) -eq 0 ] || [ "$n" -gt $((k - 10)) ] || continue
    runs=$((runs + 1))
    CLFORMER_FAULT=$n CLFORMER_FAULT_COUNT=1 "$@" <"$IN" >"$so" 2>"$TMP/err"
    local rc=$? why=""
    # LeakSanitizer's own tracer crashing at exit (seen with PoCL's worker
    # threads, scripts/test.sh) is not the command's failure: once more
    if grep -q "Tracer caught signal" "$TMP/err"; then
      CLFORMER_FAULT=$n CLFORMER_FAULT_COUNT=1 "$@" <"$IN" >"$so" 2>"$TMP/err"
      rc=$?
    fi
    local same=0
    if cmp -s "$out" "$TMP/ref.out"; then same=1
    elif [ "$so" != /dev/null ] && [ "$rc" -ne 0 ] &&
         cmp -s "$out" <(head -c "$(stat -c %s "$out")" "$TMP/ref.out"); then same=1
    fi
    local what
    what=$(sed -n 's/^clformer-fault: .*failed: //p' "$TMP/err")
    local pl=0
    if pocl_compile_leak "$TMP/err"; then pl=1 pocl=$((pocl + 1)); fi
    if [ "$pl" -eq 0 ] && grep -q -E "Sanitizer|runtime error:" "$TMP/err"; then why="a sanitizer report"
    elif [ "$rc" -ge 128 ]; then why="killed by signal $((rc - 128))"
    elif [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ] && [ "$rc" -ne 2 ]; then why="exit $rc"
    elif [ "$rc" -ne 0 ] && ! grep -q "^clformer" "$TMP/err"; then why="exit $rc without a message"
    elif [ "$same" -eq 0 ]; then why="the output is not the reference (exit $rc)"
    elif compgen -G "$(dirname "$out")/*.tmp.*" >/dev/null; then why="a temporary file left (exit $rc)"
    fi
    if [ -z "$why" ]; then
      clean=$((clean + 1))
    else
      failed=1
      echo "  FAIL $name, point $n ($what): $why: $(grep -v '^clformer-fault' "$TMP/err" | head -4 | tr '\n' '|')"
      keep_err "$name" "$n"
      rm -f "$(dirname "$out")"/*.tmp.*
      [ "$so" != /dev/null ] || cp "$TMP/ref.out" "$out"
    fi
  done
  echo "$name: $k points, $runs runs, $clean clean$(pocl_note "$pocl")"
}

# The tensors of a checkpoint (its bytes after the header), hashed; "bad"
# when it is no safetensors file.
tensors() {
  python3 - "$1" <<'PY' 2>/dev/null || echo bad
import hashlib, json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
json.loads(b[8:8 + n])
print(hashlib.sha256(b[8 + n:]).hexdigest())
PY
}

# train_scenario resume|fresh: the run resumed from step 2 to 4, or the
# whole run from scratch (evaluations and checkpoints at 2 and 4)
train_scenario() {
  local mode=$1
  local cfg=("$ROOT/config/models/gpt-shakespeare-cpu.yaml" --data "$TMP/small.txt"
             --set train.eval.every=2 --set train.eval.batches=1)
  local again=(--resume) label="train --resume"
  [ "$mode" = resume ] || again=() label="train (from scratch)"
  rm -rf "$TMP/t4" "$TMP/t2"
  "$BIN" train "${cfg[@]}" --out "$TMP/t4" --steps 4 >/dev/null 2>&1 &&
    "$BIN" train "${cfg[@]}" --out "$TMP/t2" --steps 2 >/dev/null 2>&1 ||
    { echo "  FAIL train: the undisturbed runs failed"; failed=1; return; }
  local ref4 ref2 k
  ref4=$(tensors "$TMP/t4/ckpt.safetensors")
  ref2=$(tensors "$TMP/t2/ckpt.safetensors")
  # the starting state: step 2's run, or nothing
  start() { rm -rf "$TMP/tr" && if [ "$mode" = resume ]; then cp -r "$TMP/t2" "$TMP/tr"; fi; }
  start
  k=$(CLFORMER_FAULT_COUNT=1 "$BIN" train "${cfg[@]}" --out "$TMP/tr" --steps 4 "${again[@]}" 2>&1 >/dev/null |
      sed -n 's/^clformer-fault: \([0-9]*\) points.*/\1/p')
  [ -n "$k" ] && [ "$(tensors "$TMP/tr/ckpt.safetensors")" = "$ref4" ] ||
    { echo "  FAIL $label: the undisturbed run did not reach step 4's parameters"; failed=1; return; }
  local runs=0 clean=0 stopped=0 pocl=0 n
  for n in $(seq 1 "$k"); do
    [ $((n % EVERY)) -eq 0 ] || [ "$n" -gt $((k - 10)) ] || continue
    runs=$((runs + 1))
    start
    CLFORMER_FAULT=$n CLFORMER_FAULT_COUNT=1 "$BIN" train "${cfg[@]}" --out "$TMP/tr" --steps 4 \
      "${again[@]}" >/dev/null 2>"$TMP/err"
    local rc=$? why="" what got held
    if grep -q "Tracer caught signal" "$TMP/err"; then # LeakSanitizer's own crash: once more
      start
      CLFORMER_FAULT=$n CLFORMER_FAULT_COUNT=1 "$BIN" train "${cfg[@]}" --out "$TMP/tr" --steps 4 \
        "${again[@]}" >/dev/null 2>"$TMP/err"
      rc=$?
    fi
    what=$(sed -n 's/^clformer-fault: .*failed: //p' "$TMP/err")
    got=$(tensors "$TMP/tr/ckpt.safetensors")
    # a run that fails past its start names the step its checkpoint holds
    held=$(sed -n 's/^clformer: the run stopped after step [0-9]* of 4; .* holds step \([0-9]*\):.*/\1/p' "$TMP/err")
    local pl=0
    if pocl_compile_leak "$TMP/err"; then pl=1 pocl=$((pocl + 1)); fi
    if [ "$pl" -eq 0 ] && grep -q -E "Sanitizer|runtime error:" "$TMP/err"; then why="a sanitizer report"
    elif [ "$rc" -ge 128 ]; then why="killed by signal $((rc - 128))"
    elif [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ] && [ "$rc" -ne 2 ]; then why="exit $rc"
    elif [ "$rc" -ne 0 ] && ! grep -q "^clformer" "$TMP/err"; then why="exit $rc without a message"
    elif [ "$got" != "$ref2" ] && [ "$got" != "$ref4" ] &&
         { [ "$mode" = resume ] || [ -e "$TMP/tr/ckpt.safetensors" ]; }; then
      why="the checkpoint is neither step 2's nor step 4's (exit $rc)"
    elif [ "$rc" -eq 0 ] && [ "$got" != "$ref4" ]; then why="exit 0 short of step 4"
    elif compgen -G "$TMP/tr/*.tmp.*" >/dev/null; then why="a temporary file left (exit $rc)"
    elif [ -n "$held" ] && [ "$got" != "$( [ "$held" = 2 ] && echo "$ref2" || echo "$ref4")" ]; then
      why="the message says the checkpoint holds step $held; it does not"
    elif [ "$rc" -ne 0 ]; then
      [ -z "$held" ] || stopped=$((stopped + 1))
      local go=(--resume) # on from the checkpoint, or from scratch again
      [ -e "$TMP/tr/ckpt.safetensors" ] || go=()
      "$BIN" train "${cfg[@]}" --out "$TMP/tr" --steps 4 "${go[@]}" >/dev/null 2>&1
      [ "$(tensors "$TMP/tr/ckpt.safetensors")" = "$ref4" ] || why="resumed after it, not step 4's parameters"
    fi
    if [ -z "$why" ]; then
      clean=$((clean + 1))
    else
      failed=1
      echo "  FAIL $label, point $n ($what): $why: $(grep -v '^clformer-fault' "$TMP/err" | head -4 | tr '\n' '|')"
      keep_err "train-$mode" "$n"
    fi
  done
  echo "$label: $k points, $runs runs, $clean clean ($stopped stopped inside the run," \
    "each naming the step its checkpoint holds)$(pocl_note "$pocl")"
}

# a toy translator (tests/toy_data.sh: 8 steps) and five sentences for it
translator() {
  [ -d "$TMP/mt" ] && return 0
  # shellcheck source=tests/toy_data.sh
  . "$ROOT/tests/toy_data.sh"
  toy_data "$TMP/toy" "$TMP"
  head -5 "$TMP/toy/val.de" >"$TMP/src5"
  ASAN_OPTIONS=detect_leaks=0 "$BIN" train "$TMP/s2s.yaml" --data "$TMP/toy" --src de --tgt en --out "$TMP/mt" >"$TMP/mt.log" 2>&1 ||
    { echo "fault_sweep: the translator's training failed:" >&2; tail -5 "$TMP/mt.log" >&2; exit 1; }
}

IN=/dev/null
for s in $SCEN; do
  case $s in
    export) scenario export "$TMP/e.safetensors" "$BIN" export "$TMP/run" --out "$TMP/e.safetensors" ;;
    train) train_scenario resume ;;
    train-fresh) train_scenario fresh ;;
    tokenizer) scenario "tokenizer train" "$TMP/tok.json" "$BIN" tokenizer train --data "$TMP/small.txt" --vocab 280 --out "$TMP/tok.json" ;;
    sample) scenario sample - "$BIN" sample "$TMP/run" --tokens 24 --seed 5 --quiet ;;
    eval) scenario "eval --json" - "$BIN" eval "$TMP/run" --data "$TMP/small.txt" --json ;;
    translate)
      translator
      IN=$TMP/src5 scenario "translate --beam 3" - "$BIN" translate "$TMP/mt" --beam 3 --quiet ;;
    import) scenario "import (BERT)" "$TMP/bert.safetensors" "$BIN" import "$ROOT/tests/data/hf/tiny-bert" --out "$TMP/bert.safetensors" ;;
    *) echo "fault_sweep: unknown scenario $s" >&2; exit 2 ;;
  esac
done
exit $failed
