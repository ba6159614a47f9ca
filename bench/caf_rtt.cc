// caf_rtt: the floor for anything that sends a CAF message to another node: an 8-byte
// request/response between two actor systems in two processes over CAF's own middleman
// (io::middleman, the binary protocol over TCP loopback), with no caf-rdma code on the path.
// caf-rdma's fallback sends at least one such request and its reply per transfer.
//
// Invariants:
//   1. Two processes: the child (this program with --serve) publishes an echo actor on port 0
//      of 127.0.0.1 and prints the port it got; the parent connects with remote_actor.
//   2. Two figures: "caf-rtt" from an event-based actor that sends the next request from the
//      previous reply's handler (how actors talk, and how rdma_bench's fallback-async is
//      measured), and "caf-rtt-blocking" from a scoped_actor in main() (as RdmaClient does).
//      Both after one second of quiet, as rdma_bench: CAF's idle work-stealing workers poll for
//      a while after a burst of messages, then sleep.
//   3. Every wait is bounded: requests by their 10 s timeout, the child's lines and exit by
//      ChildProcess's timeouts, the child's wait for the parent's "quit" by poll (600 s).
//   4. "csw" lines: voluntary context switches per round trip of this process (all its
//      threads) and of the child (asked before and after each loop, so only that loop counts).
//
//   caf_rtt [--iters N] [--scheduler stealing|sharing]
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "bench/bench_output.h"
#include "support/child_process.h"
#include "support/flags.h"

using namespace caf_rdma;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kUsage =
    "usage: caf_rtt [--iters N] [--scheduler stealing|sharing]\n"
    "  8-byte CAF request/response between two actor systems in two processes over CAF's\n"
    "  middleman (TCP loopback); prints 'lat caf-rtt rtt 8 MEDIAN_US P99_US' (from an\n"
    "  event-based actor), 'lat caf-rtt-blocking ...' (from a scoped_actor) and 'csw' lines.\n"
    "  Default: 1000 round trips (+100 warm-up), CAF's default scheduler (work stealing).\n";
constexpr uint32_t kWarmup = 100;

using rtt_atom = caf::atom_constant<caf::atom("rtt")>;
using csw_atom = caf::atom_constant<caf::atom("csw")>;

/// The child's actor: echoes a number; tells its process's voluntary context switches.
using echo_actor = caf::typed_actor<caf::replies_to<rtt_atom, uint64_t>::with<uint64_t>,
                                    caf::replies_to<csw_atom>::with<uint64_t>>;

echo_actor::behavior_type echo() {
  return {[](rtt_atom, uint64_t x) { return x; },
          [](csw_atom) { return bench::voluntary_switches(); }};
}

struct Config : caf::actor_system_config {
  explicit Config(const std::string& scheduler) {
    load<caf::io::middleman>();
    set("scheduler.policy", caf::atom_from_string(scheduler));
  }
};

/// The child: publishes the echo actor, prints its port, and runs until "quit" (or EOF) on
/// stdin.
int serve(const std::string& scheduler) {
  Config cfg(scheduler);
  caf::actor_system sys{cfg};
  auto actor = sys.spawn(echo);
  auto port = sys.middleman().publish(actor, 0, "127.0.0.1");
  if (!port) {
    std::fprintf(stderr, "caf_rtt --serve: publish: %s\n", sys.render(port.error()).c_str());
    caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
    return 1;
  }
  std::printf("port %u\n", static_cast<unsigned>(*port));
  std::fflush(stdout);
  pollfd in{STDIN_FILENO, POLLIN, 0};
  int ready = ::poll(&in, 1, 600 * 1000);  // "quit" or EOF; bounded
  caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
  return ready == 1 ? 0 : (std::fprintf(stderr, "caf_rtt --serve: no quit in 600 s\n"), 1);
}

/// The child's switch count (nullopt if it does not answer).
std::optional<uint64_t> peer_switches(caf::scoped_actor& self, const echo_actor& peer) {
  std::optional<uint64_t> out;
  self->request(peer, std::chrono::seconds(10), csw_atom::value)
      .receive([&](uint64_t n) { out = n; }, [](caf::error&) {});
  return out;
}

