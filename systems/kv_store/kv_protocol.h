// The kv_store protocol: what a kv_client says to a kv_server, over CAF messages. Values never
// travel in these messages: the server RDMA-reads a PUT's value out of the client's registered
// buffer and RDMA-writes a GET's value into it (or the managers' fallback moves the bytes).
#pragma once

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>

#include "actors/rdma_messages.h"

namespace caf_rdma::kv {

using put_atom = caf::atom_constant<caf::atom("kv_put")>;
using get_atom = caf::atom_constant<caf::atom("kv_get")>;
using delete_atom = caf::atom_constant<caf::atom("kv_del")>;
using stats_atom = caf::atom_constant<caf::atom("kv_stats")>;

/// Longest key the server accepts.
constexpr uint64_t kMaxKeyBytes = 1024;

/// Errors are caf_rdma errors (category "caf_rdma", see actors/rdma_errors.h):
///   not_found           GET/DELETE of a key the store does not hold
///   size_mismatch       the value does not fit the client's buffer (or the whole pool)
///   resource_exhausted  no free block of the value's size in the server's pool
///   invalid_argument    empty key or one longer than kMaxKeyBytes
///   peer_unavailable    the server (or, seen from the server, the client) is gone
/// plus the transfer errors of the managers (timeout, work_completion, ...).

/// What a PUT stored or a GET delivered.
struct ValueInfo {
  uint64_t length = 0;
  std::string path;  ///< "rdma-direct" or "fallback"; "" for an empty value (no bytes moved)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ValueInfo& x) {
  return f(caf::meta::type_name("caf_rdma::kv::ValueInfo"), x.length, x.path);
}

struct ServerStats {
  uint64_t keys = 0;
  uint64_t pool_bytes = 0;
  uint64_t used_bytes = 0;    ///< bytes in blocks (live values and values still being read)
  uint64_t largest_free = 0;  ///< largest free block
  uint64_t puts = 0, gets = 0, deletes = 0, errors = 0;
  std::string device;  ///< the server's RDMA device, "" on the fallback
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ServerStats& x) {
  return f(caf::meta::type_name("caf_rdma::kv::ServerStats"), x.keys, x.pool_bytes, x.used_bytes,
           x.largest_free, x.puts, x.gets, x.deletes, x.errors, x.device);
}

using server_actor = caf::typed_actor<
    /// PUT: read `length` bytes at `offset` of the client's buffer and store them under `key`.
    /// The old value (if any) stays readable until the new one is completely in the pool; a
    /// failed PUT leaves it intact.
    caf::replies_to<put_atom, std::string, BufferHandle, uint64_t, uint64_t>::with<ValueInfo>,
    /// GET: write the value of `key` to `offset` of the client's buffer; replies with its length.
    caf::replies_to<get_atom, std::string, BufferHandle, uint64_t>::with<ValueInfo>,
    /// DELETE: replies with the length of the removed value.
    caf::replies_to<delete_atom, std::string>::with<uint64_t>,
    caf::replies_to<stats_atom>::with<ServerStats>>;

/// Registers the kv message types (with caf_rdma's); pass as NodeOptions::configure.
void add_kv_message_types(caf::actor_system_config& cfg);

}  // namespace caf_rdma::kv
