// The doctor's checks on fake hosts: a sysfs, /proc and /dev tree built in a temporary folder,
// device descriptions, memlock limits and kernel releases handed in, so that each wrong setting
// is named with its fix deterministically, on any machine.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "doctor/device_checks.h"
#include "doctor/examination.h"
#include "doctor/gpu_checks.h"
#include "doctor/host_checks.h"
#include "doctor/pci_acs.h"
#include "doctor/sysfs_gids.h"
#include "primitives/device_list.h"
#include "primitives/memory_region.h"
#include "primitives/pcie_topology.h"

namespace caf_rdma::doctor {
namespace {

class FakeHost : public ::testing::Test {
protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = std::string(tmp != nullptr ? tmp : "/tmp") + "/doctor-" + std::to_string(::getpid());
    host_.sysfs_root = root_ + "/sys";
    host_.proc_root = root_ + "/proc";
    host_.dev_root = root_ + "/dev";
    host_.kernel_release = "6.12.9-amd64";
    host_.memlock_limit = RLIM_INFINITY;
    mkdirs(host_.proc_root);
  }
  void TearDown() override { ASSERT_EQ(std::system(("rm -rf '" + root_ + "'").c_str()), 0); }

  static void mkdirs(const std::string& path) {
    ASSERT_EQ(std::system(("mkdir -p '" + path + "'").c_str()), 0) << path;
  }
  static void write(const std::string& path, const std::string& text) {
    mkdirs(path.substr(0, path.rfind('/')));
    std::ofstream(path) << text;
  }
  /// GID entry `index` of `device` port 1 in sysfs (as the kernel spells it), its type and netdev.
  void gid(const std::string& device, int index, const std::string& text, const std::string& type,
           const std::string& netdev) {
    std::string port = host_.sysfs_root + "/class/infiniband/" + device + "/ports/1/";
    write(port + "gids/" + std::to_string(index), text + "\n");
    write(port + "gid_attrs/types/" + std::to_string(index), type + "\n");
    write(port + "gid_attrs/ndevs/" + std::to_string(index), netdev + "\n");
  }
  /// An unused GID slot (all zero, no attributes).
  void empty_gid(const std::string& device, int index) {
    write(
        host_.sysfs_root + "/class/infiniband/" + device + "/ports/1/gids/" + std::to_string(index),
        "0000:0000:0000:0000:0000:0000:0000:0000\n");
  }
  static DeviceDescription roce_device(const std::string& name, ibv_port_state state) {
    PortInfo port;
    port.port_num = 1;
    port.state = state;
    port.is_ethernet = true;
    port.active_mtu = IBV_MTU_1024;
    return DeviceDescription{name, {port}, false};
  }
  static bool has(const Findings& findings, Level level, const std::string& text,
                  const std::string& fix = "") {
    for (const auto& f : findings)
      if (f.level == level && f.what.find(text) != std::string::npos &&
          f.fix.find(fix) != std::string::npos)
        return true;
    return false;
  }
  static std::string all(const Findings& findings) {
    std::string out;
    for (const auto& f : findings)
      out += format(f) + "\n";
    return out;
  }

