// The reactor: one thread, one epoll over every event source.
#include "events/reactor.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "bpf/bpf_events.hpp"
#include "events/memcg_sources.hpp"
#include "kernel/cgroup_id.hpp"
#include "kernel/fd.hpp"
#include "kernel/file.hpp"
#include "kernel/hot_file.hpp"
#include "kernel/parse.hpp"
#include "pressured/bounded_queue.hpp"
#include "pressured/events.hpp"
#include "psi/psi_trigger.hpp"

namespace pressured {

void abort_off_loop_thread(std::string_view what, std::string_view whose) {
  // stderr too: the log may go to a sink that is not flushed before the abort.
  std::fprintf(stderr, "pressured: %.*s called off %.*s thread: a bug; aborting\n", static_cast<int>(what.size()),
               what.data(), static_cast<int>(whose.size()), whose.data());
  spdlog::critical("{} called off {} thread: a bug; aborting", what, whose);
  std::abort();
}

namespace {

constexpr uint64_t kTimerKey = 1;
constexpr uint64_t kSignalKey = 2;
constexpr uint64_t kWakeKey = 3;
constexpr uint64_t kDeadlineKey = 4;
constexpr uint64_t kFirstSourceKey = 16;

class ReactorImpl final : public Reactor {
 public:
  ReactorImpl(const EventsConfig& config, const ReactorOptions& options, EventStats& stats)
      : config_(config), options_(options), stats_(stats), queue_(options.post_queue_capacity),
        loop_thread_(std::this_thread::get_id()) {}

  bool is_loop_thread() const override { return std::this_thread::get_id() == loop_thread_.load(); }

  ~ReactorImpl() override {
    sources_.clear();
    bpf_source_ = nullptr;
    if (signals_blocked_) pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }

