// rdma_hello: the smallest end-to-end RDMA WRITE with caf-rdma's components.
//
// Opens the default device (or CAF_RDMA_DEVICE), connects two RC queue pairs to each other,
// RDMA-WRITEs a message from one registered buffer into another, reads it back with RDMA READ,
// and verifies both. Exit code 0 on success; 2 with a clear message when no device exists.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "components/rdma_domain.h"
#include "components/rdma_queue_pair.h"

using namespace caf_rdma;

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf(
        "usage: rdma_hello [--size BYTES]\n"
        "  RDMA-WRITEs BYTES (default 1 MiB) between two queue pairs on one device and\n"
        "  reads them back. Device: CAF_RDMA_DEVICE, else the first with an ACTIVE port.\n");
    return 0;
  }
  uint64_t size = 1 << 20;
  if (argc > 2 && std::strcmp(argv[1], "--size") == 0)
    size = std::stoull(argv[2]);
  auto config = IbverbsConfig::from_env();
  if (!config.ok()) {
    std::fprintf(stderr, "rdma_hello: %s\n", config.error().to_string().c_str());
    return 2;
  }
  auto domain = RdmaDomain::open(*config);
  if (!domain.ok()) {
    std::fprintf(stderr, "rdma_hello: %s\n", domain.error().to_string().c_str());
    return 2;
  }
  std::printf("device: %s\n", (*domain)->describe().c_str());
  auto a = RdmaQueuePair::create(*domain);
  auto b = RdmaQueuePair::create(*domain);
  if (!a.ok() || !b.ok()) {
    std::fprintf(stderr, "rdma_hello: %s\n", (!a.ok() ? a.error() : b.error()).to_string().c_str());
    return 1;
  }
  if (Status st = RdmaQueuePair::connect_pair(**a, **b); !st.ok()) {
    std::fprintf(stderr, "rdma_hello: %s\n", st.error().to_string().c_str());
    return 1;
  }
  std::vector<uint8_t> src(size), dst(size, 0), back(size, 0);
  const char* text = "hello from caf-rdma over ";
  for (uint64_t i = 0; i < size; ++i)
    src[i] = static_cast<uint8_t>(i * 31 + 7);
  std::string greeting = text + (*domain)->device_name();
  std::memcpy(src.data(), greeting.c_str(), std::min<uint64_t>(size, greeting.size() + 1));
  auto s = (*domain)->register_buffer(src.data(), size);
  auto d = (*domain)->register_buffer(dst.data(), size);
  auto r = (*domain)->register_buffer(back.data(), size);
  if (!s.ok() || !d.ok() || !r.ok()) {
    std::fprintf(stderr, "rdma_hello: registration failed\n");
    return 1;
  }
  OpResult w = (*a)->execute(RdmaOp::write({*s, 0, size}, d->remote()), std::chrono::seconds(30));
  if (!w.status.ok()) {
    std::fprintf(stderr, "rdma_hello: %s\n", w.status.error().to_string().c_str());
    return 1;
  }
  OpResult rd = (*b)->execute(RdmaOp::read({*r, 0, size}, d->remote()), std::chrono::seconds(30));
  if (!rd.status.ok()) {
    std::fprintf(stderr, "rdma_hello: %s\n", rd.status.error().to_string().c_str());
    return 1;
  }
  bool ok = src == dst && src == back;
  std::printf("RDMA WRITE %llu bytes -> \"%.60s\"\nRDMA READ back: %s\n",
              static_cast<unsigned long long>(size), reinterpret_cast<const char*>(dst.data()),
              ok ? "verified" : "MISMATCH");
  return ok ? 0 : 1;
}
