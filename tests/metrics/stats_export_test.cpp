// Stats declared once (pressured/stats.hpp) and exported through Metrics:
// the struct and its series come from one list, the series follow the
// counters and gauges at each scrape, and a component works without a Metrics.

#include "pressured/stats.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "metrics/exposition.hpp"
#include "pressured/metrics.hpp"

#define TEST_WIDGET_STATS(COUNTER, GAUGE)                                                     \
  COUNTER(made, "pressured_test_widgets_made_total", "", "Widgets made.")                    \
  COUNTER(lost_on_road, "pressured_test_widgets_lost_total", "where=road", "Widgets lost.")  \
  COUNTER(lost_at_sea, "pressured_test_widgets_lost_total", "where=sea,how=sunk", "Widgets lost.")
PRESSURED_DECLARE_STATS(WidgetStats, TEST_WIDGET_STATS);

#define TEST_QUEUE_STATS(COUNTER, GAUGE)                                                 \
  COUNTER(queued, "pressured_test_queued_total", "", "Widgets queued.")                  \
  GAUGE(waiting, "pressured_test_queue_widgets", "state=waiting", "Widgets in the queue, now.") \
  GAUGE(stuck, "pressured_test_queue_widgets", "state=stuck", "Widgets in the queue, now.")
PRESSURED_DECLARE_STATS(QueueStats, TEST_QUEUE_STATS);

// A counter into a family Metrics serves itself (its help and type are kept).
#define TEST_RELOAD_STATS(COUNTER, GAUGE) \
  COUNTER(reloads_ok, "pressured_config_reloads_total", "result=success", "ignored: the family exists")
PRESSURED_DECLARE_STATS(ReloadStats, TEST_RELOAD_STATS);

// A gauge into a gauge family Metrics serves itself.
#define TEST_CONDITION_STATS(COUNTER, GAUGE) \
  GAUGE(test_condition, "pressured_node_condition", "condition=TestPressure", "ignored: the family exists")
PRESSURED_DECLARE_STATS(ConditionStats, TEST_CONDITION_STATS);

#define TEST_CLASHING_STATS(COUNTER, GAUGE) COUNTER(ready, "pressured_ready", "", "a gauge already")
PRESSURED_DECLARE_STATS(ClashingStats, TEST_CLASHING_STATS);

#define TEST_CLASHING_GAUGE_STATS(COUNTER, GAUGE) \
  GAUGE(latency, "pressured_detection_latency_seconds", "", "a histogram already")
PRESSURED_DECLARE_STATS(ClashingGaugeStats, TEST_CLASHING_GAUGE_STATS);

#define TEST_BAD_LABEL_STATS(COUNTER, GAUGE) COUNTER(bad, "pressured_test_bad_total", "where", "no value")
PRESSURED_DECLARE_STATS(BadLabelStats, TEST_BAD_LABEL_STATS);

