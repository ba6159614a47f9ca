// The message helpers of actors/rdma_messages.h: a Range names each of its numbers, both ways
// of making an op (Range, or the integers in their order) make the same op, and a batch
// outcome converts to the API's one error type.
#include "actors/rdma_messages.h"

#include <gtest/gtest.h>

namespace caf_rdma {
namespace {

TEST(RdmaMessagesTest, ARangeSaysWhichNumberIsWhich) {
  Range whole = Range::whole();
  EXPECT_EQ(whole.length, kWholeSpan);
  EXPECT_EQ(whole.local_offset, 0u);
  EXPECT_EQ(whole.remote_offset, 0u);
  Range r = Range::of(4096).at_local(512).at_remote(8192);
  EXPECT_EQ(r.length, 4096u);
  EXPECT_EQ(r.local_offset, 512u);
  EXPECT_EQ(r.remote_offset, 8192u);
  EXPECT_EQ(Range::of(7).at_remote(3).at_local(1).local_offset, 1u) << "either order";
}

TEST(RdmaMessagesTest, ARangeAndTheIntegersMakeTheSameOps) {
  BufferHandle local, remote;
  local.id = 1;
  remote.id = 2;
  for (bool read : {true, false}) {
    TransferOp a = read ? make_read(local, remote, Range::of(100).at_local(10).at_remote(20))
                        : make_write(local, remote, Range::of(100).at_local(10).at_remote(20));
    TransferOp b =
        read ? make_read(local, remote, 100, 10, 20) : make_write(local, remote, 100, 10, 20);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(is_read(a), read);
    EXPECT_EQ(a.length, 100u);
    EXPECT_EQ(a.local_offset, 10u);
    EXPECT_EQ(a.remote_offset, 20u);
    EXPECT_EQ(a.length, b.length);
    EXPECT_EQ(a.local_offset, b.local_offset);
    EXPECT_EQ(a.remote_offset, b.remote_offset);
    EXPECT_EQ(a.local.id, 1u);
    EXPECT_EQ(a.remote.id, 2u);
  }
}

// One error type at the API: a batch outcome gives the same Error a blocking call returns.
TEST(RdmaMessagesTest, ABatchOutcomeIsTheOneErrorType) {
  TransferOutcome done;
  done.bytes = 8;
  done.path = kPathFallback;
  EXPECT_TRUE(done.status().ok());
  TransferOutcome failed;
  failed.code = static_cast<uint8_t>(ErrorCode::kOutOfBounds);
  failed.message = "read of 8 bytes at 4096 is outside buffer 7 (4096 bytes)";
  Status st = failed.status();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kOutOfBounds);
  EXPECT_EQ(st.error().message(), failed.message);
}

}  // namespace
}  // namespace caf_rdma
