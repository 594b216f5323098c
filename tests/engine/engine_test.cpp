#include "pressured/engine.hpp"
#include "engine/eviction_words.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "engine_helpers.hpp"

namespace pressured {
namespace {

using namespace pressured::testing;
using std::chrono::seconds;

const Condition kMem = Condition::MemoryPressure;
bool cond(const Decisions& d, Condition c) { return d.conditions[static_cast<std::size_t>(c)]; }
std::string victim(const Decisions& d) { return d.eviction ? d.eviction->uid : "<none>"; }

// --- Thresholds -------------------------------------------------------------

TEST(EngineThreshold, ExactlyAtTheThresholdIsNotMet) {
  Engine e(config({hard(Signal::MemoryAvailable, qty(100 * kMi))}));
  Snap s;
  s.mem(100 * kMi).add(pod("a", QosClass::BestEffort, kMi));
  Decisions d = e.evaluate(s, at(0));
  ASSERT_EQ(d.thresholds.size(), 1u);
  EXPECT_FALSE(d.thresholds[0].met);
  EXPECT_FALSE(cond(d, kMem));
  EXPECT_FALSE(d.eviction);

  s.mem(100 * kMi - 1);
  d = e.evaluate(s, at(1));
  EXPECT_TRUE(d.thresholds[0].met);
  EXPECT_TRUE(d.thresholds[0].grace_elapsed);
  EXPECT_TRUE(cond(d, kMem));
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->uid, "a");
  EXPECT_EQ(d.eviction->kind, ThresholdKind::Hard);
  EXPECT_EQ(d.eviction->grace_period_seconds, 0);
  EXPECT_DOUBLE_EQ(d.eviction->observed, 100 * kMi - 1);
  EXPECT_DOUBLE_EQ(d.eviction->threshold_value, 100 * kMi);
}

TEST(EngineThreshold, PercentResolvesAgainstTheSignalsCapacity) {
  Engine e(config({hard(Signal::NodefsAvailable, pct(10))}));
  Snap s;
  s.sig(Signal::NodefsAvailable, 10 * kGi, 100 * kGi);  // exactly 10%
  Decisions d = e.evaluate(s, at(0));
  EXPECT_DOUBLE_EQ(d.thresholds[0].threshold_value, 10 * kGi);
  EXPECT_FALSE(d.thresholds[0].met);
  s.sig(Signal::NodefsAvailable, 10 * kGi - 1, 100 * kGi);
  EXPECT_TRUE(e.evaluate(s, at(1)).thresholds[0].met);
  // Same available bytes, bigger disk: 10% is now 20Gi.
  s.sig(Signal::NodefsAvailable, 15 * kGi, 200 * kGi);
  d = e.evaluate(s, at(2));
  EXPECT_DOUBLE_EQ(d.thresholds[0].threshold_value, 20 * kGi);
  EXPECT_TRUE(d.thresholds[0].met);
  EXPECT_TRUE(cond(d, Condition::DiskPressure));
}

TEST(EngineThreshold, PercentOfUnknownCapacityIsNeverMet) {
  Engine e(config({hard(Signal::NodefsAvailable, pct(10))}));
  Snap s;
  s.sig(Signal::NodefsAvailable, 0, 0);
  EXPECT_FALSE(e.evaluate(s, at(0)).thresholds[0].met);
}

TEST(EngineThreshold, UnobservedSignalCannotMeetAThresholdAndResetsIt) {
  Engine e(config({soft(Signal::MemoryAvailable, qty(kGi), seconds(10))}));
  Snap s;
  s.mem(kMi).add(pod("a", QosClass::BestEffort, kMi));
  EXPECT_TRUE(e.evaluate(s, at(0)).thresholds[0].met);
  NodeSnapshot none = s;
  none.signal(Signal::MemoryAvailable).reset();
  Decisions d = e.evaluate(none, at(5));
  EXPECT_FALSE(d.thresholds[0].met);
  EXPECT_FALSE(d.thresholds[0].signal_observed);
  // The grace period starts over when the signal comes back.
  d = e.evaluate(s, at(12));
  EXPECT_TRUE(d.thresholds[0].met);
  EXPECT_FALSE(d.thresholds[0].grace_elapsed);
  EXPECT_FALSE(d.eviction);
}

TEST(EngineThreshold, StaleValuesAreEvaluatedAndFlagged) {
  Engine e(config({hard(Signal::MemoryAvailable, qty(100 * kMi))}));
  Snap s;
  s.sig(Signal::MemoryAvailable, 10 * kMi, 16 * kGi, /*stale=*/true).add(pod("a", QosClass::BestEffort, kMi));
  Decisions d = e.evaluate(s, at(0));
  EXPECT_TRUE(d.thresholds[0].met);
  EXPECT_TRUE(d.thresholds[0].stale);
  ASSERT_TRUE(d.eviction);
  EXPECT_TRUE(d.eviction->signal_stale);
}

TEST(EngineThreshold, PsiIsMetAboveTheThreshold) {
  Engine e(config({hard(Signal::MemoryPressureSomeAvg10, qty(20))}));
  Snap s;
  s.sig(Signal::MemoryPressureSomeAvg10, 20).add(pod("a", QosClass::Burstable, 10 * kMi));
  EXPECT_FALSE(e.evaluate(s, at(0)).thresholds[0].met);  // equal is not above
  s.sig(Signal::MemoryPressureSomeAvg10, 20.01);
  Decisions d = e.evaluate(s, at(1));
  EXPECT_TRUE(d.thresholds[0].met);
  EXPECT_TRUE(cond(d, kMem));
  EXPECT_EQ(victim(d), "a");  // PSI memory signals rank by memory
}

TEST(EngineThreshold, PsiPercentThresholdUsesCapacity100) {
  Engine e(config({hard(Signal::MemoryPressureFullAvg10, pct(30))}));
  Snap s;
  s.sig(Signal::MemoryPressureFullAvg10, 31, /*capacity=*/0);
  Decisions d = e.evaluate(s, at(0));
  EXPECT_DOUBLE_EQ(d.thresholds[0].threshold_value, 30);
  EXPECT_TRUE(d.thresholds[0].met);
}

TEST(EngineThreshold, IoPressureSetsDiskPressureButNeverEvicts) {
  Engine e(config({hard(Signal::IoPressureFullAvg10, qty(50))}));
  Snap s;
  s.sig(Signal::IoPressureFullAvg10, 80).add(pod("a", QosClass::BestEffort, kMi));
  s.s.pods[0].usage.ephemeral_storage_bytes = 1000;
  Decisions d = e.evaluate(s, at(0));
  EXPECT_TRUE(cond(d, Condition::DiskPressure));
  EXPECT_FALSE(d.eviction);
  EXPECT_TRUE(d.no_candidates.empty());
}

// --- Soft thresholds and grace periods --------------------------------------

TEST(EngineSoft, ActsOnlyAfterItsGracePeriod) {
  Engine e(config({soft(Signal::MemoryAvailable, qty(kGi), seconds(30))}));
  Snap s;
  s.mem(500 * kMi).add(pod("a", QosClass::Burstable, kGi, 512 * kMi));
  Decisions d = e.evaluate(s, at(100));
  EXPECT_TRUE(d.thresholds[0].met);
  EXPECT_FALSE(d.thresholds[0].grace_elapsed);
  EXPECT_TRUE(cond(d, kMem)) << "a soft threshold sets the condition regardless of grace";
  EXPECT_FALSE(d.eviction);
  ASSERT_TRUE(d.thresholds[0].first_observed);
  EXPECT_EQ(*d.thresholds[0].first_observed, at(100));
  EXPECT_FALSE(e.evaluate(s, at(129.999)).eviction);
  d = e.evaluate(s, at(130));  // exactly the grace period: acts
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->kind, ThresholdKind::Soft);
  EXPECT_EQ(d.eviction->grace_period_seconds, 30);  // pod default terminationGracePeriodSeconds, no cap
}

