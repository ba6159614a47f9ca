#!/usr/bin/env bash
# Runs the multi-process examples and the kv_store system's command-line programs end to end and
# checks that they verified every byte on the expected path: CAF_RDMA_TRANSPORT=fallback (native
# lane) or rdma (rdma-tagged, in the VM).
# Writes one test case per example run into $XML_OUTPUT_FILE, so skips and failures show up in
# tests/run_tests.sh's listing.
set -uo pipefail
mode=${CAF_RDMA_TRANSPORT:-fallback}
bin=${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-caf_rdma}/examples
kv=${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-caf_rdma}/systems/kv_store
tests=${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-caf_rdma}/tests
xml=${XML_OUTPUT_FILE:-/dev/null}
suite="Examples_${mode}"
source "$(dirname "$0")/../sh_test_lib.sh"
skip_without_device ping_pong parameter_server parameter_server_small kv_store_cli

# Each command well inside the test's own limit, so a hang is recorded with its output.
run() { local name=$1; shift; run_case "$name" 120 "$@"; }

run ping_pong "(path $path), read them back (path $path): verified" -- "$bin/ping_pong" --size 4M
run parameter_server "parameter_server: OK" "steps verified, .* path $path, " -- \
  "$bin/parameter_server" --workers 3 --steps 4 --size 1M
run parameter_server_small "parameter_server: OK" "steps verified, .* path $path, " -- \
  "$bin/parameter_server" --workers 2 --steps 2 --size 64K
