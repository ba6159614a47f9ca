// Pointer classification from CUDA's pointer attributes, and NIC ranking by PCIe distance from
// a sysfs fixture: pure logic, no GPU or NIC needed.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "primitives/memory_kind.h"
#include "primitives/pcie_topology.h"

namespace caf_rdma {
namespace {

TEST(MemoryKindTest, AttributesMapToKindsDevicesAndRanges) {
  // cuPointerGetAttributes leaves everything zero for memory CUDA does not know.
  PointerInfo host = classify_pointer_attributes(kCuMemoryTypeUnknown, false, 0, 0, 0);
  EXPECT_EQ(host.kind, MemoryKind::kHost);
  EXPECT_EQ(host.device, -1);
  EXPECT_FALSE(host.on_gpu());
  PointerInfo pinned = classify_pointer_attributes(kCuMemoryTypeHost, false, 0, 0x1000, 4096);
  EXPECT_EQ(pinned.kind, MemoryKind::kPinnedHost);
  EXPECT_EQ(pinned.device, -1);
  EXPECT_FALSE(pinned.on_gpu()) << "pinned host memory registers like host memory";
  PointerInfo dev = classify_pointer_attributes(kCuMemoryTypeDevice, false, 3, 0x7000, 1 << 20);
  EXPECT_EQ(dev.kind, MemoryKind::kDevice);
  EXPECT_EQ(dev.device, 3);
  EXPECT_EQ(dev.base, 0x7000u);
  EXPECT_EQ(dev.size, 1u << 20);
  EXPECT_TRUE(dev.on_gpu());
  // Managed memory reports DEVICE or HOST as its type; IS_MANAGED wins.
  EXPECT_EQ(classify_pointer_attributes(kCuMemoryTypeDevice, true, 1, 0, 0).kind,
            MemoryKind::kManaged);
  EXPECT_EQ(classify_pointer_attributes(kCuMemoryTypeHost, true, 1, 0, 0).kind,
            MemoryKind::kManaged);
  EXPECT_EQ(classify_pointer_attributes(kCuMemoryTypeUnified, false, 2, 0, 0).device, 2);
  EXPECT_STREQ(to_string(MemoryKind::kManaged), "managed");
}

TEST(PcieTopologyTest, DistanceCountsHopsThroughTheDeepestCommonBridge) {
  std::string root = "/sys/devices/pci0000:00/0000:00:01.0";
  EXPECT_EQ(pcie_distance(root + "/0000:01:00.0", root + "/0000:01:00.1"), 2);
  EXPECT_EQ(pcie_distance(root + "/0000:01:00.0/0000:02:00.0", root + "/0000:01:00.1"), 3);
  EXPECT_EQ(
      pcie_distance(root + "/0000:01:00.0", "/sys/devices/pci0000:80/0000:80:02.0/0000:81:00.0"),
      6);
  EXPECT_EQ(pcie_distance(root, ""), -1);
}

class SysfsFixture : public ::testing::Test {
protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    sys_ = std::string(tmp ? tmp : "/tmp") + "/sysfs-" + std::to_string(::getpid());
    // Socket 0: a switch with the GPU and mlx5_0 below it; mlx5_2 on the same root complex
    // under another port; socket 1: mlx5_1. rxe0 is virtual.
    dev("devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0");  // switch port -> GPU
    dev("devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0");  // switch port -> mlx5_0
    dev("devices/pci0000:00/0000:00:03.0/0000:05:00.0");               // mlx5_2
    dev("devices/pci0000:80/0000:80:02.0/0000:81:00.0");               // mlx5_1
    dev("devices/virtual/net/veth0");
    link("bus/pci/devices/0000:02:00.0",
         "devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0");
    ib("mlx5_0", "devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0");
    ib("mlx5_1", "devices/pci0000:80/0000:80:02.0/0000:81:00.0");
    ib("mlx5_2", "devices/pci0000:00/0000:00:03.0/0000:05:00.0");
    ib("mlx5_3", "devices/pci0000:80/0000:80:02.0/0000:81:00.0");  // a second port, same distance
    ib("rxe0", "devices/virtual/net/veth0");
  }
  void TearDown() override { std::system(("rm -rf '" + sys_ + "'").c_str()); }

  void dev(const std::string& path) {
    std::system(("mkdir -p '" + sys_ + "/" + path + "'").c_str());
  }
  void link(const std::string& from, const std::string& to) {
    std::string f = sys_ + "/" + from;
    std::system(("mkdir -p \"$(dirname '" + f + "')\"").c_str());
    ASSERT_EQ(::symlink((sys_ + "/" + to).c_str(), f.c_str()), 0) << f;
  }
  void ib(const std::string& name, const std::string& to) {
    dev("class/infiniband/" + name);
    link("class/infiniband/" + name + "/device", to);
  }

  void numa(const std::string& path, int node) {
    std::ofstream(sys_ + "/" + path + "/numa_node") << node << "\n";
  }

