// GpuImports (components/gpu_imports.h) with FakeDeviceMemory, a stand-in GPU named as such:
// one import per export and GPU, kept open between copies; close() closes it once no copy holds
// it and says when one still does; at most kMaxOpen stay open, the least recently used idle
// one closed first; close_all.
#include "components/gpu_imports.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "tests/fake_device_memory.h"

namespace caf_rdma::testing {
namespace {

class GpuImportsTest : public ::testing::Test {
protected:
  /// An export of a fresh fake GPU range (the test's own memory).
  std::vector<uint8_t> export_one() {
    auto& range = ranges_.emplace_back(std::make_unique<std::vector<uint8_t>>(4096));
    gpu_->add_gpu_range(range->data(), range->size(), 0);
    auto e = gpu_->export_range(reinterpret_cast<uint64_t>(range->data()), range->size(), 0);
    EXPECT_TRUE(e.ok());
    return e.ok() ? e->handle : std::vector<uint8_t>{};
  }

  std::vector<std::unique_ptr<std::vector<uint8_t>>> ranges_;
  std::shared_ptr<FakeDeviceMemory> gpu_ = std::make_shared<FakeDeviceMemory>(false);
};

TEST_F(GpuImportsTest, AnExportIsImportedOncePerGpuAndKeptBetweenCopies) {
  GpuImports imports;
  const auto handle = export_one();
  auto first = imports.acquire(handle, gpu_, 0);
  ASSERT_TRUE(first.ok());
  imports.give_back(*first);
  auto second = imports.acquire(handle, gpu_, 0);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->base, first->base);
  imports.give_back(*second);
  EXPECT_EQ(gpu_->imports_opened.load(), 1u);
  auto other_gpu = imports.acquire(handle, gpu_, 1);  // another GPU of this process: its own
  ASSERT_TRUE(other_gpu.ok());
  imports.give_back(*other_gpu);
  EXPECT_EQ(gpu_->imports_opened.load(), 2u);
  EXPECT_EQ(gpu_->imports_open.load(), 2);
  auto closed = imports.close(handle, std::chrono::milliseconds(1000));
  ASSERT_TRUE(closed.ok());
  EXPECT_EQ(*closed, 2u);
  EXPECT_EQ(gpu_->imports_open.load(), 0);
  EXPECT_EQ(imports.open(), 0u);
  auto again = imports.acquire(handle, gpu_, 0);  // opened afresh after a close
  ASSERT_TRUE(again.ok());
  imports.give_back(*again);
  EXPECT_EQ(gpu_->imports_opened.load(), 3u);
}

TEST_F(GpuImportsTest, CloseWaitsForTheCopyThatHoldsAnImportAndSaysWhenItStillDoes) {
  GpuImports imports;
  const auto handle = export_one();
  auto held = imports.acquire(handle, gpu_, 0);
  ASSERT_TRUE(held.ok());
  // Held through the whole wait: the answer says so, and the import is still open.
  auto late = imports.close(handle, std::chrono::milliseconds(20));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code(), ErrorCode::kTimeout);
  EXPECT_NE(late.error().message().find("still held by a copy"), std::string::npos);
  EXPECT_EQ(gpu_->imports_open.load(), 1);
  // Doomed: a new copy opens its own; giving the held one back closes it.
  auto fresh = imports.acquire(handle, gpu_, 0);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(gpu_->imports_opened.load(), 2u);
  imports.give_back(*held);
  EXPECT_EQ(gpu_->imports_open.load(), 1);
  // Given back during the wait: close returns once it is closed.
  std::thread copier([&] { imports.give_back(*fresh); });
  auto closed = imports.close(handle, std::chrono::milliseconds(20000));
  copier.join();
  ASSERT_TRUE(closed.ok()) << closed.error().message();
  EXPECT_EQ(gpu_->imports_open.load(), 0);
}

TEST_F(GpuImportsTest, AtMostKMaxOpenStayOpenTheLeastRecentlyUsedIdleOneClosedFirst) {
  GpuImports imports;
  std::vector<std::vector<uint8_t>> handles;
  for (size_t i = 0; i <= GpuImports::kMaxOpen; ++i)
    handles.push_back(export_one());
  // The first is held throughout: never closed to make room.
  auto held = imports.acquire(handles[0], gpu_, 0);
  ASSERT_TRUE(held.ok());
  for (size_t i = 1; i < GpuImports::kMaxOpen; ++i) {
    auto l = imports.acquire(handles[i], gpu_, 0);
    ASSERT_TRUE(l.ok());
    imports.give_back(*l);
  }
  EXPECT_EQ(imports.open(), GpuImports::kMaxOpen);
  // Handle 1 used again: handle 2 is now the least recently used idle one.
  auto used = imports.acquire(handles[1], gpu_, 0);
  ASSERT_TRUE(used.ok());
  imports.give_back(*used);
  auto one_more = imports.acquire(handles[GpuImports::kMaxOpen], gpu_, 0);
  ASSERT_TRUE(one_more.ok());
  imports.give_back(*one_more);
  EXPECT_EQ(imports.open(), GpuImports::kMaxOpen);
  const uint64_t opened = gpu_->imports_opened;
  for (size_t i : {size_t{0}, size_t{1}}) {  // still open: no new import
    auto l = imports.acquire(handles[i], gpu_, 0);
    ASSERT_TRUE(l.ok());
    imports.give_back(*l);
  }
  EXPECT_EQ(gpu_->imports_opened.load(), opened);
  auto evicted = imports.acquire(handles[2], gpu_, 0);  // closed to make room: opened again
  ASSERT_TRUE(evicted.ok());
  imports.give_back(*evicted);
  EXPECT_EQ(gpu_->imports_opened.load(), opened + 1);
  imports.give_back(*held);
  imports.close_all();
  EXPECT_EQ(imports.open(), 0u);
  EXPECT_EQ(gpu_->imports_open.load(), 0);
}

}  // namespace
}  // namespace caf_rdma::testing
