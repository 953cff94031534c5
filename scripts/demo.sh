#!/usr/bin/env bash
# demo.sh - the README's main command: install what is missing, build, train
# a character-level GPT on the bundled tiny Shakespeare for a few minutes
# with the live progress line, evaluate it on the whole validation split,
# print a sample, and draw the run: its curves (runs/demo/loss.svg), what
# the last layer's heads attend to (runs/demo/attention.svg) and a report
# page (runs/demo/report.html).
#
#   scripts/demo.sh                      # default device ($CLFORMER_DEVICE, else first GPU/CPU)
#   CLFORMER_DEVICE=cpu scripts/demo.sh  # choose the device
#   CLF_DEMO_STEPS=500 scripts/demo.sh   # a shorter run (the cosine schedule decays over it)
#
# The model is config/models/gpt-shakespeare-cpu.yaml, nanoGPT's CPU recipe
# (4 layers, 4 heads, 128 dims, context 64), for CLF_DEMO_STEPS steps
# (default 2000, the whole recipe). On an idle 2-core Xeon with PoCL the 2000
# steps took 111 s, evaluations included (several times that when other jobs
# share the cores), plus a minute or two to compile the kernels on the first
# run (they are cached after). Expect a validation loss near 1.90 (500 steps:
# about 2.2). Idempotent: every run rebuilds what changed and retrains from
# scratch into runs/demo.
set -euo pipefail
cd "$(dirname "$0")/.."

steps=${CLF_DEMO_STEPS:-2000}
jobs=$(nproc 2>/dev/null || echo 2)

scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"

rm -rf runs/demo
echo
echo "== training (${steps} steps; Ctrl-C stops with a checkpoint) =="
build/clformer train config/models/gpt-shakespeare-cpu.yaml --data data/tinyshakespeare.txt \
  --out runs/demo --set train.steps="$steps"
echo
echo "== evaluation on the whole validation split =="
build/clformer eval runs/demo --data data/tinyshakespeare.txt
echo
echo "== sample =="
build/clformer sample runs/demo --prompt "ROMEO:" --tokens 300 --temperature 0.8 --seed 1337
echo
echo "== pictures of the run =="
build/clformer plot runs/demo --out runs/demo/loss.svg
build/clformer attention runs/demo --text "ROMEO: But soft" --layer 3 --out runs/demo/attention.svg
build/clformer report runs/demo --out runs/demo/report.html
echo "open runs/demo/report.html in a browser (the curves, the sample, the config);"
echo "runs/demo/loss.svg and runs/demo/attention.svg are the pictures alone"
