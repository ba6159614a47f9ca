// MemberState: the state of a peer group's member actor (group_member.h) and what it does with
// each message. The behaviour (group_member.cc) only routes a message to one method here. The
// methods live by concern: member_state.cc (forming the group, send/recv, leaving, a member's
// departure, the point-to-point deadlines) and member_collective.cc (collectives).
//
// Invariants:
//  1. Per peer, one message in its mailbox for us at a time: a send takes the peer's credit (its
//     mailbox for us is free) and at most one write into that mailbox is in flight
//     (Peer::sending); the peer hands the credit back (credit_atom) once it copied the message
//     out, and a failed write returns it at once (the peer never saw the chunk).
//  2. A collective completes everywhere or fails everywhere: a member tells its targets its
//     data is in place (written_atom) only once all its writes of the round landed, and a
//     member whose collective fails tells every live member, which fails it too.
//  3. A failed collective is answered only once none of our writes of it is in flight and every
//     member that may write into our buffer said none of its writes is (ended_atom), bounded by
//     kSettleDeadline: a late write must not land during the next collective.
//  4. Once broken (a member gone, a collective that completed here failed elsewhere, or writes
//     that did not settle), the group stays broken: every later collective fails at once with
//     the first cause. Send and recv between live members keep working.
#pragma once

#include <caf/actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/stateful_actor.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actors/rdma_errors.h"
#include "systems/collectives/group_member.h"

namespace caf_rdma::group::detail {

/// What a deadline_atom is for: its `kind`.
enum Deadline : uint8_t {
  kSendDeadline = 0,    ///< key: peer, id: the send
  kRecvDeadline = 1,    ///< key: peer, id: the recv
  kCollDeadline = 2,    ///< key: epoch
  kFormDeadline = 3,    ///< id: the formed_atom request
  kSettleDeadline = 4,  ///< key: epoch of the failed collective
};

struct PendingSend {
  uint64_t id;
  uint64_t msg;
  uint64_t len;
  bool last;
  caf::response_promise rp;
};

/// A chunk of a message that arrived in our mailbox (see chunk_atom).
struct Note {
  uint64_t len;
  bool last;
  uint64_t msg;
};

/// What a member called for one round of a collective; every member must call the same.
struct Shape {
  bool bcast = false;
  uint32_t root = 0;
  uint64_t len = 0;    // this round's bytes (broadcast) or block bytes (all-to-all)
  uint64_t total = 0;  // the whole call's bytes or block bytes
  bool operator==(const Shape& o) const {
    return bcast == o.bcast && (!bcast || root == o.root) && len == o.len && total == o.total;
  }
  std::string describe() const {
    return bcast ? "broadcast of " + std::to_string(total) + " bytes from rank " +
                       std::to_string(root)
                 : "all_to_all of " + std::to_string(total) + "-byte blocks";
  }
};

struct Peer {
  caf::actor actor;
  bool connected = false;
  bool hello = false;
  BufferHandle mailbox;  // theirs: where our messages go
  BufferHandle coll;     // theirs: where our collective data goes
  bool alive = true;
  bool left = false;         // it announced its leave
  std::string left_because;  // why the group broke, as it saw it ("": it was not broken there)
  caf::error gone;
  uint32_t credits = 1;  // their mailbox for us is free
  bool sending = false;  // a write into their mailbox is in flight
  std::deque<PendingSend> sends;
  std::deque<Note> notes;
  std::optional<std::pair<uint64_t, caf::response_promise>> receiver;
};

struct Collective {
  bool active = false;
  uint64_t epoch = 0;
  bool bcast = false;
  uint32_t root = 0;
  uint64_t len = 0;                                // broadcast bytes, or all-to-all block bytes
  uint64_t total = 0;                              // of the whole call (len is this round's)
  std::chrono::steady_clock::time_point deadline;  // our writes end by then
  bool readied = false;    // we sent ready: others may write into our buffer
  uint32_t in_flight = 0;  // our writes the manager has not answered yet
  // Failed: the reply, held until none of our writes is in flight and every member in
  // `settling` said none of its writes is (a late write must not land during the next one).
  std::optional<caf::error> pending_error;
  std::set<uint32_t> settling;
  std::set<uint32_t> owe_ended;  // members whose abort we answer once in_flight is 0
  std::set<uint32_t> targets;    // ranks we write to
  std::set<uint32_t> started;    // writes issued
  uint32_t writes_left = 0;
  std::set<uint32_t> awaiting;  // ranks whose data we wait for
  std::string path;
  caf::response_promise rp;

  Shape shape() const { return Shape{bcast, root, len, total}; }
};

class MemberState {
public:
  static inline const char* name = "group_member";

  using Self = caf::stateful_actor<MemberState>*;

