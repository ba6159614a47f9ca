// ClassQueue: work waiting for a worker, in the three priority classes (priority.h): the stream
// client's jobs (stream_client.h invariant 9), the stream server's connections waiting for a
// worker (stream_server.h invariant 18), the manager's bounce-buffer waiters and fetch windows
// (manager invariant 25). No locking (its owner's); no CAF here.
//
// Invariants:
//  1. pop() takes from the most urgent class with something waiting; except that a class whose
//     turn is overdue goes first: one that has waited kAging (the queue's `aging`) since the
//     later of its oldest entry's arrival and its own last turn. Of several overdue classes the
//     longest overdue goes first. So every class gets a turn at least once per `aging` while it
//     has work waiting, whatever arrives in the others (priority.h invariant 2); a turn takes
//     the class's entry by invariant 2, so within a class an entry due late waits for those due
//     before it.
//  2. Within a class: earliest deadline first, equal deadlines in arrival order.
//  3. Every entry leaves once: by pop, pop_class, take_next_if, erase_if, take_if, take_all or
//     clear.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "components/priority.h"

namespace caf_rdma {

template <class T>
class ClassQueue {
public:
  using Clock = std::chrono::steady_clock;

  explicit ClassQueue(std::chrono::nanoseconds aging = kAging) : aging_(aging) {}

  /// Invariant 1's aging from now on.
  void set_aging(std::chrono::nanoseconds aging) { aging_ = aging; }

  /// Queues `value` of class `p`, due at `due`, arrived `now`.
  void push(Priority p, Clock::time_point due, T value, Clock::time_point now = Clock::now()) {
    Lane& l = lanes_[urgency(p)];
    const uint64_t seq = next_seq_++;
    l.by_due.emplace(std::make_pair(due, seq), std::move(value));
    l.arrivals.emplace(seq, now);
    ++size_;
  }

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  size_t size(Priority p) const { return lanes_[urgency(p)].by_due.size(); }
  bool empty(Priority p) const { return lanes_[urgency(p)].by_due.empty(); }

  /// The class pop() takes from at `now` (invariant 1); nothing when empty.
  std::optional<Priority> next_class(Clock::time_point now = Clock::now()) const {
    std::optional<size_t> first, overdue;
    Clock::duration longest{};
    for (size_t u = 0; u < kPriorityClasses; ++u) {
      const Lane& l = lanes_[u];
      if (l.by_due.empty())
        continue;
      if (!first)
        first = u;
      const auto since = std::max(l.arrivals.begin()->second, l.last_turn);
      const auto late = now - since - aging_;
      if (u != *first && late >= Clock::duration::zero() && (!overdue || late > longest)) {
        overdue = u;
        longest = late;
      }
    }
    if (!first)
      return std::nullopt;
    return priority_of_urgency(overdue ? *overdue : *first);
  }

  /// Takes the next entry (invariant 1); the queue must not be empty.
  T pop(Clock::time_point now = Clock::now()) { return pop_class(*next_class(now), now); }

  /// Takes the first entry of class `p` by invariant 2 (its turn); the class must have one.
  T pop_class(Priority p, Clock::time_point now = Clock::now()) {
    Lane& l = lanes_[urgency(p)];
    auto it = l.by_due.begin();
    T value = std::move(it->second);
    l.arrivals.erase(it->first.second);
    l.by_due.erase(it);
    l.last_turn = now;
    --size_;
    return value;
  }

  /// Takes out every entry `pred(value)` holds for; how many.
  template <class Pred>
  size_t erase_if(Pred pred) {
    size_t n = 0;
    for (Lane& l : lanes_) {
      for (auto it = l.by_due.begin(); it != l.by_due.end();) {
        if (pred(static_cast<const T&>(it->second))) {
          l.arrivals.erase(it->first.second);
          it = l.by_due.erase(it);
          ++n;
        } else {
          ++it;
        }
      }
    }
    size_ -= n;
    return n;
  }

  /// Takes out the first entry `pred(value)` holds for, the classes in pop()'s order at `now`
  /// (invariant 1: the one whose turn it is, then the others most urgent first), each by
  /// invariant 2; the class taken from has had its turn. Nothing when `pred` holds for none.
  template <class Pred>
  std::optional<T> take_next_if(Pred pred, Clock::time_point now = Clock::now()) {
    const std::optional<Priority> turn = next_class(now);
    if (!turn)
      return std::nullopt;
    const size_t first = urgency(*turn);
    for (size_t k = 0; k <= kPriorityClasses; ++k) {
      if (k > 0 && k - 1 == first)
        continue;  // the turn's lane, scanned first
      Lane& l = lanes_[k == 0 ? first : k - 1];
      for (auto it = l.by_due.begin(); it != l.by_due.end(); ++it)
        if (pred(static_cast<const T&>(it->second))) {
          std::optional<T> value(std::move(it->second));
          l.arrivals.erase(it->first.second);
          l.by_due.erase(it);
          l.last_turn = now;
          --size_;
          return value;
        }
    }
    return std::nullopt;
  }

  /// Calls `f(value)` for every entry (most urgent class first, each by invariant 2).
  template <class F>
  void for_each(F f) const {
    for (const Lane& l : lanes_)
      for (const auto& entry : l.by_due)
        f(entry.second);
  }

  /// Takes out the first entry (most urgent class first, each by invariant 2) that `pred(value)`
  /// holds for; nothing when none does.
  template <class Pred>
  std::optional<T> take_if(Pred pred) {
    for (Lane& l : lanes_)
      for (auto it = l.by_due.begin(); it != l.by_due.end(); ++it)
        if (pred(static_cast<const T&>(it->second))) {
          std::optional<T> value(std::move(it->second));
          l.arrivals.erase(it->first.second);
          l.by_due.erase(it);
          --size_;
          return value;
        }
    return std::nullopt;
  }

  /// Takes out every entry, most urgent class first, each class by invariant 2.
  std::vector<T> take_all() {
    std::vector<T> all;
    all.reserve(size_);
    for (Lane& l : lanes_) {
      for (auto& [key, value] : l.by_due)
        all.push_back(std::move(value));
      l.by_due.clear();
      l.arrivals.clear();
    }
    size_ = 0;
    return all;
  }

  void clear() { (void)take_all(); }

  /// Calls `f(value)` for each entry served before a new one of class `p` due at `due` would
  /// be by strict priority (aging aside): every entry of a more urgent class and those of its
  /// own class due no later.
  template <class F>
  void for_each_ahead(Priority p, Clock::time_point due, F f) const {
    for (size_t u = 0; u <= urgency(p); ++u)
      for (const auto& [key, value] : lanes_[u].by_due) {
        if (u == urgency(p) && key.first > due)
          break;
        f(value);
      }
  }

private:
  struct Lane {
    std::map<std::pair<Clock::time_point, uint64_t>, T> by_due;  ///< invariant 2
    std::map<uint64_t, Clock::time_point> arrivals;              ///< by arrival: the oldest first
    Clock::time_point last_turn{};                               ///< the last pop from this class
  };

  Clock::duration aging_;
  Lane lanes_[kPriorityClasses];  ///< by urgency
  uint64_t next_seq_ = 0;
  size_t size_ = 0;
};

}  // namespace caf_rdma
