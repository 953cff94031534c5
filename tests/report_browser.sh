#!/usr/bin/env bash
# report_browser.sh - `clformer report`'s page opened in a real browser:
# Chromium renders it headless to a PNG (a page it cannot lay out, or one
# that fetches anything, fails here: the run has no network). Skipped (exit
# 77) where Chromium is not installed.
#
#   tests/report_browser.sh path/to/clformer [KEEP_DIR]
#
# KEEP_DIR: keep the page and its screenshot there (to look at).
set -u
BIN=${1:?usage: report_browser.sh path/to/clformer [KEEP_DIR]}
SRC=${CLF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$CHROME" ] || { echo "report_browser: skipped (no Chromium)"; exit 77; }
DEV=()
if [ -n "${CLFORMER_TEST_DEVICE:-}" ]; then DEV=(--device "$CLFORMER_TEST_DEVICE"); fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/clf_report.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
"$BIN" train "$SRC/config/models/gpt-tiny-test.yaml" --data "$SRC/data/tinyshakespeare.txt" --out "$TMP/run" \
  --set train.steps=60 --set train.eval.every=20 "${DEV[@]}" >"$TMP/train.log" 2>&1 ||
  { echo "report_browser: training failed"; tail -3 "$TMP/train.log"; exit 1; }
"$BIN" report "$TMP/run" --out "$TMP/report.html" "${DEV[@]}" >"$TMP/report.log" 2>&1 ||
  { echo "report_browser: clformer report failed"; cat "$TMP/report.log"; exit 1; }
# a profile of its own (no state of the user's), no network
timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$TMP/profile" \
  --proxy-server=127.0.0.1:9 --window-size=1000,1400 --screenshot="$TMP/report.png" \
  "file://$TMP/report.html" >"$TMP/chrome.log" 2>&1
rc=$?
# the PNG's size from its header (bytes 16-23: width, height)
dims=$(od -An -tu1 -j16 -N8 "$TMP/report.png" 2>/dev/null | awk '{print $1*16777216+$2*65536+$3*256+$4 "x" $5*16777216+$6*65536+$7*256+$8}')
bytes=$(stat -c %s "$TMP/report.png" 2>/dev/null || echo 0)
if [ -n "${2:-}" ]; then mkdir -p "$2" && cp "$TMP/report.html" "$TMP/report.png" "$2/"; fi
if [ "$rc" -ne 0 ] || [ "$dims" != "1000x1400" ] || [ "$bytes" -lt 20000 ]; then
  echo "report_browser: Chromium exit $rc, screenshot $dims, $bytes bytes"
  tail -5 "$TMP/chrome.log"
  exit 1
fi
echo "report_browser: Chromium rendered the report ($dims, $bytes bytes)"
