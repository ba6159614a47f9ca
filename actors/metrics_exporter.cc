// MetricsExporter (see metrics_exporter.h): the metric names, their labels and meanings are
// listed in docs/operations.md, "Metrics".
#include "actors/metrics_exporter.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <caf/all.hpp>

#include <atomic>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "actors/rdma_node.h"
#include "actors/transfer_checks.h"
#include "actors/version.h"
#include "primitives/nic_counters.h"

namespace caf_rdma {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<std::pair<std::string, std::string>>;

const char* kind_label(uint8_t kind) {
  return known_kind(kind) ? kind_name(kind) : "other";  // read, write, fetch-add, compare-swap
}

/// The families of one scrape, each made once by name.
class Families {
public:
  void add(const std::string& name, const char* help, MetricType type, const Labels& labels,
           double value) {
    ClientMetric m;
    for (const auto& [k, v] : labels)
      m.label.push_back(ClientMetric::Label{k, v});
    switch (type) {
      case MetricType::Counter:
        m.counter.value = value;
        break;
      case MetricType::Gauge:
        m.gauge.value = value;
        break;
      default:
        m.untyped.value = value;
        break;
    }
    family(name, help, type).metric.push_back(std::move(m));
  }
  void counter(const std::string& name, const char* help, const Labels& labels, double value) {
    add(name, help, MetricType::Counter, labels, value);
  }
  void gauge(const std::string& name, const char* help, const Labels& labels, double value) {
    add(name, help, MetricType::Gauge, labels, value);
  }
  void histogram(const std::string& name, const char* help, const Labels& labels,
                 const LatencyHistogram& h) {
    ClientMetric m;
    for (const auto& [k, v] : labels)
      m.label.push_back(ClientMetric::Label{k, v});
    m.histogram.sample_count = h.count;
    m.histogram.sample_sum = static_cast<double>(h.sum_ns) / 1e9;
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.buckets.size() && i < kLatencyBuckets; ++i) {
      cumulative += h.buckets[i];
      m.histogram.bucket.push_back(ClientMetric::Bucket{
          cumulative,
          i + 1 < kLatencyBuckets ? kLatencyBounds[i] : std::numeric_limits<double>::infinity()});
    }
    family(name, help, MetricType::Histogram).metric.push_back(std::move(m));
  }
  std::vector<MetricFamily> take() { return std::move(out_); }

private:
  MetricFamily& family(const std::string& name, const char* help, MetricType type) {
    auto it = index_.find(name);
    if (it != index_.end())
      return out_[it->second];
    index_.emplace(name, out_.size());
    MetricFamily f;
    f.name = name;
    f.help = help;
    f.type = type;
    out_.push_back(std::move(f));
    return out_.back();
  }

  std::vector<MetricFamily> out_;
  std::map<std::string, size_t> index_;
};

