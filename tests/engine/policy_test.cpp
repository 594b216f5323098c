// The eviction policy with synthetic time, driven with the real engine as the
// daemon and `simulate` drive it: escalation of a soft eviction when a hard
// threshold is met, independence of lanes, every phase's deadline, restart,
// dry run.
#include "pressured/policy.hpp"

#include <utility>

#include <gtest/gtest.h>

#include "engine/engine_helpers.hpp"

namespace pressured {
namespace {

std::size_t in_flight_count(const EvictionPolicy& p) {
  const auto& rs = p.state().records;
  return static_cast<std::size_t>(std::count_if(rs.begin(), rs.end(), [](const auto& r) { return r.in_flight(); }));
}

// API evictions the policy tracks.
std::size_t api_count(const EvictionPolicy& p) {
  const auto& rs = p.state().records;
  return static_cast<std::size_t>(
      std::count_if(rs.begin(), rs.end(), [](const auto& r) { return r.api != EvictionRecord::Api::None; }));
}

using namespace std::chrono_literals;
using namespace pressured::testing;
using K = PolicyAction::Kind;

// Engine + policy + a little world: pods with usage, which ones exited.
struct World {
  Engine engine;
  EvictionPolicy policy;
  Snap snap;
  std::vector<std::string> exited;
  std::vector<std::string> running;  // victims watched for a restart that run again
  PolicyInputs once;                 // one-shot inputs of the next step (answers, refused, reclaim end)

  World(EvictionConfig ec, PolicyConfig pc = {}) : engine(std::move(ec)), policy(std::move(pc)) {}

