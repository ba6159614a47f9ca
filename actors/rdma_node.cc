#include "actors/rdma_node.h"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <cstdlib>

#include "actors/detail/manager_events.h"
#include "actors/rdma_errors.h"
#include "actors/rdma_messages.h"

namespace caf_rdma {

Result<std::unique_ptr<RdmaNode>> RdmaNode::start(const NodeOptions& options) {
  std::unique_ptr<RdmaNode> node(new RdmaNode());
  node->config_ = std::make_unique<caf::actor_system_config>();
  add_message_types(*node->config_);
  node->config_->load<caf::io::middleman>();
  if (options.scheduler_threads > 0)
    node->config_->set("scheduler.max-threads", options.scheduler_threads);
  if (const char* policy = std::getenv("CAF_RDMA_SCHEDULER"); policy != nullptr && *policy)
    node->config_->set("scheduler.policy", caf::atom_from_string(std::string(policy)));
  if (options.configure)
    options.configure(*node->config_);
  node->system_ = std::make_unique<caf::actor_system>(*node->config_);
  node->host_ = options.host;
  // Published first (port 0: the OS picks one, no one else can take it in between), then named
  // host:port: the name reaches the manager before anyone can know the port.
  ManagerOptions mo = options.manager;
  const bool name_it = mo.name.empty();
  // The stream channel announces the node's address; a wildcard is no address a peer can use.
  if (mo.stream_host.empty() && options.host != "0.0.0.0" && !options.host.empty())
    mo.stream_host = options.host == "localhost" ? "127.0.0.1" : options.host;
  auto mgr = spawn_manager(*node->system_, mo);
  if (!mgr.ok())
    return mgr.error();
  node->manager_ = *mgr;
  auto port =
      node->system_->middleman().publish(node->manager_, options.port, options.host.c_str(), true);
  if (!port) {
    caf::anon_send_exit(node->manager_, caf::exit_reason::user_shutdown);
    return Error(ErrorCode::kPeerUnavailable, "publishing the RDMA manager on " + options.host +
                                                  ":" + std::to_string(options.port) + " failed: " +
                                                  node->system_->render(port.error()));
  }
  node->port_ = *port;
  if (name_it)
    caf::anon_send(caf::actor_cast<caf::actor>(node->manager_), detail::SetName{node->address()});
  return node;
}

RdmaNode::~RdmaNode() {
  if (system_) {
    caf::anon_send_exit(manager_, caf::exit_reason::user_shutdown);
    manager_ = nullptr;
    system_.reset();
  }
}

std::string RdmaNode::address() const {
  return host_ + ":" + std::to_string(port_);
}

Result<rdma_manager_actor> RdmaNode::remote_manager(const std::string& host, uint16_t port) {
  auto h = system_->middleman().remote_actor<rdma_manager_actor>(host, port);
  if (!h)
    return Error(ErrorCode::kPeerUnavailable, "cannot reach the RDMA manager at " + host + ":" +
                                                  std::to_string(port) + ": " +
                                                  system_->render(h.error()));
  return *h;
}

Result<std::pair<std::string, uint16_t>> parse_host_port(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return Error(ErrorCode::kInvalidArgument, "'" + text + "' is not HOST:PORT");
  try {
    size_t used = 0;
    unsigned long p = std::stoul(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1 || p == 0 || p > 65535)
      throw std::out_of_range("port");
    return std::make_pair(text.substr(0, colon), static_cast<uint16_t>(p));
  } catch (const std::exception&) {
    return Error(ErrorCode::kInvalidArgument, "'" + text + "' has no valid port (1..65535)");
  }
}

}  // namespace caf_rdma
