#!/usr/bin/env bash
# Bazel --run_under wrapper for `bazel test --config=rxe`: runs one test binary (with its
# arguments) inside the Soft-RoCE VM: in the session VM CAF_RDMA_VM_SESSION names when it runs
# and shares what the test writes (vm_session.sh; the VM lane starts one), else in a VM booted
# for this binary alone.
#
# Bazel's test runner has already set the test environment and the working directory (the
# runfiles tree); this forwards them into the VM and shares read-write what the test writes:
# TEST_TMPDIR and the directory of XML_OUTPUT_FILE (test.xml, undeclared outputs); a session
# runs the binary only when it shares both.
# A VM that fails to boot makes the test fail (exit 125), never pass.
set -uo pipefail
here=$(dirname "$(realpath "$0")")
[ $# -ge 1 ] || { echo "usage: run_under.sh TEST_BINARY [ARGS...]" >&2; exit 2; }

export GTEST_COLOR=no  # the VM console is a tty; keep the logs plain
# Tests that delete and re-add rxe devices (tests/device_control.h) run only where this is set.
export CAF_RDMA_IN_VM=1
args=()
for v in $(compgen -e); do
  case $v in
    TEST_*|TESTBRIDGE_*|XML_OUTPUT_FILE|GTEST_*|RUNFILES_*|CAF_RDMA_*|HOME|TZ|LANG|USER|BUILD_*|PYTHONPATH)
      args+=(-e "$v") ;;
  esac
done
shares=()
[ -n "${TEST_TMPDIR:-}" ] && mkdir -p "$TEST_TMPDIR" && shares+=(-s "$TEST_TMPDIR")
if [ -n "${XML_OUTPUT_FILE:-}" ]; then
  mkdir -p "$(dirname "$XML_OUTPUT_FILE")"; shares+=(-s "$(dirname "$XML_OUTPUT_FILE")")
fi
[ ${#shares[@]} -gt 0 ] || shares=(-s "${TMPDIR:-/tmp}")
# Leave the VM 15 s less than Bazel's own limit, so a hang is reported as ours (exit 124).
limit=${TEST_TIMEOUT:-900}
[ "$limit" -gt 60 ] && limit=$((limit - 15))
# A test's BUILD `env` may ask for RXE_VM_MODE=quad (two wires: rxe0-rxe1, rxe2-rxe3).
mode=${RXE_VM_MODE:-pair}
session=${CAF_RDMA_VM_SESSION:-}
if [ -n "$session" ] && [ "$mode" = pair ] &&
   "$here/vm_session.sh" covers "$session" "${TEST_TMPDIR:-/nonexistent}" "$(dirname "${XML_OUTPUT_FILE:-/nonexistent/x}")"; then
  echo "run_under: running $(basename "$1") in the session VM $session (rxe mode pair), limit ${limit}s" >&2
  "$here/vm_session.sh" run "$session" "$limit" "${args[@]}" -- "$@"
  rc=$?
  [ $rc -eq 199 ] || exit $rc  # 199: the session was gone before the binary ran: a VM of its own
fi
echo "run_under: running $(basename "$1") inside the Soft-RoCE VM (rxe mode $mode), limit ${limit}s" >&2
exec "$here/run_in_vm.sh" -r "$mode" -t "$limit" "${shares[@]}" "${args[@]}" -- "$@"
