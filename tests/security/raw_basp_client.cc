#include "tests/security/raw_basp_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <set>
#include <utility>

#include <caf/actor_control_block.hpp>
#include <caf/binary_deserializer.hpp>

#include <caf/binary_serializer.hpp>
#include "primitives/status.h"

namespace caf_rdma::testing {

namespace {

// Upper bound for a payload we are willing to buffer from the server.
constexpr uint32_t kMaxPayload = 64u * 1024u * 1024u;

void set_error(std::string* error, std::string what) {
  if (error != nullptr)
    *error = std::move(what);
}

std::string errno_text(const char* what) {
  return std::string(what) + ": " + caf_rdma::errno_string(errno);
}

void put_u32(char* out, uint32_t x) {
  for (int i = 3; i >= 0; --i) {
    out[i] = static_cast<char>(x & 0xFF);
    x >>= 8;
  }
}

void put_u64(char* out, uint64_t x) {
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<char>(x & 0xFF);
    x >>= 8;
  }
}

uint32_t get_u32(const char* in) {
  uint32_t x = 0;
  for (int i = 0; i < 4; ++i)
    x = (x << 8) | static_cast<uint8_t>(in[i]);
  return x;
}

uint64_t get_u64(const char* in) {
  uint64_t x = 0;
  for (int i = 0; i < 8; ++i)
    x = (x << 8) | static_cast<uint8_t>(in[i]);
  return x;
}

int remaining_ms(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// Polls `fd` for `events` until `deadline`; returns >0 ready, 0 timeout,
// <0 error (errno set).
int poll_until(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    pollfd pfd{fd, events, 0};
    int rc = ::poll(&pfd, 1, remaining_ms(deadline));
    if (rc < 0 && errno == EINTR)
      continue;
    return rc;
  }
}

}  // namespace

// make_fake_node_id (see raw_basp_client.h).
caf::node_id make_fake_node_id(const caf::node_id& avoid) {
  std::random_device rd;
  std::mt19937_64 gen{(static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                      static_cast<uint64_t>(::getpid())};
  for (;;) {
    caf::node_id::default_data::host_id_type host_id;
    for (auto& b : host_id)
      b = static_cast<uint8_t>(gen());
    host_id[0] |= 0x01;  // guarantees a valid (non-zero) host id
    auto pid = static_cast<uint32_t>(gen());
    auto nid = caf::make_node_id(pid, host_id);
    if (nid != avoid)
      return nid;
  }
}

RawBaspClient::RawBaspClient(caf::actor_system& sys, int fd, std::chrono::milliseconds timeout)
    : sys_(&sys), fd_(fd), timeout_(timeout) {}

RawBaspClient::RawBaspClient(RawBaspClient&& other) noexcept
    : sys_(other.sys_),
      fd_(std::exchange(other.fd_, -1)),
      timeout_(other.timeout_),
      inbuf_(std::move(other.inbuf_)),
      server_node_(std::move(other.server_node_)),
      self_node_(std::move(other.self_node_)),
      published_actor_(other.published_actor_),
      app_ids_(std::move(other.app_ids_)),
      discarded_frames_(other.discarded_frames_),
      peer_closed_(other.peer_closed_),
      stream_corrupt_(other.stream_corrupt_),
      read_after_send_(other.read_after_send_) {}

RawBaspClient& RawBaspClient::operator=(RawBaspClient&& other) noexcept {
  if (this != &other) {
    close_socket();
    sys_ = other.sys_;
    fd_ = std::exchange(other.fd_, -1);
    timeout_ = other.timeout_;
    inbuf_ = std::move(other.inbuf_);
    server_node_ = std::move(other.server_node_);
    self_node_ = std::move(other.self_node_);
    published_actor_ = other.published_actor_;
    app_ids_ = std::move(other.app_ids_);
    discarded_frames_ = other.discarded_frames_;
    peer_closed_ = other.peer_closed_;
    stream_corrupt_ = other.stream_corrupt_;
    read_after_send_ = other.read_after_send_;
  }
  return *this;
}

RawBaspClient::~RawBaspClient() {
  close_socket();
}

void RawBaspClient::close_socket() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

std::optional<RawBaspClient> RawBaspClient::connect(caf::actor_system& sys, const std::string& host,
                                                    uint16_t port,
                                                    std::chrono::milliseconds timeout,
                                                    std::string* error) {
  auto deadline = Clock::now() + timeout;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    set_error(error, "not an IPv4 literal: " + host);
    return std::nullopt;
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    set_error(error, errno_text("socket"));
    return std::nullopt;
  }
  // From here on the client owns fd and closes it on every early return.
  RawBaspClient client{sys, fd, timeout};
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) {
      set_error(error, errno_text("connect"));
      return std::nullopt;
    }
    int rc = poll_until(fd, POLLOUT, deadline);
    if (rc < 0) {
      set_error(error, errno_text("poll(connect)"));
      return std::nullopt;
    }
    if (rc == 0) {
      set_error(error, "timeout while connecting");
      return std::nullopt;
    }
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
    if (so_error != 0) {
      set_error(error, std::string("connect: ") + caf_rdma::errno_string(so_error));
      return std::nullopt;
    }
  }
  // The server speaks first: wait for its handshake, skipping anything else.
  BaspFrame frame;
  for (;;) {
    auto left = std::chrono::milliseconds(remaining_ms(deadline));
    if (!client.read_frame(&frame, left, error))
      return std::nullopt;
    if (frame.operation == kServerHandshake)
      break;
  }
  if (frame.operation_data != kBaspVersion) {
    set_error(error, "server speaks BASP version " + std::to_string(frame.operation_data) +
                         ", expected " + std::to_string(kBaspVersion));
    return std::nullopt;
  }
  {
    caf::binary_deserializer source{sys, frame.payload};
    std::set<std::string> interface;
    if (auto err =
            source(client.server_node_, client.app_ids_, client.published_actor_, interface)) {
      set_error(error, "cannot parse server handshake: " + sys.render(err));
      return std::nullopt;
    }
  }
  if (client.server_node_ == caf::none) {
    set_error(error, "server handshake carries an invalid node id");
    return std::nullopt;
  }
  // Answer with a client handshake that claims a made-up node id.
  client.self_node_ = make_fake_node_id(client.server_node_);
  std::vector<char> payload;
  {
    caf::binary_serializer sink{sys, payload};
    if (auto err = sink(client.self_node_)) {
      set_error(error, "cannot serialize client handshake: " + sys.render(err));
      return std::nullopt;
    }
  }
  if (!client.send_frame(kClientHandshake, 0, 0, 0, 0, payload, error))
    return std::nullopt;
  return std::optional<RawBaspClient>{std::move(client)};
}

