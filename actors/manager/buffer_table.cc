// BufferTable (see buffer_table.h).
#include "actors/manager/buffer_table.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include "components/checksum.h"
#include "components/host_mapping.h"
#include "components/secure_random.h"

#include "actors/detail/manager_state.h"
#include "actors/op_texts.h"
#include "actors/transfer_checks.h"
#include "primitives/log.h"

namespace caf_rdma::detail {

namespace {

Status check_span(const LocalBuffer& b, uint64_t id, uint64_t offset, uint64_t length,
                  const std::string& owner) {
  if (length == 0)
    return Error(ErrorCode::kInvalidArgument,
                 "zero-length access to buffer " + std::to_string(id) + " of " + owner);
  if (offset > b.size || length > b.size - offset)
    return Error(ErrorCode::kOutOfBounds, "offset " + std::to_string(offset) + " length " +
                                              std::to_string(length) + " does not fit buffer " +
                                              std::to_string(id) + " of " + owner + " (size " +
                                              std::to_string(b.size) + ")");
  return {};
}

}  // namespace

caf::result<BufferHandle> BufferTable::request_buffer(uint64_t addr, uint64_t size,
                                                      uint8_t access) {
  if (addr == 0 || size == 0)
    return make_rdma_error(ErrorCode::kInvalidArgument,
                           "buffer request with " +
                               std::string(addr == 0 ? "a null address" : "size 0") +
                               ": address must be non-null and size non-zero");
  if (size > UINT64_MAX - addr)
    return make_rdma_error(ErrorCode::kInvalidArgument,
                           "buffer request at address " + std::to_string(addr) + " of " +
                               std::to_string(size) + " bytes wraps around the address space");
  if (access > static_cast<uint8_t>(BufferAccess::kReadWrite))
    return make_rdma_error(
        ErrorCode::kInvalidArgument,
        "buffer access " + std::to_string(access) + " is neither read-only (0) nor read-write (1)");
  LocalBuffer entry;
  entry.addr = addr;
  entry.size = size;
  entry.access = static_cast<BufferAccess>(access);
  Access mr_access =
      entry.access == BufferAccess::kReadOnly ? Access::kReadOnly : Access::kReadWrite;
  PointerInfo where;
  if (m_.options().device_memory) {
    auto kind = m_.options().device_memory->classify(addr, size);
    if (!kind.ok())
      return to_caf_error(kind.error().with_context(
          "buffer request at address " + std::to_string(addr) + " of " + std::to_string(size) +
          " bytes: cannot tell host from GPU memory (" + m_.options().device_memory->name() + ")"));
    where = *kind;
  }
  BufferHandle h;
  if (where.on_gpu() && where.size != 0 &&
      (addr < where.base || addr - where.base > where.size ||
       size > where.size - (addr - where.base)))
    // Past the end of its allocation: every copy or registration would touch other memory
    // (or fail later, on any transport); refused now, whatever the transport.
    return make_rdma_error(
        ErrorCode::kInvalidArgument,
        "buffer request at address " + std::to_string(addr) + " of " + std::to_string(size) +
            " bytes runs past its GPU " + std::to_string(where.device) + " allocation (" +
            std::to_string(where.base) + " + " + std::to_string(where.size) + " bytes)");
  if (where.on_gpu()) {
    entry.gpu = where.device;
    entry.memory = BufferMemory::kGpuStaged;
    if (m_.nic().domain) {
      // GPUDirect when the NIC can register GPU memory; otherwise transfers stage through
      // host bounce buffers (reported as path rdma-staged).
      auto mr =
          m_.nic().domain->register_gpu(*m_.options().device_memory, where, addr, size, mr_access);
      if (mr.ok()) {
        entry.rdma = std::move(*mr);
        entry.memory = BufferMemory::kGpuDirect;
        h.rkey = entry.rdma.rkey();
      } else if (staged_gpus_.insert(where.device).second) {
        // Staging works, but is slower: a host that expects GPUDirect must learn why not.
        log_line(LogLevel::kWarn,
                 "%s: memory of GPU %d is staged through host bounce buffers (no GPUDirect): %s",
                 m_.options().name.c_str(), where.device, mr.error().message().c_str());
      }
    }
  } else if (m_.nic().domain) {
    auto b = m_.nic().domain->register_buffer(reinterpret_cast<void*>(addr), size, mr_access);
    if (!b.ok())
      return to_caf_error(b.error());
    entry.rdma = *b;
    h.rkey = b->rkey();
  } else if (auto mapped = check_host_range(addr, size, entry.access == BufferAccess::kReadWrite);
             !mapped.ok()) {
    // No device to pin (and so check) the pages: the fallback serves peers with memcpy, and a
    // bogus pointer would crash the process at its first transfer instead of failing here.
    return to_caf_error(mapped.error().with_context("buffer request at address " +
                                                    std::to_string(addr) + " of " +
                                                    std::to_string(size) + " bytes"));
  }
  if (m_.nic().domain) {
    h.device = m_.nic().domain->device_name();
    Gid gid = m_.nic().domain->gid();
    h.gid.assign(gid.begin(), gid.end());
    h.ethernet = m_.nic().domain->port().is_ethernet;
    h.incarnation = m_.nic().domain->incarnation();
  }
  h.memory = static_cast<uint8_t>(entry.memory);
  h.gpu = entry.gpu;
  h.id = next_buffer_id_++;
  h.addr = addr;
  h.size = size;
  h.access = access;
  h.owner = m_.facade();  // peers know the manager by its facade
  h.owner_name = m_.options().name;
  secure_random(&entry.secret_hi, sizeof(entry.secret_hi));
  secure_random(&entry.secret_lo, sizeof(entry.secret_lo));
  h.secret_hi = entry.secret_hi;
  h.secret_lo = entry.secret_lo;
  if (entry.memory == BufferMemory::kHost ||
      (!entry.rdma.released() && entry.memory != BufferMemory::kGpuStaged))
    m_.registry()->add(
        h.id, DirectRegistry::Entry{entry.rdma, size, entry.access, entry.secret_hi,
                                    entry.secret_lo, addr, entry.memory, entry.withdrawal});
  if (m_.stream_server() && entry.memory == BufferMemory::kHost) {
    h.stream_host = m_.stream_server()->host();
    h.stream_port = m_.stream_server()->port();
    h.stream_host_id = m_.stream_server()->host_id();
    h.stream_unix = m_.stream_server()->unix_name();
  }
  if (entry.memory == BufferMemory::kHost)
    m_.rails.register_buffer(entry, h, mr_access);  // invariant 18
  buffers_.emplace(h.id, std::move(entry));
  m_.registrants.registered(h.id);
  return h;
}

Result<LocalBuffer*> BufferTable::owned_buffer(uint64_t id, const char* role) {
  auto it = buffers_.find(id);
  if (it == buffers_.end()) {
    if (id != 0 && id < next_buffer_id_)
      return Error(ErrorCode::kReleased, std::string(role) + " buffer " + std::to_string(id) +
                                             " of " + m_.options().name + " was released");
    return Error(ErrorCode::kUnknownBuffer, std::string(role) + " buffer id " + std::to_string(id) +
                                                " is unknown to " + m_.options().name);
  }
  if (it->second.released)
    return Error(ErrorCode::kReleased, std::string(role) + " buffer " + std::to_string(id) +
                                           " of " + m_.options().name + " was released");
  return &it->second;
}

Result<LocalBuffer*> BufferTable::local_buffer(const BufferHandle& h, const char* role) {
  if (!m_.peer_table.owns(h.owner))
    return Error(ErrorCode::kInvalidArgument,
                 std::string(role) + " " + describe(h) + " is not owned by " + m_.options().name +
                     ": send the request to the manager that owns the local buffer");
  CAF_RDMA_ASSIGN_OR_RETURN(LocalBuffer * b, owned_buffer(h.id, role));
  if (b->addr != h.addr || b->size != h.size ||
      !secrets_equal(b->secret_hi, b->secret_lo, h.secret_hi, h.secret_lo))
    return Error(ErrorCode::kInvalidArgument, std::string(role) + " " + describe(h) +
                                                  " does not match the registered buffer " +
                                                  std::to_string(h.id) + " (stale or forged)");
  return b;
}

caf::result<uint64_t> BufferTable::release_buffer(uint64_t id) {
  auto b = owned_buffer(id, "released");
  if (!b.ok())
    return to_caf_error(b.error());
  LocalBuffer* buf = *b;
  // New transfers are refused from now on. This node's own transfers using it (as their local
  // side) still complete, with the region registered, and the reply waits for them; direct
  // lanes may not start an op on it from now on, and the reply waits for the ops they have
  // running.
  // Peers' transfers into or out of it are the release rule's (invariant 2): stream grants
  // nobody claimed yet are withdrawn (their holders' claims then fail), claimed ones and
  // requests by handle stop after the call under way, answering `released`; the reply waits
  // only for that call. (Before `released` is set, so that ending their holds cannot finish, and
  // erase, the buffer under this function.)
  buf->withdrawal->store(true, std::memory_order_release);
  m_.grants.revoke_unclaimed_grants(id);
  if (m_.stream_server())  // claimed ones still waiting for a worker end now (its invariant 15)
    m_.stream_server()->end_withdrawn_waiting();
  m_.registrants.released(id);
  buf->released = true;
  buf->watcher = nullptr;  // nobody is told of writes it refuses from now on
  bool lanes_idle = m_.registry()->release(id);
  uint64_t size = buf->size;
  // Its GPU export's importers close their imports first (gpu_exports.h invariant 2).
  if (buf->in_use == 0 && lanes_idle && !m_.exports.close_importers(id, *buf)) {
    buffers_.erase(id);
    return size;
  }
  auto rp = m_.self()->make_response_promise<uint64_t>();
  buf->release_waiters.push_back(rp);
  return rp;
}

void BufferTable::buffer_done(uint64_t id) {
  auto it = buffers_.find(id);
  if (it == buffers_.end())
    return;
  if (it->second.in_use > 0)
    --it->second.in_use;
  maybe_finish_release(id);
}

void BufferTable::lane_idle(uint64_t id) {
  maybe_finish_release(id);
}

void BufferTable::maybe_finish_release(uint64_t id) {
  auto it = buffers_.find(id);
  if (it == buffers_.end())
    return;
  LocalBuffer& b = it->second;
  if (!b.released || b.in_use > 0 || m_.registry()->busy(id))
    return;
  if (m_.exports.close_importers(id, b))
    return;  // gpu_exports.h invariant 2: once they all answered
  for (auto& rp : b.release_waiters)
    rp.deliver(b.size);
  buffers_.erase(it);
}

Status BufferTable::copy_out(const LocalBuffer& b, uint64_t offset, void* dst, uint64_t n) const {
  if (b.memory == BufferMemory::kHost) {
    std::memcpy(dst, reinterpret_cast<const uint8_t*>(b.addr) + offset, n);
    return {};
  }
  return m_.options().device_memory->copy_to_host(dst, b.addr + offset, n, b.gpu);
}

Status BufferTable::copy_in(const LocalBuffer& b, uint64_t offset, const void* src,
                            uint64_t n) const {
  if (b.memory == BufferMemory::kHost) {
    std::memcpy(reinterpret_cast<uint8_t*>(b.addr) + offset, src, n);
    return {};
  }
  return m_.options().device_memory->copy_to_device(b.addr + offset, src, n, b.gpu);
}

Result<LocalBuffer*> BufferTable::owner_access(const BufferRef& ref, uint64_t offset,
                                               uint64_t length, bool write) {
  const uint64_t id = ref.id;
  // An id never issued is refused as a wrong secret is, in the same words: a peer cannot tell
  // which ids are live by probing (a released id still says so: its holders are told why).
  auto refused = [&] {
    return Error(ErrorCode::kPermissionDenied,
                 "access to buffer " + std::to_string(id) + " of " + m_.options().name +
                     " refused: its owner issued no handle with this id and secret (a wrong id or "
                     "secret: forged, or a handle of an earlier registration)");
  };
  auto found = owned_buffer(id, "remote");
  if (!found.ok())
    return found.error().code() == ErrorCode::kUnknownBuffer ? refused() : found.error();
  LocalBuffer* b = *found;
  // Constant time: a peer learns nothing from how long a wrong secret takes to be refused.
  if (!secrets_equal(b->secret_hi, b->secret_lo, ref.secret_hi, ref.secret_lo))
    return refused();
  if (write && b->access != BufferAccess::kReadWrite)
    return Error(ErrorCode::kInvalidArgument, "remote buffer " + std::to_string(id) + " of " +
                                                  m_.options().name + " is read-only");
  CAF_RDMA_RETURN_IF_ERROR(check_span(*b, id, offset, length, m_.options().name));
  return b;
}

std::string BufferTable::requester(const caf::node_id* node) const {
  if (node != nullptr)
    return caf::to_string(*node);
  const auto& sender = m_.self()->current_sender();
  return caf::to_string(sender ? sender->node() : m_.self()->node());
}

Result<LocalBuffer*> BufferTable::owner_ranges(const BufferRef& ref,
                                               const std::vector<PackedRange>& ranges, bool write,
                                               uint64_t* total) {
  auto what_text = [&] {
    return std::string(write ? "store" : "fetch") + " of buffer " + std::to_string(ref.id) +
           " of " + m_.options().name;
  };
  if (ranges.empty() || ranges.size() > kMaxPackedRanges)
    return Error(ErrorCode::kInvalidArgument,
                 what_text() + " names " + std::to_string(ranges.size()) +
                     " ranges: a request names 1 to kMaxPackedRanges (" +
                     std::to_string(kMaxPackedRanges) + ")");
  LocalBuffer* b = nullptr;
  uint64_t sum = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const PackedRange& r = ranges[i];
    auto which = [&] {
      return "range " + std::to_string(i) + " of " + std::to_string(ranges.size());
    };
    if (r.length == 0 && ranges.size() > 1)
      return Error(ErrorCode::kInvalidArgument, what_text() + ": " + which() + " is empty");
    auto one = owner_access(ref, r.offset, r.length, write);
    if (!one.ok())  // a plain fetch (one range) says it as before
      return ranges.size() > 1 ? one.error().with_context(which()) : one.error();
    b = *one;
    sum += r.length;  // no overflow: each range fits the buffer, and there are few of them
    if (sum > kMaxChunkBytes)
      return Error(ErrorCode::kInvalidArgument,
                   what_text() + ": its ranges hold more than kMaxChunkBytes (" +
                       std::to_string(kMaxChunkBytes) + ") at " + which());
  }
  *total = sum;
  return b;
}

