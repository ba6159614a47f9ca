// CancelToken: how a program stops one transfer it started, from any thread (issue 50's first
// slice). Made by the program, handed to one transfer (RdmaClient::read, write or post with a
// token); `cancel` asks it to stop and waits until it ended.
//
// Invariants:
//  1. A token serves one transfer: a second transfer handed the same token (or a copy of it)
//     is refused (invalid_argument) and moves nothing.
//  2. `cancel` answers only once the transfer answered (docs/guarantees.md, "Nothing lands
//     after the answer": none of its bytes moves into or out of the requester's memory any
//     more; the owner's memory as after a timeout), or says it cannot promise that yet
//     (kStillRunning, after `limit`): its answer is built from the transfer's own answer, so
//     the two never disagree (a cancel racing the transfer's completion answers kFinished with
//     the transfer's result, or kCancelled).
//  3. A transfer handed a token already cancelled answers `cancelled` and moves nothing.
//  4. Where a transfer can stop mid-way: RDMA over a client's direct lane (a single op, or a
//     list's op on the lane), whose queue pair is flushed before the answer (queue pair
//     invariant 6); the stream lane, over TCP or the owner's same-host endpoint, whose
//     connection is shut down and whose owner is heard ending its side before the answer
//     (components/stream_client.h invariant 8); a list also stops between its steps; a step the
//     manager moves is cancelled there (actors/cancel_request.h, manager invariant 24), which
//     answers `cancelled` or, where it cannot stop the op (an RDMA op on a queue pair that
//     other transfers use), the op's own answer (kFinished): cancel never claims more than
//     happened (docs/guarantees.md, "Cancel").
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "primitives/status.h"

namespace caf_rdma {

class StopSignal;

/// What `CancelToken::cancel` found.
struct CancelResult {
  enum class State : uint8_t {
    /// The token was not handed to a transfer yet: the one it is handed to answers
    /// `cancelled` and moves nothing (invariant 3).
    kNotStarted,
    /// The transfer stopped early and answered `cancelled` (`status`); `landed` and `bytes`
    /// are what is known to be in place (a list: ranges [0, landed)). Some bytes of the
    /// range it was moving may have landed; none lands after this answer.
    kCancelled,
    /// The transfer ended by itself (before the cancel reached it, or on a path that does not
    /// stop mid-way): `status` is its own answer.
    kFinished,
    /// Not ended within the cancel's limit: nothing is promised yet (ask again).
    kStillRunning,
  };
  State state = State::kNotStarted;
  Status status;
  uint64_t landed = 0;
  uint64_t bytes = 0;

  /// E.g. "cancelled: 12 ranges (49152 bytes) in place; cancelled: ..." (a single op: "0 bytes
  /// known in place").
  std::string to_string() const;
};

class RdmaClient;

class CancelToken {
public:
  CancelToken();

  /// Copies share the one transfer (a moved-from token stays usable: moves copy).
  CancelToken(const CancelToken&) = default;
  CancelToken& operator=(const CancelToken&) = default;
  ~CancelToken() = default;

  /// Asks the transfer to stop and waits, up to `limit` (at most a day), until it ended
  /// (invariant 2). Any thread, any number of times (once the transfer ended, every call
  /// answers the same). Never call it from an actor's handler: it blocks.
  CancelResult cancel(std::chrono::milliseconds limit = std::chrono::seconds(60)) const;
  /// Whether `cancel` was called.
  bool cancel_requested() const;

private:
  friend class RdmaClient;
  struct State;

  /// One transfer's use of a token (RdmaClient's): begun when made (invariant 1), ended once,
  /// by `end` or, should the transfer leave by an exception, by the destructor (kInternal), so
  /// that no cancel waits for an answer that will not come. Shares the token's state: the
  /// flag stays valid whatever the program does with its token.
  class Use {
  public:
    explicit Use(const CancelToken& token);
    ~Use();
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

    /// Invariant 1: the token serves another transfer (nothing may move).
    const Error* refused() const { return refused_ ? &*refused_ : nullptr; }
    /// Whether cancel was asked (invariant 3 when asked before anything moved).
    bool stopped() const;
    /// The signal the transfer's steps watch (and a blocked step arms its waker on).
    const StopSignal* signal() const { return signal_; }
    /// The transfer's answer, which `cancel` reports (invariant 2).
    void end(const Status& outcome, uint64_t landed, uint64_t bytes);

  private:
    std::shared_ptr<State> state_;
    std::optional<Error> refused_;
    const StopSignal* signal_ = nullptr;
    bool ended_ = false;
  };

  std::shared_ptr<State> state_;
};

}  // namespace caf_rdma
