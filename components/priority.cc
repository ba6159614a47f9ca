// Priority classes (see priority.h).
#include "components/priority.h"

namespace caf_rdma {

const char* priority_name(Priority p) {
  switch (p) {
    case Priority::kLatency:
      return "latency";
    case Priority::kBulk:
      return "bulk";
    case Priority::kBackground:
      return "background";
  }
  return "unknown";
}

std::optional<Priority> priority_from_wire(uint32_t v) {
  if (v > static_cast<uint32_t>(Priority::kBackground))
    return std::nullopt;
  return static_cast<Priority>(v);
}

std::string unknown_priority_text(uint64_t v) {
  return "priority class " + std::to_string(v) +
         " is none of bulk (0), latency (1), background (2)";
}

std::optional<Priority> parse_priority(const std::string& name) {
  for (size_t u = 0; u < kPriorityClasses; ++u)
    if (name == priority_name(priority_of_urgency(u)))
      return priority_of_urgency(u);
  return std::nullopt;
}

}  // namespace caf_rdma
