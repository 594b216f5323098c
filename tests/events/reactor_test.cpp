// The reactor with fake fds (eventfds standing in for kernel sources), the
// overflow -> resync path, and the pure parts of memory.events.
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "bpf/bpf_events.hpp"
#include "events/memcg_sources.hpp"
#include "events/reactor.hpp"
#include "fakes/no_bpf.hpp"
#include "kernel/parse.hpp"
#include "metrics/exposition.hpp"
#include "pressured/events.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;

using pressured::testing::exported;
using pressured::testing::NoBpf;

// A fake kernel source: an eventfd; each write of N yields N events of `type`.
class FakeSource final : public ReactorSource {
 public:
  explicit FakeSource(EventType type, bool tick_drain = false) : type_(type), tick_drain_(tick_drain) {
    fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  }
  ~FakeSource() override { ::close(fd_); }
  int fd() const override { return fd_; }
  uint32_t epoll_events() const override { return EPOLLIN; }
  bool drain_on_tick() const override { return tick_drain_; }
  void drain(std::vector<PressureEvent>& out, TimePoint now) override {
    uint64_t n = 0;
    if (::read(fd_, &n, sizeof(n)) != sizeof(n)) return;
    for (uint64_t i = 0; i < n; ++i) {
      PressureEvent e;
      e.source = EventSource::Bpf;
      e.type = type_;
      e.cgroup_id = 42;
      e.value = static_cast<int64_t>(i);
      e.kernel_ns = static_cast<uint64_t>(now.time_since_epoch().count()) - 1000;
      out.push_back(e);
    }
  }
  int raw_fd() const { return fd_; }

 private:
  int fd_;
  EventType type_;
  bool tick_drain_;
};

struct Recorder final : public ReactorHandler {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<PressureEvent> events;
  std::vector<std::size_t> batch_sizes;
  int ticks = 0;
  int safety_ticks = 0;
  std::vector<int> signals;
  std::function<void()> on_first_event;

  void on_events(std::span<const PressureEvent> evs, TimePoint) override {
    std::lock_guard l(mu);
    events.insert(events.end(), evs.begin(), evs.end());
    batch_sizes.push_back(evs.size());
    cv.notify_all();
  }
  void on_tick(TimePoint, bool safety_net) override {
    std::lock_guard l(mu);
    ++ticks;
    if (safety_net) ++safety_ticks;
    cv.notify_all();
  }
  void on_signal(int signo) override {
    std::lock_guard l(mu);
    signals.push_back(signo);
    cv.notify_all();
  }
  std::vector<TimePoint> deadlines;
  void on_deadline(TimePoint now) override {
    std::lock_guard l(mu);
    deadlines.push_back(now);
    cv.notify_all();
  }
  template <typename Pred>
  bool wait(Pred pred, std::chrono::milliseconds timeout = 5000ms) {
    std::unique_lock l(mu);
    return cv.wait_for(l, timeout, [&] { return pred(); });
  }
};

EventsConfig quiet_config() {
  EventsConfig c;
  c.bpf = BpfMode::Off;
  c.psi_triggers = false;
  c.memcg_notifications = false;
  c.safety_net_interval = 10s;
  return c;
}

ReactorOptions no_signals() {
  ReactorOptions o;
  o.handle_signals = false;
  return o;
}

struct Running {
  std::unique_ptr<Reactor> reactor;
  std::thread thread;
  Result<void> result;
  ~Running() {
    if (thread.joinable()) {
      reactor->stop();
      thread.join();
    }
  }
  void start(Recorder& h) {
    thread = std::thread([this, &h] { result = reactor->run(h); });
  }
};

