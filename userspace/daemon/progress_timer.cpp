#include "daemon/progress_timer.hpp"

#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

namespace pressured {

ProgressTimer::ProgressTimer(EventLoop& loop, Duration period, Duration watchdog, Hooks hooks)
    : loop_(loop), period_(period), watchdog_(watchdog), hooks_(std::move(hooks)) {
  fd_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  if (!fd_) spdlog::warn("progress timer: timerfd_create failed: {}", std::strerror(errno));
  set_busy(false);
}

void ProgressTimer::set_busy(bool busy) {
  quick_ = busy;
  // Idle: a quarter of the watchdog's interval, so that it is fed at least
  // every 3/4 of it, also right after quick ticks that fed it at half.
  arm(busy ? period_ : watchdog_ / 4);
}

void ProgressTimer::arm(Duration period) {
  if (period == armed_ || !fd_) return;
  itimerspec its{};
  const auto ns = period.count();
  its.it_interval.tv_sec = its.it_value.tv_sec = ns / 1000000000;
  its.it_interval.tv_nsec = its.it_value.tv_nsec = ns % 1000000000;
  if (::timerfd_settime(fd_.get(), 0, &its, nullptr) != 0) {
    spdlog::warn("progress timer: timerfd_settime failed: {}", std::strerror(errno));
    return;
  }
  armed_ = period;  // zero: disarmed
}

void ProgressTimer::drain(std::vector<PressureEvent>&, TimePoint now) {
  uint64_t n;
  while (::read(fd_.get(), &n, sizeof n) == sizeof n) {
  }
  if (hooks_.busy()) {
    // Evaluated after this dispatch, not inside it: an evaluation re-arms the
    // watches, which on cgroup v1 replaces eventfd sources the loop is walking.
    if (!pending_) {
      pending_ = loop_.post([this] {
        pending_ = false;
        if (hooks_.busy()) hooks_.progress();
      });
    }
  } else if (quick_) {
    set_busy(false);  // the eviction ended without the daemon saying so
  }
  if (watchdog_.count() > 0 && (!quick_ || now - last_watchdog_ >= watchdog_ / 2)) {
    hooks_.feed_watchdog();
    last_watchdog_ = now;
  }
}

}  // namespace pressured
