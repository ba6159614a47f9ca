#!/usr/bin/env bash
# Builds CAF 0.17.6 with ThreadSanitizer into /var/tmp/caf-rdma-tsan-caf (used by --config=tsan,
# see third_party/caf_tsan.BUILD). Idempotent: a finished build is kept (marker file).
# Source: Debian's source package `actor-framework`, the exact version of the installed
# libcaf-dev, fetched with a private sources list (the system's lists are not changed); apt
# checks the tarball against the signed Sources index. About 4 minutes on 2 cores.
# Invariant: the prefix holds a complete build of the installed version, or no marker.
set -euo pipefail
prefix=/var/tmp/caf-rdma-tsan-caf
version=$(dpkg-query -W -f='${source:Upstream-Version}' libcaf-dev 2>/dev/null) ||
  { echo "build_caf_tsan: libcaf-dev not installed: run third_party/install_deps.sh" >&2; exit 2; }
marker="$prefix/.built-$version-openssl-g0"
[ -f "$marker" ] && { echo "build_caf_tsan: CAF $version (tsan) ready in $prefix"; exit 0; }
command -v cmake >/dev/null || { echo "build_caf_tsan: cmake missing: run third_party/install_deps.sh" >&2; exit 2; }
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
work=$(mktemp -d /var/tmp/caf-rdma-tsan-src.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"  # apt downloads as _apt where it can
mkdir -p "$work/lists/partial"
echo "deb-src http://deb.debian.org/debian $suite main" > "$work/sources.list"
apt_opts=(-o "Dir::Etc::sourcelist=$work/sources.list" -o Dir::Etc::sourceparts=-
          -o "Dir::State::Lists=$work/lists")
apt-get "${apt_opts[@]}" -qq update ||
  { echo "build_caf_tsan: cannot read Debian's source index ($suite)" >&2; exit 1; }
# --tar-only: the upstream tarball (Debian's patches only fix includes, supplied below).
(cd "$work" && apt-get "${apt_opts[@]}" -qq source --download-only --tar-only \
  "actor-framework=$(dpkg-query -W -f='${source:Version}' libcaf-dev)") ||
  { echo "build_caf_tsan: cannot download actor-framework $version" >&2; exit 1; }
tar -xzf "$work"/actor-framework_"$version".orig.tar.gz -C "$work"
src="$work/actor-framework-$version"
rm -rf "$prefix"
# -include limits: libcaf_io uses std::numeric_limits without including <limits> (gcc 12).
# No -g: a report's CAF frames keep their function names (the symbols), not their lines, and
# CAF's build is part of the tsan lane's time on every new machine (313 s with -g, measured).
cmake -S "$src" -B "$work/build" -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
  -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-fsanitize=thread -O1 -include limits" \
  -DCAF_NO_EXAMPLES=yes -DCAF_NO_TOOLS=yes -DCAF_NO_UNIT_TESTS=yes -DCAF_NO_OPENCL=yes -DCAF_NO_PYTHON=yes -DCAF_NO_SUMMARY=yes >"$work/cmake.log" 2>&1 ||
  { tail -20 "$work/cmake.log" >&2; echo "build_caf_tsan: cmake failed" >&2; exit 1; }
make -C "$work/build" -j"$(nproc)" >"$work/make.log" 2>&1 ||
  { grep -m5 -A5 'error' "$work/make.log" >&2; echo "build_caf_tsan: build failed" >&2; exit 1; }
make -C "$work/build" install >/dev/null
touch "$marker"
echo "build_caf_tsan: CAF $version (tsan) installed in $prefix"