TEST(EngineSoft, GracePeriodResetsWhenTheThresholdStopsBeingMet) {
  Engine e(config({soft(Signal::MemoryAvailable, qty(kGi), seconds(30))}));
  Snap low, high;
  low.mem(500 * kMi).add(pod("a", QosClass::BestEffort, kMi));
  high.mem(2 * kGi).add(pod("a", QosClass::BestEffort, kMi));
  EXPECT_FALSE(e.evaluate(low, at(0)).eviction);
  EXPECT_FALSE(e.evaluate(low, at(20)).eviction);
  EXPECT_FALSE(e.evaluate(high, at(21)).thresholds[0].met);
  Decisions d = e.evaluate(low, at(22));
  EXPECT_EQ(*d.thresholds[0].first_observed, at(22));
  EXPECT_FALSE(e.evaluate(low, at(51)).eviction);  // 29s since the restart
  EXPECT_TRUE(e.evaluate(low, at(52)).eviction);
}

TEST(EngineSoft, ZeroGracePeriodActsAtOnce) {
  Engine e(config({soft(Signal::MemoryAvailable, qty(kGi), Duration(0))}));
  Snap s;
  s.mem(500 * kMi).add(pod("a", QosClass::BestEffort, kMi));
  Decisions d = e.evaluate(s, at(0));
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->kind, ThresholdKind::Soft);
}

TEST(EngineSoft, GracePeriodOfTheEviction) {
  Pod p = pod("a", QosClass::BestEffort, kMi);
  p.termination_grace_period_seconds = 45;
  EvictionConfig c;
  EXPECT_EQ(eviction_grace_period(p, ThresholdKind::Hard, c), 0);
  EXPECT_EQ(eviction_grace_period(p, ThresholdKind::Soft, c), 45)
      << "min(0, 45) = 0, which the kubelet's pod worker reads as no override: the pod's own period";
  c.max_pod_grace_period_seconds = 10;
  EXPECT_EQ(eviction_grace_period(p, ThresholdKind::Soft, c), 10);
  c.max_pod_grace_period_seconds = 60;
  EXPECT_EQ(eviction_grace_period(p, ThresholdKind::Soft, c), 45);
  p.termination_grace_period_seconds = -5;
  EXPECT_EQ(eviction_grace_period(p, ThresholdKind::Soft, c), 1) << "never below 1 s, as the pod worker";
}

// The kubelet's soft-eviction grace (1.32+): min(evictionMaxPodGracePeriod,
// terminationGracePeriodSeconds) in the eviction manager, then the pod
// worker's calculateEffectiveGracePeriod (0: the pod's own, below 1: 1).
TEST(EngineSoft, GracePeriodFollowsTheKubelet) {
  Pod p = pod("a", QosClass::BestEffort, kMi);
  EvictionConfig c;
  c.soft_grace_ceiling_seconds = 0;
  struct Case {
    int64_t max, own, want;
  };
  for (const Case& k : {Case{0, 30, 30}, Case{0, 0, 1}, Case{-1, 30, 1}, Case{-2147483648LL, 30, 1}, Case{20, 30, 20},
                        Case{60, 30, 30}, Case{20, 0, 1}, Case{1, 30, 1}}) {
    c.max_pod_grace_period_seconds = k.max;
    p.termination_grace_period_seconds = k.own;
    EXPECT_EQ(eviction_grace_period(p, ThresholdKind::Soft, c), k.want) << "max " << k.max << " own " << k.own;
    EXPECT_EQ(eviction_grace_period(p, ThresholdKind::Hard, c), 0);
  }
}

// pressured's own ceiling (softEvictionGraceCeilingSeconds, default 1 h): a
// pod asking for INT64_MAX seconds neither overflows nor holds its lane for
// ever; 0 turns the ceiling off and keeps the kubelet's value.
TEST(EngineSoft, GraceCeilingBoundsWhatAPodAsksFor) {
  Pod p = pod("a", QosClass::BestEffort, kMi);
  p.termination_grace_period_seconds = INT64_MAX;
  EvictionConfig c;
  EXPECT_EQ(c.soft_grace_ceiling_seconds, 3600);
  EXPECT_EQ(eviction_grace_period(p, ThresholdKind::Soft, c), 3600);
  c.max_pod_grace_period_seconds = 120;
  EXPECT_EQ(eviction_grace_period(p, ThresholdKind::Soft, c), 120) << "the kubelet's cap applies first";
  c.max_pod_grace_period_seconds = 0;
  c.soft_grace_ceiling_seconds = 0;
  EXPECT_EQ(eviction_grace_period(p, ThresholdKind::Soft, c), INT64_MAX);
  EXPECT_EQ(grace_duration(INT64_MAX), std::chrono::seconds(kMaxGraceSeconds)) << "saturates, no overflow";
  EXPECT_EQ(grace_duration(-3), Duration::zero());
  EXPECT_EQ(grace_duration(90), std::chrono::seconds(90));
}

