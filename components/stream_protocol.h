// Wire format of the fallback's stream channel (one TCP connection carries one transfer at a
// time; connections are reused).
//
//   client -> owner   request: magic "CRS2", direction (u32), token (u64), length (u64)
//                     (the direction word's bits 8-15 carry the request's priority class,
//                     priority.h: 0 bulk, 1 latency, 2 background; an owner refuses another)
//                     or, authorized by a buffer handle instead of a grant (the stream lane,
//                     no grant asked over CAF first): magic "CRH1", direction (u32),
//                     length (u64), buffer id (u64), secret (2 x u64), offset (u64),
//                     timeout ms (u32)
//                     or, on a same-host (AF_UNIX) connection, either of them asking the owner
//                     to move the bytes by cross-memory attach (stream_server.h invariant 11):
//                     "CMS2" = "CRS2" + the requester's address (u64) + its deadline (u64),
//                     "CMH2" = "CRH1" + the requester's address (u64) + its deadline (u64)
//                     or a list of ranges of one buffer by handle ("CRL1"; "CML2" asks for
//                     cross-memory attach): "CRH1" whose offset and length are the span the
//                     ranges lie in, + range count (u32) + total bytes (u64) ["CML2": + the
//                     requester's address (u64) + its deadline (u64)]
//                     or, on a same-host connection, a request by grant whose GPU memory the
//                     requester copies itself, GPU to GPU (stream_server.h invariant 20):
//                     "CGS1" = "CRS2" + the requester's deadline (u64)
//                     A cross-memory request's deadline is the requester's, in nanoseconds of
//                     CLOCK_MONOTONIC (std::chrono::steady_clock), a clock every process of one
//                     host shares: the owner's copy into or out of the requester's memory ends
//                     by the earlier of it and the owner's own deadline, so a requester that
//                     gave up at its deadline (plus kEagerAnswerGrace, for the answer's way) is
//                     not written afterwards, however late the owner took the request (the copy
//                     is killed within kStopLook of the deadline: killable_copy.h, whose
//                     invariant 5 says why not under ThreadSanitizer). 0: none given (the
//                     owner's own deadline alone). Processes in different time namespaces
//                     (Linux 5.6+, e.g. a container restored by CRIU) do not share that clock,
//                     and the host identity does not tell them apart: there a copy may end
//                     early (a timeout) or after the requester stopped waiting. "CMS1", "CMH1" and
//                     "CML1" (the same without the deadline) are refused with a clear error.
//   owner  -> client  status:  code (u32, 0 = go ahead), message length (u32), message
//   then, into the owner:     client sends `length` bytes, owner answers a final status
//         out of the owner:   owner sends `length` bytes, then a final status
//   A write by handle of at most kEagerBytes sends its bytes right after the request, without
//   waiting for "go": the owner stores them only once it allowed the request, and answers once
//   (the final status, or the refusal, after which it closes the connection unread).
//
// The final status is sent only after the owner's last touch of the memory (its recv into the
// buffer, or its send out of it, returned), and the client completes only once it has read it.
// So everything that happens after the client's completion (its reply, and any message that
// follows from it, back to the owner too) happens after the owner is done with the memory: an
// owner may reuse the source of a READ once the requester's reply reached it, as on the NIC
// (and ThreadSanitizer sees that order: the owner's sockets carry it).
// A cross-memory request ("CMS2", "CMH2") gets one answer: the final status (the owner copied
// the bytes into or out of the requester's memory with process_vm_writev/readv and no longer
// touches either side), a refusal, or "in-band go" (code kInbandGoCode): the kernel refused
// cross-memory attach (or the owner does not use it), and the exchange goes on as for the
// plain request ("go" was that answer; bytes, then the final status). A client waits for that
// one answer past its deadline by kEagerAnswerGrace, as for an eager write: the owner may be
// copying into its memory until it answers.
// A GPU copy request ("CGS1") gets one answer too: a refusal, "in-band go" (the owner cannot
// export the memory: the exchange goes on as for "CRS2"), or "GPU copy go" (code
// kGpuCopyGoCode, its message the offset (u64) of the granted range in the export, the owner's
// deadline for the copy (u64, as a cross-memory request's: the earlier of the grant's and the
// requester's), then the export's handle: DeviceMemory::export_range; a requester starts no
// copy after that deadline). After "GPU copy go" the requester opens the
// export, copies GPU to GPU, closes it, and says how that went in one status: ok (every byte
// copied), an error (its copy failed: the owner ends the grant with it), or "in-band go" (it
// could not open the export: the bytes follow in-band as for "CRS2", then the final status).
// The owner answers an ok or an error with the final status (the same), after which it lets its
// memory go; it waits for the requester's status until that deadline plus kEagerAnswerGrace
// plus the copy's time at its slowest, for the requester's copy touches the memory until it
// sends it.
// A list request ("CRL1", "CML2") sends its table only once the owner allowed the request (its
// first "go", a plain status for both): count x (offset in the buffer (u64), offset at the
// requester (u64), length (u64)), each range not empty and inside the span, their lengths
// summing to the total; the owner refuses a total over the span's length (its client puts
// ranges that overlap at the owner in separate requests). The owner answers the table: an
// error (it closes the connection), `released` (its buffer went meanwhile: in step, the
// connection serves on), or for a "CRL1" a second "go" (then the ranges' bytes in table order,
// back to back, then the final status), for a "CML2" its one answer, awaited past the deadline
// by kEagerAnswerGrace (the owner copied each range between its buffer and the requester's
// address + the range's offset there; or "in-band go": the bytes follow as for "CRL1"). So an
// owner that refuses a request never leaves a table unread on the connection.
// "CRS1" (version 1: no final status after a READ) is refused with a clear error.
//
// Integers are little-endian. A token names one grant the owner made (buffer range, direction,
// length, deadline), comes from getrandom (unpredictable) and is single-use.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "components/device_memory.h"
#include "components/list_entry.h"
#include "components/priority.h"
#include "components/socket_io.h"
#include "components/withdrawal.h"

