// Minimal command-line flags for the programs (examples, bench, stress, systems): "--name value"
// pairs and bare "--switch"es.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "primitives/status.h"

namespace caf_rdma {

class Flags {
public:
  /// `valued` lists the flags that take a value; any other "--x" is a switch.
  /// With `positional`, other arguments not starting with "-" (and all after "--") are kept
  /// in order in positionals(); otherwise they are errors.
  static Result<Flags> parse(int argc, char** argv, const std::set<std::string>& valued,
                             const std::set<std::string>& switches, bool positional = false);

  const std::vector<std::string>& positionals() const { return positionals_; }

  bool has(const std::string& name) const;
  std::string get(const std::string& name, const std::string& fallback) const;
  /// The value as an unsigned integer (accepts K/M/G suffixes); errors name the flag.
  Result<uint64_t> get_u64(const std::string& name, uint64_t fallback) const;

  /// "64K" -> 65536; `what` names the value in errors.
  static Result<uint64_t> parse_u64(const std::string& text, const std::string& what);

private:
  std::map<std::string, std::string> values_;
  std::set<std::string> switches_;
  std::vector<std::string> positionals_;
};

}  // namespace caf_rdma
