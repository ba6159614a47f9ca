#include "systems/collectives/group_member.h"

#include <caf/all.hpp>

#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "actors/rdma_errors.h"

namespace caf_rdma::group {

namespace {

enum Deadline : uint8_t {
  kSendDeadline = 0,
  kRecvDeadline = 1,
  kCollDeadline = 2,
  kFormDeadline = 3,
  kSettleDeadline = 4
};

struct PendingSend {
  uint64_t id;
  uint64_t msg;
  uint64_t len;
  bool last;
  caf::response_promise rp;
};

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
};

struct MemberState {
  static inline const char* name = "group_member";
  rdma_manager_actor manager;
  MemberConfig cfg;
  MemberBuffers buf;
  std::vector<Peer> peers;
  uint32_t hellos = 0;
  std::vector<std::pair<uint64_t, caf::response_promise>> formed_waiters;
  Collective coll;
  std::map<uint64_t, std::map<uint32_t, Shape>> early_ready;
  std::map<uint64_t, caf::error> early_abort;
  /// Recent collectives that failed here: another member's abort of one of them adds nothing
  /// (it failed there too), even when it arrives after this member moved on.
  std::set<uint64_t> failed_epochs;
  /// Set once a member is gone, or a collective that completed here failed elsewhere: the
  /// members no longer agree, so every later collective fails at once with this reason.
  std::optional<std::string> broken;
  uint64_t next_id = 0;

