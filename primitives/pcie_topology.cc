#include "primitives/pcie_topology.h"

#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>

namespace caf_rdma {

namespace {

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < path.size()) {
    size_t slash = path.find('/', at);
    if (slash == std::string::npos)
      slash = path.size();
    if (slash > at)
      out.push_back(path.substr(at, slash - at));
    at = slash + 1;
  }
  return out;
}

std::string resolve(const std::string& link) {
  char buf[PATH_MAX];
  if (::realpath(link.c_str(), buf) == nullptr)
    return "";
  return buf;
}

}  // namespace

int pcie_distance(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty())
    return -1;
  auto x = components(a), y = components(b);
  size_t common = 0;
  while (common < x.size() && common < y.size() && x[common] == y[common])
    ++common;
  return static_cast<int>((x.size() - common) + (y.size() - common));
}

std::vector<std::string> pcie_path_bridges(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty())
    return {};
  auto x = components(a), y = components(b);
  size_t common = 0;
  while (common < x.size() && common < y.size() && x[common] == y[common])
    ++common;
  // A PCI device's name has a colon ("0000:3a:00.0"); "pci0000:3a" and "devices" are not devices.
  auto is_pci = [](const std::string& c) {
    return c.find(':') != std::string::npos && c.rfind("pci", 0) != 0;
  };
  if (common == 0 || !is_pci(x[common - 1]))
    return {};
  auto path_of = [](const std::vector<std::string>& parts, size_t n) {
    std::string out;
    for (size_t i = 0; i < n; ++i)
      out += "/" + parts[i];
    return out;
  };
  std::vector<std::string> out;
  for (size_t n = x.size() - 1; n > common; --n)  // a's ancestors below the meeting point
    out.push_back(path_of(x, n));
  if (common < x.size() && common < y.size())  // where the two paths meet, unless an endpoint
    out.push_back(path_of(x, common));
  for (size_t n = common + 1; n < y.size(); ++n)  // down to b
    out.push_back(path_of(y, n));
  return out;
}

std::string normalize_pci_bus_id(const std::string& id) {
  // [domain:]bus:device.function, hex; domain up to 8 digits, bus and device up to 2,
  // function 0..7.
  auto hex = [](const std::string& s, size_t max_digits, unsigned long& out) {
    if (s.empty() || s.size() > max_digits)
      return false;
    for (char c : s)
      if (!std::isxdigit(static_cast<unsigned char>(c)))
        return false;
    out = std::stoul(s, nullptr, 16);
    return true;
  };
  std::vector<std::string> parts;  // [domain:]bus:device.function split at ':'
  size_t at = 0;
  size_t colon = id.find(':');
  while (colon != std::string::npos) {
    parts.push_back(id.substr(at, colon - at));
    at = colon + 1;
    colon = id.find(':', at);
  }
  parts.push_back(id.substr(at));
  if (parts.size() == 2)
    parts.insert(parts.begin(), "0");
  if (parts.size() != 3)
    return "";
  size_t dot = parts[2].find('.');
  if (dot == std::string::npos)
    return "";
  const std::string& domain_s = parts[0];
  const std::string& bus_s = parts[1];
  std::string dev_s = parts[2].substr(0, dot);
  std::string fn_s = parts[2].substr(dot + 1);
  unsigned long domain = 0, bus = 0, dev = 0, fn = 0;
  if (!hex(domain_s, 8, domain) || !hex(bus_s, 2, bus) || !hex(dev_s, 2, dev) ||
      !hex(fn_s, 1, fn) || dev > 0x1f || fn > 7)
    return "";
  char out[32];
  std::snprintf(out, sizeof(out), "%04lx:%02lx:%02lx.%lx", domain, bus, dev, fn);
  return out;
}

std::string pci_device_path(const std::string& sysfs_root, const std::string& bus_id) {
  std::string id = normalize_pci_bus_id(bus_id);
  if (id.empty())
    return "";
  return resolve(sysfs_root + "/bus/pci/devices/" + id);
}

int pci_numa_node(const std::string& device_path) {
  if (device_path.empty())
    return -1;
  std::ifstream f(device_path + "/numa_node");
  int node = -1;
  if (!(f >> node) || node < 0)
    return -1;
  return node;
}

std::string rdma_device_path(const std::string& sysfs_root, const std::string& name) {
  std::string path = resolve(sysfs_root + "/class/infiniband/" + name + "/device");
  // Software devices point at a network device or nowhere; only PCI functions count.
  if (path.empty() || path.find("/virtual/") != std::string::npos || components(path).empty() ||
      components(path).back().find(':') == std::string::npos)
    return "";
  return path;
}

std::vector<NicRank> rank_nics_by_distance(const std::string& sysfs_root,
                                           const std::string& gpu_bus_id,
                                           const std::vector<std::string>& nics) {
  std::string gpu = pci_device_path(sysfs_root, gpu_bus_id);
  const auto gpu_parts = components(gpu);
  const int gpu_numa = pci_numa_node(gpu);
  // The GPU's root complex: its "pciDDDD:BB" component below "devices".
  size_t root = 0;
  while (root < gpu_parts.size() && gpu_parts[root].rfind("pci", 0) != 0)
    ++root;
  std::vector<NicRank> out;
  out.reserve(nics.size());
  for (const auto& n : nics) {
    std::string nic = rdma_device_path(sysfs_root, n);
    NicRank r{n, pcie_distance(gpu, nic)};
    if (r.distance >= 0) {
      auto nic_parts = components(nic);
      bool same = root < gpu_parts.size() && root < nic_parts.size();
      for (size_t k = 0; same && k <= root; ++k)
        same = gpu_parts[k] == nic_parts[k];
      r.same_root = same;
      int nic_numa = pci_numa_node(nic);
      r.same_numa = gpu_numa >= 0 && nic_numa == gpu_numa;
    }
    out.push_back(std::move(r));
  }
  auto tier = [](const NicRank& r) {
    return r.distance < 0 ? 3 : r.same_root ? 0 : r.same_numa ? 1 : 2;
  };
  std::sort(out.begin(), out.end(), [&](const NicRank& a, const NicRank& b) {
    if (tier(a) != tier(b))
      return tier(a) < tier(b);
    return a.distance != b.distance ? a.distance < b.distance : a.name < b.name;
  });
  return out;
}

}  // namespace caf_rdma
