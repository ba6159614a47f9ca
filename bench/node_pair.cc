// NodePair (see node_pair.h).
#include "bench/node_pair.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>

namespace caf_rdma::bench {

namespace {

const BenchTransport kTransports[] = {
    BenchTransport{"same-host", TransportMode::kFallback, true},
    BenchTransport{"stream", TransportMode::kFallback, false},
    BenchTransport{"chunks", TransportMode::kFallback, false, false, true},
    BenchTransport{"rdma", TransportMode::kRdma, false},
    BenchTransport{"rdma-manager", TransportMode::kRdma, false, true},
};

}  // namespace

const BenchTransport* find_transport(const std::string& name) {
  auto t = std::find_if(std::begin(kTransports), std::end(kTransports),
                        [&](const BenchTransport& k) { return name == k.name; });
  return t == std::end(kTransports) ? nullptr : t;
}

const char* transport_names() {
  return "same-host, stream, chunks, rdma, rdma-manager";
}

Result<std::unique_ptr<NodePair>> NodePair::start(const BenchTransport& t, uint64_t bytes,
                                                  const std::string& name, std::string* skipped) {
  CAF_RDMA_ASSIGN_OR_RETURN(ManagerOptions base, ManagerOptions::from_env());
  NodeOptions opts;
  opts.manager = base;
  opts.manager.mode = t.mode;
  opts.manager.same_host = t.same_host;
  if (t.chunks_only)
    opts.manager.stream_min_bytes = 0;
  std::unique_ptr<NodePair> p(new NodePair());
  auto owner = RdmaNode::start(opts);
  auto user = owner.ok() ? RdmaNode::start(opts) : Result<std::unique_ptr<RdmaNode>>(owner.error());
  if (!owner.ok() || !user.ok()) {
    const Error& e = !owner.ok() ? owner.error() : user.error();
    if (t.mode != TransportMode::kRdma)
      return e;
    *skipped = e.to_string();
    return std::unique_ptr<NodePair>();
  }
  p->owner_ = std::move(*owner);
  p->user_ = std::move(*user);
  p->owner_client_.emplace(p->owner_->system(), p->owner_->manager());
  p->me_.emplace(p->user_->system(), p->user_->manager());
  auto pool = p->owner_client_->allocate_buffer(bytes);
  if (!pool.ok())
    return pool.error().with_context("the owner's buffer");
  p->pool_.emplace(std::move(*pool));
  auto mine = p->me_->allocate_buffer(bytes);
  if (!mine.ok())
    return mine.error().with_context("the user's buffer");
  p->mine_.emplace(std::move(*mine));
  CAF_RDMA_RETURN_IF_ERROR(p->owner_client_->put(name, p->pool_->handle()));
  CAF_RDMA_ASSIGN_OR_RETURN(rdma_manager_actor proxy,
                            p->user_->remote_manager("127.0.0.1", p->owner_->port()));
  RdmaClient directory(p->user_->system(), proxy);
  CAF_RDMA_ASSIGN_OR_RETURN(p->remote_, directory.get(name, 5000));
  // Warm-up: lanes, handshakes and the owner's endpoint, before anything is timed.
  auto warm = p->me_->read(p->local(), p->remote_, Range::of(8), std::chrono::seconds(120));
  if (!warm.ok())
    return warm.error().with_context("warm-up");
  // Both sides touched first: no page is faulted in while timed.
  std::memset(p->pool(), 1, bytes);
  std::memset(p->mine(), 2, bytes);
  return p;
}

}  // namespace caf_rdma::bench
