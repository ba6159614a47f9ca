// Who may send each request of the manager: the one table of (atom, name, audience) from which
// the facade's classification (actors/peer_facade.cc) and the manager's local-only check
// (actors/rdma_manager_actor.cc) are derived. Nothing else lists requests by audience.
//
// Invariants:
//  1. Every signature of local_requests_actor, manager_questions_actor and peer_protocol_actor
//     has exactly one row here, whose audience is its interface's, and the table has no other
//     row (static_asserts at the end of this file).
//  2. The kLocal rows are the local-only requests: the facade refuses each of them whatever its
//     shape (permission_denied naming the row's name), and the manager serves them only to its
//     node's own actors (ManagerState::local_only, named as here).
//  3. A row's name is the C++ atom's name without `_atom`: what errors and refusals call the
//     request (the atom's wire name may be shorter).
#pragma once

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstddef>
#include <cstdint>
#include <iterator>

#include "actors/rdma_atoms.h"
#include "actors/rdma_manager_interface.h"

namespace caf_rdma {

/// Who may send a request; each is one of the manager's interfaces.
enum class Audience : uint8_t {
  kLocal,     ///< the node's own actors (local_requests_actor): acts on this node's memory
  kQuestion,  ///< anyone (manager_questions_actor): read-only questions
  kPeer,      ///< managers of other nodes, through the facade (peer_protocol_actor)
};

/// One request of the manager.
struct RequestInfo {
  caf::atom_value atom;
  const char* name;  ///< as errors and refusals name it
  Audience audience;
};

/// Every request of the manager, grouped as the interfaces are.
inline constexpr RequestInfo kRequests[] = {
    {request_buffer_atom::get_value(), "request_buffer", Audience::kLocal},
    {release_buffer_atom::get_value(), "release_buffer", Audience::kLocal},
    {transfer_atom::get_value(), "transfer", Audience::kLocal},
    {batch_atom::get_value(), "batch", Audience::kLocal},
    {transfer_list_atom::get_value(), "transfer_list", Audience::kLocal},
    {cancel_atom::get_value(), "cancel", Audience::kLocal},
    {lane_open_atom::get_value(), "lane_open", Audience::kLocal},
    {stream_lane_atom::get_value(), "stream_lane", Audience::kLocal},
    {ask_check_atom::get_value(), "ask_check", Audience::kLocal},
    {ask_sum_atom::get_value(), "ask_sum", Audience::kLocal},
    {dir_put_atom::get_value(), "dir_put", Audience::kLocal},
    {watch_writes_atom::get_value(), "watch_writes", Audience::kLocal},
    {dir_get_atom::get_value(), "dir_get", Audience::kQuestion},
    {peer_state_atom::get_value(), "peer_state", Audience::kQuestion},
    {stats_atom::get_value(), "stats", Audience::kQuestion},
    {qp_connect_atom::get_value(), "qp_connect", Audience::kPeer},
    {fetch_atom::get_value(), "fetch", Audience::kPeer},
    {read_ack_atom::get_value(), "read_ack", Audience::kPeer},
    {store_atom::get_value(), "store", Audience::kPeer},
    {fetch_list_atom::get_value(), "fetch_list", Audience::kPeer},
    {store_list_atom::get_value(), "store_list", Audience::kPeer},
    {stream_grant_atom::get_value(), "stream_grant", Audience::kPeer},
    {gpu_close_atom::get_value(), "gpu_close", Audience::kPeer},
    {lane_drop_atom::get_value(), "lane_drop", Audience::kPeer},
    {device_gone_atom::get_value(), "device_gone", Audience::kPeer},
    {buf_check_atom::get_value(), "buf_check", Audience::kPeer},
    {buf_sum_atom::get_value(), "buf_sum", Audience::kPeer},
    {atomic_atom::get_value(), "atomic", Audience::kPeer},
    {notice_atom::get_value(), "notice", Audience::kPeer},
};

/// The peer requests whose last element is the requester's time left (`uint32_t left_ms`): the
/// owner's facade puts the request's arrival beside it (detail::OwnerDue, peer_facade.h
/// invariant 7), and the owner applies none of them after that time.
constexpr bool carries_time_left(caf::atom_value atom) {
  return atom == store_atom::get_value() || atom == store_list_atom::get_value() ||
         atom == atomic_atom::get_value();
}

/// The row of `atom`; null for an atom the manager does not serve.
constexpr const RequestInfo* find_request(caf::atom_value atom) {
  for (const RequestInfo& r : kRequests)
    if (r.atom == atom)
      return &r;
  return nullptr;
}

/// The row of atom constant `Atom` (does not compile for an atom without one).
template <class Atom>
constexpr const RequestInfo& request_of() {
  return *find_request(Atom::get_value());
}

/// Rows of `atom` (1 for every atom the manager serves).
constexpr size_t rows_of(caf::atom_value atom) {
  size_t n = 0;
  for (const RequestInfo& r : kRequests)
    n += r.atom == atom ? 1 : 0;
  return n;
}

namespace detail {

/// The leading atom of a handler signature.
template <class Sig>
struct SignatureAtom;

template <class Atom, class... Ts, class Out>
struct SignatureAtom<caf::typed_mpi<caf::detail::type_list<Atom, Ts...>, Out>> {
  static constexpr caf::atom_value value = Atom::get_value();
};

/// Invariant 1 for one interface.
template <class Interface>
struct InterfaceRows;

template <class... Sigs>
struct InterfaceRows<caf::typed_actor<Sigs...>> {
  static constexpr size_t size = sizeof...(Sigs);
  /// Each signature has exactly one row, of audience `a`.
  static constexpr bool all_of(Audience a) {
    return ((rows_of(SignatureAtom<Sigs>::value) == 1 &&
             find_request(SignatureAtom<Sigs>::value)->audience == a) &&
            ...);
  }
};

}  // namespace detail

static_assert(detail::InterfaceRows<local_requests_actor>::all_of(Audience::kLocal),
              "every request of local_requests_actor needs one kLocal row in kRequests");
static_assert(detail::InterfaceRows<manager_questions_actor>::all_of(Audience::kQuestion),
              "every request of manager_questions_actor needs one kQuestion row in kRequests");
static_assert(detail::InterfaceRows<peer_protocol_actor>::all_of(Audience::kPeer),
              "every request of peer_protocol_actor needs one kPeer row in kRequests");
static_assert(detail::InterfaceRows<local_requests_actor>::size +
                      detail::InterfaceRows<manager_questions_actor>::size +
                      detail::InterfaceRows<peer_protocol_actor>::size ==
                  std::size(kRequests),
              "kRequests has a row no interface serves");

}  // namespace caf_rdma
