// KvClient: connects to a kv_server, registers one receive/send buffer with its own node's
// manager, and hands out sessions (one per thread), each using its own slot of that buffer.
// Values move by RDMA between the slot and the server's pool; the client only sends the key
// and its buffer's handle. Where RDMA would not move a GET's value and the server runs on this
// host, the session asks the server's same-host GET listener instead (kv_local_get.h). All calls
// block with a timeout; errors are `Error`s whose message names the key, sizes and peer; codes as
// listed in kv_protocol.h.
#pragma once

#include <caf/scoped_actor.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/rdma_node.h"
#include "components/host_memory.h"
#include "components/socket_io.h"
#include "primitives/status.h"
#include "systems/kv_store/kv_protocol.h"

namespace caf_rdma::kv {

struct KvClientOptions {
  std::string server;  ///< "host:port" of the kv_server
  uint64_t buffer_bytes = 64 << 20;
  /// Slots the buffer is split into (at most this many sessions run at once).
  uint32_t slots = 1;
  uint32_t timeout_ms = 30000;
  ManagerOptions manager;
};

class KvSession;

class KvClient {
public:
  /// Starts the client's node, registers the buffer, reaches the server. Errors: the server is
  /// unreachable (names host:port and why), the buffer cannot be registered.
  static Result<std::unique_ptr<KvClient>> connect(KvClientOptions options);
  ~KvClient();

  /// Session `slot` (0 <= slot < slots()), nullptr for any other slot; use each from one
  /// thread at a time, and destroy it before the client (it holds an actor of the client's
  /// actor system: CAF's shutdown would wait for it).
  std::unique_ptr<KvSession> session(uint32_t slot);

  uint32_t slots() const { return options_.slots; }
  uint64_t slot_bytes() const { return slot_bytes_; }
  const std::string& server() const { return options_.server; }
  /// The client's RDMA device, "" on the fallback.
  const std::string& device() const { return buffer_.device; }
  RdmaNode& node() { return *node_; }

  Result<ServerStats> server_stats();

private:
  friend class KvSession;
  KvClient() = default;

  KvClientOptions options_;
  HostMemory memory_;  // freed after the node is gone (huge pages: host_memory.h)
  uint64_t slot_bytes_ = 0;
  std::unique_ptr<RdmaNode> node_;
  BufferHandle buffer_;
  server_actor gateway_;  // local actor forwarding to the server, failing requests if it dies
  /// The server's same-host GET listener (kv_local_get.h) when GETs may use it, else "".
  std::string get_endpoint_;
  std::mutex doubt_mutex_;
  std::vector<std::string> in_doubt_;  // [slot]: the request that left it in doubt ("": none)
};

class KvSession {
public:
  ~KvSession();

  /// Stores `size` bytes under `key` (copied into the slot first).
  /// A put or get that got no answer in time (the server stalled) leaves its slot in doubt:
  /// the server's transfer may still read or write it later. Every later put or get through
  /// that slot (any session of it) then fails with timeout naming the request; use another
  /// slot or client. A fast, silent reuse could store or return another request's bytes. A
  /// client with a slot in doubt leaves its buffer allocated when it goes.
  Result<ValueInfo> put(const std::string& key, const void* data, uint64_t size);
  /// Stores the first `size` bytes already in `slot_data()` under `key` (no copy).
  Result<ValueInfo> put_from_slot(const std::string& key, uint64_t size);
  /// Fetches `key` into the slot; the value is at slot_data() until the next call.
  Result<ValueInfo> get(const std::string& key);
  /// Removes `key`; returns the removed value's length.
  Result<uint64_t> remove(const std::string& key);

  uint8_t* slot_data() { return data_; }
  uint64_t slot_bytes() const { return client_->slot_bytes_; }

private:
  friend class KvClient;
  KvSession(KvClient* client, uint32_t slot);
  template <class T, class... Ts>
  Result<T> call(Ts&&... xs);

  /// The slot's doubt (see put), or nothing.
  std::optional<Error> doubt() const;
  /// After a put or get: marks the slot in doubt when the server did not answer in time.
  void note_outcome(const std::string& what, const Error& e);
  /// A GET through the server's same-host listener; nothing: ask the store actor.
  std::optional<Result<ValueInfo>> local_get(const std::string& key);

  KvClient* client_;
  uint32_t slot_;
  uint64_t offset_;
  uint8_t* data_;
  std::unique_ptr<caf::scoped_actor> self_;
  Socket local_;  ///< to the same-host GET listener, opened on first use
  /// GETs go over CAF until then: the listener could not be reached, or closed on us.
  std::chrono::steady_clock::time_point local_retry_after_{};
  static constexpr std::chrono::seconds kLocalRetry{1};
};

}  // namespace caf_rdma::kv
