#!/usr/bin/env bash
# setup.sh - install what clformer needs on Debian/Ubuntu, only what is missing.
#
# Idempotent and quick when everything is present (one dpkg query). Needs root
# or sudo only when something must be installed.
#   build: cmake, a C compiler, OpenCL headers + ICD loader, CLBlast, libyaml, zlib
#   run:   PoCL (the CPU OpenCL driver; GPUs bring their vendor's driver)
#   bench: OpenBLAS (the CPU BLAS peer of bench/gemm)
#   mpi:   Open MPI (data-parallel training under mpirun; without it train
#          runs as one process)
#   --test adds what the whole suite uses (scripts/test.sh): clang (with
#   libclang-rt-dev, libFuzzer for the fuzz leg), clang-15 and llvm-spirv-15
#   (the SPIR-V check of every kernel, test_spirv), Mesa's OpenCL
#   (mesa-opencl-icd: rusticl, the Mesa leg), Oclgrind (the simulator leg),
#   unzip and pip
#   (Intel's CPU runtime from its wheels), clang-format (the format test).
set -euo pipefail

packages=(cmake make gcc pkg-config opencl-headers ocl-icd-opencl-dev ocl-icd-libopencl1
          libclblast-dev libyaml-dev zlib1g-dev pocl-opencl-icd libopenblas-dev
          libopenmpi-dev openmpi-bin)
if [ "${1:-}" = "--test" ]; then
  packages+=(clang libclang-rt-dev clang-15 llvm-spirv-15 mesa-opencl-icd oclgrind unzip python3-pip
            clang-format)
fi
if [ "${CLF_SETUP_EXTRA:-}" != "" ]; then
  read -r -a extra <<<"$CLF_SETUP_EXTRA"
  packages+=("${extra[@]}")
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all dependencies present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
  else
    echo "setup: need root or sudo to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
