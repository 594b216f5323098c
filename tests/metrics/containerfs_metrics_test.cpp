// containerfs.* are exported like every signal: value, capacity, unit and
// the derived thresholds.
#include <gtest/gtest.h>

#include "metrics/exposition.hpp"
#include "pressured/metrics.hpp"

namespace pressured {
namespace {

TEST(ContainerfsMetrics, SignalsAndDerivedThresholdsAreExported) {
  MetricsOptions o;
  o.node = "node-a";
  Metrics m(o);
  Threshold derived;  // as with_containerfs_thresholds copies nodefs.available<10%
  derived.signal = Signal::ContainerfsAvailable;
  derived.value.kind = ThresholdValue::Kind::Percent;
  derived.value.percent = 10;
  EvictionConfig cfg;
  cfg.thresholds = {derived};
  m.set_thresholds(cfg);
  m.signal_observed(Signal::ContainerfsAvailable, 4e9, 100e9);
  m.signal_observed(Signal::ContainerfsInodesFree, 1000, 1e6);
  auto e = testing::parse_exposition(m.render());
  ASSERT_TRUE(e.errors.empty()) << e.errors.front();
  EXPECT_EQ(e.value("pressured_signal_value", {{"signal", "containerfs.available"}, {"unit", "bytes"}}), 4e9);
  EXPECT_EQ(e.value("pressured_signal_capacity", {{"signal", "containerfs.available"}}), 100e9);
  EXPECT_EQ(e.value("pressured_signal_value", {{"signal", "containerfs.inodesFree"}, {"unit", "inodes"}}), 1000);
  EXPECT_EQ(e.value("pressured_signal_threshold", {{"signal", "containerfs.available"}, {"threshold_type", "hard"}}),
            10e9);
}

}  // namespace
}  // namespace pressured
