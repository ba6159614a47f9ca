// The requester's side of the fallback's stream channel: worker threads that run granted
// transfers over pooled TCP connections to owners' StreamServers, straight from or into the
// requester's registered buffer (GPU memory through a bounce buffer: invariant 10). No CAF here:
// `done` is called on a worker thread.
//
// Invariants:
//  1. A job's `done` is called exactly once, after the last access to its memory.
//  2. No byte of a job moves before its owner's "go" (stream_protocol.h): a write sends its
//     first byte only after reading it, and the owner sends a read's first byte only after
//     sending it. A job that never read "go" therefore moved no byte, and no byte of it is on
//     any connection (for a write: none was ever sent), so none can land later. Except a small
//     write by handle (eager_write), whose bytes follow its request: its owner stores them only
//     after allowing it, so a refusal still means that none landed; one that got no answer may
//     have landed, and is written again in full (writes are idempotent).
//  3. A job whose connection fails before "go" (connect refused, TLS handshake failed, reset or
//     closed by the owner, e.g. an idle pooled connection it closed, or a new one it pushed out
//     to make room: stream_server.h invariant 3) is tried once more on a fresh connection. If
//     that fails before "go" too, or the owner answers that the grant is unknown (it may have
//     read the first request and lost its answer), the job ends `refused`: by invariant 2 the
//     submitter may move its bytes another way. A timeout is never retried (the deadline is
//     the transfer's) and never `refused`; nor is anything after "go".
//  4. Every wait ends by the job's deadline (or when the client stops: it shuts the sockets
//     of running jobs down, but a GPU copy's: invariant 11); idle pooled connections are not
//     waited on. Except the one answer
//     to a cross-memory request (invariant 5), awaited up to kEagerAnswerGrace longer: the
//     owner may be copying into the job's memory until it answers, and ends that copy by the
//     job's deadline, which the request carries (stream_protocol.h), so no copy outlasts the
//     wait (the grace is the answer's way back).
//  5. Same host: a job naming its owner's same-host endpoint (StreamJob::unix_name, set only
//     when the owner's host identity is this process's: same_host.h) runs over that AF_UNIX
//     endpoint, never TLS, when the client was made with `same_host` (CAF_RDMA_SAME_HOST, read
//     by ManagerOptions). Jobs over kEagerBytes of host memory on this side (invariant 10) ask
//     the owner to move the bytes by cross-memory attach ("CMS2"/"CMH2": the job's address goes in
//     the request, the owner copies, its GPU memory through its staging buffer: stream_server.h
//     invariant 19); smaller ones travel in-band on the socket (the bytes ride in the answer's
//     one send, which costs less than the kernel's page walk for a few KiB). An owner that
//     answers "in-band go" for host memory (its kernel refused) gets plain requests on that
//     endpoint from then on (for GPU memory an owner of an older release answers so too: that
//     answer leaves the endpoint as it was). A listener of another uid gets nothing but the connect
//     (same_host.h invariant 5: not the owner, e.g. a process that took the name of a dead owner's
//     endpoint). An endpoint that cannot be reached (invariant 3's two tries), whose listener is of
//     another uid, or that refuses this uid is given up for the client's life and the job runs over
//     TCP, as if no endpoint had been named (a dead owner's TCP port then answers
//     peer_unavailable).
//  6. A job its owner's release stopped (the answer `released`, in step: stream_server.h
//     invariant 14) ends with that answer and its connection goes back to the pool.
//  7. A list job moves its ranges in table order: over a same-host endpoint the owner copies
//     them when they hold over kEagerBytes in all; otherwise they travel in-band, each socket
//     call moving many ranges: on plain TCP the kernel gathers (scatters) them, up to IOV_MAX
//     per call (socket_io.h, move_pieces); under TLS through a staging buffer of kListStaging
//     bytes. Invariants 2-6 hold for it as for one range.
//  8. A job with a stop signal (StreamJob::stop, a CancelToken's) ends, when asked, as stop()
//     ends a job, alone: asked before it took a connection it moves nothing; running, its
//     socket is shut down, only its sending side while its owner may still touch memory after
//     this side stops (a write: its bytes on their way, which the owner's worker stores as they
//     come; a cross-memory request: until its answer), and then it waits for the owner's answer
//     or hang-up (a write: await_hang_up), up to its deadline plus kEagerAnswerGrace. So it
//     returns only once no byte of it lands any more on either side, or says it could not learn
//     that (a timeout); a read's owner may still read its own memory into the dead connection
//     for a moment, as after a timeout (none of it lands). It is never tried again, and its
//     connection is not pooled. Its end is what failed then (its caller names it
//     `cancelled`), or its success if every byte had moved. A queued job that cancel_queued
//     ends once its stop was asked ends `stopped` (kCancelled): it moved nothing.
//  9. Submitted jobs wait for a thread by their priority class (StreamJob::priority), strict
//     priority with aging (class_queue.h), earliest deadline first within a class (equal
//     deadlines in submission order). One thread beyond `threads` takes latency-class jobs only:
//     a latency job waits for a bulk one to end only when that thread is busy too. submit refuses
//     (resource_exhausted, naming its deadline, what waits ahead of it, the threads and the rate) a
//     job that cannot end by its deadline: every thread busy, a rate known (rate_estimate.h, from
//     the jobs that ended well), and the bytes queued ahead of it (those of more urgent classes,
//     and of its own due no later: aging's turns aside) over all threads plus its own bytes on one
//     take longer than it has left. A refused job is not queued and its `done` is not called; with
//     a thread free (for a latency job, the latency thread) or no rate known yet, every job is
//     taken.
// 10. A job of GPU memory (StreamJob::staged) moves its bytes through its thread's bounce buffer
//     (staged_socket_move.h): its memory is touched by the GPU's copies only, never by a socket
//     call or the owner's cross-memory attach (it asks for none over a same-host endpoint: its
//     bytes travel in-band, or GPU to GPU: invariant 11).
//     submit and run_now refuse such a job for a list or by handle (invalid_argument): it
//     moves by grant, so the CPU never sends its bytes with the request (eager_write). A
//     thread without a bounce buffer that cannot make one ends the job `refused` before its
//     owner is asked (no byte moved). A GPU copy that fails ends the job with the copy's
//     error (naming the GPU and the byte) and drops its connection; a write first shuts its
//     sending side and waits for the owner's hang-up, as a stopped one does (invariant 8), so
//     no byte of it lands after the job's end (peer_unavailable where the owner is not heard).
// 11. Same host, GPU to GPU (a job of GPU memory whose owner's range is GPU memory too, over its
//     owner's same-host endpoint): the job asks for a GPU copy ("CGS1", stream_protocol.h) and,
//     given an export of the owner's memory, holds an import of it (gpu_imports.h: opened with
//     its own DeviceMemory at its first copy, kept open for the next), copies the bytes GPU to
//     GPU on its own GPU's stream, and only then tells the owner how the copy went: the owner
//     lets its memory go after that word, never while the copy runs. The import stays open
//     until the owner's release has this client close it (close_imports, asked by the owner's
//     manager before the release returns), it is the least recently used of
//     GpuImports::kMaxOpen, or the client stops. A job whose deadline passed before the copy copies
//     nothing and says so. Neither stop() nor a stop signal shuts its socket while the copy runs
//     (the owner would let its memory go at the hang-up): it ends, then the exchange does, with the
//     owner's answer. An export it cannot open gets "in-band go" back and the bytes move through
//     the bounce buffers (invariant 10); that endpoint is not asked for GPU copies again, as an
//     owner that answers "in-band go" (it cannot export that memory) is asked each time. From
//     the request's sending to that word (or the "in-band go") its socket is shut by neither
//     stop() nor a stop signal (a hang-up would let the owner's memory go while this side may
//     copy): the job waits for the owner's answer (its deadline plus kEagerAnswerGrace), then
//     copies nothing if asked to stop meanwhile or if the earlier of its deadline and the
//     owner's (sent with the go) passed, and says so in the word; the owner's answer ends it. An
//     owner of an older release refuses the request unread (is_unknown_request): the job is
//     asked again plainly on a fresh connection, and that endpoint is asked for none again.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "components/class_queue.h"
#include "components/gpu_imports.h"
#include "components/priority.h"
#include "components/rate_estimate.h"
#include "components/socket_io.h"
#include "components/staged_socket_move.h"
#include "components/stop_signal.h"
#include "components/stream_protocol.h"

