#!/usr/bin/env bash
# soak.sh - training survives being killed anywhere and a full disk.
#
#   tests/soak.sh path/to/clformer [--kills N] [--seed S]     (default 100, 1)
#
# 1. Kill-anywhere: tests/kill_resume.sh with N kills (SIGKILL at random
#    moments of a 60-step run with a checkpoint every 3 steps, each followed
#    by --resume to the end; the final tensors compared with an undisturbed
#    run's). --kills 0 leaves it out.
# 2. A full disk during a checkpoint: the run's --out on a tmpfs too small
#    for the first checkpoint, then too small for the second (the new one is
#    written beside the old before the rename). Each run must exit 1 naming
#    ENOSPC and the step the checkpoint on disk holds ("nothing to resume"
#    when none), leave no temporary file and no lock, and the checkpoint it
#    kept must load; the disk then grown, --resume (or a new start) must end
#    bit for bit at the undisturbed run's tensors.
# 3. A full disk under the kernel cache: `sample` with CLFORMER_CACHE_DIR on
#    a tmpfs that holds the smallest compiled program: exit 0, one notice
#    naming ENOSPC, the same text as with a working cache, twice (the second
#    run reads whatever the first kept), and no temporary file in the cache.
#
# The tmpfs are mounted in a private mount namespace (unshare -rm, or as
# root); where that is not allowed, parts 2 and 3 are skipped (exit 77 when
# nothing else ran). Not a timed test: a full soak takes minutes; the suite
# runs --kills 0 (parts 2 and 3) and kill_resume.sh's 10 kills.
set -u
BIN=${1:?usage: tests/soak.sh path/to/clformer [--kills N] [--seed S]}
shift
KILLS=100
SEED=1
while [ $# -gt 0 ]; do
  case $1 in
    --kills) KILLS=$2; shift ;;
    --seed) SEED=$2; shift ;;
    *) echo "soak: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
