#!/usr/bin/env bash
# test_mpi.sh - data-parallel training under mpirun (issue 15), on the test
# device with one compute unit per rank (PoCL: POCL_CPU_MAX_CU_COUNT=1):
#   bash tests/test_mpi.sh path/to/clformer path/to/mpiexec
# Registered with CTest as mpi_data_parallel when CMake found an MPI.
#
# Checks, each for the three model kinds where it applies:
#   - 2 ranks x batch B against one process with batch B x accumulate 2
#     (the same global batch, the same dropout streams): the losses of 20
#     steps within 1e-5 relative (--log, full precision), the final
#     parameters within float32 rounding of the summation order (1e-4
#     relative + 1e-6 absolute, with Adam's eps at 1e-3 so that it does not
#     amplify the rounding noise of gradients that are zero in exact
#     arithmetic) and identical on both ranks (the trainer checks a
#     checksum at every evaluation); the evaluations, each rank evaluating
#     its share, agree too (validation loss 1e-5, accuracy equal);
#   - 2 ranks x accumulate 2 against one process x accumulate 4;
#   - a rerun of the same 2-rank job is bit-identical;
#   - train.shard_optimizer (ZeRO-1) gives the unsharded run's tensors bit
#     for bit (parameters and the gathered moments);
#   - a 2-rank run stopped at step 10 and resumed to 20 (the second half
#     sharded) equals the straight run bit for bit; resuming it with one
#     process is refused (exit 2);
#   - a rank killed mid-run ends the job (no hang: within 120 s) with a
#     message, and the checkpoint left behind loads;
#   - Ctrl-C on mpirun stops every rank at the same step with a checkpoint
#     (no MPI_Abort);
#   - a rank that hangs (SIGSTOP) ends the job after CLFORMER_MPI_TIMEOUT
#     (5 s here) with the others' message.
set -u

BIN=${1:?usage: test_mpi.sh path/to/clformer path/to/mpiexec}
MPIEXEC=${2:?usage: test_mpi.sh path/to/clformer path/to/mpiexec}
SRC=${CLF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
DATA=$SRC/data/tinyshakespeare.txt
TINY=$SRC/config/models/gpt-tiny-test.yaml
DEV=()
if [ -n "${CLFORMER_TEST_DEVICE:-}" ]; then DEV=(--device "$CLFORMER_TEST_DEVICE"); fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/clf_mpi.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
export POCL_CPU_MAX_CU_COUNT=1
# Under the sanitizer build: Open MPI 4.1 keeps allocations of its own past
# MPI_Finalize, in libraries without frame pointers (LeakSanitizer sees
# two-frame stacks in "<unknown module>", which no suppression can name), so
# leak checking is off for these processes; ASan's and UBSan's other checks
# stay on. The trainer's data-parallel code is leak-checked without MPI by
# test_trainer_dist (two ranks as threads).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
# root in CI containers; more ranks than cores is fine for a test
# 16 KiB gradient buckets: several reductions per step, overlapping the
# backward (a CPU device defaults to one after backward)
export CLFORMER_MPI_BUCKET_KIB=16
MPIRUN=("$MPIEXEC" --oversubscribe -x CLFORMER_MPI_BUCKET_KIB -np 2)
if [ "$(id -u)" -eq 0 ]; then
  MPIRUN=("$MPIEXEC" --allow-run-as-root --oversubscribe -x CLFORMER_MPI_BUCKET_KIB -np 2)
fi

passed=0
failed=0
ok() {
  passed=$((passed + 1))
  echo "  ok   $1"
}
bad() {
  failed=$((failed + 1))
  echo "  FAIL $1"
}

# compare_logs A B TOL: the "loss" of every step in two --log files agree
# within TOL relative (and the same steps are there)
compare_logs() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
def losses(p):
    return {d["step"]: d["loss"] for d in map(json.loads, open(p)) if "loss" in d}
a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
worst = max(abs(a[s] - b[s]) / max(abs(a[s]), 1e-30) for s in a) if a.keys() == b.keys() and a else 1.0
print(f"{len(a)} steps, largest relative difference {worst:.2e}")
sys.exit(0 if a.keys() == b.keys() and len(a) >= 20 and worst <= tol else 1)
PY
}