namespace caf_rdma {

/// How a job ended (StreamJob::done).
struct StreamEnd {
  Status status;  ///< ok once every byte moved; else what failed, naming the endpoint
  /// Failed before the owner took the request on any connection (invariant 3): no byte moved
  /// and none can move later, so the bytes may be moved another way.
  bool refused = false;
  bool same_host = false;  ///< moved over the owner's same-host endpoint (invariant 5)
  /// Its stop signal stopped it and no byte of it moves any more (invariant 8): its caller
  /// answers `cancelled`. (Asked to stop but not confirmed: `status` says so, this is false.)
  bool stopped = false;
};

struct StreamJob {
  std::string host;  ///< the owner's stream endpoint
  uint16_t port = 0;
  /// The owner's same-host endpoint when it runs on this host (same_host_endpoint()), else ""
  /// (invariant 5).
  std::string unix_name;
  uint64_t token = 0;  ///< the owner's grant
  /// Authorized by a buffer handle instead of a grant ("CRH1", stream_protocol.h).
  bool by_handle = false;
  HandleAccess handle;
  StreamDirection direction = StreamDirection::kIntoOwner;
  /// The requester's memory: sent from (into owner) or received into: [addr, addr + length),
  /// or for a list the ranges at `addr` + their peer_offset.
  uint8_t* addr = nullptr;
  uint64_t length = 0;  ///< of a list: the span in the owner's buffer
  /// A list by handle ("CRL1"/"CML2", stream_protocol.h; invariant 7): `count` ranges (at most
  /// kMaxListRanges), each at `addr` + its peer_offset here, inside the span
  /// [handle.offset, handle.offset + length) of the owner's buffer; `total` bytes in all. The
  /// entries stay the caller's and must outlive the job.
  const ListEntry* entries = nullptr;
  uint32_t count = 0;
  uint64_t total = 0;
  Deadline deadline = kNoDeadline;
  uint64_t tag = 0;  ///< the submitter's name for it (cancel_queued)
  /// Its class (invariant 9; priority.h): the order it waits in, and the nice value of an
  /// owner's cross-memory copy of it (the request carries it: stream_protocol.h).
  Priority priority = Priority::kBulk;
  /// Asked from another thread to stop (invariant 8); null: it runs to its end or deadline.
  const StopSignal* stop = nullptr;
  /// GPU memory at `addr` (one range by grant, no list, not by handle): invariant 10.
  StagedMemory staged;
  /// The owner's range is GPU memory, which its worker moves in-band only (stream_server.h
  /// invariant 19): no cross-memory attach is asked for (invariant 10).
  bool owner_gpu = false;
  /// Called exactly once, after the last access to the job's memory.
  std::function<void(StreamEnd)> done;
};

class StreamClient {
public:
  /// `threads` transfers run at once; more wait in order. The threads start with the first
  /// transfer (a node that never needs the stream channel runs none).
  /// With `tls`, every connection is TLS: the owner must show a certificate the context's CA
  /// file vouches for, and this node shows its own.
  /// With `same_host` false every job runs over TCP (invariant 5).
  /// `aging`: invariant 9's (class_queue.h), kAging unless a test says otherwise.
  explicit StreamClient(size_t threads = 4, TlsContext tls = nullptr, bool same_host = true,
                        std::chrono::nanoseconds aging = kAging);
  /// stop().
  ~StreamClient();
  /// Fails queued jobs, wakes running ones (their sockets are shut down) and joins the workers;
  /// later jobs fail at once. Returns once no worker touches a job's memory any more (jobs run
  /// by run_now on other threads end when their sockets report the shutdown). A job whose
  /// owner may be copying into or out of its memory (a cross-memory request, from its sending
  /// to its answer; a list's from its table on) gets its sending side shut only: its owner
  /// sees that, ends the copy (cross_memory.h invariant 7) and answers, and the job ends on
  /// that answer, so neither stop() nor run_now returns while that copy runs. That wait is
  /// kStopLook or so; an owner that does not answer holds it up to the job's deadline plus
  /// kEagerAnswerGrace (invariant 4).
  void stop();

