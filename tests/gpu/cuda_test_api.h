// CudaTestApi: driver entry points only the GPU tests need (the library never launches kernels
// or allocates from memory pools): a kernel that writes the tests' byte pattern straight into
// GPU memory (PTX, JIT-compiled by the driver, so no nvcc in the build), and stream-ordered
// pool allocations (cuMemAllocAsync, what cudaMallocAsync and PyTorch's expandable segments
// hand out). Uses the libcuda.so.1 CudaDriver loaded (dlopen RTLD_NOLOAD) and each device's
// primary context, the one CudaDriver allocates in.
#pragma once

#include <cstdint>
#include <string>

#include "primitives/cuda_driver.h"
#include "primitives/status.h"

#ifdef CAF_RDMA_WITH_CUDA
#include <dlfcn.h>
#include "third_party/cuda/cuda.h"  // /usr/local/cuda's cuda.h (third_party/cuda.bzl)
#endif

namespace caf_rdma::testing {

#ifdef CAF_RDMA_WITH_CUDA

/// out[i] = uint8((i * 2654435761 + spread) >> 11) for i < n, `spread` being the seed times
/// 0x9E3779B97F4A7C15 (fill() passes it): the tests' pattern(i, seed), manager_fixture.h.
inline constexpr const char* kFillPtx = R"(
.version 7.0
.target sm_52
.address_size 64
.visible .entry caf_rdma_test_fill(.param .u64 out, .param .u64 n, .param .u64 spread)
{
  .reg .pred %done;
  .reg .b32 %r<4>;
  .reg .b64 %rd<9>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd1, %rd1;
  ld.param.u64 %rd2, [n];
  ld.param.u64 %rd3, [spread];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mul.wide.u32 %rd4, %r2, %r3;
  mov.u32 %r2, %tid.x;
  cvt.u64.u32 %rd5, %r2;
  add.u64 %rd4, %rd4, %rd5;
  mov.u32 %r2, %nctaid.x;
  mul.wide.u32 %rd5, %r2, %r3;
LOOP:
  setp.ge.u64 %done, %rd4, %rd2;
  @%done bra DONE;
  mul.lo.u64 %rd6, %rd4, 2654435761;
  add.u64 %rd6, %rd6, %rd3;
  shr.u64 %rd6, %rd6, 11;
  cvt.u32.u64 %r2, %rd6;
  add.u64 %rd7, %rd1, %rd4;
  st.global.u8 [%rd7], %r2;
  add.u64 %rd4, %rd4, %rd5;
  bra.uni LOOP;
DONE:
  ret;
}
)";

