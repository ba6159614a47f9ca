#include "systems/kv_store/kv_client.h"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <cstring>
#include <functional>
#include <unordered_map>

#include "actors/rdma_client.h"
#include "actors/rdma_errors.h"
#include "actors/request_timer.h"
#include "components/same_host.h"
#include "systems/kv_store/kv_local_get.h"

namespace caf_rdma::kv {

namespace {

struct GatewayState {
  static inline const char* name = "kv_gateway";
  server_actor server;
  std::string server_name;
  uint64_t next_id = 0;
  std::unordered_map<uint64_t, std::function<void(const caf::error&)>> pending;
  caf::error gone;  // why the server is gone, once it is
};

// Forwards one request to the server; fails it when the server dies first.
// `what` ("get 'key'") names the request in errors CAF raises (no reply, server gone): they
// otherwise read "request_timeout" with neither the request nor the server.
template <class T, class... Ts>
caf::result<T> forward(server_actor::stateful_pointer<GatewayState> self,
                       std::chrono::milliseconds timeout, const std::string& what, Ts... xs) {
  auto& st = self->state;
  if (st.gone)
    return st.gone;
  auto rp = self->template make_response_promise<T>();
  uint64_t id = ++st.next_id;
  st.pending.emplace(id, [rp](const caf::error& e) mutable { rp.deliver(e); });
  self->request(st.server, timeout, xs...)
      .then(
          [=](T& value) mutable {
            if (self->state.pending.erase(id) > 0)
              rp.deliver(std::move(value));
          },
          [=](caf::error& err) mutable {
            if (self->state.pending.erase(id) == 0)
              return;
            if (err == caf::sec::request_timeout)
              rp.deliver(make_rdma_error(ErrorCode::kTimeout,
                                         what + ": kv_server at " + self->state.server_name + " " +
                                             kNoAnswer + " within " +
                                             std::to_string(timeout.count()) + " ms"));
            else if (err == caf::sec::request_receiver_down ||
                     err == caf::sec::no_route_to_receiving_node) {
              // The server went: the same answer as its down message gives (which may come
              // before or after this one), so the text does not depend on which came first.
              auto& st = self->state;
              if (!st.gone)
                st.gone = make_rdma_error(
                    ErrorCode::kPeerUnavailable,
                    "kv_server at " + st.server_name + " is gone (" + error_message(err) + ")");
              rp.deliver(st.gone);
            } else if (err.category() == caf::atom("system"))
              rp.deliver(make_rdma_error(
                  request_error_code(err),
                  what + ": kv_server at " + self->state.server_name + ": " + error_message(err)));
            else
              rp.deliver(std::move(err));
          });
  return rp;
}

server_actor::behavior_type gateway(server_actor::stateful_pointer<GatewayState> self,
                                    const server_actor& server, std::string server_name,
                                    uint32_t timeout_ms) {
  self->state.server = server;
  self->state.server_name = std::move(server_name);
  self->monitor(server);
  self->set_down_handler([=](const caf::down_msg& dm) {
    auto& st = self->state;
    st.gone =
        make_rdma_error(ErrorCode::kPeerUnavailable, "kv_server at " + st.server_name +
                                                         " is gone (" + to_string(dm.reason) + ")");
    auto pending = std::move(st.pending);
    st.pending.clear();
    for (auto& [id, fail] : pending)
      fail(st.gone);
  });
  // The server bounds its transfers by its own limit; allow that plus the round trip.
  auto t = std::chrono::milliseconds(timeout_ms) + std::chrono::seconds(40);
  return {
      [=](put_atom a, std::string& k, BufferHandle& h, uint64_t off, uint64_t n) {
        std::string what = "put '" + k + "'";
        return forward<ValueInfo>(self, t, what, a, std::move(k), std::move(h), off, n);
      },
      [=](get_atom a, std::string& k, BufferHandle& h, uint64_t off) {
        std::string what = "get '" + k + "'";
        return forward<ValueInfo>(self, t, what, a, std::move(k), std::move(h), off);
      },
      [=](delete_atom a, std::string& k) {
        std::string what = "delete '" + k + "'";
        return forward<uint64_t>(self, t, what, a, std::move(k));
      },
      [=](stats_atom a) { return forward<ServerStats>(self, t, "stats", a); },
      [=](hello_atom a) { return forward<ServerInfo>(self, t, "hello", a); },
  };
}

}  // namespace

Result<std::unique_ptr<KvClient>> KvClient::connect(KvClientOptions options) {
  auto hp = parse_host_port(options.server);
  if (!hp.ok())
    return hp.error().with_context("kv server address");
  if (options.slots == 0 || options.buffer_bytes < options.slots)
    return Error(ErrorCode::kInvalidArgument,
                 "a buffer of " + std::to_string(options.buffer_bytes) + " bytes cannot hold " +
                     std::to_string(options.slots) + " slots");
  std::unique_ptr<KvClient> client(new KvClient());
  client->options_ = options;
  client->slot_bytes_ = options.buffer_bytes / options.slots;
  client->in_doubt_.assign(options.slots, "");
  auto memory = HostMemory::allocate(options.buffer_bytes);
  if (!memory.ok())
    return memory.error().with_context("the client buffer");
  client->memory_ = std::move(*memory);
  NodeOptions no;
  no.manager = options.manager;
  no.configure = add_kv_message_types;
  CAF_RDMA_ASSIGN_OR_RETURN(client->node_, RdmaNode::start(no));
  auto& sys = client->node_->system();
  auto server = client->node_->connect<server_actor>(hp->first, hp->second, "kv_server",
                                                     std::chrono::milliseconds(options.timeout_ms));
  if (!server.ok())
    return server.error();
  {
    RdmaClient rc(sys, client->node_->manager());
    auto h = rc.request_buffer(client->memory_.data(), options.buffer_bytes);
    if (!h.ok())
      return h.error().with_context("registering the client buffer");
    client->buffer_ = *h;
  }
  client->gateway_ = sys.spawn(gateway, *server, options.server, options.timeout_ms);
  auto info = client->session(0)->call<ServerInfo>(hello_atom::value);
  if (!info.ok())
    return info.error().with_context("kv_server at " + options.server);
  if (options.manager.same_host && !rdma_moves_gets(info->device, client->buffer_))
    client->get_endpoint_ = same_host_endpoint(info->host_id, info->get_endpoint);
  return client;
}

KvClient::~KvClient() {
  if (gateway_)
    caf::anon_send_exit(gateway_, caf::exit_reason::user_shutdown);
  gateway_ = nullptr;
  node_.reset();
  // A slot in doubt may still be written: a same-host GET's copy (kv_local_get.h invariant 1)
  // can outlive the node. Its buffer stays until the process ends rather than be reused.
  for (const auto& why : in_doubt_)
    if (!why.empty()) {
      memory_.leak();
      break;
    }
}

std::unique_ptr<KvSession> KvClient::session(uint32_t slot) {
  if (slot >= options_.slots)
    return nullptr;
  return std::unique_ptr<KvSession>(new KvSession(this, slot));
}

Result<ServerStats> KvClient::server_stats() {
  auto s = session(0);
  return s->call<ServerStats>(stats_atom::value);
}

KvSession::KvSession(KvClient* client, uint32_t slot)
    : client_(client),
      slot_(slot),
      offset_(uint64_t(slot) * client->slot_bytes_),
      data_(client->memory_.data() + offset_),
      self_(std::make_unique<caf::scoped_actor>(client->node_->system())) {}

KvSession::~KvSession() = default;

template <class T, class... Ts>
Result<T> KvSession::call(Ts&&... xs) {
  std::optional<Result<T>> out;
  auto limit = std::chrono::milliseconds(client_->options_.timeout_ms) + std::chrono::seconds(60);
  receive_answer(
      self_->ptr(), (*self_)->request(client_->gateway_, limit, std::forward<Ts>(xs)...),
      [&](T& v) { out.emplace(std::move(v)); },
      [&](caf::error& e) {
        Error err = to_error(e);
        // The gateway answers before this limit; not answering means it is gone.
        out.emplace(e.category() == caf::atom("system")
                        ? err.with_context("kv request to " + client_->options_.server +
                                           " (this client's gateway " + kNoAnswer + ")")
                        : err);
      });
  if (!out)
    return Error(ErrorCode::kInternal, "no reply from the kv gateway");
  return std::move(*out);
}

Result<ValueInfo> KvSession::put(const std::string& key, const void* data, uint64_t size) {
  if (size > slot_bytes())
    return Error(ErrorCode::kSizeMismatch, "put '" + key + "': value of " + std::to_string(size) +
                                               " bytes is larger than the client's buffer slot (" +
                                               std::to_string(slot_bytes()) +
                                               " bytes; see --buffer-mb)");
  if (size > 0)
    std::memcpy(data_, data, size);
  return put_from_slot(key, size);
}

Result<ValueInfo> KvSession::put_from_slot(const std::string& key, uint64_t size) {
  if (size > slot_bytes())
    return Error(ErrorCode::kInvalidArgument,
                 "put_from_slot '" + key + "': " + std::to_string(size) +
                     " bytes exceed the slot's " + std::to_string(slot_bytes()));
  if (auto d = doubt())
    return *d;
  auto r = call<ValueInfo>(put_atom::value, key, client_->buffer_, offset_, size);
  if (!r.ok())
    note_outcome("put '" + key + "'", r.error());
  return r;
}

std::optional<Result<ValueInfo>> KvSession::local_get(const std::string& key) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(client_->options_.timeout_ms);
  if (!local_.valid()) {
    // An abstract AF_UNIX connect is answered at once; a longer wait is a listener in trouble.
    auto s = connect_unix(client_->get_endpoint_,
                          std::min(deadline, std::chrono::steady_clock::now() + kLocalRetry));
    // The listener is gone or full, or of another uid (same_host.h invariant 5: not the server,
    // which runs as ours; it gets no key and no slot address): ask the store actor for a while.
    if (!s.ok() || !listener_is_own_uid(*s, client_->get_endpoint_).ok()) {
      local_retry_after_ = std::chrono::steady_clock::now() + kLocalRetry;
      return std::nullopt;
    }
    local_ = std::move(*s);
  }
  bool broken = false;
  auto r =
      kv::local_get(local_, key, data_, slot_bytes(), deadline, client_->options_.server, &broken);
  if (broken) {
    local_.close();
    // A connection the listener closed (it stopped, or took our request for garbage) moved
    // nothing more: ask the store actor. One that did not answer in time leaves the slot in
    // doubt (the listener may still copy into it), as a CAF request does.
    if (r && !r->ok() && r->error().code() != ErrorCode::kTimeout) {
      local_retry_after_ = std::chrono::steady_clock::now() + kLocalRetry;
      return std::nullopt;
    }
  }
  return r;
}

