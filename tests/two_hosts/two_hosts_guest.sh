#!/usr/bin/env bash
# two_hosts_guest.sh BIN_DIR [STEPS]: the two-host lane's checks, run by
# tests/rxe_vm/run_two_hosts.sh in BOTH VMs at once (TWO_HOSTS_ME says which side this is);
# host a (10.98.0.1) owns, host b
# (10.98.0.2) uses, every transfer on the RDMA path (CAF_RDMA_TRANSPORT=rdma: no fallback) over
# rxe0 on each VM's own NIC. Owners publish their ports in TWO_HOSTS_DIR, never guessed.
#   1. parameter_server: the server on a, 3 workers on b, 5 steps of 1 MiB, every step verified;
#      every worker must report path rdma-direct.
#   2. atomics: 4 atomic_adder processes x 4 threads x 50 fetch-adds on b, on a counter owned by
#      buffer_owner on a: the counter must be exactly 800 and the 800 old values b got back
#      must be 0..799, each once.
#   3. link down: transfer_loop on b writes and reads back 32 MiB of buffer_owner's on a, round
#      after round; after round 2, a sets its eth0 down (TWO_HOSTS_LINK_DOWN=b: b its own). b's
#      transfer must end in an error that names the peer (b's own port when b's link went down):
#      neither a hang nor a round that passes over a dead link. Then the link comes up again
#      and a new transfer_loop on b must move and check the bytes again.
#   4. rdma_stress --procs 4 --threads 2 --seconds 20 --max-size 256K --kill, ranks 0 and 2 on a,
#      1 and 3 on b (--hosts, started on b through remote_exec.py): every byte checked, the killed
#      rank named by the survivors.
# STEPS: which of them to run (default "1 2 3 4"). Prints each step's outcome and duration; exits
# with the number of failed steps (both VMs); an owner that never gets ready ends the script at
# once (exit 1), so that the other VM stops waiting for it (run_two_hosts.sh's abort file).
# BIN_DIR: Bazel's bazel-bin with //examples:parameter_server, //tests/actors:atomic_adder,
# //stress:rdma_stress and //tests/two_hosts:{buffer_owner,transfer_loop} built.
set -uo pipefail
here=$(dirname "$(realpath "$0")")
. "$here/guest_lib.sh"  # publish, wait_for_file, wait_for_line, wait_pid
bin=$(realpath "${1:?usage: two_hosts_guest.sh BIN_DIR [STEPS]}")
steps=" ${2:-1 2 3 4} "
me=$TWO_HOSTS_ME
log=/tmp/two_hosts  # this VM's own (tmpfs) files
mkdir -p "$log"
export CAF_RDMA_TRANSPORT=rdma
# Host a publishes on 10.98.0.1, beyond loopback: without TLS that needs the opt-in. The wire is
# a private link between two VMs on this machine (docs/security.md).
# (b's stress ranks too: remote_exec.py's server gets it.)
[ "$me" = a ] && export CAF_RDMA_PLAINTEXT=1
failed=0
step_t0=0
step() { step_t0=$(date +%s); echo "== step $*"; }
verdict() {  # verdict ok|FAILED TEXT
  echo "== $me: $1: $2 ($(( $(date +%s) - step_t0 )) s)"
  [ "$1" = ok ] || failed=$((failed + 1))
}
show() { sed "s/^/  $1| /" "${2:--}"; }  # show LABEL [FILE]: FILE (or stdin), each line labelled
# start_owner NAME SIZE FD: buffer_owner with a buffer of SIZE, its stdin on fd FD (one line asks
# it for its counter), its output in $log/NAME.{out,err}; sets opid and ready (its READY line).
start_owner() {
  local name=$1 size=$2 fd=$3
  mkfifo "$log/$name.in"
  "$bin/tests/two_hosts/buffer_owner" --host "$TWO_HOSTS_ADDR" --size "$size" \
    < "$log/$name.in" > "$log/$name.out" 2> "$log/$name.err" &
  opid=$!
  eval "exec $fd> \"\$log/$name.in\""
  ready=$(wait_for_line "$log/$name.out" '^READY ' 120 $opid) ||
    { show owner "$log/$name.out"; show owner.err "$log/$name.err"; exit 1; }
}

