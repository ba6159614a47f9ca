// The recurring texts of transfer errors (see op_texts.h).
#include "actors/op_texts.h"

#include <cstdio>

#include "actors/rdma_manager_actor.h"
#include "actors/transfer_checks.h"

namespace caf_rdma {

std::string no_answer_text(const char* layer, const std::string& where,
                           std::chrono::milliseconds within) {
  return std::string("no ") + layer + " answer from " + where + " within " +
         std::to_string(within.count()) + " ms";
}

std::string peer_down_text(const std::string& peer, const std::string& why) {
  return "peer manager " + peer + " is down (" + why + ")";
}

std::string op_peer_down_text(uint8_t kind, const std::string& peer, const std::string& why) {
  return std::string(kind_name(kind)) + " failed: " + peer_down_text(peer, why);
}

std::string rdma_unusable_text(bool has_device, std::string_view no_device_reason,
                               std::string_view port_down) {
  return !has_device ? "this manager has no RDMA device (" + std::string(no_device_reason) + ")"
                     : "its RDMA port is down (" + std::string(port_down) + ")";
}

std::string fallback_forbidden_text() {
  return std::string(kEnvTransport) + "=rdma forbids the fallback";
}

std::string handshake_failed_text(const std::string& peer, bool timed_out, int64_t timeout_ms,
                                  const std::string& why) {
  return "queue-pair handshake with peer manager " + peer +
         (timed_out ? " timed out after " + std::to_string(timeout_ms) + " ms" : " failed: " + why);
}

std::string not_within_text(const TransferOp& op, uint32_t timeout_ms, const std::string& more) {
  return std::string(kind_name(op.kind)) + " between " + describe(op.local) + " and " +
         describe(op.remote) + " did not complete within " + std::to_string(timeout_ms) + " ms" +
         more;
}

std::string cancelled_unstarted_text(const TransferOp& op, bool first) {
  return std::string(kind_name(op.kind)) + " between " + describe(op.local) + " and " +
         describe(op.remote) +
         (first ? " cancelled before it started; no byte of it moved"
                : " cancelled before its next way started; none of its bytes lands later");
}

std::string cancelled_flushed_text(const TransferOp& op, uint64_t length) {
  return std::string(kind_name(op.kind)) + " of " + std::to_string(length) + " bytes between " +
         describe(op.local) + " and " + describe(op.remote) +
         " cancelled; its queue pair was flushed, so the NIC no longer accesses the buffers "
         "(some of its bytes may have landed, none lands later)";
}

std::string cancelled_stream_text(const TransferOp& op, uint64_t length, const std::string& why) {
  return std::string(kind_name(op.kind)) + " of " + std::to_string(length) + " bytes between " +
         describe(op.local) + " and " + describe(op.remote) +
         " cancelled on the stream channel; its connection was shut down, so none of its bytes "
         "lands later (some may have landed): " +
         why;
}

std::string cancelled_text(const TransferOp& op, uint64_t length, const std::string& more) {
  return std::string(kind_name(op.kind)) + " of " + std::to_string(length) + " bytes between " +
         describe(op.local) + " and " + describe(op.remote) + " cancelled" + more;
}

std::string notice_cancelled_text() {
  return "no notice was sent: the write was cancelled before its bytes were confirmed in place";
}

std::string timeout_message(const TransferOp& op, uint64_t length, uint32_t timeout_ms) {
  return std::string(kind_name(op.kind)) + " of " + std::to_string(length) + " bytes between " +
         describe(op.local) + " and " + describe(op.remote) + " did not complete within " +
         std::to_string(timeout_ms) +
         " ms; its queue pair was flushed, so the NIC no longer accesses the buffers";
}

std::string timed_out_text(const TransferOp& op, uint64_t length, uint32_t timeout_ms,
                           const std::string& more) {
  return std::string(kind_name(op.kind)) + " of " + std::to_string(length) + " bytes between " +
         describe(op.local) + " and " + describe(op.remote) + " timed out after " +
         std::to_string(timeout_ms) + " ms" + more;
}

std::string stream_timed_out_text(const TransferOp& op, uint64_t length, uint32_t timeout_ms) {
  return std::string(kind_name(op.kind)) + " of " + std::to_string(length) + " bytes between " +
         describe(op.local) + " and " + describe(op.remote) +
         " over the fallback's stream channel did not complete within " +
         std::to_string(timeout_ms) +
         " ms; the stream was stopped, so it no longer touches the buffers";
}

std::string fallback_failed_text(const TransferOp& op, const std::string& why) {
  return std::string(kind_name(op.kind)) + " via the fallback to " + describe(op.remote) +
         " failed: " + why;
}

std::string taken_late_text(const std::string& what, const std::string& owner, uint64_t waited_ms,
                            uint64_t left_ms, bool capped, const char* outcome) {
  return what + " refused by " + owner + ": taken up " + std::to_string(waited_ms) +
         " ms after it reached " + owner + ", past " +
         (capped ? owner + "'s max_timeout of " + std::to_string(left_ms) + " ms"
                 : "the " + std::to_string(left_ms) + " ms its requester had left then") +
         "; " + outcome;
}

std::string chunks_unknown_text(const TransferOp& op, uint64_t length, uint32_t unanswered,
                                std::chrono::milliseconds grace) {
  return "whether " + std::string(kind_name(op.kind)) + " of " + std::to_string(length) +
         " bytes between " + describe(op.local) + " and " + describe(op.remote) +
         " took effect is unknown: " + std::to_string(unanswered) +
         " of its requests got no answer from the owner within " + std::to_string(grace.count()) +
         " ms past its deadline (the owner refuses each once the time left it carried has "
         "passed after it arrived there)";
}

std::string stored_text(uint64_t stored, uint64_t length) {
  return std::to_string(stored) + " of its " + std::to_string(length) +
         " bytes were stored, and none of the rest will be";
}

std::string atomic_applied_text(const TransferOp& op, uint64_t old, const std::string& why) {
  return std::string(kind_name(op.kind)) + " applied by the owner of " + describe(op.remote) +
         " (the word held " + std::to_string(old) + "), but its old value did not land: " + why;
}

std::string link_lost_unknown_text() {
  return "; whether what was on its way took effect is unknown: its owner may still apply it "
         "until the time left it carried has passed";
}

std::string owner_refused_text(const TransferOp& op, const std::string& why) {
  return std::string(kind_name(op.kind)) + " refused by the owner of " + describe(op.remote) +
         ": " + why;
}

std::string notice_failed_text(const TransferOp& op, uint64_t length, const std::string& why) {
  return "the " + std::to_string(length) + " bytes of the write into " + describe(op.remote) +
         " were written, but its owner was not notified: " + why;
}

std::string notice_unknown_text(const TransferOp& op, uint64_t length, const std::string& why) {
  return "the " + std::to_string(length) + " bytes of the write into " + describe(op.remote) +
         " were written; whether its owner notified its watcher is unknown: " + why;
}

std::string notice_unsent_text(uint32_t timeout_ms) {
  return "no notice was sent: its " + std::to_string(timeout_ms) +
         " ms ran out before its bytes were confirmed in place";
}

std::string fence_failed_text(bool own, const std::string& why) {
  return own ? "its last byte could not be read back: " + why
             : "its write with immediate, which its owner records as the write's receipt, "
               "failed: " +
                   why;
}

std::string notice_refused_text(uint64_t id, const std::string& owner, const std::string& why) {
  return "notice of a write into buffer " + std::to_string(id) + " of " + owner +
         " refused: " + why;
}

std::string owner_silent_text(const std::string& nic, const std::string& why) {
  return nic + "; its owner did not say why (" + why + ")";
}

std::string data_mismatch_text(const TransferOp& op, uint64_t length, uint64_t local_sum,
                               uint64_t remote_sum, const std::string& where) {
  char sums[96];
  std::snprintf(sums, sizeof(sums), "requester checksum 0x%llx, owner checksum 0x%llx",
                static_cast<unsigned long long>(local_sum),
                static_cast<unsigned long long>(remote_sum));
  return std::string(kind_name(op.kind)) + " of " + std::to_string(length) +
         " bytes completed, but the bytes differ: local " + describe(op.local) + " offset " +
         std::to_string(op.local_offset) + " vs remote " + describe(op.remote) + " offset " +
         std::to_string(op.remote_offset) + " (" + sums + ") on " + where;
}

}  // namespace caf_rdma
