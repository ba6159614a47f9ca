// GPU memory through the real CUDA driver (tag "gpu"): pointer classification of real
// allocations, and GPU<->host and GPU<->GPU transfers through two managers, directly
// (GPUDirect, where the NIC can register GPU memory) and forced through staging; bytes a kernel
// wrote, an unaligned sub-range of an allocation, small allocations packed into one page and
// pool (cudaMallocAsync) memory; the dmabuf export of each of those from a thread without a
// CUDA context; page-locked bounce buffers. Skipped, with the reason, where CUDA is not built
// (--config=cuda), the driver is missing or there is no GPU.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "actors/rdma_client.h"
#include "actors/ring_proxy.h"
#include "components/bounce_buffer.h"
#include "components/dmabuf_span.h"
#include "components/op_ring.h"
#include "examples/gpu_ring_kernels_ptx.h"
#include "primitives/cuda_driver.h"
#include "tests/actors/manager_fixture.h"
#include "tests/gpu/cuda_test_api.h"

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
  Status page_lock(void* p, uint64_t n, int g) const override { return real_->page_lock(p, n, g); }
  Status page_unlock(void* p, int g) const override { return real_->page_unlock(p, g); }
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
    auto api = CudaTestApi::load();
    ASSERT_TRUE(api.ok()) << api.error().to_string();
    api_ = *api;
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

  /// n bytes of GPU memory written by the fill kernel (never by a host copy).
  uint64_t gpu_alloc_by_kernel(uint64_t n, uint32_t seed) {
    auto p = cuda_->alloc_device(n, 0);
    EXPECT_TRUE(p.ok()) << p.error().to_string();
    if (!p.ok())
      return 0;
    allocations_.push_back(*p);
    Status st = api_.fill(*p, n, seed);
    EXPECT_TRUE(st.ok()) << st.error().to_string();
    return *p;
  }

  CudaDriver* cuda_ = nullptr;
  CudaTestApi api_;
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

TEST_F(CudaGpuTest, BytesAKernelWroteArriveWhole) {
  // The consistency contract: work that wrote the memory has finished (fill synchronizes)
  // before the transfer is asked for; the transfer then sees every byte the kernel wrote.
  auto real = cuda_device_memory();
  auto a = node(real), b = node(real);
  ASSERT_TRUE(a && b);
  constexpr uint64_t kSize = (4 << 20) + 13;
  uint64_t g = gpu_alloc_by_kernel(kSize, 41);
  EXPECT_EQ(gpu_read(g, kSize), Memory(kSize, 41).bytes) << "the kernel's own output";
  Memory host(kSize, 0);
  auto hg = a->request_buffer(g, kSize);
  auto hh = b->request_buffer(host);
  ASSERT_TRUE(hg && hh);
  auto w = a->transfer(make_write(*hg, *hh), 60000);
  ASSERT_TRUE(w) << error_message(w.error());
  EXPECT_EQ(host.bytes, Memory(kSize, 41).bytes) << "path " << w->path;
  // The other way: b reads the kernel's bytes out of a's GPU buffer.
  Memory host2(kSize, 0);
  auto hh2 = b->request_buffer(host2);
  ASSERT_TRUE(hh2);
  auto r = b->transfer(make_read(*hh2, *hg), 60000);
  ASSERT_TRUE(r) << error_message(r.error());
  EXPECT_EQ(host2.bytes, Memory(kSize, 41).bytes) << "path " << r->path;
}

TEST_F(CudaGpuTest, AnUnalignedSubRangeMovesOnlyItsBytes) {
  auto real = cuda_device_memory();
  auto a = node(real), b = node(real);
  ASSERT_TRUE(a && b);
  constexpr uint64_t kAlloc = 1 << 20, kOff = 4097, kLen = 300001;
  uint64_t g = gpu_alloc_by_kernel(kAlloc, 51);
  auto hg = a->request_buffer(g + kOff, kLen);
  ASSERT_TRUE(hg) << error_message(hg.error());
  EXPECT_EQ(hg->addr, g + kOff);
  Memory out(kLen, 0), in(kLen, 52);
  auto ho = b->request_buffer(out);
  auto hi = b->request_buffer(in);
  ASSERT_TRUE(ho && hi);
  auto w = a->transfer(make_write(*hg, *ho), 60000);
  ASSERT_TRUE(w) << error_message(w.error());
  Memory whole(kAlloc, 51);
  EXPECT_TRUE(std::equal(out.bytes.begin(), out.bytes.end(), whole.bytes.begin() + kOff))
      << "the sub-range's bytes, path " << w->path;
  auto r = a->transfer(make_read(*hg, *hi), 60000);
  ASSERT_TRUE(r) << error_message(r.error());
  auto after = gpu_read(g, kAlloc);
  for (uint64_t i = 0; i < kAlloc; ++i) {
    uint8_t want = i >= kOff && i < kOff + kLen ? in.bytes[i - kOff] : whole.bytes[i];
    ASSERT_EQ(after[i], want) << "GPU byte " << i << " (sub-range [" << kOff << ", " << kOff + kLen
                              << ")), path " << r->path;
  }
}

