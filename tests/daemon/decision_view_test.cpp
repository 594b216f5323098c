// Event-driven decisions between full observations (daemon/decision_view.hpp)
// over a fake node read by the real observer: the partial refresh must pick
// the victim a full observation would pick, on values read for this decision,
// and refuse (full observation) whenever it cannot vouch for that.
#include "daemon/decision_view.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>

#include <gtest/gtest.h>

#include "metrics/exposition.hpp"
#include "daemon/daemon.hpp"
#include "daemon/ladder_node.hpp"
#include "pressured/engine.hpp"
#include "pressured/evictor.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
using testing::FakePodMemory;
using testing::memory_threshold;
using testing::pod_memory;
using testing::pod_uid;
constexpr uint64_t MiB = 1ULL << 20;

// The fake node and the snapshot of its first full observation.
struct Node : testing::LadderNode {
  NodeSnapshot snap;
  explicit Node(int n, const std::function<QosClass(int)>& qos = [](int) { return QosClass::BestEffort; })
      : LadderNode(n, qos) {
    auto s = obs->observe(TimePoint(1s));
    if (!s) throw std::runtime_error(s.error().message);
    snap = std::move(*s);
  }
  // The victim of a full observation right now (a fresh engine).
  std::string full_victim(const EvictionConfig& c, TimePoint now) {
    auto s = obs->observe(now);
    if (!s) return "observe failed";
    Engine e(c);
    auto d = e.evaluate(*s, now);
    return d.eviction ? d.eviction->uid : "none";
  }
};

TEST(DecisionView, QuietReadsOnlyTheWatchedSignal) {
  Node n(20);
  const auto before = n.snap.signal(Signal::MemoryAvailable)->value;
  // 1 GiB more in use at the root: memory.available must drop by it.
  n.fake.set_root_memory(FakePodMemory{3ULL << 30, 2ULL << 30, 1ULL << 30, 512ULL << 20, 256ULL << 20});
  auto r = refresh_for_decision(*n.obs, n.snap, memory_threshold(1), {}, TimePoint(2s));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->signals_read, 1u);
  EXPECT_FALSE(r->ranking_needed);
  EXPECT_EQ(r->pods_bounded, 0u);
  EXPECT_EQ(r->pods_refreshed, 0u);
  EXPECT_DOUBLE_EQ(n.snap.signal(Signal::MemoryAvailable)->value, before - static_cast<double>(1ULL << 30));
  EXPECT_EQ(n.snap.signal(Signal::MemoryAvailable)->observed_at, TimePoint(2s));
}

TEST(DecisionView, PressurePicksTheFullObservationsVictimReadingFewPods) {
  Node n(200);
  const auto cfg = memory_threshold(99.9);
  auto r = refresh_for_decision(*n.obs, n.snap, cfg, {}, TimePoint(2s));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->ranking_needed);
  EXPECT_EQ(r->pods_bounded, 199u) << "every other pod has the head's QoS class and priority";
  // The seed (pod 199, 209 MiB) and the pods whose page counter (working set
  // + 5 MiB of cache) reaches 209 MiB: 194 (a tie, its uid sorts first) to 198.
  EXPECT_EQ(r->pods_refreshed, 6u);
  Engine e(cfg);
  auto d = e.evaluate(n.snap, TimePoint(2s));
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->uid, pod_uid(199));
  EXPECT_EQ(d.eviction->uid, n.full_victim(cfg, TimePoint(3s)));
}

TEST(DecisionView, PodsThatCannotOutrankTheHeadAreNotRead) {
  // One BestEffort pod in ten: the others (Burstable) rank after any
  // BestEffort pod that uses memory, whatever their usage.
  Node n(300, [](int i) { return i % 10 == 0 ? QosClass::BestEffort : QosClass::Burstable; });
  const auto cfg = memory_threshold(99.9);
  auto r = refresh_for_decision(*n.obs, n.snap, cfg, {}, TimePoint(2s));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->pods_bounded, 29u);
  EXPECT_EQ(r->pods_refreshed, 1u) << "BestEffort pods are 10 MiB apart, more than their 5 MiB of cache";
  Engine e(cfg);
  auto d = e.evaluate(n.snap, TimePoint(2s));
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->uid, pod_uid(290));
  EXPECT_EQ(d.eviction->uid, n.full_victim(cfg, TimePoint(3s)));
}

