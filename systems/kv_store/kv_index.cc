#include "systems/kv_store/kv_index.h"

#include "systems/kv_store/kv_protocol.h"

namespace caf_rdma::kv {

std::string key_text(const std::string& key) {
  return "'" + (key.size() <= 64 ? key : key.substr(0, 61) + "...") + "'";
}

Status check_key_length(uint64_t bytes) {
  if (bytes == 0 || bytes > kMaxKeyBytes)
    return Error(ErrorCode::kInvalidArgument, "key of " + std::to_string(bytes) +
                                                  " bytes; keys have 1 to " +
                                                  std::to_string(kMaxKeyBytes) + " bytes");
  return {};
}

void KvIndex::put(const std::string& key, std::shared_ptr<const KvBlock> block) {
  std::lock_guard<std::mutex> g(mutex_);
  map_[key].swap(block);  // the replaced block (now in `block`) is let go after the lock
}

std::optional<uint64_t> KvIndex::erase(const std::string& key) {
  std::shared_ptr<const KvBlock> gone;  // freed after the lock (the pool takes its own)
  std::lock_guard<std::mutex> g(mutex_);
  auto it = map_.find(key);
  if (it == map_.end())
    return std::nullopt;
  gone = std::move(it->second);
  map_.erase(it);
  return gone->length();
}

size_t KvIndex::size() const {
  std::lock_guard<std::mutex> g(mutex_);
  return map_.size();
}

Result<std::shared_ptr<const KvBlock>> KvIndex::for_get(const std::string& key, uint64_t room,
                                                        const std::string& room_text) const {
  CAF_RDMA_RETURN_IF_ERROR(check_key_length(key.size()));
  std::shared_ptr<const KvBlock> block;
  {
    std::lock_guard<std::mutex> g(mutex_);
    auto it = map_.find(key);
    if (it != map_.end())
      block = it->second;
  }
  if (!block)
    return Error(ErrorCode::kNotFound, "get " + key_text(key) + ": no such key");
  if (block->length() > room)
    return Error(ErrorCode::kSizeMismatch, "get " + key_text(key) + ": the value has " +
                                               std::to_string(block->length()) + " bytes, " +
                                               room_text);
  return block;
}

}  // namespace caf_rdma::kv
