// RdmaDomain on a real device: config clamping, GID choice, the registration cache.
#include "components/rdma_domain.h"

#include <gtest/gtest.h>
#include <linux/capability.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

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

// A registration beyond the locked-memory limit (a process without CAP_IPC_LOCK under a small
// `ulimit -l`, the default for non-root users and containers) fails with ENOMEM; the error says
// that the limit is the cause and how to raise it. Run in a child process, which drops
// CAP_IPC_LOCK and lowers its own limit; it reports through a pipe.
TEST_F(DomainTest, PinningBeyondTheLockedMemoryLimitSaysHowToRaiseIt) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    auto report = [&](int code, const std::string& text) {
      ssize_t w = write(fds[1], text.data(), text.size());
      (void)w;
      _exit(code);
    };
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3] = {};
    if (syscall(SYS_capget, &header, caps) != 0)
      report(2, "capget failed");
    for (auto& c : caps) {
      c.effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
      c.permitted &= ~CAP_TO_MASK(CAP_IPC_LOCK);
    }
    if (syscall(SYS_capset, &header, caps) != 0)
      report(2, "capset (dropping CAP_IPC_LOCK) failed");
    rlimit small{rlim_t{64} << 10, rlim_t{64} << 10};
    if (setrlimit(RLIMIT_MEMLOCK, &small) != 0)
      report(2, "setrlimit(RLIMIT_MEMLOCK) failed");
    auto config = IbverbsConfig::from_env();
    if (!config.ok())
      report(2, config.error().to_string());
    auto domain = RdmaDomain::open(*config);
    if (!domain.ok())
      report(2, "opening the domain under the limit: " + domain.error().to_string());
    std::vector<uint8_t> mem(4 << 20, 1);
    auto b = (*domain)->register_buffer(mem.data(), mem.size());
    if (b.ok())
      report(1, "registered 4 MiB under a 64 KiB limit without CAP_IPC_LOCK");
    report(0, b.error().to_string());
  }
  close(fds[1]);
  // The pipe's end comes when the child exits (it never closes its end before): read to the
  // end, or kill it after 60 s without a word.
  std::string text;
  pollfd pfd{fds[0], POLLIN, 0};
  char buf[4096];
  bool ended = false;
  while (!ended && poll(&pfd, 1, 60000) == 1) {
    ssize_t n = read(fds[0], buf, sizeof(buf));
    ended = n <= 0;
    if (n > 0)
      text.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  if (!ended) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "the child did not finish within 60 s; it said: " << text;
  }
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child: " << text;
  EXPECT_NE(text.find("ibv_reg_mr"), std::string::npos) << text;
  EXPECT_NE(text.find("errno 12"), std::string::npos) << text;  // ENOMEM
  EXPECT_NE(text.find("ulimit -l"), std::string::npos) << text;
  EXPECT_NE(text.find("is 64 KiB"), std::string::npos) << text;
  EXPECT_NE(text.find("pins 4096 KiB"), std::string::npos) << text;
  std::printf("%s\n", text.c_str());
}

// CAF_RDMA_NETDEV: the GID is chosen among those of one network interface. The device's own
// interface gives the same GID as the automatic choice; an interface without GIDs on this
// port (lo) is refused with the table in the error.
TEST_F(DomainTest, NetdevChoosesTheGidOfThatInterface) {
  auto table = domain_->context()->gid_table(domain_->config().port_num);
  ASSERT_TRUE(table.ok()) << table.error().to_string();
  std::string netdev;
  for (const auto& e : *table)
    if (e.index == domain_->gid_index())
      netdev = e.netdev;
  IbverbsConfig c = domain_->config();
  c.gid_index = -1;
  c.netdev = "lo";
  auto on_lo = RdmaDomain::open(c);
  ASSERT_FALSE(on_lo.ok());
  if (!domain_->port().is_ethernet) {
    EXPECT_NE(on_lo.error().message().find("InfiniBand"), std::string::npos);
    return;
  }
  EXPECT_EQ(on_lo.error().code(), ErrorCode::kDeviceNotFound);
  EXPECT_NE(on_lo.error().message().find("netdev 'lo'"), std::string::npos)
      << on_lo.error().message();
  EXPECT_NE(on_lo.error().message().find(", " + netdev + ")"), std::string::npos)
      << "the table names each entry's interface: " << on_lo.error().message();
  ASSERT_FALSE(netdev.empty()) << "the RoCE GID of " << domain_->describe() << " names no netdev";
  c.netdev = netdev;
  auto same = RdmaDomain::open(c);
  ASSERT_TRUE(same.ok()) << same.error().to_string();
  EXPECT_EQ((*same)->gid_index(), domain_->gid_index());
  std::printf("%s: GID index %d on %s\n", domain_->device_name().c_str(), domain_->gid_index(),
              netdev.c_str());
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
