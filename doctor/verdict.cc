#include "doctor/verdict.h"

namespace caf_rdma::doctor {

bool parse_requirement(const std::string& text, Requirement& out) {
  if (text == "rdma")
    out = Requirement::kRdma;
  else if (text == "any")
    out = Requirement::kAny;
  else
    return false;
  return true;
}

Verdict verdict(const Findings& findings, Requirement requirement, bool rdma_works) {
  int failed = 0, failed_all = 0, warned = 0;
  for (const auto& f : findings) {
    failed += f.level == Level::kFail ? 1 : 0;
    failed_all += f.level == Level::kFail && f.scope == Scope::kAll ? 1 : 0;
    warned += f.level == Level::kWarn ? 1 : 0;
  }
  auto count = [](int n, const char* what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  std::string tally = count(failed, "failure") + ", " + count(warned, "warning");
  if (failed_all > 0)
    return {1, "NOT READY (" + tally +
                   "): no transport can start until the failures above "
                   "marked for every transport are fixed"};
  bool rdma_ready = failed == 0 && rdma_works;
  if (rdma_ready)
    return {0, "READY for RDMA (" + tally + ")"};
  std::string why = failed > 0 ? tally : "no loopback RDMA transfer succeeded";
  if (requirement == Requirement::kAny)
    return {0, "READY on the fallback transport (TCP), not for RDMA (" + why +
                   "): CAF_RDMA_TRANSPORT=auto, the default, takes the fallback"};
  return {1, "NOT READY for RDMA (" + why +
                 "); the fallback transport (TCP) works without a device "
                 "(CAF_RDMA_TRANSPORT=auto, the default; `--require any` accepts it)"};
}

}  // namespace caf_rdma::doctor
