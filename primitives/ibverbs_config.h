// IbverbsConfig: every knob of device selection and queue-pair setup, with Monarch's defaults.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <string>

#include "primitives/status.h"

namespace caf_rdma {

/// Environment variables read by `IbverbsConfig::from_env` (docs/configuration.md).
constexpr const char* kEnvDevice = "CAF_RDMA_DEVICE";       ///< device name, e.g. "mlx5_0"
constexpr const char* kEnvPort = "CAF_RDMA_PORT";           ///< port number, 1-based
constexpr const char* kEnvGidIndex = "CAF_RDMA_GID_INDEX";  ///< GID table index
constexpr const char* kEnvTrafficClass = "CAF_RDMA_TC";     ///< GRH traffic class (DSCP << 2)
constexpr const char* kEnvServiceLevel = "CAF_RDMA_SL";     ///< service level 0..15
constexpr const char* kEnvTimeout = "CAF_RDMA_TIMEOUT";     ///< local ACK timeout exponent
constexpr const char* kEnvNetdev = "CAF_RDMA_NETDEV";       ///< RoCE: the GID's interface
/// The process's rank on its host: CAF_RDMA_LOCAL_RANK, else the first set of the launchers'
/// variables (torchrun, Open MPI, Slurm, MPICH/Hydra).
constexpr const char* kEnvLocalRank = "CAF_RDMA_LOCAL_RANK";
constexpr const char* kLauncherLocalRankVariables[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                                       "SLURM_LOCALID", "MPI_LOCALRANKID"};

/// What a device and port allow; `IbverbsConfig::clamped` fits a config into these.
struct DeviceLimits {
  uint32_t max_qp_wr = 0;
  uint32_t max_sge = 0;
  uint32_t max_qp_rd_atom = 0;       ///< outstanding RDMA READ/atomic as initiator
  uint32_t max_qp_init_rd_atom = 0;  ///< outstanding RDMA READ/atomic as responder
  uint32_t max_cqe = 0;
  ibv_mtu active_mtu = IBV_MTU_1024;
  uint32_t max_msg_sz = 0;
};

struct IbverbsConfig {
  /// Device name; empty selects the first device whose port `port_num` is ACTIVE (or, with
  /// `near_pci_device`, the active one closest to that PCI device).
  std::string device_name;
  /// PCI bus id ("0000:3b:00.0") of a GPU whose memory this domain will register: without a
  /// device name, the NIC closest to it on the PCIe tree is chosen (ties by name).
  std::string near_pci_device;
  /// This process's rank among the processes of its host, or -1. Without a device name or
  /// near_pci_device, rank r takes the (r mod n)-th of the n devices with an active port (by
  /// name, hardware only when there is any), so the processes of a node spread over its NICs.
  int local_rank = -1;
  /// Port number (1-based).
  uint8_t port_num = 1;
  /// GID index; -1 selects automatically (see `select_gid_index`).
  int gid_index = -1;
  /// RoCE: choose the GID automatically among those of this network interface (e.g. "eth1",
  /// "eth1.100"); empty: any. Ignored when `gid_index` is given.
  std::string netdev;
  uint32_t max_send_wr = 512;
  uint32_t max_recv_wr = 512;
  /// Scatter/gather entries per work request. Gather lists longer than this are split into
  /// more work requests; every entry enlarges every WQE of the queue (mlx5: 16 bytes each).
  uint32_t max_send_sge = 4;
  uint32_t max_recv_sge = 4;
  /// Bytes a WRITE or SEND may carry inside its work request (copied at post time, no DMA read
  /// of the source): requests up to the size the device grants go inline. 0 disables; a
  /// device that refuses inline data gets a QP without it.
  uint32_t max_inline_data = 64;
  /// Completion queue depth, at least; 0 derives it from max_send_wr + max_recv_wr. The queue
  /// pair grows its CQ to what the device actually granted (providers round work requests up).
  uint32_t cq_entries = 0;
  /// Requested path MTU; clamped to the port's active MTU.
  ibv_mtu path_mtu = IBV_MTU_4096;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  /// Local ACK timeout exponent: 4.096 us * 2^qp_timeout per attempt, retry_cnt + 1 attempts
  /// before IBV_WC_RETRY_EXC_ERR (18 = about 1.07 s each, ~8.6 s in all, as NCCL; 14 = 67 ms
  /// each gave up after ~0.5 s, shorter than a congested fabric or a switch failover stalls).
  uint8_t qp_timeout = 18;
  /// RNR NAK timer code (12 = 0.64 ms).
  uint8_t min_rnr_timer = 12;
  /// Outstanding RDMA READ/atomic operations, initiator side; clamped to device caps.
  uint8_t max_rd_atomic = 16;
  /// Outstanding RDMA READ/atomic operations, responder side; clamped to device caps.
  uint8_t max_dest_rd_atomic = 16;
  uint16_t pkey_index = 0;
  /// Hop limit for routed (GRH) traffic.
  uint8_t hop_limit = 64;
  /// GRH traffic class (RoCE: DSCP << 2 | ECN bits, e.g. 106 = DSCP 26 with ECN): lossless
  /// fabrics put PFC/ECN on one DSCP or priority, traffic with class 0 lands in the lossy one.
  uint8_t traffic_class = 0;
  /// Service level 0..15 of the address vector (InfiniBand: selects the virtual lane; RoCE:
  /// the priority where the provider maps it).
  uint8_t service_level = 0;

  /// Checks every field against its valid range; the error names the field and the value.
  Status validate() const;

  /// A copy fitted into what the device allows (MTU, work requests, SGEs, rd_atomic, CQ).
  IbverbsConfig clamped(const DeviceLimits& limits) const;

  /// The completion queue depth to use (cq_entries, or derived).
  uint32_t effective_cq_entries() const;

  /// Applies CAF_RDMA_DEVICE, CAF_RDMA_PORT, CAF_RDMA_GID_INDEX, CAF_RDMA_NETDEV, CAF_RDMA_TC,
  /// CAF_RDMA_SL and CAF_RDMA_TIMEOUT (when set) on top of `base` and validates. A malformed value
  /// is an error naming the variable. `getenv_fn` replaces std::getenv (tests).
  static Result<IbverbsConfig> from_env(
      IbverbsConfig base, const std::function<const char*(const char*)>& getenv_fn = nullptr);
  /// from_env on top of the defaults.
  static Result<IbverbsConfig> from_env();
};

/// Bytes of an ibv_mtu value (IBV_MTU_1024 -> 1024); 0 for an invalid value.
uint32_t mtu_bytes(ibv_mtu mtu);

/// A random packet sequence number (24 bits).
uint32_t random_psn();

}  // namespace caf_rdma
