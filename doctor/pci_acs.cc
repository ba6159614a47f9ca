#include "doctor/pci_acs.h"

#include <fstream>
#include <iterator>
#include <vector>

namespace caf_rdma::doctor {

namespace {

constexpr size_t kExtendedStart = 0x100;
constexpr size_t kConfigSize = 4096;
constexpr uint16_t kAcsCapabilityId = 0x000d;
constexpr int kMaxSteps = 512;

uint32_t le32(const std::vector<uint8_t>& b, size_t at) {
  return static_cast<uint32_t>(b[at]) | static_cast<uint32_t>(b[at + 1]) << 8 |
         static_cast<uint32_t>(b[at + 2]) << 16 | static_cast<uint32_t>(b[at + 3]) << 24;
}

}  // namespace

AcsState read_acs(const std::string& config_path) {
  AcsState state;
  std::ifstream in(config_path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  if (bytes.size() < kConfigSize)
    return state;
  state.kind = AcsState::kAbsent;
  size_t at = kExtendedStart;
  for (int step = 0; step < kMaxSteps && at >= kExtendedStart && at + 8 <= bytes.size(); ++step) {
    uint32_t header = le32(bytes, at);
    if (header == 0 || header == 0xffffffff)
      break;
    if ((header & 0xffff) == kAcsCapabilityId) {
      state.kind = AcsState::kPresent;
      state.control = static_cast<uint16_t>(le32(bytes, at + 4) >> 16);
      break;
    }
    at = (header >> 20) & 0xffc;
  }
  return state;
}

}  // namespace caf_rdma::doctor
