// Engine benchmarks: one Engine::evaluate() with N pods (10, 110, 1000, 5000).
// Results and the command that produced them: docs/engine.md.
//
//   BM_EvaluateEvicting   memory.available below a hard threshold: every
//                         threshold evaluated, the victim selected among all
//                         pods, an eviction returned (then pod_gone() so the
//                         next iteration sees the same pod set).
//   BM_EvaluateTerminating  same, with 8 pods already terminating.
//   BM_EvaluateQuiet      no threshold met: the common case between events.
//   BM_RankPods           the full ranking (what `top` shows), for comparison.
//   BM_EvaluateQuietLocalStorage  no threshold met, every pod walked with
//                         two containers and an emptyDir under their limits:
//                         the local ephemeral-storage check alone (second
//                         argument 1: LocalStorageCapacityIsolation on, 0: off).
#include <benchmark/benchmark.h>

#include <random>

#include "pressured/engine.hpp"

namespace pressured {
namespace {

constexpr double kMi = 1024.0 * 1024;
constexpr double kGi = 1024 * kMi;

EvictionConfig bench_config() {
  EvictionConfig c;
  auto add = [&](Signal s, ThresholdKind k, ThresholdValue v, Duration grace = Duration(0)) {
    Threshold t;
    t.signal = s;
    t.kind = k;
    t.value = v;
    t.grace_period = grace;
    c.thresholds.push_back(t);
  };
  auto q = [](double v) { return ThresholdValue{ThresholdValue::Kind::Quantity, v, 0}; };
  auto p = [](double v) { return ThresholdValue{ThresholdValue::Kind::Percent, 0, v}; };
  // The kubelet defaults, a soft memory threshold, PSI and PID: 9 thresholds.
  add(Signal::MemoryAvailable, ThresholdKind::Hard, q(100 * kMi));
  add(Signal::NodefsAvailable, ThresholdKind::Hard, p(10));
  add(Signal::NodefsInodesFree, ThresholdKind::Hard, p(5));
  add(Signal::ImagefsAvailable, ThresholdKind::Hard, p(15));
  add(Signal::ImagefsInodesFree, ThresholdKind::Hard, p(5));
  add(Signal::PidAvailable, ThresholdKind::Hard, p(5));
  add(Signal::MemoryPressureFullAvg10, ThresholdKind::Hard, q(40));
  add(Signal::MemoryAvailable, ThresholdKind::Soft, q(kGi), std::chrono::seconds(90));
  add(Signal::MemoryPressureSomeAvg10, ThresholdKind::Soft, q(20), std::chrono::seconds(30));
  return c;
}

NodeSnapshot bench_snapshot(int pods, bool pressure) {
  std::mt19937_64 rng(1234);
  NodeSnapshot s;
  auto set = [&](Signal sig, double value, double capacity) {
    s.signal(sig) = SignalObservation{value, capacity, {}, false};
  };
  set(Signal::MemoryAvailable, pressure ? 50 * kMi : 8 * kGi, 64 * kGi);
  set(Signal::NodefsAvailable, 400 * kGi, 500 * kGi);
  set(Signal::NodefsInodesFree, 30e6, 32e6);
  set(Signal::ImagefsAvailable, 400 * kGi, 500 * kGi);
  set(Signal::ImagefsInodesFree, 30e6, 32e6);
  set(Signal::PidAvailable, 4e6, 4194304);
  set(Signal::MemoryPressureFullAvg10, pressure ? 12 : 0, 100);
  set(Signal::MemoryPressureSomeAvg10, pressure ? 35 : 0, 100);
  for (int i = 0; i < pods; ++i) {
    Pod p;
    p.uid = "8f14e45f-ceea-467f-a0d1-" + std::to_string(100000000000 + rng() % 900000000000);
    p.name = "pod-" + std::to_string(i);
    p.namespace_ = "ns-" + std::to_string(i % 17);
    p.qos = static_cast<QosClass>(rng() % 3);
    p.priority = static_cast<int32_t>(rng() % 3) * 1000;
    p.critical = rng() % 50 == 0;
    p.daemonset = rng() % 20 == 0;
    p.requests.memory_bytes = p.qos == QosClass::BestEffort ? 0 : (rng() % 2048) * kMi;
    p.usage.memory_working_set_bytes = (rng() % 3000) * kMi;
    p.usage.ephemeral_storage_bytes = (rng() % 4096) * kMi;
    p.usage.inodes = rng() % 100000;
    p.usage.pids = rng() % 500;
    p.metadata_known = true;
    s.pods.push_back(std::move(p));
  }
  return s;
}

void BM_EvaluateEvicting(benchmark::State& state) {
  const NodeSnapshot snap = bench_snapshot(static_cast<int>(state.range(0)), true);
  Engine engine(bench_config());
  TimePoint now{};
  for (auto _ : state) {
    Decisions d = engine.evaluate(snap, now);  // commits nothing: the same victim every time
    if (!d.eviction) state.SkipWithError("expected an eviction");
    benchmark::DoNotOptimize(d);
    now += std::chrono::milliseconds(1);
  }
}
BENCHMARK(BM_EvaluateEvicting)->Arg(10)->Arg(110)->Arg(1000)->Arg(5000);

void BM_EvaluateTerminating(benchmark::State& state) {
  const NodeSnapshot snap = bench_snapshot(static_cast<int>(state.range(0)), true);
  Engine engine(bench_config());
  TimePoint now{};
  std::vector<std::string> terminating;  // 8 victims left out of ranking, as the policy passes them
  for (int i = 0; i < 8; ++i) terminating.push_back(engine.evaluate(snap, now, terminating).eviction->uid);
  for (auto _ : state) {
    Decisions d = engine.evaluate(snap, now, terminating);
    if (!d.eviction) state.SkipWithError("expected an eviction");
    benchmark::DoNotOptimize(d);
    now += std::chrono::milliseconds(1);
  }
}
BENCHMARK(BM_EvaluateTerminating)->Arg(10)->Arg(110)->Arg(1000)->Arg(5000);

void BM_EvaluateQuiet(benchmark::State& state) {
  const NodeSnapshot snap = bench_snapshot(static_cast<int>(state.range(0)), false);
  Engine engine(bench_config());
  TimePoint now{};
  for (auto _ : state) {
    Decisions d = engine.evaluate(snap, now);
    benchmark::DoNotOptimize(d);
    now += std::chrono::milliseconds(1);
  }
}
BENCHMARK(BM_EvaluateQuiet)->Arg(10)->Arg(110)->Arg(1000)->Arg(5000);

void BM_EvaluateQuietLocalStorage(benchmark::State& state) {
  NodeSnapshot snap = bench_snapshot(static_cast<int>(state.range(0)), false);
  for (auto& p : snap.pods) {
    // Every rule checked, none met: the most work a pod within its limits costs.
    const uint64_t used = p.usage.ephemeral_storage_bytes;
    p.local_storage.empty_dirs = {{"cache", used + 1}};
    p.local_storage.containers = {{"app", "c-app-" + p.name, used + 1}, {"sidecar", "c-side-" + p.name, used + 1}};
    p.local_storage.pod_limit_bytes = 2 * used + 2;
    EphemeralStorageBreakdown b;
    b.empty_dir_volumes = {{"cache", used / 2, 1}};
    b.container_logs = {{"app", used / 4, 1}, {"sidecar", used / 8, 1}};
    b.container_layers = {{"c-app-" + p.name, used / 8, 1}, {"c-side-" + p.name, 0, 1}};
    p.ephemeral_storage = std::move(b);
  }
  EvictionConfig config = bench_config();
  config.local_storage_capacity_isolation = state.range(1) != 0;
  Engine engine(config);
  TimePoint now{};
  for (auto _ : state) {
    Decisions d = engine.evaluate(snap, now);
    if (!d.candidates.empty()) state.SkipWithError("expected no candidate");
    benchmark::DoNotOptimize(d);
    now += std::chrono::milliseconds(1);
  }
}
BENCHMARK(BM_EvaluateQuietLocalStorage)->ArgsProduct({{10, 110, 1000, 5000}, {0, 1}});

void BM_RankPods(benchmark::State& state) {
  const NodeSnapshot snap = bench_snapshot(static_cast<int>(state.range(0)), true);
  const EvictionConfig config = bench_config();
  for (auto _ : state) {
    auto ranked = rank_pods(snap.pods, StarvedResource::Memory, config);
    benchmark::DoNotOptimize(ranked);
  }
}
BENCHMARK(BM_RankPods)->Arg(10)->Arg(110)->Arg(1000)->Arg(5000);

}  // namespace
}  // namespace pressured

BENCHMARK_MAIN();
