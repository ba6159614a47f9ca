// rdma_stress: N processes x M threads doing random reads, writes and batches of random sizes at
// random offsets into each other's registered buffers, every byte checked; release churn and
// writes through released handles; optionally one process SIGKILLed mid-run.
//
// Invariants (what makes every check exact):
//  1. Process p's target buffer holds one region per (writer process, thread); only that
//     thread writes its region, so it knows every byte there (its shadow copy) and checks every
//     byte it reads back. A byte is unknown only after a write of it failed (partly written).
//  2. Reads land in memory poisoned beforehand: a read reported successful whose bytes never
//     arrived cannot pass.
//  3. The churn zone at the end of each target buffer is covered by the big handle's memory
//     but never written legitimately: sub-range handles over it are requested, released and
//     published as "released"; peers write through them, which must fail with `released`; the
//     owner checks the zone stays all zero.
//  4. A peer's failure is accepted only as peer_unavailable naming it, after it was killed.
//  5. Every rank is named by the host:port it listens on (its --bind address and the port it
//     reported); ranks on other hosts (--hosts) speak the same line protocol to the parent,
//     through the --remote command.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "actors/rdma_client.h"
#include "actors/rdma_node.h"
#include "support/child_process.h"
#include "support/flags.h"

using namespace caf_rdma;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint64_t kChurnBytes = 64 << 10;
constexpr uint32_t kTimeoutMs = 60000;

struct Options {
  int procs = 8;
  int threads = 2;
  double seconds = 60;
  uint64_t max_size = 4 << 20;
  bool kill = false;
  bool verify = true;
  int read_pct = 40;                 // single reads among ops; the rest: writes, batches, released
  bool fixed_size = false;           // every single op moves exactly max_size bytes
  std::vector<std::string> devices;  // child r opens devices[r % n] (CAF_RDMA_DEVICE)
  std::vector<std::string> hosts;    // child r binds and runs on hosts[r % n] (default: loopback)
  std::vector<std::string> remote;   // command (argv) that runs a child on another host
  std::string bind = "127.0.0.1";    // a child's node address
  uint64_t seed = 0;
  int child = -1;  // rank when running as a child
};

const char* kUsage =
    "usage: rdma_stress [--procs N] [--threads M] [--seconds S] [--max-size BYTES] [--kill]\n"
    "                   [--no-verify] [--seed X] [--read-pct P] [--fixed-size]\n"
    "                   [--devices DEV1,DEV2,...] [--hosts A,B,... --remote CMD]\n"
    "  N processes (default 8) x M threads (default 2) do random reads, writes and batches of\n"
    "  1 B .. --max-size (default 4M) at random offsets into the other processes' registered\n"
    "  buffers for S seconds (default 60), through direct lanes (even threads) and the manager\n"
    "  (odd threads); every byte read is checked, reads land in poisoned memory, and a final\n"
    "  pass reads every region back. Each process churns sub-range handles (request, release,\n"
    "  publish); peers write through released ones, which must fail with `released` and change\n"
    "  nothing. --kill SIGKILLs a random process mid-run: the others must report\n"
    "  peer_unavailable naming it and go on. Verify mode (CAF_RDMA_VERIFY=1) is on unless\n"
    "  --no-verify. Prints ops, bytes, errors by code and `corrupt N`; exit 0 only if nothing\n"
    "  was corrupt, every released-handle write was refused and every error was expected.\n"
    "  The transport is whatever CAF_RDMA_TRANSPORT / the host gives (rdma or fallback).\n"
    "  --read-pct P: share of single reads among the ops (default 40; the rest are writes,\n"
    "  batches and released-handle writes, 8:3:1). --fixed-size: single reads and writes move\n"
    "  exactly --max-size bytes (e.g. --read-pct 70 --fixed-size --max-size 1M: the READ-heavy\n"
    "  load that broke Soft-RoCE on Linux 6.1). --devices rxe0,rxe1: process r opens device\n"
    "  r mod n (CAF_RDMA_DEVICE), so transfers cross devices.\n"
    "  --hosts A,B,... --remote CMD: process r listens on address hosts[r mod n] and runs on\n"
    "  that host: those of the first host are children of this one, the others are started as\n"
    "  `CMD HOST env VAR=... rdma_stress --child ...` (CMD, split at spaces: runs its arguments\n"
    "  on HOST with their stdin and stdout connected to its own, and ends them when its stdin\n"
    "  closes; e.g. tests/two_hosts/remote_exec.py). Addresses beyond loopback need TLS or\n"
    "  CAF_RDMA_PLAINTEXT=1 on every host.\n";

