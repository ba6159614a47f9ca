// WriteNotices: write notifications (docs/guarantees.md, "Write notifications"). As owner: who
// watches each buffer (LocalBuffer::watcher), the notice of each write sent to that watcher, and
// how many notices wait for its answer, per writing node. As writer: a write that asked for a
// notice (TransferOp::notify) tells its owner once its bytes are in place, and is answered after
// that.
//
// A part of the manager (actors/manager/manager_part.h); what is its own is below.
//
// Invariants (numbered as the manager's, which lists them all):
// 15. A write's notice leaves only once its bytes are in the owner's memory, as the owner saw:
//     a notice from a peer claims the write's receipt (manager/write_receipts.h), which the owner
//     made itself when the write landed: on the fallback when it stored every byte (the stream
//     grant's, or the chunks carrying the receipt), on RDMA when the zero-byte WRITE WITH
//     IMMEDIATE posted after the write on the same queue pair consumed one of the owner's
//     receives (RC places the write's bytes first). No receipt, or one for other bytes: no
//     notice. For the owner's own buffers, after its copy, or after a READ of the write's last
//     byte on the loopback queue pair came back. At most one notice per write: a notify write is
//     never run twice for its notice, and its error says that its bytes were written.
// 16. The writer's reply comes after the owner sent the notice to its watcher, or refused it,
//     and says which: ok is exactly one notice; "was not notified" is none (the owner refused,
//     or no notice left this node: the write's time ran out before its bytes were confirmed in
//     place, or it was cancelled before); once a notice has left, the writer's deadline (or
//     cancel) does not end the op: it waits for
//     the owner's answer up to kNoticeGrace past the deadline. Only an owner that does not
//     answer by then, or a link lost while the notice was out, gives the third answer, that
//     whether the watcher was told is unknown (peer_unavailable, never timeout or ok).
// 17. Bounded (manager invariant 7): notices sent to watchers and not answered yet count per
//     writing node (kMaxPendingNotices) and together (kMaxPendingNoticesTotal); those of nodes
//     the middleman does not know as directly connected (ids a peer states for messages it
//     routes, and may invent: direct_link.h) hold together at most a kIndirectShare-th of the
//     total, so invented ids cannot refuse the directly connected writers' notices. Beyond,
//     a notice is refused, naming the budget. A notice counts until its watcher answers,
//     fails or max_timeout passes. The writer's name it carries is cut to kMaxWriterName
//     bytes.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/detail/manager_tables.h"
#include "actors/manager/manager_part.h"
#include "actors/transfer/transfer_path.h"
#include "components/qp_endpoint.h"
#include "components/rdma_buffer.h"

namespace caf_rdma::detail {

class WriteNotices : public ManagerPart {
public:
  using ManagerPart::ManagerPart;

  // -- owner side --
  /// The watch_writes request: `watcher` (invalid: nobody) is told of notify writes into
  /// buffer `id`.
  caf::result<bool> watch(uint64_t id, const caf::actor& watcher);
  /// The notice request of a peer (the current sender): checks, the claim of the write's
  /// `receipt` (write_receipts.h), then the notice to the watcher.
  caf::result<uint64_t> notice(const BufferRef& ref, uint64_t offset, uint64_t length, uint64_t tag,
                               uint64_t receipt, const std::string& writer);
  /// Notices sent to watchers and not answered yet.
  uint64_t pending() const { return pending_; }

  // -- writer side --
  /// Op `id`, a notify write, moved its bytes (`written`): make sure they are in place (on
  /// `qp`, its RDMA queue pair, the write with immediate its owner records, or for our own
  /// buffer the fence READ; nothing more for the other paths), then tell the owner.
  void after_write(OpId id, TransferOutcome written, const std::weak_ptr<QpEndpoint>& qp);
  /// What followed op `id` on its queue pair (write with immediate, or fence READ) completed
  /// with `fence` (FenceDone).
  void fenced(OpId id, const TransferOutcome& fence);
  /// Op `id`'s transfer timed out while its notice was on its way: ends it if no notice was
  /// sent yet (none will be); otherwise the owner's answer ends it (invariant 16).
  void deadline(OpId id);
  /// Whether a fence of an op of another transfer than `ticket` is on one of `qps` (a cancel
  /// flushes no queue pair another transfer uses: rdma_path.h invariant 12).
  bool fences_on(uint64_t ticket, const std::vector<std::shared_ptr<QpEndpoint>>& qps) const;
  /// Whether op `id`'s notice is on its way (its end goes through `end`).
  bool waiting(OpId id) const { return written_.count(id) != 0; }
  /// Ends op `id`, whose notice is on its way, with `why` (its peer or device went): "not
  /// notified" before a notice left, "unknown" after.
  void end(OpId id, const Error& why);

private:
  /// Owner side, after the checks of `ref`: the notice to the watcher, counted for `node`
  /// (`direct`: this node, or one the middleman says is directly connected: invariant 17).
  Result<uint64_t> deliver(const BufferRef& ref, uint64_t offset, uint64_t length, uint64_t tag,
                           const std::string& node, const std::string& writer, bool direct);
  /// Writer side: asks the owner (or this node, when it owns the buffer) to send the notice.
  void tell_owner(OpId id);
  /// Ends op `id` with its write's outcome, or `failed` (which says the bytes were written):
  /// not notified, or (`unknown`) perhaps notified.
  void finish(OpId id, const Error* failed, bool unknown = false);
  /// Why no notice left for a write of `t`: its time ran out, or it was cancelled (manager
  /// invariant 24: `cancelled`, "no notice was sent").
  static Error unsent(const Transfer& t);

  /// Writer side: a notify write whose notice is on its way.
  struct Pending {
    TransferOutcome written;  ///< the write's own outcome (its bytes moved)
    bool asked = false;       ///< the notice left for the owner: only its answer is exact
    /// The queue pair its fence is on, until the fence completed (fences_on).
    std::weak_ptr<QpEndpoint> fence;
  };
  std::map<OpId, Pending> written_;
  /// Owner side: notices not answered yet, by writing node ("" for this node), and together.
  std::map<std::string, uint64_t> pending_by_node_;
  uint64_t pending_ = 0;
  uint64_t pending_indirect_ = 0;  ///< of which from nodes not directly connected
};

}  // namespace caf_rdma::detail
