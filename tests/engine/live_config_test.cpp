// One configuration, read by the engine and the eviction policy alike: a
// reload replaces the snapshot (LiveConfig::replace) and both follow it from
// their next evaluation, the evictions in flight included, without being
// told (the daemon's wiring: daemon_logic_test's reload tests).
#include <gtest/gtest.h>

#include "engine/engine_helpers.hpp"
#include "pressured/policy.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
using namespace pressured::testing;
using K = PolicyAction::Kind;

std::vector<K> kinds(const std::vector<PolicyAction>& v) {
  std::vector<K> out;
  for (const auto& a : v) out.push_back(a.kind);
  return out;
}

TEST(LiveConfig, EngineFollowsTheSnapshotAndDropsTheStateOfThresholdsGone) {
  Config c;
  c.eviction = config({soft(Signal::MemoryAvailable, qty(400 * kMi), 10s), hard(Signal::MemoryAvailable, qty(100 * kMi))});
  auto live = std::make_shared<LiveConfig>(c);
  Engine engine(live);
  Snap snap;
  snap.mem(300 * kMi, kGi).add(pod("be", QosClass::BestEffort, 700 * kMi));
  Decisions d = engine.evaluate(snap, at(0));
  EXPECT_TRUE(d.candidates.empty()) << "the soft threshold's grace has just begun";
  EXPECT_EQ(engine.state().threshold_first_observed.size(), 1u);

  // The soft threshold goes, the hard one rises above what is available.
  c.eviction = config({hard(Signal::MemoryAvailable, qty(350 * kMi))});
  live->replace(c);
  EXPECT_EQ(&engine.config(), &live->get().eviction) << "read, not copied";
  d = engine.evaluate(snap, at(1));
  ASSERT_EQ(d.candidates.size(), 1u) << "the new hard threshold acts at the next evaluation";
  EXPECT_EQ(d.candidates[0].kind, ThresholdKind::Hard);
  EXPECT_EQ(engine.state().threshold_first_observed.count({Signal::MemoryAvailable, ThresholdKind::Soft}), 0u)
      << "the grace timing of a threshold no longer configured is dropped";
}

// A soft eviction delegated to the API is killed locally at grace + margin.
// The margin was 300 s when it started; a reload to 1 s applies to it: the
// eviction in flight respects the configuration now in force, as it does
// when a restart resumes it from the checkpoint.
TEST(LiveConfig, AReloadReachesTheEvictionInFlight) {
  Config c;
  c.eviction = config({soft(Signal::MemoryAvailable, qty(400 * kMi), 1s)});
  c.eviction.max_pod_grace_period_seconds = 5;
  c.daemon.soft_kill_margin = 300s;
  auto live = std::make_shared<LiveConfig>(c);
  Engine engine(live);
  EvictionPolicy policy(live, PolicyConfig{.api = true});
  EXPECT_EQ(policy.config().soft_kill_margin, 300s) << "the daemon section is the configuration's";
  Snap snap;
  snap.mem(300 * kMi, kGi).add(pod("be", QosClass::BestEffort, 700 * kMi));
  auto step = [&](double t) { return policy.step(at(t), snap, engine.evaluate(snap, at(t), policy.excluded()), PolicyInputs{}); };
  step(0);
  auto start = step(1.5);
  ASSERT_EQ(kinds(start), (std::vector<K>{K::Start, K::ReportApi}));
  EXPECT_EQ(start[0].eviction.grace_period_seconds, 5);
  EXPECT_EQ(policy.next_deadline(), at(1.5) + 5s + 300s);
  EXPECT_TRUE(kinds(step(10)).empty()) << "grace 5 s + margin 300 s: not yet";

  c.daemon.soft_kill_margin = 1s;
  live->replace(c);
  EXPECT_EQ(kinds(step(10)), std::vector<K>{K::GraceEndKill}) << "decided at 1.5 s: killed from 7.5 s on";
  EXPECT_EQ(policy.config().soft_kill_margin, 1s);

  // A policy with settings of its own keeps them.
  EvictionPolicy own(PolicyConfig{.soft_kill_margin = 20s, .api = true});
  live->replace(c);
  EXPECT_EQ(own.config().soft_kill_margin, 20s);
}

}  // namespace
}  // namespace pressured
