// DeviceMonitor on Soft-RoCE, in the test VM: a port going down and up, and the device being
// removed (`rdma link delete`, which sends no event: the monitor sees its uverbs node go) and
// added again. Works on rxe1 (veth1); skips outside the VM (it changes the host's devices).
#include "components/device_monitor.h"

#include "components/rdma_domain.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <vector>

#include "tests/device_control.h"

namespace caf_rdma::testing {
namespace {

/// Collects a monitor's reports; waits (bounded) for one of a kind.
class Reports {
public:
  DeviceMonitor::Report sink() {
    return [this](DeviceEvent e) {
      std::lock_guard<std::mutex> g(mu_);
      events_.push_back(std::move(e));
      cv_.notify_all();
    };
  }
  /// The first report of `kind` from report `from` on, within 30 s; nullopt otherwise.
  std::optional<DeviceEvent> wait_for(DeviceEventKind kind, size_t from = 0) {
    std::unique_lock<std::mutex> g(mu_);
    std::optional<DeviceEvent> found;
    cv_.wait_for(g, std::chrono::seconds(30), [&] {
      for (size_t i = from; i < events_.size(); ++i)
        if (events_[i].kind == kind) {
          found = events_[i];
          return true;
        }
      return false;
    });
    return found;
  }
  size_t size() {
    std::lock_guard<std::mutex> g(mu_);
    return events_.size();
  }
  std::string all() {
    std::lock_guard<std::mutex> g(mu_);
    std::string s;
    for (const auto& e : events_)
      s += std::string(to_string(e.kind)) + ": " + e.what + "; ";
    return s;
  }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<DeviceEvent> events_;
};

class DeviceMonitorTest : public DeviceChangingTest {
protected:
  DeviceMonitorTest()
      : DeviceChangingTest("takes the Soft-RoCE device rxe1 and its interface down") {}
  void SetUp() override {
    DeviceChangingTest::SetUp();
    if (IsSkipped())
      return;
    auto c = DeviceContext::open("rxe1");
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    context_ = *c;
    EXPECT_NE(context_->uverbs_path().find("/sys/class/infiniband_verbs/uverbs"), std::string::npos)
        << context_->uverbs_path();
  }
  void TearDown() override {
    monitor_.reset();
    context_.reset();
    if (link_down_)
      run_command({"/usr/sbin/ip", "link", "set", "veth1", "up"});
    if (deleted_ && !added_)
      run_command({"/usr/bin/rdma", "link", "add", "rxe1", "type", "rxe", "netdev", "veth1"});
    if (readdress_) {
      // As the VM made it: 10.99.1.1 only, and the route whose source it is.
      run_command({"/usr/sbin/ip", "addr", "add", "10.99.1.1/32", "dev", "veth1"});
      run_command({"/usr/sbin/ip", "addr", "del", "10.99.1.7/32", "dev", "veth1"});
      run_command({"/usr/sbin/ip", "route", "replace", "10.99.0.1", "dev", "veth1", "src",
                   "10.99.1.1", "table", "101"});
    }
  }