/// Per op: node totals and per-peer rows.
void add_telemetry(Families& f, const ManagerTelemetry& t) {
  std::map<std::pair<std::string, std::string>, std::pair<uint64_t, uint64_t>> by_path;
  for (const auto& r : t.traffic) {
    const std::string kind = kind_label(r.kind);
    auto& total = by_path[{r.path, kind}];
    total.first += r.ops;
    total.second += r.bytes;
    f.counter("caf_rdma_peer_transfer_ops_total",
              "Transfer ops that succeeded, by the remote buffer's owner, path and kind",
              {{"peer", r.peer}, {"path", r.path}, {"kind", kind}}, static_cast<double>(r.ops));
    f.counter("caf_rdma_peer_transfer_bytes_total",
              "Bytes moved by transfer ops that succeeded, by the remote buffer's owner, path "
              "and kind",
              {{"peer", r.peer}, {"path", r.path}, {"kind", kind}}, static_cast<double>(r.bytes));
  }
  for (const auto& [key, total] : by_path) {
    f.counter("caf_rdma_transfer_ops_total", "Transfer ops that succeeded, by path and kind",
              {{"path", key.first}, {"kind", key.second}}, static_cast<double>(total.first));
    f.counter("caf_rdma_transfer_bytes_total",
              "Bytes moved by transfer ops that succeeded, by path and kind",
              {{"path", key.first}, {"kind", key.second}}, static_cast<double>(total.second));
  }
  std::map<std::pair<std::string, std::string>, uint64_t> by_code;
  std::map<std::string, uint64_t> by_status;
  std::map<std::pair<std::string, std::string>, uint64_t> peer_status;
  for (const auto& e : t.errors) {
    by_code[{e.path, e.code}] += e.count;
    f.counter("caf_rdma_peer_transfer_errors_total",
              "Transfer ops that failed, by the remote buffer's owner, path (none: refused "
              "before one was chosen) and error code",
              {{"peer", e.peer}, {"path", e.path}, {"code", e.code}, {"status", e.wc_status}},
              static_cast<double>(e.count));
    if (!e.wc_status.empty()) {
      by_status[e.wc_status] += e.count;
      peer_status[{e.peer, e.wc_status}] += e.count;
    }
  }
  for (const auto& [key, n] : by_code)
    f.counter("caf_rdma_transfer_errors_total",
              "Transfer ops that failed, by path (none: refused before one was chosen) and error "
              "code",
              {{"path", key.first}, {"code", key.second}}, static_cast<double>(n));
  for (const auto& [status, n] : by_status)
    f.counter("caf_rdma_work_completion_errors_total",
              "Transfer ops that failed with a work-completion error, by its status",
              {{"status", status}}, static_cast<double>(n));
  for (const auto& h : t.latencies)
    f.histogram("caf_rdma_transfer_latency_seconds",
                "Latency of the transfer ops that succeeded, from request to reply, by path and "
                "kind",
                {{"path", h.path}, {"kind", kind_label(h.kind)}}, h);
  for (const auto& c : t.classes) {
    const Labels labels{{"class", c.priority}};
    f.counter("caf_rdma_class_transfer_ops_total",
              "Transfer ops that succeeded, by priority class (latency, bulk, background)", labels,
              static_cast<double>(c.ops));
    f.counter("caf_rdma_class_transfer_bytes_total",
              "Bytes moved by transfer ops that succeeded, by priority class", labels,
              static_cast<double>(c.bytes));
    f.counter("caf_rdma_class_transfer_errors_total", "Transfer ops that failed, by priority class",
              labels, static_cast<double>(c.errors));
    f.histogram("caf_rdma_class_transfer_latency_seconds",
                "Latency of the transfer ops that succeeded, from request to reply, by priority "
                "class",
                labels, c.latency);
  }
  f.gauge("caf_rdma_stream_grants", "Stream grants made as owner and not yet used or withdrawn", {},
          static_cast<double>(t.stream_grants));
  f.gauge("caf_rdma_staging_buffers_busy", "Bounce buffers (rdma-staged) an op holds now", {},
          static_cast<double>(t.staging_busy));
  f.gauge("caf_rdma_staging_buffers", "Bounce buffers (rdma-staged) made", {},
          static_cast<double>(t.staging_buffers));
  f.gauge("caf_rdma_registered_bytes",
          "Bytes of the live buffers registered with the manager (pinned or not)", {},
          static_cast<double>(t.buffer_bytes));
  // As owner (served_ledger.h): what the peers' requests took, where the owner's CPU saw them.
  for (const auto& r : t.served) {
    const Labels labels{{"peer", r.peer}, {"path", r.path}, {"kind", kind_label(r.kind)}};
    f.counter("caf_rdma_served_requests_total",
              "As owner: peers' requests served, by requester, path (chunks, stream, same-host) "
              "and kind; one per CAF chunk, atomic, or stream request (a list is one); RDMA ops "
              "pass the owner's CPU by and are not counted",
              labels, static_cast<double>(r.ops));
    if (!is_atomic_kind(r.kind))
      f.counter("caf_rdma_served_bytes_total",
                "As owner: bytes of peers' requests served, by requester, path (chunks, stream, "
                "same-host) and kind (atomics move no data: not counted)",
                labels, static_cast<double>(r.bytes));
  }
}