TEST(DecisionView, APodThatGrewSinceTheFullObservationIsSeen) {
  Node n(200);
  const auto cfg = memory_threshold(99.9);
  n.set(17, pod_memory(900, 5));  // pod 17 grew past everyone after the last full observation
  auto r = refresh_for_decision(*n.obs, n.snap, cfg, {}, TimePoint(2s));
  ASSERT_TRUE(r) << r.error().message;
  Engine e(cfg);
  auto d = e.evaluate(n.snap, TimePoint(2s));
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->uid, pod_uid(17));
  EXPECT_EQ(d.eviction->usage_at_decision, 900 * MiB) << "the head's working set is read for this decision";
}

// A predictive hard threshold is met by the signal's fall before its value
// crosses: the view ranks on fresh reads then too, or the engine's predicted
// eviction would pick by the last full observation's usage (measured:
// bench/spike_frontier evicted a bystander while the grower, started after
// that observation, still read 0).
TEST(DecisionView, APredictiveThresholdRanksOnFreshReadsBeforeItsValueCrosses) {
  Node n(200);
  const auto cfg = memory_threshold(1);  // far from met by value
  n.set(17, pod_memory(900, 5));         // pod 17 grew past everyone after the last full observation
  auto quiet = refresh_for_decision(*n.obs, n.snap, cfg, {}, TimePoint(2s));
  ASSERT_TRUE(quiet) << quiet.error().message;
  EXPECT_FALSE(quiet->ranking_needed) << "without a lead, a threshold not met needs no ranking";
  auto r = refresh_for_decision(*n.obs, n.snap, cfg, {}, TimePoint(3s), {}, 200ms);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->ranking_needed);
  const auto it = std::find_if(n.snap.pods.begin(), n.snap.pods.end(), [](const Pod& p) { return p.uid == pod_uid(17); });
  ASSERT_NE(it, n.snap.pods.end());
  EXPECT_EQ(it->usage.memory_working_set_bytes, 900 * MiB) << "the head is read for the predicted decision";
  auto soft = refresh_for_decision(*n.obs, n.snap, memory_threshold(1, ThresholdKind::Soft), {}, TimePoint(4s), {},
                                   200ms);
  ASSERT_TRUE(soft) << soft.error().message;
  EXPECT_FALSE(soft->ranking_needed) << "only hard thresholds are predicted";
}

TEST(DecisionView, APodThatShrankIsNotChosenOnItsOldUsage) {
  Node n(200);
  const auto cfg = memory_threshold(99.9);
  n.set(199, pod_memory(1, 0));  // the biggest pod freed nearly everything
  auto r = refresh_for_decision(*n.obs, n.snap, cfg, {}, TimePoint(2s));
  ASSERT_TRUE(r) << r.error().message;
  Engine e(cfg);
  auto d = e.evaluate(n.snap, TimePoint(2s));
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->uid, pod_uid(198));
  EXPECT_EQ(d.eviction->uid, n.full_victim(cfg, TimePoint(3s)));
}

TEST(DecisionView, ExcludedAndNeverEvictedPodsAreSkipped) {
  Node n(50);
  const auto cfg = memory_threshold(99.9);
  for (auto& p : n.snap.pods) {
    if (p.uid == pod_uid(48)) p.critical = true;
  }
  auto r = refresh_for_decision(*n.obs, n.snap, cfg, {pod_uid(49)}, TimePoint(2s));
  ASSERT_TRUE(r) << r.error().message;
  Engine e(cfg);
  auto d = e.evaluate(n.snap, TimePoint(2s), {pod_uid(49)});
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->uid, pod_uid(47));
}

