#!/usr/bin/env bash
# run_two_hosts.sh [options] [--] COMMAND [ARGS...]
#   Boots TWO Soft-RoCE VMs ("a" and "b", each its own kernel) joined by one virtual Ethernet
#   wire, and runs COMMAND in both at once, each in a chroot of this host's root (read-only over
#   9p, as run_in_vm.sh does) in the current directory. Each VM has one virtio NIC, eth0, with
#   rxe0 on it: a 10.98.0.1/24, b 10.98.0.2/24; RoCE v2 (GID index 1, ::ffff:10.98.0.x) crosses
#   the wire between the two kernels. COMMAND sees:
#     TWO_HOSTS_ME    a | b                 TWO_HOSTS_ADDR  its own address (10.98.0.1 or .2)
#     TWO_HOSTS_PEER  the other's address   TWO_HOSTS_DIR   a directory both VMs share
#                                                           read-write (fresh, empty)
#   When one VM's COMMAND fails, TWO_HOSTS_DIR/abort.<a|b> appears, so the other's waits can end
#   early (tests/two_hosts/guest_lib.sh's wait_for_file does).
#   Prints both outputs as they come, each line prefixed "[a] " or "[b] ".
# Options:
#   -s DIR  share DIR read-write in both VMs at the same path (repeatable; default: none besides
#           TWO_HOSTS_DIR)                   -e VAR  pass VAR into both VMs (repeatable)
#   -m MB   guest memory per VM (default 1536)  -c N    vCPUs per VM (default 1)
#   -t SEC  timeout of each VM (default 600)    -k      keep the run directory   -v  print consoles
# Exit code as run_in_vm.sh, of the worse VM: 124 a VM timed out; 125 a VM failed to boot or set
# up; 126 a COMMAND succeeded but its guest kernel logged a WARNING, BUG or oops (printed; both
# kernels are checked); else the first non-zero COMMAND exit code (a before b), else 0.
#
# The wire: qemu's `-netdev dgram` on two connected UDP sockets of 127.0.0.1 that udp_wire.py
# opens (ports the kernel picks, bound before any VM starts) and this script inherits as file
# descriptors 10 and 11 (it re-executes itself under udp_wire.py): each qemu gets one
# (local.type=fd). No root networking on this host, no port chosen by one process and bound
# later by another, no start order between the VMs (a frame sent before the other VM is up is
# dropped, as on a cable whose far end is not up yet; ARP and TCP retry), and a VM whose NIC is
# down drops what arrives instead of stalling the sender (udp_wire.py says why not unix datagram
# sockets). Not `-netdev stream`: in qemu 7.2 its client does not retry, so b would have to wait
# for a's listening socket; not `-netdev socket,listen=:PORT`: a TCP port chosen here and bound
# later by qemu.
set -uo pipefail
here=$(dirname "$(realpath "$0")")
if [ "${TWO_HOSTS_WIRE:-}" != "10 11" ]; then
  TWO_HOSTS_WIRE="10 11" exec python3 "$here/udp_wire.py" 10 11 "$0" "$@"
fi
unset TWO_HOSTS_WIRE  # not for the VMs' commands (or a nested run)
. "$here/vm_lib.sh"  # vm_prepare, vm_write_cmd, vm_boot, vm_verdict
cache=${CAF_RDMA_VM_CACHE:-/var/tmp/caf-rdma-rxe-vm}
shares=(); mem=1536; cpus=1; timeout_s=600; keep=0; verbose=0
env_vars=(PATH LD_LIBRARY_PATH TWO_HOSTS_ME TWO_HOSTS_ADDR TWO_HOSTS_PEER TWO_HOSTS_DIR)
usage() { sed -n '2,21p' "$0" >&2; exit 2; }
while getopts "s:e:m:c:t:kvh" o; do
  case $o in
    s) shares+=("$(realpath "$OPTARG")") ;; e) env_vars+=("$OPTARG") ;;
    m) mem=$OPTARG ;; c) cpus=$OPTARG ;; t) timeout_s=$OPTARG ;;
    k) keep=1 ;; v) verbose=1 ;; *) usage ;;
  esac
done
shift $((OPTIND-1))
[ $# -ge 1 ] || usage
command -v qemu-system-x86_64 >/dev/null || { echo "run_two_hosts: qemu-system-x86_64 not found: run third_party/install_deps.sh" >&2; exit 125; }
image=$("$here/build_image.sh") || { echo "run_two_hosts: building the VM image failed" >&2; exit 125; }

mkdir -p "$cache/runs"
pair=$(mktemp -d "$cache/runs/pair.XXXXXX")  # a/ b/ (control shares), shared/
cleanup() { [ $keep = 1 ] && echo "run_two_hosts: kept $pair" >&2 || rm -rf "$pair"; }
trap cleanup EXIT
mkdir -p "$pair/a" "$pair/b" "$pair/shared"

declare -A addr=([a]=10.98.0.1 [b]=10.98.0.2) mac=([a]=52:54:00:98:00:01 [b]=52:54:00:98:00:02)
declare -A peer=([a]=b [b]=a) wire=([a]=10 [b]=11) pid=()
for h in a b; do
  (
    export TWO_HOSTS_ME=$h TWO_HOSTS_ADDR=${addr[$h]} TWO_HOSTS_PEER=${addr[${peer[$h]}]}
    export TWO_HOSTS_DIR=$pair/shared
    vm_write_cmd "$pair/$h" "${env_vars[@]}" -- "$@"
    vm_prepare "$pair/$h" nic "$pair/shared" "${shares[@]}"
    printf 'NIC_ADDR=%q\n' "${addr[$h]}/24" >> "$pair/$h/vm.conf"
    vm_boot "$pair/$h" "$image" "$mem" "$cpus" "$timeout_s" \
      -netdev "dgram,id=wire,local.type=fd,local.str=${wire[$h]}" \
      -device "virtio-net-pci,netdev=wire,mac=${mac[$h]}" | sed -u "s/^/[$h] /"
  ) &
  pid[$h]=$!
done

# As each VM ends: if its COMMAND failed (or it never reported one), tell the other one.
running=("${pid[a]}" "${pid[b]}")
while [ ${#running[@]} -gt 0 ]; do
  wait -n -p ended "${running[@]}"
  for h in a b; do
    if [ "${pid[$h]}" = "$ended" ]; then
      [ "$(cat "$pair/$h/rc" 2>/dev/null)" = 0 ] || : > "$pair/shared/abort.$h"
    fi
  done
  left=(); for p in "${running[@]}"; do [ "$p" = "$ended" ] || left+=("$p"); done
  running=("${left[@]}")
done

codes=()
for h in a b; do
  [ $verbose = 1 ] && { echo "----- guest console of $h -----" >&2; cat "$pair/$h/console.log" >&2; }
  vm_verdict "$pair/$h" "$image" "$timeout_s" "run_two_hosts[$h]"
  codes+=($?)
done
# The worse VM decides: harness failures (124, 125, 126, in that order) before a COMMAND's own
# exit code.
for code in 124 125 126 "${codes[@]}"; do
  for c in "${codes[@]}"; do
    [ "$c" = "$code" ] && [ "$c" != 0 ] && exit "$c"
  done
done
exit 0
