#include "doctor/sysfs_gids.h"

#include <algorithm>
#include <cctype>

#include "doctor/host_view.h"

namespace caf_rdma::doctor {

std::vector<GidEntry> read_gid_table(const std::string& sysfs_root, const std::string& device,
                                     uint8_t port, bool is_ethernet) {
  std::string dir =
      sysfs_root + "/class/infiniband/" + device + "/ports/" + std::to_string(port) + "/";
  std::vector<GidEntry> out;
  for (const auto& name : list_directory(dir + "gids")) {
    if (name.empty() || name.size() > 5 || !std::all_of(name.begin(), name.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c));
        }))
      continue;
    // dir + what + name, without temporaries.
    auto file = [&](const char* what) {
      std::string path = dir;
      path += what;
      path += name;
      return read_line(path);
    };
    auto gid = parse_gid(file("gids/"));
    if (!gid.ok() || is_zero(*gid))
      continue;
    GidEntry e;
    e.index = std::stoi(name);
    e.gid = *gid;
    std::string type = file("gid_attrs/types/");  // "RoCE v2", "IB/RoCE v1"
    if (type == "RoCE v2")
      e.type = GidType::kRoceV2;
    else if (is_ethernet)
      e.type = GidType::kRoceV1;
    else
      e.type = GidType::kInfiniBand;
    e.netdev = file("gid_attrs/ndevs/");
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(),
            [](const GidEntry& a, const GidEntry& b) { return a.index < b.index; });
  return out;
}

}  // namespace caf_rdma::doctor
