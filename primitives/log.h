// Log lines of caf-rdma: the one place that decides whether a line is printed and how it looks.
// Every layer logs through it (no other stderr output in the library).
//
// Invariants:
//  1. A printed line reaches stderr whole, in one write: "caf-rdma <level>: <text>\n".
//  2. The level comes from CAF_RDMA_LOG (error, warn, info, debug), read at the first line
//     logged, unless set_log_level ran before; the default is info. A value that is none of
//     those is said once (as an error line naming the variable and the values) and info is
//     used; RdmaNode::start refuses it (NodeOptions::from_env parses it with parse_log_level).
//  3. A line above the level is neither formatted nor written (log_enabled says which).
#pragma once

#include <cstdint>
#include <string>

#include "primitives/status.h"

namespace caf_rdma {

enum class LogLevel : uint8_t {
  kError = 0,  ///< something failed that the program or the operator must act on
  kWarn,       ///< works, but not as asked or as well as it could (fell back, slower path)
  kInfo,       ///< one line per node start and per rare event (device lost, link lost)
  kDebug,      ///< one line per transfer (path, peer, bytes, time)
};

/// The environment variable that sets the level.
constexpr const char* kEnvLog = "CAF_RDMA_LOG";

const char* to_string(LogLevel level);
/// "error", "warn", "info" or "debug"; anything else an invalid_argument error naming
/// CAF_RDMA_LOG and the values.
Result<LogLevel> parse_log_level(const std::string& text);

LogLevel log_level();
void set_log_level(LogLevel level);
inline bool log_enabled(LogLevel level) {
  return level <= log_level();
}

/// Writes one line at `level` (printf-style format) when the level allows it.
void log_line(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace caf_rdma
