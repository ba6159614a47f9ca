// GoogleTest main for rdma-tagged tests.
//
// With an RDMA device on the host, the tests run on it. Without one:
//  - normally every test (each derives from RdmaTest, tests/rdma_test.h) is reported as SKIPPED
//    with the reason: in the log, in test.xml, and in the summary tests/run_tests.sh prints;
//  - with CAF_RDMA_REQUIRE_DEVICE=1 (set by --config=rxe, i.e. inside the Soft-RoCE VM) the
//    binary fails: a skip there would hide a broken VM lane.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "primitives/device_list.h"
#include "tests/rdma_test.h"

namespace caf_rdma::testing {
namespace {

std::string skip_reason;

}  // namespace

const std::string& rdma_skip_reason() {
  return skip_reason;
}

bool rdma_required() {
  const char* require = std::getenv("CAF_RDMA_REQUIRE_DEVICE");
  return require != nullptr && std::strcmp(require, "1") == 0;
}

}  // namespace caf_rdma::testing

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::string reason;
  std::vector<std::string> names;
  {
    auto list = caf_rdma::DeviceList::get();
    if (!list.ok())
      reason = list.error().to_string();
    else if (list->empty())
      reason = std::string("no RDMA device found on this host. ") + caf_rdma::kNoDeviceHint;
    else
      names = list->names();
  }
  if (!reason.empty()) {
    if (caf_rdma::testing::rdma_required()) {
      std::fprintf(stderr, "FAILED: CAF_RDMA_REQUIRE_DEVICE=1 but %s\n", reason.c_str());
      return 1;
    }
    const char* transport = std::getenv("CAF_RDMA_TRANSPORT");
    if (transport != nullptr && std::string(transport) == "rdma")
      std::fprintf(stderr, "\n*** SKIPPED (all tests in this binary): %s ***\n\n", reason.c_str());
    else  // the fallback twin runs everything; only tests that need a device skip
      std::fprintf(stderr, "no RDMA device (tests that need one skip): %s\n", reason.c_str());
    caf_rdma::testing::skip_reason = reason;
  } else {
    std::fprintf(stderr, "RDMA devices:");
    for (const auto& n : names)
      std::fprintf(stderr, " %s", n.c_str());
    std::fprintf(stderr, "\n");
  }
  return RUN_ALL_TESTS();
}
