#!/usr/bin/env bash
# check_format.sh - every C source and header is formatted as .clang-format
# says (clang-format --dry-run --Werror). Skipped (exit 77) without
# clang-format 14, the version the tree was formatted with: other versions
# place a few breaks differently.
# Usage: check_format.sh SOURCE_DIR
set -u
cd "$1" || exit 1
command -v clang-format >/dev/null 2>&1 || { echo "clang-format not found: skipped"; exit 77; }
v=$(clang-format --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
[ "$v" = "14" ] || { echo "clang-format $v (not 14): skipped"; exit 77; }
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find runtime config model cli tests bench examples -name '*.[ch]')
n=$(echo "$files" | wc -w)
if clang-format --dry-run --Werror $files; then
  echo "1 passed, 0 failed ($n files formatted as .clang-format says)"
else
  echo "0 passed, 1 failed (run: clang-format -i \$(git ls-files '*.c' '*.h'))"
  exit 1
fi
