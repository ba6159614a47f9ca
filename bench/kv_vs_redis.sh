#!/usr/bin/env bash
# The key-value store beside redis, natively (no RDMA device: kv_store's fallback path; GETs go
# to the server's same-host GET listener, PUTs through CAF and the managers' stream channel, as
# kv_local_get.h says), GET throughput and p50 at the same value sizes and
# concurrency: 4 KiB values with 8 clients and 1 MiB values with 4 clients. kv_client bench
# (N PUTs, then N GETs, every GET verified) against redis-benchmark -t set,get (N SETs, then N
# GETs of one key, no pipelining) on a redis-server that listens on a unix socket only (no port:
# nothing to race for) and saves nothing. Rounds alternate kv and redis, so each pair is taken
# close in time; the report takes the median of the rounds.
#
#   bash bench/kv_vs_redis.sh [--short|--long] OUT KV_SERVER KV_CLIENT
#     -> OUT/kv.txt, one line per run:
#        kv <kv|redis> <value_bytes> <clients> <round> <get_ops_s> <get_p50_us> \
#           <client_csw_per_op> <server_csw_per_op>
#     (voluntary context switches per op, PUTs/SETs and GETs together: the client's from GNU
#     time, the server's from its threads' /proc counters), then bench_report.py --kv's table
#     and the lines "ratio kv_get_4k_vs_redis X", "ratio kv_get_1m_vs_redis X" (kv's GET ops/s
#     over redis's: above 1, kv is faster).
# Every wait is bounded (a server's start line: 60 s; each client run: 300 s; a server's exit:
# 30 s, then SIGKILL); the script stops only the processes it started, by their pid.
set -uo pipefail
here=$(dirname "$(realpath "$0")")
mode=short
[ "${1:-}" = --long ] && { mode=long; shift; }
[ "${1:-}" = --short ] && { mode=short; shift; }
out=$1 kv_server=$2 kv_client=$3
rounds=3
if [ "$mode" = long ]; then n_4k=100000 n_1m=2000; else n_4k=20000 n_1m=400; fi
for tool in redis-server redis-benchmark /usr/bin/time; do
  command -v "$tool" > /dev/null || { echo "kv_vs_redis: $tool missing (bash third_party/install_deps.sh)" >&2; exit 1; }
done
mkdir -p "$out"
dir=$(mktemp -d)
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do stop "$pid"; done
  rm -rf "$dir"
}
trap cleanup EXIT
export CAF_RDMA_TRANSPORT=fallback

# start NAME PATTERN CMD...: runs CMD with its output into a FIFO and reads it (each line within
# the 60 s left at most) until a line matches PATTERN; then `started_line` holds that line, a
# `cat` keeps draining the rest into $dir/NAME.log and `started_pid` is CMD's pid.
start() {
  local name=$1 pattern=$2 fd line deadline=$((SECONDS + 60))
  shift 2
  mkfifo "$dir/$name.fifo"
  "$@" > "$dir/$name.fifo" 2>&1 &
  started_pid=$!
  pids+=("$started_pid")
  exec {fd}< "$dir/$name.fifo"
  while [ $SECONDS -lt $deadline ] && IFS= read -r -t $((deadline - SECONDS + 1)) -u "$fd" line; do
    echo "$line" >> "$dir/$name.log"
    if [[ $line =~ $pattern ]]; then
      started_line=$line
      cat <&"$fd" >> "$dir/$name.log" &
      exec {fd}<&-
      return 0
    fi
  done
  exec {fd}<&-
  echo "kv_vs_redis: $name did not start within 60 s:" >&2
  cat "$dir/$name.log" >&2
  return 1
}
stop() {  # PID: SIGTERM, at most 30 s for its exit, then SIGKILL
  kill -TERM "$1" 2>/dev/null || return 0
  timeout 30 tail --pid="$1" -f /dev/null || kill -KILL "$1" 2>/dev/null
}
# Voluntary context switches of all threads of process PID so far.
proc_switches() {
  cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^voluntary_ctxt_switches/ {s += $2} END {print s + 0}'
}

