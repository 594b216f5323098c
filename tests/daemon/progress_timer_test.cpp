// The progress timer: quick ticks only while an eviction is in flight, none
// (or the watchdog's) while idle, read back from the kernel's timerfd.
#include "daemon/progress_timer.hpp"

#include <poll.h>
#include <sys/timerfd.h>

#include <vector>

#include <gtest/gtest.h>

namespace pressured {
namespace {

using namespace std::chrono_literals;

class RecordingLoop final : public EventLoop {
 public:
  Result<void> run(ReactorHandler&) override { return {}; }
  void stop() override {}
  bool post(std::function<void()> task) override {
    posted.push_back(std::move(task));
    return true;
  }
  Result<void> add_source(std::unique_ptr<ReactorSource>) override { return {}; }
  void run_posted() {
    auto tasks = std::move(posted);
    posted.clear();
    for (auto& t : tasks) t();
  }
  std::vector<std::function<void()>> posted;
};

struct Rig {
  RecordingLoop loop;
  bool busy = false;
  int progress = 0;
  int fed = 0;
  std::unique_ptr<ProgressTimer> timer;
  explicit Rig(Duration watchdog = Duration(0)) {
    timer = std::make_unique<ProgressTimer>(loop, 50ms, watchdog,
                                            ProgressTimer::Hooks{
                                                .busy = [this] { return busy; },
                                                .progress = [this] { ++progress; },
                                                .feed_watchdog = [this] { ++fed; },
                                            });
  }
  // What the kernel has armed: {first expiration in, interval}.
  std::pair<Duration, Duration> kernel_timer() const {
    itimerspec its{};
    EXPECT_EQ(::timerfd_gettime(timer->fd(), &its), 0);
    auto d = [](const timespec& t) { return Duration(std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec)); };
    return {d(its.it_value), d(its.it_interval)};
  }
  // Waits (at most 2 s) for the next expiration, then drains it as the loop would.
  bool tick(TimePoint now) {
    pollfd p{timer->fd(), POLLIN, 0};
    if (::poll(&p, 1, 2000) != 1) return false;
    std::vector<PressureEvent> out;
    timer->drain(out, now);
    return true;
  }
};

TimePoint at(double s) { return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s))); }

TEST(ProgressTimer, IdleDaemonWithoutWatchdogHasNoTimerArmed) {
  Rig r;
  ASSERT_GE(r.timer->fd(), 0);
  EXPECT_EQ(r.timer->armed_period(), Duration(0));
  EXPECT_EQ(r.kernel_timer(), std::make_pair(Duration(0), Duration(0))) << "an idle daemon must not wake for progress";
}

TEST(ProgressTimer, AnEvictionInFlightTicksEvery50msAndEachTickPostsAnEvaluation) {
  Rig r;
  r.busy = true;
  r.timer->set_busy(true);
  EXPECT_EQ(r.kernel_timer().second, Duration(50ms));
  ASSERT_TRUE(r.tick(at(1)));
  ASSERT_EQ(r.loop.posted.size(), 1u) << "evaluated after the dispatch, not inside it";
  ASSERT_TRUE(r.tick(at(1.05)));
  EXPECT_EQ(r.loop.posted.size(), 1u) << "one evaluation pending at a time";
  r.loop.run_posted();
  EXPECT_EQ(r.progress, 1);

  r.busy = false;  // the eviction ended: the daemon says so
  r.timer->set_busy(false);
  EXPECT_EQ(r.kernel_timer(), std::make_pair(Duration(0), Duration(0)));
  r.timer->set_busy(true);  // the next eviction
  EXPECT_EQ(r.kernel_timer().second, Duration(50ms)) << "quick ticks must come back with the next eviction";
}

TEST(ProgressTimer, APostedEvaluationIsSkippedWhenTheEvictionEndedMeanwhile) {
  Rig r;
  r.busy = true;
  r.timer->set_busy(true);
  ASSERT_TRUE(r.tick(at(1)));
  r.busy = false;
  r.loop.run_posted();
  EXPECT_EQ(r.progress, 0);
}

TEST(ProgressTimer, ATickThatFindsTheDaemonIdleStopsTheQuickTicks) {
  Rig r;
  r.timer->set_busy(true);  // busy() says false: the end was not reported
  ASSERT_TRUE(r.tick(at(1)));
  EXPECT_TRUE(r.loop.posted.empty());
  EXPECT_EQ(r.timer->armed_period(), Duration(0));
  EXPECT_EQ(r.kernel_timer(), std::make_pair(Duration(0), Duration(0)));
}

TEST(ProgressTimer, TheWatchdogIsFedWhileIdleAndAtHalfItsIntervalWhileBusy) {
  Rig r(400ms);
  EXPECT_EQ(r.kernel_timer().second, Duration(100ms)) << "idle: a quarter of the watchdog's interval";
  ASSERT_TRUE(r.tick(at(1)));
  EXPECT_EQ(r.fed, 1) << "every idle tick feeds it";
  r.busy = true;
  r.timer->set_busy(true);
  EXPECT_EQ(r.kernel_timer().second, Duration(50ms));
  ASSERT_TRUE(r.tick(at(1.05)));
  EXPECT_EQ(r.fed, 1) << "busy: rate-limited to half the interval";
  ASSERT_TRUE(r.tick(at(1.2)));
  EXPECT_EQ(r.fed, 2);
  r.busy = false;
  r.timer->set_busy(false);
  EXPECT_EQ(r.kernel_timer().second, Duration(100ms));
}

}  // namespace
}  // namespace pressured
