// Whether a node has a direct connection to this one, as the middleman's routing table says:
// no peer writes that table (a BASP down message can kill a proxy, not a connection), while a
// node id a message states may be one its sender invented (CAF 0.17's BASP routes messages of
// other nodes through a peer and does not check their ids). The one place the manager asks
// it: fetch windows (fetch_windows.h invariants 3-4) and write notices (write_notices.h
// invariant 17) share out what nodes not directly connected may hold by its answer, and a
// queue-pair handshake over a new link is taken only from a directly connected node
// (qp_handshakes.h).
#pragma once

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include "actors/rdma_errors.h"

#include <chrono>

namespace caf_rdma::detail {

/// Asks `self`'s middleman whether `node` is directly connected; `answered(caf::expected<bool>)`
/// runs with its answer, or with the error when there is none (no middleman, or no answer
/// within `timeout`).
template <class Self, class F>
void ask_direct_link(Self self, const caf::node_id& node, F answered,
                     std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  if (!self->system().has_middleman())
    return answered(caf::expected<bool>(
        make_rdma_error(ErrorCode::kInternal, "this actor system has no middleman")));
  self->request(self->system().middleman().actor_handle(), timeout, caf::get_atom::value, node)
      .then([answered](const caf::node_id&, const std::string&,
                       uint16_t port) mutable { answered(caf::expected<bool>(port != 0)); },
            [answered](caf::error& err) mutable { answered(caf::expected<bool>(std::move(err))); });
}

}  // namespace caf_rdma::detail
