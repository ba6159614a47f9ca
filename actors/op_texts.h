// The recurring texts of transfer errors, each written once: the manager's paths, its peer
// table and the direct lanes (RdmaClient) say the same thing in the same words.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "actors/rdma_messages.h"

namespace caf_rdma {

/// "no TCP answer from HOST:PORT within N ms" (`layer` "TCP" or "TLS"): a node's connect that
/// ran out of its connect_timeout (actors/plain_transport.h, actors/tls_transport.h).
std::string no_answer_text(const char* layer, const std::string& where,
                           std::chrono::milliseconds within);

/// "peer manager NAME is down (WHY)".
std::string peer_down_text(const std::string& peer, const std::string& why);
/// "KIND failed: peer manager NAME is down (WHY)": an op the NIC gave up on, its owner down.
std::string op_peer_down_text(uint8_t kind, const std::string& peer, const std::string& why);

/// "this manager has no RDMA device (WHY)" / "its RDMA port is down (WHY)": why this manager
/// cannot use RDMA now (`no_device_reason` when it has no device, else `port_down`).
std::string rdma_unusable_text(bool has_device, std::string_view no_device_reason,
                               std::string_view port_down);

/// "CAF_RDMA_TRANSPORT=rdma forbids the fallback": why RDMA's absence is an error.
std::string fallback_forbidden_text();

/// The queue-pair handshake with peer manager `peer` timed out after `timeout_ms`, or (when
/// `timed_out` is false) failed for `why`.
std::string handshake_failed_text(const std::string& peer, bool timed_out, int64_t timeout_ms,
                                  const std::string& why);

/// "KIND between A and B did not complete within T ms" followed by `more` (a direct lane).
std::string not_within_text(const TransferOp& op, uint32_t timeout_ms, const std::string& more);

/// "KIND between A and B cancelled before it started; no byte of it moved" (CancelToken
/// invariant 3; `first`), or "... cancelled before its next way started; none of its bytes
/// lands later" (a way that declined it, maybe after a first try).
std::string cancelled_unstarted_text(const TransferOp& op, bool first);
/// A transfer cancelled while its queue pair ran it, after the flush: "KIND of N bytes between
/// A and B cancelled; its queue pair was flushed, ...".
std::string cancelled_flushed_text(const TransferOp& op, uint64_t length);

/// A transfer cancelled by the manager (manager invariant 24) where it stopped between its
/// parts: "KIND of N bytes between A and B cancelled" and `more` (e.g. what was stored).
std::string cancelled_text(const TransferOp& op, uint64_t length, const std::string& more);
/// A notify write cancelled before its notice left: "no notice was sent: ...".
std::string notice_cancelled_text();
/// A transfer cancelled while the stream channel moved it (the stream lane's or the manager's
/// job), once its connection was shut down and no byte of it moves any more: "KIND of N bytes
/// between A and B cancelled on the stream channel; ...: WHY".
std::string cancelled_stream_text(const TransferOp& op, uint64_t length, const std::string& why);

/// A transfer that timed out after its queue pair was flushed (the NIC no longer touches the
/// buffers).
std::string timeout_message(const TransferOp& op, uint64_t length, uint32_t timeout_ms);

/// A transfer ended at its timeout: "KIND of N bytes between A and B timed out after T ms"
/// followed by `more`.
std::string timed_out_text(const TransferOp& op, uint64_t length, uint32_t timeout_ms,
                           const std::string& more);

/// A stream-channel transfer that was stopped at its timeout.
std::string stream_timed_out_text(const TransferOp& op, uint64_t length, uint32_t timeout_ms);

/// "KIND via the fallback to REMOTE failed: WHY".
std::string fallback_failed_text(const TransferOp& op, const std::string& why);

/// "WHAT refused by OWNER: taken up W ms after it reached OWNER, past the L ms its requester
/// had left then (`capped`: past OWNER's max_timeout of L ms); OUTCOME": a store or atomic its
/// owner took up too late
/// (manager/buffer_table.h invariant 23).
std::string taken_late_text(const std::string& what, const std::string& owner, uint64_t waited_ms,
                            uint64_t left_ms, bool capped, const char* outcome);
/// "whether KIND of N bytes between A and B took effect is unknown: K of its requests got no
/// answer from its owner within T ms past its deadline; ...": a write or atomic in CAF chunks
/// whose owner did not answer (actors/transfer/chunk_path.h invariant 1).
std::string chunks_unknown_text(const TransferOp& op, uint64_t length, uint32_t unanswered,
                                std::chrono::milliseconds grace);

/// "B of its N bytes were stored, and none of the rest will be" (not necessarily the first B:
/// chunks may be answered in any order): a chunked write's end (actors/transfer/chunk_path.h
/// invariant 1).
std::string stored_text(uint64_t stored, uint64_t length);
/// "KIND applied by the owner of REMOTE (the word held V), but its old value did not land: WHY".
std::string atomic_applied_text(const TransferOp& op, uint64_t old, const std::string& why);
/// "; whether what was on its way took effect is unknown: its owner may still apply it until
/// the time left it carried has passed": a chunked write or atomic whose link was lost.
std::string link_lost_unknown_text();

/// "KIND refused by the owner of REMOTE: WHY" (the owner's own reason).
std::string owner_refused_text(const TransferOp& op, const std::string& why);

/// "the LENGTH bytes of the write into BUFFER were written, but its owner was not notified:
/// WHY": a notify write whose notice failed (manager/write_notices.h).
std::string notice_failed_text(const TransferOp& op, uint64_t length, const std::string& why);
/// "the LEN bytes of the write into BUFFER were written; whether its owner notified its
/// watcher is unknown: WHY": the notice left, and no answer came (manager/write_notices.h 16).
std::string notice_unknown_text(const TransferOp& op, uint64_t length, const std::string& why);
/// "no notice was sent: its MS ms ran out before its bytes were confirmed in place".
std::string notice_unsent_text(uint32_t timeout_ms);
/// Why a notify write's bytes could not be confirmed in place: "its last byte could not be
/// read back: WHY" (`own`: our own buffer, the fence READ) or "its write with immediate, which
/// its owner records as the write's receipt, failed: WHY" (manager/write_receipts.h).
std::string fence_failed_text(bool own, const std::string& why);
/// "notice of a write into buffer ID of OWNER refused: WHY" (the owner's side).
std::string notice_refused_text(uint64_t id, const std::string& owner, const std::string& why);

/// The NIC refused the access and the owner, asked, gave no reason: `nic` plus why not.
std::string owner_silent_text(const std::string& nic, const std::string& why);

/// Verify mode: both sides' checksums of a completed op differ; `where` names the QP or device.
std::string data_mismatch_text(const TransferOp& op, uint64_t length, uint64_t local_sum,
                               uint64_t remote_sum, const std::string& where);

}  // namespace caf_rdma
