// The manager with GPU memory it registers or refuses, using FakeDeviceMemory
// (tests/fake_device_memory.h) so it runs without a GPU: GPUDirect registration when the NIC
// accepts GPU memory, owner-assisted access to a remote GPU buffer its NIC cannot register,
// allocations and classification the driver refuses, copy errors, GPU memory over the stream
// channel through bounce buffers. Staging RDMA through bounce buffers is
// tests/actors/transfer/staged_path_test.cc; the real CUDA path is
// tests/gpu/cuda_gpu_test.cc (tag gpu).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "components/staged_cross_memory.h"
#include "components/staged_socket_move.h"
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

// Without RDMA, GPU memory takes the stream channel through bounce buffers on each side that
// has it (stream_client.h invariant 10, stream_server.h invariant 19), by grant: GPU to host,
// host to GPU, GPU to GPU, both directions, several 1 MiB pieces and a ragged end, every byte;
// each GPU's memory touched by its copies only (counted), none of it in CAF chunks. The nodes
// share this host, so a host range then still takes the owner's cross-memory copy.
TEST_F(GpuMemoryTest, WithoutRdmaGpuMemoryTakesTheStreamChannelThroughBounceBuffers) {
  auto gpu_a = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto gpu_c = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto a = node(gpu_a, TransportMode::kFallback), b = node(nullptr, TransportMode::kFallback),
       c = node(gpu_c, TransportMode::kFallback);
  ASSERT_TRUE(a && b && c);
  constexpr uint64_t kSize = (5 << 20) + 333;
  Memory ga(kSize, 11), gc(kSize, 0), host(kSize, 0);
  gpu_a->add_gpu_range(ga.bytes.data(), kSize, 0);
  gpu_c->add_gpu_range(gc.bytes.data(), kSize, 1);
  auto hga = a->request_buffer(ga);
  auto hgc = c->request_buffer(gc);
  auto hh = b->request_buffer(host);
  ASSERT_TRUE(hga && hgc && hh);
  ASSERT_EQ(hga->memory, static_cast<uint8_t>(BufferMemory::kGpuStaged));
  struct Step {
    const char* what;
    TestNode* by;
    TransferOp op;
    Memory* from;
    Memory* to;
  };
  const Step steps[] = {
      {"GPU a -> host b, a writes", a.get(), make_write(*hga, *hh), &ga, &host},
      {"host b <- GPU a, b reads", b.get(), make_read(*hh, *hga), &ga, &host},
      {"GPU a -> GPU c, a writes", a.get(), make_write(*hga, *hgc), &ga, &gc},
      {"GPU c <- GPU a, c reads", c.get(), make_read(*hgc, *hga), &ga, &gc},
      {"host b -> GPU c, b writes", b.get(), make_write(*hh, *hgc), &host, &gc},
  };
  uint32_t seed = 20;
  for (const Step& step : steps) {
    SCOPED_TRACE(step.what);
    // A fresh pattern at the source, zeros at the destination.
    auto& src = step.from->bytes;
    auto& dst = step.to->bytes;
    for (uint64_t i = 0; i < kSize; ++i)
      src[i] = pattern(i, seed);
    std::fill(dst.begin(), dst.end(), 0);
    ++seed;
    const ManagerStats before = step.by->stats();
    const uint64_t out_a = gpu_a->to_host_bytes, in_c = gpu_c->to_device_bytes;
    const uint64_t between = gpu_a->between_gpus_bytes.load() + gpu_c->between_gpus_bytes.load();
    auto r = step.by->transfer(step.op, 60000);
    ASSERT_TRUE(r) << error_message(r.error());
    EXPECT_EQ(r->path, kPathFallback);
    EXPECT_EQ(r->bytes, kSize);
    ASSERT_TRUE(dst == src) << "a byte differs";
    const ManagerStats after = step.by->stats();
    EXPECT_EQ(after.stream_ops - before.stream_ops, 1u) << "not over the stream channel";
    EXPECT_EQ(after.fallback_ops - before.fallback_ops, 1u);
    if (step.from == &ga && step.to == &gc) {
      // GPU to GPU on one host: one device copy from an export (stream_server.h invariant 20).
      EXPECT_EQ(gpu_a->between_gpus_bytes + gpu_c->between_gpus_bytes - between, kSize);
      EXPECT_EQ(gpu_a->to_host_bytes - out_a, 0u) << "GPU a's bytes went through a bounce buffer";
      continue;
    }
    if (step.from == &ga) {
      EXPECT_EQ(gpu_a->to_host_bytes - out_a, kSize) << "GPU a's bytes not through its copies";
    }
    if (step.to == &gc) {
      EXPECT_EQ(gpu_c->to_device_bytes - in_c, kSize) << "GPU c's bytes not through its copies";
    }
  }
  // Each GPU to GPU step imported once (a's requester, c's requester), kept for the next.
  EXPECT_EQ(gpu_a->imports_opened.load(), 1u);
  EXPECT_EQ(gpu_c->imports_opened.load(), 1u);
  // Host to host with the GPU owner's server after all that: still by cross-memory copy where
  // the host allows it (a GPU grant's in-band answers did not turn the endpoint in-band).
  Memory other(kSize, 30), mine(kSize, 0);
  auto ho = a->request_buffer(other);
  auto hm = b->request_buffer(mine);
  ASSERT_TRUE(ho && hm);
  auto r = b->transfer(make_read(*hm, *ho), 60000);
  ASSERT_TRUE(r) << error_message(r.error());
  EXPECT_TRUE(mine.bytes == other.bytes);
  EXPECT_EQ(gpu_a->pageable_copy_bytes.load(), 0u) << "a copy of GPU memory was not page-locked";
}