TEST(DecisionView, APodCreatedOrRemovedSendsToAFullObservation) {
  {
    Node n(10);
    n.fake.add_pod(pod_uid(100), QosClass::BestEffort, pod_memory(5000, 0));
    auto r = refresh_for_decision(*n.obs, n.snap, memory_threshold(99.9), {}, TimePoint(2s));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ESTALE);
  }
  {
    Node n(10);
    n.fake.remove_pod(pod_uid(3), QosClass::BestEffort);
    auto r = refresh_for_decision(*n.obs, n.snap, memory_threshold(99.9), {}, TimePoint(2s));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ESTALE);
  }
  {
    // Guaranteed pods live in kubepods itself: its count moves too.
    Node n(10);
    n.fake.add_pod(pod_uid(100), QosClass::Guaranteed, pod_memory(5000, 0));
    auto r = refresh_for_decision(*n.obs, n.snap, memory_threshold(99.9), {}, TimePoint(2s));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ESTALE);
  }
}

TEST(DecisionView, AnUncertainHeadSendsToAFullObservation) {
  Node n(40);
  // Every pod holds 1 GiB of inactive page cache: each bound beats the best
  // working set read so far, so the head cannot be settled in 16 reads.
  for (int i = 0; i < 40; ++i) n.set(i, pod_memory(10 + static_cast<uint64_t>(i), 1024));
  auto r = refresh_for_decision(*n.obs, n.snap, memory_threshold(99.9), {}, TimePoint(2s));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EAGAIN);
}

TEST(DecisionView, OtherLanesAndFailedReadsSendToAFullObservation) {
  Node n(5);
  EvictionConfig pids;
  Threshold t;
  t.signal = Signal::PidAvailable;
  t.value.kind = ThresholdValue::Kind::Percent;
  t.value.percent = 99.99;
  pids.thresholds.push_back(t);
  auto r = refresh_for_decision(*n.obs, n.snap, pids, {}, TimePoint(2s));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EAGAIN);

  testing::write_text(n.fake.memory_mount() + "/memory.stat", "garbage\n");
  auto m = refresh_for_decision(*n.obs, n.snap, memory_threshold(1), {}, TimePoint(2s));
  EXPECT_FALSE(m);
}

// A batched page-counter reader over the fake tree, as the BPF cgroup
// iterator reads a real one: kubepods and every pod, by inode, with the value
// of its usage file (or `value` where given), or an error.
struct FakePageCounters final : public PageCounterReader {
  Node& node;
  int pods;
  int calls = 0;
  std::string last_dir;
  uint32_t last_depth = 0;
  std::optional<Error> fail;
  std::function<std::optional<uint64_t>(int i, uint64_t file_value)> value = [](int, uint64_t v) { return v; };
  std::function<std::optional<uint64_t>(int i)> limit = [](int) { return std::optional<uint64_t>(); };
  FakePageCounters(Node& n, int count) : node(n), pods(count) {}
  Result<void> read(const std::string& dir, uint32_t depth, std::vector<PageCounterSample>& out) override {
    ++calls;
    last_dir = dir;
    last_depth = depth;
    out.clear();
    if (fail) return *fail;
    auto sample = [&](const std::string& path) -> std::optional<PageCounterSample> {
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0) return std::nullopt;
      std::ifstream f(path + "/memory.usage_in_bytes");
      uint64_t v = 0;
      if (!(f >> v)) return std::nullopt;
      return PageCounterSample{static_cast<uint64_t>(st.st_ino), v};
    };
    if (auto s = sample(node.fake.kubepods())) out.push_back(*s);
    for (int i = 0; i < pods; ++i) {
      auto s = sample(node.fake.pod_dir(pod_uid(i), QosClass::BestEffort));
      if (!s) continue;
      auto v = value(i, s->usage_bytes);
      if (!v) continue;
      s->usage_bytes = *v;
      // No limit: the page counter's maximum, as v1 prints it on 4 KiB pages.
      s->limit_bytes = limit(i).value_or(9223372036854771712ULL);
      out.push_back(*s);
    }
    return {};
  }
};

std::vector<Pod*> pointers(NodeSnapshot& snap) {
  std::vector<Pod*> out;
  for (auto& p : snap.pods) out.push_back(&p);
  return out;
}

