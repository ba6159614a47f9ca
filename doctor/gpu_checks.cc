#include "doctor/gpu_checks.h"

#include "doctor/host_checks.h"
#include "doctor/pci_acs.h"
#include "primitives/pcie_topology.h"

namespace caf_rdma::doctor {

namespace {

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// ACS on the bridges between the GPU at `gpu_path` and the NIC at `nic_path`.
Finding check_acs(const std::string& what, const std::string& gpu_path,
                  const std::string& nic_path) {
  std::string redirecting, unreadable;
  for (const auto& bridge : pcie_path_bridges(gpu_path, nic_path)) {
    AcsState acs = read_acs(bridge + "/config");
    if (acs.kind == AcsState::kNotReadable)
      unreadable += (unreadable.empty() ? "" : ", ") + base_name(bridge);
    else if (acs.redirects())
      redirecting += (redirecting.empty() ? "" : ", ") + base_name(bridge);
  }
  if (!redirecting.empty())
    return warn(what + ": ACS P2P redirect on " + redirecting +
                    ", so GPU<->NIC traffic detours through the root complex",
                "disable ACS redirection on those bridges (BIOS/firmware setting, or "
                "`setpci -s BDF ECAP_ACS+6.w=0` as root after every boot)");
  if (!unreadable.empty())
    return info(what + ": ACS not readable on " + unreadable + " (their config space needs root)");
  return ok(what);
}

}  // namespace

void check_gpus(const HostView& host, const GpuView& gpus, Findings& out) {
  if (!gpus.built_with_cuda) {
    out.push_back(
        info("GPUs not checked: this build has no CUDA support "
             "(`bazel build --config=cuda //doctor:caf_rdma_doctor` in caf-rdma's checkout, "
             "`--config=cuda @caf_rdma//doctor:caf_rdma_doctor` from a workspace that imports "
             "caf_rdma.bazelrc)"));
    return;
  }
  if (!gpus.driver_error.empty()) {
    bool no_driver = gpus.driver_error.find("libcuda.so.1") != std::string::npos;
    out.push_back(info(no_driver ? "no CUDA driver (libcuda.so.1 cannot be loaded): GPU memory "
                                   "is not used, host memory is"
                                 : "CUDA driver not usable: " + gpus.driver_error));
    return;
  }
  if (gpus.gpus.empty()) {
    out.push_back(info("CUDA driver loaded, no GPU"));
    return;
  }
  bool any_dmabuf = false;
  for (const auto& g : gpus.gpus) {
    std::string name =
        "GPU " + std::to_string(g.ordinal) + (g.bus_id.empty() ? "" : " (" + g.bus_id + ")");
    out.push_back(ok(name));
    any_dmabuf = any_dmabuf || g.dmabuf_ok;
    if (g.dmabuf_ok)
      out.push_back(ok(name + ": exports its memory as dmabuf (GPUDirect by ibv_reg_dmabuf_mr)"));
    else
      out.push_back(info(name + ": no dmabuf export (" + g.dmabuf_error + ")"));
  }
  bool peermem = module_loaded(host, "nvidia_peermem");
  if (peermem)
    out.push_back(ok("kernel module nvidia_peermem loaded (GPUDirect by ibv_reg_mr)"));
  else if (any_dmabuf)
    out.push_back(info("kernel module nvidia_peermem not loaded (dmabuf serves instead)"));
  else
    out.push_back(
        warn("neither dmabuf export nor nvidia_peermem: NICs cannot register GPU "
             "memory, which is then staged through host bounce buffers (slower)",
             "`modprobe nvidia_peermem`, or the open GPU kernel modules on Linux 5.12+ "
             "for dmabuf"));
  std::vector<std::string> nics;
  for (const auto& d : host.devices)
    nics.push_back(d.name);
  for (const auto& g : gpus.gpus) {
    if (g.bus_id.empty())
      continue;
    std::string gpu_path = pci_device_path(host.sysfs_root, g.bus_id);
    for (const auto& nic : rank_nics_by_distance(host.sysfs_root, g.bus_id, nics)) {
      std::string what = "GPU " + std::to_string(g.ordinal) + " <-> " + nic.name + ": ";
      if (nic.distance < 0) {
        out.push_back(info(what + "NIC not on PCI: GPU memory is staged through host memory"));
        continue;
      }
      what += std::to_string(nic.distance) + " PCIe hops, " +
              (nic.same_root ? "same root complex" : "another root complex") +
              (nic.same_numa ? ", same NUMA node" : "");
      out.push_back(check_acs(what, gpu_path, rdma_device_path(host.sysfs_root, nic.name)));
    }
  }
}

}  // namespace caf_rdma::doctor
