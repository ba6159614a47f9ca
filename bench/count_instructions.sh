#!/usr/bin/env bash
# Runs inside the Soft-RoCE VM (bench_in_vm.sh, long mode): user-space instructions per 8-byte
# RDMA READ/WRITE, counted by callgrind, for caf-rdma's components and direct paths (perftest's
# own count is not measurable this way: its start-up varies more than its loop costs). Timings
# in the emulated VM drift by 2x within minutes; instruction counts do not. Each program runs
# twice with a different number of iterations; the difference divided by the difference in ops
# is the cost of one op (start-up and set-up cancel out).
#   count_instructions.sh OUT BIN     -> OUT/instructions.txt: "instructions <path> <per_op>"
set -uo pipefail
out=$1 bin=$2
n1=100 n2=400
total_ir() {  # callgrind output file -> total instructions of all threads
  grep -h "^summary:" "$1"* 2>/dev/null | awk '{s += $2} END {print s + 0}'
}
bench_ir() {  # path iterations -> instructions of rdma_bench --lat-only (read + write loops)
  local path=$1 n=$2 f=$out/cg.$1.$2
  rm -f "$f"*
  CAF_RDMA_DEVICE=rxe1 timeout 900 valgrind --tool=callgrind --callgrind-out-file="$f" \
    "$bin" --paths "$path" --lat-only --lat-iters "$n" --peer-device rxe0 > /dev/null 2>&1
  total_ir "$f"
}
: > "$out/instructions.txt"
for path in components direct; do
  a=$(bench_ir $path $n1); b=$(bench_ir $path $n2)
  # rdma_bench times a read loop and a write loop: 2 ops per iteration.
  echo "instructions $path $(( (b - a) / (2 * (n2 - n1)) ))" | tee -a "$out/instructions.txt"
done
rm -f "$out"/cg.*
