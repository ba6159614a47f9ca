// Lists of ranges on the stream channel ("CRL1"/"CML2", stream_protocol.h; stream_server.h
// invariant 16, stream_client.h invariant 7) without the manager: the same lists over TCP, over
// the same-host endpoint by cross-memory attach and in-band, every byte checked, bytes outside
// the ranges untouched; a range outside its span refused whole; iov_windows' cuts.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "components/iov_windows.h"
#include "components/same_host.h"
#include "components/stream_client.h"
#include "components/stream_protocol.h"
#include "components/stream_server.h"
#include "tests/components/byte_pattern.h"
#include "tests/components/served.h"

namespace caf_rdma {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kOwnerBytes = 4 << 20;

/// The owner's one buffer, served by handle (secret 1:2) with a `done` per request counted.
struct Owner {
  explicit Owner(uint64_t size = kOwnerBytes) : bytes(filled(size, 3)) {}
  std::vector<uint8_t> bytes;
  std::shared_ptr<std::atomic<int>> done = std::make_shared<std::atomic<int>>(0);
  StreamServer::Authorizer authorizer() {
    return [this](const StreamRequest& req) -> Result<StreamServer::HandleGrant> {
      if (req.handle.secret_hi != 1 || req.handle.secret_lo != 2 ||
          req.handle.offset > bytes.size() || req.length > bytes.size() - req.handle.offset)
        return Error(ErrorCode::kNotFound, "buffer " + std::to_string(req.handle.id) +
                                               " is not served by handle here: ask its manager");
      StreamServer::HandleGrant g;
      g.addr = bytes.data() + req.handle.offset;
      auto d = done;
      g.done = [d](const Status&, uint64_t) { ++*d; };
      return g;
    };
  }
};

/// A stream server with a same-host endpoint serving `owner`'s buffer by handle.
std::unique_ptr<StreamServer> serve(Owner& owner, StreamServer::Limits limits = {}) {
  limits.same_host = true;
  auto server = StreamServer::start("127.0.0.1", limits);
  EXPECT_TRUE(server.ok()) << server.error().to_string();
  if (!server.ok())
    return nullptr;
  (*server)->set_authorizer(owner.authorizer());
  return std::move(*server);
}

/// `count` blocks of `block` bytes: block i of the requester's memory at i * block, of the
/// owner's at a shuffled place (`odd`: every other block one byte shorter, so ranges and the
/// staging buffer's blocks do not line up).
std::vector<ListEntry> scattered(uint32_t count, uint64_t block, bool odd, uint32_t seed,
                                 uint64_t owner_size = kOwnerBytes) {
  std::vector<uint64_t> place(owner_size / block);
  std::iota(place.begin(), place.end(), 0);
  std::shuffle(place.begin(), place.end(), std::mt19937(seed));
  std::vector<ListEntry> e(count);
  for (uint32_t i = 0; i < count; ++i)
    e[i] = ListEntry{place[i] * block, i * block, odd && i % 2 == 1 ? block - 1 : block};
  return e;
}

StreamJob list_job(const StreamServer& server, const std::vector<ListEntry>& entries,
                   StreamDirection d, uint8_t* addr) {
  StreamJob j;
  j.host = server.host();
  j.port = server.port();
  j.unix_name = same_host_endpoint(server.host_id(), server.unix_name());
  j.by_handle = true;
  uint64_t lo = entries[0].offset, hi = 0, total = 0;
  for (const ListEntry& e : entries) {
    lo = std::min(lo, e.offset);
    hi = std::max(hi, e.offset + e.length);
    total += e.length;
  }
  j.handle = HandleAccess{5, 1, 2, lo, 10000};
  j.direction = d;
  j.addr = addr;
  j.length = hi - lo;
  j.entries = entries.data();
  j.count = static_cast<uint32_t>(entries.size());
  j.total = total;
  j.deadline = Clock::now() + 10s;
  return j;
}

/// The first byte of the requester's `mine` and the owner's `theirs` where the list's ranges
/// differ, or where `theirs` outside them differs from pattern `seed`; "" when none.
std::string compare(const std::vector<ListEntry>& entries, const uint8_t* mine,
                    const std::vector<uint8_t>& theirs, uint32_t seed) {
  std::vector<bool> covered(theirs.size(), false);
  for (size_t r = 0; r < entries.size(); ++r) {
    const ListEntry& e = entries[r];
    for (uint64_t k = 0; k < e.length; ++k) {
      covered[e.offset + k] = true;
      if (mine[e.peer_offset + k] != theirs[e.offset + k])
        return "range " + std::to_string(r) + " byte " + std::to_string(k);
    }
  }
  for (uint64_t i = 0; i < theirs.size(); ++i)
    if (!covered[i] && theirs[i] != pattern(i, seed))
      return "owner byte " + std::to_string(i) + " outside the ranges changed";
  return "";
}

/// The most a TCP socket's buffer grows to here by itself (the third of net.ipv4.tcp_`which`).
uint64_t socket_buffer_max(const char* which) {
  std::ifstream f(std::string("/proc/sys/net/ipv4/tcp_") + which);
  uint64_t lo = 0, def = 0, max = 0;
  if (f >> lo >> def >> max)
    return max;
  return 32 << 20;
}

struct Path {
  const char* name;
  bool same_host;     // the client may use the same-host endpoint
  bool cross_memory;  // the server copies by cross-memory attach
};

// One list of each shape on each path, read then written, every byte checked.
TEST(StreamListTest, ListsMoveEveryByteOnEveryPath) {
  for (const Path& p : {Path{"tcp", false, true}, Path{"same-host cross-memory", true, true},
                        Path{"same-host in-band", true, false}}) {
    StreamServer::Limits limits;
    limits.same_host = true;
    limits.cross_memory = p.cross_memory;
    auto server = StreamServer::start("127.0.0.1", limits);
    ASSERT_TRUE(server.ok()) << server.error().to_string();
    Owner owner;
    (*server)->set_authorizer(owner.authorizer());
    StreamClient client(1, nullptr, p.same_host);
    struct Shape {
      uint32_t count;
      uint64_t block;
      bool odd;
    };
    int requests = 0;
    for (const Shape& s : {Shape{1, 4096, false}, Shape{1, 1 << 20, false}, Shape{700, 4096, true},
                           Shape{60, 65536, true}, Shape{3, 16, false}}) {
      SCOPED_TRACE(std::string(p.name) + ": " + std::to_string(s.count) + " x " +
                   std::to_string(s.block));
      const auto entries = scattered(s.count, s.block, s.odd, s.count);
      std::vector<uint8_t> mine(uint64_t{s.count} * s.block, 0);
      StreamEnd end =
          client.run_now(list_job(**server, entries, StreamDirection::kOutOfOwner, mine.data()));
      ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
      EXPECT_EQ(end.same_host, p.same_host);
      EXPECT_EQ(compare(entries, mine.data(), owner.bytes, 3), "");
      mine = filled(mine.size(), 9);
      end = client.run_now(list_job(**server, entries, StreamDirection::kIntoOwner, mine.data()));
      ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
      EXPECT_EQ(compare(entries, mine.data(), owner.bytes, 3), "");
      owner.bytes = filled(kOwnerBytes, 3);
      requests += 2;
    }
    EXPECT_EQ(owner.done->load(), requests);  // each request's hold ended once
    if (p.same_host && p.cross_memory) {
      EXPECT_GT((*server)->cross_memory_served(), 0u);
    }
    if (p.same_host && !p.cross_memory) {
      EXPECT_GT((*server)->inband_served(), 0u);
    }
  }
}

// A table whose range lies outside the span the request was authorized for is refused whole,
// before any byte moves (stream_server.h invariant 16), on both kinds of connection.
TEST(StreamListTest, ARangeOutsideItsSpanIsRefusedWholeNothingMoved) {
  Owner owner;
  auto server = serve(owner);
  ASSERT_TRUE(server);
  for (bool same_host : {false, true}) {
    StreamClient client(1, nullptr, same_host);
    std::vector<ListEntry> entries = scattered(40, 65536, false, 7);
    std::vector<uint8_t> mine = filled(uint64_t{40} * 65536, 11);
    // The span covers the first 39 ranges; the last lies just past it.
    const std::vector<ListEntry> first(entries.begin(), entries.end() - 1);
    StreamJob job = list_job(*server, first, StreamDirection::kIntoOwner, mine.data());
    entries.back().offset = job.handle.offset + job.length;
    job.entries = entries.data();
    job.count = 40;
    job.total += entries.back().length;
    StreamEnd end = client.run_now(job);
    ASSERT_FALSE(end.status.ok());
    EXPECT_EQ(end.status.error().code(), ErrorCode::kInvalidArgument)
        << end.status.error().to_string();
    EXPECT_NE(end.status.error().message().find("range 39 of 40"), std::string::npos)
        << end.status.error().message();
    EXPECT_EQ(compare({}, mine.data(), owner.bytes, 3), "") << "a refused list stored bytes";
  }
}

// stream_protocol.h: the table comes only after the first "go", so a refused list leaves
// nothing unread on the connection: a 16384-range list refused over the same-host endpoint
// ends with the owner's answer (refused, the client may go another way) and the endpoint
// stays in use for the next list.
TEST(StreamListTest, ARefusedLongListKeepsTheSameHostEndpoint) {
  Owner owner;
  auto server = serve(owner);
  ASSERT_TRUE(server);
  StreamClient client(1);
  const auto entries = scattered(kMaxListRanges, 256, false, 5);
  std::vector<uint8_t> mine(uint64_t{kMaxListRanges} * 256, 0);
  StreamJob bad = list_job(*server, entries, StreamDirection::kOutOfOwner, mine.data());
  bad.handle.secret_lo = 3;  // not the buffer's secret
  StreamEnd end = client.run_now(bad);
  ASSERT_FALSE(end.status.ok());
  EXPECT_TRUE(end.refused) << end.status.error().to_string();
  EXPECT_TRUE(end.same_host);
  EXPECT_NE(end.status.error().message().find("ask its manager"), std::string::npos)
      << end.status.error().message();
  end = client.run_now(list_job(*server, entries, StreamDirection::kOutOfOwner, mine.data()));
  ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
  EXPECT_TRUE(end.same_host) << "the refusal made the client give up the same-host endpoint";
  EXPECT_EQ(compare(entries, mine.data(), owner.bytes, 3), "");
}

// stream_server.h invariant 16 (14 for lists): a list whose buffer is released while its peer
// stalls (before sending the table, or mid-way through the bytes either way) lets the release
// go at once (`done` with released), touches the memory no more, and answers in step.
TEST(StreamListTest, AListWithdrawnWhileItsPeerStallsLetsTheReleaseGo) {
  StreamServer::Limits limits;
  limits.stall_timeout = std::chrono::seconds(600);  // only the withdrawal ends a wait below
  auto started = StreamServer::start("127.0.0.1", limits);
  ASSERT_TRUE(started.ok()) << started.error().to_string();
  StreamServer& server = **started;
  enum class Stall { kBeforeTable, kMidRead, kMidWrite };
  // A list larger than the kernel can hold between the two sockets (the owner's send buffer and
  // the requester's receive buffer both at their largest): a reader that reads nothing stalls
  // the owner for certain, whatever the scheduling (a 4 MiB list once fitted, and was `done`).
  constexpr uint64_t kBlock = 65536;
  const uint64_t owner_size = std::max<uint64_t>(
      kOwnerBytes, 2 * (socket_buffer_max("wmem") + socket_buffer_max("rmem")) + (4 << 20));
  const auto count = static_cast<uint32_t>(owner_size / kBlock);
  for (Stall stall : {Stall::kBeforeTable, Stall::kMidRead, Stall::kMidWrite}) {
    SCOPED_TRACE(static_cast<int>(stall));
    Owner owner(owner_size);
    auto withdrawal = std::make_shared<std::atomic<bool>>(false);
    Served done;
    server.set_authorizer([&](const StreamRequest& req) -> Result<StreamServer::HandleGrant> {
      StreamServer::HandleGrant g;
      g.addr = owner.bytes.data() + req.handle.offset;
      g.withdrawal = withdrawal;
      g.done = done.handle_fn();
      return g;
    });
    const bool write = stall == Stall::kMidWrite;
    const auto entries = scattered(count, kBlock, false, 9, owner_size);
    StreamJob job =
        list_job(server, entries,
                 write ? StreamDirection::kIntoOwner : StreamDirection::kOutOfOwner, nullptr);
    StreamRequest r{job.direction, 0, job.length};
    r.by_handle = true;
    r.handle = job.handle;
    r.handle.timeout_ms = 60000;  // 76 MiB move under asan: only the withdrawal ends a wait
    r.list = true;
    r.count = job.count;
    r.total = job.total;
    r.entries = entries.data();
    // Made before the request: its deadline runs from there, and filling 76 MiB under asan
    // takes seconds.
    const std::vector<uint8_t> src = write ? filled(job.total, 12) : std::vector<uint8_t>();
    auto c = connect_tcp(server.host(), server.port(), Clock::now() + 10s);
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    Socket s = std::move(*c);
    ASSERT_TRUE(write_request(s, r, Clock::now() + 10s).ok());
    auto go = read_status(s, Clock::now() + 10s, "go");
    ASSERT_TRUE(go.ok() && go->ok());
    constexpr uint64_t kPart = (1 << 20) + 3;
    if (stall != Stall::kBeforeTable) {
      ASSERT_TRUE(write_list_table(s, r, Clock::now() + 10s).ok());
      auto go2 = read_status(s, Clock::now() + 10s, "go");
      ASSERT_TRUE(go2.ok() && go2->ok());
      if (write) {
        ASSERT_TRUE(send_all(s, src.data(), kPart, Clock::now() + 10s, "bytes").ok());
      }
      // A reader reads nothing: the owner fills the socket's buffers and waits.
    }
    withdrawal->store(true);
    auto [st, bytes] = done.wait(std::chrono::seconds(30));
    ASSERT_FALSE(st.ok()) << "the withdrawn list was reported done";
    ASSERT_EQ(st.error().code(), ErrorCode::kReleased)
        << st.error().to_string() << " (the release waited for the stalled peer)";
    const std::vector<uint8_t> at_done = owner.bytes;
    // The rest of the exchange, in step.
    if (stall == Stall::kBeforeTable) {
      ASSERT_TRUE(write_list_table(s, r, Clock::now() + 10s).ok());
    } else if (write) {
      ASSERT_TRUE(
          send_all(s, src.data() + kPart, job.total - kPart, Clock::now() + 60s, "bytes").ok());
    } else {
      std::vector<uint8_t> got(job.total);
      ASSERT_TRUE(recv_all(s, got.data(), got.size(), Clock::now() + 60s, "bytes").ok());
    }
    auto end = read_status(s, Clock::now() + 10s, "end");
    ASSERT_TRUE(end.ok()) << end.error().to_string();
    ASSERT_FALSE(end->ok());
    EXPECT_EQ(end->error().code(), ErrorCode::kReleased) << end->error().to_string();
    EXPECT_TRUE(owner.bytes == at_done) << "the owner's memory changed after `done`";
  }
}

// The owner's checks of a list request's header and table (stream_protocol.h), on the bytes.
TEST(StreamListTest, TheOwnerRefusesTablesThatDoNotAddUp) {
  uint8_t head[kMaxRequestBytes] = {};
  StreamRequest r;
  r.by_handle = true;
  r.list = true;
  r.direction = StreamDirection::kOutOfOwner;
  r.handle = HandleAccess{5, 1, 2, 4096, 1000};
  r.length = 65536;
  auto parsed_with_count = [&](uint32_t count) {
    const uint8_t magic[4] = {'C', 'R', 'L', '1'};
    std::memcpy(head, magic, sizeof(magic));
    store_le(head + 4, static_cast<uint32_t>(r.direction), 4);
    store_le(head + 8, r.length, 8);
    store_le(head + 40, r.handle.offset, 8);
    store_le(head + kHandleRequestBytes, count, 4);
    store_le(head + kHandleRequestBytes + 4, 4096, 8);
    return parse_request(head);
  };
  EXPECT_EQ(request_bytes(head), kRequestBytes);  // before the magic is written
  EXPECT_FALSE(parsed_with_count(0).ok());
  EXPECT_FALSE(parsed_with_count(kMaxListRanges + 1).ok());
  auto ok = parsed_with_count(2);
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  EXPECT_TRUE(ok->list);
  EXPECT_EQ(ok->count, 2u);
  EXPECT_EQ(request_bytes(head), kListRequestBytes);
  // Tables: [offset, peer offset, length] x 2, against span [4096, 69632) and a total.
  auto table = [&](uint64_t total, std::vector<ListEntry> e) {
    StreamRequest q = r;
    q.count = static_cast<uint32_t>(e.size());
    q.total = total;
    std::vector<uint8_t> raw(list_table_bytes(q));
    for (size_t i = 0; i < e.size(); ++i) {
      store_le(raw.data() + 24 * i, e[i].offset, 8);
      store_le(raw.data() + 24 * i + 8, e[i].peer_offset, 8);
      store_le(raw.data() + 24 * i + 16, e[i].length, 8);
    }
    return parse_list_table(raw.data(), q);
  };
  EXPECT_TRUE(table(8192, {{4096, 0, 4096}, {65536, 4096, 4096}}).ok());
  EXPECT_FALSE(table(8192, {{4096, 0, 4096}, {65537, 4096, 4096}}).ok());  // past the span
  EXPECT_FALSE(table(8192, {{0, 0, 4096}, {8192, 4096, 4096}}).ok());      // before it
  EXPECT_FALSE(table(8192, {{4096, 0, 4096}, {8192, 4096, 0}}).ok());      // empty
  EXPECT_FALSE(table(8000, {{4096, 0, 4096}, {8192, 4096, 4096}}).ok());   // past the total
  EXPECT_FALSE(table(9000, {{4096, 0, 4096}, {8192, 4096, 4096}}).ok());   // short of it
  EXPECT_FALSE(table(70000, {{4096, 0, 65536}, {4096, 0, 4464}}).ok());    // > the span
  EXPECT_FALSE(table(8192, {{~uint64_t{0} - 10, 0, 4096}, {8192, 0, 4096}}).ok());  // wraps
}

// iov_windows.h invariants 1-2: windows keep to their budgets, and a partial count is a place
// in the list from which the rest follows.
TEST(IovWindowsTest, WindowsKeepTheirBudgetsAndResumeMidRange) {
  std::vector<uint8_t> local(10000);
  std::vector<CopySpan> spans;
  for (uint64_t i = 0; i < 10; ++i)
    spans.push_back(CopySpan{local.data() + i * 1000, 0x100000 + i * 3000, 1000});
  IovWindows w(spans.data(), spans.size());
  std::vector<iovec> mine, theirs;
  // The local side touches from range to range: one entry; the remote side does not.
  EXPECT_EQ(w.fill(SpanCursor{}, 2500, 1024, mine, theirs), 2500u);
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0].iov_len, 2500u);
  ASSERT_EQ(theirs.size(), 3u);
  EXPECT_EQ(theirs[2].iov_len, 500u);
  EXPECT_EQ(theirs[2].iov_base, reinterpret_cast<void*>(0x100000 + 2 * 3000));
  EXPECT_EQ(w.fill(SpanCursor{}, 100000, 4, mine, theirs), 4000u);
  EXPECT_EQ(theirs.size(), 4u);
  SpanCursor at = w.advance(SpanCursor{}, 2500);
  EXPECT_EQ(at.index, 2u);
  EXPECT_EQ(at.offset, 500u);
  EXPECT_EQ(w.fill(at, 100000, 1024, mine, theirs), 7500u);
  EXPECT_EQ(mine[0].iov_base, local.data() + 2500);
  EXPECT_EQ(mine[0].iov_len, 7500u);
  EXPECT_EQ(theirs[0].iov_base, reinterpret_cast<void*>(0x100000 + 2 * 3000 + 500));
  at = w.advance(at, 7500);
  EXPECT_EQ(at.index, 10u);
  EXPECT_EQ(w.fill(at, 100000, 1024, mine, theirs), 0u);
}

}  // namespace
}  // namespace caf_rdma
