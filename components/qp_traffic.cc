// QpTraffic (see qp_traffic.h).
#include "components/qp_traffic.h"

namespace caf_rdma {

Status QpTraffic::check(const std::string& whose) const {
  auto bad = [&](const char* field, int value, const char* range) {
    return Error(ErrorCode::kInvalidArgument, whose + "." + field + " is " + std::to_string(value) +
                                                  "; it must be -1 (the "
                                                  "device's) or " +
                                                  range);
  };
  if (traffic_class < -1 || traffic_class > 255)
    return bad("traffic_class", traffic_class, "0..255");
  if (service_level < -1 || service_level > 15)
    return bad("service_level", service_level, "0..15");
  return {};
}

}  // namespace caf_rdma
