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

/// Longest grace period a Duration carries: a century. A pod may ask for
/// terminationGracePeriodSeconds up to INT64_MAX, which as nanoseconds (or
/// added to a time point) overflows; a century still leaves room to add a
/// monotonic "now" and any timeout to it.
inline constexpr int64_t kMaxGraceSeconds = int64_t{100} * 366 * 24 * 3600;

/// `seconds` as a Duration, saturated to [0, kMaxGraceSeconds] without
/// overflow (a negative grace period is none).
constexpr Duration grace_duration(int64_t seconds) {
  if (seconds <= 0) return Duration::zero();
  return std::chrono::seconds(seconds < kMaxGraceSeconds ? seconds : kMaxGraceSeconds);
}

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
