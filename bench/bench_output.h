// The machine-readable lines every benchmark program of bench/ prints (bench_report.py reads
// them), and the process counters they come from. Plain C++ and POSIX; no CAF, no caf-rdma.
//
//   lat <path> <op> 8 <median_us> <p99_us>         8-byte latency of `ops` samples
//   csw <path> <op> <self_per_op> <peer_per_op>    voluntary context switches per op, of this
//                                                  process and of the peer process ("-" when
//                                                  the peer lives in this process or is unknown)
//   bw <path> <op> <bytes> <MB/s>                  bandwidth of `bytes`-sized operations
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace caf_rdma::bench {

/// Voluntary context switches of this whole process so far (getrusage(RUSAGE_SELF).ru_nvcsw:
/// all threads; a thread blocking in the kernel, e.g. in recv or futex, adds one).
uint64_t voluntary_switches();

/// Sorts `us` and prints its "lat" line (median and 99th percentile). `us` must not be empty.
void print_latency(const char* path, const char* op, std::vector<double>& us);

/// Prints the "csw" line: switches per operation of this process and of the peer.
void print_switches(const char* path, const char* op, double self_per_op,
                    std::optional<double> peer_per_op);

/// `switches` / `ops` (0 when there were no ops).
double per_op(uint64_t switches, uint64_t ops);

}  // namespace caf_rdma::bench