TEST(EngineSoft, GracePeriodOfTheEvictionThroughEvaluate) {
  EvictionConfig ec = config({soft(Signal::MemoryAvailable, qty(kGi), Duration(0))});
  ec.max_pod_grace_period_seconds = 10;
  Engine e(ec);
  Snap s;
  Pod slow = pod("slow", QosClass::BestEffort, kMi);
  slow.termination_grace_period_seconds = 600;
  s.mem(kMi).add(slow);
  EXPECT_EQ(e.evaluate(s, at(0)).eviction->grace_period_seconds, 10);
}

TEST(EngineSoft, HardWinsOverSoftForTheSameSignal) {
  Engine e(config({soft(Signal::MemoryAvailable, qty(2 * kGi), Duration(0)), hard(Signal::MemoryAvailable, qty(kGi))}));
  Snap s;
  s.mem(kMi).add(pod("a", QosClass::BestEffort, kMi));
  Decisions d = e.evaluate(s, at(0));
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->kind, ThresholdKind::Hard);
  EXPECT_EQ(d.eviction->grace_period_seconds, 0);
}

// --- Minimum reclaim ----------------------------------------------------------

TEST(EngineMinReclaim, StaysMetUntilThresholdPlusMinimumReclaim) {
  Engine e(config({hard(Signal::MemoryAvailable, qty(100 * kMi), qty(50 * kMi))}));
  Snap s;
  s.add(pod("a", QosClass::BestEffort, kMi)).add(pod("b", QosClass::BestEffort, kMi)).add(pod("c", QosClass::BestEffort, kMi));
  // Not met before: 120Mi is above the threshold, min reclaim does not apply.
  s.mem(120 * kMi);
  EXPECT_FALSE(e.evaluate(s, at(0)).thresholds[0].met);
  s.mem(50 * kMi);
  EXPECT_TRUE(e.evaluate(s, at(1)).eviction);
  s.mem(120 * kMi);  // recovered past the threshold but not past threshold + min reclaim
  Decisions d = e.evaluate(s, at(2));
  EXPECT_TRUE(d.thresholds[0].met);
  EXPECT_TRUE(d.eviction) << "keeps reclaiming";
  s.mem(150 * kMi);  // exactly threshold + min reclaim: recovered
  d = e.evaluate(s, at(3));
  EXPECT_FALSE(d.thresholds[0].met);
  EXPECT_FALSE(d.eviction);
  s.mem(120 * kMi);  // once recovered, back to the plain threshold
  EXPECT_FALSE(e.evaluate(s, at(4)).thresholds[0].met);
}

TEST(EngineMinReclaim, PercentMinimumReclaim) {
  Engine e(config({hard(Signal::NodefsAvailable, pct(10), pct(5))}));
  Snap s;
  s.sig(Signal::NodefsAvailable, 5 * kGi, 100 * kGi);
  EXPECT_TRUE(e.evaluate(s, at(0)).thresholds[0].met);
  s.sig(Signal::NodefsAvailable, 14 * kGi, 100 * kGi);
  EXPECT_TRUE(e.evaluate(s, at(1)).thresholds[0].met);  // < 15Gi
  s.sig(Signal::NodefsAvailable, 15 * kGi, 100 * kGi);
  EXPECT_FALSE(e.evaluate(s, at(2)).thresholds[0].met);
}

TEST(EngineMinReclaim, PsiHysteresisGoesDownwards) {
  Engine e(config({hard(Signal::MemoryPressureFullAvg10, qty(30), qty(10))}));
  Snap s;
  s.sig(Signal::MemoryPressureFullAvg10, 35);
  EXPECT_TRUE(e.evaluate(s, at(0)).thresholds[0].met);
  s.sig(Signal::MemoryPressureFullAvg10, 25);
  EXPECT_TRUE(e.evaluate(s, at(1)).thresholds[0].met);  // > 30 - 10
  s.sig(Signal::MemoryPressureFullAvg10, 20);
  EXPECT_FALSE(e.evaluate(s, at(2)).thresholds[0].met);
}

TEST(EngineMinReclaim, KeepsASoftGracePeriodRunning) {
  // Hysteresis counts as "met", so a soft threshold hovering just above its
  // value (but below value + min reclaim) does not restart its grace period.
  Engine e(config({soft(Signal::MemoryAvailable, qty(kGi), seconds(10), qty(256 * kMi))}));
  Snap s;
  s.add(pod("a", QosClass::BestEffort, kMi));
  s.mem(kGi - 1);
  e.evaluate(s, at(0));
  s.mem(kGi + 100 * kMi);
  EXPECT_FALSE(e.evaluate(s, at(5)).eviction);
  Decisions d = e.evaluate(s, at(10));
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(*d.thresholds[0].first_observed, at(0));
}

// --- Conditions ---------------------------------------------------------------

TEST(EngineCondition, StaysTrueForTheTransitionPeriod) {
  Engine e(config({hard(Signal::MemoryAvailable, qty(kGi))}, seconds(60)));
  Snap low, high;
  low.mem(kMi);
  high.mem(4 * kGi);
  Decisions d = e.evaluate(low, at(0));
  ASSERT_EQ(d.changes.size(), 1u);
  EXPECT_EQ(d.changes[0].condition, kMem);
  EXPECT_TRUE(d.changes[0].status);
  EXPECT_TRUE(d.no_candidates.size() == 1u) << "no pods at all";
  d = e.evaluate(high, at(10));
  EXPECT_TRUE(cond(d, kMem));
  EXPECT_TRUE(d.changes.empty());
  d = e.evaluate(high, at(59.9));
  EXPECT_TRUE(cond(d, kMem)) << "last met at 0, period 60s";
  d = e.evaluate(high, at(60));
  EXPECT_FALSE(cond(d, kMem));
  ASSERT_EQ(d.changes.size(), 1u);
  EXPECT_FALSE(d.changes[0].status);
  EXPECT_TRUE(e.evaluate(high, at(61)).changes.empty());
}

