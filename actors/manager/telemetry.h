// Telemetry: what the manager counts per op for its metrics (actors/metrics_exporter.h): bytes
// and ops by peer, path and kind, errors by ErrorCode and work-completion status, latencies by
// path and kind. The manager keeps one (fed at its reply point, reply_point.cc) and its direct
// lanes share another (DirectRegistry, fed by DirectLane); `stats` answers both, merged, in
// ManagerStats::telemetry.
//
// Invariants:
//  1. Every op is recorded once, as it ends: a manager's op at the one reply point (manager
//     invariant 5), a direct lane's op when its result is in (or its checks refused it).
//  2. Rows only grow (Prometheus counters never go down); no row is removed while the manager
//     lives.
//  3. A latency histogram counts the successful ops of its path and kind: its count equals
//     the sum of their TrafficCount::ops over all peers.
//  4. Bounded: at most kMaxTelemetryPeers peers are named; ops with any other peer are counted
//     under kOtherPeers (a handle's owner name is a peer's text: it must not grow our tables).
//  5. Not thread-safe: the manager uses its own from its actor only; DirectRegistry guards its
//     one with its mutex.
//  6. At CAF_RDMA_LOG=debug, every op recorded is also traced: one line with its kind, bytes,
//     peer, path and time, or its error (trace).
//  7. Every op also counts in its priority class's row (ManagerTelemetry::classes): ops and
//     bytes of its successes, its failures, and the successes' latencies (as in invariant 3).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "actors/rdma_messages.h"

namespace caf_rdma {

/// Peers named in telemetry (invariant 4), and the name of all the others.
constexpr size_t kMaxTelemetryPeers = 256;
constexpr const char* kOtherPeers = "other";
/// The path label of an op that failed before a path was chosen (its checks refused it).
constexpr const char* kNoPath = "none";

/// How one op ended, as telemetry records it.
struct OpSample {
  std::string peer;     ///< the remote buffer's owner name (BufferHandle::owner_name)
  std::string path;     ///< reply path; "" (kNoPath) when none was chosen
  uint8_t kind = 0;     ///< TransferKind
  bool notify = false;  ///< a notify write (TransferOp::notify), with its tag
  uint64_t tag = 0;
  uint8_t priority = 0;  ///< its class's wire value (TransferOp::priority)
  bool ok = false;
  uint64_t bytes = 0;                     ///< moved (successes)
  ErrorCode code = ErrorCode::kInternal;  ///< of a failure
  std::string message;  ///< of a failure: its work-completion status is read from it
  std::chrono::nanoseconds latency{0};
};

/// A sample of `op` (peer, kind, notify, tag, class); the caller fills in how it ended.
OpSample sample_of(const TransferOp& op);

/// The debug line of one op (invariant 6); nothing below debug level.
void trace(const OpSample& s);

/// Invariant 4: the peers a table names, at most kMaxTelemetryPeers; any other is kOtherPeers.
/// Not thread-safe (its user guards it).
class PeerLabels {
public:
  /// `peer` itself while fewer than kMaxTelemetryPeers are named (or it is one), else
  /// kOtherPeers.
  const std::string& label(const std::string& peer);

private:
  std::set<std::string> peers_;
};

class Telemetry {
public:
  /// Invariants 1-4.
  void record(const OpSample& s);
  /// Everything recorded so far.
  ManagerTelemetry snapshot() const;
  /// Adds `more`'s rows to `into`'s (rows of the same labels add up).
  static void merge(ManagerTelemetry& into, const ManagerTelemetry& more);

private:
  PeerLabels peers_;
  std::map<std::tuple<std::string, std::string, uint8_t>, TrafficCount> traffic_;
  std::map<std::tuple<std::string, std::string, std::string, std::string>, ErrorCount> errors_;
  std::map<std::tuple<std::string, uint8_t>, LatencyHistogram> latencies_;
  std::map<size_t, ClassCount> classes_;  ///< by urgency (invariant 7)
};

}  // namespace caf_rdma
