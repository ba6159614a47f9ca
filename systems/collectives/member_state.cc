// MemberState: forming the group, send/recv, leaving, a member's departure and the
// point-to-point deadlines (collectives: member_collective.cc).
#include "systems/collectives/member_state.h"

#include <caf/all.hpp>

#include <memory>

namespace caf_rdma::group::detail {

namespace {

caf::error transfer_error(const caf::error& err, const std::string& what) {
  return make_rdma_error(request_error_code(err), what + ": " + error_message(err));
}

}  // namespace

void MemberState::init(Self self, rdma_manager_actor manager, MemberConfig cfg, MemberBuffers buf) {
  self_ = self;
  manager_ = std::move(manager);
  cfg_ = std::move(cfg);
  buf_ = std::move(buf);
  peers_.resize(cfg_.size);
}

bool MemberState::formed() const {
  for (uint32_t j = 0; j < cfg_.size; ++j)
    if (j != cfg_.rank && !(peers_[j].connected && peers_[j].hello))
      return false;
  return true;
}

caf::error MemberState::bad_peer(uint32_t j, const char* op) const {
  if (j >= cfg_.size || j == cfg_.rank)
    return make_rdma_error(ErrorCode::kInvalidArgument,
                           std::string(op) + ": rank " + std::to_string(j) +
                               " is not another member (group of " + std::to_string(cfg_.size) +
                               ", this is rank " + std::to_string(cfg_.rank) + ")");
  if (!peers_[j].alive)
    return peers_[j].gone;
  return {};
}

void MemberState::arm(Deadline kind, uint64_t key, uint64_t id) {
  auto after = kind == kFormDeadline ? cfg_.form_timeout : cfg_.timeout;
  self_->delayed_send(self_, after, deadline_atom::value, uint8_t(kind), key, id);
}

// -- forming the group ------------------------------------------------------------------------

void MemberState::connected(uint32_t j, const caf::actor& peer) {
  if (j >= cfg_.size || j == cfg_.rank || peers_[j].connected)
    return;
  peers_[j].actor = peer;
  peers_[j].connected = true;
  self_->monitor(peer);
  self_->send(peer, hello_atom::value, cfg_.rank, buf_.mailbox[j], buf_.coll_recv);
}

void MemberState::hello(uint32_t from, BufferHandle mailbox, BufferHandle coll) {
  if (from >= cfg_.size || from == cfg_.rank || peers_[from].hello)
    return;
  auto& p = peers_[from];
  if (!p.connected) {
    // A higher rank connected to us: answer over its connection (one connection per pair;
    // two nodes dialing each other at once can make CAF drop one of the two).
    p.actor = caf::actor_cast<caf::actor>(self_->current_sender());
    p.connected = true;
    self_->monitor(p.actor);
    self_->send(p.actor, hello_atom::value, cfg_.rank, buf_.mailbox[from], buf_.coll_recv);
  }
  p.mailbox = std::move(mailbox);
  p.coll = std::move(coll);
  p.hello = true;
  if (formed()) {
    for (auto& w : formed_waiters_)
      w.second.deliver(true);
    formed_waiters_.clear();
  }
}

caf::result<bool> MemberState::formed_reply() {
  for (uint32_t j = 0; j < cfg_.size; ++j)
    if (j != cfg_.rank && !peers_[j].alive)
      return peers_[j].gone;
  if (formed())
    return true;
  uint64_t id = ++next_id_;
  formed_waiters_.emplace_back(id, self_->make_response_promise());
  arm(kFormDeadline, 0, id);
  return caf::delegated<bool>();
}

void MemberState::member_down(const caf::down_msg& dm) {
  for (uint32_t j = 0; j < cfg_.size; ++j) {
    auto& p = peers_[j];
    if (!p.connected || p.actor.address() != dm.source || !p.alive)
      continue;
    p.alive = false;
    p.gone = make_rdma_error(ErrorCode::kPeerUnavailable,
                             !p.left_because.empty()
                                 ? who(j) + " left the broken group (" + p.left_because + ")"
                             : p.left ? who(j) + " is gone (it left the group)"
                                      : who(j) + " is gone (" + to_string(dm.reason) + ")");
    for (auto& s : p.sends)
      s.rp.deliver(p.gone);
    p.sends.clear();
    if (p.receiver) {
      p.receiver->second.deliver(p.gone);
      p.receiver.reset();
    }
    for (auto& w : formed_waiters_)
      w.second.deliver(p.gone);
    formed_waiters_.clear();
    // Its writes went with it: a failed collective waits no longer for its word.
    if (coll_.settling.erase(j) > 0)
      answer_if_settled();
    coll_.owe_ended.erase(j);
    // The first departure is the cause; members that leave because of it are not new ones.
    if (!broken_)
      broken_ = p.left_because.empty() ? error_message(p.gone) : p.left_because;
    // Even a collective j has no part in fails: the members that do wait for j may have given
    // up on it already, and a broadcast from a root that did would never arrive.
    fail_collective(make_rdma_error(ErrorCode::kPeerUnavailable, *broken_), true);
  }
}

// -- point to point ---------------------------------------------------------------------------

caf::result<std::string> MemberState::send(uint32_t j, uint64_t msg, uint64_t len, bool last) {
  if (auto err = bad_peer(j, "send"))
    return err;
  if (len > buf_.staging[j].size)
    return make_rdma_error(ErrorCode::kInvalidArgument, "send: chunk of " + std::to_string(len) +
                                                            " bytes > mailbox of " +
                                                            std::to_string(buf_.staging[j].size));
  uint64_t id = ++next_id_;
  peers_[j].sends.push_back(PendingSend{id, msg, len, last, self_->make_response_promise()});
  arm(kSendDeadline, j, id);
  pump_sends(j);
  return caf::delegated<std::string>();
}

void MemberState::pump_sends(uint32_t j) {
  auto& p = peers_[j];
  if (p.sending || p.credits == 0 || p.sends.empty())
    return;
  PendingSend s = std::move(p.sends.front());
  p.sends.pop_front();
  --p.credits;
  auto notify = [this, j, s](const std::string& path) mutable {
    self_->send(peers_[j].actor, chunk_atom::value, cfg_.rank, s.msg, s.len, s.last);
    s.rp.deliver(path);
  };
  if (s.len == 0) {
    notify("");
    return;
  }
  p.sending = true;
  auto op = make_write(buf_.staging[j], p.mailbox, s.len);
  self_
      ->request(manager_, request_limit(), transfer_atom::value, op, uint32_t(cfg_.timeout.count()))
      .then(
          [=](TransferReply& r) mutable {
            peers_[j].sending = false;
            notify(r.path);
            pump_sends(j);
          },
          [=](caf::error& err) mutable {
            auto& p = peers_[j];
            p.sending = false;
            ++p.credits;  // the peer never saw this chunk
            s.rp.deliver(transfer_error(err, "send to " + who(j)));
            pump_sends(j);
          });
}

void MemberState::cut(uint32_t j, uint64_t msg) {
  // After the notes of its chunks that arrived (sent before, in order).
  if (j < cfg_.size && j != cfg_.rank && peers_[j].alive && peers_[j].connected)
    self_->send(peers_[j].actor, chunk_atom::value, cfg_.rank, msg, kCutChunk, true);
}

caf::result<uint64_t, bool, uint64_t> MemberState::recv(uint32_t j) {
  if (j < cfg_.size && j != cfg_.rank && !peers_[j].notes.empty()) {
    Note n = peers_[j].notes.front();
    peers_[j].notes.pop_front();
    return {n.len, n.last, n.msg};
  }
  if (auto err = bad_peer(j, "recv"))
    return err;
  auto& p = peers_[j];
  if (p.receiver)
    return make_rdma_error(ErrorCode::kInvalidArgument,
                           "recv from " + who(j) + ": another recv is waiting");
  uint64_t id = ++next_id_;
  p.receiver.emplace(id, self_->make_response_promise());
  arm(kRecvDeadline, j, id);
  return caf::delegated<uint64_t, bool, uint64_t>();
}

void MemberState::unrecv(uint32_t j, Note note) {
  if (j < cfg_.size && j != cfg_.rank)
    peers_[j].notes.push_front(note);
}

void MemberState::recv_done(uint32_t j) {
  if (j < cfg_.size && peers_[j].alive)
    self_->send(peers_[j].actor, credit_atom::value, cfg_.rank);
}

void MemberState::chunk(uint32_t from, Note note) {
  if (from >= cfg_.size)
    return;
  auto& p = peers_[from];
  if (p.receiver) {
    p.receiver->second.deliver(note.len, note.last, note.msg);
    p.receiver.reset();
  } else {
    p.notes.push_back(note);
  }
}

void MemberState::credit(uint32_t from) {
  if (from < cfg_.size) {
    ++peers_[from].credits;
    pump_sends(from);
  }
}

// -- leaving ----------------------------------------------------------------------------------

void MemberState::left(uint32_t from, const std::string& cause) {
  if (from < cfg_.size && from != cfg_.rank) {
    peers_[from].left = true;
    peers_[from].left_because = cause;
  }
  if (!cause.empty() && !broken_)
    broken_ = cause;
}

caf::result<bool> MemberState::leave() {
  // Tell every live member we go, and why the group broke if it did, before our node goes:
  // our departure must not look like a new cause. Each answer is awaited a few seconds.
  std::string cause = broken_.value_or("");
  auto waiting = std::make_shared<uint32_t>(0);
  auto rp = self_->make_response_promise<bool>();
  for (uint32_t j = 0; j < cfg_.size; ++j) {
    auto& p = peers_[j];
    if (j == cfg_.rank || !p.alive || !p.connected)
      continue;
    ++*waiting;
    auto answered = [waiting, rp]() mutable {
      if (--*waiting == 0)
        rp.deliver(true);
    };
    self_->request(p.actor, std::chrono::seconds(3), left_atom::value, cfg_.rank, cause)
        .then([answered](bool) mutable { answered(); },
              [answered](caf::error&) mutable { answered(); });
  }
  if (*waiting == 0)
    rp.deliver(true);
  return rp;
}

// -- deadlines --------------------------------------------------------------------------------

void MemberState::expired(uint8_t kind, uint64_t key, uint64_t id) {
  if (kind == kSendDeadline && key < cfg_.size)
    expire_send(static_cast<uint32_t>(key), id);
  else if (kind == kRecvDeadline && key < cfg_.size)
    expire_recv(static_cast<uint32_t>(key), id);
  else if (kind == kCollDeadline)
    expire_collective(key);
  else if (kind == kSettleDeadline)
    expire_settle(key);
  else if (kind == kFormDeadline)
    expire_form(id);
}

void MemberState::expire_send(uint32_t j, uint64_t id) {
  auto& q = peers_[j].sends;
  for (auto it = q.begin(); it != q.end(); ++it)
    if (it->id == id) {
      it->rp.deliver(make_rdma_error(ErrorCode::kTimeout,
                                     "send to " + who(j) + ": its mailbox was not freed within " +
                                         std::to_string(cfg_.timeout.count()) +
                                         " ms (is it receiving?)"));
      q.erase(it);
      return;
    }
}

void MemberState::expire_recv(uint32_t j, uint64_t id) {
  auto& r = peers_[j].receiver;
  if (r && r->first == id) {
    r->second.deliver(
        make_rdma_error(ErrorCode::kTimeout, "recv from " + who(j) + ": no message within " +
                                                 std::to_string(cfg_.timeout.count()) + " ms"));
    r.reset();
  }
}

void MemberState::expire_form(uint64_t id) {
  auto& w = formed_waiters_;
  for (auto it = w.begin(); it != w.end(); ++it)
    if (it->first == id) {
      std::string missing;
      for (uint32_t j = 0; j < cfg_.size; ++j)
        if (j != cfg_.rank && !(peers_[j].connected && peers_[j].hello))
          missing += " " + who(j);
      std::string why =
          "group not formed within " + std::to_string(cfg_.form_timeout.count()) + " ms";
      why += "; no hello from";
      why += missing;
      it->second.deliver(make_rdma_error(ErrorCode::kTimeout, why));
      w.erase(it);
      return;
    }
}

}  // namespace caf_rdma::group::detail
