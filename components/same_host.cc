// Same-host endpoints of the stream channel (see same_host.h).
#include "components/same_host.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "components/secure_random.h"

namespace caf_rdma {

namespace {

Error errno_error(const std::string& what, int err) {
  return Error(ErrorCode::kInternal,
               "same-host stream channel: " + what + ": " + errno_string(err));
}

/// The abstract address of `name`: sun_path starts with a NUL (invariant 2).
Result<std::pair<sockaddr_un, socklen_t>> abstract_address(const std::string& name) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (name.empty() || name.size() + 1 > sizeof(addr.sun_path))
    return Error(ErrorCode::kInvalidArgument,
                 "same-host stream channel: endpoint name of " + std::to_string(name.size()) +
                     " bytes (1.." + std::to_string(sizeof(addr.sun_path) - 1) + " allowed)");
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  return std::make_pair(addr,
                        static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size()));
}

std::string read_identity() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot;
  if (!(in >> boot) || boot.empty())
    return "";
  struct stat st {};
  if (::stat("/proc/self/ns/net", &st) != 0)
    return "";
  return boot + "/net:" + std::to_string(static_cast<unsigned long long>(st.st_ino));
}

/// Whether `st` is a permission_denied whose text starts with `prefix` (the two refusals below).
bool refusal_starting(const Status& st, const char* prefix) {
  return !st.ok() && st.error().code() == ErrorCode::kPermissionDenied &&
         st.error().message().rfind(prefix, 0) == 0;
}

}  // namespace

bool is_other_uid_refusal(const Status& st) {
  return refusal_starting(st, kOtherUidRefusal);
}

const std::string& host_identity() {
  static const std::string identity = read_identity();
  return identity;
}

std::string same_host_endpoint(const std::string& owner_host_id, const std::string& unix_name) {
  if (owner_host_id.empty() || unix_name.empty() || owner_host_id != host_identity())
    return "";
  return unix_name;
}

Result<Socket> listen_unix(std::string* name) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "caf-rdma-stream-%d-%016llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(secure_random_u64()));
  CAF_RDMA_ASSIGN_OR_RETURN(auto addr, abstract_address(buf));
  Socket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid())
    return errno_error("socket(AF_UNIX)", errno);
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&addr.first), addr.second) != 0)
    return errno_error(std::string("bind @") + buf, errno);
  if (::listen(s.fd(), 64) != 0)
    return errno_error(std::string("listen @") + buf, errno);
  *name = buf;
  return s;
}

Result<Socket> connect_unix(const std::string& name, Deadline deadline) {
  const std::string where = "connect to @" + name;
  CAF_RDMA_ASSIGN_OR_RETURN(auto addr, abstract_address(name));
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0)
    return Error(ErrorCode::kTimeout, where + ": no time left before the deadline");
  // Blocking, bounded by SO_SNDTIMEO (which a unix connect obeys): a listener whose backlog is
  // full takes the connection when it accepts, or the wait ends at the deadline. A
  // non-blocking unix connect would fail with EAGAIN there instead of waiting.
  Socket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid())
    return errno_error("socket(AF_UNIX)", errno);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(std::min<int64_t>(left.count() / 1000000, 3600));
  tv.tv_usec = static_cast<suseconds_t>(left.count() % 1000000);
  ::setsockopt(s.fd(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (::connect(s.fd(), reinterpret_cast<sockaddr*>(&addr.first), addr.second) != 0) {
    const int err = errno;
    if (err == EAGAIN || err == EINPROGRESS || err == ETIMEDOUT)
      return Error(ErrorCode::kTimeout, where + ": no answer before the deadline");
    if (err == ECONNREFUSED || err == ENOENT || err == ECONNRESET)
      return Error(ErrorCode::kPeerUnavailable, where + ": " + errno_string(err));
    return errno_error(where, err);
  }
  const timeval none{};
  ::setsockopt(s.fd(), SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none));
  ::fcntl(s.fd(), F_SETFL, ::fcntl(s.fd(), F_GETFL) | O_NONBLOCK);
  return s;
}

Result<PeerCredentials> peer_credentials(const Socket& s) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(s.fd(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return errno_error("SO_PEERCRED", errno);
  return PeerCredentials{cred.pid, cred.uid};
}

Status listener_is_own_uid(const Socket& s, const std::string& name) {
  CAF_RDMA_ASSIGN_OR_RETURN(PeerCredentials cred, peer_credentials(s));
  if (cred.uid == ::geteuid())
    return {};
  return Error(ErrorCode::kPermissionDenied,
               kForeignListener + ("@" + name) + " is held by pid " + std::to_string(cred.pid) +
                   " of uid " + std::to_string(cred.uid) + ", not by this process's uid " +
                   std::to_string(::geteuid()) +
                   ": not its owner (an owner serves only its own uid), so nothing was sent to "
                   "it");
}

bool is_foreign_listener(const Status& st) {
  return refusal_starting(st, kForeignListener);
}

}  // namespace caf_rdma
