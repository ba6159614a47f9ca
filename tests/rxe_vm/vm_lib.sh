# vm_lib.sh: booting one Soft-RoCE VM and judging its run; sourced (never run) by
# run_in_vm.sh (one VM), run_two_hosts.sh (two VMs on one wire) and vm_session.sh (one VM for
# many commands), so all boot the same way.
#
#   vm_prepare RUN RXE_MODE SHARE...          RUN/vm.conf for the init (RXE_MODE, CTLDIR = RUN,
#                                             CWD = $PWD, RWDIRS) and RUN/shares (one per line);
#                                             more init settings may be appended to RUN/vm.conf
#   vm_write_cmd RUN VAR... -- CMD [ARG...]   RUN/cmd.sh: exports each VAR that is set, then
#                                             one CMD argument through `bash -c`, several exec'd
#   vm_boot RUN IMAGE MEM CPUS TIMEOUT [QEMU_ARG...]
#                                             boots the VM (TCG) with RUN as its control share and
#                                             RUN/shares read-write; COMMAND's output on stdout;
#                                             qemu's exit code in RUN/qrc (and returned)
#   vm_verdict RUN IMAGE TIMEOUT LABEL        prints the rxe hw_counters and any guest kernel
#                                             warning (lines prefixed LABEL:) and returns the
#                                             run's exit code: COMMAND's; 124 timed out; 125 the
#                                             VM failed; 126 COMMAND succeeded over a kernel
#                                             WARNING/BUG/oops (CAF_RDMA_VM_ALLOW_WARN=1 only
#                                             reports them)
#
# Invariants:
#  1. RUN is the VM's control share (tag "ctl"): the init reads vm.conf and cmd.sh from it and
#     writes started, rc, dmesg and hw_counters into it; nothing else writes there meanwhile.
#  2. A VM whose kernel panicked before COMMAND started (RUN/started absent) is booted once more:
#     COMMAND never ran, so nothing is hidden; any other failure is reported, never retried.
#  3. Every boot is bounded by TIMEOUT (qemu killed after it): exit 124.

# What in a guest kernel's log makes a run untrustworthy (vm_verdict; vm_session.sh's boot).
vm_kernel_bad='WARNING:|BUG:|Oops|general protection fault|Kernel panic|UBSAN:|KASAN:|refcount_t:'

vm_prepare() {
  local run=$1 mode=$2; shift 2
  { printf 'RXE_MODE=%q\n' "$mode"; printf 'CTLDIR=%q\n' "$run"; printf 'CWD=%q\n' "$PWD"
    printf 'RWDIRS=%q\n' "$*"
  } > "$run/vm.conf"
  printf '%s\n' "$@" > "$run/shares"
}

vm_write_cmd() {
  local run=$1 v; shift
  local vars=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  { echo "#!/bin/bash"
    for v in "${vars[@]}"; do [ -n "${!v+x}" ] && printf 'export %s=%q\n' "$v" "${!v}"; done
    if [ $# -eq 1 ]; then printf 'exec /bin/bash -c %q\n' "$1"
    else printf 'exec'; printf ' %q' "$@"; printf '\n'; fi
  } > "$run/cmd.sh"
}

vm_boot() {
  local run=$1 image=$2 mem=$3 cpus=$4 timeout_s=$5; shift 5
  local fs=(-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
            -virtfs "local,path=$run,mount_tag=ctl,security_model=none")
  local i=0 s boot qrc
  while IFS= read -r s; do
    [ -n "$s" ] || continue
    fs+=(-virtfs "local,path=$s,mount_tag=rw$i,security_model=none,multidevs=remap"); i=$((i+1))
  done < "$run/shares"
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
      -serial "file:$run/console.log" -serial stdio "${fs[@]}" "$@" < /dev/null
    qrc=$?
    if [ $boot = 1 ] && [ ! -f "$run/started" ] && [ ! -f "$run/rc" ] &&
       grep -Eq 'Kernel panic|Oops' "$run/console.log"; then
      echo "vm_boot: the guest kernel panicked while booting, before COMMAND started; booting once more. Its first lines:" >&2
      grep -E -m 8 'Oops|RIP:|Kernel panic|BUG:' "$run/console.log" | sed 's/^/vm_boot:   /' >&2
      cp "$run/console.log" "$run/console.first-boot.log"
      continue
    fi
    break
  done
  echo "$qrc" > "$run/qrc"
  return "$qrc"
}

vm_verdict() {
  local run=$1 image=$2 timeout_s=$3 label=$4
  local qrc rc n
  qrc=$(cat "$run/qrc" 2>/dev/null || echo 125)
  if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then echo "$label: timed out after ${timeout_s}s" >&2; return 124; fi
  if [ ! -f "$run/rc" ]; then
    echo "$label: the VM did not report an exit code (qemu exit $qrc); its kernel's first report:" >&2
    grep -E -m 12 -A 12 'BUG:|Oops|general protection fault|kernel BUG|WARNING:|KASAN:|UBSAN:' \
      "$run/console.log" | head -40 >&2
    echo "$label: console tail:" >&2
    tail -30 "$run/console.log" >&2
    return 125
  fi
  rc=$(cat "$run/rc")
  if [ "$rc" = 125 ] && grep -q FATAL "$run/console.log"; then
    echo "$label: VM setup failed:" >&2; grep FATAL "$run/console.log" >&2
  fi
  if [ -f "$run/hw_counters" ]; then
    echo "$label: kernel $(cat "$image/kernel.version" 2>/dev/null); rxe hw_counters (non-zero):" >&2
    sed "s/^/$label:   /" "$run/hw_counters" >&2
  fi
  # The guest kernel's own verdict: rxe (or anything else) hitting a WARN_ON or an oops means the
  # run cannot be trusted, whatever COMMAND concluded.
  local kernel_bad=$vm_kernel_bad
  if [ -f "$run/dmesg" ] && grep -Eq "$kernel_bad" "$run/dmesg"; then
    echo "$label: the guest kernel logged warnings or errors:" >&2
    grep -E "$kernel_bad|rdma_rxe|rxe[0-9]" "$run/dmesg" | head -40 | sed "s/^/$label:   /" >&2
    if [ "$rc" = 0 ] && [ "${CAF_RDMA_VM_ALLOW_WARN:-0}" != 1 ]; then
      echo "$label: failing the run (exit 126): a kernel warning makes its results untrustworthy" >&2
      rc=126
    fi
  elif [ -f "$run/dmesg" ] && grep -Eqi 'rdma_rxe.*(fail|err)' "$run/dmesg"; then
    n=$(grep -Eci 'rdma_rxe.*(fail|err)' "$run/dmesg")
    echo "$label: guest kernel: $n rdma_rxe error lines, last: $(grep -Ei 'rdma_rxe.*(fail|err)' "$run/dmesg" | tail -1)" >&2
  elif [ -f "$run/dmesg" ]; then
    echo "$label: guest kernel log: no WARNING, BUG or oops" >&2
  fi
  return "$rc"
}
