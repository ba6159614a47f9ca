// Verdict: what the doctor's findings mean for the host, as a last line and an exit code.
//
// Invariants:
//  1. Exit codes: 0 ready, 1 not ready, 2 usage error (main's, never a verdict's).
//  2. `--require rdma` (the default): ready only when no finding failed and a loopback RDMA
//     transfer succeeded on at least one device. `--require any`: ready unless a failure stops
//     every transport (Scope::kAll); RDMA failures then only say that the fallback will be used.
#pragma once

#include <string>

#include "doctor/finding.h"

namespace caf_rdma::doctor {

enum class Requirement { kRdma, kAny };

/// "rdma" or "any"; false for anything else.
bool parse_requirement(const std::string& text, Requirement& out);

struct Verdict {
  int exit_code = 1;
  std::string line;
};

/// The verdict on `findings` under `requirement`; `rdma_works`: a loopback transfer succeeded.
Verdict verdict(const Findings& findings, Requirement requirement, bool rdma_works);

}  // namespace caf_rdma::doctor
