// Finding: one line of the doctor's report, what it found and, when something is wrong, the fix.
//
// Invariants:
//  1. Every finding of level kWarn or kFail names its fix (a command, a setting or where to read
//     on); kOk and kInfo lines may have none.
//  2. A finding's scope says what a failure stops: RDMA only (the fallback transport still
//     works), or every transport (a CAF_RDMA_* variable that makes every node refuse to start).
//  3. One line per finding; the fix, when there is one, on the next line, indented.
#pragma once

#include <string>
#include <vector>

namespace caf_rdma::doctor {

enum class Level { kOk, kInfo, kWarn, kFail };

enum class Scope {
  kRdma,  ///< a failure stops RDMA; the fallback transport still works
  kAll,   ///< a failure stops every transport
};

struct Finding {
  Level level = Level::kOk;
  std::string what;
  std::string fix;
  Scope scope = Scope::kRdma;
};

using Findings = std::vector<Finding>;

Finding ok(std::string what);
Finding info(std::string what);
Finding warn(std::string what, std::string fix);
Finding fail(std::string what, std::string fix, Scope scope = Scope::kRdma);

/// "[ok]", "[info]", "[warn]", "[FAIL]".
const char* tag(Level level);

/// The finding as printed: "[FAIL] what" and, with a fix, "\n       fix: ..." (no final newline).
std::string format(const Finding& finding);

}  // namespace caf_rdma::doctor
