#include "components/admission_queue.h"

namespace caf_rdma {

size_t AdmissionQueue::from(uint32_t ip) const {
  auto h = per_host_.find(ip);
  return h == per_host_.end() ? 0 : h->second;
}

bool AdmissionQueue::fits(uint32_t ip) const {
  return from(ip) < max_per_host_ && by_fd_.size() < max_total_;
}

int AdmissionQueue::room_for(uint32_t ip) const {
  const bool own = from(ip) >= max_per_host_;
  if (!own && by_fd_.size() < max_total_)
    return -1;
  uint32_t victim = ip;
  if (!own) {
    size_t most = 0;
    for (const auto& [host, n] : per_host_)
      if (n > most) {
        most = n;
        victim = host;
      }
  }
  for (const auto& [seq, fd] : order_)  // oldest first
    if (by_fd_.at(fd).second == victim)
      return fd;
  return -1;
}

void AdmissionQueue::add(int fd, uint32_t ip) {
  if (by_fd_.count(fd) != 0)
    return;
  const uint64_t seq = next_seq_++;
  order_.emplace(seq, fd);
  by_fd_.emplace(fd, std::make_pair(seq, ip));
  ++per_host_[ip];
}

bool AdmissionQueue::remove(int fd) {
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end())
    return false;
  const auto [seq, ip] = it->second;
  order_.erase(seq);
  by_fd_.erase(it);
  if (auto h = per_host_.find(ip); h != per_host_.end() && --h->second == 0)
    per_host_.erase(h);
  return true;
}

}  // namespace caf_rdma
