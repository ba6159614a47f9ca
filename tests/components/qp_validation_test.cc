// validate_op (components/qp_validation.h) without a device: the checks that need no
// registered memory. The checks of local buffers run on a device in rdma_queue_pair_test
// (OutOfBoundsIsRefusedBeforePosting, ReadOnlyBufferCannotBeAReadDestination,
// ReleasedLocalBufferIsRefused). Test names refer to the invariants of qp_validation.h.
#include "components/qp_validation.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace caf_rdma {
namespace {

RemoteBuffer remote_word(uint64_t incarnation = 0) {
  RemoteBuffer r;
  r.addr = 0x10000;
  r.size = 64;
  r.rkey = 0x1234;
  r.device = "rxe0";
  r.incarnation = incarnation;
  return r;
}

OpBounds bounds(uint64_t remote_incarnation = 0) {
  OpBounds b;
  b.caps.max_send_sge = 4;
  b.caps.max_recv_sge = 4;
  b.max_message = 1 << 20;
  b.remote_incarnation = remote_incarnation;
  b.qp_name = "rxe0 QP 17";
  return b;
}

bool mentions(const Status& st, const std::string& what) {
  return !st.ok() && st.error().message().find(what) != std::string::npos;
}

// Invariant 2.
TEST(QpValidation, AtomicsNeedAnAlignedWordInBounds) {
  EXPECT_TRUE(validate_op(RdmaOp::fetch_add(remote_word(), 8, 1), bounds()).ok());
  EXPECT_TRUE(validate_op(RdmaOp::compare_swap(remote_word(), 56, 1, 2), bounds()).ok());
  Status misaligned = validate_op(RdmaOp::fetch_add(remote_word(), 4, 1), bounds());
  EXPECT_TRUE(mentions(misaligned, "not 8-byte aligned")) << misaligned.error().message();
  Status beyond = validate_op(RdmaOp::fetch_add(remote_word(), 64, 1), bounds());
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.error().code(), ErrorCode::kOutOfBounds);
  RdmaOp with_local = RdmaOp::fetch_add(remote_word(), 0, 1);
  with_local.local.push_back(LocalSlice{});
  EXPECT_TRUE(mentions(validate_op(with_local, bounds()), "takes no local slices"));
}

// Invariant 4.
TEST(QpValidation, ARemoteBufferOfAnotherIncarnationIsRefused) {
  EXPECT_TRUE(validate_op(RdmaOp::fetch_add(remote_word(7), 0, 1), bounds(7)).ok());
  EXPECT_TRUE(validate_op(RdmaOp::fetch_add(remote_word(0), 0, 1), bounds(7)).ok())
      << "a handle that names no incarnation is not checked";
  EXPECT_TRUE(validate_op(RdmaOp::fetch_add(remote_word(7), 0, 1), bounds(0)).ok())
      << "a peer that named none is not checked";
  Status stale = validate_op(RdmaOp::fetch_add(remote_word(7), 0, 1), bounds(8));
  EXPECT_TRUE(mentions(stale, "went away and came back")) << stale.error().message();
}

// Invariants 1 and 5.
TEST(QpValidation, LocalMemoryIsRequiredAndLive) {
  RdmaOp send;
  send.kind = OpKind::kSend;
  EXPECT_TRUE(mentions(validate_op(send, bounds()), "SEND without local memory"));
  RdmaOp write = RdmaOp::write(LocalSlice{RdmaBuffer{}, 0, 16}, remote_word());
  Status released = validate_op(write, bounds());
  ASSERT_FALSE(released.ok());
  EXPECT_EQ(released.error().code(), ErrorCode::kReleased) << released.error().message();
}

// Invariant 5: a list made of no ranges (no table, or none of it) stays a list, which
// validation refuses, never a plain op over the whole local buffer.
TEST(QpValidation, AListOfNoRangesStaysAList) {
  RdmaOp none = RdmaOp::list_of(true, RdmaBuffer{}, remote_word(), OpList::of(nullptr, 0, 3));
  EXPECT_TRUE(none.is_list());
  EXPECT_EQ(none.list.count, 0u);
  auto table = std::make_shared<const std::vector<ListEntry>>(2, ListEntry{});
  RdmaOp past = RdmaOp::list_of(false, RdmaBuffer{}, remote_word(), OpList::of(table, 2, 1));
  EXPECT_TRUE(past.is_list());
  EXPECT_EQ(past.list.count, 0u);
  EXPECT_FALSE(RdmaOp::write(LocalSlice{RdmaBuffer{}, 0, 16}, remote_word()).is_list());
}

}  // namespace
}  // namespace caf_rdma