/// Round trips from an event-based actor, each request sent from the previous reply's handler;
/// empty on error (printed).
std::vector<double> from_actor(caf::actor_system& sys, const echo_actor& peer, uint32_t iters) {
  struct Run {
    std::vector<double> us;
    std::promise<bool> finished;
  };
  auto run = std::make_shared<Run>();
  run->us.reserve(iters);
  auto finished = run->finished.get_future();
  sys.spawn([run, peer, iters](caf::event_based_actor* self) {
    auto next = std::make_shared<std::function<void(uint32_t)>>();
    std::weak_ptr<std::function<void(uint32_t)>> weak = next;
    *next = [self, run, peer, iters, weak](uint32_t i) {
      if (i == iters + kWarmup) {
        self->quit();
        run->finished.set_value(true);
        return;
      }
      auto again = weak.lock();
      auto t0 = Clock::now();
      self->request(peer, std::chrono::seconds(10), rtt_atom::value, uint64_t{i})
          .then(
              [run, again, i, t0](uint64_t) {
                if (i >= kWarmup)
                  run->us.push_back(
                      std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
                (*again)(i + 1);
              },
              [self, run](caf::error& e) {
                std::fprintf(stderr, "caf_rtt: from an actor: %s\n",
                             self->system().render(e).c_str());
                self->quit();
                run->finished.set_value(false);
              });
    };
    (*next)(0);
  });
  if (finished.wait_for(std::chrono::seconds(600)) != std::future_status::ready) {
    std::fprintf(stderr, "caf_rtt: from an actor: no result in 600 s\n");
    return {};
  }
  return finished.get() ? run->us : std::vector<double>{};
}

/// Round trips from a scoped_actor (a blocking thread); empty on error (printed).
std::vector<double> blocking(caf::scoped_actor& self, const echo_actor& peer, uint32_t iters) {
  std::vector<double> us;
  us.reserve(iters);
  for (uint32_t i = 0; i < iters + kWarmup; ++i) {
    bool ok = false;
    auto t0 = Clock::now();
    self->request(peer, std::chrono::seconds(10), rtt_atom::value, uint64_t{i})
        .receive([&](uint64_t x) { ok = x == i; },
                 [&](caf::error& e) {
                   std::fprintf(stderr, "caf_rtt: blocking: %s\n",
                                self->system().render(e).c_str());
                 });
    auto dt = Clock::now() - t0;
    if (!ok)
      return {};
    if (i >= kWarmup)
      us.push_back(std::chrono::duration<double, std::micro>(dt).count());
  }
  return us;
}

int measure(uint32_t iters, const std::string& scheduler) {
  auto child = ChildProcess::start({self_executable(), "--serve", "--scheduler", scheduler});
  if (!child.ok())
    return std::fprintf(stderr, "caf_rtt: %s\n", child.error().to_string().c_str()), 1;
  auto line = child->read_line(std::chrono::seconds(60));
  unsigned port = 0;
  if (!line.ok() || std::sscanf(line->c_str(), "port %u", &port) != 1)
    return std::fprintf(stderr, "caf_rtt: the child did not report its port: %s\n",
                        line.ok() ? line->c_str() : line.error().to_string().c_str()),
           1;
  int rc = 0;
  {
    Config cfg(scheduler);
    caf::actor_system sys{cfg};
    auto peer = sys.middleman().remote_actor<echo_actor>("127.0.0.1", static_cast<uint16_t>(port));
    if (!peer)
      return std::fprintf(stderr, "caf_rtt: remote_actor 127.0.0.1:%u: %s\n", port,
                          sys.render(peer.error()).c_str()),
             1;
    caf::scoped_actor self{sys};
    for (const char* path : {"caf-rtt", "caf-rtt-blocking"}) {
      std::this_thread::sleep_for(std::chrono::seconds(1));  // steady state (invariant 2)
      auto peer_before = peer_switches(self, *peer);
      uint64_t before = bench::voluntary_switches();
      auto us = std::string(path) == "caf-rtt" ? from_actor(sys, *peer, iters)
                                               : blocking(self, *peer, iters);
      uint64_t self_switches = bench::voluntary_switches() - before;
      auto peer_after = peer_switches(self, *peer);
      if (us.empty()) {
        rc = 1;
        break;
      }
      bench::print_latency(path, "rtt", us);
      // Both counts span the warm-up's round trips too.
      std::optional<double> peer_per_op;
      if (peer_before && peer_after)
        peer_per_op = bench::per_op(*peer_after - *peer_before, iters + kWarmup);
      bench::print_switches(path, "rtt", bench::per_op(self_switches, iters + kWarmup),
                            peer_per_op);
    }
  }
  (void)child->write_line("quit");
  auto code = child->wait_for(std::chrono::seconds(60));
  if (!code || *code != 0)
    return std::fprintf(stderr, "caf_rtt: the child failed (exit %d)\n", code ? *code : -1), 1;
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = Flags::parse(argc, argv, {"--iters", "--scheduler"}, {"--serve", "--help", "-h"});
  if (!flags.ok())
    return std::fprintf(stderr, "caf_rtt: %s\n%s", flags.error().message().c_str(), kUsage), 2;
  if (flags->has("--help") || flags->has("-h"))
    return std::printf("%s", kUsage), 0;
  std::string scheduler = flags->get("--scheduler", "stealing");
  if (scheduler != "stealing" && scheduler != "sharing")
    return std::fprintf(stderr, "caf_rtt: bad --scheduler '%s'\n%s", scheduler.c_str(), kUsage), 2;
  if (flags->has("--serve"))
    return serve(scheduler);
  auto iters = flags->get_u64("--iters", 1000);
  if (!iters.ok() || *iters == 0 || *iters > 10000000)
    return std::fprintf(stderr, "caf_rtt: bad --iters\n%s", kUsage), 2;
  return measure(static_cast<uint32_t>(*iters), scheduler);
}
