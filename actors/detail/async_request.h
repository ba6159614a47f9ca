// async_request: a request to a manager whose answer arrives later, as a std::future
// (RdmaClient's transfer_async and post_async).
//
// Invariants:
//  1. The future always gets a value: the answer, the request's error, or, when the manager
//     stops first (its node shuts down), peer_unavailable saying so; never a broken promise,
//     and a node's shutdown never waits for a pending request's timeout.
//  2. Each request has an actor of its own: the answer may come after the client that asked is
//     gone, and any thread may ask.
//  3. A request asked with a stop signal (a CancelToken's) is cancelled at the manager once the
//     signal is asked, until its answer (cancel_request.h, CancelOnStop); the answer is still
//     the only one the future gets.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <utility>

#include "actors/cancel_request.h"
#include "actors/rdma_errors.h"
#include "actors/rdma_manager_interface.h"
#include "primitives/status.h"

namespace caf_rdma::detail {

/// Asks `manager` (`xs`) and waits up to `wait` for its answer, a T; the future holds
/// `convert(Result<T>)` (called exactly once). `what` names the request in the error of a
/// manager that stopped. `stop`: null, or a signal that cancels the request (invariant 3); it
/// must live until convert was called.
template <class T, class Convert, class... Ts>
auto async_request_until(caf::actor_system& sys, const rdma_manager_actor& manager,
                         std::chrono::milliseconds wait, const char* what, const StopSignal* stop,
                         Convert convert, Ts... xs)
    -> std::future<decltype(convert(std::declval<Result<T>>()))> {
  using R = decltype(convert(std::declval<Result<T>>()));
  struct Pending {
    Pending(Convert c, std::string w) : convert(std::move(c)), what(std::move(w)) {}
    std::promise<R> promise;
    Convert convert;
    std::string what;
    bool answered = false;
    void answer(Result<T> r) {
      if (answered)
        return;
      answered = true;
      promise.set_value(convert(std::move(r)));
    }
    ~Pending() {
      answer(Error(ErrorCode::kPeerUnavailable,
                   "the node stopped before the " + what + "'s reply came"));
    }
  };
  auto pending = std::make_shared<Pending>(std::move(convert), what);
  auto future = pending->promise.get_future();
  sys.spawn([pending, manager, wait, stop, xs...](caf::event_based_actor* self) {
    // Invariant 3: armed from the request to its answer.
    auto cancel_on_stop = std::make_shared<std::unique_ptr<CancelOnStop>>();
    // Its CancelOnStop holds this actor: let go of it however the actor ends.
    self->attach_functor([cancel_on_stop] { cancel_on_stop->reset(); });
    auto settle = [self, pending, cancel_on_stop](Result<T> r) {
      cancel_on_stop->reset();  // disarmed before the answer: no cancel after it
      pending->answer(std::move(r));
      self->quit();
    };
    self->monitor(manager);
    self->set_down_handler([settle, pending](caf::down_msg&) {
      settle(Error(ErrorCode::kPeerUnavailable,
                   "the manager stopped before the " + pending->what + "'s reply came"));
    });
    auto handle = self->request(manager, wait, xs...);
    if (stop != nullptr)
      *cancel_on_stop = std::make_unique<CancelOnStop>(stop, caf::actor_cast<caf::actor>(self),
                                                       manager, handle.id());
    std::move(handle).then([settle](T& reply) { settle(std::move(reply)); },
                           [settle](caf::error& err) { settle(to_error(err)); });
  });
  return future;
}

/// A future that holds `value` already: an answer given before anything was asked.
template <class R>
std::future<R> ready_future(R value) {
  std::promise<R> now;
  now.set_value(std::move(value));
  return now.get_future();
}

/// async_request_until without a stop signal.
template <class T, class Convert, class... Ts>
auto async_request(caf::actor_system& sys, const rdma_manager_actor& manager,
                   std::chrono::milliseconds wait, const char* what, Convert convert, Ts... xs)
    -> std::future<decltype(convert(std::declval<Result<T>>()))> {
  return async_request_until<T>(sys, manager, wait, what, nullptr, std::move(convert),
                                std::move(xs)...);
}

}  // namespace caf_rdma::detail
