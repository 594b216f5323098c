// containerfs.* (KEP-4191): the kubelet's threshold derivation, the ranking
// by writable layers, and DiskPressure.
#include <gtest/gtest.h>

#include "engine/engine_helpers.hpp"

namespace pressured {
namespace {

using namespace pressured::testing;  // NOLINT

const Threshold* find(const std::vector<Threshold>& ts, Signal s, ThresholdKind k) {
  for (const auto& t : ts) {
    if (t.signal == s && t.kind == k) return &t;
  }
  return nullptr;
}

std::vector<Threshold> node_and_image() {
  return {hard(Signal::NodefsAvailable, pct(10), qty(kGi)), hard(Signal::NodefsInodesFree, pct(5)),
          soft(Signal::NodefsAvailable, pct(15), std::chrono::seconds(90), qty(2 * kGi)),
          hard(Signal::ImagefsAvailable, pct(20), qty(3 * kGi)), hard(Signal::ImagefsInodesFree, pct(7)),
          hard(Signal::MemoryAvailable, qty(100 * kMi))};
}

TEST(ContainerfsDerivation, FromNodefsWhenSplitSeparateOrSingle) {
  for (auto layout : {ContainerfsLayout::Split, ContainerfsLayout::Separate, ContainerfsLayout::Single}) {
    SCOPED_TRACE(std::string(name(layout)));
    auto ts = with_containerfs_thresholds(node_and_image(), layout);
    ASSERT_EQ(ts.size(), node_and_image().size() + 3);
    const Threshold* h = find(ts, Signal::ContainerfsAvailable, ThresholdKind::Hard);
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->value, pct(10));
    EXPECT_EQ(h->min_reclaim, qty(kGi));
    const Threshold* s = find(ts, Signal::ContainerfsAvailable, ThresholdKind::Soft);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->value, pct(15));
    EXPECT_EQ(s->grace_period, std::chrono::seconds(90));
    EXPECT_EQ(s->min_reclaim, qty(2 * kGi));
    const Threshold* i = find(ts, Signal::ContainerfsInodesFree, ThresholdKind::Hard);
    ASSERT_NE(i, nullptr);
    EXPECT_EQ(i->value, pct(5));
    // No soft nodefs.inodesFree: none derived (the kubelet's is an empty, never-met threshold).
    EXPECT_EQ(find(ts, Signal::ContainerfsInodesFree, ThresholdKind::Soft), nullptr);
  }
}

TEST(ContainerfsDerivation, FromImagefsWhenTheLayersAreOnIt) {
  auto ts = with_containerfs_thresholds(node_and_image(), ContainerfsLayout::Imagefs);
  ASSERT_EQ(ts.size(), node_and_image().size() + 2);
  const Threshold* h = find(ts, Signal::ContainerfsAvailable, ThresholdKind::Hard);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->value, pct(20));
  EXPECT_EQ(h->min_reclaim, qty(3 * kGi));
  EXPECT_EQ(find(ts, Signal::ContainerfsAvailable, ThresholdKind::Soft), nullptr);  // imagefs has no soft one
  ASSERT_NE(find(ts, Signal::ContainerfsInodesFree, ThresholdKind::Hard), nullptr);
  EXPECT_EQ(find(ts, Signal::ContainerfsInodesFree, ThresholdKind::Hard)->value, pct(7));
}

TEST(ContainerfsDerivation, UnknownLayoutDerivesNothingAndGivenOnesAreReplaced) {
  auto given = node_and_image();
  given.push_back(hard(Signal::ContainerfsAvailable, qty(1)));
  auto none = with_containerfs_thresholds(given, ContainerfsLayout::Unknown);
  EXPECT_EQ(none, node_and_image());
  auto ts = with_containerfs_thresholds(given, ContainerfsLayout::Separate);
  EXPECT_EQ(find(ts, Signal::ContainerfsAvailable, ThresholdKind::Hard)->value, pct(10));
  // Idempotent: deriving again gives the same list (reloads derive again).
  EXPECT_EQ(with_containerfs_thresholds(ts, ContainerfsLayout::Separate), ts);
  // No source threshold: nothing to derive.
  EXPECT_TRUE(with_containerfs_thresholds({hard(Signal::MemoryAvailable, qty(1))}, ContainerfsLayout::Split).size() == 1);
}

Pod disk_pod(std::string uid, double total, double layers, double inodes = 0, double layer_inodes = 0) {
  Pod p = pod(std::move(uid), QosClass::Burstable, 100 * kMi, 100 * kMi);
  p.usage.ephemeral_storage_bytes = static_cast<uint64_t>(total);
  p.usage.inodes = static_cast<uint64_t>(inodes);
  EphemeralStorageBreakdown b;
  b.writable_layers_measured = true;
  b.writable_layers_bytes = static_cast<uint64_t>(layers);
  b.writable_layers_inodes = static_cast<uint64_t>(layer_inodes);
  p.ephemeral_storage = b;
  return p;
}