TEST(EngineCondition, OscillationDoesNotFlapTheCondition) {
  Engine e(config({soft(Signal::MemoryAvailable, qty(kGi), seconds(120))}, seconds(30)));
  Snap low, high;
  low.mem(900 * kMi);
  high.mem(1100 * kMi);
  int changes = 0;
  for (int t = 0; t < 200; t += 5) {
    Decisions d = e.evaluate((t / 5) % 2 ? high : low, at(t));
    changes += static_cast<int>(d.changes.size());
    EXPECT_TRUE(cond(d, kMem)) << "t=" << t;
    EXPECT_FALSE(d.eviction) << "the grace period restarts on every recovery";
  }
  EXPECT_EQ(changes, 1);
  // Stays true until 30s after the last met observation (t=190).
  EXPECT_TRUE(cond(e.evaluate(high, at(219)), kMem));
  EXPECT_FALSE(cond(e.evaluate(high, at(220)), kMem));
}

TEST(EngineCondition, ZeroTransitionPeriodFollowsTheThresholds) {
  Engine e(config({hard(Signal::MemoryAvailable, qty(kGi))}));
  Snap low, high;
  low.mem(kMi);
  high.mem(4 * kGi);
  EXPECT_TRUE(cond(e.evaluate(low, at(0)), kMem));
  EXPECT_FALSE(cond(e.evaluate(high, at(0)), kMem));
}

TEST(EngineCondition, EachSignalMapsToItsCondition) {
  Engine e(config({hard(Signal::AllocatableMemoryAvailable, qty(kGi)), hard(Signal::ImagefsInodesFree, qty(1000)),
                   hard(Signal::PidAvailable, qty(100))}));
  Snap s;
  s.sig(Signal::AllocatableMemoryAvailable, 5 * kGi).sig(Signal::ImagefsInodesFree, 10).sig(Signal::PidAvailable, 1000);
  Decisions d = e.evaluate(s, at(0));
  EXPECT_FALSE(cond(d, kMem));
  EXPECT_TRUE(cond(d, Condition::DiskPressure));
  EXPECT_FALSE(cond(d, Condition::PIDPressure));
  s.sig(Signal::AllocatableMemoryAvailable, kMi).sig(Signal::PidAvailable, 99);
  d = e.evaluate(s, at(1));
  EXPECT_TRUE(cond(d, kMem));
  EXPECT_TRUE(cond(d, Condition::PIDPressure));
  EXPECT_EQ(d.changes.size(), 2u);
}

// --- Evictions ----------------------------------------------------------------

TEST(EngineEviction, CommitsNothingAndLeavesExcludedPodsOut) {
  Engine e(config({hard(Signal::MemoryAvailable, qty(kGi))}));
  Snap s;
  s.mem(kMi)
      .add(pod("a", QosClass::BestEffort, 300 * kMi))
      .add(pod("b", QosClass::BestEffort, 200 * kMi))
      .add(pod("c", QosClass::BestEffort, 100 * kMi));
  EXPECT_EQ(victim(e.evaluate(s, at(0))), "a");
  EXPECT_EQ(victim(e.evaluate(s, at(0))), "a") << "the engine remembers no victim: the policy does";
  EXPECT_EQ(victim(e.evaluate(s, at(0), {"a"})), "b");
  EXPECT_EQ(victim(e.evaluate(s, at(1), {"a", "b"})), "c");
  Decisions d = e.evaluate(s, at(2), {"a", "b", "c"});
  EXPECT_FALSE(d.eviction);
  EXPECT_TRUE(d.candidates.empty());
  EXPECT_EQ(d.no_candidates, std::vector<Signal>{Signal::MemoryAvailable});
}

TEST(EngineEviction, OneCandidatePerLaneMostUrgentFirst) {
  Engine e(config({hard(Signal::NodefsAvailable, qty(kGi)), hard(Signal::PidAvailable, qty(10)),
                   soft(Signal::MemoryAvailable, qty(kGi), Duration(0)), hard(Signal::MemoryAvailable, qty(kMi))}));
  Pod disk = pod("disk", QosClass::BestEffort, 1);
  disk.usage.ephemeral_storage_bytes = 50 * kGi;
  Pod mem = pod("mem", QosClass::BestEffort, 8 * kGi);
  Pod pids = pod("pids", QosClass::BestEffort, 2);
  pids.usage.pids = 5000;
  Snap s;
  s.mem(kMi / 2).sig(Signal::NodefsAvailable, kMi, 100 * kGi).sig(Signal::PidAvailable, 5, 32768).add(disk).add(mem).add(pids);
  Decisions d = e.evaluate(s, at(0));
  ASSERT_EQ(d.candidates.size(), 3u);
  EXPECT_EQ(d.candidates[0].uid, "mem");
  EXPECT_EQ(d.candidates[0].kind, ThresholdKind::Hard) << "memory's hard threshold outranks its soft one";
  EXPECT_EQ(d.candidates[1].uid, "disk");
  EXPECT_EQ(d.candidates[1].signal, Signal::NodefsAvailable);
  EXPECT_EQ(d.candidates[2].uid, "pids");
  EXPECT_EQ(d.candidates[2].signal, Signal::PidAvailable);
  EXPECT_EQ(d.eviction, d.candidates[0]);
}

