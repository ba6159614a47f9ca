#!/usr/bin/env bash
# Runs examples/collectives as separate processes: 4 ranks with every collective verified, 4
# ranks where one rank (the broadcast root, then another) dies after the first barrier and every
# other rank must report an error naming it, and 8 ranks. CAF_RDMA_TRANSPORT=fallback (native)
# or rdma (rdma-tagged, in the VM). Writes one test case per run into $XML_OUTPUT_FILE.
set -uo pipefail
mode=${CAF_RDMA_TRANSPORT:-fallback}
bin=${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-caf_rdma}/examples/collectives/collectives
xml=${XML_OUTPUT_FILE:-/dev/null}
suite="Collectives_${mode}"
cases=()
failures=0
skipped=0

record() {  # name passed|failed|skipped message
  local body=""
  case $2 in
    failed) body="<failure message=\"$(printf '%s' "$3" | sed 's/&/\&amp;/g; s/"/\&quot;/g; s/</\&lt;/g')\"/>" ;;
    skipped) body="<skipped message=\"$3\"/>" ;;
  esac
  cases+=("<testcase classname=\"$suite\" name=\"$1\" status=\"run\" result=\"$2\">$body</testcase>")
}

write_xml() {
  {
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo "<testsuites tests=\"${#cases[@]}\" failures=\"$failures\" skipped=\"$skipped\">"
    echo "<testsuite name=\"$suite\" tests=\"${#cases[@]}\" failures=\"$failures\" skipped=\"$skipped\">"
    printf '%s\n' "${cases[@]}"
    echo "</testsuite></testsuites>"
  } > "$xml"
}

names=(four_ranks_verified root_dies_others_name_it member_dies_others_name_it eight_ranks_verified)
if [ "$mode" = rdma ] && [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
  reason="no RDMA device on this host (run bazel test --config=rxe //... for the Soft-RoCE VM)"
  if [ "${CAF_RDMA_REQUIRE_DEVICE:-}" = 1 ]; then
    echo "FAILED: CAF_RDMA_REQUIRE_DEVICE=1 but $reason"
    exit 1
  fi
  echo "*** SKIPPED: $reason ***"
  for n in "${names[@]}"; do record "$n" skipped "$reason"; skipped=$((skipped + 1)); done
  write_xml
  exit 0
fi

run() {  # name expected-line... -- args
  local name=$1; shift
  local expects=()
  while [ "$1" != -- ]; do expects+=("$1"); shift; done
  shift
  echo "=== $name: collectives $*"
  local out rc
  out=$(timeout 400 "$bin" "$@" 2>&1)
  rc=$?
  echo "$out"
  if [ $rc -ne 0 ]; then
    failures=$((failures + 1)); record "$name" failed "exit code $rc"; return
  fi
  for e in "${expects[@]}"; do
    if ! grep -q -- "$e" <<<"$out"; then
      failures=$((failures + 1)); record "$name" failed "output lacks '$e'"; return
    fi
  done
  record "$name" passed ""
}

run four_ranks_verified "collectives: OK: 4 ranks" "rank 3: all-to-all .*(path $mode) verified x2" \
  "rank 1: broadcast .*(path $mode) verified x2" "rank 2: send/recv .*(path $mode) verified x2" \
  -- --ranks 4 --size 2M --iters 2
run root_dies_others_name_it "each of the 3 others reported an error naming rank 0" \
  -- --ranks 4 --size 256K --iters 1 --kill-rank 0 --timeout-ms 20000
run member_dies_others_name_it "each of the 3 others reported an error naming rank 2" \
  -- --ranks 4 --size 256K --iters 1 --kill-rank 2 --timeout-ms 20000
run eight_ranks_verified "collectives: OK: 8 ranks" "rank 7: all-to-all .*(path $mode) verified x1" \
  -- --ranks 8 --size 512K --iters 1
write_xml
echo "collectives ($mode): $failures failed"
[ $failures -eq 0 ]
