// Wire format of the stream channel (see stream_protocol.h).
#include "components/stream_protocol.h"

#include <algorithm>
#include <string>

namespace caf_rdma {

void store_le(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t load_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

namespace {

constexpr uint32_t kMagic = 0x32535243;        // "CRS2" little-endian
constexpr uint32_t kMagicV1 = 0x31535243;      // "CRS1": a build without the final status of a READ
constexpr uint32_t kMagicHandle = 0x31485243;  // "CRH1": authorized by a buffer handle
constexpr uint32_t kMagicCma = 0x32534d43;     // "CMS2": "CRS2" by cross-memory attach
constexpr uint32_t kMagicCmaHandle = 0x32484d43;  // "CMH2": "CRH1" by cross-memory attach
constexpr uint32_t kMagicList = 0x314c5243;       // "CRL1": a list of ranges by handle
constexpr uint32_t kMagicCmaList = 0x324c4d43;    // "CML2": "CRL1" by cross-memory attach
constexpr uint32_t kMagicGpuCopy = 0x31534743;    // "CGS1": "CRS2", the requester's GPU copies
/// "CMS1", "CMH1", "CML1": the cross-memory requests of a release whose requests carried no
/// deadline (refused: the owner could not end its copy by the requester's deadline).
constexpr uint32_t kMagicCmaV1 = 0x31534d43;
constexpr uint32_t kMagicCmaHandleV1 = 0x31484d43;
constexpr uint32_t kMagicCmaListV1 = 0x314c4d43;
constexpr size_t kListEntryBytes = 24;
constexpr const char* kUnknownRequestText =
    "not a caf-rdma stream request (bad magic): is another program connecting?";

}  // namespace

bool is_unknown_request(const Status& answer) {
  return !answer.ok() && answer.error().code() == ErrorCode::kInvalidArgument &&
         answer.error().message().find(kUnknownRequestText) != std::string::npos;
}

uint64_t steady_ns(Deadline t) {
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  return ns <= 0 ? 1 : static_cast<uint64_t>(ns);
}

Deadline from_steady_ns(uint64_t ns) {
  if (ns == 0)
    return kNoDeadline;
  const uint64_t most = static_cast<uint64_t>(std::chrono::nanoseconds::max().count());
  return Deadline(std::chrono::duration_cast<Deadline::duration>(
      std::chrono::nanoseconds(static_cast<int64_t>(std::min(ns, most)))));
}

const char* to_string(StreamDirection d) {
  switch (d) {
    case StreamDirection::kIntoOwner:
      return "into the owner";
    case StreamDirection::kOutOfOwner:
      return "out of the owner";
  }
  return "?";
}

Status write_request(const Socket& s, const StreamRequest& r, Deadline deadline) {
  uint8_t b[kMaxRequestBytes];
  store_le(
      b + 4,
      static_cast<uint32_t>(r.direction) | (static_cast<uint32_t>(r.priority) << kPriorityShift),
      4);
  if (!r.by_handle && r.gpu_copy) {
    store_le(b, kMagicGpuCopy, 4);
    store_le(b + 8, r.token, 8);
    store_le(b + 16, r.length, 8);
    store_le(b + kRequestBytes, r.peer_deadline_ns, 8);
    return send_all(s, b, kGpuCopyRequestBytes, deadline, "stream request");
  }
  if (!r.by_handle) {
    store_le(b, r.cross_memory ? kMagicCma : kMagic, 4);
    store_le(b + 8, r.token, 8);
    store_le(b + 16, r.length, 8);
    if (r.cross_memory) {
      store_le(b + kRequestBytes, r.peer_addr, 8);
      store_le(b + kRequestBytes + 8, r.peer_deadline_ns, 8);
    }
    return send_all(s, b, r.cross_memory ? kCrossMemoryRequestBytes : kRequestBytes, deadline,
                    "stream request");
  }
  store_le(b,
           r.list ? (r.cross_memory ? kMagicCmaList : kMagicList)
                  : (r.cross_memory ? kMagicCmaHandle : kMagicHandle),
           4);
  store_le(b + 8, r.length, 8);
  store_le(b + 16, r.handle.id, 8);
  store_le(b + 24, r.handle.secret_hi, 8);
  store_le(b + 32, r.handle.secret_lo, 8);
  store_le(b + 40, r.handle.offset, 8);
  store_le(b + 48, r.handle.timeout_ms, 4);
  if (r.list) {
    store_le(b + kHandleRequestBytes, r.count, 4);
    store_le(b + kHandleRequestBytes + 4, r.total, 8);
    if (r.cross_memory) {
      store_le(b + kListRequestBytes, r.peer_addr, 8);
      store_le(b + kListRequestBytes + 8, r.peer_deadline_ns, 8);
    }
    return send_all(s, b, r.cross_memory ? kCrossMemoryListRequestBytes : kListRequestBytes,
                    deadline, "stream list request");
  }
  if (r.cross_memory) {
    store_le(b + kHandleRequestBytes, r.peer_addr, 8);
    store_le(b + kHandleRequestBytes + 8, r.peer_deadline_ns, 8);
  }
  return send_all(s, b, r.cross_memory ? kCrossMemoryHandleRequestBytes : kHandleRequestBytes,
                  deadline, "stream request");
}

size_t request_bytes(const uint8_t* magic4) {
  switch (load_le(magic4, 4)) {
    case kMagicHandle:
      return kHandleRequestBytes;
    case kMagicCma:
      return kCrossMemoryRequestBytes;
    case kMagicCmaHandle:
      return kCrossMemoryHandleRequestBytes;
    case kMagicList:
      return kListRequestBytes;
    case kMagicCmaList:
      return kCrossMemoryListRequestBytes;
    case kMagicGpuCopy:
      return kGpuCopyRequestBytes;
    default:
      return kRequestBytes;
  }
}

Result<StreamRequest> read_request(const Socket& s, Deadline deadline) {
  uint8_t b[kMaxRequestBytes];
  CAF_RDMA_RETURN_IF_ERROR(recv_all(s, b, 4, deadline, "stream request"));
  CAF_RDMA_RETURN_IF_ERROR(recv_all(s, b + 4, request_bytes(b) - 4, deadline, "stream request"));
  return parse_request(b);
}

Result<StreamRequest> parse_request(const uint8_t* b) {
  if (load_le(b, 4) == kMagicV1)
    return Error(ErrorCode::kInvalidArgument,
                 "stream request of protocol version 1 (\"CRS1\"); this owner speaks version 2 "
                 "(\"CRS2\"): run the same caf-rdma release on every node");
  const uint64_t magic = load_le(b, 4);
  if (magic == kMagicCmaV1 || magic == kMagicCmaHandleV1 || magic == kMagicCmaListV1)
    return Error(ErrorCode::kInvalidArgument,
                 "cross-memory stream request without a deadline (\"CMS1\", \"CMH1\" or "
                 "\"CML1\", an older release); this owner serves \"CMS2\", \"CMH2\" and "
                 "\"CML2\": run the same caf-rdma release on every node");
  if (magic != kMagic && magic != kMagicHandle && magic != kMagicCma && magic != kMagicCmaHandle &&
      magic != kMagicList && magic != kMagicCmaList && magic != kMagicGpuCopy)
    return Error(ErrorCode::kInvalidArgument, kUnknownRequestText);
  const uint64_t word = load_le(b + 4, 4);
  const uint64_t dir = word & ((1u << kPriorityShift) - 1);
  if (dir != static_cast<uint32_t>(StreamDirection::kIntoOwner) &&
      dir != static_cast<uint32_t>(StreamDirection::kOutOfOwner))
    return Error(ErrorCode::kInvalidArgument,
                 "stream request with unknown direction " + std::to_string(dir));
  const auto priority = priority_from_wire(static_cast<uint32_t>(word >> kPriorityShift));
  if (!priority)
    return Error(ErrorCode::kInvalidArgument,
                 "stream request: " + unknown_priority_text(word >> kPriorityShift));
  StreamRequest r;
  r.direction = static_cast<StreamDirection>(dir);
  r.priority = *priority;
  r.cross_memory = magic == kMagicCma || magic == kMagicCmaHandle || magic == kMagicCmaList;
  r.list = magic == kMagicList || magic == kMagicCmaList;
  if (magic == kMagicHandle || magic == kMagicCmaHandle || r.list) {
    r.by_handle = true;
    r.length = load_le(b + 8, 8);
    r.handle.id = load_le(b + 16, 8);
    r.handle.secret_hi = load_le(b + 24, 8);
    r.handle.secret_lo = load_le(b + 32, 8);
    r.handle.offset = load_le(b + 40, 8);
    r.handle.timeout_ms = static_cast<uint32_t>(load_le(b + 48, 4));
    if (r.list) {
      r.count = static_cast<uint32_t>(load_le(b + kHandleRequestBytes, 4));
      r.total = load_le(b + kHandleRequestBytes + 4, 8);
      if (r.count == 0 || r.count > kMaxListRanges)
        return Error(ErrorCode::kInvalidArgument,
                     "stream list request of " + std::to_string(r.count) + " ranges (from 1 to " +
                         std::to_string(kMaxListRanges) + ")");
      if (r.cross_memory) {
        r.peer_addr = load_le(b + kListRequestBytes, 8);
        r.peer_deadline_ns = load_le(b + kListRequestBytes + 8, 8);
      }
      return r;
    }
    if (r.cross_memory) {
      r.peer_addr = load_le(b + kHandleRequestBytes, 8);
      r.peer_deadline_ns = load_le(b + kHandleRequestBytes + 8, 8);
    }
    return r;
  }
  r.token = load_le(b + 8, 8);
  r.length = load_le(b + 16, 8);
  if (magic == kMagicGpuCopy) {
    r.gpu_copy = true;
    r.peer_deadline_ns = load_le(b + kRequestBytes, 8);
    return r;
  }
  if (r.cross_memory) {
    r.peer_addr = load_le(b + kRequestBytes, 8);
    r.peer_deadline_ns = load_le(b + kRequestBytes + 8, 8);
  }
  return r;
}

Status write_list_table(const Socket& s, const StreamRequest& r, Deadline deadline) {
  std::vector<uint8_t> out(list_table_bytes(r));
  uint8_t* e = out.data();
  for (uint32_t i = 0; i < r.count; ++i, e += kListEntryBytes) {
    store_le(e, r.entries[i].offset, 8);
    store_le(e + 8, r.entries[i].peer_offset, 8);
    store_le(e + 16, r.entries[i].length, 8);
  }
  return send_all(s, out.data(), out.size(), deadline, "stream list request's table");
}

Result<std::vector<ListEntry>> parse_list_table(const uint8_t* raw, const StreamRequest& r) {
  std::vector<ListEntry> entries(r.count);
  const std::string request = "stream list request for buffer " + std::to_string(r.handle.id);
  if (r.handle.offset + r.length < r.handle.offset || r.total > r.length)
    return Error(ErrorCode::kInvalidArgument,
                 request + ": " + std::to_string(r.total) + " bytes in a span of " +
                     std::to_string(r.length) + " at offset " + std::to_string(r.handle.offset) +
                     " (ranges that overlap at the owner go in separate requests)");
  const uint64_t span_end = r.handle.offset + r.length;
  uint64_t total = 0;
  for (uint32_t i = 0; i < r.count; ++i) {
    const uint8_t* e = raw + size_t{i} * kListEntryBytes;
    ListEntry& x = entries[i];
    x.offset = load_le(e, 8);
    x.peer_offset = load_le(e + 8, 8);
    x.length = load_le(e + 16, 8);
    if (x.length == 0 || x.offset < r.handle.offset || x.offset > span_end ||
        x.length > span_end - x.offset || x.length > r.total - total)
      return Error(ErrorCode::kInvalidArgument,
                   request + ": range " + std::to_string(i) + " of " + std::to_string(r.count) +
                       " (offset " + std::to_string(x.offset) + ", " + std::to_string(x.length) +
                       " bytes) is empty, outside its span [" + std::to_string(r.handle.offset) +
                       ", " + std::to_string(span_end) + ") or past its total of " +
                       std::to_string(r.total) + " bytes");
    total += x.length;
  }
  if (total != r.total)
    return Error(ErrorCode::kInvalidArgument, request + ": its " + std::to_string(r.count) +
                                                  " ranges hold " + std::to_string(total) +
                                                  " bytes, not the " + std::to_string(r.total) +
                                                  " it announced");
  return entries;
}

void append_status(std::vector<uint8_t>& out, const Status& st) {
  std::string msg = st.ok() ? std::string() : st.error().message();
  if (msg.size() > kMaxStatusMessage)
    msg.resize(kMaxStatusMessage);
  uint8_t b[8];
  store_le(b, st.ok() ? 0 : static_cast<uint32_t>(st.error().code()), 4);
  store_le(b + 4, msg.size(), 4);
  out.insert(out.end(), b, b + sizeof(b));
  out.insert(out.end(), msg.begin(), msg.end());
}

Status write_status(const Socket& s, const Status& st, Deadline deadline) {
  std::vector<uint8_t> b;
  append_status(b, st);
  return send_all(s, b.data(), b.size(), deadline, "stream status");
}

namespace {

/// A status as sent: its raw code and its message.
struct RawStatus {
  uint32_t code = 0;
  std::string message;
};

Result<RawStatus> read_raw_status(const Socket& s, Deadline deadline, const std::string& what) {
  uint8_t b[8];
  CAF_RDMA_RETURN_IF_ERROR(recv_all(s, b, sizeof(b), deadline, what));
  RawStatus r;
  r.code = static_cast<uint32_t>(load_le(b, 4));
  uint64_t n = load_le(b + 4, 4);
  if (n > kMaxStatusMessage)
    return Error(ErrorCode::kInternal,
                 what + ": status message of " + std::to_string(n) + " bytes (garbled stream)");
  r.message.assign(n, '\0');
  CAF_RDMA_RETURN_IF_ERROR(recv_all(s, r.message.data(), n, deadline, what));
  return r;
}

Status to_status(const RawStatus& r) {
  if (r.code == 0)
    return Status{};
  uint32_t code = r.code;
  if (code > static_cast<uint32_t>(kLastErrorCode))
    code = static_cast<uint32_t>(ErrorCode::kInternal);
  return Status(Error(static_cast<ErrorCode>(code), r.message));
}

}  // namespace

Result<Status> read_status(const Socket& s, Deadline deadline, const std::string& what) {
  CAF_RDMA_ASSIGN_OR_RETURN(RawStatus r, read_raw_status(s, deadline, what));
  return to_status(r);
}

Status write_inband_go(const Socket& s, Deadline deadline) {
  uint8_t b[8];
  store_le(b, kInbandGoCode, 4);
  store_le(b + 4, 0, 4);
  return send_all(s, b, sizeof(b), deadline, "stream status");
}

Status write_gpu_copy_go(const Socket& s, const GpuExport& e, Deadline copy_by, Deadline deadline) {
  if (e.handle.empty() || e.handle.size() > kMaxExportBytes)
    return Error(ErrorCode::kInternal, "a GPU export of " + std::to_string(e.handle.size()) +
                                           " bytes (from 1 to " + std::to_string(kMaxExportBytes) +
                                           ")");
  std::vector<uint8_t> b(24);
  store_le(b.data(), kGpuCopyGoCode, 4);
  store_le(b.data() + 4, 16 + e.handle.size(), 4);
  store_le(b.data() + 8, e.offset, 8);
  store_le(b.data() + 16, steady_ns(copy_by), 8);
  b.insert(b.end(), e.handle.begin(), e.handle.end());
  return send_all(s, b.data(), b.size(), deadline, "stream status");
}

Result<CrossMemoryAnswer> read_cross_memory_answer(const Socket& s, Deadline deadline,
                                                   const std::string& what, bool gpu_copy_go) {
  CAF_RDMA_ASSIGN_OR_RETURN(RawStatus r, read_raw_status(s, deadline, what));
  CrossMemoryAnswer a;
  a.inband = r.code == kInbandGoCode;
  if (r.code == kGpuCopyGoCode) {
    if (!gpu_copy_go || r.message.size() <= 16 || r.message.size() > 16 + kMaxExportBytes)
      return Error(ErrorCode::kInternal, what + ": GPU copy go of " +
                                             std::to_string(r.message.size()) +
                                             " bytes (garbled stream)");
    a.gpu_copy = true;
    const auto* m = reinterpret_cast<const uint8_t*>(r.message.data());
    a.gpu.offset = load_le(m, 8);
    a.gpu_deadline = from_steady_ns(load_le(m + 8, 8));
    a.gpu.handle.assign(m + 16, m + r.message.size());
  } else if (!a.inband) {
    a.status = to_status(r);
  }
  return a;
}

}  // namespace caf_rdma
