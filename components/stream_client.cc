// The requester's side of the stream channel (see stream_client.h).
#include "components/stream_client.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "components/cpu_share.h"
#include "components/detail/stream_client_parts.h"
#include "components/list_cursor.h"
#include "components/same_host.h"
#include "components/withdrawal.h"

namespace caf_rdma {

namespace detail {

Error stopped_error() {
  return Error(ErrorCode::kPeerUnavailable, "stream transfer cancelled: its manager stopped");
}

std::string endpoint_of(const StreamJob& job, bool local) {
  return local ? "unix:" + job.unix_name : job.host + ":" + std::to_string(job.port);
}

}  // namespace detail

using detail::endpoint_of;
using detail::stopped_error;

namespace {

/// A job its stop signal stopped before it took a connection (invariant 8).
Error stopped_first_error() {
  return Error(ErrorCode::kCancelled,
               "stream transfer stopped before it took a connection: nothing moved");
}

/// A running job its stop signal stopped, settled (invariant 8); `how`: the error its socket
/// calls ended with once it was shut down.
Error stopped_running_error(const Error& how) {
  return Error(ErrorCode::kCancelled, "stream transfer stopped mid-way (" + how.message() + ")");
}

}  // namespace

StreamClient::StreamClient(size_t threads, TlsContext tls, bool same_host,
                           std::chrono::nanoseconds aging)
    : tls_(std::move(tls)),
      same_host_(same_host),
      queue_(aging),
      threads_(std::max<size_t>(threads, 1)) {}

StreamClient::~StreamClient() {
  stop();
}

void StreamClient::stop() {
  std::vector<StreamJob> left;
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    workers.swap(workers_);
    idle_.clear();  // their sockets close
    left = queue_.take_all();
    for (int fd : busy_fds_)
      if (gpu_copying_.count(fd) == 0)  // invariant 11: its copy ends, then its exchange
        ::shutdown(fd, copy_waits_.count(fd) != 0 ? SHUT_WR : SHUT_RDWR);
  }
  ready_.notify_all();
  for (auto& job : left)
    job.done(StreamEnd{stopped_error()});
  for (auto& w : workers)
    w.join();
  imports_.close_all();  // no copy of ours runs now (but run_now's, which keep theirs)
}

namespace {

/// The bytes a job moves (a list: all its ranges).
uint64_t bytes_of(const StreamJob& job) {
  return job.entries != nullptr ? job.total : job.length;
}

std::string ms_text(std::chrono::nanoseconds t) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(t).count()) + " ms";
}

/// Invariant 10: GPU memory moves by grant, one range at a time.
Status staged_job_check(const StreamJob& job) {
  if (job.staged && (job.count > 0 || job.by_handle))
    return Error(ErrorCode::kInvalidArgument,
                 std::string("a stream job of GPU memory ") +
                     (job.count > 0 ? "for a list" : "by handle") +
                     " (GPU memory moves by grant, one range at a time)");
  return {};
}

}  // namespace

Status StreamClient::submit(StreamJob job) {
  CAF_RDMA_RETURN_IF_ERROR(staged_job_check(job));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      if (Status admitted = admit_locked(bytes_of(job), job.deadline, job.priority); !admitted.ok())
        return admitted;  // invariant 9: not queued, `done` not called
      while (workers_.size() < threads_ + 1)
        workers_.emplace_back([this] { work(); });
      const Priority p = job.priority;
      const Deadline due = job.deadline;
      queue_.push(p, due, std::move(job));
      ready_.notify_all();  // the one thread that may take it may be the latency thread
      return {};
    }
  }
  job.done(StreamEnd{
      Error(ErrorCode::kPeerUnavailable, "stream transfer refused: its manager stopped")});
  return {};
}

Status StreamClient::admits(uint64_t bytes, Deadline deadline, Priority p) const {
  std::lock_guard<std::mutex> lock(mu_);
  return admit_locked(bytes, deadline, p);
}

bool StreamClient::thread_free_locked(Priority p) const {
  return running_ < threads_ || (p == Priority::kLatency && running_ < threads_ + 1);
}

std::optional<double> StreamClient::bytes_per_second() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rate_.bytes_per_second();
}

