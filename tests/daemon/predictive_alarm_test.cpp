// The alarm plan under a predictive lead (daemon.predictiveLead): a hard
// memory threshold's watch sits half way to its level, so a fast fall wakes
// the engine on its way down; never nearer than the hysteresis.
#include <gtest/gtest.h>

#include "daemon/alarm_plan.hpp"

namespace pressured {
namespace {

constexpr uint64_t MiB = 1 << 20;

Threshold memory(ThresholdKind kind, uint64_t bytes) {
  Threshold t;
  t.signal = Signal::AllocatableMemoryAvailable;
  t.kind = kind;
  t.value.quantity = static_cast<double>(bytes);
  return t;
}

NodeSnapshot available(double bytes, double capacity) {
  NodeSnapshot s;
  SignalObservation o;
  o.value = bytes;
  o.capacity = capacity;
  s.signal(Signal::AllocatableMemoryAvailable) = o;
  return s;
}

AlarmReadings kubepods_at(uint64_t usage) {
  AlarmReadings r;
  r.kubepods_path = "/cg/kubepods";
  r.kubepods_usage = usage;
  return r;
}

TEST(PredictiveAlarm, AHardThresholdIsWatchedHalfWay) {
  const auto s = available(600.0 * MiB, 1024.0 * MiB);  // 500 MiB until 100 MiB
  auto off = plan_alarms({memory(ThresholdKind::Hard, 100 * MiB)}, s, kubepods_at(424 * MiB));
  EXPECT_EQ(off.watches.at("/cg/kubepods").counter, 924 * MiB);
  auto on = plan_alarms({memory(ThresholdKind::Hard, 100 * MiB)}, s, kubepods_at(424 * MiB), std::chrono::milliseconds(200));
  EXPECT_EQ(on.watches.at("/cg/kubepods"), (WatchLevels{674 * MiB, 674 * MiB}));
  // Without a kubepods counter the level comes from the signal, half way too.
  AlarmReadings no_counter = kubepods_at(0);
  no_counter.kubepods_usage.reset();
  auto derived = plan_alarms({memory(ThresholdKind::Hard, 100 * MiB)}, s, no_counter, std::chrono::milliseconds(200));
  EXPECT_EQ(derived.watches.at("/cg/kubepods").counter, 674 * MiB);
}

TEST(PredictiveAlarm, NeverNearerThanTheHysteresisNorForSoftThresholds) {
  // 12 MiB to go: half of it is under the 8 MiB hysteresis, the watch stays at the level.
  auto close = plan_alarms({memory(ThresholdKind::Hard, 100 * MiB)}, available(112.0 * MiB, 512.0 * MiB),
                           kubepods_at(400 * MiB), std::chrono::milliseconds(200));
  EXPECT_EQ(close.watches.at("/cg/kubepods").counter, 412 * MiB);
  auto soft = plan_alarms({memory(ThresholdKind::Soft, 100 * MiB)}, available(600.0 * MiB, 1024.0 * MiB),
                          kubepods_at(424 * MiB), std::chrono::milliseconds(200));
  EXPECT_EQ(soft.watches.at("/cg/kubepods").counter, 924 * MiB);
}

}  // namespace
}  // namespace pressured
