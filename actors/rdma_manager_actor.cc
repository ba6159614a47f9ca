// RdmaManagerActor: spawning, the behavior (a handler per message, each calling the state), and
// the handle directory.
#include "actors/rdma_manager_actor.h"

#include "primitives/cuda_driver.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "actors/detail/manager_state.h"

namespace caf_rdma {

const char* to_string(TransportMode mode) {
  switch (mode) {
    case TransportMode::kAuto:
      return "auto";
    case TransportMode::kRdma:
      return "rdma";
    case TransportMode::kFallback:
      return "fallback";
  }
  return "?";
}

Result<ManagerOptions> ManagerOptions::from_env() {
  ManagerOptions o;
  CAF_RDMA_ASSIGN_OR_RETURN(o.ibverbs, IbverbsConfig::from_env());
  if (const char* v = std::getenv(kEnvTransport); v != nullptr && *v != '\0') {
    if (std::strcmp(v, "auto") == 0)
      o.mode = TransportMode::kAuto;
    else if (std::strcmp(v, "rdma") == 0)
      o.mode = TransportMode::kRdma;
    else if (std::strcmp(v, "fallback") == 0)
      o.mode = TransportMode::kFallback;
    else
      return Error(ErrorCode::kInvalidArgument, std::string("environment variable ") +
                                                    kEnvTransport + "='" + v +
                                                    "' must be auto, rdma or fallback");
  }
  auto number = [](const char* var, uint64_t lo, uint64_t hi, uint64_t& out) -> Status {
    const char* v = std::getenv(var);
    if (v == nullptr || *v == '\0')
      return {};
    char* end = nullptr;
    errno = 0;
    unsigned long long n = std::strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0' || n < lo || n > hi)
      return Error(ErrorCode::kInvalidArgument, std::string("environment variable ") + var + "='" +
                                                    v + "' is not an integer in " +
                                                    std::to_string(lo) + ".." + std::to_string(hi));
    out = n;
    return {};
  };
  uint64_t window = o.fallback_window;
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvFallbackChunk, 4096, 1ull << 30, o.fallback_chunk_bytes));
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvFallbackWindow, 1, 1024, window));
  o.fallback_window = static_cast<uint32_t>(window);
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvStreamMin, 0, 1ull << 40, o.stream_min_bytes));
  uint64_t inline_us = static_cast<uint64_t>(o.inline_poll.count());
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvInlinePoll, 0, 100000, inline_us));
  o.inline_poll = std::chrono::microseconds(inline_us);
  uint64_t verify = o.verify ? 1 : 0;
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvVerify, 0, 1, verify));
  o.verify = verify == 1;
  if (const char* v = std::getenv(kEnvGpu); v != nullptr && *v != '\0') {
    uint64_t gpu = 0;
    CAF_RDMA_RETURN_IF_ERROR(number(kEnvGpu, 0, 1023, gpu));
    auto cuda = CudaDriver::get();
    if (!cuda.ok())
      return cuda.error().with_context(std::string(kEnvGpu) + "=" + v);
    auto bus = (*cuda)->pci_bus_id(static_cast<int>(gpu));
    if (!bus.ok())
      return bus.error().with_context(std::string(kEnvGpu) + "=" + v);
    o.ibverbs.near_pci_device = *bus;
  }
  return o;
}