echo "== host $me: $TWO_HOSTS_ADDR, peer $TWO_HOSTS_PEER; $(/usr/bin/rdma link show rxe0/1 | tr -s ' ')"

# -- 1. parameter_server ---------------------------------------------------------------------
workers=3
ps_args=(--workers $workers --steps 5 --size 1M --timeout-ms 60000)
step "1 parameter_server: server on a, $workers workers on b"
if [[ "$steps" != *" 1 "* ]]; then
  echo "  (skipped)"
elif [ "$me" = a ]; then
  "$bin/examples/parameter_server" --role server --host "$TWO_HOSTS_ADDR" "${ps_args[@]}" \
    > "$log/server.out" 2> "$log/server.err" &
  spid=$!
  ready=$(wait_for_line "$log/server.out" '^READY ' 120 $spid) ||
    { show server "$log/server.out"; show server.err "$log/server.err"; exit 1; }
  publish ps.addr "$TWO_HOSTS_ADDR ${ready#READY }"
  wait_pid $spid 300
  rc=$?
  show server "$log/server.out"
  [ $rc = 0 ] || show server.err "$log/server.err"
  if [ $rc = 0 ] && grep -q 'final weights verified' "$log/server.out"; then
    verdict ok "parameter_server's server verified every step's gradients and the final weights"
  else
    verdict FAILED "the server exited with $rc"
  fi
else
  wait_for_file ps.addr 180 || exit 1
  read -r host mgr coord < "$TWO_HOSTS_DIR/ps.addr"
  pids=()
  for ((r = 0; r < workers; r++)); do
    "$bin/examples/parameter_server" --role worker --rank $r --server "$host:$mgr" \
      --coordinator "$host:$coord" "${ps_args[@]}" > "$log/worker$r.out" 2> "$log/worker$r.err" &
    pids+=($!)
  done
  bad=0
  for ((r = 0; r < workers; r++)); do
    wait_pid "${pids[$r]}" 300; rc=$?
    show "worker $r" "$log/worker$r.out"
    if [ $rc != 0 ] || ! grep -q 'steps verified, .* path rdma-direct,' "$log/worker$r.out"; then
      show "worker $r stderr" "$log/worker$r.err"; bad=$((bad + 1))
    fi
  done
  if [ $bad = 0 ]; then
    verdict ok "$workers workers on b verified every step over rdma-direct against the server on a"
  else
    verdict FAILED "$bad of $workers workers failed or did not take path rdma-direct"
  fi
fi

# -- 2. atomics --------------------------------------------------------------------------------
procs=4 threads=4 adds=50
total=$((procs * threads * adds))
step "2 atomics: $procs processes x $threads threads x $adds fetch-adds on b, counter on a"
if [[ "$steps" != *" 2 "* ]]; then
  echo "  (skipped)"
elif [ "$me" = a ]; then
  start_owner owner 4K 7
  publish counter.addr "$TWO_HOSTS_ADDR ${ready#READY }"
  wait_for_file atomics.b 300
  echo count >&7
  exec 7>&-
  wait_pid $opid 60; rc=$?
  counter=$(awk '/^COUNTER /{print $2}' "$log/owner.out")
  echo "  a: counter after b's adders: ${counter:-none} (expected $total);" \
    "b said: $(cat "$TWO_HOSTS_DIR/atomics.b" 2>/dev/null)"
  if [ $rc = 0 ] && [ "$counter" = "$total" ]; then
    verdict ok "the counter on a is exactly $total"
  else
    show owner "$log/owner.out"; show owner.err "$log/owner.err"
    verdict FAILED "counter ${counter:-unread} (owner exit $rc), expected $total"
  fi