  Result<void> init(const BpfFeatures& features) {
    epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
    if (epoll_.get() < 0) return Error::from_errno(errno, "epoll_create1");

    wake_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (wake_.get() < 0) return Error::from_errno(errno, "eventfd");
    if (auto r = watch_fd(wake_.get(), EPOLLIN, kWakeKey); !r) return r;

    timer_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    if (timer_.get() < 0) return Error::from_errno(errno, "timerfd_create");
    Duration interval = baseline() ? *config_.forced_poll_interval : config_.safety_net_interval;
    if (interval <= Duration::zero()) return Error{EINVAL, "safety-net/forced poll interval must be positive"};
    itimerspec its{};
    its.it_interval.tv_sec = static_cast<time_t>(interval.count() / 1'000'000'000);
    its.it_interval.tv_nsec = static_cast<long>(interval.count() % 1'000'000'000);
    its.it_value = its.it_interval;
    if (::timerfd_settime(timer_.get(), 0, &its, nullptr) != 0) return Error::from_errno(errno, "timerfd_settime");
    if (auto r = watch_fd(timer_.get(), EPOLLIN, kTimerKey); !r) return r;

    deadline_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    if (deadline_.get() < 0) return Error::from_errno(errno, "timerfd_create (deadline)");
    if (auto r = watch_fd(deadline_.get(), EPOLLIN, kDeadlineKey); !r) return r;

    if (options_.handle_signals) {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGTERM);
      sigaddset(&set, SIGINT);
      sigaddset(&set, SIGHUP);
      if (pthread_sigmask(SIG_BLOCK, &set, &old_mask_) != 0) return Error{EINVAL, "pthread_sigmask"};
      signals_blocked_ = true;
      signal_.reset(::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
      if (signal_.get() < 0) return Error::from_errno(errno, "signalfd");
      if (auto r = watch_fd(signal_.get(), EPOLLIN, kSignalKey); !r) return r;
    }

    if (baseline()) {
      stats_.set_bpf_status("baseline mode: forced polling only, no BPF and no kernel notifications");
      spdlog::warn("events: baseline mode, polling every {} ms; BPF and notifications disabled",
                   std::chrono::duration_cast<std::chrono::milliseconds>(interval).count());
      for (std::size_t i = 0; i < kBpfProgramCount; ++i)
        stats_.set_attach(static_cast<BpfProgram>(i), AttachKind::Off, "baseline mode");
      return {};
    }

    setup_bpf(features);
    if (auto r = setup_bpf_result_; !r && config_.bpf == BpfMode::On) return r;

    if (config_.psi_triggers) {
      const std::string psi = options_.psi_dir.empty() ? options_.proc_root + "/pressure" : options_.psi_dir;
      auto t = add_psi_trigger(psi + "/memory", false, config_.psi_stall, config_.psi_window, 0);
      if (!t) spdlog::warn("events: no system PSI trigger: {}", t.error().message);
    }
    return {};
  }

  Result<void> run(ReactorHandler& handler) override {
    loop_thread_ = std::this_thread::get_id();
    if (config_.reactor_nice != 0) {
      auto tid = static_cast<id_t>(::syscall(SYS_gettid));
      if (::setpriority(PRIO_PROCESS, tid, config_.reactor_nice) != 0) {
        spdlog::warn("events: cannot set reactor nice {}: {}", config_.reactor_nice, std::strerror(errno));
      }
    }
    if (config_.reactor_rt_priority > 0) {
      sched_param sp{};
      sp.sched_priority = std::min(99, config_.reactor_rt_priority);
      if (int e = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp); e != 0) {
        spdlog::warn("events: cannot run the reactor SCHED_FIFO {}: {} (needs CAP_SYS_NICE; running SCHED_OTHER, "
                     "detection latency may reach a scheduler tick or more; events.reactorRtPriority: 0 silences this)",
                     sp.sched_priority, std::strerror(e));
      } else {
        spdlog::info("events: reactor thread runs SCHED_FIFO {}", sp.sched_priority);
      }
    }
    std::array<epoll_event, 64> evs{};
    std::vector<PressureEvent> batch;
    batch.reserve(256);
    std::vector<int> signals;
    MonotonicClock clock;
    // After a wakeup that carried BPF records, linger briefly: records the
    // producer wrote with BPF_RB_NO_WAKEUP right after are picked up within
    // kLingerMs instead of at the next safety-net tick.
    constexpr int kLingerMs = 5;
    int timeout = -1;
    while (!stop_.load(std::memory_order_acquire)) {
      int n = ::epoll_wait(epoll_.get(), evs.data(), static_cast<int>(evs.size()), timeout);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Error::from_errno(errno, "epoll_wait");
      }
      TimePoint now = clock.now();
      stats_.wakeups.fetch_add(1, std::memory_order_relaxed);
      batch.clear();
      signals.clear();
      bool tick = false;
      bool deadline_due = false;
      bool posted = false;
      bool linger_drain = n == 0;  // the linger timeout expired
      for (int i = 0; i < n; ++i) {
        uint64_t key = evs[static_cast<std::size_t>(i)].data.u64;
        if (key == kTimerKey) {
          uint64_t expirations;
          (void)!::read(timer_.get(), &expirations, sizeof(expirations));
          tick = true;
        } else if (key == kSignalKey) {
          signalfd_siginfo si{};
          while (::read(signal_.get(), &si, sizeof(si)) == sizeof(si)) signals.push_back(static_cast<int>(si.ssi_signo));
        } else if (key == kDeadlineKey) {
          uint64_t expirations;
          (void)!::read(deadline_.get(), &expirations, sizeof(expirations));
          deadline_due = true;
        } else if (key == kWakeKey) {
          uint64_t v;
          (void)!::read(wake_.get(), &v, sizeof(v));
          posted = true;
        } else if (auto it = sources_.find(key); it != sources_.end()) {
          it->second->drain(batch, now);
        }
      }
      if (tick || linger_drain) {
        // Records written without a wakeup are collected here at the latest.
        for (auto& [key, src] : sources_) {
          if (src->drain_on_tick()) src->drain(batch, now);
        }
      }
      bool from_bpf = std::any_of(batch.begin(), batch.end(),
                                  [](const PressureEvent& e) { return e.source == EventSource::Bpf; });
      timeout = from_bpf ? kLingerMs : -1;
      if (!batch.empty()) dispatch(handler, batch, clock);
      if (posted) run_posted();
      if (deadline_due && !tick) handler.on_deadline(now);  // a tick evaluates anyway
      if (tick) {
        resync_pid_count();  // bounds the drift of the BPF task count
        if (!baseline()) stats_.safety_net_ticks.fetch_add(1, std::memory_order_relaxed);
        handler.on_tick(now, !baseline());
      }
      for (int s : signals) handler.on_signal(s);
    }
    stop_.store(false, std::memory_order_release);
    return {};
  }

  void stop() override {
    stop_.store(true, std::memory_order_release);
    wake();
  }

