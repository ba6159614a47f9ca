// cancel_request (see cancel_request.h).
#include "actors/cancel_request.h"

#include <caf/send.hpp>

#include <utility>

namespace caf_rdma {

void cancel_request(const caf::actor& requester, const rdma_manager_actor& manager,
                    caf::message_id request) {
  // Invariant 2: from the requester, at normal priority, behind its request.
  caf::send_as(requester, manager, cancel_atom::value, request.request_id().integer_value());
}

CancelOnStop::CancelOnStop(const StopSignal* stop, caf::actor requester, rdma_manager_actor manager,
                           caf::message_id request)
    : requester_(std::move(requester)),
      manager_(std::move(manager)),
      request_(request),
      armed_(stop, [this] { cancel_request(requester_, manager_, request_); }) {}

}  // namespace caf_rdma