  uint32_t size() const { return cfg.size; }
  std::string who(uint32_t j) const { return cfg.names->who(j); }
  bool formed() const {
    for (uint32_t j = 0; j < size(); ++j)
      if (j != cfg.rank && !(peers[j].connected && peers[j].hello))
        return false;
    return true;
  }
};

using Self = caf::stateful_actor<MemberState>;

caf::error transfer_error(const caf::error& err, const std::string& what) {
  return make_rdma_error(request_error_code(err), what + ": " + error_message(err));
}

void arm(Self* self, Deadline kind, uint64_t key, uint64_t id) {
  auto after = kind == kFormDeadline ? self->state.cfg.form_timeout : self->state.cfg.timeout;
  self->delayed_send(self, after, deadline_atom::value, uint8_t(kind), key, id);
}

std::chrono::milliseconds request_limit(Self* self) {
  return self->state.cfg.timeout + std::chrono::seconds(10);
}

void answer_if_settled(Self* self) {
  auto& c = self->state.coll;
  if (c.active || !c.pending_error || c.in_flight > 0 || !c.settling.empty())
    return;
  c.rp.deliver(*c.pending_error);
  c.pending_error.reset();
}

// Fails the running collective. Once it sent ready, others may be writing into our buffer: every
// live member is told (it fails the collective too) and the reply waits until each answered
// that none of its writes of it is in flight (bounded: kSettleDeadline), and until ours ended.
// Before that, with `propagate`, the others are only told, so nobody waits for data that will
// not come.
void fail_collective(Self* self, const caf::error& err, bool propagate) {
  auto& st = self->state;
  auto& c = st.coll;
  if (!c.active)
    return;
  c.active = false;
  c.pending_error = err;
  st.failed_epochs.insert(c.epoch);
  while (st.failed_epochs.size() > 64)  // aborts of older ones have long arrived
    st.failed_epochs.erase(st.failed_epochs.begin());
  if (c.readied || propagate) {
    for (uint32_t j = 0; j < st.size(); ++j) {
      auto& p = st.peers[j];
      if (j == st.cfg.rank || !p.alive || !p.connected)
        continue;
      self->send(p.actor, abort_atom::value, c.epoch, st.cfg.rank,
                 static_cast<uint8_t>(request_error_code(err)), error_message(err));
      if (c.readied)
        c.settling.insert(j);
    }
  }
  if (!c.settling.empty())
    arm(self, kSettleDeadline, c.epoch, 0);
  answer_if_settled(self);
}

void check_collective(Self* self) {
  auto& st = self->state;
  auto& c = st.coll;
  if (!c.active || c.writes_left > 0 || !c.awaiting.empty())
    return;
  c.active = false;
  c.rp.deliver(c.path);
}

// One of our writes of collective `epoch` ended: true when the collective still runs (the
// write's outcome counts); a failed one is answered here once its last write ended.
bool write_ended(Self* self, uint64_t epoch) {
  auto& st = self->state;
  auto& c = st.coll;
  if (c.epoch != epoch || c.in_flight == 0)
    return false;  // an older collective's, or one its settle deadline gave up on
  --c.in_flight;
  if (c.active)
    return true;
  if (c.in_flight == 0) {
    for (uint32_t j : c.owe_ended)
      if (st.peers[j].alive)
        self->send(st.peers[j].actor, ended_atom::value, epoch, st.cfg.rank);
    c.owe_ended.clear();
  }
  answer_if_settled(self);
  return false;
}

void start_write(Self* self, uint32_t j) {
  auto& st = self->state;
  auto& c = st.coll;
  c.started.insert(j);
  uint64_t local = c.bcast ? 0 : uint64_t(j) * c.len;
  uint64_t remote = c.bcast ? 0 : uint64_t(st.cfg.rank) * c.len;
  uint64_t epoch = c.epoch;
  auto wrote = [self, epoch](const std::string& path) {
    auto& c = self->state.coll;
    if (!c.active || c.epoch != epoch)
      return;
    if (!path.empty())
      c.path = path;
    if (--c.writes_left > 0)
      return;
    // All our writes are in place: only now tell the targets, so that a collective either
    // completes everywhere or fails everywhere.
    for (uint32_t t : c.targets)
      self->send(self->state.peers[t].actor, written_atom::value, epoch, self->state.cfg.rank,
                 c.path);
    check_collective(self);
  };
  if (c.len == 0) {  // a zero-byte call still runs its round: the members stay in step
    wrote("");
    return;
  }
  // Ends by the collective's deadline, so a failed collective settles within its time; too
  // close to it, the write is left out and the deadline fails the collective.
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      c.deadline - std::chrono::steady_clock::now());
  if (left < std::chrono::milliseconds(20))
    return;
  auto limit = static_cast<uint32_t>(left.count());
  auto op = make_write(st.buf.coll_send, st.peers[j].coll, c.len, local, remote);
  ++c.in_flight;
  self->request(st.manager, request_limit(self), transfer_atom::value, op, limit)
      .then(
          [=](TransferReply& r) {
            if (write_ended(self, epoch))
              wrote(r.path);
          },
          [=](caf::error& err) {
            if (write_ended(self, epoch))
              fail_collective(self, transfer_error(err, "writing to " + self->state.who(j)), true);
          });
}

void pump_sends(Self* self, uint32_t j) {
  auto& st = self->state;
  auto& p = st.peers[j];
  if (p.sending || p.credits == 0 || p.sends.empty())
    return;
  PendingSend s = std::move(p.sends.front());
  p.sends.pop_front();
  --p.credits;
  auto notify = [self, j, s](const std::string& path) mutable {
    auto& p = self->state.peers[j];
    self->send(p.actor, chunk_atom::value, self->state.cfg.rank, s.msg, s.len, s.last);
    s.rp.deliver(path);
  };
  if (s.len == 0) {
    notify("");
    return;
  }
  p.sending = true;
  auto op = make_write(st.buf.staging[j], p.mailbox, s.len);
  self->request(st.manager, request_limit(self), transfer_atom::value, op,
                uint32_t(st.cfg.timeout.count()))
      .then(
          [=](TransferReply& r) mutable {
            self->state.peers[j].sending = false;
            notify(r.path);
            pump_sends(self, j);
          },
          [=](caf::error& err) mutable {
            auto& p = self->state.peers[j];
            p.sending = false;
            ++p.credits;  // the peer never saw this chunk
            s.rp.deliver(transfer_error(err, "send to " + self->state.who(j)));
            pump_sends(self, j);
          });
}

