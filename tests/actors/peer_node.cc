// Test helper: a node that registers one patterned buffer, publishes its handle as
// "peer-buffer" in its directory, prints "READY <port>", and runs until killed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "actors/rdma_client.h"
#include "actors/rdma_node.h"

using namespace caf_rdma;

int main(int argc, char** argv) {
  uint64_t size = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (8 << 20);
  uint32_t seed = argc > 2 ? static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10)) : 1;
  std::vector<uint8_t> memory(size);
  for (uint64_t i = 0; i < size; ++i)
    memory[i] = static_cast<uint8_t>(i * 7 + seed);
  NodeOptions o;
  auto env = ManagerOptions::from_env();
  if (!env.ok()) {
    std::fprintf(stderr, "peer_node: %s\n", env.error().to_string().c_str());
    return 1;
  }
  o.manager = *env;
  auto node = RdmaNode::start(o);
  if (!node.ok()) {
    std::fprintf(stderr, "peer_node: %s\n", node.error().to_string().c_str());
    return 1;
  }
  RdmaClient client((*node)->system(), (*node)->manager());
  auto h = client.request_buffer(memory.data(), size);
  if (!h.ok() || !client.put("peer-buffer", *h).ok()) {
    std::fprintf(stderr, "peer_node: cannot register or publish the buffer\n");
    return 1;
  }
  std::printf("READY %u\n", (*node)->port());
  std::fflush(stdout);
  // Until killed (the tests kill it); a bound keeps a forgotten one from living forever.
  std::this_thread::sleep_for(std::chrono::minutes(10));
  return 0;
}