TEST(EngineEviction, MemoryIsReclaimedBeforeDisk) {
  Engine e(config({hard(Signal::NodefsAvailable, qty(kGi)), hard(Signal::PidAvailable, qty(10)),
                   soft(Signal::MemoryAvailable, qty(kGi), Duration(0))}));
  Pod disk = pod("disk", QosClass::BestEffort, 1);
  disk.usage.ephemeral_storage_bytes = 50 * kGi;
  Pod mem = pod("mem", QosClass::BestEffort, 8 * kGi);
  Snap s;
  s.mem(kMi).sig(Signal::NodefsAvailable, kMi).sig(Signal::PidAvailable, 1).add(disk).add(mem);
  Decisions d = e.evaluate(s, at(0));
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->signal, Signal::MemoryAvailable);
  EXPECT_EQ(d.eviction->uid, "mem");
  d = e.evaluate(s, at(1), {"mem"});  // mem is being evicted (the policy says so)
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->signal, Signal::MemoryAvailable) << "still memory; the last resort is the disk pod";
  EXPECT_EQ(d.eviction->uid, "disk");
}

TEST(EngineEviction, NoCandidatesIsReportedPerSignalAndTheNextSignalIsTried) {
  Engine e(config({hard(Signal::MemoryAvailable, qty(kGi)), hard(Signal::NodefsAvailable, qty(kGi))}));
  Pod crit = pod("crit", QosClass::Guaranteed, 8 * kGi, 8 * kGi);
  crit.critical = true;
  Snap s;
  s.mem(kMi).sig(Signal::NodefsAvailable, kMi).add(crit);
  Decisions d = e.evaluate(s, at(0));
  EXPECT_FALSE(d.eviction);
  EXPECT_EQ(d.no_candidates, (std::vector<Signal>{Signal::MemoryAvailable, Signal::NodefsAvailable}));
}

TEST(EngineEviction, CriticalStaticAndHighPriorityPodsAreNeverEvicted) {
  Engine e(config({hard(Signal::MemoryAvailable, qty(kGi))}));
  Pod crit = pod("crit", QosClass::BestEffort, 8 * kGi);
  crit.critical = true;
  Pod stat = pod("static", QosClass::BestEffort, 8 * kGi);
  stat.static_pod = true;
  Pod prio = pod("prio", QosClass::BestEffort, 8 * kGi, 0, kCriticalPodPriority);
  Pod almost = pod("almost", QosClass::Guaranteed, 1, 1, kCriticalPodPriority - 1);
  Snap s;
  s.mem(kMi).add(crit).add(stat).add(prio).add(almost);
  EXPECT_EQ(victim(e.evaluate(s, at(0))), "almost");
  Decisions d = e.evaluate(s, at(1), {"almost"});
  EXPECT_FALSE(d.eviction);
  EXPECT_EQ(d.no_candidates.size(), 1u);
}

// --- Ranking ------------------------------------------------------------------

std::vector<std::string> order(const std::vector<Pod>& pods, StarvedResource r, const EvictionConfig& c = {},
                               const std::vector<std::string>& terminating = {}) {
  std::vector<std::string> out;
  for (const Pod* p : rank_pods(pods, r, c, terminating)) out.push_back(p->uid);
  return out;
}

TEST(EngineRanking, QosClassComesFirst) {
  std::vector<Pod> pods{pod("g", QosClass::Guaranteed, 8 * kGi, kGi), pod("b", QosClass::Burstable, 10 * kMi, kGi),
                        pod("be", QosClass::BestEffort, kMi)};
  EXPECT_EQ(order(pods, StarvedResource::Memory), (std::vector<std::string>{"be", "b", "g"}));
}

TEST(EngineRanking, WithinAClassOverRequestThenPriorityThenAmount) {
  std::vector<Pod> pods{
      pod("within-big", QosClass::Burstable, 900 * kMi, kGi, -10),   // within request, lowest priority
      pod("over-small", QosClass::Burstable, 600 * kMi, 500 * kMi),  // over by 100Mi, priority 0
      pod("over-big", QosClass::Burstable, 2 * kGi, kGi),            // over by 1Gi, priority 0
      pod("over-prio", QosClass::Burstable, 3 * kGi, kGi, 100),      // over by 2Gi but priority 100
      pod("over-low", QosClass::Burstable, 520 * kMi, 512 * kMi, -5),  // over by 8Mi, priority -5
      pod("within-small", QosClass::Burstable, 100 * kMi, kGi, -10),
  };
  EXPECT_EQ(order(pods, StarvedResource::Memory),
            (std::vector<std::string>{"over-low", "over-big", "over-small", "over-prio", "within-big", "within-small"}));
}

TEST(EngineRanking, UsageEqualToRequestIsWithinRequest) {
  std::vector<Pod> pods{pod("eq", QosClass::Burstable, kGi, kGi), pod("over", QosClass::Burstable, 101 * kMi, 100 * kMi)};
  EXPECT_EQ(order(pods, StarvedResource::Memory), (std::vector<std::string>{"over", "eq"}));
}

TEST(EngineRanking, TiesAreBrokenByUid) {
  std::vector<Pod> pods{pod("c", QosClass::BestEffort, kMi), pod("a", QosClass::BestEffort, kMi),
                        pod("b", QosClass::BestEffort, kMi)};
  EXPECT_EQ(order(pods, StarvedResource::Memory), (std::vector<std::string>{"a", "b", "c"}));
  Engine e(config({hard(Signal::MemoryAvailable, qty(kGi))}));
  Snap s;
  s.mem(kMi);
  for (auto& p : pods) s.add(p);
  EXPECT_EQ(victim(e.evaluate(s, at(0))), "a");
}

TEST(EngineRanking, DaemonSetPolicy) {
  Pod ds = pod("ds", QosClass::BestEffort, 4 * kGi);
  ds.daemonset = true;
  std::vector<Pod> pods{ds, pod("g", QosClass::Guaranteed, kGi, kGi), pod("zero", QosClass::BestEffort, 0)};
  EvictionConfig c;
  c.daemonset_pods = DaemonSetPolicy::EvictLast;
  EXPECT_EQ(order(pods, StarvedResource::Memory, c), (std::vector<std::string>{"g", "ds", "zero"}));
  c.daemonset_pods = DaemonSetPolicy::Normal;
  EXPECT_EQ(order(pods, StarvedResource::Memory, c), (std::vector<std::string>{"ds", "g", "zero"}));
  c.daemonset_pods = DaemonSetPolicy::Never;
  EXPECT_EQ(order(pods, StarvedResource::Memory, c), (std::vector<std::string>{"g", "zero"}));
}

