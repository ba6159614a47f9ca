// The fallback's stream channel without the manager: grants, both directions, refusals, reuse
// of connections, deadlines against a stalled peer, and shutdown while transfers run.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "components/stop_signal.h"
#include "components/stream_client.h"
#include "components/stream_protocol.h"
#include "components/stream_server.h"
#include "tests/closed_port.h"
#include "tests/components/served.h"

namespace caf_rdma {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::vector<uint8_t> pattern(uint64_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (uint64_t i = 0; i < n; ++i)
    v[i] = static_cast<uint8_t>((i * 2654435761u + seed) >> 13);
  return v;
}

/// Runs one job and waits (bounded) for how it ended.
StreamEnd run_job_end(StreamClient& client, StreamJob job) {
  auto p = std::make_shared<std::promise<StreamEnd>>();
  auto f = p->get_future();
  job.done = [p](StreamEnd end) { p->set_value(std::move(end)); };
  EXPECT_TRUE(client.submit(std::move(job)).ok());
  if (f.wait_for(20s) != std::future_status::ready)
    return StreamEnd{Error(ErrorCode::kTimeout, "the stream job never finished (20 s)")};
  return f.get();
}

/// Runs one job and waits (bounded) for its result.
Status run_job(StreamClient& client, StreamJob job) {
  return run_job_end(client, std::move(job)).status;
}

/// A job for grant `token` at host:port, due `limit` from now.
StreamJob job_to(const std::string& host, uint16_t port, uint64_t token, StreamDirection dir,
                 uint8_t* addr, uint64_t length, std::chrono::milliseconds limit) {
  StreamJob j;
  j.host = host;
  j.port = port;
  j.token = token;
  j.direction = dir;
  j.addr = addr;
  j.length = length;
  j.deadline = Clock::now() + limit;
  return j;
}

StreamJob job_for(const StreamServer& server, uint64_t token, StreamDirection dir, uint8_t* addr,
                  uint64_t length, std::chrono::milliseconds limit = 10s) {
  return job_to(server.host(), server.port(), token, dir, addr, length, limit);
}

class StreamChannelTest : public ::testing::Test {
protected:
  void SetUp() override {
    auto s = StreamServer::start("127.0.0.1");
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    server_ = std::move(*s);
    ASSERT_NE(server_->port(), 0);
  }
  std::unique_ptr<StreamServer> server_;
};

TEST_F(StreamChannelTest, WriteIntoTheOwnerAndReadOutOfItOverOneReusedConnection) {
  constexpr uint64_t kSize = (3 << 20) + 5;
  auto owner = pattern(kSize + 100, 1);
  auto src = pattern(kSize, 2);
  StreamClient client(1);
  Served in;
  uint64_t t1 = server_->grant(owner.data() + 100, kSize, StreamDirection::kIntoOwner,
                               Clock::now() + 10s, in.fn());
  ASSERT_TRUE(
      run_job(client, job_for(*server_, t1, StreamDirection::kIntoOwner, src.data(), kSize)).ok());
  auto [st, bytes] = in.wait();
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(bytes, kSize);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), owner.begin() + 100));
  EXPECT_EQ(owner[99], pattern(100, 1)[99]) << "bytes before the range were touched";

  std::vector<uint8_t> back(kSize, 0);
  Served out;
  uint64_t t2 = server_->grant(owner.data() + 100, kSize, StreamDirection::kOutOfOwner,
                               Clock::now() + 10s, out.fn());
  EXPECT_NE(t1, t2);
  ASSERT_TRUE(
      run_job(client, job_for(*server_, t2, StreamDirection::kOutOfOwner, back.data(), kSize))
          .ok());
  EXPECT_EQ(out.wait().second, kSize);
  EXPECT_EQ(back, src);
  EXPECT_EQ(client.idle_connections(), 1u) << "both jobs should have used one connection";
  EXPECT_EQ(server_->pending_grants(), 0u);
}

TEST_F(StreamChannelTest, TokensAreSingleUseAndRevocable) {
  std::vector<uint8_t> owner(4096), mine(4096, 9);
  StreamClient client(1);
  Served s;
  uint64_t t = server_->grant(owner.data(), owner.size(), StreamDirection::kIntoOwner,
                              Clock::now() + 10s, s.fn());
  ASSERT_TRUE(
      run_job(client, job_for(*server_, t, StreamDirection::kIntoOwner, mine.data(), mine.size()))
          .ok());
  auto [served, bytes] = s.wait();
  ASSERT_TRUE(served.ok()) << served.error().to_string();
  EXPECT_EQ(bytes, owner.size());
  EXPECT_EQ(owner, mine);
  // Used once: a second use is refused, naming the grant; the owner then hangs up (a request
  // naming no grant never gets a worker), so the client keeps no connection. Nothing moved:
  // the job says so (refused), so its bytes may be moved another way.
  StreamEnd end = run_job_end(
      client, job_for(*server_, t, StreamDirection::kIntoOwner, mine.data(), mine.size()));
  EXPECT_TRUE(end.refused);
  const Status& again = end.status;
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), ErrorCode::kNotFound);
  EXPECT_NE(again.error().message().find("stream grant " + std::to_string(t) + " is unknown"),
            std::string::npos)
      << again.error().message();
  EXPECT_EQ(client.idle_connections(), 0u);

  // Withdrawn before use: revoke says so once; the client is refused.
  uint64_t t2 = server_->grant(owner.data(), owner.size(), StreamDirection::kOutOfOwner,
                               Clock::now() + 10s, [](uint64_t, const Status&, uint64_t) {
                                 ADD_FAILURE() << "a revoked grant reported completion";
                               });
  EXPECT_EQ(server_->pending_grants(), 1u);
  EXPECT_TRUE(server_->revoke(t2));
  EXPECT_FALSE(server_->revoke(t2));
  Status late = run_job(
      client, job_for(*server_, t2, StreamDirection::kOutOfOwner, mine.data(), mine.size()));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code(), ErrorCode::kNotFound);
}

