#!/usr/bin/env bash
# The whole test suite, as CI runs it (README quick start, second command):
#   1. installs missing Debian packages (third_party/install_deps.sh) and builds the VM image;
#      checks the sources' layout (tests/lint/check_format.sh, .clang-format) and the docs' links,
#      labels and tour (tests/lint/check_docs.py);
#   2. native lane:  `bazel test //...`  (rdma-tagged tests report a visible SKIP without a device);
#   3. VM lane:      `bazel test --config=rxe //...`  (the rdma-tagged tests, inside the Soft-RoCE
#                    VM: one session VM runs the binaries one after another, tests/rxe_vm/
#                    vm_session.sh; a skip there is a failure);
#   4. cuda lane:    what --config=cuda changes, compiled against /usr/local/cuda (only
#                    primitives/cuda_driver.cc and tests/gpu/ read CAF_RDMA_WITH_CUDA, in the
#                    native lane's output directory: third_party/cuda.bzl), relinking the GPU
#                    tests and the programs that move GPU memory ($cuda_targets below), and
#                    `bazel test --config=cuda //tests/gpu/...` (gpu-tagged: they run on a host
#                    with a GPU, and report a visible SKIP with the reason elsewhere);
#   5. the stress tool (stress/rdma_stress) in short mode, natively and in the VM; late (see 6),
#      the external workspace (examples/external, tests/external/run_external.sh): caf-rdma used as README.md
#      tells users, built with --dynamic_mode=off and Bazel's default, run natively, and its
#      dynamic build in the VM (path rdma-direct);
#   6. tidy: clang-tidy-14 over every source but the tests' (tests/lint/check_tidy.sh says why;
#      .clang-tidy), one Bazel action per source (tests/lint/tidy.bzl), each kept in the disk
#      cache (a run redoes the sources whose code, headers or flags changed). It and the
#      external lane run last,
#      each only while the run is younger than its limit, and are skipped loudly otherwise
#      (late_lane below);
#   7. sanitizer lanes: the native lane's tests that run natively (not the rdma- or gpu-tagged,
#      which skip there) under `--config=asan` (AddressSanitizer + UBSan, compiled with clang-14
#      at -O0: .bazelrc) and under `--config=tsan` (ThreadSanitizer, with CAF itself built with
#      it: tests/sanitizers/build_caf_tsan.sh, ~5 minutes once per machine);
#   8. prints every test case of all lanes, the totals and each lane's duration;
#   9. two-host lane (run after the stress lane; tests/two_hosts/run_two_hosts_lane.sh, ~2.5 min):
#      two Soft-RoCE VMs on one virtual wire, parameter_server and remote atomics across them,
#      one VM's link down mid-transfer.
# Extra arguments go to the `bazel test` and `bazel build` calls (e.g. --test_output=all), except
# --two-hosts, which runs only the two-host lane (after step 1).
set -uo pipefail
cd "$(dirname "$(realpath "$0")")/.."
only_two_hosts=0
args=()
for a in "$@"; do
  if [ "$a" = --two-hosts ]; then only_two_hosts=1; else args+=("$a"); fi
done
set -- "${args[@]}"
t0=$(date +%s)
stamp() { echo "[run_tests $(( $(date +%s) - t0 ))s] $*"; }
# CAF_RDMA_BAZEL_OUTPUT_ROOT: Bazel's output root for this run (e.g. an empty one: a cold build).
bazel() { command bazel ${CAF_RDMA_BAZEL_OUTPUT_ROOT:+--output_user_root="$CAF_RDMA_BAZEL_OUTPUT_ROOT"} "$@"; }
# Every lane runs its tests: none takes a result from Bazel's disk cache (.bazelrc), which serves
# the compiles and links of an earlier run or another checkout.
bazel_test() { bazel test --nocache_test_results "$@"; }
durations=""
# Each lane's budget in seconds on an idle 2-core machine (the whole of .ci/run, bench included,
# aims at 45 minutes; CI's hard limit is 90): a lane over its budget is named at its end and in
# the totals, so a slow lane is seen before the run nears the limit (.ci/run adds the total).
# The compiling lanes' budgets are those of a run whose sources changed (their compiles not in
# the disk cache: 2026-12-01, b21a9db, asan 765 s, tsan 822, external 222, tidy 326); from the
# cache they take a fraction (2026-11-30, fresh clone, idle: native 143 s, asan 272, tsan 339,
# external 36, tidy 3). The VM lane is the guest's test time: 650-700 s.
declare -A lane_budget=([native]=600 [tidy]=480 [vm]=720 [cuda]=120 [stress]=150 [two-hosts]=210
                        [external]=300 [asan]=800 [tsan]=840)
