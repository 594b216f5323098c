// The merge of plugin answers into the engine's decisions (pure): what a
// plugin may change and what it may not, whatever it answers.
#include "plugins/merge.hpp"

#include <gtest/gtest.h>

#include "engine/engine_helpers.hpp"
#include "engine/why.hpp"

namespace pressured::plugins {
namespace {

using namespace pressured::testing;
using namespace std::chrono_literals;

constexpr std::array<bool, kLaneCount> kFree{};

// Node: 1 GiB available against a 2 GiB hard (or soft) memory threshold; pods
// a (BestEffort, the ranking's head), b (Burstable), c (Guaranteed).
struct Node {
  Snap snap;
  EvictionConfig cfg;
  Engine engine;
  explicit Node(ThresholdKind kind = ThresholdKind::Hard)
      : cfg(config({kind == ThresholdKind::Hard ? hard(Signal::MemoryAvailable, qty(2 * kGi))
                                                : soft(Signal::MemoryAvailable, qty(2 * kGi), 0s)})),
        engine(cfg) {
    snap.mem(1 * kGi)
        .add(pod("a", QosClass::BestEffort, 300 * kMi))
        .add(pod("b", QosClass::Burstable, 600 * kMi, 100 * kMi))
        .add(pod("c", QosClass::Guaranteed, 900 * kMi, 900 * kMi));
  }
  Decisions decide(TimePoint now = at(100)) { return engine.evaluate(snap, now); }
};

Answers answers(std::string plugin) {
  Answers a;
  a.plugin = std::move(plugin);
  return a;
}
void adjust(Answers& a, std::string uid, Action action, std::string reason = "r", Lane lane = Lane::Memory) {
  a.adjustments[static_cast<std::size_t>(lane)].push_back(Adjustment{std::move(uid), action, std::move(reason)});
}

MergeReport apply(Node& n, Decisions& d, const std::vector<Answers>& as, MergeState& st, TimePoint now = at(100),
                  std::array<bool, kLaneCount> held = kFree) {
  return apply_answers(d, n.snap, n.cfg, {}, held, as, now, MergeOptions{}, st);
}

TEST(PluginMerge, NoAnswersChangeNothing) {
  Node n;
  Decisions d = n.decide();
  const Decisions before = d;
  MergeState st;
  MergeReport r = apply(n, d, {}, st);
  EXPECT_EQ(d.candidates, before.candidates);
  EXPECT_TRUE(r.changes.empty());
}

TEST(PluginMerge, ProtectionChangesTheVictimAndSaysWhoAndWhy) {
  Node n;
  Decisions d = n.decide();
  ASSERT_EQ(d.eviction->uid, "a");
  Answers p = answers("guard");
  adjust(p, "a", Action::Protect, "serving traffic");
  MergeState st;
  MergeReport r = apply(n, d, {p}, st);
  ASSERT_EQ(d.candidates.size(), 1u);
  EXPECT_EQ(d.eviction->uid, "b");
  EXPECT_EQ(d.eviction->keys.qos, QosClass::Burstable);
  ASSERT_TRUE(d.eviction->runner_up);
  EXPECT_EQ(d.eviction->runner_up->uid, "c");
  ASSERT_EQ(d.eviction->plugin_notes.size(), 1u);
  EXPECT_EQ(d.eviction->plugin_notes[0], (PluginNote{"guard", "protect", "default/pod-a", "serving traffic"}));
  EXPECT_EQ(r.tally["guard"].vetoes, 1u);
  ASSERT_EQ(r.changes.size(), 1u);
  EXPECT_EQ(r.changes[0].before, "default/pod-a");
  EXPECT_EQ(r.changes[0].after, "default/pod-b");
  // The "why" of every output carries it.
  EXPECT_NE(explain_choice(*d.eviction).find("guard protect default/pod-a (\"serving traffic\")"), std::string::npos);
  const auto why = why_json(*d.eviction, JsonKeys::Snake, false);
  ASSERT_TRUE(why.contains("plugins"));
  EXPECT_EQ(why["plugins"][0]["plugin"], "guard");
  EXPECT_EQ(why["plugins"][0]["reason"], "serving traffic");
}

TEST(PluginMerge, DemoteAndPromoteReorderKeepingPressuredsOrderWithin) {
  Node n;
  Decisions d = n.decide();
  Answers p = answers("order");
  adjust(p, "a", Action::Demote, "batch, cheap to lose last");  // a after b and c
  MergeState st;
  apply(n, d, {p}, st);
  EXPECT_EQ(d.eviction->uid, "b");
  ASSERT_TRUE(d.eviction->runner_up);
  EXPECT_EQ(d.eviction->runner_up->uid, "c");  // pressured's order within the not-demoted

  Decisions d2 = n.decide(at(101));
  Answers q = answers("order");
  adjust(q, "c", Action::Promote, "restartable");
  apply(n, d2, {q}, st, at(101));
  EXPECT_EQ(d2.eviction->uid, "c");
  ASSERT_EQ(d2.eviction->plugin_notes.size(), 1u);
  EXPECT_EQ(d2.eviction->plugin_notes[0].action, "promote");
  EXPECT_EQ(d2.eviction->runner_up->uid, "a");
}

TEST(PluginMerge, CriticalStaticAndUnknownPodsAreIgnored) {
  Node n(ThresholdKind::Soft);  // soft: proposals are read too
  Pod crit = pod("crit", QosClass::BestEffort, 5 * kGi);
  crit.critical = true;
  Pod stat = pod("static", QosClass::BestEffort, 5 * kGi);
  stat.static_pod = true;
  n.snap.add(crit).add(stat);
  Decisions d = n.decide();
  ASSERT_EQ(d.eviction->uid, "a");
  Answers p = answers("hostile");
  adjust(p, "crit", Action::Promote);
  adjust(p, "static", Action::Promote);
  adjust(p, "nobody", Action::Protect);
  Answers q = answers("proposer");
  q.proposals[0].push_back(Proposal{"crit", "evict the critical one"});
  q.proposals[0].push_back(Proposal{"static", "and the static one"});
  MergeState st;
  MergeReport r = apply(n, d, {p, q}, st);
  EXPECT_EQ(d.eviction->uid, "a");
  EXPECT_TRUE(d.eviction->plugin_notes.empty());
  EXPECT_EQ(r.tally["hostile"].ignored, 3u);
  EXPECT_EQ(r.tally["proposer"].ignored, 2u);  // not candidates
}

TEST(PluginMerge, TheLastCandidateOfAHardThresholdCannotBeProtected) {
  Node n;
  Decisions d = n.decide();
  Answers p = answers("veto");
  for (const char* uid : {"a", "b", "c"}) adjust(p, uid, Action::Protect, "mine");
  MergeState st;
  MergeReport r = apply(n, d, {p}, st);
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->uid, "a");  // pressured's own head
  ASSERT_FALSE(d.eviction->plugin_notes.empty());
  EXPECT_EQ(d.eviction->plugin_notes[0].action, "protect-overridden");
  EXPECT_EQ(r.tally["veto"].overridden, 1u);
  EXPECT_EQ(r.tally["veto"].vetoes, 0u);
}

TEST(PluginMerge, UnderASoftThresholdProtectingEveryCandidateHoldsTheEviction) {
  Node n(ThresholdKind::Soft);
  Decisions d = n.decide();
  ASSERT_TRUE(d.eviction);
  Answers p = answers("veto");
  for (const char* uid : {"a", "b", "c"}) adjust(p, uid, Action::Protect, "mine");
  MergeState st;
  apply(n, d, {p}, st);
  EXPECT_FALSE(d.eviction);
  EXPECT_EQ(d.no_candidates, std::vector<Signal>{Signal::MemoryAvailable});
}

TEST(PluginMerge, ProposalsOnlyUnderSoftThresholdsAndRateLimited) {
  Answers p = answers("picker");
  p.proposals[0].push_back(Proposal{"c", "largest cache"});
  MergeOptions opt;
  {
    Node hard_node;
    Decisions d = hard_node.decide();
    MergeState st;
    apply(hard_node, d, {p}, st);
    EXPECT_EQ(d.eviction->uid, "a") << "a proposal never decides a hard threshold";
  }
  Node n(ThresholdKind::Soft);
  MergeState st;
  Decisions d = n.decide(at(100));
  MergeReport r = apply(n, d, {p}, st, at(100));
  EXPECT_EQ(d.eviction->uid, "c");
  EXPECT_EQ(r.tally["picker"].proposals, 1u);
  ASSERT_FALSE(d.eviction->plugin_notes.empty());
  EXPECT_EQ(d.eviction->plugin_notes.back(), (PluginNote{"picker", "propose", "default/pod-c", "largest cache"}));
  // Within the interval: pressured's own choice.
  Decisions d2 = n.decide(at(100) + opt.proposal_interval - 1s);
  apply(n, d2, {p}, st, at(100) + opt.proposal_interval - 1s);
  EXPECT_EQ(d2.eviction->uid, "a");
  // After it: taken again.
  Decisions d3 = n.decide(at(100) + opt.proposal_interval);
  apply(n, d3, {p}, st, at(100) + opt.proposal_interval);
  EXPECT_EQ(d3.eviction->uid, "c");
  // A held lane does not spend the plugin's turn.
  MergeState st2;
  Decisions d4 = n.decide(at(500));
  std::array<bool, kLaneCount> held{};
  held[0] = true;
  apply(n, d4, {p}, st2, at(500), held);
  EXPECT_EQ(d4.eviction->uid, "a");
  EXPECT_TRUE(st2.last_proposal.empty());
}

TEST(PluginMerge, AProposedPodAnotherPluginProtectsIsNotTaken) {
  Node n(ThresholdKind::Soft);
  Answers guard = answers("guard");
  adjust(guard, "c", Action::Protect, "database");
  Answers picker = answers("picker");
  picker.proposals[0].push_back(Proposal{"c", "largest"});
  MergeState st;
  Decisions d = n.decide();
  MergeReport r = apply(n, d, {guard, picker}, st);
  EXPECT_EQ(d.eviction->uid, "a");
  EXPECT_EQ(r.tally["picker"].proposals, 0u);
}

TEST(PluginMerge, APluginThresholdEvictsOnItsLaneAfterItsGracePeriod) {
  Node n;
  n.cfg.thresholds.clear();  // no node threshold met: only the plugin's
  n.engine.reconfigure(n.cfg);
  Answers g = answers("gpu");
  g.thresholds.push_back(ThresholdReport{"gpu.memory.available", 1, 2, true, ThresholdKind::Soft, 30, Lane::Memory});
  MergeState st;
  Decisions d = n.decide(at(100));
  apply(n, d, {g}, st, at(100));
  EXPECT_FALSE(d.eviction) << "soft: its grace period runs first";
  Decisions d2 = n.decide(at(130));
  apply(n, d2, {g}, st, at(130));
  ASSERT_TRUE(d2.eviction);
  EXPECT_EQ(d2.eviction->uid, "a");
  EXPECT_EQ(d2.eviction->kind, ThresholdKind::Soft);
  EXPECT_EQ(eviction_reason(*d2.eviction), "gpu/gpu.memory.available");
  EXPECT_EQ(d2.eviction->observed, 1);
  EXPECT_EQ(d2.eviction->plugin_notes.front().action, "threshold");
  // No longer met: forgotten, and the grace period starts again.
  g.thresholds[0].observed = 3;
  Decisions d3 = n.decide(at(131));
  apply(n, d3, {g}, st, at(131));
  EXPECT_FALSE(d3.eviction);
  EXPECT_TRUE(st.threshold_first_met.empty());
}

TEST(PluginMerge, GarbageThresholdsAreIgnored) {
  Node n;
  n.cfg.thresholds.clear();
  n.engine.reconfigure(n.cfg);
  Answers g = answers("bad");
  g.thresholds.push_back(ThresholdReport{"", 1, 2, true, ThresholdKind::Hard, 0, Lane::Memory});
  g.thresholds.push_back(ThresholdReport{"x y", 1, 2, true, ThresholdKind::Hard, 0, Lane::Memory});
  g.thresholds.push_back(ThresholdReport{"nan", std::nan(""), 2, true, ThresholdKind::Hard, 0, Lane::Memory});
  g.thresholds.push_back(ThresholdReport{"neg", 1, 2, true, ThresholdKind::Soft, -1, Lane::Memory});
  MergeState st;
  Decisions d = n.decide();
  MergeReport r = apply(n, d, {g}, st);
  EXPECT_FALSE(d.eviction);
  EXPECT_EQ(r.tally["bad"].ignored, 4u);
}

TEST(PluginMerge, ReasonsAreCutAndMadePrintable) {
  Node n;
  Decisions d = n.decide();
  Answers p = answers("noisy");
  adjust(p, "a", Action::Protect, std::string(5000, 'x') + "\n\x1b[31m");
  MergeState st;
  apply(n, d, {p}, st);
  ASSERT_FALSE(d.eviction->plugin_notes.empty());
  const std::string& reason = d.eviction->plugin_notes[0].reason;
  EXPECT_EQ(reason.size(), 200u);
  EXPECT_EQ(reason.find('\n'), std::string::npos);
}

TEST(PluginMerge, QuestionsCarryTheRankingHeadAndTheThresholdsMet) {
  Node n;
  Decisions d = n.decide();
  auto qs = lane_questions(d, n.snap, n.cfg, {}, {}, 2);
  ASSERT_FALSE(qs.empty());
  EXPECT_EQ(qs[0].lane, Lane::Memory);
  EXPECT_TRUE(qs[0].hard);
  EXPECT_EQ(qs[0].signals_met, std::vector<std::string>{"memory.available"});
  ASSERT_EQ(qs[0].candidates.size(), 2u);
  EXPECT_EQ(qs[0].candidates[0].uid, "a");
  EXPECT_EQ(qs[0].candidates[1].uid, "b");
}

TEST(PluginMerge, QuestionsCarryThePodsLabelsWithoutCopyingThem) {
  Node n;
  auto labels = std::make_shared<const PodLabels>(PodLabels{{{"app", "db"}}, true});
  n.snap.s.pods[0].labels = labels;  // a
  Decisions d = n.decide();
  auto qs = lane_questions(d, n.snap, n.cfg, {}, {}, 2);
  ASSERT_FALSE(qs.empty());
  ASSERT_EQ(qs[0].candidates.size(), 2u);
  EXPECT_EQ(qs[0].candidates[0].labels, labels) << "the snapshot's block itself";
  EXPECT_TRUE(qs[0].candidates[0].labels->incomplete);
  EXPECT_EQ(qs[0].candidates[1].labels, nullptr) << "b has none";
}

}  // namespace
}  // namespace pressured::plugins
