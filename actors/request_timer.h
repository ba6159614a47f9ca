// Request timers of blocking actors (RdmaClient's and KvSession's scoped_actors). No state.
//
// CAF 0.17 never cancels the timer a request's timeout arms: a blocking actor whose request
// was answered still receives the timer's request_timeout error when it fires, and keeps it in
// its mailbox for good (a blocking actor skips answers it does not await, and never drops
// them). Measured with CAF 0.17.6: 1,000 answered requests with a 100 ms timeout left 1,000
// messages in the mailbox 400 ms later. A scoped_actor that lives for many requests would grow
// without bound, rescan them at each receive, and (busy polling) find its mailbox never empty.
//
// Invariant: every blocking request that armed a timer, from an actor that lives on for other
// requests, ends with cancel_request_timer once its answer (or its timeout) is in
// (receive_answer does both). A scoped_actor made for one request needs nothing: what comes
// after it is gone is dropped.
#pragma once

#include <caf/blocking_actor.hpp>
#include <caf/message_id.hpp>

#include <utility>

namespace caf_rdma {

/// Ends the timer of the request whose answer id is `answer` (a no-op once it fired).
inline void cancel_request_timer(caf::blocking_actor* self, caf::message_id answer) {
  self->clock().cancel_request_timeout(self, answer);
}

/// `handle.receive(handlers...)` for a request `self` made, then its timer's end:
/// receive_answer(self.ptr(), self->request(dest, timeout, xs...), on_value, on_error).
template <class Handle, class... Handlers>
void receive_answer(caf::blocking_actor* self, Handle handle, Handlers&&... handlers) {
  handle.receive(std::forward<Handlers>(handlers)...);
  cancel_request_timer(self, handle.id());
}

}  // namespace caf_rdma