TEST_F(StreamChannelTest, ARequestThatDoesNotMatchItsGrantIsRefusedAndReported) {
  std::vector<uint8_t> owner(8192, 3), mine(8192, 4);
  StreamClient client(1);
  Served s;
  uint64_t t =
      server_->grant(owner.data(), 4096, StreamDirection::kOutOfOwner, Clock::now() + 10s, s.fn());
  // Wrong direction (a write against a read grant): the owner's memory must stay untouched.
  Status st = run_job(client, job_for(*server_, t, StreamDirection::kIntoOwner, mine.data(), 4096));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.error().message().find("does not match its grant (out of the owner, 4096 bytes)"),
            std::string::npos)
      << st.error().message();
  auto [served, bytes] = s.wait();
  EXPECT_FALSE(served.ok());
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(owner, std::vector<uint8_t>(8192, 3));
}

TEST_F(StreamChannelTest, AStalledClientTimesOutAtTheGrantsDeadline) {
  // A peer that sends the request and half the bytes, then nothing: the owner's connection
  // thread gives up at the grant's deadline and reports the grant failed (memory released).
  std::vector<uint8_t> owner(1 << 20);
  Served s;
  auto t0 = Clock::now();
  uint64_t t =
      server_->grant(owner.data(), owner.size(), StreamDirection::kIntoOwner, t0 + 300ms, s.fn());
  auto sock = connect_tcp("127.0.0.1", server_->port(), t0 + 5s);
  ASSERT_TRUE(sock.ok()) << sock.error().to_string();
  ASSERT_TRUE(
      write_request(*sock, StreamRequest{StreamDirection::kIntoOwner, t, owner.size()}, t0 + 5s)
          .ok());
  auto go = read_status(*sock, t0 + 5s, "go");
  ASSERT_TRUE(go.ok() && go->ok());
  std::vector<uint8_t> half(owner.size() / 2, 1);
  ASSERT_TRUE(send_all(*sock, half.data(), half.size(), t0 + 5s, "half").ok());
  auto [st, bytes] = s.wait();
  auto waited = Clock::now() - t0;
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kTimeout) << st.error().to_string();
  EXPECT_NE(st.error().message().find("of 1048576 bytes"), std::string::npos)
      << st.error().message();
  EXPECT_EQ(bytes, 0u);
  EXPECT_GE(waited, 290ms);
  EXPECT_LT(waited, 9s);  // its own 300 ms (the wait itself gives up at 10 s)
}

TEST_F(StreamChannelTest, AClientWaitingOnASilentOwnerTimesOutAtItsDeadline) {
  // A listener that accepts and never answers stands in for a stopped owner.
  auto silent = listen_tcp("127.0.0.1", 0);
  ASSERT_TRUE(silent.ok());
  auto port = local_port(*silent);
  ASSERT_TRUE(port.ok());
  StreamClient client(1);
  std::vector<uint8_t> mine(1 << 20);
  auto t0 = Clock::now();
  Status st = run_job(client, job_to("127.0.0.1", *port, 42, StreamDirection::kOutOfOwner,
                                     mine.data(), mine.size(), 300ms));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kTimeout) << st.error().to_string();
  EXPECT_NE(st.error().message().find("127.0.0.1:" + std::to_string(*port)), std::string::npos)
      << st.error().message();
  EXPECT_LT(Clock::now() - t0, 15s);  // its own 300 ms (the job's wait gives up at 20 s)
}

TEST_F(StreamChannelTest, NobodyListeningIsPeerUnavailableNamingTheEndpoint) {
  testing::ClosedPort closed;  // bound, not listening: refused
  ASSERT_NE(closed.port(), 0);
  uint16_t port = closed.port();
  StreamClient client(1);
  std::vector<uint8_t> mine(4096);
  StreamJob j;
  j.host = "127.0.0.1";
  j.port = port;
  j.token = 1;
  j.addr = mine.data();
  j.length = mine.size();
  j.deadline = Clock::now() + 5s;
  StreamEnd end = run_job_end(client, std::move(j));
  EXPECT_TRUE(end.refused) << "nothing moved: the bytes may go another way";
  const Status& st = end.status;
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kPeerUnavailable) << st.error().to_string();
  EXPECT_NE(st.error().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << st.error().message();
}

TEST_F(StreamChannelTest, StoppingTheOwnerFailsATransferInFlightAtOnce) {
  // Owner side: a client claims a 256 MiB read and then reads nothing, so the owner's
  // connection thread is blocked sending (in flight, for sure). Stopping the owner must wake
  // and join that thread at once and report the grant failed.
  constexpr uint64_t kSize = 256ull << 20;
  std::vector<uint8_t> owner(kSize);
  std::promise<std::pair<Status, uint64_t>> outcome;
  uint64_t t = server_->grant(owner.data(), kSize, StreamDirection::kOutOfOwner, Clock::now() + 60s,
                              [&](uint64_t, Status st, uint64_t bytes) {
                                outcome.set_value({std::move(st), bytes});
                              });
  auto s = connect_tcp(server_->host(), server_->port(), Clock::now() + 10s);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  ASSERT_TRUE(write_request(*s, {StreamDirection::kOutOfOwner, t, kSize}, Clock::now() + 10s).ok());
  auto go = read_status(*s, Clock::now() + 10s, "the grant");
  ASSERT_TRUE(go.ok() && go->ok()) << "the owner did not start the transfer";
  EXPECT_EQ(server_->pending_grants(), 0u);
  auto stopped = std::async(std::launch::async, [this] { server_.reset(); });
  auto ready = stopped.wait_for(10s);
  if (ready != std::future_status::ready)
    s->close();  // unblocks the owner's thread, so the test ends (failed)
  ASSERT_EQ(ready, std::future_status::ready)
      << "stopping the owner did not interrupt its transfer in flight";
  auto done = outcome.get_future();
  ASSERT_EQ(done.wait_for(0s), std::future_status::ready)
      << "the claimed grant must be reported before the server is gone";
  auto [st, bytes] = done.get();
  EXPECT_FALSE(st.ok()) << "a transfer stopped half-way was reported complete";
  EXPECT_LT(bytes, kSize);
}

