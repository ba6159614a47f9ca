// IbverbsConfig: defaults, validation, clamping to device limits, environment overrides.
#include "primitives/ibverbs_config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>

namespace caf_rdma {
namespace {

TEST(IbverbsConfig, Defaults) {
  IbverbsConfig c;
  EXPECT_EQ(c.port_num, 1);
  EXPECT_EQ(c.max_send_wr, 512u);
  EXPECT_EQ(c.max_recv_wr, 512u);
  EXPECT_EQ(c.max_send_sge, 4u);  // longer gather lists split; small WQEs
  EXPECT_EQ(c.max_recv_sge, 4u);
  EXPECT_EQ(c.max_inline_data, 64u);
  EXPECT_EQ(c.path_mtu, IBV_MTU_4096);
  EXPECT_EQ(c.retry_cnt, 7);
  EXPECT_EQ(c.rnr_retry, 7);
  EXPECT_EQ(c.qp_timeout, 18);  // ~1.07 s per attempt, as NCCL
  EXPECT_EQ(c.traffic_class, 0);
  EXPECT_EQ(c.service_level, 0);
  EXPECT_EQ(c.min_rnr_timer, 12);
  EXPECT_EQ(c.max_rd_atomic, 16);
  EXPECT_EQ(c.pkey_index, 0);
  EXPECT_TRUE(c.validate().ok());
}

TEST(IbverbsConfig, ValidationNamesFieldAndValue) {
  IbverbsConfig c;
  c.retry_cnt = 9;
  Status st = c.validate();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.error().message().find("retry_cnt = 9"), std::string::npos) << st.error().message();
  EXPECT_NE(st.error().message().find("0..7"), std::string::npos);

  c = IbverbsConfig{};
  c.port_num = 0;
  EXPECT_NE(c.validate().error().message().find("port_num = 0"), std::string::npos);
  c = IbverbsConfig{};
  c.max_send_wr = 0;
  EXPECT_NE(c.validate().error().message().find("max_send_wr"), std::string::npos);
  c = IbverbsConfig{};
  c.path_mtu = static_cast<ibv_mtu>(6);  // representable, but no MTU
  EXPECT_NE(c.validate().error().message().find("path_mtu"), std::string::npos);
  c = IbverbsConfig{};
  c.qp_timeout = 32;
  EXPECT_NE(c.validate().error().message().find("qp_timeout = 32"), std::string::npos);
  c = IbverbsConfig{};
  c.qp_timeout = 0;  // an infinite ACK wait
  EXPECT_NE(c.validate().error().message().find("qp_timeout = 0"), std::string::npos);
  c = IbverbsConfig{};
  c.service_level = 16;
  ASSERT_FALSE(c.validate().ok());
  EXPECT_NE(c.validate().error().message().find("service_level = 16"), std::string::npos);
  EXPECT_NE(c.validate().error().message().find("0..15"), std::string::npos);
  c = IbverbsConfig{};
  c.near_pci_device = "GPU-3b";
  ASSERT_FALSE(c.validate().ok());
  EXPECT_NE(c.validate().error().message().find("near_pci_device = 'GPU-3b'"), std::string::npos)
      << c.validate().error().message();
  c.near_pci_device = "00000000:3B:00.0";  // as nvidia-smi prints it
  EXPECT_TRUE(c.validate().ok()) << c.validate().error().message();
}

TEST(IbverbsConfig, ClampedToDeviceLimits) {
  DeviceLimits limits;
  limits.active_mtu = IBV_MTU_1024;
  limits.max_qp_wr = 128;
  limits.max_sge = 4;
  limits.max_qp_rd_atom = 8;
  limits.max_qp_init_rd_atom = 2;
  limits.max_cqe = 200;
  IbverbsConfig c = IbverbsConfig{}.clamped(limits);
  EXPECT_EQ(c.path_mtu, IBV_MTU_1024);
  EXPECT_EQ(c.max_send_wr, 128u);
  EXPECT_EQ(c.max_recv_wr, 128u);
  EXPECT_EQ(c.max_send_sge, 4u);
  // Initiator depth by max_qp_init_rd_atom, responder depth by max_qp_rd_atom.
  EXPECT_EQ(c.max_rd_atomic, 2);
  EXPECT_EQ(c.max_dest_rd_atomic, 8);
  EXPECT_EQ(c.cq_entries, 200u);
  // A smaller request is kept.
  IbverbsConfig small;
  small.path_mtu = IBV_MTU_512;
  small.max_send_wr = 16;
  EXPECT_EQ(small.clamped(limits).path_mtu, IBV_MTU_512);
  EXPECT_EQ(small.clamped(limits).max_send_wr, 16u);
}

TEST(IbverbsConfig, EnvironmentOverrides) {
  std::map<std::string, std::string> env{
      {kEnvDevice, "mlx5_3"}, {kEnvPort, "2"}, {kEnvGidIndex, "5"}};
  auto get = [&](const char* name) -> const char* {
    auto i = env.find(name);
    return i == env.end() ? nullptr : i->second.c_str();
  };
  auto c = IbverbsConfig::from_env(IbverbsConfig{}, get);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c->device_name, "mlx5_3");
  EXPECT_EQ(c->port_num, 2);
  EXPECT_EQ(c->gid_index, 5);