TEST(ContainerfsRanking, WritableLayersWhenContainerfsIsNotNodefs) {
  Pod logs = disk_pod("logs", 20 * kGi, 1 * kGi, 900000, 100);
  Pod layer = disk_pod("layer", 6 * kGi, 5 * kGi, 20000, 10000);
  for (auto l : {ContainerfsLayout::Separate, ContainerfsLayout::Imagefs}) {
    EXPECT_EQ(pod_usage(layer, Signal::ContainerfsAvailable, l), static_cast<uint64_t>(5 * kGi));
    EXPECT_EQ(pod_usage(logs, Signal::ContainerfsInodesFree, l), 100u);
  }
  // On nodefs (split, one filesystem) logs and emptyDirs share it: everything counts.
  for (auto l : {ContainerfsLayout::Split, ContainerfsLayout::Single}) {
    EXPECT_EQ(pod_usage(logs, Signal::ContainerfsAvailable, l), static_cast<uint64_t>(20 * kGi));
    EXPECT_EQ(pod_usage(logs, Signal::ContainerfsInodesFree, l), 900000u);
  }
  // Other signals are unchanged by the layout.
  EXPECT_EQ(pod_usage(logs, Signal::NodefsAvailable, ContainerfsLayout::Separate), static_cast<uint64_t>(20 * kGi));
  // Not walked yet: no usage known on that filesystem, a last resort.
  Pod unwalked = pod("u", QosClass::Burstable, 0);
  unwalked.usage.ephemeral_storage_bytes = 1;
  RankKeys k = rank_keys(unwalked, Signal::ContainerfsAvailable, ContainerfsLayout::Separate, EvictionConfig{});
  EXPECT_TRUE(k.zero_usage);
  EXPECT_EQ(k.usage, 0u);
}

TEST(ContainerfsEngine, EvictsTheLargestWritableLayerAndSetsDiskPressure) {
  auto ts = with_containerfs_thresholds({hard(Signal::NodefsAvailable, pct(10))}, ContainerfsLayout::Separate);
  Engine e(config(ts));
  Pod logs = disk_pod("logs", 20 * kGi, 1 * kGi);
  Pod w1 = disk_pod("w1", 6 * kGi, 5 * kGi);
  Pod w2 = disk_pod("w2", 3 * kGi, 3 * kGi);
  Pod sys = disk_pod("sys", 30 * kGi, 30 * kGi);
  sys.critical = true;
  Snap s;
  s.s.containerfs_layout = ContainerfsLayout::Separate;
  s.sig(Signal::NodefsAvailable, 50 * kGi, 100 * kGi).sig(Signal::ContainerfsAvailable, 4 * kGi, 100 * kGi);
  s.add(logs).add(w1).add(w2).add(sys);
  Decisions d = e.evaluate(s, at(1));
  EXPECT_TRUE(d.conditions[static_cast<std::size_t>(Condition::DiskPressure)]);
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->uid, "w1");
  EXPECT_EQ(d.eviction->signal, Signal::ContainerfsAvailable);
  EXPECT_EQ(d.eviction->usage_at_decision, static_cast<uint64_t>(5 * kGi));
  ASSERT_TRUE(d.eviction->runner_up);
  EXPECT_EQ(d.eviction->runner_up->uid, "w2");
  EXPECT_DOUBLE_EQ(d.eviction->threshold_value, 10 * kGi);

  // The same pressure on a split node (containerfs is nodefs): ranked like
  // nodefs, by all ephemeral storage.
  Snap split = s;
  split.s.containerfs_layout = ContainerfsLayout::Split;
  Engine e2(config(with_containerfs_thresholds({hard(Signal::NodefsAvailable, pct(10))}, ContainerfsLayout::Split)));
  Decisions d2 = e2.evaluate(split, at(1));
  ASSERT_TRUE(d2.eviction);
  EXPECT_EQ(d2.eviction->uid, "logs");

  // Recovered: the condition clears (transition period 0).
  s.sig(Signal::ContainerfsAvailable, 40 * kGi, 100 * kGi);
  Decisions d3 = e.evaluate(s, at(2));
  EXPECT_FALSE(d3.conditions[static_cast<std::size_t>(Condition::DiskPressure)]);
  EXPECT_FALSE(d3.eviction);
}

TEST(ContainerfsEngine, OnlyCriticalPodsLeftMeansNoCandidate) {
  Engine e(config(with_containerfs_thresholds({hard(Signal::NodefsAvailable, pct(10))}, ContainerfsLayout::Separate)));
  Pod sys = disk_pod("sys", 30 * kGi, 30 * kGi);
  sys.critical = true;
  Snap s;
  s.s.containerfs_layout = ContainerfsLayout::Separate;
  s.sig(Signal::ContainerfsAvailable, 1 * kGi, 100 * kGi).add(sys);
  Decisions d = e.evaluate(s, at(1));
  EXPECT_FALSE(d.eviction);
  ASSERT_EQ(d.no_candidates.size(), 1u);
  EXPECT_EQ(d.no_candidates[0], Signal::ContainerfsAvailable);
  EXPECT_TRUE(d.conditions[static_cast<std::size_t>(Condition::DiskPressure)]);
}

}  // namespace
}  // namespace pressured