namespace pressured {
namespace {

using testing::scrape;
using testing::scraped;

MetricsOptions options() {
  MetricsOptions o;
  o.node = "node-a";
  return o;
}

TEST(Stats, DeclarationGeneratesTheStructAndItsTable) {
  constexpr auto defs = WidgetStats::defs();
  static_assert(defs.size() == 3);
  EXPECT_EQ(defs[0].field, "made");
  EXPECT_EQ(defs[0].kind, StatKind::Counter);
  EXPECT_EQ(defs[1].metric, "pressured_test_widgets_lost_total");
  EXPECT_EQ(defs[2].labels, "where=sea,how=sunk");
  WidgetStats s;  // the null form: no Metrics, the counters still count
  ++s.made;
  EXPECT_EQ((s.*(defs[0].member)).load(), 1u);
  EXPECT_EQ(s.lost_at_sea.load(), 0u);
}

TEST(Stats, GaugesAreDeclaredBesideCountersAndSnapshotAsPlainValues) {
  constexpr auto defs = QueueStats::defs();
  static_assert(defs.size() == 3);
  EXPECT_EQ(defs[0].kind, StatKind::Counter);
  EXPECT_EQ(defs[1].kind, StatKind::Gauge);
  EXPECT_EQ(defs[2].field, "stuck");
  QueueStats s;
  s.queued += 3;
  s.waiting = 2;
  const QueueStats::Values v = s.values();  // plain numbers, copyable
  s.waiting = 0;
  EXPECT_EQ(v.queued, 3u);
  EXPECT_EQ(v.waiting, 2u);
  EXPECT_EQ(v.stuck, 0u);
}

TEST(Stats, NamesMustFitTheirKind) {
  EXPECT_TRUE(stat_name_fits(StatKind::Counter, "pressured_x_total"));
  EXPECT_FALSE(stat_name_fits(StatKind::Counter, "pressured_x"));
  EXPECT_TRUE(stat_name_fits(StatKind::Gauge, "pressured_x"));
  EXPECT_FALSE(stat_name_fits(StatKind::Gauge, "pressured_x_total"));
  // Refused when the family is registered (the daemon's start, every test
  // that exports the struct).
  Metrics m(options());
  std::atomic<uint64_t> v{0};
  const ExternalStat gauge_total[] = {{"pressured_test_gauge_total", "", "h", &v, StatKind::Gauge}};
  EXPECT_THROW((void)m.export_counters(gauge_total), std::logic_error);
  const ExternalStat counter_plain[] = {{"pressured_test_counter", "", "h", &v, StatKind::Counter}};
  EXPECT_THROW((void)m.export_counters(counter_plain), std::logic_error);
}

TEST(Stats, ExportedSeriesFollowTheCountersAtEachScrape) {
  Metrics m(options());
  WidgetStats s;
  s.made = 2;  // counted before the export: seen at once
  StatsExport handle = export_stats(m, s);
  EXPECT_TRUE(handle.active());
  auto e = scrape(m);
  EXPECT_EQ(e.types["pressured_test_widgets_made_total"], "counter");
  EXPECT_EQ(e.value("pressured_test_widgets_made_total", {{"node", "node-a"}}), 2);
  EXPECT_EQ(e.value("pressured_test_widgets_lost_total", {{"where", "road"}}), 0) << "exists at 0 from the start";
  EXPECT_EQ(e.value("pressured_test_widgets_lost_total", {{"where", "sea"}, {"how", "sunk"}}), 0);
  ++s.made;
  s.lost_at_sea += 5;
  EXPECT_EQ(scraped(m, "pressured_test_widgets_made_total"), 3);
  EXPECT_EQ(scraped(m, "pressured_test_widgets_lost_total", {{"where", "sea"}}), 5);
  EXPECT_EQ(scraped(m, "pressured_test_widgets_lost_total"), 5) << "summed over where";
  EXPECT_NE(m.render().find("# HELP pressured_test_widgets_lost_total Widgets lost."), std::string::npos);
}

TEST(Stats, NewFamiliesAreListedWithTheBuiltInOnes) {
  Metrics m(options());
  WidgetStats s;
  auto handle = export_stats(m, s);
  const auto names = m.metric_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "pressured_test_widgets_lost_total"), names.end());
  EXPECT_EQ(std::count(names.begin(), names.end(), "pressured_test_widgets_lost_total"), 1) << "one family, two series";
}

TEST(Stats, TwoComponentsFeedingOneSeriesAdd) {
  Metrics m(options());
  WidgetStats a, b;
  auto ha = export_stats(m, a);
  auto hb = export_stats(m, b);
  a.made = 2;
  b.made = 3;
  EXPECT_EQ(scraped(m, "pressured_test_widgets_made_total"), 5);
}

TEST(Stats, AnExistingFamilyKeepsItsHelpAndItsOtherSeries) {
  Metrics m(options());
  ReloadStats s;
  auto handle = export_stats(m, s);
  m.add(stats::kConfigReloads, {result_name(false)});
  m.set(stats::kConfigLastReloadSuccessful, {}, 0);
  ++s.reloads_ok;
  auto e = scrape(m);
  EXPECT_EQ(e.value("pressured_config_reloads_total", {{"result", "success"}}), 1);
  EXPECT_EQ(e.value("pressured_config_reloads_total", {{"result", "failure"}}), 1);
  EXPECT_EQ(m.render().find("ignored: the family exists"), std::string::npos);
}

TEST(Stats, TheLastCountsStayWhenTheComponentGoes) {
  Metrics m(options());
  {
    auto s = std::make_unique<WidgetStats>();
    auto handle = export_stats(m, *s);
    s->made = 4;  // not scraped yet
    handle = StatsExport();  // released (as by the component's destructor) before the struct goes
    EXPECT_FALSE(handle.active());
  }
  EXPECT_EQ(scraped(m, "pressured_test_widgets_made_total"), 4);
  EXPECT_EQ(scraped(m, "pressured_test_widgets_made_total"), 4) << "nothing read after the release";
}