TEST(EngineRanking, PodsNotUsingTheResourceAreTheLastResort) {
  std::vector<Pod> pods{pod("idle-be", QosClass::BestEffort, 0), pod("g", QosClass::Guaranteed, kMi, kGi)};
  EXPECT_EQ(order(pods, StarvedResource::Memory), (std::vector<std::string>{"g", "idle-be"}));
}

TEST(EngineRanking, DiskSignalsRankByEphemeralStorageAndInodes) {
  Pod a = pod("a", QosClass::Burstable, 8 * kGi, kGi);
  a.usage.ephemeral_storage_bytes = 1 * kGi;
  a.requests.ephemeral_storage_bytes = 2 * kGi;  // within its request
  a.usage.inodes = 10;
  Pod b = pod("b", QosClass::Burstable, kMi, kGi);
  b.usage.ephemeral_storage_bytes = 3 * kGi;
  b.requests.ephemeral_storage_bytes = 2 * kGi;  // over by 1Gi
  b.usage.inodes = 100000;
  Pod c = pod("c", QosClass::Burstable, kMi, kGi);
  c.usage.ephemeral_storage_bytes = 0;  // no disk use
  c.usage.inodes = 500;
  std::vector<Pod> pods{a, b, c};
  EXPECT_EQ(order(pods, StarvedResource::EphemeralStorage), (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(order(pods, StarvedResource::Inodes), (std::vector<std::string>{"b", "c", "a"}));
  EXPECT_EQ(order(pods, StarvedResource::Memory), (std::vector<std::string>{"a", "b", "c"}));

  Engine e(config({hard(Signal::ImagefsInodesFree, qty(100))}));
  Snap s;
  s.sig(Signal::ImagefsInodesFree, 5);
  for (auto& p : pods) s.add(p);
  Decisions d = e.evaluate(s, at(0));
  EXPECT_EQ(victim(d), "b");
  EXPECT_TRUE(cond(d, Condition::DiskPressure));
}

TEST(EngineRanking, PidSignalRanksByProcessCount) {
  Pod a = pod("a", QosClass::BestEffort, 8 * kGi);
  a.usage.pids = 3;
  Pod b = pod("b", QosClass::BestEffort, kMi);
  b.usage.pids = 3000;
  Engine e(config({hard(Signal::PidAvailable, pct(5))}));
  Snap s;
  s.sig(Signal::PidAvailable, 100, 32768).add(a).add(b);
  Decisions d = e.evaluate(s, at(0));
  EXPECT_EQ(victim(d), "b");
  EXPECT_TRUE(cond(d, Condition::PIDPressure));
}

TEST(EngineRanking, RankPodsLeavesOutTerminatingPods) {
  std::vector<Pod> pods{pod("a", QosClass::BestEffort, 3 * kMi), pod("b", QosClass::BestEffort, 2 * kMi)};
  EXPECT_EQ(order(pods, StarvedResource::Memory, {}, {"a"}), std::vector<std::string>{"b"});
}

// The engine picks its victim by partial selection; it must always be the
// head of rank_pods' full order.
TEST(EngineRanking, SelectionAgreesWithTheFullRanking) {
  std::mt19937 rng(42);
  for (int round = 0; round < 200; ++round) {
    std::vector<Pod> pods;
    int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      Pod p = pod(fmt::format("u{}", rng() % 50), static_cast<QosClass>(rng() % 3), double(rng() % 4) * kMi,
                  double(rng() % 4) * kMi, static_cast<int32_t>(rng() % 3) - 1);
      p.daemonset = rng() % 5 == 0;
      p.critical = rng() % 10 == 0;
      pods.push_back(p);
    }
    EvictionConfig c = config({hard(Signal::MemoryAvailable, qty(kGi))});
    c.daemonset_pods = static_cast<DaemonSetPolicy>(rng() % 3);
    Engine e(c);
    NodeSnapshot s;
    s.signal(Signal::MemoryAvailable) = SignalObservation{kMi, 16 * kGi, {}, false};
    s.pods = pods;
    std::vector<std::string> terminating;
    for (int k = 0; k < 3; ++k) {
      auto ranked = rank_pods(pods, StarvedResource::Memory, c, terminating);
      Decisions d = e.evaluate(s, at(k), terminating);
      if (ranked.empty()) {
        EXPECT_FALSE(d.eviction);
        break;
      }
      ASSERT_TRUE(d.eviction) << "round " << round;
      EXPECT_EQ(d.eviction->uid, ranked.front()->uid) << "round " << round;
      // The runner-up is the second of the full order, with its keys.
      EXPECT_EQ(d.eviction->keys, rank_keys(*ranked.front(), StarvedResource::Memory, c)) << "round " << round;
      if (ranked.size() < 2) {
        EXPECT_FALSE(d.eviction->runner_up) << "round " << round;
      } else {
        ASSERT_TRUE(d.eviction->runner_up) << "round " << round;
        EXPECT_EQ(d.eviction->runner_up->uid, ranked[1]->uid) << "round " << round;
        EXPECT_EQ(d.eviction->runner_up->keys, rank_keys(*ranked[1], StarvedResource::Memory, c)) << "round " << round;
      }
      terminating.push_back(d.eviction->uid);
    }
  }
}

// --- Why this pod ----------------------------------------------------------------

TEST(EngineWhy, RecordsTheKeysOfTheVictimAndTheRunnerUp) {
  Engine e(config({hard(Signal::MemoryAvailable, qty(kGi))}));
  Snap s;
  s.mem(kMi)
      .add(pod("g", QosClass::Guaranteed, 3 * kGi, 3 * kGi))
      .add(pod("b", QosClass::Burstable, 2 * kGi, kGi, 7))
      .add(pod("be", QosClass::BestEffort, 100 * kMi, 0, 5));
  Decisions d = e.evaluate(s, at(0));
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->uid, "be");
  const RankKeys& v = d.eviction->keys;
  EXPECT_EQ(v.qos, QosClass::BestEffort);
  EXPECT_TRUE(v.over_request);  // no request: any usage is over it
  EXPECT_EQ(v.priority, 5);
  EXPECT_EQ(v.usage, static_cast<uint64_t>(100 * kMi));
  EXPECT_EQ(v.request, 0u);
  EXPECT_EQ(v.amount(), static_cast<uint64_t>(100 * kMi));
  ASSERT_TRUE(d.eviction->runner_up);
  const RunnerUp& r = *d.eviction->runner_up;
  EXPECT_EQ(r.uid, "b");
  EXPECT_EQ(r.name, "pod-b");
  EXPECT_EQ(r.namespace_, "default");
  EXPECT_EQ(r.keys.qos, QosClass::Burstable);
  EXPECT_TRUE(r.keys.over_request);
  EXPECT_EQ(r.keys.priority, 7);
  EXPECT_EQ(r.keys.amount(), static_cast<uint64_t>(kGi));  // usage above the request
  EXPECT_EQ(deciding_key(v, r.keys), RankKey::Qos);
  EXPECT_EQ(explain_choice(*d.eviction),
            "victim qos=BestEffort over-request priority=5 usage=100Mi request=0; runner-up default/pod-b "
            "qos=Burstable over-request priority=7 usage=2.0Gi request=1.0Gi; chosen by qos: BestEffort before "
            "Burstable");
}