Result<ValueInfo> KvSession::get(const std::string& key) {
  if (auto d = doubt())
    return *d;
  if (!client_->get_endpoint_.empty() && std::chrono::steady_clock::now() >= local_retry_after_) {
    if (auto r = local_get(key)) {
      if (!r->ok())
        note_outcome("get '" + key + "'", r->error());
      return std::move(*r);
    }
  }
  BufferHandle slot = client_->buffer_;
  // The server checks the value against the space left in the buffer from our offset, so
  // trim the handle to end at the slot's end.
  slot.size = offset_ + slot_bytes();
  auto r = call<ValueInfo>(get_atom::value, key, slot, offset_);
  if (!r.ok()) {
    note_outcome("get '" + key + "'", r.error());
    return r;
  }
  if (r->path == kPathInline) {
    if (r->bytes.size() != r->length || r->length > slot_bytes())
      return Error(ErrorCode::kInternal, "get '" + key + "': the server's inline answer has " +
                                             std::to_string(r->bytes.size()) +
                                             " bytes for a value of " + std::to_string(r->length) +
                                             " (slot of " + std::to_string(slot_bytes()) +
                                             " bytes)");
    std::memcpy(data_, r->bytes.data(), r->length);
    r->bytes = {};
  }
  return r;
}

std::optional<Error> KvSession::doubt() const {
  std::lock_guard<std::mutex> g(client_->doubt_mutex_);
  const std::string& why = client_->in_doubt_[slot_];
  if (why.empty())
    return std::nullopt;
  return Error(ErrorCode::kTimeout,
               "slot " + std::to_string(slot_) + " of this kv client is in doubt: " + why +
                   " got no answer in time, and the server may still move its bytes through the "
                   "slot; use another slot or client");
}

void KvSession::note_outcome(const std::string& what, const Error& e) {
  // Only when nobody answered: an error the server sent comes after its transfer ended.
  if (e.code() != ErrorCode::kTimeout || e.message().find(kNoAnswer) == std::string::npos)
    return;
  std::lock_guard<std::mutex> g(client_->doubt_mutex_);
  if (client_->in_doubt_[slot_].empty())
    client_->in_doubt_[slot_] = what;
}

Result<uint64_t> KvSession::remove(const std::string& key) {
  return call<uint64_t>(delete_atom::value, key);
}

}  // namespace caf_rdma::kv
