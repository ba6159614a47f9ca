// rdma_bench: bandwidth and latency of caf-rdma's three paths, plus the references they are
// compared with (bench/run_bench.sh runs perftest in the same VM boot).
//
// Paths:
//   components  RdmaQueuePair directly: ops submitted asynchronously, completions polled here
//   actor       every op a request to RdmaManagerActor (two nodes, handles over TCP loopback);
//               RdmaClient with direct lanes off, as an actor sees the manager
//   actor-busy  actor with busy polling on the requester's node (ManagerOptions::busy_poll,
//               --busy-poll-us, default 1000): no thread sleeps between request and reply
//   direct      RdmaClient's default: one request opens a direct lane (a queue pair of the
//               client's own to the owner, connected by the managers), then the calling thread
//               posts and polls with no message per op
//   fallback    the manager's requests with CAF_RDMA_TRANSPORT=fallback (bytes over the stream
//               channel, or in CAF messages under CAF_RDMA_STREAM_MIN)
//   fallback-lane  RdmaClient's stream lane on the same nodes: straight to the owner's stream
//               channel, authorized by the handle (actors/stream_lane.h)
//   same-host   fallback-lane with the owner's same-host endpoint (docs/architecture.md, "Same-host
//   transfers"):
//               the lane's 8-byte ops in-band over AF_UNIX, and the bandwidth sizes (batches,
//               through the managers' stream path) by cross-memory attach. The other fallback
//               paths run with ManagerOptions::same_host off, so they stay TCP's figures.
//   tcp         a raw TCP stream over loopback (the fallback's reference)
// Output: one line per figure, machine-readable:
//   bw <path> <write|read> <bytes> <MB/s>
//   lat <path> <read|write> 8 <median_us> <p99_us>
//   csw <path> <read|write> <per_op> -  voluntary context switches per 8-byte op of this process
//                                       (all threads: both nodes live here, the peer too)
//   reg <bytes> first_us <x> cached_us <y>
//   registered_bytes <path> <n>          (after all iterations: bounded, not growing)
//   peak_rss_kb <n>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "actors/rdma_client.h"
#include "actors/rdma_errors.h"
#include "actors/rdma_node.h"
#include "bench/bench_output.h"
#include "bench/cancel_latency.h"
#include "bench/kv_handoff.h"
#include "bench/latency_under_load.h"
#include "components/rdma_domain.h"
#include "components/rdma_queue_pair.h"
#include "primitives/cuda_driver.h"
#include "support/flags.h"

using namespace caf_rdma;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kUsage =
    "usage: rdma_bench [--paths "
    "components,actor,actor-busy,direct,fallback,fallback-lane,same-host,fallback-tls,tcp,\n"
    "                  kv-handoff,cancel,load]\n"
    "                  [--sizes 4K,64K,1M] [--bytes-per-size BYTES] [--lat-iters N]\n"
    "                  [--peer-device NAME] [--scheduler-threads N] [--lat-only]\n"
    "                  [--tls CERT,KEY,CAFILE] [--memory host|allocated|gpu]\n"
    "                  [--busy-poll-us US] [--kv-pool BYTES] [--long]\n"
    "                  [--kv-transports same-host,stream,chunks,rdma,rdma-manager]\n"
    "                  [--cancel-bytes BYTES] [--cancel-transports same-host,stream,rdma]\n"
    "                  [--load-bytes BYTES] [--load-reads N] [--load-transports "
    "same-host,stream,rdma,rdma-manager]\n"
    "  Bandwidth (RDMA WRITE and READ) per message size and 8-byte latency (median, p99) for\n"
    "  each path; registration cache timing; peak RSS. The local side uses CAF_RDMA_DEVICE\n"
    "  (default: first active device), the remote side --peer-device (default: the same).\n"
    "  Defaults: all paths, sizes 4K..64M by powers of 4, 256 MiB per size, 1000 latency iters,\n"
    "  CAF's default number of scheduler threads per node. --lat-only: only the latency figures\n"
    "  (run_bench.sh alternates such rounds with ib_read_lat to pair the ratios in time).\n"
    "  actor-busy: the actor path with busy polling on the requester's node\n"
    "  (CAF_RDMA_BUSY_POLL_US's option, window --busy-poll-us, default 1000).\n"
    "  fallback-tls: the fallback path between nodes speaking mutual TLS with --tls's files\n"
    "  (what TLS costs; not in the default paths).\n"
    "  striping: write and read bandwidth through the manager between nodes on one device each,\n"
    "  then on --devices A,B and --peer-devices C,D (rails: actors/manager/rails.h), and the\n"
    "  ratio 'striping 2 devices / 1 device', same run, with --stripe-qps N queue pairs per\n"
    "  pair of devices (default 1), and the machine's busy CPU fraction (not in the default\n"
    "  paths).\n"
    "  kv-handoff: a paged pool (--kv-pool, default 64M) pulled and pushed as transfer lists of\n"
    "  4, 16 and 64 KiB blocks, 1 and 8 (--long: and 64) lists at once, prepared once or per\n"
    "  post, on each transport this host has, each against the whole pool in one transfer in\n"
    "  the same run (bench/kv_handoff.h; not in the default paths).\n"
    "  cancel: reads and writes of --cancel-bytes (default 256M) cancelled at random points, 20\n"
    "  each (--long: 50), on each transport of --cancel-transports this host has: the cancel's\n"
    "  latency beside the whole transfer's time, same run, every outcome checked; rdma-manager\n"
    "  too (the async calls with a token) (bench/cancel_latency.h; not in the default paths).\n"
    "  load: 8-byte reads idle and while another thread pulls --load-bytes (default 1G) over\n"
    "  and over, on each transport of --load-transports this host has: p50/p99 of both and\n"
    "  their ratio; rdma-manager too (both through the manager: read_async); --load-reads\n"
    "  small reads a round (default 1000)\n"
    "  (bench/latency_under_load.h; not in the default paths).\n"
    "  --memory: the buffers of the paths through managers: host (default), std::vector memory\n"
    "  of the program registered with register_buffer; allocated, memory the library allocates\n"
    "  (RdmaClient::allocate_buffer: huge pages from 2 MiB); gpu, below.\n"
    "  --memory gpu (a build with --config=cuda, on a host with a GPU): cudaMemcpy's copies\n"
    "  (GPU<->host pageable and page-locked, within the GPU) at each size, then GPU->GPU,\n"
    "  host->GPU and GPU->host writes and reads through two managers on each of --paths\n"
    "  (actor, direct, fallback; default: fallback), every size's bytes checked, and each\n"
    "  one's ratio to the cudaMemcpy copies its bytes need at the least.\n";

