// Telemetry (see telemetry.h).
#include "actors/manager/telemetry.h"

#include <algorithm>

#include "actors/transfer_checks.h"
#include "primitives/ibverbs_error.h"
#include "primitives/log.h"

namespace caf_rdma {

namespace {

/// The bucket of a latency: the first bound at or above it, else +Inf (the last).
size_t bucket_of(std::chrono::nanoseconds latency) {
  const double seconds = std::chrono::duration<double>(latency).count();
  size_t i = 0;
  while (i + 1 < kLatencyBuckets && seconds > kLatencyBounds[i])
    ++i;
  return i;
}

LatencyHistogram& histogram(std::map<std::tuple<std::string, uint8_t>, LatencyHistogram>& all,
                            const std::string& path, uint8_t kind) {
  auto& h = all[std::make_tuple(path, kind)];
  if (h.buckets.empty()) {
    h.path = path;
    h.kind = kind;
    h.buckets.assign(kLatencyBuckets, 0);
  }
  return h;
}

/// Adds `more`'s rows to `into`'s: rows of the same peer, path and kind add up.
void add_counts(std::vector<TrafficCount>& into, const std::vector<TrafficCount>& more) {
  for (const auto& t : more) {
    auto it = std::find_if(into.begin(), into.end(), [&](const TrafficCount& x) {
      return x.peer == t.peer && x.path == t.path && x.kind == t.kind;
    });
    if (it == into.end()) {
      into.push_back(t);
      continue;
    }
    it->ops += t.ops;
    it->bytes += t.bytes;
  }
}

}  // namespace

const std::string& PeerLabels::label(const std::string& peer) {
  static const std::string other = kOtherPeers;
  auto it = peers_.find(peer);
  if (it != peers_.end())
    return *it;
  if (peers_.size() >= kMaxTelemetryPeers)
    return other;  // invariant 4
  return *peers_.insert(peer).first;
}

void trace(const OpSample& s) {
  if (!log_enabled(LogLevel::kDebug))
    return;
  const bool read = is_read_kind(s.kind);
  const std::string kind = s.notify ? "notify write (tag " + std::to_string(s.tag) + ")"
                                    : std::string(kind_name(s.kind));
  const auto us = static_cast<unsigned long long>(s.latency.count() / 1000);
  if (s.ok)
    log_line(LogLevel::kDebug, "%s of %llu bytes %s %s via %s: done in %llu us%s", kind.c_str(),
             static_cast<unsigned long long>(s.bytes), read ? "from" : "to", s.peer.c_str(),
             s.path.c_str(), us, s.notify ? ", its owner notified" : "");
  else
    log_line(LogLevel::kDebug, "%s %s %s via %s: failed in %llu us: %s: %s", kind.c_str(),
             read ? "from" : "to", s.peer.c_str(), s.path.empty() ? "no path" : s.path.c_str(), us,
             to_string(s.code), s.message.c_str());
}

void Telemetry::record(const OpSample& s) {
  trace(s);
  const std::string& peer = peers_.label(s.peer);
  const std::string path = s.path.empty() ? kNoPath : s.path;
  if (s.ok) {
    auto& t = traffic_[std::make_tuple(peer, path, s.kind)];
    t.peer = peer;
    t.path = path;
    t.kind = s.kind;
    ++t.ops;
    t.bytes += s.bytes;
    auto& h = histogram(latencies_, path, s.kind);  // invariant 3: successes only
    ++h.buckets[bucket_of(s.latency)];
    ++h.count;
    h.sum_ns += static_cast<uint64_t>(std::max<int64_t>(0, s.latency.count()));
    return;
  }
  std::string code = to_string(s.code);
  std::string wc = wc_status_in(s.message);
  auto& e = errors_[std::make_tuple(peer, path, code, wc)];
  e.peer = peer;
  e.path = path;
  e.code = std::move(code);
  e.wc_status = std::move(wc);
  ++e.count;
}

ManagerTelemetry Telemetry::snapshot() const {
  ManagerTelemetry out;
  for (const auto& [key, t] : traffic_)
    out.traffic.push_back(t);
  for (const auto& [key, e] : errors_)
    out.errors.push_back(e);
  for (const auto& [key, h] : latencies_)
    out.latencies.push_back(h);
  return out;
}

void Telemetry::merge(ManagerTelemetry& into, const ManagerTelemetry& more) {
  add_counts(into.traffic, more.traffic);
  add_counts(into.served, more.served);
  for (const auto& e : more.errors) {
    auto it = std::find_if(into.errors.begin(), into.errors.end(), [&](const ErrorCount& x) {
      return x.peer == e.peer && x.path == e.path && x.code == e.code && x.wc_status == e.wc_status;
    });
    if (it == into.errors.end())
      into.errors.push_back(e);
    else
      it->count += e.count;
  }
  for (const auto& h : more.latencies) {
    auto it = std::find_if(
        into.latencies.begin(), into.latencies.end(),
        [&](const LatencyHistogram& x) { return x.path == h.path && x.kind == h.kind; });
    if (it == into.latencies.end()) {
      into.latencies.push_back(h);
      continue;
    }
    for (size_t i = 0; i < it->buckets.size() && i < h.buckets.size(); ++i)
      it->buckets[i] += h.buckets[i];
    it->count += h.count;
    it->sum_ns += h.sum_ns;
  }
}

}  // namespace caf_rdma
