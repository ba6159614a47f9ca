// GpuView: the GPUs the CUDA driver shows this process and whether each exports GPU memory as
// a dmabuf (what GPUDirect registration tries first). The only doctor code that calls CUDA
// (through caf-rdma's dlopen'ed CudaDriver); gpu_checks judges what it found.
//
// Invariants:
//  1. No CUDA driver, or a build without --config=cuda, is a fact recorded here, not an error.
//  2. The dmabuf probe allocates 2 MiB on each GPU and frees it before returning.
#pragma once

#include <string>
#include <vector>

namespace caf_rdma::doctor {

struct GpuInfo {
  int ordinal = 0;
  std::string bus_id;        ///< "0000:3b:00.0"; "" when the driver did not say
  bool dmabuf_ok = false;    ///< a dmabuf export of device memory succeeded
  std::string dmabuf_error;  ///< why not
};

struct GpuView {
  bool built_with_cuda = false;
  std::string driver_error;  ///< why the driver cannot be used ("" when it can)
  std::vector<GpuInfo> gpus;

  /// This process's GPUs.
  static GpuView of_this_host();
};

}  // namespace caf_rdma::doctor
