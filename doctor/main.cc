// caf_rdma_doctor: says, line by line, whether this host is ready for caf-rdma, and for each
// line that is not ready, its fix. Exit code: 0 ready, 1 not ready, 2 usage error (verdict.h).
#include <cstdio>
#include <cstring>

#include "doctor/examination.h"
#include "support/flags.h"

using namespace caf_rdma;
using namespace caf_rdma::doctor;

namespace {

const char* const kUsage =
    "usage: caf_rdma_doctor [--require rdma|any] [--memlock-need BYTES] [--no-loopback]\n"
    "  Checks this host for caf-rdma, one line per check ([ok], [info], [warn], [FAIL]; each\n"
    "  [warn] and [FAIL] with its fix): RDMA devices, ports, GIDs and the device each local\n"
    "  rank takes; the locked-memory limit; kernel modules and /dev/infiniband; the kernel;\n"
    "  GPUs (CUDA driver, dmabuf, nvidia_peermem, PCIe path and ACS to each NIC); and a\n"
    "  loopback RDMA WRITE + READ on each usable device, every byte checked. It reads the\n"
    "  CAF_RDMA_* variables as a node would (CAF_RDMA_DEVICE, CAF_RDMA_PORT, ...).\n"
    "  --require rdma   (default) ready when nothing failed and RDMA moved bytes\n"
    "  --require any    ready when some transport works (without RDMA: the fallback, TCP)\n"
    "  --memlock-need   a finite `ulimit -l` below this fails (default 64M; K/M/G suffixes)\n"
    "  --no-loopback    skip the loopback transfers\n"
    "  exit code: 0 ready, 1 not ready, 2 usage error\n";

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  auto flags = Flags::parse(argc, argv, {"--require", "--memlock-need"}, {"--no-loopback"});
  if (!flags.ok()) {
    std::fprintf(stderr, "caf_rdma_doctor: %s\n%s", flags.error().message().c_str(), kUsage);
    return 2;
  }
  ExaminationOptions options;
  std::string require = flags->get("--require", "rdma");
  if (!parse_requirement(require, options.require)) {
    std::fprintf(stderr, "caf_rdma_doctor: --require '%s': expected rdma or any\n%s",
                 require.c_str(), kUsage);
    return 2;
  }
  auto need = flags->get_u64("--memlock-need", kDefaultMemlockNeed);
  if (!need.ok()) {
    std::fprintf(stderr, "caf_rdma_doctor: %s\n%s", need.error().message().c_str(), kUsage);
    return 2;
  }
  options.memlock_need = *need;
  options.loopback = !flags->has("--no-loopback");
  Examination e = examine(HostView::of_this_host(), GpuView::of_this_host(),
                          IbverbsConfig::from_env(), options);
  for (const auto& f : e.findings)
    std::printf("%s\n", format(f).c_str());
  std::printf("%s\n", e.verdict.line.c_str());
  return e.verdict.exit_code;
}
