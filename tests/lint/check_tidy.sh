#!/usr/bin/env bash
# Runs clang-tidy-14 (.clang-tidy) over every C++ source of this repository but the tests' with
# Bazel's own compile commands (tests/lint/compile_commands.py); fails on any finding, in a source
# or in a header it includes (clang-tidy names headers relative to the root, "./actors/...").
# The tests' sources (90 of 230, ~15 s each, most of it parsing: a third of the lane's time) are
# left out: what they protect is the library's code, which is checked here, and the tests
# themselves are compiled by gcc and clang with -Wall -Wextra and run under ASan, UBSan and TSan.
# Usage: check_tidy.sh [--prepare | --tidy] [bazel startup options...]
#   (run_tests.sh passes --output_user_root)
# Builds //... first (the execution root's links to every package; a no-op after the native lane)
# and writes the compile commands; then runs clang-tidy. --prepare does only the first part (it
# uses Bazel), --tidy only the second (it does not: run_tests.sh runs it beside other lanes).
set -uo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
part=all
case ${1:-} in --prepare) part=prepare; shift ;; --tidy) part=tidy; shift ;; esac
command -v run-clang-tidy-14 >/dev/null ||
  { echo "check_tidy: clang-tidy-14 missing: run third_party/install_deps.sh" >&2; exit 2; }
t0=$(date +%s)
if [ $part != tidy ]; then
  # Built from here, not from Python: the actions' environment includes PATH, which pyenv's
  # python3 changes, and a different PATH rebuilds the whole tree (twice: there and after).
  # After the native lane's `bazel test //...` this finds nothing to do.
  bazel "$@" build //... >/dev/null 2>&1 || { echo "check_tidy: bazel build //... failed" >&2; exit 2; }
  python3 tests/lint/compile_commands.py "$@" || { echo "check_tidy: no compile commands" >&2; exit 2; }
fi
[ $part != prepare ] || exit 0
[ -f compile_commands.json ] || { echo "check_tidy: no compile_commands.json (run with --prepare first)" >&2; exit 2; }
t1=$(date +%s)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Every top-level folder that holds C++ sources but tests/ (a new one is checked without editing
# this).
folders=$(git ls-files '*.cc' '*.cu' | grep / | cut -d/ -f1 | sort -u | grep -vx tests | paste -sd'|')
[ -n "$folders" ] || { echo "check_tidy: no C++ sources found with git ls-files (not a git checkout?)" >&2; exit 2; }
run-clang-tidy-14 -quiet -p . -j "$(nproc)" "$PWD/($folders)/" \
  2>&1 | sed 's/\x1b\[[0-9;]*m//g' >"$out"
rc=${PIPESTATUS[0]}
findings=$(grep -cE '^\.?/.*: (warning|error):' "$out")
if [ "$rc" -ne 0 ] || [ "$findings" -ne 0 ]; then
  grep -E -A3 '^\.?/.*: (warning|error):' "$out" | head -200
  echo "check_tidy: $findings finding(s) (run-clang-tidy exit $rc)" >&2
  exit 1
fi
checked=$(python3 -c 'import json,re,sys;print(sum(1 for e in json.load(open("compile_commands.json")) if re.search(sys.argv[1],e["file"])))' "$PWD/($folders)/")
echo "check_tidy: $checked sources, no findings" \
  "(compile commands $((t1 - t0)) s, clang-tidy $(($(date +%s) - t1)) s)"
