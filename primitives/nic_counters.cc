// NicCounters (see nic_counters.h).
#include "primitives/nic_counters.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <tuple>

namespace caf_rdma {

namespace fs = std::filesystem;

namespace {

/// The sorted names of the entries of `dir` (none when it cannot be listed).
std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

Result<std::vector<NicCounter>> read_nic_counters(const std::string& device,
                                                  const std::string& root) {
  const fs::path ports = fs::path(root) / device / "ports";
  std::error_code ec;
  if (device.empty() || !fs::is_directory(ports, ec))
    return Error(ErrorCode::kNotFound, "no RDMA device '" + device + "' under " + root +
                                           " (no folder " + ports.string() + ")");
  std::vector<NicCounter> out;
  for (const auto& port : entries(ports))
    for (const char* group : {"counters", "hw_counters"})
      for (const auto& name : entries(ports / port / group)) {
        std::ifstream in(ports / port / group / name);
        uint64_t value = 0;
        if (!(in >> value))
          continue;  // invariant 2 (e.g. hw_counters/lifespan is a setting, still a number)
        out.push_back(NicCounter{port, group, name, value});
      }
  return out;
}

}  // namespace caf_rdma
