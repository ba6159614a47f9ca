// The values RdmaManagerActors exchange with actors and with each other. All serializable
// (CAF 0.17 inspect), registered by `add_message_types`, which every process must call.
#pragma once

#include <caf/actor.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/deserializer.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>
#include <caf/serializer.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "components/priority.h"
#include "primitives/status.h"

namespace caf_rdma {

/// Buffer access rights (as uint8_t on the wire).
enum class BufferAccess : uint8_t { kReadOnly = 0, kReadWrite = 1 };

/// Where a buffer's memory is, as its owner registered it (uint8_t on the wire).
enum class BufferMemory : uint8_t {
  kHost = 0,       ///< host memory
  kGpuDirect = 1,  ///< GPU memory the owner's NIC registered (GPUDirect): one-sided access
  kGpuStaged = 2,  ///< GPU memory the owner's NIC cannot reach: moved through host staging
};

/// A registered buffer, as handed out by its owner manager. Send it to any actor anywhere:
/// it names the owner, so any manager can read from or write into it. It is a capability:
/// whoever holds it may access the buffer (as `access` allows) until its owner releases it, so
/// hand it only to whom may. Its owner checks the secret on every access it serves (fallback
/// chunks, stream grants, checks); on the RDMA path the NIC checks the rkey.
/// One more device of a buffer's owner that registered it (striping: actors/manager/rails.h):
/// the remote key of that registration, on that device.
struct RailKey {
  std::string device;        ///< the owner's device (its rail)
  uint32_t rkey = 0;         ///< remote key of the buffer's registration there
  uint64_t incarnation = 0;  ///< that device's opening (RdmaDomain::incarnation)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RailKey& x) {
  return f(caf::meta::type_name("caf_rdma::RailKey"), x.device, x.rkey, x.incarnation);
}

struct BufferHandle {
  uint64_t id = 0;           ///< owner-local id, never reused by that owner
  uint64_t addr = 0;         ///< first byte in the owner's address space
  uint64_t size = 0;         ///< bytes
  uint8_t access = 1;        ///< BufferAccess
  uint32_t rkey = 0;         ///< remote key; 0 when the owner has no RDMA registration
  std::string device;        ///< owner's device ("" without RDMA)
  std::vector<uint8_t> gid;  ///< owner's port GID (16 bytes, "" without RDMA)
  bool ethernet = true;      ///< owner's link layer (RoCE) or InfiniBand
  caf::actor owner;          ///< the owner node's manager, as peers know it (its facade)
  std::string owner_name;    ///< "host:port" or node id of the owner, for messages
  uint8_t memory = 0;        ///< BufferMemory
  int32_t gpu = -1;          ///< CUDA device ordinal of GPU memory, -1 for host memory
  uint64_t secret_hi = 0;    ///< 128-bit secret the owner drew at registration (getrandom)
  uint64_t secret_lo = 0;
  /// The owner's device opening (RdmaDomain::incarnation) that registered `rkey`; 0 without
  /// RDMA. A handle from before its owner's device went away and came back moves through the
  /// owner (fallback), never with its stale rkey.
  uint64_t incarnation = 0;
  /// The owner's stream channel, which serves requests by handle for host memory (the stream
  /// lane of RdmaClient: actors/stream_lane.h); port 0: none.
  std::string stream_host;
  uint16_t stream_port = 0;
  /// The owner's rails (its devices after `device`, in its order): rail k is rails[k - 1].
  /// Empty: one device. Slices of a large transfer go over rail k only when both sides have it.
  std::vector<RailKey> rails;
  /// The owner's same-host endpoint (components/same_host.h): the identity of its host
  /// (boot id and network namespace) and the abstract AF_UNIX name of its stream channel. A
  /// requester with the same host identity moves the bytes through it (cross-memory attach by
  /// the owner, or in-band), not over TCP; "" when the owner has none (CAF_RDMA_SAME_HOST=0).
  std::string stream_host_id;
  std::string stream_unix;

