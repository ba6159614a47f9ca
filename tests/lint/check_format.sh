#!/usr/bin/env bash
# Fails (listing the files) when a C++ or CUDA source differs from .clang-format's layout.
# Fix with: git ls-files '*.cc' '*.h' '*.cu' | xargs clang-format-14 -i
set -uo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
command -v clang-format-14 >/dev/null ||
  { echo "check_format: clang-format-14 missing: run third_party/install_deps.sh" >&2; exit 2; }
bad=()
while IFS= read -r f; do
  clang-format-14 --style=file --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.cc' '*.h' '*.cu')
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} file(s) not formatted: ${bad[*]}" >&2
  exit 1
fi
echo "check_format: all $(git ls-files '*.cc' '*.h' '*.cu' | wc -l) sources formatted"
