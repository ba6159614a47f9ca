#!/usr/bin/env bash
# run_external.sh [BAZEL_BUILD_OPTIONS...]: examples/external as a user's workspace would build it
# (README.md, "Use caf-rdma in your project": local_repository + caf_rdma_deps(), and its
# .bazelrc imports caf_rdma.bazelrc, nothing else of caf-rdma's settings), in both link modes:
#   1. `bazel test //:buffer_exchange_test` with --dynamic_mode=off, then with Bazel's default
#      dynamic mode, each run natively (no device here: the fallback path);
#   2. the dynamic build's references to libibverbs: each at its current symbol version
#      (tests/link/symbol_versions_test.sh);
#   3. both builds' test binaries inside the Soft-RoCE VM (one boot) with CAF_RDMA_TRANSPORT=rdma:
#      every transfer must report path rdma-direct (an unversioned libibverbs reference crashed
#      the dynamic build here).
# Its own Bazel output base, under $TMPDIR (default /tmp), shut down and deleted at the end; the
# compile actions come from caf-rdma's disk cache (.bazelrc's --disk_cache, read from there) after
# the first run on a machine.
# Exit code 0 when every step passed. run_tests.sh runs it as the "external" lane.
set -uo pipefail
root=$(realpath "$(dirname "$(realpath "$0")")/../..")
ws="$root/examples/external"
ob=$(mktemp -d "${TMPDIR:-/tmp}/caf-rdma-external.XXXXXX") || exit 2
xbazel() { (cd "$ws" && command bazel --output_base="$ob" "$@"); }
cleanup() {
  xbazel shutdown >/dev/null 2>&1
  chmod -R u+w "$ob" 2>/dev/null
  rm -rf "$ob"
}
trap cleanup EXIT
t0=$(date +%s)
say() { echo "[external $(( $(date +%s) - t0 ))s] $*"; }
rc=0
# No convenience symlinks (bazel-bin, ...) inside caf-rdma's tree; tests always run.
disk_cache=$(bash "$root/tests/disk_cache_dir.sh")
common=(--symlink_prefix=/ --nocache_test_results --test_output=all
        ${disk_cache:+--disk_cache="$disk_cache"} "$@")

for mode in off default; do
  say "bazel test --dynamic_mode=$mode //:buffer_exchange_test (natively)"
  xbazel test --dynamic_mode=$mode "${common[@]}" //:buffer_exchange_test > "$ob/test.log" 2>&1
  test_rc=$?
  grep -E '^(user|owner|buffer_exchange): |^INFO: [0-9]+ processes|^INFO: Elapsed' "$ob/test.log"
  # Quiet: with caf_rdma.bazelrc imported, no action runs in Debian Bazel's linux-sandbox, whose
  # debug lines would bury the build's output (thousands for this small build).
  noisy=$(grep -c 'linux-sandbox' "$ob/test.log")
  if [ "$noisy" != 0 ]; then
    grep -m 3 'linux-sandbox' "$ob/test.log"
    say "FAILED: --dynamic_mode=$mode: $noisy lines name linux-sandbox (is caf_rdma.bazelrc imported?)"
    rc=1
  fi
  if [ $test_rc != 0 ]; then
    tail -40 "$ob/test.log"
    say "FAILED: --dynamic_mode=$mode (bazel exit $test_rc)"
    rc=1
  fi
  # This mode's binary, kept for the VM (the next build replaces bazel-bin's).
  built="$(xbazel info --dynamic_mode=$mode bazel-bin 2>/dev/null)/buffer_exchange_test"
  if [ ! -x "$built" ]; then
    say "FAILED: no test binary at $built"
    exit 1
  fi
  cp "$built" "$ob/buffer_exchange_test.$mode"
done

say "symbol versions of the dynamic build's references to libibverbs"
bash "$root/tests/link/symbol_versions_test.sh" "$ob/buffer_exchange_test.default" ||
  { say "FAILED: symbol versions"; rc=1; }

say "both builds in the Soft-RoCE VM (CAF_RDMA_TRANSPORT=rdma)"
out=$(cd "$ob" && CAF_RDMA_TRANSPORT=rdma "$root/tests/rxe_vm/run_in_vm.sh" -t 300 \
      -e CAF_RDMA_TRANSPORT \
      'for m in off default; do echo "== --dynamic_mode=$m"; ./buffer_exchange_test.$m || exit; done' 2>&1)
vm_rc=$?
echo "$out" | grep -vE '^\s*$' | tail -14
if [ $vm_rc != 0 ]; then
  say "FAILED: the VM run exited with $vm_rc"
  rc=1
elif [ "$(grep -c 'path rdma-direct), read them back (path rdma-direct)' <<<"$out")" != 2 ]; then
  say "FAILED: the VM runs did not both move the bytes over RDMA (path rdma-direct)"
  rc=1
fi
say "done: exit $rc"
exit $rc