TEST(DecisionView, ABatchReaderBoundsEveryContenderInOneRead) {
  Node n(200);
  auto batch = std::make_shared<FakePageCounters>(n, 200);
  n.obs->set_page_counter_reader(batch);
  EXPECT_EQ(n.obs->counters().page_counter_batch.load(), 1u);
  const auto cfg = memory_threshold(99.9);
  n.set(17, pod_memory(900, 5));  // grew after the last full observation
  auto r = refresh_for_decision(*n.obs, n.snap, cfg, {}, TimePoint(2s));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(batch->calls, 1) << "one batch for all contenders";
  EXPECT_EQ(batch->last_dir, n.fake.kubepods() + "/besteffort") << "the contenders' tier, not all of kubepods";
  EXPECT_EQ(batch->last_depth, 1u) << "pods only, not their containers";
  EXPECT_EQ(r->pods_bounded, 199u);
  EXPECT_EQ(n.obs->counters().page_counter_batches.load(), 1u);
  Engine e(cfg);
  auto d = e.evaluate(n.snap, TimePoint(2s));
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->uid, pod_uid(17));
  EXPECT_EQ(d.eviction->uid, n.full_victim(cfg, TimePoint(3s)));
}

// A full observation takes every pod's usage and limit from one walk of
// kubepods: the working set is the walk's usage less the file's
// inactive_file, and the files' own usage and limit are not what it shows.
TEST(DecisionView, AFullObservationTakesUsageAndLimitFromOneWalk) {
  Node n(20);
  auto batch = std::make_shared<FakePageCounters>(n, 20);
  batch->value = [](int i, uint64_t) { return std::optional<uint64_t>((300ULL + static_cast<uint64_t>(i)) << 20); };
  batch->limit = [](int i) { return i % 2 ? std::optional<uint64_t>((1000ULL + static_cast<uint64_t>(i)) << 20) : std::nullopt; };
  n.obs->set_page_counter_reader(batch);
  auto snap = n.obs->observe(TimePoint(2s));
  ASSERT_TRUE(snap) << snap.error().message;
  EXPECT_EQ(batch->calls, 1) << "one walk for every pod";
  EXPECT_EQ(batch->last_dir, n.fake.kubepods());
  EXPECT_EQ(batch->last_depth, 2u) << "tiers and their pods";
  EXPECT_EQ(n.obs->counters().page_counter_batches.load(), 0u) << "the decisions' count, not the observations'";
  ASSERT_EQ(snap->pods.size(), 20u);
  for (const Pod& p : snap->pods) {
    const int i = std::stoi(p.uid.substr(p.uid.size() - 12));
    const uint64_t usage = (300ULL + static_cast<uint64_t>(i)) << 20;
    EXPECT_EQ(p.memory_usage_bytes, usage) << p.uid;
    EXPECT_EQ(p.usage.memory_working_set_bytes, usage - p.usage.memory_inactive_file_bytes) << p.uid;
    EXPECT_GT(p.usage.memory_inactive_file_bytes, 0u) << p.uid << ": memory.stat is still read";
    EXPECT_EQ(p.memory_limit_bytes, batch->limit(i)) << p.uid;
  }
}

const Pod* find_pod(const NodeSnapshot& snap, const std::string& uid) {
  for (const Pod& p : snap.pods) {
    if (p.uid == uid) return &p;
  }
  return nullptr;
}

// A pod the walk did not see (created or recreated since) reads its files;
// a walk that fails drops the reader, and the observation reads files.
TEST(DecisionView, AFullObservationReadsTheFilesOfWhatTheWalkMissed) {
  Node n(20);
  auto batch = std::make_shared<FakePageCounters>(n, 20);
  batch->value = [](int i, uint64_t v) { return i == 7 ? std::nullopt : std::optional<uint64_t>(v + (1ULL << 20)); };
  n.obs->set_page_counter_reader(batch);
  auto snap = n.obs->observe(TimePoint(2s));
  ASSERT_TRUE(snap) << snap.error().message;
  for (const Pod& p : snap->pods) {
    const int i = std::stoi(p.uid.substr(p.uid.size() - 12));
    const Pod* file = find_pod(n.snap, p.uid);
    ASSERT_TRUE(file) << p.uid;
    EXPECT_EQ(p.memory_usage_bytes, file->memory_usage_bytes + (i == 7 ? 0 : (1ULL << 20))) << p.uid;
    EXPECT_FALSE(p.stale) << p.uid;
  }

  batch->fail = Error{EBADF, "refused"};
  auto after = n.obs->observe(TimePoint(3s));
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_EQ(n.obs->counters().page_counter_batch.load(), 0u) << "the reader is dropped";
  for (const Pod& p : after->pods) {
    const Pod* file = find_pod(n.snap, p.uid);
    ASSERT_TRUE(file) << p.uid;
    EXPECT_EQ(p.memory_usage_bytes, file->memory_usage_bytes) << p.uid;
  }
  const int calls = batch->calls;
  ASSERT_TRUE(n.obs->observe(TimePoint(4s)));
  EXPECT_EQ(batch->calls, calls) << "a refused walk is not tried again";
}

