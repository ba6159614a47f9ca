// RdmaNode: the small API a distributed program's main() uses: start an actor system with a
// manager published on a TCP port (io middleman), and get other nodes' managers by host:port.
#pragma once

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman_actor.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "actors/metrics_exporter.h"
#include "actors/rdma_manager_actor.h"
#include "components/tls_credentials.h"

namespace caf_rdma {

/// `CAF_RDMA_PLAINTEXT=1`: NodeOptions::allow_plaintext.
constexpr const char* kEnvPlaintext = "CAF_RDMA_PLAINTEXT";

namespace detail {
/// The actor published at host:port through CAF's plain middleman, and the interfaces it
/// declares (see connect_published).
Result<std::pair<caf::strong_actor_ptr, std::set<std::string>>> connect_published_ptr(
    caf::actor_system& sys, const std::string& host, uint16_t port,
    std::chrono::milliseconds timeout, const std::string& what);

/// "the actor published at HOST:PORT is not WHAT".
std::string not_published_as_text(const std::string& host, uint16_t port, const std::string& what);

/// A connected actor as `Handle`, or peer_unavailable when it declares other interfaces.
template <class Handle>
Result<Handle> published_as(caf::actor_system& sys,
                            std::pair<caf::strong_actor_ptr, std::set<std::string>> connected,
                            const std::string& host, uint16_t port, const std::string& what) {
  if (!sys.assignable<Handle>(connected.second))
    return Error(ErrorCode::kPeerUnavailable, not_published_as_text(host, port, what));
  return caf::actor_cast<Handle>(std::move(connected.first));
}
}  // namespace detail

struct NodeOptions {
  /// Interface to publish the manager on ("127.0.0.1", "0.0.0.0", ...). Without TLS only a
  /// loopback address, unless allow_plaintext.
  std::string host = "127.0.0.1";
  /// TCP port; 0 picks a free one (see RdmaNode::port()).
  uint16_t port = 0;
  ManagerOptions manager;
  /// CAF scheduler threads (0 = CAF's default).
  size_t scheduler_threads = 0;
  /// Called on the actor system's config before the system starts: add the message types
  /// (and settings) of the application's own actors here.
  std::function<void(caf::actor_system_config&)> configure;
  /// Mutual TLS between nodes (CAF's OpenSSL module): this node's certificate and key and the
  /// CA file of the authority that signs every node of the cluster; a peer without such a
  /// certificate is turned away. None set here: CAF_RDMA_TLS_CERT, CAF_RDMA_TLS_KEY,
  /// CAF_RDMA_TLS_CA (and CAF_RDMA_TLS_PASSPHRASE) when set. Checked at start (errors name the
  /// file). With TLS the fallback's stream channel speaks TLS with the same credentials.
  TlsCredentials tls;
  /// Without TLS, publishing on an address other than loopback is refused unless this is set
  /// (or CAF_RDMA_PLAINTEXT=1): every process that reaches the port may then speak the peer
  /// protocol, and anyone on the path can read and change the bytes. For one trusted network.
  bool allow_plaintext = false;
  /// How long remote_manager waits for the connection and CAF's handshake (TLS included).
  std::chrono::milliseconds connect_timeout{30000};
  /// The node's metrics over HTTP in the Prometheus text format (actors/metrics_exporter.h;
  /// docs/operations.md, "Metrics"): off by default; not enabled here, CAF_RDMA_METRICS=HOST:PORT
  /// when set. Under TLS only on a loopback host.
  MetricsOptions metrics;

  /// The defaults with the environment applied: `manager` from ManagerOptions::from_env (an
  /// error names a malformed variable and what it may be); TLS, CAF_RDMA_PLAINTEXT,
  /// CAF_RDMA_SCHEDULER and CAF_RDMA_METRICS are read by RdmaNode::start in any case.
  static Result<NodeOptions> from_env();
};

class RdmaNode {
public:
  /// Starts the node: actor system (with caf-rdma's message types and the io middleman),
  /// manager, and publication, with `options` as given: the environment's manager variables
  /// (CAF_RDMA_TRANSPORT, CAF_RDMA_DEVICE, ...) apply only if `options.manager` came from
  /// ManagerOptions::from_env (or NodeOptions::from_env); set ones it does not apply, and
  /// unknown CAF_RDMA_* names, are reported on stderr (actors/environment.h). TLS,
  /// CAF_RDMA_PLAINTEXT, CAF_RDMA_SCHEDULER and (unless options.metrics is enabled)
  /// CAF_RDMA_METRICS are read in any case. Errors name the step that failed.
  static Result<std::unique_ptr<RdmaNode>> start(const NodeOptions& options);
  /// Starts a node with the defaults and the whole environment applied (NodeOptions::from_env):
  /// loopback, a free port. A malformed variable is an error naming it.
  static Result<std::unique_ptr<RdmaNode>> start();

  /// Shuts the manager down, then the actor system.
  ~RdmaNode();

