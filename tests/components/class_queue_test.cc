// ClassQueue (components/class_queue.h): strict priority between the three classes, earliest
// deadline first within one, aging so that no class starves. Time is passed in, never read.
#include "components/class_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace caf_rdma {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const Clock::time_point kT0 = Clock::time_point{} + std::chrono::hours(1);

TEST(ClassQueueTest, Inv1_TheMostUrgentClassGoesFirst) {
  ClassQueue<std::string> q(milliseconds(50));
  q.push(Priority::kBackground, kT0, "background", kT0);
  q.push(Priority::kBulk, kT0, "bulk", kT0);
  q.push(Priority::kLatency, kT0 + milliseconds(900), "latency", kT0);
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.size(Priority::kBulk), 1u);
  EXPECT_EQ(q.next_class(kT0), Priority::kLatency);
  EXPECT_EQ(q.pop(kT0), "latency");  // a later deadline, but the more urgent class
  EXPECT_EQ(q.pop(kT0), "bulk");
  EXPECT_EQ(q.pop(kT0), "background");
  EXPECT_TRUE(q.empty());
  EXPECT_FALSE(q.next_class(kT0).has_value());
}

TEST(ClassQueueTest, Inv2_EarliestDeadlineFirstWithinAClassEqualOnesInArrivalOrder) {
  ClassQueue<int> q;
  q.push(Priority::kBulk, kT0 + milliseconds(3), 3, kT0);
  q.push(Priority::kBulk, kT0 + milliseconds(1), 1, kT0);
  q.push(Priority::kBulk, kT0 + milliseconds(2), 20, kT0);
  q.push(Priority::kBulk, kT0 + milliseconds(2), 21, kT0);
  std::vector<int> order;
  while (!q.empty())
    order.push_back(q.pop(kT0));
  EXPECT_EQ(order, (std::vector<int>{1, 20, 21, 3}));
}

// take_next_if (the stream server's workers: an entry whose address holds its share is passed
// over): the classes in pop()'s order, the first entry the predicate takes; the class taken
// from has had its turn.
TEST(ClassQueueTest, Inv1_TakeNextIfKeepsTheOrderAndPassesOverWhatThePredicateRefuses) {
  ClassQueue<std::string> q(milliseconds(50));
  q.push(Priority::kBackground, kT0, "background", kT0);
  q.push(Priority::kBulk, kT0 + milliseconds(2), "bulk-late", kT0);
  q.push(Priority::kBulk, kT0 + milliseconds(1), "bulk-held", kT0);
  q.push(Priority::kLatency, kT0, "latency-held", kT0);
  auto not_held = [](const std::string& s) { return s.find("held") == std::string::npos; };
  EXPECT_EQ(q.take_next_if(not_held, kT0 + milliseconds(30)), "bulk-late");
  EXPECT_FALSE(q.take_next_if([](const std::string&) { return false; }, kT0).has_value());
  // 60 ms on, background is overdue (bulk, served at 30 ms, is not): its turn comes before the
  // latency class's.
  EXPECT_EQ(q.take_next_if([](const std::string&) { return true; }, kT0 + milliseconds(60)),
            "background");
  EXPECT_EQ(q.take_next_if([](const std::string&) { return true; }, kT0 + milliseconds(60)),
            "latency-held");
  EXPECT_EQ(q.size(), 1u);
  std::vector<std::string> left;
  q.for_each([&left](const std::string& s) { left.push_back(s); });
  EXPECT_EQ(left, (std::vector<std::string>{"bulk-held"}));
}

// The starvation test: a latency-class entry arrives every millisecond and one entry is taken
// every millisecond, for ten seconds; ten background entries queued at the start are all taken,
// each within its turn (aging 50 ms: the k-th by about k x 50 ms), and bulk ones too.
TEST(ClassQueueTest, Inv1_BackgroundNeverStarvesUnderAConstantLatencyLoad) {
  ClassQueue<std::string> q(milliseconds(50));
  for (int i = 0; i < 10; ++i)
    q.push(Priority::kBackground, kT0, "background", kT0);
  for (int i = 0; i < 5; ++i)
    q.push(Priority::kBulk, kT0, "bulk", kT0);
  std::vector<Clock::time_point> background_taken, bulk_taken;
  int latency_taken = 0;
  for (int ms = 0; ms < 10000; ++ms) {
    const auto now = kT0 + milliseconds(ms);
    q.push(Priority::kLatency, now + milliseconds(5), "latency", now);
    const std::string got = q.pop(now);
    if (got == "background")
      background_taken.push_back(now);
    else if (got == "bulk")
      bulk_taken.push_back(now);
    else
      ++latency_taken;
  }
  ASSERT_EQ(background_taken.size(), 10u);
  ASSERT_EQ(bulk_taken.size(), 5u);
  for (size_t k = 0; k < background_taken.size(); ++k)
    EXPECT_LE(background_taken[k] - kT0,
              milliseconds(50) * static_cast<int>(k + 1) + milliseconds(1))
        << "background entry " << k;
  for (size_t k = 0; k < bulk_taken.size(); ++k)
    EXPECT_LE(bulk_taken[k] - kT0, milliseconds(50) * static_cast<int>(k + 1) + milliseconds(1))
        << "bulk entry " << k;
  // The latency class kept the rest: every turn but the 15 the others were owed.
  EXPECT_EQ(latency_taken, 10000 - 15);
  EXPECT_EQ(q.size(), 15u);  // the latency entries that waited while the others took a turn
}

