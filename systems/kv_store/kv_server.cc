#include "systems/kv_store/kv_server.h"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <unordered_map>

#include "actors/rdma_client.h"
#include "actors/rdma_errors.h"
#include "systems/kv_store/kv_pool.h"

namespace caf_rdma::kv {

namespace {

struct StoreState {
  static inline const char* name = "kv_store";
  rdma_manager_actor manager;
  BufferHandle pool_handle;  // the whole pool, owned by `manager`
  std::shared_ptr<KvPool> pool;
  std::unordered_map<std::string, std::shared_ptr<const KvBlock>> index;
  uint32_t timeout_ms = 30000;
  ServerStats stats;
};

std::string key_text(const std::string& key) {
  return "'" + (key.size() <= 64 ? key : key.substr(0, 61) + "...") + "'";
}

caf::error check_key(const std::string& key) {
  if (key.empty() || key.size() > kMaxKeyBytes)
    return make_rdma_error(ErrorCode::kInvalidArgument,
                           "key of " + std::to_string(key.size()) + " bytes; keys have 1 to " +
                               std::to_string(kMaxKeyBytes) + " bytes");
  return {};
}

// Prefixes a transfer error with the operation and key, keeping its category and code.
caf::error in_op(const caf::error& err, const std::string& what) {
  return make_rdma_error(request_error_code(err), what + ": " + error_message(err));
}

server_actor::behavior_type store(server_actor::stateful_pointer<StoreState> self,
                                  rdma_manager_actor manager, BufferHandle pool_handle,
                                  uint32_t timeout_ms) {
  self->state.manager = std::move(manager);
  self->state.pool = std::make_shared<KvPool>(pool_handle.size);
  self->state.pool_handle = std::move(pool_handle);
  self->state.timeout_ms = timeout_ms;
  self->state.stats.pool_bytes = self->state.pool->capacity();
  self->state.stats.device = self->state.pool_handle.device;
  auto slack = std::chrono::milliseconds(timeout_ms) + std::chrono::seconds(10);
  return {
      [=](put_atom, std::string& key, BufferHandle& src, uint64_t offset,
          uint64_t length) -> caf::result<ValueInfo> {
        auto& st = self->state;
        ++st.stats.puts;
        if (auto err = check_key(key)) {
          ++st.stats.errors;
          return err;
        }
        if (length == 0) {
          st.index[key] = std::make_shared<const KvBlock>(st.pool, 0, 0);
          return ValueInfo{0, ""};
        }
        if (length > st.pool->capacity()) {
          ++st.stats.errors;
          return make_rdma_error(ErrorCode::kSizeMismatch,
                                 "put " + key_text(key) + ": value of " + std::to_string(length) +
                                     " bytes is larger than the whole pool (" +
                                     std::to_string(st.pool->capacity()) + " bytes)");
        }
        auto at = st.pool->allocate(length);
        if (!at) {
          ++st.stats.errors;
          return make_rdma_error(
              ErrorCode::kResourceExhausted,
              "put " + key_text(key) + ": pool full: the value needs " +
                  std::to_string(st.pool->rounded(length)) + " bytes, the largest free block has " +
                  std::to_string(st.pool->largest_free()) + " (" + std::to_string(st.pool->used()) +
                  " of " + std::to_string(st.pool->capacity()) + " bytes in use)");
        }
        // The new value goes into its own block; the index moves to it only once all its bytes
        // are in, so a failed or concurrent PUT never exposes half a value.
        auto block = std::make_shared<const KvBlock>(st.pool, *at, length);
        auto rp = self->make_response_promise<ValueInfo>();
        std::string what = "put " + key_text(key) + " from " + describe(src);
        self->request(st.manager, slack, transfer_atom::value,
                      make_read(st.pool_handle, src, length, block->offset(), offset),
                      st.timeout_ms)
            .then(
                [=](TransferReply& r) mutable {
                  self->state.index[key] = block;
                  rp.deliver(ValueInfo{length, r.path});
                },
                [=](caf::error& err) mutable {
                  ++self->state.stats.errors;
                  rp.deliver(in_op(err, what));
                });
        return rp;
      },
      [=](get_atom, std::string& key, BufferHandle& dst,
          uint64_t offset) -> caf::result<ValueInfo> {
        auto& st = self->state;
        ++st.stats.gets;
        if (auto err = check_key(key)) {
          ++st.stats.errors;
          return err;
        }
        auto it = st.index.find(key);
        if (it == st.index.end()) {
          ++st.stats.errors;
          return make_rdma_error(ErrorCode::kNotFound, "get " + key_text(key) + ": no such key");
        }
        auto block = it->second;  // held until the write is done
        uint64_t length = block->length();
        if (offset > dst.size || length > dst.size - offset) {
          ++st.stats.errors;
          return make_rdma_error(ErrorCode::kSizeMismatch,
                                 "get " + key_text(key) + ": the value has " +
                                     std::to_string(length) + " bytes, the client's buffer " +
                                     std::to_string(dst.id) + " has " +
                                     std::to_string(offset > dst.size ? 0 : dst.size - offset) +
                                     " bytes at offset " + std::to_string(offset));
        }
        if (length == 0)
          return ValueInfo{0, ""};
        auto rp = self->make_response_promise<ValueInfo>();
        std::string what = "get " + key_text(key) + " into " + describe(dst);
        self->request(st.manager, slack, transfer_atom::value,
                      make_write(st.pool_handle, dst, length, block->offset(), offset),
                      st.timeout_ms)
            .then(
                [=](TransferReply& r) mutable {
                  rp.deliver(ValueInfo{length, r.path});
                },
                [=](caf::error& err) mutable {
                  ++self->state.stats.errors;
                  rp.deliver(in_op(err, what));
                });
        return rp;
      },
      [=](delete_atom, std::string& key) -> caf::result<uint64_t> {
        auto& st = self->state;
        ++st.stats.deletes;
        auto it = st.index.find(key);
        if (it == st.index.end()) {
          ++st.stats.errors;
          return make_rdma_error(ErrorCode::kNotFound, "delete " + key_text(key) + ": no such key");
        }
        uint64_t length = it->second->length();
        st.index.erase(it);  // the block returns to the pool once no GET reads it
        return length;
      },
      [=](stats_atom) -> ServerStats {
        auto& st = self->state;
        ServerStats s = st.stats;
        s.keys = st.index.size();
        s.used_bytes = st.pool->used();
        s.largest_free = st.pool->largest_free();
        return s;
      },
  };
}

}  // namespace

Result<std::unique_ptr<KvServer>> KvServer::start(KvServerOptions options) {
  if (options.memory_bytes < 4096)
    return Error(ErrorCode::kInvalidArgument,
                 "pool of " + std::to_string(options.memory_bytes) + " bytes; need at least 4096");
  std::unique_ptr<KvServer> server(new KvServer());
  // Not zero-filled: the pool is only ever read where a value was written.
  server->memory_.reset(new (std::nothrow) uint8_t[options.memory_bytes]);
  if (!server->memory_)
    return Error(ErrorCode::kInvalidArgument,
                 "cannot allocate a pool of " + std::to_string(options.memory_bytes) + " bytes");
  NodeOptions no;
  no.host = options.host;
  no.manager = options.manager;
  no.configure = add_kv_message_types;
  CAF_RDMA_ASSIGN_OR_RETURN(server->node_, RdmaNode::start(no));
  auto& sys = server->node_->system();
  BufferHandle pool;
  {
    RdmaClient client(sys, server->node_->manager());
    auto h = client.request_buffer(server->memory_.get(), options.memory_bytes);
    if (!h.ok())
      return h.error().with_context("registering the kv pool");
    pool = *h;
  }
  server->device_ = pool.device;
  server->actor_ = sys.spawn(store, server->node_->manager(), pool, options.transfer_timeout_ms);
  auto port = sys.middleman().publish(server->actor_, options.port, options.host.c_str(), true);
  if (!port) {
    caf::anon_send_exit(server->actor_, caf::exit_reason::user_shutdown);
    return Error(ErrorCode::kPeerUnavailable, "cannot listen on " + options.host + ":" +
                                                  std::to_string(options.port) + ": " +
                                                  sys.render(port.error()));
  }
  server->host_ = options.host;
  server->port_ = *port;
  return server;
}

KvServer::~KvServer() {
  if (actor_)
    caf::anon_send_exit(actor_, caf::exit_reason::user_shutdown);
  actor_ = nullptr;
  node_.reset();
}

}  // namespace caf_rdma::kv
