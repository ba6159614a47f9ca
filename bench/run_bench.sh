#!/usr/bin/env bash
# Benchmarks caf-rdma against perftest in ONE Soft-RoCE VM boot, and prints a table of figures
# and ratios (lines "ratio <metric> <value>" at the end), a CSV and a PNG plot.
#
#   bash bench/run_bench.sh [--short|--long] [OUTDIR]
#
# In the VM: ib_write_bw / ib_read_bw / ib_read_lat between rxe1 (client) and rxe0 (server) over
# the veth wire, then bench/rdma_bench with the same devices (components, actor, direct, fallback
# paths) and a raw TCP loopback stream (the fallback's reference). Absolute numbers inside the
# TCG-emulated VM are meaningless; the ratios, measured in the same run, are the point.
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/.."
mode=short
[ "${1:-}" = --long ] && { mode=long; shift; }
[ "${1:-}" = --short ] && { mode=short; shift; }
out=${1:-$PWD/.bench/$mode}
mkdir -p "$out"
out=$(realpath "$out")
bash third_party/install_deps.sh
# CAF_RDMA_BAZEL_OUTPUT_ROOT: Bazel's output root for this run (as tests/run_tests.sh).
bazel() { command bazel ${CAF_RDMA_BAZEL_OUTPUT_ROOT:+--output_user_root="$CAF_RDMA_BAZEL_OUTPUT_ROOT"} "$@"; }
bazel build //bench:rdma_bench >&2
bin=$PWD/bazel-bin/bench/rdma_bench
echo "run_bench: $mode mode, results in $out" >&2
rc=0
tests/rxe_vm/run_in_vm.sh -t 3000 -s "$out" -- bash bench/bench_in_vm.sh "$mode" "$out" "$bin" || rc=$?
# The report covers whatever was measured, also when a stalled step ended the run early.
/usr/bin/python3 bench/bench_report.py "$out"  # Debian python3 has python3-matplotlib
exit $rc