// A GPU copy that fails in the middle of a stream transfer fails it with the copy's error
// (naming the GPU and the byte), on either side, answered once nothing more of it lands (a
// write's owner heard ending: stream_client.h invariant 10); the next transfers move every
// byte.
TEST_F(GpuMemoryTest, AGpuCopyFailingMidStreamFailsTheTransferNamingTheCopy) {
  // Every case takes fresh memory, kept to the end (before the nodes, so it outlives them): a
  // read's owner may still be sending its host bytes when its requester's copy failed.
  std::vector<std::unique_ptr<Memory>> kept;
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto a = node(gpu, TransportMode::kFallback), b = node(nullptr, TransportMode::kFallback);
  ASSERT_TRUE(a && b);
  uint8_t fill = 12;
  // The GPU copies' pieces: a's requests go through bounce buffers (staged_socket_move.h); b's,
  // of host memory on a's host, by cross-memory attach through a's staging buffer
  // (staged_cross_memory.h). Four of them per transfer.
  auto piece_of = [&](TestNode* by) { return by == a.get() ? kStagedPiece : kStagedCrossPiece; };
  // GPU memory on a, host memory on b, registered; the op `by` makes between them.
  auto pair_for = [&](TestNode* by, bool write) {
    const uint64_t kSize = 4 * piece_of(by);
    Memory& g = *kept.emplace_back(std::make_unique<Memory>(kSize, fill++));
    Memory& host = *kept.emplace_back(std::make_unique<Memory>(kSize, fill++));
    gpu->add_gpu_range(g.bytes.data(), kSize, 0);
    auto hg = a->request_buffer(g);
    auto hh = b->request_buffer(host);
    EXPECT_TRUE(hg && hh);
    TransferOp op = by == a.get() ? (write ? make_write(*hg, *hh) : make_read(*hg, *hh))
                                  : (write ? make_write(*hh, *hg) : make_read(*hh, *hg));
    return std::make_tuple(&g, &host, op);
  };
  for (TestNode* by : {a.get(), b.get()}) {
    for (bool write : {true, false}) {
      SCOPED_TRACE(std::string(by == a.get() ? "the GPU's node" : "the host's node") +
                   (write ? " writes" : " reads"));
      auto [g, host, op] = pair_for(by, write);
      // a's GPU is the source when a writes or b reads.
      const bool gpu_source = (by == a.get()) == write;
      const std::vector<uint8_t>& src = gpu_source ? g->bytes : host->bytes;
      const std::vector<uint8_t>& dst = gpu_source ? host->bytes : g->bytes;
      const std::vector<uint8_t> dst_before = dst;
      const uint64_t kSize = src.size();
      gpu->fail_copies_after(2);  // the third piece's copy fails
      auto x = by->transfer(op, 60000);
      const uint64_t kLanded = 2 * piece_of(by);
      const std::string at = "memory at byte " + std::to_string(kLanded);
      EXPECT_RDMA_ERROR(x, ErrorCode::kCuda, at.c_str());
      gpu->fail_copies(false);
      // Answered once nothing more lands: the two pieces before the failed copy, and nothing
      // else (an owner's worker sending the rest of a read without its memory sends it
      // into a requester's bounce buffer, and b's reads are copied by cross-memory attach).
      EXPECT_TRUE(std::equal(src.begin(), src.begin() + kLanded, dst.begin()))
          << "the pieces before the failed copy did not land";
      EXPECT_TRUE(std::equal(dst.begin() + kLanded, dst.end(), dst_before.begin() + kLanded))
          << "a byte past the failed copy's piece landed";
      // The next transfer, of fresh memory, moves every byte.
      auto [g2, host2, op2] = pair_for(by, write);
      for (uint64_t i = 0; i < kSize; ++i) {
        g2->bytes[i] = pattern(i, 40);
        host2->bytes[i] = pattern(i, 41);
      }
      auto y = by->transfer(op2, 60000);
      ASSERT_TRUE(y) << error_message(y.error());
      EXPECT_TRUE(g2->bytes == host2->bytes);
    }
  }
}

