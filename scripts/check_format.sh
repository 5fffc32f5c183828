#!/usr/bin/env bash
# Fails when a C++ source of llmsim (not the generated single headers) differs from what
# clang-format-14 makes of it with the repository's .clang-format (120 columns).
# Fix with: git ls-files '*.hpp' '*.cpp' | grep -v '^single_include/' | xargs clang-format-14 -i
set -euo pipefail
cd "$(dirname "$0")/.."
format=${CLANG_FORMAT:-clang-format-14}
mapfile -t files < <(git ls-files '*.hpp' '*.cpp' | grep -v '^single_include/')
"$format" --dry-run --Werror "${files[@]}"
echo "format: ${#files[@]} files conform to .clang-format"
