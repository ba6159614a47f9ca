// collectives: launches N processes that form a peer group and run, with verification,
// broadcast, all-to-all and send/recv around a ring; prints each one's time and bandwidth.
// With --kill-rank K, rank K kills itself right after the group's first barrier and the others
// must each report an error naming it (exit 0 when they all do).
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "support/child_process.h"
#include "support/flags.h"
#include "systems/collectives/peer_group.h"

using namespace caf_rdma;
using namespace caf_rdma::group;
using namespace std::chrono_literals;

namespace {

constexpr const char* kUsage =
    "usage: collectives --ranks N [--size BYTES] [--iters K] [--kill-rank R] [--timeout-ms MS]\n"
    "  Starts N processes (default 4) that form a peer group and run, K times each (default 3),\n"
    "  with every byte verified: broadcast of BYTES from a rotating root, all-to-all of BYTES\n"
    "  per rank (BYTES/N per block), send/recv around a ring (BYTES per message). Prints each\n"
    "  collective's average time and bandwidth (BYTES per rank / time) and the path.\n"
    "  --kill-rank R: rank R dies after the first barrier; the others must report an error\n"
    "  naming it. Transport: CAF_RDMA_TRANSPORT=auto|rdma|fallback; device: CAF_RDMA_DEVICE.\n"
    "  Member role (one process of a group): --role member --rank R and either\n"
    "  --members HOST:PORT,HOST:PORT,... (every rank's address, e.g. across hosts) or --ranks N\n"
    "  (listen on a port the OS picks, print `listening HOST:PORT`, read `members LIST` from\n"
    "  stdin: what the launcher does).\n";

uint8_t pattern(uint64_t i, uint64_t seed) {
  return static_cast<uint8_t>(((i + seed * 2654435761u) * 2654435761u) >> 13);
}

void fill(uint8_t* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = 0; i < n; ++i)
    p[i] = pattern(i, seed);
}

bool check(const uint8_t* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = 0; i < n; ++i)
    if (p[i] != pattern(i, seed))
      return false;
  return true;
}

std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= list.size();) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos)
      comma = list.size();
    out.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

struct Timing {
  double total_ms = 0;
  uint32_t runs = 0;
};