  std::vector<PolicyAction> step(double t) {
    Decisions d = engine.evaluate(snap, at(t), policy.excluded());
    PolicyInputs in = std::exchange(once, {});
    in.exited = exited;
    in.running = running;
    std::erase_if(d.candidates, [&](const Eviction& c) {
      return std::find(in.refused.begin(), in.refused.end(), c.uid) != in.refused.end();
    });
    return policy.step(at(t), snap, d, in);
  }
  Pod* pod(const std::string& uid) {
    for (auto& p : snap.s.pods) {
      if (p.uid == uid) return &p;
    }
    return nullptr;
  }
  // memory.available follows the pods' working sets on a node of `capacity`.
  void settle(double capacity) {
    double used = 0;
    for (const auto& p : snap.s.pods) used += static_cast<double>(p.usage.memory_working_set_bytes);
    snap.mem(std::max(0.0, capacity - used), capacity);
  }
};

std::vector<K> kinds(const std::vector<PolicyAction>& v) {
  std::vector<K> out;
  for (const auto& a : v) out.push_back(a.kind);
  return out;
}

const PolicyAction* find(const std::vector<PolicyAction>& v, K kind) {
  for (const auto& a : v) {
    if (a.kind == kind) return &a;
  }
  return nullptr;
}

// The issue's node: soft < 400Mi (grace 1 s), hard < 150Mi, no grace cap,
// 1 GiB for pods; a BestEffort pod ignoring SIGTERM with a 120 s grace.
World issue_node() {
  EvictionConfig ec = config({soft(Signal::MemoryAvailable, qty(400 * kMi), 1s), hard(Signal::MemoryAvailable, qty(150 * kMi))});
  ec.max_pod_grace_period_seconds = 0;
  World w(ec);
  Pod be = pod("be", QosClass::BestEffort, 680 * kMi);
  be.termination_grace_period_seconds = 120;
  Pod bu = pod("bu", QosClass::Burstable, 100 * kMi, 100 * kMi);
  w.snap.add(be).add(bu);
  w.settle(kGi);
  return w;
}

TEST(Policy, HardThresholdKillsTheSoftVictimAtOnce) {
  World w = issue_node();
  EXPECT_TRUE(w.step(0).empty());  // soft met, grace running
  auto a = w.step(1.0);
  ASSERT_EQ(kinds(a), std::vector<K>{K::Start});
  EXPECT_EQ(a[0].eviction.uid, "be");
  EXPECT_EQ(a[0].eviction.kind, ThresholdKind::Soft);
  EXPECT_EQ(a[0].eviction.grace_period_seconds, 120);
  for (double t = 1.05; t < 5; t += 0.05) {  // within its grace: the next candidate waits, nothing is killed
    auto b = w.step(t);
    EXPECT_EQ(kinds(b), std::vector<K>{K::Deferred}) << t;
  }

  // The burstable pod spikes by 420 MiB: available 1024 - 680 - 520 < 150Mi.
  w.pod("bu")->usage.memory_working_set_bytes = 520 * static_cast<uint64_t>(kMi);
  w.settle(kGi);
  a = w.step(5.0);
  const PolicyAction* esc = find(a, K::Escalate);
  ASSERT_NE(esc, nullptr) << "the first evaluation after the hard crossing kills the soft victim";
  EXPECT_EQ(esc->eviction.uid, "be");
  EXPECT_EQ(esc->trigger, Signal::MemoryAvailable);
  EXPECT_EQ(find(a, K::Start), nullptr) << "the burstable pod waits for the release";
  ASSERT_NE(find(a, K::Deferred), nullptr);
  EXPECT_EQ(find(a, K::Deferred)->eviction.uid, "bu");
  EXPECT_TRUE(w.policy.in_flight(Lane::Memory)->escalated);

  // No second kill for the same victim before it had a chance to die.
  a = w.step(5.05);
  EXPECT_EQ(find(a, K::Escalate), nullptr);
  EXPECT_EQ(find(a, K::GraceEndKill), nullptr);

  // It dies; its memory comes back; memory is fine again: nothing else evicted.
  w.exited = {"be"};
  EXPECT_EQ(kinds(w.step(5.1)).front(), K::Exited);
  w.pod("be")->usage.memory_working_set_bytes = 0;
  w.settle(kGi);
  a = w.step(5.15);
  EXPECT_EQ(kinds(a), std::vector<K>{K::Released});
  EXPECT_EQ(w.policy.in_flight(Lane::Memory), nullptr);
  EXPECT_TRUE(w.step(5.2).empty()) << "504 MiB available: the burstable pod survives";
}

TEST(Policy, SoftVictimStillRunsItsGraceWithoutAHardThreshold) {
  World w = issue_node();
  w.step(0);
  w.step(1.0);
  for (double t = 2; t < 121; t += 1) EXPECT_EQ(find(w.step(t), K::GraceEndKill), nullptr) << t;
  auto a = w.step(121.0);
  ASSERT_NE(find(a, K::GraceEndKill), nullptr);
  EXPECT_EQ(find(a, K::GraceEndKill)->eviction.uid, "be");
}

// A pod asking for terminationGracePeriodSeconds near INT64_MAX, with no
// ceiling: the deadline saturates (UBSan: no overflow converting or adding),
// the victim runs a very long grace, and a hard threshold still kills it.
TEST(Policy, HugeGracePeriodSaturatesAndAHardThresholdStillKills) {
  EvictionConfig ec = config({soft(Signal::MemoryAvailable, qty(400 * kMi), 1s), hard(Signal::MemoryAvailable, qty(150 * kMi))});
  ec.soft_grace_ceiling_seconds = 0;
  World w(ec);
  Pod be = pod("be", QosClass::BestEffort, 680 * kMi);
  be.termination_grace_period_seconds = INT64_MAX - 1;
  Pod bu = pod("bu", QosClass::Burstable, 100 * kMi, 100 * kMi);
  w.snap.add(be).add(bu);
  w.settle(kGi);
  w.step(0);
  auto a = w.step(1.0);
  ASSERT_EQ(kinds(a), std::vector<K>{K::Start});
  EXPECT_EQ(a[0].eviction.grace_period_seconds, INT64_MAX - 1);
  for (double t = 2; t < 4000; t += 500) EXPECT_EQ(find(w.step(t), K::GraceEndKill), nullptr) << t;
  w.pod("bu")->usage.memory_working_set_bytes = 520 * static_cast<uint64_t>(kMi);
  w.settle(kGi);
  ASSERT_NE(find(w.step(4000), K::Escalate), nullptr);
}

// With the default ceiling (1 h) the same pod is killed when its grace ends,
// so a pod author cannot hold the memory lane by asking for centuries.
TEST(Policy, DefaultGraceCeilingEndsAHugeGracePeriod) {
  EvictionConfig ec = config({soft(Signal::MemoryAvailable, qty(400 * kMi), 1s)});
  World w(ec);
  Pod be = pod("be", QosClass::BestEffort, 680 * kMi);
  be.termination_grace_period_seconds = 9'000'000'000;
  w.snap.add(be);
  w.settle(kGi);
  w.step(0);
  auto a = w.step(1.0);
  ASSERT_EQ(kinds(a), std::vector<K>{K::Start});
  EXPECT_EQ(a[0].eviction.grace_period_seconds, 3600);
  EXPECT_EQ(find(w.step(3600.5), K::GraceEndKill), nullptr);
  ASSERT_NE(find(w.step(3601.0), K::GraceEndKill), nullptr);
}

TEST(Policy, HardThresholdOfAnotherLaneIsNotBlocked) {
  EvictionConfig ec = config({soft(Signal::MemoryAvailable, qty(kGi), 0s), hard(Signal::PidAvailable, qty(100))});
  World w(ec);
  Pod mem = pod("mem", QosClass::BestEffort, 4 * kGi);
  mem.termination_grace_period_seconds = 60;
  Pod forky = pod("forky", QosClass::BestEffort, kMi);
  forky.usage.pids = 30000;
  w.snap.add(mem).add(forky);
  w.snap.mem(512 * kMi).sig(Signal::PidAvailable, 1000, 32768);
  auto a = w.step(0);
  ASSERT_EQ(kinds(a), std::vector<K>{K::Start});
  EXPECT_EQ(a[0].eviction.uid, "mem");
  EXPECT_EQ(a[0].eviction.grace_period_seconds, 60);

  w.snap.sig(Signal::PidAvailable, 50, 32768);  // a fork bomb: pid.available < 100
  a = w.step(0.05);
  const PolicyAction* start = find(a, K::Start);
  ASSERT_NE(start, nullptr) << "the pids lane has nothing in flight";
  EXPECT_EQ(start->eviction.uid, "forky");
  EXPECT_EQ(start->eviction.signal, Signal::PidAvailable);
  EXPECT_EQ(start->eviction.grace_period_seconds, 0);
  EXPECT_FALSE(w.policy.in_flight(Lane::Memory)->killed) << "a pids threshold does not escalate a memory eviction";
}

TEST(Policy, SecondDecisionWaitsForTheReleaseAndTheReleaseWaitIsBounded) {
  World w(config({hard(Signal::MemoryAvailable, qty(200 * kMi))}), PolicyConfig{.release_wait_timeout = 2s});
  w.snap.add(pod("a", QosClass::BestEffort, 900 * kMi)).add(pod("b", QosClass::BestEffort, 10 * kMi));
  w.settle(kGi);
  ASSERT_EQ(kinds(w.step(1)), std::vector<K>{K::Start});
  EXPECT_EQ(kinds(w.step(1.05)), std::vector<K>{K::Deferred});
  w.exited = {"a"};
  EXPECT_EQ(kinds(w.step(1.1)), (std::vector<K>{K::Exited, K::Deferred}));
  EXPECT_EQ(kinds(w.step(2)), std::vector<K>{K::Deferred});  // memory never comes back
  auto a = w.step(3.2);
  ASSERT_EQ(kinds(a), (std::vector<K>{K::ReleaseTimeout, K::Start}));
  EXPECT_EQ(a[1].eviction.uid, "b") << "a stays out of ranking while it is still observed";
}

// daemon.evictAheadOfRelease: under a hard memory threshold a second pod is
// evicted while the first victim still gives its memory back only when the
// projection (what the victims still hold, minus what the others take over
// the release horizon) stays under the threshold, and no further.
World ahead_node(bool ahead) {
  PolicyConfig pc;
  pc.evict_ahead_of_release = ahead;
  pc.release_horizon = 100ms;
  World w(config({hard(Signal::MemoryAvailable, qty(200 * kMi))}), pc);
  w.snap.add(pod("a", QosClass::BestEffort, 400 * kMi))
      .add(pod("b", QosClass::BestEffort, 390 * kMi))
      .add(pod("c", QosClass::BestEffort, 110 * kMi));
  w.settle(kGi);  // 124Mi available
  return w;
}

TEST(PolicyAheadOfRelease, TheNextPodGoesAtOnceWhenTheVictimsReleaseWillNotBeEnough) {
  World w = ahead_node(true);
  auto first = w.step(1);
  ASSERT_EQ(kinds(first), std::vector<K>{K::Start});
  EXPECT_EQ(first[0].eviction.uid, "a");
  EXPECT_TRUE(first[0].reason.empty()) << "nothing was in flight";
  EXPECT_FALSE(w.policy.holds_lane(Lane::Memory, at(1.01))) << "the next pod may go ahead: ranked";
  // 50 ms later the victim gave back 100Mi, b took 200Mi: 24Mi available,
  // 4000Mi/s lost, 400Mi more in the 100 ms horizon against 300Mi still held.
  w.pod("a")->usage.memory_working_set_bytes = 300 * kMi;
  w.pod("b")->usage.memory_working_set_bytes = 590 * kMi;
  w.settle(kGi);
  auto second = w.step(1.05);
  ASSERT_EQ(kinds(second), std::vector<K>{K::Start});
  EXPECT_EQ(second[0].eviction.uid, "b");
  EXPECT_NE(second[0].reason.find("projected available -76Mi = 24Mi now + 300Mi"), std::string::npos)
      << second[0].reason;
  EXPECT_EQ(in_flight_count(w.policy), 2u);
  // With b in flight too, what both hold is more than enough: c stays.
  auto third = w.step(1.06);
  ASSERT_EQ(kinds(third), std::vector<K>{K::Deferred});
  EXPECT_EQ(third[0].eviction.uid, "c");
  EXPECT_NE(third[0].reason.find("projected available"), std::string::npos) << third[0].reason;
  // Both exit and release: the lane is free again, one eviction record each.
  w.exited = {"a", "b"};
  EXPECT_EQ(kinds(w.step(1.1)), (std::vector<K>{K::Exited, K::Exited, K::Deferred}));
  w.pod("a")->usage.memory_working_set_bytes = 0;
  w.pod("b")->usage.memory_working_set_bytes = 0;
  w.settle(kGi);
  EXPECT_EQ(kinds(w.step(1.2)), (std::vector<K>{K::Released, K::Released}));
  EXPECT_EQ(in_flight_count(w.policy), 0u);
}

TEST(PolicyAheadOfRelease, EnoughComingBackWaitsForIt) {
  World w = ahead_node(true);
  ASSERT_EQ(kinds(w.step(1)), std::vector<K>{K::Start});
  // b took 100Mi in 50 ms (2000Mi/s: 200Mi over the horizon); a still holds 400Mi.
  w.pod("b")->usage.memory_working_set_bytes = 490 * kMi;
  w.settle(kGi);
  auto a = w.step(1.05);
  ASSERT_EQ(kinds(a), std::vector<K>{K::Deferred});
  EXPECT_NE(a[0].reason.find("projected available 224Mi"), std::string::npos) << a[0].reason;
}

TEST(PolicyAheadOfRelease, OffItIsOneAtATime) {
  World w = ahead_node(false);
  ASSERT_EQ(kinds(w.step(1)), std::vector<K>{K::Start});
  w.pod("a")->usage.memory_working_set_bytes = 300 * kMi;
  w.pod("b")->usage.memory_working_set_bytes = 590 * kMi;
  w.settle(kGi);
  auto a = w.step(1.05);
  ASSERT_EQ(kinds(a), std::vector<K>{K::Deferred});
  EXPECT_EQ(a[0].reason, "an eviction is in flight");
  EXPECT_TRUE(w.policy.holds_lane(Lane::Memory, at(1.06)));
}

// A done victim the kubelet restarted (before the API eviction reached it) is
// back in flight as the same eviction, killed: its lane waits for that memory
// and chooses nobody else meanwhile. Only a victim killed here and evicted
// through the API, only once it is done with, only within the watch.
TEST(Policy, ARestartedVictimHoldsItsLaneInsteadOfASecondVictim) {
  World w(config({hard(Signal::MemoryAvailable, qty(200 * kMi))}),
          PolicyConfig{.release_wait_timeout = 2s, .api = true});
  w.snap.add(pod("a", QosClass::BestEffort, 900 * kMi)).add(pod("b", QosClass::Burstable, 50 * kMi, 100 * kMi));
  w.settle(kGi);
  auto start = w.step(1);
  ASSERT_EQ(kinds(start), (std::vector<K>{K::Start, K::ReportApi}));
  const Eviction first = start[0].eviction;
  w.running = {"a"};
  EXPECT_EQ(find(w.step(1.05), K::RestartKill), nullptr) << "in flight, not done: its own straggler kills apply";
  w.running.clear();
  w.exited = {"a"};
  w.pod("a")->usage.memory_working_set_bytes = 0;
  w.settle(kGi);
  EXPECT_EQ(kinds(w.step(1.1)), std::vector<K>{K::Exited});
  EXPECT_EQ(kinds(w.step(1.2)), std::vector<K>{K::Released});
  ASSERT_FALSE(w.policy.busy());
  ASSERT_EQ(w.policy.probes(at(1.5)).size(), 0u) << "the next check is a second after the kill";
  ASSERT_EQ(w.policy.probes(at(2)).size(), 1u);
  EXPECT_EQ(w.policy.next_deadline(), at(2)) << "the restart check is a deadline of the loop";

  // Restarted: its memory again, threshold met.
  w.exited.clear();
  w.running = {"a"};
  w.pod("a")->usage.memory_working_set_bytes = 900 * kMi;
  w.settle(kGi);
  auto a = w.step(2);
  ASSERT_EQ(kinds(a), (std::vector<K>{K::RestartKill, K::Deferred})) << "b waits: a's memory is coming back";
  EXPECT_EQ(a[0].eviction.id, first.id) << "the same eviction";
  EXPECT_EQ(a[0].since_kill, 1s);
  ASSERT_TRUE(w.policy.busy());
  EXPECT_TRUE(w.policy.in_flight(Lane::Memory)->killed);
  w.running.clear();
  w.exited = {"a"};
  w.pod("a")->usage.memory_working_set_bytes = 0;
  w.settle(kGi);
  EXPECT_EQ(kinds(w.step(2.1)), std::vector<K>{K::Exited});
  EXPECT_EQ(kinds(w.step(2.2)), std::vector<K>{K::Released});
  EXPECT_EQ(w.policy.state().sequence, 1u) << "no second eviction";
  EXPECT_EQ(std::count_if(w.policy.state().records.begin(), w.policy.state().records.end(),
                          [](const EvictionRecord& r) { return r.api == EvictionRecord::Api::Sent; }),
            1)
      << "one API eviction however many kills";

  // Past the watch, running again is not a restart of ours any more.
  w.exited.clear();
  w.running = {"a"};
  EXPECT_TRUE(w.policy.probes(at(400)).empty());
  EXPECT_EQ(find(w.step(400), K::RestartKill), nullptr);
}

TEST(Policy, OnlyVictimsKilledHereAndEvictedThroughTheApiAreWatched) {
  PolicyConfig local;  // no reporter: nothing keeps the pod on the node after the kill
  World w(config({hard(Signal::MemoryAvailable, qty(200 * kMi))}), local);
  w.snap.add(pod("a", QosClass::BestEffort, 900 * kMi));
  w.settle(kGi);
  ASSERT_EQ(kinds(w.step(1)), std::vector<K>{K::Start});
  w.exited = {"a"};
  w.pod("a")->usage.memory_working_set_bytes = 0;
  w.settle(kGi);
  w.step(1.1);
  w.step(1.2);
  EXPECT_TRUE(w.policy.probes(at(3)).empty());
  w.exited.clear();
  w.running = {"a"};
  EXPECT_EQ(find(w.step(3), K::RestartKill), nullptr);
}

TEST(Policy, AVictimThatNeverEmptiesIsStuckAndStopsBlocking) {
  PolicyConfig pc;
  pc.kill_timeout = 5s;
  World w(config({hard(Signal::MemoryAvailable, qty(200 * kMi))}), pc);
  w.snap.add(pod("dstate", QosClass::BestEffort, 900 * kMi)).add(pod("next", QosClass::BestEffort, 50 * kMi));
  w.settle(kGi);
  ASSERT_EQ(kinds(w.step(0)), std::vector<K>{K::Start});
  int rekills = 0;
  for (double t = 0.5; t < 5; t += 0.5) {
    auto a = w.step(t);
    if (find(a, K::StragglerKill)) ++rekills;
    EXPECT_EQ(find(a, K::Start), nullptr);
  }
  EXPECT_GE(rekills, 3) << "stragglers are killed again every second";
  auto a = w.step(5.0);
  ASSERT_EQ(kinds(a), (std::vector<K>{K::Stuck, K::Start}));
  EXPECT_EQ(a[0].eviction.uid, "dstate");
  EXPECT_EQ(a[1].eviction.uid, "next");
  auto ex = w.policy.excluded();
  EXPECT_NE(std::find(ex.begin(), ex.end(), "dstate"), ex.end()) << "still there: still not ranked";
  // Once it is gone it is forgotten.
  w.snap.s.pods.erase(w.snap.s.pods.begin());
  w.step(5.5);
  ex = w.policy.excluded();
  EXPECT_EQ(std::find(ex.begin(), ex.end(), "dstate"), ex.end());
}

// A lane is held only while no step can end its eviction: terminating and
// not due to be declared stuck. Releasing (the step may release it and
// decide the next victim) or stuck-due, the lane's ranking is needed.
TEST(Policy, ALaneIsHeldWhileNoStepCanEndItsEviction) {
  PolicyConfig pc;
  pc.kill_timeout = 5s;
  World w(config({hard(Signal::MemoryAvailable, qty(200 * kMi))}), pc);
  w.snap.add(pod("v", QosClass::BestEffort, 900 * kMi)).add(pod("next", QosClass::BestEffort, 50 * kMi));
  w.settle(kGi);
  EXPECT_FALSE(w.policy.holds_lane(Lane::Memory, at(0))) << "nothing in flight";
  ASSERT_EQ(kinds(w.step(0)), std::vector<K>{K::Start});
  EXPECT_TRUE(w.policy.holds_lane(Lane::Memory, at(1)));
  EXPECT_FALSE(w.policy.holds_lane(Lane::Disk, at(1)));
  EXPECT_FALSE(w.policy.holds_lane(Lane::Memory, at(5))) << "killed 5 s ago: the next step declares it stuck";
  w.exited = {"v"};
  EXPECT_EQ(kinds(w.step(1)).front(), K::Exited);
  EXPECT_FALSE(w.policy.holds_lane(Lane::Memory, at(1.1))) << "releasing: the next step may end it";
  // Restored: the first step resumes (and may expire) it, so not held before.
  EvictionPolicy restored(pc);
  PolicyState st = w.policy.state();
  std::find_if(st.records.begin(), st.records.end(), [](const auto& r) { return r.in_flight(); })->local =
      EvictionRecord::Local::Terminating;
  restored.restore(st);
  EXPECT_FALSE(restored.holds_lane(Lane::Memory, at(1.1)));
}

TEST(Policy, EveryPhaseHasADeadline) {
  World w = issue_node();
  w.step(0);
  w.step(1);
  // Terminating, not killed: the grace end; killed: the kill timeout.
  EXPECT_EQ(w.policy.next_deadline(), at(121));
  w.pod("bu")->usage.memory_working_set_bytes = 520 * static_cast<uint64_t>(kMi);
  w.settle(kGi);
  w.step(5);
  EXPECT_EQ(w.policy.in_flight(Lane::Memory)->phase_deadline, at(5) + w.policy.config().kill_timeout);
  w.exited = {"be"};
  w.step(6);
  EXPECT_EQ(w.policy.in_flight(Lane::Memory)->phase_deadline, at(6) + w.policy.config().release_wait_timeout);
}

TEST(Policy, RestartDuringEscalationNeitherLosesTheKillNorKillsTwice) {
  World w = issue_node();
  w.step(0);
  w.step(1);
  w.pod("bu")->usage.memory_working_set_bytes = 520 * static_cast<uint64_t>(kMi);
  w.settle(kGi);
  ASSERT_NE(find(w.step(5), K::Escalate), nullptr);
  const PolicyState saved = w.policy.state();  // checkpointed before the kill is executed

  {  // The daemon died before the SIGKILL went out: the restarted one sends it at once.
    World r = issue_node();
    r.pod("bu")->usage.memory_working_set_bytes = 520 * static_cast<uint64_t>(kMi);
    r.settle(kGi);
    r.engine.restore(w.engine.state());
    r.policy.restore(saved);
    auto a = r.step(5.2);
    EXPECT_EQ(std::count_if(a.begin(), a.end(), [](const auto& x) { return x.kind == K::StragglerKill; }), 1);
    EXPECT_EQ(find(a, K::Start), nullptr) << "no second victim while the first is dying";
    a = r.step(5.25);
    EXPECT_EQ(find(a, K::StragglerKill), nullptr) << "one kill, not one per evaluation";
  }
  {  // The kill had happened: the victim is empty, nothing is killed again.
    World r = issue_node();
    r.pod("bu")->usage.memory_working_set_bytes = 520 * static_cast<uint64_t>(kMi);
    r.settle(kGi);
    r.engine.restore(w.engine.state());
    r.policy.restore(saved);
    r.exited = {"be"};
    auto a = r.step(5.2);
    EXPECT_EQ(kinds(a), (std::vector<K>{K::Exited, K::Deferred}));
  }
}

TEST(Policy, AStaleRestoredRecordIsDroppedNotResumed) {
  World w = issue_node();
  w.step(0);
  w.step(1);
  const PolicyState saved = w.policy.state();
  World r = issue_node();
  r.snap.mem(900 * kMi, kGi);  // no threshold met any more
  r.policy.restore(saved);
  auto a = r.step(86400);  // a day later
  ASSERT_EQ(kinds(a), std::vector<K>{K::Expired});
  EXPECT_FALSE(r.policy.busy());
}

TEST(Policy, DryRunOffersTheSamePodAgainAfterTheReleaseWait) {
  PolicyConfig pc;
  pc.dry_run = true;
  pc.release_wait_timeout = 1s;
  World w(config({hard(Signal::MemoryAvailable, qty(200 * kMi))}), pc);
  w.snap.add(pod("be", QosClass::BestEffort, 900 * kMi));
  w.settle(kGi);
  ASSERT_EQ(kinds(w.step(0)), std::vector<K>{K::Start});
  w.exited = {"be"};  // the recording evictor reports it empty after the recorded kill
  EXPECT_EQ(kinds(w.step(0.1)), std::vector<K>{K::Exited});
  w.exited.clear();
  auto a = w.step(1.2);
  ASSERT_EQ(kinds(a), std::vector<K>{K::ReleaseTimeout});
  a = w.step(1.3);
  ASSERT_EQ(kinds(a), std::vector<K>{K::Start});
  EXPECT_EQ(a[0].eviction.uid, "be");
  EXPECT_EQ(a[0].eviction.id, "e-2");
}

TEST(Policy, DiskEvictionsWaitForOneReclaimRun) {
  PolicyConfig pc;
  pc.disk_reclaim = true;
  World w(config({hard(Signal::NodefsAvailable, qty(kGi))}), pc);
  Pod p = pod("logs", QosClass::BestEffort, kMi);
  p.usage.ephemeral_storage_bytes = 5 * static_cast<uint64_t>(kGi);
  w.snap.add(p).sig(Signal::NodefsAvailable, 100 * kMi, 100 * kGi);
  EXPECT_EQ(kinds(w.step(0)), std::vector<K>{K::DiskReclaim});
  EXPECT_EQ(kinds(w.step(1)), std::vector<K>{K::Deferred});
  w.once.disk_reclaim_finished = true;
  EXPECT_EQ(kinds(w.step(2.1)), std::vector<K>{K::Start}) << "the reclaim did not help: evict";
}

TEST(Policy, HardEvictionsAreReportedSoftOnesDelegatedOnlyWithMetadata) {
  PolicyConfig pc;
  pc.api = true;
  pc.soft_kill_margin = 5s;
  World w(config({soft(Signal::MemoryAvailable, qty(kGi), 0s)}), pc);
  Pod p = pod("web", QosClass::BestEffort, 900 * kMi);
  p.termination_grace_period_seconds = 3;
  w.snap.add(p).mem(100 * kMi, 2 * kGi);
  auto a = w.step(0);
  ASSERT_EQ(kinds(a), (std::vector<K>{K::Start, K::ReportApi}));
  EXPECT_TRUE(a[0].report);
  EXPECT_TRUE(a[0].delegate);
  EXPECT_EQ(w.policy.in_flight(Lane::Memory)->kill_at, at(8)) << "grace 3 s + margin 5 s";
}

// A pod whose emptyDir `volume` holds `used` bytes against a sizeLimit of
// `limit`, walked by the storage walker (local ephemeral-storage limits).
Pod over_empty_dir(const std::string& uid, uint64_t used, uint64_t limit) {
  Pod p = pod(uid, QosClass::Burstable, 10 * kMi, 10 * kMi);
  p.local_storage.empty_dirs.push_back({"cache", limit});
  p.ephemeral_storage = EphemeralStorageBreakdown{};
  p.ephemeral_storage->empty_dir_volumes.push_back({"cache", used, 1});
  p.ephemeral_storage->empty_dir_bytes = used;
  p.usage.ephemeral_storage_bytes = used;
  return p;
}

TEST(PolicyLocalStorage, AnOwnLimitComesBeforeTheNodeThresholdOfItsLane) {
  // nodefs is short too: its ranking would pick "hog" (50Gi); the pod over
  // its emptyDir sizeLimit goes first, hard, with the kubelet's reason.
  World w(config({hard(Signal::NodefsAvailable, qty(kGi)), hard(Signal::MemoryAvailable, qty(100 * kMi))}));
  Pod hog = pod("hog", QosClass::BestEffort, kMi);
  hog.usage.ephemeral_storage_bytes = 50 * static_cast<uint64_t>(kGi);
  w.snap.add(hog).add(over_empty_dir("ed", 9 << 20, 4 << 20));
  w.snap.sig(Signal::NodefsAvailable, 100 * kMi, 100 * kGi).mem(50 * kMi, 2 * kGi);
  Decisions d = w.engine.evaluate(w.snap, at(0), w.policy.excluded());
  ASSERT_EQ(d.candidates.size(), 2u) << "one disk candidate (the own limit), one memory candidate";
  EXPECT_EQ(d.candidates[0].uid, "ed");
  EXPECT_EQ(d.candidates[0].local_storage_rule, "emptydirfs.limit");
  EXPECT_EQ(d.candidates[0].local_storage_message, "Usage of EmptyDir volume \"cache\" exceeds the limit \"4Mi\". ");
  EXPECT_EQ(eviction_reason(d.candidates[0]), "emptydirfs.limit");
  EXPECT_EQ(d.candidates[0].observed, 9 << 20);
  EXPECT_EQ(d.candidates[0].threshold_value, 4 << 20);
  EXPECT_EQ(d.candidates[1].signal, Signal::MemoryAvailable) << "the memory lane is independent";
  auto a = w.step(0);
  ASSERT_EQ(kinds(a), (std::vector<K>{K::Start, K::Start}));
  EXPECT_EQ(a[0].eviction.uid, "ed");
  EXPECT_EQ(a[0].eviction.kind, ThresholdKind::Hard);
  EXPECT_EQ(a[0].eviction.grace_period_seconds, 0);
  EXPECT_EQ(lane_of(a[0].eviction.signal), Lane::Disk);
  EXPECT_TRUE(w.policy.in_flight(Lane::Disk)->killed) << "grace 0: killed at once";
  EXPECT_EQ(w.policy.in_flight(Lane::Disk)->eviction.local_storage_rule, "emptydirfs.limit");
}

// A writable layer counts against its container's limit only when it shares
// nodefs with the logs: not on a dedicated imagefs or a filesystem of its own.
TEST(EngineLocalStorage, WritableLayersCountOnlyOnNodefs) {
  Pod p = pod("layered", QosClass::Burstable, 10 * kMi, 10 * kMi);
  p.local_storage.containers.push_back({"app", "cid", 4u << 20});
  p.ephemeral_storage = EphemeralStorageBreakdown{};
  p.ephemeral_storage->container_logs.push_back({"app", 1u << 20, 1});
  p.ephemeral_storage->container_layers.push_back({"cid", 8u << 20, 1});
  p.ephemeral_storage->logs_bytes = 1u << 20;
  p.ephemeral_storage->writable_layers_bytes = 8u << 20;
  p.ephemeral_storage->writable_layers_measured = true;
  p.usage.ephemeral_storage_bytes = 9u << 20;
  for (auto [layout, evicted] : {std::pair{ContainerfsLayout::Unknown, true}, std::pair{ContainerfsLayout::Single, true},
                                 std::pair{ContainerfsLayout::Split, true}, std::pair{ContainerfsLayout::Imagefs, false},
                                 std::pair{ContainerfsLayout::Separate, false}}) {
    World w(config({}));
    w.snap.add(p);
    w.snap.s.containerfs_layout = layout;
    Decisions d = w.engine.evaluate(w.snap, at(0), w.policy.excluded());
    ASSERT_EQ(d.candidates.size(), evicted ? 1u : 0u) << name(layout);
    if (evicted) {
      EXPECT_EQ(d.candidates[0].local_storage_rule, "ephemeralcontainerfs.limit") << name(layout);
    }
  }
}

TEST(PolicyLocalStorage, WithoutNodePressureItStillEvicts) {
  World w(config({hard(Signal::NodefsAvailable, qty(kGi))}));
  w.snap.add(over_empty_dir("ed", 9 << 20, 4 << 20)).add(over_empty_dir("ok", 3 << 20, 4 << 20));
  w.snap.sig(Signal::NodefsAvailable, 90 * kGi, 100 * kGi);
  auto a = w.step(0);
  ASSERT_EQ(kinds(a), std::vector<K>{K::Start});
  EXPECT_EQ(a[0].eviction.uid, "ed");
  EXPECT_FALSE(w.engine.evaluate(w.snap, at(0), w.policy.excluded()).conditions[1]) << "no DiskPressure";
}

TEST(PolicyLocalStorage, OneAtATimeAndNeverTwice) {
  World w(config({}));
  w.snap.add(over_empty_dir("a", 9 << 20, 4 << 20)).add(over_empty_dir("b", 8 << 20, 4 << 20));
  auto a = w.step(0);
  ASSERT_EQ(kinds(a), std::vector<K>{K::Start});
  EXPECT_EQ(a[0].eviction.uid, "a") << "the first pod over a limit, in snapshot order";
  // "a" is in flight: not offered again; "b" waits for the disk lane.
  a = w.step(0.5);
  ASSERT_EQ(kinds(a), std::vector<K>{K::Deferred});
  EXPECT_EQ(a[0].eviction.uid, "b");
  EXPECT_EQ(a[0].eviction.local_storage_rule, "emptydirfs.limit");
  // "a" exits but its volume stays on disk (the kubelet removes it later):
  // the release wait times out, "b" goes, and "a" is never chosen again.
  w.exited = {"a"};
  EXPECT_EQ(kinds(w.step(2)), (std::vector<K>{K::Exited, K::Deferred}));
  w.exited.clear();
  a = w.step(12.5);
  ASSERT_EQ(kinds(a), (std::vector<K>{K::ReleaseTimeout, K::Start}));
  EXPECT_EQ(a[1].eviction.uid, "b");
  w.exited = {"b"};
  EXPECT_EQ(kinds(w.step(13)), std::vector<K>{K::Exited});
  w.pod("b")->usage.ephemeral_storage_bytes = 0;  // its volume is gone
  w.pod("b")->ephemeral_storage->empty_dir_volumes.clear();
  w.exited.clear();
  EXPECT_EQ(kinds(w.step(14)), std::vector<K>{K::Released});
  for (double t = 15; t < 40; t += 5) {
    EXPECT_TRUE(w.step(t).empty()) << "\"a\" is still over its limit but was evicted already (t=" << t << ")";
  }
}

TEST(PolicyLocalStorage, FeatureGateOffDecidesNothing) {
  EvictionConfig ec = config({});
  ec.local_storage_capacity_isolation = false;
  World w(ec);
  w.snap.add(over_empty_dir("ed", 9 << 20, 4 << 20));
  for (double t = 0; t < 3; t += 1) EXPECT_TRUE(w.step(t).empty());
}

TEST(PolicyLocalStorage, PodsNeverEvictedStayNeverEvicted) {
  EvictionConfig ec = config({});
  ec.daemonset_pods = DaemonSetPolicy::Never;
  World w(ec);
  Pod critical = over_empty_dir("critical", 9 << 20, 4 << 20);
  critical.critical = true;
  Pod stat = over_empty_dir("static", 9 << 20, 4 << 20);
  stat.static_pod = true;
  Pod ds = over_empty_dir("ds", 9 << 20, 4 << 20);
  ds.daemonset = true;
  Pod unknown = over_empty_dir("unknown", 9 << 20, 4 << 20);
  unknown.metadata_unavailable = true;
  w.snap.add(critical).add(stat).add(ds).add(unknown);
  EXPECT_TRUE(w.step(0).empty());
}

TEST(PolicyLocalStorage, NoDiskReclaimRunForAnOwnLimit) {
  PolicyConfig pc;
  pc.disk_reclaim = true;
  World w(config({hard(Signal::NodefsAvailable, qty(kGi))}), pc);
  w.snap.add(over_empty_dir("ed", 9 << 20, 4 << 20)).sig(Signal::NodefsAvailable, 100 * kMi, 100 * kGi);
  auto a = w.step(0);
  ASSERT_EQ(kinds(a), std::vector<K>{K::Start}) << "an image GC cannot shrink a pod's own volume";
  EXPECT_EQ(a[0].eviction.uid, "ed");
}


// ---- The API eviction's life: pending -> sent -> confirmed, across restarts.

// A node with one BestEffort pod over a hard threshold, reported to the API.
World api_node(PolicyConfig pc = PolicyConfig{.api = true}) {
  World w(config({hard(Signal::MemoryAvailable, qty(200 * kMi))}), std::move(pc));
  w.snap.add(pod("a", QosClass::BestEffort, 900 * kMi)).add(pod("b", QosClass::Burstable, 50 * kMi, 100 * kMi));
  w.settle(kGi);
  return w;
}

const EvictionRecord& api_of(const World& w, const std::string& uid) {
  for (const auto& r : w.policy.state().records) {
    if (r.api != EvictionRecord::Api::None && r.eviction.uid == uid) return r;
  }
  static const EvictionRecord none;
  ADD_FAILURE() << "no API eviction for " << uid;
  return none;
}

TEST(PolicyApi, AHardEvictionIsKilledFirstThenHandedOverOnceAndConfirmedByTheAnswer) {
  World w = api_node();
  auto a = w.step(1);
  ASSERT_EQ(kinds(a), (std::vector<K>{K::Start, K::ReportApi})) << "the kill, then the API";
  EXPECT_EQ(a[1].eviction.id, a[0].eviction.id);
  EXPECT_EQ(api_of(w, "a").api, EvictionRecord::Api::Sent);
  EXPECT_EQ(api_of(w, "a").killed_at, at(1));
  EXPECT_EQ(find(w.step(1.1), K::ReportApi), nullptr) << "sent once";
  w.once.api_answers = {{"unknown-id", ApiAnswer::Result::Landed}};  // not ours: ignored
  EXPECT_EQ(find(w.step(1.2), K::ApiConfirmed), nullptr);
  w.once.api_answers = {{a[0].eviction.id, ApiAnswer::Result::Landed}};
  auto c = w.step(1.3);
  ASSERT_NE(find(c, K::ApiConfirmed), nullptr);
  EXPECT_EQ(find(c, K::ApiConfirmed)->api_result, ApiAnswer::Result::Landed);
  EXPECT_EQ(api_of(w, "a").api, EvictionRecord::Api::Confirmed);
  w.once.api_answers = {{a[0].eviction.id, ApiAnswer::Result::Landed}};
  EXPECT_EQ(find(w.step(1.4), K::ApiConfirmed), nullptr) << "answered twice: confirmed once";
}

TEST(PolicyApi, ARequestTheReporterDroppedIsHandedOverAgain) {
  World w = api_node();
  auto a = w.step(1);
  w.once.api_answers = {{a[0].eviction.id, ApiAnswer::Result::Dropped}};
  auto again = w.step(1.1);
  ASSERT_EQ(kinds(again), (std::vector<K>{K::Deferred, K::ReportApi})) << "b waits for a";
  EXPECT_EQ(again[1].eviction.id, a[0].eviction.id);
  EXPECT_EQ(api_of(w, "a").api, EvictionRecord::Api::Sent);
}

TEST(PolicyApi, AConfirmedRecordOfAPodGoneFromTheNodeIsForgotten) {
  World w = api_node();
  auto a = w.step(1);
  w.exited = {"a"};
  w.once.api_answers = {{a[0].eviction.id, ApiAnswer::Result::Landed}};
  w.step(1.1);
  ASSERT_EQ(api_count(w.policy), 1u) << "still in flight";
  w.snap.s.pods.erase(w.snap.s.pods.begin());  // the kubelet took it
  w.settle(kGi);
  w.step(1.2);
  EXPECT_TRUE(api_count(w.policy) == 0);
}

TEST(PolicyApi, AnUnconfirmedRecordWaitsForItsAnswerEvenWhenThePodIsGone) {
  World w = api_node();
  auto a = w.step(1);
  w.snap.s.pods.erase(w.snap.s.pods.begin());
  w.settle(kGi);
  w.step(1.1);
  w.step(1.2);
  ASSERT_EQ(api_count(w.policy), 1u);
  w.once.api_answers = {{a[0].eviction.id, ApiAnswer::Result::NotNeeded}};
  w.step(1.3);
  EXPECT_TRUE(api_count(w.policy) == 0);
}

// The daemon died with the API eviction decided and checkpointed but maybe
// not sent (or sent, the answer lost): the next process sends it once.
TEST(PolicyApi, AfterARestartAnUnconfirmedApiEvictionIsSentOnceAndAConfirmedOneNever) {
  World w = api_node();
  auto a = w.step(1);
  const PolicyState unconfirmed = w.policy.state();
  w.once.api_answers = {{a[0].eviction.id, ApiAnswer::Result::Landed}};
  w.step(1.1);
  const PolicyState confirmed = w.policy.state();
  {
    World r = api_node();
    r.policy.restore(unconfirmed);
    r.exited = {"a"};
    auto b = r.step(2);
    ASSERT_EQ(std::count_if(b.begin(), b.end(), [](const auto& x) { return x.kind == K::ReportApi; }), 1);
    EXPECT_EQ(find(b, K::ReportApi)->eviction.id, a[0].eviction.id) << "the same eviction: its Event keeps its name";
    EXPECT_EQ(find(b, K::Start), nullptr) << "no second victim";
    EXPECT_EQ(find(r.step(2.1), K::ReportApi), nullptr) << "once";
  }
  {
    World r = api_node();
    r.policy.restore(confirmed);
    r.exited = {"a"};
    auto b = r.step(2);
    EXPECT_EQ(find(b, K::ReportApi), nullptr);
    EXPECT_EQ(find(b, K::Start), nullptr);
  }
}

TEST(PolicyApi, ARestoredApiEvictionIsNotSentWhenReportingIsOffNow) {
  World w = api_node();
  w.step(1);
  const PolicyState saved = w.policy.state();
  World r = api_node(PolicyConfig{});  // restarted without a kubernetes section
  r.policy.restore(saved);
  r.exited = {"a"};
  auto b = r.step(2);
  ASSERT_NE(find(b, K::ApiUnsent), nullptr);
  EXPECT_EQ(find(b, K::ReportApi), nullptr);
  EXPECT_TRUE(api_count(r.policy) == 0);
}

// ---- The status record the kubelet may undo (docs/kubernetes.md, "What the
// kubelet does with the record").

// api_node()'s victim killed, its record taken by the API, exited and released:
// done with, watched for a restart.
std::string recorded_and_released(World& w, bool recorded = true) {
  auto a = w.step(1);
  const std::string id = a.at(0).eviction.id;
  w.once.api_answers = {{id, ApiAnswer::Result::Landed, recorded}};
  w.exited = {"a"};
  w.pod("a")->usage.memory_working_set_bytes = 0;
  w.settle(kGi);
  w.step(1.1);
  w.step(1.2);
  w.exited.clear();
  EXPECT_FALSE(w.policy.busy());
  EXPECT_EQ(api_of(w, "a").status != EvictionRecord::Status::None, recorded);
  return id;
}

std::size_t count(const std::vector<PolicyAction>& v, K kind) {
  return static_cast<std::size_t>(std::count_if(v.begin(), v.end(), [&](const auto& a) { return a.kind == kind; }));
}

TEST(PolicyRecord, ProcessesBackAfterTheRecordEndThePodThroughTheApiOnce) {
  World w = api_node();
  const std::string id = recorded_and_released(w);
  w.running = {"a"};
  auto b = w.step(2);
  ASSERT_EQ(count(b, K::RestartKill), 1u) << "killed again here too";
  ASSERT_EQ(count(b, K::EndApi), 1u);
  EXPECT_EQ(find(b, K::EndApi)->eviction.id, id) << "the same eviction";
  EXPECT_EQ(find(b, K::EndApi)->undone, RecordUndone::ProcessesBack);
  EXPECT_EQ(api_of(w, "a").api, EvictionRecord::Api::Sent);
  // Again and again: killed each time, ended once.
  std::size_t ends = 0;
  for (double t = 2.1; t < 6; t += 0.25) {
    w.running = {"a"};
    ends += count(w.step(t), K::EndApi);
  }
  EXPECT_EQ(ends, 0u);
  w.once.api_answers = {{id, ApiAnswer::Result::Landed, false}};
  auto c = w.step(6);
  ASSERT_NE(find(c, K::ApiConfirmed), nullptr);
  EXPECT_EQ(api_of(w, "a").undone, RecordUndone::ProcessesBack);
  EXPECT_EQ(api_of(w, "a").status, EvictionRecord::Status::Undone) << "the first answer's record, undone";
  for (double t = 7; t < 9; t += 0.5) EXPECT_EQ(count(w.step(t), K::EndApi), 0u) << t;
}

TEST(PolicyRecord, APhaseSeenFailedThenNotFailedEndsThePodOnce) {
  World w = api_node();
  const std::string id = recorded_and_released(w);
  w.pod("a")->phase = "Running";  // the source's copy from before the record
  EXPECT_EQ(count(w.step(1.3), K::EndApi), 0u) << "not seen Failed yet: the source may lag";
  EXPECT_EQ(api_of(w, "a").status, EvictionRecord::Status::Written);
  w.pod("a")->phase = "Failed";
  EXPECT_EQ(count(w.step(1.4), K::EndApi), 0u);
  EXPECT_EQ(api_of(w, "a").status, EvictionRecord::Status::Seen);
  w.pod("a")->phase = "";  // a source without phases says nothing
  EXPECT_EQ(count(w.step(1.5), K::EndApi), 0u);
  w.pod("a")->phase = "Running";  // the kubelet's status written over the record
  auto b = w.step(1.6);
  ASSERT_EQ(count(b, K::EndApi), 1u);
  EXPECT_EQ(find(b, K::EndApi)->eviction.id, id);
  EXPECT_EQ(find(b, K::EndApi)->undone, RecordUndone::PhaseReverted);
  EXPECT_EQ(count(b, K::RestartKill), 0u) << "no process back: nothing to kill here";
  w.running = {"a"};  // and then its processes too: still once
  for (double t = 2; t < 5; t += 0.5) EXPECT_EQ(count(w.step(t), K::EndApi), 0u) << t;
}

TEST(PolicyRecord, ARecordThatHoldsIsLeftAlone) {
  World w = api_node();
  recorded_and_released(w);
  w.pod("a")->phase = "Failed";
  for (double t = 1.3; t < 10; t += 0.5) {
    auto b = w.step(t);
    EXPECT_EQ(count(b, K::EndApi), 0u) << t;
    EXPECT_EQ(count(b, K::ReportApi), 0u) << t;
  }
  w.snap.s.pods.erase(w.snap.s.pods.begin());  // the kubelet stopped it and removed its cgroup
  w.settle(kGi);
  w.step(10);
  EXPECT_TRUE(api_count(w.policy) == 0) << "forgotten once the pod left the node";
}

TEST(PolicyRecord, AnEvictionThroughTheApiIsNeverEndedTwice) {
  World w = api_node();
  recorded_and_released(w, /*recorded=*/false);  // the Eviction API or its DELETE: the pod is deleted already
  w.pod("a")->phase = "Failed";
  w.step(1.3);
  w.pod("a")->phase = "Running";
  w.running = {"a"};
  auto b = w.step(2);
  EXPECT_EQ(count(b, K::RestartKill), 1u);
  EXPECT_EQ(count(b, K::EndApi), 0u);
}

// Crashed with the end decided (maybe not sent, or its answer lost): the
// next process sends it once more, as an end (the reporter leaves a pod
// already terminating alone), never as a second record.
TEST(PolicyRecord, AnEndDecidedBeforeARestartIsSentAgainOnce) {
  World w = api_node();
  const std::string id = recorded_and_released(w);
  w.running = {"a"};
  ASSERT_EQ(count(w.step(2), K::EndApi), 1u);
  const PolicyState saved = w.policy.state();
  World r = api_node();
  r.policy.restore(saved);
  auto b = r.step(3);
  ASSERT_EQ(count(b, K::EndApi), 1u);
  EXPECT_EQ(find(b, K::EndApi)->eviction.id, id);
  EXPECT_EQ(count(b, K::ReportApi), 0u);
  EXPECT_EQ(count(r.step(3.1), K::EndApi), 0u);
}

// Killed before the crash and empty since: not killed again. Running again
// after the restart (the kubelet restarted it): killed again, as the same eviction.
TEST(PolicyApi, AVictimKilledBeforeARestartIsKilledAgainOnlyIfItRuns) {
  World w = api_node();
  auto a = w.step(1);
  w.exited = {"a"};
  w.pod("a")->usage.memory_working_set_bytes = 0;
  w.settle(kGi);
  w.step(1.1);
  w.step(1.2);  // released: done with, watched
  const PolicyState saved = w.policy.state();
  {
    World r = api_node();
    r.pod("a")->usage.memory_working_set_bytes = 0;
    r.settle(kGi);
    r.policy.restore(saved);
    r.exited = {"a"};
    for (double t = 2; t < 4; t += 0.5) {
      auto b = r.step(t);
      EXPECT_EQ(find(b, K::RestartKill), nullptr) << t;
      EXPECT_EQ(find(b, K::StragglerKill), nullptr) << t;
      EXPECT_EQ(find(b, K::Start), nullptr) << t;
    }
  }
  {
    World r = api_node();
    r.policy.restore(saved);
    r.running = {"a"};
    auto b = r.step(2);
    ASSERT_NE(find(b, K::RestartKill), nullptr);
    EXPECT_EQ(find(b, K::RestartKill)->eviction.id, a[0].eviction.id);
    EXPECT_EQ(find(b, K::Start), nullptr);
  }
}

// Crashed after the SIGTERM was decided (maybe before it went out): the
// restarted daemon sends it again, and kills at the grace end as before.
TEST(PolicyApi, ARestoredLocalSoftEvictionGetsItsSigtermAgain) {
  World w(config({soft(Signal::MemoryAvailable, qty(400 * kMi), 1s)}));
  Pod be = pod("be", QosClass::BestEffort, 680 * kMi);
  be.termination_grace_period_seconds = 10;
  w.snap.add(be);
  w.settle(kGi);
  w.step(0);
  ASSERT_EQ(kinds(w.step(1)), std::vector<K>{K::Start});
  const PolicyState saved = w.policy.state();
  World r(config({soft(Signal::MemoryAvailable, qty(400 * kMi), 1s)}));
  r.snap = w.snap;
  r.policy.restore(saved);
  ASSERT_EQ(kinds(r.step(3)), std::vector<K>{K::Terminate});
  EXPECT_TRUE(r.step(4).empty()) << "once";
  EXPECT_EQ(kinds(r.step(11)), std::vector<K>{K::GraceEndKill});
}

// The configuration in force at the restart decides the resumed deadlines:
// a shorter soft kill margin brings the local kill forward.
TEST(PolicyApi, AResumedEvictionFollowsTheConfigurationNowInForce) {
  PolicyConfig before{.soft_kill_margin = 300s, .api = true};
  World w(config({soft(Signal::MemoryAvailable, qty(kGi), 0s)}), before);
  Pod p = pod("web", QosClass::BestEffort, 900 * kMi);
  p.termination_grace_period_seconds = 3;
  w.snap.add(p).mem(100 * kMi, 2 * kGi);
  ASSERT_EQ(kinds(w.step(0)), (std::vector<K>{K::Start, K::ReportApi}));
  EXPECT_EQ(w.policy.in_flight(Lane::Memory)->kill_at, at(303));
  const PolicyState saved = w.policy.state();
  PolicyConfig after{.soft_kill_margin = 2s, .api = true};
  World r(config({soft(Signal::MemoryAvailable, qty(kGi), 0s)}), after);
  r.snap = w.snap;
  r.policy.restore(saved);
  auto a = r.step(1);
  EXPECT_EQ(kinds(a), std::vector<K>{K::ReportApi}) << "not confirmed before the restart";
  EXPECT_EQ(r.policy.in_flight(Lane::Memory)->kill_at, at(5)) << "grace 3 s + the new 2 s margin";
  EXPECT_EQ(kinds(r.step(5)), std::vector<K>{K::GraceEndKill});
}

// A target the evictor refuses is filtered out before the policy: nothing
// starts, nothing is taken back, and it is not chosen again.
TEST(PolicyApi, ARefusedCandidateNeverStartsAndStaysOutOfRanking) {
  World w = api_node();
  w.once.refused = {"a"};
  auto a = w.step(1);
  EXPECT_TRUE(a.empty()) << kinds(a).size();
  EXPECT_EQ(w.policy.state().sequence, 0u) << "no id spent";
  auto ex = w.policy.excluded();
  EXPECT_NE(std::find(ex.begin(), ex.end(), "a"), ex.end());
  auto b = w.step(1.1);
  ASSERT_EQ(kinds(b), (std::vector<K>{K::Start, K::ReportApi}));
  EXPECT_EQ(b[0].eviction.uid, "b") << "the next pod in the ranking";
}

TEST(PolicyApi, ProbesAreTheTerminatingVictimsAndTheDueRestartChecks) {
  World w = api_node();
  EXPECT_TRUE(w.policy.probes(at(0)).empty());
  w.step(1);
  ASSERT_EQ(w.policy.probes(at(1)).size(), 1u);
  EXPECT_EQ(w.policy.probes(at(1))[0].uid, "a");
}

}  // namespace
}  // namespace pressured
