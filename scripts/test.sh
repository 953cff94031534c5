#!/usr/bin/env bash
# test.sh - install what is missing, build with warnings as errors, and run
# the whole suite on every OpenCL implementation this machine can have:
#
#   1. PoCL (Debian's CPU runtime), plain Release build; then the GPU
#      visit's script as a dry run there (scripts/gpu-first-light.sh)
#   2. Intel's CPU OpenCL runtime (PyPI wheels, scripts/install-intel-opencl.sh),
#      the same build; every test but those of the host's own behaviour
#      (checkpoints under kill, MPI plumbing, a full disk, the source checks)
#   3. Mesa's rusticl on llvmpipe (Debian's mesa-opencl-icd): the SPIR-V
#      front end of Mesa's GPU drivers; as 2, and not the command line's
#      training sections (cli_decoder, cli_encoders, cli_pretrained), which
#      train for minutes there
#   4. the Oclgrind simulator: every kernel test with its race and
#      bounds checks (scripts/test-simulator.sh)
#   5. PoCL again, AddressSanitizer + UndefinedBehaviorSanitizer build
#   6. the libFuzzer harnesses (tests/fuzz/), 10 s each (scripts/test-fuzz.sh)
#
# The implementation is chosen by environment only (OCL_ICD_VENDORS, or
# Oclgrind's own library): no code path is chosen by a vendor's name. Tests
# run on every core (ctest -j); within a leg they share one cache of
# compiled kernels, so each program is compiled once per implementation
# (the sanitizer build reuses the plain build's, compiled for the same
# device). Each leg prints its time; the summary gives every leg's time and
# its five slowest tests. Any failure fails the run (the others still run).
#
#   scripts/test.sh                        every leg
#   CLF_TEST_INTEL=0 scripts/test.sh       without leg 2 (likewise
#   CLF_TEST_MESA=0, CLF_TEST_SIMULATOR=0, CLF_TEST_SANITIZE=0, CLF_TEST_FUZZ=0)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
scripts/setup.sh --test || exit 1

jobs=$(nproc 2>/dev/null || echo 2)