else
  wait_for_file counter.addr 180 || exit 1
  read -r host port < "$TWO_HOSTS_DIR/counter.addr"
  pids=()
  for ((p = 0; p < procs; p++)); do
    "$bin/tests/actors/atomic_adder" "$host" "$port" counter 0 $threads $adds \
      > "$log/adder$p.out" 2> "$log/adder$p.err" &
    pids+=($!)
  done
  bad=0
  for ((p = 0; p < procs; p++)); do
    if ! wait_pid "${pids[$p]}" 300; then
      bad=$((bad + 1))
      grep -h ERROR "$log/adder$p.out"; show "adder $p stderr" "$log/adder$p.err"
    fi
  done
  cat "$log"/adder*.out | awk '/^OLD /{print $2}' | sort -n > "$log/olds"
  if [ $bad = 0 ] && seq 0 $((total - 1)) | cmp -s - "$log/olds"; then
    publish atomics.b "ok: $total old values, 0..$((total - 1)) each once"
    verdict ok "b's $total fetch-adds returned the old values 0..$((total - 1)), each once"
  else
    publish atomics.b "FAILED: $bad adders failed; $(wc -l < "$log/olds") old values"
    verdict FAILED "$bad adders failed; $(wc -l < "$log/olds") old values, not 0..$((total - 1)) each once"
  fi
fi

# -- 3. link down mid-transfer -----------------------------------------------------------------
# The host whose link goes down: a (the owner's; default) or b (the requester's own).
down_host=${TWO_HOSTS_LINK_DOWN:-a}
# On $down_host: once b's transfer_loop finished round 2 (round 3 is running), eth0 down; once
# transfer_loop ended (loop1.done), eth0 up again.
flap_link() {
  local seen
  seen=$(wait_for_line "$TWO_HOSTS_DIR/loop1.out" '^(round 2 ok|ERROR|MISMATCH)' 240)
  if [[ "$seen" == "round 2 ok"* ]]; then
    /usr/sbin/ip link set eth0 down
    echo "  $me: eth0 down at $(date +%T.%N | cut -c1-12) (b's round 2 was done; round 3 running)"
    publish link.down "$(date +%s)"
    wait_for_file loop1.done 240
    /usr/sbin/ip link set eth0 up
    echo "  $me: eth0 up at $(date +%T.%N | cut -c1-12); $(/usr/bin/rdma link show rxe0/1 | tr -s ' ')"
  else
    echo "  $me: b's transfers never reached round 2 (${seen:-nothing}): link left up"
  fi
  publish link.up "$(date +%s)"
}
step "3 link down: $down_host sets eth0 down while b's 32 MiB transfers to and from a run"
if [[ "$steps" != *" 3 "* ]]; then
  echo "  (skipped)"
elif [ "$me" = a ]; then
  start_owner data 32M 8
  publish data.addr "$TWO_HOSTS_ADDR ${ready#READY }"
  [ "$down_host" = a ] && flap_link  # b's transfer_loop writes its progress into TWO_HOSTS_DIR
  wait_for_file loop2.done 240
  echo count >&8
  exec 8>&-
  wait_pid $opid 60; rc=$?
  if [ $rc = 0 ]; then
    verdict ok "the owner on a outlived $down_host's link going down and answered afterwards"
  else
    show owner "$log/data.out"; show owner.err "$log/data.err"
    verdict FAILED "the owner exited with $rc"
  fi