Status StreamClient::admit_locked(uint64_t bytes, Deadline deadline, Priority p) const {
  // Invariant 9: only while every thread is busy (a free one takes it now), with a rate known.
  const auto own = rate_.time_for(bytes);
  if ((queue_.empty() && thread_free_locked(p)) || running_ + queue_.size() < threads_ || !own ||
      deadline == kNoDeadline)
    return {};
  uint64_t ahead = 0;
  size_t jobs = 0;
  queue_.for_each_ahead(p, deadline, [&](const StreamJob& queued) {
    ahead += bytes_of(queued);
    ++jobs;
  });
  const auto wait = *rate_.time_for(ahead) / static_cast<int64_t>(threads_);
  const auto left = deadline - std::chrono::steady_clock::now();
  if (wait + *own <= left)
    return {};
  return Error(
      ErrorCode::kResourceExhausted,
      "stream transfer of " + std::to_string(bytes) + " bytes refused before it started: it has " +
          ms_text(std::max(left, std::chrono::steady_clock::duration::zero())) + " left, but " +
          std::to_string(ahead) + " bytes in " + std::to_string(jobs) +
          (jobs == 1 ? " job" : " jobs") + " due no later wait ahead of it (of its class, " +
          priority_name(p) + ", or a more urgent one) for the " + std::to_string(threads_) +
          " stream threads, all busy, which at the recent " +
          std::to_string(static_cast<uint64_t>(*rate_.bytes_per_second() / 1e6)) +
          " MB/s per thread take about " + ms_text(wait) + ", and its own bytes about " +
          ms_text(*own) + ": give it a longer timeout or start fewer transfers at once");
}

bool StreamClient::cancel_queued(uint64_t tag, const std::string& why) {
  StreamJob job;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto taken = queue_.take_if([tag](const StreamJob& queued) { return queued.tag == tag; });
    if (!taken)
      return false;
    job = std::move(*taken);
  }
  if (stop_requested(job.stop)) {  // invariant 8: stopped before it took a connection
    StreamEnd end{
        Error(ErrorCode::kCancelled, "stream transfer stopped before it started: " + why)};
    end.stopped = true;
    job.done(std::move(end));
    return true;
  }
  job.done(
      StreamEnd{Error(ErrorCode::kTimeout, "stream transfer cancelled before it started: " + why)});
  return true;
}

size_t StreamClient::idle_connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [endpoint, sockets] : idle_)
    n += sockets.size();
  return n;
}

void StreamClient::work() {
  for (;;) {
    StreamJob job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Invariant 9: the next job by its class when a thread is free for every class, else the
      // first latency-class job for the latency thread.
      std::optional<Priority> take;
      ready_.wait(lock, [this, &take] {
        if (stopping_ || queue_.empty())
          return stopping_;
        const auto now = std::chrono::steady_clock::now();
        if (running_ < threads_)
          take = queue_.next_class(now);
        else if (thread_free_locked(Priority::kLatency) && !queue_.empty(Priority::kLatency))
          take = Priority::kLatency;
        return take.has_value();
      });
      if (stopping_)
        return;
      job = queue_.pop_class(*take);
      ++running_;
    }
    const auto started = std::chrono::steady_clock::now();
    StreamEnd end = run_now(job);
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
      if (end.status.ok())  // invariant 9's rate: jobs that ended well
        rate_.record(bytes_of(job), std::chrono::steady_clock::now() - started);
    }
    ready_.notify_all();  // a thread is free: the job for it may not be the latency thread's
    job.done(std::move(end));
  }
}

StreamEnd StreamClient::run_now(const StreamJob& job) {
  if (Status st = staged_job_check(job); !st.ok())
    return StreamEnd{st, /*refused=*/true};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_)
      return StreamEnd{
          Error(ErrorCode::kPeerUnavailable, "stream transfer refused: its manager stopped")};
  }
  // Invariant 8: the job's socket is shut down when its stop signal asks, while it runs.
  StopSignal::Armed armed(job.stop, [this, &job] { wake(job); });
  StreamEnd end = run(job);
  if (!end.status.ok())
    end.status = end.status.error().with_context(
        "stream " + std::string(to_string(job.direction)) + " at " +
        (end.same_host ? "@" + job.unix_name : job.host + ":" + std::to_string(job.port)));
  return end;
}

namespace {

/// The pool's key of a job's endpoint.
}  // namespace

