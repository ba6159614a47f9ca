// WriteReceipts (see write_receipts.h).
#include "actors/manager/write_receipts.h"

#include <algorithm>

#include "actors/detail/manager_state.h"
#include "actors/rdma_messages.h"
#include "primitives/log.h"

namespace caf_rdma::detail {

namespace {

std::string receipt_name(const std::string& node, uint64_t receipt) {
  return "receipt " + std::to_string(receipt) + " of " +
         (node.empty() ? std::string("this node") : "node " + node);
}

std::string range_text(uint64_t buffer, uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ") of buffer " +
         std::to_string(buffer);
}

}  // namespace

// -- records ----------------------------------------------------------------------------------

std::string WriteReceipts::sender_node() const {
  const auto& sender = m_.self()->current_sender();
  return sender ? caf::to_string(sender->node()) : std::string("anonymous");
}

WriteReceipts::Receipt* WriteReceipts::make(const Key& key, ReceiptSource source, uint64_t buffer) {
  if (auto it = receipts_.find(key); it != receipts_.end())
    return &it->second;
  expire_old();
  // Invariant 3: the node's oldest goes first, then the oldest of all.
  if (auto mine = per_node_.find(key.first);
      mine != per_node_.end() && mine->second.size() >= kMaxReceiptsPerNode)
    erase(receipts_.find(by_age_.at(*mine->second.begin())));
  if (receipts_.size() >= kMaxReceipts && !by_age_.empty())
    erase(receipts_.find(by_age_.begin()->second));
  Receipt r;
  r.source = source;
  r.buffer = buffer;
  r.seq = ++seq_;
  r.made = m_.now();
  by_age_.emplace(r.seq, key);
  per_node_[key.first].insert(r.seq);
  return &receipts_.emplace(key, std::move(r)).first->second;
}

void WriteReceipts::erase(std::map<Key, Receipt>::iterator it) {
  if (it == receipts_.end())
    return;
  by_age_.erase(it->second.seq);
  auto n = per_node_.find(it->first.first);
  if (n != per_node_.end() && n->second.erase(it->second.seq) == 1 && n->second.empty())
    per_node_.erase(n);
  receipts_.erase(it);
}

void WriteReceipts::expire_old() {
  const auto oldest = m_.now() - std::chrono::milliseconds(m_.options().max_timeout);
  while (!by_age_.empty()) {
    auto it = receipts_.find(by_age_.begin()->second);
    if (it == receipts_.end() || it->second.made > oldest)
      return;
    erase(it);
  }
}

void WriteReceipts::stream_landed(const std::string& node, uint64_t token, uint64_t buffer,
                                  uint64_t offset, uint64_t length) {
  const Key key{node, token};
  Receipt* r = make(key, ReceiptSource::kStream, buffer);
  r->landed[offset] = offset + length;
  hand_to_waiter(key);
}

void WriteReceipts::chunk_landed(const std::string& node, uint64_t receipt, uint64_t buffer,
                                 uint64_t offset, uint64_t length) {
  if (length == 0)
    return;
  const Key key{node, receipt};
  Receipt* r = make(key, ReceiptSource::kChunks, buffer);
  if (r->source != ReceiptSource::kChunks || r->buffer != buffer || r->overflow) {
    r->overflow = true;  // one receipt, two writes: it matches nothing (invariant 1)
    return;
  }
  // Merge [offset, end) with the ranges it touches.
  uint64_t begin = offset, end = offset + length;
  auto it = r->landed.upper_bound(begin);
  if (it != r->landed.begin() && std::prev(it)->second >= begin)
    --it;
  while (it != r->landed.end() && it->first <= end) {
    begin = std::min(begin, it->first);
    end = std::max(end, it->second);
    it = r->landed.erase(it);
  }
  r->landed[begin] = end;
  if (r->landed.size() > kMaxReceiptPieces) {
    r->overflow = true;
    r->landed.clear();
  }
  hand_to_waiter(key);
}

// -- RDMA receives ----------------------------------------------------------------------------

Result<RdmaBuffer> WriteReceipts::sink() {
  if (sink_domain_ != m_.nic().domain || sink_.released()) {
    sink_domain_ = m_.nic().domain;
    sink_ = RdmaBuffer{};
    if (!m_.nic().domain)
      return Error(ErrorCode::kNoDevice, "no RDMA device");
    CAF_RDMA_ASSIGN_OR_RETURN(sink_, m_.nic().domain->register_local(sink_bytes_.get(), 64));
  }
  return sink_;
}

void WriteReceipts::drop_device() {
  sink_ = RdmaBuffer{};
  sink_domain_.reset();
  armed_.clear();  // every queue pair of the device went
}

namespace {

/// One standing receive (invariant 4): on completion it tells the manager of an immediate and
/// posts itself again at once, on the poller's thread; flushed (the queue pair in ERR or gone),
/// it ends.
struct StandingReceive {
  std::weak_ptr<QpEndpoint> qp;
  RdmaBuffer sink;  ///< never read: a receive only waits for an immediate
  caf::actor_addr manager;
  std::string node;

