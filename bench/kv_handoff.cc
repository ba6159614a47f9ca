// rdma_bench's kv-handoff shape (see kv_handoff.h).
#include "bench/kv_handoff.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/node_pair.h"

namespace caf_rdma::bench {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::seconds kTimeout{120};

double mbps(uint64_t bytes, Clock::duration d) {
  return double(bytes) / 1e6 / std::chrono::duration<double>(d).count();
}

std::string block_name(uint64_t b) {
  return std::to_string(b >> 10) + "k";
}

/// One transport's run; false when a transfer failed or a byte was wrong (said on stderr).
bool run_transport(const KvHandoffOptions& o, const BenchTransport& t) {
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "kv-handoff %s: %s\n", t.name, what.c_str());
    return false;
  };
  const uint64_t pool_bytes = o.pool_bytes;
  std::string skipped;
  auto pair = NodePair::start(t, pool_bytes, "kv-pool", &skipped);
  if (!pair.ok())
    return fail(pair.error().to_string());
  if (!*pair) {
    std::printf("kv-handoff %s: skipped (%s)\n", t.name, skipped.c_str());
    return true;
  }
  {
    RdmaClient& me = (*pair)->me();
    const BufferHandle local = (*pair)->local();
    const BufferHandle remote = (*pair)->remote();
    // The reference: the pool moved whole in one transfer, `reps` times, measured in the same
    // round as each list figure (paired rounds: the machine's drift cancels in each ratio).
    const int reps = o.long_mode ? 16 : 8;
    const int rounds = o.long_mode ? 5 : 3;
    auto time_bulk = [&](bool push) -> std::optional<double> {
      const auto t0 = Clock::now();
      for (int i = 0; i < reps; ++i) {
        auto r = push ? me.write(local, remote, Range::whole(), kTimeout)
                      : me.read(local, remote, Range::whole(), kTimeout);
        if (!r.ok()) {
          fail("bulk: " + r.error().to_string());
          return std::nullopt;
        }
      }
      return mbps(uint64_t(reps) * pool_bytes, Clock::now() - t0);
    };
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    for (int push = 0; push < 2; ++push) {
      std::vector<double> bulk;
      for (int r = 0; r < rounds; ++r) {
        auto bw = time_bulk(push);
        if (!bw)
          return false;
        bulk.push_back(*bw);
      }
      std::printf("bw kv-handoff %s bulk-%s %llu %.1f\n", t.name, push ? "push" : "pull",
                  static_cast<unsigned long long>(pool_bytes), median(bulk));
    }
    std::vector<size_t> concurrency{1, 8};
    if (o.long_mode)
      concurrency.push_back(64);
    for (uint64_t block : {uint64_t{4} << 10, uint64_t{16} << 10, uint64_t{64} << 10}) {
      const uint64_t blocks = pool_bytes / block;
      std::vector<uint64_t> place(blocks);  // local block i is the pool's block place[i]
      std::iota(place.begin(), place.end(), 0);
      std::shuffle(place.begin(), place.end(), std::mt19937(static_cast<uint32_t>(block)));
      for (int push = 0; push < 2; ++push) {
        const char* dir = push ? "push" : "pull";
        const uint32_t seed = static_cast<uint32_t>(block >> 10) * 2 + push + 1;
        uint8_t* src = push ? (*pair)->mine() : (*pair)->pool();
        uint8_t* dst = push ? (*pair)->pool() : (*pair)->mine();
        for (uint64_t i = 0; i < pool_bytes; ++i)
          src[i] = pattern(i, seed);
        for (size_t c : concurrency) {
          // Request j's blocks: the j-th share of the list.
          std::vector<std::vector<ListRange>> shares(c);
          for (uint64_t i = 0; i < blocks; ++i)
            shares[i * c / blocks].push_back(ListRange{i * block, place[i] * block, block});
          const TransferKind kind = push ? TransferKind::kWrite : TransferKind::kRead;
          for (bool prepared : {true, false}) {
            if (!prepared && t.via_manager)
              continue;
            std::vector<std::optional<TransferPlan>> plans(c);
            if (prepared)
              for (size_t j = 0; j < c; ++j) {
                auto p = me.prepare(kind, local, remote, shares[j]);
                if (!p.ok())
                  return fail("prepare: " + p.error().to_string());
                plans[j].emplace(std::move(*p));
              }
            std::vector<double> paged, ratios;
            for (int round = 0; round < rounds; ++round) {
              // The bulk transfers move the source whole: the destination is cleared after
              // them, so the list's bytes are checked on their own.
              auto bulk = time_bulk(push);
              if (!bulk)
                return false;
              std::memset(dst, 0, pool_bytes);
              std::vector<std::string> errors(c);
              const auto t0 = Clock::now();
              // List j's posts, `reps` of them, one after the other.
              auto poster = [&](size_t j) {
                for (int rep = 0; rep < reps && errors[j].empty(); ++rep) {
                  std::optional<TransferPlan> fresh;
                  if (!prepared) {
                    auto p = me.prepare(kind, local, remote, shares[j]);
                    if (!p.ok()) {
                      errors[j] = p.error().to_string();
                      return;
                    }
                    fresh.emplace(std::move(*p));
                  }
                  const TransferPlan& plan = prepared ? *plans[j] : *fresh;
                  ListOutcome out =
                      t.via_manager ? me.post_async(plan, kTimeout).get() : me.post(plan, kTimeout);
                  if (!out.ok())
                    errors[j] = out.status().error().to_string();
                }
              };
              // One list: posted from this thread, as the bulk transfers; c lists: c threads.
              if (c == 1) {
                poster(0);
              } else {
                std::vector<std::thread> threads;
                for (size_t j = 0; j < c; ++j)
                  threads.emplace_back(poster, j);
                for (auto& th : threads)
                  th.join();
              }
              const double bw = mbps(uint64_t(reps) * pool_bytes, Clock::now() - t0);
              for (const std::string& e : errors)
                if (!e.empty())
                  return fail(std::string(dir) + " " + block_name(block) + ": " + e);
              // Every byte: destination block i holds the source's block place[i].
              for (uint64_t i = 0; i < blocks; ++i) {
                const uint8_t* d = push ? dst + place[i] * block : dst + i * block;
                const uint8_t* s = push ? src + i * block : src + place[i] * block;
                if (std::memcmp(d, s, block) != 0)
                  return fail(std::string(dir) + " " + block_name(block) + ": block " +
                              std::to_string(i) + " differs");
              }
              paged.push_back(bw);
              ratios.push_back(bw / *bulk);
            }
            const char* how = prepared ? "prepared" : "fresh";
            std::printf("bw kv-handoff %s %s %s c%zu %s %.1f\n", t.name, dir,
                        block_name(block).c_str(), c, how, median(paged));
            std::printf("ratio kv_handoff_%s_%s_%s_c%zu_%s %.3f\n", t.name, dir,
                        block_name(block).c_str(), c, how, median(ratios));
            std::fflush(stdout);
          }
        }
      }
    }
    auto stats = me.stats();
    if (stats.ok())
      std::printf("kv-handoff %s: stream lane ops %llu, same-host ops %llu, rdma ops %llu\n",
                  t.name, static_cast<unsigned long long>(stats->stream_lane_ops),
                  static_cast<unsigned long long>(stats->same_host_ops),
                  static_cast<unsigned long long>(stats->rdma_ops));
  }
  return true;
}

}  // namespace

int bench_kv_handoff(const KvHandoffOptions& o) {
  bool ok = true;
  for (const std::string& name : o.transports) {
    const BenchTransport* t = find_transport(name);
    if (t == nullptr) {
      std::fprintf(stderr, "kv-handoff: unknown transport '%s' (%s)\n", name.c_str(),
                   transport_names());
      return 1;
    }
    ok = run_transport(o, *t) && ok;
  }
  return ok ? 0 : 1;
}

}  // namespace caf_rdma::bench