# compare_evals A B: the evaluations in two --log files agree (val_loss
# within 1e-5 relative, accuracy equal)
compare_evals() {
  python3 - "$1" "$2" <<'PY'
import json, sys
def evals(p):
    return {d["step"]: d for d in map(json.loads, open(p)) if "val_loss" in d}
a, b = evals(sys.argv[1]), evals(sys.argv[2])
ok = a.keys() == b.keys() and len(a) >= 2
worst = 0.0
for s in a:
    worst = max(worst, abs(a[s]["val_loss"] - b[s]["val_loss"]) / abs(a[s]["val_loss"]))
    ok = ok and a[s].get("accuracy") == b[s].get("accuracy")
print(f"{len(a)} evaluations, val loss within {worst:.1e}, accuracy equal: {ok}")
sys.exit(0 if ok and worst <= 1e-5 else 1)
PY
}

# compare_params A B [RTOL ATOL]: every float32 tensor of two checkpoints
# within RTOL relative + ATOL absolute; without them, identical bytes
compare_params() { python3 "$SRC/tests/ckpt_tensors.py" "$@"; }

# wait_for FILE PATTERN: until FILE shows PATTERN (up to 60 s)
wait_for() {
  for _ in $(seq 1 600); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
# wait_end JOB SECONDS: ended=1 and rc = JOB's status if it ends in time;
# else JOB is killed, ended=0, rc=-1
wait_end() {
  ended=0
  rc=-1
  for _ in $(seq 1 $(($2 * 10))); do
    if ! kill -0 "$1" 2>/dev/null; then
      ended=1
      break
    fi
    sleep 0.1
  done
  if [ $ended -eq 1 ]; then
    wait "$1"
    rc=$?
  else
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
  fi
}

MT=$TMP/mt
. "$SRC/tests/toy_data.sh"
toy_data "$MT" "$TMP"

# kind args...: the same training as one process and as two ranks
GPT=("$TINY" --data "$DATA" --set blocks.dropout=0.1 --set train.eval.every=10)
CLS=("$TMP/cls.yaml" --data "$MT" --set train.eval.every=10)
S2S=("$TMP/s2s.yaml" --data "$MT" --src de --tgt en --set train.epochs=0
  --set train.optimizer.lr=0.2 --set train.eval.every=10)
# Adam's eps at 1e-3: a gradient that is zero in exact arithmetic (the key
# projection's bias) holds only rounding noise, which Adam with eps 1e-8
# turns into full +-lr steps; this keeps the parameter comparison about the
# summation order
COMMON=(--set train.steps=20 --set train.batch=8 --set train.log_every=1
  --set train.optimizer.eps=1e-3 "${DEV[@]}")

for kind in GPT CLS S2S; do
  declare -n args=$kind
  one=$TMP/$kind-one two=$TMP/$kind-two
  "$BIN" train "${args[@]}" "${COMMON[@]}" --set train.accumulate=2 --out "$one" --log "$one.log" \
    >"$one.out" 2>&1
  rc1=$?
  "${MPIRUN[@]}" "$BIN" train "${args[@]}" "${COMMON[@]}" --out "$two" --log "$two.log" \
    >"$two.out" 2>&1
  rc2=$?
  if [ $rc1 -ne 0 ] || [ $rc2 -ne 0 ]; then
    bad "$kind: one process (exit $rc1) and two ranks (exit $rc2) train: $(tail -3 "$two.out" | tr '\n' ' ')"
    continue
  fi
  if msg=$(compare_logs "$one.log" "$two.log" 1e-5); then
    ok "$kind: 2 ranks x batch 8 = 1 process x batch 8 x accumulate 2: losses ($msg)"
  else
    bad "$kind: 2 ranks x batch 8 = 1 process x batch 8 x accumulate 2: losses ($msg)"
  fi
  if msg=$(compare_params "$one/ckpt.safetensors" "$two/ckpt.safetensors" 1e-4 1e-6); then
    ok "$kind: the parameters after 20 steps agree ($msg)"
  else
    bad "$kind: the parameters after 20 steps agree ($msg)"
  fi
  if msg=$(compare_evals "$one.log" "$two.log"); then
    ok "$kind: the (sharded) evaluations agree ($msg)"
  else
    bad "$kind: the (sharded) evaluations agree ($msg)"
  fi
  grep -q "data parallel: 2 ranks" "$two.out" && [ "$(grep -c "^step 10: \|^step 10 (epoch\|^step 10:" "$two.out")" -le 1 ] &&
    ok "$kind: one voice (rank 0 prints, once)" || bad "$kind: one voice (rank 0 prints, once)"
done

# 2 ranks x accumulate 2 = 1 process x accumulate 4 (draws r*A .. r*A+A-1 per rank)
"$BIN" train "${GPT[@]}" "${COMMON[@]}" --set train.accumulate=4 --out "$TMP/a4" --log "$TMP/a4.log" >/dev/null 2>&1
"${MPIRUN[@]}" "$BIN" train "${GPT[@]}" "${COMMON[@]}" --set train.accumulate=2 --out "$TMP/r2a2" \
  --log "$TMP/r2a2.log" >"$TMP/r2a2.out" 2>&1
if msg=$(compare_logs "$TMP/a4.log" "$TMP/r2a2.log" 1e-5); then
  ok "2 ranks x accumulate 2 = 1 process x accumulate 4 ($msg)"
else
  bad "2 ranks x accumulate 2 = 1 process x accumulate 4 ($msg)"
fi

# determinism: the same job again, bit for bit
"${MPIRUN[@]}" "$BIN" train "${GPT[@]}" "${COMMON[@]}" --out "$TMP/again" >/dev/null 2>&1
if msg=$(compare_params "$TMP/GPT-two/ckpt.safetensors" "$TMP/again/ckpt.safetensors"); then
  ok "a 2-rank run reproduces itself ($msg)"
else
  bad "a 2-rank run reproduces itself ($msg)"
fi

# ZeRO-1: the moments split between the ranks, the same run bit for bit
"${MPIRUN[@]}" "$BIN" train "${GPT[@]}" "${COMMON[@]}" --set train.shard_optimizer=true \
  --out "$TMP/zero" >"$TMP/zero.out" 2>&1
if msg=$(compare_params "$TMP/GPT-two/ckpt.safetensors" "$TMP/zero/ckpt.safetensors"); then
  ok "train.shard_optimizer (ZeRO-1) gives the unsharded run's parameters and moments ($msg)"
else
  bad "train.shard_optimizer (ZeRO-1) gives the unsharded run's parameters and moments (${msg:-}$(tail -1 "$TMP/zero.out"))"
fi

# resume: 10 steps, then on to 20, equals the straight run (a constant
# schedule: the cosine one depends on train.steps)
CONST=(--set train.schedule.type=constant)
"${MPIRUN[@]}" "$BIN" train "${GPT[@]}" "${COMMON[@]}" "${CONST[@]}" --out "$TMP/straight" >/dev/null 2>&1
"${MPIRUN[@]}" "$BIN" train "${GPT[@]}" "${COMMON[@]}" "${CONST[@]}" --set train.steps=10 --out "$TMP/res" >/dev/null 2>&1
# (the second half with the moments sharded: the file holds them whole)
"${MPIRUN[@]}" "$BIN" train "${GPT[@]}" "${COMMON[@]}" "${CONST[@]}" --resume --out "$TMP/res" \
  --set train.shard_optimizer=true >"$TMP/res.out" 2>&1
if grep -q "resuming at step 10 of 20" "$TMP/res.out" &&
  msg=$(compare_params "$TMP/straight/ckpt.safetensors" "$TMP/res/ckpt.safetensors"); then
  ok "a 2-rank run resumed at step 10 continues bit-exactly ($msg)"
else
  bad "a 2-rank run resumed at step 10 continues bit-exactly (${msg:-}$(tail -2 "$TMP/res.out" | tr '\n' ' '))"
fi
"$BIN" train "${GPT[@]}" "${COMMON[@]}" "${CONST[@]}" --set train.steps=30 --resume --out "$TMP/res" >"$TMP/res1.out" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "trained by 2 processes" "$TMP/res1.out"; then
  ok "resuming a 2-rank checkpoint with one process is refused (exit 2, naming both counts)"
else
  bad "resuming a 2-rank checkpoint with one process is refused (exit $rc: $(tail -1 "$TMP/res1.out"))"
fi

# a rank killed mid-run: the job ends (no hang) and the last checkpoint loads
K=$TMP/kill
"${MPIRUN[@]}" "$BIN" train "${GPT[@]}" "${DEV[@]}" --set train.steps=1000000 --set train.batch=8 \
  --set train.eval.every=20 --set train.log_every=1 --out "$K" >"$TMP/kill.out" 2>&1 &
job=$!
wait_for "$TMP/kill.out" "step *25/" # past the first checkpoint (step 20)
victim=$(pgrep -n -f "clformer train .*$K" -P "$job" 2>/dev/null || pgrep -n -f "clformer train .*--out $K")
[ -n "$victim" ] && kill -KILL "$victim"
wait_end "$job" 120
if [ -n "$victim" ] && [ $ended -eq 1 ] && [ $rc -ne 0 ] && grep -qi "signal 9\|killed\|abort" "$TMP/kill.out"; then
  ok "a rank killed mid-run ends the job (exit $rc) with a message: $(grep -i -m1 "signal 9\|killed\|abort" "$TMP/kill.out" | cut -c1-100)"
else
  bad "a rank killed mid-run ends the job (victim ${victim:-none}, ended $ended, exit $rc)"
fi
if "$BIN" eval "$K" --data "$DATA" --json "${DEV[@]}" >"$TMP/keval.out" 2>&1 && grep -q '"val_loss"' "$TMP/keval.out"; then
  ok "the checkpoint left behind loads ($(cut -c1-60 "$TMP/keval.out"))"
else
  bad "the checkpoint left behind loads: $(tail -1 "$TMP/keval.out")"
fi

# Ctrl-C on mpirun (passed on to the ranks as SIGTERM): every rank stops at
# the same step, rank 0 writes the checkpoint, no rank aborts the job. (Not
# with a line per step: after Ctrl-C mpirun stops draining the ranks'
# output, a rank that fills it blocks, and mpirun kills it; the last
# periodic checkpoint then stands.)
I=$TMP/int
"${MPIRUN[@]}" "$BIN" train "${GPT[@]}" "${DEV[@]}" --set train.steps=1000000 --set train.batch=8 \
  --set train.log_every=50 --out "$I" >"$TMP/int.out" 2>&1 &
job=$!
wait_for "$TMP/int.out" "step *50/"
kill -INT "$job"
wait_end "$job" 60
if [ $ended -eq 1 ] && grep -q "interrupted by SIG.* continue with --resume" "$TMP/int.out" &&
  ! grep -q "MPI_ABORT" "$TMP/int.out" && [ -e "$I/ckpt.safetensors" ]; then
  ok "Ctrl-C stops every rank at one step with a checkpoint ($(grep -a -o "interrupted by SIG[A-Z]* at step [0-9]*" "$TMP/int.out"))"
else
  bad "Ctrl-C stops every rank at one step with a checkpoint (ended $ended): $(tail -3 "$TMP/int.out" | tr '\n' ' ' | cut -c1-200)"
fi

# a rank that hangs (stopped): the others give up after CLFORMER_MPI_TIMEOUT
H=$TMP/hang
CLFORMER_MPI_TIMEOUT=5 "${MPIRUN[@]}" -x CLFORMER_MPI_TIMEOUT "$BIN" train "${GPT[@]}" "${DEV[@]}" \
  --set train.steps=1000000 --set train.batch=8 --set train.log_every=1 --out "$H" >"$TMP/hang.out" 2>&1 &
job=$!
wait_for "$TMP/hang.out" "step *5/"
victim=$(pgrep -n -f "clformer train .*--out $H")
[ -n "$victim" ] && kill -STOP "$victim"
wait_end "$job" 60
[ -n "$victim" ] && kill -KILL "$victim" 2>/dev/null # never leave a stopped process behind
if [ -n "$victim" ] && [ $ended -eq 1 ] && grep -q "no answer from the other ranks in 5 s" "$TMP/hang.out"; then
  ok "a hung rank: the others end the job after CLFORMER_MPI_TIMEOUT ($(grep -m1 -o "rank [0-9]*: no answer[^;]*" "$TMP/hang.out"))"
else
  bad "a hung rank: the others end the job after CLFORMER_MPI_TIMEOUT (victim ${victim:-none}, ended $ended): $(tail -2 "$TMP/hang.out" | tr '\n' ' ' | cut -c1-200)"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