# Under a sanitizer build, leaks are the fault sweep's to find: here the
# kernel cache on a full disk makes every run compile from source, where
# PoCL 3.1 leaks 16 bytes of its own on a program it has not cached
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
SRC=${CLF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
failed=0

if [ "$KILLS" -gt 0 ]; then
  echo "== kill-anywhere: $KILLS kills"
  bash "$SRC/tests/kill_resume.sh" "$BIN" "$KILLS" "$SEED" || failed=1
fi

# The parts on a small disk run in a private mount namespace: re-enter this
# script there (CLF_SOAK_NS=1) with a tmpfs mount point of its own.
if [ "${CLF_SOAK_NS:-0}" != 1 ]; then
  if unshare -rm true 2>/dev/null; then
    CLF_SOAK_NS=1 unshare -rm bash "$0" "$BIN" --kills 0 || failed=1
  else
    echo "== full disk: skipped (cannot mount a tmpfs: no private mount namespace here)"
    [ "$KILLS" -gt 0 ] || exit 77
  fi
  exit $failed
fi

DATA=$SRC/data/tinyshakespeare.txt
TINY=$SRC/config/models/gpt-tiny-test.yaml
DEV=()
if [ -n "${CLFORMER_TEST_DEVICE:-}" ]; then DEV=(--device "$CLFORMER_TEST_DEVICE"); fi
SETS=(--set train.steps=60 --set train.eval.every=3 --set train.log_every=1)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/clf_soak.XXXXXX")
MNT=$TMP/disk
mkdir -p "$MNT"
trap 'umount "$MNT" 2>/dev/null; rm -rf "$TMP"' EXIT
fail() { echo "  FAIL $*"; failed=1; }
# disk SIZE: a fresh, empty tmpfs of SIZE at $MNT
disk() { umount "$MNT" 2>/dev/null; mount -t tmpfs -o "size=$1" tmpfs "$MNT"; }
disk 1m || { echo "== full disk: skipped (mount -t tmpfs refused)"; exit 77; }

"$BIN" train "$TINY" --data "$DATA" --out "$TMP/ref" "${SETS[@]}" "${DEV[@]}" >"$TMP/ref.log" 2>&1 ||
  { echo "soak: the reference run failed:"; tail -5 "$TMP/ref.log"; exit 1; }
ck=$(stat -c %s "$TMP/ref/ckpt.safetensors")
echo "== full disk during a checkpoint (a checkpoint is $ck bytes; the reference run took $SECONDS s)"

# size expect: --out on a tmpfs of the size; the run must stop at the
# first checkpoint that does not fit, keeping `expect` (a step, or "none")
checkpoint_case() {
  local size=$1 expect=$2 out=$MNT/run t0=$SECONDS
  disk "$size"
  "$BIN" train "$TINY" --data "$DATA" --out "$out" "${SETS[@]}" "${DEV[@]}" >"$TMP/o.log" 2>"$TMP/e.log"
  local rc=$?
  local what="tmpfs of $size bytes"
  if [ "$rc" -ne 1 ]; then fail "$what: exit $rc, expected 1"; return; fi
  grep -q "No space left on device" "$TMP/e.log" || fail "$what: no ENOSPC named: $(head -2 "$TMP/e.log")"
  if [ "$expect" = none ]; then
    grep -q "before its first checkpoint: nothing to resume" "$TMP/e.log" ||
      fail "$what: the message does not say there is nothing to resume: $(tail -1 "$TMP/e.log")"
    [ ! -e "$out/ckpt.safetensors" ] || fail "$what: a checkpoint was left"
  else
    grep -q "holds step $expect: continue from it with --resume" "$TMP/e.log" ||
      fail "$what: the message does not name step $expect: $(tail -1 "$TMP/e.log")"
    "$BIN" eval "$out" --data "$DATA" --json "${DEV[@]}" >/dev/null 2>"$TMP/ev.log" ||
      fail "$what: the checkpoint kept does not load: $(tail -1 "$TMP/ev.log")"
  fi
  if compgen -G "$out/*.tmp.*" >/dev/null; then fail "$what: a temporary file was left"; fi
  mount -o remount,size=8m "$MNT"
  local again=(--resume)
  [ "$expect" != none ] || again=()
  "$BIN" train "$TINY" --data "$DATA" --out "$out" "${again[@]}" "${SETS[@]}" "${DEV[@]}" \
    >/dev/null 2>"$TMP/r.log" || { fail "$what: the run after the disk grew failed: $(tail -1 "$TMP/r.log")"; return; }
  python3 "$SRC/tests/ckpt_tensors.py" "$TMP/ref/ckpt.safetensors" "$out/ckpt.safetensors" >/dev/null ||
    { fail "$what: the finished run's tensors differ from the undisturbed run's"; return; }
  echo "  tmpfs $size: exit 1, ENOSPC, kept $( [ "$expect" = none ] && echo nothing || echo "step $expect"), then bit-exact ($((SECONDS - t0)) s)"
}
checkpoint_case $((ck / 2)) none
checkpoint_case $((ck * 3 / 2)) 3

echo "== full disk under the kernel cache"
# the working cache: a copy of the suite's, else a new one
if [ -d "${CLFORMER_CACHE_DIR:-/nonexistent}/kernels" ]; then cp -r "$CLFORMER_CACHE_DIR" "$TMP/cache"; fi
CLFORMER_CACHE_DIR=$TMP/cache "$BIN" sample "$TMP/ref" --tokens 40 --seed 3 --quiet "${DEV[@]}" \
  >"$TMP/want.txt" 2>"$TMP/e.log" || fail "sample with a working cache: $(tail -1 "$TMP/e.log")"
# a disk that holds the smallest compiled program the suite made and no
# more: whichever programs this device's sample compiles, one does not fit
# (sized by the largest, a GPU's sample may compile only programs that fit)
smallest=$(find "$TMP/cache/kernels" -type f -printf '%s\n' | sort -n | head -1)
disk $((${smallest:-0} + 4096))
# with the suite's device facts (the page a run would write them to):
# measured afresh beside other tests, a timing-based fact (the preferred
# vector width) can come out otherwise, and then every program is compiled
# cold, by both runs (80 s on PoCL instead of 5)
if compgen -G "$TMP/cache/device-*.txt" >/dev/null; then
  mkdir -p "$MNT/cache" && cp "$TMP"/cache/device-*.txt "$MNT/cache/"
fi
for i in 1 2; do
  t0=$SECONDS
  CLFORMER_CACHE_DIR=$MNT/cache "$BIN" sample "$TMP/ref" --tokens 40 --seed 3 --quiet "${DEV[@]}" \
    >"$TMP/got.txt" 2>"$TMP/e.log"
  rc=$?
  if [ "$rc" -ne 0 ]; then fail "sample $i on a full cache disk: exit $rc: $(grep -v '^  ' "$TMP/e.log" | tail -2)"; continue; fi
  cmp -s "$TMP/want.txt" "$TMP/got.txt" || fail "sample $i on a full cache disk: other text"
  n=$(grep -c "cannot write the kernel cache (.*No space left on device)" "$TMP/e.log")
  [ "$n" -eq 1 ] || fail "sample $i on a full cache disk: $n notices of the failed cache write, expected 1"
  if find "$MNT/cache" -name '*.tmp.*' | grep -q .; then fail "sample $i: a temporary file left in the cache"; fi
  echo "  sample $i: exit 0, the same text, one notice ($(du -sk "$MNT/cache" | cut -f1) KiB cached, $((SECONDS - t0)) s)"
done
[ "$failed" -eq 0 ] && echo "full disk: every case passed"
exit $failed