TEST_F(StreamChannelTest, AnOwnerThatStopsMidTransferFailsTheClientsJob) {
  // Client side: a fake owner (a raw socket) accepts the request, says go, sends half of the
  // bytes and hangs up. The job fails at once with peer_unavailable; it is not reported done.
  constexpr uint64_t kSize = 4 << 20;
  auto listener = listen_tcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  auto port = local_port(*listener);
  ASSERT_TRUE(port.ok());
  int stopper[2];
  ASSERT_EQ(::pipe(stopper), 0);
  std::thread fake_owner([&] {
    auto c = accept_tcp(*listener, stopper[0]);  // bounded: the test wakes it below
    if (!c.ok() || !c->valid())
      return;
    auto req = read_request(*c, Clock::now() + 10s);
    if (!req.ok() || !write_status(*c, Status{}, Clock::now() + 10s).ok())
      return;
    std::vector<uint8_t> half(kSize / 2, 0x5A);
    (void)send_all(*c, half.data(), half.size(), Clock::now() + 10s, "half");
    c->close();  // the owner is gone mid-way
  });
  std::vector<uint8_t> mine(kSize, 0);
  StreamClient client(1);
  std::promise<StreamEnd> p;
  auto f = p.get_future();
  StreamJob j =
      job_to("127.0.0.1", *port, 42, StreamDirection::kOutOfOwner, mine.data(), kSize, 60s);
  j.done = [&p](StreamEnd end) { p.set_value(std::move(end)); };
  EXPECT_TRUE(client.submit(std::move(j)).ok());
  auto ready = f.wait_for(10s);
  (void)::write(stopper[1], "x", 1);
  fake_owner.join();
  ::close(stopper[0]);
  ::close(stopper[1]);
  ASSERT_EQ(ready, std::future_status::ready) << "the job waited for its deadline";
  StreamEnd end = f.get();
  EXPECT_FALSE(end.refused) << "bytes moved after go: the job must not be redone";
  const Status& st = end.status;
  ASSERT_FALSE(st.ok()) << "half a transfer was reported complete";
  EXPECT_EQ(st.error().code(), ErrorCode::kPeerUnavailable) << st.error().to_string();
}

