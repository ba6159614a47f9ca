// cancel_atom at the manager (actors/cancel_request.h; manager invariant 24), as an actor sends
// it, on each of the manager's paths of the transport under test: natively its stream job over
// TCP and over the owner's same-host endpoint, and CAF chunks; in the VM its RDMA path. A
// transfer cancelled once its first bytes landed answers `cancelled` (or, finished first, its
// own success with every byte), after which no byte of the destination changes for a second and
// every byte is untouched or the source's; what a chunked write says was stored is in place. A
// cancelled notify write notifies nobody; a list an actor asked stops; a cancel after the answer,
// or naming no request, changes nothing. RdmaClient's CancelToken reaches the manager's paths
// too (the chunks).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "actors/cancel_request.h"
#include "actors/cancel_token.h"
#include "actors/rdma_client.h"
#include "tests/actors/cancel_checks.h"
#include "tests/actors/two_node_test.h"

namespace caf_rdma::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

/// The transfer's time: long enough never to be what ends it.
constexpr uint32_t kLongMs = 60000;

/// An actor's request `xs...` to `node`'s manager, cancelled (cancel_request) once the first
/// bytes at `watch` landed (null: right after it was asked), and its answer; `ms`: from the
/// cancel to the answer.
template <class T, class... Ts>
caf::expected<T> ask_and_cancel(TestNode& node, const uint8_t* watch, double* ms, Ts&&... xs) {
  caf::scoped_actor self{node.node().system()};
  auto handle = self->request(node.manager(), seconds(120), std::forward<Ts>(xs)...);
  if (watch != nullptr)
    wait_for_first_bytes(watch, [&] { return !self->mailbox().empty(); });
  const auto asked = std::chrono::steady_clock::now();
  cancel_request(caf::actor_cast<caf::actor>(self), node.manager(), handle.id());
  caf::expected<T> out{caf::make_error(caf::sec::unexpected_response, "no answer")};
  handle.receive([&](T& value) { out = std::move(value); },
                 [&](caf::error& err) { out = std::move(err); });
  *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - asked).count();
  return out;
}

/// "N of its M bytes were stored" in a cancelled chunked write's message: N (none: not said).
std::optional<uint64_t> stored_of(const std::string& message) {
  const size_t at = message.find(" of its ");
  if (at == std::string::npos)
    return std::nullopt;
  size_t begin = at;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(message[begin - 1])) != 0)
    --begin;
  if (begin == at)
    return std::nullopt;
  return std::stoull(message.substr(begin, at - begin));
}

/// The manager's paths of the transport under test, and the options that take each.
struct ManagerWay {
  const char* name;
  ManagerOptions options;
};

std::vector<ManagerWay> manager_ways() {
  if (expected_path() == kPathRdma)
    return {{"rdma", ManagerOptions{}}};
  ManagerWay tcp{"stream over TCP", ManagerOptions{}};
  tcp.options.same_host = false;
  ManagerWay same_host{"stream, same-host endpoint", ManagerOptions{}};
  same_host.options.same_host = true;
  ManagerWay chunks{"CAF chunks", ManagerOptions{}};
  chunks.options.stream_min_bytes = 0;  // no stream channel: the manager's chunks
  return {tcp, same_host, chunks};
}

/// Natively 64 MiB (tens of milliseconds on the stream channel, longer in chunks); in the VM
/// 16 MiB (a quarter of a second on its emulated NIC).
uint64_t transfer_bytes() {
  return expected_path() == kPathRdma ? 16ull << 20 : 64ull << 20;
}

class ManagerCancelTest : public TwoNodeTest {};