TEST(EngineWhy, ExcludedPodsAreNotTheRunnerUpAndALonePodHasNone) {
  Engine e(config({hard(Signal::MemoryAvailable, qty(kGi))}));
  Snap s;
  s.mem(kMi).add(pod("a", QosClass::BestEffort, 3 * kMi)).add(pod("b", QosClass::BestEffort, 2 * kMi));
  Decisions d = e.evaluate(s, at(0), {"b"});
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->uid, "a");
  EXPECT_FALSE(d.eviction->runner_up);
  EXPECT_NE(explain_choice(*d.eviction).find("no runner-up"), std::string::npos);
  d = e.evaluate(s, at(1), {"a"});
  EXPECT_EQ(victim(d), "b");
  EXPECT_FALSE(d.eviction->runner_up);
}

TEST(EngineWhy, TheDecidingKeyIsTheFirstThatDiffers) {
  RankKeys a;
  a.qos = QosClass::Burstable;
  a.over_request = true;
  a.usage = 300;
  a.request = 100;
  RankKeys b = a;
  EXPECT_EQ(deciding_key(a, b), RankKey::Uid);
  b.usage = 250;
  EXPECT_EQ(deciding_key(a, b), RankKey::Amount);
  b.priority = 10;
  EXPECT_EQ(deciding_key(a, b), RankKey::Priority);
  b.over_request = false;
  b.usage = 50;
  EXPECT_EQ(deciding_key(a, b), RankKey::OverRequest);
  b.qos = QosClass::Guaranteed;
  EXPECT_EQ(deciding_key(a, b), RankKey::Qos);
  b.daemonset_last = true;
  EXPECT_EQ(deciding_key(a, b), RankKey::DaemonSet);
  b.zero_usage = true;
  EXPECT_EQ(deciding_key(a, b), RankKey::ZeroUsage);
  for (auto k : {RankKey::ZeroUsage, RankKey::DaemonSet, RankKey::Qos, RankKey::OverRequest, RankKey::Priority,
                 RankKey::Amount, RankKey::Uid, RankKey::NoStats}) {
    EXPECT_EQ(parse_rank_key(name(k)), k);
  }
  EXPECT_FALSE(parse_rank_key("size"));
}

TEST(EngineWhy, ExplanationNamesEachDecidingKeyInWords) {
  auto why = [](Pod victim_pod, Pod runner, Signal sig = Signal::MemoryAvailable) {
    EvictionConfig c;
    c.daemonset_pods = DaemonSetPolicy::EvictLast;
    const StarvedResource r = info(sig).resource;
    Eviction e;
    e.signal = sig;
    e.keys = rank_keys(victim_pod, r, c);
    e.runner_up = RunnerUp{runner.uid, runner.name, runner.namespace_, rank_keys(runner, r, c)};
    std::string s = explain_choice(e);
    return s.substr(s.find("chosen by"));
  };
  EXPECT_EQ(why(pod("a", QosClass::Burstable, 2 * kGi, kGi), pod("b", QosClass::Burstable, 900 * kMi, kGi)),
            "chosen by overRequest: over its request before a pod within its request");
  EXPECT_EQ(why(pod("a", QosClass::Burstable, 2 * kGi, kGi, -1), pod("b", QosClass::Burstable, 3 * kGi, kGi, 4)),
            "chosen by priority: priority -1 below 4");
  EXPECT_EQ(why(pod("a", QosClass::Burstable, 3 * kGi, kGi), pod("b", QosClass::Burstable, 2 * kGi, kGi)),
            "chosen by amount: exceeds its request by 2.0Gi, the runner-up by 1.0Gi");
  EXPECT_EQ(why(pod("a", QosClass::Burstable, 900 * kMi, kGi), pod("b", QosClass::Burstable, 800 * kMi, kGi)),
            "chosen by amount: uses 900Mi, the runner-up 800Mi");
  EXPECT_EQ(why(pod("a", QosClass::BestEffort, kMi), pod("b", QosClass::BestEffort, kMi)),
            "chosen by uid: every key equal, the smaller uid goes first");
  EXPECT_EQ(why(pod("a", QosClass::Guaranteed, kMi, kGi), pod("b", QosClass::BestEffort, 0)),
            "chosen by zeroUsage: the runner-up uses no memory");
  Pod ds = pod("ds", QosClass::BestEffort, kGi);
  ds.daemonset = true;
  EXPECT_EQ(why(pod("a", QosClass::Guaranteed, kMi, kGi), ds), "chosen by daemonset: the runner-up is a DaemonSet pod, evicted last");
  Pod pa = pod("a", QosClass::BestEffort, 0);
  pa.usage.pids = 300;
  Pod pb = pod("b", QosClass::BestEffort, 0);
  pb.usage.pids = 20;
  EXPECT_EQ(why(pa, pb, Signal::PidAvailable), "chosen by amount: uses 300, the runner-up 20");
  Pod nometa = pod("b", QosClass::Burstable, kMi, kGi);
  nometa.name.clear();
  nometa.namespace_.clear();
  Eviction e;
  e.keys = rank_keys(pod("a", QosClass::BestEffort, kMi), StarvedResource::Memory, EvictionConfig{});
  e.runner_up = RunnerUp{"uid-b", "", "", rank_keys(nometa, StarvedResource::Memory, EvictionConfig{})};
  EXPECT_NE(explain_choice(e).find("runner-up <uid-b> qos=Burstable within-request"), std::string::npos);
}

