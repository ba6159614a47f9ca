// The stream channel's same-host endpoint (stream_server.h invariants 11-12, stream_client.h
// invariant 5, same_host.h, cross_memory.h) without the manager: grants and requests by handle
// over the AF_UNIX endpoint, the bytes moved by cross-memory attach and, forced with the test
// hook Limits::cross_memory = false, in-band; every byte checked; the same answers as over
// TCP; another uid refused; same_host off and an unreachable endpoint take TCP; a listener of
// another uid on an owner's endpoint name gets nothing (same_host.h invariant 5).
#include <gtest/gtest.h>

#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <vector>

#include "components/same_host.h"
#include "components/stream_client.h"
#include "components/stream_protocol.h"
#include "components/stream_server.h"
#include "tests/components/byte_pattern.h"
#include "tests/components/unserved_range.h"

namespace caf_rdma {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

/// Checks every byte of `v` against pattern(seed); the first difference as text.
std::string first_difference(const uint8_t* v, uint64_t n, uint32_t seed) {
  for (uint64_t i = 0; i < n; ++i)
    if (v[i] != pattern(i, seed))
      return "byte " + std::to_string(i) + " of " + std::to_string(n);
  return "";
}

std::unique_ptr<StreamServer> start_server(bool cross_memory = true) {
  StreamServer::Limits limits;
  limits.same_host = true;
  limits.cross_memory = cross_memory;
  auto s = StreamServer::start("127.0.0.1", limits);
  EXPECT_TRUE(s.ok()) << s.error().to_string();
  return s.ok() ? std::move(*s) : nullptr;
}

/// A grant of [addr, addr + n) whose `done` reports (status, whether `check` held then).
struct Grant {
  uint64_t token = 0;
  std::shared_ptr<std::promise<std::pair<Status, bool>>> done =
      std::make_shared<std::promise<std::pair<Status, bool>>>();
  std::pair<Status, bool> wait() {
    auto f = done->get_future();
    if (f.wait_for(10s) != std::future_status::ready)
      return {Error(ErrorCode::kTimeout, "the grant never finished (10 s)"), false};
    return f.get();
  }
};

Grant grant(
    StreamServer& server, uint8_t* addr, uint64_t n, StreamDirection d,
    const std::function<bool()>& check = [] { return true; }) {
  Grant g;
  auto p = g.done;
  g.token = server.grant(addr, n, d, Clock::now() + 10s,
                         [p, check](uint64_t, const Status& st, uint64_t) {
                           p->set_value({st, check()});
                         });
  return g;
}

StreamJob job_for(const StreamServer& server, uint64_t token, StreamDirection d, uint8_t* addr,
                  uint64_t n) {
  StreamJob j;
  j.host = server.host();
  j.port = server.port();
  j.unix_name = same_host_endpoint(server.host_id(), server.unix_name());
  j.token = token;
  j.direction = d;
  j.addr = addr;
  j.length = n;
  j.deadline = Clock::now() + 10s;
  return j;
}

TEST(SameHostTest, TheHostIdentityNamesBootAndNetworkNamespace) {
  // same_host.h invariant 1.
  ASSERT_FALSE(host_identity().empty());
  EXPECT_NE(host_identity().find("/net:"), std::string::npos) << host_identity();
  EXPECT_EQ(same_host_endpoint(host_identity(), "x"), "x");
  EXPECT_EQ(same_host_endpoint("another-boot/net:1", "x"), "");
  EXPECT_EQ(same_host_endpoint("", "x"), "");
  EXPECT_EQ(same_host_endpoint(host_identity(), ""), "");
}

// Invariant 11: a write and a read of grants over the unix endpoint, by cross-memory attach;
// the grant's `done` (what a release waits for) comes only after the copy.
TEST(SameHostTest, GrantsMoveByCrossMemoryAttachEveryByteChecked) {
  auto server = start_server();
  ASSERT_TRUE(server);
  ASSERT_FALSE(server->unix_name().empty());
  StreamClient client(2);
  for (uint64_t n : {uint64_t{kEagerBytes + 1}, uint64_t{(3 << 20) + 5}}) {
    std::vector<uint8_t> owner(n, 0), mine = filled(n, 7), back(n, 0);
    Grant w = grant(*server, owner.data(), n, StreamDirection::kIntoOwner,
                    [&] { return first_difference(owner.data(), n, 7).empty(); });
    StreamEnd end =
        client.run_now(job_for(*server, w.token, StreamDirection::kIntoOwner, mine.data(), n));
    ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
    EXPECT_TRUE(end.same_host);
    auto [wst, written_before_done] = w.wait();
    EXPECT_TRUE(wst.ok());
    EXPECT_TRUE(written_before_done) << "done came before the copy into the owner ended";
    EXPECT_EQ(first_difference(owner.data(), n, 7), "");
    Grant r = grant(*server, owner.data(), n, StreamDirection::kOutOfOwner,
                    [&] { return first_difference(back.data(), n, 7).empty(); });
    end = client.run_now(job_for(*server, r.token, StreamDirection::kOutOfOwner, back.data(), n));
    ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
    auto [rst, read_before_done] = r.wait();
    EXPECT_TRUE(rst.ok());
    EXPECT_TRUE(read_before_done) << "done came before the copy into the requester ended";
    EXPECT_EQ(first_difference(back.data(), n, 7), "");
  }
  EXPECT_EQ(server->cross_memory_served(), 4u);
  EXPECT_EQ(server->inband_served(), 0u);
  EXPECT_EQ(client.same_host_ops(), 4u);
}

// Invariant 11 with the test hook that forces the in-band fallback (as a kernel refusing
// process_vm_* would): bytes on the socket, every byte checked, and the client asks for
// cross-memory attach only once per endpoint.
TEST(SameHostTest, TheInbandFallbackMovesEveryByteAndIsRemembered) {
  auto server = start_server(/*cross_memory=*/false);
  ASSERT_TRUE(server);
  StreamClient client(1);
  const uint64_t n = (1 << 20) + 3;
  std::vector<uint8_t> owner(n, 0), mine = filled(n, 9), back(n, 0);
  for (int round = 0; round < 2; ++round) {
    Grant w = grant(*server, owner.data(), n, StreamDirection::kIntoOwner);
    StreamEnd end =
        client.run_now(job_for(*server, w.token, StreamDirection::kIntoOwner, mine.data(), n));
    ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
    EXPECT_TRUE(w.wait().first.ok());
    EXPECT_EQ(first_difference(owner.data(), n, 9), "");
    Grant r = grant(*server, owner.data(), n, StreamDirection::kOutOfOwner);
    end = client.run_now(job_for(*server, r.token, StreamDirection::kOutOfOwner, back.data(), n));
    ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
    EXPECT_TRUE(r.wait().first.ok());
    EXPECT_EQ(first_difference(back.data(), n, 9), "");
    std::fill(back.begin(), back.end(), 0);
  }
  EXPECT_EQ(server->cross_memory_served(), 0u);
  EXPECT_EQ(server->inband_served(), 1u) << "only the first request asked for attach";
  EXPECT_EQ(client.same_host_ops(), 4u);
}

/// An authorizer over one buffer, checking the secret and bounds as the manager's does.
struct OneBuffer {
  std::vector<uint8_t> bytes;
  bool read_only = false;
  StreamServer::Authorizer authorizer() {
    return [this](const StreamRequest& req) -> Result<StreamServer::HandleGrant> {
      if (req.handle.secret_hi != 1 || req.handle.secret_lo != 2 ||
          req.handle.offset + req.length > bytes.size() ||
          (read_only && req.direction == StreamDirection::kIntoOwner))
        return Error(ErrorCode::kNotFound, "buffer " + std::to_string(req.handle.id) +
                                               " is not served by handle here: ask its manager");
      StreamServer::HandleGrant g;
      g.addr = bytes.data() + req.handle.offset;
      g.done = [](const Status&, uint64_t) {};
      return g;
    };
  }
};

// Requests by handle (the stream lane's) over the unix endpoint, small (in-band) and large
// (cross-memory attach); refusals answer exactly as over TCP.
TEST(SameHostTest, RequestsByHandleAnswerAsOverTcp) {
  auto server = start_server();
  ASSERT_TRUE(server);
  OneBuffer buffer{filled(4 << 20, 3)};
  server->set_authorizer(buffer.authorizer());
  StreamClient same_host(1), tcp(1, nullptr, /*same_host=*/false);
  auto by_handle = [&](uint64_t n, uint64_t offset, StreamDirection d, uint8_t* addr,
                       uint64_t secret_lo) {
    StreamJob j = job_for(*server, 0, d, addr, n);
    j.by_handle = true;
    j.handle = HandleAccess{5, 1, secret_lo, offset, 10000};
    return j;
  };
  for (uint64_t n : {uint64_t{8}, uint64_t{kEagerBytes}, uint64_t{(2 << 20) + 1}}) {
    std::vector<uint8_t> back(n, 0);
    StreamEnd end =
        same_host.run_now(by_handle(n, 0, StreamDirection::kOutOfOwner, back.data(), 2));
    ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
    EXPECT_EQ(first_difference(back.data(), n, 3), "") << n;
    std::vector<uint8_t> out = filled(n, 4);
    const uint64_t at = (4 << 20) - n;
    end = same_host.run_now(by_handle(n, at, StreamDirection::kIntoOwner, out.data(), 2));
    ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
    EXPECT_EQ(first_difference(buffer.bytes.data() + at, n, 4), "") << n;
    buffer.bytes = filled(4 << 20, 3);
  }
  EXPECT_EQ(same_host.same_host_ops(), 6u);
  // Wrong secret, out of bounds, a write into a read-only buffer: the same answer both ways.
  buffer.read_only = true;
  std::vector<uint8_t> scratch(1 << 20, 0);
  struct Case {
    uint64_t n, offset, secret_lo;
    StreamDirection d;
  };
  for (const Case& c : {Case{8, 0, 3, StreamDirection::kOutOfOwner},
                        Case{1 << 20, 0, 3, StreamDirection::kOutOfOwner},
                        Case{1 << 20, (4 << 20) - 8, 2, StreamDirection::kOutOfOwner},
                        Case{16, 0, 2, StreamDirection::kIntoOwner},
                        Case{1 << 20, 0, 2, StreamDirection::kIntoOwner}}) {
    StreamEnd a = same_host.run_now(by_handle(c.n, c.offset, c.d, scratch.data(), c.secret_lo));
    StreamEnd b = tcp.run_now(by_handle(c.n, c.offset, c.d, scratch.data(), c.secret_lo));
    ASSERT_FALSE(a.status.ok());
    ASSERT_FALSE(b.status.ok());
    EXPECT_TRUE(a.same_host);
    EXPECT_FALSE(b.same_host);
    EXPECT_EQ(a.status.error().code(), b.status.error().code());
    EXPECT_EQ(a.refused, b.refused);
    EXPECT_NE(a.status.error().message().find("ask its manager"), std::string::npos)
        << a.status.error().message();
  }
  EXPECT_EQ(first_difference(buffer.bytes.data(), 4 << 20, 3), "") << "a refusal stored bytes";
  EXPECT_EQ(tcp.same_host_ops(), 0u);
}

TEST(SameHostTest, ACrossMemoryRequestOverTcpIsRefused) {
  auto server = start_server();
  ASSERT_TRUE(server);
  std::vector<uint8_t> owner(1 << 20, 0), mine(1 << 20, 1);
  Grant g = grant(*server, owner.data(), owner.size(), StreamDirection::kIntoOwner);
  auto s = connect_tcp(server->host(), server->port(), Clock::now() + 5s);
  ASSERT_TRUE(s.ok());
  StreamRequest r{StreamDirection::kIntoOwner, g.token, owner.size()};
  r.cross_memory = true;
  r.peer_addr = reinterpret_cast<uint64_t>(mine.data());
  ASSERT_TRUE(write_request(*s, r, Clock::now() + 5s).ok());
  auto answer = read_cross_memory_answer(*s, Clock::now() + 5s, "answer");
  ASSERT_TRUE(answer.ok()) << answer.error().to_string();
  ASSERT_FALSE(answer->inband);
  ASSERT_FALSE(answer->status.ok());
  EXPECT_EQ(answer->status.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(answer->status.error().message().find("TCP"), std::string::npos);
  EXPECT_FALSE(g.wait().first.ok());
  EXPECT_EQ(owner, std::vector<uint8_t>(1 << 20, 0));
}

// stream_protocol.h: the three cross-memory requests carry the requester's address and
// deadline through the wire unchanged; a "CMS1" (a release whose requests carried no deadline)
// is refused, naming what to do.
TEST(SameHostTest, CrossMemoryRequestsCarryTheRequestersDeadline) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  Socket out(fds[0]), in(fds[1]);
  const uint64_t deadline = steady_ns(Clock::now() + 3s);
  ListEntry entries[1] = {{4096, 0, 100}};
  for (int kind = 0; kind < 3; ++kind) {
    SCOPED_TRACE(kind == 0 ? "CMS2" : kind == 1 ? "CMH2" : "CML2");
    StreamRequest r{StreamDirection::kOutOfOwner, 77, 8192};
    if (kind > 0) {
      r.by_handle = true;
      r.handle = HandleAccess{5, 1, 2, 4096, 1000};
    }
    if (kind == 2) {
      r.list = true;
      r.count = 1;
      r.total = 100;
      r.entries = entries;
    }
    r.cross_memory = true;
    r.peer_addr = 0x7f0012345678;
    r.peer_deadline_ns = deadline + kind;
    ASSERT_TRUE(write_request(out, r, Clock::now() + 5s).ok());
    auto got = read_request(in, Clock::now() + 5s);
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    EXPECT_TRUE(got->cross_memory);
    EXPECT_EQ(got->by_handle, kind > 0);
    EXPECT_EQ(got->list, kind == 2);
    EXPECT_EQ(got->length, 8192u);
    EXPECT_EQ(got->peer_addr, r.peer_addr);
    EXPECT_EQ(got->peer_deadline_ns, deadline + kind);
    EXPECT_EQ(from_steady_ns(got->peer_deadline_ns), from_steady_ns(deadline + kind));
  }
  EXPECT_EQ(from_steady_ns(0), kNoDeadline);
  uint8_t old[kCrossMemoryRequestBytes] = {'C', 'M', 'S', '1'};
  auto refused = parse_request(old);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("same caf-rdma release"), std::string::npos)
      << refused.error().to_string();
}