bool RawBaspClient::send_routed(const caf::node_id& src_node, caf::actor_id src_actor,
                                caf::actor_id dest, caf::message_id mid, const caf::message& msg,
                                std::string* error) {
  std::vector<char> payload;
  {
    caf::binary_serializer sink{*sys_, payload};
    std::vector<caf::strong_actor_ptr> forwarding_stack;
    if (auto err = sink(src_node, server_node_, forwarding_stack, msg)) {
      set_error(error, "cannot serialize routed message: " + sys_->render(err));
      return false;
    }
  }
  if (!send_frame(kRoutedMessage, 0, mid.integer_value(), src_actor, dest, payload, error))
    return false;
  // Whatever the server sent meanwhile is kept for read_frame (an answer may be there already);
  // EOF etc. is recorded in peer_closed_.
  std::string ignored;
  if (read_after_send_)
    fill(false, Clock::now(), &ignored);
  return true;
}

bool RawBaspClient::send_direct(caf::actor_id src_actor, caf::actor_id dest, caf::message_id mid,
                                const caf::message& msg, std::string* error) {
  std::vector<char> payload;
  {
    caf::binary_serializer sink{*sys_, payload};
    std::vector<caf::strong_actor_ptr> forwarding_stack;
    if (auto err = sink(forwarding_stack, msg)) {
      set_error(error, "cannot serialize direct message: " + sys_->render(err));
      return false;
    }
  }
  if (!send_frame(kDirectMessage, 0, mid.integer_value(), src_actor, dest, payload, error))
    return false;
  // Whatever the server sent meanwhile is kept for read_frame (an answer may be there already);
  // EOF etc. is recorded in peer_closed_.
  std::string ignored;
  if (read_after_send_)
    fill(false, Clock::now(), &ignored);
  return true;
}

