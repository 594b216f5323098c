// Decisions while an eviction is in flight (docs/observation.md, "Decisions
// while an eviction is in flight"): on a partial refresh that re-reads the
// victim and the signals, and a lane's ranking only when the policy does not
// hold that lane. Each case runs two daemons on two identical fake nodes, one
// allowed the partial refresh and one observing in full every time, and
// checks they take the same decisions; a counting observer shows which reads
// the partial one made.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/daemon.hpp"
#include "daemon/ladder_node.hpp"
#include "pressured/evictor.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
using testing::FakePodMemory;
using testing::memory_threshold;
using testing::pod_memory;
using testing::pod_uid;
constexpr uint64_t GiB = 1ULL << 30;

// The root memcg for a memory.available of `available` on the fake's 8 GiB.
FakePodMemory root_for_available(uint64_t available) {
  const uint64_t ws = 8 * GiB - available;
  return FakePodMemory{ws + GiB / 2, ws, GiB / 2, GiB / 2, GiB / 4};
}

// Counts what the daemon asks of the real observer.
class CountingObserver final : public NodeObserver {
 public:
  explicit CountingObserver(NodeObserver& inner) : inner_(inner) {}
  const CgroupLayout& layout() const override { return inner_.layout(); }
  Result<NodeSnapshot> observe(TimePoint now) override {
    ++observations;
    return inner_.observe(now);
  }
  Result<SignalObservation> refresh_signal(Signal signal, TimePoint now) override {
    ++signal_reads;
    return inner_.refresh_signal(signal, now);
  }
  Result<void> refresh_pod(Pod& pod, TimePoint now) override {
    pods_read.push_back(pod.uid);
    return inner_.refresh_pod(pod, now);
  }
  Result<void> refresh_memory_usage(const std::vector<Pod*>& pods, TimePoint now) override {
    ++usage_batches;
    return inner_.refresh_memory_usage(pods, now);
  }
  MemcgCounters read_memcg_counters() override { return inner_.read_memcg_counters(); }
  std::vector<MemcgScope> memcg_scopes() override { return inner_.memcg_scopes(); }
  std::vector<PodCgroup> list_pods() override { return inner_.list_pods(); }
  const ObserverCounters& counters() const override { return inner_.counters(); }

  void reset() {
    observations = signal_reads = usage_batches = 0;
    pods_read.clear();
  }
  int observations = 0, signal_reads = 0, usage_batches = 0;
  std::vector<std::string> pods_read;

 private:
  NodeObserver& inner_;
};

// Records every signal sent; a victim is empty when the test says so.
class ControlledEvictor final : public Evictor {
 public:
  Result<void> validate(const EvictionTarget&) const override { return {}; }
  Result<KillReport> terminate(const EvictionTarget& t) override {
    calls.push_back("terminate " + t.uid);
    return KillReport{};
  }
  Result<KillReport> kill(const EvictionTarget& t) override {
    calls.push_back("kill " + t.uid);
    return KillReport{};
  }
  Result<bool> is_empty(const EvictionTarget& t) const override { return empty.count(t.uid) > 0; }
  std::vector<std::string> calls;
  std::set<std::string> empty;
};

constexpr int kPods = 30;

struct Rig {
  testing::LadderNode node{kPods};
  std::unique_ptr<CountingObserver> obs;
  ControlledEvictor ev;
  std::unique_ptr<Daemon> d;
  Daemon::Observe mode;
  Rig(const EvictionConfig& e, Daemon::Observe m) : mode(m) {
    obs = std::make_unique<CountingObserver>(*node.obs);
    Config c;
    c.eviction = e;
    DaemonDeps deps;
    deps.observer = obs.get();
    deps.evictor = &ev;
    d = std::make_unique<Daemon>(c, deps);
  }
  void evaluate(TimePoint now) { d->evaluate(now, "bpf", std::nullopt, mode); }
  void set_pod(int i, const FakePodMemory& m) { node.set(i, m); }
  // What the policy has in flight, without the per-process eviction ids.
  std::vector<std::string> in_flight() const {
    std::vector<std::string> out;
    for (const auto& f : d->policy().state().records) {
      if (!f.in_flight()) continue;
      out.push_back(f.eviction.uid + (f.local == EvictionRecord::Local::Terminating ? " terminating" : " releasing") +
                    (f.killed ? " killed" : "") + (f.escalated ? " escalated" : ""));
    }
    return out;
  }
};

