// The owner's side of the fallback's stream channel: a TCP listener whose connections move the
// bytes of granted ranges straight between the socket and the registered buffer (no copy in
// user space; CAF carries only the grant). No CAF here: the manager grants, and learns through
// the `done` callback (called on a connection thread) when a claimed grant is finished.
#pragma once

#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>

#include "components/socket_io.h"
#include "components/stream_protocol.h"

namespace caf_rdma {

class StreamServer {
public:
  /// Called once per claimed grant: ok with the bytes moved, or why it failed.
  using DoneFn = std::function<void(Status, uint64_t bytes)>;

  /// Listens on host (IPv4), port chosen by the kernel. Errors name host and errno.
  static Result<std::unique_ptr<StreamServer>> start(const std::string& host);

  /// Stops accepting, wakes and joins every connection thread (their grants fail).
  ~StreamServer();

  StreamServer(const StreamServer&) = delete;
  StreamServer& operator=(const StreamServer&) = delete;

  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }

  /// Allows one client to move `length` bytes into or out of [addr, addr + length) before the
  /// deadline. The memory must stay valid until `done` is called or `revoke` returns true.
  /// Returns the grant's token.
  uint64_t grant(uint8_t* addr, uint64_t length, StreamDirection direction, Deadline deadline,
                 DoneFn done);
  /// Withdraws a grant no client has claimed yet: true if it was unclaimed (its `done` will not
  /// be called); false if a client claimed it (its `done` will be, or was, called).
  bool revoke(uint64_t token);
  /// Grants not claimed yet.
  size_t pending_grants() const;

private:
  struct Grant {
    uint8_t* addr;
    uint64_t length;
    StreamDirection direction;
    Deadline deadline;
    DoneFn done;
  };
  struct Connection {
    Socket socket;
    std::thread thread;
    bool finished = false;
  };

  StreamServer(std::string host, Socket listener, uint16_t port, int stop_read, int stop_write);
  void accept_loop();
  void serve(Connection* c);
  /// Serves one request on c; false when the connection can no longer be used.
  bool serve_one(const Socket& s);

  const std::string host_;
  Socket listener_;
  const uint16_t port_;
  int stop_read_;
  int stop_write_;
  std::thread acceptor_;
  mutable std::mutex mu_;
  bool stopping_ = false;
  std::unordered_map<uint64_t, Grant> grants_;
  std::mt19937_64 random_;
  std::list<Connection> connections_;
};

}  // namespace caf_rdma