struct Options {
  std::vector<std::string> paths{"components", "actor", "direct", "fallback", "tcp"};
  std::vector<uint64_t> sizes{4 << 10, 16 << 10, 64 << 10, 256 << 10,
                              1 << 20, 4 << 20,  16 << 20, 64 << 20};
  uint64_t bytes_per_size = 256ull << 20;
  uint32_t lat_iters = 1000;
  std::string peer_device;
  size_t scheduler_threads = 0;
  bool lat_only = false;
  TlsCredentials tls;  // --tls, for the fallback-tls path
  // --devices, --peer-devices: the striping path's devices (the first of each is the primary);
  // --stripe-qps: its queue pairs per pair of devices.
  std::vector<std::string> devices, peer_devices;
  uint32_t stripe_qps = 1;
  std::chrono::microseconds busy_poll{1000};  // the actor-busy path's window
  bool allocated = false;                     // --memory allocated: RdmaClient::allocate_buffer
};

double mbps(uint64_t bytes, Clock::duration d) {
  return double(bytes) / 1e6 / std::chrono::duration<double>(d).count();
}

uint64_t iterations(const Options& o, uint64_t size) {
  return std::max<uint64_t>(4, o.bytes_per_size / size);
}

// -- components --------------------------------------------------------------------------------

int bench_components(const Options& o) {
  auto config = IbverbsConfig::from_env();
  if (!config.ok())
    return std::fprintf(stderr, "%s\n", config.error().to_string().c_str()), 1;
  auto local = RdmaDomain::open(*config);
  IbverbsConfig peer_config = *config;
  if (!o.peer_device.empty())
    peer_config.device_name = o.peer_device;
  auto peer = RdmaDomain::open(peer_config);
  if (!local.ok() || !peer.ok())
    return std::fprintf(stderr, "components: %s\n",
                        (!local.ok() ? local.error() : peer.error()).to_string().c_str()),
           1;
  auto a = RdmaQueuePair::create(*local);
  auto b = RdmaQueuePair::create(*peer);
  if (!a.ok() || !b.ok() || !RdmaQueuePair::connect_pair(**a, **b).ok())
    return std::fprintf(stderr, "components: queue pair setup failed\n"), 1;
  uint64_t max_size = *std::max_element(o.sizes.begin(), o.sizes.end());
  std::vector<uint8_t> src(max_size, 1), dst(max_size, 0);
  auto hs = (*local)->register_buffer(src.data(), max_size);
  auto hd = (*peer)->register_buffer(dst.data(), max_size);
  if (!hs.ok() || !hd.ok())
    return std::fprintf(stderr, "components: registration failed\n"), 1;
  for (const char* op : {"write", "read"}) {
    for (uint64_t size : o.lat_only ? std::vector<uint64_t>{} : o.sizes) {
      uint64_t n = iterations(o, size);
      std::atomic<uint64_t> done{0}, failed{0};
      auto t0 = Clock::now();
      for (uint64_t i = 0; i < n; ++i) {
        RdmaOp rop = std::strcmp(op, "write") == 0 ? RdmaOp::write({*hs, 0, size}, hd->remote())
                                                   : RdmaOp::read({*hs, 0, size}, hd->remote());
        Status st = (*a)->submit(std::move(rop), [&](const OpResult& r) {
          if (!r.status.ok())
            ++failed;
          ++done;
        });
        if (!st.ok())
          return std::fprintf(stderr, "components: %s\n", st.error().to_string().c_str()), 1;
        // Keep completions flowing while submitting.
        if ((i & 15) == 15)
          (*a)->progress();
      }
      // Every wait has a limit: a stalled device is reported, not waited on forever.
      auto deadline = Clock::now() + std::chrono::seconds(120);
      while (done < n && Clock::now() < deadline)
        (*a)->progress();
      auto dt = Clock::now() - t0;
      if (done < n)
        return std::fprintf(stderr,
                            "components: %s of %llu bytes stalled: %llu of %llu ops completed "
                            "in 120 s (outstanding work requests: %zu)\n",
                            op, static_cast<unsigned long long>(size),
                            static_cast<unsigned long long>(done.load()),
                            static_cast<unsigned long long>(n), (*a)->outstanding_work_requests()),
               1;
      if (failed > 0)
        return std::fprintf(stderr, "components: %llu ops failed\n",
                            static_cast<unsigned long long>(failed.load())),
               1;
      std::printf("bw components %s %llu %.1f\n", op, static_cast<unsigned long long>(size),
                  mbps(n * size, dt));
      std::fflush(stdout);
    }
  }
  for (const char* op : {"read", "write"}) {
    std::vector<double> us;
    uint64_t switches = bench::voluntary_switches();
    for (uint32_t i = 0; i < o.lat_iters + 10; ++i) {
      RdmaOp rop = std::strcmp(op, "read") == 0 ? RdmaOp::read({*hs, 0, 8}, hd->remote())
                                                : RdmaOp::write({*hs, 0, 8}, hd->remote());
      auto t0 = Clock::now();
      OpResult r = (*a)->execute(std::move(rop), std::chrono::seconds(10));
      auto dt = Clock::now() - t0;
      if (!r.status.ok())
        return std::fprintf(stderr, "components: %s\n", r.status.error().to_string().c_str()), 1;
      if (i >= 10)
        us.push_back(std::chrono::duration<double, std::micro>(dt).count());
    }
    switches = bench::voluntary_switches() - switches;
    bench::print_latency("components", op, us);
    bench::print_switches("components", op, bench::per_op(switches, o.lat_iters + 10),
                          std::nullopt);
  }
  if (o.lat_only)
    return 0;
  // Registration: a first registration of fresh memory; a local-only registration served by
  // the cache (inside a live local region); and what every handle costs (a region of its own,
  // for revocation): register + deregister of 64 KiB inside the live region.
  std::vector<uint8_t> fresh(64 << 20, 3);
  auto t0 = Clock::now();
  auto first = (*local)->register_local(fresh.data(), fresh.size());
  auto t1 = Clock::now();
  if (!first.ok())
    return std::fprintf(stderr, "components: %s\n", first.error().to_string().c_str()), 1;
  double cached_us = 0;
  for (int i = 0; i < 1000; ++i) {
    auto c0 = Clock::now();
    auto again = (*local)->register_local(fresh.data() + size_t{4096} * (i % 100), 1 << 20);
    cached_us += std::chrono::duration<double, std::micro>(Clock::now() - c0).count();
    if (!again.ok() || again->region() != first->region())
      return std::fprintf(stderr, "components: cache miss on a covered range\n"), 1;
  }
  double handle_us = 0;
  constexpr int kHandleRounds = 200;
  for (int i = 0; i < kHandleRounds; ++i) {
    auto c0 = Clock::now();
    auto own = (*local)->register_buffer(fresh.data() + size_t{4096} * (i % 100), 64 << 10);
    if (!own.ok() || own->rkey() == first->rkey())
      return std::fprintf(stderr, "components: a handle's region must be its own\n"), 1;
    own->release();  // the last reference: ibv_dereg_mr
    handle_us += std::chrono::duration<double, std::micro>(Clock::now() - c0).count();
  }
  std::printf("reg %zu first_us %.1f cached_us %.3f handle_64k_us %.1f\n", fresh.size(),
              std::chrono::duration<double, std::micro>(t1 - t0).count(), cached_us / 1000,
              handle_us / kHandleRounds);
  std::printf("registered_bytes components %llu\n",
              static_cast<unsigned long long>((*local)->registration_stats().registered_bytes));
  std::fflush(stdout);
  return 0;
}

