// The kv-handoff shape of rdma_bench (--paths kv-handoff): a paged KV cache handed from one
// node to another as transfer lists (actors/transfer_plan.h), against the bulk transfer of the
// same bytes in the same run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace caf_rdma::bench {

struct KvHandoffOptions {
  uint64_t pool_bytes = 64ull << 20;  ///< the owner's pool and the requester's copy of it
  bool long_mode = false;             ///< also 64 concurrent requests, more repetitions
  /// The transports to run, of "same-host", "stream", "chunks", "rdma", "rdma-manager" (all
  /// but "chunks" by default).
  std::vector<std::string> transports{"same-host", "stream", "rdma", "rdma-manager"};
};

/// Runs the shape on each transport this host has: "same-host" (the owner's same-host
/// endpoint, cross-memory attach), "stream" (the stream lane over TCP), "chunks" (no stream
/// channel: the fallback's CAF messages, small ranges packed), "rdma" (when an RDMA
/// device is there) and "rdma-manager" (the same lists moved by the manager: post_async, an
/// actor's transfer_list; prepared plans only). For each: the pool pulled and pushed as blocks of
/// 4, 16 and 64 KiB in a shuffled order, by 1 list (posted from the calling thread) or 8 (and 64)
/// concurrent ones (one thread each, made once per figure) (8 posts of the pool each; --long 16),
/// prepared once or prepared on every post, every byte checked; each figure the median of 3
/// paired rounds (--long 5), a round being the pool moved whole as many times in one transfer
/// each (the reference), then the lists. Prints
/// "bw kv-handoff ..." lines and "ratio kv_handoff_<transport>_<pull|push>_<block>_c<N>_
/// <prepared|fresh> <paged MB/s / bulk MB/s>". Returns 0, or 1 when a transfer failed or a byte
/// was wrong, or a transport is unknown.
int bench_kv_handoff(const KvHandoffOptions& o);

}  // namespace caf_rdma::bench