  std::string root_;
  HostView host_;
};

// -- locked memory ---------------------------------------------------------------------------

TEST_F(FakeHost, AMemlockLimitBelowTheNeedFailsNamingTheLimitAndItsFix) {
  host_.memlock_limit = uint64_t{64} * 1024;
  Finding f = check_memlock(host_, kDefaultMemlockNeed);
  EXPECT_EQ(f.level, Level::kFail);
  EXPECT_NE(f.what.find("`ulimit -l`): 64 KiB, below 65536 KiB"), std::string::npos) << f.what;
  EXPECT_EQ(f.fix, kMemlockFix);
  EXPECT_NE(f.fix.find("ulimit -l unlimited"), std::string::npos);
  EXPECT_NE(f.fix.find("LimitMEMLOCK=infinity"), std::string::npos);
  EXPECT_NE(f.fix.find("limits.conf"), std::string::npos);
}

TEST_F(FakeHost, AMemlockLimitIsFineWhenUnlimitedOrLiftedAndWarnsWhenFinite) {
  EXPECT_EQ(check_memlock(host_, kDefaultMemlockNeed).level, Level::kOk);
  host_.memlock_limit = uint64_t{64} * 1024;
  host_.has_ipc_lock = true;
  EXPECT_EQ(check_memlock(host_, kDefaultMemlockNeed).level, Level::kOk);
  host_.has_ipc_lock = false;
  host_.memlock_limit = uint64_t{1} << 30;
  Finding f = check_memlock(host_, kDefaultMemlockNeed);
  EXPECT_EQ(f.level, Level::kWarn);
  EXPECT_EQ(f.fix, kMemlockFix);
}

// -- GIDs and devices ------------------------------------------------------------------------

TEST_F(FakeHost, GidsAreReadWithTheirInterfaceAndRoceVersion) {
  gid("rxe0", 0, "fe80:0000:0000:0000:5054:00ff:fe12:3456", "IB/RoCE v1", "veth0");
  gid("rxe0", 1, "0000:0000:0000:0000:0000:ffff:0a63:0001", "RoCE v2", "veth0");
  empty_gid("rxe0", 2);
  auto table = read_gid_table(host_.sysfs_root, "rxe0", 1, true);
  ASSERT_EQ(table.size(), 2u);
  EXPECT_EQ(table[0].type, GidType::kRoceV1);
  EXPECT_EQ(table[1].index, 1);
  EXPECT_EQ(table[1].type, GidType::kRoceV2);
  EXPECT_EQ(table[1].netdev, "veth0");
  host_.devices = {roce_device("rxe0", IBV_PORT_ACTIVE)};
  Findings out;
  auto usable = check_devices(host_, IbverbsConfig{}, out);
  EXPECT_EQ(usable, std::vector<std::string>{"rxe0"}) << all(out);
  EXPECT_TRUE(has(out, Level::kOk,
                  "rxe0 port 1: active, active MTU 1024, link layer "
                  "Ethernet (RoCE), software device"))
      << all(out);
  EXPECT_TRUE(has(out, Level::kInfo, "rxe0 port 1 GID[1] ::ffff:10.99.0.1 RoCE v2 on veth0"));
  EXPECT_TRUE(has(out, Level::kOk, "rxe0 port 1 would use GID[1] ::ffff:10.99.0.1 RoCE v2"))
      << all(out);
}

TEST_F(FakeHost, APortWithoutAnAddressFailsNamingTheFix) {
  empty_gid("mlx5_0", 0);
  empty_gid("mlx5_0", 1);
  host_.devices = {roce_device("mlx5_0", IBV_PORT_ACTIVE)};
  Findings out;
  EXPECT_TRUE(check_devices(host_, IbverbsConfig{}, out).empty());
  EXPECT_TRUE(has(out, Level::kFail, "mlx5_0 port 1 has no usable GID", "ip addr add")) << all(out);
  EXPECT_TRUE(has(out, Level::kFail, "no RDMA device has port 1 ACTIVE with a usable GID"));
}

TEST_F(FakeHost, APortWithOnlyALinkLocalGidWarnsThatPeersCannotReachIt) {
  gid("mlx5_0", 0, "fe80:0000:0000:0000:5054:00ff:fe12:3456", "RoCE v2", "eth1");
  host_.devices = {roce_device("mlx5_0", IBV_PORT_ACTIVE)};
  Findings out;
  check_devices(host_, IbverbsConfig{}, out);
  EXPECT_TRUE(has(out, Level::kWarn, "only a link-local address", "ip addr add")) << all(out);
}

TEST_F(FakeHost, APortThatIsDownWarnsAndNoDeviceLeftFails) {
  host_.devices = {roce_device("rxe0", IBV_PORT_DOWN)};
  Findings out;
  EXPECT_TRUE(check_devices(host_, IbverbsConfig{}, out).empty());
  EXPECT_TRUE(has(out, Level::kWarn, "rxe0 port 1: down", "ip link set")) << all(out);
  check_device_choice(host_, IbverbsConfig{}, out);
  EXPECT_TRUE(has(out, Level::kFail, "device choice: no RDMA device has an ACTIVE port 1"))
      << all(out);
}

TEST_F(FakeHost, EachLocalRankTakesTheDeviceANodeWould) {
  host_.devices = {roce_device("rxe1", IBV_PORT_ACTIVE), roce_device("rxe0", IBV_PORT_ACTIVE)};
  Findings out;
  IbverbsConfig config;
  config.local_rank = 3;
  check_device_choice(host_, config, out);
  EXPECT_TRUE(has(out, Level::kOk, "local rank 0 -> rxe0, 1 -> rxe1 (rank r takes the (r mod 2)"))
      << all(out);
  EXPECT_TRUE(has(out, Level::kOk, "this shell's local rank 3 takes rxe1")) << all(out);
  config.device_name = "mlx5_9";
  check_device_choice(host_, config, out);
  EXPECT_TRUE(has(out, Level::kFail, "RDMA device 'mlx5_9' not found", "CAF_RDMA_DEVICE"))
      << all(out);
}

// -- kernel ----------------------------------------------------------------------------------

TEST_F(FakeHost, ModulesAndDeviceNodesAreFoundOrNamedWithTheirFix) {
  Findings missing;
  check_kernel_modules(host_, missing);
  EXPECT_TRUE(
      has(missing, Level::kFail, "kernel module ib_uverbs not loaded", "modprobe ib_uverbs"))
      << all(missing);
  EXPECT_TRUE(has(missing, Level::kFail, "/dev/infiniband/uverbs* device nodes", "--device"));
  write(host_.proc_root + "/modules",
        "rdma_rxe 143360 0 - Live 0x0\nib_uverbs 184320 1 rdma_rxe, Live 0x0\n");
  write(host_.dev_root + "/infiniband/uverbs0", "");
  Findings present;
  check_kernel_modules(host_, present);
  EXPECT_TRUE(has(present, Level::kOk, "kernel module ib_uverbs loaded")) << all(present);
  EXPECT_TRUE(has(present, Level::kInfo, "kernel module rdma_rxe loaded (Soft-RoCE)"));
  EXPECT_TRUE(has(present, Level::kOk, "/dev/infiniband: uverbs0")) << all(present);
}

TEST_F(FakeHost, SoftRoceOnAKernelBefore62WarnsOfItsReadBug) {
  write(host_.proc_root + "/modules", "rdma_rxe 143360 0 - Live 0x0\n");
  host_.kernel_release = "6.1.0-31-amd64";
  Findings old_kernel;
  check_kernel(host_, old_kernel);
  EXPECT_TRUE(has(old_kernel, Level::kWarn, "rxe before 6.2 is known to complete RDMA READs",
                  "Known limits"))
      << all(old_kernel);
  host_.kernel_release = "6.12.9-amd64";
  Findings new_kernel;
  check_kernel(host_, new_kernel);
  EXPECT_FALSE(has(new_kernel, Level::kWarn, "")) << all(new_kernel);
}

// -- GPUs: PCIe path and ACS -----------------------------------------------------------------

class FakePci : public FakeHost {
protected:
  void SetUp() override {
    FakeHost::SetUp();
    // A switch (0000:01:00.0, its ports 02:00.0 and 02:01.0) with the GPU and mlx5_0 below.
    dev(kSwitch + "/0000:02:00.0/0000:03:00.0");  // GPU
    dev(kSwitch + "/0000:02:01.0/0000:04:00.0");  // mlx5_0
    link("bus/pci/devices/0000:03:00.0", kSwitch + "/0000:02:00.0/0000:03:00.0");
    mkdirs(host_.sysfs_root + "/class/infiniband/mlx5_0");
    link("class/infiniband/mlx5_0/device", kSwitch + "/0000:02:01.0/0000:04:00.0");
    host_.devices = {roce_device("mlx5_0", IBV_PORT_ACTIVE)};
    gpus_.built_with_cuda = true;
    gpus_.gpus = {GpuInfo{0, "0000:03:00.0", true, ""}};
  }
  void dev(const std::string& path) { mkdirs(host_.sysfs_root + "/" + path); }
  void link(const std::string& from, const std::string& to) {
    std::string f = host_.sysfs_root + "/" + from;
    mkdirs(f.substr(0, f.rfind('/')));
    ASSERT_EQ(::symlink((host_.sysfs_root + "/" + to).c_str(), f.c_str()), 0) << f;
  }
  /// A 4 KiB configuration space whose only extended capability is ACS with `control`.
  void acs_config(const std::string& bridge, uint16_t control) {
    std::string bytes(4096, '\0');
    bytes[0x100] = 0x0d;  // capability id 0x000d, version 1, next 0
    bytes[0x102] = 0x01;
    bytes[0x106] = static_cast<char>(control & 0xff);
    bytes[0x107] = static_cast<char>(control >> 8);
    write(host_.sysfs_root + "/" + kSwitch + bridge + "/config", bytes);
  }