namespace {

rdma_manager_actor::behavior_type manager(detail::ManagerState::Self self, ManagerOptions options,
                                          std::shared_ptr<RdmaDomain> domain,
                                          std::string no_rdma_reason) {
  self->state.init(self, std::move(options), std::move(domain), std::move(no_rdma_reason));
  self->set_down_handler([=](caf::down_msg& msg) { self->state.on_down(msg); });
  return {
      [=](request_buffer_atom, uint64_t addr, uint64_t size, uint8_t access) {
        return self->state.request_buffer(addr, size, access);
      },
      [=](release_buffer_atom, uint64_t id) { return self->state.release_buffer(id); },
      [=](transfer_atom, TransferOp op, uint32_t timeout_ms) {
        return self->state.transfer(std::move(op), timeout_ms);
      },
      [=](batch_atom, std::vector<TransferOp> ops, uint32_t timeout_ms) {
        return self->state.batch(std::move(ops), timeout_ms);
      },
      [=](qp_connect_atom, const QpInfoMsg& remote) { return self->state.accept_connect(remote); },
      [=](fetch_atom, uint64_t id, uint64_t offset, uint64_t length) {
        return self->state.fetch(id, offset, length);
      },
      [=](store_atom, uint64_t id, uint64_t offset, const ByteChunk& bytes) {
        return self->state.store(id, offset, bytes);
      },
      [=](lane_open_atom, BufferHandle remote, uint32_t timeout_ms) {
        return self->state.open_lane(std::move(remote), timeout_ms);
      },
      [=](lane_drop_atom, uint64_t lane, const caf::actor& initiator) {
        self->state.drop_lane(lane, initiator);
      },
      [=](peer_state_atom, const caf::actor& peer) -> caf::result<std::string> {
        return self->state.peer_state(peer);
      },
      [=](stats_atom) -> caf::result<ManagerStats> { return self->state.stats(); },
      [=](set_name_atom, std::string& name) { self->state.set_name(std::move(name)); },
      [=](dir_put_atom, std::string key, BufferHandle h) {
        return self->state.dir_put(std::move(key), std::move(h));
      },
      [=](dir_get_atom, const std::string& key, uint32_t wait_ms) {
        return self->state.dir_get(key, wait_ms);
      },
      [=](op_done_atom, uint64_t ticket, uint32_t index, TransferOutcome outcome, uint8_t fault) {
        self->state.op_done(ticket, index, std::move(outcome), static_cast<OpFault>(fault));
      },
      [=](buf_check_atom, uint64_t id, uint64_t offset, uint64_t length, uint8_t kind) {
        return self->state.check_access(id, offset, length, kind);
      },
      [=](checksum_atom, uint64_t id, uint64_t offset, uint64_t length) {
        return self->state.checksum(id, offset, length);
      },
      [=](ask_check_atom, const BufferHandle& remote, uint64_t offset, uint64_t length,
          uint8_t kind) { return self->state.ask_owner_check(remote, offset, length, kind); },
      [=](ask_sum_atom, const BufferHandle& remote, uint64_t offset, uint64_t length) {
        return self->state.ask_owner_checksum(remote, offset, length);
      },
      [=](op_timeout_atom, uint64_t ticket, uint32_t stage) {
        self->state.op_timeout(ticket, stage);
      },
      [=](stream_grant_atom, uint64_t id, uint64_t offset, uint64_t length, uint8_t kind,
          uint32_t timeout_ms) {
        return self->state.stream_grant(id, offset, length, kind, timeout_ms);
      },
      [=](stream_done_atom, uint64_t ticket, uint32_t index, uint64_t local_id,
          TransferOutcome outcome) {
        self->state.stream_done(ticket, index, local_id, std::move(outcome));
      },
      [=](stream_served_atom, uint64_t id, uint64_t bytes) {
        self->state.stream_served(id, bytes);
      },
      [=](stream_expire_atom, uint64_t id, uint64_t token) {
        self->state.stream_expire(id, token);
      },
      [=](op_tick_atom, int64_t at) { self->state.deadline_tick(at); },
      [=](lane_close_atom, uint64_t lane) { self->state.close_lane(lane); },
      [=](lane_idle_atom, uint64_t id) { self->state.lane_idle(id); },
      [=](dir_timeout_atom, const std::string& key, uint64_t id) {
        self->state.dir_timeout(key, id);
      },
  };
}

}  // namespace

