// parameter_server: one server process and N worker processes, as in Monarch's example.
//
// The server registers, once, one gradient buffer per worker and a read-only weights buffer,
// and publishes their handles. Every step each worker RDMA-writes its gradients into its buffer
// on the server, tells the server's coordinator actor, and (once the server has summed all
// workers' gradients into the weights) RDMA-reads the updated weights and checks them against
// the closed form. The server checks every gradient it sums and the final weights.
//
//   gradient of worker w at step s, element i:  (w + 1) * (s + 1) + i % 7
//   weights after steps 0..s, element i:        N(N+1)/2 * (s+1)(s+2)/2 + N * (s+1) * (i % 7)
//
// With --gpu every buffer (the server's gradients and weights, each worker's) lives in GPU
// memory, as in training: the managers move it GPU to GPU (GPUDirect where the NIC can register
// it, else through host bounce buffers or the owner); the server copies the gradients to the
// host to check and sum them (an example, not a kernel) and the summed weights back.
//
// Without --role the program launches the server and the workers as child processes on this
// host; `--role server --host ADDR` and `--role worker ...` run one part each, so the server
// and its workers may live on different hosts (tests/two_hosts/ runs them in two VMs).
#include <signal.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <vector>

#include "actors/rdma_client.h"
#include "actors/rdma_node.h"
#include "primitives/cuda_driver.h"
#include "support/child_process.h"
#include "support/flags.h"

using namespace caf_rdma;
using namespace std::chrono_literals;

namespace {

using step_atom = caf::atom_constant<caf::atom("ps_step")>;

constexpr const char* kUsage =
    "usage: parameter_server [--workers N] [--steps S] [--size BYTES] [--timeout-ms MS] [--gpu]\n"
    "  Starts one server process and N worker processes (defaults: 2 workers, 5 steps,\n"
    "  1 MiB of float64 weights). Every step: workers RDMA-write gradients into the server's\n"
    "  per-worker buffers, the server sums them into the weights, workers RDMA-read the weights.\n"
    "  Every step and the final weights are verified. Exit code 0 when all checks pass.\n"
    "  Transport: CAF_RDMA_TRANSPORT=auto|rdma|fallback; device: CAF_RDMA_DEVICE.\n"
    "  --gpu: every buffer in GPU memory (server: GPU 0; worker R: GPU R mod the GPUs);\n"
    "  needs a build with --config=cuda and a GPU.\n"
    "One role per process (e.g. the server on one host, the workers on another; the same\n"
    "--workers, --steps, --size and --timeout-ms everywhere):\n"
    "  parameter_server --role server [--host ADDR]   publishes its manager and coordinator on\n"
    "      ADDR (default 127.0.0.1; another address needs TLS or CAF_RDMA_PLAINTEXT=1) and\n"
    "      prints 'READY <manager port> <coordinator port>'\n"
    "  parameter_server --role worker --rank R --server HOST:PORT --coordinator HOST:PORT\n"
    "      worker R (0 <= R < N) of the server whose manager and coordinator are there\n";

struct Params {
  uint32_t workers = 2;
  uint32_t steps = 5;
  uint64_t elements = (1 << 20) / 8;
  uint32_t timeout_ms = 60000;
  bool gpu = false;
};

double gradient(uint32_t w, uint32_t s, uint64_t i) {
  return double(w + 1) * double(s + 1) + double(i % 7);
}

double weight_after(const Params& p, uint32_t s, uint64_t i) {
  double n = p.workers;
  return n * (n + 1) / 2 * double(s + 1) * double(s + 2) / 2 + n * double(s + 1) * double(i % 7);
}

int fail(const std::string& who, const Error& e) {
  std::printf("%s: FAILED: %s\n", who.c_str(), e.to_string().c_str());
  std::fflush(stdout);
  return 1;
}

/// A float64 array the program computes with in `view` (host memory) and the managers move at
/// address(): `view` itself, or with --gpu an allocation of one GPU, which push() fills from
/// `view` and pull() copies into it.
class Tensor {
public:
  Tensor(uint64_t elements, bool gpu, int device) : view(elements, 0.0), device_(device) {
    if (!gpu)
      return;
    auto cuda = CudaDriver::get();
    if (!cuda.ok()) {
      error_ = cuda.error().with_context("--gpu");
      return;
    }
    auto p = (*cuda)->alloc_device(bytes(), device);
    if (!p.ok()) {
      error_ = p.error();
      return;
    }
    cuda_ = *cuda;
    dev_ = *p;
    error_ = to_status(push());
  }
  ~Tensor() {
    if (dev_ != 0)
      (void)cuda_->free_device(dev_);
  }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  /// Why the GPU memory could not be had (none: fine).
  const std::optional<Error>& error() const { return error_; }
  const void* address() const {
    return dev_ != 0 ? reinterpret_cast<const void*>(dev_) : static_cast<const void*>(view.data());
  }
  uint64_t bytes() const { return view.size() * sizeof(double); }
  Status push() {
    return dev_ != 0 ? cuda_->copy_to_device(dev_, view.data(), bytes(), device_) : Status{};
  }
  Status pull() {
    return dev_ != 0 ? cuda_->copy_to_host(view.data(), dev_, bytes(), device_) : Status{};
  }

