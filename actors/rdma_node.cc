#include "actors/rdma_node.h"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "actors/rdma_errors.h"
#include "actors/rdma_messages.h"

namespace caf_rdma {

Result<uint16_t> free_port(const std::string& host) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return Error(ErrorCode::kInternal, "socket() failed while looking for a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  if (inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &addr.sin_addr) != 1)
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return Error(ErrorCode::kInternal, "cannot bind a free port on " + host);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

Result<std::unique_ptr<RdmaNode>> RdmaNode::start(NodeOptions options) {
  std::unique_ptr<RdmaNode> node(new RdmaNode());
  node->config_ = std::make_unique<caf::actor_system_config>();
  add_message_types(*node->config_);
  node->config_->load<caf::io::middleman>();
  if (options.scheduler_threads > 0)
    node->config_->set("scheduler.max-threads", options.scheduler_threads);
  if (const char* policy = std::getenv("CAF_RDMA_SCHEDULER"); policy != nullptr && *policy)
    node->config_->set("scheduler.policy", caf::atom_from_string(policy));
  if (options.configure)
    options.configure(*node->config_);
  node->system_ = std::make_unique<caf::actor_system>(*node->config_);
  node->host_ = options.host;
  // The manager names itself host:port, so the port is chosen before it is published. A port
  // picked by us (port 0) can be taken by another process before we bind it: then we pick
  // another one, a few times, rather than fail.
  const bool pick_port = options.port == 0;
  constexpr int kPortAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    uint16_t port_wanted = options.port;
    if (pick_port) {
      CAF_RDMA_ASSIGN_OR_RETURN(port_wanted, free_port(options.host));
    }
    ManagerOptions mo = options.manager;
    if (mo.name.empty())
      mo.name = options.host + ":" + std::to_string(port_wanted);
    // The stream channel announces the node's address; a wildcard is no address a peer can use.
    if (mo.stream_host.empty() && options.host != "0.0.0.0" && !options.host.empty())
      mo.stream_host = options.host == "localhost" ? "127.0.0.1" : options.host;
    auto mgr = spawn_manager(*node->system_, mo);
    if (!mgr.ok())
      return mgr.error();
    node->manager_ = *mgr;
    auto port = node->system_->middleman().publish(node->manager_, port_wanted,
                                                   options.host.c_str(), true);
    if (port) {
      node->port_ = *port;
      return node;
    }
    caf::anon_send_exit(node->manager_, caf::exit_reason::user_shutdown);
    if (!pick_port || attempt == kPortAttempts)
      return Error(ErrorCode::kPeerUnavailable,
                   "publishing the RDMA manager on " + options.host + ":" +
                       std::to_string(port_wanted) + " failed: " +
                       node->system_->render(port.error()));
  }
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
