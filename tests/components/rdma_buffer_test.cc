// Bounds and liveness checks of buffers, done before any work request is posted.
#include "components/rdma_buffer.h"

#include <gtest/gtest.h>

namespace caf_rdma {
namespace {

TEST(RemoteBuffer, RangeChecksNameTheBufferAndTheRange) {
  RemoteBuffer r{0x7f0000001000, 4096, 0x1234, "rxe0"};
  EXPECT_TRUE(r.check_range(0, 4096, "x").ok());
  EXPECT_TRUE(r.check_range(4095, 1, "x").ok());
  Status st = r.check_range(4000, 200, "remote destination");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kOutOfBounds);
  const std::string& m = st.error().message();
  EXPECT_NE(m.find("remote destination"), std::string::npos) << m;
  EXPECT_NE(m.find("offset 4000 length 200"), std::string::npos) << m;
  EXPECT_NE(m.find("0x7f0000001000+4096"), std::string::npos) << m;
  EXPECT_NE(m.find("rkey 0x1234 on rxe0"), std::string::npos) << m;
  // Offsets that would overflow are out of bounds, not wrapped around.
  EXPECT_EQ(r.check_range(~uint64_t{0}, 2, "x").error().code(), ErrorCode::kOutOfBounds);
  EXPECT_EQ(r.check_range(8192, 1, "x").error().code(), ErrorCode::kOutOfBounds);
  Status zero = r.check_range(0, 0, "x");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(zero.error().message().find("zero-length"), std::string::npos);
}

TEST(RdmaBuffer, ReleasedBufferRefusesWork) {
  RdmaBuffer b;  // never registered: same state as after release()
  EXPECT_TRUE(b.released());
  Status st = b.check_range(0, 1, "RDMA WRITE source");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kReleased);
  EXPECT_NE(st.error().message().find("was released"), std::string::npos);
}

}  // namespace
}  // namespace caf_rdma
