#include "primitives/queue_pair.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "primitives/ibverbs_error.h"

namespace caf_rdma {

std::string to_string(const QpInfo& info) {
  char psn[16];
  std::snprintf(psn, sizeof(psn), "0x%06x", info.psn);
  return "qp " + std::to_string(info.qp_num) + " lid " + std::to_string(info.lid) + " gid " +
         to_string(info.gid) + " psn " + psn + " mtu " +
         (info.mtu >= IBV_MTU_256 && info.mtu <= IBV_MTU_4096
              ? std::to_string(mtu_bytes(static_cast<ibv_mtu>(info.mtu)))
              : "code " + std::to_string(info.mtu) + " (invalid)") +
         (info.is_ethernet ? " (RoCE)" : " (IB)");
}

const char* to_string(ibv_qp_state state) {
  switch (state) {
    case IBV_QPS_RESET:
      return "RESET";
    case IBV_QPS_INIT:
      return "INIT";
    case IBV_QPS_RTR:
      return "RTR";
    case IBV_QPS_RTS:
      return "RTS";
    case IBV_QPS_SQD:
      return "SQD";
    case IBV_QPS_SQE:
      return "SQE";
    case IBV_QPS_ERR:
      return "ERR";
    default:
      return "UNKNOWN";
  }
}

Result<std::unique_ptr<QueuePair>> QueuePair::create(std::shared_ptr<ProtectionDomain> pd,
                                                     std::shared_ptr<CompletionQueue> send_cq,
                                                     std::shared_ptr<CompletionQueue> recv_cq,
                                                     const IbverbsConfig& config) {
  ibv_qp_init_attr init{};
  init.send_cq = send_cq->get();
  init.recv_cq = recv_cq->get();
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = config.max_send_wr;
  init.cap.max_recv_wr = config.max_recv_wr;
  init.cap.max_send_sge = config.max_send_sge;
  init.cap.max_recv_sge = config.max_recv_sge;
  init.cap.max_inline_data = config.max_inline_data;
  errno = 0;
  ibv_qp* qp = ibv_create_qp(pd->get(), &init);
  if (qp == nullptr && config.max_inline_data > 0) {
    // Some providers take no inline data (or less): such a QP simply posts everything by DMA.
    init.cap.max_inline_data = 0;
    errno = 0;
    qp = ibv_create_qp(pd->get(), &init);
  }
  if (qp == nullptr)
    return ibverbs_error("ibv_create_qp(RC, max_send_wr " + std::to_string(config.max_send_wr) +
                             ", max_recv_wr " + std::to_string(config.max_recv_wr) +
                             ", max_send_sge " + std::to_string(config.max_send_sge) + ")",
                         errno ? errno : ENOMEM, "device " + pd->context()->name());
  // ibv_create_qp writes back the capabilities actually granted.
  return std::unique_ptr<QueuePair>(
      new QueuePair(std::move(pd), std::move(send_cq), std::move(recv_cq), qp, init.cap));
}

QueuePair::~QueuePair() {
  ibv_destroy_qp(qp_);
}

std::string QueuePair::describe() const {
  return pd_->context()->name() + " QP " + std::to_string(qp_->qp_num);
}

Status QueuePair::modify(ibv_qp_attr& attr, int mask, const char* what) {
  if (int rc = ibv_modify_qp(qp_, &attr, mask); rc != 0)
    return ibverbs_error(std::string("ibv_modify_qp(") + what + ")", rc, describe());
  return {};
}

Status QueuePair::connect(const IbverbsConfig& config, const QpInfo& remote, uint32_t local_psn,
                          int gid_index) {
  if (remote.mtu < IBV_MTU_256 || remote.mtu > IBV_MTU_4096)
    return Error(ErrorCode::kInvalidArgument,
                 "connecting " + describe() + ": the peer's MTU code " +
                     std::to_string(remote.mtu) + " is no ibv_mtu (1..5)");
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = config.pkey_index;
  attr.port_num = config.port_num;
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                         IBV_ACCESS_REMOTE_ATOMIC;
  CAF_RDMA_RETURN_IF_ERROR(modify(
      attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "RESET->INIT"));
  attr = {};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = std::min(config.path_mtu, static_cast<ibv_mtu>(remote.mtu));
  attr.dest_qp_num = remote.qp_num;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = config.max_dest_rd_atomic;
  attr.min_rnr_timer = config.min_rnr_timer;
  attr.ah_attr.port_num = config.port_num;
  attr.ah_attr.dlid = remote.lid;
  attr.ah_attr.sl = config.service_level;
  attr.ah_attr.src_path_bits = 0;
  // RoCE always needs a GRH; InfiniBand only across subnets (addressed by LID here).
  if (remote.is_ethernet || remote.lid == 0) {
    if (gid_index < 0)
      return Error(ErrorCode::kInvalidArgument, "connecting " + describe() + " to " +
                                                    to_string(remote) +
                                                    " needs a GID index (RoCE), none was selected");
    attr.ah_attr.is_global = 1;
    std::copy(remote.gid.begin(), remote.gid.end(), attr.ah_attr.grh.dgid.raw);
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index);
    attr.ah_attr.grh.hop_limit = config.hop_limit;
    attr.ah_attr.grh.traffic_class = config.traffic_class;
  }
  Status st = modify(attr,
                     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                     "INIT->RTR");
  if (!st.ok())
    return st.error().with_context("connecting to " + to_string(remote));
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = local_psn;
  attr.timeout = config.qp_timeout;
  attr.retry_cnt = config.retry_cnt;
  attr.rnr_retry = config.rnr_retry;
  // Never more READs in flight than the peer's responder takes: beyond that a NIC drops or
  // NAKs them (retries, then a QP in ERR).
  attr.max_rd_atomic = remote.max_dest_rd_atomic == 0
                           ? config.max_rd_atomic
                           : std::min(config.max_rd_atomic, remote.max_dest_rd_atomic);
  return modify(attr,
                IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
                "RTR->RTS");
}

Status QueuePair::to_error() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  return modify(attr, IBV_QP_STATE, "->ERR");
}

Status QueuePair::reset() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RESET;
  return modify(attr, IBV_QP_STATE, "->RESET");
}

Result<ibv_qp_state> QueuePair::state() const {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (int rc = ibv_query_qp(qp_, &attr, IBV_QP_STATE, &init); rc != 0)
    return ibverbs_error("ibv_query_qp", rc, describe());
  return attr.qp_state;
}

Result<ibv_ah_attr> QueuePair::address() const {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (int rc = ibv_query_qp(qp_, &attr, IBV_QP_AV, &init); rc != 0)
    return ibverbs_error("ibv_query_qp", rc, describe());
  return attr.ah_attr;
}

Result<uint8_t> QueuePair::max_rd_atomic() const {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (int rc = ibv_query_qp(qp_, &attr, IBV_QP_MAX_QP_RD_ATOMIC, &init); rc != 0)
    return ibverbs_error("ibv_query_qp", rc, describe());
  return attr.max_rd_atomic;
}

Status QueuePair::post_send(ibv_send_wr* wr) {
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, wr, &bad); rc != 0)
    return ibverbs_error("ibv_post_send(wr_id " + std::to_string(bad ? bad->wr_id : 0) + ")", rc,
                         describe());
  return {};
}

Status QueuePair::post_recv(ibv_recv_wr* wr) {
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_, wr, &bad); rc != 0)
    return ibverbs_error("ibv_post_recv(wr_id " + std::to_string(bad ? bad->wr_id : 0) + ")", rc,
                         describe());
  return {};
}

}  // namespace caf_rdma
