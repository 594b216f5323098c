// Families declared once (pressured/stats.hpp, PRESSURED_DECLARE_FAMILIES):
// the table Metrics registers, the checks a declaration and a call get when
// they compile, and the bounds label values keep at the call.

#include <algorithm>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "metrics/exposition.hpp"
#include "pressured/metric_families.hpp"
#include "pressured/metrics.hpp"

namespace pressured {
namespace {

inline constexpr double kTestBuckets[] = {0.1, 1, 10};

// A list of its own, as a component would declare one.
namespace widget_stats {
#define TEST_WIDGET_FAMILIES(COUNTER, GAUGE, HISTOGRAM)                                              \
  COUNTER(kMade, "pressured_test_widgets_made_total", "Widgets made, by shape.", label("shape"))     \
  GAUGE(kQueued, "pressured_test_widgets_queued", "Widgets waiting, now.")                            \
  HISTOGRAM(kBuildSeconds, "pressured_test_widget_build_seconds", "How long a widget took.",          \
            kTestBuckets, token_label("line"), text_label("note", 8).capped(2, "other"))
PRESSURED_DECLARE_FAMILIES(TEST_WIDGET_FAMILIES);
}  // namespace widget_stats

TEST(Families, DeclarationGivesTypedFamiliesAndTheTableInOrder) {
  static_assert(widget_stats::kFamilyCount == 3);
  static_assert(std::is_same_v<std::remove_cv_t<decltype(widget_stats::kMade)>, FamilyDef<StatKind::Counter, 1>>);
  static_assert(std::is_same_v<std::remove_cv_t<decltype(widget_stats::kQueued)>, FamilyDef<StatKind::Gauge, 0>>);
  static_assert(
      std::is_same_v<std::remove_cv_t<decltype(widget_stats::kBuildSeconds)>, FamilyDef<StatKind::Histogram, 2>>);
  const auto& t = widget_stats::kFamilies;
  EXPECT_EQ(t[0].name, "pressured_test_widgets_made_total");
  EXPECT_EQ(t[1].kind, StatKind::Gauge);
  EXPECT_EQ(t[2].index, 2);
  ASSERT_EQ(t[2].labels.size(), 2u);
  EXPECT_EQ(t[2].labels[1].name, "note");
  EXPECT_EQ(t[2].labels[1].max_values, 2);
  EXPECT_EQ(t[2].labels[1].overflow, "other");
  ASSERT_EQ(t[2].buckets.size(), 3u);
  EXPECT_EQ(t[2].buckets[2], 10);
}

// What PRESSURED_DECLARE_FAMILIES's static_assert refuses.
TEST(Families, DeclarationsThatDoNotFitAreRefused) {
  using L = std::array<LabelDef, 1>;
  static_assert(family_fits<StatKind::Counter>("pressured_x_total", L{label("a")}, {}));
  static_assert(!family_fits<StatKind::Counter>("pressured_x", L{label("a")}, {}));
  static_assert(!family_fits<StatKind::Gauge>("pressured_x_total", L{label("a")}, {}));
  static_assert(!family_fits<StatKind::Histogram>("pressured_x_total", L{label("a")}, kTestBuckets));
  static_assert(!family_fits<StatKind::Gauge>("x_gauge", L{label("a")}, {}));
  static_assert(!family_fits<StatKind::Gauge>("pressured_x", L{label("node")}, {}));
  static_assert(!family_fits<StatKind::Histogram>("pressured_x", L{label("le")}, kTestBuckets));
  static_assert(!family_fits<StatKind::Gauge>("pressured_x", L{label("Bad-Name")}, {}));
  static_assert(!family_fits<StatKind::Gauge>("pressured_x", std::array{label("a"), label("a")}, {}));
  static_assert(!family_fits<StatKind::Gauge>("pressured_x", L{text_label("a", 10).capped(3, "")}, {}));
  static constexpr double kDown[] = {1, 0.5};
  static_assert(!family_fits<StatKind::Histogram>("pressured_x", L{label("a")}, kDown));
  static_assert(!family_fits<StatKind::Gauge>("pressured_x", L{label("a")}, kTestBuckets));
  SUCCEED();
}

template <typename F, std::size_t N>
concept CanAdd = requires(Metrics& m, const F& f, const LabelValues<N>& v) { m.add(f, v); };
template <typename F, std::size_t N>
concept CanSet = requires(Metrics& m, const F& f, const LabelValues<N>& v) { m.set(f, v, 1.0); };
template <typename F, std::size_t N>
concept CanObserve = requires(Metrics& m, const F& f, const LabelValues<N>& v) { m.observe(f, v, 1.0); };

// A call with the wrong kind or label count does not compile.
TEST(Families, CallsAreCheckedWhenTheyCompile) {
  using Kills = decltype(stats::kLocalKills);
  static_assert(CanAdd<Kills, 1>);
  static_assert(!CanAdd<Kills, 0>);
  static_assert(!CanAdd<Kills, 2>);
  static_assert(!CanSet<Kills, 1>);
  static_assert(!CanObserve<Kills, 1>);
  using Psi = decltype(stats::kPsiAvailable);
  static_assert(CanSet<Psi, 0>);
  static_assert(!CanAdd<Psi, 0>);
  using Latency = decltype(stats::kDetectionLatency);
  static_assert(CanObserve<Latency, 1>);
  static_assert(!CanAdd<Latency, 1>);
  static_assert(std::is_constructible_v<LabelValues<3>, Signal, QosClass, ThresholdKind>);
  static_assert(!std::is_constructible_v<LabelValues<2>, Signal, QosClass, ThresholdKind>);
  static_assert(!std::is_constructible_v<LabelValues<1>, int>);
  SUCCEED();
}

// Metrics registers its own table in order, each family once: the
// exposition lists the counters, then the gauges, then the histograms, each
// kind in the declared order.
TEST(Families, MetricsServesEveryDeclaredFamilyInItsOrder) {
  MetricsOptions o;
  o.node = "node-a";
  Metrics m(o);
  // A family is rendered once it has a series: give every one a series.
  for (std::size_t i = 0; i < kSignalCount; ++i) m.signal_observed(static_cast<Signal>(i), 1, 2);
  EvictionConfig cfg;
  cfg.thresholds.emplace_back();
  m.set_thresholds(cfg);
  m.eviction(Signal::MemoryAvailable, QosClass::Burstable, ThresholdKind::Hard, "n", "p", "u");
  m.update_pods({PodMemorySample{"n", "p", "u", QosClass::Burstable, 10, 5, MemcgActivitySample{1, 1, 1, 1}}});
  m.memcg_activity("kubepods", MemcgActivitySample{1, 1, 1, 1});
  m.bpf_attach("p", "raw_tp", "");
  m.reactor_dispatch_latency({0.001}, {1, 0}, 0.0005);
  m.add(stats::kEvictionContainers, {"c"});
  m.add(stats::kEvictionNoCandidates, {Signal::MemoryAvailable});
  m.observe(stats::kEvictionLatency, {ThresholdKind::Hard}, 1);
  m.add(stats::kEvictionPolicyActions, {"start"});
  for (const auto* f : {&stats::kPluginCalls, &stats::kPluginTimeouts, &stats::kPluginErrors, &stats::kPluginVetoes,
                        &stats::kPluginProposals}) {
    m.add(*f, {"p"});
  }
  m.add(stats::kKubernetesApiRequests, {ApiAction::Event, ApiOutcome::Success});
  m.observe(stats::kDetectionLatency, {"bpf"}, 0.001);
  m.observe(stats::kReclaimDuration, {}, 0.001);
  m.add(stats::kStaleReads, {"pod_usage"});
  m.add(stats::kBpfLoadRefusals, {"p", "fentry"});
  const std::string text = m.render();
  std::set<std::string_view> seen;
  std::size_t at = 0;
  for (const StatKind kind : {StatKind::Counter, StatKind::Gauge, StatKind::Histogram}) {
    const char* type = kind == StatKind::Counter ? "counter" : kind == StatKind::Gauge ? "gauge" : "histogram";
    for (const FamilyInfo& f : stats::kFamilies) {
      if (f.kind != kind) continue;
      EXPECT_TRUE(seen.insert(f.name).second) << f.name << " declared twice";
      std::string type_line = "# TYPE ";
      type_line.append(f.name).append(" ").append(type).append("\n");
      const std::size_t found = text.find(type_line, at);
      ASSERT_NE(found, std::string::npos) << f.name << " missing, of another type, or out of the declared order";
      at = found;
    }
  }
  EXPECT_EQ(seen.size(), stats::kFamilyCount);
}

TEST(Families, LabelValuesAreBoundedAsDeclared) {
  MetricsOptions o;
  o.node = "node-a";
  Metrics m(o);
  m.add(stats::kEvictionPolicyActions, {"Stuck-Victim!"});            // token: folded
  m.add(stats::kEvictionPolicyActions, {""});                         // token: never empty
  m.add(stats::kEvictionPolicyActions, {std::string(60, 'a')}, 2);    // token: at most 48
  m.add(stats::kPluginCalls, {std::string(70, 'p')}, 3);              // text: cut at 63
  m.observe(stats::kDetectionLatency, {"Memcg Notification"}, 0.001);  // token
  const auto e = testing::scrape(m);
  ASSERT_TRUE(e.errors.empty()) << e.errors.front();
  EXPECT_EQ(e.value("pressured_eviction_policy_actions_total", {{"action", "stuck_victim_"}}), 1);
  EXPECT_EQ(e.value("pressured_eviction_policy_actions_total", {{"action", "unknown"}}), 1);
  EXPECT_EQ(e.value("pressured_eviction_policy_actions_total", {{"action", std::string(48, 'a')}}), 2);
  EXPECT_EQ(e.value("pressured_plugin_calls_total", {{"plugin", std::string(63, 'p')}}), 3);
  EXPECT_EQ(e.value("pressured_detection_latency_seconds_count", {{"source", "memcg_notification"}}), 1);
}

// One series per distinct bounded value, however the caller spells it: the
// table finds "A" and "a" (one token) as the same series.
TEST(Families, ValuesThatBoundAlikeShareOneSeries) {
  MetricsOptions o;
  o.node = "node-a";
  Metrics m(o);
  for (int i = 0; i < 3; ++i) {
    m.add(stats::kBpfLoadRefusals, {"OOM-Kill", "fentry"});
    m.add(stats::kBpfLoadRefusals, {"oom_kill", "FENTRY"});
  }
  const auto e = testing::scrape(m);
  EXPECT_EQ(e.find("pressured_bpf_load_refusals_total").size(), 1u);
  EXPECT_EQ(e.value("pressured_bpf_load_refusals_total", {{"program", "oom_kill"}, {"flavour", "fentry"}}), 6);
}

TEST(Families, ACappedLabelCountsLaterValuesAsItsOverflow) {
  MetricsOptions o;
  o.node = "node-a";
  Metrics m(o);
  const std::size_t cap = stats::kEvictionContainers.labels[0].max_values;
  for (std::size_t i = 0; i < cap; ++i) m.add(stats::kEvictionContainers, {std::string(1, 'c').append(std::to_string(i))});
  m.add(stats::kEvictionContainers, {"late"});
  m.add(stats::kEvictionContainers, {"later"});
  m.add(stats::kEvictionContainers, {"c0"});  // has a series: keeps it
  const auto e = testing::scrape(m);
  EXPECT_EQ(e.find("pressured_eviction_containers_total").size(), cap + 1);
  EXPECT_EQ(e.value("pressured_eviction_containers_total", {{"container", "other"}}), 2);
  EXPECT_EQ(e.value("pressured_eviction_containers_total", {{"container", "c0"}}), 2);
  EXPECT_FALSE(e.value("pressured_eviction_containers_total", {{"container", "late"}}).has_value());
}

// A histogram whose buckets come at run time (the reactor's) cannot be
// observed into by name: it would be built without buckets.
TEST(Families, AHistogramWithoutDeclaredBucketsRefusesObserve) {
  MetricsOptions o;
  o.node = "node-a";
  Metrics m(o);
  EXPECT_THROW(m.observe(stats::kReactorDispatchLatency, {}, 0.1), std::logic_error);
}

}  // namespace
}  // namespace pressured