namespace caf_rdma {

enum class StreamDirection : uint32_t {
  kIntoOwner = 1,   ///< a write: the client sends, the owner stores into its buffer
  kOutOfOwner = 2,  ///< a read: the owner sends from its buffer
};

const char* to_string(StreamDirection d);
/// Where the priority class sits in a request's direction word (the wire format above).
constexpr unsigned kPriorityShift = 8;

/// A buffer handle's part of a "CRH1" request: the owner checks it as it checks any access
/// (secret, bounds, read-write for a write, not released).
struct HandleAccess {
  uint64_t id = 0;
  uint64_t secret_hi = 0;
  uint64_t secret_lo = 0;
  uint64_t offset = 0;      ///< where in the buffer
  uint32_t timeout_ms = 0;  ///< the requester's deadline for the transfer, from its request
};

/// The most ranges one list request carries (its table: 24 bytes each); longer lists are
/// several requests.
constexpr uint32_t kMaxListRanges = 16384;
/// A list's in-band bytes pass through a staging buffer of this many bytes on each side: one
/// socket call per block of the list, not per range.
constexpr uint64_t kListStaging = 256 << 10;

struct StreamRequest {
  StreamRequest() = default;
  /// A request by grant ("CRS2").
  StreamRequest(StreamDirection d, uint64_t grant, uint64_t bytes)
      : direction(d), token(grant), length(bytes) {}

