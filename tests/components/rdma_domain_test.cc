// RdmaDomain on a real device: config clamping, GID choice, the registration cache.
#include "components/rdma_domain.h"

#include <gtest/gtest.h>

#include <chrono>

#include "tests/components/component_fixture.h"

namespace caf_rdma::testing {
namespace {

using DomainTest = ComponentTest;

TEST_F(DomainTest, ConfigIsClampedToThePort) {
  const IbverbsConfig& c = domain_->config();
  EXPECT_LE(c.path_mtu, domain_->port().active_mtu);
  EXPECT_GE(domain_->gid_index(), 0);
  EXPECT_FALSE(is_zero(domain_->gid()));
  EXPECT_EQ(c.device_name, domain_->device_name());
  std::printf("%s\n", domain_->describe().c_str());
}

TEST_F(DomainTest, EveryBufferHasARemoteKeyOfItsOwn) {
  // Revocation: a buffer inside another live buffer gets a region (and rkey) of its own, so
  // releasing it kills its key while the larger buffer stays usable.
  std::vector<uint8_t> mem(1 << 20);
  auto whole = domain_->register_buffer(mem.data(), mem.size());
  ASSERT_TRUE(whole.ok()) << whole.error().to_string();
  auto part = domain_->register_buffer(mem.data() + 4096, 8192);
  ASSERT_TRUE(part.ok());
  EXPECT_NE(part->rkey(), whole->rkey()) << "a sub-range must not share the larger region's rkey";
  EXPECT_NE(part->region(), whole->region());
  EXPECT_EQ(part->addr(), reinterpret_cast<uint64_t>(mem.data() + 4096));
  EXPECT_EQ(part->size(), 8192u);
  auto stats = domain_->registration_stats();
  EXPECT_EQ(stats.live_regions, 2u);
  EXPECT_EQ(stats.registrations, 2u);
  EXPECT_EQ(stats.cache_hits, 0u);
  part->release();
  EXPECT_EQ(domain_->registration_stats().live_regions, 1u);
  EXPECT_EQ(domain_->registration_stats().registered_bytes, mem.size());
  whole->release();
  EXPECT_EQ(domain_->registration_stats().live_regions, 0u);
  EXPECT_EQ(domain_->registration_stats().registered_bytes, 0u);
}

TEST_F(DomainTest, LocalRegistrationsShareCoveringLocalRegionsOnly) {
  std::vector<uint8_t> mem(1 << 20);
  auto remote_visible = domain_->register_buffer(mem.data(), mem.size());
  ASSERT_TRUE(remote_visible.ok());
  auto whole = domain_->register_local(mem.data(), mem.size());
  ASSERT_TRUE(whole.ok()) << whole.error().to_string();
  EXPECT_NE(whole->region(), remote_visible->region())
      << "local keys never come from a handle's region";
  EXPECT_EQ(whole->access(), Access::kLocalWrite);
  auto part = domain_->register_local(mem.data() + 4096, 8192);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(part->region(), whole->region()) << "same local region";
  auto stats = domain_->registration_stats();
  EXPECT_EQ(stats.live_regions, 2u);
  EXPECT_EQ(stats.registrations, 2u);
  EXPECT_EQ(stats.cache_hits, 1u);
  // Releasing one user keeps the shared local region; releasing the last deregisters it.
  whole->release();
  EXPECT_EQ(domain_->registration_stats().live_regions, 2u);
  part->release();
  remote_visible->release();
  EXPECT_EQ(domain_->registration_stats().live_regions, 0u);
  EXPECT_EQ(domain_->registration_stats().registered_bytes, 0u);
}

TEST_F(DomainTest, ReadOnlyAndReadWriteBuffersAreSeparateRegions) {
  std::vector<uint8_t> mem(65536);
  auto ro = domain_->register_buffer(mem.data(), mem.size(), Access::kReadOnly);
  ASSERT_TRUE(ro.ok());
  auto rw = domain_->register_buffer(mem.data(), mem.size(), Access::kReadWrite);
  ASSERT_TRUE(rw.ok());
  EXPECT_NE(ro->rkey(), rw->rkey());
  EXPECT_EQ(ro->access(), Access::kReadOnly);
  EXPECT_EQ(rw->access(), Access::kReadWrite);
  EXPECT_EQ(domain_->registration_stats().registrations, 2u);
}

TEST_F(DomainTest, RegisteredBytesStayBoundedOverIterations) {
  std::vector<uint8_t> mem(4 << 20);
  for (int i = 0; i < 200; ++i) {
    auto b = domain_->register_buffer(mem.data() + size_t{4096} * (i % 7), 65536);
    ASSERT_TRUE(b.ok());
  }
  EXPECT_EQ(domain_->registration_stats().live_regions, 0u);
  auto keep = domain_->register_buffer(mem.data(), mem.size());
  for (int i = 0; i < 200; ++i)
    ASSERT_TRUE(domain_->register_buffer(mem.data() + size_t{4096} * i, 4096).ok());
  auto s = domain_->registration_stats();
  EXPECT_EQ(s.live_regions, 1u);
  EXPECT_EQ(s.registered_bytes, mem.size());
}

TEST_F(DomainTest, BadRegistrationsAreClearErrors) {
  auto null = domain_->register_buffer(nullptr, 10);
  ASSERT_FALSE(null.ok());
  EXPECT_EQ(null.error().code(), ErrorCode::kInvalidArgument);
  int x = 0;
  auto zero = domain_->register_buffer(&x, 0);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().message().find("size non-zero"), std::string::npos);
  // Unmapped memory: ibv_reg_mr fails with EFAULT and the message says so.
  auto unmapped = domain_->register_buffer(reinterpret_cast<void*>(0x10000), 4096);
  ASSERT_FALSE(unmapped.ok());
  EXPECT_EQ(unmapped.error().code(), ErrorCode::kIbverbsCall);
  EXPECT_NE(unmapped.error().message().find("ibv_reg_mr"), std::string::npos);
  EXPECT_NE(unmapped.error().message().find(domain_->device_name()), std::string::npos);
}

TEST_F(DomainTest, UnknownDeviceNameListsWhatExists) {
  IbverbsConfig c;
  c.device_name = "mlx5_77";
  auto d = RdmaDomain::open(c);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code(), ErrorCode::kDeviceNotFound);
  EXPECT_NE(d.error().message().find("'mlx5_77' not found"), std::string::npos);
  EXPECT_NE(d.error().message().find(domain_->device_name()), std::string::npos);
  IbverbsConfig g;
  g.gid_index = 999;
  auto bad_gid = RdmaDomain::open(g);
  ASSERT_FALSE(bad_gid.ok());
  EXPECT_NE(bad_gid.error().message().find("GID index 999"), std::string::npos);
}

}  // namespace
}  // namespace caf_rdma::testing