  Status post(QpEndpoint& q) const {
    return q.submit(RdmaOp::recv(LocalSlice{sink, 0, 64}), *this);
  }

  void operator()(const OpResult& r) const {
    if (!r.status.ok())
      return;
    if (r.with_imm)
      if (auto h = caf::actor_cast<caf::actor>(manager))
        caf::anon_send(h, ReceiptLanded{node, r.imm});
    auto q = qp.lock();
    if (q && !q->needs_recovery())
      (void)post(*q);  // fails only in ERR: the queue pair is dropped with its receives
  }
};

}  // namespace

Status WriteReceipts::arm(const std::shared_ptr<QpEndpoint>& qp, const std::string& node) {
  if (armed_.size() >= kMaxArmedQps)
    return Error(ErrorCode::kResourceExhausted,
                 std::to_string(armed_.size()) +
                     " queue pairs accepted from peer managers keep receives for write receipts "
                     "(limit " +
                     std::to_string(kMaxArmedQps) + ")");
  CAF_RDMA_ASSIGN_OR_RETURN(RdmaBuffer target, sink());
  StandingReceive receive{qp, std::move(target), m_.self()->address(), node};
  for (uint32_t i = 0; i < kReceiptReceives; ++i)
    if (Status st = receive.post(*qp); !st.ok())
      return st.error().with_context("posting the receives for write receipts");
  armed_.insert(qp.get());
  if (m_.nic().poller)
    m_.nic().poller->add(qp);  // its receives complete through the poller
  return {};
}

void WriteReceipts::received(const std::string& node, uint32_t imm) {
  const Key key{node, imm};
  make(key, ReceiptSource::kRdma, 0);
  hand_to_waiter(key);
}

// -- claims -----------------------------------------------------------------------------------

Status WriteReceipts::matches(const Receipt& r, uint64_t receipt, uint64_t buffer, uint64_t offset,
                              uint64_t length) {
  if (r.source == ReceiptSource::kRdma)
    return {};  // the owner knows that it landed, not where (a one-sided write)
  if (r.overflow)
    return Error(ErrorCode::kPermissionDenied,
                 "the write of receipt " + std::to_string(receipt) + " landed in more than " +
                     std::to_string(kMaxReceiptPieces) + " separate ranges or two buffers");
  const bool exact = r.buffer == buffer && r.landed.size() == 1 &&
                     r.landed.begin()->first == offset &&
                     r.landed.begin()->second == offset + length;
  if (exact)
    return {};
  std::string where;
  for (const auto& [b, e] : r.landed)
    where += (where.empty() ? "" : ", ") + range_text(r.buffer, b, e);
  return Error(ErrorCode::kPermissionDenied, "the write of receipt " + std::to_string(receipt) +
                                                 " landed at " + where + ", not at " +
                                                 range_text(buffer, offset, offset + length));
}

void WriteReceipts::claim(const std::string& node, uint64_t receipt, uint64_t buffer,
                          uint64_t offset, uint64_t length, bool direct, Claimed then) {
  if (receipt == 0)  // invariant 5
    return then(Error(ErrorCode::kPermissionDenied,
                      "it names no receipt (a notice is made only for a write its owner saw "
                      "land)"));
  const Key key{node, receipt};
  if (auto it = receipts_.find(key); it != receipts_.end()) {
    Status st = matches(it->second, receipt, buffer, offset, length);
    erase(it);  // invariant 1: claimed once, whatever the answer
    return then(std::move(st));
  }
  // Invariant 2: not here yet (an RDMA receive not polled yet): wait for it, within the
  // budgets of invariant 3.
  auto mine = waiting_per_node_.find(node);
  const uint64_t of_node = mine == waiting_per_node_.end() ? 0 : mine->second;
  const uint64_t share = kMaxPendingNoticesTotal / kIndirectShare;
  std::string full;
  if (waiting_.count(key) != 0)
    full = "another notice already waits for " + receipt_name(node, receipt);
  else if (of_node >= kMaxPendingNotices)
    full = std::to_string(of_node) + " notices of node " + node +
           " wait for their writes' receipts (limit " + std::to_string(kMaxPendingNotices) + ")";
  else if (!direct && waiting_indirect_ >= share)
    full = std::to_string(waiting_indirect_) +
           " notices from nodes not directly connected wait for their writes' receipts (limit " +
           std::to_string(share) + ")";
  else if (waiters_.size() >= kMaxPendingNoticesTotal)
    full = std::to_string(waiters_.size()) + " notices wait for their writes' receipts (limit " +
           std::to_string(kMaxPendingNoticesTotal) + ")";
  if (!full.empty())
    return then(Error(ErrorCode::kResourceExhausted, full));
  ++waiting_per_node_[node];
  if (!direct)
    ++waiting_indirect_;
  const uint64_t id = ++next_waiter_;
  waiting_[key] = id;
  waiters_.emplace(id, Waiter{node, receipt, buffer, offset, length, direct, std::move(then)});
  m_.self()->delayed_send(m_.self(), kReceiptWait, ReceiptDue{id});
  if (m_.nic().poller)
    m_.nic().poller->wake();
}

void WriteReceipts::hand_to_waiter(const Key& key) {
  auto w = waiting_.find(key);
  if (w == waiting_.end())
    return;
  auto it = waiters_.find(w->second);
  if (it == waiters_.end())
    return;
  const Waiter& waiter = it->second;
  auto r = receipts_.find(key);
  // A chunk receipt may still grow; an exact match ends the wait, anything else waits on.
  Status st = matches(r->second, waiter.receipt, waiter.buffer, waiter.offset, waiter.length);
  if (!st.ok() && r->second.source == ReceiptSource::kChunks && !r->second.overflow)
    return;
  erase(r);
  Claimed then = std::move(it->second.then);
  it->second.then = nullptr;
  due(w->second);  // ends the wait (its answer: `st`)
  then(std::move(st));
}

void WriteReceipts::due(uint64_t waiter) {
  auto it = waiters_.find(waiter);
  if (it == waiters_.end())
    return;
  Waiter w = std::move(it->second);
  waiters_.erase(it);
  const Key key{w.node, w.receipt};
  waiting_.erase(key);
  auto n = waiting_per_node_.find(w.node);
  if (n != waiting_per_node_.end() && --n->second == 0)
    waiting_per_node_.erase(n);
  if (!w.direct)
    --waiting_indirect_;
  if (!w.then)
    return;                                                  // handed its receipt already
  if (auto r = receipts_.find(key); r != receipts_.end()) {  // a chunk receipt that differs
    Status st = matches(r->second, w.receipt, w.buffer, w.offset, w.length);
    erase(r);
    return w.then(std::move(st));
  }
  w.then(Error(ErrorCode::kPermissionDenied,
               "no write of " + receipt_name(w.node, w.receipt) + " landed here within " +
                   std::to_string(kReceiptWait.count()) +
                   " ms (a notice is made only for a write its owner saw land)"));
}

}  // namespace caf_rdma::detail