// -- actor and fallback ------------------------------------------------------------------------

/// 8-byte transfers issued one after the other by an event-based actor of the requester's
/// actor system (how actors use the manager: request, then the next on the reply), in us.
/// Empty on error (printed).
std::vector<double> latency_from_actor(caf::actor_system& sys, const rdma_manager_actor& manager,
                                       const TransferOp& op, uint32_t iters) {
  struct Run {
    std::vector<double> us;
    std::promise<bool> finished;
  };
  auto run = std::make_shared<Run>();
  auto finished = run->finished.get_future();
  sys.spawn([run, manager, op, iters](caf::event_based_actor* self) {
    // One request at a time; the reply handler issues the next one (and keeps the chain
    // alive: the function itself holds only a weak reference to itself).
    auto next = std::make_shared<std::function<void(uint32_t)>>();
    std::weak_ptr<std::function<void(uint32_t)>> weak = next;
    *next = [self, run, manager, op, iters, weak](uint32_t i) {
      if (i == iters + 10) {
        self->quit();
        run->finished.set_value(true);
        return;
      }
      auto again = weak.lock();
      auto t0 = Clock::now();
      self->request(manager, std::chrono::seconds(10), transfer_atom::value, op, uint32_t{10000})
          .then(
              [run, again, i, t0](TransferReply&) {
                if (i >= 10)  // warm-up excluded
                  run->us.push_back(
                      std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
                (*again)(i + 1);
              },
              [self, run](caf::error& e) {
                std::fprintf(stderr, "latency from an actor: %s\n", error_message(e).c_str());
                run->us.clear();
                self->quit();
                run->finished.set_value(false);
              });
    };
    (*next)(0);
  });
  if (finished.wait_for(std::chrono::seconds(600)) != std::future_status::ready) {
    std::fprintf(stderr, "latency from an actor: no result in 600 s\n");
    return {};
  }
  return finished.get() ? run->us : std::vector<double>{};
}

// `path`: "actor" (every op a request to the manager), "direct" (RdmaClient's direct lanes) or
// "fallback" (requests to managers in fallback mode).
int bench_manager(const Options& o, const std::string& path_name) {
  const char* path = path_name.c_str();
  bool tls = path_name == "fallback-tls";
  // fallback-lane: RdmaClient's stream lane (actors/stream_lane.h), on managers in fallback mode.
  bool same_host = path_name == "same-host";
  bool lane = path_name == "fallback-lane" || same_host;
  bool fallback = path_name == "fallback" || lane || tls;
  bool direct = path_name == "direct" || lane;
  bool busy = path_name == "actor-busy";
  if (tls && !o.tls.any())
    return std::fprintf(stderr, "fallback-tls: needs --tls CERT,KEY,CAFILE\n"), 1;
  auto base = ManagerOptions::from_env();
  if (!base.ok())
    return std::fprintf(stderr, "%s\n", base.error().to_string().c_str()), 1;
  uint64_t max_size = *std::max_element(o.sizes.begin(), o.sizes.end());
  // --memory host: the program's vectors, which outlive the nodes; allocated: below.
  std::vector<uint8_t> src(o.allocated ? 0 : max_size, 1), dst(o.allocated ? 0 : max_size, 0);
  NodeOptions user_opts, owner_opts;
  user_opts.manager = *base;
  owner_opts.manager = *base;
  user_opts.scheduler_threads = owner_opts.scheduler_threads = o.scheduler_threads;
  if (tls)
    user_opts.tls = owner_opts.tls = o.tls;
  if (!o.peer_device.empty())
    owner_opts.manager.ibverbs.device_name = o.peer_device;
  auto mode = fallback ? TransportMode::kFallback : TransportMode::kRdma;
  user_opts.manager.mode = owner_opts.manager.mode = mode;
  user_opts.manager.same_host = owner_opts.manager.same_host = same_host;
  if (busy)
    user_opts.manager.busy_poll = o.busy_poll;
  auto owner = RdmaNode::start(owner_opts);
  auto user = RdmaNode::start(user_opts);
  if (!owner.ok() || !user.ok())
    return std::fprintf(stderr, "%s: %s\n", path,
                        (!owner.ok() ? owner.error() : user.error()).to_string().c_str()),
           1;
  auto owner_proxy = (*user)->remote_manager("127.0.0.1", (*owner)->port());
  if (!owner_proxy.ok())
    return std::fprintf(stderr, "%s: %s\n", path, owner_proxy.error().to_string().c_str()), 1;
  RdmaClient owner_client((*owner)->system(), (*owner)->manager());
  RdmaClient remote((*user)->system(), *owner_proxy);
  RdmaClient me((*user)->system(), (*user)->manager(), direct);
  // --memory allocated: the library's memory, released (and freed) before the nodes stop.
  std::optional<RegisteredBuffer> allocated_dst, allocated_src;
  auto registered = [&](RdmaClient& client, std::vector<uint8_t>& mine, uint8_t fill,
                        std::optional<RegisteredBuffer>& keep) -> Result<BufferHandle> {
    if (!o.allocated)
      return client.request_buffer(mine.data(), max_size);
    auto b = client.allocate_buffer(max_size);
    if (!b.ok())
      return b.error();
    std::memset(b->data(), fill, max_size);
    keep.emplace(std::move(*b));
    return keep->handle();
  };
  auto hd = registered(owner_client, dst, 0, allocated_dst);
  if (!hd.ok() || !owner_client.put("dst", *hd).ok())
    return std::fprintf(stderr, "%s: owner registration failed: %s\n", path,
                        hd.ok() ? "put" : hd.error().to_string().c_str()),
           1;
  auto target = remote.get("dst", 5000);
  auto hs = registered(me, src, 1, allocated_src);
  if (!target.ok() || !hs.ok())
    return std::fprintf(stderr, "%s: setup failed\n", path), 1;
  // Warm up: the handshake happens here, not in the measurement.
  if (auto w = me.write(*hs, *target, Range::of(8), std::chrono::milliseconds(30000));
      !w.ok() || w->path != (fallback ? kPathFallback : kPathRdma))
    return std::fprintf(stderr, "%s: warm-up failed: %s\n", path,
                        w.ok() ? ("path " + w->path).c_str() : w.error().to_string().c_str()),
           1;
  if (me.lanes() != (path_name == "direct" ? 1u : 0u))
    return std::fprintf(stderr, "%s: %zu direct lanes after the warm-up\n", path, me.lanes()), 1;
  for (const char* op : {"write", "read"}) {
    for (uint64_t size : o.lat_only ? std::vector<uint64_t>{} : o.sizes) {
      uint64_t n = iterations(o, size);
      if (fallback)
        n = std::max<uint64_t>(2, std::min<uint64_t>(n, (512ull << 20) / size));
      // Batches of up to 64 ops keep the pipe full, as ib_write_bw's tx-depth does.
      uint64_t per_batch = std::min<uint64_t>(64, n);
      auto t0 = Clock::now();
      uint64_t sent = 0;
      while (sent < n) {
        uint64_t k = std::min(per_batch, n - sent);
        std::vector<TransferOp> ops;
        for (uint64_t i = 0; i < k; ++i)
          ops.push_back(std::strcmp(op, "write") == 0 ? make_write(*hs, *target, size)
                                                      : make_read(*hs, *target, size));
        auto r = me.batch(ops, 120000);
        if (!r.ok())
          return std::fprintf(stderr, "%s: %s\n", path, r.error().to_string().c_str()), 1;
        for (auto& out : *r)
          if (!out.ok())
            return std::fprintf(stderr, "%s: %s\n", path, out.message.c_str()), 1;
        sent += k;
      }
      auto dt = Clock::now() - t0;
      std::printf("bw %s %s %llu %.1f\n", path, op, static_cast<unsigned long long>(size),
                  mbps(n * size, dt));
      if (same_host) {
        // One copy at a time, as a program's read() or write() of a large buffer: the stream
        // lane, no batch (what same_host_copy_64M_vs_memcpy judges).
        t0 = Clock::now();
        for (uint64_t i = 0; i < n; ++i) {
          auto r = std::strcmp(op, "write") == 0
                       ? me.write(*hs, *target, Range::of(size), std::chrono::seconds(120))
                       : me.read(*hs, *target, Range::of(size), std::chrono::seconds(120));
          if (!r.ok())
            return std::fprintf(stderr, "%s: %s\n", path, r.error().to_string().c_str()), 1;
        }
        std::printf("bw same-host-one %s %llu %.1f\n", op, static_cast<unsigned long long>(size),
                    mbps(n * size, Clock::now() - t0));
      }
      std::fflush(stdout);
    }
  }
  // Steady state: after the setup's messages CAF's idle work-stealing workers keep polling for
  // a while (500 polls with 50 us naps; in the 2-vCPU VM about 0.2 s, during which the direct
  // path's latency triples). Latency is measured once they sleep again.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  for (const char* op : {"read", "write"}) {
    std::vector<double> us;
    uint32_t iters = fallback ? std::min<uint32_t>(o.lat_iters, 300) : o.lat_iters;
    uint64_t switches = bench::voluntary_switches();
    for (uint32_t i = 0; i < iters + 10; ++i) {
      auto t0 = Clock::now();
      auto r = std::strcmp(op, "read") == 0
                   ? me.read(*hs, *target, Range::of(8), std::chrono::milliseconds(10000))
                   : me.write(*hs, *target, Range::of(8), std::chrono::milliseconds(10000));
      auto dt = Clock::now() - t0;
      if (!r.ok())
        return std::fprintf(stderr, "%s: %s\n", path, r.error().to_string().c_str()), 1;
      if (i >= 10)
        us.push_back(std::chrono::duration<double, std::micro>(dt).count());
    }
    switches = bench::voluntary_switches() - switches;
    bench::print_latency(path, op, us);
    bench::print_switches(path, op, bench::per_op(switches, iters + 10), std::nullopt);
    if (direct)
      continue;  // an actor asks the manager: that is actor-async
    // The same from an actor (no blocking client thread in the loop).
    auto op_msg =
        std::strcmp(op, "read") == 0 ? make_read(*hs, *target, 8) : make_write(*hs, *target, 8);
    switches = bench::voluntary_switches();
    auto from_actor = latency_from_actor((*user)->system(), (*user)->manager(), op_msg, iters);
    switches = bench::voluntary_switches() - switches;
    if (from_actor.empty())
      return 1;
    const char* async_path = tls        ? "fallback-tls-async"
                             : fallback ? "fallback-async"
                             : busy     ? "actor-busy-async"
                                        : "actor-async";
    bench::print_latency(async_path, op, from_actor);
    bench::print_switches(async_path, op, bench::per_op(switches, iters + 10), std::nullopt);
  }
  auto stats = me.stats();
  if (!stats.ok())
    return std::fprintf(stderr, "%s: %s\n", path, stats.error().to_string().c_str()), 1;
  // The figures are only this path's if its ops went where they should.
  if (direct ? stats->direct_ops < stats->rdma_ops : stats->direct_ops != 0)
    return std::fprintf(stderr, "%s: %llu of %llu rdma ops went over direct lanes\n", path,
                        static_cast<unsigned long long>(stats->direct_ops),
                        static_cast<unsigned long long>(stats->rdma_ops)),
           1;
  if (same_host && stats->same_host_ops == 0)
    return std::fprintf(stderr, "%s: no op took the same-host endpoint\n", path), 1;
  std::printf("registered_bytes %s %llu\n", path,
              static_cast<unsigned long long>(stats->registered_bytes));
  std::fflush(stdout);
  return 0;
}