TEST(Reactor, DeliversFakeSourceEventsInOneBatch) {
  EventStats stats;
  NoBpf nobpf;
  auto r = Reactor::create(quiet_config(), no_signals(), nobpf, stats);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE((*r)->bpf_active());
  auto src = std::make_unique<FakeSource>(EventType::ThresholdUp);
  int fd = src->raw_fd();
  ASSERT_TRUE((*r)->add_source(std::move(src)));
  Recorder h;
  Running run{std::move(*r)};
  run.start(h);
  uint64_t five = 5;
  ASSERT_EQ(::write(fd, &five, sizeof(five)), 8);
  ASSERT_TRUE(h.wait([&] { return h.events.size() >= 5; }));
  {
    std::lock_guard l(h.mu);
    EXPECT_EQ(h.batch_sizes.front(), 5u);
    for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(h.events[i].value, static_cast<int64_t>(i));
  }
  EXPECT_EQ(exported(stats, "pressured_events_total", {{"type", "threshold_up"}}), 5);
  EXPECT_EQ(exported(stats, "pressured_events_total", {{"source", "bpf"}}), 5);
  EXPECT_EQ(stats.latency_count.load(), 5u);
  EXPECT_NE(stats.bpf_status().find("disabled"), std::string::npos);
  run.reactor->stop();
  run.thread.join();
  EXPECT_TRUE(run.result.ok());
}