uint8_t pattern(uint32_t writer, uint64_t seq, uint64_t offset) {
  uint64_t x = offset * 0x9E3779B97F4A7C15ull ^ (writer + 1) * 0xC2B2AE3D27D4EB4Full ^
               (seq + 1) * 0x165667B19E3779F9ull;
  x ^= x >> 29;
  return static_cast<uint8_t>(x >> 17);
}

// -- child -----------------------------------------------------------------------------------

struct Counts {
  std::mutex mu;
  uint64_t ops = 0, bytes = 0, reads_checked = 0, batches = 0, released_tries = 0;
  uint64_t released_refused = 0, revoke_failures = 0, corrupt = 0, unexpected = 0, churn = 0;
  std::map<std::string, uint64_t> errors;  // code -> count (expected ones included)
  std::map<int, bool> named_dead;          // rank -> reported peer_unavailable naming it
  std::map<int, std::map<std::string, uint64_t>> dead_codes;
};

struct Peer {
  int rank = 0;
  std::string name;  // host:port
  rdma_manager_actor manager;
  BufferHandle target;
  std::atomic<bool> dead{false};
};

class Child {
public:
  Child(const Options& o, std::unique_ptr<RdmaNode> node)
      : o_(o), node_(std::move(node)), region_(o.max_size) {}

  int run();

private:
  uint64_t region_base(int writer_rank, int thread) const {
    return (static_cast<uint64_t>(writer_rank) * o_.threads + thread) * region_;
  }
  void worker(int t);
  void churner();
  /// Error of an op to peer `q`: expected (peer_unavailable naming a dead peer) or not.
  void on_error(Peer& q, const Error& e, const char* what);
  void report_corrupt(const std::string& text) {
    std::lock_guard<std::mutex> g(c_.mu);
    ++c_.corrupt;
    if (c_.corrupt <= 10)
      std::fprintf(stderr, "rdma_stress[%d]: CORRUPT: %s\n", o_.child, text.c_str());
  }

  Options o_;
  std::unique_ptr<RdmaNode> node_;
  uint64_t region_;
  std::vector<std::unique_ptr<Peer>> peers_;  // index = rank (ours unused)
  std::vector<uint8_t> target_;
  Counts c_;
  std::atomic<bool> stop_{false};
};

void Child::on_error(Peer& q, const Error& e, const char* what) {
  std::lock_guard<std::mutex> g(c_.mu);
  ++c_.errors[to_string(e.code())];
  bool names_it = e.message().find(q.name) != std::string::npos;
  if (e.code() == ErrorCode::kPeerUnavailable && names_it) {
    q.dead = true;
    c_.named_dead[q.rank] = true;
    ++c_.dead_codes[q.rank][to_string(e.code())];
    return;
  }
  if (q.dead) {  // already known gone: other codes are counted, the parent judges them
    ++c_.dead_codes[q.rank][to_string(e.code())];
    return;
  }
  ++c_.unexpected;
  if (c_.unexpected <= 10)
    std::fprintf(stderr, "rdma_stress[%d]: unexpected error on %s to rank %d (%s): %s\n", o_.child,
                 what, q.rank, q.name.c_str(), e.to_string().c_str());
}

void Child::churner() {
  RdmaClient client(node_->system(), node_->manager(), false);
  std::mt19937_64 rng(o_.seed * 7919 + o_.child);
  uint8_t* zone = target_.data() + target_.size() - kChurnBytes;
  while (!stop_) {
    uint64_t off = rng() % (kChurnBytes / 2), len = 1 + rng() % (kChurnBytes / 2);
    auto h = client.request_buffer(zone + off, len);
    if (!h.ok()) {
      std::fprintf(stderr, "rdma_stress[%d]: churn request: %s\n", o_.child,
                   h.error().to_string().c_str());
      std::lock_guard<std::mutex> g(c_.mu);
      ++c_.unexpected;
      return;
    }
    auto r = client.release(h->id);
    Status st = r.ok() ? client.put("released", *h) : Status(r.error());
    if (!st.ok()) {
      std::fprintf(stderr, "rdma_stress[%d]: churn release: %s\n", o_.child,
                   st.error().to_string().c_str());
      std::lock_guard<std::mutex> g(c_.mu);
      ++c_.unexpected;
      return;
    }
    for (uint64_t i = 0; i < kChurnBytes; ++i)
      if (zone[i] != 0) {
        report_corrupt("churn zone byte " + std::to_string(i) +
                       " changed (written through a released handle?)");
        break;
      }
    std::lock_guard<std::mutex> g(c_.mu);
    ++c_.churn;
  }
}