// -- striping ---------------------------------------------------------------------------------

/// Busy and total CPU time of the whole machine so far (/proc/stat, in clock ticks): Soft-RoCE
/// moves the bytes in the kernel, outside any process's CPU time.
std::pair<uint64_t, uint64_t> machine_cpu() {
  std::FILE* f = std::fopen("/proc/stat", "r");
  unsigned long long v[8] = {};
  if (f == nullptr)
    return {0, 0};
  int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                      &v[4], &v[5], &v[6], &v[7]);
  std::fclose(f);
  if (n != 8)
    return {0, 0};
  uint64_t total = 0;
  for (auto x : v)
    total += x;
  return {total - v[3] - v[4], total};  // idle and iowait are not busy
}

/// Bandwidth (MB/s) of writes and reads of each size through the manager between nodes on
/// `devices` and `peer_devices` (first: primary; the rest: rails), by "op size"; and under
/// "cpu op size" the fraction of the machine's CPUs busy meanwhile.
Result<std::map<std::string, double>> striping_bandwidth(const Options& o,
                                                         const std::vector<std::string>& devices,
                                                         const std::vector<std::string>& peer) {
  CAF_RDMA_ASSIGN_OR_RETURN(auto base, ManagerOptions::from_env());
  base.mode = TransportMode::kRdma;
  base.stripe_min_bytes = 1 << 20;
  base.stripe_qps = o.stripe_qps;  // with one device and 1: no striping at all
  NodeOptions user_opts, owner_opts;
  user_opts.manager = owner_opts.manager = base;
  user_opts.scheduler_threads = owner_opts.scheduler_threads = o.scheduler_threads;
  user_opts.manager.ibverbs.device_name = devices.front();
  user_opts.manager.rail_devices.assign(devices.begin() + 1, devices.end());
  owner_opts.manager.ibverbs.device_name = peer.front();
  owner_opts.manager.rail_devices.assign(peer.begin() + 1, peer.end());
  uint64_t max_size = *std::max_element(o.sizes.begin(), o.sizes.end());
  std::vector<uint8_t> src(max_size, 1), dst(max_size, 0);  // outlive the nodes
  CAF_RDMA_ASSIGN_OR_RETURN(auto owner, RdmaNode::start(owner_opts));
  CAF_RDMA_ASSIGN_OR_RETURN(auto user, RdmaNode::start(user_opts));
  CAF_RDMA_ASSIGN_OR_RETURN(auto owner_proxy, user->remote_manager("127.0.0.1", owner->port()));
  RdmaClient owner_client(owner->system(), owner->manager());
  RdmaClient remote(user->system(), owner_proxy);
  RdmaClient me(user->system(), user->manager(), false);  // the manager's path: it stripes
  CAF_RDMA_ASSIGN_OR_RETURN(auto hd, owner_client.request_buffer(dst.data(), max_size));
  CAF_RDMA_RETURN_IF_ERROR(owner_client.put("dst", hd));
  CAF_RDMA_ASSIGN_OR_RETURN(auto target, remote.get("dst", 5000));
  CAF_RDMA_ASSIGN_OR_RETURN(auto hs, me.request_buffer(src.data(), max_size));
  // Warm-up: the handshakes (striping queue pairs included) happen here.
  CAF_RDMA_RETURN_IF_ERROR(me.write(hs, target, Range::whole(), std::chrono::seconds(60)).status());
  std::map<std::string, double> out;
  for (const char* op : {"write", "read"}) {
    for (uint64_t size : o.sizes) {
      uint64_t n = std::max<uint64_t>(4, std::min<uint64_t>(iterations(o, size), 64));
      auto cpu0 = machine_cpu();
      auto t0 = Clock::now();
      for (uint64_t sent = 0; sent < n; sent += 4) {  // 4 ops in flight
        std::vector<TransferOp> ops;
        for (uint64_t i = 0; i < std::min<uint64_t>(4, n - sent); ++i)
          ops.push_back(std::strcmp(op, "write") == 0 ? make_write(hs, target, size)
                                                      : make_read(hs, target, size));
        CAF_RDMA_ASSIGN_OR_RETURN(auto outcomes, me.batch(ops, 120000));
        for (auto& r : outcomes)
          CAF_RDMA_RETURN_IF_ERROR(r.status());
      }
      out[std::string(op) + " " + std::to_string(size)] = mbps(n * size, Clock::now() - t0);
      auto cpu1 = machine_cpu();
      if (cpu1.second > cpu0.second)
        out["cpu " + std::string(op) + " " + std::to_string(size)] =
            double(cpu1.first - cpu0.first) / double(cpu1.second - cpu0.second);
    }
  }
  CAF_RDMA_ASSIGN_OR_RETURN(auto stats, me.stats());
  if (devices.size() > 1 && stats.striped_ops == 0)
    return Error(ErrorCode::kInternal,
                 "no op was striped over " + std::to_string(devices.size()) + " devices");
  return out;
}

