#!/usr/bin/env bash
# Installs every Debian package caf-rdma needs to build, test and run its Soft-RoCE VM lane.
# Idempotent: returns in about a second when everything is present.
#
#   bash third_party/install_deps.sh          # install what is missing (needs root or sudo)
#   bash third_party/install_deps.sh --check  # only report what is missing; exit 1 if anything is
set -euo pipefail

kPackages=(
  # build
  bazel-bootstrap bazel-platforms bazel-rules-java g++ libcaf-dev libibverbs-dev librdmacm-dev
  libgtest-dev zlib1g-dev libssl-dev
  # a node's metrics over HTTP (prometheus-cpp over civetweb); the tests scrape them with curl
  prometheus-cpp-dev curl
  # TLS between nodes: the tests make their certificates with the openssl tool
  openssl
  # run time + tools on real hosts and in the VM (ibv_devinfo, rdma, perftest)
  rdma-core ibverbs-utils ibverbs-providers perftest iproute2
  # the Soft-RoCE VM lane (tests/rxe_vm)
  qemu-system-x86 busybox-static cpio kmod gzip xz-utils
  # benchmarks: plots; redis, the key-value store's reference (bench/kv_vs_redis.sh); callgrind
  python3 python3-matplotlib redis-server redis-tools valgrind
  # lint (tests/lint); cmake builds the ThreadSanitizer CAF (tests/sanitizers); clang-14 and its
  # sanitizer runtimes compile the asan lane (third_party/clang_cc.bzl)
  clang-format-14
  clang-tidy-14
  clang-14 libclang-rt-14-dev lld-14
  cmake
)

# A Prometheus server for tests/metrics/prometheus_scrape_test: Debian's `prometheus` package,
# unpacked (not installed: installing it would start a system-wide service) into kPromDir.
kPromDir=/opt/caf-rdma/prometheus

missing=()
for p in "${kPackages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done
need_prometheus=0
[ -x "$kPromDir/prometheus" ] || need_prometheus=1

if [ ${#missing[@]} -eq 0 ] && [ $need_prometheus -eq 0 ]; then
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  [ ${#missing[@]} -eq 0 ] || echo "missing packages: ${missing[*]}" >&2
  [ $need_prometheus -eq 0 ] || echo "missing: $kPromDir/prometheus (Debian's prometheus, unpacked)" >&2
  exit 1
fi

[ ${#missing[@]} -eq 0 ] || echo "install_deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install_deps: need root (or sudo) to install: ${missing[*]}$([ $need_prometheus -eq 0 ] || echo " $kPromDir/prometheus")" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
if [ ${#missing[@]} -gt 0 ]; then
  "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ $need_prometheus -eq 1 ]; then
  echo "install_deps: unpacking Debian's prometheus into $kPromDir" >&2
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  # apt-get download as root warns that its sandbox user cannot write here: only that is dropped.
  (cd "$work" && apt-get download -qq prometheus 2> >(grep -v "Download is performed unsandboxed" >&2) &&
     dpkg -x prometheus_*.deb root) ||
    { echo "install_deps: could not fetch and unpack Debian's prometheus package" >&2; exit 1; }
  "${sudo_cmd[@]}" mkdir -p "$kPromDir"
  "${sudo_cmd[@]}" install -m 755 "$work/root/usr/bin/prometheus" "$kPromDir/prometheus"
  basename "$work"/prometheus_*.deb | "${sudo_cmd[@]}" tee "$kPromDir/VERSION" >/dev/null
  rm -rf "$work"
fi
echo "install_deps: done" >&2
