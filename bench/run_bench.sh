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
# Then natively (bench_native.sh; the fallback's references are native): tcp_lat, futex_lat,
# caf_rtt and memcpy_bw, the fallback's 8-byte latency paired with them in rounds, their
# instructions per op, and kv_store beside redis (kv_vs_redis.sh). It prints how long each
# part took.
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
bazel build //bench:rdma_bench //bench:list_posting //bench:tcp_lat //bench:futex_lat //bench:memcpy_bw //bench:caf_rtt \
  //systems/kv_store:kv_server //systems/kv_store:kv_client >&2
bin=$PWD/bazel-bin/bench/rdma_bench
echo "run_bench: $mode mode, results in $out" >&2
rc=0
t0=$SECONDS
# Quad mode: rxe0-rxe1 as in pair mode, plus rxe2-rxe3 on a second wire for the striping path.
tests/rxe_vm/run_in_vm.sh -r quad -t 3000 -s "$out" -- bash bench/bench_in_vm.sh "$mode" "$out" "$bin" || rc=$?
t1=$SECONDS
# Natively, after the VM is gone: the fallback's references (TCP, CAF, futex, memcpy, redis).
bash bench/bench_native.sh "$mode" "$out" "$PWD/bazel-bin" || rc=$?
t2=$SECONDS
echo "run_bench: VM part $((t1 - t0)) s, native part (references, kv vs redis) $((t2 - t1)) s"
# The report covers whatever was measured, also when a stalled step ended the run early.
/usr/bin/python3 bench/bench_report.py "$out"  # Debian python3 has python3-matplotlib
exit $rc