  StreamClient(const StreamClient&) = delete;
  StreamClient& operator=(const StreamClient&) = delete;

  /// Queues `job` for a thread (invariant 9), or refuses it (its `done` is not called).
  [[nodiscard]] Status submit(StreamJob job);
  /// Whether submit would take a job of `bytes` of class `p` due at `deadline` now (invariant
  /// 9), asked before its owner is asked for a grant.
  Status admits(uint64_t bytes, Deadline deadline, Priority p = Priority::kBulk) const;
  /// Invariant 9's rate: bytes per second per thread (none yet).
  std::optional<double> bytes_per_second() const;
  /// Runs `job` on the calling thread (pooled connections, invariants 2-4 as for submitted
  /// jobs) and returns how it ended; `job.done` is not called. Any number of threads at once.
  StreamEnd run_now(const StreamJob& job);
  /// Fails the job tagged `tag` with a timeout if it still waits for a thread (its `done` is
  /// called here); false if it runs already (it stops at its deadline) or is unknown.
  bool cancel_queued(uint64_t tag, const std::string& why =
                                       "its deadline passed while it waited for a stream "
                                       "thread");
  /// Idle pooled connections (all endpoints).
  size_t idle_connections() const;
  /// Invariant 11: closes this client's imports of the GPU export `handle` (its owner released
  /// the memory), waiting up to `limit` for copies that hold one (GpuImports::close).
  Result<size_t> close_imports(const std::vector<uint8_t>& handle,
                               std::chrono::milliseconds limit) {
    return imports_.close(handle, limit);
  }
  /// Jobs that ended well over a same-host endpoint (invariant 5).
  uint64_t same_host_ops() const { return same_host_ops_.load(); }

private:
  /// How far one attempt got (invariant 3).
  enum class Reach {
    kNoAnswer,  ///< no answer from the owner: no connection, or it failed before one
    kAnswered,  ///< the owner answered the request with an error
    kTaken,     ///< the owner said "go": bytes may have moved
    /// Asked to stop after the owner took it, which did not confirm that it ended (invariant
    /// 8): bytes on their way may still land.
    kUnsettled,
  };
  void work();
  /// Invariant 9's refusal of a job of `bytes` of class `p` due at `deadline`, or ok.
  Status admit_locked(uint64_t bytes, Deadline deadline, Priority p) const;
  /// Whether a thread is free for a job of class `p` (invariant 9: the last one for latency).
  bool thread_free_locked(Priority p) const;
  StreamEnd run(const StreamJob& job);
  /// Invariant 3's tries of `job` over TCP, or over its same-host endpoint (`local`);
  /// `*unanswered`: both tries failed before the owner answered.
  StreamEnd run_on(const StreamJob& job, bool local, bool* unanswered);
  /// One try of `job` on one connection (a pooled one unless `fresh`).
  Status attempt(const StreamJob& job, bool fresh, bool local, Reach& reach);
  /// attempt() of a list job (invariant 7; stream_protocol.h): its request was sent on `s`
  /// (`sent` says how that went); the table after the owner's first "go", then its answer, the
  /// bytes in-band if it says so, the final status. `fail` is attempt()'s.
  Status attempt_list(Socket& s, const StreamJob& job, const StreamRequest& request,
                      const std::string& endpoint, const Status& sent, Reach& reach,
                      const std::function<Status(Status)>& fail);
  /// The owner's final status of `job` on `s` (`what` names it in errors): the connection goes
  /// back to the pool when the exchange ended in step (ok, or released: invariant 6), else
  /// `fail` (attempt()'s) drops it.
  Status final_status(Socket& s, const StreamJob& job, const std::string& endpoint,
                      const char* what, const std::function<Status(Status)>& fail);
  /// Invariant 11: copies `job`'s bytes from the owner's export `e` (GPU copy go read on `s`)
  /// and tells the owner how that went; `inband` set when the export could not be opened and
  /// the owner was told to move the bytes in-band instead (returns ok then).
  Status copy_from_export(const Socket& s, const StreamJob& job, const std::string& endpoint,
                          const CrossMemoryAnswer& go, bool& inband);
  /// Invariant 7: the in-band bytes of list job `job` on `s`, after "go".
  Status move_list(const Socket& s, const StreamJob& job);
  Result<Socket> take_connection(const StreamJob& job, bool fresh, bool local, bool& pooled);
  /// `fd` is no longer a busy socket of a job (given back or dropped).
  void forget_busy_locked(int fd);
  /// Invariant 8: shuts down the socket of `job`, which its stop signal asked to stop.
  void wake(const StreamJob& job);
  /// The cross-memory answer on `fd` was read (or will not be): a stop() shuts it whole now;
  /// unless `copying`: a GPU copy go, after which the job copies (invariant 11).
  void copy_answered(int fd, bool copying = false);
  void give_back(const std::string& endpoint, Socket s);

