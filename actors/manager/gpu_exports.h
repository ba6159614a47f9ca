// GpuExports: the GPU memory this manager lets peers of its host copy themselves, GPU to GPU
// (components/stream_server.h invariant 20), and the imports of others' that it closes when
// asked (components/gpu_imports.h).
//
// Invariants:
//  1. A GPU buffer is exported once (DeviceMemory::export_range, at its first stream grant
//     with a same-host endpoint), and every grant on it carries that export; where the export
//     fails, its grants carry none (their bytes move through bounce buffers) and it is not
//     tried again for that buffer.
//  2. Every peer manager whose stream transfer on an exported buffer was handed the export
//     (StagedMemory::handed_out) is its importer until the buffer's release: once the release
//     has no transfer left on the buffer (its in_use at 0: every requester's copy ended,
//     stream_server.h invariant 20), each importer is asked to close its imports of that
//     export (gpu_close), and the release returns once each answered. So after a release
//     returns, every importer that answered with a count maps the memory no more, and the
//     owner may free it. One that answered an error (an import still held by a copy after
//     kCloseWait: another buffer over the same allocation is being copied), or did not answer
//     within kCloseWait + kAnswerMargin (hung, or cut off: one that is gone maps nothing),
//     does not hold up the release, which says so on stderr naming the buffer and the peer. An
//     owner node that ends asks nobody: its buffers' memory is to be freed after their release.
//  3. gpu_close from any peer closes this node's stream client's imports of the export it
//     names (closing an import costs only the next copy's reopening: nobody can harm a
//     transfer with it), waiting up to kCloseWait for copies that hold one (the manager's
//     thread waits: such a copy is one device copy, which needs nothing from the manager).
//
// A part of the manager (actors/manager/manager_part.h); what is its own is below.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "actors/manager/manager_part.h"
#include "components/device_memory.h"

namespace caf_rdma::detail {

struct LocalBuffer;

class GpuExports : public ManagerPart {
public:
  using ManagerPart::ManagerPart;

  /// Invariant 3's wait for copies that hold an import; invariant 2 waits this plus the margin.
  static constexpr std::chrono::milliseconds kCloseWait{5000};
  static constexpr std::chrono::milliseconds kAnswerMargin{5000};

  /// Invariant 1: the export of `buf` (made now if it was not tried yet), or null.
  std::shared_ptr<const GpuExport> export_of(LocalBuffer& buf);
  /// Invariant 2: `peer` (a stream grant's requester) was handed `buf`'s export.
  void imported(LocalBuffer& buf, const caf::actor& peer);
  /// Invariant 2: asks the importers of buffer `id` (released, nothing left on it) to close
  /// their imports; true when it did (the release then waits for their answers).
  bool close_importers(uint64_t id, LocalBuffer& buf);
  /// Invariant 3: a peer's gpu_close.
  caf::result<uint64_t> close_imports(const std::string& handle);
};

}  // namespace caf_rdma::detail
