// list_posting: what a transfer list costs per range on the RDMA path's queue pair
// (RdmaQueuePair, RdmaOp::list): two queue pairs of one device (CAF_RDMA_DEVICE) connected to
// each other, a list of --ranges ranges of --block bytes (the remote side scattered) read
// --iters times with `execute`, every byte checked after the last. count_instructions.sh counts
// the user-space instructions inside the functions that check, cut, post and retire a list's
// work requests (not the wait loop's idle polls, whose count is the emulator's speed) and
// divides by the ranges posted: the posting cost per range, stable where timings in the VM
// are not.
//
//   list_posting [--ranges N] [--block BYTES] [--iters N]
//     -> "list_posting ranges N block B iters I us_per_range X" (wall time, informative only)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "components/rdma_domain.h"
#include "components/rdma_queue_pair.h"
#include "support/flags.h"

using namespace caf_rdma;

namespace {

constexpr const char* kUsage =
    "usage: list_posting [--ranges N] [--block BYTES] [--iters N]\n"
    "  reads a list of N ranges of BYTES (default 4096 of 64) between two queue pairs of the\n"
    "  device CAF_RDMA_DEVICE names, ITERS times (default 10); checks every byte.\n";

int fail(const char* what, const Error& e) {
  std::fprintf(stderr, "list_posting: %s: %s\n", what, e.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = Flags::parse(argc, argv, {"--ranges", "--block", "--iters"}, {"--help", "-h"});
  if (!flags.ok())
    return std::fprintf(stderr, "list_posting: %s\n%s", flags.error().message().c_str(), kUsage), 2;
  if (flags->has("--help") || flags->has("-h"))
    return std::fputs(kUsage, stdout), 0;
  auto ranges = flags->get_u64("--ranges", 4096);
  auto block = flags->get_u64("--block", 64);
  auto iters = flags->get_u64("--iters", 10);
  for (const auto* r : {&ranges, &block, &iters})
    if (!r->ok())
      return std::fprintf(stderr, "list_posting: %s\n%s", r->error().message().c_str(), kUsage), 2;
  const uint64_t n = *ranges, b = *block;
  auto config = IbverbsConfig::from_env();
  if (!config.ok())
    return fail("device", config.error());
  auto domain = RdmaDomain::open(*config);
  if (!domain.ok())
    return fail("device", domain.error());
  auto x = RdmaQueuePair::create(*domain);
  auto y = RdmaQueuePair::create(*domain);
  if (!x.ok() || !y.ok())
    return fail("queue pair", x.ok() ? y.error() : x.error());
  if (Status st = RdmaQueuePair::connect_pair(**x, **y); !st.ok())
    return fail("connect", st.error());
  std::vector<uint8_t> theirs(n * b), mine(n * b, 0);
  for (size_t i = 0; i < theirs.size(); ++i)
    theirs[i] = static_cast<uint8_t>(i * 131 + 7);
  auto remote = (*domain)->register_buffer(theirs.data(), theirs.size(), Access::kReadWrite);
  auto local = (*domain)->register_buffer(mine.data(), mine.size(), Access::kReadWrite);
  if (!remote.ok() || !local.ok())
    return fail("register", remote.ok() ? local.error() : remote.error());
  std::vector<uint64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(1));
  auto table = std::make_shared<std::vector<ListEntry>>(n);
  for (uint64_t i = 0; i < n; ++i)
    (*table)[i] = ListEntry{perm[i] * b, i * b, b};
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t it = 0; it < *iters; ++it) {
    OpResult r =
        (*x)->execute(RdmaOp::list_of(true, *local, remote->remote(), OpList::of(table, 0, n)),
                      std::chrono::seconds(60));
    if (!r.status.ok())
      return fail("list", r.status.error());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (uint64_t i = 0; i < n; ++i)
    if (std::memcmp(mine.data() + i * b, theirs.data() + perm[i] * b, b) != 0)
      return std::fprintf(stderr, "list_posting: range %llu differs\n",
                          static_cast<unsigned long long>(i)),
             1;
  std::printf("list_posting ranges %llu block %llu iters %llu us_per_range %.3f\n",
              static_cast<unsigned long long>(n), static_cast<unsigned long long>(b),
              static_cast<unsigned long long>(*iters),
              secs * 1e6 / static_cast<double>(n * std::max<uint64_t>(1, *iters)));
  return 0;
}
