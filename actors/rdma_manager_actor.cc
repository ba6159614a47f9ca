// RdmaManagerActor: spawning, the behavior (a handler per message, each calling the state), and
// the handle directory.
#include "actors/rdma_manager_actor.h"

#include "primitives/cuda_driver.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <caf/actor_proxy.hpp>

#include "actors/detail/manager_state.h"
#include "actors/list_worker.h"
#include "actors/op_texts.h"
#include "actors/request_audience.h"
#include "actors/transport/open_device.h"
#include "primitives/device_list.h"
#include "primitives/log.h"

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

Result<std::vector<std::string>> parse_devices(const std::string& text) {
  auto bad = [&text](const std::string& why) {
    return Error(ErrorCode::kInvalidArgument, std::string("environment variable ") + kEnvDevices +
                                                  "='" + text + "' " + why +
                                                  " (a comma-separated list of device names, "
                                                  "or all)");
  };
  std::vector<std::string> out;
  if (text == "all")
    return out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos)
      end = text.size();
    std::string name = text.substr(start, end - start);
    if (name.empty())
      return bad("has an empty name");
    if (std::find(out.begin(), out.end(), name) != out.end())
      return bad("names " + name + " twice");
    out.push_back(std::move(name));
    start = end + 1;
  }
  if (out.size() > kMaxRails + 1)
    return bad("names more than " + std::to_string(kMaxRails + 1) + " devices");
  return out;
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
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvFallbackChunk, 4096, kMaxChunkBytes, o.fallback_chunk_bytes));
  uint64_t max_timeout = static_cast<uint64_t>(o.max_timeout.count());
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvMaxTimeout, 1, UINT32_MAX, max_timeout));
  o.max_timeout = std::chrono::milliseconds(max_timeout);
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvFallbackWindow, 1, 1024, window));
  o.fallback_window = static_cast<uint32_t>(window);
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvStreamMin, 0, 1ull << 40, o.stream_min_bytes));
  CAF_RDMA_RETURN_IF_ERROR(
      number(kEnvPeerWindow, kWindowMinCharge, 1ull << 40, o.peer_window_bytes));
  CAF_RDMA_RETURN_IF_ERROR(
      number(kEnvTotalWindow, kWindowMinCharge, 1ull << 40, o.total_window_bytes));
  uint64_t qps_per_node = o.max_qps_per_node, qps = o.max_qps;
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvMaxQpsPerNode, 1, 1u << 20, qps_per_node));
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvMaxQps, 1, 1u << 20, qps));
  o.max_qps_per_node = static_cast<uint32_t>(qps_per_node);
  o.max_qps = static_cast<uint32_t>(qps);
  uint64_t inline_us = static_cast<uint64_t>(o.inline_poll.count());
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvInlinePoll, 0, 100000, inline_us));
  o.inline_poll = std::chrono::microseconds(inline_us);
  uint64_t busy_us = static_cast<uint64_t>(o.busy_poll.count());
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvBusyPoll, 0, kMaxBusyPollUs, busy_us));
  o.busy_poll = std::chrono::microseconds(busy_us);
  uint64_t same_host = o.same_host ? 1 : 0;
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvSameHost, 0, 1, same_host));
  o.same_host = same_host == 1;
  uint64_t verify = o.verify ? 1 : 0;
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvVerify, 0, 1, verify));
  o.verify = verify == 1;
  uint64_t orphans = o.release_orphans ? 1 : 0;
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvReleaseOrphans, 0, 1, orphans));
  o.release_orphans = orphans == 1;
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
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvStripeMin, 1, 1ull << 40, o.stripe_min_bytes));
  // The classes' traffic: unset keeps -1 (the device's).
  auto traffic = [&](const char* var, uint64_t hi, int& out) -> Status {
    uint64_t n = UINT64_MAX;
    CAF_RDMA_RETURN_IF_ERROR(number(var, 0, hi, n));
    if (n != UINT64_MAX)
      out = static_cast<int>(n);
    return {};
  };
  CAF_RDMA_RETURN_IF_ERROR(traffic(kEnvLatencyTrafficClass, 255, o.latency_traffic.traffic_class));
  CAF_RDMA_RETURN_IF_ERROR(traffic(kEnvLatencyServiceLevel, 15, o.latency_traffic.service_level));
  CAF_RDMA_RETURN_IF_ERROR(
      traffic(kEnvBackgroundTrafficClass, 255, o.background_traffic.traffic_class));
  CAF_RDMA_RETURN_IF_ERROR(
      traffic(kEnvBackgroundServiceLevel, 15, o.background_traffic.service_level));
  uint64_t stripe_qps = o.stripe_qps;
  CAF_RDMA_RETURN_IF_ERROR(number(kEnvStripeQps, 1, kMaxStripeQps, stripe_qps));
  o.stripe_qps = static_cast<uint32_t>(stripe_qps);
  if (const char* v = std::getenv(kEnvDevices); v != nullptr && *v != '\0') {
    CAF_RDMA_ASSIGN_OR_RETURN(auto devices, parse_devices(v));
    if (devices.empty()) {
      o.all_devices = true;
    } else {
      if (!o.ibverbs.device_name.empty() && o.ibverbs.device_name != devices.front())
        return Error(ErrorCode::kInvalidArgument, std::string("environment variables ") +
                                                      kEnvDevices + "='" + v + "' and " +
                                                      kEnvDevice + "='" + o.ibverbs.device_name +
                                                      "' name different primary devices");
      o.ibverbs.device_name = devices.front();
      o.rail_devices.assign(devices.begin() + 1, devices.end());
    }
  }
  o.from_environment = true;
  return o;
}

