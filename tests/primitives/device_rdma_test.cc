// On a real device (rxe0 in the VM lane): port and GID queries, and two RC queue pairs built
// from the primitives, connected to each other, moving 1 MiB with one RDMA WRITE; the
// initiator depth (max_rd_atomic) follows the peer's responder depth.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "primitives/completion_queue.h"
#include "primitives/device_context.h"
#include "primitives/device_list.h"
#include "primitives/ibverbs_error.h"
#include "primitives/memory_region.h"
#include "primitives/protection_domain.h"
#include "primitives/queue_pair.h"
#include "tests/rdma_test.h"

namespace caf_rdma {
namespace {

using DevicePrimitives = testing::RdmaTest;

std::shared_ptr<DeviceContext> open_default() {
  auto config = IbverbsConfig::from_env();
  EXPECT_TRUE(config.ok()) << config.error().to_string();
  auto ctx = DeviceContext::open_selected(*config);
  EXPECT_TRUE(ctx.ok()) << ctx.error().to_string();
  return ctx.ok() ? *ctx : nullptr;
}

TEST_F(DevicePrimitives, LocalRankChoosesAmongTheActiveDevices) {
  auto list = DeviceList::get();
  ASSERT_TRUE(list.ok());
  auto devices = list->describe();
  auto candidates = default_device_candidates(devices, 1);
  ASSERT_FALSE(candidates.empty());
  for (int rank = 0; rank < 3; ++rank) {
    IbverbsConfig config;
    config.local_rank = rank;
    auto ctx = DeviceContext::open_selected(config);
    ASSERT_TRUE(ctx.ok()) << ctx.error().to_string();
    EXPECT_EQ((*ctx)->name(), devices[candidates[rank % candidates.size()]].name) << rank;
    EXPECT_EQ((*ctx)->selection_note(), "");  // a rank said which one
  }
}

TEST_F(DevicePrimitives, PortStateMtuAndGidTable) {
  auto ctx = open_default();
  ASSERT_TRUE(ctx);
  auto port = ctx->query_port(1);
  ASSERT_TRUE(port.ok()) << port.error().to_string();
  EXPECT_EQ(port->state, IBV_PORT_ACTIVE) << ctx->name();
  EXPECT_GE(mtu_bytes(port->active_mtu), 256u);
  EXPECT_LE(port->active_mtu, port->max_mtu);
  EXPECT_GT(port->max_msg_sz, 0u);
  auto table = ctx->gid_table(1);
  ASSERT_TRUE(table.ok()) << table.error().to_string();
  ASSERT_FALSE(table->empty());
  for (const auto& e : *table) {
    std::printf("%s GID[%d] %s %s\n", ctx->name().c_str(), e.index, to_string(e.gid).c_str(),
                to_string(e.type));
    EXPECT_FALSE(is_zero(e.gid)) << "index " << e.index;
    if (port->is_ethernet) {
      EXPECT_NE(e.type, GidType::kInfiniBand) << "index " << e.index;
    }
  }
  auto idx = select_gid_index(*table, port->is_ethernet, -1, ctx->name());
  ASSERT_TRUE(idx.ok()) << idx.error().to_string();
  if (ctx->name().rfind("rxe", 0) == 0) {
    // Soft-RoCE on an interface with an IPv4 address: RoCE v2, IPv4-mapped.
    EXPECT_TRUE(port->is_ethernet);
    const GidEntry* chosen = nullptr;
    for (const auto& e : *table)
      if (e.index == *idx)
        chosen = &e;
    ASSERT_NE(chosen, nullptr);
    EXPECT_EQ(chosen->type, GidType::kRoceV2);
    EXPECT_TRUE(is_ipv4_mapped(chosen->gid)) << to_string(chosen->gid);
  }
  auto no_port = ctx->query_port(9);
  ASSERT_FALSE(no_port.ok());
  EXPECT_NE(no_port.error().message().find("no port 9"), std::string::npos);
}

struct Side {
  std::shared_ptr<CompletionQueue> cq;
  std::unique_ptr<QueuePair> qp;
  std::vector<uint8_t> buf;
  std::shared_ptr<MemoryRegion> mr;
  uint32_t psn = 0;
};

ibv_wc wait_completion(CompletionQueue& cq, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  ibv_wc wc{};
  while (std::chrono::steady_clock::now() < deadline) {
    auto n = cq.poll(&wc, 1);
    EXPECT_TRUE(n.ok());
    if (n.ok() && *n == 1)
      return wc;
  }
  ADD_FAILURE() << "no completion within " << timeout.count() << " s";
  wc.status = IBV_WC_GENERAL_ERR;
  return wc;
}

/// Two RC queue pairs on the default device, each with a 1 MiB registered buffer, connected
/// to each other with configs `config[0]` and `config[1]` (clamped to the device).
struct Pair {
  std::shared_ptr<DeviceContext> ctx;
  IbverbsConfig config[2];
  Side s[2];
};

constexpr size_t kSize = 1 << 20;

void connect_pair(Pair& p, const IbverbsConfig& want0, const IbverbsConfig& want1) {
  p.ctx = open_default();
  ASSERT_TRUE(p.ctx);
  auto limits = p.ctx->limits(1);
  ASSERT_TRUE(limits.ok());
  p.config[0] = want0.clamped(*limits);
  p.config[1] = want1.clamped(*limits);
  auto port = p.ctx->query_port(1);
  auto table = p.ctx->gid_table(1);
  ASSERT_TRUE(port.ok() && table.ok());
  auto gid_index = select_gid_index(*table, port->is_ethernet, -1, p.ctx->name());
  ASSERT_TRUE(gid_index.ok()) << gid_index.error().to_string();
  Gid gid{};
  for (const auto& e : *table)
    if (e.index == *gid_index)
      gid = e.gid;
  auto pd = ProtectionDomain::allocate(p.ctx);
  ASSERT_TRUE(pd.ok()) << pd.error().to_string();
  for (int k = 0; k < 2; ++k) {
    Side& side = p.s[k];
    auto cq = CompletionQueue::create(p.ctx, 64, false);
    ASSERT_TRUE(cq.ok()) << cq.error().to_string();
    side.cq = *cq;
    auto qp = QueuePair::create(*pd, side.cq, side.cq, p.config[k]);
    ASSERT_TRUE(qp.ok()) << qp.error().to_string();
    side.qp = std::move(*qp);
    side.buf.assign(kSize, 0);
    auto mr = MemoryRegion::register_memory(*pd, side.buf.data(), kSize, Access::kReadWrite);
    ASSERT_TRUE(mr.ok()) << mr.error().to_string();
    side.mr = *mr;
    side.psn = random_psn();
  }
  auto info = [&](int k) {
    QpInfo i;
    i.qp_num = p.s[k].qp->qp_num();
    i.lid = port->lid;
    i.gid = gid;
    i.psn = p.s[k].psn;
    i.mtu = p.config[k].path_mtu;
    i.is_ethernet = port->is_ethernet;
    i.max_dest_rd_atomic = p.config[k].max_dest_rd_atomic;
    return i;
  };
  for (int k = 0; k < 2; ++k) {
    Status c = p.s[k].qp->connect(p.config[k], info(1 - k), p.s[k].psn, *gid_index);
    ASSERT_TRUE(c.ok()) << c.error().to_string();
  }
}

TEST_F(DevicePrimitives, TwoConnectedQueuePairsWrite1MiB) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(connect_pair(p, IbverbsConfig{}, IbverbsConfig{}));
  auto& s = p.s;
  auto& ctx = p.ctx;
  auto state = s[0].qp->state();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(*state, IBV_QPS_RTS);

