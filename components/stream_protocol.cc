// Wire format of the stream channel (see stream_protocol.h).
#include "components/stream_protocol.h"

#include <algorithm>
#include <string>

namespace caf_rdma {

namespace {

constexpr uint32_t kMagic = 0x32535243;        // "CRS2" little-endian
constexpr uint32_t kMagicV1 = 0x31535243;      // "CRS1": a build without the final status of a READ
constexpr uint32_t kMagicHandle = 0x31485243;  // "CRH1": authorized by a buffer handle

void put(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t get(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

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
  put(b + 4, static_cast<uint32_t>(r.direction), 4);
  if (!r.by_handle) {
    put(b, kMagic, 4);
    put(b + 8, r.token, 8);
    put(b + 16, r.length, 8);
    return send_all(s, b, kRequestBytes, deadline, "stream request");
  }
  put(b, kMagicHandle, 4);
  put(b + 8, r.length, 8);
  put(b + 16, r.handle.id, 8);
  put(b + 24, r.handle.secret_hi, 8);
  put(b + 32, r.handle.secret_lo, 8);
  put(b + 40, r.handle.offset, 8);
  put(b + 48, r.handle.timeout_ms, 4);
  return send_all(s, b, kHandleRequestBytes, deadline, "stream request");
}

size_t request_bytes(const uint8_t* magic4) {
  return get(magic4, 4) == kMagicHandle ? kHandleRequestBytes : kRequestBytes;
}

Result<StreamRequest> read_request(const Socket& s, Deadline deadline) {
  uint8_t b[kMaxRequestBytes];
  CAF_RDMA_RETURN_IF_ERROR(recv_all(s, b, 4, deadline, "stream request"));
  CAF_RDMA_RETURN_IF_ERROR(recv_all(s, b + 4, request_bytes(b) - 4, deadline, "stream request"));
  return parse_request(b);
}

Result<StreamRequest> parse_request(const uint8_t* b) {
  if (get(b, 4) == kMagicV1)
    return Error(ErrorCode::kInvalidArgument,
                 "stream request of protocol version 1 (\"CRS1\"); this owner speaks version 2 "
                 "(\"CRS2\"): run the same caf-rdma release on every node");
  if (get(b, 4) != kMagic && get(b, 4) != kMagicHandle)
    return Error(ErrorCode::kInvalidArgument,
                 "not a caf-rdma stream request (bad magic): is another program connecting?");
  uint64_t dir = get(b + 4, 4);
  if (dir != static_cast<uint32_t>(StreamDirection::kIntoOwner) &&
      dir != static_cast<uint32_t>(StreamDirection::kOutOfOwner))
    return Error(ErrorCode::kInvalidArgument,
                 "stream request with unknown direction " + std::to_string(dir));
  StreamRequest r;
  r.direction = static_cast<StreamDirection>(dir);
  if (get(b, 4) == kMagicHandle) {
    r.by_handle = true;
    r.length = get(b + 8, 8);
    r.handle.id = get(b + 16, 8);
    r.handle.secret_hi = get(b + 24, 8);
    r.handle.secret_lo = get(b + 32, 8);
    r.handle.offset = get(b + 40, 8);
    r.handle.timeout_ms = static_cast<uint32_t>(get(b + 48, 4));
    return r;
  }
  r.token = get(b + 8, 8);
  r.length = get(b + 16, 8);
  return r;
}

void append_status(std::vector<uint8_t>& out, const Status& st) {
  std::string msg = st.ok() ? std::string() : st.error().message();
  if (msg.size() > kMaxStatusMessage)
    msg.resize(kMaxStatusMessage);
  uint8_t b[8];
  put(b, st.ok() ? 0 : static_cast<uint32_t>(st.error().code()), 4);
  put(b + 4, msg.size(), 4);
  out.insert(out.end(), b, b + sizeof(b));
  out.insert(out.end(), msg.begin(), msg.end());
}

Status write_status(const Socket& s, const Status& st, Deadline deadline) {
  std::vector<uint8_t> b;
  append_status(b, st);
  return send_all(s, b.data(), b.size(), deadline, "stream status");
}

Result<Status> read_status(const Socket& s, Deadline deadline, const std::string& what) {
  uint8_t b[8];
  CAF_RDMA_RETURN_IF_ERROR(recv_all(s, b, sizeof(b), deadline, what));
  uint64_t code = get(b, 4);
  uint64_t n = get(b + 4, 4);
  if (n > kMaxStatusMessage)
    return Error(ErrorCode::kInternal,
                 what + ": status message of " + std::to_string(n) + " bytes (garbled stream)");
  std::string msg(n, '\0');
  CAF_RDMA_RETURN_IF_ERROR(recv_all(s, msg.data(), n, deadline, what));
  if (code == 0)
    return Status{};
  if (code > static_cast<uint32_t>(ErrorCode::kPermissionDenied))
    code = static_cast<uint32_t>(ErrorCode::kInternal);
  return Status(Error(static_cast<ErrorCode>(code), msg));
}

}  // namespace caf_rdma
