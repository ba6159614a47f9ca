#include "support/flags.h"

#include <cstdint>

namespace caf_rdma {

Result<Flags> Flags::parse(int argc, char** argv, const std::set<std::string>& valued,
                           const std::set<std::string>& switches, bool positional) {
  Flags f;
  bool rest = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (positional && (rest || a.empty() || a[0] != '-')) {
      f.positionals_.push_back(a);
    } else if (positional && a == "--") {
      rest = true;
    } else if (valued.count(a)) {
      if (i + 1 >= argc)
        return Error(ErrorCode::kInvalidArgument, a + " needs a value");
      f.values_[a] = argv[++i];
    } else if (switches.count(a)) {
      f.switches_.insert(a);
    } else {
      return Error(ErrorCode::kInvalidArgument, "unknown argument '" + a + "' (try --help)");
    }
  }
  return f;
}

bool Flags::has(const std::string& name) const {
  return switches_.count(name) > 0 || values_.count(name) > 0;
}

std::string Flags::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

Result<uint64_t> Flags::get_u64(const std::string& name, uint64_t fallback) const {
  auto it = values_.find(name);
  if (it == values_.end())
    return fallback;
  return parse_u64(it->second, name);
}

Result<uint64_t> Flags::parse_u64(const std::string& text, const std::string& what) {
  size_t used = 0;
  uint64_t n = 0;
  try {
    n = std::stoull(text, &used);
  } catch (const std::exception&) {
    return Error(ErrorCode::kInvalidArgument, what + " '" + text + "' is not a number");
  }
  std::string suffix = text.substr(used);
  int shift = 0;
  if (suffix == "K" || suffix == "k")
    shift = 10;
  else if (suffix == "M" || suffix == "m")
    shift = 20;
  else if (suffix == "G" || suffix == "g")
    shift = 30;
  else if (!suffix.empty())
    return Error(ErrorCode::kInvalidArgument, what + " '" + text + "' has an unknown suffix");
  if (n > (UINT64_MAX >> shift))
    return Error(ErrorCode::kInvalidArgument, what + " '" + text + "' is too large");
  return n << shift;
}

}  // namespace caf_rdma