TEST(Reactor, PostRunsTasksOnReactorThreadFromManyThreads) {
  EventStats stats;
  NoBpf nobpf;
  auto r = Reactor::create(quiet_config(), no_signals(), nobpf, stats);
  ASSERT_TRUE(r);
  Recorder h;
  Running run{std::move(*r)};
  std::atomic<std::thread::id> reactor_id{};
  std::atomic<int> ran{0};
  std::atomic<bool> wrong_thread{false};
  run.start(h);
  run.reactor->post([&] { reactor_id = std::this_thread::get_id(); });
  for (int i = 0; i < 5000 && reactor_id.load() == std::thread::id{}; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_NE(reactor_id.load(), std::thread::id{});
  std::vector<std::thread> workers;
  constexpr int kPerWorker = 2000;
  for (int w = 0; w < 3; ++w) {
    workers.emplace_back([&] {
      for (int i = 0; i < kPerWorker; ++i) {
        while (!run.reactor->post([&] {
          if (std::this_thread::get_id() != reactor_id.load()) wrong_thread = true;
          ran.fetch_add(1);
        }))
          std::this_thread::yield();
      }
    });
  }
  for (auto& t : workers) t.join();
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (ran.load() < 3 * kPerWorker && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(ran.load(), 3 * kPerWorker);
  EXPECT_FALSE(wrong_thread.load());
  EXPECT_EQ(exported(stats, "pressured_reactor_posted_tasks_total", {{"result", "run"}}), 3 * kPerWorker + 1);
}

TEST(Reactor, SafetyNetTicksAndDrainsTickSources) {
  EventStats stats;
  NoBpf nobpf;
  auto cfg = quiet_config();
  cfg.safety_net_interval = 20ms;
  auto r = Reactor::create(cfg, no_signals(), nobpf, stats);
  ASSERT_TRUE(r);
  // A source whose fd never becomes ready is still drained by the tick (as the ring buffer
  // is after BPF_RB_NO_WAKEUP records).
  class Silent final : public ReactorSource {
   public:
    Silent() { fd_ = ::eventfd(0, EFD_CLOEXEC); }
    ~Silent() override { ::close(fd_); }
    int fd() const override { return fd_; }
    uint32_t epoll_events() const override { return EPOLLIN; }
    bool drain_on_tick() const override { return true; }
    void drain(std::vector<PressureEvent>& out, TimePoint now) override {
      PressureEvent e;
      e.type = EventType::KswapdWakeup;
      e.kernel_ns = static_cast<uint64_t>(now.time_since_epoch().count());
      out.push_back(e);
    }
    int fd_;
  };
  ASSERT_TRUE((*r)->add_source(std::make_unique<Silent>()));
  Recorder h;
  Running run{std::move(*r)};
  run.start(h);
  ASSERT_TRUE(h.wait([&] { return h.safety_ticks >= 3 && h.events.size() >= 3; }));
  EXPECT_GE(exported(stats, "pressured_safety_net_polls_total").value_or(0), 3);
}

TEST(Reactor, DeadlineWakesTheHandlerAndCanBeCancelled) {
  EventStats stats;
  NoBpf nobpf;
  auto r = Reactor::create(quiet_config(), no_signals(), nobpf, stats);  // safety net 10 s: out of the way
  ASSERT_TRUE(r);
  MonotonicClock clock;
  (*r)->wake_at(clock.now() + 30ms);
  (*r)->wake_at(std::nullopt);  // cancelled before it comes
  Recorder h;
  Running run{std::move(*r)};
  run.start(h);
  // The cancelled deadline was due before this one: had it survived, it
  // would have woken the handler first.
  const TimePoint due = clock.now() + 40ms;
  ASSERT_TRUE(run.reactor->post([&] { run.reactor->wake_at(due); }));
  ASSERT_TRUE(h.wait([&] { return !h.deadlines.empty(); }, 10000ms));
  std::lock_guard l(h.mu);
  ASSERT_EQ(h.deadlines.size(), 1u) << "the cancelled deadline fired";
  EXPECT_GE(h.deadlines[0], due) << "fired early";
  EXPECT_EQ(h.ticks, 0) << "a deadline is not a tick";
}

TEST(Reactor, KnowsItsThreadBeforeAndAfterRunStarts) {
  EventStats stats;
  NoBpf nobpf;
  auto r = Reactor::create(quiet_config(), no_signals(), nobpf, stats);
  ASSERT_TRUE(r);
  EXPECT_TRUE((*r)->is_loop_thread()) << "before run(): the builder's thread sets it up";
  Recorder h;
  Running run{std::move(*r)};
  run.start(h);
  std::atomic<int> on_loop{-1};
  ASSERT_TRUE(run.reactor->post([&] { on_loop = run.reactor->is_loop_thread() ? 1 : 0; }));
  for (int i = 0; i < 2000 && on_loop.load() == -1; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(on_loop.load(), 1);
  EXPECT_FALSE(run.reactor->is_loop_thread()) << "once run() runs elsewhere, this thread is not the loop's";
}

TEST(ReactorDeathTest, AlarmCallsOffTheLoopThreadAbortWithAMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        EventStats stats;
        NoBpf nobpf;
        auto r = Reactor::create(quiet_config(), no_signals(), nobpf, stats);
        if (!r) std::exit(0);  // no death: the test fails
        Recorder h;
        Running run{std::move(*r)};
        run.start(h);
        std::atomic<bool> running{false};
        (void)run.reactor->post([&] { running = true; });
        for (int i = 0; i < 2000 && !running; ++i) std::this_thread::sleep_for(1ms);
        (void)run.reactor->wake_at(std::nullopt);
        std::exit(0);
      },
      "Reactor::wake_at called off the reactor thread");
}

TEST(Reactor, BaselineModeForcedPollOnly) {
  EventStats stats;
  NoBpf nobpf;
  auto cfg = quiet_config();
  cfg.bpf = BpfMode::Auto;
  cfg.psi_triggers = true;
  cfg.forced_poll_interval = 15ms;
  auto r = Reactor::create(cfg, no_signals(), nobpf, stats);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE((*r)->bpf_active());
  Recorder h;
  Running run{std::move(*r)};
  run.start(h);
  ASSERT_TRUE(h.wait([&] { return h.ticks >= 3; }));
  std::lock_guard l(h.mu);
  EXPECT_EQ(h.safety_ticks, 0) << "baseline ticks are forced polls, not safety nets";
  EXPECT_NE(stats.bpf_status().find("baseline"), std::string::npos);
}

TEST(Reactor, BpfOnButUnavailableIsAnError) {
  EventStats stats;
  NoBpf nobpf;
  auto cfg = quiet_config();
  cfg.bpf = BpfMode::On;
  auto r = Reactor::create(cfg, no_signals(), nobpf, stats);
  EXPECT_FALSE(r.ok());
  cfg.bpf = BpfMode::Auto;  // Auto degrades and says so
  auto r2 = Reactor::create(cfg, no_signals(), nobpf, stats);
  ASSERT_TRUE(r2.ok());
  EXPECT_NE(stats.bpf_status().find("unavailable"), std::string::npos);
  EXPECT_EQ(stats.attach[0].load(), static_cast<uint8_t>(AttachKind::Off));
}

TEST(Reactor, SignalsArriveThroughSignalfd) {
  EventStats stats;
  NoBpf nobpf;
  ReactorOptions o;
  o.handle_signals = true;
  std::unique_ptr<Reactor> reactor;
  Recorder h;
  // Create and run the reactor on its own thread so only that thread has the signals blocked;
  // direct the signal at that thread.
  std::atomic<pthread_t> tid{};
  std::atomic<bool> ready{false};
  std::thread t([&] {
    auto r = Reactor::create(quiet_config(), o, nobpf, stats);
    if (!r) return;
    reactor = std::move(*r);
    tid = pthread_self();
    ready = true;
    (void)reactor->run(h);
    reactor.reset();  // restores the signal mask of this thread
  });
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!ready && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(ready.load());
  pthread_kill(tid.load(), SIGHUP);
  EXPECT_TRUE(h.wait([&] { return !h.signals.empty(); }));
  reactor->stop();
  t.join();
  ASSERT_EQ(h.signals.size(), 1u);
  EXPECT_EQ(h.signals[0], SIGHUP);
}

TEST(Reactor, WatchOnMissingCgroupIsAClearError) {
  EventStats stats;
  NoBpf nobpf;
  ReactorOptions o = no_signals();
  o.memory_mount = "/nonexistent-cgroup-mount";
  auto r = Reactor::create(quiet_config(), o, nobpf, stats);
  ASSERT_TRUE(r);
  auto w = (*r)->set_watch("kubepods", 1 << 20);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("/nonexistent-cgroup-mount/kubepods"), std::string::npos) << w.error().message;
  EXPECT_FALSE((*r)->clear_watch(12345).ok());
  EXPECT_FALSE((*r)->remove_psi_trigger(999).ok());
}

