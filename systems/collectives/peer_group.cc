#include "systems/collectives/peer_group.h"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <algorithm>
#include <cstring>
#include <thread>

#include "actors/rdma_client.h"
#include "actors/rdma_errors.h"
#include "actors/request_timer.h"
#include "systems/collectives/group_member.h"

namespace caf_rdma::group {

Status PeerGroup::track(Status s) {
  if (!s.ok()) {
    std::lock_guard<std::mutex> guard(last_mutex_);
    last_error_ = s.error();
  }
  return s;
}

std::optional<Error> PeerGroup::last_error() const {
  std::lock_guard<std::mutex> guard(last_mutex_);
  return last_error_;
}

std::string PeerGroup::last_path() const {
  std::lock_guard<std::mutex> guard(last_mutex_);
  return last_path_;
}

Result<std::unique_ptr<PeerGroup>> PeerGroup::form(PeerGroupOptions o) {
  uint32_t n = static_cast<uint32_t>(o.members.size());
  if (n < 2 || o.rank >= n)
    return Error(ErrorCode::kInvalidArgument, "rank " + std::to_string(o.rank) + " of a group of " +
                                                  std::to_string(n) + " members (need >= 2)");
  if (o.mailbox_bytes == 0 || o.collective_bytes < n)
    return Error(ErrorCode::kInvalidArgument,
                 "mailbox_bytes must be > 0 and collective_bytes >= the group size");
  std::vector<std::pair<std::string, uint16_t>> addr(n);
  for (uint32_t j = 0; j < n; ++j) {
    const std::string& m = o.members[j];
    if (o.rendezvous && j != o.rank)
      continue;  // learnt at the rendezvous
    if (o.rendezvous && m.size() > 2 && m.compare(m.size() - 2, 2, ":0") == 0) {
      addr[j] = {m.substr(0, m.size() - 2), 0};  // the OS picks our port
      continue;
    }
    auto hp = parse_host_port(m);
    if (!hp.ok())
      return hp.error().with_context("group member address");
    addr[j] = *hp;
  }
  constexpr uint64_t kMaxBuffer = uint64_t{1} << 40;  // 1 TiB: sums below cannot wrap
  if (o.mailbox_bytes > kMaxBuffer || o.collective_bytes > kMaxBuffer)
    return Error(ErrorCode::kInvalidArgument,
                 "mailbox_bytes (" + std::to_string(o.mailbox_bytes) + ") and collective_bytes (" +
                     std::to_string(o.collective_bytes) + ") must be at most 1 TiB");
  std::unique_ptr<PeerGroup> g(new PeerGroup());
  g->options_ = o;
  g->sent_messages_.assign(n, 0);
  g->received_upto_.assign(n, 0);
  uint64_t bytes = 2 * uint64_t(n) * o.mailbox_bytes + 2 * o.collective_bytes;
  g->memory_.reset(new (std::nothrow) uint8_t[bytes]);
  if (!g->memory_)
    return Error(ErrorCode::kInvalidArgument,
                 "cannot allocate " + std::to_string(bytes) + " bytes of group buffers");
  NodeOptions no;
  no.host = addr[o.rank].first;
  no.manager = o.manager;
  CAF_RDMA_ASSIGN_OR_RETURN(g->node_, RdmaNode::start(no));
  auto& sys = g->node_->system();
  MemberBuffers buf;
  buf.mailbox.resize(n);
  buf.staging.resize(n);
  {
    RdmaClient rc(sys, g->node_->manager());
    auto reg = [&](uint8_t* p, uint64_t size, const std::string& what) -> Result<BufferHandle> {
      auto h = rc.request_buffer(p, size);
      if (!h.ok())
        return h.error().with_context("registering " + what);
      return *h;
    };
    for (uint32_t j = 0; j < n; ++j) {
      if (j == o.rank)
        continue;
      CAF_RDMA_ASSIGN_OR_RETURN(buf.mailbox[j], reg(g->mailbox(j), o.mailbox_bytes, "a mailbox"));
      CAF_RDMA_ASSIGN_OR_RETURN(buf.staging[j],
                                reg(g->staging(j), o.mailbox_bytes, "a send buffer"));
    }
    CAF_RDMA_ASSIGN_OR_RETURN(buf.coll_recv,
                              reg(g->coll_recv(), o.collective_bytes, "the collective buffer"));
    CAF_RDMA_ASSIGN_OR_RETURN(buf.coll_send,
                              reg(g->coll_send(), o.collective_bytes, "the collective buffer"));
  }
  MemberConfig mc;
  mc.rank = o.rank;
  mc.size = n;
  mc.names = std::make_shared<MemberNames>(o.members);
  mc.timeout = std::chrono::milliseconds(o.timeout_ms);
  const uint32_t form_ms = o.form_timeout_ms != 0 ? o.form_timeout_ms : o.timeout_ms;
  mc.form_timeout = std::chrono::milliseconds(form_ms);
  g->member_ = spawn_group_member(sys, g->node_->manager(), mc, buf);
  Lease self(g.get());
  // Under the node's policy (TLS when the node has credentials), like the members' connections.
  auto port = g->node_->publish(g->member_, addr[o.rank].second);
  if (!port.ok())
    return port.error().with_context("rank " + std::to_string(o.rank));
  if (o.rendezvous) {
    std::string me = addr[o.rank].first + ":" + std::to_string(*port);
    auto all = o.rendezvous(me);
    if (!all.ok())
      return all.error().with_context("rank " + std::to_string(o.rank) + " at its rendezvous");
    if (all->size() != n || (*all)[o.rank] != me)
      return Error(ErrorCode::kInvalidArgument,
                   "rank " + std::to_string(o.rank) + ": the rendezvous returned " +
                       std::to_string(all->size()) + " members, entry " + std::to_string(o.rank) +
                       " '" + (o.rank < all->size() ? (*all)[o.rank] : "") + "', expected " +
                       std::to_string(n) + " with '" + me + "'");
    for (uint32_t j = 0; j < n; ++j) {
      auto hp = parse_host_port((*all)[j]);
      if (!hp.ok())
        return hp.error().with_context("group member address from the rendezvous");
      addr[j] = *hp;
    }
    g->options_.members = *all;
    o.members = *all;
    mc.names->set(*all);
  } else if (addr[o.rank].second == 0) {
    return Error(ErrorCode::kInvalidArgument,
                 "rank " + std::to_string(o.rank) + ": members[" + std::to_string(o.rank) +
                     "] has port 0, which needs a rendezvous to tell the others");
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(form_ms);
  // Each member dials the lower ranks; higher ranks dial us (their hello arrives over their
  // connection). One connection per pair.
  for (uint32_t j = 0; j < o.rank; ++j) {
    while (true) {  // the peer may not be up yet
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      auto a = g->node_->connect(addr[j].first, addr[j].second, "rank " + std::to_string(j),
                                 std::max(left, std::chrono::milliseconds(1)));
      if (a.ok()) {
        (*self)->send(g->member_, peer_atom::value, j, *a);
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline)
        return Error(ErrorCode::kPeerUnavailable,
                     "within " + std::to_string(form_ms) + " ms: " + a.error().message());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  std::optional<Error> failed;
  receive_answer(
      (*self).ptr(),
      (*self)->request(g->member_, std::chrono::milliseconds(form_ms) + std::chrono::seconds(10),
                       formed_atom::value),
      [](bool) {}, [&](caf::error& e) { failed = to_error(e); });
  if (failed)
    return failed->with_context("forming the group at rank " + std::to_string(o.rank));
  return g;
}

PeerGroup::Lease::Lease(PeerGroup* group) : group_(group) {
  {
    std::lock_guard<std::mutex> guard(group_->idle_mutex_);
    if (!group_->idle_.empty()) {
      actor_ = std::move(group_->idle_.back());
      group_->idle_.pop_back();
      return;
    }
  }
  actor_ = std::make_unique<caf::scoped_actor>(group_->node_->system());
}

PeerGroup::Lease::~Lease() {
  std::lock_guard<std::mutex> guard(group_->idle_mutex_);
  group_->idle_.push_back(std::move(actor_));
}

PeerGroup::~PeerGroup() {
  if (member_) {
    // The others learn that we leave, and why the group broke if it did, before our node goes.
    Lease self(this);
    (*self)
        ->request(member_, std::chrono::seconds(10), leave_atom::value)
        .receive([](bool) {}, [](caf::error&) {});
  }
  idle_.clear();  // scoped actors go before their system
  if (member_)
    caf::anon_send_exit(member_, caf::exit_reason::user_shutdown);
  member_ = nullptr;
  node_.reset();
}

template <class... Ts>
Result<std::string> PeerGroup::ask(Ts&&... xs) {
  std::optional<Result<std::string>> out;
  // The member answers within the call's timeout, a failed collective within twice that (it
  // waits, bounded by the timeout, until no member's writes of it are in flight).
  auto limit = 2 * std::chrono::milliseconds(options_.timeout_ms) + std::chrono::seconds(10);
  Lease self(this);
  receive_answer((*self).ptr(), (*self)->request(member_, limit, std::forward<Ts>(xs)...),
                 [&](std::string& path) { out.emplace(std::move(path)); },
                 [&](caf::error& e) { out.emplace(to_error(e)); });
  if (!out)
    return Error(ErrorCode::kInternal, "no reply from the group member");
  if (out->ok() && !(*out)->empty()) {
    std::lock_guard<std::mutex> guard(last_mutex_);
    last_path_ = **out;
  }
  return std::move(*out);
}

Status PeerGroup::send(uint32_t peer, const void* data, uint64_t size) {
  if (peer >= this->size() || peer == rank())
    return track(Error(ErrorCode::kInvalidArgument,
                       "send: rank " + std::to_string(peer) + " is not another member"));
  auto* p = static_cast<const uint8_t*>(data);
  uint64_t msg = ++sent_messages_[peer];  // one sender per peer (see the header)
  uint64_t off = 0;
  do {
    uint64_t len = std::min(options_.mailbox_bytes, size - off);
    if (len > 0)
      std::memcpy(staging(peer), p + off, len);
    auto r = ask(send_atom::value, peer, msg, len, off + len == size);
    if (!r.ok()) {
      if (off == 0)
        return track(r.error());
      // Part of the message is in the peer's mailbox queue: it must not take that part, and
      // whatever comes next, for one message.
      Lease self(this);
      (*self)->send(member_, cut_atom::value, peer, msg);
      return track(r.error().with_context("send to rank " + std::to_string(peer) +
                                          ": message cut off after " + std::to_string(off) +
                                          " of " + std::to_string(size) + " bytes"));
    }
    off += len;
  } while (off < size);
  return {};
}

Result<std::vector<uint8_t>> PeerGroup::recv(uint32_t peer) {
  if (peer >= size() || peer == rank()) {
    return track(Error(ErrorCode::kInvalidArgument,
                       "recv: rank " + std::to_string(peer) + " is not another member"));
  }
  std::vector<uint8_t> out;
  auto limit = std::chrono::milliseconds(options_.timeout_ms) + std::chrono::seconds(10);
  std::optional<uint64_t> current;  // the message being received, once its first chunk came
  uint64_t& done_upto = received_upto_[peer];  // one receiver per peer
  Lease self(this);
  auto cut = [&] {
    return track(Error(ErrorCode::kPeerUnavailable,
                       "recv from rank " + std::to_string(peer) + ": message " +
                           std::to_string(*current) + " was cut off by its sender after " +
                           std::to_string(out.size()) + " bytes (its sender gave up on it)"));
  };
  while (true) {
    std::optional<Error> err;
    uint64_t len = 0, msg = 0;
    bool last = false;
    receive_answer((*self).ptr(), (*self)->request(member_, limit, recv_atom::value, peer),
                   [&](uint64_t n, bool l, uint64_t m) {
                     len = n;
                     last = l;
                     msg = m;
                   },
                   [&](caf::error& e) { err = to_error(e); });
    if (err) {
      if (current)  // the rest of this message, if it comes, is not the next one
        done_upto = *current;
      return track(current
                       ? err->with_context("recv from rank " + std::to_string(peer) + " after " +
                                           std::to_string(out.size()) + " bytes of a message")
                       : *err);
    }
    if (len == kCutChunk) {  // no bytes, no credit
      if (current && msg == *current) {
        done_upto = msg;
        return cut();
      }
      continue;  // the end of a message this call never started, or one already given up
    }
    if (msg <= done_upto) {
      // A late chunk of a message already given up on (cut, or an earlier recv timed out
      // midway; numbers only grow per sender): never a message of its own.
      (*self)->send(member_, recv_done_atom::value, peer);
      continue;
    }
    if (current && msg != *current) {
      // The next message began: ours will not end. Its chunk stays queued for the next call.
      receive_answer((*self).ptr(),
                     (*self)->request(member_, limit, unrecv_atom::value, peer, len, last, msg),
                     [](bool) {}, [](caf::error&) {});
      done_upto = *current;
      return cut();
    }
    if (len > options_.mailbox_bytes)
      return track(Error(ErrorCode::kInternal, "recv: chunk larger than the mailbox"));
    out.insert(out.end(), mailbox(peer), mailbox(peer) + len);
    current = msg;
    // The mailbox is copied out: the sender may write the next piece.
    (*self)->send(member_, recv_done_atom::value, peer);
    if (last) {
      done_upto = msg;
      return out;
    }
  }
}

Status PeerGroup::broadcast(uint32_t root, void* data, uint64_t size) {
  if (root >= this->size())
    return track(Error(ErrorCode::kInvalidArgument,
                       "broadcast: root " + std::to_string(root) + " is not a rank of this group"));
  auto* p = static_cast<uint8_t*>(data);
  uint64_t off = 0;
  do {  // at least one round, even of 0 bytes: every member checks the others called the same
    uint64_t len = std::min(options_.collective_bytes, size - off);
    if (rank() == root && len > 0)
      std::memcpy(coll_send(), p + off, len);
    auto r = ask(bcast_atom::value, ++epoch_, root, len, size);
    if (!r.ok())
      return track(r.error().with_context("broadcast from rank " + std::to_string(root)));
    if (rank() != root && len > 0)
      std::memcpy(p + off, coll_recv(), len);
    off += len;
  } while (off < size);
  return {};
}

Status PeerGroup::all_to_all(const void* send, void* recv, uint64_t block_size) {
  auto* in = static_cast<const uint8_t*>(send);
  auto* out = static_cast<uint8_t*>(recv);
  uint32_t n = size();
  uint64_t piece = std::min<uint64_t>(block_size, options_.collective_bytes / n);
  uint64_t off = 0;
  do {  // at least one round, even of 0 bytes: every member checks the others called the same
    uint64_t len = std::min(piece, block_size - off);
    for (uint32_t j = 0; j < n; ++j)
      if (j != rank() && len > 0)
        std::memcpy(coll_send() + j * len, in + j * block_size + off, len);
    auto r = ask(a2a_atom::value, ++epoch_, len, block_size);
    if (!r.ok())
      return track(r.error().with_context("all_to_all"));
    for (uint32_t i = 0; i < n && len > 0; ++i)
      std::memcpy(out + i * block_size + off,
                  i == rank() ? in + i * block_size + off : coll_recv() + i * len, len);
    off += len;
  } while (off < block_size);
  return {};
}

Status PeerGroup::barrier() {
  std::vector<uint8_t> in(size(), 1), out(size(), 0);
  Status s = all_to_all(in.data(), out.data(), 1);
  return s.ok() ? s : track(s.error().with_context("barrier"));
}

}  // namespace caf_rdma::group
