// The load shape of rdma_bench (--paths load): an 8-byte read's latency while a bulk pull runs
// between the same two nodes, against the same read's latency idle, in the same run (issue 50's
// target for priority classes: the latency-class read's loaded p99 within 2x its idle p99;
// measured with and without classes in the same run, so that what they change is seen).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace caf_rdma::bench {

struct LoadBenchOptions {
  uint64_t bulk_bytes = 1ull << 30;  ///< the bulk pull's size (--load-bytes)
  /// 8-byte reads idle, and again under load, per round (--load-reads; two rounds: the CI
  /// bench's time).
  int iters = 1000;
  /// Of bench/node_pair.h's transports ("rdma-manager": the reads and the pull through the
  /// manager, read_async: an actor's way, on the managers' and the class queue pairs).
  std::vector<std::string> transports{"same-host", "stream", "rdma"};
};

/// For each transport this host has, twice: `iters` 8-byte reads idle, then `iters` more while
/// another thread of the same client pulls `bulk_bytes` (bulk class) over and over (into the
/// rest of the buffer); every read's 8 bytes and the last pull's bytes checked. The first round
/// reads in the bulk class too (no classes: the baseline), the second in the latency class.
/// Prints "load <transport> reads <class> bulk <bytes> idle_p50_us A idle_p99_us B
/// loaded_p50_us C loaded_p99_us D bulk_pulls N bulk_MBps M" and "ratio
/// load_<transport>[_nocls]_read8_p99_loaded_vs_idle <D / B>" for each. Returns 0, or 1 when a
/// check failed or a transport is unknown.
int bench_latency_under_load(const LoadBenchOptions& o);

}  // namespace caf_rdma::bench
