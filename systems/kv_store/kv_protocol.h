// The kv_store protocol: what a kv_client says to a kv_server, over CAF messages. Values travel
// by RDMA: the server RDMA-reads a PUT's value out of the client's registered buffer and
// RDMA-writes a GET's value into it. Where RDMA cannot move them (either side without a device:
// the managers' fallback would carry the bytes in CAF messages anyway), a GET's value of at most
// kInlineValueMax bytes comes in the reply itself (path "inline"), one round trip instead of the
// managers' three, and the client copies it into its buffer. On one host, such GETs skip CAF
// altogether: kv_local_get.h.
#pragma once

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/rdma_messages.h"

namespace caf_rdma::kv {

using put_atom = caf::atom_constant<caf::atom("kv_put")>;
using get_atom = caf::atom_constant<caf::atom("kv_get")>;
using delete_atom = caf::atom_constant<caf::atom("kv_del")>;
using stats_atom = caf::atom_constant<caf::atom("kv_stats")>;
using hello_atom = caf::atom_constant<caf::atom("kv_hello")>;

/// Longest key the server accepts.
constexpr uint64_t kMaxKeyBytes = 1024;
/// Largest GET value a server answers inline when RDMA cannot move it (see above).
constexpr uint64_t kInlineValueMax = 64 << 10;
/// ValueInfo::path of a value that came in the reply.
constexpr const char* kPathInline = "inline";
/// ValueInfo::path of a value the server copied into the client's slot by cross-memory attach
/// (a same-host GET, kv_local_get.h).
constexpr const char* kPathSameHost = "same-host";
/// In the errors of requests that got no answer in time (from the server, or the gateway):
/// their slot is in doubt (KvSession::put).
constexpr const char* kNoAnswer = "did not answer";

/// Whether RDMA moves a GET's value from a server with RDMA device `server_device` ("" for
/// none) into `client_buffer`: else it comes in the reply (up to kInlineValueMax), or over the
/// same-host GET listener (kv_local_get.h).
inline bool rdma_moves_gets(const std::string& server_device, const BufferHandle& client_buffer) {
  return !server_device.empty() && client_buffer.has_rdma();
}

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
  /// "rdma-direct", "fallback" or kPathInline; "" for an empty value (no bytes moved)
  std::string path;
  /// A GET answered inline: the value's bytes (the client moves them into its buffer and
  /// leaves this empty in what it returns).
  std::vector<uint8_t> bytes;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ValueInfo& x) {
  return f(caf::meta::type_name("caf_rdma::kv::ValueInfo"), x.length, x.path, x.bytes);
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

/// What a client learns of its server when it connects.
struct ServerInfo {
  std::string device;        ///< the server's RDMA device, "" on the fallback
  std::string host_id;       ///< components/same_host.h's host_identity() of the server
  std::string get_endpoint;  ///< its same-host GET listener's name, "" without one
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ServerInfo& x) {
  return f(caf::meta::type_name("caf_rdma::kv::ServerInfo"), x.device, x.host_id, x.get_endpoint);
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
    caf::replies_to<stats_atom>::with<ServerStats>,
    /// What the client needs to know of the server (its device, its same-host GET listener).
    caf::replies_to<hello_atom>::with<ServerInfo>>;

/// Registers the kv message types (with caf_rdma's); pass as NodeOptions::configure.
void add_kv_message_types(caf::actor_system_config& cfg);

}  // namespace caf_rdma::kv
