// LocalCopyPath: copies between two buffers of this node (see local_copy_path.h).
#include "actors/transfer/local_copy_path.h"

#include <cstring>
#include <memory>
#include <new>

#include "actors/detail/manager_state.h"

namespace caf_rdma::detail {

void LocalCopyPath::start(OpId id) {
  const OpRecord& o = *m_.op_record(id);
  const TransferOp& op = o.op;
  if (is_atomic(op)) {  // invariant 4
    auto old = m_.buffer_table.apply_atomic(ref_of(op.remote), op.remote_offset, op.kind,
                                            op.operand, op.compare);
    if (!old.ok())
      return m_.fail_op(id,
                        to_caf_error(old.error().with_context("remote " + describe(op.remote))));
    const uint64_t value = *old;
    Status st = m_.buffer_table.copy_in(m_.buffer_table.buffers().at(op.local.id), op.local_offset,
                                        &value, kAtomicBytes);
    if (!st.ok())
      return m_.fail_op(id, to_caf_error(st.error()));
    return m_.finish_op(id, TransferOutcome{});
  }
  const bool is_read = o.is_read();
  auto rb = m_.buffer_table.owner_access(ref_of(op.remote), op.remote_offset, o.length, !is_read);
  if (!rb.ok())
    return m_.fail_op(id, to_caf_error(rb.error().with_context("remote " + describe(op.remote))));
  const LocalBuffer& remote = **rb;
  const LocalBuffer& local = m_.buffer_table.buffers().at(op.local.id);
  const LocalBuffer& src = is_read ? remote : local;
  const LocalBuffer& dst = is_read ? local : remote;
  const uint64_t src_off = is_read ? op.remote_offset : op.local_offset;
  const uint64_t dst_off = is_read ? op.local_offset : op.remote_offset;
  if (src.memory == BufferMemory::kHost && dst.memory == BufferMemory::kHost) {
    std::memmove(reinterpret_cast<uint8_t*>(dst.addr) + dst_off,
                 reinterpret_cast<uint8_t*>(src.addr) + src_off, o.length);
    return m_.finish_op(id, TransferOutcome{});
  }
  // GPU memory on either side: through a host buffer a chunk at a time (invariant 3), back to
  // front when the destination lies after the source (invariant 2).
  const uint64_t chunk = std::min<uint64_t>(o.length, kLocalCopyChunk);
  std::unique_ptr<uint8_t[]> tmp(new (std::nothrow) uint8_t[chunk]);
  if (!tmp)
    return m_.fail_op(id, make_rdma_error(ErrorCode::kResourceExhausted,
                                          "cannot allocate " + std::to_string(chunk) +
                                              " bytes of host memory to copy between " +
                                              describe(op.local) + " and " + describe(op.remote)));
  const bool backwards = dst.addr + dst_off > src.addr + src_off;
  Status st;
  for (uint64_t done = 0, n = 0; done < o.length && st.ok(); done += n) {
    n = std::min(chunk, o.length - done);
    const uint64_t at = backwards ? o.length - done - n : done;
    st = m_.buffer_table.copy_out(src, src_off + at, tmp.get(), n);
    if (st.ok())
      st = m_.buffer_table.copy_in(dst, dst_off + at, tmp.get(), n);
  }
  if (!st.ok())
    return m_.fail_op(id, to_caf_error(st.error()));
  m_.finish_op(id, TransferOutcome{});
}

}  // namespace caf_rdma::detail
