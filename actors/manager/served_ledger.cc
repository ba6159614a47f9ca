// ServedLedger (see served_ledger.h).
#include "actors/manager/served_ledger.h"

namespace caf_rdma {

void ServedLedger::record(const std::string& peer, const char* path, uint8_t kind, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string& who = peers_[path].label(peer);
  auto& row = rows_[std::make_tuple(who, std::string(path), kind)];
  if (row.ops == 0) {
    row.peer = who;
    row.path = path;
    row.kind = kind;
  }
  ++row.ops;
  row.bytes += bytes;
}

std::vector<TrafficCount> ServedLedger::rows() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TrafficCount> out;
  out.reserve(rows_.size());
  for (const auto& [key, row] : rows_)
    out.push_back(row);
  return out;
}

}  // namespace caf_rdma
