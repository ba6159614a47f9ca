// GpuImports (see gpu_imports.h).
#include "components/gpu_imports.h"

#include <algorithm>
#include <string>

namespace caf_rdma {

GpuImports::~GpuImports() {
  close_all();
}

void GpuImports::close_entry(const Entry& e) {
  (void)e.memory->close_import(e.import, e.device);  // nothing more to do if the driver fails
}

Result<GpuImports::Lease> GpuImports::acquire(const std::vector<uint8_t>& handle,
                                              const std::shared_ptr<DeviceMemory>& memory,
                                              int device) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, e] : entries_)
      if (!e.doomed && e.device == device && e.handle == handle) {
        ++e.users;
        e.last_use = ++clock_;
        return Lease{id, e.import.base};
      }
  }
  Opening opening{&handle};
  {
    std::lock_guard<std::mutex> lock(mu_);
    opening_.push_back(&opening);
  }
  Result<GpuImport> made = memory->import_range(handle, device);
  std::vector<Entry> evicted;
  Lease lease;
  {
    std::lock_guard<std::mutex> lock(mu_);
    opening_.erase(std::find(opening_.begin(), opening_.end(), &opening));
    if (!made.ok()) {
      given_back_.notify_all();
      return made.error();
    }
    const GpuImport import = *made;
    lease = Lease{next_id_++, import.base};
    Entry& e = entries_[lease.id];
    e.handle = handle;
    e.device = device;
    e.memory = memory;
    e.import = import;
    e.users = 1;
    e.doomed = opening.doomed;  // closed after this copy: a close() came meanwhile
    e.last_use = ++clock_;
    // Invariant 3: the least recently used ones no copy holds.
    while (entries_.size() > kMaxOpen) {
      auto lru = entries_.end();
      for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (it->second.users == 0 &&
            (lru == entries_.end() || it->second.last_use < lru->second.last_use))
          lru = it;
      if (lru == entries_.end())
        break;
      evicted.push_back(std::move(lru->second));
      entries_.erase(lru);
    }
  }
  for (const Entry& e : evicted)
    close_entry(e);
  given_back_.notify_all();
  return lease;
}

void GpuImports::give_back(const Lease& lease) {
  Entry closing;
  bool close_it = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(lease.id);
    if (it == entries_.end())
      return;
    if (--it->second.users == 0 && it->second.doomed) {
      closing = std::move(it->second);
      entries_.erase(it);
      close_it = true;
    }
  }
  if (close_it)
    close_entry(closing);
  given_back_.notify_all();
}

Result<size_t> GpuImports::close(const std::vector<uint8_t>& handle,
                                 std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(mu_);
  const std::vector<Entry> idle = doom_locked(&handle);
  for (Opening* o : opening_)
    if (*o->handle == handle)
      o->doomed = true;
  size_t held = 0;
  auto count_held = [&] {
    held = held_locked(handle);
    return held == 0;
  };
  lock.unlock();
  for (const Entry& e : idle)
    close_entry(e);
  lock.lock();
  if (!given_back_.wait_for(lock, limit, count_held))
    return Error(ErrorCode::kTimeout,
                 std::to_string(held) + " import(s) of the export still held by a copy after " +
                     std::to_string(limit.count()) + " ms (closed when it ends)");
  return idle.size();
}

size_t GpuImports::held_locked(const std::vector<uint8_t>& handle) const {
  size_t held = 0;
  for (const auto& [id, e] : entries_)
    held += e.doomed && e.handle == handle ? 1 : 0;
  for (const Opening* o : opening_)
    held += *o->handle == handle ? 1 : 0;
  return held;
}

std::vector<GpuImports::Entry> GpuImports::doom_locked(const std::vector<uint8_t>* handle) {
  std::vector<Entry> idle;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (handle != nullptr && it->second.handle != *handle) {
      ++it;
      continue;
    }
    it->second.doomed = true;
    if (it->second.users == 0) {
      idle.push_back(std::move(it->second));
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  return idle;
}

void GpuImports::close_all() {
  std::vector<Entry> idle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle = doom_locked(nullptr);
  }
  for (const Entry& e : idle)
    close_entry(e);
}

size_t GpuImports::open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace caf_rdma
