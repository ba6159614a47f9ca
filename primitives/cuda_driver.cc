#include "primitives/cuda_driver.h"

#include <mutex>
#include <optional>

#ifdef CAF_RDMA_WITH_CUDA
#include <dlfcn.h>
#include "third_party/cuda/cuda.h"  // /usr/local/cuda's cuda.h (third_party/cuda.bzl)

#include <algorithm>
#include <cctype>
#include <vector>
#endif

namespace caf_rdma {

bool CudaDriver::built_with_cuda() {
#ifdef CAF_RDMA_WITH_CUDA
  return true;
#else
  return false;
#endif
}

#ifndef CAF_RDMA_WITH_CUDA

struct CudaDriver::Api {};

namespace {
Error not_built() {
  return Error(ErrorCode::kCuda,
               "caf-rdma was built without CUDA support (build with "
               "`bazel build --config=cuda` to use GPU memory)");
}
}  // namespace

Result<CudaDriver*> CudaDriver::get() {
  return not_built();
}
Result<PointerInfo> CudaDriver::pointer_info(const void*) const {
  return not_built();
}
Result<int> CudaDriver::dmabuf_fd(uint64_t, uint64_t, int) const {
  return not_built();
}
Status CudaDriver::set_sync_memops(uint64_t, int) const {
  return not_built();
}
Result<bool> CudaDriver::sync_memops(uint64_t) const {
  return not_built();
}
Status CudaDriver::copy_to_host(void*, uint64_t, uint64_t, int) const {
  return not_built();
}
Status CudaDriver::copy_to_device(uint64_t, const void*, uint64_t, int) const {
  return not_built();
}
Status CudaDriver::copy_on_device(uint64_t, uint64_t, uint64_t, int) const {
  return not_built();
}
Result<std::vector<uint8_t>> CudaDriver::ipc_handle(uint64_t, int) const {
  return not_built();
}
Result<uint64_t> CudaDriver::ipc_open(const std::vector<uint8_t>&, int) const {
  return not_built();
}
Status CudaDriver::ipc_close(uint64_t, int) const {
  return not_built();
}
Status CudaDriver::host_register(void*, uint64_t, int) const {
  return not_built();
}
Status CudaDriver::host_unregister(void*, int) const {
  return not_built();
}
int CudaDriver::device_count() const {
  return 0;
}
Result<std::string> CudaDriver::pci_bus_id(int) const {
  return not_built();
}
Result<uint64_t> CudaDriver::alloc_device(uint64_t, int) const {
  return not_built();
}
Result<uint64_t> CudaDriver::alloc_managed(uint64_t, int) const {
  return not_built();
}
Status CudaDriver::free_device(uint64_t) const {
  return not_built();
}
CudaDriver::~CudaDriver() = default;

#else  // CAF_RDMA_WITH_CUDA

// Entry points by their exported (versioned) names; the types come from cuda.h.
struct CudaDriver::Api {
  void* lib = nullptr;
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuGetErrorName) error_name = nullptr;
  decltype(&::cuGetErrorString) error_string = nullptr;
  decltype(&::cuDeviceGetCount) device_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetPCIBusId) pci_bus_id = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuPointerGetAttributes) pointer_get_attributes = nullptr;
  decltype(&::cuPointerSetAttribute) pointer_set_attribute = nullptr;
  decltype(&::cuMemGetAddressRange_v2) mem_get_address_range = nullptr;
  decltype(&::cuMemGetHandleForAddressRange) mem_get_handle_for_address_range = nullptr;
  decltype(&::cuStreamCreate) stream_create = nullptr;
  decltype(&::cuStreamSynchronize) stream_synchronize = nullptr;
  decltype(&::cuMemcpyDtoHAsync_v2) memcpy_dtoh_async = nullptr;
  decltype(&::cuMemcpyHtoDAsync_v2) memcpy_htod_async = nullptr;
  decltype(&::cuMemcpyDtoDAsync_v2) memcpy_dtod_async = nullptr;
  decltype(&::cuMemAlloc_v2) mem_alloc = nullptr;
  decltype(&::cuMemAllocManaged) mem_alloc_managed = nullptr;
  decltype(&::cuMemFree_v2) mem_free = nullptr;
  decltype(&::cuMemHostRegister_v2) mem_host_register = nullptr;
  decltype(&::cuMemHostUnregister) mem_host_unregister = nullptr;
  decltype(&::cuIpcGetMemHandle) ipc_get_mem_handle = nullptr;
  decltype(&::cuIpcOpenMemHandle_v2) ipc_open_mem_handle = nullptr;
  decltype(&::cuIpcCloseMemHandle) ipc_close_mem_handle = nullptr;

  int devices = 0;
  std::vector<CUcontext> contexts;  // primary context per device (retained lazily)
  std::vector<CUstream> streams;    // one copy stream per device
  std::vector<std::unique_ptr<std::mutex>> device_mutex;

  Error error(const std::string& call, CUresult r) const {
    const char* name = nullptr;
    const char* text = nullptr;
    if (error_name)
      error_name(r, &name);
    if (error_string)
      error_string(r, &text);
    return Error(ErrorCode::kCuda, call + " failed: " + (name ? name : "CUDA_ERROR_?") + " (" +
                                       (text ? text : "no description") + ")");
  }

  // Makes device d's primary context current in this thread (retaining it once).
  Status use_device(int d) {
    if (d < 0 || d >= devices)
      return Error(ErrorCode::kInvalidArgument, "CUDA device " + std::to_string(d) +
                                                    " does not exist (" + std::to_string(devices) +
                                                    " devices)");
    std::lock_guard<std::mutex> guard(*device_mutex[d]);
    if (contexts[d] == nullptr) {
      CUdevice dev = 0;
      if (CUresult r = device_get(&dev, d); r != CUDA_SUCCESS)
        return error("cuDeviceGet(" + std::to_string(d) + ")", r);
      if (CUresult r = primary_ctx_retain(&contexts[d], dev); r != CUDA_SUCCESS)
        return error("cuDevicePrimaryCtxRetain(" + std::to_string(d) + ")", r);
    }
    if (CUresult r = ctx_set_current(contexts[d]); r != CUDA_SUCCESS)
      return error("cuCtxSetCurrent", r);
    if (streams[d] == nullptr)
      if (CUresult r = stream_create(&streams[d], CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS)
        return error("cuStreamCreate", r);
    return {};
  }

  // Runs one copy that `enqueue` puts on device d's copy stream, and waits for it.
  template <class Enqueue>
  Status copy(int d, const char* call, uint64_t n, Enqueue enqueue) {
    CAF_RDMA_RETURN_IF_ERROR(use_device(d));
    std::lock_guard<std::mutex> guard(*device_mutex[d]);
    if (CUresult r = enqueue(streams[d]); r != CUDA_SUCCESS)
      return error(std::string(call) + "(" + std::to_string(n) + " bytes)", r);
    if (CUresult r = stream_synchronize(streams[d]); r != CUDA_SUCCESS)
      return error("cuStreamSynchronize", r);
    return {};
  }
};

