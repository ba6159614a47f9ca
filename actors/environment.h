// The CAF_RDMA_* environment variables: which names caf-rdma reads (every layer's, in one list),
// and what RdmaNode::start says about the environment it meets.
//
// Invariants:
//  1. Every variable caf-rdma or its test and CI tools read is in kEnvironmentVariables; a
//     CAF_RDMA_* name outside it is reported (a misspelling would otherwise be ignored).
//  2. A variable that is set but not applied (the program gave its own ManagerOptions) is
//     reported once per node start, naming the variable and how to apply it.
#pragma once

#include <string>
#include <vector>

namespace caf_rdma {

/// Environment variable: the CAF scheduler policy ("stealing", "sharing").
constexpr const char* kEnvScheduler = "CAF_RDMA_SCHEDULER";

/// One variable caf-rdma knows: its name and who reads it.
struct EnvironmentVariable {
  const char* name;
  enum Reader { kManagerOptions, kNode, kClient, kLog, kTools } reader;
};

/// Every CAF_RDMA_* variable read anywhere (invariant 1).
const std::vector<EnvironmentVariable>& environment_variables();

/// The CAF_RDMA_* names set in this process's environment that caf-rdma does not know.
std::vector<std::string> unknown_environment_variables();

/// The ManagerOptions variables (ManagerOptions::from_env) set in this environment.
std::vector<std::string> set_manager_variables();

/// Writes to stderr what start should tell about the environment (invariants 1 and 2):
/// unknown CAF_RDMA_* names, and, when `manager_from_env` is false, the manager variables that
/// are set but not applied.
void report_environment(const std::string& node, bool manager_from_env);

}  // namespace caf_rdma