  bool has_rdma() const { return !device.empty() && gid.size() == 16; }
  bool on_gpu() const { return memory != static_cast<uint8_t>(BufferMemory::kHost); }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, BufferHandle& x) {
  return f(caf::meta::type_name("caf_rdma::BufferHandle"), x.id, x.addr, x.size, x.access, x.rkey,
           x.device, x.gid, x.ethernet, x.owner, x.owner_name, x.memory, x.gpu, x.secret_hi,
           x.secret_lo, x.incarnation, x.stream_host, x.stream_port, x.stream_host_id,
           x.stream_unix, x.rails);
}

/// How the peer protocol names a buffer to its owner: its id and the handle's secret.
struct BufferRef {
  uint64_t id = 0;
  uint64_t secret_hi = 0;
  uint64_t secret_lo = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, BufferRef& x) {
  return f(caf::meta::type_name("caf_rdma::BufferRef"), x.id, x.secret_hi, x.secret_lo);
}

/// A request's seal in the peer protocol: 128 random bits (getrandom) that the requesting
/// node's facade appends to every request it sends to another node, and that the answer must
/// carry back. CAF 0.17 matches an answer to its request by message id alone, and any peer can
/// send a message with any response id: an answer without the request's seal, or from a node
/// other than the one asked, is dropped and counted (ManagerStats::forged_answers), never
/// taken for the answer. Travels only inside the peer protocol (actors/peer_facade.h).
struct PeerNonce {
  uint64_t hi = 0;
  uint64_t lo = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PeerNonce& x) {
  return f(caf::meta::type_name("caf_rdma::PeerNonce"), x.hi, x.lo);
}

/// The reference to `h` for its owner.
inline BufferRef ref_of(const BufferHandle& h) {
  return BufferRef{h.id, h.secret_hi, h.secret_lo};
}

/// "buffer 7 (0x7f..+4096 at node-or-host:port)".
std::string describe(const BufferHandle& h);

enum class TransferKind : uint8_t {
  kRead = 0,         ///< remote -> local (RDMA READ)
  kWrite = 1,        ///< local -> remote (RDMA WRITE)
  kFetchAdd = 2,     ///< remote word += operand; its old value -> local (ATOMIC FETCH_ADD)
  kCompareSwap = 3,  ///< remote word = operand if it equals compare; old value -> local (CMP_SWAP)
};

/// Bytes of the word an atomic works on (8-byte aligned in its owner's address space), and of
/// the local range its old value lands in.
constexpr uint64_t kAtomicBytes = 8;

/// `length` value meaning "the whole span", with Monarch's size rules: a read moves the remote
/// span and needs local span >= remote span; a write moves the local span and needs
/// local span <= remote span.
constexpr uint64_t kWholeSpan = std::numeric_limits<uint64_t>::max();

/// One read, write or atomic, sent to the manager that owns `local`. An atomic works on the
/// 8-byte word at `remote_offset` of `remote` and writes the word's old value (host byte
/// order) into the 8 bytes at `local_offset` of `local`, as a NIC's atomic does; its `length`
/// is kAtomicBytes.
struct TransferOp {
  uint8_t kind = 0;  ///< TransferKind
  BufferHandle local;
  uint64_t local_offset = 0;
  BufferHandle remote;
  uint64_t remote_offset = 0;
  uint64_t length = kWholeSpan;
  uint64_t operand = 0;  ///< atomics: the addend (fetch-add) or the value swapped in
  uint64_t compare = 0;  ///< compare-swap: the value the word must hold to be swapped
  /// Writes: once the bytes are in place, the remote buffer's owner sends one WriteNotice
  /// (with `tag`) to the actor it watches the buffer with (watch_writes); the reply comes after
  /// that. See docs/guarantees.md, "Write notifications".
  bool notify = false;
  uint64_t tag = 0;  ///< the writer's word for the notice (WriteNotice::tag)
  /// Its priority class's wire value (components/priority.h: 0 bulk, 1 latency, 2
  /// background): which waiting work goes first, its queue pairs and lanes, its copy
  /// threads' nice value (docs/guarantees.md, "Priority classes"). Another value is refused.
  uint8_t priority = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TransferOp& x) {
  return f(caf::meta::type_name("caf_rdma::TransferOp"), x.kind, x.local, x.local_offset, x.remote,
           x.remote_offset, x.length, x.operand, x.compare, x.notify, x.tag, x.priority);
}

/// What the watcher of a buffer (watch_writes) receives as `(write_notice_atom, WriteNotice)`,
/// sent as a request, after a write that asked for it (TransferOp::notify) put its bytes in
/// place: [offset, offset + length) of buffer `buffer` holds them. The watcher's answer (any,
/// even none: a handler returning void answers) tells the owner it was handled; notices from
/// one writing node not yet handled are bounded (kMaxPendingNotices).
struct WriteNotice {
  uint64_t buffer = 0;  ///< the owner's buffer id (BufferHandle::id)
  uint64_t offset = 0;  ///< where in it the write landed
  uint64_t length = 0;  ///< bytes written
  uint64_t tag = 0;     ///< the writer's TransferOp::tag
  /// The writing node as CAF knows it (its connection's node id; "" for this node) and as the
  /// writer names itself (its manager's name, not checked; cut to kMaxWriterName bytes by the
  /// owner, the cut said with "...").
  std::string writer_node;
  std::string writer;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WriteNotice& x) {
  return f(caf::meta::type_name("caf_rdma::WriteNotice"), x.buffer, x.offset, x.length, x.tag,
           x.writer_node, x.writer);
}

/// Write notices one writing node may have waiting for its watchers' answers at one owner, and
/// all nodes together; beyond them a notify write fails with resource_exhausted (its bytes are
/// written).
constexpr uint64_t kMaxPendingNotices = 1024;
/// How long past a notify write's timeout its writer waits for the owner's answer to a notice
/// already sent (actors/manager/write_notices.h invariant 16); an RdmaClient waits this much
/// longer for a notify write's reply.
constexpr std::chrono::seconds kNoticeGrace{2};
constexpr uint64_t kMaxPendingNoticesTotal = 16384;
/// The longest writer name a notice carries to a watcher (WriteNotice::writer): what a pending
/// notice costs its owner stays bounded whatever name a peer sends.
constexpr size_t kMaxWriterName = 256;

// -- the kind on the wire: a byte (TransferOp::kind, and the kind of buf_check, ask_check and
//    stream_grant), read through these rather than compared with casts.

/// The byte that stands for `kind` on the wire.
constexpr uint8_t wire_kind(TransferKind kind) {
  return static_cast<uint8_t>(kind);
}
/// Whether a wire byte names a TransferKind (0 read, 1 write, 2 fetch-add, 3 compare-swap); a
/// peer may send any byte.
constexpr bool known_kind(uint8_t kind) {
  return kind <= wire_kind(TransferKind::kCompareSwap);
}
/// Whether a wire byte names an atomic (fetch-add or compare-swap).
constexpr bool is_atomic_kind(uint8_t kind) {
  return kind == wire_kind(TransferKind::kFetchAdd) ||
         kind == wire_kind(TransferKind::kCompareSwap);
}
/// Whether an access of this kind changes the remote buffer (a write or an atomic), so needs
/// it read-write.
constexpr bool writes_remote_kind(uint8_t kind) {
  return kind == wire_kind(TransferKind::kWrite) || is_atomic_kind(kind);
}
constexpr bool is_read_kind(uint8_t kind) {
  return kind == wire_kind(TransferKind::kRead);
}
constexpr bool is_write_kind(uint8_t kind) {
  return kind == wire_kind(TransferKind::kWrite);
}
/// Whether `op` is a read (remote -> local) or a write (local -> remote).
inline bool is_read(const TransferOp& op) {
  return is_read_kind(op.kind);
}
inline bool is_write(const TransferOp& op) {
  return is_write_kind(op.kind);
}
inline bool is_atomic(const TransferOp& op) {
  return is_atomic_kind(op.kind);
}

/// Which bytes a transfer moves, by name, so that no length is taken for an offset or a
/// timeout: Range::whole(), Range::of(4096), Range::of(4096).at_local(512).at_remote(8192).
struct Range {
  uint64_t length = kWholeSpan;  ///< kWholeSpan: from the offsets to the end of the shorter side
  uint64_t local_offset = 0;     ///< where in the local buffer
  uint64_t remote_offset = 0;    ///< where in the remote buffer
  Priority priority = Priority::kBulk;  ///< its class (components/priority.h)

