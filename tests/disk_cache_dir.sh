#!/usr/bin/env bash
# disk_cache_dir.sh: prints the directory of Bazel's disk cache, as .bazelrc's
# `build --disk_cache=` line names it (the one place it is written), with ~ expanded; prints
# nothing when .bazelrc names none. Used by tests/prune_disk_cache.sh and
# tests/external/run_external.sh (the external workspace shares the cache).
set -uo pipefail
root=$(realpath "$(dirname "$(realpath "$0")")/..")
dir=$(sed -n 's/^build --disk_cache=//p' "$root/.bazelrc")
[ -n "$dir" ] && echo "${dir/#\~/$HOME}"
exit 0
