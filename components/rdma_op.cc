#include "components/rdma_op.h"

#include <algorithm>

namespace caf_rdma {

const char* to_string(OpKind kind) {
  switch (kind) {
    case OpKind::kWrite:
      return "RDMA WRITE";
    case OpKind::kRead:
      return "RDMA READ";
    case OpKind::kSend:
      return "SEND";
    case OpKind::kRecv:
      return "RECV";
    case OpKind::kFetchAdd:
      return "ATOMIC FETCH_ADD";
    case OpKind::kCompareSwap:
      return "ATOMIC CMP_SWAP";
  }
  return "?";
}

OpList OpList::of(std::shared_ptr<const std::vector<ListEntry>> entries, size_t first,
                  size_t count) {
  OpList list;
  const size_t size = entries ? entries->size() : 0;
  list.first = std::min(first, size);
  list.count = std::min(count, size - list.first);
  for (size_t i = 0; i < list.count; ++i)
    list.bytes += (*entries)[list.first + i].length;
  list.entries = std::move(entries);
  list.made = true;
  return list;
}

uint64_t RdmaOp::local_length() const {
  if (is_list())
    return list.bytes;
  uint64_t n = 0;
  for (const auto& s : local)
    n += s.length;
  return n;
}

RdmaOp RdmaOp::write(LocalSlice src, RemoteBuffer dst, uint64_t dst_offset) {
  RdmaOp op;
  op.kind = OpKind::kWrite;
  op.local.push_back(std::move(src));
  op.remote = std::move(dst);
  op.remote_offset = dst_offset;
  return op;
}

RdmaOp RdmaOp::write_imm(RemoteBuffer dst, uint64_t dst_offset, uint32_t imm) {
  RdmaOp op;
  op.kind = OpKind::kWrite;
  op.remote = std::move(dst);
  op.remote_offset = dst_offset;
  op.with_imm = true;
  op.imm = imm;
  return op;
}

RdmaOp RdmaOp::read(LocalSlice dst, RemoteBuffer src, uint64_t src_offset) {
  RdmaOp op = write(std::move(dst), std::move(src), src_offset);
  op.kind = OpKind::kRead;
  return op;
}

RdmaOp RdmaOp::list_of(bool read, RdmaBuffer local, RemoteBuffer remote, OpList ranges) {
  const uint64_t size = local.size();
  RdmaOp op = write(LocalSlice{std::move(local), 0, size}, std::move(remote), 0);
  op.kind = read ? OpKind::kRead : OpKind::kWrite;
  op.list = std::move(ranges);
  return op;
}

RdmaOp RdmaOp::send(LocalSlice src) {
  RdmaOp op;
  op.kind = OpKind::kSend;
  op.local.push_back(std::move(src));
  return op;
}

RdmaOp RdmaOp::recv(LocalSlice dst) {
  RdmaOp op = send(std::move(dst));
  op.kind = OpKind::kRecv;
  return op;
}

RdmaOp RdmaOp::fetch_add(RemoteBuffer dst, uint64_t offset, uint64_t add) {
  RdmaOp op;
  op.kind = OpKind::kFetchAdd;
  op.remote = std::move(dst);
  op.remote_offset = offset;
  op.compare_add = add;
  return op;
}

RdmaOp RdmaOp::compare_swap(RemoteBuffer dst, uint64_t offset, uint64_t compare, uint64_t swap) {
  RdmaOp op = fetch_add(std::move(dst), offset, compare);
  op.kind = OpKind::kCompareSwap;
  op.swap = swap;
  return op;
}

}  // namespace caf_rdma