  for (size_t i = 0; i < kSize; ++i)
    s[0].buf[i] = static_cast<uint8_t>(i * 7 + 3);
  ibv_sge sge{reinterpret_cast<uint64_t>(s[0].buf.data()), static_cast<uint32_t>(kSize),
              s[0].mr->lkey()};
  ibv_send_wr wr{};
  wr.wr_id = 42;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = s[1].mr->addr();
  wr.wr.rdma.rkey = s[1].mr->rkey();
  Status posted = s[0].qp->post_send(&wr);
  ASSERT_TRUE(posted.ok()) << posted.error().to_string();
  ibv_wc wc = wait_completion(*s[0].cq, std::chrono::seconds(30));
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << completion_error(wc, ctx->name()).to_string();
  EXPECT_EQ(wc.wr_id, 42u);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(s[0].buf, s[1].buf);
  std::printf("RDMA WRITE of %zu bytes on %s verified\n", kSize, ctx->name().c_str());
}

// An initiator never has more READs in flight than its peer's responder accepts: its
// max_rd_atomic follows the peer's max_dest_rd_atomic (exchanged in QpInfo).
TEST_F(DevicePrimitives, InitiatorDepthFollowsThePeersResponderDepth) {
  IbverbsConfig deep, shallow;
  deep.max_rd_atomic = 16;
  shallow.max_dest_rd_atomic = 2;
  Pair p;
  ASSERT_NO_FATAL_FAILURE(connect_pair(p, deep, shallow));
  auto depth = p.s[0].qp->max_rd_atomic();
  ASSERT_TRUE(depth.ok()) << depth.error().to_string();
  EXPECT_EQ(*depth, std::min<uint8_t>(p.config[0].max_rd_atomic, 2));
  auto other = p.s[1].qp->max_rd_atomic();
  ASSERT_TRUE(other.ok()) << other.error().to_string();
  EXPECT_EQ(*other, std::min(p.config[1].max_rd_atomic, p.config[0].max_dest_rd_atomic));
}

// Traffic class, service level and the ACK timeout of the config reach the connected QP
// (CAF_RDMA_TC / CAF_RDMA_SL / CAF_RDMA_TIMEOUT): a lossless class is only used if the QP's
// address vector carries it.
TEST_F(DevicePrimitives, FabricAttributesOfTheConfigReachTheQueuePair) {
  IbverbsConfig want;
  want.traffic_class = 106;  // DSCP 26, ECN-capable
  want.service_level = 3;
  want.qp_timeout = 20;
  Pair p;
  ASSERT_NO_FATAL_FAILURE(connect_pair(p, want, want));
  auto port = p.ctx->query_port(1);
  ASSERT_TRUE(port.ok());
  for (int k = 0; k < 2; ++k) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(p.s[k].qp->get(), &attr, IBV_QP_AV | IBV_QP_TIMEOUT, &init), 0);
    // rxe keeps no service level in its address vector (RoCE has none on the wire; mlx5 maps
    // it to a priority): checked where the port is InfiniBand.
    if (!port->is_ethernet) {
      EXPECT_EQ(attr.ah_attr.sl, 3) << "side " << k;
    }
    EXPECT_EQ(attr.timeout, 20) << "side " << k;
    if (attr.ah_attr.is_global) {
      EXPECT_EQ(attr.ah_attr.grh.traffic_class, 106) << "side " << k;
    }
  }
  // And the defaults: timeout 18, class and level 0.
  Pair d;
  ASSERT_NO_FATAL_FAILURE(connect_pair(d, IbverbsConfig{}, IbverbsConfig{}));
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(d.s[0].qp->get(), &attr, IBV_QP_AV | IBV_QP_TIMEOUT, &init), 0);
  EXPECT_EQ(attr.timeout, 18);
  EXPECT_EQ(attr.ah_attr.sl, 0);
}

}  // namespace
}  // namespace caf_rdma