  void init(Self self, rdma_manager_actor manager, MemberConfig cfg, MemberBuffers buf);

  // -- forming the group (member_state.cc) --

  /// peer_atom: we connected to `j` (a lower rank); introduce ourselves.
  void connected(uint32_t j, const caf::actor& peer);
  /// hello_atom from `from`: its buffers; answered over its connection when it dialed us.
  void hello(uint32_t from, BufferHandle mailbox, BufferHandle coll);
  /// formed_atom: true once every member said hello, the error of a member that is gone, or
  /// an answer delayed until then (bounded by form_timeout).
  caf::result<bool> formed_reply();
  /// A monitored member is gone: what waits for it fails, and the group is broken.
  void member_down(const caf::down_msg& dm);

  // -- point to point (member_state.cc) --

  caf::result<std::string> send(uint32_t j, uint64_t msg, uint64_t len, bool last);
  /// cut_atom: message `msg` to `j` ends unfinished; `j` hears it after the chunks it got.
  void cut(uint32_t j, uint64_t msg);
  caf::result<uint64_t, bool, uint64_t> recv(uint32_t j);
  void unrecv(uint32_t j, Note note);
  /// recv_done_atom: our mailbox for `j` is free again: `j` gets its credit back.
  void recv_done(uint32_t j);
  /// chunk_atom: to the waiting recv, else queued.
  void chunk(uint32_t from, Note note);
  void credit(uint32_t from);

  // -- leaving (member_state.cc) --

  /// left_atom: `from` leaves; a non-empty `cause` is why the group broke.
  void left(uint32_t from, const std::string& cause);
  /// leave_atom: tells every live member we go (and why the group broke, if it did).
  caf::result<bool> leave();

  // -- collectives (member_collective.cc) --

  caf::result<std::string> start_collective(bool bcast, uint64_t epoch, uint32_t root, uint64_t len,
                                            uint64_t total);
  /// ready_atom: `from` entered collective `epoch`; ours to it may start if shapes agree.
  void ready(uint64_t epoch, uint32_t from, const Shape& theirs);
  /// written_atom: `from`'s data of collective `epoch` is in our buffer.
  void written(uint64_t epoch, uint32_t from, const std::string& path);
  /// abort_atom: collective `epoch` failed at `from`.
  void aborted(uint64_t epoch, uint32_t from, ErrorCode code, const std::string& why);
  /// ended_atom: no write of `from` of collective `epoch` is in flight any more.
  void ended(uint64_t epoch, uint32_t from);

  /// deadline_atom (see Deadline).
  void expired(uint8_t kind, uint64_t key, uint64_t id);

private:
  /// "rank 2 (127.0.0.1:4711)".
  std::string who(uint32_t j) const { return cfg_.names->who(j); }
  bool formed() const;
  /// An error when `j` is not another member of the group, or is gone.
  caf::error bad_peer(uint32_t j, const char* op) const;
  void arm(Deadline kind, uint64_t key, uint64_t id);
  /// How long a request to the manager may take: the call's timeout and some slack.
  std::chrono::milliseconds request_limit() const {
    return cfg_.timeout + std::chrono::seconds(10);
  }
  /// Starts the next queued send to `j` when its mailbox is free (invariant 1).
  void pump_sends(uint32_t j);
  void expire_send(uint32_t j, uint64_t id);
  void expire_recv(uint32_t j, uint64_t id);
  void expire_form(uint64_t id);

  // -- collectives (member_collective.cc) --
  void fail_collective(const caf::error& err, bool propagate);
  void answer_if_settled();
  void check_collective();
  bool write_ended(uint64_t epoch);
  void start_write(uint32_t j);
  bool refuse_mismatch(uint32_t from, const Shape& theirs);
  void expire_collective(uint64_t epoch);
  void expire_settle(uint64_t epoch);

  Self self_ = nullptr;
  rdma_manager_actor manager_;
  MemberConfig cfg_;
  MemberBuffers buf_;
  std::vector<Peer> peers_;
  std::vector<std::pair<uint64_t, caf::response_promise>> formed_waiters_;
  Collective coll_;
  std::map<uint64_t, std::map<uint32_t, Shape>> early_ready_;
  std::map<uint64_t, caf::error> early_abort_;
  /// Recent collectives that failed here: another member's abort of one of them adds nothing
  /// (it failed there too), even when it arrives after this member moved on.
  std::set<uint64_t> failed_epochs_;
  /// Set once a member is gone, or a collective that completed here failed elsewhere: the
  /// members no longer agree, so every later collective fails at once with this reason.
  std::optional<std::string> broken_;
  uint64_t next_id_ = 0;
};

}  // namespace caf_rdma::group::detail
