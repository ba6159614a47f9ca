#!/usr/bin/env bash
# Builds the Soft-RoCE test VM image: one of Debian's kernels + a small initramfs that loads
# rdma_rxe. Idempotent and safe to run concurrently (flock); returns at once when the image is
# current. Prints the image directory on stdout (run_in_vm.sh boots from it).
#
#   CAF_RDMA_VM_KERNEL=6.12 (default) | 6.1
#     6.12: Debian 13's (trixie's) newest linux-image-6.12.*-amd64: from trixie-security when
#           it has one, else from trixie (bookworm-backports if neither answers), fetched with a
#           private sources list and lists directory under the cache: the system's apt
#           configuration is never changed. bookworm-backports' 6.12.95 panicked in rxe's
#           receive path (docs/limits.md); trixie's 6.12.117 and later carry more rxe fixes.
#     6.1:  bookworm's own kernel (what linux-image-amd64 depends on). Its rxe is known to
#           complete RDMA READs that moved no data under load (rxe_comp.c:756 WARNING): keep it
#           for comparison only.
#   CAF_RDMA_VM_KERNEL_PKG=linux-image-...   an exact package instead (from the lists above)
#
# Output in $CAF_RDMA_VM_CACHE/<kernel> (default /var/tmp/caf-rdma-rxe-vm), outside the repo.
# Needs the packages third_party/install_deps.sh installs (busybox-static, cpio, kmod, xz-utils)
# and access to Debian's archive for `apt-get download` of the kernel package (first run only).
set -euo pipefail
here=$(dirname "$(realpath "$0")")
cache=${CAF_RDMA_VM_CACHE:-/var/tmp/caf-rdma-rxe-vm}
kernel=${CAF_RDMA_VM_KERNEL:-6.12}
case "$kernel" in
  6.12|6.1) ;;
  *) echo "build_image: CAF_RDMA_VM_KERNEL=$kernel: choose 6.12 (default) or 6.1" >&2; exit 2 ;;
esac
dir="$cache/$kernel"
mkdir -p "$dir"
exec 9>"$dir/.build.lock"
flock -w 900 9 || { echo "build_image: could not lock $dir/.build.lock" >&2; exit 1; }
cd "$dir"

# apt with the system's lists (6.1) or with a private list of newer suites (6.12).
apt_opts=(-o DPkg::Lock::Timeout=600)
if [ "$kernel" = 6.12 ]; then
  mkdir -p apt/lists/partial
  cat > apt/sources.list <<'LIST'
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security trixie-security main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
LIST
  apt_opts+=(-o Dir::Etc::sourcelist="$dir/apt/sources.list" -o Dir::Etc::sourceparts=/dev/null
             -o Dir::State::Lists="$dir/apt/lists" -o Dir::Cache="$dir/apt/cache")
  mkdir -p apt/cache/archives/partial
fi
kpkg_of() {
  apt-cache "${apt_opts[@]}" depends linux-image-amd64 2>/dev/null |
    awk -v k="$kernel" '$1=="Depends:" && index($2, "linux-image-" k ".") == 1 {print $2; exit}'
}
kpkg=${CAF_RDMA_VM_KERNEL_PKG:-}
[ -n "$kpkg" ] || kpkg=$(kpkg_of || true)
if [ -z "$kpkg" ] && [ "$kernel" = 6.12 ]; then
  apt-get "${apt_opts[@]}" update -qq >&2 || true
  kpkg=$(kpkg_of || true)
  if [ -z "$kpkg" ]; then  # trixie unreachable: bookworm-backports carries an older 6.12
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-backports main" > apt/sources.list
    apt-get "${apt_opts[@]}" update -qq >&2 || true
    kpkg=$(kpkg_of || true)
  fi
elif [ -z "$kpkg" ]; then
  # A fresh machine may have empty package lists.
  apt-get "${apt_opts[@]}" update -qq >&2 || true
  kpkg=$(kpkg_of || true)
fi
[ -n "$kpkg" ] || { echo "build_image: cannot find a linux-image-$kernel.* package (apt-get update?)" >&2; exit 1; }
stamp="$kpkg $(sha256sum "$here/init" "$here/build_image.sh" | cut -c1-16 | tr '\n' ' ')"
if [ -f image.stamp ] && [ "$(cat image.stamp)" = "$stamp" ] && [ -f vmlinuz ] && [ -f initramfs.cpio.gz ]; then
  echo "$dir"
  exit 0
fi
echo "build_image: building VM image ($kpkg) in $dir" >&2

if [ ! -f "kernel/.pkg-$kpkg" ]; then
  rm -rf kernel linux-image-*.deb
  if ! apt-get "${apt_opts[@]}" download "$kpkg" >&2; then
    apt-get "${apt_opts[@]}" update -qq >&2
    apt-get "${apt_opts[@]}" download "$kpkg" >&2
  fi
  dpkg -x linux-image-*.deb kernel
  rm -f linux-image-*.deb
  # Newer packages keep modules under /usr/lib, compressed (.ko.xz).
  if [ ! -d kernel/lib/modules ] && [ -d kernel/usr/lib/modules ]; then
    ln -s usr/lib kernel/lib
  fi
  touch "kernel/.pkg-$kpkg"
fi
kver=$(ls kernel/lib/modules/ | head -1)
cp "kernel/boot/vmlinuz-$kver" vmlinuz
depmod -b kernel "$kver"

# Modules: virtio + 9p (host root), overlay, netdevs for rxe, rdma_rxe and its dependencies.
# Optional ones (crc32 helpers) may not exist as modules in every kernel.
required="virtio_pci virtio_net 9pnet_virtio 9p overlay dummy veth rdma_rxe rdma_ucm ib_umad"
optional="crc32_generic crc32-pclmul"
rm -rf initramfs
mkdir -p initramfs/bin initramfs/proc initramfs/sys initramfs/dev initramfs/tmp initramfs/lib/modules
: > initramfs/modules.order
{
  for m in $required; do
    modprobe -d kernel -S "$kver" --show-depends "$m" ||
      { echo "build_image: module $m not found in $kpkg" >&2; exit 1; }
  done
  for m in $optional; do modprobe -d kernel -S "$kver" --show-depends "$m" 2>/dev/null || true; done
} | awk '$1=="insmod"{print $2}' | awk '!seen[$0]++' > modules.list
while read -r ko; do
  name=$(basename "$ko"); name=${name%.xz}; name=${name%.zst}; name=${name%.ko}
  case "$ko" in
    *.ko.xz) xz -dc "$ko" > "initramfs/lib/modules/$name.ko" ;;
    *.ko.zst) zstd -dc "$ko" > "initramfs/lib/modules/$name.ko" ;;
    *) cp "$ko" "initramfs/lib/modules/$name.ko" ;;
  esac
  echo "$name" >> initramfs/modules.order
done < modules.list
grep -qx rdma_rxe initramfs/modules.order || { echo "build_image: rdma_rxe missing from $kpkg" >&2; exit 1; }
cp /bin/busybox initramfs/bin/busybox
cp "$here/init" initramfs/init
chmod +x initramfs/init
(cd initramfs && find . | cpio -o -H newc --quiet | gzip -1) > initramfs.cpio.gz.new
mv initramfs.cpio.gz.new initramfs.cpio.gz
echo "$kver" > kernel.version
echo "$stamp" > image.stamp
echo "build_image: kernel $kver, initramfs $(du -h initramfs.cpio.gz | cut -f1)" >&2
echo "$dir"