/// Sends a cross-memory read of grant `g` into `into` on a new same-host connection, saying the
/// requester waits until `requester_deadline`; the connection, for its one answer.
Result<Socket> ask_cross_memory_read(const StreamServer& server, const Grant& g, uint64_t n,
                                     uint64_t into, Clock::time_point requester_deadline) {
  CAF_RDMA_ASSIGN_OR_RETURN(Socket s, connect_unix(server.unix_name(), Clock::now() + 5s));
  StreamRequest r{StreamDirection::kOutOfOwner, g.token, n};
  r.cross_memory = true;
  r.peer_addr = into;
  r.peer_deadline_ns = steady_ns(requester_deadline);
  CAF_RDMA_RETURN_IF_ERROR(write_request(s, r, Clock::now() + 5s));
  return s;
}

// Invariant 11: a cross-memory copy ends by the requester's deadline, which the request
// carries, however long the grant allows. A request whose deadline passed before the owner
// read it (an owner that took it late) copies nothing: before, the owner copied until its own
// deadline, into a requester that had stopped waiting.
TEST(SameHostTest, ACrossMemoryCopyNeverStartsAfterTheRequestersDeadline) {
  auto server = start_server();
  ASSERT_TRUE(server);
  const uint64_t n = 1 << 20;
  std::vector<uint8_t> owner = filled(n, 5), mine(n, 0);
  Grant g = grant(*server, owner.data(), n, StreamDirection::kOutOfOwner);  // 10 s
  auto s = ask_cross_memory_read(*server, g, n, reinterpret_cast<uint64_t>(mine.data()),
                                 Clock::now() - 1ms);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  auto answer = read_cross_memory_answer(*s, Clock::now() + 5s, "answer");
  ASSERT_TRUE(answer.ok()) << answer.error().to_string();
  ASSERT_FALSE(answer->inband);
  ASSERT_FALSE(answer->status.ok()) << "copied past the requester's deadline";
  EXPECT_EQ(answer->status.error().code(), ErrorCode::kTimeout) << answer->status.error().message();
  EXPECT_FALSE(g.wait().first.ok());
  EXPECT_EQ(mine, std::vector<uint8_t>(n, 0)) << "bytes copied into a requester past its deadline";
}