TEST_F(ManagerCancelTest, AnActorsCancelStopsATransferOnEachOfTheManagersPaths) {
  const uint64_t n = transfer_bytes();
  for (const ManagerWay& way : manager_ways()) {
    SCOPED_TRACE(way.name);
    ASSERT_TRUE(restart(way.options));
    Memory theirs_out(n, 12), theirs_in(n, 0), mine(n, 0);
    BufferHandle out_of = remote_view(*owner_, *user_, theirs_out, "mcancel-out");
    BufferHandle into = remote_view(*owner_, *user_, theirs_in, "mcancel-in");
    auto local = user_->request_buffer(mine);
    ASSERT_TRUE(local) << error_message(local.error());
    ASSERT_TRUE(user_->transfer(make_read(*local, out_of, Range::of(8))));  // warm: QP, endpoint
    int cancelled = 0;
    for (bool push : {false, true}) {
      SCOPED_TRACE(push ? "write" : "read");
      Memory& dest = push ? theirs_in : mine;
      const uint32_t seed = arrange_direction(dest, mine, push);
      const TransferOp op = push ? make_write(*local, into, Range::whole())
                                 : make_read(*local, out_of, Range::whole());
      double ms = 0;
      auto got = ask_and_cancel<TransferReply>(*user_, dest.bytes.data(), &ms, transfer_atom::value,
                                               op, kLongMs);
      std::printf("%s, %s of %llu bytes: answered %.2f ms after the cancel: %s\n", way.name,
                  push ? "write" : "read", static_cast<unsigned long long>(n), ms,
                  got ? "done" : error_message(got.error()).c_str());
      if (got) {  // finished before the cancel reached it: every byte
        EXPECT_TRUE(holds_pattern(dest, 0, n, seed, 0));
        continue;
      }
      ASSERT_EQ(error_code(got.error()), ErrorCode::kCancelled) << error_message(got.error());
      expect_still(dest, push ? "the remote buffer" : "the local buffer");
      uint64_t landed = 0;
      ASSERT_TRUE(only_untouched_or_source(dest, seed, &landed));
      if (auto stored = stored_of(error_message(got.error())))  // a chunked write says it
        EXPECT_TRUE(holds_pattern(dest, 0, *stored, seed, 0));
      ++cancelled;
    }
    // Stopped mid-way at least once: the transfers take tens of milliseconds at least.
    EXPECT_GE(cancelled, 1) << "no transfer was cancelled";
    // The manager goes on: the next read moves every byte.
    mine.bytes.assign(n, 0);
    auto again = user_->transfer(make_read(*local, out_of, Range::whole()));
    ASSERT_TRUE(again) << error_message(again.error());
    EXPECT_TRUE(holds_pattern(mine, 0, n, 12, 0));
    EXPECT_TRUE(owner_->release(out_of.id));
    EXPECT_TRUE(owner_->release(into.id));
  }
}

// Two actors' reads from one owner at once (over RDMA on the managers' one queue pair): the
// first cancelled once its bytes start landing never fails the second, which moves every byte;
// the first answers `cancelled` or, where it could not stop alone (RDMA: a shared queue pair
// is not flushed for a cancel, rdma_path.h invariant 12), its own success.
TEST_F(ManagerCancelTest, ACancelNeverFailsAnotherTransfer) {
  const uint64_t n = transfer_bytes();
  Memory theirs(n, 31), first(n, 0), second(n, 0);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "mcancel-shared");
  auto first_local = user_->request_buffer(first);
  auto second_local = user_->request_buffer(second);
  ASSERT_TRUE(first_local && second_local);
  ASSERT_TRUE(user_->transfer(make_read(*first_local, remote, Range::of(8))));  // warm
  first.bytes.assign(n, 0);
  caf::scoped_actor other{user_->node().system()};
  auto second_asked = other->request(user_->manager(), seconds(120), transfer_atom::value,
                                     make_read(*second_local, remote, Range::whole()), kLongMs);
  double ms = 0;
  auto got =
      ask_and_cancel<TransferReply>(*user_, first.bytes.data(), &ms, transfer_atom::value,
                                    make_read(*first_local, remote, Range::whole()), kLongMs);
  std::printf("the cancelled read: %s\n", got ? "done" : error_message(got.error()).c_str());
  bool second_ok = false;
  second_asked.receive([&](TransferReply&) { second_ok = true; },
                       [&](caf::error& err) { ADD_FAILURE() << error_message(err); });
  ASSERT_TRUE(second_ok) << "the other transfer failed";
  EXPECT_TRUE(holds_pattern(second, 0, n, 31, 0));
  if (got) {
    EXPECT_TRUE(holds_pattern(first, 0, n, 31, 0));
  } else {
    ASSERT_EQ(error_code(got.error()), ErrorCode::kCancelled) << error_message(got.error());
    expect_still(first, "the cancelled read's buffer");
    uint64_t landed = 0;
    ASSERT_TRUE(only_untouched_or_source(first, 31, &landed));
  }
}

