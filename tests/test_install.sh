#!/usr/bin/env bash
# test_install.sh - the installed library as a C program sees it:
#   cmake --install BUILD --prefix P, then examples/generate.c compiled with
#   cc $(pkg-config --cflags --libs clformer) against P alone, run on a model
#   trained for a few steps by the clformer built alongside; and the shared
#   library exports the public API (clf_generate, clf_model_create) but not
#   the internals (the kernel wrappers clf_op_*, the graph's mi_*).
# Usage: test_install.sh SOURCE_DIR BUILD_DIR
set -u
SRC=$1
BUILD=$2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/clf_install.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
P=$TMP/prefix
pass=0
fail=0
ok() { echo "  ok   $1"; pass=$((pass + 1)); }
bad() { echo "  FAIL $1"; fail=$((fail + 1)); }
DEV=()
if [ -n "${CLFORMER_TEST_DEVICE:-}" ]; then DEV=(--device "$CLFORMER_TEST_DEVICE"); fi

if cmake --install "$BUILD" --prefix "$P" >"$TMP/install.log" 2>&1; then
  ok "cmake --install to a fresh prefix"
else
  cat "$TMP/install.log"; bad "cmake --install to a fresh prefix"
fi
for f in include/clformer/clformer.h lib/libclformer.a lib/libclformer.so \
         lib/pkgconfig/clformer.pc lib/cmake/clformer/clformerConfig.cmake; do
  if [ -e "$P/$f" ]; then ok "installed $f"; else bad "installed $f"; fi
done

flags=$(PKG_CONFIG_PATH="$P/lib/pkgconfig" pkg-config --cflags --libs clformer 2>"$TMP/pc.err")
if [ $? -eq 0 ] && cc -std=c11 -Wall -Wextra -Werror "$SRC/examples/generate.c" $flags \
     -o "$TMP/generate" 2>"$TMP/cc.log"; then
  ok "examples/generate.c builds with pkg-config --cflags --libs clformer ($flags)"
else
  cat "$TMP/pc.err" "$TMP/cc.log"; bad "examples/generate.c builds against the installed copy"
fi
# The example must not have seen the source tree: its include path is P's.
case "$flags" in *"$SRC"*) bad "pkg-config flags point into the source tree";; *) ok "pkg-config flags name only the prefix";; esac

syms=$(nm -D --defined-only "$P/lib/libclformer.so" 2>/dev/null | awk '{print $3}')
for s in clf_generate clf_model_create clf_checkpoint_open clf_runtime_create clf_version; do
  if grep -qx "$s" <<<"$syms"; then ok "exports $s"; else bad "exports $s"; fi
done
if grep -qE '^(clf_op_|mi_|clf_gemm_native_)' <<<"$syms"; then
  bad "internal symbols exported: $(grep -E '^(clf_op_|mi_|clf_gemm_native_)' <<<"$syms" | head -3 | tr '\n' ' ')"
else
  ok "no internal symbol (clf_op_*, mi_*, clf_gemm_native_*) exported"
fi

# A model to generate from: the tiny test GPT, a few steps.
if "$BUILD/clformer" train "$SRC/config/models/gpt-tiny-test.yaml" --data "$SRC/data/tinyshakespeare.txt" \
     --out "$TMP/run" --set train.steps=5 "${DEV[@]}" >"$TMP/train.log" 2>&1; then
  ok "a tiny model trained"
else
  cat "$TMP/train.log"; bad "a tiny model trained"
fi
CLFORMER_DEVICE=${CLFORMER_TEST_DEVICE:-} LD_LIBRARY_PATH="$P/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  "$TMP/generate" "$TMP/run" "ROMEO:" 40 >"$TMP/out.txt" 2>"$TMP/err.txt"
rc=$?
n=$(wc -c <"$TMP/out.txt")
if [ $rc -eq 0 ] && [ "$n" -ge 46 ] && head -c 6 "$TMP/out.txt" | grep -q "ROMEO:" && grep -q "40 tokens" "$TMP/err.txt"; then
  ok "the example generates 40 tokens from the checkpoint ($n bytes: $(head -c 60 "$TMP/out.txt" | tr '\n' ' '))"
else
  cat "$TMP/out.txt" "$TMP/err.txt"; bad "the example generates text (exit $rc, $n bytes)"
fi
LD_LIBRARY_PATH="$P/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$TMP/generate" "$TMP/missing" >/dev/null 2>"$TMP/err2.txt"
rc=$?
if [ $rc -eq 1 ] && grep -q "missing" "$TMP/err2.txt"; then
  ok "a missing checkpoint is an error naming it"
else
  cat "$TMP/err2.txt"; bad "a missing checkpoint is an error naming it (exit $rc)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