// The same steps on a daemon deciding on partial refreshes and on one
// observing in full every time.
struct Twins {
  Rig partial, full;
  explicit Twins(const EvictionConfig& e) : partial(e, Daemon::Observe::PartialOk), full(e, Daemon::Observe::Full) {}
  template <typename F>
  void both(F f) {
    f(partial);
    f(full);
  }
  void evaluate(TimePoint now) {
    both([&](Rig& r) { r.evaluate(now); });
  }
  void expect_same_decisions(const char* when) {
    EXPECT_EQ(partial.ev.calls, full.ev.calls) << when;
    EXPECT_EQ(partial.in_flight(), full.in_flight()) << when;
    EXPECT_EQ(partial.d->policy().excluded(), full.d->policy().excluded()) << when;
    EXPECT_EQ(partial.d->last_decisions().conditions, full.d->last_decisions().conditions) << when;
  }
  // Pressure arrives and pod 5, having just grown the most, is chosen.
  void start_on_pod5(uint64_t available) {
    evaluate(TimePoint(2s));  // the safety net's full observation
    both([&](Rig& r) {
      r.set_pod(5, pod_memory(3000, 5));
      r.node.fake.set_root_memory(root_for_available(available));
    });
    evaluate(TimePoint(2s + 10ms));
    expect_same_decisions("the eviction starts");
    ASSERT_FALSE(partial.in_flight().empty());
    ASSERT_EQ(partial.in_flight().front().rfind(pod_uid(5), 0), 0u) << partial.in_flight().front();
  }
};

TEST(InFlightDecision, AHeldLaneReadsTheVictimAndTheSignalsOnly) {
  Twins t(memory_threshold(50, ThresholdKind::Hard));
  t.start_on_pod5(GiB);
  t.partial.obs->reset();
  t.evaluate(TimePoint(2s + 20ms));
  t.expect_same_decisions("killed, still running");
  EXPECT_EQ(t.partial.in_flight(), std::vector<std::string>{pod_uid(5) + " terminating killed"});
  EXPECT_EQ(t.partial.obs->observations, 0);
  EXPECT_EQ(t.partial.obs->signal_reads, 1);
  EXPECT_EQ(t.partial.obs->pods_read, std::vector<std::string>{pod_uid(5)});
  EXPECT_EQ(t.partial.obs->usage_batches, 0) << "the held memory lane needs no ranking";
  EXPECT_EQ(t.full.obs->observations, 3);
}

TEST(InFlightDecision, AVictimWhoseCgroupIsGoneHasExitedAsInAFullObservation) {
  Twins t(memory_threshold(50, ThresholdKind::Hard));
  t.start_on_pod5(GiB);
  t.both([](Rig& r) { r.node.fake.remove_pod(pod_uid(5), QosClass::BestEffort); });
  t.partial.obs->reset();
  t.evaluate(TimePoint(2s + 20ms));
  t.expect_same_decisions("victim gone");
  EXPECT_EQ(t.partial.in_flight(), std::vector<std::string>{pod_uid(5) + " releasing killed"});
  EXPECT_EQ(t.partial.obs->observations, 0);
  const auto& pods = t.partial.d->last_snapshot().pods;
  EXPECT_TRUE(std::none_of(pods.begin(), pods.end(), [](const Pod& p) { return p.uid == pod_uid(5); }));
  // Releasing: the lane is no longer held, its ranking needs the pod set,
  // which moved: a full observation, then the release and the next victim.
  t.evaluate(TimePoint(2s + 30ms));
  t.expect_same_decisions("released, the next victim");
  EXPECT_EQ(t.partial.obs->observations, 1);
}