/// One rank. Without `members` (launched): it listens on a port the OS picks, reports it on
/// stdout and reads everyone's from stdin.
int member(uint32_t rank, uint32_t ranks, const std::vector<std::string>& members, uint64_t size,
           uint32_t iters, bool die, uint32_t timeout_ms) {
  std::string me = "rank " + std::to_string(rank);
  auto fail = [&](const std::string& what, const Error& e) {
    std::printf("%s: %s failed: %s\n", me.c_str(), what.c_str(), e.to_string().c_str());
    std::fflush(stdout);
    return 1;
  };
  PeerGroupOptions o;
  o.rank = rank;
  o.members = members;
  o.timeout_ms = timeout_ms;
  if (members.empty()) {
    o.members.assign(ranks, "127.0.0.1:0");
    o.rendezvous = [](const std::string& address) -> Result<std::vector<std::string>> {
      std::printf("listening %s\n", address.c_str());
      std::fflush(stdout);
      char line[8192];
      if (std::fgets(line, sizeof(line), stdin) == nullptr)
        return Error(ErrorCode::kPeerUnavailable, "the launcher closed stdin before the members");
      std::string text(line);
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
        text.pop_back();
      if (text.rfind("members ", 0) != 0)
        return Error(ErrorCode::kInvalidArgument, "expected 'members LIST', got '" + text + "'");
      return split_commas(text.substr(8));
    };
  }
  auto mo = ManagerOptions::from_env();
  if (!mo.ok())
    return fail("configuration", mo.error());
  o.manager = *mo;
  auto g = PeerGroup::form(o);
  if (!g.ok())
    return fail("forming the group", g.error());
  PeerGroup& group = **g;
  uint32_t n = group.size();
  if (Status s = group.barrier(); !s.ok())
    return fail("barrier", s.error());
  std::printf("%s: joined a group of %u at %s (path %s)\n", me.c_str(), n,
              group.address(rank).c_str(), group.last_path().c_str());
  std::fflush(stdout);
  if (die) {
    std::printf("%s: dying now (--kill-rank)\n", me.c_str());
    std::fflush(stdout);
    ::raise(SIGKILL);
  }
  std::map<std::string, Timing> t;
  std::map<std::string, std::string> path;
  auto timed = [&](const std::string& name, auto&& fn) -> Status {
    auto a = std::chrono::steady_clock::now();
    Status s = fn();
    t[name].total_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
    ++t[name].runs;
    path[name] = group.last_path();
    return s;
  };
  std::vector<uint8_t> msg(size), bcast(size), a2a_in(size), a2a_out(size);
  uint64_t block = size / n;
  for (uint32_t it = 0; it < iters; ++it) {
    uint32_t root = it % n;
    if (rank == root)
      fill(bcast.data(), size, 50000 + it);
    else
      std::memset(bcast.data(), 0, size);
    Status s = timed("broadcast", [&] { return group.broadcast(root, bcast.data(), size); });
    if (!s.ok())
      return fail("broadcast", s.error());
    if (!check(bcast.data(), size, 50000 + it))
      return fail("broadcast", Error(ErrorCode::kInternal,
                                     "data from root " + std::to_string(root) + " differs"));
    for (uint32_t j = 0; j < n; ++j)
      fill(a2a_in.data() + j * block, block, (rank * n + j) * 7 + it * 7919);
    std::memset(a2a_out.data(), 0, size);
    s = timed("all-to-all", [&] { return group.all_to_all(a2a_in.data(), a2a_out.data(), block); });
    if (!s.ok())
      return fail("all-to-all", s.error());
    for (uint32_t i = 0; i < n; ++i)
      if (!check(a2a_out.data() + i * block, block, (i * n + rank) * 7 + it * 7919))
        return fail("all-to-all", Error(ErrorCode::kInternal,
                                        "block from rank " + std::to_string(i) + " differs"));
    // Ring: even ranks send first, odd ranks receive first (no cycle of blocked senders).
    uint32_t to = (rank + 1) % n, from = (rank + n - 1) % n;
    fill(msg.data(), size, rank * 1000 + it);
    Result<std::vector<uint8_t>> got = Error(ErrorCode::kInternal, "not received");
    s = timed("send/recv", [&]() -> Status {
      if (rank % 2 == 0) {
        if (Status st = group.send(to, msg.data(), size); !st.ok())
          return st;
        got = group.recv(from);
      } else {
        got = group.recv(from);
        if (!got.ok())
          return got.error();
        return group.send(to, msg.data(), size);
      }
      return got.ok() ? Status{} : Status{got.error()};
    });
    if (!s.ok())
      return fail("send/recv", s.error());
    if (got->size() != size || !check(got->data(), size, from * 1000 + it))
      return fail("send/recv", Error(ErrorCode::kInternal,
                                     "message from rank " + std::to_string(from) + " differs"));
  }
  for (const char* name : {"broadcast", "all-to-all", "send/recv"}) {
    double avg = t[name].total_ms / std::max<uint32_t>(1, t[name].runs);
    std::printf("%s: %-10s %10llu B  avg %9.3f ms  %9.1f MB/s  (path %s) verified x%u\n",
                me.c_str(), name, static_cast<unsigned long long>(size), avg,
                avg > 0 ? double(size) / (avg * 1000.0) : 0.0, path[name].c_str(), t[name].runs);
  }
  std::fflush(stdout);
  return 0;
}