// A cancelled read beside another transfer's notify write to the same owner (over RDMA on the
// same queue pair, whose fence follows the write there): the write's notice still reaches the
// watcher once, and the write answers its success.
TEST_F(ManagerCancelTest, ACancelNeverFailsAnotherTransfersNotice) {
  const uint64_t n = transfer_bytes();
  Memory theirs(n, 41), target(n, 0), mine(n, 0), src(n, 42);
  BufferHandle out_of = remote_view(*owner_, *user_, theirs, "mcancel-notice-out");
  BufferHandle into = remote_view(*owner_, *user_, target, "mcancel-notice-in");
  RdmaClient owner_client(owner_->node().system(), owner_->manager());
  ASSERT_TRUE(owner_client.watch_writes(into.id).ok());
  auto local = user_->request_buffer(mine);
  auto source = user_->request_buffer(src);
  ASSERT_TRUE(local && source);
  ASSERT_TRUE(user_->transfer(make_read(*local, out_of, Range::of(8))));  // warm
  mine.bytes.assign(n, 0);
  caf::scoped_actor writer{user_->node().system()};
  auto written = writer->request(user_->manager(), seconds(120), transfer_atom::value,
                                 make_notify_write(*source, into, 77, Range::whole()), kLongMs);
  double ms = 0;
  auto got = ask_and_cancel<TransferReply>(*user_, mine.bytes.data(), &ms, transfer_atom::value,
                                           make_read(*local, out_of, Range::whole()), kLongMs);
  std::printf("the cancelled read: %s\n", got ? "done" : error_message(got.error()).c_str());
  bool ok = false;
  written.receive([&](TransferReply&) { ok = true; },
                  [&](caf::error& err) { ADD_FAILURE() << error_message(err); });
  ASSERT_TRUE(ok) << "the notify write failed";
  EXPECT_TRUE(holds_pattern(target, 0, n, 42, 0));
  auto notice = owner_client.next_notice(seconds(10));
  ASSERT_TRUE(notice.ok()) << notice.error().to_string();
  EXPECT_EQ(notice->tag, 77u);
  if (!got) {
    ASSERT_EQ(error_code(got.error()), ErrorCode::kCancelled) << error_message(got.error());
    expect_still(mine, "the cancelled read's buffer");
    uint64_t landed = 0;
    ASSERT_TRUE(only_untouched_or_source(mine, 41, &landed));
  } else {
    EXPECT_TRUE(holds_pattern(mine, 0, n, 41, 0));
  }
}

// A notify write cancelled at once, or once its first bytes landed: a `cancelled` one notifies
// nobody (its bytes may have landed: the answer says so), a finished one exactly once.
TEST_F(ManagerCancelTest, ACancelledNotifyWriteNotifiesNobody) {
  const uint64_t n = 8 << 20;
  Memory target(n, 0);
  BufferHandle remote = remote_view(*owner_, *user_, target, "mcancel-notified");
  RdmaClient owner_client(owner_->node().system(), owner_->manager());
  ASSERT_TRUE(owner_client.watch_writes(remote.id).ok());
  Memory src(n, 5);
  auto local = user_->request_buffer(src);
  ASSERT_TRUE(local) << error_message(local.error());
  int cancelled = 0;
  for (uint64_t round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::fill(target.bytes.begin(), target.bytes.end(), 0);
    const TransferOp op = make_notify_write(*local, remote, 100 + round, Range::whole());
    double ms = 0;
    auto got = ask_and_cancel<TransferReply>(*user_, round % 2 == 0 ? nullptr : target.bytes.data(),
                                             &ms, transfer_atom::value, op, kLongMs);
    std::printf("notify write, cancelled %s: %s\n", round % 2 == 0 ? "at once" : "once landing",
                got ? "done" : error_message(got.error()).c_str());
    if (got) {
      auto notice = owner_client.next_notice(seconds(10));
      ASSERT_TRUE(notice.ok()) << notice.error().to_string();
      EXPECT_EQ(notice->tag, 100 + round);
      EXPECT_TRUE(holds_pattern(target, 0, n, 5, 0));
      continue;
    }
    ASSERT_EQ(error_code(got.error()), ErrorCode::kCancelled) << error_message(got.error());
    expect_still(target, "the notified buffer");
    uint64_t landed = 0;
    ASSERT_TRUE(only_untouched_or_source(target, 5, &landed));
    auto none = owner_client.next_notice(milliseconds(500));
    ASSERT_FALSE(none.ok()) << "a cancelled notify write notified its watcher (tag " << none->tag
                            << ")";
    EXPECT_EQ(none.error().code(), ErrorCode::kTimeout);
    ++cancelled;
  }
  EXPECT_GE(cancelled, 1) << "no notify write was cancelled";
}

