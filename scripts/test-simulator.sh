#!/usr/bin/env bash
# test-simulator.sh - every kernel test under the Oclgrind OpenCL simulator,
# which checks what a CPU runtime forgives: data races in local and global
# memory (--data-races), out-of-bounds accesses, barrier divergence and API
# misuse (--check-api; the default checks). Any report fails the run, as
# does a failing test. Oclgrind reports a GPU (real local memory, 1024-item
# work-groups), so the GPU-shaped kernel paths are the ones checked.
#
#   scripts/test-simulator.sh [BUILD_DIR]     (default: build; built already)
#
# A kernel test is a tests/test_*.c that includes the op wrappers
# (model/ops/ops.h, ops_internal.h), the GEMM (runtime/gemm/gemm.h), the
# conversions or the runtime's internals (the shape probe), so a
# new one is checked here without editing this file. They run with
# CLFORMER_TEST_SIMULATOR=1 (their smaller sizes), CLFORMER_TEST_CHECKER=1
# (without what the devices' legs check, such as a rerun's bits: the time
# goes to the simulator's own checks) and the native GEMM engine
# (CLBlast's kernels are not ours to check), two at a time. Oclgrind's
# --uninitialized plugin is not used: it aborts on LLVM's freeze instruction.
#
# Oclgrind is reached through its ICD library, registered alone
# (OCL_ICD_VENDORS), with its checks switched on by its environment
# variables, rather than by the `oclgrind` wrapper: the wrapper preloads the
# simulator into every process the test starts (test_spirv runs clang for
# each of its programs; preloaded, twice as slow). A control runs first
# (tests/simulator_control.c): a racy kernel and an out-of-bounds one, both
# of which must be reported, so a run whose checks were silently off fails.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
command -v oclgrind >/dev/null 2>&1 || { echo "test-simulator: oclgrind not found (apt-get install oclgrind)" >&2; exit 1; }
OUT=$BUILD/simulator
rm -rf "$OUT"
mkdir -p "$OUT"
# (the test programs among them: test_util.c is the tests' library)
tests=$(grep -l -E '"(model/ops/ops|model/ops/ops_internal|runtime/gemm/gemm|runtime/convert|runtime/runtime_internal)\.h"' "$ROOT"/tests/test_*.c |
        xargs -n1 basename | sed 's/\.c$//' | sort | while read -r t; do if [ -x "$BUILD/tests/$t" ]; then echo "$t"; fi; done)
[ -n "$tests" ] || { echo "test-simulator: no kernel tests found" >&2; exit 1; }
export CLFORMER_TEST_SIMULATOR=1 CLFORMER_TEST_CHECKER=1 CLFORMER_GEMM=native
# The group shape, forced: the kernels written for lockstep work-groups are
# the ones whose local memory and barriers the simulator checks (measured,
# Oclgrind runs items one by one and would get the item shape).
export CLFORMER_SHAPE=group
export CLFORMER_CACHE_DIR=$OUT/cache
# Oclgrind's ICD next to its wrapper (Debian: /usr/bin and /usr/lib/oclgrind)
icd=$(dirname "$(readlink -f "$(command -v oclgrind)")")/../lib/oclgrind/liboclgrind-rt-icd.so
[ -f "$icd" ] || { echo "test-simulator: Oclgrind's ICD library not found at $icd" >&2; exit 1; }
mkdir -p "$OUT/vendors" && echo "$(readlink -f "$icd")" >"$OUT/vendors/oclgrind.icd"
export OCL_ICD_VENDORS=$OUT/vendors OCLGRIND_DATA_RACES=1 OCLGRIND_CHECK_API=1
OCLGRIND_LOG=$OUT/control.oclgrind "$BUILD/tests/simulator_control" >"$OUT/control.log" 2>&1 ||
  { echo "test-simulator: the control did not run: $(cat "$OUT/control.log")" >&2; exit 1; }
grep -q 'data race' "$OUT/control.oclgrind" && grep -q 'Invalid write' "$OUT/control.oclgrind" ||
  { echo "test-simulator: the control's race and out-of-bounds write were not both reported (is $icd Oclgrind?)" >&2; exit 1; }
echo "  ok   the control: its data race and out-of-bounds write are reported"
export OUT BUILD
run_one() {
  t=$1
  start=$(date +%s)
  OCLGRIND_LOG=$OUT/$t.oclgrind "$BUILD/tests/$t" >"$OUT/$t.log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  if [ $rc -eq 0 ] && [ ! -s "$OUT/$t.oclgrind" ]; then
    echo "  ok   $t under Oclgrind (${secs}s; $(tail -n 1 "$OUT/$t.log"))"
  else
    echo "  FAIL $t under Oclgrind (${secs}s, exit $rc): $(head -c 2000 "$OUT/$t.oclgrind"; tail -n 3 "$OUT/$t.log")"
  fi
}
export -f run_one
start=$(date +%s)
echo "$tests" | xargs -P 2 -I{} bash -c 'run_one {}' | tee "$OUT/summary.txt"
pass=$(grep -c '^  ok' "$OUT/summary.txt")
fail=$(grep -c '^  FAIL' "$OUT/summary.txt")
echo "simulator: $(( $(date +%s) - start ))s for $(echo "$tests" | wc -l) kernel tests (logs in $OUT)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
