# guest_lib.sh: waiting and publishing for a command that tests/rxe_vm/run_two_hosts.sh runs in
# both VMs; sourced (never run). Needs TWO_HOSTS_ME (a|b) and TWO_HOSTS_DIR (shared by both VMs).
#
#   publish NAME TEXT                    TWO_HOSTS_DIR/NAME := TEXT, whole or not at all
#   wait_for_file NAME TIMEOUT_S         until TWO_HOSTS_DIR/NAME exists
#   wait_for_line FILE REGEX TIMEOUT_S [PID]
#                                        until a line of FILE matches REGEX; prints the first
#   wait_pid PID TIMEOUT_S               until process PID (a child of this shell) ends; returns
#                                        its exit code; kills it (SIGKILL) at the timeout
# Invariants:
#  1. Every wait is bounded: it returns 124 at its timeout, never waits longer.
#  2. Every wait ends early (returns 125) once the other VM's command failed (run_two_hosts.sh
#     then writes TWO_HOSTS_DIR/abort.<other>): nobody waits out a timeout for a dead peer.
#     wait_for_line ends early (126) too when PID is given and that process ended.
#  3. A published file appears whole (written aside, then renamed): a reader never sees part.
# The waits poll every 0.1 s: the other VM's files arrive over 9p, where inotify sees nothing.

guest_peer=$([ "${TWO_HOSTS_ME:-}" = a ] && echo b || echo a)

publish() {
  printf '%s\n' "$2" > "$TWO_HOSTS_DIR/.$1.$TWO_HOSTS_ME.tmp" &&
    mv "$TWO_HOSTS_DIR/.$1.$TWO_HOSTS_ME.tmp" "$TWO_HOSTS_DIR/$1"
}

# 0 while the deadline $1 (seconds since the epoch) is ahead and the peer has not failed.
guest_poll() {
  if [ -e "$TWO_HOSTS_DIR/abort.$guest_peer" ]; then
    echo "guest($TWO_HOSTS_ME): host $guest_peer failed; not waiting for it" >&2
    return 125
  fi
  [ "$(date +%s)" -lt "$1" ] || return 124
  sleep 0.1
}

wait_for_file() {
  local deadline=$(( $(date +%s) + $2 )) rc
  until [ -e "$TWO_HOSTS_DIR/$1" ]; do
    guest_poll "$deadline" || {
      rc=$?; [ $rc = 124 ] && echo "guest($TWO_HOSTS_ME): no $1 after $2 s" >&2; return $rc
    }
  done
}

wait_for_line() {
  local deadline=$(( $(date +%s) + $3 )) rc
  until grep -Eq -m1 "$2" "$1" 2>/dev/null; do
    if [ -n "${4:-}" ] && ! kill -0 "$4" 2>/dev/null; then
      grep -Eq -m1 "$2" "$1" 2>/dev/null && break
      echo "guest($TWO_HOSTS_ME): process $4 ended before $1 said /$2/" >&2
      return 126
    fi
    guest_poll "$deadline" || {
      rc=$?; [ $rc = 124 ] && echo "guest($TWO_HOSTS_ME): $1 did not say /$2/ in $3 s" >&2; return $rc
    }
  done
  grep -E -m1 "$2" "$1"
}

wait_pid() {
  local deadline=$(( $(date +%s) + $2 )) rc
  while kill -0 "$1" 2>/dev/null; do
    guest_poll "$deadline" || {
      rc=$?; echo "guest($TWO_HOSTS_ME): stopping process $1 (wait ended with $rc)" >&2
      kill -KILL "$1" 2>/dev/null; wait "$1" 2>/dev/null; return $rc
    }
  done
  wait "$1"
}