TEST(DecisionView, TheBoundsComeFromTheBatch) {
  Node n(20);
  auto batch = std::make_shared<FakePageCounters>(n, 20);
  batch->value = [](int i, uint64_t) { return std::optional<uint64_t>(1000003ULL * static_cast<uint64_t>(i + 1)); };
  n.obs->set_page_counter_reader(batch);
  auto pods = pointers(n.snap);
  ASSERT_TRUE(n.obs->refresh_memory_usage(pods, TimePoint(2s)));
  for (const Pod& p : n.snap.pods) {
    const int i = std::stoi(p.uid.substr(p.uid.size() - 12));
    EXPECT_EQ(p.memory_usage_bytes, 1000003ULL * static_cast<uint64_t>(i + 1)) << p.uid;
  }
}

TEST(DecisionView, APodMissingFromTheBatchSendsToAFullObservation) {
  Node n(20);
  auto batch = std::make_shared<FakePageCounters>(n, 20);
  // Pod 5's cgroup id is not in the walk: removed, or recreated with a new id.
  batch->value = [](int i, uint64_t v) { return i == 5 ? std::nullopt : std::optional<uint64_t>(v); };
  n.obs->set_page_counter_reader(batch);
  auto pods = pointers(n.snap);
  auto r = n.obs->refresh_memory_usage(pods, TimePoint(2s));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ESTALE) << r.error().message;
}

TEST(DecisionView, AFailingBatchFallsBackToTheFilesForGood) {
  Node n(20);
  auto batch = std::make_shared<FakePageCounters>(n, 20);
  batch->fail = Error{EBADF, "attach the page-counter iterator: Bad file descriptor"};
  n.obs->set_page_counter_reader(batch);
  n.set(3, pod_memory(700, 5));
  auto pods = pointers(n.snap);
  ASSERT_TRUE(n.obs->refresh_memory_usage(pods, TimePoint(2s)));
  auto p3 = std::find_if(n.snap.pods.begin(), n.snap.pods.end(), [](const Pod& p) { return p.uid == pod_uid(3); });
  ASSERT_NE(p3, n.snap.pods.end());
  EXPECT_EQ(p3->memory_usage_bytes, 705 * MiB) << "read from the usage file";
  EXPECT_EQ(n.obs->counters().page_counter_batch.load(), 0u);
  EXPECT_EQ(n.obs->counters().page_counter_batches.load(), 0u);
  ASSERT_TRUE(n.obs->refresh_memory_usage(pods, TimePoint(3s)));
  EXPECT_EQ(batch->calls, 1) << "a failed batch is not tried before every decision";
}

// How each evaluation observed the node, as exported.
std::optional<double> evaluations(const Metrics& m, const char* observation = nullptr) {
  if (observation == nullptr) return testing::scraped(m, "pressured_evaluations_total");
  return testing::scraped(m, "pressured_evaluations_total", {{"observation", observation}});
}

struct DaemonRig {
  Metrics metrics{MetricsOptions{.node = "test"}};
  Node n{30};
  RecordingEvictor ev;
  std::unique_ptr<Daemon> d;
  PressureEvent e;
  explicit DaemonRig(double percent) {
    Config c;
    c.eviction = memory_threshold(percent);
    DaemonDeps deps;
    deps.observer = n.obs.get();
    deps.evictor = &ev;
    deps.metrics = &metrics;
    d = std::make_unique<Daemon>(c, deps);
    e.type = EventType::ThresholdUp;
  }
  void event(TimePoint t) { d->on_events(std::span<const PressureEvent>(&e, 1), t); }
};