  const std::string kSwitch = "devices/pci0000:00/0000:00:01.0/0000:01:00.0";
  GpuView gpus_;
};

TEST_F(FakePci, TheBridgesBetweenGpuAndNicAreThePathThroughTheirSwitch) {
  std::string s = host_.sysfs_root + "/" + kSwitch;
  EXPECT_EQ(pcie_path_bridges(s + "/0000:02:00.0/0000:03:00.0", s + "/0000:02:01.0/0000:04:00.0"),
            (std::vector<std::string>{s + "/0000:02:00.0", s, s + "/0000:02:01.0"}));
  EXPECT_TRUE(pcie_path_bridges("/sys/devices/pci0000:00/0000:00:01.0",
                                "/sys/devices/pci0000:80/0000:80:01.0")
                  .empty());
}

TEST_F(FakePci, AcsRedirectOnTheGpuNicPathWarnsNamingTheBridge) {
  acs_config("", 0x0000);
  acs_config("/0000:02:00.0", 0x001d);  // source validation, request + completion redirect, UF
  acs_config("/0000:02:01.0", 0x0001);  // source validation only
  Findings out;
  check_gpus(host_, gpus_, out);
  EXPECT_TRUE(has(out, Level::kOk, "GPU 0 (0000:03:00.0): exports its memory as dmabuf"))
      << all(out);
  EXPECT_TRUE(
      has(out, Level::kWarn, "GPU 0 <-> mlx5_0: 4 PCIe hops, same root complex", "ECAP_ACS"))
      << all(out);
  EXPECT_TRUE(has(out, Level::kWarn, "ACS P2P redirect on 0000:02:00.0, so")) << all(out);
}

TEST_F(FakePci, AcsThatCannotBeReadIsSaidSoAndNoRedirectIsFine) {
  write(host_.sysfs_root + "/" + kSwitch + "/config", std::string(64, '\0'));  // not root
  Findings unreadable;
  check_gpus(host_, gpus_, unreadable);
  EXPECT_TRUE(has(unreadable, Level::kInfo, "ACS not readable on 0000:02:00.0, 0000:01:00.0"))
      << all(unreadable);
  for (const char* bridge : {"", "/0000:02:00.0", "/0000:02:01.0"})
    acs_config(bridge, 0x0001);
  Findings clean;
  check_gpus(host_, gpus_, clean);
  EXPECT_TRUE(has(clean, Level::kOk, "GPU 0 <-> mlx5_0: 4 PCIe hops, same root complex"))
      << all(clean);
  EXPECT_EQ(read_acs(host_.sysfs_root + "/" + kSwitch + "/config").control, 0x0001);
}

TEST_F(FakeHost, NoCudaDriverIsInformationNotAFailure) {
  GpuView none;
  none.built_with_cuda = true;
  none.driver_error = "cannot load the CUDA driver (libcuda.so.1): not found";
  Findings out;
  check_gpus(host_, none, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(has(out, Level::kInfo, "no CUDA driver")) << all(out);
}

// -- the verdict -----------------------------------------------------------------------------

TEST_F(FakeHost, NoDeviceIsNotReadyForRdmaButTheFallbackIsAccepted) {
  ExaminationOptions options;
  options.loopback = false;
  Examination rdma = examine(host_, GpuView{}, IbverbsConfig{}, options);
  EXPECT_TRUE(has(rdma.findings, Level::kFail, "no RDMA device", kNoDeviceHint));
  EXPECT_EQ(rdma.verdict.exit_code, 1);
  EXPECT_NE(rdma.verdict.line.find("NOT READY for RDMA"), std::string::npos);
  options.require = Requirement::kAny;
  Examination any = examine(host_, GpuView{}, IbverbsConfig{}, options);
  EXPECT_EQ(any.verdict.exit_code, 0);
  EXPECT_NE(any.verdict.line.find("READY on the fallback transport"), std::string::npos);
}

TEST_F(FakeHost, AMalformedVariableStopsEveryTransport) {
  ExaminationOptions options;
  options.loopback = false;
  options.require = Requirement::kAny;
  Result<IbverbsConfig> bad =
      IbverbsConfig::from_env(IbverbsConfig{}, [](const char* name) -> const char* {
        return std::string(name) == kEnvPort ? "one" : nullptr;
      });
  Examination e = examine(host_, GpuView{}, bad, options);
  EXPECT_TRUE(has(e.findings, Level::kFail, "CAF_RDMA_PORT='one'", "correct or unset"));
  EXPECT_EQ(e.verdict.exit_code, 1) << e.verdict.line;
}

}  // namespace
}  // namespace caf_rdma::doctor
