// metrics_pair: two nodes in one process, each serving its metrics (port chosen by its own
// exporter), moving known bytes on command, for tests/metrics/prometheus_scrape.py (a real
// Prometheus server scrapes both).
//
// Protocol (one line each way, stdout flushed after each):
//   start:            "owner <node address> metrics <port>", "user <node address> metrics <port>"
//   "round" on stdin: the user writes kRound bytes into the owner's buffer and reads them back,
//                     every byte checked; once the owner counted what it served of them
//                     (ManagerTelemetry::served: its stream workers count a request after
//                     answering it), "round <written> <read> <write path> <read path>" (totals
//                     so far), or "error <why>" and exit 1
//   "atomic":         one fetch-add on the owner's last word, its old value checked; once the
//                     owner counted it (on the fallback), "atomic <n>"
//   EOF or "quit":    exits 0
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "caf_rdma.h"

using namespace caf_rdma;

namespace {

constexpr uint64_t kPool = 8 << 20;
constexpr uint64_t kRound = 2 << 20;
/// Ops of one round: a few sizes (the client's lanes take them all; the same-host endpoint serves
/// them when it is on).
constexpr uint64_t kOps[] = {4096, 65536, 1 << 20, (1 << 20) - 65536 - 4096};

int fail(const std::string& why) {
  std::printf("error %s\n", why.c_str());
  std::fflush(stdout);
  return 1;
}

uint8_t pattern(uint64_t round, uint64_t i) {
  return static_cast<uint8_t>(i * 131 + round * 7 + 1);
}

/// Waits (up to 20 s) until the owner counted `bytes` served and `atomics` fetch-adds; the error
/// otherwise.
std::string wait_served(RdmaClient& owner, uint64_t bytes, uint64_t atomics) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  uint64_t got = 0, got_atomics = 0;
  do {
    auto st = owner.stats();
    if (!st.ok())
      return st.error().to_string();
    got = got_atomics = 0;
    for (const auto& r : st->telemetry.served) {
      got += r.bytes;
      got_atomics += r.kind == wire_kind(TransferKind::kFetchAdd) ? r.ops : 0;
    }
    if (got >= bytes && got_atomics >= atomics)
      return "";
  } while (std::chrono::steady_clock::now() < deadline);
  return "the owner counted " + std::to_string(got) + " of " + std::to_string(bytes) +
         " bytes and " + std::to_string(got_atomics) + " of " + std::to_string(atomics) +
         " fetch-adds served within 20 s";
}

}  // namespace

int main() {
  NodeOptions o;
  auto env = ManagerOptions::from_env();
  if (!env.ok())
    return fail(env.error().to_string());
  o.manager = *env;
  auto metrics = MetricsOptions::parse("127.0.0.1:0", "metrics_pair");
  if (!metrics.ok())
    return fail(metrics.error().to_string());
  o.metrics = *metrics;
  auto owner = RdmaNode::start(o);
  if (!owner.ok())
    return fail(owner.error().to_string());
  auto user = RdmaNode::start(o);
  if (!user.ok())
    return fail(user.error().to_string());
  std::vector<uint8_t> pool(kPool, 0), src(kPool), back(kPool);
  RdmaClient owner_client((*owner)->system(), (*owner)->manager());
  auto mine = owner_client.register_buffer(pool.data(), pool.size());
  if (!mine.ok())
    return fail(mine.error().to_string());
  if (Status st = owner_client.put("pool", mine->handle()); !st.ok())
    return fail(st.error().to_string());
  auto remote_mgr = (*user)->remote_manager("127.0.0.1", (*owner)->port());
  if (!remote_mgr.ok())
    return fail(remote_mgr.error().to_string());
  RdmaClient remote((*user)->system(), *remote_mgr);
  auto target = remote.get("pool", 30000);
  if (!target.ok())
    return fail(target.error().to_string());
  RdmaClient client((*user)->system(), (*user)->manager());
  auto s = client.register_buffer(src.data(), src.size());
  auto b = client.register_buffer(back.data(), back.size());
  if (!s.ok() || !b.ok())
    return fail((!s.ok() ? s.error() : b.error()).to_string());
  std::printf("owner %s metrics %u\nuser %s metrics %u\n", (*owner)->address().c_str(),
              (*owner)->metrics_port(), (*user)->address().c_str(), (*user)->metrics_port());
  std::fflush(stdout);

  uint64_t round = 0, written = 0, read = 0, atomics = 0;
  uint64_t served = 0, served_atomics = 0;  // what the owner's CPU serves: the fallback's ops
  std::string line;
  while (std::getline(std::cin, line) && line != "quit") {
    if (line == "atomic") {
      uint64_t before = 0;
      std::memcpy(&before, pool.data() + kPool - 8, 8);
      std::string path;
      auto old = client.fetch_add(*target, kPool - 8, 1, RdmaClient::kDefaultTimeout, &path);
      if (!old.ok())
        return fail(old.error().to_string());
      if (*old != before)
        return fail("fetch-add returned " + std::to_string(*old) + ", the word held " +
                    std::to_string(before));
      served_atomics += path == kPathFallback ? 1 : 0;
      if (auto why = wait_served(owner_client, served, served_atomics); !why.empty())
        return fail(why);
      std::printf("atomic %llu\n", static_cast<unsigned long long>(++atomics));
      std::fflush(stdout);
      continue;
    }
    if (line != "round")
      return fail("unknown command '" + line + "'");
    ++round;
    const uint64_t base = (round % (kPool / kRound - 1)) * kRound;  // the last word: atomics
    for (uint64_t i = 0; i < kRound; ++i)
      src[base + i] = pattern(round, i);
    std::string write_path, read_path;
    for (uint64_t at = 0, k = 0; at < kRound; at += kOps[k++]) {
      const Range r = Range::of(kOps[k]).at_local(base + at).at_remote(base + at);
      auto w = client.write(*s, *target, r);
      if (!w.ok())
        return fail(w.error().to_string());
      auto rd = client.read(*b, *target, r);
      if (!rd.ok())
        return fail(rd.error().to_string());
      write_path = w->path;
      read_path = rd->path;
      served +=
          (w->path == kPathFallback ? kOps[k] : 0) + (rd->path == kPathFallback ? kOps[k] : 0);
    }
    for (uint64_t i = 0; i < kRound; ++i)
      if (pool[base + i] != pattern(round, i) || back[base + i] != pattern(round, i))
        return fail("round " + std::to_string(round) + ": byte " + std::to_string(i) +
                    " differs (owner " + std::to_string(pool[base + i]) + ", read back " +
                    std::to_string(back[base + i]) + ", written " +
                    std::to_string(pattern(round, i)) + ")");
    written += kRound;
    read += kRound;
    if (auto why = wait_served(owner_client, served, served_atomics); !why.empty())
      return fail(why);
    std::printf("round %llu %llu %s %s\n", static_cast<unsigned long long>(written),
                static_cast<unsigned long long>(read), write_path.c_str(), read_path.c_str());
    std::fflush(stdout);
  }
  return 0;
}