TEST_F(CudaGpuTest, SmallAllocationsPackedIntoOnePageStaySeparate) {
  auto real = cuda_device_memory();
  auto a = node(real), b = node(real);
  ASSERT_TRUE(a && b);
  constexpr int kCount = 8;
  constexpr uint64_t kSize = 1000;
  std::vector<uint64_t> g;
  std::vector<std::unique_ptr<Memory>> in;
  std::vector<BufferHandle> hg, hi;
  for (int i = 0; i < kCount; ++i) {
    g.push_back(gpu_alloc_by_kernel(kSize, 60 + i));
    in.push_back(std::make_unique<Memory>(kSize, 70 + i));
    auto x = a->request_buffer(g.back(), kSize);
    auto y = b->request_buffer(*in.back());
    ASSERT_TRUE(x && y) << i << ": " << (x ? "" : error_message(x.error()));
    hg.push_back(*x);
    hi.push_back(*y);
  }
  long page = ::sysconf(_SC_PAGESIZE);
  std::printf("small allocations at:");
  for (uint64_t p : g)
    std::printf(" 0x%llx", static_cast<unsigned long long>(p));
  std::printf(" (page %ld)\n", page);
  // Each buffer is overwritten from its own host buffer; its neighbours keep their bytes.
  for (int i = 0; i < kCount; i += 2) {
    auto r = a->transfer(make_read(hg[i], hi[i]), 60000);
    ASSERT_TRUE(r) << i << ": " << error_message(r.error());
  }
  for (int i = 0; i < kCount; ++i) {
    auto want = i % 2 == 0 ? in[i]->bytes : Memory(kSize, 60 + i).bytes;
    EXPECT_EQ(gpu_read(g[i], kSize), want) << "allocation " << i;
  }
}

TEST_F(CudaGpuTest, PoolMemoryMovesLikeAnyGpuMemory) {
  auto real = cuda_device_memory();
  auto a = node(real), b = node(real);
  ASSERT_TRUE(a && b);
  constexpr uint64_t kSize = (2 << 20) + 100;
  auto p = api_.alloc_from_pool(kSize);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  Status st = api_.fill(*p, kSize, 81);
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  auto info = cuda_->pointer_info(reinterpret_cast<void*>(*p));
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_EQ(info->kind, MemoryKind::kDevice);
  std::printf("pool allocation 0x%llx+%llu: range 0x%llx+%llu\n",
              static_cast<unsigned long long>(*p), static_cast<unsigned long long>(kSize),
              static_cast<unsigned long long>(info->base),
              static_cast<unsigned long long>(info->size));
  Memory host(kSize, 0);
  auto hp = a->request_buffer(*p, kSize);
  auto hh = b->request_buffer(host);
  ASSERT_TRUE(hp && hh) << (hp ? "" : error_message(hp.error()));
  auto w = a->transfer(make_write(*hp, *hh), 60000);
  ASSERT_TRUE(w) << error_message(w.error());
  EXPECT_EQ(host.bytes, Memory(kSize, 81).bytes) << "path " << w->path;
  a.reset();
  b.reset();
  EXPECT_TRUE(api_.free_to_pool(*p).ok());
}

/// Exports [addr, addr + size) as the dmabuf registration does (dmabuf_span), from a new
/// thread, which has no CUDA context current (manager workers have none either).
Status export_span_from_fresh_thread(CudaDriver* cuda, uint64_t addr, uint64_t size) {
  Status out;
  std::thread t([&] {
    long page = ::sysconf(_SC_PAGESIZE);
    auto span = dmabuf_span(addr, size, static_cast<uint64_t>(page));
    if (!span.ok()) {
      out = span.error();
      return;
    }
    auto fd = cuda->dmabuf_fd(span->start, span->length, 0);
    if (!fd.ok()) {
      out = fd.error();
      return;
    }
    ::close(*fd);
  });
  t.join();
  return out;
}

