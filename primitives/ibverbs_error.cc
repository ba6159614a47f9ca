#include "primitives/ibverbs_error.h"

#include <cstring>

namespace caf_rdma {

namespace {

// Written by completion_error, read back by wc_status_in.
constexpr const char* kWcStatusSaid = " completed with status ";
constexpr const char* kWcStatusEnd = " (";

}  // namespace

Error ibverbs_error(const std::string& call, int err, const std::string& where) {
  std::string msg = call + " failed on " + where + ": " + errno_string(err) + " (errno " +
                    std::to_string(err) + ")";
  return Error(ErrorCode::kIbverbsCall, std::move(msg));
}

const char* wc_opcode_name(ibv_wc_opcode opcode) {
  switch (opcode) {
    case IBV_WC_SEND:
      return "SEND";
    case IBV_WC_RDMA_WRITE:
      return "RDMA_WRITE";
    case IBV_WC_RDMA_READ:
      return "RDMA_READ";
    case IBV_WC_COMP_SWAP:
      return "ATOMIC_CMP_AND_SWP";
    case IBV_WC_FETCH_ADD:
      return "ATOMIC_FETCH_AND_ADD";
    case IBV_WC_BIND_MW:
      return "BIND_MW";
    case IBV_WC_LOCAL_INV:
      return "LOCAL_INV";
    case IBV_WC_RECV:
      return "RECV";
    case IBV_WC_RECV_RDMA_WITH_IMM:
      return "RECV_RDMA_WITH_IMM";
    default:
      return "OTHER";
  }
}

Error completion_error(const ibv_wc& wc, const std::string& where) {
  std::string msg = std::string("work request ") + std::to_string(wc.wr_id) + " on " + where +
                    " (QP " + std::to_string(wc.qp_num) + ")" + kWcStatusSaid +
                    ibv_wc_status_str(wc.status) + kWcStatusEnd + std::to_string(wc.status) +
                    ", vendor syndrome 0x" +
                    [&] {
                      char buf[16];
                      std::snprintf(buf, sizeof(buf), "%x", wc.vendor_err);
                      return std::string(buf);
                    }() +
                    ")";
  // The opcode field is only valid on success, except for flush errors we still print it.
  if (wc.status == IBV_WC_SUCCESS)
    msg += std::string(", opcode ") + wc_opcode_name(wc.opcode);
  return Error(ErrorCode::kWorkCompletion, std::move(msg));
}

std::string wc_status_in(const std::string& message) {
  const auto at = message.find(kWcStatusSaid);
  if (at == std::string::npos)
    return "";
  const auto from = at + std::strlen(kWcStatusSaid);
  const auto end = message.find(kWcStatusEnd, from);
  return message.substr(from, end == std::string::npos ? std::string::npos : end - from);
}

}  // namespace caf_rdma
