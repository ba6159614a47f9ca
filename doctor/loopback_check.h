// Loopback check: an RDMA WRITE and an RDMA READ between two queue pairs of one device, through
// caf-rdma's components (RdmaDomain, RdmaQueuePair), with registered buffers and every byte
// checked: what a node does with the device, on one host.
//
// Invariants:
//  1. Every wait has a timeout (`kLoopbackTimeout` per operation).
//  2. Success means both transfers completed and every byte arrived; anything else is a failure
//     whose text is caf-rdma's error (call, device, ibverbs status string) or the first byte that
//     differs.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "doctor/finding.h"
#include "primitives/ibverbs_config.h"

namespace caf_rdma::doctor {

constexpr uint64_t kLoopbackBytes = 64 * 1024;
constexpr std::chrono::seconds kLoopbackTimeout{10};

/// WRITE then READ `kLoopbackBytes` on device `device` (the rest of `config` as given). True
/// when both moved every byte.
bool check_loopback(const IbverbsConfig& config, const std::string& device, Findings& out);

}  // namespace caf_rdma::doctor
