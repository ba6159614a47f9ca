// buffer_owner: the owner side of the two-host lane (tests/two_hosts/two_hosts_guest.sh): a
// node published on --host that owns a counter word and a data buffer for peers on another host.
//   buffer_owner --host ADDR [--size BYTES] [--wait-s S]
// Registers "counter" (64 bytes, word 0 starts at 0; atomic_adder adds to it) and "data"
// (--size bytes, default 1M; transfer_loop writes and reads it), puts both names into its
// manager's directory, prints "READY <manager port>", then waits (at most --wait-s, default 600)
// for a line on stdin, prints "COUNTER <word 0>" and exits 0.
//
// Invariants:
//  1. The counter is read through the owner's own manager (a fetch-add of 0), as atomics_test
//     does: the peers' atomics were applied by the NIC on the manager's queue pairs, and only a
//     request to the manager orders this read after them.
//  2. Registered memory is declared before the node (outlives it).
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "actors/rdma_client.h"
#include "actors/rdma_node.h"
#include "support/flags.h"

using namespace caf_rdma;

namespace {

int fail(const Error& e) {
  std::printf("ERROR buffer_owner: %s\n", e.to_string().c_str());
  std::fflush(stdout);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = Flags::parse(argc, argv, {"--host", "--size", "--wait-s"}, {});
  if (!flags.ok() || !flags->has("--host")) {
    std::fprintf(stderr, "usage: buffer_owner --host ADDR [--size BYTES] [--wait-s S]\n");
    return 2;
  }
  auto size = flags->get_u64("--size", 1 << 20);
  auto wait_s = flags->get_u64("--wait-s", 600);
  if (!size.ok() || !wait_s.ok() || *size == 0)
    return fail(!size.ok() ? size.error() : wait_s.error());
  std::vector<uint64_t> counter(8, 0);
  std::vector<uint8_t> data(*size, 0);
  auto options = NodeOptions::from_env();
  if (!options.ok())
    return fail(options.error());
  options->host = flags->get("--host", "");
  auto node = RdmaNode::start(*options);
  if (!node.ok())
    return fail(node.error());
  RdmaClient me((*node)->system(), (*node)->manager());
  auto ch = me.register_buffer(counter.data(), counter.size() * sizeof(uint64_t));
  auto dh = me.register_buffer(data.data(), data.size());
  if (!ch.ok() || !dh.ok())
    return fail(!ch.ok() ? ch.error() : dh.error());
  for (auto [name, handle] : {std::pair<const char*, const BufferHandle*>{"counter", &ch->handle()},
                              {"data", &dh->handle()}})
    if (Status st = me.put(name, *handle); !st.ok())
      return fail(st.error());
  std::printf("READY %u\n", (*node)->port());
  std::fflush(stdout);
  pollfd in{STDIN_FILENO, POLLIN, 0};
  char line[64];
  if (::poll(&in, 1, static_cast<int>(*wait_s * 1000)) <= 0 ||
      ::read(STDIN_FILENO, line, sizeof(line)) <= 0)
    return fail(
        Error(ErrorCode::kTimeout, "no line on stdin within " + std::to_string(*wait_s) + " s"));
  auto total = me.fetch_add(*ch, 0, 0);  // invariant 1
  if (!total.ok())
    return fail(total.error());
  std::printf("COUNTER %llu\n", static_cast<unsigned long long>(*total));
  std::fflush(stdout);
  return 0;
}