/// ManagerStats's counters and levels.
void add_stats(Families& f, const ManagerStats& s) {
  f.gauge(
      "caf_rdma_build_info",
      "1 on every scrape the manager answers: caf-rdma's version, the CAF it runs on, the "
      "manager's transport and device (\"\" without one)",
      {{"version", kVersion},
       {"caf_version", std::to_string(CAF_MAJOR_VERSION) + "." + std::to_string(CAF_MINOR_VERSION) +
                           "." + std::to_string(CAF_PATCH_VERSION)},
       {"transport", s.transport},
       {"device", s.device}},
      1);
  const bool up = !s.device.empty() && s.no_rdma_reason.empty();
  f.gauge("caf_rdma_device_up",
          "1 while transfers can use the RDMA device (device: its name, \"\" without one)",
          {{"device", s.device}, {"transport", s.transport}}, up ? 1 : 0);
  f.gauge("caf_rdma_queue_pairs", "Live queue pairs of the manager with its peers", {},
          static_cast<double>(s.live_qps));
  f.gauge("caf_rdma_direct_lanes", "Direct lanes open, opened here and accepted from peers", {},
          static_cast<double>(s.lanes));
  f.gauge("caf_rdma_registered_buffers", "Live buffers registered with the manager", {},
          static_cast<double>(s.registered_buffers));
  f.gauge("caf_rdma_pinned_bytes", "Bytes in live memory regions of the RDMA device", {},
          static_cast<double>(s.registered_bytes));
  f.gauge("caf_rdma_busy_buffers", "Local buffers a transfer or a direct lane is using now", {},
          static_cast<double>(s.busy_buffers));
  f.gauge("caf_rdma_window_bytes",
          "As owner: bytes of fetch answers served to peers and not yet proven read", {},
          static_cast<double>(s.window_bytes));
  f.gauge("caf_rdma_fetches_waiting", "As owner: fetches waiting for a window to open", {},
          static_cast<double>(s.fetches_waiting));
  f.gauge("caf_rdma_notices_pending", "As owner: write notices waiting for their watchers' answers",
          {}, static_cast<double>(s.notices_pending));
  // One HELP per counter, saying what it counts (ManagerStats, actors/rdma_messages.h).
  struct Counter {
    const char* name;
    const char* help;
    uint64_t value;
  };
  const Counter counters[] = {
      {"caf_rdma_handshakes_total", "Queue-pair handshakes this manager completed with peers",
       s.handshakes},
      {"caf_rdma_served_fallback_bytes_total",
       "As owner: bytes served to peers on the fallback (CAF chunks, stream grants and requests "
       "by handle)",
       s.served_fallback_bytes},
      {"caf_rdma_stream_ops_total",
       "As requester: fallback ops moved over an owner's stream channel (TCP or same-host)",
       s.stream_ops},
      {"caf_rdma_stream_refused_total",
       "As requester: fallback ops whose stream the owner refused before taking it, moved in CAF "
       "chunks instead",
       s.stream_refused},
      {"caf_rdma_stream_grants_asked_total",
       "As requester: stream grants asked of owners (the first stream op to each owner, notify "
       "writes, ops an owner would not take by handle); the other stream ops went by handle",
       s.stream_grants_asked},
      {"caf_rdma_same_host_ops_total",
       "As requester: stream ops moved over the owner's same-host endpoint instead of TCP",
       s.same_host_ops},
      {"caf_rdma_direct_ops_total", "RDMA ops run by clients' direct lanes, not by the manager",
       s.direct_ops},
      {"caf_rdma_staged_chunks_total",
       "Chunks of rdma-staged transfers (GPU memory) moved through bounce buffers",
       s.staged_chunks},
      {"caf_rdma_staged_pieces_total",
       "Rdma-staged transfers of one chunk or less gathered into a shared bounce buffer",
       s.staged_pieces},
      {"caf_rdma_links_lost_total", "Links to peer managers lost while the peer may live",
       s.links_lost},
      {"caf_rdma_reconnects_total", "Links to a peer manager made again after one was lost",
       s.reconnects},
      {"caf_rdma_notices_sent_total", "As owner: write notices sent to this node's watchers",
       s.notices_sent},
      {"caf_rdma_notices_refused_total",
       "As owner: write notices refused (nobody watches the buffer, too many waiting)",
       s.notices_refused},
      {"caf_rdma_notified_writes_total",
       "As writer: notify writes whose owner confirmed it sent the notice", s.notified_writes},
      {"caf_rdma_striped_ops_total", "RDMA ops split in slices over several queue pairs",
       s.striped_ops},
      {"caf_rdma_stripe_slices_total", "Slices of striped RDMA ops", s.stripe_slices},
      {"caf_rdma_stripe_failovers_total",
       "Slices a failed rail handed to the primary device's queue pair", s.stripe_failovers},
      {"caf_rdma_spread_ops_total",
       "Smaller RDMA ops run whole on a striping queue pair with fewer ops pending", s.spread_ops},
      {"caf_rdma_device_losses_total", "Times the RDMA device went away while this manager used it",
       s.device_losses},
      {"caf_rdma_device_reopens_total", "Times the RDMA device was opened again after a loss",
       s.device_reopens},
      {"caf_rdma_facade_dropped_total",
       "Messages from the network the facade dropped (answers nobody was owed, refusals it could "
       "not send back)",
       s.facade_dropped},
      {"caf_rdma_forged_answers_total",
       "Answers to this node's peer requests dropped as forged (no seal, or from another node)",
       s.forged_answers},
  };
  for (const Counter& c : counters)
    f.counter(c.name, c.help, {}, static_cast<double>(c.value));
}

