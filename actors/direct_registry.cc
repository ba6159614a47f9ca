// DirectRegistry: local buffers shared between a manager and its direct lanes.
#include "actors/direct_registry.h"

namespace caf_rdma {

void DirectRegistry::add(uint64_t id, const Entry& entry) {
  std::lock_guard<std::mutex> g(mu_);
  Slot slot;
  slot.entry = entry;
  slots_[id] = std::move(slot);
}

std::optional<DirectRegistry::Entry> DirectRegistry::acquire(uint64_t id) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = slots_.find(id);
  if (it == slots_.end() || it->second.released || it->second.lost ||
      it->second.entry.rdma.released())
    return std::nullopt;
  ++it->second.active;
  return it->second.entry;
}

std::optional<DirectRegistry::Entry> DirectRegistry::acquire_host(uint64_t id) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = slots_.find(id);
  if (it == slots_.end() || it->second.released || it->second.entry.memory != BufferMemory::kHost)
    return std::nullopt;
  ++it->second.active;
  return it->second.entry;
}

void DirectRegistry::drop_registrations() {
  std::lock_guard<std::mutex> g(mu_);
  for (auto& [id, slot] : slots_) {
    slot.entry.rdma = RdmaBuffer();
    slot.lost = true;
  }
}

void DirectRegistry::set_rdma(uint64_t id, RdmaBuffer rdma) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = slots_.find(id);
  if (it != slots_.end() && !it->second.released) {
    it->second.entry.rdma = std::move(rdma);
    it->second.lost = false;
  }
}

bool DirectRegistry::done(uint64_t id) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = slots_.find(id);
  if (it == slots_.end() || it->second.active == 0)
    return false;
  if (--it->second.active > 0 || !it->second.released)
    return false;
  slots_.erase(it);
  return true;
}

bool DirectRegistry::release(uint64_t id) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = slots_.find(id);
  if (it == slots_.end())
    return true;
  if (it->second.active == 0) {
    slots_.erase(it);
    return true;
  }
  it->second.released = true;
  return false;
}

bool DirectRegistry::busy(uint64_t id) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = slots_.find(id);
  return it != slots_.end() && it->second.active > 0;
}

void DirectRegistry::count(bool ok, uint64_t bytes) {
  std::lock_guard<std::mutex> g(mu_);
  if (ok) {
    ++counters_.ops;
    counters_.bytes += bytes;
  } else {
    ++counters_.errors;
  }
}

void DirectRegistry::count_stream(bool ok, uint64_t bytes) {
  std::lock_guard<std::mutex> g(mu_);
  if (ok) {
    ++counters_.stream_ops;
    counters_.stream_bytes += bytes;
  } else {
    ++counters_.stream_errors;
  }
}

void DirectRegistry::count_served(uint64_t bytes) {
  std::lock_guard<std::mutex> g(mu_);
  counters_.served_bytes += bytes;
}

DirectRegistry::Counters DirectRegistry::counters() const {
  std::lock_guard<std::mutex> g(mu_);
  return counters_;
}

void DirectRegistry::record(const OpSample& sample) {
  std::lock_guard<std::mutex> g(mu_);
  telemetry_.record(sample);
}

ManagerTelemetry DirectRegistry::telemetry() const {
  std::lock_guard<std::mutex> g(mu_);
  return telemetry_.snapshot();
}

}  // namespace caf_rdma