// A list an actor asked (its worker's steps), cancelled once its first ranges landed: the
// outcome says how many landed, those are in place, and after `cancelled` nothing changes.
TEST_F(ManagerCancelTest, AnActorsCancelledListSaysWhatLanded) {
  const uint64_t block = 16384, blocks = transfer_bytes() / block, n = blocks * block;
  Memory theirs(n, 11);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "mcancel-list");
  Memory mine(n, 0);
  auto local = user_->request_buffer(mine);
  ASSERT_TRUE(local) << error_message(local.error());
  std::vector<uint64_t> place(blocks);
  std::iota(place.begin(), place.end(), 0);
  std::shuffle(place.begin(), place.end(), std::mt19937(5));
  TransferListMsg list;
  list.kind = static_cast<uint8_t>(TransferKind::kRead);
  list.local = *local;
  list.remote = remote;
  for (uint64_t i = 0; i < blocks; ++i)
    list.ranges.push_back(ListRange{i * block, place[i] * block, block});
  double ms = 0;
  auto got = ask_and_cancel<ListOutcome>(*user_, mine.bytes.data(), &ms, transfer_list_atom::value,
                                         list, kLongMs);
  ASSERT_TRUE(got) << error_message(got.error());
  std::printf("list of %llu ranges: answered %.2f ms after the cancel: %llu landed, %s\n",
              static_cast<unsigned long long>(blocks), ms,
              static_cast<unsigned long long>(got->landed), got->message.c_str());
  if (!got->ok()) {
    EXPECT_EQ(got->code, static_cast<uint8_t>(ErrorCode::kCancelled)) << got->message;
    expect_still(mine, "the local buffer");
  } else {
    EXPECT_EQ(got->landed, blocks);
  }
  for (uint64_t r = 0; r < got->landed; ++r)
    ASSERT_EQ(std::memcmp(&mine.bytes[r * block], &theirs.bytes[place[r] * block], block), 0)
        << "range " << r << " of the " << got->landed << " reported landed differs";
  EXPECT_EQ(got->bytes, got->landed * block);
}

// A cancel that comes after the answer, or names a request its sender never asked, changes
// nothing: the sender's next transfer moves every byte.
TEST_F(ManagerCancelTest, ACancelAfterTheAnswerChangesNothing) {
  const uint64_t n = 1 << 20;
  Memory theirs(n, 21), mine(n, 0);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "mcancel-late");
  auto local = user_->request_buffer(mine);
  ASSERT_TRUE(local) << error_message(local.error());
  caf::scoped_actor self{user_->node().system()};
  auto first = self->request(user_->manager(), seconds(60), transfer_atom::value,
                             make_read(*local, remote, Range::whole()), kLongMs);
  const caf::message_id first_id = first.id();
  bool ok = false;
  first.receive([&](TransferReply&) { ok = true; },
                [&](caf::error& err) { ADD_FAILURE() << error_message(err); });
  ASSERT_TRUE(ok);
  EXPECT_TRUE(holds_pattern(mine, 0, n, 21, 0));
  cancel_request(caf::actor_cast<caf::actor>(self), user_->manager(), first_id);
  cancel_request(caf::actor_cast<caf::actor>(self), user_->manager(),
                 caf::make_message_id(987654321));
  mine.bytes.assign(n, 0);
  ok = false;
  self->request(user_->manager(), seconds(60), transfer_atom::value,
                make_read(*local, remote, Range::whole()), kLongMs)
      .receive([&](TransferReply&) { ok = true; },
               [&](caf::error& err) { ADD_FAILURE() << error_message(err); });
  ASSERT_TRUE(ok);
  EXPECT_TRUE(holds_pattern(mine, 0, n, 21, 0));
}

