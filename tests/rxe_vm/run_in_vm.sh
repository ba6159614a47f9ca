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
#             wired to each other) | quad (two such wires: rxe0-rxe1 and rxe2-rxe3 on veth2
#             10.99.2.1 / veth3 10.99.3.1) | single (rxe0 on dummy0 10.99.0.1) | none
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
. "$here/vm_lib.sh"  # vm_prepare, vm_write_cmd, vm_boot, vm_verdict
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

vm_write_cmd "$run" "${env_vars[@]}" -- "$@"
vm_prepare "$run" "$rxe_mode" "${shares[@]}"
vm_boot "$run" "$image" "$mem" "$cpus" "$timeout_s"
[ $verbose = 1 ] && { echo "----- guest console -----" >&2; cat "$run/console.log" >&2; }
vm_verdict "$run" "$image" "$timeout_s" run_in_vm
exit $?