bool RawBaspClient::send_frame(uint8_t operation, uint8_t flags, uint64_t operation_data,
                               uint64_t source_actor, uint64_t dest_actor,
                               const std::vector<char>& payload, std::string* error) {
  if (payload.size() > UINT32_MAX) {
    set_error(error, "payload too large");
    return false;
  }
  std::vector<char> bytes(kHeaderSize, 0);
  bytes[0] = static_cast<char>(operation);
  // bytes[1], bytes[2]: padding
  bytes[3] = static_cast<char>(flags);
  put_u32(&bytes[4], static_cast<uint32_t>(payload.size()));
  put_u64(&bytes[8], operation_data);
  put_u64(&bytes[16], source_actor);
  put_u64(&bytes[24], dest_actor);
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  return write_all(bytes, error);
}

bool RawBaspClient::write_all(const std::vector<char>& bytes, std::string* error) {
  if (fd_ < 0) {
    set_error(error, "socket closed");
    return false;
  }
  auto deadline = Clock::now() + timeout_;
  size_t written = 0;
  while (written < bytes.size()) {
    auto n = ::send(fd_, bytes.data() + written, bytes.size() - written, MSG_NOSIGNAL);
    if (n > 0) {
      written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // The server may be blocked writing to us: make room by reading (kept for read_frame).
      std::string ignored;
      fill(false, deadline, &ignored);
      int rc = poll_until(fd_, POLLOUT, deadline);
      if (rc < 0) {
        set_error(error, errno_text("poll(send)"));
        return false;
      }
      if (rc == 0) {
        set_error(error, "timeout while sending");
        return false;
      }
      continue;
    }
    set_error(error, errno_text("send"));
    return false;
  }
  return true;
}

bool RawBaspClient::fill(bool block, Clock::time_point deadline, std::string* error) {
  if (fd_ < 0) {
    set_error(error, "socket closed");
    return false;
  }
  bool got_any = false;
  char chunk[4096];
  for (;;) {
    auto n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n > 0) {
      inbuf_.insert(inbuf_.end(), chunk, chunk + n);
      got_any = true;
      continue;
    }
    if (n == 0) {
      peer_closed_ = true;
      set_error(error, "connection closed by server");
      return false;
    }
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      set_error(error, errno_text("recv"));
      return false;
    }
    // Nothing more available right now.
    if (got_any || !block)
      return true;
    int rc = poll_until(fd_, POLLIN, deadline);
    if (rc < 0) {
      set_error(error, errno_text("poll(recv)"));
      return false;
    }
    if (rc == 0) {
      set_error(error, "timeout while waiting for data");
      return false;
    }
  }
}

bool RawBaspClient::pop_frame(BaspFrame* frame) {
  if (inbuf_.size() < kHeaderSize)
    return false;
  auto payload_len = get_u32(&inbuf_[4]);
  if (payload_len > kMaxPayload) {
    // A frame this large is not something we expect from a CAF server; drop
    // the buffer so we do not grow without bounds and report the stream as
    // unusable.
    inbuf_.clear();
    stream_corrupt_ = true;
    return false;
  }
  if (inbuf_.size() < kHeaderSize + payload_len)
    return false;
  frame->operation = static_cast<uint8_t>(inbuf_[0]);
  frame->flags = static_cast<uint8_t>(inbuf_[3]);
  frame->operation_data = get_u64(&inbuf_[8]);
  frame->source_actor = get_u64(&inbuf_[16]);
  frame->dest_actor = get_u64(&inbuf_[24]);
  auto first = inbuf_.begin() + kHeaderSize;
  auto last = first + payload_len;
  frame->payload.assign(first, last);
  inbuf_.erase(inbuf_.begin(), last);
  return true;
}

bool RawBaspClient::read_frame(BaspFrame* frame, std::chrono::milliseconds timeout,
                               std::string* error) {
  auto deadline = Clock::now() + timeout;
  while (!pop_frame(frame)) {
    if (stream_corrupt_) {
      set_error(error, "server sent a frame with an oversized payload");
      return false;
    }
    if (!fill(true, deadline, error))
      return false;
  }
  return true;
}

bool RawBaspClient::drain(std::string* error) {
  bool ok = fill(false, Clock::now(), error);
  BaspFrame skipped;
  while (pop_frame(&skipped))
    ++discarded_frames_;
  return ok;
}

}  // namespace caf_rdma::testing
