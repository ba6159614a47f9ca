#include "doctor/gpu_probe.h"

#include <unistd.h>

#include "primitives/cuda_driver.h"

namespace caf_rdma::doctor {

namespace {

constexpr uint64_t kProbeBytes = uint64_t{2} << 20;

void probe_dmabuf(const CudaDriver& cuda, GpuInfo& gpu) {
  auto p = cuda.alloc_device(kProbeBytes, gpu.ordinal);
  if (!p.ok()) {
    gpu.dmabuf_error = p.error().to_string();
    return;
  }
  auto fd = cuda.dmabuf_fd(*p, kProbeBytes, gpu.ordinal);
  if (fd.ok()) {
    gpu.dmabuf_ok = true;
    ::close(*fd);
  } else {
    gpu.dmabuf_error = fd.error().to_string();
  }
  (void)cuda.free_device(*p);
}

}  // namespace

GpuView GpuView::of_this_host() {
  GpuView view;
  view.built_with_cuda = CudaDriver::built_with_cuda();
  auto cuda = CudaDriver::get();
  if (!cuda.ok()) {
    view.driver_error = cuda.error().message();
    return view;
  }
  for (int d = 0; d < (*cuda)->device_count(); ++d) {
    GpuInfo gpu;
    gpu.ordinal = d;
    if (auto id = (*cuda)->pci_bus_id(d); id.ok())
      gpu.bus_id = *id;
    probe_dmabuf(**cuda, gpu);
    view.gpus.push_back(std::move(gpu));
  }
  return view;
}

}  // namespace caf_rdma::doctor
