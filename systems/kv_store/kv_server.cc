#include "systems/kv_store/kv_server.h"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <cstdio>

#include "actors/rdma_client.h"
#include "actors/rdma_errors.h"
#include "components/same_host.h"
#include "systems/kv_store/kv_index.h"
#include "systems/kv_store/kv_pool.h"

namespace caf_rdma::kv {

namespace {

caf::error check_key(const std::string& key) {
  Status st = check_key_length(key.size());
  if (!st.ok())
    return make_rdma_error(st.error().code(), st.error().message());
  return {};
}

// Prefixes a transfer error with the operation and key, keeping its category and code.
caf::error in_op(const caf::error& err, const std::string& what) {
  return make_rdma_error(request_error_code(err), what + ": " + error_message(err));
}

/// The store actor's state: the pool, the key index and the counters; one method per request.
/// A key's index entry moves to a new value's block only once all its bytes are in, and a
/// block returns to the pool only once no GET still writes from it (KvBlock's owners).
class StoreState {
public:
  static inline const char* name = "kv_store";

  using Self = server_actor::stateful_pointer<StoreState>;

  void init(Self self, rdma_manager_actor manager, BufferHandle pool_handle,
            std::shared_ptr<KvIndex> index, std::shared_ptr<KvPool> pool, ServerInfo info,
            uint32_t timeout_ms) {
    self_ = self;
    manager_ = std::move(manager);
    index_ = std::move(index);
    pool_ = std::move(pool);
    info_ = std::move(info);
    pool_handle_ = std::move(pool_handle);
    timeout_ms_ = timeout_ms;
    slack_ = std::chrono::milliseconds(timeout_ms) + std::chrono::seconds(10);
  }

