#include "doctor/host_checks.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>

#include "components/rdma_domain.h"
#include "primitives/memory_region.h"

namespace caf_rdma::doctor {

namespace {

std::string kib(uint64_t bytes) {
  return std::to_string(bytes / 1024) + " KiB";
}

bool proc_modules_readable(const HostView& host) {
  return std::ifstream(host.proc_root + "/modules").good();
}

}  // namespace

Finding check_memlock(const HostView& host, uint64_t need) {
  std::string what = "locked-memory limit (RLIMIT_MEMLOCK, `ulimit -l`): ";
  if (host.memlock_limit == RLIM_INFINITY)
    return ok(what + "unlimited");
  what += kib(host.memlock_limit);
  if (host.has_ipc_lock)
    return ok(what + ", lifted by CAP_IPC_LOCK (registration may pin any amount)");
  std::string rule =
      "; caf-rdma pins every registered buffer while it is registered, so a "
      "process needs the bytes it registers at once (unlimited is best; the doctor asks for at "
      "least " +
      kib(need) + ", --memlock-need)";
  if (host.memlock_limit < need)
    return fail(what + ", below " + kib(need) + rule, kMemlockFix);
  return warn(what + rule, kMemlockFix);
}

bool module_loaded(const HostView& host, const std::string& name) {
  std::ifstream modules(host.proc_root + "/modules");
  std::string line;
  while (std::getline(modules, line))
    if (line.compare(0, name.size() + 1, name + " ") == 0)
      return true;
  return !list_directory(host.sysfs_root + "/module/" + name).empty();
}

void check_kernel_modules(const HostView& host, Findings& out) {
  std::string unreadable =
      proc_modules_readable(host) ? "" : " (" + host.proc_root + "/modules is not readable)";
  if (module_loaded(host, "ib_uverbs"))
    out.push_back(ok("kernel module ib_uverbs loaded (user-space verbs)"));
  else
    out.push_back(fail("kernel module ib_uverbs not loaded" + unreadable,
                       "`modprobe ib_uverbs` and the NIC's driver (e.g. mlx5_ib), or "
                       "`modprobe rdma_rxe` for Soft-RoCE; a kernel built without "
                       "CONFIG_INFINIBAND_USER_ACCESS cannot do RDMA from user space"));
  if (module_loaded(host, "rdma_rxe"))
    out.push_back(info("kernel module rdma_rxe loaded (Soft-RoCE)"));
  else
    out.push_back(info("kernel module rdma_rxe not loaded" + unreadable +
                       ": Soft-RoCE, for a host without an RDMA NIC, needs it "
                       "(`modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0`)"));
  std::string dir = host.dev_root + "/infiniband";
  std::string nodes, unusable;
  for (const auto& name : list_directory(dir)) {
    if (name.rfind("uverbs", 0) != 0)
      continue;
    nodes += (nodes.empty() ? "" : ", ") + name;
    std::string node = dir;
    node += "/";
    node += name;
    if (::access(node.c_str(), R_OK | W_OK) != 0)
      unusable += (unusable.empty() ? "" : ", ") + name;
  }
  if (nodes.empty())
    out.push_back(fail("no " + dir + "/uverbs* device nodes",
                       "load ib_uverbs (above); in a container pass the nodes in "
                       "(`docker run --device=/dev/infiniband/uverbs0 ...`, or mount "
                       "/dev/infiniband)"));
  else if (!unusable.empty())
    out.push_back(fail(dir + ": " + unusable + " not readable and writable by this user",
                       "add the user to the group that owns them (often `rdma`), or a udev "
                       "rule giving them mode 0666 (rdma-core ships one)"));
  else
    out.push_back(ok(dir + ": " + nodes));
}

void check_kernel(const HostView& host, Findings& out) {
  out.push_back(info(
      "kernel " + (host.kernel_release.empty() ? std::string("(unknown)") : host.kernel_release)));
  std::string rxe;
  for (const auto& d : host.devices)
    if (rxe.empty() && !known_device_problem(d.name, 0, host.kernel_release).empty())
      rxe = d.name;
  if (rxe.empty() && module_loaded(host, "rdma_rxe"))
    rxe = "rxe";
  if (rxe.empty())
    return;
  std::string problem = known_device_problem(rxe, 0, host.kernel_release);
  if (!problem.empty())
    out.push_back(warn(problem, "boot Linux 6.2 or newer (docs/limits.md, \"Known limits\")"));
}

}  // namespace caf_rdma::doctor
