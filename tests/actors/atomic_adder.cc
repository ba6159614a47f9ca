// Test helper for atomics_test: a node that adds 1 to a remote counter many times, from
// several threads at once (each its own RdmaClient, so its own actor), and prints every old
// value it got back.
//   atomic_adder HOST PORT NAME OFFSET THREADS ADDS_PER_THREAD
// Reads the handle published as NAME in the directory of the manager at HOST:PORT, adds 1 to
// its word at OFFSET, prints "OLD <value>" per fetch_add, then "DONE"; on any error
// "ERROR <what>" and exit 1.
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/rdma_client.h"
#include "actors/rdma_node.h"

using namespace caf_rdma;

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: atomic_adder HOST PORT NAME OFFSET THREADS ADDS_PER_THREAD\n");
    return 2;
  }
  const std::string host = argv[1];
  const auto port = static_cast<uint16_t>(std::strtoul(argv[2], nullptr, 10));
  const std::string name = argv[3];
  const uint64_t offset = std::strtoull(argv[4], nullptr, 10);
  const int threads = std::atoi(argv[5]);
  const int adds = std::atoi(argv[6]);
  NodeOptions o;
  auto env = ManagerOptions::from_env();
  if (!env.ok()) {
    std::printf("ERROR %s\n", env.error().to_string().c_str());
    return 1;
  }
  o.manager = *env;
  auto node = RdmaNode::start(o);
  if (!node.ok()) {
    std::printf("ERROR %s\n", node.error().to_string().c_str());
    return 1;
  }
  auto owner = (*node)->remote_manager(host, port);
  if (!owner.ok()) {
    std::printf("ERROR %s\n", owner.error().to_string().c_str());
    return 1;
  }
  auto counter = RdmaClient((*node)->system(), *owner).get(name, 10000);
  if (!counter.ok()) {
    std::printf("ERROR %s\n", counter.error().to_string().c_str());
    return 1;
  }
  std::mutex mu;
  std::vector<uint64_t> olds;
  std::string failure;
  std::vector<std::thread> workers;
  workers.reserve(threads > 0 ? static_cast<size_t>(threads) : 0);
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      RdmaClient me((*node)->system(), (*node)->manager());
      std::vector<uint64_t> mine;
      for (int i = 0; i < adds; ++i) {
        auto old = me.fetch_add(*counter, offset, 1, std::chrono::seconds(60));
        if (!old.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          failure = old.error().to_string();
          return;
        }
        mine.push_back(*old);
      }
      std::lock_guard<std::mutex> lock(mu);
      olds.insert(olds.end(), mine.begin(), mine.end());
    });
  for (auto& w : workers)
    w.join();
  if (!failure.empty()) {
    std::printf("ERROR %s\n", failure.c_str());
    return 1;
  }
  for (uint64_t v : olds)
    std::printf("OLD %llu\n", static_cast<unsigned long long>(v));
  std::printf("DONE\n");
  std::fflush(stdout);
  return 0;
}
