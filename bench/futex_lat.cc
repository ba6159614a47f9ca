// futex_lat: the latency floor of a blocking hand-off between two processes of one host: an
// 8-byte ping-pong over shared memory (a memfd page mapped by both) where each side sleeps in
// FUTEX_WAIT until the other has written its message and woken it with FUTEX_WAKE. No spinning:
// this is what waking a blocked peer costs, the least any path pays whose peer sleeps.
//
// Invariants:
//   1. Two processes, never threads: the child is this program exec'd with --serve FD (the
//      memfd, inherited); the page's `turn` word orders the messages: 2i+1 = the parent's i-th
//      message is in `payload`, 2i+2 = the child's reply is; kStop ends the child.
//   2. Every wait is bounded: FUTEX_WAIT with a timeout, re-checked against a 30 s deadline;
//      the child's lines and exit by ChildProcess's timeouts.
//   3. The "csw" line counts each process's voluntary context switches (the child's includes
//      its warm-up round trips; divided by those too).
//
//   futex_lat [--iters N]  -> "lat futex-lat rtt 8 <median_us> <p99_us>", "csw futex-lat rtt ..."
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_output.h"
#include "support/child_process.h"
#include "support/flags.h"

using namespace caf_rdma;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kUsage =
    "usage: futex_lat [--iters N]\n"
    "  8-byte ping-pong over shared memory between this process and a child process, each\n"
    "  side blocking in FUTEX_WAIT until woken; prints 'lat futex-lat rtt 8 MEDIAN_US P99_US'\n"
    "  and voluntary context switches per round trip ('csw futex-lat rtt SELF PEER').\n"
    "  Default: 1000 round trips (+100 warm-up).\n";
constexpr uint32_t kWarmup = 100;
constexpr uint32_t kStop = 0xffffffffu;
constexpr auto kWaitLimit = std::chrono::seconds(30);

/// The shared page.
struct Shared {
  std::atomic<uint32_t> turn{0};
  std::atomic<uint64_t> payload{0};
};
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex word is 32 bits");

uint32_t* futex_word(Shared* s) {
  // The futex syscall needs the word's address; std::atomic<uint32_t> is the plain word.
  return reinterpret_cast<uint32_t*>(&s->turn);
}

void wake(Shared* s) {
  ::syscall(SYS_futex, futex_word(s), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

/// Waits until `turn` is no longer `seen`; returns the new value, or nullopt after kWaitLimit.
std::optional<uint32_t> wait_change(Shared* s, uint32_t seen) {
  auto deadline = Clock::now() + kWaitLimit;
  for (;;) {
    uint32_t now = s->turn.load(std::memory_order_acquire);
    if (now != seen)
      return now;
    if (Clock::now() >= deadline)
      return std::nullopt;
    timespec limit{1, 0};  // FUTEX_WAIT returns at once if the word changed meanwhile
    ::syscall(SYS_futex, futex_word(s), FUTEX_WAIT, seen, &limit, nullptr, 0);
  }
}

Shared* map_shared(int fd) {
  void* p = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<Shared*>(p);
}

/// The child: answers each message with its payload + 1 until kStop.
int serve(int fd) {
  Shared* s = map_shared(fd);
  if (s == nullptr)
    return std::fprintf(stderr, "futex_lat --serve: mmap: %s\n", errno_string(errno).c_str()), 1;
  uint64_t before = bench::voluntary_switches();
  uint32_t seen = 0;
  for (;;) {
    auto turn = wait_change(s, seen);
    if (!turn)
      return std::fprintf(stderr, "futex_lat --serve: no message in 30 s\n"), 1;
    if (*turn == kStop)
      break;
    s->payload.store(s->payload.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    seen = *turn + 1;
    s->turn.store(seen, std::memory_order_release);
    wake(s);
  }
  std::printf("csw %llu\n", static_cast<unsigned long long>(bench::voluntary_switches() - before));
  std::fflush(stdout);
  return 0;
}

int measure(uint32_t iters) {
  int fd = ::memfd_create("futex_lat", 0);  // no CLOEXEC: the child inherits it
  if (fd < 0 || ::ftruncate(fd, sizeof(Shared)) != 0)
    return std::fprintf(stderr, "futex_lat: memfd: %s\n", errno_string(errno).c_str()), 1;
  Shared* s = map_shared(fd);
  if (s == nullptr)
    return std::fprintf(stderr, "futex_lat: mmap: %s\n", errno_string(errno).c_str()), 1;
  new (s) Shared();
  auto child = ChildProcess::start({self_executable(), "--serve", std::to_string(fd)});
  if (!child.ok())
    return std::fprintf(stderr, "futex_lat: %s\n", child.error().to_string().c_str()), 1;
  std::vector<double> us;
  us.reserve(iters);
  uint64_t before = 0;
  for (uint32_t i = 0; i < iters + kWarmup; ++i) {
    if (i == kWarmup)
      before = bench::voluntary_switches();
    auto t0 = Clock::now();
    s->payload.store(i, std::memory_order_relaxed);
    s->turn.store(2 * i + 1, std::memory_order_release);
    wake(s);
    auto turn = wait_change(s, 2 * i + 1);
    auto dt = Clock::now() - t0;
    if (!turn || *turn != 2 * i + 2 || s->payload.load(std::memory_order_relaxed) != i + 1ull)
      return std::fprintf(stderr, "futex_lat: round trip %u: %s\n", i,
                          turn ? "wrong reply" : "no reply in 30 s"),
             1;
    if (i >= kWarmup)
      us.push_back(std::chrono::duration<double, std::micro>(dt).count());
  }
  uint64_t self = bench::voluntary_switches() - before;
  s->turn.store(kStop, std::memory_order_release);
  wake(s);
  auto report = child->read_line(kWaitLimit);
  unsigned long long peer = 0;
  bool have_peer = report.ok() && std::sscanf(report->c_str(), "csw %llu", &peer) == 1;
  auto rc = child->wait_for(kWaitLimit);
  if (!rc || *rc != 0)
    return std::fprintf(stderr, "futex_lat: the child failed (exit %d)\n", rc ? *rc : -1), 1;
  bench::print_latency("futex-lat", "rtt", us);
  bench::print_switches(
      "futex-lat", "rtt", bench::per_op(self, iters),
      have_peer ? std::optional<double>(bench::per_op(peer, iters + kWarmup)) : std::nullopt);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = Flags::parse(argc, argv, {"--iters", "--serve"}, {"--help", "-h"});
  if (!flags.ok())
    return std::fprintf(stderr, "futex_lat: %s\n%s", flags.error().message().c_str(), kUsage), 2;
  if (flags->has("--help") || flags->has("-h"))
    return std::printf("%s", kUsage), 0;
  if (flags->has("--serve")) {
    auto fd = flags->get_u64("--serve", 0);
    return fd.ok() ? serve(static_cast<int>(*fd)) : 2;
  }
  auto iters = flags->get_u64("--iters", 1000);
  if (!iters.ok() || *iters == 0 || *iters > 10000000)
    return std::fprintf(stderr, "futex_lat: bad --iters\n%s", kUsage), 2;
  return measure(static_cast<uint32_t>(*iters));
}