over_budget=""
lane_start() { lane_t=$(date +%s); }
lane_end() {
  local took=$(( $(date +%s) - lane_t )) budget=${lane_budget[$1]:-0}
  durations+=" $1 ${took}s/${budget}s"
  if [ "$took" -gt "$budget" ]; then
    over_budget+=" $1 (${took}s, budget ${budget}s)"
    echo "run_tests: WARNING: lane $1 took ${took}s, over its budget of ${budget}s" >&2
  fi
}

stamp "installing dependencies"
bash third_party/install_deps.sh || { echo "run_tests: dependency installation failed" >&2; exit 1; }
# What install_deps.sh installed is there: a test that would skip without it fails instead.
export CAF_RDMA_REQUIRE_PROMETHEUS=1
bash tests/prune_disk_cache.sh
stamp "building the Soft-RoCE VM image"
bash tests/rxe_vm/build_image.sh || { echo "run_tests: VM image build failed" >&2; exit 1; }
two_hosts_lane() {
  stamp "two hosts: two Soft-RoCE VMs on one wire (tests/two_hosts/run_two_hosts_lane.sh)"
  bash tests/two_hosts/run_two_hosts_lane.sh "$@"
  two_hosts_rc=$?
  stamp "two hosts done: exit $two_hosts_rc"
}
if [ $only_two_hosts = 1 ]; then
  lane_start
  two_hosts_lane "$@"
  lane_end two-hosts
  stamp "lane durations (took/budget):$durations"
  exit $two_hosts_rc
fi

stamp "format: tests/lint/check_format.sh; docs: tests/lint/check_docs.py"
bash tests/lint/check_format.sh
format_rc=$?
# Every relative link and Bazel label of README.md and docs/, and README's tour = the program
# the native lane compiles (tests/docs/api_tour.cc).
python3 tests/lint/check_docs.py || format_rc=1

stamp "native lane: bazel test //..."
lane_start
bazel_test "$@" //...
native_rc=$?
logs=$(bazel info bazel-testlogs 2>/dev/null)
python3 tests/summarize.py native "$logs" > /tmp/caf_rdma_native_summary.$$
native_sum_rc=$?

lane_end native
stamp "VM lane: bazel test --config=rxe //..."
lane_start
# One VM for the lane's test binaries (tests/rxe_vm/vm_session.sh; each still gets a VM of its
# own when the session cannot run it), instead of a boot per binary.
# It shares the execution root, where tests write (TEST_TMPDIR under _tmp, their logs under
# bazel-out): Bazel replaces _tmp at each command, so a share of _tmp itself would go stale.
execroot=$(bazel info execution_root 2>/dev/null)
session=${CAF_RDMA_VM_CACHE:-/var/tmp/caf-rdma-rxe-vm}/session-$(echo "$execroot" | md5sum | cut -c1-12)
if [ -n "$execroot" ] && bash tests/rxe_vm/vm_session.sh start "$session" "$execroot"; then
  export CAF_RDMA_VM_SESSION=$session
  trap 'bash tests/rxe_vm/vm_session.sh stop "$session"' EXIT  # an interrupted run too
else
  echo "run_tests: no session VM: one VM per test binary" >&2
fi
bazel_test --config=rxe "$@" //...
rxe_rc=$?
if [ -n "${CAF_RDMA_VM_SESSION:-}" ]; then
  bash tests/rxe_vm/vm_session.sh stop "$session"
  trap - EXIT
  unset CAF_RDMA_VM_SESSION
fi
rdma_targets=$(bazel query 'attr(tags, "[\[ ]rdma[,\]]", tests(//...))' 2>/dev/null)
python3 tests/summarize.py --fail-on-skip rxe-vm "$logs" $rdma_targets > /tmp/caf_rdma_rxe_summary.$$
rxe_sum_rc=$?

