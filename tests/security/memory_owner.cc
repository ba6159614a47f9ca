// Test helper: an owner node in a process of its own, so that a test can measure what peers make
// it hold (tests/security/memory_bound_test.cc).
//
//   memory_owner SIZE SEED PEER_WINDOW TOTAL_WINDOW WINDOW_WAIT_MS
//
// Registers one read-only buffer of SIZE bytes (byte i = i * 7 + SEED), publishes its handle as
// "owner-buffer", prints "READY <port>", then answers each line "mem" on stdin with
// "MEM <VmRSS> <heap in use> <heap free> <mmapped>" (glibc's mallinfo2, for messages) and exits
// at EOF on stdin.
#include <malloc.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "actors/rdma_client.h"
#include "actors/rdma_node.h"

using namespace caf_rdma;

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: memory_owner SIZE SEED PEER_WINDOW TOTAL_WINDOW WAIT_MS\n");
    return 2;
  }
  const uint64_t size = std::strtoull(argv[1], nullptr, 10);
  const auto seed = static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10));
  std::vector<uint8_t> memory(size);
  for (uint64_t i = 0; i < size; ++i)
    memory[i] = static_cast<uint8_t>(i * 7 + seed);
  NodeOptions o;
  auto env = ManagerOptions::from_env();
  if (!env.ok()) {
    std::fprintf(stderr, "memory_owner: %s\n", env.error().to_string().c_str());
    return 1;
  }
  o.manager = *env;
  o.manager.peer_window_bytes = std::strtoull(argv[3], nullptr, 10);
  o.manager.total_window_bytes = std::strtoull(argv[4], nullptr, 10);
  o.manager.window_wait = std::chrono::milliseconds(std::strtoull(argv[5], nullptr, 10));
  auto node = RdmaNode::start(o);
  if (!node.ok()) {
    std::fprintf(stderr, "memory_owner: %s\n", node.error().to_string().c_str());
    return 1;
  }
  RdmaClient client((*node)->system(), (*node)->manager());
  auto h = client.request_buffer(memory.data(), size, BufferAccess::kReadOnly);
  if (!h.ok() || !client.put("owner-buffer", *h).ok()) {
    std::fprintf(stderr, "memory_owner: cannot register or publish the buffer\n");
    return 1;
  }
  std::printf("READY %u\n", (*node)->port());
  std::fflush(stdout);
  for (std::string line; std::getline(std::cin, line);) {
    if (line != "mem")
      continue;
    std::ifstream statm("/proc/self/statm");
    uint64_t pages = 0, resident = 0;
    statm >> pages >> resident;
    struct mallinfo2 mi = mallinfo2();
    std::printf("MEM %llu %llu %llu %llu\n", static_cast<unsigned long long>(resident) * 4096,
                static_cast<unsigned long long>(mi.uordblks),
                static_cast<unsigned long long>(mi.fordblks),
                static_cast<unsigned long long>(mi.hblkhd));
    std::fflush(stdout);
  }
  return 0;
}
