#include "doctor/loopback_check.h"

#include <vector>

#include "components/rdma_domain.h"
#include "components/rdma_queue_pair.h"

namespace caf_rdma::doctor {

namespace {

const char* const kLoopbackFix =
    "the error names the call and the ibverbs status; see the device's lines above, and compare "
    "with rdma-core's own test (`ibv_rc_pingpong -d DEV -g GID_INDEX` in two shells)";

/// The WRITE and the READ; success only when every byte arrived both times.
Status write_and_read(const std::shared_ptr<RdmaDomain>& domain) {
  CAF_RDMA_ASSIGN_OR_RETURN(auto a, RdmaQueuePair::create(domain));
  CAF_RDMA_ASSIGN_OR_RETURN(auto b, RdmaQueuePair::create(domain));
  CAF_RDMA_RETURN_IF_ERROR(RdmaQueuePair::connect_pair(*a, *b));
  std::vector<uint8_t> src(kLoopbackBytes), dst(kLoopbackBytes, 0), back(kLoopbackBytes, 0);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<uint8_t>((i * 131 + i / 256 + 7) & 0xff);
  CAF_RDMA_ASSIGN_OR_RETURN(auto s, domain->register_buffer(src.data(), src.size()));
  CAF_RDMA_ASSIGN_OR_RETURN(auto d, domain->register_buffer(dst.data(), dst.size()));
  CAF_RDMA_ASSIGN_OR_RETURN(auto r, domain->register_buffer(back.data(), back.size()));
  OpResult wrote = a->execute(RdmaOp::write({s, 0, kLoopbackBytes}, d.remote()), kLoopbackTimeout);
  CAF_RDMA_RETURN_IF_ERROR(wrote.status);
  OpResult read = b->execute(RdmaOp::read({r, 0, kLoopbackBytes}, d.remote()), kLoopbackTimeout);
  CAF_RDMA_RETURN_IF_ERROR(read.status);
  for (size_t i = 0; i < src.size(); ++i) {
    if (dst[i] != src[i] || back[i] != src[i])
      return Error(ErrorCode::kDataMismatch, "byte " + std::to_string(i) + " differs: sent " +
                                                 std::to_string(src[i]) + ", written " +
                                                 std::to_string(dst[i]) + ", read back " +
                                                 std::to_string(back[i]));
  }
  return {};
}

}  // namespace

bool check_loopback(const IbverbsConfig& config, const std::string& device, Findings& out) {
  IbverbsConfig mine = config;
  mine.device_name = device;
  std::string what =
      "loopback RDMA WRITE + READ of " + std::to_string(kLoopbackBytes) + " bytes on " + device;
  auto domain = RdmaDomain::open(mine);
  if (!domain.ok()) {
    out.push_back(fail(what + ": " + domain.error().to_string(), kLoopbackFix));
    return false;
  }
  if (Status st = write_and_read(*domain); !st.ok()) {
    out.push_back(
        fail(what + " (" + (*domain)->describe() + "): " + st.error().to_string(), kLoopbackFix));
    return false;
  }
  out.push_back(ok(what + " (" + (*domain)->describe() + "): every byte checked"));
  return true;
}

}  // namespace caf_rdma::doctor
