// The node-condition publisher alone: what reaches the API and when.
#include "daemon/condition_publisher.hpp"

#include <vector>

#include <gtest/gtest.h>

namespace pressured {
namespace {

using Conditions = ConditionPublisher::Conditions;
constexpr auto kMemory = static_cast<std::size_t>(Condition::MemoryPressure);

TimePoint at(int s) { return TimePoint(std::chrono::seconds(s)); }

struct Reports {
  std::vector<std::pair<Conditions, Conditions>> calls;
  ConditionPublisher::Report fn() {
    return [this](const Conditions& status, const Conditions& changed) { calls.emplace_back(status, changed); };
  }
};

Decisions memory_pressure(bool status, bool flipped) {
  Decisions d;
  d.conditions[kMemory] = status;
  if (flipped) d.changes.push_back({Condition::MemoryPressure, status});
  return d;
}

Conditions all(bool v) {
  Conditions c;
  c.fill(v);
  return c;
}

TEST(ConditionPublisher, FirstPublicationAnnouncesEveryConditionThenOnlyChanges) {
  Reports r;
  ConditionPublisher p(r.fn(), nullptr, std::chrono::seconds(60));
  p.publish(memory_pressure(false, false), at(1));
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].second, all(true));
  p.publish(memory_pressure(false, false), at(2));
  EXPECT_EQ(r.calls.size(), 1u) << "nothing changed, heartbeat not due";
  p.publish(memory_pressure(true, true), at(3));
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_TRUE(r.calls[1].first[kMemory]);
  Conditions only_memory{};
  only_memory[kMemory] = true;
  EXPECT_EQ(r.calls[1].second, only_memory);
}

TEST(ConditionPublisher, AHeartbeatRepublishesUnchangedConditions) {
  Reports r;
  ConditionPublisher p(r.fn(), nullptr, std::chrono::seconds(60));
  p.publish(memory_pressure(true, true), at(0));
  p.publish(memory_pressure(true, false), at(59));
  EXPECT_EQ(r.calls.size(), 1u);
  p.publish(memory_pressure(true, false), at(60));
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[1].second, Conditions{}) << "a heartbeat announces no change";
  EXPECT_TRUE(r.calls[1].first[kMemory]);
}

TEST(ConditionPublisher, AfterARestoreTheFirstPublicationAnnouncesOnlyChanges) {
  Reports r;
  ConditionPublisher p(r.fn(), nullptr);
  p.restored();
  p.publish(memory_pressure(true, false), at(1));
  ASSERT_EQ(r.calls.size(), 1u) << "still published once, so the API holds the current status";
  EXPECT_EQ(r.calls[0].second, Conditions{});
}

}  // namespace
}  // namespace pressured
