// The daemon with relief and a fake memory.reclaim writer (no kernel): a
// hard memory candidate waits while reclaim runs and never past the budget,
// a writer that never answers does not hold the eviction, and a successful
// run that brings the node back avoids it. Time is synthetic.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "daemon/daemon.hpp"
#include "fakes/fake_observer.hpp"
#include "pressured/evictor.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
using testing::FakeObserver;
constexpr uint64_t kMiB = 1 << 20;

// Gives back what it is asked, by shrinking the pod's page cache in the
// fake observer; or blocks until released.
class FakeReclaim final : public ReclaimWriter {
 public:
  explicit FakeReclaim(FakeObserver& obs) : obs_(obs) {}
  std::atomic<bool> block{false};
  std::atomic<int> calls{0};
  std::atomic<int> yield_percent{100};  // of what is asked, given back
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  Result<uint64_t> reclaim(const std::string& path, uint64_t bytes) override {
    ++calls;
    std::unique_lock lk(mu);
    if (block) cv.wait_for(lk, 10s, [&] { return released; });
    for (auto& p : obs_.pods) {
      if (p.cgroup_path != path) continue;
      const uint64_t got = std::min(bytes / 100 * static_cast<uint64_t>(yield_percent.load()),
                                    p.usage.memory_active_file_bytes);
      p.usage.memory_active_file_bytes -= got;
      p.usage.memory_working_set_bytes -= got;
    }
    return bytes / 100 * static_cast<uint64_t>(yield_percent.load());
  }
  void release() {
    std::lock_guard lk(mu);
    released = true;
    cv.notify_all();
  }

 private:
  FakeObserver& obs_;
};

Config relief_config() {
  Config c;
  Threshold t;
  t.signal = Signal::AllocatableMemoryAvailable;
  t.kind = ThresholdKind::Hard;
  t.value = ThresholdValue{ThresholdValue::Kind::Quantity, 200.0 * kMiB, 0};
  c.eviction.thresholds = {t};
  c.eviction.pressure_transition_period = 0s;
  c.daemon.state_file = "/tmp/pressured-relief-daemon-" + std::to_string(::getpid()) + ".json";
  c.relief.hard_threshold_budget = 250ms;
  return c;
}

TimePoint at_ms(int ms) { return TimePoint(std::chrono::milliseconds(ms)); }

// 1 GiB allocatable, one pod with 900Mi working set of which 600Mi active cache: 124Mi available.
void cache_pod(FakeObserver& obs) {
  Pod& p = obs.add("cache", QosClass::BestEffort, 900 * kMiB);
  p.usage.memory_active_file_bytes = 600 * kMiB;
}

// What the daemon is given in these tests: the fake node, a recording evictor, the fake writer.
DaemonDeps relief_deps(FakeObserver& obs, RecordingEvictor& evictor, FakeReclaim& writer) {
  DaemonDeps deps;
  deps.observer = &obs;
  deps.evictor = &evictor;
  deps.reclaim = &writer;
  return deps;
}

// The daemon over cache_pod's node with the fake writer and a recording evictor.
struct CachePodDaemon {
  FakeObserver obs;
  FakeReclaim writer{obs};
  RecordingEvictor evictor;
  std::unique_ptr<Daemon> d;  // last: stopped before what it uses
  CachePodDaemon() {
    cache_pod(obs);
    d = std::make_unique<Daemon>(relief_config(), relief_deps(obs, evictor, writer));
  }
  ~CachePodDaemon() {
    d.reset();
    std::filesystem::remove(relief_config().daemon.state_file);  // its checkpoint: nothing left in /tmp
  }
};

TEST(ReliefDaemon, AHeldEvictionGoesAheadAtTheBudgetWhenReclaimDoesNotAnswer) {
  CachePodDaemon r;
  r.writer.block = true;
  Daemon& d = *r.d;
  d.evaluate(at_ms(1000), "test", std::nullopt);
  EXPECT_TRUE(r.evictor.calls().empty()) << "held for reclaim";
  EXPECT_TRUE(d.relief().running());
  d.evaluate(at_ms(1200), "test", std::nullopt);
  EXPECT_TRUE(r.evictor.calls().empty()) << "still within the 250ms budget";
  d.evaluate(at_ms(1250), "test", std::nullopt);
  ASSERT_FALSE(r.evictor.calls().empty()) << "the budget is over: evicted whatever the worker does";
  EXPECT_EQ(r.evictor.calls().front().step, "kill");
  r.writer.release();
}

