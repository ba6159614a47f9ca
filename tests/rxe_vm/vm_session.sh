#!/usr/bin/env bash
# vm_session.sh: one Soft-RoCE VM (rxe mode pair) that runs many commands, one after another.
# The VM lane starts one before `bazel test --config=rxe //...` and names it in
# CAF_RDMA_VM_SESSION: run_under.sh then hands each test binary to it instead of booting a VM of
# its own (a boot is ~6 s of CPU under TCG; the lane runs over 30 binaries). Without a session,
# or for what a session cannot run, run_under.sh boots one VM per binary as before.
#
#   vm_session.sh start DIR SHARE...   boots the session VM, DIR its control share (made anew;
#                                      refused if DIR holds anything but an old session), each
#                                      SHARE (an existing directory) read-write at its path;
#                                      returns once it is ready (exit 0), or 125 when it did not
#                                      come up in 180 s or its kernel logged a warning booting
#   vm_session.sh covers DIR PATH...   exit 0 when the live session shares every PATH read-write
#                                      and boots the kernel this environment asks for
#   vm_session.sh run DIR LIMIT [-e VAR]... -- CMD [ARG...]
#                                      runs CMD in the session in the current directory with
#                                      the VARs that are set: its output on stdout, and the exit
#                                      code a VM of its own would give (run_in_vm.sh); 124 over
#                                      LIMIT seconds, which ends the session; 199 when no session
#                                      runs (CMD did not run: run_under.sh boots a VM instead)
#   vm_session.sh stop DIR             ends the session (all its processes killed if it is not
#                                      gone 30 s after it was asked to stop)
#
# Invariants:
#  1. One command at a time: `run` holds DIR/lock (flock) from handing its command over until
#     its answer; each command has its own job directory DIR/jobs/N, and its answer names it.
#  2. Each command starts as in a VM of its own, as far as the lane's tests can see: the guest
#     kernel's log empty, nothing else running, /dev/shm empty, the pair's veths, addresses,
#     routes, rules and rxe devices as the setup made them, and the host's files as they are
#     now (the guest's cache of them is dropped when the command or its runfiles changed since
#     the last drop: DIR/cache_epoch). The init
#     restores these after each command and before its answer, so what restoring logs is that
#     command's. Not reset: the guest's /tmp (shares may lie under it; tests write into their
#     TEST_TMPDIR, a share); what a command writes into the shares stays, as on the host.
#  3. Its verdict is the one-shot VM's (vm_lib.sh vm_verdict): the command's exit code, 126 for
#     a guest kernel WARNING, BUG or oops logged while it ran or while it was cleaned up after.
#  4. A session whose VM died, a command over its limit or killed, or one whose leftovers could
#     not be cleaned up (DIR/jobs/N/broken) ends the session (DIR/dead): `covers` is false from
#     then on, so later commands boot VMs of their own.
#  5. Only this session's processes are ever killed: those of its own process session whose
#     command line names DIR.
set -uo pipefail
here=$(dirname "$(realpath "$0")")
. "$here/vm_lib.sh"  # vm_prepare, vm_write_cmd, vm_boot, vm_verdict, vm_kernel_bad
usage() { sed -n '2,39p' "$0" >&2; exit 2; }
[ $# -ge 2 ] || usage
verb=$1 dir=$2
shift 2
[ -n "$dir" ] || usage
kernel_asked() { echo "${CAF_RDMA_VM_KERNEL:-6.12} ${CAF_RDMA_VM_KERNEL_PKG:-}"; }

# Invariant 5: this session's processes whose command line holds $1 (default DIR): qemu, its
# timeout wrapper, the shell that booted it.
mine() {
  local sid
  sid=$(cat "$dir/sid" 2>/dev/null) && [ -n "$sid" ] && pgrep -s "$sid" -f -- "${1:-$dir}"
}
alive() { [ -f "$dir/ready" ] && [ ! -f "$dir/dead" ] && mine "path=$dir/req" > /dev/null; }
# A request on the third serial port (bounded: a FIFO nobody reads would block the open).
send() { timeout 5 bash -c 'echo "$1" > "$2"' _ "$1" "$dir/req.in"; }

# Ends the session: with `clean`, a stop it is asked for (waited for up to 30 s); then every
# process of it is killed (invariant 5).
stop_session() {
  local IFS=$' \t\n'  # a trap may run it inside `IFS= read`
  [ -f "$dir/sid" ] || return 0
  if [ "${1:-}" = clean ] && alive; then
    send stop
    for _ in $(seq 300); do mine > /dev/null || break; sleep 0.1; done
  fi
  : > "$dir/dead"
  local pids
  pids=$(mine) && kill -9 $pids 2>/dev/null
  rm -f "$dir/sid"
  return 0
}

case $verb in
  start)
    command -v qemu-system-x86_64 >/dev/null || { echo "vm_session: qemu-system-x86_64 not found" >&2; exit 125; }
    [ $# -ge 1 ] || usage
    shares=()
    for s in "$@"; do
      [ -n "$s" ] && [ -d "$s" ] || { echo "vm_session: share '$s' is not a directory" >&2; exit 125; }
      shares+=("$(realpath "$s")")
    done
    if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ] && [ ! -f "$dir/vm.conf" ]; then
      echo "vm_session: $dir holds something else than a session: not touching it" >&2; exit 125
    fi
    image=$("$here/build_image.sh") || { echo "vm_session: building the VM image failed" >&2; exit 125; }
    [ -d "$dir" ] && stop_session clean
    rm -rf "$dir" && mkdir -p "$dir/jobs" || exit 125
    dir=$(realpath "$dir")
    mkfifo "$dir/req.in" "$dir/req.out" || exit 125
    printf '%s\n' "${shares[@]}" > "$dir/covers"
    echo "$image" > "$dir/image"
    : > "$dir/cache_epoch"  # what the guest reads after this is read afresh
    kernel_asked > "$dir/kernel"
    cpus=$(nproc); [ "$cpus" -gt 4 ] && cpus=4
    vm_prepare "$dir" pair "${shares[@]}"
    echo "SESSION=1" >> "$dir/vm.conf"
    # Its own process session (setsid), up to 4 hours; the third serial port carries the
    # requests and the answers.
    setsid bash -c '. "$1/vm_lib.sh"; echo $$ > "$2/sid"; vm_boot "$2" "$3" 2048 "$4" 14400 \
                      -chardev pipe,id=req,path="$2/req" -serial chardev:req; : > "$2/dead"' \
      _ "$here" "$dir" "$image" "$cpus" > "$dir/stdio.log" 2>&1 < /dev/null &
    for _ in $(seq 1800); do  # <= 180 s
      [ -f "$dir/ready" ] && break
      [ -f "$dir/dead" ] && break
      sleep 0.1
    done
    if [ ! -f "$dir/ready" ]; then
      echo "vm_session: the session VM did not come up; its console:" >&2
      tail -20 "$dir/console.log" >&2 2>/dev/null
      stop_session
      exit 125
    fi
    # A kernel that warned while booting would fail every binary (vm_verdict): none of them
    # runs in it.
    if grep -Eq "$vm_kernel_bad" "$dir/boot-dmesg" 2>/dev/null; then
      echo "vm_session: the session VM's kernel logged warnings while booting:" >&2
      grep -E "$vm_kernel_bad" "$dir/boot-dmesg" | head -20 >&2
      stop_session clean
      exit 125
    fi
    exit 0
    ;;
  covers)
    alive || exit 1
    [ "$(kernel_asked)" = "$(cat "$dir/kernel")" ] || exit 1
    for p in "$@"; do
      p=$(realpath -m "$p") ok=1
      while IFS= read -r s; do
        [ -n "$s" ] || continue
        case $p/ in "$s"/*) ok=0 ;; esac
      done < "$dir/covers"
      [ $ok = 0 ] || exit 1
    done
    exit 0
    ;;
  run)
    [ $# -ge 1 ] || usage
    limit=$1; shift
    deadline=$((SECONDS + limit))
    vars=(PATH LD_LIBRARY_PATH)
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
      [ "$1" = -e ] && [ $# -ge 2 ] && { vars+=("$2"); shift 2; continue; }
      usage
    done
    [ "${1:-}" = -- ] && shift
    [ $# -ge 1 ] || usage
    exec 9> "$dir/lock"
    flock -w "$limit" 9 || { echo "vm_session: another command held the session for ${limit}s" >&2; exit 124; }
    alive || { echo "vm_session: the session is not running" >&2; exit 199; }
    exec 8<> "$dir/req.out"  # O_RDWR: never blocks, and what qemu wrote stays readable
    job=$(mktemp -d "$dir/jobs/XXXXXXXX")
    name=$(basename "$job")
    vm_write_cmd "$job" "${vars[@]}" -- "$@"
    printf '%s\n' "$PWD" > "$job/cwd"
    # Invariant 2: the guest reads the host's files through a cache that does not look for
    # changes; when the command or its runfiles (the current directory's tree) changed since
    # the caches were last dropped, it drops them first.
    if [ -n "$(find -L "$PWD" "$(command -v "$1" || echo "$1")" -newer "$dir/cache_epoch" -print -quit 2>/dev/null)" ]; then
      : > "$job/drop_caches"
      touch "$dir/cache_epoch"
    fi
    # Invariant 4: killed after the command was handed over, the session cannot be trusted with
    # the next one (the guest may still run this one).
    trap 'cat "$job/out" 2>/dev/null; echo "vm_session: killed while its command ran" >&2; stop_session; exit 143' TERM INT HUP
    send "$name" || { echo "vm_session: the session took no request" >&2; stop_session; exit 125; }
    partial="" answer=""
    while [ "$answer" != "done $name" ]; do
      left=$((deadline - SECONDS))
      if [ "$left" -le 0 ] || ! alive; then
        cat "$job/out" 2>/dev/null
        if [ "$left" -le 0 ]; then
          echo "vm_session: timed out after ${limit}s" >&2; stop_session; exit 124
        fi
        echo "vm_session: the session VM died; its console:" >&2; tail -30 "$dir/console.log" >&2
        stop_session; exit 125
      fi
      # Bounded waits, so a VM that died is seen within 5 s; a line cut by a wait's end is
      # completed by the next read.
      if IFS= read -r -t $((left < 5 ? left : 5)) -u 8 part; then
        answer=$partial$part partial=""
        answer=${answer%$'\r'}
      else
        partial=$partial$part
      fi
    done
    trap - TERM INT HUP
    cat "$job/out"
    echo 0 > "$job/qrc"
    vm_verdict "$job" "$(cat "$dir/image")" "$limit" run_under
    rc=$?
    if [ -f "$job/broken" ]; then
      echo "vm_session: the session could not clean up after this command: ending it" >&2
      stop_session clean
    fi
    rm -rf "$job"
    exit $rc
    ;;
  stop)
    stop_session clean
    ;;
  *) usage ;;
esac
