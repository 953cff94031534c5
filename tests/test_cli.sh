#!/usr/bin/env bash
# test_cli.sh - the clformer command line end to end: exit codes and the
# messages a user sees. Registered with CTest as cli_end_to_end:
#   bash tests/test_cli.sh path/to/clformer
# Uses $CLFORMER_TEST_DEVICE (default: the runtime's default device) and
# data/tinyshakespeare.txt from the source tree. Prints "N passed, N failed"
# and exits nonzero if anything failed.
#
# Checks: devices (plain, --device cpu/0/a name substring, an unknown
# selector exits 2 listing the devices), strict flags (unknown flag and bad
# value exit 2 naming the flag; a bad --set key and a bad key in a model
# file exit 2 naming the flag / file:line:col), training a tiny model for 30
# steps (progress, validation loss, checkpoint), refusing to overwrite a run,
# --resume, Ctrl-C (exit 130 with a checkpoint), eval --json, sample
# (deterministic for a seed), info (its parameter total equals the one
# train reports), and truncated / corrupted checkpoints refused with a clear
# message.
set -u

BIN=${1:?usage: test_cli.sh path/to/clformer}
SRC=${CLF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
DATA=$SRC/data/tinyshakespeare.txt
TINY=$SRC/config/models/gpt-tiny-test.yaml
DEV=()
if [ -n "${CLFORMER_TEST_DEVICE:-}" ]; then DEV=(--device "$CLFORMER_TEST_DEVICE"); fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/clf_cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

passed=0
failed=0
OUT=$TMP/out
ERR=$TMP/err
RC=0

# run CMD...: runs it, keeping stdout/stderr in $OUT/$ERR and the status in $RC
run() {
  "$@" >"$OUT" 2>"$ERR"
  RC=$?
}
ok() {
  passed=$((passed + 1))
  echo "  ok   $1"
}
bad() {
  failed=$((failed + 1))
  echo "  FAIL $1"
  echo "       rc=$RC; stdout: $(head -c 600 "$OUT" | tr '\n' '|')"
  echo "       stderr: $(head -c 600 "$ERR" | tr '\n' '|')"
}
# expect NAME RC [grep pattern in stdout+stderr]
expect() {
  local name=$1 want=$2 pat=${3:-}
  if [ "$RC" -ne "$want" ]; then
    bad "$name (exit $RC, expected $want)"
  elif [ -n "$pat" ] && ! cat "$OUT" "$ERR" | grep -Eq -- "$pat"; then
    bad "$name (no '$pat' in the output)"
  else
    ok "$name"
  fi
}

echo "clformer: $BIN; device: ${CLFORMER_TEST_DEVICE:-default}"

# ---- devices ---------------------------------------------------------------
run "$BIN" devices
expect "devices lists the devices" 0 "selected"
run "$BIN" devices --device cpu
if grep -q '"type": "cpu"' <("$BIN" devices --json 2>/dev/null); then
  expect "--device cpu" 0 "selected"
else
  expect "--device cpu without a CPU device exits 2" 2 ""
fi
run "$BIN" devices --device 0
expect "--device 0" 0 "\* selected: 0"
NAME=$("$BIN" devices --json 2>/dev/null | sed -n 's/.*"name": "\([^"]*\)".*/\1/p' | head -1)
SUB=${NAME:0:8}
run "$BIN" devices --device "$SUB"
expect "--device by name substring '$SUB'" 0 "selected"
run "$BIN" devices --device nosuchdevice
expect "--device nosuchdevice exits 2 listing the devices" 2 "${NAME:0:20}"
run "$BIN" info "$TINY" --vocab 65 --device nosuchdevice
expect "info rejects runtime flags it does not take" 2 "--device"

# ---- strict flags and config errors -------------------------------------------
run "$BIN" train "$TINY" --data "$DATA" --out "$TMP/x" --bogus
expect "unknown flag exits 2 naming it" 2 "--bogus"
run "$BIN" sample "$TMP/none" --tokens abc
expect "bad value exits 2 naming the flag" 2 "--tokens: expected"
run "$BIN" sample "$TMP/none" --top-p 1.5
expect "out-of-range value exits 2" 2 "--top-p: expected"
run "$BIN" info "$TINY" --set train.stepz=5
expect "bad --set key exits 2 naming the flag" 2 "--set train.stepz=5"
run "$BIN" info "$TINY" --set blocks.attention.heads=5
expect "impossible --set value exits 2" 2 "heads"
printf 'model:\n  context: 16\n  embeding: {dim: 32}\n' >"$TMP/bad.yaml"
run "$BIN" info "$TMP/bad.yaml"
expect "unknown key in a model file exits 2 with file:line:col" 2 "bad.yaml:3:3"
run "$BIN" train "$TINY" --data "$DATA"
expect "train without --out exits 2" 2 "--out"
run "$BIN" nosuchcommand
expect "unknown command exits 2" 2 "unknown command"

# ---- train, resume, Ctrl-C ---------------------------------------------------------
RUN=$TMP/run
run "$BIN" train "$TINY" --data "$DATA" --out "$RUN" --set train.steps=30 --set train.eval.every=15 "${DEV[@]}"
expect "train a tiny model for 30 steps" 0 "step 30: val loss [0-9.]+"
if grep -Eq "step +30/30 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| [0-9,]+ tok/s" "$OUT"; then
  ok "progress line: step/total, loss, lr, tokens/s"
else
  bad "progress line: step/total, loss, lr, tokens/s"
fi
if [ -s "$RUN/ckpt.safetensors" ] && grep -q "checkpoint: .*ckpt.safetensors (step 30)" "$OUT"; then
  ok "checkpoint written at the end"
else
  bad "checkpoint written at the end"
fi
TRAIN_PARAMS=$(sed -n 's/^model: \([0-9,]*\) parameters.*/\1/p' "$OUT" | tr -d ,)
run "$BIN" train "$TINY" --data "$DATA" --out "$RUN" --set train.steps=30 "${DEV[@]}"
expect "a fresh run refuses to overwrite a checkpoint" 2 "already holds a checkpoint"
run "$BIN" train "$TINY" --data "$DATA" --out "$RUN" --resume --steps 40 --set train.eval.every=15 "${DEV[@]}"
expect "--resume continues to step 40" 0 "resuming at step 30 of 40"
run "$BIN" train "$TINY" --data "$DATA" --out "$RUN" --resume --set train.optimizer.lr=0.5 "${DEV[@]}"
expect "--resume with another learning rate exits 2 naming the key" 2 "train.optimizer.lr"

INT=$TMP/int
"$BIN" train "$TINY" --data "$DATA" --out "$INT" --set train.steps=1000000 --set train.log_every=1 "${DEV[@]}" >"$OUT" 2>"$ERR" &
pid=$!
for _ in $(seq 1 3000); do  # up to 300 s (a cold kernel cache under ASan)
  grep -q "step *5/" "$OUT" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -INT "$pid" 2>/dev/null
wait "$pid"
RC=$?
expect "Ctrl-C exits 130 and says how to resume" 130 "interrupted at step [0-9]+ of 1000000; continue with --resume"
if [ -s "$INT/ckpt.safetensors" ]; then ok "Ctrl-C wrote a checkpoint"; else bad "Ctrl-C wrote a checkpoint"; fi

# ---- eval, sample, info ------------------------------------------------------------------
run "$BIN" eval "$RUN" --data "$DATA" --json "${DEV[@]}"
expect "eval --json" 0 '^\{"val_loss": [0-9.]+, "perplexity": [0-9.]+, "tokens": 111539\}$'
run "$BIN" eval "$RUN" --data "$DATA" "${DEV[@]}"
expect "eval prints loss and perplexity" 0 "val loss [0-9.]+, perplexity [0-9.]+ over 111,539 tokens"
run "$BIN" sample "$RUN" --prompt "ROMEO:" --tokens 60 --seed 7 --quiet "${DEV[@]}"
cp "$OUT" "$TMP/sample1"
if [ "$RC" -eq 0 ] && [ "$(wc -c <"$OUT")" -ge 40 ]; then ok "sample prints text"; else bad "sample prints text"; fi
run "$BIN" sample "$RUN" --prompt "ROMEO:" --tokens 60 --seed 7 --quiet "${DEV[@]}"
if [ "$RC" -eq 0 ] && [ -s "$OUT" ] && cmp -s "$OUT" "$TMP/sample1"; then
  ok "sample is deterministic for a seed"
else
  bad "sample is deterministic for a seed"
fi
run "$BIN" sample "$RUN" --prompt "ROMEO:" --tokens 40 --temperature 0 "${DEV[@]}"
expect "greedy sample echoes the prompt and reports tokens/s" 0 "tokens/s"
run "$BIN" sample "$RUN" --prompt "€" --tokens 5 "${DEV[@]}"
expect "a prompt character outside the vocabulary is refused" 2 "U\+20AC"

run "$BIN" info "$TINY" --data "$DATA"
expect "info prints parameter counts" 0 "total +[0-9,]+"
INFO_PARAMS=$(sed -n 's/^  total *\([0-9,]*\)$/\1/p' "$OUT" | tr -d ,)
if [ -n "$INFO_PARAMS" ] && [ "$INFO_PARAMS" = "$TRAIN_PARAMS" ]; then
  ok "info's total ($INFO_PARAMS) equals the model's own count"
else
  bad "info's total ($INFO_PARAMS) equals the model's own count ($TRAIN_PARAMS)"
fi
run "$BIN" info "$TINY" --vocab 65 --json
expect "info --json" 0 '"parameters": [0-9]+.*"train_flops_per_token"'

# ---- damaged checkpoints --------------------------------------------------------
CK=$RUN/ckpt.safetensors
if [ ! -s "$CK" ]; then
  RC=1
  bad "damaged-checkpoint tests need the trained checkpoint $CK"
  CK=/dev/null
fi
mkdir -p "$TMP/trunc" "$TMP/corrupt" "$TMP/garbage"
head -c $(($(wc -c <"$CK") - 100)) "$CK" >"$TMP/trunc/ckpt.safetensors"
run "$BIN" eval "$TMP/trunc" --data "$DATA" "${DEV[@]}"
expect "a truncated checkpoint is refused" 1 "ckpt.safetensors"
cp "$CK" "$TMP/corrupt/ckpt.safetensors"
printf 'XXXX' | dd of="$TMP/corrupt/ckpt.safetensors" bs=1 seek=20 conv=notrunc 2>/dev/null
run "$BIN" sample "$TMP/corrupt" --tokens 5 "${DEV[@]}"
expect "a corrupted header is refused" 1 "ckpt.safetensors"
head -c 4096 /dev/urandom >"$TMP/garbage/ckpt.safetensors"
run "$BIN" eval "$TMP/garbage" --data "$DATA" "${DEV[@]}"
expect "random bytes are refused" 1 "ckpt.safetensors"
run "$BIN" eval "$TMP/nothing" --data "$DATA" "${DEV[@]}"
expect "a missing run directory is reported" 1 "nothing"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
