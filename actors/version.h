// caf-rdma's version, as the metrics' caf_rdma_build_info series and the doctor name it.
//
// Invariant: one place for it; raised with every change of the public API or the peer protocol
// (docs/architecture.md, "The peer protocol").
#pragma once

namespace caf_rdma {

constexpr const char* kVersion = "0.9.0";

}  // namespace caf_rdma
