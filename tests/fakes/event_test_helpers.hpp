#pragma once
// Shared by the real-kernel event and BPF tests (tests/events/ host_events_test,
// v2_events_test, activity_host_test; tests/bpf/ the host tests): a collecting handler, a reactor on its own thread,
// event lookup and printing, a bounded child wait, a prober with refused kinds.

#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "events/reactor.hpp"
#include "pressured/events.hpp"

namespace pressured::events_test {

using Events = std::vector<PressureEvent>;

/// The workload binary (tests/events/alloc.c): $PRESSURED_EVENTS_ALLOC (the VM
/// guest sets it: its /tmp is a fresh tmpfs, so a build path there is hidden),
/// else the build's.
// Page cache written to `dir` is what a sandbox must reclaim: tmpfs/ramfs
// pages cannot be reclaimed without swap, so only a disk-backed dir will do.
inline bool disk_backed(const char* dir) {
  struct statfs fs {};
  return ::statfs(dir, &fs) == 0 && fs.f_type != TMPFS_MAGIC && fs.f_type != RAMFS_MAGIC;
}

/// The node task count from /proc/loadavg's "running/total" field, read
/// independently of the daemon's parser; 0 when unreadable.
inline uint64_t loadavg_tasks() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c, rt;
  in >> a >> b >> c >> rt;
  auto slash = rt.find('/');
  return slash == std::string::npos ? 0 : std::stoull(rt.substr(slash + 1));
}

inline std::string alloc_path() {
  const char* v = std::getenv("PRESSURED_EVENTS_ALLOC");
  return v != nullptr && *v ? std::string(v) : std::string(PRESSURED_EVENTS_ALLOC);
}

/// Records every event and when the handler got it (the kernel's clock).
struct Collector final : public ReactorHandler {
  std::mutex mu;
  std::condition_variable cv;
  Events events;
  std::vector<TimePoint> handled_at;
  void on_events(std::span<const PressureEvent> evs, TimePoint now) override {
    std::lock_guard l(mu);
    events.insert(events.end(), evs.begin(), evs.end());
    handled_at.insert(handled_at.end(), evs.size(), now);
    cv.notify_all();
  }
  void on_tick(TimePoint, bool) override {}
  void on_signal(int) override {}
  /// Kernel timestamp -> handler, in microseconds, of event i.
  double latency_us(long i) {
    std::lock_guard l(mu);
    auto k = static_cast<std::size_t>(i);
    return static_cast<double>((handled_at[k] - events[k].kernel_time()).count()) / 1e3;
  }
  template <typename Pred>
  bool wait(Pred pred, std::chrono::milliseconds timeout) {
    std::unique_lock l(mu);
    return cv.wait_for(l, timeout, [&] { return pred(events); });
  }
  Events snapshot() {
    std::lock_guard l(mu);
    return events;
  }
};

/// A predicate for Collector::wait: an event of this type, cgroup and source.
inline auto find_event(EventType t, uint64_t cg, EventSource src = EventSource::Bpf) {
  return [=](const Events& evs) {
    return std::any_of(evs.begin(), evs.end(),
                       [&](const PressureEvent& e) { return e.type == t && e.cgroup_id == cg && e.source == src; });
  };
}

/// Index of the first such event at or after `from`; -1 if none.
inline long index_of(const Events& evs, EventType t, uint64_t cg, EventSource src = EventSource::Bpf,
                     long from = 0) {
  for (auto i = static_cast<std::size_t>(std::max(0L, from)); i < evs.size(); ++i)
    if (evs[i].type == t && evs[i].cgroup_id == cg && evs[i].source == src) return static_cast<long>(i);
  return -1;
}

/// The events, one per line, for failure messages (bounded).
inline std::string describe(const Events& evs) {
  std::string s;
  for (const auto& e : evs) {
    s += std::string(name(e.source)) + "/" + std::string(name(e.type)) + " cg=" + std::to_string(e.cgroup_id) +
         " pid=" + std::to_string(e.pid) + " v=" + std::to_string(e.value) + " w=" + std::to_string(e.watch_id) +
         "\n";
    if (s.size() > 4000) return s + "...";
  }
  return s;
}

/// A reactor running on its own thread, stopped and joined on destruction.
struct RunningReactor {
  std::unique_ptr<Reactor> reactor;
  std::thread thread;
  ~RunningReactor() { stop(); }
  void start(ReactorHandler& h) {
    thread = std::thread([this, &h] { (void)reactor->run(h); });
  }
  void stop() {
    if (thread.joinable()) {
      reactor->stop();
      thread.join();
    }
  }
};

/// Waits for our own child; kills it (SIGKILL) when the bound passes. -1 then.
inline int wait_exit(pid_t pid, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

/// The real prober, with some attach kinds refused: exercises the fallbacks.
class DenyKinds final : public BpfFeatures {
 public:
  DenyKinds(const BpfFeatures& real, std::set<AttachKind> deny) : real_(real), deny_(std::move(deny)) {}
  bool bpf_available() const override { return real_.bpf_available(); }
  bool has_btf_type(std::string_view n) const override { return real_.has_btf_type(n); }
  bool can_attach(AttachKind k, std::string_view t, std::string* why) const override {
    if (deny_.count(k)) {
      if (why) *why = "denied by test";
      return false;
    }
    return real_.can_attach(k, t, why);
  }
  int tracepoint_arity(std::string_view tp) const override { return real_.tracepoint_arity(tp); }
  int function_arity(std::string_view fn) const override { return real_.function_arity(fn); }
  /// Pretend the kernel predates BPF cmpxchg/fetch (5.12): the plain edge flips.
  bool no_atomics = false;
  bool has_atomics() const override { return !no_atomics && real_.has_atomics(); }
  void release_kernel_btf() const override { real_.release_kernel_btf(); }

 private:
  const BpfFeatures& real_;
  std::set<AttachKind> deny_;
};

}  // namespace pressured::events_test
