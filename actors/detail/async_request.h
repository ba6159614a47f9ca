// async_request: a request to a manager whose answer arrives later, as a std::future
// (RdmaClient's transfer_async and post_async).
//
// Invariants:
//  1. The future always gets a value: the answer, the request's error, or, when the manager
//     stops first (its node shuts down), peer_unavailable saying so; never a broken promise,
//     and a node's shutdown never waits for a pending request's timeout.
//  2. Each request has an actor of its own: the answer may come after the client that asked is
//     gone, and any thread may ask.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <utility>

#include "actors/rdma_errors.h"
#include "actors/rdma_manager_interface.h"
#include "primitives/status.h"

namespace caf_rdma::detail {

/// Asks `manager` (`xs`) and waits up to `wait` for its answer, a T; the future holds
/// `convert(Result<T>)`. `what` names the request in the error of a manager that stopped.
template <class T, class Convert, class... Ts>
auto async_request(caf::actor_system& sys, const rdma_manager_actor& manager,
                   std::chrono::milliseconds wait, const char* what, Convert convert, Ts... xs)
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
  sys.spawn([pending, manager, wait, xs...](caf::event_based_actor* self) {
    self->monitor(manager);
    self->set_down_handler([self, pending](caf::down_msg&) {
      pending->answer(Error(ErrorCode::kPeerUnavailable,
                            "the manager stopped before the " + pending->what + "'s reply came"));
      self->quit();
    });
    self->request(manager, wait, xs...)
        .then(
            [self, pending](T& reply) {
              pending->answer(std::move(reply));
              self->quit();
            },
            [self, pending](caf::error& err) {
              pending->answer(to_error(err));
              self->quit();
            });
  });
  return future;
}

}  // namespace caf_rdma::detail
