#include "components/device_monitor.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "primitives/ibverbs_error.h"

namespace caf_rdma {

Result<std::unique_ptr<DeviceMonitor>> DeviceMonitor::start(std::shared_ptr<DeviceContext> context,
                                                            Report report,
                                                            std::chrono::milliseconds interval) {
  int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0)
    return ibverbs_error("eventfd", errno, "the monitor of device " + context->name());
  return std::unique_ptr<DeviceMonitor>(
      new DeviceMonitor(std::move(context), std::move(report), interval, fd));
}

DeviceMonitor::DeviceMonitor(std::shared_ptr<DeviceContext> context, Report report,
                             std::chrono::milliseconds interval, int stop_fd)
    : context_(std::move(context)),
      report_(std::move(report)),
      interval_(interval),
      stop_fd_(stop_fd) {
  thread_ = std::thread([this] { run(); });
}

DeviceMonitor::~DeviceMonitor() {
  uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);
  thread_.join();
  ::close(stop_fd_);
}

void DeviceMonitor::run() {
  const std::string& name = context_->name();
  const std::string& node = context_->uverbs_path();
  pollfd fds[2] = {{stop_fd_, POLLIN, 0}, {context_->get()->async_fd, POLLIN, 0}};
  auto lost = [&](const std::string& why) {
    report_(DeviceEvent{DeviceEventKind::kLost, 0, name + " " + why});
  };
  while (true) {
    fds[0].revents = fds[1].revents = 0;
    int n = ::poll(fds, 2, static_cast<int>(interval_.count()));
    if (n < 0 && errno != EINTR)
      return lost("cannot be watched: poll on its async event fd failed: " + errno_string(errno));
    if (fds[0].revents != 0)
      return;
    if (fds[1].revents & (POLLERR | POLLHUP | POLLNVAL))
      return lost("was lost: its async event fd reports an error or hang-up");
    if (fds[1].revents & POLLIN) {
      auto events = read_async_events(context_->get());
      if (!events.ok())
        return lost("was lost: " + events.error().message());
      for (const AsyncEvent& e : *events) {
        DeviceEventKind kind = classify_async_event(e.type);
        if (kind == DeviceEventKind::kLost)
          return lost("reported a fatal error (" + e.describe() + ")");
        report_(DeviceEvent{kind, e.port, name + " " + e.describe()});
      }
    }
    if (!node.empty() && ::access(node.c_str(), F_OK) != 0 && errno == ENOENT)
      return lost("was removed (its uverbs node " + node + " is gone)");
  }
}

}  // namespace caf_rdma