caf::error bad_peer(Self* self, uint32_t j, const char* op) {
  auto& st = self->state;
  if (j >= st.size() || j == st.cfg.rank)
    return make_rdma_error(ErrorCode::kInvalidArgument,
                           std::string(op) + ": rank " + std::to_string(j) +
                               " is not another member (group of " + std::to_string(st.size()) +
                               ", this is rank " + std::to_string(st.cfg.rank) + ")");
  if (!st.peers[j].alive)
    return st.peers[j].gone;
  return {};
}

Shape shape_of(const Collective& c) {
  return Shape{c.bcast, c.root, c.len, c.total};
}

// Fails the running collective everywhere when `from` called another one (or other sizes):
// writing would move the wrong bytes, or leave some unwritten, and report success.
bool refuse_mismatch(Self* self, uint32_t from, const Shape& theirs) {
  auto& c = self->state.coll;
  Shape mine = shape_of(c);
  if (theirs == mine)
    return false;
  std::string round = theirs.total == mine.total && theirs.len != mine.len
                          ? " (this round: " + std::to_string(theirs.len) + " vs " +
                                std::to_string(mine.len) +
                                " bytes: their collective_bytes settings differ)"
                          : "";
  fail_collective(self,
                  make_rdma_error(ErrorCode::kInvalidArgument,
                                  "collective " + std::to_string(c.epoch) + ": " +
                                      self->state.who(from) + " called " + theirs.describe() +
                                      ", but " + self->state.who(self->state.cfg.rank) +
                                      " called " + mine.describe() + round +
                                      ": every member must call the same collective with the "
                                      "same root and sizes"),
                  true);
  return true;
}

caf::result<std::string> start_collective(Self* self, bool bcast, uint64_t epoch, uint32_t root,
                                          uint64_t len, uint64_t total) {
  auto& st = self->state;
  auto& c = st.coll;
  uint32_t me = st.cfg.rank;
  if (c.active)
    return make_rdma_error(ErrorCode::kInvalidArgument,
                           "collective " + std::to_string(epoch) + " started while collective " +
                               std::to_string(c.epoch) + " still runs");
  if (c.pending_error) {
    // Its caller gave up before it settled: writes of it may still land in our buffer, or
    // ours in others'.
    if (!st.broken)
      st.broken = "collective " + std::to_string(c.epoch) +
                  " was given up by its caller before its writes ended";
    c.rp.deliver(*c.pending_error);
    c.pending_error.reset();
  }
  if (bcast && root >= st.size())
    return make_rdma_error(ErrorCode::kInvalidArgument, "broadcast root " + std::to_string(root) +
                                                            " is not a rank of this group of " +
                                                            std::to_string(st.size()));
  c = Collective{};
  c.active = true;
  c.epoch = epoch;
  c.bcast = bcast;
  c.root = root;
  c.len = len;
  c.total = total;
  c.deadline = std::chrono::steady_clock::now() + st.cfg.timeout;
  c.rp = self->make_response_promise();
  for (uint32_t j = 0; j < st.size(); ++j) {
    if (j == me)
      continue;
    if (!bcast || me == root)
      c.targets.insert(j);
    if (!bcast || j == root)
      c.awaiting.insert(j);
  }
  c.writes_left = static_cast<uint32_t>(c.targets.size());
  std::optional<caf::error> aborted;
  if (auto it = st.early_abort.find(epoch); it != st.early_abort.end())
    aborted = it->second;
  st.early_abort.erase(st.early_abort.begin(), st.early_abort.upper_bound(epoch));
  if (st.broken) {
    // Told to the others too (a member broken only here would otherwise leave them waiting for
    // its ready until their timeout). Before any ready: nobody writes into us.
    fail_collective(
        self,
        make_rdma_error(ErrorCode::kPeerUnavailable, "collective " + std::to_string(epoch) +
                                                         ": the group is broken: " + *st.broken),
        true);
    return caf::delegated<std::string>();
  }
  if (aborted) {
    fail_collective(self, *aborted, false);  // before any ready: nobody writes into us
    return caf::delegated<std::string>();
  }
  for (uint32_t j = 0; j < st.size(); ++j)
    if (j != me && !st.peers[j].alive) {
      fail_collective(self, st.peers[j].gone, true);
      return caf::delegated<std::string>();
    }
  // To every member, not only those that write to us: each checks that all called the same
  // collective (a member that took another root would otherwise wait for a write that never
  // comes). To the ones we await it also says: our receive buffer is free (the previous
  // collective was copied out), write.
  for (uint32_t j = 0; j < st.size(); ++j)
    if (j != me)
      self->send(st.peers[j].actor, ready_atom::value, epoch, me, bcast, root, len, total);
  c.readied = true;
  auto early = st.early_ready.find(epoch);
  if (early != st.early_ready.end()) {
    auto readies = std::move(early->second);
    st.early_ready.erase(st.early_ready.begin(), st.early_ready.upper_bound(epoch));
    for (auto& [j, theirs] : readies)
      if (refuse_mismatch(self, j, theirs))
        return caf::delegated<std::string>();
    for (auto& [j, theirs] : readies)
      if (c.targets.count(j))
        start_write(self, j);
  } else {
    st.early_ready.erase(st.early_ready.begin(), st.early_ready.upper_bound(epoch));
  }
  arm(self, kCollDeadline, epoch, 0);
  check_collective(self);
  return caf::delegated<std::string>();
}

