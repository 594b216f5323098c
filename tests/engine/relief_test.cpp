// The relief decisions (pure): when reclaim is asked for, how much from which
// cgroup, which memory candidates wait for it and for how long, what a run
// achieved, and that a cgroup giving back little is not asked again.
#include <gtest/gtest.h>

#include "engine/engine_helpers.hpp"
#include "pressured/relief.hpp"

namespace pressured {
namespace {

using namespace pressured::testing;
using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1 << 20;

Pod cache_pod(std::string uid, QosClass qos, uint64_t ws, uint64_t active, uint64_t inactive) {
  Pod p = pod(uid, qos, static_cast<double>(ws));
  p.cgroup_path = "/sys/fs/cgroup/kubepods/pod" + uid;
  p.usage.memory_active_file_bytes = active;
  p.usage.memory_inactive_file_bytes = inactive;
  return p;
}

ReliefConfig relief_config() {
  ReliefConfig c;
  c.hard_threshold_budget = 250ms;
  c.backoff = 5min;
  c.timeout = 5s;
  c.low_yield_percent = 25;
  return c;
}

// One evaluation: the engine on `snap` at `t`, then the stage.
struct Harness {
  EvictionConfig eviction;
  Engine engine;
  ReliefStage stage;
  Decisions d;
  explicit Harness(EvictionConfig e, ReliefConfig rc = relief_config(), bool dry = false)
      : eviction(e), engine(e), stage(rc, dry) {
    stage.set_available(true);
  }
  ReliefStep step(double t, const NodeSnapshot& snap, std::optional<ReliefOutcome> outcome = std::nullopt,
                  bool busy = false) {
    d = engine.evaluate(snap, at(t));
    return stage.step(at(t), snap, d, eviction, {}, busy, outcome);
  }
};

ReliefOutcome gave_back(const ReliefRequest& r, double share, std::string error = "") {
  ReliefOutcome o;
  o.id = r.id;
  o.took = 30ms;
  for (const auto& t : r.targets) {
    o.targets.push_back({t.uid, t.cgroup_path, t.bytes, static_cast<uint64_t>(static_cast<double>(t.bytes) * share),
                         error});
  }
  return o;
}

TEST(ReliefSplit, ProportionalToFilePagesInWholePagesCappedByEach) {
  std::vector<ReliefTarget> in{{"a", "/a", 0, 300 * kMiB}, {"b", "/b", 0, 100 * kMiB}, {"c", "/c", 0, 100}};
  auto out = split_reclaim(100 * kMiB, in);
  ASSERT_EQ(out.size(), 2u) << "a cgroup with less than a page of cache is not asked";
  EXPECT_EQ(out[0].uid, "a");
  EXPECT_EQ(out[0].bytes, 75 * kMiB);
  EXPECT_EQ(out[1].bytes, 25 * kMiB);
  // More than there is: each gives at most its own file pages.
  out = split_reclaim(1024 * kMiB, in);
  EXPECT_EQ(out[0].bytes, 300 * kMiB);
  EXPECT_EQ(out[1].bytes, 100 * kMiB);
  for (const auto& t : split_reclaim(12345, {{"x", "/x", 0, 10 * kMiB}})) EXPECT_EQ(t.bytes % 4096, 0u);
  EXPECT_TRUE(split_reclaim(0, in).empty());
}

TEST(ReliefStage, HardThresholdMetByActiveCacheAsksForShortfallPlusMinimumReclaimAndHoldsTheEviction) {
  Harness h(config({hard(Signal::MemoryAvailable, qty(500 * kMi), qty(100 * kMi))}));
  // 400Mi available: 100Mi short; the pods hold 600Mi of active cache.
  Snap s;
  s.mem(400 * kMi).add(cache_pod("a", QosClass::BestEffort, 700 * kMiB, 450 * kMiB, 50 * kMiB))
      .add(cache_pod("b", QosClass::Burstable, 300 * kMiB, 150 * kMiB, 50 * kMiB));
  auto st = h.step(10, s);
  ASSERT_TRUE(st.start) << "the shortfall is covered by active cache";
  EXPECT_EQ(st.start->shortfall_bytes, 100 * kMiB);
  EXPECT_NEAR(static_cast<double>(st.start->asked_bytes), 200.0 * kMiB, 8192) << "shortfall + minimum reclaim";
  ASSERT_EQ(st.start->targets.size(), 2u);
  EXPECT_EQ(st.start->targets[0].uid, "a");
  // 200Mi over 500Mi and 200Mi of file pages: 5:2, in whole pages.
  EXPECT_NEAR(static_cast<double>(st.start->targets[0].bytes), 200.0 * kMiB * 5 / 7, 4096);
  EXPECT_NEAR(static_cast<double>(st.start->targets[1].bytes), 200.0 * kMiB * 2 / 7, 4096);
  EXPECT_EQ(st.start->hold_until, at(10.25)) << "first met + hardThresholdBudget";
  EXPECT_LE(st.start->budget, 250ms);
  EXPECT_EQ(st.held.size(), 1u) << "the hard candidate waits for the run";
  EXPECT_TRUE(h.d.candidates.empty());
  EXPECT_FALSE(h.d.eviction);
  ASSERT_TRUE(st.deadline);
  EXPECT_EQ(*st.deadline, at(10.25));

  // The run came back with most of it: the re-read is above the threshold
  // plus minimum reclaim: nothing to evict, the record says so.
  Snap after;
  after.mem(650 * kMi).add(cache_pod("a", QosClass::BestEffort, 560 * kMiB, 310 * kMiB, 50 * kMiB));
  auto st2 = h.step(10.05, after, gave_back(*st.start, 0.9));
  ASSERT_TRUE(st2.finished);
  EXPECT_TRUE(st2.finished->eviction_avoided);
  EXPECT_EQ(st2.finished->outcome(), "avoided");
  EXPECT_EQ(st2.finished->asked_bytes, st.start->asked_bytes);
  EXPECT_FALSE(st2.start);
  EXPECT_TRUE(h.d.candidates.empty());
  EXPECT_TRUE(h.stage.backoff().empty()) << "cgroups that gave back most are not backing off";
}

TEST(ReliefStage, ASmallShortfallAsksForTheMinimumAskCappedByTheCache) {
  // No minimum reclaim (the kubelet's default): 1Mi short.
  Harness h(config({hard(Signal::MemoryAvailable, qty(500 * kMi))}));
  Snap s;
  s.mem(499 * kMi).add(cache_pod("a", QosClass::BestEffort, 300 * kMiB, 200 * kMiB, 10 * kMiB));
  auto st = h.step(10, s);
  ASSERT_TRUE(st.start);
  EXPECT_EQ(st.start->shortfall_bytes, 1 * kMiB);
  EXPECT_EQ(st.start->asked_bytes, 64 * kMiB) << "not one page-sized run per re-read";

  // A pod with less cache than the floor is asked for what it holds.
  Harness small(config({hard(Signal::MemoryAvailable, qty(500 * kMi))}));
  Snap t;
  t.mem(499 * kMi).add(cache_pod("a", QosClass::BestEffort, 100 * kMiB, 20 * kMiB, 4 * kMiB));
  st = small.step(10, t);
  ASSERT_TRUE(st.start);
  EXPECT_EQ(st.start->asked_bytes, 24 * kMiB);

  // minimumAsk 0: exactly the shortfall.
  ReliefConfig rc = relief_config();
  rc.minimum_ask_bytes = 0;
  Harness exact(config({hard(Signal::MemoryAvailable, qty(500 * kMi))}), rc);
  st = exact.step(10, s);
  ASSERT_TRUE(st.start);
  EXPECT_EQ(st.start->asked_bytes, 1 * kMiB);
}

TEST(ReliefStage, HardThresholdIsNeverHeldPastItsBudget) {
  Harness h(config({hard(Signal::MemoryAvailable, qty(500 * kMi))}));
  Snap s;
  s.mem(400 * kMi).add(cache_pod("a", QosClass::BestEffort, 900 * kMiB, 600 * kMiB, 0));
  auto st = h.step(10, s);
  ASSERT_TRUE(st.start);
  EXPECT_EQ(h.step(10.2, s).held.size(), 1u) << "within the budget, the run still on";
  // The worker has not answered by the end of the budget: the eviction goes ahead.
  auto late = h.step(10.25, s);
  EXPECT_TRUE(late.held.empty());
  ASSERT_EQ(h.d.candidates.size(), 1u);
  EXPECT_EQ(h.d.candidates[0].uid, "a");
  EXPECT_FALSE(late.start) << "one run at a time";
  // Its late answer is still recorded, as not having avoided the eviction.
  auto rec = h.step(10.4, s, gave_back(*st.start, 0.1));
  ASSERT_TRUE(rec.finished);
  EXPECT_FALSE(rec.finished->eviction_avoided);
  EXPECT_EQ(rec.finished->outcome(), "still_short");
  EXPECT_TRUE(h.stage.backoff().contains("/sys/fs/cgroup/kubepods/poda")) << "gave back 10% < 25%";
}

TEST(ReliefStage, AnonymousPressureIsNotCoveredAndEvictsAtOnce) {
  Harness h(config({hard(Signal::MemoryAvailable, qty(500 * kMi))}));
  Snap s;
  // 300Mi short, only 64Mi of active cache anywhere.
  s.mem(200 * kMi).add(cache_pod("grower", QosClass::BestEffort, 2000 * kMiB, 32 * kMiB, 200 * kMiB))
      .add(cache_pod("reader", QosClass::Burstable, 200 * kMiB, 32 * kMiB, 8 * kMiB));
  auto st = h.step(10, s);
  EXPECT_FALSE(st.start);
  EXPECT_TRUE(st.held.empty());
  ASSERT_TRUE(st.skipped);
  EXPECT_EQ(*st.skipped, ReliefSkip::NotCovered);
  ASSERT_EQ(h.d.candidates.size(), 1u);
  EXPECT_EQ(h.d.candidates[0].uid, "grower");
  EXPECT_FALSE(h.step(10.1, s).skipped) << "a skip is reported once per crossing";
}

TEST(ReliefStage, AfterAShortRunTheEvictionCarriesItsRecord) {
  Harness h(config({hard(Signal::MemoryAvailable, qty(500 * kMi))}));
  Snap s;
  s.mem(400 * kMi).add(cache_pod("a", QosClass::BestEffort, 900 * kMiB, 300 * kMiB, 0));
  auto st = h.step(10, s);
  ASSERT_TRUE(st.start);
  // Back quickly with little: the node is still short and a's cgroup backs
  // off, so nothing is left to ask: the candidate goes, with the record.
  auto st2 = h.step(10.05, s, gave_back(*st.start, 0.05));
  ASSERT_TRUE(st2.finished);
  EXPECT_FALSE(st2.finished->eviction_avoided);
  EXPECT_FALSE(st2.start) << "never in a loop: the cgroup that gave back little is not asked again";
  ASSERT_EQ(h.d.candidates.size(), 1u);
  ASSERT_TRUE(h.d.candidates[0].relief);
  EXPECT_EQ(h.d.candidates[0].relief->id, st.start->id);
  EXPECT_EQ(h.d.candidates[0].relief->asked_bytes, st.start->asked_bytes);
}

TEST(ReliefStage, ZeroHardBudgetDisablesReclaimOnHardThresholdsOnly) {
  ReliefConfig rc = relief_config();
  rc.hard_threshold_budget = 0s;
  Harness h(config({hard(Signal::MemoryAvailable, qty(500 * kMi)), soft(Signal::MemoryAvailable, qty(800 * kMi), 30s)}),
            rc);
  Snap soft_only;
  soft_only.mem(700 * kMi).add(cache_pod("a", QosClass::BestEffort, 900 * kMiB, 600 * kMiB, 0));
  auto st = h.step(10, soft_only);
  ASSERT_TRUE(st.start) << "a soft threshold reclaims during its grace period";
  EXPECT_EQ(st.start->kind, ThresholdKind::Soft);
  EXPECT_EQ(st.start->hold_until, at(40));
  EXPECT_LE(st.start->budget, 5s) << "relief.timeout";

  Harness hh(config({hard(Signal::MemoryAvailable, qty(500 * kMi))}), rc);
  Snap s;
  s.mem(400 * kMi).add(cache_pod("a", QosClass::BestEffort, 900 * kMiB, 600 * kMiB, 0));
  auto hs = hh.step(10, s);
  EXPECT_FALSE(hs.start);
  ASSERT_TRUE(hs.skipped);
  EXPECT_EQ(*hs.skipped, ReliefSkip::HardBudgetZero);
  EXPECT_EQ(hh.d.candidates.size(), 1u);
}

TEST(ReliefStage, SoftEvictionComesAtTheGraceEndNotLater) {
  Harness h(config({soft(Signal::MemoryAvailable, qty(800 * kMi), 30s)}));
  Snap s;
  s.mem(700 * kMi).add(cache_pod("a", QosClass::BestEffort, 900 * kMiB, 600 * kMiB, 0));
  auto st = h.step(10, s);
  ASSERT_TRUE(st.start);
  EXPECT_TRUE(h.d.candidates.empty()) << "within the grace: no candidate yet";
  // The run is still writing at the grace end: the soft eviction is not held.
  auto end = h.step(40, s);
  EXPECT_TRUE(end.held.empty());
  EXPECT_EQ(h.d.candidates.size(), 1u);
}

// A soft threshold's run holds its evictions until its grace end (90 s here):
// a hard threshold met while that run is still writing must not wait for
// it. Its candidate reaches the policy at most hardThresholdBudget after the
// hard threshold was first met, whatever the worker is doing.
TEST(ReliefStage, AHardThresholdMetDuringASoftRunWaitsOnlyItsOwnBudget) {
  Harness h(config({hard(Signal::MemoryAvailable, qty(500 * kMi)), soft(Signal::MemoryAvailable, qty(800 * kMi), 90s)}));
  Snap soft_only;
  soft_only.mem(700 * kMi).add(cache_pod("a", QosClass::BestEffort, 900 * kMiB, 600 * kMiB, 0));
  auto st = h.step(10, soft_only);
  ASSERT_TRUE(st.start) << "the soft crossing reclaims during its grace period";
  ASSERT_EQ(st.start->kind, ThresholdKind::Soft);
  EXPECT_EQ(st.start->hold_until, at(100));
  ASSERT_TRUE(h.stage.running());

  // 20 s later the tenant allocates: the hard threshold is met; the soft run
  // has not answered (a memory.reclaim write can block for long).
  Snap hard_met;
  hard_met.mem(450 * kMi).add(cache_pod("a", QosClass::BestEffort, 1150 * kMiB, 600 * kMiB, 0));
  auto first = h.step(30, hard_met);
  EXPECT_FALSE(first.start) << "one run at a time";
  EXPECT_EQ(first.held.size(), 1u) << "within the hard budget, the candidate may still wait";
  ASSERT_TRUE(first.deadline);
  EXPECT_EQ(*first.deadline, at(30.25)) << "the loop evaluates again at the end of the hard budget, not the soft grace";

  auto end = h.step(30.25, hard_met);
  EXPECT_TRUE(end.held.empty()) << "the hard budget is over: not held for the soft run";
  ASSERT_EQ(h.d.candidates.size(), 1u) << "the candidate reaches the policy";
  EXPECT_EQ(h.d.candidates[0].kind, ThresholdKind::Hard);
  ASSERT_TRUE(h.d.eviction);
  EXPECT_TRUE(h.stage.running()) << "the soft run is still writing meanwhile";
  EXPECT_FALSE(end.deadline);

  // With a zero hard budget, the hard candidate never waits for the soft run.
  ReliefConfig rc = relief_config();
  rc.hard_threshold_budget = 0s;
  Harness zero(config({hard(Signal::MemoryAvailable, qty(500 * kMi)), soft(Signal::MemoryAvailable, qty(800 * kMi), 90s)}),
               rc);
  ASSERT_TRUE(zero.step(10, soft_only).start);
  EXPECT_TRUE(zero.step(30, hard_met).held.empty());
  EXPECT_EQ(zero.d.candidates.size(), 1u);
}

TEST(ReliefStage, OnlyCandidatePodsAreAsked) {
  Harness h(config({hard(Signal::MemoryAvailable, qty(500 * kMi))}));
  Pod critical = cache_pod("crit", QosClass::Guaranteed, 900 * kMiB, 800 * kMiB, 0);
  critical.priority = kCriticalPodPriority;
  critical.critical = true;
  Pod stat = cache_pod("static", QosClass::Burstable, 900 * kMiB, 800 * kMiB, 0);
  stat.static_pod = true;
  Snap s;
  s.mem(400 * kMi).add(critical).add(stat).add(cache_pod("ok", QosClass::BestEffort, 300 * kMiB, 200 * kMiB, 0));
  auto st = h.step(10, s);
  ASSERT_TRUE(st.start);
  ASSERT_EQ(st.start->targets.size(), 1u);
  EXPECT_EQ(st.start->targets[0].uid, "ok");
}

TEST(ReliefStage, NoRunWhileAMemoryEvictionIsInFlightOrTheStageIsOff) {
  Snap s;
  s.mem(400 * kMi).add(cache_pod("a", QosClass::BestEffort, 900 * kMiB, 600 * kMiB, 0));
  Harness busy(config({hard(Signal::MemoryAvailable, qty(500 * kMi))}));
  EXPECT_FALSE(busy.step(10, s, std::nullopt, true).start);

  Harness v1(config({hard(Signal::MemoryAvailable, qty(500 * kMi))}));
  v1.stage.set_available(false);  // cgroup v1, or no memory.reclaim
  auto st = v1.step(10, s);
  EXPECT_FALSE(st.start);
  EXPECT_EQ(v1.d.candidates.size(), 1u);

  ReliefConfig off = relief_config();
  off.enabled = false;
  Harness disabled(config({hard(Signal::MemoryAvailable, qty(500 * kMi))}), off);
  EXPECT_FALSE(disabled.step(10, s).start);
}

TEST(ReliefStage, DryRunAsksNothingHoldsNothingAndLogsEachCgroupOncePerBackoff) {
  Harness h(config({hard(Signal::MemoryAvailable, qty(500 * kMi))}), relief_config(), true);
  Snap s;
  s.mem(400 * kMi).add(cache_pod("a", QosClass::BestEffort, 900 * kMiB, 600 * kMiB, 0));
  auto st = h.step(10, s);
  ASSERT_TRUE(st.start);
  EXPECT_TRUE(st.start->dry_run);
  EXPECT_TRUE(st.held.empty());
  EXPECT_FALSE(h.stage.running());
  EXPECT_EQ(h.d.candidates.size(), 1u);
  EXPECT_FALSE(h.step(10.1, s).start) << "the would-be targets back off";
}

TEST(ReliefStage, ARestoredBackoffOutlivesARestartUntilItsTimeAndNoLongerThanTheConfiguredBackoff) {
  Snap s;
  s.mem(400 * kMi).add(cache_pod("a", QosClass::BestEffort, 900 * kMiB, 300 * kMiB, 0));
  const std::string a = "/sys/fs/cgroup/kubepods/poda";
  // The first daemon: a's cgroup gave back little at 10 s and backs off until 310 s.
  Harness before(config({hard(Signal::MemoryAvailable, qty(500 * kMi))}));
  auto st = before.step(10, s);
  ASSERT_TRUE(st.start);
  before.step(10.05, s, gave_back(*st.start, 0.05));
  const ReliefState saved = before.stage.state();
  ASSERT_EQ(saved.backoff.size(), 1u);
  EXPECT_EQ(saved.backoff.at(a), at(10.05) + 5min);

  // The restarted daemon: not asked again while the back-off lasts, asked after.
  Harness after(config({hard(Signal::MemoryAvailable, qty(500 * kMi))}));
  EXPECT_EQ(after.stage.restore(saved), 1u);
  auto again = after.step(60, s);
  EXPECT_FALSE(again.start) << "a restart does not ask a backing-off cgroup once more";
  ASSERT_TRUE(again.skipped);
  EXPECT_EQ(*again.skipped, ReliefSkip::NoCandidate);
  EXPECT_EQ(after.d.candidates.size(), 1u) << "the eviction goes ahead without a hold";
  Snap over;
  over.mem(900 * kMi).add(cache_pod("a", QosClass::BestEffort, 900 * kMiB, 300 * kMiB, 0));
  after.step(200, over);  // the threshold let go meanwhile
  EXPECT_TRUE(after.step(311, s).start) << "asked again once its back-off is over";

  // Restored under a shorter relief.backoff: capped at it from the first step.
  ReliefConfig shorter = relief_config();
  shorter.backoff = 1min;
  Harness reloaded(config({hard(Signal::MemoryAvailable, qty(500 * kMi))}), shorter);
  reloaded.stage.restore(saved);
  EXPECT_FALSE(reloaded.step(60, s).start);
  EXPECT_EQ(reloaded.stage.backoff().at(a), at(60) + 1min);
  reloaded.step(100, over);
  EXPECT_TRUE(reloaded.step(121, s).start);
}

}  // namespace
}  // namespace pressured
