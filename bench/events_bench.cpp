// Events benchmarks: how fast the reactor hears the kernel (docs/events.md).
//
//   bench_events                      Google Benchmark: queue and reactor consumer throughput
//                                     with a synthetic producer (unprivileged).
//   bench_events --kernel-report [--alloc PATH] [--seconds N] [--cost-only] [--sample N]
//                                     root: per-program BPF cost (kernel.bpf_stats_enabled),
//                                     kernel event -> handler latency p50/p99, and the reactor's
//                                     idle CPU with 110 watched pod cgroups. Everything runs in a
//                                     sandbox memory cgroup (pressured-bench-<pid>, 64 MiB limit)
//                                     that is removed afterwards; workloads are bounded.
//                                     --cost-only: one pass at the default sampling (or --sample N),
//                                     no ring buffer and idle parts: short runs to interleave
//                                     builds when comparing BPF objects on a noisy host.
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/bpf_events.hpp"
#include "bpf/features.hpp"
#include "events/reactor.hpp"
#include "fakes/no_bpf.hpp"
#include "kernel/cgroup_id.hpp"
#include "pressured/bounded_queue.hpp"
#include "pressured/events.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;

// ---------------------------------------------------------------------------
// Unprivileged: queue and reactor throughput

void BM_BoundedQueuePushPop(benchmark::State& state) {
  BoundedQueue<uint64_t> q(1024);
  uint64_t v = 0;
  for (auto _ : state) {
    q.try_push(v++);
    benchmark::DoNotOptimize(q.try_pop());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BoundedQueuePushPop);

using pressured::testing::NoBpf;

// Synthetic producer: each eventfd write of N becomes N events in one drain.
class SyntheticSource final : public ReactorSource {
 public:
  SyntheticSource() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~SyntheticSource() override { ::close(fd_); }
  int fd() const override { return fd_; }
  uint32_t epoll_events() const override { return EPOLLIN; }
  void drain(std::vector<PressureEvent>& out, TimePoint now) override {
    uint64_t n = 0;
    if (::read(fd_, &n, sizeof(n)) != sizeof(n)) return;
    for (uint64_t i = 0; i < n; ++i) {
      PressureEvent e;
      e.type = EventType::MemcgReclaimBegin;
      e.cgroup_id = i;
      e.kernel_ns = static_cast<uint64_t>(now.time_since_epoch().count());
      out.push_back(e);
    }
  }
  int fd_;
};

struct CountingHandler final : public ReactorHandler {
  std::atomic<uint64_t> seen{0};
  void on_events(std::span<const PressureEvent> evs, TimePoint) override {
    seen.fetch_add(evs.size(), std::memory_order_release);
  }
  void on_tick(TimePoint, bool) override {}
  void on_signal(int) override {}
};

void BM_ReactorConsumerThroughput(benchmark::State& state) {
  EventsConfig cfg;
  cfg.bpf = BpfMode::Off;
  cfg.psi_triggers = false;
  cfg.memcg_notifications = false;
  cfg.safety_net_interval = 10s;
  ReactorOptions o;
  o.handle_signals = false;
  EventStats stats;
  NoBpf nobpf;
  auto r = Reactor::create(cfg, o, nobpf, stats);
  if (!r) {
    state.SkipWithError(r.error().message.c_str());
    return;
  }
  auto src = std::make_unique<SyntheticSource>();
  int fd = src->fd();
  (void)(*r)->add_source(std::move(src));
  CountingHandler h;
  auto reactor = std::move(*r);
  std::thread t([&] { (void)reactor->run(h); });
  const auto batch = static_cast<uint64_t>(state.range(0));
  uint64_t target = 0;
  for (auto _ : state) {
    target += batch;
    (void)!::write(fd, &batch, sizeof(batch));
    while (h.seen.load(std::memory_order_acquire) < target) {
    }
  }
  reactor->stop();
  t.join();
  state.SetItemsProcessed(static_cast<int64_t>(target));
}
BENCHMARK(BM_ReactorConsumerThroughput)->Arg(1)->Arg(64)->Arg(1024)->UseRealTime();

// ---------------------------------------------------------------------------
// Privileged kernel report

// The real prober with tp_btf refused, so programs attach as raw_tp (which
// BPF_PROG_TEST_RUN can drive as a synthetic producer).
class RawTpOnly final : public BpfFeatures {
 public:
  explicit RawTpOnly(const BpfFeatures& real) : real_(real) {}
  bool bpf_available() const override { return real_.bpf_available(); }
  bool has_btf_type(std::string_view n) const override { return real_.has_btf_type(n); }
  bool can_attach(AttachKind k, std::string_view t, std::string* why) const override {
    if (k == AttachKind::TpBtf) return false;
    return real_.can_attach(k, t, why);
  }
  int tracepoint_arity(std::string_view tp) const override { return real_.tracepoint_arity(tp); }

 private:
  const BpfFeatures& real_;
};

// Ring buffer end to end: a producer thread runs the raw_tp cgroup_mkdir
// program through BPF_PROG_TEST_RUN (each run writes one record with a forced
// wakeup, the worst case); the reactor consumes. Reports events/s and drops.
void ringbuf_throughput(const BpfFeatures& real, uint64_t records) {
  RawTpOnly features(real);
  EventStats stats;
  bpf::BpfEventsOptions bo;
  bo.target_hierarchy = -1;
  auto src = bpf::BpfEventSource::create(bo, features, stats);
  if (!src) {
    std::printf("ring buffer throughput: BPF load failed: %s\n", src.error().message.c_str());
    return;
  }
  int fd = (*src)->program_fd(BpfProgram::CgroupMkdir);
  EventsConfig cfg;
  cfg.bpf = BpfMode::Off;
  cfg.psi_triggers = false;
  cfg.memcg_notifications = false;
  ReactorOptions o;
  o.handle_signals = false;
  NoBpf nobpf;
  EventStats rstats;
  auto r = Reactor::create(cfg, o, nobpf, rstats);
  (void)(*r)->add_source(std::move(*src));
  struct Counter final : public ReactorHandler {
    std::atomic<uint64_t> mkdirs{0};
    void on_events(std::span<const PressureEvent> evs, TimePoint) override {
      uint64_t n = 0;
      for (const auto& e : evs) n += e.type == EventType::CgroupMkdir && e.cgroup_id == 0;  // synthetic: no cgroup
      mkdirs.fetch_add(n, std::memory_order_release);
    }
    void on_tick(TimePoint, bool) override {}
    void on_signal(int) override {}
  } h;
  auto reactor = std::move(*r);
  std::thread t([&] { (void)reactor->run(h); });
  __u64 args[3] = {0, 0, 0};
  LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = args, .ctx_size_in = sizeof(args));
  auto t0 = std::chrono::steady_clock::now();
  uint64_t ok = 0;
  for (uint64_t i = 0; i < records; ++i) ok += bpf_prog_test_run_opts(fd, &opts) == 0;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (h.mkdirs.load() + stats.ringbuf_drops.load() < ok && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(100us);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  reactor->stop();
  t.join();
  std::printf("\n## ring buffer end to end (raw_tp cgroup_mkdir via BPF_PROG_TEST_RUN, forced wakeup per record)\n");
  std::printf("produced %llu, consumed %llu, dropped %llu in %.3f s: %.0f events/s, %llu reactor wakeups\n",
              static_cast<unsigned long long>(ok), static_cast<unsigned long long>(h.mkdirs.load()),
              static_cast<unsigned long long>(stats.ringbuf_drops.load()), wall,
              static_cast<double>(h.mkdirs.load()) / wall, static_cast<unsigned long long>(rstats.wakeups.load()));
}

// The floor under any program on a tracepoint: an empty raw_tp program there
// pays the same dispatch (recursion guard, RCU, the stats' own clock reads)
// and nothing else. Attached beside the real programs while they are
// measured; not part of their total.
class EmptyProgram {
 public:
  explicit EmptyProgram(const std::string& tracepoint) {
    const bpf_insn insns[] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .src_reg = 0, .off = 0, .imm = 0},
        {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
    };
    prog_ = bpf_prog_load(BPF_PROG_TYPE_RAW_TRACEPOINT, "pressured_empty", "GPL", insns, 2, nullptr);
    if (prog_ < 0) {
      error_ = std::string("load: ") + std::strerror(errno);
      return;
    }
    link_ = bpf_raw_tracepoint_open(tracepoint.c_str(), prog_);
    if (link_ < 0) error_ = "attach to " + tracepoint + ": " + std::strerror(errno);
  }
  ~EmptyProgram() {
    if (link_ >= 0) ::close(link_);
    if (prog_ >= 0) ::close(prog_);
  }
  EmptyProgram(const EmptyProgram&) = delete;
  EmptyProgram& operator=(const EmptyProgram&) = delete;
  bool ok() const { return link_ >= 0; }
  const std::string& error() const { return error_; }
  std::pair<uint64_t, uint64_t> runs_and_ns() const {
    bpf_prog_info info{};
    __u32 len = sizeof(info);
    if (prog_ < 0 || bpf_obj_get_info_by_fd(prog_, &info, &len) != 0) return {0, 0};
    return {info.run_cnt, info.run_time_ns};
  }

 private:
  int prog_ = -1;
  int link_ = -1;
  std::string error_;
};