void Child::worker(int t) {
  const bool direct = t % 2 == 0;
  RdmaClient client(node_->system(), node_->manager(), direct);
  std::mt19937_64 rng(o_.seed * 1000003 + static_cast<uint64_t>(o_.child) * 131 + t);
  const uint32_t writer = static_cast<uint32_t>(o_.child * o_.threads + t);
  std::vector<uint8_t> src(region_), dst(region_);
  auto hs = client.request_buffer(src.data(), src.size());
  auto hd = client.request_buffer(dst.data(), dst.size());
  if (!hs.ok() || !hd.ok()) {
    std::fprintf(stderr, "rdma_stress[%d]: registering: %s\n", o_.child,
                 (hs.ok() ? hd.error() : hs.error()).to_string().c_str());
    std::lock_guard<std::mutex> g(c_.mu);
    ++c_.unexpected;
    return;
  }
  // Our region at every peer: what we wrote there, and whether each byte is known.
  size_t n = peers_.size();
  std::vector<std::vector<uint8_t>> shadow(n, std::vector<uint8_t>(region_, 0));
  std::vector<std::vector<uint8_t>> known(n, std::vector<uint8_t>(region_, 1));
  const uint64_t base = region_base(o_.child, t);
  uint64_t seq = 0;
  auto rand_size = [&](uint64_t cap) {
    // Log-uniform 1 B .. cap: as many small ops as large ones.
    if (o_.fixed_size)
      return cap;
    double e = std::uniform_real_distribution<double>(0, std::log2(static_cast<double>(cap)))(rng);
    return std::max<uint64_t>(1, std::min<uint64_t>(cap, static_cast<uint64_t>(std::exp2(e))));
  };
  auto check = [&](size_t q, uint64_t off, uint64_t len, const std::string& path) {
    for (uint64_t i = 0; i < len; ++i) {
      if (known[q][off + i] && dst[i] != shadow[q][off + i]) {
        char text[256];
        std::snprintf(text, sizeof(text),
                      "thread %d read %llu bytes at offset %llu of its region at rank %zu "
                      "(path %s): byte %llu is 0x%02x, expected 0x%02x",
                      t, static_cast<unsigned long long>(len), static_cast<unsigned long long>(off),
                      q, path.c_str(), static_cast<unsigned long long>(i), dst[i],
                      shadow[q][off + i]);
        report_corrupt(text);
        return;
      }
    }
    std::lock_guard<std::mutex> g(c_.mu);
    ++c_.reads_checked;
  };
  auto pick_peer = [&]() -> Peer* {
    for (int tries = 0; tries < 64; ++tries) {
      size_t q = rng() % n;
      if (static_cast<int>(q) != o_.child && !peers_[q]->dead)
        return peers_[q].get();
    }
    return nullptr;
  };
  auto fill = [&](uint64_t src_off, uint64_t off, uint64_t len) {
    ++seq;
    for (uint64_t i = 0; i < len; ++i)
      src[src_off + i] = pattern(writer, seq, off + i);
  };
  auto wrote = [&](size_t q, uint64_t src_off, uint64_t off, uint64_t len, bool ok) {
    if (ok)
      std::memcpy(shadow[q].data() + off, src.data() + src_off, len);
    std::memset(known[q].data() + off, ok ? 1 : 0, len);
  };
  auto count = [&](uint64_t bytes) {
    std::lock_guard<std::mutex> g(c_.mu);
    ++c_.ops;
    c_.bytes += bytes;
  };
  auto deadline = Clock::now() + std::chrono::duration<double>(o_.seconds);
  while (Clock::now() < deadline) {
    Peer* p = pick_peer();
    if (p == nullptr)
      break;
    size_t q = static_cast<size_t>(p->rank);
    // Thresholds: reads [0, r), writes [r, w), batches [w, b), released-handle writes [b, 100).
    const unsigned r_end = static_cast<unsigned>(o_.read_pct);
    const unsigned w_end = r_end + (100 - r_end) * 2 / 3, b_end = w_end + (100 - r_end) / 4;
    unsigned dice = rng() % 100;
    if (dice >= r_end && dice < w_end) {  // write
      uint64_t len = rand_size(region_), off = rng() % (region_ - len + 1);
      fill(0, off, len);
      auto r = client.transfer(make_write(*hs, p->target, len, 0, base + off), kTimeoutMs);
      wrote(q, 0, off, len, r.ok());
      if (r.ok())
        count(len);
      else
        on_error(*p, r.error(), "write");
    } else if (dice < r_end) {  // read into poisoned memory
      uint64_t len = rand_size(region_), off = rng() % (region_ - len + 1);
      std::memset(dst.data(), 0xA5 ^ static_cast<uint8_t>(seq), len);
      auto r = client.transfer(make_read(*hd, p->target, len, 0, base + off), kTimeoutMs);
      if (r.ok()) {
        count(len);
        check(q, off, len, r->path);
      } else {
        on_error(*p, r.error(), "read");
      }
    } else if (dice < b_end) {  // batch: two writes and a read, on disjoint thirds of the region
      uint64_t third = region_ / 3;
      uint64_t lw1 = rand_size(third), lw2 = rand_size(third), lr = rand_size(third);
      uint64_t o1 = rng() % (third - lw1 + 1), o2 = third + rng() % (third - lw2 + 1),
               o3 = 2 * third + rng() % (third - lr + 1);
      fill(0, o1, lw1);
      fill(third, o2, lw2);
      std::memset(dst.data(), 0x5A ^ static_cast<uint8_t>(seq), lr);
      std::vector<TransferOp> ops{make_write(*hs, p->target, lw1, 0, base + o1),
                                  make_write(*hs, p->target, lw2, third, base + o2),
                                  make_read(*hd, p->target, lr, 0, base + o3)};
      auto r = client.batch(ops, kTimeoutMs);
      if (!r.ok() || r->size() != 3) {
        wrote(q, 0, o1, lw1, false);
        wrote(q, third, o2, lw2, false);
        on_error(*p, r.ok() ? Error(ErrorCode::kInternal, "batch reply size") : r.error(), "batch");
        continue;
      }
      {
        std::lock_guard<std::mutex> g(c_.mu);
        ++c_.batches;
      }
      const auto& out = *r;
      wrote(q, 0, o1, lw1, out[0].ok());
      wrote(q, third, o2, lw2, out[1].ok());
      for (int i = 0; i < 3; ++i) {
        if (out[i].ok())
          count(i == 0 ? lw1 : i == 1 ? lw2 : lr);
        else
          on_error(*p, out[i].status().error(), "batch op");
      }
      if (out[2].ok())
        check(q, o3, lr, out[2].path);
    } else {  // a write through a handle its owner released: must be refused, change nothing
      // A short reply timeout: a peer that died without our knowing must not hold us long.
      RdmaClient dir(node_->system(), p->manager, false, std::chrono::seconds(5));
      auto h = dir.get("released", 1);
      if (!h.ok())
        continue;  // none published yet (or the peer is gone: the next op says so)
      uint64_t len = std::min<uint64_t>(h->size, 1 + rng() % 4096);
      std::memset(src.data(), 0xEE, len);
      {
        std::lock_guard<std::mutex> g(c_.mu);
        ++c_.released_tries;
      }
      auto r = client.transfer(make_write(*hs, *h, len, 0, 0), kTimeoutMs);
      std::lock_guard<std::mutex> g(c_.mu);
      if (r.ok()) {
        ++c_.revoke_failures;
        std::fprintf(stderr,
                     "rdma_stress[%d]: a write through released buffer %llu of rank %d was "
                     "accepted (path %s)\n",
                     o_.child, static_cast<unsigned long long>(h->id), p->rank, r->path.c_str());
      } else if (r.error().code() == ErrorCode::kReleased) {
        ++c_.released_refused;
        ++c_.errors["released (expected)"];
      } else if (r.error().code() == ErrorCode::kPeerUnavailable &&
                 (p->dead || r.error().message().find(p->name) != std::string::npos)) {
        // Its owner is gone (the killed rank; this write may be the first to learn it): no
        // memory is left to protect, and the error names the owner, as for any op to it.
        p->dead = true;
        c_.named_dead[p->rank] = true;
        ++c_.dead_codes[p->rank][to_string(r.error().code())];
      } else {
        ++c_.revoke_failures;
        std::fprintf(stderr,
                     "rdma_stress[%d]: a write through a released handle failed with %s, not "
                     "released: %s\n",
                     o_.child, to_string(r.error().code()), r.error().message().c_str());
      }
    }
  }
  // Final pass: every region we own, at every peer, read back whole and checked.
  for (size_t q = 0; q < n; ++q) {
    if (static_cast<int>(q) == o_.child)
      continue;
    Peer& p = *peers_[q];
    std::memset(dst.data(), 0xC3, region_);
    auto r = client.transfer(make_read(*hd, p.target, region_, 0, base), kTimeoutMs);
    if (r.ok())
      check(q, 0, region_, r->path);
    else
      on_error(p, r.error(), "final read");
  }
}

