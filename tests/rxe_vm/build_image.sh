#!/usr/bin/env bash
# Builds the Soft-RoCE test VM image: Debian's own kernel + a small initramfs that loads
# rdma_rxe. Idempotent and safe to run concurrently (flock); returns at once when the image is
# current. Output in $CAF_RDMA_VM_CACHE (default /var/tmp/caf-rdma-rxe-vm), outside the repo.
#
# Needs the packages third_party/install_deps.sh installs (busybox-static, cpio, kmod) and
# access to Debian's archive for `apt-get download` of the kernel package (first run only).
set -euo pipefail
here=$(dirname "$(realpath "$0")")
cache=${CAF_RDMA_VM_CACHE:-/var/tmp/caf-rdma-rxe-vm}
mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock -w 900 9 || { echo "build_image: could not lock $cache/.build.lock" >&2; exit 1; }
cd "$cache"

# The stamp covers the inputs: kernel package name and our init script.
kpkg_of() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-6/{print $2; exit}'; }
kpkg=${CAF_RDMA_VM_KERNEL_PKG:-$(kpkg_of)}
if [ -z "$kpkg" ]; then
  # A fresh machine may have empty package lists.
  apt-get -o DPkg::Lock::Timeout=600 update -qq >&2 || true
  kpkg=$(kpkg_of)
fi
[ -n "$kpkg" ] || { echo "build_image: cannot find the kernel package linux-image-amd64 depends on (apt-get update?)" >&2; exit 1; }
stamp="$kpkg $(sha256sum "$here/init" | cut -c1-16)"
if [ -f image.stamp ] && [ "$(cat image.stamp)" = "$stamp" ] && [ -f vmlinuz ] && [ -f initramfs.cpio.gz ]; then
  exit 0
fi
echo "build_image: building VM image ($kpkg) in $cache" >&2

if [ ! -f "kernel/.pkg-$kpkg" ]; then
  rm -rf kernel linux-image-*.deb
  if ! apt-get -o DPkg::Lock::Timeout=600 download "$kpkg" >&2; then
    apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
    apt-get -o DPkg::Lock::Timeout=600 download "$kpkg" >&2
  fi
  dpkg -x linux-image-*.deb kernel
  rm -f linux-image-*.deb
  touch "kernel/.pkg-$kpkg"
fi
kver=$(ls kernel/lib/modules | head -1)
cp "kernel/boot/vmlinuz-$kver" vmlinuz
depmod -b kernel "$kver"

# Modules: virtio + 9p (host root), overlay, netdevs for rxe, rdma_rxe and its dependencies.
modules="virtio_pci virtio_net 9pnet_virtio 9p overlay dummy veth crc32_generic crc32-pclmul rdma_rxe rdma_ucm ib_umad"
rm -rf initramfs
mkdir -p initramfs/bin initramfs/proc initramfs/sys initramfs/dev initramfs/tmp initramfs/lib/modules
: > initramfs/modules.order
for m in $modules; do
  modprobe -d kernel -S "$kver" --show-depends "$m" | awk '$1=="insmod"{print $2}'
done | awk '!seen[$0]++' | while read -r ko; do
  cp "$ko" initramfs/lib/modules/
  basename "$ko" .ko >> initramfs/modules.order
done
cp /bin/busybox initramfs/bin/busybox
cp "$here/init" initramfs/init
chmod +x initramfs/init
(cd initramfs && find . | cpio -o -H newc --quiet | gzip -1) > initramfs.cpio.gz.new
mv initramfs.cpio.gz.new initramfs.cpio.gz
echo "$stamp" > image.stamp
echo "build_image: kernel $kver, initramfs $(du -h initramfs.cpio.gz | cut -f1)" >&2