  std::vector<double> view;

private:
  static std::optional<Error> to_status(const Status& st) {
    return st.ok() ? std::nullopt : std::optional<Error>(st.error());
  }
  int device_;
  CudaDriver* cuda_ = nullptr;
  uint64_t dev_ = 0;
  std::optional<Error> error_;
};

/// The GPU of worker `rank` (0 for the server): ranks spread over the host's GPUs.
int gpu_of(const Params& p, uint32_t rank) {
  if (!p.gpu)
    return 0;
  auto cuda = CudaDriver::get();
  int n = cuda.ok() ? (*cuda)->device_count() : 0;
  return n > 0 ? static_cast<int>(rank % static_cast<uint32_t>(n)) : 0;
}

// -- server ------------------------------------------------------------------------------------

struct CoordinatorState {
  static inline const char* name = "ps_coordinator";
  std::vector<caf::response_promise> waiting;
  uint32_t step = 0;
  uint32_t finished_workers = 0;
};

caf::behavior coordinator(caf::stateful_actor<CoordinatorState>* self, Params p,
                          std::vector<std::unique_ptr<Tensor>>* grads, Tensor* weights,
                          const std::shared_ptr<std::promise<std::string>>& finished) {
  return {[=](step_atom, uint32_t worker, uint32_t step) -> caf::result<uint32_t> {
    auto& st = self->state;
    if (step == p.steps && st.step == p.steps && worker < p.workers) {
      // "step S" = the worker has read and checked the final weights; the server may stop.
      if (++st.finished_workers == p.workers)
        finished->set_value("");
      return step;
    }
    if (step != st.step || worker >= p.workers)
      return caf::make_error(caf::sec::invalid_argument,
                             "worker " + std::to_string(worker) + " reported step " +
                                 std::to_string(step) + ", server is at step " +
                                 std::to_string(st.step));
    auto rp = self->make_response_promise();
    st.waiting.push_back(rp);
    if (st.waiting.size() < p.workers)
      return caf::delegated<uint32_t>();
    // All gradients of this step are in our memory (written by RDMA): check and sum them.
    std::string problem;
    for (uint32_t w = 0; w < p.workers && problem.empty(); ++w) {
      if (Status st = (*grads)[w]->pull(); !st.ok()) {
        problem = st.error().to_string();
        break;
      }
      for (uint64_t i = 0; i < p.elements; ++i) {
        double g = (*grads)[w]->view[i];
        if (g != gradient(w, step, i)) {
          problem = "step " + std::to_string(step) + ": gradient " + std::to_string(i) +
                    " of worker " + std::to_string(w) + " is " + std::to_string(g) + ", expected " +
                    std::to_string(gradient(w, step, i));
          break;
        }
        weights->view[i] += g;
      }
    }
    if (Status st = weights->push(); problem.empty() && !st.ok())
      problem = st.error().to_string();
    std::printf("server: step %u: summed %u gradients, weights[1] = %.0f%s\n", step, p.workers,
                weights->view[1 % p.elements], problem.empty() ? "" : " (BAD GRADIENT)");
    std::fflush(stdout);
    for (auto& w : st.waiting)
      if (problem.empty())
        w.deliver(step);
      else
        w.deliver(caf::make_error(caf::sec::invalid_argument, problem));
    st.waiting.clear();
    ++st.step;
    if (!problem.empty())
      finished->set_value(problem);
    return caf::delegated<uint32_t>();
  }};
}

int run_server(const Params& p, const std::string& host) {
  // Registered memory must outlive the node (declared first, destroyed last).
  std::vector<std::unique_ptr<Tensor>> grads;
  for (uint32_t w = 0; w < p.workers; ++w)
    grads.push_back(std::make_unique<Tensor>(p.elements, p.gpu, 0));
  Tensor weights(p.elements, p.gpu, 0);
  if (weights.error())
    return fail("server", *weights.error());
  for (const auto& g : grads)
    if (g->error())
      return fail("server", *g->error());
  auto options = NodeOptions::from_env();  // the defaults and the CAF_RDMA_* environment
  if (!options.ok())
    return fail("server", options.error());
  options->host = host;  // the manager's and the coordinator's address
  auto node = RdmaNode::start(*options);
  if (!node.ok())
    return fail("server", node.error());
  RdmaClient client((*node)->system(), (*node)->manager());
  // Register once, for all steps.
  for (uint32_t w = 0; w < p.workers; ++w) {
    auto h = client.request_buffer(grads[w]->address(), weights.bytes());
    if (!h.ok())
      return fail("server", h.error());
    if (Status st = client.put("grad/" + std::to_string(w), *h); !st.ok())
      return fail("server", st.error());
  }
  auto wh = client.request_buffer(weights.address(), weights.bytes(), BufferAccess::kReadOnly);
  if (!wh.ok())
    return fail("server", wh.error());
  if (Status st = client.put("weights", *wh); !st.ok())
    return fail("server", st.error());
  auto finished = std::make_shared<std::promise<std::string>>();
  auto done = finished->get_future();
  auto coord = (*node)->system().spawn(coordinator, p, &grads, &weights, finished);
  // Under the node's policy: over TLS when the node has credentials.
  auto coord_port = (*node)->publish(coord);
  if (!coord_port.ok())
    return fail("server", coord_port.error().with_context("the coordinator"));
  std::printf("READY %u %u\n", (*node)->port(), *coord_port);
  std::fflush(stdout);
  auto limit = std::chrono::milliseconds(uint64_t(p.timeout_ms) * (p.steps + 1));
  if (done.wait_for(limit) != std::future_status::ready) {
    caf::anon_send_exit(coord, caf::exit_reason::user_shutdown);
    return fail("server", Error(ErrorCode::kTimeout, "the workers did not finish within " +
                                                         std::to_string(limit.count()) + " ms"));
  }
  std::string problem = done.get();
  caf::anon_send_exit(coord, caf::exit_reason::user_shutdown);
  if (!problem.empty())
    return fail("server", Error(ErrorCode::kInternal, problem));
  if (Status st = weights.pull(); !st.ok())
    return fail("server", st.error());
  for (uint64_t i = 0; i < p.elements; ++i)
    if (weights.view[i] != weight_after(p, p.steps - 1, i))
      return fail("server",
                  Error(ErrorCode::kInternal, "final weight " + std::to_string(i) + " is " +
                                                  std::to_string(weights.view[i]) + ", expected " +
                                                  std::to_string(weight_after(p, p.steps - 1, i))));
  auto stats = client.stats();
  std::printf(
      "server: final weights verified against the closed form (%llu elements, %s memory); "
      "registered buffers %llu, device %s\n",
      static_cast<unsigned long long>(p.elements), p.gpu ? "GPU" : "host",
      static_cast<unsigned long long>(stats.ok() ? stats->registered_buffers : 0),
      stats.ok() && !stats->device.empty() ? stats->device.c_str() : "none (fallback)");
  std::fflush(stdout);
  return 0;
}

// -- worker ------------------------------------------------------------------------------------

int run_worker(const Params& p, uint32_t rank, const std::string& server,
               const std::string& coordinator_addr) {
  std::string me = "worker " + std::to_string(rank);
  auto sp = parse_host_port(server);
  auto cp = parse_host_port(coordinator_addr);
  if (!sp.ok() || !cp.ok())
    return fail(me, !sp.ok() ? sp.error() : cp.error());
  uint64_t bytes = p.elements * sizeof(double);
  Tensor grad(p.elements, p.gpu, gpu_of(p, rank));  // outlive the node
  Tensor weights(p.elements, p.gpu, gpu_of(p, rank));
  for (const Tensor* t : {&grad, &weights})
    if (t->error())
      return fail(me, *t->error());
  auto node = RdmaNode::start();  // the defaults and the CAF_RDMA_* environment
  if (!node.ok())
    return fail(me, node.error());
  auto server_mgr = (*node)->remote_manager(sp->first, sp->second);
  if (!server_mgr.ok())
    return fail(me, server_mgr.error());
  auto coord = (*node)->connect(cp->first, cp->second, "the coordinator");
  if (!coord.ok())
    return fail(me, coord.error());
  RdmaClient remote((*node)->system(), *server_mgr);
  RdmaClient local((*node)->system(), (*node)->manager());
  auto grad_h = remote.get("grad/" + std::to_string(rank), 30000);
  auto weights_h = remote.get("weights", 30000);
  if (!grad_h.ok() || !weights_h.ok())
    return fail(me, !grad_h.ok() ? grad_h.error() : weights_h.error());
  auto lg = local.request_buffer(grad.address(), bytes);
  auto lw = local.request_buffer(weights.address(), bytes);
  if (!lg.ok() || !lw.ok())
    return fail(me, !lg.ok() ? lg.error() : lw.error());
  caf::scoped_actor self{(*node)->system()};
  std::string path;
  auto t0 = std::chrono::steady_clock::now();
  for (uint32_t s = 0; s < p.steps; ++s) {
    for (uint64_t i = 0; i < p.elements; ++i)
      grad.view[i] = gradient(rank, s, i);
    if (Status st = grad.push(); !st.ok())  // with --gpu: as if a kernel had computed them there
      return fail(me, st.error());
    auto w = local.write(*lg, *grad_h, Range::whole(), std::chrono::milliseconds(p.timeout_ms));
    if (!w.ok())
      return fail(me, w.error().with_context("step " + std::to_string(s) + " gradient write"));
    std::optional<Error> coord_error;
    self->request(*coord, std::chrono::milliseconds(p.timeout_ms), step_atom::value, rank, s)
        .receive([](uint32_t) {},
                 [&](caf::error& e) {
                   coord_error = Error(ErrorCode::kPeerUnavailable,
                                       "coordinator: " + (*node)->system().render(e));
                 });
    if (coord_error)
      return fail(me, *coord_error);
    auto r = local.read(*lw, *weights_h, Range::whole(), std::chrono::milliseconds(p.timeout_ms));
    if (!r.ok())
      return fail(me, r.error().with_context("step " + std::to_string(s) + " weights read"));
    if (Status st = weights.pull(); !st.ok())
      return fail(me, st.error());
    for (uint64_t i = 0; i < p.elements; ++i)
      if (weights.view[i] != weight_after(p, s, i))
        return fail(me, Error(ErrorCode::kInternal,
                              "step " + std::to_string(s) + ": weight " + std::to_string(i) +
                                  " is " + std::to_string(weights.view[i]) + ", expected " +
                                  std::to_string(weight_after(p, s, i))));
    path = w->path == r->path ? w->path : w->path + "/" + r->path;
  }
  // Tell the server we are done with its buffers.
  self->request(*coord, std::chrono::milliseconds(p.timeout_ms), step_atom::value, rank, p.steps)
      .receive([](uint32_t) {}, [](caf::error&) {});
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "%s: %u steps verified, %llu bytes of %s memory written and read per step, path %s, "
      "%.3f s\n",
      me.c_str(), p.steps, static_cast<unsigned long long>(bytes),
      p.gpu ? ("GPU " + std::to_string(gpu_of(p, rank))).c_str() : "host", path.c_str(), secs);
  std::fflush(stdout);
  return 0;
}

