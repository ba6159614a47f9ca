// transfer_loop: the requester side of the two-host lane's link-down check
// (tests/two_hosts/two_hosts_guest.sh): writes a pattern into buffer_owner's "data" buffer and
// reads it back, round after round, every byte checked, until a transfer fails or --rounds
// rounds passed.
//   transfer_loop --owner HOST:PORT [--rounds N] [--timeout-ms MS]
// Prints "round <n> ok: <bytes> bytes written and read back (paths <w>/<r>), every byte checked"
// per round; the first failing transfer prints "ERROR round <n> <write|read> after <s> s:
// <error>" and exits 3 (a round whose bytes do not match prints "MISMATCH ..." and exits 4);
// all rounds passing exits 0.
//
// Invariants:
//  1. Each round writes a pattern that differs from the previous round's (the round number is
//     in it) and reads into memory poisoned beforehand: a round cannot pass on stale bytes.
//  2. Every transfer has a timeout (--timeout-ms, default 30000): the loop never hangs on one.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "actors/rdma_client.h"
#include "actors/rdma_node.h"
#include "support/flags.h"

using namespace caf_rdma;
using Clock = std::chrono::steady_clock;

namespace {

uint8_t pattern(uint64_t round, uint64_t i) {
  return static_cast<uint8_t>((i * 131 + round * 29 + 7) ^ (i >> 11));
}

int fail(const Error& e) {
  std::printf("ERROR transfer_loop: %s\n", e.to_string().c_str());
  std::fflush(stdout);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = Flags::parse(argc, argv, {"--owner", "--rounds", "--timeout-ms"}, {});
  if (!flags.ok() || !flags->has("--owner")) {
    std::fprintf(stderr, "usage: transfer_loop --owner HOST:PORT [--rounds N] [--timeout-ms MS]\n");
    return 2;
  }
  auto rounds = flags->get_u64("--rounds", 1000000);
  auto timeout_ms = flags->get_u64("--timeout-ms", 30000);
  auto owner = parse_host_port(flags->get("--owner", ""));
  if (!rounds.ok() || !timeout_ms.ok() || !owner.ok())
    return fail(!rounds.ok()       ? rounds.error()
                : !timeout_ms.ok() ? timeout_ms.error()
                                   : owner.error());
  auto node = RdmaNode::start();  // the defaults and the CAF_RDMA_* environment
  if (!node.ok())
    return fail(node.error());
  auto mgr = (*node)->remote_manager(owner->first, owner->second);
  if (!mgr.ok())
    return fail(mgr.error());
  auto data = RdmaClient((*node)->system(), *mgr).get("data", 30000);
  if (!data.ok())
    return fail(data.error());
  RdmaClient me((*node)->system(), (*node)->manager());
  std::vector<uint8_t> src(data->size), back(data->size);
  auto hs = me.register_buffer(src.data(), src.size());
  auto hb = me.register_buffer(back.data(), back.size());
  if (!hs.ok() || !hb.ok())
    return fail(!hs.ok() ? hs.error() : hb.error());
  const auto timeout = std::chrono::milliseconds(*timeout_ms);
  for (uint64_t n = 1; n <= *rounds; ++n) {
    for (uint64_t i = 0; i < src.size(); ++i)
      src[i] = pattern(n, i);
    std::memset(back.data(), 0xA5, back.size());  // invariant 1
    for (const char* op : {"write", "read"}) {
      auto t0 = Clock::now();
      auto r = std::strcmp(op, "write") == 0 ? me.write(*hs, *data, Range::whole(), timeout)
                                             : me.read(*hb, *data, Range::whole(), timeout);
      if (!r.ok()) {
        double s = std::chrono::duration<double>(Clock::now() - t0).count();
        std::printf("ERROR round %llu %s after %.1f s: %s\n", static_cast<unsigned long long>(n),
                    op, s, r.error().to_string().c_str());
        std::fflush(stdout);
        return 3;
      }
      if (std::strcmp(op, "read") == 0) {
        if (back != src) {
          uint64_t i = 0;
          while (back[i] == src[i])
            ++i;
          std::printf("MISMATCH round %llu: byte %llu is %u, expected %u\n",
                      static_cast<unsigned long long>(n), static_cast<unsigned long long>(i),
                      back[i], src[i]);
          std::fflush(stdout);
          return 4;
        }
        std::printf(
            "round %llu ok: %zu bytes written and read back (path %s), every byte checked\n",
            static_cast<unsigned long long>(n), src.size(), r->path.c_str());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
