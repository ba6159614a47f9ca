// RawBaspClient: a deliberately hostile test peer that speaks CAF 0.17's BASP
// (Binary Actor System Protocol, version 3) by hand over a plain TCP socket,
// bypassing CAF's middleman / remote_actor entirely. It exists so regression
// tests can send frames a well-behaved CAF node would never produce, most
// importantly a routed_message whose header claims an arbitrary source
// node/actor -- including the *receiving* node itself, in which case CAF 0.17.6
// resolves the sender via `sys.registry().get(source_actor)`, i.e. the forged
// message appears to come from a real local actor of the victim.
//
// Wire layout written/read here (all integers big-endian / network order, as
// produced by caf::binary_serializer):
//
//   header (32 bytes, fixed):
//     [0]      uint8   operation   0=server_handshake 1=client_handshake
//                                  2=direct_message   3=routed_message
//                                  4=monitor_message  5=down_message
//                                  6=heartbeat
//     [1..2]   uint8   padding (zero)
//     [3]      uint8   flags       0x01 named_receiver, 0x02 select_connection
//     [4..7]   uint32  payload_len (bytes following the header)
//     [8..15]  uint64  operation_data (BASP version for server_handshake,
//                                      message_id::integer_value() for
//                                      direct/routed messages)
//     [16..23] uint64  source_actor
//     [24..31] uint64  dest_actor
//
//   payloads (caf::binary_serializer encoding):
//     server_handshake: node_id server, vector<string> app_ids,
//                       actor_id published_actor, set<string> interface
//     client_handshake: node_id client
//     direct_message:   vector<strong_actor_ptr> forwarding_stack, message
//     routed_message:   node_id source_node, node_id dest_node,
//                       vector<strong_actor_ptr> forwarding_stack, message
//
// Protocol flow: the server writes its server_handshake immediately after
// accept(); the client answers with a client_handshake carrying its node id.
// Afterwards either side may send messages. Frames the server sends us
// (heartbeats, monitor messages, answers, ...) are kept until read_frame takes
// them or drain() drops them.
//
// Every socket wait uses poll() with a timeout; nothing here sleeps.

#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/fwd.hpp>
#include <caf/message.hpp>
#include <caf/message_id.hpp>
#include <caf/node_id.hpp>

namespace caf_rdma::testing {

// One BASP frame as read from the wire.
// A node id that claims to be a different node than `avoid`: a random process id and a
// random (non-zero) 20-byte host id, as a peer invents the ids it routes messages for.
caf::node_id make_fake_node_id(const caf::node_id& avoid = caf::node_id{});

struct BaspFrame {
  uint8_t operation = 0;
  uint8_t flags = 0;
  uint64_t operation_data = 0;
  uint64_t source_actor = 0;
  uint64_t dest_actor = 0;
  std::vector<char> payload;
};

class RawBaspClient {
public:
  static constexpr size_t kHeaderSize = 32;
  static constexpr uint64_t kBaspVersion = 3;

  static constexpr uint8_t kServerHandshake = 0x00;
  static constexpr uint8_t kClientHandshake = 0x01;
  static constexpr uint8_t kDirectMessage = 0x02;
  static constexpr uint8_t kRoutedMessage = 0x03;
  static constexpr uint8_t kMonitorMessage = 0x04;
  static constexpr uint8_t kDownMessage = 0x05;
  static constexpr uint8_t kHeartbeat = 0x06;

  static constexpr uint8_t kNamedReceiverFlag = 0x01;
  static constexpr uint8_t kSelectConnectionFlag = 0x02;

  // Connects to host:port (IPv4 literal), reads the server handshake and
  // answers with a client handshake claiming a freshly made node id (random
  // host id, distinct from the server's). `timeout` bounds every socket wait.
  // Returns std::nullopt and fills *error (if non-null) on failure.
  static std::optional<RawBaspClient> connect(caf::actor_system& sys, const std::string& host,
                                              uint16_t port, std::chrono::milliseconds timeout,
                                              std::string* error);

