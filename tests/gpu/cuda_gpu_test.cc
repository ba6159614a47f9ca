// GPU memory through the real CUDA driver (tag "gpu"): pointer classification of real
// allocations, and GPU<->host and GPU<->GPU transfers through two managers, directly
// (GPUDirect, where the NIC can register GPU memory) and forced through staging. Skipped, with
// the reason, where CUDA is not built (--config=cuda), the driver is missing or there is no GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "primitives/cuda_driver.h"
#include "tests/actors/manager_fixture.h"

namespace caf_rdma::testing {
namespace {

// The real device memory with GPUDirect refused, to force the staged path on any host.
class NoDirect : public DeviceMemory {
public:
  explicit NoDirect(std::shared_ptr<DeviceMemory> real) : real_(std::move(real)) {}
  std::string name() const override { return "cuda without GPUDirect"; }
  Result<PointerInfo> classify(uint64_t a, uint64_t n) const override {
    return real_->classify(a, n);
  }
  Status copy_to_host(void* d, uint64_t s, uint64_t n, int g) const override {
    return real_->copy_to_host(d, s, n, g);
  }
  Status copy_to_device(uint64_t d, const void* s, uint64_t n, int g) const override {
    return real_->copy_to_device(d, s, n, g);
  }
  Result<std::shared_ptr<MemoryRegion>> register_direct(const std::shared_ptr<ProtectionDomain>&,
                                                        const PointerInfo&, uint64_t, uint64_t,
                                                        Access) const override {
    return Error(ErrorCode::kIbverbsCall, "GPUDirect disabled by the test");
  }

private:
  std::shared_ptr<DeviceMemory> real_;
};

class CudaGpuTest : public ::testing::Test {
public:
  void SetUp() override {
    auto d = CudaDriver::get();
    if (!d.ok())
      GTEST_SKIP() << "no GPU to test: " << d.error().message();
    if ((*d)->device_count() == 0)
      GTEST_SKIP() << "no GPU to test: the CUDA driver sees no device";
    cuda_ = *d;
  }
  void TearDown() override {
    for (uint64_t p : allocations_)
      (void)cuda_->free_device(p);
  }

  uint64_t gpu_alloc(uint64_t n, uint32_t seed) {
    auto p = cuda_->alloc_device(n, 0);
    EXPECT_TRUE(p.ok()) << p.error().to_string();
    if (!p.ok())
      return 0;
    allocations_.push_back(*p);
    Memory m(n, seed);
    EXPECT_TRUE(cuda_->copy_to_device(*p, m.bytes.data(), n, 0).ok());
    return *p;
  }
  std::vector<uint8_t> gpu_read(uint64_t p, uint64_t n) {
    std::vector<uint8_t> out(n);
    EXPECT_TRUE(cuda_->copy_to_host(out.data(), p, n, 0).ok());
    return out;
  }
  std::unique_ptr<TestNode> node(std::shared_ptr<DeviceMemory> dm) {
    NodeOptions o;
    auto env = ManagerOptions::from_env();
    EXPECT_TRUE(env.ok());
    o.manager = *env;
    o.manager.device_memory = std::move(dm);
    o.manager.staging_bytes = 1 << 20;
    auto n = RdmaNode::start(o);
    EXPECT_TRUE(n.ok()) << n.error().to_string();
    return n.ok() ? std::make_unique<TestNode>(std::move(*n)) : nullptr;
  }

