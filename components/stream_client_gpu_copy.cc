// The requester's GPU to GPU copy on the same host (stream_client.h invariant 11; the owner's
// side is stream_server.h invariant 20): the rest of StreamClient is stream_client.cc.
#include <algorithm>
#include <string>

#include "components/stream_client.h"

namespace caf_rdma {

Status StreamClient::copy_from_export(const Socket& s, const StreamJob& job,
                                      const std::string& endpoint, const CrossMemoryAnswer& go,
                                      bool& inband) {
  const DeviceMemory& gpu = *job.staged.device;
  const int device = job.staged.gpu;
  const std::string what = "GPU copy " + std::string(to_string(job.direction)) + " from " +
                           endpoint + " (" + std::to_string(job.length) + " bytes)";
  inband = false;
  // The word after the copy (or instead of it): the owner answers it as the final status. Then
  // the socket may be shut again (a stop of the client: the final status is awaited first).
  auto say = [&](const Status& word) {
    Status sent = write_status(s, word, job.deadline + kEagerAnswerGrace);
    std::lock_guard<std::mutex> lock(mu_);
    gpu_copying_.erase(s.fd());
    return sent;
  };
  // Neither a stop nor a deadline that passed starts a copy: the owner hears that nothing was.
  const Deadline copy_by = std::min(job.deadline, go.gpu_deadline);
  bool stopped = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped = stopping_ || stop_requested(job.stop);
  }
  // The owner's answer (the same word) then ends the job.
  if (stopped)
    return say(Error(ErrorCode::kCancelled, what + ": stopped before the copy (nothing copied)"));
  if (std::chrono::steady_clock::now() >= copy_by)
    return say(Error(ErrorCode::kTimeout,
                     what + ": its deadline passed before the copy (nothing copied)"));
  Result<GpuImports::Lease> import = imports_.acquire(go.gpu.handle, job.staged.device, device);
  if (!import.ok()) {
    // Not again on this endpoint; this job's bytes move in-band after our "in-band go".
    {
      std::lock_guard<std::mutex> lock(mu_);
      no_gpu_copy_.insert(endpoint);
    }
    inband = true;
    Status sent = write_inband_go(s, job.deadline);
    std::lock_guard<std::mutex> lock(mu_);
    gpu_copying_.erase(s.fd());
    return sent;
  }
  const uint64_t theirs = import->base + go.gpu.offset;
  const uint64_t mine = reinterpret_cast<uint64_t>(job.addr);
  const bool into_owner = job.direction == StreamDirection::kIntoOwner;
  Status copied = gpu.copy_between_gpus(into_owner ? theirs : mine, into_owner ? mine : theirs,
                                        job.length, device);
  // Kept open for the next copies; closed when the owner's release asks (gpu_imports.h).
  imports_.give_back(*import);
  if (!copied.ok())
    copied = copied.error().with_context(what);
  return say(copied);
}

}  // namespace caf_rdma