/// A stand-in owner on a listener of its own: `serve(i, connection)` handles its i-th accepted
/// connection (from 0) on its thread; stops (joined) when destroyed.
class FakeOwner {
public:
  using ServeFn = std::function<void(int, Socket&)>;
  explicit FakeOwner(ServeFn serve) {
    auto l = listen_tcp("127.0.0.1", 0);
    EXPECT_TRUE(l.ok());
    if (!l.ok() || ::pipe(stop_) != 0)
      return;
    listener_ = std::move(*l);
    port_ = *local_port(listener_);
    thread_ = std::thread([this, serve = std::move(serve)] {
      for (int i = 0;; ++i) {
        auto c = accept_tcp(listener_, stop_[0]);  // bounded: the destructor wakes it
        if (!c.ok() || !c->valid())
          return;
        accepted_ = i + 1;
        serve(i, *c);
      }
    });
  }
  ~FakeOwner() {
    stop();
    for (int fd : stop_)
      if (fd >= 0)
        ::close(fd);
  }
  /// Stops accepting and joins the thread (once the connection it serves, if any, is done).
  void stop() {
    if (thread_.joinable()) {
      (void)!::write(stop_[1], "x", 1);
      thread_.join();
    }
  }
  uint16_t port() const { return port_; }
  /// Connections accepted (read after stop()).
  int accepted() const { return accepted_; }

private:
  Socket listener_;
  uint16_t port_ = 0;
  int stop_[2] = {-1, -1};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

/// Resets a connection (RST, as a full or evicting owner's kernel does for unread data).
void reset(Socket& c) {
  linger hard{1, 0};
  ::setsockopt(c.fd(), SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
  c.close();
}

// Client invariant 3: an owner that resets every connection before answering is tried on two
// connections, then the job ends refused (not at its deadline).
TEST_F(StreamChannelTest, AnOwnerThatResetsEveryConnectionIsTriedTwiceThenRefused) {
  FakeOwner owner([](int, Socket& c) { reset(c); });
  ASSERT_NE(owner.port(), 0);
  std::vector<uint8_t> mine(1 << 20);
  StreamClient client(1);
  auto t0 = Clock::now();
  StreamEnd end =
      run_job_end(client, job_to("127.0.0.1", owner.port(), 42, StreamDirection::kOutOfOwner,
                                 mine.data(), mine.size(), 20s));
  ASSERT_FALSE(end.status.ok());
  EXPECT_TRUE(end.refused) << end.status.error().to_string();
  EXPECT_NE(end.status.error().code(), ErrorCode::kTimeout) << end.status.error().to_string();
  EXPECT_NE(end.status.error().message().find("two connections before taking the request"),
            std::string::npos)
      << end.status.error().message();
  EXPECT_LT(Clock::now() - t0, 15s) << "a refusal must not wait for the deadline";
  owner.stop();
  EXPECT_EQ(owner.accepted(), 2);
}

// Client invariant 3: a new connection lost before "go" (an owner pushing it out to make room)
// is replaced by a fresh one, and the job succeeds; every byte checked.
TEST_F(StreamChannelTest, AConnectionLostBeforeGoIsRetriedOnAFreshOne) {
  constexpr uint64_t kSize = (1 << 20) + 3;
  auto owner_bytes = pattern(kSize, 12);
  FakeOwner owner([&](int i, Socket& c) {
    if (i == 0)
      return reset(c);
    auto req = read_request(c, Clock::now() + 10s);
    if (!req.ok() || req->token != 42 || req->length != kSize)
      return;
    if (write_status(c, Status{}, Clock::now() + 10s).ok() &&
        send_all(c, owner_bytes.data(), kSize, Clock::now() + 10s, "data").ok())
      (void)write_status(c, Status{}, Clock::now() + 10s);  // sent: the owner is done
  });
  std::vector<uint8_t> mine(kSize, 0);
  StreamClient client(1);
  StreamEnd end = run_job_end(
      client,
      job_to("127.0.0.1", owner.port(), 42, StreamDirection::kOutOfOwner, mine.data(), kSize, 20s));
  ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
  EXPECT_FALSE(end.refused);
  EXPECT_EQ(mine, owner_bytes);
  owner.stop();
  EXPECT_EQ(owner.accepted(), 2);
}

// Client invariants 2 and 3: an owner that read the request and hung up without answering may
// have used the grant up, so the second try is answered "unknown"; the job ends refused, and
// no byte of the write was ever sent on either connection (it may be redone another way).
TEST_F(StreamChannelTest, AWriteTheOwnerNeverTookSendsNoByteAndEndsRefused) {
  std::atomic<uint64_t> data_bytes{0};
  FakeOwner owner([&](int i, Socket& c) {
    if (!read_request(c, Clock::now() + 10s).ok())
      return;
    if (i > 0)
      (void)write_status(c, Error(ErrorCode::kNotFound, "stream grant 42 is unknown"),
                         Clock::now() + 10s);
    else
      ::shutdown(c.fd(), SHUT_WR);  // read, not answered
    // Whatever the client sends before it hangs up would be bytes of the write.
    uint8_t b[4096];
    for (;;) {
      auto k = recv_some(c, b, sizeof(b));
      if (!k.ok())
        break;  // the client closed
      data_bytes += *k;
      if (*k == 0) {
        pollfd p{c.fd(), POLLIN, 0};
        if (::poll(&p, 1, 10000) <= 0)
          break;
      }
    }
  });
  auto mine = pattern(1 << 20, 13);
  StreamClient client(1);
  StreamEnd end =
      run_job_end(client, job_to("127.0.0.1", owner.port(), 42, StreamDirection::kIntoOwner,
                                 mine.data(), mine.size(), 20s));
  ASSERT_FALSE(end.status.ok());
  EXPECT_TRUE(end.refused) << end.status.error().to_string();
  EXPECT_EQ(end.status.error().code(), ErrorCode::kNotFound) << end.status.error().to_string();
  owner.stop();  // after it saw both connections end
  EXPECT_EQ(owner.accepted(), 2);
  EXPECT_EQ(data_bytes.load(), 0u) << "bytes of the write were sent without a go";
}

// StreamClient invariant 8: a job whose stop signal was asked before it ran takes no
// connection and moves nothing; it ends `stopped` (kCancelled) and its grant stays unclaimed.
TEST_F(StreamChannelTest, AJobStoppedBeforeItRunsMovesNothing) {
  constexpr uint64_t kSize = 1 << 20;
  std::vector<uint8_t> owner(kSize, 0);
  auto mine = pattern(kSize, 4);
  Served in;
  uint64_t t =
      server_->grant(owner.data(), kSize, StreamDirection::kIntoOwner, Clock::now() + 10s, in.fn());
  StopSignal stop;
  stop.request();
  StreamClient client(1);
  StreamJob j = job_for(*server_, t, StreamDirection::kIntoOwner, mine.data(), kSize);
  j.stop = &stop;
  StreamEnd end = run_job_end(client, std::move(j));
  ASSERT_FALSE(end.status.ok());
  EXPECT_EQ(end.status.error().code(), ErrorCode::kCancelled) << end.status.error().to_string();
  EXPECT_TRUE(end.stopped);
  EXPECT_EQ(server_->pending_grants(), 1u) << "the stopped job claimed its grant";
  EXPECT_EQ(client.idle_connections(), 0u);
  for (uint64_t i = 0; i < kSize; ++i)
    ASSERT_EQ(owner[i], 0) << "owner byte " << i << " written by a stopped job";
}

// StreamClient invariant 8, a write stopped mid-way: its sending side is shut, and the job ends
// only once its owner ended its side (here a fake owner that reads to the end of the stream and
// then hangs up: the flag it sets before hanging up is seen set when the job ends); an owner
// that never hangs up leaves the job unsettled: peer_unavailable at its deadline plus the
// grace, saying bytes may still be stored, never `stopped`.
TEST_F(StreamChannelTest, AStoppedWriteEndsOnlyOnceItsOwnerEndedItsSide) {
  constexpr uint64_t kSize = 64 << 20;
  for (bool hangs_up : {true, false}) {
    SCOPED_TRACE(hangs_up ? "an owner that hangs up" : "an owner that never hangs up");
    std::promise<void> got_some;
    std::promise<void> let_go;  // the test is done with the connection
    std::shared_future<void> done_with = let_go.get_future().share();
    std::atomic<bool> owner_ended{false};
    FakeOwner owner([&, hangs_up, done_with](int, Socket& c) {
      auto req = read_request(c, Clock::now() + 10s);
      if (!req.ok() || !write_status(c, Status{}, Clock::now() + 10s).ok())
        return;
      std::vector<uint8_t> some(64 << 10);
      (void)recv_all(c, some.data(), some.size(), Clock::now() + 10s, "some");
      got_some.set_value();
      if (hangs_up)  // to the end of the stream: the client shut its sending side
        owner_ended.store(await_hang_up(c, Clock::now() + 20s, "the fake owner").ok());
      else  // holds the connection, reading nothing, until the test is done with it
        (void)done_with.wait_for(20s);
      c.close();
    });
    ASSERT_NE(owner.port(), 0);
    auto mine = pattern(kSize, 6);
    StopSignal stop;
    StreamClient client(1);
    std::promise<StreamEnd> p;
    auto f = p.get_future();
    StreamJob j = job_to("127.0.0.1", owner.port(), 42, StreamDirection::kIntoOwner, mine.data(),
                         kSize, hangs_up ? 60s : 4s);
    j.stop = &stop;
    j.done = [&p](StreamEnd end) { p.set_value(std::move(end)); };
    EXPECT_TRUE(client.submit(std::move(j)).ok());
    const bool started = got_some.get_future().wait_for(10s) == std::future_status::ready;
    stop.request();
    const bool ended = f.wait_for(20s) == std::future_status::ready;
    let_go.set_value();
    owner.stop();
    ASSERT_TRUE(started) << "the fake owner never got the first bytes";
    ASSERT_TRUE(ended) << "the stopped job did not end";
    StreamEnd end = f.get();
    ASSERT_FALSE(end.status.ok());
    if (hangs_up) {
      EXPECT_TRUE(end.stopped) << end.status.error().to_string();
      EXPECT_EQ(end.status.error().code(), ErrorCode::kCancelled) << end.status.error().to_string();
      EXPECT_TRUE(owner_ended.load()) << "the job ended before its owner ended its side";
    } else {
      EXPECT_FALSE(end.stopped);
      EXPECT_EQ(end.status.error().code(), ErrorCode::kPeerUnavailable)
          << end.status.error().to_string();
      EXPECT_NE(end.status.error().message().find("may still be stored"), std::string::npos)
          << end.status.error().to_string();
    }
    EXPECT_EQ(client.idle_connections(), 0u) << "a stopped job's connection was pooled";
  }
}

/// A FakeOwner that notes each request's token, in arrival order, and holds its first
/// connection (so the client thread that made it) until release(); it refuses every request.
/// submit() queues a 4 KiB read to it on `client`; wait_all() waits for every one submitted.
class HoldingOwner {
public:
  HoldingOwner() : owner_([this](int i, Socket& c) { serve(i, c); }) {}
  ~HoldingOwner() {
    release();
    owner_.stop();
  }
  /// Whether the first connection is held now (waits up to 20 s).
  bool held() { return first_held_.get_future().wait_for(20s) == std::future_status::ready; }
  void release() {
    if (!released_) {
      released_ = true;
      release_.set_value();
    }
  }
  void submit(StreamClient& client, uint64_t token, Priority p, std::chrono::seconds due) {
    auto promise = std::make_shared<std::promise<StreamEnd>>();
    ends_.push_back(promise->get_future());
    StreamJob j = job_to("127.0.0.1", owner_.port(), token, StreamDirection::kOutOfOwner,
                         mine_.data(), mine_.size(), due);
    j.priority = p;
    j.done = [promise](StreamEnd end) { promise->set_value(std::move(end)); };
    EXPECT_TRUE(client.submit(std::move(j)).ok());
  }
  /// Releases the first connection, waits for every job to end and stops accepting.
  void wait_all() {
    release();
    for (auto& f : ends_)
      ASSERT_EQ(f.wait_for(20s), std::future_status::ready);
    owner_.stop();
  }
  std::vector<uint64_t> tokens() {
    std::lock_guard<std::mutex> lock(mu_);
    return tokens_;
  }

private:
  void serve(int i, Socket& c) {
    auto req = read_request(c, Clock::now() + 10s);
    if (!req.ok())
      return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      tokens_.push_back(req->token);
    }
    if (i == 0) {  // holds the client's thread
      first_held_.set_value();
      (void)released_wait_.wait_for(20s);
    }
    (void)write_status(c, Error(ErrorCode::kInvalidArgument, "fake owner: refused"),
                       Clock::now() + 10s);
  }

  std::promise<void> first_held_, release_;
  std::shared_future<void> released_wait_ = release_.get_future().share();
  bool released_ = false;
  std::mutex mu_;
  std::vector<uint64_t> tokens_;
  std::vector<uint8_t> mine_ = std::vector<uint8_t>(4096);
  std::vector<std::future<StreamEnd>> ends_;
  FakeOwner owner_;  ///< last: its thread uses the members above
};

// Invariant 9: jobs waiting for the client's one thread run earliest deadline first (the owner
// sees their requests in that order), whatever order they were submitted in.
TEST_F(StreamChannelTest, QueuedJobsRunEarliestDeadlineFirst) {
  HoldingOwner owner;
  StreamClient client(1);
  owner.submit(client, 1, Priority::kBulk, 60s);
  ASSERT_TRUE(owner.held());
  owner.submit(client, 2, Priority::kBulk, 30s);
  owner.submit(client, 3, Priority::kBulk, 10s);
  owner.submit(client, 4, Priority::kBulk, 20s);
  ASSERT_NO_FATAL_FAILURE(owner.wait_all());
  EXPECT_EQ(owner.tokens(), (std::vector<uint64_t>{1, 3, 4, 2}));
}

// Invariant 9 with classes: while the client's one thread is held by a bulk job, a
// latency-class job runs at once on the latency thread (every byte checked), and the queued
// ones go by class before deadline: bulk due in 10 s before background due in 5 s. (Aging is
// set to an hour here: the order must not depend on how long the test takes; class_queue_test
// checks aging.)
TEST_F(StreamChannelTest, ALatencyJobRunsWhileEveryThreadIsBusyAndTheQueueServesByClass) {
  HoldingOwner owner;
  StreamClient client(1, nullptr, true, std::chrono::hours(1));
  owner.submit(client, 1, Priority::kBulk, 60s);
  ASSERT_TRUE(owner.held());
  owner.submit(client, 2, Priority::kBulk, 10s);
  owner.submit(client, 3, Priority::kBackground, 5s);
  // The latency job, to a real owner, while job 1 still holds the one thread.
  auto owner_bytes = pattern(64 << 10, 41);
  std::vector<uint8_t> got(owner_bytes.size());
  Served out;
  const uint64_t t = server_->grant(owner_bytes.data(), owner_bytes.size(),
                                    StreamDirection::kOutOfOwner, Clock::now() + 10s, out.fn());
  StreamJob urgent = job_for(*server_, t, StreamDirection::kOutOfOwner, got.data(), got.size());
  urgent.priority = Priority::kLatency;
  auto urgent_end = std::make_shared<std::promise<StreamEnd>>();
  urgent.done = [urgent_end](StreamEnd end) { urgent_end->set_value(std::move(end)); };
  ASSERT_TRUE(client.submit(std::move(urgent)).ok());
  auto urgent_future = urgent_end->get_future();
  ASSERT_EQ(urgent_future.wait_for(20s), std::future_status::ready)
      << "the latency job waited for the bulk one";
  const StreamEnd urgent_result = urgent_future.get();
  ASSERT_TRUE(urgent_result.status.ok()) << urgent_result.status.error().to_string();
  EXPECT_EQ(got, owner_bytes);
  EXPECT_EQ(owner.tokens(), (std::vector<uint64_t>{1})) << "job 1 no longer held";
  ASSERT_NO_FATAL_FAILURE(owner.wait_all());
  EXPECT_EQ(owner.tokens(), (std::vector<uint64_t>{1, 2, 3}));
}

// Invariant 9: with every thread busy and a rate learned from jobs that ended well, a job that
// cannot end by its deadline behind those queued ahead of it (due no later) is refused up front,
// naming why, and never runs; with no rate yet, or a thread free, every job is taken. (The
// refused jobs claim a terabyte: more than any rate here moves in a minute; they never run.)
TEST_F(StreamChannelTest, AJobThatCannotEndByItsDeadlineIsRefusedUpFront) {
  constexpr uint64_t kTerabyte = 1ull << 40;
  StreamClient client(1);
  EXPECT_TRUE(client.admits(kTerabyte, Clock::now() + 60s).ok()) << "refused with no rate known";
  // Four reads of 1 MiB that end well: the rate.
  auto owner_bytes = pattern(1 << 20, 31);
  std::vector<uint8_t> mine(1 << 20);
  for (int k = 0; k < 4; ++k) {
    Served out;
    uint64_t t = server_->grant(owner_bytes.data(), owner_bytes.size(),
                                StreamDirection::kOutOfOwner, Clock::now() + 10s, out.fn());
    ASSERT_TRUE(run_job(client, job_for(*server_, t, StreamDirection::kOutOfOwner, mine.data(),
                                        mine.size()))
                    .ok());
    EXPECT_TRUE(std::equal(mine.begin(), mine.end(), owner_bytes.begin()));
  }
  // A thread free: taken, whatever it claims.
  EXPECT_TRUE(client.admits(kTerabyte, Clock::now() + 60s).ok()) << "refused with a thread free";
  // The one thread held by a silent owner until the end of the test.
  auto silent = listen_tcp("127.0.0.1", 0);
  ASSERT_TRUE(silent.ok());
  auto held = std::make_shared<std::promise<StreamEnd>>();
  StreamJob hold = job_to("127.0.0.1", *local_port(*silent), 1, StreamDirection::kOutOfOwner,
                          mine.data(), mine.size(), 60s);
  StopSignal stop_hold;
  hold.stop = &stop_hold;
  hold.done = [held](StreamEnd end) { held->set_value(std::move(end)); };
  ASSERT_TRUE(client.submit(std::move(hold)).ok());
  // Its own bytes cannot move in time: refused, not queued.
  auto big = job_to("127.0.0.1", *local_port(*silent), 2, StreamDirection::kOutOfOwner, mine.data(),
                    kTerabyte, 60s);
  big.done = [](StreamEnd) { ADD_FAILURE() << "a refused job ended"; };
  Status refused = client.submit(std::move(big));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(refused.error().message().find("refused before it started"), std::string::npos)
      << refused.error().message();
  EXPECT_NE(refused.error().message().find("MB/s per thread"), std::string::npos)
      << refused.error().message();
  // A terabyte queued ahead (never run: cancelled below), due in 1.5 times what it takes at the
  // learned rate, so that it is taken: a second terabyte due at the same time is refused for
  // what waits ahead of it; a small job due before it is taken (it does not count).
  const auto rate = client.bytes_per_second();
  ASSERT_TRUE(rate.has_value());
  const auto due = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(1.5 * static_cast<double>(kTerabyte) / *rate));
  StreamJob ahead = job_to("127.0.0.1", *local_port(*silent), 3, StreamDirection::kOutOfOwner,
                           mine.data(), kTerabyte, 0s);
  ahead.deadline = Clock::now() + due;
  ahead.tag = 3;
  auto ahead_end = std::make_shared<std::promise<StreamEnd>>();
  ahead.done = [ahead_end](StreamEnd end) { ahead_end->set_value(std::move(end)); };
  ASSERT_TRUE(client.submit(std::move(ahead)).ok());
  Status behind = client.admits(kTerabyte, Clock::now() + due);
  ASSERT_FALSE(behind.ok());
  // Ahead of it: the terabyte (and the held job, while no thread took it yet).
  EXPECT_NE(behind.error().message().find("due no later wait ahead of it"), std::string::npos)
      << behind.error().message();
  EXPECT_TRUE(client.admits(1 << 20, Clock::now() + due / 2).ok());
  EXPECT_TRUE(client.cancel_queued(3));
  ASSERT_EQ(ahead_end->get_future().wait_for(10s), std::future_status::ready);
  stop_hold.request();  // the held job ends (stream_client.h invariant 8)
  ASSERT_EQ(held->get_future().wait_for(20s), std::future_status::ready);
}