// -- launcher ----------------------------------------------------------------------------------

int run_all(const Params& p, const std::vector<std::string>& common) {
  std::vector<std::string> argv{self_executable(), "--role", "server"};
  argv.insert(argv.end(), common.begin(), common.end());
  auto server = ChildProcess::start(argv);
  if (!server.ok())
    return fail("parameter_server", server.error());
  auto ready = server->read_line(60s);
  if (!ready.ok() || ready->rfind("READY ", 0) != 0)
    return fail("parameter_server",
                ready.ok() ? Error(ErrorCode::kInternal, "server said: " + *ready) : ready.error());
  unsigned mgr_port = 0, coord_port = 0;
  std::sscanf(ready->c_str(), "READY %u %u", &mgr_port, &coord_port);
  std::printf(
      "parameter_server: server up (manager 127.0.0.1:%u, coordinator 127.0.0.1:%u), "
      "starting %u workers\n",
      mgr_port, coord_port, p.workers);
  std::fflush(stdout);
  std::vector<ChildProcess> workers;
  for (uint32_t w = 0; w < p.workers; ++w) {
    std::vector<std::string> wargv{self_executable(),
                                   "--role",
                                   "worker",
                                   "--rank",
                                   std::to_string(w),
                                   "--server",
                                   "127.0.0.1:" + std::to_string(mgr_port),
                                   "--coordinator",
                                   "127.0.0.1:" + std::to_string(coord_port)};
    wargv.insert(wargv.end(), common.begin(), common.end());
    auto c = ChildProcess::start(wargv);
    if (!c.ok())
      return fail("parameter_server", c.error());
    workers.push_back(std::move(*c));
  }
  auto limit = std::chrono::milliseconds(uint64_t(p.timeout_ms) * (p.steps + 2));
  int failures = 0;
  auto drain = [&](ChildProcess& c, const std::string& who) {
    while (true) {
      auto line = c.read_line(limit);
      if (!line.ok())
        break;
      std::printf("  %s\n", line->c_str());
    }
    auto rc = c.wait_for(10s);
    if (!rc || *rc != 0) {
      std::printf("parameter_server: %s %s\n", who.c_str(),
                  rc ? ("exited with " + std::to_string(*rc)).c_str() : "did not exit");
      ++failures;
    }
  };
  for (uint32_t w = 0; w < p.workers; ++w)
    drain(workers[w], "worker " + std::to_string(w));
  if (failures > 0) {
    // The server would wait for the failed workers' steps until its timeout: stop it now.
    std::printf("parameter_server: stopping the server (a worker failed)\n");
    server->kill(SIGKILL);
    limit = std::chrono::milliseconds(10000);
  }
  drain(*server, "server");
  std::fflush(stdout);
  if (failures > 0) {
    std::printf("parameter_server: FAILED\n");
    return 1;
  }
  std::printf(
      "parameter_server: OK: %u workers x %u steps x %llu bytes of %s memory, every step "
      "verified\n",
      p.workers, p.steps, static_cast<unsigned long long>(p.elements) * sizeof(double),
      p.gpu ? "GPU" : "host");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = Flags::parse(argc, argv,
                            {"--workers", "--steps", "--size", "--timeout-ms", "--role", "--rank",
                             "--server", "--coordinator", "--host"},
                            {"--help", "-h", "--gpu"});
  if (!flags.ok()) {
    std::fprintf(stderr, "parameter_server: %s\n%s", flags.error().message().c_str(), kUsage);
    return 2;
  }
  if (flags->has("--help") || flags->has("-h")) {
    std::printf("%s", kUsage);
    return 0;
  }
  Params p;
  auto workers = flags->get_u64("--workers", 2);
  auto steps = flags->get_u64("--steps", 5);
  auto size = flags->get_u64("--size", 1 << 20);
  auto timeout = flags->get_u64("--timeout-ms", 60000);
  auto rank = flags->get_u64("--rank", 0);
  for (auto* r : {&workers, &steps, &size, &timeout, &rank})
    if (!r->ok()) {
      std::fprintf(stderr, "parameter_server: %s\n", r->error().message().c_str());
      return 2;
    }
  if (*workers < 1 || *workers > 64 || *steps < 1 || *size < 8 || *timeout < 1) {
    std::fprintf(stderr,
                 "parameter_server: need 1 <= --workers <= 64, --steps >= 1, "
                 "--size >= 8, --timeout-ms >= 1\n");
    return 2;
  }
  p.workers = static_cast<uint32_t>(*workers);
  p.steps = static_cast<uint32_t>(*steps);
  p.elements = *size / 8;
  p.timeout_ms = static_cast<uint32_t>(*timeout);
  p.gpu = flags->has("--gpu");
  std::vector<std::string> common{
      "--workers", std::to_string(p.workers), "--steps",      std::to_string(p.steps),
      "--size",    std::to_string(*size),     "--timeout-ms", std::to_string(p.timeout_ms)};
  if (p.gpu)
    common.emplace_back("--gpu");
  std::string role = flags->get("--role", "");
  if (role == "server")
    return run_server(p, flags->get("--host", "127.0.0.1"));
  if (flags->has("--host")) {
    std::fprintf(stderr, "parameter_server: --host is for --role server\n");
    return 2;
  }
  if (role == "worker" && *rank >= p.workers) {
    std::fprintf(stderr, "parameter_server: need --rank < --workers\n");
    return 2;
  }
  if (role == "worker")
    return run_worker(p, static_cast<uint32_t>(*rank), flags->get("--server", ""),
                      flags->get("--coordinator", ""));
  if (!role.empty()) {
    std::fprintf(stderr, "parameter_server: unknown --role '%s'\n", role.c_str());
    return 2;
  }
  return run_all(p, common);
}