int bench_striping(const Options& o) {
  if (o.devices.size() != 2 || o.peer_devices.size() != 2)
    return std::fprintf(stderr, "striping: needs --devices A,B and --peer-devices C,D\n"), 1;
  // Three node pairs, alternating (the emulated machine's speed drifts): one device with
  // --stripe-qps queue pairs, two devices with as many each, and one device with twice as many
  // (as many queue pairs as the two devices: what a second device adds beyond more QPs).
  struct Config {
    const char* name;
    size_t devices;
    uint32_t qps;
  };
  const Config configs[] = {{"1dev", 1, o.stripe_qps},
                            {"2dev", 2, o.stripe_qps},
                            {"1dev-2xqp", 1, std::min(2 * o.stripe_qps, kMaxStripeQps)}};
  std::map<std::string, std::map<std::string, std::vector<double>>> runs;  // config, key
  for (int round = 0; round < 2; ++round) {
    for (const Config& c : configs) {
      Options with = o;
      with.stripe_qps = c.qps;
      const auto n = static_cast<std::ptrdiff_t>(c.devices);
      auto bw = striping_bandwidth(
          with, std::vector<std::string>(o.devices.begin(), o.devices.begin() + n),
          std::vector<std::string>(o.peer_devices.begin(), o.peer_devices.begin() + n));
      if (!bw.ok())
        return std::fprintf(stderr, "striping (%s): %s\n", c.name, bw.error().to_string().c_str()),
               1;
      for (auto& [key, v] : *bw)
        runs[c.name][key].push_back(v);
    }
  }
  auto best = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
  for (auto& [key, v] : runs["1dev"]) {
    const bool cpu = key.rfind("cpu ", 0) == 0;  // what bounds it under emulation: the CPUs
    for (const Config& c : configs)
      std::printf(cpu ? "cpu-busy striping-%s %s %.2f\n" : "bw striping-%s %s %.1f\n", c.name,
                  key.c_str() + (cpu ? 4 : 0), best(runs[c.name][key]));
    if (cpu)
      continue;
    std::printf("striping 2 devices / 1 device %s %.3f\n", key.c_str(),
                best(runs["2dev"][key]) / best(v));
    std::printf("striping 2x queue pairs / 1 device %s %.3f\n", key.c_str(),
                best(runs["1dev-2xqp"][key]) / best(v));
  }
  std::fflush(stdout);
  return 0;
}

// -- GPU memory --------------------------------------------------------------------------------

/// The bytes the GPU figures check: pattern(i, seed), as the GPU tests write them.
uint8_t pattern(uint64_t i, uint32_t seed) {
  return static_cast<uint8_t>((i * 2654435761ull + seed) >> 11);
}

/// One buffer of the GPU bench: pageable host memory, or an allocation of GPU 0 (freed with it).
class BenchMemory {
public:
  BenchMemory(const CudaDriver& cuda, bool gpu, uint64_t size) : cuda_(cuda), gpu_(gpu) {
    if (!gpu) {
      host_.assign(size, 0);
      return;
    }
    auto p = cuda.alloc_device(size, 0);
    if (!p.ok())
      error_ = p.error();
    else
      dev_ = *p;
  }
  ~BenchMemory() {
    if (dev_ != 0)
      (void)cuda_.free_device(dev_);
  }
  BenchMemory(const BenchMemory&) = delete;
  BenchMemory& operator=(const BenchMemory&) = delete;

  const std::optional<Error>& error() const { return error_; }
  bool gpu() const { return gpu_; }
  const void* address() const { return gpu_ ? reinterpret_cast<const void*>(dev_) : host_.data(); }
  /// [0, n) := `bytes`.
  Status fill(const std::vector<uint8_t>& bytes, uint64_t n) {
    if (gpu_)
      return cuda_.copy_to_device(dev_, bytes.data(), n, 0);
    std::memcpy(host_.data(), bytes.data(), n);
    return {};
  }
  /// [0, n), read back.
  Result<std::vector<uint8_t>> bytes(uint64_t n) const {
    if (!gpu_)
      return std::vector<uint8_t>(host_.begin(), host_.begin() + static_cast<std::ptrdiff_t>(n));
    std::vector<uint8_t> out(n);
    CAF_RDMA_RETURN_IF_ERROR(cuda_.copy_to_host(out.data(), dev_, n, 0));
    return out;
  }

private:
  const CudaDriver& cuda_;
  bool gpu_;
  std::vector<uint8_t> host_;
  uint64_t dev_ = 0;
  std::optional<Error> error_;
};

