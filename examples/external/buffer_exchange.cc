// buffer_exchange: a program in a workspace of its own that uses caf-rdma (examples/external;
// README.md, "Use caf-rdma in your project"). Two processes move bytes between them:
//  - the owner (`buffer_exchange --owner`) starts a node, registers a buffer, puts its handle
//    into its node's directory as "shared" and prints `READY <port>`: its manager's port, which
//    the node bound itself (port 0: the system chose it);
//  - the user (`buffer_exchange`, which starts the owner itself) starts a node of its own, gets
//    the handle from the owner's manager at 127.0.0.1:<port>, writes a pattern into the owner's
//    buffer, reads it back into a buffer of its own and checks every byte; then it tells the
//    owner (a line on the owner's stdin), which checks every byte in its own memory.
// Exit code 0 when both checked every byte. Transport: CAF_RDMA_TRANSPORT=auto (default: RDMA
// when both processes have a device, else the fallback over TCP), rdma or fallback.
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "caf_rdma.h"
#include "support/child_process.h"

namespace {

using caf_rdma::Error;
using caf_rdma::ErrorCode;

constexpr uint64_t kSize = 1 << 20;      // bytes of the owner's buffer
constexpr uint32_t kTransferMs = 30000;  // each read and write
constexpr int kOwnerWaitMs = 120000;     // the owner's wait for the user's "done"
constexpr auto kLineWait = std::chrono::seconds(60);

uint8_t pattern(uint64_t i) {
  return static_cast<uint8_t>(i * 131 + 17);
}

int fail(const char* who, const Error& error) {
  std::fprintf(stderr, "%s: %s\n", who, error.to_string().c_str());
  return 1;
}

// The index of the first byte of `bytes` that is not the pattern, or bytes.size().
uint64_t first_wrong_byte(const std::vector<uint8_t>& bytes) {
  for (uint64_t i = 0; i < bytes.size(); ++i)
    if (bytes[i] != pattern(i))
      return i;
  return bytes.size();
}

int owner() {
  std::vector<uint8_t> memory(kSize, 0);  // registered memory outlives the node
  // A node on 127.0.0.1, its manager on a port the system chooses, with the CAF_RDMA_*
  // environment variables (transport, device, ...) applied.
  auto node = caf_rdma::RdmaNode::start();
  if (!node.ok())
    return fail("owner", node.error());
  caf_rdma::RdmaClient client((*node)->system(), (*node)->manager());
  auto shared = client.register_buffer(memory.data(), memory.size());  // released when it goes
  if (!shared.ok())
    return fail("owner", shared.error());
  if (caf_rdma::Status st = client.put("shared", *shared); !st.ok())
    return fail("owner", st.error());
  std::printf("READY %u\n", (*node)->port());
  std::fflush(stdout);
  // The user's "done" line (or the end of stdin), within kOwnerWaitMs.
  pollfd in{STDIN_FILENO, POLLIN, 0};
  char line[64];
  if (::poll(&in, 1, kOwnerWaitMs) <= 0 || ::read(STDIN_FILENO, line, sizeof(line)) <= 0)
    return fail("owner", Error(ErrorCode::kTimeout, "no line from the user on stdin"));
  // Touch registered memory again only after release returned.
  if (caf_rdma::Status released = shared->release(); !released.ok())
    return fail("owner", released.error());
  if (uint64_t i = first_wrong_byte(memory); i != memory.size()) {
    std::fprintf(stderr, "owner: byte %llu is %u, expected %u\n",
                 static_cast<unsigned long long>(i), memory[i], pattern(i));
    return 1;
  }
  std::printf("owner: all %llu bytes the user wrote checked in place\n",
              static_cast<unsigned long long>(memory.size()));
  std::fflush(stdout);
  return 0;
}

// Writes the pattern into the owner's buffer and reads it back; checks every byte.
int exchange(caf_rdma::RdmaNode& node, uint16_t owner_port) {
  std::vector<uint8_t> source(kSize), back(kSize, 0);  // registered memory outlives the node
  for (uint64_t i = 0; i < source.size(); ++i)
    source[i] = pattern(i);
  auto owner_manager = node.remote_manager("127.0.0.1", owner_port);
  if (!owner_manager.ok())
    return fail("user", owner_manager.error());
  caf_rdma::RdmaClient at_owner(node.system(), *owner_manager);
  auto shared = at_owner.get("shared", kTransferMs);
  if (!shared.ok())
    return fail("user", shared.error());
  caf_rdma::RdmaClient client(node.system(), node.manager());
  auto from = client.register_buffer(source.data(), source.size());
  auto into = client.register_buffer(back.data(), back.size());
  if (!from.ok() || !into.ok())
    return fail("user", !from.ok() ? from.error() : into.error());
  const auto timeout = std::chrono::milliseconds(kTransferMs);
  auto wrote = client.write(*from, *shared, caf_rdma::Range::whole(), timeout);
  if (!wrote.ok())
    return fail("user", wrote.error());
  auto read = client.read(*into, *shared, caf_rdma::Range::whole(), timeout);
  if (!read.ok())
    return fail("user", read.error());
  for (auto* r : {&*from, &*into})
    if (caf_rdma::Status released = r->release(); !released.ok())
      return fail("user", released.error());
  if (uint64_t i = first_wrong_byte(back); i != back.size()) {
    std::fprintf(stderr, "user: byte %llu read back is %u, expected %u\n",
                 static_cast<unsigned long long>(i), back[i], pattern(i));
    return 1;
  }
  std::printf(
      "user: wrote %llu bytes into the owner's buffer (path %s), read them back (path %s): "
      "every byte checked\n",
      static_cast<unsigned long long>(wrote->bytes), wrote->path.c_str(), read->path.c_str());
  std::fflush(stdout);
  return 0;
}

int user() {
  auto owner_process = caf_rdma::ChildProcess::start({caf_rdma::self_executable(), "--owner"});
  if (!owner_process.ok())
    return fail("user", owner_process.error());
  auto ready = owner_process->read_line(kLineWait);
  if (!ready.ok() || ready->rfind("READY ", 0) != 0) {
    auto owner_rc = owner_process->wait_for(std::chrono::seconds(5));
    std::fprintf(stderr, "user: the owner %s\n",
                 owner_rc ? ("exited with " + std::to_string(*owner_rc)).c_str() : "still runs");
    return fail("user", ready.ok() ? Error(ErrorCode::kInternal, "the owner said: " + *ready)
                                   : ready.error());
  }
  auto owner_address = caf_rdma::parse_host_port("127.0.0.1:" + ready->substr(6));
  if (!owner_address.ok())
    return fail("user", owner_address.error());
  int rc = 0;
  {
    // A node on 127.0.0.1, its manager on a port the system chooses, with the CAF_RDMA_*
    // environment variables (transport, device, ...) applied.
    auto node = caf_rdma::RdmaNode::start();
    if (!node.ok())
      return fail("user", node.error());
    rc = exchange(**node, owner_address->second);
  }
  if (caf_rdma::Status st = owner_process->write_line("done"); !st.ok())
    return fail("user", st.error());
  if (auto said = owner_process->read_line(kLineWait); said.ok())
    std::printf("%s\n", said->c_str());
  auto owner_rc = owner_process->wait_for(kLineWait);
  if (!owner_rc || *owner_rc != 0) {
    std::fprintf(stderr, "user: the owner %s\n",
                 owner_rc ? ("exited with " + std::to_string(*owner_rc)).c_str() : "did not exit");
    return 1;
  }
  if (rc == 0)
    std::printf("buffer_exchange: OK\n");
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--owner") == 0)
    return owner();
  if (argc != 1) {
    std::printf(
        "usage: buffer_exchange    starts the owner (buffer_exchange --owner), writes 1 MiB into\n"
        "                          its buffer and reads it back; both check every byte\n");
    return std::strcmp(argv[1], "--help") == 0 ? 0 : 2;
  }
  return user();
}