  env[kEnvPort] = "two";
  auto bad = IbverbsConfig::from_env(IbverbsConfig{}, get);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("CAF_RDMA_PORT='two'"), std::string::npos)
      << bad.error().message();

  env[kEnvPort] = "1";
  env[kEnvGidIndex] = "-3";
  bad = IbverbsConfig::from_env(IbverbsConfig{}, get);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("CAF_RDMA_GID_INDEX"), std::string::npos);
}

TEST(IbverbsConfig, FabricKnobsFromTheEnvironment) {
  std::map<std::string, std::string> env{{kEnvTrafficClass, "106"},
                                         {kEnvServiceLevel, "3"},
                                         {kEnvTimeout, "20"},
                                         {kEnvNetdev, "eth1.100"}};
  auto get = [&](const char* name) -> const char* {
    auto i = env.find(name);
    return i == env.end() ? nullptr : i->second.c_str();
  };
  auto c = IbverbsConfig::from_env(IbverbsConfig{}, get);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c->traffic_class, 106);  // DSCP 26 << 2 | ECN-capable
  EXPECT_EQ(c->service_level, 3);
  EXPECT_EQ(c->qp_timeout, 20);
  EXPECT_EQ(c->netdev, "eth1.100");
  // Out of range: the error names the variable, its value and the range.
  for (auto [var, value, range] :
       {std::tuple{kEnvTrafficClass, "256", "0..255"}, std::tuple{kEnvServiceLevel, "16", "0..15"},
        std::tuple{kEnvTimeout, "0", "1..31"}, std::tuple{kEnvTimeout, "32", "1..31"},
        std::tuple{kEnvServiceLevel, "high", "0..15"},
        std::tuple{kEnvNetdev, "eth1/x", "network interface name"}}) {
    auto saved = env;
    env[var] = value;
    auto bad = IbverbsConfig::from_env(IbverbsConfig{}, get);
    env = saved;
    ASSERT_FALSE(bad.ok()) << var << "=" << value;
    EXPECT_NE(bad.error().message().find(std::string(var) + "='" + value + "'"), std::string::npos)
        << bad.error().message();
    EXPECT_NE(bad.error().message().find(range), std::string::npos) << bad.error().message();
  }
}

TEST(IbverbsConfig, LocalRankFromOursOrTheLaunchersVariable) {
  std::map<std::string, std::string> env;
  auto get = [&](const char* name) -> const char* {
    auto i = env.find(name);
    return i == env.end() ? nullptr : i->second.c_str();
  };
  EXPECT_EQ(IbverbsConfig::from_env(IbverbsConfig{}, get)->local_rank, -1);
  env["SLURM_LOCALID"] = "2";
  EXPECT_EQ(IbverbsConfig::from_env(IbverbsConfig{}, get)->local_rank, 2);
  env["LOCAL_RANK"] = "5";  // torchrun's comes before Slurm's
  EXPECT_EQ(IbverbsConfig::from_env(IbverbsConfig{}, get)->local_rank, 5);
  env["LOCAL_RANK"] = "five";  // not a rank: not ours to refuse, the next one counts
  EXPECT_EQ(IbverbsConfig::from_env(IbverbsConfig{}, get)->local_rank, 2);
  env[kEnvLocalRank] = "1";  // ours wins
  EXPECT_EQ(IbverbsConfig::from_env(IbverbsConfig{}, get)->local_rank, 1);
  env[kEnvLocalRank] = "-1";
  auto bad = IbverbsConfig::from_env(IbverbsConfig{}, get);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("CAF_RDMA_LOCAL_RANK='-1'"), std::string::npos)
      << bad.error().message();
  IbverbsConfig c;
  c.local_rank = -2;
  EXPECT_FALSE(c.validate().ok());
}

TEST(IbverbsConfig, RandomPsnIs24Bits) {
  uint32_t all_or = 0;
  bool differ = false;
  uint32_t first = random_psn();
  for (int i = 0; i < 1000; ++i) {
    uint32_t p = random_psn();
    EXPECT_LE(p, 0xffffffu);
    all_or |= p;
    differ |= p != first;
  }
  EXPECT_TRUE(differ);
  EXPECT_GT(all_or, 0x7fffffu);  // the top bit of 24 is used
}

}  // namespace
}  // namespace caf_rdma
