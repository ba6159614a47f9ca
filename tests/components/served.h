// Served: what a stream grant's `done` reported, waited for with a bound (the promise outlives a
// test that stopped waiting). Shared by the stream channel's tests.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <utility>

#include "components/stream_server.h"

namespace caf_rdma {

struct Served {
  std::shared_ptr<std::promise<std::pair<Status, uint64_t>>> promise =
      std::make_shared<std::promise<std::pair<Status, uint64_t>>>();
  std::future<std::pair<Status, uint64_t>> future = promise->get_future();
  StreamServer::DoneFn fn() {
    auto p = promise;
    return [p](uint64_t, Status st, uint64_t bytes) { p->set_value({std::move(st), bytes}); };
  }
  /// A request by handle's `done` (HandleGrant) reporting here.
  std::function<void(Status, uint64_t)> handle_fn() {
    auto f = fn();
    return [f](Status st, uint64_t bytes) { f(0, std::move(st), bytes); };
  }
  std::pair<Status, uint64_t> wait(std::chrono::seconds limit = std::chrono::seconds(10)) {
    if (future.wait_for(limit) != std::future_status::ready)
      return {Error(ErrorCode::kTimeout,
                    "the grant never finished (" + std::to_string(limit.count()) + " s)"),
              0};
    return future.get();
  }
};

}  // namespace caf_rdma