  const TlsContext tls_;  ///< null: plain TCP
  const bool same_host_;  ///< invariant 5
  std::atomic<uint64_t> same_host_ops_{0};
  std::set<std::string> inband_only_;    ///< same-host endpoints that answered "in-band go"
  std::set<std::string> unusable_unix_;  ///< same-host endpoints given up (invariant 5)
  std::set<std::string> no_gpu_copy_;    ///< whose exports could not be opened (invariant 11)
  std::set<int> gpu_copying_;            ///< sockets of jobs copying GPU to GPU (invariant 11)
  GpuImports imports_;                   ///< invariant 11
  mutable std::mutex mu_;
  std::condition_variable ready_;
  bool stopping_ = false;
  ClassQueue<StreamJob> queue_;                      ///< invariant 9
  size_t running_ = 0;                               ///< jobs the threads run now
  RateEstimate rate_;                                ///< of the jobs that ended well, per thread
  std::map<std::string, std::vector<Socket>> idle_;  ///< "host:port" -> connections
  std::set<int> busy_fds_;                           ///< sockets a worker is using
  /// busy_fds_ whose owner may be copying by cross-memory attach: stop() shuts only their
  /// sending side (see stop()).
  std::set<int> copy_waits_;
  /// busy_fds_ of jobs with a stop signal (invariant 8); one whose job was asked to stop is
  /// never pooled.
  std::map<int, const StreamJob*> stoppable_;
  const size_t threads_;
  std::vector<std::thread> workers_;  ///< threads_ + 1 (invariant 9), started by the first submit
};

}  // namespace caf_rdma
