// The alarm planner as a pure function: thresholds, a snapshot and a few
// usage numbers in, watch levels, the PID alarm and the tracked cgroups out.
// No cgroup tree, no reactor.
#include "daemon/alarm_plan.hpp"

#include <gtest/gtest.h>

namespace pressured {
namespace {

constexpr uint64_t MiB = 1 << 20;

Threshold memory(Signal s, ThresholdKind kind, uint64_t bytes) {
  Threshold t;
  t.signal = s;
  t.kind = kind;
  t.value.quantity = static_cast<double>(bytes);
  return t;
}

Threshold pids(ThresholdKind kind, double percent) {
  Threshold t;
  t.signal = Signal::PidAvailable;
  t.kind = kind;
  t.value.kind = ThresholdValue::Kind::Percent;
  t.value.percent = percent;
  return t;
}

SignalObservation obs(double value, double capacity, bool stale = false) {
  SignalObservation o;
  o.value = value;
  o.capacity = capacity;
  o.stale = stale;
  return o;
}

AlarmReadings readings(uint64_t kubepods, uint64_t scope_file, uint64_t scope_counter) {
  AlarmReadings r;
  r.kubepods_path = "/cg/kubepods";
  r.kubepods_usage = kubepods;
  r.scope_path = "/cg";
  r.scope_file_usage = scope_file;
  r.scope_counter_usage = scope_counter;
  return r;
}

TEST(AlarmPlan, NodeThresholdWatchesKubepodsAndTheNodeScopeAtUsagePlusHeadroom) {
  NodeSnapshot s;
  s.signal(Signal::MemoryAvailable) = obs(600.0 * MiB, 2048.0 * MiB);
  auto plan = plan_alarms({memory(Signal::MemoryAvailable, ThresholdKind::Hard, 100 * MiB)}, s,
                          readings(300 * MiB, 2000 * MiB, 500 * MiB));
  ASSERT_TRUE(plan.watches_known);
  // 500 MiB until the threshold on top of what each counts now.
  EXPECT_EQ(plan.watches.at("/cg/kubepods"), (WatchLevels{800 * MiB, 800 * MiB}));
  EXPECT_EQ(plan.watches.at("/cg"), (WatchLevels{2500 * MiB, 1000 * MiB}));
  EXPECT_EQ(plan.hysteresis, static_cast<uint64_t>(2048.0 * MiB / 100));
}

TEST(AlarmPlan, TheLowestLevelPerCgroupWins) {
  NodeSnapshot s;
  s.signal(Signal::MemoryAvailable) = obs(600.0 * MiB, 2048.0 * MiB);
  s.signal(Signal::AllocatableMemoryAvailable) = obs(400.0 * MiB, 1024.0 * MiB);
  auto plan = plan_alarms({memory(Signal::MemoryAvailable, ThresholdKind::Hard, 100 * MiB),
                           memory(Signal::MemoryAvailable, ThresholdKind::Soft, 300 * MiB),
                           memory(Signal::AllocatableMemoryAvailable, ThresholdKind::Hard, 350 * MiB)},
                          s, readings(300 * MiB, 500 * MiB, 500 * MiB));
  // kubepods: allocatable crosses after 50 MiB more; the node scope: the soft threshold after 300.
  EXPECT_EQ(plan.watches.at("/cg/kubepods").counter, 350 * MiB);
  EXPECT_EQ(plan.watches.at("/cg").counter, 800 * MiB);
}

TEST(AlarmPlan, AThresholdAlreadyMetGetsNoWatch) {
  NodeSnapshot s;
  s.signal(Signal::MemoryAvailable) = obs(50.0 * MiB, 2048.0 * MiB);
  auto plan = plan_alarms({memory(Signal::MemoryAvailable, ThresholdKind::Hard, 100 * MiB)}, s,
                          readings(300 * MiB, 500 * MiB, 500 * MiB));
  EXPECT_TRUE(plan.watches_known);
  EXPECT_TRUE(plan.watches.empty());
}

TEST(AlarmPlan, AStaleReadKeepsTheWatchesButStillPlansThePidAlarm) {
  NodeSnapshot s;
  s.signal(Signal::MemoryAvailable) = obs(50.0 * MiB, 2048.0 * MiB, /*stale=*/true);
  s.signal(Signal::PidAvailable) = obs(9000, 10000);
  auto plan = plan_alarms({memory(Signal::MemoryAvailable, ThresholdKind::Hard, 100 * MiB),
                           pids(ThresholdKind::Hard, 10)},
                          s, readings(300 * MiB, 500 * MiB, 500 * MiB));
  EXPECT_FALSE(plan.watches_known);
  ASSERT_TRUE(plan.pid_alarm);
  EXPECT_EQ(*plan.pid_alarm, 9001u);
}

TEST(AlarmPlan, WithoutAKubepodsCounterAllocatableGivesTheLevel) {
  NodeSnapshot s;
  s.signal(Signal::AllocatableMemoryAvailable) = obs(400.0 * MiB, 1024.0 * MiB);
  AlarmReadings r;
  r.kubepods_path = "/cg/kubepods";
  auto plan = plan_alarms({memory(Signal::AllocatableMemoryAvailable, ThresholdKind::Hard, 100 * MiB)}, s, r);
  // Working set 624 MiB + 300 MiB of headroom.
  EXPECT_EQ(plan.watches.at("/cg/kubepods"), (WatchLevels{924 * MiB, 924 * MiB}));
  EXPECT_EQ(plan.watches.count(""), 0u) << "no node scope, no watch on it";
}

TEST(AlarmPlan, PidAlarmIsTheLowestTaskCountAtWhichAThresholdIsMet) {
  NodeSnapshot s;
  s.signal(Signal::PidAvailable) = obs(9000, 10000);
  auto plan = plan_alarms({pids(ThresholdKind::Hard, 10), pids(ThresholdKind::Soft, 20)}, s, AlarmReadings{});
  ASSERT_TRUE(plan.pid_alarm);
  EXPECT_EQ(*plan.pid_alarm, 8001u) << "8000 tasks leave exactly 20 %: not yet below";
  s.signal(Signal::PidAvailable) = obs(100, 10000);  // already crossed: still armed
  EXPECT_EQ(plan_alarms({pids(ThresholdKind::Hard, 10)}, s, AlarmReadings{}).pid_alarm, 9001u);
  s.signal(Signal::PidAvailable) = obs(100, 10000, /*stale=*/true);
  EXPECT_FALSE(plan_alarms({pids(ThresholdKind::Hard, 10)}, s, AlarmReadings{}).pid_alarm);
  s.signal(Signal::PidAvailable).reset();
  EXPECT_EQ(plan_alarms({pids(ThresholdKind::Hard, 10)}, s, AlarmReadings{}).pid_alarm, 0u);
}

TEST(AlarmPlan, HysteresisIsOnePercentOfCapacityAtLeastEightMiB) {
  EXPECT_EQ(watch_hysteresis(0), 8 * MiB);
  EXPECT_EQ(watch_hysteresis(512.0 * MiB), 8 * MiB);
  EXPECT_EQ(watch_hysteresis(4096.0 * MiB), static_cast<uint64_t>(4096.0 * MiB / 100));
}

TEST(AlarmPlan, TrackingCoversTheScopesAndEveryPodWithACgroup) {
  NodeSnapshot s;
  Pod a;
  a.uid = "a";
  a.cgroup_id = 11;
  a.cgroup_path = "/cg/kubepods/poda";
  Pod b;  // not yet resolved to a cgroup
  b.uid = "b";
  Pod c;
  c.uid = "c";
  c.cgroup_id = 2;  // the same id as a scope: the scope's label stays
  c.cgroup_path = "/cg/kubepods/burstable";
  s.pods = {a, b, c};
  auto want = plan_tracking({{1, "/cg/kubepods", "kubepods"}, {2, "/cg/kubepods/burstable", "burstable"},
                             {0, "/cg/kubepods/besteffort", "besteffort"}},
                            s);
  ASSERT_EQ(want.size(), 3u);
  EXPECT_EQ(want.at(1).scope, "kubepods");
  EXPECT_EQ(want.at(2).scope, "burstable");
  EXPECT_EQ(want.at(11).path, "/cg/kubepods/poda");
  EXPECT_TRUE(want.at(11).scope.empty());
}

}  // namespace
}  // namespace pressured