// ---- overflow -> resync ----------------------------------------------------

TEST(Overflow, DropCounterIncreaseYieldsOverflowAndResync) {
  EventStats stats;
  std::vector<PressureEvent> out;
  uint64_t seen = 0;
  TimePoint now(Duration(1'000'000));
  EXPECT_EQ(bpf::account_drops(0, seen, stats, out, now), 0u);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(bpf::account_drops(7, seen, stats, out, now), 7u);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].type, EventType::RingBufferOverflow);
  EXPECT_EQ(out[0].value, 7);
  EXPECT_EQ(out[1].type, EventType::Resync);
  EXPECT_EQ(out[1].source, EventSource::Resync);
  EXPECT_EQ(exported(stats, "pressured_ring_buffer_dropped_events_total"), 7);
  EXPECT_EQ(exported(stats, "pressured_resyncs_total", {{"reason", "ring_buffer_overflow"}}), 1);
  out.clear();
  EXPECT_EQ(bpf::account_drops(7, seen, stats, out, now), 0u) << "no new loss, no resync";
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(bpf::account_drops(10, seen, stats, out, now), 3u);
  EXPECT_EQ(exported(stats, "pressured_resyncs_total", {{"reason", "ring_buffer_overflow"}}), 2);
  EXPECT_EQ(exported(stats, "pressured_ring_buffer_dropped_events_total"), 10);
}

TEST(Overflow, RecordConversionKeepsFields) {
  pressured_event rec{};
  rec.ts_ns = 123;
  rec.cgroup_id = 456;
  rec.value = -5;
  rec.pid = 77;
  rec.cpu = 1;
  rec.type = PRESSURED_EV_OOM_VICTIM;
  auto e = bpf::to_event(rec);
  EXPECT_EQ(e.type, EventType::OomVictim);
  EXPECT_EQ(e.source, EventSource::Bpf);
  EXPECT_EQ(e.kernel_ns, 123u);
  EXPECT_EQ(e.cgroup_id, 456u);
  EXPECT_EQ(e.value, -5);
  EXPECT_EQ(e.pid, 77u);
}

