// Examination: every check of the doctor, in the order it prints them, and the verdict.
//
// Invariants:
//  1. The checks see the host only through a HostView and a GpuView (a test passes fakes), and
//     the configuration a node would take from the environment (IbverbsConfig::from_env).
//  2. The loopback transfers touch real devices: they run only when `loopback` is set, on the
//     devices the device checks found usable.
#pragma once

#include <cstdint>

#include "doctor/finding.h"
#include "doctor/gpu_probe.h"
#include "doctor/host_checks.h"
#include "doctor/host_view.h"
#include "doctor/verdict.h"
#include "primitives/ibverbs_config.h"

namespace caf_rdma::doctor {

struct ExaminationOptions {
  Requirement require = Requirement::kRdma;
  uint64_t memlock_need = kDefaultMemlockNeed;
  bool loopback = true;
};

struct Examination {
  Findings findings;
  Verdict verdict;
};

Examination examine(const HostView& host, const GpuView& gpus, const Result<IbverbsConfig>& config,
                    const ExaminationOptions& options);

}  // namespace caf_rdma::doctor