TEST_F(CudaGpuTest, DmabufExportCoversSubRangesSmallAndPoolAllocations) {
  uint64_t big = gpu_alloc(4 << 20, 1);
  Status whole = export_span_from_fresh_thread(cuda_, big, 4 << 20);
  if (!whole.ok() && whole.error().message().find("NOT_SUPPORTED") != std::string::npos)
    GTEST_SKIP() << "this GPU driver exports no dmabufs: " << whole.error().message();
  ASSERT_TRUE(whole.ok()) << whole.error().to_string();
  Status sub = export_span_from_fresh_thread(cuda_, big + 4097, 300001);
  EXPECT_TRUE(sub.ok()) << "unaligned sub-range: " << sub.error().to_string();
  std::vector<uint64_t> small;
  small.reserve(4);
  for (int i = 0; i < 4; ++i)
    small.push_back(gpu_alloc(1000, 2));
  for (uint64_t p : small) {
    Status st = export_span_from_fresh_thread(cuda_, p, 1000);
    EXPECT_TRUE(st.ok()) << "small allocation 0x" << std::hex << p << ": "
                         << st.error().to_string();
    // What the export from the allocation's start (256-byte aligned only) did before: say
    // what the driver answers, for the record.
    auto direct = cuda_->dmabuf_fd(p, 1000, 0);
    std::printf("export from the allocation's start 0x%llx (1000 bytes): %s\n",
                static_cast<unsigned long long>(p),
                direct.ok() ? "accepted" : direct.error().message().c_str());
    if (direct.ok())
      ::close(*direct);
  }
  auto pool = api_.alloc_from_pool((2 << 20) + 100);
  ASSERT_TRUE(pool.ok()) << pool.error().to_string();
  Status ps = export_span_from_fresh_thread(cuda_, *pool + 100, 2 << 20);
  EXPECT_TRUE(ps.ok()) << "pool memory: " << ps.error().to_string();
  EXPECT_TRUE(api_.free_to_pool(*pool).ok());
}

// Memory a CUDA program hands over besides cudaMalloc's: page-locked host memory (what
// cudaHostRegister / cudaMallocHost make) registers as host memory, managed memory
// (cudaMallocManaged) as GPU memory; both move every byte both ways, on any transport.
TEST_F(CudaGpuTest, PageLockedHostAndManagedMemoryMoveEveryByte) {
  auto real = cuda_device_memory();
  ASSERT_TRUE(real);
  auto a = node(real), b = node(real);
  ASSERT_TRUE(a && b);
  constexpr uint64_t kSize = (2 << 20) + 5;
  Memory src(kSize, 21), back(kSize, 0);
  auto hsrc = a->request_buffer(src);
  auto hback = a->request_buffer(back);
  ASSERT_TRUE(hsrc && hback);

  auto pinned = BounceBuffer::allocate(kSize, real, 0);
  ASSERT_TRUE(pinned.ok()) << pinned.error().to_string();
  ASSERT_TRUE((*pinned)->page_locked()) << (*pinned)->lock_error();
  std::memset((*pinned)->data(), 0, kSize);
  auto hpin = b->request_buffer(reinterpret_cast<uint64_t>((*pinned)->data()), kSize);
  ASSERT_TRUE(hpin) << error_message(hpin.error());
  EXPECT_EQ(hpin->memory, static_cast<uint8_t>(BufferMemory::kHost)) << describe(*hpin);
  auto w = a->transfer(make_write(*hsrc, *hpin), 60000);
  ASSERT_TRUE(w) << error_message(w.error());
  EXPECT_EQ(std::memcmp((*pinned)->data(), src.bytes.data(), kSize), 0) << "page-locked write";
  auto r = a->transfer(make_read(*hback, *hpin), 60000);
  ASSERT_TRUE(r) << error_message(r.error());
  EXPECT_EQ(back.bytes, src.bytes) << "page-locked read";
  ASSERT_TRUE(b->release(hpin->id));
  const std::string pinned_paths = w->path + ", " + r->path;

  auto managed = cuda_->alloc_managed(kSize, 0);
  ASSERT_TRUE(managed.ok()) << managed.error().to_string();
  allocations_.push_back(*managed);
  auto hm = b->request_buffer(*managed, kSize);
  ASSERT_TRUE(hm) << error_message(hm.error());
  std::fill(back.bytes.begin(), back.bytes.end(), 0);
  w = a->transfer(make_write(*hsrc, *hm), 60000);
  ASSERT_TRUE(w) << error_message(w.error());
  EXPECT_EQ(gpu_read(*managed, kSize), src.bytes) << "managed write (" << w->path << ")";
  r = a->transfer(make_read(*hback, *hm), 60000);
  ASSERT_TRUE(r) << error_message(r.error());
  EXPECT_EQ(back.bytes, src.bytes) << "managed read (" << r->path << ")";
  std::printf("page-locked host: paths %s; managed (%s): paths %s, %s\n", pinned_paths.c_str(),
              describe(*hm).c_str(), w->path.c_str(), r->path.c_str());
  ASSERT_TRUE(b->release(hm->id));
}

