#!/usr/bin/env bash
# A real Prometheus server scrapes two nodes during transfers (tests/metrics/prometheus_scrape.py).
set -euo pipefail
here=${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-caf_rdma}/tests/metrics
# Debian's python3 (third_party/install_deps.sh: python3, python3-matplotlib), not whatever
# python3 comes first on PATH.
exec /usr/bin/python3 "$here/prometheus_scrape.py" "$here/metrics_pair"