/// The device's kernel counters, read now (primitives/nic_counters.h).
void add_nic_counters(Families& f, const std::string& device) {
  auto counters = read_nic_counters(device);
  if (!counters.ok())
    return;  // a device without sysfs counters (or gone): nothing to show
  for (const auto& c : *counters)
    f.add("caf_rdma_nic_counter",
          "The kernel's counters of the RDMA device's ports (sysfs counters/ and hw_counters/)",
          MetricType::Untyped,
          {{"device", device}, {"port", c.port}, {"group", c.group}, {"name", c.name}},
          static_cast<double>(c.value));
}

}  // namespace

class MetricsExporter::Collector : public prometheus::Collectable {
public:
  Collector(caf::actor_system& sys, rdma_manager_actor manager, std::chrono::milliseconds timeout)
      : sys_(sys), manager_(std::move(manager)), timeout_(timeout) {}

  std::vector<MetricFamily> Collect() const override {
    Families f;
    std::optional<ManagerStats> stats;
    std::string why;
    {
      caf::scoped_actor self{sys_};
      self->request(caf::actor_cast<caf::actor>(manager_), timeout_, stats_atom::value)
          .receive([&](ManagerStats& s) { stats = std::move(s); },
                   [&](caf::error& e) { why = sys_.render(e); });
    }
    if (!stats)
      errors_.fetch_add(1, std::memory_order_relaxed);  // invariant 1
    f.gauge("caf_rdma_manager_up", "1 when the manager answered this scrape's stats request", {},
            stats ? 1 : 0);
    f.counter("caf_rdma_scrape_errors_total",
              "Scrapes whose stats request the manager did not answer in time", {},
              static_cast<double>(errors_.load(std::memory_order_relaxed)));
    if (stats) {
      add_stats(f, *stats);
      add_telemetry(f, stats->telemetry);
      if (!stats->device.empty())
        add_nic_counters(f, stats->device);
    }
    return f.take();
  }

private:
  caf::actor_system& sys_;
  rdma_manager_actor manager_;
  std::chrono::milliseconds timeout_;
  mutable std::atomic<uint64_t> errors_{0};
};