// The tracepoint of the two hot programs (the charge hook, the reclaim
// counter) as the skeleton attached them; empty for function hooks (no raw_tp
// floor there) and the other programs.
std::string hot_tracepoint(const bpf::BpfEventSource::ProgramStats& ps) {
  if (ps.program != BpfProgram::MemcgCharge && ps.program != BpfProgram::MemcgReclaimStats) return {};
  const auto& n = ps.skel_name;
  if (n.find("memcg_lruvec") != std::string::npos) return "mod_memcg_lruvec_state";
  if (n.ends_with("_memcg_events") || n.find("memcg_count_events") != std::string::npos) return "count_memcg_events";
  return {};
}

struct Sandbox {
  std::string root;
  std::vector<std::string> children;
  bool ok = false;
  explicit Sandbox(const std::string& mount) {
    root = mount + "/pressured-bench-" + std::to_string(::getpid());
    ok = ::mkdir(root.c_str(), 0755) == 0;
  }
  bool write(const std::string& rel, const std::string& file, const std::string& v) const {
    std::ofstream out((rel.empty() ? root : root + "/" + rel) + "/" + file);
    out << v;
    out.flush();
    return static_cast<bool>(out);
  }
  std::string make(const std::string& rel) {
    std::string p = root + "/" + rel;
    if (::mkdir(p.c_str(), 0755) == 0) children.push_back(p);
    return p;
  }
  ~Sandbox() {
    if (!ok) return;
    for (auto it = children.rbegin(); it != children.rend(); ++it) {
      for (int i = 0; i < 100 && ::rmdir(it->c_str()) != 0 && errno == EBUSY; ++i) std::this_thread::sleep_for(10ms);
    }
    for (int i = 0; i < 100 && ::rmdir(root.c_str()) != 0 && errno == EBUSY; ++i) std::this_thread::sleep_for(10ms);
  }
};