TEST_F(CudaGpuTest, BounceBuffersArePageLockedForTheCopyEngines) {
  auto real = cuda_device_memory();
  constexpr uint64_t kSize = 8 << 20;
  auto b = BounceBuffer::allocate(kSize, real, 0);
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  ASSERT_TRUE((*b)->page_locked()) << (*b)->lock_error();
  EXPECT_EQ(reinterpret_cast<uint64_t>((*b)->data()) % ::sysconf(_SC_PAGESIZE), 0u);
  auto info = cuda_->pointer_info((*b)->data());
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_EQ(info->kind, MemoryKind::kPinnedHost);
  // Copies through it move every byte both ways.
  uint64_t g = gpu_alloc_by_kernel(kSize, 91);
  ASSERT_TRUE(real->copy_to_host((*b)->data(), g, kSize, 0).ok());
  Memory want(kSize, 91);
  EXPECT_EQ(std::memcmp((*b)->data(), want.bytes.data(), kSize), 0);
  Memory other(kSize, 92);
  std::memcpy((*b)->data(), other.bytes.data(), kSize);
  ASSERT_TRUE(real->copy_to_device(g, (*b)->data(), kSize, 0).ok());
  EXPECT_EQ(gpu_read(g, kSize), other.bytes);
  // For the record (not asserted: timing): GPU->host copy rate, pinned vs pageable.
  std::vector<uint8_t> pageable(kSize);
  auto rate = [&](void* dst) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i)
      (void)real->copy_to_host(dst, g, kSize, 0);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return 20.0 * kSize / s / 1e9;
  };
  double pinned_gbs = rate((*b)->data()), pageable_gbs = rate(pageable.data());
  std::printf(
      "GPU->host copies of 8 MiB: page-locked bounce buffer %.1f GB/s, pageable %.1f "
      "GB/s (ratio %.2f)\n",
      pinned_gbs, pageable_gbs, pinned_gbs / pageable_gbs);
}