  bool post(std::function<void()> task) override {
    if (!queue_.try_push(task)) {
      stats_.post_rejected.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    wake();
    return true;
  }

  Result<WatchId> set_watch(const std::string& cgroup_path, uint64_t alarm_bytes) override {
    return set_watch_levels(cgroup_path, alarm_bytes, alarm_bytes);
  }

  Result<WatchId> set_watch_levels(const std::string& cgroup_path, uint64_t alarm_bytes,
                                   uint64_t counter_alarm_bytes) override {
    assert_loop_thread("set_watch_levels");
    std::string path = absolute(cgroup_path);
    auto cgid = kernel::cgroup_id_of(path);
    if (!cgid) return cgid.error();
    WatchId id;
    auto existing = watch_by_path_.find(path);
    if (existing != watch_by_path_.end()) {
      id = existing->second;
    } else {
      id = next_id_++;
    }
    Watch& w = watches_[id];
    w.path = path;
    w.cgroup_id = *cgid;
    w.alarm_bytes = alarm_bytes;
    watch_by_path_[path] = id;
    watch_by_cgroup_[*cgid] = id;

    std::string errors;
    bool armed = false;
    if (bpf_source_) {
      if (auto r = bpf_source_->set_watch(*cgid, counter_alarm_bytes, id); r) {
        armed = true;
      } else {
        errors += r.error().message;
      }
    }
    if (!baseline() && config_.memcg_notifications && !options_.cgroup_v2) {
      if (w.v1_key) remove_source(w.v1_key);
      w.v1_key = 0;
      auto src = events::V1ThresholdSource::open(path, alarm_bytes, *cgid, id);
      if (src) {
        auto key = add_source_key(std::move(*src));
        if (key) {
          w.v1_key = *key;
          armed = true;
        } else {
          errors += (errors.empty() ? "" : "; ") + key.error().message;
        }
      } else {
        errors += (errors.empty() ? "" : "; ") + src.error().message;
      }
    }
    if (!armed && !errors.empty()) {
      (void)clear_watch(id);
      return Error{EIO, "cannot arm " + path + ": " + errors};
    }
    if (!errors.empty()) spdlog::warn("events: watch on {} partly armed: {}", path, errors);
    return id;
  }

  std::optional<uint64_t> watched_counter(const std::string& cgroup_path, Duration max_age) const override {
    if (bpf_source_ == nullptr) return std::nullopt;
    // Only watched cgroups are sampled: their id is known, no stat needed.
    auto w = watch_by_path_.find(absolute(cgroup_path));
    if (w == watch_by_path_.end()) return std::nullopt;
    auto s = bpf_source_->watched_counter(watches_.at(w->second).cgroup_id);
    if (!s || s->age > max_age) return std::nullopt;
    return s->bytes;
  }

  void wake_at(std::optional<TimePoint> deadline) override {
    assert_loop_thread("wake_at");
    itimerspec its{};  // all zero: disarm
    if (deadline) {
      auto ns = std::max<int64_t>(1, deadline->time_since_epoch().count());  // 0 would disarm
      its.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
      its.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    }
    if (::timerfd_settime(deadline_.get(), TFD_TIMER_ABSTIME, &its, nullptr) != 0) {
      spdlog::warn("events: cannot set the deadline timer: {} (the safety net covers it)", std::strerror(errno));
    }
  }

  Result<void> clear_watch(WatchId id) override {
    assert_loop_thread("clear_watch");
    auto it = watches_.find(id);
    if (it == watches_.end()) return Error{ENOENT, "no such watch " + std::to_string(id)};
    if (it->second.v1_key) remove_source(it->second.v1_key);
    if (bpf_source_) (void)bpf_source_->clear_watch(it->second.cgroup_id);
    watch_by_path_.erase(it->second.path);
    watch_by_cgroup_.erase(it->second.cgroup_id);
    watches_.erase(it);
    return {};
  }

  Result<WatchId> add_psi_trigger(const std::string& pressure_file, bool full, Duration stall, Duration window,
                                  uint64_t cgroup_id) override {
    assert_loop_thread("add_psi_trigger");
    WatchId id = next_id_++;
    auto src = psi::PsiTriggerSource::open(pressure_file, full, stall, window, cgroup_id, id);
    if (!src) return src.error();
    auto key = add_source_key(std::move(*src));
    if (!key) return key.error();
    aux_[id] = *key;
    return id;
  }

  Result<void> remove_psi_trigger(WatchId id) override { return remove_aux(id); }

  Result<WatchId> add_memory_events_watch(const std::string& cgroup_path) override {
    assert_loop_thread("add_memory_events_watch");
    std::string path = absolute(cgroup_path);
    auto cgid = kernel::cgroup_id_of(path);
    if (!cgid) return cgid.error();
    WatchId id = next_id_++;
    auto src = events::MemoryEventsSource::open(path + "/memory.events", *cgid, id);
    if (!src) return src.error();
    auto key = add_source_key(std::move(*src));
    if (!key) return key.error();
    aux_[id] = *key;
    return id;
  }

  Result<void> remove_memory_events_watch(WatchId id) override { return remove_aux(id); }

  Result<void> add_source(std::unique_ptr<ReactorSource> source) override {
    assert_loop_thread("add_source");
    auto key = add_source_key(std::move(source));
    if (!key) return key.error();
    return {};
  }

  bool bpf_active() const override { return bpf_source_ != nullptr; }

  std::shared_ptr<PageCounterReader> page_counter_reader() const override {
    return bpf_source_ ? bpf_source_->page_counter_reader() : nullptr;
  }

  Result<uint64_t> track_memcg(const std::string& cgroup_path) override {
    assert_loop_thread("track_memcg");
    if (bpf_source_ == nullptr) return Error{ENOTSUP, "memcg activity tracking needs BPF (not active)"};
    std::string path = absolute(cgroup_path);
    auto cgid = kernel::cgroup_id_of(path);
    if (!cgid) return cgid.error();
    if (auto r = bpf_source_->track_memcg(*cgid); !r) return Error{r.error().code, path + ": " + r.error().message};
    return *cgid;
  }

  Result<void> untrack_memcg(uint64_t cgroup_id) override {
    assert_loop_thread("untrack_memcg");
    if (bpf_source_ == nullptr) return Error{ENOTSUP, "memcg activity tracking needs BPF (not active)"};
    return bpf_source_->untrack_memcg(cgroup_id);
  }

  std::optional<MemcgActivity> memcg_activity(uint64_t cgroup_id) const override {
    if (bpf_source_ == nullptr) return std::nullopt;
    return bpf_source_->memcg_activity(cgroup_id);
  }
  bool memcg_activities(std::vector<std::pair<uint64_t, MemcgActivity>>& out) const override {
    out.clear();
    return bpf_source_ != nullptr && bpf_source_->memcg_activities(out);
  }

  Result<void> set_pid_alarm(uint64_t tasks) override {
    assert_loop_thread("set_pid_alarm");
    if (bpf_source_ == nullptr || !bpf_source_->pid_count_active())
      return Error{ENOTSUP, "PID alarm needs the BPF task fork/free hooks (not attached)"};
    auto now = read_task_count();
    if (!now) return now.error();
    return bpf_source_->set_pid_alarm(tasks, *now);
  }

 private:
  /// The node task count as pid.available counts it: the total of
  /// <proc>/loadavg's "running/total" field.
  /// Read through a kept-open fd: it is re-read on every safety-net tick.
  Result<uint64_t> read_task_count() {
    if (loadavg_.path().empty()) loadavg_.reset(options_.proc_root + "/loadavg");
    auto text = loadavg_.read(loadavg_buf_);
    if (!text) return text.error();
    auto total = kernel::parse_loadavg_tasks(*text);
    if (!total) return Error{total.error().code, loadavg_.path() + ": " + total.error().message};
    return *total;
  }

  void resync_pid_count() {
    if (bpf_source_ == nullptr || !bpf_source_->pid_count_active()) return;
    if (auto n = read_task_count()) bpf_source_->seed_pid_count(*n);
  }

  struct Watch {
    std::string path;
    uint64_t cgroup_id = 0;
    uint64_t alarm_bytes = 0;
    uint64_t v1_key = 0;
  };

  bool baseline() const { return config_.forced_poll_interval.has_value(); }

  std::string absolute(const std::string& p) const {
    if (!p.empty() && p[0] == '/') return p;
    return options_.memory_mount + "/" + p;
  }

  void setup_bpf(const BpfFeatures& features) {
    if (config_.bpf == BpfMode::Off) {
      stats_.set_bpf_status("BPF disabled by configuration; running on kernel notifications and polling");
      for (std::size_t i = 0; i < kBpfProgramCount; ++i)
        stats_.set_attach(static_cast<BpfProgram>(i), AttachKind::Off, "disabled by configuration");
      spdlog::warn("events: BPF disabled by configuration; using PSI/memcg notifications and the {} ms safety net",
                   std::chrono::duration_cast<std::chrono::milliseconds>(config_.safety_net_interval).count());
      return;
    }
    bpf::BpfEventsOptions o;
    o.ring_bytes = config_.ring_buffer_bytes;
    o.sample_every = config_.charge_sample_every;
    o.target_hierarchy = options_.cgroup_v2 ? 0 : bpf::memory_hierarchy_id(options_.proc_root);
    auto src = bpf::BpfEventSource::create(o, features, stats_);
    if (!src) {
      setup_bpf_result_ = src.error();
      stats_.set_bpf_status("BPF unavailable: " + src.error().message + "; running on notifications and polling");
      spdlog::warn("events: BPF unavailable ({}); running on PSI/memcg notifications and the safety-net poll",
                   src.error().message);
      return;
    }
    bpf_source_ = src->get();
    auto key = add_source_key(std::move(*src));
    if (!key) {
      bpf_source_ = nullptr;
      setup_bpf_result_ = key.error();
      return;
    }
    stats_.set_bpf_status("BPF active");
  }

  Result<void> watch_fd(int fd, uint32_t events, uint64_t key) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = key;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return Error::from_errno(errno, "epoll_ctl ADD");
    return {};
  }