// The same for a copy under way: the requester's memory keeps the owner's copy stuck in the
// kernel (UnservedRange); the owner ends it by the requester's deadline (300 ms) and answers
// within the grace the requester waits past it, though its grant allows 10 s. Served
// afterwards, the range stays zero: no copy outlived the answer.
TEST(SameHostTest, ACrossMemoryCopyStuckInTheRequesterEndsByItsDeadline) {
  UnservedRange range;
  if (!range.why().empty())
    GTEST_SKIP() << range.why();
  auto server = start_server();
  ASSERT_TRUE(server);
  const uint64_t n = UnservedRange::kLen;
  std::vector<uint8_t> owner = filled(n, 5);
  Grant g = grant(*server, owner.data(), n, StreamDirection::kOutOfOwner);  // 10 s
  const Clock::time_point requester_deadline = Clock::now() + 300ms;
  auto s = ask_cross_memory_read(*server, g, n, range.addr(), requester_deadline);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  auto answer = read_cross_memory_answer(*s, requester_deadline + kEagerAnswerGrace, "answer");
  ASSERT_TRUE(answer.ok()) << "no answer within the requester's wait: "
                           << answer.error().to_string();
  ASSERT_FALSE(answer->inband);
  ASSERT_FALSE(answer->status.ok());
  EXPECT_EQ(answer->status.error().code(), ErrorCode::kTimeout) << answer->status.error().message();
  EXPECT_FALSE(g.wait().first.ok());
  EXPECT_EQ(range.first_written_once_served(), "") << "written after the answer";
}

