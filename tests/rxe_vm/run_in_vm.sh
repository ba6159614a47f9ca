#!/usr/bin/env bash
# run_in_vm.sh [options] [--] COMMAND [ARGS...]
#   Boots the caf-rdma Soft-RoCE VM (Debian's kernel under qemu, TCG), creates rxe devices, and
#   runs COMMAND inside a chroot of this host's root filesystem (read-only over virtio-9p, with a
#   throw-away tmpfs overlay), in the current directory. Binaries built on the host run unchanged.
#   Prints COMMAND's output (stdout and stderr together) and exits with its exit code.
#   One argument runs through `bash -c`; several are exec'd as argv.
# Options:
#   -s DIR    share DIR read-write at the same path (repeatable; default: the current directory)
#   -r MODE   rxe devices: pair (default: rxe0 on veth0 10.99.0.1 and rxe1 on veth1 10.99.1.1,
#             wired to each other) | single (rxe0 on dummy0 10.99.0.1) | none
#   -e VAR    pass environment variable VAR into the VM (repeatable; PATH and LD_LIBRARY_PATH always)
#   -m MB     guest memory (default 2048)        -c N    vCPUs (default: host cores, at most 4)
#   -t SEC    overall timeout (default 900)      -k      keep the run directory (console log)
#   -v        print the guest console (kernel log) to stderr at the end
# Exit code: COMMAND's; 124 = timed out; 125 = the VM failed to boot or set up (with its console tail);
# 126 = COMMAND succeeded but the guest kernel logged a WARNING, BUG or oops (printed): a green
# run over a kernel warning is not green (CAF_RDMA_VM_ALLOW_WARN=1 only reports them).
# After every run it prints the rxe ports' non-zero hw_counters and the kernel it booted.
# The image is built on demand by build_image.sh (cached in $CAF_RDMA_VM_CACHE); the kernel is
# CAF_RDMA_VM_KERNEL=6.12 (default) or 6.1 (its rxe returns bad READ data under load).
set -uo pipefail
here=$(dirname "$(realpath "$0")")
cache=${CAF_RDMA_VM_CACHE:-/var/tmp/caf-rdma-rxe-vm}
shares=(); rxe_mode=pair; mem=2048; timeout_s=900; keep=0; verbose=0
cpus=$(nproc); [ "$cpus" -gt 4 ] && cpus=4
env_vars=(PATH LD_LIBRARY_PATH)
usage() { sed -n '2,20p' "$0" >&2; exit 2; }
while getopts "s:r:e:m:c:t:kvh" o; do
  case $o in
    s) shares+=("$(realpath "$OPTARG")") ;; r) rxe_mode=$OPTARG ;;
    e) env_vars+=("$OPTARG") ;; m) mem=$OPTARG ;; c) cpus=$OPTARG ;; t) timeout_s=$OPTARG ;;
    k) keep=1 ;; v) verbose=1 ;; *) usage ;;
  esac
