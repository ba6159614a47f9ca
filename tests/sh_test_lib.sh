# Helpers for sh_tests that report one test case per scenario (sourced, not run):
#   mode=rdma|fallback; suite=Name_mode; xml=$XML_OUTPUT_FILE; source tests/sh_test_lib.sh
#   $path                                       the reply path expected in this mode
#   record NAME passed|failed|skipped MESSAGE   adds a test case (failures/skipped are counted)
#   write_xml                                   writes them to $xml for run_tests.sh's listing
#   run_case NAME LIMIT EXPECTED... -- COMMAND...
#                                               runs COMMAND (at most LIMIT seconds, and never
#                                               past the test's own time: see case_end), prints its
#                                               output, records NAME passed only if it exited 0
#                                               and its output matches every EXPECTED (grep)
#   skip_without_device NAME...                 in rdma mode on a host without an RDMA device:
#                                               records every NAME as skipped with the reason and
#                                               exits 0 (exits 1 under CAF_RDMA_REQUIRE_DEVICE=1)
# The path replies name in this mode.
path=$([ "${mode:-fallback}" = rdma ] && echo rdma-direct || echo fallback)
cases=()
failures=0
skipped=0
# Cases end before Bazel's limit for the whole test (TEST_TIMEOUT; in the VM the boot and
# run_under's margin come off it too), so a stuck case is recorded as such and the XML is
# written, instead of Bazel killing the script with nothing recorded.
case_end=$((SECONDS + ${TEST_TIMEOUT:-300} - 45))

# Seconds a case may still run: at most $1, and not past case_end.
case_limit() {
  local left=$((case_end - SECONDS))
  [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}

record() {
  local body=""
  case $2 in
    failed) failures=$((failures + 1))
            body="<failure message=\"$(printf '%s' "$3" | sed 's/&/\&amp;/g; s/"/\&quot;/g; s/</\&lt;/g')\"/>" ;;
    skipped) skipped=$((skipped + 1)); body="<skipped message=\"$3\"/>" ;;
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

run_case() {
  local name=$1 limit=$2; shift 2
  local expects=()
  while [ "$1" != -- ]; do expects+=("$1"); shift; done
  shift
  echo "=== $name: $*"
  local out rc e
  limit=$(case_limit "$limit")
  if [ "$limit" -le 0 ]; then
    record "$name" failed "not run: the test's time (TEST_TIMEOUT) was used up by the cases before"
    return
  fi
  out=$(timeout -k 10 "$limit" "$@" 2>&1)
  rc=$?
  echo "$out"
  if [ $rc -eq 124 ]; then
    record "$name" failed "timed out after $limit s"; return
  fi
  if [ $rc -ne 0 ]; then
    record "$name" failed "exit code $rc"; return
  fi
  for e in "${expects[@]}"; do
    if ! grep -q -- "$e" <<<"$out"; then
      record "$name" failed "output lacks '$e'"; return
    fi
  done
  record "$name" passed ""
}

skip_without_device() {
  [ "$mode" = rdma ] && [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ] || return 0
  local reason="no RDMA device on this host (run bazel test --config=rxe //... for the Soft-RoCE VM)"
  if [ "${CAF_RDMA_REQUIRE_DEVICE:-}" = 1 ]; then
    echo "FAILED: CAF_RDMA_REQUIRE_DEVICE=1 but $reason"
    exit 1
  fi
  echo "*** SKIPPED: $reason ***"
  local n
  for n in "$@"; do record "$n" skipped "$reason"; done
  write_xml
  exit 0
}
