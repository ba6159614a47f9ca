// Host memory checked against this process's mappings (see host_mapping.h).
#include "components/host_mapping.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace caf_rdma {

namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
  return buf;
}

// Parses "<hex>-<hex> <perms>" at the start of `line`.
bool parse_line(const std::string& line, HostMapping& out) {
  const char* p = line.c_str();
  char* end = nullptr;
  out.start = std::strtoull(p, &end, 16);
  if (end == p || *end != '-')
    return false;
  p = end + 1;
  out.end = std::strtoull(p, &end, 16);
  if (end == p || *end != ' ' || out.end < out.start)
    return false;
  p = end + 1;
  if (std::string_view(p).size() < 4)
    return false;
  out.readable = p[0] == 'r';
  out.writable = p[1] == 'w';
  return true;
}

}  // namespace

Result<std::vector<HostMapping>> parse_host_mappings(std::string_view maps) {
  std::vector<HostMapping> out;
  size_t pos = 0;
  while (pos < maps.size()) {
    size_t nl = maps.find('\n', pos);
    if (nl == std::string_view::npos)
      nl = maps.size();
    std::string line(maps.substr(pos, nl - pos));
    pos = nl + 1;
    if (line.empty())
      continue;
    HostMapping m;
    if (!parse_line(line, m))
      return Error(ErrorCode::kInvalidArgument, "not a line of /proc/<pid>/maps: \"" + line + "\"");
    out.push_back(m);
  }
  return out;
}

Status check_mapped(const std::vector<HostMapping>& mappings, uint64_t addr, uint64_t size,
                    bool writable) {
  if (size > UINT64_MAX - addr)
    return Error(ErrorCode::kInvalidArgument, "host range " + hex(addr) + " + " +
                                                  std::to_string(size) +
                                                  " bytes wraps around the address space");
  const uint64_t end = addr + size;
  uint64_t at = addr;  // first byte not yet found in a mapping
  for (const HostMapping& m : mappings) {
    if (at >= end)
      break;
    if (m.end <= at)
      continue;
    if (m.start > at)
      break;  // a gap at `at`
    if (!m.readable || (writable && !m.writable))
      return Error(ErrorCode::kInvalidArgument,
                   "host memory at " + hex(at) + " (of " + hex(addr) + " + " +
                       std::to_string(size) + " bytes) is mapped without " +
                       (m.readable ? "write" : "read") + " access (mapping " + hex(m.start) + "-" +
                       hex(m.end) + ")");
    at = m.end;
  }
  if (at < end)
    return Error(ErrorCode::kInvalidArgument, "host memory at " + hex(at) + " (of " + hex(addr) +
                                                  " + " + std::to_string(size) +
                                                  " bytes) is not mapped in this process");
  return {};
}

Status check_host_range(uint64_t addr, uint64_t size, bool writable) {
  std::ifstream in("/proc/self/maps");
  if (!in)
    return {};
  std::stringstream text;
  text << in.rdbuf();
  auto mappings = parse_host_mappings(text.str());
  if (!mappings.ok())
    return {};  // a format this parser does not know: never refuse valid memory
  return check_mapped(*mappings, addr, size, writable);
}

}  // namespace caf_rdma