// GPU to GPU between nodes of one host: the requester copies from its owner's export of the
// memory, one device copy, imported once and kept open until the owner's release closes it
// (stream_server.h invariant 20, stream_client.h invariant 11, actors/manager/gpu_exports.h);
// a released buffer is refused; where the owner cannot export or the requester cannot open the
// export, the bytes take the bounce buffers; a device copy that fails fails the transfer,
// naming it.
TEST_F(GpuMemoryTest, OnOneHostGpuToGpuIsOneDeviceCopyFromAnExportImportedOnceUntilRelease) {
  auto gpu_a = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto gpu_c = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto a = node(gpu_a, TransportMode::kFallback), c = node(gpu_c, TransportMode::kFallback);
  ASSERT_TRUE(a && c);
  constexpr uint64_t kSize = (3 << 20) + 77;
  std::vector<std::unique_ptr<Memory>> kept;  // outlive the nodes
  // A GPU buffer on a (a's GPU 0) and one on c (c's GPU 1), registered.
  using Pair = std::tuple<Memory*, Memory*, BufferHandle, BufferHandle>;
  auto pair = [&]() -> Pair {
    Memory& ga = *kept.emplace_back(std::make_unique<Memory>(kSize, 0));
    Memory& gc = *kept.emplace_back(std::make_unique<Memory>(kSize, 0));
    gpu_a->add_gpu_range(ga.bytes.data(), kSize, 0);
    gpu_c->add_gpu_range(gc.bytes.data(), kSize, 1);
    auto ha = a->request_buffer(ga);
    auto hc = c->request_buffer(gc);
    EXPECT_TRUE(ha && hc);
    return {&ga, &gc, ha ? *ha : BufferHandle{}, hc ? *hc : BufferHandle{}};
  };
  uint32_t seed = 50;
  // c reads a's buffer, then writes it back changed; every byte checked both ways. How the
  // bytes went is `check`'s to say.
  auto round = [&](const char* what, const Pair& p,
                   const std::function<void(uint64_t copied_gpu, uint64_t staged)>& check) {
    SCOPED_TRACE(what);
    auto [ga, gc, ha, hc] = p;
    for (bool write : {false, true}) {
      std::vector<uint8_t>& src = write ? gc->bytes : ga->bytes;
      std::vector<uint8_t>& dst = write ? ga->bytes : gc->bytes;
      for (uint64_t i = 0; i < kSize; ++i)
        src[i] = pattern(i, seed);
      ++seed;
      std::fill(dst.begin(), dst.end(), 0);
      const uint64_t between = gpu_c->between_gpus_bytes;
      const uint64_t staged = gpu_a->to_host_bytes + gpu_a->to_device_bytes;
      auto r = c->transfer(write ? make_write(hc, ha) : make_read(hc, ha), 60000);
      ASSERT_TRUE(r) << error_message(r.error());
      ASSERT_TRUE(dst == src) << "a byte differs (" << (write ? "write" : "read") << ")";
      check(gpu_c->between_gpus_bytes - between,
            gpu_a->to_host_bytes + gpu_a->to_device_bytes - staged);
    }
  };
  auto by_export = [&](uint64_t copied, uint64_t staged) {
    EXPECT_EQ(copied, kSize) << "not one device copy from the export";
    EXPECT_EQ(staged, 0u) << "the owner's GPU bytes went through a bounce buffer";
  };
  auto by_bounce = [&](uint64_t copied, uint64_t staged) {
    EXPECT_EQ(copied, 0u);
    EXPECT_EQ(staged, kSize) << "not through the owner's bounce buffer";
  };
  const uint64_t opened = gpu_c->imports_opened;
  const Pair first = pair();
  round("from an export", first, by_export);
  const BufferHandle& ha = std::get<2>(first);
  const BufferHandle& hc = std::get<3>(first);
  EXPECT_EQ(gpu_c->imports_opened - opened, 1u) << "not one import for both transfers";
  EXPECT_EQ(gpu_a->exports.load(), 1u) << "not one export per buffer";
  EXPECT_EQ(gpu_c->imports_open.load(), 1) << "the import was not kept for the next copy";

  // Released: the release returns once the requester closed its import; the buffer is refused.
  auto released = a->release(ha.id);
  ASSERT_TRUE(released) << error_message(released.error());
  EXPECT_EQ(gpu_c->imports_open.load(), 0) << "the release returned with the import open";
  const uint64_t exports = gpu_a->exports;
  auto late = c->transfer(make_read(hc, ha), 20000);
  EXPECT_FALSE(late) << "a released buffer was read";
  EXPECT_EQ(gpu_a->exports.load(), exports);

  // A device copy that fails fails the transfer, naming it; the import is closed all the same.
  {
    const auto fresh = pair();
    gpu_c->fail_copies(true);
    auto x = c->transfer(make_read(std::get<3>(fresh), std::get<2>(fresh)), 20000);
    gpu_c->fail_copies(false);
    EXPECT_RDMA_ERROR(x, ErrorCode::kCuda, "GPU copy");
  }

  // The owner cannot export this memory (pool or VMM memory): through the bounce buffers.
  gpu_a->fail_exports(true);
  round("the owner cannot export", pair(), by_bounce);
  gpu_a->fail_exports(false);
  round("from an export again", pair(), by_export);

  // The requester cannot open the owner's exports: through the bounce buffers, and from then on
  // it asks that owner for none.
  gpu_c->fail_imports(true);
  round("the requester cannot import", pair(), by_bounce);
  gpu_c->fail_imports(false);
  const uint64_t before = gpu_c->imports_opened;
  round("not asked again", pair(), by_bounce);
  EXPECT_EQ(gpu_c->imports_opened.load(), before) << "asked for an export again";
}