TEST_F(StreamChannelTest, StoppingTheClientFailsQueuedJobs) {
  std::vector<uint8_t> owner(4096), mine(4096);
  auto client = std::make_unique<StreamClient>(1);
  // A job that will sit on a silent endpoint, and one queued behind it.
  auto silent = listen_tcp("127.0.0.1", 0);
  ASSERT_TRUE(silent.ok());
  StreamJob first;
  first.host = "127.0.0.1";
  first.port = *local_port(*silent);
  first.addr = mine.data();
  first.length = mine.size();
  first.deadline = Clock::now() + 60s;
  std::promise<Status> p1, p2;
  first.done = [&p1](StreamEnd end) { p1.set_value(std::move(end.status)); };
  StreamJob second = first;
  second.done = [&p2](StreamEnd end) { p2.set_value(std::move(end.status)); };
  EXPECT_TRUE(client->submit(std::move(first)).ok());
  EXPECT_TRUE(client->submit(std::move(second)).ok());
  std::this_thread::sleep_for(50ms);
  auto t0 = Clock::now();
  client.reset();
  EXPECT_LT(Clock::now() - t0, 30s) << "stopping must not wait for the 60 s deadline";
  auto f1 = p1.get_future(), f2 = p2.get_future();
  ASSERT_EQ(f1.wait_for(1s), std::future_status::ready);
  ASSERT_EQ(f2.wait_for(1s), std::future_status::ready);
  EXPECT_FALSE(f1.get().ok());
  Status s2 = f2.get();
  ASSERT_FALSE(s2.ok());
  EXPECT_NE(s2.error().message().find("cancelled"), std::string::npos) << s2.error().message();
}