int launch(uint32_t ranks, const std::vector<std::string>& common, int kill_rank,
           uint32_t timeout_ms) {
  // Each member listens on a port the OS picks and reports it; then all get the list.
  std::vector<ChildProcess> procs;
  for (uint32_t r = 0; r < ranks; ++r) {
    std::vector<std::string> argv{
        self_executable(),    "--role", "member", "--rank", std::to_string(r), "--ranks",
        std::to_string(ranks)};
    argv.insert(argv.end(), common.begin(), common.end());
    if (int(r) == kill_rank)
      argv.push_back("--die");
    auto c = ChildProcess::start(argv);
    if (!c.ok()) {
      std::printf("collectives: %s\n", c.error().to_string().c_str());
      return 1;
    }
    procs.push_back(std::move(*c));
  }
  std::vector<std::string> members;
  for (uint32_t r = 0; r < ranks; ++r) {
    auto line = procs[r].read_line(std::chrono::milliseconds(timeout_ms) + 60s);
    if (!line.ok() || line->rfind("listening ", 0) != 0) {
      std::printf("collectives: rank %u did not report its address: %s\n", r,
                  line.ok() ? line->c_str() : line.error().to_string().c_str());
      return 1;
    }
    members.push_back(line->substr(10));
  }
  std::string list;
  for (const auto& m : members)
    list += (list.empty() ? "" : ",") + m;
  std::printf("collectives: %u ranks at %s\n", ranks, list.c_str());
  std::fflush(stdout);
  for (auto& p : procs)
    if (Status st = p.write_line("members " + list); !st.ok()) {
      std::printf("collectives: %s\n", st.error().to_string().c_str());
      return 1;
    }
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms) * 4 + 60s;
  int problems = 0;
  std::string gone = "rank " + std::to_string(kill_rank) + " (" +
                     (kill_rank >= 0 && uint32_t(kill_rank) < ranks ? members[kill_rank] : "") +
                     ")";
  for (uint32_t r = 0; r < ranks; ++r) {
    bool named_dead = false;
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      auto line = procs[r].read_line(std::max(left, std::chrono::milliseconds(1)));
      if (!line.ok())
        break;
      std::printf("  %s\n", line->c_str());
      if (line->find(gone) != std::string::npos && line->find("failed") != std::string::npos)
        named_dead = true;
    }
    auto rc = procs[r].wait_for(10s);
    if (!rc) {
      std::printf("collectives: rank %u did not finish in time\n", r);
      ++problems;
    } else if (kill_rank < 0 && *rc != 0) {
      std::printf("collectives: rank %u exited with %d\n", r, *rc);
      ++problems;
    } else if (kill_rank >= 0 && int(r) == kill_rank && *rc != 128 + SIGKILL) {
      std::printf("collectives: rank %u should have died, exited with %d\n", r, *rc);
      ++problems;
    } else if (kill_rank >= 0 && int(r) != kill_rank && (*rc == 0 || !named_dead)) {
      std::printf("collectives: rank %u did not report an error naming %s (exit %d)\n", r,
                  gone.c_str(), *rc);
      ++problems;
    }
  }
  std::fflush(stdout);
  if (problems > 0) {
    std::printf("collectives: FAILED\n");
    return 1;
  }
  if (kill_rank >= 0)
    std::printf(
        "collectives: OK: rank %d died after the barrier; each of the %u others reported "
        "an error naming %s\n",
        kill_rank, ranks - 1, gone.c_str());
  else
    std::printf("collectives: OK: %u ranks, every collective verified\n", ranks);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = Flags::parse(argc, argv,
                            {"--ranks", "--size", "--iters", "--kill-rank", "--timeout-ms",
                             "--role", "--rank", "--members"},
                            {"--help", "-h", "--die"});
  if (!flags.ok()) {
    std::fprintf(stderr, "collectives: %s\n%s", flags.error().message().c_str(), kUsage);
    return 2;
  }
  if (flags->has("--help") || flags->has("-h")) {
    std::printf("%s", kUsage);
    return 0;
  }
  auto ranks = flags->get_u64("--ranks", 4);
  auto size = flags->get_u64("--size", 4 << 20);
  auto iters = flags->get_u64("--iters", 3);
  auto timeout = flags->get_u64("--timeout-ms", 30000);
  auto rank = flags->get_u64("--rank", 0);
  for (auto* r : {&ranks, &size, &iters, &timeout, &rank})
    if (!r->ok()) {
      std::fprintf(stderr, "collectives: %s\n", r->error().message().c_str());
      return 2;
    }
  if (*ranks < 2 || *ranks > 64 || *size < *ranks || *iters < 1 || *timeout < 1) {
    std::fprintf(stderr, "collectives: need 2 <= --ranks <= 64, --size >= ranks, --iters >= 1\n");
    return 2;
  }
  std::vector<std::string> common{"--size",       std::to_string(*size),
                                  "--iters",      std::to_string(*iters),
                                  "--timeout-ms", std::to_string(*timeout)};
  if (flags->get("--role", "") == "member") {
    std::string list = flags->get("--members", "");
    std::vector<std::string> members;
    if (!list.empty())
      members = split_commas(list);
    return member(static_cast<uint32_t>(*rank), static_cast<uint32_t>(*ranks), members, *size,
                  static_cast<uint32_t>(*iters), flags->has("--die"),
                  static_cast<uint32_t>(*timeout));
  }
  int kill_rank = -1;
  if (flags->has("--kill-rank")) {
    auto k = flags->get_u64("--kill-rank", 0);
    if (!k.ok() || *k >= *ranks) {
      std::fprintf(stderr, "collectives: --kill-rank must name one of the %llu ranks\n",
                   static_cast<unsigned long long>(*ranks));
      return 2;
    }
    kill_rank = static_cast<int>(*k);
  }
  return launch(static_cast<uint32_t>(*ranks), common, kill_rank, static_cast<uint32_t>(*timeout));
}
