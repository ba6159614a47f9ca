// kv_server: serves a key-value store whose values live in one registered memory pool.
// Runs until SIGINT or SIGTERM.
#include <signal.h>

#include <cstdio>

#include "support/flags.h"
#include "systems/kv_store/kv_server.h"

using namespace caf_rdma;
using namespace caf_rdma::kv;

namespace {

constexpr const char* kUsage =
    "usage: kv_server --listen HOST:PORT [--memory-mb M] [--timeout-ms MS] [--metrics HOST:PORT]\n"
    "  Keeps values in one memory pool of M MiB (default 64), registered once. Clients send\n"
    "  keys and their buffer's handle; the server RDMA-reads PUT values out of the client's\n"
    "  buffer and RDMA-writes GET values into it. PORT 0 picks a free port. Runs until SIGINT\n"
    "  or SIGTERM. Transport: CAF_RDMA_TRANSPORT=auto|rdma|fallback; device: CAF_RDMA_DEVICE.\n"
    "  --metrics (or CAF_RDMA_METRICS): serve the node's Prometheus metrics over HTTP at\n"
    "  http://HOST:PORT/metrics (PORT 0 picks one; printed at start; loopback only under TLS).\n";

}  // namespace

int main(int argc, char** argv) {
  auto flags = Flags::parse(argc, argv, {"--listen", "--memory-mb", "--timeout-ms", "--metrics"},
                            {"--help", "-h"});
  if (!flags.ok()) {
    std::fprintf(stderr, "kv_server: %s\n%s", flags.error().message().c_str(), kUsage);
    return 2;
  }
  if (flags->has("--help") || flags->has("-h")) {
    std::printf("%s", kUsage);
    return 0;
  }
  std::string text = flags->get("--listen", "");
  bool any_port = text.size() > 2 && text.compare(text.size() - 2, 2, ":0") == 0;
  auto listen = any_port ? Result<std::pair<std::string, uint16_t>>(
                               std::make_pair(text.substr(0, text.size() - 2), uint16_t{0}))
                         : parse_host_port(text);
  if (!listen.ok()) {
    std::fprintf(stderr, "kv_server: --listen: %s\n%s",
                 text.empty() ? "required" : listen.error().message().c_str(), kUsage);
    return 2;
  }
  auto memory_mb = flags->get_u64("--memory-mb", 64);
  auto timeout = flags->get_u64("--timeout-ms", 30000);
  if (!memory_mb.ok() || !timeout.ok() || *memory_mb == 0 || *timeout == 0) {
    std::fprintf(stderr, "kv_server: --memory-mb and --timeout-ms take positive numbers\n%s",
                 kUsage);
    return 2;
  }
  KvServerOptions o;
  o.host = listen->first;
  o.port = listen->second;
  o.memory_bytes = *memory_mb << 20;
  o.transfer_timeout_ms = static_cast<uint32_t>(*timeout);
  auto mo = ManagerOptions::from_env();
  if (!mo.ok()) {
    std::fprintf(stderr, "kv_server: %s\n", mo.error().to_string().c_str());
    return 2;
  }
  o.manager = *mo;
  if (flags->has("--metrics")) {
    auto metrics = MetricsOptions::parse(flags->get("--metrics", ""), "--metrics");
    if (!metrics.ok()) {
      std::fprintf(stderr, "kv_server: %s\n%s", metrics.error().message().c_str(), kUsage);
      return 2;
    }
    o.metrics = *metrics;
  }
  // Signals go to sigwait below, not to CAF's threads (they inherit this mask).
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  auto server = KvServer::start(o);
  if (!server.ok()) {
    std::fprintf(stderr, "kv_server: %s\n", server.error().to_string().c_str());
    return 1;
  }
  // Before the "listening" line: whoever waits for that line finds this one too.
  if (const std::string url = (*server)->node().metrics_url(); !url.empty())
    std::printf("kv_server: metrics on %s\n", url.c_str());
  std::printf("kv_server: listening on %s, pool %llu MiB registered once (%s)\n",
              (*server)->address().c_str(), static_cast<unsigned long long>(*memory_mb),
              (*server)->device().empty() ? "no RDMA device: fallback"
                                          : ("device " + (*server)->device()).c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  std::printf("kv_server: stopping (signal %d)\n", sig);
  std::fflush(stdout);
  return 0;
}