namespace {

detail::manager_impl_actor::behavior_type manager(detail::ManagerState::Self self,
                                                  ManagerOptions options,
                                                  std::shared_ptr<Nic> domain,
                                                  std::vector<std::shared_ptr<Nic>> rails,
                                                  std::string no_rdma_reason) {
  self->state.init(self, std::move(options), std::move(domain), std::move(rails),
                   std::move(no_rdma_reason));
  self->set_down_handler([=](caf::down_msg& msg) {
    if (!self->state.registrants.on_down(msg))
      self->state.links.on_down(msg);
  });
  // Requests that act on this node's memory: this node's actors only (invariant 6). Which
  // requests, and their names, come from the table (actors/request_audience.h).
  auto refused = [=](auto atom) -> caf::error {
    constexpr const RequestInfo& request = request_of<decltype(atom)>();
    static_assert(request.audience == Audience::kLocal, "only local requests are refused here");
    Status st = self->state.local_only(request.name);
    return st.ok() ? caf::error{} : to_caf_error(st.error());
  };
  return {
      // -- this node's actors only (local_requests_actor) --
      [=](request_buffer_atom a, uint64_t addr, uint64_t size,
          uint8_t access) -> caf::result<BufferHandle> {
        if (auto err = refused(a))
          return err;
        return self->state.buffer_table.request_buffer(addr, size, access);
      },
      [=](release_buffer_atom a, uint64_t id) -> caf::result<uint64_t> {
        if (auto err = refused(a))
          return err;
        return self->state.buffer_table.release_buffer(id);
      },
      [=](transfer_atom a, TransferOp op, uint32_t timeout_ms) -> caf::result<TransferReply> {
        if (auto err = refused(a))
          return err;
        return self->state.transfer(std::move(op), timeout_ms);
      },
      [=](batch_atom a, std::vector<TransferOp> ops,
          uint32_t timeout_ms) -> caf::result<std::vector<TransferOutcome>> {
        if (auto err = refused(a))
          return err;
        return self->state.batch(std::move(ops), timeout_ms);
      },
      [=](transfer_list_atom a, TransferListMsg& m,
          uint32_t timeout_ms) -> caf::result<ListOutcome> {
        if (auto err = refused(a))
          return err;
        if (timeout_ms == 0)
          return to_caf_error(zero_list_timeout_error());
        // A worker of its own moves it (actors/list_worker.h): the manager does not block.
        const auto& running = self->state.list_workers();
        if (running->load() >= kMaxListWorkers)
          return make_rdma_error(ErrorCode::kResourceExhausted,
                                 std::to_string(kMaxListWorkers) +
                                     " transfer lists run already (kMaxListWorkers): try again "
                                     "once one ended");
        ++*running;
        list_worker_actor worker;
        try {
          worker = spawn_list_worker(self->home_system(), caf::actor_cast<rdma_manager_actor>(self),
                                     self->state.stream_lane(), running, self->state.list_stop());
        } catch (const std::exception& e) {
          --*running;
          return make_rdma_error(ErrorCode::kResourceExhausted,
                                 std::string("cannot start a transfer list's worker: ") + e.what());
        }
        return self->delegate(worker, a, std::move(m), timeout_ms);
      },
      [=](cancel_atom a, uint64_t request) -> caf::result<void> {
        // No answer of its own (cancel_request.h; CAF sends no empty answer to a plain
        // message): only the refusal of another node's actor, as for every local request.
        if (auto err = refused(a))
          return err;
        if (self->current_sender())
          self->state.cancel(caf::actor_cast<caf::actor_addr>(self->current_sender()), request);
        return caf::unit;
      },
      [=](stream_lane_atom a) -> caf::result<StreamLaneGrant> {
        if (auto err = refused(a))
          return err;
        return StreamLaneGrant{self->state.stream_lane()};
      },
      [=](lane_open_atom a, BufferHandle remote, uint32_t timeout_ms,
          uint8_t priority) -> caf::result<LaneGrant> {
        if (auto err = refused(a))
          return err;
        return self->state.lanes.open_lane(std::move(remote), timeout_ms, priority);
      },
      [=](ask_check_atom a, const BufferHandle& remote, uint64_t offset, uint64_t length,
          uint8_t kind, uint32_t timeout_ms) -> caf::result<TransferOutcome> {
        if (auto err = refused(a))
          return err;
        // At least 1 ms: 0 would end the question before it was asked.
        return self->state.peer_table.ask_owner_check(
            remote, offset, length, kind,
            std::chrono::milliseconds(std::max<uint32_t>(timeout_ms, 1)));
      },
      [=](ask_sum_atom a, const BufferHandle& remote, uint64_t offset,
          uint64_t length) -> caf::result<uint64_t> {
        if (auto err = refused(a))
          return err;
        return self->state.peer_table.ask_owner_checksum(remote, offset, length);
      },
      [=](dir_put_atom a, std::string key, BufferHandle h) -> caf::result<bool> {
        if (auto err = refused(a))
          return err;
        return self->state.directory.dir_put(std::move(key), std::move(h));
      },
      [=](watch_writes_atom a, uint64_t id, const caf::actor& watcher) -> caf::result<bool> {
        if (auto err = refused(a))
          return err;
        return self->state.notices.watch(id, watcher);
      },
      // -- anyone: read-only questions (manager_questions_actor) --
      [=](dir_get_atom, const std::string& key, uint32_t wait_ms) {
        return self->state.directory.dir_get(key, wait_ms);
      },
      [=](peer_state_atom, const caf::actor& peer) -> caf::result<std::string> {
        return self->state.peer_table.peer_state(peer);
      },
      [=](stats_atom) -> caf::result<ManagerStats> {
        ManagerStats s = self->state.stats();
        // This node's actors (their ids and names) are its own business: a peer sees counts.
        if (!self->state.local_only("stats").ok())
          s.registrants.clear();
        return s;
      },
      // -- the peer protocol (peer_protocol_actor): buffers named by id and secret --
      [=](qp_connect_atom, const QpInfoMsg& remote) {
        return self->state.handshakes.accept_connect(remote);
      },
      [=](fetch_atom, const BufferRef& ref, uint64_t offset, uint64_t length) {
        return self->state.windows.fetch(ref, offset, length);
      },
      [=](fetch_list_atom, const BufferRef& ref, std::vector<PackedRange>& ranges) {
        return self->state.windows.fetch(ref, std::move(ranges));
      },
      [=](read_ack_atom, uint64_t token) { return token; },
      // store and atomic from the facade carry their arrival (detail::OwnerDue, peer_facade.h
      // invariant 7); in the public shape (a sender of this process) they arrive now.
      [=](store_atom, const BufferRef& ref, uint64_t offset, const ByteChunk& bytes,
          uint64_t receipt, uint32_t left_ms) {
        return self->state.buffer_table.store(ref, offset, bytes, receipt,
                                              detail::OwnerDue{self->clock().now(), left_ms});
      },
      [=](store_atom, const BufferRef& ref, uint64_t offset, const ByteChunk& bytes,
          uint64_t receipt, const detail::OwnerDue& due) {
        return self->state.buffer_table.store(ref, offset, bytes, receipt, due);
      },
      [=](store_list_atom, const BufferRef& ref, const std::vector<PackedRange>& ranges,
          const ByteChunk& bytes, uint32_t left_ms) {
        return self->state.buffer_table.store_ranges(
            ref, ranges, bytes, detail::OwnerDue{self->clock().now(), left_ms});
      },
      [=](store_list_atom, const BufferRef& ref, const std::vector<PackedRange>& ranges,
          const ByteChunk& bytes, const detail::OwnerDue& due) {
        return self->state.buffer_table.store_ranges(ref, ranges, bytes, due);
      },
      [=](stream_grant_atom, const BufferRef& ref, uint64_t offset, uint64_t length, uint8_t kind,
          uint32_t timeout_ms) {
        return self->state.grants.stream_grant(ref, offset, length, kind, timeout_ms);
      },
      [=](gpu_close_atom, const std::string& handle) {
        return self->state.exports.close_imports(handle);
      },
      [=](lane_drop_atom, uint64_t lane) { self->state.lanes.drop_lane(lane); },
      [=](device_gone_atom, const std::string& what) { self->state.device.peer_device_gone(what); },
      [=](buf_check_atom, const BufferRef& ref, uint64_t offset, uint64_t length, uint8_t kind) {
        return self->state.buffer_table.check_access(ref, offset, length, kind);
      },
      [=](buf_sum_atom, const BufferRef& ref, uint64_t offset, uint64_t length) {
        return self->state.buffer_table.checksum(ref, offset, length);
      },
      [=](atomic_atom, const BufferRef& ref, uint64_t offset, uint8_t kind, uint64_t operand,
          uint64_t compare, uint32_t left_ms) {
        return self->state.buffer_table.atomic(ref, offset, kind, operand, compare,
                                               detail::OwnerDue{self->clock().now(), left_ms});
      },
      [=](atomic_atom, const BufferRef& ref, uint64_t offset, uint8_t kind, uint64_t operand,
          uint64_t compare, const detail::OwnerDue& due) {
        return self->state.buffer_table.atomic(ref, offset, kind, operand, compare, due);
      },
      [=](notice_atom, const BufferRef& ref, uint64_t offset, uint64_t length, uint64_t tag,
          uint64_t receipt, const std::string& writer) {
        return self->state.notices.notice(ref, offset, length, tag, receipt, writer);
      },
      // -- internal events (unserializable types: from this process only) --
      [=](detail::OpDone& e) {
        self->state.posted_by(e.path).completed(detail::OpId{e.ticket, e.index},
                                                std::move(e.outcome), static_cast<OpFault>(e.fault),
                                                e.chunk);
      },
      [=](const detail::FenceDone& e) {
        self->state.notices.fenced(detail::OpId{e.ticket, e.index}, e.outcome);
      },
      [=](const detail::ReceiptLanded& e) { self->state.receipts.received(e.node, e.imm); },
      [=](const detail::ReceiptDue& e) { self->state.receipts.due(e.waiter); },
      [=](const detail::OpTimeout& e) {
        self->state.op_timeout(e.ticket, static_cast<detail::DeadlineStage>(e.stage));
      },
      [=](const detail::OpTick& e) { self->state.deadline_tick(e.at); },
      [=](detail::StreamDone& e) {
        self->state.stream_done(detail::OpId{e.ticket, e.index}, e.local_id, std::move(e.outcome),
                                e.refused);
      },
      [=](const detail::StreamServed& e) {
        self->state.grants.stream_served(e.token, e.bytes, e.exported);
      },
      [=](const detail::StreamExpire& e) { self->state.grants.stream_expire(e.token); },
      [=](const detail::ChunkSent& e) { self->state.buffer_table.chunk_sent(e.id); },
      [=](const detail::LaneClosed& e) { self->state.lanes.close_lane(e.id); },
      [=](const detail::LaneIdle& e) { self->state.buffer_table.lane_idle(e.id); },
      [=](const detail::DirTimeout& e) { self->state.directory.dir_timeout(e.key, e.id); },
      [=](const detail::OrphanCheck& e) { self->state.registrants.report(e.batch); },
      [=](detail::SetName& e) { self->state.set_name(std::move(e.name)); },
      [=](const detail::DeviceChanged& e) { self->state.device.device_changed(e); },
      [=](const detail::ReopenDevice& e) { self->state.device.reopen_device(e.attempt); },
      [=](const detail::StagingFreed&) { self->state.staging_freed(); },
      [=](const detail::WindowExpire& e) { self->state.windows.window_expire(e.node); },
      [=](const detail::WindowRetry& e) { self->state.windows.window_retry(e.node); },
      [=](const detail::GetFacade&) -> caf::actor { return self->state.facade(); },
      [=](detail::UseConnector& e) {
        self->state.links.use_connector(std::move(e.connector), e.timeout);
      },
      [=](const detail::Reconnect& e) { self->state.links.reconnect(e.key, e.attempt); },
  };
}

}  // namespace

