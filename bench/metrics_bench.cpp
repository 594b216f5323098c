// Cost of recording on the reactor's path, where every microsecond delays the
// next event: counting an event (the reactor's own atomics, exported at
// scrape time), the Metrics methods the daemon calls per evaluation, and a
// full /metrics render.
//   ninja -C build/metrics-bpf bench_metrics && build/metrics-bpf/bench/bench_metrics

#include <benchmark/benchmark.h>

#include "pressured/events.hpp"
#include "pressured/metrics.hpp"

namespace {

pressured::MetricsOptions opts() {
  pressured::MetricsOptions o;
  o.node = "bench";
  return o;
}

// What the reactor does per event for pressured_events_total.
void BM_EventCounted(benchmark::State& state) {
  pressured::EventStats s;
  for (auto _ : state) s.count_event(pressured::EventSource::Bpf, pressured::EventType::ThresholdUp);
  benchmark::DoNotOptimize(s.events[0][1].load());
}
BENCHMARK(BM_EventCounted);

void BM_DetectionLatency(benchmark::State& state) {
  pressured::Metrics m(opts());
  for (auto _ : state) m.observe(pressured::stats::kDetectionLatency, {"bpf"}, 2.5e-5);
}
BENCHMARK(BM_DetectionLatency);

// What Daemon::evaluate records per evaluation: every signal, three conditions.
void BM_PerEvaluation(benchmark::State& state) {
  pressured::Metrics m(opts());
  for (auto _ : state) {
    for (std::size_t i = 0; i < pressured::kSignalCount; ++i) {
      m.signal_observed(static_cast<pressured::Signal>(i), 1e9, 8e9);
    }
    for (std::size_t i = 0; i < pressured::kConditionCount; ++i) {
      m.condition(static_cast<pressured::Condition>(i), false);
    }
    m.observation_completed();
  }
}
BENCHMARK(BM_PerEvaluation);

void BM_UpdatePods(benchmark::State& state) {
  pressured::Metrics m(opts());
  std::vector<pressured::PodMemorySample> pods(static_cast<std::size_t>(state.range(0)));
  for (std::size_t i = 0; i < pods.size(); ++i) {
    pods[i].uid = "uid-" + std::to_string(i);
    pods[i].pod = "pod-" + std::to_string(i);
    pods[i].namespace_ = "ns";
    pods[i].memory_request_bytes = 1e8;
  }
  uint64_t round = 0;
  for (auto _ : state) {
    ++round;
    for (std::size_t i = 0; i < pods.size(); ++i) pods[i].working_set_bytes = static_cast<double>((i * 7919 + round * 104729) % 1000003);
    m.update_pods(pods);
  }
}
BENCHMARK(BM_UpdatePods)->Arg(110)->Arg(500);

void BM_Render(benchmark::State& state) {
  pressured::Metrics m(opts());
  for (std::size_t i = 0; i < pressured::kSignalCount; ++i) m.signal_observed(static_cast<pressured::Signal>(i), 1, 2);
  m.observe(pressured::stats::kDetectionLatency, {"bpf"}, 1e-4);
  m.observe(pressured::stats::kDetectionLatency, {"psi"}, 1e-3);
  std::vector<pressured::PodMemorySample> pods(20);
  for (std::size_t i = 0; i < pods.size(); ++i) {
    pods[i].uid = "uid-" + std::to_string(i);
    pods[i].working_set_bytes = static_cast<double>(i);
    pods[i].memory_request_bytes = 1;
  }
  m.update_pods(pods);
  for (auto _ : state) benchmark::DoNotOptimize(m.render());
}
BENCHMARK(BM_Render);

}  // namespace

BENCHMARK_MAIN();