  Result<uint64_t> add_source_key(std::unique_ptr<ReactorSource> src) {
    uint64_t key = next_key_++;
    if (auto r = watch_fd(src->fd(), src->epoll_events(), key); !r) return r.error();
    sources_.emplace(key, std::move(src));
    return key;
  }

  void remove_source(uint64_t key) {
    auto it = sources_.find(key);
    if (it == sources_.end()) return;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second->fd(), nullptr);
    if (it->second.get() == bpf_source_) bpf_source_ = nullptr;
    sources_.erase(it);
  }

  Result<void> remove_aux(WatchId id) {
    auto it = aux_.find(id);
    if (it == aux_.end()) return Error{ENOENT, "no such trigger " + std::to_string(id)};
    remove_source(it->second);
    aux_.erase(it);
    return {};
  }

  void dispatch(ReactorHandler& handler, std::vector<PressureEvent>& batch, const MonotonicClock& clock) {
    TimePoint at = clock.now();
    for (auto& e : batch) {
      if (e.source == EventSource::Bpf && (e.type == EventType::ThresholdUp || e.type == EventType::ThresholdDown)) {
        auto w = watch_by_cgroup_.find(e.cgroup_id);
        if (w != watch_by_cgroup_.end()) e.watch_id = w->second;
      }
      stats_.count_event(e.source, e.type);
      if (e.source == EventSource::Bpf && e.type != EventType::RingBufferOverflow && e.kernel_ns != 0)
        stats_.record_latency(at - e.kernel_time());
    }
    handler.on_events(batch, at);
  }