// Protocol: a READ completes only once the owner said it is done with its memory (the final
// status after the data), so whatever follows the requester's completion follows the owner's
// last touch of the source: it may reuse the source once the reply reached it.
TEST_F(StreamChannelTest, AReadCompletesOnlyAfterTheOwnerSaysItIsDoneWithItsMemory) {
  constexpr uint64_t kSize = (1 << 18) + 5;
  auto owner_bytes = pattern(kSize, 21);
  std::promise<void> data_sent, may_finish;
  auto finish = may_finish.get_future().share();
  FakeOwner owner([&](int, Socket& c) {
    auto req = read_request(c, Clock::now() + 10s);
    if (!req.ok() || !write_status(c, Status{}, Clock::now() + 10s).ok() ||
        !send_all(c, owner_bytes.data(), kSize, Clock::now() + 10s, "data").ok())
      return;
    data_sent.set_value();
    if (finish.wait_for(20s) == std::future_status::ready)
      (void)write_status(c, Status{}, Clock::now() + 10s);
  });
  std::vector<uint8_t> mine(kSize, 0);
  StreamClient client(1);
  auto p = std::make_shared<std::promise<StreamEnd>>();
  auto f = p->get_future();
  StreamJob j =
      job_to("127.0.0.1", owner.port(), 42, StreamDirection::kOutOfOwner, mine.data(), kSize, 20s);
  j.done = [p](StreamEnd end) { p->set_value(std::move(end)); };
  EXPECT_TRUE(client.submit(std::move(j)).ok());
  ASSERT_EQ(data_sent.get_future().wait_for(10s), std::future_status::ready);
  // Every byte is on its way, but the owner has not said it is done: the job is not complete.
  EXPECT_EQ(f.wait_for(300ms), std::future_status::timeout)
      << "the READ completed before the owner's final status";
  may_finish.set_value();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  StreamEnd end = f.get();
  ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
  EXPECT_EQ(mine, owner_bytes);
}

