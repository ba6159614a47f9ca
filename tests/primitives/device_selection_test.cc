// Device selection and the "no device" error, without hardware.
#include <gtest/gtest.h>

#include "primitives/device_context.h"
#include "primitives/device_list.h"

namespace caf_rdma {
namespace {

PortInfo port(uint8_t n, ibv_port_state s) {
  PortInfo p;
  p.port_num = n;
  p.state = s;
  return p;
}

TEST(DeviceSelection, NoDeviceSaysSoAndHowToGetOne) {
  auto r = select_device({}, "", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kNoDevice);
  const std::string& m = r.error().message();
  EXPECT_NE(m.find("no RDMA device found"), std::string::npos) << m;
  EXPECT_NE(m.find("--config=rxe"), std::string::npos) << m;
  EXPECT_NE(m.find("RDMA hardware"), std::string::npos) << m;
}

TEST(DeviceSelection, FirstActivePortWins) {
  std::vector<DeviceDescription> devs{{"mlx5_0", {port(1, IBV_PORT_DOWN)}},
                                      {"mlx5_1", {port(1, IBV_PORT_ACTIVE)}},
                                      {"mlx5_2", {port(1, IBV_PORT_ACTIVE)}}};
  EXPECT_EQ(*select_device(devs, "", 1), 1u);
  EXPECT_EQ(*select_device(devs, "mlx5_2", 1), 2u);
  EXPECT_EQ(*select_device(devs, "", 1, 1), 2u);
  // By name even when its port is down: the caller asked for it.
  EXPECT_EQ(*select_device(devs, "mlx5_0", 1), 0u);
}

TEST(DeviceSelection, LocalRanksSpreadOverTheActiveNicsInNameOrder) {
  std::vector<DeviceDescription> devs{{"rxe0", {port(1, IBV_PORT_ACTIVE)}, /*on_pci=*/false},
                                      {"mlx5_10", {port(1, IBV_PORT_ACTIVE)}},
                                      {"mlx5_1", {port(1, IBV_PORT_DOWN)}},
                                      {"mlx5_2", {port(1, IBV_PORT_ACTIVE)}},
                                      {"mlx5_0", {port(1, IBV_PORT_ACTIVE)}}};
  // Hardware only (rxe0 is software), the down port left out, mlx5_2 before mlx5_10.
  EXPECT_EQ(default_device_candidates(devs, 1), (std::vector<size_t>{4, 3, 1}));
  EXPECT_EQ(*select_device(devs, "", 1), 4u);         // no rank: the first, mlx5_0
  EXPECT_EQ(*select_device(devs, "", 1, 0), 4u);      // mlx5_0
  EXPECT_EQ(*select_device(devs, "", 1, 1), 3u);      // mlx5_2
  EXPECT_EQ(*select_device(devs, "", 1, 2), 1u);      // mlx5_10
  EXPECT_EQ(*select_device(devs, "", 1, 7), 3u);      // 7 mod 3 = 1: mlx5_2
  EXPECT_EQ(*select_device(devs, "rxe0", 1, 2), 0u);  // a name beats the rank
}

TEST(DeviceSelection, SoftwareDevicesOnlyWhereThereIsNoActiveHardware) {
  std::vector<DeviceDescription> devs{{"rxe1", {port(1, IBV_PORT_ACTIVE)}, false},
                                      {"rxe0", {port(1, IBV_PORT_ACTIVE)}, false},
                                      {"mlx5_0", {port(1, IBV_PORT_DOWN)}}};
  EXPECT_EQ(default_device_candidates(devs, 1), (std::vector<size_t>{1, 0}));
  EXPECT_EQ(*select_device(devs, "", 1), 1u);     // rxe0
  EXPECT_EQ(*select_device(devs, "", 1, 1), 0u);  // rxe1
}

TEST(DeviceSelection, UnknownNameListsDevicesAndStates) {
  std::vector<DeviceDescription> devs{{"rxe0", {port(1, IBV_PORT_ACTIVE)}},
                                      {"rxe1", {port(1, IBV_PORT_DOWN)}}};
  auto r = select_device(devs, "mlx5_9", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kDeviceNotFound);
  EXPECT_NE(r.error().message().find("'mlx5_9' not found"), std::string::npos);
  EXPECT_NE(r.error().message().find("rxe0 (port 1 active)"), std::string::npos)
      << r.error().message();
  EXPECT_NE(r.error().message().find("rxe1 (port 1 down)"), std::string::npos);
  auto p = select_device(devs, "rxe0", 2);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message().find("has no port 2"), std::string::npos);
}

TEST(DeviceSelection, NoActivePort) {
  std::vector<DeviceDescription> devs{{"mlx5_0", {port(1, IBV_PORT_DOWN)}}};
  auto r = select_device(devs, "", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("no RDMA device has an ACTIVE port 1"), std::string::npos);
}

// On a host without RDMA (these build machines), opening the default device must fail with
// kNoDevice and the hint, not crash. On a host with a device it opens it.
TEST(DeviceSelection, OpenDefaultDeviceOnThisHost) {
  auto list = DeviceList::get();
  ASSERT_TRUE(list.ok()) << list.error().to_string();
  auto ctx = DeviceContext::open_selected(IbverbsConfig{});
  if (list->empty()) {
    ASSERT_FALSE(ctx.ok());
    EXPECT_EQ(ctx.error().code(), ErrorCode::kNoDevice);
    EXPECT_NE(ctx.error().message().find("no RDMA device found"), std::string::npos);
    EXPECT_NE(ctx.error().message().find("Soft-RoCE VM"), std::string::npos);
  } else {
    ASSERT_TRUE(ctx.ok()) << ctx.error().to_string();
    EXPECT_FALSE((*ctx)->name().empty());
  }
  auto named = DeviceContext::open("no_such_device0");
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.error().message().find("no_such_device0"), std::string::npos);
}

}  // namespace
}  // namespace caf_rdma