Result<ByteChunk> BufferTable::fetch_chunk(const BufferRef& ref,
                                           const std::vector<PackedRange>& ranges,
                                           const std::string& requester) {
  uint64_t length = 0;
  CAF_RDMA_ASSIGN_OR_RETURN(LocalBuffer * b, owner_ranges(ref, ranges, false, &length));
  // A copy (out of host or GPU memory): the reply may be serialized after the buffer was
  // released and freed.
  ByteChunk c = ByteChunk::allocate(length);
  if (!c.owned)
    return Error(ErrorCode::kResourceExhausted, ByteChunk::no_memory(length, "fetch chunk"));
  uint64_t at = 0;
  for (const PackedRange& r : ranges) {
    CAF_RDMA_RETURN_IF_ERROR(copy_out(*b, r.offset, c.owned.get() + at, r.length));
    at += r.length;
  }
  m_.counters().served_fallback_bytes += length;
  m_.served()->record(requester, kServedChunks, wire_kind(TransferKind::kRead), length);
  return c;
}

Status BufferTable::in_time(const OwnerDue& due, const std::string& what,
                            const char* outcome) const {
  // Invariant 23: until the arrival plus the requester's time left, cut to max_timeout.
  const auto left = std::min<std::chrono::milliseconds>(std::chrono::milliseconds(due.left_ms),
                                                        m_.options().max_timeout);
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(m_.now() - due.arrival);
  if (waited <= left)
    return {};
  return Error(ErrorCode::kTimeout,
               taken_late_text(what, m_.options().name, waited.count(), left.count(),
                               left < std::chrono::milliseconds(due.left_ms), outcome));
}

