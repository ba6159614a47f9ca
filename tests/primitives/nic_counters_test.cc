// NicCounters (primitives/nic_counters.h) on a sysfs tree made by the test: every numeric file
// of both groups of every port, in order (invariant 1: read when asked); files that are not
// numbers left out (invariant 2); a device without a folder is not_found naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "primitives/nic_counters.h"

namespace caf_rdma {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

TEST(NicCountersTest, ReadsEveryNumericCounterOfEveryPortWhenAsked) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path root = fs::path(tmp != nullptr ? tmp : "/tmp") / "nic_counters_sysfs";
  fs::remove_all(root);
  write(root / "rxe0/ports/1/hw_counters/sent_pkts", "42\n");
  write(root / "rxe0/ports/1/hw_counters/duplicate_request", "0\n");
  write(root / "rxe0/ports/1/counters/port_xmit_data", "7\n");
  write(root / "rxe0/ports/1/counters/state_text", "ACTIVE\n");  // invariant 2: left out
  write(root / "rxe0/ports/2/hw_counters/sent_pkts", "3\n");
  auto c = read_nic_counters("rxe0", root.string());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  ASSERT_EQ(c->size(), 4U);
  EXPECT_EQ((*c)[0].group, "counters");
  EXPECT_EQ((*c)[0].name, "port_xmit_data");
  EXPECT_EQ((*c)[0].value, 7U);
  EXPECT_EQ((*c)[1].name, "duplicate_request");
  EXPECT_EQ((*c)[2].name, "sent_pkts");
  EXPECT_EQ((*c)[2].value, 42U);
  EXPECT_EQ((*c)[3].port, "2");
  write(root / "rxe0/ports/1/hw_counters/sent_pkts", "43\n");  // invariant 1: not cached
  EXPECT_EQ((*read_nic_counters("rxe0", root.string()))[2].value, 43U);
  auto none = read_nic_counters("mlx5_9", root.string());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), ErrorCode::kNotFound);
  EXPECT_NE(none.error().message().find("mlx5_9"), std::string::npos) << none.error().message();
}

}  // namespace
}  // namespace caf_rdma