TEST(StreamProtocolTest, AClientOfTheOldProtocolIsToldToMatchReleases) {
  auto server = StreamServer::start("127.0.0.1");
  ASSERT_TRUE(server.ok());
  auto sock = connect_tcp("127.0.0.1", (*server)->port(), Clock::now() + 5s);
  ASSERT_TRUE(sock.ok());
  const uint8_t v1[kRequestBytes] = {'C', 'R', 'S', '1', 2, 0, 0, 0, 42};  // a version-1 read
  ASSERT_TRUE(send_all(*sock, v1, sizeof(v1), Clock::now() + 5s, "v1 request").ok());
  auto answer = read_status(*sock, Clock::now() + 5s, "answer");
  ASSERT_TRUE(answer.ok()) << answer.error().to_string();
  ASSERT_FALSE(answer->ok());
  EXPECT_EQ(answer->error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(answer->error().message().find("protocol version 1"), std::string::npos)
      << answer->error().message();
}

// StreamServer invariant 18 (with 15): requests that wait for a worker are served by their
// class, then by their grant's deadline, whatever order they came in. Two workers: one at a time
// from this host's address (invariant 15), held by a write whose bytes have not come yet.
TEST(StreamServerQueueTest, WaitingRequestsAreServedByClassThenDeadline) {
  StreamServer::Limits limits;
  limits.workers = 2;
  limits.priority_aging = std::chrono::hours(1);  // strict priority: no class's turn is overdue
  auto started = StreamServer::start("127.0.0.1", limits);
  ASSERT_TRUE(started.ok()) << started.error().to_string();
  StreamServer& server = **started;
  constexpr uint64_t kPart = 4096;
  struct Waiting {
    const char* name;
    Priority priority;
    std::chrono::seconds due;
  };
  // The order they come in; the order expected is latency, bulk due in 5 s, bulk due in 9 s,
  // background.
  const Waiting waiting[] = {{"background", Priority::kBackground, 15s},
                             {"bulk-9s", Priority::kBulk, 9s},
                             {"latency", Priority::kLatency, 9s},
                             {"bulk-5s", Priority::kBulk, 5s}};
  constexpr size_t kWaiting = std::size(waiting);
  std::vector<uint8_t> owner((kWaiting + 1) * kPart, 0);
  std::mutex mu;
  std::condition_variable noted_cv;
  std::vector<std::string> order;
  auto noted = [&](const std::string& name) {
    return [&mu, &noted_cv, &order, name](uint64_t, const Status& st, uint64_t) {
      EXPECT_TRUE(st.ok()) << name << ": " << st.error().to_string();
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(name);
      noted_cv.notify_all();
    };
  };
  const auto t0 = Clock::now();
  // The held write, its "go" read: the address's one worker is busy with it.
  uint64_t held = server.grant(owner.data() + kWaiting * kPart, kPart, StreamDirection::kIntoOwner,
                               t0 + 20s, noted("held"));
  auto hold = connect_tcp("127.0.0.1", server.port(), t0 + 5s);
  ASSERT_TRUE(hold.ok()) << hold.error().to_string();
  ASSERT_TRUE(
      write_request(*hold, StreamRequest{StreamDirection::kIntoOwner, held, kPart}, t0 + 5s).ok());
  auto go = read_status(*hold, t0 + 5s, "go");
  ASSERT_TRUE(go.ok() && go->ok());
  // The others, each on a connection of its own, claimed and waiting for that worker.
  std::vector<Socket> sockets;
  for (size_t i = 0; i < kWaiting; ++i) {
    uint64_t token = server.grant(owner.data() + i * kPart, kPart, StreamDirection::kIntoOwner,
                                  t0 + waiting[i].due, noted(waiting[i].name));
    auto c = connect_tcp("127.0.0.1", server.port(), t0 + 5s);
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    StreamRequest r{StreamDirection::kIntoOwner, token, kPart};
    r.priority = waiting[i].priority;
    ASSERT_TRUE(write_request(*c, r, t0 + 5s).ok());
    sockets.push_back(std::move(*c));
  }
  const auto until = Clock::now() + 10s;
  while (server.waiting_for_worker() < kWaiting && Clock::now() < until)
    std::this_thread::yield();
  ASSERT_EQ(server.waiting_for_worker(), kWaiting) << "not every request is waiting for a worker";
  // Each waiting client sends its bytes once its request is served ("go"); the held write's
  // bytes free the worker.
  std::vector<std::thread> clients;
  for (size_t i = 0; i < kWaiting; ++i)
    clients.emplace_back([&, i] {
      auto their_go = read_status(sockets[i], t0 + 20s, "go");
      ASSERT_TRUE(their_go.ok() && their_go->ok()) << waiting[i].name;
      std::vector<uint8_t> bytes(kPart, static_cast<uint8_t>(i + 1));
      ASSERT_TRUE(send_all(sockets[i], bytes.data(), kPart, t0 + 20s, "bytes").ok());
      auto final_status = read_status(sockets[i], t0 + 20s, "final");
      EXPECT_TRUE(final_status.ok() && final_status->ok()) << waiting[i].name;
    });
  std::vector<uint8_t> mine(kPart, 0xEE);
  ASSERT_TRUE(send_all(*hold, mine.data(), kPart, t0 + 5s, "held bytes").ok());
  for (auto& t : clients)
    t.join();
  // A grant's `done` runs after its final status was sent (the client may have read it first).
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(noted_cv.wait_until(lock, t0 + 20s, [&] { return order.size() == kWaiting + 1; }))
      << "not every grant's done ran: " << order.size();
  EXPECT_EQ(order,
            (std::vector<std::string>{"held", "latency", "bulk-5s", "bulk-9s", "background"}));
  for (size_t i = 0; i < kWaiting; ++i)
    for (uint64_t b = 0; b < kPart; ++b)
      ASSERT_EQ(owner[i * kPart + b], static_cast<uint8_t>(i + 1))
          << waiting[i].name << " byte " << b;
  for (uint64_t b = 0; b < kPart; ++b)
    ASSERT_EQ(owner[kWaiting * kPart + b], 0xEE) << "held byte " << b;
}

// stream_protocol.h: the direction word carries the request's class; an owner reads it back,
// and refuses a class it does not know, naming it.
TEST(StreamProtocolTest, ARequestCarriesItsPriorityClassAndAnUnknownOneIsRefused) {
  auto l = listen_tcp("127.0.0.1", 0);
  ASSERT_TRUE(l.ok());
  for (Priority p : {Priority::kLatency, Priority::kBulk, Priority::kBackground}) {
    auto c = connect_tcp("127.0.0.1", *local_port(*l), Clock::now() + 5s);
    ASSERT_TRUE(c.ok());
    auto s = accept_tcp(*l, -1);
    ASSERT_TRUE(s.ok());
    StreamRequest r(StreamDirection::kOutOfOwner, 77, 4096);
    r.priority = p;
    ASSERT_TRUE(write_request(*c, r, Clock::now() + 5s).ok());
    auto got = read_request(*s, Clock::now() + 5s);
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    EXPECT_EQ(got->priority, p);
    EXPECT_EQ(got->direction, StreamDirection::kOutOfOwner);
    EXPECT_EQ(got->token, 77u);
  }
  auto server = StreamServer::start("127.0.0.1");
  ASSERT_TRUE(server.ok());
  auto sock = connect_tcp("127.0.0.1", (*server)->port(), Clock::now() + 5s);
  ASSERT_TRUE(sock.ok());
  const uint8_t unknown[kRequestBytes] = {'C', 'R', 'S', '2', 2, 7, 0, 0, 42};  // class 7
  ASSERT_TRUE(send_all(*sock, unknown, sizeof(unknown), Clock::now() + 5s, "request").ok());
  auto answer = read_status(*sock, Clock::now() + 5s, "answer");
  ASSERT_TRUE(answer.ok()) << answer.error().to_string();
  ASSERT_FALSE(answer->ok());
  EXPECT_EQ(answer->error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(answer->error().message().find("priority class 7 is none of"), std::string::npos)
      << answer->error().message();
}

TEST(StreamProtocolTest, AForeignClientIsToldWhatIsWrong) {
  auto server = StreamServer::start("127.0.0.1");
  ASSERT_TRUE(server.ok());
  auto sock = connect_tcp("127.0.0.1", (*server)->port(), Clock::now() + 5s);
  ASSERT_TRUE(sock.ok());
  const char junk[] = "GET / HTTP/1.0\r\n\r\n......";
  ASSERT_TRUE(send_all(*sock, junk, 24, Clock::now() + 5s, "junk").ok());
  // The answer says why, then the server drops the connection (it cannot be in sync any more).
  auto answer = read_status(*sock, Clock::now() + 5s, "answer");
  ASSERT_TRUE(answer.ok()) << answer.error().to_string();
  ASSERT_FALSE(answer->ok());
  EXPECT_EQ(answer->error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(answer->error().message().find("not a caf-rdma stream request"), std::string::npos);
  char b;
  Status st = recv_all(*sock, &b, 1, Clock::now() + 5s, "after the answer");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kPeerUnavailable) << st.error().to_string();
  EXPECT_FALSE(StreamServer::start("not-an-address").ok());
}

}  // namespace
}  // namespace caf_rdma