  static Range whole() { return Range{}; }
  static Range of(uint64_t bytes) {
    Range r;
    r.length = bytes;
    return r;
  }
  Range at_local(uint64_t offset) const {
    Range r = *this;
    r.local_offset = offset;
    return r;
  }
  Range at_remote(uint64_t offset) const {
    Range r = *this;
    r.remote_offset = offset;
    return r;
  }
  /// In class `p`: `read(mine, theirs, Range::of(8).as(Priority::kLatency))`.
  Range as(Priority p) const {
    Range r = *this;
    r.priority = p;
    return r;
  }
};

/// The class of `op` (TransferOp::priority); a value that names none is bulk here, and refused
/// by checked_length (actors/transfer_checks.h).
inline Priority priority_of(const TransferOp& op) {
  return priority_from_wire(op.priority).value_or(Priority::kBulk);
}

/// A read (remote -> local) or write (local -> remote) of `range`.
TransferOp make_read(BufferHandle local, BufferHandle remote, Range range);
TransferOp make_write(BufferHandle local, BufferHandle remote, Range range);
/// The same with the range as integers (length, then local and remote offset).
TransferOp make_read(BufferHandle local, BufferHandle remote, uint64_t length = kWholeSpan,
                     uint64_t local_offset = 0, uint64_t remote_offset = 0);
TransferOp make_write(BufferHandle local, BufferHandle remote, uint64_t length = kWholeSpan,
                      uint64_t local_offset = 0, uint64_t remote_offset = 0);
/// A write whose owner tells its watcher, with `tag`, once the bytes are in place.
TransferOp make_notify_write(BufferHandle local, BufferHandle remote, uint64_t tag,
                             Range range = Range::whole());

/// Atomics on the 8-byte word at `remote_offset` of `remote`; the word's old value lands in the
/// 8 bytes at `local_offset` of `local` (which must be read-write host memory of the manager
/// asked). Fetch-add adds `add` (wrapping); compare-swap stores `swap` if the word equals
/// `compare`. See docs/architecture.md, "Atomics" for what is atomic with what.
TransferOp make_fetch_add(BufferHandle local, BufferHandle remote, uint64_t remote_offset,
                          uint64_t add, uint64_t local_offset = 0);
TransferOp make_compare_swap(BufferHandle local, BufferHandle remote, uint64_t remote_offset,
                             uint64_t compare, uint64_t swap, uint64_t local_offset = 0);

/// Which path moved the bytes (TransferReply::path, TransferOutcome::path). Users compare these
/// strings: they never change.
/// One-sided RDMA between the registered buffers themselves (host memory, or GPU memory the NIC
/// registered with GPUDirect), by the manager's queue pair or a direct lane.
constexpr const char* kPathRdma = "rdma-direct";
/// RDMA through the requester's host bounce buffers, for GPU memory its NIC cannot register:
/// the bytes are copied between the GPU and a bounce buffer, which the NIC moves.
constexpr const char* kPathRdmaStaged = "rdma-staged";
/// No RDMA: the managers move the bytes in CAF messages (fetch/store chunks) or over the
/// owner's stream channel, or the manager copies them itself between two buffers of its node
/// that RDMA may not or cannot move (overlapping ranges, among others).
constexpr const char* kPathFallback = "fallback";

/// Reply to a successful transfer.
struct TransferReply {
  uint64_t bytes = 0;
  std::string path;  ///< kPathRdma, kPathRdmaStaged or kPathFallback
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TransferReply& x) {
  return f(caf::meta::type_name("caf_rdma::TransferReply"), x.bytes, x.path);
}

/// Result of one op of a batch (errors do not hide the other ops' results).
struct TransferOutcome {
  uint8_t code = 0;     ///< 0 = success, else an ErrorCode
  std::string message;  ///< the error message ("" on success)
  uint64_t bytes = 0;
  std::string path;  ///< of a success: kPathRdma, kPathRdmaStaged or kPathFallback