// stream_client.h stop() and cross_memory.h invariant 7: a client stopped while its owner's
// copy into the job's memory is stuck (UnservedRange) shuts only its sending side; the owner
// sees that, ends the copy and answers (after the copy returned: stream_protocol.h), and
// run_now returns on that answer. The range, served once run_now returned, stays zero once the
// grant is done: no copy outlived the job. Before, the job returned at once while the copy
// waited on until the job's deadline, then wrote into memory its caller had taken back.
TEST(SameHostTest, AClientStoppedMidCopyReturnsOnlyOnceTheOwnersCopyEnded) {
  UnservedRange range;
  if (!range.why().empty())
    GTEST_SKIP() << range.why();
  auto server = start_server();
  ASSERT_TRUE(server);
  const uint64_t n = UnservedRange::kLen;
  std::vector<uint8_t> owner = filled(n, 5);
  Grant g = grant(*server, owner.data(), n, StreamDirection::kOutOfOwner);  // 10 s
  StreamClient client(1);
  StreamJob j = job_for(*server, g.token, StreamDirection::kOutOfOwner,
                        reinterpret_cast<uint8_t*>(range.addr()), n);
  j.deadline = Clock::now() + 8s;
  auto job = std::async(std::launch::async, [&] { return client.run_now(j); });
  ASSERT_TRUE(range.wait_for_a_stall()) << "the owner's copy never reached the job's memory";
  client.stop();
  ASSERT_EQ(job.wait_for(30s), std::future_status::ready) << "run_now never returned";
  StreamEnd end = job.get();
  ASSERT_FALSE(end.status.ok());
  EXPECT_EQ(end.status.error().code(), ErrorCode::kPeerUnavailable)
      << end.status.error().to_string();
  EXPECT_NE(end.status.error().message().find("stopped waiting"), std::string::npos)
      << end.status.error().to_string();
  range.serve();  // a copy still waiting on the range would now write the owner's bytes
  EXPECT_FALSE(g.wait().first.ok());
  EXPECT_EQ(range.first_written_once_served(), "") << "written after the job returned";
}

