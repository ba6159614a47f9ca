// rdma_bench's load shape (see latency_under_load.h).
#include "bench/latency_under_load.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/node_pair.h"

namespace caf_rdma::bench {

namespace {

using Clock = std::chrono::steady_clock;
using Us = std::chrono::duration<double, std::micro>;
constexpr std::chrono::seconds kTimeout{120};
/// The small reads' place: the last page of both buffers (the bulk pull moves the rest).
constexpr uint64_t kPage = 4096;

/// One read of `r` on `t`: the client's own lanes, or ("rdma-manager") through the manager,
/// an actor's way.
Result<TransferReply> read_on(NodePair& p, const BenchTransport& t, const Range& r) {
  if (t.via_manager)
    return p.me().read_async(p.local(), p.remote(), r, kTimeout).get();
  return p.me().read(p.local(), p.remote(), r, kTimeout);
}

/// `iters` 8-byte reads of the page at `at`; their latencies (µs), sorted; empty after a
/// failure (said in `*why`).
std::vector<double> small_reads(NodePair& p, const BenchTransport& t, uint64_t at, int iters,
                                Priority priority, std::string* why) {
  std::vector<double> us;
  us.reserve(static_cast<size_t>(iters));
  const Range r = Range::of(8).at_local(at).at_remote(at).as(priority);
  for (int i = 0; i < iters; ++i) {
    std::memset(p.mine() + at, 0, 8);
    const auto t0 = Clock::now();
    auto got = read_on(p, t, r);
    us.push_back(Us(Clock::now() - t0).count());
    if (!got.ok()) {
      *why = "8-byte read " + std::to_string(i) + ": " + got.error().to_string();
      return {};
    }
    if (std::memcmp(p.mine() + at, p.pool() + at, 8) != 0) {
      *why = "8-byte read " + std::to_string(i) + ": the bytes differ from the owner's";
      return {};
    }
  }
  std::sort(us.begin(), us.end());
  return us;
}

double at_percent(const std::vector<double>& sorted, size_t percent) {
  return sorted[std::min(sorted.size() - 1, percent * sorted.size() / 100)];
}

/// One round: the small reads in class `priority` idle, then under the bulk-class pull; prints
/// its line and ratio (`label`: "load_<transport>" or "load_<transport>_nocls").
bool run_round(NodePair& p, const BenchTransport& t, const LoadBenchOptions& o, Priority priority,
               const std::string& label) {
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "%s: %s\n", label.c_str(), what.c_str());
    return false;
  };
  std::string why;
  const auto idle = small_reads(p, t, o.bulk_bytes, o.iters, priority, &why);
  if (idle.empty())
    return fail("idle: " + why);
  // The bulk pull, over and over, from another thread of the same client, until the loaded
  // reads are done (its first one started before them).
  std::atomic<bool> stop{false}, started{false};
  std::atomic<int> pulls{0};
  std::string bulk_error;
  const auto t0 = Clock::now();
  std::thread bulk([&] {
    while (!stop.load()) {
      started.store(true);
      auto r = read_on(p, t, Range::of(o.bulk_bytes));
      if (!r.ok()) {
        bulk_error = r.error().to_string();
        return;
      }
      ++pulls;
    }
  });
  while (!started.load())
    std::this_thread::yield();
  const auto loaded = small_reads(p, t, o.bulk_bytes, o.iters, priority, &why);
  stop.store(true);
  bulk.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (loaded.empty())
    return fail("under load: " + why);
  if (!bulk_error.empty())
    return fail("the bulk pull: " + bulk_error);
  if (std::memcmp(p.mine(), p.pool(), o.bulk_bytes) != 0)
    return fail("the bulk pull's bytes differ from the owner's");
  const double idle_p99 = at_percent(idle, 99), loaded_p99 = at_percent(loaded, 99);
  std::printf(
      "load %s reads %s bulk %llu idle_p50_us %.1f idle_p99_us %.1f loaded_p50_us %.1f "
      "loaded_p99_us %.1f bulk_pulls %d bulk_MBps %.0f\n",
      t.name, priority_name(priority), static_cast<unsigned long long>(o.bulk_bytes),
      at_percent(idle, 50), idle_p99, at_percent(loaded, 50), loaded_p99, pulls.load(),
      static_cast<double>(o.bulk_bytes) * pulls.load() / seconds / 1e6);
  std::printf("ratio %s_read8_p99_loaded_vs_idle %.3f\n", label.c_str(), loaded_p99 / idle_p99);
  std::fflush(stdout);
  return true;
}

bool run_transport(NodePair& p, const BenchTransport& t, const LoadBenchOptions& o) {
  const uint64_t n = o.bulk_bytes + kPage;
  for (uint64_t i = 0; i < n; ++i)
    p.pool()[i] = pattern(i, 3);
  // Without classes first (the small reads bulk, as the pull: the baseline), then with them
  // (the small reads latency-class): what the classes change, in one run.
  const std::string label = std::string("load_") + t.name;
  return run_round(p, t, o, Priority::kBulk, label + "_nocls") &&
         run_round(p, t, o, Priority::kLatency, label);
}

}  // namespace

int bench_latency_under_load(const LoadBenchOptions& o) {
  bool ok = true;
  for (const std::string& name : o.transports) {
    const BenchTransport* t = find_transport(name);
    if (t == nullptr) {
      std::fprintf(stderr, "load: unknown transport '%s' (%s)\n", name.c_str(), transport_names());
      return 1;
    }
    std::string skipped;
    auto pair = NodePair::start(*t, o.bulk_bytes + kPage, "load-pool", &skipped);
    if (!pair.ok()) {
      std::fprintf(stderr, "load %s: %s\n", t->name, pair.error().to_string().c_str());
      ok = false;
      continue;
    }
    if (!*pair) {
      std::printf("load %s: skipped (%s)\n", t->name, skipped.c_str());
      continue;
    }
    ok = run_transport(**pair, *t, o) && ok;
  }
  return ok ? 0 : 1;
}

}  // namespace caf_rdma::bench