  bool ok() const { return code == 0; }
  /// The outcome as the API's one error type: ok, or the Error (code, message) a blocking call
  /// would have returned for this op.
  Status status() const;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TransferOutcome& x) {
  return f(caf::meta::type_name("caf_rdma::TransferOutcome"), x.code, x.message, x.bytes, x.path);
}

/// One range of a transfer list (actors/transfer_plan.h): `length` bytes at `local_offset` of
/// the local buffer and at `remote_offset` of the remote one.
struct ListRange {
  uint64_t local_offset = 0;
  uint64_t remote_offset = 0;
  uint64_t length = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ListRange& x) {
  return f(caf::meta::type_name("caf_rdma::ListRange"), x.local_offset, x.remote_offset, x.length);
}

/// A transfer list as an actor asks its manager to move it (transfer_list_atom): reads
/// (TransferKind::kRead) or writes of `ranges` between `local` (a buffer of the manager's
/// node) and `remote`.
struct TransferListMsg {
  uint8_t kind = 0;  ///< TransferKind: kRead or kWrite
  BufferHandle local;
  BufferHandle remote;
  std::vector<ListRange> ranges;
  uint8_t priority = 0;  ///< its class, as TransferOp::priority
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TransferListMsg& x) {
  return f(caf::meta::type_name("caf_rdma::TransferListMsg"), x.kind, x.local, x.remote, x.ranges,
           x.priority);
}

/// How a transfer list ended (RdmaClient::post's answer, and the manager's to
/// transfer_list_atom): ranges [0, landed) are in place (actors/transfer_plan.h invariant 4).
struct ListOutcome {
  uint8_t code = 0;     ///< 0: every range landed; else the ErrorCode of the first error met
  std::string message;  ///< the error's message ("" on success), naming the range
  uint64_t landed = 0;  ///< ranges [0, landed) are in place
  uint64_t bytes = 0;   ///< the bytes of those ranges
  std::string path;     ///< the path of the last ranges moved (kPathRdma, kPathFallback, ...)

