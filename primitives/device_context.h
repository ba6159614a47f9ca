// DeviceContext: RAII owner of an opened device (ibv_context).
//
// Destruction order: everything created from a context (PD, CQ, completion channel, and through
// the PD: MRs and QPs) holds a shared_ptr to it, so the context is closed last.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>
#include <vector>

#include "primitives/device_list.h"
#include "primitives/gid.h"
#include "primitives/ibverbs_config.h"
#include "primitives/status.h"

namespace caf_rdma {

class DeviceContext {
public:
  /// Opens the device named `name`.
  static Result<std::shared_ptr<DeviceContext>> open(const std::string& name);

  /// Opens the device `config` selects: `config.device_name`, else the active one closest to
  /// `config.near_pci_device`, else by `config.local_rank` among the devices whose port
  /// `config.port_num` is ACTIVE (see `select_device`). With no device on the host the error is
  /// kNoDevice and says how to get one.
  static Result<std::shared_ptr<DeviceContext>> open_selected(const IbverbsConfig& config);

  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;
  ~DeviceContext();

  ibv_context* get() const { return context_; }
  const std::string& name() const { return name_; }
  const ibv_device_attr& device_attr() const { return attr_; }

  /// State, link layer, MTU, LID of a port.
  Result<PortInfo> query_port(uint8_t port_num) const;

  /// What the device and port allow, for `IbverbsConfig::clamped`.
  Result<DeviceLimits> limits(uint8_t port_num) const;

  /// The valid entries of a port's GID table, with their types (one ibverbs call, no sysfs walk).
  Result<std::vector<GidEntry>> gid_table(uint8_t port_num) const;
  /// The device's uverbs node in sysfs ("/sys/class/infiniband_verbs/uverbs0"): the kernel
  /// removes it at once when the device is unregistered, even while this context is open.
  const std::string& uverbs_path() const { return uverbs_path_; }
  /// Set by open_selected when the choice was a guess worth telling the user: several hardware
  /// devices had an active port and nothing (name, GPU, local rank) said which one to take.
  const std::string& selection_note() const { return selection_note_; }

private:
  DeviceContext(ibv_context* context, std::string name, const ibv_device_attr& attr,
                std::string uverbs_path)
      : context_(context),
        name_(std::move(name)),
        attr_(attr),
        uverbs_path_(std::move(uverbs_path)) {}

  ibv_context* context_;
  std::string name_;
  ibv_device_attr attr_;
  std::string uverbs_path_;
  std::string selection_note_;
};

}  // namespace caf_rdma
