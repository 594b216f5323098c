// Counted work of a decision and of an idle second, for the budget check
// (bench/work_budgets.py, docs/performance.md "Work budgets"). Not a timer:
// every quantity it exposes is a count that does not depend on the machine's
// load, so a CTest entry can hold it to a committed budget.
//
// One scenario a run, on a fake node in a temp dir (tests/fakes/fake_node.hpp:
// fixed pod fixtures, the kernel's file formats, no root), with a PodList
// file as the pod source (a third each Guaranteed, Burstable, BestEffort):
//   decision-quiet     Daemon::on_events for one BPF threshold edge, no
//                      threshold met: the whole handler (partial refresh,
//                      engine, policy, metrics, re-arm, checkpoint check).
//   decision-pressure  refresh_for_decision + Engine::evaluate with a
//                      memory.available threshold met: the victim chosen on
//                      fresh reads (one usage file per contender: a fake
//                      tree has no cgroup iterator).
//   idle               Daemon::on_tick (the safety net) once a second of a
//                      simulated clock, over one events.fullObservationInterval
//                      (10 s: nine partial refreshes and one full
//                      observation); one "idle second" is a tenth of it.
//   oom-walk           read_oom_kills of the kubepods tree (every memcg's
//                      OOM kill counter and limit evidence): what a full
//                      observation does at start and after each OOM kill on
//                      the node.
//   pods-refresh       PodMetadataSource::refresh of the PodList file, not
//                      changed since the last: what the source's own thread
//                      does every pods.refreshInterval on a quiet node (read,
//                      compare, keep the map).
//
// What it measures itself: heap allocations (malloc and friends, counted
// below). What the driver measures around it: instructions (callgrind; the
// measured loop starts and stops valgrind's instrumentation) and system calls
// and file reads (strace; the loop is bracketed by two marker access() calls
// the driver looks for). It prints one line:
//   scenario=<name> pods=<n> iterations=<k> allocations=<total over k>
//
//   work_counts --scenario decision-pressure --pods 1000 --iterations 20 [--pause]
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <valgrind/callgrind.h>

#include "daemon/daemon.hpp"
#include "daemon/decision_view.hpp"
#include "fakes/fake_node.hpp"
#include "node/oom_kills.hpp"
#include "pressured/engine.hpp"
#include "pressured/evictor.hpp"
#include "pressured/metrics.hpp"
#include "pressured/observer.hpp"

// ---- heap allocations --------------------------------------------------------
// The executable's malloc interposes every library's (glibc documents
// replacing malloc this way); each forwards to glibc's own. Only counted
// while `g_counting` is set: the measured loop.
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);
}