int Child::run() {
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "rdma_stress[%d]: %s\n", o_.child, what.c_str());
    return 2;
  };
  std::printf("port %u\n", node_->port());
  std::fflush(stdout);
  // The parent answers with every process's port once all are up.
  char line[4096];
  if (std::fgets(line, sizeof(line), stdin) == nullptr)
    return fail("no peer list from the parent");
  std::istringstream in(line);
  std::string word;
  in >> word;
  if (word != "peers")
    return fail("bad peer list: " + std::string(line));
  std::vector<std::pair<std::string, uint16_t>> addresses;  // invariant 5
  for (std::string a; in >> a;) {
    auto hp = parse_host_port(a);
    if (!hp.ok())
      return fail("bad peer list: " + hp.error().to_string());
    addresses.push_back(*hp);
  }
  if (static_cast<int>(addresses.size()) != o_.procs)
    return fail("peer list has " + std::to_string(addresses.size()) + " addresses");
  target_.assign(static_cast<uint64_t>(o_.procs) * o_.threads * region_ + kChurnBytes, 0);
  RdmaClient me(node_->system(), node_->manager(), false);
  auto mine = me.request_buffer(target_.data(), target_.size());
  if (!mine.ok())
    return fail("registering the target buffer: " + mine.error().to_string());
  if (Status st = me.put("target", *mine); !st.ok())
    return fail(st.error().to_string());
  // Two CAF 0.17 nodes that dial each other at the same moment can lose both connections (each
  // side drops one as redundant): first every rank dials the lower ranks only, and only when
  // all have (the parent's "go") the higher ones, whose connections then exist already.
  for (int r = 0; r < o_.procs; ++r) {
    auto p = std::make_unique<Peer>();
    p->rank = r;
    p->name = addresses[r].first + ":" + std::to_string(addresses[r].second);
    peers_.push_back(std::move(p));
  }
  auto meet = [&](int r) -> std::string {
    auto m = node_->remote_manager(addresses[r].first, addresses[r].second);
    if (!m.ok())
      return m.error().to_string();
    peers_[r]->manager = *m;
    auto h = RdmaClient(node_->system(), *m, false).get("target", kTimeoutMs);
    if (!h.ok())
      return "target of rank " + std::to_string(r) + ": " + h.error().to_string();
    peers_[r]->target = *h;
    return "";
  };
  for (int r = 0; r < o_.child; ++r)
    if (auto e = meet(r); !e.empty())
      return fail(e);
  std::printf("dialed\n");
  std::fflush(stdout);
  if (std::fgets(line, sizeof(line), stdin) == nullptr || std::string(line) != "go\n")
    return fail("no go from the parent");
  for (int r = o_.child + 1; r < o_.procs; ++r)
    if (auto e = meet(r); !e.empty())
      return fail(e);
  std::printf("ready\n");
  std::fflush(stdout);
  std::thread churn([this] { churner(); });
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(o_.threads));
  for (int t = 0; t < o_.threads; ++t)
    workers.emplace_back([this, t] { worker(t); });
  for (auto& w : workers)
    w.join();
  stop_ = true;
  churn.join();
  auto stats = me.stats();
  std::lock_guard<std::mutex> g(c_.mu);
  std::ostringstream out;
  out << "done ops " << c_.ops << " bytes " << c_.bytes << " reads_checked " << c_.reads_checked
      << " batches " << c_.batches << " churn " << c_.churn << " released_tries "
      << c_.released_tries << " released_refused " << c_.released_refused << " revoke_failures "
      << c_.revoke_failures << " corrupt " << c_.corrupt << " unexpected " << c_.unexpected
      << " path " << (stats.ok() && stats->rdma_ops > 0 ? "rdma" : "fallback") << " same_host_ops "
      << (stats.ok() ? stats->same_host_ops : 0) << " errors";
  for (const auto& [code, k] : c_.errors)
    out << " " << code << "=" << k;
  out << " named_dead";
  for (const auto& [rank, yes] : c_.named_dead)
    out << " " << rank;
  out << " dead_codes";
  for (const auto& [rank, codes] : c_.dead_codes)
    for (const auto& [code, k] : codes)
      out << " " << rank << ":" << code << "=" << k;
  std::printf("%s\n", out.str().c_str());
  std::fflush(stdout);
  // Stay up (peers may still read our memory) until the parent says everyone is done.
  (void)std::fgets(line, sizeof(line), stdin);
  return c_.corrupt == 0 && c_.unexpected == 0 && c_.revoke_failures == 0 ? 0 : 1;
}

