#include "bench/bench_output.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>

namespace caf_rdma::bench {

uint64_t voluntary_switches() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_nvcsw);
}

void print_latency(const char* path, const char* op, std::vector<double>& us) {
  std::sort(us.begin(), us.end());
  double median = us[us.size() / 2];
  double p99 = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  std::printf("lat %s %s 8 %.2f %.2f\n", path, op, median, p99);
  std::fflush(stdout);
}

double per_op(uint64_t switches, uint64_t ops) {
  return ops == 0 ? 0.0 : static_cast<double>(switches) / static_cast<double>(ops);
}

void print_switches(const char* path, const char* op, double self_per_op,
                    std::optional<double> peer_per_op) {
  if (peer_per_op)
    std::printf("csw %s %s %.3f %.3f\n", path, op, self_per_op, *peer_per_op);
  else
    std::printf("csw %s %s %.3f -\n", path, op, self_per_op);
  std::fflush(stdout);
}

}  // namespace caf_rdma::bench
