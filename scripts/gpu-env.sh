# shellcheck shell=bash
# gpu-env.sh - source on a GPU machine without a package registry, in the
# repository root: unpacks the .deb files of scripts/gpu-debs.sh into
# /tmp/clf-root (never into /), points the compiler, CMake and the loader at
# them, and registers the NVIDIA driver's OpenCL library with the ICD loader
# through OCL_ICD_VENDORS. Then build and test as usual:
#
#   . scripts/gpu-env.sh .gpu-debs
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j
#   build/clformer devices && build/clformer selftest --device gpu
#   CLFORMER_TEST_DEVICE=gpu ctest --test-dir build --output-on-failure
#
# Written for the NVIDIA H100 machines lent to sessions; not yet run there.
_clf_debs=${1:-.gpu-debs}
_clf_root=/tmp/clf-root
mkdir -p "$_clf_root" "$_clf_root/vendors"
for _f in "$_clf_debs"/*.deb; do dpkg -x "$_f" "$_clf_root"; done
_clf_lib=$_clf_root/usr/lib/x86_64-linux-gnu
# A -dev package's libX.so may point at an absolute path of Debian's runtime
# package (zlib1g-dev: /lib/x86_64-linux-gnu/libz.so.1.2.13) that another
# distribution names differently: such a link is pointed at the machine's own
# library of that name, and a static archive beside it is removed so that
# the shared library is never linked with non-PIC code.
for _f in "$_clf_lib"/*.so; do
  { [ -L "$_f" ] && [ ! -e "$_f" ]; } || continue
  _clf_nv=$(ldconfig -p 2>/dev/null | awk -v n="$(basename "$_f")." 'index($1, n) == 1 {print $NF; exit}')
  [ -n "$_clf_nv" ] && ln -sf "$_clf_nv" "$_f"
  rm -f "${_f%.so}.a"
done
export CPATH="$_clf_root/usr/include${CPATH:+:$CPATH}"
export LIBRARY_PATH="$_clf_lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
export LD_LIBRARY_PATH="$_clf_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CMAKE_PREFIX_PATH="$_clf_root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export PKG_CONFIG_PATH="$_clf_lib/pkgconfig:$_clf_root/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PATH="$_clf_root/usr/bin:$PATH"
# The driver's OpenCL library: wherever the image keeps it.
_clf_nv=$(ldconfig -p 2>/dev/null | awk '/libnvidia-opencl.so.1/{print $NF; exit}')
[ -n "$_clf_nv" ] || _clf_nv=$(find /usr/local/nvidia /usr/lib /usr/lib64 -name 'libnvidia-opencl.so.1' 2>/dev/null | head -n 1)
if [ -n "$_clf_nv" ]; then
  echo "$_clf_nv" >"$_clf_root/vendors/nvidia.icd"
  export OCL_ICD_VENDORS="$_clf_root/vendors"
  echo "gpu-env: OpenCL vendor $(cat "$_clf_root/vendors/nvidia.icd")"
else
  echo "gpu-env: libnvidia-opencl.so.1 not found; OpenCL will see no GPU" >&2
fi
unset _clf_debs _clf_root _clf_lib _clf_f _clf_nv
