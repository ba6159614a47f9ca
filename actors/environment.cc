// The CAF_RDMA_* environment variables (see environment.h).
#include "actors/environment.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "actors/metrics_exporter.h"
#include "actors/rdma_client.h"
#include "actors/rdma_manager_actor.h"
#include "actors/rdma_node.h"
#include "components/tls_credentials.h"
#include "primitives/ibverbs_config.h"
#include "primitives/log.h"

extern char** environ;  // NOLINT: POSIX

namespace caf_rdma {

const std::vector<EnvironmentVariable>& environment_variables() {
  using V = EnvironmentVariable;
  static const std::vector<V> all{
      // ManagerOptions::from_env (and IbverbsConfig::from_env under it).
      {kEnvTransport, V::kManagerOptions},
      {kEnvFallbackChunk, V::kManagerOptions},
      {kEnvFallbackWindow, V::kManagerOptions},
      {kEnvStreamMin, V::kManagerOptions},
      {kEnvInlinePoll, V::kManagerOptions},
      {kEnvBusyPoll, V::kManagerOptions},
      {kEnvVerify, V::kManagerOptions},
      {kEnvSameHost, V::kManagerOptions},
      {kEnvReleaseOrphans, V::kManagerOptions},
      {kEnvGpu, V::kManagerOptions},
      {kEnvMaxTimeout, V::kManagerOptions},
      {kEnvPeerWindow, V::kManagerOptions},
      {kEnvTotalWindow, V::kManagerOptions},
      {kEnvMaxQpsPerNode, V::kManagerOptions},
      {kEnvMaxQps, V::kManagerOptions},
      {kEnvDevices, V::kManagerOptions},
      {kEnvStripeMin, V::kManagerOptions},
      {kEnvStripeQps, V::kManagerOptions},
      {kEnvLatencyTrafficClass, V::kManagerOptions},
      {kEnvLatencyServiceLevel, V::kManagerOptions},
      {kEnvBackgroundTrafficClass, V::kManagerOptions},
      {kEnvBackgroundServiceLevel, V::kManagerOptions},
      {kEnvDevice, V::kManagerOptions},
      {kEnvPort, V::kManagerOptions},
      {kEnvGidIndex, V::kManagerOptions},
      {kEnvTrafficClass, V::kManagerOptions},
      {kEnvServiceLevel, V::kManagerOptions},
      {kEnvTimeout, V::kManagerOptions},
      {kEnvNetdev, V::kManagerOptions},
      {kEnvLocalRank, V::kManagerOptions},
      // RdmaNode::start.
      {kEnvPlaintext, V::kNode},
      {kEnvScheduler, V::kNode},
      {kEnvTlsCertificate, V::kNode},
      {kEnvTlsKey, V::kNode},
      {kEnvTlsCaFile, V::kNode},
      {kEnvTlsPassphrase, V::kNode},
      {kEnvMetrics, V::kNode},  // HOST:PORT of the node's Prometheus metrics (PORT 0: any)
      // RdmaClient.
      {kEnvDirect, V::kClient},
      // Every layer's log lines (primitives/log.h).
      {kEnvLog, V::kLog},
      // The test harness, the Soft-RoCE VM and CI (tests/, .ci/).
      {"CAF_RDMA_REQUIRE_DEVICE", V::kTools},
      {"CAF_RDMA_EXPECT_GPU_PATH", V::kTools},
      {"CAF_RDMA_IN_VM", V::kTools},
      {"CAF_RDMA_WITH_CUDA", V::kTools},
      {"CAF_RDMA_VM_KERNEL", V::kTools},
      {"CAF_RDMA_VM_KERNEL_PKG", V::kTools},
      {"CAF_RDMA_VM_CACHE", V::kTools},
      {"CAF_RDMA_VM_ALLOW_WARN", V::kTools},
      {"CAF_RDMA_VM_SESSION", V::kTools},
      {"CAF_RDMA_REQUIRE_PROMETHEUS", V::kTools},
      {"CAF_RDMA_BAZEL_OUTPUT_ROOT", V::kTools},
  };
  return all;
}

namespace {

const EnvironmentVariable* find_variable(const std::string& name) {
  for (const auto& v : environment_variables())
    if (name == v.name)
      return &v;
  return nullptr;
}

}  // namespace

std::vector<std::string> unknown_environment_variables() {
  std::vector<std::string> out;
  constexpr const char* kPrefix = "CAF_RDMA_";
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, kPrefix, std::strlen(kPrefix)) != 0)
      continue;
    const char* eq = std::strchr(*e, '=');
    std::string name =
        eq != nullptr ? std::string(*e, static_cast<size_t>(eq - *e)) : std::string(*e);
    if (find_variable(name) == nullptr)
      out.push_back(std::move(name));
  }
  return out;
}

std::vector<std::string> set_manager_variables() {
  std::vector<std::string> out;
  for (const auto& v : environment_variables()) {
    const char* value = std::getenv(v.name);
    if (v.reader == EnvironmentVariable::kManagerOptions && value != nullptr && *value != '\0')
      out.emplace_back(v.name);
  }
  return out;
}

void report_environment(const std::string& node, bool manager_from_env) {
  auto list = [](const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names)
      s += (s.empty() ? "" : ", ") + n;
    return s;
  };
  if (auto unknown = unknown_environment_variables(); !unknown.empty())
    log_line(LogLevel::kWarn,
             "%s: unknown environment variable%s %s ignored (misspelt? the variables are "
             "listed in docs/configuration.md)",
             node.c_str(), unknown.size() > 1 ? "s" : "", list(unknown).c_str());
  if (manager_from_env)
    return;
  if (auto unused = set_manager_variables(); !unused.empty())
    log_line(LogLevel::kWarn,
             "%s: %s set but not applied: this program gave RdmaNode::start its own "
             "ManagerOptions (start it with RdmaNode::start(), or with NodeOptions::from_env() or "
             "ManagerOptions::from_env(), to apply them)",
             node.c_str(), list(unused).c_str());
}

}  // namespace caf_rdma