TEST(Stats, AHandleMayOutliveItsMetrics) {
  WidgetStats s;
  StatsExport handle;
  {
    Metrics m(options());
    handle = export_stats(m, s);
  }
  ++s.made;
  handle = StatsExport();  // no access to the gone Metrics (ASan would say)
  SUCCEED();
}

TEST(Stats, MisdeclaredStatsAreRefused) {
  Metrics m(options());
  ClashingStats clash;
  EXPECT_THROW((void)export_stats(m, clash), std::logic_error) << "pressured_ready is a gauge";
  ClashingGaugeStats clash_gauge;
  EXPECT_THROW((void)export_stats(m, clash_gauge), std::logic_error) << "a gauge into a histogram family";
  BadLabelStats bad;
  EXPECT_THROW((void)export_stats(m, bad), std::logic_error);
}

TEST(Stats, ExportedGaugesTakeTheValueAtEachScrape) {
  Metrics m(options());
  QueueStats s;
  s.waiting = 4;  // set before the export: seen at once
  auto handle = export_stats(m, s);
  auto e = scrape(m);
  EXPECT_EQ(e.types["pressured_test_queue_widgets"], "gauge");
  EXPECT_EQ(e.types["pressured_test_queued_total"], "counter");
  EXPECT_EQ(e.value("pressured_test_queue_widgets", {{"node", "node-a"}, {"state", "waiting"}}), 4);
  EXPECT_EQ(e.value("pressured_test_queue_widgets", {{"state", "stuck"}}), 0) << "exists at 0 from the start";
  s.waiting = 1;  // a gauge goes down as well
  ++s.stuck;
  e = scrape(m);
  EXPECT_EQ(e.value("pressured_test_queue_widgets", {{"state", "waiting"}}), 1);
  EXPECT_EQ(e.value("pressured_test_queue_widgets", {{"state", "stuck"}}), 1);
  EXPECT_NE(m.render().find("# HELP pressured_test_queue_widgets Widgets in the queue, now."), std::string::npos);
  const auto names = m.metric_names();
  EXPECT_EQ(std::count(names.begin(), names.end(), "pressured_test_queue_widgets"), 1);
}

TEST(Stats, AGaugeHasOneSetterAtATimeAndKeepsItsLastValue) {
  Metrics m(options());
  auto first = std::make_unique<QueueStats>();
  auto handle = export_stats(m, *first);
  QueueStats second;
  EXPECT_THROW((void)export_stats(m, second), std::logic_error) << "two live gauges would flip the series";
  first->waiting = 7;
  handle = StatsExport();  // the component goes: its last value stays
  first.reset();
  EXPECT_EQ(scraped(m, "pressured_test_queue_widgets", {{"state", "waiting"}}), 7);
  second.waiting = 2;
  auto next = export_stats(m, second);  // a new component may take the series over
  EXPECT_EQ(scraped(m, "pressured_test_queue_widgets", {{"state", "waiting"}}), 2);
}

TEST(Stats, AGaugeIntoAnExistingFamilyKeepsItsHelp) {
  Metrics m(options());
  ConditionStats s;
  s.test_condition = 1;
  auto handle = export_stats(m, s);
  auto e = scrape(m);
  EXPECT_EQ(e.value("pressured_node_condition", {{"condition", "TestPressure"}}), 1);
  EXPECT_EQ(e.value("pressured_node_condition", {{"condition", "MemoryPressure"}}), 0) << "Metrics' own series stay";
  EXPECT_EQ(m.render().find("ignored: the family exists"), std::string::npos);
}

TEST(Stats, ACounterFromItsFirstCountAppearsWithIt) {
  Metrics m(options());
  std::atomic<uint64_t> rare{0};
  ExternalStat stat{"pressured_test_rare_total", "kind=odd", "Rare things.", &rare};
  stat.from_first_count = true;
  auto handle = m.export_counters(std::span(&stat, 1));
  auto e = scrape(m);
  EXPECT_TRUE(e.find("pressured_test_rare_total").empty()) << "no series before the first count";
  const auto names = m.metric_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "pressured_test_rare_total"), names.end())
      << "the family is registered (validators know it) before it has a series";
  rare += 2;
  e = scrape(m);
  EXPECT_EQ(e.types["pressured_test_rare_total"], "counter");
  EXPECT_EQ(e.value("pressured_test_rare_total", {{"kind", "odd"}}), 2);
}

}  // namespace
}  // namespace pressured