Result<rdma_manager_actor> spawn_manager(caf::actor_system& sys, ManagerOptions options) {
  CAF_RDMA_RETURN_IF_ERROR(options.ibverbs.validate());
  if (options.fallback_chunk_bytes == 0 || options.fallback_window == 0 ||
      options.fallback_chunk_bytes > kMaxChunkBytes)
    return Error(ErrorCode::kInvalidArgument,
                 "ManagerOptions: fallback_chunk_bytes must be in 1.." +
                     std::to_string(kMaxChunkBytes) + " and fallback_window > 0");
  if (options.peer_window_bytes < kWindowMinCharge ||
      options.total_window_bytes < kWindowMinCharge || options.window_wait.count() <= 0)
    return Error(ErrorCode::kInvalidArgument,
                 "ManagerOptions: peer_window_bytes and total_window_bytes must be at least " +
                     std::to_string(kWindowMinCharge) + " and window_wait > 0");
  if (options.max_qps_per_node == 0 || options.max_qps == 0)
    return Error(ErrorCode::kInvalidArgument,
                 "ManagerOptions: max_qps_per_node and max_qps must be at least 1");
  if (options.priority_aging < std::chrono::milliseconds(1) || options.priority_aging > kMaxAging)
    return Error(ErrorCode::kInvalidArgument, "ManagerOptions: priority_aging must be in 1.." +
                                                  std::to_string(kMaxAging.count()) + " ms, not " +
                                                  std::to_string(options.priority_aging.count()));
  CAF_RDMA_RETURN_IF_ERROR(options.latency_traffic.check("ManagerOptions::latency_traffic"));
  CAF_RDMA_RETURN_IF_ERROR(options.background_traffic.check("ManagerOptions::background_traffic"));
  if (options.max_timeout.count() <= 0 || options.max_timeout.count() > UINT32_MAX)
    return Error(ErrorCode::kInvalidArgument,
                 "ManagerOptions: max_timeout must be in 1.." + std::to_string(UINT32_MAX) + " ms");
  std::shared_ptr<Nic> domain;
  std::vector<std::shared_ptr<Nic>> rails;
  std::string reason;
  if (options.mode == TransportMode::kFallback) {
    reason = std::string("RDMA disabled (") + kEnvTransport + "=fallback)";
  } else {
    auto d = detail::open_device(options, options.ibverbs);
    if (d.ok()) {
      domain = *d;
      if (!domain->warning().empty())
        log_line(LogLevel::kWarn, "%s", domain->warning().c_str());
      auto opened = detail::open_rails(options, domain->device_name());
      if (!opened.ok())
        return opened.error();
      rails = std::move(*opened);
    } else if (options.mode == TransportMode::kRdma) {
      return d.error().with_context(fallback_forbidden_text() + ", but no RDMA device can be used");
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
  // The public handle: the internal events are not part of its interface.
  rdma_manager_actor handle = sys.spawn(manager, std::move(options), std::move(domain),
                                        std::move(rails), std::move(reason));
  return handle;
}

namespace detail {

void ManagerState::init(Self self, ManagerOptions options, std::shared_ptr<Nic> domain,
                        std::vector<std::shared_ptr<Nic>> rails, std::string no_rdma_reason) {
  self_ = self;
  options_ = std::move(options);
  // Peers reach this manager, and it reaches them, only through the facade (peer_facade.h).
  facade_ = self_->spawn<PeerFacade>(self_->address(), options_.name, facade_counters_);
  self_->monitor(facade_);
  nic_.domain = std::move(domain);
  for (auto& d : rails) {
    RailDevice rail;
    rail.name = d->device_name();
    rail.domain = std::move(d);
    nic_.rails.push_back(std::move(rail));
  }
  this->rails.watch();
  nic_.no_rdma_reason = std::move(no_rdma_reason);
  if (nic_.domain) {
    nic_.poller = std::make_unique<CompletionPoller>();
    device.watch_device();
    if (const std::string note = nic_.domain->selection_note(); !note.empty())
      log_line(LogLevel::kInfo, "%s: %s", options_.name.c_str(), note.c_str());
  }
  if (!options_.stream_host.empty() && options_.stream_min_bytes > 0 &&
      options_.mode != TransportMode::kRdma) {
    // Without a stream channel (e.g. the address cannot be bound) the fallback uses CAF chunks.
    TlsContext tls;
    bool usable = true;
    if (options_.stream_tls.any()) {
      auto ctx = tls_stream_context(options_.stream_tls);
      if (ctx.ok())
        tls = *ctx;
      else
        log_line(LogLevel::kWarn, "%s: no stream channel (fallback bytes go in CAF messages): %s",
                 options_.name.c_str(), ctx.error().message().c_str());
      usable = ctx.ok();
    }
    if (usable) {
      StreamServer::Limits limits;
      limits.same_host = options_.same_host;
      limits.priority_aging = options_.priority_aging;
      if (auto server = StreamServer::start(options_.stream_host, limits, tls); server.ok()) {
        stream_server_ = std::move(*server);
        stream_server_->set_authorizer(
            handle_authorizer(registry_, self_->address(), options_.max_timeout));
        stream_server_->set_served([served = served_](const StreamServer::Served& r) {
          served->record(
              r.same_host ? std::string(kSameHostPeer) : ipv4_text(r.peer_ip),
              r.same_host ? kServedSameHost : kServedStream,
              wire_kind(r.direction == StreamDirection::kIntoOwner ? TransferKind::kWrite
                                                                   : TransferKind::kRead),
              r.bytes);
        });
      }
      stream_client_ = std::make_shared<StreamClient>(options_.stream_threads, tls,
                                                      options_.same_host, options_.priority_aging);
      if (!options_.verify)
        stream_lane_ = std::make_shared<StreamLane>(registry_, stream_endpoints_, stream_client_,
                                                    self_->address(), options_.stream_min_bytes);
    }
  }
  if (!options_.named_later)
    say_started();
}

void ManagerState::say_started() const {
  std::string stream = stream_server_
                           ? "; fallback stream channel on " + stream_server_->host() + ":" +
                                 std::to_string(stream_server_->port()) +
                                 (options_.stream_tls.any() ? " (TLS)" : "") +
                                 (stream_server_->unix_name().empty()
                                      ? std::string()
                                      : ", same-host endpoint @" + stream_server_->unix_name())
                           : std::string();
  if (nic_.domain) {
    log_line(LogLevel::kInfo, "%s: started, transport %s: RDMA on %s%s%s", options_.name.c_str(),
             to_string(options_.mode), nic_.domain->describe().c_str(), rails.describe().c_str(),
             stream.c_str());
    return;
  }
  // A device the program or CAF_RDMA_DEVICE named and did not get is worth a warning.
  const bool asked = !options_.ibverbs.device_name.empty();
  const std::string wanted =
      asked ? " (device " + options_.ibverbs.device_name + " was asked for)" : std::string();
  // The long "how to get a device" hint is caf_rdma_doctor's to give, not every start's.
  std::string why = nic_.no_rdma_reason;
  if (auto hint = why.find(kNoDeviceHint); hint != std::string::npos)
    why = why.substr(0, hint) + "caf_rdma_doctor says what this host lacks.";
  log_line(asked && options_.mode != TransportMode::kFallback ? LogLevel::kWarn : LogLevel::kInfo,
           "%s: started, transport %s: no RDMA%s, the fallback carries every transfer%s. Why: %s",
           options_.name.c_str(), to_string(options_.mode), wanted.c_str(), stream.c_str(),
           why.c_str());
}

ManagerState::~ManagerState() {
  nic_.monitor.reset();
  // Stop polling first; then the QPs go (their destructors fail what is left, whose
  // callbacks find the actor gone and do nothing).
  nic_.poller.reset();
  // Stream threads stop before the buffers go (their callbacks find the actor gone).
  if (stream_client_)
    stream_client_->stop();  // also for the stream lane's jobs, which may outlive us
  stream_lane_.reset();
  stream_client_.reset();
  stream_server_.reset();
  peer_table.peers().clear();
  nic_.loopback.reset();
}

// -- trust and bounds --------------------------------------------------------------------------

Status ManagerState::local_only(const char* request) const {
  const auto& sender = self_->current_sender();
  // A proxy stands for an actor of another process: one claiming this node's id was made from a
  // forged BASP handshake, so it is refused like any remote sender.
  const bool proxy =
      sender && dynamic_cast<caf::actor_proxy*>(caf::actor_cast<caf::abstract_actor*>(sender));
  // The facade forwards none of these; anything it forwards came from the network.
  const auto* element = self_->current_mailbox_element();
  const bool via_facade = element != nullptr && !element->stages.empty();
  if (sender && sender->node() == self_->node() && !proxy && !via_facade)
    return {};
  return Error(
      ErrorCode::kPermissionDenied,
      std::string(request) + " from " +
          (sender ? std::string(proxy ? "network proxy " : "actor ") +
                        std::to_string(sender->id()) + " of node " + caf::to_string(sender->node())
                  : std::string("an anonymous sender")) +
          " refused by " + options_.name +
          ": only actors of the manager's own node may make this request (send it to "
          "your node's manager)");
}

uint32_t ManagerState::capped(uint32_t timeout_ms) const {
  return static_cast<uint32_t>(
      std::min<int64_t>(timeout_ms, static_cast<int64_t>(options_.max_timeout.count())));
}

// -- directory ---------------------------------------------------------------------------------

ManagerStats ManagerState::stats() const {
  ManagerStats s;
  s.device = nic_.domain ? nic_.domain->device_name() : "";
  s.transport = to_string(options_.mode);
  s.rdma_ops = counters_.rdma_ops;
  s.rdma_bytes = counters_.rdma_bytes;
  s.fallback_ops = counters_.fallback_ops;
  s.fallback_bytes = counters_.fallback_bytes;
  s.errors = counters_.errors;
  s.handshakes = counters_.handshakes;
  s.served_fallback_bytes = counters_.served_fallback_bytes;
  s.stream_ops = counters_.stream_ops;
  s.stream_refused = counters_.stream_refused;
  s.stream_grants_asked = counters_.stream_grants_asked;
  s.facade_dropped = facade_counters_->dropped.load(std::memory_order_relaxed);
  s.forged_answers = facade_counters_->forged.load(std::memory_order_relaxed);
  auto direct = registry_->counters();
  s.rdma_ops += direct.ops;
  s.rdma_bytes += direct.bytes;
  s.errors += direct.errors;
  s.direct_ops = direct.ops;
  s.fallback_ops += direct.stream_ops;
  s.fallback_bytes += direct.stream_bytes;
  s.errors += direct.stream_errors;
  s.stream_lane_ops = direct.stream_ops;
  s.served_fallback_bytes += direct.served_bytes;
  s.same_host_ops = stream_client_ ? stream_client_->same_host_ops() : 0;
  s.lanes = nic_.lanes.size();
  for (const auto& [key, peer] : peer_table.peers())
    s.lanes += peer.qps.lanes.size();
  for (const auto& [key, peer] : peer_table.peers())
    s.live_qps += (peer.qps.initiated ? 1 : 0) + (peer.qps.accepted ? 1 : 0) +
                  peer.qps.stripes.size() + peer.qps.stripes_accepted.size();
  s.live_qps += nic_.loopback ? 1 : 0;
  s.shared_cq_qps = nic_.completions ? nic_.completions->stats().attached : 0;
  s.polled_cqs = nic_.poller ? nic_.poller->sources() : 0;
  s.staged_chunks = counters_.staged_chunks;
  s.staged_overlapped = counters_.staged_overlapped;
  s.packed_chunks = counters_.packed_chunks;
  s.packed_ops = counters_.packed_ops;
  s.staged_pieces = counters_.staged_pieces;
  s.links_lost = counters_.links_lost;
  s.reconnects = counters_.reconnects;
  s.registrants = registrants.stats();
  s.orphaned_buffers = registrants.orphaned();
  s.notices_sent = counters_.notices_sent;
  s.notices_pending = notices.pending();
  s.notices_refused = counters_.notices_refused;
  s.notified_writes = counters_.notified_writes;
  s.rails = rails.names();
  s.striped_ops = counters_.striped_ops;
  s.stripe_slices = counters_.stripe_slices;
  s.stripe_failovers = counters_.stripe_failovers;
  s.spread_ops = counters_.spread_ops;
  uint64_t buffer_bytes = 0;
  for (const auto& [id, b] : buffer_table.buffers()) {
    s.registered_buffers += b.released ? 0 : 1;
    buffer_bytes += b.released ? 0 : b.size;
    s.busy_buffers += b.in_use > 0 || registry_->busy(id) ? 1 : 0;
  }
  if (nic_.domain)
    s.registered_bytes = nic_.domain->registration_stats().registered_bytes;
  s.window_bytes = windows.held();
  s.fetches_waiting = windows.fetches_waiting();
  s.device_losses = nic_.device_losses;
  s.device_reopens = nic_.device_reopens;
  s.telemetry = telemetry_.snapshot();
  s.telemetry.served = served_->rows();
  Telemetry::merge(s.telemetry, registry_->telemetry());
  s.telemetry.stream_grants = grants.open_grants();
  s.telemetry.staging_busy = staged_.slots_busy();
  s.telemetry.staging_buffers = staged_.slots_made();
  s.telemetry.buffer_bytes = buffer_bytes;
  s.no_rdma_reason = !nic_.domain             ? nic_.no_rdma_reason
                     : nic_.port_down.empty() ? ""
                                              : "RDMA port down: " + nic_.port_down;
  return s;
}

}  // namespace detail
}  // namespace caf_rdma
