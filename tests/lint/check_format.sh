#!/usr/bin/env bash
# Fails (listing the files) when a C++ or CUDA source differs from .clang-format's layout, or
# when a BUILD file of caf-rdma declares C++ targets with Bazel's native rules instead of //:cc.bzl's
# (which give every target C++17 and link the libraries statically: see cc.bzl).
# Fix with: git ls-files '*.cc' '*.h' '*.cu' | xargs clang-format-14 -i
set -uo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
command -v clang-format-14 >/dev/null ||
  { echo "check_format: clang-format-14 missing: run third_party/install_deps.sh" >&2; exit 2; }
# Many files per clang-format, on every core: it names each file that differs
# ("FILE:LINE:COL: error: code should be clang-formatted").
report=$(git ls-files -z '*.cc' '*.h' '*.cu' |
         xargs -0 -n 32 -P "$(nproc)" clang-format-14 --style=file --dry-run --Werror 2>&1)
bad=($(grep -oE '^[^ :]+:[0-9]+:[0-9]+: error: code should be clang-formatted' <<<"$report" |
       cut -d: -f1 | sort -u))
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} file(s) not formatted: ${bad[*]}" >&2
  exit 1
fi
if grep -q . <<<"$report"; then  # clang-format itself failed (a file it could not read, ...)
  echo "check_format: clang-format-14 failed: $(head -5 <<<"$report")" >&2
  exit 1
fi
# BUILD files (not third_party's stand-ins, not examples/external: another workspace, as a user
# writes it) and .bzl macros: C++ rules only from //:cc.bzl.
bad_rules=()
while IFS= read -r f; do
  if grep -qE '^(cc_library|cc_binary|cc_test)\(' "$f" && ! grep -q '^load("//:cc.bzl"' "$f"; then
    bad_rules+=("$f")
  fi
done < <(git ls-files '*BUILD.bazel' '*/BUILD' | grep -Ev '^(third_party|examples/external)/')
while IFS= read -r f; do
  grep -qE 'native\.cc_(library|binary|test)\(' "$f" && bad_rules+=("$f")
done < <(git ls-files '*.bzl' | grep -Ev '^(cc\.bzl|third_party/.*)$')
if [ ${#bad_rules[@]} -gt 0 ]; then
  echo "check_format: ${#bad_rules[@]} file(s) declare C++ targets without //:cc.bzl's rules" \
    "(load(\"//:cc.bzl\", \"cc_library\", ...)): ${bad_rules[*]}" >&2
  exit 1
fi
echo "check_format: all $(git ls-files '*.cc' '*.h' '*.cu' | wc -l) sources formatted"