namespace {

template <class F>
bool load(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

Result<std::unique_ptr<CudaDriver::Api>> load_api() {
  auto api = std::make_unique<CudaDriver::Api>();
  api->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (api->lib == nullptr)
    return Error(ErrorCode::kCuda, std::string("cannot load the CUDA driver (libcuda.so.1): ") +
                                       dlerror() + "; is the NVIDIA driver installed?");
  bool ok = load(api->lib, "cuInit", api->init) &&
            load(api->lib, "cuGetErrorName", api->error_name) &&
            load(api->lib, "cuGetErrorString", api->error_string) &&
            load(api->lib, "cuDeviceGetCount", api->device_count) &&
            load(api->lib, "cuDeviceGet", api->device_get) &&
            load(api->lib, "cuDeviceGetPCIBusId", api->pci_bus_id) &&
            load(api->lib, "cuDevicePrimaryCtxRetain", api->primary_ctx_retain) &&
            load(api->lib, "cuCtxSetCurrent", api->ctx_set_current) &&
            load(api->lib, "cuPointerGetAttributes", api->pointer_get_attributes) &&
            load(api->lib, "cuPointerSetAttribute", api->pointer_set_attribute) &&
            load(api->lib, "cuMemGetAddressRange_v2", api->mem_get_address_range) &&
            load(api->lib, "cuStreamCreate", api->stream_create) &&
            load(api->lib, "cuStreamSynchronize", api->stream_synchronize) &&
            load(api->lib, "cuMemcpyDtoHAsync_v2", api->memcpy_dtoh_async) &&
            load(api->lib, "cuMemcpyHtoDAsync_v2", api->memcpy_htod_async) &&
            load(api->lib, "cuMemcpyDtoDAsync_v2", api->memcpy_dtod_async) &&
            load(api->lib, "cuMemAlloc_v2", api->mem_alloc) &&
            load(api->lib, "cuMemAllocManaged", api->mem_alloc_managed) &&
            load(api->lib, "cuMemFree_v2", api->mem_free) &&
            load(api->lib, "cuMemHostRegister_v2", api->mem_host_register) &&
            load(api->lib, "cuMemHostUnregister", api->mem_host_unregister);
  // CUDA IPC is optional: without it GPU memory moves between processes through bounce buffers.
  if (!load(api->lib, "cuIpcGetMemHandle", api->ipc_get_mem_handle) ||
      !load(api->lib, "cuIpcOpenMemHandle_v2", api->ipc_open_mem_handle) ||
      !load(api->lib, "cuIpcCloseMemHandle", api->ipc_close_mem_handle))
    api->ipc_get_mem_handle = nullptr;
  if (!ok)
    return Error(ErrorCode::kCuda,
                 std::string("the CUDA driver lacks an entry point: ") + dlerror());
  // Optional (CUDA >= 11.7 drivers): without it, dmabuf registration is reported unsupported.
  load(api->lib, "cuMemGetHandleForAddressRange", api->mem_get_handle_for_address_range);
  if (CUresult r = api->init(0); r != CUDA_SUCCESS)
    return api->error("cuInit", r);
  if (CUresult r = api->device_count(&api->devices); r != CUDA_SUCCESS)
    return api->error("cuDeviceGetCount", r);
  api->contexts.assign(api->devices, nullptr);
  api->streams.assign(api->devices, nullptr);
  for (int d = 0; d < api->devices; ++d)
    api->device_mutex.push_back(std::make_unique<std::mutex>());
  return api;
}

}  // namespace

Result<CudaDriver*> CudaDriver::get() {
  static std::once_flag once;
  static CudaDriver* driver = nullptr;
  static std::optional<Error> failure;
  std::call_once(once, [] {
    auto api = load_api();
    if (!api.ok()) {
      failure = api.error();
      return;
    }
    driver = new CudaDriver();  // lives for the process: CUDA must not unload before exit
    driver->api_ = std::move(*api);
  });
  if (failure)
    return *failure;
  return driver;
}

CudaDriver::~CudaDriver() = default;

Result<PointerInfo> CudaDriver::pointer_info(const void* p) const {
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  unsigned memory_type = 0;
  unsigned is_managed = 0;
  int ordinal = -1;
  CUdeviceptr start = 0;
  size_t size = 0;
  void* data[] = {&memory_type, &is_managed, &ordinal, &start, &size};
  CUresult r = api_->pointer_get_attributes(5, attrs, data, reinterpret_cast<CUdeviceptr>(p));
  if (r != CUDA_SUCCESS)
    return api_->error("cuPointerGetAttributes", r);
  return classify_pointer_attributes(memory_type, is_managed != 0, ordinal, start, size);
}

Result<int> CudaDriver::dmabuf_fd(uint64_t base, uint64_t size, int device) const {
  if (api_->mem_get_handle_for_address_range == nullptr)
    return Error(ErrorCode::kCuda,
                 "this CUDA driver has no cuMemGetHandleForAddressRange "
                 "(dmabuf export needs a driver for CUDA 11.7 or later)");
  CAF_RDMA_RETURN_IF_ERROR(api_->use_device(device));
  int fd = -1;
  CUresult r = api_->mem_get_handle_for_address_range(&fd, base, size,
                                                      CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (r != CUDA_SUCCESS)
    return api_->error("cuMemGetHandleForAddressRange", r);
  return fd;
}

Status CudaDriver::set_sync_memops(uint64_t addr, int device) const {
  CAF_RDMA_RETURN_IF_ERROR(api_->use_device(device));
  unsigned int on = 1;
  if (CUresult r = api_->pointer_set_attribute(&on, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                                               static_cast<CUdeviceptr>(addr));
      r != CUDA_SUCCESS)
    return api_->error("cuPointerSetAttribute(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS)", r);
  return {};
}

Result<bool> CudaDriver::sync_memops(uint64_t addr) const {
  CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_SYNC_MEMOPS;
  unsigned int on = 0;
  void* data = &on;
  if (CUresult r = api_->pointer_get_attributes(1, &attr, &data, static_cast<CUdeviceptr>(addr));
      r != CUDA_SUCCESS)
    return api_->error("cuPointerGetAttributes(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS)", r);
  return on != 0;
}

Status CudaDriver::copy_to_host(void* dst, uint64_t src, uint64_t n, int device) const {
  return api_->copy(device, "cuMemcpyDtoHAsync", n,
                    [&](CUstream s) { return api_->memcpy_dtoh_async(dst, src, n, s); });
}

Status CudaDriver::copy_to_device(uint64_t dst, const void* src, uint64_t n, int device) const {
  return api_->copy(device, "cuMemcpyHtoDAsync", n,
                    [&](CUstream s) { return api_->memcpy_htod_async(dst, src, n, s); });
}

Status CudaDriver::copy_on_device(uint64_t dst, uint64_t src, uint64_t n, int device) const {
  return api_->copy(device, "cuMemcpyDtoDAsync", n,
                    [&](CUstream s) { return api_->memcpy_dtod_async(dst, src, n, s); });
}

Result<std::vector<uint8_t>> CudaDriver::ipc_handle(uint64_t base, int device) const {
  static_assert(sizeof(CUipcMemHandle) == kIpcHandleBytes);
  if (api_->ipc_get_mem_handle == nullptr)
    return Error(ErrorCode::kCuda, "this CUDA driver has no IPC (cuIpcGetMemHandle)");
  CAF_RDMA_RETURN_IF_ERROR(api_->use_device(device));
  CUipcMemHandle h;
  if (CUresult r = api_->ipc_get_mem_handle(&h, base); r != CUDA_SUCCESS)
    return api_->error("cuIpcGetMemHandle", r);
  const auto* b = reinterpret_cast<const uint8_t*>(&h);
  return std::vector<uint8_t>(b, b + sizeof(h));
}

Result<uint64_t> CudaDriver::ipc_open(const std::vector<uint8_t>& handle, int device) const {
  if (handle.size() != kIpcHandleBytes)
    return Error(ErrorCode::kInvalidArgument, "a CUDA IPC handle of " +
                                                  std::to_string(handle.size()) + " bytes (not " +
                                                  std::to_string(kIpcHandleBytes) + ")");
  CAF_RDMA_RETURN_IF_ERROR(api_->use_device(device));
  CUipcMemHandle h;
  std::copy(handle.begin(), handle.end(), reinterpret_cast<uint8_t*>(&h));
  CUdeviceptr p = 0;
  if (CUresult r = api_->ipc_open_mem_handle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
      r != CUDA_SUCCESS)
    return api_->error("cuIpcOpenMemHandle", r);
  return static_cast<uint64_t>(p);
}

Status CudaDriver::ipc_close(uint64_t p, int device) const {
  CAF_RDMA_RETURN_IF_ERROR(api_->use_device(device));
  if (CUresult r = api_->ipc_close_mem_handle(p); r != CUDA_SUCCESS)
    return api_->error("cuIpcCloseMemHandle", r);
  return {};
}

Status CudaDriver::host_register(void* p, uint64_t n, int device) const {
  CAF_RDMA_RETURN_IF_ERROR(api_->use_device(device));
  if (CUresult r = api_->mem_host_register(p, n, CU_MEMHOSTREGISTER_PORTABLE); r != CUDA_SUCCESS)
    return api_->error("cuMemHostRegister(" + std::to_string(n) + " bytes)", r);
  return {};
}

Status CudaDriver::host_unregister(void* p, int device) const {
  CAF_RDMA_RETURN_IF_ERROR(api_->use_device(device));
  if (CUresult r = api_->mem_host_unregister(p); r != CUDA_SUCCESS)
    return api_->error("cuMemHostUnregister", r);
  return {};
}

int CudaDriver::device_count() const {
  return api_->devices;
}

Result<std::string> CudaDriver::pci_bus_id(int device) const {
  // No context needed (and none created: a primary context holds GPU memory).
  if (device < 0 || device >= api_->devices)
    return Error(ErrorCode::kInvalidArgument, "CUDA device " + std::to_string(device) +
                                                  " does not exist (" +
                                                  std::to_string(api_->devices) + " devices)");
  CUdevice dev = 0;
  if (CUresult r = api_->device_get(&dev, device); r != CUDA_SUCCESS)
    return api_->error("cuDeviceGet", r);
  char id[32] = {};
  if (CUresult r = api_->pci_bus_id(id, sizeof(id), dev); r != CUDA_SUCCESS)
    return api_->error("cuDeviceGetPCIBusId", r);
  std::string s(id);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

Result<uint64_t> CudaDriver::alloc_device(uint64_t n, int device) const {
  CAF_RDMA_RETURN_IF_ERROR(api_->use_device(device));
  CUdeviceptr p = 0;
  if (CUresult r = api_->mem_alloc(&p, n); r != CUDA_SUCCESS)
    return api_->error("cuMemAlloc(" + std::to_string(n) + ")", r);
  return static_cast<uint64_t>(p);
}

Result<uint64_t> CudaDriver::alloc_managed(uint64_t n, int device) const {
  CAF_RDMA_RETURN_IF_ERROR(api_->use_device(device));
  CUdeviceptr p = 0;
  if (CUresult r = api_->mem_alloc_managed(&p, n, CU_MEM_ATTACH_GLOBAL); r != CUDA_SUCCESS)
    return api_->error("cuMemAllocManaged(" + std::to_string(n) + ")", r);
  return static_cast<uint64_t>(p);
}

Status CudaDriver::free_device(uint64_t p) const {
  if (CUresult r = api_->mem_free(static_cast<CUdeviceptr>(p)); r != CUDA_SUCCESS)
    return api_->error("cuMemFree", r);
  return {};
}

#endif  // CAF_RDMA_WITH_CUDA

}  // namespace caf_rdma