lane_end vm
# Only cuda_driver.cc and tests/gpu/ compile differently under --config=cuda, in the native
# lane's output directory (third_party/cuda.bzl): the lane compiles those and relinks the GPU
# tests, the public library and the programs that take GPU memory.
cuda_targets="//tests/gpu/... //:caf_rdma //doctor:caf_rdma_doctor //examples:parameter_server //bench:rdma_bench"
stamp "cuda lane: bazel build --config=cuda $cuda_targets && bazel test --config=cuda //tests/gpu/..."
lane_start
bazel build --config=cuda "$@" $cuda_targets && bazel_test --config=cuda "$@" //tests/gpu/...
cuda_rc=$?
cuda_logs=$(bazel info --config=cuda bazel-testlogs 2>/dev/null)
python3 tests/summarize.py cuda "$cuda_logs" $(bazel query 'tests(//tests/gpu/...)' 2>/dev/null) \
  > /tmp/caf_rdma_cuda_summary.$$
cuda_sum_rc=$?

# The stress tool (stress/rdma_stress), short mode: every byte checked, release churn and
# released-handle writes, one process killed; natively (fallback) and on the rdma path inside the
# VM (READ-heavier, processes spread over rxe0 and rxe1).
lane_end cuda
lane_start
stamp "stress: rdma_stress short mode, native (fallback) and in the Soft-RoCE VM (rdma)"
stress_rc=0
if bazel build "$@" //stress:rdma_stress; then
  CAF_RDMA_TRANSPORT=fallback timeout 300 bazel-bin/stress/rdma_stress --procs 8 --threads 2 \
    --seconds 20 --max-size 1M --kill 2>&1 | tail -12 || stress_rc=1
  [ "${PIPESTATUS[0]}" = 0 ] || stress_rc=1
  # A guest kernel panic or warning (a kernel bug: docs/limits.md) runs it once more, saying so.
  CAF_RDMA_TRANSPORT=rdma tests/rxe_vm/again_after_kernel_bug.sh --tail 16 -- tests/rxe_vm/run_in_vm.sh \
    -t 420 -m 6144 -e CAF_RDMA_TRANSPORT -s /tmp bazel-bin/stress/rdma_stress --procs 8 \
    --threads 2 --seconds 45 --max-size 1M --read-pct 60 --devices rxe0,rxe1 --kill ||
    stress_rc=1
else
  stress_rc=1
fi
lane_end stress
stamp "stress done: exit $stress_rc"

# Two hosts: parameter_server, remote atomics and a link going down, between two VMs' kernels.
lane_start
two_hosts_lane "$@"
lane_end two-hosts


# Sanitizer lanes: every native test again, instrumented; any report fails the test.
lane_start
# The rdma- and gpu-tagged tests skip without their device: not built or run here (the VM lane
# and the cuda lane run them).
sanitized=(--build_tests_only --test_tag_filters=-rdma,-gpu)
stamp "asan lane: bazel test --config=asan ${sanitized[*]} //..."
bazel_test --config=asan "${sanitized[@]}" "$@" //...
asan_rc=$?
python3 tests/summarize.py asan "$(bazel info --config=asan bazel-testlogs 2>/dev/null)" \
  > /tmp/caf_rdma_asan_summary.$$ || asan_rc=1
