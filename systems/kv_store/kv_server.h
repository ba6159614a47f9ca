// KvServer: an RdmaNode whose manager registers one memory pool, once, plus the store actor
// (published at the server's address) that keeps the key index and moves values with RDMA
// through its manager: PUT = RDMA READ from the client's buffer into a fresh pool block, GET =
// RDMA WRITE from the value's block into the client's buffer. Clients on the same host GET
// through the server's same-host listener instead, without CAF (kv_local_get.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "actors/rdma_node.h"
#include "components/host_memory.h"
#include "primitives/status.h"
#include "systems/kv_store/kv_local_get.h"
#include "systems/kv_store/kv_protocol.h"

namespace caf_rdma::kv {

struct KvServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  ///< 0 picks a free port (see KvServer::port())
  uint64_t memory_bytes = 64 << 20;
  /// Limit of each value transfer the server runs.
  uint32_t transfer_timeout_ms = 30000;
  /// Transport and device (CAF_RDMA_TRANSPORT, CAF_RDMA_DEVICE, ...).
  ManagerOptions manager;
  /// The node's Prometheus metrics (off: CAF_RDMA_METRICS decides; see KvServer::node()).
  MetricsOptions metrics;
};

class KvServer {
public:
  /// Allocates and registers the pool, starts the node and publishes the store actor.
  static Result<std::unique_ptr<KvServer>> start(KvServerOptions options);
  /// Stops the store actor and the node, then frees the pool.
  ~KvServer();

  uint16_t port() const { return port_; }
  std::string address() const { return host_ + ":" + std::to_string(port_); }
  /// The server's RDMA device, "" when values move on the fallback.
  const std::string& device() const { return device_; }
  const server_actor& actor() const { return actor_; }
  /// The same-host GET listener's abstract name (kv_local_get.h), "" without one.
  std::string get_endpoint() const { return listener_ ? listener_->unix_name() : ""; }
  RdmaNode& node() { return *node_; }

private:
  KvServer() = default;

  HostMemory memory_;  // declared first: freed after the node is gone
  std::unique_ptr<RdmaNode> node_;
  /// Same-host GETs (kv_local_get.h); null with ManagerOptions::same_host off. Stopped before
  /// the node and the memory go.
  std::unique_ptr<KvGetListener> listener_;
  server_actor actor_;
  std::string host_;
  uint16_t port_ = 0;
  std::string device_;
};

}  // namespace caf_rdma::kv
