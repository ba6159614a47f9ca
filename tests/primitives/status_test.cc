// Status and Result (primitives/status.h): taking a Result's value while it holds an error, or
// the error of one that holds a value, throws BadResultAccess saying which error it held, never
// a bare std::bad_variant_access.
#include "primitives/status.h"

#include <gtest/gtest.h>

#include <string>

namespace caf_rdma {
namespace {

TEST(StatusTest, TheValueOfAnErrorThrowsBadResultAccessNamingTheError) {
  auto failed = [] {
    return Result<int>(Error(ErrorCode::kInvalidArgument, "CAF_RDMA_X='y' must be a or b"));
  };
  auto says_the_error = [](const BadResultAccess& e) {
    EXPECT_NE(std::string(e.what()).find("invalid_argument: CAF_RDMA_X='y' must be a or b"),
              std::string::npos)
        << e.what();
  };
  Result<int> r = failed();
  ASSERT_FALSE(r.ok());
  try {
    (void)*r;
    ADD_FAILURE() << "operator* returned a value";
  } catch (const BadResultAccess& e) {
    says_the_error(e);
  }
  try {
    (void)r.value();
    ADD_FAILURE() << "value() returned a value";
  } catch (const BadResultAccess& e) {
    says_the_error(e);
  }
  try {
    (void)failed().value();
    ADD_FAILURE() << "value() && returned a value";
  } catch (const BadResultAccess& e) {
    says_the_error(e);
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