caf::result<uint64_t> BufferTable::store(const BufferRef& ref, uint64_t offset,
                                         const ByteChunk& bytes, uint64_t receipt,
                                         const OwnerDue& due) {
  if (Status st = in_time(due,
                          "store of " + std::to_string(bytes.size) + " bytes at offset " +
                              std::to_string(offset) + " of buffer " + std::to_string(ref.id),
                          "nothing was stored");
      !st.ok())
    return to_caf_error(st.error());
  auto b = owner_access(ref, offset, bytes.size, true);
  if (!b.ok())
    return to_caf_error(b.error());
  if (Status st = copy_in(**b, offset, bytes.data, bytes.size); !st.ok())
    return to_caf_error(st.error());
  if (receipt != 0)
    m_.receipts.chunk_landed(m_.receipts.sender_node(), receipt, ref.id, offset, bytes.size);
  m_.counters().served_fallback_bytes += bytes.size;
  m_.served()->record(requester(), kServedChunks, wire_kind(TransferKind::kWrite), bytes.size);
  return bytes.size;
}

caf::result<uint64_t> BufferTable::store_ranges(const BufferRef& ref,
                                                const std::vector<PackedRange>& ranges,
                                                const ByteChunk& bytes, const OwnerDue& due) {
  if (Status st =
          in_time(due,
                  "store of " + std::to_string(bytes.size) + " bytes in " +
                      std::to_string(ranges.size()) + " ranges of buffer " + std::to_string(ref.id),
                  "nothing was stored");
      !st.ok())
    return to_caf_error(st.error());
  uint64_t total = 0;
  auto b = owner_ranges(ref, ranges, true, &total);
  if (!b.ok())
    return to_caf_error(b.error());
  if (total != bytes.size)
    return make_rdma_error(ErrorCode::kInvalidArgument,
                           "store of buffer " + std::to_string(ref.id) + " of " +
                               m_.options().name + ": its " + std::to_string(ranges.size()) +
                               " ranges hold " + std::to_string(total) + " bytes, its chunk " +
                               std::to_string(bytes.size) + "; nothing was stored");
  uint64_t at = 0;
  for (const PackedRange& r : ranges) {
    // Host memory cannot fail a copy after the checks; GPU memory can (said, with what landed).
    if (Status st = copy_in(**b, r.offset, bytes.data + at, r.length); !st.ok())
      return to_caf_error(st.error().with_context(std::to_string(at) + " of " +
                                                  std::to_string(total) +
                                                  " bytes of the store were stored before"));
    at += r.length;
  }
  m_.counters().served_fallback_bytes += total;
  m_.served()->record(requester(), kServedChunks, wire_kind(TransferKind::kWrite), total);
  return total;
}

