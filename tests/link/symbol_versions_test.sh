#!/usr/bin/env bash
# symbol_versions_test.sh PROGRAM...: fails when a program, or a shared library Bazel built for
# it (a per-library .so in Bazel's default dynamic mode, found with ldd), references a libibverbs
# function without a symbol version or with another version than the function's current one
# (its `@@` definition in libibverbs.so.1).
#
# Why: ld.so binds an unversioned reference to the oldest version libibverbs defines, e.g.
# ibv_open_device@IBVERBS_1.0, the compat ABI, whose contexts crash the current calls (SIGSEGV
# on a host with a device, while every test passes on a host without one). //:cc.bzl links
# caf-rdma's libraries only statically so that this cannot happen (its cc_library says why).
set -uo pipefail
export LC_ALL=C  # one collation for sort and comm
[ $# -ge 1 ] || { echo "usage: symbol_versions_test.sh PROGRAM..." >&2; exit 2; }
command -v readelf >/dev/null || { echo "symbol_versions_test: readelf (binutils) missing" >&2; exit 2; }

# The libibverbs the programs load, and the current (default) version of each of its functions.
lib=$(ldd "$1" | awk '$1 == "libibverbs.so.1" { print $3 }')
[ -n "$lib" ] && [ -f "$lib" ] || { echo "symbol_versions_test: $1 does not load libibverbs.so.1" >&2; exit 1; }
current=$(readelf --dyn-syms -W "$lib" | awk '$7 != "UND" && $8 ~ /@@/ { print $8 }' | sort -u)
[ -n "$current" ] || { echo "symbol_versions_test: no versioned definitions in $lib" >&2; exit 1; }

failed=0
check() {  # check ELF [quiet]: its undefined ibv_* references, each against the current version
  local elf=$1 quiet=${2:-} refs bad
  refs=$(readelf --dyn-syms -W "$elf" | awk '$7 == "UND" && $8 ~ /^_?ibv_/ { print $8 }' | sort -u)
  if [ -z "$refs" ]; then
    [ -n "$quiet" ] || echo "  $(basename "$elf"): no references to libibverbs"
    return
  fi
  # name@VERSION must be in $current as name@@VERSION; a name without @ is unversioned.
  bad=$(comm -23 <(sed 's/@/@@/' <<<"$refs" | sort -u) <(printf '%s\n' "$current")) ||
    { echo "symbol_versions_test: comm failed on $elf" >&2; failed=1; return; }
  if [ -n "$bad" ]; then
    echo "  $(basename "$elf"): FAILED: references not bound to their current version:" >&2
    sed -e 's/@@/@/' -e 's/^/    /' <<<"$bad" >&2
    failed=1
  else
    echo "  $(basename "$elf"): $(wc -l <<<"$refs") reference(s), each at its current version" \
      "($(grep -m1 '^ibv_open_device@' <<<"$refs" || grep -m1 . <<<"$refs"))"
  fi
}

echo "libibverbs: $lib"
for program in "$@"; do
  echo "$program"
  check "$program"
  # The shared libraries Bazel built for it (in _solib_* folders): none while caf-rdma's
  # libraries are static, but a library linked dynamically again must be checked too.
  while read -r so; do
    check "$so" quiet
  done < <(ldd "$program" | awk '$3 ~ /_solib_/ { print $3 }')
done
[ $failed = 0 ] && echo "symbol_versions_test: every reference to libibverbs binds its current version"
exit $failed
