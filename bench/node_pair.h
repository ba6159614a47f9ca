// NodePair: the two nodes a shape of rdma_bench moves bytes between (kv-handoff, cancel), on
// one of its transports: an owner with a buffer it publishes by name, and a user that found it
// through the owner's directory, with a buffer of the same size. Both buffers are the library's
// (allocate_buffer), touched once, and the way between them warmed (lanes, handshakes, the
// owner's endpoint) before anything is timed.
//
// Invariants:
//  1. The buffers go before the clients, the clients before the nodes (members in that order).
//  2. The transports' names and what each means are written here only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "actors/rdma_client.h"
#include "actors/rdma_node.h"

namespace caf_rdma::bench {

struct BenchTransport {
  const char* name;
  TransportMode mode;
  bool same_host;  ///< the owner's same-host endpoint (cross-memory attach) may carry it
  /// Lists go to the manager (post_async: its transfer_list request, an actor's way).
  bool via_manager = false;
  /// No stream channel (stream_min_bytes 0): the fallback's CAF chunks carry everything.
  bool chunks_only = false;
};

/// The byte a shape's source holds at `i` for `seed` (the benches check every byte against it).
inline uint8_t pattern(uint64_t i, uint32_t seed) {
  return static_cast<uint8_t>((i * 2654435761u + seed * 0x9E3779B97F4A7C15u) >> 13);
}

/// "same-host" (the fallback over the owner's same-host endpoint), "stream" (the fallback's
/// stream lane over TCP), "chunks" (the fallback's CAF chunks, no stream channel), "rdma" (the
/// client's direct lane) or "rdma-manager" (RDMA through the manager); null: none of these.
const BenchTransport* find_transport(const std::string& name);
/// The names find_transport knows, for a usage or an error: "same-host, stream, ...".
const char* transport_names();

class NodePair {
public:
  /// The pair on `t`, with buffers of `bytes` each, the owner's published as `name`. An RDMA
  /// transport on a host without a device: null, and `skipped` says why.
  static Result<std::unique_ptr<NodePair>> start(const BenchTransport& t, uint64_t bytes,
                                                 const std::string& name, std::string* skipped);

  RdmaClient& me() { return *me_; }
  uint8_t* pool() const { return pool_->data(); }  ///< the owner's buffer
  uint8_t* mine() const { return mine_->data(); }  ///< the user's buffer
  BufferHandle local() const { return mine_->handle(); }
  const BufferHandle& remote() const { return remote_; }

private:
  NodePair() = default;

  std::unique_ptr<RdmaNode> owner_, user_;
  std::optional<RdmaClient> owner_client_, me_;
  std::optional<RegisteredBuffer> pool_, mine_;
  BufferHandle remote_;
};

}  // namespace caf_rdma::bench
