// The manager with GPU memory it registers or refuses, using FakeDeviceMemory
// (tests/fake_device_memory.h) so it runs without a GPU: GPUDirect registration when the NIC
// accepts GPU memory, owner-assisted access to a remote GPU buffer its NIC cannot register,
// allocations and classification the driver refuses, copy errors. Staging through bounce
// buffers is tests/actors/transfer/staged_path_test.cc; the real CUDA path is
// tests/gpu/cuda_gpu_test.cc (tag gpu).
#include <gtest/gtest.h>

#include <thread>

#include "tests/actors/gpu_node_test.h"

namespace caf_rdma::testing {
namespace {

class GpuMemoryTest : public GpuNodeTest {};

// A GPU buffer request that runs past its allocation is refused at once, naming it, on any
// transport (copies or registrations of it would touch other memory).
TEST_F(GpuMemoryTest, ABufferPastTheEndOfItsGpuAllocationIsRefused) {
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto a = node(gpu);
  ASSERT_TRUE(a);
  Memory device_mem(64 << 10, 1);
  gpu->add_gpu_range(device_mem.bytes.data(), 32 << 10, 0);  // the allocation: the first half
  auto g = a->request_buffer(device_mem);
  EXPECT_RDMA_ERROR(g, ErrorCode::kInvalidArgument, "runs past its GPU 0 allocation");
  auto ok = a->request_buffer(device_mem.addr(), 32 << 10);
  ASSERT_TRUE(ok) << error_message(ok.error());
}

TEST_F(GpuMemoryTest, GpuDirectRegistrationMovesBytesOneSided) {
  if (expected_path() != kPathRdma)
    GTEST_SKIP() << "GPUDirect needs an RDMA device; the fallback lane covers staging only";
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/true);
  auto a = node(gpu), b = node(nullptr);
  ASSERT_TRUE(a && b);
  Memory device_mem(256 << 10, 4), host(256 << 10, 0);
  gpu->add_gpu_range(device_mem.bytes.data(), device_mem.bytes.size(), 1);
  auto g = a->request_buffer(device_mem);
  auto h = b->request_buffer(host);
  ASSERT_TRUE(g && h);
  EXPECT_EQ(g->memory, static_cast<uint8_t>(BufferMemory::kGpuDirect));
  EXPECT_NE(g->rkey, 0u);
  // The host side reads the GPU buffer one-sided: no copies by the GPU's manager.
  auto r = b->transfer(make_read(*h, *g));
  ASSERT_TRUE(r) << error_message(r.error());
  EXPECT_EQ(r->path, kPathRdma);
  EXPECT_EQ(host.bytes, device_mem.bytes);
  EXPECT_EQ(gpu->to_host_bytes.load(), 0u);
}

TEST_F(GpuMemoryTest, RemoteGpuBufferItsNicCannotRegisterIsReachedThroughItsOwner) {
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto owner = node(gpu, TransportMode::kAuto), peer = node(nullptr, TransportMode::kAuto);
  ASSERT_TRUE(owner && peer);
  Memory device_mem(300 << 10, 5), host(300 << 10, 0);
  gpu->add_gpu_range(device_mem.bytes.data(), device_mem.bytes.size(), 0);
  auto g = owner->request_buffer(device_mem);
  auto h = peer->request_buffer(host);
  ASSERT_TRUE(g && h);
  auto r = peer->transfer(make_read(*h, *g));
  ASSERT_TRUE(r) << error_message(r.error());
  EXPECT_EQ(r->path, kPathFallback);
  EXPECT_EQ(host.bytes, device_mem.bytes);
  Memory back(300 << 10, 6);
  auto hb = peer->request_buffer(back);
  ASSERT_TRUE(hb);
  auto w = peer->transfer(make_write(*hb, *g));
  ASSERT_TRUE(w) << error_message(w.error());
  EXPECT_EQ(device_mem.bytes, back.bytes);
  EXPECT_GE(gpu->to_device_bytes.load(), uint64_t(300) << 10);
  if (expected_path() == kPathRdma) {
    // With the fallback forbidden, the error says why the owner's help is needed.
    auto strict = node(nullptr, TransportMode::kRdma);
    ASSERT_TRUE(strict);
    auto hs = strict->request_buffer(host);
    ASSERT_TRUE(hs);
    auto e = strict->transfer(make_read(*hs, *g));
    EXPECT_RDMA_ERROR(e, ErrorCode::kNoDevice, "cannot register the GPU memory of buffer");
  }
}

TEST_F(GpuMemoryTest, AFailingGpuCopyIsAnErrorNamingTheBuffer) {
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto a = node(gpu), b = node(nullptr);
  ASSERT_TRUE(a && b);
  Memory device_mem(100 << 10, 7), host(100 << 10, 0);
  gpu->add_gpu_range(device_mem.bytes.data(), device_mem.bytes.size(), 0);
  auto g = a->request_buffer(device_mem);
  auto h = b->request_buffer(host);
  ASSERT_TRUE(g && h);
  gpu->fail_copies(true);
  auto w = a->transfer(make_write(*g, *h));
  EXPECT_RDMA_ERROR(w, ErrorCode::kCuda, "fake cuMemcpyDtoHAsync failed");
  gpu->fail_copies(false);
  auto ok = a->transfer(make_write(*g, *h));  // the manager is not stuck
  ASSERT_TRUE(ok) << error_message(ok.error());
  EXPECT_EQ(host.bytes, device_mem.bytes);
}

// When the driver cannot tell host from GPU memory (cuPointerGetAttributes failing, e.g. a
// deinitialized driver), the request fails naming the address and the driver's error; it is
// not registered as host memory (which would pin the wrong pages, or fail later). Once the
// driver answers again, the same memory is classified and registered normally.
TEST_F(GpuMemoryTest, MemoryTheDriverCannotClassifyIsRefusedNotTakenForHost) {
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto a = node(gpu);
  ASSERT_TRUE(a);
  Memory device_mem(64 << 10, 5);
  gpu->add_gpu_range(device_mem.bytes.data(), device_mem.bytes.size(), 0);
  gpu->fail_classify(true);
  auto refused = a->request_buffer(device_mem);
  EXPECT_RDMA_ERROR(refused, ErrorCode::kCuda, "cannot tell host from GPU memory",
                    "CUDA_ERROR_DEINITIALIZED");
  std::string text = error_message(refused.error());
  EXPECT_NE(text.find(std::to_string(reinterpret_cast<uint64_t>(device_mem.bytes.data()))),
            std::string::npos)
      << text;
  gpu->fail_classify(false);
  auto g = a->request_buffer(device_mem);
  ASSERT_TRUE(g) << error_message(g.error());
  EXPECT_EQ(g->memory, static_cast<uint8_t>(BufferMemory::kGpuStaged));
  EXPECT_EQ(g->gpu, 0);
}

}  // namespace
}  // namespace caf_rdma::testing
