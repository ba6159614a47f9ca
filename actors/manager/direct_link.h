// Whether a node has a direct connection to this one, as the middleman's routing table says:
// no peer writes that table (a BASP down message can kill a proxy, not a connection), while a
// node id a message states may be one its sender invented (CAF 0.17's BASP routes messages of
// other nodes through a peer and does not check their ids). The one place the manager asks
// it: fetch windows (fetch_windows.h invariants 3-4) and write notices (write_notices.h
// invariant 17) share out what nodes not directly connected may hold by its answer.
#pragma once

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include <chrono>
#include <optional>

namespace caf_rdma::detail {

/// Asks `self`'s middleman whether `node` is directly connected; `answered(std::optional<bool>)`
/// runs with its answer, or with nothing when there is none (no middleman, or no answer within
/// 30 s).
template <class Self, class F>
void ask_direct_link(Self self, const caf::node_id& node, F answered) {
  if (!self->system().has_middleman())
    return answered(std::optional<bool>{});
  self->request(self->system().middleman().actor_handle(), std::chrono::seconds(30),
                caf::get_atom::value, node)
      .then([answered](const caf::node_id&, const std::string&,
                       uint16_t port) mutable { answered(std::optional<bool>(port != 0)); },
            [answered](caf::error&) mutable { answered(std::optional<bool>{}); });
}

}  // namespace caf_rdma::detail
