#!/usr/bin/env bash
# test.sh - install what is missing, build with warnings as errors, and run
# the whole test suite twice: a plain Release build, then an
# AddressSanitizer + UndefinedBehaviorSanitizer build.
#
#   scripts/test.sh            both builds
#   CLF_TEST_SANITIZE=0 scripts/test.sh   the plain build only
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

jobs=$(nproc 2>/dev/null || echo 2)
# PoCL keeps its own cache of compiled kernels. Both builds share one, filled
# by the plain run, so the sanitizer run does not go through PoCL's LLVM
# compile path, which leaks (PoCL 3.1 / LLVM 15: with an empty POCL_CACHE_DIR
# every LeakSanitizer stack ends in libpocl.so.2 or libLLVM-15.so; with a warm
# one the suite reports no leak). We do not suppress libpocl wholesale: that
# would also hide a cl_program or cl_kernel of ours that was never released.
export POCL_CACHE_DIR="${POCL_CACHE_DIR:-$PWD/build/pocl-cache}"
mkdir -p "$POCL_CACHE_DIR"

echo "== plain build (Release, -Werror) =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCLF_WERROR=ON
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure

if [ "${CLF_TEST_SANITIZE:-1}" != "0" ]; then
  echo "== sanitizer build (ASan + UBSan, -Werror) =="
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLF_WERROR=ON -DCLF_SANITIZE=ON
  cmake --build build-asan -j"$jobs"
  # No suppressions: with PoCL's cache warm (above) the suite runs clean
  # under ASan/UBSan with PoCL 3.1 and ocl-icd 2.3. A test that fails here is
  # run once more: LeakSanitizer's own tracer was seen to crash at exit
  # ("Tracer caught signal 11", stopping PoCL's worker threads) once in four
  # runs of the CLI test on a loaded machine. A real report reproduces and
  # still fails the run; the retry is printed by ctest.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure --repeat until-pass:2
fi