TEST(DecisionView, DaemonReadsEveryPodOncePerFullObservationInterval) {
  DaemonRig r(1);  // never met: "nothing to do" decisions
  r.event(TimePoint(2s));  // nothing observed in full yet
  EXPECT_EQ(evaluations(r.metrics, "full"), 1u);
  EXPECT_EQ(evaluations(r.metrics, "partial"), 0u);
  r.event(TimePoint(2s + 100ms));
  r.event(TimePoint(2s + 200ms));
  EXPECT_EQ(evaluations(r.metrics, "partial"), 2u);
  // Safety-net ticks between full observations re-read what a decision uses, as events do.
  r.d->on_tick(TimePoint(2s + 300ms), true);
  r.d->on_tick(TimePoint(11s + 900ms), true);
  EXPECT_EQ(evaluations(r.metrics, "partial"), 4u);
  EXPECT_EQ(evaluations(r.metrics, "full"), 1u);
  r.d->on_tick(TimePoint(12s), true);  // events.fullObservationInterval (10 s default) after the last one
  EXPECT_EQ(evaluations(r.metrics, "full"), 2u);
  r.event(TimePoint(12s + 100ms));
  EXPECT_EQ(evaluations(r.metrics, "partial"), 5u);
  EXPECT_EQ(evaluations(r.metrics), 7u);
  EXPECT_TRUE(r.ev.calls().empty());
}

TEST(DecisionView, TheFullObservationIntervalIsConfigurable) {
  DaemonRig r(1);
  Config c;
  c.eviction = memory_threshold(1);
  c.events.full_observation_interval = 1s;
  DaemonDeps deps;
  deps.observer = r.n.obs.get();
  deps.evictor = &r.ev;
  Metrics metrics(MetricsOptions{.node = "test"});
  deps.metrics = &metrics;
  Daemon d(c, deps);
  d.on_tick(TimePoint(2s), true);
  d.on_tick(TimePoint(2s + 500ms), true);
  EXPECT_EQ(evaluations(metrics, "full"), 1u);
  EXPECT_EQ(evaluations(metrics, "partial"), 1u);
  d.on_tick(TimePoint(3s), true);
  EXPECT_EQ(evaluations(metrics, "full"), 2u);
}

TEST(DecisionView, DaemonEvictsTheFreshHeadIncrementally) {
  DaemonRig r(50);  // memory.available < 4 GiB of the fake node's 8
  r.d->on_tick(TimePoint(2s), true);
  // Pressure arrives with an event, and pod 5 has just grown the most.
  r.n.set(5, pod_memory(3000, 5));
  r.n.fake.set_root_memory(FakePodMemory{7ULL << 30, 6ULL << 30, 1ULL << 30, 512ULL << 20, 256ULL << 20});
  r.event(TimePoint(2s + 10ms));
  EXPECT_EQ(evaluations(r.metrics, "partial"), 1u);
  EXPECT_EQ(evaluations(r.metrics, "full"), 1u);
  ASSERT_FALSE(r.ev.calls().empty());
  EXPECT_EQ(r.ev.calls().front().target.uid, pod_uid(5));
}

TEST(DecisionView, DaemonObservesFullyWhenAPodAppearedUnderPressure) {
  DaemonRig r(50);
  r.d->on_tick(TimePoint(2s), true);
  // Quiet events need no pods: the new pod waits for the next full observation.
  r.n.fake.add_pod(pod_uid(77), QosClass::BestEffort, pod_memory(4000, 0));
  r.event(TimePoint(2s + 10ms));
  EXPECT_EQ(evaluations(r.metrics, "partial"), 1u);
  EXPECT_EQ(r.d->last_snapshot().pods.size(), 30u);
  // Under pressure the ranking needs every pod: the moved pod set forces a full read.
  r.n.fake.set_root_memory(FakePodMemory{7ULL << 30, 6ULL << 30, 1ULL << 30, 512ULL << 20, 256ULL << 20});
  r.event(TimePoint(2s + 20ms));
  EXPECT_EQ(evaluations(r.metrics, "full"), 2u);
  EXPECT_EQ(r.d->last_snapshot().pods.size(), 31u);
  ASSERT_FALSE(r.ev.calls().empty());
  EXPECT_EQ(r.ev.calls().front().target.uid, pod_uid(77));
}

}  // namespace
}  // namespace pressured