pid_t spawn_in(const std::string& cgroup, const std::vector<std::string>& argv) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::ofstream(cgroup + "/cgroup.procs") << ::getpid();
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

int run_to_end(const std::string& cgroup, const std::vector<std::string>& argv) {
  pid_t p = spawn_in(cgroup, argv);
  int status = 0;
  ::waitpid(p, &status, 0);
  return status;
}

struct LatencyHandler final : public ReactorHandler {
  std::mutex mu;
  std::map<std::string, std::vector<double>> us_by_type;
  void on_events(std::span<const PressureEvent> evs, TimePoint) override {
    MonotonicClock clock;
    auto now = clock.now();
    std::lock_guard l(mu);
    for (const auto& e : evs) {
      if (e.source != EventSource::Bpf || e.kernel_ns == 0) continue;
      us_by_type[std::string(name(e.type))].push_back(
          static_cast<double>((now - e.kernel_time()).count()) / 1000.0);
    }
  }
  void on_tick(TimePoint, bool) override {}
  void on_signal(int) override {}
};

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size() - 1));
  return v[i];
}

std::string read_sysctl(const char* path) {
  std::ifstream in(path);
  std::string s;
  in >> s;
  return s;
}

double cpu_seconds_self() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct ReportOptions {
  int idle_seconds = 10;
  bool cost_only = false;  // one pass, no ring buffer throughput, no idle part
  uint32_t sample = 0;     // 0: the default passes; otherwise the charge sampling of a --cost-only pass
};