int child_main(const Options& o) {
  NodeOptions no;
  no.host = o.bind;
  no.port = 0;
  auto mo = ManagerOptions::from_env();
  if (!mo.ok()) {
    std::fprintf(stderr, "rdma_stress[%d]: %s\n", o.child, mo.error().to_string().c_str());
    return 2;
  }
  no.manager = *mo;
  auto node = RdmaNode::start(no);
  if (!node.ok()) {
    std::fprintf(stderr, "rdma_stress[%d]: %s\n", o.child, node.error().to_string().c_str());
    return 2;
  }
  int rc = Child(o, std::move(*node)).run();
  std::fflush(stdout);
  std::_Exit(rc);  // peers may be dead: skip the actor system's orderly goodbyes
}

// -- parent ----------------------------------------------------------------------------------

/// The address process r listens on (and the host it runs on).
std::string host_of(const Options& o, int r) {
  return o.hosts.empty() ? "127.0.0.1" : o.hosts[r % o.hosts.size()];
}

uint64_t field(const std::string& line, const std::string& key) {
  std::istringstream in(line);
  for (std::string w; in >> w;)
    if (w == key && in >> w)
      return std::strtoull(w.c_str(), nullptr, 10);
  return 0;
}

int parent_main(const Options& o) {
  ::signal(SIGPIPE, SIG_IGN);
  std::vector<ChildProcess> kids;
  for (int r = 0; r < o.procs; ++r) {
    std::vector<std::string> env;
    if (o.verify)
      env.push_back("CAF_RDMA_VERIFY=1");
    if (!o.devices.empty())
      env.push_back("CAF_RDMA_DEVICE=" + o.devices[r % o.devices.size()]);
    const bool remote = !o.hosts.empty() && r % o.hosts.size() != 0;
    std::vector<std::string> args{
        self_executable(),         "--child",    std::to_string(r),          "--procs",
        std::to_string(o.procs),   "--threads",  std::to_string(o.threads),  "--seconds",
        std::to_string(o.seconds), "--max-size", std::to_string(o.max_size), "--seed",
        std::to_string(o.seed),    "--read-pct", std::to_string(o.read_pct)};
    if (o.fixed_size)
      args.push_back("--fixed-size");
    args.insert(args.end(), {"--bind", host_of(o, r)});
    if (remote) {  // CMD HOST env VAR=... ARGS: the environment travels as arguments
      std::vector<std::string> via = o.remote;
      via.push_back(host_of(o, r));
      via.emplace_back("env");
      via.insert(via.end(), env.begin(), env.end());
      args.insert(args.begin(), via.begin(), via.end());
      env.clear();
    }
    auto c = ChildProcess::start(args, env);
    if (!c.ok())
      return std::fprintf(stderr, "rdma_stress: %s\n", c.error().to_string().c_str()), 2;
    kids.push_back(std::move(*c));
  }
  std::string peers = "peers";
  std::vector<std::string> names;
  for (auto& k : kids) {
    auto l = k.read_line(120s);
    if (!l.ok() || l->rfind("port ", 0) != 0)
      return std::fprintf(stderr, "rdma_stress: %s did not report its port: %s\n", k.name().c_str(),
                          l.ok() ? l->c_str() : l.error().to_string().c_str()),
             2;
    names.push_back(host_of(o, static_cast<int>(names.size())) + ":" + l->substr(5));
    peers += " " + names.back();
  }
  for (auto& k : kids)
    if (Status st = k.write_line(peers); !st.ok())
      return std::fprintf(stderr, "rdma_stress: %s\n", st.error().to_string().c_str()), 2;
  // Each dials the lower ranks, then, once all have, the higher ones (see Child::run).
  for (auto& k : kids) {
    auto l = k.read_line(300s);
    if (!l.ok() || *l != "dialed")
      return std::fprintf(stderr, "rdma_stress: %s did not reach the lower ranks: %s\n",
                          k.name().c_str(), l.ok() ? l->c_str() : l.error().to_string().c_str()),
             2;
  }
  for (auto& k : kids)
    if (Status st = k.write_line("go"); !st.ok())
      return std::fprintf(stderr, "rdma_stress: %s\n", st.error().to_string().c_str()), 2;
  for (auto& k : kids) {
    auto l = k.read_line(300s);
    if (!l.ok() || *l != "ready")
      return std::fprintf(stderr, "rdma_stress: %s did not get ready: %s\n", k.name().c_str(),
                          l.ok() ? l->c_str() : l.error().to_string().c_str()),
             2;
  }
  auto t0 = Clock::now();
  std::mt19937_64 rng(o.seed ^ 0x5EED);
  int victim = -1;
  if (o.kill) {
    victim = static_cast<int>(rng() % o.procs);
    double at = o.seconds * (0.3 + 0.3 * std::uniform_real_distribution<double>(0, 1)(rng));
    std::this_thread::sleep_until(t0 + std::chrono::duration<double>(at));  // the test's clock
    kids[victim].kill(SIGKILL);
    std::printf("rdma_stress: killed rank %d (%s) after %.1f s\n", victim, names[victim].c_str(),
                at);
    std::fflush(stdout);
  }
  auto limit = std::chrono::duration<double>(o.seconds) + 600s;
  std::vector<std::string> reports(o.procs);
  bool ok = true;
  for (int r = 0; r < o.procs; ++r) {
    if (r == victim)
      continue;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t0 + limit - Clock::now());
    auto l = kids[r].read_line(std::max(left, std::chrono::milliseconds(1)));
    if (!l.ok() || l->rfind("done ", 0) != 0) {
      std::fprintf(stderr, "rdma_stress: rank %d did not finish: %s\n", r,
                   l.ok() ? l->c_str() : l.error().to_string().c_str());
      ok = false;
      continue;
    }
    reports[r] = *l;
  }
  for (int r = 0; r < o.procs; ++r)
    if (r != victim)
      (void)kids[r].write_line("exit");
  uint64_t ops = 0, bytes = 0, corrupt = 0, unexpected = 0, refused = 0, tries = 0, revoke = 0,
           checked = 0;
  for (int r = 0; r < o.procs; ++r) {
    if (r == victim || reports[r].empty())
      continue;
    const std::string& s = reports[r];
    std::printf("rank %d: %s\n", r, s.c_str() + 5);
    ops += field(s, "ops");
    bytes += field(s, "bytes");
    checked += field(s, "reads_checked");
    corrupt += field(s, "corrupt");
    unexpected += field(s, "unexpected");
    refused += field(s, "released_refused");
    tries += field(s, "released_tries");
    revoke += field(s, "revoke_failures");
    {
      // A survivor names the victim as unavailable, and no other rank: a peer_unavailable
      // naming a live rank (e.g. instead of refusing a released handle) is a failure.
      auto pos = s.find(" named_dead");
      std::string named = s.substr(pos, s.find(" dead_codes") - pos);
      std::istringstream in(named.substr(11));
      bool found = false;
      for (int x; in >> x;) {
        found = found || x == victim;
        if (x != victim) {
          std::fprintf(stderr, "rdma_stress: rank %d reported rank %d unavailable, which lives\n",
                       r, x);
          ok = false;
        }
      }
      if (victim >= 0 && !found) {
        std::fprintf(stderr, "rdma_stress: rank %d never reported peer_unavailable naming %s\n", r,
                     names[victim].c_str());
        ok = false;
      }
    }
  }
  for (int r = 0; r < o.procs; ++r) {
    if (r == victim)
      continue;
    auto code = kids[r].wait_for(60s);
    if (!code || *code != 0) {
      std::fprintf(stderr, "rdma_stress: rank %d exited with %s\n", r,
                   code ? std::to_string(*code).c_str() : "nothing (still running)");
      ok = false;
    }
  }
  ok = ok && corrupt == 0 && unexpected == 0 && revoke == 0;
  std::printf(
      "rdma_stress: %d processes x %d threads, %.0f s: ops %llu bytes %llu "
      "reads_checked %llu released_writes %llu refused %llu revoke_failures %llu "
      "unexpected %llu corrupt %llu%s => %s\n",
      o.procs, o.threads, std::chrono::duration<double>(Clock::now() - t0).count(),
      static_cast<unsigned long long>(ops), static_cast<unsigned long long>(bytes),
      static_cast<unsigned long long>(checked), static_cast<unsigned long long>(tries),
      static_cast<unsigned long long>(refused), static_cast<unsigned long long>(revoke),
      static_cast<unsigned long long>(unexpected), static_cast<unsigned long long>(corrupt),
      victim >= 0 ? (", killed rank " + std::to_string(victim)).c_str() : "", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = Flags::parse(argc, argv,
                            {"--procs", "--threads", "--seconds", "--max-size", "--seed", "--child",
                             "--read-pct", "--devices", "--hosts", "--remote", "--bind"},
                            {"--kill", "--no-verify", "--fixed-size", "--help", "-h"});
  if (!flags.ok()) {
    std::fprintf(stderr, "rdma_stress: %s\n%s", flags.error().message().c_str(), kUsage);
    return 2;
  }
  if (flags->has("--help") || flags->has("-h")) {
    std::printf("%s", kUsage);
    return 0;
  }
  Options o;
  auto num = [&](const char* name, uint64_t fallback) -> uint64_t {
    auto v = flags->get_u64(name, fallback);
    if (!v.ok()) {
      std::fprintf(stderr, "rdma_stress: %s\n", v.error().message().c_str());
      std::exit(2);  // NOLINT(concurrency-mt-unsafe): flag parsing, no other thread yet
    }
    return *v;
  };
  o.procs = static_cast<int>(num("--procs", 8));
  o.threads = static_cast<int>(num("--threads", 2));
  o.seconds = std::stod(flags->get("--seconds", "60"));
  o.max_size = num("--max-size", 4 << 20);
  o.seed = num("--seed", 0);
  o.child = flags->has("--child") ? static_cast<int>(num("--child", 0)) : -1;
  o.kill = flags->has("--kill");
  o.verify = !flags->has("--no-verify");
  o.read_pct = static_cast<int>(num("--read-pct", 40));
  o.fixed_size = flags->has("--fixed-size");
  auto split = [](const std::string& text, char by) {
    std::vector<std::string> parts;
    std::istringstream in(text);
    for (std::string d; std::getline(in, d, by);)
      if (!d.empty())
        parts.push_back(d);
    return parts;
  };
  o.devices = split(flags->get("--devices", ""), ',');
  o.hosts = split(flags->get("--hosts", ""), ',');
  o.remote = split(flags->get("--remote", ""), ' ');
  o.bind = flags->get("--bind", o.bind);
  if (o.hosts.size() > 1 && o.remote.empty()) {
    std::fprintf(stderr, "rdma_stress: --hosts with more than one host needs --remote\n%s", kUsage);
    return 2;
  }
  if (o.procs < 2 || o.procs > 64 || o.threads < 1 || o.threads > 16 || o.max_size < 3 ||
      o.seconds <= 0 || o.read_pct > 100) {
    std::fprintf(stderr,
                 "rdma_stress: need 2 <= --procs <= 64, 1 <= --threads <= 16, "
                 "--max-size >= 3, --seconds > 0, --read-pct <= 100\n%s",
                 kUsage);
    return 2;
  }
  if (o.seed == 0)
    o.seed = static_cast<uint64_t>(Clock::now().time_since_epoch().count()) | 1;
  if (o.child < 0)
    std::printf("rdma_stress: seed %llu\n", static_cast<unsigned long long>(o.seed));
  return o.child >= 0 ? child_main(o) : parent_main(o);
}