lane_end asan
lane_start
# ThreadSanitizer for the code with threads of its own: the library (actors, components,
# primitives), its attacks and examples (tests/examples runs kv_client bench). Not for the
# applications over its public API (systems/: collectives, kv_store, whose races would be the
# library's, checked here, or theirs), the doctor, the Prometheus scrape (prometheus-cpp's threads
# are not instrumented) and the checks of headers, links and the external workspace: ASan and
# UBSan run those. Nor for the tests tagged single-threaded (the deterministic fixture's, on
# CAF's test coordinator, and pure functions'): run on one thread, they give it nothing to check.
tsan_tests=(--build_tests_only --test_tag_filters=-rdma,-gpu,-single-threaded)
tsan_skip=(-//tests/collectives/... -//tests/kv_store/... -//tests/doctor/... -//tests/docs/...
           -//tests/link/... -//tests/metrics:prometheus_scrape_test -//examples/external/...)
stamp "tsan lane: tests/sanitizers/build_caf_tsan.sh && bazel test --config=tsan ${tsan_tests[*]} -- //... ${tsan_skip[*]}"
if bash tests/sanitizers/build_caf_tsan.sh; then
  bazel_test --config=tsan "${tsan_tests[@]}" "$@" -- //... "${tsan_skip[@]}"
  tsan_rc=$?
  python3 tests/summarize.py tsan "$(bazel info --config=tsan bazel-testlogs 2>/dev/null)" \
    > /tmp/caf_rdma_tsan_summary.$$ || tsan_rc=1
else
  tsan_rc=1
  : > /tmp/caf_rdma_tsan_summary.$$
fi
lane_end tsan

# Late lanes: the external workspace, then tidy. They check how caf-rdma builds (in a user's
# workspace, and lint), not what it does at run time, which every lane above checks and always
# runs; so each runs only while the run is younger than its limit (seconds since the start;
# CAF_RDMA_EXTERNAL_UNTIL, default 4400, and CAF_RDMA_TIDY_UNTIL, default 4100: they then end
# before about 80 minutes, CI's limit being 90). On a machine slow enough that the lanes above
# take longer, a late lane is skipped, loudly (a warning line, "skipped" in the lane table and
# in the totals), so that a slow day does not block a landing; each runs alone as named below.
late_skipped=""
late_lane() {  # late_lane NAME UNTIL COMMAND...: runs COMMAND as lane NAME, or skips it
  local name=$1 until=$2 at=$(( $(date +%s) - t0 ))
  shift 2
  if [ "$at" -le "$until" ]; then
    lane_start
    stamp "$name: $*"
    "$@"
    late_rc=$?
    lane_end "$name"
  else
    late_rc=0
    late_skipped+=" $name (the run was at ${at}s, past ${until}s; run: $*)"
    echo "run_tests: WARNING: lane $name SKIPPED: the run is at ${at}s, past ${until}s; run it alone: $*" >&2
    durations+=" $name skipped"
  fi
}
# caf-rdma as a dependency of another workspace (examples/external), in both link modes, natively
# and in the Soft-RoCE VM.
late_lane external "${CAF_RDMA_EXTERNAL_UNTIL:-4400}" bash tests/external/run_external.sh "$@"
external_rc=$late_rc
# Tidy: Bazel actions in the native lane's configuration (analysis kept; the sources' results
# from the disk cache when unchanged). Not beside the VM lane, even at idle priority: run so
# (9c4db08), the emulated guest's tests took 1.5-4x as long (the lane 754 s instead of 450 s).
late_lane tidy "${CAF_RDMA_TIDY_UNTIL:-4100}" bash tests/lint/check_tidy.sh \
  ${CAF_RDMA_BAZEL_OUTPUT_ROOT:+--output_user_root="$CAF_RDMA_BAZEL_OUTPUT_ROOT"}
tidy_rc=$late_rc

sums="/tmp/caf_rdma_native_summary.$$ /tmp/caf_rdma_rxe_summary.$$ /tmp/caf_rdma_cuda_summary.$$
      /tmp/caf_rdma_asan_summary.$$ /tmp/caf_rdma_tsan_summary.$$"
echo
echo "================ test cases ================"
cat $sums | grep -v '^lane '
echo "================ totals ================"
grep -h '^lane ' $sums
rm -f $sums
stamp "lane durations (took/budget):$durations"
[ -z "$over_budget" ] || stamp "lanes over their budget:$over_budget"
[ -z "$late_skipped" ] || stamp "WARNING: lanes SKIPPED (too late in the run):$late_skipped"
stamp "done: native bazel exit $native_rc, VM lane bazel exit $rxe_rc, cuda lane exit $cuda_rc, stress exit $stress_rc, two-hosts exit $two_hosts_rc, external exit $external_rc, asan exit $asan_rc, tsan exit $tsan_rc, format exit $format_rc, tidy exit $tidy_rc"
if [ $native_rc -ne 0 ] || [ $rxe_rc -ne 0 ] || [ $native_sum_rc -ne 0 ] || [ $rxe_sum_rc -ne 0 ] ||
   [ $cuda_rc -ne 0 ] || [ $cuda_sum_rc -ne 0 ] || [ $stress_rc -ne 0 ] || [ $external_rc -ne 0 ] ||
   [ $two_hosts_rc -ne 0 ] ||
   [ $format_rc -ne 0 ] || [ $asan_rc -ne 0 ] || [ $tsan_rc -ne 0 ] || [ $tidy_rc -ne 0 ]; then
  echo "run_tests: FAILED" >&2
  exit 1
fi
echo "run_tests: all passed"