int kernel_report(const std::string& alloc, const ReportOptions& ro) {
  const int idle_seconds = ro.idle_seconds;
  if (::geteuid() != 0) {
    std::fprintf(stderr, "--kernel-report needs root (BPF, sandbox cgroups)\n");
    return 2;
  }
  std::string mount = "/sys/fs/cgroup/memory";
  bool v2 = !std::filesystem::exists(mount + "/memory.usage_in_bytes");
  if (v2) mount = "/sys/fs/cgroup";
  if (::access(alloc.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "workload %s not found (build events_alloc or pass --alloc)\n", alloc.c_str());
    return 2;
  }
  auto features = make_kernel_bpf_features();
  if (!features->bpf_available()) {
    std::fprintf(stderr, "BPF unavailable\n");
    return 2;
  }
  const char* kStats = "/proc/sys/kernel/bpf_stats_enabled";
  std::string old_stats = read_sysctl(kStats);
  std::ofstream(kStats) << "1";

  int rc = 0;
  {
    Sandbox sb(mount);
    if (!sb.ok) {
      std::fprintf(stderr, "cannot create sandbox %s: %s\n", sb.root.c_str(), std::strerror(errno));
      std::ofstream(kStats) << old_stats;
      return 1;
    }
    if (v2) {
      sb.write("", "cgroup.subtree_control", "+memory");
      sb.write("", "memory.max", std::to_string(64 << 20));
      sb.write("", "memory.swap.max", "0");
    } else {
      sb.write("", "memory.use_hierarchy", "1");
      sb.write("", "memory.limit_in_bytes", std::to_string(64 << 20));
      sb.write("", "memory.swappiness", "0");
    }
    std::string pod = sb.make("pod1");
    if (!v2) sb.write("pod1", "memory.swappiness", "0");
    auto root_id = kernel::cgroup_id_of(sb.root);

    std::printf("# pressured events kernel report (kernel %s)\n", read_sysctl("/proc/sys/kernel/osrelease").c_str());
    std::printf("load average at start: %s\n", [] {
      std::ifstream in("/proc/loadavg");
      std::string l;
      std::getline(in, l);
      return l;
    }().c_str());
    // nice 99 here means: reactor_rt_priority = 10, the reactor thread SCHED_FIFO (what a node
    // daemon with CAP_SYS_NICE can do); the workload stays SCHED_OTHER.
    std::vector<std::pair<uint32_t, int>> runs = {{64u, 0}, {1u, 0}, {64u, -10}, {64u, 99}};
    if (ro.cost_only) runs = {{ro.sample ? ro.sample : bpf::BpfEventsOptions{}.sample_every, 0}};
    for (auto [sample, nice] : runs) {
      EventStats stats;
      bpf::BpfEventsOptions bo;
      bo.sample_every = sample;
      bo.target_hierarchy = v2 ? 0 : bpf::memory_hierarchy_id("/proc");
      auto src = bpf::BpfEventSource::create(bo, *features, stats);
      if (!src) {
        std::fprintf(stderr, "BPF load failed: %s\n", src.error().message.c_str());
        rc = 1;
        break;
      }
      bpf::BpfEventSource* bpf = src->get();
      (void)bpf->set_watch(*root_id, 32 << 20, 1);
      // Activity tracking on (as the daemon runs it: kubepods, tiers, pods), so the
      // count_memcg_events filter and the refault branch of the charge hook do their walks.
      auto pod_id = kernel::cgroup_id_of(pod);
      bool tracking = bpf->track_memcg(*root_id).ok() && pod_id && bpf->track_memcg(*pod_id).ok();
      EventsConfig cfg;
      cfg.bpf = BpfMode::Off;
      cfg.psi_triggers = false;
      cfg.memcg_notifications = false;
      cfg.reactor_nice = nice == 99 ? 0 : nice;
      cfg.reactor_rt_priority = nice == 99 ? 10 : 0;
      ReactorOptions o;
      o.handle_signals = false;
      o.memory_mount = mount;
      NoBpf nobpf;
      EventStats rstats;
      auto r = Reactor::create(cfg, o, nobpf, rstats);
      (void)(*r)->add_source(std::move(*src));
      struct Floor {
        std::string tracepoint;
        std::unique_ptr<EmptyProgram> prog;
        std::pair<uint64_t, uint64_t> before{};
      };
      std::vector<Floor> floors;
      for (const auto& ps : bpf->program_stats()) {
        auto tp = hot_tracepoint(ps);
        if (tp.empty()) continue;
        if (std::any_of(floors.begin(), floors.end(), [&](const Floor& f) { return f.tracepoint == tp; })) continue;
        floors.push_back({tp, std::make_unique<EmptyProgram>(tp), {}});
      }
      for (auto& f : floors) f.before = f.prog->runs_and_ns();
      auto before = bpf->program_stats();
      LatencyHandler h;
      auto reactor = std::move(*r);
      std::thread t([&] { (void)reactor->run(h); });
      auto t0 = std::chrono::steady_clock::now();
      // Workload: 20 threshold round trips (48 MiB vs a 32 MiB alarm), 200 cgroup mkdir/rmdir, one OOM.
      for (int i = 0; i < 20; ++i) run_to_end(pod, {alloc, "48", "8", "1", "20", "20"});
      for (int i = 0; i < 200; ++i) {
        std::string d = sb.root + "/lat" + std::to_string(i);
        ::mkdir(d.c_str(), 0755);
        ::rmdir(d.c_str());
        std::this_thread::sleep_for(2ms);
      }
      run_to_end(pod, {alloc, "128", "8", "1", "100"});
      // File cache through the 64 MiB limit: reclaim scan/steal and workingset refaults in pod1.
      const std::string file = "/var/tmp/pressured-bench-" + std::to_string(::getpid());
      for (int i = 0; i < 3; ++i) run_to_end(pod, {alloc, "file", file, "128", "2"});
      std::this_thread::sleep_for(200ms);
      double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      auto after = bpf->program_stats();
      std::vector<std::pair<uint64_t, uint64_t>> floors_after;
      for (auto& f : floors) floors_after.push_back(f.prog->runs_and_ns());
      reactor->stop();
      t.join();

      std::printf("\n## BPF cost, charge sampling 1/%u, reactor nice %d (99: SCHED_FIFO 10), workload %.1f s (system-wide invocations)\n",
                  sample, nice, wall);
      std::printf("%-24s %-26s %12s %14s %10s\n", "program", "attach", "run_cnt", "run_time_ns", "ns/run");
      uint64_t total_cnt = 0, total_ns = 0;
      for (std::size_t i = 0; i < after.size(); ++i) {
        uint64_t cnt = after[i].run_cnt - before[i].run_cnt;
        uint64_t ns = after[i].run_time_ns - before[i].run_time_ns;
        total_cnt += cnt;
        total_ns += ns;
        std::printf("%-24s %-26s %12llu %14llu %10.1f\n", std::string(name(after[i].program)).c_str(),
                    after[i].skel_name.c_str(), static_cast<unsigned long long>(cnt),
                    static_cast<unsigned long long>(ns), cnt ? static_cast<double>(ns) / static_cast<double>(cnt) : 0.0);
      }
      std::printf("%-24s %-26s %12llu %14llu %10.1f\n", "ALL", "", static_cast<unsigned long long>(total_cnt),
                  static_cast<unsigned long long>(total_ns),
                  total_cnt ? static_cast<double>(total_ns) / static_cast<double>(total_cnt) : 0.0);
      for (std::size_t i = 0; i < floors.size(); ++i) {
        const auto& f = floors[i];
        if (!f.prog->ok()) {
          std::printf("(floor on %s: %s)\n", f.tracepoint.c_str(), f.prog->error().c_str());
          continue;
        }
        uint64_t cnt = floors_after[i].first - f.before.first;
        uint64_t ns = floors_after[i].second - f.before.second;
        std::printf("%-24s %-26s %12llu %14llu %10.1f\n", "(floor: empty program)", ("raw_tp " + f.tracepoint).c_str(),
                    static_cast<unsigned long long>(cnt), static_cast<unsigned long long>(ns),
                    cnt ? static_cast<double>(ns) / static_cast<double>(cnt) : 0.0);
      }
      std::printf("BPF CPU over the workload: %.3f%% of one core; ring buffer drops: %llu\n",
                  100.0 * static_cast<double>(total_ns) / 1e9 / wall,
                  static_cast<unsigned long long>(stats.ringbuf_drops.load()));
      std::printf("workingset_refault: %s (no program of its own: counted inside memcg_charge)\n",
                  stats.attach_reason(BpfProgram::WorkingsetRefault).c_str());
      std::printf("memstall_enter/leave: %s\n", stats.attach_reason(BpfProgram::MemstallEnter).c_str());
      if (auto a = pod_id ? bpf->memcg_activity(*pod_id) : std::nullopt; tracking && a) {
        std::printf("pod1 activity (tracked): pgscan %llu, pgsteal %llu, refaults %llu, memstalls %llu (%.3f s)\n",
                    static_cast<unsigned long long>(a->pgscan), static_cast<unsigned long long>(a->pgsteal),
                    static_cast<unsigned long long>(a->workingset_refaults),
                    static_cast<unsigned long long>(a->memstall_count), static_cast<double>(a->memstall_ns) / 1e9);
      } else {
        std::printf("pod1 activity: not tracked (no activity hook attached)\n");
      }
      std::printf("\n## kernel event -> handler latency (us), sampling 1/%u, reactor nice %d (99: SCHED_FIFO 10)\n", sample, nice);
      std::printf("%-22s %8s %10s %10s %10s\n", "event", "count", "p50", "p99", "max");
      std::vector<double> all_edges;
      for (auto& [type, v] : h.us_by_type) {
        std::printf("%-22s %8zu %10.1f %10.1f %10.1f\n", type.c_str(), v.size(), pct(v, 50), pct(v, 99), pct(v, 100));
        if (type.rfind("threshold", 0) == 0 || type.rfind("cgroup", 0) == 0 || type == "oom_victim")
          all_edges.insert(all_edges.end(), v.begin(), v.end());
      }
      std::printf("%-22s %8zu %10.1f %10.1f %10.1f\n", "EDGES (woken)", all_edges.size(), pct(all_edges, 50),
                  pct(all_edges, 99), pct(all_edges, 100));
    }

    if (rc == 0 && !ro.cost_only) ringbuf_throughput(*features, 200000);

    // Idle: 110 pods watched (BPF map + v1 eventfds) and a PSI trigger; nothing happens in
    // the sandbox (the rest of the node keeps allocating: the charge hook still runs).
    if (rc == 0 && !ro.cost_only) {
      std::vector<std::string> pods;
      for (int i = 0; i < 110; ++i) pods.push_back(sb.make("idle" + std::to_string(i)));
      EventStats bstats;
      bpf::BpfEventsOptions bo;
      bo.target_hierarchy = v2 ? 0 : bpf::memory_hierarchy_id("/proc");
      auto src = bpf::BpfEventSource::create(bo, *features, bstats);
      EventsConfig cfg;  // defaults otherwise: notifications, PSI, 1 s safety net
      cfg.bpf = BpfMode::Off;
      ReactorOptions o;
      o.handle_signals = false;
      o.memory_mount = mount;
      o.cgroup_v2 = v2;
      EventStats stats;
      NoBpf nobpf;
      auto r = Reactor::create(cfg, o, nobpf, stats);
      if (!r || !src) {
        std::fprintf(stderr, "idle setup failed\n");
        rc = 1;
      } else {
        bpf::BpfEventSource* bpf = src->get();
        int armed = 0;
        for (const auto& p : pods) {
          auto id = kernel::cgroup_id_of(p);
          armed += (*r)->set_watch(p, 48 << 20).ok() && id && bpf->set_watch(*id, 48 << 20, 1).ok();
          if (id) (void)bpf->track_memcg(*id);  // as the daemon does for every pod
        }
        (void)(*r)->add_source(std::move(*src));
        CountingHandler h;
        auto reactor = std::move(*r);
        std::thread t([&] { (void)reactor->run(h); });
        std::this_thread::sleep_for(500ms);
        auto b0 = bpf->program_stats();
        double c0 = cpu_seconds_self();
        auto t0 = std::chrono::steady_clock::now();
        std::this_thread::sleep_for(std::chrono::seconds(idle_seconds));
        double c1 = cpu_seconds_self();
        double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        auto b1 = bpf->program_stats();
        reactor->stop();
        t.join();
        uint64_t cnt = 0, ns = 0;
        for (std::size_t i = 0; i < b1.size(); ++i) {
          cnt += b1[i].run_cnt - b0[i].run_cnt;
          ns += b1[i].run_time_ns - b0[i].run_time_ns;
        }
        std::printf("\n## idle: %d pods watched and tracked (BPF maps + v1 eventfds + system PSI trigger), %d s\n", armed,
                    idle_seconds);
        std::printf("daemon process CPU (reactor, userspace+kernel): %.4f%% of one core (%llu wakeups, %llu events)\n",
                    100.0 * (c1 - c0) / wall, static_cast<unsigned long long>(stats.wakeups.load()),
                    static_cast<unsigned long long>(h.seen.load()));
        std::printf("BPF programs (run by the node's other tasks): %llu runs, %.1f ns/run, %.3f%% of one core\n",
                    static_cast<unsigned long long>(cnt), cnt ? static_cast<double>(ns) / static_cast<double>(cnt) : 0.0,
                    100.0 * static_cast<double>(ns) / 1e9 / wall);
      }
    }
  }
  std::ofstream(kStats) << old_stats;
  return rc;
}

}  // namespace
}  // namespace pressured

int main(int argc, char** argv) {
  bool report = false;
  std::string alloc;
  pressured::ReportOptions ro;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--kernel-report") report = true;
    if (a == "--alloc" && i + 1 < argc) alloc = argv[++i];
    if (a == "--seconds" && i + 1 < argc) ro.idle_seconds = std::max(1, std::min(60, std::atoi(argv[++i])));
    if (a == "--cost-only") ro.cost_only = true;
    if (a == "--sample" && i + 1 < argc) {
      int n = std::atoi(argv[++i]);
      if (n < 1) {
        std::fprintf(stderr, "--sample needs a whole number >= 1, got %s\n", argv[i]);
        return 2;
      }
      ro.sample = static_cast<uint32_t>(n);
    }
  }
  if (ro.sample && !ro.cost_only) {
    std::fprintf(stderr, "--sample goes with --cost-only (the full report runs its own samplings)\n");
    return 2;
  }
  if (report) {
    if (alloc.empty()) {
      auto self = std::filesystem::read_symlink("/proc/self/exe");
      alloc = (self.parent_path().parent_path() / "tests" / "events_alloc").string();
    }
    return pressured::kernel_report(alloc, ro);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
