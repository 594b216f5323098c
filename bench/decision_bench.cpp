// Kernel event -> decision, end to end through the real observer, for N pods
// (default 110, 1000, 5000) on generated pod cgroup trees:
//   fake-v1, fake-v2: fake cgroupfs trees in a temp dir (unprivileged);
//   host-v1:          real memory cgroups in a sandbox,
//                     /sys/fs/cgroup/memory/pressured-test-<pid>-decision-bench,
//                     removed at the end, on error, and on SIGINT/SIGTERM
//                     (root only; empty cgroups, no memory pressure; each pod
//                     has one container cgroup, as the kubelet makes them).
// Each row times `iterations` decisions after one full observation (what the
// last safety-net tick left):
//   full        observe() + Engine::evaluate: what every decision cost before.
//   incremental refresh_for_decision() + Engine::evaluate: what the daemon now
//               does for an event between full observations, reading one
//               usage file per contending pod.
//   incr-batch  the same with the contenders' page counters read in one batch
//               (the BPF cgroup iterator; host trees, root, kernels with it):
//               what the daemon does where the kernel allows it.
//   walk        the batch alone: every pod's page counter, kubepods two
//               levels down (host trees, pressure rows).
//   daemon      Daemon::on_events with one BPF threshold edge (quiet only: the
//               whole handler, incremental refresh, engine, policy, after-work).
//   in-flight   the same under pressure while an eviction is in flight (its
//               victim killed and still running): the decision re-reads the
//               signals and the victim; the held memory lane needs no ranking.
// Scenarios: quiet (the memory.available threshold is not met: "nothing to
// do"), pressure (it is met: a victim is chosen, fresh). Prints a table (p50,
// p99, max in microseconds; pods read in full per decision).
//
//   ninja -C build/release bench_decision && build/release/bench/bench_decision [--pods 110,1000] [--iterations 300]
//     [--trees fake-v1,fake-v2,host-v1]
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "bpf/features.hpp"
#include "fakes/fake_node.hpp"
#include "fakes/sandbox_cgroup.hpp"
#include "daemon/daemon.hpp"
#include "daemon/decision_view.hpp"
#include "bpf/bpf_events.hpp"
#include "kernel/hot_file.hpp"
#include "pressured/engine.hpp"
#include "pressured/evictor.hpp"
#include "pressured/observer.hpp"

namespace {

using namespace pressured;
using pressured::testing::FakeNode;
using pressured::testing::FakePodMemory;
using pressured::testing::SandboxCgroup;
using Clock = std::chrono::steady_clock;

constexpr uint64_t MiB = 1ULL << 20;
std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop = true; }

double load_average() {
  double l[1] = {0};
  return ::getloadavg(l, 1) == 1 ? l[0] : -1;
}

std::string uid_of(int i) {
  char uid[64];
  std::snprintf(uid, sizeof uid, "0aa1b2c3-0000-4000-8000-%012d", i);
  return uid;
}

QosClass qos_of(int i) { return i % 3 == 0 ? QosClass::Guaranteed : i % 3 == 1 ? QosClass::Burstable : QosClass::BestEffort; }

// One tree of N pods and the observer config that reads it.
struct Tree {
  std::unique_ptr<FakeNode> fake;
  std::unique_ptr<SandboxCgroup> sandbox;
  ObserveConfig config;
};