// ---- memory.events (pure) ----------------------------------------------------

TEST(MemoryEvents, DiffYieldsOneEventPerIncreasedCounter) {
  auto before = kernel::parse_memory_events("low 0\nhigh 3\nmax 1\noom 0\noom_kill 0\noom_group_kill 0\n");
  auto after = kernel::parse_memory_events("low 5\nhigh 10\nmax 1\noom 1\noom_kill 1\noom_group_kill 0\n");
  ASSERT_TRUE(before && after);
  EXPECT_EQ(before->high, 3u);
  std::vector<PressureEvent> out;
  events::memory_events_diff(*before, *after, 9, 4, TimePoint{}, out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].type, EventType::MemoryEventHigh);
  EXPECT_EQ(out[0].value, 7);
  EXPECT_EQ(out[1].type, EventType::MemoryEventOom);
  EXPECT_EQ(out[2].type, EventType::MemoryEventOomKill);
  for (const auto& e : out) {
    EXPECT_EQ(e.cgroup_id, 9u);
    EXPECT_EQ(e.watch_id, 4u);
    EXPECT_EQ(e.source, EventSource::MemoryEventsV2);
  }
  EXPECT_FALSE(kernel::parse_memory_events("garbage\nhigh x\n"));
}

// The v2 memory.events source on a plain file (the host has no v2 memory
// controller; the vmtests drive it on real cgroups): the first read is the
// baseline, each drain re-reads from offset 0 and reports the increases, and
// a file that is not memory.events is refused naming the path.
TEST(MemoryEvents, SourceReadsThroughItsKeptFd) {
  char tmpl[] = "/tmp/pressured-memory-events-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string file = dir + "/memory.events";
  auto write = [&](const std::string& text) {
    FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
  };
  write("low 0\nhigh 3\nmax 1\noom 0\noom_kill 0\noom_group_kill 0\n");
  auto src = events::MemoryEventsSource::open(file, 9, 4);
  ASSERT_TRUE(src) << src.error().message;
  std::vector<PressureEvent> out;
  (*src)->drain(out, TimePoint{});
  EXPECT_TRUE(out.empty()) << "nothing changed since the baseline";
  write("low 0\nhigh 5\nmax 1\noom 0\noom_kill 2\noom_group_kill 0\n");
  (*src)->drain(out, TimePoint{});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].type, EventType::MemoryEventHigh);
  EXPECT_EQ(out[0].value, 2);
  EXPECT_EQ(out[1].type, EventType::MemoryEventOomKill);
  EXPECT_EQ(out[1].value, 2);
  out.clear();
  write("garbage\n");  // a read that is not memory.events yields nothing ...
  (*src)->drain(out, TimePoint{});
  EXPECT_TRUE(out.empty());
  write("low 0\nhigh 6\nmax 1\noom 0\noom_kill 2\noom_group_kill 0\n");
  (*src)->drain(out, TimePoint{});  // ... and the next good one is diffed against the last good one
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, EventType::MemoryEventHigh);
  EXPECT_EQ(out[0].value, 1);
  src->reset();

  write("high 1\n");
  auto bad = events::MemoryEventsSource::open(file, 9, 4);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find(file), std::string::npos) << bad.error().message;
  auto missing = events::MemoryEventsSource::open(dir + "/missing", 9, 4);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find(dir + "/missing"), std::string::npos) << missing.error().message;
  std::remove(file.c_str());
  ::rmdir(dir.c_str());
}

TEST(EventStats, LatencyBuckets) {
  EventStats s;
  s.record_latency(5us);
  s.record_latency(300us);
  s.record_latency(5s);
  EXPECT_EQ(s.latency_buckets[0].load(), 1u);
  EXPECT_EQ(s.latency_buckets[5].load(), 1u);  // <= 500us
  EXPECT_EQ(s.latency_buckets.back().load(), 1u);
  EXPECT_EQ(s.latency_count.load(), 3u);
}

}  // namespace
}  // namespace pressured
