#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, and runs the main example,
# parameter_server (one server and N worker processes), end to end on this machine. Without an
# RDMA device it uses the fallback transport; on an RDMA host, RDMA. Arguments go to
# parameter_server (default: --workers 3 --steps 5 --size 4M). The test suite also runs it
# over RDMA inside the Soft-RoCE VM.
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/.."
bash third_party/install_deps.sh
bazel build //examples:parameter_server
[ $# -gt 0 ] || set -- --workers 3 --steps 5 --size 4M
exec bazel-bin/examples/parameter_server "$@"
