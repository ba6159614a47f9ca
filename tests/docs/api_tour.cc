// The README's tour of the API ("A tour of the API"), compiled against the public target
// //:caf_rdma alone (caf_rdma.h): tests/lint/check_docs.py checks that the README shows exactly
// the lines between the two markers below, so the tour cannot drift from the API. Built by the
// native lane (`bazel build //...`); run, it does what it shows (it needs the peer it names).
#include <iostream>
#include <string>

#include "caf_rdma.h"

using namespace caf_rdma;
using namespace std::chrono_literals;

int main() {
  // -- tour begins --
  // A node (an actor system, its manager published on 127.0.0.1, a free port) and a client.
  auto node = RdmaNode::start();  // the defaults + the CAF_RDMA_* environment
  RdmaClient me((*node)->system(), (*node)->manager());  // blocking, thread-safe; not inside actors
  auto mine = me.allocate_buffer(1 << 20);               // or me.register_buffer(ptr, size)
  Status put = me.put("mine", *mine);                    // its handle in this node's directory
  auto peer = (*node)->remote_manager("10.0.0.2", 4242);  // another node's manager, by host:port
  auto theirs = RdmaClient((*node)->system(), *peer).get("weights", /*wait_ms=*/10000);
  // Blocking reads and writes (whole buffers, or a Range), default timeout 30 s.
  auto w = me.write(*mine, *theirs);  // w->bytes; w->path: "rdma-direct", ...
  auto r = me.read(*mine, *theirs, Range::of(4096).at_local(0).at_remote(8192), 5s);
  if (!r.ok())
    std::cerr << r.error().message() << "\n";
  // Futures: the result comes later; always through the manager.
  auto f = me.write_async(*mine, *theirs, Range::of(4096));  // std::future<Result<TransferReply>>
  auto g = me.read_async(*mine, *theirs, Range::of(4096).at_local(4096));
  auto h = me.transfer_async(make_read(*mine, *theirs, Range::of(64).at_local(8192)));
  auto wrote = f.get();
  // A batch: one TransferOutcome per op (ok(), status(), bytes, path); a failing op hides no other.
  auto outs = me.batch({make_write(*mine, *theirs, Range::of(64)),
                        make_read(*mine, *theirs, Range::of(64).at_local(64).at_remote(64))},
                       /*timeout_ms=*/5000);
  // A list of ranges (a paged KV cache's blocks): validated once, posted any number of times.
  auto plan = me.prepare(TransferKind::kRead, *mine, *theirs,
                         {ListRange{0, 65536, 4096}, ListRange{4096, 8192, 4096}});
  ListOutcome got = me.post(*plan);  // got.ok(); got.landed: ranges [0, landed) are in place
  auto rows = me.prepare(TransferKind::kWrite, *mine, *theirs, Strided{64, 256, 0, 256, 0, 4096});
  // Atomics on an 8-byte word of a remote buffer, returning its old value.
  auto old = me.fetch_add(*theirs, /*offset=*/0, /*add=*/1);              // Result<uint64_t>
  auto was = me.compare_swap(*theirs, 8, /*expected=*/0, /*desired=*/7);  // swapped iff *was == 0
  // Write notifications: an owner watches its buffer; a notify write into it tells the watcher.
  Status watching = me.watch_writes(mine->handle().id);  // as owner: notices for mine
  auto n = me.next_notice(5s);  // WriteNotice{buffer, offset, length, tag, ...}
  auto wn = me.write_notify(*mine, *theirs, /*tag=*/42, Range::of(4096));  // as writer
  // -- tour ends --
  return put.ok() && watching.ok() && w.ok() && r.ok() && wrote.ok() && old.ok() && was.ok() &&
                 n.ok() && wn.ok() && outs.ok() && g.valid() && h.valid() && got.ok() && rows.ok()
             ? 0
             : 1;
}
