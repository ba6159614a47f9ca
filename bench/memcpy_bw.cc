// memcpy_bw: the bandwidth floor of moving bytes within one host: memcpy between two buffers of
// this process (both touched before timing, so no page faults are timed), per size. Any path
// that copies its bytes once (the fallback's stream channel into the destination buffer, a
// bounce buffer) moves them no faster.
//
// Invariants:
//   1. Each size is timed in kRepeats runs of at least --bytes bytes each; the median run's
//      MB/s (bytes copied per second, not read + written) is printed.
//   2. The copies cannot be optimised away: a byte of each destination goes to a volatile sink.
//
//   memcpy_bw [--sizes 64K,1M,64M] [--bytes BYTES]  -> "bw memcpy copy <size> <MB/s>" per size
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "support/flags.h"

using namespace caf_rdma;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kUsage =
    "usage: memcpy_bw [--sizes 64K,1M,64M] [--bytes BYTES]\n"
    "  memcpy bandwidth between two touched buffers of each size: the median of 5 runs of at\n"
    "  least BYTES copied (default 1G); prints 'bw memcpy copy SIZE MB/s'.\n";
constexpr int kRepeats = 5;

volatile uint8_t sink = 0;

double copy_mbps(uint64_t size, uint64_t bytes) {
  std::vector<uint8_t> src(size), dst(size);
  for (uint64_t i = 0; i < size; ++i)
    src[i] = static_cast<uint8_t>(i * 131);
  std::memset(dst.data(), 0, size);
  uint64_t copies = std::max<uint64_t>(4, bytes / size);
  std::vector<double> runs;
  for (int r = 0; r < kRepeats; ++r) {
    auto t0 = Clock::now();
    for (uint64_t i = 0; i < copies; ++i) {
      std::memcpy(dst.data(), src.data(), size);
      sink = sink + dst[i % size];
    }
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    runs.push_back(static_cast<double>(copies * size) / 1e6 / secs);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = Flags::parse(argc, argv, {"--sizes", "--bytes"}, {"--help", "-h"});
  if (!flags.ok())
    return std::fprintf(stderr, "memcpy_bw: %s\n%s", flags.error().message().c_str(), kUsage), 2;
  if (flags->has("--help") || flags->has("-h"))
    return std::printf("%s", kUsage), 0;
  auto bytes = flags->get_u64("--bytes", 1ull << 30);
  if (!bytes.ok() || *bytes == 0)
    return std::fprintf(stderr, "memcpy_bw: bad --bytes\n%s", kUsage), 2;
  std::stringstream list(flags->get("--sizes", "64K,1M,64M"));
  std::string item;
  while (std::getline(list, item, ',')) {
    auto size = Flags::parse_u64(item, "--sizes");
    if (!size.ok() || *size == 0 || *size > (1ull << 32))
      return std::fprintf(stderr, "memcpy_bw: bad size '%s'\n%s", item.c_str(), kUsage), 2;
    double mbps = copy_mbps(*size, *bytes);
    std::printf("bw memcpy copy %llu %.1f\n", static_cast<unsigned long long>(*size), mbps);
    std::fflush(stdout);
  }
  return 0;
}
