// RdmaManagerActor: spawning a node's manager.
#pragma once

#include <caf/actor_system.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "actors/rdma_manager_interface.h"
#include "components/device_memory.h"
#include "components/priority.h"
#include "components/qp_traffic.h"
#include "components/tls_credentials.h"
#include "primitives/ibverbs_config.h"
#include "primitives/status.h"

namespace caf_rdma {

/// Environment variable choosing the transport: "auto" (default), "rdma", "fallback".
constexpr const char* kEnvTransport = "CAF_RDMA_TRANSPORT";
/// Fallback transport: bytes per CAF message (default 256 KiB) and messages in flight (32).
constexpr const char* kEnvFallbackChunk = "CAF_RDMA_FALLBACK_CHUNK";
constexpr const char* kEnvFallbackWindow = "CAF_RDMA_FALLBACK_WINDOW";
/// Fallback transfers of at least this many bytes use the stream channel (0: never).
constexpr const char* kEnvStreamMin = "CAF_RDMA_STREAM_MIN";
/// Microseconds the manager polls inline for the completion of a single small RDMA transfer.
constexpr const char* kEnvInlinePoll = "CAF_RDMA_INLINE_POLL_US";
/// Microseconds a latency-critical node busy-polls instead of sleeping (0, the default: off;
/// ManagerOptions::busy_poll).
constexpr const char* kEnvBusyPoll = "CAF_RDMA_BUSY_POLL_US";
/// The longest busy-poll window (CAF_RDMA_BUSY_POLL_US's bound).
constexpr uint64_t kMaxBusyPollUs = 10000;
/// Transfers up to this size are polled inline (see ManagerOptions::inline_poll).
constexpr uint64_t kInlinePollMaxBytes = 4096;
/// How late a transfer's timeout may fire (its deadline sweep is shared with other transfers).
constexpr std::chrono::milliseconds kDeadlineSlack{10};
/// "0": transfers between nodes of one host take TCP, not the same-host endpoint
/// (ManagerOptions::same_host).
constexpr const char* kEnvSameHost = "CAF_RDMA_SAME_HOST";
/// "1": verify mode (ManagerOptions::verify).
constexpr const char* kEnvVerify = "CAF_RDMA_VERIFY";
/// "1": release the buffers of an actor that ends without releasing them
/// (ManagerOptions::release_orphans).
constexpr const char* kEnvReleaseOrphans = "CAF_RDMA_RELEASE_ORPHANS";
/// CUDA device ordinal whose memory this node moves: picks the NIC closest to that GPU.
constexpr const char* kEnvGpu = "CAF_RDMA_GPU";
/// Longest timeout in milliseconds any request may ask for (ManagerOptions::max_timeout).
constexpr const char* kEnvMaxTimeout = "CAF_RDMA_MAX_TIMEOUT_MS";
/// Fallback fetch windows in bytes: per peer node, and over all peers as owner
/// (ManagerOptions::peer_window_bytes, total_window_bytes).
constexpr const char* kEnvPeerWindow = "CAF_RDMA_PEER_WINDOW";
constexpr const char* kEnvTotalWindow = "CAF_RDMA_TOTAL_WINDOW";
/// Queue pairs accepted from peers: per peer node, and in all (ManagerOptions::max_qps_per_node,
/// max_qps).
constexpr const char* kEnvMaxQpsPerNode = "CAF_RDMA_MAX_QPS_PER_NODE";
constexpr const char* kEnvMaxQps = "CAF_RDMA_MAX_QPS";
/// Striping (ManagerOptions::rail_devices): "mlx5_0,mlx5_1,...": the manager's devices, the first
/// its primary one (as CAF_RDMA_DEVICE), the others its rails; "all": every device with an
/// active port. CAF_RDMA_STRIPE_MIN: bytes from which an RDMA transfer is striped;
/// CAF_RDMA_STRIPE_QPS: queue pairs per pair of devices.
constexpr const char* kEnvDevices = "CAF_RDMA_DEVICES";
constexpr const char* kEnvStripeMin = "CAF_RDMA_STRIPE_MIN";
constexpr const char* kEnvStripeQps = "CAF_RDMA_STRIPE_QPS";
/// The classes' traffic (ManagerOptions::latency_traffic, background_traffic).
constexpr const char* kEnvLatencyTrafficClass = "CAF_RDMA_LATENCY_TRAFFIC_CLASS";
constexpr const char* kEnvLatencyServiceLevel = "CAF_RDMA_LATENCY_SERVICE_LEVEL";
constexpr const char* kEnvBackgroundTrafficClass = "CAF_RDMA_BACKGROUND_TRAFFIC_CLASS";
constexpr const char* kEnvBackgroundServiceLevel = "CAF_RDMA_BACKGROUND_SERVICE_LEVEL";
/// At most this many queue pairs per pair of devices for striping, and rails per manager.
constexpr uint32_t kMaxStripeQps = 8;
constexpr size_t kMaxRails = 15;

// Bounds on what one requester or peer can make a manager hold (docs/security.md).
/// Longest directory name, in bytes.
constexpr size_t kMaxDirectoryName = 256;
/// Names in one manager's directory.
constexpr size_t kMaxDirectoryEntries = 65536;
/// dir_get requests waiting at once for a name to appear, and of those from one other node (so
/// one peer cannot take every slot).
constexpr size_t kMaxDirectoryWaiters = 4096;
constexpr size_t kMaxDirectoryWaitersPerNode = 256;
/// Stream grants outstanding on one buffer, and from one peer manager.
constexpr uint32_t kMaxGrantsPerBuffer = 64;
constexpr uint32_t kMaxGrantsPerPeer = 1024;  // per peer node
/// What a fetch costs in a window at least (its answer's message, promise and bookkeeping), so
/// that windows bound the number of answers and waiting fetches as well as their bytes.
constexpr uint64_t kWindowMinCharge = 4096;
/// What nodes not seen directly connected (ids a peer may state for the messages it routes,
/// and invent) hold together: at most total_window_bytes / kIndirectShare of fetch windows
/// (manager/fetch_windows.h) and kMaxPendingNoticesTotal / kIndirectShare pending write
/// notices (manager/write_notices.h invariant 17).
constexpr uint64_t kIndirectShare = 4;

enum class TransportMode : uint8_t {
  kAuto,      ///< RDMA where both sides have a device on the same kind of fabric, else fallback
  kRdma,      ///< RDMA only: a missing device or a peer without one is an error
  kFallback,  ///< never RDMA: bytes move in CAF messages (no device needed)
};

const char* to_string(TransportMode mode);

/// An RDMA device as the manager uses it (components/nic.h: internal; RdmaDomain is the real
/// one).
class Nic;
/// How a manager opens a device (ManagerOptions::open_nic): the real one is RdmaDomain::open; a
/// test may give a fake one.
using NicOpener = std::function<Result<std::shared_ptr<Nic>>(const IbverbsConfig& config)>;

struct ManagerOptions {
  /// The primary device (the one `ibverbs` selects): every queue pair and handle has it.
  IbverbsConfig ibverbs;
  /// Striping over several devices (actors/manager/rails.h, docs/architecture.md, "Several
  /// devices"): more devices of this host, its rails 1, 2, ... in this order (same port and GID
  /// rules as the primary). Host buffers are registered on each, and an RDMA read or write of at
  /// least `stripe_min_bytes` with an owner that has rails too is cut in slices that run in
  /// parallel over queue pairs of rail k to the owner's rail k (rail-aligned, as multi-NIC fabrics
  /// are cabled), `stripe_qps` per pair of devices, the primary's included. Empty: one device (the
  /// default: processes of a host spread over its devices by local rank, see IbverbsConfig; a
  /// process that is alone on a multi-NIC host lists them, or CAF_RDMA_DEVICES=all).
  std::vector<std::string> rail_devices;
  /// CAF_RDMA_DEVICES=all: every other device with an active port is a rail (set by from_env).
  bool all_devices = false;
  uint64_t stripe_min_bytes = 4 << 20;  ///< 0: nothing is striped
  uint32_t stripe_qps = 1;
  TransportMode mode = TransportMode::kAuto;
  /// The longest timeout any request gets: transfer, batch and lane timeouts, dir_get waits
  /// and the stream grants peers ask for are cut to it (a peer cannot pin a buffer for 49
  /// days). CAF_RDMA_MAX_TIMEOUT_MS.
  std::chrono::milliseconds max_timeout{600000};
  /// Limit for the queue-pair handshake with a peer manager.
  std::chrono::milliseconds handshake_timeout{30000};
  /// After a timeout, how long the flush of the queue pair may take before it is destroyed.
  std::chrono::milliseconds drain_timeout{5000};
  /// A single RDMA transfer of at most kInlinePollMaxBytes: the manager polls for its
  /// completion itself this long before leaving it to the poller thread (one thread hop less
  /// on the latency path, at the cost of holding a scheduler thread that long). 0: never.
  std::chrono::microseconds inline_poll{50};
  /// Busy-poll for latency (off by default): with a window W > 0 the manager polls inline for
  /// a small transfer's completion for up to max(inline_poll, W), a node started with these
  /// options (RdmaNode) has its CAF workers spin about W before they sleep, and RdmaClient on
  /// that node spins up to W for its reply before it blocks. No thread hand-off then sleeps on
  /// the 8-byte path (an op costs no wake-up), at the price of that many spinning threads: for
  /// nodes with spare cores. docs/performance.md, "Latency: busy polling". CAF_RDMA_BUSY_POLL_US.
  std::chrono::microseconds busy_poll{0};
  /// Fallback transport: bytes per CAF message (at most kMaxChunkBytes) and messages in flight
  /// per transfer.
  uint64_t fallback_chunk_bytes = 256 << 10;
  uint32_t fallback_window = 32;
  /// Fallback transfers of host memory of at least this many bytes move over the stream
  /// channel, from an actor's request and from RdmaClient's stream lane alike (one threshold:
  /// actors/transfer/path_choice.h invariant 6): the bytes go over a TCP (or TLS) connection, or
  /// by cross-memory attach on one host, straight between the two registered buffers; smaller
  /// ones go in CAF messages. 0: always CAF messages. The default, 1, sends every size over
  /// the stream channel, faster at every size measured (docs/performance.md, "The stream
  /// threshold").
  uint64_t stream_min_bytes = 1;
  /// IPv4 address this manager's stream channel listens on and announces to peers; empty: no
  /// stream channel (RdmaNode sets its host here unless that is a wildcard).
  std::string stream_host;
  /// Stream transfers this manager runs at once as requester (more wait, by priority class:
  /// one more thread runs latency-class ones only).
  uint32_t stream_threads = 4;
  /// How long a priority class waits unserved in this manager's queues while more urgent ones
  /// are served before it gets a turn (components/priority.h invariant 2).
  std::chrono::milliseconds priority_aging = kAging;
  /// The traffic class and service level of the latency and the background class's queue
  /// pairs (components/qp_traffic.h; -1: the device's, as the bulk class's, which is
  /// `ibverbs`' traffic_class and service_level): the managers' class queue pairs
  /// (actors/manager/rails.h invariant 26) and clients' direct lanes of the class, each end set
  /// by its own manager's options. For fabrics that honour them (a lossless or a higher
  /// priority for latency, a scavenger class for background). CAF_RDMA_LATENCY_TRAFFIC_CLASS,
  /// CAF_RDMA_LATENCY_SERVICE_LEVEL, CAF_RDMA_BACKGROUND_TRAFFIC_CLASS,
  /// CAF_RDMA_BACKGROUND_SERVICE_LEVEL.
  QpTraffic latency_traffic;
  QpTraffic background_traffic;
  /// Same host (components/same_host.h): the stream channel also listens on an abstract
  /// AF_UNIX endpoint its handles name, and this node's stream transfers to an owner on this
  /// host (same boot id and network namespace) go there instead of over TCP: the owner copies
  /// the bytes by cross-memory attach (in-band on the socket where the kernel refuses it).
  /// Same protocol, checks and errors as over TCP. On by default; CAF_RDMA_SAME_HOST=0.
  bool same_host = true;
  /// Fallback fetch answers (CAF chunks) on their way between this node and one peer node,
  /// in bytes (each fetch counts at least kWindowMinCharge). As owner: answers served to the
  /// peer count until the peer proved it read them (it answers a read_ack the owner sends after
  /// them); a fetch beyond waits, in order, up to `window_wait`, and a peer with a window's
  /// worth of fetches already waiting is refused (resource_exhausted naming it): a peer that
  /// never reads holds at most one window of this node's memory. As requester: fetches asked of
  /// one owner and not yet answered (more wait here), so a requester whose window is not larger
  /// than its owner's never has a fetch refused. One fetch may exceed it when nothing else is
  /// on its way (chunks are at most kMaxChunkBytes). CAF_RDMA_PEER_WINDOW.
  uint64_t peer_window_bytes = 16 << 20;
  /// As owner: fetch answers served to all peers and not yet proven read, and fetches waiting,
  /// each at most this many bytes in all. CAF_RDMA_TOTAL_WINDOW.
  uint64_t total_window_bytes = 256 << 20;
  /// Queue pairs this manager accepts from peers' handshakes (their managers', lanes' and
  /// striping queue pairs): at most this many from the actors of one peer node, and in all.
  /// A handshake beyond is refused with resource_exhausted naming the limit and the node, so a
  /// peer cannot grow the owner's memory by sending handshakes from many actors
  /// (manager/qp_handshakes.h invariant 22). CAF_RDMA_MAX_QPS_PER_NODE, CAF_RDMA_MAX_QPS.
  uint32_t max_qps_per_node = 512;
  uint32_t max_qps = 4096;
  /// As owner: how long a fetch beyond its window waits for the window to open before it fails
  /// with resource_exhausted naming the peer and the window (cut to max_timeout).
  std::chrono::milliseconds window_wait{30000};
  /// The stream channel speaks TLS with these (RdmaNode sets its own when the nodes use TLS):
  /// owner and requester verify each other's certificate against the CA file, and the bytes
  /// travel encrypted. Empty: plain TCP.
  TlsCredentials stream_tls;
  /// How this manager names itself in handles and messages (e.g. "host:port").
  std::string name;
  /// GPU memory support; null: the CUDA driver when this build and host have one (else every
  /// buffer is host memory). Tests without a GPU put a fake here.
  std::shared_ptr<DeviceMemory> device_memory;
  /// How the primary device and the rails are opened (at start, and again after a device was
  /// lost); empty: RdmaDomain::open (ibverbs). Tests without a device put a fake NIC here
  /// (tests/actors/fake_nic.h); components/nic.h says what one must do.
  NicOpener open_nic;
  /// GPU memory the NIC cannot register moves through host bounce buffers of this size, at
  /// most `staging_buffers` of them (transfers beyond that wait for one).
  uint64_t staging_bytes = 4 << 20;
  uint32_t staging_buffers = 4;
  /// Verify mode, for chasing a bad NIC, driver or fabric (like perftest's --data_validation):
  /// after every RDMA transfer the requester compares a checksum of its side with one its owner
  /// computes of the same range (one extra message per transfer) and reports a difference as
  /// `data_mismatch` naming buffers, range, device and queue pair. RdmaClient's direct lanes
  /// follow their manager's setting. Off by default. Concurrent writers to the same range make
  /// the two sides differ legitimately: verify only transfers nobody else touches meanwhile.
  bool verify = false;
  /// Leak accounting (actors/manager/registrant_watch.h): when an actor of this node that
  /// registered buffers ends without releasing them, the manager warns naming them (always)
  /// and, with this set, releases them (after their transfers, as any release). Off by
  /// default: memory registered by an actor that handed its handles on may still be in use.
  bool release_orphans = false;
  /// How long after such an actor's end the manager waits before it reports (and, with
  /// release_orphans, releases) its buffers: an end that the node's own end follows within it
  /// (a program leaving main(): its clients go just before its node) is not reported.
  /// 0: at once.
  std::chrono::milliseconds orphan_grace{2000};
  /// Set by RdmaNode::start when it names the manager once it listens (host:port): the node's
  /// start line (ManagerState::say_started) waits for that name. Others leave it false.
  bool named_later = false;
  /// Set by from_env: these options carry the environment (RdmaNode::start then says nothing
  /// about manager variables it did not apply).
  bool from_environment = false;

