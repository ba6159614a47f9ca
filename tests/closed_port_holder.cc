// closed_port_holder [SECONDS]: holds a ClosedPort (bound, not listening) for shell tests of
// "nobody listens there": prints its number on a line of its own, then keeps it bound until it
// is killed or SECONDS (default 300) have passed, so no other process can take it meanwhile.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "tests/closed_port.h"

int main(int argc, char** argv) {
  long seconds = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 300;
  if (seconds <= 0 || seconds > 3600) {
    std::fprintf(stderr, "closed_port_holder: SECONDS must be in 1..3600, not '%s'\n", argv[1]);
    return 2;
  }
  caf_rdma::testing::ClosedPort port;
  if (port.port() == 0) {
    std::fprintf(stderr, "closed_port_holder: could not bind a port of 127.0.0.1\n");
    return 1;
  }
  std::printf("%u\n", static_cast<unsigned>(port.port()));
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(seconds));  // holding the port, no waiting
  return 0;
}
