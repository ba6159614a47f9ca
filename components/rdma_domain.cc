#include "components/rdma_domain.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "components/rdma_queue_pair.h"
#include "components/secure_random.h"
#include "primitives/completion_queue.h"
#include "primitives/queue_pair.h"

namespace caf_rdma {

std::string known_device_problem(const std::string& device, uint32_t vendor_id,
                                 const std::string& kernel_release) {
  constexpr uint32_t kRxeVendorId = 0xFFFFFF;
  bool rxe = vendor_id == kRxeVendorId || device.rfind("rxe", 0) == 0;
  int major = 0, minor = 0;
  if (!rxe || std::sscanf(kernel_release.c_str(), "%d.%d", &major, &minor) != 2)
    return "";
  if (major > 6 || (major == 6 && minor >= 2))
    return "";
  return "device " + device + " is Soft-RoCE (rxe) on Linux " + kernel_release +
         ": rxe before 6.2 is known to complete RDMA READs as successful whose data never "
         "arrived (under load; kernel log: WARNING in rxe_completer). Use kernel 6.2 or newer, "
         "or verify mode (CAF_RDMA_VERIFY=1) to catch it";
}

namespace {

/// A device without reliable-connected QPs (EFA offers SRD and UD only) opens, allocates and
/// registers like any other, then fails every transfer: find out at open, so the error comes
/// once, names the device, and auto mode takes the fallback.
Status probe_reliable_connected(const std::shared_ptr<ProtectionDomain>& pd) {
  CAF_RDMA_ASSIGN_OR_RETURN(auto cq, CompletionQueue::create(pd->context(), 2, false));
  IbverbsConfig tiny;
  tiny.max_send_wr = tiny.max_recv_wr = 1;
  tiny.max_send_sge = tiny.max_recv_sge = 1;
  tiny.max_inline_data = 0;
  auto qp = QueuePair::create(pd, cq, cq, tiny);
  if (!qp.ok())
    return Error(ErrorCode::kDeviceNotFound,
                 pd->context()->name() +
                     " cannot create reliable-connected (RC) queue pairs, which caf-rdma needs "
                     "(EFA, for one, offers only SRD and UD): " +
                     qp.error().message() +
                     "; choose another device (CAF_RDMA_DEVICE) or the fallback transport "
                     "(CAF_RDMA_TRANSPORT=fallback or auto)");
  return {};
}

}  // namespace

Result<std::shared_ptr<RdmaDomain>> RdmaDomain::open(const IbverbsConfig& config) {
  CAF_RDMA_RETURN_IF_ERROR(config.validate());
  std::shared_ptr<RdmaDomain> d(new RdmaDomain());
  CAF_RDMA_ASSIGN_OR_RETURN(d->context_, DeviceContext::open_selected(config));
  CAF_RDMA_ASSIGN_OR_RETURN(d->port_, d->context_->query_port(config.port_num));
  CAF_RDMA_ASSIGN_OR_RETURN(DeviceLimits limits, d->context_->limits(config.port_num));
  d->config_ = config.clamped(limits);
  d->config_.device_name = d->context_->name();
  d->requested_gid_index_ = config.gid_index;
  CAF_RDMA_ASSIGN_OR_RETURN(auto table, d->context_->gid_table(config.port_num));
  std::string where = d->context_->name() + " port " + std::to_string(config.port_num);
  CAF_RDMA_ASSIGN_OR_RETURN(
      d->gid_index_,
      select_gid_index(table, d->port_.is_ethernet, config.gid_index, where, config.netdev));
  for (const auto& e : table)
    if (e.index == d->gid_index_)
      d->gid_ = e.gid;
  d->config_.gid_index = d->gid_index_;
  utsname un{};
  if (::uname(&un) == 0)
    d->warning_ =
        known_device_problem(d->context_->name(), d->context_->device_attr().vendor_id, un.release);
  CAF_RDMA_ASSIGN_OR_RETURN(d->pd_, ProtectionDomain::allocate(d->context_));
  CAF_RDMA_RETURN_IF_ERROR(probe_reliable_connected(d->pd_));
  while (d->incarnation_ == 0)
    d->incarnation_ = secure_random_u64();
  return d;
}

int RdmaDomain::gid_index() const {
  std::lock_guard<std::mutex> guard(gid_mu_);
  return gid_index_;
}

Gid RdmaDomain::gid() const {
  std::lock_guard<std::mutex> guard(gid_mu_);
  return gid_;
}

Result<bool> RdmaDomain::refresh_gid() {
  CAF_RDMA_ASSIGN_OR_RETURN(auto table, context_->gid_table(config_.port_num));
  std::string where = context_->name() + " port " + std::to_string(config_.port_num);
  CAF_RDMA_ASSIGN_OR_RETURN(
      int index,
      select_gid_index(table, port_.is_ethernet, requested_gid_index_, where, config_.netdev));
  Gid gid{};
  for (const auto& e : table)
    if (e.index == index)
      gid = e.gid;
  std::lock_guard<std::mutex> guard(gid_mu_);
  bool changed = index != gid_index_ || gid != gid_;
  gid_index_ = index;
  gid_ = gid;
  return changed;
}

Result<RdmaBuffer> RdmaDomain::register_buffer(void* addr, uint64_t size, Access access) {
  uint64_t a = reinterpret_cast<uint64_t>(addr);
  // Outside the lock: ibv_reg_mr pins pages and may take milliseconds.
  CAF_RDMA_ASSIGN_OR_RETURN(auto region, MemoryRegion::register_memory(pd_, addr, size, access));
  std::lock_guard<std::mutex> guard(mu_);
  ++registrations_;
  regions_.emplace(a, region);
  sweep_expired();
  return RdmaBuffer(std::move(region), a, size, access, device_name());
}

Result<RdmaBuffer> RdmaDomain::register_local(void* addr, uint64_t size) {
  uint64_t a = reinterpret_cast<uint64_t>(addr);
  std::lock_guard<std::mutex> guard(mu_);
  // Look for a live local region that covers the range. Regions are keyed by base address,
  // so only those starting at or below `a` can cover it.
  for (auto it = local_.upper_bound(a); it != local_.begin();) {
    --it;
    auto region = it->second.lock();
    if (!region) {
      it = local_.erase(it);
      continue;
    }
    if (region->covers(a, size)) {
      ++cache_hits_;
      return RdmaBuffer(std::move(region), a, size, Access::kLocalWrite, device_name());
    }
  }
  CAF_RDMA_ASSIGN_OR_RETURN(auto region,
                            MemoryRegion::register_memory(pd_, addr, size, Access::kLocalWrite));
  ++registrations_;
  regions_.emplace(a, region);
  local_.emplace(a, region);
  sweep_expired();
  return RdmaBuffer(std::move(region), a, size, Access::kLocalWrite, device_name());
}

void RdmaDomain::sweep_expired() {
  if (++inserted_ < std::max<uint64_t>(64, regions_.size() / 2))
    return;
  inserted_ = 0;
  for (auto* m : {&regions_, &local_})
    for (auto it = m->begin(); it != m->end();)
      it = it->second.expired() ? m->erase(it) : std::next(it);
}

RdmaBuffer RdmaDomain::adopt_region(std::shared_ptr<MemoryRegion> region, uint64_t addr,
                                    uint64_t size, Access access) const {
  return RdmaBuffer(std::move(region), addr, size, access, device_name());
}

RegistrationStats RdmaDomain::registration_stats() const {
  std::lock_guard<std::mutex> guard(mu_);
  RegistrationStats s;
  for (const auto& [base, weak] : regions_) {
    if (auto r = weak.lock()) {
      ++s.live_regions;
      s.registered_bytes += r->length();
    }
  }
  s.cache_hits = cache_hits_;
  s.registrations = registrations_;
  return s;
}

std::string RdmaDomain::describe() const {
  std::lock_guard<std::mutex> guard(gid_mu_);
  return device_name() + " port " + std::to_string(config_.port_num) + " (" +
         (port_.is_ethernet ? "RoCE" : "InfiniBand") + ", GID[" + std::to_string(gid_index_) +
         "] " + to_string(gid_) + ", MTU " + std::to_string(mtu_bytes(config_.path_mtu)) + ")";
}

QpInfo RdmaDomain::port_qp_info() const {
  QpInfo info;
  info.lid = port_.lid;
  info.gid = gid();
  info.mtu = static_cast<uint8_t>(config_.path_mtu);
  info.is_ethernet = port_.is_ethernet;
  info.max_dest_rd_atomic = config_.max_dest_rd_atomic;
  info.incarnation = incarnation_;
  return info;
}

bool RdmaDomain::port_active() const {
  auto now = context_->query_port(port_.port_num);
  return now.ok() && now->state == IBV_PORT_ACTIVE;
}

bool RdmaDomain::atomics() const {
  return context_->device_attr().atomic_cap != IBV_ATOMIC_NONE;
}

Result<RdmaBuffer> RdmaDomain::register_gpu(const DeviceMemory& memory, const PointerInfo& info,
                                            uint64_t addr, uint64_t size, Access access) {
  CAF_RDMA_ASSIGN_OR_RETURN(auto region, memory.register_direct(pd_, info, addr, size, access));
  return adopt_region(std::move(region), addr, size, access);
}

Result<std::shared_ptr<CompletionRouter>> RdmaDomain::shared_completions(int entries) {
  const auto max_cqe = static_cast<int64_t>(context_->device_attr().max_cqe);
  const int n = max_cqe > 0 ? static_cast<int>(std::min<int64_t>(entries, max_cqe)) : entries;
  auto made = CompletionRouter::create(context_, n);
  if (!made.ok())
    return made.error().with_context("creating the shared completion queue of " + device_name());
  return *made;
}

Result<std::shared_ptr<QpEndpoint>> RdmaDomain::make_qp(const QpOptions& options) {
  CAF_RDMA_ASSIGN_OR_RETURN(auto created, RdmaQueuePair::create(shared_from_this(), options));
  return std::shared_ptr<QpEndpoint>(std::move(created));
}

Result<std::unique_ptr<DeviceMonitor>> RdmaDomain::watch(DeviceMonitor::Report report) {
  return DeviceMonitor::start(context_, std::move(report));
}

}  // namespace caf_rdma