# One kv_server per value size: kv_client bench fills up to half the pool with its keys, and
# the keys of one size stay there during the other's runs.
declare -A kv_pid kv_addr
for size in 4096 1048576; do
  start "kv_server_$size" 'listening on ' "$kv_server" --listen 127.0.0.1:0 --memory-mb 512 || exit 1
  kv_pid[$size]=$started_pid
  kv_addr[$size]=$(grep -o 'listening on [0-9.]*:[0-9]*' <<<"$started_line" | cut -d' ' -f3)
done
start redis 'ready to accept connections' redis-server --port 0 --unixsocket "$dir/redis.sock" \
  --save '' --appendonly no --dir "$dir" || exit 1
redis_pid=$started_pid
echo "kv_vs_redis: kv_server at ${kv_addr[4096]} and ${kv_addr[1048576]} (fallback)," \
  "redis-server at $dir/redis.sock" >&2

: > "$out/kv.txt"
rc=0
for r in $(seq 1 $rounds); do
  for conf in "4096 8 $n_4k" "1048576 4 $n_1m"; do
    read -r size clients n <<<"$conf"
    # kv_client bench: its "get" line is "get OPS ops/s latency p50 P50 us ...".
    s0=$(proc_switches "${kv_pid[$size]}")
    if timeout 300 /usr/bin/time -f "csw %w" -o "$dir/time" "$kv_client" --server "${kv_addr[$size]}" \
      --buffer-mb 64 bench --ops "$n" --value-size "$size" --concurrency "$clients" > "$dir/kv.out" 2>&1; then
      s1=$(proc_switches "${kv_pid[$size]}")
      read -r ops p50 < <(awk '$1 == "get" {print $2, $6}' "$dir/kv.out")
      grep -q "verified $n values" "$dir/kv.out" || { echo "kv_vs_redis: kv_client did not verify every GET" >&2; rc=1; }
      csw=$(awk '/^csw/ {print $2}' "$dir/time")
      echo "kv kv $size $clients $r $ops $p50 $(awk -v c="$csw" -v n="$n" 'BEGIN {printf "%.3f", c / (2 * n)}') $(awk -v c=$((s1 - s0)) -v n="$n" 'BEGIN {printf "%.3f", c / (2 * n)}')" >> "$out/kv.txt"
    else
      echo "kv_vs_redis: kv_client bench failed:" >&2; cat "$dir/kv.out" >&2; rc=1
    fi
    # redis-benchmark --csv: "GET","<rps>","<avg_ms>","<min_ms>","<p50_ms>",...
    s0=$(proc_switches "$redis_pid")
    if timeout 300 /usr/bin/time -f "csw %w" -o "$dir/time" redis-benchmark -s "$dir/redis.sock" \
      -t set,get -n "$n" -c "$clients" -d "$size" -P 1 --csv > "$dir/redis.out" 2>&1; then
      s1=$(proc_switches "$redis_pid")
      read -r ops p50 < <(awk -F, '/^"GET"/ {gsub(/"/, ""); printf "%s %.1f\n", $2, $5 * 1000}' "$dir/redis.out")
      csw=$(awk '/^csw/ {print $2}' "$dir/time")
      echo "kv redis $size $clients $r $ops $p50 $(awk -v c="$csw" -v n="$n" 'BEGIN {printf "%.3f", c / (2 * n)}') $(awk -v c=$((s1 - s0)) -v n="$n" 'BEGIN {printf "%.3f", c / (2 * n)}')" >> "$out/kv.txt"
    else
      echo "kv_vs_redis: redis-benchmark failed:" >&2; cat "$dir/redis.out" >&2; rc=1
    fi
  done
done
/usr/bin/python3 "$here/bench_report.py" --kv "$out"
exit $rc
