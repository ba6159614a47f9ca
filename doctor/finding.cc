#include "doctor/finding.h"

#include <utility>

namespace caf_rdma::doctor {

Finding ok(std::string what) {
  return Finding{Level::kOk, std::move(what), "", Scope::kRdma};
}

Finding info(std::string what) {
  return Finding{Level::kInfo, std::move(what), "", Scope::kRdma};
}

Finding warn(std::string what, std::string fix) {
  return Finding{Level::kWarn, std::move(what), std::move(fix), Scope::kRdma};
}

Finding fail(std::string what, std::string fix, Scope scope) {
  return Finding{Level::kFail, std::move(what), std::move(fix), scope};
}

const char* tag(Level level) {
  switch (level) {
    case Level::kOk:
      return "[ok]";
    case Level::kInfo:
      return "[info]";
    case Level::kWarn:
      return "[warn]";
    case Level::kFail:
      return "[FAIL]";
  }
  return "[?]";
}

std::string format(const Finding& finding) {
  std::string tag_text = tag(finding.level);
  std::string out = tag_text + std::string(7 - tag_text.size(), ' ') + finding.what;
  if (!finding.fix.empty())
    out += "\n       fix: " + finding.fix;
  return out;
}

}  // namespace caf_rdma::doctor