Result<rdma_manager_actor> spawn_manager(caf::actor_system& sys, ManagerOptions options) {
  CAF_RDMA_RETURN_IF_ERROR(options.ibverbs.validate());
  if (options.fallback_chunk_bytes == 0 || options.fallback_window == 0)
    return Error(ErrorCode::kInvalidArgument,
                 "ManagerOptions: fallback_chunk_bytes and fallback_window must be > 0");
  std::shared_ptr<RdmaDomain> domain;
  std::string reason;
  if (options.mode == TransportMode::kFallback) {
    reason = std::string("RDMA disabled (") + kEnvTransport + "=fallback)";
  } else {
    auto d = RdmaDomain::open(options.ibverbs);
    if (d.ok()) {
      domain = *d;
      if (!domain->warning().empty())
        std::fprintf(stderr, "caf-rdma: WARNING: %s\n", domain->warning().c_str());
    } else if (options.mode == TransportMode::kRdma) {
      return d.error().with_context(std::string(kEnvTransport) +
                                    "=rdma forbids the fallback, but no RDMA device can be used");
    } else {
      reason = d.error().message();
    }
  }
  if (options.staging_bytes == 0 || options.staging_buffers == 0)
    return Error(ErrorCode::kInvalidArgument,
                 "ManagerOptions: staging_bytes and staging_buffers must be > 0");
  if (!options.device_memory)
    options.device_memory = cuda_device_memory();  // null without CUDA: all memory is host
  if (options.name.empty())
    options.name = "node " + to_string(sys.node()).substr(0, 12);
  return sys.spawn(manager, std::move(options), std::move(domain), std::move(reason));
}

namespace detail {

void ManagerState::init(Self self, ManagerOptions options, std::shared_ptr<RdmaDomain> domain,
                        std::string no_rdma_reason) {
  self_ = self;
  options_ = std::move(options);
  domain_ = std::move(domain);
  no_rdma_reason_ = std::move(no_rdma_reason);
  if (domain_)
    poller_ = std::make_unique<CompletionPoller>();
  if (!options_.stream_host.empty() && options_.stream_min_bytes > 0 &&
      options_.mode != TransportMode::kRdma) {
    // Without a stream channel (e.g. the address cannot be bound) the fallback uses CAF chunks.
    if (auto server = StreamServer::start(options_.stream_host); server.ok())
      stream_server_ = std::move(*server);
    stream_client_ = std::make_unique<StreamClient>(options_.stream_threads);
  }
}

ManagerState::~ManagerState() {
  // Stop polling first; then the QPs go (their destructors fail what is left, whose
  // callbacks find the actor gone and do nothing).
  poller_.reset();
  // Stream threads stop before the buffers go (their callbacks find the actor gone).
  stream_client_.reset();
  stream_server_.reset();
  peers_.clear();
  loopback_.reset();
}

// -- directory ---------------------------------------------------------------------------------

caf::result<bool> ManagerState::dir_put(std::string key, BufferHandle h) {
  auto waiters = dir_waiters_.find(key);
  if (waiters != dir_waiters_.end()) {
    for (auto& w : waiters->second)
      w.rp.deliver(h);
    dir_waiters_.erase(waiters);
  }
  directory_[std::move(key)] = std::move(h);
  return true;
}

caf::result<BufferHandle> ManagerState::dir_get(const std::string& key, uint32_t wait_ms) {
  auto it = directory_.find(key);
  if (it != directory_.end())
    return it->second;
  if (wait_ms == 0)
    return make_rdma_error(ErrorCode::kTimeout, "no buffer handle named '" + key +
                                                    "' in the directory of " + options_.name);
  auto rp = self_->make_response_promise<BufferHandle>();
  uint64_t id = next_dir_waiter_++;
  dir_waiters_[key].push_back(DirWaiter{id, rp});
  self_->delayed_send(self_, std::chrono::milliseconds(wait_ms), dir_timeout_atom::value, key, id);
  return rp;
}

void ManagerState::dir_timeout(const std::string& key, uint64_t id) {
  auto it = dir_waiters_.find(key);
  if (it == dir_waiters_.end())
    return;
  auto& ws = it->second;
  for (size_t i = 0; i < ws.size(); ++i) {
    if (ws[i].id != id)
      continue;
    ws[i].rp.deliver(make_rdma_error(ErrorCode::kTimeout, "no buffer handle named '" + key +
                                                              "' appeared in the directory of " +
                                                              options_.name + " in time"));
    ws.erase(ws.begin() + static_cast<long>(i));
    break;
  }
  if (ws.empty())
    dir_waiters_.erase(it);
}

}  // namespace detail
}  // namespace caf_rdma