std::optional<Tree> make_tree(const std::string& kind, int pods, std::string& why) {
  Tree t;
  if (kind == "fake-v1" || kind == "fake-v2") {
    t.fake = std::make_unique<FakeNode>(kind == "fake-v1" ? CgroupVersion::V1 : CgroupVersion::V2,
                                        CgroupDriver::Cgroupfs);
    for (int i = 0; i < pods && !g_stop; ++i) {
      // Working sets spread over 1..N MiB with page cache on top, so bounds
      // (page counters) and working sets differ as on a real node.
      FakePodMemory m{static_cast<uint64_t>(i + 1) * MiB + 64 * MiB, static_cast<uint64_t>(i + 1) * MiB,
                      64 * MiB, 48 * MiB, 16 * MiB};
      m.pids = 3;
      t.fake->add_pod(uid_of(i), qos_of(i), m);
    }
    t.config = t.fake->config();
    return t;
  }
  if (kind == "host-v1") {
    if (::geteuid() != 0) {
      why = "needs root (real memory cgroups)";
      return std::nullopt;
    }
    t.sandbox = std::make_unique<SandboxCgroup>("/sys/fs/cgroup/memory", "decision-bench");
    if (!t.sandbox->ok()) {
      why = t.sandbox->error();
      return std::nullopt;
    }
    for (const char* d : {"kubepods/burstable", "kubepods/besteffort"}) {
      if (!t.sandbox->make(d)) {
        why = std::string("mkdir ") + d + " failed";
        return std::nullopt;
      }
    }
    for (int i = 0; i < pods && !g_stop; ++i) {
      const QosClass q = qos_of(i);
      std::string rel = std::string("kubepods/") + (q == QosClass::Guaranteed ? "" : q == QosClass::Burstable ? "burstable/" : "besteffort/") +
                        "pod" + uid_of(i);
      // The container cgroup: the iterator walks it (and skips it).
      if (!t.sandbox->make(rel) || !t.sandbox->make(rel + "/container0")) {
        why = "mkdir " + rel + " failed";
        return std::nullopt;
      }
    }
    const std::string& root = t.sandbox->path();
    t.config.cgroup_mount = "/sys/fs/cgroup";
    t.config.cgroup_root = root.substr(std::string("/sys/fs/cgroup/memory").size());
    t.config.kubepods_name = "kubepods";
    t.config.driver = CgroupDriver::Cgroupfs;
    t.config.nodefs_path.clear();
    t.config.imagefs_path.clear();
    return t;
  }
  why = "unknown tree kind";
  return std::nullopt;
}

EvictionConfig thresholds(bool pressure) {
  EvictionConfig e;
  Threshold t;
  t.signal = Signal::MemoryAvailable;
  t.kind = ThresholdKind::Hard;
  t.value.kind = ThresholdValue::Kind::Percent;
  t.value.percent = pressure ? 99.9 : 0.1;  // met on any node / never met
  e.thresholds.push_back(t);
  return e;
}

struct Stats {
  double p50 = 0, p99 = 0, max = 0;
  double cpu_p50 = 0, cpu_p99 = 0;
  double pods_read = 0;  // mean pods read in full per decision
};

double quantile(std::vector<double>& v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

Stats summarize(std::vector<double>& us, std::vector<double>& cpu, double pods_read_total) {
  Stats s;
  if (us.empty()) return s;
  s.p50 = quantile(us, 0.50);
  s.p99 = quantile(us, 0.99);
  s.max = us.back();
  s.cpu_p50 = quantile(cpu, 0.50);
  s.cpu_p99 = quantile(cpu, 0.99);
  s.pods_read = pods_read_total / static_cast<double>(us.size());
  return s;
}

void row(const std::string& tree, int pods, const char* scenario, const char* path, const Stats& s, const std::string& note) {
  std::printf("| %-8s | %5d | %-8s | %-11s | %9.1f | %9.1f | %9.1f | %9.1f | %9.1f | %6.1f | %s |\n", tree.c_str(), pods,
              scenario, path, s.cpu_p50, s.cpu_p99, s.p50, s.p99, s.max, s.pods_read, note.c_str());
  std::fflush(stdout);
}

// Wall clock and this thread's CPU time: on a loaded machine the wall time
// includes waiting for a core; the CPU time is the decision's own cost.
struct Timer {
  Clock::time_point wall = Clock::now();
  double cpu = thread_cpu_us();
  static double thread_cpu_us() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
  }
  void stop(std::vector<double>& wall_us, std::vector<double>& cpu_us) const {
    cpu_us.push_back(thread_cpu_us() - cpu);
    wall_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - wall).count());
  }
};

// Kills nothing: the victim keeps its processes, so its eviction stays in
// flight (terminating, killed) for the whole row.
class StubbornEvictor final : public Evictor {
 public:
  Result<void> validate(const EvictionTarget&) const override { return {}; }
  Result<KillReport> terminate(const EvictionTarget&) override { return KillReport{}; }
  Result<KillReport> kill(const EvictionTarget&) override { return KillReport{}; }
  Result<bool> is_empty(const EvictionTarget&) const override { return false; }
};

