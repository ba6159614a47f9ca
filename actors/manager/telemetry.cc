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

/// Counts one success of `latency` in `h`.
void add_latency(LatencyHistogram& h, std::chrono::nanoseconds latency) {
  ++h.buckets[bucket_of(latency)];
  ++h.count;
  h.sum_ns += static_cast<uint64_t>(std::max<int64_t>(0, latency.count()));
}

/// Adds `more`'s counts to `into`'s.
void add_histogram(LatencyHistogram& into, const LatencyHistogram& more) {
  if (into.buckets.size() < more.buckets.size())
    into.buckets.resize(more.buckets.size(), 0);
  for (size_t i = 0; i < more.buckets.size(); ++i)
    into.buckets[i] += more.buckets[i];
  into.count += more.count;
  into.sum_ns += more.sum_ns;
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

OpSample sample_of(const TransferOp& op) {
  OpSample s;
  s.peer = op.remote.owner_name;
  s.kind = op.kind;
  s.notify = op.notify;
  s.tag = op.tag;
  s.priority = op.priority;
  return s;
}

void Telemetry::record(const OpSample& s) {
  trace(s);
  {  // invariant 7
    const Priority p = priority_from_wire(s.priority).value_or(Priority::kBulk);
    ClassCount& c = classes_[urgency(p)];
    if (c.priority.empty()) {
      c.priority = priority_name(p);
      c.latency.buckets.assign(kLatencyBuckets, 0);
    }
    if (s.ok) {
      ++c.ops;
      c.bytes += s.bytes;
      add_latency(c.latency, s.latency);
    } else {
      ++c.errors;
    }
  }
  const std::string& peer = peers_.label(s.peer);
  const std::string path = s.path.empty() ? kNoPath : s.path;
  if (s.ok) {
    auto& t = traffic_[std::make_tuple(peer, path, s.kind)];
    t.peer = peer;
    t.path = path;
    t.kind = s.kind;
    ++t.ops;
    t.bytes += s.bytes;
    add_latency(histogram(latencies_, path, s.kind), s.latency);  // invariant 3: successes only
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
  for (const auto& [key, c] : classes_)
    out.classes.push_back(c);
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
    if (it == into.latencies.end())
      into.latencies.push_back(h);
    else
      add_histogram(*it, h);
  }
  for (const auto& c : more.classes) {
    auto it = std::find_if(into.classes.begin(), into.classes.end(),
                           [&](const ClassCount& x) { return x.priority == c.priority; });
    if (it == into.classes.end()) {
      into.classes.push_back(c);
      continue;
    }
    it->ops += c.ops;
    it->bytes += c.bytes;
    it->errors += c.errors;
    add_histogram(it->latency, c.latency);
  }
  std::sort(into.classes.begin(), into.classes.end(), [](const ClassCount& a, const ClassCount& b) {
    return urgency(parse_priority(a.priority).value_or(Priority::kBulk)) <
           urgency(parse_priority(b.priority).value_or(Priority::kBulk));
  });
}

}  // namespace caf_rdma
