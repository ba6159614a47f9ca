#!/usr/bin/env bash
# Runs systems/collectives as separate processes: 4 ranks with every collective verified, 4
# ranks where one rank (the broadcast root, then another) dies after the first barrier and every
# other rank must report an error naming it, and 8 ranks. CAF_RDMA_TRANSPORT=fallback (native)
# or rdma (rdma-tagged, in the VM). Writes one test case per run into $XML_OUTPUT_FILE.
set -uo pipefail
mode=${CAF_RDMA_TRANSPORT:-fallback}
bin=${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-caf_rdma}/systems/collectives/collectives
xml=${XML_OUTPUT_FILE:-/dev/null}
suite="Collectives_${mode}"
source "$(dirname "$0")/../sh_test_lib.sh"
skip_without_device four_ranks_verified root_dies_others_name_it member_dies_others_name_it \
  eight_ranks_verified

run() {  # name expected-line... -- collectives args
  local name=$1; shift
  local args=()
  while [ "$1" != -- ]; do args+=("$1"); shift; done
  shift
  run_case "$name" 400 "${args[@]}" -- "$bin" "$@"
}

run four_ranks_verified "collectives: OK: 4 ranks" "rank 3: all-to-all .*(path $path) verified x2" \
  "rank 1: broadcast .*(path $path) verified x2" "rank 2: send/recv .*(path $path) verified x2" \
  -- --ranks 4 --size 2M --iters 2
run root_dies_others_name_it "each of the 3 others reported an error naming rank 0" \
  -- --ranks 4 --size 256K --iters 1 --kill-rank 0 --timeout-ms 20000
run member_dies_others_name_it "each of the 3 others reported an error naming rank 2" \
  -- --ranks 4 --size 256K --iters 1 --kill-rank 2 --timeout-ms 20000
run eight_ranks_verified "collectives: OK: 8 ranks" "rank 7: all-to-all .*(path $path) verified x1" \
  -- --ranks 8 --size 512K --iters 1
write_xml
echo "collectives ($mode): $failures failed"
[ $failures -eq 0 ]
