#!/usr/bin/env bash
# Runs clang-tidy-14 (.clang-tidy) over every C++ source of this repository but the tests', as
# Bazel actions (tests/lint/tidy.bzl: one per source, with the command gcc compiles it with), so
# Bazel's disk cache (.bazelrc) keeps each source's result: a run redoes only the sources whose
# code, headers or flags changed. Fails on any finding, in a source or in a header it includes.
# The tests' sources (90 of 230, ~15 s each, most of it parsing: a third of the lane's time) are
# left out: what they protect is the library's code, which is checked here, and the tests
# themselves are compiled by gcc and clang with -Wall -Wextra and run under ASan, UBSan and TSan.
# Usage: check_tidy.sh [bazel startup options...]   (run_tests.sh passes --output_user_root)
# For an editor's clang tooling, tests/lint/compile_commands.py writes compile_commands.json.
set -uo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
command -v clang-tidy-14 >/dev/null ||
  { echo "check_tidy: clang-tidy-14 missing: run third_party/install_deps.sh" >&2; exit 2; }
t0=$(date +%s)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
bazel "$@" build --keep_going --aspects=//tests/lint:tidy.bzl%tidy_aspect --output_groups=tidy \
  //... >"$out" 2>&1
rc=$?
# tidy_action.py, the one judge of a finding, ends each failed source with
# "tidy: SOURCE: N finding(s)": their sum.
findings=$(sed -nE 's/^tidy: .*: ([0-9]+) finding\(s\).*/\1/p' "$out" | awk '{n += $1} END {print n + 0}')
if [ "$rc" -ne 0 ] || [ "$findings" -ne 0 ]; then
  grep -vE '^(\[|INFO:|Loading|Analyzing)' "$out" | head -200
  echo "check_tidy: $findings finding(s) (bazel exit $rc)" >&2
  exit 1
fi
# The sources checked: the aspect's outputs (<target>.tidy/<source>.txt) of sources still here.
bin=$(bazel "$@" info bazel-bin 2>/dev/null)
sources=$(git ls-files '*.cc' '*.cu')
checked=$(cd "$bin" && find . -path '*.tidy/*.txt' | sed 's|^.*\.tidy/||; s|\.txt$||' | sort -u |
          grep -cxF "$sources")
echo "check_tidy: $checked sources, no findings ($(( $(date +%s) - t0 )) s; Bazel:" \
  "$(grep -oE '[0-9]+ processes: .*' "$out" | tail -1))"