// A soft threshold's run holds evictions for the soft grace period (90 s);
// a hard threshold met while its memory.reclaim write blocks is evicted at
// the end of the hard budget, and the daemon's deadline says when.
TEST(ReliefDaemon, AHardThresholdMetDuringASoftRunIsEvictedAtTheHardBudget) {
  Config c = relief_config();
  Threshold soft = c.eviction.thresholds.front();
  soft.kind = ThresholdKind::Soft;
  soft.value = ThresholdValue{ThresholdValue::Kind::Quantity, 300.0 * kMiB, 0};
  soft.grace_period = 90s;
  c.eviction.thresholds.push_back(soft);
  FakeObserver obs;
  Pod& p = obs.add("cache", QosClass::BestEffort, 750 * kMiB);  // 274Mi available: soft only
  p.usage.memory_active_file_bytes = 600 * kMiB;
  FakeReclaim writer(obs);
  writer.block = true;
  RecordingEvictor evictor;
  auto d = std::make_unique<Daemon>(c, relief_deps(obs, evictor, writer));
  d->evaluate(at_ms(1000), "test", std::nullopt);
  ASSERT_TRUE(d->relief().running()) << "the soft crossing started a run";
  ASSERT_EQ(d->relief().stage().running()->kind, ThresholdKind::Soft);

  obs.pods[0].usage.memory_working_set_bytes = 900 * kMiB;  // 124Mi available: hard met at 5 s
  d->evaluate(at_ms(5000), "test", std::nullopt);
  EXPECT_TRUE(evictor.calls().empty()) << "within the hard budget";
  ASSERT_TRUE(d->relief().deadline());
  EXPECT_EQ(*d->relief().deadline(), at_ms(5250)) << "the hard budget's end, not the soft grace end";
  d->evaluate(at_ms(5250), "test", std::nullopt);
  ASSERT_FALSE(evictor.calls().empty()) << "the hard threshold's candidate was held for the soft run";
  EXPECT_EQ(evictor.calls().front().step, "kill");
  EXPECT_TRUE(d->relief().running()) << "the soft run's write still blocks";
  writer.release();
  d.reset();
  std::filesystem::remove(c.daemon.state_file);
}

TEST(ReliefDaemon, ReclaimThatBringsTheNodeBackAvoidsTheEviction) {
  CachePodDaemon r;
  Daemon& d = *r.d;
  d.evaluate(at_ms(1000), "test", std::nullopt);
  EXPECT_TRUE(d.relief().running());
  // The worker answers on its thread; the next evaluations take it in (bounded).
  for (int i = 0; i < 500 && d.relief().stats().avoided.load() == 0; ++i) {
    std::this_thread::sleep_for(2ms);
    d.evaluate(at_ms(1001 + i / 100), "test", std::nullopt);
  }
  EXPECT_EQ(d.relief().stats().avoided.load(), 1u);
  EXPECT_GT(r.writer.calls.load(), 0);
  EXPECT_TRUE(r.evictor.calls().empty());
  d.evaluate(at_ms(2000), "test", std::nullopt);
  EXPECT_TRUE(r.evictor.calls().empty()) << "the node is back above the threshold";
}

// The back-off is in the checkpoint: a restarted daemon does not ask a cgroup
// that gave back little once more (a crash-looping daemon would otherwise ask
// it at every start), and its eviction goes ahead without a hold.
TEST(ReliefDaemon, ACgroupThatGaveBackLittleIsNotAskedAgainAfterARestart) {
  const Config config = relief_config();
  std::filesystem::remove(config.daemon.state_file);
  FakeObserver obs;
  cache_pod(obs);
  FakeReclaim writer(obs);
  writer.yield_percent = 5;
  {
    writer.block = true;
    RecordingEvictor evictor;
    Daemon d(config, relief_deps(obs, evictor, writer));
    d.evaluate(at_ms(1000), "test", std::nullopt);
    ASSERT_TRUE(d.relief().running());
    // Meanwhile the pod frees memory of its own: the node is back over the
    // threshold, so this daemon evicts nobody, but the run gave back 5%.
    obs.pods[0].usage.memory_working_set_bytes -= 200 * kMiB;
    writer.release();
    for (int i = 0; i < 500 && d.relief().stage().backoff().empty(); ++i) {
      std::this_thread::sleep_for(2ms);
      d.evaluate(at_ms(1001 + i / 100), "test", std::nullopt);
    }
    ASSERT_EQ(d.relief().stage().backoff().size(), 1u) << "5% < lowYieldPercent 25";
    EXPECT_TRUE(evictor.calls().empty());
  }
  const int asked = writer.calls.load();
  obs.pods[0].usage.memory_working_set_bytes += 200 * kMiB;  // short again
  RecordingEvictor evictor;
  Daemon d(config, relief_deps(obs, evictor, writer));
  d.restore_checkpoint();
  EXPECT_EQ(d.relief().stage().backoff().size(), 1u);
  EXPECT_EQ(d.relief().stats().backoff_cgroups.load(), 1u);
  d.evaluate(at_ms(5000), "test", std::nullopt);
  EXPECT_FALSE(d.relief().running());
  EXPECT_EQ(writer.calls.load(), asked) << "not asked again within its back-off";
  ASSERT_FALSE(evictor.calls().empty()) << "evicted without waiting for reclaim";
  EXPECT_EQ(evictor.calls().front().step, "kill");
  std::filesystem::remove(config.daemon.state_file);
}

TEST(ReliefDaemon, WithoutAWriterTheStageIsOffAndSaysSo) {
  FakeObserver obs;
  cache_pod(obs);
  RecordingEvictor evictor;
  DaemonDeps deps;
  deps.observer = &obs;
  deps.evictor = &evictor;
  deps.reclaim_unavailable = "cgroup v1";
  Daemon d(relief_config(), deps);
  EXPECT_EQ(d.relief().stats().available.load(), 0u);
  d.evaluate(at_ms(1000), "test", std::nullopt);
  EXPECT_FALSE(evictor.calls().empty()) << "evicted at once, as without relief";
  std::filesystem::remove(relief_config().daemon.state_file);
}

}  // namespace
}  // namespace pressured
