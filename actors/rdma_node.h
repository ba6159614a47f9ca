// RdmaNode: the small API a distributed program's main() uses: start an actor system with a
// manager published on a TCP port (io middleman), and get other nodes' managers by host:port.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "actors/rdma_manager_actor.h"

namespace caf_rdma {

struct NodeOptions {
  /// Interface to publish the manager on ("127.0.0.1", "0.0.0.0", ...).
  std::string host = "127.0.0.1";
  /// TCP port; 0 picks a free one (see RdmaNode::port()).
  uint16_t port = 0;
  ManagerOptions manager;
  /// CAF scheduler threads (0 = CAF's default).
  size_t scheduler_threads = 0;
  /// Called on the actor system's config before the system starts: add the message types
  /// (and settings) of the application's own actors here.
  std::function<void(caf::actor_system_config&)> configure;
};

class RdmaNode {
public:
  /// Starts the node: actor system (with caf-rdma's message types and the io middleman),
  /// manager, and publication. Errors name the step that failed.
  static Result<std::unique_ptr<RdmaNode>> start(const NodeOptions& options);

  /// Shuts the manager down, then the actor system.
  ~RdmaNode();

  caf::actor_system& system() { return *system_; }
  const rdma_manager_actor& manager() const { return manager_; }
  uint16_t port() const { return port_; }
  /// "host:port" of this node's manager.
  std::string address() const;

  /// The manager published at host:port (blocking; call from main() or a test thread, never
  /// from inside an actor). Errors: peer_unavailable naming host:port and CAF's reason.
  Result<rdma_manager_actor> remote_manager(const std::string& host, uint16_t port);

private:
  RdmaNode() = default;

  std::unique_ptr<caf::actor_system_config> config_;
  std::unique_ptr<caf::actor_system> system_;
  rdma_manager_actor manager_;
  std::string host_;
  uint16_t port_ = 0;
};

/// Splits "host:port"; errors name the text.
Result<std::pair<std::string, uint16_t>> parse_host_port(const std::string& text);

}  // namespace caf_rdma
