// rdma_bench's cancel shape (see cancel_latency.h).
#include "bench/cancel_latency.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "actors/cancel_token.h"
#include "bench/node_pair.h"

namespace caf_rdma::bench {

namespace {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::duration<double, std::milli>;
constexpr std::chrono::seconds kTimeout{120};

/// One direction's figures on one transport; false when a check failed (said on stderr).
bool run_direction(NodePair& p, const BenchTransport& t, bool push, const CancelBenchOptions& o,
                   std::mt19937& rng) {
  const char* op = push ? "write" : "read";
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "cancel %s %s: %s\n", t.name, op, what.c_str());
    return false;
  };
  RdmaClient& me = p.me();
  const uint64_t n = o.bytes;
  uint8_t* src = push ? p.mine() : p.pool();
  uint8_t* dst = push ? p.pool() : p.mine();
  const uint32_t seed = push ? 2 : 1;
  for (uint64_t i = 0; i < n; ++i)
    src[i] = pattern(i, seed);
  auto move = [&](const CancelToken* token) {
    if (t.via_manager && token != nullptr)  // the manager moves it (an actor's way)
      return (push ? me.write_async(p.local(), p.remote(), Range::whole(), kTimeout, *token)
                   : me.read_async(p.local(), p.remote(), Range::whole(), kTimeout, *token))
          .get();
    if (t.via_manager)
      return (push ? me.write_async(p.local(), p.remote(), Range::whole(), kTimeout)
                   : me.read_async(p.local(), p.remote(), Range::whole(), kTimeout))
          .get();
    if (token != nullptr)
      return push ? me.write(p.local(), p.remote(), Range::whole(), kTimeout, *token)
                  : me.read(p.local(), p.remote(), Range::whole(), kTimeout, *token);
    return push ? me.write(p.local(), p.remote(), Range::whole(), kTimeout)
                : me.read(p.local(), p.remote(), Range::whole(), kTimeout);
  };
  // The reference: the whole transfer, in the same run.
  std::vector<double> whole;
  for (int i = 0; i < 3; ++i) {
    std::memset(dst, 0, n);
    const auto t0 = Clock::now();
    auto r = move(nullptr);
    whole.push_back(Ms(Clock::now() - t0).count());
    if (!r.ok())
      return fail("the whole transfer: " + r.error().to_string());
    if (std::memcmp(dst, src, n) != 0)
      return fail("the whole transfer: the destination differs from the source");
  }
  std::sort(whole.begin(), whole.end());
  const double whole_ms = whole[1];
  std::vector<double> latency;  // of the cancels that stopped their transfer
  std::vector<uint8_t> snapshot(n);
  int finished = 0, unstarted = 0;
  std::uniform_real_distribution<double> when(0.0, whole_ms);
  for (int trial = 0; trial < o.trials; ++trial) {
    std::memset(dst, 0, n);
    CancelToken token;
    Result<TransferReply> got = Error(ErrorCode::kInternal, "not run");
    std::thread mover([&] { got = move(&token); });
    // The random point: a delay, not a synchronisation (any point is a valid one).
    std::this_thread::sleep_for(Ms(when(rng)));
    const auto t0 = Clock::now();
    const CancelResult c = token.cancel(kTimeout);
    const double ms = Ms(Clock::now() - t0).count();
    mover.join();
    const std::string trial_name = "trial " + std::to_string(trial) + ": ";
    if (c.state == CancelResult::State::kStillRunning)
      return fail(trial_name + "the cancel did not end within 120 s");
    if (got.ok() != c.status.ok() && c.state != CancelResult::State::kNotStarted)
      return fail(trial_name + "the cancel said " + c.to_string() + ", the transfer " +
                  (got.ok() ? "ok" : got.error().to_string()));
    if (got.ok()) {  // finished before the cancel reached it: every byte
      ++finished;
      if (std::memcmp(dst, src, n) != 0)
        return fail(trial_name + "finished, but the destination differs from the source");
      continue;
    }
    if (got.error().code() != ErrorCode::kCancelled)
      return fail(trial_name + "the transfer failed: " + got.error().to_string());
    if (c.state == CancelResult::State::kNotStarted)
      ++unstarted;
    else
      latency.push_back(ms);
    // No byte lands after the answer: the destination now, against itself after the check.
    std::memcpy(snapshot.data(), dst, n);
    for (uint64_t i = 0; i < n; ++i)
      if (snapshot[i] != 0 && snapshot[i] != src[i])
        return fail(trial_name + "cancelled, and destination byte " + std::to_string(i) +
                    " is neither untouched nor the source's");
    if (std::memcmp(snapshot.data(), dst, n) != 0)
      return fail(trial_name + "the destination changed after the cancel answered");
  }
  std::sort(latency.begin(), latency.end());
  // The sample at `percent` of the sorted ones (0 when none stopped).
  auto at = [&](size_t percent) {
    return latency.empty() ? 0.0
                           : latency[std::min(latency.size() - 1, percent * latency.size() / 100)];
  };
  const double max_ms = latency.empty() ? 0.0 : latency.back();
  std::printf(
      "cancel %s %s %llu trials %d cancelled %zu finished %d unstarted %d median_ms %.3f p99_ms "
      "%.3f max_ms %.3f whole_ms %.1f\n",
      t.name, op, static_cast<unsigned long long>(n), o.trials, latency.size(), finished, unstarted,
      at(50), at(99), max_ms, whole_ms);
  if (!latency.empty())
    std::printf("ratio cancel_%s_%s_max_vs_whole %.4f\n", t.name, op, max_ms / whole_ms);
  std::fflush(stdout);
  return true;
}

}  // namespace

int bench_cancel(const CancelBenchOptions& o) {
  bool ok = true;
  std::mt19937 rng(50);
  for (const std::string& name : o.transports) {
    const BenchTransport* t = find_transport(name);
    if (t == nullptr) {
      std::fprintf(stderr, "cancel: unknown transport '%s' (%s)\n", name.c_str(),
                   transport_names());
      return 1;
    }
    std::string skipped;
    auto pair = NodePair::start(*t, o.bytes, "cancel-pool", &skipped);
    if (!pair.ok()) {
      std::fprintf(stderr, "cancel %s: %s\n", t->name, pair.error().to_string().c_str());
      ok = false;
      continue;
    }
    if (!*pair) {
      std::printf("cancel %s: skipped (%s)\n", t->name, skipped.c_str());
      continue;
    }
    for (bool push : {false, true})
      ok = run_direction(**pair, *t, push, o, rng) && ok;
  }
  return ok ? 0 : 1;
}

}  // namespace caf_rdma::bench
