// The cancel shape of rdma_bench (--paths cancel): how long CancelToken::cancel takes to stop a
// large transfer at a random point of its run, per transport, beside the time of the whole
// transfer measured in the same run (docs/guarantees.md, "Cancel"; issue 50's target: a
// 256 MiB transfer's cancel returns within 10 ms natively).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace caf_rdma::bench {

struct CancelBenchOptions {
  uint64_t bytes = 256ull << 20;  ///< each transfer's size (--cancel-bytes)
  int trials = 20;                ///< cancels per transport and direction (--long: 50)
  /// Of bench/node_pair.h's transports ("rdma-manager": read_async/write_async with the token,
  /// which the manager moves and cancels).
  std::vector<std::string> transports{"same-host", "stream", "rdma"};
};

/// For each transport this host has, reads and writes of `bytes`: the whole transfer timed
/// (median of 3, every byte checked), then `trials` transfers each cancelled from this thread
/// after a random delay in [0, that time). Each outcome is checked: the cancel agrees with the
/// transfer's answer; after `cancelled`, every byte of the destination is either untouched or
/// the source's and none changes while it is checked; a finished one moved every byte. Prints
/// "cancel <transport> <read|write> <bytes> trials N cancelled C finished F unstarted U
/// median_ms M p99_ms P max_ms X whole_ms W" and "ratio cancel_<transport>_<op>_max_vs_whole
/// <X / W>". Returns 0, or 1 when a check failed or a transport is unknown.
int bench_cancel(const CancelBenchOptions& o);

}  // namespace caf_rdma::bench