Result<Socket> StreamClient::take_connection(const StreamJob& job, bool fresh, bool local,
                                             bool& pooled) {
  std::string endpoint = endpoint_of(job, local);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_)
      return stopped_error();
    auto it = idle_.find(endpoint);
    if (!fresh && it != idle_.end() && !it->second.empty()) {
      Socket s = std::move(it->second.back());
      it->second.pop_back();
      pooled = true;
      if (stop_requested(job.stop))  // invariant 8 (the connection closes: none moved on it)
        return stopped_first_error();
      busy_fds_.insert(s.fd());
      if (job.stop != nullptr)
        stoppable_[s.fd()] = &job;
      return s;
    }
    if (stop_requested(job.stop))
      return stopped_first_error();
  }
  pooled = false;
  CAF_RDMA_ASSIGN_OR_RETURN(Socket s, local ? connect_unix(job.unix_name, job.deadline)
                                            : connect_tcp(job.host, job.port, job.deadline));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_)
      return stopped_error();
    if (stop_requested(job.stop))  // invariant 8: looked at under the lock wake() takes
      return stopped_first_error();
    busy_fds_.insert(s.fd());  // from here the destructor can wake it
    if (job.stop != nullptr)
      stoppable_[s.fd()] = &job;
  }
  if (local) {  // same_host.h invariant 5: nothing goes to a listener of another uid
    Status st = listener_is_own_uid(s, job.unix_name);
    if (!st.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      forget_busy_locked(s.fd());
      return st.error();
    }
  }
  if (tls_ && !local) {  // same host: the kernel names the peer (stream_server.h inv. 12)
    Status st = start_tls(s, tls_, false, job.deadline, "stream channel to " + endpoint);
    if (!st.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      forget_busy_locked(s.fd());
      return st.error();
    }
  }
  return s;
}

void StreamClient::forget_busy_locked(int fd) {
  busy_fds_.erase(fd);
  copy_waits_.erase(fd);
  stoppable_.erase(fd);
}

void StreamClient::wake(const StreamJob& job) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [fd, running] : stoppable_) {
    if (running != &job || gpu_copying_.count(fd) != 0)  // invariant 11
      continue;
    // Invariant 8: while its owner may still touch memory (a write's bytes on their way, a
    // copy until its answer) only the sending side: the owner sees it, stops and answers or
    // hangs up, which the job waits for.
    const bool owner_may_touch =
        copy_waits_.count(fd) != 0 || job.direction == StreamDirection::kIntoOwner;
    ::shutdown(fd, owner_may_touch ? SHUT_WR : SHUT_RDWR);
  }
}

void StreamClient::copy_answered(int fd, bool copying) {
  std::lock_guard<std::mutex> lock(mu_);
  copy_waits_.erase(fd);
  if (copying)
    return;  // invariant 11: not shut before the word after the copy
  gpu_copying_.erase(fd);
  if (stopping_ && busy_fds_.count(fd) != 0)
    ::shutdown(fd, SHUT_RDWR);  // what stop() would have done, now that no copy runs
}

void StreamClient::give_back(const std::string& endpoint, Socket s) {
  std::lock_guard<std::mutex> lock(mu_);
  // Its job was asked to stop (invariant 8): the connection is, or is about to be, shut down.
  const auto job = stoppable_.find(s.fd());
  const bool shut = job != stoppable_.end() && stop_requested(job->second->stop);
  forget_busy_locked(s.fd());
  if (!stopping_ && !shut)
    idle_[endpoint].push_back(std::move(s));
}

