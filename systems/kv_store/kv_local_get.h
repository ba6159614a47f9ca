// Same-host GETs without CAF: a kv_client's session sends the key over an abstract AF_UNIX
// socket (components/same_host.h) straight to the kv_server's GET listener, which looks it up
// in the store's index (kv_index.h) on its own thread and answers at once. A value of at most
// kInlineValueMax bytes comes in the answer (path kPathInline); a larger one the listener
// copies by cross-memory attach straight into the client's slot (components/cross_memory.h;
// path kPathSameHost). One round trip, no actor and no CAF serialization on either side: what
// a Redis client gets over its unix socket. Used only where RDMA would not move the value
// (rdma_moves_gets is false) and both run on one host (same_host_endpoint); off with
// CAF_RDMA_SAME_HOST=0 (ManagerOptions::same_host) on either side.
//
// Wire (integers little-endian, components/stream_protocol.h's store_le/load_le):
//   client -> listener  "KVG1", key length (u32), slot capacity (u64), slot address (u64), key
//   listener -> client  a status (stream_protocol.h's append_status: code, message), then on
//                       success: how (u32: kInBand, kCopied, kAskCaf), value length (u64),
//                       and with kInBand the value's bytes
//
// Invariants:
//  1. Only peers running as this process's uid are served (SO_PEERCRED at accept, the kernel's
//     word), as on the stream channel's same-host endpoint; a cross-memory copy goes only into
//     the SO_PEERCRED pid, so a client can make the listener write only into its own memory,
//     and only while the client's end is open (checked right before the copy): a client that
//     gave up or exited is never written to. A client whose GET timed out while a copy may
//     still run keeps its buffer until its process ends (KvClient's destructor).
//  2. The listener never waits on a client: kLoops event threads (epoll), each serving the
//     connections it accepted, so kLoops values are copied at once (a copy holds up the other
//     connections of its thread for as long as it runs, which its size bounds); a connection's next
//     request is read only after its answer went out; an answer that does not go into the
//     socket's send buffer at once (sized for the largest in-band answer) closes the
//     connection, as does a request not complete kRequestTimeout after its first byte, or one
//     that is not "KVG1". At most kMaxConnections / kLoops are open per thread; more are
//     closed at accept (the client then asks over CAF for a second, and tries again later).
//  3. A value's block is held while it is copied (kv_index.h invariant 2); the answer goes out
//     after the last byte was copied, so a client that has its answer owns its slot again.
//  4. The listener words no error of its own about a key: its errors are the index's (the
//     store actor's codes and texts; the size's names the client's slot), or the copy's. What it
//     cannot move (a value above kInlineValueMax where the kernel refuses cross-memory attach) is
//     answered kAskCaf, and the client asks the store actor.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "components/socket_io.h"
#include "systems/kv_store/kv_index.h"
#include "systems/kv_store/kv_protocol.h"

namespace caf_rdma::kv {

/// How the value of a successful same-host GET travels.
enum class LocalGetHow : uint32_t {
  kInBand = 1,  ///< its bytes follow the answer
  kCopied = 2,  ///< the listener copied them into the slot before it answered
  kAskCaf = 3,  ///< the listener cannot move it: ask the store actor (invariant 4)
};

class KvGetListener {
public:
  /// Invariant 2's bounds.
  static constexpr size_t kLoops = 2;
  static constexpr size_t kMaxConnections = 1024;
  static constexpr std::chrono::milliseconds kRequestTimeout{5000};
  /// The longest a cross-memory copy of one value may take.
  static constexpr std::chrono::milliseconds kCopyTimeout{30000};

  /// Listens on a fresh abstract name; values are read at `pool` + their block's offset.
  static Result<std::unique_ptr<KvGetListener>> start(std::shared_ptr<KvIndex> index,
                                                      const uint8_t* pool);
  /// Stops and joins the event threads; open connections close (their clients ask over CAF).
  ~KvGetListener();

  /// The abstract name (announced in ServerInfo::get_endpoint).
  const std::string& unix_name() const { return unix_name_; }
  /// GETs answered so far (errors included, kAskCaf not).
  uint64_t answered() const { return answered_.load(); }

private:
  KvGetListener() = default;
  /// One event thread: serves the connections it accepts through `epoll_fd`.
  void run(int epoll_fd);

  std::shared_ptr<KvIndex> index_;
  const uint8_t* pool_ = nullptr;
  Socket listener_;
  std::vector<int> epoll_fds_;  // one per event thread
  int stop_fd_ = -1;
  std::string unix_name_;
  std::atomic<uint64_t> answered_{0};
  std::vector<std::thread> threads_;
};

/// The client's side of one GET over `s` (connected to a KvGetListener): the value of `key`
/// into [slot, slot + capacity) within the deadline. Returns its ValueInfo (path kPathInline
/// or kPathSameHost, `bytes` empty) or the server's error; nothing when the listener said
/// kAskCaf. `*broken` is set when the connection failed (the caller closes it); a failure
/// that is a timeout is kTimeout naming `server` and saying it kNoAnswer.
std::optional<Result<ValueInfo>> local_get(const Socket& s, const std::string& key, uint8_t* slot,
                                           uint64_t capacity, Deadline deadline,
                                           const std::string& server, bool* broken);

}  // namespace caf_rdma::kv