  std::shared_ptr<DeviceContext> context_;
  std::unique_ptr<DeviceMonitor> monitor_;
  Reports reports_;
  bool link_down_ = false, deleted_ = false, added_ = false, readdress_ = false;
};

TEST_F(DeviceMonitorTest, PortDownAndUpAreReported) {
  auto m = DeviceMonitor::start(context_, reports_.sink());
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  monitor_ = std::move(*m);
  ASSERT_EQ(run_command({"/usr/sbin/ip", "link", "set", "veth1", "down"}), 0);
  link_down_ = true;
  auto down = reports_.wait_for(DeviceEventKind::kPortDown);
  ASSERT_TRUE(down) << "no port-down report within 30 s; reports: " << reports_.all();
  EXPECT_EQ(down->port, 1);
  EXPECT_NE(down->what.find("rxe1 port 1"), std::string::npos) << down->what;
  auto port = context_->query_port(1);
  ASSERT_TRUE(port.ok());
  EXPECT_NE(port->state, IBV_PORT_ACTIVE);
  size_t seen = reports_.size();
  ASSERT_EQ(run_command({"/usr/sbin/ip", "link", "set", "veth1", "up"}), 0);
  link_down_ = false;
  auto up = reports_.wait_for(DeviceEventKind::kPortUp, seen);
  ASSERT_TRUE(up) << "no port-up report within 30 s; reports: " << reports_.all();
  EXPECT_EQ(up->port, 1);
}

TEST_F(DeviceMonitorTest, AddressChangeIsReportedAndTheDomainChoosesTheGidAgain) {
  IbverbsConfig config;
  config.device_name = "rxe1";
  auto domain = RdmaDomain::open(config);
  ASSERT_TRUE(domain.ok()) << domain.error().to_string();
  EXPECT_EQ(to_string((*domain)->gid()), "::ffff:10.99.1.1");
  auto m = DeviceMonitor::start((*domain)->context(), reports_.sink());
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  monitor_ = std::move(*m);
  // The address moves: 10.99.1.7 comes, 10.99.1.1 goes.
  readdress_ = true;
  ASSERT_EQ(run_command({"/usr/sbin/ip", "addr", "add", "10.99.1.7/32", "dev", "veth1"}), 0);
  ASSERT_EQ(run_command({"/usr/sbin/ip", "addr", "del", "10.99.1.1/32", "dev", "veth1"}), 0);
  // Each entry added or removed is an event; choose again after each until the table settles.
  bool changed = false;
  size_t seen = 0;
  while (to_string((*domain)->gid()) != "::ffff:10.99.1.7") {
    auto e = reports_.wait_for(DeviceEventKind::kGidChange, seen);
    ASSERT_TRUE(e) << "no GID change report within 30 s; reports: " << reports_.all()
                   << "; GID now " << to_string((*domain)->gid());
    EXPECT_NE(e->what.find("rxe1 port 1"), std::string::npos) << e->what;
    seen = reports_.size();
    auto r = (*domain)->refresh_gid();
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    changed = changed || *r;
  }
  EXPECT_TRUE(changed);
  EXPECT_NE((*domain)->describe().find("10.99.1.7"), std::string::npos) << (*domain)->describe();
  EXPECT_EQ((*domain)->port_qp_info().gid, (*domain)->gid()) << "new QPs use the new GID";
  monitor_.reset();
}

TEST_F(DeviceMonitorTest, RemovedDeviceIsReportedLostAndCanBeOpenedAgain) {
  auto m = DeviceMonitor::start(context_, reports_.sink());
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  monitor_ = std::move(*m);
  Command del = start_command({"/usr/bin/rdma", "link", "delete", "rxe1"});
  ASSERT_GT(del.pid, 0);
  deleted_ = true;
  auto lost = reports_.wait_for(DeviceEventKind::kLost);
  ASSERT_TRUE(lost) << "no loss report within 30 s; reports: " << reports_.all();
  EXPECT_NE(lost->what.find("rxe1 was removed"), std::string::npos) << lost->what;
  EXPECT_NE(lost->what.find(context_->uverbs_path()), std::string::npos) << lost->what;
  // The removal waits for this process to let go of the device (rxe cannot disassociate).
  monitor_.reset();
  context_.reset();
  EXPECT_EQ(wait_command(del, std::chrono::seconds(60)), 0)
      << "'rdma link delete rxe1' did not finish after the context was closed";
  ASSERT_EQ(run_command({"/usr/bin/rdma", "link", "add", "rxe1", "type", "rxe", "netdev", "veth1"}),
            0);
  added_ = true;
  auto again = DeviceContext::open("rxe1");
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ((*again)->name(), "rxe1");
}

}  // namespace
}  // namespace caf_rdma::testing