  /// PUT: RDMA READ of the value from the client's buffer into a fresh block.
  caf::result<ValueInfo> put(const std::string& key, const BufferHandle& src, uint64_t offset,
                             uint64_t length);
  /// GET: RDMA WRITE of the value's block into the client's buffer.
  caf::result<ValueInfo> get(const std::string& key, const BufferHandle& dst, uint64_t offset);
  /// DELETE: the value's length.
  caf::result<uint64_t> remove(const std::string& key);
  ServerStats stats() const;
  const ServerInfo& info() const { return info_; }

private:
  Self self_ = nullptr;
  rdma_manager_actor manager_;
  BufferHandle pool_handle_;  // the whole pool, owned by `manager_`
  std::shared_ptr<KvPool> pool_;
  std::shared_ptr<KvIndex> index_;  // shared with the same-host GET listener
  ServerInfo info_;
  uint32_t timeout_ms_ = 30000;
  std::chrono::milliseconds slack_{
      0};  // of each request to the manager: the transfer's limit + 10 s
};

caf::result<ValueInfo> StoreState::put(const std::string& key, const BufferHandle& src,
                                       uint64_t offset, uint64_t length) {
  ++index_->puts;
  if (auto err = check_key(key)) {
    ++index_->errors;
    return err;
  }
  if (length == 0) {
    index_->put(key, std::make_shared<const KvBlock>(pool_, 0, 0));
    return ValueInfo{0, "", {}};
  }
  if (length > pool_->capacity()) {
    ++index_->errors;
    return make_rdma_error(ErrorCode::kSizeMismatch,
                           "put " + key_text(key) + ": value of " + std::to_string(length) +
                               " bytes is larger than the whole pool (" +
                               std::to_string(pool_->capacity()) + " bytes)");
  }
  auto at = pool_->allocate(length);
  if (!at) {
    ++index_->errors;
    return make_rdma_error(
        ErrorCode::kResourceExhausted,
        "put " + key_text(key) + ": pool full: the value needs " +
            std::to_string(pool_->rounded(length)) + " bytes, the largest free block has " +
            std::to_string(pool_->largest_free()) + " (" + std::to_string(pool_->used()) + " of " +
            std::to_string(pool_->capacity()) + " bytes in use)");
  }
  // The new value goes into its own block; the index moves to it only once all its bytes
  // are in, so a failed or concurrent PUT never exposes half a value.
  auto block = std::make_shared<const KvBlock>(pool_, *at, length);
  auto rp = self_->make_response_promise<ValueInfo>();
  std::string what = "put " + key_text(key) + " from " + describe(src);
  self_
      ->request(manager_, slack_, transfer_atom::value,
                make_read(pool_handle_, src, length, block->offset(), offset), timeout_ms_)
      .then(
          [=](TransferReply& r) mutable {
            index_->put(key, block);
            rp.deliver(ValueInfo{length, r.path, {}});
          },
          [=](caf::error& err) mutable {
            ++index_->errors;
            rp.deliver(in_op(err, what));
          });
  return rp;
}

caf::result<ValueInfo> StoreState::get(const std::string& key, const BufferHandle& dst,
                                       uint64_t offset) {
  ++index_->gets;
  uint64_t room = offset > dst.size ? 0 : dst.size - offset;
  auto found =
      index_->for_get(key, room,
                      "the client's buffer " + std::to_string(dst.id) + " has " +
                          std::to_string(room) + " bytes at offset " + std::to_string(offset));
  if (!found.ok()) {
    ++index_->errors;
    return make_rdma_error(found.error().code(), found.error().message());
  }
  auto block = *found;  // held until the write is done
  uint64_t length = block->length();
  if (length == 0)
    return ValueInfo{0, "", {}};
  if (length <= kInlineValueMax && !rdma_moves_gets(pool_handle_.device, dst)) {
    // RDMA cannot move it: the bytes go in the reply (kv_protocol.h). A block in the index is
    // never written again, so reading it here races with nothing.
    const auto* at = reinterpret_cast<const uint8_t*>(pool_handle_.addr) + block->offset();
    return ValueInfo{length, kPathInline, std::vector<uint8_t>(at, at + length)};
  }
  auto rp = self_->make_response_promise<ValueInfo>();
  std::string what = "get " + key_text(key) + " into " + describe(dst);
  self_
      ->request(manager_, slack_, transfer_atom::value,
                make_write(pool_handle_, dst, length, block->offset(), offset), timeout_ms_)
      .then(
          // Both hold the block until the manager's answer (the write's end): a PUT or DELETE
          // in between must not return it to the pool while RDMA still reads it (kv_index.h
          // invariant 2). [=] alone would not capture it: it is not otherwise used here.
          [=, block = block](TransferReply& r) mutable {
            rp.deliver(ValueInfo{length, r.path, {}});
            block.reset();
          },
          [=, block = block](caf::error& err) mutable {
            ++index_->errors;
            rp.deliver(in_op(err, what));
            block.reset();
          });
  return rp;
}

caf::result<uint64_t> StoreState::remove(const std::string& key) {
  ++index_->deletes;
  auto length = index_->erase(key);  // the block returns to the pool once no GET reads it
  if (!length) {
    ++index_->errors;
    return make_rdma_error(ErrorCode::kNotFound, "delete " + key_text(key) + ": no such key");
  }
  return *length;
}

ServerStats StoreState::stats() const {
  ServerStats s;
  s.puts = index_->puts;
  s.gets = index_->gets;
  s.deletes = index_->deletes;
  s.errors = index_->errors;
  s.pool_bytes = pool_->capacity();
  s.device = pool_handle_.device;
  s.keys = index_->size();
  s.used_bytes = pool_->used();
  s.largest_free = pool_->largest_free();
  return s;
}

server_actor::behavior_type store(StoreState::Self self, rdma_manager_actor manager,
                                  BufferHandle pool_handle, std::shared_ptr<KvIndex> index,
                                  std::shared_ptr<KvPool> pool, ServerInfo info,
                                  uint32_t timeout_ms) {
  self->state.init(self, std::move(manager), std::move(pool_handle), std::move(index),
                   std::move(pool), std::move(info), timeout_ms);
  return {
      [=](put_atom, std::string& key, BufferHandle& src, uint64_t offset, uint64_t length) {
        return self->state.put(key, src, offset, length);
      },
      [=](get_atom, std::string& key, BufferHandle& dst, uint64_t offset) {
        return self->state.get(key, dst, offset);
      },
      [=](delete_atom, std::string& key) { return self->state.remove(key); },
      [=](stats_atom) { return self->state.stats(); },
      [=](hello_atom) { return self->state.info(); },
  };
}

}  // namespace

Result<std::unique_ptr<KvServer>> KvServer::start(KvServerOptions options) {
  if (options.memory_bytes < 4096)
    return Error(ErrorCode::kInvalidArgument,
                 "pool of " + std::to_string(options.memory_bytes) + " bytes; need at least 4096");
  std::unique_ptr<KvServer> server(new KvServer());
  // Huge pages where the kernel gives them (host_memory.h): fewer pages to pin.
  auto memory = HostMemory::allocate(options.memory_bytes);
  if (!memory.ok())
    return memory.error().with_context("the value pool");
  server->memory_ = std::move(*memory);
  NodeOptions no;
  no.host = options.host;
  no.manager = options.manager;
  no.metrics = options.metrics;
  no.configure = add_kv_message_types;
  CAF_RDMA_ASSIGN_OR_RETURN(server->node_, RdmaNode::start(no));
  auto& sys = server->node_->system();
  BufferHandle pool;
  {
    RdmaClient client(sys, server->node_->manager());
    auto h = client.request_buffer(server->memory_.data(), options.memory_bytes);
    if (!h.ok())
      return h.error().with_context("registering the kv pool");
    pool = *h;
  }
  server->device_ = pool.device;
  auto index = std::make_shared<KvIndex>();
  ServerInfo info;
  info.device = pool.device;
  if (options.manager.same_host) {
    auto listener = KvGetListener::start(index, server->memory_.data());
    if (listener.ok()) {
      server->listener_ = std::move(*listener);
      info.host_id = host_identity();
      info.get_endpoint = server->listener_->unix_name();
    } else {
      // GETs then all go to the store actor, as across hosts.
      std::fprintf(stderr, "kv_server: no same-host GETs: %s\n",
                   listener.error().to_string().c_str());
    }
  }
  server->actor_ =
      sys.spawn(store, server->node_->manager(), pool, std::move(index),
                std::make_shared<KvPool>(pool.size), std::move(info), options.transfer_timeout_ms);
  // Under the node's policy: over TLS when the node has credentials (handles with their
  // secrets never travel in plaintext, and no process without a certificate reaches it).
  auto port = server->node_->publish(server->actor_, options.port);
  if (!port.ok()) {
    caf::anon_send_exit(server->actor_, caf::exit_reason::user_shutdown);
    return port.error().with_context("kv_server");
  }
  server->host_ = options.host;
  server->port_ = *port;
  return server;
}

KvServer::~KvServer() {
  if (actor_)
    caf::anon_send_exit(actor_, caf::exit_reason::user_shutdown);
  actor_ = nullptr;
  listener_.reset();
  node_.reset();
}

}  // namespace caf_rdma::kv