# "READ_OPS READ_BYTES WRITE_OPS WRITE_BYTES" of path $path from a node's metrics (curl at URL $1).
scrape_totals() {
  local text
  [ -n "$1" ] && text=$(curl -s -S --max-time 30 "$1") || return 1
  grep -q '^caf_rdma_manager_up 1$' <<<"$text" || return 1
  local kind name out=""
  for kind in read write; do
    for name in ops bytes; do
      out+="${out:+ }$(awk -v p="caf_rdma_transfer_${name}_total{path=\"$path\",kind=\"$kind\"}" \
        '$1 == p { v = $2 } END { printf "%.0f", v }' <<<"$text")"
    done
  done
  echo "$out"
}
# kv_store from the command line: the documented commands, exit codes and the path.
kv_cli() {
  local dir log port metrics out rc problem="" before after
  dir=$(mktemp -d)
  "$kv/kv_server" --listen 127.0.0.1:0 --memory-mb 32 --metrics 127.0.0.1:0 > "$dir/server.log" 2>&1 &
  local server=$!
  # Wait for its report (bounded): the port is the one it bound, read from its own line.
  for _ in $(seq 300); do grep -q "listening on" "$dir/server.log" && break; sleep 0.1; done
  port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$dir/server.log" | head -1 | cut -d' ' -f3)
  # Printed before the "listening" line: the metrics port it bound.
  metrics=$(grep -o 'metrics on http://127.0.0.1:[0-9]*/metrics' "$dir/server.log" | head -1 | cut -d' ' -f3)
  if [ -z "$port" ]; then
    kill "$server" 2>/dev/null; cat "$dir/server.log"
    record kv_store_cli failed "kv_server did not report its address within 30 s"; return
  fi
  # Each client call bounded by what is left of the test's time, at most 60 s (a hung call
  # fails the case with exit 124, not the whole test).
  kvc() {
    local t; t=$(case_limit 60); [ "$t" -ge 1 ] || t=1  # timeout 0 would mean no limit
    timeout -k 10 "$t" "$kv/kv_client" --server "$port" --buffer-mb 4 "$@"
  }
  echo "=== kv_store_cli: kv_server at $port"
  out=$(kvc put greeting "hello rdma" 2>&1) || problem="put failed: $out"
  echo "$out"
  grep -q "(path $path)" <<<"$out" || problem=${problem:-"put did not report path $path: $out"}
  out=$(kvc get greeting 2>/dev/null); rc=$?
  [ $rc -eq 0 ] && [ "$out" = "hello rdma" ] || problem=${problem:-"get returned '$out' (exit $rc)"}
  kvc get missing > /dev/null 2> "$dir/err"; rc=$?
  cat "$dir/err"
  [ $rc -eq 3 ] && grep -q "no such key" "$dir/err" || problem=${problem:-"missing key: exit $rc"}
  head -c 6000000 /dev/urandom > "$dir/big"
  kvc put big --value-file "$dir/big" 2> "$dir/err"; rc=$?
  cat "$dir/err"
  [ $rc -eq 1 ] && grep -q "larger than the client's buffer" "$dir/err" || problem=${problem:-"too large: exit $rc"}
  out=$(kvc delete greeting 2>&1) || problem=${problem:-"delete failed: $out"}
  echo "$out"
  before=$(scrape_totals "$metrics") || problem=${problem:-"no metrics at '$metrics' before the bench"}
  out=$(kvc bench --ops 400 --value-size 16384 --concurrency 4 2>&1) || problem=${problem:-"bench failed: $out"}
  echo "$out"
  # Without RDMA a GET's value of at most 64 KiB comes in the server's reply (path inline), so
  # the server's manager moves no GET bytes then.
  local get_path=$path want="400 6553600 400 6553600" got
  [ "$path" = fallback ] && { get_path=inline; want="400 6553600 0 0"; }
  grep -q "put .*(path $path)" <<<"$out" && grep -q "get .*(path $get_path)" <<<"$out" &&
    grep -q "verified 400 values" <<<"$out" || problem=${problem:-"bench output"}
  # The server's metrics show what the bench moved, exactly: it READs each PUT's value out of
  # the client's buffer and WRITEs each GET's into it (400 x 16384 B each way, path $path).
  after=$(scrape_totals "$metrics") || problem=${problem:-"no metrics at '$metrics' after the bench"}
  echo "kv_server metrics before the bench: $before; after: $after"
  local -a b a; read -ra b <<<"$before"; read -ra a <<<"$after"
  got="$((a[0] - b[0])) $((a[1] - b[1])) $((a[2] - b[2])) $((a[3] - b[3]))"
  [ "$got" = "$want" ] || problem=${problem:-"metrics moved by the bench (read ops, read bytes, write ops, write bytes): '$got', not '$want'"}
  # 1 MiB values take the stream channel on the fallback: the bench rewrites a slot as soon as
  # its PUT's reply is in, as the RDMA rule allows (under --config=tsan this shows that the owner
  # is done with a READ's source before the requester completes).
  out=$(kvc bench --ops 80 --value-size 1048576 --concurrency 4 2>&1) || problem=${problem:-"1 MiB bench failed: $out"}
  echo "$out"
  grep -q "verified 80 values" <<<"$out" || problem=${problem:-"1 MiB bench output"}
  kill "$server"
  for _ in $(seq 100); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done  # <= 10 s
  kill -9 "$server" 2>/dev/null; wait "$server" 2>/dev/null
  # Nobody listens there: a port held bound (not listening) by a helper, not the server's freed
  # one (which anything running beside the test could bind again).
  coproc HOLDER { exec "$tests/closed_port_holder" 300; }
  local holder=$HOLDER_PID closed=""
  read -r -t 10 -u "${HOLDER[0]}" closed
  if [ -z "$closed" ]; then
    problem=${problem:-"closed_port_holder printed no port within 10 s"}
  else
    port=127.0.0.1:$closed
    kvc get greeting 2> "$dir/err"; rc=$?
    cat "$dir/err"
    [ $rc -eq 1 ] && grep -q "cannot reach kv_server at $port" "$dir/err" || problem=${problem:-"unreachable: exit $rc"}
  fi
  kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
  rm -rf "$dir"
  if [ -n "$problem" ]; then
    record kv_store_cli failed "$problem"; echo "kv_store_cli: $problem"
  else
    record kv_store_cli passed ""
  fi
}
kv_cli
write_xml
echo "examples ($mode): $failures failed"
[ $failures -eq 0 ]