// RdmaClient's CancelToken on a transfer the manager moves (natively, with no stream channel:
// its CAF chunks; over RDMA the client's direct lane has it, cancel_test.cc): the cancel and the
// transfer agree, and after kCancelled nothing lands.
TEST_F(ManagerCancelTest, AClientsTokenStopsATransferTheManagerMoves) {
  if (expected_path() == kPathRdma)
    return;  // the direct lane's: cancel_test.cc
  ManagerOptions chunks;
  chunks.stream_min_bytes = 0;
  ASSERT_TRUE(restart(chunks));
  const uint64_t n = transfer_bytes();
  RdmaClient me(user_->node().system(), user_->manager());
  Memory theirs_out(n, 12), theirs_in(n, 0), mine(n, 0);
  BufferHandle out_of = remote_view(*owner_, *user_, theirs_out, "mcancel-token-out");
  BufferHandle into = remote_view(*owner_, *user_, theirs_in, "mcancel-token-in");
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  int cancelled = 0;
  for (bool push : {false, true}) {
    SCOPED_TRACE(push ? "write" : "read");
    Memory& dest = push ? theirs_in : mine;
    const uint32_t seed = arrange_direction(dest, mine, push);
    Result<TransferReply> got = Error(ErrorCode::kInternal, "not run");
    double ms = 0;
    CancelResult c =
        move_and_cancel(me, push, local->handle(), push ? into : out_of, dest, &got, &ms);
    std::printf("chunks, %s: cancel answered in %.2f ms: %s\n", push ? "write" : "read", ms,
                c.to_string().c_str());
    ASSERT_NE(c.state, CancelResult::State::kStillRunning);
    ASSERT_NE(c.state, CancelResult::State::kNotStarted);
    EXPECT_EQ(got.ok(), c.status.ok());
    if (got.ok()) {
      EXPECT_TRUE(holds_pattern(dest, 0, n, seed, 0));
      continue;
    }
    ASSERT_EQ(got.error().code(), ErrorCode::kCancelled) << got.error().to_string();
    expect_still(dest, push ? "the remote buffer" : "the local buffer");
    uint64_t landed = 0;
    ASSERT_TRUE(only_untouched_or_source(dest, seed, &landed));
    ++cancelled;
  }
  EXPECT_GE(cancelled, 1) << "no transfer was cancelled";
}

