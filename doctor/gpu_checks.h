// GPU checks: the CUDA driver and each GPU, dmabuf export and nvidia_peermem (the two ways a NIC
// registers GPU memory), and each GPU's PCIe path to each NIC: hops, root complex, NUMA node, and
// ACS redirection on the bridges between them.
//
// Invariants:
//  1. GPUs are optional: nothing here fails. No CUDA driver is information; a GPU whose memory
//     no NIC can register is a warning (its memory is staged through host bounce buffers).
//  2. Functions of a HostView and a GpuView only; the NIC order is caf-rdma's own
//     (`rank_nics_by_distance`, what CAF_RDMA_GPU chooses by).
#pragma once

#include "doctor/finding.h"
#include "doctor/gpu_probe.h"
#include "doctor/host_view.h"

namespace caf_rdma::doctor {

void check_gpus(const HostView& host, const GpuView& gpus, Findings& out);

}  // namespace caf_rdma::doctor