class CudaTestApi {
public:
  /// Loads the entry points and the kernel on GPU 0 (call after CudaDriver::get() succeeded).
  static Result<CudaTestApi> load() {
    CudaTestApi api;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr)
      return Error(ErrorCode::kCuda, "libcuda.so.1 is not loaded");
    bool ok =
        sym(lib, "cuDeviceGet", api.device_get_) &&
        sym(lib, "cuDevicePrimaryCtxRetain", api.ctx_retain_) &&
        sym(lib, "cuCtxSetCurrent", api.ctx_set_) && sym(lib, "cuCtxSynchronize", api.ctx_sync_) &&
        sym(lib, "cuModuleLoadData", api.module_load_) &&
        sym(lib, "cuModuleGetFunction", api.get_function_) &&
        sym(lib, "cuLaunchKernel", api.launch_) && sym(lib, "cuMemAllocAsync", api.alloc_async_) &&
        sym(lib, "cuMemFreeAsync", api.free_async_) &&
        sym(lib, "cuStreamSynchronize", api.stream_sync_) &&
        sym(lib, "cuMemHostAlloc", api.host_alloc_) &&
        sym(lib, "cuMemHostGetDevicePointer_v2", api.host_device_ptr_) &&
        sym(lib, "cuMemFreeHost", api.free_host_);
    if (!ok)
      return Error(ErrorCode::kCuda, std::string("missing CUDA entry point: ") + dlerror());
    CAF_RDMA_RETURN_IF_ERROR(api.use_gpu0());
    CUmodule module = nullptr;
    if (CUresult r = api.module_load_(&module, kFillPtx); r != CUDA_SUCCESS)
      return Error(ErrorCode::kCuda, "cuModuleLoadData(fill kernel) failed: " + std::to_string(r));
    if (CUresult r = api.get_function_(&api.fill_, module, "caf_rdma_test_fill"); r != CUDA_SUCCESS)
      return Error(ErrorCode::kCuda, "cuModuleGetFunction failed: " + std::to_string(r));
    return api;
  }

  /// Writes pattern(i, seed) into GPU 0 memory [p, p + n) with the kernel, then waits for it.
  Status fill(uint64_t p, uint64_t n, uint32_t seed) const {
    CAF_RDMA_RETURN_IF_ERROR(use_gpu0());
    CUdeviceptr out = p;
    unsigned long long count = n;  // NOLINT(google-runtime-int): the kernel's .u64
    // pattern()'s seed term (tests/actors/manager_fixture.h), computed here in 64 bits.
    unsigned long long spread = seed * 0x9E3779B97F4A7C15ull;  // NOLINT(google-runtime-int)
    void* args[] = {&out, &count, &spread};
    if (CUresult r = launch_(fill_, 264, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr);
        r != CUDA_SUCCESS)
      return Error(ErrorCode::kCuda, "cuLaunchKernel(fill) failed: " + std::to_string(r));
    if (CUresult r = ctx_sync_(); r != CUDA_SUCCESS)
      return Error(ErrorCode::kCuda, "cuCtxSynchronize after fill failed: " + std::to_string(r));
    return {};
  }

  /// n bytes of page-locked host memory mapped into GPU 0 (what a kernel's OpRing lives in):
  /// the host pointer, and the device pointer of the same bytes in `device`.
  Result<void*> host_alloc_mapped(uint64_t n, uint64_t* device) const {
    CAF_RDMA_RETURN_IF_ERROR(use_gpu0());
    void* p = nullptr;
    if (CUresult r = host_alloc_(&p, n, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
        r != CUDA_SUCCESS)
      return Error(ErrorCode::kCuda, "cuMemHostAlloc failed: " + std::to_string(r));
    CUdeviceptr d = 0;
    if (CUresult r = host_device_ptr_(&d, p, 0); r != CUDA_SUCCESS) {
      (void)free_host_(p);
      return Error(ErrorCode::kCuda, "cuMemHostGetDevicePointer failed: " + std::to_string(r));
    }
    *device = static_cast<uint64_t>(d);
    return p;
  }
  Status free_host(void* p) const {
    CAF_RDMA_RETURN_IF_ERROR(use_gpu0());
    if (CUresult r = free_host_(p); r != CUDA_SUCCESS)
      return Error(ErrorCode::kCuda, "cuMemFreeHost failed: " + std::to_string(r));
    return {};
  }
  /// Kernel `name` of PTX text `ptx` (JIT-compiled by the driver).
  Result<CUfunction> kernel(const char* ptx, const char* name) const {
    CAF_RDMA_RETURN_IF_ERROR(use_gpu0());
    CUmodule module = nullptr;
    if (CUresult r = module_load_(&module, ptx); r != CUDA_SUCCESS)
      return Error(ErrorCode::kCuda, "cuModuleLoadData failed: " + std::to_string(r));
    CUfunction f = nullptr;
    if (CUresult r = get_function_(&f, module, name); r != CUDA_SUCCESS)
      return Error(ErrorCode::kCuda,
                   std::string("cuModuleGetFunction(") + name + ") failed: " + std::to_string(r));
    return f;
  }
  /// Runs `f` on `grid` blocks of `block` threads with `args`, and waits for it.
  Status run(CUfunction f, unsigned grid, unsigned block, void** args) const {
    CAF_RDMA_RETURN_IF_ERROR(use_gpu0());
    if (CUresult r = launch_(f, grid, 1, 1, block, 1, 1, 0, nullptr, args, nullptr);
        r != CUDA_SUCCESS)
      return Error(ErrorCode::kCuda, "cuLaunchKernel failed: " + std::to_string(r));
    if (CUresult r = ctx_sync_(); r != CUDA_SUCCESS)
      return Error(ErrorCode::kCuda,
                   "cuCtxSynchronize after a kernel failed: " + std::to_string(r));
    return {};
  }

  /// n bytes of GPU 0's default memory pool (stream-ordered, on the null stream), ready to use.
  Result<uint64_t> alloc_from_pool(uint64_t n) const {
    CAF_RDMA_RETURN_IF_ERROR(use_gpu0());
    CUdeviceptr p = 0;
    if (CUresult r = alloc_async_(&p, n, nullptr); r != CUDA_SUCCESS)
      return Error(ErrorCode::kCuda, "cuMemAllocAsync failed: " + std::to_string(r));
    if (CUresult r = stream_sync_(nullptr); r != CUDA_SUCCESS)
      return Error(ErrorCode::kCuda, "cuStreamSynchronize failed: " + std::to_string(r));
    return static_cast<uint64_t>(p);
  }
  Status free_to_pool(uint64_t p) const {
    CAF_RDMA_RETURN_IF_ERROR(use_gpu0());
    if (CUresult r = free_async_(p, nullptr); r != CUDA_SUCCESS)
      return Error(ErrorCode::kCuda, "cuMemFreeAsync failed: " + std::to_string(r));
    if (CUresult r = stream_sync_(nullptr); r != CUDA_SUCCESS)
      return Error(ErrorCode::kCuda, "cuStreamSynchronize failed: " + std::to_string(r));
    return {};
  }

private:
  template <class F>
  static bool sym(void* lib, const char* name, F& fn) {
    fn = reinterpret_cast<F>(dlsym(lib, name));
    return fn != nullptr;
  }
  Status use_gpu0() const {
    CUdevice dev = 0;
    CUcontext ctx = nullptr;
    if (device_get_(&dev, 0) != CUDA_SUCCESS || ctx_retain_(&ctx, dev) != CUDA_SUCCESS ||
        ctx_set_(ctx) != CUDA_SUCCESS)
      return Error(ErrorCode::kCuda, "cannot make GPU 0's primary context current");
    return {};
  }

  decltype(&::cuDeviceGet) device_get_ = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) ctx_retain_ = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_ = nullptr;
  decltype(&::cuCtxSynchronize) ctx_sync_ = nullptr;
  decltype(&::cuModuleLoadData) module_load_ = nullptr;
  decltype(&::cuModuleGetFunction) get_function_ = nullptr;
  decltype(&::cuLaunchKernel) launch_ = nullptr;
  decltype(&::cuMemAllocAsync) alloc_async_ = nullptr;
  decltype(&::cuMemFreeAsync) free_async_ = nullptr;
  decltype(&::cuStreamSynchronize) stream_sync_ = nullptr;
  decltype(&::cuMemHostAlloc) host_alloc_ = nullptr;
  decltype(&::cuMemHostGetDevicePointer) host_device_ptr_ = nullptr;
  decltype(&::cuMemFreeHost) free_host_ = nullptr;
  CUfunction fill_ = nullptr;
};

#else  // !CAF_RDMA_WITH_CUDA

class CudaTestApi {
public:
  static Result<CudaTestApi> load() { return CudaDriver::get().error(); }
  Status fill(uint64_t, uint64_t, uint32_t) const { return CudaDriver::get().error(); }
  Result<uint64_t> alloc_from_pool(uint64_t) const { return CudaDriver::get().error(); }
  Status free_to_pool(uint64_t) const { return CudaDriver::get().error(); }
};

#endif

}  // namespace caf_rdma::testing
