// The manager's answers to its own process's lane requests (lane_open_atom, stream_lane_atom in
// rdma_manager_interface.h): message types that hand over a lane (actors/direct_lane.h,
// actors/stream_lane.h), declared without the lanes so that the public interface does not
// include their implementation. Local messages only: a grant holds the lane itself.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>

#include <cstdint>
#include <memory>

namespace caf_rdma {

class DirectLane;
class StreamLane;

/// The manager's answer to a lane request.
struct LaneGrant {
  std::shared_ptr<DirectLane> lane;
  bool verify = false;  ///< the manager's verify mode: its client checks every lane op too
  /// The manager stripes reads and writes of at least this many bytes with owners that have
  /// rails (manager/rails.h): its client sends those to it, not down the lane. 0: none.
  uint64_t stripe_min_bytes = 0;
  /// It stripes over several queue pairs of its one device too (stripe_qps > 1): every op
  /// from stripe_min_bytes on goes to it, rails or not.
  bool stripes_one_device = false;
};

/// The manager's answer to a stream lane request.
struct StreamLaneGrant {
  std::shared_ptr<StreamLane> lane;  ///< null: no stream lanes from this node
};

}  // namespace caf_rdma

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::LaneGrant)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::StreamLaneGrant)