  std::string sys_;
};

TEST_F(SysfsFixture, NicsRankClosestFirstTiesByNameSoftwareDevicesLast) {
  auto ranked =
      rank_nics_by_distance(sys_, "0000:02:00.0", {"rxe0", "mlx5_3", "mlx5_1", "mlx5_2", "mlx5_0"});
  ASSERT_EQ(ranked.size(), 5u);
  EXPECT_EQ(ranked[0].name, "mlx5_0");  // same PCIe switch
  EXPECT_EQ(ranked[0].distance, 2);
  EXPECT_EQ(ranked[1].name, "mlx5_2");  // same root complex
  EXPECT_EQ(ranked[1].distance, 5);
  EXPECT_EQ(ranked[2].name, "mlx5_1");  // other socket; tie with mlx5_3 broken by name
  EXPECT_EQ(ranked[3].name, "mlx5_3");
  EXPECT_EQ(ranked[2].distance, ranked[3].distance);
  EXPECT_EQ(ranked[4].name, "rxe0");
  EXPECT_EQ(ranked[4].distance, -1);
  EXPECT_EQ(rdma_device_path(sys_, "rxe0"), "");
  EXPECT_EQ(rdma_device_path(sys_, "nope"), "");
  // An unknown GPU: no distances, name order.
  auto unknown = rank_nics_by_distance(sys_, "0000:99:00.0", {"mlx5_1", "mlx5_0"});
  EXPECT_EQ(unknown[0].name, "mlx5_0");
  EXPECT_EQ(unknown[0].distance, -1);
}

// Two root complexes per socket, as on current servers: PCIe hops cannot tell mlx5_4 (another
// root complex of the GPU's socket) from mlx5_1 (the other socket); numa_node can.
TEST_F(SysfsFixture, NicsOnTheGpusNumaNodeRankBeforeTheOtherSocket) {
  const std::string gpu = "devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0";
  dev("devices/pci0000:17/0000:17:02.0/0000:18:00.0");
  ib("mlx5_4", "devices/pci0000:17/0000:17:02.0/0000:18:00.0");
  numa(gpu, 0);
  numa("devices/pci0000:17/0000:17:02.0/0000:18:00.0", 0);
  numa("devices/pci0000:80/0000:80:02.0/0000:81:00.0", 1);
  const std::vector<std::string> nics{"mlx5_1", "mlx5_4", "mlx5_2", "mlx5_0"};
  auto ranked = rank_nics_by_distance(sys_, "0000:02:00.0", nics);
  ASSERT_EQ(ranked.size(), 4u);
  EXPECT_EQ(ranked[0].name, "mlx5_0");
  EXPECT_TRUE(ranked[0].same_root);
  EXPECT_EQ(ranked[1].name, "mlx5_2");
  EXPECT_TRUE(ranked[1].same_root);
  EXPECT_EQ(ranked[2].name, "mlx5_4");
  EXPECT_FALSE(ranked[2].same_root);
  EXPECT_TRUE(ranked[2].same_numa);
  EXPECT_EQ(ranked[3].name, "mlx5_1");
  EXPECT_FALSE(ranked[3].same_numa);
  EXPECT_EQ(ranked[2].distance, ranked[3].distance) << "PCIe hops alone tie";
  // A machine whose sysfs gives no NUMA node (-1): distance, then name.
  numa(gpu, -1);
  auto flat = rank_nics_by_distance(sys_, "0000:02:00.0", nics);
  EXPECT_EQ(flat[2].name, "mlx5_1");
  EXPECT_EQ(flat[3].name, "mlx5_4");
  EXPECT_FALSE(flat[2].same_numa);
}

TEST_F(SysfsFixture, PciIdsAreNormalizedToSysfsSpelling) {
  EXPECT_EQ(normalize_pci_bus_id("0000:3B:00.0"), "0000:3b:00.0");      // CUDA
  EXPECT_EQ(normalize_pci_bus_id("00000000:3B:00.0"), "0000:3b:00.0");  // nvidia-smi
  EXPECT_EQ(normalize_pci_bus_id("3b:00.0"), "0000:3b:00.0");           // lspci
  EXPECT_EQ(normalize_pci_bus_id("0000:3b:1f.7"), "0000:3b:1f.7");
  EXPECT_EQ(normalize_pci_bus_id("10000:01:00.1"), "10000:01:00.1");  // a VMD domain
  for (const char* bad : {"", "3b", "3b:00", "3b:00.", "3b:20.0", "3b:00.8", "zz:00.0", "1:2:3:4.0",
                          "000000000:3b:00.0", "3b:00.0 ", "-1:00.0", "3b::00.0"})
    EXPECT_EQ(normalize_pci_bus_id(bad), "") << "'" << bad << "'";
  // The GPU named as CUDA or nvidia-smi print it is found in sysfs.
  const std::string path = pci_device_path(sys_, "0000:02:00.0");
  ASSERT_NE(path, "");
  EXPECT_EQ(pci_device_path(sys_, "00000000:02:00.0"), path);
  EXPECT_EQ(pci_device_path(sys_, "02:00.0"), path);
  EXPECT_EQ(pci_device_path(sys_, "not a pci id"), "");
  auto ranked = rank_nics_by_distance(sys_, "00000000:02:00.0", {"mlx5_1", "mlx5_0"});
  EXPECT_EQ(ranked[0].name, "mlx5_0");
  EXPECT_EQ(ranked[0].distance, 2);
}

}  // namespace
}  // namespace caf_rdma