Status StreamClient::move_list(const Socket& s, const StreamJob& job) {
  const bool into_owner = job.direction == StreamDirection::kIntoOwner;
  // The job's memory of a range (stream_client.h: at addr + its peer offset).
  ListCursor cursor(job.entries, job.count,
                    [&job](const ListEntry& e) { return job.addr + e.peer_offset; });
  const std::string what = "stream list data";  // once, not per block
  if (s.tls() == nullptr) {  // invariant 7: the kernel gathers (scatters) the ranges
    std::vector<iovec> pieces;
    cursor.pieces(job.total, pieces);
    auto moved =
        move_pieces(s, pieces.data(), pieces.size(), into_owner, job.deadline, what, {}, nullptr);
    return moved.ok() ? Status{} : Status(moved.error());
  }
  std::vector<uint8_t> staging(std::min<uint64_t>(job.total, kListStaging));
  for (uint64_t moved = 0; moved < job.total;) {
    const uint64_t n = std::min<uint64_t>(staging.size(), job.total - moved);
    if (into_owner) {
      cursor.copy(staging.data(), n, true);
      CAF_RDMA_RETURN_IF_ERROR(send_all(s, staging.data(), n, job.deadline, what));
    } else {
      CAF_RDMA_RETURN_IF_ERROR(recv_all(s, staging.data(), n, job.deadline, what));
      cursor.copy(staging.data(), n, false);
    }
    moved += n;
  }
  return {};
}

StreamEnd StreamClient::run(const StreamJob& job) {
  const CpuShare::Scope share(job.priority);  // cpu_share.h invariant 1
  bool local = same_host_ && !job.unix_name.empty();
  if (local) {
    std::lock_guard<std::mutex> lock(mu_);
    local = unusable_unix_.count(job.unix_name) == 0;
  }
  bool unanswered = false;
  if (!local)
    return run_on(job, false, &unanswered);
  StreamEnd end = run_on(job, true, &unanswered);
  // Invariant 5: an endpoint this process cannot use (not reachable, or another uid) is given
  // up; the owner took nothing on it, so TCP may carry the job.
  // (Not any permission_denied: a write into a read-only buffer is one too.)
  const bool other_uid = is_other_uid_refusal(end.status);
  if (!unanswered && !other_uid) {
    end.same_host = true;
    if (end.status.ok())
      ++same_host_ops_;
    return end;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    unusable_unix_.insert(job.unix_name);
  }
  return run_on(job, false, &unanswered);
}

StreamEnd StreamClient::run_on(const StreamJob& job, bool local, bool* unanswered) {
  *unanswered = false;
  // Invariant 3: a connection lost before "go" is tried once more, fresh; a job the owner never
  // took ends `refused`; one asked to stop is not tried again (invariant 8).
  auto lost = [this, &job](const Status& st, Reach reach) {
    std::lock_guard<std::mutex> lock(mu_);
    return reach == Reach::kNoAnswer && st.error().code() != ErrorCode::kTimeout && !stopping_ &&
           !stop_requested(job.stop);
  };

  auto unknown_grant = [](const Status& st, Reach reach) {
    return reach == Reach::kAnswered && st.error().code() == ErrorCode::kNotFound;
  };
  // Invariant 8: a stop's failure, settled, is its caller's `cancelled`.
  auto ended = [&job](Status st, Reach reach, bool refused = false) {
    StreamEnd end{std::move(st), refused};
    end.stopped = !end.status.ok() && stop_requested(job.stop) && reach != Reach::kUnsettled;
    if (end.stopped && end.status.error().code() != ErrorCode::kCancelled)
      end.status = stopped_running_error(end.status.error());
    return end;
  };
  if (job.staged) {
    // Invariant 10: without a bounce buffer the owner is not asked; chunks may move it.
    if (Status ready = staged_ready(job.staged); !ready.ok())
      return StreamEnd{std::move(ready), /*refused=*/true};
  }
  Reach reach = Reach::kNoAnswer;
  Status st = attempt(job, /*fresh=*/false, local, reach);
  if (st.ok() || reach == Reach::kTaken || reach == Reach::kUnsettled)
    return ended(std::move(st), reach);
  if (is_foreign_listener(st)) {  // not tried again: it was never the owner (invariant 5)
    *unanswered = true;
    return StreamEnd{std::move(st), /*refused=*/true};
  }
  if (lost(st, reach)) {
    Status first = std::move(st);
    st = attempt(job, /*fresh=*/true, local, reach);
    if (st.ok() || reach == Reach::kTaken || reach == Reach::kUnsettled)
      return ended(std::move(st), reach);
    *unanswered = lost(st, reach);
    if (*unanswered)
      return StreamEnd{
          Error(st.error().code(),
                "the owner refused or closed two connections before taking the request: " +
                    first.error().message() + "; then, on a fresh one: " + st.error().message()),
          /*refused=*/true};
  }
  return ended(st, reach, unknown_grant(st, reach));
}

}  // namespace caf_rdma