# Each leg registers exactly one implementation with the ICD loader, through
# a vendors directory of its own (OCL_ICD_VENDORS), never the machine's
# /etc/OpenCL/vendors: the loader loads every registered library into every
# process, so on a machine that also has Mesa's ICDs (the Mesa leg installs
# them) PoCL's runs would load rusticl too, and LeakSanitizer reports what
# rusticl allocates when it is loaded.
vendors() { # vendors NAME LIBRARY: a directory registering LIBRARY alone
  local d="$ROOT/build/vendors/$1"
  mkdir -p "$d" && rm -f "$d"/*.icd && echo "$2" >"$d/$1.icd" && echo "$d"
}
[ -s /etc/OpenCL/vendors/pocl.icd ] || { echo "test.sh: /etc/OpenCL/vendors/pocl.icd missing (apt-get install pocl-opencl-icd)" >&2; exit 1; }
OCL_ICD_VENDORS=$(vendors pocl "$(cat /etc/OpenCL/vendors/pocl.icd)") || exit 1
export OCL_ICD_VENDORS
# PoCL keeps its own cache of compiled kernels. Both builds share one, filled
# by the plain run, so the sanitizer run does not go through PoCL's LLVM
# compile path, which leaks (PoCL 3.1 / LLVM 15: with an empty POCL_CACHE_DIR
# every LeakSanitizer stack ends in libpocl.so.2 or libLLVM-15.so; with a warm
# one the suite reports no leak). We do not suppress libpocl wholesale: that
# would also hide a cl_program or cl_kernel of ours that was never released.
export POCL_CACHE_DIR="${POCL_CACHE_DIR:-$ROOT/build/pocl-cache}"
mkdir -p "$POCL_CACHE_DIR"

failed=()
times=()
slow=()
leg() { # leg NAME COMMAND...: run, time, remember
  local name=$1
  shift
  echo "== $name =="
  local t0=$SECONDS
  if "$@"; then
    times+=("$name: $((SECONDS - t0))s, passed")
  else
    times+=("$name: $((SECONDS - t0))s, FAILED")
    failed+=("$name")
  fi
}

# slowest LOG: the five slowest tests of a ctest or simulator log, one line
slowest() {
  awk '/ Test +#[0-9]+: / { print $(NF-1), $4 }
       match($0, /under Oclgrind \([0-9]+s/) { print substr($0, RSTART + 16, RLENGTH - 17), $2 }' "$1" |
    sort -rn | head -n 5 | awk '{ printf "%s%s %ss", (NR > 1 ? ", " : ""), $2, $1 } END { print "" }'
}

# suite BUILD NAME [ctest args]: the build's tests on every core, logged
suite() {
  local build=$1 name=$2
  shift 2
  ctest --test-dir "$build" -j"$jobs" --output-on-failure "$@" 2>&1 | tee "$build/ctest-$name.log"
  local rc=${PIPESTATUS[0]}
  slow+=("$name: $(slowest "$build/ctest-$name.log")")
  return "$rc"
}

build_plain() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCLF_WERROR=ON && cmake --build build -j"$jobs"
}
leg "build (Release, -Werror)" build_plain || true
if [ ${#failed[@]} -ne 0 ]; then
  echo "test.sh: the build failed" >&2
  exit 1
fi

# settle(): the kernels' shape is measured once per device and cached with
# the tests' kernels, before the tests start, so that every test of a leg
# (and every process of one) runs the same kernels.
settle() { CLFORMER_CACHE_DIR="$ROOT/build/test-cache" build/clformer devices; }
pocl() { settle && suite build pocl; }
leg "PoCL" pocl

if [ "${CLF_TEST_GPU_DRY_RUN:-1}" != "0" ]; then
  # the GPU visit's script (scripts/gpu-first-light.sh) end to end on PoCL,
  # so a broken step is found here and not in the machine's 15 minutes;
  # kernels from the PoCL leg's cache, its build step in the leg's own build
  # (configured again and its targets already built: what the step runs is
  # checked without compiling the project a second time)
  # with $OUT set as the machine sets it: what comes back from there is at
  # most 8 files, so the report must arrive as its summary and one archive
  gpu_dry() {
    rm -rf build/first-light-out && mkdir -p build/first-light-out &&
      OUT=$ROOT/build/first-light-out CLFORMER_CACHE_DIR=$ROOT/build/test-cache \
        scripts/gpu-first-light.sh --dry-run --build build --out build/first-light &&
      [ "$(find build/first-light-out -type f | wc -l)" -le 8 ] &&
      tar tzf build/first-light-out/first-light.tgz | grep -q 'first-light/summary.md$' &&
      grep -q '^## GEMM' build/first-light-out/summary.md
  }
  leg "GPU visit, dry run on PoCL" gpu_dry
fi

# the tests of the host's own behaviour, the same on every implementation:
# the PoCL and ASan legs run them, the other implementations' legs do not
host_only='disk_full|kill_resume|mpi_data_parallel|install_and_example|format|layers|layers_rejects_upward'

if [ "${CLF_TEST_INTEL:-1}" != "0" ]; then
  rm -f build/ctest-intel.log
  intel() {
    scripts/install-intel-opencl.sh build/intel-opencl || return 1
    # shellcheck disable=SC1091
    # Not here: the tests of the host's own behaviour, which the PoCL and
    # ASan legs run: disk_full (file-system behaviour; its full cache disk
    # makes Intel's compiler rebuild the sampler's kernels twice, 38 s),
    # kill_resume (signals and atomic checkpoints), mpi_data_parallel (the
    # ranks' plumbing), install_and_example (a second build), and the
    # source checks (format, layers*)
    (. build/intel-opencl/env.sh && settle && suite build intel -E "^($host_only)\$")
  }
  leg "Intel CPU OpenCL runtime" intel
  # the subshell's record of the slowest tests, read back
  [ -f build/ctest-intel.log ] && slow+=("intel: $(slowest build/ctest-intel.log)")
fi

if [ "${CLF_TEST_MESA:-1}" != "0" ]; then
  # Mesa's rusticl on its software driver, llvmpipe (Mesa 22.3.6 in Debian
  # 12): the clang -> SPIR-V -> NIR front end every Mesa GPU driver shares.
  # Its shader cache lives in the build, so a fresh clone compiles cold and
  # the leg's tests share what the first one compiled. Kernel tests run at
  # their smaller sizes (CLFORMER_TEST_SIMULATOR=1), which reach the same
  # code (and test_model_grad checks a third of each model's tensors), and
  # in the device's own shape (CLFORMER_TEST_OWN_SHAPE=1: the
  # group shape there; llvmpipe compiles the item-shaped fused attention
  # backward for over 4 minutes, and the CPU legs check that shape). Not run
  # here, because they train for minutes (llvmpipe runs the CPU recipe's
  # step in 2.0 s against PoCL's 23 ms; docs/devices.md): cli_decoder
  # (394 s there), and the host's own behaviour (above; kill_resume alone
  # takes 813 s there). Nor the command line's encoder and pretrained
  # sections (54 and 36 s there): what they check is the commands' own
  # behaviour (exit codes, messages, files), the host's, which the other
  # legs check; the numbers under them are checked on this leg by
  # test_import (the imported BERT and GPT-2 against PyTorch),
  # test_parity_seq2seq, test_trainer_seq and test_beam.
  mesa_skip="^(cli_decoder|cli_encoders|cli_pretrained|$host_only)\$"
  mesa() {
    [ -s /etc/OpenCL/vendors/rusticl.icd ] || { echo "test.sh: /etc/OpenCL/vendors/rusticl.icd missing (apt-get install mesa-opencl-icd)" >&2; return 1; }
    local v
    v=$(vendors rusticl "$(cat /etc/OpenCL/vendors/rusticl.icd)") || return 1
    (export OCL_ICD_VENDORS=$v RUSTICL_ENABLE=llvmpipe MESA_SHADER_CACHE_DIR=$ROOT/build/mesa-cache \
        CLFORMER_TEST_SIMULATOR=1 CLFORMER_TEST_OWN_SHAPE=1 CLFORMER_CACHE_DIR=$ROOT/build/test-cache &&
      settle && build/clformer selftest && suite build mesa -E "$mesa_skip")
  }
  rm -f build/ctest-mesa.log
  leg "Mesa rusticl (llvmpipe)" mesa
  [ -f build/ctest-mesa.log ] && slow+=("mesa: $(slowest build/ctest-mesa.log)")
fi

if [ "${CLF_TEST_SIMULATOR:-1}" != "0" ]; then
  simulator() {
    scripts/test-simulator.sh build
    local rc=$?
    slow+=("oclgrind: $(slowest build/simulator/summary.txt)")
    return $rc
  }
  leg "Oclgrind simulator (kernel tests)" simulator
fi

if [ "${CLF_TEST_SANITIZE:-1}" != "0" ]; then
  sanitized() {
    cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLF_WERROR=ON -DCLF_SANITIZE=ON \
      -DCLF_FAULT=ON -DCLF_TEST_CACHE_DIR="$ROOT/build/test-cache" &&
      cmake --build build-asan -j"$jobs" || return 1
    # No suppressions: with PoCL's cache warm (above) the suite runs clean
    # under ASan/UBSan with PoCL 3.1 and ocl-icd 2.3. A test that fails here
    # is run once more: LeakSanitizer's own tracer was seen to crash at exit
    # ("Tracer caught signal 11", stopping PoCL's worker threads) once in four
    # runs of the CLI test on a loaded machine. A real report reproduces and
    # still fails the run; the retry is printed by ctest.
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      suite build-asan asan --repeat until-pass:2 || return 1
    # fault injection (-DCLF_FAULT=ON, tests/fault_sweep.sh): every 8th
    # allocation, file and OpenCL call of export and tokenizer train, every
    # 50th of sample, eval --json, translate --beam 3 and import, every
    # 100th of a training run resumed to its end and of one from scratch
    # (checkpoints at steps 2 and 4), and the last ten of each,
    # failing in turn, each run clean (the whole sweep is --every 1).
    # A sweep runs one command at a time; two sweeps run side by side, of
    # about equal length, each on a warm cache of its own (a run whose fault
    # makes it measure its GEMM choices again rewrites the choice file, which
    # the other sweep must not see mid-way): the resumed training, eval and
    # translate on a copy; export, tokenizer, sample, import and the
    # training from scratch on the leg's own.
    rm -rf build/test-cache-train && cp -r build/test-cache build/test-cache-train || return 1
    (export CLFORMER_CACHE_DIR=$ROOT/build/test-cache-train &&
      tests/fault_sweep.sh build-asan/clformer --every 100 --scenarios "train" &&
      tests/fault_sweep.sh build-asan/clformer --every 50 --scenarios "eval translate") \
      >build-asan/sweep-train.log 2>&1 &
    local train=$!
    CLFORMER_CACHE_DIR=$ROOT/build/test-cache tests/fault_sweep.sh build-asan/clformer --every 8 \
      --scenarios "export tokenizer" &&
      CLFORMER_CACHE_DIR=$ROOT/build/test-cache tests/fault_sweep.sh build-asan/clformer \
        --every 50 --scenarios "sample import" &&
      CLFORMER_CACHE_DIR=$ROOT/build/test-cache tests/fault_sweep.sh build-asan/clformer \
        --every 100 --scenarios "train-fresh"
    local rest=$?
    wait "$train"
    local rc=$?
    cat build-asan/sweep-train.log
    [ "$rest" -eq 0 ] && [ "$rc" -eq 0 ]
  }
  leg "PoCL, ASan + UBSan build" sanitized
fi

if [ "${CLF_TEST_FUZZ:-1}" != "0" ]; then
  leg "libFuzzer smoke (5 harnesses, 10 s each, ASan + UBSan)" scripts/test-fuzz.sh 10 build-fuzz
fi

echo "== summary =="
printf '  %s\n' "${times[@]}"
echo "the five slowest tests of each leg:"
printf '  %s\n' "${slow[@]}"
if [ ${#failed[@]} -ne 0 ]; then
  echo "test.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: every leg passed"
