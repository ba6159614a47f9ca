// GpuExports (see gpu_exports.h).
#include "actors/manager/gpu_exports.h"

#include <algorithm>
#include <vector>

#include "actors/detail/manager_state.h"
#include "primitives/log.h"

namespace caf_rdma::detail {

std::shared_ptr<const GpuExport> GpuExports::export_of(LocalBuffer& buf) {
  if (!buf.export_tried) {
    buf.export_tried = true;
    auto e = m_.options().device_memory->export_range(buf.addr, buf.size, buf.gpu);
    if (e.ok())
      buf.gpu_export = std::make_shared<const GpuExport>(std::move(*e));
  }
  return buf.gpu_export;
}

void GpuExports::imported(LocalBuffer& buf, const caf::actor& peer) {
  if (!buf.gpu_export || !peer)
    return;
  if (std::find(buf.importers.begin(), buf.importers.end(), peer) == buf.importers.end())
    buf.importers.push_back(peer);
}

bool GpuExports::close_importers(uint64_t id, LocalBuffer& buf) {
  if (buf.importers.empty() || !buf.gpu_export)
    return false;
  std::vector<caf::actor> importers;
  importers.swap(buf.importers);
  const std::string handle(buf.gpu_export->handle.begin(), buf.gpu_export->handle.end());
  for (const caf::actor& peer : importers) {
    ++buf.in_use;  // the release waits for each answer (invariant 2)
    m_.peer_table.peer_request(peer, kCloseWait + kAnswerMargin, gpu_close_atom::value, handle)
        .then([this, id](uint64_t) { m_.buffer_table.buffer_done(id); },
              [this, id, peer](caf::error& e) {
                // Invariant 2: said, for its owner may be about to free the memory.
                log_line(LogLevel::kWarn,
                         "%s: released GPU buffer %llu, but peer %s did not confirm closing its "
                         "imports of the buffer's memory (%s): it may still map it; free the "
                         "memory only once that peer's node ended or released it",
                         m_.options().name.c_str(), static_cast<unsigned long long>(id),
                         caf::to_string(peer.address()).c_str(), caf::to_string(e).c_str());
                m_.buffer_table.buffer_done(id);
              });
  }
  return true;
}

caf::result<uint64_t> GpuExports::close_imports(const std::string& handle) {
  if (handle.empty() || handle.size() > kMaxExportBytes)
    return make_rdma_error(ErrorCode::kInvalidArgument,
                           "gpu_close of an export of " + std::to_string(handle.size()) +
                               " bytes (from 1 to " + std::to_string(kMaxExportBytes) + ")");
  if (!m_.stream_client())
    return uint64_t{0};
  auto closed = m_.stream_client()->close_imports(
      std::vector<uint8_t>(handle.begin(), handle.end()), kCloseWait);
  if (!closed.ok())
    return to_caf_error(closed.error());
  return static_cast<uint64_t>(*closed);
}

}  // namespace caf_rdma::detail
