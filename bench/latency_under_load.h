// The load shape of rdma_bench (--paths load): an 8-byte read's latency while a bulk pull runs
// between the same two nodes, against the same read's latency idle, in the same run (issue 50's
// target for priority classes: the loaded p99 within 2x the idle p99; measured here before
// there are classes, so that what they change is seen).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace caf_rdma::bench {

struct LoadBenchOptions {
  uint64_t bulk_bytes = 1ull << 30;  ///< the bulk pull's size (--load-bytes)
  int iters = 2000;                  ///< 8-byte reads idle, and again under load
  /// Of bench/node_pair.h's transports.
  std::vector<std::string> transports{"same-host", "stream", "rdma"};
};

/// For each transport this host has: `iters` 8-byte reads idle, then `iters` more while another
/// thread of the same client pulls `bulk_bytes` over and over (into the rest of the buffer);
/// every read's 8 bytes and the last pull's bytes checked. Prints "load <transport> bulk <bytes>
/// idle_p50_us A idle_p99_us B loaded_p50_us C loaded_p99_us D bulk_pulls N bulk_MBps M" and
/// "ratio load_<transport>_read8_p99_loaded_vs_idle <D / B>". Returns 0, or 1 when a check
/// failed or a transport is unknown.
int bench_latency_under_load(const LoadBenchOptions& o);

}  // namespace caf_rdma::bench