// Invariant 12 (needs root to become another uid; skipped otherwise).
TEST(SameHostTest, ARequesterOfAnotherUidIsRefused) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to run a requester as another uid";
  auto server = start_server();
  ASSERT_TRUE(server);
  const std::string name = server->unix_name();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // nobody: connect, ask, and exit 0 only when refused with permission_denied.
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)
      ::_exit(2);
    auto s = connect_unix(name, Clock::now() + 5s);
    if (!s.ok())
      ::_exit(3);
    (void)write_request(*s, StreamRequest{StreamDirection::kOutOfOwner, 1, 8}, Clock::now() + 5s);
    auto st = read_status(*s, Clock::now() + 5s, "answer");
    ::_exit(st.ok() && is_other_uid_refusal(*st) &&
                    st->error().message().find("uid 65534") != std::string::npos
                ? 0
                : 4);
  }
  int status = 0;
  // Bounded: the child's every wait has a 5 s deadline.
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: setuid failed, 3: no connection, 4: not refused so";
}

// stream_client.h invariant 5: without same_host (CAF_RDMA_SAME_HOST=0), and with an endpoint
// nobody listens on, jobs take TCP.
TEST(SameHostTest, WithoutSameHostOrWithoutAListenerTheJobTakesTcp) {
  auto server = start_server();
  ASSERT_TRUE(server);
  const uint64_t n = 1 << 20;
  std::vector<uint8_t> owner(n, 0), mine = filled(n, 11);
  StreamClient off(1, nullptr, /*same_host=*/false), on(1);
  Grant g1 = grant(*server, owner.data(), n, StreamDirection::kIntoOwner);
  StreamEnd end =
      off.run_now(job_for(*server, g1.token, StreamDirection::kIntoOwner, mine.data(), n));
  ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
  EXPECT_FALSE(end.same_host);
  EXPECT_EQ(first_difference(owner.data(), n, 11), "");
  std::fill(owner.begin(), owner.end(), 0);
  Grant g2 = grant(*server, owner.data(), n, StreamDirection::kIntoOwner);
  StreamJob j = job_for(*server, g2.token, StreamDirection::kIntoOwner, mine.data(), n);
  j.unix_name = "caf-rdma-stream-nobody-listens-here";
  end = on.run_now(j);
  ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
  EXPECT_FALSE(end.same_host);
  EXPECT_EQ(first_difference(owner.data(), n, 11), "");
  EXPECT_EQ(server->cross_memory_served(), 0u);
  EXPECT_EQ(off.same_host_ops() + on.same_host_ops(), 0u);
}

