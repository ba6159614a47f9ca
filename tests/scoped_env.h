// ScopedEnv: sets an environment variable for one scope, then restores what was there. Tests
// change the environment only while no node of theirs runs (nothing reads it meanwhile).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace caf_rdma::testing {

class ScopedEnv {
public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name); old != nullptr)
      old_ = old;
    ::setenv(name, value.c_str(), 1);  // NOLINT(concurrency-mt-unsafe): see above
  }
  ~ScopedEnv() {
    if (old_.has_value())
      ::setenv(name_, old_->c_str(), 1);  // NOLINT(concurrency-mt-unsafe): see above
    else
      ::unsetenv(name_);  // NOLINT(concurrency-mt-unsafe): see above
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace caf_rdma::testing