  bool ok() const { return code == 0; }
  /// ok, or the Error (code, message).
  Status status() const;
  /// Sets the outcome's error to `e`.
  void fail(const Error& e);
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ListOutcome& x) {
  return f(caf::meta::type_name("caf_rdma::ListOutcome"), x.code, x.message, x.landed, x.bytes,
           x.path);
}

/// One side of a queue-pair handshake between managers.
struct QpInfoMsg {
  uint32_t qp_num = 0;
  uint16_t lid = 0;
  std::vector<uint8_t> gid;
  uint32_t psn = 0;
  uint8_t mtu = 0;
  bool ethernet = true;
  std::string device;
  caf::actor manager;  ///< the sender's manager (its facade)
  uint64_t lane = 0;   ///< 0: the managers' queue pair; else the initiator's direct lane id
  uint8_t max_dest_rd_atomic = 0;  ///< READs its responder takes outstanding (QpInfo)
  uint64_t incarnation = 0;        ///< the sender's device opening (QpInfo)
  /// 0: the managers' queue pair (or a lane's); else a striping queue pair
  /// (actors/manager/rails.h) on the initiator's and the acceptor's rail `rail`.
  uint32_t stripe = 0;
  uint32_t rail = 0;
  /// The queue pair's priority class (components/priority.h wire value): a direct lane's, or a
  /// class queue pair's (manager/rails.h invariant 26). Its acceptor's side carries that
  /// class's traffic class and service level (ManagerOptions::traffic_of).
  uint8_t priority = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, QpInfoMsg& x) {
  return f(caf::meta::type_name("caf_rdma::QpInfoMsg"), x.qp_num, x.lid, x.gid, x.psn, x.mtu,
           x.ethernet, x.device, x.manager, x.lane, x.max_dest_rd_atomic, x.incarnation, x.stripe,
           x.rail, x.priority);
}

/// An owner's permission to move one byte range over its stream channel (fallback transport,
/// host memory): connect to host:port and present the token. Port 0: the owner has no
/// stream channel (or not for this buffer's memory); use fetch/store chunks instead.
struct StreamGrantMsg {
  uint64_t token = 0;
  std::string host;
  uint16_t port = 0;
  /// The owner's same-host endpoint, as in BufferHandle (stream_host_id, stream_unix).
  std::string host_id;
  std::string unix_name;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StreamGrantMsg& x) {
  return f(caf::meta::type_name("caf_rdma::StreamGrantMsg"), x.token, x.host, x.port, x.host_id,
           x.unix_name);
}

/// Largest fallback chunk (fetch length, store size, ByteChunk on the wire): what a peer can make
/// an owner allocate with one message.
constexpr uint64_t kMaxChunkBytes = 64ull << 20;

/// One range of a packed fallback request (fetch_list, store_list: the small ops of one batch
/// to one buffer in one message, actors/transfer/chunk_path.h invariant 5): `length` bytes at
/// `offset` of the owner's buffer.
struct PackedRange {
  uint64_t offset = 0;
  uint64_t length = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PackedRange& x) {
  return f(caf::meta::type_name("caf_rdma::PackedRange"), x.offset, x.length);
}

/// Most ranges one packed request may name (an owner refuses more).
constexpr size_t kMaxPackedRanges = 1024;

/// The bytes of one fallback chunk. The sender points `data` at memory it keeps alive as long as
/// `pin` lives (its registered buffer: no copy before serialization; `pin` is shared by every
/// copy of the chunk, so the memory is held until the message carrying it is destroyed, i.e.
/// serialized and sent, or dropped); a deserialized chunk owns its bytes (one allocation, no
/// zero-fill). On the wire: a length-prefixed byte sequence of at most kMaxChunkBytes.
struct ByteChunk {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  std::shared_ptr<uint8_t[]> owned;
  std::shared_ptr<void> pin;  ///< keeps `data` valid (zero-copy chunks); may be null