  caf::actor_system& system() { return *system_; }
  /// This node's manager, for this process's actors. Never send it to another node: other nodes
  /// reach this one through the facade it publishes (remote_manager), which the node's buffer
  /// handles name as their owner.
  const rdma_manager_actor& manager() const { return manager_; }
  uint16_t port() const { return port_; }
  /// "host:port" of this node's manager.
  std::string address() const;
  /// Whether this node speaks (mutual) TLS to other nodes.
  bool uses_tls() const { return tls_; }
  /// The port its metrics are served on (the one bound), 0 when metrics are off.
  uint16_t metrics_port() const { return metrics_ ? metrics_->port() : 0; }
  /// "http://host:port/metrics", "" when metrics are off.
  std::string metrics_url() const { return metrics_ ? metrics_->url() : ""; }

  /// The manager published at host:port (blocking; call from main() or a test thread, never
  /// from inside an actor), over TLS when this node uses it (actors/tls_transport.h: the TLS
  /// handshake completes, the peer showing a certificate of our CA, before CAF speaks). Errors:
  /// peer_unavailable naming host:port and the reason (a peer that refuses our certificate,
  /// shows another CA's, or speaks another protocol), timeout when nothing answers within
  /// connect_timeout. This node's own address gives manager() (programs that connect to every
  /// node of a list, their own included, get their manager).
  Result<rdma_manager_actor> remote_manager(const std::string& host, uint16_t port);

  /// Publishes the application's actor `handle` on this node's host at `port` (0: a free one,
  /// see the result) under the node's policy: over TLS when the node uses it (only processes
  /// with a certificate of the cluster's CA reach it, and the handles it sends travel
  /// encrypted), plaintext otherwise (loopback, or beyond it where NodeOptions allows
  /// plaintext). Errors name host:port. Blocking: call from main() or a test thread.
  template <class Handle>
  Result<uint16_t> publish(const Handle& handle, uint16_t port = 0) {
    return publish_ptr(caf::actor_cast<caf::strong_actor_ptr>(handle),
                       system_->message_types(handle), port, "an application actor");
  }
  /// The application actor published at host:port, reached under this node's policy (TLS when
  /// the node uses it) within `timeout` (0: connect_timeout): what connect_published does,
  /// for the node's own connections. Errors name `what` and host:port: peer_unavailable
  /// (refused, nothing published there, an actor of another type, a peer that turns our
  /// certificate away), timeout (no answer in time). Blocking: never from inside an actor.
  template <class Handle = caf::actor>
  Result<Handle> connect(const std::string& host, uint16_t port, const std::string& what,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    auto c = connect_ptr(host, port, what, timeout);
    if (!c.ok())
      return c.error();
    return detail::published_as<Handle>(*system_, std::move(*c), host, port, what);
  }

private:
  Result<uint16_t> publish_ptr(caf::strong_actor_ptr ptr, std::set<std::string> interfaces,
                               uint16_t port, const std::string& what);
  Result<std::pair<caf::strong_actor_ptr, std::set<std::string>>> connect_ptr(
      const std::string& host, uint16_t port, const std::string& what,
      std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  RdmaNode() = default;
  /// Stops the node's middleman actor, TLS or plain (the system would wait for it).
  void stop_connector();

  std::unique_ptr<caf::actor_system_config> config_;
  std::unique_ptr<caf::actor_system> system_;
  rdma_manager_actor manager_;
  std::string host_;
  uint16_t port_ = 0;
  bool tls_ = false;
  /// The middleman actor that publishes and connects: our own, with TLS (spawn_tls_middleman)
  /// or without (spawn_plain_middleman).
  caf::io::middleman_actor connector_;
  std::chrono::milliseconds connect_timeout_{30000};
  /// Serves the metrics (null when off); stopped before the manager and the system go.
  std::unique_ptr<MetricsExporter> metrics_;
};

/// What `sys.middleman().remote_actor<Handle>(host, port)` does (an application's own actor,
/// published with the plain middleman), but within `timeout` (a node's programs use
/// RdmaNode::connect, which also speaks TLS when the node does): CAF 0.17's remote_actor waits
/// without a bound, so a port that accepts TCP and never speaks CAF (a stopped process, another
/// protocol) would hang the caller. Blocking: call from main() or a test thread, never from an
/// actor. Errors name `what` and host:port: peer_unavailable (refused, nothing published there,
/// or an actor of another type), timeout (no answer within `timeout`).
template <class Handle = caf::actor>
Result<Handle> connect_published(caf::actor_system& sys, const std::string& host, uint16_t port,
                                 std::chrono::milliseconds timeout, const std::string& what) {
  auto c = detail::connect_published_ptr(sys, host, port, timeout, what);
  if (!c.ok())
    return c.error();
  return detail::published_as<Handle>(sys, std::move(*c), host, port, what);
}

/// True for "localhost", 127.0.0.0/8 and ::1.
bool is_loopback_host(const std::string& host);

/// Splits "host:port"; errors name the text.
Result<std::pair<std::string, uint16_t>> parse_host_port(const std::string& text);

}  // namespace caf_rdma
