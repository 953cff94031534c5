#!/usr/bin/env bash
# kill_resume.sh - crash safety of training, measured: SIGKILL a training
# run at random moments (some inside checkpoint writes), resume each until
# it finishes, and compare its final tensors with an uninterrupted run's.
#
#   tests/kill_resume.sh path/to/clformer [KILLS] [SEED]     (default 10, 1)
#
# The run is the tiny test model on tiny Shakespeare for 60 steps with a
# checkpoint every 3 (so a good share of random moments fall inside a
# checkpoint write). Each kill: start (or resume) the run, wait a random
# time, SIGKILL it; then the checkpoint left behind, if any, must open
# (every tensor read and its checksum verified: `clformer eval`); a torn one
# counts as a failure. Then resume until the run finishes, and compare all
# of its tensors (parameters and Adam moments) with the reference run's.
# Prints "K of K resumed identical, T torn checkpoints" and exits 0 only when
# every run matched and none was torn. CI runs 10 kills; the closing notes
# quote a 100-kill run.
set -u
BIN=${1:?usage: kill_resume.sh path/to/clformer [KILLS] [SEED]}
KILLS=${2:-10}
SEED=${3:-1}
SRC=${CLF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
DATA=$SRC/data/tinyshakespeare.txt
TINY=$SRC/config/models/gpt-tiny-test.yaml
DEV=()
if [ -n "${CLFORMER_TEST_DEVICE:-}" ]; then DEV=(--device "$CLFORMER_TEST_DEVICE"); fi
SETS=(--set train.steps=60 --set train.eval.every=3 --set train.log_every=1)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/clf_kill.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
RANDOM=$SEED

# same_tensors A B: every tensor of B equals A's, byte for byte
same_tensors() { python3 "$SRC/tests/ckpt_tensors.py" "$1" "$2" >/dev/null; }

start=$(date +%s)
t0=$(date +%s%N)
"$BIN" train "$TINY" --data "$DATA" --out "$TMP/ref" "${SETS[@]}" "${DEV[@]}" >"$TMP/ref.log" 2>&1 ||
  { echo "kill_resume: the reference run failed:"; tail -5 "$TMP/ref.log"; exit 1; }
ref_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$ref_ms" -ge 100 ] || ref_ms=100
echo "reference run: 60 steps with 20 checkpoints in ${ref_ms} ms"

identical=0
torn=0
in_write=0   # kills that caught a checkpoint write (its temporary file left behind)
before=0     # kills before the first checkpoint
for k in $(seq 1 "$KILLS"); do
  D=$TMP/run$k
  # kill within the first 1.2x of a whole run's time, at a random millisecond
  ms=$(( (RANDOM * 32768 + RANDOM) % (ref_ms * 12 / 10) ))
  "$BIN" train "$TINY" --data "$DATA" --out "$D" "${SETS[@]}" "${DEV[@]}" >"$TMP/k.log" 2>&1 &
  pid=$!
  sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  if compgen -G "$D/ckpt.safetensors.tmp.*" >/dev/null; then in_write=$((in_write + 1)); fi
  [ -e "$D/ckpt.safetensors" ] || before=$((before + 1))
  if [ -e "$D/ckpt.safetensors" ] &&
     ! "$BIN" eval "$D" --data "$DATA" --json "${DEV[@]}" >"$TMP/e.log" 2>&1; then
    torn=$((torn + 1))
    echo "  kill $k at ${ms} ms: the checkpoint left behind does not load: $(tail -1 "$TMP/e.log")"
    continue
  fi
  # finish it: resume (or start over when the kill came before the first checkpoint)
  for _ in 1 2 3; do
    if [ -e "$D/ckpt.safetensors" ]; then
      "$BIN" train "$TINY" --data "$DATA" --out "$D" --resume "${SETS[@]}" "${DEV[@]}" >"$TMP/r.log" 2>&1 && break
    else
      "$BIN" train "$TINY" --data "$DATA" --out "$D" "${SETS[@]}" "${DEV[@]}" >"$TMP/r.log" 2>&1 && break
    fi
  done
  if same_tensors "$TMP/ref/ckpt.safetensors" "$D/ckpt.safetensors" 2>/dev/null; then
    identical=$((identical + 1))
  else
    echo "  kill $k at ${ms} ms: the resumed run's tensors differ from the reference: $(tail -2 "$TMP/r.log" | tr '\n' ' ')"
  fi
  rm -rf "$D"
done
echo "$identical of $KILLS resumed identical, $torn torn checkpoints; $in_write kills inside a checkpoint write, $before before the first checkpoint ($(( $(date +%s) - start ))s)"
[ "$identical" -eq "$KILLS" ] && [ "$torn" -eq 0 ]
