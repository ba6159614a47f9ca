// Log lines (see log.h).
#include "primitives/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace caf_rdma {

namespace {

constexpr int kUnset = -1;
std::atomic<int> level_{kUnset};

/// Invariant 1: "caf-rdma LEVEL: TEXT\n" in one write.
void write_line(LogLevel level, const std::string& text) {
  std::string line = std::string("caf-rdma ") + to_string(level) + ": " + text + "\n";
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

LogLevel level_from_environment() {
  const char* v = std::getenv(kEnvLog);
  if (v == nullptr || *v == '\0')
    return LogLevel::kInfo;
  auto parsed = parse_log_level(v);
  if (parsed.ok())
    return *parsed;
  // Said once: the first caller sets the level below; later ones find it set.
  write_line(LogLevel::kError, parsed.error().message() + "; using info");
  return LogLevel::kInfo;
}

}  // namespace

const char* to_string(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "error";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
  }
  return "?";
}

Result<LogLevel> parse_log_level(const std::string& text) {
  for (LogLevel l : {LogLevel::kError, LogLevel::kWarn, LogLevel::kInfo, LogLevel::kDebug})
    if (text == to_string(l))
      return l;
  return Error(ErrorCode::kInvalidArgument, std::string(kEnvLog) + "=" + text +
                                                " is not a log level: use error, warn, info "
                                                "or debug");
}

LogLevel log_level() {
  int l = level_.load(std::memory_order_acquire);
  if (l != kUnset)
    return static_cast<LogLevel>(l);
  static std::once_flag once;
  std::call_once(once, [] {
    int unset = kUnset;
    level_.compare_exchange_strong(unset, static_cast<int>(level_from_environment()),
                                   std::memory_order_acq_rel);
  });
  return static_cast<LogLevel>(level_.load(std::memory_order_acquire));
}

void set_log_level(LogLevel level) {
  level_.store(static_cast<int>(level), std::memory_order_release);
}

void log_line(LogLevel level, const char* format, ...) {
  if (!log_enabled(level))
    return;
  char text[2048];
  va_list args;
  va_start(args, format);
  int n = std::vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  if (n < 0)
    return;
  write_line(level, static_cast<size_t>(n) >= sizeof(text) ? std::string(text) + " [cut]"
                                                           : std::string(text));
}

}  // namespace caf_rdma