  RawBaspClient(RawBaspClient&& other) noexcept;
  RawBaspClient& operator=(RawBaspClient&& other) noexcept;
  RawBaspClient(const RawBaspClient&) = delete;
  RawBaspClient& operator=(const RawBaspClient&) = delete;
  ~RawBaspClient();  // Closes the socket.

  // Node id announced by the server in its handshake.
  const caf::node_id& server_node() const { return server_node_; }
  // Node id this client claimed in its client handshake.
  const caf::node_id& self_node() const { return self_node_; }
  // Id of the actor published on the connected port (0 if none).
  caf::actor_id published_actor() const { return published_actor_; }
  // Application identifiers announced by the server.
  const std::vector<std::string>& app_identifiers() const { return app_ids_; }

  // Sends one routed_message to actor `dest` on the server, claiming it comes
  // from actor `src_actor` of node `src_node` (which may be the server's own
  // node). Empty forwarding stack; `msg` is serialized with the actor
  // system's binary_serializer. Afterwards reads (non-blocking) whatever the
  // server sent us, kept for read_frame. Returns false only if building or writing the frame
  // failed; the server closing the connection afterwards is reported via
  // peer_closed(), not as a failure of this call.
  bool send_routed(const caf::node_id& src_node, caf::actor_id src_actor, caf::actor_id dest,
                   caf::message_id mid, const caf::message& msg, std::string* error);

  // Sends one direct_message to actor `dest`; the server resolves the source
  // as a proxy for actor `src_actor` on *our* node (control case).
  bool send_direct(caf::actor_id src_actor, caf::actor_id dest, caf::message_id mid,
                   const caf::message& msg, std::string* error);

  // Sends an arbitrary frame; payload_len is taken from `payload.size()`.
  bool send_frame(uint8_t operation, uint8_t flags, uint64_t operation_data, uint64_t source_actor,
                  uint64_t dest_actor, const std::vector<char>& payload, std::string* error);

  // Waits up to `timeout` for one complete frame from the server.
  bool read_frame(BaspFrame* frame, std::chrono::milliseconds timeout, std::string* error);

  // Reads and discards every complete frame that is available right now,
  // without blocking. Returns false if the server closed the connection or
  // an I/O error occurred.
  bool drain(std::string* error);

  // Whether send_routed/send_direct read what the server sent meanwhile (default: yes). A
  // client that never reads (a peer that lets its answers pile up at the server) turns it off.
  void set_read_after_send(bool on) { read_after_send_ = on; }

  // Number of frames received and discarded by drain() so far.
  size_t discarded_frames() const { return discarded_frames_; }

  // True once a read saw EOF (the server closed the connection).
  bool peer_closed() const { return peer_closed_; }

private:
  using Clock = std::chrono::steady_clock;

  RawBaspClient(caf::actor_system& sys, int fd, std::chrono::milliseconds timeout);

  void close_socket();
  bool write_all(const std::vector<char>& bytes, std::string* error);
  // Reads what is available into inbuf_; waits until `deadline` for at least
  // one byte if `block` is true. Returns false on error / EOF / timeout.
  bool fill(bool block, Clock::time_point deadline, std::string* error);
  // Extracts one complete frame from inbuf_ if present. Sets stream_corrupt_
  // if the buffered header announces an absurd payload length.
  bool pop_frame(BaspFrame* frame);

  caf::actor_system* sys_;
  int fd_;
  std::chrono::milliseconds timeout_;
  std::vector<char> inbuf_;
  caf::node_id server_node_;
  caf::node_id self_node_;
  caf::actor_id published_actor_ = 0;
  std::vector<std::string> app_ids_;
  size_t discarded_frames_ = 0;
  bool peer_closed_ = false;
  bool stream_corrupt_ = false;
  bool read_after_send_ = true;
};

}  // namespace caf_rdma::testing