/// A process of uid 65534 (nobody) listening on abstract name `name`, as a squatter would once
/// an owner died: it accepts every connection and counts connections and bytes received until
/// stop() (or 60 s: the parent died).
class Squatter {
public:
  struct Seen {
    long long connections = -1;  ///< -1: the squatter failed
    long long bytes = -1;
  };
  explicit Squatter(const std::string& name) {
    int ready[2], stop[2], count[2];
    if (::pipe(ready) != 0 || ::pipe(stop) != 0 || ::pipe(count) != 0)
      return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      ::close(stop[1]);
      ::close(count[0]);
      run(name, ready[1], stop[0], count[1]);  // never returns
    }
    ::close(ready[1]);
    ::close(stop[0]);
    ::close(count[1]);
    stop_ = stop[1];
    count_ = count[0];
    char c = 0;
    // The child writes one byte once it listens, or exits (EOF): no sleep.
    listening_ = pid_ > 0 && ::read(ready[0], &c, 1) == 1 && c == 'L';
    ::close(ready[0]);
  }
  ~Squatter() { (void)stop(); }
  Squatter(const Squatter&) = delete;
  Squatter& operator=(const Squatter&) = delete;
  bool listening() const { return listening_; }
  /// Ends the squatter: what it saw.
  Seen stop() {
    Seen seen;
    if (pid_ <= 0)
      return seen;
    ::close(stop_);
    long long got[2] = {-1, -1};
    if (::read(count_, got, sizeof(got)) == static_cast<ssize_t>(sizeof(got)))
      seen = Seen{got[0], got[1]};
    ::close(count_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? seen : Seen{};
  }

private:
  [[noreturn]] static void run(const std::string& name, int ready, int stop, int count) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
        ::setresuid(65534, 65534, 65534) != 0)
      ::_exit(2);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path + 1, name.data(), name.size());
    const int l = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    if (l < 0 || ::bind(l, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(l, 16) != 0)
      ::_exit(3);
    if (::write(ready, "L", 1) != 1)
      ::_exit(4);
    long long seen[2] = {0, 0};  // connections, bytes
    std::vector<int> conns;
    const auto give_up = Clock::now() + 60s;
    while (Clock::now() < give_up) {
      std::vector<pollfd> fds{{stop, POLLIN, 0}, {l, POLLIN, 0}};
      for (int c : conns)
        fds.push_back({c, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 1000) < 0)
        ::_exit(5);
      // Every connection waiting (also those made before a stop: the client may have closed
      // them already; they are still accepted).
      for (int c; (c = ::accept(l, nullptr, nullptr)) >= 0;) {
        conns.push_back(c);
        ++seen[0];
      }
      if (fds[0].revents != 0)
        break;  // the parent closed its end: stop
      for (size_t i = 2; i < fds.size(); ++i) {
        if (fds[i].revents == 0)
          continue;
        char buf[4096];
        const ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
        if (n > 0) {
          seen[1] += n;
        } else {  // closed by the client: forget it
          ::close(fds[i].fd);
          conns.erase(std::find(conns.begin(), conns.end(), fds[i].fd));
        }
      }
    }
    // What the connections still hold (a client closes its end at once: its bytes, if it sent
    // any, wait there).
    for (int c : conns) {
      char buf[4096];
      for (ssize_t n; (n = ::recv(c, buf, sizeof(buf), MSG_DONTWAIT)) > 0;)
        seen[1] += n;
    }
    ::_exit(::write(count, seen, sizeof(seen)) == sizeof(seen) ? 0 : 6);
  }

  pid_t pid_ = -1;
  int stop_ = -1;
  int count_ = -1;
  bool listening_ = false;
};

