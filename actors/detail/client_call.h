// How RdmaClient asks its manager (RdmaClient::call): every call leases a blocking actor of the
// client's pool (no other thread receives on it), spins for the answer during the busy-poll
// window, and asks another node's facade with a sealed question whose sealed answer alone counts
// (actors/peer_facade.h, invariant 6). Private to RdmaClient's sources (rdma_client.cc and
// rdma_client_lanes.cc), which both ask.
//
// Invariants:
//  1. A call's actor goes back to the pool only when no late answer can reach it (its request
//     was answered or ended by the answer's own error): else it is discarded with its lease.
//  2. Every call waits at most its timeout, and answers kInternal rather than nothing.
//  3. A call with a stop (call_until; only to this node's manager: another node's facade
//     serves no transfer) cancels its request once the stop is asked (cancel_request.h) and
//     still waits for the answer, which says how the request ended.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "actors/cancel_request.h"
#include "actors/rdma_client.h"
#include "actors/rdma_errors.h"
#include "actors/request_timer.h"
#include "components/secure_random.h"

namespace caf_rdma {
namespace detail {

/// An object from `idle` (or a new one from `make`) for one scope, given back after.
template <class T>
class Lease {
public:
  template <class Make>
  Lease(std::mutex& mu, std::vector<std::unique_ptr<T>>& idle, Make make) : mu_(mu), idle_(idle) {
    {
      std::lock_guard<std::mutex> guard(mu_);
      if (!idle_.empty()) {
        item_ = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    if (!item_)
      item_ = make();
  }
  ~Lease() {
    if (discard_)
      return;
    std::lock_guard<std::mutex> guard(mu_);
    idle_.push_back(std::move(item_));
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  T& operator*() const { return *item_; }
  /// Not given back: it goes with the lease (e.g. an actor a late answer may still reach).
  void discard() { discard_ = true; }

private:
  std::mutex& mu_;
  std::vector<std::unique_ptr<T>>& idle_;
  std::unique_ptr<T> item_;
  bool discard_ = false;
};

}  // namespace detail

template <class T, class... Ts>
Result<T> RdmaClient::call_until(std::chrono::milliseconds timeout, const StopSignal* stop,
                                 Ts&&... xs) {
  std::optional<Result<T>> out;
  if (Status alive = node_alive(); !alive.ok())  // nothing to ask (node_objects.h 2)
    return alive.error();
  // This call's own actor: no other thread receives on it.
  detail::Lease<caf::scoped_actor> lease(
      pool_mu_, idle_actors_, [this] { return std::make_unique<caf::scoped_actor>(sys_); });
  caf::scoped_actor& self = *lease;
  if (manager_.node() == sys_.node()) {
    // CAF's request timeout is armed only when the answer is not there after the busy-poll
    // window: a request answered within it wakes no timer thread (busy polling's point).
    const auto asked = std::chrono::steady_clock::now();
    auto handle = self->request(manager_, caf::infinite, std::forward<Ts>(xs)...);
    // Invariant 3: a stop cancels the request at the manager, which answers how it ended.
    CancelOnStop on_stop(stop, caf::actor_cast<caf::actor>(self), manager_, handle.id());
    auto on_value = [&](T& value) { out.emplace(std::move(value)); };
    auto on_error = [&](caf::error& err) {
      // No answer in time: the late one would wait in this actor's mailbox (and end busy
      // polling's spin at once on every later call): the actor is not pooled again.
      if (err == caf::sec::request_timeout)
        lease.discard();
      out.emplace(to_error(err));
    };
    if (spin_for_reply(self)) {
      // Something is in the mailbox, most likely the answer: take it if so, without waiting.
      caf::blocking_actor::accept_one_cond one;
      self->varargs_receive(
          one, handle.id(), on_value, on_error, caf::after(std::chrono::seconds(0)) >> [] {});
    }
    if (!out) {
      auto left = std::max(std::chrono::steady_clock::duration::zero(),
                           timeout - (std::chrono::steady_clock::now() - asked));
      // What request(timeout) arms: it takes the request's id (the handle holds the answer's).
      self->request_response_timeout(
          caf::duration{std::chrono::duration_cast<std::chrono::microseconds>(left)},
          caf::make_message_id(handle.id().request_id().integer_value()));
      receive_answer(self.ptr(), handle, on_value, on_error);
    }
  } else {
    // Another node's facade: the question goes sealed and only its sealed answer counts
    // (actors/peer_facade.h, invariant 6); whatever else arrives under its id is skipped.
    PeerNonce nonce;
    secure_random(&nonce, sizeof(nonce));
    const auto due = std::chrono::steady_clock::now() + timeout;
    const caf::node_id asked = manager_.node();
    auto handle = self->request(caf::actor_cast<caf::actor>(manager_), timeout,
                                caf::make_message(std::forward<Ts>(xs)..., nonce));
    while (!out) {
      handle.receive(
          [&](caf::error& err) {
            // Unsealed: only CAF's own timeout, once the deadline passed.
            if (err == caf::sec::request_timeout && std::chrono::steady_clock::now() >= due) {
              lease.discard();  // a late answer may still come to it
              out.emplace(to_error(err));
            }
          },
          caf::others >> [&](caf::message_view& view) -> caf::result<caf::message> {
            caf::message m = view.move_content_to_message();
            const auto* e = self->current_mailbox_element();
            const bool from_asked = e != nullptr && e->sender && e->sender->node() == asked;
            if (!from_asked || m.size() != 2 || !m.match_element<PeerNonce>(1))
              return caf::message{};
            const auto& n = m.get_as<PeerNonce>(1);
            if (((n.hi ^ nonce.hi) | (n.lo ^ nonce.lo)) != 0)
              return caf::message{};
            if (m.match_element<T>(0))
              out.emplace(m.get_as<T>(0));
            else if (m.match_element<caf::error>(0))
              out.emplace(to_error(m.get_as<caf::error>(0)));
            return caf::message{};
          });
    }
    cancel_request_timer(self.ptr(), handle.id());
  }
  if (!out)
    return Error(ErrorCode::kInternal, "no reply from the manager");
  return std::move(*out);
}

}  // namespace caf_rdma
