// The staging planner and the GPUDirect registration chain (attempts in order, first success
// wins, an error naming every attempt), without a GPU: the attempts are test functions.
#include <gtest/gtest.h>

#include "components/gpu_registration.h"
#include "components/staging_plan.h"

namespace caf_rdma {
namespace {

TEST(StagingPlanTest, ChunksCoverTheTransferInOrderWithinTheBounceSize) {
  auto plan = plan_staging((1 << 20) + 5, 64 << 10);
  ASSERT_EQ(plan.size(), 17u);
  uint64_t next = 0;
  for (const auto& c : plan) {
    EXPECT_EQ(c.offset, next);
    EXPECT_LE(c.length, 64u << 10);
    EXPECT_GT(c.length, 0u);
    next += c.length;
  }
  EXPECT_EQ(next, (1u << 20) + 5);
  EXPECT_EQ(plan.back().length, 5u);
  EXPECT_EQ(plan_staging(100, 4096).size(), 1u);
  EXPECT_TRUE(plan_staging(0, 4096).empty());
  EXPECT_TRUE(plan_staging(100, 0).empty());
}

TEST(GpuRegistrationTest, FirstAttemptThatWorksWinsAndLaterOnesAreNotTried) {
  int calls = 0;
  std::vector<RegistrationAttempt> attempts = {
      {"dmabuf",
       [&]() -> Result<std::shared_ptr<MemoryRegion>> {
         ++calls;
         return Error(ErrorCode::kIbverbsCall, "ibv_reg_dmabuf_mr: Operation not supported");
       }},
      {"nvidia_peermem",
       [&]() -> Result<std::shared_ptr<MemoryRegion>> {
         ++calls;
         return std::shared_ptr<MemoryRegion>();  // "registered"
       }},
      {"never",
       [&]() -> Result<std::shared_ptr<MemoryRegion>> {
         ADD_FAILURE() << "tried after a success";
         return Error(ErrorCode::kInternal, "x");
       }},
  };
  auto r = register_first_that_works(attempts, "GPU 0 memory 0x1000+4096");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(calls, 2);
}

TEST(GpuRegistrationTest, WhenNothingWorksTheErrorNamesEveryAttemptAndWhy) {
  std::vector<RegistrationAttempt> attempts = {
      {"dmabuf",
       [] {
         return Result<std::shared_ptr<MemoryRegion>>(Error(ErrorCode::kCuda,
                                                            "cuMemGetHandleForAddressRange failed: "
                                                            "CUDA_ERROR_NOT_SUPPORTED"));
       }},
      {"nvidia_peermem",
       [] {
         return Result<std::shared_ptr<MemoryRegion>>(
             Error(ErrorCode::kIbverbsCall, "ibv_reg_mr: Bad address"));
       }},
  };
  auto r = register_first_that_works(attempts, "GPU 1 memory 0x7f00+65536");
  ASSERT_FALSE(r.ok());
  const std::string& m = r.error().message();
  EXPECT_NE(m.find("cannot register GPU 1 memory 0x7f00+65536 with the NIC"), std::string::npos)
      << m;
  EXPECT_NE(m.find("dmabuf: cuda: cuMemGetHandleForAddressRange failed: CUDA_ERROR_NOT_SUPPORTED"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("nvidia_peermem: ibverbs_call: ibv_reg_mr: Bad address"), std::string::npos)
      << m;
  EXPECT_LT(m.find("dmabuf"), m.find("nvidia_peermem")) << "dmabuf is tried first";
}

}  // namespace
}  // namespace caf_rdma