TEST(ClassQueueTest, Inv1_OfTwoOverdueClassesTheLongestOverdueGoesFirst) {
  ClassQueue<std::string> q(milliseconds(50));
  q.push(Priority::kBackground, kT0, "background", kT0);
  q.push(Priority::kBulk, kT0 + milliseconds(20), "bulk", kT0 + milliseconds(20));
  q.push(Priority::kLatency, kT0, "latency", kT0);
  // At 80 ms both wait past their aging: background since 0, bulk since 20.
  EXPECT_EQ(q.pop(kT0 + milliseconds(80)), "background");
  EXPECT_EQ(q.pop(kT0 + milliseconds(81)), "bulk");
  EXPECT_EQ(q.pop(kT0 + milliseconds(82)), "latency");
}

TEST(ClassQueueTest, Inv1_AClassJustServedWaitsItsAgingAgain) {
  ClassQueue<std::string> q(milliseconds(50));
  q.push(Priority::kBackground, kT0, "background 1", kT0);
  q.push(Priority::kBackground, kT0, "background 2", kT0);
  q.push(Priority::kLatency, kT0, "latency 1", kT0);
  q.push(Priority::kLatency, kT0, "latency 2", kT0);
  EXPECT_EQ(q.pop(kT0 + milliseconds(50)), "background 1");  // overdue
  // Its oldest entry still waits since 0, but its turn was at 50: not overdue before 100.
  EXPECT_EQ(q.pop(kT0 + milliseconds(99)), "latency 1");
  EXPECT_EQ(q.pop(kT0 + milliseconds(100)), "background 2");
  EXPECT_EQ(q.pop(kT0 + milliseconds(100)), "latency 2");
}

TEST(ClassQueueTest, Inv3_EraseAndTakeAllTakeEachEntryOnce) {
  ClassQueue<int> q;
  for (int i = 0; i < 6; ++i)
    q.push(i % 2 == 0 ? Priority::kBulk : Priority::kLatency, kT0 + milliseconds(10 - i), i, kT0);
  EXPECT_EQ(q.erase_if([](int v) { return v == 2 || v == 3; }), 2u);
  EXPECT_EQ(q.size(), 4u);
  EXPECT_EQ(q.erase_if([](int v) { return v == 2; }), 0u);
  EXPECT_EQ(q.take_all(), (std::vector<int>{5, 1, 4, 0}));  // latency first, each by due
  EXPECT_TRUE(q.empty());
}

TEST(ClassQueueTest, WhatWaitsAheadOfANewEntryIsTheMoreUrgentAndItsOwnDueNoLater) {
  ClassQueue<int> q;
  q.push(Priority::kLatency, kT0 + milliseconds(900), 1, kT0);
  q.push(Priority::kBulk, kT0 + milliseconds(10), 2, kT0);
  q.push(Priority::kBulk, kT0 + milliseconds(30), 3, kT0);
  q.push(Priority::kBackground, kT0, 4, kT0);
  std::vector<int> ahead;
  q.for_each_ahead(Priority::kBulk, kT0 + milliseconds(20), [&](int v) { ahead.push_back(v); });
  EXPECT_EQ(ahead, (std::vector<int>{1, 2}));
  ahead.clear();
  q.for_each_ahead(Priority::kLatency, kT0, [&](int v) { ahead.push_back(v); });
  EXPECT_TRUE(ahead.empty());
}

TEST(PriorityTest, Inv1_ClassesByNameAndWireValueAndUnknownOnesRefused) {
  EXPECT_EQ(static_cast<int>(Priority{}), static_cast<int>(Priority::kBulk));
  for (size_t u = 0; u < kPriorityClasses; ++u) {
    const Priority p = priority_of_urgency(u);
    EXPECT_EQ(urgency(p), u);
    EXPECT_EQ(parse_priority(priority_name(p)), p);
    EXPECT_EQ(priority_from_wire(static_cast<uint32_t>(p)), p);
  }
  EXPECT_FALSE(priority_from_wire(3).has_value());
  EXPECT_FALSE(parse_priority("urgent").has_value());
}

}  // namespace
}  // namespace caf_rdma
