#include "components/work_request_plan.h"

#include <algorithm>

namespace caf_rdma {

namespace {

constexpr uint64_t kMaxSgeBytes = uint64_t{1} << 31;

}  // namespace

Result<std::vector<PlannedWorkRequest>> plan_work_requests(
    const std::vector<LocalSegment>& segments, uint64_t remote_addr, uint64_t max_message,
    uint32_t max_sge) {
  if (max_message == 0 || max_sge == 0)
    return Error(ErrorCode::kInvalidArgument,
                 "work request plan needs max_message > 0 and max_sge > 0 (got " +
                     std::to_string(max_message) + ", " + std::to_string(max_sge) + ")");
  std::vector<PlannedWorkRequest> out;
  PlannedWorkRequest cur;
  cur.remote_addr = remote_addr;
  uint64_t remote = remote_addr;
  auto flush = [&] {
    if (cur.length > 0)
      out.push_back(std::move(cur));
    cur = PlannedWorkRequest{};
    cur.remote_addr = remote;
  };
  for (const auto& seg : segments) {
    uint64_t done = 0;
    while (done < seg.length) {
      if (cur.length == max_message || cur.sges.size() == max_sge)
        flush();
      uint64_t take = std::min({seg.length - done, max_message - cur.length, kMaxSgeBytes});
      cur.sges.push_back(PlannedSge{seg.addr + done, static_cast<uint32_t>(take), seg.lkey});
      cur.length += take;
      done += take;
      remote += take;
    }
  }
  flush();
  if (out.empty())
    return Error(ErrorCode::kInvalidArgument, "nothing to transfer: all segments are empty");
  return out;
}

}  // namespace caf_rdma
