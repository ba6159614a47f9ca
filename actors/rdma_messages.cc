#include "actors/rdma_messages.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstring>
#include <new>

namespace caf_rdma {

namespace {

/// An outcome's (code, message) as the API's one error type.
Status outcome_status(uint8_t code, const std::string& message) {
  if (code == 0)
    return {};
  return Error(static_cast<ErrorCode>(code), message);
}

}  // namespace

Status TransferOutcome::status() const {
  return outcome_status(code, message);
}

Status ListOutcome::status() const {
  return outcome_status(code, message);
}

void ListOutcome::fail(const Error& e) {
  code = static_cast<uint8_t>(e.code());
  message = e.message();
}

std::string describe(const BufferHandle& h) {
  char range[64];
  std::snprintf(range, sizeof(range), "0x%llx+%llu", static_cast<unsigned long long>(h.addr),
                static_cast<unsigned long long>(h.size));
  std::string where = h.on_gpu() ? " on GPU " + std::to_string(h.gpu) : "";
  return "buffer " + std::to_string(h.id) + " (" + range + where + " owned by " +
         (h.owner_name.empty() ? std::string("?") : h.owner_name) + ")";
}

TransferOp make_read(BufferHandle local, BufferHandle remote, Range range) {
  TransferOp op;
  op.kind = wire_kind(TransferKind::kRead);
  op.local = std::move(local);
  op.remote = std::move(remote);
  op.length = range.length;
  op.local_offset = range.local_offset;
  op.remote_offset = range.remote_offset;
  op.priority = static_cast<uint8_t>(range.priority);
  return op;
}

TransferOp make_write(BufferHandle local, BufferHandle remote, Range range) {
  TransferOp op = make_read(std::move(local), std::move(remote), range);
  op.kind = wire_kind(TransferKind::kWrite);
  return op;
}

TransferOp make_read(BufferHandle local, BufferHandle remote, uint64_t length,
                     uint64_t local_offset, uint64_t remote_offset) {
  return make_read(std::move(local), std::move(remote),
                   Range::of(length).at_local(local_offset).at_remote(remote_offset));
}

TransferOp make_write(BufferHandle local, BufferHandle remote, uint64_t length,
                      uint64_t local_offset, uint64_t remote_offset) {
  return make_write(std::move(local), std::move(remote),
                    Range::of(length).at_local(local_offset).at_remote(remote_offset));
}

TransferOp make_notify_write(BufferHandle local, BufferHandle remote, uint64_t tag, Range range) {
  TransferOp op = make_write(std::move(local), std::move(remote), range);
  op.notify = true;
  op.tag = tag;
  return op;
}

TransferOp make_fetch_add(BufferHandle local, BufferHandle remote, uint64_t remote_offset,
                          uint64_t add, uint64_t local_offset) {
  TransferOp op =
      make_read(std::move(local), std::move(remote),
                Range::of(kAtomicBytes).at_local(local_offset).at_remote(remote_offset));
  op.kind = wire_kind(TransferKind::kFetchAdd);
  op.operand = add;
  return op;
}

TransferOp make_compare_swap(BufferHandle local, BufferHandle remote, uint64_t remote_offset,
                             uint64_t compare, uint64_t swap, uint64_t local_offset) {
  TransferOp op =
      make_read(std::move(local), std::move(remote),
                Range::of(kAtomicBytes).at_local(local_offset).at_remote(remote_offset));
  op.kind = wire_kind(TransferKind::kCompareSwap);
  op.operand = swap;
  op.compare = compare;
  return op;
}

namespace {

/// Chunks of at least this many bytes are mapped pages of their own, unmapped when the last
/// copy goes: the memory of a burst of chunks goes back to the system at once. From the heap,
/// glibc raises its mmap threshold to the size of the first large block freed and serves later
/// chunks from its arenas, which keep the memory of a burst (measured: 270 MB after 2000 MiB
/// of fetch answers; tests/security/memory_bound_test.cc).
constexpr uint64_t kMappedChunkMin = 64 << 10;

}  // namespace

ByteChunk ByteChunk::allocate(uint64_t n) {
  ByteChunk c;
  if (n > kMaxChunkBytes)
    return c;
  if (n >= kMappedChunkMin) {
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return c;
    try {
      c.owned =
          std::shared_ptr<uint8_t[]>(static_cast<uint8_t*>(p), [n](uint8_t* q) { ::munmap(q, n); });
    } catch (const std::bad_alloc&) {  // its control block: the deleter already unmapped it
      return c;
    }
  } else {
    c.owned.reset(new (std::nothrow) uint8_t[n > 0 ? n : 1]);
  }
  if (!c.owned)
    return c;
  c.data = c.owned.get();
  c.size = n;
  return c;
}

ByteChunk ByteChunk::copy_of(const uint8_t* p, uint64_t n) {
  ByteChunk c = allocate(n);
  if (n > 0 && c.owned)
    std::memcpy(c.owned.get(), p, n);
  return c;
}

std::string ByteChunk::no_memory(uint64_t n, const std::string& what) {
  return "no memory for a " + what + " of " + std::to_string(n) + " bytes";
}

void add_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<BufferHandle>("caf_rdma::BufferHandle");
  cfg.add_message_type<BufferRef>("caf_rdma::BufferRef");
  cfg.add_message_type<PeerNonce>("caf_rdma::PeerNonce");
  cfg.add_message_type<TransferOp>("caf_rdma::TransferOp");
  cfg.add_message_type<std::vector<TransferOp>>("std::vector<caf_rdma::TransferOp>");
  cfg.add_message_type<TransferReply>("caf_rdma::TransferReply");
  cfg.add_message_type<TransferOutcome>("caf_rdma::TransferOutcome");
  cfg.add_message_type<std::vector<TransferOutcome>>("std::vector<caf_rdma::TransferOutcome>");
  cfg.add_message_type<ListRange>("caf_rdma::ListRange");
  cfg.add_message_type<std::vector<ListRange>>("std::vector<caf_rdma::ListRange>");
  cfg.add_message_type<TransferListMsg>("caf_rdma::TransferListMsg");
  cfg.add_message_type<ListOutcome>("caf_rdma::ListOutcome");
  cfg.add_message_type<QpInfoMsg>("caf_rdma::QpInfoMsg");
  cfg.add_message_type<ManagerStats>("caf_rdma::ManagerStats");
  cfg.add_message_type<ByteChunk>("caf_rdma::ByteChunk");
  cfg.add_message_type<PackedRange>("caf_rdma::PackedRange");
  cfg.add_message_type<std::vector<PackedRange>>("std::vector<caf_rdma::PackedRange>");
  cfg.add_message_type<StreamGrantMsg>("caf_rdma::StreamGrantMsg");
  cfg.add_message_type<WriteNotice>("caf_rdma::WriteNotice");
}

}  // namespace caf_rdma
