#!/usr/bin/env bash
# install-intel-opencl.sh - Intel's CPU OpenCL runtime (OpenCL 3.0, a second
# compiler, fp16, subgroups) from its PyPI wheels, into a folder, for any
# x86-64 CPU (AMD ones included). No root needed; nothing outside DEST is
# touched.
#
#   scripts/install-intel-opencl.sh [DEST]     (default: build/intel-opencl)
#   . DEST/env.sh                               (this shell now sees only Intel's runtime)
#   build/clformer devices
#
# How: pip downloads intel-opencl-rt, intel-cmplr-lib-rt (libsvml, libimf,
# libirng, libintlc) and tbb; the wheels are unzipped (pip's --target does
# not place their data/lib files); DEST/vendors/intel-cpu.icd names
# libintelocl.so for the ICD loader, and env.sh points OCL_ICD_VENDORS at
# DEST/vendors and LD_LIBRARY_PATH at the three lib folders. The wheel's own
# libOpenCL.so (an ICD loader) is removed so the system's loader stays the
# one programs link. Idempotent: a second run checks and returns.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-build/intel-opencl}
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
OCL_RT=intel-opencl-rt==2026.2.0
CMPLR=intel-cmplr-lib-rt==2026.2.0
TBB=tbb==2023.2.0

if [ -f "$DEST/.installed" ] && [ "$(cat "$DEST/.installed")" = "$OCL_RT $CMPLR $TBB" ]; then
  echo "install-intel-opencl: present in $DEST"
  exit 0
fi
command -v unzip >/dev/null 2>&1 || { echo "install-intel-opencl: needs unzip (apt-get install unzip)" >&2; exit 1; }
py=$(command -v python3 || true)
[ -n "$py" ] || { echo "install-intel-opencl: needs python3 with pip" >&2; exit 1; }

echo "install-intel-opencl: downloading $OCL_RT $CMPLR $TBB"
mkdir -p "$DEST/wheels"
"$py" -m pip download --quiet --no-deps --only-binary=:all: -d "$DEST/wheels" "$OCL_RT" "$CMPLR" "$TBB"
for w in "$DEST"/wheels/*.whl; do
  name=$(basename "$w" | cut -d- -f1)
  rm -rf "${DEST:?}/$name"
  unzip -q -o "$w" -d "$DEST/$name"
done
libs=()
for name in intel_opencl_rt intel_cmplr_lib_rt tbb; do
  d=$(find "$DEST/$name" -type d -path '*/data/lib' | head -n 1)
  [ -n "$d" ] || { echo "install-intel-opencl: no data/lib in the $name wheel" >&2; exit 1; }
  libs+=("$d")
done
ocl_lib=${libs[0]}
[ -f "$ocl_lib/libintelocl.so" ] || { echo "install-intel-opencl: libintelocl.so not in $ocl_lib" >&2; exit 1; }
rm -f "$ocl_lib"/libOpenCL.so*
mkdir -p "$DEST/vendors"
echo "$ocl_lib/libintelocl.so" > "$DEST/vendors/intel-cpu.icd"
ldpath=$(IFS=:; echo "${libs[*]}")
cat > "$DEST/env.sh" <<ENV
# Source this file: OpenCL programs in this shell see Intel's CPU runtime only.
export OCL_ICD_VENDORS="$DEST/vendors"
export LD_LIBRARY_PATH="$ldpath\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
ENV
rm -rf "$DEST/wheels"
echo "$OCL_RT $CMPLR $TBB" > "$DEST/.installed"
echo "install-intel-opencl: installed in $DEST; use it with: . $DEST/env.sh"
