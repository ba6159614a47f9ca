#!/usr/bin/env bash
# Runs caf_rdma_doctor as a user does and checks what it says and its exit code:
#  - without an RDMA device (the native lane): not ready (exit 1), names the missing device with
#    its fix, and `--require any` accepts the fallback (exit 0);
#  - with one (the rdma-tagged twin, in the Soft-RoCE VM): ready (exit 0), the devices, their
#    GIDs with interface and RoCE version, a loopback WRITE + READ on each device, every byte
#    checked;
#  - either way: a locked-memory limit of 64 KiB (prlimit, CAP_IPC_LOCK dropped with setpriv when
#    root, which it lifts) is named with its fix, and usage errors exit 2.
# Writes one test case per check into $XML_OUTPUT_FILE (tests/sh_test_lib.sh).
set -uo pipefail
mode=${CAF_RDMA_TRANSPORT:-fallback}
doctor=${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-caf_rdma}/doctor/caf_rdma_doctor
xml=${XML_OUTPUT_FILE:-/dev/null}
suite="Doctor_${mode}"
source "$(dirname "$0")/../sh_test_lib.sh"
skip_without_device ReadyWithLoopbackOnEveryDevice MemlockTooLowIsNamedWithItsFix \
  UsageErrorsExit2

# `exits N CMD...`: runs CMD, prints its exit code, succeeds when it is N.
exits=(bash -c '"${@:2}"; rc=$?; echo "exit code $rc"; [ "$rc" = "$1" ]' exits)
# Without CAP_IPC_LOCK (root has it; it lifts the limit) and with a 64 KiB limit.
low_memlock=(prlimit --memlock=65536:65536)
[ "$(id -u)" = 0 ] && low_memlock+=(setpriv --bounding-set=-ipc_lock --inh-caps=-ipc_lock)

if [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
  run_case NoDeviceIsNotReadyAndNamesTheFix 60 "^\[FAIL\] no RDMA device" \
    "fix: To get one: run on a host with RDMA hardware" "^NOT READY for RDMA" \
    "fallback transport (TCP) works without a device" "exit code 1" -- "${exits[@]}" 1 "$doctor"
  run_case RequireAnyAcceptsTheFallback 60 "^READY on the fallback transport" "exit code 0" -- \
    "${exits[@]}" 0 "$doctor" --require any
else
  expect=("^\[ok\]   .* port 1: active, active MTU [0-9]*, link layer"
    "^\[ok\]   device choice" "loopback RDMA WRITE + READ of 65536 bytes on .*every byte checked"
    "^READY for RDMA (0 failures" "exit code 0")
  if [ "${CAF_RDMA_IN_VM:-}" = 1 ]; then  # rxe0 on veth0 (10.99.0.1), rxe1 on veth1 (10.99.1.1)
    expect+=("^\[info\] rxe0 port 1 GID\[1\] ::ffff:10.99.0.1 RoCE v2 on veth0"
      "^\[info\] rxe1 port 1 GID\[1\] ::ffff:10.99.1.1 RoCE v2 on veth1"
      "^\[ok\]   rxe0 port 1 would use GID\[1\] ::ffff:10.99.0.1 RoCE v2 on veth0"
      "local rank 0 -> rxe0, 1 -> rxe1"
      "^\[ok\]   kernel module ib_uverbs loaded" "^\[info\] kernel module rdma_rxe loaded"
      "^\[ok\]   /dev/infiniband: uverbs0, uverbs1"
      "loopback RDMA WRITE + READ of 65536 bytes on rxe0 (rxe0 port 1 .*every byte checked"
      "loopback RDMA WRITE + READ of 65536 bytes on rxe1 (rxe1 port 1 .*every byte checked")
  fi
  run_case ReadyWithLoopbackOnEveryDevice 120 "${expect[@]}" -- "${exits[@]}" 0 "$doctor"
fi
memlock=("^\[FAIL\] locked-memory limit (RLIMIT_MEMLOCK, \`ulimit -l\`): 64 KiB, below 65536 KiB"
  "fix: raise it (\`ulimit -l unlimited\` in the launching shell, LimitMEMLOCK=infinity"
  "exit code 1")
# With a device, the loopback's registration fails too, and its error names the limit.
[ -n "$(ls /sys/class/infiniband 2>/dev/null)" ] &&
  memlock+=("^\[FAIL\] loopback RDMA WRITE .*ibv_reg_mr(.*Cannot allocate memory (errno 12); the locked-memory limit of this process (RLIMIT_MEMLOCK, \`ulimit -l\`) is 64 KiB")
run_case MemlockTooLowIsNamedWithItsFix 120 "${memlock[@]}" -- \
  "${exits[@]}" 1 "${low_memlock[@]}" "$doctor"
usage_errors() {
  "${exits[@]}" 0 "$doctor" --help && "${exits[@]}" 2 "$doctor" --require sometimes &&
    "${exits[@]}" 2 "$doctor" --memlock-need lots && "${exits[@]}" 2 "$doctor" --bogus
}
run_case UsageErrorsExit2 60 "^usage: caf_rdma_doctor" "--require 'sometimes': expected rdma or any" \
  "'lots' is not a number" "unknown argument '--bogus'" -- bash -c "$(declare -p exits doctor); $(declare -f usage_errors); usage_errors"
write_xml
[ "$failures" -eq 0 ]
