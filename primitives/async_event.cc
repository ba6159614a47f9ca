#include "primitives/async_event.h"

#include <fcntl.h>

#include <cerrno>

#include "primitives/ibverbs_error.h"

namespace caf_rdma {

const char* to_string(DeviceEventKind kind) {
  switch (kind) {
    case DeviceEventKind::kLost:
      return "device lost";
    case DeviceEventKind::kPortDown:
      return "port down";
    case DeviceEventKind::kPortUp:
      return "port up";
    case DeviceEventKind::kGidChange:
      return "GID change";
    case DeviceEventKind::kQueueError:
      return "queue error";
    case DeviceEventKind::kInfo:
      return "info";
  }
  return "unknown";
}

DeviceEventKind classify_async_event(ibv_event_type type) {
  switch (type) {
    case IBV_EVENT_DEVICE_FATAL:
      return DeviceEventKind::kLost;
    case IBV_EVENT_PORT_ERR:
      return DeviceEventKind::kPortDown;
    case IBV_EVENT_PORT_ACTIVE:
      return DeviceEventKind::kPortUp;
    case IBV_EVENT_GID_CHANGE:
      return DeviceEventKind::kGidChange;
    case IBV_EVENT_CQ_ERR:
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_PATH_MIG_ERR:
      return DeviceEventKind::kQueueError;
    default:
      return DeviceEventKind::kInfo;
  }
}

std::string AsyncEvent::describe() const {
  std::string text = ibv_event_type_str(type);
  if (port != 0)
    return "port " + std::to_string(port) + ": " + text;
  if (qp_num != 0)
    return "QP " + std::to_string(qp_num) + ": " + text;
  return text;
}

Result<std::vector<AsyncEvent>> read_async_events(ibv_context* context) {
  int fd = context->async_fd;
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0)
    return ibverbs_error("fcntl(F_GETFL)", errno, "the device's async event fd");
  if ((flags & O_NONBLOCK) == 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return ibverbs_error("fcntl(F_SETFL, O_NONBLOCK)", errno, "the device's async event fd");
  std::vector<AsyncEvent> out;
  ibv_async_event e{};
  while (true) {
    errno = 0;
    if (ibv_get_async_event(context, &e) != 0)
      break;
    AsyncEvent a;
    a.type = e.event_type;
    switch (e.event_type) {
      case IBV_EVENT_PORT_ACTIVE:
      case IBV_EVENT_PORT_ERR:
      case IBV_EVENT_LID_CHANGE:
      case IBV_EVENT_PKEY_CHANGE:
      case IBV_EVENT_SM_CHANGE:
      case IBV_EVENT_CLIENT_REREGISTER:
      case IBV_EVENT_GID_CHANGE:
        a.port = static_cast<uint8_t>(e.element.port_num);
        break;
      case IBV_EVENT_CQ_ERR:
      case IBV_EVENT_SRQ_ERR:
      case IBV_EVENT_SRQ_LIMIT_REACHED:
      case IBV_EVENT_DEVICE_FATAL:
        break;
      default:
        a.qp_num = e.element.qp != nullptr ? e.element.qp->qp_num : 0;
        break;
    }
    ibv_ack_async_event(&e);
    out.push_back(a);
  }
  int err = errno;
  if (err != EAGAIN && err != EWOULDBLOCK && out.empty())
    return ibverbs_error("ibv_get_async_event", err != 0 ? err : EIO,
                         "the device's async event fd");
  return out;
}

}  // namespace caf_rdma
