#!/usr/bin/env bash
# again_after_kernel_bug.sh [--tail N] -- COMMAND [ARGS...]: runs COMMAND, a run of Soft-RoCE
# VMs (run_in_vm.sh, run_two_hosts.sh), once more when a guest kernel panicked during it (exit
# 125 with "did not report an exit code", vm_lib.sh's vm_verdict, and "Kernel panic" in its
# output) or logged a WARNING, BUG or oops over a run that passed (exit 126, vm_lib.sh). Either
# is a kernel bug, not caf-rdma's: no user-space program may corrupt kernel memory or trip a
# kernel's WARN_ON, and Debian's 6.12.95 rxe did (docs/limits.md: a corrupted slab freelist
# while rxe_receiver builds an ACK, seen in the two-host lane and the stress lane's VM). The
# first run's results are discarded, never counted: the second run is said on stderr with the
# kernel's first lines; a second kernel bug, and any other failure, is the exit code.
# --tail N: prints the last N lines of each run's output (stdout and stderr together) when the
# run ends; without it, all of it as it comes. Exit code: COMMAND's, of its last run.
set -uo pipefail
tail_n=
if [ "${1:-}" = --tail ]; then tail_n=$2; shift 2; fi
[ "${1:-}" != -- ] || shift
[ $# -ge 1 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
out=$(mktemp "${TMPDIR:-/tmp}/vm-run.XXXXXX") || exit 2
trap 'rm -f "$out"' EXIT
for run in 1 2; do
  if [ -n "$tail_n" ]; then
    "$@" >"$out" 2>&1
    rc=$?
    tail -n "$tail_n" "$out"
  else
    "$@" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
  fi
  what=
  if [ "$rc" = 125 ] && grep -q 'did not report an exit code' "$out" &&
     grep -q 'Kernel panic' "$out"; then
    what=panicked
  elif [ "$rc" = 126 ] && grep -q 'failing the run (exit 126)' "$out"; then
    what="logged a warning over a run that passed"
  fi
  if [ "$run" = 1 ] && [ -n "$what" ]; then
    {
      echo "again_after_kernel_bug: WARNING: a guest kernel $what (a kernel bug, docs/limits.md; this run's results are discarded); its first lines:"
      grep -E -m 8 'Oops|RIP:|Kernel panic|BUG:|WARNING:|general protection|refcount_t:|UBSAN:|KASAN:' \
        "$out" | sed 's/^/again_after_kernel_bug:   /'
      echo "again_after_kernel_bug: running once more: $*"
    } >&2
    continue
  fi
  break
done
exit "$rc"
