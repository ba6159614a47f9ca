// GIDs: text form, classification and the selection rules for RoCE and InfiniBand ports.
#include "primitives/gid.h"

#include <gtest/gtest.h>

namespace caf_rdma {
namespace {

Gid gid_of(const char* text) {
  auto g = parse_gid(text);
  EXPECT_TRUE(g.ok()) << text;
  return g.ok() ? *g : Gid{};
}

TEST(Gid, ParseAndPrintRoundTrip) {
  for (const char* t : {"fe80::8c09:9fff:fee6:4158", "::ffff:10.99.0.1", "fe80::1"}) {
    EXPECT_EQ(to_string(gid_of(t)), t);
  }
  Gid g = gid_of("::ffff:10.99.0.1");
  EXPECT_EQ(g[10], 0xff);
  EXPECT_EQ(g[12], 10);
  EXPECT_EQ(g[15], 1);
  auto bad = parse_gid("10.99.0.1.7");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("'10.99.0.1.7'"), std::string::npos);
}

TEST(Gid, Classification) {
  EXPECT_TRUE(is_ipv4_mapped(gid_of("::ffff:192.168.1.2")));
  EXPECT_FALSE(is_ipv4_mapped(gid_of("fe80::1")));
  EXPECT_TRUE(is_link_local(gid_of("fe80::8c09:9fff:fee6:4158")));
  EXPECT_FALSE(is_link_local(gid_of("2001:db8::1")));
  EXPECT_TRUE(is_zero(Gid{}));
  EXPECT_STREQ(to_string(GidType::kRoceV2), "RoCE v2");
  EXPECT_STREQ(to_string(GidType::kRoceV1), "RoCE v1");
  EXPECT_STREQ(to_string(GidType::kInfiniBand), "IB");
}

std::vector<GidEntry> roce_table() {
  // A typical mlx5 RoCE port: v1 and v2 entries for the link-local and the IPv4 address.
  return {{0, gid_of("fe80::1"), GidType::kRoceV1, ""},
          {1, gid_of("fe80::1"), GidType::kRoceV2, ""},
          {2, gid_of("::ffff:10.0.0.5"), GidType::kRoceV1, ""},
          {3, gid_of("::ffff:10.0.0.5"), GidType::kRoceV2, ""}};
}

TEST(GidSelection, EthernetPrefersRoceV2Ipv4Mapped) {
  auto idx = select_gid_index(roce_table(), true, -1, "mlx5_0 port 1");
  ASSERT_TRUE(idx.ok()) << idx.error().to_string();
  EXPECT_EQ(*idx, 3);
}

TEST(GidSelection, EthernetFallsBackToRoceV2ThenV1) {
  auto t = roce_table();
  t.pop_back();  // no v2 IPv4 entry
  EXPECT_EQ(*select_gid_index(t, true, -1, "x"), 1);
  std::vector<GidEntry> v1_only{{0, gid_of("fe80::1"), GidType::kRoceV1, ""}};
  EXPECT_EQ(*select_gid_index(v1_only, true, -1, "x"), 0);
}

TEST(GidSelection, InfiniBandUsesFirstEntry) {
  std::vector<GidEntry> ib{{0, gid_of("fe80::2:c903:0:1"), GidType::kInfiniBand, ""}};
  EXPECT_EQ(*select_gid_index(ib, false, -1, "mlx5_1 port 1"), 0);
}

TEST(GidSelection, OverrideMustExist) {
  EXPECT_EQ(*select_gid_index(roce_table(), true, 2, "x"), 2);
  auto bad = select_gid_index(roce_table(), true, 7, "mlx5_0 port 1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::kDeviceNotFound);
  EXPECT_NE(bad.error().message().find("GID index 7"), std::string::npos);
  EXPECT_NE(bad.error().message().find("mlx5_0 port 1"), std::string::npos);
  EXPECT_NE(bad.error().message().find("[3] ::ffff:10.0.0.5 (RoCE v2)"), std::string::npos)
      << bad.error().message();
}

TEST(GidSelection, EmptyEthernetTableIsAClearError) {
  auto bad = select_gid_index({}, true, -1, "rxe0 port 1");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("no RoCE GID"), std::string::npos);
  EXPECT_NE(bad.error().message().find("IP address"), std::string::npos);
}

// A port with two networks: the default interface and a VLAN on it, each with an IPv4
// address. Without a netdev the first IPv4-mapped RoCE v2 entry wins, which is the wrong one
// when the peers are on the VLAN; CAF_RDMA_NETDEV picks among that interface's entries.
std::vector<GidEntry> two_network_table() {
  return {{0, gid_of("fe80::1"), GidType::kRoceV1, "eth1"},
          {1, gid_of("fe80::1"), GidType::kRoceV2, "eth1"},
          {2, gid_of("::ffff:192.168.0.5"), GidType::kRoceV1, "eth1"},
          {3, gid_of("::ffff:192.168.0.5"), GidType::kRoceV2, "eth1"},
          {4, gid_of("fe80::1"), GidType::kRoceV1, "eth1.100"},
          {5, gid_of("fe80::1"), GidType::kRoceV2, "eth1.100"},
          {6, gid_of("::ffff:10.100.0.5"), GidType::kRoceV1, "eth1.100"},
          {7, gid_of("::ffff:10.100.0.5"), GidType::kRoceV2, "eth1.100"}};
}

TEST(GidSelection, NetdevChoosesAmongThatInterfacesEntries) {
  EXPECT_EQ(*select_gid_index(two_network_table(), true, -1, "mlx5_0 port 1"), 3);
  EXPECT_EQ(*select_gid_index(two_network_table(), true, -1, "mlx5_0 port 1", "eth1.100"), 7);
  EXPECT_EQ(*select_gid_index(two_network_table(), true, -1, "mlx5_0 port 1", "eth1"), 3);
  // The rules still apply within the interface: no IPv4 address there -> its RoCE v2 entry.
  auto t = two_network_table();
  t.pop_back();
  t.erase(t.begin() + 6);
  EXPECT_EQ(*select_gid_index(t, true, -1, "x", "eth1.100"), 5);
  // An explicit index wins.
  EXPECT_EQ(*select_gid_index(two_network_table(), true, 2, "x", "eth1.100"), 2);
}

TEST(GidSelection, NetdevWithoutEntriesIsAClearError) {
  auto bad = select_gid_index(two_network_table(), true, -1, "mlx5_0 port 1", "eth2");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::kDeviceNotFound);
  EXPECT_NE(bad.error().message().find("netdev 'eth2'"), std::string::npos)
      << bad.error().message();
  EXPECT_NE(bad.error().message().find("mlx5_0 port 1"), std::string::npos);
  EXPECT_NE(bad.error().message().find("[7] ::ffff:10.100.0.5 (RoCE v2, eth1.100)"),
            std::string::npos)
      << bad.error().message();
  std::vector<GidEntry> ib{{0, gid_of("fe80::2:c903:0:1"), GidType::kInfiniBand, ""}};
  auto on_ib = select_gid_index(ib, false, -1, "mlx5_1 port 1", "ib0");
  ASSERT_FALSE(on_ib.ok());
  EXPECT_NE(on_ib.error().message().find("InfiniBand"), std::string::npos);
}

}  // namespace
}  // namespace caf_rdma