  StreamDirection direction = StreamDirection::kIntoOwner;
  /// Its class (priority.h): the nice value of the owner's cross-memory copy of it.
  Priority priority = Priority::kBulk;
  uint64_t token = 0;  ///< the grant ("CRS2"); 0 for a request by handle
  uint64_t length = 0;
  bool by_handle = false;  ///< "CRH1": `handle` authorizes it
  HandleAccess handle;
  /// "CMS2"/"CMH2" (same-host connections only): the owner moves the bytes by cross-memory
  /// attach between its buffer and [peer_addr, peer_addr + length) of the requester.
  bool cross_memory = false;
  uint64_t peer_addr = 0;
  /// A cross-memory request's: the requester's deadline (steady_clock_ns; 0: none). The owner's
  /// copy ends by it (see the wire format above).
  uint64_t peer_deadline_ns = 0;
  /// "CGS1" (by grant, same-host connections only): the requester copies the GPU memory itself
  /// from an export of it; `peer_deadline_ns` is its deadline.
  bool gpu_copy = false;
  /// "CRL1"/"CML2" (by handle only): `handle.offset` and `length` are the span the ranges lie
  /// in; `count` ranges of `total` bytes follow the request as its table.
  bool list = false;
  uint32_t count = 0;
  uint64_t total = 0;
  /// The requester's side: the table it sends after the first "go" (`count` entries).
  const ListEntry* entries = nullptr;
};

/// Longest status message sent (longer ones are cut).
constexpr uint32_t kMaxStatusMessage = 4096;
/// Writes by handle up to this many bytes send them with the request (no "go" round trip), and
/// reads by handle up to this many bytes come back in one send (go, bytes, final status).
constexpr uint64_t kEagerBytes = 64 << 10;
/// How long past its deadline a client waits for the answer to an eager write. The request
/// carries the time it has left, from which the owner sets its own deadline and refuses the
/// request once that passed; the grace covers the request's way there, so a write answered
/// `timeout` is not stored later (unless the owner stalls longer than the grace between
/// taking the request and storing its bytes).
constexpr std::chrono::milliseconds kEagerAnswerGrace{1000};
/// Whether request `r` sends its bytes without waiting for "go".
inline bool eager_write(const StreamRequest& r) {
  return r.by_handle && !r.list && !r.cross_memory && r.direction == StreamDirection::kIntoOwner &&
         r.length <= kEagerBytes;
}

/// A steady_clock time as a cross-memory request carries it: nanoseconds of CLOCK_MONOTONIC,
/// shared by every process of the host (0 is never a deadline: steady_ns maps it to 1).
uint64_t steady_ns(Deadline t);
/// The deadline a cross-memory request's `peer_deadline_ns` names (kNoDeadline for 0).
Deadline from_steady_ns(uint64_t ns);

/// The wire's integers: `bytes` bytes (at most 8), little-endian.
void store_le(uint8_t* p, uint64_t v, int bytes);
uint64_t load_le(const uint8_t* p, int bytes);

/// Appends the wire form of `st` (what write_status sends) to `out`.
void append_status(std::vector<uint8_t>& out, const Status& st);

Status write_request(const Socket& s, const StreamRequest& r, Deadline deadline);
/// Bytes of a request on the wire: by grant ("CRS2"), by handle ("CRH1"), the longest.
constexpr size_t kRequestBytes = 24;
constexpr size_t kHandleRequestBytes = 52;
/// The same, asking for cross-memory attach ("CMS2", "CMH2": the requester's address and
/// deadline added).
constexpr size_t kCrossMemoryRequestBytes = kRequestBytes + 16;
constexpr size_t kCrossMemoryHandleRequestBytes = kHandleRequestBytes + 16;
/// A list request ("CRL1"; "CML2" with the requester's address and deadline), without its
/// table.
constexpr size_t kListRequestBytes = kHandleRequestBytes + 12;
constexpr size_t kCrossMemoryListRequestBytes = kListRequestBytes + 16;
/// A GPU copy request ("CGS1": "CRS2" and the requester's deadline).
constexpr size_t kGpuCopyRequestBytes = kRequestBytes + 8;
constexpr size_t kMaxRequestBytes = kCrossMemoryListRequestBytes;
/// Bytes of the request whose first 4 bytes are `magic4` (kRequestBytes for an unknown magic:
/// parse_request then says what is wrong).
size_t request_bytes(const uint8_t* magic4);
/// Reads a request; an unknown magic or direction is an invalid_argument error.
Result<StreamRequest> read_request(const Socket& s, Deadline deadline);
/// Whether an owner's answer says it does not know the request's magic (an older release: one
/// before "CGS1" refuses a GPU copy request so, its grant unclaimed).
bool is_unknown_request(const Status& answer);
/// Parses the request_bytes(b) bytes of a request (errors as read_request).
Result<StreamRequest> parse_request(const uint8_t* b);
/// Bytes of list request `r`'s table on the wire.
inline size_t list_table_bytes(const StreamRequest& r) {
  return size_t{r.count} * 24;
}
/// Sends list request `r`'s table (r.entries), after the owner's first "go".
Status write_list_table(const Socket& s, const StreamRequest& r, Deadline deadline);
/// Parses the list_table_bytes(r) bytes of `raw`, checked against `r` (each range not empty and
/// inside the span, their lengths summing to `total`, at most the span's length); an error
/// names the first range that is not.
Result<std::vector<ListEntry>> parse_list_table(const uint8_t* raw, const StreamRequest& r);
Status write_status(const Socket& s, const Status& st, Deadline deadline);
/// The outer Result fails when the connection does; the inner Status is the owner's answer.
Result<Status> read_status(const Socket& s, Deadline deadline, const std::string& what);

/// The status code of "in-band go" (the answer to a cross-memory request whose bytes travel on
/// the connection after all); never an ErrorCode.
constexpr uint32_t kInbandGoCode = 0xFFFFFFFFu;
Status write_inband_go(const Socket& s, Deadline deadline);
/// The status code of "GPU copy go" (the answer to a "CGS1" whose memory the requester copies
/// itself, with the export to copy from); never an ErrorCode.
constexpr uint32_t kGpuCopyGoCode = 0xFFFFFFFEu;
Status write_gpu_copy_go(const Socket& s, const GpuExport& e, Deadline copy_by, Deadline deadline);
/// The one answer to a cross-memory or GPU copy request: `inband` (go on as for the plain
/// request), `gpu_copy` (copy from `gpu`), or `status` (the final status, or the refusal).
struct CrossMemoryAnswer {
  bool inband = false;
  bool gpu_copy = false;
  GpuExport gpu;
  /// "GPU copy go": the owner's deadline for the copy (it waits for the requester's status until
  /// then, plus kEagerAnswerGrace and the copy's time at its slowest).
  Deadline gpu_deadline = kNoDeadline;
  Status status;
};
/// `gpu_copy_go`: whether "GPU copy go" may be the answer (a "CGS1" was sent); else it is a
/// garbled stream's.
Result<CrossMemoryAnswer> read_cross_memory_answer(const Socket& s, Deadline deadline,
                                                   const std::string& what,
                                                   bool gpu_copy_go = false);

}  // namespace caf_rdma