// A kernel starts transfers itself (components/op_ring_device.cuh, examples/gpu_ring_kernels.cu,
// compiled to PTX at build time): 10,000 puts of 8 bytes published from GPU threads into a
// host-mapped OpRing, moved to a peer node by the RingProxy; every byte lands and the ring's
// counters say 10,000 done. Then one GPU thread's 8-byte put and wait for it, 101 times: the
// median printed beside a CPU-initiated 8-byte write's (for the record, not asserted).
TEST_F(CudaGpuTest, PutsAKernelPublishesInARingLandAndTheirLatencyIsPrinted) {
#ifdef CAF_RDMA_WITH_CUDA
  ASSERT_NE(kGpuRingKernelsPtx[0], '\0') << "built with --config=cuda but without ring kernels";
  constexpr uint64_t kPuts = 10000, kRounds = 101, kCapacity = 1024;
  auto real = cuda_device_memory();
  auto owner = node(real), user = node(real);
  ASSERT_TRUE(owner && user);
  Memory theirs((kPuts + kRounds) * 8, 0), mine(kPuts * 8, 5);
  BufferHandle remote = remote_view(*owner, *user, theirs, "gpu-ring");
  RdmaClient me(user->node().system(), user->manager());
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  uint64_t ring_device = 0;
  auto ring_host = api_.host_alloc_mapped(op_ring_bytes(kCapacity), &ring_device);
  ASSERT_TRUE(ring_host.ok()) << ring_host.error().to_string();
  struct FreeHost {
    const CudaTestApi& api;
    void* p;
    ~FreeHost() { (void)api.free_host(p); }
  } free_ring{api_, *ring_host};
  auto ring = OpRing::create(*ring_host, op_ring_bytes(kCapacity), kCapacity);
  ASSERT_TRUE(ring.ok()) << ring.error().to_string();
  const uint64_t counters = gpu_alloc(16, 0);  // the reservation counter and no_room, zeroed
  ASSERT_NE(counters, 0u);
  auto proxy = RingProxy::start(user->node().system(), user->manager(), *ring,
                                {RingProxy::BufferPair{local->handle(), remote}});
  ASSERT_TRUE(proxy.ok()) << proxy.error().to_string();
  OpRingDevice dev{reinterpret_cast<OpRingHeader*>(ring_device),
                   reinterpret_cast<unsigned long long*>(counters), kCapacity};
  auto puts = api_.kernel(kGpuRingKernelsPtx, "caf_rdma_ring_puts");
  ASSERT_TRUE(puts.ok()) << puts.error().to_string();
  unsigned long long n = kPuts;  // NOLINT(google-runtime-int)
  auto* no_room = reinterpret_cast<unsigned long long*>(counters + 8);  // NOLINT
  unsigned long long room_wait_ns = 60000000000ull;  // NOLINT(google-runtime-int)
  void* put_args[] = {&dev, &n, &room_wait_ns, &no_room};
  ASSERT_TRUE(api_.run(*puts, 40, 256, put_args).ok());
  const std::vector<uint8_t> room = gpu_read(counters + 8, 8);
  ASSERT_EQ(std::count(room.begin(), room.end(), 0), 8) << "puts found no room in the ring";
  std::atomic<uint64_t> unused{0};
  Status ended = OpRingProducer(*ring, &unused).wait_ended(kPuts, std::chrono::seconds(60));
  ASSERT_TRUE(ended.ok()) << ended.error().to_string();
  EXPECT_EQ(ring->done(), kPuts);
  EXPECT_EQ(ring->failed(), 0u);
  for (uint64_t i = 0; i < kPuts * 8; ++i)
    ASSERT_EQ(theirs.bytes[i], mine.bytes[i]) << "byte " << i;
  // Latency, GPU-initiated: one thread, put and wait, kRounds times.
  auto latency = api_.kernel(kGpuRingKernelsPtx, "caf_rdma_ring_put_latency");
  ASSERT_TRUE(latency.ok()) << latency.error().to_string();
  const uint64_t out = gpu_alloc(kRounds * 8, 0);
  unsigned long long rounds = kRounds, at = kPuts, before = kPuts;  // NOLINT(google-runtime-int)
  auto* out_ns = reinterpret_cast<unsigned long long*>(out);        // NOLINT
  void* lat_args[] = {&dev, &rounds, &at, &before, &out_ns};
  ASSERT_TRUE(api_.run(*latency, 1, 1, lat_args).ok());
  std::vector<uint64_t> gpu_ns(kRounds);
  ASSERT_TRUE(cuda_->copy_to_host(gpu_ns.data(), out, kRounds * 8, 0).ok());
  EXPECT_EQ(std::count(gpu_ns.begin(), gpu_ns.end(), 0u), 0) << "a put's wait timed out";
  EXPECT_EQ(ring->done(), kPuts + kRounds);
  for (uint64_t r = 0; r < kRounds; ++r)
    ASSERT_EQ(std::memcmp(theirs.bytes.data() + (kPuts + r) * 8, mine.bytes.data(), 8), 0)
        << "round " << r;
  // Latency, CPU-initiated: the same 8 bytes written by the client, kRounds times.
  std::vector<uint64_t> cpu_ns;
  for (uint64_t r = 0; r < kRounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    auto w = me.write(local->handle(), remote, Range::of(8).at_remote((kPuts + r) * 8));
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    cpu_ns.push_back(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count()));
  }
  std::sort(gpu_ns.begin(), gpu_ns.end());
  std::sort(cpu_ns.begin(), cpu_ns.end());
  auto path = me.write(local->handle(), remote, Range::of(8));
  ASSERT_TRUE(path.ok()) << path.error().to_string();
  std::printf("ring_put_8B_median_us gpu_initiated %.1f cpu_initiated %.1f (path %s)\n",
              gpu_ns[kRounds / 2] / 1e3, cpu_ns[kRounds / 2] / 1e3, path->path.c_str());
  proxy->reset();
  ASSERT_TRUE(owner->release(remote.id));
#else
  GTEST_SKIP() << "built without --config=cuda: no ring kernels";
#endif
}

}  // namespace
}  // namespace caf_rdma::testing
