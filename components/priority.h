// Priority classes of transfers: which of the waiting ones a node serves first, and how hard its
// threads push. A transfer names its class (Range::as, TransferPlan::as, TransferOp::priority);
// the default is bulk. No CAF here.
//
// Invariants:
//  1. Three classes, most urgent first: latency, bulk, background. Their wire value (a byte in a
//     TransferOp, a stream request's direction word: stream_protocol.h) is the enumerator's, and
//     0 is bulk, so a message or request that names none is bulk. A wire value that names no
//     class is refused where it is read, never taken as another class.
//  2. Strict priority with aging (class_queue.h): a waiting transfer of a more urgent class is
//     served first, except that a class none of whose transfers was served for kAging while one
//     of them waited gets the next turn: no class starves (within a class, earliest deadline
//     first).
//  3. The tasks that copy a class's bytes on a same-host endpoint run kClassNice above the
//     process's own nice value (latency +0, bulk +5, background +19, at most 19), set by each
//     copy task on itself (nice can only be raised without privileges), so a latency-class
//     copy is favoured over a bulk one on a busy core and a bulk copy still gets most of an
//     otherwise idle core; a bulk or background copy also yields its core every 256 KiB
//     (killable_copy.h invariant 6).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace caf_rdma {

enum class Priority : uint8_t {
  kBulk = 0,        ///< the default: throughput first
  kLatency = 1,     ///< small, urgent transfers: served before the others
  kBackground = 2,  ///< served when nothing else waits (and at least once per kAging)
};

constexpr size_t kPriorityClasses = 3;
/// Invariant 2: how long a class may wait unserved while more urgent ones are served, and the
/// longest aging a queue takes (ManagerOptions::priority_aging is refused beyond it).
constexpr std::chrono::milliseconds kAging{50};
constexpr std::chrono::milliseconds kMaxAging{24 * 3600 * 1000};
/// Invariant 3: the nice value of a class's same-host copy tasks, by urgency().
constexpr std::array<int, kPriorityClasses> kClassNice{0, 5, 19};

/// 0 for the most urgent class (latency), 1 bulk, 2 background.
constexpr size_t urgency(Priority p) {
  return p == Priority::kLatency ? 0 : p == Priority::kBulk ? 1 : 2;
}
/// The class of urgency `u` (urgency's inverse; `u` below kPriorityClasses).
constexpr Priority priority_of_urgency(size_t u) {
  return u == 0 ? Priority::kLatency : u == 1 ? Priority::kBulk : Priority::kBackground;
}
/// "latency", "bulk", "background" (metrics' `class` label, errors, options).
const char* priority_name(Priority p);
/// The class of wire value `v` (invariant 1); nothing when it names none.
std::optional<Priority> priority_from_wire(uint32_t v);
/// Why wire value `v` is refused (invariant 1): "priority class 7 is none of bulk (0), ...".
std::string unknown_priority_text(uint64_t v);
/// The class named `name` ("latency", "bulk", "background"); nothing otherwise.
std::optional<Priority> parse_priority(const std::string& name);

}  // namespace caf_rdma
