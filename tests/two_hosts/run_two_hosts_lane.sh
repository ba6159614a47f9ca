#!/usr/bin/env bash
# run_two_hosts_lane.sh [BAZEL_BUILD_ARGS...]: the two-host lane (docs/testing.md, "The two-host lane").
# Builds what the lane runs, then boots two Soft-RoCE VMs on one virtual wire
# (tests/rxe_vm/run_two_hosts.sh: host a 10.98.0.1, host b 10.98.0.2, rxe0 on each one's NIC)
# and runs tests/two_hosts/two_hosts_guest.sh in both: parameter_server (server on a, workers
# on b), remote atomics (adders on b, counter on a), a's link going down mid-transfer, and the
# stress tool with its ranks on both hosts.
# Prints both VMs' output and the lane's duration; exits with run_two_hosts.sh's code (0 all
# passed; 124 timeout; 125 a VM failed; 126 a guest kernel warned; else failed steps). A guest
# kernel panic or warning runs the lane once more, saying so.
# Boots two VMs of 1536 MB and one vCPU each. TWO_HOSTS_LINK_DOWN=b: b sets its own link down
# instead of a (two_hosts_guest.sh step 3).
set -uo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
t0=$(date +%s)
bazel() { command bazel ${CAF_RDMA_BAZEL_OUTPUT_ROOT:+--output_user_root="$CAF_RDMA_BAZEL_OUTPUT_ROOT"} "$@"; }
bazel build "$@" //examples:parameter_server //tests/actors:atomic_adder //stress:rdma_stress \
  //tests/two_hosts:buffer_owner //tests/two_hosts:transfer_loop ||
  { echo "two_hosts: build failed" >&2; exit 1; }
bin=$(realpath bazel-bin)
# A guest kernel panic or warning (a kernel bug: docs/limits.md) runs the lane once more, saying so.
tests/rxe_vm/again_after_kernel_bug.sh -- tests/rxe_vm/run_two_hosts.sh -t 600 -m 1536 -c 1 \
  -e TWO_HOSTS_LINK_DOWN -- tests/two_hosts/two_hosts_guest.sh "$bin"
rc=$?
echo "two_hosts: exit $rc after $(( $(date +%s) - t0 )) s"
exit $rc
