// Cost of observation, which every event pays before a decision: a full
// observation (all signals + every pod) for 10, 110 and 1000 pod cgroups on a
// fake tree, one pod refresh, and a fresh memory.available plus one pod
// refresh (the per-event cost). The
// *_Host benchmarks read this machine's real cgroup files (read-only).
//
// ninja -C build/observe-release bench_observe && build/observe-release/bench/bench_observe
#include <benchmark/benchmark.h>

#include "../tests/fakes/fake_node.hpp"
#include "kernel/hot_file.hpp"
#include "pressured/observer.hpp"

namespace {

using namespace pressured;
using pressured::testing::FakeNode;
using pressured::testing::FakePodMemory;

constexpr uint64_t MiB = 1ULL << 20;

std::unique_ptr<FakeNode> make_node(CgroupVersion v, int pods) {
  auto node = std::make_unique<FakeNode>(v, CgroupDriver::Cgroupfs);
  for (int i = 0; i < pods; ++i) {
    char uid[64];
    std::snprintf(uid, sizeof uid, "0aa1b2c3-0000-4000-8000-%012d", i);
    QosClass q = i % 3 == 0 ? QosClass::Guaranteed : i % 3 == 1 ? QosClass::Burstable : QosClass::BestEffort;
    FakePodMemory m{static_cast<uint64_t>(i + 1) * MiB, static_cast<uint64_t>(i + 1) * MiB / 2,
                    static_cast<uint64_t>(i + 1) * MiB / 2, MiB / 4, MiB / 8};
    m.pids = 3;
    node->add_pod(uid, q, m);
  }
  return node;
}

void full_observation(benchmark::State& state, CgroupVersion v) {
  auto node = make_node(v, static_cast<int>(state.range(0)));
  auto obs = make_node_observer(node->config());
  if (!obs) {
    state.SkipWithError(obs.error().message.c_str());
    return;
  }
  TimePoint now{};
  for (auto _ : state) {
    auto snap = (*obs)->observe(now);
    if (!snap || snap->pods.size() != static_cast<std::size_t>(state.range(0))) state.SkipWithError("bad snapshot");
    benchmark::DoNotOptimize(snap);
  }
  state.counters["pods"] = static_cast<double>(state.range(0));
}

void BM_FullObservation_V1(benchmark::State& s) { full_observation(s, CgroupVersion::V1); }
void BM_FullObservation_V2(benchmark::State& s) { full_observation(s, CgroupVersion::V2); }
BENCHMARK(BM_FullObservation_V1)->Arg(10)->Arg(110)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FullObservation_V2)->Arg(10)->Arg(110)->Arg(1000)->Unit(benchmark::kMicrosecond);

void pod_refresh(benchmark::State& state, CgroupVersion v, bool with_memory_available) {
  auto node = make_node(v, 110);
  auto obs = make_node_observer(node->config());
  if (!obs) {
    state.SkipWithError(obs.error().message.c_str());
    return;
  }
  auto snap = (*obs)->observe(TimePoint{});
  if (!snap || snap->pods.empty()) {
    state.SkipWithError("no pods");
    return;
  }
  Pod pod = snap->pods[snap->pods.size() / 2];
  for (auto _ : state) {
    if (with_memory_available) {
      auto m = (*obs)->refresh_signal(Signal::MemoryAvailable, TimePoint{});
      benchmark::DoNotOptimize(m);
    }
    auto r = (*obs)->refresh_pod(pod, TimePoint{});
    if (!r) state.SkipWithError(r.error().message.c_str());
  }
}

void BM_SinglePodRefresh_V1(benchmark::State& s) { pod_refresh(s, CgroupVersion::V1, false); }
void BM_SinglePodRefresh_V2(benchmark::State& s) { pod_refresh(s, CgroupVersion::V2, false); }
void BM_FreshMemoryAvailablePlusPodRefresh_V1(benchmark::State& s) { pod_refresh(s, CgroupVersion::V1, true); }
void BM_FreshMemoryAvailablePlusPodRefresh_V2(benchmark::State& s) { pod_refresh(s, CgroupVersion::V2, true); }
BENCHMARK(BM_SinglePodRefresh_V1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SinglePodRefresh_V2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FreshMemoryAvailablePlusPodRefresh_V1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FreshMemoryAvailablePlusPodRefresh_V2)->Unit(benchmark::kMicrosecond);

// This machine's real root memcg (v1, hybrid): the kernel's own cost of
// generating memory.stat / usage_in_bytes is included. Read-only.
void BM_FreshMemoryAvailable_Host(benchmark::State& state) {
  ObserveConfig c;  // real /sys/fs/cgroup and /proc
  auto obs = make_node_observer(c);
  if (!obs) {
    state.SkipWithError(obs.error().message.c_str());
    return;
  }
  for (auto _ : state) {
    auto m = (*obs)->refresh_signal(Signal::MemoryAvailable, TimePoint{});
    if (!m) state.SkipWithError(m.error().message.c_str());
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_FreshMemoryAvailable_Host)->Unit(benchmark::kMicrosecond);

void BM_FullObservation_Host(benchmark::State& state) {
  ObserveConfig c;
  auto obs = make_node_observer(c);
  if (!obs) {
    state.SkipWithError(obs.error().message.c_str());
    return;
  }
  for (auto _ : state) {
    auto s = (*obs)->observe(TimePoint{});
    benchmark::DoNotOptimize(s);
  }
}
BENCHMARK(BM_FullObservation_Host)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  // As pressured's main does: a 1000-pod tree keeps thousands of files open.
  pressured::kernel::HotFile::size_for_process();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
