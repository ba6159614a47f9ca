#include "components/gpu_registration.h"

#include "components/dmabuf_span.h"

#include <unistd.h>

#include <cstdio>

namespace caf_rdma {

Result<std::shared_ptr<MemoryRegion>> register_first_that_works(
    const std::vector<RegistrationAttempt>& attempts, const std::string& what) {
  std::string why;
  ErrorCode code = ErrorCode::kIbverbsCall;
  for (const auto& a : attempts) {
    auto r = a.run();
    if (r.ok())
      return r;
    why += (why.empty() ? "" : "; ") + a.name + ": " + r.error().to_string();
    code = r.error().code();
  }
  return Error(code, "cannot register " + what +
                         " with the NIC: " + (why.empty() ? std::string("no way to try") : why));
}

std::vector<RegistrationAttempt> gpudirect_attempts(const CudaDriver& cuda,
                                                    const std::shared_ptr<ProtectionDomain>& pd,
                                                    const PointerInfo& info, uint64_t addr,
                                                    uint64_t size, Access access) {
  std::vector<RegistrationAttempt> out;
  out.push_back(
      {"dmabuf", [&cuda, pd, info, addr, size, access]() -> Result<std::shared_ptr<MemoryRegion>> {
         if (info.base == 0 || info.size == 0 || addr < info.base ||
             addr - info.base + size > info.size)
           return Error(ErrorCode::kCuda, "the allocation around the pointer is unknown");
         // Export only the pages of the requested range (the driver wants page-aligned ranges;
         // the allocation's start is only 256-byte aligned), map the requested bytes of it.
         long page = ::sysconf(_SC_PAGESIZE);
         CAF_RDMA_ASSIGN_OR_RETURN(
             DmabufSpan span,
             dmabuf_span(addr, size, static_cast<uint64_t>(page > 0 ? page : 4096)));
         CAF_RDMA_ASSIGN_OR_RETURN(int fd, cuda.dmabuf_fd(span.start, span.length, info.device));
         auto mr = MemoryRegion::register_dmabuf(pd, span.offset, size, addr, fd, access);
         ::close(fd);  // the region keeps its own reference to the dmabuf
         return mr;
       }});
  out.push_back({"nvidia_peermem", [pd, addr, size, access]() {
                   return MemoryRegion::register_memory(pd, reinterpret_cast<void*>(addr), size,
                                                        access);
                 }});
  return out;
}

}  // namespace caf_rdma
