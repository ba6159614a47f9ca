// MetricsExporter: serves a node's counters in the Prometheus text format over HTTP
// (GET http://HOST:PORT/metrics; prometheus-cpp's exposer over civetweb). Every scrape asks the
// manager for its stats (ManagerStats, with its telemetry) and reads the device's kernel
// counters (primitives/nic_counters.h): there is no second copy of the counters to drift.
//
// Invariants:
//  1. A scrape never hangs on the manager: its stats request has a timeout (scrape_timeout);
//     a manager that does not answer in time gives `caf_rdma_manager_up 0` and one more
//     `caf_rdma_scrape_errors_total`, not a stalled HTTP request.
//  2. Metrics are served beyond a loopback host only on a plaintext node given the same
//     opt-in its manager needs to publish beyond loopback (CAF_RDMA_PLAINTEXT=1 or
//     NodeOptions::allow_plaintext); under TLS (the node has credentials) never. The endpoint
//     speaks plain HTTP, without authentication: beyond loopback it shows the node's traffic
//     to anyone who reaches the port. A non-loopback host otherwise is refused at start,
//     naming the host and why.
//  5. A scrape is not held up by idle connections: kHttpThreads threads serve, and a
//     connection that sends no request within kHttpRequestTimeout is closed, so N silent
//     connections delay a scrape by at most about N / kHttpThreads such timeouts.
//  3. The exporter stops (its HTTP threads joined, a scrape in progress finished within its
//     timeout) before the actor system it asks goes: RdmaNode destroys it first.
//  4. The port is the one bound (port 0: the OS picks it); nothing is chosen before the bind.
#pragma once

#include <caf/actor_system.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "actors/rdma_manager_interface.h"
#include "primitives/status.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace caf_rdma {

/// `CAF_RDMA_METRICS=HOST:PORT`: serve the node's metrics there (PORT 0: a free one, see
/// RdmaNode::metrics_port()).
constexpr const char* kEnvMetrics = "CAF_RDMA_METRICS";

struct MetricsOptions {
  bool enabled = false;  ///< off by default
  /// The interface the HTTP endpoint binds; under TLS only a loopback one (invariant 2).
  std::string host = "127.0.0.1";
  uint16_t port = 0;  ///< 0: a free port (RdmaNode::metrics_port())
  /// How long a scrape waits for the manager's stats (invariant 1).
  std::chrono::milliseconds scrape_timeout{5000};

  /// Enabled options from "HOST:PORT" (PORT 0..65535, 0 picks one); invalid_argument naming
  /// `what` (the variable or flag that gave it) and the text.
  static Result<MetricsOptions> parse(const std::string& text, const std::string& what);
  /// CAF_RDMA_METRICS: disabled when unset or empty; a malformed value is an error naming it.
  static Result<MetricsOptions> from_env();
};

class MetricsExporter {
public:
  /// Invariant 5: HTTP threads, and how long one waits for a connection's request.
  static constexpr int kHttpThreads = 8;
  static constexpr std::chrono::milliseconds kHttpRequestTimeout{2000};

  /// Serves `manager`'s metrics on options.host:options.port. `tls`: the node speaks TLS;
  /// `plaintext_ok`: a plaintext node given the opt-in (invariant 2). Errors: invalid_argument
  /// (a non-loopback host where invariant 2 refuses it), peer_unavailable naming host:port
  /// when it cannot be bound.
  static Result<std::unique_ptr<MetricsExporter>> start(caf::actor_system& sys,
                                                        rdma_manager_actor manager,
                                                        const MetricsOptions& options, bool tls,
                                                        bool plaintext_ok = false);
  /// Stops serving: joins the HTTP threads (a scrape in progress ends within its timeout).
  ~MetricsExporter();
  MetricsExporter(const MetricsExporter&) = delete;
  MetricsExporter& operator=(const MetricsExporter&) = delete;

  /// The port bound.
  uint16_t port() const { return port_; }
  /// "http://host:port/metrics".
  std::string url() const;

  class Collector;  // the prometheus::Collectable each scrape asks (metrics_exporter.cc)

private:
  MetricsExporter() = default;

  std::shared_ptr<Collector> collector_;
  std::unique_ptr<prometheus::Exposer> exposer_;  // destroyed first: no scrape runs after
  std::string host_;
  uint16_t port_ = 0;
};

}  // namespace caf_rdma
