#!/usr/bin/env bash
# gpu-debs.sh - download (here, where Debian's registry is reachable) the
# x86-64 .deb files that building and testing clformer needs on a GPU machine
# that has no package registry: the OpenCL ICD loader and headers, CLBlast,
# libyaml, zlib's headers. Nothing is installed here.
#
#   scripts/gpu-debs.sh [DIR]        (default: .gpu-debs, which .gitignore ignores)
#
# On the GPU machine, with DIR carried along: . scripts/gpu-env.sh DIR
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.gpu-debs}
mkdir -p "$DIR" /tmp/clf-apt/partial
o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/clf-apt)
apt-get "${o[@]}" update -q
(cd "$DIR" && apt-get "${o[@]}" download ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-c-headers \
   opencl-clhpp-headers opencl-headers libclblast1 libclblast-dev libyaml-0-2 libyaml-dev \
   zlib1g-dev pkg-config clinfo)
ls -la "$DIR"