TEST(InFlightDecision, AReleasingVictimsUsageIsReadFreshWhetherItRestartsOrLetsGo) {
  Twins t(memory_threshold(50, ThresholdKind::Hard));
  t.start_on_pod5(GiB);
  t.both([](Rig& r) { r.ev.empty.insert(pod_uid(5)); });
  t.evaluate(TimePoint(2s + 20ms));
  t.expect_same_decisions("exited");
  ASSERT_EQ(t.partial.in_flight(), std::vector<std::string>{pod_uid(5) + " releasing killed"});
  // Its containers restarted: its memory is not back.
  t.both([](Rig& r) {
    r.ev.empty.clear();
    r.set_pod(5, pod_memory(3500, 5));
  });
  t.partial.obs->reset();
  t.evaluate(TimePoint(2s + 30ms));
  t.expect_same_decisions("victim restarted");
  EXPECT_EQ(t.partial.in_flight(), std::vector<std::string>{pod_uid(5) + " releasing killed"});
  EXPECT_EQ(t.partial.obs->observations, 0);
  EXPECT_EQ(t.partial.obs->pods_read.front(), pod_uid(5));
  // Its memory comes back: released, and (still under pressure) the next
  // victim is the one a full observation picks.
  t.both([](Rig& r) { r.set_pod(5, pod_memory(1, 0)); });
  t.partial.obs->reset();
  t.evaluate(TimePoint(2s + 40ms));
  t.expect_same_decisions("released");
  EXPECT_EQ(t.partial.obs->observations, 0);
  EXPECT_EQ(t.partial.in_flight(), std::vector<std::string>{pod_uid(kPods - 1) + " terminating killed"});
}

TEST(InFlightDecision, AThresholdClearedMeanwhileChangesNothingInFlight) {
  Twins t(memory_threshold(50, ThresholdKind::Soft));
  t.start_on_pod5(3 * GiB);
  EXPECT_EQ(t.partial.in_flight(), std::vector<std::string>{pod_uid(5) + " terminating"});
  t.both([](Rig& r) { r.node.fake.set_root_memory(root_for_available(6 * GiB)); });
  t.partial.obs->reset();
  t.evaluate(TimePoint(2s + 20ms));
  t.expect_same_decisions("threshold cleared");
  EXPECT_EQ(t.partial.in_flight(), std::vector<std::string>{pod_uid(5) + " terminating"});
  EXPECT_EQ(t.partial.obs->observations, 0);
  EXPECT_FALSE(t.partial.d->last_decisions().thresholds.at(0).met);
}

TEST(InFlightDecision, AHardThresholdCrossedMeanwhileEscalatesAsInAFullObservation) {
  EvictionConfig e = memory_threshold(50, ThresholdKind::Soft);
  e.thresholds.push_back(memory_threshold(25, ThresholdKind::Hard).thresholds.front());
  Twins t(e);
  t.start_on_pod5(3 * GiB);
  EXPECT_EQ(t.partial.in_flight(), std::vector<std::string>{pod_uid(5) + " terminating"});
  t.both([](Rig& r) { r.node.fake.set_root_memory(root_for_available(GiB)); });
  t.partial.obs->reset();
  t.evaluate(TimePoint(2s + 20ms));
  t.expect_same_decisions("hard threshold crossed");
  EXPECT_EQ(t.partial.in_flight(), std::vector<std::string>{pod_uid(5) + " terminating killed escalated"});
  EXPECT_EQ(t.partial.ev.calls.back(), "kill " + pod_uid(5));
  EXPECT_EQ(t.partial.obs->observations, 0);
  EXPECT_EQ(t.partial.obs->signal_reads, 1) << "one signal watched by both thresholds";
}

TEST(InFlightDecision, AnotherLanesThresholdStillNeedsAFullObservation) {
  EvictionConfig e = memory_threshold(50, ThresholdKind::Hard);
  Threshold pids;
  pids.signal = Signal::PidAvailable;
  pids.kind = ThresholdKind::Hard;
  pids.value.kind = ThresholdValue::Kind::Percent;
  pids.value.percent = 1;  // 327 of 32768 PIDs: not met at 391 tasks
  e.thresholds.push_back(pids);
  Twins t(e);
  t.start_on_pod5(GiB);
  t.both([](Rig& r) { testing::write_text(r.node.fake.root() + "/proc/loadavg", "0.03 0.15 0.08 1/32700 6537\n"); });
  t.partial.obs->reset();
  t.evaluate(TimePoint(2s + 20ms));
  t.expect_same_decisions("the pids lane is free");
  EXPECT_EQ(t.partial.obs->observations, 1) << "its ranking needs every pod's pids";
}

}  // namespace
}  // namespace pressured
