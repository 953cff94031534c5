#!/usr/bin/env bash
# test-fuzz.sh - build the libFuzzer harnesses (tests/fuzz/) with clang,
# ASan and UBSan, and run each on a copy of its seed corpus.
#
#   scripts/test-fuzz.sh [SECONDS] [BUILD_DIR]    (default 10 s each, build-fuzz)
#
# CI runs the short smoke; a long campaign is the same command with more
# seconds (the closing notes quote one). Each harness's executions and
# coverage come from libFuzzer's final statistics; a crash, a leak or
# undefined behaviour fails the run and leaves the reproducer in
# BUILD_DIR/fuzz/<name>/crash-* (replay: BUILD_DIR/fuzz/fuzz_<name> FILE).
set -uo pipefail
SECS=${1:-10}
BUILD=${2:-build-fuzz}
cd "$(dirname "$0")/.."
command -v clang >/dev/null 2>&1 || { echo "test-fuzz: clang not found (apt-get install clang)" >&2; exit 1; }
jobs=$(nproc 2>/dev/null || echo 2)
mkdir -p "$BUILD"
CC=clang cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLF_FUZZ=ON -DCLF_WERROR=ON >"$BUILD/configure.log" 2>&1 ||
  { cat "$BUILD/configure.log"; exit 1; }
names="config json safetensors tokenizer text"
targets=$(for n in $names; do printf 'fuzz_%s ' "$n"; done)
# shellcheck disable=SC2086
cmake --build "$BUILD" -j"$jobs" --target $targets >"$BUILD/build.log" 2>&1 ||
  { tail -40 "$BUILD/build.log"; exit 1; }
# fuzz_one NAME: one harness on a copy of its seed corpus; prints its line
fuzz_one() {
  local n=$1 work=$BUILD/fuzz/$1 rc execs cov
  rm -rf "$work"
  mkdir -p "$work/corpus"
  cp tests/fuzz/corpus/"$n"/* "$work/corpus/"
  (cd "$work" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     "../fuzz_$n" -max_total_time="$SECS" -print_final_stats=1 -max_len=65536 -timeout=10 \
     -rss_limit_mb=2048 corpus >log.txt 2>&1)
  rc=$?
  execs=$(grep -m1 'stat::number_of_executed_units' "$work/log.txt" | awk '{print $2}')
  cov=$(grep -oE 'cov: [0-9]+' "$work/log.txt" | tail -1 | awk '{print $2}')
  if [ $rc -eq 0 ]; then
    echo "  ok   fuzz_$n: ${execs:-?} executions in ${SECS}s, ${cov:-?} edges covered, no crash"
  else
    echo "  FAIL fuzz_$n (exit $rc): $(grep -m3 -E 'ERROR|SUMMARY|runtime error' "$work/log.txt" | tr '\n' ' ')"
    echo "       reproducer: $(ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* 2>/dev/null | head -1)"
  fi
}
export -f fuzz_one
export BUILD SECS
# one harness per core at a time (each is a single process)
# shellcheck disable=SC2086
printf '%s\n' $names | xargs -P "$jobs" -I{} bash -c 'fuzz_one {}' | tee "$BUILD/fuzz-summary.txt"
! grep -q '^  FAIL' "$BUILD/fuzz-summary.txt"
