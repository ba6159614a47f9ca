// Example kernels that start transfers themselves through an OpRing
// (components/op_ring_device.cuh): compiled to PTX at build time under --config=cuda
// (examples/BUILD.bazel, :gpu_ring_kernels_ptx), loaded with cuModuleLoadData and run by
// tests/gpu/cuda_gpu_test.cc against a RingProxy.
#include "components/op_ring_device.cuh"

// Puts i = 0..n-1: the 8 bytes at 8i of pair 0's local buffer to 8i of its remote buffer, one
// per thread in a grid-stride loop. A put that found no room within `timeout_ns` counts in
// *no_room (and was not published).
extern "C" __global__ void caf_rdma_ring_puts(caf_rdma::OpRingDevice ring, unsigned long long n,
                                              unsigned long long timeout_ns,
                                              unsigned long long* no_room) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i =
           static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride)
    if (caf_rdma::op_ring_put(ring, 0, i * 8, i * 8, 8, timeout_ns) == ~0ull)
      atomicAdd(no_room, 1ull);
}

// One thread, `rounds` times: an 8-byte put (local [0, 8) to remote [8 * (at + r), +8)) and a
// wait until it ended (`ended` descriptors ended before the kernel started); out_ns[r] is the
// time from before the publish to the end of the wait, on the GPU's global timer (0 when the
// wait timed out).
extern "C" __global__ void caf_rdma_ring_put_latency(caf_rdma::OpRingDevice ring,
                                                     unsigned long long rounds,
                                                     unsigned long long at,
                                                     unsigned long long ended,
                                                     unsigned long long* out_ns) {
  if (blockIdx.x != 0 || threadIdx.x != 0)
    return;
  for (unsigned long long r = 0; r < rounds; ++r) {
    const unsigned long long start = caf_rdma::op_ring_now();
    const bool ok = caf_rdma::op_ring_put(ring, 0, 0, 8 * (at + r), 8) != ~0ull &&
                    caf_rdma::op_ring_wait_ended(ring, ended + r + 1, 1000000000ull);
    out_ns[r] = ok ? caf_rdma::op_ring_now() - start : 0;
  }
}
