// The reactor's counters (EventStats) as an operator reads them on /metrics:
// the series names operators' dashboards and alerts use, every event source
// and type with a series of its own, and label values that need no cleaning.

#include <gtest/gtest.h>

#include <cstddef>
#include <set>
#include <string>

#include "metrics/exposition.hpp"
#include "pressured/events.hpp"
#include "pressured/metrics.hpp"

namespace pressured {
namespace {

using testing::exported;
using testing::scrape;

bool label_token(std::string_view v) {
  if (v.empty() || v.size() > 48) return false;
  for (char c : v) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

TEST(EventStats, EveryNamedSourceAndTypeHasItsOwnSeries) {
  EventStats stats;
  MetricsOptions o;
  o.node = "n";
  Metrics m(o);
  const StatsExport handle = export_stats(m, stats);
  EXPECT_TRUE(scrape(m).find("pressured_events_total").empty()) << "no event, no series";
  // Each pair counted a different number of times, so a pair exported from
  // another pair's cell would show the wrong count.
  uint64_t n = 0;
  for (const auto& s : kEventSourceNames) {
    for (const auto& t : kEventTypeNames) {
      ++n;
      for (uint64_t i = 0; i < n; ++i) stats.count_event(s.value, t.value);
    }
  }
  const auto e = scrape(m);
  EXPECT_EQ(e.types.at("pressured_events_total"), "counter");
  EXPECT_EQ(e.find("pressured_events_total").size(), std::size(kEventSourceNames) * std::size(kEventTypeNames));
  n = 0;
  for (const auto& s : kEventSourceNames) {
    for (const auto& t : kEventTypeNames) {
      ++n;
      EXPECT_EQ(e.value("pressured_events_total", {{"source", std::string(s.name)}, {"type", std::string(t.name)}}),
                static_cast<double>(n))
          << s.name << "/" << t.name;
    }
  }
}

TEST(EventStats, SourceAndTypeNamesAreLabelValuesAsTheyAre) {
  // The series take the enum names unchanged: each must be a clean,
  // distinct Prometheus label value ([a-z0-9_], at most 48 characters).
  std::set<std::string_view> sources, types;
  for (const auto& s : kEventSourceNames) {
    EXPECT_TRUE(label_token(s.name)) << s.name;
    sources.insert(s.name);
  }
  for (const auto& t : kEventTypeNames) {
    EXPECT_TRUE(label_token(t.name)) << t.name;
    EXPECT_LT(static_cast<std::size_t>(t.value), kEventTypeCount) << t.name;
    types.insert(t.name);
  }
  EXPECT_EQ(sources.size(), kEventSourceCount);
  EXPECT_EQ(types.size(), std::size(kEventTypeNames));
}

TEST(EventStats, ReactorCountersAreExportedUnderTheirSeries) {
  EventStats stats;
  // At 0 from the start (alerts take increase() of them).
  EXPECT_EQ(exported(stats, "pressured_ring_buffer_dropped_events_total"), 0);
  EXPECT_EQ(exported(stats, "pressured_resyncs_total", {{"reason", "ring_buffer_overflow"}}), 0);
  EXPECT_EQ(exported(stats, "pressured_safety_net_polls_total"), 0);
  EXPECT_EQ(exported(stats, "pressured_reactor_posted_tasks_total", {{"result", "rejected"}}), 0);
  stats.ringbuf_drops += 5;
  ++stats.resyncs;
  stats.safety_net_ticks += 3;
  stats.wakeups += 9;
  stats.posted += 4;
  ++stats.post_rejected;
  EXPECT_EQ(exported(stats, "pressured_ring_buffer_dropped_events_total"), 5);
  EXPECT_EQ(exported(stats, "pressured_resyncs_total", {{"reason", "ring_buffer_overflow"}}), 1);
  EXPECT_EQ(exported(stats, "pressured_safety_net_polls_total"), 3);
  EXPECT_EQ(exported(stats, "pressured_reactor_wakeups_total"), 9);
  EXPECT_EQ(exported(stats, "pressured_reactor_posted_tasks_total", {{"result", "run"}}), 4);
  EXPECT_EQ(exported(stats, "pressured_reactor_posted_tasks_total", {{"result", "rejected"}}), 1);
  EXPECT_EQ(exported(stats, "pressured_reactor_posted_tasks_total"), 5);
}

}  // namespace
}  // namespace pressured
