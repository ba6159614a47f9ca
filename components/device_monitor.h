// DeviceMonitor: one thread that watches an opened device for what the completion queues
// never say: the device going away (unplugged, reset, `rdma link delete`), ports going down
// and up, GID table changes.
//
// Invariants:
//  1. Reports come from the monitor's thread, in the order seen. After a kLost report none
//     follows: the thread ends.
//  2. The device counts as lost on IBV_EVENT_DEVICE_FATAL, when the kernel removed its uverbs
//     node (`DeviceContext::uverbs_path`; Soft-RoCE and drivers without disassociate send no
//     event at all, and the removal waits until every process closes the device), or when its
//     event fd fails. The node is checked every `interval` and after every event.
//  3. The monitor holds the context until it is destroyed: after a loss its owner must destroy
//     it, and everything else made on the device, for the kernel to finish removing it.
//  4. The destructor wakes the thread (eventfd) and joins it; it waits for nothing else.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "primitives/async_event.h"
#include "primitives/device_context.h"

namespace caf_rdma {

struct DeviceEvent {
  DeviceEventKind kind = DeviceEventKind::kInfo;
  uint8_t port = 0;  ///< port events: the port; 0 otherwise
  /// What happened, naming the device: "rxe0 was removed (its uverbs node
  /// /sys/class/infiniband_verbs/uverbs0 is gone)", "rxe0 port 1: port error".
  std::string what;
};

class DeviceMonitor {
public:
  using Report = std::function<void(DeviceEvent)>;

  /// Starts the thread. Errors: kIbverbsCall when the stop eventfd cannot be made.
  static Result<std::unique_ptr<DeviceMonitor>> start(
      std::shared_ptr<DeviceContext> context, Report report,
      std::chrono::milliseconds interval = std::chrono::milliseconds(200));
  ~DeviceMonitor();
  DeviceMonitor(const DeviceMonitor&) = delete;
  DeviceMonitor& operator=(const DeviceMonitor&) = delete;

private:
  DeviceMonitor(std::shared_ptr<DeviceContext> context, Report report,
                std::chrono::milliseconds interval, int stop_fd);
  void run();

  std::shared_ptr<DeviceContext> context_;
  Report report_;
  std::chrono::milliseconds interval_;
  int stop_fd_ = -1;
  std::thread thread_;
};

}  // namespace caf_rdma
