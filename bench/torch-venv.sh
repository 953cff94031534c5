#!/usr/bin/env bash
# torch-venv.sh - a virtual environment with PyTorch from PyPI, the peer a
# user who wants speed on a CPU installs today (MKL, oneDNN, torch.compile),
# for bench/run_all.sh --venv DIR. On request only: the suite never runs it
# (the wheels with their CUDA libraries are about 5 GB).
#
#   bench/torch-venv.sh DIR [TORCH_VERSION]     (default 2.15.0)
#
# Needs python3-venv (Debian: apt-get install python3-venv) and PyPI.
# Leaves DIR alone when its python already imports torch of that version.
set -eu
DIR=${1:?usage: bench/torch-venv.sh DIR [TORCH_VERSION]}
VER=${2:-2.15.0}
if [ -x "$DIR/bin/python" ] &&
   "$DIR/bin/python" -c "import sys, torch, numpy, yaml; sys.exit(torch.__version__.split('+')[0] != '$VER')" 2>/dev/null; then
    echo "torch-venv: $DIR has torch $VER"
    exit 0
fi
python3 -m venv "$DIR" || {
    echo "torch-venv: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
"$DIR/bin/pip" install --quiet --upgrade pip
"$DIR/bin/pip" install --quiet "torch==$VER" numpy pyyaml
"$DIR/bin/python" -c "import torch; print('torch-venv: torch', torch.__version__, 'in $DIR, MKL', torch.backends.mkl.is_available())"
