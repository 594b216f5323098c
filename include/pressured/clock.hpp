#pragma once
// Time as the engine sees it: a monotonic time point supplied by the caller.
// The engine never reads a clock itself, so tests and `simulate` drive time.

#include <chrono>
#include <cstdint>

namespace pressured {

using Duration = std::chrono::nanoseconds;

/// Monotonic time since an arbitrary epoch (CLOCK_MONOTONIC in the daemon,
/// the timeline's `t` in `simulate`). Same clock as bpf_ktime_get_ns().
using TimePoint = std::chrono::time_point<std::chrono::steady_clock, Duration>;

/// Source of the current time, injected where I/O code needs "now".
class Clock {
 public:
  virtual ~Clock() = default;
  /// The current monotonic time.
  virtual TimePoint now() const = 0;
};

/// CLOCK_MONOTONIC.
class MonotonicClock final : public Clock {
 public:
  TimePoint now() const override {
    return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now().time_since_epoch()));
  }
};

}  // namespace pressured
