// Log lines (primitives/log.h): the level names, a bad CAF_RDMA_LOG named with its values, one
// whole line per call in the documented form, and nothing above the level.
#include "primitives/log.h"

#include <gtest/gtest.h>

#include <string>

namespace caf_rdma {
namespace {

TEST(LogTest, LevelsParseByNameAndABadOneNamesTheVariableAndTheValues) {
  for (LogLevel l : {LogLevel::kError, LogLevel::kWarn, LogLevel::kInfo, LogLevel::kDebug}) {
    auto parsed = parse_log_level(to_string(l));
    ASSERT_TRUE(parsed.ok()) << to_string(l);
    EXPECT_EQ(*parsed, l);
  }
  auto bad = parse_log_level("loud");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message().find("CAF_RDMA_LOG=loud"), std::string::npos)
      << bad.error().message();
  EXPECT_NE(bad.error().message().find("error, warn, info or debug"), std::string::npos)
      << bad.error().message();
}

// Invariants 1 and 3: a line at or below the level is written whole, one above it is not.
TEST(LogTest, OnlyLinesAtOrBelowTheLevelAreWrittenEachAsOneLine) {
  set_log_level(LogLevel::kWarn);
  ::testing::internal::CaptureStderr();
  log_line(LogLevel::kError, "buffer %d of %s failed", 7, "node a");
  log_line(LogLevel::kWarn, "fell back: %s", "no device");
  log_line(LogLevel::kInfo, "started");
  log_line(LogLevel::kDebug, "transfer %d", 1);
  std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(said,
            "caf-rdma error: buffer 7 of node a failed\n"
            "caf-rdma warn: fell back: no device\n");
  EXPECT_FALSE(log_enabled(LogLevel::kInfo));
  set_log_level(LogLevel::kDebug);
  EXPECT_TRUE(log_enabled(LogLevel::kDebug));
  ::testing::internal::CaptureStderr();
  log_line(LogLevel::kDebug, "transfer %d", 1);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "caf-rdma debug: transfer 1\n");
  std::string longest(5000, 'x');
  ::testing::internal::CaptureStderr();
  log_line(LogLevel::kError, "%s", longest.c_str());
  said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(said.back(), '\n');
  EXPECT_NE(said.find("[cut]"), std::string::npos) << "a cut line must say so";
}

}  // namespace
}  // namespace caf_rdma
