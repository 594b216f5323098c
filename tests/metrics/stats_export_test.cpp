// Stats declared once (pressured/stats.hpp) and exported through Metrics:
// the struct and its series come from one list, the series follow the
// counters at each scrape, and a component works without a Metrics.

#include "pressured/stats.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "metrics/exposition.hpp"
#include "pressured/metrics.hpp"

#define TEST_WIDGET_STATS(COUNTER)                                                            \
  COUNTER(made, "pressured_test_widgets_made_total", "", "Widgets made.")                    \
  COUNTER(lost_on_road, "pressured_test_widgets_lost_total", "where=road", "Widgets lost.")  \
  COUNTER(lost_at_sea, "pressured_test_widgets_lost_total", "where=sea,how=sunk", "Widgets lost.")
PRESSURED_DECLARE_STATS(WidgetStats, TEST_WIDGET_STATS);

// A counter into a family Metrics serves itself (its help and type are kept).
#define TEST_RELOAD_STATS(COUNTER) \
  COUNTER(reloads_ok, "pressured_config_reloads_total", "result=success", "ignored: the family exists")
PRESSURED_DECLARE_STATS(ReloadStats, TEST_RELOAD_STATS);

#define TEST_CLASHING_STATS(COUNTER) COUNTER(ready, "pressured_ready", "", "a gauge already")
PRESSURED_DECLARE_STATS(ClashingStats, TEST_CLASHING_STATS);

#define TEST_BAD_LABEL_STATS(COUNTER) COUNTER(bad, "pressured_test_bad_total", "where", "no value")
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
  EXPECT_EQ(defs[1].metric, "pressured_test_widgets_lost_total");
  EXPECT_EQ(defs[2].labels, "where=sea,how=sunk");
  WidgetStats s;  // the null form: no Metrics, the counters still count
  ++s.made;
  EXPECT_EQ((s.*(defs[0].member)).load(), 1u);
  EXPECT_EQ(s.lost_at_sea.load(), 0u);
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
  m.config_reload(false);
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
  BadLabelStats bad;
  EXPECT_THROW((void)export_stats(m, bad), std::logic_error);
}

}  // namespace
}  // namespace pressured