  /// A chunk that owns `n` bytes, not initialized (one allocation, no zero-fill). An empty
  /// chunk (`owned` null, size 0) when `n` exceeds kMaxChunkBytes or the memory is not there.
  static ByteChunk allocate(uint64_t n);
  /// A chunk that owns a copy of [p, p + n).
  static ByteChunk copy_of(const uint8_t* p, uint64_t n);
  /// What an empty allocate(n) for `what` means, said once: "no memory for a <what> of <n>
  /// bytes".
  static std::string no_memory(uint64_t n, const std::string& what);
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ByteChunk& x) {
  if constexpr (std::is_base_of<caf::serializer, Inspector>::value) {
    size_t n = x.size;
    return caf::error::eval(
        [&] { return f.begin_sequence(n); },
        [&] { return n > 0 ? f.apply_raw(n, const_cast<uint8_t*>(x.data)) : caf::error{}; },
        [&] { return f.end_sequence(); });
  } else if constexpr (std::is_base_of<caf::deserializer, Inspector>::value) {
    size_t n = 0;
    if (auto err = f.begin_sequence(n))
      return err;
    // The length comes from the peer: checked before anything is allocated.
    if (n > kMaxChunkBytes)
      return caf::make_error(caf::sec::invalid_argument,
                             "ByteChunk of " + std::to_string(n) + " bytes exceeds kMaxChunkBytes");
    x = ByteChunk::allocate(n);
    if (n > 0 && !x.owned)
      return caf::make_error(caf::sec::runtime_error, ByteChunk::no_memory(n, "ByteChunk"));
    if (n > 0)
      if (auto err = f.apply_raw(n, x.owned.get()))
        return err;
    return f.end_sequence();
  } else {
    // Other inspectors (e.g. to_string) see the size only.
    return f(caf::meta::type_name("caf_rdma::ByteChunk"), x.size);
  }
}

// -- telemetry: what the manager's telemetry part (actors/manager/telemetry.h) counts per op,
//    carried in ManagerStats::telemetry and served as Prometheus metrics
//    (actors/metrics_exporter.h).

/// Upper bounds (seconds) of the latency histograms' buckets: fixed, so that histograms of
/// every node and every scrape add up. LatencyHistogram::buckets has one more, for +Inf.
constexpr double kLatencyBounds[] = {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
                                     0.001,   0.0025,   0.005,   0.01,   0.025,   0.05,
                                     0.1,     0.25,     0.5,     1.0,    2.5,     10.0};
constexpr size_t kLatencyBuckets = sizeof(kLatencyBounds) / sizeof(kLatencyBounds[0]) + 1;

/// Ops that succeeded with one peer, on one path, of one kind: as requester
/// (ManagerTelemetry::traffic) or as owner (ManagerTelemetry::served).
struct TrafficCount {
  /// As requester: the remote buffer's owner ("host:port"), as its handle names it. As owner:
  /// the requester, as ServedLedger names it (actors/manager/served_ledger.h).
  std::string peer;
  /// As requester: kPathRdma, kPathRdmaStaged or kPathFallback. As owner: kServedChunks,
  /// kServedStream or kServedSameHost.
  std::string path;
  uint8_t kind = 0;  ///< TransferKind
  uint64_t ops = 0;
  uint64_t bytes = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TrafficCount& x) {
  return f(caf::meta::type_name("caf_rdma::TrafficCount"), x.peer, x.path, x.kind, x.ops, x.bytes);
}

/// Ops that failed with one peer, on one path ("none": before a path was chosen), with one
/// ErrorCode and work-completion status.
struct ErrorCount {
  std::string peer;
  std::string path;
  std::string code;       ///< to_string(ErrorCode), e.g. "out_of_bounds"
  std::string wc_status;  ///< ibv_wc_status_str of a failed work request; "" for other errors
  uint64_t count = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ErrorCount& x) {
  return f(caf::meta::type_name("caf_rdma::ErrorCount"), x.peer, x.path, x.code, x.wc_status,
           x.count);
}

/// Latencies of the ops that succeeded on one path, of one kind: from the request's arrival
/// (a direct lane: the call) to its reply.
struct LatencyHistogram {
  std::string path;
  uint8_t kind = 0;               ///< TransferKind
  std::vector<uint64_t> buckets;  ///< kLatencyBuckets counts, each of its bucket only
  uint64_t count = 0;
  uint64_t sum_ns = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, LatencyHistogram& x) {
  return f(caf::meta::type_name("caf_rdma::LatencyHistogram"), x.path, x.kind, x.buckets, x.count,
           x.sum_ns);
}

/// Per priority class (components/priority.h): the ops of that class that ended, as requester
/// (a manager's own and its lanes'), and the latency of those that succeeded.
struct ClassCount {
  std::string priority;      ///< priority_name(): "latency", "bulk", "background"
  uint64_t ops = 0;          ///< succeeded
  uint64_t bytes = 0;        ///< moved by those
  uint64_t errors = 0;       ///< failed
  LatencyHistogram latency;  ///< of the successes (path: "", kind: 0)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ClassCount& x) {
  return f(caf::meta::type_name("caf_rdma::ClassCount"), x.priority, x.ops, x.bytes, x.errors,
           x.latency);
}

/// What a manager counts per op (its own and its direct lanes'), since it started, and what it
/// holds now for the metrics that ManagerStats's counters do not give.
struct ManagerTelemetry {
  std::vector<TrafficCount> traffic;
  /// As owner: the requests of peers this node served, by requester, path and kind (its RDMA
  /// ones pass its CPU by: not counted). An atomic is a request of no bytes.
  std::vector<TrafficCount> served;
  std::vector<ErrorCount> errors;
  std::vector<LatencyHistogram> latencies;
  std::vector<ClassCount> classes;  ///< by priority class, most urgent first
  uint64_t stream_grants = 0;       ///< stream grants made as owner, not yet used or withdrawn
  uint64_t staging_busy = 0;        ///< bounce buffers (rdma-staged) an op holds now
  uint64_t staging_buffers = 0;     ///< bounce buffers made (at most staging_buffers)
  /// Bytes of the live buffers registered with the manager, pinned by a device or not
  /// (ManagerStats::registered_bytes counts the device's memory regions: 0 without one).
  uint64_t buffer_bytes = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ManagerTelemetry& x) {
  return f(caf::meta::type_name("caf_rdma::ManagerTelemetry"), x.traffic, x.served, x.errors,
           x.latencies, x.classes, x.stream_grants, x.staging_busy, x.staging_buffers,
           x.buffer_bytes);
}

/// Per-manager counters.
/// The live buffers one actor of the node registered (leak accounting,
/// actors/manager/registrant_watch.h).
struct RegistrantStats {
  uint64_t actor_id = 0;
  std::string actor_name;  ///< as CAF names the actor ("scoped_actor", a state's name, ...)
  uint64_t buffers = 0;
  uint64_t registered_bytes = 0;
  uint64_t pinned_bytes = 0;  ///< of those, bytes in memory regions of the device
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RegistrantStats& x) {
  return f(caf::meta::type_name("caf_rdma::RegistrantStats"), x.actor_id, x.actor_name, x.buffers,
           x.registered_bytes, x.pinned_bytes);
}

struct ManagerStats {
  std::string device;     ///< "" when the manager has no RDMA device
  std::string transport;  ///< "auto", "rdma" or "fallback"
  uint64_t rdma_ops = 0;
  uint64_t rdma_bytes = 0;
  uint64_t fallback_ops = 0;
  uint64_t fallback_bytes = 0;
  uint64_t errors = 0;
  uint64_t live_qps = 0;
  uint64_t handshakes = 0;
  uint64_t registered_buffers = 0;
  uint64_t registered_bytes = 0;  ///< bytes in live memory regions
  /// Bytes this node served as owner on the fallback: CAF chunks, grants, and requests by
  /// handle (stream lanes and managers' stream paths) its stream channel served; not atomics
  /// (ManagerTelemetry::served counts those as requests).
  uint64_t served_fallback_bytes = 0;
  uint64_t stream_ops =
      0;  ///< fallback ops (counted in fallback_ops) moved over the stream channel
  /// Fallback ops whose stream the owner refused before taking it (its channel was full or
  /// it closed the connections), moved in CAF chunks instead.
  uint64_t stream_refused = 0;
  /// Stream grants this node asked of owners: the first stream op to each owner (its grant
  /// names the endpoint later ops go to by handle: actors/stream_endpoints.h), notify writes,
  /// and ops an owner would not take by handle.
  uint64_t stream_grants_asked = 0;
  /// RDMA ops (counted in rdma_ops) run by direct lanes, not the actor; a list is one
  uint64_t direct_ops = 0;
  /// Fallback ops (counted in fallback_ops) that RdmaClients ran over stream lanes
  /// (actors/stream_lane.h), straight to the owners' stream channels.
  uint64_t stream_lane_ops = 0;
  /// Stream ops this node ran as requester (stream lanes and the manager's stream path) that
  /// moved over the owner's same-host endpoint instead of TCP (counted in stream_ops or
  /// stream_lane_ops too).
  uint64_t same_host_ops = 0;
  uint64_t lanes = 0;           ///< direct lanes open: opened here plus accepted from peers
  uint64_t busy_buffers = 0;    ///< local buffers a transfer or a direct lane is using now
  uint64_t device_losses = 0;   ///< times the RDMA device went away while this manager used it
  uint64_t device_reopens = 0;  ///< times it was opened again afterwards
  /// Messages from the network its facade dropped: answers or errors nobody was owed, and
  /// refusals it could not send back (a forged or asynchronous sender).
  uint64_t facade_dropped = 0;
  /// Answers to this node's peer requests that were dropped because they did not carry the
  /// request's seal (PeerNonce) or came from a node other than the one asked: forged answers.
  uint64_t forged_answers = 0;
  /// Queue pairs on the device's shared completion queue (the managers' QPs with their peers
  /// and the peer side of direct lanes; a lane's own QP has a CQ of its own).
  uint64_t shared_cq_qps = 0;
  /// Completion queues the manager's poller sweeps: 1 for all its peers on the shared CQ.
  uint64_t polled_cqs = 0;
  /// Chunks of rdma-staged transfers moved through bounce buffers, and how many of their GPU
  /// copies ran while another chunk of the same transfer was on the NIC (copy/RDMA overlap).
  uint64_t staged_chunks = 0;
  uint64_t staged_overlapped = 0;
  /// Fallback requests (CAF chunks) that each carried the ranges of several small ops of one
  /// batch to one buffer (fetch_list, store_list), and the ops they carried.
  uint64_t packed_chunks = 0;
  uint64_t packed_ops = 0;
  /// Rdma-staged transfers of one chunk or less that took a piece of a bounce buffer shared
  /// with others (a list's small ranges gathered into one buffer, staged_path.h invariant 5).
  uint64_t staged_pieces = 0;
  /// Links to peer managers lost while the peer may live (remote_link_unreachable), and links
  /// made again to the same manager afterwards (by this manager's reconnect, or by the peer).
  uint64_t links_lost = 0;
  uint64_t reconnects = 0;
  /// Why transfers cannot use RDMA now: `device` is "" (no device, or lost and not back yet),
  /// or its port is down; "" when they can.
  std::string no_rdma_reason;
  /// As owner: bytes of fetch answers served to peers and not yet proven read (their windows),
  /// and fetches waiting for a window to open.
  uint64_t window_bytes = 0;
  uint64_t fetches_waiting = 0;
  /// Leak accounting: who holds the live buffers (one entry per registering actor), and the
  /// buffers whose registrant ended without releasing them, since the start.
  std::vector<RegistrantStats> registrants;
  uint64_t orphaned_buffers = 0;
  /// Write notices: sent to this node's watchers, waiting for their answers now, and refused
  /// (no watcher, too many waiting); as writer: notify writes whose owner confirmed the notice.
  uint64_t notices_sent = 0;
  uint64_t notices_pending = 0;
  uint64_t notices_refused = 0;
  uint64_t notified_writes = 0;
  /// Striping (actors/manager/rails.h): this manager's rails (its devices after `device`),
  /// RDMA ops it split in slices over several queue pairs, the slices, and the slices that a
  /// failed rail handed to the primary device's queue pair (failover).
  std::vector<std::string> rails;
  uint64_t striped_ops = 0;
  uint64_t stripe_slices = 0;
  uint64_t stripe_failovers = 0;
  /// Smaller RDMA ops that ran whole on a striping queue pair with fewer ops pending than the
  /// managers' own (manager/rails.h invariant 19).
  uint64_t spread_ops = 0;
  /// Per op, by peer, path and kind: bytes, ops, errors, latencies (actors/manager/telemetry.h).
  ManagerTelemetry telemetry;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ManagerStats& x) {
  return f(caf::meta::type_name("caf_rdma::ManagerStats"), x.device, x.transport, x.rdma_ops,
           x.rdma_bytes, x.fallback_ops, x.fallback_bytes, x.errors, x.live_qps, x.handshakes,
           x.registered_buffers, x.registered_bytes, x.served_fallback_bytes, x.stream_ops,
           x.stream_refused, x.stream_grants_asked, x.direct_ops, x.stream_lane_ops, x.lanes,
           x.busy_buffers, x.device_losses, x.device_reopens, x.facade_dropped, x.forged_answers,
           x.shared_cq_qps, x.polled_cqs, x.staged_chunks, x.staged_overlapped, x.links_lost,
           x.reconnects, x.no_rdma_reason, x.window_bytes, x.fetches_waiting, x.registrants,
           x.orphaned_buffers, x.notices_sent, x.notices_pending, x.notices_refused,
           x.notified_writes, x.rails, x.striped_ops, x.stripe_slices, x.stripe_failovers,
           x.spread_ops, x.telemetry, x.same_host_ops, x.packed_chunks, x.packed_ops,
           x.staged_pieces);
}

/// Registers every message type above. Call on the config of every actor system that talks
/// to a manager (forgetting it makes remote requests fail with `unexpected_message`).
void add_message_types(caf::actor_system_config& cfg);

}  // namespace caf_rdma
