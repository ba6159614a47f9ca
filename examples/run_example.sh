#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, and runs the main example end to
# end: on this host's RDMA device if it has one, else inside the Soft-RoCE VM (tests/rxe_vm).
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/.."
bash third_party/install_deps.sh
bazel build //examples:rdma_hello
bin=bazel-bin/examples/rdma_hello
if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
  echo "== running on this host's RDMA device"
  exec "$bin" "$@"
fi
echo "== no RDMA device on this host: running inside the Soft-RoCE VM (first run builds the image)"
exec bash tests/rxe_vm/run_in_vm.sh -s /tmp -- "$bin" "$@"
