// The published port of a node without TLS, with a connection budget (see plain_transport.h).
#include "actors/plain_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <caf/all.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor_impl.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/scribe_impl.hpp>

#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "actors/op_texts.h"
#include "actors/rdma_errors.h"
#include "components/socket_io.h"

namespace caf_rdma {

namespace {

using caf::io::network::default_multiplexer;
using caf::io::network::native_socket;
using Clock = std::chrono::steady_clock;

/// Who a connection's peer is, for the budgets: its IPv4 address (an IPv4-mapped IPv6 one
/// too), or the bytes of its IPv6 address.
std::string peer_key(native_socket fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return {};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    return std::string(reinterpret_cast<const char*>(&v4.sin_addr), 4);
  }
  if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    const auto* b = reinterpret_cast<const char*>(&v6.sin6_addr);
    if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr))
      return std::string(b + 12, 4);
    return std::string(b, 16);
  }
  return {};
}

/// The connections accepted on one published port (invariants 1-4).
class ConnectionBook {
public:
  explicit ConnectionBook(PlainTransportOptions limits) : limits_(limits) {}

  /// A newcomer from `ip` on `fd`: makes room (invariant 2) and books it; false when it must be
  /// closed instead (invariant 3). Its id for spoke() and gone() in `*id`.
  bool admit(native_socket fd, const std::string& ip, uint64_t* id) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Clock::now();
    // Invariant 2: silent for too long.
    for (auto& c : live_)
      if (!c.spoke && !c.shut && now - c.accepted >= limits_.silent_timeout)
        shut(c);
    size_t from_ip = 0;
    for (const auto& c : live_)
      from_ip += !c.shut && c.ip == ip;
    if (from_ip >= limits_.max_per_host)
      return false;
    std::map<std::string, size_t> silent;  // by address
    size_t total = 0;
    for (const auto& c : live_)
      if (!c.spoke && !c.shut) {
        ++silent[c.ip];
        ++total;
      }
    if (total >= limits_.max_silent || silent[ip] >= limits_.max_silent_per_host) {
      std::string victim = ip;
      if (silent[ip] < limits_.max_silent_per_host) {
        size_t most = 0;
        for (const auto& [addr, n] : silent)
          if (n > most) {
            most = n;
            victim = addr;
          }
      }
      for (auto& c : live_)  // in accept order: the oldest first
        if (!c.spoke && !c.shut && c.ip == victim) {
          shut(c);
          break;
        }
    }
    *id = next_id_++;
    live_.push_back(Entry{*id, fd, ip, now, false, false});
    return true;
  }
  /// The connection sent a byte: not silent any more.
  void spoke(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& c : live_)
      if (c.id == id) {
        c.spoke = true;
        return;
      }
  }
  /// Its scribe goes (before its fd is closed: invariant 4).
  void gone(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.remove_if([id](const Entry& c) { return c.id == id; });
  }

private:
  struct Entry {
    uint64_t id;
    native_socket fd;
    std::string ip;
    Clock::time_point accepted;
    bool spoke;
    bool shut;
  };
  /// Ends `c` (the mutex held): CAF's read of it fails and CAF closes it.
  static void shut(Entry& c) {
    ::shutdown(c.fd, SHUT_RDWR);
    c.shut = true;
  }

  std::mutex mu_;
  PlainTransportOptions limits_;
  std::list<Entry> live_;  ///< in accept order
  uint64_t next_id_ = 1;
};

/// CAF's TCP scribe, booked: its client handshake makes it speak, its end leaves the book.
class BookedScribe : public caf::io::network::scribe_impl {
public:
  BookedScribe(default_multiplexer& mx, native_socket fd, std::shared_ptr<ConnectionBook> book,
               uint64_t id)
      : scribe_impl(mx, fd), book_(std::move(book)), id_(id) {}
  ~BookedScribe() override { book_->gone(id_); }  // before scribe_impl closes the fd

  /// CAF hands over what BASP asked to read: first a header, then its payload (invariant 1).
  bool consume(caf::execution_unit* ctx, const void* buf, size_t n) override {
    if (reads_ < 2 && n > 0 && ++reads_ == 2)
      book_->spoke(id_);
    return scribe_impl::consume(ctx, buf, n);
  }

private:
  std::shared_ptr<ConnectionBook> book_;
  uint64_t id_;
  int reads_ = 0;
};

/// CAF's TCP doorman, whose connections go through the book first.
class BookedDoorman : public caf::io::network::doorman_impl {
public:
  BookedDoorman(default_multiplexer& mx, native_socket fd, std::shared_ptr<ConnectionBook> book)
      : doorman_impl(mx, fd), book_(std::move(book)) {}

  bool new_connection() override {
    const native_socket fd = acceptor_.accepted_socket();
    if (detached()) {
      caf::io::network::close_socket(fd);
      return false;
    }
    auto& mx = acceptor_.backend();
    uint64_t id = 0;
    if (!book_->admit(fd, peer_key(fd), &id)) {
      caf::io::network::close_socket(fd);  // invariant 3
      return false;
    }
    auto scribe = caf::make_counted<BookedScribe>(mx, fd, book_, id);
    auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    return doorman::new_connection(&mx, hdl);
  }

private:
  std::shared_ptr<ConnectionBook> book_;
};

class PlainMiddleman : public caf::io::middleman_actor_impl {
public:
  PlainMiddleman(caf::actor_config& cfg, caf::actor broker, PlainTransportOptions limits)
      : caf::io::middleman_actor_impl(cfg, std::move(broker)), limits_(limits) {}

  const char* name() const override { return "caf_rdma::plain_middleman"; }

protected:
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host, uint16_t port) override {
    const std::string where = host + ":" + std::to_string(port);
    auto ip = resolve_ipv4(host);
    if (!ip.ok())  // an IPv6 address or name: CAF's connect (no deadline of its own)
      return caf::io::middleman_actor_impl::connect(host, port);
    auto s = connect_tcp(*ip, port, Clock::now() + limits_.connect_timeout);
    if (!s.ok())
      return s.error().code() == ErrorCode::kTimeout
                 ? make_rdma_error(ErrorCode::kTimeout,
                                   no_answer_text("TCP", where, limits_.connect_timeout))
                 : to_caf_error(s.error());
    auto [fd, tls] = s->release();
    (void)tls;  // plain TCP: none
    return system().middleman().backend().new_scribe(fd);
  }

  caf::expected<caf::io::doorman_ptr> open(uint16_t port, const char* addr, bool reuse) override {
    auto& mx = static_cast<default_multiplexer&>(system().middleman().backend());
    auto acceptor = caf::io::network::new_tcp_acceptor_impl(port, addr, reuse);
    if (!acceptor)
      return std::move(acceptor.error());
    return caf::make_counted<BookedDoorman>(mx, *acceptor,
                                            std::make_shared<ConnectionBook>(limits_));
  }

private:
  PlainTransportOptions limits_;
};

}  // namespace

caf::io::middleman_actor spawn_plain_middleman(caf::actor_system& sys,
                                               PlainTransportOptions options) {
  auto broker = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  return sys.spawn<PlainMiddleman, caf::detached + caf::hidden>(std::move(broker), options);
}

}  // namespace caf_rdma
