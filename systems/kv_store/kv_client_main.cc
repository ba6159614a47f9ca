// kv_client: put/get/delete against a kv_server, or a benchmark. Exit codes: 0 success,
// 1 error (message on stderr), 2 usage, 3 key not found.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "support/flags.h"
#include "systems/kv_store/kv_client.h"

using namespace caf_rdma;
using namespace caf_rdma::kv;

namespace {

constexpr const char* kUsage =
    "usage: kv_client --server HOST:PORT [--buffer-mb M] [--timeout-ms MS] COMMAND\n"
    "  put KEY VALUE             store VALUE (or the bytes of --value-file PATH) under KEY\n"
    "  get KEY                   write KEY's value to stdout\n"
    "  delete KEY                remove KEY\n"
    "  stats                     the server's counters\n"
    "  bench --ops N --value-size B [--concurrency C]\n"
    "                            N PUTs then N GETs of B-byte values (verified) from C threads;\n"
    "                            prints ops/s and latency p50/p99/max per operation\n"
    "  The client registers one buffer of M MiB (default 64; split in C slots for bench); the\n"
    "  server RDMA-reads PUT values out of it and RDMA-writes GET values into it.\n"
    "  Output names the path (rdma or fallback). Exit: 0 ok, 1 error, 2 usage, 3 no such key.\n";

int failed(const std::string& what, const Error& e) {
  // Server errors already start with the operation and key.
  bool named = e.message().rfind(what, 0) == 0;
  std::fprintf(stderr, "kv_client: %s%s%s\n", named ? "" : what.c_str(), named ? "" : ": ",
               e.to_string().c_str());
  return e.code() == ErrorCode::kNotFound ? 3 : 1;
}

/// The bench's values: key `seed`'s value of n bytes is n bytes of `doubled` (a pattern of n
/// bytes, twice) from value_shift(seed, n): every key's bytes differ from its neighbours', and
/// filling or checking one is a memcpy or memcmp (the check then costs the client what a
/// memcmp does, not a per-byte formula).
std::vector<uint8_t> doubled_pattern(uint64_t n) {
  std::vector<uint8_t> v(2 * n);
  for (uint64_t i = 0; i < n; ++i)
    v[i] = v[n + i] = static_cast<uint8_t>(((i * 2654435761u) >> 13) ^ (i >> 8));
  return v;
}
uint64_t value_shift(uint64_t seed, uint64_t n) {
  return n == 0 ? 0 : (seed * 7919 + seed / 3) % n;
}

struct Latencies {
  std::vector<double> us;
  void print(const char* op, double secs, const std::string& path) {
    std::sort(us.begin(), us.end());
    auto at = [&](double q) {
      return us.empty() ? 0.0
                        : us[std::min(us.size() - 1,
                                      static_cast<size_t>(q * static_cast<double>(us.size())))];
    };
    std::printf(
        "  %-4s %8.0f ops/s   latency p50 %8.1f us   p99 %8.1f us   max %8.1f us   "
        "(path %s)\n",
        op, secs > 0 ? double(us.size()) / secs : 0.0, at(0.50), at(0.99),
        us.empty() ? 0.0 : us.back(), path.c_str());
  }
};

int bench(KvClient& client, uint64_t ops, uint64_t value_size, uint32_t threads) {
  if (value_size > client.slot_bytes()) {
    std::fprintf(stderr,
                 "kv_client: bench: --value-size %llu exceeds the buffer slot of %llu "
                 "bytes (raise --buffer-mb or lower --concurrency)\n",
                 static_cast<unsigned long long>(value_size),
                 static_cast<unsigned long long>(client.slot_bytes()));
    return 2;
  }
  auto stats = client.server_stats();
  if (!stats.ok())
    return failed("bench", stats.error());
  // Keep half the pool free, so replacing a value always finds room for the new copy.
  uint64_t per_key = std::max<uint64_t>(64, (value_size + 63) & ~uint64_t(63));
  uint64_t keys = std::max<uint64_t>(1, std::min<uint64_t>(ops, stats->pool_bytes / 2 / per_key));
  uint64_t keys_per_thread = std::max<uint64_t>(1, keys / threads);
  std::vector<Latencies> put_lat(threads), get_lat(threads);
  std::vector<std::string> errors(threads), put_paths(threads), get_paths(threads);
  std::atomic<uint64_t> verified{0};
  const std::vector<uint8_t> doubled = doubled_pattern(value_size);
  auto run_phase = [&](bool put) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (uint32_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        auto s = client.session(t);
        uint64_t n = ops / threads + (t < ops % threads ? 1 : 0);
        for (uint64_t i = 0; i < n && errors[t].empty(); ++i) {
          uint64_t k = i % keys_per_thread;
          std::string key = "bench/" + std::to_string(t) + "/" + std::to_string(k);
          const uint8_t* expect =
              doubled.data() + value_shift(static_cast<uint64_t>(t) * 1000003 + k, value_size);
          if (put)
            std::memcpy(s->slot_data(), expect, value_size);
          auto a = std::chrono::steady_clock::now();
          auto r = put ? s->put_from_slot(key, value_size) : s->get(key);
          auto us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a)
                        .count();
          if (!r.ok()) {
            errors[t] = (put ? "put " : "get ") + key + ": " + r.error().to_string();
            break;
          }
          (put ? put_lat : get_lat)[t].us.push_back(us);
          (put ? put_paths : get_paths)[t] = r->path;
          if (!put) {
            if (r->length != value_size || std::memcmp(expect, s->slot_data(), value_size) != 0) {
              errors[t] = "get " + key + ": value differs from what was put";
              break;
            }
            ++verified;
          }
        }
      });
    for (auto& th : pool)
      th.join();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  double put_secs = run_phase(true);
  double get_secs = run_phase(false);
  for (uint32_t t = 0; t < threads; ++t)
    if (!errors[t].empty()) {
      std::fprintf(stderr, "kv_client: bench: %s\n", errors[t].c_str());
      return 1;
    }
  Latencies puts, gets;
  for (uint32_t t = 0; t < threads; ++t) {
    puts.us.insert(puts.us.end(), put_lat[t].us.begin(), put_lat[t].us.end());
    gets.us.insert(gets.us.end(), get_lat[t].us.begin(), get_lat[t].us.end());
  }
  std::printf("kv_client bench: %llu ops x %llu B values, concurrency %u, %llu keys, server %s\n",
              static_cast<unsigned long long>(ops), static_cast<unsigned long long>(value_size),
              threads, static_cast<unsigned long long>(keys_per_thread) * threads,
              client.server().c_str());
  puts.print("put", put_secs, put_paths[0]);
  gets.print("get", get_secs, get_paths[0]);
  std::printf("  verified %llu values\n", static_cast<unsigned long long>(verified.load()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = Flags::parse(argc, argv,
                            {"--server", "--buffer-mb", "--timeout-ms", "--value-file", "--ops",
                             "--value-size", "--concurrency"},
                            {"--help", "-h"}, true);
  if (!flags.ok()) {
    std::fprintf(stderr, "kv_client: %s\n%s", flags.error().message().c_str(), kUsage);
    return 2;
  }
  if (flags->has("--help") || flags->has("-h")) {
    std::printf("%s", kUsage);
    return 0;
  }
  const auto& args = flags->positionals();
  std::string cmd = args.empty() ? "" : args[0];
  size_t want = cmd == "put"                       ? (flags->has("--value-file") ? 2 : 3)
                : cmd == "get" || cmd == "delete"  ? 2
                : cmd == "stats" || cmd == "bench" ? 1
                                                   : 0;
  if (want == 0 || args.size() != want || !flags->has("--server")) {
    std::fprintf(stderr, "kv_client: %s\n%s",
                 !flags->has("--server") ? "--server HOST:PORT is required"
                 : want == 0             ? "missing or unknown command"
                                         : "wrong number of arguments for the command",
                 kUsage);
    return 2;
  }
  auto buffer_mb = flags->get_u64("--buffer-mb", 64);
  auto timeout = flags->get_u64("--timeout-ms", 30000);
  auto ops = flags->get_u64("--ops", 1000);
  auto value_size = flags->get_u64("--value-size", 4096);
  auto conc = flags->get_u64("--concurrency", 1);
  for (auto* r : {&buffer_mb, &timeout, &ops, &value_size, &conc})
    if (!r->ok()) {
      std::fprintf(stderr, "kv_client: %s\n", r->error().message().c_str());
      return 2;
    }
  if (*buffer_mb == 0 || *timeout == 0 || *conc == 0 || *conc > 256 || *ops == 0) {
    std::fprintf(stderr,
                 "kv_client: --buffer-mb, --timeout-ms, --ops must be positive, "
                 "--concurrency 1..256\n");
    return 2;
  }
  KvClientOptions o;
  o.server = flags->get("--server", "");
  o.buffer_bytes = *buffer_mb << 20;
  o.slots = cmd == "bench" ? static_cast<uint32_t>(*conc) : 1;
  o.timeout_ms = static_cast<uint32_t>(*timeout);
  auto mo = ManagerOptions::from_env();
  if (!mo.ok())
    return failed("configuration", mo.error());
  o.manager = *mo;
  auto client = KvClient::connect(o);
  if (!client.ok())
    return failed("connect", client.error());
  if (cmd == "bench")
    return bench(**client, *ops, *value_size, o.slots);
  auto session = (*client)->session(0);
  if (cmd == "stats") {
    auto s = (*client)->server_stats();
    if (!s.ok())
      return failed("stats", s.error());
    std::printf(
        "keys %llu, pool %llu bytes, used %llu, largest free block %llu, puts %llu, gets "
        "%llu, deletes %llu, errors %llu, device %s\n",
        (unsigned long long)s->keys, (unsigned long long)s->pool_bytes,
        (unsigned long long)s->used_bytes, (unsigned long long)s->largest_free,
        (unsigned long long)s->puts, (unsigned long long)s->gets, (unsigned long long)s->deletes,
        (unsigned long long)s->errors, s->device.empty() ? "none (fallback)" : s->device.c_str());
    return 0;
  }
  const std::string& key = args[1];
  if (cmd == "put") {
    std::string value;
    if (flags->has("--value-file")) {
      std::ifstream in(flags->get("--value-file", ""), std::ios::binary);
      if (!in)
        return failed("put '" + key + "'",
                      Error(ErrorCode::kInvalidArgument,
                            "cannot read --value-file " + flags->get("--value-file", "")));
      value.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    } else {
      value = args[2];
    }
    auto r = session->put(key, value.data(), value.size());
    if (!r.ok())
      return failed("put '" + key + "'", r.error());
    std::printf("kv_client: put '%s': %llu bytes stored (path %s)\n", key.c_str(),
                static_cast<unsigned long long>(r->length),
                r->path.empty() ? "none: empty value" : r->path.c_str());
    return 0;
  }
  if (cmd == "get") {
    auto r = session->get(key);
    if (!r.ok())
      return failed("get '" + key + "'", r.error());
    std::fwrite(session->slot_data(), 1, r->length, stdout);
    std::fflush(stdout);
    std::fprintf(stderr, "kv_client: get '%s': %llu bytes (path %s)\n", key.c_str(),
                 static_cast<unsigned long long>(r->length),
                 r->path.empty() ? "none: empty value" : r->path.c_str());
    return 0;
  }
  auto r = session->remove(key);
  if (!r.ok())
    return failed("delete '" + key + "'", r.error());
  std::printf("kv_client: delete '%s': removed a value of %llu bytes\n", key.c_str(),
              static_cast<unsigned long long>(*r));
  return 0;
}