// same_host.h invariant 5 (needs root to run the squatter as another uid; skipped otherwise):
// an owner's endpoint name held by a listener of another uid (what follows an owner's death)
// gets no request, no secret and no byte; the job takes the owner's TCP port, every byte
// checked, and the endpoint is given up.
TEST(SameHostTest, AListenerOfAnotherUidOnTheOwnersEndpointGetsNothing) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to run a listener as another uid";
  const std::string name = "caf-rdma-stream-squatted-" + std::to_string(::getpid());
  Squatter squatter(name);  // forked before any thread of this test starts
  ASSERT_TRUE(squatter.listening()) << "the squatter could not listen as uid 65534";
  auto server = start_server();
  ASSERT_TRUE(server);
  // Straight: connected, the check names the endpoint and both uids.
  auto s = connect_unix(name, Clock::now() + 5s);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  Status st = listener_is_own_uid(*s, name);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(is_foreign_listener(st)) << st.error().to_string();
  for (const char* part : {"@caf-rdma-stream-squatted-", "of uid 65534", "uid 0"})
    EXPECT_NE(st.error().message().find(part), std::string::npos) << st.error().message();
  s->close();
  // Through a client (a fresh one per job: a client gives the endpoint up after the first):
  // a write and a read by grant, each of 1 MiB (cross-memory sized: the request would carry
  // this process's address) and 4 KiB (in-band).
  int jobs = 0;
  for (const uint64_t n : {uint64_t{1} << 20, uint64_t{4096}}) {
    std::vector<uint8_t> owner(n, 0), mine = filled(n, 21);
    StreamClient writer(1), reader(1);
    Grant w = grant(*server, owner.data(), n, StreamDirection::kIntoOwner);
    StreamJob j = job_for(*server, w.token, StreamDirection::kIntoOwner, mine.data(), n);
    j.unix_name = name;
    StreamEnd end = writer.run_now(j);
    ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
    EXPECT_FALSE(end.same_host);
    EXPECT_EQ(first_difference(owner.data(), n, 21), "");
    std::fill(mine.begin(), mine.end(), 0);
    Grant r = grant(*server, owner.data(), n, StreamDirection::kOutOfOwner);
    j = job_for(*server, r.token, StreamDirection::kOutOfOwner, mine.data(), n);
    j.unix_name = name;
    end = reader.run_now(j);
    ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
    EXPECT_FALSE(end.same_host);
    EXPECT_EQ(first_difference(mine.data(), n, 21), "");
    EXPECT_EQ(writer.same_host_ops() + reader.same_host_ops(), 0u);
    jobs += 2;
  }
  const Squatter::Seen seen = squatter.stop();
  ASSERT_GE(seen.connections, 0) << "the squatter failed";
  // Each job connected once (and was not tried again), plus the straight check's connection.
  EXPECT_EQ(seen.connections, jobs + 1);
  EXPECT_EQ(seen.bytes, 0) << "bytes sent to a listener of another uid";
}

}  // namespace
}  // namespace caf_rdma