  void run_posted() {
    // Bounded: what is in the queue now, so a busy producer cannot starve the loop.
    for (std::size_t i = 0; i < queue_.capacity(); ++i) {
      auto task = queue_.try_pop();
      if (!task) break;
      stats_.posted.fetch_add(1, std::memory_order_relaxed);
      if (*task) (*task)();
    }
    // More may have arrived: make sure we come back.
    if (auto more = queue_.try_pop()) {
      stats_.posted.fetch_add(1, std::memory_order_relaxed);
      if (*more) (*more)();
      wake();
    }
  }

  void wake() {
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof(one));
  }

  EventsConfig config_;
  ReactorOptions options_;
  EventStats& stats_;
  BoundedQueue<std::function<void()>> queue_;
  // The thread that may call the methods other than stop() and post(): the
  // builder's until run() starts, then run()'s. A call from elsewhere would
  // race with the loop over epoll, the timers and the BPF maps.
  std::atomic<std::thread::id> loop_thread_;

  void assert_loop_thread(const char* method) const {
    if (!is_loop_thread()) abort_off_loop_thread(std::string("Reactor::") + method, "the reactor");
  }
  kernel::Fd epoll_, wake_, timer_, signal_, deadline_;
  kernel::HotFile loadavg_;  // <proc>/loadavg, the node task count
  std::string loadavg_buf_;
  sigset_t old_mask_{};
  bool signals_blocked_ = false;
  std::atomic<bool> stop_{false};
  std::unordered_map<uint64_t, std::unique_ptr<ReactorSource>> sources_;
  bpf::BpfEventSource* bpf_source_ = nullptr;
  Result<void> setup_bpf_result_;
  uint64_t next_key_ = kFirstSourceKey;
  WatchId next_id_ = 1;
  std::unordered_map<WatchId, Watch> watches_;
  std::unordered_map<std::string, WatchId> watch_by_path_;
  std::unordered_map<uint64_t, WatchId> watch_by_cgroup_;
  std::unordered_map<WatchId, uint64_t> aux_;
};

}  // namespace

Result<std::unique_ptr<Reactor>> Reactor::create(const EventsConfig& config, const ReactorOptions& options,
                                                 const BpfFeatures& features, EventStats& stats) {
  auto r = std::make_unique<ReactorImpl>(config, options, stats);
  if (auto ok = r->init(features); !ok) return ok.error();
  return std::unique_ptr<Reactor>(std::move(r));
}

}  // namespace pressured
