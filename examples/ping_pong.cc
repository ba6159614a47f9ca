// ping_pong: two processes. "pong" registers a buffer and publishes its handle; "ping" writes a
// pattern into it with one transfer and reads it back with another; both verify. Ping tells
// pong it is done on pong's stdin (a peer cannot put names into another node's directory).
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "actors/rdma_client.h"
#include "actors/rdma_node.h"
#include "support/child_process.h"
#include "support/flags.h"

using namespace caf_rdma;

namespace {

constexpr const char* kUsage =
    "usage: ping_pong [--size BYTES] [--timeout-ms MS]\n"
    "         starts the pong process, then plays ping against it\n"
    "       ping_pong --pong [--size BYTES]      owner side: prints 'READY <port>', then checks\n"
    "                                            its buffer when a line arrives on stdin\n"
    "       ping_pong --ping HOST:PORT [--size BYTES]\n"
    "  Transport: CAF_RDMA_TRANSPORT=auto|rdma|fallback (default auto: RDMA when both sides\n"
    "  have a device). Device: CAF_RDMA_DEVICE. Exit code 0 when every byte was verified.\n";

uint8_t pattern(uint64_t i) {
  return static_cast<uint8_t>(i * 131 + 17);
}

int fail(const char* who, const Error& e) {
  std::fprintf(stderr, "%s: %s\n", who, e.to_string().c_str());
  return 1;
}

int pong(uint64_t size) {
  std::vector<uint8_t> buffer(size, 0);  // registered memory outlives the node
  auto node = RdmaNode::start();         // the defaults and the CAF_RDMA_* environment
  if (!node.ok())
    return fail("pong", node.error());
  RdmaClient client((*node)->system(), (*node)->manager());
  auto h = client.register_buffer(buffer.data(), size);  // releases itself when it goes
  if (!h.ok())
    return fail("pong", h.error());
  if (Status st = client.put("pong-buffer", *h); !st.ok())
    return fail("pong", st.error());
  std::printf("READY %u\n", (*node)->port());
  std::fflush(stdout);
  // Wait (bounded) for ping to say it is done (a line on stdin), then check what landed in our
  // memory.
  pollfd in{STDIN_FILENO, POLLIN, 0};
  char line[64];
  if (::poll(&in, 1, 120000) <= 0 || ::read(STDIN_FILENO, line, sizeof(line)) <= 0)
    return fail("pong", Error(ErrorCode::kTimeout, "no 'done' line from ping on stdin in 120 s"));
  // The owner's contract: touch registered memory again only after release returned (the
  // channel's server may still be returning from the send of a READ's bytes).
  if (Status released = h->release(); !released.ok())
    return fail("pong", released.error());
  for (uint64_t i = 0; i < size; ++i)
    if (buffer[i] != pattern(i)) {
      std::fprintf(stderr, "pong: byte %llu is %u, expected %u\n",
                   static_cast<unsigned long long>(i), buffer[i], pattern(i));
      return 1;
    }
  std::printf("pong: %llu bytes written by ping verified in place\n",
              static_cast<unsigned long long>(size));
  std::fflush(stdout);
  return 0;
}

int ping(const std::string& target, uint64_t size, uint32_t timeout_ms) {
  auto hp = parse_host_port(target);
  if (!hp.ok())
    return fail("ping", hp.error());
  std::vector<uint8_t> src(size), back(size, 0);  // registered memory outlives the node
  auto node = RdmaNode::start();                  // the defaults and the CAF_RDMA_* environment
  if (!node.ok())
    return fail("ping", node.error());
  auto remote_mgr = (*node)->remote_manager(hp->first, hp->second);
  if (!remote_mgr.ok())
    return fail("ping", remote_mgr.error());
  RdmaClient remote((*node)->system(), *remote_mgr);
  RdmaClient local((*node)->system(), (*node)->manager());
  auto target_buf = remote.get("pong-buffer", 30000);
  if (!target_buf.ok())
    return fail("ping", target_buf.error());
  for (uint64_t i = 0; i < size; ++i)
    src[i] = pattern(i);
  auto hs = local.register_buffer(src.data(), size);
  auto hb = local.register_buffer(back.data(), size);
  if (!hs.ok() || !hb.ok())
    return fail("ping", !hs.ok() ? hs.error() : hb.error());
  auto w = local.write(*hs, *target_buf, Range::whole(), std::chrono::milliseconds(timeout_ms));
  if (!w.ok())
    return fail("ping", w.error());
  auto r = local.read(*hb, *target_buf, Range::whole(), std::chrono::milliseconds(timeout_ms));
  if (!r.ok())
    return fail("ping", r.error());
  bool ok = back == src;
  std::printf("ping: wrote %llu bytes into %s (path %s), read them back (path %s): %s\n",
              static_cast<unsigned long long>(w->bytes), describe(*target_buf).c_str(),
              w->path.c_str(), r->path.c_str(), ok ? "verified" : "MISMATCH");
  std::fflush(stdout);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags =
      Flags::parse(argc, argv, {"--size", "--ping", "--timeout-ms"}, {"--pong", "--help", "-h"});
  if (!flags.ok()) {
    std::fprintf(stderr, "ping_pong: %s\n%s", flags.error().message().c_str(), kUsage);
    return 2;
  }
  if (flags->has("--help") || flags->has("-h")) {
    std::printf("%s", kUsage);
    return 0;
  }
  auto size = flags->get_u64("--size", 1 << 20);
  auto timeout = flags->get_u64("--timeout-ms", 30000);
  if (!size.ok() || !timeout.ok() || *size == 0) {
    std::fprintf(stderr, "ping_pong: %s\n",
                 !size.ok()      ? size.error().message().c_str()
                 : !timeout.ok() ? timeout.error().message().c_str()
                                 : "--size must be > 0");
    return 2;
  }
  if (flags->has("--pong"))
    return pong(*size);
  if (flags->has("--ping"))
    return ping(flags->get("--ping", ""), *size, static_cast<uint32_t>(*timeout));
  // Both roles: start pong as a child process, wait for its port, play ping.
  auto child = ChildProcess::start({self_executable(), "--pong", "--size", std::to_string(*size)});
  if (!child.ok())
    return fail("ping_pong", child.error());
  auto line = child->read_line(std::chrono::seconds(60));
  if (!line.ok() || line->rfind("READY ", 0) != 0)
    return fail("ping_pong",
                line.ok() ? Error(ErrorCode::kInternal, "pong said: " + *line) : line.error());
  int rc = ping("127.0.0.1:" + line->substr(6), *size, static_cast<uint32_t>(*timeout));
  if (Status st = child->write_line("done"); !st.ok())
    return fail("ping_pong", st.error());
  auto pong_line = child->read_line(std::chrono::seconds(60));
  if (pong_line.ok())
    std::printf("%s\n", pong_line->c_str());
  auto pong_rc = child->wait_for(std::chrono::seconds(30));
  if (!pong_rc || *pong_rc != 0) {
    std::fprintf(stderr, "ping_pong: pong process %s\n",
                 pong_rc ? ("exited with " + std::to_string(*pong_rc)).c_str() : "did not exit");
    return 1;
  }
  std::printf("ping_pong: OK\n");
  return rc;
}
