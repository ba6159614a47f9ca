// RdmaManagerActor: spawning a node's manager.
#pragma once

#include <caf/actor_system.hpp>

#include <chrono>
#include <string>

#include "actors/rdma_manager_interface.h"
#include "components/device_memory.h"
#include "primitives/ibverbs_config.h"
#include "primitives/status.h"

namespace caf_rdma {

/// Environment variable choosing the transport: "auto" (default), "rdma", "fallback".
constexpr const char* kEnvTransport = "CAF_RDMA_TRANSPORT";
/// Fallback transport: bytes per CAF message (default 256 KiB) and messages in flight (32).
constexpr const char* kEnvFallbackChunk = "CAF_RDMA_FALLBACK_CHUNK";
constexpr const char* kEnvFallbackWindow = "CAF_RDMA_FALLBACK_WINDOW";
/// CUDA device ordinal whose memory this node moves: picks the NIC closest to that GPU.
constexpr const char* kEnvGpu = "CAF_RDMA_GPU";

enum class TransportMode : uint8_t {
  kAuto,      ///< RDMA where both sides have a device on the same kind of fabric, else fallback
  kRdma,      ///< RDMA only: a missing device or a peer without one is an error
  kFallback,  ///< never RDMA: bytes move in CAF messages (no device needed)
};

const char* to_string(TransportMode mode);

struct ManagerOptions {
  IbverbsConfig ibverbs;
  TransportMode mode = TransportMode::kAuto;
  /// Limit for the queue-pair handshake with a peer manager.
  std::chrono::milliseconds handshake_timeout{30000};
  /// After a timeout, how long the flush of the queue pair may take before it is destroyed.
  std::chrono::milliseconds drain_timeout{5000};
  /// Fallback transport: bytes per CAF message and messages in flight per transfer.
  uint64_t fallback_chunk_bytes = 256 << 10;
  uint32_t fallback_window = 32;
  /// How this manager names itself in handles and messages (e.g. "host:port").
  std::string name;
  /// GPU memory support; null: the CUDA driver when this build and host have one (else every
  /// buffer is host memory). Tests without a GPU put a fake here.
  std::shared_ptr<DeviceMemory> device_memory;
  /// GPU memory the NIC cannot register moves through host bounce buffers of this size, at
  /// most `staging_buffers` of them (transfers beyond that wait for one).
  uint64_t staging_bytes = 4 << 20;
  uint32_t staging_buffers = 4;

  /// Defaults, then CAF_RDMA_TRANSPORT, CAF_RDMA_FALLBACK_CHUNK, CAF_RDMA_FALLBACK_WINDOW,
  /// CAF_RDMA_GPU and the IbverbsConfig variables (CAF_RDMA_DEVICE, ...).
  static Result<ManagerOptions> from_env();
};

/// Spawns a manager. With kAuto and no usable device the manager runs fallback-only (its stats
/// say so); with kRdma a missing device is an error here.
Result<rdma_manager_actor> spawn_manager(caf::actor_system& sys, ManagerOptions options);

}  // namespace caf_rdma
