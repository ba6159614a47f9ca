#!/usr/bin/env bash
# prune_disk_cache.sh: keeps Bazel's disk cache (.bazelrc's --disk_cache, the one place its path
# is written) under CAF_RDMA_DISK_CACHE_GB gigabytes (default 30). Bazel never deletes from it,
# and a change to the library relinks every test (about 7 GB under ASan): past the limit, the
# entries written more than a day ago go, then, if it is still past, all of them. A missing
# entry is only a cache miss (the action runs). Prints the path with the sizes before and after
# Usage: prune_disk_cache.sh (run_tests.sh runs it first).
set -uo pipefail
root=$(realpath "$(dirname "$(realpath "$0")")/..")
dir=$(sed -n 's/^build --disk_cache=//p' "$root/.bazelrc")
[ -n "$dir" ] || { echo "prune_disk_cache: no --disk_cache in .bazelrc" >&2; exit 0; }
dir=${dir/#\~/$HOME}
[ -d "$dir" ] || { echo "prune_disk_cache: $dir: empty (not created yet)"; exit 0; }
limit_gb=${CAF_RDMA_DISK_CACHE_GB:-30}
size_gb() { du -s --block-size=1G "$dir" 2>/dev/null | cut -f1; }
before=$(size_gb)
if [ "$before" -gt "$limit_gb" ]; then
  find "$dir" -type f -mtime +0 -delete
  [ "$(size_gb)" -le "$limit_gb" ] || find "$dir" -type f -delete
fi
echo "prune_disk_cache: $dir: ${before} GB before, $(size_gb) GB now (limit ${limit_gb} GB: CAF_RDMA_DISK_CACHE_GB)"
