// QpInfo: what one side of a reliable connection tells the other to connect to it.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "primitives/gid.h"

namespace caf_rdma {

/// Plain data; actors/ makes it serializable. Sent both ways in the connection handshake.
struct QpInfo {
  uint32_t qp_num = 0;
  uint16_t lid = 0;            ///< port LID (InfiniBand); 0 on RoCE
  Gid gid{};                   ///< the GID selected for this QP's port
  uint32_t psn = 0;            ///< initial packet sequence number (24 bits)
  uint8_t mtu = IBV_MTU_1024;  ///< ibv_mtu this side can use (its clamped path MTU)
  bool is_ethernet = true;     ///< link layer of this side's port (RoCE needs a GRH)
  /// READs/atomics this side's responder accepts outstanding (its max_dest_rd_atomic); the
  /// other side initiates at most that many. 0: unknown (then only its own limit counts).
  uint8_t max_dest_rd_atomic = 0;
  /// The opening of the device this QP lives on (RdmaDomain::incarnation): a device that went
  /// away and came back is a new incarnation, and its old remote keys are meaningless.
  uint64_t incarnation = 0;
};

/// "qp 17 lid 0 gid ::ffff:10.99.0.1 psn 0xabc mtu 1024".
std::string to_string(const QpInfo& info);

}  // namespace caf_rdma
