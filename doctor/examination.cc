#include "doctor/examination.h"

#include "doctor/device_checks.h"
#include "doctor/gpu_checks.h"
#include "doctor/loopback_check.h"

namespace caf_rdma::doctor {

Examination examine(const HostView& host, const GpuView& gpus, const Result<IbverbsConfig>& config,
                    const ExaminationOptions& options) {
  Examination e;
  IbverbsConfig cfg;
  if (config.ok())
    cfg = *config;
  else
    e.findings.push_back(fail("configuration from the environment: " + config.error().message(),
                              "correct or unset that variable (docs/configuration.md); "
                              "every node refuses to start with it",
                              Scope::kAll));
  auto usable = check_devices(host, cfg, e.findings);
  check_device_choice(host, cfg, e.findings);
  e.findings.push_back(check_memlock(host, options.memlock_need));
  check_kernel_modules(host, e.findings);
  check_kernel(host, e.findings);
  check_gpus(host, gpus, e.findings);
  bool rdma_works = false;
  if (options.loopback)
    for (const auto& device : usable)
      rdma_works = check_loopback(cfg, device, e.findings) || rdma_works;
  else if (!usable.empty())
    e.findings.push_back(info("loopback RDMA transfers not run (--no-loopback)"));
  e.verdict =
      verdict(e.findings, options.require, rdma_works || (!options.loopback && !usable.empty()));
  return e;
}

}  // namespace caf_rdma::doctor