caf::behavior member(Self* self, rdma_manager_actor manager, MemberConfig cfg, MemberBuffers buf) {
  auto& st = self->state;
  st.manager = std::move(manager);
  st.cfg = std::move(cfg);
  st.buf = std::move(buf);
  st.peers.resize(st.size());
  self->set_down_handler([=](const caf::down_msg& dm) {
    auto& st = self->state;
    for (uint32_t j = 0; j < st.size(); ++j) {
      auto& p = st.peers[j];
      if (!p.connected || p.actor.address() != dm.source || !p.alive)
        continue;
      p.alive = false;
      p.gone = make_rdma_error(ErrorCode::kPeerUnavailable,
                               !p.left_because.empty()
                                   ? st.who(j) + " left the broken group (" + p.left_because + ")"
                               : p.left ? st.who(j) + " is gone (it left the group)"
                                        : st.who(j) + " is gone (" + to_string(dm.reason) + ")");
      for (auto& s : p.sends)
        s.rp.deliver(p.gone);
      p.sends.clear();
      if (p.receiver) {
        p.receiver->second.deliver(p.gone);
        p.receiver.reset();
      }
      for (auto& w : st.formed_waiters)
        w.second.deliver(p.gone);
      st.formed_waiters.clear();
      // Its writes went with it: a failed collective waits no longer for its word.
      if (st.coll.settling.erase(j) > 0)
        answer_if_settled(self);
      st.coll.owe_ended.erase(j);
      // The first departure is the cause; members that leave because of it are not new ones.
      if (!st.broken)
        st.broken = p.left_because.empty() ? error_message(p.gone) : p.left_because;
      // Even a collective j has no part in fails: the members that do wait for j may have given
      // up on it already, and a broadcast from a root that did would never arrive.
      fail_collective(self, make_rdma_error(ErrorCode::kPeerUnavailable, *st.broken), true);
    }
  });
  return {
      [=](peer_atom, uint32_t j, caf::actor& a) {
        // We connected to j (a lower rank): introduce ourselves.
        auto& st = self->state;
        if (j >= st.size() || j == st.cfg.rank || st.peers[j].connected)
          return;
        st.peers[j].actor = a;
        st.peers[j].connected = true;
        self->monitor(a);
        self->send(a, hello_atom::value, st.cfg.rank, st.buf.mailbox[j], st.buf.coll_recv);
      },
      [=](hello_atom, uint32_t from, BufferHandle& mailbox, BufferHandle& coll) {
        auto& st = self->state;
        if (from >= st.size() || from == st.cfg.rank || st.peers[from].hello)
          return;
        auto& p = st.peers[from];
        if (!p.connected) {
          // A higher rank connected to us: answer over its connection (one connection per pair;
          // two nodes dialing each other at once can make CAF drop one of the two).
          p.actor = caf::actor_cast<caf::actor>(self->current_sender());
          p.connected = true;
          self->monitor(p.actor);
          self->send(p.actor, hello_atom::value, st.cfg.rank, st.buf.mailbox[from],
                     st.buf.coll_recv);
        }
        p.mailbox = std::move(mailbox);
        p.coll = std::move(coll);
        p.hello = true;
        if (st.formed()) {
          for (auto& w : st.formed_waiters)
            w.second.deliver(true);
          st.formed_waiters.clear();
        }
      },
      [=](formed_atom) -> caf::result<bool> {
        auto& st = self->state;
        for (uint32_t j = 0; j < st.size(); ++j)
          if (j != st.cfg.rank && !st.peers[j].alive)
            return st.peers[j].gone;
        if (st.formed())
          return true;
        uint64_t id = ++st.next_id;
        st.formed_waiters.emplace_back(id, self->make_response_promise());
        arm(self, kFormDeadline, 0, id);
        return caf::delegated<bool>();
      },
      [=](send_atom, uint32_t j, uint64_t msg, uint64_t len,
          bool last) -> caf::result<std::string> {
        if (auto err = bad_peer(self, j, "send"))
          return err;
        auto& st = self->state;
        if (len > st.buf.staging[j].size)
          return make_rdma_error(ErrorCode::kInvalidArgument,
                                 "send: chunk of " + std::to_string(len) + " bytes > mailbox of " +
                                     std::to_string(st.buf.staging[j].size));
        uint64_t id = ++st.next_id;
        st.peers[j].sends.push_back(PendingSend{id, msg, len, last, self->make_response_promise()});
        arm(self, kSendDeadline, j, id);
        pump_sends(self, j);
        return caf::delegated<std::string>();
      },
      [=](cut_atom, uint32_t j, uint64_t msg) {
        // After the notes of its chunks that arrived (sent before, in order).
        auto& st = self->state;
        if (j < st.size() && j != st.cfg.rank && st.peers[j].alive && st.peers[j].connected)
          self->send(st.peers[j].actor, chunk_atom::value, st.cfg.rank, msg, kCutChunk, true);
      },
      [=](recv_atom, uint32_t j) -> caf::result<uint64_t, bool, uint64_t> {
        auto& st = self->state;
        if (j < st.size() && j != st.cfg.rank && !st.peers[j].notes.empty()) {
          Note n = st.peers[j].notes.front();
          st.peers[j].notes.pop_front();
          return {n.len, n.last, n.msg};
        }
        if (auto err = bad_peer(self, j, "recv"))
          return err;
        auto& p = st.peers[j];
        if (p.receiver)
          return make_rdma_error(ErrorCode::kInvalidArgument,
                                 "recv from " + st.who(j) + ": another recv is waiting");
        uint64_t id = ++st.next_id;
        p.receiver.emplace(id, self->make_response_promise());
        arm(self, kRecvDeadline, j, id);
        return caf::delegated<uint64_t, bool, uint64_t>();
      },
      [=](unrecv_atom, uint32_t j, uint64_t len, bool last, uint64_t msg) {
        auto& st = self->state;
        if (j < st.size() && j != st.cfg.rank)
          st.peers[j].notes.push_front(Note{len, last, msg});
        return true;
      },
      [=](recv_done_atom, uint32_t j) {
        auto& st = self->state;
        if (j < st.size() && st.peers[j].alive)
          self->send(st.peers[j].actor, credit_atom::value, st.cfg.rank);
      },
      [=](chunk_atom, uint32_t from, uint64_t msg, uint64_t len, bool last) {
        auto& st = self->state;
        if (from >= st.size())
          return;
        auto& p = st.peers[from];
        if (p.receiver) {
          p.receiver->second.deliver(len, last, msg);
          p.receiver.reset();
        } else {
          p.notes.push_back(Note{len, last, msg});
        }
      },
      [=](credit_atom, uint32_t from) {
        if (from < self->state.size()) {
          ++self->state.peers[from].credits;
          pump_sends(self, from);
        }
      },
      [=](bcast_atom, uint64_t epoch, uint32_t root, uint64_t len, uint64_t total) {
        return start_collective(self, true, epoch, root, len, total);
      },
      [=](a2a_atom, uint64_t epoch, uint64_t block, uint64_t total) {
        return start_collective(self, false, epoch, 0, block, total);
      },
      [=](ready_atom, uint64_t epoch, uint32_t from, bool bcast, uint32_t root, uint64_t len,
          uint64_t total) {
        auto& st = self->state;
        auto& c = st.coll;
        if (from >= st.size() || from == st.cfg.rank)
          return;
        Shape theirs{bcast, root, len, total};
        if (c.active && epoch == c.epoch) {
          if (refuse_mismatch(self, from, theirs))
            return;
          if (c.targets.count(from) && !c.started.count(from))
            start_write(self, from);
        } else if (epoch > c.epoch) {  // we have not entered that collective yet
          st.early_ready[epoch][from] = theirs;
        }
      },
      [=](written_atom, uint64_t epoch, uint32_t from, std::string& path) {
        auto& c = self->state.coll;
        if (c.active && epoch == c.epoch && c.awaiting.erase(from) > 0) {
          if (c.path.empty())
            c.path = path;
          check_collective(self);
        }
      },
      [=](left_atom, uint32_t from, std::string& cause) {
        auto& st = self->state;
        if (from < st.size() && from != st.cfg.rank) {
          st.peers[from].left = true;
          st.peers[from].left_because = cause;
        }
        if (!cause.empty() && !st.broken)
          st.broken = cause;
        return true;
      },
      [=](leave_atom) -> caf::result<bool> {
        // Tell every live member we go, and why the group broke if it did, before our node goes:
        // our departure must not look like a new cause. Each answer is awaited a few seconds.
        auto& st = self->state;
        std::string cause = st.broken.value_or("");
        auto waiting = std::make_shared<uint32_t>(0);
        auto rp = self->make_response_promise<bool>();
        for (uint32_t j = 0; j < st.size(); ++j) {
          auto& p = st.peers[j];
          if (j == st.cfg.rank || !p.alive || !p.connected)
            continue;
          ++*waiting;
          auto answered = [waiting, rp]() mutable {
            if (--*waiting == 0)
              rp.deliver(true);
          };
          self->request(p.actor, std::chrono::seconds(3), left_atom::value, st.cfg.rank, cause)
              .then([answered](bool) mutable { answered(); },
                    [answered](caf::error&) mutable { answered(); });
        }
        if (*waiting == 0)
          rp.deliver(true);
        return rp;
      },
      [=](abort_atom, uint64_t epoch, uint32_t from, uint8_t code, std::string& why) {
        auto& st = self->state;
        auto& c = st.coll;
        if (from >= st.size() || from == st.cfg.rank)
          return;
        std::string msg =
            "collective " + std::to_string(epoch) + " aborted by " + st.who(from) + ": " + why;
        auto err = make_rdma_error(static_cast<ErrorCode>(code), msg);
        if (c.active && epoch == c.epoch)
          fail_collective(self, err, false);
        else if (epoch > c.epoch)
          st.early_abort.emplace(epoch, err);  // it fails at its start, before writing
        else if (st.failed_epochs.count(epoch) == 0 && !st.broken)
          st.broken = msg;  // it completed here but failed there
        // None of our writes of it is in flight (or once they ended): `from` may answer.
        if (epoch == c.epoch && c.in_flight > 0)
          c.owe_ended.insert(from);
        else if (st.peers[from].alive)
          self->send(st.peers[from].actor, ended_atom::value, epoch, st.cfg.rank);
      },
      [=](ended_atom, uint64_t epoch, uint32_t from) {
        auto& c = self->state.coll;
        if (epoch == c.epoch && c.settling.erase(from) > 0)
          answer_if_settled(self);
      },
      [=](deadline_atom, uint8_t kind, uint64_t key, uint64_t id) {
        auto& st = self->state;
        std::string after = " within " + std::to_string(st.cfg.timeout.count()) + " ms";
        if (kind == kSendDeadline && key < st.size()) {
          auto& q = st.peers[key].sends;
          for (auto it = q.begin(); it != q.end(); ++it)
            if (it->id == id) {
              it->rp.deliver(make_rdma_error(
                  ErrorCode::kTimeout, "send to " + st.who(key) + ": its mailbox was not freed" +
                                           after + " (is it receiving?)"));
              q.erase(it);
              break;
            }
        } else if (kind == kRecvDeadline && key < st.size()) {
          auto& r = st.peers[key].receiver;
          if (r && r->first == id) {
            r->second.deliver(make_rdma_error(ErrorCode::kTimeout,
                                              "recv from " + st.who(key) + ": no message" + after));
            r.reset();
          }
        } else if (kind == kCollDeadline) {
          auto& c = st.coll;
          if (!c.active || c.epoch != key)
            return;
          std::string missing;
          for (uint32_t j : c.targets)
            if (!c.started.count(j))
              missing += " ready from rank " + std::to_string(j) + ";";
          for (uint32_t j : c.awaiting)
            missing += " data from rank " + std::to_string(j) + ";";
          fail_collective(self,
                          make_rdma_error(ErrorCode::kTimeout, "collective " + std::to_string(key) +
                                                                   " did not finish" + after +
                                                                   "; waiting for" + missing),
                          true);
        } else if (kind == kSettleDeadline) {
          auto& c = st.coll;
          if (c.epoch != key || c.active || !c.pending_error)
            return;
          if ((!c.settling.empty() || c.in_flight > 0) && !st.broken) {
            // Their writes into our buffer may still land: no later collective may trust it.
            std::string who;
            for (uint32_t j : c.settling)
              who += (who.empty() ? "" : ", ") + st.who(j);
            if (c.in_flight > 0)  // our own write's answer did not come either
              who += (who.empty() ? "" : ", ") + st.who(st.cfg.rank);
            st.broken = "collective " + std::to_string(key) + ": " + who + " did not confirm" +
                        after + " that its writes of it ended";
          }
          c.settling.clear();
          c.in_flight = 0;  // the manager bounds our writes; their late answers are ignored
          answer_if_settled(self);
        } else if (kind == kFormDeadline) {
          auto& w = st.formed_waiters;
          for (auto it = w.begin(); it != w.end(); ++it)
            if (it->first == id) {
              std::string missing;
              for (uint32_t j = 0; j < st.size(); ++j)
                if (j != st.cfg.rank && !(st.peers[j].connected && st.peers[j].hello))
                  missing += " " + st.who(j);
              std::string why =
                  "group not formed within " + std::to_string(st.cfg.form_timeout.count()) + " ms";
              why += "; no hello from";
              why += missing;
              it->second.deliver(make_rdma_error(ErrorCode::kTimeout, why));
              w.erase(it);
              break;
            }
        }
      },
  };
}

}  // namespace

caf::actor spawn_group_member(caf::actor_system& sys, rdma_manager_actor manager,
                              MemberConfig config, MemberBuffers buffers) {
  return sys.spawn(member, std::move(manager), std::move(config), std::move(buffers));
}

}  // namespace caf_rdma::group
