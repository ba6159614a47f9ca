#!/usr/bin/env bash
# prune_disk_cache.sh: keeps Bazel's disk cache (.bazelrc's --disk_cache, the one place its path
# is written) under CAF_RDMA_DISK_CACHE_GB gigabytes (default 30). Bazel 4.2 never deletes from
# it, and one whole run of the suite writes about 14 GB when the library changed (every test
# relinked under three configurations). Past the limit, the entries least recently used go
# (last read or written: the file's access time, which the relatime mount updates on a read after
# a write, or its modification time) until it holds at most half the limit: the newest run's
# entries stay, and the next run's fit. A missing entry is only a cache miss (the action runs).
# (It once deleted everything past the limit: the second run of a day then found an empty cache.)
# Prints the path with the sizes before and after.
# Usage: prune_disk_cache.sh (run_tests.sh runs it first).
set -uo pipefail
root=$(realpath "$(dirname "$(realpath "$0")")/..")
dir=$(bash "$root/tests/disk_cache_dir.sh")
[ -n "$dir" ] || { echo "prune_disk_cache: no --disk_cache in .bazelrc" >&2; exit 0; }
[ -d "$dir" ] || { echo "prune_disk_cache: $dir: empty (not created yet)"; exit 0; }
limit_gb=${CAF_RDMA_DISK_CACHE_GB:-30}
size_gb() { du -s --block-size=1G "$dir" 2>/dev/null | cut -f1; }
before=$(size_gb)
if [ "$before" -gt "$limit_gb" ]; then
  # Newest use first; the files past the first limit/2 GB (by size in blocks) are deleted.
  find "$dir" -type f -printf '%A@ %T@ %b %p\n' |
    awk '{ t = ($1 > $2) ? $1 : $2; print t, $3 * 512, $4 }' | sort -rn -k1,1 |
    awk -v keep=$(( limit_gb * 1024 * 1024 * 1024 / 2 )) '{ kept += $2; if (kept > keep) print $3 }' |
    xargs -r -d '\n' rm -f
fi
echo "prune_disk_cache: $dir: ${before} GB before, $(size_gb) GB now (limit ${limit_gb} GB: CAF_RDMA_DISK_CACHE_GB)"