  /// Defaults, then CAF_RDMA_TRANSPORT, CAF_RDMA_FALLBACK_CHUNK, CAF_RDMA_FALLBACK_WINDOW,
  /// CAF_RDMA_STREAM_MIN, CAF_RDMA_PEER_WINDOW, CAF_RDMA_TOTAL_WINDOW,
  /// CAF_RDMA_INLINE_POLL_US, CAF_RDMA_BUSY_POLL_US, CAF_RDMA_VERIFY, CAF_RDMA_RELEASE_ORPHANS,
  /// CAF_RDMA_GPU, CAF_RDMA_MAX_TIMEOUT_MS, CAF_RDMA_DEVICES, CAF_RDMA_STRIPE_MIN,
  /// CAF_RDMA_STRIPE_QPS, the classes' traffic (CAF_RDMA_LATENCY_TRAFFIC_CLASS, ...) and the
  /// IbverbsConfig variables (CAF_RDMA_DEVICE, ...).
  /// A malformed value is an error naming the variable and what it may be (e.g.
  /// "CAF_RDMA_TRANSPORT='bogus' must be auto, rdma or fallback").
  static Result<ManagerOptions> from_env();

  /// The traffic of class `p`'s queue pairs (latency_traffic, background_traffic; bulk: the
  /// device's).
  QpTraffic traffic_of(Priority p) const {
    return p == Priority::kLatency      ? latency_traffic
           : p == Priority::kBackground ? background_traffic
                                        : QpTraffic{};
  }
};

/// CAF_RDMA_DEVICES's value as device names; empty for "all". Errors name the text.
Result<std::vector<std::string>> parse_devices(const std::string& text);

/// Spawns a manager. With kAuto and no usable device the manager runs fallback-only (its stats
/// say so); with kRdma a missing device is an error here.
Result<rdma_manager_actor> spawn_manager(caf::actor_system& sys, ManagerOptions options);

}  // namespace caf_rdma