// --- State ----------------------------------------------------------------------

TEST(EngineState, RestoreKeepsGracePeriodsAndConditions) {
  EvictionConfig c = config({soft(Signal::MemoryAvailable, qty(kGi), seconds(30)), hard(Signal::NodefsAvailable, qty(kGi))},
                            seconds(60));
  Engine first(c);
  Snap s;
  s.mem(kMi).sig(Signal::NodefsAvailable, kMi).add(pod("a", QosClass::BestEffort, kMi)).add(pod("b", QosClass::BestEffort, 2 * kMi));
  s.s.pods[0].usage.ephemeral_storage_bytes = 5;
  Decisions d = first.evaluate(s, at(0));
  EXPECT_EQ(victim(d), "a");  // nodefs hard, the only pod using disk

  Engine second(c);
  EXPECT_EQ(second.restore(first.state()), 0u);
  // Which pods are terminating is the policy's: it passes them in.
  d = second.evaluate(s, at(29), {"a"});
  EXPECT_TRUE(d.changes.empty()) << "conditions were restored, nothing flips";
  EXPECT_EQ(victim(d), "b") << "nodefs hard again; a is terminating";
  d = second.evaluate(s, at(30), {"a", "b"});
  // The soft memory threshold (index 0) is due: its grace period started at 0
  // in the first engine. Both pods are terminating now, so nothing is left.
  EXPECT_EQ(*d.thresholds[0].first_observed, at(0)) << "the soft grace period was not reset by the restart";
  EXPECT_TRUE(d.thresholds[0].grace_elapsed);
  EXPECT_FALSE(d.eviction);
  EXPECT_EQ(d.no_candidates, (std::vector<Signal>{Signal::MemoryAvailable, Signal::NodefsAvailable}));
}

TEST(EngineState, RestoreMatchesThresholdsBySignalAndKindNotPosition) {
  // Saved with a hard memory threshold met (first in the list); restored
  // under a configuration whose first threshold is nodefs with a minimum
  // reclaim: nodefs must not inherit memory's "met" (hysteresis would make
  // it met with the signal above its threshold).
  Engine first(config({hard(Signal::MemoryAvailable, qty(kGi))}));
  Snap s;
  s.mem(kMi).sig(Signal::NodefsAvailable, 12 * kGi, 100 * kGi).add(pod("a", QosClass::BestEffort, kMi));
  s.s.pods[0].usage.ephemeral_storage_bytes = 5 * static_cast<uint64_t>(kGi);
  ASSERT_TRUE(first.evaluate(s, at(0)).thresholds[0].met);
  Engine second(config({hard(Signal::NodefsAvailable, qty(10 * kGi), qty(5 * kGi)), hard(Signal::MemoryAvailable, qty(2 * kMi))}));
  EXPECT_EQ(second.restore(first.state()), 0u) << "memory.available/hard is still configured";
  Decisions d = second.evaluate(s, at(1));
  EXPECT_FALSE(d.thresholds[0].met) << "12Gi available is above the 10Gi nodefs threshold";
  for (const auto& c : d.candidates) EXPECT_NE(c.signal, Signal::NodefsAvailable);
  EXPECT_EQ(*d.thresholds[1].first_observed, at(0)) << "memory.available/hard kept its state";

  Engine third(config({hard(Signal::NodefsAvailable, qty(10 * kGi), qty(5 * kGi))}));
  EXPECT_EQ(third.restore(first.state()), 2u) << "first observed and met of memory.available/hard dropped";
  EXPECT_TRUE(third.state().threshold_met.empty());
}

TEST(EngineState, ReconfigureKeepsStateOfThresholdsThatStillExist) {
  Engine e(config({hard(Signal::NodefsAvailable, qty(kGi)), soft(Signal::MemoryAvailable, qty(kGi), seconds(30))}));
  Snap s;
  s.mem(kMi).add(pod("a", QosClass::BestEffort, kMi));
  e.evaluate(s, at(0));
  // New config: different order, different value and grace for the soft threshold.
  e.reconfigure(config({soft(Signal::MemoryAvailable, qty(2 * kGi), seconds(20))}));
  Decisions d = e.evaluate(s, at(19));
  ASSERT_EQ(d.thresholds.size(), 1u);
  EXPECT_EQ(*d.thresholds[0].first_observed, at(0));
  EXPECT_FALSE(d.thresholds[0].grace_elapsed) << "19s of the new 20s grace period";
  EXPECT_FALSE(d.eviction);
  d = e.evaluate(s, at(20));
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->kind, ThresholdKind::Soft);
}

// evictionMessage's ephemeral-storage usage of a container: its rootfs (the
// writable layer, by runtime id) plus its logs (by name), only with both;
// a container not started (no id) has nothing of its own.
TEST(EngineContainers, StorageUsageIsTheWritableLayerPlusTheLogs) {
  Pod p = pod("u", QosClass::Burstable, 0);
  p.containers = {ContainerSpec{"app", "id-app", false, 0, 1000}, ContainerSpec{"side", "id-side", false, 0, 0},
                  ContainerSpec{"late", "", false, 0, 0}};
  EphemeralStorageBreakdown b;
  b.container_layers = {{"id-app", 3000, 3}, {"id-side", 10, 1}};
  b.container_logs = {{"app", 500, 1}};
  p.ephemeral_storage = b;
  EXPECT_EQ(container_usage(p, StarvedResource::EphemeralStorage),
            (std::vector<ContainerUsage>{{"app", 3500, 1000}})) << "side has no logs measured: not counted";
  EXPECT_TRUE(container_usage(p, StarvedResource::Memory).empty()) << "memory needs the cgroup readings";
  EXPECT_TRUE(container_usage(p, StarvedResource::Pids).empty());
}

}  // namespace
}  // namespace pressured