/// The references: cudaMemcpy's copies (the driver's cuMemcpy*, synchronous) at each size,
/// GPU->host and host->GPU with pageable and page-locked host memory, and within GPU 0, in MB/s
/// by "kind size".
Result<std::map<std::string, double>> cuda_memcpy_bandwidth(const CudaDriver& cuda,
                                                            const Options& o) {
  uint64_t max_size = *std::max_element(o.sizes.begin(), o.sizes.end());
  BenchMemory a(cuda, true, max_size), b(cuda, true, max_size);
  for (const BenchMemory* m : {&a, &b})
    if (m->error())
      return *m->error();
  std::vector<uint8_t> host(max_size, 5), locked(max_size, 6);
  CAF_RDMA_RETURN_IF_ERROR(cuda.host_register(locked.data(), max_size, 0));
  const auto src = reinterpret_cast<uint64_t>(a.address());
  const auto dst = reinterpret_cast<uint64_t>(b.address());
  std::map<std::string, double> out;
  Status st;
  for (auto size = o.sizes.begin(); size != o.sizes.end() && st.ok(); ++size) {
    const uint64_t n = std::max<uint64_t>(4, std::min<uint64_t>(iterations(o, *size), 4096));
    const uint64_t len = *size;
    const std::pair<const char*, std::function<Status()>> copies[] = {
        {"cuda-d2h", [&] { return cuda.copy_to_host(host.data(), src, len, 0); }},
        {"cuda-d2h-locked", [&] { return cuda.copy_to_host(locked.data(), src, len, 0); }},
        {"cuda-h2d", [&] { return cuda.copy_to_device(dst, host.data(), len, 0); }},
        {"cuda-h2d-locked", [&] { return cuda.copy_to_device(dst, locked.data(), len, 0); }},
        {"cuda-d2d", [&] { return cuda.copy_on_device(dst, src, len, 0); }}};
    for (auto copy = std::begin(copies); copy != std::end(copies) && st.ok(); ++copy) {
      auto t0 = Clock::now();
      for (uint64_t i = 0; i < n && st.ok(); ++i)
        st = copy->second();
      out[std::string(copy->first) + " " + std::to_string(len)] = mbps(n * len, Clock::now() - t0);
    }
  }
  (void)cuda.host_unregister(locked.data(), 0);
  CAF_RDMA_RETURN_IF_ERROR(st);
  return out;
}

/// Write and read bandwidth (MB/s, by "op size") between a requester's buffer and an owner's,
/// each in host memory or on GPU 0, through two managers on `path` ("actor", "direct" or
/// "fallback"); the bytes each size moved are checked.
Result<std::map<std::string, double>> gpu_path_bandwidth(const CudaDriver& cuda, const Options& o,
                                                         const std::string& path, bool local_gpu,
                                                         bool remote_gpu) {
  CAF_RDMA_ASSIGN_OR_RETURN(auto base, ManagerOptions::from_env());
  base.mode = path == "fallback" ? TransportMode::kFallback : TransportMode::kRdma;
  uint64_t max_size = *std::max_element(o.sizes.begin(), o.sizes.end());
  BenchMemory mine(cuda, local_gpu, max_size), theirs(cuda, remote_gpu, max_size);
  for (const BenchMemory* m : {&mine, &theirs})
    if (m->error())
      return *m->error();
  NodeOptions user_opts, owner_opts;
  user_opts.manager = owner_opts.manager = base;
  user_opts.scheduler_threads = owner_opts.scheduler_threads = o.scheduler_threads;
  if (!o.peer_device.empty())
    owner_opts.manager.ibverbs.device_name = o.peer_device;
  CAF_RDMA_ASSIGN_OR_RETURN(auto owner, RdmaNode::start(owner_opts));
  CAF_RDMA_ASSIGN_OR_RETURN(auto user, RdmaNode::start(user_opts));
  CAF_RDMA_ASSIGN_OR_RETURN(auto owner_proxy, user->remote_manager("127.0.0.1", owner->port()));
  RdmaClient owner_client(owner->system(), owner->manager());
  RdmaClient remote(user->system(), owner_proxy);
  RdmaClient me(user->system(), user->manager(), path == "direct");
  CAF_RDMA_ASSIGN_OR_RETURN(auto hd, owner_client.request_buffer(theirs.address(), max_size));
  CAF_RDMA_RETURN_IF_ERROR(owner_client.put("dst", hd));
  CAF_RDMA_ASSIGN_OR_RETURN(auto target, remote.get("dst", 5000));
  CAF_RDMA_ASSIGN_OR_RETURN(auto hs, me.request_buffer(mine.address(), max_size));
  std::map<std::string, double> out;
  std::vector<uint8_t> expected(max_size), zeros(max_size, 0);
  for (const char* op : {"write", "read"}) {
    const bool write = std::strcmp(op, "write") == 0;
    BenchMemory& from = write ? mine : theirs;
    BenchMemory& to = write ? theirs : mine;
    for (uint64_t size : o.sizes) {
      const auto seed = static_cast<uint32_t>(size) + (write ? 1u : 2u);
      for (uint64_t i = 0; i < size; ++i)
        expected[i] = pattern(i, seed);
      CAF_RDMA_RETURN_IF_ERROR(from.fill(expected, size));
      CAF_RDMA_RETURN_IF_ERROR(to.fill(zeros, size));
      const uint64_t n = std::max<uint64_t>(4, std::min<uint64_t>(iterations(o, size), 1024));
      auto t0 = Clock::now();
      for (uint64_t sent = 0; sent < n; sent += 8) {  // up to 8 ops in flight
        std::vector<TransferOp> ops;
        for (uint64_t i = 0; i < std::min<uint64_t>(8, n - sent); ++i)
          ops.push_back(write ? make_write(hs, target, size) : make_read(hs, target, size));
        CAF_RDMA_ASSIGN_OR_RETURN(auto outcomes, me.batch(ops, 120000));
        for (auto& r : outcomes)
          CAF_RDMA_RETURN_IF_ERROR(r.status());
      }
      out[std::string(op) + " " + std::to_string(size)] = mbps(n * size, Clock::now() - t0);
      CAF_RDMA_ASSIGN_OR_RETURN(auto got, to.bytes(size));
      auto bad = std::mismatch(got.begin(), got.end(), expected.begin()).first;
      if (bad != got.end())
        return Error(ErrorCode::kInternal, std::string(op) + " of " + std::to_string(size) +
                                               " bytes: byte " + std::to_string(bad - got.begin()) +
                                               " is " + std::to_string(*bad) + ", expected " +
                                               std::to_string(expected[bad - got.begin()]));
    }
  }
  return out;
}