Result<MetricsOptions> MetricsOptions::parse(const std::string& text, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return Error(ErrorCode::kInvalidArgument, what + "='" + text + "' " + why +
                                                  " (HOST:PORT, e.g. 127.0.0.1:9464; PORT 0 "
                                                  "picks a free one)");
  };
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return bad("is not HOST:PORT");
  const std::string port = text.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return bad("has no port number");
  const unsigned long p = std::strtoul(port.c_str(), nullptr, 10);
  if (p > 65535)
    return bad("has a port beyond 65535");
  MetricsOptions o;
  o.enabled = true;
  o.host = text.substr(0, colon);
  // "[::1]:9464": civetweb takes the brackets; our loopback check does not.
  if (o.host.size() > 2 && o.host.front() == '[' && o.host.back() == ']')
    o.host = o.host.substr(1, o.host.size() - 2);
  o.port = static_cast<uint16_t>(p);
  return o;
}

Result<MetricsOptions> MetricsOptions::from_env() {
  const char* value = std::getenv(kEnvMetrics);
  if (value == nullptr || *value == '\0')
    return MetricsOptions{};
  return parse(value, kEnvMetrics);
}

Result<std::unique_ptr<MetricsExporter>> MetricsExporter::start(caf::actor_system& sys,
                                                                rdma_manager_actor manager,
                                                                const MetricsOptions& options,
                                                                bool tls, bool plaintext_ok) {
  const std::string where = options.host + ":" + std::to_string(options.port);
  // Invariant 2.
  const std::string loopback_only = "; reach it through an SSH tunnel or a local agent)";
  if (tls && !is_loopback_host(options.host))
    return Error(ErrorCode::kInvalidArgument,
                 "refusing to serve metrics on " + where +
                     ": this node uses TLS and its metrics endpoint speaks plain HTTP without "
                     "authentication, so it is served only on a loopback host (e.g. 127.0.0.1:" +
                     std::to_string(options.port) + loopback_only);
  if (!tls && !plaintext_ok && !is_loopback_host(options.host))
    return Error(ErrorCode::kInvalidArgument,
                 "refusing to serve metrics on " + where +
                     ": its endpoint speaks plain HTTP without authentication, served beyond "
                     "loopback only with the opt-in a plaintext node needs to publish there (" +
                     std::string(kEnvPlaintext) +
                     "=1 or NodeOptions::allow_plaintext); else on a loopback host (e.g. "
                     "127.0.0.1:" +
                     std::to_string(options.port) + loopback_only);
  std::unique_ptr<MetricsExporter> e(new MetricsExporter());
  e->collector_ = std::make_shared<Collector>(sys, std::move(manager), options.scrape_timeout);
  const bool v6 = options.host.find(':') != std::string::npos;
  const std::string bind =
      (v6 ? "[" + options.host + "]" : options.host) + ":" + std::to_string(options.port);
  try {
    // Invariant 5: civetweb's threads, and its wait for a request on each connection.
    e->exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", bind, "num_threads", std::to_string(kHttpThreads), "request_timeout_ms",
        std::to_string(kHttpRequestTimeout.count())});
  } catch (const std::exception& ex) {
    return Error(ErrorCode::kPeerUnavailable,
                 "cannot serve metrics on " + where + ": " + ex.what());
  }
  e->exposer_->RegisterCollectable(e->collector_);
  auto ports = e->exposer_->GetListeningPorts();
  if (ports.empty() || ports.front() <= 0)
    return Error(ErrorCode::kInternal, "the metrics endpoint on " + where + " reports no port");
  e->host_ = options.host;
  e->port_ = static_cast<uint16_t>(ports.front());
  return e;
}

MetricsExporter::~MetricsExporter() = default;

std::string MetricsExporter::url() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_) + "/metrics";
}

}  // namespace caf_rdma
