// MemberState: collectives (broadcast and all-to-all rounds; a barrier is a zero-byte
// all-to-all). Each member sends ready to every other, writes its data into each target's
// receive buffer once that target's ready arrived, and tells the targets (written) when all its
// writes landed; a failure is told to every member and answered once the writes settled
// (invariants 2 to 4 in member_state.h).
#include <caf/all.hpp>

#include "systems/collectives/member_state.h"

namespace caf_rdma::group::detail {

namespace {

caf::error transfer_error(const caf::error& err, const std::string& what) {
  return make_rdma_error(request_error_code(err), what + ": " + error_message(err));
}

}  // namespace

caf::result<std::string> MemberState::start_collective(bool bcast, uint64_t epoch, uint32_t root,
                                                       uint64_t len, uint64_t total) {
  auto& c = coll_;
  uint32_t me = cfg_.rank;
  if (c.active)
    return make_rdma_error(ErrorCode::kInvalidArgument,
                           "collective " + std::to_string(epoch) + " started while collective " +
                               std::to_string(c.epoch) + " still runs");
  if (c.pending_error) {
    // Its caller gave up before it settled: writes of it may still land in our buffer, or
    // ours in others'.
    if (!broken_)
      broken_ = "collective " + std::to_string(c.epoch) +
                " was given up by its caller before its writes ended";
    c.rp.deliver(*c.pending_error);
    c.pending_error.reset();
  }
  if (bcast && root >= cfg_.size)
    return make_rdma_error(ErrorCode::kInvalidArgument, "broadcast root " + std::to_string(root) +
                                                            " is not a rank of this group of " +
                                                            std::to_string(cfg_.size));
  c = Collective{};
  c.active = true;
  c.epoch = epoch;
  c.bcast = bcast;
  c.root = root;
  c.len = len;
  c.total = total;
  c.deadline = std::chrono::steady_clock::now() + cfg_.timeout;
  c.rp = self_->make_response_promise();
  for (uint32_t j = 0; j < cfg_.size; ++j) {
    if (j == me)
      continue;
    if (!bcast || me == root)
      c.targets.insert(j);
    if (!bcast || j == root)
      c.awaiting.insert(j);
  }
  c.writes_left = static_cast<uint32_t>(c.targets.size());
  std::optional<caf::error> aborted;
  if (auto it = early_abort_.find(epoch); it != early_abort_.end())
    aborted = it->second;
  early_abort_.erase(early_abort_.begin(), early_abort_.upper_bound(epoch));
  if (broken_) {
    // Told to the others too (a member broken only here would otherwise leave them waiting for
    // its ready until their timeout). Before any ready: nobody writes into us.
    fail_collective(
        make_rdma_error(ErrorCode::kPeerUnavailable, "collective " + std::to_string(epoch) +
                                                         ": the group is broken: " + *broken_),
        true);
    return caf::delegated<std::string>();
  }
  if (aborted) {
    fail_collective(*aborted, false);  // before any ready: nobody writes into us
    return caf::delegated<std::string>();
  }
  for (uint32_t j = 0; j < cfg_.size; ++j)
    if (j != me && !peers_[j].alive) {
      fail_collective(peers_[j].gone, true);
      return caf::delegated<std::string>();
    }
  // To every member, not only those that write to us: each checks that all called the same
  // collective (a member that took another root would otherwise wait for a write that never
  // comes). To the ones we await it also says: our receive buffer is free (the previous
  // collective was copied out), write.
  for (uint32_t j = 0; j < cfg_.size; ++j)
    if (j != me)
      self_->send(peers_[j].actor, ready_atom::value, epoch, me, bcast, root, len, total);
  c.readied = true;
  auto early = early_ready_.find(epoch);
  if (early != early_ready_.end()) {
    auto readies = std::move(early->second);
    early_ready_.erase(early_ready_.begin(), early_ready_.upper_bound(epoch));
    for (auto& [j, theirs] : readies)
      if (refuse_mismatch(j, theirs))
        return caf::delegated<std::string>();
    for (auto& [j, theirs] : readies)
      if (c.targets.count(j))
        start_write(j);
  } else {
    early_ready_.erase(early_ready_.begin(), early_ready_.upper_bound(epoch));
  }
  arm(kCollDeadline, epoch, 0);
  check_collective();
  return caf::delegated<std::string>();
}

void MemberState::ready(uint64_t epoch, uint32_t from, const Shape& theirs) {
  auto& c = coll_;
  if (from >= cfg_.size || from == cfg_.rank)
    return;
  if (c.active && epoch == c.epoch) {
    if (refuse_mismatch(from, theirs))
      return;
    if (c.targets.count(from) && !c.started.count(from))
      start_write(from);
  } else if (epoch > c.epoch) {  // we have not entered that collective yet
    early_ready_[epoch][from] = theirs;
  }
}

void MemberState::written(uint64_t epoch, uint32_t from, const std::string& path) {
  auto& c = coll_;
  if (c.active && epoch == c.epoch && c.awaiting.erase(from) > 0) {
    if (c.path.empty())
      c.path = path;
    check_collective();
  }
}

void MemberState::aborted(uint64_t epoch, uint32_t from, ErrorCode code, const std::string& why) {
  auto& c = coll_;
  if (from >= cfg_.size || from == cfg_.rank)
    return;
  std::string msg = "collective " + std::to_string(epoch) + " aborted by " + who(from) + ": " + why;
  auto err = make_rdma_error(code, msg);
  if (c.active && epoch == c.epoch)
    fail_collective(err, false);
  else if (epoch > c.epoch)
    early_abort_.emplace(epoch, err);  // it fails at its start, before writing
  else if (failed_epochs_.count(epoch) == 0 && !broken_)
    broken_ = msg;  // it completed here but failed there
  // None of our writes of it is in flight (or once they ended): `from` may answer.
  if (epoch == c.epoch && c.in_flight > 0)
    c.owe_ended.insert(from);
  else if (peers_[from].alive)
    self_->send(peers_[from].actor, ended_atom::value, epoch, cfg_.rank);
}

void MemberState::ended(uint64_t epoch, uint32_t from) {
  if (epoch == coll_.epoch && coll_.settling.erase(from) > 0)
    answer_if_settled();
}

// Fails the running collective. Once it sent ready, others may be writing into our buffer: every
// live member is told (it fails the collective too) and the reply waits until each answered
// that none of its writes of it is in flight (bounded: kSettleDeadline), and until ours ended.
// Before that, with `propagate`, the others are only told, so nobody waits for data that will
// not come.
void MemberState::fail_collective(const caf::error& err, bool propagate) {
  auto& c = coll_;
  if (!c.active)
    return;
  c.active = false;
  c.pending_error = err;
  failed_epochs_.insert(c.epoch);
  while (failed_epochs_.size() > 64)  // aborts of older ones have long arrived
    failed_epochs_.erase(failed_epochs_.begin());
  if (c.readied || propagate) {
    for (uint32_t j = 0; j < cfg_.size; ++j) {
      auto& p = peers_[j];
      if (j == cfg_.rank || !p.alive || !p.connected)
        continue;
      self_->send(p.actor, abort_atom::value, c.epoch, cfg_.rank,
                  static_cast<uint8_t>(request_error_code(err)), error_message(err));
      if (c.readied)
        c.settling.insert(j);
    }
  }
  if (!c.settling.empty())
    arm(kSettleDeadline, c.epoch, 0);
  answer_if_settled();
}

void MemberState::answer_if_settled() {
  auto& c = coll_;
  if (c.active || !c.pending_error || c.in_flight > 0 || !c.settling.empty())
    return;
  c.rp.deliver(*c.pending_error);
  c.pending_error.reset();
}

void MemberState::check_collective() {
  auto& c = coll_;
  if (!c.active || c.writes_left > 0 || !c.awaiting.empty())
    return;
  c.active = false;
  c.rp.deliver(c.path);
}

// One of our writes of collective `epoch` ended: true when the collective still runs (the
// write's outcome counts); a failed one is answered here once its last write ended.
bool MemberState::write_ended(uint64_t epoch) {
  auto& c = coll_;
  if (c.epoch != epoch || c.in_flight == 0)
    return false;  // an older collective's, or one its settle deadline gave up on
  --c.in_flight;
  if (c.active)
    return true;
  if (c.in_flight == 0) {
    for (uint32_t j : c.owe_ended)
      if (peers_[j].alive)
        self_->send(peers_[j].actor, ended_atom::value, epoch, cfg_.rank);
    c.owe_ended.clear();
  }
  answer_if_settled();
  return false;
}

void MemberState::start_write(uint32_t j) {
  auto& c = coll_;
  c.started.insert(j);
  uint64_t local = c.bcast ? 0 : uint64_t(j) * c.len;
  uint64_t remote = c.bcast ? 0 : uint64_t(cfg_.rank) * c.len;
  uint64_t epoch = c.epoch;
  auto wrote = [this, epoch](const std::string& path) {
    auto& c = coll_;
    if (!c.active || c.epoch != epoch)
      return;
    if (!path.empty())
      c.path = path;
    if (--c.writes_left > 0)
      return;
    // All our writes are in place: only now tell the targets, so that a collective either
    // completes everywhere or fails everywhere (invariant 2).
    for (uint32_t t : c.targets)
      self_->send(peers_[t].actor, written_atom::value, epoch, cfg_.rank, c.path);
    check_collective();
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
  auto op = make_write(buf_.coll_send, peers_[j].coll, c.len, local, remote);
  ++c.in_flight;
  self_->request(manager_, request_limit(), transfer_atom::value, op, limit)
      .then(
          [=](TransferReply& r) {
            if (write_ended(epoch))
              wrote(r.path);
          },
          [=](caf::error& err) {
            if (write_ended(epoch))
              fail_collective(transfer_error(err, "writing to " + who(j)), true);
          });
}

// Fails the running collective everywhere when `from` called another one (or other sizes):
// writing would move the wrong bytes, or leave some unwritten, and report success.
bool MemberState::refuse_mismatch(uint32_t from, const Shape& theirs) {
  Shape mine = coll_.shape();
  if (theirs == mine)
    return false;
  std::string round = theirs.total == mine.total && theirs.len != mine.len
                          ? " (this round: " + std::to_string(theirs.len) + " vs " +
                                std::to_string(mine.len) +
                                " bytes: their collective_bytes settings differ)"
                          : "";
  fail_collective(make_rdma_error(ErrorCode::kInvalidArgument,
                                  "collective " + std::to_string(coll_.epoch) + ": " + who(from) +
                                      " called " + theirs.describe() + ", but " + who(cfg_.rank) +
                                      " called " + mine.describe() + round +
                                      ": every member must call the same collective with the "
                                      "same root and sizes"),
                  true);
  return true;
}

void MemberState::expire_collective(uint64_t epoch) {
  auto& c = coll_;
  if (!c.active || c.epoch != epoch)
    return;
  std::string missing;
  for (uint32_t j : c.targets)
    if (!c.started.count(j))
      missing += " ready from rank " + std::to_string(j) + ";";
  for (uint32_t j : c.awaiting)
    missing += " data from rank " + std::to_string(j) + ";";
  fail_collective(
      make_rdma_error(ErrorCode::kTimeout,
                      "collective " + std::to_string(epoch) + " did not finish within " +
                          std::to_string(cfg_.timeout.count()) + " ms; waiting for" + missing),
      true);
}

void MemberState::expire_settle(uint64_t epoch) {
  auto& c = coll_;
  if (c.epoch != epoch || c.active || !c.pending_error)
    return;
  if ((!c.settling.empty() || c.in_flight > 0) && !broken_) {
    // Their writes into our buffer may still land: no later collective may trust it.
    std::string who_not;
    for (uint32_t j : c.settling)
      who_not += (who_not.empty() ? "" : ", ") + who(j);
    if (c.in_flight > 0)  // our own write's answer did not come either
      who_not += (who_not.empty() ? "" : ", ") + who(cfg_.rank);
    broken_ = "collective " + std::to_string(epoch) + ": " + who_not + " did not confirm within " +
              std::to_string(cfg_.timeout.count()) + " ms that its writes of it ended";
  }
  c.settling.clear();
  c.in_flight = 0;  // the manager bounds our writes; their late answers are ignored
  answer_if_settled();
}

}  // namespace caf_rdma::group::detail