Result<uint64_t> BufferTable::apply_atomic(const BufferRef& ref, uint64_t offset, uint8_t kind,
                                           uint64_t operand, uint64_t compare) {
  if (!is_atomic_kind(kind))
    return Error(ErrorCode::kInvalidArgument,
                 "atomic of kind " + std::to_string(kind) + " on buffer " + std::to_string(ref.id) +
                     " of " + m_.options().name + " is neither fetch-add (2) nor compare-swap (3)");
  CAF_RDMA_ASSIGN_OR_RETURN(LocalBuffer * b, owner_access(ref, offset, kAtomicBytes, true));
  const std::string what = kind_name(kind);
  if ((b->addr + offset) % kAtomicBytes != 0)
    return Error(
        ErrorCode::kInvalidArgument,
        misaligned_word_text(kind, "offset " + std::to_string(offset) + " of buffer " +
                                       std::to_string(ref.id) + " of " + m_.options().name));
  if (b->memory != BufferMemory::kHost)
    return Error(ErrorCode::kInvalidArgument,
                 "cannot run a " + what + " on buffer " + std::to_string(ref.id) + " of " +
                     m_.options().name + ": its owner's CPU has no atomics on GPU memory");
  // Invariant 14: one CPU atomic on the aligned word.
  auto* word = reinterpret_cast<uint64_t*>(b->addr + offset);
  if (kind == wire_kind(TransferKind::kFetchAdd))
    return __atomic_fetch_add(word, operand, __ATOMIC_SEQ_CST);
  uint64_t old = compare;
  __atomic_compare_exchange_n(word, &old, operand, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return old;  // the word's value: `compare` when swapped, else what it held
}

caf::result<uint64_t> BufferTable::atomic(const BufferRef& ref, uint64_t offset, uint8_t kind,
                                          uint64_t operand, uint64_t compare, const OwnerDue& due) {
  if (Status st = in_time(due,
                          std::string(kind_name(kind)) + " on the word at offset " +
                              std::to_string(offset) + " of buffer " + std::to_string(ref.id),
                          "it was not applied");
      !st.ok())
    return to_caf_error(st.error());
  auto old = apply_atomic(ref, offset, kind, operand, compare);
  if (!old.ok())
    return to_caf_error(old.error());
  m_.served()->record(requester(), kServedChunks, kind, 0);  // served_ledger.h invariant 4
  return *old;
}

TransferOutcome BufferTable::check_access(const BufferRef& ref, uint64_t offset, uint64_t length,
                                          uint8_t kind) {
  auto b = owner_access(ref, offset, length, writes_remote_kind(kind));
  return b.ok() ? TransferOutcome{} : outcome_of(b.error());
}

Result<uint64_t> BufferTable::local_checksum(const LocalBuffer& b, uint64_t offset,
                                             uint64_t n) const {
  if (b.memory == BufferMemory::kHost)
    return range_checksum(reinterpret_cast<const uint8_t*>(b.addr) + offset, n);
  std::unique_ptr<uint8_t[]> tmp(new (std::nothrow) uint8_t[n]);
  if (!tmp)
    return Error(ErrorCode::kResourceExhausted,
                 "cannot allocate " + std::to_string(n) + " bytes to checksum GPU memory");
  CAF_RDMA_RETURN_IF_ERROR(copy_out(b, offset, tmp.get(), n));
  return range_checksum(tmp.get(), n);
}

caf::result<uint64_t> BufferTable::checksum(const BufferRef& ref, uint64_t offset,
                                            uint64_t length) {
  auto b = owner_access(ref, offset, length, false);
  if (!b.ok())
    return to_caf_error(b.error());
  auto sum = local_checksum(**b, offset, length);
  if (!sum.ok())
    return to_caf_error(sum.error());
  return *sum;
}

void BufferTable::chunk_sent(uint64_t id) {
  buffer_done(id);
}

}  // namespace caf_rdma::detail
