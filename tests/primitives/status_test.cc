// Status and Result (primitives/status.h): taking a Result's value while it holds an error, or
// the error of one that holds a value, throws BadResultAccess saying which error it held, never
// a bare std::bad_variant_access.
#include "primitives/status.h"

#include <gtest/gtest.h>

#include <string>

namespace caf_rdma {
namespace {

TEST(StatusTest, TheValueOfAnErrorThrowsBadResultAccessNamingTheError) {
  Result<int> r = Error(ErrorCode::kInvalidArgument, "CAF_RDMA_X='y' must be a or b");
  ASSERT_FALSE(r.ok());
  for (int i = 0; i < 3; ++i) {
    try {
      if (i == 0)
        (void)*r;
      else if (i == 1)
        (void)r.value();
      else
        (void)std::move(r).value();
      ADD_FAILURE() << "accessor " << i << " returned a value";
    } catch (const BadResultAccess& e) {
      EXPECT_NE(std::string(e.what()).find("invalid_argument: CAF_RDMA_X='y' must be a or b"),
                std::string::npos)
          << e.what();
    }
  }
  Result<int> fine = 3;
  EXPECT_EQ(*fine, 3);
  EXPECT_THROW((void)fine.error(), BadResultAccess);
  Status ok;
  EXPECT_THROW((void)ok.error(), BadResultAccess);
  Status bad = Error(ErrorCode::kTimeout, "late");
  EXPECT_EQ(bad.error().message(), "late");
}

}  // namespace
}  // namespace caf_rdma