/// --memory gpu: the cudaMemcpy references, then GPU<->GPU, host->GPU and GPU->host through two
/// managers on each of the manager paths in --paths, with each one's ratio to the cudaMemcpy
/// copies its bytes need at the least (a path through host memory cannot beat them): GPU->host
/// one GPU->host copy, host->GPU one host->GPU copy, GPU->GPU both in turn.
int bench_gpu(const Options& o) {
  auto cuda = CudaDriver::get();
  if (!cuda.ok())
    return std::fprintf(stderr, "gpu: %s\n", cuda.error().to_string().c_str()), 1;
  if ((*cuda)->device_count() == 0)
    return std::fprintf(stderr, "gpu: the CUDA driver sees no GPU\n"), 1;
  auto ref = cuda_memcpy_bandwidth(**cuda, o);
  if (!ref.ok())
    return std::fprintf(stderr, "gpu: cudaMemcpy: %s\n", ref.error().to_string().c_str()), 1;
  for (auto& [key, v] : *ref)
    std::printf("bw %s %.1f\n", key.c_str(), v);
  std::fflush(stdout);
  struct Combo {
    const char* name;
    bool local_gpu, remote_gpu;
  };
  // host-host: the same managers' figure for host memory, for comparison.
  const Combo combos[] = {{"gpu-gpu", true, true},
                          {"host-gpu", false, true},
                          {"gpu-host", true, false},
                          {"host-host", false, false}};
  int rc = 0;
  for (const auto& path : o.paths) {
    if (path != "actor" && path != "direct" && path != "fallback") {
      std::fprintf(stderr, "gpu: path '%s' is not one of actor, direct, fallback\n", path.c_str());
      return 2;
    }
    for (const Combo& c : combos) {
      auto bw = gpu_path_bandwidth(**cuda, o, path, c.local_gpu, c.remote_gpu);
      if (!bw.ok()) {
        std::fprintf(stderr, "gpu %s %s: %s\n", path.c_str(), c.name,
                     bw.error().to_string().c_str());
        rc = 1;
        continue;
      }
      for (auto& [key, v] : *bw) {
        const std::string op = key.substr(0, key.find(' '));
        const std::string size = key.substr(key.find(' ') + 1);
        // The copies a path through host memory needs: out of the GPU on the side whose memory
        // is on it and the bytes leave, into the GPU on the side that receives them.
        const bool out_of_gpu = op == "write" ? c.local_gpu : c.remote_gpu;
        const bool into_gpu = op == "write" ? c.remote_gpu : c.local_gpu;
        double floor_s = 0;  // seconds per MB
        if (out_of_gpu)
          floor_s += 1 / (*ref)["cuda-d2h-locked " + size];
        if (into_gpu)
          floor_s += 1 / (*ref)["cuda-h2d-locked " + size];
        std::printf("bw gpu-%s-%s %s %.1f\n", path.c_str(), c.name, key.c_str(), v);
        if (floor_s > 0)
          std::printf("ratio gpu_%s_%s_%s_%s_vs_cuda_memcpy %.3f\n", path.c_str(), c.name,
                      op.c_str(), size.c_str(), v * floor_s);
      }
      std::fflush(stdout);
    }
  }
  return rc;
}

// -- raw TCP -----------------------------------------------------------------------------------

// Every socket call of the raw TCP reference is bounded (a stuck peer fails the run, it does not
// hang it): 30 s per send, receive or accept.
void bound_socket(int fd) {
  timeval tv{};
  tv.tv_sec = 30;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));  // accept() obeys it too
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

int bench_tcp(const Options& o) {
  if (o.lat_only)
    return 0;
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0)
    return std::fprintf(stderr, "tcp: socket: %s\n", errno_string(errno).c_str()), 1;
  bound_socket(listener);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(listener);
    return std::fprintf(stderr, "tcp: cannot listen on loopback\n"), 1;
  }
  int rc = 0;
  for (uint64_t size : o.sizes) {
    if (size < (1 << 20))
      continue;
    uint64_t n =
        std::max<uint64_t>(4, std::min<uint64_t>(iterations(o, size), (1ull << 30) / size));
    uint64_t received = 0;
    std::thread receiver([&] {
      int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0)
        return;  // timed out: the sender reports it
      bound_socket(c);
      std::vector<uint8_t> buf(size);
      while (received < n * size) {
        ssize_t r = ::recv(c, buf.data(), std::min<uint64_t>(buf.size(), n * size - received), 0);
        if (r <= 0)
          break;
        received += static_cast<uint64_t>(r);
      }
      ::send(c, "k", 1, MSG_NOSIGNAL);
      ::close(c);
    });
    const char* failed = nullptr;
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s >= 0)
      bound_socket(s);
    auto t0 = Clock::now();
    if (s < 0 || ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      failed = "connect";
    } else {
      std::vector<uint8_t> buf(size, 7);
      t0 = Clock::now();
      for (uint64_t i = 0; i < n && !failed; ++i) {
        uint64_t sent = 0;
        while (sent < size && !failed) {
          ssize_t w = ::send(s, buf.data() + sent, size - sent, MSG_NOSIGNAL);
          if (w <= 0)
            failed = "send";
          else
            sent += static_cast<uint64_t>(w);
        }
      }
      char ack = 0;
      if (!failed && ::recv(s, &ack, 1, 0) != 1)
        failed = "waiting for the receiver's acknowledgement";
    }
    auto dt = Clock::now() - t0;
    int err = errno;
    if (s >= 0)
      ::close(s);  // ends the receiver's recv if it still waits
    if (failed)
      ::shutdown(listener, SHUT_RDWR);  // ends its accept if it still waits
    receiver.join();
    const uint64_t total = n * size;
    if (failed || received != total) {
      std::fprintf(stderr, "tcp: %s failed at %llu of %llu bytes: %s\n",
                   failed ? failed : "receiving", static_cast<unsigned long long>(received),
                   static_cast<unsigned long long>(total), errno_string(err).c_str());
      rc = 1;
      break;
    }
    std::printf("bw tcp write %llu %.1f\n", static_cast<unsigned long long>(size),
                mbps(n * size, dt));
    std::fflush(stdout);
  }
  ::close(listener);
  return rc;
}

