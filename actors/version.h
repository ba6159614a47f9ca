// caf-rdma's version, as the metrics' caf_rdma_build_info series names it.
//
// Invariant: one place for it; raised with every change of the public API or of the messages
// between nodes (0.10.0: store and notice carry a write receipt, write_receipts.h; 0.11.0: a
// same-host stream request carries its requester's deadline, "CMS2"/"CMH2"/"CML2",
// components/stream_protocol.h; 0.12.0: ManagerOptions::stream_min_bytes defaults to 1, and
// RdmaClient's lanes choose by the manager's rule, actors/transfer/path_choice.h invariant 6;
// 0.13.0: store and atomic carry the requester's time left, which their owner honours,
// actors/transfer/chunk_path.h invariant 1; 0.14.0: cancel_atom stops a transfer, batch or list
// its sender asked, actors/cancel_request.h; 0.15.0: priority classes, TransferOp::priority and
// TransferListMsg::priority, a stream request's class in its direction word,
// components/priority.h; 0.16.0: class queue pairs, QpInfoMsg::priority and lane_open's class,
// ManagerOptions::latency_traffic and background_traffic, actors/manager/rails.h invariant 26;
// 0.17.0: packed fallback requests, fetch_list and store_list, and ManagerStats::packed_chunks
// and packed_ops, actors/transfer/chunk_path.h invariant 5; 0.18.0: ManagerStats::staged_pieces,
// actors/transfer/staged_path.h invariant 5, and stream grants of GPU memory, which an owner
// before it answers with port 0: components/stream_server.h invariant 19; 0.19.0: same-host GPU
// copy requests, "CGS1", which an owner before it refuses unread: stream_server.h invariant 20;
// and cross-memory requests on an owner's GPU memory, which an owner before it answers in-band:
// invariant 19).
#pragma once

namespace caf_rdma {

constexpr const char* kVersion = "0.19.0";

}  // namespace caf_rdma
