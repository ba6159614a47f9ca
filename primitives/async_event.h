// AsyncEvent: the device's asynchronous events (ibv_get_async_event): port up and down, GID
// table changes, fatal errors of a QP, CQ or the whole device.
//
// Invariants:
//  1. `read_async_events` never blocks: it puts the context's async fd in non-blocking mode and
//     returns what is queued now (possibly nothing). Every event read is acknowledged
//     (ibv_ack_async_event) before it returns, so destroying the object it names never waits.
//  2. `classify_async_event` is a pure function of the event type.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

#include "primitives/status.h"

namespace caf_rdma {

/// What an event means to the user of a device.
enum class DeviceEventKind : uint8_t {
  kLost,        ///< the device is gone or dead: nothing on it works again (DEVICE_FATAL)
  kPortDown,    ///< a port left ACTIVE (PORT_ERR): traffic on it fails
  kPortUp,      ///< a port became ACTIVE again (PORT_ACTIVE)
  kGidChange,   ///< a port's GID table changed (an address was added, removed or moved)
  kQueueError,  ///< one QP, SRQ or CQ hit a fatal error (its work completions say which op)
  kInfo,        ///< nothing to act on (path migration, LID/P_Key/SM change, last WQE, ...)
};

const char* to_string(DeviceEventKind kind);

DeviceEventKind classify_async_event(ibv_event_type type);

struct AsyncEvent {
  ibv_event_type type = IBV_EVENT_DEVICE_FATAL;
  uint8_t port = 0;     ///< port events: the port number; 0 otherwise
  uint32_t qp_num = 0;  ///< QP events: the QP number; 0 otherwise
  /// "port 1: local catastrophic error"-like text: ibv_event_type_str plus what it names.
  std::string describe() const;
};

/// The events queued on `context` now (invariant 1). Errors: kIbverbsCall naming the call.
Result<std::vector<AsyncEvent>> read_async_events(ibv_context* context);

}  // namespace caf_rdma