// A release of the owner's GPU buffer while a requester copies from its export returns only
// once that copy ended and its import was closed (stream_server.h invariant 20,
// actors/manager/gpu_exports.h invariant 2): the owner may free the memory when release
// returns. The copy is held in the stand-in GPU for the purpose.
TEST_F(GpuMemoryTest, AReleaseDuringAGpuCopyFromItsExportReturnsOnceTheImportIsClosed) {
  auto gpu_a = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto gpu_c = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  constexpr uint64_t kSize = 1 << 20;
  Memory ga(kSize, 61), gc(kSize, 0);  // outlive the nodes
  auto a = node(gpu_a, TransportMode::kFallback), c = node(gpu_c, TransportMode::kFallback);
  ASSERT_TRUE(a && c);
  gpu_a->add_gpu_range(ga.bytes.data(), kSize, 0);
  gpu_c->add_gpu_range(gc.bytes.data(), kSize, 1);
  auto ha = a->request_buffer(ga);
  auto hc = c->request_buffer(gc);
  ASSERT_TRUE(ha && hc);
  gpu_c->hold_gpu_copies(true);
  caf::expected<TransferReply> read{caf::error{}};
  std::thread reader([&] { read = c->transfer(make_read(*hc, *ha), 60000); });
  ASSERT_TRUE(gpu_c->wait_held(1)) << "the GPU copy did not start";
  int64_t open_when_released = -1;
  std::promise<void> released;
  auto released_future = released.get_future();
  std::thread releaser([&] {
    auto r = a->release(ha->id);
    open_when_released = gpu_c->imports_open.load();
    EXPECT_TRUE(r) << error_message(r.error());
    released.set_value();
  });
  // The release waits for the copy (a release that did not would be seen here, or below with
  // the import still open).
  EXPECT_EQ(released_future.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "the release returned while the copy from its export ran";
  gpu_c->hold_gpu_copies(false);
  reader.join();
  releaser.join();
  EXPECT_EQ(open_when_released, 0) << "the release returned with the import open";
  ASSERT_TRUE(read) << error_message(read.error());
  EXPECT_TRUE(gc.bytes == ga.bytes);
}

// Two buffers over one GPU allocation share its export: releasing one closes the requester's
// import (the owner may free that memory), and the other buffer's next transfer opens it
// again and moves every byte.
TEST_F(GpuMemoryTest, ReleasingOneOfTwoBuffersOverAnAllocationLeavesTheOtherCopying) {
  auto gpu_a = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto gpu_c = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  constexpr uint64_t kHalf = 1 << 20;
  Memory ga(2 * kHalf, 71), gc(kHalf, 0);  // outlive the nodes
  auto a = node(gpu_a, TransportMode::kFallback), c = node(gpu_c, TransportMode::kFallback);
  ASSERT_TRUE(a && c);
  gpu_a->add_gpu_range(ga.bytes.data(), 2 * kHalf, 0);  // one allocation, two buffers over it
  gpu_c->add_gpu_range(gc.bytes.data(), kHalf, 0);
  auto first = a->request_buffer(ga.addr(), kHalf);
  auto second = a->request_buffer(ga.addr() + kHalf, kHalf);
  auto mine = c->request_buffer(gc);
  ASSERT_TRUE(first && second && mine);
  auto read_from = [&](const BufferHandle& h, uint64_t at) {
    std::fill(gc.bytes.begin(), gc.bytes.end(), 0);
    auto r = c->transfer(make_read(*mine, h), 60000);
    ASSERT_TRUE(r) << error_message(r.error());
    EXPECT_TRUE(std::equal(gc.bytes.begin(), gc.bytes.end(), ga.bytes.begin() + at))
        << "a byte differs";
  };
  read_from(*first, 0);
  read_from(*second, kHalf);
  EXPECT_EQ(gpu_c->imports_opened.load(), 1u) << "not one import of the shared allocation";
  auto released = a->release(first->id);
  ASSERT_TRUE(released) << error_message(released.error());
  EXPECT_EQ(gpu_c->imports_open.load(), 0) << "the release returned with the import open";
  read_from(*second, kHalf);
  EXPECT_EQ(gpu_c->imports_opened.load(), 2u) << "the other buffer's copy did not reopen it";
  EXPECT_EQ(gpu_c->between_gpus_bytes.load(), 3 * kHalf) << "not by device copies";
}

}  // namespace
}  // namespace caf_rdma::testing