done
shift $((OPTIND-1))
[ $# -ge 1 ] || usage
[ ${#shares[@]} -gt 0 ] || shares=("$PWD")
command -v qemu-system-x86_64 >/dev/null || { echo "run_in_vm: qemu-system-x86_64 not found: run third_party/install_deps.sh" >&2; exit 125; }
image=$("$here/build_image.sh") || { echo "run_in_vm: building the VM image failed" >&2; exit 125; }

mkdir -p "$cache/runs"
run=$(mktemp -d "$cache/runs/run.XXXXXX")
cleanup() { [ $keep = 1 ] && echo "run_in_vm: kept $run" >&2 || rm -rf "$run"; }
trap cleanup EXIT

{ echo "#!/bin/bash"
  for v in "${env_vars[@]}"; do [ -n "${!v+x}" ] && printf 'export %s=%q\n' "$v" "${!v}"; done
  if [ $# -eq 1 ]; then printf 'exec /bin/bash -c %q\n' "$1"
  else printf 'exec'; printf ' %q' "$@"; printf '\n'; fi
} > "$run/cmd.sh"
{ printf 'RXE_MODE=%q\n' "$rxe_mode"; printf 'CTLDIR=%q\n' "$run"; printf 'CWD=%q\n' "$PWD"
  printf 'RWDIRS=%q\n' "${shares[*]}"
} > "$run/vm.conf"

fs=(-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
    -virtfs "local,path=$run,mount_tag=ctl,security_model=none")
i=0
for s in "${shares[@]}"; do
  fs+=(-virtfs "local,path=$s,mount_tag=rw$i,security_model=none,multidevs=remap"); i=$((i+1))
done

# TCG: KVM hangs on the machines this was built on.
# A guest kernel that panics while booting, before COMMAND started (seen once in ~40 boots of
# 6.12 under multi-threaded TCG: `Oops: int3` in a just-patched static branch, a cross-vCPU
# code-patching race of the emulator, not of rxe or of caf-rdma), is booted once more: COMMAND
# never ran, so nothing is hidden. The first boot's oops is printed.
for boot in 1 2; do
  rm -f "$run/started" "$run/rc"
  timeout -k 5 "$timeout_s" qemu-system-x86_64 -nodefaults -no-user-config -display none \
    -accel tcg -cpu max -m "$mem" -smp "$cpus" -no-reboot \
    -kernel "$image/vmlinuz" -initrd "$image/initramfs.cpio.gz" \
    -append "console=ttyS0 quiet loglevel=4 panic=-1 mitigations=off tsc=reliable" \
    -serial "file:$run/console.log" -serial stdio "${fs[@]}" < /dev/null
  qrc=$?
  if [ $boot = 1 ] && [ ! -f "$run/started" ] && [ ! -f "$run/rc" ] &&
     grep -Eq 'Kernel panic|Oops' "$run/console.log"; then
    echo "run_in_vm: the guest kernel panicked while booting, before COMMAND started; booting once more. Its first lines:" >&2
    grep -E -m 8 'Oops|RIP:|Kernel panic|BUG:' "$run/console.log" | sed 's/^/run_in_vm:   /' >&2
    continue
  fi
  break
done
[ $verbose = 1 ] && { echo "----- guest console -----" >&2; cat "$run/console.log" >&2; }
if [ $qrc = 124 ] || [ $qrc = 137 ]; then echo "run_in_vm: timed out after ${timeout_s}s" >&2; exit 124; fi
if [ ! -f "$run/rc" ]; then
  echo "run_in_vm: the VM did not report an exit code (qemu exit $qrc); console tail:" >&2
  tail -30 "$run/console.log" >&2
  exit 125
fi
rc=$(cat "$run/rc")
if [ "$rc" = 125 ] && grep -q FATAL "$run/console.log"; then
  echo "run_in_vm: VM setup failed:" >&2; grep FATAL "$run/console.log" >&2
fi
if [ -f "$run/hw_counters" ]; then
  echo "run_in_vm: kernel $(cat "$image/kernel.version" 2>/dev/null); rxe hw_counters (non-zero):" >&2
  sed 's/^/run_in_vm:   /' "$run/hw_counters" >&2
fi
# The guest kernel's own verdict: rxe (or anything else) hitting a WARN_ON or an oops means the
# run cannot be trusted, whatever COMMAND concluded.
kernel_bad='WARNING:|BUG:|Oops|general protection fault|Kernel panic|UBSAN:|KASAN:|refcount_t:'
if [ -f "$run/dmesg" ] && grep -Eq "$kernel_bad" "$run/dmesg"; then
  echo "run_in_vm: the guest kernel logged warnings or errors:" >&2
  grep -E "$kernel_bad|rdma_rxe|rxe[0-9]" "$run/dmesg" | head -40 | sed 's/^/run_in_vm:   /' >&2
  if [ "$rc" = 0 ] && [ "${CAF_RDMA_VM_ALLOW_WARN:-0}" != 1 ]; then
    echo "run_in_vm: failing the run (exit 126): a kernel warning makes its results untrustworthy" >&2
    rc=126
  fi
elif [ -f "$run/dmesg" ] && grep -Eqi 'rdma_rxe.*(fail|err)' "$run/dmesg"; then
  n=$(grep -Eci 'rdma_rxe.*(fail|err)' "$run/dmesg")
  echo "run_in_vm: guest kernel: $n rdma_rxe error lines, last: $(grep -Ei 'rdma_rxe.*(fail|err)' "$run/dmesg" | tail -1)" >&2
fi
exit "$rc"