else
  wait_for_file data.addr 180 || exit 1
  read -r host port < "$TWO_HOSTS_DIR/data.addr"
  "$bin/tests/two_hosts/transfer_loop" --owner "$host:$port" --timeout-ms 15000 \
    > "$TWO_HOSTS_DIR/loop1.out" 2> "$log/loop1.err" &
  lpid=$!
  [ "$down_host" = b ] && { flap_link & fpid=$!; }
  wait_pid $lpid 240; rc=$?
  publish loop1.done "$rc"
  [ "$down_host" = b ] && wait_pid $fpid 60
  down=$(cat "$TWO_HOSTS_DIR/link.down" 2>/dev/null)
  grep -v '^round [12] ok' "$TWO_HOSTS_DIR/loop1.out" | show transfer_loop
  [ -n "$down" ] &&
    echo "  b: transfer_loop exited $rc, $(( $(date +%s) - down )) s after $down_host's eth0 went down"
  show "transfer_loop stderr" "$log/loop1.err"
  error=$(grep -E '^(ERROR|MISMATCH)' "$TWO_HOSTS_DIR/loop1.out")
  if [ -z "$down" ]; then
    verdict FAILED "$down_host never set its link down (transfer_loop exit $rc)"
  elif [ $rc = 3 ] && [ "$down_host" = a ] && grep -q "$host" <<< "$error"; then
    verdict ok "the transfer failed with an error naming the peer $host"
  elif [ $rc = 3 ] && [ "$down_host" = b ] && grep -q "port is down (rxe0 port 1" <<< "$error"; then
    verdict ok "the transfer failed with an error naming b's own port that went down"
  elif [ $rc = 3 ]; then
    verdict FAILED "the transfer failed, but the error names neither the peer $host nor b's port"
  else
    verdict FAILED "transfer_loop exit $rc: no clear error (124: it hung; 4: wrong bytes)"
  fi
  step "3b after the link is back: a new transfer_loop process on b, 2 rounds"
  if [ -n "$down" ] && wait_for_file link.up 240; then
    "$bin/tests/two_hosts/transfer_loop" --owner "$host:$port" --rounds 2 --timeout-ms 30000 \
      > "$log/loop2.out" 2> "$log/loop2.err" &
    lpid=$!
    wait_pid $lpid 120; rc=$?
    show transfer_loop "$log/loop2.out"
    if [ $rc = 0 ]; then
      verdict ok "with the link up again, a new connection moved and checked the bytes"
    else
      show "transfer_loop stderr" "$log/loop2.err"
      verdict FAILED "with the link up again, transfer_loop exited $rc"
    fi
  fi
  publish loop2.done "$rc"
fi

# -- 4. the stress tool across the hosts ---------------------------------------------------
step "4 stress: rdma_stress, ranks 0 and 2 on a, 1 and 3 on b, one rank killed"
if [[ "$steps" != *" 4 "* ]]; then
  echo "  (skipped)"
elif [ "$me" = a ]; then
  if wait_for_file "exec.$TWO_HOSTS_PEER" 120; then
    "$bin/stress/rdma_stress" --procs 4 --threads 2 --seconds 20 --max-size 256K --kill \
      --hosts "$TWO_HOSTS_ADDR,$TWO_HOSTS_PEER" \
      --remote "$here/remote_exec.py connect $TWO_HOSTS_DIR" > "$log/stress.out" 2> "$log/stress.err" &
    spid=$!
    wait_pid $spid 300; rc=$?
    publish stress.done "$rc"
    grep -v '^rdma_stress: seed' "$log/stress.out" | show rdma_stress
    if [ $rc = 0 ] && grep -q '=> PASS' "$log/stress.out"; then
      verdict ok "rdma_stress across the two hosts passed (every byte checked, the killed rank named)"
    else
      grep -v 'caf-rdma info' "$log/stress.err" | tail -20 | show "rdma_stress stderr"
      verdict FAILED "rdma_stress exited with $rc"
    fi
  else
    verdict FAILED "no remote_exec server on b"
  fi
else
  # b runs a's remote ranks: remote_exec.py starts each with its own stdin/stdout on a's
  # connection (rdma_stress --remote), and kills it when that connection ends.
  CAF_RDMA_PLAINTEXT=1 "$here/remote_exec.py" serve "$TWO_HOSTS_DIR" "$TWO_HOSTS_ADDR" \
    2> "$log/exec.err" &
  xpid=$!
  wait_for_file stress.done 330; rc=$?
  kill $xpid 2>/dev/null; wait $xpid 2>/dev/null
  grep -v 'caf-rdma info' "$log/exec.err" | tail -10 | show "b's ranks, stderr"
  if [ $rc = 0 ]; then
    verdict ok "b ran a's remote ranks until a's rdma_stress ended (its verdict is a's)"
  else
    verdict FAILED "a's rdma_stress did not end (wait $rc)"
  fi
fi

echo "== host $me: $failed failed step(s)"
exit $failed
