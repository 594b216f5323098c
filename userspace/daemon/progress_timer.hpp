#pragma once
// The daemon's progress ticks: every `period` while an eviction is in flight
// (the SIGKILL at the end of a grace period, the victim's exit and the
// release of its memory are seen promptly), none while idle, so that an idle
// daemon wakes only for the safety net and for kernel events. The systemd
// watchdog is fed from these ticks, on the reactor thread (a reactor that
// hangs stops feeding it): while idle they come at a quarter of the
// watchdog's interval when systemd set one.

#include <functional>

#include "kernel/fd.hpp"
#include "pressured/clock.hpp"
#include "pressured/events.hpp"

namespace pressured {

class ProgressTimer final : public ReactorSource {
 public:
  struct Hooks {
    /// Whether an eviction is in flight (Daemon::busy).
    std::function<bool()> busy;
    /// Evaluates now; posted, so it runs after the loop's dispatch.
    std::function<void()> progress;
    /// Tells systemd the reactor is alive (sd_notify WATCHDOG=1).
    std::function<void()> feed_watchdog;
  };

  /// `watchdog`: systemd's watchdog interval, zero when none.
  ProgressTimer(EventLoop& loop, Duration period, Duration watchdog, Hooks hooks);

  /// Quick ticks from now on (an eviction started) or none (the daemon is
  /// idle again). The daemon says so after every evaluation that changed it
  /// (DaemonDeps::on_busy_changed); a tick that finds the daemon idle stops
  /// the quick ticks by itself.
  void set_busy(bool busy);
  /// The period the timer runs at now; zero when it is disarmed.
  Duration armed_period() const { return armed_; }

  // ReactorSource
  int fd() const override { return fd_.get(); }
  uint32_t epoll_events() const override { return 0x001; /* EPOLLIN */ }
  void drain(std::vector<PressureEvent>& out, TimePoint now) override;

 private:
  void arm(Duration period);

  EventLoop& loop_;
  Duration period_;
  Duration watchdog_;
  Hooks hooks_;
  kernel::Fd fd_;
  Duration armed_{0};
  bool quick_ = false;    // ticking every period_ (an eviction in flight)
  bool pending_ = false;  // an evaluation is posted and has not run yet
  TimePoint last_watchdog_{};
};

}  // namespace pressured
