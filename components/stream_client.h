// The requester's side of the fallback's stream channel: worker threads that run granted
// transfers over pooled TCP connections to owners' StreamServers, straight from or into the
// requester's registered buffer. No CAF here: `done` is called on a worker thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "components/socket_io.h"
#include "components/stream_protocol.h"

namespace caf_rdma {

struct StreamJob {
  std::string host;  ///< the owner's stream endpoint
  uint16_t port = 0;
  uint64_t token = 0;  ///< the owner's grant
  StreamDirection direction = StreamDirection::kIntoOwner;
  uint8_t* addr = nullptr;  ///< the requester's memory: sent from (into owner) or received into
  uint64_t length = 0;
  Deadline deadline = kNoDeadline;
  uint64_t tag = 0;  ///< the submitter's name for it (cancel_queued)
  /// Called exactly once, after the last access to [addr, addr + length).
  std::function<void(Status)> done;
};

class StreamClient {
public:
  /// `threads` transfers run at once; more wait in order. The threads start with the first
  /// transfer (a node that never needs the stream channel runs none).
  /// With `tls`, every connection is TLS: the owner must show a certificate the context's CA
  /// file vouches for, and this node shows its own.
  explicit StreamClient(size_t threads = 4, TlsContext tls = nullptr);
  /// Fails queued jobs, wakes running ones (their sockets are shut down) and joins the workers.
  ~StreamClient();

  StreamClient(const StreamClient&) = delete;
  StreamClient& operator=(const StreamClient&) = delete;

  void submit(StreamJob job);
  /// Fails the job tagged `tag` with a timeout if it still waits for a thread (its `done` is
  /// called here); false if it runs already (it stops at its deadline) or is unknown.
  bool cancel_queued(uint64_t tag, const std::string& why =
                                       "its deadline passed while it waited for a stream "
                                       "thread");
  /// Idle pooled connections (all endpoints).
  size_t idle_connections() const;

private:
  void work();
  Status run(const StreamJob& job);
  Result<Socket> take_connection(const StreamJob& job, bool& pooled);
  void give_back(const std::string& endpoint, Socket s);

  const TlsContext tls_;  ///< null: plain TCP
  mutable std::mutex mu_;
  std::condition_variable ready_;
  bool stopping_ = false;
  std::deque<StreamJob> queue_;
  std::map<std::string, std::vector<Socket>> idle_;  ///< "host:port" -> connections
  std::set<int> busy_fds_;                           ///< sockets a worker is using
  const size_t threads_;
  std::vector<std::thread> workers_;  ///< started by the first submit
};

}  // namespace caf_rdma