  CudaDriver* cuda_ = nullptr;
  std::vector<uint64_t> allocations_;
};

TEST_F(CudaGpuTest, RealAllocationsAreClassified) {
  uint64_t dev = gpu_alloc(1 << 20, 1);
  auto info = cuda_->pointer_info(reinterpret_cast<void*>(dev + 4096));
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_EQ(info->kind, MemoryKind::kDevice);
  EXPECT_EQ(info->device, 0);
  EXPECT_EQ(info->base, dev);
  EXPECT_EQ(info->size, 1u << 20);
  auto managed = cuda_->alloc_managed(1 << 16, 0);
  ASSERT_TRUE(managed.ok()) << managed.error().to_string();
  allocations_.push_back(*managed);
  EXPECT_EQ(cuda_->pointer_info(reinterpret_cast<void*>(*managed))->kind, MemoryKind::kManaged);
  std::vector<uint8_t> host(64);
  EXPECT_EQ(cuda_->pointer_info(host.data())->kind, MemoryKind::kHost);
  auto bus = cuda_->pci_bus_id(0);
  ASSERT_TRUE(bus.ok());
  EXPECT_EQ(bus->size(), 12u) << *bus;  // "0000:3b:00.0"
}

/// The memory kind the GPU buffers must get: CAF_RDMA_EXPECT_GPU_PATH=direct (a host with
/// GPUDirect: staging there would be a silent slowdown) or staged; unset: either.
std::optional<BufferMemory> expected_gpu_memory() {
  const char* v = std::getenv("CAF_RDMA_EXPECT_GPU_PATH");
  if (v == nullptr || *v == '\0')
    return std::nullopt;
  if (std::string(v) == "direct")
    return BufferMemory::kGpuDirect;
  if (std::string(v) == "staged")
    return BufferMemory::kGpuStaged;
  ADD_FAILURE() << "CAF_RDMA_EXPECT_GPU_PATH='" << v << "' must be direct or staged";
  return std::nullopt;
}

void gpu_round_trips(CudaGpuTest* t, std::unique_ptr<TestNode> a, std::unique_ptr<TestNode> b,
                     uint64_t (CudaGpuTest::*alloc)(uint64_t, uint32_t),
                     std::vector<uint8_t> (CudaGpuTest::*read)(uint64_t, uint64_t),
                     const char* label, std::optional<BufferMemory> expect = std::nullopt) {
  ASSERT_TRUE(a && b);
  constexpr uint64_t kSize = (8 << 20) + 3;
  uint64_t ga = (t->*alloc)(kSize, 11), gb = (t->*alloc)(kSize, 0);
  Memory host(kSize, 0);
  auto ha = a->request_buffer(ga, kSize);
  auto hb = b->request_buffer(gb, kSize);
  auto hh = b->request_buffer(host);
  ASSERT_TRUE(ha && hb && hh) << label;
  if (expect) {
    EXPECT_EQ(ha->memory, static_cast<uint8_t>(*expect)) << label << ": " << describe(*ha);
    EXPECT_EQ(hb->memory, static_cast<uint8_t>(*expect)) << label << ": " << describe(*hb);
  }
  if (ha->memory == static_cast<uint8_t>(BufferMemory::kGpuDirect)) {
    // Registered GPU memory has synchronous memory operations (GPUDirect RDMA guide).
    auto sync = t->cuda_->sync_memops(ga);
    ASSERT_TRUE(sync.ok()) << sync.error().to_string();
    EXPECT_TRUE(*sync) << label << ": SYNC_MEMOPS not set on a GPUDirect buffer";
  }
  // GPU (a) -> host (b), then GPU (a) -> GPU (b), then back into a's GPU from b's host.
  auto w = a->transfer(make_write(*ha, *hh), 60000);
  ASSERT_TRUE(w) << label << ": " << error_message(w.error());
  EXPECT_EQ(host.bytes, Memory(kSize, 11).bytes) << label;
  auto g2g = a->transfer(make_write(*ha, *hb), 60000);
  ASSERT_TRUE(g2g) << label << ": " << error_message(g2g.error());
  EXPECT_EQ((t->*read)(gb, kSize), Memory(kSize, 11).bytes) << label;
  Memory fresh(kSize, 12);
  host.bytes = fresh.bytes;
  auto r = a->transfer(make_read(*ha, *hh), 60000);
  ASSERT_TRUE(r) << label << ": " << error_message(r.error());
  EXPECT_EQ((t->*read)(ga, kSize), fresh.bytes) << label;
  std::printf("%s: GPU->host path %s, GPU->GPU path %s, host->GPU path %s\n", label,
              w->path.c_str(), g2g->path.c_str(), r->path.c_str());
}

TEST_F(CudaGpuTest, ManagersMoveGpuMemoryDirectlyWhereTheNicCan) {
  auto real = cuda_device_memory();
  ASSERT_TRUE(real);
  gpu_round_trips(this, node(real), node(real), &CudaGpuTest::gpu_alloc, &CudaGpuTest::gpu_read,
                  "direct-or-staged", expected_gpu_memory());
}

TEST_F(CudaGpuTest, ManagersStageGpuMemoryWhenGpuDirectIsUnavailable) {
  auto staged = std::make_shared<NoDirect>(cuda_device_memory());
  gpu_round_trips(this, node(staged), node(staged), &CudaGpuTest::gpu_alloc, &CudaGpuTest::gpu_read,
                  "staged", BufferMemory::kGpuStaged);
}

}  // namespace
}  // namespace caf_rdma::testing