// The daemon's batched page-counter reader (BPF cgroup iterator), loaded once;
// null (with the reason printed once) where it cannot be.
std::shared_ptr<PageCounterReader> page_counter_reader() {
  static std::shared_ptr<PageCounterReader> reader;
  static bool tried = false;
  if (tried) return reader;
  tried = true;
  static EventStats stats;  // outlives the reader
  auto features = make_kernel_bpf_features();
  auto src = bpf::BpfEventSource::create(bpf::BpfEventsOptions{}, *features, stats);
  if (!src) {
    std::fprintf(stderr, "incr-batch rows skipped: BPF: %s\n", src.error().message.c_str());
    return nullptr;
  }
  reader = (*src)->page_counter_reader();
  if (!reader) std::fprintf(stderr, "incr-batch rows skipped: no page-counter iterator on this kernel\n");
  return reader;
}

void run_tree(const std::string& kind, int pods, int iterations) {
  std::string why;
  auto tree = make_tree(kind, pods, why);
  if (!tree) {
    std::printf("| %-8s | %5d | skipped: %s\n", kind.c_str(), pods, why.c_str());
    return;
  }
  auto obs = make_node_observer(tree->config);
  if (!obs) {
    std::printf("| %-8s | %5d | observer failed: %s\n", kind.c_str(), pods, obs.error().message.c_str());
    return;
  }
  NodeObserver& o = **obs;
  TimePoint now = MonotonicClock().now();
  for (bool pressure : {false, true}) {
    const char* scenario = pressure ? "pressure" : "quiet";
    const EvictionConfig ec = thresholds(pressure);
    std::string note;
    // full: observe + engine.
    {
      Engine engine(ec);
      std::vector<double> us, cpu;
      double read = 0;
      for (int i = 0; i < iterations && !g_stop; ++i) {
        now += std::chrono::microseconds(10);
        Timer t0;
        auto snap = o.observe(now);
        if (!snap) {
          note = snap.error().message;
          break;
        }
        Decisions d = engine.evaluate(*snap, now);
        t0.stop(us, cpu);
        read += static_cast<double>(snap->pods.size());
        if (pressure && !d.eviction) note = "no victim chosen";
      }
      row(kind, pods, scenario, "full", summarize(us, cpu, read), note);
    }
    // incremental: from the last full observation; files, then the batch.
    for (bool batch : {false, true}) {
      if (batch) {
        if (!pressure) continue;  // a quiet decision reads no pod
        auto reader = kind.rfind("host", 0) == 0 ? page_counter_reader() : nullptr;
        if (!reader) break;
        o.set_page_counter_reader(reader);
      }
      Engine engine(ec);
      auto base = o.observe(now);
      if (!base) return;
      NodeSnapshot snap = *base;
      std::vector<double> us, cpu;
      double read = 0;
      note.clear();
      std::string victim;
      for (int i = 0; i < iterations && !g_stop; ++i) {
        now += std::chrono::microseconds(10);
        Timer t0;
        auto r = refresh_for_decision(o, snap, ec, {}, now);
        if (!r) {
          note = "fell back: " + r.error().message;
          break;
        }
        Decisions d = engine.evaluate(snap, now);
        t0.stop(us, cpu);
        read += static_cast<double>(r->pods_refreshed);
        if (pressure && !d.eviction) note = "no victim chosen";
        if (d.eviction) victim = d.eviction->uid;
      }
      // The incremental head must be the full observation's head.
      if (pressure && note.empty()) {
        Engine check(ec);
        auto full = o.observe(now);
        auto d = full ? check.evaluate(*full, now) : Decisions{};
        note = d.eviction && d.eviction->uid == victim ? "same victim as full" : "VICTIM DIFFERS from full";
      }
      if (batch && o.counters().page_counter_batch.load() == 0) note = "BATCH FAILED (see log): " + note;
      row(kind, pods, scenario, batch ? "incr-batch" : "incremental", summarize(us, cpu, read), note);
      if (batch) o.set_page_counter_reader(nullptr);
    }
    // walk: the batch alone, every pod of the tree (kubepods, two levels).
    if (pressure && kind.rfind("host", 0) == 0) {
      if (auto reader = page_counter_reader()) {
        const std::string kubepods = tree->sandbox->path() + "/kubepods";
        std::vector<PageCounterSample> samples;
        std::vector<double> us, cpu;
        std::string why_not;
        for (int i = 0; i < iterations && !g_stop; ++i) {
          Timer t0;
          auto r = reader->read(kubepods, 2, samples);
          t0.stop(us, cpu);
          if (!r) {
            why_not = "walk failed: " + r.error().message;
            break;
          }
        }
        const std::size_t records = samples.size();
        row(kind, pods, scenario, "walk", summarize(us, cpu, static_cast<double>(records) * static_cast<double>(us.size())),
            why_not.empty() ? std::to_string(records) + " records (tiers and pods)" : why_not);
      }
    }
    // The whole event handler, one BPF threshold edge a decision. daemon
    // (quiet): no eviction state to reset. in-flight (pressure): while the
    // victim it chose is being killed (it keeps a process: terminating until
    // kill_timeout).
    {
      Config c;
      c.eviction = ec;
      RecordingEvictor recording;
      StubbornEvictor stubborn;
      DaemonDeps deps;
      deps.observer = &o;
      deps.evictor = pressure ? static_cast<Evictor*>(&stubborn) : &recording;
      Daemon daemon(c, deps);
      now += std::chrono::microseconds(10);
      daemon.on_tick(now, true);  // the safety net's full observation: under pressure, the eviction starts
      note.clear();
      if (pressure && !daemon.busy()) note = "NO EVICTION IN FLIGHT";
      PressureEvent ev;
      ev.source = EventSource::Bpf;
      ev.type = EventType::ThresholdUp;
      std::vector<double> us, cpu;
      const uint64_t full_before = daemon.stats().full_observations.load();
      for (int i = 0; i < iterations && !g_stop; ++i) {
        now += std::chrono::microseconds(10);
        Timer t0;
        daemon.on_events(std::span<const PressureEvent>(&ev, 1), now);
        t0.stop(us, cpu);
      }
      const auto& st = daemon.stats();
      if (pressure) {
        if (!daemon.busy()) note = "EVICTION ENDED: " + note;
        note += std::to_string(st.incremental_evaluations.load()) + " partial, " +
                std::to_string(st.full_observations.load() - full_before) + " full observations in flight";
      } else {
        note = std::to_string(st.incremental_evaluations.load()) + " incremental, " +
               std::to_string(st.full_observations.load()) + " full observations";
      }
      row(kind, pods, scenario, pressure ? "in-flight" : "daemon", summarize(us, cpu, 0), note);
    }
  }
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> trees{"fake-v1", "fake-v2", "host-v1"};
  std::vector<int> pod_counts{110, 1000, 5000};
  int iterations = 300;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--pods") {
      pod_counts.clear();
      for (const auto& n : split(value())) pod_counts.push_back(std::stoi(n));
    } else if (a == "--iterations") {
      iterations = std::stoi(value());
    } else if (a == "--trees") {
      trees = split(value());
    } else {
      std::fprintf(stderr, "usage: %s [--pods 110,1000,5000] [--iterations N] [--trees fake-v1,fake-v2,host-v1]\n",
                   argv[0]);
      return 2;
    }
  }
  if (iterations < 1) {
    std::fprintf(stderr, "--iterations must be at least 1\n");
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  spdlog::set_level(spdlog::level::warn);
  pressured::kernel::HotFile::size_for_process();  // as pressured's main does: 1000 pods keep thousands of files open
  std::printf("event -> decision, %d decisions per row, microseconds (thread CPU time and wall clock); load average %.2f\n\n",
              iterations, load_average());
  std::printf("| tree     |  pods | scenario | path        | CPU p50 us | CPU p99 us | wall p50 us | wall p99 us | wall max us | pods read in full | note |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& t : trees) {
    for (int n : pod_counts) {
      if (g_stop) break;
      run_tree(t, n, iterations);
    }
  }
  if (g_stop) {
    std::fprintf(stderr, "interrupted: sandbox removed\n");
    return 130;
  }
  return 0;
}
