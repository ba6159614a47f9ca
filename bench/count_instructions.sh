#!/usr/bin/env bash
# User-space instructions per op, counted by callgrind (stable where timings are not: timings
# in the emulated VM drift by 2x within minutes, instruction counts do not). Each program runs
# twice with a different number of iterations; the difference divided by the difference in ops
# is the cost of one op (start-up and set-up cancel out). Child processes are followed
# (--trace-children) and counted too: a round trip's cost is both sides'.
#
#   count_instructions.sh OUT BIN
#     In the Soft-RoCE VM (bench_in_vm.sh, long mode): 8-byte RDMA READ/WRITE of caf-rdma's
#     components and direct paths (rdma_bench BIN; perftest's own count is not measurable this
#     way: its start-up varies more than its loop costs). -> OUT/instructions.txt
#     Also a transfer list's posting cost per range on the queue pair (list_posting beside BIN:
#     only inside the functions that check, cut, post and retire its work requests).
#   count_instructions.sh --list OUT LIST_POSTING_BIN
#     That count alone (in the VM).
#   count_instructions.sh --native OUT BAZEL_BIN
#     Natively (bench_native.sh): the references tcp-lat, futex-lat and caf-rtt, and the
#     fallback's 8-byte read/write (rdma_bench --paths fallback). The CAF programs run with CAF's
#     sharing scheduler here: idle work-stealing workers spin, and under valgrind (which runs
#     one thread at a time) how long they spin varies from run to run. -> OUT/instructions.txt
# Lines: "instructions <path> <per_op>".
set -uo pipefail
native=0
[ "${1:-}" = --native ] && { native=1; shift; }
out=$1 bin=$2
n1=100 n2=400
total_ir() {  # callgrind output files' prefix -> total instructions of all threads and processes
  grep -h "^summary:" "$1"* 2>/dev/null | awk '{s += $2} END {print s + 0}'
}
run_ir() {  # name iterations cmd... (the argument ITERS becomes the iteration count)
  local name=$1 n=$2 f=$out/cg.$1.$2
  shift 2
  rm -f "$f"*
  timeout 900 valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$f.%p" \
    "${@/#ITERS/$n}" > /dev/null 2>&1
  total_ir "$f"
}
count() {  # name ops_per_iteration cmd...: one "instructions" line
  local name=$1 per=$2 a b
  shift 2
  a=$(run_ir "$name" $n1 "$@")
  b=$(run_ir "$name" $n2 "$@")
  echo "instructions $name $(((b - a) / (per * (n2 - n1))))" | tee -a "$out/instructions.txt"
}
: > "$out/instructions.txt"
list_posting() {  # LIST_POSTING_BIN: one "instructions list-posting-per-range" line
  # Only inside the functions that check, cut, post and retire a list's work requests (none
  # calls another of them, so each toggle turns collection on at its entry and off at its exit):
  # the wait loop's idle polls, whose number is the emulator's speed, are not counted.
  local toggles=() f a b ranges=4096
  for f in '*caf_rdma::OpList::of*' '*caf_rdma::validate_op*' '*caf_rdma::QpPosting::plan*' \
    '*caf_rdma::QpPosting::post_locked*' '*caf_rdma::QpCompletions::take_locked*' \
    '*caf_rdma::QpCompletions::run*'; do
    toggles+=("--toggle-collect=$f")
  done
  for n in 4 12; do
    rm -f "$out/cg.list.$n"*
    CAF_RDMA_DEVICE=rxe1 timeout 900 valgrind --tool=callgrind --collect-atstart=no "${toggles[@]}" \
      --callgrind-out-file="$out/cg.list.$n.%p" "$1" --ranges $ranges --iters $n > /dev/null 2>&1
    if [ $n = 4 ]; then a=$(total_ir "$out/cg.list.$n"); else b=$(total_ir "$out/cg.list.$n"); fi
  done
  echo "instructions list-posting-per-range $(((b - a) / (ranges * 8)))" | tee -a "$out/instructions.txt"
}
if [ "${1:-}" = --list ]; then  # count_instructions.sh --list OUT LIST_POSTING_BIN (in the VM)
  out=$2
  list_posting "$3"
  rm -f "$out"/cg.*
  exit 0
fi
if [ $native = 0 ]; then
  # rdma_bench --lat-only times a read loop and a write loop: 2 ops per iteration.
  for path in components direct; do
    CAF_RDMA_DEVICE=rxe1 count $path 2 "$bin" --paths $path --lat-only --lat-iters ITERS --peer-device rxe0
  done
  list_posting "$(dirname "$bin")/list_posting"
else
  count tcp-lat 1 "$bin/bench/tcp_lat" --iters ITERS
  count futex-lat 1 "$bin/bench/futex_lat" --iters ITERS
  # caf_rtt: a loop from an actor and one from a blocking scoped_actor.
  count caf-rtt 2 "$bin/bench/caf_rtt" --scheduler sharing --iters ITERS
  # rdma_bench's fallback latency: read and write, each from RdmaClient and from an actor (it
  # caps the iterations at 300, hence fewer here).
  n1=50 n2=250
  CAF_RDMA_SCHEDULER=sharing count fallback 4 "$bin/bench/rdma_bench" --paths fallback \
    --lat-only --sizes 4096 --lat-iters ITERS
fi
rm -f "$out"/cg.*