namespace {
std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocations{0};
inline void count_one() {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* malloc(size_t n) {
  count_one();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t m) {
  count_one();
  return __libc_calloc(n, m);
}
void* realloc(void* p, size_t n) {
  count_one();
  return __libc_realloc(p, n);
}
void free(void* p) { __libc_free(p); }
void* memalign(size_t a, size_t n) {
  count_one();
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
  count_one();
  return __libc_memalign(a, n);
}
int posix_memalign(void** out, size_t a, size_t n) {
  count_one();
  void* p = __libc_memalign(a, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
}

namespace {

using namespace pressured;
using pressured::testing::FakeNode;
using pressured::testing::FakePodMemory;

constexpr uint64_t MiB = 1ULL << 20;
constexpr const char* kOomControl = "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n";

std::string uid_of(int i) {
  char uid[64];
  std::snprintf(uid, sizeof uid, "0cc1b2c3-0000-4000-8000-%012d", i);
  return uid;
}

QosClass qos_of(int i) { return i % 3 == 0 ? QosClass::Guaranteed : i % 3 == 1 ? QosClass::Burstable : QosClass::BestEffort; }

// The pod fixture: N pods with working sets of 1..N MiB and 64 MiB of page
// cache each (48 of it inactive), and the PodList naming them with the
// requests bench/idle_report.py gives them and five labels each; every memcg with its OOM kill
// counter and the node's count in /proc/vmstat.
std::string make_pods(FakeNode& node, int pods) {
  for (const char* tier : {"", "/burstable", "/besteffort"}) {
    pressured::testing::write_text(node.kubepods() + tier + "/memory.oom_control", kOomControl);
  }
  pressured::testing::write_text(node.root() + "/proc/vmstat", "nr_free_pages 1048576\noom_kill 0\n");
  std::string json = R"({"apiVersion":"v1","kind":"PodList","items":[)";
  for (int i = 0; i < pods; ++i) {
    const QosClass q = qos_of(i);
    FakePodMemory m{static_cast<uint64_t>(i + 1) * MiB + 64 * MiB, static_cast<uint64_t>(i + 1) * MiB, 64 * MiB,
                    48 * MiB, 16 * MiB};
    m.pids = 3;
    const std::string dir = node.add_pod(uid_of(i), q, m);
    // The OOM kill counters each full observation reconciles with (v1).
    pressured::testing::write_text(dir + "/memory.oom_control", kOomControl);
    pressured::testing::write_text(dir + "/abc123/memory.oom_control", kOomControl);
    const char* res = q == QosClass::BestEffort ? "{}"
                      : q == QosClass::Burstable ? R"({"requests":{"memory":"32Mi"}})"
                                                 : R"({"requests":{"memory":"32Mi","cpu":"10m"},"limits":{"memory":"32Mi","cpu":"10m"}})";
    // Five labels, as a Deployment's pod carries: the snapshot shares the
    // source's copy, so they cost a full observation no allocation.
    const std::string labels = fmt::format(
        R"({{"app":"svc-{0}","app.kubernetes.io/instance":"release-{0}","app.kubernetes.io/name":"svc-{0}",)"
        R"("pod-template-hash":"7d9f8c6b5{1}","tier":"{2}"}})",
        i % 40, i % 10, i % 5 == 0 ? "db" : "web");
    json += std::string(i ? "," : "") + R"({"metadata":{"name":"p)" + std::to_string(i) +
            R"(","namespace":"bench","uid":")" + uid_of(i) + R"(","labels":)" + labels +
            R"(},"spec":{"terminationGracePeriodSeconds":1,"containers":[{"name":"c","resources":)" + res +
            R"(}]},"status":{"phase":"Running","qosClass":")" + std::string(name(q)) + R"("}})";
  }
  json += "]}";
  const std::string path = node.root() + "/pods.json";
  pressured::testing::write_text(path, json);
  return path;
}

Threshold memory_threshold(bool met) {
  Threshold t;
  t.signal = Signal::MemoryAvailable;
  t.kind = ThresholdKind::Hard;
  t.value.kind = ThresholdValue::Kind::Percent;
  t.value.percent = met ? 99.9 : 0.1;  // met on any node / never met
  return t;
}

// --pause: the driver attaches strace only around the measured section (a
// trace of the set-up, ~100 000 calls for 1000 pods, would take longer than
// everything else): "ready" before it, "measured" after it, each time
// waiting for a line on stdin.
bool g_pause = false;
void pause_for_driver(const char* what) {
  if (!g_pause) return;
  std::printf("%s\n", what);
  std::fflush(stdout);
  char line[64];
  if (std::fgets(line, sizeof line, stdin) == nullptr) std::exit(3);  // the driver is gone
}

// The measured section: counted by this process (allocations), by
// callgrind (instructions) and by strace between the two markers.
template <typename F>
uint64_t measured(F&& body) {
  pause_for_driver("ready");
  (void)::access("/pressured-work-counts/begin", F_OK);
  g_allocations = 0;
  g_counting = true;
  CALLGRIND_START_INSTRUMENTATION;
  body();
  CALLGRIND_STOP_INSTRUMENTATION;
  g_counting = false;
  (void)::access("/pressured-work-counts/end", F_OK);
  const uint64_t n = g_allocations.load();
  pause_for_driver("measured");
  return n;
}

struct Setup {
  std::unique_ptr<FakeNode> node;
  std::shared_ptr<PodMetadataSource> source;
  std::unique_ptr<NodeObserver> observer;
};

int setup(Setup& s, int pods) {
  s.node = std::make_unique<FakeNode>(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  PodSourceConfig pc;
  pc.kind = PodSourceKind::File;
  pc.path = make_pods(*s.node, pods);
  // Labels kept, as with plugins on: the counts cover the heavier case (a
  // daemon without plugins drops them at the parse).
  pc.keep_labels = true;
  auto src = make_pod_metadata_source(pc);
  if (!src) {
    std::fprintf(stderr, "work_counts: pod source: %s\n", src.error().message.c_str());
    return 1;
  }
  s.source = std::move(*src);
  if (auto r = s.source->refresh(); !r) {  // once, here: its thread is not started
    std::fprintf(stderr, "work_counts: pod file: %s\n", r.error().message.c_str());
    return 1;
  }
  auto obs = make_node_observer(s.node->config(), s.source);
  if (!obs) {
    std::fprintf(stderr, "work_counts: observer: %s\n", obs.error().message.c_str());
    return 1;
  }
  s.observer = std::move(*obs);
  return 0;
}

Config daemon_config(bool met, const std::string& state_file) {
  Config c;
  c.eviction.thresholds.push_back(memory_threshold(met));
  c.daemon.state_file = state_file;
  return c;
}

int decision_pressure(Setup& s, int iterations, uint64_t& allocations) {
  EvictionConfig ec;
  ec.thresholds.push_back(memory_threshold(true));
  Engine engine(ec);
  TimePoint now = MonotonicClock().now();
  auto base = s.observer->observe(now);
  if (!base) {
    std::fprintf(stderr, "work_counts: observation: %s\n", base.error().message.c_str());
    return 1;
  }
  NodeSnapshot snap = *base;
  std::string error;
  int victims = 0;
  auto one = [&] {
    now += std::chrono::milliseconds(1);
    auto r = refresh_for_decision(*s.observer, snap, ec, {}, now);
    if (!r) {
      error = r.error().message;
      return;
    }
    Decisions d = engine.evaluate(snap, now);
    if (d.eviction) ++victims;
  };
  one();  // warm: the first decision reopens nothing, but its buffers grow
  allocations = measured([&] {
    for (int i = 0; i < iterations && error.empty(); ++i) one();
  });
  if (!error.empty() || victims != iterations + 1) {
    std::fprintf(stderr, "work_counts: the decision under pressure did not choose a victim each time: %s\n",
                 error.empty() ? "no victim" : error.c_str());
    return 1;
  }
  return 0;
}

// The daemon for the quiet and idle scenarios: the fixture's observer, a
// metrics registry, a recording evictor, a threshold that is not met.
struct QuietDaemon {
  explicit QuietDaemon(Setup& s)
      : config(daemon_config(false, s.node->root() + "/state.json")),
        metrics(MetricsOptions::from_config(config)),
        daemon(config, deps(s)) {}
  DaemonDeps deps(Setup& s) {
    DaemonDeps d;
    d.observer = s.observer.get();
    d.evictor = &evictor;
    d.metrics = &metrics;
    return d;
  }
  Config config;
  Metrics metrics;
  RecordingEvictor evictor;
  Daemon daemon;
};

int decision_quiet(Setup& s, int iterations, uint64_t& allocations) {
  QuietDaemon q(s);
  Daemon& daemon = q.daemon;
  RecordingEvictor& evictor = q.evictor;
  TimePoint now = MonotonicClock().now();
  daemon.on_tick(now, true);  // the safety net's full observation
  PressureEvent ev;
  ev.source = EventSource::Bpf;
  ev.type = EventType::ThresholdUp;
  auto one = [&] {
    now += std::chrono::milliseconds(1);
    daemon.on_events(std::span<const PressureEvent>(&ev, 1), now);
  };
  one();
  const uint64_t full_before = daemon.stats().full_observations.load();
  allocations = measured([&] {
    for (int i = 0; i < iterations; ++i) one();
  });
  if (daemon.stats().full_observations.load() != full_before || !evictor.calls().empty()) {
    std::fprintf(stderr, "work_counts: a quiet decision took a full observation or evicted\n");
    return 1;
  }
  return 0;
}

// One events.fullObservationInterval of safety-net ticks, 1 s apart.
int idle(Setup& s, int seconds, uint64_t& allocations) {
  QuietDaemon q(s);
  Daemon& daemon = q.daemon;
  RecordingEvictor& evictor = q.evictor;
  const auto interval = q.config.events.effective_full_observation_interval();
  TimePoint now = MonotonicClock().now();
  auto tick = [&] {
    daemon.on_tick(now, true);
    now += std::chrono::seconds(1);
  };
  const int per_interval = static_cast<int>(std::chrono::duration_cast<std::chrono::seconds>(interval).count());
  for (int i = 0; i <= per_interval; ++i) tick();  // start, and one interval to settle
  const uint64_t full_before = daemon.stats().full_observations.load();
  allocations = measured([&] {
    for (int i = 0; i < seconds; ++i) tick();
  });
  const uint64_t fulls = daemon.stats().full_observations.load() - full_before;
  if (fulls * static_cast<uint64_t>(per_interval) != static_cast<uint64_t>(seconds) || !evictor.calls().empty()) {
    std::fprintf(stderr, "work_counts: %d idle seconds took %llu full observations (expected one per %d s)\n", seconds,
                 static_cast<unsigned long long>(fulls), per_interval);
    return 1;
  }
  return 0;
}

// Walks of the tree's OOM kill counters: every memcg must be read each time.
int oom_walk(Setup& s, int pods, int iterations, uint64_t& allocations) {
  const std::string kubepods = s.observer->layout().kubepods_memory_path;
  std::size_t memcgs = 0;
  bool failed = false;
  allocations = measured([&] {
    for (int i = 0; i < iterations && !failed; ++i) {
      auto r = node::read_oom_kills(kubepods, false);
      if (!r) failed = true;
      else memcgs = r->size();
    }
  });
  // kubepods, its two tiers, and each pod with its container.
  const std::size_t expected = 3 + 2 * static_cast<std::size_t>(pods);
  if (failed || memcgs != expected) {
    std::fprintf(stderr, "work_counts: the OOM kill walk read %zu memcgs of %zu%s\n", memcgs, expected,
                 failed ? " (it failed)" : "");
    return 1;
  }
  return 0;
}

// Refreshes of the pod source whose file did not change: each must be
// counted unchanged (not parsed again), or the scenario measures the parse.
int pods_refresh(Setup& s, int iterations, uint64_t& allocations) {
  const uint64_t unchanged_before = s.source->stats().unchanged_refreshes;
  std::string error;
  allocations = measured([&] {
    for (int i = 0; i < iterations && error.empty(); ++i) {
      if (auto r = s.source->refresh(); !r) error = r.error().message;
    }
  });
  const uint64_t unchanged = s.source->stats().unchanged_refreshes - unchanged_before;
  if (!error.empty() || unchanged != static_cast<uint64_t>(iterations)) {
    std::fprintf(stderr, "work_counts: %d refreshes of an unchanged pod file: %llu kept the map%s%s\n", iterations,
                 static_cast<unsigned long long>(unchanged), error.empty() ? "" : ": ", error.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenario;
  int pods = 110;
  int iterations = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--pause") {
      g_pause = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "work_counts: %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--scenario") {
      scenario = v;
    } else if (a == "--pods") {
      pods = std::atoi(v.c_str());
    } else if (a == "--iterations") {
      iterations = std::atoi(v.c_str());
    } else {
      std::fprintf(stderr, "usage: work_counts --scenario decision-quiet|decision-pressure|idle|oom-walk|pods-refresh [--pods N] [--iterations K] "
                           "[--pause]\n");
      return 2;
    }
  }
  if (pods < 1 || pods > 5000 || iterations < 1 || iterations > 1000) {
    std::fprintf(stderr, "work_counts: --pods must be in 1..5000 and --iterations in 1..1000\n");
    return 2;
  }
  if (scenario == "idle" && iterations % 10 != 0) {
    std::fprintf(stderr, "work_counts: idle --iterations must be whole full-observation intervals (a multiple of 10 s)\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  Setup s;
  if (int r = setup(s, pods); r != 0) return r;
  uint64_t allocations = 0;
  int rc = 2;
  if (scenario == "decision-pressure") {
    rc = decision_pressure(s, iterations, allocations);
  } else if (scenario == "decision-quiet") {
    rc = decision_quiet(s, iterations, allocations);
  } else if (scenario == "idle") {
    rc = idle(s, iterations, allocations);
  } else if (scenario == "oom-walk") {
    rc = oom_walk(s, pods, iterations, allocations);
  } else if (scenario == "pods-refresh") {
    rc = pods_refresh(s, iterations, allocations);
  } else {
    std::fprintf(stderr, "work_counts: unknown scenario '%s'\n", scenario.c_str());
  }
  if (rc != 0) return rc;
  std::printf("scenario=%s pods=%d iterations=%d allocations=%llu\n", scenario.c_str(), pods, iterations,
              static_cast<unsigned long long>(allocations));
  return 0;
}