Result<std::vector<std::string>> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty())
      out.push_back(item);
  if (out.empty())
    return Error(ErrorCode::kInvalidArgument, "empty list '" + text + "'");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags =
      Flags::parse(argc, argv,
                   {"--paths", "--sizes", "--bytes-per-size", "--lat-iters", "--peer-device",
                    "--scheduler-threads", "--tls", "--devices", "--peer-devices", "--stripe-qps",
                    "--memory", "--busy-poll-us", "--kv-pool", "--kv-transports", "--cancel-bytes",
                    "--cancel-transports", "--load-bytes", "--load-reads", "--load-transports"},
                   {"--help", "-h", "--lat-only", "--long"});
  if (!flags.ok()) {
    std::fprintf(stderr, "rdma_bench: %s\n%s", flags.error().message().c_str(), kUsage);
    return 2;
  }
  if (flags->has("--help") || flags->has("-h")) {
    std::printf("%s", kUsage);
    return 0;
  }
  Options o;
  if (flags->has("--paths")) {
    auto paths = split(flags->get("--paths", ""));
    if (!paths.ok()) {
      std::fprintf(stderr, "rdma_bench: --paths: %s\n", paths.error().message().c_str());
      return 2;
    }
    o.paths = *paths;
  }
  if (flags->has("--sizes")) {
    auto sizes = split(flags->get("--sizes", ""));
    if (!sizes.ok()) {
      std::fprintf(stderr, "rdma_bench: --sizes: %s\n", sizes.error().message().c_str());
      return 2;
    }
    o.sizes.clear();
    for (const auto& text : *sizes) {
      auto v = Flags::parse_u64(text, "--sizes");
      if (!v.ok() || *v == 0) {
        std::fprintf(stderr, "rdma_bench: bad size '%s'\n", text.c_str());
        return 2;
      }
      o.sizes.push_back(*v);
    }
  }
  auto bps = flags->get_u64("--bytes-per-size", o.bytes_per_size);
  auto lat = flags->get_u64("--lat-iters", o.lat_iters);
  if (!bps.ok() || !lat.ok() || *lat == 0) {
    std::fprintf(stderr, "rdma_bench: bad --bytes-per-size or --lat-iters\n");
    return 2;
  }
  o.bytes_per_size = *bps;
  o.lat_iters = static_cast<uint32_t>(*lat);
  o.peer_device = flags->get("--peer-device", "");
  auto threads = flags->get_u64("--scheduler-threads", 0);
  if (!threads.ok() || *threads > 256) {
    std::fprintf(stderr, "rdma_bench: bad --scheduler-threads\n");
    return 2;
  }
  o.scheduler_threads = *threads;
  o.lat_only = flags->has("--lat-only");
  auto qps = flags->get_u64("--stripe-qps", 1);
  if (!qps.ok() || *qps < 1 || *qps > kMaxStripeQps) {
    std::fprintf(stderr, "rdma_bench: --stripe-qps must be 1..%u\n", kMaxStripeQps);
    return 2;
  }
  o.stripe_qps = static_cast<uint32_t>(*qps);
  auto busy_us = flags->get_u64("--busy-poll-us", static_cast<uint64_t>(o.busy_poll.count()));
  if (!busy_us.ok() || *busy_us < 1 || *busy_us > kMaxBusyPollUs) {
    std::fprintf(stderr, "rdma_bench: --busy-poll-us must be 1..%llu\n",
                 static_cast<unsigned long long>(kMaxBusyPollUs));
    return 2;
  }
  o.busy_poll = std::chrono::microseconds(*busy_us);
  bench::KvHandoffOptions kv_handoff;
  auto pool = flags->get_u64("--kv-pool", kv_handoff.pool_bytes);
  if (!pool.ok() || *pool < (64 << 10) || *pool % (64 << 10) != 0) {
    std::fprintf(stderr, "rdma_bench: --kv-pool must be a multiple of 64K\n");
    return 2;
  }
  kv_handoff.pool_bytes = *pool;
  kv_handoff.long_mode = flags->has("--long");
  bench::CancelBenchOptions cancel;
  auto cancel_bytes = flags->get_u64("--cancel-bytes", cancel.bytes);
  if (!cancel_bytes.ok() || *cancel_bytes == 0) {
    std::fprintf(stderr, "rdma_bench: bad --cancel-bytes\n");
    return 2;
  }
  cancel.bytes = *cancel_bytes;
  if (flags->has("--long"))
    cancel.trials = 50;
  bench::LoadBenchOptions load;
  auto load_bytes = flags->get_u64("--load-bytes", load.bulk_bytes);
  if (!load_bytes.ok() || *load_bytes == 0) {
    std::fprintf(stderr, "rdma_bench: bad --load-bytes\n");
    return 2;
  }
  load.bulk_bytes = *load_bytes;
  auto load_reads = flags->get_u64("--load-reads", static_cast<uint64_t>(load.iters));
  if (!load_reads.ok() || *load_reads < 100 || *load_reads > 1000000) {
    std::fprintf(stderr, "rdma_bench: bad --load-reads (100..1000000: a p99 needs 100)\n");
    return 2;
  }
  load.iters = static_cast<int>(*load_reads);
  for (auto [flag, list] : {std::pair{"--devices", &o.devices},
                            {"--peer-devices", &o.peer_devices},
                            {"--kv-transports", &kv_handoff.transports},
                            {"--cancel-transports", &cancel.transports},
                            {"--load-transports", &load.transports}})
    if (flags->has(flag)) {
      auto names = split(flags->get(flag, ""));
      if (!names.ok()) {
        std::fprintf(stderr, "rdma_bench: %s: %s\n", flag, names.error().message().c_str());
        return 2;
      }
      *list = *names;
    }
  if (flags->has("--tls")) {
    auto files = split(flags->get("--tls", ""));
    if (!files.ok() || files->size() != 3) {
      std::fprintf(stderr, "rdma_bench: --tls wants CERT,KEY,CAFILE\n");
      return 2;
    }
    o.tls = TlsCredentials{(*files)[0], (*files)[1], (*files)[2], ""};
  }
  const std::string memory = flags->get("--memory", "host");
  if (memory != "host" && memory != "allocated" && memory != "gpu") {
    std::fprintf(stderr, "rdma_bench: --memory must be host, allocated or gpu, not '%s'\n",
                 memory.c_str());
    return 2;
  }
  o.allocated = memory == "allocated";
  const bool gpu = memory == "gpu";
  if (gpu && !flags->has("--paths"))
    o.paths = {"fallback"};
  int rc = gpu ? bench_gpu(o) : 0;
  for (const auto& p : gpu ? std::vector<std::string>{} : o.paths) {
    if (p == "components")
      rc |= bench_components(o);
    else if (p == "actor" || p == "actor-busy" || p == "direct" || p == "fallback" ||
             p == "fallback-lane" || p == "same-host" || p == "fallback-tls")
      rc |= bench_manager(o, p);
    else if (p == "tcp")
      rc |= bench_tcp(o);
    else if (p == "kv-handoff")
      rc |= bench::bench_kv_handoff(kv_handoff);
    else if (p == "cancel")
      rc |= bench::bench_cancel(cancel);
    else if (p == "load")
      rc |= bench::bench_latency_under_load(load);
    else if (p == "striping")
      rc |= bench_striping(o);
    else {
      std::fprintf(stderr, "rdma_bench: unknown path '%s'\n", p.c_str());
      return 2;
    }
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("peak_rss_kb %ld\n", ru.ru_maxrss);
  return rc;
}