// RdmaClient's async calls with a token (transfer_async, read_async, write_async, post_async:
// the manager moves them, on each of its paths here): a token cancelled first moves nothing and
// answers `cancelled` at once; cancelled once the first bytes landed, the future and the cancel
// agree, and after `cancelled` nothing lands; a cancelled list says what landed, and it did.
TEST_F(ManagerCancelTest, AClientsAsyncTransfersAndListsStopWithTheirToken) {
  const uint64_t n = transfer_bytes();
  for (const ManagerWay& way : manager_ways()) {
    SCOPED_TRACE(way.name);
    ASSERT_TRUE(restart(way.options));
    RdmaClient me(user_->node().system(), user_->manager());
    Memory theirs_out(n, 12), theirs_in(n, 0), mine(n, 0);
    BufferHandle out_of = remote_view(*owner_, *user_, theirs_out, "mcancel-async-out");
    BufferHandle into = remote_view(*owner_, *user_, theirs_in, "mcancel-async-in");
    auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
    ASSERT_TRUE(local.ok()) << local.error().to_string();
    {  // CancelToken invariant 3: cancelled before it was asked, nothing moves
      CancelToken first;
      EXPECT_EQ(first.cancel(milliseconds(10)).state, CancelResult::State::kNotStarted);
      auto r = me.read_async(local->handle(), out_of, Range::whole(), seconds(60), first).get();
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().code(), ErrorCode::kCancelled) << r.error().to_string();
      EXPECT_TRUE(
          std::all_of(mine.bytes.begin(), mine.bytes.end(), [](uint8_t b) { return b == 0; }));
      EXPECT_EQ(first.cancel(milliseconds(10)).state, CancelResult::State::kCancelled);
    }
    int cancelled = 0;
    for (bool push : {false, true}) {
      SCOPED_TRACE(push ? "write" : "read");
      Memory& dest = push ? theirs_in : mine;
      const uint32_t seed = arrange_direction(dest, mine, push);
      CancelToken token;
      auto future =
          push ? me.write_async(local->handle(), into, Range::whole(), seconds(60), token)
               : me.read_async(local->handle(), out_of, Range::whole(), seconds(60), token);
      wait_for_first_bytes(dest.bytes.data(), [&] {
        return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
      });
      const CancelResult c = token.cancel(seconds(120));
      ASSERT_EQ(future.wait_for(seconds(10)), std::future_status::ready);
      const Result<TransferReply> got = future.get();
      std::printf("%s, async %s: %s\n", way.name, push ? "write" : "read", c.to_string().c_str());
      ASSERT_NE(c.state, CancelResult::State::kStillRunning);
      EXPECT_EQ(got.ok(), c.status.ok());
      if (got.ok()) {
        EXPECT_EQ(c.state, CancelResult::State::kFinished);
        EXPECT_TRUE(holds_pattern(dest, 0, n, seed, 0));
        continue;
      }
      ASSERT_EQ(got.error().code(), ErrorCode::kCancelled) << got.error().to_string();
      EXPECT_EQ(c.state, CancelResult::State::kCancelled);
      expect_still(dest, push ? "the remote buffer" : "the local buffer");
      uint64_t landed = 0;
      ASSERT_TRUE(only_untouched_or_source(dest, seed, &landed));
      ++cancelled;
    }
    EXPECT_GE(cancelled, 1) << "no async transfer was cancelled";
    // A list through post_async, cancelled once its first ranges landed.
    const uint64_t block = 16384, blocks = n / block;
    std::vector<ListRange> ranges;
    for (uint64_t i = 0; i < blocks; ++i)
      ranges.push_back(ListRange{i * block, (blocks - 1 - i) * block, block});
    auto plan = me.prepare(TransferKind::kRead, local->handle(), out_of, std::move(ranges));
    ASSERT_TRUE(plan.ok()) << plan.error().to_string();
    mine.bytes.assign(n, 0);
    CancelToken token;
    auto listed = me.post_async(*plan, seconds(60), token);
    wait_for_first_bytes(mine.bytes.data(), [&] {
      return listed.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    });
    const CancelResult c = token.cancel(seconds(120));
    ASSERT_EQ(listed.wait_for(seconds(10)), std::future_status::ready);
    const ListOutcome out = listed.get();
    std::printf("%s, async list of %llu ranges: %llu landed, %s\n", way.name,
                static_cast<unsigned long long>(blocks),
                static_cast<unsigned long long>(out.landed), out.message.c_str());
    EXPECT_EQ(out.ok(), c.status.ok());
    EXPECT_EQ(out.landed, c.landed);
    if (!out.ok()) {
      EXPECT_EQ(out.code, static_cast<uint8_t>(ErrorCode::kCancelled)) << out.message;
      expect_still(mine, "the local buffer");
    } else {
      EXPECT_EQ(out.landed, blocks);
    }
    for (uint64_t r = 0; r < out.landed; ++r)
      ASSERT_EQ(
          std::memcmp(&mine.bytes[r * block], &theirs_out.bytes[(blocks - 1 - r) * block], block),
          0)
          << "range " << r << " of the " << out.landed << " reported landed differs";
    EXPECT_TRUE(owner_->release(out_of.id));
    EXPECT_TRUE(owner_->release(into.id));
  }
}

}  // namespace
}  // namespace caf_rdma::testing
